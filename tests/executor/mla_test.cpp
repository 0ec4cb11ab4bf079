// Multi-head latent attention run by the executor (DeepSeek-V2/V3's MLA): gradients against central differences,
// N ranks against one over TP (with and without SP), PP, DP and ZeRO, with MoE and dropout, recompute bitwise, and the
// zero-padded value heads exact.
#include "executor_support.hpp"

#include "tessel/exec/run_output.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {
namespace {

// The tiny Llama-style model with latent attention: 4 heads of q/k width 12 (8 position-free + 4 rotary), value
// heads of 10 (narrower: the padded path), a q latent of 24 and a key/value latent of 16.
ModelConfig tinyMla(bool qLatent = true, int64_t vHeadDim = 10) {
    ModelConfig m = test::tinyModel(true);
    m.kvHeads = m.heads;
    m.mla = MlaConfig{qLatent ? 24 : 0, 16, 8, 4, vHeadDim};
    return m;
}

TEST(Mla, GradientsMatchFiniteDifferences) {
    const std::vector<std::string> attention{"layer.1.attn.q_down.weight",      "layer.1.attn.q_latent_norm.weight",
                                             "layer.1.attn.q_up.weight",        "layer.1.attn.kv_down.weight",
                                             "layer.1.attn.kv_latent_norm.weight", "layer.1.attn.kv_up.weight",
                                             "layer.1.attn.proj.weight",        "layer.0.ln1.weight"};
    test::expectGradientsMatchFiniteDifferences(tinyMla(), attention);
    // No q latent (DeepSeek-V2-Lite): q projected from the hidden state; value heads as wide as q's (no padding).
    test::expectGradientsMatchFiniteDifferences(tinyMla(false, 12), {"layer.2.attn.q.weight", "layer.2.attn.kv_down.weight",
                                                                     "layer.2.attn.kv_up.weight"});
    // LayerNorm latents: their biases.
    ModelConfig layerNorm = tinyMla();
    layerNorm.norm = NormKind::LayerNorm;
    test::expectGradientsMatchFiniteDifferences(layerNorm, {"layer.3.attn.q_latent_norm.bias", "layer.3.attn.kv_latent_norm.bias",
                                                            "layer.3.attn.kv_latent_norm.weight"});
}

TEST(Mla, ManyRanksMatchOneRank) {
    const ModelConfig model = tinyMla();
    const Plan one = test::basePlan();
    Plan tp = one;
    tp.tp = 2;                                   // heads split, the latents computed whole on each rank
    test::expectMatchesOneRank(model, tp, one);
    tp.sequenceParallel = true;                  // down projections on each rank's rows, latents gathered
    test::expectMatchesOneRank(model, tp, one);
    ModelConfig layerNorm = model;               // the latent norms' biases summed over TP too
    layerNorm.norm = NormKind::LayerNorm;
    test::expectMatchesOneRank(layerNorm, tp, one);
    Plan pp = one;
    pp.pp = 2;
    pp.dp = 2;
    pp.zeroStage = 3;
    pp.recompute = Recompute::Full;
    test::expectMatchesOneRank(model, pp, one);
    Plan cp = one;                               // K and V gathered over CP, dK and dV reduce-scattered back
    cp.cp = 2;
    test::expectMatchesOneRank(model, cp, one);
    cp.tp = 2;
    cp.sequenceParallel = true;
    cp.cpComm = CpComm::AllGather;
    test::expectMatchesOneRank(model, cp, one);
    Plan a2a = one;                              // the heads traded for the positions (v padded before the exchange)
    a2a.cp = 2;
    a2a.cpComm = CpComm::A2a;
    test::expectMatchesOneRank(model, a2a, one);
    a2a.cp = 4;                                  // in pairs, K and V gathered across them
    a2a.cpComm = CpComm::A2aP2p;
    a2a.cpA2a = 2;
    test::expectMatchesOneRank(model, a2a, one);
    Plan zb = one;                               // deferred weight gradients of the up projections
    zb.pp = 2;
    zb.tp = 2;
    zb.sequenceParallel = true;
    zb.schedule = Schedule::ZeroBubble;
    test::expectMatchesOneRank(tinyMla(false, 12), zb, one);
}

// DeepSeek's whole block: latent attention before a mixed MoE layer, over expert TP, with dropout.
TEST(Mla, WithExpertsAndDropoutManyRanksMatchOneRank) {
    ModelConfig model = test::tinyMoeModel(true);
    model.kvHeads = model.heads;
    model.mla = MlaConfig{24, 16, 8, 4, 10};
    model.dropout = 0.1;
    Plan p = test::basePlan();
    p.tp = 2;
    p.sequenceParallel = true;
    p.ep = 2;
    p.dp = 2;
    p.zeroStage = 1;
    test::expectMatchesOneRank(model, p, test::basePlan());
}

TEST(Mla, RecomputeIsBitwiseTheRunThatKeepsEverything) {
    Plan p = test::basePlan();
    p.tp = 2;
    p.sequenceParallel = true;
    test::expectRecomputeIsBitwise(tinyMla(), p);
}

// Megatron-core's recompute modules of a latent-attention layer: mla_up_proj (the latent norms' outputs, q, k, v) and
// layernorm (the input norm's output), rebuilt before the attention's backward: bitwise the run that keeps
// everything, over TP with SP and under ZB-H1's deferred weight gradients; each lowers the activation peak.
TEST(Mla, RecomputeModulesAreBitwiseTheRunThatKeepsEverything) {
    namespace rm = recompute_module;
    Plan tp = test::basePlan();
    tp.tp = 2;
    tp.sequenceParallel = true;
    Plan zb = test::basePlan();
    zb.pp = 2;
    zb.dp = 2;
    zb.schedule = Schedule::ZeroBubble;
    const std::vector<std::pair<std::string, uint8_t>> modules{
        {"mla_up_proj", rm::MlaUpProj}, {"layernorm", rm::Layernorm},
        {"core_attn mla_up_proj layernorm mlp", rm::CoreAttn | rm::MlaUpProj | rm::Layernorm | rm::Mlp}};
    for (const auto& [planName, plan] : {std::pair<std::string, Plan>{"tp2 sp", tp}, {"pp2 zb dp2", zb}}) {
        for (const ModelConfig& model : {tinyMla(), tinyMla(false, 12)}) {
            const test::RunResult kept = test::runPlan(model, plan, 2);
            const auto act = static_cast<size_t>(MemoryCategory::Activations);
            for (const auto& [name, m] : modules) {
                Plan q = plan;
                q.recompute = Recompute::Selective;
                q.recomputeModules = m;
                const test::RunResult r = test::runPlan(model, q, 2);
                EXPECT_EQ(r.losses, kept.losses) << planName << ": " << name;
                EXPECT_EQ(r.params, kept.params) << planName << ": " << name;
                EXPECT_LT(r.memory[0].peakBytes[act], kept.memory[0].peakBytes[act]) << planName << ": " << name;
            }
        }
    }
    // ... and on N ranks against one: DeepSeek-V3's H100 recipe's set with experts.
    ModelConfig model = test::tinyMoeModel(true);
    model.kvHeads = model.heads;
    model.mla = MlaConfig{24, 16, 8, 4, 10};
    Plan p = tp;
    p.ep = 2;
    p.dp = 2;
    p.recompute = Recompute::Selective;
    p.recomputeModules = rm::MlaUpProj | rm::Mlp;
    test::expectMatchesOneRank(model, p, test::basePlan());
}

// The value heads padded to q's width with zeros are exact: a model whose value heads are as wide as q's, with the
// extra columns of every head's value projection and of the output projection's rows zero, trains as the narrow one
// (the padded columns' gradients are zero, so they stay zero).
TEST(Mla, PaddedValueHeadsAreExact) {
    const ModelConfig narrow = tinyMla(true, 10);
    const ModelConfig wide = tinyMla(true, 12);
    auto w = makeInProcessWorld(1);
    auto comm = makeInProcessComm(w, 0);
    auto backend = makeCpuBackend(ElementType::F64);
    const Plan plan = test::basePlan();
    ParallelContext ctx = makeContext(plan, 0, *comm, false);
    GptModel a(narrow, ctx, *backend, 5), b(wide, ctx, *backend, 5);
    // Copy the narrow model's parameters into the wide one, value columns and output rows placed in their heads.
    const int64_t heads = narrow.heads, dn = 8, dvN = 10, dvW = 12;
    for (size_t i = 0; i < a.parameters().size(); ++i) {
        const Parameter& pa = a.parameters()[i];
        Parameter& pb = b.parameters()[i];
        ASSERT_EQ(pa.info.name, pb.info.name);
        const std::vector<double> va = backend->download(pa.value);
        std::vector<double> vb(static_cast<size_t>(pb.value.numel()), 0.0);
        if (pa.info.name.find("kv_up.weight") != std::string::npos) {
            const int64_t rows = pa.value.dim(0);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t hd = 0; hd < heads; ++hd)
                    for (int64_t c = 0; c < dn + dvN; ++c)
                        vb[static_cast<size_t>(r * heads * (dn + dvW) + hd * (dn + dvW) + c)] =
                            va[static_cast<size_t>(r * heads * (dn + dvN) + hd * (dn + dvN) + c)];
        } else if (pa.info.name.find("attn.proj.weight") != std::string::npos) {
            const int64_t cols = pa.value.dim(1);
            for (int64_t hd = 0; hd < heads; ++hd)
                for (int64_t r = 0; r < dvN; ++r)
                    for (int64_t c = 0; c < cols; ++c)
                        vb[static_cast<size_t>((hd * dvW + r) * cols + c)] = va[static_cast<size_t>((hd * dvN + r) * cols + c)];
        } else {
            vb = va;
        }
        backend->upload(vb, pb.value);
    }
    const MicroBatchData data = textDataSource(test::testText(), narrow.seqLen, plan.microBatch, plan.globalBatch, 1, 7)(0, 0, 0);
    for (GptModel* g : {&a, &b}) {
        g->forward(0, 0, Tensor(), data);
        g->backward(0, 0, Tensor(), false);
    }
    EXPECT_NEAR(a.takeLossSum(), b.takeLossSum(), 1e-12);
    for (size_t i = 0; i < a.parameters().size(); ++i) {
        const std::string& name = a.parameters()[i].info.name;
        if (name.find("kv_up") != std::string::npos || name.find("attn.proj.weight") != std::string::npos) continue;
        EXPECT_LT(test::maxRelDiff(backend->download(a.parameters()[i].grad), backend->download(b.parameters()[i].grad)), 1e-10)
            << name;
    }
}

