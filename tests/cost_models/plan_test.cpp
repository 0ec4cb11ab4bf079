// Tests of plan parsing, precision recipes and validation against model and cluster.
#include "test_support.hpp"

#include "tessel/cost/plan.hpp"

#include <gtest/gtest.h>

#include <set>

namespace tessel {
namespace {

// validatePlan finds exactly one problem, at `where`, whose message holds `fragment`.
void expectOneProblem(const ModelConfig& m, const ClusterConfig& c, const Plan& plan, const std::string& where,
                      const std::string& fragment) {
    ProblemList problems;
    validatePlan(m, c, plan, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, where);
    EXPECT_NE(problems.items()[0].message.find(fragment), std::string::npos) << problems.items()[0].message;
}

TEST(PrecisionRecipes, BytesPerParameterAreTheNamedOnes) {
    EXPECT_EQ(findPrecisionRecipe("megatron")->bytesPerParameter(), 18);
    EXPECT_EQ(findPrecisionRecipe("mixed")->bytesPerParameter(), 16);
    EXPECT_EQ(findPrecisionRecipe("bf16_no_master")->bytesPerParameter(), 12);
    EXPECT_EQ(findPrecisionRecipe("fp32")->bytesPerParameter(), 16);
    EXPECT_EQ(findPrecisionRecipe("cpu_fp64")->bytesPerParameter(), 32);
    EXPECT_EQ(findPrecisionRecipe("cpu_fp32")->bytesPerParameter(), 16);
    // amp: torch.autocast over fp32 weights, which are the master; fp32 gradients, reduced and gathered as kept.
    EXPECT_EQ(findPrecisionRecipe("amp")->bytesPerParameter(), 16);
    EXPECT_TRUE(findPrecisionRecipe("amp")->autocast);
    EXPECT_EQ(findPrecisionRecipe("amp")->paramGatherBytes(), 4);
    EXPECT_EQ(findPrecisionRecipe("amp")->gradReduceBytes(), 4);
    EXPECT_FALSE(findPrecisionRecipe("mixed")->autocast);
    EXPECT_EQ(findPrecisionRecipe("nope"), nullptr);
}

TEST(PrecisionRecipes, MainGradientsFollowTheFramework) {
    FrameworkSettings megatron;
    megatron.name = "megatron";
    EXPECT_EQ(precisionRecipeOf("megatron", megatron).bytesPerParameter(), 18);
    FrameworkSettings nemo;
    nemo.name = "nemo";
    nemo.version = "24.07";
    // NeMo's performance recipes: bf16 main gradients, reduced in bf16.
    EXPECT_EQ(precisionRecipeOf("megatron", nemo).bytesPerParameter(), 16);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).gradBytes, 2);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).gradReduceBytes(), 2);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).quantizedWeightCopyBytes, 2);
    // Recipes without Megatron-style fp32 main gradients are what their names say under any framework.
    EXPECT_EQ(precisionRecipeOf("fsdp", nemo).gradReduceBytes(), 4);
    EXPECT_EQ(precisionRecipeOf("mixed", megatron).gradBytes, 2);
    nemo.gradReduceInFp32 = true;
    EXPECT_EQ(precisionRecipeOf("megatron", nemo).bytesPerParameter(), 18);
    // FP8 parameters (NeMo from 24.09): no bf16 weights beside the FP8 ones, gathered at 1 B.
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).quantizedWeightCopyBytes, 2); // 24.07
    nemo.version = "25.11";
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).quantizedWeightCopyBytes, 0);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).paramGatherBytes(), 1);
    EXPECT_EQ(precisionRecipeOf("megatron", nemo).paramGatherBytes(), 2); // bf16 runs are untouched
    // MXFP8 parameters are gathered in bf16 through the gradient buffer and quantized after (Megatron-core's
    // shared buffer), still kept as MXFP8 alone.
    nemo.fp8Recipe = "mxfp8";
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).paramGatherBytes(), 2);
    EXPECT_TRUE(precisionRecipeOf("fp8", nemo).quantizedParams);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).quantizedWeightCopyBytes, 0);
    nemo.fp8Recipe = "tensorwise";
    EXPECT_EQ(precisionRecipeOf("fp8", nemo).paramGatherBytes(), 1);
    nemo.fp8Recipe.reset();
    EXPECT_THROW(precisionRecipeOf("nope", megatron), InputError);
}

