// Export of plans as Megatron-LM arguments, DeepSpeed ds_config.json and torchtitan TOML: exact values parsed
// back out of the text, and every inexpressible plan refused at the right JSON pointer.
#include "tessel/sim/export.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

Scenario preset(const std::string& name) {
    return loadScenarioFile(resolveScenarioPath(name, "test"));
}

// The Megatron export parsed back: the launch line, and each `--flag [value]` line between it and "$@".
struct MegatronArgs {
    std::string launch;
    std::vector<std::string> flags;            // in order
    std::map<std::string, std::string> values; // flag -> value ("" for switches)
    bool has(const std::string& flag) const { return values.count(flag) > 0; }
    std::string at(const std::string& flag) const {
        auto it = values.find(flag);
        return it == values.end() ? "<absent>" : it->second;
    }
};

MegatronArgs parseMegatron(const std::string& text) {
    MegatronArgs a;
    std::istringstream in(text);
    std::string line;
    bool inArgs = false;
    bool sawEnd = false;
    while (std::getline(in, line)) {
        if (!inArgs) {
            if (line.empty() || line[0] == '#') continue;
            a.launch = line;
            EXPECT_TRUE(line.size() > 2 && line.substr(line.size() - 2) == " \\")
                << "launch line must continue: " << line;
            inArgs = true;
            continue;
        }
        if (line == "    \"$@\"") {
            sawEnd = true;
            continue;
        }
        EXPECT_FALSE(sawEnd) << "text after the last argument: " << line;
        EXPECT_EQ(line.rfind("    --", 0), 0u) << "argument lines are indented flags: " << line;
        EXPECT_TRUE(line.size() > 2 && line.substr(line.size() - 2) == " \\")
            << "missing trailing backslash: " << line;
        std::istringstream words(line.substr(0, line.size() - 2));
        std::string flag, value, extra;
        words >> flag >> value >> extra;
        EXPECT_TRUE(extra.empty()) << "one flag and at most one value per line: " << line;
        EXPECT_EQ(a.values.count(flag), 0u) << "flag repeated: " << flag;
        a.flags.push_back(flag);
        a.values[flag] = value;
    }
    EXPECT_TRUE(sawEnd) << "the argument list must end with \"$@\"";
    return a;
}

// A TOML file parsed as section.key -> raw value (strings keep no quotes); comments skipped.
std::map<std::string, std::string> parseToml(const std::string& text) {
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    std::string line, section;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (line.front() == '[') {
            EXPECT_EQ(line.back(), ']') << line;
            section = line.substr(1, line.size() - 2);
            continue;
        }
        const auto eq = line.find(" = ");
        EXPECT_NE(eq, std::string::npos) << "not a key = value line: " << line;
        if (eq == std::string::npos) continue;
        std::string value = line.substr(eq + 3);
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        const std::string key = section + "." + line.substr(0, eq);
        EXPECT_EQ(kv.count(key), 0u) << "key repeated: " << key;
        kv[key] = value;
    }
    return kv;
}

// The pointers of the problems `exportPlan` throws, or a failure when it does not throw.
std::vector<std::string> refusal(const Scenario& s, ExportFormat f) {
    try {
        const std::string text = exportPlan(s, f);
        ADD_FAILURE() << "expected InputError, got:\n" << text;
    } catch (const InputError& e) {
        std::vector<std::string> where;
        for (const auto& p : e.problems()) {
            EXPECT_FALSE(p.message.empty());
            where.push_back(p.where);
        }
        return where;
    }
    return {};
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

// ---------------------------------------------------------------------------------------------- Megatron-LM

TEST(ExportMegatron, DefaultScenarioIsMegatronsGpt3Recipe) {
    const auto a = parseMegatron(exportPlan(defaultScenario(), ExportFormat::Megatron));
    EXPECT_NE(a.launch.find("torchrun --nproc_per_node 8 --nnodes 128 "), std::string::npos) << a.launch;
    EXPECT_NE(a.launch.find("--node_rank"), std::string::npos);
    EXPECT_NE(a.launch.find(" pretrain_gpt.py \\"), std::string::npos);
    EXPECT_EQ(a.launch.rfind("CUDA_DEVICE_MAX_CONNECTIONS=1 ", 0), 0u) << "Megatron asserts it for tp > 1";
    EXPECT_EQ(a.at("--tensor-model-parallel-size"), "8");
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "8");
    EXPECT_EQ(a.at("--context-parallel-size"), "1");
    EXPECT_EQ(a.at("--expert-model-parallel-size"), "1");
    EXPECT_EQ(a.at("--global-batch-size"), "1536");
    EXPECT_EQ(a.at("--micro-batch-size"), "1");
    EXPECT_EQ(a.at("--num-layers"), "96");
    EXPECT_EQ(a.at("--hidden-size"), "12288");
    EXPECT_EQ(a.at("--num-attention-heads"), "96");
    EXPECT_EQ(a.at("--ffn-hidden-size"), "49152");
    EXPECT_EQ(a.at("--seq-length"), "2048");
    EXPECT_EQ(a.at("--max-position-embeddings"), "2048");
    EXPECT_EQ(a.at("--position-embedding-type"), "learned_absolute");
    EXPECT_EQ(a.at("--normalization"), "LayerNorm");
    EXPECT_EQ(a.at("--attention-dropout"), "0.1");
    EXPECT_EQ(a.at("--hidden-dropout"), "0.1");
    EXPECT_EQ(a.at("--make-vocab-size-divisible-by"), "128");
    EXPECT_EQ(a.at("--sequence-parallel"), "");
    EXPECT_EQ(a.at("--recompute-activations"), "");
    EXPECT_EQ(a.at("--bf16"), "");
    EXPECT_EQ(a.at("--accumulate-allreduce-grads-in-fp32"), "");
    EXPECT_EQ(a.at("--use-flash-attn"), "");
    EXPECT_EQ(a.at("--attention-backend"), "flash");
    // GPT-3: tied embeddings, biases, GELU, MHA, ZeRO-0, no interleaving.
    for (const char* absent :
         {"--use-distributed-optimizer", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
          "--swiglu", "--group-query-attention", "--num-experts", "--num-layers-per-virtual-pipeline-stage",
          "--recompute-granularity", "--fp16", "--use-tp-pp-dp-mapping", "--kv-channels"})
        EXPECT_FALSE(a.has(absent)) << absent;
}

