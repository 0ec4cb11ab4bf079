// Published training runs in NVIDIA's stack's own words: Megatron-core's activation offloading and NCCL user buffers,
// Transformer Engine's FP8, NeMo's recipes (its optimizer state, its launcher's attention, Nemotron as its configs build
// it), read as those frameworks run them (`tessel validate`; other frameworks: validation_frameworks_test.cpp).
#include "validation_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {
namespace {
using test::llama405;
using test::load;
using test::mentions;
using test::record;
using test::refusalOf;

TEST(ValidationRecord, MegatronCpuOffloadingIsReadAsLayerActivationOffload) {
    nlohmann::json r = record(); // 32 GPUs, pp 2 in the record: CPU offloading needs pp 1
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 8;
    r["plan"]["recompute"] = nullptr;
    r["plan"]["cpu_offloading"] = true;
    r["plan"]["cpu_offloading_num_layers"] = 6;
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.offloadActivationLayers, 6);
    EXPECT_EQ(c.scenario.plan.recompute, Recompute::None);
    EXPECT_TRUE(mentions(c.assumptions, "recompute none: Megatron-core's CPU offloading"));
    // cpu_offloading false leaves the count unread.
    r["plan"]["cpu_offloading"] = false;
    EXPECT_EQ(load(r).scenario.plan.offloadActivationLayers, 0);
    // A count that is no layer count is refused, naming the field, not ignored.
    for (const int bad : {-1, 32}) { // the record's model has 32 layers
        r["plan"]["cpu_offloading"] = true;
        r["plan"]["cpu_offloading_num_layers"] = bad;
        const std::string refusal = refusalOf(r);
        EXPECT_NE(refusal.find("/plan/cpu_offloading_num_layers"), std::string::npos) << refusal;
    }
}

TEST(ValidationRecord, Fp8IsTransformerEnginesRecipeOnHopperAndBf16Elsewhere) {
    nlohmann::json fp8 = llama405(8192, 1, 8192);
    fp8["system"]["precision"] = "FP8 (Transformer Engine)";
    EXPECT_EQ(load(fp8).scenario.plan.precision, "fp8");
    nlohmann::json a100 = record();
    a100["system"]["precision"] = "fp8";
    const ValidationCase c = load(a100);
    EXPECT_EQ(c.scenario.plan.precision, "megatron");
    EXPECT_TRUE(mentions(c.assumptions, "no FP8 tensor cores"));
    // MXFP8 (Blackwell's block-scaled FP8) runs the FP8 recipe, and the record says what that leaves out.
    fp8["system"]["precision"] = "MXFP8";
    const ValidationCase mx = load(fp8);
    EXPECT_EQ(mx.scenario.plan.precision, "fp8");
    EXPECT_EQ(fp8RecipeOf(mx.scenario.plan.framework), "mxfp8");
    EXPECT_TRUE(mentions(mx.assumptions, "costed as delayed scaling's cast and transpose"));
    // The scaling recipe, under the names the performance tables and the frameworks give it; unstated, delayed.
    for (const auto& [precision, recipe] : std::vector<std::pair<const char*, const char*>>{
             {"FP8-CS", "tensorwise"}, {"fp8_cs", "tensorwise"}, {"FP8 (current scaling)", "tensorwise"},
             {"FP8-MX", "mxfp8"}, {"FP8-DS", "delayed"}, {"FP8 blockwise", "blockwise"}, {"FP8", "delayed"}}) {
        fp8["system"]["precision"] = precision;
        const ValidationCase read = load(fp8);
        EXPECT_EQ(read.scenario.plan.precision, "fp8") << precision;
        EXPECT_EQ(fp8RecipeOf(read.scenario.plan.framework), recipe) << precision;
    }
    EXPECT_FALSE(load(fp8).scenario.plan.framework.fp8Recipe); // "FP8": not stated, not written
    fp8["plan"]["fp8_recipe"] = "tensorwise"; // Megatron-core's --fp8-recipe
    EXPECT_EQ(fp8RecipeOf(load(fp8).scenario.plan.framework), "tensorwise");
    fp8["plan"]["fp8_recipe"] = "cs"; // NeMo's and Megatron-Bridge's performance scripts' name
    EXPECT_TRUE(mentions(load(fp8).assumptions, "current scaling"));
    fp8["plan"]["fp8_recipe"] = "custom"; // a recipe tessel has no costs for: said, not dropped
    EXPECT_TRUE(mentions(load(fp8).assumptions, "names no scaling recipe tessel costs"));
    fp8["plan"].erase("fp8_recipe");
    // 4-bit training on a GPU without FP4 tensor cores (this record's H100), MXFP4 and integer 4-bit training:
    // refused with the field named, never read as BF16 (NVFP4 on Blackwell: NvFp4IsTransformerEnginesRecipeOnBlackwell).
    for (const auto& [fp4, why] : std::vector<std::pair<const char*, const char*>>{
             {"NVFP4", "NVFP4 needs FP4 tensor cores"},
             {"MXFP4 (Transformer Engine)", "MXFP4 training is not modelled"},
             {"INT4 QAT", "integer 4-bit training is not modelled"}}) {
        fp8["system"]["precision"] = fp4;
        const std::string refusal = refusalOf(fp8);
        EXPECT_NE(refusal.find("/system/precision"), std::string::npos) << refusal;
        EXPECT_NE(refusal.find(why), std::string::npos) << refusal;
    }
    // Megatron-LM's and Transformer Engine's FP8 switches in the plan, beside a bf16 precision (they had been passed
    // over: a BF16 run); false or "none" say nothing.
    fp8["system"]["precision"] = "bf16";
    for (const auto& [key, value] : std::vector<std::pair<const char*, nlohmann::json>>{
             {"fp8", "hybrid"}, {"fp8", true}, {"fp8_format", "e4m3"}, {"fp8_recipe", "delayed"}}) {
        nlohmann::json withSwitch = fp8;
        withSwitch["plan"][key] = value;
        const ValidationCase on = load(withSwitch);
        EXPECT_EQ(on.scenario.plan.precision, "fp8") << key;
        EXPECT_TRUE(mentions(on.assumptions, std::string("FP8 read from plan/") + key)) << key;
    }
    fp8["plan"]["fp8"] = false;
    fp8["plan"]["fp8_recipe"] = "none";
    EXPECT_EQ(load(fp8).scenario.plan.precision, "megatron");
}

