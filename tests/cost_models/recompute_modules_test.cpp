// Selective recompute by module (Megatron-core's --recompute-modules, plan key recompute_modules): the plan format, the
// plans it cannot run, what each module drops from a layer's activations (by hand from the shapes) and what its
// backward reruns (the ops of the module, named here independently of compute.cpp's tags).
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/shapes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace tessel {
namespace {

namespace rm = recompute_module;

double d(int64_t v) { return static_cast<double>(v); }

// DeepSeek-V3's shapes (MLA, 256 routed experts and a shared one, three dense layers) on two H100 nodes: tp 2 with
// SP, ep 8, the Megatron-Bridge H100 recipe's kind of plan at a size a test can cost.
Plan deepseekPlan(uint8_t modules) {
    Plan p;
    p.tp = 2;
    p.pp = 1;
    p.dp = 8;
    p.ep = 8;
    p.etp = 1;
    p.sequenceParallel = true;
    p.microBatch = 1;
    p.globalBatch = 64;
    p.zeroStage = 1;
    p.framework.name = "megatron";
    p.recompute = Recompute::Selective;
    p.recomputeModules = modules;
    return p;
}

TEST(RecomputeModules, PlanFormatReadsWritesAndNamesBadEntries) {
    ProblemList problems;
    const Plan p = parsePlan(nlohmann::json{{"recompute", "selective"}, {"recompute_modules", {"mlp", "mla_up_proj"}}}, "/plan", problems);
    ASSERT_TRUE(problems.empty());
    EXPECT_EQ(p.recomputeModules, rm::Mlp | rm::MlaUpProj);
    // Written back in Megatron-core's order; the default set is not written, and an empty list stays a list.
    EXPECT_EQ(planToJson(p).at("recompute_modules"), nlohmann::json({"mla_up_proj", "mlp"}));
    EXPECT_EQ(recomputeString(p), "selective:mla_up_proj,mlp");
    Plan def = p;
    def.recomputeModules = rm::Default;
    EXPECT_FALSE(planToJson(def).contains("recompute_modules"));
    EXPECT_EQ(recomputeString(def), "selective");
    Plan none = p;
    none.recomputeModules = 0;
    EXPECT_EQ(planToJson(none).at("recompute_modules"), nlohmann::json::array());
    ProblemList again;
    EXPECT_EQ(parsePlan(planToJson(none), "/plan", again).recomputeModules, 0);
    EXPECT_TRUE(again.empty());

    ProblemList bad;
    parsePlan(nlohmann::json{{"recompute", "selective"}, {"recompute_modules", {"mlp", "attention", 3}}}, "/plan", bad);
    ASSERT_EQ(bad.items().size(), 2u);
    EXPECT_EQ(bad.items()[0].where, "/plan/recompute_modules/1");
    EXPECT_NE(bad.items()[0].message.find("core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts"), std::string::npos);
    EXPECT_EQ(bad.items()[1].where, "/plan/recompute_modules/2");
    ProblemList notList;
    parsePlan(nlohmann::json{{"recompute", "selective"}, {"recompute_modules", "mlp"}}, "/plan", notList);
    ASSERT_EQ(notList.items().size(), 1u);
    EXPECT_EQ(notList.items()[0].where, "/plan/recompute_modules");
}

TEST(RecomputeModules, RefusedWhereTheyCannotRun) {
    const ModelConfig dense = test::preset("llama3-8b");
    const ModelConfig deepseek = test::preset("deepseek-v3");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    auto problemsOf = [&](const ModelConfig& m, const Plan& p) {
        std::vector<std::string> out;
        for (const auto& [key, message] : recomputeModuleProblems(m, p)) out.push_back(key + ": " + message);
        return out;
    };
    Plan p = deepseekPlan(rm::MlaUpProj | rm::Mlp);
    EXPECT_TRUE(problemsOf(deepseek, p).empty());
    // Only selective recompute reads them.
    p.recompute = Recompute::Full;
    ASSERT_EQ(problemsOf(deepseek, p).size(), 1u);
    EXPECT_NE(problemsOf(deepseek, p)[0].find("needs recompute selective, got full"), std::string::npos);
    p.recomputeModules = 0; // the empty set is named, not left blank
    EXPECT_NE(problemsOf(deepseek, p)[0].find("recompute_modules (none) names"), std::string::npos);
    // Megatron-core's, not another framework's selective recompute.
    p = deepseekPlan(rm::Mlp);
    p.framework.name = "torchtitan";
    ASSERT_EQ(problemsOf(deepseek, p).size(), 1u);
    EXPECT_NE(problemsOf(deepseek, p)[0].find("framework 'torchtitan'"), std::string::npos);
    // Each module names a part the model has: Llama 3 has no MLA, no experts, and Transformer Engine fuses both its
    // norms into the GEMMs after them.
    Plan llama;
    llama.recompute = Recompute::Selective;
    llama.framework.name = "megatron";
    for (uint8_t bit : {rm::Layernorm, rm::MlaUpProj, rm::MoeAct, rm::Moe, rm::SharedExperts}) {
        llama.recomputeModules = bit;
        EXPECT_EQ(problemsOf(dense, llama).size(), 1u) << recomputeModulesString(bit);
    }
    for (uint8_t bit : {rm::CoreAttn, rm::Mlp, uint8_t(0)}) {
        llama.recomputeModules = bit;
        EXPECT_TRUE(problemsOf(dense, llama).empty()) << recomputeModulesString(bit);
    }
    // An MoE model whose every layer is an MoE layer has no dense MLP to recompute.
    ModelConfig allMoe = deepseek;
    allMoe.moe->denseLayers.clear();
    EXPECT_EQ(problemsOf(allMoe, deepseekPlan(rm::Mlp)).size(), 1u);
    // validatePlan names the key; with Megatron-core's EP overlap, the MoE layer's recompute is refused at the overlap.
    ProblemList problems;
    validatePlan(dense, c, [&] {
        Plan q;
        q.dp = 8;
        q.globalBatch = 8;
        q.recompute = Recompute::Selective;
        q.recomputeModules = rm::Moe;
        q.framework.name = "megatron";
        return q;
    }(), "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/recompute_modules");
    ClusterConfig two = c;
    two.nodes = 2;
    Plan overlap = deepseekPlan(rm::Moe);
    overlap.pp = 1;
    overlap.framework.moeA2aOverlap = true;
    ProblemList o;
    validatePlan(deepseek, two, overlap, "/plan", o);
    ASSERT_FALSE(o.empty());
    EXPECT_EQ(o.items()[0].where, "/plan/moe_a2a_overlap");
}

TEST(RecomputeModules, EachModuleDropsItsTensorsByHand) {
    const ModelConfig m = test::preset("deepseek-v3");
    const Plan base = deepseekPlan(0);
    const PrecisionRecipe r = precisionRecipeOf(base);
    const LocalShapes s = localShapes(m, base, r);
    const double e = s.activationBytes, g = s.gemmInputBytes;
    const double T = d(s.tokens), Tsp = d(s.tokensSp), h = d(s.hidden);
    const double all = layerActivationBytesNoRecompute(m, base, r);
    auto kept = [&](uint8_t modules) { return layerActivationBytes(m, deepseekPlan(modules), r); };
    EXPECT_DOUBLE_EQ(kept(0), all); // selective with nothing named keeps what no recompute keeps
    // core_attn under a fused kernel: the checkpoint keeps q, k, v (its inputs) and the projection keeps the output,
    // so only the kernel's fp32 log-sum-exp goes.
    EXPECT_DOUBLE_EQ(all - kept(rm::CoreAttn), 4.0 * d(s.microBatch) * d(s.headsLocal) * d(s.seqLocal));
    // mla_up_proj: q, k and v, and the latent norms' outputs the up projections read; it keeps its input the rotary
    // key before RoPE (Megatron-core's k_pos_emb), which nothing else keeps.
    EXPECT_DOUBLE_EQ(all - kept(rm::MlaUpProj), e * T * d(s.qDimLocal + s.kvDimLocal + s.vDimLocal) +
                                                    g * T * d(s.qLatent + s.kvLoraRank) - e * T * d(m.mla->qkRopeHeadDim));
    // layernorm: MLA's input norm and the MoE layer's pre-MLP norm, each output a token's hidden state (SP-split).
    EXPECT_DOUBLE_EQ(all - kept(rm::Layernorm), 2.0 * g * Tsp * h);
    // moe_act: the experts' activation output, fc2's input.
    const double routed = d(s.expertTokens);
    EXPECT_DOUBLE_EQ(all - kept(rm::MoeAct), g * routed * d(s.expertFfnLocal));
    // shared_experts: the shared MLP's fc1 output (gate and up) and fc2 input.
    const double shared = e * T * d(s.sharedFfnLocal) * 2.0 + g * T * d(s.sharedFfnLocal);
    EXPECT_DOUBLE_EQ(all - kept(rm::SharedExperts), shared);
    // moe: all the layer's MoE tensors but its input: router probabilities and gates (fp32), permuted tokens, the
    // experts' fc1 output and fc2 input, their outputs, and the shared experts'.
    const double router = d(s.moeTokensIn);
    const double moe = 4.0 * router * d(m.moe->experts) + 4.0 * router * d(s.topK) + g * routed * h +
                       e * routed * d(s.expertFfnLocal) * 2.0 + g * routed * d(s.expertFfnLocal) + e * routed * h + shared;
    EXPECT_NEAR(all - kept(rm::Moe), moe, 1e-9 * moe);
    EXPECT_NEAR(all - kept(rm::Moe | rm::MoeAct | rm::SharedExperts), moe, 1e-9 * moe); // the larger, once
    // The norms' statistics: layernorm reruns both norms of this layer.
    EXPECT_DOUBLE_EQ(layerNormStatisticsBytes(m, deepseekPlan(rm::Layernorm), r), 0.0);
    EXPECT_DOUBLE_EQ(layerNormStatisticsBytes(m, deepseekPlan(0), r), 2.0 * 2.0 * Tsp * 4.0);

    // A dense layer: mlp drops fc1's input (the norm's output), fc1's output and fc2's input, and the MLP norm's
    // statistics (Transformer Engine's LayerNormMLP is inside the checkpoint); the block's input stays.
    const ModelConfig dense = m.denseLayerModel();
    const LocalShapes ds = localShapes(dense, base, r);
    const double allDense = layerActivationBytesNoRecompute(dense, base, r);
    EXPECT_DOUBLE_EQ(allDense - layerActivationBytes(dense, deepseekPlan(rm::Mlp), r),
                     g * Tsp * h + e * T * d(ds.ffnLocal) * 2.0 + g * T * d(ds.ffnLocal));
    EXPECT_DOUBLE_EQ(layerNormStatisticsBytes(dense, deepseekPlan(rm::Mlp), r), 2.0 * Tsp * 4.0);
    // The MoE modules name nothing in a dense layer, and mlp nothing in an MoE layer.
    EXPECT_DOUBLE_EQ(layerActivationBytes(dense, deepseekPlan(rm::Moe | rm::MoeAct | rm::SharedExperts), r), allDense);
    EXPECT_DOUBLE_EQ(kept(rm::Mlp), all);
}

// What a module drops is alive again while its block's backward runs: one layer's rerun beside the stored
// activations, the attention block's (core_attn, mla_up_proj, MLA's input norm) or the MLP block's (mlp, moe, moe_act,
// shared_experts, the MoE layer's pre-MLP norm), whichever set is larger, never both.
TEST(RecomputeModules, TheRerunBlockIsAliveDuringItsBackward) {
    const ModelConfig m = test::preset("deepseek-v3");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const PrecisionRecipe r = precisionRecipeOf(deepseekPlan(0));
    const double all = layerActivationBytesNoRecompute(m, deepseekPlan(0), r);
    auto dropped = [&](uint8_t modules) { return all - layerActivationBytes(m, deepseekPlan(modules), r); };
    auto working = [&](uint8_t modules, int stage) {
        Plan p = deepseekPlan(modules);
        p.pp = 4; // stage 0 holds the three dense layers and MoE layers, stage 1 MoE layers only
        p.dp = 2;
        return predictMemory(m, c, p).stages[static_cast<size_t>(stage)].other.backwardWorkingBytes;
    };
    // An MoE layer's own backward gradients are not counted: the set is the rerun block alone (mla_up_proj's: what it
    // dropped, without the rotary key it keeps as its input, which stays stored).
    const LocalShapes shapes = localShapes(m, deepseekPlan(0), r);
    const double rotaryKey = shapes.activationBytes * d(shapes.tokens) * d(m.mla->qkRopeHeadDim);
    const double upProj = dropped(rm::MlaUpProj) + rotaryKey;
    EXPECT_DOUBLE_EQ(working(rm::MlaUpProj, 1), upProj);
    EXPECT_DOUBLE_EQ(layerSelectiveRebuild(m, deepseekPlan(rm::MlaUpProj), r).attentionBytes, upProj);
    EXPECT_DOUBLE_EQ(working(rm::Moe, 1), dropped(rm::Moe));
    const double moeBytes = dropped(rm::Moe);
    EXPECT_NE(moeBytes, upProj);
    EXPECT_DOUBLE_EQ(working(rm::MlaUpProj | rm::Moe, 1), std::max(moeBytes, upProj)); // one block at a time
    // layernorm splits across the blocks: MLA's input norm reruns with the attention, the pre-MLP norm with the MoE.
    EXPECT_NEAR(working(rm::Layernorm | rm::Moe, 1), moeBytes + 0.5 * dropped(rm::Layernorm), 1e-9 * moeBytes);
    EXPECT_DOUBLE_EQ(working(0, 1), 0.0); // nothing dropped, nothing rerun
    // The stage with dense layers: the larger of the dense layer's mlp rerun and the MoE layers' own.
    const ModelConfig dense = m.denseLayerModel();
    const double denseMlp = layerActivationBytesNoRecompute(dense, deepseekPlan(0), r) -
                            layerActivationBytes(dense, deepseekPlan(rm::Mlp), r);
    EXPECT_GT(denseMlp, 0.0);
    EXPECT_DOUBLE_EQ(working(rm::Mlp, 0), denseMlp);
    EXPECT_DOUBLE_EQ(working(rm::Mlp, 1), 0.0); // mlp names no MoE layer's tensors
    EXPECT_DOUBLE_EQ(working(rm::Mlp | rm::Moe, 0), std::max(denseMlp, moeBytes));

    // A dense model: the MLP's backward gradients (fc2 input and fc1 output, three [T, h]) beside its rerun.
    const ModelConfig llama = test::preset("llama3-8b");
    Plan p;
    p.tp = 2;
    p.dp = 4;
    p.sequenceParallel = true;
    p.globalBatch = 64;
    p.framework.name = "megatron";
    p.recompute = Recompute::Selective;
    p.recomputeModules = rm::Mlp;
    const LocalShapes s = localShapes(llama, p, r);
    const double e = s.activationBytes, g = s.gemmInputBytes, T = d(s.tokens), h = d(s.hidden), f = d(s.ffnLocal);
    const double gradients = e * T * (3.0 * f + 3.0 * h);
    const double rerun = g * d(s.tokensSp) * h + e * T * f * 2.0 + g * T * f;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages[0].layerBackwardWorkingBytes, gradients + rerun);
    p.recomputeModules = rm::CoreAttn; // flash: its log-sum-exp, far below the MLP's set
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages[0].layerBackwardWorkingBytes, gradients);
}