TEST(ExportMegatron, Llama3PresetHasGqaSwigluRmsnormRope) {
    const auto a = parseMegatron(exportPlan(preset("llama3-8b-h100"), ExportFormat::Megatron));
    EXPECT_NE(a.launch.find("--nproc_per_node 8 --nnodes 1 pretrain_gpt.py"), std::string::npos) << a.launch;
    EXPECT_EQ(a.launch.find("--node_rank"), std::string::npos) << "one node needs no rendezvous address";
    EXPECT_EQ(a.at("--group-query-attention"), "");
    EXPECT_EQ(a.at("--num-query-groups"), "8");
    EXPECT_EQ(a.at("--swiglu"), "");
    EXPECT_EQ(a.at("--normalization"), "RMSNorm");
    EXPECT_EQ(a.at("--position-embedding-type"), "rope");
    EXPECT_EQ(a.at("--untie-embeddings-and-output-weights"), "");
    EXPECT_EQ(a.at("--disable-bias-linear"), "");
    EXPECT_EQ(a.at("--ffn-hidden-size"), "14336");
    EXPECT_EQ(a.at("--seq-length"), "8192");
    EXPECT_EQ(a.at("--attention-dropout"), "0");
    EXPECT_EQ(a.at("--tensor-model-parallel-size"), "2");
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "1");
    EXPECT_EQ(a.at("--global-batch-size"), "32");
    EXPECT_EQ(a.at("--use-distributed-optimizer"), "") << "the preset is ZeRO-1";
    EXPECT_EQ(a.at("--sequence-parallel"), "");
    EXPECT_FALSE(a.has("--add-qkv-bias"));
}

TEST(ExportMegatron, TheLossKernelIsWrittenAsMegatronsCrossEntropyFlags) {
    // "fused" is what tessel costs for Megatron-core's vocab-parallel loss; "te" keeps only the logits, which
    // Transformer Engine's kernel overwrites with their gradient; NeMo's performance recipes run it from 25.09.
    Scenario s = preset("llama3-8b-h100");
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--cross-entropy-loss-fusion"), "");
    EXPECT_FALSE(a.has("--cross-entropy-fusion-impl"));
    s.plan.framework.name = "nemo";
    s.plan.framework.version = "25.11";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--cross-entropy-loss-fusion"), "");
    EXPECT_EQ(a.at("--cross-entropy-fusion-impl"), "te");
    s.plan.framework.crossEntropy = "eager";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_FALSE(a.has("--cross-entropy-loss-fusion"));
}

// 16-bit master remainders are Megatron-core's precision-aware optimizer (store_param_remainders defaults to true
// there); bf16 optimizer state without a master is NeMo 1's Apex optimizer, which no format runs.
TEST(ExportMegatron, TheOptimizersStateIsWrittenOrRefused) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 1;
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-precision-aware-optimizer"));
    s.plan.framework.storeParamRemainders = true;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--use-precision-aware-optimizer"), "");
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/store_param_remainders"));
    s.plan.framework.storeParamRemainders.reset();
    s.plan.framework.optimizerDtype = "bf16";
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/optimizer_dtype"});
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/optimizer_dtype"));
    s.plan.zeroStage = 0; // without a distributed optimizer the key would change nothing: the plan is refused
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/optimizer_dtype"));
    s.plan.framework.optimizerDtype.reset();
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-precision-aware-optimizer"));
}

