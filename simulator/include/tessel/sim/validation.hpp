// Published training runs (the runs.json schema of data/validation/) read as tessel scenarios, predicted, and
// compared with what was measured: per record, per group and overall, and out of sample (leave one group out).
#pragma once

#include "tessel/cost/scenario.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {

// What a record says was measured. Step time is the figure predicted; where a source published only a
// throughput, the step time it implies (global batch tokens / tokens per second, or the source's own FLOP
// formula / TFLOP/s) is used and `stepSource` names the field. (Not compare.hpp's MeasuredRun, a run's trace: one
// name for two types in one namespace is an ODR violation once both are linked.)
struct RecordMeasurement {
    std::optional<double> stepSeconds;
    std::string stepSource;              // JSON pointer of the field the step time came from
    std::optional<double> memoryBytes;   // peak memory per GPU the source reports (measured.memory_gb)
    std::string memorySource;
    // What the figure counts: true for the allocator's tensors (torch.cuda.max_memory_allocated, Megatron-LM's
    // "max allocated"), which leave out the CUDA context and the allocator's cached slack; false for reserved
    // memory or nvidia-smi, which include them.
    bool memoryIsAllocated = false;
    // The caching allocator's reserved peak (torch.cuda.max_memory_reserved, torchtitan's "memory"): the allocated
    // peak and the cache, without what is allocated outside PyTorch (NCCL's buffers). False with memoryIsAllocated
    // false: the device's figure (nvidia-smi, or a kind not stated), which holds everything.
    bool memoryIsAllocatorReserved = false;
    // The pipeline stage whose rank the figure was read on (measured.memory_stage / memory_rank); unset: the
    // source gives the largest over the ranks, compared with the stage tessel puts highest.
    std::optional<int> memoryStage;
    std::optional<bool> outOfMemory;     // the source says the plan ran out of memory (true) or fit (false)
    // Fields of `measured` that hold a figure under a name tessel does not read ("measured/<key>"), so a record
    // whose only figure is under such a name is refused naming it, not with "states no step time" alone.
    std::vector<std::string> unreadFields;
    // Figures under a name tessel reads that are not one: not a positive number, or a step or peak no run of this plan
    // on this GPU can have ("measured/<key>: <why>"), each said and not compared, and named where nothing else is.
    std::vector<std::string> invalidFields;
};

// One record made into a scenario. Every value that was not read from the record (a framework default, a
// field the source left null, a GPU the source only names by family) is listed in `assumptions`, so a reader
// sees what the prediction rests on.
struct ValidationCase {
    std::string id;
    std::string group;
    std::string kind;
    std::string source;
    std::string pointer;                 // of the record in its file, e.g. "runs.json#/12"
    Scenario scenario;
    RecordMeasurement measured;
    std::vector<std::string> assumptions;
    std::optional<double> publishedParameters; // model.params, compared with tessel's count
};

// A record that could not be made into a case keeps its id and group and the reason, so nothing is dropped.
struct LoadedRecord {
    std::string id;
    std::string group;
    std::string pointer;
    std::optional<ValidationCase> validationCase;
    std::string refusal;                 // why not, when validationCase is empty
};

// Reads an array of records (or an object with a "runs" array). `source` names the file in pointers.
// Throws InputError only when the document is not an array of objects; a record that cannot be read is
// returned with its reason.
std::vector<LoadedRecord> loadValidationRecords(const nlohmann::json& doc, const std::string& source);
std::vector<LoadedRecord> loadValidationFile(const std::string& path);
// The shipped copy of the published runs (data/validation/runs.json), found next to the scenarios.
std::string defaultValidationFile();

// Terms of the step a record's prediction is made of, for naming the one that dominates.
struct StepTerms {
    double computeSeconds = 0.0, tpSeconds = 0.0, cpSeconds = 0.0, epSeconds = 0.0, ppSeconds = 0.0,
           dpSeconds = 0.0, optimizerSeconds = 0.0, bubbleSeconds = 0.0;
    std::string dominant() const;        // "compute", "tp", ... the largest term
};

struct CaseResult {
    std::string id;
    std::string group;
    std::string pointer;
    bool predicted = false;
    std::string reason;                  // why there is no prediction (refused record, OOM verdict, ...)
    std::optional<double> measuredStepSeconds;
    double predictedStepSeconds = 0.0;
    std::optional<double> stepError;     // (predicted - measured) / measured
    std::optional<double> measuredMemoryBytes;
    double predictedPeakMemoryBytes = 0.0;
    std::optional<double> memoryError;
    std::optional<bool> measuredOutOfMemory;
    bool predictedFits = true;
    double predictedMfu = 0.0;
    StepTerms terms;                     // of the bottleneck stage
    std::vector<std::string> assumptions;
    std::string plan;                    // the plan as a short string
};

struct ErrorSummary {
    std::string group;                   // "" for all records
    int records = 0;
    int predicted = 0;                   // with a step-time prediction and a measurement
    double medianAbsError = 0.0;
    double maxAbsError = 0.0;
    double meanSignedError = 0.0;
    std::string worst;                   // id of the record with the largest |error|
    int memoryCompared = 0;
    double memoryMedianAbsError = 0.0;
    int oomCompared = 0;
    int oomAgreed = 0;
};

struct ValidationReport {
    std::vector<CaseResult> results;
    std::vector<ErrorSummary> groups;    // in order of first appearance
    ErrorSummary overall;
};

// Predicts every record with the cluster and plan it resolves to.
ValidationReport validateRecords(const std::vector<LoadedRecord>& records);
// Summaries of a set of results (groups in order of first appearance, and overall).
void summarize(ValidationReport& report);
// The median of a set of values (0 for none).
double medianOf(std::vector<double> values);

// The one constant of the cost model fitted to published runs (FORMULAS.md §3.3): the share of the
// benchmarked tensor-core throughput a training step sustains, one value for every GPU whose share was not measured
// (a cluster with gpu.sustained_share_by_duty takes its curve instead, and its records are left out of the fit),
// chosen so that the median of log(predicted / measured) step time over the records is zero. `tessel validate --fit` prints it;
// the shipped cluster files carry it (gpu.sustained_tensor_fraction).
struct SustainedFit {
    double fraction = 1.0;
    double medianLogError = 0.0;   // at `fraction` (0 unless the share hit a bound)
    int records = 0;               // records with a step time the fit used
    int passes = 0;
};
SustainedFit fitSustainedTensorFraction(const std::vector<LoadedRecord>& records);

// Leave one group out: for each group, the constants the model fits to published runs are fitted on the
// other groups only and the left-out group is predicted with them. The report holds the out-of-sample
// result of every record. `fittedConstants` says, per group, what was refitted and to which value.
struct LeaveOneGroupOut {
    ValidationReport report;
    std::vector<std::string> fittedConstants;
};
LeaveOneGroupOut leaveOneGroupOut(const std::vector<LoadedRecord>& records);

nlohmann::json toJson(const ValidationReport& report);

} // namespace tessel::sim
