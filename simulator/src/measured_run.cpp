// The measured side of predicted vs measured: a run's trace, memory and scenario loaded as a MeasuredRun
// (shared by `tessel compare`, `tessel calibrate` and the GUI's measured overlay).
#include "tessel/sim/compare.hpp"

#include "trace_events.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace tessel::sim {

namespace fs = std::filesystem;
using namespace detail;

namespace {

// The executor's memory category names (executor/src/tensor.cpp) -> the compared categories.
std::optional<std::string> measuredCategory(const std::string& key) {
    for (const auto& c : memoryCategories())
        if (key == c + "_bytes") return c;
    if (key == "buffers_bytes") return std::string("other");
    return std::nullopt;
}

} // namespace

std::string timeCategoryOf(const std::string& kind) {
    if (kind == "forward" || kind == "backward" || kind == "backward_input" || kind == "backward_weight") return "compute";
    if (kind == "optimizer_step") return "optimizer";
    if (kind == "send_activation" || kind == "send_grad") return "pp_send";
    if (kind == "recv_activation" || kind == "recv_grad") return "pp_recv";
    if (kind == "collective") return "collective";
    return "other";
}

const std::vector<std::string>& memoryCategories() {
    static const std::vector<std::string> categories{"weights", "grads", "optimizer", "activations", "other"};
    return categories;
}

// ---------------------------------------------------------------------------------------------------------
// MeasuredRun

MeasuredRun MeasuredRun::fromTrace(const nlohmann::json& trace, const std::string& source) {
    MeasuredRun run;
    run.source_ = source;
    const nlohmann::json* other = otherData(trace);
    const bool stepStated = other && other->contains("step_seconds") && (*other)["step_seconds"].is_number();
    const std::vector<TraceEvent> events = readTraceEvents(trace, source, run.skipped_, stepStated);
    double first = std::numeric_limits<double>::infinity();
    for (const auto& t : events) first = std::min(first, t.event.startSeconds);
    for (const auto& t : events) {
        run.events_.push_back(t.event);
        run.events_.back().startSeconds -= first;
    }
    // Per rank in time order: the order in which occurrences of the same key are numbered.
    std::stable_sort(run.events_.begin(), run.events_.end(), [](const MeasuredEvent& a, const MeasuredEvent& b) {
        return std::tie(a.rank, a.startSeconds) < std::tie(b.rank, b.startSeconds);
    });
    std::vector<double> spans;
    const std::map<int, double> bySteps = run.stepSpanSeconds();
    for (int step : run.comparedSteps()) spans.push_back(bySteps.at(step));
    run.stepSeconds_ = median(spans);
    if (other) {
        if (other->contains("step_seconds") && (*other)["step_seconds"].is_number())
            run.stepSeconds_ = (*other)["step_seconds"].get<double>();
        if (other->contains("plan") && (*other)["plan"].is_object()) {
            run.planJson_ = (*other)["plan"];
            run.planSource_ = source + "#/otherData/plan";
        }
    }
    return run;
}

void MeasuredRun::setMemory(const nlohmann::json& memory, const std::string& source) {
    memory_.clear();
    stagePeakBytes_.clear();
    const nlohmann::json* entries = nullptr;
    std::string pointer;
    if (memory.is_object() && memory.contains("memory") && memory["memory"].is_object() && memory["memory"].contains("stages")) {
        entries = &memory["memory"]["stages"];
        pointer = "/memory/stages";
    } else if (memory.is_object() && memory.contains("stages")) {
        entries = &memory["stages"];
        pointer = "/stages";
    } else if (memory.is_object() && memory.contains("ranks")) {
        entries = &memory["ranks"];
        pointer = "/ranks";
    }
    if (!entries || !entries->is_array())
        throw InputError(source + "#" + pointer,
                         "expected {\"ranks\": [...]} (a run's memory.json), {\"stages\": [...]} or {\"memory\": {\"stages\": [...]}}");
    ProblemList problems;
    for (size_t i = 0; i < entries->size(); ++i) {
        const auto& e = (*entries)[i];
        const std::string where = source + "#" + pointer + "/" + std::to_string(i);
        if (!e.is_object()) {
            problems.add(where, "expected an object");
            continue;
        }
        MeasuredMemory m;
        m.rank = intOr(e, "rank", -1, where);
        m.stage = intOr(e, "stage", static_cast<int>(i), where);
        std::optional<double> total;
        for (const char* key : {"peak_total_bytes", "peak_bytes", "measured_bytes", "total_bytes"})
            if (e.contains(key) && e[key].is_number()) {
                total = e[key].get<double>();
                break;
            }
        if (!total) {
            problems.add(where, "needs one of peak_total_bytes, peak_bytes, measured_bytes, total_bytes (a number)");
            continue;
        }
        m.peakBytes = *total;
        if (e.contains("process_peak_resident_bytes") && e["process_peak_resident_bytes"].is_number())
            m.processPeakBytes = e["process_peak_resident_bytes"].get<double>();
        // Per category: what each held when the total peaked (at_peak_total_bytes), which is what the model's
        // categories add up to; else each category's own peak (peak_bytes, older runs; categories that peak at
        // other moments, such as buffers in the optimizer step, then read high); else flat "*_bytes" keys.
        if (e.contains("at_peak_total_bytes") && !e["at_peak_total_bytes"].is_object()) {
            problems.add(where + "/at_peak_total_bytes", "expected an object of per-category bytes");
            continue;
        }
        const char* nested = e.contains("at_peak_total_bytes")                       ? "at_peak_total_bytes"
                             : e.contains("peak_bytes") && e["peak_bytes"].is_object() ? "peak_bytes"
                                                                                      : nullptr;
        m.categoriesAtTotalPeak = e.contains("at_peak_total_bytes");
        const nlohmann::json& parts = nested ? e[nested] : e;
        bool partsOk = true;
        for (auto it = parts.begin(); it != parts.end(); ++it) {
            const auto cat = measuredCategory(it.key());
            if (!cat) continue;
            if (!it->is_number()) {
                problems.add(where + (nested ? "/" + std::string(nested) : std::string()) + "/" + it.key(), "expected a number");
                partsOk = false;
                continue;
            }
            m.categoryPeakBytes[*cat] += it->get<double>();
        }
        if (!partsOk) continue;
        // Several ranks of one stage: the stage needs as much as its hungriest rank.
        auto [it, inserted] = stagePeakBytes_.emplace(m.stage, m.peakBytes);
        if (!inserted) it->second = std::max(it->second, m.peakBytes);
        memory_.push_back(std::move(m));
    }
    problems.throwIfAny();
}

