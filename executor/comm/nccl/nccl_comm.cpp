// NCCL Comm. Streams and ordering: each call makes its NCCL stream wait for the compute stream (the inputs
// are ready), runs on that stream (data-parallel groups on a stream of their own, other collectives on a
// second one, point-to-point on a third), then makes the compute stream wait for it, and polls its completion
// from the host against the deadline: the Comm interface is blocking, so the tensors are free to reuse when
// a call returns (overlapping DP reduction with backward needs an asynchronous Comm call; see docs/cuda.md).
// Communicators are non-blocking (ncclConfig_t.blocking = 0), so creation and splits are polled too.
//
// Point to point: sends are buffered, as in the MPI comm: send copies the tensor on the compute stream and
// returns; the copy is sent grouped (ncclGroupStart/End) with the next receive, or on its own at the start of
// any other call, so two pipeline neighbours that both send before they receive cannot deadlock. NCCL has
// no tags: messages between two ranks in one direction pair up in the order they are issued, which the
// runtime's schedule keeps the same on both sides.
#include "nccl_comm.hpp"

#include "nccl_bootstrap.hpp"

#include "../../backends/cuda/cuda_backend.hpp"
#include "../../src/comm_text.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <string>
#include <thread>

namespace tessel::exec {

namespace {

using detail::deadlineAfter;
using detail::rankList;
using detail::secondsText;
using Clock = std::chrono::steady_clock;

ncclDataType_t ncclType(ElementType t) {
    switch (t) {
    case ElementType::F64: return ncclFloat64;
    case ElementType::F32: return ncclFloat32;
    case ElementType::Bf16: return ncclBfloat16;
    }
    return ncclFloat32;
}

void checkCuda(cudaError_t e, const std::string& where, const char* what) {
    if (e != cudaSuccess) throw CommError(where + ": " + what + " failed: " + cudaGetErrorString(e));
}

struct GroupComm {
    ncclComm_t comm = nullptr;
    int64_t calls = 0;
};

// A send whose data waits in `copy` until it is issued, and then until its event completes.
struct PendingSend {
    Tensor copy;
    int peer = 0;
    std::string where;
    Clock::time_point deadline;
    cudaEvent_t done = nullptr;   // set once issued
};

class NcclComm final : public Comm {
public:
    NcclComm(std::unique_ptr<Comm> host, Backend& backend)
        : host_(std::move(host)), backend_(backend), rank_(host_->rank()), size_(host_->worldSize()) {
        setTimeoutSeconds(host_->timeoutSeconds());
        device_ = cudaDeviceOf(backend_);
        compute_ = static_cast<cudaStream_t>(cudaComputeStream(backend_));
        const std::string where = "rank " + std::to_string(rank_) + " (NCCL bootstrap)";
        checkCuda(cudaSetDevice(device_), where, "cudaSetDevice");
        for (cudaStream_t* s : {&collectiveStream_, &dpStream_, &p2pStream_})
            checkCuda(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), where, "cudaStreamCreate");
        world_ = detail::worldGroup(size_, rank_);
        host_->createGroup(world_);
        // The unique id: rank 0 makes it, the others get it through a sum over the host world.
        ncclUniqueId id{};
        std::vector<uint8_t> bytes(sizeof id.internal, 0);
        if (rank_ == 0) {
            ncclResult_t r = ncclGetUniqueId(&id);
            if (r != ncclSuccess) throw CommError(where + ": ncclGetUniqueId failed: " + ncclGetErrorString(r));
            std::memcpy(bytes.data(), id.internal, bytes.size());
        }
        host_->setTimeoutSeconds(timeoutSeconds());
        const std::vector<double> summed = host_->allReduceHost(nccl::packBootstrapBytes(bytes), world_);
        bytes = nccl::unpackBootstrapBytes(summed, sizeof id.internal);
        std::memcpy(id.internal, bytes.data(), bytes.size());
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t r = ncclCommInitRankConfig(&worldComm_, size_, id, rank_, &config);
        if (r != ncclSuccess && r != ncclInProgress)
            throw CommError(where + ": ncclCommInitRankConfig failed: " + ncclGetErrorString(r));
        waitReady(worldComm_, where + " ncclCommInitRankConfig", deadlineAfter(timeoutSeconds()));
    }

