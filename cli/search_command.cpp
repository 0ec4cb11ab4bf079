// `tessel search`: exhaustive plan search for a model on N GPUs, printed as a ranked table, JSON or CSV.
#include "commands.hpp"
#include "scenario_flags.hpp"
#include "table.hpp"

#include "tessel/cost/scenario.hpp"
#include "tessel/sim/report.hpp"
#include "tessel/sim/error_band.hpp"
#include "tessel/sim/search.hpp"

#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

namespace tessel::cli {

namespace {
struct SearchFlags {
    std::string scenario, model, cluster;
    std::optional<int> gpus, maxGpus, nodes, maxVpp, gpusPerNode;
    std::optional<double> powerLimit;
    std::optional<int64_t> seqLen;
    std::optional<std::string> globalBatch, tokensPerStep, batchTolerance;
    bool allowIdle = false;
    std::string offload = "auto";
    std::string partialRecompute = "on";
    std::string memoryBand = "off";
    bool evenSplitsOnly = false;
    bool hybridSharding = false;
    int top = 10;
    int threads = 0;
    std::vector<std::string> fix;
    std::string objective = "time";
    std::optional<std::string> precision, flashAttention, framework, frameworkVersion, halfDtype, crossEntropy, recomputeModules;
    bool json = false, csv = false, noProgress = false;
};

std::atomic<bool> gInterrupted{false};
extern "C" void onInterrupt(int) { gInterrupted = true; }


std::string withCommas(uint64_t n) {
    std::string s = std::to_string(n);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
    return s;
}


// "2520" or "2400:2600" -> [lo, hi]; problems at --global-batch.
std::optional<std::pair<int, int>> parseBatchRange(const std::string& text, ProblemList& problems) {
    const auto colon = text.find(':');
    auto number = [&](const std::string& part) -> std::optional<int> {
        if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9) return std::nullopt;
        return std::stoi(part);
    };
    const auto lo = number(text.substr(0, colon));
    const auto hi = colon == std::string::npos ? lo : number(text.substr(colon + 1));
    if (!lo || !hi || *lo < 1 || *hi < *lo) {
        problems.add("--global-batch", "must be a batch N or a range LO:HI with 1 <= LO <= HI, got \"" + text + "\"");
        return std::nullopt;
    }
    return std::make_pair(*lo, *hi);
}

// "5.2M", "4194304", "4M" (K = 1e3, M = 1e6, G or B = 1e9) -> tokens; problems at `where`.
std::optional<double> parseCount(const std::string& text, const std::string& where, ProblemList& problems) {
    double scale = 1.0;
    std::string digits = text;
    if (!digits.empty()) {
        const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
        if (last == 'K' || last == 'M' || last == 'G' || last == 'B') {
            scale = last == 'K' ? 1e3 : last == 'M' ? 1e6 : 1e9;
            digits.pop_back();
        }
    }
    try {
        size_t used = 0;
        const double v = std::stod(digits, &used);
        if (used == digits.size() && v > 0.0 && std::isfinite(v)) return v * scale;
    } catch (const std::exception&) {
    }
    problems.add(where, "must be a positive count such as 4194304, 4M or 5.2M, got \"" + text + "\"");
    return std::nullopt;
}

nlohmann::json resultToJson(const Scenario& s, const sim::SearchSpace& space, const sim::SearchOptions& options,
                            const sim::SearchResult& r) {
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < r.top.size(); ++i) {
        const auto& t = r.top[i];
        top.push_back({{"rank", i + 1},
                       {"plan", planToJson(t.plan)},
                       {"peak_bytes", t.peakBytes},
                       {"peak_stage", t.peakStage},
                       {"headroom_bytes", t.headroomBytes},
                       {"step_seconds", t.metrics.stepSeconds},
                       {"lower_bound_seconds", t.lowerBoundSeconds},
                       {"bubble_fraction", t.metrics.bubbleFraction},
                       {"mfu", t.metrics.mfu},
                       {"hfu", t.metrics.hfu},
                       {"tokens_per_second", t.metrics.tokensPerSecond},
                       {"tokens_per_dollar", t.tokensPerDollar},
                       {"bottleneck_stage", t.metrics.bottleneckStage},
                       {"breakdown", sim::breakdownToJson(t.metrics.breakdown)},
                       {"why", t.why},
                       {"error_band", {{"kind", t.errorBandKind}, {"median_abs_error", t.errorBand}}},
                       {"tie_with_best", t.tiedWithBest},
                       {"memory_at_risk", t.memoryAtRisk},
                       {"gpus", t.plan.worldSize()},
                       {"idle_gpus", t.idleGpus},
                       {"global_batch", t.plan.globalBatch},
                       {"offload", offloadString(t.plan)},
                       {"price_per_used_gpu_hour", t.pricePerUsedGpuHour},
                       {"frameworks", t.frameworks}});
    }
    return {{"model", s.model.name},
            {"cluster", s.cluster.name},
            {"gpus", space.gpus},
            {"global_batch", space.globalBatch},
            {"max_global_batch", std::max(space.globalBatch, space.maxGlobalBatch)},
            {"allow_idle", space.allowIdle},
            {"framework", space.runnableBy ? sim::toString(*space.runnableBy) : std::string("any")},
            {"gpu_counts_searched", r.gpuCountsSearched},
            {"objective", sim::toString(options.objective)},
            {"considered", r.considered},
            {"feasible", r.feasible},
            {"simulated", r.simulated},
            {"rejected", r.rejected},
            {"cancelled", r.cancelled},
            {"threads", r.threads},
            {"wall_seconds", r.wallSeconds},
            {"pruning_seconds", r.pruningSeconds},
            {"simulation_seconds", r.simulationSeconds},
            {"top", top}};
}

