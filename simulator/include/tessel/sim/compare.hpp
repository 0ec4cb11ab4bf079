// Predicted vs measured: loads a measured run (the executor's trace.json, memory.json and scenario.json) and a
// prediction (a simulated plan, or a `tessel trace` file plus `tessel predict --json` memory), matches every
// measured action to its predicted action, and compares durations per action, rank, step and category, and
// peak memory per stage and category. Shared by `tessel compare` and the GUI's measured-run view.
#pragma once

#include "tessel/cost/errors.hpp"
#include "tessel/sim/simulate.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {

// The time categories of a rank: "compute" (forward, backward, backward_input, backward_weight),
// "optimizer", "pp_send", "pp_recv" and "collective" (data-parallel, ZeRO and embedding collectives).
// `kind` is a trace event's "cat" (ActionKind's name) or, when absent, its name.
std::string timeCategoryOf(const std::string& kind);

// The memory categories compared. The executor's backend counts weights, grads, optimizer, activations and
// buffers; the cost model's "other" splits into ZeRO-3 gather buffers, communication buffers, logits/loss and
// the reserved bytes. Like for like (as tests/executor/memory_prediction_test.cpp checks it): the executor
// keeps the logits among its activations, its buffers are the model's gather + communication buffers, and
// the reserved bytes (CUDA context, allocator slack) are never allocated through a backend, so they are
// reported beside the comparison, not in it.
const std::vector<std::string>& memoryCategories();   // weights, grads, optimizer, activations, other

// ---------------------------------------------------------------------------------------------------------
// The measured side.

struct MeasuredEvent {
    int rank = 0;
    int stage = 0;
    std::string name;           // the trace name: "forward", "send_activation", a collective's name
    std::string category;       // timeCategoryOf(cat)
    int microBatch = -1;
    int chunk = 0;
    int step = 0;               // training step of a multi-step run (args.step; 0 when absent)
    double startSeconds = 0.0;  // relative to the first event of the run
    double durationSeconds = 0.0;
};

// Peak memory of one rank (from the executor's memory.json) or of one stage (files that list stages).
struct MeasuredMemory {
    int rank = -1;              // -1 when the file gives a stage rather than a rank
    int stage = 0;
    double peakBytes = 0.0;     // the peak of the total, not the sum of the per-category peaks
    // Keys from memoryCategories(), where the file says: at the total's peak (at_peak_total_bytes) when the
    // run recorded it (categoriesAtTotalPeak), else each category's own peak.
    std::map<std::string, double> categoryPeakBytes;
    bool categoriesAtTotalPeak = false;
    // The process's peak resident set (process_peak_resident_bytes), where the run recorded it: everything
    // the rank held, runtime and allocator slack included, so it is set against the predicted total.
    std::optional<double> processPeakBytes;
};

class MeasuredRun {
public:
    // Reads {"traceEvents": [...]} (or a bare event array). Events without args.stage are skipped and
    // counted; a document that is not a trace throws InputError naming `source#/traceEvents`.
    static MeasuredRun fromTrace(const nlohmann::json& trace, const std::string& source = "trace");
    // Accepts the shapes a run may write: {"ranks": [{"rank", "stage", "peak_total_bytes", "peak_bytes":
    // {"weights_bytes", ...}, "at_peak_total_bytes": {...}}]} as the executor writes it; {"stages": [...]} or {"memory": {"stages": [...]}}
    // with "stage" and one of "peak_bytes", "measured_bytes", "total_bytes" (and per-category "*_bytes").
    // Throws InputError listing every entry it cannot read.
    void setMemory(const nlohmann::json& memory, const std::string& source = "memory");
    // The scenario the run executed (the run folder's scenario.json): its "plan" and "model" objects.
    void setScenario(const nlohmann::json& scenario, const std::string& source = "scenario");
    // Loads a trace file and, when `memoryPath` is not empty, a memory file. Throws InputError.
    static MeasuredRun loadFiles(const std::filesystem::path& tracePath, const std::filesystem::path& memoryPath = {});
    // A run folder (trace.json; memory.json and scenario.json when present) or a trace file (with memory.json
    // and scenario.json read from beside it when present). Throws InputError naming the path.
    static MeasuredRun load(const std::filesystem::path& runOrTrace);

