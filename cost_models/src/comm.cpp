// Communication cost model: nccl-tests bus factors, ring/tree latency terms, rings over nodes.
#include "tessel/cost/comm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

std::string toString(Primitive p) {
    switch (p) {
    case Primitive::AllReduce:
        return "all_reduce";
    case Primitive::AllGather:
        return "all_gather";
    case Primitive::ReduceScatter:
        return "reduce_scatter";
    case Primitive::Broadcast:
        return "broadcast";
    case Primitive::Reduce:
        return "reduce";
    case Primitive::AllToAll:
        return "all_to_all";
    case Primitive::SendRecv:
        return "send_recv";
    }
    return "unknown";
}

const std::vector<Primitive>& allPrimitives() {
    static const std::vector<Primitive> all{
        Primitive::AllReduce, Primitive::AllGather, Primitive::ReduceScatter, Primitive::Broadcast,
        Primitive::Reduce,    Primitive::AllToAll,  Primitive::SendRecv};
    return all;
}

double LinkTier::efficiencyFor(Primitive p) const {
    const auto it = primitiveEfficiency.find(p);
    return it != primitiveEfficiency.end() ? it->second : efficiency;
}

// On a full mesh each GPU has one link to each peer: RCCL's rings over m GPUs run over the m - 1 links among them
// (8 MI300X: 317 GB/s of bus bandwidth on 7 x 64 GB/s; 2 of them: 47.7 GB/s on one link, ROCm's rccl-tests
// screenshots and stas00/ml-engineering network/README.md), and a send/recv crosses the pair's one link.
double LinkTier::meshShare(Primitive p, int ranksOnNode) const {
    if (meshLinks <= 0) return 1.0;
    const int links = p == Primitive::SendRecv ? 1 : std::clamp(ranksOnNode - 1, 1, meshLinks);
    return static_cast<double>(links) / meshLinks;
}

std::string toString(CommAlgorithm a) {
    switch (a) {
    case CommAlgorithm::Auto:
        return "auto";
    case CommAlgorithm::Ring:
        return "ring";
    case CommAlgorithm::Tree:
        return "tree";
    }
    return "unknown";
}

double busFactor(Primitive p, int n) {
    if (n < 1)
        throw InputError("group size",
                         "a communication group needs at least 1 rank, got " + std::to_string(n));
    // A point-to-point transfer moves the whole message whatever the group (nccl-tests sendrecv: busbw =
    // algbw).
    if (p == Primitive::SendRecv) return 1.0;
    // One rank moves nothing over the network; nccl-tests reports busbw 0 there for the collectives.
    if (n == 1) return 0.0;
    const double ranks = n;
    switch (p) {
    // nccl-tests PERFORMANCE.md: all-reduce busbw = algbw x 2(n-1)/n (reduce-scatter then all-gather).
    case Primitive::AllReduce:
        return 2.0 * (ranks - 1.0) / ranks;
    // nccl-tests PERFORMANCE.md: all-gather / reduce-scatter busbw = algbw x (n-1)/n (size = full buffer).
    case Primitive::AllGather:
    case Primitive::ReduceScatter:
        return (ranks - 1.0) / ranks;
    // nccl-tests PERFORMANCE.md: all-to-all busbw = algbw x (n-1)/n (1/n of the send buffer stays local).
    case Primitive::AllToAll:
        return (ranks - 1.0) / ranks;
    // nccl-tests PERFORMANCE.md: broadcast / reduce busbw = algbw (pipelined ring: each link carries S once).
    case Primitive::Broadcast:
    case Primitive::Reduce:
        return 1.0;
    case Primitive::SendRecv:
        return 1.0;
    }
    return 1.0;
}

namespace {
// ceil(log2 n) for n >= 1: the depth of a binary tree over n ranks.
int ceilLog2(int n) {
    int levels = 0;
    while ((int64_t{1} << levels) < n)
        ++levels;
    return levels;
}
} // namespace