// flash-attn's cross_entropy is llm-foundry's model code: every format refuses it at its pointer.
TEST(Export, FlashAttnsLossIsModelCode) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.framework.crossEntropy = "flash_attn";
    for (ExportFormat f : {ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/cross_entropy"));
}

TEST(ExportMegatron, SquaredReluIsMegatronsFlag) {
    Scenario s = preset("llama3-8b-h100");
    s.model.activation = Activation::SquaredRelu;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--squared-relu"), "");
    EXPECT_FALSE(a.has("--swiglu"));
}

TEST(ExportMegatron, InterleavedScheduleGivesLayersPerVirtualStage) {
    const auto a = parseMegatron(exportPlan(preset("llama3-70b-h100"), ExportFormat::Megatron));
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "4");
    EXPECT_EQ(a.at("--num-layers-per-virtual-pipeline-stage"), "4"); // 80 layers / (pp 4 x vpp 5)
}

// Uneven splits as Megatron-LM core states them: the first/last rank's layers, the rest even; with interleaving
// the virtual stage count replaces the per-virtual-stage layers.
TEST(ExportMegatron, UnevenSplitsAsFirstAndLastStageLayers) {
    Scenario s = defaultScenario(); // GPT-3 175B, 96 layers, tp 8 pp 8 dp 16
    s.plan.pipelineLayers = {11, 12, 12, 12, 12, 12, 12, 13};
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--decoder-first-pipeline-num-layers"), "11");
    EXPECT_EQ(a.at("--decoder-last-pipeline-num-layers"), "13");
    EXPECT_FALSE(a.has("--num-layers-per-virtual-pipeline-stage"));
    s.plan.pipelineLayers = {11, 12, 12, 12, 13, 12, 12, 12}; // a middle rank differs: not Megatron's form
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/pipeline_layers"});
    s = preset("llama3-70b-h100"); // 80 layers, pp 4, vpp 5
    s.plan.pipelineLayers.clear();
    s.plan.firstStageLayers = 15;
    s.plan.lastStageLayers = 25;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-virtual-stages-per-pipeline-rank"), "5");
    EXPECT_EQ(a.at("--decoder-first-pipeline-num-layers"), "15");
    EXPECT_EQ(a.at("--decoder-last-pipeline-num-layers"), "25");
    // The embedding and the loss counted as layers (Llama 3.1 405B, 126 layers over pp 8 x vpp 8: 1, 2 x 62, 1 by
    // virtual stage, as NVIDIA's recipes run it): Megatron-LM's two account-for flags, not first/last counts,
    // which cannot state a rank whose virtual stages differ.
    s = preset("llama3-70b-h100");
    s.model = loadModelRef("llama3-405b", "test");
    s.plan.firstStageLayers = s.plan.lastStageLayers = 0;
    s.plan.pp = 8;
    s.plan.dp = 1;
    s.plan.vpp = 8;
    s.plan.globalBatch = 64;
    s.plan.pipelineSplit = PipelineSplit::EndsAsLayers;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-virtual-stages-per-pipeline-rank"), "8");
    EXPECT_TRUE(a.has("--account-for-embedding-in-pipeline-split"));
    EXPECT_TRUE(a.has("--account-for-loss-in-pipeline-split"));
    EXPECT_FALSE(a.has("--decoder-first-pipeline-num-layers"));
}

TEST(ExportFrameworks, UnevenSplitsInTorchtitanAndRefusedByDeepSpeed) {
    Scenario s = preset("llama3-70b-h100");
    s.plan.zeroStage = 3;
    s.plan.vpp = 1;
    s.plan.schedule = Schedule::OneFOneB;
    s.plan.pp = 3;
    s.cluster.nodes = 6; // tp 8 x pp 3 x dp 2
    s.plan.pipelineSplit = PipelineSplit::Balanced;
    resolvePipelineSplit(s.model, s.cluster, s.plan);
    const std::vector<int> counts = chunkLayerCounts(s.model, s.plan);
    ASSERT_EQ(counts.size(), 3u);
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_layers_per_stage"), std::to_string(counts[1]));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_first_stage_less_layers"), std::to_string(counts[1] - counts[0]));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_last_stage_less_layers"), std::to_string(counts[1] - counts[2]));
    s.plan.pipelineSplit = PipelineSplit::Even;
    s.plan.resolvedPipelineLayers.clear();
    s.plan.pipelineLayers = {30, 20, 30}; // heavier ends: torchtitan only takes layers away from them
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Torchtitan), "/plan/pipeline_layers"));
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/pipeline_split"));
}

TEST(ExportMegatron, MixtralPresetHasExpertsAndAllToAll) {
    const auto a = parseMegatron(exportPlan(preset("mixtral-8x7b-h100"), ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-experts"), "8");
    EXPECT_EQ(a.at("--moe-router-topk"), "2");
    EXPECT_EQ(a.at("--moe-ffn-hidden-size"), "14336");
    EXPECT_EQ(a.at("--expert-model-parallel-size"), "8");
    EXPECT_EQ(a.at("--moe-token-dispatcher-type"), "alltoall");
    EXPECT_EQ(a.launch.find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << "tp = cp = 1";
}

TEST(ExportMegatron, PartialRecomputeIsTheBlockMethodAndOnlyMegatronWritesIt) {
    Scenario s = defaultScenario();
    s.plan.recompute = Recompute::Full;
    s.plan.recomputeLayers = 3;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--recompute-granularity"), "full");
    EXPECT_EQ(a.at("--recompute-method"), "block");
    EXPECT_EQ(a.at("--recompute-num-layers"), "3");
    for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Torchtitan}) {
        try {
            exportPlan(s, f);
            ADD_FAILURE() << "expected a refusal";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("/plan/recompute_layers"), std::string::npos) << e.what();
        }
    }
}

