// Command-line flags that pick a scenario and override its model, cluster and plan (shared by subcommands).
#pragma once

#include "tessel/cost/scenario.hpp"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace tessel::cli {

struct ScenarioFlags {
    std::string scenario;                 // positional SCENARIO (file or preset); empty = built-in default
    std::string model, cluster;
    std::optional<int> nodes, gpusPerNode, tp, pp, dp, cp, ep, vpp, microBatch, globalBatch, zero, zeroReplicas,
        recomputeLayers;
    std::optional<std::string> recompute, sequenceParallel, schedule, precision, rankOrder, flashAttention;
    std::optional<std::string> attentionKernel, framework, frameworkVersion, offload;
    std::optional<std::string> pipelineSplit, pipelineLayers;
    std::optional<int> firstStageLayers, lastStageLayers;

    void addTo(CLI::App& app);
    // Loads the scenario, applies every override and validates the result. Throws InputError listing
    // every problem; problems in overridden plan fields name the flag ("--tp (/plan/tp)").
    Scenario resolve() const;
};

} // namespace tessel::cli
