// GPT forward and backward of this rank's chunks: layers, embedding, LM head (tensor shapes: gpt_impl.hpp).
#include "tessel/exec/gpt.hpp"

#include "gpt_impl.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::exec {

namespace {
using namespace detail;
} // namespace

// ---- tensor-parallel communication (Megatron's f and g operators; Korthikanti's SP variants) ----
Tensor GptModel::Impl::gatherSeq(const Tensor& x, MemoryCategory cat) {
    if (!sp) return x;
    Tensor out = be.empty({T, x.dim(1)}, cat);
    ctx.comm->allGather(x, out, ctx.tp);
    return out;
}

Tensor GptModel::Impl::reduceSeq(Tensor& partial) {
    if (ctx.tp.size() == 1) return partial;
    if (!sp) {
        ctx.comm->allReduce(partial, ctx.tp);
        return partial;
    }
    Tensor out = be.empty({Tl, partial.dim(1)}, kBuf);
    ctx.comm->reduceScatter(partial, out, ctx.tp);
    return out;
}

void GptModel::Impl::addReplicatedGrad(int param, Tensor& partial) {
    if (sp && ctx.tp.size() > 1) ctx.comm->allReduce(partial, ctx.tp);
    be.add(partial, G(param));
}

Tensor GptModel::Impl::retain(const Tensor& t) {
    if (t.category() == kAct) return t;
    Tensor kept = be.empty(t.shape(), kAct);
    be.copy(t, kept);
    return kept;
}

void GptModel::Impl::weightGrad(ChunkActs& acts, const Tensor& x, const Tensor& dy, int param,
                                bool transposed, bool defer) {
    if (defer) {
        acts.pending.push_back({retain(x), retain(dy), param, transposed});
        return;
    }
    if (transposed) be.gemm(true, false, 1.0, dy, x, 1.0, G(param)); // W [out, in]: dW += dY^T X
    else be.gemm(true, false, 1.0, x, dy, 1.0, G(param));             // W [in, out]: dW += X^T dY
}

void GptModel::Impl::biasGrad(int param, const Tensor& dy) {
    if (param < 0) return;
    Tensor db = be.zeros({1, dy.dim(1)}, kBuf);
    be.biasGrad(dy, db);
    be.add(db, G(param));
}

void GptModel::Impl::replicatedBiasGrad(int param, const Tensor& dy) {
    if (param < 0) return;
    Tensor db = be.zeros({1, dy.dim(1)}, kBuf);
    be.biasGrad(dy, db);
    addReplicatedGrad(param, db);
}

Tensor GptModel::Impl::linear(const Tensor& x, int w, int b, MemoryCategory cat) {
    Tensor y = be.empty({x.dim(0), W(w).dim(1)}, cat); // y [n, out] = x [n, in] W [in, out]
    be.gemm(false, false, 1.0, x, W(w), 0.0, y);
    if (b >= 0) be.addBias(y, W(b).view({W(b).numel()}));
    return y;
}

std::vector<int64_t> GptModel::Impl::allPositions() const {
    std::vector<int64_t> pos(static_cast<size_t>(seqLen));
    for (int64_t i = 0; i < seqLen; ++i) pos[static_cast<size_t>(i)] = i;
    return pos;
}

std::vector<int64_t> GptModel::Impl::tokenPositions(int64_t rows, int64_t firstRow) const {
    std::vector<int64_t> pos(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) pos[static_cast<size_t>(i)] = localPos[static_cast<size_t>((firstRow + i) % sLocal)];
    return pos;
}

std::vector<int32_t> GptModel::Impl::localRows(const std::vector<int32_t>& full) const {
    if (cp == 1) return full;
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(T));
    for (int64_t i = 0; i < sequences; ++i)
        for (int64_t p : localPos) out.push_back(full[static_cast<size_t>(i * seqLen + p)]);
    return out;
}

void GptModel::Impl::normForward(const Tensor& x, int w, int b, Tensor& y, Tensor& mean, Tensor& rstd,
                                 MemoryCategory cat) {
    y = be.empty(x.shape(), cat);
    mean = be.empty({x.dim(0)}, cat);
    rstd = be.empty({x.dim(0)}, cat);
    be.normForward(x, W(w).view({h}), b >= 0 ? W(b).view({h}) : Tensor(), rms, kNormEps, y, mean, rstd);
}

Tensor GptModel::Impl::headNormForward(const Tensor& x, int64_t heads, int w, int b, Tensor& mean, Tensor& rstd,
                                       MemoryCategory cat) {
    const int64_t rows = x.dim(0) * heads;
    Tensor y = be.empty(x.shape(), cat);
    mean = be.empty({rows}, cat);
    rstd = be.empty({rows}, cat);
    Tensor yv = y.view({rows, d});
    be.normForward(x.view({rows, d}), W(w).view({d}), b >= 0 ? W(b).view({d}) : Tensor(), rms, kNormEps, yv, mean, rstd);
    return y;
}

