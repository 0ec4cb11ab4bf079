// `tessel import megatron LOG` and `tessel import torch SCENARIO --trace FILE...`: runs tessel did not execute, written
// as a tessel run folder (scenario.json, trace.json, memory.json, measurements.jsonl, bench.jsonl, import.json) that
// `tessel compare`, `tessel calibrate` and the GUI's measured overlay open like a `tessel run` folder.
#include "commands.hpp"
#include "output_file.hpp"
#include "scenario_flags.hpp"

#include "tessel/sim/import.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace tessel::cli {

namespace {
namespace fs = std::filesystem;

std::string readText(const std::string& path, const std::string& flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(flag, "cannot read \"" + path + "\"");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The files an import writes; an existing folder holding any of them needs --force (other files are left alone).
const char* const kImportFiles[] = {"scenario.json", "trace.json",      "memory.json", "measurements.jsonl",
                                    "bench.jsonl",   "provenance.json", "import.json"};

void checkOutputFolder(const std::string& out, bool force, ProblemList& problems) {
    std::error_code ec;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
        problems.add("--output", "\"" + out + "\" exists and is not a folder");
        return;
    }
    if (force) return;
    for (const char* f : kImportFiles)
        if (fs::exists(fs::path(out) / f, ec)) {
            problems.add("--output", "\"" + out + "\" already holds " + f + "; pass --force to replace the imported files");
            return;
        }
}

std::string jsonLines(const std::vector<nlohmann::json>& records) {
    std::string text;
    for (const auto& r : records) text += r.dump() + "\n";
    return text;
}

void writeRun(const sim::ImportedRun& run, const std::string& out, const nlohmann::json& provenance) {
    fs::create_directories(out);
    auto write = [&](const char* name, const std::string& text) {
        const fs::path p = fs::path(out) / name;
        std::error_code ec;
        fs::remove(p, ec);   // replacing was allowed by checkOutputFolder (--force or absent)
        writeOutputFile(p.string(), text, true, "--output");
    };
    write("scenario.json", run.scenario.dump(2) + "\n");
    write("trace.json", run.trace.dump() + "\n");
    if (!run.memory.is_null()) write("memory.json", run.memory.dump(2) + "\n");
    if (!run.measurements.empty()) write("measurements.jsonl", jsonLines(run.measurements));
    if (!run.benchPoints.empty()) {
        write("bench.jsonl", jsonLines(run.benchPoints));
        write("provenance.json", provenance.dump(2) + "\n");
    }
    write("import.json", run.report.dump(2) + "\n");
}

void printSummary(const sim::ImportedRun& run, const std::string& out) {
    std::cout << "measured step " << run.stepSeconds * 1e3 << " ms";
    if (!run.memory.is_null()) std::cout << ", memory of " << run.memory["ranks"].size() << " rank(s)";
    if (!run.measurements.empty()) std::cout << ", " << run.measurements.size() << " action measurements";
    if (!run.benchPoints.empty()) std::cout << ", " << run.benchPoints.size() << " kernel points";
    std::cout << "\n";
    if (!run.warnings.empty()) {
        std::cout << run.warnings.size() << " thing(s) tessel does not express (also in import.json):\n";
        for (const std::string& w : run.warnings) std::cout << "  " << w << "\n";
    }
    std::cout << "wrote " << out << " (scenario.json, trace.json";
    if (!run.memory.is_null()) std::cout << ", memory.json";
    if (!run.measurements.empty()) std::cout << ", measurements.jsonl";
    if (!run.benchPoints.empty()) std::cout << ", bench.jsonl";
    std::cout << ", import.json)\n";
}
} // namespace

std::function<int()> addImportCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("import", "Import a Megatron-LM log or PyTorch profiler traces as a tessel run folder");
    cmd->require_subcommand(1);
    struct Options {
        std::string log, cluster, out;
        std::vector<std::string> traces;
        int warmup = 2;
        std::optional<double> stepSeconds;
        bool force = false, json = false;
    };
    auto o = std::make_shared<Options>();
    auto* meg = cmd->add_subcommand("megatron", "A Megatron-LM training log: arguments block, iteration lines, memory reports");
    meg->add_option("log", o->log, "The training log (stdout of pretrain_gpt.py)")->required();
    meg->add_option("--cluster", o->cluster, "The cluster it ran on (preset name or file): the log does not say")->required();
    meg->add_option("--warmup-iterations", o->warmup, "Iterations left out of the step time (default 2)")->check(CLI::NonNegativeNumber);
    meg->add_option("-o,--output", o->out, "Run folder to write")->required();
    meg->add_flag("--force", o->force, "Replace the imported files of an existing folder");
    meg->add_flag("--json", o->json, "Print import.json instead of the summary");

    auto flags = std::make_shared<ScenarioFlags>();
    auto* torch = cmd->add_subcommand("torch", "PyTorch profiler traces (Chrome/Kineto JSON, record_shapes=True) of a plan's steps");
    flags->addTo(*torch);   // SCENARIO and the predict flags: what the traced script ran
    torch->add_option("--trace", o->traces, "A rank's trace (repeat per rank, e.g. each process of DDP)")->required();
    torch->add_option("--step-seconds", o->stepSeconds,
                      "The script's step time measured without the profiler: phases are scaled to it (docs/import.md)");
    torch->add_option("-o,--output", o->out, "Run folder to write")->required();
    torch->add_flag("--force", o->force, "Replace the imported files of an existing folder");
    torch->add_flag("--json", o->json, "Print import.json instead of the summary");

    return [cmd, meg, torch, o, flags]() {
        if (!cmd->parsed()) return -1;
        ProblemList problems;
        checkOutputFolder(o->out, o->force, problems);
        sim::ImportedRun run;
        nlohmann::json provenance;
        if (meg->parsed()) {
            ClusterConfig cluster;
            try {
                cluster = loadClusterRef(o->cluster, "--cluster");
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
            const std::string text = readText(o->log, "log");
            problems.throwIfAny();
            const sim::MegatronLog log = sim::parseMegatronLog(text, o->log);
            run = sim::importMegatronLog(log, cluster, sim::MegatronImportOptions{o->warmup});
        } else if (torch->parsed()) {
            Scenario scenario;
            try {
                scenario = flags->resolve();
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
            std::vector<sim::TorchTrace> traces;
            for (const std::string& path : o->traces) {
                try {
                    traces.push_back(sim::parseTorchTrace(readText(path, "--trace"), path));
                } catch (const InputError& e) {
                    problems.append(e.problems());
                }
            }
            problems.throwIfAny();
            run = sim::importTorchTraces(traces, scenario, sim::TorchImportOptions{o->stepSeconds});
            const Dtype dtype = scenario.recipe().computeDtype;
            // The dtype the GEMM efficiencies are relative to, as `tessel bench --dtype` records it.
            provenance = {{"dtype", dtype == Dtype::Fp64 ? "fp64" : dtype == Dtype::Fp32 ? "fp32" : "bf16"},
                          {"device", "PyTorch profiler trace"},
                          {"sources", o->traces}};
        } else {
            return 2;
        }
        writeRun(run, o->out, provenance);
        if (o->json) std::cout << run.report.dump(2) << "\n";
        else printSummary(run, o->out);
        return 0;
    };
}

} // namespace tessel::cli
