// `tessel compare PREDICTED MEASURED` (or `tessel compare RUN`): a prediction (a scenario, simulated here, or a
// `tessel trace` file) against a measured run (a `tessel run --out` folder or its trace.json): step, memory,
// most-wrong actions, categories.
#include "commands.hpp"
#include "output_file.hpp"
#include "scenario_flags.hpp"
#include "table.hpp"

#include "tessel/sim/compare.hpp"
#include "tessel/sim/simulate.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace tessel::cli {

namespace {
namespace fs = std::filesystem;

// A JSON file that is a Chrome trace ({"traceEvents": ...} or a bare event array), or nothing.
std::optional<nlohmann::json> readTraceFile(const std::string& path) {
    std::error_code ec;
    if (path.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return std::nullopt;   // not JSON: let the scenario loader say what is wrong
    if (doc.is_array() || (doc.is_object() && doc.contains("traceEvents"))) return doc;
    return std::nullopt;
}

nlohmann::json readJson(const std::string& path, const std::string& flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(flag, "cannot open \"" + path + "\"");
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_discarded()) throw InputError(path, "not JSON");
    return doc;
}

std::string percent(const std::optional<double>& fraction) {
    if (!fraction) return "-";
    return (*fraction >= 0 ? "+" : "") + fixed(100.0 * *fraction, 1) + "%";
}

// Bytes in GiB, or MiB below 0.1 GiB so small CPU runs do not read as zero.
std::string bytesText(double bytes) {
    const double mib = bytes / (1024.0 * 1024.0);
    return mib < 102.4 ? fixed(mib, 3) + " MiB" : gib(bytes, 3) + " GiB";
}
std::string bytesText(const std::optional<double>& bytes) { return bytes ? bytesText(*bytes) : "-"; }

std::string renderTables(const sim::RunComparison& c, size_t top, const std::string& planNote) {
    std::ostringstream out;
    out << "predicted: " << c.predictedSource << "\nmeasured:  " << c.measuredSource << "\n" << planNote << "\n";

    std::string compared;
    for (int s : c.comparedSteps) compared += (compared.empty() ? "" : ",") + std::to_string(s);
    // compare reads the run against the prediction (measured / predicted - 1: +10% is a run 10% slower than
    // predicted), the reverse of validate's predicted / measured - 1; the legend says which.
    out << "Errors are measured / predicted - 1 (+: the run was slower or larger than predicted)\n";
    out << "Step time (ms): predicted " << milliseconds(c.predictedStepSeconds) << ", measured "
        << milliseconds(c.measuredStepSeconds)
        << (compared.empty() ? std::string(" (as the run states it)") : " (median of steps " + compared + ")") << ", error "
        << percent(c.stepError()) << "\n";
    // An imported log states its step and memory only: there are no actions to lay over the prediction.
    const bool stepOnly = c.steps.empty() && c.actions.empty() && c.unmatchedMeasuredEvents == 0;
    Table steps({"step", "measured ms", "error", "compared"});
    for (const auto& s : c.steps)
        steps.addRow({std::to_string(s.step), milliseconds(s.measuredSeconds),
                      percent(c.predictedStepSeconds > 0 ? std::optional<double>(s.measuredSeconds / c.predictedStepSeconds - 1.0)
                                                         : std::nullopt),
                      s.compared ? "yes" : "no (warm-up)"});
    if (!stepOnly) out << steps.render() << "\n";

    out << "Peak memory per stage (the executor counts its own allocations, so the reserved bytes are "
           "left out of the comparison)\n";
    // Which moment the category rows are of: the same on both sides, said so a row is not read as the other.
    const bool atTotalPeak = std::all_of(c.memory.begin(), c.memory.end(), [](const auto& m) { return m.categoriesAtTotalPeak; });
    const bool ownPeaks = std::none_of(c.memory.begin(), c.memory.end(), [](const auto& m) { return m.categoriesAtTotalPeak; });
    const bool categoriesMeasured = std::any_of(c.memory.begin(), c.memory.end(), [](const auto& m) {
        return std::any_of(m.categories.begin(), m.categories.end(), [](const auto& x) { return x.measuredBytes.has_value(); });
    });
    if (categoriesMeasured)
        out << (atTotalPeak ? "categories: what each held when the total peaked (they add up to the total)\n"
                : ownPeaks  ? "categories: each at its own peak, as the run recorded them (they need not add up to the total)\n"
                            : "categories: stage by stage, at the total's peak where the run recorded it, else each at its own peak\n");
    Table mem({"stage", "category", "predicted", "measured", "error"});
    for (const auto& m : c.memory) {
        for (const auto& x : m.categories)
            mem.addRow({std::to_string(m.stage), x.category, bytesText(x.predictedBytes), bytesText(x.measuredBytes), percent(x.error())});
        mem.addRow({std::to_string(m.stage), "total allocated", bytesText(m.predictedAllocatedBytes()),
                    bytesText(m.measuredPeakBytes), percent(m.error())});
        mem.addRow({std::to_string(m.stage), "reserved (not measured)", bytesText(m.predictedReservedBytes), "-", "-"});
        if (m.measuredProcessPeakBytes)
            mem.addRow({std::to_string(m.stage), "total vs process peak RSS", bytesText(m.predictedTotalBytes),
                        bytesText(m.measuredProcessPeakBytes), percent(m.processError())});
    }
    out << (c.memory.empty() ? std::string("(no memory on either side)\n") : mem.render()) << "\n";
    if (stepOnly) {
        out << "the run records no actions (an imported log): step and memory only\n";
        return out.str();
    }

    out << "Most wrong actions (by |measured - predicted|, their share of the step error)\n";
    Table wrong({"stage", "action", "mb", "chunk", "predicted ms", "measured ms", "min ms", "max ms", "ranks", "off ms", "error"});
    for (size_t i : c.mostWrong(top)) {
        const auto& a = c.actions[i];
        wrong.addRow({std::to_string(a.stage), a.name, a.microBatch < 0 ? "-" : std::to_string(a.microBatch),
                      std::to_string(a.chunk), milliseconds(a.predictedSeconds), milliseconds(a.measuredMeanSeconds),
                      milliseconds(a.measuredMinSeconds), milliseconds(a.measuredMaxSeconds), std::to_string(a.ranks),
                      milliseconds(a.errorSeconds()), percent(a.error())});
    }
    out << wrong.render() << "\n";

    out << "Per stage and category (matched actions, ms per step)\n";
    Table cats({"stage", "category", "actions", "predicted ms", "measured ms", "error"});
    for (const auto& k : c.categories)
        cats.addRow({std::to_string(k.stage), k.category, std::to_string(k.actions), milliseconds(k.predictedSeconds),
                     milliseconds(k.measuredSeconds),
                     percent(k.predictedSeconds > 0 ? std::optional<double>(k.measuredSeconds / k.predictedSeconds - 1.0) : std::nullopt)});
    out << cats.render() << "\n";

    out << "Per rank (busy ms per step; step = the rank's own span, median)\n";
    Table ranks({"rank", "stage", "category", "predicted ms", "measured ms"});
    for (const auto& r : c.ranks) {
        ranks.addRow({std::to_string(r.rank), std::to_string(r.stage), "step", milliseconds(r.predictedStepSeconds),
                      milliseconds(r.measuredStepSeconds)});
        std::map<std::string, std::pair<double, double>> busy;
        for (const auto& [k, v] : r.predictedBusySeconds) busy[k].first = v;
        for (const auto& [k, v] : r.measuredBusySeconds) busy[k].second = v;
        for (const auto& [k, v] : busy)
            ranks.addRow({std::to_string(r.rank), std::to_string(r.stage), k, milliseconds(v.first), milliseconds(v.second)});
    }
    out << ranks.render() << "\n";

    out << c.actions.size() << " actions matched, mean |error| " << fixed(100.0 * c.meanAbsoluteError(), 1) << "%; unmatched: "
        << c.unmatchedPredicted.size() << " predicted actions, " << c.unmatchedMeasuredEvents << " measured events\n";
    const size_t shown = 10;
    for (size_t i = 0; i < c.unmatchedPredicted.size() && i < shown; ++i) {
        const auto& a = c.unmatchedPredicted[i];
        out << "  predicted, never measured: stage " << a.stage << " #" << a.index << " " << a.name << " mb " << a.microBatch
            << " chunk " << a.chunk << "\n";
    }
    for (size_t i = 0; i < c.unmatchedMeasured.size() && i < shown; ++i) {
        const auto& u = c.unmatchedMeasured[i];
        out << "  measured, not predicted: stage " << u.stage << " " << u.name << " mb " << u.microBatch << " chunk "
            << u.chunk << " (" << u.events << " events)\n";
    }
    if (c.unmatchedPredicted.size() > shown || c.unmatchedMeasured.size() > shown) out << "  ... (--json lists them all)\n";
    return out.str();
}
} // namespace

