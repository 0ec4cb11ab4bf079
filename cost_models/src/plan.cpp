// Plan JSON loading, precision recipes, and validation of a plan against its model and cluster.
#include "tessel/cost/plan.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <sstream>

namespace tessel {

std::string toString(Recompute r) {
    switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
    }
    return "?";
}

const std::vector<std::pair<std::string, uint8_t>>& recomputeModuleNames() {
    namespace m = recompute_module;
    static const std::vector<std::pair<std::string, uint8_t>> names{
        {"core_attn", m::CoreAttn}, {"moe_act", m::MoeAct}, {"layernorm", m::Layernorm}, {"mla_up_proj", m::MlaUpProj},
        {"mlp", m::Mlp},            {"moe", m::Moe},        {"shared_experts", m::SharedExperts}};
    return names;
}

std::string recomputeModulesString(uint8_t modules, const char* separator) {
    std::string out;
    for (const std::string& name : recomputeModulesList(modules)) out += (out.empty() ? "" : separator) + name;
    return out;
}

std::vector<std::string> recomputeModulesList(uint8_t modules) {
    std::vector<std::string> out;
    for (const auto& [name, bit] : recomputeModuleNames())
        if (modules & bit) out.push_back(name);
    return out;
}

std::optional<uint8_t> recomputeModuleBit(const std::string& name) {
    for (const auto& [known, bit] : recomputeModuleNames())
        if (known == name) return bit;
    return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> recomputeModuleProblems(const ModelConfig& model, const Plan& plan) {
    namespace m = recompute_module;
    std::vector<std::pair<std::string, std::string>> out;
    const uint8_t mods = plan.recomputeModules;
    if (mods == m::Default) return out;
    const std::string key = "recompute_modules";
    if (plan.recompute != Recompute::Selective) {
        out.emplace_back(key, "recompute_modules (" + (mods ? recomputeModulesString(mods, ", ") : std::string("none")) +
                                  ") names what selective recompute "
                              "reruns; it needs recompute selective, got " + toString(plan.recompute));
        return out;
    }
    const std::string& fw = plan.framework.name;
    if (fw != "megatron" && fw != "nemo" && fw != "megascale" && fw != "generic") {
        out.emplace_back(key, "recompute_modules is Megatron-core's (--recompute-modules); framework '" + fw +
                              "' recomputes the attention core under selective recompute: drop the key or use megatron or nemo");
        return out;
    }
    // Each module must name a part the model has (Megatron-core raises for moe_act and mla_up_proj and silently
    // skips the rest; a plan that recomputes nothing it names is taken for a mistake).
    const bool dense = !model.moe || !model.moe->denseLayers.empty();
    const std::vector<std::pair<uint8_t, std::string>> needs{
        {m::Layernorm, model.mla || model.moe ? "" : "layernorm recomputes the norms Transformer Engine does not fuse into "
                                                    "the GEMM after them (an MLA layer's input norm, an MoE layer's "
                                                    "pre-MLP norm); this model has neither"},
        {m::MlaUpProj, model.mla ? "" : "mla_up_proj needs multi-latent attention (the model's mla block)"},
        {m::Mlp, dense ? "" : "mlp recomputes a dense layer's MLP; every layer of this model is an MoE layer (use moe, "
                              "moe_act or shared_experts)"},
        {m::MoeAct, model.moe ? "" : "moe_act needs a model with a moe block"},
        {m::Moe, model.moe ? "" : "moe needs a model with a moe block"},
        {m::SharedExperts, model.moe && model.moe->sharedFfnHidden > 0 ? "" : "shared_experts needs an MoE model with shared "
                                                                               "experts (moe.shared_ffn_hidden)"}};
    for (const auto& [bit, why] : needs)
        if ((mods & bit) && !why.empty()) out.emplace_back(key, why);
    return out;
}

std::vector<std::pair<std::string, std::string>> sharedExpertOverlapProblems(const ModelConfig& model, const Plan& plan) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!moeSharedExpertOverlapOf(plan.framework)) return out;
    const std::string key = "moe_shared_expert_overlap";
    if (!model.moe || model.moe->sharedFfnHidden <= 0)
        out.emplace_back(key, "moe_shared_expert_overlap runs the shared experts beside the dispatch; the model has none "
                              "(moe.shared_ffn_hidden)");
    else if (moeA2aOverlapOf(plan.framework))
        out.emplace_back(key, "moe_shared_expert_overlap and moe_a2a_overlap do not run together (Megatron-core refuses the "
                              "pair: the batch-level overlap schedules the shared experts itself)");
    else if (plan.recompute == Recompute::Selective && (plan.recomputeModules & recompute_module::SharedExperts))
        out.emplace_back(key, "moe_shared_expert_overlap does not run with shared_experts in recompute_modules "
                              "(Megatron-core refuses the pair)");
    return out;
}

std::string toString(Schedule s) {
    switch (s) {
    case Schedule::Gpipe: return "gpipe";
    case Schedule::OneFOneB: return "1f1b";
    case Schedule::Interleaved1F1B: return "interleaved_1f1b";
    case Schedule::ZeroBubble: return "zero_bubble";
    case Schedule::DualPipeV: return "dualpipev";
    case Schedule::ZeroBubbleV: return "zero_bubble_v";
    }
    return "?";
}

std::string toString(ParallelDim d) {
    switch (d) {
    case ParallelDim::Tp: return "tp";
    case ParallelDim::Cp: return "cp";
    case ParallelDim::Ep: return "ep";
    case ParallelDim::Dp: return "dp";
    case ParallelDim::Pp: return "pp";
    }
    return "?";
}

std::string toString(CpComm c) {
    switch (c) {
    case CpComm::P2p: return "p2p";
    case CpComm::A2a: return "a2a";
    case CpComm::AllGather: return "allgather";
    case CpComm::A2aP2p: return "a2a+p2p";
    }
    return "?";
}

