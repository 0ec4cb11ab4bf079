// Tests of the compute model: hand-checkable FLOPs, the roofline, backward/recompute rules, MFU numerator.
#include "compute_support.hpp"
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <tuple>

namespace tessel {
namespace {
using test::forwardOpNamed;
using test::Tp4Case;
using test::tp2OnEight;

TEST(Compute, GemmFlopsAreTwoMnkPerRank) {
    const Tp4Case k;
    const auto& recipe = *findPrecisionRecipe("megatron");
    auto layer = layerCompute(k.m, k.c, k.p, recipe);
    const double T = 2.0 * 2048;
    EXPECT_DOUBLE_EQ(forwardOpNamed(layer, "qkv").flops, 2.0 * T * (3.0 * 1024 / 4) * 1024);
    EXPECT_DOUBLE_EQ(forwardOpNamed(layer, "attn_proj").flops, 2.0 * T * 1024 * (1024.0 / 4));
    EXPECT_DOUBLE_EQ(forwardOpNamed(layer, "fc1").flops, 2.0 * T * (4096.0 / 4) * 1024);
    EXPECT_DOUBLE_EQ(forwardOpNamed(layer, "fc2").flops, 2.0 * T * 1024 * (4096.0 / 4));
    // Attention core: 4 b a s^2 d / tp, half executed by causal flash attention.
    const double full = 4.0 * 2 * (16.0 / 4) * 2048.0 * 2048.0 * 64;
    EXPECT_DOUBLE_EQ(forwardOpNamed(layer, "attention_core_flash").modelFlops, full);
    EXPECT_DOUBLE_EQ(forwardOpNamed(layer, "attention_core_flash").flops, full / 2);
    // A sliding window of 512 keys over 2048: query i sees min(i + 1, 512) keys, 512 x 513 / 2 + 1536 x 512 in all,
    // against the causal 2048 x 2049 / 2; the kernel runs at a 512-key rate. A window as long as the sequence is none.
    Tp4Case windowed;
    windowed.m.slidingWindow = 512;
    const auto w = layerCompute(windowed.m, windowed.c, windowed.p, recipe);
    const double fraction = (512.0 * 513.0 / 2.0 + 1536.0 * 512.0) / (2048.0 * 2049.0 / 2.0);
    EXPECT_DOUBLE_EQ(forwardOpNamed(w, "attention_core_flash").flops, full / 2 * fraction);
    EXPECT_EQ(forwardOpNamed(w, "attention_core_flash").n, 512);
    // The MFU convention's every-query-against-every-key count becomes each query against its 512 keys.
    EXPECT_DOUBLE_EQ(forwardOpNamed(w, "attention_core_flash").modelFlops, full * 512.0 / 2048.0);
    EXPECT_LT(w.forward.seconds, layer.forward.seconds);
    windowed.m.slidingWindow = 2048;
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(windowed.m, windowed.c, windowed.p, recipe), "attention_core_flash").flops,
                     full / 2);
}

TEST(Compute, RooflineTakesTheSlowerBound) {
    ClusterConfig c = test::roundCluster(8, 1);
    c.gpu.gemmEfficiency = {{64, 0.25}, {1024, 0.75}};
    OpCost mem;
    mem.opClass = OpClass::Memory;
    mem.bytes = 4e9;
    EXPECT_DOUBLE_EQ(opSeconds(mem, c, Dtype::Bf16), 4e9 / 2e12);
    OpCost g;
    g.opClass = OpClass::Gemm;
    g.m = g.n = g.k = 1024;
    g.flops = 2.0 * 1024 * 1024 * 1024;
    g.bytes = 1.0;
    EXPECT_DOUBLE_EQ(opSeconds(g, c, Dtype::Bf16), g.flops / (1e15 * 0.75));
    g.m = 256; // halfway between 64 and 1024 in log2: efficiency 0.5
    EXPECT_DOUBLE_EQ(opSeconds(g, c, Dtype::Bf16), g.flops / (1e15 * 0.5));
    c.gpu.kernelOverheadSeconds = 1e-5;
    EXPECT_DOUBLE_EQ(opSeconds(mem, c, Dtype::Bf16), 4e9 / 2e12 + 1e-5);
}

