// Tests of expert tensor parallelism and MoE parallel folding (etp): shapes, parameters, traffic and plan checks.
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
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
}

} // namespace
} // namespace tessel
