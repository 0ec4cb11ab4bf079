// MPI Comm (OpenMPI): every blocking call is a non-blocking MPI call polled against the comm's deadline.
//
// Notes on the MPI mapping:
// - Groups: createGroup splits (a duplicate of) MPI_COMM_WORLD, which is collective over the whole world, so
//   under MPI every world rank must call createGroup the same number of times, each call with its own group
//   of one kind (the groups of one call must not overlap, as the tp/dp/pp/... groups of a plan do). The color
//   is the smallest world rank of the group and the key its index, so the new communicator's ranks are in
//   group order. An MPI_Ibarrier first bounds the wait for ranks that never get there, and the members check
//   afterwards, with an all-gather, that they all named the same group.
// - Reductions: MPI_Iallreduce and MPI_Ireduce_scatter_block sum in an order the MPI library chooses, not
//   in group order; OpenMPI's algorithms hand every member the same bits for a commutative sum, but the
//   result may differ in the last bits from the in-process comm (which sums in group order) and between
//   world sizes. The executor's float64 checks compare with a tolerance for that reason.
// - Timeouts: a collective that times out cannot be cancelled in MPI, so the comm is unusable afterwards
//   (later calls throw at once) and the caller is expected to report and abortMpi(). Before throwing, the
//   ranks that timed out tell each other where they are, so the message can name the ranks that never
//   arrived. A timed-out receive is cancelled and leaves the comm usable.
// - Sends are buffered, as in the in-process comm: send copies the tensor and returns at once, so two ranks
//   that send to each other before receiving cannot deadlock on large messages. A send not received within
//   the timeout is reported by the next call on this rank (or waited for when the comm is destroyed).
// - Threads: MPI is initialised with MPI_THREAD_FUNNELED; call the comm from one thread only.
// - bf16: moved as 2-byte units; all-reduce and reduce-scatter widen to fp32, sum, and round once to bf16.
#include "tessel/exec/mpi_comm.hpp"

#include "comm_text.hpp"

// Only the C API is used; skip the deprecated C++ bindings (and their warnings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace tessel::exec {

namespace {

using Clock = std::chrono::steady_clock;
using detail::deadlineAfter;
using detail::rankList;
using detail::secondsText;

constexpr int kNoticeTag = 1;   // on the notice communicator: "I timed out at (group id, sequence number)"

std::string mpiErrorText(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<size_t>(length));
}

void check(int code, const std::string& where, const char* what) {
    if (code != MPI_SUCCESS) throw CommError(where + ": " + what + " failed: " + mpiErrorText(code));
}

// MPI has no bfloat16: bf16 tensors travel as 2-byte units wherever values are only moved (all-gather,
// broadcast, all-to-all, send/recv). Sums widen to fp32 (see sumAsFloat) instead of refusing, because the
// cuda backend's data-parallel gradient reductions are bf16 all-reduces and reduce-scatters.
MPI_Datatype mpiType(ElementType t) {
    switch (t) {
    case ElementType::F64: return MPI_DOUBLE;
    case ElementType::F32: return MPI_FLOAT;
    case ElementType::Bf16: return MPI_UINT16_T;
    }
    return MPI_DATATYPE_NULL;
}
std::string typeName(ElementType t) { return toString(t); }

std::vector<float> widenTensor(const Tensor& t) {
    const auto* h = t.data<const uint16_t>();
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = widenBf16(h[i]);
    return out;
}
void narrowInto(const std::vector<float>& values, Tensor& t) {
    auto* h = t.data<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i) h[i] = narrowToBf16(values[i]);
}

int64_t byteCount(const Tensor& t) { return t.numel() * elementBytes(t.type()); }

int mpiCount(int64_t count, const std::string& where) {
    if (count < 0 || count > INT_MAX)
        throw CommError(where + ": " + std::to_string(count) + " elements exceed MPI's int count");
    return static_cast<int>(count);
}