TEST(ExportMegatron, LayerActivationOffloadIsMegatronCoresCpuOffloading) {
    // Llama 3 8B on 8 DGX B200 GPUs, pp 1, no recompute: the first 8 layers' activations to the host.
    Scenario s;
    s.model = loadModelRef("llama3-8b", "test");
    s.cluster = loadClusterRef("dgx-b200", "test");
    s.plan.tp = 1;
    s.plan.pp = 1;
    s.plan.dp = 8;
    s.plan.microBatch = 2;
    s.plan.globalBatch = 16;
    s.plan.zeroStage = 1;
    s.plan.recompute = Recompute::None;
    s.plan.sequenceParallel = false;
    s.plan.offloadActivationLayers = 8;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--cpu-offloading"));
    EXPECT_EQ(a.at("--cpu-offloading-num-layers"), "8");
    for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Torchtitan}) {
        try {
            exportPlan(s, f);
            ADD_FAILURE() << "expected a refusal";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("/plan/offload_activation_layers"), std::string::npos) << e.what();
        }
    }
}

TEST(ExportMegatron, FullRecomputeMixedPrecisionAndNoFlash) {
    Scenario s = defaultScenario();
    s.plan.recompute = Recompute::Full;
    s.plan.precision = "mixed";
    s.plan.flashAttention = false;
    s.plan.zeroStage = 1;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--recompute-granularity"), "full");
    EXPECT_EQ(a.at("--recompute-method"), "uniform");
    EXPECT_EQ(a.at("--recompute-num-layers"), "1");
    EXPECT_FALSE(a.has("--recompute-activations"));
    EXPECT_EQ(a.at("--bf16"), "");
    EXPECT_EQ(a.at("--grad-reduce-in-bf16"), "");
    EXPECT_FALSE(a.has("--accumulate-allreduce-grads-in-fp32"));
    EXPECT_EQ(a.at("--attention-backend"), "unfused");
    EXPECT_FALSE(a.has("--use-flash-attn"));
    EXPECT_EQ(a.at("--use-distributed-optimizer"), "");
}

TEST(ExportMegatron, MainGradientsFollowGradReduceInFp32) {
    Scenario s = defaultScenario();
    s.plan.precision = "megatron";
    s.plan.framework.name = "nemo"; // NeMo's performance recipes reduce in bf16
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--grad-reduce-in-bf16"), "");
    EXPECT_FALSE(a.has("--accumulate-allreduce-grads-in-fp32"));
    s.plan.framework.gradReduceInFp32 = true;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--accumulate-allreduce-grads-in-fp32"), "");
    EXPECT_FALSE(a.has("--grad-reduce-in-bf16"));
}

TEST(ExportMegatron, Fp8ParametersAsTheFrameworkResolvesThem) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.precision = "fp8";
    s.plan.framework.name = "megatron";
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--fp8-param-gather"));
    s.plan.framework.name = "nemo"; // NeMo 2's FP8 recipes keep FP8 weights
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--fp8-param-gather"), "");
    s.plan.framework.fp8ParamGather = false;
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--fp8-param-gather"));
}

TEST(ExportMegatron, Fp32RecipeSetsNoHalfPrecisionFlag) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.precision = "fp32";
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_FALSE(a.has("--bf16"));
    EXPECT_FALSE(a.has("--fp16"));
}

TEST(ExportMegatron, TpPpDpRankOrderUsesMegatronsAlternativeMapping) {
    Scenario s = defaultScenario();
    s.plan.rankOrder = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp, ParallelDim::Dp};
    EXPECT_TRUE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-tp-pp-dp-mapping"));
    // Size-1 dimensions do not matter: cp and ep moved elsewhere build the same groups.
    s.plan.rankOrder = {ParallelDim::Ep, ParallelDim::Tp, ParallelDim::Dp, ParallelDim::Cp, ParallelDim::Pp};
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-tp-pp-dp-mapping"));
    s.plan.rankOrder = {ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp};
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/rank_order"});
}

TEST(ExportMegatron, RefusesZero2And3) {
    Scenario s = defaultScenario();
    for (int z : {2, 3}) {
        s.plan.zeroStage = z;
        EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/zero_stage"})
            << "zero " << z;
    }
}

TEST(ExportMegatron, RefusesZeroBubbleAndGpipe) {
    Scenario s = defaultScenario();
    for (auto sched : {Schedule::ZeroBubble, Schedule::Gpipe}) {
        s.plan.schedule = sched;
        EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/schedule"})
            << toString(sched);
    }
}

TEST(ExportMegatron, ListsEveryInexpressibleFieldAtOnce) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 3;
    s.plan.schedule = Schedule::Gpipe;
    s.plan.precision = "bf16_no_master";
    const auto where = refusal(s, ExportFormat::Megatron);
    EXPECT_EQ(where.size(), 3u);
    EXPECT_TRUE(contains(where, "/plan/zero_stage"));
    EXPECT_TRUE(contains(where, "/plan/schedule"));
    EXPECT_TRUE(contains(where, "/plan/precision"));
}