// What the executor's latent attention does not run is refused at its field, by tessel run and by the model.
TEST(Mla, RefusesWhatItDoesNotRun) {
    const std::vector<std::pair<std::string, std::function<void(ModelConfig&, Plan&)>>> cases{
        {"/model/qk_norm", [](ModelConfig& m, Plan&) { m.qkNorm = true; }},
        {"/model/qkv_bias", [](ModelConfig& m, Plan&) { m.qkvBias = true; }},
        {"/model/kv_heads", [](ModelConfig& m, Plan&) { m.kvHeads = 2; }},
        {"/model/position_embedding", [](ModelConfig& m, Plan&) { m.position = PositionEmbedding::Learned; }},
        {"/model/mla/qk_rope_head_dim", [](ModelConfig& m, Plan&) { m.mla->qkRopeHeadDim = 3; }},
        {"/model/mla/v_head_dim", [](ModelConfig& m, Plan&) { m.mla->vHeadDim = 16; }},
    };
    for (const auto& [where, edit] : cases) {
        ModelConfig m = tinyMla();
        Plan p = test::basePlan();
        edit(m, p);
        ProblemList problems;
        validateExecutable(m, p, "/plan", problems);
        bool named = false;
        for (const auto& item : problems.items()) named = named || item.where == where;
        EXPECT_TRUE(named) << where;
        auto w = makeInProcessWorld(p.worldSize());
        auto comm = makeInProcessComm(w, 0);
        auto backend = makeCpuBackend(ElementType::F64);
        try {
            ParallelContext ctx = makeContext(p, 0, *comm, false);
            GptModel gpt(m, ctx, *backend, 1);
            ADD_FAILURE() << where << " was built";
        } catch (const InputError& e) {
            ASSERT_FALSE(e.problems().empty());
            EXPECT_EQ(e.problems()[0].where, where) << e.what();
        }
    }
}

} // namespace
} // namespace tessel::exec
