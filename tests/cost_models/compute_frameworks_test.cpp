// Tests of the compute model as each framework runs a layer: eager kernels, autocast casts, unpadded attention, training
// metrics, torchtitan's selective policy, the recompute's early stop, gradient accumulation, FSDP's copies, async TP.
#include "compute_support.hpp"
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessel {
namespace {
using test::forwardOpNamed;
using test::Tp4Case;

TEST(Compute, EagerPyTorchMovesEveryOpsOwnBytes) {
    // torchtitan runs RMSNorm, the rotary embedding, SwiGLU and the loss as eager PyTorch ops unless
    // torch.compile fuses them (FORMULAS.md §3.4): each op reads and writes its tensors.
    const ModelConfig llama = test::preset("llama3-8b");   // hidden 4096, 32 heads, 8 kv heads, ffn 14336
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.dp = 8;
    p.microBatch = 1;
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double T = 8192.0, h = 4096.0, e = 2.0;
    const BlockCompute fused = layerCompute(llama, c, p, recipe);
    EXPECT_DOUBLE_EQ(forwardOpNamed(fused, "norm_attn").bytes, 2.0 * e * T * h);
    EXPECT_THROW(forwardOpNamed(fused, "attention_layout"), std::runtime_error);
    p.framework.name = "torchtitan";
    p.framework.version = "2024-12"; // its Llama repeats K and V for SDPA until pytorch/torchtitan#2259 (2026-01-27)
    const BlockCompute eager = layerCompute(llama, c, p, recipe);
    // x.float(), pow, mean, * rsqrt, type_as, * weight: (e + 4) + 8 + 4 + 8 + (4 + e) + 2e = 4e + 28 per element.
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "norm_attn").bytes, (4.0 * e + 28.0) * T * h);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "rope").bytes, (2.0 * e + 16.0) * T * (4096.0 + 1024.0));
    // A partial rotary (a quarter of each 128-wide head): the fp32 chain over the rotated 32 columns of the 40 heads,
    // then torch.cat copying whole heads back; the fused kernel reads and writes the whole head either way (TE's
    // fused_rope copies the unrotated rest).
    ModelConfig quarter = llama;
    quarter.rotaryPercent = 0.25;
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(quarter, c, p, recipe), "rope").bytes,
                     (2.0 * e + 16.0) * T * 40.0 * 32.0 + 2.0 * e * T * (4096.0 + 1024.0));
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(quarter, c, Plan{}, recipe), "rope").bytes,
                     forwardOpNamed(layerCompute(llama, c, Plan{}, recipe), "rope").bytes);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "swiglu").bytes, 5.0 * e * T * 14336.0);
    // repeat_kv copies K and V to all 32 heads (read 1024, write 4096 columns each); the output is made contiguous.
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "attention_layout").bytes, (2.0 * e * (4096.0 + 1024.0) + 2.0 * e * 4096.0) * T);
    EXPECT_GT(eager.backward().seconds, fused.backward().seconds);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "qkv").flops, forwardOpNamed(fused, "qkv").flops);   // GEMMs are the same
    // Stated fused (torch.compile): the fused costs again. A LayerNorm model's norm is one native kernel anyway.
    p.framework.fusedKernels = true;
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(llama, c, p, recipe), "norm_attn").bytes, 2.0 * e * T * h);
    p.framework.fusedKernels = false;
    const ModelConfig gpt = test::preset("gpt3-1.3b");
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(gpt, c, p, recipe), "norm_attn").bytes,
                     forwardOpNamed(layerCompute(gpt, c, Plan{}, recipe), "norm_attn").bytes * p.microBatch);
}

TEST(Compute, AutocastCastsEveryWeightAndKeepsTheResidualStreamFp32) {
    // torch.autocast over fp32 parameters (FORMULAS.md §3.5): GPT-2 124M, one sequence of 1024, no dropout.
    ModelConfig gpt2 = test::preset("gpt2-124m");
    gpt2.dropout = 0.0;
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    const double T = 1024.0, h = 768.0, e = 2.0, r = 4.0;
    // qkv 768 x 2304, projection 768 x 768, fc1 768 x 3072, fc2 3072 x 768 (biases are in the optimizer, not cast
    // with the GEMM's weight matrix here).
    const double weights = 768.0 * (2304.0 + 768.0 + 3072.0 + 3072.0);
    const auto& mixed = *findPrecisionRecipe("mixed");
    const auto& amp = *findPrecisionRecipe("amp");
    const BlockCompute bf16 = layerCompute(gpt2, c, p, mixed);
    EXPECT_THROW(forwardOpNamed(bf16, "autocast_casts"), std::runtime_error);
    EXPECT_DOUBLE_EQ(forwardOpNamed(bf16, "residual_attn").bytes, 3.0 * e * T * h);
    // Compiled (the generic framework's fused kernels): LayerNorm reads the fp32 stream and writes the GEMM's
    // bf16 input; each residual add reads the fp32 stream and the bf16 branch and writes fp32; each weight is
    // read at 4 B and written at 2 B once a forward, and its gradient cast back in the backward.
    const BlockCompute compiled = layerCompute(gpt2, c, p, amp);
    EXPECT_DOUBLE_EQ(forwardOpNamed(compiled, "norm_attn").bytes, (r + e) * T * h);
    EXPECT_DOUBLE_EQ(forwardOpNamed(compiled, "residual_mlp").bytes, (2.0 * r + e) * T * h);
    const OpCost& cast = forwardOpNamed(compiled, "autocast_casts");
    EXPECT_DOUBLE_EQ(cast.bytes, (r + e) * weights);
    EXPECT_DOUBLE_EQ(cast.backwardByteFactor, 1.0);
    EXPECT_DOUBLE_EQ(forwardOpNamed(compiled, "fc1").flops, forwardOpNamed(bf16, "fc1").flops);   // GEMMs run in bf16 all the same
    // Eager: LayerNorm writes fp32, and the cast of each of the two norm outputs is a kernel of its own.
    p.framework.name = "fsdp";
    p.framework.fusedKernels = false;
    const BlockCompute eager = layerCompute(gpt2, c, p, amp);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "norm_attn").bytes, 2.0 * r * T * h);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "autocast_casts").bytes, (r + e) * (weights + 2.0 * T * h));
    EXPECT_GT(eager.forward.seconds, compiled.forward.seconds);
    // The embeddings stay fp32 (token and position rows read and written at 4 B), and the head casts the tied
    // output weight once a forward: 50304 x 768, the vocabulary padded to 128 as the generic framework pads it.
    Plan q;
    EXPECT_DOUBLE_EQ(embeddingCompute(gpt2, c, q, amp).forwardOps.front().bytes, 8.0 * T + 4.0 * r * T * h);
    EXPECT_DOUBLE_EQ(forwardOpNamed(headCompute(gpt2, c, q, amp), "autocast_casts").bytes, (r + e) * 50304.0 * h);
}