TEST(ExportMegatron, OverlapSettingsAndFp8AreWritten) {
    Scenario s = preset("llama3-70b-h100"); // interleaved, ZeRO-1, SP
    s.plan.framework.name = "megatron";
    s.plan.framework.ddpImpl = "torch";
    s.plan.framework.overlapParamGather = true;
    s.plan.framework.tpCommOverlap = true;
    s.plan.precision = "fp8";
    MegatronArgs a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--overlap-grad-reduce"));
    EXPECT_TRUE(a.has("--overlap-param-gather"));
    EXPECT_TRUE(a.has("--tp-comm-overlap"));
    EXPECT_FALSE(a.has("--no-overlap-p2p-communication")); // current Megatron overlaps interleaved transfers
    EXPECT_EQ(a.at("--fp8-format"), "hybrid");
    EXPECT_EQ(a.at("--transformer-impl"), "transformer_engine");
    EXPECT_TRUE(a.has("--bf16"));
    // A Megatron-LM of 2023 did not overlap them: written as such.
    s.plan.framework.version = "2023";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--no-overlap-p2p-communication"));
    // Local DDP reduces after the backward: no overlap flag.
    s.plan.framework.ddpImpl = "local";
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--overlap-grad-reduce"));
}

TEST(ExportMegatron, RefusesOverlapItCannotRun) {
    Scenario s = defaultScenario(); // 1F1B, ZeRO-0
    s.plan.sequenceParallel = false;
    s.plan.framework.name = "megatron";
    s.plan.framework.overlapP2pComm = true;
    s.plan.framework.overlapParamGather = true;
    s.plan.framework.tpCommOverlap = true;
    s.plan.framework.asyncTpGradReduce = false;
    const auto where = refusal(s, ExportFormat::Megatron);
    EXPECT_TRUE(contains(where, "/plan/overlap_p2p_comm"));
    EXPECT_TRUE(contains(where, "/plan/overlap_param_gather"));
    EXPECT_TRUE(contains(where, "/plan/tp_comm_overlap"));
    EXPECT_TRUE(contains(where, "/plan/async_tp_grad_reduce"));
}

TEST(ExportFrameworks, Fp8IsRefusedByDeepSpeedAndConvertedByTorchtitan) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.precision = "fp8";
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/precision"));
    s.plan.zeroStage = 3;
    s.plan.framework.reshardAfterForward = false;
    // FP8 all-gathers as the plan's fp8_param_gather resolves: off unless stated for a generic plan...
    std::string toml = exportPlan(s, ExportFormat::Torchtitan);
    EXPECT_NE(toml.find("converters = [\"float8\"]"), std::string::npos);
    EXPECT_NE(toml.find("enable_fsdp_float8_all_gather = false"), std::string::npos);
    // ...on for torchtitan, as its float8 guide launches it, and for torchao's recipe under FSDP2 the same.
    s.plan.framework.name = "torchtitan";
    for (const char* precision : {"fp8", "fsdp_fp8"}) {
        s.plan.precision = precision;
        toml = exportPlan(s, ExportFormat::Torchtitan);
        EXPECT_NE(toml.find("converters = [\"float8\"]"), std::string::npos) << precision;
        EXPECT_NE(toml.find("enable_fsdp_float8_all_gather = true"), std::string::npos) << precision;
        EXPECT_NE(toml.find("fsdp_reshard_after_forward = \"never\""), std::string::npos) << precision;
    }
    // Megatron-LM cannot run torchao's recipe and says which to use.
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/precision"));
}

TEST(ExportMegatron, DistributedOptimizerWithContextParallelNeedsZeroOverCp) {
    Scenario s = defaultScenario();
    s.plan.dp = 8;
    s.plan.cp = 2;
    s.plan.zeroStage = 1;
    EXPECT_TRUE(s.plan.zeroOverCp); // the default: sharded as Megatron-core shards
    s.plan.zeroOverCp = false;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/zero_over_cp"});
    s.plan.zeroOverCp = true;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--context-parallel-size"), "2");
    EXPECT_EQ(a.at("--use-distributed-optimizer"), "");
}

TEST(ExportMegatron, CpuRecipeIsRefused) {
    EXPECT_EQ(refusal(preset("tiny-cpu"), ExportFormat::Megatron),
              std::vector<std::string>{"/plan/precision"});
}

// ---------------------------------------------------------------------------------------------- DeepSpeed

// Llama 3 8B on one node as pure data parallel, ZeRO-1: a plan DeepSpeed's config expresses on its own.
Scenario deepspeedPlan() {
    Scenario s = preset("llama3-8b-h100");
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    s.plan.zeroStage = 1;
    return s;
}

