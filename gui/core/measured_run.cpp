// A measured run (trace + memory) matched action by action against the prediction.
#include "core/measured_run.hpp"

#include <QFile>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace tessel::gui {

namespace {
std::optional<sim::ActionKind> computeKindOf(const std::string& name) {
    if (name == "forward") return sim::ActionKind::Forward;
    if (name == "backward") return sim::ActionKind::Backward;
    if (name == "backward_input") return sim::ActionKind::BackwardInput;
    if (name == "backward_weight") return sim::ActionKind::BackwardWeight;
    if (name == "optimizer_step") return sim::ActionKind::OptimizerStep;
    return std::nullopt;
}

int intOr(const nlohmann::json& obj, const char* key, int fallback) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_number() ? it->get<int>() : fallback;
}

nlohmann::json readJsonFile(const QString& path, const std::string& where) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) throw InputError(where, "cannot open " + path.toStdString() + ": " + f.errorString().toStdString());
    const QByteArray bytes = f.readAll();
    try {
        return nlohmann::json::parse(bytes.constData(), bytes.constData() + bytes.size());
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(where, std::string("not JSON: ") + e.what());
    }
}
} // namespace

MeasuredRun MeasuredRun::fromTrace(const nlohmann::json& trace, const std::string& source) {
    MeasuredRun run;
    run.source_ = QString::fromStdString(source);
    const nlohmann::json* events = nullptr;
    if (trace.is_array()) events = &trace;
    else if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()) events = &trace["traceEvents"];
    if (!events) throw InputError(source + "#/traceEvents", "not a Chrome trace: expected an array of trace events");

    double first = std::numeric_limits<double>::infinity();
    for (const auto& ev : *events) {
        if (!ev.is_object() || ev.value("ph", "") != "X") continue;   // metadata, counters, instants
        const auto args = ev.find("args");
        if (args == ev.end() || !args->is_object() || !args->contains("stage") || !ev.contains("ts") ||
            !ev.contains("dur") || !ev["ts"].is_number() || !ev["dur"].is_number()) {
            ++run.skipped_;
            continue;
        }
        MeasuredEvent m;
        m.rank = intOr(ev, "pid", 0);
        m.stage = intOr(*args, "stage", 0);
        m.name = ev.value("name", "");
        m.microBatch = intOr(*args, "micro_batch", -1);
        m.chunk = intOr(*args, "chunk", 0);
        m.step = intOr(*args, "step", 0);
        // Chrome traces carry microseconds.
        m.startSeconds = ev["ts"].get<double>() * 1e-6;
        m.durationSeconds = ev["dur"].get<double>() * 1e-6;
        first = std::min(first, m.startSeconds);
        run.events_.push_back(std::move(m));
    }
    if (run.events_.empty()) throw InputError(source + "#/traceEvents", "no complete (ph \"X\") events with args.stage");
    for (auto& e : run.events_) e.startSeconds -= first;
    // Step time: the mean span of the compared steps, unless the trace states it.
    std::map<int, std::pair<double, double>> spans;   // step -> (first start, last end)
    for (const auto& e : run.events_) {
        auto [it, inserted] = spans.emplace(e.step, std::make_pair(e.startSeconds, e.startSeconds + e.durationSeconds));
        if (!inserted) {
            it->second.first = std::min(it->second.first, e.startSeconds);
            it->second.second = std::max(it->second.second, e.startSeconds + e.durationSeconds);
        }
    }
    const std::vector<int> compared = run.comparedSteps();
    double total = 0.0;
    for (int step : compared) total += spans[step].second - spans[step].first;
    run.stepSeconds_ = total / static_cast<double>(compared.size());
    if (trace.is_object()) {
        const auto other = trace.find("otherData");
        if (other != trace.end() && other->is_object() && other->contains("step_seconds") && (*other)["step_seconds"].is_number())
            run.stepSeconds_ = (*other)["step_seconds"].get<double>();
        if (other != trace.end() && other->is_object() && other->contains("plan") && (*other)["plan"].is_object())
            run.planJson_ = (*other)["plan"];
    }
    // Per rank in time order: the order in which occurrences of the same key are numbered.
    std::stable_sort(run.events_.begin(), run.events_.end(), [](const MeasuredEvent& a, const MeasuredEvent& b) {
        return std::tie(a.rank, a.startSeconds) < std::tie(b.rank, b.startSeconds);
    });
    return run;
}

void MeasuredRun::setMemory(const nlohmann::json& memory, const std::string& source) {
    peakBytes_.clear();
    const nlohmann::json* stages = nullptr;
    if (memory.is_object() && memory.contains("memory") && memory["memory"].is_object() && memory["memory"].contains("stages"))
        stages = &memory["memory"]["stages"];
    else if (memory.is_object() && memory.contains("stages")) stages = &memory["stages"];
    else if (memory.is_object() && memory.contains("ranks")) stages = &memory["ranks"];
    if (!stages || !stages->is_array())
        throw InputError(source, "expected {\"stages\": [...]}, {\"memory\": {\"stages\": [...]}} or {\"ranks\": [...]}");
    ProblemList problems;
    for (size_t i = 0; i < stages->size(); ++i) {
        const auto& s = (*stages)[i];
        const std::string where = source + "#/stages/" + std::to_string(i);
        if (!s.is_object()) {
            problems.add(where, "expected an object");
            continue;
        }
        const int stage = intOr(s, "stage", static_cast<int>(i));
        std::optional<double> bytes;
        for (const char* key : {"peak_total_bytes", "peak_bytes", "measured_bytes", "total_bytes"})
            if (s.contains(key) && s[key].is_number()) {
                bytes = s[key].get<double>();
                break;
            }
        if (!bytes) {
            problems.add(where, "needs one of peak_total_bytes, peak_bytes, measured_bytes, total_bytes (a number)");
            continue;
        }
        // Several ranks of one stage: the stage needs as much as its hungriest rank.
        auto [it, inserted] = peakBytes_.emplace(stage, *bytes);
        if (!inserted) it->second = std::max(it->second, *bytes);
    }
    problems.throwIfAny();
}