void MeasuredRun::setScenario(const nlohmann::json& scenario, const std::string& source) {
    if (!scenario.is_object() || !scenario.contains("plan") || !scenario["plan"].is_object())
        throw InputError(source + "#/plan", "expected a scenario with a \"plan\" object (as `tessel run` writes scenario.json)");
    planJson_ = scenario["plan"];
    planSource_ = source + "#/plan";
    if (scenario.contains("model") && scenario["model"].is_object()) {
        modelJson_ = scenario["model"];
        modelSource_ = source + "#/model";
    }
}

MeasuredRun MeasuredRun::loadFiles(const fs::path& tracePath, const fs::path& memoryPath) {
    MeasuredRun run = fromTrace(readJsonFile(tracePath), tracePath.string());
    if (!memoryPath.empty()) run.setMemory(readJsonFile(memoryPath), memoryPath.string());
    return run;
}

MeasuredRun MeasuredRun::load(const fs::path& runOrTrace) {
    std::error_code ec;
    fs::path trace = runOrTrace;
    if (fs::is_directory(runOrTrace, ec)) {
        trace = runOrTrace / "trace.json";
        if (!fs::is_regular_file(trace, ec))
            throw InputError(runOrTrace.string(), "no trace.json in this folder (a `tessel run --out` folder has one)");
    } else if (!fs::is_regular_file(runOrTrace, ec)) {
        throw InputError(runOrTrace.string(), "no such run folder or trace file");
    }
    const fs::path dir = trace.parent_path().empty() ? fs::path(".") : trace.parent_path();
    const fs::path memory = dir / "memory.json";
    const fs::path scenario = dir / "scenario.json";
    const bool hasMemory = fs::is_regular_file(memory, ec) && !fs::equivalent(memory, trace, ec);
    MeasuredRun run = loadFiles(trace, hasMemory ? memory : fs::path());
    if (fs::is_regular_file(scenario, ec) && !fs::equivalent(scenario, trace, ec))
        run.setScenario(readJsonFile(scenario), scenario.string());
    return run;
}

std::vector<int> MeasuredRun::steps() const {
    std::set<int> steps;
    for (const auto& e : events_) steps.insert(e.step);
    return {steps.begin(), steps.end()};
}

std::vector<int> MeasuredRun::comparedSteps() const {
    std::vector<int> s = steps();
    if (s.size() > 1) s.erase(s.begin());
    return s;
}

std::map<int, double> MeasuredRun::stepSpanSeconds() const {
    std::map<int, std::pair<double, double>> spans;   // step -> (first start, last end)
    for (const auto& e : events_) {
        const double end = e.startSeconds + e.durationSeconds;
        auto [it, inserted] = spans.emplace(e.step, std::make_pair(e.startSeconds, end));
        if (!inserted) {
            it->second.first = std::min(it->second.first, e.startSeconds);
            it->second.second = std::max(it->second.second, end);
        }
    }
    std::map<int, double> out;
    for (const auto& [step, span] : spans) out[step] = span.second - span.first;
    return out;
}

} // namespace tessel::sim
