// Tests of expert tensor parallelism and MoE parallel folding (etp): shapes, parameters, traffic and plan checks.
#include "test_support.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/shapes.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tessel {
namespace {

// 8 SwiGLU experts of 1024 (top 2) under hidden 2048, sequence 1024, on one 8-GPU node.
ModelConfig moeModel() {
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    m.activation = Activation::Swiglu;
    m.dropout = 0.0;
    m.moe = MoeConfig{8, 2, 1024};
    return m;
}

// tp 2 with SP over dp 4; the experts either over tp (ep 4, etp = tp) or folded (ep 8 over the node, etp 1).
Plan tp2Plan(int ep, int etp) {
    Plan p;
    p.tp = 2;
    p.dp = 4;
    p.ep = ep;
    p.etp = etp;
    p.sequenceParallel = true;
    p.globalBatch = 4;
    return p;
}

const CommOp* findComm(const std::vector<CommOp>& ops, const std::string& name) {
    for (const auto& op : ops)
        if (op.name == name) return &op;
    return nullptr;
}

const OpCost& findOp(const BlockCompute& b, const std::string& name) {
    for (const auto& op : b.forwardOps)
        if (op.name == name) return op;
    throw std::runtime_error("no op " + name);
}

std::set<std::string> problemFields(const ModelConfig& m, const ClusterConfig& c, const Plan& p) {
    ProblemList problems;
    validatePlan(m, c, p, "/plan", problems);
    std::set<std::string> where;
    for (const auto& pr : problems.items()) where.insert(pr.where);
    return where;
}

// By hand, e = 2 bytes, T = 1024 tokens, T / tp = 512 with SP, top 2, h = 2048.
TEST(ExpertLayout, FoldedExpertsHoldWholeExpertsAndSkipTheGather) {
    const ModelConfig m = moeModel();
    const ClusterConfig c = test::roundCluster(8, 1);
    const auto& recipe = *findPrecisionRecipe("megatron");
    const Plan folded = tp2Plan(8, 1);
    const Plan overTp = tp2Plan(4, 0);
    EXPECT_TRUE(problemFields(m, c, folded).empty());
    EXPECT_TRUE(problemFields(m, c, overTp).empty());

    // The router sees each TP rank's own 512 tokens; the experts get 512 x 2 rows, or 2 x that gathered over etp 2.
    const LocalShapes f = localShapes(m, folded, recipe), t = localShapes(m, overTp, recipe);
    EXPECT_EQ(f.moeTokensIn, 512);
    EXPECT_EQ(f.expertTokens, 1024);
    EXPECT_EQ(f.expertFfnLocal, 1024);
    EXPECT_EQ(t.moeTokensIn, 512);
    EXPECT_EQ(t.expertTokens, 2048);
    EXPECT_EQ(t.expertFfnLocal, 512);

    // One whole expert a rank (8 / 8), or two halves (8 / 4, / 2): the same 3 x 2048 x 1024 x 1 parameters.
    EXPECT_DOUBLE_EQ(layerParameters(m, folded).expert, 3.0 * 2048.0 * 1024.0);
    EXPECT_DOUBLE_EQ(layerParameters(m, overTp).expert, 3.0 * 2048.0 * 1024.0);
    EXPECT_EQ(folded.expertDp(), 1);
    EXPECT_EQ(overTp.expertDp(), 1);

    // GEMMs: 1024 rows x (gate + up) 2048 for the folded rank's one expert; 1024 rows x 1024 for each of two halves.
    const OpCost& fc1Folded = findOp(layerCompute(m, c, folded, recipe), "expert_fc1");
    EXPECT_EQ(fc1Folded.m, 1024);
    EXPECT_EQ(fc1Folded.n, 2048);
    const OpCost& fc1OverTp = findOp(layerCompute(m, c, overTp, recipe), "expert_fc1");
    EXPECT_EQ(fc1OverTp.m, 1024);
    EXPECT_EQ(fc1OverTp.n, 1024);
    EXPECT_EQ(findOp(layerCompute(m, c, folded, recipe), "router").m, 512);

    // Traffic: the dispatch moves 512 x 2 rows of 2048 either way; only etp 2 gathers them (1024 x 2 rows) over
    // its expert-TP group, and neither has a dense TP collective around the routed experts.
    const auto opsFolded = layerCommOps(m, c, folded), opsOverTp = layerCommOps(m, c, overTp);
    ASSERT_NE(findComm(opsFolded, "ep_all_to_all_dispatch"), nullptr);
    EXPECT_DOUBLE_EQ(findComm(opsFolded, "ep_all_to_all_dispatch")->bytes, 2.0 * 512 * 2 * 2048);
    EXPECT_EQ(findComm(opsFolded, "ep_all_to_all_dispatch")->placement.size, 8);
    EXPECT_DOUBLE_EQ(findComm(opsOverTp, "ep_all_to_all_dispatch")->bytes, 2.0 * 512 * 2 * 2048);
    EXPECT_EQ(findComm(opsOverTp, "ep_all_to_all_dispatch")->placement.size, 4);
    EXPECT_EQ(findComm(opsFolded, "etp_all_gather_experts"), nullptr);
    const CommOp* gather = findComm(opsOverTp, "etp_all_gather_experts");
    ASSERT_NE(gather, nullptr);
    EXPECT_DOUBLE_EQ(gather->bytes, 2.0 * 2048 * 2048);
    EXPECT_EQ(gather->group, GroupKind::ExpertTp);
    EXPECT_EQ(gather->placement.size, 2);
    for (const auto* ops : {&opsFolded, &opsOverTp}) {
        EXPECT_EQ(findComm(*ops, "tp_all_gather_mlp"), nullptr);
        EXPECT_NE(findComm(*ops, "tp_all_gather_attn"), nullptr);
    }
}

// etp written equal to tp is the plan without it: the same layout, shapes, traffic and memory.
TEST(ExpertLayout, EtpEqualToTpIsTheDefault) {
    const ModelConfig m = moeModel();
    const ClusterConfig c = test::roundCluster(8, 1);
    const auto& recipe = *findPrecisionRecipe("megatron");
    for (bool sp : {false, true}) {
        Plan implicit = tp2Plan(2, 0);
        implicit.sequenceParallel = sp;
        Plan explicitEtp = implicit;
        explicitEtp.etp = 2;
        EXPECT_FALSE(explicitEtp.expertFolded());
        const auto a = layerCommOps(m, c, implicit), b = layerCommOps(m, c, explicitEtp);
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].name, b[i].name);
            EXPECT_DOUBLE_EQ(a[i].bytes, b[i].bytes);
            EXPECT_DOUBLE_EQ(a[i].cost.seconds, b[i].cost.seconds);
        }
        EXPECT_DOUBLE_EQ(layerCompute(m, c, implicit, recipe).forward.seconds, layerCompute(m, c, explicitEtp, recipe).forward.seconds);
        EXPECT_DOUBLE_EQ(predictMemory(m, c, implicit).stages[0].totalBytes(), predictMemory(m, c, explicitEtp).stages[0].totalBytes());
        for (int r = 0; r < implicit.worldSize(); ++r)
            for (GroupKind k : {GroupKind::Ep, GroupKind::ExpertDp, GroupKind::ExpertTp})
                EXPECT_EQ(groupRanks(implicit, k, r), groupRanks(explicitEtp, k, r));
    }
    // Without SP the TP ranks hold copies of the tokens: nothing to gather, each rank runs them all (as before).
    Plan noSp = tp2Plan(2, 0);
    noSp.sequenceParallel = false;
    const LocalShapes s = localShapes(m, noSp, recipe);
    EXPECT_EQ(s.expertTpGather, 1);
    EXPECT_EQ(s.expertTokens, 1024 * 2);
}

