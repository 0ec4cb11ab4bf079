// The search's fast paths: validity verdicts, exact peak memory and the admissible lower bound on the step
// time, each computed from cached per-shape and per-placement terms (the same cost-model calls the
// simulator makes, see simulate.cpp / schedule.cpp) so that millions of plans can be screened per second. Where
// the groups land on the nodes is search_placement.cpp's.
#include "search_estimate.hpp"

#include "tessel/cost/traffic.hpp"

#include "tessel/cost/offload.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/shapes.hpp"
#include "tessel/sim/error_band.hpp"
#include "tessel/sim/schedule.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace tessel::sim::detail {

namespace {
double d(int64_t v) { return static_cast<double>(v); }
} // namespace

const char* reasonText(Reason r) {
    switch (r) {
    case Reason::None: return "";
    case Reason::InvalidDegrees: return "invalid degrees";
    case Reason::TpHeads: return "tp does not divide heads";
    case Reason::TpKvHeads: return "tp does not divide kv heads";
    case Reason::TpFfn: return "tp does not divide ffn_hidden";
    case Reason::TpExpertFfn: return "tp does not divide expert ffn_hidden";
    case Reason::Layers: return "pp x vpp does not divide layers (or exceeds them)";
    case Reason::VppNeedsInterleaved: return "vpp > 1 needs interleaved_1f1b";
    case Reason::InterleavedVpp: return "interleaved_1f1b needs vpp >= 2";
    case Reason::InterleavedPp: return "interleaved_1f1b needs pp >= 2";
    case Reason::DualPipeVPp: return "dualpipev / zero_bubble_v need pp >= 2";
    case Reason::DualPipeVVpp: return "dualpipev / zero_bubble_v need vpp 2";
    case Reason::World: return "world size differs from GPUs";
    case Reason::GlobalBatch: return "global batch not divisible";
    case Reason::ScheduleSize: return "too many micro-batches to simulate";
    case Reason::InterleavedMicroBatches: return "interleaved needs micro-batches divisible by pp";
    case Reason::DualPipeVMicroBatches: return "dualpipev needs at least 2 x pp micro-batches";
    case Reason::EpNeedsMoe: return "ep needs a MoE model";
    case Reason::EpDp: return "ep does not divide dp";
    case Reason::EtpRanks: return "etp x ep does not divide a stage's ranks";
    case Reason::EtpOrder: return "experts laid out apart need pp last in rank order";
    case Reason::EtpSp: return "folded experts with tp > 1 need SP";
    case Reason::ZeroReplicas: return "zero_replicas does not fit the plan";
    case Reason::EpOverlap: return "moe_a2a_overlap not runnable (ep, recompute, vpp)";
    case Reason::SharedExpertOverlap: return "moe_shared_expert_overlap not runnable";
    case Reason::EpExperts: return "ep does not divide experts";
    case Reason::CpSeq: return "cp needs seq_len divisible by 2 x cp";
    case Reason::CpA2aHeads: return "cp a2a needs heads / tp divisible by cp";
    case Reason::CpWindow: return "a sliding window needs cp a2a or allgather";
    case Reason::SpTp: return "sequence parallelism needs tp > 1";
    case Reason::SpSeq: return "seq_len / cp not divisible by tp";
    case Reason::RecomputeModules: return "recompute_modules not runnable";
    case Reason::LossKernel: return "fused_linear loss needs tp 1, no train metrics";
    case Reason::AttentionSoftcap: return "attention kernel without soft-cap";
    case Reason::Precision: return "precision not supported";
    case Reason::Count: break;
    }
    return "?";
}

bool precisionSupported(const ClusterConfig& cluster, const std::string& precision, const FrameworkSettings& framework) {
    // The recipe as the framework runs it (half_dtype fp16 computes in fp16: Volta), FP8 GEMMs only with an FP8 peak.
    return findPrecisionRecipe(precision) && precisionUnsupported(cluster, precision, framework).empty();
}