TEST(Compute, UnpaddedAttentionGathersQkvAndScattersTheOutput) {
    // llm-foundry's flash_attn_fn (attention_unpad): index_first_axis gathers q, k, v (read + write, 2e each) and
    // pad_input scatters the output into zeros (3e); backward, the q, k, v gradients are scattered into zeros (3e)
    // and the output gradient gathered (2e). GPT-3 1.3B has MPT-1B's shapes: hidden 2048, 16 heads of 128, sequence 2048.
    ModelConfig m = test::preset("gpt3-1.3b");
    m.dropout = 0.0;
    const ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    Plan p;
    const auto& recipe = *findPrecisionRecipe("mixed");
    const double T = 2048.0, h = 2048.0, e = 2.0;
    EXPECT_THROW(forwardOpNamed(layerCompute(m, c, p, recipe), "attention_unpad"), std::runtime_error);
    p.framework.attentionUnpad = true;
    const BlockCompute unpadded = layerCompute(m, c, p, recipe);
    const OpCost& op = forwardOpNamed(unpadded, "attention_unpad");
    EXPECT_DOUBLE_EQ(op.bytes, 2.0 * e * 3.0 * T * h + 3.0 * e * T * h);
    EXPECT_DOUBLE_EQ(op.bytes * op.backwardByteFactor, 3.0 * e * 3.0 * T * h + 2.0 * e * T * h);
    // It is the output's layout too: an eager plan adds no contiguous copy beside it.
    p.framework.fusedKernels = false;
    EXPECT_THROW(forwardOpNamed(layerCompute(m, c, p, recipe), "attention_layout"), std::runtime_error);
    p.framework.attentionUnpad = false;
    EXPECT_NO_THROW(forwardOpNamed(layerCompute(m, c, p, recipe), "attention_layout"));
    // Without flash attention there is nothing to unpad for.
    p.framework.attentionUnpad = true;
    p.flashAttention = false;
    EXPECT_THROW(forwardOpNamed(layerCompute(m, c, p, recipe), "attention_unpad"), std::runtime_error);
}

TEST(Compute, TrainingMetricsReadTheLogitsAgainWithoutABackward) {
    // Composer updates LanguageCrossEntropy and LanguagePerplexity after each micro-batch's backward: two
    // cross_entropy calls under autocast, each the logits cast to fp32 (e in, 4 out) and log-softmaxed (4 in, 4 out).
    // GPT-2's 50304-token vocabulary at one sequence of 1024: T x V logits a micro-batch.
    const ModelConfig gpt2 = test::preset("gpt2-124m");
    const ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    Plan p;
    const auto& recipe = *findPrecisionRecipe("mixed");
    const double T = static_cast<double>(gpt2.seqLen), V = 50304.0, e = 2.0;
    const BlockCompute plain = headCompute(gpt2, c, p, recipe);
    EXPECT_THROW(forwardOpNamed(plain, "train_metrics"), std::runtime_error);
    p.framework.trainMetricLosses = 2;
    const BlockCompute withMetrics = headCompute(gpt2, c, p, recipe);
    const OpCost& op = forwardOpNamed(withMetrics, "train_metrics");
    EXPECT_DOUBLE_EQ(op.bytes, 2.0 * (e + 12.0) * T * V);
    // Outside autograd: the forward pays for them, the backward does not.
    EXPECT_NEAR(withMetrics.forward.seconds - plain.forward.seconds, op.seconds, 1e-12);
    EXPECT_DOUBLE_EQ(withMetrics.backwardInput.seconds + withMetrics.backwardWeight.seconds,
                     plain.backwardInput.seconds + plain.backwardWeight.seconds);
    // Memory-bound: bytes over the HBM's achieved rate.
    EXPECT_NEAR(op.seconds, op.bytes / (c.gpu.hbmBytesPerSecond * c.gpu.memoryEfficiency), 1e-5);
}

TEST(Compute, TorchtitansSelectivePolicyRedoesWhatItDidNotKeep) {
    // torchtitan's "op" policy keeps the attention output and every other matmul's (q, v, w1, w2), so the
    // backward redoes wk, wo, w3 and the elementwise ops, not attention (FORMULAS.md §3.4).
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.dp = 8;
    p.recompute = Recompute::Selective;
    p.framework.name = "torchtitan";
    p.framework.fusedKernels = true;
    const auto& recipe = *findPrecisionRecipe("megatron");
    ASSERT_TRUE(opLevelSelectiveRecompute(llama, p));
    const BlockCompute b = layerCompute(llama, c, p, recipe);
    const double T = 8192.0, h = 4096.0;
    // wk (4096 -> 1024), wo (4096 -> 4096), w3 (4096 -> 14336): 2 T h (1024 + 4096 + 14336).
    EXPECT_NEAR(b.recompute.flops, 2.0 * T * h * (1024.0 + 4096.0 + 14336.0), 1.0);
    double memorySeconds = 0.0;
    for (const auto& op : b.forwardOps)
        if (op.opClass == OpClass::Memory) memorySeconds += op.seconds;
    const double gemmShare = b.recompute.seconds - memorySeconds;
    EXPECT_GT(gemmShare, 0.0);
    EXPECT_LT(b.recompute.seconds, b.forward.seconds);
    // Megatron-LM's selective (the same plan under megatron) redoes the attention core instead.
    p.framework.name = "megatron";
    EXPECT_FALSE(opLevelSelectiveRecompute(llama, p));
}