TEST(Compute, ASustainedShareSlowsTensorCoreKernelsOnly) {
    // gpu.sustained_tensor_fraction (FORMULAS.md §3.3) divides the throughput of GEMMs and fused attention; a
    // memory-bound kernel moves its bytes as before.
    ClusterConfig c = test::roundCluster(8, 1);
    c.gpu.gemmEfficiency = {{64, 0.5}};
    c.gpu.attentionKernels["flash2"] = {0.6, 0.5, 0.0};
    c.gpu.defaultAttentionKernel = "flash2";
    OpCost g;
    g.opClass = OpClass::Gemm;
    g.m = g.n = g.k = 1024;
    g.flops = 2.0 * 1024 * 1024 * 1024;
    g.bytes = 1.0;
    OpCost attn = g;
    attn.opClass = OpClass::Attention;
    OpCost mem;
    mem.opClass = OpClass::Memory;
    mem.bytes = 4e9;
    c.gpu.sustainedTensorFraction = 0.8;
    EXPECT_DOUBLE_EQ(opSeconds(g, c, Dtype::Bf16), g.flops / (1e15 * 0.5 * 0.8));
    EXPECT_DOUBLE_EQ(opSeconds(attn, c, Dtype::Bf16), attn.flops / (1e15 * 0.6 * 0.8));
    EXPECT_DOUBLE_EQ(opSeconds(mem, c, Dtype::Bf16), 4e9 / 2e12);
    // Read from and written to the cluster file; outside (0, 1] is an error that names the field.
    nlohmann::json j = clusterToJson(c);
    EXPECT_DOUBLE_EQ(j["gpu"]["sustained_tensor_fraction"].get<double>(), 0.8);
    EXPECT_DOUBLE_EQ(parseCluster(j).gpu.sustainedTensorFraction, 0.8);
    j["gpu"]["sustained_tensor_fraction"] = 1.5;
    try {
        parseCluster(j);
        FAIL() << "expected an InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "/gpu/sustained_tensor_fraction");
    }
    j["gpu"].erase("sustained_tensor_fraction");
    EXPECT_DOUBLE_EQ(parseCluster(j).gpu.sustainedTensorFraction, 1.0);
}

// Gemma's GeGLU reads gate and up and writes their product as SwiGLU does, around a gate and up of the same shapes:
// a dense model's and an MoE model's layers cost SwiGLU's, keep its memory and parameters, and name the op geglu.
TEST(Compute, GegluCostsWhatSwigluCostsUnderItsOwnName) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const auto& recipe = *findPrecisionRecipe("megatron");
    for (const char* preset : {"llama3-8b", "tiny-moe"}) {
        const ModelConfig swiglu = test::preset(preset);
        ModelConfig geglu = swiglu;
        geglu.activation = Activation::Geglu;
        Plan p;
        p.tp = 2;
        p.dp = 4;
        const BlockCompute s = layerCompute(swiglu, c, p, recipe), g = layerCompute(geglu, c, p, recipe);
        const std::string op = swiglu.moe ? "expert_" : "";
        EXPECT_DOUBLE_EQ(forwardOpNamed(g, op + "geglu").seconds, forwardOpNamed(s, op + "swiglu").seconds) << preset;
        EXPECT_THROW(forwardOpNamed(g, op + "swiglu"), std::runtime_error) << preset;
        EXPECT_DOUBLE_EQ(g.forward.seconds + g.backward().seconds, s.forward.seconds + s.backward().seconds) << preset;
        EXPECT_EQ(countParameters(geglu).total(geglu.layers), countParameters(swiglu).total(swiglu.layers)) << preset;
        EXPECT_DOUBLE_EQ(predictMemory(geglu, c, p).peakBytes, predictMemory(swiglu, c, p).peakBytes) << preset;
        EXPECT_EQ(modelToJson(geglu)["activation"], "geglu");
    }
}

// Norms after attention and the MLP (Gemma 2 and 3): two more norms a layer, each with the bytes of the one before
// its block, keeping its input (the block's output, 16-bit) and its statistics, and one more weight each.
TEST(Compute, PostNormsAreTwoMoreNormsOfTheSameCost) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const auto& recipe = *findPrecisionRecipe("megatron");
    const ModelConfig pre = test::preset("llama3-8b");
    ModelConfig sandwich = pre;
    sandwich.postNorms = true;
    Plan p;
    p.tp = 2;
    p.dp = 4;
    p.sequenceParallel = true;
    const BlockCompute a = layerCompute(pre, c, p, recipe), b = layerCompute(sandwich, c, p, recipe);
    for (const char* name : {"norm_post_attn", "norm_post_mlp"}) {
        EXPECT_THROW(forwardOpNamed(a, name), std::runtime_error);
        EXPECT_DOUBLE_EQ(forwardOpNamed(b, name).bytes, forwardOpNamed(b, "norm_attn").bytes) << name;
    }
    // The two norms' time, and a little more: the block's tensor-core duty moves with its length (FORMULAS.md §3.3).
    const double norms = 2.0 * forwardOpNamed(b, "norm_mlp").seconds;
    EXPECT_NEAR(b.forward.seconds - a.forward.seconds, norms, 0.1 * norms);
    EXPECT_EQ(countParameters(sandwich).total(32) - countParameters(pre).total(32), 32 * 2 * 4096LL);
    const double tokensSp = 8192.0 / 2.0; // one sequence of 8192, split over tp 2 by SP
    EXPECT_DOUBLE_EQ(layerActivationBytes(sandwich, p, recipe) - layerActivationBytes(pre, p, recipe), 2.0 * 2.0 * tokensSp * 4096);
    EXPECT_DOUBLE_EQ(layerNormStatisticsBytes(sandwich, p, recipe), 2.0 * layerNormStatisticsBytes(pre, p, recipe));
}

