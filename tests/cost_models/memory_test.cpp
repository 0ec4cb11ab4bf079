// Hand-checkable memory cases: model-state bytes, ZeRO division, stage differences, in-flight micro-batches.
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tessel {
namespace {

TEST(MemoryHand, TenBillionFp16WithFp32AdamIs120GB) {
    // fp16 weights 20 GB + fp16 grads 20 GB + two fp32 Adam moments 80 GB.
    const auto& r = *findPrecisionRecipe("bf16_no_master");
    EXPECT_DOUBLE_EQ(10e9 * modelStateBytesPerParameter(r, 0, 1), 120e9);
}

TEST(MemoryPhases, TrainingMetricsAfterTheBackwardRaiseThePeakOnlyPastIt) {
    // Composer's metrics run after the backward has freed the activations: the bf16 logits and one metric's fp32
    // copy and log-softmax, (2 + 4 + 4) B a logit. GPT-2 124M with full recompute keeps little per layer, so at
    // 16 sequences of 1024 that phase, 10 x 16384 x 50304 B = 8.2 GB, is past what the backward held.
    const ModelConfig gpt2 = test::preset("gpt2-124m");
    const ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    Plan p;
    p.precision = "mixed";
    p.microBatch = 16;
    p.globalBatch = 16;
    p.recompute = Recompute::Full;
    const MemoryReport without = predictMemory(gpt2, c, p);
    p.framework.trainMetricLosses = 2;
    const MemoryReport with = predictMemory(gpt2, c, p);
    const StageMemory& st = without.stages.back();
    const double metricsPhase = (2.0 + 8.0) * 16.0 * 1024.0 * 50304.0;
    const double backwardPhase = st.activationsBytes + st.other.logitsLossBytes + st.other.backwardWorkingBytes;
    ASSERT_GT(metricsPhase, backwardPhase);
    EXPECT_NEAR(with.stages.back().other.logitsLossBytes - st.other.logitsLossBytes, metricsPhase - backwardPhase, 1.0);
    // Without recompute the backward holds more than the metrics need: the peak does not move.
    p.recompute = Recompute::None;
    p.framework.trainMetricLosses = 0;
    const double plain = predictMemory(gpt2, c, p).peakBytes;
    p.framework.trainMetricLosses = 2;
    EXPECT_DOUBLE_EQ(predictMemory(gpt2, c, p).peakBytes, plain);
}

TEST(MemoryHand, SeventyBillionAtSixteenBytesIs1120GBAndZero3DividesBy32) {
    const auto& r = *findPrecisionRecipe("mixed");
    EXPECT_DOUBLE_EQ(70e9 * modelStateBytesPerParameter(r, 0, 1), 1120e9);
    EXPECT_DOUBLE_EQ(70e9 * modelStateBytesPerParameter(r, 3, 32), 1120e9 / 32);
}

TEST(MemoryHand, ZeroPaperStages) {
    // Rajbhandari et al. 2020, Figure 1, K = 12, Psi = 7.5B, N_d = 64: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
    const auto& r = *findPrecisionRecipe("mixed");
    const double psi = 7.5e9;
    EXPECT_NEAR(psi * modelStateBytesPerParameter(r, 0, 64) / 1e9, 120.0, 0.05);
    EXPECT_NEAR(psi * modelStateBytesPerParameter(r, 1, 64) / 1e9, 31.4, 0.05);
    EXPECT_NEAR(psi * modelStateBytesPerParameter(r, 2, 64) / 1e9, 16.6, 0.05);
    EXPECT_NEAR(psi * modelStateBytesPerParameter(r, 3, 64) / 1e9, 1.875, 0.001);
}

TEST(MemoryHand, SevenBillionMixedNeedsAbout112GB) {
    ModelConfig m = test::preset("llama2-7b");
    ClusterConfig c = test::roundCluster(8, 1);
    c.gpu.memoryBytes = int64_t{1} << 40;
    Plan p;
    p.dp = 8;
    p.globalBatch = 8;
    p.precision = "mixed";
    auto mem = predictMemory(m, c, p);
    ASSERT_EQ(mem.stages.size(), 1u);
    const auto& st = mem.stages[0];
    const double states = st.weightsBytes + st.gradsBytes + st.optimizerBytes;
    // 6.74B parameters (32000-token vocab padded to 32000) x 16 B = 107.8 GB, i.e. "~112 GB" for "7B".
    EXPECT_NEAR(states / 1e9, 107.8, 0.1);
    EXPECT_NEAR(states / 112e9, 1.0, 0.05);
}

// Llama 2 70B on 32 GPUs (4 nodes of 8), pure data parallelism under ZeRO-3 with the mixed recipe.
Plan llama70bZero3Over32() {
    Plan p;
    p.dp = 32;
    p.globalBatch = 32;
    p.zeroStage = 3;
    p.precision = "mixed";
    return p;
}

// The same 32 GPUs as tp x pp x dp under a framework's precision recipe, ZeRO-3.
Plan llama70bPipelinedOver32(int tp, int pp, int dp, const char* precision, const char* framework) {
    Plan p = llama70bZero3Over32();
    p.tp = tp;
    p.pp = pp;
    p.dp = dp;
    p.precision = precision;
    p.framework.name = framework;
    return p;
}

TEST(MemoryHand, Llama70bZero3Over32Gpus) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    const Plan p = llama70bZero3Over32();
    auto mem = predictMemory(m, c, p);
    const auto& st = mem.stages[0];
    EXPECT_NEAR(st.weightsBytes + st.gradsBytes + st.optimizerBytes, st.parameters * 16.0 / 32.0, 1.0);
    EXPECT_NEAR(st.parameters, 68.98e9, 0.01e9);
    // The gather buffers hold two layers' full parameters (current + prefetch) in bf16; a transformer layer
    // (856M parameters) is larger than the embedding (262M).
    const auto counts = countParameters(m);
    EXPECT_DOUBLE_EQ(st.other.zero3GatherBytes, 2.0 * 2.0 * static_cast<double>(counts.perLayer()));
}

// DeepSpeed allocates its reduce bucket whole (reduce_bucket_size, default 5e8 elements) in the weights' dtype: two
// at stage 2 under overlap_comm (stage_1_and_2.py's double ipg_buffer), one at stage 3 (stage3.py); other frameworks
// keep Megatron's 40M-element bucket, at most the stage's parameters.
TEST(MemoryHand, DeepSpeedsReduceBucketIsAllocatedWhole) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    Plan p = llama70bZero3Over32();
    auto bucket = [&](const Plan& q) { return predictMemory(m, c, q).stages[0].other.commBufferBytes; };
    const double megatronStyle = bucket(p);
    p.framework.name = "deepspeed";
    // Stage 3: one bucket of 5e8 bf16 elements, and the largest module's whole bf16 gradient before it is bucketed
    // (the fused gate and up projection, 2 x 28672 x 8192).
    EXPECT_DOUBLE_EQ(bucket(p) - megatronStyle, 2.0 * (5e8 - 4e7) + 2.0 * 2.0 * 28672.0 * 8192.0);
    p.zeroStage = 2;
    const double stage2 = bucket(p);
    p.framework.overlapGradReduce = true; // overlap_comm: the second ipg buffer
    EXPECT_DOUBLE_EQ(bucket(p) - stage2, 2.0 * 5e8);
    // Without contiguous_gradients (DeepSpeed before v0.5.0, or stated) there is no ipg_buffer: each bucket is
    // flattened into one new tensor for its all-reduce, one bucket beside the backward whatever overlap_comm says.
    p.framework.contiguousGradients = false;
    EXPECT_DOUBLE_EQ(bucket(p), stage2);
    p.framework.contiguousGradients.reset();
    p.framework.version = "0.4.2";
    EXPECT_DOUBLE_EQ(bucket(p), stage2);
    p.framework.version.clear();
    p.framework.reduceBucketSize = 50000000;
    EXPECT_DOUBLE_EQ(stage2 - 2.0 * 5e8 + 2.0 * 2.0 * 5e7, bucket(p));
    // Stage 1 runs the same optimizer and, in today's DeepSpeed, allocates the same buffers in its backward (one, two
    // with overlap_comm); Megatron-LM's distributed optimizer (ZeRO-1) reduces in its own buckets, counted elsewhere.
    p.framework.reduceBucketSize.reset();
    p.framework.overlapGradReduce.reset();
    p.zeroStage = 1;
    const double stage1 = bucket(p);
    p.framework.name = "megatron";
    EXPECT_DOUBLE_EQ(stage1 - bucket(p), 2.0 * 5e8);
    p.framework.name = "deepspeed";
    p.framework.overlapGradReduce = true;
    EXPECT_DOUBLE_EQ(bucket(p) - stage1, 2.0 * 5e8);
    // DeepSpeed of 2021-07 to 2024-01 ran ZeRO-1 with contiguous_gradients and overlap_comm off: no buffer beside the
    // backward (its all-reduce flattens each bucket after the backward, below).
    p.framework.version = "2022";
    p.framework.name = "megatron";
    const double megatron2022 = bucket(p);
    p.framework.name = "deepspeed";
    EXPECT_DOUBLE_EQ(bucket(p), megatron2022);
    // Under the pipeline engine (and in 2022 without one) the bucket lives after the last backward only:
    // reduce_gradients(pipeline_parallel=True) allocates it and the epilogue frees it. Never beside the activations:
    // the allocated peak is the step phase's larger transient (its copies of the gradient partition, here), and the
    // bucket's segment, larger than any block the backward left cached, stays reserved beside them.
    p.framework.version.clear();
    p.framework.overlapGradReduce.reset();
    p.pp = 4;
    p.dp = 8;
    const StageMemory piped = predictMemory(m, c, p).stages[1];
    p.framework.reduceBucketSize = 300000000;
    const StageMemory smaller = predictMemory(m, c, p).stages[1];
    EXPECT_DOUBLE_EQ(piped.other.commBufferBytes, smaller.other.commBufferBytes);
    EXPECT_DOUBLE_EQ(piped.totalBytes(), smaller.totalBytes());
    EXPECT_DOUBLE_EQ(piped.allocatorKeptBytes - smaller.allocatorKeptBytes, 2.0 * 2e8);
    p.framework.reduceBucketSize.reset();
    // The plan key round-trips; a bucket of no elements is refused at its pointer.
    ProblemList problems;
    const Plan parsed = parsePlan({{"framework", "deepspeed"}, {"reduce_bucket_size", 200000000}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(reduceBucketElementsOf(parsed.framework), 200000000);
    EXPECT_EQ(planToJson(parsed)["reduce_bucket_size"], 200000000);
    (void)parsePlan({{"reduce_bucket_size", 0}}, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.items().front().where.find("/plan/reduce_bucket_size"), std::string::npos);
}

// DeepSpeed's ZeRO-3 gathers module by module (partitioned_param_coordinator.py): the module about to run, then the
// next ones of the trace while under stage3_max_live_parameters, at most stage3_prefetch_bucket_size at a time (whole
// parameters), releasing a module after it ran unless reused within stage3_max_reuse_distance or already passed by the
// prefetch. Two layers of hidden 1024, tp 1, no biases, rotary, tied embeddings: modules qkv 3 h^2, proj h^2, fc1
// 4 h^2, fc2 4 h^2 and the word embedding 1024 h = h^2 (h^2 = 1,048,576), gathered in bf16 (2 B).
TEST(MemoryHand, DeepSpeedZero3GathersModuleByModule) {
    ModelConfig m = test::preset("gpt2-124m");
    m.layers = 2;
    m.hidden = 1024;
    m.heads = 16;
    m.kvHeads = 16;
    m.headDim = 64;
    m.ffnHidden = 4096;
    m.vocab = 1024;
    m.seqLen = 256;
    m.position = PositionEmbedding::Rope;
    m.tiedEmbeddings = true;
    m.linearBias = false;
    const double h2 = 1024.0 * 1024.0;
    const ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    Plan p;
    p.dp = 8;
    p.globalBatch = 8;
    p.zeroStage = 3;
    p.precision = "mixed";
    p.framework.name = "deepspeed";
    p.framework.reduceBucketSize = 1000;
    auto other = [&](const Plan& q) { return predictMemory(m, c, q).stages[0].other; };
    const int64_t all = int64_t{1} << 40;
    // max_live 1: no prefetch; reuse distance 0: each module released after it ran. The peak is the largest module,
    // fc1 (or fc2), with or without recompute.
    p.framework.stage3MaxLiveParameters = 1;
    p.framework.stage3PrefetchBucketSize = 1;
    p.framework.stage3MaxReuseDistance = 0;
    EXPECT_DOUBLE_EQ(other(p).zero3GatherBytes, 2.0 * 4.0 * h2);
    p.recompute = Recompute::Full;
    EXPECT_DOUBLE_EQ(other(p).zero3GatherBytes, 2.0 * 4.0 * h2);
    // Beside it the largest module's whole gradient (fc1's), and the 1000-element bucket: nothing else buffers here.
    EXPECT_DOUBLE_EQ(other(p).commBufferBytes, 2.0 * 4.0 * h2 + 2.0 * 1000.0);
    // A reuse distance just over 8 h^2 keeps fc1 from its replay to its backward (fc2 twice between), beside fc2.
    p.framework.stage3MaxReuseDistance = 8 * (int64_t{1} << 20) + 1;
    EXPECT_DOUBLE_EQ(other(p).zero3GatherBytes, 2.0 * 8.0 * h2);
    // One past every use keeps each module once gathered: both layers and the embedding.
    p.framework.stage3MaxReuseDistance = all;
    EXPECT_DOUBLE_EQ(other(p).zero3GatherBytes, 2.0 * (2.0 * 12.0 * h2 + h2));
    p.recompute = Recompute::None;
    p.framework.stage3MaxReuseDistance = 0;
    // max_live just over fc1: at fc1 the bound admits one more parameter, fetched whole: fc2, 8 h^2.
    p.framework.stage3MaxLiveParameters = 4 * (int64_t{1} << 20) + 1;
    EXPECT_DOUBLE_EQ(other(p).zero3GatherBytes, 2.0 * 8.0 * h2);
    // Unbounded, the prefetch runs ahead: every module it passes over still gathered (the tied embedding, used by the
    // head twice) lets it fetch one further, so in layer 2's backward qkv is in use with layer 1's fc2 and fc1 ahead.
    p.framework.stage3MaxLiveParameters = all;
    EXPECT_DOUBLE_EQ(other(p).zero3GatherBytes, 2.0 * (3.0 + 4.0 + 4.0) * h2);
    // FSDP gathers whole layers (with their norms): the current and the prefetched one.
    Plan fsdp = p;
    fsdp.framework = FrameworkSettings{};
    fsdp.framework.name = "fsdp";
    EXPECT_DOUBLE_EQ(other(fsdp).zero3GatherBytes, 2.0 * 2.0 * (12.0 * h2 + 4096.0));
    // The limits are DeepSpeed's: another framework's plan that names them is refused at the key.
    ProblemList problems;
    fsdp.framework.stage3MaxLiveParameters = 1000;
    validatePlan(m, c, fsdp, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.items().front().where.find("/plan/stage3_max_live_parameters"), std::string::npos);
    // The keys round-trip.
    ProblemList parsed;
    const Plan q = parsePlan({{"framework", "deepspeed"}, {"stage3_max_live_parameters", 3000000000},
                              {"stage3_prefetch_bucket_size", 50000000}, {"stage3_max_reuse_distance", 0}},
                             "/plan", parsed);
    EXPECT_TRUE(parsed.empty());
    EXPECT_EQ(deepSpeedStage3Of(q.framework).maxLiveParameters, 3000000000);
    EXPECT_EQ(deepSpeedStage3Of(q.framework).prefetchBucketSize, 50000000);
    EXPECT_EQ(deepSpeedStage3Of(q.framework).maxReuseDistance, 0);
    EXPECT_EQ(planToJson(q)["stage3_max_live_parameters"], 3000000000);
    EXPECT_EQ(deepSpeedStage3Of(FrameworkSettings{}).maxLiveParameters, 1000000000); // DeepSpeed's defaults
    EXPECT_EQ(deepSpeedStage3Of(FrameworkSettings{}).prefetchBucketSize, 50000000);
}

// PyTorch FSDP reduce-scatters a wrapped layer's whole gradient at once: the layer's unsharded gradients (bf16)
// beside the reduce-scatter input in reduce_dtype, in place of a 40M-element bucket. Llama 2 70B over 32 ranks,
// 856M parameters a layer: 6 B each under torchtitan's and Composer's DEFAULT fp32 reduction, 4 B under PURE.
TEST(MemoryHand, FsdpReducesAWholeLayerAtOnce) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    const double layer = static_cast<double>(countParameters(m).perLayer());
    auto buffers = [&](const char* framework, const char* precision, int pp) {
        Plan p = llama70bPipelinedOver32(1, pp, 32 / pp, precision, framework);
        return predictMemory(m, c, p).stages[0].other.commBufferBytes;
    };
    EXPECT_DOUBLE_EQ(buffers("megatron", "fsdp", 1), 4.0 * 4e7); // Megatron-style: one fp32 bucket
    EXPECT_DOUBLE_EQ(buffers("torchtitan", "fsdp", 1), (2.0 + 4.0) * layer);
    EXPECT_DOUBLE_EQ(buffers("fsdp", "fsdp", 1), (2.0 + 4.0) * layer);
    EXPECT_DOUBLE_EQ(buffers("fsdp", "fsdp_pure", 1), (2.0 + 2.0) * layer);
    // DeepSpeed's ZeRO-3 keeps its own bucket (DeepSpeedsReduceBucketIsAllocatedWhole); torchtitan under
    // pipelining keeps the stage's unsharded gradients for the step, counted with the gradients
    // (TorchtitanPipelinedFsdpKeepsTheStageGatheredAndItsGradientsUnsharded).
    // Its bucket, in the fp32 weights' dtype, and the largest module's whole bf16 gradient (the fused gate and up).
    EXPECT_DOUBLE_EQ(buffers("deepspeed", "fsdp", 1), 4.0 * 5e8 + 2.0 * 2.0 * 28672.0 * 8192.0);
}

// DeepSpeed's BF16_Optimizer (bf16 under its pipeline engine, BLOOM's recipe) keeps each parameter's bf16 .grad
// beside the full fp32 gradient it accumulates into: 2 B more per parameter than the recipe's fp32 gradients,
// unsharded; the master and moments stay sharded over data parallelism as ZeRO-1 shards them.
TEST(MemoryHand, DeepSpeedsBf16OptimizerKeepsTheBf16GradientsBesideTheFp32Ones) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    Plan p = llama70bPipelinedOver32(4, 4, 2, "megatron", "megatron");
    p.zeroStage = 1;
    const auto megatron = predictMemory(m, c, p).stages[1];
    p.framework.name = "deepspeed";
    const auto deepspeed = predictMemory(m, c, p).stages[1];
    EXPECT_NEAR(megatron.gradsBytes, 4.0 * megatron.parameters, 1.0);
    EXPECT_NEAR(deepspeed.gradsBytes, (4.0 + 2.0) * deepspeed.parameters, 1.0);
    EXPECT_DOUBLE_EQ(deepspeed.optimizerBytes, megatron.optimizerBytes);
    p.zeroStage = 2; // ZeRO-2 is DeepSpeed's own ZeRO optimizer: no second gradient copy
    const auto zero2 = predictMemory(m, c, p).stages[1];
    EXPECT_NEAR(zero2.gradsBytes, 4.0 * zero2.parameters / 2.0, 1.0);
}