TEST(Compute, ForeachAdamwMovesEightyFourBytesPerFp32Parameter) {
    // torch.optim's _multi_tensor_adamw over fp32 parameters (FSDP's shards): decay mul 8, lerp 12, mul 8,
    // addcmul 16, sqrt 8, div 8, add 8, addcdiv 16 = 84 B per parameter, against the fused kernel's 28.
    ClusterConfig c = test::roundCluster(8, 1);
    const auto& fsdp = *findPrecisionRecipe("fsdp");
    EXPECT_DOUBLE_EQ(kernel_cost::optimizerBytes(1e9, fsdp), 28e9);
    EXPECT_DOUBLE_EQ(kernel_cost::optimizerBytes(1e9, fsdp) + kernel_cost::foreachOptimizerExtraBytes(1e9, fsdp), 84e9);
    EXPECT_DOUBLE_EQ(optimizerCompute(1e9, c, fsdp, true).bytes - optimizerCompute(1e9, c, fsdp, false).bytes, 56e9);
    // Measured on an H100 over 1.004 B parameters: foreach 31.85 ms, fused 11.58 ms, 2.75x; the bytes say 3x.
    // torchtitan's default until 2025-02 (pytorch/torchtitan #881); every other framework's is fused.
    FrameworkSettings tt;
    tt.name = "torchtitan";
    tt.version = "2024";
    EXPECT_TRUE(foreachOptimizerOf(tt));
    tt.version = "2025";
    EXPECT_FALSE(foreachOptimizerOf(tt));
    tt.version = "";
    EXPECT_FALSE(foreachOptimizerOf(tt));
    for (const char* name : {"megatron", "nemo", "deepspeed", "fsdp", "generic"}) {
        FrameworkSettings f;
        f.name = name;
        f.version = "2024";
        EXPECT_FALSE(foreachOptimizerOf(f)) << name;
        f.foreachOptimizer = true;
        EXPECT_TRUE(foreachOptimizerOf(f)) << name;
    }
}

TEST(Compute, AFullRecomputeThatStopsEarlyDoesNotRerunFc2OrTheLastResidual) {
    // torch.utils.checkpoint's non-reentrant early stop (torchtitan's default): the recompute ends when fc2 saves its
    // input, so a dense layer's recompute is its forward less fc2 and the residual add after it.
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    ModelConfig m = test::megatronStyleModel(2, 4096, 32, 128256, 8192);
    m.dropout = 0.0;
    const PrecisionRecipe& r = *findPrecisionRecipe("fsdp");
    Plan p;
    p.recompute = Recompute::Full;
    p.framework.name = "torchtitan";
    EXPECT_TRUE(checkpointEarlyStopOf(p.framework));
    const BlockCompute early = layerCompute(m, c, p, r);
    double skipped = 0.0;
    for (const OpCost& op : early.forwardOps)
        if (op.name == "fc2" || op.name == "residual_mlp") {
            EXPECT_TRUE(op.notRecomputed) << op.name;
            skipped += op.seconds;
        } else {
            EXPECT_FALSE(op.notRecomputed) << op.name;
        }
    EXPECT_GT(skipped, 0.1 * early.forward.seconds);
    EXPECT_NEAR(early.recompute.seconds, early.forward.seconds - skipped, 1e-12);
    // Stated off (a reentrant checkpoint), the whole forward is rerun.
    p.framework.checkpointEarlyStop = false;
    const BlockCompute whole = layerCompute(m, c, p, r);
    EXPECT_NEAR(whole.recompute.seconds, whole.forward.seconds, 1e-12);
    // With hidden dropout the mask saved after fc2 is the last saved tensor: nothing is skipped.
    p.framework.checkpointEarlyStop.reset();
    m.dropout = 0.1;
    const BlockCompute masked = layerCompute(m, c, p, r);
    EXPECT_NEAR(masked.recompute.seconds, masked.forward.seconds, 1e-12);
    // Megatron-LM, NeMo and DeepSpeed recompute with their own reentrant functions; plain FSDP says which it runs.
    for (const char* name : {"megatron", "nemo", "deepspeed", "fsdp", "generic"}) {
        FrameworkSettings f;
        f.name = name;
        EXPECT_FALSE(checkpointEarlyStopOf(f)) << name;
    }
}