// BLOOM's embedding norm: one norm op of a layer norm's bytes in the embedding's forward, its backward in the input
// gradients, never in the recompute (it is outside the layer checkpoints); 2h more parameters in the model's count.
TEST(Compute, EmbeddingNormIsOneNormForwardAndBackwardNeverRecomputed) {
    const ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    const auto& recipe = *findPrecisionRecipe("megatron");
    const ModelConfig plain = test::preset("gpt3-1.3b");
    ModelConfig bloom = plain;
    bloom.embeddingNorm = true;
    Plan p;
    p.tp = 2;
    p.dp = 4;
    p.recompute = Recompute::Full;
    const BlockCompute a = embeddingCompute(plain, c, p, recipe), b = embeddingCompute(bloom, c, p, recipe);
    EXPECT_THROW(forwardOpNamed(a, "norm_embedding"), std::runtime_error);
    const OpCost& norm = forwardOpNamed(b, "norm_embedding");
    EXPECT_DOUBLE_EQ(norm.bytes, forwardOpNamed(layerCompute(plain, c, p, recipe), "norm_attn").bytes);
    EXPECT_DOUBLE_EQ(norm.bytes, 2.0 * 2.0 * 2048.0 * 2048.0); // one sequence of 2048 at hidden 2048, 16-bit, read and written
    EXPECT_DOUBLE_EQ(b.forward.seconds - a.forward.seconds, norm.seconds);
    EXPECT_GT(b.backwardInput.seconds - a.backwardInput.seconds, norm.seconds);
    EXPECT_DOUBLE_EQ(b.recompute.seconds, a.recompute.seconds);
    EXPECT_EQ(countParameters(bloom).total(bloom.layers) - countParameters(plain).total(plain.layers), 2 * 2048LL);
    EXPECT_TRUE(parseModel(modelToJson(bloom)).embeddingNorm);
    // BLOOM 176B as BigScience released it (70 layers, hidden 14336, 112 heads, ALiBi, biases, tied embeddings, the
    // vocabulary padded to 250880): 176,247,271,424 parameters, the Hugging Face model card's count, the embedding's
    // LayerNorm (2 x 14336) included.
    ModelConfig bloom176 = plain;
    bloom176.layers = 70;
    bloom176.hidden = 14336;
    bloom176.heads = bloom176.kvHeads = 112;
    bloom176.headDim = 128;
    bloom176.ffnHidden = 4 * 14336;
    bloom176.vocab = 250880;
    bloom176.position = PositionEmbedding::Alibi;
    bloom176.embeddingNorm = true;
    EXPECT_EQ(countParameters(bloom176).total(70), 176247271424LL);
}

TEST(Compute, SquaredReluCostsWhatGeluCostsUnderItsOwnName) {
    // Nemotron's squared ReLU, like GELU, reads the fc1 output and writes its activation, the backward the same
    // again, between an fc1 and an fc2 of the same shapes: time, memory and parameters are GELU's; only the name
    // (what `tessel predict` lists) differs.
    ModelConfig gelu = test::preset("gpt3-1.3b");
    gelu.linearBias = false;
    ModelConfig relu2 = gelu;
    relu2.activation = Activation::SquaredRelu;
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.tp = 2;
    p.dp = 4;
    const auto& recipe = *findPrecisionRecipe("megatron");
    const BlockCompute a = layerCompute(gelu, c, p, recipe), b = layerCompute(relu2, c, p, recipe);
    EXPECT_DOUBLE_EQ(forwardOpNamed(b, "squared_relu").bytes, forwardOpNamed(a, "gelu").bytes);
    EXPECT_THROW(forwardOpNamed(b, "gelu"), std::runtime_error);
    EXPECT_DOUBLE_EQ(b.forward.seconds, a.forward.seconds);
    EXPECT_DOUBLE_EQ(b.backward().seconds, a.backward().seconds);
    EXPECT_EQ(countParameters(relu2).total(relu2.layers), countParameters(gelu).total(gelu.layers));
    EXPECT_DOUBLE_EQ(predictMemory(relu2, c, p).peakBytes, predictMemory(gelu, c, p).peakBytes);
    // The model file's name round-trips.
    const ModelConfig back = parseModel(modelToJson(relu2));
    EXPECT_EQ(back.activation, Activation::SquaredRelu);
    EXPECT_EQ(modelToJson(relu2)["activation"], "squared_relu");
}

TEST(Compute, BackwardIsTwiceForwardForGemmsAndRecomputeAddsWhatItRedoes) {
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    p.dp = 8;
    p.globalBatch = 8;
    const auto& recipe = *findPrecisionRecipe("megatron");
    auto none = layerCompute(m, c, p, recipe);
    double gemmForward = 0.0;
    for (const auto& op : none.forwardOps)
        if (op.opClass == OpClass::Gemm) gemmForward += op.flops;
    EXPECT_NEAR(none.backwardWeight.flops, gemmForward, 1e-6 * gemmForward);
    EXPECT_DOUBLE_EQ(none.backward().modelFlops, 2.0 * none.forward.modelFlops);
    EXPECT_DOUBLE_EQ(none.recompute.seconds, 0.0);

    p.recompute = Recompute::Selective;
    auto sel = layerCompute(m, c, p, recipe);
    EXPECT_DOUBLE_EQ(sel.recompute.flops, forwardOpNamed(sel, "attention_core_flash").flops);
    EXPECT_DOUBLE_EQ(sel.recompute.modelFlops, 0.0);

    p.recompute = Recompute::Full;
    auto full = layerCompute(m, c, p, recipe);
    EXPECT_DOUBLE_EQ(full.recompute.seconds, full.forward.seconds);
}

