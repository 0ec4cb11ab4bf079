// Costs every action of a schedule with the cost model: each compute action's layers, recompute, embedding and
// head with the collectives inside them, each collective and pipeline transfer, the waits of synchronising groups
// and the optimizer step (FORMULAS.md §5, §6). When each runs is simulate.cpp's.
#include "tessel/sim/simulate.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/offload.hpp"
#include "tessel/cost/shapes.hpp"
#include "tessel/cost/traffic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

namespace tessel::sim {

namespace {
// Blocking collectives inside one layer (or the embedding / head), split by group and direction.
struct InnerComm {
    double tp = 0.0, cp = 0.0, ep = 0.0;
    double total() const { return tp + cp + ep; }
    void add(GroupKind g, double seconds) {
        if (g == GroupKind::Tp) tp += seconds;
        else if (g == GroupKind::Cp) cp += seconds;
        else ep += seconds;
    }
};

ActionCost phase(const PhaseCost& p, double layers, const InnerComm& comm, double commLayers) {
    ActionCost c;
    c.computeSeconds = p.seconds * layers;
    c.flops = p.hardwareFlops * layers;
    c.modelFlops = p.modelFlops * layers;
    c.tpSeconds = comm.tp * commLayers;
    c.cpSeconds = comm.cp * commLayers;
    c.epSeconds = comm.ep * commLayers;
    return c;
}

void accumulate(ActionCost& into, const ActionCost& more) {
    into.computeSeconds += more.computeSeconds;
    into.flops += more.flops;
    into.modelFlops += more.modelFlops;
    into.tpSeconds += more.tpSeconds;
    into.cpSeconds += more.cpSeconds;
    into.epSeconds += more.epSeconds;
}

// The expert side of an MoE layer's forward: the router, the permutations, the routed and shared experts.
bool expertSideOp(const std::string& name) {
    return name == "router" || name.rfind("moe_", 0) == 0 || name.rfind("expert_", 0) == 0 || name.rfind("shared_", 0) == 0;
}

// Megatron-core's batch-level EP overlap (--overlap-moe-expert-parallel-comm; FORMULAS.md §6.1): one layer of a
// backward run together with one layer of the next forward, in the combined node order F attention | B combine,
// F dispatch | B experts, F experts | B dispatch, F combine | B attention. Each step lasts the longer of its
// compute and its all-to-all; the shorter runs under it and still costs the contention share of its own time,
// at most the ceiling's share of the compute's (§6.2). Returns the seconds a paired layer saves against running
// the two one after the other. `F`, `B`: the layer's forward and backward compute; `expertShare`: the expert
// side's part of them; `epF`, `epB`: the forward's and backward's all-to-alls, half dispatch and half combine.
double pairedLayerSavedSeconds(double F, double B, double expertShare, double epF, double epB, const GpuSpec& gpu) {
    const double attnF = (1.0 - expertShare) * F, expertsF = expertShare * F;
    const double attnB = (1.0 - expertShare) * B, expertsB = expertShare * B;
    const std::array<std::pair<double, double>, 4> steps{{{attnF, epB / 2.0}, {expertsB, epF / 2.0},
                                                          {expertsF, epB / 2.0}, {attnB, epF / 2.0}}};
    double saved = 0.0;
    for (const auto& [compute, comm] : steps) {
        const double hidden = std::min(compute, comm);
        saved += hidden - gpu.contentionSeconds(hidden, compute);
    }
    return std::max(0.0, saved);
}

// The forward seconds of the GEMMs PyTorch's async TP fuses `collective` with (FORMULAS.md §6.1): the forward's
// gathers with the column-parallel GEMMs after them (torch's _fused_all_gather_matmul takes every matmul of the
// gathered input: q, k and v, or the gate and up projections), its reduce-scatters with the row-parallel GEMM
// before them, and the backward's output-gradient gathers with that GEMM's input gradient (a GEMM of the forward's
// size). 0 for any other collective, and where the layer has no such GEMM (an MoE layer's routed experts).
double asyncTpGemmSeconds(const BlockCompute& layer, const std::string& collective) {
    // The attention's column-parallel GEMMs (columnParallelInputGemm's: q|k|v, or MLA's up projections).
    auto attentionColumn = [](const std::string& n) { return n == "qkv" || n == "q_up" || n == "q_proj" || n == "kv_up"; };
    double seconds = 0.0;
    for (const OpCost& op : layer.forwardOps) {
        const std::string& n = op.name;
        const bool fused = collective == "tp_all_gather_attn"                                                  ? attentionColumn(n)
                           : collective == "tp_reduce_scatter_attn" || collective == "tp_all_gather_attn_grad" ? n == "attn_proj"
                           : collective == "tp_all_gather_mlp"                                                 ? n == "fc1"
                           : collective == "tp_reduce_scatter_mlp" || collective == "tp_all_gather_mlp_grad"   ? n == "fc2"
                                                                                                               : false;
        if (fused) seconds += op.seconds;
    }
    return seconds;
}

// One kind of transformer layer's compute and the blocking collectives inside it, after what the framework hides.
struct LayerCosts {
    BlockCompute compute;
    InnerComm fwd, bwd, recompute;
};

LayerCosts layerCosts(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, const PrecisionRecipe& recipe,
                      const OverlapSettings& ov, double commScale) {
    LayerCosts lc;
    lc.compute = layerCompute(model, cluster, plan, recipe);
    const BlockCompute& layer = lc.compute;
    InnerComm& fwdComm = lc.fwd;
    InnerComm& bwdComm = lc.bwd;
    double fc2Comm = 0.0; // the TP collective after fc2, which a recompute that stops early does not rerun
    double fc2CommWhole = 0.0;             // the same before any overlap, in the units of fwdTpAll
    double cpA2aFwd = 0.0, cpA2aBwd = 0.0; // CP's all-to-alls (a2a, and a2a+p2p's first level)
    // The forward's TP collectives in all, and those inside the modules selective recompute reruns.
    double fwdTpAll = 0.0, fwdTpRerun = 0.0;
    // The EP all-to-alls by leg (dispatch, combine) and phase, for the shared-expert overlap.
    double dispatchF = 0.0, combineF = 0.0, dispatchB = 0.0, combineB = 0.0;
    // FP8 current scaling's amax all-reduces: the compute stream waits for each, whatever overlaps the TP traffic.
    double amaxF = 0.0, amaxB = 0.0;
    struct TpOp {
        std::string name;
        bool forward;
        double seconds;
    };
    std::vector<TpOp> tpOps; // the TP collectives, for the GEMMs a TP overlap pipelines them with
    for (const auto& op : layerCommOps(model, cluster, plan)) {
        if (op.name.rfind(kFp8AmaxAllReducePrefix, 0) == 0) {
            (op.phase == CommPhase::Forward ? amaxF : amaxB) += commScale * op.cost.seconds;
            continue;
        }
        (op.phase == CommPhase::Forward ? fwdComm : bwdComm).add(op.group, commScale * op.cost.seconds);
        const bool fwd = op.phase == CommPhase::Forward;
        if (op.name.rfind("ep_all_to_all_dispatch", 0) == 0) (fwd ? dispatchF : dispatchB) += commScale * op.cost.seconds;
        if (op.name.rfind("ep_all_to_all_combine", 0) == 0) (fwd ? combineF : combineB) += commScale * op.cost.seconds;
        if (op.phase == CommPhase::Forward && op.group == GroupKind::Tp) {
            fwdTpAll += commScale * op.cost.seconds;
            if (plan.recompute == Recompute::Selective && plan.recomputes(tpCollectiveModule(model, op.name)))
                fwdTpRerun += commScale * op.cost.seconds;
        }
        if (op.name.rfind("cp_a2a_", 0) == 0) (op.phase == CommPhase::Forward ? cpA2aFwd : cpA2aBwd) += commScale * op.cost.seconds;
        if (op.name == "tp_reduce_scatter_mlp" || op.name == "tp_all_reduce_mlp")
            fc2Comm = fc2CommWhole = commScale * op.cost.seconds;
        if (op.group == GroupKind::Tp) tpOps.push_back({op.name, op.phase == CommPhase::Forward, commScale * op.cost.seconds});
    }
    // The CP ring's K/V steps run under its attention steps (FORMULAS.md §6.1): what they add in place of the
    // exchange's whole volume. allgather and a2a are blocking collectives, counted whole (traffic.cpp).
    // a2a+p2p: its all-to-alls whole, then the ring across the all-to-all groups the same way.
    if (plan.cp > 1 && (plan.cpComm == CpComm::P2p || plan.cpComm == CpComm::A2aP2p) && layer.ringStepsForwardSeconds > 0.0) {
        const RingStepBytes step = ringStepBytes(model, plan);
        const GroupPlacement hop = cpLevels(plan, cluster).ring;
        const double transfer = commScale * ringStepTransferSeconds(step.kv, cluster, hop);
        const double gradTransfer = commScale * ringStepTransferSeconds(step.grads, cluster, hop);
        const RingExposure ring = ringExposure(layer.ringDiagForwardSeconds, layer.ringStepsForwardSeconds,
                                               layer.ringDiagBackwardSeconds, layer.ringStepsBackwardSeconds, plan.cpRing(),
                                               transfer, gradTransfer, cluster.gpu);
        fwdComm.cp = cpA2aFwd + ring.forwardSeconds;
        bwdComm.cp = cpA2aBwd + ring.backwardSeconds;
    }
    // What the framework hides (FORMULAS.md §6.1). Transformer Engine's TP overlap splits each collective into
    // tp chunks pipelined with its GEMM, so one chunk stays exposed. Megatron-LM's asynchronous TP all-reduce
    // (and, with SP, reduce-scatter) of the column-parallel layers' input gradients runs under their
    // weight-gradient GEMMs; with SP the re-gather of their inputs runs under the input-gradient GEMMs.
    // PyTorch's async TP (torchtitan) fuses fewer: the forward's collectives and the backward's output-gradient
    // gathers; the backward's reduce-scatters and re-gathers stay whole, and without sequence parallelism nothing is
    // fused (torchAsyncTpOf). Each fused pair lasts the longer of its GEMMs and its collective plus one of the tp
    // chunks of the shorter (pipelinedCollectiveExposedSeconds): one chunk exposed under a longer GEMM, the difference
    // and a chunk where the collective is the longer (a grouped-query qkv, the attention's projection at tp 8). A
    // fused collective with no GEMM of its own here keeps one chunk exposed.
    if (plan.tp > 1 && ov.tpCommOverlap && torchAsyncTpOf(plan.framework)) {
        if (plan.sequenceParallel) {
            auto exposed = [&](const TpOp& c) {
                const double g = asyncTpGemmSeconds(layer, c.name);
                return g > 0.0 ? pipelinedCollectiveExposedSeconds(g, c.seconds, plan.tp) : c.seconds / plan.tp;
            };
            fwdComm.tp = 0.0;
            for (const TpOp& c : tpOps) {
                const bool gradGather = c.name == "tp_all_gather_attn_grad" || c.name == "tp_all_gather_mlp_grad";
                if (c.forward) fwdComm.tp += exposed(c);
                else if (gradGather) bwdComm.tp -= c.seconds - exposed(c);
                if (c.name == "tp_reduce_scatter_mlp") fc2Comm = exposed(c);
            }
        }
    } else if (plan.tp > 1 && ov.tpCommOverlap) {
        fwdComm.tp /= plan.tp;
        bwdComm.tp /= plan.tp;
        fc2Comm /= plan.tp;
    } else if (plan.tp > 1 && ov.asyncTpGradReduce) {
        double budget = 0.0;
        for (const auto& op : layer.forwardOps)
            if (columnParallelInputGemm(op.name))
                budget += op.seconds * (plan.sequenceParallel ? 2.0 : 1.0);
        // What runs under the GEMMs still costs them the contention share of its own time, at most the ceiling's
        // share of theirs (FORMULAS.md §6.2).
        const double hidden = std::min(bwdComm.tp, budget);
        bwdComm.tp = bwdComm.tp - hidden + cluster.gpu.contentionSeconds(hidden, budget);
    }
    // Megatron-core's shared-expert overlap (FORMULAS.md §6.1): the shared experts on their own stream, fc1 and the
    // activation beside the dispatch all-to-all, fc2 beside the combine; backward the gradients of fc2 beside the
    // combine's gradient exchange and of fc1 beside the dispatch's (their backward taken as twice their forward, the
    // FLOP convention). What an all-to-all hides still costs the contention share of its time (§6.2).
    if (moeSharedExpertOverlapOf(plan.framework) && model.moe && plan.ep > 1) {
        double beforeFc2 = 0.0, fc2 = 0.0;
        for (const auto& op : layer.forwardOps) {
            if (op.name == "shared_fc2") fc2 += op.seconds;
            else if (op.name.rfind("shared_", 0) == 0) beforeFc2 += op.seconds;
        }
        auto saved = [&](double comm, double compute) {
            const double hidden = std::min(comm, compute);
            return hidden - cluster.gpu.contentionSeconds(hidden, compute);
        };
        fwdComm.ep -= saved(dispatchF, beforeFc2) + saved(combineF, fc2);
        bwdComm.ep -= saved(combineB, 2.0 * fc2) + saved(dispatchB, 2.0 * beforeFc2);
    }
    fwdComm.tp += amaxF;
    bwdComm.tp += amaxB;
    // Full recompute replays the forward, collectives included (but the one after fc2 where it stops before fc2,
    // FORMULAS.md §3.4). Selective replays its modules' (FORMULAS.md §3.4, "Selective recompute by module"): the
    // attention core its CP exchange; MLA's up projections the gather of the latents (with SP); a dense MLP, or the
    // shared experts, their TP pair; the whole MoE layer its dispatch, combine and expert-TP collectives as well. Each
    // at what the framework leaves exposed of it, as in the forward.
    if (plan.recompute == Recompute::Full) {
        lc.recompute = fwdComm;
        if (recomputeStopsBeforeFc2(model, plan)) lc.recompute.tp -= fc2Comm;
    } else if (plan.recompute == Recompute::Selective) {
        if (plan.recomputes(recompute_module::CoreAttn)) lc.recompute.cp = fwdComm.cp;
        if (plan.recomputes(recompute_module::Moe)) lc.recompute.ep = fwdComm.ep;
        // A dense MLP rerun that stops before fc2 leaves out fc2's collective too.
        if (recomputeStopsBeforeFc2(model, plan)) fwdTpRerun -= fc2CommWhole;
        if (fwdTpAll > 0.0) lc.recompute.tp = fwdComm.tp * std::max(0.0, fwdTpRerun) / fwdTpAll;
    }
    return lc;
}
} // namespace

CostTable costSchedule(const ActionSchedule& schedule, const ModelConfig& model, const ClusterConfig& cluster) {
    const Plan& plan = schedule.plan;
    // The recipe on this GPU (fp8OnGpu: Blackwell's FP8 weight copies without a transpose), as the memory model and
    // the search's estimate take it.
    const PrecisionRecipe recipe = fp8OnGpu(precisionRecipeOf(plan), plan.framework, cluster.gpu);
    // Collectives in training against the microbenchmarks they were fitted on (FORMULAS.md §7.6); 1 uncalibrated.
    const double commScale = cluster.gpu.phaseFit("communication").timeScale;
    const LayerCosts expertLayer = layerCosts(model, cluster, plan, recipe, schedule.overlap, commScale);
    const BlockCompute& layer = expertLayer.compute;
    const InnerComm &fwdComm = expertLayer.fwd, &bwdComm = expertLayer.bwd;
    // The kinds of transformer layer, each with its own costs: an MoE model's dense layers (moe.dense_layers: the
    // dense MLP, no EP traffic), a windowed model's full-attention layers (full_attention_layers) and the BF16 end
    // layers of an FP8 or NVFP4 plan (first_last_layers_bf16: the layer costed as the megatron recipe runs it), and
    // their products. Per virtual stage, in model order, how many of the chunk's layers are of each kind, and how many
    // of those among the ones a partial full recompute replays (the chunk's first recompute_layers).
    struct KindCount {
        LayerCosts costs;
        bool dense = false;
        std::vector<int> layers, recomputed; // per virtual stage
    };
    const bool denseAmongMoe = model.moe && !model.moe->denseLayers.empty();
    const bool windowPattern = model.slidingWindow > 0 && !model.fullAttentionLayers.empty();
    const bool bf16Ends = plan.bf16EndLayers();
    const Plan bf16Plan = bf16EndLayerPlan(plan);
    const PrecisionRecipe bf16Recipe = precisionRecipeOf(bf16Plan);
    std::vector<KindCount> kinds;
    std::map<std::tuple<bool, bool, bool>, size_t> kindOf; // (dense among MoE, full attention, BF16 end layer) -> kind
    for (bool dense : {false, true})
        for (bool full : {false, true})
            for (bool bf16 : {false, true}) {
                if ((dense && !denseAmongMoe) || (full && !windowPattern) || (bf16 && !bf16Ends)) continue;
                ModelConfig m = dense ? model.denseLayerModel() : model;
                if (full) m = m.fullAttentionLayerModel();
                kindOf[{dense, full, bf16}] = kinds.size();
                KindCount k;
                k.costs = !(dense || full || bf16)
                              ? expertLayer
                              : layerCosts(m, cluster, bf16 ? bf16Plan : plan, bf16 ? bf16Recipe : recipe, schedule.overlap,
                                           commScale);
                k.dense = dense;
                k.layers.assign(schedule.chunkLayers.size(), 0);
                k.recomputed.assign(schedule.chunkLayers.size(), 0);
                kinds.push_back(std::move(k));
            }
    auto kindOfLayer = [&](int index) {
        return kindOf.at({denseAmongMoe && model.isDenseLayer(index), windowPattern && !model.isWindowedLayer(index),
                          bf16Ends && plan.isBf16Layer(index, model.layers)});
    };
    for (size_t u = 0, first = 0; u < schedule.chunkLayers.size(); first += static_cast<size_t>(schedule.chunkLayers[u]), ++u) {
        const int L = schedule.chunkLayers[u];
        const int R = plan.recompute == Recompute::Full ? plan.recomputedLayersOf(L) : L;
        for (int i = 0; i < L; ++i) {
            KindCount& k = kinds[kindOfLayer(static_cast<int>(first) + i)];
            ++k.layers[u];
            if (i < R) ++k.recomputed[u];
        }
    }
    const BlockCompute emb = embeddingCompute(model, cluster, plan, recipe);
    const BlockCompute head = headCompute(model, cluster, plan, recipe);
    const int lastVirtual = plan.pp * plan.vpp - 1;
    // Multi-token prediction (model.mtpLayers; FORMULAS.md §6) on the last virtual stage, after the head: each module
    // runs its layer (the last layer's kind, with that kind's collectives), the shared head and loss again, and its own
    // ops (mtpCompute), whose TP collectives are the lookup's (as the embedding's) and eh_proj's output gathered from
    // h/t to h (and its gradient reduce-scattered back).
    const int mtp = model.mtpLayers;
    const LayerCosts& mtpLayer = kinds[kindOfLayer(model.layers - 1)].costs;
    const BlockCompute mtpOwn = mtp > 0 ? mtpCompute(model, cluster, plan, recipe) : BlockCompute{};

    // Vocab-parallel embedding and head need TP collectives of one hidden state (Megatron-LM): the embedding
    // output is all-reduced (reduce-scattered with SP); with SP the head's input is all-gathered; the fused
    // cross-entropy all-reduces max, sum and target logit per token (3 x 4 bytes x T).
    InnerComm embComm, headFwdComm, headBwdComm, mtpFwdComm, mtpBwdComm;
    if (plan.tp > 1) {
        const LocalShapes s = localShapes(model, plan, recipe);
        const double hidden = s.activationBytes * static_cast<double>(s.tokens) * static_cast<double>(s.hidden);
        const GroupPlacement tp = placeGroup(plan, cluster, GroupKind::Tp);
        embComm.tp = commScale * commCost(plan.sequenceParallel ? Primitive::ReduceScatter : Primitive::AllReduce, hidden, tp, cluster).seconds;
        const double ce = commCost(Primitive::AllReduce, 4.0 * static_cast<double>(s.tokens), tp, cluster).seconds;
        headFwdComm.tp = commScale * (3.0 * ce + (plan.sequenceParallel ? commCost(Primitive::AllGather, hidden, tp, cluster).seconds : 0.0));
        headBwdComm.tp = commScale * commCost(plan.sequenceParallel ? Primitive::ReduceScatter : Primitive::AllReduce, hidden, tp, cluster).seconds;
        mtpFwdComm.tp = embComm.tp + commScale * commCost(Primitive::AllGather, hidden, tp, cluster).seconds;
        mtpBwdComm.tp = commScale * commCost(Primitive::ReduceScatter, hidden, tp, cluster).seconds;
    }

    // Pipeline transfers cost what the two stages' placement gives: a boundary inside a node goes over NVLink, one
    // between nodes over the NIC (placeStagePair; the traffic report shows the worst boundary).
    // With scatter-gather each rank sends 1/tp and the receiver all-gathers over its TP group (a collective:
    // the communication scale applies to it, not to the send).
    double p2pActivationBytes = 0.0, p2pGradBytes = 0.0, p2pGatherSeconds = 0.0;
    for (const auto& op : pipelineCommOps(model, cluster, plan)) {
        if (op.primitive == Primitive::SendRecv) (op.phase == CommPhase::Forward ? p2pActivationBytes : p2pGradBytes) = op.bytes;
        else p2pGatherSeconds = commScale * op.cost.seconds;
    }
    std::map<std::tuple<int, int, bool>, double> p2pCache;
    auto p2pSeconds = [&](int stage, int peer, bool activation) {
        const auto key = std::make_tuple(std::min(stage, peer), std::max(stage, peer), activation);
        auto it = p2pCache.find(key);
        if (it == p2pCache.end()) {
            const GroupPlacement pair = placeStagePair(plan, cluster, std::get<0>(key), std::get<1>(key));
            it = p2pCache.emplace(key, commCost(Primitive::SendRecv, activation ? p2pActivationBytes : p2pGradBytes, pair, cluster).seconds +
                                           p2pGatherSeconds).first;
        }
        return it->second;
    };

    // PyTorch FSDP's copies on a gather's or reduce-scatter's own stream ahead of it (FORMULAS.md §3.7).
    auto fsdpCopySeconds = [&](const Action& a) {
        const bool reduce = a.name.rfind("dp_reduce_scatter_grads", 0) == 0;
        const bool gather = a.name.rfind("zero3_all_gather_params", 0) == 0;
        if (!reduce && !gather) return 0.0;
        const double width = reduce ? recipe.gradReduceBytes() : recipe.paramGatherBytes();
        return fsdpCollectiveCopySeconds(cluster, plan, recipe, reduce, a.bytes / width);
    };

    static_assert(static_cast<int>(GroupKind::ExpertTp) + 1 == kGroupKinds, "workSinceSync below has one slot per GroupKind");
    std::map<std::tuple<int, int, double>, std::pair<double, int>> collectiveCache; // seconds, group size
    auto collectiveSeconds = [&](const Action& a) {
        auto key = std::make_tuple(static_cast<int>(a.group), static_cast<int>(a.primitive), a.bytes);
        auto it = collectiveCache.find(key);
        if (it != collectiveCache.end()) return it->second;
        GroupPlacement place;
        if (a.name == "embedding_grad_all_reduce") {
            // Only the first and last stage of a pipeline group take part.
            std::vector<int> pipe = groupRanks(plan, GroupKind::Pp, 0);
            place = placeRanks({pipe.front(), pipe.back()}, cluster.gpusPerNode);
        } else {
            place = placeGroup(plan, cluster, a.group);
        }
        const std::pair<double, int> t{commScale * commCost(a.primitive, a.bytes, place, cluster).seconds, place.size};
        collectiveCache.emplace(key, t);
        return t;
    };
    // The data-parallel collectives on NCCL user buffers (Megatron-core's nccl_ub) hold the few SMs of NCCL's
    // SM-efficient kernels, not its channels' CTAs: their contention per second is the GPU's at that CTA count
    // (GpuSpec::collectiveContention, FORMULAS.md §6.2), here as a weight on the table's commContention.
    std::map<std::pair<int, int>, double> userBufferWeights;
    auto userBufferContentionWeight = [&](const Action& a) {
        const bool dataParallel = a.group == GroupKind::Dp || a.group == GroupKind::ExpertDp || a.group == GroupKind::DpCp ||
                                  a.group == GroupKind::ZeroShard || a.group == GroupKind::ZeroReplica ||
                                  a.group == GroupKind::ExpertZeroShard || a.group == GroupKind::ExpertZeroReplica;
        if (!ncclUbOf(plan.framework) || !dataParallel || !(cluster.gpu.commContention > 0.0)) return 1.0;
        const auto key = std::make_pair(static_cast<int>(a.group), static_cast<int>(a.primitive));
        auto it = userBufferWeights.find(key);
        if (it == userBufferWeights.end()) {
            const double ctas = ncclUserBufferCtas(a.primitive, placeGroup(plan, cluster, a.group));
            const double weight = ctas > 0.0 ? cluster.gpu.collectiveContention(ctas) / cluster.gpu.commContention : 1.0;
            it = userBufferWeights.emplace(key, weight).first;
        }
        return it->second;
    };
    // Synchronisation waits (FORMULAS.md §6): compute actions with TP/CP/EP collectives inside wait on the
    // largest of those groups; a collective waits on its group for the work since that group last met.
    const double jitter = cluster.gpu.syncJitterFraction;
    int innerSyncRanks = 1;
    for (const KindCount& k : kinds)
        if (k.costs.fwd.tp > 0.0 || k.costs.bwd.tp > 0.0) innerSyncRanks = std::max(innerSyncRanks, plan.tp);
    if (fwdComm.cp > 0.0 || bwdComm.cp > 0.0) innerSyncRanks = std::max(innerSyncRanks, plan.cp);
    // The expert layers' collectives (dispatch over EP, gather over expert TP) are counted together.
    if (fwdComm.ep > 0.0 || bwdComm.ep > 0.0) innerSyncRanks = std::max({innerSyncRanks, plan.ep, plan.expertTp()});

    const double denseShards = plan.zeroStage >= 1 ? plan.zeroShardSize() : 1.0;
    const double expertShards = plan.zeroStage >= 1 ? plan.expertZeroShardSize() : 1.0;

    CostTable table;
    table.serialStreams = !cluster.gpu.overlapsCommunication;
    table.syncJitterFraction = jitter;
    table.commContention = cluster.gpu.commContention;
    table.commContentionMax = cluster.gpu.commContentionMax;
    table.perAction.resize(schedule.stages.size());
    for (size_t s = 0; s < schedule.stages.size(); ++s) {
        const auto& acts = schedule.stages[s].actions;
        auto& costs = table.perAction[s];
        costs.resize(acts.size());
        const StageParameters params = stageParameters(model, plan, static_cast<int>(s));
        const OpCost optimizer = optimizerCompute(params.dense / denseShards + params.expert / expertShards, cluster,
                                                  recipe, foreachOptimizerOf(plan.framework));
        // Offload (FORMULAS.md §8): per chunk of L layers, ZeRO-Infinity fetches the chunk's share of the partition
        // before each pass and activation swap moves its checkpointed inputs, both prefetched under the pass's compute
        // (the action lasts the longer of the two); the offloaded optimizer step runs on the CPU.
        double stageLayers = 0.0;
        for (int c = 0; c < plan.vpp; ++c) stageLayers += schedule.layersOf(static_cast<int>(s), c);
        // The activations a micro-batch swaps: every layer's checkpointed input, or all that the first N layers keep
        // (Megatron-core's CPU offloading, no recompute).
        const double swappedLayers = plan.offloadActivationLayers > 0 ? std::min<double>(plan.offloadActivationLayers, stageLayers)
                                                                       : stageLayers;
        const OffloadTimes offload = plan.offloads()
            ? offloadTimes(cluster, plan, recipe, params, swappedLayers * layerActivationBytes(model, plan, recipe))
            : OffloadTimes{};
        double lastBackwardSeconds = 0.0;
        std::array<double, kGroupKinds> workSinceSync{}; // per GroupKind: compute seconds since that group last synchronised
        for (size_t i = 0; i < acts.size(); ++i) {
            const Action& a = acts[i];
            ActionCost& c = costs[i];
            const int u = plan.virtualStage(static_cast<int>(s), a.chunk);
            const bool first = u == 0, last = u == lastVirtual;
            const double L = a.chunk >= 0 ? schedule.layersOf(static_cast<int>(s), a.chunk) : 0.0;
            // Every kind of layer in the chunk (all of one kind but for dense or full-attention layers), each with its
            // own compute and collectives.
            auto layersOfKinds = [&](auto part, bool recomputed) {
                ActionCost sum;
                if (a.chunk < 0) return sum;
                for (const KindCount& k : kinds) {
                    const double n = (recomputed ? k.recomputed : k.layers)[static_cast<size_t>(u)];
                    if (n > 0.0) accumulate(sum, part(k.costs, n));
                }
                return sum;
            };
            switch (a.kind) {
            case ActionKind::Forward:
                c = layersOfKinds([](const LayerCosts& k, double n) { return phase(k.compute.forward, n, k.fwd, n); }, false);
                if (first) accumulate(c, phase(emb.forward, 1, embComm, 1));
                if (last) accumulate(c, phase(head.forward, 1, headFwdComm, 1));
                if (last && mtp > 0) {
                    accumulate(c, phase(mtpLayer.compute.forward, mtp, mtpLayer.fwd, mtp));
                    accumulate(c, phase(head.forward, mtp, headFwdComm, mtp));
                    accumulate(c, phase(mtpOwn.forward, mtp, mtpFwdComm, mtp));
                }
                break;
            case ActionKind::Backward:
            case ActionKind::BackwardInput: {
                const bool whole = a.kind == ActionKind::Backward;
                c = layersOfKinds([](const LayerCosts& k, double n) { return phase(k.compute.backwardInput, n, k.bwd, n); }, false);
                // Full recompute replays the chunk's first recompute_layers layers (all when 0; FORMULAS.md §2,
                // partial recompute), each of its own kind.
                accumulate(c, layersOfKinds([](const LayerCosts& k, double n) { return phase(k.compute.recompute, n, k.recompute, n); },
                                            true));
                if (whole)
                    accumulate(c, layersOfKinds([](const LayerCosts& k, double n) { return phase(k.compute.backwardWeight, n, InnerComm{}, 0); },
                                                false));
                if (last) {
                    accumulate(c, phase(head.backwardInput, 1, headBwdComm, 1));
                    if (whole) accumulate(c, phase(head.backwardWeight, 1, InnerComm{}, 0));
                }
                if (last && mtp > 0) {
                    accumulate(c, phase(mtpLayer.compute.backwardInput, mtp, mtpLayer.bwd, mtp));
                    accumulate(c, phase(mtpLayer.compute.recompute, mtp, mtpLayer.recompute, mtp));
                    accumulate(c, phase(head.backwardInput, mtp, headBwdComm, mtp));
                    accumulate(c, phase(mtpOwn.backwardInput, mtp, mtpBwdComm, mtp));
                    accumulate(c, phase(mtpOwn.recompute, mtp, InnerComm{}, 0));
                    if (whole) {
                        accumulate(c, phase(mtpLayer.compute.backwardWeight, mtp, InnerComm{}, 0));
                        accumulate(c, phase(head.backwardWeight, mtp, InnerComm{}, 0));
                        accumulate(c, phase(mtpOwn.backwardWeight, mtp, InnerComm{}, 0));
                    }
                }
                if (first && whole) accumulate(c, phase(emb.backwardWeight, 1, InnerComm{}, 0));
                break;
            }
            case ActionKind::BackwardWeight:
                c = layersOfKinds([](const LayerCosts& k, double n) { return phase(k.compute.backwardWeight, n, InnerComm{}, 0); }, false);
                if (last) accumulate(c, phase(head.backwardWeight, 1, InnerComm{}, 0));
                if (last && mtp > 0) {
                    accumulate(c, phase(mtpLayer.compute.backwardWeight, mtp, InnerComm{}, 0));
                    accumulate(c, phase(head.backwardWeight, mtp, InnerComm{}, 0));
                    accumulate(c, phase(mtpOwn.backwardWeight, mtp, InnerComm{}, 0));
                }
                if (first) accumulate(c, phase(emb.backwardWeight, 1, InnerComm{}, 0));
                break;
            case ActionKind::OptimizerStep:
                c.computeSeconds = plan.offloadOptimizer ? offload.optimizerStepSeconds(lastBackwardSeconds) : optimizer.seconds;
                c.flops = plan.offloadOptimizer ? 0.0 : optimizer.flops; // CPU work is no GPU FLOP
                break;
            case ActionKind::SendActivation:
            case ActionKind::RecvActivation:
            case ActionKind::SendGrad:
            case ActionKind::RecvGrad: {
                const bool activation = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvActivation;
                c.computeSeconds = p2pSeconds(static_cast<int>(s), a.peerStage, activation);
                auto& work = workSinceSync.at(static_cast<size_t>(GroupKind::PpPair));
                c.syncWorkSeconds = work; // the receive's wait is added by simulate (both sides' spreads)
                work = 0.0;
                break;
            }
            case ActionKind::Collective: {
                auto [seconds, ranks] = collectiveSeconds(a);
                // A ZeRO-3 / FSDP gather action stands for the chunk's layers, one collective each: FSDP's unit
                // is the transformer block (llm-foundry's fsdp_wrap_fn, torchtitan's fully_shard per block), so
                // each layer pays its own collective latency (FORMULAS.md §5, "Groups that span nodes").
                if (a.name.rfind("zero3_all_gather_params", 0) == 0 && L > 1.0) {
                    Action oneLayer = a;
                    oneLayer.bytes = a.bytes / L;
                    seconds = L * collectiveSeconds(oneLayer).first;
                }
                c.computeSeconds = seconds + fsdpCopySeconds(a);
                c.contentionWeight = userBufferContentionWeight(a);
                c.syncGroupSize = ranks;
                c.syncWorkSeconds = workSinceSync.at(static_cast<size_t>(a.group));
                workSinceSync.at(static_cast<size_t>(a.group)) = 0.0;
                break;
            }
            }
            if (plan.offloads()) {
                const double share = stageLayers > 0.0 ? L / stageLayers : 1.0 / plan.vpp;
                const double fetchPerChunk = offload.paramFetchSecondsPerPass * share;
                const double swapPerChunk = offload.activationSwapSecondsPerPass * share;
                // Host -> GPU and GPU -> host are separate PCIe directions: forward fetches (H2D) while it
                // swaps out (D2H); backward fetches again (twice with full recompute) and swaps the inputs
                // back in (H2D). DeepSpeed's cpu_checkpointing copies each checkpointed input with a plain
                // tensor.to(device) on the compute stream (checkpointing.py copy_to_device / move_to_device,
                // v0.6 to today: no side stream, no non_blocking), so its swap adds to the pass;
                // Megatron-core's layer offload copies on a side stream under the next layers' compute.
                const double fetchBack = fetchPerChunk * (plan.recompute == Recompute::Full ? 2.0 : 1.0);
                const double serialSwap = plan.offloadActivations ? swapPerChunk : 0.0;
                const double hiddenSwap = plan.offloadActivations ? 0.0 : swapPerChunk;
                if (a.kind == ActionKind::Forward)
                    c.computeSeconds = std::max({c.computeSeconds + serialSwap, fetchPerChunk, hiddenSwap});
                if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput)
                    c.computeSeconds = std::max(c.computeSeconds + serialSwap, fetchBack + swapPerChunk);
            }
            if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput || a.kind == ActionKind::BackwardWeight)
                lastBackwardSeconds = c.computeSeconds;
            // Calibrated per phase (FORMULAS.md §7.5): the work around the kernels; identity when uncalibrated.
            if (a.kind != ActionKind::SendActivation && a.kind != ActionKind::RecvActivation &&
                a.kind != ActionKind::SendGrad && a.kind != ActionKind::RecvGrad && a.kind != ActionKind::Collective) {
                const PhaseFit& f = cluster.gpu.phaseFit(a.kind == ActionKind::Forward         ? "forward"
                                                         : a.kind == ActionKind::OptimizerStep ? "optimizer"
                                                                                               : "backward");
                c.computeSeconds = f.overheadSeconds + f.timeScale * c.computeSeconds;
                if (a.kind == ActionKind::OptimizerStep && f.perTensorSeconds > 0.0)
                    c.computeSeconds += f.perTensorSeconds * stageParameterTensors(model, plan, static_cast<int>(s));
                for (double& work : workSinceSync) work += c.computeSeconds;
                if (innerSyncRanks > 1 && c.tpSeconds + c.cpSeconds + c.epSeconds > 0.0) {
                    c.syncGroupSize = innerSyncRanks;
                    c.syncWorkSeconds = c.computeSeconds;
                }
            }
            if (jitter > 0.0 && c.syncGroupSize > 1) c.waitSeconds = jitter * expectedMaxOfNormals(c.syncGroupSize) * c.syncWorkSeconds;
            c.sumParts();
        }
    }
    // Megatron-core's batch-level EP overlap: in the steady state every backward is followed by a forward of
    // another micro-batch, and the two run layer by layer together (pairedLayerSavedSeconds); warm-up forwards and
    // cool-down backwards have no partner. The saving comes off the pair's exposed all-to-all.
    // DualPipeV does the same for the forward and backward chunks it overlaps (Action::overlapsNext), whatever the
    // framework: the overlap is the schedule's (DeepSeek-V3 report §3.2.1).
    const bool dualPipe = plan.schedule == Schedule::DualPipeV;
    if ((moeA2aOverlapOf(plan.framework) || dualPipe) && model.moe && plan.ep > 1 && fwdComm.ep + bwdComm.ep > 0.0) {
        double expertSide = 0.0, all = 0.0;
        for (const OpCost& op : layer.forwardOps) {
            all += op.seconds;
            if (expertSideOp(op.name)) expertSide += op.seconds;
        }
        const double share = all > 0.0 ? expertSide / all : 0.0;
        const double F = cluster.gpu.phaseFit("forward").timeScale * layer.forward.seconds;
        const double B = cluster.gpu.phaseFit("backward").timeScale *
                         (layer.backwardInput.seconds + layer.backwardWeight.seconds +
                          (plan.recompute == Recompute::Selective ? layer.recompute.seconds : 0.0));
        const double perLayer = pairedLayerSavedSeconds(F, B, share, fwdComm.ep, bwdComm.ep, cluster.gpu);
        auto isCompute = [](ActionKind k) {
            return k == ActionKind::Forward || k == ActionKind::Backward || k == ActionKind::BackwardInput ||
                   k == ActionKind::BackwardWeight || k == ActionKind::OptimizerStep;
        };
        for (size_t s = 0; s < schedule.stages.size(); ++s) {
            const auto& acts = schedule.stages[s].actions;
            auto& costs = table.perAction[s];
            for (size_t i = 0; i < acts.size(); ++i) {
                if (dualPipe ? !(acts[i].kind == ActionKind::Forward && acts[i].overlapsNext)
                             : acts[i].kind != ActionKind::Backward && acts[i].kind != ActionKind::BackwardInput)
                    continue;
                size_t j = i + 1;
                while (j < acts.size() && !isCompute(acts[j].kind)) ++j;
                if (j == acts.size() || acts[j].kind != (dualPipe ? ActionKind::Backward : ActionKind::Forward)) continue;
                // Expert layers pair; an MoE model's dense layers have no all-to-all to hide.
                auto expertLayers = [&](int chunk) {
                    int n = 0;
                    for (const KindCount& k : kinds)
                        if (!k.dense) n += k.layers[static_cast<size_t>(plan.virtualStage(static_cast<int>(s), chunk))];
                    return n;
                };
                const double layers = std::min(expertLayers(acts[i].chunk), expertLayers(acts[j].chunk));
                const double exposed = costs[i].epSeconds + costs[j].epSeconds;
                if (!(exposed > 0.0)) continue;
                const double saved = std::min(exposed, layers * perLayer);
                for (size_t k : {i, j}) {
                    costs[k].epSeconds -= saved * costs[k].epSeconds / exposed;
                    costs[k].sumParts();
                }
                i = j; // the forward has its partner
            }
        }
    }
    return table;
}

} // namespace tessel::sim
