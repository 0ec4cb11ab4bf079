// NVFP4 training as Transformer Engine runs it (precision nvfp4, FORMULAS.md §2 and §3.6): its GEMMs at the GPU's
// fp4 peak, its casts, its weight copies and saved inputs, its switches in the plan, and the GPUs that can run it,
// checked by hand on the FP8 tests' layer.
#include "compute_support.hpp"
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/parameters.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>

namespace tessel {
namespace {

// The FP8 tests' layer (compute_support.hpp), in NVFP4.
struct Nvfp4Case : test::QuantizedLayerCase {
    Nvfp4Case() { p.precision = "nvfp4"; }
    std::optional<OpCost> op(const Plan& plan, const std::string& name) const {
        for (const auto& o : layerCompute(m, c, plan, precisionRecipeOf(plan)).forwardOps)
            if (o.name == name) return o;
        return std::nullopt;
    }
};

constexpr double T = 4096.0, h = 4096.0, t = 2.0, e = 2.0;
constexpr double q = 0.5 + 1.0 / 16.0; // one NVFP4 copy: E2M1 data and an E4M3 scale per 16 elements
// The layer's GEMM inputs and outputs on a rank: qkv (gathered T x h in, 3h/t out), the projection (h/t in, h out),
// fc1 (gathered T x h in, 4h/t out), fc2 (4h/t in, h out).
constexpr double inputs = T * h + T * (h / t) + T * h + T * (4 * h / t);
constexpr double outputs = T * (3 * h / t) + T * h + T * (4 * h / t) + T * h;

TEST(NvFp4, TheRecipeKeepsMegatronsStateAndQuantizesItsLinearsTo4Bits) {
    const PrecisionRecipe& r = *findPrecisionRecipe("nvfp4");
    EXPECT_TRUE(r.fp4());
    EXPECT_TRUE(r.quantizedGemms());
    EXPECT_FALSE(r.fp8());
    EXPECT_EQ(r.gemmDtype, Dtype::Fp4);
    EXPECT_EQ(r.computeDtype, Dtype::Bf16);
    EXPECT_EQ(r.bytesPerParameter(), findPrecisionRecipe("megatron")->bytesPerParameter()); // 18 B of model state
    EXPECT_DOUBLE_EQ(r.quantizedBytes(), 0.5625);
    EXPECT_DOUBLE_EQ(r.quantizedWeightCopyBytes, 1.125); // rowwise and columnwise copies
    EXPECT_DOUBLE_EQ(bytesPerElement(Dtype::Fp4), 0.5);
    EXPECT_EQ(toString(Dtype::Fp4), "fp4");
    // NVFP4 parameters: no copies beside them, the rowwise half-byte data gathered.
    FrameworkSettings f;
    f.name = "megatron";
    f.fp4ParamGather = true;
    const PrecisionRecipe params = precisionRecipeOf("nvfp4", f, 1);
    EXPECT_TRUE(params.quantizedParams);
    EXPECT_DOUBLE_EQ(params.quantizedWeightCopyBytes, 0.0);
    EXPECT_DOUBLE_EQ(params.paramGatherBytes(), 0.5);
    EXPECT_DOUBLE_EQ(params.quantizedParamBytes(), 1.125);
    // fp8_param_gather is FP8's: it does nothing to an NVFP4 plan.
    FrameworkSettings fp8Params;
    fp8Params.name = "megatron";
    fp8Params.fp8ParamGather = true;
    EXPECT_FALSE(precisionRecipeOf("nvfp4", fp8Params, 1).quantizedParams);
}

TEST(NvFp4, GemmsRunAtTheFp4PeakAndTheCastsAreWhatTransformerEngineMoves) {
    Nvfp4Case nc;
    Plan fp8Plan = nc.p;
    fp8Plan.precision = "fp8";
    for (const char* name : {"qkv", "attn_proj", "fc1", "fc2"}) {
        const std::optional<OpCost> x = nc.op(fp8Plan, name), y = nc.op(nc.p, name);
        ASSERT_TRUE(x && y) << name;
        EXPECT_EQ(*y->dtype, Dtype::Fp4);
        EXPECT_DOUBLE_EQ(y->flops, x->flops) << name;
        EXPECT_NEAR(y->seconds, std::max(y->flops / 4e15, y->bytes / 2e12), 1e-15) << name;
    }
    // Forward: every input read and written twice (e + 2q), and read once more for its amax: with the Hadamard
    // transform (Transformer Engine's default) no norm takes it.
    const std::optional<OpCost> cast = nc.op(nc.p, "nvfp4_casts");
    ASSERT_TRUE(cast);
    EXPECT_FALSE(nc.op(nc.p, "fp8_casts"));
    EXPECT_NEAR(cast->bytes, (e + 2 * q) * inputs + e * inputs, 1e-3);
    // Backward: each output gradient's amax pass (e) and its stochastically rounded casts, at 4.5 of 6.4 TB/s.
    EXPECT_NEAR(cast->bytes * cast->backwardByteFactor, e * outputs + (e + 2 * q) * outputs * 6.4 / 4.5, 1e-3);
    // Without the transform the norms before qkv and fc1 take their amax; without stochastic rounding the gradients'
    // casts run at the cast's own rate.
    Plan vanilla = nc.p;
    vanilla.framework.nvfp4Rht = false;
    vanilla.framework.nvfp4StochasticRounding = false;
    const std::optional<OpCost> plain = nc.op(vanilla, "nvfp4_casts");
    ASSERT_TRUE(plain);
    EXPECT_NEAR(plain->bytes, (e + 2 * q) * inputs + e * (T * (h / t) + T * (4 * h / t)), 1e-3);
    EXPECT_NEAR(plain->bytes * plain->backwardByteFactor, (2 * e + 2 * q) * outputs, 1e-3);
    EXPECT_DOUBLE_EQ(kernel_cost::nvfp4CastBackwardBytes(1.0, 2, q, true), 2.0 + 3.125 * 6.4 / 4.5);
}

TEST(NvFp4, SequenceParallelGathersMoveNvfp4AndTheirAmaxIsAllReducedFirst) {
    Nvfp4Case nc;
    Plan bf16 = nc.p;
    bf16.precision = "megatron";
    const auto a = test::layerCommBytesByName(nc.m, nc.c, bf16),
               b = test::layerCommBytesByName(nc.m, nc.c, nc.p);
    // The QKV and fc1 inputs gathered as one NVFP4 copy, the projection's and fc2's output gradients as both; the
    // reduce-scatters in bf16.
    EXPECT_DOUBLE_EQ(b.at("tp_all_gather_attn"), a.at("tp_all_gather_attn") * q / e);
    EXPECT_DOUBLE_EQ(b.at("tp_all_gather_mlp_input_regather"),
                     a.at("tp_all_gather_mlp_input_regather") * q / e);
    EXPECT_DOUBLE_EQ(b.at("tp_all_gather_mlp_grad"), a.at("tp_all_gather_mlp_grad") * 2 * q / e);
    EXPECT_DOUBLE_EQ(b.at("tp_reduce_scatter_mlp"), a.at("tp_reduce_scatter_mlp"));
    // Each gathered tensor's amax all-reduced over TP before its cast: four scalars a layer (none in bf16, none
    // without SP).
    int amax = 0;
    for (const auto& [name, op] : b) amax += name.rfind(kFp8AmaxAllReducePrefix, 0) == 0 ? 1 : 0;
    EXPECT_EQ(amax, 4);
    for (const auto& [name, op] : a) EXPECT_NE(name.rfind(kFp8AmaxAllReducePrefix, 0), 0u) << name;
    Plan noSp = nc.p;
    noSp.sequenceParallel = false;
    EXPECT_FALSE(amaxAllReducedOverTp(noSp, *findPrecisionRecipe("nvfp4")));
}

TEST(NvFp4, MemoryKeepsTwoCopiesOfEachLinearWeightAndSavesTheColumnwiseInput) {
    Nvfp4Case nc;
    Plan& p = nc.p;
    const double linear = 4 * layerParameters(nc.m, p).dense; // the stage's four layers; the ends are no NVFP4 linears
    Plan bf16 = p;
    bf16.precision = "megatron";
    const StageMemory mb = predictMemory(nc.m, nc.c, bf16).stages[0];
    const StageMemory mn = predictMemory(nc.m, nc.c, p).stages[0];
    EXPECT_NEAR(mn.weightsBytes - mb.weightsBytes, 1.125 * linear, 1.0);
    // NVFP4 parameters: the two copies in place of the bf16 weight, 0.875 B less a linear weight than bf16 alone.
    p.framework.fp4ParamGather = true;
    EXPECT_NEAR(predictMemory(nc.m, nc.c, p).stages[0].weightsBytes - mb.weightsBytes, -0.875 * linear, 1.0);
    p.framework.fp4ParamGather.reset();
    // Each saved GEMM input at 0.5625 B where FP8 keeps 1 B.
    Plan fp8Plan = p;
    fp8Plan.precision = "fp8";
    const double savedInputs = T / t * h + T * (h / t) + T / t * h + T * (4 * h / t);
    EXPECT_NEAR(layerActivationBytesNoRecompute(nc.m, fp8Plan, *findPrecisionRecipe("fp8")) -
                    layerActivationBytesNoRecompute(nc.m, p, *findPrecisionRecipe("nvfp4")),
                (1.0 - q) * savedInputs, 1.0);
}

TEST(NvFp4, OnlyAGpuWithFp4TensorCoresRunsIt) {
    Nvfp4Case nc;
    ClusterConfig hopperLike = nc.c;
    hopperLike.gpu.peakFlopsPerSecond.erase(Dtype::Fp4);
    EXPECT_EQ(precisionUnsupported(nc.c, "nvfp4", nc.p.framework), "");
    EXPECT_NE(precisionUnsupported(hopperLike, "nvfp4", nc.p.framework).find("no fp4 peak"), std::string::npos);
    ProblemList problems;
    validatePlan(nc.m, hopperLike, nc.p, "/plan", problems);
    bool named = false;
    for (const auto& pr : problems.items()) named |= pr.where == "/plan/precision";
    EXPECT_TRUE(named);
    // The shipped Blackwell presets have FP4 tensor cores, at 2-3x their FP8 peak, and a measured or carried plateau;
    // Hopper's do not.
    for (const char* name : {"dgx-b200", "gb200-nvl72", "dgx-b300", "gb300-nvl72"}) {
        const ClusterConfig c = test::clusterPreset(name);
        ASSERT_TRUE(c.gpu.peakFlopsPerSecond.count(Dtype::Fp4)) << name;
        const double ratio = c.gpu.peakFlopsPerSecond.at(Dtype::Fp4) / c.gpu.peakFlopsPerSecond.at(Dtype::Fp8);
        EXPECT_GE(ratio, 2.0) << name;
        EXPECT_LE(ratio, 3.0) << name;
        EXPECT_GT(gemmPlateauEfficiency(c.gpu, Dtype::Fp4), 0.4) << name;
        EXPECT_LT(gemmPlateauEfficiency(c.gpu, Dtype::Fp4), gemmPlateauEfficiency(c.gpu, Dtype::Fp8)) << name;
    }
    EXPECT_FALSE(test::clusterPreset("dgx-h100-80g").gpu.peakFlopsPerSecond.count(Dtype::Fp4));
}

TEST(NvFp4, ItsSwitchesReadAndWriteBackAndOnlyNvfp4PlansHaveThem) {
    ProblemList problems;
    const nlohmann::json in{{"precision", "nvfp4"}, {"fp4_param_gather", true}, {"nvfp4_rht", false},
                            {"nvfp4_stochastic_rounding", false}};
    const Plan p = parsePlan(in, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_TRUE(fp4ParamGatherOf(p.framework));
    EXPECT_FALSE(nvfp4RhtOf(p.framework));
    EXPECT_FALSE(nvfp4StochasticRoundingOf(p.framework));
    const nlohmann::json out = planToJson(p);
    for (const char* key : {"fp4_param_gather", "nvfp4_rht", "nvfp4_stochastic_rounding"}) EXPECT_EQ(out[key], in[key]) << key;
    // Unstated: Megatron-core's and Transformer Engine's defaults, and nothing written.
    const Plan plain = parsePlan(nlohmann::json{{"precision", "nvfp4"}}, "/plan", problems);
    EXPECT_FALSE(fp4ParamGatherOf(plain.framework));
    EXPECT_TRUE(nvfp4RhtOf(plain.framework));
    EXPECT_TRUE(nvfp4StochasticRoundingOf(plain.framework));
    EXPECT_FALSE(planToJson(plain).contains("nvfp4_rht"));
    // On another precision each says nothing, and is named at its key.
    for (const char* key : {"fp4_param_gather", "nvfp4_rht", "nvfp4_stochastic_rounding"}) {
        ProblemList named;
        (void)parsePlan(nlohmann::json{{"precision", "fp8"}, {key, true}}, "/plan", named);
        ASSERT_EQ(named.items().size(), 1u) << key;
        EXPECT_EQ(named.items().front().where, std::string("/plan/") + key);
    }
}

// Megatron-core's --first-last-layers-bf16: the end layers keep no quantized weight copies and save 16-bit GEMM
// inputs; its counts parse, write back, and are named where they say nothing Megatron-core would run.
TEST(Bf16EndLayers, KeepNoQuantizedCopiesAndSaveSixteenBitInputs) {
    Nvfp4Case nc;
    Plan ends = nc.p;
    ends.bf16LayersAtStart = 1;
    ends.bf16LayersAtEnd = 1;
    EXPECT_EQ(bf16LayersOfStage(nc.m, ends, 0), 2);
    EXPECT_TRUE(ends.isBf16Layer(0, 4) && ends.isBf16Layer(3, 4) && !ends.isBf16Layer(1, 4) && !ends.isBf16Layer(2, 4));
    const StageMemory plain = predictMemory(nc.m, nc.c, nc.p).stages[0];
    const StageMemory withEnds = predictMemory(nc.m, nc.c, ends).stages[0];
    // Two layers' NVFP4 copies (1.125 B a linear weight) fewer.
    EXPECT_NEAR(plain.weightsBytes - withEnds.weightsBytes, 1.125 * 2 * layerParameters(nc.m, nc.p).dense, 1.0);
    // Two layers' saved inputs at 2 B in place of NVFP4's, for each micro-batch in flight.
    Plan bf16 = nc.p;
    bf16.precision = "megatron";
    const double perLayer = layerActivationBytes(nc.m, bf16, precisionRecipeOf(bf16)) -
                            layerActivationBytes(nc.m, nc.p, precisionRecipeOf(nc.p));
    EXPECT_GT(perLayer, 0.0);
    EXPECT_NEAR(withEnds.activationsBytes - plain.activationsBytes, 2 * plain.inFlight * perLayer, 1.0);
    // The plan keys: Megatron-core's names, its defaults of one layer each.
    ProblemList problems;
    const Plan read = parsePlan(nlohmann::json{{"precision", "fp8"}, {"first_last_layers_bf16", true},
                                               {"num_layers_at_end_in_bf16", 2}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(read.bf16LayersAtStart, 1);
    EXPECT_EQ(read.bf16LayersAtEnd, 2);
    const nlohmann::json back = planToJson(read);
    EXPECT_EQ(back["first_last_layers_bf16"], true);
    EXPECT_EQ(back["num_layers_at_start_in_bf16"], 1);
    EXPECT_EQ(back["num_layers_at_end_in_bf16"], 2);
    EXPECT_FALSE(planToJson(parsePlan(nlohmann::json{{"precision", "fp8"}}, "/plan", problems)).contains("first_last_layers_bf16"));
    ProblemList countWithoutFlag;
    (void)parsePlan(nlohmann::json{{"precision", "fp8"}, {"num_layers_at_start_in_bf16", 2}}, "/plan", countWithoutFlag);
    ASSERT_EQ(countWithoutFlag.items().size(), 1u);
    EXPECT_EQ(countWithoutFlag.items().front().where, "/plan/num_layers_at_start_in_bf16");
    // A bf16 plan has no quantized context to keep layers out of; more end layers than the model has are named.
    for (const auto& [precision, start, where] : {std::tuple<const char*, int, const char*>{"megatron", 1, "/plan/first_last_layers_bf16"},
                                                  {"nvfp4", 4, "/plan/num_layers_at_end_in_bf16"}}) {
        Plan bad = nc.p;
        bad.precision = precision;
        bad.bf16LayersAtStart = start;
        bad.bf16LayersAtEnd = 1;
        ProblemList named;
        validatePlan(nc.m, nc.c, bad, "/plan", named);
        bool found = false;
        for (const auto& pr : named.items()) found |= pr.where == where;
        EXPECT_TRUE(found) << precision;
    }
}

// The balanced split weighs the BF16 end layers: each costs what a BF16 layer does beyond a quantized one, charged to
// its end of the pipeline with the embedding (first N) or the output layer and loss (last M), so the end stages take
// fewer layers than they would with every layer in NVFP4.
TEST(Bf16EndLayers, TheBalancedSplitWeighsThem) {
    const ModelConfig model = test::preset("llama3-8b"); // 32 layers on 3 stages: balanced
    const ClusterConfig cluster = test::clusterPreset("dgx-b200");
    Plan p = test::plan3d(1, 3, 1, 1, 8, "megatron", "2025");
    p.precision = "nvfp4";
    p.pipelineSplit = PipelineSplit::Balanced;
    Plan ends = p;
    ends.bf16LayersAtStart = ends.bf16LayersAtEnd = 3;
    resolvePipelineSplit(model, cluster, p);
    resolvePipelineSplit(model, cluster, ends);
    auto total = [](const BlockCompute& b) { return b.forward.seconds + b.backward().seconds + b.recompute.seconds; };
    const PrecisionRecipe recipe = precisionRecipeOf(p);
    const double layer = total(layerCompute(model, cluster, p, recipe));
    const Plan bf16 = bf16EndLayerPlan(p);
    const double extra = total(layerCompute(model, cluster, bf16, precisionRecipeOf(bf16))) / layer - 1.0;
    EXPECT_GT(extra, 0.3) << "a BF16 layer is slower than an NVFP4 one on a B200";
    const double first = total(embeddingCompute(model, cluster, p, recipe)) / layer;
    const double last = total(headCompute(model, cluster, p, recipe)) / layer;
    EXPECT_EQ(p.resolvedPipelineLayers, balancedPipelineLayers(32, 3, 1, first, last, false));
    EXPECT_EQ(ends.resolvedPipelineLayers, balancedPipelineLayers(32, 3, 1, first + 3 * extra, last + 3 * extra, false));
    EXPECT_LT(ends.resolvedPipelineLayers.front(), p.resolvedPipelineLayers.front());
    EXPECT_GT(ends.resolvedPipelineLayers[1], p.resolvedPipelineLayers[1]);
}

} // namespace
} // namespace tessel