TEST(Compute, AlibiWritesTheScoresOnceMoreWithoutFlashAndNothingInBackward) {
    // Megatron-DeepSpeed's ALiBi: baddbmm(bias, q, k^T, beta = 1) copies the broadcast bias into the scores and the
    // batched GEMM reads them back: 2 e per score, forward only. Here b 1, 16 heads / tp 2 = 8, s 1024, e 2.
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    m.position = PositionEmbedding::Alibi;
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p = tp2OnEight();
    p.flashAttention = false;
    const auto& recipe = *findPrecisionRecipe("megatron");
    const BlockCompute alibi = layerCompute(m, c, p, recipe);
    const OpCost& bias = forwardOpNamed(alibi, "attention_alibi");
    EXPECT_DOUBLE_EQ(bias.bytes, 2.0 * 2.0 * 8.0 * 1024.0 * 1024.0);
    EXPECT_THROW(forwardOpNamed(alibi, "rope"), std::runtime_error);
    ModelConfig learned = m;
    learned.position = PositionEmbedding::Learned;
    const BlockCompute plain = layerCompute(learned, c, p, recipe);
    EXPECT_NEAR(alibi.forward.seconds - plain.forward.seconds, bias.seconds, 1e-15);
    EXPECT_DOUBLE_EQ(alibi.backward().seconds, plain.backward().seconds);  // the bias needs no gradient
    // Selective recompute reruns the core attention, the bias's copy with it.
    p.recompute = Recompute::Selective;
    EXPECT_NEAR(layerCompute(m, c, p, recipe).recompute.seconds - layerCompute(learned, c, p, recipe).recompute.seconds,
                bias.seconds, 1e-15);
    // FlashAttention applies the slopes inside its kernel: no op of its own.
    p.flashAttention = true;
    EXPECT_THROW(forwardOpNamed(layerCompute(m, c, p, recipe), "attention_alibi"), std::runtime_error);
}

TEST(Compute, EagerUnfusedAttentionScalesMasksAndSoftmaxesInThreePasses) {
    // Megatron-LM of 2019 and Hugging Face's eager attention: scores / sqrt(d), the causal mask, softmax, each an op
    // over the b (a/t) s^2 scores: 6 e a score forward (fused: 2 e), 7 e backward. Here b 1, 16 heads / tp 2 = 8,
    // s 1024, e 2: 8 x 1024^2 scores.
    const ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    const ClusterConfig c = test::roundCluster(8, 1);
    Plan p = tp2OnEight();
    p.flashAttention = false;
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double scores = 8.0 * 1024.0 * 1024.0;
    const OpCost& fused = forwardOpNamed(layerCompute(m, c, p, recipe), "attention_softmax");
    EXPECT_DOUBLE_EQ(fused.bytes, 2.0 * 2.0 * scores);
    p.framework.fusedKernels = false;
    const BlockCompute eager = layerCompute(m, c, p, recipe);
    const OpCost& chain = forwardOpNamed(eager, "attention_softmax");
    EXPECT_DOUBLE_EQ(chain.bytes, 6.0 * 2.0 * scores);
    EXPECT_DOUBLE_EQ(chain.bytes * chain.backwardByteFactor, 7.0 * 2.0 * scores);
    // Megatron-LM ran eager until its fused kernels of 2020-09: a 2019 plan is eager by default, a 2021 one fused.
    p.framework = FrameworkSettings{};
    p.framework.name = "megatron";
    p.framework.version = "2019";
    EXPECT_FALSE(fusedKernelsOf(p.framework));
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(m, c, p, recipe), "attention_softmax").bytes, chain.bytes);
    p.framework.version = "2021";
    EXPECT_TRUE(fusedKernelsOf(p.framework));
    p.framework.version = "";
    EXPECT_TRUE(fusedKernelsOf(p.framework));
}

TEST(Compute, QkNormsReadAndWriteEachHeadOfQAndKAndKeepTheirInputs) {
    // Qwen3's q_norm / k_norm: an RMSNorm over each head of q and k. Here h 2048, 16 heads of 128, kv 4 heads,
    // tp 2: q 1024 and k 256 columns a rank, T = 1024 tokens, e = 2.
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    m.kvHeads = 4;
    m.norm = NormKind::RmsNorm;
    m.activation = Activation::Swiglu;
    ModelConfig plain = m;
    m.qkNorm = true;
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p = tp2OnEight();
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double T = 1024.0, cols = 1024.0 + 256.0, e = 2.0;
    const BlockCompute with = layerCompute(m, c, p, recipe);
    EXPECT_DOUBLE_EQ(forwardOpNamed(with, "qk_norm").bytes, 2.0 * e * T * cols);
    EXPECT_THROW(forwardOpNamed(layerCompute(plain, c, p, recipe), "qk_norm"), std::runtime_error);
    // Two weights a head wide, replicated over TP; the norms keep their inputs and 1/rms per token and head.
    EXPECT_DOUBLE_EQ(layerParameters(m, p).dense - layerParameters(plain, p).dense, 2.0 * 128.0);
    EXPECT_DOUBLE_EQ(layerActivationBytesNoRecompute(m, p, recipe) - layerActivationBytesNoRecompute(plain, p, recipe),
                     e * T * cols + 4.0 * T * (8.0 + 2.0));
    EXPECT_EQ(countParameters(m).perLayerNorms - countParameters(plain).perLayerNorms, 2 * 128);
}

