// Reads recompute and sequence parallelism of a published record's run (validation_reading.hpp), raised until the
// plan fits as the published run did, the micro-batch where one a step does not fit, the framework defaults that
// decided something, and the finished plan checked as tessel's plan format checks it.
#include "search_space.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/simulate.hpp"
#include "validation_prose.hpp"
#include "validation_reading.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>

namespace tessel::sim::detail {

using namespace prose;

// Recompute and sequence parallelism (raised until a published plan fits), the micro-batch where one a step
// does not fit, the framework defaults that decided something, and the plan checked as tessel's plan format checks it.
bool readRecomputeAndCheck(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    Plan& plan = r.c.scenario.plan;
    ModelConfig& model = r.c.scenario.model;
    const bool microBatchAssumed = r.microBatchAssumed;
    // Recompute and sequence parallelism: stated, or the framework default; a default that would not fit in
    // memory is raised step by step (a published run ran, so it fit).
    bool recomputeKnown = false;
    plan.recompute = parseRecompute(text(pl, "recompute"), recomputeKnown);
    // Under a config's own keys where the schema's is absent, each a flag or words: Megatron-LM's
    // --recompute-granularity (full / selective) and --recompute-method (uniform / block: full), its older
    // --checkpoint-activations (full) and --recompute-activations (selective: arguments.py sets the granularity),
    // Hugging Face's gradient_checkpointing and a config's activation_checkpointing (whole layers).
    struct RecomputeKey {
        const char* key;
        Recompute whenTrue;
    };
    static const RecomputeKey recomputeKeys[] = {
        {"recompute_granularity", Recompute::Full},   {"activation_checkpointing", Recompute::Full},
        {"gradient_checkpointing", Recompute::Full},  {"checkpoint_activations", Recompute::Full},
        {"recompute_activations", Recompute::Selective}, {"recompute_method", Recompute::Full},
        {"activation_checkpoint", Recompute::Full}}; // torchtitan's section: its mode, "full", "selective" or "none"
    for (const RecomputeKey& k : recomputeKeys) {
        if (recomputeKnown || member(pl, "recompute")) break;
        const nlohmann::json* v = member(pl, k.key);
        if (!v) continue;
        if (v->is_boolean()) {
            plan.recompute = v->get<bool>() ? k.whenTrue : Recompute::None;
            recomputeKnown = true;
        } else {
            plan.recompute = parseRecompute(text(pl, k.key), recomputeKnown);
        }
        if (recomputeKnown)
            r.assume(std::string("recompute ") + toString(plan.recompute) + ", read from " + k.key + " " +
                     (v->is_string() ? "\"" + v->get<std::string>() + "\"" : v->dump()));
    }
    // JAX's rematerialisation as MaxText names it (`remat_policy`, MaxText's base.yml): what a policy keeps
    // decides what XLA reruns, the linearization points the backward consumes that the policy does not keep
    // (jax.checkpoint), so a rerun MLP stops before fc2 (checkpoint_early_stop, FORMULAS.md §3.4). Each read
    // as the nearest plan tessel costs, said.
    if (!recomputeKnown && !member(pl, "recompute") && !text(pl, "remat_policy").empty()) {
        namespace rm = recompute_module;
        const std::string policy = lower(text(pl, "remat_policy"));
        struct Remat {
            const char* name;
            Recompute recompute;
            uint8_t modules;
            const char* reading;
        };
        static const Remat policies[] = {
            {"full", Recompute::Full, 0, "nothing kept but the layer's input: full recompute"},
            {"minimal", Recompute::Selective, rm::CoreAttn,
             "every weight GEMM's output kept, the attention core rerun"},
            {"save_dot_with_context_except_mlp", Recompute::Selective, rm::Mlp,
             "the attention's projections and output kept, the MLP rerun"},
            {"save_dot_except_mlpwi", Recompute::Selective, rm::CoreAttn | rm::Mlp,
             "the attention's projections and the MLP's output kept, the attention core and the MLP rerun"},
            {"save_dot_except_mlp", Recompute::Selective, rm::CoreAttn | rm::Mlp,
             "the attention's projections kept, the attention core and the MLP rerun"},
            {"save_qkv_proj", Recompute::Full, 0,
             "q, k and v kept, read as full recompute: the QKV GEMM rerun and q, k and v not counted in "
             "memory"},
            {"save_out_proj", Recompute::Full, 0,
             "the attention's output projection kept, read as full recompute: that GEMM rerun"},
        };
        std::optional<Remat> found;
        for (const Remat& p : policies)
            if (policy == p.name) found = p;
        std::string reading = found ? found->reading : "";
        if (!found && policy == "custom") {
            // MaxText's custom policy: each named tensor kept on the device, offloaded (kept on the host) or
            // rematerialised, 'remat' where the record does not say (base.yml's defaults); any other word is
            // said and read as 'remat'.
            std::map<std::string, bool> isKept;
            for (const char* name : {"query_proj", "key_proj", "value_proj", "qkv_proj", "out_proj",
                                     "context", "mlpwi", "mlpwi_0", "mlpwi_1", "mlpwo"}) {
                const std::string v = lower(text(pl, name));
                if (!v.empty() && v != "device" && v != "offload" && v != "remat")
                    r.unread(std::string("plan/") + name, text(pl, name),
                             "placement MaxText's custom policy takes (device, offload, remat)",
                             "read as remat");
                isKept[name] = v == "device" || v == "offload";
            }
            const bool qkvKept =
                (isKept["query_proj"] && isKept["key_proj"] && isKept["value_proj"]) || isKept["qkv_proj"];
            const bool mlpKept = isKept["mlpwi"] || (isKept["mlpwi_0"] && isKept["mlpwi_1"]);
            const bool contextKept = isKept["context"], outKept = isKept["out_proj"];
            const uint8_t modules =
                static_cast<uint8_t>((contextKept ? 0 : rm::CoreAttn) | (mlpKept ? 0 : rm::Mlp));
            if (!qkvKept) {
                found = Remat{"custom", Recompute::Full, 0, ""};
                reading = "q, k and v not kept: full recompute";
            } else {
                found = Remat{"custom", modules ? Recompute::Selective : Recompute::None, modules, ""};
                reading = std::string("q, k and v kept; ") +
                          (modules ? "rerun: " + recomputeModulesString(modules, " and ")
                                   : std::string("nothing rerun")) +
                          (outKept ? "" : "; the attention's output projection rerun, not counted");
            }
        }
        if (found) {
            plan.recompute = found->recompute;
            if (plan.recompute == Recompute::Selective) plan.recomputeModules = found->modules;
            recomputeKnown = true;
            const bool stopStated = plan.framework.checkpointEarlyStop.has_value();
            if (!stopStated) plan.framework.checkpointEarlyStop = true;
            r.assume("recompute " + toString(plan.recompute) + " read from remat_policy \"" + policy +
                     "\" (JAX's remat as MaxText names it): " + reading +
                     (stopStated
                          ? ""
                          : "; XLA reruns only what the backward consumes, so a rerun MLP stops before fc2 "
                            "(checkpoint_early_stop)"));
        } else {
            r.unread("plan/remat_policy", text(pl, "remat_policy"),
                     "remat policy MaxText names (full, minimal, save_dot_with_context_except_mlp, "
                     "save_dot_except_mlpwi, save_dot_except_mlp, save_qkv_proj, save_out_proj, custom)",
                     "recompute read as not stated");
        }
    }
    // Megatron-LM's block method recomputes only --recompute-num-layers layers of each chunk (plan
    // recompute_layers); its uniform method with n > 1 layers per checkpoint recomputes every layer and keeps
    // fewer inputs than tessel's one per layer. Both read from the config's names or the record's prose.
    if (plan.recompute == Recompute::Full) {
        const std::string rc = lower(text(pl, "recompute"));
        const std::string method = lower(text(pl, "recompute_method")) + " " + rc;
        std::optional<int64_t> layers = integer(pl, "recompute_num_layers");
        std::smatch m;
        if (!layers && std::regex_search(rc, m, std::regex(R"(\b([0-9]{1,6}) layers?\b)"))) layers = std::stoll(m[1].str());
        if (layers && *layers > model.layers) layers = model.layers; // beyond any chunk: every layer
        const std::string shown = text(pl, "recompute").empty() ? text(pl, "recompute_method") : text(pl, "recompute");
        if (contains(method, "block") && layers && *layers >= model.layers) {
            r.assume("recompute \"" + shown + "\": the block method's count reaches every layer of every chunk: every layer "
                   "recomputed");
        } else if (contains(method, "block") && layers && *layers > 0) {
            plan.recomputeLayers = static_cast<int>(*layers);
            r.assume("recompute \"" + shown + "\": the first " + std::to_string(*layers) +
                   " layers of each chunk recomputed, the rest keep their activations (Megatron-LM's block method)");
        } else if (contains(method, "block") || (layers && *layers > 1)) {
            r.assume("recompute \"" + shown + "\" read as every layer recomputed, one checkpoint each" +
                   (contains(method, "block") ? " (no positive layer count given for the block method)"
                                              : " (tessel keeps one checkpoint per layer, not one per " +
                                                    std::to_string(*layers) + ")"));
        }
    }
    // As a flag (llm-foundry's "Activation Checkpointing: True", a config's activation_checkpointing): on is
    // every layer recomputed, off is none.
    if (const nlohmann::json* flag = member(pl, "recompute"); !recomputeKnown && flag && flag->is_boolean()) {
        plan.recompute = flag->get<bool>() ? Recompute::Full : Recompute::None;
        recomputeKnown = true;
    }
    // In the record's prose: "pre-trained on 8K sequences without activation checkpointing" (Meta's Llama 3 report),
    // "full activation checkpointing" in its techniques; said with the sentence it came from.
    if (!recomputeKnown)
        if (const auto said = recomputeInProse(text(pl, "techniques") + ". " + text(r.rec, "notes") + ". " +
                                               text(pl, "activation_checkpointing"))) {
            plan.recompute = said->first;
            recomputeKnown = true;
            r.assume("recompute " + toString(plan.recompute) + ", read from the record's words (\"" + said->second + "\")");
        }
    // Stated in words none of the above reads: said as such, not as unstated.
    if (!recomputeKnown) {
        for (const char* key :
             {"recompute", "recompute_granularity", "activation_checkpointing", "gradient_checkpointing",
              "checkpoint_activations", "recompute_activations", "recompute_method", "activation_checkpoint"})
            if (const nlohmann::json* v = member(pl, key); v && !v->is_null()) {
                r.unread(std::string("plan/") + key, text(pl, key),
                         "recompute tessel reads (full, selective, none, true / false, or words naming them)",
                         "read as not stated");
                break;
            }
    }
    // Megatron-core's --recompute-modules (a list, or its names in one string): what selective recompute reruns.
    // Stated beside another recompute (Megatron-core reads it under selective only), or naming what this model lacks
    // (which Megatron-core skips), it is said and not read; a name tessel does not know is a refusal.
    // Without the key, the recompute's own words may list them ("selective (mla_up_proj, mlp)").
    nlohmann::json fromWords;
    if (!member(pl, "recompute_modules") && plan.recompute == Recompute::Selective) {
        const std::string words = lower(text(pl, "recompute"));
        for (const auto& [name, bit] : recomputeModuleNames())
            if (std::regex_search(words, std::regex("(^|[^a-z_])" + name + "([^a-z_]|$)"))) fromWords.push_back(name);
    }
    const nlohmann::json* statedModules = member(pl, "recompute_modules");
    if (!statedModules && !fromWords.empty()) statedModules = &fromWords;
    if (const nlohmann::json* mods = statedModules; mods && !mods->is_null()) {
        std::vector<std::string> names;
        if (mods->is_array()) {
            for (const auto& v : *mods) names.push_back(v.is_string() ? v.get<std::string>() : v.dump());
        } else {
            std::string t = mods->is_string() ? mods->get<std::string>() : mods->dump();
            std::replace(t.begin(), t.end(), ' ', ',');
            for (const std::string& n : pythonStringList(t))
                if (!n.empty()) names.push_back(n);
        }
        uint8_t bits = 0;
        for (const std::string& n : names) {
            const auto bit = recomputeModuleBit(n);
            if (!bit) {
                refusal = ptr + "/plan/recompute_modules: \"" + n + "\" is not a recompute module tessel costs (" +
                          recomputeModulesString(recompute_module::All, ", ") + ")";
                return false;
            }
            bits |= *bit;
        }
        if (plan.recompute != Recompute::Selective) {
            r.assume("recompute_modules stated with recompute " + toString(plan.recompute) +
                     ": Megatron-core reads it under selective recompute only, so it is not read");
        } else {
            Plan probe = plan;
            probe.recomputeModules = bits;
            std::string dropped;
            for (const auto& [name, bit] : recomputeModuleNames()) {
                if (!(bits & bit) || bit == recompute_module::Default) continue;
                Plan one = probe;
                one.recomputeModules = bit;
                if (const auto why = recomputeModuleProblems(model, one); !why.empty()) {
                    bits &= static_cast<uint8_t>(~bit);
                    dropped += (dropped.empty() ? "" : "; ") + why.front().second;
                }
            }
            plan.recomputeModules = bits;
            r.assume("selective recompute of " + (bits ? recomputeModulesString(bits) : std::string("nothing")) +
                     " (Megatron-core's recompute_modules)" + (dropped.empty() ? "" : "; not read: " + dropped));
        }
    }
    // Megatron-core's CPU offloading of the first N layers' activations (cpu_offloading_num_layers, with
    // cpu_offloading on where stated): it runs without recompute, so an unstated recompute is none.
    const auto offloadLayers = integer(pl, "cpu_offloading_num_layers");
    if (const auto stated = number(pl, "cpu_offloading_num_layers");
        stated && (!offloadLayers || *offloadLayers >= model.layers)) {
        char shown[32];
        std::snprintf(shown, sizeof shown, "%g", *stated);
        refusal = ptr + "/plan/cpu_offloading_num_layers: " + shown + " is not a layer count Megatron-core offloads (0 to " +
                  std::to_string(model.layers - 1) + ")";
        return false;
    }
    if (const auto layers = offloadLayers; layers && *layers > 0 && boolean(pl, "cpu_offloading").value_or(true)) {
        plan.offloadActivationLayers = static_cast<int>(*layers);
        if (!recomputeKnown) {
            plan.recompute = Recompute::None;
            recomputeKnown = true;
            r.assume("recompute none: Megatron-core's CPU offloading (cpu_offloading_num_layers " + std::to_string(*layers) +
                     ") runs without activation recompute");
        }
    }
    // DeepSpeed's activation checkpoints in host memory (activation_checkpointing.cpu_checkpointing, Megatron-DeepSpeed's
    // --checkpoint-in-cpu), as a flag or as offload prose that names activations ("optimizer and activations"): every
    // checkpointed layer input swapped out, so it runs with full recompute (an unstated recompute is full).
    std::optional<bool> offloadActivations;
    for (const char* key : {"offload_activations", "cpu_checkpointing", "checkpoint_in_cpu", "activation_offload"})
        if (!offloadActivations) offloadActivations = boolean(pl, key);
    if (!offloadActivations && plan.offloadActivationLayers == 0) {
        const std::string prose = lower(text(pl, "offload") + " " + text(pl, "cpu_offload"));
        if (contains(prose, "activation") &&
            !std::regex_search(prose, std::regex(R"((no|not|without|w/o)[- ]+(cpu[- ]+)?offload(ing)?[^.;]*activation)")))
            offloadActivations = true;
    }
    if (offloadActivations && *offloadActivations) {
        if (!recomputeKnown) {
            plan.recompute = Recompute::Full;
            recomputeKnown = true;
            r.assume("recompute full: activation checkpoints offloaded to host memory (DeepSpeed's cpu_checkpointing) "
                     "are the checkpointed layer inputs");
        }
        if (plan.recompute == Recompute::Full && plan.recomputeLayers == 0) {
            plan.offloadActivations = true;
            r.assume("activation offload: every layer's checkpointed input in host memory (DeepSpeed's cpu_checkpointing)");
        } else {
            r.assume("activation offload stated without every layer recomputed: DeepSpeed's cpu_checkpointing swaps "
                     "checkpointed layer inputs, so it is not costed here");
        }
    }
    auto sp = boolean(pl, "sequence_parallel");
    if (!sp) {
        // Prose: "enabled (Megatron SP)", "sequence parallel with TP"; a denial ("disabled", "no SP") is off.
        const std::string t = lower(text(pl, "sequence_parallel"));
        if (std::regex_search(t, std::regex(R"((^|[^a-z])(no|not|without|w/o|disabled?)([^a-z]|$))"))) sp = false;
        else if (contains(t, "enabled") || contains(t, "sequence parallel") ||
                 std::regex_search(t, std::regex(R"((^|[^a-z])sp([^a-z]|$))")))
            sp = true;
        if (sp) r.assume("sequence_parallel \"" + text(pl, "sequence_parallel") + "\" read as " + (*sp ? "on" : "off"));
        else if (const nlohmann::json* v = member(pl, "sequence_parallel"); v && !v->is_null())
            r.unread("plan/sequence_parallel", text(pl, "sequence_parallel"),
                     "setting tessel reads (true / false, on / off, enabled / disabled)",
                     "read as not stated");
    }
    plan.sequenceParallel = sp.value_or(false) && plan.tp > 1;
    // Expert parallelism splits expert layers; a model without them has none to split, so the degree is 1, said (a
    // record naming its experts under a key tessel does not read would otherwise lose them in silence).
    if (!model.moe && plan.ep > 1) {
        r.assume("ep " + std::to_string(plan.ep) + " read as 1: the model states no routed experts (num_experts, " +
                 "num_local_experts, n_routed_experts, moe_num_experts), so it has no expert layers to split");
        plan.ep = 1;
    }
    auto fits = [&] {
        ProblemList problems;
        validatePlan(model, c.scenario.cluster, plan, "/plan", problems);
        return problems.empty() && predictMemory(model, c.scenario.cluster, plan).fits;
    };
    if (!recomputeKnown || !sp) {
        std::vector<std::string> raised;
        if (!sp && plan.tp > 1 && !fits()) {
            plan.sequenceParallel = true;
            raised.push_back("sequence parallelism on");
        }
        if (!recomputeKnown && !fits()) {
            plan.recompute = Recompute::Selective;
            raised.push_back("selective recompute");
            // An MoE or latent-attention model under Megatron-core: before full recompute, the module sets
            // Megatron-Bridge's MoE recipes recompute (selectiveModuleLadder), the fastest that fits, as a tuned recipe
            // would pick.
            if (!fits()) {
                std::optional<std::pair<double, uint8_t>> best;
                for (uint8_t set : selectiveModuleLadder(model, plan.framework)) {
                    if (set == recompute_module::Default) continue;
                    plan.recomputeModules = set;
                    if (!fits()) continue;
                    const double step = simulatePlan(model, c.scenario.cluster, plan).metrics.stepSeconds;
                    if (!best || step < best->first) best = std::make_pair(step, set);
                }
                plan.recomputeModules = best ? best->second : recompute_module::Default;
                if (best)
                    raised.back() = "selective recompute of " + recomputeModulesString(best->second) +
                                    " (the fastest of Megatron-Bridge's module sets that fits)";
            }
            if (!fits()) {
                plan.recompute = Recompute::Full;
                plan.recomputeModules = recompute_module::Default;
                raised.back() = "full recompute";
            }
        }
        std::string what = std::string(!recomputeKnown ? "recompute" : "") + (!recomputeKnown && !sp ? " and " : "") +
                           (!sp ? "sequence parallelism" : "");
        r.assume(what + " not stated: " +
               (raised.empty() ? std::string("framework default (") + toString(plan.recompute) +
                                     (sp ? "" : plan.sequenceParallel ? ", SP on" : ", SP off") + ")"
                               : "raised until the plan fits in memory: " + [&] {
                                     std::string s;
                                     for (const auto& entry : raised) s += (s.empty() ? "" : ", ") + entry;
                                     return s;
                                 }()));
    }
    if (sp && *sp && plan.tp == 1) plan.sequenceParallel = false;
    // A run that ran fit: when one micro-batch a step (the assumed default above) does not, with the recompute
    // settled, the largest micro-batch that divides the batch and fits is taken, accumulating over the rest.
    if (microBatchAssumed && !fits()) {
        const int perRank = plan.globalBatch / plan.dp;
        int mb = plan.microBatch;
        while (mb > 1 && !fits()) {
            --mb;
            while (mb > 1 && perRank % mb != 0) --mb;
            plan.microBatch = mb;
        }
        r.assume("one micro-batch of " + std::to_string(perRank) + " sequences a rank does not fit in memory: micro_batch " +
               std::to_string(mb) + ", accumulated over " + std::to_string(perRank / mb) +
               (fits() ? "" : " (and that does not fit either)"));
    }
    // The defaults that decide something for this plan: the main-gradient dtype only for recipes with Megatron-style
    // fp32 main gradients, FP8 parameters only for FP8 recipes.
    const PrecisionRecipe* named = findPrecisionRecipe(plan.precision);
    const bool mainGrads = named && named->megatronMainGrads();
    const bool fp8 = named && named->fp8();
    // FSDP's no_sync only where FSDP shards gradients; under torchtitan's pipelining the stage is not resharded after
    // forward whatever the flag's general default says (fsdpGathersOncePerStep), so that is what is said.
    const bool fsdpShardsGrads = (plan.framework.name == "fsdp" || plan.framework.name == "torchtitan") && plan.zeroStage >= 2;
    for (const auto& d : resolveOverlap(plan.framework, plan.schedule == Schedule::Interleaved1F1B, plan.zeroStage).defaulted) {
        if ((d.rfind("grad_reduce_in_fp32 ", 0) == 0 && !mainGrads) || (d.rfind("fp8_param_gather ", 0) == 0 && !fp8) ||
            d.rfind("store_param_remainders ", 0) == 0 || (d.rfind("grad_sync_each_micro_batch ", 0) == 0 && !fsdpShardsGrads))
            continue;
        if (d.rfind("reshard_after_forward ", 0) == 0 && fsdpGathersOncePerStep(plan.framework, plan.pp, plan.zeroStage)) {
            r.assume("reshard_after_forward = false (torchtitan under pipelining: parallelize_llama.py keeps each stage "
                     "gathered, once a step, and its gradients unsharded until one reduce-scatter)");
            continue;
        }
        r.assume(d);
    }
    // The master's remainders only where there is an fp32 master of bf16 weights under a distributed optimizer, and
    // their default depends on the GEMMs' dtype (storeParamRemaindersOf), so it is said here, resolved for this plan.
    const bool quantizedParams = (fp8 && fp8ParamGatherOf(plan.framework)) ||
                                 (named && named->fp4() && fp4ParamGatherOf(plan.framework));
    if (named && named->weightBytes == 2 && named->masterBytes == 4 && plan.zeroStage >= 1 &&
        !plan.framework.storeParamRemainders && optimizerDtypeOf(plan.framework) == "fp32" && !quantizedParams &&
        plan.framework.name == "nemo") {
        const bool remainders = storeParamRemaindersOf(plan.framework, named->quantizedGemms());
        r.assume(std::string("store_param_remainders = ") + (remainders ? "true" : "false") + " (" + plan.framework.name +
                 (plan.framework.version.empty() ? " (current)" : " " + plan.framework.version) + " default" +
                 (remainders ? ": the fp32 master as 16-bit remainders beside the bf16 weights)" : ")"));
    }
    if (plan.pipelineSplit != PipelineSplit::Even) {
        resolvePipelineSplit(model, c.scenario.cluster, plan); // once recompute and SP are settled
        if (plan.pipelineSplit == PipelineSplit::EndsAsLayers && contains(lower(text(pl, "pipeline_split")), "ends"))
            r.assume("pipeline split as stated (ends_as_layers): embedding and loss counted as a layer each over pp x vpp = " +
                     std::to_string(plan.pp * plan.vpp) + " for " + std::to_string(model.layers) + " layers (" +
                     pipelineSplitText(model, plan) + ")");
        else if (plan.pipelineSplit == PipelineSplit::EndsAsLayers)
            r.assume("pipeline split not stated and pp x vpp = " + std::to_string(plan.pp * plan.vpp) + " does not divide " +
                     std::to_string(model.layers) + " layers: embedding and loss counted as a layer each, as the frameworks "
                     "split (" + pipelineSplitText(model, plan) + ")");
    }
    // Megatron-core 0.14's batch-level EP overlap (one micro-batch's all-to-alls under another's compute), where the
    // plan passes Megatron-core's own checks for it; otherwise it is said and the all-to-all costed exposed.
    for (const char* key : {"overlap_moe_expert_parallel_comm", "moe_a2a_overlap"})
        if (boolean(pl, key).value_or(false)) {
            const char* without = !model.moe || plan.ep < 2             ? "without expert parallelism"
                                  : plan.recompute == Recompute::Full  ? "with full recompute"
                                  : plan.recompute == Recompute::Selective && plan.recomputes(recompute_module::Moe)
                                      ? "with the MoE layer recomputed"
                                  : plan.pp > 1 && plan.vpp < 2        ? "pipelined without virtual stages"
                                                                       : nullptr;
            if (without) {
                r.assume(std::string(key) + " stated, but Megatron-core does not run it " + without +
                         ": the all-to-all is costed exposed");
            } else {
                plan.framework.moeA2aOverlap = true;
                r.assume(std::string(key) + ": a backward and the next forward run layer by layer together, each one's "
                         "all-to-alls under the other's compute (moe_a2a_overlap)");
            }
            break;
        }
    // Megatron-core's shared-expert overlap (the shared experts beside the dispatch and combine), where the plan can run
    // it; otherwise it is said and the all-to-all costed without it.
    if (boolean(pl, "moe_shared_expert_overlap").value_or(false)) {
        Plan probe = plan;
        probe.framework.moeSharedExpertOverlap = true;
        if (const auto why = sharedExpertOverlapProblems(model, probe); !why.empty()) {
            r.assume("moe_shared_expert_overlap stated, not read: " + why.front().second);
        } else {
            plan.framework.moeSharedExpertOverlap = true;
            r.assume("moe_shared_expert_overlap: the shared experts on their own stream, beside the dispatch and combine "
                     "all-to-alls");
        }
    }
    // The block method's count past a chunk's layers recomputes the whole chunk (Megatron-LM's `layer_number <
    // recompute_num_layers`): every layer, as a plan says it (recompute_layers 0).
    if (plan.recomputeLayers > 0) {
        const int most = largestChunkLayers(model, plan);
        if (plan.recomputeLayers >= most) {
            r.assume("recompute_layers " + std::to_string(plan.recomputeLayers) + " reaches every layer of every chunk (" +
                     std::to_string(most) + " at the most): every layer recomputed");
            plan.recomputeLayers = 0;
        }
    }
    ProblemList problems;
    validatePlan(model, c.scenario.cluster, plan, ptr + "/plan", problems);
    if (!problems.empty()) {
        refusal = problems.items().front().where + ": " + problems.items().front().message;
        return false;
    }
    return true;
}

} // namespace tessel::sim::detail
