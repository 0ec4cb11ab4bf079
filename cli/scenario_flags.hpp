// Command-line flags that pick a scenario and override its model, cluster and plan (shared by subcommands).
#pragma once

#include "tessel/cost/scenario.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace tessel::cli {

struct ScenarioFlags {
    std::string scenario;                 // positional SCENARIO (file or preset); empty = built-in default
    std::string model, cluster;
    std::optional<int> nodes, gpusPerNode, tp, pp, dp, cp, ep, etp, vpp, microBatch, globalBatch, zero, zeroReplicas,
        recomputeLayers;
    std::optional<std::string> recompute, sequenceParallel, schedule, precision, rankOrder, flashAttention;
    std::optional<std::string> attentionKernel, framework, frameworkVersion, offload, cpComm, halfDtype, fp8Recipe;
    std::optional<std::string> pipelineSplit, pipelineLayers, crossEntropy, recomputeModules;
    std::optional<int> firstStageLayers, lastStageLayers, cpA2a;
    std::optional<int64_t> seqLen;
    std::optional<double> powerLimit;

    void addTo(CLI::App& app);
    // Whether any flag besides SCENARIO was given (a command that reads no scenario refuses them all).
    bool anyOverride() const;
    // Loads the scenario, applies every override and validates the result. Throws InputError listing
    // every problem; problems in overridden plan fields name the flag ("--tp (/plan/tp)"). With `nodeNote`, what
    // --gpus-per-node did to the cluster's nodes (nodeSizeNote), "" where nothing.
    Scenario resolve(std::string* nodeNote = nullptr) const;
};

// A line saying what --gpus-per-node did to the cluster's nodes, "" where it kept their size: tessel's node is the
// cluster's fast-link domain and GPUs of different nodes talk over its network tier, so a node split smaller puts
// collectives the domain would keep on NVLink onto the network (64 GPUs of one GB200 NVL72 rack as 16 nodes of 4:
// the expert all-to-alls over InfiniBand, Mixtral 8x7B's step 1.128 -> 2.342 s), and a larger one puts GPUs behind
// one switch that no such node has. Part of one node (nodes 1, fewer GPUs) keeps every link and says nothing.
// `presetGpusPerNode` is the cluster's own size; `cluster` the one overridden.
std::string nodeSizeNote(const ClusterConfig& cluster, int presetGpusPerNode);

// --seq-len: the training sequence length in place of the model's (a HuggingFace config gives its position table's
// size; a learned table is taken at this length, as a tessel model file's seq_len is). Out of range: a problem
// at the flag.
void addSeqLenOption(CLI::App& app, std::optional<int64_t>& seqLen);
void overrideSeqLen(ModelConfig& model, const std::optional<int64_t>& seqLen, ProblemList& problems);
// --power-limit: the board power limit the GPUs run at (nvidia-smi -pl, or a part built for another limit), which
// moves the cluster's measured share curve by its kernels' power law (gpu.sustained_share_power, FORMULAS.md §3.3). A
// GPU without the law, or a limit at or below its idle draw: a problem at the flag.
void addPowerLimitOption(CLI::App& app, std::optional<double>& watts);
void overridePowerLimit(ClusterConfig& cluster, const std::optional<double>& watts, ProblemList& problems);
// --cross-entropy: the loss kernel (plan key cross_entropy), whose choice decides what the last stage keeps of the
// logits (docs/frameworks.md); its help lists crossEntropyKinds().
void addCrossEntropyOption(CLI::App& app, std::optional<std::string>& kind);
// Search's use of it (predict and the others read it through the plan, whose reader names /plan/cross_entropy): a
// kind tessel does not cost is a problem at the flag.
void overrideCrossEntropy(FrameworkSettings& framework, const std::optional<std::string>& kind, ProblemList& problems);
// --recompute-modules: what selective recompute reruns (plan key recompute_modules, Megatron-core's
// --recompute-modules), its names joined by commas, "none" for an empty list. Returns the recompute_module bits; a
// name tessel does not know is a problem at the flag (nullopt).
void addRecomputeModulesOption(CLI::App& app, std::optional<std::string>& modules);
std::optional<uint8_t> parseRecomputeModules(const std::string& text, ProblemList& problems);

} // namespace tessel::cli
