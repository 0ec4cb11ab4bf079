// Tests of the rank layout by rank_order, process-group membership and placement of groups on nodes.
#include "tessel/cost/topology.hpp"

#include <algorithm>
#include <array>
#include <gtest/gtest.h>
#include <map>
#include <numeric>
#include <set>
#include <vector>

namespace tessel {
namespace {

// Megatron-core 0.9's layout, EP carved out of dp whatever cp is: the grids below run every rank order, which
// Megatron-core's own expert layout (0.10 on, MegatronCoreExpertLayout... below) restricts to pp last.
Plan makePlan(int tp, int pp, int dp, int cp = 1, int ep = 1,
              std::array<ParallelDim, 5> order = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep,
                                                  ParallelDim::Dp, ParallelDim::Pp}) {
    Plan p;
    p.framework.name = "megatron";
    p.framework.version = "core_r0.9.0";
    p.tp = tp;
    p.pp = pp;
    p.dp = dp;
    p.cp = cp;
    p.ep = ep;
    p.rankOrder = order;
    return p;
}

ClusterConfig makeCluster(int gpusPerNode, int nodes) {
    ClusterConfig c;
    c.name = "test";
    c.gpusPerNode = gpusPerNode;
    c.nodes = nodes;
    c.intraNode.name = "nvlink";
    c.intraNode.bandwidthBytesPerSecond = 150e9;
    c.interNode.name = "infiniband";
    c.interNode.bandwidthBytesPerSecond = 25e9;
    return c;
}

std::vector<int> iota(int first, int count, int step = 1) {
    std::vector<int> v;
    for (int i = 0; i < count; ++i)
        v.push_back(first + i * step);
    return v;
}

const std::vector<GroupKind> kAllKinds{GroupKind::Tp,        GroupKind::Cp,          GroupKind::Ep,
                                       GroupKind::Dp,        GroupKind::ExpertDp,    GroupKind::DpCp,
                                       GroupKind::Pp,        GroupKind::PpPair,      GroupKind::ZeroShard,
                                       GroupKind::ZeroReplica, GroupKind::ExpertZeroShard, GroupKind::ExpertZeroReplica,
                                       GroupKind::ExpertTp};

int expectedGroupSize(const Plan& p, GroupKind kind) {
    switch (kind) {
    case GroupKind::Tp:
        return p.tp;
    case GroupKind::Cp:
        return p.cp;
    case GroupKind::Ep:
        return p.ep;
    case GroupKind::Dp:
        return p.dp;
    case GroupKind::ExpertDp:
        return p.expertGradientGroup();
    case GroupKind::ExpertTp:
        return p.expertTp();
    case GroupKind::DpCp:
        return p.dp * p.cp;
    case GroupKind::Pp:
        return p.pp;
    case GroupKind::PpPair:
        return 2;
    case GroupKind::ZeroShard:
        return (p.cp > 1 ? p.dp * p.cp : p.dp) / p.zeroReplicas;
    case GroupKind::ExpertZeroShard:
        return p.expertGradientGroup() / p.zeroReplicas;
    case GroupKind::ZeroReplica:
    case GroupKind::ExpertZeroReplica:
        return p.zeroReplicas;
    }
    return 0;
}

// All 120 orders of the five dims.
std::vector<std::array<ParallelDim, 5>> allOrders() {
    std::array<ParallelDim, 5> order{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp,
                                     ParallelDim::Pp};
    std::sort(order.begin(), order.end());
    std::vector<std::array<ParallelDim, 5>> out;
    do
        out.push_back(order);
    while (std::next_permutation(order.begin(), order.end()));
    return out;
}

// A grid of small plans (ep divides dp) to run the property tests over.
std::vector<Plan> planGrid() {
    std::vector<Plan> plans;
    for (int tp : {1, 2, 4})
        for (int cp : {1, 2})
            for (int ep : {1, 2})
                for (int dp : {2, 4})
                    for (int pp : {1, 3})
                        plans.push_back(makePlan(tp, pp, dp, cp, ep));
    return plans;
}

TEST(Topology, GroupKindNames) {
    const std::vector<std::string> names{"tp", "cp", "ep", "dp", "expert_dp", "dp_cp", "pp", "pp_pair",
                                         "zero_shard", "zero_replica", "expert_zero_shard", "expert_zero_replica",
                                         "expert_tp"};
    ASSERT_EQ(static_cast<int>(names.size()), kGroupKinds);
    ASSERT_EQ(kAllKinds.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i)
        EXPECT_EQ(toString(kAllKinds[i]), names[i]);
}

// tp=8, pp=8, dp=16 on 8-GPU nodes with the default order tp-cp-ep-dp-pp: strides tp 1, dp 8, pp 128.
TEST(Topology, DefaultOrderCoordinatesByHand) {
    const Plan p = makePlan(8, 8, 16);
    const RankCoords c = rankCoords(p, 3 + 8 * 5 + 128 * 2);
    EXPECT_EQ(c.tp, 3);
    EXPECT_EQ(c.edp, 5);
    EXPECT_EQ(c.ep, 0);
    EXPECT_EQ(c.cp, 0);
    EXPECT_EQ(c.pp, 2);
    EXPECT_EQ(c.dpIndex(p), 5);
    EXPECT_EQ(rankOf(p, c), 3 + 8 * 5 + 128 * 2);
}

TEST(Topology, DefaultOrderTpGroupIsOneNode) {
    const Plan p = makePlan(8, 8, 16);
    const ClusterConfig cluster = makeCluster(8, 128);
    EXPECT_EQ(groupRanks(p, GroupKind::Tp, 0), iota(0, 8));
    EXPECT_EQ(groupRanks(p, GroupKind::Tp, 13), iota(8, 8));
    EXPECT_EQ(groupRanks(p, GroupKind::Tp, 1023), iota(1016, 8));
    const GroupPlacement tp = placeGroup(p, cluster, GroupKind::Tp);
    EXPECT_EQ(tp.size, 8);
    EXPECT_EQ(tp.nodes, 1);
    EXPECT_EQ(tp.ranksPerNode, 8);
    EXPECT_FALSE(tp.spansNodes());
}

TEST(Topology, DefaultOrderDpGroupSpansSixteenNodes) {
    const Plan p = makePlan(8, 8, 16);
    const ClusterConfig cluster = makeCluster(8, 128);
    EXPECT_EQ(groupRanks(p, GroupKind::Dp, 0), iota(0, 16, 8));     // {0, 8, ..., 120}
    EXPECT_EQ(groupRanks(p, GroupKind::Dp, 130), iota(130, 16, 8)); // tp 2, stage 1
    const GroupPlacement dp = placeGroup(p, cluster, GroupKind::Dp);
    EXPECT_EQ(dp.size, 16);
    EXPECT_EQ(dp.nodes, 16);
    EXPECT_EQ(dp.ranksPerNode, 1);
    EXPECT_TRUE(dp.spansNodes());
}

TEST(Topology, DefaultOrderPpGroupStridesOverStages) {
    const Plan p = makePlan(8, 8, 16);
    const ClusterConfig cluster = makeCluster(8, 128);
    EXPECT_EQ(groupRanks(p, GroupKind::Pp, 0), iota(0, 8, 128)); // {0, 128, ..., 896}
    EXPECT_EQ(groupRanks(p, GroupKind::Pp, 300), iota(300 % 128, 8, 128));
    const GroupPlacement pp = placeGroup(p, cluster, GroupKind::Pp);
    EXPECT_EQ(pp.size, 8);
    EXPECT_EQ(pp.nodes, 8);
    EXPECT_EQ(pp.ranksPerNode, 1);
}

TEST(Topology, DpFirstOrderMakesDpIntraNode) {
    const std::array<ParallelDim, 5> dpFirst{ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp,
                                             ParallelDim::Ep, ParallelDim::Pp};
    const ClusterConfig cluster = makeCluster(8, 64);
    const Plan p = makePlan(8, 8, 8, 1, 1, dpFirst);
    EXPECT_EQ(groupRanks(p, GroupKind::Dp, 0), iota(0, 8));
    EXPECT_EQ(groupRanks(p, GroupKind::Tp, 0), iota(0, 8, 8));
    const GroupPlacement dp = placeGroup(p, cluster, GroupKind::Dp);
    EXPECT_EQ(dp.nodes, 1);
    EXPECT_EQ(dp.ranksPerNode, 8);
    const GroupPlacement tp = placeGroup(p, cluster, GroupKind::Tp);
    EXPECT_EQ(tp.nodes, 8);
    EXPECT_EQ(tp.ranksPerNode, 1);

    // dp=16 no longer fits a node: two full nodes of 8.
    const Plan p16 = makePlan(8, 8, 16, 1, 1, dpFirst);
    const GroupPlacement dp16 = placeGroup(p16, makeCluster(8, 128), GroupKind::Dp);
    EXPECT_EQ(groupRanks(p16, GroupKind::Dp, 0), iota(0, 16));
    EXPECT_EQ(dp16.nodes, 2);
    EXPECT_EQ(dp16.ranksPerNode, 8);
}

// EP is carved out of DP: with tp=1, dp=8, ep=4 the dense DP group is ep x dp/ep = 8 ranks.
TEST(Topology, ExpertParallelCarvedOutOfDataParallel) {
    const Plan p = makePlan(1, 1, 8, 1, 4);
    EXPECT_EQ(groupRanks(p, GroupKind::Ep, 0), iota(0, 4));
    EXPECT_EQ(groupRanks(p, GroupKind::Ep, 5), iota(4, 4));
    EXPECT_EQ(groupRanks(p, GroupKind::ExpertDp, 0), (std::vector<int>{0, 4}));
    EXPECT_EQ(groupRanks(p, GroupKind::ExpertDp, 6), (std::vector<int>{2, 6}));
    EXPECT_EQ(groupRanks(p, GroupKind::Dp, 3), iota(0, 8));
    const RankCoords c = rankCoords(p, 6);
    EXPECT_EQ(c.ep, 2);
    EXPECT_EQ(c.edp, 1);
    EXPECT_EQ(c.dpIndex(p), 6);
    // With cp the CP ranks hold the same experts and see other tokens: the expert gradient group spans them too
    // (Megatron-core's expert data-parallel group with CP): cp 2 x dp/ep 2, cp fastest.
    const Plan withCp = makePlan(1, 1, 4, 2, 2);
    EXPECT_EQ(groupRanks(withCp, GroupKind::ExpertDp, 0), (std::vector<int>{0, 1, 4, 5}));
    EXPECT_EQ(groupRanks(withCp, GroupKind::ExpertDp, 3), (std::vector<int>{2, 3, 6, 7}));
}

// MoE parallel folding (etp != tp), laid out as Megatron-core's expert RankGenerator does: rank_order with sizes
// etp, 1 (cp), ep, tp x cp x dp / (etp x ep), pp. Qwen3 235B-A22B on 256 H100 (Megatron-Bridge): tp 2, pp 8, dp 16,
// ep 32, etp 1: each stage's 32 ranks (four 8-GPU nodes) are one EP group; every expert is whole on its rank.
TEST(Topology, FoldedExpertLayoutSpansTheStagesTpAndDpRanks) {
    Plan p = makePlan(2, 8, 16, 1, 32);
    p.etp = 1;
    ASSERT_TRUE(p.expertFolded());
    EXPECT_EQ(p.expertDp(), 1);
    EXPECT_EQ(groupRanks(p, GroupKind::Ep, 0), iota(0, 32));
    EXPECT_EQ(groupRanks(p, GroupKind::Ep, 32 * 3 + 5), iota(32 * 3, 32));
    EXPECT_EQ(groupRanks(p, GroupKind::ExpertTp, 7), (std::vector<int>{7}));
    EXPECT_EQ(groupRanks(p, GroupKind::ExpertDp, 7), (std::vector<int>{7}));
    // The dense groups are the plan's: TP pairs, DP over the 16 pairs of a stage.
    EXPECT_EQ(groupRanks(p, GroupKind::Tp, 7), (std::vector<int>{6, 7}));
    EXPECT_EQ(groupRanks(p, GroupKind::Dp, 1), iota(1, 16, 2));
    EXPECT_EQ(rankCoords(p, 7).dpIndex(p), 3);
    EXPECT_EQ(placeGroup(p, makeCluster(8, 32), GroupKind::Ep).nodes, 4);

    // tp 4, dp 4, ep 4, etp 2 on 16 ranks: expert coordinates etp (stride 1), ep (stride 2), edp (stride 8).
    Plan q = makePlan(4, 1, 4, 1, 4);
    q.etp = 2;
    EXPECT_EQ(q.expertDp(), 2);
    EXPECT_EQ(groupRanks(q, GroupKind::ExpertTp, 0), (std::vector<int>{0, 1}));
    EXPECT_EQ(groupRanks(q, GroupKind::Ep, 0), (std::vector<int>{0, 2, 4, 6}));
    EXPECT_EQ(groupRanks(q, GroupKind::Ep, 9), (std::vector<int>{9, 11, 13, 15}));
    EXPECT_EQ(groupRanks(q, GroupKind::ExpertDp, 3), (std::vector<int>{3, 11}));
    EXPECT_EQ(groupRanks(q, GroupKind::Tp, 5), iota(4, 4));
    // With cp 2 the expert layout takes the CP ranks too (its cp is 1): tp 2, cp 2, dp 2, ep 8, etp 1.
    Plan r = makePlan(2, 1, 2, 2, 8);
    r.etp = 1;
    EXPECT_EQ(groupRanks(r, GroupKind::Ep, 3), iota(0, 8));
    // etp equal to tp is the unfolded layout (EP carved out of dp).
    Plan same = makePlan(2, 1, 4, 1, 2);
    same.etp = 2;
    EXPECT_FALSE(same.expertFolded());
    EXPECT_EQ(groupRanks(same, GroupKind::Ep, 0), (std::vector<int>{0, 2}));
    EXPECT_EQ(groupRanks(same, GroupKind::ExpertTp, 0), groupRanks(same, GroupKind::Tp, 0));
}

// Megatron-core from 0.10 lays the expert layers out with a RankGenerator of their own whatever etp is (sizes etp, 1,
// ep, tp x cp x dp / (etp x ep), pp; parallel_state.py): with cp > 1 an EP group takes CP ranks before data-parallel
// ones and ep may exceed dp. tp 2, cp 2, dp 2 on 8 ranks, default order tp-cp-ep-dp-pp.
TEST(Topology, MegatronCoreExpertLayoutTakesCpRanksFirst) {
    Plan carved = makePlan(2, 1, 2, 2, 2);
    Plan own = carved;
    own.framework.version = "core_r0.10.0";
    ASSERT_FALSE(carved.expertLayoutApart());
    ASSERT_TRUE(own.expertLayoutApart());
    EXPECT_FALSE(own.expertFolded());
    // ep 2 carved out of dp 2: EP strides over tp x cp (4); its expert data-parallel group is the CP pair.
    EXPECT_EQ(groupRanks(carved, GroupKind::Ep, 0), (std::vector<int>{0, 4}));
    EXPECT_EQ(groupRanks(carved, GroupKind::ExpertDp, 0), (std::vector<int>{0, 2}));
    // Megatron-core's own layout: tp (stride 1), ep (stride 2), edp = cp x dp / ep = 2 (stride 4): the same sizes,
    // the groups swapped.
    EXPECT_EQ(groupRanks(own, GroupKind::Ep, 0), (std::vector<int>{0, 2}));
    EXPECT_EQ(groupRanks(own, GroupKind::ExpertDp, 0), (std::vector<int>{0, 4}));
    EXPECT_EQ(groupRanks(own, GroupKind::ExpertTp, 5), groupRanks(own, GroupKind::Tp, 5));
    EXPECT_EQ(own.expertGradientGroup(), 2);
    EXPECT_EQ(own.expertZeroShardSize(), 2);
    // The dense groups do not move: CP pairs {0, 2}, DP pairs {0, 4}.
    EXPECT_EQ(groupRanks(own, GroupKind::Cp, 0), groupRanks(carved, GroupKind::Cp, 0));
    EXPECT_EQ(groupRanks(own, GroupKind::Dp, 1), (std::vector<int>{1, 5}));
    EXPECT_EQ(rankCoords(own, 5).dpIndex(own), 1);

    // ep 4 > dp 2: laid out over tp x ep, one rank a expert data-parallel group; the carved layout cannot hold it.
    Plan wide = own;
    wide.ep = 4;
    EXPECT_EQ(wide.expertDp(), 1);
    EXPECT_EQ(groupRanks(wide, GroupKind::Ep, 3), (std::vector<int>{1, 3, 5, 7}));
    EXPECT_EQ(groupRanks(wide, GroupKind::ExpertDp, 3), (std::vector<int>{3}));
    Plan wideCarved = carved;
    wideCarved.ep = 4;
    EXPECT_THROW(groupRanks(wideCarved, GroupKind::Ep, 0), InputError);
    // Its pipeline groups must be the dense layout's, so pp is last in rank_order.
    wide.rankOrder = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp, ParallelDim::Dp};
    EXPECT_THROW(groupRanks(wide, GroupKind::Ep, 0), InputError);

