// Validation of a plan against its model and cluster: every problem at its plan pointer (split from plan.cpp).
#include "tessel/cost/plan.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"

#include <algorithm>
#include <string>

namespace tessel {

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

std::vector<std::pair<std::string, std::string>> bf16EndLayerProblems(const ModelConfig& model, const Plan& plan) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!plan.bf16EndLayers()) return out;
    // Megatron-core applies it inside Transformer Engine's FP8 / NVFP4 contexts (fp8_utils.py, fp4_utils.py);
    // torchao's Float8Linear (fsdp_fp8) and a bf16 recipe have none.
    const PrecisionRecipe* rec = findPrecisionRecipe(plan.precision);
    if (!rec || !rec->quantizedGemms() || plan.precision == "fsdp_fp8")
        out.emplace_back("first_last_layers_bf16", "Megatron-core keeps end layers in BF16 out of Transformer Engine's FP8 "
                                                   "or NVFP4 context: needs precision fp8 or nvfp4, got " + plan.precision);
    if (plan.bf16LayersAtStart + plan.bf16LayersAtEnd > model.layers)
        out.emplace_back("num_layers_at_end_in_bf16", std::to_string(plan.bf16LayersAtStart) + " + " +
                                                          std::to_string(plan.bf16LayersAtEnd) +
                                                          " BF16 end layers, more than the model's " +
                                                          std::to_string(model.layers));
    return out;
}

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
    // A tied embedding is the LM head's weight, which tessel costs column-parallel (V/tp a rank): it cannot also be
    // whole on every rank.
    if (model.tiedEmbeddings && plan.tp > 1 && !vocabParallelEmbeddingOf(plan.framework))
        problems.add(field("vocab_parallel_embedding"), "the model ties its embedding to the LM head, which is split over "
                                                        "tp=" + n(plan.tp) + " by vocabulary: a tied embedding cannot be "
                                                        "whole on every rank (untie it, or drop vocab_parallel_embedding false)");
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
    for (const auto& [key, message] : bf16EndLayerProblems(model, plan)) problems.add(field(key.c_str()), message);
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