void checkDefined(const Tensor& t, const std::string& where, const char* what) {
    if (!t.defined()) throw CommError(where + ": " + what + " tensor is undefined");
}

void checkPair(const Tensor& in, const Tensor& out, const std::string& where) {
    checkDefined(in, where, "input");
    checkDefined(out, where, "output");
    if (in.type() != out.type())
        throw CommError(where + ": input is " + typeName(in.type()) + " but output is " + typeName(out.type()));
}

bool overlaps(const Tensor& a, const Tensor& b) {
    const auto* pa = a.data<const unsigned char>();
    const auto* pb = b.data<const unsigned char>();
    return pa < pb + byteCount(b) && pb < pa + byteCount(a);
}

std::string groupKey(const Group& g) { return g.name + rankList(g.ranks); }

void finalizeAtExit() {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
}

bool mpiActive() {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

// A buffered send in flight: its own copy of the data, so the caller's tensor is free at once.
struct PendingSend {
    std::vector<unsigned char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
    Clock::time_point deadline;
    std::string where;
    int peer = 0;
};

// A created group: its communicator, the createGroup call that made it (the same number on every member)
// and how many collectives it has run.
struct GroupComm {
    MPI_Comm comm = MPI_COMM_NULL;
    int64_t id = 0;
    int64_t calls = 0;
};

class MpiComm final : public Comm {
public:
    MpiComm() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        void* value = nullptr;
        int found = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
        tagUpperBound_ = found ? *static_cast<int*>(value) : 32767;
        // Private duplicates, so our error handler and tags never meet anyone else's use of MPI_COMM_WORLD.
        world_ = duplicate(MPI_COMM_WORLD, "world");
        pointToPoint_ = duplicate(world_, "point-to-point");
        notices_ = duplicate(world_, "notices");
    }

    ~MpiComm() override {
        if (!mpiActive()) return;
        // Buffered sends still in flight must finish before their buffers go (each bounded by its deadline).
        // After an error, requests may still refer to the buffers and communicators: leave them to
        // MPI_Abort or exit rather than free what MPI may still touch.
        bool clean = brokenBy_.empty();
        for (auto& p : pendingSends_) {
            if (!clean) break;
            clean = poll(p.request, nullptr, p.deadline, p.where, true);
        }
        if (!clean) {
            new std::list<PendingSend>(std::move(pendingSends_));   // leaked on purpose
            return;
        }
        for (auto& [key, g] : groups_) MPI_Comm_free(&g.comm);
        for (MPI_Comm* c : {&notices_, &pointToPoint_, &world_})
            if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    }

    int rank() const override { return rank_; }
    int worldSize() const override { return size_; }
    std::string name() const override { return "mpi"; }

    void createGroup(const Group& g) override {
        const int64_t id = createCalls_++;
        const std::string where = prefix(g, "createGroup", id);
        checkUsable(where);
        checkGroup(g, where);
        // MPI_Comm_split has no non-blocking form: meet at a bounded barrier first, so a rank that never comes
        // turns into an error here rather than a hang inside the split.
        {
            MPI_Request request = MPI_REQUEST_NULL;
            check(MPI_Ibarrier(world_, &request), where, "MPI_Ibarrier");
            if (!poll(request, nullptr, deadlineAfter(timeoutSeconds()), where))
                timedOut(where, detail::worldGroup(size_, rank_), -1 - id, 0, "waiting for every world rank to call createGroup");
        }
        const int color = *std::min_element(g.ranks.begin(), g.ranks.end());
        MPI_Comm comm = MPI_COMM_NULL;
        check(MPI_Comm_split(world_, color, g.myIndex, &comm), where, "MPI_Comm_split");
        check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), where, "MPI_Comm_set_errhandler");
        // Every member must have named the same ranks in the same order: compare with what the others named.
        int commSize = 0;
        int commRank = 0;
        MPI_Comm_size(comm, &commSize);
        MPI_Comm_rank(comm, &commRank);
        std::vector<int> named(static_cast<size_t>(commSize), -1);
        MPI_Request request = MPI_REQUEST_NULL;
        check(MPI_Iallgather(&rank_, 1, MPI_INT, named.data(), 1, MPI_INT, comm, &request), where, "MPI_Iallgather");
        if (!poll(request, nullptr, deadlineAfter(timeoutSeconds()), where))
            timedOut(where, g, -1 - id, 1, "checking the members of the new group");
        if (commSize != g.size() || commRank != g.myIndex || named != g.ranks) {
            MPI_Comm_free(&comm);
            throw CommError(where + ": the ranks that chose this group disagree on its members: this rank named " +
                            rankList(g.ranks) + " but the split produced " + rankList(named) +
                            " (every rank must call createGroup in the same order with its own group of one kind)");
        }
        const std::string key = groupKey(g);
        auto it = groups_.find(key);
        if (it != groups_.end()) MPI_Comm_free(&it->second.comm);   // created again: the new one replaces it
        groups_[key] = GroupComm{comm, id, 0};
    }

    void allReduce(Tensor& inout, const Group& g) override {
        const std::string where = prefix(g, "allReduce", peekCalls(g));
        checkDefined(inout, where, "inout");
        const int count = mpiCount(inout.numel(), where);
        if (inout.type() == ElementType::Bf16) {
            // Summed as fp32 and rounded once (MPI_SUM has no bf16), as the staged GPU comm does.
            std::vector<float> sum = widenTensor(inout);
            collective(g, "allReduce", [&](MPI_Comm comm, MPI_Request* request) {
                return MPI_Iallreduce(MPI_IN_PLACE, sum.data(), count, MPI_FLOAT, MPI_SUM, comm, request);
            });
            narrowInto(sum, inout);
            return;
        }
        collective(g, "allReduce", [&](MPI_Comm comm, MPI_Request* request) {
            return MPI_Iallreduce(MPI_IN_PLACE, inout.data<void>(), count, mpiType(inout.type()), MPI_SUM, comm,
                                  request);
        });
    }

    void allGather(const Tensor& in, Tensor& out, const Group& g) override {
        const std::string where = prefix(g, "allGather", peekCalls(g));
        checkPair(in, out, where);
        if (out.numel() != in.numel() * g.size())
            throw CommError(where + ": output " + out.shapeString() + " must hold " + std::to_string(g.size()) +
                            " times the input " + in.shapeString());
        const int count = mpiCount(in.numel(), where);
        std::vector<unsigned char> staged = stageIfOverlapping(in, out);
        const void* send = staged.empty() ? in.data<void>() : staged.data();
        collective(g, "allGather", [&](MPI_Comm comm, MPI_Request* request) {
            return MPI_Iallgather(send, count, mpiType(in.type()), out.data<void>(), count, mpiType(in.type()), comm,
                                  request);
        });
    }

    void reduceScatter(const Tensor& in, Tensor& out, const Group& g) override {
        const std::string where = prefix(g, "reduceScatter", peekCalls(g));
        checkPair(in, out, where);
        if (in.numel() != out.numel() * g.size())
            throw CommError(where + ": input " + in.shapeString() + " must hold " + std::to_string(g.size()) +
                            " times the output " + out.shapeString());
        mpiCount(in.numel(), where);
        const int count = mpiCount(out.numel(), where);
        if (in.type() == ElementType::Bf16) {
            // Summed as fp32 and rounded once, as allReduce (the widened copy is also the staging).
            const std::vector<float> send = widenTensor(in);
            std::vector<float> sum(static_cast<size_t>(out.numel()));
            collective(g, "reduceScatter", [&](MPI_Comm comm, MPI_Request* request) {
                return MPI_Ireduce_scatter_block(send.data(), sum.data(), count, MPI_FLOAT, MPI_SUM, comm, request);
            });
            narrowInto(sum, out);
            return;
        }
        std::vector<unsigned char> staged = stageIfOverlapping(in, out);
        const void* send = staged.empty() ? in.data<void>() : staged.data();
        collective(g, "reduceScatter", [&](MPI_Comm comm, MPI_Request* request) {
            return MPI_Ireduce_scatter_block(send, out.data<void>(), count, mpiType(in.type()), MPI_SUM, comm, request);
        });
    }

    void broadcast(Tensor& inout, int rootIndex, const Group& g) override {
        const std::string where = prefix(g, "broadcast", peekCalls(g));
        checkDefined(inout, where, "inout");
        if (rootIndex < 0 || rootIndex >= g.size())
            throw CommError(where + ": root index " + std::to_string(rootIndex) + " is outside the group");
        const int count = mpiCount(inout.numel(), where);
        collective(g, "broadcast", [&](MPI_Comm comm, MPI_Request* request) {
            return MPI_Ibcast(inout.data<void>(), count, mpiType(inout.type()), rootIndex, comm, request);
        });
    }

    void allToAll(const Tensor& in, Tensor& out, const Group& g) override {
        const std::string where = prefix(g, "allToAll", peekCalls(g));
        checkPair(in, out, where);
        if (in.numel() != out.numel() || in.numel() % g.size() != 0)
            throw CommError(where + ": input " + in.shapeString() + " and output " + out.shapeString() +
                            " must have the same size, a multiple of the group size " + std::to_string(g.size()));
        mpiCount(in.numel(), where);
        const int block = static_cast<int>(in.numel() / g.size());
        std::vector<unsigned char> staged = stageIfOverlapping(in, out);
        const void* send = staged.empty() ? in.data<void>() : staged.data();
        collective(g, "allToAll", [&](MPI_Comm comm, MPI_Request* request) {
            return MPI_Ialltoall(send, block, mpiType(in.type()), out.data<void>(), block, mpiType(in.type()), comm,
                                 request);
        });
    }

    std::vector<double> allReduceHost(const std::vector<double>& values, const Group& g) override {
        const std::string where = prefix(g, "allReduceHost", peekCalls(g));
        std::vector<double> result = values;
        const int count = mpiCount(static_cast<int64_t>(result.size()), where);
        collective(g, "allReduceHost", [&](MPI_Comm comm, MPI_Request* request) {
            return MPI_Iallreduce(MPI_IN_PLACE, result.data(), count, MPI_DOUBLE, MPI_SUM, comm, request);
        });
        return result;
    }

    void barrier(const Group& g) override {
        collective(g, "barrier", [&](MPI_Comm comm, MPI_Request* request) { return MPI_Ibarrier(comm, request); });
    }

    void send(const Tensor& t, int peerRank, int tag) override {
        const int64_t seq = sendCalls_[{peerRank, tag}]++;
        const std::string where = "rank " + std::to_string(rank_) + " (send #" + std::to_string(seq) + " to rank " +
                                  std::to_string(peerRank) + ", tag " + std::to_string(tag) + ")";
        checkUsable(where);
        checkPeer(peerRank, tag, where);
        checkDefined(t, where, "send");
        const int count = mpiCount(t.numel(), where);
        PendingSend& p = pendingSends_.emplace_back();
        p.where = where;
        p.peer = peerRank;
        p.deadline = deadlineAfter(timeoutSeconds());
        p.bytes.resize(static_cast<size_t>(byteCount(t)));
        std::memcpy(p.bytes.data(), t.data<void>(), p.bytes.size());
        const int code = MPI_Isend(p.bytes.data(), count, mpiType(t.type()), peerRank, tag, pointToPoint_, &p.request);
        if (code != MPI_SUCCESS) {
            pendingSends_.pop_back();
            check(code, where, "MPI_Isend");
        }
    }

    void recv(Tensor& t, int peerRank, int tag) override {
        const int64_t seq = recvCalls_[{peerRank, tag}]++;
        const std::string where = "rank " + std::to_string(rank_) + " (recv #" + std::to_string(seq) +
                                  " from rank " + std::to_string(peerRank) + ", tag " + std::to_string(tag) + ")";
        checkUsable(where);
        checkPeer(peerRank, tag, where);
        checkDefined(t, where, "recv");
        const int count = mpiCount(t.numel(), where);
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_Status status{};
        check(MPI_Irecv(t.data<void>(), count, mpiType(t.type()), peerRank, tag, pointToPoint_, &request), where,
              "MPI_Irecv");
        bool done = false;
        try {
            done = poll(request, &status, deadlineAfter(timeoutSeconds()), where);
        } catch (const CommError& e) {
            if (std::string(e.what()).find("MPI_ERR_TRUNCATE") != std::string::npos)
                throw CommError(where + ": rank " + std::to_string(peerRank) +
                                " sent more than the receive buffer " + t.shapeString() + " holds (" +
                                std::to_string(byteCount(t)) + " bytes, " + typeName(t.type()) + ")");
            throw;
        }
        if (!done) {
            // Take the receive back so nothing lands in the buffer later; if the message matched meanwhile,
            // the cancel fails and the receive has simply completed.
            MPI_Cancel(&request);
            MPI_Wait(&request, &status);
            int cancelled = 0;
            MPI_Test_cancelled(&status, &cancelled);
            if (cancelled)
                throw CommError(where + ": timed out after " + secondsText(timeoutSeconds()) + " waiting for rank " +
                                std::to_string(peerRank) + " to send");
        }
        int received = 0;
        MPI_Get_count(&status, mpiType(t.type()), &received);
        if (received != count)
            throw CommError(where + ": rank " + std::to_string(peerRank) + " sent " +
                            (received == MPI_UNDEFINED ? std::string("a message of another type")
                                                       : std::to_string(received) + " elements") +
                            " but the receive buffer " + t.shapeString() + " holds " + std::to_string(count) + " (" +
                            typeName(t.type()) + ")");
    }