const std::vector<PrecisionRecipe>& precisionRecipes() {
    // Bytes per parameter: weights + grads + fp32 master + two Adam moments.
    // megatron: bf16 weights, fp32 main grads (Megatron-LM --accumulate-allreduce-grads-in-fp32), 2+4+4+4+4 = 18.
    // mixed: fp16/bf16 weights and grads, fp32 master and moments (Micikevicius et al. 2018; ZeRO paper's
    //        "16 bytes per parameter", Rajbhandari et al. 2020 §3.1): 2+2+4+4+4 = 16.
    // bf16_no_master: bf16 weights and grads, fp32 moments, no master copy: 2+2+4+4 = 12.
    // fp32: everything fp32, weights are the master: 4+4+4+4 = 16.
    // tf32: the fp32 recipe's bytes, its matmuls on the tensor cores at the TF32 rate (PyTorch's
    //      torch.backends.cuda.matmul.allow_tf32, on by default from 1.7 to 1.11; set_float32_matmul_precision("high")):
    //      compute dtype Tf32, 4 B an element, the GPU's TF32 peak; a GPU without TF32 units has no peak for it.
    // cpu_fp64 / cpu_fp32: the CPU executor keeps weights, grads and both moments in its dtype: 32 / 16.
    // fp8: Megatron-LM with Transformer Engine (--fp8-format hybrid): the megatron recipe's 18 B, GEMMs in FP8
    //      (E4M3 forward, E5M2 gradients), and per linear weight the cached FP8 copy plus its transpose (Hopper's
    //      FP8 GEMMs take only the TN layout), 1 + 1 B (Transformer Engine module.base, fp8 weight caching).
    // fsdp: PyTorch FSDP / FSDP2 with MixedPrecision(param_dtype=bf16, reduce_dtype=fp32), as torchtitan
    //      (mixed_precision_param bfloat16, mixed_precision_reduce float32) and Composer's amp_bf16 'DEFAULT' run
    //      it: the sharded fp32 parameters are the master (4), fp32 gradient shards (4), two moments: 16 B;
    //      parameters gathered cast to bf16 (2 B moved), gradients reduced in fp32 (4 B).
    // fsdp_pure: Composer's 'PURE' (reduce_dtype = param_dtype): the same, gradients reduced in bf16 (2 B).
    // amp: PyTorch autocast(bfloat16) over fp32 parameters, the plain-PyTorch recipe (torch.amp; HF Trainer --bf16,
    //      Lightning "bf16-mixed", nanoGPT): fp32 weights are the master (4), fp32 gradients (4, reduced in fp32),
    //      two moments: 16 B; the bf16 copies autocast makes are counted with the activations' lifetime (memory.cpp).
    // fsdp_amp: PyTorch FSDP under torch.autocast with fp32 parameters gathered as they are kept, as Lightning's
    //      FSDP "bf16-mixed" / "16-mixed" ran from 2.1 to 2.5 (lightning/fabric/plugins/precision/fsdp.py:
    //      MixedPrecision(param_dtype=float32, reduce_dtype=buffer_dtype=bfloat16) inside torch.autocast): fp32
    //      shards (4), fp32 gradient shards (4), two moments: 16 B; 4 B gathered, 2 B reduced; every weight cast
    //      by autocast per GEMM and the residual stream in fp32, as amp.
    // fsdp_fp8: the fsdp recipe with FP8 GEMMs as torchao's Float8Linear runs them under FSDP2 (torchtitan's
    //      float8 converter): weights cast to FP8 per GEMM with dynamic scales, no cached FP8 copy (16 B); with
    //      fp8_param_gather (enable_fsdp_float8_all_gather) the shards are cast before the all-gather, 1 B moved.
    static const std::vector<PrecisionRecipe> recipes{
        {"megatron", Dtype::Bf16, 2, 4, 4, 4, Dtype::Bf16, 0, 0, 0},
        {"mixed", Dtype::Bf16, 2, 2, 4, 4, Dtype::Bf16, 0, 0, 0},
        {"bf16_no_master", Dtype::Bf16, 2, 2, 0, 4, Dtype::Bf16, 0, 0, 0},
        {"fp32", Dtype::Fp32, 4, 4, 0, 4, Dtype::Fp32, 0, 0, 0},
        {"tf32", Dtype::Tf32, 4, 4, 0, 4, Dtype::Tf32, 0, 0, 0},
        {"cpu_fp64", Dtype::Fp64, 8, 8, 0, 8, Dtype::Fp64, 0, 0, 0},
        {"cpu_fp32", Dtype::Fp32, 4, 4, 0, 4, Dtype::Fp32, 0, 0, 0},
        {"fp8", Dtype::Bf16, 2, 4, 4, 4, Dtype::Fp8, 2, 0, 0},
        {"fsdp", Dtype::Bf16, 4, 4, 0, 4, Dtype::Bf16, 0, 2, 4},
        {"fsdp_pure", Dtype::Bf16, 4, 4, 0, 4, Dtype::Bf16, 0, 2, 2},
        {"fsdp_fp8", Dtype::Bf16, 4, 4, 0, 4, Dtype::Fp8, 0, 2, 4},
        {"amp", Dtype::Bf16, 4, 4, 0, 4, Dtype::Bf16, 0, 0, 0, true},
        {"fsdp_amp", Dtype::Bf16, 4, 4, 0, 4, Dtype::Bf16, 0, 4, 2, true},
    };
    return recipes;
}

PrecisionRecipe precisionRecipeOf(const std::string& precision, const FrameworkSettings& framework, int zeroStage) {
    const PrecisionRecipe* named = findPrecisionRecipe(precision);
    if (!named) throw InputError({{"/plan/precision", "unknown precision recipe \"" + precision + "\""}});
    PrecisionRecipe r = *named;
    // fp16 in place of bf16 (half_dtype): the same bytes, the GEMMs and activations on the fp16 tensor-core path.
    if (halfDtypeOf(framework) == "fp16") {
        if (r.computeDtype == Dtype::Bf16) r.computeDtype = Dtype::Fp16;
        if (r.gemmDtype == Dtype::Bf16) r.gemmDtype = Dtype::Fp16;
    }
    if (r.megatronMainGrads() && !gradReduceInFp32Of(framework)) r.gradBytes = 2;
    // FP8 parameters (--fp8-param-gather, NeMo 2's fp8_params): the linear weights are kept in FP8 with their
    // transpose, 1 + 1 B in place of the 2 B bf16 weights and 2 B copies, and gathered at 1 B. The embeddings and
    // norms stay bf16 and are gathered at 2 B; counting them at 1 B moves up to 13% too few bytes (Llama 3 8B,
    // whose untied 128K-token embeddings are 1.05 of its 8.0 B parameters).
    const bool fp8Params = r.fp8() && fp8ParamGatherOf(framework);
    if (fp8Params) {
        r.fp8WeightCopyBytes = 0;
        r.gatherBytes = 1;
    }
    // The distributed optimizer's own state (ZeRO >= 1, bf16 weights beside an fp32 master). NeMo 1's Apex
    // DistributedFusedAdam with optim.dtype=bf16 keeps Adam's moments in bf16 and, the optimizer's dtype being the
    // model's, no master (store_params false), or a bf16 copy of FP8 parameters (store_params true under
    // fp8_params): NeMo megatron_base_model.py setup_optimization (46aa1eef5e, 2024-08). Otherwise the fp32 master
    // may be kept as remainders: the 16 low bits of each fp32 weight, whose high 16 bits are the bf16 weight itself
    // (Apex DistributedFusedAdam store_param_remainders; Transformer Engine FusedAdam under Megatron-core's
    // precision-aware optimizer), 2 B in place of 4. FP8 parameters are no bf16 weights to complete: fp32 master.
    // A recipe of bf16 weights and no master (a model held in bf16): torch.optim keeps Adam's moments in the
    // parameters' dtype (torch/optim/adam.py _init_group: zeros_like(p)), 2 B each where optimizer_dtype says bf16.
    const bool bf16Master = zeroStage >= 1 && r.weightBytes == 2 && r.masterBytes == 4;
    const bool bf16NoMaster = r.weightBytes == 2 && r.masterBytes == 0 && !r.fp8();
    if (bf16NoMaster && optimizerDtypeOf(framework) == "bf16") {
        r.momentBytes = 2;
    } else if (bf16Master && optimizerDtypeOf(framework) == "bf16") {
        r.momentBytes = 2;
        r.masterBytes = fp8Params ? 2 : 0;
    } else if (bf16Master && !fp8Params && storeParamRemaindersOf(framework, r.fp8())) {
        r.masterBytes = 2;
    }
    // DeepSpeed reduces gradients cast to the engine's communication_data_type, which is the 16-bit dtype where fp16
    // or bf16 is enabled and the config names none (engine.py communication_data_type): BF16_Optimizer's
    // allreduce_bucket (2022-04 bf16+pipeline 56c522386 to today; BLOOM's tr11 ds_config names none), ZeRO-1/2's
    // average_tensor and allreduce_bucket (stage_1_and_2.py) and ZeRO-3's __avg_scatter_grads (stage3.py) alike,
    // whatever dtype it accumulates in.
    if (framework.name == "deepspeed" && r.weightBytes == 2 && r.gradBytes == 4) r.reduceBytes = r.weightBytes;
    return r;
}
std::string precisionUnsupported(const ClusterConfig& cluster, const std::string& precision, const FrameworkSettings& framework) {
    const PrecisionRecipe* rec = findPrecisionRecipe(precision);
    if (!rec) return "";
    const auto& peaks = cluster.gpu.peakFlopsPerSecond;
    if (rec->fp8() && !peaks.count(Dtype::Fp8))
        return "\"" + precision + "\" runs its GEMMs in FP8, for which cluster '" + cluster.name +
               "' gives no peak (FP8 matrix units arrived with NVIDIA Hopper and AMD CDNA 3)";
    const Dtype computes = precisionRecipeOf(precision, framework).computeDtype;
    if (peaks.count(computes)) return "";
    return "\"" + precision + "\" computes in " + toString(computes) + ", for which cluster '" + cluster.name +
           "' gives no peak flops" +
           (computes == Dtype::Bf16 && peaks.count(Dtype::Fp16)
                ? " (a GPU without bf16, such as Volta: set half_dtype \"fp16\" in the plan, or --half-dtype fp16)"
                : "");
}