TEST(ExpertLayout, PlanChecksNameTheField) {
    const ModelConfig m = moeModel();
    const ClusterConfig c = test::roundCluster(8, 1);
    // ep 8 does not divide dp 4: refused unless the experts are folded over the node's tp x dp ranks.
    Plan p = tp2Plan(8, 0);
    EXPECT_EQ(problemFields(m, c, p), std::set<std::string>{"/plan/ep"});
    p.etp = 1;
    EXPECT_TRUE(problemFields(m, c, p).empty());
    // etp x ep must divide tp x dp = 8 (etp 2 would be tp's own: ep 8 then fails dp as above).
    Plan wide = tp2Plan(4, 4);
    EXPECT_EQ(problemFields(m, c, wide), std::set<std::string>{"/plan/etp"});
    EXPECT_EQ(wide.expertDp(), 0);
    // The largest degrees a plan may hold: etp x ep is 2^40, past an int; still a problem at /plan/etp.
    Plan huge = tp2Plan(static_cast<int>(PlanLimits::degree), static_cast<int>(PlanLimits::degree));
    EXPECT_EQ(huge.expertDp(), 0);
    EXPECT_TRUE(problemFields(m, c, huge).count("/plan/etp"));
    // Folded with tp 2 needs SP; and pp last in rank_order.
    Plan noSp = tp2Plan(8, 1);
    noSp.sequenceParallel = false;
    EXPECT_EQ(problemFields(m, c, noSp), std::set<std::string>{"/plan/sequence_parallel"});
    Plan order = tp2Plan(8, 1);
    order.rankOrder = {ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp};
    EXPECT_EQ(problemFields(m, c, order), std::set<std::string>{"/plan/rank_order"});
    // etp must divide the experts' width, and needs experts at all.
    ModelConfig odd = m;
    odd.moe->expertFfnHidden = 1022;
    Plan etp4 = tp2Plan(2, 4);
    EXPECT_EQ(problemFields(odd, c, etp4), std::set<std::string>{"/plan/etp"});
    ModelConfig dense = m;
    dense.moe.reset();
    Plan denseEtp = tp2Plan(1, 1);
    EXPECT_EQ(problemFields(dense, c, denseEtp), std::set<std::string>{"/plan/etp"});
}

