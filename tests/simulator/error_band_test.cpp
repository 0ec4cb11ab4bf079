// Error bands per kind of run and the one fitted constant (σ): by hand, and what the shipped files hold.
#include "../cost_models/test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/sim/error_band.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

namespace tessel::sim {
namespace {

TEST(ErrorBands, PerKindByHandAndTheTieRule) {
    // Three runs of one kind and one of another; the bands are the median, nearest-rank p90 and mean.
    std::vector<LoadedRecord> records;
    ValidationReport report;
    auto add = [&](const char* gpu, const char* framework, double err) {
        LoadedRecord r;
        ValidationCase c;
        c.scenario.cluster.gpu.name = gpu;
        c.scenario.plan.framework.name = framework;
        r.validationCase = c;
        records.push_back(r);
        CaseResult res;
        res.predicted = true;
        res.stepError = err;
        report.results.push_back(res);
    };
    add("NVIDIA A100-SXM4-80GB", "megatron", -0.10);
    add("NVIDIA A100-SXM4-40GB", "nemo", 0.02);
    add("A100", "generic", -0.04);
    add("NVIDIA H100 80GB HBM3", "fsdp", 0.30);
    const ErrorBands b = computeErrorBands(records, report, "test");
    // The two kinds, then each GPU family over every framework.
    ASSERT_EQ(b.kinds.size(), 4u);
    EXPECT_EQ(b.kinds[2].kind, "A100 (every framework)");
    EXPECT_EQ(b.kinds[2].records, 3);
    EXPECT_EQ(b.kinds[3].kind, "H100 (every framework)");
    EXPECT_DOUBLE_EQ(b.kinds[3].medianAbsError, 0.30);
    EXPECT_EQ(b.kinds[0].kind, "A100 / Megatron-style");
    EXPECT_EQ(b.kinds[0].records, 3);
    EXPECT_DOUBLE_EQ(b.kinds[0].medianAbsError, 0.04);
    EXPECT_DOUBLE_EQ(b.kinds[0].p90AbsError, 0.10);
    EXPECT_NEAR(b.kinds[0].meanSignedError, -0.04, 1e-12);
    EXPECT_EQ(b.kinds[1].kind, "H100 / sharded data parallel");
    EXPECT_EQ(b.overall.records, 4);
    EXPECT_DOUBLE_EQ(b.overall.medianAbsError, 0.07);
    // DeepSpeed's pipeline engine is a kind of its own, and so is Megatron-DeepSpeed's tensor parallelism without
    // pipelining (its model runs through the engine all the same); ZeRO as pure data parallelism is sharded data
    // parallelism.
    ClusterConfig a100;
    a100.gpu.name = "NVIDIA A100-SXM4-80GB";
    Plan deepspeed;
    deepspeed.framework.name = "deepspeed";
    deepspeed.pp = 12;
    EXPECT_EQ(runKind(a100, deepspeed, false), "A100 / DeepSpeed pipeline");
    deepspeed.pp = 1;
    EXPECT_EQ(runKind(a100, deepspeed, false), "A100 / sharded data parallel");
    deepspeed.tp = 8;
    EXPECT_EQ(runKind(a100, deepspeed, false), "A100 / DeepSpeed pipeline");
    // A framework tessel has no defaults for (generic) is Megatron-style, but ZeRO-3 alone (MaxText's FSDP
    // under XLA) is sharded data parallelism; with tensor or pipeline parallelism beside it, Megatron-style
    // again.
    Plan generic;
    EXPECT_EQ(runKind(a100, generic, false), "A100 / Megatron-style");
    generic.zeroStage = 3;
    EXPECT_EQ(runKind(a100, generic, false), "A100 / sharded data parallel");
    generic.tp = 2;
    EXPECT_EQ(runKind(a100, generic, false), "A100 / Megatron-style");
    generic.tp = 1;
    generic.pp = 2;
    EXPECT_EQ(runKind(a100, generic, false), "A100 / Megatron-style");
    // Round trip, and a broken file names the field.
    const ErrorBands back = parseErrorBands(toJson(b), "bands.json#");
    EXPECT_DOUBLE_EQ(back.kinds[1].medianAbsError, 0.30);
    nlohmann::json bad = toJson(b);
    bad["kinds"][0]["median_abs_error"] = "small";
    try {
        parseErrorBands(bad, "bands.json#");
        FAIL() << "expected an InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "bands.json#/kinds/0/median_abs_error");
    }
    // Ties: inside the best step's band.
    EXPECT_TRUE(tiedWithin(10.3, 10.0, b.kinds[0]));
    EXPECT_FALSE(tiedWithin(10.5, 10.0, b.kinds[0]));
    // Context parallelism is a kind of its own, and every such run also lands in one band over all of them.
    add("NVIDIA H100 80GB HBM3", "megatron", -0.20);
    records.back().validationCase->scenario.plan.cp = 2;
    add("NVIDIA A100-SXM4-80GB", "torchtitan", -0.10);
    records.back().validationCase->scenario.plan.cp = 4;
    const ErrorBands withCp = computeErrorBands(records, report, "test");
    ASSERT_EQ(withCp.kinds.size(), 7u);
    EXPECT_EQ(withCp.kinds[2].kind, "H100 / Megatron-style / context parallel");
    EXPECT_EQ(withCp.kinds[3].kind, "A100 / sharded data parallel / context parallel");
    EXPECT_EQ(withCp.kinds[4].kind, kContextParallelKind);
    EXPECT_EQ(withCp.kinds[5].records, 4); // A100 (every framework): its three and the context-parallel one
    EXPECT_EQ(withCp.kinds[4].records, 2);
    EXPECT_DOUBLE_EQ(withCp.kinds[4].medianAbsError, 0.15);
    EXPECT_NEAR(withCp.kinds[4].meanSignedError, -0.15, 1e-12);
    EXPECT_EQ(withCp.kinds[0].records, 3); // the A100 Megatron-style band keeps its own runs only
    // A mixture-of-experts run is a kind of its own too, and lands in one band over every MoE run; the dense kinds
    // keep their own runs.
    add("NVIDIA H100 80GB HBM3", "megatron", 0.40);
    records.back().validationCase->scenario.model.moe = MoeConfig{};
    add("NVIDIA H100 80GB HBM3", "megatron", -0.30);
    records.back().validationCase->scenario.model.moe = MoeConfig{};
    records.back().validationCase->scenario.plan.cp = 2;
    const ErrorBands withMoe = computeErrorBands(records, report, "test");
    std::map<std::string, ErrorBand> kinds;
    for (const auto& k : withMoe.kinds) kinds[k.kind] = k;
    ASSERT_TRUE(kinds.count("H100 / Megatron-style / mixture of experts"));
    ASSERT_TRUE(kinds.count("H100 / Megatron-style / context parallel / mixture of experts"));
    ASSERT_TRUE(kinds.count(kMoeKind));
    EXPECT_EQ(kinds[kMoeKind].records, 2);
    EXPECT_DOUBLE_EQ(kinds[kMoeKind].medianAbsError, 0.35);
    EXPECT_EQ(kinds["H100 / Megatron-style / context parallel"].records, 1); // the dense run only
    EXPECT_EQ(kinds[kContextParallelKind].records, 3);                        // every cp run, MoE or not
    EXPECT_EQ(gpuFamily("NVIDIA H200 (SXM, 141 GB HBM3e)"), "H200");
    EXPECT_EQ(gpuFamily("NVIDIA B200 180GB HBM3e (SXM6)"), "B200");
    EXPECT_EQ(gpuFamily("NVIDIA GB200 (Blackwell GPU of a GB200 NVL72 rack, HBM3e)"), "GB200");
    // Blackwell Ultra is a family of its own (its runs are not the B200's), the GB300 before the B300 its name holds.
    EXPECT_EQ(gpuFamily("NVIDIA B300 288GB HBM3e (SXM, Blackwell Ultra)"), "B300");
    EXPECT_EQ(gpuFamily("NVIDIA GB300 (Blackwell Ultra GPU of a GB300 NVL72 rack, HBM3e)"), "GB300");
    EXPECT_EQ(gpuFamily("NVIDIA GH200 (96 GB HBM3)"), "H200");
    // AMD's Instinct parts are families of their own (the MI250X before the MI250 its name holds); other GPUs none.
    EXPECT_EQ(gpuFamily("AMD Instinct MI300X OAM (192 GB HBM3)"), "MI300X");
    EXPECT_EQ(gpuFamily("AMD Instinct MI250X GCD (one of two, 64 GB HBM2e)"), "MI250X");
    EXPECT_EQ(gpuFamily("AMD Instinct MI250 GCD (one of two, 64 GB HBM2e)"), "MI250");
    EXPECT_EQ(gpuFamily("Intel Gaudi 2"), "other");
    // The PCIe cards are their own families: the SXM parts' runs do not vouch for them, so with no run of their own a
    // prediction on one takes the band over every published run.
    EXPECT_EQ(gpuFamily("NVIDIA A100 80GB PCIe"), "A100 PCIe");
    EXPECT_EQ(gpuFamily("NVIDIA H100 PCIe (80 GB HBM2e, 350 W)"), "H100 PCIe");
    Plan megatron;
    megatron.framework.name = "megatron";
    const auto pcie = errorBandFor(test::clusterPreset("pcie-a100-80g"), megatron, false);
    const auto sxm = errorBandFor(test::clusterPreset("dgx-a100-80g"), megatron, false);
    ASSERT_TRUE(pcie && sxm);
    EXPECT_EQ(pcie->kind, "all published runs");
    EXPECT_EQ(sxm->kind, "A100 / Megatron-style");
}

TEST(ErrorBands, ACalibratedClusterIsShownItsOwnHeldOutRuns) {
    // `tessel calibrate` from runs known by their step writes each run's error with the scale the others gave; from
    // three such runs on, those errors are the band of every plan on that cluster, by hand: |+10%|, |-2%|, |+5%| ->
    // median 5%, p90 (nearest rank) 10%, mean +4.33%.
    ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    Plan megatron;
    megatron.framework.name = "megatron";
    c.calibration = nlohmann::json{{"step_runs",
                                    {{{"run", "a"}, {"error_held_out", 0.10}},
                                     {{"run", "b"}, {"error_held_out", -0.02}},
                                     {{"run", "c"}, {"error_held_out", 0.05}},
                                     {{"run", "d (a check: no held-out error)"}, {"error_after", 0.3}}}}};
    const auto band = errorBandFor(c, megatron, false);
    ASSERT_TRUE(band);
    EXPECT_EQ(band->kind, kCalibratedKind);
    EXPECT_EQ(band->records, 3);
    EXPECT_NEAR(band->medianAbsError, 0.05, 1e-12);
    EXPECT_NEAR(band->p90AbsError, 0.10, 1e-12);
    EXPECT_NEAR(band->meanSignedError, 0.13 / 3.0, 1e-12);
    EXPECT_EQ(bandCommand(band->kind), "tessel calibrate");
    EXPECT_EQ(bandSourceText(band->kind), "runs this cluster was calibrated on, each held out");
    EXPECT_EQ(bandSourceText("A100 / Megatron-style"), "published A100 / Megatron-style runs");
    // Two held-out runs are too few: the published band stands.
    c.calibration = nlohmann::json{{"step_runs", {{{"error_held_out", 0.1}}, {{"error_held_out", 0.2}}}}};
    const auto published = errorBandFor(c, megatron, false);
    ASSERT_TRUE(published);
    EXPECT_EQ(published->kind, "A100 / Megatron-style");
    EXPECT_FALSE(calibratedErrorBand(test::clusterPreset("dgx-a100-80g")));
}

TEST(ErrorBands, PeakMemoryBandsByHandAndTheVerdictAtTheBandsUpperEnd) {
    // Peaks are banded per framework family (not per GPU) over the records that state one; step-only records
    // stay out of them.
    std::vector<LoadedRecord> records;
    ValidationReport report;
    auto add = [&](const char* gpu, const char* framework, int pp, std::optional<double> memoryErr) {
        LoadedRecord r;
        ValidationCase c;
        c.scenario.cluster.gpu.name = gpu;
        c.scenario.plan.framework.name = framework;
        c.scenario.plan.pp = pp;
        r.validationCase = c;
        records.push_back(r);
        CaseResult res;
        res.predicted = true;
        res.stepError = 0.01;
        res.memoryError = memoryErr;
        report.results.push_back(res);
    };
    add("NVIDIA A100-SXM4-80GB", "deepspeed", 12, -0.20);
    add("NVIDIA A100-SXM4-80GB", "deepspeed", 6, -0.26);
    add("NVIDIA A100-SXM4-80GB", "deepspeed", 12, -0.24);
    add("NVIDIA H100 80GB HBM3", "torchtitan", 1, -0.02);
    add("NVIDIA A100-SXM4-40GB", "fsdp", 1, 0.04);
    add("NVIDIA A100-SXM4-40GB", "megatron", 1, std::nullopt);
    const ErrorBands b = computeErrorBands(records, report, "test");
    ASSERT_EQ(b.memoryKinds.size(), 2u);
    EXPECT_EQ(b.memoryKinds[0].kind, "DeepSpeed pipeline");
    EXPECT_EQ(b.memoryKinds[0].records, 3);
    EXPECT_DOUBLE_EQ(b.memoryKinds[0].medianAbsError, 0.24);
    EXPECT_DOUBLE_EQ(b.memoryKinds[0].p90AbsError, 0.26);
    EXPECT_NEAR(b.memoryKinds[0].meanSignedError, -0.70 / 3.0, 1e-12);
    EXPECT_EQ(b.memoryKinds[1].kind, "sharded data parallel"); // an H100 torchtitan and an A100 FSDP peak together
    EXPECT_EQ(b.memoryKinds[1].records, 2);
    EXPECT_DOUBLE_EQ(b.memoryKinds[1].medianAbsError, 0.03);
    EXPECT_EQ(b.memoryOverall.records, 5);
    EXPECT_DOUBLE_EQ(b.memoryOverall.medianAbsError, 0.20);
    EXPECT_EQ(b.overall.records, 6); // the step bands keep every record
    // Round trip; a file written before memory bands (no memory keys) reads with none, and a broken one names
    // the field.
    const ErrorBands back = parseErrorBands(toJson(b), "bands.json#");
    ASSERT_EQ(back.memoryKinds.size(), 2u);
    EXPECT_DOUBLE_EQ(back.memoryKinds[0].medianAbsError, 0.24);
    EXPECT_EQ(back.memoryOverall.records, 5);
    nlohmann::json old = toJson(b);
    old.erase("memory_kinds");
    old.erase("memory_overall");
    const ErrorBands before = parseErrorBands(old, "bands.json#");
    EXPECT_TRUE(before.memoryKinds.empty());
    EXPECT_EQ(before.memoryOverall.records, 0);
    nlohmann::json bad = toJson(b);
    bad["memory_kinds"][1]["records"] = -3;
    try {
        parseErrorBands(bad, "bands.json#");
        FAIL() << "expected an InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "bands.json#/memory_kinds/1/records");
    }
    // The range a measured peak could have been at the band's median (|p - m| / m = 0.24): 60 GiB predicted is
    // 60 / 1.24 = 48.4 .. 60 / 0.76 = 78.9 GiB; an 80 GiB GPU holds it, a 75 GiB one may not.
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    const PeakRange r = peakRangeWithin(60.0 * GiB, b.memoryKinds[0]);
    EXPECT_NEAR(r.lowBytes / GiB, 60.0 / 1.24, 1e-9);
    EXPECT_NEAR(r.highBytes / GiB, 60.0 / 0.76, 1e-9);
    EXPECT_NEAR(peakFittingBandBytes(80.0 * GiB, b.memoryKinds[0]) / GiB, 80.0 * 0.76, 1e-9); // 60.8 GiB fits at 80
    EXPECT_EQ(memoryVerdict(60.8 * GiB, 80.0 * GiB, b.memoryKinds[0]), MemoryVerdict::Fits);
    EXPECT_EQ(memoryVerdict(60.9 * GiB, 80.0 * GiB, b.memoryKinds[0]), MemoryVerdict::MayNotFit);
    EXPECT_EQ(memoryVerdict(60.0 * GiB, 80.0 * GiB, b.memoryKinds[0]), MemoryVerdict::Fits);
    EXPECT_EQ(memoryVerdict(60.0 * GiB, 75.0 * GiB, b.memoryKinds[0]), MemoryVerdict::MayNotFit);
    EXPECT_EQ(memoryVerdict(76.0 * GiB, 75.0 * GiB, b.memoryKinds[0]), MemoryVerdict::OutOfMemory);
    EXPECT_EQ(memoryVerdict(74.0 * GiB, 75.0 * GiB, std::nullopt), MemoryVerdict::Fits); // no band: the peak alone
    // Where the caching allocator holds more than the allocated peak, the band is read on the reserved one (the
    // kind of peak it was measured on) and out of memory on the allocated one.
    EXPECT_EQ(memoryVerdict(58.0 * GiB, 60.9 * GiB, 80.0 * GiB, b.memoryKinds[0]), MemoryVerdict::MayNotFit);
    EXPECT_EQ(memoryVerdict(58.0 * GiB, 60.8 * GiB, 80.0 * GiB, b.memoryKinds[0]), MemoryVerdict::Fits);
    EXPECT_EQ(memoryVerdict(74.0 * GiB, 90.0 * GiB, 75.0 * GiB, std::nullopt), MemoryVerdict::Fits);
    EXPECT_EQ(memoryVerdict(76.0 * GiB, 76.0 * GiB, 75.0 * GiB, std::nullopt), MemoryVerdict::OutOfMemory);
    EXPECT_STREQ(toString(MemoryVerdict::MayNotFit), "may_not_fit");
    ErrorBand whole = b.memoryKinds[0];
    whole.medianAbsError = 1.0;
    EXPECT_TRUE(std::isinf(peakRangeWithin(GiB, whole).highBytes));
    EXPECT_EQ(peakFittingBandBytes(80.0 * GiB, whole), 0.0); // nothing fits a band of 100%
    EXPECT_EQ(memoryVerdict(GiB, 80.0 * GiB, whole), MemoryVerdict::MayNotFit);
    // The kind is the framework family.
    Plan pipeline;
    pipeline.framework.name = "deepspeed";
    pipeline.pp = 4;
    EXPECT_EQ(memoryKind(pipeline), "DeepSpeed pipeline");
    pipeline.pp = 1;
    EXPECT_EQ(memoryKind(pipeline), "sharded data parallel");
    pipeline.tp = 2;
    EXPECT_EQ(memoryKind(pipeline), "DeepSpeed pipeline");
}

// The record predicted with the share fitted on it alone.
std::vector<LoadedRecord> withOwnFit(LoadedRecord r) {
    const double f = fitSustainedTensorFraction({r}).fraction;
    r.validationCase->scenario.cluster.gpu.sustainedTensorFraction = f;
    return {r};
}

TEST(ErrorBands, TheShippedBandsAreWhatValidateMeasuresToday) {
    // data/validation/error_bands.json must be regenerated (tessel validate --write-bands) whenever the model
    // changes, so predictions are never shown with a stale band.
    const std::string file = shippedErrorBandsFile();
    ASSERT_FALSE(file.empty());
    std::vector<LoadedRecord> records;
    const std::vector<std::string> files = errorBandValidationFiles();
    ASSERT_EQ(files.size(), 30u); // the shared runs and tessel's twenty-nine check sets of published runs
    for (const auto& f : files) {
        auto more = loadValidationFile(f);
        records.insert(records.end(), more.begin(), more.end());
    }
    const ErrorBands now = computeErrorBands(records, validateRecords(records), "x");
    const ErrorBands& shipped = shippedErrorBands();
    // The step bands and the peak bands alike: the same kinds in the same order, the same figures.
    auto sameBands = [](const std::vector<ErrorBand>& shippedKinds, const ErrorBand& shippedAll,
                        const std::vector<ErrorBand>& nowKinds, const ErrorBand& nowAll) {
        ASSERT_EQ(shippedKinds.size(), nowKinds.size());
        for (size_t i = 0; i < nowKinds.size(); ++i) {
            EXPECT_EQ(shippedKinds[i].kind, nowKinds[i].kind);
            EXPECT_EQ(shippedKinds[i].records, nowKinds[i].records);
            EXPECT_NEAR(shippedKinds[i].medianAbsError, nowKinds[i].medianAbsError, 1e-9) << nowKinds[i].kind;
            EXPECT_NEAR(shippedKinds[i].p90AbsError, nowKinds[i].p90AbsError, 1e-9) << nowKinds[i].kind;
        }
        EXPECT_EQ(shippedAll.records, nowAll.records);
        EXPECT_NEAR(shippedAll.medianAbsError, nowAll.medianAbsError, 1e-9);
    };
    sameBands(shipped.kinds, shipped.overall, now.kinds, now.overall);
    sameBands(shipped.memoryKinds, shipped.memoryOverall, now.memoryKinds, now.memoryOverall);
    // Peaks: torchtitan's, BLOOM's and Megatron-LM's own published ones band their framework families. A family
    // with fewer than the minimum gets no band (not the other families': NVIDIA's own runs ran at 91-98% of the GPU
    // by tessel's count, which BLOOM's band would call at risk) and says why.
    Plan megatronPlan;
    megatronPlan.framework.name = "megatron";
    Plan pipeline = megatronPlan;
    pipeline.framework.name = "deepspeed";
    pipeline.pp = 12;
    const auto bloomBand = memoryBandFor(pipeline);
    ASSERT_TRUE(bloomBand.has_value());
    EXPECT_EQ(bloomBand->kind, "DeepSpeed pipeline");
    EXPECT_GE(bloomBand->records, 9);
    // Megatron-LM's functional tests (six allocated peaks, two plans on three GPUs, each within 2.3%),
    // MLPerf's Llama 3.1 405B (twelve, stage 0's: five on H100 within 0.3%, two on H200 within 0.1%, five on
    // GB200 within 4.6% since Blackwell's FP8 weights are kept without a transpose; 11-17% over before) and
    // Cisco's two Llama 3.1 8B peaks on H100 (-6.1%, -6.2%), and Megatron-Bridge's rank-0 allocated peak of
    // its overlap A/B (-5.6%).
    const auto megatronBand = memoryBandFor(megatronPlan);
    ASSERT_TRUE(megatronBand.has_value());
    EXPECT_EQ(megatronBand->kind, "Megatron-style");
    EXPECT_EQ(megatronBand->records, 21);
    EXPECT_LT(megatronBand->medianAbsError, 0.01);
    EXPECT_LT(megatronBand->p90AbsError, 0.06);
    EXPECT_FALSE(memoryBandFor(megatronPlan, 22).has_value());
    EXPECT_EQ(noMemoryBandText(megatronPlan),
              "only 21 published Megatron-style runs state their peak, too few for a band (" +
                  std::to_string(shipped.memoryOverall.records - 21) + " runs of other frameworks do)");
    Plan torchtitan = megatronPlan;
    torchtitan.framework.name = "torchtitan";
    const auto shardedBand = memoryBandFor(torchtitan);
    ASSERT_TRUE(shardedBand.has_value());
    EXPECT_EQ(shardedBand->kind, "sharded data parallel");
    // Its own runs' band (torchtitan's, MPT's, OLMo-core's peaks), not the DeepSpeed pipeline's.
    EXPECT_GE(shardedBand->records, 20);
    EXPECT_NE(shardedBand->medianAbsError, bloomBand->medianAbsError);
    // A plan gets its kind's band.
    const ClusterConfig a100 = test::clusterPreset("dgx-a100-80g");
    Plan p;
    p.framework.name = "megatron";
    const auto band = errorBandFor(a100, p, false);
    ASSERT_TRUE(band.has_value());
    EXPECT_EQ(band->kind, "A100 / Megatron-style");
    // H100 Megatron-style plans get the band of NVIDIA's own H100 runs, not the all-runs fallback.
    const auto h100 = errorBandFor(test::clusterPreset("dgx-h100-80g"), p, false);
    ASSERT_TRUE(h100.has_value());
    EXPECT_EQ(h100->kind, "H100 / Megatron-style");
    // A context-parallel plan is shown with the context-parallel runs' band: its own kind's where there are enough
    // of them (NeMo's H100 runs), else every context-parallel run's (no A100 run in the sets has cp > 1).
    Plan cp = p;
    cp.cp = 2;
    const auto h100cp = errorBandFor(test::clusterPreset("dgx-h100-80g"), cp, false);
    ASSERT_TRUE(h100cp.has_value());
    EXPECT_EQ(h100cp->kind, "H100 / Megatron-style / context parallel");
    EXPECT_NE(h100cp->medianAbsError, h100->medianAbsError); // its own runs' figure, not the plain kind's
    const auto a100cp = errorBandFor(a100, cp, false);
    ASSERT_TRUE(a100cp.has_value());
    EXPECT_EQ(a100cp->kind, kContextParallelKind);
    // A B200 plan: its kind has eighteen runs (Megatron-Bridge's four, MLPerf's GPT-3 preview, four of MLPerf v5.1's
    // Llama 3.1 8B FP8 rows and nine of its NVFP4 ones), more than a kind needs; were nineteen the minimum it would take
    // the band of the B200's own 34 runs (Megatron-Bridge's, NeMo's long-sequence table, MLPerf's), not the all-runs
    // fallback measured on other GPUs.
    const auto b200 = errorBandFor(test::clusterPreset("dgx-b200"), p, false);
    ASSERT_TRUE(b200.has_value());
    EXPECT_EQ(b200->kind, "B200 / Megatron-style");
    EXPECT_EQ(b200->records, 18);
    const auto b200Family = errorBandFor(test::clusterPreset("dgx-b200"), p, false, 19);
    ASSERT_TRUE(b200Family.has_value());
    EXPECT_EQ(b200Family->kind, gpuFamilyKind("B200"));
    EXPECT_EQ(b200Family->records, 34);
    // An H200 Megatron-style plan: no Megatron-style H200 runs without context parallelism, but the H200's own 30
    // (torchtitan's two, KempnerForge's 25, MLPerf's two Nebius 405B rows and HPE's 8B row, all three at cp 2), so the
    // GPU family's band, not the all-runs fallback.
    const auto h200 = errorBandFor(test::clusterPreset("h200-single"), p, false);
    ASSERT_TRUE(h200.has_value());
    EXPECT_EQ(h200->kind, gpuFamilyKind("H200"));
    EXPECT_EQ(h200->records, 30);
    // The B300 has four runs (MLPerf v5.1's Llama 3.1 8B on one node: Dell's and Supermicro's in FP8, Lenovo's and
    // Nebius's in NVFP4), fewer than a kind's band needs but enough for its GPU family's (kGpuFamilyMinRecords): a B300
    // plan is shown the B300's own runs' band, no longer the B200's. The GB300 has runs of its own (Megatron-Bridge's, in
    // check_megatron_bridge_gb300_fp8.json and check_megatron_bridge_2026.json), so a band of its own, not its
    // sibling's: since the 2026 set, enough Megatron-style ones for the kind's band, not only the family's.
    const auto b300 = errorBandFor(test::clusterPreset("dgx-b300"), p, false);
    ASSERT_TRUE(b300.has_value());
    EXPECT_EQ(b300->kind, gpuFamilyKind("B300"));
    EXPECT_EQ(b300->records, 4);
    const auto gb300 = errorBandFor(test::clusterPreset("gb300-nvl72"), p, false);
    ASSERT_TRUE(gb300.has_value());
    EXPECT_EQ(gb300->kind, "GB300 / Megatron-style");
    // A mixture-of-experts plan is shown the MoE runs' band (Megatron-Bridge's Qwen3 rows on H100, DGX Cloud's Grok-1,
    // NeMo AutoModel's), never the dense runs' of its GPU and framework, which say nothing of routing and dispatch.
    const auto moe = errorBandFor(test::clusterPreset("dgx-h100-80g"), p, true);
    ASSERT_TRUE(moe.has_value());
    EXPECT_NE(moe->kind.find("mixture of experts"), std::string::npos) << moe->kind;
    EXPECT_GT(moe->p90AbsError, h100->p90AbsError);
    const auto moeB200 = errorBandFor(test::clusterPreset("dgx-b200"), p, true);
    ASSERT_TRUE(moeB200.has_value());
    EXPECT_EQ(moeB200->kind, kMoeKind); // no B200 MoE run: every MoE run's band, not the B200's dense ones
    EXPECT_EQ(siblingGpuFamily("GB300"), "GB200");
    EXPECT_EQ(siblingGpuFamily("H200"), ""); // a family of its own, whose runs are not the H100's
    EXPECT_EQ(gpuFamily("AMD Instinct MI350X OAM (288 GB HBM3E)"), "MI350X");
    EXPECT_EQ(siblingGpuFamily("MI350X"), "MI355X");
}

TEST(SustainedFraction, TheShippedValueIsWhatTheFitGivesAndEveryGpuCarriesIt) {
    // gpu.sustained_tensor_fraction is the one constant fitted to published runs (FORMULAS.md §3.3): the shipped
    // clusters carry what `tessel validate --fit` gives on the shared set, one value for every GPU whose share was
    // not measured. Hopper's was (gpu.sustained_share_by_duty, the H200's power probe): its presets carry the
    // curve, and their records (the 22 H100 rows) are left out of the fit. Blackwell's presets carry the same curve,
    // its full-load end measured on a B200 (flashinfer#2899); no shared record is on Blackwell.
    const auto records = loadValidationFile(defaultValidationFile());
    const SustainedFit fit = fitSustainedTensorFraction(records);
    EXPECT_EQ(fit.records, 85 - 22);
    EXPECT_NEAR(fit.medianLogError, 0.0, 1e-3);
    // Every shipped GPU cluster (those with a GEMM shape model; the CPU host has none) carries one or the other.
    int gpus = 0, curves = 0;
    for (const std::string& name : presetNames("clusters")) {
        const ClusterConfig c = test::clusterPreset(name);
        if (!c.gpu.gemmModel) continue;
        ++gpus;
        const bool hopper = c.gpu.name.find("H100") != std::string::npos || c.gpu.name.find("H200") != std::string::npos;
        const bool blackwell = c.gpu.name.find("B200") != std::string::npos || c.gpu.name.find("B300") != std::string::npos;
        EXPECT_EQ(!c.gpu.sustainedShareByDuty.empty(), hopper || blackwell) << name;
        const bool pcieCard = c.gpu.name.find("PCIe") != std::string::npos;
        if (hopper && pcieCard) {
            // The H100 PCIe card carries the GH100 curve moved to its 350 W and 114 SMs by the die's power law
            // (pcie-h100-80g.json's source): the SXM5 preset's shares times one factor below 1, no law of its own.
            ++curves;
            const ClusterConfig sxm = test::clusterPreset("dgx-h100-80g");
            ASSERT_EQ(c.gpu.sustainedShareByDuty.size(), sxm.gpu.sustainedShareByDuty.size()) << name;
            const double factor = c.gpu.sustainedShareByDuty.back().share / sxm.gpu.sustainedShareByDuty.back().share;
            EXPECT_GT(factor, 0.7) << name;
            EXPECT_LT(factor, 0.95) << name;
            for (size_t i = 0; i < sxm.gpu.sustainedShareByDuty.size(); ++i)
                EXPECT_NEAR(c.gpu.sustainedShareByDuty[i].share, sxm.gpu.sustainedShareByDuty[i].share * factor, 1e-3) << name;
            EXPECT_FALSE(c.gpu.sustainedSharePower.has_value()) << name;
            continue;
        }
        if (hopper || blackwell) {
            ++curves;
            // The curve's full-load end as measured at 700 W, moved to the part's own limit where it differs (the
            // 500 W Grand Teton H100: x0.844).
            EXPECT_NEAR(c.gpu.sustainedShareByDuty.back().share, 0.853, 1e-9) << name;
            EXPECT_NEAR(c.gpu.sustainedTensorShare(1.0), 0.853 * c.gpu.powerLimitShareScale(), 1e-9) << name;
            // The curve's power law is the GH100 die's (bench/power_dvfs_fit.py): every Hopper preset carries it.
            if (hopper) EXPECT_TRUE(c.gpu.sustainedSharePower.has_value()) << name;
        } else {
            EXPECT_NEAR(c.gpu.sustainedTensorFraction, fit.fraction, 0.002) << name;
        }
    }
    EXPECT_GE(gpus, 5);
    EXPECT_GE(curves, 6);
    // The fit moves the share until the median record is exact: with every GPU at the benchmark's throughput
    // (1.0) the median record is predicted too fast, so the fitted share is below 1.
    EXPECT_LT(fit.fraction, 0.97);
    EXPECT_GT(fit.fraction, 0.8);
}

TEST(SustainedFraction, LeaveOneGroupOutRefitsWithoutTheGroupItPredicts) {
    // Two groups of one record each: each is predicted with the share fitted on the other alone, which makes
    // that other record exact; the report says which value each group got.
    auto records = loadValidationFile(defaultValidationFile());
    std::vector<LoadedRecord> two;
    for (const auto& r : records)
        if (r.id == "megatron-sc21-t1-18B" || r.id == "korthikanti-t5-22B-full_recompute") two.push_back(r);
    ASSERT_EQ(two.size(), 2u);
    const SustainedFit onlyKorthikanti = fitSustainedTensorFraction({two[1]});
    const LeaveOneGroupOut logo = leaveOneGroupOut(two);
    ASSERT_EQ(logo.fittedConstants.size(), 2u);
    EXPECT_NE(logo.fittedConstants[0].find("without megatron_sc21_table1"), std::string::npos);
    std::vector<LoadedRecord> sc21{two[0]};
    sc21[0].validationCase->scenario.cluster.gpu.sustainedTensorFraction = onlyKorthikanti.fraction;
    EXPECT_NEAR(logo.report.results[0].predictedStepSeconds, validateRecords(sc21).results[0].predictedStepSeconds, 1e-9);
    // In-sample, the same record with its own fit is exact; out of sample it is not.
    EXPECT_NEAR(*validateRecords(withOwnFit(two[0])).results[0].stepError, 0.0, 2e-3);
    // A group whose other groups all ran on GPUs with a measured curve has nothing to refit on: it keeps the shipped
    // value instead of the fit's starting 1.
    std::vector<LoadedRecord> hopperOther = two;
    hopperOther[1].validationCase->scenario.cluster.gpu.sustainedShareByDuty = {GpuSpec::DutyShare{}};
    const LeaveOneGroupOut kept = leaveOneGroupOut(hopperOther);
    EXPECT_NE(kept.fittedConstants[0].find("not refitted"), std::string::npos);
    EXPECT_NEAR(kept.report.results[0].predictedStepSeconds,
                validateRecords({two[0]}).results[0].predictedStepSeconds, 1e-9);
}

} // namespace
} // namespace tessel::sim
