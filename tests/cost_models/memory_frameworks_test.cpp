// What each framework's code keeps in memory: torchtitan's saved outputs, Transformer Engine's and tessel's own loss,
// autocast's copies, FSDP's shards, gathers and no_sync, torch.distributed.pipelining's buffers (memory_test.cpp:
// the hand-checkable cases every framework shares).
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tessel {
namespace {

// The FSDP tests' case: Llama 3 8B sharded ZeRO-3 over 8 H100, full recompute, in `precision`.
Plan fsdpOnEightGpus(const std::string& precision) {
    Plan p;
    p.dp = 8;
    p.zeroStage = 3;
    p.recompute = Recompute::Full;
    p.precision = precision;
    return p;
}

// The first data-parallel collective of `plan` whose name starts with `prefix`; none: a default CommOp.
CommOp dataParallelOp(const ModelConfig& model, const ClusterConfig& c, const Plan& plan, const std::string& prefix) {
    for (const auto& op : dataParallelCommOps(model, c, plan, 0))
        if (op.name.rfind(prefix, 0) == 0) return op;
    return CommOp{};
}

// Llama 3 8B under torchtitan of 2026: tp 1, pp 4, dp 2, 8 micro-batches of one sequence, full recompute.
Plan torchtitanPipelinePlan() {
    Plan p = test::plan3d(1, 4, 2, 1, 16, "torchtitan", "2026");
    p.recompute = Recompute::Full;
    p.precision = "megatron";
    return p;
}

TEST(Memory, EagerOpsKeepWhatTorchtitansBlockSavesWithoutRecompute) {
    // torchtitan's Llama block, eager, no recompute, per token (bf16, h = q = 4096, kv = 1024, f = 14336): each
    // RMSNorm keeps x.float() (4h), the normalised value (2h) and its output (2h); SDPA keeps q and K, V repeated
    // to every query head (2q each) and its output (2q, also wo's input: the flash output is already laid out for
    // it); SwiGLU keeps w1's, SiLU's, w3's outputs and their product (2f each); plus the fp32 log-sum-exp per head
    // and the norm statistics. 16h + 8q + 8f bytes: fused kernels keep 8h + 2q + 2(q + 2kv) + 6f.
    const ModelConfig llama = test::preset("llama3-8b");
    Plan p;
    p.dp = 8;
    p.microBatch = 2;
    p.recompute = Recompute::None;
    p.framework.name = "torchtitan";
    p.framework.version = "2024-12"; // repeat_kv, as its Llama did until pytorch/torchtitan#2259 (2026-01-27)
    const auto& recipe = *findPrecisionRecipe("fsdp");
    const double T = 2.0 * 8192, h = 4096, q = 4096, kv = 1024, f = 14336;
    const double lse = 4.0 * 32 * T;
    const double eager = layerActivationBytes(llama, p, recipe);
    EXPECT_DOUBLE_EQ(eager, T * (16.0 * h + 8.0 * q + 8.0 * f) + lse);
    p.framework.fusedKernels = true; // what torch.compile would fuse, as Megatron-style kernels keep it
    EXPECT_DOUBLE_EQ(layerActivationBytes(llama, p, recipe), T * (8.0 * h + 2.0 * q + 2.0 * (q + 2.0 * kv) + 6.0 * f) + lse);
    // Measured on an H100 (bench/torchtitan_block_probe.py, data/gpu/h100-2026-11-26/call4-torchtitan-block/
    // block2.json): 3.252 GiB kept per layer after the forward of four such blocks, against 3.252 predicted.
    const double measured = 3.252 * 1073741824.0;
    EXPECT_NEAR(eager + layerNormStatisticsBytes(llama, p, recipe), measured, 0.01 * measured);
}

TEST(Memory, TorchtitansSelectivePolicyKeepsTheSavedOutputsOnly) {
    // Per layer and token: the block input and w2's output (h each), q and the attention output (q each), v
    // (kv), w1's output (ffn), 2 bytes each, plus the fp32 log-sum-exp per head; no norm statistics.
    const ModelConfig llama = test::preset("llama3-8b");
    Plan p;
    p.dp = 8;
    p.recompute = Recompute::Selective;
    p.framework.name = "torchtitan";
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double T = 8192.0;
    EXPECT_DOUBLE_EQ(layerActivationBytes(llama, p, recipe),
                     2.0 * T * (2.0 * 4096 + 2.0 * 4096 + 1024 + 14336) + 4.0 * 32 * T);
    EXPECT_DOUBLE_EQ(layerNormStatisticsBytes(llama, p, recipe), 0.0);
    // Its loss is eager cross_entropy(logits.float()): 12 bytes per logit at the backward's peak, not 6.
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const double eagerLoss = predictMemory(llama, c, p).stages.back().other.logitsLossBytes;
    p.framework.name = "megatron";
    const double fusedLoss = predictMemory(llama, c, p).stages.back().other.logitsLossBytes;
    EXPECT_DOUBLE_EQ(eagerLoss, 2.0 * fusedLoss);
    EXPECT_DOUBLE_EQ(eagerLoss, 12.0 * T * 128256);
}

TEST(Memory, TesselsExecutorKeepsOnlyTheLogitsItOverwritesWithTheirGradient) {
    // loss_in_place (`tessel run`): 2 B per logit in a 16-bit recipe, against the fused cross-entropy's 2 + 4
    // (the fp32 softmax beside the logits) and eager PyTorch's 12; fp32/fp64 recipes keep their own logits either way.
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.dp = 8;
    const double T = 8192.0;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.back().other.logitsLossBytes, 6.0 * T * 128256);
    p.framework.lossInPlace = true;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.back().other.logitsLossBytes, 2.0 * T * 128256);
    p.framework.name = "torchtitan";   // an executor that says so wins over the framework's eager loss
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.back().other.logitsLossBytes, 2.0 * T * 128256);
}

