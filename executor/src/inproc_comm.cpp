// In-process Comm for tests: N threads act as N ranks, meeting at rendezvous slots in shared host memory.
#include "tessel/exec/inproc_comm.hpp"

#include "comm_text.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

namespace tessel::exec {

namespace {

using Clock = std::chrono::steady_clock;
using detail::deadlineAfter;
using detail::rankList;
using detail::secondsText;

std::string typeName(ElementType t) { return toString(t); }

// What one member asked for at a sequence number; every member of a collective must ask the same.
struct Signature {
    std::string call;
    int64_t bytes = 0;
    std::string type;       // "f64", "f32", "bf16"
    int root = -1;          // broadcast only
    bool operator==(const Signature&) const = default;
};

std::string describe(const Signature& s) {
    std::string d = s.call + " of " + std::to_string(s.bytes) + " bytes (" + s.type + ")";
    if (s.root >= 0) d += " from root index " + std::to_string(s.root);
    return d;
}

// One collective call of one group: members deposit their input, wait for all, read, wait for all reads.
struct Slot {
    Signature signature;
    bool hasSignature = false;
    int signatureRank = -1;                 // world rank that set the signature
    std::vector<const void*> inputs;        // by group index
    std::vector<char> present;              // by group index: deposited and waiting or reading
    std::vector<char> gaveUp;               // by group index: arrived, then left on an error
    int arrived = 0;
    int doneReading = 0;
    int left = 0;
    std::string error;                      // sticky: set on a mismatch or when a member gave up
};

struct Message {
    std::vector<unsigned char> bytes;
    ElementType type = ElementType::F64;
};

std::string groupKey(const Group& g) { return g.name + rankList(g.ranks); }

void checkDefined(const Tensor& t, const std::string& where, const char* what) {
    if (!t.defined()) throw CommError(where + ": " + what + " tensor is undefined");
}

int64_t byteCount(const Tensor& t) { return t.numel() * elementBytes(t.type()); }

// out[i] = sum over members j (in group order) of inputs[j][offset + i], for i in [0, count).
template <typename T>
void sumInGroupOrder(const std::vector<const void*>& inputs, int64_t offset, int64_t count, T* out) {
    const T* first = static_cast<const T*>(inputs[0]) + offset;
    std::copy(first, first + count, out);
    for (size_t j = 1; j < inputs.size(); ++j) {
        const T* in = static_cast<const T*>(inputs[j]) + offset;
        for (int64_t i = 0; i < count; ++i) out[i] += in[i];
    }
}


// bf16 sums accumulate in fp32 in group order and are rounded to bf16 once, as the staged GPU comm and the
// MPI comm do (summing in bf16 would round after every member and make the result depend on the group size
// more than it must).
void sumBf16InGroupOrder(const std::vector<const void*>& inputs, int64_t offset, int64_t count, uint16_t* out) {
    std::vector<float> sum(static_cast<size_t>(count));
    const uint16_t* first = static_cast<const uint16_t*>(inputs[0]) + offset;
    for (int64_t i = 0; i < count; ++i) sum[static_cast<size_t>(i)] = widenBf16(first[i]);
    for (size_t j = 1; j < inputs.size(); ++j) {
        const uint16_t* in = static_cast<const uint16_t*>(inputs[j]) + offset;
        for (int64_t i = 0; i < count; ++i) sum[static_cast<size_t>(i)] += widenBf16(in[i]);
    }
    for (int64_t i = 0; i < count; ++i) out[i] = narrowToBf16(sum[static_cast<size_t>(i)]);
}

void sumInGroupOrder(ElementType type, const std::vector<const void*>& inputs, int64_t offset, int64_t count,
                     void* out) {
    switch (type) {
    case ElementType::F64: sumInGroupOrder(inputs, offset, count, static_cast<double*>(out)); return;
    case ElementType::F32: sumInGroupOrder(inputs, offset, count, static_cast<float*>(out)); return;
    case ElementType::Bf16: sumBf16InGroupOrder(inputs, offset, count, static_cast<uint16_t*>(out)); return;
    }
}

} // namespace

// Shared state of the ranks of one process: failures, collective slots and point-to-point mailboxes, all
// guarded by one mutex (the world is small and only used by tests, so one lock keeps the reasoning simple).
class InProcessWorld {
public:
    explicit InProcessWorld(int size)
        : worldSize(size), failures(static_cast<size_t>(size)), failureOrder(static_cast<size_t>(size), 0) {}

