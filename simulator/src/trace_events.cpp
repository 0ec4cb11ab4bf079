// Helpers shared by the measured-run loader and the comparison: JSON files, medians, Chrome trace events.
#include "trace_events.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <fstream>
#include <sstream>

namespace tessel::sim::detail {

namespace fs = std::filesystem;

int intOr(const nlohmann::json& obj, const char* key, int fallback, const std::string& pointer) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    const double v = it->is_number() ? it->get<double>() : 0.5;
    if (v != std::floor(v) || v < static_cast<double>(std::numeric_limits<int>::min()) ||
        v > static_cast<double>(std::numeric_limits<int>::max()))
        throw InputError(pointer + "/" + key, "expected a whole number (a rank, stage, step or index), got " + it->dump());
    return static_cast<int>(v);
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
    } catch (const nlohmann::json::out_of_range& e) {
        throw InputError(path.string(), std::string("a number is out of range (beyond +-1.8e308): ") + e.what());
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
    const std::string base = source + (trace.is_array() ? "#" : "#/traceEvents");
    for (size_t i = 0; i < events->size(); ++i) {
        const auto& ev = (*events)[i];
        const std::string at = base + "/" + std::to_string(i);
        // Metadata, counters, instants, and events whose phase is not even a string.
        if (!ev.is_object() || !ev.contains("ph") || !ev["ph"].is_string() || ev["ph"].get<std::string>() != "X") continue;
        const auto args = ev.find("args");
        if (args == ev.end() || !args->is_object() || !args->contains("stage") || !(*args)["stage"].is_number() ||
            !ev.contains("ts") || !ev.contains("dur") || !ev["ts"].is_number() || !ev["dur"].is_number()) {
            ++skipped;
            continue;
        }
        TraceEvent t;
        MeasuredEvent& m = t.event;
        m.rank = intOr(ev, "pid", 0, at);
        m.stage = intOr(*args, "stage", 0, at + "/args");
        m.name = ev.contains("name") && ev["name"].is_string() ? ev["name"].get<std::string>() : "";
        const auto cat = ev.find("cat");
        m.category = timeCategoryOf(cat != ev.end() && cat->is_string() ? cat->get<std::string>() : m.name);
        m.microBatch = intOr(*args, "micro_batch", -1, at + "/args");
        m.chunk = intOr(*args, "chunk", 0, at + "/args");
        m.step = intOr(*args, "step", 0, at + "/args");
        t.index = intOr(*args, "index", -1, at + "/args");
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