TEST(Compute, GradientAccumulationBytesByFrameworkByHand) {
    auto fw = [](std::string name, std::string version = "", std::optional<std::string> ddp = std::nullopt) {
        FrameworkSettings f;
        f.name = std::move(name);
        f.version = std::move(version);
        f.ddpImpl = std::move(ddp);
        return f;
    };
    // Megatron-LM 2021, local DDP: main_grad.add_(grad) every micro-batch, fp32 main grads: 4 + 4 + 2.
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("megatron", "2021"), 8, 0, 8, 4, 2, 4, false), 10.0);
    // fp16 main grads: 2 + 2 + 2, and also for one micro-batch (the hook runs anyway).
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("megatron", "2021"), 8, 0, 8, 1, 2, 2, false), 6.0);
    // torch DDP under no_sync: autograd adds from the second micro-batch on: 3 x 2 x 3/4.
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("megatron", "2021", "torch"), 1, 0, 8, 4, 2, 4, false), 4.5);
    // Gradient accumulation fusion (2022 on), NeMo, MegaScale, the generic best case: nothing apart.
    for (const auto& f : {fw("megatron", "2022"), fw("megatron"), fw("nemo", "24.07"), fw("megascale"), fw("generic")})
        EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(f, 8, 1, 8, 16, 2, 4, false), 0.0) << f.name;
    // --no-gradient-accumulation-fusion (the plan's gradient_accumulation_fusion false, Megatron-LM's deterministic
    // tests and ROCm runs): Megatron-core's DDP hook adds each micro-batch's bf16 .grad into the fp32 main_grad,
    // 4 + 4 + 2, as the 2021 local DDP did; a 2021 plan is unchanged by it.
    for (auto f : {fw("megatron", "2024"), fw("megatron"), fw("nemo", "24.07"), fw("megascale")}) {
        f.gradAccumulationFusion = false;
        EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(f, 8, 1, 8, 16, 2, 4, false), 10.0) << f.name;
        f.gradAccumulationFusion = true;
        EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(f, 8, 1, 8, 16, 2, 4, false), 0.0) << f.name;
    }
    FrameworkSettings unfused2021 = fw("megatron", "2021", "torch");
    unfused2021.gradAccumulationFusion = false;
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(unfused2021, 1, 0, 8, 4, 2, 4, false), 4.5);
    // Plain PyTorch under autocast: fp32 .grad, autograd's add: 3 x 4 x 7/8.
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("generic"), 1, 0, 8, 8, 4, 4, true), 10.5);
    // DeepSpeed: bf16 (fp32 gradients) under the pipeline engine, update_hp_grads every micro-batch: the bf16
    // gradient read and cast to an fp32 copy (2 + 4), the copy added into the fp32 gradient (4 + 4 + 4); fp16
    // (16-bit gradients: autograd's add), ZeRO-2 (the reduced partition into the fp32 one, 1/8 of it).
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("deepspeed"), 12, 1, 8, 4, 2, 4, false), 18.0);
    EXPECT_TRUE(deepSpeedBf16OptimizerOf(fw("deepspeed"), 12, 1, 2, 4));
    EXPECT_FALSE(deepSpeedBf16OptimizerOf(fw("deepspeed"), 1, 1, 2, 4));  // no pipeline engine
    EXPECT_FALSE(deepSpeedBf16OptimizerOf(fw("deepspeed"), 12, 2, 2, 4)); // ZeRO-2's own optimizer
    EXPECT_FALSE(deepSpeedBf16OptimizerOf(fw("megatron"), 12, 1, 2, 4));
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("deepspeed"), 12, 1, 8, 4, 2, 2, false), 4.5);
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("deepspeed"), 1, 2, 8, 4, 2, 2, false), 10.0 / 8.0);
    // FSDP: the new shard added to the saved one (fp32 reduce): 3 x 4 x 3/4 / 8 shards; one micro-batch: none.
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("fsdp"), 1, 3, 8, 4, 4, 4, false), 1.125);
    EXPECT_DOUBLE_EQ(gradAccumulationBytesPerParameter(fw("fsdp"), 1, 3, 8, 1, 4, 4, false), 0.0);
}

TEST(Compute, GradientAccumulationIsAWeightGradientPassOverTheLayersParameters) {
    // 4 layers of hidden 1024 at tp 4: each rank holds 12 h^2 / 4 + biases and norms per layer. Megatron-LM 2021's
    // local DDP adds 10 B per parameter per micro-batch at 2 TB/s; the 2022 run fuses it into the dW GEMM.
    const Tp4Case k;
    Plan old = k.p;
    old.globalBatch = 8;   // 2 micro-batches per rank
    old.framework.name = "megatron";
    old.framework.version = "2021";
    Plan fused = old;
    fused.framework.version = "2022";
    const auto& recipe = *findPrecisionRecipe("megatron");
    const BlockCompute a = layerCompute(k.m, k.c, old, recipe), b = layerCompute(k.m, k.c, fused, recipe);
    const double params = layerParameters(k.m, old).total();
    // The round cluster: 2 TB/s at full efficiency, no kernel overhead.
    EXPECT_NEAR(a.backwardWeight.seconds - b.backwardWeight.seconds, 10.0 * params / 2e12, 1e-12);
    EXPECT_DOUBLE_EQ(a.forward.seconds, b.forward.seconds);
    EXPECT_DOUBLE_EQ(a.backwardInput.seconds, b.backwardInput.seconds);
    // The head's output layer is a GEMM and takes the fusion; the embedding is none, and its dense gradient goes into
    // main_grad through the DDP hook either way (10 B a parameter), beside the zero-filled table PyTorch's
    // embedding backward writes (2 B): the same for both.
    EXPECT_NEAR(embeddingCompute(k.m, k.c, old, recipe).backwardWeight.seconds - embeddingCompute(k.m, k.c, fused, recipe).backwardWeight.seconds,
                0.0, 1e-12);
    // Per table element, bf16 weights and fp32 main gradients, 2 micro-batches: the zero fill (2), and the hook
    // (10) only where the fusion spares every GEMM; nothing for a plan of no named trainer or for tessel's executor.
    auto perElement = [&](const FrameworkSettings& f) {
        return embeddingGradientBytesPerParameter(f, 1, 0, 1, 2, 2, 4, false);
    };
    EXPECT_DOUBLE_EQ(perElement(fused.framework), 12.0);
    EXPECT_DOUBLE_EQ(perElement(old.framework), 2.0); // Megatron-LM 2021: its local DDP's add is the parameter pass's
    FrameworkSettings other;
    other.name = "fsdp";
    EXPECT_DOUBLE_EQ(perElement(other), 2.0);
    other.name = "generic";
    EXPECT_DOUBLE_EQ(perElement(other), 0.0);
    FrameworkSettings executor = fused.framework;
    executor.lossInPlace = true;
    EXPECT_DOUBLE_EQ(perElement(executor), 0.0);
    Plan plain = fused;
    plain.framework.name = "generic"; // no named trainer: the scatter alone
    EXPECT_NEAR(embeddingCompute(k.m, k.c, fused, recipe).backwardWeight.seconds - embeddingCompute(k.m, k.c, plain, recipe).backwardWeight.seconds,
                12.0 * embeddingParameters(k.m, old) / 2e12, 1e-12);
    EXPECT_NEAR(headCompute(k.m, k.c, old, recipe).backwardWeight.seconds - headCompute(k.m, k.c, fused, recipe).backwardWeight.seconds,
                10.0 * headParameters(k.m, old) / 2e12, 1e-12);
}

