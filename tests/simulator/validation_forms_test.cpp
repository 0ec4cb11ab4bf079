// Published training runs in the forms other sources write them: DeepSpeed's activation offload and ZeRO-3 coordinator
// limits, ZeRO++, sequence parallelism in prose, the measured step and peak memory under other names and units, a
// batch in tokens, degrees under config names, OLMo-core's loss switches (`tessel validate`; the model's shape and
// family: validation_architectures_test.cpp).
#include "validation_support.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace tessel::sim {
namespace {
using test::load;
using test::mentions;
using test::record;
using test::refusalOf;

// DeepSpeed's activation checkpoints in host memory (cpu_checkpointing), as a flag or as offload prose naming
// activations, and its ZeRO-3 coordinator limits (zero_optimization.stage3_*), read from a record.
TEST(ValidationRecord, DeepSpeedActivationOffloadAndStage3LimitsAreRead) {
    nlohmann::json r = record();
    r["plan"] = {{"tp", 1}, {"pp", 1}, {"dp", 32}, {"micro_batch", 2}, {"global_batch", 64}, {"zero", 3},
                 {"framework", "Megatron-DeepSpeed (DeepSpeed 0.6.2)"}, {"cpu_checkpointing", true},
                 {"stage3_max_live_parameters", 3e9}, {"stage3_prefetch_bucket_size", "5e7"}};
    const ValidationCase c = load(r);
    EXPECT_TRUE(c.scenario.plan.offloadActivations);
    EXPECT_EQ(c.scenario.plan.recompute, Recompute::Full); // unstated: the checkpoints it swaps are every layer's input
    EXPECT_TRUE(mentions(c.assumptions, "recompute full: activation checkpoints offloaded"));
    EXPECT_EQ(deepSpeedStage3Of(c.scenario.plan.framework).maxLiveParameters, 3000000000);
    EXPECT_EQ(deepSpeedStage3Of(c.scenario.plan.framework).prefetchBucketSize, 50000000);
    EXPECT_EQ(deepSpeedStage3Of(c.scenario.plan.framework).maxReuseDistance, 1000000000); // DeepSpeed's default
    // Offload prose that names activations is the same; prose that denies it, or names the optimizer only, is not.
    r["plan"].erase("cpu_checkpointing");
    r["plan"]["offload"] = "optimizer and activations to CPU";
    EXPECT_TRUE(load(r).scenario.plan.offloadActivations);
    r["plan"]["offload"] = "optimizer to CPU, no offload of activations";
    EXPECT_FALSE(load(r).scenario.plan.offloadActivations);
    r["plan"]["offload"] = "optimizer";
    EXPECT_FALSE(load(r).scenario.plan.offloadActivations);
    // Stated without full recompute it is said, not costed.
    r["plan"]["offload"] = nullptr;
    r["plan"]["cpu_checkpointing"] = true;
    r["plan"]["recompute"] = "selective";
    const ValidationCase selective = load(r);
    EXPECT_FALSE(selective.scenario.plan.offloadActivations);
    EXPECT_TRUE(mentions(selective.assumptions, "activation offload stated without every layer recomputed"));
    // The limits belong to DeepSpeed: another framework's record says so and gathers whole units.
    nlohmann::json megatron = record();
    megatron["plan"]["stage3_max_live_parameters"] = 3e9;
    const ValidationCase m = load(megatron);
    EXPECT_FALSE(m.scenario.plan.framework.stage3MaxLiveParameters.has_value());
    EXPECT_TRUE(mentions(m.assumptions, "stage3_max_live_parameters read for DeepSpeed only"));
}

// ZeRO++ is ZeRO-3 with quantized and hierarchical collectives: read as ZeRO-3 (not as no sharding, as "ZeRO++" had
// been), its parts named as not costed.
TEST(ValidationRecord, ZeroPlusPlusIsZero3WithItsPartsSaid) {
    nlohmann::json r = record();
    r["plan"] = {{"tp", 1}, {"pp", 1}, {"dp", 32}, {"micro_batch", 2}, {"global_batch", 64},
                 {"zero", "ZeRO++ (qwZ, hpZ, qgZ)"}, {"framework", "DeepSpeed"}, {"recompute", "full"}};
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.zeroStage, 3);
    EXPECT_TRUE(mentions(c.assumptions, "ZeRO++ not costed (hpZ's secondary partition"));
    EXPECT_TRUE(mentions(c.assumptions, "qwZ's int8 parameter gathers, qgZ's int4 gradient all-to-all"));
    // DeepSpeed's config keys say the same.
    r["plan"]["zero"] = 3;
    r["plan"]["zero_quantized_weights"] = true;
    const ValidationCase keys = load(r);
    EXPECT_TRUE(mentions(keys.assumptions, "ZeRO++ not costed (qwZ's int8 parameter gathers)"));
    // Plain ZeRO-3 says nothing of it.
    r["plan"].erase("zero_quantized_weights");
    EXPECT_FALSE(mentions(load(r).assumptions, "ZeRO++"));
}

// Sequence parallelism written as prose: "enabled (Megatron SP)" is on, a denial off; each said.
TEST(ValidationRecord, SequenceParallelProseIsRead) {
    nlohmann::json r = record(); // tp 4
    for (const char* on : {"enabled (Megatron SP)", "sequence parallel with TP", "Megatron-style SP"}) {
        r["plan"]["sequence_parallel"] = on;
        const ValidationCase c = load(r);
        EXPECT_TRUE(c.scenario.plan.sequenceParallel) << on;
        EXPECT_TRUE(mentions(c.assumptions, "read as on")) << on;
    }
    for (const char* off : {"disabled", "no SP"}) {
        r["plan"]["sequence_parallel"] = off;
        EXPECT_FALSE(load(r).scenario.plan.sequenceParallel) << off;
    }
}