// After the last backward DeepSpeed's BF16_Optimizer all-reduces its flat fp32 gradient through a bf16 copy of the
// whole of it (allreduce_bucket's cast to the communication dtype): 2 B a parameter of the stage, while the
// activations are freed (and ZeRO-1/2 copies its gradient partition, below). Past what the backward held it raises the allocated peak; the caching allocator keeps
// the copy's segment beside the activations' cached blocks, which reserved memory (nvidia-smi) shows.
TEST(MemoryPhases, DeepSpeedCopiesTheGradientsAtTheStepAfterTheBackward) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    Plan p = llama70bPipelinedOver32(4, 4, 2, "megatron", "deepspeed");
    p.zeroStage = 1;
    p.microBatch = 1;
    p.recompute = Recompute::Full;
    auto check = [&](const StageMemory& st, bool pastTheBackward, double cast) {
        const double backwardPhase = st.activationsBytes + st.other.logitsLossBytes + st.other.backwardWorkingBytes;
        ASSERT_EQ(cast > backwardPhase, pastTheBackward);
        EXPECT_NEAR(st.other.stepCopyBytes, std::max(0.0, cast - backwardPhase), 1.0);
        EXPECT_NEAR(st.allocatorKeptBytes, cast - st.other.stepCopyBytes, 1.0);
        // Where the segment would not fit, the allocator frees its cache and retries: no more than the device.
        const double capacity = static_cast<double>(c.gpu.memoryBytes);
        EXPECT_NEAR(st.reservedPeakBytes(),
                    std::min(st.totalBytes() + st.allocatorKeptBytes, std::max(st.totalBytes(), capacity)), 1.0);
    };
    // Full recompute at one sequence: a stage's 20 layer inputs for a few micro-batches, 4.5 GB, under the
    // 8.6 GB copy of its 4.3 B parameters.
    const MemoryReport full = predictMemory(m, c, p);
    check(full.stages[1], true, 2.0 * full.stages[1].parameters);
    // It fits: the reserved peak is the kept segment above the allocated one.
    ASSERT_LT(full.stages[1].totalBytes() + full.stages[1].allocatorKeptBytes, static_cast<double>(c.gpu.memoryBytes));
    EXPECT_GT(full.reservedPeakBytes, full.peakBytes);
    // Without recompute the backward holds more than the copy: the allocated peak does not move (and is past the
    // GPU's 80 GiB), so the allocator, short of memory, frees its cache: reserved is the allocated peak.
    p.recompute = Recompute::None;
    const MemoryReport none = predictMemory(m, c, p);
    check(none.stages[1], false, 2.0 * none.stages[1].parameters);
    ASSERT_GT(none.stages[1].totalBytes(), static_cast<double>(c.gpu.memoryBytes));
    EXPECT_DOUBLE_EQ(none.stages[1].reservedPeakBytes(), none.stages[1].totalBytes());
    EXPECT_GE(none.reservedPeakBytes, none.peakBytes);
    // Megatron-LM's own optimizer reduces its fp32 main_grad buffer in place: none of this.
    p.recompute = Recompute::Full;
    p.framework.name = "megatron";
    const StageMemory megatron = predictMemory(m, c, p).stages[1];
    EXPECT_EQ(megatron.other.stepCopyBytes, 0.0);
    EXPECT_EQ(megatron.allocatorKeptBytes, 0.0);
    EXPECT_DOUBLE_EQ(megatron.reservedPeakBytes(), megatron.totalBytes());
    // DeepSpeed's ZeRO-1/2 optimizer at its step flattens the partition's bf16 gradients into a new tensor and casts
    // that to fp32 (stage_1_and_2.py step()): (2 + 4) / N a parameter, N = 32 here; its host offload copies none.
    p = llama70bPipelinedOver32(1, 1, 32, "megatron", "deepspeed");
    p.zeroStage = 2;
    p.microBatch = 1;
    p.recompute = Recompute::Full;
    // 80 layers' stored inputs at one sequence of 4096, 5.4 GB and the rest, under the 13 GB copy of 69 B / 32.
    const StageMemory zero2 = predictMemory(m, c, p).stages[0];
    check(zero2, true, zero2.parameters * 6.0 / 32.0);
    EXPECT_GT(zero2.allocatorKeptBytes, 0.0);
    p.offloadOptimizer = true;
    const StageMemory offloaded = predictMemory(m, c, p).stages[0];
    EXPECT_EQ(offloaded.other.stepCopyBytes, 0.0);
    EXPECT_EQ(offloaded.allocatorKeptBytes, 0.0);
}