    ~NcclComm() override {
        (void)cudaSetDevice(device_);
        if (brokenBy_.empty()) {
            try {
                for (auto& s : inFlight_) waitEvent(s.done, nullptr, s.where, s.deadline);
            } catch (const std::exception&) {
                abortAll();
            }
        }
        for (auto& s : inFlight_)
            if (s.done) cudaEventDestroy(s.done);
        if (brokenBy_.empty()) {
            for (auto& [key, g] : groups_) ncclCommDestroy(g.comm);
            if (worldComm_) ncclCommDestroy(worldComm_);
        }
        for (cudaEvent_t e : {ready_, lastDone_})
            if (e) cudaEventDestroy(e);
        for (cudaStream_t s : {collectiveStream_, dpStream_, p2pStream_})
            if (s) cudaStreamDestroy(s);
    }

    int rank() const override { return rank_; }
    int worldSize() const override { return size_; }
    std::string name() const override { return "nccl"; }

    void createGroup(const Group& g) override {
        const int64_t id = createCalls_++;
        const std::string where = prefix(g, "createGroup", id);
        checkUsable(where);
        host_->setTimeoutSeconds(timeoutSeconds());
        host_->createGroup(g);   // the host comm checks the members agree, and serves allReduceHost/barrier
        const nccl::SplitColorKey ck = nccl::splitColorKey(g, rank_);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        const ncclResult_t r = ncclCommSplit(worldComm_, ck.color, ck.key, &comm, &config);
        if (r != ncclSuccess && r != ncclInProgress) fail(where, "ncclCommSplit", r);
        waitReady(worldComm_, where + " ncclCommSplit", deadlineAfter(timeoutSeconds()));
        if (comm) waitReady(comm, where + " ncclCommSplit", deadlineAfter(timeoutSeconds()));
        int count = 0;
        if (!comm || ncclCommCount(comm, &count) != ncclSuccess || count != g.size())
            throw CommError(where + ": ncclCommSplit made a communicator of " + std::to_string(count) +
                            " ranks for a group of " + std::to_string(g.size()));
        auto it = groups_.find(key(g));
        if (it != groups_.end()) ncclCommDestroy(it->second.comm);
        groups_[key(g)] = GroupComm{comm, 0};
    }

    void allReduce(Tensor& inout, const Group& g) override {
        collective(g, "allReduce", inout, [&](ncclComm_t c, cudaStream_t s) {
            return ncclAllReduce(inout.data<void>(), inout.data<void>(), count(inout), ncclType(inout.type()), ncclSum,
                                 c, s);
        });
    }

    void allGather(const Tensor& in, Tensor& out, const Group& g) override {
        checkPair(in, out, g, "allGather");
        if (out.numel() != in.numel() * g.size())
            throw CommError(prefix(g, "allGather", peek(g)) + ": output " + out.shapeString() + " must hold " +
                            std::to_string(g.size()) + " times the input " + in.shapeString());
        collective(g, "allGather", out, [&](ncclComm_t c, cudaStream_t s) {
            return ncclAllGather(in.data<void>(), out.data<void>(), count(in), ncclType(in.type()), c, s);
        });
    }

    void reduceScatter(const Tensor& in, Tensor& out, const Group& g) override {
        checkPair(in, out, g, "reduceScatter");
        if (in.numel() != out.numel() * g.size())
            throw CommError(prefix(g, "reduceScatter", peek(g)) + ": input " + in.shapeString() + " must hold " +
                            std::to_string(g.size()) + " times the output " + out.shapeString());
        collective(g, "reduceScatter", out, [&](ncclComm_t c, cudaStream_t s) {
            return ncclReduceScatter(in.data<void>(), out.data<void>(), count(out), ncclType(in.type()), ncclSum, c, s);
        });
    }

    void broadcast(Tensor& inout, int rootIndex, const Group& g) override {
        if (rootIndex < 0 || rootIndex >= g.size())
            throw CommError(prefix(g, "broadcast", peek(g)) + ": root index " + std::to_string(rootIndex) +
                            " is outside the group");
        collective(g, "broadcast", inout, [&](ncclComm_t c, cudaStream_t s) {
            return ncclBroadcast(inout.data<void>(), inout.data<void>(), count(inout), ncclType(inout.type()),
                                 rootIndex, c, s);
        });
    }