TEST(Memory, TransformerEnginesCrossEntropyKeepsTheLogitsItOverwrites) {
    // cross_entropy "te" (Megatron-core --cross-entropy-fusion-impl te, Transformer Engine's parallel_cross_entropy):
    // the Triton kernel writes the gradient into the bf16 logits in forward and saves them, 2 B per logit against
    // the native kernel's 2 + 4. NeMo's Megatron-Bridge performance scripts set it from container 25.09.
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.dp = 8;
    const double T = 8192.0, V = 128256.0;
    auto lossBytes = [&](const FrameworkSettings& f) {
        p.framework = f;
        return predictMemory(llama, c, p).stages.back().other.logitsLossBytes;
    };
    FrameworkSettings f;
    f.name = "nemo";
    for (const char* v : {"25.09", "25.11", "26.02", ""}) {
        f.version = v;
        EXPECT_EQ(crossEntropyOf(f), "te") << v;
        EXPECT_DOUBLE_EQ(lossBytes(f), 2.0 * T * V) << v;
    }
    for (const char* v : {"24.07", "25.07", "2024"}) {
        f.version = v;
        EXPECT_EQ(crossEntropyOf(f), "fused") << v;
        EXPECT_DOUBLE_EQ(lossBytes(f), 6.0 * T * V) << v;
    }
    f.crossEntropy = "te"; // stated wins over the version's default
    EXPECT_DOUBLE_EQ(lossBytes(f), 2.0 * T * V);
    FrameworkSettings m;
    m.name = "megatron";
    // Megatron-LM's --cross-entropy-loss-fusion defaults to false: the native loss as separate kernels, whose memory
    // is the fused one's (the fp32 softmax beside the logits).
    EXPECT_EQ(crossEntropyOf(m), "unfused");
    EXPECT_DOUBLE_EQ(lossBytes(m), 6.0 * T * V);
    FrameworkSettings ds;
    ds.name = "deepspeed";
    EXPECT_EQ(crossEntropyOf(ds), "unfused"); // Megatron-DeepSpeed's loss is Megatron's
    m.crossEntropy = "te";
    EXPECT_DOUBLE_EQ(lossBytes(m), 2.0 * T * V);
    m.crossEntropy = "eager";
    EXPECT_DOUBLE_EQ(lossBytes(m), 12.0 * T * V);
    // flash-attn's cross_entropy (llm-foundry's loss): the bf16 logits and, at its backward, a bf16 gradient beside
    // them, 2 + 2 B; the per-row fp32 log-sum-exp is 4 B a token, nothing a logit.
    m.crossEntropy = "flash_attn";
    EXPECT_DOUBLE_EQ(lossBytes(m), 4.0 * T * V);
    FrameworkSettings tt;
    tt.name = "torchtitan";
    EXPECT_EQ(crossEntropyOf(tt), "eager");
    // torch.compile's kernels for cross_entropy(logits.float()) (torchtitan's compiled loss, 2025 on): the bf16
    // logits kept and a bf16 gradient beside them, as flash-attn's; eager's fp32 copies are gone (12 -> 4 B).
    tt.fusedKernels = true;
    EXPECT_EQ(crossEntropyOf(tt), "compiled");
    EXPECT_DOUBLE_EQ(lossBytes(tt), 4.0 * T * V);
    tt.version = "2024";
    EXPECT_DOUBLE_EQ(lossBytes(tt), 12.0 * T * V);
    // The plan key round-trips and a value that names no kernel is refused at its pointer.
    ProblemList problems;
    const Plan parsed = parsePlan({{"framework", "megatron"}, {"cross_entropy", "te"}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(parsed.framework.crossEntropy, std::optional<std::string>("te"));
    EXPECT_EQ(planToJson(parsed)["cross_entropy"], "te");
    (void)parsePlan({{"cross_entropy", "liger"}}, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.items().front().where.find("/plan/cross_entropy"), std::string::npos);
}

TEST(Memory, AutocastKeepsFp32StateAnFp32StreamAndEachWeightsCopyUntilItsBackward) {
    // torch.autocast over fp32 parameters: fp32 weights (the master), fp32 gradients, two moments: 16 B per
    // parameter, as mixed's 2 + 2 + 4 + 8. The residual stream is fp32, so each norm's saved input is 4 B an element,
    // and the bf16 copy autocast makes of each weight is saved by its GEMM until the backward.
    ModelConfig gpt2 = test::preset("gpt2-124m");
    gpt2.dropout = 0.0;
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.precision = "amp";
    const auto amp = predictMemory(gpt2, c, p).stages.front();
    const double params = amp.parameters;
    EXPECT_NEAR(amp.weightsBytes, 4.0 * params, 1.0);
    EXPECT_NEAR(amp.weightsBytes + amp.gradsBytes + amp.optimizerBytes, 16.0 * params, 1.0);
    const double T = 1024.0, h = 768.0;
    // One layer's parameters: the four weight matrices, their biases and the two LayerNorms.
    const double layer = 768.0 * 9216.0 + (2304.0 + 768.0 + 3072.0 + 768.0) + 2.0 * 2.0 * 768.0;
    const double delta = layerActivationBytes(gpt2, p, *findPrecisionRecipe("amp")) -
                         layerActivationBytes(gpt2, p, *findPrecisionRecipe("mixed"));
    EXPECT_DOUBLE_EQ(delta, 2.0 * (4.0 - 2.0) * T * h + 2.0 * layer);
    // Full recompute keeps each layer's fp32 input and drops the copies with the rest of the forward.
    p.recompute = Recompute::Full;
    EXPECT_DOUBLE_EQ(layerActivationBytes(gpt2, p, *findPrecisionRecipe("amp")), 4.0 * T * h);
    // The head: the final norm's fp32 input beside the LM head's bf16 input, and the output weight's bf16 copy
    // (the vocabulary padded to 50304).
    p.recompute = Recompute::None;
    p.precision = "mixed";
    const auto mixed = predictMemory(gpt2, c, p).stages.front();
    EXPECT_NEAR(amp.activationsBytes - mixed.activationsBytes,
                12.0 * delta + 2.0 * T * h + 2.0 * 50304.0 * h, 1.0);
}

TEST(Memory, FsdpKeepsFp32ShardsGathersBf16AndReducesInItsReduceDtype) {
    // PyTorch FSDP with MixedPrecision(param bf16, reduce fp32): fp32 parameter shards are the master, fp32
    // gradient shards, two fp32 moments = 16 B per parameter / N, against Megatron's 2 + 4 + 4 + 8 = 18 / N.
    // What moves: parameters gathered in bf16 (2 B), gradients reduced in fp32 (4 B), or bf16 under 'PURE'.
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = fsdpOnEightGpus("fsdp");
    const auto fsdp = predictMemory(llama, c, p).stages.front();
    p.precision = "megatron";
    const auto megatron = predictMemory(llama, c, p).stages.front();
    const double params = megatron.weightsBytes / (2.0 / 8.0);   // weights 2 B / 8 under megatron
    EXPECT_NEAR(fsdp.weightsBytes + fsdp.gradsBytes + fsdp.optimizerBytes, 16.0 / 8.0 * params, 1.0);
    EXPECT_NEAR(megatron.weightsBytes + megatron.gradsBytes + megatron.optimizerBytes, 18.0 / 8.0 * params, 1.0);
    EXPECT_DOUBLE_EQ(fsdp.other.zero3GatherBytes, megatron.other.zero3GatherBytes); // both gather bf16
    auto bytesOf = [&](const char* precision, const std::string& prefix) {
        return dataParallelOp(llama, c, fsdpOnEightGpus(precision), prefix).bytes;
    };
    const double gathered = bytesOf("fsdp", "zero3_all_gather_params");
    EXPECT_DOUBLE_EQ(gathered, bytesOf("megatron", "zero3_all_gather_params"));
    EXPECT_DOUBLE_EQ(bytesOf("fsdp", "dp_reduce_scatter_grads"), 2.0 * gathered);     // fp32
    EXPECT_DOUBLE_EQ(bytesOf("fsdp_pure", "dp_reduce_scatter_grads"), gathered);      // bf16
    // Lightning's FSDP *-mixed (fsdp_amp): fp32 parameters gathered (twice the bytes), gradients reduced in bf16,
    // and the same 16 B of model state.
    EXPECT_DOUBLE_EQ(bytesOf("fsdp_amp", "zero3_all_gather_params"), 2.0 * gathered);
    EXPECT_DOUBLE_EQ(bytesOf("fsdp_amp", "dp_reduce_scatter_grads"), gathered);
    p.precision = "fsdp_amp";
    const auto amp = predictMemory(llama, c, p).stages.front();
    EXPECT_DOUBLE_EQ(amp.weightsBytes + amp.gradsBytes + amp.optimizerBytes,
                     fsdp.weightsBytes + fsdp.gradsBytes + fsdp.optimizerBytes);
    EXPECT_DOUBLE_EQ(amp.other.zero3GatherBytes, 2.0 * fsdp.other.zero3GatherBytes);
}

// FSDP's no_sync (grad_sync_each_micro_batch false: Accelerate's accumulate, Fabric's no_backward_sync): the
// gathers stay per micro-batch, the reduce-scatter runs once a step, and every unit's unsharded gradient (FSDP1: in
// the gathered dtype; FSDP2: in the reduce dtype) is kept until then, in place of the gradient shard, which exists
// only from that reduce-scatter on. By hand, Llama 3 8B on 8 GPUs, 4 micro-batches: N x 2 B of gradients where the
// synced plan keeps N x 4 B / 8.
TEST(Memory, FsdpNoSyncKeepsTheUnshardedGradientsAndReducesOnceAStep) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = fsdpOnEightGpus("fsdp");
    p.globalBatch = 32;
    p.framework.name = "fsdp";
    const auto sync = predictMemory(llama, c, p).stages.front();
    auto phaseOf = [&](const Plan& q, const std::string& prefix) {
        const CommOp op = dataParallelOp(llama, c, q, prefix);
        EXPECT_FALSE(op.name.empty()) << prefix;
        return op.phase;
    };
    EXPECT_EQ(phaseOf(p, "dp_reduce_scatter_grads"), CommPhase::PerMicroBatch);
    p.framework.gradSyncEachMicroBatch = false;
    const auto noSync = predictMemory(llama, c, p).stages.front();
    const double params = sync.weightsBytes / (4.0 / 8.0); // fp32 shards, 4 B / 8
    EXPECT_NEAR(sync.gradsBytes, 4.0 * params / 8.0, 1.0);
    EXPECT_NEAR(noSync.gradsBytes, 2.0 * params, 1.0);
    EXPECT_DOUBLE_EQ(noSync.other.zero3GatherBytes, sync.other.zero3GatherBytes); // still gathered per unit
    EXPECT_EQ(phaseOf(p, "dp_reduce_scatter_grads"), CommPhase::PerStep);
    EXPECT_EQ(phaseOf(p, "zero3_all_gather_params_fwd"), CommPhase::PerMicroBatch);
    // Lightning's fp32 gathers (fsdp_amp) keep fp32 unsharded gradients.
    p.precision = "fsdp_amp";
    EXPECT_NEAR(predictMemory(llama, c, p).stages.front().gradsBytes, 4.0 * params, 1.0);
    // FSDP2 (torchtitan's costs) upcasts the kept gradient to the reduce dtype (FSDPParam.to_accumulated_grad_if_needed):
    // the fsdp recipe reduces in fp32, so 4 B a parameter where FSDP1 keeps the gathered 2.
    p.precision = "fsdp";
    p.framework.name = "torchtitan";
    EXPECT_NEAR(predictMemory(llama, c, p).stages.front().gradsBytes, 4.0 * params, 1.0);
    // Megatron-LM's and DeepSpeed's engines have no such switch: the flag moves nothing there.
    p.framework.name = "deepspeed";
    Plan synced = p;
    synced.framework.gradSyncEachMicroBatch = true;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.front().gradsBytes,
                     predictMemory(llama, c, synced).stages.front().gradsBytes);
}