    // Which versions build it: Megatron-core 0.10 on (2025), NeMo from 24.12, today's code, generic plans.
    FrameworkSettings f;
    EXPECT_TRUE(expertRankGeneratorOf(f)); // generic
    for (const char* v : {"", "core_r0.10.0", "core_v0.15.0", "2025"}) {
        f.name = "megatron";
        f.version = v;
        EXPECT_TRUE(expertRankGeneratorOf(f)) << v;
    }
    for (const char* v : {"core_r0.9.0", "2024", "v3.0"}) {
        f.version = v;
        EXPECT_FALSE(expertRankGeneratorOf(f)) << v;
    }
    f.name = "nemo";
    f.version = "24.09";
    EXPECT_FALSE(expertRankGeneratorOf(f));
    f.version = "24.12";
    EXPECT_TRUE(expertRankGeneratorOf(f));
    f.name = "torchtitan";
    EXPECT_TRUE(expertRankGeneratorOf(f));
    for (const char* name : {"megascale", "deepspeed", "fsdp"}) {
        f.name = name;
        f.version = "";
        EXPECT_FALSE(expertRankGeneratorOf(f)) << name;
    }
    // With cp 1 both layouts are one: nothing is laid out apart.
    Plan noCp = makePlan(2, 1, 4, 1, 2);
    noCp.framework.version = "";
    EXPECT_FALSE(noCp.expertLayoutApart());
}

