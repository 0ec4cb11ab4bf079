// How far a prediction can be trusted: the error `tessel validate` measured on published runs of the same kind
// (GPU family x framework family, context parallelism apart), kept in data/validation/error_bands.json, and ties
// between close plans.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/sim/validation.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {

// A kind of run: "A100 / Megatron-style", "H100 / sharded data parallel", "A100 / DeepSpeed pipeline", ..., with
// " / context parallel" when cp > 1 (those runs' errors are their own: FORMULAS.md §6, docs/validation.md).
std::string gpuFamily(const std::string& gpuName);           // "A100", "H100", "H200", "B200", "GB200", ..., or "other"
// The family a part without published runs of its own is nearest to, on the same die's rates: Blackwell Ultra's
// B300 and GB300 (the B200's and GB200's dense tensor rates and presets' figures), the MI250 (the MI250X GCD's
// preset scaled); "" for any other.
std::string siblingGpuFamily(const std::string& family);
// "Megatron-style", "sharded data parallel" (FSDP, torchtitan, DeepSpeed ZeRO as pure data parallelism, and a
// framework tessel has no defaults for running ZeRO-3 without tensor or pipeline parallelism: MaxText's FSDP
// under XLA) or "DeepSpeed pipeline" (Megatron-DeepSpeed: DeepSpeed's pipeline engine with Megatron's tensor
// parallelism, pp > 1 or tp > 1, which runs its model through the engine whatever pp is: BLOOM's, MT-NLG's
// and BigScience's runs, whose errors are their own, docs/validation.md).
std::string frameworkFamily(const Plan& plan);
// A run's kind: "H100 / Megatron-style", with " / context parallel" where cp > 1 and " / mixture of experts" for an
// MoE model (`moe`), whose routing, permutation and expert all-to-all are errors of their own: a dense plan is not
// shown them, nor an MoE plan the dense runs' band.
std::string runKind(const ClusterConfig& cluster, const Plan& plan, bool moe);
// The band over every run with context parallelism, whatever its GPU and framework.
inline constexpr const char* kContextParallelKind = "context parallel (every GPU and framework)";
// The band over every mixture-of-experts run, whatever its GPU and framework.
inline constexpr const char* kMoeKind = "mixture of experts (every GPU and framework)";
// The band over every run on one GPU family, whatever its framework: "B200 (every framework)".
std::string gpuFamilyKind(const std::string& family);
// A GPU family's own runs, few as they may be, say more of its plans than other GPUs' many: its band is used from
// this many runs on, where a kind's needs errorBandFor's minRecords.
inline constexpr int kGpuFamilyMinRecords = 3;

struct ErrorBand {
    std::string kind;                 // the kind it was measured on ("all published runs" for the fallback)
    int records = 0;
    double medianAbsError = 0.0;      // the band a plan's step is shown with
    double p90AbsError = 0.0;
    double meanSignedError = 0.0;     // < 0: predictions of this kind run fast
};

// Bands per kind, and over every record, from a validation report of the given records.
struct ErrorBands {
    std::vector<ErrorBand> kinds;
    ErrorBand overall;
    std::string source;               // what they were measured on
    // The same for the peak memory per GPU, over the records that state one (torchtitan's max_memory_reserved,
    // BLOOM's nvidia-smi, ...): per framework family (memoryKind), and over all of them.
    std::vector<ErrorBand> memoryKinds;
    ErrorBand memoryOverall;
};
ErrorBands computeErrorBands(const std::vector<LoadedRecord>& records, const ValidationReport& report,
                             const std::string& source);
nlohmann::json toJson(const ErrorBands& bands);
ErrorBands parseErrorBands(const nlohmann::json& doc, const std::string& pointer);

