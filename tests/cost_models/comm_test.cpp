// Tests of the communication cost model: bus factors, ring/tree terms, hierarchical groups, tier choice.
#include "tessel/cost/comm.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <set>
#include <vector>

namespace tessel {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// An 8-GPU node with NVLink-like intra tier and an InfiniBand-like inter tier, built by hand.
ClusterConfig makeCluster() {
    ClusterConfig c;
    c.name = "test";
    c.gpusPerNode = 8;
    c.nodes = 16;
    c.intraNode.name = "nvlink";
    c.intraNode.bandwidthBytesPerSecond = 150e9;
    c.intraNode.latencySeconds = 3e-6;
    c.intraNode.efficiency = 0.8;
    c.interNode.name = "infiniband";
    c.interNode.bandwidthBytesPerSecond = 25e9;
    c.interNode.latencySeconds = 10e-6;
    c.interNode.efficiency = 0.9;
    return c;
}

GroupPlacement placement(int size, int nodes, int ranksPerNode) {
    GroupPlacement g;
    g.size = size;
    g.nodes = nodes;
    g.ranksPerNode = ranksPerNode;
    return g;
}

GroupPlacement inNode(int size) {
    return placement(size, 1, size);
}

// nccl-tests PERFORMANCE.md, written out independently of the implementation.
double ncclTestsFactor(Primitive p, int n) {
    if (p == Primitive::SendRecv) return 1.0;
    if (n == 1) return 0.0;
    switch (p) {
    case Primitive::AllReduce:
        return 2.0 * (n - 1) / n;
    case Primitive::AllGather:
    case Primitive::ReduceScatter:
    case Primitive::AllToAll:
        return static_cast<double>(n - 1) / n;
    default:
        return 1.0;
    }
}

// e(n), the expected maximum of n standard normals: closed forms for n <= 3 (1/sqrt(pi), 3/(2 sqrt(pi))) and
// tabulated values for larger n (Harter 1961; David & Nagaraja 2003, table of normal order statistics).
TEST(Comm, ExpectedMaxOfNormalsMatchesTables) {
    const double pi = std::acos(-1.0);
    EXPECT_EQ(expectedMaxOfNormals(1), 0.0);
    EXPECT_NEAR(expectedMaxOfNormals(2), 1.0 / std::sqrt(pi), 1e-6);
    EXPECT_NEAR(expectedMaxOfNormals(3), 1.5 / std::sqrt(pi), 1e-6);
    EXPECT_NEAR(expectedMaxOfNormals(4), 1.02938, 1e-5);
    EXPECT_NEAR(expectedMaxOfNormals(8), 1.42360, 1e-5);
    EXPECT_NEAR(expectedMaxOfNormals(100), 2.50759, 1e-5);
    // More ranks wait longer, ever more slowly (about sqrt(2 ln n)).
    double last = 0.0;
    for (int n : {2, 3, 4, 8, 16, 64, 256, 1024, 4096, 16384}) {
        const double e = expectedMaxOfNormals(n);
        EXPECT_GT(e, last) << n;
        EXPECT_LT(e, std::sqrt(2.0 * std::log(static_cast<double>(n))) + 1e-9) << n;
        last = e;
    }
}

// E[max(X, Y)] - max(E X, E Y) for two normals: s / sqrt(2 pi) when the means coincide (Clark 1961), the
// same for either order, vanishing with the gap, never negative; and against sampling (fixed seed, 2e6 pairs,
// within 5 standard errors) where the means are half a spread apart.
TEST(Comm, ExpectedMaxExcessOfTwoNormals) {
    const double pi = std::acos(-1.0);
    EXPECT_EQ(expectedMaxExcess(0.3, 0.0), 0.0);
    EXPECT_NEAR(expectedMaxExcess(0.0, 2.0), 2.0 / std::sqrt(2.0 * pi), 1e-15);
    EXPECT_EQ(expectedMaxExcess(0.7, 1.0), expectedMaxExcess(-0.7, 1.0));
    double last = expectedMaxExcess(0.0, 1.0);
    for (double d : {0.1, 0.5, 1.0, 2.0, 4.0, 8.0}) {
        const double e = expectedMaxExcess(d, 1.0);
        EXPECT_LT(e, last) << d;
        EXPECT_GE(e, 0.0) << d;
        last = e;
    }
    EXPECT_LT(expectedMaxExcess(8.0, 1.0), 1e-15);
    std::mt19937_64 rng(11);
    std::normal_distribution<double> x(0.0, std::sqrt(0.5)), y(0.5, std::sqrt(0.5)); // difference: spread 1
    const int n = 2000000;
    double sum = 0.0, sumSq = 0.0;
    for (int i = 0; i < n; ++i) {
        const double m = std::max(x(rng), y(rng)) - 0.5;
        sum += m;
        sumSq += m * m;
    }
    const double mean = sum / n, se = std::sqrt((sumSq / n - mean * mean) / n);
    EXPECT_NEAR(expectedMaxExcess(0.5, 1.0), mean, 5.0 * se);
}

TEST(Comm, Names) {
    EXPECT_EQ(toString(Primitive::AllReduce), "all_reduce");
    EXPECT_EQ(toString(Primitive::AllGather), "all_gather");
    EXPECT_EQ(toString(Primitive::ReduceScatter), "reduce_scatter");
    EXPECT_EQ(toString(Primitive::Broadcast), "broadcast");
    EXPECT_EQ(toString(Primitive::Reduce), "reduce");
    EXPECT_EQ(toString(Primitive::AllToAll), "all_to_all");
    EXPECT_EQ(toString(Primitive::SendRecv), "send_recv");
    EXPECT_EQ(toString(CommAlgorithm::Auto), "auto");
    EXPECT_EQ(toString(CommAlgorithm::Ring), "ring");
    EXPECT_EQ(toString(CommAlgorithm::Tree), "tree");
    const auto& all = allPrimitives();
    EXPECT_EQ(all.size(), 7u);
    EXPECT_EQ(std::set<Primitive>(all.begin(), all.end()).size(), 7u);
}

TEST(Comm, EfficiencyOverridePerPrimitive) {
    LinkTier tier;
    tier.efficiency = 0.8;
    tier.primitiveEfficiency[Primitive::AllToAll] = 0.5;
    EXPECT_DOUBLE_EQ(tier.efficiencyFor(Primitive::AllReduce), 0.8);
    EXPECT_DOUBLE_EQ(tier.efficiencyFor(Primitive::AllToAll), 0.5);
}

TEST(Comm, BusFactorsMatchNcclTests) {
    for (Primitive p : allPrimitives())
        for (int n = 1; n <= 64; ++n)
            EXPECT_DOUBLE_EQ(busFactor(p, n), ncclTestsFactor(p, n)) << toString(p) << n;
    EXPECT_DOUBLE_EQ(busFactor(Primitive::AllReduce, 8), 1.75);
    EXPECT_DOUBLE_EQ(busFactor(Primitive::AllGather, 4), 0.75);
    EXPECT_THROW(busFactor(Primitive::AllReduce, 0), InputError);
}

// Hand-computed: 2 x 7/8 x 2^30 / (150e9 x 0.8) + 14 x 3 us.
TEST(Comm, AllReduceOneGiBOnOneNodeByHand) {
    const ClusterConfig c = makeCluster();
    const CommCost ring = commCost(Primitive::AllReduce, kGiB, inNode(8), c, CommAlgorithm::Ring);
    const double bandwidthSeconds = 2.0 * 7.0 / 8.0 * kGiB / (150e9 * 0.8);
    EXPECT_DOUBLE_EQ(ring.bandwidthSeconds, bandwidthSeconds);
    EXPECT_DOUBLE_EQ(ring.latencySeconds, 14 * 3e-6);
    EXPECT_DOUBLE_EQ(ring.seconds, bandwidthSeconds + 14 * 3e-6);
    EXPECT_NEAR(ring.seconds, 0.015700, 1e-6);
    EXPECT_EQ(ring.algorithm, CommAlgorithm::Ring);
    EXPECT_FALSE(ring.hierarchical);
    EXPECT_EQ(ring.tier, "nvlink");

    // Tree: 2 x ceil(log2 8) = 6 alphas, same bandwidth term.
    const CommCost tree = commCost(Primitive::AllReduce, kGiB, inNode(8), c, CommAlgorithm::Tree);
    EXPECT_DOUBLE_EQ(tree.latencySeconds, 6 * 3e-6);
    EXPECT_DOUBLE_EQ(tree.bandwidthSeconds, bandwidthSeconds);
    EXPECT_EQ(tree.algorithm, CommAlgorithm::Tree);
}

TEST(Comm, PerPrimitiveEfficiencyIsUsed) {
    ClusterConfig c = makeCluster();
    c.intraNode.primitiveEfficiency[Primitive::AllGather] = 0.4;
    const CommCost ag = commCost(Primitive::AllGather, kGiB, inNode(8), c, CommAlgorithm::Ring);
    EXPECT_DOUBLE_EQ(ag.bandwidthSeconds, 7.0 / 8.0 * kGiB / (150e9 * 0.4));
    EXPECT_DOUBLE_EQ(ag.latencySeconds, 7 * 3e-6);
}

TEST(Comm, RingLatencyTermsByPrimitive) {
    const ClusterConfig c = makeCluster();
    const double alpha = c.intraNode.latencySeconds;
    const auto lat = [&](Primitive p, CommAlgorithm a) {
        return commCost(p, 1.0, inNode(8), c, a).latencySeconds;
    };
    EXPECT_DOUBLE_EQ(lat(Primitive::AllReduce, CommAlgorithm::Ring), 14 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::AllGather, CommAlgorithm::Ring), 7 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::ReduceScatter, CommAlgorithm::Ring), 7 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::Broadcast, CommAlgorithm::Ring), 7 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::Reduce, CommAlgorithm::Ring), 7 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::AllToAll, CommAlgorithm::Ring), 7 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::Broadcast, CommAlgorithm::Tree), 3 * alpha);
    EXPECT_DOUBLE_EQ(lat(Primitive::Reduce, CommAlgorithm::Tree), 3 * alpha);
    // ceil(log2 6) = 3.
    EXPECT_DOUBLE_EQ(commCost(Primitive::AllReduce, 1.0, inNode(6), c, CommAlgorithm::Tree).latencySeconds,
                     6 * alpha);
    EXPECT_DOUBLE_EQ(commCost(Primitive::SendRecv, 1.0, inNode(2), c, CommAlgorithm::Ring).latencySeconds,
                     alpha);
}

