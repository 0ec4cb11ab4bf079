// Costs every action of a schedule, simulates the per-rank streams as a dependency graph, and reads the
// step metrics (step time, bubble, exposed communication, MFU/HFU) off the resulting timeline.
#include "tessel/sim/simulate.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/offload.hpp"
#include "tessel/cost/shapes.hpp"
#include "tessel/cost/traffic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

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

void finish(ActionCost& c) {
    c.seconds = c.computeSeconds + c.tpSeconds + c.cpSeconds + c.epSeconds + c.waitSeconds + c.contentionDpSeconds +
                c.contentionPpSeconds;
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
} // namespace

CostTable costSchedule(const ActionSchedule& schedule, const ModelConfig& model, const ClusterConfig& cluster) {
    const Plan& plan = schedule.plan;
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    const BlockCompute layer = layerCompute(model, cluster, plan, recipe);
    const BlockCompute emb = embeddingCompute(model, cluster, plan, recipe);
    const BlockCompute head = headCompute(model, cluster, plan, recipe);
    const int lastVirtual = plan.pp * plan.vpp - 1;

    // Collectives in training against the microbenchmarks they were fitted on (FORMULAS.md §7.6); 1 uncalibrated.
    const double commScale = cluster.gpu.phaseFit("communication").timeScale;
    InnerComm fwdComm, bwdComm;
    double fc2Comm = 0.0; // the TP collective after fc2, which a recompute that stops early does not rerun
    double cpA2aFwd = 0.0, cpA2aBwd = 0.0; // CP's all-to-alls (a2a, and a2a+p2p's first level)
    for (const auto& op : layerCommOps(model, cluster, plan)) {
        (op.phase == CommPhase::Forward ? fwdComm : bwdComm).add(op.group, commScale * op.cost.seconds);
        if (op.name.rfind("cp_a2a_", 0) == 0) (op.phase == CommPhase::Forward ? cpA2aFwd : cpA2aBwd) += commScale * op.cost.seconds;
        if (op.name == "tp_reduce_scatter_mlp" || op.name == "tp_all_reduce_mlp") fc2Comm = commScale * op.cost.seconds;
    }
    // The CP ring's K/V steps run under its attention steps (FORMULAS.md §6.1): what they add in place of the
    // exchange's whole volume. allgather and a2a are blocking collectives, counted whole (traffic.cpp).
    // a2a+p2p: its all-to-alls whole, then the ring across the all-to-all groups the same way.
    if (plan.cp > 1 && (plan.cpComm == CpComm::P2p || plan.cpComm == CpComm::A2aP2p) && layer.ringStepsForwardSeconds > 0.0) {
        const double transfer = commScale * ringStepTransferSeconds(ringStepBytes(model, plan), cluster, cpLevels(plan, cluster).ring);
        const RingExposure ring = ringExposure(layer.ringDiagForwardSeconds, layer.ringStepsForwardSeconds,
                                               layer.ringDiagBackwardSeconds, layer.ringStepsBackwardSeconds, plan.cpRing(),
                                               transfer, cluster.gpu);
        fwdComm.cp = cpA2aFwd + ring.forwardSeconds;
        bwdComm.cp = cpA2aBwd + ring.backwardSeconds;
    }
    // What the framework hides (FORMULAS.md §6.1). Transformer Engine's TP overlap splits each collective into
    // tp chunks pipelined with its GEMM, so one chunk stays exposed. Megatron-LM's asynchronous TP all-reduce
    // (and, with SP, reduce-scatter) of the column-parallel layers' input gradients runs under their
    // weight-gradient GEMMs; with SP the re-gather of their inputs runs under the input-gradient GEMMs.
    const OverlapSettings& ov = schedule.overlap;
    if (plan.tp > 1 && ov.tpCommOverlap) {
        fwdComm.tp /= plan.tp;
        bwdComm.tp /= plan.tp;
        fc2Comm /= plan.tp;
    } else if (plan.tp > 1 && ov.asyncTpGradReduce) {
        double budget = 0.0;
        for (const auto& op : layer.forwardOps)
            if (op.name == "qkv" || op.name == "fc1" || op.name == "expert_fc1" || op.name == "shared_fc1")
                budget += op.seconds * (plan.sequenceParallel ? 2.0 : 1.0);
        // What runs under the GEMMs still costs them the contention share of its own time, at most the ceiling's
        // share of theirs (FORMULAS.md §6.2).
        const double hidden = std::min(bwdComm.tp, budget);
        bwdComm.tp = bwdComm.tp - hidden + cluster.gpu.contentionSeconds(hidden, budget);
    }
    // Full recompute replays the forward, collectives included (but the one after fc2 where it stops before fc2,
    // FORMULAS.md §3.4); selective replays attention (CP exchange).
    InnerComm recomputeComm;
    if (plan.recompute == Recompute::Full) {
        recomputeComm = fwdComm;
        if (recomputeStopsBeforeFc2(model, plan)) recomputeComm.tp -= fc2Comm;
    } else if (plan.recompute == Recompute::Selective) {
        recomputeComm.cp = fwdComm.cp;
    }

    // Vocab-parallel embedding and head need TP collectives of one hidden state (Megatron-LM): the embedding
    // output is all-reduced (reduce-scattered with SP); with SP the head's input is all-gathered; the fused
    // cross-entropy all-reduces max, sum and target logit per token (3 x 4 bytes x T).
    InnerComm embComm, headFwdComm, headBwdComm;
    if (plan.tp > 1) {
        const LocalShapes s = localShapes(model, plan, recipe);
        const double hidden = s.activationBytes * static_cast<double>(s.tokens) * static_cast<double>(s.hidden);
        const GroupPlacement tp = placeGroup(plan, cluster, GroupKind::Tp);
        embComm.tp = commScale * commCost(plan.sequenceParallel ? Primitive::ReduceScatter : Primitive::AllReduce, hidden, tp, cluster).seconds;
        const double ce = commCost(Primitive::AllReduce, 4.0 * static_cast<double>(s.tokens), tp, cluster).seconds;
        headFwdComm.tp = commScale * (3.0 * ce + (plan.sequenceParallel ? commCost(Primitive::AllGather, hidden, tp, cluster).seconds : 0.0));
        headBwdComm.tp = commScale * commCost(plan.sequenceParallel ? Primitive::ReduceScatter : Primitive::AllReduce, hidden, tp, cluster).seconds;
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
    // Synchronisation waits (FORMULAS.md §6): compute actions with TP/CP/EP collectives inside wait on the
    // largest of those groups; a collective waits on its group for the work since that group last met.
    const double jitter = cluster.gpu.syncJitterFraction;
    int innerSyncRanks = 1;
    if (fwdComm.tp > 0.0 || bwdComm.tp > 0.0) innerSyncRanks = std::max(innerSyncRanks, plan.tp);
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
            const int u = a.chunk * plan.pp + static_cast<int>(s);
            const bool first = u == 0, last = u == lastVirtual;
            const double L = a.chunk >= 0 ? schedule.layersOf(static_cast<int>(s), a.chunk) : 0.0;
            switch (a.kind) {
            case ActionKind::Forward:
                c = phase(layer.forward, L, fwdComm, L);
                if (first) accumulate(c, phase(emb.forward, 1, embComm, 1));
                if (last) accumulate(c, phase(head.forward, 1, headFwdComm, 1));
                break;
            case ActionKind::Backward:
            case ActionKind::BackwardInput: {
                const bool whole = a.kind == ActionKind::Backward;
                c = phase(layer.backwardInput, L, bwdComm, L);
                // Full recompute replays the chunk's first recompute_layers layers (all when 0; FORMULAS.md §2,
                // partial recompute).
                const double R = plan.recompute == Recompute::Full ? plan.recomputedLayersOf(static_cast<int>(L)) : L;
                accumulate(c, phase(layer.recompute, R, recomputeComm, R));
                if (whole) accumulate(c, phase(layer.backwardWeight, L, InnerComm{}, 0));
                if (last) {
                    accumulate(c, phase(head.backwardInput, 1, headBwdComm, 1));
                    if (whole) accumulate(c, phase(head.backwardWeight, 1, InnerComm{}, 0));
                }
                if (first && whole) accumulate(c, phase(emb.backwardWeight, 1, InnerComm{}, 0));
                break;
            }
            case ActionKind::BackwardWeight:
                c = phase(layer.backwardWeight, L, InnerComm{}, 0);
                if (last) accumulate(c, phase(head.backwardWeight, 1, InnerComm{}, 0));
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
                // Host -> GPU and GPU -> host are separate PCIe directions: forward fetches (H2D) while it swaps
                // out (D2H); backward fetches again (twice with full recompute) and swaps the inputs back in (H2D).
                if (a.kind == ActionKind::Forward)
                    c.computeSeconds = std::max({c.computeSeconds, fetchPerChunk, swapPerChunk});
                if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput)
                    c.computeSeconds = std::max(c.computeSeconds,
                                                fetchPerChunk * (plan.recompute == Recompute::Full ? 2.0 : 1.0) + swapPerChunk);
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
            finish(c);
        }
    }
    // Megatron-core's batch-level EP overlap: in the steady state every backward is followed by a forward of
    // another micro-batch, and the two run layer by layer together (pairedLayerSavedSeconds); warm-up forwards and
    // cool-down backwards have no partner. The saving comes off the pair's exposed all-to-all.
    if (moeA2aOverlapOf(plan.framework) && model.moe && plan.ep > 1 && fwdComm.ep + bwdComm.ep > 0.0) {
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
                if (acts[i].kind != ActionKind::Backward && acts[i].kind != ActionKind::BackwardInput) continue;
                size_t j = i + 1;
                while (j < acts.size() && !isCompute(acts[j].kind)) ++j;
                if (j == acts.size() || acts[j].kind != ActionKind::Forward) continue;
                const double layers = std::min(schedule.layersOf(static_cast<int>(s), acts[i].chunk),
                                               schedule.layersOf(static_cast<int>(s), acts[j].chunk));
                const double exposed = costs[i].epSeconds + costs[j].epSeconds;
                if (!(exposed > 0.0)) continue;
                const double saved = std::min(exposed, layers * perLayer);
                for (size_t k : {i, j}) {
                    costs[k].epSeconds -= saved * costs[k].epSeconds / exposed;
                    finish(costs[k]);
                }
                i = j; // the forward has its partner
            }
        }
    }
    return table;
}

