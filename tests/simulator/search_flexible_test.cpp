// The search on real requests: offload only where a plan does not fit, only plans a framework runs (each of which
// exports), a batch range, and GPU counts up to a bound (idle GPUs) against separate searches per count.
#include "../cost_models/test_support.hpp"

#include "tessel/cost/memory.hpp"
#include "tessel/sim/export.hpp"
#include "tessel/sim/search.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace tessel::sim {
namespace {

// GPT-3 1.3B on DGX A100 80GB nodes: a small space that fits without offload.
struct Small {
    ModelConfig model = test::preset("gpt3-1.3b");
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
};
SearchSpace smallSpace(int gpus, int globalBatch) {
    SearchSpace s;
    s.gpus = gpus;
    s.globalBatch = globalBatch;
    s.maxVpp = 2;
    return s;
}

SearchOptions quiet(int top = 5) {
    SearchOptions o;
    o.topK = top;
    o.threads = 2;
    return o;
}

// Llama-2 70B on one DGX A100 80GB node: 70B x 18 bytes of model state do not fit in 8 x 80 GB at any ZeRO stage,
// so only offload can run it; the node's 2 TB of host memory holds the optimizer partitions.
struct Llama70bOnOneNode : ::testing::Test {
    ModelConfig model = test::preset("llama2-70b");
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    SearchSpace space() const {
        SearchSpace s;
        s.gpus = 8;
        s.globalBatch = 16;
        s.maxVpp = 2;
        return s;
    }
};

TEST_F(Llama70bOnOneNode, NothingFitsWithoutOffload) {
    SearchSpace s = space();
    s.offload = false;
    const SearchResult r = searchPlans(model, cluster, s, quiet());
    EXPECT_TRUE(r.top.empty());
    EXPECT_EQ(r.feasible, 0u);
}

TEST_F(Llama70bOnOneNode, OffloadPlansFitAndAreExact) {
    const SearchResult r = searchPlans(model, cluster, space(), quiet());
    ASSERT_FALSE(r.top.empty());
    for (const auto& t : r.top) {
        EXPECT_TRUE(t.plan.offloads());
        // Offloaded only because the same plan without offload does not fit.
        Plan plain = t.plan;
        plain.offloadOptimizer = plain.offloadParameters = plain.offloadActivations = false;
        EXPECT_FALSE(predictMemory(model, cluster, plain).fits);
        // The memory model and the simulator agree with what the search reports.
        const MemoryReport mem = predictMemory(model, cluster, t.plan);
        EXPECT_TRUE(mem.fits);
        EXPECT_DOUBLE_EQ(mem.peakBytes, t.peakBytes);
        EXPECT_NEAR(simulatePlan(model, cluster, t.plan).metrics.stepSeconds, t.metrics.stepSeconds,
                    1e-9 * t.metrics.stepSeconds);
        EXPECT_LE(stepLowerBoundSeconds(model, cluster, t.plan), t.metrics.stepSeconds * (1.0 + 1e-9));
        EXPECT_LE(mem.hostBytesPerNode(), cluster.host.memoryBytes);
    }
    for (size_t i = 1; i < r.top.size(); ++i) EXPECT_LE(r.top[i - 1].metrics.stepSeconds, r.top[i].metrics.stepSeconds);
}

TEST_F(Llama70bOnOneNode, OffloadCostsTimeAndTheCpuStepShows) {
    // The same plan with the optimizer on the GPU (given memory) and offloaded: the CPU step and the parameter
    // upload make the offloaded step longer by at least the CPU Adam time of the partition.
    const SearchResult r = searchPlans(model, cluster, space(), quiet(1));
    ASSERT_EQ(r.top.size(), 1u);
    Plan plan = r.top.front().plan;
    ASSERT_TRUE(plan.offloadOptimizer);
    ClusterConfig big = cluster;
    big.gpu.memoryBytes = int64_t{1} << 45;
    const double offloaded = simulatePlan(model, big, plan).metrics.stepSeconds;
    plan.offloadOptimizer = plan.offloadParameters = plan.offloadActivations = false;
    const double onGpu = simulatePlan(model, big, plan).metrics.stepSeconds;
    EXPECT_GT(offloaded, onGpu);
}

TEST_F(Llama70bOnOneNode, FrameworkRestrictionExportsEveryRow) {
    for (ExportFormat f : allExportFormats()) {
        SearchSpace s = space();
        s.runnableBy = f;
        const SearchResult r = searchPlans(model, cluster, s, quiet(3));
        for (const auto& t : r.top) {
            EXPECT_TRUE(frameworkRuns(model, cluster, t.plan, f)) << toString(f);
            Scenario sc;
            sc.model = model;
            sc.cluster = cluster;
            sc.cluster.nodes = 1;
            sc.plan = t.plan;
            EXPECT_NO_THROW(exportPlan(sc, f)) << toString(f);
        }
        if (f == ExportFormat::Torchtitan) EXPECT_TRUE(r.top.empty()); // it offloads nothing tessel models
        else EXPECT_FALSE(r.top.empty()) << toString(f);
    }
}

TEST(SearchFramework, AnyMarksRowsAndRestrictionMatchesTheMarks) {
    const auto [model, cluster] = Small{};
    SearchSpace s = smallSpace(8, 32);
    const SearchResult any = searchPlans(model, cluster, s, quiet(20));
    ASSERT_FALSE(any.top.empty());
    for (const auto& t : any.top) {
        std::vector<std::string> expected;
        for (ExportFormat f : allExportFormats())
            if (frameworkRuns(model, cluster, t.plan, f)) expected.push_back(toString(f));
        EXPECT_EQ(t.frameworks, expected);
    }
    // The best Megatron-runnable plan is the best plan of `any` that Megatron runs, when one is in the top 20.
    s.runnableBy = ExportFormat::Megatron;
    const SearchResult megatron = searchPlans(model, cluster, s, quiet(1));
    ASSERT_EQ(megatron.top.size(), 1u);
    EXPECT_GT(megatron.rejected.size(), 0u);
    for (const auto& t : any.top)
        if (std::find(t.frameworks.begin(), t.frameworks.end(), "megatron") != t.frameworks.end()) {
            EXPECT_NEAR(t.metrics.stepSeconds, megatron.top.front().metrics.stepSeconds, 1e-12);
            break;
        }
}

TEST(SearchBatchRange, EachPlanTakesTheLargestBatchItDividesAndRanksPerSample) {
    const auto [model, cluster] = Small{};
    SearchSpace s = smallSpace(16, 60);
    s.maxGlobalBatch = 70;
    const SearchResult r = searchPlans(model, cluster, s, quiet(8));
    ASSERT_FALSE(r.top.empty());
    for (const auto& t : r.top) {
        const int b = t.plan.globalBatch;
        EXPECT_GE(b, 60);
        EXPECT_LE(b, 70);
        // The largest batch of the range dp x micro-batch (x pp for interleaved) divides.
        const int step = t.plan.dp * t.plan.microBatch * (t.plan.schedule == Schedule::Interleaved1F1B ? t.plan.pp : 1);
        EXPECT_EQ(b % step, 0);
        EXPECT_GT(b + step, 70);
    }
    for (size_t i = 1; i < r.top.size(); ++i)
        EXPECT_GE(r.top[i - 1].metrics.tokensPerSecond, r.top[i].metrics.tokensPerSecond * (1.0 - 1e-12));
    // A range of one batch is the fixed-batch search.
    SearchSpace fixed = s;
    fixed.globalBatch = 64;
    fixed.maxGlobalBatch = 0;
    SearchSpace single = fixed;
    single.maxGlobalBatch = 64;
    const SearchResult a = searchPlans(model, cluster, fixed, quiet(3));
    const SearchResult b = searchPlans(model, cluster, single, quiet(3));
    ASSERT_EQ(a.top.size(), b.top.size());
    for (size_t i = 0; i < a.top.size(); ++i) EXPECT_EQ(planToJson(a.top[i].plan), planToJson(b.top[i].plan));
}

TEST(SearchIdle, UpToNGpusMatchesTheBestOfSeparateSearches) {
    // 24 GPUs (3 nodes) and global batch 16: 24 has no dp dividing 16 with a valid split for 1.3B beyond a few;
    // the merged ranking's #1 must be the best of the per-count searches (two implementations that must agree).
    const auto [model, cluster] = Small{};
    SearchSpace s = smallSpace(24, 16);
    s.allowIdle = true;
    const SearchResult merged = searchPlansUpTo(model, cluster, s, quiet(3));
    ASSERT_FALSE(merged.top.empty());
    double best = 0.0;
    for (int g : {24, 16, 8, 4, 2, 1}) {
        SearchSpace one = s;
        one.gpus = g;
        one.allowIdle = false;
        const SearchResult r = searchPlans(model, cluster, one, quiet(1));
        if (!r.top.empty()) best = std::max(best, r.top.front().metrics.tokensPerSecond);
    }
    EXPECT_NEAR(merged.top.front().metrics.tokensPerSecond, best, 1e-9 * best);
    for (const auto& t : merged.top) {
        EXPECT_LE(t.plan.worldSize(), 24);
        EXPECT_EQ(t.idleGpus, 24 - t.plan.worldSize());
        EXPECT_NEAR(t.pricePerUsedGpuHour, cluster.pricePerGpuHour * 24.0 / t.plan.worldSize(), 1e-9);
    }
    // The throughput bound stopped before the smallest counts (so the comparison above checks that it is admissible).
    EXPECT_GE(merged.gpuCountsSearched, 1);
    EXPECT_LT(merged.gpuCountsSearched, 6);
}

TEST(SearchIdle, CountsOnlyAFoldedMoePlanRunsAreSearched) {
    // Qwen3 30B-A3B cut to 3 layers, sequence 4098 (2 x odd: no cp > 1) and experts 765 wide (odd: no tp > 1 splits
    // them) on up to 8 H100 at batch 4. On 8 GPUs tp 1 leaves dp 8 for 4 sequences, so only tp 2 runs there, and
    // only as a folded plan (the experts over etp 1). The count must be searched: the merged ranking's best is the
    // best of the per-count searches (two implementations that must agree), and it is an 8-GPU folded plan.
    ModelConfig model = test::preset("qwen3-30b-a3b");
    ASSERT_TRUE(model.moe.has_value());
    model.layers = 3;
    model.seqLen = 4098;
    model.moe->expertFfnHidden = 765;
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    SearchSpace s;
    s.gpus = 8;
    s.globalBatch = 4;
    s.maxVpp = 1;
    s.allowIdle = true;
    const SearchResult merged = searchPlansUpTo(model, cluster, s, quiet(3));
    ASSERT_FALSE(merged.top.empty());
    double best = 0.0;
    for (int g : {8, 4, 2, 1}) {
        SearchSpace one = s;
        one.gpus = g;
        one.allowIdle = false;
        const SearchResult r = searchPlans(model, cluster, one, quiet(1));
        if (g == 8) {
            ASSERT_FALSE(r.top.empty());
            EXPECT_EQ(r.top.front().plan.tp, 2);
            EXPECT_TRUE(r.top.front().plan.expertFolded());
        }
        if (!r.top.empty()) best = std::max(best, r.top.front().metrics.tokensPerSecond);
    }
    EXPECT_NEAR(merged.top.front().metrics.tokensPerSecond, best, 1e-9 * best);
    EXPECT_EQ(merged.top.front().plan.worldSize(), 8);
}

} // namespace
} // namespace tessel::sim