// A latent-attention model a reader can count: h 2048, 16 heads, q latent 512, kv latent 256, heads of 128 + 64
// (q, k) and 128 (v), RMSNorm, RoPE, SwiGLU; beside it the same model with plain multi-head attention.
ModelConfig latentModel() {
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    m.norm = NormKind::RmsNorm;
    m.position = PositionEmbedding::Rope;
    m.activation = Activation::Swiglu;
    m.linearBias = false;
    m.mla = MlaConfig{512, 256, 128, 64, 128};
    m.headDim = 192;
    return m;
}

TEST(Compute, LatentAttentionProjectsThroughItsLatentsByHand) {
    ModelConfig m = latentModel();
    ModelConfig plain = m;
    plain.mla.reset();
    plain.headDim = 128;
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p = tp2OnEight(); // tp 2 (8 heads a rank), one sequence of 1024 tokens, no SP
    const auto& recipe = *findPrecisionRecipe("megatron");
    const BlockCompute b = layerCompute(m, c, p, recipe);
    auto shape = [&](const char* name) {
        const OpCost& op = forwardOpNamed(b, name);
        return std::make_tuple(op.m, op.n, op.k);
    };
    // The down projections are duplicated over TP: every token, the whole latent; the up projections are a/t heads.
    EXPECT_EQ(shape("q_down"), std::make_tuple(int64_t{1024}, int64_t{512}, int64_t{2048}));
    EXPECT_EQ(shape("q_up"), std::make_tuple(int64_t{1024}, int64_t{8 * 192}, int64_t{512}));
    EXPECT_EQ(shape("kv_down"), std::make_tuple(int64_t{1024}, int64_t{256 + 64}, int64_t{2048}));
    EXPECT_EQ(shape("kv_up"), std::make_tuple(int64_t{1024}, int64_t{8 * (128 + 128)}, int64_t{256}));
    EXPECT_EQ(shape("attn_proj"), std::make_tuple(int64_t{1024}, int64_t{2048}, int64_t{8 * 128}));
    EXPECT_THROW(forwardOpNamed(b, "qkv"), std::runtime_error);
    // Causal attention: half of 2 x 8 heads x 1024 x 1024 x (192 + 128).
    EXPECT_DOUBLE_EQ(forwardOpNamed(b, "attention_core_flash").flops, 8.0 * 1024.0 * 1024.0 * 320.0);
    // With SP each rank's down projections see its own 512 tokens, and the gather carries the latents (512 + 320
    // wide, e = 2) instead of the hidden state; the reduce-scatter of their gradients the same.
    Plan sp = p;
    sp.sequenceParallel = true;
    const BlockCompute bs = layerCompute(m, c, sp, recipe);
    EXPECT_EQ(forwardOpNamed(bs, "q_down").m, 512);
    EXPECT_EQ(forwardOpNamed(bs, "kv_down").m, 512);
    EXPECT_EQ(forwardOpNamed(bs, "q_up").m, 1024);
    auto bytesOf = [&](const ModelConfig& model, const std::string& name) {
        for (const auto& op : layerCommOps(model, c, sp))
            if (op.name == name) return op.bytes;
        return -1.0;
    };
    EXPECT_DOUBLE_EQ(bytesOf(m, "tp_all_gather_attn"), 2.0 * 1024.0 * (512.0 + 320.0));
    EXPECT_DOUBLE_EQ(bytesOf(m, "tp_reduce_scatter_attn_grad"), 2.0 * 1024.0 * (512.0 + 320.0));
    EXPECT_DOUBLE_EQ(bytesOf(m, "tp_reduce_scatter_attn"), 2.0 * 1024.0 * 2048.0);
    EXPECT_DOUBLE_EQ(bytesOf(plain, "tp_all_gather_attn"), 2.0 * 1024.0 * 2048.0);
    // Parameters a rank: the down projections and the latents' norms whole, the rest / 2.
    const double down = 2048.0 * 512.0 + 2048.0 * 320.0;
    const double up = 512.0 * 16.0 * 192.0 + 256.0 * 16.0 * 256.0 + 16.0 * 128.0 * 2048.0;
    const double plainAttention = (2048.0 * 3.0 * 2048.0 + 2048.0 * 2048.0) / 2.0;
    EXPECT_DOUBLE_EQ(layerParameters(m, p).dense - layerParameters(plain, p).dense,
                     down + up / 2.0 + 512.0 + 256.0 - plainAttention);
    // Its tensors (the optimizer's per-tensor work): q_down, q_up, kv_down, kv_up and the two latent norms in place of
    // q, k and v: three more a layer, four layers.
    EXPECT_EQ(stageParameterTensors(m, p, 0) - stageParameterTensors(plain, p, 0), 3 * 4);
    // At tp 1 a rank holds the whole layer: the count of model.cpp.
    Plan one;
    one.dp = 8;
    one.globalBatch = 8;
    EXPECT_DOUBLE_EQ(layerParameters(m, one).dense, static_cast<double>(countParameters(m).perLayer()));
    // Activations kept (e = 2, no recompute): Q and K of 8 x 192 and V of 8 x 128 where plain keeps 3 x 8 x 128, and
    // each latent's norm input and up-projection input (512 + 256 wide, twice).
    EXPECT_DOUBLE_EQ(layerActivationBytesNoRecompute(m, p, recipe) - layerActivationBytesNoRecompute(plain, p, recipe),
                     2.0 * 1024.0 * (2.0 * 1536.0 + 1024.0 - 3.0 * 1024.0) + 4.0 * 1024.0 * 768.0);
    // FP8 under Transformer Engine: the up projections are LayerNormLinear modules with the latent norms fused in
    // (Megatron-core's MLA spec), so, like QKV's, their inputs are written in FP8 by the norm; the down projections
    // read the layer norm's bf16 output and cast it, each its own (e + 1 = 3 B an element, 1024 x 2048 each). The
    // projection's and fc2's casts are the same in both models.
    const auto& fp8 = *findPrecisionRecipe("fp8");
    ClusterConfig withFp8 = c;
    withFp8.gpu.peakFlopsPerSecond[Dtype::Fp8] = 2.0 * c.gpu.peakFlopsPerSecond.at(Dtype::Bf16);
    auto castBytes = [&](const ModelConfig& model) {
        for (const auto& op : layerCompute(model, withFp8, p, fp8).forwardOps)
            if (op.name == "fp8_casts") return op.bytes;
        return -1.0;
    };
    EXPECT_DOUBLE_EQ(castBytes(m) - castBytes(plain), 3.0 * 2.0 * 1024.0 * 2048.0);
}