TEST(Compute, FsdpCopiesByFrameworkByHand) {
    FrameworkSettings fsdp1, fsdp2, megatron;
    fsdp1.name = "fsdp";
    fsdp2.name = "torchtitan";
    megatron.name = "megatron";
    // FSDP1 with mixed precision DEFAULT (bf16 gradients g = 2, fp32 reduce r = 4, fp32 shards w = 4, bf16 gathers
    // a = 2) over 8 shards, resharding after forward. Compute stream: the flat gradient from its views, 2g = 4.
    // Reduce-scatter's stream: cast 2 + 4, pre-divide 2 x 4, post-divide 2 x 4 / 8 = 15. Each gather: the shard
    // copied to bf16, (4 + 2) / 8.
    FsdpCopyBytes c = fsdpCopyBytesPerParameter(fsdp1, 1, 3, 8, 4, true, 2, 4, 4, 2);
    EXPECT_DOUBLE_EQ(c.forward, 0.0);
    EXPECT_DOUBLE_EQ(c.backward, 4.0);
    EXPECT_DOUBLE_EQ(c.reduceStream, 15.0);
    EXPECT_DOUBLE_EQ(c.gatherStream, 0.75);
    // PURE (bf16 reduce): no cast before, divides at 2 B, the reduced shard cast back to fp32 (2 + 4) / 8.
    c = fsdpCopyBytesPerParameter(fsdp1, 1, 3, 8, 4, true, 2, 2, 4, 2);
    EXPECT_DOUBLE_EQ(c.reduceStream, 4.0 + 0.5 + 0.75);
    // FSDP2: each gather's copy-out into the parameters (2a), twice a micro-batch when resharding; the gradients
    // copied into the reduce-scatter buffer in fp32 (2 + 4); ReduceOp.AVG, no divide.
    c = fsdpCopyBytesPerParameter(fsdp2, 1, 3, 8, 4, true, 2, 4, 4, 2);
    EXPECT_DOUBLE_EQ(c.forward, 4.0);
    EXPECT_DOUBLE_EQ(c.backward, 4.0);
    EXPECT_DOUBLE_EQ(c.reduceStream, 6.0);
    EXPECT_DOUBLE_EQ(c.gatherStream, 0.75);
    c = fsdpCopyBytesPerParameter(fsdp2, 1, 3, 8, 4, false, 2, 4, 4, 2); // parameters kept from the forward
    EXPECT_DOUBLE_EQ(c.backward, 0.0);
    // Under torchtitan's pipelining one gather a step, its copy-out spread over the 4 micro-batches.
    c = fsdpCopyBytesPerParameter(fsdp2, 4, 3, 8, 4, false, 2, 4, 4, 2);
    EXPECT_DOUBLE_EQ(c.forward, 1.0);
    EXPECT_DOUBLE_EQ(c.backward, 0.0);
    EXPECT_DOUBLE_EQ(c.reduceStream, 6.0);
    // Not FSDP, not sharding gradients, or one shard: nothing.
    for (const auto& [f, zero, shards] : {std::tuple{megatron, 3, 8}, std::tuple{fsdp1, 1, 8}, std::tuple{fsdp1, 3, 1}}) {
        c = fsdpCopyBytesPerParameter(f, 1, zero, shards, 4, true, 2, 4, 4, 2);
        EXPECT_DOUBLE_EQ(c.forward + c.backward + c.reduceStream + c.gatherStream, 0.0) << f.name << zero << shards;
    }
}

TEST(Compute, FsdpCopiesRunOnTheComputeStreamAndAheadOfTheCollectives) {
    // FSDP1 (fsdp recipe) at tp 4, dp 2, ZeRO-3 on the round cluster (2 TB/s, no kernel overhead): the layer's
    // weight-gradient phase gains the flat gradient's 4 B per parameter, the reduce-scatter 6 + 8 + 4 = 18 B ahead
    // of it (post-divide 8 / 2 shards), each gather the shard's (4 + 2) / 2; a plan that does not shard pays none.
    const Tp4Case k;
    Plan sharded = k.p;
    sharded.framework.name = "fsdp";
    sharded.zeroStage = 3;
    sharded.precision = "fsdp";
    Plan replicated = sharded;
    replicated.zeroStage = 0;
    const auto& recipe = *findPrecisionRecipe("fsdp");
    const double params = layerParameters(k.m, sharded).total();
    const BlockCompute a = layerCompute(k.m, k.c, sharded, recipe), b = layerCompute(k.m, k.c, replicated, recipe);
    EXPECT_NEAR(a.backwardWeight.seconds - b.backwardWeight.seconds, 4.0 * params / 2e12, 1e-12);
    EXPECT_DOUBLE_EQ(a.forward.seconds, b.forward.seconds);
    EXPECT_NEAR(fsdpCollectiveCopySeconds(k.c, sharded, recipe, true, params), 18.0 * params / 2e12, 1e-12);
    EXPECT_NEAR(fsdpCollectiveCopySeconds(k.c, sharded, recipe, false, params), 3.0 * params / 2e12, 1e-12);
    EXPECT_DOUBLE_EQ(fsdpCollectiveCopySeconds(k.c, replicated, recipe, true, params), 0.0);
}