// Nemotron-3 / -4 as NeMo's launcher builds them: squared ReLU, LayerNorm, rotary, no biases, untied, no dropout.
TEST(ValidationRecord, NemotronIsReadAsNemosConfigsBuildIt) {
    nlohmann::json r = record();
    r["model"]["name"] = "Nemotron-4 340B";
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.model.activation, Activation::SquaredRelu);
    EXPECT_EQ(c.scenario.model.norm, NormKind::LayerNorm);
    EXPECT_EQ(c.scenario.model.position, PositionEmbedding::Rope);
    EXPECT_FALSE(c.scenario.model.linearBias);
    EXPECT_FALSE(c.scenario.model.tiedEmbeddings);
    EXPECT_EQ(c.scenario.model.dropout, 0.0);
    EXPECT_TRUE(mentions(c.assumptions, "Nemotron conventions"));
    r["model"]["name"] = "GPT 7B";
    r["model"]["activation"] = "squared-relu";
    EXPECT_EQ(load(r).scenario.model.activation, Activation::SquaredRelu);
    // HuggingFace's name for it: hidden_act "silu" (behind a gate projection) is SwiGLU, "gelu_new" GELU.
    r["model"].erase("activation");
    r["model"]["hidden_act"] = "silu";
    EXPECT_EQ(load(r).scenario.model.activation, Activation::Swiglu);
    r["model"]["hidden_act"] = "gelu_new";
    EXPECT_EQ(load(r).scenario.model.activation, Activation::Gelu);
}

