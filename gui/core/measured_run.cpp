// A measured run (trace + memory) matched action by action against the prediction, through tessel::sim's
// comparison library; what is GUI-only here is the measured lane of the timeline.
#include "core/measured_run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::gui {

namespace {
std::optional<sim::ActionKind> computeKindOf(const std::string& name) {
    if (name == "forward") return sim::ActionKind::Forward;
    if (name == "backward") return sim::ActionKind::Backward;
    if (name == "backward_input") return sim::ActionKind::BackwardInput;
    if (name == "backward_weight") return sim::ActionKind::BackwardWeight;
    if (name == "optimizer_step") return sim::ActionKind::OptimizerStep;
    return std::nullopt;
}

// The timeline shows one step, the last one measured, of the lowest rank of each stage, from that step's
// start.
std::vector<TimelineItem> measuredLane(const MeasuredRun& run, const std::vector<sim::EventMatch>& matches) {
    const std::vector<int> steps = run.comparedSteps();
    const auto& events = run.events();
    std::vector<TimelineItem> lane;
    if (steps.empty()) return lane;
    const int laneStep = steps.back();
    std::map<int, int> representative;   // stage -> lowest rank seen
    double laneStart = std::numeric_limits<double>::infinity();
    for (const auto& e : events) {
        auto [it, inserted] = representative.emplace(e.stage, e.rank);
        if (!inserted) it->second = std::min(it->second, e.rank);
        if (e.step == laneStep) laneStart = std::min(laneStart, e.startSeconds);
    }
    for (size_t i = 0; i < events.size(); ++i) {
        const MeasuredEvent& e = events[i];
        if (!matches[i].matched() || e.step != laneStep || representative[e.stage] != e.rank) continue;
        const auto kind = computeKindOf(e.name);
        if (!kind) continue;
        TimelineItem it;
        it.stage = e.stage;
        it.index = matches[i].index;
        it.kind = *kind;
        it.microBatch = e.microBatch;
        it.chunk = e.chunk;
        it.lane = TimelineLane::Measured;
        it.startSeconds = e.startSeconds - laneStart;
        it.endSeconds = it.startSeconds + e.durationSeconds;
        lane.push_back(it);
    }
    return lane;
}
} // namespace

MeasuredRun MeasuredRun::load(const QString& tracePath, const QString& memoryPath) {
    return MeasuredRun(sim::MeasuredRun::loadFiles(tracePath.toStdString(), memoryPath.toStdString()));
}

double MeasuredComparison::meanAbsoluteError() const {
    double sum = 0.0;
    int n = 0;
    for (const auto& a : actions)
        if (a.predictedSeconds > 0.0) sum += std::fabs(a.error()), ++n;
    return n ? sum / n : 0.0;
}

MeasuredComparison compareWithPrediction(const MeasuredRun& run, const sim::PlanSimulation& sim) {
    const sim::Prediction prediction = sim::predictionFromSimulation(sim);
    const sim::RunComparison r = sim::compareRun(prediction, run.run());
    MeasuredComparison c;
    c.predictedStepSeconds = r.predictedStepSeconds;
    c.measuredStepSeconds = r.measuredStepSeconds;
    c.unmatchedMeasured = r.unmatchedMeasuredEvents;
    c.unmatchedPredicted = static_cast<int>(r.unmatchedPredicted.size());
    for (const auto& a : r.actions) c.actions.push_back(ActionComparison{a});
    // One row per predicted stage, against its predicted total (see StageMemoryComparison).
    for (const auto& st : sim.memory.stages) {
        StageMemoryComparison m;
        m.stage = st.stage;
        m.predictedBytes = st.totalBytes();
        if (const auto it = run.stagePeakBytes().find(st.stage); it != run.stagePeakBytes().end()) m.measuredBytes = it->second;
        c.memory.push_back(m);
    }
    c.measuredLane = measuredLane(run, sim::matchEvents(prediction, run.run()));
    return c;
}

} // namespace tessel::gui
