// Communication cost: latency + bytes x bus factor / (bandwidth x efficiency), ring/tree, groups over nodes.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/topology.hpp"

#include <string>

namespace tessel {

enum class CommAlgorithm { Auto, Ring, Tree };
std::string toString(CommAlgorithm a);

// nccl-tests bus bandwidth factor for a group of n ranks (PERFORMANCE.md of nccl-tests):
// all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast, reduce, send/recv 1.
// busbw = algbw x factor, with algbw = bytes / seconds and `bytes` the nccl-tests size
// (all-reduce: the buffer; all-gather: the gathered output; reduce-scatter: the input; all-to-all: the
// whole send buffer of one rank).
double busFactor(Primitive p, int n);

// Latency term of one primitive over n ranks of one tier, in units of the tier's per-step alpha (ring:
// n-1 steps per phase; tree: log2 n levels; send/recv: 1). Calibration divides a fitted latency by it.
double latencySteps(Primitive p, int n, CommAlgorithm algorithm);

// e(n): the expected maximum of n independent standard normal variables (e(1) = 0, e(2) = 1/sqrt(pi) = 0.5642,
// e(8) = 1.4236): how far, in standard deviations, a synchronising collective over n ranks waits beyond the
// mean rank (FORMULAS.md §6). Computed by quadrature of n x phi(x) Phi(x)^(n-1) x.
double expectedMaxOfNormals(int n);

// E[max(X, Y)] - max(E X, E Y) for independent normals whose means are `gapSeconds` apart and whose difference
// has standard deviation `spreadSeconds` (Clark 1961): s phi(d/s) - d Phi(-d/s), s/sqrt(2 pi) when they
// coincide, vanishing as the gap grows. How much later a pipeline receive ends than the later of its two
// sides' expected arrivals (FORMULAS.md §6). 0 when spreadSeconds is 0.
double expectedMaxExcess(double gapSeconds, double spreadSeconds);

struct CommCost {
    double seconds = 0.0;
    double latencySeconds = 0.0;    // the latency part of `seconds`
    double bandwidthSeconds = 0.0;  // the bandwidth part
    CommAlgorithm algorithm = CommAlgorithm::Ring;
    bool hierarchical = false;      // the group spans nodes: NVLink and the NICs both carry it
    std::string tier;               // name of the slowest tier used
};

// Time of one primitive moving `bytes` (nccl-tests size convention, see busFactor) over a group placed
// as `placement`. A group of size 1 costs 0. Groups inside one node use the intra-node tier; groups that
// span nodes run NCCL's ring over both tiers at once, the busier one bounding (FORMULAS.md §5, "Groups that
// span nodes"). Auto picks the faster of ring and tree.
CommCost commCost(Primitive p, double bytes, const GroupPlacement& placement, const ClusterConfig& cluster,
                  CommAlgorithm algorithm = CommAlgorithm::Auto);

// Time of an all-reduce of a few bytes (one fp32 scalar: FP8 current scaling's amax) over a group placed as
// `placement`: NCCL's own latency model for its LL protocol, which it picks at that size (tuning.cc), not the
// tiers' per-step alpha, which is the Simple protocol's fitted on large messages. 12.5 us measured on 8 Hopper GPUs
// of one node (nccl-tests, 4 B; data/validation/comm.json small-message-latency-issue-excerpts); 15.0 us here.
double scalarAllReduceSeconds(const GroupPlacement& placement, const ClusterConfig& cluster);

// The SMs NCCL's kernels hold for a collective whose buffers are registered with it (Megatron-core's nccl_ub),
// from Megatron-core's table of expected SM usage (DistributedDataParallelConfig.nccl_ub, 2026): inside one NVLink
// domain 4 for an all-gather and 5 for a reduce-scatter; across nodes of several GPUs each 16 for either (SHARP,
// which tessel does not model, would make it 6); one GPU a node, over the NICs alone, 1 and 4. An all-reduce is
// taken at the reduce-scatter's, the larger; other primitives do not use them (0).
double ncclUserBufferCtas(Primitive p, const GroupPlacement& placement);

} // namespace tessel
