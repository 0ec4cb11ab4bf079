// Communication volumes per group for a plan (FORMULAS.md §4.3), costed with the comm model.
#include "tessel/cost/traffic.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/shapes.hpp"

#include <algorithm>

namespace tessel {

std::string toString(CommPhase p) {
    switch (p) {
    case CommPhase::Forward: return "forward";
    case CommPhase::Backward: return "backward";
    case CommPhase::PerMicroBatch: return "per_micro_batch";
    case CommPhase::PerStep: return "per_step";
    }
    return "?";
}

namespace {
double d(int64_t v) { return static_cast<double>(v); }

struct OpBuilder {
    const ClusterConfig& cluster;
    const Plan& plan;
    std::vector<CommOp> ops;
    void add(std::string name, GroupKind g, Primitive p, double bytes, CommPhase phase) {
        addPlaced(std::move(name), g, p, bytes, phase, placeGroup(plan, cluster, g));
    }
    // The same over ranks placed as given (a leg of a group: the flex dispatcher's).
    void addPlaced(std::string name, GroupKind g, Primitive p, double bytes, CommPhase phase, const GroupPlacement& placement) {
        CommOp op;
        op.name = std::move(name);
        op.group = g;
        op.primitive = p;
        op.bytes = bytes;
        op.phase = phase;
        op.placement = placement;
        if (op.placement.size <= 1 && p != Primitive::SendRecv) return;
        op.cost = commCost(p, bytes, op.placement, cluster);
        ops.push_back(std::move(op));
    }
    // An all-reduce of one fp32 scalar, at NCCL's LL latency (scalarAllReduceSeconds).
    void addScalarAllReduce(std::string name, GroupKind g, CommPhase phase) {
        const size_t before = ops.size();
        add(std::move(name), g, Primitive::AllReduce, 4.0, phase);
        if (ops.size() == before) return; // a group of one: nothing added
        CommCost& c = ops.back().cost;
        c.latencySeconds = c.seconds = scalarAllReduceSeconds(ops.back().placement, cluster);
        c.bandwidthSeconds = 0.0;
        c.algorithm = CommAlgorithm::Ring;
    }
};
} // namespace

double nodeHitProbability(int64_t experts, int64_t perNode, int64_t topK) {
    // 1 - C(E - n, k) / C(E, k) = 1 - prod_{i < k} (E - n - i) / (E - i): no draw of k lands on the node's n.
    double miss = 1.0;
    for (int64_t i = 0; i < topK; ++i) {
        const double left = static_cast<double>(experts - perNode - i);
        if (left <= 0.0) return 1.0;
        miss *= left / static_cast<double>(experts - i);
    }
    return 1.0 - miss;
}

double nodeHitProbability(const MoeConfig& moe, int64_t perNode) {
    const int64_t E = moe.experts, k = moe.topK, G = moe.routingGroups, t = moe.groupsPerToken;
    if (G <= 1 || t >= G || E % G != 0) return nodeHitProbability(E, perNode, k);
    // Group-limited routing: the token's t groups drawn evenly from G, its top_k drawn evenly from their t E/G
    // experts. A node of whole groups (gn of them) holds x E/G of those experts when x of its groups are drawn
    // (hypergeometric); a node holding part of one group (perNode of its E/G) is reached only when that group is.
    const int64_t perGroup = E / G, pool = t * perGroup;
    auto miss = [&](int64_t held) { return 1.0 - nodeHitProbability(pool, held, k); };
    if (perNode % perGroup == 0) {
        const int64_t gn = perNode / perGroup;
        double hit = 0.0;
        for (int64_t x = 1; x <= std::min(gn, t); ++x) {
            // P(x of the node's gn groups among the t drawn of G) = C(gn, x) C(G - gn, t - x) / C(G, t).
            double px = 1.0;
            for (int64_t i = 0; i < x; ++i) px *= static_cast<double>(gn - i) / static_cast<double>(i + 1);
            for (int64_t i = 0; i < t - x; ++i) px *= static_cast<double>(G - gn - i) / static_cast<double>(i + 1);
            for (int64_t i = 0; i < t; ++i) px /= static_cast<double>(G - i) / static_cast<double>(i + 1);
            hit += px * (1.0 - miss(x * perGroup));
        }
        return hit;
    }
    if (perGroup % perNode == 0) return static_cast<double>(t) / static_cast<double>(G) * (1.0 - miss(perNode));
    return nodeHitProbability(E, perNode, k); // groups and nodes not aligned: the unlimited reading (more traffic)
}

std::vector<DispatchLeg> dispatchLegs(const ModelConfig& model, const Plan& plan, const GroupPlacement& ep, double routedBytes) {
    if (!model.moe || moeDispatcherOf(plan.framework) != "flex" || ep.size <= 1) return {{"", ep, routedBytes}};
    // DeepEP sends a token once to each rank that holds one of its experts (buffer.py dispatch: `is_token_in_rank`,
    // `num_tokens_per_rank`) and the receiving rank copies it to its experts, so the NVLink leg carries a token to
    // the ranks it reaches, not its top_k copies: a buffer of ranks x hit tokens (hit: a rank of E/R experts
    // reached), of which the (n - 1) / n off the rank move. The combine returns one sum per rank the same way.
    const double token = routedBytes / static_cast<double>(model.moe->topK);
    const int ranks = ep.size;
    const double rankHit = nodeHitProbability(*model.moe, model.moe->experts / ranks);
    const double nvlinkBytes = token * ranks * rankHit;
    if (!ep.spansNodes()) return {{"", ep, nvlinkBytes}};
    const int nodes = ep.nodes;
    const int perNode = ep.ranksPerNode;
    const int64_t expertsPerNode = model.moe->experts / nodes;
    const double hit = nodeHitProbability(*model.moe, expertsPerNode);
    // Inter-node: one copy of each token to each node hit; a buffer of nodes x hit copies of which the
    // (nodes - 1) / nodes off the rank cross the network. Intra-node: forwarded over NVLink to the ranks hit there,
    // the same ranks x hit copies in all, costed as an all-to-all among the node's part of the group.
    return {{"_internode", GroupPlacement{nodes, nodes, 1, 1}, token * nodes * hit},
            {"_intranode", GroupPlacement{perNode, 1, perNode, perNode}, nvlinkBytes}};
}

std::vector<double> pipelinedLegSeconds(const std::vector<DispatchLeg>& legs, std::vector<double> seconds) {
    double network = 0.0;
    for (size_t i = 0; i < legs.size(); ++i)
        if (legs[i].suffix == "_internode") network = seconds[i];
    for (size_t i = 0; i < legs.size(); ++i)
        if (legs[i].suffix == "_intranode") seconds[i] = std::max(0.0, seconds[i] - network);
    return seconds;
}

SequenceParallelTraffic sequenceParallelTraffic(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe,
                                                double activationBytes) {
    SequenceParallelTraffic t;
    t.forwardGatherBytesPerElement = activationBytes;
    t.gradGatherBytesPerElement = activationBytes;
    // Transformer Engine quantizes before it gathers. NVFP4 (distributed.py gather_along_first_dim ->
    // _all_gather_nvfp4, release_v2.8 on): the QKV and fc1 inputs rowwise for the forward GEMM and again
    // columnwise for dW (0.5625 B each), and the output gradients of the projection and fc2 both ways for
    // dgrad and dW (module/base.py grad_output_preprocess: gather_along_first_dim(grad_output,
    // quantizer=...)).
    if (recipe.fp4() && !dtensorTpOf(plan.framework)) {
        t.forwardGatherBytesPerElement = recipe.quantizedBytes();
        t.gradGatherBytesPerElement = 2.0 * recipe.quantizedBytes();
    }
    // FP8 since v0.5 (2023-01): the fused norm writes FP8 and the gather moves it (layernorm_linear.py, the
    // backward re-gathering the saved FP8 shard for dW), and the output gradient is cast, gathered in FP8 and
    // transposed after ("FP8 case with gather", grad_output_preprocess); v2's _all_gather_fp8 the same for
    // delayed and current scaling, 1 B an element. MXFP8 (_all_gather_mxfp8) moves one E8M0 scale per 32
    // elements with the data and gathers the output gradient rowwise for dgrad and columnwise for dW; 1D block
    // scaling (_all_gather_fp8_blockwise) an fp32 scale per 128, its gradient both ways too. Userbuffers'
    // overlapped gathers take FP8 buffers (initialize_ub: fp8_buf for qkv/fc1 fprop and proj/fc2 dgrad), so
    // the chunks move the same bytes. torchao's Float8 (fsdp_fp8) is PyTorch's TP, below.
    if (recipe.fp8() && recipe.name != "fsdp_fp8" && !dtensorTpOf(plan.framework)) {
        const std::string scaling = fp8RecipeOf(plan.framework);
        const double scales = scaling == "mxfp8" ? 1.0 / 32.0 : scaling == "blockwise" ? 4.0 / 128.0 : 0.0;
        const double copies = scales > 0.0 ? 2.0 : 1.0;
        t.forwardGatherBytesPerElement = recipe.quantizedBytes() + scales;
        t.gradGatherBytesPerElement = copies * (recipe.quantizedBytes() + scales);
    }
    if (!dtensorTpOf(plan.framework)) return t;
    // PyTorch's own TP (torchtitan's parallelize_llama.py, DTensor): the gathered input is what autograd saves, and
    // with Float8 linears torchao's Float8ColwiseParallel / PrepareFloat8ModuleInput cast the input to float8
    // before the all-gather, so the GEMMs that read it share one float8 gather (torchao float8_tensor_parallel.py).
    // The gradients still move in the activation type.
    if (recipe.name == "fsdp_fp8") t.forwardGatherBytesPerElement = 1.0;
    t.backwardRegathersInputs = opLevelSelectiveRecompute(model, plan);
    return t;
}

double pipelinedCollectiveExposedSeconds(double gemmSeconds, double commSeconds, int chunks) {
    const double n = static_cast<double>(std::max(chunks, 1));
    return std::max(gemmSeconds, commSeconds) + std::min(gemmSeconds, commSeconds) / n - gemmSeconds;
}

RingExposure ringExposure(double diagForward, double stepsForward, double diagBackward, double stepsBackward, int cp,
                          double transferSeconds, double gradTransferSeconds, const GpuSpec& gpu) {
    RingExposure r;
    if (cp < 2 || transferSeconds <= 0.0) return r;
    // Exposed is what a transfer outlasts the step it runs under by; the later steps' kernels take equal shares.
    const double x = transferSeconds;
    const auto exposedOver = [](double transfer, double compute) { return std::max(0.0, transfer - compute); };
    // Forward: step i's kernels run while step i+1's K and V arrive, for i = 0 (the diagonal) .. cp - 2.
    const double stepF = stepsForward / (cp - 1.0);
    const double exposedF = exposedOver(x, diagForward) + (cp - 2.0) * exposedOver(x, stepF);
    r.forwardSeconds = exposedF + gpu.contentionSeconds((cp - 1.0) * x - exposedF, diagForward + (cp - 2.0) * stepF);
    // Backward: under step 0 the next K and V, under steps 1 .. cp - 2 those and the previous step's dK, dV, under the
    // last step the previous dK, dV; its own dK, dV go to their owner after it, exposed.
    const double g = gradTransferSeconds;
    const double stepB = stepsBackward / (cp - 1.0);
    const double exposedB = exposedOver(x, diagBackward) + (cp - 2.0) * exposedOver(x + g, stepB) + exposedOver(g, stepB) + g;
    r.backwardSeconds = exposedB + gpu.contentionSeconds((cp - 1.0) * (x + g) + g - exposedB, diagBackward + stepsBackward);
    return r;
}

RingStepBytes ringStepBytes(const ModelConfig& model, const Plan& plan) {
    const LocalShapes s = localShapes(model, plan, precisionRecipeOf(plan));
    const RingAttentionStyle style = ringAttentionStyleOf(plan);
    const double width = style.kvAtQueryHeads ? d(s.qDimLocal + s.oDimLocal) : d(s.kvDimLocal + s.vDimLocal);
    RingStepBytes b;
    b.kv = s.activationBytes * d(s.tokens) * width;
    b.grads = style.merge == kernel_cost::RingMerge::PyTorch ? 4.0 * d(s.tokens) * width : b.kv;
    return b;
}

CpLevels cpLevels(const Plan& plan, const ClusterConfig& cluster) {
    const GroupPlacement whole = placeGroup(plan, cluster, GroupKind::Cp);
    if (plan.cpComm != CpComm::A2aP2p || plan.cpRing() < 2 || plan.cpHeadSplit() < 2) return {whole, whole};
    const std::vector<int> ranks = groupRanks(plan, GroupKind::Cp, 0);
    const size_t a = static_cast<size_t>(plan.cpHeadSplit());
    std::vector<int> inner(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(std::min(a, ranks.size()))), outer;
    for (size_t i = 0; i < ranks.size(); i += a) outer.push_back(ranks[i]);
    return {placeRanks(inner, cluster.gpusPerNode), placeRanks(outer, cluster.gpusPerNode)};
}

double ringStepTransferSeconds(double bytes, const ClusterConfig& cluster, const GroupPlacement& cpGroup) {
    GroupPlacement hop;
    hop.size = 2;
    hop.nodes = cpGroup.spansNodes() ? 2 : 1;
    hop.ranksPerNode = hop.minRanksPerNode = cpGroup.spansNodes() ? 1 : 2;
    return commCost(Primitive::SendRecv, bytes, hop, cluster).seconds;
}

bool amaxAllReducedOverTp(const Plan& plan, const PrecisionRecipe& recipe) {
    // NVFP4's per-tensor scale is an amax too, all-reduced over the group before a gathered tensor is cast
    // (NVFP4Quantizer::quantize_impl's reduce_amaxes: allreduce_coalesced(...)->wait()).
    return plan.tp > 1 && plan.sequenceParallel &&
           ((recipe.fp8() && recipe.name != "fsdp_fp8" && fp8RecipeOf(plan.framework) == "tensorwise") || recipe.fp4());
}

std::vector<CommOp> layerCommOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    const LocalShapes s = localShapes(model, plan, recipe);
    const double e = s.activationBytes;
    const double act = e * d(s.tokens) * d(s.hidden); // one full (un-split) hidden-state tensor on this rank
    OpBuilder b{cluster, plan, {}};
    // The blocks with a tensor-parallel input and output: attention, the MLP (or the routed experts), and the shared
    // experts beside them, whose row-parallel fc2 reduces on its own (Megatron-core's SharedExpertMLP).
    // With SP an MoE layer's router takes each TP rank's own tokens (Megatron-core's all-to-all dispatcher), so the
    // routed experts have no dense TP block of their own: their collectives are the dispatch below.
    const bool moeSp = model.moe && plan.sequenceParallel;
    std::vector<const char*> blocks{"attn"};
    if (!moeSp) blocks.push_back("mlp");
    if (model.moe && model.moe->sharedFfnHidden > 0) blocks.push_back("shared");
    // A parallel block whose framework sums the attention's and the MLP's row-parallel outputs before reducing them
    // (GPT-NeoX's gpt_j_residual): the MLP's reduction carries the sum, the attention has none of its own forward,
    // and with SP its gradient's gather backward is the MLP's too (parallelResidualReducesOnceOf).
    const bool oneReduction = model.parallelResidual && !model.moe && parallelResidualReducesOnceOf(plan.framework, plan.pp);
    auto reducesOwnOutput = [&](const char* blk) { return !(oneReduction && std::string(blk) == "attn"); };
    if (plan.tp > 1) {
        if (plan.sequenceParallel) {
            // Korthikanti et al. 2022 §4.2.2: each all-reduce becomes an all-gather + reduce-scatter pair;
            // backward also re-gathers the saved sharded inputs of the QKV and fc1 GEMMs for dW (Megatron-LM, TE).
            const SequenceParallelTraffic sp = sequenceParallelTraffic(model, plan, recipe, e);
            for (const char* blk : blocks) {
                // MLA's down projections run on each rank's own tokens, so its attention gathers the latents (and
                // the hidden state where q has no latent) in the compute dtype, and reduce-scatters their gradients.
                const bool latent = model.mla && std::string(blk) == "attn";
                const double in = latent ? e * d(s.tokens) * d((s.qLatent > 0 ? s.qLatent : s.hidden) + s.kvLatent) : act;
                const double gathered = latent ? in : sp.forwardGatherBytesPerElement / e * act;
                b.add(std::string("tp_all_gather_") + blk, GroupKind::Tp, Primitive::AllGather, gathered, CommPhase::Forward);
                if (reducesOwnOutput(blk)) {
                    b.add(std::string("tp_reduce_scatter_") + blk, GroupKind::Tp, Primitive::ReduceScatter, act, CommPhase::Forward);
                    b.add(std::string("tp_all_gather_") + blk + "_grad", GroupKind::Tp, Primitive::AllGather,
                          latent ? act : sp.gradGatherBytesPerElement / e * act, CommPhase::Backward);
                }
                b.add(std::string("tp_reduce_scatter_") + blk + "_grad", GroupKind::Tp, Primitive::ReduceScatter, in, CommPhase::Backward);
                if (sp.backwardRegathersInputs)
                    b.add(std::string("tp_all_gather_") + blk + "_input_regather", GroupKind::Tp, Primitive::AllGather, gathered,
                          CommPhase::Backward);
                // FP8 current scaling gathers its inputs in FP8 with one scale over the TP group: the column-parallel
                // input's amax (before the all-gather) and, backward, the row-parallel output gradient's are
                // all-reduced (MAX, one fp32) over the group first, and the compute stream waits for it
                // (Transformer Engine's set_quantizer_amax_reduction_group under sequence parallelism;
                // Float8CurrentScalingQuantizer::quantize_impl: allreduce(...)->wait()).
                if (amaxAllReducedOverTp(plan, recipe)) {
                    b.addScalarAllReduce(std::string(kFp8AmaxAllReducePrefix) + blk, GroupKind::Tp, CommPhase::Forward);
                    b.addScalarAllReduce(std::string(kFp8AmaxAllReducePrefix) + blk + "_grad", GroupKind::Tp, CommPhase::Backward);
                }
            }
        } else {
            // Megatron-LM (Shoeybi et al. 2019, §3): one all-reduce per block forward (g) and backward (f).
            for (const char* blk : blocks) {
                if (reducesOwnOutput(blk))
                    b.add(std::string("tp_all_reduce_") + blk, GroupKind::Tp, Primitive::AllReduce, act, CommPhase::Forward);
                b.add(std::string("tp_all_reduce_") + blk + "_grad", GroupKind::Tp, Primitive::AllReduce, act, CommPhase::Backward);
            }
        }
    }
    const CpLevels cpAt = plan.cp > 1 ? cpLevels(plan, cluster) : CpLevels{};
    if (plan.cp > 1 && (plan.cpComm == CpComm::A2a || plan.cpComm == CpComm::A2aP2p)) {
        // DeepSpeed-Ulysses (Jacobs et al. 2023, §3.1; Transformer Engine's AttnFuncWithCPAndQKVOA2A): q, k and v
        // trade the sequence split for a head split before attention and the output trades back after it, each an
        // all-to-all of the rank's own tensor; backward the output's gradient and dq, dk, dv the same way. Under
        // a2a+p2p over the all-to-all level only.
        const double q = e * d(s.tokens) * d(s.qDimLocal), k = e * d(s.tokens) * d(s.kvDimLocal);
        const double v = e * d(s.tokens) * d(s.vDimLocal), o = e * d(s.tokens) * d(s.oDimLocal);
        for (const auto& [name, bytes] : {std::pair<const char*, double>{"cp_a2a_q", q}, {"cp_a2a_k", k}, {"cp_a2a_v", v}, {"cp_a2a_out", o}}) {
            b.addPlaced(name, GroupKind::Cp, Primitive::AllToAll, bytes, CommPhase::Forward, cpAt.a2a);
            b.addPlaced(std::string(name) + "_grad", GroupKind::Cp, Primitive::AllToAll, bytes, CommPhase::Backward, cpAt.a2a);
        }
    }
    if (plan.cp > 1 && plan.cpComm == CpComm::A2aP2p) {
        // ... then the ring across the all-to-all groups, K and V of heads / cp_a2a_size over the whole sequence.
        const double kv = e * d(s.microBatch) * d(s.seqFull) * d(s.kvDimLocal + s.vDimLocal) / plan.cpHeadSplit();
        b.addPlaced("cp_kv_exchange", GroupKind::Cp, Primitive::AllGather, kv, CommPhase::Forward, cpAt.ring);
        b.addPlaced("cp_kv_exchange_grad", GroupKind::Cp, Primitive::AllGather, kv, CommPhase::Backward, cpAt.ring);
        b.addPlaced("cp_kv_grad_reduce", GroupKind::Cp, Primitive::ReduceScatter, kv, CommPhase::Backward, cpAt.ring);
    } else if (plan.cp > 1 && plan.cpComm != CpComm::A2a) {
        // Ring attention (p2p): every rank's K and V travel around the CP ring (an all-gather's volume); backward
        // re-circulates K/V and reduce-scatters their gradients (Megatron-core context parallelism). allgather moves
        // the same bytes as collectives: K and V gathered forward and again backward, their gradients reduce-scattered.
        // K and V are the kernel's, cp ring steps of them (ringStepBytes: at every query head where the model code
        // repeats them first). PyTorch's ring (torchtitan's) passes its fp32 dK, dV accumulator to the next rank at
        // every one of its cp steps (dkv_rotater, an all-to-all): cp sends of a step's gradient bytes, which a
        // reduce-scatter of cp / (cp - 1) times their sum moves.
        const RingStepBytes step = ringStepBytes(model, plan);
        const double kv = d(plan.cp) * step.kv;
        const double grads = ringAttentionStyleOf(plan).merge == kernel_cost::RingMerge::PyTorch
                                 ? d(plan.cp) * step.grads * d(plan.cp) / d(plan.cp - 1)
                                 : kv;
        b.add("cp_kv_exchange", GroupKind::Cp, Primitive::AllGather, kv, CommPhase::Forward);
        b.add("cp_kv_exchange_grad", GroupKind::Cp, Primitive::AllGather, kv, CommPhase::Backward);
        b.add("cp_kv_grad_reduce", GroupKind::Cp, Primitive::ReduceScatter, grads, CommPhase::Backward);
    }
    if (model.moe && plan.ep > 1) {
        // Token dispatch and combine (GShard, Lepikhin et al. 2020): top_k copies of every token the router saw,
        // in one all-to-all or in the flex dispatcher's two legs (dispatchLegs).
        const double routed = e * d(s.moeTokensIn) * d(s.topK) * d(s.hidden);
        const std::vector<DispatchLeg> legs = dispatchLegs(model, plan, placeGroup(plan, cluster, GroupKind::Ep), routed);
        std::vector<double> own;
        for (const DispatchLeg& leg : legs) own.push_back(commCost(Primitive::AllToAll, leg.bytes, leg.placement, cluster).seconds);
        const std::vector<double> taken = pipelinedLegSeconds(legs, own);
        for (size_t l = 0; l < legs.size(); ++l) {
            const size_t first = b.ops.size();
            for (const auto& [name, phase] : {std::pair<const char*, CommPhase>{"ep_all_to_all_dispatch", CommPhase::Forward},
                                              {"ep_all_to_all_combine", CommPhase::Forward},
                                              {"ep_all_to_all_dispatch_grad", CommPhase::Backward},
                                              {"ep_all_to_all_combine_grad", CommPhase::Backward}})
                b.addPlaced(std::string(name) + legs[l].suffix, GroupKind::Ep, Primitive::AllToAll, legs[l].bytes, phase, legs[l].placement);
            for (size_t i = first; i < b.ops.size(); ++i) b.ops[i].cost.seconds = taken[l];
        }
    }
    if (model.moe && s.expertTpGather > 1) {
        // Expert tensor parallelism over ranks with their own tokens (Megatron-core's all-to-all dispatcher):
        // after the dispatch the etp ranks all-gather what each received, and reduce-scatter the experts' output
        // before the combine; backward the other way round. Sizes are the gathered rows (expertTokens x h).
        const double gathered = e * d(s.expertTokens) * d(s.hidden);
        b.add("etp_all_gather_experts", GroupKind::ExpertTp, Primitive::AllGather, gathered, CommPhase::Forward);
        b.add("etp_reduce_scatter_experts", GroupKind::ExpertTp, Primitive::ReduceScatter, gathered, CommPhase::Forward);
        b.add("etp_all_gather_experts_grad", GroupKind::ExpertTp, Primitive::AllGather, gathered, CommPhase::Backward);
        b.add("etp_reduce_scatter_experts_grad", GroupKind::ExpertTp, Primitive::ReduceScatter, gathered, CommPhase::Backward);
    }
    return b.ops;
}