std::string csvQuote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

void printCsv(const sim::SearchResult& r, std::ostream& out) {
    out << "rank,tp,pp,dp,cp,ep,vpp,micro_batch,zero_stage,recompute,sequence_parallel,schedule,rank_order,"
           "peak_bytes,step_seconds,bubble_fraction,mfu,tokens_per_second,tokens_per_dollar,gpus,idle_gpus,global_batch,"
           "offload,frameworks,zero_replicas,recompute_layers,etp,cp_comm_type,memory_at_risk,recompute_modules,why\n";
    char buf[512];
    for (size_t i = 0; i < r.top.size(); ++i) {
        const auto& t = r.top[i];
        const Plan& p = t.plan;
        std::snprintf(buf, sizeof buf, "%zu,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s,%.0f,%.9g,%.6g,%.6g,%.9g,%.9g,", i + 1, p.tp,
                      p.pp, p.dp, p.cp, p.ep, p.vpp, p.microBatch, p.zeroStage, toString(p.recompute).c_str(),
                      p.sequenceParallel ? "on" : "off", toString(p.schedule).c_str(), p.rankOrderString().c_str(),
                      t.peakBytes, t.metrics.stepSeconds, t.metrics.bubbleFraction, t.metrics.mfu,
                      t.metrics.tokensPerSecond, t.tokensPerDollar);
        std::string frameworks;
        for (const auto& fw : t.frameworks) frameworks += (frameworks.empty() ? "" : "+") + fw;
        out << buf << p.worldSize() << "," << t.idleGpus << "," << p.globalBatch << "," << offloadString(p) << ","
            << (frameworks.empty() ? "none" : frameworks) << "," << p.zeroReplicas << "," << p.recomputeLayers << ","
            << p.expertTp() << "," << toString(p.cpComm) << "," << (t.memoryAtRisk ? "true" : "false") << ",";
        // What selective recompute reruns, its names joined by '+' ("none" for nothing); empty for other recompute.
        if (p.recompute == Recompute::Selective) out << (p.recomputeModules ? recomputeModulesString(p.recomputeModules, "+") : "none");
        out << "," << csvQuote(t.why) << "\n";
    }
}