// The measured step under the names and units records write it: 64 sequences of 2048 on 32 GPUs in 2 s.
TEST(ValidationRecord, MeasuredStepUnderItsWrittenNamesAndUnits) {
    const std::vector<nlohmann::json> forms = {
        {{"step_time", "2.0 s"}},           {{"iteration_time", "2000 ms"}},   {{"samples_per_second", 32}},
        {{"seq_per_s", 32}},                {{"tokens_per_second", 65536}},    {{"tgs", 2048}},
        {{"throughput", "65536 tokens/s"}}, {{"throughput", "2048 tokens/s/GPU"}}, {{"throughput", "32 samples/s"}},
        {{"ms_per_step", 2000}},
        // Steps a second and a progress bar's units (passed over before), a step in minutes (read as seconds before).
        {{"train_steps_per_second", 0.5}},  {{"throughput", "0.5 it/s"}},      {{"throughput", "2.0 s/it"}},
        {{"train_samples_per_second", 32}}, {{"step_time", "0.0333333333333333333 min"}},
        // Names held-out records could give them (step_seconds is tessel's own GPT-2 records').
        {{"step_seconds", 2.0}},            {{"time_per_step_ms", 2000}},     {{"throughput_tokens_per_s", 65536}},
        {{"tokens_per_gpu_per_s", 2048}},   {{"tokens_per_s_per_device", 2048}}};
    for (const auto& m : forms) {
        nlohmann::json r = record();
        r["measured"] = m;
        const ValidationCase c = load(r);
        ASSERT_TRUE(c.measured.stepSeconds.has_value()) << m.dump();
        EXPECT_NEAR(*c.measured.stepSeconds, 2.0, 1e-9) << m.dump();
    }
    // A unitless number under a unitless name is seconds, and said.
    nlohmann::json bare = record();
    bare["measured"] = {{"step_time", 2.0}};
    const ValidationCase c = load(bare);
    EXPECT_NEAR(*c.measured.stepSeconds, 2.0, 1e-9);
    EXPECT_TRUE(mentions(c.assumptions, "measured/step_time has no unit: read in seconds"));
    // A throughput whose unit tessel cannot place is not read.
    nlohmann::json unknown = record();
    unknown["measured"] = {{"throughput", "150 TFLOP/s"}};
    const ValidationCase u = load(unknown);
    EXPECT_FALSE(u.measured.stepSeconds.has_value());
    EXPECT_TRUE(mentions(u.assumptions, "is in a unit tessel does not read"));
}

// Values no run has are named, not read: a dropout outside [0, 1), a ZeRO stage written as a number outside 0-3 (1e300
// had been read as ZeRO-0 and -1 as ZeRO-3), a throughput at which the GPUs would idle (1e-300 tokens/s had been
// compared as a -100% error), a dp that is no count of GPUs (said beside the one the GPUs give).
TEST(ValidationRecord, ValuesNoRunHasAreNamed) {
    for (const double p : {-0.5, 1.0, 1.8e19}) {
        nlohmann::json r = record();
        r["model"]["dropout"] = p;
        EXPECT_NE(refusalOf(r).find("/model/dropout: got"), std::string::npos) << p;
    }
    for (const double z : {1e300, -1.0, 4.0, 1.5}) {
        nlohmann::json r = record();
        r["plan"]["zero"] = z;
        EXPECT_NE(refusalOf(r).find("/plan/zero: got"), std::string::npos) << z;
    }
    nlohmann::json stage = record();
    stage["plan"].erase("zero");
    stage["plan"]["zero_stage"] = 7;
    EXPECT_NE(refusalOf(stage).find("/plan/zero_stage: got 7, expected a ZeRO stage 0, 1, 2 or 3"), std::string::npos);
    nlohmann::json slow = record();
    slow["measured"]["tokens_per_s"] = 1e-300;
    const ValidationCase c = load(slow);
    EXPECT_FALSE(c.measured.stepSeconds.has_value());
    EXPECT_TRUE(mentions(c.assumptions, "below a millionth of the GPU's highest dense peak"));
    nlohmann::json dp = record();
    dp["plan"]["dp"] = -7;
    EXPECT_TRUE(mentions(load(dp).assumptions, "dp -7 is not a whole number of GPUs: dp = GPUs / (tp x pp x cp) = 4"));
}

// A field stated in words tessel does not read is said with its value, not reported as unstated (before, a
// recompute of "sometimes" was listed as "recompute not stated" and a link of any words ran silently as the
// preset's); switches written enabled / disabled or "1" / "0" are read.
TEST(ValidationRecord, AFieldStatedInWordsNotReadIsSaidNotTakenAsUnstated) {
    nlohmann::json r = record();
    r["plan"]["recompute"] = "sometimes";
    r["plan"]["sequence_parallel"] = "maybe";
    r["plan"]["distributed_optimizer"] = "perhaps";
    r["plan"]["zero"] = "three";
    r["plan"]["attention"] = "magic";
    r["system"]["intra_node_link"] = "carrier pigeon";
    r["system"]["precision"] = "weird";
    const ValidationCase c = load(r);
    for (const char* said :
         {"plan/recompute \"sometimes\" names no recompute",
          "plan/sequence_parallel \"maybe\" names no setting",
          "plan/distributed_optimizer \"perhaps\" names no setting",
          "plan/zero \"three\" names no ZeRO stage", "plan/attention \"magic\" names no attention kernel",
          "system/intra_node_link \"carrier pigeon\" names no link tessel reads",
          "system/precision \"weird\" names no precision tessel reads"})
        EXPECT_TRUE(mentions(c.assumptions, said)) << said;
    EXPECT_EQ(c.scenario.plan.precision, "megatron"); // BF16 mixed precision, said as taken
    EXPECT_EQ(c.scenario.plan.zeroStage, 0);
    // Virtual stages without a pipeline are read as one, said, not refused at a schedule the record did not
    // write.
    nlohmann::json flat = record();
    flat["plan"]["pp"] = 1;
    flat["plan"]["dp"] = 8;
    flat["plan"]["vpp"] = 4;
    const ValidationCase f = load(flat);
    EXPECT_EQ(f.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(f.assumptions, "vpp 4 read as 1: pp 1 has no pipeline to interleave"));
    // What tessel reads is not said to be unread.
    const ValidationCase plain = load(record());
    EXPECT_FALSE(mentions(plain.assumptions, "names no"));
    for (const auto& [word, on] :
         {std::pair<const char*, bool>{"enabled", true}, {"disabled", false}, {"1", true}, {"0", false}}) {
        nlohmann::json s = record();
        s["plan"]["sequence_parallel"] = word;
        EXPECT_EQ(load(s).scenario.plan.sequenceParallel, on) << word;
        nlohmann::json d = record();
        d["plan"].erase("zero");
        d["plan"]["distributed_optimizer"] = word;
        EXPECT_EQ(load(d).scenario.plan.zeroStage, on ? 1 : 0) << word;
    }
}