TEST(Compute, SharedExpertsAreADenseMlpBesideTheRoutedOnes) {
    // 8 SwiGLU experts of 1024, top 2, shared width 2048; tp 2: the shared MLP runs every token at 1024 a rank.
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    m.activation = Activation::Swiglu;
    m.moe = MoeConfig{8, 2, 1024};
    ModelConfig shared = m;
    shared.moe->sharedFfnHidden = 2048;
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p = tp2OnEight();
    const auto& recipe = *findPrecisionRecipe("megatron");
    const BlockCompute b = layerCompute(shared, c, p, recipe);
    const OpCost& fc1 = forwardOpNamed(b, "shared_fc1");
    EXPECT_EQ(fc1.m, 1024);
    EXPECT_EQ(fc1.n, 2 * 1024);
    EXPECT_EQ(fc1.k, 2048);
    const OpCost& fc2 = forwardOpNamed(b, "shared_fc2");
    EXPECT_EQ(fc2.n, 2048);
    EXPECT_EQ(fc2.k, 1024);
    EXPECT_THROW(forwardOpNamed(layerCompute(m, c, p, recipe), "shared_fc1"), std::runtime_error);
    // Its weights are dense, split over TP: 3 x 2048 x 2048 / 2 more a rank; the routed experts' are unchanged.
    EXPECT_DOUBLE_EQ(layerParameters(shared, p).dense - layerParameters(m, p).dense, 3.0 * 2048.0 * 2048.0 / 2.0);
    EXPECT_DOUBLE_EQ(layerParameters(shared, p).expert, layerParameters(m, p).expert);
    // Its activations: fc1 output (gate and up) and fc2 input over every token, e = 2.
    EXPECT_DOUBLE_EQ(layerActivationBytesNoRecompute(shared, p, recipe) - layerActivationBytesNoRecompute(m, p, recipe),
                     2.0 * 1024.0 * 1024.0 * 2.0 + 2.0 * 1024.0 * 1024.0);
    // Its row-parallel fc2 reduces over TP on its own (Megatron-core's SharedExpertMLP): one all-reduce each way.
    auto tpOps = [&](const ModelConfig& model) {
        int n = 0;
        for (const auto& op : layerCommOps(model, c, p)) n += op.group == GroupKind::Tp ? 1 : 0;
        return n;
    };
    EXPECT_EQ(tpOps(shared), tpOps(m) + 2);
    // tp must divide its width as it divides the experts'.
    p.tp = 8;
    p.dp = 1;
    shared.moe->sharedFfnHidden = 2044;
    ProblemList problems;
    validatePlan(shared, c, p, "/plan", problems);
    bool named = false;
    for (const auto& pr : problems.items()) named = named || pr.message.find("moe.shared_ffn_hidden") != std::string::npos;
    EXPECT_TRUE(named);
}

TEST(Compute, TensorParallelismDividesGemmWork) {
    ModelConfig m = test::megatronStyleModel(4, 2048, 16, 51200, 1024);
    ClusterConfig c = test::roundCluster(8, 1);
    const auto& recipe = *findPrecisionRecipe("megatron");
    Plan p1;
    p1.dp = 8;
    p1.globalBatch = 8;
    Plan p8 = p1;
    p8.tp = 8;
    p8.dp = 1;
    p8.globalBatch = 1;
    auto a = layerCompute(m, c, p1, recipe);
    auto b = layerCompute(m, c, p8, recipe);
    EXPECT_NEAR(a.forward.modelFlops / b.forward.modelFlops, 8.0, 1e-9);
}

TEST(Compute, ModelFlopsMatchNarayananFormula) {
    // Narayanan et al. 2021, eq. (3): F = 72 B s L h^2 (1 + s/(6h) + V/(12 h L)) for GPT with ffn = 4h.
    ModelConfig m = test::megatronStyleModel(96, 12288, 96, 51200, 2048);
    Plan p;
    p.globalBatch = 1536;
    const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
    const double expected = 72.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * L));
    EXPECT_NEAR(modelFlopsPerStep(m, p) / expected, 1.0, 1e-12);
}