// Folded plans, and Megatron-core's expert layout with cp > 1, over a grid: every kind partitions the world with the expected sizes, and each expert group's
// placement from placeGroup is the worst over every rank's own group.
TEST(Topology, FoldedGroupsPartitionTheWorld) {
    const auto orders = allOrders();
    int checked = 0;
    for (int tp : {1, 2, 4})
        for (int cp : {1, 2})
            for (int dp : {1, 2, 4})
                for (int etp : {0, 1, 2})
                    for (int ep : {1, 2, 4, 8}) {
                        Plan p = makePlan(tp, 2, dp, cp, ep);
                        p.etp = etp;
                        if (etp == 0) p.framework.version = "core_r0.10.0"; // Megatron-core's own expert layout
                        if (!p.expertLayoutApart() || (tp * cp * dp) % (p.expertTp() * ep) != 0) continue;
                        for (size_t o = 0; o < orders.size(); o += 5) {
                            if (orders[o].back() != ParallelDim::Pp) continue;
                            p.rankOrder = orders[o];
                            ++checked;
                            for (GroupKind kind : kAllKinds) {
                                if (kind == GroupKind::PpPair) continue;
                                std::vector<int> timesSeen(static_cast<size_t>(p.worldSize()), 0);
                                GroupPlacement worst;
                                for (int rank = 0; rank < p.worldSize(); ++rank) {
                                    const std::vector<int> g = groupRanks(p, kind, rank);
                                    ASSERT_EQ(static_cast<int>(g.size()), expectedGroupSize(p, kind)) << toString(kind);
                                    for (int m : g) EXPECT_EQ(groupRanks(p, kind, m), g) << toString(kind);
                                    if (g.front() == *std::min_element(g.begin(), g.end()) && g.front() == rank)
                                        for (int m : g) timesSeen[static_cast<size_t>(m)] += 1;
                                    // Expert groups stay inside one pipeline stage.
                                    if (kind == GroupKind::Ep || kind == GroupKind::ExpertTp || kind == GroupKind::ExpertDp)
                                        for (int m : g) EXPECT_EQ(rankCoords(p, m).pp, rankCoords(p, rank).pp) << toString(kind);
                                    const GroupPlacement q = placeRanks(g, 2);
                                    if (rank == 0 || worsePlacement(q, worst)) worst = q;
                                }
                                for (int t : timesSeen) EXPECT_EQ(t, 1) << toString(kind);
                                const GroupPlacement got = placeGroup(p, makeCluster(2, p.worldSize() / 2), kind);
                                EXPECT_EQ(got.nodes, worst.nodes) << toString(kind);
                                EXPECT_EQ(got.ranksPerNode, worst.ranksPerNode) << toString(kind);
                            }
                        }
                    }
    EXPECT_GT(checked, 50);
}