namespace {
// Busy intervals of one stream, each with the rate at which it moves its own work, for overlap queries.
class BusyLine {
public:
    void add(double from, double to, double rate) {
        from_.push_back(from);
        to_.push_back(to);
        rate_.push_back(rate);
    }
    void finish() {
        prefix_.assign(from_.size() + 1, 0.0);
        for (size_t i = 0; i < from_.size(); ++i) prefix_[i + 1] = prefix_[i] + rate_[i] * (to_[i] - from_[i]);
    }
    // Work-weighted seconds of the line inside [a, b].
    double overlap(double a, double b) const {
        if (!(b > a) || from_.empty()) return 0.0;
        const size_t i = static_cast<size_t>(std::upper_bound(to_.begin(), to_.end(), a) - to_.begin());
        const size_t j = static_cast<size_t>(std::lower_bound(from_.begin(), from_.end(), b) - from_.begin());
        if (i >= j) return 0.0;
        double sum = prefix_[j] - prefix_[i];
        sum -= rate_[i] * std::max(0.0, a - from_[i]);
        sum -= rate_[j - 1] * std::max(0.0, to_[j - 1] - b);
        return std::max(0.0, sum);
    }

private:
    std::vector<double> from_, to_, rate_, prefix_;
};
} // namespace

Timeline simulate(const ActionSchedule& schedule, const CostTable& costs) {
    const size_t stages = schedule.stages.size();
    // Flatten (stage, index) into node ids.
    std::vector<size_t> offset(stages + 1, 0);
    for (size_t s = 0; s < stages; ++s) offset[s + 1] = offset[s] + schedule.stages[s].actions.size();
    const size_t total = offset[stages];
    auto id = [&](int s, int i) { return offset[static_cast<size_t>(s)] + static_cast<size_t>(i); };

    // Dependency graph in compressed-sparse-row form (one allocation, not one per action): edges from each
    // action's stream predecessor and from each of its dependencies.
    std::vector<int> indegree(total, 0);
    std::vector<long> streamPrev(total, -1);
    std::vector<size_t> edgeCount(total + 1, 0);
    for (size_t s = 0; s < stages; ++s) {
        std::array<long, kStreamCount> last;
        last.fill(-1);
        const auto& acts = schedule.stages[s].actions;
        for (size_t i = 0; i < acts.size(); ++i) {
            const size_t me = id(static_cast<int>(s), static_cast<int>(i));
            // A device that cannot overlap communication with compute runs each rank's list in order on one
            // stream (the CPU executor's single thread).
            const bool blocking = schedule.p2pBlocksCompute &&
                                  (acts[i].kind == ActionKind::SendActivation || acts[i].kind == ActionKind::SendGrad);
            const auto st = costs.serialStreams || blocking ? size_t{0} : static_cast<size_t>(streamOf(acts[i].kind));
            if (last[st] >= 0) {
                streamPrev[me] = last[st];
                ++edgeCount[static_cast<size_t>(last[st]) + 1];
                ++indegree[me];
            }
            last[st] = static_cast<long>(me);
            for (const auto& d : acts[i].deps) {
                ++edgeCount[id(d.stage, d.index) + 1];
                ++indegree[me];
            }
        }
    }
    for (size_t n = 0; n < total; ++n) edgeCount[n + 1] += edgeCount[n];
    std::vector<size_t> successors(edgeCount[total]);
    {
        std::vector<size_t> fill(edgeCount.begin(), edgeCount.end() - 1);
        for (size_t s = 0; s < stages; ++s) {
            const auto& acts = schedule.stages[s].actions;
            for (size_t i = 0; i < acts.size(); ++i) {
                const size_t me = id(static_cast<int>(s), static_cast<int>(i));
                if (streamPrev[me] >= 0) successors[fill[static_cast<size_t>(streamPrev[me])]++] = me;
                for (const auto& d : acts[i].deps) successors[fill[id(d.stage, d.index)]++] = me;
            }
        }
    }

    Timeline t;
    t.perAction.resize(stages);
    for (size_t s = 0; s < stages; ++s) t.perAction[s].resize(schedule.stages[s].actions.size());
    std::vector<double> start(total, 0.0), end(total, 0.0);
    std::vector<size_t> ready;
    ready.reserve(total);
    for (size_t n = 0; n < total; ++n)
        if (indegree[n] == 0) ready.push_back(n);
    std::vector<int> stageOf(total);
    for (size_t s = 0; s < stages; ++s)
        for (size_t n = offset[s]; n < offset[s + 1]; ++n) stageOf[n] = static_cast<int>(s);

    size_t done = 0;
    while (!ready.empty()) {
        const size_t n = ready.back();
        ready.pop_back();
        ++done;
        const int s = stageOf[n];
        const size_t i = n - offset[static_cast<size_t>(s)];
        const Action& a = schedule.stages[static_cast<size_t>(s)].actions[i];
        double begin = streamPrev[n] >= 0 ? end[static_cast<size_t>(streamPrev[n])] : 0.0;
        for (const auto& d : a.deps) {
            const size_t o = id(d.stage, d.index);
            const double when =
                d.when == Dependency::When::End ? end[o] : start[o] + d.fraction * (end[o] - start[o]);
            begin = std::max(begin, when);
        }
        start[n] = begin;
        end[n] = begin + costs.perAction[static_cast<size_t>(s)][i].seconds;
        for (const auto& d : a.deps)
            if (d.tailFraction > 0.0)
                end[n] = std::max(end[n], end[id(d.stage, d.index)] +
                                              d.tailFraction * costs.perAction[static_cast<size_t>(s)][i].seconds);
        const bool recv = a.kind == ActionKind::RecvActivation || a.kind == ActionKind::RecvGrad;
        if (recv && !a.deps.empty()) {
            // The receive ends when both the data and the receiver are there. With jittered work on both sides
            // (σ W each, FORMULAS.md §6) that is the expected maximum of the two arrivals: the receiver's (its
            // stream free, plus the transfer) and the data's (the send's end), s² = (σ W_recv)² + (σ W_send)².
            const size_t sendId = id(a.deps.front().stage, a.deps.front().index);
            const double streamFree = streamPrev[n] >= 0 ? end[static_cast<size_t>(streamPrev[n])] : 0.0;
            const double own = streamFree + costs.perAction[static_cast<size_t>(s)][i].seconds, arrival = end[sendId];
            end[n] = std::max(end[n], arrival);
            const ActionCost& sendCost =
                costs.perAction[static_cast<size_t>(a.deps.front().stage)][static_cast<size_t>(a.deps.front().index)];
            end[n] += expectedMaxExcess(own - arrival,
                                        costs.syncJitterFraction * std::hypot(costs.perAction[static_cast<size_t>(s)][i].syncWorkSeconds,
                                                                              sendCost.syncWorkSeconds));
        }
        t.perAction[static_cast<size_t>(s)][i] = {start[n], end[n]};
        t.stepSeconds = std::max(t.stepSeconds, end[n]);
        for (size_t e = edgeCount[n]; e < edgeCount[n + 1]; ++e)
            if (--indegree[successors[e]] == 0) ready.push_back(successors[e]);
    }
    if (done != total) {
        std::string stuck;
        int shown = 0;
        for (size_t n = 0; n < total && shown < 4; ++n) {
            if (indegree[n] <= 0) continue;
            const int s = stageOf[n];
            const Action& a = schedule.stages[static_cast<size_t>(s)].actions[n - offset[static_cast<size_t>(s)]];
            stuck += (shown ? "; " : "") + std::string("stage ") + std::to_string(s) + " " + a.traceName() +
                     " micro-batch " + std::to_string(a.microBatch) + " chunk " + std::to_string(a.chunk);
            ++shown;
        }
        throw RuntimeError("schedule deadlocks: " + std::to_string(total - done) + " actions can never start (" +
                           stuck + ")");
    }

    // Attribute every second of each stage's compute stream (FORMULAS.md §6).
    t.perStage.resize(stages);
    for (size_t s = 0; s < stages; ++s) {
        const auto& acts = schedule.stages[s].actions;
        StepBreakdown& b = t.perStage[s];
        // Intervals of the data-parallel stream: it runs its actions in list order, so they are disjoint and sorted,
        // and a gap's overlap with them is two binary searches (a scan over all of them made ZeRO-3's per-micro-batch
        // collectives quadratic in the micro-batches).
        BusyLine dpBusy;
        for (size_t i = 0; i < acts.size(); ++i)
            if (streamOf(acts[i].kind) == Stream::DataParallel)
                dpBusy.add(t.perAction[s][i].startSeconds, t.perAction[s][i].endSeconds, 1.0);
        dpBusy.finish();
        double prevEnd = 0.0;
        double lastEnd = 0.0;
        for (size_t i = 0; i < acts.size(); ++i) {
            const Action& a = acts[i];
            const TimedAction& ta = t.perAction[s][i];
            const bool blockingTransfer = schedule.p2pBlocksCompute &&
                                          (a.kind == ActionKind::SendActivation || a.kind == ActionKind::SendGrad);
            if (streamOf(a.kind) != Stream::Compute && !blockingTransfer) {
                lastEnd = std::max(lastEnd, ta.endSeconds);
                continue;
            }
            if (blockingTransfer) {
                // A send or receive that holds the compute stream: while the peer is still computing it is bubble,
                // from the matching send's start on it is exposed PP.
                double dataFrom = prevEnd;
                const bool recv = a.kind == ActionKind::RecvActivation || a.kind == ActionKind::RecvGrad;
                if (recv && !a.deps.empty())
                    dataFrom = std::max(prevEnd, t.perAction[static_cast<size_t>(a.deps.front().stage)]
                                                            [static_cast<size_t>(a.deps.front().index)].startSeconds);
                const double until = std::max(prevEnd, ta.endSeconds);
                b.bubbleSeconds += std::max(0.0, std::min(dataFrom, until) - prevEnd);
                b.ppSeconds += std::max(0.0, until - std::max(dataFrom, prevEnd));
                prevEnd = until;
                continue;
            }
            const double gap = ta.startSeconds - prevEnd;
            if (gap > 0.0) {
                // The dependency that was met last decides what the compute stream waited for.
                double latest = -1.0;
                const Action* binding = nullptr;
                TimedAction bindingTime{};
                for (const auto& d : a.deps) {
                    const TimedAction& dt = t.perAction[static_cast<size_t>(d.stage)][static_cast<size_t>(d.index)];
                    const double when = d.when == Dependency::When::End ? dt.endSeconds
                                                                        : dt.startSeconds + d.fraction * (dt.endSeconds - dt.startSeconds);
                    if (when > latest) {
                        latest = when;
                        binding = &schedule.stages[static_cast<size_t>(d.stage)].actions[static_cast<size_t>(d.index)];
                        bindingTime = dt;
                    }
                }
                // A transfer the stage waits for: time before it began was the sender still computing
                // (bubble), the transfer itself is exposed PP. A collective: the data-parallel stream was
                // busy with it or with the collectives queued before it, all exposed DP.
                double comm = 0.0;
                if (binding) {
                    if (binding->kind == ActionKind::RecvActivation || binding->kind == ActionKind::RecvGrad) {
                        const double overlap = std::max(0.0, std::min(ta.startSeconds, bindingTime.endSeconds) -
                                                                 std::max(prevEnd, bindingTime.startSeconds));
                        comm = std::min(gap, overlap);
                        b.ppSeconds += comm;
                    } else if (binding->kind == ActionKind::Collective) {
                        // Count the part of the gap during which this stage's data-parallel stream was busy.
                        comm = std::min(gap, dpBusy.overlap(prevEnd, ta.startSeconds));
                        b.dpSeconds += comm;
                    }
                }
                b.bubbleSeconds += gap - comm;
            }
            const ActionCost& c = costs.perAction[s][i];
            // A compute action that streams what a collective delivers (parameters gathered unit by unit under
            // ZeRO-3 / FSDP prefetch, or Megatron's overlapped parameter all-gather into the first forward) cannot
            // end before that collective ends plus its last unit's work: the stretch beyond its own cost is the
            // compute stream waiting on the data-parallel stream, exposed DP.
            const double stretch = (ta.endSeconds - ta.startSeconds) - c.seconds;
            if (stretch > 0.0) {
                bool onCollective = false;
                for (const auto& d : a.deps)
                    if (d.tailFraction > 0.0 &&
                        schedule.stages[static_cast<size_t>(d.stage)].actions[static_cast<size_t>(d.index)].kind ==
                            ActionKind::Collective)
                        onCollective = true;
                (onCollective ? b.dpSeconds : b.bubbleSeconds) += stretch;
            }
            if (a.kind == ActionKind::OptimizerStep) {
                b.optimizerSeconds += c.seconds;
            } else {
                b.computeSeconds += c.computeSeconds;
                b.dpSeconds += c.contentionDpSeconds;
                b.ppSeconds += c.contentionPpSeconds;
                // A wait inside a compute action is for its TP/CP/EP collectives: shared out in their proportion.
                const double inner = c.tpSeconds + c.cpSeconds + c.epSeconds;
                const double waitShare = inner > 0.0 ? c.waitSeconds / inner : 0.0;
                b.tpSeconds += c.tpSeconds * (1.0 + waitShare);
                b.cpSeconds += c.cpSeconds * (1.0 + waitShare);
                b.epSeconds += c.epSeconds * (1.0 + waitShare);
            }
            prevEnd = ta.endSeconds;
        }
        // After its last compute, a stage waits for its own trailing collectives (exposed DP), then for
        // the slowest stage (bubble).
        const double tail = t.stepSeconds - prevEnd;
        const double dpTail = std::max(0.0, std::min(lastEnd, t.stepSeconds) - prevEnd);
        b.dpSeconds += dpTail;
        b.bubbleSeconds += tail - dpTail;
    }
    return t;
}

