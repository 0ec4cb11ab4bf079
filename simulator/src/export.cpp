// Export of a plan as Megatron-LM arguments, a DeepSpeed ds_config.json or a torchtitan TOML job config: the entry
// points, the rules every framework shares, and Megatron-LM's (DeepSpeed's in export_deepspeed.cpp, torchtitan's in
// export_torchtitan.cpp).
//
// Each exporter writes only what the framework really reads, and refuses (InputError, every problem at once,
// each at its plan pointer) where the framework cannot run the plan tessel predicted. Flag and key spellings
// were checked against the frameworks' sources:
//   Megatron-LM  megatron/training/arguments.py (megatron-core era; --attention-backend from core 0.10),
//   DeepSpeed    deepspeed/runtime/config.py, zero/config.py, precision_config.py, constants.py,
//                activation_checkpointing/config.py, tensor_parallel/config.py (AutoTP training, >= 0.16.4),
//                engine.py (_do_optimizer_sanity_check), bf16_optimizer.py, pipe/engine.py,
//   torchtitan   torchtitan/config/job_config.py (TOML job config, [parallelism] pipeline_parallel_degree),
//                torchtitan/distributed/pipeline_parallel.py, torch pipelining's get_schedule_class.
// The reasons behind every refusal are in the messages; docs/decisions.md should carry the summary.
#include "tessel/sim/export.hpp"

#include "export_common.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::sim {