// The ops each module's forward holds, as Megatron-core's code draws them (transformer_layer.py, multi_latent_attention.py,
// moe_layer.py, experts.py), by compute.cpp's op names.
const std::map<std::string, uint8_t>& moduleOfOp() {
    static const std::map<std::string, uint8_t> ops{
        {"norm_attn", rm::Layernorm},  // MLA's input norm (not fused into a TE linear)
        {"q_latent_norm", rm::MlaUpProj}, {"q_up", rm::MlaUpProj}, {"kv_latent_norm", rm::MlaUpProj}, {"kv_up", rm::MlaUpProj},
        {"rope", rm::MlaUpProj},       {"mla_concat", rm::MlaUpProj},
        {"attention_core_flash", rm::CoreAttn},
        {"router", rm::Moe},           {"moe_permute", rm::Moe}, {"expert_fc1", rm::Moe}, {"expert_swiglu", rm::Moe | rm::MoeAct},
        {"expert_fc2", rm::Moe},       {"moe_unpermute", rm::Moe},
        {"shared_fc1", rm::Moe | rm::SharedExperts}, {"shared_swiglu", rm::Moe | rm::SharedExperts},
        {"shared_fc2", rm::Moe | rm::SharedExperts},
        {"fc1", rm::Mlp},              {"swiglu", rm::Mlp},      {"fc2", rm::Mlp}};
    return ops;
}