TEST(Comm, TreeWinsForTinyMessagesOnLargeGroups) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : {Primitive::AllReduce, Primitive::Broadcast, Primitive::Reduce}) {
        // 64 ranks over 64 nodes: NCCL's trees span nodes.
        const GroupPlacement g = placement(64, 64, 1);
        const CommCost ring = commCost(p, 8.0, g, c, CommAlgorithm::Ring);
        const CommCost tree = commCost(p, 8.0, g, c, CommAlgorithm::Tree);
        EXPECT_LT(tree.seconds, ring.seconds) << toString(p);
        const CommCost best = commCost(p, 8.0, g, c, CommAlgorithm::Auto);
        EXPECT_EQ(best.algorithm, CommAlgorithm::Tree) << toString(p);
        EXPECT_DOUBLE_EQ(best.seconds, tree.seconds);
        // Inside one node NCCL runs rings whatever the size (tuning.cc disables Tree when nNodes == 1).
        const CommCost inside = commCost(p, 8.0, inNode(64), c, CommAlgorithm::Auto);
        EXPECT_EQ(inside.algorithm, CommAlgorithm::Ring) << toString(p);
        EXPECT_DOUBLE_EQ(inside.seconds, commCost(p, 8.0, inNode(64), c, CommAlgorithm::Ring).seconds);
    }
}

