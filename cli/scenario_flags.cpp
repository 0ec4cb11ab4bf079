// Scenario selection and override flags: load, override, validate, and name the flag in every problem.
#include "scenario_flags.hpp"

#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

namespace tessel::cli {

void addSeqLenOption(CLI::App& app, std::optional<int64_t>& seqLen) {
    app.add_option("--seq-len", seqLen,
                   "Training sequence length (overrides the model's; a HuggingFace config gives its position table's size)");
}

void overrideSeqLen(ModelConfig& model, const std::optional<int64_t>& seqLen, ProblemList& problems) {
    if (!seqLen) return;
    if (*seqLen < 1 || *seqLen > ModelLimits::seqLen)
        problems.add("--seq-len", "must be between 1 and " + std::to_string(ModelLimits::seqLen) + ", got " +
                                      std::to_string(*seqLen));
    else model.seqLen = *seqLen;
}

void addPowerLimitOption(CLI::App& app, std::optional<double>& watts) {
    app.add_option("--power-limit", watts,
                   "Board power limit of the GPUs in watts (nvidia-smi -pl): the measured tensor-core share curve moved "
                   "to it by its power law (clusters with gpu.sustained_share_power: the H100 and H200 presets)");
}

void overridePowerLimit(ClusterConfig& cluster, const std::optional<double>& watts, ProblemList& problems) {
    if (!watts) return;
    if (const std::string why = cluster.gpu.powerLimitProblem(*watts); !why.empty()) problems.add("--power-limit", why);
    else cluster.gpu.powerLimitWatts = *watts;
}

namespace {
std::string crossEntropyKindsText() {
    std::string kinds;
    for (const std::string& k : crossEntropyKinds()) kinds += (kinds.empty() ? "" : "|") + k;
    return kinds;
}
} // namespace

void addCrossEntropyOption(CLI::App& app, std::optional<std::string>& kind) {
    app.add_option("--cross-entropy", kind,
                   "The loss kernel: " + crossEntropyKindsText() + " (fused: Megatron-core's under --cross-entropy-loss-fusion, an "
                   "fp32 softmax kept; unfused: the same loss as separate kernels, Megatron-LM's default; te: Transformer "
                   "Engine's, the gradient written into the logits; eager: cross_entropy(logits.float()); flash_attn: "
                   "flash-attn's; compiled: torch.compile's; fused_linear: Liger-Kernel's fused linear cross-entropy, the "
                   "logits never whole, tp 1; eager_16bit: cross_entropy over the 16-bit logits, no upcast). Default: the "
                   "framework's");
}

void overrideCrossEntropy(FrameworkSettings& framework, const std::optional<std::string>& kind, ProblemList& problems) {
    if (!kind) return;
    const auto& kinds = crossEntropyKinds();
    if (std::find(kinds.begin(), kinds.end(), *kind) != kinds.end()) framework.crossEntropy = *kind;
    else problems.add("--cross-entropy", "must be one of " + crossEntropyKindsText() + ", got \"" + *kind + "\"");
}

void addRecomputeModulesOption(CLI::App& app, std::optional<std::string>& modules) {
    app.add_option("--recompute-modules", modules,
                   "With --recompute selective: what each layer reruns (Megatron-core's --recompute-modules), comma-separated "
                   "from " + recomputeModulesString(recompute_module::All) + ", or none. Default: core_attn");
}

std::optional<uint8_t> parseRecomputeModules(const std::string& text, ProblemList& problems) {
    if (text == "none") return uint8_t{0};
    uint8_t bits = 0;
    bool ok = !text.empty() && text.back() != ',';
    std::string item;
    std::stringstream ss(text);
    while (ok && std::getline(ss, item, ',')) {
        const auto bit = recomputeModuleBit(item);
        ok = bit.has_value();
        if (ok) bits |= *bit;
    }
    if (ok) return bits;
    problems.add("--recompute-modules", "must be none or module names joined by commas (" +
                                            recomputeModulesString(recompute_module::All, ", ") + "), got \"" + text + "\"");
    return std::nullopt;
}

void ScenarioFlags::addTo(CLI::App& app) {
    app.add_option("scenario", scenario,
                   "Scenario file or preset name (default: gpt3-175b-megatron, GPT-3 175B on 128 DGX A100 nodes)");
    app.add_option("--model", model, "Model preset name, model JSON file, HuggingFace config.json or checkpoint folder");
    app.add_option("--cluster", cluster, "Cluster preset name or cluster JSON file");
    addSeqLenOption(app, seqLen);
    addPowerLimitOption(app, powerLimit);
    // Ranges are checked by validation so every problem is reported together, not by CLI11 one at a time.
    app.add_option("--nodes", nodes, "Number of nodes (overrides the cluster's)");
    app.add_option("--gpus-per-node", gpusPerNode, "GPUs per node the plan uses (overrides the cluster's; e.g. 1 of a host's cores)");
    app.add_option("--tp", tp, "Tensor-parallel degree");
    app.add_option("--pp", pp, "Pipeline-parallel degree");
    app.add_option("--dp", dp, "Data-parallel degree");
    app.add_option("--cp", cp, "Context-parallel degree");
    app.add_option("--cp-comm-type", cpComm,
                   "Context parallelism's exchange (Megatron-core's --cp-comm-type): p2p (the K/V ring, default), a2a "
                   "(DeepSpeed-Ulysses' all-to-all over heads), allgather (K/V gathered whole) or a2a+p2p (with --cp-a2a-size)");
    app.add_option("--cp-a2a-size", cpA2a,
                   "a2a+p2p: ranks of each all-to-all group, the ring running across the cp / size groups (Megatron-core's "
                   "--hierarchical-context-parallel-sizes)");
    app.add_option("--ep", ep, "Expert-parallel degree (carved out of dp; with --etp, of tp x cp x dp)");
    app.add_option("--etp", etp,
                   "Expert tensor-parallel degree (Megatron-core's --expert-tensor-parallel-size; default: tp). Differing "
                   "from tp lays the expert layers out on their own (MoE parallel folding)");
    app.add_option("--vpp", vpp, "Virtual pipeline stages per rank (interleaved_1f1b)");
    app.add_option("--micro-batch", microBatch, "Micro-batch size (sequences)");
    app.add_option("--global-batch", globalBatch, "Global batch size (sequences per step)");
    app.add_option("--zero", zero, "ZeRO stage 0-3");
    app.add_option("--zero-replicas", zeroReplicas,
                   "Hybrid sharding: replicas of the sharded ZeRO state across the data-parallel group (1 = shard over all)");
    app.add_option("--recompute", recompute, "Activation recompute: none|selective|full");
    app.add_option("--recompute-layers", recomputeLayers,
                   "With --recompute full: layers of each chunk recomputed, from its first (Megatron-LM's block "
                   "method); 0: every layer");
    app.add_option("--sequence-parallel", sequenceParallel, "Sequence parallelism: on|off");
    app.add_option("--flash-attention", flashAttention, "Flash attention: on|off");
    app.add_option("--schedule", schedule, "Pipeline schedule: gpipe|1f1b|interleaved_1f1b|zero_bubble|dualpipev|zero_bubble_v (the last two: vpp 2)");
    app.add_option("--precision", precision,
                   "Precision recipe: megatron|mixed|fp8|nvfp4|fsdp|fsdp_pure|fsdp_fp8|fsdp_amp|amp|bf16_no_master|fp32|tf32|cpu_fp64|cpu_fp32");
    app.add_option("--half-dtype", halfDtype,
                   "The 16-bit compute type of a 16-bit recipe: bf16 (default) or fp16 (Volta has no bf16)");
    app.add_option("--fp8-recipe", fp8Recipe,
                   "With --precision fp8: Transformer Engine's scaling (Megatron-core's --fp8-recipe): delayed (default), "
                   "tensorwise (current scaling: an amax pass before each cast), mxfp8 or blockwise");
    app.add_option("--attention-kernel", attentionKernel, "Fused attention kernel of the GPU (flash1, flash2, flash3, cudnn: its attention_kernels) or auto");
    app.add_option("--framework", framework,
                   "What runs the plan, for its overlap defaults: generic|megatron|nemo|megascale|deepspeed|fsdp|torchtitan");
    app.add_option("--framework-version", frameworkVersion, "Framework version: a year, a container (24.05) or the framework's release (core_r0.9.0, DeepSpeed 0.6.0, PyTorch 2.1)");
    addCrossEntropyOption(app, crossEntropy);
    addRecomputeModulesOption(app, recomputeModules);
    app.add_option("--rank-order", rankOrder, "Rank order, fastest first (default tp-cp-ep-dp-pp)");
    app.add_option("--offload", offload,
                   "What lives in host memory: none, or optimizer, parameters, activations (checkpointed inputs) or "
                   "activations:N (N layers' activations, Megatron-core's CPU offloading) joined by '+' "
                   "(e.g. optimizer+parameters; needs the cluster's host block)");
    app.add_option("--pipeline-split", pipelineSplit,
                   "Layers over pipeline stages: even (pp x vpp divides the layers), balanced (against the time of the "
                   "embedding and the output layer + loss) or ends_as_layers (each counted as one layer, Megatron-LM's "
                   "--account-for-embedding/loss-in-pipeline-split)");
    app.add_option("--pipeline-layers", pipelineLayers, "Layers of every virtual pipeline stage, comma-separated (e.g. 7,8,8,7)");
    app.add_option("--first-stage-layers", firstStageLayers, "Layers on the first pipeline rank (Megatron-LM's "
                                                             "--decoder-first-pipeline-num-layers)");
    app.add_option("--last-stage-layers", lastStageLayers, "Layers on the last pipeline rank (Megatron-LM's "
                                                           "--decoder-last-pipeline-num-layers)");
}

bool ScenarioFlags::anyOverride() const {
    return !model.empty() || !cluster.empty() || nodes || gpusPerNode || tp || pp || dp || cp || ep || etp || vpp || microBatch ||
           globalBatch || zero || zeroReplicas || recomputeLayers || recompute || sequenceParallel || schedule ||
           precision || halfDtype || fp8Recipe || rankOrder || flashAttention || attentionKernel || framework || frameworkVersion || offload || cpComm || cpA2a ||
           pipelineSplit || pipelineLayers || firstStageLayers || lastStageLayers || seqLen || powerLimit || crossEntropy ||
           recomputeModules;
}

Scenario ScenarioFlags::resolve(std::string* nodeNote) const {
    ProblemList problems;
    Scenario s;
    std::string scenarioFile; // the scenario's path, once resolved
    std::optional<ModelConfig> flagModel;
    std::optional<ClusterConfig> flagCluster;
    if (!model.empty()) {
        try {
            flagModel = loadModelRef(model, "--model");
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
    }
    if (!cluster.empty()) {
        try {
            flagCluster = loadClusterRef(cluster, "--cluster"); // brings its own node count unless --nodes
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
    }
    try {
        if (scenario.empty()) {
            s = defaultScenario();
        } else {
            // A model or cluster given by flag takes the place of the scenario's before the scenario is read, so
            // a reference the scenario names that does not resolve here (a scenario written on the GPU machine,
            // naming a cluster file there) is no error when the flag replaces it.
            const std::filesystem::path path = resolveScenarioPath(scenario, "SCENARIO");
            scenarioFile = path.string();
            nlohmann::json doc = readJsonFile(path.string());
            if (doc.is_object() && flagModel) doc["model"] = modelToJson(*flagModel);
            if (doc.is_object() && flagCluster) {
                doc["cluster"] = clusterToJson(*flagCluster);
                doc.erase("nodes"); // the flag's cluster brings its own node count, as it always has
                doc.erase("gpus_per_node");
            }
            s = parseScenario(doc, path.string(), path.parent_path());
            if (s.name.empty()) s.name = path.stem().string();
        }
    } catch (const InputError& e) {
        problems.append(e.problems());
    }
    if (flagModel) s.model = *flagModel;
    if (flagCluster) s.cluster = *flagCluster;
    overrideSeqLen(s.model, seqLen, problems);
    problems.throwIfAny();
    // A scenario whose model or cluster was replaced is no longer the one its name says.
    if (!model.empty() || !cluster.empty())
        s.name = (scenario.empty() ? std::string() : s.name + " with ") + s.model.name + " on " + s.cluster.name;

    // Overrides go through the same plan parser as files, so ranges and enums are checked identically.
    nlohmann::json overrides = nlohmann::json::object();
    std::map<std::string, std::string> flagOf; // plan key -> flag
    auto setInt = [&](const std::optional<int>& v, const char* key, const char* flag) {
        if (v) {
            overrides[key] = *v;
            flagOf[key] = flag;
        }
    };
    auto setStr = [&](const std::optional<std::string>& v, const char* key, const char* flag) {
        if (v) {
            overrides[key] = *v;
            flagOf[key] = flag;
        }
    };
    auto setOnOff = [&](const std::optional<std::string>& v, const char* key, const char* flag) {
        if (!v) return;
        flagOf[key] = flag;
        if (*v == "on" || *v == "true") overrides[key] = true;
        else if (*v == "off" || *v == "false") overrides[key] = false;
        else problems.add(flag, "must be on or off, got \"" + *v + "\"");
    };
    setInt(tp, "tp", "--tp");
    setInt(pp, "pp", "--pp");
    setInt(dp, "dp", "--dp");
    setInt(cp, "cp", "--cp");
    setInt(ep, "ep", "--ep");
    setInt(etp, "etp", "--etp");
    setInt(vpp, "vpp", "--vpp");
    setInt(microBatch, "micro_batch", "--micro-batch");
    setInt(globalBatch, "global_batch", "--global-batch");
    setInt(zero, "zero_stage", "--zero");
    setInt(zeroReplicas, "zero_replicas", "--zero-replicas");
    setStr(recompute, "recompute", "--recompute");
    setInt(recomputeLayers, "recompute_layers", "--recompute-layers");
    setStr(schedule, "schedule", "--schedule");
    setStr(precision, "precision", "--precision");
    setStr(halfDtype, "half_dtype", "--half-dtype");
    setStr(fp8Recipe, "fp8_recipe", "--fp8-recipe");
    setStr(rankOrder, "rank_order", "--rank-order");
    setStr(attentionKernel, "attention_kernel", "--attention-kernel");
    setStr(cpComm, "cp_comm_type", "--cp-comm-type");
    setInt(cpA2a, "cp_a2a_size", "--cp-a2a-size");
    setStr(framework, "framework", "--framework");
    setStr(frameworkVersion, "framework_version", "--framework-version");
    setStr(crossEntropy, "cross_entropy", "--cross-entropy");
    setOnOff(sequenceParallel, "sequence_parallel", "--sequence-parallel");
    setOnOff(flashAttention, "flash_attention", "--flash-attention");
    if (offload) {
        // "none" or parts joined by '+': optimizer, parameters, activations.
        // "activations:N" is N layers' every activation (Megatron-core's --cpu-offloading-num-layers).
        bool parts[3] = {false, false, false};
        int activationLayers = 0;
        const char* names[3] = {"optimizer", "parameters", "activations"};
        const char* keys[3] = {"offload_optimizer", "offload_parameters", "offload_activations"};
        if (*offload != "none") {
            size_t start = 0;
            while (start <= offload->size()) {
                const size_t end = std::min(offload->find('+', start), offload->size());
                const std::string part = offload->substr(start, end - start);
                bool known = false;
                for (int i = 0; i < 3; ++i)
                    if (part == names[i]) parts[i] = known = true;
                const std::string layersPrefix = "activations:";
                if (!known && part.rfind(layersPrefix, 0) == 0) {
                    const std::string n = part.substr(layersPrefix.size());
                    if (!n.empty() && n.size() < 7 && std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                        std::stoi(n) > 0) {
                        activationLayers = std::stoi(n);
                        known = true;
                    }
                }
                if (!known)
                    problems.add("--offload", "must be none or optimizer, parameters, activations or activations:N (N "
                                              "layers' activations, N >= 1) joined by '+', got \"" + *offload + "\"");
                start = end + 1;
            }
        }
        for (int i = 0; i < 3; ++i) {
            overrides[keys[i]] = parts[i];
            flagOf[keys[i]] = "--offload";
        }
        overrides["offload_activation_layers"] = activationLayers;
        flagOf["offload_activation_layers"] = "--offload";
    }

    if (recomputeModules) {
        if (const auto bits = parseRecomputeModules(*recomputeModules, problems)) {
            overrides["recompute_modules"] = nlohmann::json(recomputeModulesList(*bits));
            flagOf["recompute_modules"] = "--recompute-modules";
        }
    }
    setStr(pipelineSplit, "pipeline_split", "--pipeline-split");
    setInt(firstStageLayers, "first_stage_layers", "--first-stage-layers");
    setInt(lastStageLayers, "last_stage_layers", "--last-stage-layers");
    if (pipelineLayers) {
        nlohmann::json list = nlohmann::json::array();
        bool parsed = true;
        std::string item;
        std::stringstream ss(*pipelineLayers);
        while (std::getline(ss, item, ',')) {
            try {
                size_t used = 0;
                const int n = std::stoi(item, &used);
                if (used != item.size()) throw std::invalid_argument(item);
                list.push_back(n);
            } catch (const std::exception&) {
                problems.add("--pipeline-layers", "must be comma-separated integers, got \"" + *pipelineLayers + "\"");
                parsed = false;
                break;
            }
        }
        if (parsed) { // a list that did not parse is one problem, not also a wrong-length plan
            overrides["pipeline_layers"] = list;
            flagOf["pipeline_layers"] = "--pipeline-layers";
        }
    }

    nlohmann::json merged = planToJson(s.plan);
    merged.erase("dtype"); // derived from the precision recipe; an override of precision must not conflict
    // A recipe that is the scenario's framework default (parsePlan: torchtitan's and FSDP's by how they shard,
    // Megatron-LM's for the rest) follows the flags: --framework torchtitan on a Megatron-LM scenario runs
    // torchtitan's recipe, not Megatron-LM's bf16 weights beside an fp32 master. --precision, or a recipe the
    // file chose that is not its framework's default, stays.
    if (!precision && !overrides.empty()) {
        nlohmann::json unstated = merged;
        unstated.erase("precision");
        ProblemList ignored;
        if (parsePlan(unstated, "/plan", ignored).precision == s.plan.precision) merged.erase("precision");
    }
    // A split given on the command line replaces the file's, however that was stated.
    if (pipelineSplit || pipelineLayers || firstStageLayers || lastStageLayers)
        for (const char* key : {"pipeline_split", "pipeline_layers", "first_stage_layers", "last_stage_layers"}) merged.erase(key);
    // --recompute other than selective drops the file's modules, which only selective recompute reads.
    if (recompute && *recompute != "selective" && !recomputeModules) merged.erase("recompute_modules");
    for (auto it = overrides.begin(); it != overrides.end(); ++it) merged[it.key()] = it.value();
    // A degree of 1 given on the command line takes with it the file's settings that only exist above 1, as
    // --recompute takes the modules: sequence parallelism at --tp 1 (a no-op that Megatron-LM itself switches off,
    // "Disabling sequence parallelism because tensor model parallelism is disabled"), and at --pp 1 the pipelined
    // schedules and their virtual stages (plain 1f1b, one chunk). A flag that states them keeps them, and the plan's
    // check says why they cannot run.
    if (tp && *tp == 1 && !sequenceParallel) merged["sequence_parallel"] = false;
    if (pp && *pp == 1 && !schedule && !vpp) {
        ProblemList ignored;
        const Plan file = parsePlan(merged, "/plan", ignored);
        if (file.schedule == Schedule::Interleaved1F1B || file.vShape()) {
            merged["schedule"] = "1f1b";
            merged["vpp"] = 1;
        }
    }
    if (nodes) {
        if (*nodes < 1) problems.add("--nodes", "must be at least 1, got " + std::to_string(*nodes));
        else s.cluster.nodes = *nodes;
    }
    const int presetGpusPerNode = s.cluster.gpusPerNode;
    if (gpusPerNode) {
        if (*gpusPerNode < 1) problems.add("--gpus-per-node", "must be at least 1, got " + std::to_string(*gpusPerNode));
        else s.cluster.gpusPerNode = *gpusPerNode;
    }
    if (nodes || gpusPerNode) checkClusterGpus(s.cluster.nodes, s.cluster.gpusPerNode, nodes ? "--nodes" : "--gpus-per-node", problems);
    overridePowerLimit(s.cluster, powerLimit, problems);
    ProblemList planProblems;
    s.plan = parsePlan(merged, "/plan", planProblems);
    if (planProblems.empty()) validatePlan(s.model, s.cluster, s.plan, "/plan", planProblems);
    if (planProblems.empty()) resolvePipelineSplit(s.model, s.cluster, s.plan);
    // A problem of a file's plan, no flag changing it, is named in the file as the parser names its own
    // (FILE#/plan/tp); with flags it may be theirs or the file's, so the plan's pointer stays as it is.
    const bool fileOnly = !scenarioFile.empty() && !anyOverride();
    for (auto p : planProblems.items()) {
        for (const auto& [key, flag] : flagOf) {
            if (p.where == "/plan/" + key || p.where.rfind("/plan/" + key + "/", 0) == 0) p.where = flag + " (" + p.where + ")";
        }
        if (fileOnly && p.where.rfind("/plan", 0) == 0) p.where = scenarioFile + "#" + p.where;
        problems.add(p.where, p.message);
    }
    problems.throwIfAny();
    if (nodeNote) *nodeNote = nodeSizeNote(s.cluster, presetGpusPerNode);
    return s;
}

std::string nodeSizeNote(const ClusterConfig& cluster, int presetGpusPerNode) {
    const int n = cluster.gpusPerNode;
    // Part of one node (64 of a rack's 72, one of a host's cores) keeps every link the cluster's: nothing to say.
    if (n == presetGpusPerNode || presetGpusPerNode < 1 || (n < presetGpusPerNode && cluster.nodes == 1)) return "";
    std::string note = "nodes of " + std::to_string(n) + " GPUs, where a node of " + cluster.name + " holds " +
                       std::to_string(presetGpusPerNode) + " behind " + cluster.intraNode.name;
    if (n > presetGpusPerNode) return note + ": tessel costs all " + std::to_string(n) + " behind it, a node larger than the cluster's";
    note += ": GPUs of different nodes talk over " + cluster.interNode.name;
    const int64_t world = static_cast<int64_t>(n) * cluster.nodes;
    if (cluster.nodes > 1 && world <= presetGpusPerNode)
        note += " (the " + std::to_string(world) + " GPUs in one node: --nodes 1 --gpus-per-node " + std::to_string(world) + ")";
    return note;
}

} // namespace tessel::cli