TEST(RecomputeModules, TheBackwardRerunsExactlyTheModulesOps) {
    // Over every set of the seven modules, on DeepSeek-V3's MoE layer and its dense layer: the recompute is the sum of
    // the forward times of the ops of the named modules (the pre-MLP norm: layernorm's in an MoE layer, inside the
    // MLP in a dense one), and their FLOPs are hardware work, not model work.
    const ModelConfig m = test::preset("deepseek-v3");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const Plan base = deepseekPlan(0);
    const PrecisionRecipe r = precisionRecipeOf(base);
    for (const ModelConfig& layer : {m, m.denseLayerModel()}) {
        std::set<std::string> seen;
        for (int modules = 0; modules <= rm::All; ++modules) {
            const Plan p = deepseekPlan(static_cast<uint8_t>(modules));
            const BlockCompute b = layerCompute(layer, c, p, r);
            double want = 0.0, flops = 0.0;
            for (const OpCost& op : b.forwardOps) {
                auto it = moduleOfOp().find(op.name);
                uint8_t module = it == moduleOfOp().end() ? 0 : it->second;
                if (op.name == "norm_mlp") module = layer.moe ? rm::Layernorm : rm::Mlp;
                if (module & modules) {
                    want += op.seconds;
                    flops += op.flops;
                    seen.insert(op.name);
                }
            }
            ASSERT_NEAR(b.recompute.seconds, want, 1e-12 + 1e-9 * want) << recomputeModulesString(static_cast<uint8_t>(modules));
            ASSERT_NEAR(b.recompute.flops, flops, 1e-6 * (1.0 + flops));
            ASSERT_NEAR(b.recompute.modelFlops, 0.0, 1e-6 * (1.0 + flops));
            if (modules == 0) EXPECT_EQ(b.recompute.seconds, 0.0);
        }
        // The table is not stale: the MoE layer reruns 18 named ops in some set, the dense layer 12 (its MLA ops and
        // fc1, swiglu, fc2, norms; the attention core).
        EXPECT_EQ(seen.size(), layer.moe ? 18u : 12u);
    }
}