// A FLOP rate whose name says its convention is read in it: model_tflops_per_gpu with the model count, and
// hardware_tflops_per_gpu with full recompute's replayed forward (4/3 of it), whatever tflops_kind says; a
// utilization under a percent name is a percentage.
TEST(ValidationRecord, FlopRatesNamedForTheirConventionAreReadInIt) {
    auto stepFrom = [](const nlohmann::json& measured) {
        nlohmann::json r = record(); // full recompute
        r["measured"] = measured;
        const ValidationCase c = load(r);
        EXPECT_TRUE(c.measured.stepSeconds.has_value()) << measured.dump();
        return c.measured.stepSeconds.value_or(0.0);
    };
    const double model = stepFrom({{"model_tflops_per_gpu", 150.0}});
    EXPECT_GT(model, 0.0);
    EXPECT_NEAR(stepFrom({{"hardware_tflops_per_gpu", 150.0}}), model * 4.0 / 3.0, 1e-9 * model);
    // The name wins over a tflops_kind written for another column.
    EXPECT_NEAR(stepFrom({{"model_tflops_per_gpu", 150.0}, {"tflops_kind", "hardware (HFU)"}}), model, 1e-9 * model);
    // The plain name keeps the record's stated convention.
    EXPECT_NEAR(stepFrom({{"tflops_per_gpu", 150.0}, {"tflops_kind", "model FLOPs"}}), model, 1e-9 * model);
    EXPECT_NEAR(stepFrom({{"tflops_per_gpu", 150.0}, {"tflops_kind", "hfu"}}), model * 4.0 / 3.0, 1e-9 * model);
    // A utilization: 42 under mfu_percent is mfu 0.42, and said.
    nlohmann::json r = record();
    r["measured"] = {{"mfu_percent", 42}};
    const ValidationCase pct = load(r);
    EXPECT_NEAR(pct.measured.stepSeconds.value_or(0.0), stepFrom({{"mfu", 0.42}}), 1e-9);
    EXPECT_TRUE(mentions(pct.assumptions, "measured/mfu_percent 42 read as a percentage"));
}

// A figure under a name tessel does not read is said, and a record whose only figure is one is not compared with
// the field named in its reason (not "states no step time" alone). Other measured text (units, kinds) is not a figure.
TEST(ValidationRecord, AFigureUnderANameNotReadIsNamed) {
    nlohmann::json r = record();
    r["measured"] = {{"tokens_per_hour", 2.4e8}, {"memory_unit", "GiB"}, {"tflops_kind", "model"}, {"note", "read off a plot"}};
    const ValidationCase c = load(r);
    EXPECT_FALSE(c.measured.stepSeconds.has_value());
    ASSERT_EQ(c.measured.unreadFields.size(), 1u);
    EXPECT_EQ(c.measured.unreadFields[0], "measured/tokens_per_hour");
    EXPECT_TRUE(mentions(c.assumptions, "measured/tokens_per_hour is not a field tessel reads"));
    const ValidationReport report = validateRecords(loadValidationRecords(nlohmann::json::array({r}), "runs.json"));
    ASSERT_EQ(report.results.size(), 1u);
    EXPECT_NE(report.results[0].reason.find("measured/tokens_per_hour holds a figure under a name tessel does not read"),
              std::string::npos)
        << report.results[0].reason;
    // Beside a figure it reads, the other is said and the step compared.
    r["measured"]["tokens_per_s"] = 65536.0;
    const ValidationCase both = load(r);
    EXPECT_NEAR(both.measured.stepSeconds.value_or(0.0), 2.0, 1e-9);
    EXPECT_TRUE(mentions(both.assumptions, "measured/tokens_per_hour is not a field tessel reads"));
    // Every field the reader knows stays unsaid.
    nlohmann::json known = record();
    known["measured"] = {{"iteration_time_s", 2.0}, {"tflops_per_gpu", 120}, {"mfu", 0.4}, {"hfu", 0.5},
                         {"memory_gb", 60}, {"memory_kind", "max_memory_allocated"}, {"aggregate_pflops", 3.8}};
    EXPECT_TRUE(load(known).measured.unreadFields.empty());
}