    void allToAll(const Tensor& in, Tensor& out, const Group& g) override {
        checkPair(in, out, g, "allToAll");
        if (in.numel() != out.numel() || in.numel() % g.size() != 0)
            throw CommError(prefix(g, "allToAll", peek(g)) + ": input " + in.shapeString() + " and output " +
                            out.shapeString() + " must be equal and split into " + std::to_string(g.size()) + " blocks");
        const size_t block = count(in) / static_cast<size_t>(g.size());
        const size_t bytes = block * static_cast<size_t>(elementBytes(in.type()));
        collective(g, "allToAll", out, [&](ncclComm_t c, cudaStream_t s) {
            ncclResult_t r = ncclGroupStart();
            for (int j = 0; j < g.size() && r == ncclSuccess; ++j) {
                r = ncclSend(in.data<char>() + bytes * static_cast<size_t>(j), block, ncclType(in.type()), j, c, s);
                if (r == ncclSuccess)
                    r = ncclRecv(out.data<char>() + bytes * static_cast<size_t>(j), block, ncclType(in.type()), j, c, s);
            }
            const ncclResult_t e = ncclGroupEnd();
            return r != ncclSuccess ? r : e;
        });
    }

    void send(const Tensor& t, int peerRank, int tag) override {
        const std::string where = p2pPrefix("send", peerRank, tag);
        checkUsable(where);
        checkPeer(peerRank, where);
        PendingSend p;
        p.copy = backend_.empty(t.shape(), MemoryCategory::Buffers);
        if (p.copy.type() != t.type()) throw CommError(where + ": tensor type differs from the backend's buffers");
        backend_.copy(t, p.copy);   // on the compute stream: the caller may change `t` at once
        p.peer = peerRank;
        p.where = where;
        p.deadline = deadlineAfter(timeoutSeconds());
        pending_.push_back(std::move(p));
    }

    void recv(Tensor& t, int peerRank, int tag) override {
        const std::string where = p2pPrefix("recv", peerRank, tag);
        checkUsable(where);
        checkPeer(peerRank, where);
        const Clock::time_point deadline = deadlineAfter(timeoutSeconds());
        cudaEvent_t done = issue(where, [&] {
            return ncclRecv(t.data<void>(), count(t), ncclType(t.type()), peerRank, worldComm_, p2pStream_);
        });
        waitEvent(done, worldComm_, where, deadline);
        cudaEventDestroy(done);
        checkCuda(cudaStreamWaitEvent(compute_, doneEvent(p2pStream_, where)), where, "cudaStreamWaitEvent");
        reapSends(where);
    }

    std::vector<double> allReduceHost(const std::vector<double>& values, const Group& g) override {
        const std::string where = prefix(g, "allReduceHost", peek(g));
        checkUsable(where);
        flushSends(where);
        host_->setTimeoutSeconds(timeoutSeconds());
        return host_->allReduceHost(values, g);
    }

    void barrier(const Group& g) override {
        const std::string where = prefix(g, "barrier", peek(g));
        checkUsable(where);
        flushSends(where);
        host_->setTimeoutSeconds(timeoutSeconds());
        host_->barrier(g);
    }

private:
    static std::string key(const Group& g) { return g.name + rankList(g.ranks); }
    static size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

    int64_t peek(const Group& g) const {
        auto it = groups_.find(key(g));
        return it == groups_.end() ? 0 : it->second.calls;
    }

    std::string prefix(const Group& g, const std::string& call, int64_t seq) const {
        return "rank " + std::to_string(rank_) + " (group " + g.name + " of " + std::to_string(g.size()) + " ranks " +
               rankList(g.ranks) + ", " + call + " #" + std::to_string(seq) + ")";
    }

    std::string p2pPrefix(const char* call, int peer, int tag) const {
        return "rank " + std::to_string(rank_) + " (" + call + (std::string(call) == "send" ? " to" : " from") +
               " rank " + std::to_string(peer) + ", tag " + std::to_string(tag) + ")";
    }