TEST(Comm, RingMatchesTreeBandwidthForLargeMessages) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : {Primitive::AllReduce, Primitive::Broadcast, Primitive::Reduce}) {
        const CommCost ring = commCost(p, 4 * kGiB, inNode(64), c, CommAlgorithm::Ring);
        const CommCost tree = commCost(p, 4 * kGiB, inNode(64), c, CommAlgorithm::Tree);
        EXPECT_DOUBLE_EQ(ring.bandwidthSeconds, tree.bandwidthSeconds) << toString(p);
        EXPECT_NEAR(ring.seconds / tree.seconds, 1.0, 1e-2) << toString(p);
    }
}

TEST(Comm, TreeIsRingForPrimitivesWithoutTree) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : {Primitive::AllGather, Primitive::ReduceScatter, Primitive::AllToAll}) {
        const CommCost ring = commCost(p, kMiB, inNode(8), c, CommAlgorithm::Ring);
        const CommCost tree = commCost(p, kMiB, inNode(8), c, CommAlgorithm::Tree);
        EXPECT_DOUBLE_EQ(ring.seconds, tree.seconds) << toString(p);
        EXPECT_EQ(tree.algorithm, CommAlgorithm::Ring) << toString(p);
        EXPECT_EQ(commCost(p, kMiB, inNode(8), c).algorithm, CommAlgorithm::Ring) << toString(p);
    }
}