Tensor GptModel::Impl::headNormBackward(const Tensor& dy, const Tensor& x, int64_t heads, int w, int b,
                                        const Tensor& mean, const Tensor& rstd) {
    const int64_t rows = x.dim(0) * heads;
    Tensor dx = be.empty(x.shape(), kBuf);
    Tensor dxv = dx.view({rows, d});
    Tensor dg = be.zeros({1, d}, kBuf);
    Tensor db = b >= 0 ? be.zeros({1, d}, kBuf) : Tensor();
    Tensor dgv = dg.view({d}), dbv = b >= 0 ? db.view({d}) : Tensor();
    be.normBackward(dy.view({rows, d}), x.view({rows, d}), W(w).view({d}), mean, rstd, rms, dxv, dgv, dbv);
    for (auto [param, grad] : {std::pair{w, dg}, std::pair{b, db}}) {
        if (param < 0) continue;
        if (ctx.tp.size() > 1) ctx.comm->allReduce(grad, ctx.tp); // this rank's heads' share
        be.add(grad, G(param));
    }
    return dx;
}

Tensor GptModel::Impl::keptInputNorm(const Tensor& x, int w, int b, Tensor& kept, Tensor& mean, Tensor& rstd,
                                     MemoryCategory cat) {
    kept = be.empty(x.shape(), cat);                                          // the norm's input, for backward
    be.copy(x, kept);
    mean = be.empty({x.dim(0)}, cat);
    rstd = be.empty({x.dim(0)}, cat);
    Tensor y = be.empty(x.shape(), kBuf);                                     // added into the residual stream
    be.normForward(kept, W(w).view({h}), b >= 0 ? W(b).view({h}) : Tensor(), rms, kNormEps, y, mean, rstd);
    return y;
}

Tensor GptModel::Impl::normBackward(const Tensor& dy, const Tensor& x, int w, int b, const Tensor& mean,
                                    const Tensor& rstd) {
    Tensor dx = be.empty(x.shape(), kBuf);
    Tensor dg = be.zeros({h}, kBuf);
    Tensor db = b >= 0 ? be.zeros({h}, kBuf) : Tensor();
    be.normBackward(dy, x, W(w).view({h}), mean, rstd, rms, dx, dg, db);
    Tensor dg2 = dg.view({1, h});
    addReplicatedGrad(w, dg2);
    if (b >= 0) {
        Tensor db2 = db.view({1, h});
        addReplicatedGrad(b, db2);
    }
    return dx;
}

// ---- the dense MLP block ----
void GptModel::Impl::mlpActivations(int fc1, int fc1b, int64_t fl, const Tensor& n2, Tensor& h1, Tensor& act,
                                     MemoryCategory cat) {
    Tensor n2f = gatherSeq(n2, kBuf);                                         // [T, h]
    h1 = linear(n2f, fc1, fc1b, cat);                                         // [T, fl or 2 fl]
    act = be.empty({T, fl}, cat);                                             // [T, fl]
    if (gated) be.gluForward(h1, act, mlpAct);
    else be.activationForward(h1, act, mlpAct);
}

Tensor GptModel::Impl::mlpForward(int fc1, int fc1b, int fc2, int64_t fl, const Tensor& n2, Tensor& h1, Tensor& act,
                                  MemoryCategory cat, bool reduce) {
    mlpActivations(fc1, fc1b, fl, n2, h1, act, cat);
    Tensor partial = linear(act, fc2, -1, kBuf);                              // [T, h] partial over TP
    return reduce ? reduceSeq(partial) : partial;                             // [Tl, h], or [T, h] unreduced
}

void GptModel::Impl::dropMlp(LayerActs& a, MemoryCategory cat) const {
    if (mlpCategory(cat) == cat) return;
    a.n2 = a.mean2 = a.rstd2 = a.h1 = a.a = Tensor();
}

void GptModel::Impl::rebuildMlp(const LayerParams& L, LayerActs& a) {
    if (a.h1.defined()) return;                                               // kept: nothing to rebuild
    normForward(parallel ? a.x : a.x2, L.ln2w, L.ln2b, a.n2, a.mean2, a.rstd2, kBuf); // [Tl, h]
    mlpActivations(L.fc1, L.fc1b, fL, a.n2, a.h1, a.a, kBuf);                 // [T, fl or 2 fl], [T, fl]
}

void GptModel::Impl::rebuildMoe(const LayerParams& L, LayerActs& a, ChunkActs& acts) {
    if (!a.n2.defined()) normForward(a.x2, L.ln2w, L.ln2b, a.n2, a.mean2, a.rstd2, kBuf); // layernorm: [Tl, h]
    if (!a.moe.out.defined()) moeForward(L, a.n2, a, acts, kBuf);            // moe: the block again, collectives too
    for (size_t le = 0; le < a.moe.ae.size(); ++le) {                         // moe_act: each expert's activation
        if (a.moe.ae[le].defined() || !a.moe.h1e[le].defined()) continue;
        Tensor act = be.empty({a.moe.h1e[le].dim(0), expertFl}, kBuf);
        if (gated) be.gluForward(a.moe.h1e[le], act, mlpAct);
        else be.activationForward(a.moe.h1e[le], act, mlpAct);
        a.moe.ae[le] = act;
    }
    if (L.sharedFc1 >= 0 && !a.sh1.defined())                                 // shared_experts
        mlpActivations(L.sharedFc1, L.sharedFc1b, sharedFl, a.n2, a.sh1, a.sa, kBuf);
}