// The shipped bands (data/validation/error_bands.json next to runs.json), read once; empty when absent.
const ErrorBands& shippedErrorBands();
std::string shippedErrorBandsFile();
// The published runs the shipped bands are measured on: the shared runs.json and tessel's own check sets beside
// it (check_nemo_h100_fp8.json, check_torchtitan_h100.json, check_mpt_llm_foundry.json,
// check_megatron_lm_h100.json, check_megatron_bridge_b200_fp8.json,
// check_megatron_bridge_gb200_fp8.json, check_megatron_bridge_gb300_fp8.json, check_dgxc_h100.json, ... : the list in
// error_band.cpp), those present. `tessel validate --write-bands FILE`
// with these files writes error_bands.json.
std::vector<std::string> errorBandValidationFiles();
// The band of a calibrated cluster (`tessel calibrate` from runs known by their step): the errors of its runs, each
// predicted with the scale the other runs gave (its calibration block's step_runs[].error_held_out), when there are
// kGpuFamilyMinRecords or more. The user's own cluster and framework, held out, say more of its plans than
// published runs of others.
inline constexpr const char* kCalibratedKind = "held-out runs this cluster was calibrated on";
std::optional<ErrorBand> calibratedErrorBand(const ClusterConfig& cluster);
// The band for a plan: a calibrated cluster's own (calibratedErrorBand) when it has one; else its kind's when that
// kind has at least `minRecords` published runs; else, for an MoE model (`moe`), the band of every MoE run
// (kMoeKind) when it has that many; else, for a plan with
// context parallelism, the band of every context-parallel run (kContextParallelKind) when it has that many; else
// its GPU family's (gpuFamilyKind) when that has kGpuFamilyMinRecords, or its sibling family's (siblingGpuFamily)
// when its own has none: a B300 plan is shown the B200 runs' band, not the overall one; else the overall one;
// nothing when no bands are shipped.
std::optional<ErrorBand> errorBandFor(const ClusterConfig& cluster, const Plan& plan, bool moe, int minRecords = 5);

// The runs a band was measured on, for a sentence: "A100 / Megatron-style runs", or for the fallback band
// "runs of every kind (none of this kind)".
std::string bandRunsText(const std::string& kind);
// The same with where the figure comes from: "published A100 / Megatron-style runs" (tessel validate) or, for a
// calibrated cluster's band, "runs this cluster was calibrated on, each held out"; and the command that made it.
std::string bandSourceText(const std::string& kind);
std::string bandCommand(const std::string& kind);

// Whether a plan's step is inside the band of the best plan's: the model cannot tell the two apart.
bool tiedWithin(double stepSeconds, double bestStepSeconds, const ErrorBand& band);

// Peak memory. What a peak's error depends on is the framework's allocations, not the GPU, so its kinds are the
// framework families: "Megatron-style", "sharded data parallel", "DeepSpeed pipeline".
std::string memoryKind(const Plan& plan);
// The memory band for a plan: its framework family's when it has at least `minRecords` published peaks; else
// nothing (a band measured on other frameworks' allocators says little of this one's). The band over every
// published peak (ErrorBands::memoryOverall) is kept for reports.
std::optional<ErrorBand> memoryBandFor(const Plan& plan, int minRecords = 5);
// What predict says where a plan has no memory band: "only 3 published Megatron-style runs state their peak, too few
// for a band (45 runs of other frameworks do)" (every family has one in the shipped bands: a bands file without
// memory kinds, or a caller's larger minimum, leaves a plan without).
std::string noMemoryBandText(const Plan& plan);
// The peaks a measurement could have been, given a prediction and a band of |predicted - measured| / measured:
// predicted / (1 + e) .. predicted / (1 - e) at e = the band's median (the upper end unbounded from e = 1 on).
struct PeakRange {
    double lowBytes = 0.0, highBytes = 0.0;
};
PeakRange peakRangeWithin(double predictedPeakBytes, const ErrorBand& band);
// The largest predicted peak whose range still fits `capacityBytes` at its upper end: capacity x (1 - e) (0 from
// e = 1 on). memoryVerdict, predict's hint and the search's --memory-band all use it.
double peakFittingBandBytes(double capacityBytes, const ErrorBand& band);
// The out-of-memory verdict with the band: the peak is over the GPU's memory (OutOfMemory), fits even at the
// band's upper end (Fits), or fits as predicted but not at the upper end (MayNotFit: published runs of the kind
// were off by more than the headroom at the median).
enum class MemoryVerdict { Fits, MayNotFit, OutOfMemory };
MemoryVerdict memoryVerdict(double predictedPeakBytes, double capacityBytes, const std::optional<ErrorBand>& band);
// The same where PyTorch's caching allocator holds more than the allocated peak (MemoryReport::reservedPeakBytes):
// out of memory on the allocated peak, the band on the reserved one, the kind of peak the bands were measured on
// (torch.cuda.max_memory_reserved, nvidia-smi).
MemoryVerdict memoryVerdict(double allocatedPeakBytes, double reservedPeakBytes, double capacityBytes,
                            const std::optional<ErrorBand>& band);
const char* toString(MemoryVerdict v);   // "fits", "may_not_fit", "out_of_memory"


} // namespace tessel::sim