TEST(Comm, AutoIsTheMinimumOfRingAndTreeAcrossNodesAndRingInside) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : allPrimitives())
        for (double bytes : {8.0, 64 * 1024.0, kGiB})
            for (const GroupPlacement& g :
                 {inNode(2), inNode(8), placement(32, 4, 8), placement(16, 16, 1)}) {
                const GroupPlacement& where = p == Primitive::SendRecv ? placement(2, 2, 1) : g;
                const double ring = commCost(p, bytes, where, c, CommAlgorithm::Ring).seconds;
                const double tree = commCost(p, bytes, where, c, CommAlgorithm::Tree).seconds;
                EXPECT_DOUBLE_EQ(commCost(p, bytes, where, c).seconds, where.spansNodes() ? std::min(ring, tree) : ring)
                    << toString(p);
            }
}

TEST(Comm, SizeOneOrEmptyMessageCostsNothing) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : allPrimitives()) {
        for (CommAlgorithm a : {CommAlgorithm::Auto, CommAlgorithm::Ring, CommAlgorithm::Tree}) {
            const CommCost one = commCost(p, kGiB, inNode(1), c, a);
            EXPECT_EQ(one.seconds, 0.0) << toString(p);
            EXPECT_EQ(one.latencySeconds, 0.0);
            EXPECT_EQ(one.bandwidthSeconds, 0.0);
            EXPECT_EQ(commCost(p, 0.0, inNode(8), c, a).seconds, 0.0) << toString(p);
        }
    }
}

TEST(Comm, SendRecvUsesTheTierBetweenThePair) {
    const ClusterConfig c = makeCluster();
    const CommCost near = commCost(Primitive::SendRecv, 64 * kMiB, inNode(2), c);
    EXPECT_DOUBLE_EQ(near.seconds, 3e-6 + 64 * kMiB / (150e9 * 0.8));
    EXPECT_EQ(near.tier, "nvlink");
    const CommCost far = commCost(Primitive::SendRecv, 64 * kMiB, placement(2, 2, 1), c);
    EXPECT_DOUBLE_EQ(far.seconds, 10e-6 + 64 * kMiB / (25e9 * 0.9));
    EXPECT_EQ(far.tier, "infiniband");
    EXPECT_TRUE(far.hierarchical);
}

// A switchless full mesh (mesh_links 7, the MI300X platform's Infinity Fabric): a group of m of the node's GPUs
// reaches its members over m - 1 of each GPU's 7 links, a pair over one, by hand. 8 GPUs use the whole 448 GB/s,
// as a switch would; 2 GPUs one 64 GB/s link (two MI300X all-reduce at 47.7 GB/s of bus bandwidth, 0.745 of it).
TEST(Comm, AMeshGroupUsesTheLinksAmongItsMembers) {
    ClusterConfig c = makeCluster();
    c.intraNode.bandwidthBytesPerSecond = 448e9;
    c.intraNode.efficiency = 0.7;
    c.intraNode.meshLinks = 7;
    const double s = kGiB;
    const CommCost eight = commCost(Primitive::AllReduce, s, inNode(8), c, CommAlgorithm::Ring);
    EXPECT_DOUBLE_EQ(eight.bandwidthSeconds, 2.0 * 7.0 / 8.0 * s / (448e9 * 0.7));
    const CommCost four = commCost(Primitive::AllReduce, s, inNode(4), c, CommAlgorithm::Ring);
    EXPECT_DOUBLE_EQ(four.bandwidthSeconds, 2.0 * 3.0 / 4.0 * s / (448e9 * 0.7 * 3.0 / 7.0));
    const CommCost two = commCost(Primitive::AllGather, s, inNode(2), c, CommAlgorithm::Ring);
    EXPECT_DOUBLE_EQ(two.bandwidthSeconds, 0.5 * s / (64e9 * 0.7));
    const CommCost pair = commCost(Primitive::SendRecv, s, inNode(2), c);
    EXPECT_DOUBLE_EQ(pair.bandwidthSeconds, s / (64e9 * 0.7));
    // A group spanning nodes with 4 ranks on each: its NVLink side is the 4-member mesh's 3 links.
    const CommCost spread = commCost(Primitive::AllReduce, s, placement(8, 2, 4), c, CommAlgorithm::Ring);
    const double ringBytes = 2.0 * 7.0 / 8.0 * s;
    EXPECT_DOUBLE_EQ(spread.bandwidthSeconds, std::max(ringBytes / 4.0 / (25e9 * 0.9), ringBytes / (448e9 * 0.7 * 3.0 / 7.0)));
    // Behind a switch (mesh_links 0) every group size runs at the whole bandwidth.
    c.intraNode.meshLinks = 0;
    EXPECT_DOUBLE_EQ(commCost(Primitive::SendRecv, s, inNode(2), c).bandwidthSeconds, s / (448e9 * 0.7));
}