std::vector<int> MeasuredRun::comparedSteps() const {
    std::vector<int> steps;
    for (const auto& e : events_) steps.push_back(e.step);
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    if (steps.size() > 1) steps.erase(steps.begin());
    return steps;
}

MeasuredRun MeasuredRun::load(const QString& tracePath, const QString& memoryPath) {
    MeasuredRun run = fromTrace(readJsonFile(tracePath, tracePath.toStdString()), tracePath.toStdString());
    if (!memoryPath.isEmpty()) run.setMemory(readJsonFile(memoryPath, memoryPath.toStdString()), memoryPath.toStdString());
    return run;
}

double MeasuredComparison::meanAbsoluteError() const {
    double sum = 0.0;
    int n = 0;
    for (const auto& a : actions)
        if (a.predictedSeconds > 0.0) sum += std::fabs(a.error()), ++n;
    return n ? sum / n : 0.0;
}

MeasuredComparison compareWithPrediction(const MeasuredRun& run, const sim::PlanSimulation& sim) {
    using Key = std::tuple<int, std::string, int, int, int>;   // stage, name, micro-batch, chunk, occurrence
    MeasuredComparison c;
    c.predictedStepSeconds = sim.metrics.stepSeconds;
    c.measuredStepSeconds = run.stepSeconds();

    std::map<Key, std::pair<int, int>> predicted;                // key -> (stage, action index)
    std::map<std::tuple<int, std::string, int, int>, int> seen;
    for (size_t s = 0; s < sim.schedule.stages.size(); ++s) {
        const auto& acts = sim.schedule.stages[s].actions;
        for (size_t i = 0; i < acts.size(); ++i) {
            const auto base = std::make_tuple(static_cast<int>(s), acts[i].traceName(), acts[i].microBatch, acts[i].chunk);
            const int k = seen[base]++;
            predicted[std::tuple_cat(base, std::make_tuple(k))] = {static_cast<int>(s), static_cast<int>(i)};
        }
    }

    struct Sum {
        double seconds = 0.0;
        int samples = 0;   // ranks x steps
    };
    std::map<std::pair<int, int>, Sum> measured;
    const std::vector<int> steps = run.comparedSteps();
    const int laneStep = steps.back();   // the timeline shows one step: the last one measured
    std::map<int, int> representative;   // stage -> lowest rank seen
    double laneStart = std::numeric_limits<double>::infinity();
    for (const auto& e : run.events()) {
        auto [it, inserted] = representative.emplace(e.stage, e.rank);
        if (!inserted) it->second = std::min(it->second, e.rank);
        if (e.step == laneStep) laneStart = std::min(laneStart, e.startSeconds);
    }
    // rank, step, stage, name, mb, chunk -> occurrences so far
    std::map<std::tuple<int, int, int, std::string, int, int>, int> occurrence;
    for (const auto& e : run.events()) {
        if (!std::binary_search(steps.begin(), steps.end(), e.step)) continue;
        const int k = occurrence[std::make_tuple(e.rank, e.step, e.stage, e.name, e.microBatch, e.chunk)]++;
        const auto p = predicted.find(Key{e.stage, e.name, e.microBatch, e.chunk, k});
        if (p == predicted.end()) {
            ++c.unmatchedMeasured;
            continue;
        }
        Sum& sum = measured[p->second];
        sum.seconds += e.durationSeconds;
        ++sum.samples;
        if (e.step == laneStep && representative[e.stage] == e.rank) {
            if (const auto kind = computeKindOf(e.name)) {
                TimelineItem it;
                it.stage = e.stage;
                it.index = p->second.second;
                it.kind = *kind;
                it.microBatch = e.microBatch;
                it.chunk = e.chunk;
                it.lane = TimelineLane::Measured;
                it.startSeconds = e.startSeconds - laneStart;
                it.endSeconds = it.startSeconds + e.durationSeconds;
                c.measuredLane.push_back(it);
            }
        }
    }
    for (size_t s = 0; s < sim.schedule.stages.size(); ++s) {
        const auto& acts = sim.schedule.stages[s].actions;
        for (size_t i = 0; i < acts.size(); ++i) {
            const auto m = measured.find({static_cast<int>(s), static_cast<int>(i)});
            if (m == measured.end()) {
                ++c.unmatchedPredicted;
                continue;
            }
            ActionComparison a;
            a.stage = static_cast<int>(s);
            a.index = static_cast<int>(i);
            a.name = acts[i].traceName();
            a.microBatch = acts[i].microBatch;
            a.chunk = acts[i].chunk;
            const auto& t = sim.timeline.perAction[s][i];
            a.predictedSeconds = t.endSeconds - t.startSeconds;
            a.measuredSeconds = m->second.seconds / m->second.samples;
            a.ranks = m->second.samples / static_cast<int>(steps.size());
            c.actions.push_back(a);
        }
    }
    for (const auto& st : sim.memory.stages) {
        StageMemoryComparison m;
        m.stage = st.stage;
        m.predictedBytes = st.totalBytes();
        if (const auto it = run.stagePeakBytes().find(st.stage); it != run.stagePeakBytes().end()) m.measuredBytes = it->second;
        c.memory.push_back(m);
    }
    return c;
}

} // namespace tessel::gui