std::string defaultPrecisionOf(const Plan& plan) {
    const std::string& fw = plan.framework.name;
    if (fw != "torchtitan" && fw != "fsdp") return "megatron";
    const bool sharded = (plan.zeroStage >= 1 && plan.dp / std::max(1, plan.zeroReplicas) > 1) || plan.cp > 1;
    if (sharded) return "fsdp";
    return fw == "torchtitan" && (plan.tp > 1 || plan.pp > 1) ? "fp32" : "amp";
}

PrecisionRecipe precisionRecipeOf(const Plan& plan) {
    return precisionRecipeOf(plan.precision, plan.framework, plan.zeroStage);
}

const PrecisionRecipe* findPrecisionRecipe(const std::string& name) {
    for (const auto& r : precisionRecipes())
        if (r.name == name) return &r;
    return nullptr;
}

std::string Plan::rankOrderString() const {
    std::string s;
    for (auto d : rankOrder) s += (s.empty() ? "" : "-") + toString(d);
    return s;
}

std::array<ParallelDim, 5> parseRankOrder(const std::string& text, const std::string& where, ProblemList& problems) {
    std::array<ParallelDim, 5> order{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp,
                                     ParallelDim::Pp};
    std::vector<std::string> parts;
    std::stringstream ss(text);
    for (std::string part; std::getline(ss, part, '-');) parts.push_back(part);
    const std::vector<std::pair<std::string, ParallelDim>> names{{"tp", ParallelDim::Tp}, {"cp", ParallelDim::Cp},
                                                                 {"ep", ParallelDim::Ep}, {"dp", ParallelDim::Dp},
                                                                 {"pp", ParallelDim::Pp}};
    std::array<ParallelDim, 5> parsed = order;
    bool ok = parts.size() == 5;
    std::vector<bool> used(5, false);
    for (size_t i = 0; ok && i < 5; ++i) {
        auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == parts[i]; });
        if (it == names.end() || used[static_cast<size_t>(it - names.begin())]) {
            ok = false;
            break;
        }
        used[static_cast<size_t>(it - names.begin())] = true;
        parsed[i] = it->second;
    }
    if (!ok) {
        problems.add(where, "must list tp, cp, ep, dp and pp once each, fastest first, joined by '-' (e.g. "
                            "tp-cp-ep-dp-pp), got \"" + text + "\"");
        return order;
    }
    return parsed;
}