// 16 ranks on 2 nodes of 8 as NCCL's ring runs them, by hand: every rank moves 2(n-1)/n S; a node's share of
// it leaves through its 8 NICs while NVLink carries the rest, at once, so the busier side sets the time. The
// ring's 30 steps advance in lockstep at the slower hop's alpha.
TEST(Comm, SpanningRingAllReduceByHand) {
    const ClusterConfig c = makeCluster();
    const double s = kGiB;
    const CommCost cost = commCost(Primitive::AllReduce, s, placement(16, 2, 8), c, CommAlgorithm::Ring);
    const double intraRate = 150e9 * 0.8;
    const double interRate = 25e9 * 0.9;
    const double ringBytes = 2.0 * 15.0 / 16.0 * s;
    const double nic = ringBytes / 8.0 / interRate;  // 11.2 ms
    const double nvlink = ringBytes / intraRate;     // 16.8 ms: NVLink is the bound here
    EXPECT_GT(nvlink, nic);
    EXPECT_DOUBLE_EQ(cost.bandwidthSeconds, std::max(nic, nvlink));
    EXPECT_DOUBLE_EQ(cost.latencySeconds, 30 * 10e-6);
    EXPECT_DOUBLE_EQ(cost.seconds, cost.bandwidthSeconds + cost.latencySeconds);
    EXPECT_TRUE(cost.hierarchical);
    EXPECT_EQ(cost.tier, "infiniband");
    // The tree keeps the ring's bandwidth and takes its latency as phases: RS(8) + tree over 2 nodes + AG(8).
    const CommCost tree = commCost(Primitive::AllReduce, s, placement(16, 2, 8), c, CommAlgorithm::Tree);
    EXPECT_DOUBLE_EQ(tree.bandwidthSeconds, cost.bandwidthSeconds);
    EXPECT_DOUBLE_EQ(tree.latencySeconds, 7 * 3e-6 + 2 * 1 * 10e-6 + 7 * 3e-6);
}

// A slow NIC makes the inter side the bound: then the time is the node's ring bytes over its 8 NICs, which is
// what nccl-tests shows across nodes (bus bandwidth = NICs per node x the NIC's rate, nccl#307).
TEST(Comm, SpanningRingAllGatherAndReduceScatterByHand) {
    ClusterConfig c = makeCluster();
    c.interNode.bandwidthBytesPerSecond = 12.5e9;
    const double s = kGiB;
    const double interRate = 12.5e9 * 0.9;
    // 32 ranks on 4 nodes of 8.
    const double ringBytes = 31.0 / 32.0 * s;
    const CommCost ag = commCost(Primitive::AllGather, s, placement(32, 4, 8), c);
    EXPECT_DOUBLE_EQ(ag.bandwidthSeconds, ringBytes / 8.0 / interRate);
    EXPECT_GT(ag.bandwidthSeconds, ringBytes / (150e9 * 0.8));
    EXPECT_DOUBLE_EQ(ag.latencySeconds, 31 * 10e-6);
    EXPECT_NEAR(ringBytes / ag.bandwidthSeconds, 8 * interRate, 1e-3); // bus bandwidth = 8 NICs
    const CommCost rs = commCost(Primitive::ReduceScatter, s, placement(32, 4, 8), c);
    EXPECT_DOUBLE_EQ(rs.seconds, ag.seconds);
}

// The same bytes over 2 or 8 nodes take about the same time once the NICs bound: (n-1)/n of S over k NICs.
// A sum of an inter and an intra phase grew 1.32x from two nodes to eight on these links (FORMULAS.md §5).
TEST(Comm, SpanningRingGrowsWithTheRingFactorOnly) {
    ClusterConfig c = makeCluster();
    c.interNode.bandwidthBytesPerSecond = 12.5e9;
    const double two = commCost(Primitive::AllGather, kGiB, placement(16, 2, 8), c).bandwidthSeconds;
    const double eight = commCost(Primitive::AllGather, kGiB, placement(64, 8, 8), c).bandwidthSeconds;
    EXPECT_NEAR(eight / two, (63.0 / 64.0) / (15.0 / 16.0), 1e-12);
}

