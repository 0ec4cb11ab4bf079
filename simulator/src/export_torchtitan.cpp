// Export of a plan as a torchtitan TOML job config, and the plans torchtitan cannot run (export.cpp's third
// framework; flag spellings checked against torchtitan/config/job_config.py and
// torchtitan/distributed/pipeline_parallel.py, as export.cpp's header says).
#include "export_common.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::sim::export_detail {

namespace {
// ------------------------------------------------------------------------------------------------ torchtitan

std::string tomlString(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}

// torchtitan's llama3 flavors (torchtitan/models/llama3): dim, layers, heads, kv heads, and the FFN width
// their ffn_dim_multiplier / multiple_of produce.
struct TitanFlavor {
    const char* name;
    int layers;
    int64_t hidden;
    int heads;
    int kvHeads;
    int64_t ffn;
};
constexpr TitanFlavor kLlama3Flavors[] = {
    {"8B", 32, 4096, 32, 8, 14336},
    {"70B", 80, 8192, 64, 8, 28672},
    {"405B", 126, 16384, 128, 8, 53248},
};

// torchtitan's own split of `layers` transformer layers over `stages` virtual stages, the embedding counted as
// `inputWeight` layers and the norm and output layer as `outputWeight` (_generate_llm_fqn_per_model_part,
// torchtitan/distributed/pipeline_parallel.py since #1416: the layers a stage would get, one more on the first
// `effective % stages` stages, less the weights on the ends). Empty where torchtitan raises.
std::vector<int> torchtitanGeneratedSplit(int stages, int layers, int inputWeight, int outputWeight) {
    const int effective = layers + inputWeight + outputWeight;
    const int perStage = stages > 0 ? effective / stages : 0;
    if (stages < 2 || perStage == 0 || inputWeight > perStage || outputWeight > perStage) return {};
    std::vector<int> counts;
    int left = layers;
    for (int u = 0; u < stages; ++u) {
        int take = perStage + (u < effective % stages ? 1 : 0);
        if (u == 0) take -= inputWeight;
        if (u == stages - 1) take -= outputWeight;
        take = std::min(std::max(take, 0), left);
        counts.push_back(take);
        left -= take;
    }
    return counts;
}

// The [parallelism] lines that give torchtitan the plan's layers per virtual stage: layers_per_stage and how many
// fewer the first and the last hold where torchtitan's own split (above) reproduces the counts exactly, which it
// does when every middle stage holds the same; else the modules of each virtual stage by name
// (module_fqns_per_model_part, torchtitan >= 2025-07: tok_embeddings, layers.N, norm, output), which torchtitan
// takes as given, one virtual stage per list, with layers_per_stage unset.
std::string torchtitanPipelineKeys(const std::vector<int>& counts) {
    std::ostringstream out;
    const int stages = static_cast<int>(counts.size());
    int layers = 0;
    for (int c : counts) layers += c;
    const int middle = stages > 2 ? counts[1] : std::max(counts.front(), counts.back());
    if (counts.front() <= middle && counts.back() <= middle &&
        torchtitanGeneratedSplit(stages, layers, middle - counts.front(), middle - counts.back()) == counts) {
        out << "pipeline_parallel_layers_per_stage = " << middle << "\n";
        out << "pipeline_parallel_first_stage_less_layers = " << middle - counts.front() << "\n";
        out << "pipeline_parallel_last_stage_less_layers = " << middle - counts.back() << "\n";
        return out.str();
    }
    out << "# torchtitan's split gives every middle virtual stage the same layers; this one names each stage's modules\n";
    out << "module_fqns_per_model_part = [";
    int layer = 0;
    for (int u = 0; u < stages; ++u) {
        std::vector<std::string> names;
        if (u == 0) names.push_back("tok_embeddings");
        for (int k = 0; k < counts[static_cast<size_t>(u)]; ++k) names.push_back("layers." + std::to_string(layer++));
        if (u == stages - 1) {
            names.push_back("norm");
            names.push_back("output");
        }
        out << (u ? ", [" : "[");
        for (size_t k = 0; k < names.size(); ++k) out << (k ? ", " : "") << tomlString(names[k]);
        out << "]";
    }
    out << "]\n";
    return out.str();
}

bool llamaArchitecture(const ModelConfig& m) {
    return m.activation == Activation::Swiglu && m.norm == NormKind::RmsNorm &&
           m.position == PositionEmbedding::Rope && m.rotaryPercent == 1.0 && m.slidingWindow == 0 &&
           !m.tiedEmbeddings && !m.linearBias && !m.qkvBias && !m.qkNorm && !m.postNorms &&
           !m.parallelResidual && !m.embeddingNorm && !m.embeddingScale && !m.attentionSinks &&
           m.attentionSoftcap == 0.0 && m.logitSoftcap == 0.0 && !m.moe && !m.mla;
}

} // namespace