Reason fastReason(const ModelConfig& model, int gpus, const Plan& plan, bool precisionOk, const GpuSpec* gpu) {
    // The same checks, in the same order, as tessel::validatePlan (plan.cpp); the first failing one wins.
    if (plan.tp < 1 || plan.pp < 1 || plan.dp < 1 || plan.cp < 1 || plan.ep < 1 || plan.vpp < 1 ||
        plan.microBatch < 1 || plan.globalBatch < 1)
        return Reason::InvalidDegrees;
    if (model.heads % plan.tp != 0) return Reason::TpHeads;
    if (model.kvHeads % plan.tp != 0) return Reason::TpKvHeads;
    if (model.ffnHidden % plan.tp != 0) return Reason::TpFfn;
    if (model.moe && (model.moe->expertFfnHidden % plan.expertTp() != 0 || model.moe->sharedFfnHidden % plan.tp != 0))
        return Reason::TpExpertFfn;
    // (A listed split, and ends_as_layers down to layers + 2 = pp x vpp, may leave the two end stages no layer.)
    const bool endsOnly = plan.pipelineSplit == PipelineSplit::EndsAsLayers && !plan.vShape() &&
                          !endsOnlySplit(model.layers, plan.pp, plan.vpp).empty();
    if (model.layers < plan.pp * plan.vpp && plan.pipelineLayers.empty() && !endsOnly) return Reason::Layers;
    if (model.layers % (plan.pp * plan.vpp) != 0 && plan.pipelineSplit == PipelineSplit::Even && plan.pipelineLayers.empty() &&
        plan.firstStageLayers <= 0 && plan.lastStageLayers <= 0)
        return Reason::Layers;
    const bool interleaved = plan.schedule == Schedule::Interleaved1F1B;
    const bool dualPipe = plan.schedule == Schedule::DualPipeV;
    if (plan.vpp > 1 && !interleaved && !plan.vShape()) return Reason::VppNeedsInterleaved;
    if (plan.vShape() && plan.pp < 2) return Reason::DualPipeVPp;
    if (plan.vShape() && plan.vpp != 2) return Reason::DualPipeVVpp;
    if (interleaved && plan.vpp < 2) return Reason::InterleavedVpp;
    if (interleaved && plan.pp < 2) return Reason::InterleavedPp;
    if (static_cast<int64_t>(plan.tp) * plan.pp * plan.dp * plan.cp != gpus) return Reason::World;
    const int64_t perStep = static_cast<int64_t>(plan.microBatch) * plan.dp;
    if (plan.globalBatch % perStep != 0) return Reason::GlobalBatch;
    if (static_cast<int64_t>(plan.pp) * plan.vpp * (plan.globalBatch / perStep) > PlanLimits::scheduleSlots)
        return Reason::ScheduleSize;
    if (dualPipe && plan.microBatchesPerStep() < 2 * plan.pp) return Reason::DualPipeVMicroBatches;
    if (interleaved && plan.microBatchesPerStep() % plan.pp != 0) return Reason::InterleavedMicroBatches;
    if ((plan.ep > 1 || plan.etp > 0) && !model.moe) return Reason::EpNeedsMoe;
    if (plan.expertLayoutApart()) {
        if ((static_cast<int64_t>(plan.tp) * plan.cp * plan.dp) % (static_cast<int64_t>(plan.expertTp()) * plan.ep) != 0)
            return Reason::EtpRanks;
        if (plan.rankOrder.back() != ParallelDim::Pp) return Reason::EtpOrder;
        if (plan.expertFolded() && plan.tp > 1 && !plan.sequenceParallel) return Reason::EtpSp;
    } else if (plan.dp % plan.ep != 0) {
        return Reason::EpDp;
    }
    if (plan.zeroReplicas > 1) {
        const int group = plan.zeroOverCp ? plan.dp * plan.cp : plan.dp;
        if (plan.zeroStage < 1 || (plan.cp > 1 && !plan.zeroOverCp) || group % plan.zeroReplicas != 0 ||
            (model.moe && !plan.replicasSplitExperts(plan.zeroReplicas)))
            return Reason::ZeroReplicas;
    }
    if (moeA2aOverlapOf(plan.framework) &&
        (!model.moe || plan.ep < 2 || plan.recompute == Recompute::Full ||
         (plan.recompute == Recompute::Selective && plan.recomputes(recompute_module::Moe)) || (plan.pp > 1 && plan.vpp < 2)))
        return Reason::EpOverlap;
    if (moeSharedExpertOverlapOf(plan.framework) && !sharedExpertOverlapProblems(model, plan).empty())
        return Reason::SharedExpertOverlap;
    if (model.moe && model.moe->experts % plan.ep != 0) return Reason::EpExperts;
    if (plan.cp > 1 && model.seqLen % (2 * plan.cp) != 0) return Reason::CpSeq;
    if (plan.cp > 1 && plan.cpComm == CpComm::A2a &&
        ((model.heads / plan.tp) % plan.cp != 0 || (model.kvHeads / plan.tp) % plan.cp != 0))
        return Reason::CpA2aHeads;
    if (plan.cp > 1 && model.slidingWindow > 0 && (plan.cpComm == CpComm::P2p || plan.cpComm == CpComm::A2aP2p))
        return Reason::CpWindow;
    if (plan.sequenceParallel && plan.tp == 1) return Reason::SpTp;
    if (plan.sequenceParallel && (model.seqLen / plan.cp) % plan.tp != 0) return Reason::SpSeq;
    if (plan.recomputeModules != recompute_module::Default && !recomputeModuleProblems(model, plan).empty())
        return Reason::RecomputeModules;
    if (crossEntropyOf(plan.framework) == "fused_linear" && (plan.tp > 1 || trainMetricLossesOf(plan.framework) > 0))
        return Reason::LossKernel;
    if (gpu && softcapKernelMissing(model, plan, *gpu)) return Reason::AttentionSoftcap;
    if (!precisionOk) return Reason::Precision;
    return Reason::None;
}

SearchContext makeContext(const ModelConfig& model, const ClusterConfig& cluster, const std::string& precision,
                          const FrameworkSettings& framework) {
    SearchContext ctx;
    for (int interleaved = 0; interleaved < 2; ++interleaved)
        for (int z = 0; z < 4; ++z) ctx.overlap[static_cast<size_t>(interleaved)][static_cast<size_t>(z)] = resolveOverlap(framework, interleaved != 0, z);
    ctx.model = &model;
    ctx.cluster = &cluster;
    ctx.gpus = cluster.totalGpus();
    ctx.precisionOk = precisionSupported(cluster, precision, framework);
    if (findPrecisionRecipe(precision))
        for (int piped = 0; piped < 2; ++piped)
            for (int z = 0; z < 4; ++z)
                ctx.recipeByZero[static_cast<size_t>(piped)][static_cast<size_t>(z)] =
                    fp8OnGpu(precisionRecipeOf(precision, framework, z), framework, cluster.gpu);
    ctx.capacityBytes = d(cluster.gpu.memoryBytes);
    ctx.fitBytes = {ctx.capacityBytes, ctx.capacityBytes};
    ctx.reservedBytes = d(cluster.gpu.reservedBytes);
    return ctx;
}

void requireFitWithinPeakBand(SearchContext& ctx, const FrameworkSettings& framework) {
    for (int piped = 0; piped < 2; ++piped) {
        Plan probe;
        probe.framework = framework;
        probe.pp = piped != 0 ? 2 : 1;
        if (const auto band = memoryBandFor(probe))
            ctx.fitBytes[static_cast<size_t>(piped)] = peakFittingBandBytes(ctx.capacityBytes, *band);
    }
}