    const std::vector<MeasuredEvent>& events() const { return events_; }   // per rank, in time order
    int skippedEvents() const { return skipped_; }
    std::vector<int> steps() const;                 // every step measured, ascending
    // The steps compared with the prediction: every step, less the first when there are several (it pays for
    // allocation and warm-up).
    std::vector<int> comparedSteps() const;
    // Each step's span: first start to last end over all ranks.
    std::map<int, double> stepSpanSeconds() const;
    // The measured step: otherData.step_seconds when the trace says, else the median over comparedSteps() of
    // the step spans (a median, so one step disturbed by the OS does not move it).
    double stepSeconds() const { return stepSeconds_; }
    const std::vector<MeasuredMemory>& memory() const { return memory_; }
    // Measured peak bytes per stage: the hungriest rank of the stage. Empty without a memory file.
    const std::map<int, double>& stagePeakBytes() const { return stagePeakBytes_; }
    const std::string& source() const { return source_; }
    // The plan the run executed: scenario.json's plan, else otherData.plan of the trace when it has one.
    const std::optional<nlohmann::json>& planJson() const { return planJson_; }
    const std::optional<nlohmann::json>& modelJson() const { return modelJson_; }
    // Where they came from, as JSON pointer prefixes ("RUN/scenario.json#/plan", "RUN/scenario.json#/model").
    const std::string& planSource() const { return planSource_; }
    const std::string& modelSource() const { return modelSource_; }

private:
    std::vector<MeasuredEvent> events_;
    std::vector<MeasuredMemory> memory_;
    std::map<int, double> stagePeakBytes_;
    std::optional<nlohmann::json> planJson_, modelJson_;
    std::string planSource_, modelSource_;
    double stepSeconds_ = 0.0;
    int skipped_ = 0;
    std::string source_;
};

// ---------------------------------------------------------------------------------------------------------
// The predicted side.

struct PredictedAction {
    int stage = 0;
    int index = 0;              // position in the stage's action list
    std::string name;
    std::string category;
    int microBatch = -1;
    int chunk = 0;
    double startSeconds = 0.0;
    double durationSeconds = 0.0;
};

struct PredictedStageMemory {
    int stage = 0;
    // memoryCategories(), mapped as described there, at the model's peak moment: they add up to allocatedBytes(),
    // as a run's at_peak_total_bytes add up to its peak.
    std::map<std::string, double> categoryBytes;
    // The same, each category at its own moment (cost::activationsCategoryPeakBytes, buffersCategoryPeakBytes): what
    // a run's per-category counters peak at, compared with a run that recorded only those.
    std::map<std::string, double> categoryOwnPeakBytes;
    double reservedBytes = 0.0;
    double totalBytes = 0.0;                       // the model's total, reserved bytes included
    double allocatedBytes() const { return totalBytes - reservedBytes; }
};

struct Prediction {
    std::string source;
    std::vector<std::vector<PredictedAction>> stages;   // one action list per pipeline stage
    double stepSeconds = 0.0;
    std::vector<PredictedStageMemory> memory;            // empty when the prediction has no memory
    std::optional<nlohmann::json> planJson, modelJson;
    size_t actionCount() const;
};

Prediction predictionFromSimulation(const PlanSimulation& sim, const std::string& source = "simulation");
// A `tessel trace` file: per stage, the events of its lowest rank in args.index order. Throws InputError.
Prediction predictionFromTrace(const nlohmann::json& trace, const std::string& source = "trace");
// Predicted memory from `tessel predict --json` output ({"memory": {"stages": [...]}} or {"stages": [...]}).
void setPredictedMemory(Prediction& prediction, const nlohmann::json& predictJson, const std::string& source = "memory");

// ---------------------------------------------------------------------------------------------------------
// Matching and comparison.

// What one measured event matched: the predicted action (stage, index), or stage = index = -1.
struct EventMatch {
    int stage = -1;
    int index = -1;
    bool compared = false;   // the event's step is one of comparedSteps(); events of other steps never match
    bool matched() const { return index >= 0; }
};
// Parallel to run.events(). Events are matched by (stage, name, micro_batch, chunk) and the order of
// occurrence of that key within one rank and one step, to the predicted action of the same key and
// occurrence in the stage's list: the executor walks the same list, so the k-th "forward mb 3 chunk 0" of a
// rank's step is the k-th of its stage's predicted list.
std::vector<EventMatch> matchEvents(const Prediction& prediction, const MeasuredRun& run);

