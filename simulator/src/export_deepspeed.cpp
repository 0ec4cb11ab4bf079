// DeepSpeed's export: the plans its ds_config.json cannot express, each refused at its plan pointer, and the
// ds_config.json of one it can (split from export.cpp, beside export_torchtitan.cpp).
#include "export_common.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace tessel::sim::export_detail {

namespace {
// The ZeRO stage DeepSpeed runs: bf16 without ZeRO is its BF16_Optimizer, which shards as ZeRO-1 does, so over one
// data-parallel rank it is written as stage 1 (deepSpeedRules says why).
int deepSpeedStage(const Plan& p) {
    const bool bf16 = isHalfRecipe(p.precision) && halfDtypeOf(p.framework) == "bf16";
    return bf16 && p.zeroStage == 0 && p.dp == 1 ? 1 : p.zeroStage;
}
} // namespace

// DeepSpeed's config carries batch sizes, ZeRO, precision, activation checkpointing, pipeline settings and (AutoTP
// training) tensor parallelism; everything else that tessel plans (Megatron-style sequence parallelism, ring-attention
// context parallelism, expert parallelism, selective recompute) lives in model code, so such plans are refused with
// the alternative named. Every refusal at its plan pointer (the one source of truth for export and search).
void deepSpeedRules(const ModelConfig& m, const ClusterConfig& cluster, const Plan& p, ProblemList& problems, bool withOrder) {
    modelCodeRules(m, p, "DeepSpeed", "deepspeed", problems);
    optimizerStateRules(p, "DeepSpeed", false, problems);
    const bool half = isHalfRecipe(p.precision);
    // ZeRO stage DeepSpeed runs. Without ZeRO, bf16 in DeepSpeed means BF16_Optimizer, which shards the fp32
    // master weights and Adam state over data parallel (ZeRO-1); over a single data-parallel rank the two are
    // the same, so a dp = 1 bf16 plan is written as stage 1. fp16 without ZeRO is FP16_Optimizer, replicated.
    const int stage = deepSpeedStage(p);

    if (p.pp > 1 && !evenPipelineSplit(m, withResolvedPipelineSplit(m, cluster, p)))
        problems.add("/plan/pipeline_split",
                     "DeepSpeed's PipelineModule places layers by its partition_method in model code (\"parameters\" or "
                     "\"uniform\"), not by per-stage counts in the config; tessel cannot state this uneven split there: "
                     "export --format megatron or torchtitan, or use an even split");
    if (p.tp > 1) {
        if (p.pp > 1)
            problems.add("/plan/tp",
                         "DeepSpeed's config expresses tensor parallelism only as AutoTP training "
                         "(tensor_parallel.autotp_size), which does not combine with PipelineModule; run "
                         "Megatron-DeepSpeed (--tensor-model-parallel-size " +
                             str(p.tp) + ") with this config, or export --format megatron");
        if (p.zeroStage == 3)
            problems.add("/plan/zero_stage",
                         "DeepSpeed's AutoTP training (tensor_parallel.autotp_size) supports ZeRO "
                         "stages 0-2 only; use zero_stage 1 or 2, or tp 1");
    }
    if (p.offloadActivationLayers > 0)
        problems.add("/plan/offload_activation_layers",
                     "DeepSpeed offloads activations as checkpointed layer inputs (cpu_checkpointing, with full "
                     "recompute: offload_activations), not whole layers; export --format megatron for Megatron-core's "
                     "--cpu-offloading-num-layers");
    if (p.sequenceParallel)
        problems.add(
            "/plan/sequence_parallel",
            "DeepSpeed's config has no Megatron-style sequence parallelism (its \"sequence parallelism\" is "
            "Ulysses, a form of context parallelism); set sequence_parallel off or export --format megatron");
    if (p.cp > 1 && (p.cpComm == CpComm::A2a || p.cpComm == CpComm::A2aP2p))
        problems.add("/plan/cp",
                     "DeepSpeed-Ulysses (cp_comm_type a2a) is set up in model code (Megatron-DeepSpeed's "
                     "--ds-sequence-parallel-size, DeepSpeed's DistributedAttention), not in ds_config.json; use cp 1 "
                     "or export --format megatron");
    else if (p.cp > 1)
        problems.add("/plan/cp",
                     "DeepSpeed's context parallelism is Ulysses (all-to-all over attention heads, cp_comm_type a2a), "
                     "not the " + std::string(p.cpComm == CpComm::P2p ? "ring attention" : "K/V all-gather") +
                         " tessel predicted; use cp 1 or export --format megatron or torchtitan");
    if (p.ep > 1)
        problems.add("/plan/ep",
                     "DeepSpeed sets expert parallelism in model code (deepspeed.moe.layer.MoE(ep_size=" +
                         str(p.ep) + ")), not in ds_config.json; use ep 1 or export --format megatron");
    if (p.schedule != Schedule::OneFOneB)
        problems.add("/plan/schedule",
                     "DeepSpeed runs one schedule: 1F1B in PipelineEngine (TrainSchedule), and one "
                     "forward and backward per micro-batch without pipelining; \"" +
                         toString(p.schedule) + "\" is not expressible, use schedule 1f1b");
    if (p.zeroReplicas > 1 && p.zeroStage < 3)
        problems.add("/plan/zero_replicas",
                     "DeepSpeed shards over sub-groups only at ZeRO-3 (MiCS, mics_shard_size); ZeRO-" + str(p.zeroStage) +
                         " with zero_replicas " + str(p.zeroReplicas) + " is not expressible: use zero_stage 3 or zero_replicas 1");
    if (p.pp > 1 && p.zeroStage >= 2)
        problems.add("/plan/zero_stage",
                     "DeepSpeed forbids ZeRO-2 and ZeRO-3 with pipeline parallelism "
                     "(PipelineEngine asserts stage < 2); use zero_stage 0 or 1, or pp 1");
    if (half && stage == 0 && halfDtypeOf(p.framework) == "bf16")
        problems.add(
            "/plan/zero_stage",
            "DeepSpeed has no replicated-optimizer bf16 mode: without ZeRO its BF16_Optimizer shards the "
            "fp32 "
            "master weights and Adam state over the " +
                str(p.dp) +
                " data-parallel ranks (that is ZeRO-1), and bf16 gradient accumulation needs ZeRO; use "
                "zero_stage 1");
    if (p.precision == "megatron" && precisionRecipeOf(p).gradBytes == 4 && p.zeroStage >= 2)
        problems.add("/plan/precision",
                     "tessel exports DeepSpeed ZeRO-" + str(p.zeroStage) +
                         " with DeepSpeed's bf16 gradients (fp32 gradients are BF16_Optimizer, "
                         "ZeRO-1 only); use precision mixed");
    if (p.precision == "bf16_no_master")
        problems.add("/plan/precision",
                     "DeepSpeed keeps a separate master copy of the weights in its optimizer; use "
                     "precision mixed");
    // ZeRO-2/3 reduce (DeepSpeed's reduce_scatter / ipg buckets) every micro-batch's gradients.
    if (p.zeroStage >= 2 && !p.framework.gradSyncEachMicroBatch.value_or(true))
        problems.add("/plan/grad_sync_each_micro_batch",
                     "DeepSpeed's ZeRO-2/3 reduce every micro-batch's gradients into their partitions (no no_sync); "
                     "set grad_sync_each_micro_batch true");
    if (p.precision == "amp")
        problems.add("/plan/precision",
                     "tessel exports DeepSpeed's bf16 mode (bf16 weights, an fp32 master in the optimizer), not "
                     "torch.autocast over fp32 weights; use precision mixed");
    if (isFsdpRecipe(p.precision))
        problems.add("/plan/precision",
                     "\"" + p.precision + "\" is PyTorch FSDP's mixed precision (fp32 parameter shards); DeepSpeed "
                     "keeps bf16 partitions and an fp32 master: use precision mixed, or export --format torchtitan");
    if (p.precision == "fp8" || p.precision == "nvfp4")
        problems.add("/plan/precision",
                     "DeepSpeed's config has no FP8 or NVFP4 training (it comes from Transformer Engine modules in model "
                     "code); use precision megatron, or export --format megatron or torchtitan");
    // With flash attention, Megatron-style selective recompute stores what no recompute stores but the attention
    // kernel's log-sum-exp (the s x s scores it drops are never kept), so it is written as no checkpointing; without
    // flash it is not expressible in DeepSpeed's config, nor is another module's recompute.
    if (p.recompute == Recompute::Selective && p.recomputeModules != recompute_module::Default)
        problems.add("/plan/recompute_modules",
                     "DeepSpeed's config has no per-module recompute (Megatron-core's --recompute-modules); use "
                     "recompute full, or export --format megatron");
    else if (p.recompute == Recompute::Selective && !p.flashAttention)
        problems.add("/plan/recompute",
                     "DeepSpeed's config has no selective (attention-only) recompute; use "
                     "recompute full, or flash_attention on (then selective stores no more "
                     "than none)");
    if (p.recomputeLayers > 0)
        problems.add("/plan/recompute_layers",
                     "DeepSpeed checkpoints every layer (PipelineModule's activation_checkpoint_interval 1) or a layer "
                     "every n; it has no form that recomputes only the first layers of a stage: use recompute_layers 0");
    // PipeModelDataParallelTopology: model (tp) fastest, then data, then pipe.
    if (withOrder)
    checkRankOrder(p, {O{Tp, Cp, Ep, Dp, Pp}}, "DeepSpeed",
                   "as PipeModelDataParallelTopology does (tp, dp, pp)", problems);
}