TEST(Comm, HierarchicalBroadcastAndAllToAllByHand) {
    const ClusterConfig c = makeCluster();
    const double s = kGiB;
    const double intraRate = 150e9 * 0.8;
    const double interRate = 25e9 * 0.9;
    const CommCost bc = commCost(Primitive::Broadcast, s, placement(32, 4, 8), c, CommAlgorithm::Ring);
    EXPECT_DOUBLE_EQ(bc.bandwidthSeconds, s / interRate + s / intraRate);
    EXPECT_DOUBLE_EQ(bc.latencySeconds, 3 * 10e-6 + 7 * 3e-6);
    const CommCost bcTree = commCost(Primitive::Broadcast, s, placement(32, 4, 8), c, CommAlgorithm::Tree);
    EXPECT_DOUBLE_EQ(bcTree.latencySeconds, 2 * 10e-6 + 3 * 3e-6);

    // All-to-all: 24 of 32 peers off-node, 7 on-node; the slower side bounds; 31 inter alphas.
    const CommCost a2a = commCost(Primitive::AllToAll, s, placement(32, 4, 8), c);
    EXPECT_DOUBLE_EQ(a2a.bandwidthSeconds, std::max(s * 24.0 / 32.0 / interRate, s * 7.0 / 32.0 / intraRate));
    EXPECT_DOUBLE_EQ(a2a.latencySeconds, 31 * 10e-6);
    // With a very slow intra tier, the on-node side is the bound.
    ClusterConfig slowIntra = c;
    slowIntra.intraNode.bandwidthBytesPerSecond = 1e9;
    const CommCost a2aSlow = commCost(Primitive::AllToAll, s, placement(32, 4, 8), slowIntra);
    EXPECT_DOUBLE_EQ(a2aSlow.bandwidthSeconds, s * 7.0 / 32.0 / (1e9 * 0.8));
    EXPECT_EQ(a2aSlow.tier, "nvlink"); // the slowest tier used
}

// One rank per node (a DP group in the default order): the intra phases vanish and it is a flat IB ring.
TEST(Comm, OneRankPerNodeIsAFlatInterNodeCollective) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : {Primitive::AllReduce, Primitive::AllGather, Primitive::ReduceScatter,
                        Primitive::Broadcast, Primitive::Reduce, Primitive::AllToAll}) {
        const CommCost cost = commCost(p, kGiB, placement(16, 16, 1), c, CommAlgorithm::Ring);
        const double rate = c.interNode.bandwidthBytesPerSecond * c.interNode.efficiencyFor(p);
        EXPECT_DOUBLE_EQ(cost.bandwidthSeconds, kGiB * busFactor(p, 16) / rate) << toString(p);
        const double steps = p == Primitive::AllReduce ? 30.0 : 15.0;
        EXPECT_DOUBLE_EQ(cost.latencySeconds, steps * c.interNode.latencySeconds) << toString(p);
        EXPECT_EQ(cost.tier, "infiniband");
    }
}

// An uneven group, 12 ranks as 8 + 4 on two nodes: the node with 4 ranks sends the ring's traffic through
// its 4 NICs, and bounds it.
TEST(Comm, AnUnevenGroupIsBoundByItsEmptiestNode) {
    ClusterConfig c = makeCluster();
    c.interNode.bandwidthBytesPerSecond = 12.5e9;
    std::vector<int> ranks;
    for (int r = 0; r < 12; ++r) ranks.push_back(r);
    const GroupPlacement uneven = placeRanks(ranks, 8);
    EXPECT_EQ(uneven.nodes, 2);
    EXPECT_EQ(uneven.ranksPerNode, 8);
    EXPECT_EQ(uneven.minRanksPerNode, 4);
    const CommCost ag = commCost(Primitive::AllGather, kGiB, uneven, c);
    EXPECT_DOUBLE_EQ(ag.bandwidthSeconds, 11.0 / 12.0 * kGiB / 4.0 / (12.5e9 * 0.9));
}

// With identical tiers a spanning group costs what the flat ring over one tier does: the same bytes, and its
// steps at the same alpha.
TEST(Comm, SpanningRingEqualsTheFlatRingWithEqualTiers) {
    ClusterConfig c = makeCluster();
    c.interNode = c.intraNode;
    c.interNode.name = "same";
    for (Primitive p : {Primitive::AllReduce, Primitive::AllGather, Primitive::ReduceScatter}) {
        const CommCost spread = commCost(p, kGiB, placement(32, 4, 8), c, CommAlgorithm::Ring);
        const CommCost flat = commCost(p, kGiB, inNode(32), c, CommAlgorithm::Ring);
        EXPECT_NEAR(spread.bandwidthSeconds, flat.bandwidthSeconds, 1e-12 * flat.bandwidthSeconds) << toString(p);
        EXPECT_NEAR(spread.latencySeconds, flat.latencySeconds, 1e-18) << toString(p);
    }
}

