// A measured run laid over the prediction: the executor's Chrome trace (the same action names and args as
// `tessel trace`: ph "X" events with args stage / micro_batch / chunk / index) and, when present, a memory
// JSON with each stage's measured peak. Events are matched to predicted actions by (stage, name,
// micro_batch, chunk) in order of occurrence within a step (args.step; 0 when absent); durations are
// averaged over the ranks of a stage and over the steps measured, leaving out the first step when there are
// several (it pays for allocation and warm-up).
#pragma once

#include "core/timeline_geometry.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/sim/simulate.hpp"

#include <nlohmann/json.hpp>

#include <QString>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::gui {

struct MeasuredEvent {
    int rank = 0;
    int stage = 0;
    std::string name;          // the trace name: "forward", "send_activation", a collective's name
    int microBatch = -1;
    int chunk = 0;
    int step = 0;              // training step of a multi-step run
    double startSeconds = 0.0; // relative to the first event of the run
    double durationSeconds = 0.0;
};

class MeasuredRun {
public:
    // Reads {"traceEvents": [...]} (or a bare event array). Events without args.stage are skipped and
    // counted; a document that is not a trace throws InputError naming the pointer.
    static MeasuredRun fromTrace(const nlohmann::json& trace, const std::string& source = "trace");
    // Accepts the shapes a run may write: {"memory": {"stages": [...]}} (as `tessel predict --json`),
    // {"stages": [...]} with "stage" and one of "peak_bytes", "total_bytes", "measured_bytes", or
    // {"ranks": [{"rank", "stage", "peak_total_bytes" or "peak_bytes"}]} as the executor writes it (the
    // maximum over a stage's ranks is kept).
    void setMemory(const nlohmann::json& memory, const std::string& source = "memory");
    // Loads a trace file and, if `memoryPath` is not empty, a memory file. Throws InputError.
    static MeasuredRun load(const QString& tracePath, const QString& memoryPath = {});

    const std::vector<MeasuredEvent>& events() const { return events_; }
    int skippedEvents() const { return skipped_; }
    // The steps compared with the prediction: every step, less the first when there are several.
    std::vector<int> comparedSteps() const;
    // The measured step: otherData.step_seconds when the trace says, else the mean over comparedSteps() of
    // each step's span (first start to last end over all ranks).
    double stepSeconds() const { return stepSeconds_; }
    // Measured peak bytes per stage (index = stage), empty without a memory file.
    const std::map<int, double>& stagePeakBytes() const { return peakBytes_; }
    QString source() const { return source_; }
    // The plan the run executed when the trace says (otherData.plan, as `tessel trace` writes it).
    const std::optional<nlohmann::json>& planJson() const { return planJson_; }

private:
    std::vector<MeasuredEvent> events_;
    std::map<int, double> peakBytes_;
    std::optional<nlohmann::json> planJson_;
    double stepSeconds_ = 0.0;
    int skipped_ = 0;
    QString source_;
};

struct ActionComparison {
    int stage = 0;
    int index = 0;              // predicted action index in schedule.stages[stage].actions
    std::string name;
    int microBatch = -1;
    int chunk = 0;
    double predictedSeconds = 0.0;
    double measuredSeconds = 0.0;   // mean over the stage's ranks that ran it
    int ranks = 0;                  // how many ranks measured it
    double error() const { return predictedSeconds > 0.0 ? measuredSeconds / predictedSeconds - 1.0 : 0.0; }
};

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