// torchtitan's FSDP under pipelining keeps each stage's parameters gathered for the whole step and its gradients
// unsharded until the one reduce-scatter: the fsdp recipe's sharded fp32 master and moments (12 B / shards), the
// gathered copy (2 B, FSDP's bf16 param_dtype) and the fp32 accumulated gradients (4 B, its reduce_dtype) of every
// parameter of the stage, which stand in for the 4 B / shards gradient shard (it exists only from the step's one
// reduce-scatter on, as the unsharded ones are freed); no per-layer gather buffers.
TEST(MemoryHand, TorchtitanPipelinedFsdpKeepsTheStageGatheredAndItsGradientsUnsharded) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    Plan p = llama70bPipelinedOver32(1, 4, 8, "fsdp", "torchtitan");
    const auto& st = predictMemory(m, c, p).stages[1];
    EXPECT_NEAR(st.weightsBytes + st.gradsBytes + st.optimizerBytes, st.parameters * (12.0 / 8.0 + 2.0 + 4.0), 1.0);
    EXPECT_DOUBLE_EQ(st.other.zero3GatherBytes, 0.0);
    p.framework.reshardAfterForward = true;
    const auto& resharded = predictMemory(m, c, p).stages[1];
    EXPECT_NEAR(resharded.weightsBytes + resharded.gradsBytes + resharded.optimizerBytes, resharded.parameters * 16.0 / 8.0, 1.0);
    EXPECT_GT(resharded.other.zero3GatherBytes, 0.0);
}