    const int worldSize;
    std::mutex mutex;
    std::condition_variable changed;                                        // notified on every state change
    std::vector<std::optional<std::string>> failures;                       // by world rank
    std::vector<int64_t> failureOrder;                                      // by world rank: 1 = failed first
    int64_t failureCount = 0;
    std::map<std::pair<std::string, int64_t>, Slot> slots;                  // (group key, sequence number)
    std::map<std::tuple<int, int, int>, std::deque<Message>> mailboxes;     // (source, destination, tag)
};

namespace {

class InProcessComm final : public Comm {
public:
    InProcessComm(std::shared_ptr<InProcessWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}

    int rank() const override { return rank_; }
    int worldSize() const override { return world_->worldSize; }
    std::string name() const override { return "inproc"; }

    void createGroup(const Group& g) override { checkGroup(g, "createGroup"); }

    void allReduce(Tensor& inout, const Group& g) override {
        const std::string where = prefix(g, "allReduce", peekSequence(g));
        checkDefined(inout, where, "inout");
        const int64_t bytes = byteCount(inout);
        std::vector<unsigned char> result(static_cast<size_t>(bytes));
        collective(g, {"allReduce", bytes, typeName(inout.type())}, inout.data<void>(),
                   [&](const std::vector<const void*>& inputs) {
                       sumInGroupOrder(inout.type(), inputs, 0, inout.numel(), result.data());
                   });
        std::memcpy(inout.data<void>(), result.data(), result.size());
    }

    void allGather(const Tensor& in, Tensor& out, const Group& g) override {
        const std::string where = prefix(g, "allGather", peekSequence(g));
        checkPair(in, out, where);
        const int64_t bytes = byteCount(in);
        if (byteCount(out) != bytes * g.size())
            throw CommError(where + ": output " + out.shapeString() + " must hold " + std::to_string(g.size()) +
                            " times the input " + in.shapeString());
        std::vector<unsigned char> result(static_cast<size_t>(byteCount(out)));
        collective(g, {"allGather", bytes, typeName(in.type())}, in.data<void>(),
                   [&](const std::vector<const void*>& inputs) {
                       for (size_t j = 0; j < inputs.size(); ++j)
                           std::memcpy(result.data() + j * static_cast<size_t>(bytes), inputs[j],
                                       static_cast<size_t>(bytes));
                   });
        std::memcpy(out.data<void>(), result.data(), result.size());
    }

    void reduceScatter(const Tensor& in, Tensor& out, const Group& g) override {
        const std::string where = prefix(g, "reduceScatter", peekSequence(g));
        checkPair(in, out, where);
        if (in.numel() != out.numel() * g.size())
            throw CommError(where + ": input " + in.shapeString() + " must hold " + std::to_string(g.size()) +
                            " times the output " + out.shapeString());
        std::vector<unsigned char> result(static_cast<size_t>(byteCount(out)));
        const int64_t block = out.numel();
        const int64_t offset = block * g.myIndex;
        collective(g, {"reduceScatter", byteCount(in), typeName(in.type())}, in.data<void>(),
                   [&](const std::vector<const void*>& inputs) {
                       sumInGroupOrder(in.type(), inputs, offset, block, result.data());
                   });
        std::memcpy(out.data<void>(), result.data(), result.size());
    }

    void broadcast(Tensor& inout, int rootIndex, const Group& g) override {
        const std::string where = prefix(g, "broadcast", peekSequence(g));
        checkDefined(inout, where, "inout");
        if (rootIndex < 0 || rootIndex >= g.size())
            throw CommError(where + ": root index " + std::to_string(rootIndex) + " is outside the group");
        const int64_t bytes = byteCount(inout);
        std::vector<unsigned char> result(static_cast<size_t>(bytes));
        collective(g, {"broadcast", bytes, typeName(inout.type()), rootIndex}, inout.data<void>(),
                   [&](const std::vector<const void*>& inputs) {
                       std::memcpy(result.data(), inputs[static_cast<size_t>(rootIndex)], result.size());
                   });
        std::memcpy(inout.data<void>(), result.data(), result.size());
    }