Tensor GptModel::Impl::mlpBackward(int fc1, int fc1b, int fc2, int64_t fl, const Tensor& dy, const Tensor& n2,
                                   const Tensor& h1, const Tensor& act, ChunkActs& acts, bool defer,
                                   const Tensor& dyGathered) {
    Tensor dp2 = dyGathered.defined() ? dyGathered : gatherSeq(dy, kBuf);    // [T, h]
    Tensor da = be.empty({T, fl}, kBuf);                                      // [T, fl] = dp2 W2^T
    be.gemm(false, true, 1.0, dp2, W(fc2), 0.0, da);
    weightGrad(acts, act, dp2, fc2, false, defer);
    Tensor dh1 = be.empty(h1.shape(), kBuf);                                  // [T, fl or 2 fl]
    if (gated) be.gluBackward(da, h1, dh1, mlpAct);
    else be.activationBackward(da, h1, dh1, mlpAct);
    biasGrad(fc1b, dh1);
    Tensor n2f = gatherSeq(n2, kBuf);                                         // [T, h] re-gathered for dW
    Tensor dn2f = be.empty({T, h}, kBuf);                                     // [T, h] partial
    be.gemm(false, true, 1.0, dh1, W(fc1), 0.0, dn2f);
    weightGrad(acts, n2f, dh1, fc1, false, defer);
    return reduceSeq(dn2f);                                                   // [Tl, h]
}

ScoreRule GptModel::Impl::scoreRule(const LayerParams& L, const ChunkActs& acts) const {
    ScoreRule r;
    r.softcap = model.attentionSoftcap;
    if (model.isWindowedLayer(L.layer)) r.window = model.slidingWindow;
    if (model.position == PositionEmbedding::Alibi) r.alibiHeads = model.heads;
    r.headOffset = static_cast<int64_t>(ctx.tp.myIndex) * aL; // TP rank t holds heads [t aL, (t + 1) aL)
    if (cpA2a) // and member i of the all-to-all group their i-th block
        r.headOffset += static_cast<int64_t>(cpHeadsGroup().myIndex) * (aL / cpHeadsGroup().size());
    r.dropout = dropoutRule(acts, L.layer, DropoutSite::Attention);
    r.firstSequence = acts.firstSequence;
    return r;
}

void GptModel::Impl::hiddenDropout(Tensor& x, const ChunkActs& acts, int layer, DropoutSite site) {
    if (dropout <= 0.0) return;
    const int64_t rows = x.dim(0), firstRow = sp ? ctx.tp.myIndex * Tl : 0; // rows are (sequence, position) ordered
    std::vector<int64_t> sequence(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) sequence[static_cast<size_t>(r)] = acts.firstSequence + (firstRow + r) / sLocal;
    be.dropout(x, dropoutRule(acts, layer, site), sequence, tokenPositions(rows, firstRow));
}

Tensor GptModel::Impl::hiddenDropoutBackward(const Tensor& dy, const ChunkActs& acts, int layer, DropoutSite site) {
    if (dropout <= 0.0) return dy;
    Tensor masked = be.empty(dy.shape(), kBuf);
    be.copy(dy, masked);
    hiddenDropout(masked, acts, layer, site);
    return masked;
}

// ---- one transformer layer ----
Tensor GptModel::Impl::layerForward(const LayerParams& L, const Tensor& x, LayerActs& a, ChunkActs& acts,
                                    MemoryCategory cat) {
    a.x = x;                                                                  // [Tl, h]
    normForward(x, L.ln1w, L.ln1b, a.n1, a.mean1, a.rstd1, dropped(recomputeMlaNorm, cat)); // [Tl, h]
    if (mla) {
        mlaForward(L, a, acts, cat);                                          // q, k, v, o [T, oL], lse
        if (recomputeMlaNorm && cat == kAct) a.n1 = a.mean1 = a.rstd1 = Tensor(); // layernorm: rebuilt in backward
        return attentionOutputForward(L, x, a, acts, cat);
    }
    Tensor n1f = gatherSeq(a.n1, kBuf);                                       // [T, h]
    a.q = linear(n1f, L.q, L.qb, cat);                                        // [T, qL]
    a.k = linear(n1f, L.k, L.kb, cat);                                        // [T, kvL]
    a.v = linear(n1f, L.v, L.vb, cat);                                        // [T, kvL]
    if (qkNorm) {                                                             // each head of q and k, before RoPE
        a.qIn = a.q;
        a.kIn = a.k;
        a.q = headNormForward(a.qIn, aL, L.qnw, L.qnb, a.meanq, a.rstdq, cat);   // [T, qL]
        a.k = headNormForward(a.kIn, kvhL, L.knw, L.knb, a.meank, a.rstdk, cat); // [T, kvL]
    }
    const std::vector<int64_t> pos = tokenPositions(T, 0);
    if (rope) {
        Tensor qv = a.q.view({T, aL, d}), kv = a.k.view({T, kvhL, d});
        be.rope(qv, pos, kRopeBase, ropeDim, false);
        be.rope(kv, pos, kRopeBase, ropeDim, false);
    }
    if (cpA2a) {
        a.o = attentionA2aForward(a.q, a.k, a.v, scoreRule(L, acts), a.lse, cat);
    } else {
        a.o = be.empty({T, qL}, cat);                                         // [T, qL]
        a.lse = be.empty({T, aL}, cat);                                       // [T, aL]
        const std::vector<int64_t> seqPos = tokenPositions(sLocal, 0);        // queries: this rank's positions
        const std::vector<int64_t> keyPos = allPositions();                   // keys: every position
        const int64_t S = sequences * seqLen;
        Tensor kAll = cpGather(a.k), vAll = cpGather(a.v);                    // [b s, kvL] with CP
        Tensor ov = a.o.view({T, aL, d});
        be.attentionForward(a.q.view({T, aL, d}), kAll.view({S, kvhL, d}), vAll.view({S, kvhL, d}), sequences,
                            seqPos, keyPos, ov, a.lse, scoreRule(L, acts));
    }
    return attentionOutputForward(L, x, a, acts, cat);
}