// PyTorch's async TP (torchtitan, tp_comm_overlap, sequence parallelism): each fused matmul + reduce-scatter sums the
// tp partial outputs it received in one kernel on the compute stream, reading T x h and writing T/tp x h. Two a
// dense layer, forward only; none without the overlap, without SP, or under Transformer Engine's overlap.
TEST(Compute, TorchAsyncTpSumsItsPartialOutputsOnTheComputeStream) {
    Tp4Case k;
    k.p.sequenceParallel = true;
    k.p.framework.name = "torchtitan";
    k.p.framework.tpCommOverlap = true;
    k.p.framework.fusedKernels = true; // async TP is an Inductor pass: torchtitan compiles the model for it
    const PrecisionRecipe& recipe = *findPrecisionRecipe(k.p.precision);
    const BlockCompute b = layerCompute(k.m, k.c, k.p, recipe);
    const double tokens = 2.0 * 2048.0; // micro-batch 2 of sequence 2048, gathered over the TP group
    const double bytes = 2.0 * tokens * 1024.0 * (1.0 + 1.0 / 4.0);
    for (const char* name : {"async_tp_sum_attn", "async_tp_sum_mlp"}) {
        const OpCost& sum = forwardOpNamed(b, name);
        EXPECT_DOUBLE_EQ(sum.bytes, bytes) << name;
        EXPECT_DOUBLE_EQ(sum.backwardByteFactor, 0.0) << name;
    }
    auto hasSum = [&](const Plan& p) {
        for (const auto& op : layerCompute(k.m, k.c, p, recipe).forwardOps)
            if (op.name.rfind("async_tp_sum", 0) == 0) return true;
        return false;
    };
    Plan off = k.p;
    off.framework.tpCommOverlap = false;
    Plan noSp = k.p;
    noSp.sequenceParallel = false;
    Plan te = k.p;
    te.framework.name = "megatron";
    EXPECT_FALSE(hasSum(off));
    EXPECT_FALSE(hasSum(noSp));
    EXPECT_FALSE(hasSum(te));
    // The forward pays the two passes' time; the backward nothing more. Plain TP pays DTensor's copies around its
    // collectives (DtensorSequenceParallelCopiesEachCollectivesWholeTensor), which the fused collectives do not.
    const BlockCompute plain = layerCompute(k.m, k.c, off, recipe);
    double copiesForward = 0.0, copiesBackward = 0.0;
    for (const auto& op : plain.forwardOps)
        if (op.name.rfind("sp_", 0) == 0) {
            copiesForward += op.seconds;
            copiesBackward += op.seconds * op.backwardByteFactor;
        }
    EXPECT_GT(copiesForward, 0.0);
    EXPECT_GT(b.forward.seconds, plain.forward.seconds - copiesForward);
    EXPECT_NEAR(b.backward().seconds, plain.backward().seconds - copiesBackward, 1e-12);
}

// DTensor's sequence parallelism (torchtitan, fsdp) gathers and reduce-scatters [b, s, h] on dim 1 through
// _functional_collectives, with a torch.cat copy of the whole T x h tensor after each gather and before each
// reduce-scatter: forward the two gathers and the two reduce-scatters; backward their adjoints, of which the
// reduce-scatters of the summed input gradients lose their copy under torch.compile. None under Megatron-core
// (gathers on dim 0), without SP, or under async TP (its fused collectives take the shards in place).
TEST(Compute, DtensorSequenceParallelCopiesEachCollectivesWholeTensor) {
    Tp4Case k;
    k.p.sequenceParallel = true;
    k.p.framework.name = "torchtitan";
    k.p.framework.fusedKernels = false;
    const PrecisionRecipe& recipe = *findPrecisionRecipe(k.p.precision);
    const double copy = 2.0 * 2.0 * (2.0 * 2048.0) * 1024.0; // bf16 T x h (micro-batch 2 of 2048), read and written
    const BlockCompute eager = layerCompute(k.m, k.c, k.p, recipe);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "sp_gather_copies").bytes, 2.0 * copy);
    EXPECT_DOUBLE_EQ(forwardOpNamed(eager, "sp_gather_copies").backwardByteFactor, 1.0);
    for (const char* name : {"sp_scatter_copies_attn", "sp_scatter_copies_mlp"}) {
        EXPECT_DOUBLE_EQ(forwardOpNamed(eager, name).bytes, copy) << name;
        EXPECT_DOUBLE_EQ(forwardOpNamed(eager, name).backwardByteFactor, 1.0) << name;
    }
    Plan compiled = k.p;
    compiled.framework.fusedKernels = true;
    EXPECT_DOUBLE_EQ(forwardOpNamed(layerCompute(k.m, k.c, compiled, recipe), "sp_gather_copies").backwardByteFactor, 0.0);
    // On the round cluster (2e12 B/s): the eager layer's four forward copies, 4 x copy / 2e12 s, beside Megatron-core's.
    Plan megatron = k.p;
    megatron.framework.name = "megatron";
    const BlockCompute te = layerCompute(k.m, k.c, megatron, recipe);
    auto hasCopies = [&](const Plan& p) {
        for (const auto& op : layerCompute(k.m, k.c, p, recipe).forwardOps)
            if (op.name.rfind("sp_", 0) == 0 && op.name.find("copies") != std::string::npos) return true;
        return false;
    };
    double copies = 0.0;
    for (const auto& op : eager.forwardOps)
        if (op.name.rfind("sp_", 0) == 0) copies += op.seconds;
    EXPECT_NEAR(copies, 4.0 * copy / 2e12, 1e-15);
    EXPECT_FALSE(hasCopies(megatron));
    EXPECT_GT(eager.forward.seconds, te.forward.seconds);
    Plan noSp = k.p;
    noSp.sequenceParallel = false;
    Plan async = compiled;
    async.framework.tpCommOverlap = true;
    Plan fsdp = k.p;
    fsdp.framework.name = "fsdp";
    EXPECT_FALSE(hasCopies(noSp));
    EXPECT_FALSE(hasCopies(async));
    EXPECT_TRUE(hasCopies(fsdp));
}

