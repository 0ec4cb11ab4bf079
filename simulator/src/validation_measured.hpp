// The step of reading a published record that fills its measurement (validation_measured.cpp), for
// validation_record.cpp, which reads the model, cluster and plan before it.
#pragma once

#include "tessel/sim/validation.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace tessel::sim::detail {

// Fills `c.measured` from the record's "measured" and "derived": the step time (or the throughput or FLOP rate it is
// derived from), the peak memory and the stage it was read on, the out-of-memory outcome. Needs the scenario read
// (the plan's batch and degrees, the cluster's peak). A field that cannot be read sets `refusal` (its JSON pointer
// under `ptr` and the reason).
void readMeasured(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c, std::string& refusal);

} // namespace tessel::sim::detail
