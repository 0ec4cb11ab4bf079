// Helpers shared by the measured-run loader (measured_run.cpp) and the comparison (compare.cpp): JSON files,
// medians, and the complete events of a Chrome trace that carry args.stage.
#pragma once

#include "tessel/sim/compare.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace tessel::sim::detail {

// obj[key] as an int: `fallback` when absent or null; a whole number an int holds; anything else is bad input,
// thrown as an InputError at pointer + "/" + key.
int intOr(const nlohmann::json& obj, const char* key, int fallback, const std::string& pointer);
// Throws InputError naming the path when it cannot be read or is not JSON.
nlohmann::json readJsonFile(const std::filesystem::path& path);
double median(std::vector<double> values);   // 0 for no values

// One complete trace event with args.stage, as both the executor and `tessel trace` write them: the event
// (rank = pid, start not yet relative to the run) and its args.index (-1 when absent).
struct TraceEvent {
    MeasuredEvent event;
    int index = -1;
};

// The complete ("X") events of a Chrome trace that carry args.stage; counts the other complete events.
// `allowEmpty`: a measured run whose trace states only its step (otherData.step_seconds; an imported Megatron-LM
// log) has no action events.
std::vector<TraceEvent> readTraceEvents(const nlohmann::json& trace, const std::string& source, int& skipped,
                                        bool allowEmpty = false);
// The trace's otherData object, or null.
const nlohmann::json* otherData(const nlohmann::json& trace);

} // namespace tessel::sim::detail