uint8_t tpCollectiveModule(const ModelConfig& model, const std::string& opName) {
    namespace rm = recompute_module;
    auto endsWith = [&](const char* tail) {
        const std::string t(tail);
        return opName.size() >= t.size() && opName.compare(opName.size() - t.size(), t.size(), t) == 0;
    };
    if (endsWith("_shared")) return rm::SharedExperts | rm::Moe;
    if (endsWith("_mlp")) return model.moe ? rm::Moe : rm::Mlp;
    if (opName == "tp_all_gather_attn" && model.mla) return rm::MlaUpProj;
    return 0;
}

PipelineTransfer pipelineTransferOf(const Plan& plan, double hiddenStateBytes) {
    PipelineTransfer t;
    t.pairBytes = hiddenStateBytes;
    if (pipelineScatterGatherOf(plan.framework, plan.tp, plan.sequenceParallel)) {
        t.pairBytes = hiddenStateBytes / plan.tp;
        t.gatherBytes = hiddenStateBytes;
    }
    return t;
}

std::vector<CommOp> pipelineCommOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    OpBuilder b{cluster, plan, {}};
    if (plan.pp < 2) return b.ops;
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    const LocalShapes s = localShapes(model, plan, recipe);
    // Megatron sends the (sequence-parallel sharded) hidden state between stages: b * s/cp * h (/tp with SP), or
    // 1/tp of it with scatter-gather, all-gathered by the receiver.
    const PipelineTransfer t = pipelineTransferOf(plan, s.activationBytes * d(s.tokensSp) * d(s.hidden));
    b.add("pp_send_activation", GroupKind::PpPair, Primitive::SendRecv, t.pairBytes, CommPhase::Forward);
    b.add("pp_send_grad", GroupKind::PpPair, Primitive::SendRecv, t.pairBytes, CommPhase::Backward);
    if (t.gatherBytes > 0.0) {
        b.add("pp_all_gather_activation", GroupKind::Tp, Primitive::AllGather, t.gatherBytes, CommPhase::Forward);
        b.add("pp_all_gather_grad", GroupKind::Tp, Primitive::AllGather, t.gatherBytes, CommPhase::Backward);
    }
    return b.ops;
}