    void allToAll(const Tensor& in, Tensor& out, const Group& g) override {
        const std::string where = prefix(g, "allToAll", peekSequence(g));
        checkPair(in, out, where);
        if (in.numel() != out.numel() || in.numel() % g.size() != 0)
            throw CommError(where + ": input " + in.shapeString() + " and output " + out.shapeString() +
                            " must have the same size, a multiple of the group size " + std::to_string(g.size()));
        const size_t block = static_cast<size_t>(byteCount(in) / g.size());
        const size_t mine = block * static_cast<size_t>(g.myIndex);
        std::vector<unsigned char> result(static_cast<size_t>(byteCount(out)));
        collective(g, {"allToAll", byteCount(in), typeName(in.type())}, in.data<void>(),
                   [&](const std::vector<const void*>& inputs) {
                       for (size_t j = 0; j < inputs.size(); ++j)
                           std::memcpy(result.data() + j * block, static_cast<const unsigned char*>(inputs[j]) + mine,
                                       block);
                   });
        std::memcpy(out.data<void>(), result.data(), result.size());
    }

    std::vector<double> allReduceHost(const std::vector<double>& values, const Group& g) override {
        std::vector<double> result(values.size());
        collective(g, {"allReduceHost", static_cast<int64_t>(values.size() * sizeof(double)), "f64"},
                   values.data(), [&](const std::vector<const void*>& inputs) {
                       sumInGroupOrder(ElementType::F64, inputs, 0, static_cast<int64_t>(values.size()),
                                       result.data());
                   });
        return result;
    }

    void barrier(const Group& g) override {
        collective(g, {"barrier", 0, "-"}, nullptr, [](const std::vector<const void*>&) {});
    }

    void send(const Tensor& t, int peerRank, int tag) override {
        const int64_t seq = sendSequence_[{peerRank, tag}]++;
        const std::string where = "rank " + std::to_string(rank_) + " (send #" + std::to_string(seq) + " to rank " +
                                  std::to_string(peerRank) + ", tag " + std::to_string(tag) + ")";
        checkPeer(peerRank, where);
        checkDefined(t, where, "send");
        Message m;
        m.type = t.type();
        m.bytes.resize(static_cast<size_t>(byteCount(t)));
        std::memcpy(m.bytes.data(), t.data<void>(), m.bytes.size());
        std::lock_guard lock(world_->mutex);
        throwIfFailed({peerRank, rank_}, where);
        world_->mailboxes[{rank_, peerRank, tag}].push_back(std::move(m));
        world_->changed.notify_all();
    }

    void recv(Tensor& t, int peerRank, int tag) override {
        const int64_t seq = recvSequence_[{peerRank, tag}]++;
        const std::string where = "rank " + std::to_string(rank_) + " (recv #" + std::to_string(seq) +
                                  " from rank " + std::to_string(peerRank) + ", tag " + std::to_string(tag) + ")";
        checkPeer(peerRank, where);
        checkDefined(t, where, "recv");
        const auto deadline = deadlineAfter(timeoutSeconds());
        std::unique_lock lock(world_->mutex);
        auto& box = world_->mailboxes[{peerRank, rank_, tag}];
        // Messages already sent are delivered even if their sender failed since: they no longer need it.
        while (box.empty()) {
            throwIfFailed({peerRank, rank_}, where);
            if (world_->changed.wait_until(lock, deadline) == std::cv_status::timeout && box.empty())
                throw CommError(where + ": timed out after " + secondsText(timeoutSeconds()) +
                                " waiting for rank " + std::to_string(peerRank) + " to send");
        }
        Message m = std::move(box.front());
        box.pop_front();
        // Only this rank receives on this (source, destination, tag), so nobody else holds the box.
        if (box.empty()) world_->mailboxes.erase({peerRank, rank_, tag});
        lock.unlock();
        if (m.type != t.type() || static_cast<int64_t>(m.bytes.size()) != byteCount(t))
            throw CommError(where + ": rank " + std::to_string(peerRank) + " sent " + std::to_string(m.bytes.size()) +
                            " bytes (" + typeName(m.type) + ") but the receive buffer " + t.shapeString() +
                            " holds " + std::to_string(byteCount(t)) + " bytes (" + typeName(t.type()) + ")");
        std::memcpy(t.data<void>(), m.bytes.data(), m.bytes.size());
    }

private:
    std::string prefix(const Group& g, const std::string& call, int64_t seq) const {
        return "rank " + std::to_string(rank_) + " (group " + g.name + " of " + std::to_string(g.size()) +
               " ranks " + rankList(g.ranks) + ", " + call + " #" + std::to_string(seq) + ")";
    }

    int64_t peekSequence(const Group& g) const {
        const auto it = sequence_.find(groupKey(g));
        return it == sequence_.end() ? 0 : it->second;
    }