StepMetrics stepMetrics(const ActionSchedule& schedule, const CostTable& costs, const Timeline& timeline,
                        const ModelConfig& model, const ClusterConfig& cluster) {
    const Plan& plan = schedule.plan;
    StepMetrics m;
    m.stepSeconds = timeline.stepSeconds;
    const size_t stages = schedule.stages.size();
    double busiest = -1.0;
    double perStageFlops = 0.0;
    for (size_t s = 0; s < stages; ++s) {
        const StepBreakdown& b = timeline.perStage[s];
        const double frac = m.stepSeconds > 0.0 ? b.bubbleSeconds / m.stepSeconds : 0.0;
        m.bubbleFractionPerStage.push_back(frac);
        m.bubbleFraction += frac / static_cast<double>(stages);
        const double busy = b.computeSeconds + b.tpSeconds + b.cpSeconds + b.epSeconds;
        if (busy > busiest) {
            busiest = busy;
            m.bottleneckStage = static_cast<int>(s);
        }
        for (const auto& c : costs.perAction[s]) perStageFlops += c.flops;
    }
    m.breakdown = timeline.perStage[static_cast<size_t>(m.bottleneckStage)];
    const double ranksPerStage = static_cast<double>(plan.worldSize()) / plan.pp;
    m.hardwareFlopsPerStep = perStageFlops * ranksPerStage;
    m.modelFlopsPerStep = modelFlopsPerStep(model, plan);
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    const double peak = cluster.peakFlops(recipe.computeDtype) * plan.worldSize();
    if (m.stepSeconds > 0.0) {
        // MFU / HFU as defined by Chowdhery et al. 2022 (PaLM, appendix B) and Korthikanti et al. 2022.
        m.mfu = m.modelFlopsPerStep / (m.stepSeconds * peak);
        m.hfu = m.hardwareFlopsPerStep / (m.stepSeconds * peak);
        m.tokensPerSecond = static_cast<double>(plan.globalBatch) * static_cast<double>(model.seqLen) / m.stepSeconds;
    }
    return m;
}