// What the distributed optimizer keeps (FORMULAS.md §2): NeMo 1's Apex DistributedFusedAdam keeps the fp32 master as
// the 16 low bits the bf16 weights lack, or with optim.dtype bf16 no master and bf16 moments; NeMo 2 and
// Megatron-Bridge turn Megatron-core's precision-aware optimizer (remainders) on for bf16 runs only.
TEST(PrecisionRecipes, TheOptimizersStateFollowsTheFramework) {
    FrameworkSettings nemo;
    nemo.name = "nemo";
    nemo.version = "24.07";
    // bf16 weights 2 + bf16 main grads 2 + remainders 2 + moments 4 + 4 under ZeRO-1; no ZeRO: Apex FusedAdam's fp32 master.
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).bytesPerParameter(), 14);
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).optimizerBytesPerParameter(), 10);
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 0).optimizerBytesPerParameter(), 12);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo, 1).masterBytes, 2);  // 24.07: no fp8_params, bf16 weights to complete
    nemo.version = "24.12";
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).masterBytes, 2);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo, 1).masterBytes, 4);  // fp8_params from 24.09: store_params, fp32
    nemo.fp8ParamGather = false;
    EXPECT_EQ(precisionRecipeOf("fp8", nemo, 1).masterBytes, 2);
    nemo.fp8ParamGather.reset();
    nemo.version = "25.04";  // NeMo 2's performance scripts before the precision-aware optimizer
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).masterBytes, 4);
    for (const char* v : {"25.07", "26.02", ""}) {
        nemo.version = v;
        EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).masterBytes, 2) << v;  // bf16: precision-aware
        nemo.fp8ParamGather = false;
        EXPECT_EQ(precisionRecipeOf("fp8", nemo, 1).masterBytes, 4) << v;       // FP8: not
        nemo.fp8ParamGather.reset();
    }
    nemo.storeParamRemainders = false;  // stated, the plan wins (Megatron-core's --no-store-param-remainders)
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).masterBytes, 4);
    // optim.dtype bf16: moments 2 + 2, no master beside the bf16 weights; with FP8 parameters a bf16 copy (store_params).
    nemo.optimizerDtype = "bf16";
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 1).optimizerBytesPerParameter(), 4);
    EXPECT_EQ(precisionRecipeOf("fp8", nemo, 1).optimizerBytesPerParameter(), 6);
    EXPECT_EQ(precisionRecipeOf("megatron", nemo, 0).optimizerBytesPerParameter(), 12);  // Apex FusedAdam, no ZeRO
    // Other frameworks keep an fp32 master unless a plan says otherwise; recipes without one are untouched.
    FrameworkSettings megatron;
    megatron.name = "megatron";
    EXPECT_EQ(precisionRecipeOf("megatron", megatron, 1).masterBytes, 4);
    megatron.storeParamRemainders = true;
    EXPECT_EQ(precisionRecipeOf("megatron", megatron, 1).masterBytes, 2);
    EXPECT_EQ(precisionRecipeOf("fsdp", megatron, 3).masterBytes, 0);
    EXPECT_EQ(precisionRecipeOf("fp32", megatron, 1).masterBytes, 0);
    // The plan keys round-trip and a bad dtype is named at its pointer.
    ProblemList problems;
    const Plan parsed = parsePlan({{"framework", "nemo"}, {"store_param_remainders", false}, {"optimizer_dtype", "bf16"}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(planToJson(parsed)["store_param_remainders"], false);
    EXPECT_EQ(planToJson(parsed)["optimizer_dtype"], "bf16");
    (void)parsePlan({{"optimizer_dtype", "fp16"}}, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.items().front().where.find("/plan/optimizer_dtype"), std::string::npos);
    // Stated where they would change nothing (no distributed optimizer, no fp32 master): refused, by pointer.
    const ModelConfig model = test::preset("llama3-8b");
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    Plan plan;
    plan.dp = 8;
    plan.globalBatch = 8;
    plan.framework.optimizerDtype = "bf16";
    plan.framework.storeParamRemainders = true;
    ProblemList refused;
    validatePlan(model, cluster, plan, "/plan", refused);
    std::set<std::string> where;
    for (const auto& pr : refused.items()) where.insert(pr.where);
    EXPECT_EQ(where, (std::set<std::string>{"/plan/optimizer_dtype", "/plan/store_param_remainders"}));
    plan.zeroStage = 1;
    plan.precision = "fsdp";
    ProblemList fsdp;
    validatePlan(model, cluster, plan, "/plan", fsdp);
    EXPECT_EQ(fsdp.items().size(), 2u);
    plan.precision = "megatron";
    ProblemList ok;
    validatePlan(model, cluster, plan, "/plan", ok);
    EXPECT_TRUE(ok.empty());
    // A model held in bf16 (bf16_no_master: 2 + 2 + 0 + 2 x 4 = 12 B a parameter) whose torch.optim state follows its
    // parameters' dtype: the moments in bf16, 8 B in all, at any ZeRO stage (FSDP's ZeRO-3 here, none below).
    FrameworkSettings pure;
    pure.optimizerDtype = "bf16";
    const PrecisionRecipe held = precisionRecipeOf("bf16_no_master", pure, 3);
    EXPECT_EQ(held.weightBytes + held.gradBytes + held.masterBytes + 2 * held.momentBytes, 8);
    EXPECT_EQ(precisionRecipeOf("bf16_no_master", FrameworkSettings{}, 3).momentBytes, 4);
    plan.precision = "bf16_no_master";
    plan.framework.storeParamRemainders.reset();
    for (int zero : {0, 3}) {
        plan.zeroStage = zero;
        ProblemList noMaster;
        validatePlan(model, cluster, plan, "/plan", noMaster);
        EXPECT_TRUE(noMaster.empty()) << (noMaster.empty() ? "" : noMaster.items().front().message);
    }
}

TEST(PlanJson, RoundTripsEveryField) {
    Plan p;
    p.tp = 2;
    p.pp = 4;
    p.dp = 8;
    p.cp = 2;
    p.ep = 2;
    p.vpp = 3;
    p.microBatch = 2;
    p.globalBatch = 256;
    p.zeroStage = 3;
    p.zeroOverCp = false; // not the default
    p.zeroReplicas = 2;   // nor this
    p.recompute = Recompute::Full;
    p.recomputeLayers = 3; // written only when set
    p.offloadActivationLayers = 5; // likewise
    p.sequenceParallel = true;
    p.flashAttention = false;
    p.schedule = Schedule::Interleaved1F1B;
    p.precision = "mixed";
    p.rankOrder = {ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp};
    ProblemList problems;
    Plan back = parsePlan(planToJson(p), "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(planToJson(back), planToJson(p));
    EXPECT_EQ(back.rankOrderString(), "dp-tp-cp-ep-pp");
}

TEST(PlanJson, ZeroShardsOverContextParallelRanksUnlessTold) {
    ProblemList problems;
    EXPECT_TRUE(parsePlan(nlohmann::json{{"cp", 2}, {"dp", 4}, {"zero_stage", 1}}, "/plan", problems).zeroOverCp);
    const Plan p = parsePlan(nlohmann::json{{"cp", 2}, {"dp", 4}, {"zero_stage", 1}, {"zero_over_cp", false}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_FALSE(p.zeroOverCp);
    EXPECT_EQ(p.zeroShardSize(), 4);
}

// A plan that names no precision runs its framework's recipe: torchtitan's fp32 parameters sharded and gathered in
// bf16 where it shards, autocast over replicated ones with data parallelism alone, fp32 with tp or pp and no
// sharding; PyTorch FSDP's the same but for the last; Megatron-LM's for every other framework. A stated one stays.
TEST(PlanJson, APlanWithoutAPrecisionTakesItsFrameworks) {
    auto precisionOf = [](nlohmann::json plan) {
        ProblemList problems;
        const Plan p = parsePlan(plan, "/plan", problems);
        EXPECT_TRUE(problems.empty());
        return p.precision;
    };
    const nlohmann::json titan{{"framework", "torchtitan"}, {"dp", 8}, {"zero_stage", 3}};
    EXPECT_EQ(precisionOf(titan), "fsdp");
    nlohmann::json replicated = titan;
    replicated["zero_stage"] = 0;
    EXPECT_EQ(precisionOf(replicated), "amp");
    replicated["tp"] = 2;
    EXPECT_EQ(precisionOf(replicated), "fp32");
    nlohmann::json hybrid = titan;
    hybrid["zero_replicas"] = 8; // one GPU a shard group: nothing sharded, so nothing cast
    EXPECT_EQ(precisionOf(hybrid), "amp");
    hybrid["cp"] = 2; // FSDP over dp_shard x cp whenever cp > 1
    EXPECT_EQ(precisionOf(hybrid), "fsdp");
    nlohmann::json fsdp{{"framework", "fsdp"}, {"dp", 8}, {"zero_stage", 3}};
    EXPECT_EQ(precisionOf(fsdp), "fsdp");
    fsdp["zero_stage"] = 0;
    EXPECT_EQ(precisionOf(fsdp), "amp");
    EXPECT_EQ(precisionOf(nlohmann::json{{"dp", 8}, {"zero_stage", 3}}), "megatron");
    EXPECT_EQ(precisionOf(nlohmann::json{{"framework", "deepspeed"}, {"dp", 8}, {"zero_stage", 3}}), "megatron");
    nlohmann::json stated = titan;
    stated["precision"] = "fsdp_fp8";
    EXPECT_EQ(precisionOf(stated), "fsdp_fp8");
}

// Hybrid sharding: replicas of the sharded state; each copy spans the ZeRO group over the replicas.
TEST(PlanValidation, HybridShardingReplicasMustFitTheZeroGroup) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 50000, 2048);
    ClusterConfig c = test::roundCluster(8, 2); // 16 GPUs
    Plan p;
    p.dp = 8;
    p.cp = 2;
    p.zeroStage = 3;
    p.zeroReplicas = 4;
    p.globalBatch = 8;
    EXPECT_EQ(p.zeroShardSize(), 4); // dp x cp = 16 ranks over 4 replicas
    EXPECT_EQ(p.zeroReduceGroupSize(false), 4);
    auto problemsOf = [&](const Plan& plan) {
        ProblemList problems;
        validatePlan(m, c, plan, "/plan", problems);
        std::vector<std::string> out;
        for (const auto& pr : problems.items()) out.push_back(pr.where);
        return out;
    };
    EXPECT_TRUE(problemsOf(p).empty());
    Plan bad = p;
    bad.zeroReplicas = 3; // does not divide 16
    EXPECT_EQ(problemsOf(bad), std::vector<std::string>{"/plan/zero_replicas"});
    bad = p;
    bad.zeroStage = 0; // nothing sharded to replicate
    EXPECT_EQ(problemsOf(bad), std::vector<std::string>{"/plan/zero_replicas"});
    bad = p;
    bad.zeroOverCp = false; // the replicas split dp x cp
    EXPECT_EQ(problemsOf(bad), std::vector<std::string>{"/plan/zero_replicas"});
    // With experts the replicas split the expert data-parallel group too, which spans the CP ranks: cp 2 x dp 8 / ep 4
    // = 4 ranks over 4 replicas fits (dp / ep alone, 2, would not); ep 8 leaves 2 ranks, which 4 replicas cannot split.
    m.moe = MoeConfig{8, 2, 1024};
    Plan experts = p;
    experts.ep = 4;
    EXPECT_EQ(experts.zeroReduceGroupSize(true), 1);
    EXPECT_TRUE(problemsOf(experts).empty());
    experts.ep = 8;
    expectOneProblem(m, c, experts, "/plan/zero_replicas", "(cp x dp / ep = 2)");
    ProblemList problems;
    parsePlan(nlohmann::json{{"zero_replicas", 0}}, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/zero_replicas");
}

TEST(PlanJson, BadValuesNameTheirPointers) {
    auto j = nlohmann::json::parse(R"({"tp": 0, "zero_stage": 4, "recompute": "some", "rank_order": "tp-dp-pp",
                                       "dtype": "fp32", "tensor_parallel": 2})");
    ProblemList problems;
    parsePlan(j, "/plan", problems);
    std::set<std::string> where;
    for (const auto& p : problems.items()) where.insert(p.where);
    EXPECT_EQ(where, (std::set<std::string>{"/plan/tp", "/plan/zero_stage", "/plan/recompute", "/plan/rank_order",
                                            "/plan/dtype", "/plan/tensor_parallel"}));
}

TEST(PlanJson, Fp8RecipeIsTransformerEnginesScalingAndOnlyFp8PlansHaveOne) {
    // Unstated: delayed scaling, Megatron-core's default. Each of Megatron-core's names reads and is written back.
    ProblemList problems;
    EXPECT_EQ(fp8RecipeOf(parsePlan(nlohmann::json{{"precision", "fp8"}}, "/plan", problems).framework), "delayed");
    for (const char* recipe : {"delayed", "tensorwise", "mxfp8", "blockwise"}) {
        const Plan p = parsePlan(nlohmann::json{{"precision", "fp8"}, {"fp8_recipe", recipe}}, "/plan", problems);
        EXPECT_EQ(fp8RecipeOf(p.framework), recipe);
        EXPECT_EQ(planToJson(p)["fp8_recipe"], recipe);
        EXPECT_EQ(fp8RecipeOf(parsePlan(planToJson(p), "/plan", problems).framework), recipe);
    }
    EXPECT_TRUE(problems.empty());
    EXPECT_FALSE(planToJson(parsePlan(nlohmann::json{{"precision", "fp8"}}, "/plan", problems)).contains("fp8_recipe"));
    // A name Megatron-core does not have, and a recipe on a plan without FP8 GEMMs, are named at the key.
    for (const auto& bad : {nlohmann::json{{"precision", "fp8"}, {"fp8_recipe", "current"}},
                            nlohmann::json{{"precision", "megatron"}, {"fp8_recipe", "tensorwise"}}}) {
        ProblemList named;
        (void)parsePlan(bad, "/plan", named);
        ASSERT_EQ(named.items().size(), 1u) << bad.dump();
        EXPECT_EQ(named.items().front().where, "/plan/fp8_recipe");
    }
}

TEST(PlanJson, Fp16NamesTheHalfDtypeAndAContradictionIsAnError) {
    // dtype "fp16" on a 16-bit recipe: the run computes in fp16 (Volta's only 16-bit tensor-core type), the same bytes.
    ProblemList problems;
    const Plan fp16 = parsePlan(nlohmann::json{{"precision", "megatron"}, {"dtype", "fp16"}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(halfDtypeOf(fp16.framework), "fp16");
    const PrecisionRecipe r = precisionRecipeOf(fp16);
    EXPECT_EQ(r.computeDtype, Dtype::Fp16);
    EXPECT_EQ(r.gemmDtype, Dtype::Fp16);
    EXPECT_EQ(r.weightBytes, 2);
    EXPECT_EQ(r.masterBytes, 4);
    EXPECT_EQ(planToJson(fp16)["dtype"], "fp16");
    EXPECT_EQ(planToJson(fp16)["half_dtype"], "fp16");
    // Written back and read again: the same plan.
    ProblemList again;
    EXPECT_EQ(halfDtypeOf(parsePlan(planToJson(fp16), "/plan", again).framework), "fp16");
    EXPECT_TRUE(again.empty());
    // The FP8 recipe's GEMMs stay FP8; its other work runs in fp16.
    ProblemList fp8p;
    const Plan fp8 = parsePlan(nlohmann::json{{"precision", "fp8"}, {"half_dtype", "fp16"}}, "/plan", fp8p);
    EXPECT_EQ(precisionRecipeOf(fp8).gemmDtype, Dtype::Fp8);
    EXPECT_EQ(precisionRecipeOf(fp8).computeDtype, Dtype::Fp16);
    // Unset is bf16, as every recipe is named.
    EXPECT_EQ(precisionRecipeOf(Plan{}).computeDtype, Dtype::Bf16);
    // A dtype and a half_dtype that disagree: an error at half_dtype, never a silent pick.
    ProblemList clash;
    parsePlan(nlohmann::json{{"dtype", "fp16"}, {"half_dtype", "bf16"}}, "/plan", clash);
    ASSERT_EQ(clash.items().size(), 1u);
    EXPECT_EQ(clash.items()[0].where, "/plan/half_dtype");
    ProblemList unknown;
    parsePlan(nlohmann::json{{"half_dtype", "fp8"}}, "/plan", unknown);
    ASSERT_EQ(unknown.items().size(), 1u);
    EXPECT_EQ(unknown.items()[0].where, "/plan/half_dtype");
}

TEST(PlanValidation, AVoltaPlanMustComputeInFp16) {
    // The V100 has fp16 tensor cores and no bf16: a bf16 plan is refused, naming the key that fixes it.
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 51200, 1024);
    const ClusterConfig v100 = test::clusterPreset("dgx1-v100");
    Plan p;
    p.dp = 8;
    p.globalBatch = 8;
    expectOneProblem(m, v100, p, "/plan/precision", "half_dtype \"fp16\"");
    p.framework.halfDtype = "fp16";
    ProblemList fine;
    validatePlan(m, v100, p, "/plan", fine);
    EXPECT_TRUE(fine.empty());
}

TEST(PlanValidation, ListsEveryProblemAtOnce) {
    ModelConfig m = test::megatronStyleModel(10, 1024, 16, 50000, 2048);
    ClusterConfig c = test::roundCluster(8, 2); // 16 GPUs
    Plan p;
    p.tp = 3;           // does not divide 16 heads (nor ffn 4096)
    p.pp = 4;           // does not divide 10 layers
    p.dp = 2;           // 3 x 4 x 2 = 24 != 16
    p.microBatch = 3;
    p.globalBatch = 16; // not a multiple of 3 x 2
    p.ep = 2;           // no MoE block
    ProblemList problems;
    validatePlan(m, c, p, "/plan", problems);
    std::multiset<std::string> where;
    for (const auto& pr : problems.items()) where.insert(pr.where);
    EXPECT_EQ(where.count("/plan/tp"), 2u);
    EXPECT_EQ(where.count("/plan/pp"), 1u);
    EXPECT_EQ(where.count("/plan"), 1u);
    EXPECT_EQ(where.count("/plan/global_batch"), 1u);
    EXPECT_EQ(where.count("/plan/ep"), 1u);
}

TEST(PlanValidation, ScheduleAndVppMustAgree) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 50000, 2048);
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    p.pp = 2;
    p.dp = 4;
    p.globalBatch = 16;
    p.vpp = 2; // but schedule stays 1f1b
    ProblemList problems;
    validatePlan(m, c, p, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/vpp");
    p.schedule = Schedule::Interleaved1F1B;
    ProblemList ok;
    validatePlan(m, c, p, "/plan", ok);
    EXPECT_TRUE(ok.empty()) << ok.items().front().message;
}


// DualPipeV (PyTorch's ScheduleDualPipeV): two chunks a rank, at least 2 pp micro-batches, no Megatron-LM
// first/last-stage counts; each problem at its own field. Its V puts both ends of the model on stage 0.
TEST(PlanValidation, DualPipeVNeedsTwoChunksAndTwoMicroBatchesAStage) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 50000, 2048);
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    p.pp = 2;
    p.dp = 4;
    p.vpp = 2;
    p.globalBatch = 16; // 4 micro-batches = 2 x pp
    p.schedule = Schedule::DualPipeV;
    ProblemList ok;
    validatePlan(m, c, p, "/plan", ok);
    EXPECT_TRUE(ok.empty()) << ok.items().front().message;
    auto problemAt = [&](Plan q) {
        ProblemList problems;
        validatePlan(m, c, q, "/plan", problems);
        return problems.empty() ? std::string() : problems.items().front().where;
    };
    Plan fewer = p;
    fewer.globalBatch = 12;
    EXPECT_EQ(problemAt(fewer), "/plan/global_batch");
    Plan oneChunk = p;
    oneChunk.vpp = 1;
    EXPECT_EQ(problemAt(oneChunk), "/plan/vpp");
    Plan megatronEnds = p;
    megatronEnds.firstStageLayers = 2;
    EXPECT_EQ(problemAt(megatronEnds), "/plan/first_stage_layers");
    // ZB-V: the same V, any number of micro-batches.
    Plan zbv = fewer;
    zbv.schedule = Schedule::ZeroBubbleV;
    EXPECT_EQ(problemAt(zbv), "");
    zbv.vpp = 3;
    EXPECT_EQ(problemAt(zbv), "/plan/vpp");
    // Virtual stages: chunk 0 of stage s is s, chunk 1 is 2 pp - 1 - s.
    Plan four = p;
    four.pp = 4;
    EXPECT_EQ(four.virtualStage(0, 0), 0);
    EXPECT_EQ(four.virtualStage(0, 1), 7);
    EXPECT_EQ(four.virtualStage(3, 0), 3);
    EXPECT_EQ(four.virtualStage(3, 1), 4);
    for (int u = 0; u < 8; ++u) EXPECT_EQ(four.virtualStage(four.stageOfVirtual(u), four.chunkOfVirtual(u)), u);
    EXPECT_TRUE(four.holdsHead(0));
    EXPECT_FALSE(four.holdsHead(3));
    four.schedule = Schedule::Interleaved1F1B;
    EXPECT_EQ(four.virtualStage(0, 1), 4);
    EXPECT_TRUE(four.holdsHead(3));
}