    void checkPeer(int peer, const std::string& where) const {
        if (peer < 0 || peer >= size_ || peer == rank_)
            throw CommError(where + ": peer " + std::to_string(peer) + " is not another rank of the world of " +
                            std::to_string(size_));
    }

    void checkPair(const Tensor& in, const Tensor& out, const Group& g, const char* call) const {
        if (!in.defined() || !out.defined()) throw CommError(prefix(g, call, peek(g)) + ": undefined tensor");
        if (in.type() != out.type())
            throw CommError(prefix(g, call, peek(g)) + ": input and output element types differ");
    }

    [[noreturn]] void fail(const std::string& where, const char* call, ncclResult_t r) {
        const char* last = ncclGetLastError(nullptr);
        throw CommError(where + ": " + call + " failed: " + ncclGetErrorString(r) +
                        (last && *last ? std::string(" (") + last + ")" : std::string()));
    }

    void checkUsable(const std::string& where) {
        if (!brokenBy_.empty())
            throw CommError(where + ": the NCCL comm is unusable after an earlier error: " + brokenBy_);
        checkCuda(cudaSetDevice(device_), where, "cudaSetDevice");
        reapSends(where);
    }

    // Aborts every communicator (so no kernel keeps waiting for a peer) and marks the comm unusable.
    void abortAll() {
        for (auto& [k, g] : groups_) ncclCommAbort(g.comm);
        if (worldComm_) ncclCommAbort(worldComm_);
        groups_.clear();
        worldComm_ = nullptr;
    }

    [[noreturn]] void timedOut(const std::string& where, const std::string& doing) {
        brokenBy_ = where + " timed out";
        abortAll();
        throw CommError(where + ": timed out after " + secondsText(timeoutSeconds()) + " " + doing +
                        " (a peer never arrived or failed; every NCCL communicator of this rank was aborted)");
    }