// torch.distributed.pipelining (torchtitan, pp > 1) keeps a receive buffer per micro-batch for each stage's input
// and for its output's gradient, and the in-flight outputs; Megatron-LM a send and a receive. By hand, Llama 3 8B,
// tp 1, pp 4, 8 micro-batches of one 8192-token sequence, bf16: a buffer is 8192 x 4096 x 2 B. Stage 0 (first, four
// in flight): 8 gradient buffers + 4 outputs; stage 1 (three in flight): 8 + 3, and 8 - 3 stale input buffers;
// the last stage (one in flight): 8 - 1 stale input buffers only. Interleaved over two chunks, rank 0 holds
// virtual stages 0 and 4: the second receives. torchtitan of 2026 (return_outputs=False) keeps no other output.
TEST(Memory, TorchPipeliningKeepsAReceiveBufferPerMicroBatch) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const Plan p = torchtitanPipelinePlan();
    const double buffer = 8192.0 * 4096.0 * 2.0;
    auto comm = [&](const Plan& q) {
        std::vector<double> out;
        for (const auto& st : predictMemory(llama, c, q).stages) out.push_back(st.other.commBufferBytes);
        return out;
    };
    const auto titan = comm(p);
    ASSERT_EQ(titan.size(), 4u);
    EXPECT_DOUBLE_EQ(titan[0], (8.0 + 4.0) * buffer);
    EXPECT_DOUBLE_EQ(titan[1], (8.0 + 3.0 + 5.0) * buffer);
    EXPECT_DOUBLE_EQ(titan[3], 7.0 * buffer);
    Plan megatron = p;
    megatron.framework.name = "megatron";
    for (double bytes : comm(megatron)) EXPECT_DOUBLE_EQ(bytes, 2.0 * buffer);
    Plan interleaved = p;
    interleaved.vpp = 2;
    interleaved.schedule = Schedule::Interleaved1F1B;
    const auto looped = predictMemory(llama, c, interleaved).stages.front();
    const double f = looped.inFlight;
    EXPECT_DOUBLE_EQ(looped.other.commBufferBytes, (2.0 * (8.0 + f) + (8.0 - f)) * buffer);
}