void printTable(const Scenario& s, const sim::SearchSpace& space, const sim::SearchOptions& options,
                const sim::SearchResult& r, const std::string& nodeNote, std::ostream& out) {
    const int nodes = space.gpus / std::max(1, s.cluster.gpusPerNode);
    const bool batchRange = space.maxGlobalBatch > space.globalBatch;
    out << "tessel search: " << s.model.name << " on " << (space.allowIdle ? "up to " : "") << space.gpus << " x "
        << s.cluster.gpu.name << " (" << s.cluster.name << ", " << std::max(1, nodes) << " node" << (nodes == 1 ? "" : "s")
        << "), global batch " << space.globalBatch;
    if (batchRange) out << ":" << space.maxGlobalBatch;
    out << ", precision " << space.precision;
    if (space.bf16LayersAtStart > 0 || space.bf16LayersAtEnd > 0)
        out << " (the first " << space.bf16LayersAtStart << " and last " << space.bf16LayersAtEnd << " layers in BF16)";
    out << ", objective " << sim::toString(options.objective) << ", framework "
        << (space.runnableBy ? sim::toString(*space.runnableBy) + " (only plans it runs)" : std::string("any")) << "\n";
    if (!nodeNote.empty()) out << "note: " << nodeNote << "\n";
    out << "\n";
    const bool dollars = options.objective == sim::Objective::TokensPerDollar;
    const bool priced = space.allowIdle && s.cluster.pricePerGpuHour > 0.0;
    bool offloads = false;
    for (const auto& t : r.top) offloads = offloads || t.plan.offloads();
    std::vector<std::string> header{"rank"};
    if (space.allowIdle) {
        header.push_back("gpus");
        header.push_back("idle");
    }
    if (batchRange) header.push_back("batch");
    for (const char* h : {"tp", "pp", "dp", "cp", "ep", "vpp", "mb", "zero", "recompute", "sp", "schedule", "rank order"})
        header.push_back(h);
    if (offloads) header.push_back("offload");
    for (const char* h : {"peak GiB", "step s", "±%", "bubble %", "MFU %", "tokens/s"}) header.push_back(h);
    if (dollars) header.push_back("tokens/$");
    if (priced) header.push_back("$/used GPU-h");
    if (!space.runnableBy) header.push_back("runs on");
    size_t whyWidth = 3;
    for (const auto& t : r.top) whyWidth = std::max(whyWidth, t.why.size());
    header.push_back("why" + std::string(whyWidth - 3, ' '));
    Table table(header);
    for (size_t i = 0; i < r.top.size(); ++i) {
        const auto& t = r.top[i];
        const Plan& p = t.plan;
        const std::string split = pipelineSplitText(s.model, p);
        std::vector<std::string> row{"#" + std::to_string(i + 1) + (t.tiedWithBest ? "=" : "")};
        if (space.allowIdle) {
            row.push_back(std::to_string(p.worldSize()));
            row.push_back(std::to_string(t.idleGpus));
        }
        if (batchRange) row.push_back(std::to_string(p.globalBatch));
        for (const std::string& cell :
             {std::to_string(p.tp), std::to_string(p.pp) + (split.empty() ? "" : " (" + split + ")"), std::to_string(p.dp), std::to_string(p.cp) + (p.cp > 1 && p.cpComm != CpComm::P2p ? " (" + toString(p.cpComm) + ")" : std::string()),
              std::to_string(p.ep) + (p.expertFolded() ? " (etp " + std::to_string(p.etp) + ")" : std::string()),
              std::to_string(p.vpp), std::to_string(p.microBatch),
              std::to_string(p.zeroStage) + (p.zeroReplicas > 1 ? "x" + std::to_string(p.zeroReplicas) : std::string()),
              recomputeString(p),
              std::string(p.sequenceParallel ? "on" : "off"), toString(p.schedule), p.rankOrderString()})
            row.push_back(cell);
        if (offloads) row.push_back(offloadString(p));
        for (const std::string& cell :
             {gib(t.peakBytes, 1) + (t.memoryAtRisk ? "!" : ""), fixed(t.metrics.stepSeconds, 3), t.errorBandKind.empty() ? std::string("-") : fixed(100.0 * t.errorBand, 1),
              fixed(t.metrics.bubbleFraction * 100.0, 1), fixed(t.metrics.mfu * 100.0, 1), fixed(t.metrics.tokensPerSecond, 0)})
            row.push_back(cell);
        if (dollars) row.push_back(fixed(t.tokensPerDollar, 0));
        if (priced) row.push_back(fixed(t.pricePerUsedGpuHour, 2));
        if (!space.runnableBy) {
            std::string fw;
            for (const auto& name : t.frameworks) fw += (fw.empty() ? "" : ",") + name;
            row.push_back(fw.empty() ? "-" : fw);
        }
        // Left-align the sentence: pad it to the column width (the table right-aligns cells).
        row.push_back(t.why + std::string(whyWidth - t.why.size(), ' '));
        table.addRow(row);
    }
    if (r.top.empty()) {
        out << "no feasible plan: every plan of the space is invalid, runs out of memory"
            << (space.runnableBy ? " or cannot run on " + sim::toString(*space.runnableBy) : std::string()) << "\n";
        // What usually rescues such a request (docs/search.md): fewer GPUs than asked, a flexible batch, offload.
        std::vector<std::string> hints;
        if (!space.allowIdle) hints.push_back("--allow-idle (or --max-gpus N): let plans leave whole nodes idle");
        if (space.maxGlobalBatch <= space.globalBatch)
            hints.push_back("--global-batch LO:HI or --tokens-per-step T --batch-tolerance P%: a flexible batch");
        if (!space.offload) hints.push_back("--offload auto: offload to host memory where plans do not fit");
        else if (!s.cluster.host.present()) hints.push_back("a cluster file with a \"host\" block, so plans can offload");
        if (space.runnableBy) hints.push_back("--framework any: plans of every framework");
        for (const auto& h : hints) out << "  try " << h << "\n";
    } else {
        out << table.render();
    }
    if (!r.top.empty() && space.allowIdle)
        out << "searched " << r.gpuCountsSearched << " GPU count" << (r.gpuCountsSearched == 1 ? "" : "s")
            << " (whole nodes, largest first, until no plan on fewer GPUs could reach the ranking)\n";
    if (!r.top.empty() && !r.top.front().errorBandKind.empty()) {
        bool oneKind = true;
        for (const auto& p : r.top) oneKind = oneKind && p.errorBandKind == r.top.front().errorBandKind;
        out << "±%: median |step error| of tessel on "
            << (oneKind ? sim::bandSourceText(r.top.front().errorBandKind) : std::string("published runs of each plan's kind"))
            << " (" << (oneKind ? sim::bandCommand(r.top.front().errorBandKind) : std::string("tessel validate"))
            << "); #N= marks a plan inside #1's band"
            << (oneKind ? "" : " or its own, the wider") << ", which the model cannot tell apart\n";
    }
    // A row no framework runs (the default search admits every plan, docs/search.md): say what the dash means and
    // how to keep to plans one runs.
    bool unrunnable = false;
    for (const auto& t : r.top) unrunnable = unrunnable || (!space.runnableBy && t.frameworks.empty());
    if (unrunnable)
        out << "runs on -: no framework's rules admit the plan as it stands (tessel export --format megatron|deepspeed|"
               "torchtitan says why); --framework megatron|deepspeed|torchtitan searches only plans that framework runs\n";
    bool atRisk = false;
    for (const auto& t : r.top) atRisk = atRisk || t.memoryAtRisk;
    if (atRisk)
        out << "peak GiB!: fits, but published runs of the plan's framework family were off by more than its headroom "
               "at the median (tessel validate): it may not fit\n";
    out << "\n" << (r.cancelled ? "cancelled after considering " : "considered ") << withCommas(r.considered)
        << " plans, feasible " << withCommas(r.feasible) << ", simulated " << withCommas(r.simulated);
    uint64_t rejected = 0;
    for (const auto& [reason, n] : r.rejected) rejected += n;
    out << ", rejected " << withCommas(rejected) << (r.rejected.empty() ? "" : ":") << "\n";
    std::vector<std::pair<std::string, uint64_t>> reasons(r.rejected.begin(), r.rejected.end());
    std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [reason, n] : reasons) out << "  " << reason << ": " << withCommas(n) << "\n";
    out << "wall " << fixed(r.wallSeconds, 2) << " s (pruning " << fixed(r.pruningSeconds, 2) << " s, simulation "
        << fixed(r.simulationSeconds, 2) << " s) on " << r.threads << " thread" << (r.threads == 1 ? "" : "s") << "\n";
}

