// Subcommands of the `tessel` CLI: each registers its flags and returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>

namespace tessel::cli {

// Registers `predict` on `app`; the returned function runs it after parsing.
std::function<int()> addPredictCommand(CLI::App& app);
std::function<int()> addTraceCommand(CLI::App& app);
// Registers `run` (executes a plan under mpirun with tessel-worker ranks).
std::function<int()> addRunCommand(CLI::App& app);
// Registers `export` (plan -> Megatron-LM / DeepSpeed / torchtitan launch settings).
std::function<int()> addExportCommand(CLI::App& app);
// Registers `search` (exhaustive plan search ranked by simulated step time, memory or tokens per dollar).
std::function<int()> addSearchCommand(CLI::App& app);
// Registers `compare` (a prediction against a measured run: per action, rank, step and stage).
std::function<int()> addCompareCommand(CLI::App& app);

// Registers `bench` (microbenchmarks for calibration, run under mpirun).
std::function<int()> addBenchCommand(CLI::App& app);
// Registers `calibrate` (fits a cluster file to microbenchmarks and training runs).
std::function<int()> addCalibrateCommand(CLI::App& app);
// What a run folder's versions.json says of its host: whether the file is there and a JSON object, and the CPU ranks
// and the host's hardware threads it records (0 where absent or not an integer). calibrate and compare read it.
struct RunHost {
    bool present = false;
    bool isObject = false;
    int ranks = 0;
    int threads = 0;
};
RunHost readRunHost(const std::filesystem::path& runDir);
// Registers `validate` (predicts published training runs and reports the error per record and group).
std::function<int()> addValidateCommand(CLI::App& app);
// Registers `import` (a Megatron-LM log or PyTorch profiler traces -> a tessel run folder).
std::function<int()> addImportCommand(CLI::App& app);

} // namespace tessel::cli