// NeMo's optimizer state: NeMo 1's distributed_fused_adam keeps the fp32 master as 16-bit remainders (said among the
// assumptions), optim.dtype bf16 keeps bf16 moments and no master, a record that names Megatron-core's optimizer
// keeps the fp32 master.
TEST(ValidationRecord, NemosOptimizerStateAsItsRecipesKeepIt) {
    auto recipe = [](const nlohmann::json& r) { return precisionRecipeOf(load(r).scenario.plan); };
    nlohmann::json nemo = record();
    nemo["plan"]["framework"] = "NeMo";
    nemo["plan"]["framework_version"] = "24.07";
    nemo["plan"]["distributed_optimizer"] = true;
    nemo["plan"].erase("zero");
    EXPECT_EQ(recipe(nemo).masterBytes, 2);
    EXPECT_EQ(recipe(nemo).optimizerBytesPerParameter(), 10);
    EXPECT_TRUE(mentions(load(nemo).assumptions, "store_param_remainders = true"));
    nlohmann::json mcore = nemo;
    mcore["plan"]["store_param_remainders"] = false;
    EXPECT_EQ(recipe(mcore).masterBytes, 4);
    EXPECT_FALSE(mentions(load(mcore).assumptions, "store_param_remainders"));
    for (const char* key : {"optimizer_dtype", "optim_dtype"}) {
        nlohmann::json half = nemo;
        half["plan"][key] = "bf16";
        EXPECT_EQ(recipe(half).optimizerBytesPerParameter(), 4) << key;
        EXPECT_EQ(recipe(half).masterBytes, 0) << key;
        half["plan"][key] = "fp16"; // not a dtype tessel costs: said, and read as fp32
        EXPECT_EQ(recipe(half).optimizerBytesPerParameter(), 10) << key;
        EXPECT_TRUE(mentions(load(half).assumptions, "is not a state dtype tessel costs")) << key;
    }
    // Megatron-LM's own records keep the fp32 master and say nothing of it.
    nlohmann::json megatron = record();
    megatron["plan"]["distributed_optimizer"] = true;
    megatron["plan"].erase("zero");
    EXPECT_EQ(recipe(megatron).masterBytes, 4);
    EXPECT_FALSE(mentions(load(megatron).assumptions, "store_param_remainders"));
}

// NeMo-Framework-Launcher's config.yaml of the 24.01-24.07 tags turned cuDNN's attention off (NVTE_FUSED_ATTN: 0), so
// a NeMo run of those containers that names no kernel ran flash-attn 2 through Transformer Engine; 24.09 on, cuDNN's.
TEST(ValidationRecord, NemosLauncherRanFlashAttention2InItsEarly2024Containers) {
    nlohmann::json nemo = record();
    nemo["system"]["gpu"] = "H100 80GB SXM";
    nemo["plan"]["framework"] = "NeMo";
    for (const char* version : {"24.01", "24.03.01", "24.05", "24.07"}) {
        nemo["plan"]["framework_version"] = version;
        const ValidationCase c = load(nemo);
        EXPECT_EQ(c.scenario.plan.attentionKernel, "flash2") << version;
        EXPECT_TRUE(mentions(c.assumptions, "NVTE_FUSED_ATTN=0")) << version;
    }
    nemo["plan"]["attention"] = "FlashAttention"; // its version unstated: the launcher's still
    EXPECT_EQ(load(nemo).scenario.plan.attentionKernel, "flash2");
    nemo["plan"]["attention"] = "cuDNN fused attention"; // stated, the record wins
    EXPECT_EQ(load(nemo).scenario.plan.attentionKernel, "cudnn");
    nemo["plan"].erase("attention");
    for (const char* version : {"24.09", "24.12", "23.11"}) {
        nemo["plan"]["framework_version"] = version;
        const ValidationCase c = load(nemo);
        EXPECT_NE(resolveAttentionKernel(c.scenario.cluster.gpu, c.scenario.plan.attentionKernel), "flash2") << version;
        EXPECT_FALSE(mentions(c.assumptions, "NVTE_FUSED_ATTN")) << version;
    }
    // A GPU without flash-attn 2 figures is not told it ran it (a V100 runs attention unfused).
    nemo["plan"]["framework_version"] = "24.07";
    nlohmann::json volta = nemo;
    volta["system"]["gpu"] = "V100 32GB";
    volta["system"]["precision"] = "fp16";
    const ValidationCase onVolta = load(volta);
    EXPECT_FALSE(onVolta.scenario.plan.flashAttention);
    EXPECT_FALSE(mentions(onVolta.assumptions, "NVTE_FUSED_ATTN"));
    // Megatron-LM of 2024 is not NeMo's launcher: Transformer Engine's own choice, cuDNN's on Hopper.
    nemo["plan"]["framework"] = "Megatron-LM";
    nemo["plan"]["framework_version"] = "24.07";
    const ValidationCase megatron = load(nemo);
    EXPECT_EQ(resolveAttentionKernel(megatron.scenario.cluster.gpu, megatron.scenario.plan.attentionKernel), "cudnn");
}

