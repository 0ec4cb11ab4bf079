// Export of a plan as the launch settings of Megatron-LM, DeepSpeed or torchtitan.
#pragma once

#include "tessel/cost/plan.hpp"
#include "tessel/cost/scenario.hpp"

#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {

enum class ExportFormat { Megatron, DeepSpeed, Torchtitan };

// Megatron-LM: the pretrain_gpt.py arguments; DeepSpeed: a ds_config.json; torchtitan: a TOML job config.
// Throws InputError naming the plan field when the framework cannot express the plan.
std::string exportPlan(const Scenario& scenario, ExportFormat format);

std::string toString(ExportFormat format);                                  // "megatron", "deepspeed", "torchtitan"
std::optional<ExportFormat> parseExportFormat(const std::string& name);
const std::vector<ExportFormat>& allExportFormats();
// The framework whose launch settings a plan's `framework` name means: megatron, nemo, megascale -> Megatron-LM;
// deepspeed -> DeepSpeed; torchtitan, fsdp -> torchtitan; generic -> none.
std::optional<ExportFormat> exportFormatOf(const std::string& frameworkName);

// Why `format` cannot run the plan: exactly the refusals of exportPlan (one source of truth, each at its plan
// pointer, the pipeline split included), without writing anything; the rank-order rule is left out when `withRankOrder` is false (the search
// checks orders apart). The plan must be valid (validatePlan).
void frameworkRules(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, ExportFormat format,
                    ProblemList& problems, bool withRankOrder = true);
bool frameworkRuns(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, ExportFormat format,
                   bool withRankOrder = true);

} // namespace tessel::sim
