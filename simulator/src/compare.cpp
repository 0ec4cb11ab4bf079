// Predicted vs measured: prediction loaders, the action matcher and the comparison tables (the measured side is
// measured_run.cpp).
#include "tessel/sim/compare.hpp"

#include "tessel/cost/json_reader.hpp"

#include "trace_events.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

namespace tessel::sim {

namespace fs = std::filesystem;
using namespace detail;

namespace {

std::string describe(const nlohmann::json& j) { return j.is_null() ? std::string("absent") : j.dump(); }

void collectDifferences(const nlohmann::json& predicted, const nlohmann::json& measured, const std::string& where,
                        const std::string& predictedName, std::vector<Problem>& out) {
    if (predicted.is_object() && measured.is_object()) {
        std::set<std::string> keys;
        for (auto it = predicted.begin(); it != predicted.end(); ++it) keys.insert(it.key());
        for (auto it = measured.begin(); it != measured.end(); ++it) keys.insert(it.key());
        for (const auto& k : keys) {
            const nlohmann::json p = predicted.contains(k) ? predicted[k] : nlohmann::json();
            const nlohmann::json m = measured.contains(k) ? measured[k] : nlohmann::json();
            collectDifferences(p, m, where + "/" + jsonPointerEscape(k), predictedName, out);
        }
        return;
    }
    if (predicted != measured)
        out.push_back({where, "the run has " + describe(measured) + ", " + predictedName + " has " + describe(predicted)});
}

} // namespace

// ---------------------------------------------------------------------------------------------------------
// Prediction

size_t Prediction::actionCount() const {
    size_t n = 0;
    for (const auto& s : stages) n += s.size();
    return n;
}

Prediction predictionFromSimulation(const PlanSimulation& sim, const std::string& source) {
    Prediction p;
    p.source = source;
    p.stepSeconds = sim.metrics.stepSeconds;
    p.planJson = planToJson(sim.schedule.plan);
    for (size_t s = 0; s < sim.schedule.stages.size(); ++s) {
        const auto& acts = sim.schedule.stages[s].actions;
        std::vector<PredictedAction> list;
        for (size_t i = 0; i < acts.size(); ++i) {
            const TimedAction& t = sim.timeline.perAction[s][i];
            PredictedAction a;
            a.stage = static_cast<int>(s);
            a.index = static_cast<int>(i);
            a.name = acts[i].traceName();
            a.category = timeCategoryOf(toString(acts[i].kind));
            a.microBatch = acts[i].microBatch;
            a.chunk = acts[i].chunk;
            a.startSeconds = t.startSeconds;
            a.durationSeconds = t.endSeconds - t.startSeconds;
            list.push_back(std::move(a));
        }
        p.stages.push_back(std::move(list));
    }
    for (const auto& st : sim.memory.stages) {
        PredictedStageMemory m;
        m.stage = st.stage;
        // Mapped as the executor counts (see memoryCategories()): at the peak's moment, and each at its own.
        m.categoryBytes = {{"weights", st.weightsBytes},
                           {"grads", st.gradsBytes},
                           {"optimizer", st.optimizerBytes},
                           {"activations", activationsAtPeakBytes(st)},
                           {"other", buffersAtPeakBytes(st)}};
        m.categoryOwnPeakBytes = m.categoryBytes;
        m.categoryOwnPeakBytes["activations"] = activationsCategoryPeakBytes(st);
        m.categoryOwnPeakBytes["other"] = buffersCategoryPeakBytes(st);
        m.reservedBytes = st.other.reservedBytes + st.other.collectiveLibraryBytes; // outside the tensors either way
        m.totalBytes = st.totalBytes();
        p.memory.push_back(std::move(m));
    }
    return p;
}

Prediction predictionFromTrace(const nlohmann::json& trace, const std::string& source) {
    int skipped = 0;
    const std::vector<TraceEvent> events = readTraceEvents(trace, source, skipped);
    // One list per stage: its lowest rank (every rank of a stage runs the same list), one step.
    std::map<int, int> rankOf;
    int firstStep = std::numeric_limits<int>::max();
    for (const auto& t : events) {
        auto [it, inserted] = rankOf.emplace(t.event.stage, t.event.rank);
        if (!inserted) it->second = std::min(it->second, t.event.rank);
        firstStep = std::min(firstStep, t.event.step);
    }
    if (rankOf.begin()->first < 0) throw InputError(source + "#/traceEvents", "an event has a negative args.stage");
    Prediction p;
    p.source = source;
    p.stages.resize(static_cast<size_t>(rankOf.rbegin()->first) + 1);
    double first = std::numeric_limits<double>::infinity(), last = -first;
    for (const auto& t : events) {
        const MeasuredEvent& e = t.event;
        if (e.rank != rankOf[e.stage] || e.step != firstStep) continue;
        PredictedAction a{e.stage, t.index, e.name, e.category, e.microBatch, e.chunk, e.startSeconds, e.durationSeconds};
        first = std::min(first, a.startSeconds);
        last = std::max(last, a.startSeconds + a.durationSeconds);
        p.stages[static_cast<size_t>(e.stage)].push_back(std::move(a));
    }
    for (auto& list : p.stages) {
        // The schedule's order is args.index; without it, the order of start times.
        std::stable_sort(list.begin(), list.end(), [](const PredictedAction& a, const PredictedAction& b) {
            return a.index >= 0 && b.index >= 0 ? a.index < b.index : a.startSeconds < b.startSeconds;
        });
        for (size_t i = 0; i < list.size(); ++i) {
            list[i].index = static_cast<int>(i);
            list[i].startSeconds -= first;
        }
    }
    p.stepSeconds = last - first;
    if (const nlohmann::json* other = otherData(trace)) {
        if (other->contains("step_seconds") && (*other)["step_seconds"].is_number())
            p.stepSeconds = (*other)["step_seconds"].get<double>();
        if (other->contains("plan") && (*other)["plan"].is_object()) p.planJson = (*other)["plan"];
    }
    return p;
}

void setPredictedMemory(Prediction& prediction, const nlohmann::json& predictJson, const std::string& source) {
    const nlohmann::json* stages = nullptr;
    std::string pointer;
    if (predictJson.is_object() && predictJson.contains("memory") && predictJson["memory"].is_object() &&
        predictJson["memory"].contains("stages")) {
        stages = &predictJson["memory"]["stages"];
        pointer = "/memory/stages";
    } else if (predictJson.is_object() && predictJson.contains("stages")) {
        stages = &predictJson["stages"];
        pointer = "/stages";
    }
    if (!stages || !stages->is_array())
        throw InputError(source + "#/memory/stages", "expected `tessel predict --json` output ({\"memory\": {\"stages\": [...]}})");
    ProblemList problems;
    std::vector<PredictedStageMemory> out;
    for (size_t i = 0; i < stages->size(); ++i) {
        // Only the fields compared are read; the rest of predict's output (fits, headroom, ...) is left alone.
        ObjectReader r((*stages)[i], source + "#" + pointer + "/" + std::to_string(i), problems);
        if (!r.isObject()) continue;
        PredictedStageMemory m;
        constexpr double kMax = 1e30;
        m.stage = static_cast<int>(r.requireInt("stage", 0, 1 << 20));
        m.categoryBytes["weights"] = r.requireNumber("weights_bytes", 0, kMax);
        m.categoryBytes["grads"] = r.requireNumber("grads_bytes", 0, kMax);
        m.categoryBytes["optimizer"] = r.requireNumber("optimizer_bytes", 0, kMax);
        m.categoryBytes["activations"] = r.requireNumber("activations_bytes", 0, kMax);
        m.totalBytes = r.requireNumber("total_bytes", 0, kMax);
        m.categoryOwnPeakBytes = m.categoryBytes;
        if (const nlohmann::json* other = r.child("other")) {
            // At the peak's moment, as predictionFromSimulation maps a simulation; each category at its own moment as
            // activationsCategoryPeakBytes / buffersCategoryPeakBytes do (the last stage's other moment and a layer's
            // backward working set, where predict wrote them).
            ObjectReader o(*other, r.pointer("other"), problems);
            const double activations = m.categoryBytes["activations"] + o.optNumber("logits_loss_bytes", 0, 0, kMax);
            const double kept = o.optNumber("zero3_gather_bytes", 0, 0, kMax) + o.optNumber("comm_buffer_bytes", 0, 0, kMax) +
                                o.optNumber("step_copy_bytes", 0, 0, kMax);
            const double working = o.optNumber("backward_working_bytes", 0, 0, kMax);
            m.categoryBytes["activations"] = activations;
            m.categoryBytes["other"] = kept + working;
            m.categoryOwnPeakBytes["activations"] = std::max(activations, r.optNumber("other_moment_activations_bytes", 0, 0, kMax));
            m.categoryOwnPeakBytes["other"] = kept + std::max(working, r.optNumber("layer_backward_working_bytes", 0, 0, kMax));
            m.reservedBytes = o.optNumber("reserved_bytes", 0, 0, kMax);
        } else {
            m.categoryBytes["other"] = m.categoryOwnPeakBytes["other"] = r.requireNumber("other_bytes", 0, kMax);
        }
        out.push_back(std::move(m));
    }
    problems.throwIfAny();
    prediction.memory = std::move(out);
}

// ---------------------------------------------------------------------------------------------------------
// Matching and comparison

std::vector<EventMatch> matchEvents(const Prediction& prediction, const MeasuredRun& run) {
    using Base = std::tuple<int, std::string, int, int>;   // stage, name, micro-batch, chunk
    std::map<std::pair<Base, int>, int> predicted;          // (key, occurrence) -> index in the stage's list
    std::map<Base, int> seen;
    for (const auto& list : prediction.stages)
        for (const auto& a : list) {
            const Base base{a.stage, a.name, a.microBatch, a.chunk};
            predicted[{base, seen[base]++}] = a.index;
        }
    const std::vector<int> steps = run.comparedSteps();
    std::map<std::tuple<int, int, Base>, int> occurrence;   // (rank, step, key) -> occurrences so far
    std::vector<EventMatch> out;
    out.reserve(run.events().size());
    for (const auto& e : run.events()) {
        EventMatch m;
        m.compared = std::binary_search(steps.begin(), steps.end(), e.step);
        if (m.compared) {
            const Base base{e.stage, e.name, e.microBatch, e.chunk};
            const int k = occurrence[{e.rank, e.step, base}]++;
            if (const auto p = predicted.find({base, k}); p != predicted.end()) {
                m.stage = e.stage;
                m.index = p->second;
            }
        }
        out.push_back(m);
    }
    return out;
}

std::optional<double> ActionComparison::error() const {
    if (predictedSeconds <= 0.0) return std::nullopt;
    return measuredMeanSeconds / predictedSeconds - 1.0;
}

std::optional<double> CategoryMemoryComparison::error() const {
    if (!measuredBytes || predictedBytes <= 0.0) return std::nullopt;
    return *measuredBytes / predictedBytes - 1.0;
}

std::optional<double> StageMemoryComparison::error() const {
    if (!measuredPeakBytes || predictedAllocatedBytes() <= 0.0) return std::nullopt;
    return *measuredPeakBytes / predictedAllocatedBytes() - 1.0;
}

std::optional<double> StageMemoryComparison::processError() const {
    if (!measuredProcessPeakBytes || predictedTotalBytes <= 0.0) return std::nullopt;
    return *measuredProcessPeakBytes / predictedTotalBytes - 1.0;
}

std::optional<double> RunComparison::stepError() const {
    if (predictedStepSeconds <= 0.0) return std::nullopt;
    return measuredStepSeconds / predictedStepSeconds - 1.0;
}

double RunComparison::meanAbsoluteError() const {
    double sum = 0.0;
    int n = 0;
    for (const auto& a : actions)
        if (const auto e = a.error()) sum += std::fabs(*e), ++n;
    return n ? sum / n : 0.0;
}

std::vector<size_t> RunComparison::mostWrong(size_t n) const {
    // Ranked by the absolute seconds an action is off (|measured - predicted|), not by the ratio: the step
    // error is a sum of such differences along the critical path, so a 3x miss on a 2 us send moves the step
    // by 4 us while a 20% miss on a 50 ms backward moves it by 10 ms. A ratio ranking would send the user
    // after the tiny actions first; the seconds say where the model's error actually comes from.
    std::vector<size_t> order(actions.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) {
        return std::fabs(actions[a].errorSeconds()) > std::fabs(actions[b].errorSeconds());
    });
    if (order.size() > n) order.resize(n);
    return order;
}