// Peak memory under keys that name no unit, by the unit written beside the number; an out-of-memory written in a
// memory field is the run's outcome.
TEST(ValidationRecord, MeasuredMemoryUnderItsWrittenNamesAndUnits) {
    struct Form {
        nlohmann::json measured;
        double bytes;
    };
    const std::vector<Form> forms = {{{{"tokens_per_s", 65536}, {"peak_memory", "67.6 GiB"}}, 67.6 * 1073741824.0},
                                     {{{"tokens_per_s", 65536}, {"memory", "75 GB"}}, 75e9},
                                     {{{"tokens_per_s", 65536}, {"memory_per_gpu", "61 GB (nvidia-smi)"}}, 61e9},
                                     {{{"tokens_per_s", 65536}, {"gpu_memory", "70000 MiB"}}, 70000.0 * 1048576.0},
                                     {{{"tokens_per_s", 65536}, {"max_memory_allocated", 70}}, 70e9},
                                     // the allocator's counters under the names torch gives them, unit in the key
                                     {{{"tokens_per_s", 65536}, {"memory_allocated_gb", 60}}, 60e9},
                                     {{{"tokens_per_s", 65536}, {"max_memory_reserved_gib", 65}}, 65 * 1073741824.0}};
    for (const auto& f : forms) {
        nlohmann::json r = record();
        r["measured"] = f.measured;
        const ValidationCase c = load(r);
        ASSERT_TRUE(c.measured.memoryBytes.has_value()) << f.measured.dump();
        EXPECT_NEAR(*c.measured.memoryBytes, f.bytes, 1.0) << f.measured.dump();
    }
    nlohmann::json bare = record();
    bare["measured"] = {{"tokens_per_s", 65536}, {"max_memory_allocated", 70}};
    const ValidationCase c = load(bare);
    EXPECT_TRUE(mentions(c.assumptions, "measured/max_memory_allocated has no unit: read in GB"));
    EXPECT_TRUE(c.measured.memoryIsAllocated);
    // Figures that are not one plain number: approximate, a range (its midpoint), a share of the GPU's memory (of the
    // capacity named, else the GPU's 80 GB), one figure a rank or stage (the highest); each said. Before, "71% of
    // 80 GB" read as 71 GB and the rest were passed over or read as their first number.
    const std::vector<std::pair<nlohmann::json, double>> written = {
        {"~56.5 GiB", 56.5 * 1073741824.0},
        {"about 60 GB", 60e9},
        {"55-57 GiB", 56.0 * 1073741824.0},
        {"71% of 80 GB", 0.71 * 80e9},
        {"50%", 0.5 * 80.0 * 1073741824.0}, // the record's A100-SXM4-80GB
        {nlohmann::json::array({56.2, 50.1, 50.1, 56.55}), 56.55e9},
        {nlohmann::json::array({"56.2 GiB", "56.55 GiB"}), 56.55 * 1073741824.0},
        {{{"stage0", 61.5}, {"stage1", 58.0}}, 61.5e9}};
    for (const auto& [v, bytes] : written) {
        nlohmann::json r = record();
        r["measured"] = {{"tokens_per_s", 65536}, {"memory_gb", v}};
        const ValidationCase w = load(r);
        ASSERT_TRUE(w.measured.memoryBytes.has_value()) << v.dump();
        EXPECT_NEAR(*w.measured.memoryBytes, bytes, 1e6) << v.dump();
        EXPECT_TRUE(mentions(w.assumptions, "measured/memory_gb ")) << v.dump(); // what was made of it, said
    }
    nlohmann::json bound = record();
    bound["measured"] = {{"tokens_per_s", 65536}, {"memory_gb", "< 80 GB"}};
    const ValidationCase b = load(bound);
    EXPECT_FALSE(b.measured.memoryBytes.has_value());
    EXPECT_TRUE(mentions(b.assumptions, "measured/memory_gb \"< 80 GB\" is a bound, not a peak: not compared"));
    nlohmann::json oom = record();
    oom["measured"] = {{"memory_gb", "OOM"}};
    const ValidationCase o = load(oom);
    ASSERT_TRUE(o.measured.outOfMemory.has_value());
    EXPECT_TRUE(*o.measured.outOfMemory);
    EXPECT_TRUE(mentions(o.assumptions, "out-of-memory outcome read from measured/memory_gb"));
}

// Which rank's peak (Megatron-LM logs its memory from the last rank only): measured/memory_stage or memory_rank
// picks the stage compared; a run in deterministic mode keeps its memory compared and its step out, said.
TEST(ValidationRecord, TheMeasuredRanksStageAndADeterministicRunsStep) {
    nlohmann::json r = record(); // tp 4 x pp 2 x dp 4: 32 ranks, 16 a stage
    r["measured"] = {{"iteration_time_s", 2.5}, {"max_memory_allocated_gib", 50}};
    auto stageOf = [&](const nlohmann::json& key, const nlohmann::json& value) {
        nlohmann::json q = r;
        q["measured"][key.get<std::string>()] = value;
        return load(q).measured.memoryStage;
    };
    EXPECT_FALSE(load(r).measured.memoryStage.has_value()); // unstated: the highest stage's
    EXPECT_EQ(stageOf("memory_stage", "last"), 1);
    EXPECT_EQ(stageOf("memory_stage", "first"), 0);
    EXPECT_EQ(stageOf("memory_stage", 1), 1);
    EXPECT_EQ(stageOf("memory_rank", 0), 0);
    EXPECT_EQ(stageOf("memory_rank", 15), 0);
    EXPECT_EQ(stageOf("memory_rank", 16), 1);
    EXPECT_EQ(stageOf("memory_rank", "world_size - 1"), 1);
    nlohmann::json bad = r;
    bad["measured"]["memory_stage"] = 2;
    EXPECT_NE(refusalOf(bad).find("/measured/memory_stage: expected \"first\", \"last\" or a stage index from 0 to 1, got 2"),
              std::string::npos)
        << refusalOf(bad);
    bad["measured"]["memory_stage"] = "middle";
    EXPECT_NE(refusalOf(bad).find("/measured/memory_stage: expected"), std::string::npos);
    bad = r;
    bad["measured"]["memory_rank"] = 32;
    EXPECT_NE(refusalOf(bad).find("/measured/memory_rank: expected \"first\", \"last\" or a rank from 0 to 31, got 32"),
              std::string::npos)
        << refusalOf(bad);
    // The stage read is the one compared: the first stage's peak differs from the last's.
    nlohmann::json first = r, last = r;
    first["measured"]["memory_stage"] = "first";
    last["measured"]["memory_stage"] = "last";
    const auto results = validateRecords(loadValidationRecords(nlohmann::json::array({first, last}), "runs.json")).results;
    ASSERT_EQ(results.size(), 2u);
    ASSERT_TRUE(results[0].predictedPeakMemoryBytes > 0 && results[1].predictedPeakMemoryBytes > 0);
    EXPECT_NE(results[0].predictedPeakMemoryBytes, results[1].predictedPeakMemoryBytes);
    // Deterministic mode: the step is kept out of the comparison, said with its value; the memory is compared.
    nlohmann::json det = r;
    det["plan"]["deterministic"] = true;
    const ValidationCase d = load(det);
    EXPECT_FALSE(d.measured.stepSeconds.has_value());
    EXPECT_TRUE(d.measured.memoryBytes.has_value());
    EXPECT_TRUE(mentions(d.assumptions, "measured step (2.5 s, measured/iteration_time_s) not compared: plan/deterministic"));
    det["plan"]["deterministic"] = false;
    EXPECT_TRUE(load(det).measured.stepSeconds.has_value());
}