TEST(Compute, OptimizerIsMemoryBoundOverLocalParameters) {
    ClusterConfig c = test::roundCluster(8, 1);
    const auto& megatron = *findPrecisionRecipe("megatron");
    OpCost op = optimizerCompute(1e9, c, megatron, false);
    // AdamW: grad 4 + master r/w 8 + moments r/w 16 + bf16 weight write 2 = 30 bytes per parameter; around it
    // the norm reads the grads (4), zeroing writes them (4), the master is copied into the weights (4 + 2): 14.
    EXPECT_DOUBLE_EQ(kernel_cost::optimizerBytes(1e9, megatron), 30e9);
    EXPECT_DOUBLE_EQ(kernel_cost::optimizerAuxBytes(1e9, megatron), 14e9);
    EXPECT_DOUBLE_EQ(op.bytes, 44e9);
    EXPECT_DOUBLE_EQ(op.seconds, 44e9 / 2e12);
    // Without a master copy (the weights are the master) there is nothing to copy.
    EXPECT_DOUBLE_EQ(kernel_cost::optimizerAuxBytes(1e9, *findPrecisionRecipe("cpu_fp32")), 8e9);
}

// The CUDA executor's GEMM attention, counted by hand for 1 sequence, 2 query heads, s_q = s_kv = 4, d = 8, bf16:
// 32 scores. Forward 4 x 32 x 8 = 1024 FLOPs; bytes 32 x (8 + 2 x 2) = 384 for the score passes plus the
// operands 2 heads x (2 x 4 + 2 x 4) rows x 8 x 2 B = 512. Backward 10 x 32 x 8 = 2560 FLOPs; 32 x (16 + 6 x 2)
// = 896 plus 2 x (7 x 4 + 7 x 4) x 8 x 2 = 1792.
TEST(Compute, ScoreGemmAttentionCountsAreHandCheckable) {
    EXPECT_DOUBLE_EQ(kernel_cost::scoreGemmFlops(1, 2, 4, 4, 8, false), 1024.0);
    EXPECT_DOUBLE_EQ(kernel_cost::scoreGemmBytes(1, 2, 4, 4, 8, 2, false), 384.0 + 512.0);
    EXPECT_DOUBLE_EQ(kernel_cost::scoreGemmFlops(1, 2, 4, 4, 8, true), 2560.0);
    EXPECT_DOUBLE_EQ(kernel_cost::scoreGemmBytes(1, 2, 4, 4, 8, 2, true), 896.0 + 1792.0);
    // Sequences and heads are the same batch: 2 x 1 = 1 x 2.
    EXPECT_DOUBLE_EQ(kernel_cost::scoreGemmBytes(2, 1, 4, 4, 8, 4, true), kernel_cost::scoreGemmBytes(1, 2, 4, 4, 8, 4, true));
}

// A score_gemms fit: 1 us + bytes / 1 GB/s + FLOPs / 1 TFLOP/s.
KernelFit roundScoreGemmFit() {
    KernelFit f;
    f.overheadSeconds = 1e-6;
    f.bytesPerSecond = 1e9;
    f.flopsPerSecond = 1e12;
    f.scoreGemms = true;
    return f;
}

// A score_gemms fit times the attention op from its shape (m queries, n keys, k head dim, batch = sequences x
// heads) and the dtype's element size, whatever FLOPs and bytes the op carries; a fused fit uses the op's own.
TEST(Compute, ScoreGemmFitTimesAttentionFromItsShape) {
    ClusterConfig c = test::roundCluster(1, 1);
    c.gpu.kernels["attention_forward"] = roundScoreGemmFit();
    c.gpu.kernels["attention_backward"] = roundScoreGemmFit();
    OpCost op;
    op.opClass = OpClass::Attention;
    op.kernel = "attention_forward";
    op.m = 4, op.n = 4, op.k = 8, op.batch = 2;
    op.flops = 1.0, op.bytes = 1.0; // the fused counts: not used by this fit
    EXPECT_DOUBLE_EQ(opSeconds(op, c, Dtype::Bf16), 1e-6 + 896.0 / 1e9 + 1024.0 / 1e12);
    op.kernel = "attention_backward";
    op.backward = true;
    EXPECT_DOUBLE_EQ(opSeconds(op, c, Dtype::Bf16), 1e-6 + 2688.0 / 1e9 + 2560.0 / 1e12);
    // fp32: 4-byte P and dS. Forward: 32 x 16 + 2 x 16 x 8 x 4 = 1536 bytes.
    op.kernel = "attention_forward";
    op.backward = false;
    EXPECT_DOUBLE_EQ(opSeconds(op, c, Dtype::Fp32), 1e-6 + 1536.0 / 1e9 + 1024.0 / 1e12);
    c.gpu.kernels["attention_forward"].scoreGemms = false;
    EXPECT_DOUBLE_EQ(opSeconds(op, c, Dtype::Bf16), 1e-6 + 1.0 / 1e9 + 1.0 / 1e12);
}