CostTable withContention(const ActionSchedule& schedule, const CostTable& costs, const Timeline& timeline, double weight) {
    CostTable out = costs;
    if (!(costs.commContention > 0.0) || costs.serialStreams) return out;
    for (size_t s = 0; s < schedule.stages.size(); ++s) {
        const auto& acts = schedule.stages[s].actions;
        // Busy intervals of this rank's communication streams with the rate at which each moves its own
        // (isolated) work: a collective that streams behind its producer is spread over its whole interval, a
        // receive that waited for its sender moved data only at its end.
        // One line per communication stream; a stream runs its actions in list order, so each line's intervals are
        // disjoint and sorted, and the overlap with a compute action is two binary searches and a prefix sum.
        BusyLine dp, send, recv;
        for (size_t i = 0; i < acts.size(); ++i) {
            const ActionKind k = acts[i].kind;
            const TimedAction& ta = timeline.perAction[s][i];
            const double own = costs.perAction[s][i].computeSeconds;
            const double span = ta.endSeconds - ta.startSeconds;
            if (!(own > 0.0) || !(span > 0.0)) continue;
            if (k == ActionKind::Collective) {
                dp.add(ta.startSeconds, ta.endSeconds, std::min(1.0, own / span));
            } else if (k == ActionKind::RecvActivation || k == ActionKind::RecvGrad) {
                recv.add(ta.endSeconds - std::min(own, span), ta.endSeconds, 1.0);
            } else if (isTransfer(k) && !schedule.p2pBlocksCompute) {
                send.add(ta.endSeconds - std::min(own, span), ta.endSeconds, 1.0);
            }
        }
        dp.finish();
        send.finish();
        recv.finish();
        auto overlap = [&](const BusyLine& line, double a, double b) { return line.overlap(a, b); };
        for (size_t i = 0; i < acts.size(); ++i) {
            if (!isCompute(acts[i].kind)) continue;
            ActionCost& c = out.perAction[s][i];
            const TimedAction& ta = timeline.perAction[s][i];
            // The action ran [start, end]; what it would take without contention is its uncontended cost, so the
            // comm overlapping its first that-long stretch is what slowed it.
            const double base = c.seconds - c.contentionDpSeconds - c.contentionPpSeconds;
            const double until = ta.startSeconds + base;
            const double dpComm = overlap(dp, ta.startSeconds, until);
            const double ppComm = overlap(send, ta.startSeconds, until) + overlap(recv, ta.startSeconds, until);
            // However much communication ran beside it, its kernels run at no less than 1 / (1 + ceiling) of their
            // speed: the charge, split between DP and PP as the communication was, is capped by its own compute.
            const double lost = contentionSeconds(costs.commContention, costs.commContentionMax, dpComm + ppComm, c.computeSeconds);
            const double dpNow = dpComm + ppComm > 0.0 ? lost * dpComm / (dpComm + ppComm) : 0.0;
            const double ppNow = lost - dpNow;
            c.contentionDpSeconds = weight * dpNow + (1.0 - weight) * c.contentionDpSeconds;
            c.contentionPpSeconds = weight * ppNow + (1.0 - weight) * c.contentionPpSeconds;
            finish(c);
        }
    }
    return out;
}