// A plan's blocks nested as configs nest them are read as the plan's own keys, said: DeepSpeed's zero_optimization
// (its stage and offload), torchtitan's parallelism and training sections. Before, each was passed over (no ZeRO,
// no offload, the degrees from the GPU count alone).
TEST(ValidationRecord, NestedPlanBlocksAreReadAsThePlansOwnKeys) {
    nlohmann::json r = record(); // 32 GPUs
    r["plan"].erase("zero");
    r["plan"].erase("tp");
    r["plan"].erase("pp");
    r["plan"].erase("dp");
    r["plan"].erase("micro_batch");
    r["plan"]["framework"] = "DeepSpeed";
    r["plan"]["zero_optimization"] = {{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}}}, {"overlap_comm", false}};
    r["plan"]["parallelism"] = {{"tensor_parallel_degree", 2}, {"pipeline_parallel_degree", 1}};
    r["plan"]["training"] = {{"local_batch_size", 2}};
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.zeroStage, 3);
    EXPECT_TRUE(c.scenario.plan.offloadOptimizer);
    EXPECT_EQ(c.scenario.plan.tp, 2);
    EXPECT_EQ(c.scenario.plan.dp, 16);
    EXPECT_EQ(c.scenario.plan.microBatch, 2);
    EXPECT_TRUE(mentions(c.assumptions, "plan/zero_optimization's keys read as the plan's own: offload_optimizer, overlap_comm, stage (as zero_stage)"));
    EXPECT_FALSE(c.scenario.plan.framework.overlapGradReduce.value_or(true)); // DeepSpeed's overlap_comm
    EXPECT_TRUE(mentions(c.assumptions, "overlap_grad_reduce = false, read from DeepSpeed's overlap_comm"));
    EXPECT_TRUE(mentions(c.assumptions, "plan/parallelism's keys read as the plan's own"));
    // A key the plan states itself wins over the block's.
    r["plan"]["tp"] = 4;
    EXPECT_EQ(load(r).scenario.plan.tp, 4);
    // torchtitan's own defaults: global_batch_size -1 (local_batch_size x dp) states no batch (it had been refused),
    // and its activation_checkpoint section's mode is the recompute.
    r["plan"]["training"] = {{"local_batch_size", 2}, {"global_batch_size", -1}};
    r["plan"]["activation_checkpoint"] = {{"mode", "selective"}, {"selective_ac_option", "op"}};
    r["plan"].erase("global_batch");
    r["plan"].erase("recompute");
    const ValidationCase tt = load(r);
    EXPECT_EQ(tt.scenario.plan.globalBatch, 2 * tt.scenario.plan.dp);
    EXPECT_EQ(tt.scenario.plan.recompute, Recompute::Selective);
    EXPECT_TRUE(mentions(tt.assumptions, "global_batch_size -1 (the framework derives it): not stated"));
}

// A global batch written in tokens is that many sequences ("4M tokens" had been read as 4 sequences); a count with a
// token figure beside it keeps the count.
TEST(ValidationRecord, GlobalBatchWrittenInTokens) {
    nlohmann::json r = record(); // sequences of 2048
    r["plan"]["global_batch"] = "131,072 tokens";
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.globalBatch, 64);
    EXPECT_TRUE(mentions(c.assumptions, "read in tokens: 64 sequences of 2048"));
    r["plan"]["global_batch"] = "4M tokens"; // 2^22, the reading that is whole sequences of 2048
    EXPECT_EQ(load(r).scenario.plan.globalBatch, 2048);
    r["plan"]["global_batch"] = "64 (131k tokens)";
    EXPECT_EQ(load(r).scenario.plan.globalBatch, 64);
    // A bare "4M" is tokens too (millions of sequences are no run's batch); a bare "1k" could be 1000 or 1024
    // sequences and is refused naming the field (both had been read as 4 and 1).
    r["plan"]["global_batch"] = "4M";
    EXPECT_EQ(load(r).scenario.plan.globalBatch, 2048);
    r["plan"]["global_batch"] = "1k";
    EXPECT_NE(refusalOf(r).find("/plan/global_batch: \"1k\" abbreviates the count"), std::string::npos) << refusalOf(r);
}

