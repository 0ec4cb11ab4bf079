// Selective recompute by module in the simulated step: the collectives a module's rerun repeats (a dense MLP's TP pair,
// the MoE layer's all-to-alls, the attention core's CP exchange), and the search's plans carrying the space's modules.
#include "search_support.hpp"

#include "../../simulator/src/search_space.hpp"
#include "tessel/cost/traffic.hpp"
#include "tessel/sim/search.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <set>

namespace tessel::sim {
namespace {

namespace rm = recompute_module;
using namespace search_support;

// The forward and backward actions' seconds of one collective group, summed over stage 0's actions.
struct GroupSums {
    double forward = 0.0, backward = 0.0;
};
GroupSums sums(const PlanSimulation& sim, double ActionCost::*group) {
    GroupSums g;
    const auto& actions = sim.schedule.stages[0].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
        if (actions[i].kind == ActionKind::Forward) g.forward += sim.costs.perAction[0][i].*group;
        if (actions[i].kind == ActionKind::Backward) g.backward += sim.costs.perAction[0][i].*group;
    }
    return g;
}

Plan selective(uint8_t modules) {
    Plan p;
    p.recompute = Recompute::Selective;
    p.recomputeModules = modules;
    p.framework.name = "megatron";
    p.microBatch = 1;
    return p;
}

TEST(RecomputeModulesSim, AnMlpRerunRepeatsItsTensorParallelPair) {
    // Llama 3 8B, tp 8 with SP on one node: rerunning the MLP repeats its all-gather and reduce-scatter, a layer's and
    // micro-batch's each.
    const ModelConfig m = test::preset("llama3-8b");
    ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = selective(0);
    p.tp = 8;
    p.sequenceParallel = true;
    p.globalBatch = 4;
    // Nothing hidden under the GEMMs, whose times the rerun's kernels move (the tensor cores' duty): every collective whole.
    p.framework.asyncTpGradReduce = false;
    p.framework.tpCommOverlap = false;
    const GroupSums none = sums(simulatePlan(m, c, p), &ActionCost::tpSeconds);
    p.recomputeModules = rm::Mlp;
    const GroupSums mlp = sums(simulatePlan(m, c, p), &ActionCost::tpSeconds);
    ASSERT_GT(none.forward, 0.0);
    EXPECT_NEAR(mlp.forward, none.forward, 1e-12);
    // The forward actions hold the embedding's and the head's collectives too: the MLP's pair from the layer's own.
    double pair = 0.0;
    for (const CommOp& op : layerCommOps(m, c, p))
        if (op.phase == CommPhase::Forward && (op.name == "tp_all_gather_mlp" || op.name == "tp_reduce_scatter_mlp"))
            pair += op.cost.seconds;
    const double scale = c.gpu.phaseFit("communication").timeScale;
    EXPECT_NEAR(mlp.backward - none.backward, scale * pair * m.layers * p.microBatchesPerStep(), 1e-9 * none.forward);
    EXPECT_LT(mlp.backward - none.backward, 0.5 * none.forward); // the attention block's pair is as large
    // The attention core's rerun repeats no TP collective (its exchange is CP's).
    p.recomputeModules = rm::CoreAttn;
    EXPECT_NEAR(sums(simulatePlan(m, c, p), &ActionCost::tpSeconds).backward, none.backward, 1e-12);
}

TEST(RecomputeModulesSim, TheMoeLayersRerunRepeatsItsAllToAlls) {
    // A small MoE model with ep 4 over two nodes of two GPUs: the moe module reruns the dispatch and combine, the
    // experts' activation alone (moe_act) none.
    const ModelConfig m = test::preset("tiny-moe");
    ClusterConfig c = smallNodes(2, 2, 80);
    Plan p = selective(rm::MoeAct);
    p.dp = 4;
    p.ep = 4;
    p.globalBatch = 8;
    const PlanSimulation act = simulatePlan(m, c, p);
    const GroupSums a = sums(act, &ActionCost::epSeconds);
    p.recomputeModules = rm::Moe;
    const GroupSums moe = sums(simulatePlan(m, c, p), &ActionCost::epSeconds);
    ASSERT_GT(a.forward, 0.0);
    EXPECT_NEAR(moe.backward - a.backward, a.forward, 1e-9 * a.forward);
    // And its compute: the MoE layer's forward GEMMs again (router and experts), which the activation's rerun has not.
    EXPECT_GT(simulatePlan(m, c, p).metrics.hardwareFlopsPerStep, act.metrics.hardwareFlopsPerStep);
    EXPECT_DOUBLE_EQ(simulatePlan(m, c, p).metrics.modelFlopsPerStep, act.metrics.modelFlopsPerStep);
}

TEST(RecomputeModulesSim, OnlyTheAttentionCoreRepeatsTheContextExchange) {
    const ModelConfig m = test::preset("llama3-8b");
    ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = selective(rm::CoreAttn);
    p.cp = 2;
    p.dp = 4;
    p.globalBatch = 4;
    const GroupSums core = sums(simulatePlan(m, c, p), &ActionCost::cpSeconds);
    p.recomputeModules = rm::Mlp;
    const GroupSums mlp = sums(simulatePlan(m, c, p), &ActionCost::cpSeconds);
    ASSERT_GT(core.forward, 0.0);
    EXPECT_NEAR(core.backward - mlp.backward, core.forward, 1e-9 * core.forward);
}

TEST(RecomputeModulesSim, TheSearchsSelectivePlansCarryTheSpacesModules) {
    // tiny-moe on 8 GPUs: with the space's modules moe_act and layernorm, every selective plan states them and no
    // other plan does; every plan found passes validatePlan as it stands.
    const ModelConfig m = test::preset("tiny-moe");
    const ClusterConfig c = smallNodes(8, 1, 80);
    SearchSpace space = spaceFor(8, 16);
    space.framework.name = "megatron";
    space.recomputeModules = rm::MoeAct | rm::Layernorm;
    SearchOptions options;
    options.topK = 400;
    const SearchResult r = searchPlans(m, c, space, options);
    int selectivePlans = 0;
    for (const RankedPlan& rp : r.top) {
        if (rp.plan.recompute == Recompute::Selective) {
            ++selectivePlans;
            EXPECT_EQ(rp.plan.recomputeModules, rm::MoeAct | rm::Layernorm);
        } else {
            EXPECT_EQ(rp.plan.recomputeModules, rm::Default);
        }
        ProblemList problems;
        validatePlan(m, c, rp.plan, "/plan", problems);
        EXPECT_TRUE(problems.empty()) << planToJson(rp.plan).dump();
    }
    EXPECT_GT(selectivePlans, 0);
    EXPECT_EQ(r.rejected.count("recompute_modules not runnable"), 0u);
    // On a dense model the same modules name nothing: every selective plan is refused for it, by name.
    const SearchResult dense = searchPlans(test::preset("tiny"), c, space, options);
    EXPECT_GT(dense.rejected.count("recompute_modules not runnable"), 0u);
    for (const RankedPlan& rp : dense.top) EXPECT_NE(rp.plan.recompute, Recompute::Selective);
}

TEST(RecomputeModulesSim, UnnamedTheSearchTriesMegatronBridgesSets) {
    // The ladder: the attention core, then the MoE recipes' sets the model has the parts for, under Megatron-core's
    // frameworks only; a dense model, or torchtitan, the attention core alone.
    FrameworkSettings megatron;
    megatron.name = "megatron";
    FrameworkSettings torchtitan;
    torchtitan.name = "torchtitan";
    EXPECT_EQ(detail::selectiveModuleLadder(test::preset("deepseek-v3"), megatron),
              (std::vector<uint8_t>{rm::CoreAttn, rm::MoeAct, rm::Layernorm | rm::MoeAct, rm::MlaUpProj, rm::MlaUpProj | rm::Mlp,
                                    rm::MlaUpProj | rm::Layernorm | rm::MoeAct, rm::Moe}));
    EXPECT_EQ(detail::selectiveModuleLadder(test::preset("tiny-moe"), megatron),
              (std::vector<uint8_t>{rm::CoreAttn, rm::MoeAct, rm::Layernorm | rm::MoeAct, rm::Moe}));
    EXPECT_EQ(detail::selectiveModuleLadder(test::preset("llama3-8b"), megatron), (std::vector<uint8_t>{rm::CoreAttn}));
    EXPECT_EQ(detail::selectiveModuleLadder(test::preset("deepseek-v3"), torchtitan), (std::vector<uint8_t>{rm::CoreAttn}));
    // tiny-moe's selective plans come with each of its four sets, each a plan of its own that validatePlan passes.
    const ModelConfig m = test::preset("tiny-moe");
    const ClusterConfig c = smallNodes(8, 1, 80);
    SearchSpace space = spaceFor(8, 16, {{"tp", 1}, {"pp", 1}, {"micro_batch", 1}});
    space.framework.name = "megatron";
    space.recompute = {Recompute::Selective};
    SearchOptions options;
    options.topK = 1000;
    std::set<uint8_t> seen;
    for (const RankedPlan& rp : searchPlans(m, c, space, options).top) {
        seen.insert(rp.plan.recomputeModules);
        ProblemList problems;
        validatePlan(m, c, rp.plan, "/plan", problems);
        EXPECT_TRUE(problems.empty()) << planToJson(rp.plan).dump();
    }
    EXPECT_EQ(seen, (std::set<uint8_t>{rm::CoreAttn, rm::MoeAct, rm::Layernorm | rm::MoeAct, rm::Moe}));
}

} // namespace
} // namespace tessel::sim
