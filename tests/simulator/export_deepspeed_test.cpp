// Export of plans as DeepSpeed ds_config.json: the values parsed back, and every plan DeepSpeed cannot run refused
// at the right JSON pointer.
#include "export_support.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using namespace export_test;

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
    // contiguous_gradients as the plan is costed: on today, off for a DeepSpeed of 2022 (whose engine forced it off at
    // ZeRO-1, so its buckets are all-reduced) or where the plan says.
    EXPECT_EQ(ds.at("zero_optimization").at("contiguous_gradients"), true);
    deepspeed.plan.framework.version = "0.6.0";
    EXPECT_EQ(nlohmann::json::parse(exportPlan(deepspeed, ExportFormat::DeepSpeed)).at("zero_optimization").at("contiguous_gradients"),
              false);
    Scenario stated = s;
    stated.plan.framework.reduceBucketSize = 200000000;
    const auto b = nlohmann::json::parse(exportPlan(stated, ExportFormat::DeepSpeed));
    EXPECT_EQ(b.at("zero_optimization").at("reduce_bucket_size"), 200000000);
    EXPECT_FALSE(ds.contains("tensor_parallel"));
    EXPECT_FALSE(ds.contains("pipeline"));
    EXPECT_FALSE(ds.contains("activation_checkpointing")) << "selective + flash stores what none stores";
    EXPECT_FALSE(ds.contains("fp16"));
}

TEST(ExportDeepSpeed, AnFp16PlanIsDeepSpeedsFp16Section) {
    // half_dtype fp16 (Volta; or a run that chose fp16): DeepSpeed's fp16 section, and fp16 gradients where the
    // recipe keeps 16-bit ones.
    Scenario s = deepspeedPlan();
    s.plan.framework.halfDtype = "fp16";
    auto ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("fp16").at("enabled"), true);
    EXPECT_FALSE(ds.contains("bf16"));
    EXPECT_EQ(ds.at("data_types").at("grad_accum_dtype"), "fp32");
    s.plan.precision = "mixed";
    ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("data_types").at("grad_accum_dtype"), "fp16");
    // Without ZeRO, fp16 is FP16_Optimizer, replicated over data parallelism: written as stage 0, where bf16 has no
    // such mode and is refused.
    s.plan.zeroStage = 0;
    ds = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("zero_optimization").at("stage"), 0);
    s.plan.framework.halfDtype = "bf16";
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/zero_stage"));
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

TEST(ExportDeepSpeed, Zero3CoordinatorLimitsAreThePlans) {
    // The limits tessel's gather term walks: DeepSpeed's defaults where the plan states none, the plan's otherwise.
    Scenario s = deepspeedPlan();
    s.plan.zeroStage = 3;
    s.plan.precision = "mixed";
    auto z = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed)).at("zero_optimization");
    EXPECT_EQ(z.at("stage"), 3);
    EXPECT_EQ(z.at("stage3_prefetch_bucket_size").get<int64_t>(), 50000000);
    EXPECT_EQ(z.at("stage3_max_live_parameters").get<int64_t>(), 1000000000);
    EXPECT_EQ(z.at("stage3_max_reuse_distance").get<int64_t>(), 1000000000);
    s.plan.framework.name = "deepspeed"; // the limits are a DeepSpeed plan's keys
    s.plan.framework.stage3MaxLiveParameters = 3000000000;
    s.plan.framework.stage3MaxReuseDistance = 2000000000;
    s.plan.framework.stage3PrefetchBucketSize = 70000000;
    z = nlohmann::json::parse(exportPlan(s, ExportFormat::DeepSpeed)).at("zero_optimization");
    EXPECT_EQ(z.at("stage3_max_live_parameters").get<int64_t>(), 3000000000);
    EXPECT_EQ(z.at("stage3_max_reuse_distance").get<int64_t>(), 2000000000);
    EXPECT_EQ(z.at("stage3_prefetch_bucket_size").get<int64_t>(), 70000000);
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

} // namespace
} // namespace tessel::sim
