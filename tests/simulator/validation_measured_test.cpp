// What a published run measured, read as the source counted it: a step from a throughput, a step time or a FLOP rate
// in the source's own FLOP convention, a peak as allocated, allocator-reserved or device memory, and figures that are
// none named, not compared (`tessel validate`; simulator/src/validation_measured.cpp).
#include "validation_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace tessel::sim {
namespace {
using test::load;
using test::mentions;
using test::record;

TEST(ValidationRecord, AStepTimeFromAFlopRateWhenThatIsAllTheRecordStates) {
    // Only MFU or TFLOP/s published: the step that rate implies with tessel's model-FLOP count, said so; a
    // hardware count (HFU) with full recompute is 4/3 of the model count.
    nlohmann::json r = record();   // 32 A100, full recompute
    r["measured"] = {{"mfu", 0.5}};
    ValidationCase c = load(r);
    const double flops = modelFlopsPerStep(c.scenario.model, c.scenario.plan);
    ASSERT_TRUE(c.measured.stepSeconds.has_value());
    EXPECT_DOUBLE_EQ(*c.measured.stepSeconds, flops / (0.5 * 312e12 * 32));
    EXPECT_EQ(c.measured.stepSource, "runs.json#/0/measured/mfu");
    EXPECT_TRUE(mentions(c.assumptions, "derived from measured/mfu with tessel's model-FLOP count"));
    r["measured"] = {{"tflops_per_gpu", 150.0}, {"tflops_kind", "HFU (recompute counted)"}};
    c = load(r);
    EXPECT_DOUBLE_EQ(*c.measured.stepSeconds, flops * 4.0 / 3.0 / (150e12 * 32));
    // A stated step time or throughput always wins over a rate.
    r["measured"]["tokens_per_s"] = 65536.0;
    EXPECT_EQ(load(r).measured.stepSource, "runs.json#/0/measured/tokens_per_s");
}

TEST(ValidationRecord, AllocatedMemoryLeavesOutWhatTheClusterReserves) {
    nlohmann::json allocated = record();
    allocated["measured"]["memory_gb"] = 40.0;
    allocated["measured"]["memory_kind"] = "torch.cuda.max_memory_allocated";
    nlohmann::json reserved = allocated;
    reserved["measured"]["memory_kind"] = "nvidia-smi";
    nlohmann::json allocatorReserved = allocated;
    allocatorReserved["measured"]["memory_kind"] = "torch.cuda.max_memory_reserved";
    const auto loaded = loadValidationRecords(nlohmann::json::array({allocated, reserved, allocatorReserved}), "runs.json");
    ASSERT_TRUE(loaded[0].validationCase && loaded[1].validationCase && loaded[2].validationCase);
    EXPECT_TRUE(loaded[0].validationCase->measured.memoryIsAllocated);
    EXPECT_FALSE(loaded[1].validationCase->measured.memoryIsAllocated);
    EXPECT_FALSE(loaded[1].validationCase->measured.memoryIsAllocatorReserved);
    EXPECT_TRUE(loaded[2].validationCase->measured.memoryIsAllocatorReserved);
    const ValidationReport report = validateRecords(loaded);
    const ValidationCase& c = *loaded[0].validationCase;
    const double reservedBytes = static_cast<double>(c.scenario.cluster.gpu.reservedBytes);
    ASSERT_GT(reservedBytes, 0.0);
    // The device's figure (nvidia-smi) holds the cluster's reserve and NCCL's buffers (FORMULAS.md §2), the
    // allocator's reserved one the reserve alone (this record's peak takes no segment of its own beside it).
    const MemoryReport m = predictMemory(c.scenario.model, c.scenario.cluster, c.scenario.plan);
    const double library = m.stages[static_cast<size_t>(m.peakStage)].other.collectiveLibraryBytes;
    ASSERT_GT(library, 0.0);
    EXPECT_NEAR(report.results[1].predictedPeakMemoryBytes - report.results[0].predictedPeakMemoryBytes,
                reservedBytes + library, 1.0);
    EXPECT_NEAR(report.results[1].predictedPeakMemoryBytes - report.results[2].predictedPeakMemoryBytes, library, 1.0);
    ASSERT_TRUE(report.results[0].memoryError.has_value());
    EXPECT_NEAR(*report.results[0].memoryError, (report.results[0].predictedPeakMemoryBytes - 40e9) / 40e9, 1e-12);
}

// A measured figure under a name tessel reads that is not one (a negative rate, a word, a utilization over 100%), or
// that gives a step or peak no run of this plan on this GPU can have, is said and not compared; where it was the
// record's only figure the reason names it, not "states no step time". Found by mutating shipped records: a rate of
// 1e300 TFLOP/s had given a measured step of 0 s and an error of +inf%.
TEST(ValidationRecord, AMeasuredFigureThatIsNoneIsNamedNotCompared) {
    auto resultOf = [](nlohmann::json measured) {
        nlohmann::json r = record();
        r["measured"] = std::move(measured);
        const ValidationReport report = validateRecords(loadValidationRecords(nlohmann::json::array({r}), "runs.json"));
        return report.results.at(0);
    };
    const CaseResult negative = resultOf({{"tokens_per_s", -1}});
    EXPECT_TRUE(negative.predicted);
    EXPECT_FALSE(negative.stepError.has_value());
    EXPECT_EQ(negative.reason, "nothing to compare with: measured/tokens_per_s: -1 is not a positive number");
    EXPECT_TRUE(mentions(negative.assumptions, "measured/tokens_per_s: -1 is not a positive number: not read"));
    EXPECT_EQ(resultOf({{"mfu", 150}}).reason, "nothing to compare with: measured/mfu: 150 is above 100%");
    EXPECT_EQ(resultOf({{"iteration_time_s", "soon"}}).reason,
              "nothing to compare with: measured/iteration_time_s: \"soon\" is not a positive number");
    // 131072 tokens a step (64 x 2048) at 1e20 tokens/s: 1.3e-15 s a step, which would run the model's FLOPs far
    // faster than an A100's 312 TFLOP/s.
    const CaseResult fast = resultOf({{"tokens_per_s", 1e20}});
    EXPECT_FALSE(fast.stepError.has_value());
    EXPECT_NE(fast.reason.find("measured/tokens_per_s gives a step of 1.31e-15 s"), std::string::npos) << fast.reason;
    EXPECT_NE(fast.reason.find("above twice the GPU's highest dense peak (312 TFLOP/s)"), std::string::npos) << fast.reason;
    // A peak past twice the GPU's memory is not compared; the step beside it still is.
    const CaseResult huge = resultOf({{"tokens_per_s", 65536.0}, {"memory_gb", 1e6}});
    ASSERT_TRUE(huge.stepError.has_value());
    EXPECT_NEAR(huge.measuredStepSeconds.value_or(0.0), 2.0, 1e-12);
    EXPECT_FALSE(huge.memoryError.has_value());
    EXPECT_TRUE(mentions(huge.assumptions, "measured/memory_gb gives a peak of 1e+06 GB, above twice the GPU's"));
    // The record as written, its figures compared.
    EXPECT_TRUE(resultOf(record()["measured"]).stepError.has_value());
}

// A step read from a FLOP rate counts FLOPs as the source's stated convention does: attention whole (tessel's count,
// the default), half under a causal mask, or not at all (6 N a token, N the record's params for a dense model).
TEST(ValidationRecord, AFlopRateIsReadInTheSourcesOwnCount) {
    auto stepOf = [](const char* kind) {
        nlohmann::json r = record();
        r["model"]["params"] = 6.7e9;
        r["measured"] = {{"tflops_per_gpu", 100.0}, {"tflops_kind", kind}};
        const ValidationCase c = load(r);
        EXPECT_TRUE(c.measured.stepSeconds.has_value()) << kind;
        return std::make_pair(c.measured.stepSeconds.value_or(0.0), c.assumptions);
    };
    const ValidationCase base = load(record());
    const double gpus = 32.0, tokens = 64.0 * 2048.0, rate = 100e12 * gpus; // tp 4 x pp 2 x dp 4; 64 x 2048 tokens
    const double whole = modelFlopsPerStep(base.scenario.model, base.scenario.plan) / rate;
    const double causal = modelFlopsPerStep(base.scenario.model, base.scenario.plan, 0.5) / rate;
    EXPECT_LT(causal, whole);
    EXPECT_NEAR(stepOf("model").first, whole, 1e-12);
    EXPECT_NEAR(stepOf("6*N + attention 6*L*2*2*d*s").first, whole, 1e-12);
    EXPECT_NEAR(stepOf("model (NeMo flops_formulas, causal attention counted whole)").first, whole, 1e-12);
    const auto [halved, said] = stepOf("model FLOPs with attention under its causal mask");
    EXPECT_NEAR(halved, causal, 1e-12);
    EXPECT_TRUE(mentions(said, "causal mask counted half, as the source's convention says"));
    const double sixN = 6.0 * 6.7e9 * tokens / rate; // 1.647 s
    EXPECT_NEAR(stepOf("MFU = 6ND / (peak x time)").first, sixN, 1e-12);
    EXPECT_NEAR(stepOf("6 x params x tokens").first, sixN, 1e-12);
    EXPECT_NEAR(stepOf("6ND on 96 GPUs").first, sixN, 1e-12); // a GPU count, not Megatron's 96 B s l h^2
    const auto [excluded, saidSix] = stepOf("model FLOPs, attention excluded");
    EXPECT_NEAR(excluded, sixN, 1e-12);
    EXPECT_TRUE(mentions(saidSix, "the source's 6 x N x tokens (N = 6.7 B, model/params; attention not counted"));
    // An HFU in 6N's convention counts the recomputed forward: 8 N a token under full recompute.
    nlohmann::json hfu = record();
    hfu["model"]["params"] = 6.7e9;
    hfu["measured"] = {{"hfu", 0.5}, {"tflops_kind", "hardware: 8ND with recompute"}};
    const ValidationCase h = load(hfu);
    ASSERT_TRUE(h.measured.stepSeconds.has_value());
    EXPECT_NEAR(*h.measured.stepSeconds, 8.0 * 6.7e9 * tokens / (0.5 * 312e12 * gpus), 1e-9);
}

} // namespace
} // namespace tessel::sim