// Hybrid sharding over 4 replicas of 8 ranks: each GPU keeps 16 B / 8 per parameter, four times full sharding's,
// and nothing else changes (the gather buffers hold the same full layers).
TEST(MemoryHand, Llama70bHybridShardingKeepsAShardOfEightRanks) {
    ModelConfig m = test::preset("llama2-70b");
    ClusterConfig c = test::roundCluster(8, 4);
    Plan p = llama70bZero3Over32();
    const auto full = predictMemory(m, c, p).stages[0];
    p.zeroReplicas = 4;
    const auto hybrid = predictMemory(m, c, p).stages[0];
    EXPECT_NEAR(hybrid.weightsBytes + hybrid.gradsBytes + hybrid.optimizerBytes, hybrid.parameters * 16.0 / 8.0, 1.0);
    EXPECT_NEAR(hybrid.weightsBytes + hybrid.gradsBytes + hybrid.optimizerBytes,
                4.0 * (full.weightsBytes + full.gradsBytes + full.optimizerBytes), 4.0);
    EXPECT_DOUBLE_EQ(hybrid.other.zero3GatherBytes, full.other.zero3GatherBytes);
    EXPECT_DOUBLE_EQ(hybrid.activationsBytes, full.activationsBytes);
}

TEST(MemoryStages, FirstHasEmbeddingLastHasHeadAndLogits) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 1024);
    m.tiedEmbeddings = false;
    ClusterConfig c = test::roundCluster(4, 1);
    Plan p;
    p.pp = 4;
    p.globalBatch = 8;
    auto mem = predictMemory(m, c, p);
    ASSERT_EQ(mem.stages.size(), 4u);
    const double emb = 51200.0 * 1024;
    const double head = 51200.0 * 1024 + 2 * 1024; // LM head + final LayerNorm
    EXPECT_DOUBLE_EQ(mem.stages[0].parameters - mem.stages[1].parameters, emb);
    EXPECT_DOUBLE_EQ(mem.stages[3].parameters - mem.stages[2].parameters, head);
    EXPECT_DOUBLE_EQ(mem.stages[1].parameters, mem.stages[2].parameters);
    EXPECT_EQ(mem.stages[0].other.logitsLossBytes, 0.0);
    EXPECT_GT(mem.stages[3].other.logitsLossBytes, 0.0);
    // 1F1B: stage s holds min(m, p - s) micro-batches.
    for (int s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(mem.stages[s].inFlight, 4 - s);
}