// A group spread over nodes never beats the same group on the (faster) intra tier: its bandwidth part at every
// size, and its whole time on the ring from 64 MiB (below, broadcast's N-1 + k-1 chain steps can beat the
// packed chain's n-1 on latency). NCCL's tree runs
// only across nodes (one node rings), and its 2(k-1) + 2 log2 N steps against the packed ring's 2(n-1) can
// save tens of microseconds at any size, so with a tree only the bandwidth part is compared.
TEST(Comm, HierarchicalIsNoFasterThanIntraOnly) {
    const ClusterConfig c = makeCluster();
    for (Primitive p : allPrimitives()) {
        const GroupPlacement spread = p == Primitive::SendRecv ? placement(2, 2, 1) : placement(16, 2, 8);
        const GroupPlacement packed = p == Primitive::SendRecv ? inNode(2) : inNode(16);
        for (double bytes = 1.0; bytes <= 8 * kGiB; bytes *= 4.0) {
            for (CommAlgorithm a : {CommAlgorithm::Auto, CommAlgorithm::Ring, CommAlgorithm::Tree}) {
                const CommCost hier = commCost(p, bytes, spread, c, a);
                const CommCost intra = commCost(p, bytes, packed, c, a);
                EXPECT_GE(hier.bandwidthSeconds, intra.bandwidthSeconds) << toString(p) << " " << bytes;
                if (a == CommAlgorithm::Ring && bytes >= 64 * kMiB)
                    EXPECT_GE(hier.seconds, intra.seconds) << toString(p) << " " << bytes;
            }
        }
    }
}

TEST(Comm, MonotonicInBytes) {
    const ClusterConfig c = makeCluster();
    const std::vector<GroupPlacement> groups{
        inNode(2),          inNode(8), placement(16, 2, 8), placement(64, 8, 8), placement(16, 16, 1),
        placement(12, 2, 8)};
    for (Primitive p : allPrimitives()) {
        for (const GroupPlacement& g : groups) {
            const GroupPlacement& where =
                p == Primitive::SendRecv ? (g.nodes > 1 ? placement(2, 2, 1) : inNode(2)) : g;
            for (CommAlgorithm a : {CommAlgorithm::Auto, CommAlgorithm::Ring, CommAlgorithm::Tree}) {
                double previous = 0.0;
                for (double bytes = 0.0; bytes <= 16 * kGiB; bytes = bytes == 0.0 ? 1.0 : bytes * 2.0) {
                    const double seconds = commCost(p, bytes, where, c, a).seconds;
                    EXPECT_GE(seconds, previous) << toString(p) << " " << bytes;
                    previous = seconds;
                }
                EXPECT_GT(previous, 0.0);
            }
        }
    }
}

TEST(Comm, LargerGroupsCostMoreForAllReduce) {
    const ClusterConfig c = makeCluster();
    double previous = 0.0;
    for (int n = 2; n <= 8; ++n) {
        const double seconds = commCost(Primitive::AllReduce, kGiB, inNode(n), c).seconds;
        EXPECT_GT(seconds, previous);
        previous = seconds;
    }
}

// Which tier a group uses follows from rank_order and the node size (DESIGN.md §4), end to end.
TEST(Comm, TierFollowsRankOrder) {
    const ClusterConfig c = makeCluster();
    Plan p;
    p.tp = 8;
    p.pp = 8;
    p.dp = 16;
    const CommCost tp = commCost(Primitive::AllReduce, kGiB, placeGroup(p, c, GroupKind::Tp), c);
    EXPECT_EQ(tp.tier, "nvlink");
    EXPECT_FALSE(tp.hierarchical);
    const CommCost dp = commCost(Primitive::AllReduce, kGiB, placeGroup(p, c, GroupKind::Dp), c);
    EXPECT_EQ(dp.tier, "infiniband");
    EXPECT_TRUE(dp.hierarchical);
    EXPECT_GT(dp.seconds, tp.seconds);

    p.dp = 8;
    p.rankOrder = {ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp};
    const CommCost dpNear = commCost(Primitive::AllReduce, kGiB, placeGroup(p, c, GroupKind::Dp), c);
    EXPECT_EQ(dpNear.tier, "nvlink");
    EXPECT_FALSE(dpNear.hierarchical);
    EXPECT_EQ(commCost(Primitive::AllReduce, kGiB, placeGroup(p, c, GroupKind::Tp), c).tier, "infiniband");
}

TEST(Comm, BadInputThrows) {
    ClusterConfig c = makeCluster();
    EXPECT_THROW(commCost(Primitive::AllReduce, -1.0, inNode(8), c), InputError);
    EXPECT_THROW(commCost(Primitive::AllReduce, 1.0, placement(8, 0, 0), c), InputError);
    c.intraNode.bandwidthBytesPerSecond = 0.0;
    EXPECT_THROW(commCost(Primitive::AllReduce, 1.0, inNode(8), c), InputError);
}