// The rest of the layer from the attention's output a.o [T, oL]: the output projection, the residuals and the MLP.
Tensor GptModel::Impl::attentionOutputForward(const LayerParams& L, const Tensor& x, LayerActs& a, ChunkActs& acts,
                                              MemoryCategory cat) {
    Tensor partial = linear(a.o, L.proj, -1, kBuf);                           // [T, h] partial over TP
    if (parallel) return parallelBlockForward(L, x, partial, a, acts, cat);
    Tensor y = reduceSeq(partial);                                            // [Tl, h]
    if (L.projb >= 0) be.addBias(y, W(L.projb).view({h}));
    if (postNorms) y = keptInputNorm(y, L.lnpaw, L.lnpab, a.ya, a.meanpa, a.rstdpa, cat); // [Tl, h]
    hiddenDropout(y, acts, L.layer, DropoutSite::AttentionOutput);
    a.x2 = be.empty({Tl, h}, cat);                                            // [Tl, h] x + attention
    be.copy(x, a.x2);
    be.add(y, a.x2);
    normForward(a.x2, L.ln2w, L.ln2b, a.n2, a.mean2, a.rstd2,
                L.moe ? dropped(recomputeMoeNorm, cat) : mlpCategory(cat));  // [Tl, h]
    Tensor y2;
    if (L.moe) {
        y2 = moeForward(L, a.n2, a, acts, dropped(recomputeMoe, cat));        // [Tl, h]
        if (L.sharedFc1 >= 0) {                                               // + shared experts over every token
            Tensor ys = mlpForward(L.sharedFc1, L.sharedFc1b, L.sharedFc2, sharedFl, a.n2, a.sh1, a.sa,
                                   dropped(recomputeMoe || recomputeShared, cat));
            if (L.sharedFc2b >= 0) be.addBias(ys, W(L.sharedFc2b).view({h}));
            be.add(ys, y2);
        }
        if (cat == kAct) {                                                    // the recompute modules' drops
            if (recomputeMoe) a.moe = MoeActs{};
            if (recomputeMoe || recomputeShared) a.sh1 = a.sa = Tensor();
            if (recomputeMoeNorm) a.n2 = a.mean2 = a.rstd2 = Tensor();
        }
    } else {
        y2 = mlpForward(L.fc1, L.fc1b, L.fc2, fL, a.n2, a.h1, a.a, mlpCategory(cat)); // [Tl, h]
        dropMlp(a, cat);
    }
    if (L.fc2b >= 0) be.addBias(y2, W(L.fc2b).view({h}));
    if (postNorms) y2 = keptInputNorm(y2, L.lnpmw, L.lnpmb, a.ym, a.meanpm, a.rstdpm, cat); // [Tl, h]
    hiddenDropout(y2, acts, L.layer, DropoutSite::MlpOutput);
    // The output is the next layer's input (kept for backward, also under full recompute) or the stage's
    // output: an activation either way.
    Tensor out = be.empty({Tl, h}, kAct);                                     // [Tl, h]
    be.copy(a.x2, out);
    be.add(y2, out);
    return out;
}