// BLOOM's norm over the embedding (embedding_norm): 2h more weights on the first stage, and per micro-batch in flight
// there its input (the 16-bit embedding output, T h) and its fp32 mean and 1/std (8 B a token), which no layer
// checkpoint covers; the other stages do not move.
TEST(MemoryStages, EmbeddingNormKeepsItsInputPerMicroBatchInFlightOnTheFirstStage) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 1024);
    ClusterConfig c = test::roundCluster(4, 1);
    Plan p;
    p.pp = 4;
    p.microBatch = 2;
    p.globalBatch = 16;
    p.recompute = Recompute::Full;
    const auto before = predictMemory(m, c, p);
    m.embeddingNorm = true;
    const auto after = predictMemory(m, c, p);
    const double T = 2.0 * 1024.0, h = 1024.0;
    EXPECT_DOUBLE_EQ(after.stages[0].inFlight, 4.0);
    EXPECT_DOUBLE_EQ(after.stages[0].parameters - before.stages[0].parameters, 2.0 * h);
    EXPECT_DOUBLE_EQ(after.stages[0].activationsBytes - before.stages[0].activationsBytes, 4.0 * (2.0 * T * h + 8.0 * T));
    for (int s = 1; s < 4; ++s) {
        EXPECT_DOUBLE_EQ(after.stages[s].activationsBytes, before.stages[s].activationsBytes) << s;
        EXPECT_DOUBLE_EQ(after.stages[s].parameters, before.stages[s].parameters) << s;
    }
}