TEST(Compute, EagerOpsShorterThanTheirLaunchesWaitOnTheHost) {
    // Asynchronous launches of eager PyTorch ops (fused_kernels off; FORMULAS.md §3.8): the host runs ahead of the
    // GPU, and a phase whose kernels are shorter than their launches (67 us a kernel tessel costs, the probe's
    // 1.6 ms over GPT-2's 24) lasts as long as the launches. GPT-2 at one sequence on an H100 is such a layer.
    const ModelConfig gpt2 = test::preset("gpt2-124m");
    const ClusterConfig c = test::clusterPreset("h100-single");
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double each = 1.6e-3 / 24.0;
    Plan p;
    p.microBatch = 1;
    p.framework.fusedKernels = false;
    const BlockCompute eager = layerCompute(gpt2, c, p, recipe);
    EXPECT_EQ(eager.launchHostSeconds, 0.0); // nothing blocks
    // Blocking launches add each phase's host time to its kernels' (gpu + host); asynchronous ones take the larger
    // (max(gpu, host)). Where the host binds, the asynchronous phase is the host time, a whole number of launches,
    // and what it waits is host - gpu = 2 x async - blocking.
    p.framework.launchBlocking = true;
    const BlockCompute blocking = layerCompute(gpt2, c, p, recipe);
    const double asyncPhases[3] = {eager.forward.seconds, eager.backwardInput.seconds, eager.backwardWeight.seconds};
    const double blockingPhases[3] = {blocking.forward.seconds, blocking.backwardInput.seconds,
                                      blocking.backwardWeight.seconds};
    double waits = 0.0;
    for (int i = 0; i < 3; ++i) {
        const double wait = 2.0 * asyncPhases[i] - blockingPhases[i];
        if (wait <= 0.0) continue;
        waits += wait;
        const double launches = asyncPhases[i] / each;
        EXPECT_NEAR(launches, std::round(launches), 1e-9) << "phase " << i;
    }
    EXPECT_GT(eager.hostWaitSeconds, 0.0);
    EXPECT_NEAR(eager.hostWaitSeconds, waits, 1e-12);
    // The forward binds: its kernels take less than their launches.
    EXPECT_GT(2.0 * eager.forward.seconds, blocking.forward.seconds);
    p.framework.launchBlocking = std::nullopt;
    // Fused kernels: no measured host time a kernel, nothing charged.
    p.framework.fusedKernels = true;
    EXPECT_EQ(layerCompute(gpt2, c, p, recipe).hostWaitSeconds, 0.0);
    // A layer whose kernels outlast their launches (64 sequences) does not wait.
    p.framework.fusedKernels = false;
    p.microBatch = 64;
    EXPECT_EQ(layerCompute(gpt2, c, p, recipe).hostWaitSeconds, 0.0);
    // A CPU rank runs its ops in the caller's thread: no queue to wait on.
    p.microBatch = 1;
    EXPECT_EQ(layerCompute(gpt2, test::clusterPreset("cpu-host"), p, *findPrecisionRecipe("fp32")).hostWaitSeconds, 0.0);
}

TEST(Compute, BlockingLaunchesAddTheHostsTimeForEveryKernelEachPhaseLaunches) {
    // CUDA_LAUNCH_BLOCKING=1 (FORMULAS.md §3.8): every kernel the phase launches waits for the host's time before it.
    // GPT-2's block is the probe's (LayerNorm, QKV, causal attention, projection, LayerNorm, 4x MLP, GELU, residual
    // adds): tessel costs its forward and backward as 24 kernels, which the probe measured at 1.6 ms of host time.
    const ModelConfig gpt2 = test::preset("gpt2-124m");
    const ClusterConfig c = test::clusterPreset("h100-single");
    Plan p;
    p.microBatch = 8;
    const auto& recipe = *findPrecisionRecipe("megatron");
    const BlockCompute async = layerCompute(gpt2, c, p, recipe);
    EXPECT_EQ(async.launchHostSeconds, 0.0);
    p.framework.launchBlocking = true;
    const BlockCompute blocking = layerCompute(gpt2, c, p, recipe);
    EXPECT_NEAR(blocking.launchHostSeconds, 1.6e-3, 1e-12);
    const double each = 1.6e-3 / 24.0;
    EXPECT_NEAR(blocking.forward.seconds - async.forward.seconds, 10 * each, 1e-12);
    EXPECT_NEAR(blocking.backward().seconds - async.backward().seconds, 14 * each, 1e-12);
    EXPECT_EQ(blocking.recompute.seconds, async.recompute.seconds); // nothing recomputed, no launches
    EXPECT_EQ(blocking.forward.flops, async.forward.flops);         // host time, no work
    // Full recompute launches the forward's kernels once more.
    p.recompute = Recompute::Full;
    const BlockCompute full = layerCompute(gpt2, c, p, recipe);
    EXPECT_NEAR(full.launchHostSeconds, 34 * each, 1e-12);
    p.framework.launchBlocking = std::nullopt;
    EXPECT_NEAR(full.recompute.seconds - layerCompute(gpt2, c, p, recipe).recompute.seconds, 10 * each, 1e-12);
    // The plan key round-trips; unset means false.
    Plan q;
    q.framework.launchBlocking = true;
    nlohmann::json j;
    frameworkToJson(q.framework, j);
    EXPECT_EQ(j.at("launch_blocking"), true);
    EXPECT_FALSE(launchBlockingOf(FrameworkSettings{}));
}