// A parallel block: out = x + g(attn(f(ln1(x))) Wproj) + g(act(f(ln2(x)) W1) W2), the two g one reduction of the
// summed partials where the framework sums first (GPT-NeoX's gpt_j_residual), each block's own otherwise.
Tensor GptModel::Impl::parallelBlockForward(const LayerParams& L, const Tensor& x, Tensor& attnPartial, LayerActs& a,
                                            const ChunkActs& acts, MemoryCategory cat) {
    const MemoryCategory mc = mlpCategory(cat);
    normForward(x, L.ln2w, L.ln2b, a.n2, a.mean2, a.rstd2, mc);              // [Tl, h] from the layer input
    Tensor y;
    if (reduceOnce) {
        Tensor mlpPartial = mlpForward(L.fc1, L.fc1b, L.fc2, fL, a.n2, a.h1, a.a, mc, false); // [T, h]
        be.add(attnPartial, mlpPartial);
        y = reduceSeq(mlpPartial);                                            // [Tl, h]
    } else {
        y = reduceSeq(attnPartial);                                           // [Tl, h]
        Tensor y2 = mlpForward(L.fc1, L.fc1b, L.fc2, fL, a.n2, a.h1, a.a, mc); // [Tl, h]
        be.add(y2, y);
    }
    dropMlp(a, cat);
    if (L.projb >= 0) be.addBias(y, W(L.projb).view({h}));
    if (L.fc2b >= 0) be.addBias(y, W(L.fc2b).view({h}));
    hiddenDropout(y, acts, L.layer, DropoutSite::MlpOutput);                  // one dropout on the summed blocks (NeoX)
    Tensor out = be.empty({Tl, h}, kAct);                                     // [Tl, h] the next layer's input
    be.copy(x, out);
    be.add(y, out);
    return out;
}

Tensor GptModel::Impl::layerBackward(const LayerParams& L, const Tensor& dout, LayerActs& a,
                                     ChunkActs& acts, bool defer) {
    // The block's output through its dropout (a parallel block's one, on the sum of both blocks).
    const Tensor dMlpOut = hiddenDropoutBackward(dout, acts, L.layer, DropoutSite::MlpOutput); // [Tl, h]
    // A parallel block: both blocks take dout; with one reduction forward, its gradient is gathered once (SP).
    const Tensor doutGathered = parallel && reduceOnce ? gatherSeq(dMlpOut, kBuf) : Tensor();
    // MLP block: out = x2 + dropout(g(act(f(n2) W1) W2)) (with post_norms, x2 + dropout(norm(that))).
    const Tensor dy2 = postNorms ? normBackward(dMlpOut, a.ym, L.lnpmw, L.lnpmb, a.meanpm, a.rstdpm) : dMlpOut; // [Tl, h]
    replicatedBiasGrad(L.fc2b, dy2);
    Tensor dn2;
    if (L.moe) {
        rebuildMoe(L, a, acts);                                               // recompute_modules moe, moe_act, ...
        dn2 = moeBackward(L, dy2, a.n2, a, acts, defer);                      // [Tl, h]
        if (L.sharedFc1 >= 0) {
            replicatedBiasGrad(L.sharedFc2b, dy2);
            Tensor ds = mlpBackward(L.sharedFc1, L.sharedFc1b, L.sharedFc2, sharedFl, dy2, a.n2, a.sh1, a.sa, acts, defer);
            be.add(ds, dn2);
        }
    } else {
        rebuildMlp(L, a);                                                     // recompute_modules mlp
        dn2 = mlpBackward(L.fc1, L.fc1b, L.fc2, fL, dy2, a.n2, a.h1, a.a, acts, defer, doutGathered); // [Tl, h]
    }
    // The attention block's output gradient: dx2 (sequential), or dout itself beside the MLP (parallel), whose
    // norm's input gradient joins the layer input's.
    Tensor dx2 = normBackward(dn2, parallel ? a.x : a.x2, L.ln2w, L.ln2b, a.mean2, a.rstd2); // [Tl, h]
    be.add(dout, dx2);                                                        // residual
    Tensor dAttn = parallel ? dMlpOut : hiddenDropoutBackward(dx2, acts, L.layer, DropoutSite::AttentionOutput);
    // Attention block: x2 = x + dropout(g(attn(f(n1)) Wproj)) (with post_norms, x + dropout(norm(that))).
    if (postNorms) dAttn = normBackward(dAttn, a.ya, L.lnpaw, L.lnpab, a.meanpa, a.rstdpa); // [Tl, h]
    replicatedBiasGrad(L.projb, dAttn);
    Tensor dpp = doutGathered.defined() ? doutGathered : gatherSeq(dAttn, kBuf); // [T, h]
    Tensor dO = be.empty({T, oL}, kBuf);                                      // [T, oL]
    be.gemm(false, true, 1.0, dpp, W(L.proj), 0.0, dO);
    weightGrad(acts, a.o, dpp, L.proj, false, defer);
    if (mla) {
        rebuildMla(L, a);                                                     // recompute_modules mla_up_proj, layernorm
        Tensor dn1 = mlaBackward(L, a, acts, dO, defer);                      // [Tl, h]
        Tensor dx = normBackward(dn1, a.x, L.ln1w, L.ln1b, a.mean1, a.rstd1); // [Tl, h]
        be.add(dx2, dx);                                                      // residual
        return dx;
    }
    Tensor dq, dk, dv;                                                        // [T, qL], [T, kvL] x2
    if (cpA2a) {
        attentionA2aBackward(a.q, a.k, a.v, a.o, a.lse, scoreRule(L, acts), dO, dq, dk, dv);
    } else {
        const int64_t S = sequences * seqLen;                                 // keys: T without CP
        dq = be.empty({T, qL}, kBuf);
        Tensor dkAll = be.zeros({S, kvL}, kBuf);                              // [S, kvL] accumulated
        Tensor dvAll = be.zeros({S, kvL}, kBuf);                              // [S, kvL] accumulated
        const std::vector<int64_t> seqPos = tokenPositions(sLocal, 0);
        const std::vector<int64_t> keyPos = allPositions();
        Tensor kAll = cpGather(a.k), vAll = cpGather(a.v);                    // re-gathered over CP
        Tensor dqv0 = dq.view({T, aL, d}), dkv0 = dkAll.view({S, kvhL, d}), dvv0 = dvAll.view({S, kvhL, d});
        be.attentionBackward(dO.view({T, aL, d}), a.q.view({T, aL, d}), kAll.view({S, kvhL, d}),
                             vAll.view({S, kvhL, d}), a.o.view({T, aL, d}), a.lse, sequences, seqPos, keyPos, dqv0,
                             dkv0, dvv0, scoreRule(L, acts));
        dk = cpReduce(dkAll);                                                 // [T, kvL] this rank's keys
        dv = cpReduce(dvAll);                                                 // [T, kvL]
    }
    Tensor dqv = dq.view({T, aL, d});
    Tensor dkv = dk.view({T, kvhL, d});
    if (rope) {
        const std::vector<int64_t> pos = tokenPositions(T, 0);
        be.rope(dqv, pos, kRopeBase, ropeDim, true);
        be.rope(dkv, pos, kRopeBase, ropeDim, true);
    }
    if (qkNorm) {
        dq = headNormBackward(dq, a.qIn, aL, L.qnw, L.qnb, a.meanq, a.rstdq);  // [T, qL]
        dk = headNormBackward(dk, a.kIn, kvhL, L.knw, L.knb, a.meank, a.rstdk); // [T, kvL]
    }
    biasGrad(L.qb, dq);
    biasGrad(L.kb, dk);
    biasGrad(L.vb, dv);
    Tensor n1f = gatherSeq(a.n1, kBuf);                                       // [T, h] re-gathered for dW
    Tensor dn1f = be.empty({T, h}, kBuf);                                     // [T, h] partial
    be.gemm(false, true, 1.0, dq, W(L.q), 0.0, dn1f);
    be.gemm(false, true, 1.0, dk, W(L.k), 1.0, dn1f);
    be.gemm(false, true, 1.0, dv, W(L.v), 1.0, dn1f);
    weightGrad(acts, n1f, dq, L.q, false, defer);
    weightGrad(acts, n1f, dk, L.k, false, defer);
    weightGrad(acts, n1f, dv, L.v, false, defer);
    Tensor dn1 = reduceSeq(dn1f);                                             // [Tl, h]
    Tensor dx = normBackward(dn1, a.x, L.ln1w, L.ln1b, a.mean1, a.rstd1);     // [Tl, h]
    be.add(dx2, dx);                                                          // residual
    return dx;
}