// Position i of a Dp group is the rank with dpIndex i, whatever the rank order.
TEST(Topology, DpGroupOrderedByDpIndex) {
    const std::array<ParallelDim, 5> order{ParallelDim::Dp, ParallelDim::Pp, ParallelDim::Tp, ParallelDim::Ep,
                                           ParallelDim::Cp};
    const Plan p = makePlan(2, 2, 6, 2, 3, order);
    for (int r = 0; r < p.worldSize(); ++r) {
        const std::vector<int> group = groupRanks(p, GroupKind::Dp, r);
        ASSERT_EQ(group.size(), 6u);
        for (size_t i = 0; i < group.size(); ++i)
            EXPECT_EQ(rankCoords(p, group[i]).dpIndex(p), static_cast<int>(i));
    }
}

TEST(Topology, DpCpGroupCoversDpTimesCp) {
    const Plan p = makePlan(2, 1, 4, 2, 2);
    // Default order: tp stride 1, cp stride 2, ep stride 4, edp stride 8; tp=0 ranks are the even ones.
    EXPECT_EQ(groupRanks(p, GroupKind::DpCp, 0), iota(0, 8, 2));
    EXPECT_EQ(groupRanks(p, GroupKind::Cp, 0), (std::vector<int>{0, 2}));
    EXPECT_EQ(groupRanks(p, GroupKind::Dp, 0), (std::vector<int>{0, 4, 8, 12}));
}