// A FLOP rate's convention in prose: one that counts the recomputed forward is a hardware count (4/3 of the model
// count under full recompute), one that excludes it is not.
TEST(ValidationRecord, FlopConventionThatCountsRecomputeIsHardware) {
    auto step = [](const char* kind) {
        nlohmann::json r = record(); // every layer recomputed
        r["measured"] = {{"tflops_per_gpu", 130.0}, {"tflops_kind", kind}};
        return *load(r).measured.stepSeconds;
    };
    const double model = step("model FLOPs"), hardware = step("HFU");
    EXPECT_NEAR(hardware / model, 4.0 / 3.0, 1e-9);
    EXPECT_DOUBLE_EQ(step("FLOPs including activation recomputation"), hardware);
    EXPECT_DOUBLE_EQ(step("counted with recompute"), hardware);
    EXPECT_DOUBLE_EQ(step("excluding recompute (model FLOPs)"), model);
    EXPECT_DOUBLE_EQ(step("without activation recomputation"), model);
    EXPECT_DOUBLE_EQ(step("model FLOPs, recompute excluded"), model);
}

// Hybrid sharding named HSDP (PyTorch's FSDP2, torchtitan) is FSDP's HYBRID_SHARD: a shard group per node.
TEST(ValidationRecord, HsdpIsHybridSharding) {
    nlohmann::json r = record(); // 32 GPUs on 4 nodes
    r["plan"] = {{"tp", 1}, {"pp", 1}, {"dp", 32}, {"micro_batch", 2}, {"global_batch", 64}, {"zero", 3},
                 {"framework", "PyTorch FSDP"}, {"fsdp_sharding", "HSDP (shard within node, replicate across nodes)"}};
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.zeroReplicas, 4);
    EXPECT_TRUE(mentions(c.assumptions, "hybrid sharding (HSDP"));
}

// The sharding a torchtitan or PyTorch FSDP record leaves unstated is its framework's default, full sharding, said
// (a torchtitan record without one had been read as unsharded: an 8B on 8 GPUs 178 GiB, out of memory); HYBRID_SHARD
// on one node is full sharding over it (it had been read as unsharded); CPU offload named beside the sharding is
// FSDP's parameter offload.
TEST(ValidationRecord, UnstatedShardingIsTheFrameworksAndHybridOnOneNodeShards) {
    nlohmann::json r = record();
    r["system"]["nodes"] = 1;
    r["system"]["total_gpus"] = 8;
    r["plan"] = {{"tp", 1}, {"pp", 1}, {"dp", 8}, {"micro_batch", 2}, {"global_batch", 16}, {"framework", "torchtitan"}};
    const ValidationCase tt = load(r);
    EXPECT_EQ(tt.scenario.plan.zeroStage, 3);
    EXPECT_TRUE(mentions(tt.assumptions, "ZeRO stage not stated: torchtitan's default FSDP2 sharding"));
    r["plan"]["framework"] = "PyTorch FSDP";
    const ValidationCase fsdp = load(r);
    EXPECT_EQ(fsdp.scenario.plan.zeroStage, 3);
    EXPECT_TRUE(mentions(fsdp.assumptions, "ZeRO stage not stated: PyTorch FSDP's default FULL_SHARD"));
    r["plan"]["framework"] = "torchtitan";
    r["plan"]["fsdp_sharding"] = "HYBRID_SHARD";
    const ValidationCase hybrid = load(r);
    EXPECT_EQ(hybrid.scenario.plan.zeroStage, 3);
    EXPECT_EQ(hybrid.scenario.plan.zeroReplicas, 1);
    r["plan"]["fsdp_sharding"] = "FULL_SHARD with CPU offload";
    const ValidationCase offloaded = load(r);
    EXPECT_TRUE(offloaded.scenario.plan.offloadParameters);
    r["plan"]["fsdp_sharding"] = "FULL_SHARD, no CPU offload";
    EXPECT_FALSE(load(r).scenario.plan.offloadParameters);
    // A DeepSpeed record's unstated stage is DeepSpeed's default, 0, said as before.
    r["plan"].erase("fsdp_sharding");
    r["plan"]["framework"] = "DeepSpeed";
    const ValidationCase ds = load(r);
    EXPECT_EQ(ds.scenario.plan.zeroStage, 0);
    EXPECT_TRUE(mentions(ds.assumptions, "ZeRO stage / distributed optimizer not stated: none (framework default)"));
}

// Parallel degrees and batch sizes under the configs' own names read as under the schema's: a context-parallel
// degree written context_parallel_size had been dropped and its ranks counted as data parallelism.
TEST(ValidationRecord, DegreesUnderConfigNames) {
    nlohmann::json r = record(); // 32 GPUs
    r["plan"] = {{"tensor_model_parallel_size", 4}, {"pipeline_model_parallel_size", 2}, {"context_parallel_size", 2},
                 {"micro_batch_size", 1}, {"global_batch_size", 64}, {"framework", "Megatron-LM"}, {"recompute", "full"}};
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.tp, 4);
    EXPECT_EQ(c.scenario.plan.pp, 2);
    EXPECT_EQ(c.scenario.plan.cp, 2);
    EXPECT_EQ(c.scenario.plan.dp, 2);
    EXPECT_EQ(c.scenario.plan.microBatch, 1);
    EXPECT_EQ(c.scenario.plan.globalBatch, 64);
    // The schema's key wins where both are written.
    r["plan"]["tp"] = 8;
    EXPECT_EQ(load(r).scenario.plan.tp, 8);
    // Other trainers' batch names (Hugging Face Trainer's per-device batch, Nanotron's and Lightning's accumulation;
    // Nanotron's had been passed over, a step of a quarter of the batch) and Megatron-LM's layers per virtual stage.
    nlohmann::json t = record(); // 32 layers, tp 4 x pp 2 x dp 4
    t["plan"].erase("global_batch");
    t["plan"].erase("micro_batch");
    t["plan"]["per_device_train_batch_size"] = 2;
    t["plan"]["batch_accumulation_per_replica"] = 4;
    const ValidationCase nano = load(t);
    EXPECT_EQ(nano.scenario.plan.microBatch, 2);
    EXPECT_EQ(nano.scenario.plan.globalBatch, 2 * 4 * 4);
    t["plan"].erase("batch_accumulation_per_replica");
    t["plan"]["accumulate_grad_batches"] = 2;
    EXPECT_EQ(load(t).scenario.plan.globalBatch, 2 * 2 * 4);
    nlohmann::json v = record();
    v["plan"].erase("vpp");
    v["plan"]["num_layers_per_virtual_pipeline_stage"] = 4; // 32 layers / (pp 2 x 4) = 4 virtual stages
    const ValidationCase chunks = load(v);
    EXPECT_EQ(chunks.scenario.plan.vpp, 4);
    EXPECT_TRUE(mentions(chunks.assumptions, "vpp = 4: 32 layers / (pp 2 x num_layers_per_virtual_pipeline_stage 4)"));
    v["plan"]["num_layers_per_virtual_pipeline_stage"] = 5;
    EXPECT_TRUE(mentions(load(v).assumptions, "num_layers_per_virtual_pipeline_stage 5 does not split 32 layers over pp 2: not read"));
}