std::function<int()> addCompareCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("compare",
                                   "Compare a prediction (scenario or predicted trace) with a measured run, per action, rank, "
                                   "step and stage");
    auto flags = std::make_shared<ScenarioFlags>();
    flags->addTo(*cmd);   // its positional SCENARIO is PREDICTED
    cmd->get_option("scenario")->description(
        "PREDICTED: a scenario file or preset name (simulated here, with the flags below), or a `tessel trace` .json; "
        "given alone, a run folder: the run against the scenario.json it ran");
    struct Options {
        std::string measured;
        std::string predictedMemory;
        bool json = false;
        int top = 10;
        std::string output;
        bool force = false;
    };
    auto o = std::make_shared<Options>();
    cmd->add_option("measured", o->measured, "MEASURED: a run folder written by `tessel run --out`, or its trace.json");
    cmd->add_option("--predicted-memory", o->predictedMemory,
                    "With a predicted trace as PREDICTED: `tessel predict --json` output for the memory comparison");
    cmd->add_flag("--json", o->json, "Print everything as one JSON object");
    cmd->add_option("--top", o->top, "How many most-wrong actions to show (default 10)");
    cmd->add_option("-o,--output", o->output, "Write the report to this file instead of standard output");
    cmd->add_flag("--force", o->force, "Overwrite the output file if it exists");
    return [cmd, flags, o]() {
        if (!cmd->parsed()) return -1;
        ProblemList problems;
        // One argument that is a run folder: the run against the scenario it ran (its scenario.json), the usual
        // question after `tessel run --out DIR`; the report's "predicted:" line names the file.
        std::error_code dirEc;
        if (o->measured.empty() && !flags->scenario.empty() && fs::is_directory(flags->scenario, dirEc) &&
            fs::exists(fs::path(flags->scenario) / "trace.json", dirEc)) {
            const fs::path own = fs::path(flags->scenario) / "scenario.json";
            if (!fs::exists(own, dirEc))
                problems.add("MEASURED", "required: \"" + flags->scenario + "\" is a run folder without the scenario.json it ran; "
                                         "give PREDICTED and MEASURED (tessel compare SCENARIO " + flags->scenario + ")");
            o->measured = flags->scenario;
            flags->scenario = own.string();
        }
        if (flags->scenario.empty()) problems.add("PREDICTED", "required: a scenario (file or preset) or a predicted trace .json");
        if (o->measured.empty()) problems.add("MEASURED", "required: a run folder (tessel run --out) or its trace.json");
        if (o->top < 1) problems.add("--top", "must be at least 1");
        std::error_code ec;
        if (!o->output.empty() && o->output != "-" && fs::exists(o->output, ec) && !o->force)
            problems.add("--output", "\"" + o->output + "\" exists; pass --force to overwrite it");
        problems.throwIfAny();

        sim::MeasuredRun run;
        try {
            run = sim::MeasuredRun::load(o->measured);
        } catch (const InputError& e) {
            problems.append(e.problems());
        }

        // The prediction: a predicted trace file, or a scenario simulated here.
        sim::Prediction prediction;
        if (const auto trace = readTraceFile(flags->scenario)) {
            if (flags->anyOverride())
                problems.add("PREDICTED", "\"" + flags->scenario + "\" is a trace: the scenario flags apply to a scenario only");
            try {
                prediction = sim::predictionFromTrace(*trace, flags->scenario);
                if (!o->predictedMemory.empty())
                    sim::setPredictedMemory(prediction, readJson(o->predictedMemory, "--predicted-memory"), o->predictedMemory);
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
        } else {
            if (!o->predictedMemory.empty())
                problems.add("--predicted-memory", "only with a predicted trace; a scenario's memory is predicted here");
            try {
                Scenario s = flags->resolve();
                // `tessel run` records that its executor computes the loss in place (loss_in_place) and keeps no
                // dropout masks (dropout_masks_kept false); a scenario that does not say otherwise is predicted as run.
                const auto& runPlan = run.planJson();
                // Each read as a boolean where the run's plan has it, its default where not; anything else is named.
                auto runFlag = [&](const char* key, bool absent) {
                    if (!runPlan || !runPlan->is_object() || !runPlan->contains(key)) return absent;
                    const nlohmann::json& v = (*runPlan)[key];
                    if (v.is_boolean()) return v.get<bool>();
                    problems.add(run.planSource() + "/" + key, "expected true or false, got " + v.dump());
                    return absent;
                };
                const bool runLossInPlace = runFlag("loss_in_place", false);
                if (!s.plan.framework.lossInPlace && runLossInPlace) s.plan.framework.lossInPlace = true;
                if (!s.plan.framework.dropoutMasksKept && !runFlag("dropout_masks_kept", true))
                    s.plan.framework.dropoutMasksKept = false;
                // The executor frees the logits as the head's backward ends since 2026-12-06 (its runs record
                // logits_held_through_backward false); one recorded before, without the key, kept them to the end
                // of the micro-batch's backward.
                if (!s.plan.framework.logitsHeldThroughBackward && runLossInPlace)
                    s.plan.framework.logitsHeldThroughBackward = runFlag("logits_held_through_backward", true);
                const sim::PlanSimulation simulation = sim::simulatePlan(s.model, s.cluster, s.plan);
                prediction = sim::predictionFromSimulation(simulation, flags->scenario);
                prediction.modelJson = modelToJson(s.model);
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
        }
        problems.throwIfAny();

        // A run of another plan (or model) cannot be compared action by action: name every field that differs.
        std::string planNote;
        if (!run.planJson())
            planNote = "plan: the run names no plan (no scenario.json beside its trace), so it was not checked";
        else if (!prediction.planJson)
            planNote = "plan: the predicted trace names no plan (otherData.plan), so it was not checked";
        else {
            // Who ran it is not the plan: `tessel run` records loss_in_place, dropout_masks_kept and
            // logits_held_through_backward for its executor (applied above to
            // a scenario's prediction; a predicted trace carries its memory separately).
            // Both read back through the plan reader, so a key the run's tessel did not write yet (zero_replicas)
            // counts as its default, as that tessel ran it.
            auto normalized = [](const nlohmann::json& plan) {
                ProblemList parseProblems;
                const Plan parsed = parsePlan(plan, "/plan", parseProblems);
                return parseProblems.empty() ? planToJson(parsed) : plan;
            };
            nlohmann::json predictedPlan = normalized(*prediction.planJson), measuredPlan = normalized(*run.planJson());
            for (const char* executorKey : {"loss_in_place", "dropout_masks_kept", "logits_held_through_backward"}) {
                predictedPlan.erase(executorKey);
                measuredPlan.erase(executorKey);
            }
            problems.append(sim::jsonDifferences(predictedPlan, measuredPlan, run.planSource(), "the prediction"));
            planNote = "plan: the same as the run's (" + run.planSource() + ")";
        }
        if (run.modelJson() && prediction.modelJson) {
            // What the model is called and where its figures come from does not change what runs.
            nlohmann::json predictedModel = *prediction.modelJson, measuredModel = *run.modelJson();
            for (const char* key : {"name", "description", "sources"}) {
                predictedModel.erase(key);
                measuredModel.erase(key);
            }
            problems.append(sim::jsonDifferences(predictedModel, measuredModel, run.modelSource(), "the prediction"));
        }
        problems.throwIfAny();

        const sim::RunComparison c = sim::compareRun(prediction, run);
        const size_t top = static_cast<size_t>(o->top);
        // CPU ranks beyond the host's hardware threads share cores: their times are the sharing's, not the plan's.
        nlohmann::json host;
        if (const RunHost h = readRunHost(o->measured); h.threads > 0 && h.ranks > 0) {
            host = {{"ranks", h.ranks}, {"host_threads", h.threads}, {"oversubscribed", h.ranks > h.threads}};
            if (h.ranks > h.threads)
                planNote += "\nhost: the run put " + std::to_string(h.ranks) + " CPU ranks on " + std::to_string(h.threads) +
                            " hardware threads; they shared cores, so its measured times include that sharing (run at "
                            "most " + std::to_string(h.threads) + " ranks to measure the plan itself)";
        }
        std::string text;
        if (o->json) {
            nlohmann::json j = sim::comparisonToJson(c, top);
            if (!host.is_null()) j["host"] = host;
            text = j.dump(2) + "\n";
        } else {
            text = renderTables(c, top, planNote);
        }
        if (o->output.empty() || o->output == "-") {
            std::cout << text;
        } else {
            writeOutputFile(o->output, text, o->force, "--output");
            std::cerr << "tessel compare: wrote " << o->output << "\n";
        }
        return 0;
    };
}

} // namespace tessel::cli