RunComparison compareRun(const Prediction& prediction, const MeasuredRun& run) {
    RunComparison c;
    c.predictedSource = prediction.source;
    c.measuredSource = run.source();
    c.predictedStepSeconds = prediction.stepSeconds;
    c.measuredStepSeconds = run.stepSeconds();
    c.comparedSteps = run.comparedSteps();
    const double stepCount = static_cast<double>(std::max<size_t>(1, c.comparedSteps.size()));
    const std::vector<EventMatch> matches = matchEvents(prediction, run);
    const auto& events = run.events();

    // Matched durations: (stage, index) -> rank -> (sum, samples).
    std::map<std::pair<int, int>, std::map<int, std::pair<double, int>>> measured;
    std::map<std::tuple<int, std::string, int, int>, UnmatchedMeasured> unmatched;
    for (size_t i = 0; i < events.size(); ++i) {
        const MeasuredEvent& e = events[i];
        const EventMatch& m = matches[i];
        if (!m.compared) continue;
        if (m.matched()) {
            auto& slot = measured[{m.stage, m.index}][e.rank];
            slot.first += e.durationSeconds;
            ++slot.second;
            continue;
        }
        UnmatchedMeasured& u = unmatched[{e.stage, e.name, e.microBatch, e.chunk}];
        u.stage = e.stage;
        u.name = e.name;
        u.microBatch = e.microBatch;
        u.chunk = e.chunk;
        ++u.events;
        u.totalSeconds += e.durationSeconds;
        ++c.unmatchedMeasuredEvents;
    }
    for (auto& [key, u] : unmatched) c.unmatchedMeasured.push_back(std::move(u));

    std::map<std::pair<int, std::string>, CategoryComparison> categories;
    for (const auto& list : prediction.stages)
        for (const auto& a : list) {
            const auto it = measured.find({a.stage, a.index});
            if (it == measured.end()) {
                c.unmatchedPredicted.push_back(a);
                continue;
            }
            ActionComparison x;
            x.stage = a.stage;
            x.index = a.index;
            x.name = a.name;
            x.category = a.category;
            x.microBatch = a.microBatch;
            x.chunk = a.chunk;
            x.predictedSeconds = a.durationSeconds;
            x.measuredMinSeconds = std::numeric_limits<double>::infinity();
            x.measuredMaxSeconds = -std::numeric_limits<double>::infinity();
            double sum = 0.0;
            for (const auto& [rank, s] : it->second) {
                const double mean = s.first / s.second;
                sum += mean;
                x.measuredMinSeconds = std::min(x.measuredMinSeconds, mean);
                x.measuredMaxSeconds = std::max(x.measuredMaxSeconds, mean);
                x.samples += s.second;
            }
            x.ranks = static_cast<int>(it->second.size());
            x.measuredMeanSeconds = sum / x.ranks;
            CategoryComparison& cat = categories[{a.stage, a.category}];
            cat.stage = a.stage;
            cat.category = a.category;
            cat.predictedSeconds += x.predictedSeconds;
            cat.measuredSeconds += x.measuredMeanSeconds;
            ++cat.actions;
            c.actions.push_back(std::move(x));
        }
    for (auto& [key, cat] : categories) c.categories.push_back(std::move(cat));

    // Per rank: busy time per category (all of the rank's events in compared steps) and its own step span.
    std::map<int, RankComparison> ranks;
    std::map<int, std::map<int, std::pair<double, double>>> rankSpans;   // rank -> step -> (start, end)
    for (size_t i = 0; i < events.size(); ++i) {
        const MeasuredEvent& e = events[i];
        auto [it, inserted] = ranks.emplace(e.rank, RankComparison{});
        if (inserted) {
            it->second.rank = e.rank;
            it->second.stage = e.stage;
        }
        if (!matches[i].compared) continue;
        it->second.measuredBusySeconds[e.category] += e.durationSeconds / stepCount;
        const double end = e.startSeconds + e.durationSeconds;
        auto [span, fresh] = rankSpans[e.rank].emplace(e.step, std::make_pair(e.startSeconds, end));
        if (!fresh) {
            span->second.first = std::min(span->second.first, e.startSeconds);
            span->second.second = std::max(span->second.second, end);
        }
    }
    for (auto& [rank, r] : ranks) {
        r.predictedStepSeconds = prediction.stepSeconds;
        std::vector<double> spans;
        for (const auto& [step, span] : rankSpans[rank]) spans.push_back(span.second - span.first);
        r.measuredStepSeconds = median(spans);
        if (r.stage >= 0 && static_cast<size_t>(r.stage) < prediction.stages.size())
            for (const auto& a : prediction.stages[static_cast<size_t>(r.stage)]) r.predictedBusySeconds[a.category] += a.durationSeconds;
        c.ranks.push_back(std::move(r));
    }

    for (const auto& [step, seconds] : run.stepSpanSeconds())
        c.steps.push_back({step, seconds, std::binary_search(c.comparedSteps.begin(), c.comparedSteps.end(), step)});

    // Memory: every stage predicted or measured.
    std::set<int> stages;
    for (const auto& m : prediction.memory) stages.insert(m.stage);
    for (const auto& [stage, bytes] : run.stagePeakBytes()) stages.insert(stage);
    for (int stage : stages) {
        StageMemoryComparison s;
        s.stage = stage;
        const auto p = std::find_if(prediction.memory.begin(), prediction.memory.end(),
                                    [stage](const PredictedStageMemory& m) { return m.stage == stage; });
        if (p != prediction.memory.end()) {
            s.predictedTotalBytes = p->totalBytes;
            s.predictedReservedBytes = p->reservedBytes;
        }
        if (const auto it = run.stagePeakBytes().find(stage); it != run.stagePeakBytes().end()) s.measuredPeakBytes = it->second;
        for (const auto& m : run.memory())
            if (m.stage == stage && m.processPeakBytes)
                s.measuredProcessPeakBytes = std::max(s.measuredProcessPeakBytes.value_or(0.0), *m.processPeakBytes);
        // Like for like: a run that recorded what each category held when its total peaked against the model's
        // categories at its peak's moment; one that recorded each category's own peak against those.
        // (Nothing measured: the model's own rows, which add up to its total.)
        s.categoriesAtTotalPeak = true;
        for (const auto& m : run.memory())
            if (m.stage == stage && !m.categoryPeakBytes.empty())
                s.categoriesAtTotalPeak = s.categoriesAtTotalPeak && m.categoriesAtTotalPeak;
        for (const auto& cat : memoryCategories()) {
            CategoryMemoryComparison x;
            x.category = cat;
            if (p != prediction.memory.end()) {
                const auto& predicted =
                    s.categoriesAtTotalPeak || p->categoryOwnPeakBytes.empty() ? p->categoryBytes : p->categoryOwnPeakBytes;
                if (const auto b = predicted.find(cat); b != predicted.end()) x.predictedBytes = b->second;
            }
            // The hungriest rank of the stage, category by category.
            for (const auto& m : run.memory())
                if (m.stage == stage)
                    if (const auto b = m.categoryPeakBytes.find(cat); b != m.categoryPeakBytes.end())
                        x.measuredBytes = std::max(x.measuredBytes.value_or(0.0), b->second);
            s.categories.push_back(std::move(x));
        }
        c.memory.push_back(std::move(s));
    }
    return c;
}

