// Megatron-core's recompute modules of an MoE model run by the executor (moe, moe_act, shared_experts, layernorm):
// what each drops in the forward is rebuilt before the backward that reads it, so training is bitwise the run that
// keeps everything, on N ranks as on one.
#include "executor_support.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {
namespace {

namespace rm = recompute_module;

// Expert TP with sequence parallelism over EP x DP.
Plan expertTpPlan() {
    Plan p = test::basePlan();
    p.tp = 2;
    p.sequenceParallel = true;
    p.ep = 2;
    p.dp = 2;
    return p;
}

Plan withModules(Plan p, uint8_t modules) {
    p.recompute = Recompute::Selective;
    p.recomputeModules = modules;
    return p;
}

// Expert TP with sequence parallelism over EP x DP (the mixed model: a dense first layer, shared experts), and a
// pipeline with ZB-H1's deferred weight gradients: each module set against the same plan without recompute, bitwise.
TEST(MoeRecompute, EachModuleIsBitwiseTheRunThatKeepsEverything) {
    const Plan expertTp = expertTpPlan();
    Plan zeroBubble = test::basePlan();
    zeroBubble.pp = 2;
    zeroBubble.ep = 2;
    zeroBubble.dp = 2;
    zeroBubble.schedule = Schedule::ZeroBubble;
    const std::vector<std::pair<std::string, uint8_t>> modules{
        {"moe_act", rm::MoeAct},
        {"shared_experts", rm::SharedExperts},
        {"layernorm", rm::Layernorm},
        {"moe", rm::Moe},
        {"core_attn moe_act shared_experts layernorm", rm::CoreAttn | rm::MoeAct | rm::SharedExperts | rm::Layernorm}};
    for (const auto& [planName, plan] : {std::pair<std::string, Plan>{"tp2 sp ep2 dp2", expertTp}, {"pp2 zb ep2 dp2", zeroBubble}}) {
        const ModelConfig model = test::tinyMoeModel(true);
        const test::RunResult kept = test::runPlan(model, plan, 2);
        for (const auto& [name, m] : modules) {
            const test::RunResult r = test::runPlan(model, withModules(plan, m), 2);
            EXPECT_EQ(r.losses, kept.losses) << planName << ": " << name;
            EXPECT_EQ(r.params, kept.params) << planName << ": " << name;
        }
    }
}

// ... and the lot on N ranks against one rank without recompute.
TEST(MoeRecompute, ModulesOnManyRanksMatchOneRank) {
    Plan p = expertTpPlan();
    p.zeroStage = 1;
    test::expectMatchesOneRank(test::tinyMoeModel(true), withModules(p, rm::Moe | rm::Layernorm), test::basePlan());
    test::expectMatchesOneRank(test::tinyMoeModel(true), withModules(p, rm::MoeAct | rm::SharedExperts | rm::Layernorm),
                               test::basePlan());
}

// Each module drops its own tensors: the activation peak falls under each, and the whole block's recompute drops the
// most (the memory model's figures for the same plans: tests/executor/memory_prediction_test.cpp).
TEST(MoeRecompute, EachModuleLowersTheActivationPeak) {
    Plan p = test::basePlan();
    p.ep = 2;
    p.dp = 2;
    const ModelConfig model = test::tinyMoeModel(true);
    const auto act = static_cast<size_t>(MemoryCategory::Activations);
    const int64_t kept = test::runPlan(model, p, 1).memory[0].peakBytes[act];
    for (const auto& [name, m] : std::vector<std::pair<std::string, uint8_t>>{
             {"moe_act", rm::MoeAct}, {"shared_experts", rm::SharedExperts}, {"layernorm", rm::Layernorm}, {"moe", rm::Moe}})
        EXPECT_LT(test::runPlan(model, withModules(p, m), 1).memory[0].peakBytes[act], kept) << name;
    const int64_t parts = test::runPlan(model, withModules(p, rm::MoeAct | rm::SharedExperts), 1).memory[0].peakBytes[act];
    EXPECT_LT(test::runPlan(model, withModules(p, rm::Moe), 1).memory[0].peakBytes[act], parts);
}

} // namespace
} // namespace tessel::exec
