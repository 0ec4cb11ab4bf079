// Calibration: fits the cluster's cost-model terms (GEMM efficiency by shape, per-kernel overhead and rate,
// latency and bandwidth per primitive and tier, reserved memory, per-action overhead) to measurements by
// robust least squares (Eigen), and records what was fitted, from what, and how well (FORMULAS.md §7).
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/errors.hpp"

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace tessel {

// One microbenchmark point as `tessel bench` writes it (kind "microbenchmark" in bench.jsonl).
struct BenchSample {
    std::string kernel;               // "gemm", "norm_forward", "all_reduce", ...
    std::map<std::string, int64_t> shape;
    double flops = 0.0;
    double bytes = 0.0;
    int groupSize = 1;
    std::string tier;                 // collectives: "intra_node" or "inter_node"
    double seconds = 0.0;             // the median of the samples
    int rank = 0;
    std::string device;
    std::string where;                // "FILE:LINE", for messages and the calibration block
};

// Parses bench.jsonl text. Lines of other kinds are skipped; a malformed microbenchmark line throws InputError
// naming "SOURCE:LINE" and the JSON pointer of the field.
std::vector<BenchSample> parseBenchSamples(const std::string& text, const std::string& source);

// A rank's memory in a training run: the process's peak resident bytes and the backend's peak tensor bytes.
struct MemorySample {
    double processPeakBytes = 0.0;
    double tensorPeakBytes = 0.0;
    std::string where;
};

// A compute action of a training run: its predicted duration under the kernel-calibrated model, the number of
// kernels the model counts in it, and the measured median duration.
struct ActionSample {
    std::string action;               // "forward", "backward", "optimizer_step", ...
    double predictedSeconds = 0.0;
    double measuredSeconds = 0.0;
    std::string where;
    std::string run;                  // the run it came from: each run weighs the same in its phase's fit
    int parameterTensors = 0;         // optimizer steps: the stage's parameter tensors (stageParameterTensors)
};

// A synchronising collective of a training run (DP gradients, ZeRO gathers): its group size, the predicted work
// of a rank since the group last met, its predicted transfer time, and the measured duration averaged over the
// group's ranks (the early ones wait for the last one inside the call).
struct SyncSample {
    int groupSize = 2;
    double workSeconds = 0.0;
    double transferSeconds = 0.0;
    double measuredSeconds = 0.0;
    std::string where;
};

// Result of one robust linear fit seconds ~ X beta.
struct LinearFit {
    Eigen::VectorXd beta;
    std::vector<bool> kept;           // per row: used in the final fit (false = rejected as an outlier)
    std::vector<double> relativeResiduals; // (prediction - measured) / measured, every row
    int rejected() const;
    double rmsRelativeResidual() const;    // over the kept rows
    double maxAbsRelativeResidual() const; // over the kept rows
};

// Least squares on relative error (each row weighted by 1 / measured), coefficients constrained >= 0 (an active
// set: a negative coefficient is pinned at 0 and the rest refitted), then rows whose relative residual lies more
// than `madLimit` scaled median absolute deviations from the median are rejected and the fit repeated, until
// the kept set is stable. Throws RuntimeError when fewer rows than coefficients remain.
// `rowWeights` (optional, > 0) weighs each row's squared relative residual.
LinearFit fitRelativeLeastSquares(const Eigen::MatrixXd& x, const Eigen::VectorXd& seconds, double madLimit = 3.5,
                                  const Eigen::VectorXd* rowWeights = nullptr);

// What one fitted term of the calibration came from and how well it fits.
struct TermReport {
    std::string term;                 // "gpu/gemm_efficiency", "gpu/kernels/norm_forward", ...
    int points = 0;
    int rejected = 0;
    double rmsRelativeResidual = 0.0;
    double maxAbsRelativeResidual = 0.0;
    nlohmann::json values;            // the fitted values (and the previous ones)
};

struct CalibrationInputs {
    std::vector<BenchSample> bench;
    std::vector<MemorySample> memory;
    std::vector<ActionSample> actions;
    std::vector<SyncSample> syncs;
    std::vector<std::string> sources; // the files read, for the calibration block
};

struct CalibrationOptions {
    double madLimit = 3.5;
    std::string createdUtc;           // stamped into the block
    nlohmann::json provenance;        // device, host, software, as the measurements say
};

struct CalibrationResult {
    ClusterConfig cluster;
    std::vector<TermReport> terms;
    std::vector<std::string> uncalibrated; // terms the measurements could not reach, with the reason
    // Bandwidths measured but applied to no term: the copies of kernel_cost::transferNames() (the model has no
    // host link; the device copy is set beside the datasheet's HBM bandwidth).
    std::vector<TermReport> measured;
};

// Fits from microbenchmarks: the GEMM efficiency table and overhead, every kernel with points at two or more
// sizes, and latency + bandwidth per primitive and tier. Memory and action samples are used by
// calibrateFromRuns. Terms without data keep the base value and are listed in `uncalibrated`.
CalibrationResult calibrateFromBench(const ClusterConfig& base, const CalibrationInputs& in, const CalibrationOptions& o);

// Fits from training runs on top of `result`: reserved bytes (median of process peak - tensor peak) and per
// phase the overhead and time scale of compute actions.
void calibrateFromRuns(CalibrationResult& result, const CalibrationInputs& in, const CalibrationOptions& o);

// Fits, from `in.syncs` (after calibrateFromRuns, with work predicted by the phase-calibrated model and transfer
// by the benchmark-calibrated network): measured = s_comm x transfer + σ e(n) W by least squares on seconds
// (waits are additive noise whose mean a step pays); s_comm becomes phase_fits.communication, σ
// gpu.sync_jitter_fraction (FORMULAS.md §7.6).
void calibrateSyncJitter(CalibrationResult& result, const CalibrationInputs& in);

// The cluster file's `calibration` block: inputs, when, provenance, per-term fit and residuals, uncalibrated.
nlohmann::json calibrationBlock(const CalibrationResult& result, const CalibrationInputs& in, const CalibrationOptions& o);

} // namespace tessel
