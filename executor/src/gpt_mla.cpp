// Multi-head latent attention (DeepSeek-V2/V3) forward and backward of one layer, as Megatron-core's MLASelfAttention
// splits it over TP: down projections replicated, their latents gathered to T rows, up projections by heads.
#include "gpt_impl.hpp"

#include <utility>
#include <vector>

namespace tessel::exec {

namespace {
using namespace detail;
} // namespace

void GptModel::Impl::latentNormForward(const Tensor& x, int w, int b, Tensor& y, Tensor& mean, Tensor& rstd,
                                       MemoryCategory cat) {
    const int64_t width = x.dim(1);
    y = be.empty(x.shape(), cat);
    mean = be.empty({x.dim(0)}, cat);
    rstd = be.empty({x.dim(0)}, cat);
    be.normForward(x, W(w).view({width}), b >= 0 ? W(b).view({width}) : Tensor(), rms, kNormEps, y, mean, rstd);
}

Tensor GptModel::Impl::latentNormBackward(const Tensor& dy, const Tensor& x, int w, int b, const Tensor& mean,
                                          const Tensor& rstd) {
    const int64_t width = x.dim(1);
    Tensor dx = be.empty(x.shape(), kBuf);
    Tensor dg = be.zeros({1, width}, kBuf);
    Tensor db = b >= 0 ? be.zeros({1, width}, kBuf) : Tensor();
    Tensor dgv = dg.view({width}), dbv = b >= 0 ? db.view({width}) : Tensor();
    be.normBackward(dy, x, W(w).view({width}), mean, rstd, rms, dx, dgv, dbv);
    for (auto [param, grad] : {std::pair{w, dg}, std::pair{b, db}}) {
        if (param < 0) continue;
        if (ctx.tp.size() > 1) ctx.comm->allReduce(grad, ctx.tp); // dy held this rank's heads' share
        be.add(grad, G(param));
    }
    return dx;
}

Tensor GptModel::Impl::widenHeads(const Tensor& x, int64_t w, int64_t at, MemoryCategory cat) {
    const int64_t rows = x.dim(0) * aL;
    Tensor y = be.zeros({x.dim(0), aL * d}, cat);                             // [T, aL d]
    Tensor yv = y.view({rows, d});
    be.addColumnsInto(x.view({rows, w}), yv, at);
    return y;
}

Tensor GptModel::Impl::narrowHeads(const Tensor& x, int64_t w, int64_t at, MemoryCategory cat) {
    const int64_t rows = x.dim(0) * aL;
    Tensor y = be.empty({x.dim(0), aL * w}, cat);                             // [T, aL w]
    Tensor yv = y.view({rows, w});
    be.copyColumns(x.view({rows, d}), at, yv);
    return y;
}

void GptModel::Impl::mlaForward(const LayerParams& L, LayerActs& a, const ChunkActs& acts, MemoryCategory cat) {
    // A down projection runs on this rank's rows (its sequence-parallel share) with the weight every TP rank holds,
    // and its latent is gathered to T rows (Megatron-core: gather_from_sequence_parallel_region after
    // linear_q_down_proj and linear_kv_down_proj).
    auto down = [&](int w, MemoryCategory out) {
        if (!sp) return linear(a.n1, w, -1, out);                             // [T, width]
        Tensor mine = linear(a.n1, w, -1, kBuf);                              // [Tl, width]
        return gatherSeq(mine, out);                                          // [T, width]
    };
    if (qLora > 0) a.cq = down(L.qDown, cat);                                 // [T, qLora]
    Tensor ckvAll = down(L.kvDown, kBuf);                                     // [T, kvLora + dRope]
    a.ckv = be.empty({T, kvLora}, cat);                                       // [T, kvLora]
    be.copyColumns(ckvAll, 0, a.ckv);
    // The heads' one rotary key before RoPE: mla_up_proj keeps it as its checkpoint's input (Megatron-core's k_pos_emb).
    const bool drops = recomputeMlaUpProj && cat == kAct;
    Tensor kr = be.empty({T, dRope}, drops ? kAct : kBuf);                    // [T, dRope]
    be.copyColumns(ckvAll, kvLora, kr);
    if (drops) a.kr = kr;
    mlaUpProjections(L, a, kr, dropped(recomputeMlaUpProj, cat));
    // Attention over d-wide heads, v padded with zero columns; with CP over every position's keys, K and V
    // all-gathered (the executor's p2p exchange), or the heads traded for the positions (a2a, a2a+p2p; v padded
    // before the exchange).
    const bool padded = dV != d;
    if (cpA2a) {
        Tensor vPad = padded ? widenHeads(a.v, dV, 0, kBuf) : a.v;            // [T, aL d]
        Tensor oPad = attentionA2aForward(a.q, a.k, vPad, scoreRule(L, acts), a.lse, padded ? kBuf : cat);
        a.o = padded ? narrowHeads(oPad, dV, 0, cat) : oPad;                  // [T, aL dV]
    } else {
        const int64_t S = sequences * seqLen;                                 // keys: T without CP
        Tensor kAll = cpGather(a.k);                                          // [S, aL d]
        Tensor vAll = cpGather(a.v);                                          // [S, aL dV]
        Tensor vPad = padded ? widenHeads(vAll, dV, 0, kBuf) : vAll;          // [S, aL d]
        Tensor oPad = be.empty({T, aL * d}, padded ? kBuf : cat);             // [T, aL d]
        a.lse = be.empty({T, aL}, cat);                                       // [T, aL]
        Tensor ov = oPad.view({T, aL, d});
        be.attentionForward(a.q.view({T, aL, d}), kAll.view({S, aL, d}), vPad.view({S, aL, d}), sequences,
                            tokenPositions(sLocal, 0), allPositions(), ov, a.lse, scoreRule(L, acts));
        a.o = padded ? narrowHeads(oPad, dV, 0, cat) : oPad;                  // [T, aL dV]
    }
    if (drops) a.cqn = a.meancq = a.rstdcq = a.ckvn = a.meanckv = a.rstdckv = a.q = a.k = a.v = Tensor();
}

void GptModel::Impl::mlaUpProjections(const LayerParams& L, LayerActs& a, const Tensor& krIn, MemoryCategory cat) {
    const std::vector<int64_t> pos = tokenPositions(T, 0);
    if (qLora > 0) {
        latentNormForward(a.cq, L.qLatentNormW, L.qLatentNormB, a.cqn, a.meancq, a.rstdcq, cat);
        a.q = linear(a.cqn, L.q, -1, cat);                                    // [T, aL d]
    } else {
        Tensor n1f = gatherSeq(a.n1, kBuf);                                   // [T, h]
        a.q = linear(n1f, L.q, -1, cat);                                      // [T, aL d]
    }
    latentNormForward(a.ckv, L.kvLatentNormW, L.kvLatentNormB, a.ckvn, a.meanckv, a.rstdckv, cat);
    Tensor kvUp = linear(a.ckvn, L.kvUp, -1, kBuf);                           // [T, aL (dNope + dV)]: per head [k | v]
    Tensor kvUpHeads = kvUp.view({T * aL, dNope + dV});
    Tensor kn = be.empty({T, aL * dNope}, kBuf);                              // [T, aL dNope]
    Tensor knv = kn.view({T * aL, dNope});
    be.copyColumns(kvUpHeads, 0, knv);
    a.v = be.empty({T, aL * dV}, cat);                                        // [T, aL dV]
    Tensor vv = a.v.view({T * aL, dV});
    be.copyColumns(kvUpHeads, dNope, vv);
    // RoPE on each head's first dRope columns of q and on the shared key; k = [rotary key | its head's position-free
    // part].
    Tensor qv = a.q.view({T, aL, d});
    be.rope(qv, pos, kRopeBase, dRope, false);
    Tensor kr = be.empty({T, dRope}, kBuf);                                   // [T, dRope]
    be.copy(krIn, kr);
    Tensor krv = kr.view({T, 1, dRope});
    be.rope(krv, pos, kRopeBase, dRope, false);
    a.k = widenHeads(kn, dNope, dRope, cat);                                  // [T, aL d]
    for (int64_t j = 0; j < aL; ++j) be.addColumnsInto(kr, a.k, j * d);
}

void GptModel::Impl::rebuildMla(const LayerParams& L, LayerActs& a) {
    if (!a.n1.defined()) normForward(a.x, L.ln1w, L.ln1b, a.n1, a.mean1, a.rstd1, kBuf); // layernorm: [Tl, h]
    if (!a.q.defined()) mlaUpProjections(L, a, a.kr, kBuf);                   // mla_up_proj
}

Tensor GptModel::Impl::mlaBackward(const LayerParams& L, const LayerActs& a, ChunkActs& acts, const Tensor& dO,
                                   bool defer) {
    const std::vector<int64_t> pos = tokenPositions(T, 0);
    const bool padded = dV != d;
    Tensor dOPad = padded ? widenHeads(dO, dV, 0, kBuf) : dO;                // [T, aL d]
    Tensor oPad = padded ? widenHeads(a.o, dV, 0, kBuf) : a.o;               // [T, aL d]
    Tensor dq, dk, dvMine;                                                    // [T, aL d] x2, [T, aL dV]
    if (cpA2a) {
        Tensor vPad = padded ? widenHeads(a.v, dV, 0, kBuf) : a.v;            // [T, aL d]
        Tensor dvPad;                                                         // [T, aL d]
        attentionA2aBackward(a.q, a.k, vPad, oPad, a.lse, scoreRule(L, acts), dOPad, dq, dk, dvPad);
        dvMine = padded ? narrowHeads(dvPad, dV, 0, kBuf) : dvPad;
    } else {
        const int64_t S = sequences * seqLen;                                 // keys: T without CP
        Tensor kAll = cpGather(a.k);                                          // [S, aL d] re-gathered over CP
        Tensor vAll = cpGather(a.v);                                          // [S, aL dV]
        Tensor vPad = padded ? widenHeads(vAll, dV, 0, kBuf) : vAll;          // [S, aL d]
        dq = be.empty({T, aL * d}, kBuf);
        Tensor dkAll = be.zeros({S, aL * d}, kBuf);                           // [S, aL d] accumulated
        Tensor dvPad = be.zeros({S, aL * d}, kBuf);                           // [S, aL d] accumulated
        Tensor dqAll = dq.view({T, aL, d}), dkv = dkAll.view({S, aL, d}), dvv = dvPad.view({S, aL, d});
        be.attentionBackward(dOPad.view({T, aL, d}), a.q.view({T, aL, d}), kAll.view({S, aL, d}),
                             vPad.view({S, aL, d}), oPad.view({T, aL, d}), a.lse, sequences, tokenPositions(sLocal, 0),
                             allPositions(), dqAll, dkv, dvv, scoreRule(L, acts));
        dk = cpReduce(dkAll);                                                 // [T, aL d] this rank's keys
        Tensor dvAll = padded ? narrowHeads(dvPad, dV, 0, kBuf) : dvPad;      // [S, aL dV]
        dvMine = cpReduce(dvAll);                                             // [T, aL dV]
    }
    Tensor dqv = dq.view({T, aL, d});
    // The shared rotary key's gradient, summed over this rank's heads (and over TP with its latent's, below).
    Tensor dkr = be.zeros({T, dRope}, kBuf);                                     // [T, dRope]
    Tensor oneHead = be.empty({T, dRope}, kBuf);
    for (int64_t j = 0; j < aL; ++j) {
        be.copyColumns(dk, j * d, oneHead);
        be.add(oneHead, dkr);
    }
    Tensor dkrv = dkr.view({T, 1, dRope});
    be.rope(dkrv, pos, kRopeBase, dRope, true);
    be.rope(dqv, pos, kRopeBase, dRope, true);
    // The key/value up projection's output gradient, per head [k's position-free part | v].
    Tensor dKvUp = be.zeros({T, aL * (dNope + dV)}, kBuf);                       // [T, aL (dNope + dV)]
    Tensor dKvUpHeads = dKvUp.view({T * aL, dNope + dV});
    Tensor dkn = narrowHeads(dk, dNope, dRope, kBuf);                               // [T, aL dNope]
    be.addColumnsInto(dkn.view({T * aL, dNope}), dKvUpHeads, 0);
    be.addColumnsInto(dvMine.view({T * aL, dV}), dKvUpHeads, dNope);
    Tensor dckvn = be.empty({T, kvLora}, kBuf);                               // [T, kvLora] partial over TP
    be.gemm(false, true, 1.0, dKvUp, W(L.kvUp), 0.0, dckvn);
    weightGrad(acts, a.ckvn, dKvUp, L.kvUp, false, defer);
    Tensor dckv = latentNormBackward(dckvn, a.ckv, L.kvLatentNormW, L.kvLatentNormB, a.meanckv, a.rstdckv);
    Tensor dckvAll = be.zeros({T, kvLora + dRope}, kBuf);                        // [T, kvLora + dRope] partial over TP
    be.addColumnsInto(dckv, dckvAll, 0);
    be.addColumnsInto(dkr, dckvAll, kvLora);
    // A down projection's backward: the latent's gradient summed over TP (reduce-scattered to this rank's rows with
    // SP), then dn1 and the replicated weight's gradient (summed over TP where the ranks' rows differ).
    auto downBackward = [&](int w, Tensor& latentPartial) {
        Tensor dl = reduceSeq(latentPartial);                                 // [Tl, width]
        Tensor dn1 = be.empty({Tl, h}, kBuf);                                 // [Tl, h]
        be.gemm(false, true, 1.0, dl, W(w), 0.0, dn1);
        if (sp) {
            Tensor dw = be.zeros(W(w).shape(), kBuf);                         // [h, width] = n1^T dl
            be.gemm(true, false, 1.0, a.n1, dl, 0.0, dw);
            addReplicatedGrad(w, dw);
        } else {
            weightGrad(acts, a.n1, dl, w, false, defer);
        }
        return dn1;
    };
    Tensor dn1 = downBackward(L.kvDown, dckvAll);                             // [Tl, h]
    if (qLora > 0) {
        Tensor dcqn = be.empty({T, qLora}, kBuf);                             // [T, qLora] partial over TP
        be.gemm(false, true, 1.0, dq, W(L.q), 0.0, dcqn);
        weightGrad(acts, a.cqn, dq, L.q, false, defer);
        Tensor dcq = latentNormBackward(dcqn, a.cq, L.qLatentNormW, L.qLatentNormB, a.meancq, a.rstdcq);
        be.add(downBackward(L.qDown, dcq), dn1);
    } else {
        Tensor n1f = gatherSeq(a.n1, kBuf);                                   // [T, h] re-gathered for dW
        Tensor dn1f = be.empty({T, h}, kBuf);                                 // [T, h] partial over TP
        be.gemm(false, true, 1.0, dq, W(L.q), 0.0, dn1f);
        weightGrad(acts, n1f, dq, L.q, false, defer);
        be.add(reduceSeq(dn1f), dn1);
    }
    return dn1;
}

} // namespace tessel::exec
