// Plan JSON loading and writing, the names of its enums and recompute modules, and the precision recipes (a plan's
// validation against its model and cluster is plan_validation.cpp).
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

Plan bf16EndLayerPlan(const Plan& plan) {
    Plan out = plan;
    out.precision = "megatron";
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
    // nvfp4: Megatron-core with Transformer Engine's NVFP4BlockScaling (--fp4-format e2m1 --fp4-recipe nvfp4,
    //      Blackwell): the megatron recipe's 18 B and all three GEMMs of every linear layer (forward, input and weight
    //      gradients) in E2M1 with an E4M3 scale per 16 elements and an fp32 one per tensor; per linear weight its
    //      rowwise and columnwise NVFP4 copies, each quantized from the bf16 weight, 2 x 0.5625 B (Transformer Engine
    //      recipe/__init__.py NVFP4BlockScaling, pytorch/module/linear.py). The embedding, the output layer, the norms
    //      and attention stay bf16 (Megatron-core fp4_utils.py get_fp4_context wraps the transformer layers only).
    // fsdp: PyTorch FSDP / FSDP2 with MixedPrecision(param_dtype=bf16, reduce_dtype=fp32), as torchtitan
    //      (mixed_precision_param bfloat16, mixed_precision_reduce float32) and Composer's amp_bf16 'DEFAULT' run
    //      it: the sharded fp32 parameters are the master (4), fp32 gradient shards (4), two moments: 16 B;
    //      parameters gathered cast to bf16 (2 B moved), gradients reduced in fp32 (4 B).
    // fsdp_pure: Composer's 'PURE' (reduce_dtype = param_dtype): the same, gradients reduced in bf16 (2 B).
    // amp: PyTorch autocast(bfloat16) over fp32 parameters, the plain-PyTorch recipe (torch.amp; HF Trainer --bf16,
    //      Lightning "bf16-mixed", nanoGPT): fp32 weights are the master (4), fp32 gradients (4, reduced in fp32),
    //      two moments: 16 B; the bf16 copies autocast makes are counted with the activations' lifetime (layer_activations.cpp).
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
        {"nvfp4", Dtype::Bf16, 2, 4, 4, 4, Dtype::Fp4, 2.0 * (0.5 + 1.0 / 16.0), 0, 0},
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
    // PyTorch FSDP over 16-bit parameters (bf16_no_master) with MixedPrecisionPolicy(reduce_dtype=float32) stated:
    // each gradient is cast to fp32 for its reduce-scatter and the reduced shard cast back to the parameters' dtype
    // (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce), so 4 B a parameter cross the links,
    // and FSDP2's no-sync accumulation keeps the unsharded gradient in fp32 (fsdpNoSyncGradBytes). KempnerForge's
    // default_mp_policy, AutoModel's MoE parallelizer. Only where the plan states it: FSDP2 without a reduce_dtype
    // reduces in the parameters' dtype.
    if (precision == "bf16_no_master" && (framework.name == "fsdp" || framework.name == "torchtitan") &&
        framework.gradReduceInFp32.value_or(false))
        r.reduceBytes = 4;
    // FP8 parameters (--fp8-param-gather, NeMo 2's fp8_params): the linear weights are kept in FP8 with their
    // transpose, 1 + 1 B in place of the 2 B bf16 weights and 2 B copies, and gathered at 1 B. The embeddings
    // and norms stay bf16 and are gathered at 2 B; counting them at 1 B moves up to 13% too few bytes (Llama
    // 3 8B, whose untied 128K-token embeddings are 1.05 of its 8.0 B parameters). NVFP4 parameters
    // (--fp4-param-gather): the linear weights kept as their two NVFP4 copies alone, the distributed
    // optimizer gathering the rowwise data, 0.5 B (Megatron-core fp4_utils.py modify_nvfp4_rowwise_storage
    // maps only the packed rowwise bytes into the parameter buffer; the block scales are computed on every
    // rank from amaxes all-reduced before the cast). torchao's FP8 all-gather (fsdp_fp8) casts the fp32
    // shards it keeps before each gather: 1 B moved, nothing kept quantized. MXFP8 parameters are gathered in
    // bf16 and quantized after: Megatron-core's distributed optimizer maps an MXFP8 model's parameter buffer
    // onto the gradient buffer as bf16 ("For MXFP8 param: Create a shared buffer for param AG and grad RS",
    // param_and_grad_buffer.py, core_r0.13 on; --reuse-grad-buf-for-mxfp8-param-ag copies each gathered bf16
    // slice into the MXFP8 parameter, which quantizes it), since an MXFP8 weight needs its rowwise and
    // columnwise blocks and a gathered rowwise copy cannot give the other. Megatron-Bridge's MXFP8 recipes
    // set both (mixed_precision.py bf16_with_mxfp8_mixed).
    const bool quantizedParams = (r.fp8() && fp8ParamGatherOf(framework)) || (r.fp4() && fp4ParamGatherOf(framework));
    if (quantizedParams) {
        r.quantizedWeightCopyBytes = 0.0;
        const bool mxfp8 = r.fp8() && r.name != "fsdp_fp8" && fp8RecipeOf(framework) == "mxfp8";
        r.gatherBytes = mxfp8 ? bytesPerElement(r.computeDtype) : bytesPerElement(r.gemmDtype);
        r.quantizedParams = r.name != "fsdp_fp8";
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
    const bool bf16NoMaster = r.weightBytes == 2 && r.masterBytes == 0 && !r.quantizedGemms();
    if (bf16NoMaster && optimizerDtypeOf(framework) == "bf16") {
        r.momentBytes = 2;
    } else if (bf16Master && optimizerDtypeOf(framework) == "bf16") {
        r.momentBytes = 2;
        r.masterBytes = quantizedParams ? 2 : 0;
    } else if (bf16Master && !quantizedParams && storeParamRemaindersOf(framework, r.quantizedGemms())) {
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
    if (rec->fp4() && !peaks.count(Dtype::Fp4))
        return "\"" + precision + "\" runs its GEMMs in NVFP4, for which cluster '" + cluster.name +
               "' gives no fp4 peak (Transformer Engine trains in NVFP4 on Blackwell, SM 10.0 and 10.3)";
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

PrecisionRecipe fp8OnGpu(PrecisionRecipe recipe, const FrameworkSettings& framework, const GpuSpec& gpu) {
    // Transformer Engine only (torchao's Float8Linear, fsdp_fp8, transposes per GEMM and keeps nothing).
    if (!recipe.fp8() || recipe.name == "fsdp_fp8" || !gpu.fp8GemmAnyLayout) return recipe;
    const std::string scaling = fp8RecipeOf(framework);
    if (scaling != "delayed" && scaling != "tensorwise") return recipe;
    recipe.fp8Transposes = false;
    if (recipe.quantizedWeightCopyBytes > 0.0) recipe.quantizedWeightCopyBytes = 1.0;
    return recipe;
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
    // Megatron-core's --first-last-layers-bf16 and its counts (each 1 where the flag is on and the count unstated, its
    // default); a count without the flag says nothing Megatron-core would run, so it is named.
    if (r.optBool("first_last_layers_bf16", false)) {
        p.bf16LayersAtStart = static_cast<int>(r.optInt("num_layers_at_start_in_bf16", 1, 0, L::layers));
        p.bf16LayersAtEnd = static_cast<int>(r.optInt("num_layers_at_end_in_bf16", 1, 0, L::layers));
    } else {
        for (const char* key : {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"})
            if (r.has(key)) {
                (void)r.optInt(key, 0, 0, L::layers); // read, so that it is named once, here
                problems.add(r.pointer(key), std::string(key) + " counts Megatron-core's BF16 end layers; it needs "
                                             "first_last_layers_bf16 true");
            }
    }
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
    // NVFP4's switches say nothing on another precision.
    for (const auto& [key, set] : {std::pair<const char*, bool>{"fp4_param_gather", p.framework.fp4ParamGather.has_value()},
                                   {"nvfp4_rht", p.framework.nvfp4Rht.has_value()},
                                   {"nvfp4_stochastic_rounding", p.framework.nvfp4StochasticRounding.has_value()}})
        if (set && p.precision != "nvfp4")
            problems.add(r.pointer(key), std::string(key) + " is a setting of NVFP4 training (precision \"nvfp4\"); "
                         "precision \"" + p.precision + "\" has none");
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
    if (p.bf16EndLayers()) {
        j["first_last_layers_bf16"] = true;
        j["num_layers_at_start_in_bf16"] = p.bf16LayersAtStart;
        j["num_layers_at_end_in_bf16"] = p.bf16LayersAtEnd;
    }
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

} // namespace tessel