// A degree left out beside a stated dp is what the GPUs leave (pp was taken as 1 and the stated dp overridden), and a
// batch left out is micro_batch x grad_accum x dp, or one micro-batch a step without a pipeline; a pipeline with no
// batch is refused, its bubble being the micro-batch count's. Each said.
TEST(ValidationRecord, AMissingDegreeOrBatchIsWhatTheRestGive) {
    nlohmann::json r = record(); // 32 GPUs, tp 4 x pp 2 x dp 4
    r["plan"].erase("pp");
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.pp, 2);
    EXPECT_EQ(c.scenario.plan.dp, 4);
    EXPECT_TRUE(mentions(c.assumptions, "pp not stated: GPUs / (tp x cp x dp) = 2"));
    r = record();
    r["plan"].erase("tp");
    c = load(r);
    EXPECT_EQ(c.scenario.plan.tp, 4);
    EXPECT_TRUE(mentions(c.assumptions, "tp not stated: GPUs / (pp x cp x dp) = 4"));
    // Both left out: nothing to split the rest between, so the old reading (tp 1, pp 1, dp from the GPUs).
    r["plan"].erase("pp");
    EXPECT_EQ(load(r).scenario.plan.dp, 32);

    r = record();
    r["plan"].erase("global_batch");
    r["plan"]["gradient_accumulation_steps"] = 8;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.globalBatch, 2 * 8 * 4);
    EXPECT_TRUE(mentions(c.assumptions, "global_batch not stated: micro_batch x grad_accum x dp = 64"));
    // Without accumulation stated: refused with a pipeline, one micro-batch a step without one.
    r["plan"].erase("gradient_accumulation_steps");
    EXPECT_NE(test::refusalOf(r).find("a pipeline's micro-batches a step decide its bubble"), std::string::npos);
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 8;
    r["plan"].erase("vpp");
    r["plan"].erase("schedule");
    c = load(r);
    EXPECT_EQ(c.scenario.plan.globalBatch, 2 * 8);
    EXPECT_TRUE(mentions(c.assumptions, "(one micro-batch a step, no gradient accumulation)"));
}

// A step runs whole micro-batches on every rank, so a batch that is not a multiple of micro_batch x dp is a rounded
// figure: 1024 sequences over dp 124 (OPT-175B's "2M tokens" on 992 GPUs at tp 8) read as 992, said; a sharded
// engine's micro-batch then comes from the rounded batch (992 / 124 = 8). More than 5% off, refused at the field
// with the nearest named.
TEST(ValidationRecord, ARoundedGlobalBatchIsReadAsWholeMicroBatches) {
    nlohmann::json r = record(); // 32 GPUs, tp 4 x pp 2 x dp 4, micro-batch 2
    r["plan"]["global_batch"] = 66; // 64 or 72 with micro_batch x dp = 8: 64 is 3% away
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.globalBatch, 64);
    EXPECT_TRUE(mentions(c.assumptions, "global_batch 66 read as 64, the nearest multiple of micro_batch x dp = 8"));
    r["plan"]["global_batch"] = 60; // 56 or 64: both more than 5% away
    const std::string refusal = test::refusalOf(r);
    EXPECT_NE(refusal.find("/plan/global_batch: 60 is not a multiple of micro_batch x dp = 8 (the nearest, 56 or 64"),
              std::string::npos) << refusal;
    r = record();
    r["system"]["nodes"] = 124;
    r["system"]["total_gpus"] = 992;
    r["plan"] = {{"tp", 8}, {"pp", 1}, {"dp", 124}, {"global_batch", 1024}, {"zero", 3}, {"framework", "FSDP"}};
    c = load(r);
    EXPECT_EQ(c.scenario.plan.globalBatch, 992);
    EXPECT_EQ(c.scenario.plan.microBatch, 8);
    EXPECT_TRUE(mentions(c.assumptions, "global_batch 1024 read as 992, the nearest multiple of dp = 124"));
}

// Every degree stated, their product a few GPUs off the published count ("1000 GPUs" for tp 4 x pp 2 x dp 128 =
// 1024): the count is the rounded figure, read as the plan's ranks, said; further off the GPUs stay the count and the
// data-parallel degree is what they leave, as before.
TEST(ValidationRecord, ARoundedGpuCountIsReadAsThePlansRanks) {
    nlohmann::json r = record(); // tp 4 x pp 2 x dp 4 on 32 GPUs
    r["plan"]["dp"] = 128;
    r["plan"]["global_batch"] = 256;
    r["system"]["total_gpus"] = 1000;
    r["system"]["nodes"] = 125;
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.dp, 128);
    EXPECT_EQ(c.scenario.cluster.nodes, 128);
    EXPECT_TRUE(mentions(c.assumptions, "1000 GPUs read as the plan's tp x pp x cp x dp = 1024"));
    r["system"]["total_gpus"] = 960; // 6.7% off
    r["system"]["nodes"] = 120;
    r["plan"]["global_batch"] = 480;
    const ValidationCase far = load(r);
    EXPECT_EQ(far.scenario.plan.dp, 120);
    EXPECT_TRUE(mentions(far.assumptions, "dp 128 does not fill the 960 GPUs"));
}

