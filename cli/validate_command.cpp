// `tessel validate`: predicts published training runs and prints the error per record, per group and overall.
#include "commands.hpp"
#include "table.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/sim/error_band.hpp"
#include "tessel/sim/validation.hpp"

#include "output_file.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

namespace tessel::cli {

namespace {
struct ValidateOptions {
    std::vector<std::string> files;
    bool json = false;
    bool leaveOneGroupOut = false;
    bool fit = false;
    bool assumptions = false;
    bool quiet = false;
    std::string scenariosDir;
    std::string bandsFile;
    bool force = false;
};

std::string percent(const std::optional<double>& v) {
    if (!v) return "-";
    return (*v >= 0 ? "+" : "") + fixed(100.0 * *v, 1) + "%";
}

void printHuman(const sim::ValidationReport& report, const ValidateOptions& o, const std::vector<std::string>& fitted,
                std::ostream& out) {
    if (!o.quiet) {
        Table t({"record", "plan", "measured s", "predicted s", "error", "dominant", "MFU"});
        for (const auto& r : report.results) {
            if (!r.predicted) {
                t.addRow({r.id, r.plan, r.measuredStepSeconds ? fixed(*r.measuredStepSeconds, 3) : "-", "-", "-",
                          "not predicted", "-"});
                continue;
            }
            t.addRow({r.id, r.plan, r.measuredStepSeconds ? fixed(*r.measuredStepSeconds, 3) : "-",
                      fixed(r.predictedStepSeconds, 3), percent(r.stepError), r.terms.dominant(),
                      fixed(100.0 * r.predictedMfu, 1) + "%"});
        }
        out << t.render();
        out << "  error: predicted / measured - 1 (-: tessel predicted the run faster, or its memory smaller, than "
               "measured; tessel compare prints the reverse, measured / predicted - 1)\n";
        for (const auto& r : report.results) {
            if (!r.reason.empty()) out << "  " << r.id << ": " << r.reason << "\n";
            if (r.memoryError)
                out << "  " << r.id << ": peak memory predicted " << gib(r.predictedPeakMemoryBytes) << " GiB, measured "
                    << gib(*r.measuredMemoryBytes) << " GiB (" << percent(r.memoryError) << ")\n";
            if (r.measuredOutOfMemory && r.predicted)
                out << "  " << r.id << ": source says " << (*r.measuredOutOfMemory ? "out of memory" : "fits")
                    << ", predicted " << (r.predictedFits ? "fits" : "out of memory") << "\n";
            if (o.assumptions)
                for (const auto& a : r.assumptions) out << "  " << r.id << ": assumes " << a << "\n";
        }
        out << "\n";
    }
    Table g({"group", "records", "predicted", "median |err|", "max |err|", "mean err", "worst"});
    auto row = [&](const sim::ErrorSummary& s) {
        // A group with no step-time comparison has no error to show, not an error of 0.0%.
        const bool none = s.predicted == 0;
        g.addRow({s.group.empty() ? "all" : s.group, std::to_string(s.records), std::to_string(s.predicted),
                  none ? "-" : fixed(100.0 * s.medianAbsError, 1) + "%", none ? "-" : fixed(100.0 * s.maxAbsError, 1) + "%",
                  none ? "-" : (s.meanSignedError >= 0 ? "+" : "") + fixed(100.0 * s.meanSignedError, 1) + "%",
                  none ? "-" : s.worst});
    };
    for (const auto& s : report.groups) row(s);
    row(report.overall);
    out << (o.leaveOneGroupOut ? "Step time, each group predicted with constants fitted on the other groups\n"
                               : "Step time error per group\n");
    out << g.render();
    const int refused = report.overall.records - [&] {
        int n = 0;
        for (const auto& r : report.results) n += r.predicted ? 1 : 0;
        return n;
    }();
    out << "  " << report.overall.records << " records, " << report.overall.predicted << " with a step-time comparison, "
        << refused << " not predicted\n";
    if (report.overall.memoryCompared > 0)
        out << "  peak memory: " << report.overall.memoryCompared << " records, median |error| "
            << fixed(100.0 * report.overall.memoryMedianAbsError, 1) << "%\n";
    if (report.overall.oomCompared > 0)
        out << "  out-of-memory verdicts: " << report.overall.oomAgreed << " of " << report.overall.oomCompared << " agree\n";
    if (o.leaveOneGroupOut) {
        out << "  refitted per held-out group:\n";
        for (const auto& f : fitted) out << "    " << f << "\n";
    }
}
// One scenario file per predicted record; existing files are kept unless --force (nothing a user wrote is
// overwritten without asking), and every clash is listed before anything is written.
void writeScenarios(const std::vector<sim::LoadedRecord>& records, const std::string& dir, bool force) {
    namespace fs = std::filesystem;
    ProblemList clashes;
    for (const auto& r : records) {
        if (!r.validationCase) continue;
        const fs::path file = fs::path(dir) / (r.id + ".json");
        std::error_code ec;
        if (!force && fs::exists(file, ec)) clashes.add("--scenarios", file.string() + " exists (use --force to replace it)");
    }
    clashes.throwIfAny();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw RuntimeError("cannot create " + dir + ": " + ec.message());
    for (const auto& r : records) {
        if (!r.validationCase) continue;
        nlohmann::json j = scenarioToJson(r.validationCase->scenario);
        std::string description = "Published run " + r.id + " (" + r.pointer + ")";
        for (const auto& a : r.validationCase->assumptions) description += "; assumes " + a;
        j["description"] = description;
        writeOutputFile((fs::path(dir) / (r.id + ".json")).string(), j.dump(2) + "\n", true, "--scenarios");
    }
}
} // namespace

std::function<int()> addValidateCommand(CLI::App& app) {
    auto opts = std::make_shared<ValidateOptions>();
    auto* cmd = app.add_subcommand("validate", "Predict published training runs and report the error per record and group");
    cmd->add_option("files", opts->files, "Files of records in the runs.json schema (default: the shipped data/validation/runs.json)");
    cmd->add_flag("--json", opts->json, "Print one JSON object: results, groups, overall");
    cmd->add_flag("--leave-one-group-out", opts->leaveOneGroupOut,
                  "Predict each group with the constants fitted on all other groups");
    cmd->add_flag("--fit", opts->fit,
                  "Fit the cost model's one constant fitted to published runs (gpu.sustained_tensor_fraction) on "
                  "the records and print it beside the value the shipped clusters carry");
    cmd->add_flag("--assumptions", opts->assumptions, "List what each prediction assumed beyond its record");
    cmd->add_flag("--summary", opts->quiet, "Only the per-group summary");
    cmd->add_option("--scenarios", opts->scenariosDir,
                    "Write each record's scenario to DIR/<id>.json, for `tessel predict`, `trace` and `search`");
    cmd->add_option("--write-bands", opts->bandsFile,
                    "Write the error band of every kind of run (GPU family x framework family) to FILE, as "
                    "data/validation/error_bands.json is made");
    cmd->add_flag("--force", opts->force, "With --scenarios or --write-bands: replace existing files");
    return [cmd, opts]() -> int {
        if (!cmd->parsed()) return -1;
        std::vector<std::string> files = opts->files;
        if (files.empty()) {
            const std::string shipped = sim::defaultValidationFile();
            if (shipped.empty())
                throw InputError("files", "no file given and the shipped data/validation/runs.json was not found");
            files.push_back(shipped);
        }
        std::vector<sim::LoadedRecord> records;
        ProblemList problems;
        for (const auto& f : files) {
            try {
                auto more = sim::loadValidationFile(f);
                records.insert(records.end(), more.begin(), more.end());
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
        }
        problems.throwIfAny();
        if (!opts->scenariosDir.empty()) writeScenarios(records, opts->scenariosDir, opts->force);
        if (opts->fit) {
            const sim::SustainedFit fit = sim::fitSustainedTensorFraction(records);
            if (fit.records == 0)
                throw InputError("--fit", "no record has a step time to compare with (measured or derived) on a GPU "
                                          "that takes gpu.sustained_tensor_fraction (not a measured "
                                          "gpu.sustained_share_by_duty curve), so there is nothing to fit it on");
            std::map<std::string, double> shipped;
            // The same fit on each GPU generation's records alone (one tensor-core peak: A100 40 and 80 GB are one,
            // H100 SXM and H200 another), printed as evidence, not shipped: the shipped value is the one above.
            std::map<double, std::vector<sim::LoadedRecord>> byPeak;
            std::map<double, std::set<std::string>> gpusOf;
            for (const auto& r : records)
                if (r.validationCase) {
                    const auto& cluster = r.validationCase->scenario.cluster;
                    // -1: the cluster's measured sustained_share_by_duty curve replaces the constant.
                    shipped[cluster.name] = cluster.gpu.sustainedShareByDuty.empty() ? cluster.gpu.sustainedTensorFraction : -1.0;
                    const auto peak = cluster.gpu.peakFlopsPerSecond.find(Dtype::Bf16);
                    const double key = peak == cluster.gpu.peakFlopsPerSecond.end() ? 0.0 : peak->second;
                    byPeak[key].push_back(r);
                    gpusOf[key].insert(cluster.gpu.name);
                }
            std::vector<std::pair<std::string, sim::SustainedFit>> perGpu;
            if (byPeak.size() > 1)
                for (const auto& [peak, subset] : byPeak) {
                    const sim::SustainedFit f = sim::fitSustainedTensorFraction(subset);
                    if (f.records == 0) continue;
                    std::string names;
                    for (const auto& n : gpusOf[peak]) names += (names.empty() ? "" : ", ") + n;
                    perGpu.emplace_back(names, f);
                }
            if (opts->json) {
                nlohmann::json per = nlohmann::json::array();
                for (const auto& [names, f] : perGpu)
                    per.push_back({{"gpus", names}, {"sustained_tensor_fraction", f.fraction}, {"records", f.records}});
                nlohmann::json ship = nlohmann::json::object(); // null: a measured curve replaces the constant
                for (const auto& [name, v] : shipped) ship[name] = v < 0.0 ? nlohmann::json(nullptr) : nlohmann::json(v);
                nlohmann::json j{{"sustained_tensor_fraction", fit.fraction}, {"records", fit.records},
                                 {"median_log_error", fit.medianLogError}, {"passes", fit.passes}, {"shipped", ship},
                                 {"per_gpu_generation", per}};
                std::cout << j.dump(2) << "\n";
                return 0;
            }
            std::cout << "gpu.sustained_tensor_fraction fitted on " << fit.records << " records with a step time: "
                      << fixed(fit.fraction, 3) << " (median log error " << fixed(fit.medianLogError, 4) << " after "
                      << fit.passes << " passes)\n";
            for (const auto& [name, v] : shipped)
                std::cout << "  shipped in " << name << ": "
                          << (v < 0.0 ? std::string("none (the measured gpu.sustained_share_by_duty curve replaces it)") : fixed(v, 3))
                          << "\n";
            if (!perGpu.empty()) {
                std::cout << "fitted on each GPU generation's records alone (evidence, not shipped):\n";
                for (const auto& [names, f] : perGpu)
                    std::cout << "  " << fixed(f.fraction, 3) << " on " << f.records << " records: " << names << "\n";
            }
            return 0;
        }
        std::vector<std::string> fitted;
        sim::ValidationReport report;
        if (opts->leaveOneGroupOut) {
            auto logo = sim::leaveOneGroupOut(records);
            report = std::move(logo.report);
            fitted = std::move(logo.fittedConstants);
        } else {
            report = sim::validateRecords(records);
        }
        const sim::ErrorBands bands = sim::computeErrorBands(
            records, report, [&] {
                std::string from;
                for (const auto& f : files) from += (from.empty() ? "" : ", ") + std::filesystem::path(f).filename().string();
                return from + " (" + std::to_string(report.overall.records) + " records)";
            }());
        if (!opts->bandsFile.empty()) writeOutputFile(opts->bandsFile, toJson(bands).dump(2) + "\n", opts->force, "--write-bands");
        if (opts->json) {
            nlohmann::json j = sim::toJson(report);
            j["error_bands"] = toJson(bands);
            j["files"] = files;
            j["leave_one_group_out"] = opts->leaveOneGroupOut;
            j["fitted_constants"] = fitted;
            std::cout << j.dump(2) << "\n";
        } else {
            printHuman(report, *opts, fitted, std::cout);
            Table k({"kind of run", "records", "median |err|", "p90 |err|", "mean err"});
            for (const auto& b : bands.kinds)
                k.addRow({b.kind, std::to_string(b.records), fixed(100.0 * b.medianAbsError, 1) + "%",
                          fixed(100.0 * b.p90AbsError, 1) + "%",
                          (b.meanSignedError >= 0 ? "+" : "") + fixed(100.0 * b.meanSignedError, 1) + "%"});
            std::cout << "\nError band per kind of run (shown beside predictions and used for ties in search)\n"
                      << (bands.kinds.empty() ? "  none: no record here has a step-time comparison\n" : k.render());
        }
        // A run that predicted nothing validated nothing: the report above says why for each record; the exit
        // status says it to a script (2, bad input, as any refused input is).
        const bool anyPredicted = std::any_of(report.results.begin(), report.results.end(),
                                              [](const sim::CaseResult& r) { return r.predicted; });
        if (!report.results.empty() && !anyPredicted) {
            std::cerr << "tessel validate: "
                      << (report.results.size() == 1 ? std::string("the record was not predicted (its reason is in the report)")
                                                     : "none of the " + std::to_string(report.results.size()) +
                                                           " records was predicted (each one's reason is in the report)")
                      << "\n";
            return 2;
        }
        return 0;
    };
}

} // namespace tessel::cli
