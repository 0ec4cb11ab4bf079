// What each group moves per layer (traffic.cpp), by hand: sequence-parallel TP as Megatron-LM / Transformer Engine
// run it (backward re-gathers the sharded GEMM inputs) and as torchtitan's DTensor plan does (autograd keeps the
// gathered input; float8 linears gather their input in float8).
#include "test_support.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/shapes.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace tessel {
namespace {

struct TpCase {
    ModelConfig model = test::preset("llama3-8b");
    ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    Plan plan;
    TpCase(const std::string& framework, const std::string& precision, Recompute recompute) {
        plan.tp = 8;
        plan.dp = 1;
        plan.microBatch = 2;
        plan.globalBatch = 2;
        plan.sequenceParallel = true;
        plan.recompute = recompute;
        plan.precision = precision;
        plan.framework.name = framework;
    }
    // Bytes of one full hidden state of the rank's tokens at `bytesPerElement`: 2 x 8192 tokens x 4096.
    double hiddenState(double bytesPerElement) const {
        const LocalShapes s = localShapes(model, plan, precisionRecipeOf(plan));
        EXPECT_EQ(s.tokens, 2 * 8192);
        return bytesPerElement * static_cast<double>(s.tokens) * static_cast<double>(s.hidden);
    }
    std::map<std::string, double> bytesByName() const {
        std::map<std::string, double> out;
        for (const auto& op : layerCommOps(model, cluster, plan)) out[op.name] = op.bytes;
        return out;
    }
};

// A collective pipelined with its GEMM in 4 chunks: one chunk of the collective under a longer GEMM; the
// difference and one chunk of the GEMM where the collective is the longer; one chunk of either when they are equal.
TEST(Traffic, APipelinedCollectiveAddsWhatOutlastsItsGemm) {
    EXPECT_DOUBLE_EQ(pipelinedCollectiveExposedSeconds(3.0, 1.0, 4), 0.25);
    EXPECT_DOUBLE_EQ(pipelinedCollectiveExposedSeconds(1.0, 3.0, 4), 3.0 - 1.0 + 0.25);
    EXPECT_DOUBLE_EQ(pipelinedCollectiveExposedSeconds(2.0, 2.0, 4), 0.5);
    EXPECT_DOUBLE_EQ(pipelinedCollectiveExposedSeconds(2.0, 0.0, 4), 0.0);
    EXPECT_DOUBLE_EQ(pipelinedCollectiveExposedSeconds(0.0, 2.0, 4), 2.0);
}

TEST(Traffic, MegatronRegathersTheSequenceParallelInputsForTheWeightGradients) {
    for (const char* precision : {"megatron", "fp8"}) {
        const TpCase c("megatron", precision, Recompute::Full);
        const auto ops = c.bytesByName();
        const double a = c.hiddenState(2.0);
        // Transformer Engine gathers FP8 (1 B an element) under FP8; its reduce-scatters stay bf16.
        const double gathered = std::string(precision) == "fp8" ? c.hiddenState(1.0) : a;
        ASSERT_EQ(ops.size(), 10u) << precision;
        for (const char* blk : {"attn", "mlp"}) {
            const std::string b = blk;
            EXPECT_EQ(ops.at("tp_all_gather_" + b), gathered) << precision;
            EXPECT_EQ(ops.at("tp_reduce_scatter_" + b), a);
            EXPECT_EQ(ops.at("tp_all_gather_" + b + "_grad"), gathered) << precision;
            EXPECT_EQ(ops.at("tp_reduce_scatter_" + b + "_grad"), a);
            EXPECT_EQ(ops.at("tp_all_gather_" + b + "_input_regather"), gathered) << precision;
        }
    }
}

TEST(Traffic, TorchtitanKeepsTheGatheredInputAndGathersFloat8InFloat8) {
    // bf16, full checkpointing: the recomputed forward gathers again (simulate.cpp replays the forward's
    // collectives), and its output is what the backward uses; nothing is re-gathered.
    {
        const TpCase c("torchtitan", "fsdp", Recompute::Full);
        const auto ops = c.bytesByName();
        EXPECT_EQ(ops.size(), 8u);
        EXPECT_EQ(ops.count("tp_all_gather_attn_input_regather"), 0u);
        EXPECT_EQ(ops.at("tp_all_gather_mlp"), c.hiddenState(2.0));
    }
    // Per-op selective checkpointing saves matmul outputs and reduce-scatters, not the all-gathers: the backward
    // replays them.
    {
        const TpCase c("torchtitan", "fsdp", Recompute::Selective);
        const auto ops = c.bytesByName();
        EXPECT_EQ(ops.size(), 10u);
        EXPECT_EQ(ops.at("tp_all_gather_attn_input_regather"), c.hiddenState(2.0));
    }
    // Float8 linears: the attention and MLP inputs are cast to float8 before their all-gather (1 byte an element);
    // the gradients still move in bf16.
    {
        const TpCase c("torchtitan", "fsdp_fp8", Recompute::Full);
        const auto ops = c.bytesByName();
        ASSERT_EQ(ops.size(), 8u);
        for (const char* blk : {"attn", "mlp"}) {
            const std::string b = blk;
            EXPECT_EQ(ops.at("tp_all_gather_" + b), c.hiddenState(1.0));
            EXPECT_EQ(ops.at("tp_reduce_scatter_" + b), c.hiddenState(2.0));
            EXPECT_EQ(ops.at("tp_all_gather_" + b + "_grad"), c.hiddenState(2.0));
            EXPECT_EQ(ops.at("tp_reduce_scatter_" + b + "_grad"), c.hiddenState(2.0));
        }
    }
}

// A parallel block (GPT-NeoX's gpt_j_residual): where the framework sums the attention's and the MLP's row-parallel
// outputs before reducing (GPT-NeoX, read as deepspeed with pp > 1), one reduction forward, the MLP's, of the same
// bytes; with sequence parallelism its gradient's one gather backward too. Each column-parallel block keeps its
// input-gradient reduction. Where each row-parallel linear reduces its own output (Megatron-core, NeMo's Falcon,
// DeepSpeed's AutoTP at pp 1), nothing changes.
TEST(Traffic, AParallelBlockReducesOnceWhereTheFrameworkSumsFirst) {
    for (const bool sp : {false, true}) {
        TpCase sequential("deepspeed", "megatron", Recompute::Full);
        sequential.plan.sequenceParallel = sp;
        sequential.plan.pp = 2;
        TpCase parallel = sequential;
        parallel.model.parallelResidual = true;
        const auto before = sequential.bytesByName(), after = parallel.bytesByName();
        const double a = sequential.hiddenState(2.0);
        const std::vector<std::string> gone = sp ? std::vector<std::string>{"tp_reduce_scatter_attn", "tp_all_gather_attn_grad"}
                                                 : std::vector<std::string>{"tp_all_reduce_attn"};
        ASSERT_EQ(after.size(), before.size() - gone.size()) << sp;
        for (const auto& name : gone) {
            EXPECT_EQ(before.at(name), a) << name;
            EXPECT_EQ(after.count(name), 0u) << name;
        }
        for (const auto& [name, bytes] : after) EXPECT_EQ(before.at(name), bytes) << name; // the rest as before
        EXPECT_EQ(after.at(sp ? "tp_reduce_scatter_mlp" : "tp_all_reduce_mlp"), a);
        EXPECT_EQ(after.count(sp ? "tp_reduce_scatter_attn_grad" : "tp_all_reduce_attn_grad"), 1u);

        TpCase megatron = parallel;
        megatron.plan.framework.name = "megatron";
        TpCase megatronSequential = sequential;
        megatronSequential.plan.framework.name = "megatron";
        EXPECT_EQ(megatron.bytesByName(), megatronSequential.bytesByName()) << sp;
        TpCase autoTp = parallel; // DeepSpeed at pp 1: AutoTP's LinearAllreduce on each block
        autoTp.plan.pp = 1;
        TpCase autoTpSequential = sequential;
        autoTpSequential.plan.pp = 1;
        EXPECT_EQ(autoTp.bytesByName(), autoTpSequential.bytesByName()) << sp;
    }
}

TEST(Traffic, SequenceParallelTrafficRules) {
    const ModelConfig llama = test::preset("llama3-8b");   // SwiGLU, dense: torchtitan's per-op policy applies
    const ModelConfig gpt = test::preset("gpt3-1.3b");     // GELU: its selective recompute is core attention only
    const PrecisionRecipe bf16 = precisionRecipeOf("fsdp", {});
    const PrecisionRecipe fp8 = precisionRecipeOf("fsdp_fp8", {});
    const PrecisionRecipe te = precisionRecipeOf("fp8", {});
    Plan p;
    for (const char* pytorch : {"torchtitan", "fsdp"}) {
        p.framework.name = pytorch;
        p.recompute = Recompute::None;
        EXPECT_FALSE(sequenceParallelTraffic(llama, p, bf16, 2.0).backwardRegathersInputs) << pytorch;
        EXPECT_EQ(sequenceParallelTraffic(llama, p, bf16, 2.0).forwardGatherBytesPerElement, 2.0);
        EXPECT_EQ(sequenceParallelTraffic(llama, p, fp8, 2.0).forwardGatherBytesPerElement, 1.0);
        EXPECT_EQ(sequenceParallelTraffic(llama, p, te, 2.0).forwardGatherBytesPerElement, 2.0); // TE's FP8 gathers bf16
        p.recompute = Recompute::Full;
        EXPECT_FALSE(sequenceParallelTraffic(llama, p, bf16, 2.0).backwardRegathersInputs);
    }
    p.framework.name = "torchtitan";
    p.recompute = Recompute::Selective;
    EXPECT_TRUE(sequenceParallelTraffic(llama, p, bf16, 2.0).backwardRegathersInputs);
    EXPECT_FALSE(sequenceParallelTraffic(gpt, p, bf16, 2.0).backwardRegathersInputs);
    for (const char* other : {"generic", "megatron", "nemo", "megascale", "deepspeed"}) {
        p.framework.name = other;
        EXPECT_TRUE(sequenceParallelTraffic(llama, p, fp8, 2.0).backwardRegathersInputs) << other;
        EXPECT_EQ(sequenceParallelTraffic(llama, p, fp8, 2.0).forwardGatherBytesPerElement, 2.0) << other;
    }
}

// The scatter-gather optimization (SC'21 §4.1): Megatron-LM 2021-22 and DeepSpeed's pipeline engine send 1/tp of the
// hidden state between stages and the receiver all-gathers it over TP; sequence parallelism (already 1/tp), one TP
// rank, and Megatron-core (2023 on, or a record without a year) send the whole tensor and gather nothing.
TEST(Traffic, PipelineScatterGatherSendsATensorParallelShareAndGathersIt) {
    auto framework = [](const char* name, const char* version) {
        FrameworkSettings f;
        f.name = name;
        f.version = version;
        return f;
    };
    EXPECT_TRUE(pipelineScatterGatherOf(framework("megatron", "2021"), 8, false));
    EXPECT_TRUE(pipelineScatterGatherOf(framework("megatron", "2022"), 8, false));
    EXPECT_TRUE(pipelineScatterGatherOf(framework("deepspeed", ""), 4, false));
    EXPECT_FALSE(pipelineScatterGatherOf(framework("megatron", "2023"), 8, false));
    EXPECT_FALSE(pipelineScatterGatherOf(framework("megatron", ""), 8, false));
    EXPECT_FALSE(pipelineScatterGatherOf(framework("megatron", "2022"), 8, true));
    EXPECT_FALSE(pipelineScatterGatherOf(framework("deepspeed", ""), 1, false));
    EXPECT_FALSE(pipelineScatterGatherOf(framework("nemo", "24.07"), 8, false));

    // GPT-3 175B at tp 8, micro-batch 1: the hidden state is 2 x 2048 x 12288 bytes.
    const ModelConfig model = test::preset("gpt3-175b");
    const ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    Plan plan = test::plan3d(8, 8, 1, 1, 8, "megatron", "2021");
    const double hidden = 2.0 * 2048.0 * 12288.0;
    std::map<std::string, CommOp> ops;
    for (const auto& op : pipelineCommOps(model, cluster, plan)) ops[op.name] = op;
    ASSERT_EQ(ops.size(), 4u);
    EXPECT_DOUBLE_EQ(ops.at("pp_send_activation").bytes, hidden / 8.0);
    EXPECT_DOUBLE_EQ(ops.at("pp_send_grad").bytes, hidden / 8.0);
    EXPECT_DOUBLE_EQ(ops.at("pp_all_gather_activation").bytes, hidden);
    EXPECT_EQ(ops.at("pp_all_gather_grad").group, GroupKind::Tp);
    plan.framework.version = "2024";
    ops.clear();
    for (const auto& op : pipelineCommOps(model, cluster, plan)) ops[op.name] = op;
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_DOUBLE_EQ(ops.at("pp_send_activation").bytes, hidden);
}

// DeepSpeed's BF16 optimizer all-reduces its fp32 gradients over data parallelism and then all-gathers the updated
// bf16 partitions (_bf16_reduce_grads); Megatron's distributed optimizer reduce-scatters them (DeepSpeed's own
// ZeRO-1 for fp16 depends on its version: the next test).
// GPT-3 175B on DGX A100 under DeepSpeed 2022's pipeline engine, tp 8 pp 8 dp 4, bf16 (BF16_Optimizer).
Plan deepSpeedBf16Plan() {
    Plan plan = test::plan3d(8, 8, 4, 1, 64, "deepspeed", "2022");
    plan.zeroStage = 1;
    plan.precision = "megatron";
    return plan;
}

TEST(Traffic, DeepSpeedsBf16OptimizerAllReducesItsGradients) {
    const ModelConfig model = test::preset("gpt3-175b");
    const ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    Plan plan = deepSpeedBf16Plan();
    auto names = [&] {
        std::map<std::string, CommOp> ops;
        for (const auto& op : dataParallelCommOps(model, cluster, plan, 1)) ops[op.name] = op;
        return ops;
    };
    const auto bf16 = names();
    ASSERT_TRUE(bf16.count("dp_all_reduce_grads_dense"));
    EXPECT_FALSE(bf16.count("dp_reduce_scatter_grads_dense"));
    EXPECT_TRUE(bf16.count("dp_all_gather_params_dense"));
    EXPECT_EQ(gradReducePrimitive(plan, precisionRecipeOf(plan)), Primitive::AllReduce);
    plan.framework.name = "megatron";
    EXPECT_EQ(gradReducePrimitive(plan, precisionRecipeOf(plan)), Primitive::ReduceScatter);
    EXPECT_TRUE(names().count("dp_reduce_scatter_grads_dense"));
    plan.zeroStage = 0;
    EXPECT_EQ(gradReducePrimitive(plan, precisionRecipeOf(plan)), Primitive::AllReduce);
}

// DeepSpeed's ZeRO-1 for fp16 ran with contiguous_gradients forced off from v0.4.4 (2021-07) to v0.13.0 (2024-01), so
// each bucket went to allreduce_bucket, whose `rank = None` made it an all-reduce of the whole gradient; before it
// (stage1.py, DeepSpeed 0.3) and after it (average_tensor) each rank's partition is reduced: a reduce-scatter.
TEST(Traffic, DeepSpeedsZero1AllReducedItsGradientsFrom2021To2023) {
    const ModelConfig model = test::preset("gpt3-175b");
    const ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    Plan plan = deepSpeedBf16Plan();
    plan.precision = "mixed"; // fp16 / bf16 gradients inside the ZeRO optimizer, not BF16_Optimizer
    auto primitiveAt = [&](const std::string& version) {
        plan.framework.version = version;
        return gradReducePrimitive(plan, precisionRecipeOf(plan));
    };
    for (const char* v : {"2021", "2022", "2023", "0.6.0", "0.12.6"}) EXPECT_EQ(primitiveAt(v), Primitive::AllReduce) << v;
    for (const char* v : {"2020", "0.3.15", "2024", "0.13.0", ""}) EXPECT_EQ(primitiveAt(v), Primitive::ReduceScatter) << v;
    // The all-reduce moves the whole gradient twice over the ring, the reduce-scatter once: 2 (N - 1) / N against
    // (N - 1) / N of the same bytes, and the updated weights are gathered after either.
    plan.framework.version = "2022";
    std::map<std::string, CommOp> ops;
    for (const auto& op : dataParallelCommOps(model, cluster, plan, 1)) ops[op.name] = op;
    ASSERT_TRUE(ops.count("dp_all_reduce_grads_dense"));
    EXPECT_TRUE(ops.count("dp_all_gather_params_dense"));
    EXPECT_DOUBLE_EQ(ops.at("dp_all_reduce_grads_dense").bytes, 2.0 * stageParameters(model, plan, 1).dense);
    // A stated contiguous_gradients does not move ZeRO-1 in those years (the engine overrode it), and from 2024 a
    // stated false all-reduces again (buffered_reduce_fallback); so does the optimizer on the host never.
    plan.framework.contiguousGradients = true;
    EXPECT_EQ(primitiveAt("2022"), Primitive::AllReduce);
    plan.framework.contiguousGradients = false;
    EXPECT_EQ(primitiveAt("2024"), Primitive::AllReduce);
    EXPECT_EQ(primitiveAt("0.3.15"), Primitive::ReduceScatter); // stage1.py
    plan.offloadOptimizer = true;
    EXPECT_EQ(primitiveAt("2022"), Primitive::ReduceScatter);
    plan.offloadOptimizer = false;
    plan.framework.contiguousGradients.reset();
    // Megatron-LM's optimizer reduce-scatters whatever its year.
    plan.framework.version = "2022";
    plan.framework.name = "megatron";
    EXPECT_EQ(gradReducePrimitive(plan, precisionRecipeOf(plan)), Primitive::ReduceScatter);
}

// DeepSpeed's ZeRO-2 reduces each micro-batch's gradients; with contiguous_gradients off (its default before v0.5.0,
// 2021-08, or stated) each bucket is all-reduced, twice the bytes of the reduce-scatter over the ring.
TEST(Traffic, DeepSpeedsZero2AllReducesWithoutContiguousGradients) {
    const ModelConfig model = test::preset("gpt3-175b");
    const ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    Plan plan = test::plan3d(1, 1, 64, 1, 256, "deepspeed", "2020");
    plan.zeroStage = 2;
    plan.precision = "mixed";
    auto reduceOf = [&] {
        for (const auto& op : dataParallelCommOps(model, cluster, plan, 0))
            if (op.name == "dp_all_reduce_grads_dense" || op.name == "dp_reduce_scatter_grads_dense") return op;
        return CommOp{};
    };
    EXPECT_EQ(reduceOf().name, "dp_all_reduce_grads_dense");
    EXPECT_EQ(reduceOf().phase, CommPhase::PerMicroBatch);
    for (const char* v : {"0.4.2", "2020"}) {
        plan.framework.version = v;
        EXPECT_FALSE(deepSpeedContiguousGradientsOf(plan.framework, 2, false)) << v;
        EXPECT_EQ(reduceOf().primitive, Primitive::AllReduce) << v;
    }
    for (const char* v : {"0.5.0", "2022", ""}) {
        plan.framework.version = v;
        EXPECT_TRUE(deepSpeedContiguousGradientsOf(plan.framework, 2, false)) << v;
        EXPECT_EQ(reduceOf().name, "dp_reduce_scatter_grads_dense") << v;
    }
    plan.framework.contiguousGradients = false; // stated in the config
    EXPECT_EQ(reduceOf().primitive, Primitive::AllReduce);
    plan.framework.version = "2020";
    plan.framework.contiguousGradients = true;
    EXPECT_EQ(reduceOf().primitive, Primitive::ReduceScatter);
}

// DeepSpeed's engine casts the BF16_Optimizer's fp32 gradients to its communication_data_type, bf16 by default, so
// the all-reduce moves 2 B a parameter while the fp32 buffer is 4 B; the tied-embedding sync all-reduces the fp32
// _hp_grad itself.
TEST(Traffic, DeepSpeedsBf16OptimizerReducesInBf16) {
    const ModelConfig model = test::preset("gpt3-175b");
    const ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    Plan plan = deepSpeedBf16Plan();
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    EXPECT_EQ(recipe.gradBytes, 4);
    EXPECT_EQ(recipe.gradReduceBytes(), 2);
    const double params = stageParameters(model, plan, 1).dense;
    auto reduced = [&](const Plan& p) {
        for (const auto& op : dataParallelCommOps(model, cluster, p, 1))
            if (op.name == "dp_all_reduce_grads_dense" || op.name == "dp_reduce_scatter_grads_dense") return op.bytes;
        return -1.0;
    };
    EXPECT_DOUBLE_EQ(reduced(plan), 2.0 * params);
    // Without a pipeline DeepSpeed's ZeRO optimizers reduce in the same communication_data_type (stage_1_and_2.py
    // average_tensor, stage3.py __avg_scatter_grads): 2 B a parameter at ZeRO-1, 2 and 3 alike.
    Plan flat = plan;
    flat.pp = 1;
    flat.dp = 32;
    for (int z : {1, 2, 3}) {
        flat.zeroStage = z;
        EXPECT_EQ(precisionRecipeOf(flat).gradReduceBytes(), 2) << z;
    }
    // Megatron-LM reduces its fp32 main gradients at their width.
    Plan megatron = plan;
    megatron.framework.name = "megatron";
    EXPECT_EQ(precisionRecipeOf(megatron).gradReduceBytes(), precisionRecipeOf(megatron).gradBytes);
}

} // namespace
} // namespace tessel