namespace {
nlohmann::json optionalNumber(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json actionToJson(const ActionComparison& a) {
    return {{"stage", a.stage},
            {"index", a.index},
            {"name", a.name},
            {"category", a.category},
            {"micro_batch", a.microBatch},
            {"chunk", a.chunk},
            {"predicted_seconds", a.predictedSeconds},
            {"measured_mean_seconds", a.measuredMeanSeconds},
            {"measured_min_seconds", a.measuredMinSeconds},
            {"measured_max_seconds", a.measuredMaxSeconds},
            {"ranks", a.ranks},
            {"samples", a.samples},
            {"error_seconds", a.errorSeconds()},
            {"error", optionalNumber(a.error())}};
}
} // namespace

nlohmann::json comparisonToJson(const RunComparison& c, size_t top) {
    nlohmann::json perStep = nlohmann::json::array();
    for (const auto& s : c.steps)
        perStep.push_back({{"step", s.step}, {"measured_seconds", s.measuredSeconds}, {"compared", s.compared}});
    nlohmann::json actions = nlohmann::json::array();
    for (const auto& a : c.actions) actions.push_back(actionToJson(a));
    nlohmann::json mostWrong = nlohmann::json::array();
    for (size_t i : c.mostWrong(top)) mostWrong.push_back(actionToJson(c.actions[i]));
    nlohmann::json unmatchedPredicted = nlohmann::json::array();
    for (const auto& a : c.unmatchedPredicted)
        unmatchedPredicted.push_back({{"stage", a.stage}, {"index", a.index}, {"name", a.name}, {"micro_batch", a.microBatch},
                                      {"chunk", a.chunk}, {"predicted_seconds", a.durationSeconds}});
    nlohmann::json unmatchedMeasured = nlohmann::json::array();
    for (const auto& u : c.unmatchedMeasured)
        unmatchedMeasured.push_back({{"stage", u.stage}, {"name", u.name}, {"micro_batch", u.microBatch}, {"chunk", u.chunk},
                                     {"events", u.events}, {"total_seconds", u.totalSeconds}});
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : c.ranks) {
        nlohmann::json busy = nlohmann::json::object();
        std::set<std::string> cats;
        for (const auto& [k, v] : r.predictedBusySeconds) cats.insert(k);
        for (const auto& [k, v] : r.measuredBusySeconds) cats.insert(k);
        for (const auto& k : cats) {
            const auto p = r.predictedBusySeconds.find(k);
            const auto m = r.measuredBusySeconds.find(k);
            busy[k] = {{"predicted_seconds", p != r.predictedBusySeconds.end() ? p->second : 0.0},
                       {"measured_seconds", m != r.measuredBusySeconds.end() ? m->second : 0.0}};
        }
        ranks.push_back({{"rank", r.rank}, {"stage", r.stage}, {"predicted_step_seconds", r.predictedStepSeconds},
                         {"measured_step_seconds", r.measuredStepSeconds}, {"busy_seconds_per_step", busy}});
    }
    nlohmann::json categories = nlohmann::json::array();
    for (const auto& k : c.categories)
        categories.push_back({{"stage", k.stage}, {"category", k.category}, {"actions", k.actions},
                              {"predicted_seconds", k.predictedSeconds}, {"measured_seconds", k.measuredSeconds},
                              {"error", k.predictedSeconds > 0 ? nlohmann::json(k.measuredSeconds / k.predictedSeconds - 1.0)
                                                               : nlohmann::json()}});
    nlohmann::json memory = nlohmann::json::array();
    for (const auto& m : c.memory) {
        nlohmann::json cats = nlohmann::json::array();
        for (const auto& x : m.categories)
            cats.push_back({{"category", x.category}, {"predicted_bytes", x.predictedBytes},
                            {"measured_bytes", optionalNumber(x.measuredBytes)}, {"error", optionalNumber(x.error())}});
        memory.push_back({{"stage", m.stage},
                          {"predicted_total_bytes", m.predictedTotalBytes},
                          {"predicted_reserved_bytes", m.predictedReservedBytes},
                          {"predicted_allocated_bytes", m.predictedAllocatedBytes()},
                          {"measured_peak_bytes", optionalNumber(m.measuredPeakBytes)},
                          {"error", optionalNumber(m.error())},
                          {"measured_process_peak_bytes", optionalNumber(m.measuredProcessPeakBytes)},
                          {"process_error", optionalNumber(m.processError())},
                          {"categories_at", m.categoriesAtTotalPeak ? "total_peak" : "own_peak"},
                          {"categories", cats}});
    }
    return {{"schema_version", 1},
            {"predicted_source", c.predictedSource},
            {"measured_source", c.measuredSource},
            {"step",
             {{"predicted_seconds", c.predictedStepSeconds},
              {"measured_seconds", c.measuredStepSeconds},
              {"error", optionalNumber(c.stepError())},
              {"compared_steps", c.comparedSteps},
              {"per_step", perStep}}},
            {"summary",
             {{"matched_actions", c.actions.size()},
              {"unmatched_predicted_actions", c.unmatchedPredicted.size()},
              {"unmatched_measured_events", c.unmatchedMeasuredEvents},
              {"mean_absolute_error", c.meanAbsoluteError()}}},
            {"actions", actions},
            {"most_wrong", mostWrong},
            {"unmatched", {{"predicted", unmatchedPredicted}, {"measured", unmatchedMeasured}}},
            {"ranks", ranks},
            {"categories", categories},
            {"memory", {{"stages", memory}}}};
}

std::vector<Problem> jsonDifferences(const nlohmann::json& predicted, const nlohmann::json& measured,
                                     const std::string& measuredWhere, const std::string& predictedName) {
    std::vector<Problem> out;
    collectDifferences(predicted, measured, measuredWhere, predictedName, out);
    return out;
}

} // namespace tessel::sim