TEST(RecomputeModules, MoreModulesKeepLessAndRerunMore) {
    // Property over every pair of sets, one inside the other: the larger keeps no more activations and reruns no
    // less; each lies between full recompute (the layer's input only) and none.
    const ModelConfig m = test::preset("deepseek-v3");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const PrecisionRecipe r = precisionRecipeOf(deepseekPlan(0));
    Plan full = deepseekPlan(rm::Default);
    full.recompute = Recompute::Full;
    full.recomputeModules = rm::Default;
    const double fullKept = layerActivationBytes(m, full, r);
    const double noneKept = layerActivationBytesNoRecompute(m, deepseekPlan(0), r);
    std::vector<double> keptOf(rm::All + 1), rerunOf(rm::All + 1);
    for (int k = 0; k <= rm::All; ++k) {
        keptOf[k] = layerActivationBytes(m, deepseekPlan(static_cast<uint8_t>(k)), r);
        rerunOf[k] = layerCompute(m, c, deepseekPlan(static_cast<uint8_t>(k)), r).recompute.flops;
        EXPECT_GT(keptOf[k], fullKept);
        EXPECT_LE(keptOf[k], noneKept);
    }
    for (int a = 0; a <= rm::All; ++a)
        for (int b = 0; b <= rm::All; ++b)
            if ((a & b) == a) {
                ASSERT_GE(keptOf[a], keptOf[b] - 1e-6) << a << " " << b;
                ASSERT_LE(rerunOf[a], rerunOf[b] + 1e-6) << a << " " << b;
            }
}

} // namespace
} // namespace tessel