// The GEMM attention's launch steps by hand: sequences x query heads per kv head x chunks of kv heads, a chunk as
// many heads as fit 256 MiB at (4 + e) bytes a score.
TEST(Compute, ScoreGemmStepsAreSequencesTimesGroupTimesChunks) {
    // 512 x 512 x 6 B = 1.5 MiB a head: all 12 in one chunk; 16 sequences, MHA: 16 steps.
    EXPECT_EQ(kernel_cost::scoreGemmKvHeadsPerChunk(512, 512, 12, 2), 12);
    EXPECT_EQ(kernel_cost::scoreGemmSteps(16, 12, 12, 512, 512, 2), 16);
    // 4096 x 4096 x 6 B = 96 MiB a head: 2 a chunk, 16 heads in 8 chunks.
    EXPECT_EQ(kernel_cost::scoreGemmKvHeadsPerChunk(4096, 4096, 16, 2), 2);
    EXPECT_EQ(kernel_cost::scoreGemmSteps(1, 16, 16, 4096, 4096, 2), 8);
    // 8192 x 8192 x 6 B = 384 MiB, over the workspace: one head a chunk; GQA 32 / 8 on 2 sequences: 2 x 4 x 8.
    EXPECT_EQ(kernel_cost::scoreGemmKvHeadsPerChunk(8192, 8192, 8, 2), 1);
    EXPECT_EQ(kernel_cost::scoreGemmSteps(2, 32, 8, 8192, 8192, 2), 64);
    // fp32 scores and probabilities (8 B a score) halve what a chunk holds: 4096^2 x 8 = 128 MiB, 2 a chunk.
    EXPECT_EQ(kernel_cost::scoreGemmKvHeadsPerChunk(4096, 4096, 16, 4), 2);
    EXPECT_EQ(kernel_cost::scoreGemmKvHeadsPerChunk(2048, 4096, 16, 4), 4);
}

// A score_gemms fit with a time per launch step adds it once per step of the op: 16 sequences of 12 heads cost 16
// steps, the same tokens as 8 sequences twice as long cost 8.
TEST(Compute, ScoreGemmFitChargesItsLaunchSteps) {
    ClusterConfig c = test::roundCluster(1, 1);
    c.gpu.kernels["attention_forward"] = roundScoreGemmFit();
    OpCost op;
    op.opClass = OpClass::Attention;
    op.kernel = "attention_forward";
    op.m = 512, op.n = 512, op.k = 64, op.batch = 16 * 12, op.sequences = 16, op.kvHeads = 12;
    const double without = opSeconds(op, c, Dtype::Bf16);
    c.gpu.kernels["attention_forward"].stepSeconds = 2e-5;
    EXPECT_NEAR(opSeconds(op, c, Dtype::Bf16) - without, 16 * 2e-5, 1e-15);
    op.m = op.n = 1024, op.batch = 8 * 12, op.sequences = 8;
    const double longer = opSeconds(op, c, Dtype::Bf16);
    c.gpu.kernels["attention_forward"].stepSeconds = 0.0;
    EXPECT_NEAR(longer - opSeconds(op, c, Dtype::Bf16), 8 * 2e-5, 1e-15);
}

// The layer's attention op carries the shape a score_gemms fit needs: batch = micro-batch x heads per rank.
TEST(Compute, AttentionOpCarriesSequencesTimesHeads) {
    Tp4Case k;
    k.p.flashAttention = true;
    const auto layer = layerCompute(k.m, k.c, k.p, *findPrecisionRecipe("megatron"));
    const OpCost& att = forwardOpNamed(layer, "attention_core_flash");
    EXPECT_EQ(att.batch, 2 * 16 / 4);
    EXPECT_EQ(att.sequences, 2);
    EXPECT_EQ(att.kvHeads, k.m.kvHeads / 4);
    EXPECT_EQ(att.m, 2048);
    EXPECT_EQ(att.n, 2048);
    EXPECT_EQ(att.k, 1024 / 16);
}

// A plan whose attention kernel is "auto" runs what its framework version ran: NeMo 24.01-24.07 flash-attn 2 (its
// launcher's NVTE_FUSED_ATTN=0), later NeMo the H100's default, cuDNN's; a stated kernel is the plan's.
TEST(Compute, AnAutoAttentionKernelIsWhatTheFrameworkVersionRan) {
    const ClusterConfig h100 = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = test::preset("llama2-7b");
    Plan p;
    p.flashAttention = true;
    p.microBatch = 1;
    p.globalBatch = 8;
    p.framework.name = "nemo";
    auto attention = [&](const Plan& plan) {
        return forwardOpNamed(layerCompute(m, h100, plan, *findPrecisionRecipe("megatron")), "attention_core_flash");
    };
    p.framework.version = "24.05";
    const OpCost launcher = attention(p);
    EXPECT_EQ(launcher.variant, "flash2");
    p.framework.version = "24.09";
    const OpCost later = attention(p);
    EXPECT_EQ(later.variant, "auto");
    EXPECT_EQ(resolveAttentionKernel(h100.gpu, later.variant), "cudnn");
    EXPECT_GT(launcher.seconds, 1.3 * later.seconds); // FlashAttention-2 against cuDNN's Hopper kernel at 4k
    p.framework.version = "24.05";
    p.attentionKernel = "cudnn";
    EXPECT_EQ(attention(p).variant, "cudnn");
}
} // namespace
} // namespace tessel