private:
    MPI_Comm duplicate(MPI_Comm from, const char* what) {
        const std::string where = "rank " + std::to_string(rank_) + " (duplicating the " + what + " communicator)";
        MPI_Comm result = MPI_COMM_NULL;
        MPI_Request request = MPI_REQUEST_NULL;
        check(MPI_Comm_idup(from, &result, &request), where, "MPI_Comm_idup");
        if (!poll(request, nullptr, deadlineAfter(timeoutSeconds()), where)) {
            brokenBy_ = where + ": timed out";
            throw CommError(where + ": timed out after " + secondsText(timeoutSeconds()) +
                            " waiting for every world rank to create its MPI comm");
        }
        check(MPI_Comm_set_errhandler(result, MPI_ERRORS_RETURN), where, "MPI_Comm_set_errhandler");
        return result;
    }

    std::string prefix(const Group& g, const std::string& call, int64_t seq) const {
        return "rank " + std::to_string(rank_) + " (group " + g.name + " of " + std::to_string(g.size()) +
               " ranks " + rankList(g.ranks) + ", " + call + " #" + std::to_string(seq) + ")";
    }

    int64_t peekCalls(const Group& g) const {
        const auto it = groups_.find(groupKey(g));
        return it == groups_.end() ? 0 : it->second.calls;
    }

    // Throws if an earlier error left the comm unusable, or if a buffered send was not received in time.
    void checkUsable(const std::string& where) {
        if (!brokenBy_.empty())
            throw CommError(where + ": the MPI comm is unusable after an earlier error: " + brokenBy_);
        for (auto it = pendingSends_.begin(); it != pendingSends_.end();) {
            int done = 0;
            check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), it->where, "MPI_Test");
            if (done) {
                it = pendingSends_.erase(it);
                continue;
            }
            if (Clock::now() >= it->deadline) {
                brokenBy_ = it->where + ": not received by rank " + std::to_string(it->peer) + " within " +
                            secondsText(timeoutSeconds());
                throw CommError(where + ": an earlier send timed out: " + brokenBy_);
            }
            ++it;
        }
    }

    void checkGroup(const Group& g, const std::string& where) const {
        if (g.ranks.empty()) throw CommError(where + ": the group has no ranks");
        if (g.myIndex < 0 || g.myIndex >= g.size())
            throw CommError(where + ": my index " + std::to_string(g.myIndex) + " is outside the group");
        if (g.ranks[static_cast<size_t>(g.myIndex)] != rank_)
            throw CommError(where + ": the group has rank " + std::to_string(g.ranks[static_cast<size_t>(g.myIndex)]) +
                            " at my index " + std::to_string(g.myIndex));
        std::vector<int> sorted = g.ranks;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            throw CommError(where + ": the group repeats a rank");
        if (sorted.front() < 0 || sorted.back() >= size_)
            throw CommError(where + ": the group has ranks outside the world of " + std::to_string(size_));
    }

    void checkPeer(int peer, int tag, const std::string& where) const {
        if (peer < 0 || peer >= size_)
            throw CommError(where + ": peer rank is outside the world of " + std::to_string(size_));
        if (tag < 0 || tag > tagUpperBound_)
            throw CommError(where + ": tag must be in [0, " + std::to_string(tagUpperBound_) + "]");
    }

    // MPI forbids a send buffer that overlaps the receive buffer (short of MPI_IN_PLACE): copy such input aside.
    static std::vector<unsigned char> stageIfOverlapping(const Tensor& in, const Tensor& out) {
        if (!overlaps(in, out)) return {};
        const auto* p = in.data<const unsigned char>();
        return std::vector<unsigned char>(p, p + byteCount(in));
    }

    // Tests `request` until it completes (true) or the deadline passes (false, request still pending).
    // OpenMPI progresses a non-blocking collective only inside MPI_Test, on every member, so a member asleep
    // between tests stalls every round of the others: with 50 us-1 ms sleeps a 400 KB reduce-scatter took
    // ~1.2 ms in training against 0.3 ms spinning. For the first 50 ms it therefore tests continuously,
    // yielding the core between tests (a no-op with one rank per core; other ranks run when the host is
    // oversubscribed), as MPI's blocking calls do with mpi_yield_when_idle; after that it sleeps 50 us
    // between tests backing off to 1 ms, so a rank that waits long (a pipeline bubble, a hung peer) leaves
    // the CPU to the others.
    static bool poll(MPI_Request& request, MPI_Status* status, Clock::time_point deadline, const std::string& where,
                     bool quiet = false) {
        const auto spinUntil = Clock::now() + std::chrono::milliseconds(50);
        auto pause = std::chrono::microseconds(50);
        for (;;) {
            int done = 0;
            const int code = MPI_Test(&request, &done, status ? status : MPI_STATUS_IGNORE);
            if (quiet && code != MPI_SUCCESS) return false;
            check(code, where, "MPI_Test");
            if (done) return true;
            const auto now = Clock::now();
            if (now >= deadline) return false;
            if (now < spinUntil) {
                std::this_thread::yield();
                continue;
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(1000));
        }
    }

    void collective(const Group& g, const std::string& call,
                    const std::function<int(MPI_Comm, MPI_Request*)>& start) {
        const auto it = groups_.find(groupKey(g));
        const std::string where = prefix(g, call, it == groups_.end() ? 0 : it->second.calls);
        checkUsable(where);
        checkGroup(g, where);
        if (it == groups_.end())
            throw CommError(where + ": the group was not created (call createGroup on every rank first)");
        GroupComm& gc = it->second;
        const int64_t seq = gc.calls++;
        MPI_Request request = MPI_REQUEST_NULL;
        check(start(gc.comm, &request), where, call.c_str());
        if (!poll(request, nullptr, deadlineAfter(timeoutSeconds()), where))
            timedOut(where, g, gc.id, seq, "");
    }

    // A collective timed out: tell the other members where this rank stands and listen a short grace period
    // for theirs, so the error can name the members that never arrived; then mark the comm unusable and throw.
    [[noreturn]] void timedOut(const std::string& where, const Group& g, int64_t groupId, int64_t seq,
                               const std::string& doing) {
        const double graceSeconds = std::clamp(timeoutSeconds() / 4, 0.2, 2.0);
        auto notice = std::make_unique<std::array<int64_t, 2>>(std::array<int64_t, 2>{groupId, seq});
        for (int r : g.ranks) {
            if (r == rank_) continue;
            MPI_Request request = MPI_REQUEST_NULL;
            if (MPI_Isend(notice->data(), 2, MPI_INT64_T, r, kNoticeTag, notices_, &request) == MPI_SUCCESS)
                MPI_Request_free(&request);   // the missing ranks never take it; that is fine
        }
        sentNotices_.push_back(std::move(notice));   // kept alive: sends may still read them
        std::set<int> reported{rank_};
        const auto graceEnd = deadlineAfter(graceSeconds);
        while (static_cast<int>(reported.size()) < g.size() && Clock::now() < graceEnd) {
            int flag = 0;
            MPI_Status status{};
            if (MPI_Iprobe(MPI_ANY_SOURCE, kNoticeTag, notices_, &flag, &status) != MPI_SUCCESS) break;
            if (!flag) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            std::array<int64_t, 2> heard{};
            if (MPI_Recv(heard.data(), 2, MPI_INT64_T, status.MPI_SOURCE, kNoticeTag, notices_, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                break;
            if (heard[0] == groupId && heard[1] == seq) reported.insert(status.MPI_SOURCE);
        }
        std::vector<int> missing, arrived;
        for (int r : g.ranks) (reported.count(r) ? arrived : missing).push_back(r);
        std::string message = where + ": timed out after " + secondsText(timeoutSeconds());
        if (!doing.empty()) message += " " + doing;
        if (missing.empty())
            message += "; every member reports being in this call (arrived: " + rankList(arrived) + ")";
        else
            message += " waiting for ranks " + rankList(missing) + " (arrived: " + rankList(arrived) + "; ranks that " +
                       "did not report within " + secondsText(graceSeconds) + " count as missing)";
        brokenBy_ = message;
        throw CommError(message);
    }

    int rank_ = 0;
    int size_ = 1;
    int tagUpperBound_ = 32767;
    MPI_Comm world_ = MPI_COMM_NULL;
    MPI_Comm pointToPoint_ = MPI_COMM_NULL;
    MPI_Comm notices_ = MPI_COMM_NULL;
    std::map<std::string, GroupComm> groups_;
    int64_t createCalls_ = 0;
    std::map<std::pair<int, int>, int64_t> sendCalls_;   // per (peer, tag)
    std::map<std::pair<int, int>, int64_t> recvCalls_;
    std::vector<std::unique_ptr<std::array<int64_t, 2>>> sentNotices_;
    std::list<PendingSend> pendingSends_;                 // list: each buffer stays put while MPI reads it
    std::string brokenBy_;   // the error after which this comm must not be used
};

} // namespace

bool mpiBuilt() { return true; }

std::unique_ptr<Comm> makeMpiComm() {
    int initialized = 0;
    if (MPI_Initialized(&initialized) != MPI_SUCCESS) throw RuntimeError("MPI is unavailable (MPI_Initialized failed)");
    if (!initialized) {
        int provided = 0;
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            throw RuntimeError("MPI_Init_thread failed: MPI is unavailable");
        std::atexit(finalizeAtExit);
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) throw RuntimeError("makeMpiComm: MPI was already finalized");
    return std::make_unique<MpiComm>();
}

void abortMpi(int code) {
    if (mpiActive()) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);   // MPI_Abort does not return; this covers MPI never having started
}

} // namespace tessel::exec
