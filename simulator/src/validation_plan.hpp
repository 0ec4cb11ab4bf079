// The step of reading a published record that fills its cluster and plan (validation_plan.cpp), for
// validation_record.cpp, which reads the model before it and the measurement after it.
#pragma once

#include "tessel/sim/validation.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace tessel::sim::detail {

// Fills the cluster and plan of `c` from the record's "system" and "plan"; a plan tessel cannot express sets
// `refusal` (the field's JSON pointer under `ptr` and the reason) and leaves the rest unread.
void readSystemAndPlan(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c, std::string& refusal);

} // namespace tessel::sim::detail
