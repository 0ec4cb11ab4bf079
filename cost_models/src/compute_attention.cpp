// Attention's own ops beside the layer's GEMMs: multi-head latent attention's projections, the core's FLOPs under
// a causal mask and a sliding window, and its kernels under context parallelism (the ring's steps and merges, the
// all-to-all's and the gather's copies; FORMULAS.md §3.2). The layer that calls them is compute.cpp's.
#include "compute_ops.hpp"

#include "tessel/cost/framework.hpp"

#include <algorithm>

namespace tessel::compute_detail {

// QK^T and PV of one rank's heads, sq queries against skv keys, counted whole (the causal kernels do half):
// 2 b (a/t) sq skv (qk head dim + v head dim), which is 4 b (a/t) sq skv head_dim where the widths agree.
double attentionCoreFlops(const LocalShapes& s, int64_t seqQ, int64_t seqKv) {
    return 2.0 * kernel_cost::flashAttentionFlops(s.microBatch, s.headsLocal, seqQ, seqKv, s.headDim, s.vHeadDim);
}

// The keys a sliding window of w leaves each of s queries, over those the causal mask leaves: query i sees
// min(i + 1, w) keys, W(w) = w (w + 1) / 2 + (s - w) w in all against s (s + 1) / 2; 1 without a window or when
// it spans the sequence.
double slidingWindowKeyFraction(int64_t seq, int64_t window) {
    if (window <= 0 || window >= seq) return 1.0;
    const double s = d(seq), w = d(window);
    return (0.5 * w * (w + 1.0) + (s - w) * w) / (0.5 * s * (s + 1.0));
}

// Multi-head latent attention's projections (DeepSeek-V2 §2.1; Megatron-core MLASelfAttention, FORMULAS.md §3.2), in
// place of the QKV GEMM. The down projections to the latents are duplicated on every TP rank (TELinear "duplicated")
// and run over the rank's own tokens (T / tp with sequence parallelism, whose all-gather then carries the latents;
// all T without); the latents' norms and the up projections (column-parallel, a/t heads) see all T. RoPE rotates
// q's rotary part and the one shared rotary key, and q and k are then concatenated from their no-position and rotary
// parts (the shared key broadcast to every head): a copy of each, read and written, and its gradient split back.
void addLatentProjections(std::vector<OpCost>& ops, const ModelConfig& model, const LocalShapes& s, const Plan& plan,
                          bool eager) {
    const int e = s.activationBytes;
    const MlaConfig& mla = *model.mla;
    const int64_t own = plan.sequenceParallel ? s.tokensSp : s.tokens;
    auto latentNorm = [&](const char* name, int64_t width) {
        const bool eagerRms = eager && model.norm == NormKind::RmsNorm;
        OpCost op = memoryOp(name, "norm", eagerRms ? kernel_cost::eagerRmsNormBytes(s.tokens, width, e)
                                                    : kernel_cost::normBytes(s.tokens, width, e));
        if (eagerRms) op.backwardByteFactor = kernel_cost::eagerRmsNormBackwardFactor(e);
        return op;
    };
    // Megatron-core's mla_up_proj module (qkv_up_proj_and_rope_apply): everything after the down projections, the
    // latent norms with them (each fused into its up projection, a LayerNormLinear).
    auto upProj = [](OpCost op) {
        op.module = recompute_module::MlaUpProj;
        return op;
    };
    if (s.qLatent > 0) {
        ops.push_back(gemm("q_down", own, s.qLatent, s.hidden, e));
        ops.push_back(upProj(latentNorm("q_latent_norm", s.qLatent)));
        ops.push_back(upProj(gemm("q_up", s.tokens, s.qDimLocal, s.qLatent, e)));
    } else {
        ops.push_back(upProj(gemm("q_proj", s.tokens, s.qDimLocal, s.hidden, e)));
    }
    ops.push_back(gemm("kv_down", own, s.kvLatent, s.hidden, e));
    ops.push_back(upProj(latentNorm("kv_latent_norm", s.kvLoraRank)));
    ops.push_back(upProj(gemm("kv_up", s.tokens, s.headsLocal * mla.qkNopeHeadDim + s.vDimLocal, s.kvLoraRank, e)));
    if (model.position == PositionEmbedding::Rope && mla.qkRopeHeadDim > 0) {
        const int64_t rotated = (s.headsLocal + 1) * mla.qkRopeHeadDim;
        OpCost rope = memoryOp("rope", "rope", eager ? kernel_cost::eagerRopeBytes(s.tokens, rotated, e)
                                                     : kernel_cost::ropeBytes(s.tokens, rotated, e));
        if (eager) rope.backwardByteFactor = 1.0;
        ops.push_back(upProj(rope));
    }
    OpCost concat = memoryOp("mla_concat", "permute", 2.0 * e * d(s.tokens) * d(s.qDimLocal + s.kvDimLocal));
    concat.backwardByteFactor = 1.0;
    ops.push_back(upProj(concat));
}

// Context-parallel ring attention with the load-balanced split (chunks r and 2cp-1-r on rank r; Megatron-core /
// Transformer Engine and PyTorch alike, FORMULAS.md §3.2): step 0 is a causal kernel over the rank's s/cp
// queries and keys; each of the cp-1 later steps one non-causal kernel of s/cp x s/(2cp) products (all queries
// against half the arriving keys, or half the queries against all of them), each at its own key length's rate;
// around them the merges and gradient accumulations, memory-bound. `att` is the whole causal share, whose FLOPs
// the steps split (2 b h (s/cp)^2 d cp in all).
void addRingAttention(std::vector<OpCost>& ops, const OpCost& att, const LocalShapes& s, const Plan& plan, int e) {
    const int cp = plan.cp;
    OpCost diag = att;
    diag.n = s.seqLocal;
    diag.flops = 0.5 * attentionCoreFlops(s, s.seqLocal, s.seqLocal);
    diag.modelFlops = att.modelFlops / cp;
    diag.bytes = att.bytes / cp;
    ops.push_back(diag);
    OpCost ring = att;
    ring.name = "attention_core_flash_ring";
    ring.causal = false;
    ring.n = std::max<int64_t>(1, s.seqLocal / 2);
    ring.flops = att.flops - diag.flops;
    ring.modelFlops = att.modelFlops - diag.modelFlops;
    ring.bytes = att.bytes - diag.bytes;
    ops.push_back(ring);
    const RingAttentionStyle ringStyle = ringAttentionStyleOf(plan);
    const kernel_cost::RingMerge style = ringStyle.merge;
    // The merged output is o wide; K and V travel together (their mean width: MLA's differ).
    const double eq = d(s.tokens) * d(s.oDimLocal);
    const double ekv = ringStyle.kvAtQueryHeads ? 0.5 * d(s.tokens) * d(s.qDimLocal + s.oDimLocal)
                                                : 0.5 * d(s.tokens) * d(s.kvDimLocal + s.vDimLocal);
    OpCost merge = memoryOp("attention_ring_merge", "ring_merge", kernel_cost::ringMergeForwardBytes(style, eq, ekv, cp, e));
    merge.backwardByteFactor = kernel_cost::ringMergeBackwardBytes(style, eq, ekv, cp, e) / merge.bytes;
    ops.push_back(merge);
}

// Context parallelism's other exchanges (Transformer Engine's other cp_comm_types, FORMULAS.md §3.2).
// A2a (AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses): after the all-to-all each rank holds the whole sequence for
// heads / cp of its heads, so attention is one causal kernel over s queries and s keys, the same FLOPs as the
// rank's causal share; around the four all-to-alls of a pass (q, k, v and the output forward; the output's
// gradient and dq, dk, dv backward) each tensor is made contiguous with its heads split off before the exchange and
// its sequence chunks put back in order after it: two copies, read and written, of q, k, v and o each way.
// AllGather (AttnFuncWithCPAndKVAllGather): K and V are gathered whole, so the rank's two query chunks each run one
// kernel against the keys before them, which is one causal kernel over s/cp queries and s keys; the local K and V
// are made contiguous before the gather and the gathered ones reordered after it, and backward gathers again and
// zeroes dK and dV at the full length before their reduce-scatter.
// a2a+p2p (Megatron-core's hierarchical CP, Transformer Engine's AttnFuncWithCPAndKVP2P over its a2a group): the
// all-to-all over a = cp_a2a_size ranks leaves each rank s a / cp queries for heads / a of its heads, which then run
// the ring over cp / a groups: addRingAttention at those shapes, with the all-to-all's copies beside it.
void addCpAttention(std::vector<OpCost>& ops, const OpCost& att, const LocalShapes& s, const Plan& plan, int e) {
    // q and o, and K and V, by their mean widths (equal without MLA).
    const double eq = 0.5 * d(s.tokens) * d(s.qDimLocal + s.oDimLocal), ekv = 0.5 * d(s.tokens) * d(s.kvDimLocal + s.vDimLocal);
    if (plan.cpComm == CpComm::A2aP2p) {
        const int a = plan.cpHeadSplit();
        LocalShapes r = s;
        r.seqLocal = s.seqLocal * a;
        r.tokens = s.tokens * a;
        r.headsLocal = std::max<int64_t>(1, s.headsLocal / a);
        r.kvHeadsLocal = std::max<int64_t>(1, s.kvHeadsLocal / a);
        r.qDimLocal = s.qDimLocal / a;
        r.kvDimLocal = s.kvDimLocal / a;
        r.vDimLocal = s.vDimLocal / a;
        r.oDimLocal = s.oDimLocal / a;
        Plan ring = plan;
        ring.cp = plan.cpRing();
        OpCost share = att;
        share.m = r.seqLocal;
        share.batch = s.microBatch * r.headsLocal;
        share.kvHeads = r.kvHeadsLocal;
        addRingAttention(ops, share, r, ring, e);
    }
    if (plan.cpComm == CpComm::A2a || plan.cpComm == CpComm::A2aP2p) {
        if (plan.cpComm == CpComm::A2a) {
            OpCost heads = att;
            heads.name = "attention_core_flash_a2a";
            heads.m = s.seqFull;
            heads.batch = s.microBatch * std::max<int64_t>(1, s.headsLocal / plan.cp);
            heads.kvHeads = std::max<int64_t>(1, s.kvHeadsLocal / plan.cp);
            ops.push_back(heads);
        }
        OpCost copies = memoryOp("attention_a2a_copies", "permute", 2.0 * 2.0 * e * (2.0 * eq + 2.0 * ekv));
        copies.backwardByteFactor = 1.0; // the output's gradient in, dq, dk, dv out: the same tensors
        copies.hasWeights = false;       // part of the attention core selective recompute reruns
        ops.push_back(copies);
        return;
    }
    ops.push_back(att);
    const double gathered = ekv * d(plan.cp);
    OpCost copies = memoryOp("attention_kv_gather_copies", "permute", 2.0 * e * (2.0 * ekv + 2.0 * gathered));
    copies.backwardByteFactor = (2.0 * e * (2.0 * ekv + 2.0 * gathered) + e * 2.0 * gathered) / copies.bytes;
    copies.hasWeights = false;
    ops.push_back(copies);
}

} // namespace tessel::compute_detail