Plan parsePlan(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems) {
    Plan p;
    ObjectReader r(doc, pointer, problems);
    if (!r.isObject()) return p;
    using L = PlanLimits;
    p.tp = static_cast<int>(r.optInt("tp", 1, 1, L::degree));
    p.pp = static_cast<int>(r.optInt("pp", 1, 1, L::degree));
    p.dp = static_cast<int>(r.optInt("dp", 1, 1, L::degree));
    p.cp = static_cast<int>(r.optInt("cp", 1, 1, L::degree));
    p.ep = static_cast<int>(r.optInt("ep", 1, 1, L::degree));
    p.etp = static_cast<int>(r.optInt("etp", 0, 1, L::degree));
    p.vpp = static_cast<int>(r.optInt("vpp", 1, 1, L::virtualStages));
    if (const nlohmann::json* layers = r.child("pipeline_layers")) {
        const std::string where = r.pointer("pipeline_layers");
        if (!layers->is_array() || layers->empty()) {
            problems.add(where, "must be a non-empty array of layer counts, one per virtual pipeline stage");
        } else {
            for (size_t i = 0; i < layers->size(); ++i) {
                const auto& v = (*layers)[i];
                // 0 only at the ends, the embedding's or the output layer's virtual stage (validatePipelineSplit).
                const bool end = layers->size() > 1 && (i == 0 || i + 1 == layers->size());
                if (!v.is_number_integer() || v.get<int64_t>() < (end ? 0 : 1) || v.get<int64_t>() > L::layers)
                    problems.add(where + "/" + std::to_string(i), "must be an integer >= " + std::string(end ? "0" : "1") +
                                                                      " (layers of virtual stage " + std::to_string(i) +
                                                                      (end ? "; 0 leaves it the embedding or the output layer alone)" : ")"));
                else
                    p.pipelineLayers.push_back(v.get<int>());
            }
        }
    }
    p.firstStageLayers = static_cast<int>(r.optInt("first_stage_layers", 0, 1, L::layers));
    p.lastStageLayers = static_cast<int>(r.optInt("last_stage_layers", 0, 1, L::layers));
    const std::string split = r.optEnum("pipeline_split", "even", {"even", "balanced", "ends_as_layers"});
    p.pipelineSplit = split == "balanced" ? PipelineSplit::Balanced : split == "ends_as_layers" ? PipelineSplit::EndsAsLayers : PipelineSplit::Even;
    p.microBatch = static_cast<int>(r.optInt("micro_batch", 1, 1, L::microBatch));
    p.globalBatch = static_cast<int>(r.optInt("global_batch", static_cast<int64_t>(p.microBatch) * p.dp, 1, L::globalBatch));
    p.zeroStage = static_cast<int>(r.optInt("zero_stage", 0, 0, 3));
    p.zeroOverCp = r.optBool("zero_over_cp", true);
    // Megatron-core spells the gather "allgather", Transformer Engine "all_gather": both read.
    const std::string cpComm = r.optEnum("cp_comm_type", "p2p", {"p2p", "a2a", "allgather", "all_gather", "a2a+p2p"});
    p.cpComm = cpComm == "a2a" ? CpComm::A2a : cpComm == "p2p" ? CpComm::P2p : cpComm == "a2a+p2p" ? CpComm::A2aP2p : CpComm::AllGather;
    p.cpA2a = static_cast<int>(r.optInt("cp_a2a_size", 0, 1, L::degree));
    p.zeroReplicas = static_cast<int>(r.optInt("zero_replicas", 1, 1, L::degree));
    auto rc = r.optEnum("recompute", "none", {"none", "selective", "full"});
    p.recompute = rc == "none" ? Recompute::None : rc == "selective" ? Recompute::Selective : Recompute::Full;
    p.recomputeLayers = static_cast<int>(r.optInt("recompute_layers", 0, 0, L::layers));
    if (const nlohmann::json* mods = r.child("recompute_modules")) {
        // Megatron-core's --recompute-modules: a list of its module names (an empty list reruns nothing).
        const std::string where = r.pointer("recompute_modules");
        const std::string known = recomputeModulesString(recompute_module::All, ", ");
        if (!mods->is_array()) {
            problems.add(where, "must be an array of module names (" + known + ")");
        } else {
            p.recomputeModules = 0;
            for (size_t i = 0; i < mods->size(); ++i) {
                const auto& v = (*mods)[i];
                const auto bit = v.is_string() ? recomputeModuleBit(v.get<std::string>()) : std::nullopt;
                if (!bit) problems.add(where + "/" + std::to_string(i), "must be one of " + known + ", got " + v.dump());
                else p.recomputeModules |= *bit;
            }
        }
    }
    p.sequenceParallel = r.optBool("sequence_parallel", false);
    p.flashAttention = r.optBool("flash_attention", true);
    p.attentionKernel = r.optString("attention_kernel", "auto");
    auto sc = r.optEnum("schedule", "1f1b", {"gpipe", "1f1b", "interleaved_1f1b", "zero_bubble", "dualpipev", "zero_bubble_v"});
    p.schedule = sc == "gpipe" ? Schedule::Gpipe
                 : sc == "1f1b" ? Schedule::OneFOneB
                 : sc == "interleaved_1f1b" ? Schedule::Interleaved1F1B
                 : sc == "dualpipev" ? Schedule::DualPipeV
                 : sc == "zero_bubble_v" ? Schedule::ZeroBubbleV
                                            : Schedule::ZeroBubble;
    // The framework first: a plan that names no precision recipe runs its framework's.
    p.framework = parseFrameworkSettings(r);
    std::vector<std::string> recipeNames;
    for (const auto& rec : precisionRecipes()) recipeNames.push_back(rec.name);
    p.precision = r.optEnum("precision", defaultPrecisionOf(p), recipeNames);
    if (r.has("dtype")) {
        auto dt = r.optEnum("dtype", "bf16", {"bf16", "fp16", "fp32", "tf32", "fp64"});
        const auto* rec = findPrecisionRecipe(p.precision);
        const bool half = dt == "bf16" || dt == "fp16";
        const bool matches = rec && ((half && rec->computeDtype == Dtype::Bf16) || dt == toString(rec->computeDtype));
        if (rec && !matches)
            problems.add(r.pointer("dtype"), "\"" + dt + "\" does not match precision \"" + p.precision +
                                                 "\", which computes in " + toString(rec->computeDtype));
    }
    if (r.has("rank_order")) p.rankOrder = parseRankOrder(r.requireString("rank_order"), r.pointer("rank_order"), problems);
    else r.accept("rank_order");
    if (r.has("vocab_divisible_by")) p.vocabDivisibleBy = static_cast<int>(r.optInt("vocab_divisible_by", 128, 1, 1 << 20));
    p.offloadOptimizer = r.optBool("offload_optimizer", false);
    p.offloadParameters = r.optBool("offload_parameters", false);
    p.offloadActivations = r.optBool("offload_activations", false);
    p.offloadActivationLayers = static_cast<int>(r.optInt("offload_activation_layers", 0, 0, L::layers));
    // The plan's dtype names the 16-bit compute type of a 16-bit recipe; a framework half_dtype that says otherwise
    // is a conflict, not a silent choice.
    if (const auto* rec = findPrecisionRecipe(p.precision); rec && rec->computeDtype == Dtype::Bf16 && r.has("dtype")) {
        const std::string dt = r.optString("dtype", "");
        if ((dt == "bf16" || dt == "fp16") && p.framework.halfDtype && *p.framework.halfDtype != dt)
            problems.add(r.pointer("half_dtype"), "\"" + *p.framework.halfDtype + "\" contradicts dtype \"" + dt + "\"");
        else if (dt == "fp16")
            p.framework.halfDtype = "fp16";
    }
    // Transformer Engine's scaling recipe is a setting of its FP8 GEMMs: on another precision it would say nothing.
    if (p.framework.fp8Recipe && p.precision != "fp8")
        problems.add(r.pointer("fp8_recipe"), "\"" + *p.framework.fp8Recipe + "\" is a Transformer Engine FP8 recipe, "
                     "for precision \"fp8\"; precision \"" + p.precision + "\" has no FP8 scaling to choose");
    r.finish();
    return p;
}

nlohmann::json planToJson(const Plan& p) {
    const auto* rec = findPrecisionRecipe(p.precision);
    nlohmann::json j{{"tp", p.tp},
            {"pp", p.pp},
            {"dp", p.dp},
            {"cp", p.cp},
            {"ep", p.ep},
            {"vpp", p.vpp},
            {"micro_batch", p.microBatch},
            {"global_batch", p.globalBatch},
            {"zero_stage", p.zeroStage},
            {"zero_over_cp", p.zeroOverCp},
            {"zero_replicas", p.zeroReplicas},
            {"recompute", toString(p.recompute)},
            {"sequence_parallel", p.sequenceParallel},
            {"flash_attention", p.flashAttention},
            {"attention_kernel", p.attentionKernel},
            {"schedule", toString(p.schedule)},
            {"precision", p.precision},
            {"dtype", rec ? toString(precisionRecipeOf(p).computeDtype) : "bf16"},
            {"rank_order", p.rankOrderString()},
            {"vocab_divisible_by", vocabMultipleOf(p)}};
    if (!p.pipelineLayers.empty()) j["pipeline_layers"] = p.pipelineLayers;
    if (p.etp > 0) j["etp"] = p.etp;
    if (p.firstStageLayers > 0) j["first_stage_layers"] = p.firstStageLayers;
    if (p.lastStageLayers > 0) j["last_stage_layers"] = p.lastStageLayers;
    if (p.pipelineSplit != PipelineSplit::Even) j["pipeline_split"] = toString(p.pipelineSplit);
    // Written only when set, so plans without offload read as before.
    if (p.offloadOptimizer) j["offload_optimizer"] = true;
    if (p.offloadParameters) j["offload_parameters"] = true;
    if (p.offloadActivations) j["offload_activations"] = true;
    if (p.offloadActivationLayers > 0) j["offload_activation_layers"] = p.offloadActivationLayers;
    if (p.recomputeLayers > 0) j["recompute_layers"] = p.recomputeLayers;
    if (p.recomputeModules != recompute_module::Default)
        j["recompute_modules"] = nlohmann::json(recomputeModulesList(p.recomputeModules));
    if (p.cpComm != CpComm::P2p) j["cp_comm_type"] = toString(p.cpComm);
    if (p.cpA2a > 0) j["cp_a2a_size"] = p.cpA2a;
    frameworkToJson(p.framework, j);
    return j;
}