PlanSimulation simulatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return simulatePlan(model, cluster, plan, std::numeric_limits<double>::infinity());
}

PlanSimulation simulatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& given, double stopAbove) {
    PlanSimulation r;
    const Plan plan = withResolvedPipelineSplit(model, cluster, given);
    r.schedule = buildSchedule(model, plan);
    r.costs = costSchedule(r.schedule, model, cluster);
    r.timeline = simulate(r.schedule, r.costs);
    // Communication that overlaps compute slows it (FORMULAS.md §6.2): cost the overlap seen in the timeline and
    // simulate again.
    if (cluster.gpu.commContention > 0.0 && !r.costs.serialStreams && r.timeline.stepSeconds < stopAbove) {
        // The overlap depends on the slowdown it causes: a fixed point. The first estimate (from the uncontended
        // timeline) overshoots where communication is a large part of the step; two more passes, each averaged
        // with the one before, land within 2% of the fixed point on the published runs (undamped it oscillates).
        r.costs = withContention(r.schedule, r.costs, r.timeline, 1.0);
        r.timeline = simulate(r.schedule, r.costs);
        for (int pass = 0; pass < 2; ++pass) {
            r.costs = withContention(r.schedule, r.costs, r.timeline, 0.5);
            r.timeline = simulate(r.schedule, r.costs);
        }
    }
    r.metrics = stepMetrics(r.schedule, r.costs, r.timeline, model, cluster);
    r.memory = predictMemory(model, cluster, plan);
    return r;
}

} // namespace tessel::sim