    void checkGroup(const Group& g, const std::string& call) const {
        const std::string where = "rank " + std::to_string(rank_) + " (group " + g.name + ", " + call + ")";
        if (g.ranks.empty()) throw CommError(where + ": the group has no ranks");
        if (g.myIndex < 0 || g.myIndex >= g.size())
            throw CommError(where + ": my index " + std::to_string(g.myIndex) + " is outside the group " +
                            rankList(g.ranks));
        if (g.ranks[static_cast<size_t>(g.myIndex)] != rank_)
            throw CommError(where + ": the group " + rankList(g.ranks) + " has rank " +
                            std::to_string(g.ranks[static_cast<size_t>(g.myIndex)]) + " at my index " +
                            std::to_string(g.myIndex));
        std::vector<int> sorted = g.ranks;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            throw CommError(where + ": the group " + rankList(g.ranks) + " repeats a rank");
        if (sorted.front() < 0 || sorted.back() >= world_->worldSize)
            throw CommError(where + ": the group " + rankList(g.ranks) + " has ranks outside the world of " +
                            std::to_string(world_->worldSize));
    }

    void checkPeer(int peer, const std::string& where) const {
        if (peer < 0 || peer >= world_->worldSize)
            throw CommError(where + ": peer rank is outside the world of " + std::to_string(world_->worldSize));
    }

    static void checkPair(const Tensor& in, const Tensor& out, const std::string& where) {
        checkDefined(in, where, "input");
        checkDefined(out, where, "output");
        if (in.type() != out.type())
            throw CommError(where + ": input is " + typeName(in.type()) + " but output is " + typeName(out.type()));
    }

    // The rank of `ranks` that failed first (the root cause when failures cascade), or -1. Must hold the mutex.
    int firstFailed(const std::vector<int>& ranks) const {
        int first = -1;
        for (int r : ranks) {
            const int64_t order = world_->failureOrder[static_cast<size_t>(r)];
            if (order > 0 && (first < 0 || order < world_->failureOrder[static_cast<size_t>(first)])) first = r;
        }
        return first;
    }

    std::string failureText(int failed) const {
        const std::string& why = *world_->failures[static_cast<size_t>(failed)];
        if (failed == rank_) return "this rank was marked failed: " + why;
        return "peer rank " + std::to_string(failed) + " failed: " + why;
    }

    // Must hold the world mutex.
    void throwIfFailed(const std::vector<int>& ranks, const std::string& where) const {
        const int failed = firstFailed(ranks);
        if (failed >= 0) throw CommError(where + ": " + failureText(failed));
    }

    // The rendezvous shared by every collective: deposit `input`, wait (bounded) until every member has,
    // call `read` with every member's input in group order, then wait until every member has read so no
    // input is overwritten or freed while another member still reads it. The caller writes its output
    // after this returns.
    void collective(const Group& g, const Signature& signature, const void* input,
                    const std::function<void(const std::vector<const void*>&)>& read) {
        checkGroup(g, signature.call);
        const std::string key = groupKey(g);
        const int64_t seq = sequence_[key]++;
        const std::string where = prefix(g, signature.call, seq);
        const size_t me = static_cast<size_t>(g.myIndex);
        const int n = g.size();
        const auto slotKey = std::make_pair(key, seq);
        InProcessWorld& w = *world_;

        std::unique_lock lock(w.mutex);
        throwIfFailed(g.ranks, where);
        Slot& slot = w.slots[slotKey];      // std::map nodes stay put while other slots come and go
        if (slot.inputs.empty()) {
            slot.inputs.assign(static_cast<size_t>(n), nullptr);
            slot.present.assign(static_cast<size_t>(n), 0);
            slot.gaveUp.assign(static_cast<size_t>(n), 0);
        }
        if (!slot.error.empty()) throw CommError(where + ": " + slot.error);
        if (!slot.hasSignature) {
            slot.signature = signature;
            slot.hasSignature = true;
            slot.signatureRank = rank_;
        } else if (!(slot.signature == signature)) {
            slot.error = "mismatched calls at the same sequence number: rank " + std::to_string(slot.signatureRank) +
                         " called " + describe(slot.signature) + ", rank " + std::to_string(rank_) + " called " +
                         describe(signature);
            w.changed.notify_all();
            throw CommError(where + ": " + slot.error);
        }
        slot.inputs[me] = input;
        slot.present[me] = 1;
        ++slot.arrived;
        w.changed.notify_all();

        // Leaving before everyone arrived: take my input back and make the slot fail for late arrivals, who
        // would otherwise wait for me until their own timeout.
        auto giveUp = [&](const std::string& reason, const std::string& slotError) {
            slot.inputs[me] = nullptr;
            slot.present[me] = 0;
            slot.gaveUp[me] = 1;
            --slot.arrived;
            if (slot.error.empty()) slot.error = slotError;
            w.changed.notify_all();
            throw CommError(where + ": " + reason);
        };
        const auto deadline = deadlineAfter(timeoutSeconds());
        while (slot.arrived < n) {
            const int failed = firstFailed(g.ranks);
            if (failed >= 0)
                giveUp(failureText(failed),
                       "rank " + std::to_string(failed) + " failed: " + *w.failures[static_cast<size_t>(failed)]);
            if (!slot.error.empty()) giveUp(slot.error, slot.error);
            if (Clock::now() >= deadline) {
                // Missing: members that never arrived (not those that arrived and gave up in the meantime).
                std::vector<int> missing, arrived;
                for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
                    if (slot.present[i]) arrived.push_back(g.ranks[i]);
                    else if (!slot.gaveUp[i]) missing.push_back(g.ranks[i]);
                }
                giveUp("timed out after " + secondsText(timeoutSeconds()) + " waiting for ranks " + rankList(missing) +
                           " (arrived: " + rankList(arrived) + ")",
                       "rank " + std::to_string(rank_) + " gave up after " + secondsText(timeoutSeconds()) +
                           " waiting for ranks " + rankList(missing));
            }
            w.changed.wait_until(lock, deadline);
        }