// Hybrid sharding splits the data-parallel group (in its own order) into runs: tp 2, dp 8, two replicas. The dp
// group of rank 0 is the even ranks 0..14; its shard groups are the first and second four, and a replica group
// joins the members at the same place of each run.
TEST(Topology, HybridShardingSplitsTheDataParallelGroupIntoRuns) {
    Plan p = makePlan(2, 1, 8);
    p.zeroStage = 1;
    p.zeroReplicas = 2;
    EXPECT_EQ(groupRanks(p, GroupKind::ZeroShard, 0), (std::vector<int>{0, 2, 4, 6}));
    EXPECT_EQ(groupRanks(p, GroupKind::ZeroShard, 10), (std::vector<int>{8, 10, 12, 14}));
    EXPECT_EQ(groupRanks(p, GroupKind::ZeroReplica, 2), (std::vector<int>{2, 10}));
    EXPECT_EQ(groupRanks(p, GroupKind::ZeroReplica, 11), (std::vector<int>{3, 11}));
    EXPECT_EQ(zeroGroupKind(p, false), GroupKind::ZeroShard);
    EXPECT_EQ(zeroGroupKind(p, true, true), GroupKind::ExpertZeroReplica);
    // On 8-GPU nodes a shard group stays in its node and a replica group spans two.
    const ClusterConfig c = makeCluster(8, 2);
    EXPECT_EQ(placeGroup(p, c, GroupKind::ZeroShard).nodes, 1);
    EXPECT_EQ(placeGroup(p, c, GroupKind::ZeroReplica).nodes, 2);
    EXPECT_EQ(placeGroup(p, c, GroupKind::ZeroReplica).size, 2);
    // With cp 2 the split is of the dp x cp group (cp fastest): tp 1, cp 2, dp 4 -> runs of four ranks.
    Plan q = makePlan(1, 1, 4, 2);
    q.zeroStage = 3;
    q.zeroReplicas = 2;
    EXPECT_EQ(groupRanks(q, GroupKind::ZeroShard, 5), (std::vector<int>{4, 5, 6, 7}));
    EXPECT_EQ(groupRanks(q, GroupKind::ZeroReplica, 5), (std::vector<int>{1, 5}));
    // One replica, or ZeRO-0: the whole group, as before.
    q.zeroReplicas = 1;
    EXPECT_EQ(zeroGroupKind(q, false), GroupKind::DpCp);
    p.zeroReplicas = 3;
    EXPECT_THROW(groupRanks(p, GroupKind::ZeroShard, 0), InputError);
}