// NCCL user buffers: the record's nccl_ub (Megatron-core's DistributedDataParallelConfig key) is the plan's; a value
// that is neither true nor false is said; the two Megatron-Bridge H100 FSDP rows state it, from their recipes.
TEST(ValidationRecord, NcclUserBuffersFromThePlanKey) {
    nlohmann::json r = record();
    EXPECT_FALSE(ncclUbOf(load(r).scenario.plan.framework));
    r["plan"]["nccl_ub"] = true;
    EXPECT_TRUE(ncclUbOf(load(r).scenario.plan.framework));
    r["plan"]["nccl_ub"] = "maybe";
    const ValidationCase odd = load(r);
    EXPECT_FALSE(ncclUbOf(odd.scenario.plan.framework));
    EXPECT_TRUE(mentions(odd.assumptions, "nccl_ub \"maybe\" is neither true nor false"));
    const std::string shared = defaultValidationFile();
    const std::string dir = shared.substr(0, shared.rfind('/') + 1);
    int stated = 0;
    for (const auto& rec : loadValidationFile(dir + "check_nemo_h100_fp8.json")) {
        ASSERT_TRUE(rec.validationCase) << rec.id;
        if (ncclUbOf(rec.validationCase->scenario.plan.framework)) ++stated;
    }
    EXPECT_EQ(stated, 2);
    // Where such a row does not say, its recipe is read: Megatron-Bridge's H100 Megatron FSDP rows from the 25.09
    // container on register their buffers; its 25.07 rows, its GB200 FSDP rows and its distributed-optimizer rows do not.
    const nlohmann::json file = nlohmann::json::parse(std::ifstream(dir + "check_nemo_h100_fp8.json"));
    nlohmann::json row;
    for (const auto& rec : file)
        if (rec.at("id") == "mb2511-llama3-8b-fsdp") row = rec;
    ASSERT_FALSE(row.is_null());
    row["plan"].erase("nccl_ub");
    const ValidationCase inferred = load(row);
    EXPECT_TRUE(ncclUbOf(inferred.scenario.plan.framework));
    EXPECT_TRUE(mentions(inferred.assumptions, "nccl_ub: Megatron FSDP's buffers registered with NCCL"));
    nlohmann::json older = row;
    older["plan"]["framework_version"] = "25.07";
    EXPECT_FALSE(ncclUbOf(load(older).scenario.plan.framework));
    nlohmann::json gb200 = row;
    gb200["system"]["gpu"] = "GB200";
    EXPECT_FALSE(ncclUbOf(load(gb200).scenario.plan.framework));
    nlohmann::json zero1 = row;
    zero1["plan"]["zero"] = 1;
    zero1["plan"]["framework"] = "Megatron-Bridge";
    EXPECT_FALSE(ncclUbOf(load(zero1).scenario.plan.framework));
}

// Megatron-core's use_transformer_engine_op_fuser (MLPerf's USE_TE_OPS) read under either name; unstated,
// off.
TEST(ValidationRecord, TheTransformerEngineOpFuserIsReadUnderEitherName) {
    nlohmann::json r = record();
    EXPECT_FALSE(teOpFuserOf(load(r).scenario.plan.framework));
    r["plan"]["use_transformer_engine_op_fuser"] = true;
    EXPECT_TRUE(teOpFuserOf(load(r).scenario.plan.framework));
    r["plan"].erase("use_transformer_engine_op_fuser");
    r["plan"]["te_op_fuser"] = "maybe"; // not a boolean: said, off taken
    const ValidationCase unclear = load(r);
    EXPECT_FALSE(teOpFuserOf(unclear.scenario.plan.framework));
    EXPECT_TRUE(mentions(unclear.assumptions, "te_op_fuser \"maybe\" is neither true nor false"));
}