// Latency term of one primitive over n ranks of one tier, in units of the tier's alpha.
double expectedMaxOfNormals(int n) {
    if (n <= 1) return 0.0;
    // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx (order statistics; David & Nagaraja 2003 §3.1), by
    // Simpson's rule on [-9, 9 + sqrt(2 ln n)]: the density is smooth and negligible outside. Group sizes repeat,
    // so results are kept per n.
    thread_local std::vector<std::pair<int, double>> cache;
    for (const auto& [m, e] : cache)
        if (m == n) return e;
    const double lo = -9.0, hi = 9.0 + std::sqrt(2.0 * std::log(static_cast<double>(n)));
    const int steps = 2000; // even
    const double h = (hi - lo) / steps;
    const double invSqrt2Pi = 0.3989422804014327;
    double sum = 0.0;
    for (int i = 0; i <= steps; ++i) {
        const double x = lo + i * h;
        const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
        const double f = cdf > 0.0 ? x * n * invSqrt2Pi * std::exp(-0.5 * x * x + (n - 1) * std::log(cdf)) : 0.0;
        sum += f * (i == 0 || i == steps ? 1.0 : i % 2 ? 4.0 : 2.0);
    }
    const double e = sum * h / 3.0;
    if (cache.size() < 64) cache.emplace_back(n, e);
    return e;
}

double expectedMaxExcess(double gapSeconds, double spreadSeconds) {
    if (!(spreadSeconds > 0.0)) return 0.0;
    const double z = std::abs(gapSeconds) / spreadSeconds;
    const double pdf = 0.3989422804014327 * std::exp(-0.5 * z * z); // phi(z)
    const double tail = 0.5 * std::erfc(z / std::sqrt(2.0));        // Phi(-z)
    return spreadSeconds * (pdf - z * tail);
}

double latencySteps(Primitive p, int n, CommAlgorithm algorithm) {
    if (n <= 1) return 0.0;
    const double ring = n - 1.0;
    const double depth = ceilLog2(n);
    switch (p) {
    // Ring all-reduce = reduce-scatter + all-gather, n-1 steps each (Thakur, Rabenseifner & Gropp 2005 §4).
    // Tree all-reduce = reduce up + broadcast down a binary tree, log2 n steps each (Thakur et al. 2005;
    // NCCL's double binary tree has the same depth).
    case Primitive::AllReduce:
        return algorithm == CommAlgorithm::Tree ? 2.0 * depth : 2.0 * ring;
    // Ring all-gather / reduce-scatter: n-1 steps (Thakur et al. 2005); NCCL has no tree for them.
    case Primitive::AllGather:
    case Primitive::ReduceScatter:
        return ring;
    // Pipelined ring (chain) broadcast / reduce, as NCCL runs them: n-1 hops to fill the chain; binomial
    // tree: ceil(log2 n) rounds (Thakur et al. 2005 §3).
    case Primitive::Broadcast:
    case Primitive::Reduce:
        return algorithm == CommAlgorithm::Tree ? depth : ring;
    // Pairwise-exchange all-to-all: n-1 rounds, one per peer (Thakur et al. 2005 §3); no tree variant.
    case Primitive::AllToAll:
        return ring;
    // One point-to-point message: one alpha.
    case Primitive::SendRecv:
        return 1.0;
    }
    return ring;
}

