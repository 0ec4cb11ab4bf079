// The cost model's count of a stage's parameter tensors (stageParameterTensors, which prices the executor's
// optimizer step per tensor) against the tensors the executor's GPT actually makes, over models and plans.
#include "executor_support.hpp"

#include "tessel/cost/plan.hpp"
#include "tessel/exec/gpt.hpp"

#include <gtest/gtest.h>

namespace tessel::exec {
namespace {

void expectCountsMatch(const ModelConfig& model, const Plan& plan, const std::string& label) {
    const int world = plan.worldSize();
    auto w = makeInProcessWorld(world);
    std::vector<bool> seen(static_cast<size_t>(plan.pp), false);
    for (int r = 0; r < world; ++r) {
        const int stage = rankCoords(plan, r).pp;
        if (seen[static_cast<size_t>(stage)]) continue;
        seen[static_cast<size_t>(stage)] = true;
        auto comm = makeInProcessComm(w, r);
        auto backend = makeCpuBackend(ElementType::F64);
        const ParallelContext ctx = makeContext(plan, r, *comm, model.tiedEmbeddings);
        GptModel gpt(model, ctx, *backend, 1);
        EXPECT_EQ(static_cast<int>(gpt.parameters().size()), stageParameterTensors(model, plan, stage))
            << label << " stage " << stage;
    }
}

TEST(ParameterTensors, TheModelCountsWhatTheExecutorMakes) {
    ModelConfig gpt = test::tinyModel();          // LayerNorm, GELU, biases, learned positions, untied
    ModelConfig llama = test::tinyModel(true);    // RMSNorm, SwiGLU, RoPE, no biases
    ModelConfig tied = gpt;
    tied.tiedEmbeddings = true;
    ModelConfig qwen = llama;
    qwen.qkvBias = true;
    ModelConfig moe = loadModelRef("tiny-moe", "test");
    moe.seqLen = 16;
    ModelConfig mixed = moe;             // a dense first layer and shared experts (DeepSeek's layout)
    mixed.moe->denseLayers = {0};
    mixed.moe->sharedFfnHidden = 64;
    for (const auto& [name, model] : std::vector<std::pair<std::string, ModelConfig>>{
             {"gpt", gpt}, {"llama", llama}, {"tied", tied}, {"qkv-bias", qwen}, {"moe", moe}, {"moe-mixed", mixed}}) {
        Plan p = test::basePlan();
        expectCountsMatch(model, p, name + " pp1");
        p.pp = 2;
        expectCountsMatch(model, p, name + " pp2");
        p.vpp = 2;
        p.globalBatch = 8;
        expectCountsMatch(model, p, name + " pp2 vpp2");
        Plan t = test::basePlan();
        t.tp = 2;
        t.sequenceParallel = model.moe.has_value(); // MoE with TP runs sequence parallel (as Megatron requires)
        expectCountsMatch(model, t, name + " tp2");
        if (model.moe) {
            Plan e = test::basePlan();
            e.dp = 2;
            e.ep = 2;
            expectCountsMatch(model, e, name + " ep2");
            e.tp = 2;
            e.sequenceParallel = true;
            expectCountsMatch(model, e, name + " tp2 ep2");
            e.dp = 1;
            e.etp = 1; // folded: EP over the two TP ranks
            expectCountsMatch(model, e, name + " tp2 etp1 ep2");
        }
    }
}

} // namespace
} // namespace tessel::exec