// NVFP4 on Blackwell: Transformer Engine's NVFP4BlockScaling, its switches read from the plan as Megatron-core and
// Transformer Engine name them, and said; MXFP4 on the same GPU is still refused.
TEST(ValidationRecord, NvFp4IsTransformerEnginesRecipeOnBlackwell) {
    nlohmann::json r = record();
    r["system"]["gpu"] = "B200";
    r["system"]["precision"] = "NVFP4";
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.precision, "nvfp4");
    EXPECT_TRUE(mentions(c.assumptions, "NVFP4 as Transformer Engine runs it"));
    EXPECT_TRUE(mentions(c.assumptions, "the Hadamard transform, stochastically rounded gradients"));
    EXPECT_FALSE(fp4ParamGatherOf(c.scenario.plan.framework));
    r["plan"]["fp4_param_gather"] = true;
    r["plan"]["nvfp4_rht"] = false;
    r["plan"]["nvfp4_stochastic_rounding"] = false;
    const ValidationCase vanilla = load(r);
    EXPECT_TRUE(fp4ParamGatherOf(vanilla.scenario.plan.framework));
    EXPECT_FALSE(nvfp4RhtOf(vanilla.scenario.plan.framework));
    EXPECT_FALSE(nvfp4StochasticRoundingOf(vanilla.scenario.plan.framework));
    EXPECT_TRUE(mentions(vanilla.assumptions, "no Hadamard transform, gradients rounded to nearest, NVFP4 parameters"));
    r["plan"]["nvfp4_rht"] = "sometimes"; // not a boolean: said, the default taken
    const ValidationCase unclear = load(r);
    EXPECT_TRUE(nvfp4RhtOf(unclear.scenario.plan.framework));
    EXPECT_TRUE(mentions(unclear.assumptions, "nvfp4_rht \"sometimes\" is neither true nor false"));
    // The weights kept as NVFP4 parameters: 1.125 B a linear weight in place of bf16's 2 B and no copy beside them.
    const PrecisionRecipe kept = precisionRecipeOf(vanilla.scenario.plan);
    EXPECT_TRUE(kept.quantizedParams);
    EXPECT_DOUBLE_EQ(kept.quantizedWeightCopyBytes, 0.0);
    EXPECT_DOUBLE_EQ(kept.paramGatherBytes(), 0.5);
    // Megatron-core's BF16 end layers read into the plan (its default of one layer where a count is unstated);
    // Transformer Engine's FP8 attention said, not costed.
    r["plan"]["first_last_layers_bf16"] = true;
    r["plan"]["num_layers_at_end_in_bf16"] = 4;
    r["plan"]["fp8_dot_product_attention"] = true;
    const ValidationCase said = load(r);
    EXPECT_EQ(said.scenario.plan.bf16LayersAtStart, 1);
    EXPECT_EQ(said.scenario.plan.bf16LayersAtEnd, 4);
    EXPECT_TRUE(mentions(said.assumptions, "first 1 and last 4 layers in BF16 (Megatron-core), costed as the megatron recipe"));
    EXPECT_TRUE(mentions(said.assumptions, "fp8_dot_product_attention: Transformer Engine's FP8 attention is not costed"));
    r["plan"]["num_layers_at_end_in_bf16"] = "many"; // no count: refused, named
    EXPECT_NE(refusalOf(r).find("/plan/num_layers_at_end_in_bf16"), std::string::npos);
    r["plan"]["num_layers_at_end_in_bf16"] = 4;
    nlohmann::json unclearEnds = r; // neither true nor false: said, nothing read
    unclearEnds["plan"]["first_last_layers_bf16"] = "maybe";
    const ValidationCase unclearRead = load(unclearEnds);
    EXPECT_FALSE(unclearRead.scenario.plan.bf16EndLayers());
    EXPECT_TRUE(mentions(unclearRead.assumptions, "first_last_layers_bf16 \"maybe\" is neither true nor false"));
    nlohmann::json bf16 = r; // a bf16 run has no quantized context to keep layers out of: said, nothing read
    bf16["system"]["precision"] = "bf16";
    const ValidationCase plain = load(bf16);
    EXPECT_FALSE(plain.scenario.plan.bf16EndLayers());
    EXPECT_TRUE(mentions(plain.assumptions, "nothing is kept in BF16 apart"));
    r["system"]["precision"] = "MXFP4";
    EXPECT_NE(refusalOf(r).find("MXFP4 training is not modelled"), std::string::npos);
}
} // namespace
} // namespace tessel::sim