TEST(ExportDeepSpeed, BatchSizesMultiplyOutAndPrecisionIsBf16WithFp32Grads) {
    const Scenario s = deepspeedPlan();
    const auto ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    const int micro = ds.at("train_micro_batch_size_per_gpu").get<int>();
    const int accum = ds.at("gradient_accumulation_steps").get<int>();
    EXPECT_EQ(ds.at("train_batch_size").get<int>(), micro * accum * s.plan.dp);
    EXPECT_EQ(ds.at("train_batch_size").get<int>(), 32);
    EXPECT_EQ(micro, 1);
    EXPECT_EQ(accum, 4);
    EXPECT_EQ(ds.at("bf16").at("enabled"), true);
    EXPECT_EQ(ds.at("data_types").at("grad_accum_dtype"), "fp32") << "megatron recipe: fp32 main grads";
    EXPECT_EQ(ds.at("zero_optimization").at("stage"), 1);
    // The bucket tessel costed: the plan's framework (here megatron) keeps 40M; a deepspeed plan DeepSpeed's 5e8.
    EXPECT_EQ(ds.at("zero_optimization").at("reduce_bucket_size"), 40000000);
    Scenario deepspeed = s;
    deepspeed.plan.framework.name = "deepspeed";
    EXPECT_EQ(nlohmann::json::parse(exportPlan(deepspeed, ExportFormat::DeepSpeed)).at("zero_optimization").at("reduce_bucket_size"),
              500000000);
    Scenario stated = s;
    stated.plan.framework.reduceBucketSize = 200000000;
    const auto b = nlohmann::json::parse(exportPlan(stated, ExportFormat::DeepSpeed));
    EXPECT_EQ(b.at("zero_optimization").at("reduce_bucket_size"), 200000000);
    EXPECT_FALSE(ds.contains("tensor_parallel"));
    EXPECT_FALSE(ds.contains("pipeline"));
    EXPECT_FALSE(ds.contains("activation_checkpointing")) << "selective + flash stores what none stores";
    EXPECT_FALSE(ds.contains("fp16"));
}

TEST(ExportDeepSpeed, TensorParallelIsAutoTp) {
    Scenario s = deepspeedPlan();
    s.plan.tp = 2;
    s.plan.dp = 4;
    s.plan.zeroStage = 2;
    s.plan.precision = "mixed";
    const auto ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("tensor_parallel").at("autotp_size"), 2);
    EXPECT_EQ(ds.at("train_batch_size").get<int>(), ds.at("train_micro_batch_size_per_gpu").get<int>() *
                                                        ds.at("gradient_accumulation_steps").get<int>() * 4);
    EXPECT_EQ(ds.at("zero_optimization").at("stage"), 2);
    EXPECT_EQ(ds.at("data_types").at("grad_accum_dtype"), "bf16");
}

TEST(ExportDeepSpeed, Zero3GatherBucketsMatchTheLargestLayer) {
    Scenario s = deepspeedPlan();
    s.plan.zeroStage = 3;
    s.plan.precision = "mixed";
    const auto ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    const auto& z = ds.at("zero_optimization");
    const auto c = countParameters(s.model);
    const int64_t largest = std::max({c.perLayer(), c.embedding, c.lmHead});
    EXPECT_EQ(largest, int64_t{128256} * 4096) << "Llama 3 8B: the word embedding is the largest block";
    EXPECT_EQ(z.at("stage"), 3);
    EXPECT_EQ(z.at("stage3_prefetch_bucket_size").get<int64_t>(), largest);
    EXPECT_EQ(z.at("stage3_max_live_parameters").get<int64_t>(), 2 * largest);
}

TEST(ExportDeepSpeed, PipelineWithFullRecompute) {
    Scenario s = deepspeedPlan();
    s.plan.pp = 2;
    s.plan.dp = 4;
    s.plan.recompute = Recompute::Full;
    const auto ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("pipeline").at("stages"), 2);
    EXPECT_EQ(ds.at("pipeline").at("activation_checkpoint_interval"), 1);
    EXPECT_TRUE(ds.contains("activation_checkpointing"));
    EXPECT_EQ(ds.at("train_batch_size").get<int>(), ds.at("train_micro_batch_size_per_gpu").get<int>() *
                                                        ds.at("gradient_accumulation_steps").get<int>() * 4);
}

TEST(ExportDeepSpeed, SingleDataParallelRankBf16IsWrittenAsStage1) {
    Scenario s = deepspeedPlan();
    s.cluster.nodes = 1;
    s.plan.tp = 8;
    s.plan.dp = 1;
    s.plan.zeroStage = 0;
    s.plan.globalBatch = 8;
    const auto ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("zero_optimization").at("stage"), 1) << "sharding over one rank is no sharding";
}

TEST(ExportDeepSpeed, RefusesTheMegatronPlanWithEveryReason) {
    const auto where = refusal(defaultScenario(), ExportFormat::DeepSpeed);
    EXPECT_TRUE(contains(where, "/plan/tp")) << "AutoTP does not combine with PipelineModule";
    EXPECT_TRUE(contains(where, "/plan/sequence_parallel"));
    EXPECT_TRUE(contains(where, "/plan/zero_stage")) << "bf16 without ZeRO is BF16_Optimizer, i.e. ZeRO-1";
}

