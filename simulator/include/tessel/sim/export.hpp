// Export of a plan as the launch settings of Megatron-LM, DeepSpeed or torchtitan.
#pragma once

#include "tessel/cost/scenario.hpp"

#include <string>

namespace tessel::sim {

enum class ExportFormat { Megatron, DeepSpeed, Torchtitan };

// Megatron-LM: the pretrain_gpt.py arguments; DeepSpeed: a ds_config.json; torchtitan: a TOML job config.
// Throws InputError naming the plan field when the framework cannot express the plan.
std::string exportPlan(const Scenario& scenario, ExportFormat format);

} // namespace tessel::sim