// placeGroup places the hybrid-sharding groups from the whole data-parallel groups; it must equal the worst
// placement over every rank's own groupRanks.
TEST(Topology, HybridPlacementIsTheWorstOverEveryRanksGroup) {
    const auto orders = allOrders();
    for (Plan p : planGrid()) {
        p.zeroStage = 3;
        p.zeroReplicas = 2;
        if ((p.dp / p.ep) % 2 != 0) continue;
        for (size_t o = 0; o < orders.size(); o += 11) {
            p.rankOrder = orders[o];
            for (int gpn : {2, 4}) {
                if (p.worldSize() % gpn != 0) continue;
                for (GroupKind kind : {GroupKind::ZeroShard, GroupKind::ZeroReplica, GroupKind::ExpertZeroShard,
                                       GroupKind::ExpertZeroReplica}) {
                    GroupPlacement worst;
                    for (int r = 0; r < p.worldSize(); ++r) {
                        const GroupPlacement q = placeRanks(groupRanks(p, kind, r), gpn);
                        if (r == 0 || q.nodes > worst.nodes || (q.nodes == worst.nodes && q.ranksPerNode < worst.ranksPerNode))
                            worst = q;
                    }
                    const GroupPlacement got = placeGroup(p, makeCluster(gpn, p.worldSize() / gpn), kind);
                    EXPECT_EQ(got.size, worst.size) << toString(kind);
                    EXPECT_EQ(got.nodes, worst.nodes) << toString(kind);
                    EXPECT_EQ(got.ranksPerNode, worst.ranksPerNode) << toString(kind);
                }
            }
        }
    }
}