// ---- embedding (virtual stage 0) ----
Tensor GptModel::Impl::embed(const ChunkParams& c, ChunkActs& acts, const MicroBatchData& data) {
    acts.tokens = localRows(data.tokens);
    Tensor partial = be.empty({T, h}, kBuf);                                  // [T, h] this vocab shard's rows
    be.embeddingForward(acts.tokens, W(c.wte), vocabBegin, partial);
    Tensor x = reduceSeq(partial);                                            // [Tl, h]
    Tensor out = be.empty({Tl, h}, kAct);
    be.copy(x, out);
    if (embeddingScale != 1.0) be.scale(out, embeddingScale);                 // Gemma: x sqrt(hidden)
    if (c.wpe >= 0) {
        const int64_t firstRow = sp ? ctx.tp.myIndex * Tl : 0;
        acts.positions = tokenPositions(Tl, firstRow);
        std::vector<int32_t> pos(acts.positions.begin(), acts.positions.end());
        Tensor pe = be.empty({Tl, h}, kBuf);
        be.embeddingForward(pos, W(c.wpe), 0, pe);
        be.add(pe, out);
    }
    hiddenDropout(out, acts, 0, DropoutSite::Embedding);                      // Megatron-LM's embedding_dropout (before
                                                                              // the embedding norm: docs/decisions.md)
    if (c.lnew >= 0) {                                                        // BLOOM's norm over the embedding
        Tensor y = keptInputNorm(out, c.lnew, c.lneb, acts.embX, acts.meane, acts.rstde, kAct);
        be.copy(y, out);                                                      // [Tl, h] the first layer's input
    }
    return out;
}

void GptModel::Impl::embedBackward(const ChunkParams& c, ChunkActs& acts, const Tensor& dxOut) {
    const Tensor dxNorm = c.lnew >= 0 ? normBackward(dxOut, acts.embX, c.lnew, c.lneb, acts.meane, acts.rstde) : dxOut;
    const Tensor dx = hiddenDropoutBackward(dxNorm, acts, 0, DropoutSite::Embedding);
    if (c.wpe >= 0) {
        std::vector<int32_t> pos(acts.positions.begin(), acts.positions.end());
        Tensor dpe = be.zeros(W(c.wpe).shape(), kBuf);
        be.embeddingBackward(pos, dx, 0, dpe);
        addReplicatedGrad(c.wpe, dpe);
    }
    Tensor dfull = gatherSeq(dx, kBuf);                                       // [T, h]
    if (embeddingScale != 1.0) {                                              // the token rows' share of the scale
        Tensor scaled = be.empty(dfull.shape(), kBuf);
        be.copy(dfull, scaled);
        be.scale(scaled, embeddingScale);
        dfull = scaled;
    }
    be.embeddingBackward(acts.tokens, dfull, vocabBegin, G(c.wte));
}