// NCCL's SMs for a collective on registered user buffers: Megatron-core's table (nccl_ub), by where the group runs.
TEST(Comm, UserBufferCollectivesHoldMegatronCoresTableOfSms) {
    GroupPlacement node; // 8 ranks inside one NVLink domain
    node.size = 8;
    node.ranksPerNode = 8;
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::AllGather, node), 4.0);
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::ReduceScatter, node), 5.0);
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::AllReduce, node), 5.0);
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::AllToAll, node), 0.0); // not one of the registered collectives
    GroupPlacement nodes = node; // 4 nodes of 8: NVLink and the NICs
    nodes.size = 32;
    nodes.nodes = 4;
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::AllGather, nodes), 16.0);
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::ReduceScatter, nodes), 16.0);
    GroupPlacement nics; // one rank a node: the NICs alone
    nics.size = 16;
    nics.nodes = 16;
    nics.ranksPerNode = 1;
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::AllGather, nics), 1.0);
    EXPECT_DOUBLE_EQ(ncclUserBufferCtas(Primitive::ReduceScatter, nics), 4.0);
}

// The measured share of κ a kernel's CTAs make (contention_by_ctas): straight lines from (0, 0), held past the last
// point; a collective on c CTAs is charged κ - share(NCCL's channels) + share(c); without the curve, κ.
TEST(Comm, ACollectiveOnFewerCtasThanNcclsChannelsIsChargedLess) {
    GpuSpec g;
    g.commContention = 0.87;
    g.ncclCollChannels = 32;
    EXPECT_DOUBLE_EQ(g.contentionShareOfCtas(8.0), 0.0);
    EXPECT_DOUBLE_EQ(g.collectiveContention(4.0), 0.87); // no curve
    g.contentionByCtas = {{8.0, 0.139}, {16.0, 0.34}, {32.0, 0.433}, {64.0, 0.571}};
    EXPECT_DOUBLE_EQ(g.contentionShareOfCtas(0.0), 0.0);
    EXPECT_NEAR(g.contentionShareOfCtas(4.0), 0.0695, 1e-12);
    EXPECT_NEAR(g.contentionShareOfCtas(24.0), (0.34 + 0.433) / 2.0, 1e-12);
    EXPECT_DOUBLE_EQ(g.contentionShareOfCtas(128.0), 0.571);
    EXPECT_NEAR(g.collectiveContention(4.0), 0.87 - 0.433 + 0.0695, 1e-12);
    EXPECT_NEAR(g.collectiveContention(32.0), 0.87, 1e-12); // NCCL's own channels: κ itself
    g.ncclCollChannels = 0;
    EXPECT_DOUBLE_EQ(g.collectiveContention(4.0), 0.87); // no channel count to stand in for
}

// The presets' all-to-all read back against NVIDIA's own figures (GTC 2025 session S72583, the slide
// "All-to-all Communication Bandwidth", NCCL tests alltoall bus bandwidth): 8 GPUs of a node, A100 210, H100
// 320, B200 640 GB/s; 32 GPUs on four nodes of eight, DGX A100 (8 x 200 Gb/s) 24 and DGX H100 (8 x 400 Gb/s)
// 48 GB/s; 32 GPUs of one GB200 NVL72 rack 640 GB/s. busbw = algbw x (n - 1)/n (nccl-tests PERFORMANCE.md),
// at a message whose latency is negligible.
TEST(Comm, PresetAllToAllIsNvidiasMeasuredBusBandwidth) {
    struct Case {
        const char* preset;
        int ranks, nodes, perNode;
        double busGBps;
    };
    for (const Case& k : {Case{"dgx-a100-80g", 8, 1, 8, 210.0}, Case{"dgx-h100-80g", 8, 1, 8, 320.0},
                          Case{"dgx-b200", 8, 1, 8, 640.0}, Case{"dgx-a100-80g", 32, 4, 8, 24.0},
                          Case{"dgx-h100-80g", 32, 4, 8, 48.0}, Case{"gb200-nvl72", 32, 1, 32, 640.0}}) {
        const ClusterConfig c = test::clusterPreset(k.preset);
        const double s = 64.0 * kGiB;
        const CommCost cost = commCost(Primitive::AllToAll, s, placement(k.ranks, k.nodes, k.perNode), c);
        const double bus = s / cost.bandwidthSeconds * (k.ranks - 1.0) / k.ranks;
        EXPECT_NEAR(bus / 1e9, k.busGBps, 0.01 * k.busGBps) << k.preset << ", " << k.ranks << " GPUs";
    }
}

} // namespace
} // namespace tessel
