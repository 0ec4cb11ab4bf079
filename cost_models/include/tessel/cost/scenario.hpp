// A scenario: model + cluster + plan, each inline or by preset name; name/path resolution for presets.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct Scenario {
    std::string name;
    std::string description;
    ModelConfig model;
    ClusterConfig cluster;
    Plan plan;
    // The plan's precision recipe (validated to exist) as its framework, ZeRO stage and pipeline run it
    // (precisionRecipeOf) on this scenario's GPU (fp8OnGpu): what the cost model and the simulator cost.
    PrecisionRecipe recipe() const;
};

// Directories searched for presets, in order: $TESSEL_SCENARIOS, the source tree's scenarios/ (compiled in),
// and ../share/tessel/scenarios next to the running executable when given.
std::vector<std::filesystem::path> scenarioSearchPath();

// Resolves a model reference: a path to a tessel model file, a HuggingFace config.json, a checkpoint folder
// holding config.json, or a preset name under models/. Throws InputError naming `where` if none matches.
ModelConfig loadModelRef(const std::string& ref, const std::string& where);
// Resolves a cluster reference: a file path or a preset name under clusters/.
ClusterConfig loadClusterRef(const std::string& ref, const std::string& where);
// Resolves a scenario reference: a file path or a preset name under plans/.
std::filesystem::path resolveScenarioPath(const std::string& ref, const std::string& where);

// Names of the shipped presets of a kind ("models", "clusters", "plans"), sorted.
std::vector<std::string> presetNames(const std::string& kind);

// Parses a scenario document:
//   {"schema_version": 1, "name": ..., "description": ..., "model": NAME|PATH|{...},
//    "cluster": NAME|PATH|{...}, "nodes": N (overrides the cluster's), "plan": {...}}
// A relative PATH is looked for beside the scenario file first (`baseDir`, the file's folder, where the
// document came from a file), then from the working directory, then as a preset name.
// Every problem (in the scenario and in inline or referenced model/cluster) is collected, then thrown.
// Plan validation against model and cluster is not done here (flags may still change the plan);
// call validatePlan or finishScenario.
Scenario parseScenario(const nlohmann::json& doc, const std::string& source,
                       const std::filesystem::path& baseDir = {});
Scenario loadScenarioFile(const std::filesystem::path& path);
// The built-in default: GPT-3 175B on 128 DGX A100 80GB nodes with Megatron's TP8 PP8 DP16 plan.
Scenario defaultScenario();
// Validates the plan against model and cluster; throws InputError with every problem.
void finishScenario(const Scenario& s);
nlohmann::json scenarioToJson(const Scenario& s);

} // namespace tessel
