// A measured run laid over the prediction in the GUI: a thin Qt-facing wrapper of tessel::sim::MeasuredRun
// (loading, and matching events to predicted actions, live there and are shared with `tessel compare`), plus
// the measured lane of the timeline. Durations are averaged over the ranks of a stage and over the steps
// measured, leaving out the first step when there are several (it pays for allocation and warm-up).
#pragma once

#include "core/timeline_geometry.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/sim/compare.hpp"
#include "tessel/sim/simulate.hpp"

#include <nlohmann/json.hpp>

#include <QString>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::gui {

using MeasuredEvent = sim::MeasuredEvent;

class MeasuredRun {
public:
    MeasuredRun() = default;
    explicit MeasuredRun(sim::MeasuredRun run) : run_(std::move(run)) {}
    // See sim::MeasuredRun::fromTrace and setMemory. Throw InputError naming the pointer.
    static MeasuredRun fromTrace(const nlohmann::json& trace, const std::string& source = "trace") {
        return MeasuredRun(sim::MeasuredRun::fromTrace(trace, source));
    }
    void setMemory(const nlohmann::json& memory, const std::string& source = "memory") { run_.setMemory(memory, source); }
    // Loads a trace file and, if `memoryPath` is not empty, a memory file. Throws InputError.
    static MeasuredRun load(const QString& tracePath, const QString& memoryPath = {});

    const std::vector<MeasuredEvent>& events() const { return run_.events(); }
    int skippedEvents() const { return run_.skippedEvents(); }
    std::vector<int> comparedSteps() const { return run_.comparedSteps(); }
    double stepSeconds() const { return run_.stepSeconds(); }
    // Measured peak bytes per stage (index = stage), empty without a memory file.
    const std::map<int, double>& stagePeakBytes() const { return run_.stagePeakBytes(); }
    QString source() const { return QString::fromStdString(run_.source()); }
    // The plan the run executed when the trace says (otherData.plan, as `tessel trace` writes it).
    const std::optional<nlohmann::json>& planJson() const { return run_.planJson(); }
    const sim::MeasuredRun& run() const { return run_; }

private:
    sim::MeasuredRun run_;
};

// One matched action (sim::ActionComparison: predicted, measured mean/min/max over ranks); the GUI reads an
// action with nothing predicted as 0% off rather than as no error.
struct ActionComparison : sim::ActionComparison {
    double error() const { return sim::ActionComparison::error().value_or(0.0); }
};

// The memory chart draws each stage's measured peak against its predicted total (reserved bytes included),
// so the GUI's memory error is relative to that total; `tessel compare` also reports it against the
// allocated bytes, which is what the executor's own counters measure (sim::StageMemoryComparison).
struct StageMemoryComparison {
    int stage = 0;
    double predictedBytes = 0.0;
    std::optional<double> measuredBytes;
    std::optional<double> error() const {
        if (!measuredBytes || predictedBytes <= 0.0) return std::nullopt;
        return *measuredBytes / predictedBytes - 1.0;
    }
};

struct MeasuredComparison {
    std::vector<ActionComparison> actions;
    std::vector<StageMemoryComparison> memory;
    int unmatchedMeasured = 0;      // measured events with no predicted action of the same key
    int unmatchedPredicted = 0;     // predicted actions nobody measured
    double predictedStepSeconds = 0.0;
    double measuredStepSeconds = 0.0;
    double stepError() const { return predictedStepSeconds > 0.0 ? measuredStepSeconds / predictedStepSeconds - 1.0 : 0.0; }
    double meanAbsoluteError() const;   // over matched actions with a predicted duration > 0
    // Measured compute actions of one representative rank per stage, for the timeline's measured lane.
    std::vector<TimelineItem> measuredLane;
};

MeasuredComparison compareWithPrediction(const MeasuredRun& run, const sim::PlanSimulation& sim);

} // namespace tessel::gui