Primitive gradReducePrimitive(const Plan& plan, const PrecisionRecipe& recipe) {
    if (plan.zeroStage == 0 ||
        deepSpeedBf16OptimizerOf(plan.framework, plan.pp, plan.zeroStage, recipe.weightBytes, recipe.gradBytes) ||
        deepSpeedAllReducesGradientsOf(plan.framework, plan.zeroStage, plan.offloadOptimizer))
        return Primitive::AllReduce;
    return Primitive::ReduceScatter;
}

std::vector<CommOp> dataParallelCommOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                                        int stage) {
    OpBuilder b{cluster, plan, {}};
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    const StageParameters params = stageParameters(model, plan, stage);
    // Gradients are summed over every rank holding the same weights: dp x cp (CP ranks see other tokens).
    const GroupKind denseGroup = plan.cp > 1 ? GroupKind::DpCp : GroupKind::Dp;
    struct Part {
        const char* tag;
        double params;
        GroupKind group;
    };
    // Under hybrid sharding (zero_replicas > 1) ZeRO's gathers and reduce-scatters stay in the replica's shard group.
    std::vector<Part> parts{{"dense", params.dense, plan.zeroStage >= 1 ? zeroGroupKind(plan, false) : denseGroup}};
    if (params.expert > 0.0) parts.push_back({"expert", params.expert, zeroGroupKind(plan, true)});
    // ZeRO-2/3 reduce-scatter every micro-batch, but once a step under FSDP's no_sync or torchtitan's pipelining.
    const CommPhase reducePhase =
        fsdpReducesOncePerStep(plan.framework, plan.pp, plan.zeroStage) ? CommPhase::PerStep : CommPhase::PerMicroBatch;
    for (const auto& part : parts) {
        const std::string tag = part.tag;
        const double grads = part.params * recipe.gradReduceBytes();
        const double weights = part.params * recipe.paramGatherBytes();
        switch (plan.zeroStage) {
        case 0:
            // Plain data parallelism: one all-reduce of the gradients per step.
            b.add("dp_all_reduce_grads_" + tag, part.group, Primitive::AllReduce, grads, CommPhase::PerStep);
            break;
        case 1:
            // ZeRO-1 / Megatron distributed optimizer: reduce-scatter grads, all-gather updated params; DeepSpeed's
            // BF16 optimizer, and its ZeRO-1/2 without contiguous_gradients, all-reduce the grads instead
            // (gradReducePrimitive).
            if (gradReducePrimitive(plan, recipe) == Primitive::AllReduce)
                b.add("dp_all_reduce_grads_" + tag, part.group, Primitive::AllReduce, grads, CommPhase::PerStep);
            else
                b.add("dp_reduce_scatter_grads_" + tag, part.group, Primitive::ReduceScatter, grads, CommPhase::PerStep);
            b.add("dp_all_gather_params_" + tag, part.group, Primitive::AllGather, weights, CommPhase::PerStep);
            break;
        case 2:
            // ZeRO-2: gradients are partitioned, so each micro-batch's gradients are reduce-scattered (all-reduced by
            // DeepSpeed without contiguous_gradients, gradReducePrimitive).
            if (gradReducePrimitive(plan, recipe) == Primitive::AllReduce)
                b.add("dp_all_reduce_grads_" + tag, part.group, Primitive::AllReduce, grads, reducePhase);
            else
                b.add("dp_reduce_scatter_grads_" + tag, part.group, Primitive::ReduceScatter, grads, reducePhase);
            b.add("dp_all_gather_params_" + tag, part.group, Primitive::AllGather, weights, CommPhase::PerStep);
            break;
        default:
            // ZeRO-3: parameters gathered for forward and again for backward, every micro-batch.
            b.add("zero3_all_gather_params_fwd_" + tag, part.group, Primitive::AllGather, weights, CommPhase::PerMicroBatch);
            b.add("zero3_all_gather_params_bwd_" + tag, part.group, Primitive::AllGather, weights, CommPhase::PerMicroBatch);
            b.add("dp_reduce_scatter_grads_" + tag, part.group, Primitive::ReduceScatter, grads, reducePhase);
            break;
        }
        if (plan.zeroReplicas > 1 && plan.zeroStage >= 1) {
            // Each reduced shard is all-reduced across the replicas, as often as the reduce-scatter runs.
            const bool expert = tag == "expert";
            const double shards = plan.zeroReduceGroupSize(expert);
            b.add("dp_all_reduce_grads_across_replicas_" + tag, zeroGroupKind(plan, expert, true), Primitive::AllReduce,
                  grads / shards, plan.zeroStage == 1 ? CommPhase::PerStep : reducePhase);
        }
    }
    return b.ops;
}

} // namespace tessel