ShapeCosts makeShapeCosts(const SearchContext& ctx, const Plan& plan) {
    const ModelConfig& model = *ctx.model;
    const ClusterConfig& cluster = *ctx.cluster;
    const PrecisionRecipe& recipe = ctx.recipeOf(plan);
    const LocalShapes s = localShapes(model, plan, recipe);
    ShapeCosts c;
    c.memory = memoryShapeTerms(model, plan, recipe);
    c.tokens = d(s.tokens);
    c.tokensSp = d(s.tokensSp);
    c.hidden = d(s.hidden);
    c.elemBytes = s.activationBytes;
    c.maskBytes = s.maskBytes;
    c.kvDimLocal = 0.5 * d(s.kvDimLocal + s.vDimLocal); // K's and V's mean width (MLA's V is narrower)
    c.topK = d(s.topK);
    c.vocabLocal = d(s.vocabLocal);
    c.vocabPadded = d(s.vocabPadded);
    c.actBytes = c.elemBytes * c.tokens * c.hidden;
    c.kvBytes = c.elemBytes * d(s.microBatch) * d(s.seqFull) * 2.0 * c.kvDimLocal;
    c.routedBytes = c.elemBytes * d(s.moeTokensIn) * c.topK * c.hidden;
    c.expertGatherBytes = model.moe && s.expertTpGather > 1 ? c.elemBytes * d(s.expertTokens) * c.hidden : 0.0;
    c.denseTpBlocks = model.moe && plan.sequenceParallel ? 1 : 2; // traffic.cpp: the shared experts' block is left out
    c.p2pBytes = s.activationBytes * c.tokensSp * c.hidden;
    if (model.mla) c.latentBytes = c.elemBytes * c.tokens * d((s.qLatent > 0 ? s.qLatent : s.hidden) + s.kvLatent);
    const BlockCompute layer = layerCompute(model, cluster, plan, recipe);
    const BlockCompute emb = embeddingCompute(model, cluster, plan, recipe);
    const BlockCompute head = headCompute(model, cluster, plan, recipe);
    // Calibrated phase scales apply as in costSchedule; their per-action overheads (>= 0) are left out, which
    // keeps the bound a lower bound.
    const double fwd = cluster.gpu.phaseFit("forward").timeScale, bwd = cluster.gpu.phaseFit("backward").timeScale;
    c.layerFwd = fwd * layer.forward.seconds;
    c.layerBwdInput = bwd * layer.backwardInput.seconds;
    c.layerBwdWeight = bwd * layer.backwardWeight.seconds;
    c.layerRecompute = bwd * layer.recompute.seconds;
    c.embFwd = fwd * emb.forward.seconds;
    c.embBwdWeight = bwd * emb.backwardWeight.seconds;
    c.headFwd = fwd * head.forward.seconds;
    c.headBwdInput = bwd * head.backwardInput.seconds;
    c.headBwdWeight = bwd * head.backwardWeight.seconds;
    for (const auto& op : layer.forwardOps)
        if (columnParallelInputGemm(op.name)) c.tpOverlapBudget += op.seconds;
    // An MoE model's dense layers, a windowed model's full-attention layers and an FP8 or NVFP4 plan's BF16 end layers
    // cost their own (cost_schedule.cpp's kinds and their products): the bound takes the cheapest kind of layer for
    // every layer (a BF16 layer is the cheaper one where the quantized layer's casts outweigh its faster GEMMs).
    std::vector<ModelConfig> otherModels;
    if (model.moe && !model.moe->denseLayers.empty()) otherModels.push_back(model.denseLayerModel());
    if (model.slidingWindow > 0 && !model.fullAttentionLayers.empty()) {
        const size_t n = otherModels.size();
        for (size_t i = 0; i < n; ++i) otherModels.push_back(otherModels[i].fullAttentionLayerModel());
        otherModels.push_back(model.fullAttentionLayerModel());
    }
    const Plan bf16Plan = bf16EndLayerPlan(plan);
    const PrecisionRecipe bf16Recipe = plan.bf16EndLayers() ? precisionRecipeOf(bf16Plan) : recipe;
    std::vector<BlockCompute> otherKinds;
    for (const ModelConfig& kind : otherModels) otherKinds.push_back(layerCompute(kind, cluster, plan, recipe));
    if (plan.bf16EndLayers()) {
        otherKinds.push_back(layerCompute(model, cluster, bf16Plan, bf16Recipe));
        for (const ModelConfig& kind : otherModels) otherKinds.push_back(layerCompute(kind, cluster, bf16Plan, bf16Recipe));
    }
    for (const BlockCompute& other : otherKinds) {
        c.layerFwd = std::min(c.layerFwd, fwd * other.forward.seconds);
        c.layerBwdInput = std::min(c.layerBwdInput, bwd * other.backwardInput.seconds);
        c.layerBwdWeight = std::min(c.layerBwdWeight, bwd * other.backwardWeight.seconds);
        c.layerRecompute = std::min(c.layerRecompute, bwd * other.recompute.seconds);
        double budget = 0.0;
        for (const auto& op : other.forwardOps)
            if (columnParallelInputGemm(op.name)) budget += op.seconds;
        c.tpOverlapBudget = std::max(c.tpOverlapBudget, budget);
    }
    if (model.mtpLayers > 0) {
        // The MTP modules run on the output layer's stage with it (cost_schedule.cpp): each the cheaper kind of layer
        // here, the head again and its own ops, their collectives left out, so the bound stays below.
        const BlockCompute own = mtpCompute(model, cluster, plan, recipe);
        const double n = model.mtpLayers;
        const double headFwd = c.headFwd, headBwdInput = c.headBwdInput, headBwdWeight = c.headBwdWeight;
        c.headFwd += n * (c.layerFwd + headFwd + fwd * own.forward.seconds);
        c.headBwdInput += n * (c.layerBwdInput + c.layerRecompute + headBwdInput + bwd * (own.backwardInput.seconds + own.recompute.seconds));
        c.headBwdWeight += n * (c.layerBwdWeight + headBwdWeight + bwd * own.backwardWeight.seconds);
    }
    c.qLocalBytes = c.elemBytes * c.tokens * 0.5 * d(s.qDimLocal + s.oDimLocal); // q and the output (MLA: o narrower)
    c.kvLocalBytes = c.elemBytes * c.tokens * c.kvDimLocal;
    c.ringStep = ringStepBytes(model, plan);
    // simulate.cpp takes the ring's steps unscaled: so does the bound, which keeps its CP term equal to the simulator's.
    c.ringDiagFwd = layer.ringDiagForwardSeconds;
    c.ringStepsFwd = layer.ringStepsForwardSeconds;
    c.ringDiagBwd = layer.ringDiagBackwardSeconds;
    c.ringStepsBwd = layer.ringStepsBackwardSeconds;
    return c;
}