        // Everyone arrived: inputs stay valid until every member has read them (nobody leaves before that).
        const std::vector<const void*> inputs = slot.inputs;
        lock.unlock();
        read(inputs);
        lock.lock();
        ++slot.doneReading;
        w.changed.notify_all();
        // Not bounded by the timeout on purpose: every member has arrived and reads without waiting, so this
        // ends promptly, and leaving early would let a member free a buffer another one still reads.
        w.changed.wait(lock, [&] { return slot.doneReading == n; });
        if (++slot.left == n) w.slots.erase(slotKey);
    }

    std::shared_ptr<InProcessWorld> world_;
    int rank_;
    std::map<std::string, int64_t> sequence_;              // per group: collective calls so far
    std::map<std::pair<int, int>, int64_t> sendSequence_;  // per (peer, tag)
    std::map<std::pair<int, int>, int64_t> recvSequence_;
};

} // namespace

std::shared_ptr<InProcessWorld> makeInProcessWorld(int worldSize) {
    if (worldSize < 1) throw RuntimeError("an in-process world needs at least one rank, not " + std::to_string(worldSize));
    return std::make_shared<InProcessWorld>(worldSize);
}

std::unique_ptr<Comm> makeInProcessComm(std::shared_ptr<InProcessWorld> world, int rank) {
    if (!world) throw RuntimeError("makeInProcessComm: no world");
    if (rank < 0 || rank >= world->worldSize)
        throw RuntimeError("makeInProcessComm: rank " + std::to_string(rank) + " is outside the world of " +
                           std::to_string(world->worldSize));
    return std::make_unique<InProcessComm>(std::move(world), rank);
}

void failRank(InProcessWorld& world, int rank, const std::string& why) {
    if (rank < 0 || rank >= world.worldSize)
        throw RuntimeError("failRank: rank " + std::to_string(rank) + " is outside the world of " +
                           std::to_string(world.worldSize));
    std::lock_guard lock(world.mutex);
    if (!world.failures[static_cast<size_t>(rank)]) {
        world.failures[static_cast<size_t>(rank)] = why;
        world.failureOrder[static_cast<size_t>(rank)] = ++world.failureCount;
    }
    world.changed.notify_all();
}

std::vector<std::exception_ptr> runInProcessRanks(
    int size, const std::function<void(int, const std::shared_ptr<InProcessWorld>&)>& body) {
    auto world = makeInProcessWorld(size);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r)
        threads.emplace_back([&, r] {
            try {
                body(r, world);
            } catch (const std::exception& e) {
                errors[static_cast<size_t>(r)] = std::current_exception();
                failRank(*world, r, e.what());
            } catch (...) {
                errors[static_cast<size_t>(r)] = std::current_exception();
                failRank(*world, r, "threw");
            }
        });
    for (auto& t : threads) t.join();
    return errors;
}

} // namespace tessel::exec
