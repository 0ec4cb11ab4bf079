// Calibration from step times alone (step_calibration.hpp): the fitted compute scale against runs whose steps were
// made with a known one, the median rule, held-out errors, and the cases that must be refused or said.
#include "../cost_models/test_support.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/sim/step_calibration.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::sim {
namespace {

// Llama 3 8B on one DGX H100 node (8 GPUs) under plan (tp, pp, dp), micro-batch 1, global batch 16.
StepRun llamaRun(int tp, int pp, int dp, const std::string& name) {
    Scenario s = defaultScenario();
    s.model = loadModelRef("llama3-8b", "model");
    s.model.seqLen = 4096;
    s.cluster = test::clusterPreset("dgx-h100-80g");
    s.cluster.nodes = 1;
    s.plan.tp = tp;
    s.plan.pp = pp;
    s.plan.dp = dp;
    s.plan.vpp = 1;
    s.plan.schedule = Schedule::OneFOneB;
    s.plan.microBatch = 1;
    s.plan.globalBatch = 16;
    s.plan.sequenceParallel = tp > 1;
    finishScenario(s);
    StepRun r;
    r.source = name;
    r.model = s.model;
    r.plan = s.plan;
    r.nodes = s.cluster.nodes;
    r.gpusPerNode = s.cluster.gpusPerNode;
    return r;
}

// Runs whose measured step is what the cluster predicts with its compute phases `scale` times longer.
std::vector<StepRun> runsMeasuredAt(const ClusterConfig& cluster, std::vector<StepRun> runs, const std::vector<double>& scales) {
    for (size_t i = 0; i < runs.size(); ++i)
        runs[i].measuredStepSeconds = predictedStepSeconds(withComputeScale(cluster, scales[i]), runs[i]);
    return runs;
}

std::vector<StepRun> threePlans() {
    return {llamaRun(1, 1, 8, "dp8"), llamaRun(2, 1, 4, "tp2 dp4"), llamaRun(4, 2, 1, "tp4 pp2")};
}

TEST(StepCalibration, RecoversTheScaleItsRunsWereMadeWith) {
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    const auto runs = runsMeasuredAt(cluster, threePlans(), {1.37, 1.37, 1.37});
    const StepScaleFit fit = fitComputeScaleToSteps(cluster, runs);
    EXPECT_TRUE(fit.reached);
    EXPECT_NEAR(fit.scale, 1.37, 1.37e-4);
    ASSERT_EQ(fit.errorsAfter.size(), 3u);
    ASSERT_EQ(fit.heldOutErrors.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_LT(fit.errorsBefore[i], -0.05) << runs[i].source; // the runs are slower than the cluster as given
        EXPECT_NEAR(fit.errorsAfter[i], 0.0, 1e-4) << runs[i].source;
        EXPECT_NEAR(fit.heldOutErrors[i], 0.0, 1e-4) << runs[i].source; // the others agree on the same scale
    }
}

TEST(StepCalibration, ScalesTheForwardAndBackwardPhasesOnly) {
    ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    cluster.gpu.phaseFits["forward"] = PhaseFit{1e-4, 1.1};
    const ClusterConfig scaled = withComputeScale(cluster, 2.0);
    EXPECT_DOUBLE_EQ(scaled.gpu.phaseFit("forward").timeScale, 2.2);
    EXPECT_DOUBLE_EQ(scaled.gpu.phaseFit("forward").overheadSeconds, 2e-4);
    EXPECT_DOUBLE_EQ(scaled.gpu.phaseFit("backward").timeScale, 2.0);
    EXPECT_DOUBLE_EQ(scaled.gpu.phaseFit("optimizer").timeScale, 1.0);
    EXPECT_DOUBLE_EQ(scaled.gpu.phaseFit("communication").timeScale, 1.0);
}

TEST(StepCalibration, OneRunIsMetExactlyAndHasNoHeldOutError) {
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    StepRun run = llamaRun(2, 1, 4, "tp2 dp4");
    run.measuredStepSeconds = 1.5 * predictedStepSeconds(cluster, run);
    const StepScaleFit fit = fitComputeScaleToSteps(cluster, {run});
    EXPECT_TRUE(fit.reached);
    EXPECT_GT(fit.scale, 1.5); // communication is not scaled, so compute must stretch more than the step
    EXPECT_NEAR(predictedStepSeconds(withComputeScale(cluster, fit.scale), run), run.measuredStepSeconds,
                1e-4 * run.measuredStepSeconds);
    EXPECT_NEAR(fit.errorsBefore[0], 1.0 / 1.5 - 1.0, 1e-9);
    EXPECT_TRUE(fit.heldOutErrors.empty());
}

TEST(StepCalibration, RunsThatDisagreeMeetAtTheMedian) {
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    const auto runs = runsMeasuredAt(cluster, threePlans(), {1.2, 1.4, 1.9});
    const StepScaleFit fit = fitComputeScaleToSteps(cluster, runs);
    EXPECT_TRUE(fit.reached);
    EXPECT_NEAR(fit.scale, 1.4, 1.4e-4); // the middle run's, whatever the other two say
    EXPECT_GT(fit.errorsAfter[0], 0.0);  // made at 1.2: now predicted slow
    EXPECT_NEAR(fit.errorsAfter[1], 0.0, 1e-4);
    EXPECT_LT(fit.errorsAfter[2], 0.0);  // made at 1.9: still fast
    // Held out, the middle run is predicted from the median of 1.2 and 1.9 (two runs: their mean log error zero):
    // between the two, so its error has the sign of neither extreme's distance from it.
    EXPECT_GT(std::abs(fit.heldOutErrors[0]), std::abs(fit.errorsAfter[0]) - 1e-9);
    EXPECT_GT(std::abs(fit.heldOutErrors[2]), std::abs(fit.errorsAfter[2]) - 1e-9);
}

TEST(StepCalibration, PredictedStepGrowsWithTheScale) {
    // The bisection's premise, over a grid of scales and the three plans.
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    for (const StepRun& run : threePlans()) {
        double previous = 0.0;
        for (double s = kMinComputeScale; s <= kMaxComputeScale; s *= 1.5) {
            const double step = predictedStepSeconds(withComputeScale(cluster, s), run);
            EXPECT_GE(step, previous) << run.source << " at scale " << s;
            previous = step;
        }
    }
}

TEST(StepCalibration, AStepNoComputeScaleReachesIsSaidNotFitted) {
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    StepRun run = llamaRun(1, 1, 8, "dp8");
    run.measuredStepSeconds = 1e-6; // far below even the communication's time
    const StepScaleFit fast = fitComputeScaleToSteps(cluster, {run});
    EXPECT_FALSE(fast.reached);
    EXPECT_DOUBLE_EQ(fast.scale, kMinComputeScale);
    run.measuredStepSeconds = 1e6;
    const StepScaleFit slow = fitComputeScaleToSteps(cluster, {run});
    EXPECT_FALSE(slow.reached);
    EXPECT_DOUBLE_EQ(slow.scale, kMaxComputeScale);
}

TEST(StepCalibration, RefusesNoRunsAndStepsThatAreNotPositive) {
    const ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    EXPECT_THROW(fitComputeScaleToSteps(cluster, {}), InputError);
    StepRun run = llamaRun(1, 1, 8, "runs/a");
    for (double bad : {0.0, -1.0, std::nan("")}) {
        run.measuredStepSeconds = bad;
        try {
            fitComputeScaleToSteps(cluster, {run});
            ADD_FAILURE() << "accepted a measured step of " << bad;
        } catch (const InputError& e) {
            ASSERT_EQ(e.problems().size(), 1u);
            EXPECT_EQ(e.problems()[0].where, "runs/a");
        }
    }
}

} // namespace
} // namespace tessel::sim
