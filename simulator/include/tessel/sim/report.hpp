// JSON of the simulated step (the `time` object of `tessel predict --json`, and search results).
#pragma once

#include "tessel/sim/simulate.hpp"

#include <nlohmann/json.hpp>

namespace tessel::sim {

nlohmann::json breakdownToJson(const StepBreakdown& b);
// {"step_seconds", "bubble_fraction", "mfu", "hfu", "tokens_per_second", "breakdown": {...},
//  "bottleneck_stage", "stages": [{"stage", "bubble_fraction", "breakdown"}], "flop_convention"}
nlohmann::json timeToJson(const StepMetrics& m, const Timeline& t);

} // namespace tessel::sim