// Megatron-core's NCCL user buffers (plan key nccl_ub): read and written as the plan states them, unset means false,
// and a value that is not a boolean is named at its pointer.
TEST(FrameworkSettings, NcclUserBuffersRoundTripAndAreRefusedAtTheirPointer) {
    EXPECT_FALSE(ncclUbOf(FrameworkSettings{}));
    ProblemList problems;
    const Plan parsed = parsePlan({{"framework", "megatron"}, {"nccl_ub", true}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_TRUE(ncclUbOf(parsed.framework));
    EXPECT_EQ(planToJson(parsed).at("nccl_ub"), true);
    EXPECT_FALSE(planToJson(Plan{}).contains("nccl_ub"));
    (void)parsePlan({{"nccl_ub", "yes"}}, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems.items().front().where, "/plan/nccl_ub");
}

// Whether the model code repeats K and V before its kernel (plan key repeat_kv): torchtitan's Llama did until
// pytorch/torchtitan#2259 (2026-01-27), eager model code does, Transformer Engine does not; a stated value wins,
// round-trips, and a non-boolean is named by its pointer.
TEST(FrameworkSettings, RepeatKvFollowsTheModelCodesDate) {
    FrameworkSettings f;
    EXPECT_FALSE(repeatKvOf(f)); // generic, fused kernels
    f.name = "torchtitan";
    EXPECT_FALSE(repeatKvOf(f)); // today's torchtitan: enable_gqa
    f.version = "2024-12";
    EXPECT_TRUE(repeatKvOf(f));
    f.version = "2026";
    EXPECT_FALSE(repeatKvOf(f));
    FrameworkSettings eager;
    eager.name = "fsdp";
    eager.fusedKernels = false;
    EXPECT_TRUE(repeatKvOf(eager));
    ProblemList problems;
    const Plan parsed = parsePlan({{"framework", "torchtitan"}, {"framework_version", "2024"}, {"repeat_kv", false}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_FALSE(repeatKvOf(parsed.framework));
    EXPECT_EQ(planToJson(parsed).at("repeat_kv"), false);
    EXPECT_FALSE(planToJson(Plan{}).contains("repeat_kv"));
    ProblemList bad;
    (void)parsePlan({{"repeat_kv", "yes"}}, "/plan", bad);
    ASSERT_FALSE(bad.empty());
    EXPECT_EQ(bad.items()[0].where, "/plan/repeat_kv");
}

// K and V replicated over TP (plan key kv_replication): a model of 2 key/value heads at tp 4 is refused at /plan/tp
// without it and runs with it; each rank then projects the one K/V head its 8 query heads read, so the QKV GEMM of
// Llama 3 8B's widths (hidden 4096, 32 heads of 128) is 4096 / 4 + 2 x 128 = 1280 wide and its weight 4096 x 1280.
TEST(FrameworkSettings, KvReplicationRunsFewerKvHeadsThanTpRanks) {
    EXPECT_FALSE(kvReplicationOf(FrameworkSettings{}));
    ProblemList problems;
    const Plan parsed = parsePlan({{"kv_replication", true}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_TRUE(kvReplicationOf(parsed.framework));
    EXPECT_EQ(planToJson(parsed).at("kv_replication"), true);
    EXPECT_FALSE(planToJson(Plan{}).contains("kv_replication"));

    ModelConfig m = test::preset("llama3-8b");
    m.kvHeads = 2;
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.tp = 4;
    p.dp = 2;
    p.globalBatch = 8;
    // The plan's problems, each as "pointer: message".
    const auto problemsOf = [&c](const ModelConfig& model, const Plan& plan) {
        ProblemList problems;
        validatePlan(model, c, plan, "/plan", problems);
        std::vector<std::string> out;
        for (const auto& pr : problems.items()) out.push_back(pr.where + ": " + pr.message);
        return out;
    };
    const auto refused = problemsOf(m, p);
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].rfind("/plan/tp: tp=4 does not divide the model's 2 key/value heads", 0), 0u) << refused[0];
    EXPECT_NE(refused[0].find("kv_replication: true"), std::string::npos);
    p.framework.kvReplication = true;
    EXPECT_TRUE(problemsOf(m, p).empty());
    const LocalShapes s = localShapes(m, p, precisionRecipeOf(p));
    EXPECT_EQ(s.kvHeadsLocal, 1);
    EXPECT_EQ(s.kvDimLocal, 128);
    EXPECT_EQ(test::forwardOpNamed(layerCompute(m, c, p, precisionRecipeOf(p)), "qkv").n, 1280);
    const StageParameters one = stageParameters(m, p, 0);
    ModelConfig four = m;
    four.kvHeads = 4; // over tp 4 without the knob: the same one head a rank, so the same parameters
    Plan plain = p;
    plain.framework.kvReplication.reset();
    EXPECT_DOUBLE_EQ(one.dense, stageParameters(four, plain, 0).dense);
    // A tp that is not a multiple of the key/value heads is refused with the knob too: 3 key/value heads at tp 2.
    m.kvHeads = 3;
    m.heads = 30;
    p.tp = 2;
    const auto notMultiple = problemsOf(m, p);
    ASSERT_FALSE(notMultiple.empty());
    EXPECT_EQ(notMultiple[0].rfind("/plan/tp: tp=2 does not divide the model's 3 key/value heads", 0), 0u) << notMultiple[0];
}

} // namespace
} // namespace tessel