// What output_chunks kept until the step returned, by torchtitan's year: in 2024 every stage's every output (stage 1
// above holds 8 outputs, not its 3 in flight), through 2025 the last stage's logits (the 7 micro-batches before the
// one in flight, 8192 x 128256 x 2 B each, as the 2026 plan's head state for one), none after.
TEST(Memory, TorchPipeliningKeptStageOutputsByVersion) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const Plan p = torchtitanPipelinePlan();
    const double buffer = 8192.0 * 4096.0 * 2.0, logits = 8192.0 * 128256.0 * 2.0;
    auto stages = [&](const std::string& version) {
        Plan q = p;
        q.framework.version = version;
        return predictMemory(llama, c, q).stages;
    };
    const auto now = stages("2026"), y2025 = stages("2025"), y2024 = stages("2024");
    EXPECT_DOUBLE_EQ(y2025[1].other.commBufferBytes, now[1].other.commBufferBytes);
    EXPECT_DOUBLE_EQ(y2024[1].other.commBufferBytes, now[1].other.commBufferBytes + 5.0 * buffer);
    EXPECT_DOUBLE_EQ(y2024[0].other.commBufferBytes, now[0].other.commBufferBytes + 4.0 * buffer);
    EXPECT_DOUBLE_EQ(y2025[3].other.logitsLossBytes, now[3].other.logitsLossBytes + 7.0 * logits);
    EXPECT_DOUBLE_EQ(y2024[3].other.logitsLossBytes, y2025[3].other.logitsLossBytes);
    EXPECT_DOUBLE_EQ(y2025[0].other.logitsLossBytes, 0.0);
    const auto unstated = stages("");
    EXPECT_DOUBLE_EQ(unstated[3].other.logitsLossBytes, now[3].other.logitsLossBytes);
}

} // namespace
} // namespace tessel