TEST(ExportDeepSpeed, RefusesZero2WithPipelineAndNonOneFOneBSchedules) {
    Scenario s = deepspeedPlan();
    s.plan.pp = 2;
    s.plan.dp = 4;
    s.plan.zeroStage = 2;
    s.plan.precision = "mixed";
    EXPECT_EQ(refusal(s, ExportFormat::DeepSpeed), std::vector<std::string>{"/plan/zero_stage"});
    s.plan.zeroStage = 1;
    s.plan.schedule = Schedule::Gpipe;
    EXPECT_EQ(refusal(s, ExportFormat::DeepSpeed), std::vector<std::string>{"/plan/schedule"});
}

TEST(ExportDeepSpeed, RefusesContextAndExpertParallelism) {
    Scenario s = deepspeedPlan();
    s.plan.dp = 4;
    s.plan.cp = 2;
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/cp"));
    Scenario moe = preset("mixtral-8x7b-h100");
    EXPECT_TRUE(contains(refusal(moe, ExportFormat::DeepSpeed), "/plan/ep"));
}

// ---------------------------------------------------------------------------------------------- torchtitan

// Hybrid sharding: Megatron-LM's --num-distributed-optimizer-instances, DeepSpeed's MiCS (ZeRO-3 only) and
// torchtitan's HSDP degrees.
TEST(ExportFrameworks, HybridShardingAsEachFrameworkSpellsIt) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 1;
    s.plan.zeroReplicas = 4;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-distributed-optimizer-instances"), "4");
    s.plan.zeroReplicas = 1;
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--num-distributed-optimizer-instances"));

    Scenario d = deepspeedPlan();
    d.plan.zeroStage = 3;
    d.plan.precision = "mixed";
    d.plan.zeroReplicas = 2;
    const auto ds = nlohmann::json::parse(exportPlan(d, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("zero_optimization").at("mics_shard_size").get<int>(), d.plan.dp / 2);
    d.plan.zeroStage = 2;
    EXPECT_EQ(refusal(d, ExportFormat::DeepSpeed), std::vector<std::string>{"/plan/zero_replicas"});

    Scenario t = preset("llama3-8b-h100");
    t.plan.zeroStage = 3;
    t.plan.zeroReplicas = 2;
    const auto toml = parseToml(exportPlan(t, ExportFormat::Torchtitan));
    EXPECT_EQ(toml.at("parallelism.data_parallel_replicate_degree"), "2");
    EXPECT_EQ(toml.at("parallelism.data_parallel_shard_degree"), std::to_string(t.plan.dp / 2));
}

TEST(ExportTorchtitan, FsdpPlanHasTheDegrees) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("model.name"), "llama3");
    EXPECT_EQ(t.at("model.flavor"), "8B");
    EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "1");
    EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "4");
    EXPECT_EQ(t.at("parallelism.tensor_parallel_degree"), "2");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_degree"), "1");
    EXPECT_EQ(t.at("parallelism.context_parallel_degree"), "1");
    EXPECT_EQ(t.at("parallelism.expert_parallel_degree"), "1");
    EXPECT_EQ(t.at("parallelism.enable_async_tensor_parallel"), "false");
    EXPECT_EQ(t.at("parallelism.fsdp_reshard_after_forward"), "always");
    EXPECT_EQ(t.at("training.local_batch_size"), "1");
    EXPECT_EQ(t.at("training.global_batch_size"), "32");
    EXPECT_EQ(t.at("training.seq_len"), "8192");
    EXPECT_EQ(t.at("training.mixed_precision_param"), "bfloat16");
    EXPECT_EQ(t.at("activation_checkpoint.mode"), "none") << "selective + flash stores what none stores";
    EXPECT_EQ(t.count("parallelism.pipeline_parallel_schedule"), 0u);
    // A Megatron-style plan was predicted with fused kernels: torch.compile gives them.
    EXPECT_EQ(t.at("compile.enable"), "true");
}

TEST(ExportTorchtitan, FsdpMixedPrecisionIsWrittenAndRefusedElsewhere) {
    // PyTorch FSDP's recipes (fp32 parameter shards, bf16 gathers, fp32 or bf16 reduction) are torchtitan's
    // mixed_precision_param / mixed_precision_reduce; Megatron-LM and DeepSpeed keep other state and refuse.
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp_pure";
    auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_param"), "bfloat16");
    EXPECT_EQ(t.at("training.mixed_precision_reduce"), "bfloat16");
    s.plan.precision = "fsdp";
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_reduce"), "float32");
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/precision"));
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/precision"));
}

