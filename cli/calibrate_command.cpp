// `tessel calibrate MEASUREMENTS... --cluster BASE -o OUT.json`: fits the cost model's terms to microbenchmarks
// (`tessel bench` folders or bench.jsonl files), training runs (`tessel run` folders, `tessel import torch`) and
// runs known by their step alone (`tessel import megatron`, records in the runs.json schema), and writes a cluster
// file of the same format with a `calibration` block.
#include "commands.hpp"
#include "output_file.hpp"
#include "table.hpp"

#include "tessel/cost/calibration.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/sim/compare.hpp"
#include "tessel/sim/schedule.hpp"
#include "tessel/sim/simulate.hpp"
#include "tessel/sim/step_calibration.hpp"
#include "tessel/sim/validation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

namespace tessel::cli {

namespace fs = std::filesystem;

namespace {
std::string readText(const fs::path& p) {
    std::ifstream in(p);
    if (!in) throw InputError(p.string(), "cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

nlohmann::json readJson(const fs::path& p) {
    const nlohmann::json j = nlohmann::json::parse(readText(p), nullptr, false);
    if (j.is_discarded()) throw InputError(p.string(), "not valid JSON");
    return j;
}

std::string utcNow() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

// The mean over ranks of each rank's mean duration over steps.
double meanOverRanks(const std::map<int, std::vector<double>>& perRank) {
    double sum = 0.0;
    for (const auto& [rank, samples] : perRank) {
        double s = 0.0;
        for (double v : samples) s += v;
        sum += s / static_cast<double>(samples.size());
    }
    return sum / static_cast<double>(perRank.size());
}

// A training run folder as `tessel run` leaves it.
struct RunFolder {
    fs::path dir;
    Scenario scenario;
    nlohmann::json memory;                      // memory.json
    // Per (stage, action index): per rank, the measured durations of the steps after the first.
    std::map<std::pair<int, int>, std::map<int, std::vector<double>>> durations;
    std::map<std::pair<int, int>, std::string> kinds;
};

RunFolder loadRunFolder(const fs::path& dir) {
    RunFolder r;
    r.dir = dir;
    r.scenario = loadScenarioFile(dir / "scenario.json");
    finishScenario(r.scenario);
    // An imported run (`tessel import torch`) may have no memory.json: the trace said nothing about memory.
    r.memory = fs::exists(dir / "memory.json") ? readJson(dir / "memory.json") : nlohmann::json{{"ranks", nlohmann::json::array()}};
    const std::string memoryWhere = (dir / "memory.json").string();
    ProblemList problems;
    if (!r.memory.is_object() || !r.memory.contains("ranks") || !r.memory["ranks"].is_array()) {
        problems.add(memoryWhere + "#/ranks", "expected the array of ranks `tessel run` writes");
    } else {
        for (size_t i = 0; i < r.memory["ranks"].size(); ++i) {
            const nlohmann::json& rank = r.memory["ranks"][i];
            const std::string at = memoryWhere + "#/ranks/" + std::to_string(i);
            if (!rank.is_object()) problems.add(at, "expected an object");
            else
                for (const char* key : {"rank", "stage", "peak_total_bytes"})
                    if (!rank.contains(key) || !rank[key].is_number()) problems.add(at + "/" + key, "expected a number");
        }
    }
    std::istringstream in(readText(dir / "measurements.jsonl"));
    int lineNo = 0;
    for (std::string line; std::getline(in, line);) {
        ++lineNo;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        const std::string where = (dir / "measurements.jsonl").string() + ":" + std::to_string(lineNo);
        if (j.is_discarded() || !j.is_object()) {
            problems.add(where, "not a JSON object");
            continue;
        }
        bool ok = true;
        for (const char* key : {"stage", "index", "step", "rank"})
            if (!j.contains(key) || !j[key].is_number_integer()) {
                problems.add(where + "#/" + key, "expected an integer");
                ok = false;
            }
        if (!j.contains("duration_seconds") || !j["duration_seconds"].is_number()) {
            problems.add(where + "#/duration_seconds", "expected a number");
            ok = false;
        }
        if (!j.contains("kind") || !j["kind"].is_string()) {
            problems.add(where + "#/kind", "expected the action kind");
            ok = false;
        }
        if (!ok || j["step"].get<int>() == 0) continue; // the first step pays for allocation and warm-up
        const std::pair<int, int> key{j["stage"].get<int>(), j["index"].get<int>()};
        r.durations[key][j["rank"].get<int>()].push_back(j["duration_seconds"].get<double>());
        r.kinds[key] = j["kind"].get<std::string>();
    }
    // CPU ranks beyond the host's hardware threads shared cores: their times would fit the model to the sharing.
    if (const RunHost host = readRunHost(dir); host.present) {
        const int ranks = host.ranks, threads = host.threads;
        if (!host.isObject)
            problems.add((dir / "versions.json").string(), "not a JSON object (tessel run writes one)");
        else if (threads > 0 && ranks > threads)
            problems.add((dir / "versions.json").string() + "#/ranks",
                         "the run put " + std::to_string(ranks) + " CPU ranks on " + std::to_string(threads) +
                             " hardware threads: its times are of shared cores and would fit the cost model to that; "
                             "measure with at most " + std::to_string(threads) + " ranks");
    }
    problems.throwIfAny();
    if (r.durations.empty())
        throw InputError((dir / "measurements.jsonl").string(), "no measurements after the first step (run 2 steps or more)");
    return r;
}

bool isComputeKind(const std::string& k) {
    return k == "forward" || k == "backward" || k == "backward_input" || k == "backward_weight" || k == "optimizer_step";
}

// Why a run on `runGpu` cannot calibrate `baseGpu`, or "" when it can.
std::string otherGpuProblem(const std::string& runGpu, const std::string& baseGpu) {
    if (runGpu == baseGpu) return "";
    return "ran on " + runGpu + ", not the " + baseGpu + " of --cluster: a scale fitted to one GPU's steps says nothing " +
           "of another's (calibrate each GPU's runs on its own cluster)";
}

// A run folder that gives its step and no action durations (`tessel import megatron` writes trace.json with
// otherData.step_seconds and no measurements.jsonl), on the GPU being calibrated.
sim::StepRun loadStepRun(const fs::path& dir, const ClusterConfig& base) {
    Scenario scenario = loadScenarioFile(dir / "scenario.json");
    finishScenario(scenario);
    const sim::MeasuredRun measured = sim::MeasuredRun::load(dir);
    if (const std::string why = otherGpuProblem(scenario.cluster.gpu.name, base.gpu.name); !why.empty())
        throw InputError((dir / "scenario.json").string() + "#/cluster", "the run " + why);
    sim::StepRun r;
    r.source = dir.string();
    r.model = scenario.model;
    r.plan = scenario.plan;
    r.nodes = scenario.cluster.nodes;
    r.gpusPerNode = scenario.cluster.gpusPerNode;
    r.measuredStepSeconds = measured.stepSeconds();
    if (!(r.measuredStepSeconds > 0.0))
        throw InputError((dir / "trace.json").string(), "no measured step (otherData.step_seconds or timed events)");
    return r;
}

// The records of a runs.json-schema file as runs known by their step (each record's scenario as `tessel validate`
// resolves it). A record tessel cannot read is an error naming it; one without a step time is listed in `notUsed`.
std::vector<sim::StepRun> stepRunsFromRecords(const fs::path& file, const ClusterConfig& base, std::vector<std::string>& notUsed) {
    std::vector<sim::StepRun> runs;
    ProblemList problems;
    for (const sim::LoadedRecord& r : sim::loadValidationFile(file.string())) {
        if (!r.validationCase) {
            problems.add(r.pointer, "record " + r.id + " cannot be predicted: " + r.refusal);
            continue;
        }
        const sim::ValidationCase& c = *r.validationCase;
        if (!c.measured.stepSeconds) {
            notUsed.push_back(r.pointer + " (" + r.id + "): no step time");
            continue;
        }
        if (const std::string why = otherGpuProblem(c.scenario.cluster.gpu.name, base.gpu.name); !why.empty()) {
            problems.add(r.pointer, "record " + r.id + " " + why);
            continue;
        }
        sim::StepRun s;
        s.source = r.id;
        s.model = c.scenario.model;
        s.plan = c.scenario.plan;
        s.nodes = c.scenario.cluster.nodes;
        s.gpusPerNode = c.scenario.cluster.gpusPerNode;
        s.measuredStepSeconds = *c.measured.stepSeconds;
        runs.push_back(std::move(s));
    }
    problems.throwIfAny();
    return runs;
}

std::string percent(double relative) { return (relative >= 0.0 ? "+" : "") + fixed(100.0 * relative, 1) + "%"; }
} // namespace

namespace {
// Every figure of a cluster file cites its source (DESIGN.md): each fitted term cites the calibration (its
// residuals are in the file's calibration block), and a source whose figure the calibration replaced (the
// GEMM shape model, say, by a fitted efficiency table) goes with it.
void citeCalibratedTerms(nlohmann::json& doc, const CalibrationResult& result) {
    nlohmann::json& sources = doc["sources"];
    for (auto it = sources.begin(); it != sources.end();) {
        if (!doc.contains(nlohmann::json::json_pointer(it.key()))) it = sources.erase(it);
        else ++it;
    }
    for (const TermReport& r : result.terms) {
        // "gpu/kernels/adamw", or "a + b" for one fit of two coefficients; the GEMM fit also sets the GEMM
        // launch overhead, kept with the kernels.
        std::string pointers = r.term == "gpu/gemm_efficiency" ? r.term + " + gpu/kernels/gemm" : r.term;
        size_t at = 0;
        while (at <= pointers.size()) {
            size_t end = pointers.find(" + ", at);
            if (end == std::string::npos) end = pointers.size();
            const std::string pointer = "/" + pointers.substr(at, end - at);
            if (doc.contains(nlohmann::json::json_pointer(pointer)))
                sources[pointer] = "tessel calibrate: fitted to " + std::to_string(r.points) +
                                   " points, rms residual " + fixed(100.0 * r.rmsRelativeResidual, 1) +
                                   "% (this file's calibration block: terms, inputs, provenance)";
            at = end + 3;
        }
    }
}
} // namespace

RunHost readRunHost(const fs::path& runDir) {
    RunHost host;
    const fs::path file = runDir / "versions.json";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return host;
    host.present = true;
    std::ifstream in(file);
    const nlohmann::json v = nlohmann::json::parse(in, nullptr, false);
    host.isObject = v.is_object();
    const auto count = [&](const char* key) { return host.isObject && v.contains(key) && v[key].is_number_integer() ? v[key].get<int>() : 0; };
    host.ranks = count("ranks");
    host.threads = count("host_threads");
    return host;
}

std::function<int()> addCalibrateCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("calibrate", "Fit the cost model to microbenchmarks and training runs; write a calibrated cluster file");
    struct Options {
        std::vector<std::string> inputs;
        std::string cluster;
        std::string out;
        bool force = false;
        bool json = false;
    };
    auto o = std::make_shared<Options>();
    cmd->add_option("measurements", o->inputs,
                    "tessel bench folders, bench.jsonl files, tessel run folders, imported runs (tessel import) and "
                    ".json files of run records (the runs.json schema); runs known by their step alone (a Megatron-LM "
                    "log's import, a record) fit one time scale on the compute phases")
        ->required();
    cmd->add_option("--cluster", o->cluster, "Base cluster (preset name or file) whose terms are refitted")->required();
    cmd->add_option("-o,--output", o->out, "Calibrated cluster file to write")->required();
    cmd->add_flag("--force", o->force, "Overwrite the output file");
    cmd->add_flag("--json", o->json, "Print the calibration block as JSON instead of a table");
    return [cmd, o]() {
        if (!cmd->parsed()) return -1;
        ProblemList problems;
        ClusterConfig base;
        bool baseLoaded = false;
        try {
            base = loadClusterRef(o->cluster, "--cluster");
            baseLoaded = true;
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
        CalibrationInputs in;
        CalibrationOptions options;
        options.createdUtc = utcNow();
        std::vector<RunFolder> runs;
        std::vector<sim::StepRun> stepRuns;
        std::vector<std::string> notUsed; // records read but giving no step to fit, with why
        bool firstStepRunIsFolder = false; // the first run known by its step came from a run folder
        for (const std::string& path : o->inputs) {
            try {
                const fs::path p(path);
                // A folder may hold both: `tessel import torch` writes a trace's kernels as bench points beside
                // its steps' phases as a run.
                const bool bench = fs::is_directory(p) && fs::exists(p / "bench.jsonl");
                const bool run = fs::is_directory(p) && fs::exists(p / "measurements.jsonl");
                if (!bench && !run && fs::is_directory(p) && fs::exists(p / "scenario.json") && fs::exists(p / "trace.json")) {
                    if (baseLoaded) {
                        if (stepRuns.empty()) firstStepRunIsFolder = true;
                        stepRuns.push_back(loadStepRun(p, base));
                    }
                    in.sources.push_back(p.string());
                    continue;
                }
                if (bench) {
                    auto samples = parseBenchSamples(readText(p / "bench.jsonl"), (p / "bench.jsonl").string());
                    in.bench.insert(in.bench.end(), samples.begin(), samples.end());
                    if (fs::exists(p / "provenance.json")) options.provenance = readJson(p / "provenance.json");
                    in.sources.push_back((p / "bench.jsonl").string());
                }
                if (run) {
                    runs.push_back(loadRunFolder(p));
                    in.sources.push_back(p.string());
                }
                if (bench || run) continue;
                if (fs::is_regular_file(p) && p.extension() == ".json") {
                    // Published or the user's own runs in the runs.json schema (data/validation/README.md): each
                    // record with a step time is a run known by its step.
                    if (baseLoaded) {
                        std::vector<sim::StepRun> more = stepRunsFromRecords(p, base, notUsed);
                        stepRuns.insert(stepRuns.end(), more.begin(), more.end());
                    }
                    in.sources.push_back(p.string());
                } else if (fs::is_regular_file(p)) {
                    auto samples = parseBenchSamples(readText(p), p.string());
                    if (samples.empty()) throw InputError(path, "holds no microbenchmark records");
                    in.bench.insert(in.bench.end(), samples.begin(), samples.end());
                    in.sources.push_back(p.string());
                } else {
                    problems.add(path, "not a tessel bench folder (bench.jsonl), a bench.jsonl file, a tessel run "
                                       "folder (measurements.jsonl, scenario.json, memory.json), one `tessel import` "
                                       "wrote (scenario.json and trace.json) or a .json file of run records");
                }
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
        }
        if (in.bench.empty() && runs.empty() && stepRuns.empty() && problems.empty())
            problems.add("measurements", "nothing to fit: give a `tessel bench` folder, a `tessel run` folder, a run "
                                         "`tessel import` wrote or a file of run records with a step time");
        // Every measured action must be in the schedule of its run's scenario (steps 2 and 3 index into it).
        std::vector<sim::ActionSchedule> schedules;
        for (const RunFolder& run : runs) {
            schedules.push_back(sim::buildSchedule(run.scenario.model, run.scenario.plan));
            const auto& stages = schedules.back().stages;
            for (const auto& [key, perRank] : run.durations) {
                const auto& [stage, index] = key;
                if (stage < 0 || stage >= static_cast<int>(stages.size()) || index < 0 ||
                    index >= static_cast<int>(stages[static_cast<size_t>(stage)].actions.size()))
                    problems.add(run.dir.string() + "/measurements.jsonl",
                                 "action " + std::to_string(index) + " of stage " + std::to_string(stage) +
                                     " is not in the schedule of the run's scenario");
            }
        }
        std::error_code ec;
        if (fs::exists(o->out, ec) && !o->force) problems.add("--output", "\"" + o->out + "\" exists; pass --force to overwrite it");
        problems.throwIfAny();
        if (!options.provenance.contains("dtype")) options.provenance["dtype"] = "fp64";

        // 1. Kernels, GEMMs and collectives from the microbenchmarks.
        CalibrationResult result = calibrateFromBench(base, in, options);
        // 2. Memory and per-action residuals from the runs, predicted with the kernel-calibrated cluster.
        for (size_t r = 0; r < runs.size(); ++r) {
            const RunFolder& run = runs[r];
            for (const auto& rank : run.memory.at("ranks")) {
                MemorySample m;
                m.processPeakBytes = rank.value("process_peak_resident_bytes", 0.0);
                m.tensorPeakBytes = rank.value("peak_total_bytes", 0.0);
                m.where = run.dir.string() + "/memory.json rank " + std::to_string(rank.value("rank", -1));
                in.memory.push_back(m);
            }
            const sim::CostTable costs = sim::costSchedule(schedules[r], run.scenario.model, result.cluster);
            for (const auto& [key, perRank] : run.durations) {
                const auto& [stage, index] = key;
                if (!isComputeKind(run.kinds.at(key))) continue;
                // On a pipeline the optimizer step also waits for the other stages' gradient norms: its
                // measured duration is not its own work, so only single-stage runs inform the optimizer fit.
                if (run.kinds.at(key) == "optimizer_step" && run.scenario.plan.pp > 1) continue;
                const sim::ActionCost& c = costs.perAction[static_cast<size_t>(stage)][static_cast<size_t>(index)];
                ActionSample a;
                a.action = run.kinds.at(key);
                // Communication inside the action (TP/CP/EP) is a network term: leave its predicted share out.
                a.predictedSeconds = c.computeSeconds;
                // The mean over steps and ranks: a step pays the sum of its actions' expected times (a median
                // would leave out the right tail a noisy machine adds); what the slowest rank adds on top is
                // the wait at the next synchronisation, fitted in step 3 (FORMULAS.md §7.5, §7.6).
                a.measuredSeconds = std::max(1e-9, meanOverRanks(perRank) - (c.seconds - c.computeSeconds));
                a.where = run.dir.string() + " stage " + std::to_string(stage) + " action " + std::to_string(index);
                a.run = run.dir.string();
                // tessel's executor (its runs say loss_in_place) updates its tensors one by one: the optimizer is
                // fitted per tensor; other runs (imported traces: PyTorch's fused AdamW) keep the phase scale.
                if (a.action == "optimizer_step" && run.scenario.plan.framework.lossInPlace.value_or(false))
                    a.parameterTensors = stageParameterTensors(run.scenario.model, run.scenario.plan, stage);
                in.actions.push_back(a);
            }
        }
        calibrateFromRuns(result, in, options);
        // 3. Waits at synchronising collectives, against the work the phase-calibrated model now predicts.
        for (size_t r = 0; r < runs.size(); ++r) {
            const RunFolder& run = runs[r];
            const sim::ActionSchedule& schedule = schedules[r];
            const sim::CostTable costs = sim::costSchedule(schedule, run.scenario.model, result.cluster);
            for (const auto& [key, perRank] : run.durations) {
                const auto& [stage, index] = key;
                const sim::Action& action = schedule.stages[static_cast<size_t>(stage)].actions[static_cast<size_t>(index)];
                const sim::ActionCost& c = costs.perAction[static_cast<size_t>(stage)][static_cast<size_t>(index)];
                if (action.kind != sim::ActionKind::Collective || c.syncGroupSize < 2) continue;
                // The early ranks wait inside the call for the last: the mean over ranks is transfer + the mean wait.
                SyncSample y;
                y.groupSize = c.syncGroupSize;
                y.workSeconds = c.syncWorkSeconds;
                y.transferSeconds = c.computeSeconds;
                y.measuredSeconds = meanOverRanks(perRank);
                y.where = run.dir.string() + " stage " + std::to_string(stage) + " action " + std::to_string(index);
                in.syncs.push_back(y);
            }
        }
        calibrateSyncJitter(result, in);
        // 4. Runs known by their step alone: where no run measured its actions, they fit one time scale on the
        // forward and backward phases (FORMULAS.md §7.8); where runs did, the phases are theirs and these runs are
        // predicted with the result, as a check on plans the action-level fit did not see.
        nlohmann::json stepReport = nlohmann::json::array();
        const bool phasesFitted = std::any_of(result.terms.begin(), result.terms.end(), [](const TermReport& t) {
            return t.term == "gpu/phase_fits/forward" || t.term == "gpu/phase_fits/backward";
        });
        std::optional<sim::StepScaleFit> stepFit;
        if (!stepRuns.empty() && !phasesFitted) {
            stepFit = sim::fitComputeScaleToSteps(result.cluster, stepRuns);
            if (!stepFit->reached) {
                std::vector<double> before = stepFit->errorsBefore;
                std::sort(before.begin(), before.end());
                throw InputError("measurements",
                                 "no time scale on the compute phases between " + fixed(sim::kMinComputeScale, 1) + " and " +
                                     fixed(sim::kMaxComputeScale, 1) + " brings the runs' predicted steps to their measured "
                                     "ones (predicted / measured - 1 before: " + percent(before.front()) + " to " +
                                     percent(before.back()) + "): what is off is not the compute (set each run against "
                                     "its prediction with `tessel compare`); nothing written");
            }
            const nlohmann::json before = {{"forward", result.cluster.gpu.phaseFit("forward").timeScale},
                                           {"backward", result.cluster.gpu.phaseFit("backward").timeScale}};
            result.cluster = sim::withComputeScale(result.cluster, stepFit->scale);
            std::erase_if(result.uncalibrated, [](const std::string& u) {
                return u.rfind("gpu/phase_fits/forward:", 0) == 0 || u.rfind("gpu/phase_fits/backward:", 0) == 0;
            });
            TermReport t;
            t.term = "gpu/phase_fits/forward + gpu/phase_fits/backward";
            t.points = static_cast<int>(stepRuns.size());
            double rms = 0.0;
            for (double e : stepFit->errorsAfter) {
                rms += e * e;
                t.maxAbsRelativeResidual = std::max(t.maxAbsRelativeResidual, std::abs(e));
            }
            t.rmsRelativeResidual = std::sqrt(rms / static_cast<double>(stepRuns.size()));
            t.values = {{"time_scale", stepFit->scale},
                        {"from", "the measured steps of " + std::to_string(stepRuns.size()) +
                                     " run(s): the median of log(predicted / measured) made zero"},
                        {"before", before}};
            result.terms.push_back(t);
        }
        for (size_t i = 0; i < stepRuns.size(); ++i) {
            const sim::StepRun& r = stepRuns[i];
            // Before: on --cluster as given; after: on the calibrated result.
            nlohmann::json row{{"run", r.source},
                               {"measured_step_seconds", r.measuredStepSeconds},
                               {"error_before", sim::predictedStepSeconds(base, r) / r.measuredStepSeconds - 1.0}};
            if (stepFit) {
                row["error_after"] = stepFit->errorsAfter[i];
                if (!stepFit->heldOutErrors.empty()) row["error_held_out"] = stepFit->heldOutErrors[i];
            } else {
                row["error_after"] = sim::predictedStepSeconds(result.cluster, r) / r.measuredStepSeconds - 1.0;
                row["role"] = "check (the phases were fitted to action-level runs)";
            }
            stepReport.push_back(row);
        }
        nlohmann::json doc = clusterToJson(result.cluster);
        doc["name"] = base.name + "-calibrated";
        doc["calibration"] = calibrationBlock(result, in, options);
        if (!stepRuns.empty()) doc["calibration"]["step_runs"] = stepReport;
        if (!notUsed.empty()) doc["calibration"]["records_not_used"] = notUsed;
        citeCalibratedTerms(doc, result);
        writeOutputFile(o->out, doc.dump(2) + "\n", o->force, "--output");
        if (o->json) {
            std::cout << doc["calibration"].dump(2) << "\n";
            return 0;
        }
        Table t({"term", "points", "outliers", "rms resid %", "max resid %"});
        for (const TermReport& r : result.terms)
            t.addRow({r.term, std::to_string(r.points), std::to_string(r.rejected), fixed(100.0 * r.rmsRelativeResidual, 1),
                      fixed(100.0 * r.maxAbsRelativeResidual, 1)});
        std::cout << t.render();
        if (!result.measured.empty()) {
            // Bandwidths the model has no term for, or sets beside the datasheet (FORMULAS.md §7.7).
            Table m({"measured, not applied", "points", "GB/s", "overhead us", "rms resid %"});
            for (const TermReport& r : result.measured)
                m.addRow({r.term, std::to_string(r.points), fixed(r.values.value("bytes_per_second", 0.0) / 1e9, 1),
                          fixed(r.values.value("overhead_seconds", 0.0) * 1e6, 1), fixed(100.0 * r.rmsRelativeResidual, 1)});
            std::cout << m.render();
        }
        if (!stepRuns.empty()) {
            // Each run's step against the prediction before and after; held out: with the scale fitted to the
            // other runs, what the fit says of a plan it has not seen.
            Table st({"run", "measured s", "predicted / measured - 1: before", "after", "held out"});
            for (const auto& row : stepReport)
                st.addRow({row["run"].get<std::string>(), fixed(row["measured_step_seconds"].get<double>(), 3),
                           percent(row["error_before"].get<double>()), percent(row["error_after"].get<double>()),
                           row.contains("error_held_out") ? percent(row["error_held_out"].get<double>())
                                                          : std::string(stepFit ? "- (one run)" : "- (a check)")});
            std::cout << st.render();
            if (stepFit)
                std::cout << "compute phases x " << fixed(stepFit->scale, 3) << ", fitted to the steps of " << stepRuns.size()
                          << " run(s)" << (stepRuns.size() < 2 ? "; give two or more runs of different plans to see whether "
                                                                 "it carries to a plan it has not seen"
                                                               : "")
                          << "\n";
            const sim::StepRun& first = stepRuns.front();
            std::string shape;
            if (first.nodes != base.nodes) shape += " --nodes " + std::to_string(first.nodes);
            if (first.gpusPerNode != base.gpusPerNode) shape += " --gpus-per-node " + std::to_string(first.gpusPerNode);
            if (firstStepRunIsFolder)
                std::cout << "each run against the calibrated prediction: tessel compare " << first.source << "/scenario.json "
                          << first.source << " --cluster " << o->out << shape << "\n";
            else
                std::cout << "each record's scenario for `tessel predict --cluster " << o->out
                          << "`: tessel validate FILE --scenarios DIR\n";
            for (const std::string& n : notUsed) std::cout << "not used: " << n << "\n";
        }
        std::cout << result.uncalibrated.size() << " terms left uncalibrated (listed in the file's calibration block)\n";
        std::cout << "wrote " << o->out << "\n";
        return 0;
    };
}

} // namespace tessel::cli
