// Helpers shared by the measured-run loader and the comparison: JSON files, medians, Chrome trace events.
#include "trace_events.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tessel::sim::detail {

namespace fs = std::filesystem;

int intOr(const nlohmann::json& obj, const char* key, int fallback) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_number() ? it->get<int>() : fallback;
}

nlohmann::json readJsonFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path.string(), "cannot open the file");
    std::stringstream text;
    text << in.rdbuf();
    try {
        return nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(path.string(), std::string("not JSON: ") + e.what());
    }
}

double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}


std::vector<TraceEvent> readTraceEvents(const nlohmann::json& trace, const std::string& source, int& skipped,
                                        bool allowEmpty) {
    const nlohmann::json* events = nullptr;
    if (trace.is_array()) events = &trace;
    else if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()) events = &trace["traceEvents"];
    if (!events) throw InputError(source + "#/traceEvents", "not a Chrome trace: expected an array of trace events");
    std::vector<TraceEvent> out;
    skipped = 0;
    for (const auto& ev : *events) {
        if (!ev.is_object() || ev.value("ph", "") != "X") continue;   // metadata, counters, instants
        const auto args = ev.find("args");
        if (args == ev.end() || !args->is_object() || !args->contains("stage") || !(*args)["stage"].is_number() ||
            !ev.contains("ts") || !ev.contains("dur") || !ev["ts"].is_number() || !ev["dur"].is_number()) {
            ++skipped;
            continue;
        }
        TraceEvent t;
        MeasuredEvent& m = t.event;
        m.rank = intOr(ev, "pid", 0);
        m.stage = intOr(*args, "stage", 0);
        m.name = ev.contains("name") && ev["name"].is_string() ? ev["name"].get<std::string>() : "";
        const auto cat = ev.find("cat");
        m.category = timeCategoryOf(cat != ev.end() && cat->is_string() ? cat->get<std::string>() : m.name);
        m.microBatch = intOr(*args, "micro_batch", -1);
        m.chunk = intOr(*args, "chunk", 0);
        m.step = intOr(*args, "step", 0);
        t.index = intOr(*args, "index", -1);
        // Chrome traces carry microseconds.
        m.startSeconds = ev["ts"].get<double>() * 1e-6;
        m.durationSeconds = ev["dur"].get<double>() * 1e-6;
        out.push_back(std::move(t));
    }
    if (out.empty() && !allowEmpty) throw InputError(source + "#/traceEvents", "no complete (ph \"X\") events with args.stage");
    return out;
}

const nlohmann::json* otherData(const nlohmann::json& trace) {
    if (!trace.is_object()) return nullptr;
    const auto it = trace.find("otherData");
    return it != trace.end() && it->is_object() ? &*it : nullptr;
}

} // namespace tessel::sim::detail