// The ds_config.json for deepspeed.initialize().
std::string exportDeepSpeed(const Scenario& s, ProblemList& problems) {
    const auto& p = s.plan;
    deepSpeedRules(s.model, s.cluster, p, problems, true);
    if (!problems.empty()) return {};
    const bool half = isHalfRecipe(p.precision);
    const int stage = deepSpeedStage(p);
    const OverlapSettings ov = resolveOverlap(p.framework, false, p.zeroStage);

    nlohmann::ordered_json ds;
    ds["train_batch_size"] = p.globalBatch;
    ds["train_micro_batch_size_per_gpu"] = p.microBatch;
    ds["gradient_accumulation_steps"] = p.microBatchesPerStep();
    ds["gradient_clipping"] = 1.0;
    if (half) {
        const bool fp16 = halfDtypeOf(p.framework) == "fp16";
        ds[fp16 ? "fp16" : "bf16"] = {{"enabled", true}};
        // megatron: fp32 gradient accumulation (DeepSpeed picks BF16_Optimizer at stage 1);
        // mixed: 16-bit gradients inside the ZeRO optimizer.
        ds["data_types"] = {{"grad_accum_dtype", precisionRecipeOf(p).gradBytes == 4 ? "fp32" : fp16 ? "fp16" : "bf16"}};
    }
    nlohmann::ordered_json zero;
    zero["stage"] = stage;
    if (stage >= 1) {
        zero["overlap_comm"] = ov.overlapGradReduce;
        // The version's contiguous_gradients, as the plan is costed: off, ZeRO-1/2 all-reduce their buckets
        // (deepSpeedAllReducesGradientsOf).
        zero["contiguous_gradients"] = stage >= 3 || p.framework.name != "deepspeed" ||
                                       deepSpeedContiguousGradientsOf(p.framework, stage, p.offloadOptimizer);
        zero["reduce_scatter"] = true;
        // The bucket tessel's memory model holds (FORMULAS.md "Other"): the plan's reduce_bucket_size, else
        // DeepSpeed's own default, 5e8.
        zero["reduce_bucket_size"] = reduceBucketElementsOf(p.framework);
        zero["allgather_bucket_size"] = reduceBucketElementsOf(p.framework);
    }
    if (stage == 3) {
        // DeepSpeed's parameter-coordinator limits: the plan's, else DeepSpeed's defaults, which tessel's gather term
        // walks for a deepspeed plan (FORMULAS.md "Other"; another framework's plan is costed at whole layers, more).
        const DeepSpeedStage3 limits = deepSpeedStage3Of(p.framework);
        zero["stage3_prefetch_bucket_size"] = limits.prefetchBucketSize;
        zero["stage3_max_live_parameters"] = limits.maxLiveParameters;
        zero["stage3_max_reuse_distance"] = limits.maxReuseDistance;
    }
    // ZeRO-Offload / ZeRO-Infinity (deepspeed/runtime/zero/offload_config.py): optimizer state and the CPU Adam
    // step, and with stage 3 the parameter partition, in pinned host memory.
    // Hybrid sharding at ZeRO-3: MiCS shards the model state inside groups of this many ranks and replicates
    // across them (DeepSpeed's config: zero_optimization.mics_shard_size).
    if (stage == 3 && p.zeroReplicas > 1) zero["mics_shard_size"] = p.zeroShardSize();
    if (p.offloadOptimizer) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
    if (p.offloadParameters) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
    ds["zero_optimization"] = zero;
    if (p.tp > 1) ds["tensor_parallel"] = {{"autotp_size", p.tp}};
    if (p.pp > 1) {
        // PipelineModule(num_stages=pp) sets the stage count; "stages" documents it, and DeepSpeed's
        // PipelineEngine reads activation_checkpoint_interval from here.
        nlohmann::ordered_json pipe;
        pipe["stages"] = p.pp;
        pipe["activation_checkpoint_interval"] = p.recompute == Recompute::Full ? 1 : 0;
        ds["pipeline"] = pipe;
    }
    if (p.recompute == Recompute::Full) {
        // Configures deepspeed.checkpointing; the model checkpoints every layer through it (PipelineModule's
        // interval above, or deepspeed.checkpointing.checkpoint in model code).
        nlohmann::ordered_json ac;
        // Activation offload: the checkpointed inputs are copied to the host (activation_checkpointing/
        // checkpointing.py: CPU_CHECKPOINT without PARTITION_ACTIVATIONS copies them whole).
        ac["partition_activations"] = false;
        ac["contiguous_memory_optimization"] = false;
        ac["cpu_checkpointing"] = p.offloadActivations;
        ds["activation_checkpointing"] = ac;
    }
    return ds.dump(2) + "\n";
}

} // namespace tessel::sim::export_detail
