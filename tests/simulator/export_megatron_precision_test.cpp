// Export of a plan's numerics as a Megatron-LM launch script: the 16-bit type and its main gradients, the optimizer's
// state, FP8 and NVFP4 as Transformer Engine runs them through Megatron-core, and the recipes no format runs, refused
// at their pointers.
#include "export_support.hpp"

#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using namespace export_test;

TEST(ExportMegatron, AnFp16PlanIsWrittenFp16WithItsMainGradients) {
    // --fp16 keeps fp16 main gradients unless --accumulate-allreduce-grads-in-fp32 (only --bf16 forces it on).
    Scenario s = defaultScenario();
    s.plan.framework.halfDtype = "fp16";
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--fp16"));
    EXPECT_FALSE(a.has("--bf16"));
    EXPECT_TRUE(a.has("--accumulate-allreduce-grads-in-fp32")) << "the megatron recipe's fp32 main gradients";
    s.plan.framework.gradReduceInFp32 = false;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_FALSE(a.has("--accumulate-allreduce-grads-in-fp32"));
    EXPECT_FALSE(a.has("--grad-reduce-in-bf16"));
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

// NVFP4 as Megatron-core takes it: Transformer Engine, --fp4-format e2m1 --fp4-recipe nvfp4, --fp4-param-gather where
// the plan keeps NVFP4 parameters, and Transformer Engine's switches on the launch line where the plan turns them off.
TEST(ExportMegatron, Nvfp4IsWrittenAsMegatronCoresFp4Flags) {
    Scenario s = preset("llama3-8b-h100");
    s.cluster = loadClusterRef("dgx-b200", "/cluster");
    s.plan.precision = "nvfp4";
    MegatronArgs a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--transformer-impl"), "transformer_engine");
    EXPECT_EQ(a.at("--fp4-format"), "e2m1");
    EXPECT_EQ(a.at("--fp4-recipe"), "nvfp4");
    EXPECT_TRUE(a.has("--bf16"));
    EXPECT_FALSE(a.has("--fp8-format"));
    EXPECT_FALSE(a.has("--fp4-param-gather"));
    EXPECT_EQ(a.launch.find("NVTE_NVFP4"), std::string::npos);
    s.plan.framework.fp4ParamGather = true;
    s.plan.framework.nvfp4Rht = false;
    s.plan.framework.nvfp4StochasticRounding = false;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--fp4-param-gather"));
    EXPECT_NE(a.launch.find("NVTE_NVFP4_DISABLE_RHT=1"), std::string::npos) << a.launch;
    EXPECT_NE(a.launch.find("NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING=1"), std::string::npos) << a.launch;
    EXPECT_FALSE(a.has("--first-last-layers-bf16"));
    // Transformer Engine's op fuser: TransformerConfig's field as its flag, written only where the plan turns it on.
    EXPECT_FALSE(a.has("--use-transformer-engine-op-fuser"));
    s.plan.framework.teOpFuser = true;
    EXPECT_TRUE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-transformer-engine-op-fuser"));
    s.plan.framework.teOpFuser.reset();
    s.plan.bf16LayersAtStart = 1;
    s.plan.bf16LayersAtEnd = 2;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--first-last-layers-bf16"));
    EXPECT_EQ(a.at("--num-layers-at-start-in-bf16"), "1");
    EXPECT_EQ(a.at("--num-layers-at-end-in-bf16"), "2");
    // DeepSpeed's config and torchtitan have no such recipe: refused at /plan/precision.
    for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Torchtitan}) {
        try {
            (void)exportPlan(s, f);
            ADD_FAILURE() << "exported";
        } catch (const InputError& err) {
            bool named = false;
            for (const auto& pr : err.problems()) named |= pr.where == "/plan/precision";
            EXPECT_TRUE(named);
        }
    }
}

TEST(ExportFrameworks, Fp8IsRefusedByDeepSpeedAndConvertedByTorchtitan) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.precision = "fp8";
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/precision"));
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp_fp8"; // torchao's Float8Linear under FSDP2
    s.plan.framework.reshardAfterForward = false;
    // FP8 all-gathers as the plan's fp8_param_gather resolves: off unless stated for a generic plan...
    std::string toml = exportPlan(s, ExportFormat::Torchtitan);
    EXPECT_NE(toml.find("converters = [\"float8\"]"), std::string::npos);
    EXPECT_NE(toml.find("enable_fsdp_float8_all_gather = false"), std::string::npos);
    // ...on for torchtitan, as its float8 guide launches it.
    s.plan.framework.name = "torchtitan";
    toml = exportPlan(s, ExportFormat::Torchtitan);
    EXPECT_NE(toml.find("converters = [\"float8\"]"), std::string::npos);
    EXPECT_NE(toml.find("enable_fsdp_float8_all_gather = true"), std::string::npos);
    EXPECT_NE(toml.find("fsdp_reshard_after_forward = \"never\""), std::string::npos);
    // Transformer Engine's recipe (bf16 weights, an fp32 master and cached FP8 copies) is not what torchtitan keeps.
    s.plan.precision = "fp8";
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("use precision fsdp_fp8"), std::string::npos);
    s.plan.precision = "fsdp_fp8";
    // Megatron-LM cannot run torchao's recipe and says which to use.
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/precision"));
}

TEST(ExportMegatron, CpuRecipeIsRefused) {
    EXPECT_EQ(refusal(preset("tiny-cpu"), ExportFormat::Megatron),
              std::vector<std::string>{"/plan/precision"});
}

} // namespace
} // namespace tessel::sim
