// Calibration from step times alone: one time scale on the compute phases, fitted to runs known by their step
// (FORMULAS.md §7.8), with each run's error when the others fit it.
#include "tessel/sim/step_calibration.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace tessel::sim {

ClusterConfig clusterForRun(const ClusterConfig& cluster, const StepRun& run) {
    ClusterConfig c = cluster;
    c.nodes = run.nodes;
    c.gpusPerNode = run.gpusPerNode;
    return c;
}

ClusterConfig withComputeScale(const ClusterConfig& cluster, double scale) {
    ClusterConfig c = cluster;
    for (const char* phase : {"forward", "backward"}) {
        PhaseFit fit = c.gpu.phaseFit(phase);
        fit.overheadSeconds *= scale;
        fit.timeScale *= scale;
        c.gpu.phaseFits[phase] = fit;
    }
    return c;
}

double predictedStepSeconds(const ClusterConfig& cluster, const StepRun& run) {
    return simulatePlan(run.model, clusterForRun(cluster, run), run.plan).metrics.stepSeconds;
}

namespace {
double medianOf(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Solved {
    double scale = 1.0;
    bool reached = true;
};

// The s at which median log(predicted(s) / measured) over `runs` (indices into all) is zero, by bisection on log s:
// the median grows with s, since no compute action gets shorter and none of the step's other parts depends on it.
Solved solve(const ClusterConfig& cluster, const std::vector<StepRun>& all, const std::vector<size_t>& runs) {
    auto medianLogError = [&](double logScale) {
        const ClusterConfig scaled = withComputeScale(cluster, std::exp(logScale));
        std::vector<double> logs;
        for (size_t i : runs) {
            logs.push_back(std::log(predictedStepSeconds(scaled, all[i]) / all[i].measuredStepSeconds));
        }
        return medianOf(logs);
    };
    double lo = std::log(kMinComputeScale), hi = std::log(kMaxComputeScale);
    if (medianLogError(lo) >= 0.0) return {kMinComputeScale, false};
    if (medianLogError(hi) <= 0.0) return {kMaxComputeScale, false};
    // 1e-6 in log s: the scale to 1 ppm, far inside the simulation's own rounding of a step.
    while (hi - lo > 1e-6) {
        const double mid = 0.5 * (lo + hi);
        (medianLogError(mid) < 0.0 ? lo : hi) = mid;
    }
    return {std::exp(0.5 * (lo + hi)), true};
}
} // namespace

StepScaleFit fitComputeScaleToSteps(const ClusterConfig& cluster, const std::vector<StepRun>& runs) {
    if (runs.empty()) throw InputError("runs", "no run with a measured step to fit the compute scale on");
    ProblemList problems;
    for (const StepRun& r : runs)
        if (!(r.measuredStepSeconds > 0.0) || !std::isfinite(r.measuredStepSeconds))
            problems.add(r.source, "the measured step must be a positive number of seconds, got " +
                                       std::to_string(r.measuredStepSeconds));
    problems.throwIfAny();

    StepScaleFit fit;
    std::vector<size_t> every(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) every[i] = i;
    const Solved all = solve(cluster, runs, every);
    fit.scale = all.scale;
    fit.reached = all.reached;
    const ClusterConfig scaled = withComputeScale(cluster, fit.scale);
    for (const StepRun& r : runs) {
        fit.errorsBefore.push_back(predictedStepSeconds(cluster, r) / r.measuredStepSeconds - 1.0);
        fit.errorsAfter.push_back(predictedStepSeconds(scaled, r) / r.measuredStepSeconds - 1.0);
    }
    if (runs.size() >= 2)
        for (size_t i = 0; i < runs.size(); ++i) {
            std::vector<size_t> others;
            for (size_t j = 0; j < runs.size(); ++j)
                if (j != i) others.push_back(j);
            const Solved without = solve(cluster, runs, others);
            fit.heldOutErrors.push_back(predictedStepSeconds(withComputeScale(cluster, without.scale), runs[i]) /
                                            runs[i].measuredStepSeconds - 1.0);
        }
    return fit;
}

} // namespace tessel::sim