// Degrees and batches that each fit an int once multiplied past it (micro_batch 2^20 x dp 2^20 wrapped to 0 and
// the divisibility check divided by it), and a batch of 2^28 micro-batches had the schedule builder allocate
// until the process died; both are problems naming the plan, and the search files such plans under a reason.
TEST(PlanValidation, ProductsPastTheLimitsAreProblemsNotOverflows) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 50000, 2048);
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    p.tp = 2;
    p.dp = 1 << 20;
    p.microBatch = 1 << 20;
    p.globalBatch = 1 << 30;
    ProblemList huge;
    validatePlan(m, c, p, "/plan", huge);
    ASSERT_EQ(huge.items().size(), 1u);
    EXPECT_EQ(huge.items()[0].where, "/plan");
    EXPECT_EQ(huge.items()[0].message, "tp x pp x dp x cp = 2 x 1 x 1048576 x 1 is more than 1048576 ranks");

    p.tp = 1;
    p.dp = 8;
    p.microBatch = 1;
    p.pp = 1;
    p.globalBatch = 8 << 16; // 2^16 micro-batches on one stage: at the limit
    ProblemList atLimit;
    validatePlan(m, c, p, "/plan", atLimit);
    EXPECT_TRUE(atLimit.empty()) << atLimit.items().front().message;
    p.globalBatch = 16 << 16;
    ProblemList past;
    validatePlan(m, c, p, "/plan", past);
    ASSERT_EQ(past.items().size(), 1u);
    EXPECT_EQ(past.items()[0].where, "/plan/global_batch");
    EXPECT_NE(past.items()[0].message.find("131072 chunk passes to simulate, more than tessel simulates (65536)"),
              std::string::npos);
}
TEST(PlanValidation, PaddedVocabFollowsMegatron) {
    ModelConfig m = test::megatronStyleModel(8, 1024, 16, 50257, 2048);
    Plan p;
    p.tp = 8;
    EXPECT_EQ(paddedVocab(m, p), 51200); // multiple of 128 x 8 = 1024
    p.tp = 1;
    EXPECT_EQ(paddedVocab(m, p), 50304); // multiple of 128
}

} // namespace
} // namespace tessel