// DeepSpeed's PipelineEngine keeps, per micro-batch in flight, what it sent until that micro-batch's backward: without
// TP the stage's output whole, and on a receiving stage the received input beside the clone its forward runs on; with
// TP the 1/tp partition it sent only. The same plan under Megatron-LM (which frees the output after sending) is the
// baseline: the difference is those tensors times the stage's micro-batches in flight.
TEST(MemoryStages, DeepSpeedsPipelineEngineKeepsWhatItSentUntilTheBackward) {
    const ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 1024);
    const ClusterConfig c = test::roundCluster(8, 1);
    const double T = 2.0 * 1024.0, h = 1024.0, e = 2.0;
    for (int tp : {1, 2}) {
        Plan p;
        p.tp = tp;
        p.pp = 4;
        p.microBatch = 2;
        p.globalBatch = 16;
        p.recompute = Recompute::Full;
        p.framework.name = "megatron";
        const auto megatron = predictMemory(m, c, p);
        p.framework.name = "deepspeed";
        const auto deepspeed = predictMemory(m, c, p);
        for (int s = 0; s < 4; ++s) {
            const double inFlight = 4.0 - s;
            const double output = s == 3 ? 0.0 : tp > 1 ? e * T * h / tp : e * T * h;
            const double input = tp == 1 && s > 0 ? e * T * h : 0.0;
            EXPECT_DOUBLE_EQ(deepspeed.stages[s].inFlight, inFlight) << tp << " " << s;
            EXPECT_DOUBLE_EQ(deepspeed.stages[s].other.commBufferBytes - megatron.stages[s].other.commBufferBytes,
                             inFlight * (output + input))
                << "tp " << tp << ", stage " << s;
        }
    }
}

TEST(MemoryStages, InFlightPerSchedule) {
    Plan p;
    p.pp = 4;
    p.globalBatch = 16;
    p.schedule = Schedule::Gpipe;
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 0), 16);
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 3), 16);
    p.schedule = Schedule::OneFOneB;
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 0), 4);
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 3), 1);
    p.globalBatch = 2;
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 0), 2);
    p.globalBatch = 16;
    p.schedule = Schedule::Interleaved1F1B;
    p.vpp = 2;
    // Megatron: warm-up (4-0-1)*2 + (2-1)*4 = 10 chunks, +1 = 11 chunks of half a stage = 5.5 micro-batches,
    // which is Megatron's penalty 1 + (p-1)/(p v) = 1.375 times p = 5.5.
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 0), 5.5);
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 0), 4 * (1.0 + 3.0 / 8.0));
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 3), 2.5);
}

TEST(MemoryStages, InterleavedWithAsManyMicroBatchesAsStagesFollowsTheFrameworksVersion) {
    // m == p = 4, v = 2. Megatron-LM before core 0.10 (its 2024 code) ran every forward first: 8 chunks, 4
    // micro-batches, on every stage. Since "tunable schedule with overlapping" (4295be1a6c, 2024-11-01) the warm-up is
    // the usual count: stage 0 (4-0-1)*2 + (2-1)*4 = 10 chunks, +1, capped at 8; stage 3 0 + 4 = 4 chunks, +1 = 5 of
    // half a stage = 2.5. PyTorch's ScheduleInterleaved1F1B (torchtitan) never had the exception.
    Plan p;
    p.pp = 4;
    p.vpp = 2;
    p.globalBatch = 4;
    p.schedule = Schedule::Interleaved1F1B;
    p.framework.name = "megatron";
    p.framework.version = "2024";
    EXPECT_TRUE(interleavedAllForwardsFirstWhenMEqualsP(p.framework));
    for (int s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, s), 4.0) << s;
    for (const char* later : {"2025", "core_r0.10.0", ""}) {
        p.framework.version = later;
        EXPECT_FALSE(interleavedAllForwardsFirstWhenMEqualsP(p.framework)) << later;
        EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 0), 4.0) << later;
        EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 3), 2.5) << later;
    }
    p.framework.version = "core_r0.9.0";
    EXPECT_TRUE(interleavedAllForwardsFirstWhenMEqualsP(p.framework));
    p.framework.name = "nemo";
    p.framework.version = "24.09";
    EXPECT_TRUE(interleavedAllForwardsFirstWhenMEqualsP(p.framework));
    p.framework.version = "24.12";
    EXPECT_FALSE(interleavedAllForwardsFirstWhenMEqualsP(p.framework));
    p.framework.name = "torchtitan";
    p.framework.version = "2024";
    EXPECT_FALSE(interleavedAllForwardsFirstWhenMEqualsP(p.framework));
    EXPECT_DOUBLE_EQ(inFlightMicroBatches(p, 3), 2.5);
}