namespace export_detail {

std::string str(int64_t v) {
    return std::to_string(v);
}

// Shortest round-trip-ish text of a probability such as a dropout rate ("0.1", "0").
std::string decimal(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

std::string displayName(const Scenario& s) {
    return s.name.empty() ? std::string("(unnamed scenario)") : s.name;
}

bool isFsdpRecipe(const std::string& precision) {
    return precision == "fsdp" || precision == "fsdp_pure" || precision == "fsdp_fp8" || precision == "fsdp_amp";
}
// FP8 GEMMs: Transformer Engine's recipe (fp8) or torchao's under FSDP (fsdp_fp8).
bool isFp8Recipe(const std::string& precision) { return precision == "fp8" || precision == "fsdp_fp8"; }

bool isHalfRecipe(const std::string& precision) {
    return precision == "megatron" || precision == "mixed";
}

// The rank order restricted to dimensions that have more than one rank: two orders that differ only in where
// a size-1 dimension sits build the same process groups. tessel's `dp` entry is the expert-data part, dp/ep; with
// folded experts (etp != tp) the order lays out both layouts, so a dim counts where either has more than one rank.
std::vector<ParallelDim> activeOrder(const std::array<ParallelDim, 5>& order, const Plan& p) {
    std::vector<ParallelDim> dims;
    for (auto d : order) {
        const int size = d == ParallelDim::Tp   ? std::max(p.tp, p.expertTp())
                         : d == ParallelDim::Cp ? p.cp
                         : d == ParallelDim::Ep ? p.ep
                         : d == ParallelDim::Dp ? (p.expertLayoutApart() ? std::max(p.dp, p.expertDp()) : p.dp / p.ep)
                                                : p.pp;
        if (size > 1) dims.push_back(d);
    }
    return dims;
}

std::string orderText(const std::array<ParallelDim, 5>& order) {
    std::string s;
    for (auto d : order)
        s += (s.empty() ? "" : "-") + toString(d);
    return s;
}

// Records a problem unless the plan's rank order builds the same groups as one the framework can lay out.
void checkRankOrder(const Plan& p, const std::vector<std::array<ParallelDim, 5>>& layouts,
                    const std::string& framework, const std::string& how, ProblemList& problems) {
    const auto mine = activeOrder(p.rankOrder, p);
    for (const auto& layout : layouts)
        if (activeOrder(layout, p) == mine) return;
    std::string accepted;
    for (const auto& layout : layouts)
        accepted += (accepted.empty() ? "" : " or ") + orderText(layout);
    problems.add("/plan/rank_order", framework + " lays out ranks " + how + " (" + accepted +
                                         ", fastest first); \"" + p.rankOrderString() +
                                         "\" builds different process groups");
}


void modelCodeRules(const ModelConfig& m, const Plan& p, const std::string& framework, const std::string& codeName,
                    ProblemList& problems) {
    // Each splits the key/value heads over TP (Megatron-core's num_query_groups_per_partition, Transformer Engine's
    // and torchtitan's head split): K and V replicated beyond them is BigCode's Megatron-LM fork's model code.
    if (kvReplicationOf(p.framework) && m.kvHeads % p.tp != 0)
        problems.add("/plan/kv_replication",
                     framework + " splits the " + std::to_string(m.kvHeads) + " key/value heads over tp " +
                         std::to_string(p.tp) + " and cannot replicate them (BigCode's Megatron-LM fork does): use a tp "
                         "that divides them, or kv_heads a multiple of tp in the model");
    // Whether K and V reach the kernel at every query head is the model code's (repeatKvOf): a stated repeat_kv the
    // exported framework's code does not follow is another model's.
    if (p.framework.repeatKv) {
        FrameworkSettings code = p.framework;
        code.name = codeName;
        code.repeatKv.reset();
        if (repeatKvOf(code) != *p.framework.repeatKv)
            problems.add("/plan/repeat_kv",
                         framework + "'s model code " + (repeatKvOf(code) ? "repeats" : "does not repeat") +
                             " grouped-query K and V to every query head before its attention kernel" +
                             (code.name == "torchtitan" ? " at this framework_version (torchtitan#2259, 2026-01-27)" : "") +
                             ": drop repeat_kv " + (*p.framework.repeatKv ? "true" : "false"));
    }
    // Each splits the word embedding over TP by vocabulary (Megatron-core's VocabParallelEmbedding, DeepSpeed's
    // Megatron code the same, torchtitan's RowwiseParallel tok_embeddings); a TP plan that leaves it whole is another
    // trainer's (KempnerForge's).
    if (p.tp > 1 && !vocabParallelEmbeddingOf(p.framework))
        problems.add("/plan/vocab_parallel_embedding",
                     framework + " splits the word embedding over tp by vocabulary and cannot keep it whole on every "
                                 "rank: drop vocab_parallel_embedding false");
    // Megatron-LM's and DeepSpeed's loss is the vocab-parallel cross-entropy, always; torchtitan gathers the logits
    // with --parallelism.disable_loss_parallel (written by its export).
    if (p.tp > 1 && !lossParallelOf(p.framework) && framework != "torchtitan")
        problems.add("/plan/loss_parallel",
                     framework + " runs the loss over each tp rank's vocabulary shard and cannot gather the logits: "
                                 "drop loss_parallel false, or export for torchtitan (disable_loss_parallel)");
    // TF32 is PyTorch's matmul precision, a line of the training script, not a framework argument.
    if (p.precision == "tf32")
        problems.add("/plan/precision",
                     framework + " has no TF32 setting: TF32 is PyTorch's torch.backends.cuda.matmul.allow_tf32 = True "
                                 "(torch.set_float32_matmul_precision(\"high\")) in the training script; export precision "
                                 "fp32 and set it there");
    if (p.precision == "cpu_fp64")
        problems.add("/plan/precision", framework + " does not train in fp64; cpu_fp64 is the CPU executor's recipe");
    if (p.framework.attentionUnpad.value_or(false))
        problems.add("/plan/attention_unpad",
                     framework + "'s attention takes q, k and v as they are; the unpadded gathers tessel costs are "
                                 "llm-foundry's model code; set attention_unpad false");
    if (trainMetricLossesOf(p.framework) > 0)
        problems.add("/plan/train_metric_losses",
                     framework + " computes no training metrics over the logits; the cross-entropies tessel costs for "
                                 "them are Composer's trainer (llm-foundry); set train_metric_losses 0");
    // Each lets go of the logits before the loss's backward (torchtitan's `del pred`; Megatron-LM's and DeepSpeed's
    // loss inside the model); a trainer that holds them is another's (KempnerForge's, AutoModel's, Composer's).
    if (p.framework.logitsHeldThroughBackward.value_or(false) && trainMetricLossesOf(p.framework) == 0)
        problems.add("/plan/logits_held_through_backward",
                     framework + " lets go of the logits before the loss's backward; holding them is the trainer's own "
                                 "loop (KempnerForge's, AutoModel's): drop logits_held_through_backward true");
    // Megatron-LM and DeepSpeed compile nothing; torchtitan compiles block by block (a whole-model graph is the
    // trainer's own: KempnerForge's, nanoGPT's).
    if (compileWholeModelOf(p.framework))
        problems.add("/plan/compile_whole_model",
                     framework + " does not compile the whole model as one graph; that is the trainer's own "
                                 "(`torch.compile(model)`: KempnerForge's, nanoGPT's): drop compile_whole_model true");
    if (p.framework.crossEntropy.value_or("") == "eager_16bit")
        problems.add("/plan/cross_entropy",
                     framework + " runs its own loss kernel; cross_entropy over the 16-bit logits without an upcast is "
                                 "the trainer's own code (KempnerForge's, AutoModel's): set cross_entropy fused, te or eager");
    if (p.framework.crossEntropy.value_or("") == "flash_attn")
        problems.add("/plan/cross_entropy",
                     framework + " runs its own loss kernel; flash-attn's cross_entropy is llm-foundry's model code: "
                                 "set cross_entropy fused, te or eager");
    // Liger-Kernel patches the Hugging Face model's forward; DeepSpeed runs whatever model it is given (its config
    // says nothing about the loss), Megatron-LM and torchtitan their own heads.
    if (framework != "DeepSpeed" && crossEntropyOf(p.framework) == "fused_linear")
        problems.add("/plan/cross_entropy",
                     framework + " runs its own output layer and loss; Liger-Kernel's fused linear cross-entropy is "
                                 "Hugging Face model code (use_liger_kernel): set cross_entropy fused, te or eager");
    if (framework != "torchtitan" && crossEntropyOf(p.framework) == "compiled")
        problems.add("/plan/cross_entropy",
                     framework + " runs its own loss kernel; the torch.compile'd cross_entropy tessel costs is "
                                 "torchtitan's compiled loss: set cross_entropy fused, te or eager");
}

// What the distributed optimizer keeps, as tessel predicted it (precisionRecipeOf): 16-bit master remainders only
// where the framework has them (`remainders`: Megatron-core's precision-aware optimizer), bf16 optimizer state
// without a master nowhere but NeMo 1's Apex DistributedFusedAdam, which no export format runs.
void optimizerStateRules(const Plan& p, const std::string& framework, bool remainders, ProblemList& problems) {
    const PrecisionRecipe* named = findPrecisionRecipe(p.precision);
    if (!named) return;
    const PrecisionRecipe kept = precisionRecipeOf(p);
    if (kept.momentBytes < named->momentBytes)
        problems.add("/plan/optimizer_dtype",
                     framework + " keeps Adam's moments beside a separate master copy of the weights; bf16 optimizer "
                                 "state with no master is NeMo 1's Apex DistributedFusedAdam (optim.dtype=bf16): set "
                                 "optimizer_dtype fp32");
    else if (kept.masterBytes == 2 && named->masterBytes == 4 && !remainders)
        problems.add("/plan/store_param_remainders",
                     framework + " keeps a full fp32 master; the 16-bit remainders tessel predicted are Apex's and "
                                 "Megatron-core's precision-aware optimizer's: set store_param_remainders false, or "
                                 "export --format megatron");
}

} // namespace export_detail

namespace {

using namespace export_detail;


// ------------------------------------------------------------------------------------------------
// Megatron-LM

// The plan's pipeline split as the frameworks state it: per-rank totals (chunks of a rank must be equal, as
// Megatron-LM divides a rank's layers evenly over its virtual stages), the middle ranks' common count, and the
// first/last ranks' counts. `expressible` false when the middle ranks or a rank's chunks differ.
struct RankSplit {
    bool even = true, expressible = true;
    // The split Megatron-LM makes with --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split:
    // the embedding and the loss each take a layer's place, in the first and the last virtual stage (k - 1 layers
    // there, k in every other, k = (layers + 2) / (pp x vpp); Megatron-core's get_num_layers_to_build).
    bool endsAsLayers = false;
    int first = 0, middle = 0, last = 0;          // layers per rank (over its chunks)
    int firstChunk = 0, middleChunk = 0, lastChunk = 0; // layers per virtual stage
    std::string text;                             // "7,8x14,7"
};
RankSplit rankSplit(const ModelConfig& model, const ClusterConfig& cluster, const Plan& given) {
    const Plan plan = withResolvedPipelineSplit(model, cluster, given);
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    const int p = plan.pp, v = plan.vpp;
    RankSplit r;
    r.text = pipelineSplitText(model, plan);
    r.even = r.text.empty();
    auto at = [&](int stage, int chunk) { return counts[static_cast<size_t>(chunk * p + stage)]; };
    for (int st = 0; st < p; ++st)
        for (int c = 1; c < v; ++c)
            if (at(st, c) != at(st, 0)) r.expressible = false;
    r.firstChunk = at(0, 0);
    r.lastChunk = at(p - 1, 0);
    r.middleChunk = p > 2 ? at(1, 0) : (p == 2 ? r.lastChunk : r.firstChunk);
    for (int st = 1; st + 1 < p; ++st)
        if (at(st, 0) != r.middleChunk) r.expressible = false;
    r.first = r.firstChunk * v;
    r.middle = r.middleChunk * v;
    r.last = r.lastChunk * v;
    const int chunks = p * v;
    if (!r.even && chunks > 1 && (model.layers + 2) % chunks == 0) {
        const int k = (model.layers + 2) / chunks;
        bool ends = k >= 1; // k = 1: the embedding and the loss alone in their virtual stages (Megatron-Bridge's 405B)
        for (int i = 0; i < chunks && ends; ++i)
            ends = counts[static_cast<size_t>(i)] == (i == 0 || i == chunks - 1 ? k - 1 : k);
        r.endsAsLayers = ends;
    }
    return r;
}

// The plans Megatron cannot run: every refusal at its plan pointer (the one source of truth for export and search).
void megatronRules(const ModelConfig& m, const ClusterConfig& cluster, const Plan& p, ProblemList& problems, bool withOrder) {
    modelCodeRules(m, p, "Megatron-LM", "megatron", problems);
    // A GELU behind a gate: Megatron-LM's arguments gate with SiLU only (--swiglu); Megatron-core builds one from its
    // TransformerConfig (gated_linear_unit, activation_func), as NeMo's Gemma recipes do.
    if (m.embeddingNorm)
        problems.add("/model/embedding_norm", "Megatron-LM's arguments have no norm over the embedding (BLOOM's): that is "
                                              "BigScience's Megatron-DeepSpeed --embed-layernorm");
    if (m.postNorms)
        problems.add("/model/post_norms", "Megatron-LM's arguments have no norms after attention and the MLP (Gemma 2 and "
                                          "3's); its layer spec normalises before them only");
    if (m.parallelResidual)
        problems.add("/model/parallel_residual",
                     "Megatron-LM's arguments have no parallel attention and MLP (GPT-J's block); GPT-NeoX runs it "
                     "(gpt_j_residual in its config, one TP all-reduce a layer: export --format deepspeed with its "
                     "model code), NeMo's Falcon layer spec from its own config");
    if (m.embeddingScale)
        problems.add("/model/embedding_scale", "Megatron-LM's arguments have no scaling of the embedding by sqrt(hidden) "
                                               "(Gemma's); NeMo's Gemma models run it, which a launch script cannot set");
    for (const auto& [key, cap] : {std::pair{"attention_softcap", m.attentionSoftcap}, std::pair{"logit_softcap", m.logitSoftcap}})
        if (cap > 0.0)
            problems.add(std::string("/model/") + key, "Megatron-LM's arguments have no tanh soft-capping (Gemma 2's); NeMo's "
                                                      "Gemma2Model runs it from its own config, which a launch script cannot set");
    if (m.activation == Activation::Geglu)
        problems.add("/model/activation", "Megatron-LM's arguments have no gated GELU (geglu): --swiglu gates with SiLU. "
                                          "Megatron-core runs one from its TransformerConfig (gated_linear_unit with "
                                          "activation_func gelu), which a launch script cannot set");
    if (m.position == PositionEmbedding::Alibi)
        problems.add("/model/position_embedding",
                     "Megatron-LM has no ALiBi (--position-embedding-type takes learned_absolute, rope, mrope, "
                     "relative or none); BigScience's Megatron-DeepSpeed fork runs it (--position-embedding-type "
                     "alibi): export --format deepspeed with that fork's model code, or use rope");
    optimizerStateRules(p, "Megatron-LM", true, problems);
    const RankSplit split = rankSplit(m, cluster, p);
    if (!split.expressible && !split.endsAsLayers)
        problems.add("/plan/pipeline_layers",
                     "Megatron-LM states an uneven split as the first and last pipeline rank's layers with the rest "
                     "shared evenly and each rank's layers divided evenly over its virtual stages; this split (" +
                         split.text + ") is not of that form: set first_stage_layers/last_stage_layers instead");

    // ZeRO: Megatron-LM's distributed optimizer shards the fp32 master weights and Adam state (ZeRO-1) over
    // the data-parallel x context-parallel group (DDP buffers use intra_dp_cp_group).
    if (p.zeroStage >= 2)
        problems.add(
            "/plan/zero_stage",
            "Megatron-LM cannot express ZeRO-" + str(p.zeroStage) +
                ": its distributed optimizer (--use-distributed-optimizer) is ZeRO-1, and its FSDP paths "
                "(--use-megatron-fsdp, --use-torch-fsdp2) shard differently from what tessel predicted; "
                "use zero_stage 0 or 1, or export --format deepspeed or torchtitan (FSDP) for ZeRO-2/3");
    if (p.zeroReplicas > 1 && p.zeroStage == 1 && p.ep > 1)
        problems.add("/plan/zero_replicas",
                     "tessel exports Megatron-LM's optimizer instances (--num-distributed-optimizer-instances) for dense "
                     "models; with expert parallelism the expert groups split differently: use zero_replicas 1 or ep 1");
    if (p.zeroStage == 1 && p.cp > 1 && !p.zeroOverCp)
        problems.add("/plan/zero_over_cp",
                     "Megatron-LM's distributed optimizer shards over data x context parallel "
                     "ranks (dp x cp = " +
                         str(p.dp * p.cp) + "), not over dp alone; set zero_over_cp to true");
    if (p.schedule == Schedule::Gpipe)
        problems.add("/plan/schedule",
                     "Megatron-LM has no GPipe schedule (it runs 1F1B, or interleaved 1F1B with "
                     "virtual stages); use schedule 1f1b or interleaved_1f1b");
    if (p.vShape())
        problems.add("/plan/schedule",
                     "Megatron-LM has no DualPipe, DualPipeV or ZB-V schedule (DeepSeek's code and PyTorch's pipelining "
                     "run them); use schedule 1f1b or interleaved_1f1b, or export to torchtitan");
    if (p.schedule == Schedule::ZeroBubble)
        problems.add("/plan/schedule",
                     "mainline Megatron-LM has no zero-bubble (ZB-H1) schedule; use schedule 1f1b or "
                     "interleaved_1f1b");
    if (p.precision == "bf16_no_master")
        problems.add("/plan/precision",
                     "Megatron-LM always keeps a separate master copy of the weights (fp32, or fp16 "
                     "with --use-precision-aware-optimizer); use precision mixed or megatron");
    if (p.precision == "amp")
        problems.add("/plan/precision",
                     "Megatron-LM keeps bf16 weights beside an fp32 master and runs no torch.autocast over fp32 "
                     "weights; use precision megatron or mixed");
    if (isFsdpRecipe(p.precision))
        problems.add("/plan/precision",
                     "\"" + p.precision + "\" is PyTorch FSDP's mixed precision (fp32 parameter shards); Megatron-LM "
                     "keeps bf16 weights and an fp32 master: use precision " + std::string(isFp8Recipe(p.precision) ? "fp8" : "megatron") +
                         ", or export --format torchtitan");
    // Megatron-core's default order is tp-cp-ep-dp-pp; --use-tp-pp-dp-mapping makes it tp-cp-ep-pp-dp.
    if (p.offloadParameters || p.offloadActivations)
        problems.add(p.offloadParameters ? "/plan/offload_parameters" : "/plan/offload_activations",
                     "Megatron-LM offloads only the optimizer (--optimizer-cpu-offload, with the distributed "
                     "optimizer); parameter and activation offload are DeepSpeed's: export --format deepspeed");
    if (withOrder)
    checkRankOrder(p, {O{Tp, Cp, Ep, Dp, Pp}, O{Tp, Cp, Ep, Pp, Dp}}, "Megatron-LM",
                   "by its default order or with --use-tp-pp-dp-mapping", problems);
    // Overlap settings the plan states but Megatron-LM cannot run.
    if (p.framework.overlapParamGather.value_or(false) && p.zeroStage != 1)
        problems.add("/plan/overlap_param_gather",
                     "Megatron-LM's --overlap-param-gather overlaps the distributed optimizer's all-gather; it needs "
                     "zero_stage 1");
    if (p.framework.tpCommOverlap.value_or(false) && p.tp > 1 && !p.sequenceParallel)
        problems.add("/plan/tp_comm_overlap",
                     "Megatron-LM's --tp-comm-overlap (Transformer Engine userbuffers) needs sequence parallelism; "
                     "set sequence_parallel on");
    if (p.framework.overlapP2pComm.value_or(false) && p.pp > 1 && p.schedule != Schedule::Interleaved1F1B)
        problems.add("/plan/overlap_p2p_comm",
                     "Megatron-LM overlaps pipeline transfers only in the interleaved schedule; its 1F1B waits on "
                     "each batched send/receive; set overlap_p2p_comm off or use interleaved_1f1b");
    if (p.framework.asyncTpGradReduce && !*p.framework.asyncTpGradReduce)
        problems.add("/plan/async_tp_grad_reduce",
                     "current Megatron-LM always overlaps the backward TP collective with the weight-gradient GEMM "
                     "(the switch was removed); set async_tp_grad_reduce on or leave it out");
}

std::string exportMegatron(const Scenario& s, ProblemList& problems) {
    const auto& m = s.model;
    const auto& p = s.plan;
    megatronRules(s.model, s.cluster, p, problems, true);
    if (!problems.empty()) return {};
    const RankSplit split = rankSplit(m, s.cluster, p);
    const OverlapSettings ov = resolveOverlap(p.framework, p.schedule == Schedule::Interleaved1F1B, p.zeroStage);

    std::vector<std::string> args;
    auto arg = [&](const std::string& flag, const std::string& value = {}) {
        args.push_back(value.empty() ? flag : flag + " " + value);
    };
    // Model shape.
    arg("--num-layers", str(m.layers));
    arg("--hidden-size", str(m.hidden));
    arg("--num-attention-heads", str(m.heads));
    if (m.mla) {
        // Megatron-core's MLASelfAttention (--multi-latent-attention; arguments.py: --q-lora-rank, --kv-lora-rank,
        // --qk-head-dim for the part without position, --qk-pos-emb-head-dim, --v-head-dim).
        arg("--multi-latent-attention");
        if (m.mla->qLoraRank > 0) arg("--q-lora-rank", str(m.mla->qLoraRank));
        arg("--kv-lora-rank", str(m.mla->kvLoraRank));
        arg("--qk-head-dim", str(m.mla->qkNopeHeadDim));
        arg("--qk-pos-emb-head-dim", str(m.mla->qkRopeHeadDim));
        arg("--v-head-dim", str(m.mla->vHeadDim));
    } else if (m.headDim > 0 && m.headDim * m.heads != m.hidden) {
        arg("--kv-channels", str(m.headDim));
    }
    if (m.kvHeads < m.heads) {
        arg("--group-query-attention");
        arg("--num-query-groups", str(m.kvHeads));
    }
    arg("--ffn-hidden-size", str(m.ffnHidden));
    // Megatron-core's multi-token prediction (--mtp-num-layers; its loss weight, --mtp-loss-scaling-factor, is the
    // user's choice and costs nothing).
    if (m.mtpLayers > 0) arg("--mtp-num-layers", str(m.mtpLayers));
    if (m.moe) {
        arg("--num-experts", str(m.moe->experts));
        arg("--moe-router-topk", str(m.moe->topK));
        arg("--moe-ffn-hidden-size", str(m.moe->expertFfnHidden));
        if (m.moe->sharedFfnHidden > 0) arg("--moe-shared-expert-intermediate-size", str(m.moe->sharedFfnHidden));
        // tessel costs a rank's experts as one grouped GEMM (compute.cpp's expert_fc1 / expert_fc2 over
        // experts_local), Megatron-core's TEGroupedMLP; without the flag it loops over them (SequentialMLP), and
        // the moe_act recompute module needs it.
        arg("--moe-grouped-gemm");
        if (!m.moe->denseLayers.empty()) {
            // Megatron-LM's --moe-layer-freq as a Python list expression, 1 for an expert layer (arguments.py
            // moe_freq_type): the leading dense layers as ([0]*k+[1]*n), any other pattern written out.
            const int k = static_cast<int>(m.moe->denseLayers.size());
            const bool leading = m.moe->denseLayers.back() == k - 1;
            std::string pattern;
            if (leading) {
                pattern = "([0]*" + str(k) + "+[1]*" + str(m.layers - k) + ")";
            } else {
                for (int i = 0; i < m.layers; ++i) pattern += std::string(i == 0 ? "[" : ",") + (m.denseLayersIn(i, 1) ? "0" : "1");
                pattern += "]";
            }
            arg("--moe-layer-freq", "'" + pattern + "'");
        }
        if (m.moe->routingGroups > 1) {
            // Megatron-core's group-limited routing (DeepSeek-V3's node-limited routing).
            arg("--moe-router-num-groups", str(m.moe->routingGroups));
            arg("--moe-router-group-topk", str(m.moe->groupsPerToken));
        }
        // tessel models expert parallelism with all-to-all token exchange (the flex dispatcher's deduplicated one
        // with HybridEP); Megatron's default is all-gather.
        if (p.ep > 1 && moeDispatcherOf(p.framework) == "flex") {
            arg("--moe-token-dispatcher-type", "flex");
            arg("--moe-flex-dispatcher-backend", "hybridep");
        } else if (p.ep > 1) {
            arg("--moe-token-dispatcher-type", "alltoall");
        }
        if (p.ep > 1 && moeA2aOverlapOf(p.framework)) arg("--overlap-moe-expert-parallel-comm");
        if (m.moe->sharedFfnHidden > 0 && moeSharedExpertOverlapOf(p.framework)) arg("--moe-shared-expert-overlap");
    }
    arg("--seq-length", str(m.seqLen));
    arg("--max-position-embeddings", str(m.seqLen));
    arg("--position-embedding-type", m.position == PositionEmbedding::Rope ? "rope" : "learned_absolute");
    if (m.position == PositionEmbedding::Rope && m.rotaryPercent != 1.0) arg("--rotary-percent", decimal(m.rotaryPercent));
    // Megatron-core's window (left, right) counts the keys beside the query's own: w keys is (w - 1, 0).
    if (m.slidingWindow > 0) arg("--window-size", str(m.slidingWindow - 1) + ",0");
    if (m.slidingWindow > 0 && !m.fullAttentionLayers.empty()) {
        // --window-attn-skip-freq (arguments.py moe_freq_type; is_layer_window_attention): N when every N-th layer
        // (1-based) and only those attend in full, else the per-layer list, 1 for a windowed layer.
        const int n = m.fullAttentionLayers.front() + 1;
        bool everyN = n >= 2;
        for (int i = 0; everyN && i < m.layers; ++i) everyN = m.isWindowedLayer(i) == ((i + 1) % n != 0);
        std::string pattern;
        for (int i = 0; !everyN && i < m.layers; ++i) pattern += std::string(i == 0 ? "[" : ",") + (m.isWindowedLayer(i) ? "1" : "0");
        arg("--window-attn-skip-freq", everyN ? str(n) : "'" + pattern + "]'");
    }
    // A learned sink a head (gpt-oss): Megatron-core's softmax_type "learnable" (TransformerConfig, 2025-09 on).
    if (m.attentionSinks) arg("--softmax-type", "learnable");
    arg("--normalization", m.norm == NormKind::RmsNorm ? "RMSNorm" : "LayerNorm");
    if (m.activation == Activation::Swiglu) arg("--swiglu");
    if (m.activation == Activation::SquaredRelu) arg("--squared-relu");
    if (!m.tiedEmbeddings) arg("--untie-embeddings-and-output-weights");
    if (!m.linearBias) {
        arg("--disable-bias-linear");
        if (m.qkvBias) arg("--add-qkv-bias");
    }
    if (m.qkNorm) arg("--qk-layernorm"); // Megatron-core: the --normalization over each head of q and k
    arg("--attention-dropout", decimal(m.dropout));
    arg("--hidden-dropout", decimal(m.dropout));
    arg("--make-vocab-size-divisible-by", str(vocabMultipleOf(p)));
    // Batch.
    arg("--micro-batch-size", str(p.microBatch));
    arg("--global-batch-size", str(p.globalBatch));
    // Parallelism; data parallel is what is left: world / (tp x pp x cp).
    arg("--tensor-model-parallel-size", str(p.tp));
    arg("--pipeline-model-parallel-size", str(p.pp));
    if (split.even) {
        if (p.vpp > 1) arg("--num-layers-per-virtual-pipeline-stage", str(m.layers / (p.pp * p.vpp)));
    } else if (split.endsAsLayers) {
        // The embedding and the loss counted as layers (Megatron-core >= 0.12).
        if (p.vpp > 1) arg("--num-virtual-stages-per-pipeline-rank", str(p.vpp));
        arg("--account-for-embedding-in-pipeline-split");
        arg("--account-for-loss-in-pipeline-split");
    } else {
        // Uneven split (Megatron-LM core >= 0.10): the first/last rank's layers, the rest shared evenly; with
        // interleaving the virtual stage count replaces the layers-per-virtual-stage flag.
        if (p.vpp > 1) arg("--num-virtual-stages-per-pipeline-rank", str(p.vpp));
        if (split.first != split.middle || p.pp == 2) arg("--decoder-first-pipeline-num-layers", str(split.first));
        if (split.last != split.middle && p.pp > 2) arg("--decoder-last-pipeline-num-layers", str(split.last));
    }
    arg("--context-parallel-size", str(p.cp));
    if (p.cp > 1 && p.cpComm != CpComm::P2p) arg("--cp-comm-type", toString(p.cpComm)); // Megatron-core >= 0.9
    if (p.cp > 1 && p.cpComm == CpComm::A2aP2p)
        arg("--hierarchical-context-parallel-sizes", str(p.cpHeadSplit()) + " " + str(p.cpRing()));
    arg("--expert-model-parallel-size", str(p.ep));
    // Megatron-core >= 0.10 defaults it to tp; written when the plan sets it (MoE parallel folding).
    if (p.etp > 0) arg("--expert-tensor-parallel-size", str(p.etp));
    if (activeOrder(p.rankOrder, p) != activeOrder(O{Tp, Cp, Ep, Dp, Pp}, p)) arg("--use-tp-pp-dp-mapping");
    if (p.sequenceParallel) arg("--sequence-parallel");
    if (p.zeroStage == 1) arg("--use-distributed-optimizer");
    // The master as 16-bit remainders: Megatron-core's precision-aware optimizer (Transformer Engine's FusedAdam),
    // whose store_param_remainders defaults to true with fp32 main parameters and moments.
    if (p.zeroStage == 1 && precisionRecipeOf(p).masterBytes == 2) arg("--use-precision-aware-optimizer");
    // Hybrid sharding: that many copies of the distributed optimizer across the data-parallel domain.
    if (p.zeroStage == 1 && p.zeroReplicas > 1) arg("--num-distributed-optimizer-instances", str(p.zeroReplicas));
    if (p.offloadOptimizer) arg("--optimizer-cpu-offload"); // megatron-core >= 0.10: HybridDeviceOptimizer, fraction 1.0
    // Activations of the first N layers to the host (TransformerConfig.cpu_offloading / cpu_offloading_num_layers;
    // pp 1 and no recompute, as validatePlan already holds).
    if (p.offloadActivationLayers > 0) {
        arg("--cpu-offloading");
        arg("--cpu-offloading-num-layers", str(p.offloadActivationLayers));
    }
    // Recompute: selective is Megatron's core-attention recompute (Korthikanti et al. 2022); full keeps only
    // each layer's input.
    if (p.recompute == Recompute::Selective) arg("--recompute-activations");
    // What selective recompute reruns, where it is not the attention core alone (Megatron-core's recompute_modules,
    // Megatron-LM from 2025-04; an empty list reruns nothing).
    if (p.recompute == Recompute::Selective && p.recomputeModules != recompute_module::Default)
        arg("--recompute-modules", recomputeModulesString(p.recomputeModules, " "));
    if (p.recompute == Recompute::Full) {
        // Every layer with its own checkpoint (uniform, 1), or only the first n of each chunk (block, n).
        arg("--recompute-granularity", "full");
        arg("--recompute-method", p.recomputeLayers > 0 ? "block" : "uniform");
        arg("--recompute-num-layers", str(p.recomputeLayers > 0 ? p.recomputeLayers : 1));
    }
    // The loss kernel (crossEntropyOf): tessel costs "fused" as Megatron-core's fused vocab-parallel kernel and
    // "te" as Transformer Engine's, which writes the gradient into the logits; "unfused" (and "eager") is Megatron's
    // default, no flag.
    if (const std::string loss = crossEntropyOf(p.framework); loss != "eager" && loss != "unfused") {
        arg("--cross-entropy-loss-fusion");
        if (loss == "te") arg("--cross-entropy-fusion-impl", "te");
    }
    if (p.flashAttention) {
        arg("--use-flash-attn");
        arg("--attention-backend", "flash");
    } else {
        arg("--attention-backend", "unfused"); // the s x s scores are materialised, as tessel assumed
    }
    // Precision recipes (docs/decisions.md): megatron = bf16 weights + fp32 main grads; mixed = bf16 grads; megatron
    // and fp8 keep bf16 main grads too where grad_reduce_in_fp32 resolves false (NeMo's performance recipes).
    const bool bf16Weights = p.precision == "megatron" || p.precision == "fp8" || p.precision == "nvfp4" || p.precision == "mixed";
    if (bf16Weights && halfDtypeOf(p.framework) == "fp16") {
        // --fp16 (dynamic loss scaling by default) keeps fp16 main gradients unless told to accumulate in fp32.
        arg("--fp16");
        if (precisionRecipeOf(p).gradBytes == 4) arg("--accumulate-allreduce-grads-in-fp32");
    } else if (bf16Weights) {
        arg("--bf16");
        if (precisionRecipeOf(p).gradBytes == 4) arg("--accumulate-allreduce-grads-in-fp32");
        else arg("--grad-reduce-in-bf16");
    } // fp32, cpu_fp32: Megatron's default, fp32 weights and gradients
    if (p.precision == "fp8") {
        // Transformer Engine FP8 as tessel models it: E4M3 forward, E5M2 gradients, the plan's scaling recipe
        // (delayed unless it says; the amax history is delayed scaling's alone). --fp8-recipe is written only where
        // the plan states one: Megatron-LM before it (2025) took delayed scaling and knew no such flag.
        arg("--transformer-impl", "transformer_engine");
        arg("--fp8-format", "hybrid");
        const std::string recipe = fp8RecipeOf(p.framework);
        if (p.framework.fp8Recipe) arg("--fp8-recipe", recipe);
        if (recipe == "delayed") {
            arg("--fp8-amax-history-len", "1024");
            arg("--fp8-amax-compute-algo", "max");
        }
        if (fp8ParamGatherOf(p.framework)) arg("--fp8-param-gather");
    }
    if (p.precision == "nvfp4") {
        // Transformer Engine's NVFP4BlockScaling through Megatron-core (--fp4-format e2m1, --fp4-recipe nvfp4); its
        // Hadamard transform and stochastic rounding are environment switches (launch line).
        arg("--transformer-impl", "transformer_engine");
        arg("--fp4-format", "e2m1");
        arg("--fp4-recipe", "nvfp4");
        if (fp4ParamGatherOf(p.framework)) arg("--fp4-param-gather");
    }
    // Transformer Engine's operation-based MLP (TransformerConfig.use_transformer_engine_op_fuser; the flag
    // is the field's name, arguments.py's ArgumentGroupFactory over TransformerConfig).
    if (teOpFuserOf(p.framework)) arg("--use-transformer-engine-op-fuser");
    if (p.bf16EndLayers()) {
        arg("--first-last-layers-bf16");
        arg("--num-layers-at-start-in-bf16", str(p.bf16LayersAtStart));
        arg("--num-layers-at-end-in-bf16", str(p.bf16LayersAtEnd));
    }
    // What overlaps, as the plan's framework settings resolve (docs/frameworks.md), in current Megatron-LM's
    // flags: the interleaved schedule overlaps its transfers unless told not to.
    if (ov.overlapGradReduce) arg("--overlap-grad-reduce");
    if (ov.overlapParamGather && p.zeroStage == 1) arg("--overlap-param-gather");
    if (ov.tpCommOverlap && p.tp > 1) arg("--tp-comm-overlap");
    if (p.schedule == Schedule::Interleaved1F1B && !ov.overlapP2pComm) arg("--no-overlap-p2p-communication");
    // The data-parallel buffers registered with NCCL (Megatron-LM's --nccl-ub, 2026-04 on).
    if (ncclUbOf(p.framework)) arg("--nccl-ub");
    // The weight-gradient GEMMs write a 16-bit gradient that is added into main_grad (FORMULAS.md §3.6).
    if (!gradAccumulationFusionOf(p.framework)) arg("--no-gradient-accumulation-fusion");

    const int64_t padded = paddedVocab(m, p);
    std::ostringstream out;
    out << "# tessel export: " << displayName(s)
        << " as Megatron-LM (megatron-core) pretrain_gpt.py arguments\n";
    out << "# model " << m.name << " on " << s.cluster.nodes << " x " << s.cluster.gpusPerNode << " GPUs ("
        << s.cluster.name << "): tp " << p.tp << " x pp " << p.pp << " x dp " << p.dp << " x cp " << p.cp
        << ", ep " << p.ep << "; " << p.microBatchesPerStep() << " micro-batches of " << p.microBatch
        << " per step\n";
    if (s.cluster.nodes > 1)
        out << "# Run on every node with NODE_RANK and MASTER_ADDR set. ";
    else
        out << "# ";
    out << "Arguments given to this script are appended:\n";
    out << "# data, tokenizer (vocabulary " << m.vocab;
    if (padded != m.vocab) out << ", padded to " << padded;
    out << "), optimizer, learning-rate schedule, checkpointing"
        << (m.position == PositionEmbedding::Rope ? ", rotary base (--rotary-base)" : "") << ".\n";
    if (p.tp > 1 || p.cp > 1) out << "CUDA_DEVICE_MAX_CONNECTIONS=1 ";
    if (launchBlockingOf(p.framework)) out << "CUDA_LAUNCH_BLOCKING=1 "; // the plan's blocking launches (FORMULAS.md §3.8)
    if (p.precision == "nvfp4" && !nvfp4RhtOf(p.framework)) out << "NVTE_NVFP4_DISABLE_RHT=1 ";
    if (p.precision == "nvfp4" && !nvfp4StochasticRoundingOf(p.framework)) out << "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING=1 ";
    out << "torchrun --nproc_per_node " << s.cluster.gpusPerNode << " --nnodes " << s.cluster.nodes;
    if (s.cluster.nodes > 1)
        out << " --node_rank \"$NODE_RANK\" --master_addr \"$MASTER_ADDR\" --master_port "
               "\"${MASTER_PORT:-6000}\"";
    out << " pretrain_gpt.py \\\n";
    for (const auto& a : args)
        out << "    " << a << " \\\n";
    out << "    \"$@\"\n";
    return out.str();
}

} // namespace

using export_detail::deepSpeedRules;
using export_detail::exportDeepSpeed;
using export_detail::exportTorchtitan;
using export_detail::torchtitanRules;

std::string toString(ExportFormat format) {
    switch (format) {
    case ExportFormat::Megatron: return "megatron";
    case ExportFormat::DeepSpeed: return "deepspeed";
    case ExportFormat::Torchtitan: return "torchtitan";
    }
    return "megatron";
}

std::optional<ExportFormat> parseExportFormat(const std::string& name) {
    for (ExportFormat f : allExportFormats())
        if (toString(f) == name) return f;
    return std::nullopt;
}

const std::vector<ExportFormat>& allExportFormats() {
    static const std::vector<ExportFormat> all{ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan};
    return all;
}

void frameworkRules(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, ExportFormat format,
                    ProblemList& problems, bool withRankOrder) {
    switch (format) {
    case ExportFormat::Megatron: megatronRules(model, cluster, plan, problems, withRankOrder); break;
    case ExportFormat::DeepSpeed: deepSpeedRules(model, cluster, plan, problems, withRankOrder); break;
    case ExportFormat::Torchtitan: torchtitanRules(model, cluster, plan, problems, withRankOrder); break;
    }
}

bool frameworkRuns(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, ExportFormat format,
                   bool withRankOrder) {
    ProblemList problems;
    frameworkRules(model, cluster, plan, format, problems, withRankOrder);
    return problems.empty();
}

std::optional<ExportFormat> exportFormatOf(const std::string& frameworkName) {
    // NeMo and MegaScale run Megatron-core; FSDP is what torchtitan runs.
    if (frameworkName == "megatron" || frameworkName == "nemo" || frameworkName == "megascale") return ExportFormat::Megatron;
    if (frameworkName == "deepspeed") return ExportFormat::DeepSpeed;
    if (frameworkName == "torchtitan" || frameworkName == "fsdp") return ExportFormat::Torchtitan;
    return std::nullopt;
}

std::string exportPlan(const Scenario& scenario, ExportFormat format) {
    ProblemList problems;
    // A plan that does not fit its model and cluster has no launch settings; report those problems first.
    validatePlan(scenario.model, scenario.cluster, scenario.plan, "/plan", problems);
    problems.throwIfAny();
    std::string text;
    switch (format) {
    case ExportFormat::Megatron:
        text = exportMegatron(scenario, problems);
        break;
    case ExportFormat::DeepSpeed:
        text = exportDeepSpeed(scenario, problems);
        break;
    case ExportFormat::Torchtitan:
        text = exportTorchtitan(scenario, problems);
        break;
    }
    problems.throwIfAny();
    return text;
}

} // namespace tessel::sim