std::string recomputeString(const Plan& p) {
    if (p.recompute == Recompute::Selective && p.recomputeModules != recompute_module::Default)
        return "selective:" + (p.recomputeModules ? recomputeModulesString(p.recomputeModules) : std::string("none"));
    return toString(p.recompute) + (p.recompute == Recompute::Full && p.recomputeLayers > 0 ? ":" + std::to_string(p.recomputeLayers) : "");
}

std::string offloadString(const Plan& p) {
    std::string s;
    if (p.offloadOptimizer) s += "optimizer";
    if (p.offloadParameters) s += std::string(s.empty() ? "" : "+") + "parameters";
    if (p.offloadActivations) s += std::string(s.empty() ? "" : "+") + "activations";
    if (p.offloadActivationLayers > 0)
        s += std::string(s.empty() ? "" : "+") + "activations:" + std::to_string(p.offloadActivationLayers);
    return s.empty() ? "none" : s;
}

int vocabMultipleOf(const Plan& plan) {
    if (plan.vocabDivisibleBy > 0) return plan.vocabDivisibleBy;
    return plan.framework.name == "fsdp" || plan.framework.name == "torchtitan" ? 1 : 128;
}

int64_t paddedVocab(const ModelConfig& model, const Plan& plan) {
    const int64_t multiple = static_cast<int64_t>(vocabMultipleOf(plan)) * plan.tp;
    return (model.vocab + multiple - 1) / multiple * multiple;
}

namespace {

// The pipeline split (FORMULAS.md §5.4): one way of stating it, and one that gives every virtual stage at least
// one layer, the embedding's and the output layer's excepted, and sums to the model's layers.
void validatePipelineSplit(const ModelConfig& model, const Plan& plan, const std::string& ptr, ProblemList& problems) {
    auto n = [](int64_t v) { return std::to_string(v); };
    const int p = plan.pp, v = plan.vpp, virtualStages = p * v;
    const bool firstLast = plan.firstStageLayers > 0 || plan.lastStageLayers > 0;
    const int ways = (plan.pipelineLayers.empty() ? 0 : 1) + (firstLast ? 1 : 0) + (plan.pipelineSplit != PipelineSplit::Even ? 1 : 0);
    if (ways > 1) {
        problems.add(ptr + "/pipeline_split", "state the pipeline split one way: pipeline_layers, first/last_stage_layers, "
                                              "or pipeline_split \"balanced\" / \"ends_as_layers\"");
        return;
    }
    if (!plan.pipelineLayers.empty()) {
        const std::string where = ptr + "/pipeline_layers";
        if (static_cast<int>(plan.pipelineLayers.size()) != virtualStages) {
            problems.add(where, "lists " + n(static_cast<int64_t>(plan.pipelineLayers.size())) + " stages, but pp x vpp = " + n(virtualStages));
            return;
        }
        int64_t sum = 0;
        for (size_t u = 0; u < plan.pipelineLayers.size(); ++u) {
            const int c = plan.pipelineLayers[u];
            sum += c;
            // Only the virtual stages that hold the embedding or the output layer and loss may hold no layer
            // (Megatron-core's layouts "E|..." and "...|L"); a V schedule puts both on rank 0, which would run
            // no layer of its own.
            const bool end = u == 0 || u + 1 == plan.pipelineLayers.size();
            if (c < 0 || (c == 0 && (!end || plan.vShape())))
                problems.add(where + "/" + n(static_cast<int64_t>(u)),
                             c < 0 ? "must be >= 0" : plan.vShape() ? "must be >= 1 under a V schedule (both ends are on rank 0)"
                                                                 : "must be >= 1: only the first and the last virtual stages (the embedding's "
                                                                   "and the output layer's) may hold no transformer layer");
        }
        if (sum != model.layers)
            problems.add(where, "sums to " + n(sum) + " layers, but the model has " + n(model.layers));
        return;
    }
    if (firstLast) {
        if (p < 2) {
            problems.add(ptr + (plan.firstStageLayers > 0 ? "/first_stage_layers" : "/last_stage_layers"), "needs pp >= 2");
            return;
        }
        for (auto [value, key] : {std::pair{plan.firstStageLayers, "first_stage_layers"}, std::pair{plan.lastStageLayers, "last_stage_layers"}})
            if (value > 0 && value % v != 0)
                problems.add(ptr + "/" + key, n(value) + " layers do not divide over vpp = " + n(v) + " model chunks (Megatron-LM's rule)");
        int rest = model.layers, ranks = p;
        if (plan.firstStageLayers > 0) rest -= plan.firstStageLayers, --ranks;
        if (plan.lastStageLayers > 0) rest -= plan.lastStageLayers, --ranks;
        const std::string where = ptr + (plan.lastStageLayers > 0 ? "/last_stage_layers" : "/first_stage_layers");
        if (ranks == 0 && rest != 0)
            problems.add(where, "first + last stage layers = " + n(model.layers - rest) + ", but the model has " + n(model.layers) + " layers");
        else if (ranks > 0 && (rest < ranks * v || rest % (ranks * v) != 0))
            problems.add(where, "the other " + n(ranks) + " pipeline ranks x vpp " + n(v) + " cannot share the remaining " + n(rest) +
                                    " of " + n(model.layers) + " layers evenly (Megatron-LM's rule)");
        return;
    }
    if (plan.pipelineSplit == PipelineSplit::EndsAsLayers && !endsOnlySplit(model.layers, p, v).empty()) {
        if (plan.vShape())
            problems.add(ptr + "/pipeline_split", "ends_as_layers with fewer layers (" + n(model.layers) + ") than pp x vpp = " +
                                                     n(virtualStages) + " virtual stages would leave rank 0 of a V schedule "
                                                     "without a transformer layer");
        return;
    }
    if (model.layers < virtualStages) {
        problems.add(plan.vpp > 1 ? ptr + "/vpp" : ptr + "/pp", "pp x vpp = " + n(virtualStages) + " virtual stages, but the model has only " +
                                                                  n(model.layers) + " layers" +
                                                                  (p > 1 && model.layers + 2 >= virtualStages
                                                                       ? " (pipeline_split \"ends_as_layers\" gives the embedding and the loss a "
                                                                         "virtual stage each)"
                                                                       : ""));
        return;
    }
    if (plan.pipelineSplit == PipelineSplit::Even && model.layers % virtualStages != 0)
        problems.add(plan.vpp > 1 ? ptr + "/vpp" : ptr + "/pp",
                     "pp x vpp = " + n(virtualStages) + " does not divide the model's " + n(model.layers) +
                         " layers; set pipeline_split \"balanced\", first_stage_layers/last_stage_layers, or pipeline_layers");
}

} // namespace

void validatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, const std::string& ptr,
                  ProblemList& problems) {
    auto field = [&](const char* key) { return ptr + "/" + key; };
    auto n = [](int64_t v) { return std::to_string(v); };
    if (plan.tp < 1 || plan.pp < 1 || plan.dp < 1 || plan.cp < 1 || plan.ep < 1 || plan.vpp < 1 ||
        plan.microBatch < 1 || plan.globalBatch < 1) {
        problems.add(ptr, "parallel degrees and batch sizes must be at least 1");
        return;
    }
    // Each count fits an int; their products need not. Past these the checks below would overflow.
    const int64_t ranks = static_cast<int64_t>(plan.tp) * plan.pp;
    if (ranks > PlanLimits::ranks || ranks * plan.dp > PlanLimits::ranks || ranks * plan.dp * plan.cp > PlanLimits::ranks) {
        problems.add(ptr, "tp x pp x dp x cp = " + n(plan.tp) + " x " + n(plan.pp) + " x " + n(plan.dp) + " x " + n(plan.cp) +
                              " is more than " + n(PlanLimits::ranks) + " ranks");
        return;
    }
    if (model.heads % plan.tp != 0)
        problems.add(field("tp"), "tp=" + n(plan.tp) + " does not divide the model's " + n(model.heads) + " attention heads");
    else if (model.kvHeads % plan.tp != 0 && !(kvReplicationOf(plan.framework) && plan.tp % model.kvHeads == 0))
        problems.add(field("tp"), "tp=" + n(plan.tp) + " does not divide the model's " + n(model.kvHeads) +
                                      " key/value heads (Megatron needs num_query_groups % tp == 0; with tp a multiple"
                                      " of them, kv_replication: true replicates K and V over the ranks)");
    if (model.ffnHidden % plan.tp != 0)
        problems.add(field("tp"), "tp=" + n(plan.tp) + " does not divide ffn_hidden=" + n(model.ffnHidden));
    if (model.moe && model.moe->expertFfnHidden % plan.expertTp() != 0)
        problems.add(field(plan.etp > 0 ? "etp" : "tp"), (plan.etp > 0 ? "etp=" : "tp=") + n(plan.expertTp()) +
                                                             " does not divide moe.expert_ffn_hidden=" + n(model.moe->expertFfnHidden));
    if (model.moe && model.moe->sharedFfnHidden % plan.tp != 0)
        problems.add(field("tp"), "tp=" + n(plan.tp) + " does not divide moe.shared_ffn_hidden=" +
                                      n(model.moe->sharedFfnHidden));
    validatePipelineSplit(model, plan, ptr, problems);
    if (plan.vpp > 1 && plan.schedule != Schedule::Interleaved1F1B && !plan.vShape())
        problems.add(field("vpp"), "vpp > 1 needs schedule interleaved_1f1b (or dualpipev / zero_bubble_v with vpp 2), got " +
                                       toString(plan.schedule));
    // DualPipeV and ZB-V (PyTorch's ScheduleDualPipeV, ScheduleZBVZeroBubble): exactly two stages a rank, in a V.
    if (plan.vShape()) {
        const std::string name = toString(plan.schedule);
        if (plan.pp < 2) problems.add(field("schedule"), name + " needs pp >= 2");
        if (plan.vpp != 2)
            problems.add(field("vpp"), name + " runs two model chunks a rank (its V): vpp must be 2, got " + n(plan.vpp));
        if (plan.firstStageLayers > 0 || plan.lastStageLayers > 0)
            problems.add(field(plan.firstStageLayers > 0 ? "first_stage_layers" : "last_stage_layers"),
                         "Megatron-LM's first/last-stage layer counts do not apply to " + name + ", whose first rank holds "
                         "both ends of the model; list the chunks' layers in pipeline_layers or use pipeline_split");
    }
    if (plan.schedule == Schedule::Interleaved1F1B && plan.vpp < 2)
        problems.add(field("schedule"), "interleaved_1f1b needs vpp >= 2 (with vpp = 1 it is plain 1f1b)");
    if (plan.schedule == Schedule::Interleaved1F1B && plan.pp < 2)
        problems.add(field("schedule"), "interleaved_1f1b needs pp >= 2");
    // In 64 bits: each degree and the cluster's two counts are bounded, their products are not (yet).
    const int64_t world = int64_t{plan.tp} * plan.pp * plan.dp * plan.cp;
    const int64_t gpus = int64_t{cluster.gpusPerNode} * cluster.nodes;
    if (world != gpus)
        problems.add(ptr, "tp x pp x dp x cp = " + n(plan.tp) + " x " + n(plan.pp) + " x " + n(plan.dp) + " x " +
                              n(plan.cp) + " = " + n(world) + " ranks, but the cluster has " + n(cluster.gpusPerNode) +
                              " x " + n(cluster.nodes) + " = " + n(gpus) + " GPUs");
    const int64_t perStep = static_cast<int64_t>(plan.microBatch) * plan.dp;
    if (plan.globalBatch % perStep != 0)
        problems.add(field("global_batch"), "global_batch=" + n(plan.globalBatch) + " is not a multiple of micro_batch x dp = " +
                                                n(perStep));
    else if (const int64_t slots = static_cast<int64_t>(plan.pp) * plan.vpp * (plan.globalBatch / perStep);
             slots > PlanLimits::scheduleSlots)
        problems.add(field("global_batch"), n(plan.pp) + " stages x " + n(plan.vpp) + " chunks x " + n(plan.globalBatch / perStep) +
                                                " micro-batches a step = " + n(slots) + " chunk passes to simulate, more than tessel "
                                                "simulates (" + n(PlanLimits::scheduleSlots) + "); use fewer, larger micro-batches");
    else if (plan.schedule == Schedule::DualPipeV && plan.microBatchesPerStep() < 2 * plan.pp)
        problems.add(field("global_batch"), "dualpipev needs at least as many micro-batches per step (" + n(plan.microBatchesPerStep()) +
                                                ") as virtual stages, 2 x pp = " + n(2 * plan.pp) + " (PyTorch's ScheduleDualPipeV)");
    else if (plan.schedule == Schedule::Interleaved1F1B && plan.microBatchesPerStep() % plan.pp != 0)
        problems.add(field("global_batch"), "interleaved_1f1b needs the micro-batches per step (" +
                                                n(plan.microBatchesPerStep()) + ") to be a multiple of pp=" + n(plan.pp) +
                                                " (Megatron-LM's constraint)");
    if (plan.ep > 1 && !model.moe)
        problems.add(field("ep"), "ep=" + n(plan.ep) + " needs a model with a moe block");
    if (plan.etp > 0 && !model.moe)
        problems.add(field("etp"), "etp=" + n(plan.etp) + " needs a model with a moe block");
    if (plan.expertLayoutApart()) {
        // The expert layers' own layout (MoE parallel folding, or Megatron-core's expert RankGenerator with cp > 1):
        // etp x ep x edp over the stage's tp x cp x dp ranks; their pipeline stages are the dense ones', so pp must be
        // the slowest dim of rank_order (Megatron-core asserts the two layouts' pp groups agree).
        const int64_t stageRanks = static_cast<int64_t>(plan.tp) * plan.cp * plan.dp;
        const int64_t expertRanks = static_cast<int64_t>(plan.expertTp()) * plan.ep;
        const std::string why = plan.expertFolded()
                                    ? "etp=" + n(plan.etp) + " differs from tp=" + n(plan.tp)
                                    : "with cp=" + n(plan.cp) + " Megatron-core " +
                                          (plan.framework.name == "generic" ? std::string("from 0.10, which a plan of no framework follows,")
                                           : plan.framework.version.empty() ? std::string("(0.10 on)")
                                                                            : "as of \"" + plan.framework.version + "\"") +
                                          " lays out the expert layers with a rank generator of their own";
        if (stageRanks % expertRanks != 0)
            problems.add(field(plan.expertFolded() ? "etp" : "ep"),
                         "etp x ep = " + n(plan.expertTp()) + " x " + n(plan.ep) + " must divide the " + n(stageRanks) +
                             " ranks of a pipeline stage (tp x cp x dp = " + n(plan.tp) + " x " + n(plan.cp) + " x " + n(plan.dp) +
                             "), which the expert layers are laid out over (" + why + ")");
        if (plan.rankOrder.back() != ParallelDim::Pp)
            problems.add(field("rank_order"), why + ", so the expert layers have their own layout; it needs pp last in rank_order, got \"" +
                                                  plan.rankOrderString() + "\"");
        if (plan.expertFolded() && plan.tp > 1 && !plan.sequenceParallel)
            problems.add(field("sequence_parallel"), "etp=" + n(plan.etp) + " with tp=" + n(plan.tp) +
                                                         " needs sequence parallelism (Megatron-core dispatches each TP rank's own "
                                                         "tokens; without it they are copies)");
    } else if (plan.dp % plan.ep != 0) {
        problems.add(field("ep"), "ep=" + n(plan.ep) + " must divide dp=" + n(plan.dp) +
                                      " (with etp = tp experts are sharded inside the data-parallel group; for expert parallelism "
                                      "across tp and cp ranks too, Megatron-core's MoE parallel folding, set etp, e.g. 1)");
    }
    if (plan.zeroReplicas > 1) {
        const int group = plan.zeroOverCp ? plan.dp * plan.cp : plan.dp;
        if (plan.zeroStage < 1)
            problems.add(field("zero_replicas"), "zero_replicas=" + n(plan.zeroReplicas) +
                                                     " replicates sharded ZeRO state; it needs zero_stage 1-3, got 0");
        else if (plan.cp > 1 && !plan.zeroOverCp)
            problems.add(field("zero_replicas"), "hybrid sharding with cp > 1 needs zero_over_cp (the replicas split the dp x cp group)");
        else if (group % plan.zeroReplicas != 0)
            problems.add(field("zero_replicas"), "zero_replicas=" + n(plan.zeroReplicas) + " does not divide the " + n(group) +
                                                     " ranks ZeRO shards over (" + (plan.zeroOverCp && plan.cp > 1 ? "dp x cp" : "dp") + ")");
        else if (model.moe && !plan.replicasSplitExperts(plan.zeroReplicas))
            problems.add(field("zero_replicas"), "zero_replicas=" + n(plan.zeroReplicas) + " does not divide the expert data-parallel group (" +
                                                     (plan.expertFolded() ? "tp x cp x dp / (etp x ep)" : plan.cp > 1 ? "cp x dp / ep" : "dp / ep") +
                                                     " = " + n(plan.expertGradientGroup()) + ")");
    }
    if (moeA2aOverlapOf(plan.framework)) {
        // Megatron-core's checks for --overlap-moe-expert-parallel-comm (transformer_config.py): expert
        // parallelism, no full recompute, and the interleaved schedule where the model is pipelined.
        if (!model.moe || plan.ep < 2)
            problems.add(field("moe_a2a_overlap"), "moe_a2a_overlap hides the expert-parallel all-to-all; it needs a model with a "
                                                   "moe block and ep > 1, got ep=" + n(plan.ep));
        if (plan.recompute == Recompute::Full)
            problems.add(field("moe_a2a_overlap"), "moe_a2a_overlap does not run with full recompute (Megatron-core refuses it)");
        if (plan.recomputes(recompute_module::Moe) && plan.recompute == Recompute::Selective)
            problems.add(field("moe_a2a_overlap"), "moe_a2a_overlap does not run with the MoE layer recomputed (moe in "
                                                   "recompute_modules; Megatron-core refuses it)");
        if (plan.pp > 1 && plan.vpp < 2)
            problems.add(field("moe_a2a_overlap"), "moe_a2a_overlap with pp=" + n(plan.pp) +
                                                   " needs the interleaved schedule (vpp > 1), as Megatron-core requires");
    }
    for (const auto& [key, message] : sharedExpertOverlapProblems(model, plan)) problems.add(field(key.c_str()), message);
    if (model.moe && model.moe->experts % plan.ep != 0)
        problems.add(field("ep"), "ep=" + n(plan.ep) + " does not divide the model's " + n(model.moe->experts) + " experts");
    if (plan.cp > 1 && model.seqLen % (2 * plan.cp) != 0)
        problems.add(field("cp"), "cp=" + n(plan.cp) + " needs seq_len (" + n(model.seqLen) +
                                      ") divisible by 2 x cp for load-balanced causal attention");
    const bool levelsOk = plan.cpComm != CpComm::A2aP2p || (plan.cpA2a >= 2 && plan.cp % plan.cpA2a == 0 && plan.cp / plan.cpA2a >= 2);
    if (plan.cpComm == CpComm::A2aP2p) {
        // Megatron-core's --hierarchical-context-parallel-sizes: an all-to-all group and a ring over such groups,
        // their product cp; either of size 1 is plain a2a or p2p.
        if (!levelsOk)
            problems.add(field("cp_a2a_size"), "a2a+p2p needs cp_a2a_size, the ranks of each all-to-all group, from 2 up to cp / 2 "
                                               "and dividing cp=" + n(plan.cp) + ", got " + n(plan.cpA2a) +
                                               " (use a2a or p2p where one level would have one rank)");
    } else if (plan.cpA2a > 0) {
        problems.add(field("cp_a2a_size"), "cp_a2a_size sizes a2a+p2p's all-to-all groups; cp_comm_type is " + toString(plan.cpComm));
    }
    if ((plan.cpComm == CpComm::A2a || plan.cpComm == CpComm::A2aP2p) && levelsOk && plan.cp > 1) {
        // Transformer Engine's all-to-all splits the rank's query and key/value heads over its group.
        const int64_t heads = model.heads / std::max(1, plan.tp), kvHeads = model.kvHeads / std::max(1, plan.tp);
        const int split = plan.cpHeadSplit();
        if (heads % split != 0 || kvHeads % split != 0)
            problems.add(field("cp_comm_type"), toString(plan.cpComm) + " splits each rank's attention heads over " + n(split) +
                                                    " ranks: it needs " + n(heads) + " query and " + n(kvHeads) +
                                                    " key/value heads a rank (heads / tp) divisible by " + n(split) +
                                                    " (Transformer Engine's check); use p2p or allgather");
    }
    // Transformer Engine runs sliding-window attention under context parallelism with the all-to-all or the
    // all-gather exchange only (attn_forward_func_with_cp: "The context parallel running configs cannot support
    // sliding window attetnion!").
    if (plan.cp > 1 && model.slidingWindow > 0 && (plan.cpComm == CpComm::P2p || plan.cpComm == CpComm::A2aP2p))
        problems.add(field("cp_comm_type"), toString(plan.cpComm) + " does not run the model's sliding-window attention "
                                            "(Transformer Engine's check): use a2a or allgather");
    if (plan.sequenceParallel && plan.tp == 1)
        problems.add(field("sequence_parallel"), "sequence parallelism needs tp > 1");
    if (plan.sequenceParallel && (model.seqLen / plan.cp) % plan.tp != 0)
        problems.add(field("sequence_parallel"), "seq_len / cp must be divisible by tp=" + n(plan.tp));
    for (const auto& [key, message] : recomputeModuleProblems(model, plan)) problems.add(field(key.c_str()), message);
    // Liger-Kernel's fused linear cross-entropy multiplies the whole output layer on every rank (no vocabulary-parallel
    // version) and never materialises the logits a trainer's metrics would read.
    if (crossEntropyOf(plan.framework) == "fused_linear" && plan.tp > 1)
        problems.add(field("cross_entropy"), "fused_linear (Liger-Kernel's fused linear cross-entropy) runs the whole output "
                                             "layer on each rank: it needs tp 1, got tp=" + n(plan.tp) +
                                             " (a vocabulary-parallel head uses fused or te)");
    else if (crossEntropyOf(plan.framework) == "fused_linear" && trainMetricLossesOf(plan.framework) > 0)
        problems.add(field("train_metric_losses"), "fused_linear (Liger-Kernel's fused linear cross-entropy) never "
                                                   "materialises the logits the training metrics read: set train_metric_losses 0");
    if (plan.flashAttention && plan.attentionKernel != "auto" && !cluster.gpu.attentionKernels.empty() &&
        !cluster.gpu.attentionKernels.count(plan.attentionKernel)) {
        std::string names;
        for (const auto& [name, spec] : cluster.gpu.attentionKernels) names += (names.empty() ? "" : ", ") + name;
        problems.add(field("attention_kernel"), "\"" + plan.attentionKernel + "\" is not an attention kernel of " +
                                                    cluster.gpu.name + " (it has: " + names + ", or \"auto\")");
    }
    // A fused kernel without softcap would run the model's attention without its soft-cap: not the model.
    if (softcapKernelMissing(model, plan, cluster.gpu)) {
        const std::string kernel = attentionKernelOf(model, plan, cluster.gpu);
        problems.add(field(plan.attentionKernel == "auto" ? "flash_attention" : "attention_kernel"),
                     "the model soft-caps its attention scores (attention_softcap), which " + kernel + " on " +
                         cluster.gpu.name + " does not do: name flash2 or flash3 (flash-attn from 2.6 and "
                         "FlashAttention-3 take softcap) where the GPU has them, or set flash_attention off (an "
                         "unfused attention, as NeMo's Gemma 2 runs it)");
    }
    if (plan.offloads() && !cluster.host.present())
        problems.add(field(plan.offloadOptimizer ? "offload_optimizer" : plan.offloadParameters ? "offload_parameters"
                           : plan.offloadActivations                  ? "offload_activations"
                                                                      : "offload_activation_layers"),
                     "offload needs the cluster's host block (host memory, PCIe and CPU Adam rates); cluster '" +
                         cluster.name + "' has none");
    if (plan.offloadOptimizer && plan.zeroStage < 1)
        problems.add(field("offload_optimizer"), "optimizer offload runs inside a ZeRO optimizer (DeepSpeed ZeRO-Offload, "
                                                 "Megatron's distributed optimizer); needs zero_stage >= 1");
    if (plan.offloadParameters && (plan.zeroStage != 3 || !plan.offloadOptimizer))
        problems.add(field("offload_parameters"), "parameter offload is ZeRO-Infinity: needs zero_stage 3 and offload_optimizer");
    if (plan.recomputeLayers > 0 && plan.recompute != Recompute::Full) {
        problems.add(field("recompute_layers"), "recompute_layers (the layers of each chunk recomputed, Megatron-LM's "
                                                "block method) needs recompute full, got " + toString(plan.recompute));
    } else if (plan.recomputeLayers > 0) {
        const int most = largestChunkLayers(model, plan);
        if (plan.recomputeLayers > most)
            problems.add(field("recompute_layers"), n(plan.recomputeLayers) + " layers recomputed a chunk, but a chunk has " +
                                                        n(most) + " at the most (pp x vpp = " + n(plan.pp * plan.vpp) +
                                                        " chunks): use at most " + n(most) + ", or 0 for every layer");
    }
    for (const auto& [key, member] : stage3Keys())
        if (plan.framework.*member && plan.framework.name != "deepspeed")
            problems.add(field(key), std::string(key) + " is a DeepSpeed ZeRO-3 setting (its parameter coordinator); "
                                     "framework '" + plan.framework.name + "' gathers whole units: drop it or use "
                                     "framework deepspeed");
    if (plan.offloadActivations && plan.recomputeLayers > 0)
        problems.add(field("offload_activations"), "activation offload swaps every layer's checkpointed input to the "
                                                   "host (DeepSpeed cpu_checkpointing); it has no partial form: needs "
                                                   "recompute_layers 0");
    if (plan.offloadActivationLayers > 0) {
        // Megatron-core's TransformerConfig refuses each of these (transformer_config.py __post_init__).
        if (plan.offloadActivationLayers >= model.layers)
            problems.add(field("offload_activation_layers"), std::to_string(plan.offloadActivationLayers) +
                                                                 " layers: CPU offloading takes fewer than the model's " +
                                                                 std::to_string(model.layers) + " (Megatron-core)");
        if (plan.pp > 1)
            problems.add(field("offload_activation_layers"), "Megatron-core's CPU offloading has no pipeline "
                                                             "parallelism: needs pp 1, got " + std::to_string(plan.pp));
        if (plan.recompute != Recompute::None)
            problems.add(field("offload_activation_layers"), "Megatron-core's CPU offloading does not run with "
                                                             "activation recompute: needs recompute none, got " +
                                                                 toString(plan.recompute));
        if (plan.offloadActivations)
            problems.add(field("offload_activation_layers"), "one activation offload at a time: offload_activations "
                                                             "(checkpointed inputs) or offload_activation_layers");
    }
    if (plan.offloadActivations && plan.recompute != Recompute::Full)
        problems.add(field("offload_activations"), "activation offload swaps the checkpointed layer inputs to the host "
                                                   "(DeepSpeed cpu_checkpointing); needs recompute full");
    if (const auto* rec = findPrecisionRecipe(plan.precision)) {
        if (const std::string why = precisionUnsupported(cluster, plan.precision, plan.framework); !why.empty())
            problems.add(field("precision"), why);
        // The optimizer-state keys change a distributed optimizer's fp32 master of bf16 weights, and optimizer_dtype
        // also the moments of bf16 weights held without a master (bf16_no_master); stated where neither is, they
        // would change nothing, so the plan says something tessel does not predict.
        const bool bf16Master = rec->weightBytes == 2 && rec->masterBytes == 4 && plan.zeroStage >= 1;
        const bool bf16NoMaster = rec->weightBytes == 2 && rec->masterBytes == 0 && !rec->fp8();
        const std::string why = plan.zeroStage < 1 ? "needs a distributed optimizer (zero_stage >= 1)"
                                                   : "needs a recipe with bf16 weights beside an fp32 master (megatron, mixed, fp8); \"" +
                                                         plan.precision + "\" has none";
        if (plan.framework.optimizerDtype.value_or("fp32") == "bf16" && !bf16Master && !bf16NoMaster)
            problems.add(field("optimizer_dtype"), "bf16 optimizer state " + why +
                                                       (plan.zeroStage < 1 ? " or bf16 weights without a master (bf16_no_master)"
                                                                           : " nor bf16 weights without one (bf16_no_master)"));
        if (plan.framework.storeParamRemainders.value_or(false) && !bf16Master)
            problems.add(field("store_param_remainders"), "keeping the fp32 master as 16-bit remainders " + why);
    } else {
        problems.add(field("precision"), "unknown precision recipe \"" + plan.precision + "\"");
    }
}

} // namespace tessel