// The plans Torchtitan cannot run: every refusal at its plan pointer (the one source of truth for export and search).
void torchtitanRules(const ModelConfig& m, const ClusterConfig& /*cluster*/, const Plan& p, ProblemList& problems, bool withOrder) {
    modelCodeRules(m, p, "torchtitan", "torchtitan", problems);
    // torchtitan's models (deepseek_v3 included) train the next token only.
    if (m.mtpLayers > 0)
        problems.add("/model/mtp_layers", "torchtitan's models have no multi-token prediction modules; export --format "
                                          "megatron (--mtp-num-layers), or set mtp_layers 0");
    optimizerStateRules(p, "torchtitan", false, problems);
    // torchtitan compiles its loss only with the model (compile.components "loss" under compile.enable).
    if (crossEntropyOf(p.framework) == "compiled" && !fusedKernelsOf(p.framework))
        problems.add("/plan/cross_entropy",
                     "torchtitan compiles its loss only under torch.compile, which tessel costs as fused_kernels: set "
                     "fused_kernels true or cross_entropy eager");

    // FSDP2 (fully_shard) shards parameters, gradients and optimizer state together (ZeRO-3) or, replicated,
    // nothing (DDP); and with cp > 1 torchtitan always applies FSDP over the dp_shard x cp mesh.
    // Every pipeline split is expressible: the ones torchtitan's own split makes as pipeline_parallel_layers_per_stage
    // and the fewer layers of the ends, any other as module_fqns_per_model_part (torchtitanPipelineKeys).
    if (p.recompute == Recompute::Selective && p.recomputeModules != recompute_module::Default)
        problems.add("/plan/recompute_modules",
                     "torchtitan's selective checkpointing is its per-op (or every-n-layers) policy, not Megatron-core's "
                     "modules: use recompute selective without recompute_modules, full, or export --format megatron");
    if (p.recomputeLayers > 0)
        problems.add("/plan/recompute_layers",
                     "torchtitan's full activation checkpointing wraps every block; it has no form that recomputes only "
                     "the first layers of a stage: use recompute_layers 0");
    if (p.zeroStage == 1 || p.zeroStage == 2)
        problems.add("/plan/zero_stage",
                     "torchtitan's FSDP2 shards weights, gradients and optimizer state together; "
                     "ZeRO-" +
                         str(p.zeroStage) + " is not expressible: use zero_stage 0 (replicate) or 3 (shard)");
    if (p.cp > 1 && p.zeroStage == 0)
        problems.add("/plan/zero_stage",
                     "torchtitan shards parameters over the context-parallel ranks (FSDP over "
                     "dp_shard x cp) whenever cp > 1; use zero_stage 3 with zero_over_cp");
    if (p.zeroReplicas > 1 && p.dp % p.zeroReplicas != 0)
        problems.add("/plan/zero_replicas",
                     "torchtitan replicates over data-parallel ranks only (data_parallel_replicate_degree divides dp=" +
                         str(p.dp) + "); zero_replicas " + str(p.zeroReplicas) + " does not");
    if (p.cp > 1 && p.cpComm != CpComm::P2p)
        problems.add("/plan/cp_comm_type",
                     "torchtitan's context parallelism is PyTorch's ring attention (its steps and merges, which tessel "
                     "costs as cp_comm_type p2p); " + toString(p.cpComm) +
                         " is Transformer Engine's: use cp_comm_type p2p or export --format megatron");
    if (p.cp > 1 && p.zeroStage == 3 && !p.zeroOverCp)
        problems.add("/plan/zero_over_cp",
                     "torchtitan shards over data x context parallel ranks (dp_shard x cp = " +
                         str(p.dp * p.cp) + "); set zero_over_cp to true");
    if (p.tp > 1 && !p.sequenceParallel)
        problems.add("/plan/sequence_parallel",
                     "torchtitan's tensor parallelism always shards norms and dropout "
                     "along the sequence (SequenceParallel); set sequence_parallel on");
    if (p.ep > 1) {
        // torchtitan's "dp2ep" (parallel_dims.py): the expert mesh borrows dp_shard and every CP rank, and at
        // expert_tensor_parallel_degree 1 every TP rank too (ep = dp_shard_in_ep x cp [x tp]); etp is tp or 1.
        if (p.zeroStage != 3)
            problems.add("/plan/ep",
                         "torchtitan borrows expert-parallel ranks from the FSDP shard dimension "
                         "(ep <= data_parallel_shard_degree x cp); expert parallelism needs zero_stage 3");
        if (p.expertTp() != p.tp && p.expertTp() != 1)
            problems.add("/plan/etp", "torchtitan's expert tensor parallelism is tp or 1 (expert_tensor_parallel_degree); "
                                      "etp " + str(p.expertTp()) + " is neither: export --format megatron");
        const int inner = p.cp * (p.expertFolded() ? p.tp : 1);
        if (p.ep % inner != 0)
            problems.add("/plan/ep",
                         "torchtitan's expert groups take every context-parallel rank" +
                             std::string(p.expertFolded() ? " and every tensor-parallel rank" : "") + " first, so ep must be "
                             "a multiple of " + str(inner) + "; ep " + str(p.ep) + " is not (or export --format megatron)");
    }
    if (p.schedule == Schedule::ZeroBubble)
        problems.add(
            "/plan/schedule",
            "torch.distributed.pipelining's zero-bubble schedules (InterleavedZeroBubble, ZBVZeroBubble) "
            "need two or more stages per rank; tessel's zero_bubble is ZB-H1 with one; use zero_bubble_v "
            "(ZBVZeroBubble, vpp 2), 1f1b or interleaved_1f1b");
    // PyTorch's ScheduleDualPipeV and ScheduleZBVZeroBubble refuse compiled stage modules
    // (_check_torch_compile_compatibility).
    if (p.vShape() && fusedKernelsOf(p.framework))
        problems.add("/plan/framework/fused_kernels",
                     "torch.distributed.pipelining's " + std::string(p.schedule == Schedule::DualPipeV ? "DualPipeV" : "ZBVZeroBubble") +
                         " schedule refuses stages under torch.compile, which is how tessel's fused_kernels reach "
                         "torchtitan; set fused_kernels false");
    if (p.pp == 1 && p.schedule == Schedule::Gpipe)
        problems.add("/plan/schedule",
                     "without pipeline parallelism torchtitan runs one forward and backward per "
                     "micro-batch (gradient accumulation), not GPipe's all-forwards-first; use "
                     "schedule 1f1b");
    if (!p.flashAttention)
        problems.add("/plan/flash_attention",
                     "torchtitan's attention (SDPA or FlexAttention) never stores the s x s "
                     "scores; set flash_attention on");
    // torchtitan keeps fp32 parameters, the master copy itself: sharded by fully_shard and gathered cast to
    // mixed_precision_param (precision fsdp, or fsdp_fp8 with its float8 converter), or replicated and autocast
    // (amp). Megatron-LM's and Transformer Engine's bf16 weights beside an fp32 master are not what it runs.
    Plan asTorchtitan = p;
    asTorchtitan.framework.name = "torchtitan";
    const std::string titanPrecision = defaultPrecisionOf(asTorchtitan);
    if (p.precision == "nvfp4")
        problems.add("/plan/precision",
                     "tessel's nvfp4 is Transformer Engine's NVFP4BlockScaling under Megatron-core; torchtitan has no "
                     "such recipe tessel costs: use precision fsdp_fp8, or export --format megatron");
    else if (p.precision == "megatron" || p.precision == "mixed" || p.precision == "bf16_no_master" || p.precision == "fp8")
        problems.add("/plan/precision",
                     "torchtitan keeps fp32 parameters, the master copy itself, where precision \"" + p.precision +
                         "\" costs bf16 weights beside one: use precision " +
                         (p.precision == "fp8" ? "fsdp_fp8" : titanPrecision) +
                         " (what a torchtitan plan that names none runs)");
    // torchtitan's train_step reduce-scatters every micro-batch's gradients under FSDP2 (no
    // set_requires_gradient_sync toggling); only its pipelining reduces once a step.
    if (p.zeroStage >= 2 && p.pp == 1 && !p.framework.gradSyncEachMicroBatch.value_or(true))
        problems.add("/plan/grad_sync_each_micro_batch",
                     "torchtitan reduce-scatters every micro-batch's gradients (FSDP2 without no_sync between them); "
                     "set grad_sync_each_micro_batch true");
    // torchtitan's mixed_precision_param takes effect through fully_shard when it shards (dp_shard or cp > 1)
    // and through torch.autocast only under DDP or on one device with no other parallelism (its config docs).
    if ((p.precision == "fsdp" || p.precision == "fsdp_pure" || p.precision == "fsdp_fp8") && titanPrecision != "fsdp")
        problems.add("/plan/precision",
                     "torchtitan casts the weights through fully_shard only where it shards (dp_shard = dp / zero_replicas "
                     "> 1 under zero_stage 3, or cp > 1); this plan shards nothing, so it runs precision " +
                         titanPrecision + ": use that, or zero_stage 3 over more than one rank");
    if (p.precision == "amp" && (p.zeroStage >= 3 || p.cp > 1))
        problems.add("/plan/precision",
                     "torchtitan applies mixed precision through fully_shard when it shards, casting the gathered "
                     "weights, not through torch.autocast; use precision fsdp");
    else if (p.precision == "fsdp_amp")
        problems.add("/plan/precision",
                     "torchtitan's fully_shard gathers the weights cast to mixed_precision_param and runs no "
                     "torch.autocast over fp32 gathers (Lightning's FSDP *-mixed); use precision fsdp_pure or fsdp");
    else if (p.precision == "amp" && (p.tp > 1 || p.pp > 1))
        problems.add("/plan/precision",
                     "torchtitan runs torch.autocast only under data parallelism alone (DDP or one device); with "
                     "tensor or pipeline parallelism it does not autocast; use precision fsdp with zero_stage 3");
    // torchtitan's device mesh, slowest first: pp, dp_replicate, dp_shard, cp, tp.
    if (p.offloads())
        problems.add(p.offloadOptimizer ? "/plan/offload_optimizer"
                     : p.offloadParameters ? "/plan/offload_parameters"
                     : p.offloadActivations ? "/plan/offload_activations"
                                            : "/plan/offload_activation_layers",
                     "torchtitan's only offload (training.enable_cpu_offload, FSDP2's CPUOffloadPolicy) moves "
                     "parameters, gradients and optimizer together and steps with torch's CPU Adam, which tessel does "
                     "not model; export --format deepspeed");
    if (withOrder)
    checkRankOrder(p, {O{Tp, Cp, Ep, Dp, Pp}}, "torchtitan",
                   "by its device mesh (pp, dp, cp, tp; slowest first)", problems);
}

