// Calibration from step times alone (FORMULAS.md §7.8): runs whose logs give a step but no per-action durations
// (a Megatron-LM log through `tessel import megatron`) fit one time scale on the compute phases of a cluster.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <string>
#include <vector>

namespace tessel::sim {

// One run known by its measured step: what it trained (model, plan), on how many nodes and GPUs of the
// calibrated cluster (its scenario's), and where it came from (for reports).
struct StepRun {
    std::string source;
    ModelConfig model;
    Plan plan;
    int nodes = 1;
    int gpusPerNode = 1;
    double measuredStepSeconds = 0.0;
};

// The cluster a run is predicted on: `cluster` (the one being calibrated) with the run's nodes and GPUs per node.
ClusterConfig clusterForRun(const ClusterConfig& cluster, const StepRun& run);

// `cluster` with its forward and backward phase fits multiplied by `scale` (overhead and time scale alike, so a
// fit from action-level runs keeps its shape): every compute action of those phases takes `scale` times longer.
ClusterConfig withComputeScale(const ClusterConfig& cluster, double scale);

// The predicted step of `run` on `cluster` (simulatePlan's, as `tessel predict` and `tessel compare` print it).
double predictedStepSeconds(const ClusterConfig& cluster, const StepRun& run);

struct StepScaleFit {
    // The scale s of withComputeScale at which the median over the runs of log(predicted / measured) is zero.
    double scale = 1.0;
    // False when no s in [minScale, maxScale] reaches it: the runs' steps are not a matter of compute time (the
    // plan, the communication or the run's own stalls are off). `scale` is then the bound nearer to it.
    bool reached = true;
    std::vector<double> errorsBefore;   // per run, predicted / measured - 1 on the cluster as given
    std::vector<double> errorsAfter;    // per run, at `scale`
    // Per run, its error when s is fitted on the other runs alone: what the scale says of a plan it has not
    // seen. Empty with a single run.
    std::vector<double> heldOutErrors;
};

inline constexpr double kMinComputeScale = 0.1;
inline constexpr double kMaxComputeScale = 10.0;

// Fits the scale by bisection on log s (the median log error grows with s: longer compute never shortens a step).
// Throws InputError("runs") without runs or with a run whose measured step is not positive.
StepScaleFit fitComputeScaleToSteps(const ClusterConfig& cluster, const std::vector<StepRun>& runs);

} // namespace tessel::sim