TEST(ExportTorchtitan, AutocastOnlyUnderDataParallelismAlone) {
    // torchtitan's mixed_precision_param works through torch.autocast under DDP or on one device with no other
    // parallelism, and through fully_shard when it shards (torchtitan/config/configs.py).
    Scenario s = preset("llama3-8b-h100");
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    s.plan.zeroStage = 0;
    s.plan.precision = "amp";
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_param"), "bfloat16");
    EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "8");
    auto messageAt = [](const Scenario& sc, ExportFormat f, const std::string& where) {
        try {
            exportPlan(sc, f);
        } catch (const InputError& e) {
            for (const auto& p : e.problems())
                if (p.where == where) return p.message;
        }
        return std::string();
    };
    s.plan.zeroStage = 3;
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("use precision fsdp"), std::string::npos);
    s.plan.zeroStage = 0;
    s.plan.tp = 2;
    s.plan.dp = 4;
    s.plan.sequenceParallel = true;
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("data parallelism alone"), std::string::npos);
    // Megatron-LM and DeepSpeed keep bf16 weights beside an fp32 master: no autocast to export.
    EXPECT_NE(messageAt(s, ExportFormat::Megatron, "/plan/precision").find("torch.autocast"), std::string::npos);
    EXPECT_NE(messageAt(s, ExportFormat::DeepSpeed, "/plan/precision").find("torch.autocast"), std::string::npos);
}

TEST(ExportFrameworks, UnpaddedAttentionIsModelCodeNoFrameworkRuns) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.framework.attentionUnpad = true;
    for (ExportFormat f : allExportFormats()) EXPECT_TRUE(contains(refusal(s, f), "/plan/attention_unpad")) << toString(f);
    s.plan.framework.attentionUnpad = false;
    EXPECT_NO_THROW(exportPlan(s, ExportFormat::Torchtitan));
}

TEST(ExportTorchtitan, ATorchtitanPlanKeepsItsOwnSelectivePolicyAndEagerKernels) {
    // Under framework torchtitan, selective is torchtitan's per-op policy and the kernels are eager unless
    // fused_kernels says otherwise (FORMULAS.md §3.4): the export writes what was predicted.
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.framework.name = "torchtitan";
    auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("activation_checkpoint.mode"), "selective");
    EXPECT_EQ(t.at("activation_checkpoint.selective_ac_option"), "op");
    EXPECT_EQ(t.at("compile.enable"), "false");
    s.plan.framework.fusedKernels = true;
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("compile.enable"), "true");
    // AdamW as costed: fused for current torchtitan, foreach for a 2024 one (its default before #881).
    EXPECT_EQ(t.at("optimizer.implementation"), "fused");
    s.plan.framework.version = "2024";
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("optimizer.implementation"), "foreach");
}

TEST(ExportTorchtitan, ReplicatedPlanAndFullRecompute) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 0;
    s.plan.recompute = Recompute::Full;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "4");
    EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "1");
    EXPECT_EQ(t.count("parallelism.fsdp_reshard_after_forward"), 0u);
    EXPECT_EQ(t.at("activation_checkpoint.mode"), "full");
}

TEST(ExportTorchtitan, InterleavedPipelineSplitsEvenly) {
    Scenario s = preset("llama3-70b-h100");
    s.plan.zeroStage = 3;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("model.flavor"), "70B");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_degree"), "4");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "Interleaved1F1B");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_layers_per_stage"), "4");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_first_stage_less_layers"), "0");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_last_stage_less_layers"), "0");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_microbatch_size"), "1");
    // The schedule splits the local batch (global / dp) into micro-batches.
    EXPECT_EQ(t.at("training.local_batch_size"), "32");
    EXPECT_EQ(t.at("training.global_batch_size"), "64");
}

TEST(ExportTorchtitan, UnknownShapesNameARegistrationNotAFlavor) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 3;
    const std::string text = exportPlan(s, ExportFormat::Torchtitan);
    const auto t = parseToml(text);
    EXPECT_EQ(t.at("model.flavor"), "gpt3-175b");
    EXPECT_NE(text.find("register \"gpt3-175b\""), std::string::npos);
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "1F1B");
}

TEST(ExportTorchtitan, RefusesZero1And2) {
    Scenario s = preset("llama3-8b-h100"); // ZeRO-1
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/zero_stage"});
    s.plan.zeroStage = 2;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/zero_stage"});
}

TEST(ExportTorchtitan, RefusesZeroBubbleTpWithoutSpAndNoFlash) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 3;
    s.plan.schedule = Schedule::ZeroBubble;
    s.plan.sequenceParallel = false;
    s.plan.flashAttention = false;
    const auto where = refusal(s, ExportFormat::Torchtitan);
    EXPECT_EQ(where.size(), 3u);
    EXPECT_TRUE(contains(where, "/plan/schedule"));
    EXPECT_TRUE(contains(where, "/plan/sequence_parallel"));
    EXPECT_TRUE(contains(where, "/plan/flash_attention"));
}

TEST(ExportTorchtitan, ContextParallelNeedsShardingOverCp) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.dp = 2;
    s.plan.cp = 2;
    s.plan.zeroStage = 3;
    s.plan.zeroOverCp = false;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/zero_over_cp"});
    s.plan.zeroOverCp = true;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.context_parallel_degree"), "2");
    EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "2");
}

// ---------------------------------------------------------------------------------------------- all formats

TEST(Export, InvalidPlanIsRefusedBeforeExport) {
    Scenario s = defaultScenario();
    s.plan.tp = 7;
    for (auto f : {ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/tp"));
}

} // namespace
} // namespace tessel::sim
