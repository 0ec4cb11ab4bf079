// Importers for runs tessel did not execute: a Megatron-LM training log and PyTorch profiler traces, turned into
// a tessel run folder (scenario.json, measurements.jsonl, trace.json, memory.json) that `tessel compare`,
// `tessel calibrate` and the GUI's measured overlay read like a `tessel run` folder, plus, for traces,
// microbenchmark-format points (bench.jsonl) that `tessel calibrate` fits. Pure: no printing, no files.
#pragma once

#include "tessel/cost/errors.hpp"
#include "tessel/cost/scenario.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {

// What an import leaves: each member is one file of the run folder (empty = not written).
struct ImportedRun {
    nlohmann::json scenario;                 // scenario.json: model, cluster (inline) and plan
    std::vector<nlohmann::json> measurements;// measurements.jsonl: tessel's per-action records (run_output.cpp)
    nlohmann::json trace;                    // trace.json: the same records as Chrome events; otherData.step_seconds
    nlohmann::json memory;                   // memory.json: {"ranks": [...]} as `tessel run` writes it
    std::vector<nlohmann::json> benchPoints; // bench.jsonl: "microbenchmark" records (`tessel bench` format)
    nlohmann::json report;                   // import.json: source, rules applied, warnings, what was not mapped
    std::vector<std::string> warnings;       // what the input states that tessel cannot express, by name
    double stepSeconds = 0.0;                // the measured step after the warm-up rule
};

// ---------------------------------------------------------------------------------------------------------
// Megatron-LM logs (formats of megatron/training/arguments.py `_print_args`, training.py `training_log` and
// utils.py `report_memory`).

struct MegatronIteration {
    int line = 0;
    int iteration = 0;
    int trainIters = 0;
    double elapsedMs = 0.0;                  // elapsed time per iteration (ms): the interval's mean
    std::optional<double> tflopsPerGpu;      // throughput per GPU (TFLOP/s/GPU)
    std::optional<double> lossScale;
    int skipped = 0;                         // number of skipped iterations in the interval
    int nan = 0;                             // number of nan iterations in the interval
    std::map<std::string, std::string> fields;
};

struct MegatronMemoryReport {
    int line = 0;
    int rank = 0;
    int afterIterations = 0;
    double allocatedMb = 0.0, maxAllocatedMb = 0.0, reservedMb = 0.0, maxReservedMb = 0.0;
};

struct MegatronLog {
    std::string source;
    std::map<std::string, std::string> args;          // the arguments block: name -> value as printed
    std::map<std::string, int> argLines;
    std::optional<int64_t> paddedVocab;               // "> padded vocab (size: V) with D dummy tokens (new size: P)"
    std::vector<MegatronIteration> iterations;
    std::vector<MegatronMemoryReport> memory;
};

// Parses the log. Lines that are none of the three are skipped. A malformed arguments, iteration or memory line,
// a truncated log (no arguments block, an unterminated block, no iteration line) throws InputError naming
// "SOURCE:LINE" and what is wrong.
MegatronLog parseMegatronLog(const std::string& text, const std::string& source);

struct MegatronImportOptions {
    int warmupIterations = 2;                // iterations that pay for allocation, compilation and autotuning
};

// The scenario (model + plan from the arguments, `cluster` inline), the measured step and the memory reports.
// Step: every logged interval that reaches past the first `warmupIterations` iterations and reports no skipped
// or nan iteration; the median of their per-iteration times (docs/import.md). Memory: per rank the largest
// "max allocated" of its reports (MB = 2^20 bytes). Arguments tessel does not express are in `warnings`.
// Throws InputError when the log lacks what the scenario needs (named by argument and line).
ImportedRun importMegatronLog(const MegatronLog& log, const ClusterConfig& cluster, const MegatronImportOptions& o = {});

// ---------------------------------------------------------------------------------------------------------
// PyTorch profiler traces (Chrome/Kineto JSON from torch.profiler, record_shapes=True).

// One file, parsed: `rank` from distributedInfo (0 when absent), the raw document kept for pointers.
struct TorchTrace {
    std::string source;
    nlohmann::json doc;
    int rank = 0;
    int worldSize = 1;
};
// Checks the structure every later step relies on and throws InputError naming "SOURCE#/traceEvents/I/field".
TorchTrace parseTorchTrace(const std::string& text, const std::string& source);

// Maps the operators of every profiled step (ProfilerStep#N) to the cost model's kernels (GEMM by shape, norms,
// GELU, softmax, residual adds, embedding, cross-entropy, collectives) as bench points, and each step's phases
// (forward, backward, optimizer) to the actions of the scenario's schedule as measurements. The scenario is what
// the traced script ran (a trace does not say it). Throws InputError naming the trace and JSON pointer.
struct TorchImportOptions {
    // The script's step time measured without the profiler (its own timer or log). The profiler's per-operator
    // recording lengthens a traced step (by ~25% for the small CPU model of bench/make_torch_traces.py); given
    // this, each phase is scaled by unprofiled / traced step so the run states the step a training job sees.
    std::optional<double> unprofiledStepSeconds;
};
ImportedRun importTorchTraces(const std::vector<TorchTrace>& traces, const Scenario& scenario, const TorchImportOptions& o = {});

} // namespace tessel::sim