TEST(MemoryActivations, KorthikantiTable2ForMhaWithDropout) {
    // Korthikanti et al. 2022 Table 2, 16-bit activations, per layer:
    //   no parallelism: sbh (34 + 5as/h); TP: sbh (10 + 24/t + 5as/(ht)); TP+SP: sbh/t (34 + 5as/h);
    //   TP + selective: sbh (10 + 24/t); TP+SP+selective: 34 sbh/t; full: 2sbh (here /t with SP).
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 2048);
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double s = 2048, b = 1, h = 1024, a = 16, t = 4;
    Plan p;
    p.flashAttention = false;
    auto act = [&](int tp, bool sp, Recompute rc) {
        Plan q = p;
        q.tp = tp;
        q.sequenceParallel = sp;
        q.recompute = rc;
        return layerActivationBytes(m, q, recipe);
    };
    EXPECT_DOUBLE_EQ(act(1, false, Recompute::None), s * b * h * (34 + 5 * a * s / h));
    EXPECT_DOUBLE_EQ(act(4, false, Recompute::None), s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
    EXPECT_DOUBLE_EQ(act(4, true, Recompute::None), s * b * h / t * (34 + 5 * a * s / h));
    EXPECT_DOUBLE_EQ(act(4, false, Recompute::Selective), s * b * h * (10 + 24 / t));
    EXPECT_DOUBLE_EQ(act(4, true, Recompute::Selective), 34 * s * b * h / t);
    EXPECT_DOUBLE_EQ(act(1, false, Recompute::Full), 2 * s * b * h);
    EXPECT_DOUBLE_EQ(act(4, true, Recompute::Full), 2 * s * b * h / t);
}

TEST(MemoryActivations, FlashAttentionRemovesTheQuadraticTerm) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 4096);
    const auto& recipe = *findPrecisionRecipe("megatron");
    Plan p;
    p.flashAttention = true;
    const double s = 4096, h = 1024, a = 16;
    // 34 sbh plus the fp32 log-sum-exp (4 bytes per query and head); no 5as^2b.
    EXPECT_DOUBLE_EQ(layerActivationBytes(m, p, recipe), 34 * s * h + 4 * a * s);
}

// A parallel block's MLP norm reads the layer input, which the attention's norm already keeps: Korthikanti's 34 sbh
// less the 2 sbh of the second norm's own input (16-bit), in every parallel layout; a full-recompute checkpoint is the
// layer input either way.
TEST(MemoryActivations, AParallelBlockKeepsTheLayerInputOnce) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 4096);
    const auto& recipe = *findPrecisionRecipe("megatron");
    const double s = 4096, h = 1024, a = 16, t = 4;
    Plan p;
    p.flashAttention = true;
    m.parallelResidual = true;
    EXPECT_DOUBLE_EQ(layerActivationBytes(m, p, recipe), 32 * s * h + 4 * a * s);
    p.tp = 4;
    p.sequenceParallel = true;
    EXPECT_DOUBLE_EQ(layerActivationBytes(m, p, recipe), 32 * s * h / t + 4 * a * s / t);
    p.recompute = Recompute::Full;
    EXPECT_DOUBLE_EQ(layerActivationBytes(m, p, recipe), 2 * s * h / t);
}

TEST(MemoryVerdict, OversizedPlanIsOomWithNegativeHeadroomNotAnException) {
    ModelConfig m = test::preset("gpt3-175b");
    ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    c.nodes = 1;
    Plan p;
    p.tp = 8;
    p.globalBatch = 8;
    auto mem = predictMemory(m, c, p);
    EXPECT_FALSE(mem.fits);
    EXPECT_FALSE(mem.stages[0].fits);
    EXPECT_LT(mem.stages[0].headroomBytes, 0.0);
    EXPECT_DOUBLE_EQ(mem.stages[0].headroomBytes, mem.capacityBytes - mem.stages[0].totalBytes());
}

TEST(MemoryDefault, Gpt3OnMegatronPlanFitsOnA100) {
    Scenario s = defaultScenario();
    finishScenario(s);
    auto mem = predictMemory(s.model, s.cluster, s.plan);
    ASSERT_EQ(mem.stages.size(), 8u);
    EXPECT_TRUE(mem.fits);
    EXPECT_EQ(mem.peakStage, 0); // the first stage holds p micro-batches and the embedding
    EXPECT_GT(mem.peakBytes, 40e9);
}

} // namespace
} // namespace tessel