struct ActionComparison {
    int stage = 0;
    int index = 0;
    std::string name;
    std::string category;
    int microBatch = -1;
    int chunk = 0;
    double predictedSeconds = 0.0;
    // Each measuring rank's mean over the compared steps; then the mean, min and max over those ranks.
    double measuredMeanSeconds = 0.0;
    double measuredMinSeconds = 0.0;
    double measuredMaxSeconds = 0.0;
    int ranks = 0;                 // ranks that measured it
    int samples = 0;               // ranks x compared steps
    double errorSeconds() const { return measuredMeanSeconds - predictedSeconds; }
    // measured / predicted - 1; none when nothing was predicted.
    std::optional<double> error() const;
};

struct UnmatchedMeasured {
    int stage = 0;
    std::string name;
    int microBatch = -1;
    int chunk = 0;
    int events = 0;                // occurrences over ranks and compared steps
    double totalSeconds = 0.0;
};

struct RankComparison {
    int rank = 0;
    int stage = 0;
    double predictedStepSeconds = 0.0;
    double measuredStepSeconds = 0.0;   // median over compared steps of the rank's own span
    // Busy seconds per step by category: the stage's predicted list, and the rank's events (mean per step).
    std::map<std::string, double> predictedBusySeconds, measuredBusySeconds;
};

struct StepComparison {
    int step = 0;
    double measuredSeconds = 0.0;
    bool compared = false;         // false for the warm-up step
};

// Busy time of one category on one stage, over matched actions only (so both sides count the same actions).
struct CategoryComparison {
    int stage = 0;
    std::string category;
    double predictedSeconds = 0.0;
    double measuredSeconds = 0.0;
    int actions = 0;
};

struct CategoryMemoryComparison {
    std::string category;
    double predictedBytes = 0.0;
    std::optional<double> measuredBytes;
    std::optional<double> error() const;
};

struct StageMemoryComparison {
    int stage = 0;
    double predictedTotalBytes = 0.0;     // the model's total, reserved included
    double predictedReservedBytes = 0.0;
    std::optional<double> measuredPeakBytes;
    std::optional<double> measuredProcessPeakBytes;     // the hungriest rank's peak resident set
    std::vector<CategoryMemoryComparison> categories;   // memoryCategories() order; empty without a prediction
    // Which pairing the categories are: what each held when the total peaked, on both sides (the run recorded
    // at_peak_total_bytes), or each category's own peak on both sides.
    bool categoriesAtTotalPeak = false;
    double predictedAllocatedBytes() const { return predictedTotalBytes - predictedReservedBytes; }
    // measured peak / predicted allocated bytes - 1 (the reserved bytes are not measured, see memoryCategories).
    std::optional<double> error() const;
    // measured process peak / predicted total - 1: the reserved bytes' share shows here.
    std::optional<double> processError() const;
};

struct RunComparison {
    std::string predictedSource, measuredSource;
    std::vector<ActionComparison> actions;               // matched, in (stage, index) order
    std::vector<PredictedAction> unmatchedPredicted;     // predicted actions no compared step measured
    std::vector<UnmatchedMeasured> unmatchedMeasured;    // measured keys with no predicted action
    int unmatchedMeasuredEvents = 0;
    std::vector<RankComparison> ranks;
    std::vector<StepComparison> steps;
    std::vector<CategoryComparison> categories;          // per stage and category
    std::vector<StageMemoryComparison> memory;           // per predicted (or measured) stage
    double predictedStepSeconds = 0.0;
    double measuredStepSeconds = 0.0;
    std::vector<int> comparedSteps;
    std::optional<double> stepError() const;
    double meanAbsoluteError() const;   // over matched actions with a predicted duration
    // Indices into `actions`, most wrong first, at most n.
    std::vector<size_t> mostWrong(size_t n) const;
};

RunComparison compareRun(const Prediction& prediction, const MeasuredRun& run);
// Everything above as one JSON object (`tessel compare --json`); `top` bounds "most_wrong".
nlohmann::json comparisonToJson(const RunComparison& c, size_t top);

// The fields in which two JSON documents (a plan, a model) differ, one Problem per leaf, where =
// `measuredWhere` + the field's pointer; empty when they agree.
std::vector<Problem> jsonDifferences(const nlohmann::json& predicted, const nlohmann::json& measured,
                                     const std::string& measuredWhere, const std::string& predictedName);

} // namespace tessel::sim