TEST(Topology, PpPairIsNextStageAndEmptyOnLastStage) {
    const Plan p = makePlan(8, 4, 2);
    EXPECT_EQ(groupRanks(p, GroupKind::PpPair, 3), (std::vector<int>{3, 19}));
    EXPECT_EQ(groupRanks(p, GroupKind::PpPair, 19), (std::vector<int>{19, 35}));
    EXPECT_TRUE(groupRanks(p, GroupKind::PpPair, 48 + 3).empty());
    const GroupPlacement pair = placeGroup(p, makeCluster(8, 8), GroupKind::PpPair);
    EXPECT_EQ(pair.size, 2);
    EXPECT_EQ(pair.nodes, 2);
    EXPECT_EQ(pair.ranksPerNode, 1);

    // pp first in the order: the pair is two adjacent ranks on one node.
    const Plan ppFirst = makePlan(
        8, 4, 2, 1, 1, {ParallelDim::Pp, ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp});
    const GroupPlacement near = placeGroup(ppFirst, makeCluster(8, 8), GroupKind::PpPair);
    EXPECT_EQ(near.size, 2);
    EXPECT_EQ(near.nodes, 1);
    EXPECT_EQ(near.ranksPerNode, 2);
}

TEST(Topology, PpPairWithOneStageHasNoPair) {
    const Plan p = makePlan(4, 1, 2);
    EXPECT_TRUE(groupRanks(p, GroupKind::PpPair, 0).empty());
    const GroupPlacement none = placeGroup(p, makeCluster(8, 1), GroupKind::PpPair);
    EXPECT_EQ(none.size, 1);
    EXPECT_FALSE(none.spansNodes());
}

TEST(Topology, PlaceRanksCountsNodesAndBusiestNode) {
    const GroupPlacement g = placeRanks({0, 1, 9, 17, 23, 22}, 8);
    EXPECT_EQ(g.size, 6);
    EXPECT_EQ(g.nodes, 3);
    EXPECT_EQ(g.ranksPerNode, 3); // node 2 holds 17, 22, 23
    const GroupPlacement empty = placeRanks({}, 8);
    EXPECT_EQ(empty.size, 0);
    EXPECT_EQ(empty.nodes, 0);
    EXPECT_THROW(placeRanks({0}, 0), InputError);
}

// Groups that straddle node boundaries unevenly: the worst one (most nodes, then fewest per node) wins.
TEST(Topology, PlaceGroupTakesWorstGroup) {
    // 6 GPUs per node, tp=4: {0-3} on node 0; {4,5 | 6,7} on two nodes; {8-11} on node 1.
    const GroupPlacement six = placeGroup(makePlan(4, 1, 3), makeCluster(6, 2), GroupKind::Tp);
    EXPECT_EQ(six.size, 4);
    EXPECT_EQ(six.nodes, 2);
    EXPECT_EQ(six.ranksPerNode, 2);
    // 3 GPUs per node: {0,1,2|3}, {4,5|6,7}, {8|9,10,11}: all span 2 nodes; the 2+2 split is the worst.
    const GroupPlacement three = placeGroup(makePlan(4, 1, 3), makeCluster(3, 4), GroupKind::Tp);
    EXPECT_EQ(three.nodes, 2);
    EXPECT_EQ(three.ranksPerNode, 2);
    // tp=5 on 3-GPU nodes: {0,1,2|3,4}, {5|6,7,8|9}, {10,11|12,13,14}: the middle group spans 3 nodes.
    const GroupPlacement five = placeGroup(makePlan(5, 1, 3), makeCluster(3, 5), GroupKind::Tp);
    EXPECT_EQ(five.size, 5);
    EXPECT_EQ(five.nodes, 3);
    EXPECT_EQ(five.ranksPerNode, 3);
}

TEST(Topology, RankCoordsRoundTripOverGridAndAllOrders) {
    const auto orders = allOrders();
    ASSERT_EQ(orders.size(), 120u);
    for (Plan p : planGrid()) {
        for (const auto& order : orders) {
            p.rankOrder = order;
            std::set<std::array<int, 5>> seen;
            for (int r = 0; r < p.worldSize(); ++r) {
                const RankCoords c = rankCoords(p, r);
                ASSERT_EQ(rankOf(p, c), r) << p.tp << p.pp << p.dp << p.cp << p.ep;
                EXPECT_TRUE(c.tp >= 0 && c.tp < p.tp && c.cp >= 0 && c.cp < p.cp && c.ep >= 0 &&
                            c.ep < p.ep && c.edp >= 0 && c.edp < p.dp / p.ep && c.pp >= 0 && c.pp < p.pp);
                seen.insert({c.tp, c.cp, c.ep, c.edp, c.pp});
            }
            EXPECT_EQ(static_cast<int>(seen.size()), p.worldSize()); // a bijection
        }
    }
}