namespace {

// A cost split into its latency and bandwidth parts.
struct CostParts {
    double latencySeconds = 0.0;
    double bandwidthSeconds = 0.0;
    double total() const { return latencySeconds + bandwidthSeconds; }
    CostParts& operator+=(const CostParts& o) {
        latencySeconds += o.latencySeconds;
        bandwidthSeconds += o.bandwidthSeconds;
        return *this;
    }
};


// Achieved bus bandwidth of `tier` for `p` among `ranksOnNode` of a group's ranks (a mesh's share, above);
// rejects tiers that would divide by zero.
double busBytesPerSecond(const LinkTier& tier, Primitive p, int ranksOnNode) {
    const double rate = tier.bandwidthBytesPerSecond * tier.efficiencyFor(p) * tier.meshShare(p, ranksOnNode);
    if (!(rate > 0.0))
        throw InputError(tier.name.empty() ? std::string("network tier") : "network tier " + tier.name,
                         "bandwidth x efficiency for " + toString(p) + " must be > 0 to cost communication");
    return rate;
}

// One primitive on one tier: alpha x steps + bytes x busFactor / (bw x eff). Tree and ring share the
// bandwidth term: NCCL's double binary tree reaches full bus bandwidth (Sanders, Speck & Traeff 2009;
// NCCL 2.4).
CostParts flatCost(Primitive p, double bytes, int n, const LinkTier& tier, CommAlgorithm algorithm) {
    CostParts c;
    if (n <= 1 || bytes <= 0.0) return c; // a phase over one rank vanishes (e.g. intra phases when k == 1)
    c.latencySeconds = latencySteps(p, n, algorithm) * tier.latencyFor(p);
    c.bandwidthSeconds = bytes * busFactor(p, n) / busBytesPerSecond(tier, p, n);
    return c;
}

// Bandwidth seconds of NCCL's ring over a group spanning nodes, k ranks on each. The ring is chunked so that
// every link carries data at once (NCCL pipelines its slices), so the busier link type bounds the time rather
// than the sum of an intra and an inter phase: each rank moves busFactor(p, n) x S, every node's traffic to the
// next leaves through the k NICs of its ranks (nccl#307, NCCL's maintainer: "with rings, you should get ~12 GB/s
// with each NIC, then ~24 when using 2 NICs"; nccl-tests#290: 46-48 GB/s per NDR NIC; FORMULAS.md §5 "Groups
// that span nodes"). The NVLink side is charged the flat ring's whole time, so a spread group is never
// faster than the same group inside one node; with k = 1 there is no NVLink hop. In an uneven group the node
// with the fewest of its ranks has the fewest NICs for the same traffic, and bounds the ring.
double spanningRingBandwidthSeconds(Primitive p, double bytes, const GroupPlacement& placement, const LinkTier& intra,
                                    const LinkTier& inter) {
    const int n = placement.size;
    const double ringBytes = bytes * busFactor(p, n);
    const double nicsPerNode = placement.minRanksPerNode > 0 ? static_cast<double>(placement.minRanksPerNode)
                                                             : static_cast<double>(n) / placement.nodes;
    const double interSeconds = ringBytes / nicsPerNode / busBytesPerSecond(inter, p, placement.ranksPerNode);
    const double intraSeconds =
        placement.ranksPerNode > 1 ? ringBytes / busBytesPerSecond(intra, p, placement.ranksPerNode) : 0.0;
    return std::max(interSeconds, intraSeconds);
}

// Latency seconds of the same ring: its n - 1 steps (2(n - 1) for all-reduce) advance in lockstep, each as
// slow as its slowest hop, so every step pays the larger of the two tiers' alphas. Checked on the 4-node
// B200 all-reduce sweep (data/validation/comm.json b200-1node-vs-4node-allreduce-sweep-efa): its 1 and 16 GiB
// points put the intercept at about 0.32 ms (5.2 us for each of 62 steps), a relative least-squares fit over
// 16 MiB - 16 GiB, as the intra-node alphas were fitted, at 0.48 ms (7.8 us a step), and NCCL's own tuner
// (tuning.cc: Simple ring steps at 3.4 us on NVLink and 9.6 us on the network, x1.9 for a multi-node ring
// all-reduce's plateau) at 0.49 ms; the phases' 2(k-1) intra and 2(N-1) inter steps gave 0.08 ms.
double spanningRingLatencySeconds(Primitive p, int n, const LinkTier& intra, const LinkTier& inter) {
    return latencySteps(p, n, CommAlgorithm::Ring) * std::max(intra.latencyFor(p), inter.latencyFor(p));
}

// A group spanning N nodes with at most k ranks per node. All-reduce, all-gather and reduce-scatter run as
// the ring above. NCCL's tree all-reduce has the ring's bandwidth term (see flatCost) and its latency as phases:
// a reduce-scatter and an all-gather in the node around a tree over the nodes (hierarchical all-reduce, Jia et
// al. 2018; Horovod; BlueConnect, Cho et al. 2019). Broadcast and reduce pay each tier in turn (an upper
// bound); all-to-all and send/recv below.
CostParts hierarchicalCost(Primitive p, double bytes, const GroupPlacement& placement,
                           const ClusterConfig& cluster, CommAlgorithm algorithm) {
    const int n = placement.size;
    const int nodes = placement.nodes;
    const int k = placement.ranksPerNode;
    const LinkTier& intra = cluster.intraNode;
    const LinkTier& inter = cluster.interNode;
    CostParts c;
    switch (p) {
    case Primitive::AllReduce:
    case Primitive::AllGather:
    case Primitive::ReduceScatter:
        if (p == Primitive::AllReduce && algorithm == CommAlgorithm::Tree) {
            c += flatCost(Primitive::ReduceScatter, bytes, k, intra, algorithm);
            c += flatCost(Primitive::AllReduce, bytes / k, nodes, inter, algorithm);
            c += flatCost(Primitive::AllGather, bytes, k, intra, algorithm);
        } else {
            c.latencySeconds = spanningRingLatencySeconds(p, n, intra, inter);
        }
        c.bandwidthSeconds = spanningRingBandwidthSeconds(p, bytes, placement, intra, inter);
        return c;
    case Primitive::Broadcast:
    case Primitive::Reduce:
        // Whole message across nodes (one rank per node), then within each node; phases assumed not
        // overlapped.
        c += flatCost(p, bytes, nodes, inter, algorithm);
        c += flatCost(p, bytes, k, intra, algorithm);
        return c;
    case Primitive::AllToAll: {
        // Each rank sends S/n to every peer: (n-k) peers off-node over the inter tier and (k-1) on-node over
        // the intra tier, concurrently, so the slower side bounds the time; one alpha_inter per peer round.
        c.latencySeconds = (n - 1.0) * inter.latencyFor(p);
        const double interSeconds = bytes * (n - k) / n / busBytesPerSecond(inter, p, k);
        const double intraSeconds = k > 1 ? bytes * (k - 1.0) / n / busBytesPerSecond(intra, p, k) : 0.0;
        c.bandwidthSeconds = std::max(interSeconds, intraSeconds);
        return c;
    }
    case Primitive::SendRecv:
        // A pair on two nodes: one message over the inter-node tier.
        return flatCost(p, bytes, 2, inter, algorithm);
    }
    return c;
}

// Which tiers a spanning group's primitive touches; the report names the slower (lower bus bandwidth) one.
std::string slowestTierName(Primitive p, const GroupPlacement& placement, const ClusterConfig& cluster) {
    const bool usesIntra = placement.ranksPerNode > 1 && p != Primitive::SendRecv;
    if (!usesIntra) return cluster.interNode.name;
    const double intraRate = busBytesPerSecond(cluster.intraNode, p, placement.ranksPerNode);
    const double interRate = busBytesPerSecond(cluster.interNode, p, placement.ranksPerNode);
    return intraRate < interRate ? cluster.intraNode.name : cluster.interNode.name;
}

CostParts costWith(Primitive p, double bytes, const GroupPlacement& placement, const ClusterConfig& cluster,
                   CommAlgorithm algorithm) {
    if (placement.spansNodes()) return hierarchicalCost(p, bytes, placement, cluster, algorithm);
    return flatCost(p, bytes, placement.size, cluster.intraNode, algorithm);
}

// Tree differs from ring only for these; elsewhere NCCL runs a ring (or p2p) whatever is asked.
bool hasTree(Primitive p) {
    return p == Primitive::AllReduce || p == Primitive::Broadcast || p == Primitive::Reduce;
}

} // namespace