// Megatron-core's checks for --overlap-moe-expert-parallel-comm, each naming /plan/moe_a2a_overlap: expert
// parallelism, no full recompute, and virtual stages where the model is pipelined.
TEST(ExpertLayout, EpOverlapNeedsWhatMegatronCoreNeeds) {
    const ModelConfig m = moeModel();
    const ClusterConfig c = test::roundCluster(8, 1);
    Plan p = tp2Plan(4, 0);
    p.framework.moeA2aOverlap = true;
    EXPECT_TRUE(problemFields(m, c, p).empty());
    Plan noEp = p;
    noEp.ep = 1;
    EXPECT_EQ(problemFields(m, c, noEp), std::set<std::string>{"/plan/moe_a2a_overlap"});
    Plan full = p;
    full.recompute = Recompute::Full;
    EXPECT_EQ(problemFields(m, c, full), std::set<std::string>{"/plan/moe_a2a_overlap"});
    Plan piped = p;
    piped.tp = 1;
    piped.pp = 2;
    piped.sequenceParallel = false;
    EXPECT_EQ(problemFields(m, c, piped), std::set<std::string>{"/plan/moe_a2a_overlap"});
    piped.vpp = 2;
    piped.schedule = Schedule::Interleaved1F1B;
    piped.globalBatch = 8; // two micro-batches a rank: a multiple of pp, as the interleaved schedule needs
    EXPECT_TRUE(problemFields(m, c, piped).empty());
    ModelConfig dense = m;
    dense.moe.reset();
    Plan denseOverlap = p;
    denseOverlap.ep = 1;
    EXPECT_TRUE(problemFields(dense, c, denseOverlap).count("/plan/moe_a2a_overlap"));
    // A plan key of its own, written back only where stated.
    ProblemList problems;
    const Plan parsed = parsePlan({{"ep", 2}, {"dp", 2}, {"moe_a2a_overlap", true}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_TRUE(moeA2aOverlapOf(parsed.framework));
    EXPECT_EQ(planToJson(parsed)["moe_a2a_overlap"], true);
    EXPECT_FALSE(moeA2aOverlapOf(Plan{}.framework));
    EXPECT_FALSE(planToJson(Plan{}).contains("moe_a2a_overlap"));
}

// A token's top k of E experts, drawn evenly, miss a node's n with probability C(E - n, k) / C(E, k).
TEST(ExpertLayout, NodeHitProbabilityByHand) {
    EXPECT_DOUBLE_EQ(nodeHitProbability(8, 4, 2), 1.0 - (4.0 / 8.0) * (3.0 / 7.0)); // 11/14
    EXPECT_DOUBLE_EQ(nodeHitProbability(8, 8, 1), 1.0);
    EXPECT_DOUBLE_EQ(nodeHitProbability(8, 1, 1), 1.0 / 8.0);
    EXPECT_DOUBLE_EQ(nodeHitProbability(8, 6, 3), 1.0); // only two experts elsewhere: three draws must hit
    // Qwen3-30B-A3B over two nodes: 128 experts, 64 a node, top 8: a token misses a node 0.31% of the time.
    double miss = 1.0;
    for (int i = 0; i < 8; ++i) miss *= (64.0 - i) / (128.0 - i);
    EXPECT_NEAR(nodeHitProbability(128, 64, 8), 1.0 - miss, 1e-15);
    EXPECT_NEAR(miss, 0.0031, 0.0001);
}

// Group-limited routing (DeepSeek-V3's node-limited routing): the token's groups drawn evenly, its experts evenly among
// theirs. DeepSeek-V3 over 8 nodes (one group of 32 of its 256 experts a node, 4 groups a token): a node is reached
// when its group is drawn (1/2) and one of the 8 experts among the 128 of the 4 groups is its; 3.6 nodes a token
// against 5.3 unlimited.
TEST(ExpertLayout, GroupLimitedRoutingReachesFewerNodes) {
    MoeConfig moe{256, 8, 2048};
    EXPECT_DOUBLE_EQ(nodeHitProbability(moe, 32), nodeHitProbability(256, 32, 8)); // no groups: unlimited
    moe.routingGroups = 8;
    moe.groupsPerToken = 4;
    double miss = 1.0;
    for (int i = 0; i < 8; ++i) miss *= (96.0 - i) / (128.0 - i);
    EXPECT_NEAR(nodeHitProbability(moe, 32), 0.5 * (1.0 - miss), 1e-15);
    EXPECT_NEAR(8.0 * nodeHitProbability(moe, 32), 3.63, 0.005);
    EXPECT_NEAR(8.0 * nodeHitProbability(256, 32, 8), 5.29, 0.01);
    // Two groups a node (4 nodes): P(x of the node's 2 groups among the 4 drawn of 8) = C(2,x) C(6,4-x) / C(8,4).
    double hit = 0.0;
    for (int x = 1; x <= 2; ++x) {
        const double px = (x == 1 ? 2.0 * 20.0 : 1.0 * 15.0) / 70.0;
        double m = 1.0;
        for (int i = 0; i < 8; ++i) m *= (128.0 - 32.0 * x - i) / (128.0 - i);
        hit += px * (1.0 - m);
    }
    EXPECT_NEAR(nodeHitProbability(moe, 64), hit, 1e-15);
    // Half a group a node (16 nodes): reached only when its group is drawn.
    miss = 1.0;
    for (int i = 0; i < 8; ++i) miss *= (112.0 - i) / (128.0 - i);
    EXPECT_NEAR(nodeHitProbability(moe, 16), 0.5 * (1.0 - miss), 1e-15);
    // Every group a token's: no limit.
    moe.groupsPerToken = 8;
    EXPECT_DOUBLE_EQ(nodeHitProbability(moe, 32), nodeHitProbability(256, 32, 8));
}

// The flex dispatcher across two 8-GPU nodes (ep 16): the network leg carries each token once per node it reaches,
// the NVLink leg once per rank it reaches (DeepEP's is_token_in_rank); its time counts only beyond the network
// leg's. One node: the NVLink leg alone. The all-to-all dispatcher: one all-to-all of every copy.
TEST(ExpertLayout, FlexDispatcherSendsATokenOncePerNode) {
    ModelConfig m = moeModel();
    m.moe = MoeConfig{128, 8, 768};
    ClusterConfig c = test::roundCluster(8, 2);
    Plan p;
    p.dp = 16;
    p.ep = 16;
    p.globalBatch = 16;
    const double routed = 2.0 * 1024 * 8 * 2048; // e T top_k h
    const GroupPlacement ep = placeGroup(p, c, GroupKind::Ep);
    ASSERT_EQ(ep.nodes, 2);
    const auto plain = dispatchLegs(m, p, ep, routed);
    ASSERT_EQ(plain.size(), 1u);
    EXPECT_DOUBLE_EQ(plain[0].bytes, routed);
    p.framework.moeDispatcher = "flex";
    const auto legs = dispatchLegs(m, p, ep, routed);
    ASSERT_EQ(legs.size(), 2u);
    EXPECT_EQ(legs[0].suffix, "_internode");
    EXPECT_EQ(legs[0].placement.size, 2);
    EXPECT_EQ(legs[0].placement.nodes, 2);
    EXPECT_DOUBLE_EQ(legs[0].bytes, routed / 8.0 * 2.0 * nodeHitProbability(128, 64, 8));
    EXPECT_EQ(legs[1].suffix, "_intranode");
    EXPECT_EQ(legs[1].placement.size, 8);
    EXPECT_EQ(legs[1].placement.nodes, 1);
    // 8 of the 128 experts a rank: a token reaches 16 x (1 - C(120, 8) / C(128, 8)) = 6.9 ranks, not its 8 copies.
    double missRank = 1.0;
    for (int i = 0; i < 8; ++i) missRank *= (120.0 - i) / (128.0 - i);
    EXPECT_DOUBLE_EQ(legs[1].bytes, routed / 8.0 * 16.0 * nodeHitProbability(128, 8, 8));
    EXPECT_NEAR(legs[1].bytes / routed, 2.0 * (1.0 - missRank), 1e-12);
    EXPECT_LT(legs[1].bytes, routed);
    // Pipelined: the NVLink leg adds only what it takes beyond the network leg.
    const auto taken = pipelinedLegSeconds(legs, {3.0, 5.0});
    EXPECT_DOUBLE_EQ(taken[0], 3.0);
    EXPECT_DOUBLE_EQ(taken[1], 2.0);
    EXPECT_DOUBLE_EQ(pipelinedLegSeconds(legs, {3.0, 1.0})[1], 0.0);
    // In the layer's traffic: four ops a leg, the network leg's at its own time.
    const auto ops = layerCommOps(m, c, p);
    const CommOp* net = findComm(ops, "ep_all_to_all_dispatch_internode");
    const CommOp* nvl = findComm(ops, "ep_all_to_all_combine_grad_intranode");
    ASSERT_NE(net, nullptr);
    ASSERT_NE(nvl, nullptr);
    EXPECT_DOUBLE_EQ(net->cost.seconds, commCost(Primitive::AllToAll, legs[0].bytes, legs[0].placement, c).seconds);
    EXPECT_DOUBLE_EQ(nvl->cost.seconds, pipelinedLegSeconds(legs, {net->cost.seconds,
                                                                   commCost(Primitive::AllToAll, legs[1].bytes, legs[1].placement, c).seconds})[1]);
    EXPECT_EQ(findComm(ops, "ep_all_to_all_dispatch"), nullptr);
    // Inside one node there is no network leg: one all-to-all, a token once to each rank it reaches (16 experts a
    // rank: 8 x (1 - C(112, 8) / C(128, 8)) = 5.3 ranks of 8 copies).
    Plan one = p;
    one.dp = 8;
    one.ep = 8;
    const auto inNode = dispatchLegs(m, one, placeGroup(one, test::roundCluster(8, 1), GroupKind::Ep), routed);
    ASSERT_EQ(inNode.size(), 1u);
    EXPECT_EQ(inNode[0].suffix, "");
    double miss = 1.0;
    for (int i = 0; i < 8; ++i) miss *= (112.0 - i) / (128.0 - i);
    EXPECT_NEAR(inNode[0].bytes, routed / 8.0 * 8.0 * (1.0 - miss), 1e-6);
    // A router that keeps a token's experts on one rank (AutoModel's fake balanced gate: experts 8t .. 8t + 7, so
    // one block of 8 of the 16 a rank holds; as group-limited routing, 16 groups of 8, one a token): one copy.
    ModelConfig blocked = m;
    blocked.moe->routingGroups = 16;
    blocked.moe->groupsPerToken = 1;
    const auto oneRank = dispatchLegs(blocked, one, placeGroup(one, test::roundCluster(8, 1), GroupKind::Ep), routed);
    EXPECT_NEAR(oneRank[0].bytes, routed / 8.0, 1e-6);
    // The all-to-all dispatcher inside the node still moves every copy.
    one.framework.moeDispatcher = "alltoall";
    EXPECT_DOUBLE_EQ(dispatchLegs(blocked, one, placeGroup(one, test::roundCluster(8, 1), GroupKind::Ep), routed)[0].bytes, routed);
}

TEST(ExpertLayout, PlanJsonKeepsEtp) {
    ProblemList problems;
    const Plan p = parsePlan({{"tp", 2}, {"dp", 4}, {"ep", 8}, {"etp", 1}, {"sequence_parallel", true}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(p.etp, 1);
    EXPECT_EQ(planToJson(p)["etp"], 1);
    EXPECT_FALSE(planToJson(parsePlan({{"tp", 2}}, "/plan", problems)).contains("etp"));
    ProblemList bad;
    parsePlan({{"etp", 0}}, "/plan", bad);
    ASSERT_EQ(bad.items().size(), 1u);
    EXPECT_EQ(bad.items()[0].where, "/plan/etp");
    // The dispatcher is a framework setting of the plan: alltoall or flex, nothing else.
    const Plan flex = parsePlan({{"ep", 2}, {"dp", 2}, {"moe_dispatcher", "flex"}}, "/plan", problems);
    EXPECT_EQ(moeDispatcherOf(flex.framework), "flex");
    EXPECT_EQ(planToJson(flex)["moe_dispatcher"], "flex");
    EXPECT_EQ(moeDispatcherOf(Plan{}.framework), "alltoall");
    ProblemList badDispatcher;
    parsePlan({{"moe_dispatcher", "allgather"}}, "/plan", badDispatcher);
    ASSERT_EQ(badDispatcher.items().size(), 1u);
    EXPECT_EQ(badDispatcher.items()[0].where, "/plan/moe_dispatcher");
}

} // namespace
} // namespace tessel