namespace {
// The smallest share of expert layers in any chunk of the plan's pipeline: the bound charges every layer that share
// of the expert collectives (1 unless an MoE model has dense layers among its expert layers).
double expertLayerShare(const ModelConfig& model, const Plan& plan) {
    if (!model.moe || model.moe->denseLayers.empty()) return 1.0;
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    double share = 1.0;
    for (size_t u = 0, first = 0; u < counts.size(); first += static_cast<size_t>(counts[u]), ++u)
        if (counts[u] > 0)
            share = std::min(share, 1.0 - static_cast<double>(model.denseLayersIn(static_cast<int>(first), counts[u])) / counts[u]);
    return share;
}
} // namespace

InnerComm innerComm(const SearchContext& ctx, const Plan& plan, const ShapeCosts& s, const InnerPlacements& place) {
    const ClusterConfig& cluster = *ctx.cluster;
    // The calibrated communication scale applies as in costSchedule; synchronisation waits (>= 0) are left out,
    // which keeps the bound a lower bound.
    const double commScale = cluster.gpu.phaseFit("communication").timeScale;
    auto cost = [&](Primitive p, double bytes, const GroupPlacement& g) { return commScale * commCost(p, bytes, g, cluster).seconds; };
    InnerComm c;
    // traffic.cpp layerCommOps: what each group moves per layer and micro-batch.
    double fwdTp = 0.0, fwdCp = 0.0, fwdEp = 0.0, fc2Tp = 0.0;
    if (plan.tp > 1) {
        double bwdTp = 0.0, gradGathers = 0.0;
        // A parallel block reduced once (parallelResidualReducesOnceOf): one reduction forward, not two.
        const ModelConfig& model = *ctx.model;
        const bool oneReduction = model.parallelResidual && !model.moe && parallelResidualReducesOnceOf(plan.framework, plan.pp);
        if (plan.sequenceParallel) {
            const SequenceParallelTraffic sp = sequenceParallelTraffic(*ctx.model, plan, ctx.recipeOf(plan), s.elemBytes);
            const double ag = cost(Primitive::AllGather, s.actBytes, place.tp);
            const double rs = cost(Primitive::ReduceScatter, s.actBytes, place.tp);
            const double agInput = sp.forwardGatherBytesPerElement == s.elemBytes
                                       ? ag
                                       : cost(Primitive::AllGather, sp.forwardGatherBytesPerElement / s.elemBytes * s.actBytes, place.tp);
            const double agGrad = sp.gradGatherBytesPerElement == s.elemBytes
                                      ? ag
                                      : cost(Primitive::AllGather, sp.gradGatherBytesPerElement / s.elemBytes * s.actBytes, place.tp);
            // The attention block's gather (and its gradient's reduce-scatter) carries MLA's latents where it has them.
            const double agAttn = s.latentBytes > 0.0 ? cost(Primitive::AllGather, s.latentBytes, place.tp) : agInput;
            const double rsAttnGrad = s.latentBytes > 0.0 ? cost(Primitive::ReduceScatter, s.latentBytes, place.tp) : rs;
            const bool mlp = s.denseTpBlocks == 2;
            fwdTp = agAttn + rs + (mlp ? agInput + rs : 0.0);
            fc2Tp = mlp ? rs : 0.0;
            // grads, plus re-gathered GEMM inputs for dW
            bwdTp = agGrad + rsAttnGrad + (sp.backwardRegathersInputs ? agAttn : 0.0) +
                    (mlp ? agGrad + rs + (sp.backwardRegathersInputs ? agInput : 0.0) : 0.0);
            gradGathers = mlp ? 2.0 * agGrad : agGrad;
            if (oneReduction) { // the attention's reduce-scatter and its gradient's gather are the MLP's
                fwdTp -= rs;
                bwdTp -= agGrad;
                gradGathers -= agGrad;
            }
        } else {
            const double ar = cost(Primitive::AllReduce, s.actBytes, place.tp);
            fwdTp = (oneReduction ? 1.0 : 2.0) * ar;
            bwdTp = 2.0 * ar;
            fc2Tp = ar;
        }
        // simulate.cpp: what the framework hides under the GEMMs (and what that still costs in contention).
        const OverlapSettings& ov = ctx.overlapOf(plan);
        if (ov.tpCommOverlap && torchAsyncTpOf(plan.framework)) {
            // cost_schedule.cpp: PyTorch's async TP fuses fewer collectives. One chunk of each fused one, the least
            // a pair adds (a collective that outlasts its GEMMs adds more there), keeps the bound a lower bound.
            if (plan.sequenceParallel) {
                fwdTp /= plan.tp;
                bwdTp -= gradGathers * (1.0 - 1.0 / plan.tp);
                fc2Tp /= plan.tp;
            }
        } else if (ov.tpCommOverlap) {
            fwdTp /= plan.tp;
            bwdTp /= plan.tp;
            fc2Tp /= plan.tp;
        } else if (ov.asyncTpGradReduce) {
            const double budget = s.tpOverlapBudget * (plan.sequenceParallel ? 2.0 : 1.0);
            const double hidden = std::min(bwdTp, budget);
            bwdTp = bwdTp - hidden + cluster.gpu.contentionSeconds(hidden, budget);
        }
        c.bwd += bwdTp;
    }
    if (plan.cp > 1 && plan.cpComm == CpComm::A2a) {
        const double a2a = 2.0 * cost(Primitive::AllToAll, s.qLocalBytes, place.cp) + 2.0 * cost(Primitive::AllToAll, s.kvLocalBytes, place.cp);
        fwdCp = a2a;
        c.bwd += a2a;
    } else if (plan.cp > 1 && plan.cpComm == CpComm::P2p && s.ringStepsFwd > 0.0) {
        // simulate.cpp: the ring's steps under its attention.
        const double transfer = commScale * ringStepTransferSeconds(s.ringStep.kv, cluster, place.cp);
        const double gradTransfer = commScale * ringStepTransferSeconds(s.ringStep.grads, cluster, place.cp);
        const RingExposure ring = ringExposure(s.ringDiagFwd, s.ringStepsFwd, s.ringDiagBwd, s.ringStepsBwd, plan.cp, transfer,
                                               gradTransfer, cluster.gpu);
        fwdCp = ring.forwardSeconds;
        c.bwd += ring.backwardSeconds;
    } else if (plan.cp > 1 && plan.cpComm == CpComm::A2aP2p) {
        // Not a searched exchange (plans state its levels): no CP term, which keeps the bound a lower bound.
    } else if (plan.cp > 1) {
        const double ag = cost(Primitive::AllGather, s.kvBytes, place.cp);
        fwdCp = ag;
        c.bwd += ag + cost(Primitive::ReduceScatter, s.kvBytes, place.cp);
    }
    // With Megatron-core's batch-level EP overlap, and in DualPipeV's overlapped pairs, the simulator hides part of
    // the all-to-all under another micro-batch's compute (cost_schedule.cpp); the bound counts none of it, so it
    // stays below the simulated step.
    // The shared-expert overlap hides the all-to-all under the shared experts (cost_schedule.cpp) too.
    const bool epHidden = moeA2aOverlapOf(plan.framework) || plan.schedule == Schedule::DualPipeV ||
                          moeSharedExpertOverlapOf(plan.framework);
    if (ctx.model->moe && plan.ep > 1 && !epHidden) {
        // traffic.cpp: the dispatcher's legs (one all-to-all, or the flex dispatcher's pipelined two).
        const std::vector<DispatchLeg> legs = dispatchLegs(*ctx.model, plan, place.ep, s.routedBytes);
        std::vector<double> own;
        for (const DispatchLeg& leg : legs) own.push_back(cost(Primitive::AllToAll, leg.bytes, leg.placement));
        double a2a = 0.0;
        for (double t : pipelinedLegSeconds(legs, own)) a2a += t;
        a2a *= expertLayerShare(*ctx.model, plan);
        fwdEp = 2.0 * a2a;
        c.bwd += 2.0 * a2a;
    }
    if (s.expertGatherBytes > 0.0 && !epHidden) {
        // The expert-TP gather and scatter: the search's plans have etp = tp (the TP group) or etp 1 (folded: no gather).
        const double pair = expertLayerShare(*ctx.model, plan) * (cost(Primitive::AllGather, s.expertGatherBytes, place.tp) +
                                                                  cost(Primitive::ReduceScatter, s.expertGatherBytes, place.tp));
        fwdEp += pair;
        c.bwd += pair;
    }
    c.fwd = fwdTp + fwdCp + fwdEp;
    // cost_schedule.cpp: full recompute replays the forward's collectives (but fc2's where it stops before fc2),
    // selective its modules'.
    if (plan.recompute == Recompute::Full) c.recompute = c.fwd - (recomputeStopsBeforeFc2(*ctx.model, plan) ? fc2Tp : 0.0);
    // Selective: its modules' CP exchange and MoE traffic; their TP collectives are left out (a lower bound).
    else if (plan.recompute == Recompute::Selective)
        c.recompute = (plan.recomputes(recompute_module::CoreAttn) ? fwdCp : 0.0) + (plan.recomputes(recompute_module::Moe) ? fwdEp : 0.0);
    // simulate.cpp: vocab-parallel embedding and head collectives.
    if (plan.tp > 1) {
        const Primitive reduce = plan.sequenceParallel ? Primitive::ReduceScatter : Primitive::AllReduce;
        c.emb = cost(reduce, s.actBytes, place.tp);
        const double ce = cost(Primitive::AllReduce, 4.0 * s.tokens, place.tp);
        c.headFwd = 3.0 * ce + (plan.sequenceParallel ? cost(Primitive::AllGather, s.actBytes, place.tp) : 0.0);
        c.headBwd = cost(reduce, s.actBytes, place.tp);
    }
    if (plan.pp > 1) {
        // Pipeline transfers are not collectives: no communication scale, as in costSchedule; the scatter-gather
        // optimization's all-gather is one (traffic.cpp pipelineTransferOf).
        const PipelineTransfer t = pipelineTransferOf(plan, s.p2pBytes);
        c.p2pActivation = commCost(Primitive::SendRecv, t.pairBytes, place.ppPair, cluster).seconds +
                          (t.gatherBytes > 0.0 ? cost(Primitive::AllGather, t.gatherBytes, place.tp) : 0.0);
        c.p2pGrad = c.p2pActivation;
    }
    return c;
}