    // Polls a non-blocking communicator until its last operation is issued or its creation finished.
    void waitReady(ncclComm_t comm, const std::string& where, Clock::time_point deadline) {
        for (;;) {
            ncclResult_t state = ncclSuccess;
            const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
            if (r != ncclSuccess) fail(where, "ncclCommGetAsyncError", r);
            if (state == ncclSuccess) return;
            if (state != ncclInProgress) {
                brokenBy_ = where + " failed";
                abortAll();
                fail(where, "NCCL", state);
            }
            if (Clock::now() > deadline) timedOut(where, "waiting for NCCL to start the operation");
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    // Polls an event (and the communicator's asynchronous error) until it completes or the deadline passes.
    void waitEvent(cudaEvent_t event, ncclComm_t comm, const std::string& where, Clock::time_point deadline) {
        for (;;) {
            const cudaError_t q = cudaEventQuery(event);
            if (q == cudaSuccess) return;
            if (q != cudaErrorNotReady) checkCuda(q, where, "cudaEventQuery");
            if (comm) {
                ncclResult_t state = ncclSuccess;
                if (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state != ncclSuccess &&
                    state != ncclInProgress) {
                    brokenBy_ = where + " failed";
                    abortAll();
                    fail(where, "NCCL", state);
                }
            }
            if (Clock::now() > deadline) timedOut(where, "waiting for the transfer to complete");
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }

    cudaEvent_t doneEvent(cudaStream_t stream, const std::string& where) {
        if (!lastDone_) checkCuda(cudaEventCreateWithFlags(&lastDone_, cudaEventDisableTiming), where, "cudaEventCreate");
        checkCuda(cudaEventRecord(lastDone_, stream), where, "cudaEventRecord");
        return lastDone_;
    }

    // Makes `stream` wait for the compute stream (the inputs are ready).
    void afterCompute(cudaStream_t stream, const std::string& where) {
        if (!ready_) checkCuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), where, "cudaEventCreate");
        checkCuda(cudaEventRecord(ready_, compute_), where, "cudaEventRecord");
        checkCuda(cudaStreamWaitEvent(stream, ready_), where, "cudaStreamWaitEvent");
    }

    // Issues the pending sends, grouped with `extra` (a receive) when given, on the point-to-point stream, and
    // returns an event that completes with all of them.
    template <typename Extra>
    cudaEvent_t issue(const std::string& where, Extra&& extra) {
        afterCompute(p2pStream_, where);
        ncclResult_t r = ncclGroupStart();
        for (auto& p : pending_)
            if (r == ncclSuccess)
                r = ncclSend(p.copy.data<void>(), count(p.copy), ncclType(p.copy.type()), p.peer, worldComm_, p2pStream_);
        if (r == ncclSuccess) r = extra();
        const ncclResult_t e = ncclGroupEnd();
        if (r != ncclSuccess && r != ncclInProgress) fail(where, "ncclSend/ncclRecv", r);
        if (e != ncclSuccess && e != ncclInProgress) fail(where, "ncclGroupEnd", e);
        waitReady(worldComm_, where, deadlineAfter(timeoutSeconds()));
        cudaEvent_t done = nullptr;
        checkCuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), where, "cudaEventCreate");
        checkCuda(cudaEventRecord(done, p2pStream_), where, "cudaEventRecord");
        for (auto& p : pending_) {
            checkCuda(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming), where, "cudaEventCreate");
            checkCuda(cudaEventRecord(p.done, p2pStream_), where, "cudaEventRecord");
            inFlight_.push_back(std::move(p));
        }
        pending_.clear();
        return done;
    }

    // Pending sends go out on their own (not waited for) before any call that is not a receive.
    void flushSends(const std::string& where) {
        if (pending_.empty()) return;
        cudaEvent_t done = issue(where, [] { return ncclSuccess; });
        cudaEventDestroy(done);
    }

    // Frees the copies of completed sends; a send still incomplete past its deadline is a timeout.
    void reapSends(const std::string& where) {
        for (auto it = inFlight_.begin(); it != inFlight_.end();) {
            const cudaError_t q = cudaEventQuery(it->done);
            if (q == cudaSuccess) {
                cudaEventDestroy(it->done);
                it = inFlight_.erase(it);
                continue;
            }
            if (q != cudaErrorNotReady) checkCuda(q, it->where, "cudaEventQuery");
            if (Clock::now() > it->deadline)
                timedOut(it->where, "(noticed by " + where + ") waiting for rank " + std::to_string(it->peer) +
                                        " to receive");
            ++it;
        }
    }

    template <typename Launch>
    void collective(const Group& g, const char* call, const Tensor& output, Launch&& launch) {
        auto it = groups_.find(key(g));
        const std::string where = prefix(g, call, it == groups_.end() ? 0 : it->second.calls);
        checkUsable(where);
        if (!output.defined()) throw CommError(where + ": undefined tensor");
        if (it == groups_.end()) throw CommError(where + ": group was not created (createGroup) on this comm");
        flushSends(where);
        const Clock::time_point deadline = deadlineAfter(timeoutSeconds());
        cudaStream_t stream = nccl::usesDataParallelStream(g) ? dpStream_ : collectiveStream_;
        afterCompute(stream, where);
        const ncclResult_t r = launch(it->second.comm, stream);
        if (r != ncclSuccess && r != ncclInProgress) fail(where, call, r);
        waitReady(it->second.comm, where, deadline);
        cudaEvent_t done = doneEvent(stream, where);
        waitEvent(done, it->second.comm, where, deadline);
        checkCuda(cudaStreamWaitEvent(compute_, done), where, "cudaStreamWaitEvent");
        ++it->second.calls;
    }

    std::unique_ptr<Comm> host_;
    Backend& backend_;
    int rank_ = 0, size_ = 1, device_ = 0;
    Group world_;
    cudaStream_t compute_ = nullptr, collectiveStream_ = nullptr, dpStream_ = nullptr, p2pStream_ = nullptr;
    cudaEvent_t ready_ = nullptr, lastDone_ = nullptr;
    ncclComm_t worldComm_ = nullptr;
    std::map<std::string, GroupComm> groups_;
    std::list<PendingSend> pending_, inFlight_;
    int64_t createCalls_ = 0;
    std::string brokenBy_;
};

} // namespace

std::unique_ptr<Comm> makeNcclComm(std::unique_ptr<Comm> host, Backend& backend) {
    return std::make_unique<NcclComm>(std::move(host), backend);
}

} // namespace tessel::exec