CommCost commCost(Primitive p, double bytes, const GroupPlacement& placement, const ClusterConfig& cluster,
                  CommAlgorithm algorithm) {
    if (bytes < 0.0) throw InputError("bytes", "message size must be >= 0, got " + std::to_string(bytes));
    if (placement.size > 1 && (placement.nodes < 1 || placement.ranksPerNode < 1))
        throw InputError("placement", "a group of " + std::to_string(placement.size) +
                                          " ranks must sit on at least one node");

    CommCost result;
    result.algorithm =
        algorithm == CommAlgorithm::Tree && hasTree(p) ? CommAlgorithm::Tree : CommAlgorithm::Ring;
    // A group of one rank, or an empty message, moves nothing (NCCL returns at once for count 0).
    if (placement.size <= 1 || bytes == 0.0) return result;

    result.hierarchical = placement.spansNodes();
    result.tier = result.hierarchical ? slowestTierName(p, placement, cluster) : cluster.intraNode.name;

    CostParts parts;
    if (algorithm == CommAlgorithm::Auto) {
        // NCCL's tuner picks per call the algorithm with the lower predicted time; ties go to ring. Its trees
        // span nodes: inside one node NCCL runs rings (tuning.cc disables Tree when nNodes == 1).
        const CostParts ring = costWith(p, bytes, placement, cluster, CommAlgorithm::Ring);
        parts = ring;
        result.algorithm = CommAlgorithm::Ring;
        if (hasTree(p) && placement.spansNodes()) {
            const CostParts tree = costWith(p, bytes, placement, cluster, CommAlgorithm::Tree);
            if (tree.total() < ring.total()) {
                parts = tree;
                result.algorithm = CommAlgorithm::Tree;
            }
        }
    } else {
        parts = costWith(p, bytes, placement, cluster, result.algorithm);
    }
    result.latencySeconds = parts.latencySeconds;
    result.bandwidthSeconds = parts.bandwidthSeconds;
    result.seconds = parts.total();
    return result;
}