namespace tessel {
// Megatron-LM's block method (plan recompute_layers n, FORMULAS.md §2.3): the first n layers of each chunk keep
// their input, the others everything. By hand on GPT-3 175B's default plan (pp 8, 12 layers a stage): n layers'
// worth of (whole layer + norm statistics - checkpoint) per micro-batch in flight come off no recompute; n at or
// beyond the chunk is full recompute; step time grows with n.
TEST(MemoryPartialRecompute, BetweenNoneAndFullByHandAndFullBeyondTheChunk) {
    Scenario s = defaultScenario();
    finishScenario(s);
    Plan none = s.plan;
    none.recompute = Recompute::None;
    Plan full = s.plan;
    full.recompute = Recompute::Full;
    const auto& recipe = *findPrecisionRecipe(none.precision);
    const MemoryShapeTerms t = memoryShapeTerms(s.model, full, recipe);
    const int perStage = stageLayerCount(s.model, full, 0);
    ASSERT_EQ(perStage, 12);
    const double inFlight = predictMemory(s.model, s.cluster, full).stages[0].inFlight;
    const double noneActs = predictMemory(s.model, s.cluster, none).stages[0].activationsBytes;
    const double fullActs = predictMemory(s.model, s.cluster, full).stages[0].activationsBytes;
    double previous = noneActs;
    for (int n : {1, 4, 11}) {
        Plan q = full;
        q.recomputeLayers = n;
        const double acts = predictMemory(s.model, s.cluster, q).stages[0].activationsBytes;
        EXPECT_NEAR(noneActs - acts, inFlight * n * (t.layerFullActivations + t.keptNormStatistics - t.layerActivations),
                    1e-6 * noneActs) << n;
        EXPECT_LT(acts, previous) << n;
        EXPECT_GT(acts, fullActs) << n;
        previous = acts;
    }
    for (int n : {12, 40}) {
        Plan q = full;
        q.recomputeLayers = n;
        EXPECT_DOUBLE_EQ(predictMemory(s.model, s.cluster, q).stages[0].activationsBytes, fullActs) << n;
    }
    // Only with full recompute.
    ProblemList problems;
    Plan bad = none;
    bad.recomputeLayers = 2;
    validatePlan(s.model, s.cluster, bad, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems.items().front().where, "/plan/recompute_layers");
    // At most a chunk's layers: 12 is every layer of a 12-layer stage; 13 says it would be nothing more.
    Plan whole = full;
    whole.recomputeLayers = 12;
    ProblemList fine;
    validatePlan(s.model, s.cluster, whole, "/plan", fine);
    EXPECT_TRUE(fine.empty());
    Plan beyond = full;
    beyond.recomputeLayers = 13;
    ProblemList over;
    validatePlan(s.model, s.cluster, beyond, "/plan", over);
    ASSERT_EQ(over.items().size(), 1u);
    EXPECT_EQ(over.items().front().where, "/plan/recompute_layers");
    EXPECT_NE(over.items().front().message.find("12 at the most"), std::string::npos) << over.items().front().message;
}

// torch.compile over the whole model as one graph (compile_whole_model; KempnerForge's 7B on one GPU): its backward
// returns every parameter's gradient at once, so from the second micro-batch of accumulation a whole second set of
// the gradients sits beside the accumulated one, with the logits the trainer holds, once the backward has freed its
// activations. Past what the backward held, that raises the peak; nothing splits the graph only at zero 0 and dp 1.
TEST(MemoryPhases, AWholeModelGraphReturnsEveryGradientAtOnce) {
    ModelConfig m = test::preset("llama3-8b");
    m.seqLen = 4096; // KempnerForge's 7B: Llama 3 8B's shape at 4096
    ClusterConfig c = test::roundCluster(2, 1);
    c.gpu.memoryBytes = int64_t{140} << 30;
    Plan p = test::plan3d(1, 1, 1, 2, 8, "torchtitan");
    p.recompute = Recompute::Full;
    p.precision = "bf16_no_master";
    p.vocabDivisibleBy = 1;
    p.framework.logitsHeldThroughBackward = true;
    p.framework.crossEntropy = "eager_16bit";
    const StageMemory eager = predictMemory(m, c, p).stages[0];
    p.framework.compileWholeModel = true;
    const StageMemory whole = predictMemory(m, c, p).stages[0];
    // 8.03 B parameters' bf16 gradients (16.1 GB) and 2 x 4096 bf16 logits of 128,256 (2.1 GB), against the backward's
    // 8192 tokens of layer inputs and the 16-bit loss's four logit-sized tensors: the new phase is the peak.
    const double logits = 2.0 * 2 * static_cast<double>(m.seqLen) * static_cast<double>(m.vocab);
    const double backwardPhase = eager.activationsBytes + eager.other.logitsLossBytes + eager.other.backwardWorkingBytes;
    EXPECT_NEAR(eager.gradsBytes, 2.0 * eager.parameters, 1.0);
    ASSERT_GT(eager.gradsBytes + logits, backwardPhase);
    EXPECT_EQ(eager.other.stepCopyBytes, 0.0);
    EXPECT_NEAR(whole.other.stepCopyBytes, eager.gradsBytes + logits - backwardPhase, 1.0);
    EXPECT_NEAR(whole.totalBytes() - eager.totalBytes(), whole.other.stepCopyBytes, 1.0);
    // Nothing of it where something splits the graph or nothing accumulates: one micro-batch a step (the gradients
    // become .grad), DDP over two ranks (its buckets), FSDP (its units' hooks).
    auto extra = [&](Plan q) { return predictMemory(m, c, q).stages[0].other.stepCopyBytes; };
    Plan one = p;
    one.globalBatch = 2;
    EXPECT_EQ(extra(one), 0.0);
    Plan ddp = p;
    ddp.dp = 2;
    ddp.globalBatch = 16;
    EXPECT_EQ(extra(ddp), 0.0);
    Plan fsdp = ddp;
    fsdp.zeroStage = 3;
    EXPECT_EQ(extra(fsdp), 0.0);
    // The trainer that lets go of the logits (torchtitan's `del pred`) holds the gradients alone.
    Plan released = p;
    released.framework.logitsHeldThroughBackward = false;
    const StageMemory r = predictMemory(m, c, released).stages[0];
    EXPECT_NEAR(r.other.stepCopyBytes,
                std::max(0.0, r.gradsBytes - (r.activationsBytes + r.other.logitsLossBytes + r.other.backwardWorkingBytes)), 1.0);
}
} // namespace tessel
