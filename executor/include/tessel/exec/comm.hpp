// The Comm interface: collectives and point-to-point transfers over process groups, each blocking call
// bounded by a timeout that turns a hang into an error naming the rank, the group and the call.
#pragma once

#include "tessel/cost/errors.hpp"
#include "tessel/exec/tensor.hpp"

#include <memory>
#include <string>
#include <vector>

namespace tessel::exec {

// A process group: its name (e.g. "tp", "dp", "pp"), the world ranks in group order, and this rank's index.
struct Group {
    std::string name;
    std::vector<int> ranks;
    int myIndex = 0;
    int size() const { return static_cast<int>(ranks.size()); }
};

// A collective or transfer that did not complete in time, or a peer that failed.
class CommError : public RuntimeError {
public:
    using RuntimeError::RuntimeError;
};

// All tensors are contiguous; the element type must match across ranks. Collectives must be called by every
// member of the group in the same order. Reductions are sums, in group order, so every member gets the same
// bits. Every call throws CommError after `timeoutSeconds()` naming this rank, the group, the call and the
// ranks that did not arrive (where the implementation can tell).
class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;
    virtual int worldSize() const = 0;
    virtual std::string name() const = 0;   // "inproc", "mpi"

    void setTimeoutSeconds(double seconds) { timeoutSeconds_ = seconds; }
    double timeoutSeconds() const { return timeoutSeconds_; }

    // Creates the communicator for a group; every member must call it, in the same order, with the same ranks.
    virtual void createGroup(const Group& group) = 0;

    virtual void allReduce(Tensor& inout, const Group& g) = 0;
    // out [size * n, ...] = concatenation of every member's in [n, ...] along dim 0, in group order.
    virtual void allGather(const Tensor& in, Tensor& out, const Group& g) = 0;
    // in [size * n, ...] summed over members; member i gets rows [i n, (i + 1) n) in out [n, ...].
    virtual void reduceScatter(const Tensor& in, Tensor& out, const Group& g) = 0;
    virtual void broadcast(Tensor& inout, int rootIndex, const Group& g) = 0;
    // in [size * n, ...]: block j goes to member j; out block i came from member i.
    virtual void allToAll(const Tensor& in, Tensor& out, const Group& g) = 0;
    // Point to point between world ranks; `tag` separates concurrent streams of messages between two ranks.
    virtual void send(const Tensor& t, int peerRank, int tag) = 0;
    virtual void recv(Tensor& t, int peerRank, int tag) = 0;
    // Sum of `values` over the group, on the host (losses, norms, counters).
    virtual std::vector<double> allReduceHost(const std::vector<double>& values, const Group& g) = 0;
    virtual void barrier(const Group& g) = 0;

private:
    double timeoutSeconds_ = 60.0;
};

} // namespace tessel::exec