double scalarAllReduceSeconds(const GroupPlacement& placement, const ClusterConfig& cluster) {
    const int n = placement.size;
    if (n <= 1) return 0.0;
    // NCCL's tuner defaults (src/graph/tuning.cc, ncclTunerConstantsDefaults): ring LL base latency 6.6 us, and per
    // ring step 0.6 us over NVLink (1.0 over PCIe) and 2.7 us over the network; an all-reduce's ring has 2(n - 1)
    // steps, 2(nodes - 1) of them between nodes. A few bytes go by the LL protocol, whose latency this is: the
    // per-step alpha of the tiers is the Simple protocol's, fitted to messages of 16 MiB and more.
    constexpr double kBaseSeconds = 6.6e-6, kNvlinkStepSeconds = 0.6e-6, kPcieStepSeconds = 1.0e-6, kNetStepSeconds = 2.7e-6;
    const bool pcie = cluster.intraNode.name.find("PCIe") != std::string::npos;
    const double steps = 2.0 * (n - 1), interSteps = 2.0 * (placement.nodes - 1);
    return kBaseSeconds + (steps - interSteps) * (pcie ? kPcieStepSeconds : kNvlinkStepSeconds) + interSteps * kNetStepSeconds;
}

double ncclUserBufferCtas(Primitive p, const GroupPlacement& placement) {
    const bool gather = p == Primitive::AllGather;
    if (!gather && p != Primitive::ReduceScatter && p != Primitive::AllReduce) return 0.0;
    if (!placement.spansNodes()) return gather ? 4.0 : 5.0;
    if (placement.ranksPerNode > 1) return 16.0;
    return gather ? 1.0 : 4.0;
}

} // namespace tessel