// ---- LM head and vocab-parallel cross-entropy (last virtual stage) ----
void GptModel::Impl::head(const ChunkParams& c, ChunkActs& acts, const Tensor& x,
                          const MicroBatchData& data) {
    acts.headX = x;                                                           // [Tl, h]
    normForward(x, c.lnfw, c.lnfb, acts.nf, acts.meanf, acts.rstdf, kAct);
    Tensor nff = gatherSeq(acts.nf, kBuf);                                    // [T, h]
    acts.logits = be.empty({T, vocabLocal}, kAct);                            // [T, Vl] = nff W^T, W [Vl, h]
    be.gemm(false, true, 1.0, nff, W(c.lmHead), 0.0, acts.logits);
    if (model.logitSoftcap > 0.0) {                                           // Gemma 2: cap tanh(logits / cap)
        be.softcap(acts.logits, model.logitSoftcap);
        acts.cappedLogits = be.empty({T, vocabLocal}, kAct);                 // kept, before the padding's mask
        be.copy(acts.logits, acts.cappedLogits);
    }
    // Padding rows of the vocabulary (Megatron pads to a multiple of 128 x tp) are masked out of the
    // softmax so the model does not depend on the padding, and so on tp.
    const int64_t validLocal = std::clamp<int64_t>(model.vocab - vocabBegin, 0, vocabLocal);
    if (validLocal < vocabLocal) {
        Tensor mask = be.empty({T, vocabLocal - validLocal}, kBuf);
        be.fill(mask, -1e30);
        be.addColumnsInto(mask, acts.logits, validLocal);
    }
    acts.targets = localRows(data.targets);
    // Max over the whole vocabulary: every TP rank contributes its row maxima to its own slot of a
    // tp x T vector, summed over TP (a gather), then each rank takes the max (exact and identical bits).
    const std::vector<double> localMax = be.rowMax(acts.logits);
    std::vector<double> slots(static_cast<size_t>(T * ctx.tp.size()), 0.0);
    std::copy(localMax.begin(), localMax.end(), slots.begin() + ctx.tp.myIndex * T);
    const std::vector<double> all = ctx.tp.size() > 1 ? ctx.comm->allReduceHost(slots, ctx.tp) : slots;
    acts.max.assign(static_cast<size_t>(T), -std::numeric_limits<double>::infinity());
    for (int r = 0; r < ctx.tp.size(); ++r)
        for (int64_t i = 0; i < T; ++i)
            acts.max[static_cast<size_t>(i)] = std::max(acts.max[static_cast<size_t>(i)], all[static_cast<size_t>(r * T + i)]);
    acts.sumExp = be.rowSumExp(acts.logits, acts.max);
    std::vector<double> target = be.targetLogits(acts.logits, acts.targets, vocabBegin);
    if (ctx.tp.size() > 1) {
        acts.sumExp = ctx.comm->allReduceHost(acts.sumExp, ctx.tp);
        target = ctx.comm->allReduceHost(target, ctx.tp);
    }
    // loss_i = log sum_j exp(l_ij) - l_i,target = log(sumExp_i) + max_i - target_i.
    for (int64_t i = 0; i < T; ++i)
        lossSum += std::log(acts.sumExp[static_cast<size_t>(i)]) + acts.max[static_cast<size_t>(i)] -
                   target[static_cast<size_t>(i)];
}

Tensor GptModel::Impl::headBackward(const ChunkParams& c, ChunkActs& acts, bool defer) {
    be.crossEntropyBackward(acts.logits, acts.max, acts.sumExp, acts.targets, vocabBegin, lossScale); // [T, Vl]
    if (model.logitSoftcap > 0.0) be.softcapBackward(acts.logits, acts.cappedLogits, model.logitSoftcap);
    Tensor nff = gatherSeq(acts.nf, kBuf);                                    // [T, h]
    Tensor dnff = be.empty({T, h}, kBuf);                                     // [T, h] partial = dlogits W
    be.gemm(false, false, 1.0, acts.logits, W(c.lmHead), 0.0, dnff);
    weightGrad(acts, nff, acts.logits, c.lmHead, true, defer);
    Tensor dnf = reduceSeq(dnff);                                             // [Tl, h]
    Tensor dx = normBackward(dnf, acts.headX, c.lnfw, c.lnfb, acts.meanf, acts.rstdf);
    // The head's saved tensors go as its backward ends, before the last layer's backward rebuilds that layer
    // (PyTorch's autograd frees a node's saved tensors so; the cost model's last-stage moments, FORMULAS.md §2): the
    // logits, now their gradient (a deferred weight gradient keeps its own reference), the capped logits, the norm's
    // input, output and statistics.
    acts.logits = Tensor{};
    acts.cappedLogits = Tensor{};
    acts.headX = acts.nf = acts.meanf = acts.rstdf = Tensor{};
    return dx;
}