// Every kind (but PpPair) partitions the world; members agree on every coordinate the kind does not vary.
TEST(Topology, GroupsPartitionTheWorld) {
    const auto orders = allOrders();
    std::vector<Plan> plans = planGrid();
    for (Plan p : planGrid()) { // and each with hybrid sharding over two replicas where they divide
        p.zeroReplicas = 2;
        p.zeroStage = 3;
        if ((p.dp / p.ep) % 2 == 0) plans.push_back(p);
    }
    for (Plan p : plans) {
        for (size_t o = 0; o < orders.size(); o += 7) { // a spread of orders keeps the test quick
            p.rankOrder = orders[o];
            for (GroupKind kind : kAllKinds) {
                if (kind == GroupKind::PpPair) continue;
                std::vector<int> timesSeen(static_cast<size_t>(p.worldSize()), 0);
                std::set<std::vector<int>> groups;
                for (int r = 0; r < p.worldSize(); ++r) {
                    const std::vector<int> g = groupRanks(p, kind, r);
                    ASSERT_EQ(static_cast<int>(g.size()), expectedGroupSize(p, kind)) << toString(kind);
                    EXPECT_NE(std::find(g.begin(), g.end(), r), g.end()) << toString(kind);
                    // Every member names the same group.
                    for (int m : g)
                        EXPECT_EQ(groupRanks(p, kind, m), g) << toString(kind);
                    groups.insert(g);
                }
                for (const auto& g : groups)
                    for (int m : g)
                        timesSeen[static_cast<size_t>(m)] += 1;
                for (int t : timesSeen)
                    EXPECT_EQ(t, 1) << toString(kind);
                EXPECT_EQ(static_cast<int>(groups.size()) * expectedGroupSize(p, kind), p.worldSize());
            }
        }
    }
}

TEST(Topology, GroupMembersDifferOnlyInVariedDims) {
    const Plan p = makePlan(
        2, 3, 4, 2, 2, {ParallelDim::Cp, ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Ep});
    for (int r = 0; r < p.worldSize(); ++r) {
        const RankCoords c = rankCoords(p, r);
        for (int m : groupRanks(p, GroupKind::Tp, r)) {
            const RankCoords d = rankCoords(p, m);
            EXPECT_TRUE(d.cp == c.cp && d.ep == c.ep && d.edp == c.edp && d.pp == c.pp);
        }
        for (int m : groupRanks(p, GroupKind::Dp, r)) {
            const RankCoords d = rankCoords(p, m);
            EXPECT_TRUE(d.tp == c.tp && d.cp == c.cp && d.pp == c.pp);
        }
        for (int m : groupRanks(p, GroupKind::ExpertDp, r)) { // cp x dp/ep: the same experts, other tokens
            const RankCoords d = rankCoords(p, m);
            EXPECT_TRUE(d.tp == c.tp && d.ep == c.ep && d.pp == c.pp);
        }
        for (int m : groupRanks(p, GroupKind::DpCp, r)) {
            const RankCoords d = rankCoords(p, m);
            EXPECT_TRUE(d.tp == c.tp && d.pp == c.pp);
        }
    }
}

// A 8192-rank world: placeGroup visits each group once, so every kind is placed quickly.
TEST(Topology, PlaceGroupOnLargeWorld) {
    const Plan p = makePlan(8, 16, 64, 1, 8);
    const ClusterConfig cluster = makeCluster(8, 1024);
    ASSERT_EQ(p.worldSize(), 8192);
    EXPECT_EQ(placeGroup(p, cluster, GroupKind::Tp).nodes, 1);
    const GroupPlacement dp = placeGroup(p, cluster, GroupKind::Dp);
    EXPECT_EQ(dp.size, 64);
    EXPECT_EQ(dp.nodes, 64);
    EXPECT_EQ(dp.ranksPerNode, 1);
    EXPECT_EQ(placeGroup(p, cluster, GroupKind::Ep).nodes, 8);
    EXPECT_EQ(placeGroup(p, cluster, GroupKind::ExpertDp).size, 8);
    EXPECT_EQ(placeGroup(p, cluster, GroupKind::Pp).nodes, 16);
    EXPECT_EQ(placeGroup(p, cluster, GroupKind::PpPair).nodes, 2);
    EXPECT_EQ(placeGroup(p, cluster, GroupKind::DpCp).size, 64);
}

TEST(Topology, BadRanksAndLayoutsThrow) {
    const Plan p = makePlan(2, 2, 2);
    EXPECT_THROW(rankCoords(p, -1), InputError);
    EXPECT_THROW(rankCoords(p, 8), InputError);
    RankCoords c;
    c.tp = 2;
    EXPECT_THROW(rankOf(p, c), InputError);
    EXPECT_THROW(rankCoords(makePlan(1, 1, 6, 1, 4), 0), InputError); // ep does not divide dp
    EXPECT_THROW(rankCoords(makePlan(0, 1, 1), 0), InputError);
}

} // namespace
} // namespace tessel
