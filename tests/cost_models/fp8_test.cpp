// FP8 training as Transformer Engine runs it (precision fp8, FORMULAS.md §6.3): its GEMMs at the FP8 peak, its casts
// and weight copies, Blackwell's layouts without transposes, current scaling's amax passes and reductions, the
// sequence-parallel gathers in FP8 and the op fuser's casts in the activation, checked by hand on a small layer
// (compute_support.hpp); NVFP4, its twin, is nvfp4_test.cpp.
#include "compute_support.hpp"
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/comm.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tessel {
namespace {

// The FP8 tests' layer (compute_support.hpp).
using Fp8Case = test::QuantizedLayerCase;

TEST(Fp8, GemmsRunInFp8WithTheirCastsAndTheWeightCopiesAreKept) {
    Fp8Case fc;
    const ModelConfig& m = fc.m;
    const ClusterConfig& c = fc.c;
    Plan& p = fc.p;
    const PrecisionRecipe& bf16 = *findPrecisionRecipe("megatron");
    const PrecisionRecipe& fp8 = *findPrecisionRecipe("fp8");
    ASSERT_TRUE(fp8.fp8());
    EXPECT_EQ(fp8.bytesPerParameter(), bf16.bytesPerParameter()); // same 18 B of model state
    const BlockCompute a = layerCompute(m, c, p, bf16);
    const BlockCompute b = layerCompute(m, c, p, fp8);
    // Each weighted GEMM at twice the peak (perfect efficiency on the round cluster): half the time.
    for (const char* name : {"qkv", "attn_proj", "fc1", "fc2"}) {
        const OpCost* x = nullptr;
        const OpCost* y = nullptr;
        for (const auto& op : a.forwardOps) if (op.name == name) x = &op;
        for (const auto& op : b.forwardOps) if (op.name == name) y = &op;
        ASSERT_TRUE(x && y) << name;
        EXPECT_EQ(*y->dtype, Dtype::Fp8);
        EXPECT_NEAR(y->seconds, std::max(x->flops / 2e15, y->bytes / 2e12), 1e-15) << name;
    }
    // The casts: forward (e + 1) x the bf16 inputs no fused norm casts (the projection's, the activation's output
    // before fc2); backward (e + 2) x outputs + 2 x inputs.
    const OpCost* cast = nullptr;
    for (const auto& op : b.forwardOps) if (op.name == "fp8_casts") cast = &op;
    ASSERT_NE(cast, nullptr);
    const double T = 4096.0, h = 4096.0, t = 2.0;
    EXPECT_DOUBLE_EQ(cast->bytes, 3.0 * (T * h / t + T * 4 * h / t));
    const double outputs = T * (3 * h / t) + T * h + T * (4 * h / t) + T * h;
    const double inputs = T * h + T * (h / t) + T * h + T * (4 * h / t);
    EXPECT_NEAR(cast->bytes * cast->backwardByteFactor, 4.0 * outputs + 2.0 * inputs, 1e-3);
    // Memory: 2 B more per linear weight, GEMM inputs saved at 1 B.
    p.precision = "megatron";
    const StageMemory mb = predictMemory(m, c, p).stages[0];
    p.precision = "fp8";
    const StageMemory mf = predictMemory(m, c, p).stages[0];
    const StageParameters layer = layerParameters(m, p);
    EXPECT_NEAR(mf.weightsBytes - mb.weightsBytes, 2.0 * 4 * layer.dense, 1.0);
    const double Tsp = T / t;
    const double savedInputs = Tsp * h + T * (h / t) + Tsp * h + T * (4 * h / t); // QKV, proj, fc1, fc2 inputs
    // Each saved GEMM input drops a byte an element; the attention output, the projection's input in bf16, is kept
    // by the fused attention in bf16 beside the projection's FP8 copy (2 B + 1 B where bf16 kept the one tensor).
    const double attentionOutput = T * (h / t);
    EXPECT_NEAR(layerActivationBytesNoRecompute(m, Plan(p), bf16) - layerActivationBytesNoRecompute(m, p, fp8),
                savedInputs - 2.0 * attentionOutput, 1.0);
    // A GPU without FP8 refuses the plan at /plan/precision.
    ProblemList problems;
    validatePlan(m, test::clusterPreset("dgx-a100-80g"), p, "/plan", problems);
    bool named = false;
    for (const auto& pr : problems.items()) named |= pr.where == "/plan/precision";
    EXPECT_TRUE(named);
}

// Transformer Engine 2.x keeps no FP8 transpose on a GPU whose FP8 GEMMs take any layout (Blackwell): a linear
// weight's FP8 copy is 1 B, FP8 parameters 1 B where Hopper's are data and transpose (2 B), and the backward casts
// each output gradient once, transposing no saved input. MXFP8 keeps its columnwise copy, as Hopper's transpose.
TEST(Fp8, AGpuWhoseFp8GemmsTakeAnyLayoutKeepsNoTranspose) {
    Fp8Case fc;
    const ModelConfig& m = fc.m;
    Plan& p = fc.p;
    p.precision = "fp8";
    ClusterConfig hopper = fc.c;
    ClusterConfig blackwell = fc.c;
    blackwell.gpu.fp8GemmAnyLayout = true;
    const StageParameters layer = layerParameters(m, p);
    const double linear = 4 * layer.dense; // the stage's four layers; the embedding and head are no FP8 linears
    // The cached copy: 2 B a linear weight on Hopper, 1 on Blackwell.
    const double copies = predictMemory(m, hopper, p).stages[0].weightsBytes - predictMemory(m, blackwell, p).stages[0].weightsBytes;
    EXPECT_NEAR(copies, 1.0 * linear, 1.0);
    // FP8 parameters: the weights themselves, 2 B (data and transpose) on Hopper, 1 on Blackwell.
    p.framework.fp8ParamGather = true;
    EXPECT_NEAR(predictMemory(m, hopper, p).stages[0].weightsBytes - predictMemory(m, blackwell, p).stages[0].weightsBytes,
                1.0 * linear, 1.0);
    // MXFP8 (and blockwise) scaling quantizes a columnwise copy of its own: nothing changes.
    p.framework.fp8Recipe = "mxfp8";
    EXPECT_DOUBLE_EQ(predictMemory(m, hopper, p).stages[0].weightsBytes, predictMemory(m, blackwell, p).stages[0].weightsBytes);
    p.framework.fp8Recipe.reset();
    p.framework.fp8ParamGather.reset();
    // The backward casts: (e + 2) x outputs + 2 x inputs on Hopper, (e + 1) x outputs on Blackwell.
    const PrecisionRecipe& fp8 = *findPrecisionRecipe("fp8");
    auto castBytes = [&](const ClusterConfig& c) {
        for (const auto& op : layerCompute(m, c, p, fp8).forwardOps)
            if (op.name == "fp8_casts") return std::pair<double, double>{op.bytes, op.bytes * op.backwardByteFactor};
        return std::pair<double, double>{0.0, 0.0};
    };
    const double T = 4096.0, h = 4096.0, t = 2.0;
    const double outputs = T * (3 * h / t) + T * h + T * (4 * h / t) + T * h;
    EXPECT_DOUBLE_EQ(castBytes(blackwell).first, castBytes(hopper).first); // the forward casts write no transpose on either
    EXPECT_NEAR(castBytes(blackwell).second, 3.0 * outputs, 1e-3);
    // The recipe says why, and leaves torchao's Float8Linear (which keeps nothing) and non-FP8 recipes alone.
    EXPECT_FALSE(fp8OnGpu(fp8, p.framework, blackwell.gpu).fp8Transposes);
    EXPECT_TRUE(fp8OnGpu(fp8, p.framework, hopper.gpu).fp8Transposes);
    EXPECT_TRUE(fp8OnGpu(*findPrecisionRecipe("fsdp_fp8"), p.framework, blackwell.gpu).fp8Transposes);
    // The optimizer's once-a-step re-cast writes the 1 B copy, not 2 (the simulator's cost table and the search's
    // estimate both take the recipe on the GPU).
    EXPECT_DOUBLE_EQ(kernel_cost::optimizerAuxBytes(1.0, fp8) - kernel_cost::optimizerAuxBytes(1.0, fp8OnGpu(fp8, p.framework, blackwell.gpu)), 1.0);
    // The shipped Blackwell presets say so; Hopper's do not.
    for (const char* name : {"dgx-b200", "gb200-nvl72", "dgx-b300", "gb300-nvl72"})
        EXPECT_TRUE(test::clusterPreset(name).gpu.fp8GemmAnyLayout) << name;
    EXPECT_FALSE(test::clusterPreset("dgx-h100-80g").gpu.fp8GemmAnyLayout);
}

TEST(Fp8, CurrentScalingReadsEveryCastInputAgainForItsAmaxAndReducesItOverTp) {
    Fp8Case fc;
    const ModelConfig& m = fc.m;
    const ClusterConfig& c = fc.c;
    Plan& p = fc.p;
    p.precision = "fp8";
    const PrecisionRecipe& fp8 = *findPrecisionRecipe("fp8");
    auto opOf = [&](const Plan& plan) -> std::optional<OpCost> {
        for (const auto& op : layerCompute(m, c, plan, fp8).forwardOps)
            if (op.name == "fp8_current_scaling") return op;
        return std::nullopt;
    };
    auto amaxReductions = [&](const Plan& plan) {
        std::vector<CommOp> out;
        for (const auto& op : layerCommOps(m, c, plan))
            if (op.name.rfind(kFp8AmaxAllReducePrefix, 0) == 0) out.push_back(op);
        return out;
    };
    // Delayed scaling (unstated or stated), MXFP8 and block scaling take their scales inside the cast: nothing more.
    for (const std::optional<std::string> recipe : {std::optional<std::string>{}, std::optional<std::string>{"delayed"},
                                                    std::optional<std::string>{"mxfp8"}, std::optional<std::string>{"blockwise"}}) {
        Plan q = p;
        q.framework.fp8Recipe = recipe;
        EXPECT_FALSE(opOf(q)) << recipe.value_or("unset");
        EXPECT_TRUE(amaxReductions(q).empty()) << recipe.value_or("unset");
    }
    p.framework.fp8Recipe = "tensorwise";
    const std::optional<OpCost> scaling = opOf(p);
    ASSERT_TRUE(scaling);
    const double T = 4096.0, h = 4096.0, t = 2.0, e = 2.0;
    // Forward: the projection's and fc2's bf16 inputs read once more for their amax (e each); the norms before qkv
    // and fc1 write 16 bits that a cast then reads and writes in FP8 (e + 1), over the gathered T x h each.
    EXPECT_DOUBLE_EQ(scaling->bytes, e * (T * h / t + T * 4 * h / t) + (e + 1.0) * (T * h + T * h));
    // Backward: each GEMM output's gradient read once more (qkv 3h/t, proj h, fc1 4h/t, fc2 h wide).
    const double outputs = T * (3 * h / t) + T * h + T * (4 * h / t) + T * h;
    EXPECT_NEAR(scaling->bytes * scaling->backwardByteFactor, e * outputs, 1e-3);
    // Under SP the qkv and fc1 inputs' amax, and the projection's and fc2's output gradients', are all-reduced over
    // the TP pair: four scalars a layer, each at NCCL's LL latency for 2 ranks on one node (6.6 + 2 x 0.6 us).
    const std::vector<CommOp> reductions = amaxReductions(p);
    ASSERT_EQ(reductions.size(), 4u);
    for (const CommOp& op : reductions) {
        EXPECT_EQ(op.group, GroupKind::Tp);
        EXPECT_EQ(op.bytes, 4.0);
        EXPECT_NEAR(op.cost.seconds, 7.8e-6, 1e-12) << op.name;
    }
    // Without SP each rank casts the whole input itself: no reduction.
    Plan noSp = p;
    noSp.sequenceParallel = false;
    EXPECT_TRUE(amaxReductions(noSp).empty());
    EXPECT_TRUE(opOf(noSp));
}

// Transformer Engine casts before it gathers under sequence parallelism (FP8 since v0.5: the fused norm's FP8
// output, grad_output_preprocess's "FP8 case with gather"; v2's _all_gather_fp8 / _all_gather_mxfp8 /
// _all_gather_fp8_blockwise): per-tensor scaling moves 1 B an element both ways, MXFP8 an E8M0 scale per 32
// with it and the output gradient both ways, 1D block scaling an fp32 scale per 128 the same way. The
// reduce-scatters stay bf16; torchao's Float8 under PyTorch's TP is not Transformer Engine's (its own rule,
// traffic.cpp).
TEST(Fp8, SequenceParallelGathersMoveWhatTransformerEngineCasts) {
    Fp8Case fc;
    Plan bf16 = fc.p;
    bf16.precision = "megatron";
    auto byName = [&](const Plan& plan) { return test::layerCommBytesByName(fc.m, fc.c, plan); };
    const auto a = byName(bf16);
    const double e = 2.0;
    const std::vector<std::tuple<std::optional<std::string>, double, double>> cases{
        {std::nullopt, 1.0, 1.0},
        {std::string("delayed"), 1.0, 1.0},
        {std::string("tensorwise"), 1.0, 1.0},
        {std::string("mxfp8"), 1.0 + 1.0 / 32.0, 2.0 * (1.0 + 1.0 / 32.0)},
        {std::string("blockwise"), 1.0 + 4.0 / 128.0, 2.0 * (1.0 + 4.0 / 128.0)}};
    for (const auto& [scaling, forward, grad] : cases) {
        Plan q = fc.p;
        q.precision = "fp8";
        q.framework.fp8Recipe = scaling;
        const auto b = byName(q);
        const std::string name = scaling.value_or("unset");
        for (const char* blk : {"attn", "mlp"}) {
            const std::string k(blk);
            EXPECT_DOUBLE_EQ(b.at("tp_all_gather_" + k), a.at("tp_all_gather_" + k) * forward / e)
                << name << " " << k;
            EXPECT_DOUBLE_EQ(b.at("tp_all_gather_" + k + "_input_regather"),
                             a.at("tp_all_gather_" + k + "_input_regather") * forward / e)
                << name << " " << k;
            EXPECT_DOUBLE_EQ(b.at("tp_all_gather_" + k + "_grad"),
                             a.at("tp_all_gather_" + k + "_grad") * grad / e)
                << name << " " << k;
            EXPECT_DOUBLE_EQ(b.at("tp_reduce_scatter_" + k), a.at("tp_reduce_scatter_" + k))
                << name << " " << k;
            EXPECT_DOUBLE_EQ(b.at("tp_reduce_scatter_" + k + "_grad"),
                             a.at("tp_reduce_scatter_" + k + "_grad"))
                << name << " " << k;
        }
    }
    // torchao's Float8 (fsdp_fp8) under PyTorch's TP casts only the forward input (1 B), the gradients in
    // bf16.
    Plan torchao = fc.p;
    torchao.framework.name = "torchtitan";
    torchao.precision = "fsdp_fp8";
    Plan torchaoBf16 = torchao;
    torchaoBf16.precision = "fsdp";
    const auto t8 = byName(torchao), tb = byName(torchaoBf16);
    EXPECT_DOUBLE_EQ(t8.at("tp_all_gather_mlp"), tb.at("tp_all_gather_mlp") / e);
    EXPECT_DOUBLE_EQ(t8.at("tp_all_gather_mlp_grad"), tb.at("tp_all_gather_mlp_grad"));
}

// Transformer Engine's op fuser (te_op_fuser, FORMULAS.md §6.3): the MLP's activation kernel quantizes fc2's input
// and fc1's output gradient itself under delayed scaling and MXFP8 (TE's FULLY_FUSED activations), so their cast
// kernels go and the activation writes the quantized copies in place of 16 bits: 2e bytes an element saved each way;
// under current scaling and NVFP4 without the Hadamard transform it takes their amax (FUSED_ACTIVATION_AMAX_*), so
// only the amax passes go. By hand on the FP8 tests' layer: T = 4096 tokens, GELU over 4h / tp = 8192 columns.
TEST(Fp8, TheOpFuserQuantizesInTheActivation) {
    Fp8Case fc;
    const double T = 4096.0, ffn = 4.0 * 4096.0 / 2.0, e = 2.0;
    const double fc2In = T * ffn, fc1Out = T * ffn;
    auto bytesOf = [&](const Plan& plan, const std::string& name) {
        for (const auto& op : layerCompute(fc.m, fc.c, plan, precisionRecipeOf(plan)).forwardOps)
            if (op.name == name) return std::make_pair(op.bytes, op.bytes * op.backwardByteFactor);
        return std::make_pair(0.0, 0.0);
    };
    auto pair = [&](Plan plan) {
        Plan on = plan;
        on.framework.teOpFuser = true;
        return std::make_pair(plan, on);
    };
    Plan p = fc.p;
    p.precision = "fp8";
    ASSERT_TRUE(fp8OnGpu(precisionRecipeOf(p), p.framework, fc.c.gpu).fp8Transposes); // Hopper-like: transposes
    {
        // Delayed scaling: fc2's input cast (e + 1) and fc1's output-gradient cast and transpose (e + 2) go; the
        // activation writes 1 B forward and the gradient and its transpose, 2 B, backward, in place of e.
        const auto [off, on] = pair(p);
        const auto castOff = bytesOf(off, "fp8_casts"), castOn = bytesOf(on, "fp8_casts");
        EXPECT_DOUBLE_EQ(castOn.first, castOff.first - (e + 1.0) * fc2In);
        EXPECT_DOUBLE_EQ(castOn.second, castOff.second - (e + 2.0) * fc1Out);
        const auto actOff = bytesOf(off, "gelu"), actOn = bytesOf(on, "gelu");
        EXPECT_DOUBLE_EQ(actOn.first, actOff.first + (1.0 - e) * fc2In);
        EXPECT_DOUBLE_EQ(actOn.second, actOff.second + (2.0 - e) * fc1Out);
        // 2e an element each way, 134 MB forward on this layer.
        EXPECT_DOUBLE_EQ((castOff.first + actOff.first) - (castOn.first + actOn.first), 134217728.0);
    }
    {
        // Current scaling: the amax of fc2's input and of fc1's output gradient taken in the activation.
        Plan cs = p;
        cs.framework.fp8Recipe = "tensorwise";
        const auto [off, on] = pair(cs);
        const auto amaxOff = bytesOf(off, "fp8_current_scaling"), amaxOn = bytesOf(on, "fp8_current_scaling");
        EXPECT_DOUBLE_EQ(amaxOn.first, amaxOff.first - e * fc2In);
        EXPECT_DOUBLE_EQ(amaxOn.second, amaxOff.second - e * fc1Out);
        EXPECT_EQ(bytesOf(on, "fp8_casts"), bytesOf(off, "fp8_casts"));
        EXPECT_EQ(bytesOf(on, "gelu"), bytesOf(off, "gelu"));
    }
    {
        // Block scaling quantizes unfused: nothing moves; nor does a 16-bit plan.
        Plan block = p;
        block.framework.fp8Recipe = "blockwise";
        const auto [off, on] = pair(block);
        EXPECT_EQ(bytesOf(on, "fp8_casts"), bytesOf(off, "fp8_casts"));
        EXPECT_EQ(bytesOf(on, "gelu"), bytesOf(off, "gelu"));
        Plan bf16 = fc.p;
        bf16.precision = "megatron";
        const auto [b0, b1] = pair(bf16);
        EXPECT_EQ(bytesOf(b1, "gelu"), bytesOf(b0, "gelu"));
    }
    {
        // NVFP4 without the Hadamard transform: the amax passes go; with it the quantizer takes them (unfused).
        Plan fp4 = fc.p;
        fp4.precision = "nvfp4";
        fp4.framework.nvfp4Rht = false;
        const auto [off, on] = pair(fp4);
        const auto castOff = bytesOf(off, "nvfp4_casts"), castOn = bytesOf(on, "nvfp4_casts");
        EXPECT_DOUBLE_EQ(castOn.first, castOff.first - e * fc2In);
        EXPECT_NEAR(castOn.second, castOff.second - e * fc1Out, 1e-6 * castOff.second);
        fp4.framework.nvfp4Rht = true;
        const auto [rOff, rOn] = pair(fp4);
        EXPECT_EQ(bytesOf(rOn, "nvfp4_casts"), bytesOf(rOff, "nvfp4_casts"));
    }
}

} // namespace
} // namespace tessel