DpCosts dpCosts(const SearchContext& ctx, const Plan& plan, const DpPlacements& place) {
    const ModelConfig& model = *ctx.model;
    const ClusterConfig& cluster = *ctx.cluster;
    const PrecisionRecipe& recipe = ctx.recipeOf(plan);
    const double commScale = cluster.gpu.phaseFit("communication").timeScale; // as in innerComm above
    auto cost = [&](Primitive p, double bytes, const GroupPlacement& g) { return commScale * commCost(p, bytes, g, cluster).seconds; };
    const int p = plan.pp, v = plan.vpp;
    const std::vector<int> chunkLayers = chunkLayerCounts(model, plan);
    const bool dataParallel = plan.dp * plan.cp > 1;
    const bool expertDataParallel = plan.expertGradientGroup() > 1; // schedule.cpp
    const int z = plan.zeroStage;
    const OverlapSettings& ov = ctx.overlapOf(plan);
    DpCosts out;
    const bool oncePerStep = fsdpGathersOncePerStep(plan.framework, plan.pp, z);
    const bool reducesOncePerStep = fsdpReducesOncePerStep(plan.framework, plan.pp, z); // and FSDP's no_sync
    for (int slot = 0; slot < 2; ++slot) {
        const int stage = slot == 0 ? 0 : p - 1;
        double minLastBucket = std::numeric_limits<double>::infinity();
        double reduceTotal = 0.0; // every gradient reduction of the stage (per step)
        for (int chunk = 0; chunk < v; ++chunk) {
            const int u = plan.virtualStage(stage, chunk);
            const int layersPerChunk = chunkLayers[static_cast<size_t>(u)];
            // schedule.cpp chunkParams: the chunk's layers, the embedding on virtual stage 0, the head on the last.
            const StageParameters chunkParams = chunkParameters(model, plan, chunkLayers, stage, chunk);
            const double dense = chunkParams.dense, expert = chunkParams.expert;
            double lastBucket = 0.0;
            for (int part = 0; part < 2; ++part) {
                const double params = part == 0 ? dense : expert;
                const bool ok = part == 0 ? dataParallel : expertDataParallel;
                const GroupPlacement& g = part == 0 ? place.dense : place.expert;
                if (params <= 0.0 || !ok) continue;
                // ZeRO-3 gathers the chunk's weights before every forward and backward; FSDP under torchtitan's
                // pipelining once a step, and reduces once (schedule.cpp, fsdpGathersOncePerStep).
                // PyTorch FSDP's copies on the collective's own stream lengthen it (simulate.cpp, FORMULAS.md §3.7).
                const double gatherOne = cost(Primitive::AllGather, params * recipe.paramGatherBytes(), g) +
                                         fsdpCollectiveCopySeconds(cluster, plan, recipe, false, params);
                if (z >= 3 && oncePerStep)
                    out.perStep[static_cast<size_t>(slot)] += gatherOne;
                else if (z >= 3)
                    out.perMicroBatch[static_cast<size_t>(slot)] += (ov.reshardAfterForward ? 2.0 : 1.0) * gatherOne;
                const int buckets = z >= 3 ? 1 : layersPerChunk;
                double bucket = cost(gradReducePrimitive(plan, recipe),
                                     params * recipe.gradReduceBytes() / buckets, g) +
                                (z >= 2 ? fsdpCollectiveCopySeconds(cluster, plan, recipe, true, params / buckets) : 0.0);
                if (plan.zeroReplicas > 1 && z >= 1) {
                    // schedule.cpp: each reduced shard is all-reduced across the replicas after its reduce-scatter.
                    const double shards = plan.zeroReduceGroupSize(part == 1);
                    bucket += cost(Primitive::AllReduce, params * recipe.gradReduceBytes() / buckets / shards,
                                   part == 0 ? place.denseReplicas : place.expertReplicas);
                }
                (z >= 2 && !reducesOncePerStep ? out.perMicroBatch : out.perStep)[static_cast<size_t>(slot)] += buckets * bucket;
                reduceTotal += buckets * bucket;
                lastBucket += bucket;
                if (z == 1 || z == 2) {
                    const double gather = cost(Primitive::AllGather, params * recipe.paramGatherBytes(), g);
                    out.perStep[static_cast<size_t>(slot)] += gather;
                    if (!ov.overlapParamGather) out.afterOptimizer[static_cast<size_t>(slot)] += gather;
                }
            }
            minLastBucket = std::min(minLastBucket, lastBucket);
        }
        // Without overlap (ZeRO-0/1) every bucket of the stage waits for its last gradient action.
        out.tail[static_cast<size_t>(slot)] = !ov.overlapGradReduce && z <= 1 ? reduceTotal : minLastBucket;
        if (model.tiedEmbeddings && p > 1 && !plan.holdsHead(0)) {
            // schedule.cpp: the accumulated gradient buffer itself, at its own width (none where stage 0 holds both
            // ends, DualPipeV's V).
            const double bytes = d(paddedVocab(model, plan)) * d(model.hidden) / plan.tp * recipe.gradBytes;
            const double sync = cost(Primitive::AllReduce, bytes, place.embSync);
            out.perStep[static_cast<size_t>(slot)] += sync;
            out.tail[static_cast<size_t>(slot)] += sync;
        }
    }
    return out;
}