double GptModel::takeLossSum() {
    const double s = impl_->lossSum;
    impl_->lossSum = 0.0;
    return s;
}
size_t GptModel::liveActivationSets() const { return impl_->live.size(); }

Tensor GptModel::forward(int mb, int chunk, const Tensor& input, const MicroBatchData& data) {
    Impl& m = *impl_;
    const ChunkParams& c = m.chunks.at(static_cast<size_t>(chunk));
    if (data.sequences != m.sequences || data.seqLen != m.seqLen ||
        static_cast<int64_t>(data.tokens.size()) != m.sequences * m.seqLen ||
        static_cast<int64_t>(data.targets.size()) != m.sequences * m.seqLen)
        throw RuntimeError("micro-batch " + std::to_string(mb) + " has the wrong shape");
    auto [it, fresh] = m.live.try_emplace({mb, chunk});
    if (!fresh) throw RuntimeError("forward of micro-batch " + std::to_string(mb) + " chunk " + std::to_string(chunk) + " twice");
    ChunkActs& acts = it->second;
    acts.firstSequence = data.firstSequence;
    acts.dropoutKey = data.dropoutKey;
    Tensor x = input;                                                             // [Tl, h]
    if (c.embedding) m.withUnit(chunk, 0, false, [&] { x = m.embed(c, acts, data); });
    if (!c.embedding && (x.dim(0) != m.Tl || x.dim(1) != m.h))
        throw RuntimeError("forward input " + x.shapeString() + " is not [" + std::to_string(m.Tl) + ", " + std::to_string(m.h) + "]");
    acts.layers.resize(c.layers.size());
    const int firstLayerUnit = c.embedding ? 1 : 0;
    for (size_t l = 0; l < c.layers.size(); ++l) {
        m.withUnit(chunk, firstLayerUnit + static_cast<int>(l), false, [&] {
            if (m.recomputes(l)) {
                // Keep only the layer's input; everything else is rebuilt in backward (Korthikanti et al. §4).
                LayerActs scratch;
                acts.layers[l].x = x;
                x = m.layerForward(c.layers[l], x, scratch, acts, kBuf);
            } else {
                x = m.layerForward(c.layers[l], x, acts.layers[l], acts, kAct);
            }
        });
    }
    if (c.head) {
        m.withUnit(chunk, firstLayerUnit + static_cast<int>(c.layers.size()), false, [&] { m.head(c, acts, x, data); });
        return {};
    }
    return x;
}

Tensor GptModel::backward(int mb, int chunk, const Tensor& gradOutput, bool deferWeights) {
    Impl& m = *impl_;
    const ChunkParams& c = m.chunks.at(static_cast<size_t>(chunk));
    auto it = m.live.find({mb, chunk});
    if (it == m.live.end())
        throw RuntimeError("backward of micro-batch " + std::to_string(mb) + " chunk " + std::to_string(chunk) + " before its forward");
    ChunkActs& acts = it->second;
    const int firstLayerUnit = c.embedding ? 1 : 0;
    Tensor dx = gradOutput;                                                       // [Tl, h]
    if (c.head)
        m.withUnit(chunk, firstLayerUnit + static_cast<int>(c.layers.size()), true,
                   [&] { dx = m.headBackward(c, acts, deferWeights); });
    for (size_t l = c.layers.size(); l-- > 0;) {
        m.withUnit(chunk, firstLayerUnit + static_cast<int>(l), true, [&] {
            if (m.recomputes(l)) {
                LayerActs rebuilt;
                m.layerForward(c.layers[l], acts.layers[l].x, rebuilt, acts, kAct);
                dx = m.layerBackward(c.layers[l], dx, rebuilt, acts, deferWeights);
            } else {
                dx = m.layerBackward(c.layers[l], dx, acts.layers[l], acts, deferWeights);
            }
        });
        acts.layers[l] = LayerActs{}; // free what this layer kept
    }
    if (c.embedding) {
        // The embedding's backward reads no weights, but ZeRO-3 gathers every unit of the chunk, as the
        // schedule's gather action (the chunk's parameters) and DeepSpeed's pre-backward hooks do.
        m.withUnit(chunk, 0, true, [&] { m.embedBackward(c, acts, dx); });
        dx = Tensor();
    }
    if (acts.pending.empty()) m.live.erase(it);
    else acts.layers.clear();
    return dx;
}

void GptModel::backwardWeight(int mb, int chunk) {
    Impl& m = *impl_;
    auto it = m.live.find({mb, chunk});
    if (it == m.live.end()) return; // nothing deferred (no GEMM weights on this chunk)
    for (const auto& pw : it->second.pending) {
        if (pw.transposedWeight) m.be.gemm(true, false, 1.0, pw.dy, pw.x, 1.0, m.G(pw.param));
        else m.be.gemm(true, false, 1.0, pw.x, pw.dy, 1.0, m.G(pw.param));
    }
    m.live.erase(it);
}

} // namespace tessel::exec