std::string exportTorchtitan(const Scenario& s, ProblemList& problems) {
    const auto& m = s.model;
    const auto& p = s.plan;
    torchtitanRules(s.model, s.cluster, p, problems, true);
    if (!problems.empty()) return {};

    const bool pipelined = p.pp > 1;
    const char* flavor = nullptr;
    if (llamaArchitecture(m))
        for (const auto& f : kLlama3Flavors)
            if (f.layers == m.layers && f.hidden == m.hidden && f.heads == m.heads &&
                f.kvHeads == m.kvHeads && f.ffn == m.ffnHidden)
                flavor = f.name;

    std::ostringstream out;
    out << "# tessel export: " << displayName(s) << " as a torchtitan job config (TOML)\n";
    // torchtitan read TOML job configs up to v0.2.2; from 2026-02 (pytorch/torchtitan#2386) it builds jobs from
    // Python config_registry functions, where some of these keys moved (the batch and sequence length, the pipeline's
    // micro-batches): said, so a user on its main branch is not handed a file it no longer reads.
    out << "# for torchtitan v0.2.2 and earlier: from 2026-02 (#2386) torchtitan configures jobs in Python "
           "(config_registry.py), where the batch, seq_len and pipeline micro-batch keys moved\n";
    out << "# model " << m.name << " on " << s.cluster.nodes << " x " << s.cluster.gpusPerNode << " GPUs ("
        << s.cluster.name << "): tp " << p.tp << " x pp " << p.pp << " x dp " << p.dp << " x cp " << p.cp
        << ", ep " << p.ep << "; " << p.microBatchesPerStep() << " micro-batches of " << p.microBatch
        << " per step\n";
    out << "# launch on every node: " << (launchBlockingOf(p.framework) ? "CUDA_LAUNCH_BLOCKING=1 " : "")
        << "torchrun --nproc_per_node " << s.cluster.gpusPerNode << " --nnodes "
        << s.cluster.nodes << " -m torchtitan.train --job.config_file THIS_FILE\n";
    if (!flavor) {
        out << "# torchtitan builds models from registered flavors; register \"" << m.name << "\" with dim "
            << m.hidden << ", n_layers " << m.layers << ", n_heads " << m.heads << ", n_kv_heads "
            << m.kvHeads << ", FFN width " << m.ffnHidden << ", vocab " << m.vocab;
        if (m.moe) out << ", " << m.moe->experts << " experts (top " << m.moe->topK << ")";
        if (m.moe && !m.moe->denseLayers.empty()) out << ", " << m.moe->denseLayers.size() << " dense layers";
        if (m.mla)
            out << ", latent attention (q_lora_rank " << m.mla->qLoraRank << ", kv_lora_rank " << m.mla->kvLoraRank
                << ", qk_nope_head_dim " << m.mla->qkNopeHeadDim << ", qk_rope_head_dim " << m.mla->qkRopeHeadDim
                << ", v_head_dim " << m.mla->vHeadDim << ")";
        out << "\n";
        if (!llamaArchitecture(m))
            out << "# note: torchtitan's llama3 is SwiGLU / RMSNorm / RoPE over the whole head, untied, without biases, "
                   "q and k norms, norms after attention and the MLP or over the embedding, attention and MLP side by side, a "
                   "scaled embedding, soft-capping, experts, latent or sliding-window attention; "
                << m.name << " differs, so it needs its own model\n";
    }
    if (p.zeroStage == 0 && (p.tp > 1 || p.pp > 1))
        out << "# note: torchtitan releases before its late-2025 parallel_dims rework run DDP only as the "
               "sole "
               "parallelism (\"DDP has not supported > 1D parallelism\"); use a recent torchtitan\n";
    // A torchtitan plan's selective recompute is torchtitan's own per-op policy; another framework's is
    // Megatron's core-attention recompute, which under flash attention stores what no recompute stores but the
    // kernel's log-sum-exp.
    const bool opSelective = opLevelSelectiveRecompute(m, p);
    if (p.recompute == Recompute::Selective && !opSelective)
        out << "# recompute: tessel's selective (core attention) recompute stores nothing more than none "
               "under "
               "flash attention, so it is written as mode \"none\"\n";

    out << "\n[job]\n";
    out << "description = " << tomlString("tessel plan " + displayName(s)) << "\n";

    out << "\n[model]\n";
    // torchtitan's DeepSeek-V3 model is the one with latent attention (torchtitan/models/deepseek_v3).
    out << "name = " << tomlString(m.mla ? "deepseek_v3" : m.moe ? "llama4" : "llama3") << "\n";
    out << "flavor = " << tomlString(flavor ? flavor : m.name) << "\n";
    if (isFp8Recipe(p.precision)) out << "converters = [\"float8\"]\n";

    out << "\n[training]\n";
    // Without pipelining, local_batch_size is one micro-batch and torchtitan accumulates gradients over
    // global / (local x dp) of them; with pipelining, the schedule splits the local batch into micro-batches.
    const int local = pipelined ? p.globalBatch / p.dp : p.microBatch;
    out << "local_batch_size = " << local << "\n";
    out << "global_batch_size = " << p.globalBatch << "\n";
    out << "seq_len = " << m.seqLen << "\n";
    out << "mixed_precision_param = "
        << tomlString(isHalfRecipe(p.precision) || isFsdpRecipe(p.precision) || isFp8Recipe(p.precision) || p.precision == "amp"
                          ? (halfDtypeOf(p.framework) == "fp16" ? "float16" : "bfloat16") : "float32")
        << "\n";
    out << "mixed_precision_reduce = " << tomlString(p.precision == "fsdp_pure" ? "bfloat16" : "float32") << "\n";

    out << "\n[parallelism]\n";
    // HSDP: FSDP inside dp / zero_replicas ranks (x cp), replicated zero_replicas times.
    const int replicas = std::max(1, p.zeroReplicas);
    out << "data_parallel_replicate_degree = " << (p.zeroStage == 3 ? replicas : p.dp) << "\n";
    out << "data_parallel_shard_degree = " << (p.zeroStage == 3 ? p.dp / replicas : 1) << "\n";
    // What tessel costs: each layer's weights re-gathered for its backward (its ZeRO-3 gather buffers), or, under
    // pipelining with nothing stated, kept gathered once a step (fsdpGathersOncePerStep, torchtitan's own "default").
    const OverlapSettings ov = resolveOverlap(p.framework, p.schedule == Schedule::Interleaved1F1B, p.zeroStage);
    const bool reshard = ov.reshardAfterForward && !fsdpGathersOncePerStep(p.framework, p.pp, p.zeroStage);
    if (p.zeroStage == 3) out << "fsdp_reshard_after_forward = " << tomlString(reshard ? "always" : "never") << "\n";
    out << "tensor_parallel_degree = " << p.tp << "\n";
    // The logits gathered over TP and the loss run whole on every rank (loss_parallel false).
    if (p.tp > 1 && !lossParallelOf(p.framework)) out << "disable_loss_parallel = true\n";
    // Async TP (torch's micro-pipelined collective matmuls) is torchtitan's TP overlap.
    out << "enable_async_tensor_parallel = " << (ov.tpCommOverlap && p.tp > 1 ? "true" : "false") << "\n";
    out << "pipeline_parallel_degree = " << p.pp << "\n";
    if (pipelined) {
        const char* schedule = p.schedule == Schedule::Gpipe             ? "GPipe"
                               : p.schedule == Schedule::DualPipeV       ? "DualPipeV"
                               : p.schedule == Schedule::ZeroBubbleV     ? "ZBVZeroBubble"
                               : p.schedule == Schedule::Interleaved1F1B ? "Interleaved1F1B"
                                                                         : "1F1B";
        out << "pipeline_parallel_schedule = " << tomlString(schedule) << "\n";
        out << "pipeline_parallel_microbatch_size = " << p.microBatch << "\n";
        out << torchtitanPipelineKeys(chunkLayerCounts(m, withResolvedPipelineSplit(m, s.cluster, p)));
    }
    out << "context_parallel_degree = " << p.cp << "\n";
    out << "expert_parallel_degree = " << p.ep << "\n";
    // torchtitan's default is 1 (whole experts, EP over the TP ranks too: since 2025-08, aeb3a4baf); tessel's etp.
    if (p.ep > 1) out << "expert_tensor_parallel_degree = " << p.expertTp() << "\n";

    if (isFp8Recipe(p.precision)) {
        // torchao float8 training on the linear layers, with FP8 all-gathers under FSDP as fp8_param_gather resolves
        // (on for torchtitan, as its float8 guide launches it).
        const bool fp8Gather = p.zeroStage == 3 && fp8ParamGatherOf(p.framework);
        out << "\n[float8]\n";
        out << "enable_fsdp_float8_all_gather = " << (fp8Gather ? "true" : "false") << "\n";
        out << "precompute_float8_dynamic_scale_for_fsdp = " << (fp8Gather ? "true" : "false") << "\n";
    }

    // AdamW as tessel costed it: torchtitan's fused default since #881 (2025-02), foreach where the plan says so.
    out << "\n[optimizer]\n";
    out << "name = \"AdamW\"\n";
    out << "implementation = " << tomlString(foreachOptimizerOf(p.framework) ? "foreach" : "fused") << "\n";

    // tessel predicted fused elementwise kernels (FORMULAS.md §3.4) only where torch.compile fuses them.
    out << "\n[compile]\n";
    out << "enable = " << (fusedKernelsOf(p.framework) ? "true" : "false") << "\n";
    // The loss compiled as tessel costed it (crossEntropyOf: torchtitan 2025 on compiles it with the model).
    out << "components = " << (crossEntropyOf(p.framework) == "compiled" ? "[\"model\", \"loss\"]" : "[\"model\"]") << "\n";

    out << "\n[activation_checkpoint]\n";
    out << "mode = " << tomlString(p.recompute == Recompute::Full ? "full" : opSelective ? "selective" : "none") << "\n";
    if (opSelective) out << "selective_ac_option = \"op\"\n";
    return out.str();
}

} // namespace tessel::sim::export_detail