// Progress on stderr once the search has run for a second: a \r-updated line on a terminal, otherwise one
// line at most every 5 seconds (so logs stay short). Cleared or ended with a newline when done.
class ProgressPrinter {
public:
    explicit ProgressPrinter(bool enabled) : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {}
    void update(double fraction) {
        if (!enabled_) return;
        const auto now = Clock::now();
        if (now - start_ < std::chrono::seconds(1)) return;
        if (!tty_ && printed_ && now - last_ < std::chrono::seconds(5) && fraction < 1.0) return;
        last_ = now;
        char buf[96];
        std::snprintf(buf, sizeof buf, "tessel search: %3.0f%% (%.1f s)", fraction * 100.0,
                      std::chrono::duration<double>(now - start_).count());
        if (tty_) std::cerr << "\r" << buf << std::flush;
        else std::cerr << buf << "\n";
        printed_ = true;
    }
    void finish() {
        if (enabled_ && tty_ && printed_) std::cerr << "\r" << std::string(40, ' ') << "\r" << std::flush;
    }

private:
    using Clock = std::chrono::steady_clock;
    bool enabled_, tty_, printed_ = false;
    Clock::time_point start_, last_{};
};

int runSearch(const SearchFlags& f) {
    ProblemList problems;
    Scenario s;
    try {
        s = f.scenario.empty() ? defaultScenario() : loadScenarioFile(resolveScenarioPath(f.scenario, "SCENARIO"));
    } catch (const InputError& e) {
        problems.append(e.problems());
    }
    if (!f.model.empty()) {
        try {
            s.model = loadModelRef(f.model, "--model");
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
    }
    if (!f.cluster.empty()) {
        try {
            s.cluster = loadClusterRef(f.cluster, "--cluster");
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
    }
    overrideSeqLen(s.model, f.seqLen, problems);
    const int presetGpusPerNode = s.cluster.gpusPerNode;
    if (f.gpusPerNode) {
        // GPUs of a node the plans use: a share of a rack-scale NVLink domain (64 of a GB200 NVL72's 72), or fewer
        // GPUs of each server; the node's links stay the cluster's.
        if (*f.gpusPerNode < 1) problems.add("--gpus-per-node", "must be at least 1, got " + std::to_string(*f.gpusPerNode));
        else s.cluster.gpusPerNode = *f.gpusPerNode;
        // Without --gpus or --nodes the world is the cluster's nodes of this many GPUs.
        if (!f.gpus && !f.maxGpus && !f.nodes)
            checkClusterGpus(s.cluster.nodes, s.cluster.gpusPerNode, "--gpus-per-node", problems);
    }
    if (f.nodes) {
        // --nodes N is --gpus N x gpus_per_node, as predict's --nodes sizes the cluster.
        if (*f.nodes < 1) problems.add("--nodes", "must be at least 1, got " + std::to_string(*f.nodes));
        else if (f.gpus || f.maxGpus) problems.add("--nodes", "give either --nodes or --gpus / --max-gpus, not both");
        else {
            checkClusterGpus(*f.nodes, s.cluster.gpusPerNode, "--nodes", problems);
            s.cluster.nodes = *f.nodes;
        }
    }
    overridePowerLimit(s.cluster, f.powerLimit, problems);
    problems.throwIfAny();

    sim::SearchSpace space;
    sim::takeScenarioPlan(space, s.plan);
    space.gpus = f.maxGpus ? *f.maxGpus : f.gpus.value_or(s.cluster.totalGpus());
    if (f.maxGpus && f.gpus && *f.gpus != *f.maxGpus)
        problems.add("--max-gpus", "--gpus " + std::to_string(*f.gpus) + " and --max-gpus " + std::to_string(*f.maxGpus) +
                                       " disagree; give one (--max-gpus N is --gpus N --allow-idle)");
    space.allowIdle = f.allowIdle || f.maxGpus.has_value();
    if (f.globalBatch && f.tokensPerStep)
        problems.add("--tokens-per-step", "give either --global-batch or --tokens-per-step");
    if (f.globalBatch) {
        if (const auto range = parseBatchRange(*f.globalBatch, problems)) {
            space.globalBatch = range->first;
            space.maxGlobalBatch = range->second;
        }
    } else if (f.tokensPerStep) {
        // A tokens-per-step target with a tolerance: every whole batch of sequences within it.
        const auto tokens = parseCount(*f.tokensPerStep, "--tokens-per-step", problems);
        double tolerance = 0.0;
        if (f.batchTolerance) {
            std::string t = *f.batchTolerance;
            if (!t.empty() && t.back() == '%') t.pop_back();
            try {
                size_t used = 0;
                tolerance = std::stod(t, &used) / 100.0;
                if (used != t.size() || !(tolerance >= 0.0) || tolerance >= 1.0) throw std::invalid_argument(t);
            } catch (const std::exception&) {
                problems.add("--batch-tolerance", "must be a percentage in [0, 100), e.g. 5%, got \"" + *f.batchTolerance + "\"");
            }
        }
        if (tokens) {
            const double seq = static_cast<double>(s.model.seqLen);
            const double lo = std::ceil(*tokens * (1.0 - tolerance) / seq - 1e-9);
            const double hi = std::floor(*tokens * (1.0 + tolerance) / seq + 1e-9);
            if (hi < std::max(lo, 1.0) || hi > 1e9)
                problems.add("--tokens-per-step", "no whole batch of " + std::to_string(s.model.seqLen) +
                                                      "-token sequences lies within " + *f.tokensPerStep + " +- " +
                                                      std::to_string(tolerance * 100.0) + "%; widen --batch-tolerance");
            else {
                space.globalBatch = static_cast<int>(std::max(lo, 1.0));
                space.maxGlobalBatch = static_cast<int>(hi);
            }
        }
    } else if (f.batchTolerance) {
        problems.add("--batch-tolerance", "applies to --tokens-per-step");
    }
    if (f.offload == "off") space.offload = false;
    else if (f.offload != "auto") problems.add("--offload", "must be auto or off, got \"" + f.offload + "\"");
    if (f.partialRecompute == "off") space.partialRecompute = false;
    else if (f.partialRecompute != "on")
        problems.add("--partial-recompute", "must be on or off, got \"" + f.partialRecompute + "\"");
    if (f.memoryBand == "on") space.memoryBand = true;
    else if (f.memoryBand != "off") problems.add("--memory-band", "must be on or off, got \"" + f.memoryBand + "\"");
    if (f.precision) space.precision = *f.precision;
    if (f.framework) {
        // One flag, two effects (docs/frameworks.md): the framework's overlap defaults, and only plans it can run
        // (tessel export's rules). "any" (and "generic") restrict nothing; each row then lists who runs it.
        const auto& names = frameworkNames();
        if (*f.framework != "any" && std::find(names.begin(), names.end(), *f.framework) == names.end()) {
            std::string list;
            for (const auto& n : names) list += (list.empty() ? "" : "|") + n;
            problems.add("--framework", "must be one of " + list + "|any, got \"" + *f.framework + "\"");
        } else {
            space.framework = FrameworkSettings{};
            space.framework.name = *f.framework == "any" ? "generic" : *f.framework;
            space.framework.halfDtype = s.plan.framework.halfDtype; // the compute type is the run's, not the framework's
            // A scenario recipe that is its framework's default (parsePlan) follows the flag, as predict's does: under
            // torchtitan or FSDP the one their sharded plans run (fsdp; a replicated search asks --precision amp or
            // fp32), not Megatron-LM's bf16 weights beside an fp32 master.
            if (!f.precision && s.plan.precision == defaultPrecisionOf(s.plan)) {
                Plan sharded = s.plan;
                sharded.framework = space.framework;
                sharded.zeroStage = 3;
                sharded.dp = std::max(2, sharded.dp);
                sharded.zeroReplicas = 1;
                space.precision = defaultPrecisionOf(sharded);
            }
            space.runnableBy = sim::exportFormatOf(*f.framework);
        }
    }
    if (f.frameworkVersion) space.framework.version = *f.frameworkVersion;
    overrideCrossEntropy(space.framework, f.crossEntropy, problems);
    // What selective recompute reruns: the flag's, or the scenario's own; checked once against the model and the
    // framework here, where every selective plan of the space would otherwise be refused for it.
    // Unset (and the scenario's set the default): the ladder of Megatron-Bridge's sets where the model has their parts.
    if (f.recomputeModules) {
        if (const auto bits = parseRecomputeModules(*f.recomputeModules, problems)) space.recomputeModules = *bits;
    }
    if (space.recomputeModules && *space.recomputeModules != recompute_module::Default) {
        Plan probe = s.plan;
        probe.recompute = Recompute::Selective;
        probe.recomputeModules = *space.recomputeModules;
        probe.framework = space.framework;
        for (const auto& [key, message] : recomputeModuleProblems(s.model, probe))
            problems.add(f.recomputeModules ? "--recompute-modules" : "/plan/" + key, message);
    }
    if (f.halfDtype) {
        if (*f.halfDtype == "bf16" || *f.halfDtype == "fp16") space.framework.halfDtype = *f.halfDtype;
        else problems.add("--half-dtype", "must be bf16 or fp16, got \"" + *f.halfDtype + "\"");
    }
    if (f.maxVpp) space.maxVpp = *f.maxVpp;
    space.unevenSplits = !f.evenSplitsOnly;
    space.hybridSharding = f.hybridSharding;
    if (f.flashAttention) {
        if (*f.flashAttention == "on") space.flashAttention = true;
        else if (*f.flashAttention == "off") space.flashAttention = false;
        else problems.add("--flash-attention", "must be on or off, got \"" + *f.flashAttention + "\"");
    }
    sim::applySearchFixes(f.fix, space, problems);
    sim::SearchOptions options;
    options.topK = f.top;
    options.threads = f.threads;
    if (auto o = sim::parseObjective(f.objective)) options.objective = *o;
    else problems.add("--objective", "must be time, memory or tokens_per_dollar, got \"" + f.objective + "\"");
    if (f.json && f.csv) problems.add("--csv", "choose one of --json and --csv");
    // The search names its GPU count --gpus; given as --max-gpus, each such problem is named as the user gave it.
    std::vector<Problem> spaceProblems = sim::searchProblems(s.model, s.cluster, space, options);
    if (f.maxGpus)
        for (Problem& p : spaceProblems)
            if (p.where == "--gpus") p.where = "--max-gpus";
    problems.append(spaceProblems);
    problems.throwIfAny();

    ProgressPrinter printer(!f.noProgress);
    options.progress = [&printer](double fraction) { printer.update(fraction); };
    options.cancel = &gInterrupted;
    auto previous = std::signal(SIGINT, onInterrupt);
    sim::SearchResult result;
    try {
        result = sim::searchPlansUpTo(s.model, s.cluster, space, options);
    } catch (...) {
        std::signal(SIGINT, previous);
        printer.finish();
        throw;
    }
    std::signal(SIGINT, previous);
    printer.finish();
    s.cluster.nodes = std::max(1, space.gpus / std::max(1, s.cluster.gpusPerNode));
    const std::string nodeNote = nodeSizeNote(s.cluster, presetGpusPerNode);

    if (f.json) {
        nlohmann::json j = resultToJson(s, space, options, result);
        if (!nodeNote.empty()) j["cluster_note"] = nodeNote;
        std::cout << j.dump(2) << "\n";
    } else if (f.csv) printCsv(result, std::cout);
    else printTable(s, space, options, result, nodeNote, std::cout);
    return result.cancelled ? 130 : 0;
}
} // namespace

std::function<int()> addSearchCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("search", "Search every parallelism plan for a model on N GPUs and rank the best");
    auto f = std::make_shared<SearchFlags>();
    cmd->add_option("scenario", f->scenario,
                    "Scenario file or preset name giving model, cluster and defaults (default: gpt3-175b-megatron)");
    cmd->add_option("--model", f->model, "Model preset name, model JSON file, HuggingFace config.json or checkpoint folder");
    cmd->add_option("--cluster", f->cluster, "Cluster preset name or cluster JSON file");
    addSeqLenOption(*cmd, f->seqLen);
    cmd->add_option("--gpus", f->gpus, "Number of GPUs (whole nodes of the cluster; default: the scenario's)");
    cmd->add_option("--max-gpus", f->maxGpus, "GPUs available, an upper bound: plans may leave whole nodes idle");
    cmd->add_option("--nodes", f->nodes, "Number of nodes, instead of --gpus (N x the GPUs of each node)");
    cmd->add_option("--gpus-per-node", f->gpusPerNode,
                    "GPUs of each node the plans use (overrides the cluster's; e.g. 64 of a GB200 NVL72 rack's 72)");
    addPowerLimitOption(*cmd, f->powerLimit);
    addCrossEntropyOption(*cmd, f->crossEntropy);
    addRecomputeModulesOption(*cmd, f->recomputeModules);
    cmd->add_flag("--allow-idle", f->allowIdle, "Take --gpus as an upper bound (plans may leave whole nodes idle)");
    cmd->add_option("--global-batch", f->globalBatch,
                    "Global batch in sequences, N or a range LO:HI (each dp takes the largest batch of the range it "
                    "divides; default: the scenario's)");
    cmd->add_option("--tokens-per-step", f->tokensPerStep, "Target tokens per step (e.g. 5.2M) instead of a batch");
    cmd->add_option("--batch-tolerance", f->batchTolerance, "How far the batch may stray from --tokens-per-step (e.g. 5%)");
    cmd->add_option("--offload", f->offload,
                    "auto (default): plans that do not fit may offload optimizer, parameters or activations to host "
                    "memory (clusters with a host block); off: never");
    cmd->add_option("--partial-recompute", f->partialRecompute,
                    "on (default): beside every plan that fits with full recompute, the fewest layers of each chunk "
                    "recomputed that still fit (Megatron-LM's block method); off: every layer or none");
    cmd->add_option("--memory-band", f->memoryBand,
                    "off (default): rank every plan whose predicted peak fits, marking with ! those that may not fit "
                    "(published runs of the framework family had peaks off by more than their headroom); on: leave "
                    "those out, as OOM plans are");
    cmd->add_option("--top", f->top, "How many plans to show (default 10)");
    cmd->add_option("--fix", f->fix,
                    "Pin plan fields, e.g. tp=8,pp=4 (keys: tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage, "
                    "recompute=none|selective|full, schedule=..., sp=on|off, cp_comm_type=p2p|a2a|allgather, rank_order=tp-cp-ep-dp-pp)")
        ->delimiter(',')
        ->allow_extra_args(false); // one KEY=VALUE[,...] per --fix, so a SCENARIO after it stays positional
    cmd->add_option("--objective", f->objective, "Rank by time (default), memory or tokens_per_dollar");
    cmd->add_option("--precision", f->precision, "Precision recipe (default: the scenario's)");
    cmd->add_option("--half-dtype", f->halfDtype,
                    "The 16-bit compute type, bf16|fp16 (fp16 on Volta, which has no bf16; default: the scenario's)");
    cmd->add_option("--flash-attention", f->flashAttention, "Flash attention on|off (default: the scenario's)");
    cmd->add_option("--framework", f->framework,
                    "What runs the plans: its overlap defaults (docs/frameworks.md), and only plans it can run "
                    "(tessel export's rules): generic|megatron|nemo|megascale|deepspeed|fsdp|torchtitan|any "
                    "(any, generic: no restriction, each row lists the frameworks that run it; default: the scenario's)");
    cmd->add_option("--framework-version", f->frameworkVersion, "Framework version: a year, a container (24.05) or the framework's release (core_r0.9.0, DeepSpeed 0.6.0, PyTorch 2.1)");
    cmd->add_option("--max-vpp", f->maxVpp, "Largest virtual pipeline size tried by interleaved_1f1b (default 8)");
    cmd->add_flag("--even-splits-only", f->evenSplitsOnly,
                  "Reject pipeline depths that do not divide the layers (default: give them the balanced split)");
    cmd->add_flag("--hybrid-sharding", f->hybridSharding,
                  "Also try every ZeRO >= 1 plan with its state sharded inside a node and replicated across nodes "
                  "(zero_replicas; FSDP HYBRID_SHARD, Megatron's optimizer instances)");
    cmd->add_option("--threads", f->threads, "Worker threads (default 0 = every core)");
    cmd->add_flag("--json", f->json, "Print one JSON object");
    cmd->add_flag("--csv", f->csv, "Print the ranked plans as CSV");
    cmd->add_flag("--no-progress", f->noProgress, "Never print progress on stderr");
    return [cmd, f]() {
        if (!cmd->parsed()) return -1;
        return runSearch(*f);
    };
}

} // namespace tessel::cli