LastStageTail lastStageTail(const Plan& plan, int microBatches) {
    const std::vector<Action> order = computeOrder(plan, microBatches, plan.pp - 1);
    size_t lastInput = 0;
    for (size_t i = 0; i < order.size(); ++i)
        if (order[i].kind == ActionKind::Backward || order[i].kind == ActionKind::BackwardInput) lastInput = i;
    LastStageTail t;
    for (size_t i = lastInput + 1; i < order.size(); ++i) {
        if (order[i].kind == ActionKind::Forward) ++t.forwards;
        if (order[i].kind == ActionKind::BackwardWeight) ++t.weightGrads;
    }
    return t;
}

namespace {
// One stage's total: the memory model's own stage formula, on shape terms cached per shape, and what the caching
// allocator holds (the peak a --memory-band search weighs against the band, as predict does). A plan whose
// offload overfills the host does not fit: infinite bytes.
struct StageBytes {
    double total = 0.0, reserved = 0.0;
};
StageBytes stageTotalBytes(const SearchContext& ctx, const Plan& plan, const ShapeCosts& s, const StageParameters& params,
                           int stage, bool gpuOnly) {
    const StageMemory st = stageMemory(*ctx.model, plan, ctx.recipeOf(plan), s.memory, params, stage, ctx.reservedBytes,
                                       ctx.capacityBytes, hostCapacityPerGpu(*ctx.cluster),
                                       collectiveLibraryMemory(*ctx.model, plan, *ctx.cluster, stage).bytes);
    if (!st.hostFits && !gpuOnly) return {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    return {st.totalBytes(), st.reservedPeakBytes()};
}
} // namespace

PeakMemory peakMemory(const SearchContext& ctx, const Plan& plan, const ShapeCosts& shape, const StageParameters& first,
                      const StageParameters& last, bool gpuOnly) {
    // With an even split, stage 0 holds at least every term of a middle stage (more in-flight micro-batches, the
    // embedding, the larger ZeRO-3 gather and bucket), so only stages 0 and pp-1 can peak; an uneven split may
    // give a middle stage more layers, and an MoE model's dense layers (moe.dense_layers) make the stages that hold
    // them lighter, so then every stage is costed. Like predictMemory, a tie goes to the lower stage.
    PeakMemory pm;
    const double fitBytes = ctx.fitBytesOf(plan);
    // The allocated peak within the GPU, and with a band the reserved one within the band's fitting bytes.
    const bool band = fitBytes < ctx.capacityBytes;
    auto fitsIn = [&](const StageBytes& b) { return b.total <= ctx.capacityBytes && (!band || b.reserved <= fitBytes); };
    const StageBytes firstBytes = stageTotalBytes(ctx, plan, shape, first, 0, gpuOnly);
    pm.bytes = firstBytes.total;
    pm.stage = 0;
    bool fits = fitsIn(firstBytes);
    auto consider = [&](int stage, const StageParameters& params) {
        const StageBytes b = stageTotalBytes(ctx, plan, shape, params, stage, gpuOnly);
        fits = fits && fitsIn(b);
        if (b.total > pm.bytes) {
            pm.bytes = b.total;
            pm.stage = stage;
        }
    };
    const bool denseAmongMoe = ctx.model->moe && !ctx.model->moe->denseLayers.empty();
    // (BF16 end layers hold no quantized copies and keep 16-bit inputs: where they spill past the end stages, a middle
    // stage differs from its neighbours too.)
    if (plan.pp > 2 && (!evenPipelineSplit(*ctx.model, plan) || denseAmongMoe || plan.bf16EndLayers()))
        for (int stage = 1; stage < plan.pp - 1; ++stage) consider(stage, stageParameters(*ctx.model, plan, stage));
    else if (plan.pp > 2 && collectiveLibraryMemory(*ctx.model, plan, *ctx.cluster, 1).bytes >
                                collectiveLibraryMemory(*ctx.model, plan, *ctx.cluster, 0).bytes)
        // NCCL's buffers (collectiveLibraryMemory) are the one term a middle stage may hold more of than stage 0 (two
        // pipeline neighbours inside a node to the ends' one; across nodes the peers share their buffers), and then
        // any middle stage may peak; their parameters are alike. Where they hold no more, stage 0 bounds them all.
        for (int stage = 1, n = plan.pp - 1; stage < n; ++stage) consider(stage, stageParameters(*ctx.model, plan, 1));
    if (plan.pp > 1) consider(plan.pp - 1, last);
    pm.fits = fits;
    return pm;
}

double optimizerSeconds(const SearchContext& ctx, const Plan& plan, const StageParameters& params) {
    // simulate.cpp: AdamW over the stage's parameters after ZeRO sharding of the optimizer state.
    const double denseShards = plan.zeroStage >= 1 ? plan.zeroShardSize() : 1.0;
    const double expertShards =
        plan.zeroStage >= 1 ? static_cast<double>(plan.expertZeroShardSize()) : 1.0;
    // Offloaded: the CPU step and the parameter upload, the gradient download taken as hidden (admissible: the
    // simulator adds what the last backward does not hide).
    if (plan.offloadOptimizer)
        return ctx.cluster->gpu.phaseFit("optimizer").timeScale *
               offloadTimes(*ctx.cluster, plan, ctx.recipeOf(plan), params, 0.0).optimizerStepSeconds(
                   std::numeric_limits<double>::infinity());
    return ctx.cluster->gpu.phaseFit("optimizer").timeScale *
           optimizerCompute(params.dense / denseShards + params.expert / expertShards, *ctx.cluster, ctx.recipeOf(plan),
                            foreachOptimizerOf(plan.framework))
               .seconds;
}

double lowerBoundSeconds(const Plan& plan, const std::vector<int>& chunkLayers, const BoundInputs& in) {
    // Each term is a chain of work that the simulator must run one piece after another (same stream, or a
    // dependency), so the step can be no shorter than any of them. Costs are the simulator's own (per-layer
    // compute + blocking TP/CP/EP collectives, p2p transfers, DP collectives, optimizer).
    const ShapeCosts& s = *in.shape;
    const InnerComm& c = *in.comm;
    const DpCosts& dp = *in.dp;
    const double m = plan.microBatchesPerStep();
    const int p = plan.pp, v = plan.vpp;
    // Layers of a stage over its chunks, and the fewest in any one of its chunks (an uneven split: the bound
    // takes the smallest chunk wherever it cannot tell which chunk a term is, so it stays admissible).
    auto layersOf = [&](int stage, int chunk) { return static_cast<double>(chunkLayers[static_cast<size_t>(plan.virtualStage(stage, chunk))]); };
    auto stageLayers = [&](int stage) {
        double n = 0.0;
        for (int k = 0; k < v; ++k) n += layersOf(stage, k);
        return n;
    };
    auto fewest = [&](int stage) {
        double n = layersOf(stage, 0);
        for (int k = 1; k < v; ++k) n = std::min(n, layersOf(stage, k));
        return n;
    };
    const double fwdLayer = s.layerFwd + c.fwd;
    // Partial recompute (recompute_layers) replays at least the smallest share of any chunk's layers: that share
    // of the per-layer replay keeps the bound admissible.
    double replayShare = 1.0;
    if (plan.recompute == Recompute::Full && plan.recomputeLayers > 0)
        for (int n : chunkLayers)
            if (n > 0) replayShare = std::min(replayShare, static_cast<double>(plan.recomputedLayersOf(n)) / n);
    const double recomputeLayer = replayShare * (s.layerRecompute + c.recompute);
    const double bwdInputLayer = s.layerBwdInput + c.bwd + recomputeLayer;
    const double bwdWeightLayer = s.layerBwdWeight;
    const double embWork = s.embFwd + c.emb + s.embBwdWeight;
    const double headFwd = s.headFwd + c.headFwd;
    const double headWork = headFwd + s.headBwdInput + c.headBwd + s.headBwdWeight;
    const double perLayerWork = fwdLayer + bwdInputLayer + bwdWeightLayer;

    if (plan.vShape()) {
        // DualPipeV's and ZB-V's V (FORMULAS.md §6): stage 0 runs both ends' work, with one activation and one gradient send a
        // micro-batch when sends block; stage s cannot start before micro-batch 0 comes down the V's first leg to it,
        // and then runs every chunk pass one after another; the last stage then its optimizer. (No drain term: the
        // pairs and split backwards make its order no 1F1B's.)
        const double sends0 = in.p2pBlocksCompute ? m * (c.p2pActivation + c.p2pGrad) : 0.0;
        double bound = m * (stageLayers(0) * perLayerWork + embWork + headWork) + in.optimizerFirst + sends0 +
                       dp.tail[0] + dp.afterOptimizer[0];
        bound = std::max(bound, m * dp.perMicroBatch[0] + dp.perStep[0]);
        bound = std::max(bound, m * dp.perMicroBatch[1] + dp.perStep[1]);
        double reach = s.embFwd + c.emb;
        for (int stage = 1; stage < p; ++stage) {
            reach += c.p2pActivation + layersOf(stage - 1, 0) * fwdLayer;
            const double after = stage == p - 1 ? in.optimizerLast + dp.tail[1] + dp.afterOptimizer[1] : 0.0;
            bound = std::max(bound, reach + m * stageLayers(stage) * perLayerWork + after);
        }
        return bound;
    }
    // Compute stream of stage 0: every compute action, then (after its last gradient action) the last
    // gradient bucket's reduction and the embedding sync before the optimizer, then ZeRO-1/2 all-gathers.
    // Blocking pipeline sends hold the compute stream: stage 0 sends every chunk's activation but the model's
    // last and every gradient but chunk 0's; the last stage every gradient and every activation but its last
    // chunk's.
    const double sendsFirst = in.p2pBlocksCompute ? m * (v * c.p2pActivation + (v - 1) * c.p2pGrad) : 0.0;
    const double sendsLast = in.p2pBlocksCompute ? m * (v * c.p2pGrad + (v - 1) * c.p2pActivation) : 0.0;
    const double busyFirst = m * (stageLayers(0) * perLayerWork + embWork) + (p == 1 ? m * headWork : 0.0) + in.optimizerFirst + sendsFirst;
    double bound = busyFirst + dp.tail[0] + dp.afterOptimizer[0];
    // Data-parallel stream of stage 0: its collectives run one after another.
    bound = std::max(bound, m * dp.perMicroBatch[0] + dp.perStep[0]);
    if (p == 1) return bound;

    // The last stage starts only after micro-batch 0's first chunk crossed stages 0..p-2 (with transfers).
    double fillLayers = 0.0; // micro-batch 0's first chunk through stages 0..p-2
    for (int stage = 0; stage + 1 < p; ++stage) fillLayers += layersOf(stage, 0);
    const double fill = (p - 1) * c.p2pActivation + fillLayers * fwdLayer + s.embFwd + c.emb;
    const double busyLast = m * (stageLayers(p - 1) * perLayerWork + headWork) + in.optimizerLast + sendsLast;
    bound = std::max(bound, fill + busyLast + dp.tail[1] + dp.afterOptimizer[1]);
    bound = std::max(bound, m * dp.perMicroBatch[1] + dp.perStep[1]);
    // Drain: the last stage's last input-gradient backward ends no earlier than fill + its work minus what
    // may follow it (optimizer, deferred ZB W passes); that gradient then crosses stages p-2..0, after
    // which stage 0 runs the optimizer and its ZeRO-1/2 all-gathers.
    // (A blocking send of that gradient follows it on the compute stream, and so do the sends of any forwards
    // after it.)
    double mostInChunk = 0.0; // the post-backward work is subtracted: the largest chunk keeps it admissible
    for (int chunk = 0; chunk < v; ++chunk) mostInChunk = std::max(mostInChunk, layersOf(p - 1, chunk));
    const double post = in.optimizerLast + in.tail.weightGrads * (mostInChunk * bwdWeightLayer + s.headBwdWeight) +
                        in.tail.forwards * (mostInChunk * fwdLayer + headFwd) +
                        (in.p2pBlocksCompute ? c.p2pGrad + in.tail.forwards * c.p2pActivation : 0.0);
    double drainLayers = 0.0;
    for (int stage = 1; stage + 1 < p; ++stage) drainLayers += fewest(stage);
    const double drain = (p - 1) * c.p2pGrad + drainLayers * bwdInputLayer +
                         fewest(0) * (bwdInputLayer + bwdWeightLayer) + in.optimizerFirst + dp.afterOptimizer[0];
    bound = std::max(bound, fill + busyLast - post + drain);
    // An uneven split can give a middle stage more layers than either end: it cannot start before micro-batch 0
    // reaches it, and then runs all its compute one action after another.
    double reach = s.embFwd + c.emb;
    for (int stage = 1; stage + 1 < p; ++stage) {
        reach += c.p2pActivation + layersOf(stage - 1, 0) * fwdLayer;
        bound = std::max(bound, reach + m * stageLayers(stage) * perLayerWork);
    }
    return bound;
}

SinglePlanEstimate estimatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& given) {
    const Plan plan = withResolvedPipelineSplit(model, cluster, given);
    const SearchContext ctx = makeContext(model, cluster, plan.precision, plan.framework);
    const ShapeCosts shape = makeShapeCosts(ctx, plan);
    const StageParameters first = stageParameters(model, plan, 0);
    const StageParameters last = stageParameters(model, plan, plan.pp - 1);
    SinglePlanEstimate e;
    e.memory = peakMemory(ctx, plan, shape, first, last);
    const InnerComm comm = innerComm(ctx, plan, shape, innerPlacements(plan, cluster.gpusPerNode));
    const DpCosts dp = dpCosts(ctx, plan, dpPlacements(plan, cluster.gpusPerNode));
    BoundInputs in;
    in.shape = &shape;
    in.comm = &comm;
    in.dp = &dp;
    in.optimizerFirst = optimizerSeconds(ctx, plan, first);
    in.optimizerLast = optimizerSeconds(ctx, plan, last);
    in.tail = lastStageTail(plan, plan.microBatchesPerStep());
    in.p2pBlocksCompute = plan.pp > 1 && !ctx.overlapOf(plan).overlapP2pComm;
    e.boundSeconds = lowerBoundSeconds(plan, chunkLayerCounts(model, plan), in);
    return e;
}

} // namespace tessel::sim::detail
