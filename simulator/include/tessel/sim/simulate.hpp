// Event simulation of a schedule on per-rank compute and communication streams, and the step metrics
// (step time, bubble, exposed communication per group, MFU/HFU, tokens per second) read off the timeline.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/sim/schedule.hpp"

#include <array>
#include <vector>

namespace tessel::sim {

// Predicted cost of one action. For compute actions, `seconds` = computeSeconds + the blocking TP/CP/EP
// collectives inside its layers (tpSeconds, cpSeconds, epSeconds).
struct ActionCost {
    double seconds = 0.0;
    double computeSeconds = 0.0;
    double tpSeconds = 0.0;
    double cpSeconds = 0.0;
    double epSeconds = 0.0;
    // Waiting for the slowest rank of a synchronising group (FORMULAS.md §6): σ e(n) W, with W the work since
    // the group's last synchronisation (collectives) or the action's own work (TP/CP/EP inside it). Pipeline
    // sends and receives carry W (the stage's compute since its last transfer) with syncGroupSize 1: their
    // wait depends on both sides' times and is added by `simulate` (CostTable::syncJitterFraction).
    double waitSeconds = 0.0;
    // Compute lost to communication that ran concurrently on the rank's other streams (GpuSpec::commContention),
    // by what caused it: data-parallel collectives, pipeline transfers. Part of `seconds`.
    double contentionDpSeconds = 0.0;
    double contentionPpSeconds = 0.0;
    // A communication action's contention per second over CostTable::commContention's: 1, or less for a
    // collective that holds fewer SMs than NCCL's channels (GpuSpec::collectiveContention; NCCL user buffers).
    double contentionWeight = 1.0;
    int syncGroupSize = 1;
    double syncWorkSeconds = 0.0;
    double flops = 0.0;       // hardware FLOPs: model-convention FLOPs executed, recompute included
    double modelFlops = 0.0;  // MFU convention (FORMULAS.md §3)
    // seconds = the sum of the parts above.
    void sumParts() {
        seconds = computeSeconds + tpSeconds + cpSeconds + epSeconds + waitSeconds + contentionDpSeconds + contentionPpSeconds;
    }
};

// One cost per action, parallel to Schedule::stages[s].actions.
struct CostTable {
    std::vector<std::vector<ActionCost>> perAction;
    bool serialStreams = false;   // the cluster cannot overlap communication with compute (GpuSpec)
    double commContention = 0.0;    // GpuSpec::commContention
    double commContentionMax = 0.0; // GpuSpec::commContentionMax (0: no ceiling)
    double syncJitterFraction = 0.0; // σ (GpuSpec::syncJitterFraction), for the pipeline receives' waits
};

// Costs every action of `schedule` with the cost model (compute roofline, collectives, p2p).
CostTable costSchedule(const ActionSchedule& schedule, const ModelConfig& model, const ClusterConfig& cluster);

struct TimedAction {
    double startSeconds = 0.0;
    double endSeconds = 0.0;
};

// Where each rank's step goes; the parts sum to the step time.
struct StepBreakdown {
    double computeSeconds = 0.0;     // forward/backward math (recompute included)
    double tpSeconds = 0.0;          // exposed (blocking) TP/SP collectives
    double cpSeconds = 0.0;
    double epSeconds = 0.0;
    double ppSeconds = 0.0;          // compute idle while a pipeline transfer it waits for is in flight
    double dpSeconds = 0.0;          // compute idle while waiting for a DP/ZeRO collective
    double optimizerSeconds = 0.0;
    double bubbleSeconds = 0.0;      // compute idle for any other reason (pipeline fill/drain, imbalance)
    double total() const {
        return computeSeconds + tpSeconds + cpSeconds + epSeconds + ppSeconds + dpSeconds + optimizerSeconds +
               bubbleSeconds;
    }
};

struct Timeline {
    std::vector<std::vector<TimedAction>> perAction;  // parallel to the schedule
    double stepSeconds = 0.0;
    std::vector<StepBreakdown> perStage;
};

// Adds to every compute action the compute it loses to communication that `timeline` shows running concurrently on
// the rank's other streams (commContention x the overlapped seconds of the communication's own time), and returns
// the adjusted table; simulate again to see the effect. `weight` blends the new estimate with the table's previous
// one (1: replace it). Identity when commContention is 0.
CostTable withContention(const ActionSchedule& schedule, const CostTable& costs, const Timeline& timeline,
                         double weight = 1.0);

// Simulates the schedule with the given costs: every action starts when the previous action on its stream
// has finished and its dependencies are met (a send and its receive form one transfer that needs the
// sender's send stream and the receiver's receive stream). Throws RuntimeError naming the stuck actions
// if the dependencies form a cycle (a schedule that would deadlock).
Timeline simulate(const ActionSchedule& schedule, const CostTable& costs);

struct StepMetrics {
    double stepSeconds = 0.0;
    double bubbleFraction = 0.0;            // mean over stages of bubble / step
    std::vector<double> bubbleFractionPerStage;
    StepBreakdown breakdown;                // of the bottleneck stage (most compute)
    int bottleneckStage = 0;
    double modelFlopsPerStep = 0.0;
    double hardwareFlopsPerStep = 0.0;
    double mfu = 0.0;                       // model FLOPs / (step x GPUs x peak)
    double hfu = 0.0;                       // hardware FLOPs / (step x GPUs x peak)
    double tokensPerSecond = 0.0;
};
StepMetrics stepMetrics(const ActionSchedule& schedule, const CostTable& costs, const Timeline& timeline,
                        const ModelConfig& model, const ClusterConfig& cluster);

// Everything for one plan: schedule, costs, timeline, metrics and the memory report.
struct PlanSimulation {
    ActionSchedule schedule;
    CostTable costs;
    Timeline timeline;
    StepMetrics metrics;
    MemoryReport memory;
};
PlanSimulation simulatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);
// The same, but a plan whose step without contention already takes `stopAbove` seconds or more is not simulated
// again with contention (which only lengthens it): its metrics are then that lower step. For the search, which
// only needs to know that such a plan cannot make its top K.
PlanSimulation simulatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, double stopAbove);

} // namespace tessel::sim