// A schedule's words: a count of virtual stages it names is the vpp (it had been inferred past it), and a denial of
// interleaving is 1F1B ("1F1B non-interleaved" had been read as interleaved).
TEST(ValidationRecord, ScheduleWordsGiveTheVppOrDenyIt) {
    nlohmann::json r = record(); // 32 layers, tp 4 x pp 2 x dp 4, 64 sequences of micro-batch 2: 8 micro-batches
    r["plan"].erase("vpp");
    r["plan"]["schedule"] = "interleaved 1F1B (vpp 2)";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 2);
    EXPECT_TRUE(mentions(c.assumptions, "vpp = 2, the count the schedule names"));
    r["plan"]["schedule"] = "interleaved, 4 model chunks per device";
    EXPECT_EQ(load(r).scenario.plan.vpp, 4);
    r["plan"]["schedule"] = "1F1B non-interleaved";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_EQ(c.scenario.plan.schedule, Schedule::OneFOneB);
    // A count Megatron-LM cannot run (32 layers over pp 2 in 3 chunks) is said and not taken.
    r["plan"]["schedule"] = "interleaved (3 virtual stages)";
    c = load(r);
    EXPECT_NE(c.scenario.plan.vpp, 3);
    EXPECT_TRUE(mentions(c.assumptions, "the schedule's 3 virtual stages do not split"));
}


// OLMo-core (AI2) builds FSDP2 and per-block compilation as torchtitan does: read as torchtitan, said, as FSDP2 by
// its names and torchtune are. Its loss switches name the kernel (fused_loss: a Triton cross-entropy of flash-attn's
// kind; compile_loss: the compiled eager loss), `cross_entropy: compiled` is a kernel tessel costs, and a reduce
// dtype written in the precision's prose decides the FSDP recipe.
TEST(ValidationRecord, OlmoCoreLossSwitchesAndReduceDtypeProse) {
    nlohmann::json r = record();
    r["model"]["name"] = "OLMo 2 7B";
    r["system"]["nodes"] = 1;
    r["system"]["total_gpus"] = 8;
    r["system"]["precision"] = "bf16 (FSDP2 param_dtype bfloat16), reduce_dtype float32";
    r["plan"] = {{"tp", 1}, {"pp", 1}, {"dp", 8}, {"micro_batch", 2}, {"global_batch", 64}, {"zero", 3},
                 {"recompute", "none"}, {"framework", "OLMo-core (FSDP2)"}, {"compile", true}, {"fused_loss", true}};
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.framework.name, "torchtitan");
    EXPECT_TRUE(mentions(c.assumptions, "OLMo-core read as torchtitan"));
    EXPECT_EQ(crossEntropyOf(c.scenario.plan.framework), "flash_attn");
    EXPECT_EQ(c.scenario.plan.precision, "fsdp"); // fp32 reduction, from the prose
    // FSDP2 by its names, and torchtune (fully_shard), take the same costs; FSDP1's FULL_SHARD stays FSDP1.
    for (const char* kin : {"torchtune", "PyTorch FSDP2", "fully_shard (FSDP2)"}) {
        nlohmann::json k = r;
        k["plan"]["framework"] = kin;
        const ValidationCase kc = load(k);
        EXPECT_EQ(kc.scenario.plan.framework.name, "torchtitan") << kin;
        EXPECT_TRUE(mentions(kc.assumptions, "read as torchtitan")) << kin;
    }
    nlohmann::json fsdp1 = r;
    fsdp1["plan"]["framework"] = "PyTorch FSDP";
    fsdp1["plan"]["fsdp_sharding"] = "FULL_SHARD";
    EXPECT_EQ(load(fsdp1).scenario.plan.framework.name, "fsdp");
    r["plan"].erase("fused_loss");
    r["plan"]["compile_loss"] = true;
    EXPECT_EQ(crossEntropyOf(load(r).scenario.plan.framework), "compiled");
    r["plan"]["compile_loss"] = "sometimes"; // neither yes nor no: said, not read
    const ValidationCase unread = load(r);
    EXPECT_TRUE(mentions(unread.assumptions, "compile_loss \"sometimes\" is not a yes or no"));
    EXPECT_NE(crossEntropyOf(unread.scenario.plan.framework), "compiled");
    r["plan"].erase("compile_loss");
    r["plan"]["cross_entropy"] = "compiled"; // was "names no loss kernel tessel costs"
    const ValidationCase named = load(r);
    EXPECT_EQ(crossEntropyOf(named.scenario.plan.framework), "compiled");
    EXPECT_FALSE(mentions(named.assumptions, "names no loss kernel"));
    // The z-loss beside an eager loss is said as not costed; inside a compiled one it is not mentioned.
    r["plan"]["z_loss_multiplier"] = 1e-5;
    EXPECT_FALSE(mentions(load(r).assumptions, "z-loss"));
    r["plan"]["cross_entropy"] = "eager";
    EXPECT_TRUE(mentions(load(r).assumptions, "z-loss beside the eager loss"));
    // A 16-bit reduce in prose is the PURE recipe; "reduce in fp32" the fp32 one.
    r["plan"]["framework"] = "PyTorch FSDP";
    r["system"]["precision"] = "bf16, reduce_dtype=torch.bfloat16";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp_pure");
    r["system"]["precision"] = "bf16 autocast, gradients reduced in fp32";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp");
}
} // namespace
} // namespace tessel::sim
