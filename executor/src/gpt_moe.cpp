// GPT mixture-of-experts block: top-k routing, dispatch and combine over the EP group, forward and backward.
#include "gpt_impl.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::exec {

namespace {
using namespace detail;
} // namespace

// ---- mixture of experts (GShard-style dispatch/combine over the EP group; no capacity dropping) ----
Tensor GptModel::Impl::epExchange(const std::vector<double>& host, int64_t rows) {
    Tensor t = be.empty({rows, h}, kBuf);
    be.upload(host, t);
    if (ctx.ep.size() == 1) return t;
    Tensor out = be.empty({rows, h}, kBuf);
    ctx.comm->allToAll(t, out, ctx.ep);
    return out;
}

std::vector<double> GptModel::Impl::tpGatherRows(const std::vector<double>& host, int64_t rows) {
    if (ctx.expertTp.size() == 1) return host;
    Tensor t = be.empty({rows, h}, kBuf);
    be.upload(host, t);
    Tensor out = be.empty({ctx.expertTp.size() * rows, h}, kBuf);
    ctx.comm->allGather(t, out, ctx.expertTp);
    return be.download(out);
}

std::vector<double> GptModel::Impl::tpReduceScatterRows(const std::vector<double>& host, int64_t rows) {
    if (ctx.expertTp.size() == 1) return host;
    Tensor t = be.empty({ctx.expertTp.size() * rows, h}, kBuf);
    be.upload(host, t);
    Tensor out = be.empty({rows, h}, kBuf);
    ctx.comm->reduceScatter(t, out, ctx.expertTp);
    return be.download(out);
}

Tensor GptModel::Impl::gatherHostRows(const std::vector<double>& src, const std::vector<int64_t>& rows,
                                      MemoryCategory cat) {
    std::vector<double> buf(rows.size() * static_cast<size_t>(h));
    for (size_t i = 0; i < rows.size(); ++i)
        std::copy_n(src.begin() + rows[i] * h, h, buf.begin() + static_cast<int64_t>(i) * h);
    Tensor t = be.empty({static_cast<int64_t>(rows.size()), h}, cat);
    be.upload(buf, t);
    return t;
}

void GptModel::Impl::scatterHostRows(const Tensor& t, const std::vector<int64_t>& rows,
                                     std::vector<double>& dst) {
    const std::vector<double> v = be.download(t);
    for (size_t i = 0; i < rows.size(); ++i)
        std::copy_n(v.begin() + static_cast<int64_t>(i) * h, h, dst.begin() + rows[i] * h);
}

Tensor GptModel::Impl::moeForward(const LayerParams& L, const Tensor& x, LayerActs& la, ChunkActs& acts,
                                  MemoryCategory cat) {
    (void)acts;
    MoeActs& a = la.moe;
    const int E = experts, K = topK, ep = ctx.ep.size(), me = ctx.ep.myIndex, El = E / ep;
    const int tp = ctx.expertTp.size(), ti = ctx.expertTp.myIndex;         // expert TP (tp unless folded)
    const int64_t n = x.dim(0);                                               // this rank's tokens (Tl)
    Tensor logits = be.empty({n, E}, kBuf);                                   // [n, E]
    be.gemm(false, false, 1.0, x, W(L.router), 0.0, logits);
    const std::vector<double> lg = be.download(logits);
    std::vector<double> probs(static_cast<size_t>(n * E), 0.0);              // [n, E]
    std::vector<double> gates(static_cast<size_t>(n * K), 0.0);              // [n, K]
    a.sel.assign(static_cast<size_t>(n * K), 0);
    // Copies per (expert-TP rank, source EP member, expert): each rank fills its own slot, the sums share them.
    std::vector<double> cnt(static_cast<size_t>(tp * ep * E), 0.0);
    const size_t mine = static_cast<size_t>((ti * ep + me) * E);
    for (int64_t t = 0; t < n; ++t) {
        const double* l = &lg[static_cast<size_t>(t * E)];
        double* p = &probs[static_cast<size_t>(t * E)];
        const double mx = *std::max_element(l, l + E);
        double sum = 0.0;
        for (int e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - mx));
        for (int e = 0; e < E; ++e) p[e] /= sum;
        std::vector<bool> taken(static_cast<size_t>(E), false);
        double s = 0.0;
        for (int k = 0; k < K; ++k) {
            int best = -1;
            for (int e = 0; e < E; ++e)
                if (!taken[static_cast<size_t>(e)] && (best < 0 || p[e] > p[best])) best = e; // ties: lower index
            taken[static_cast<size_t>(best)] = true;
            a.sel[static_cast<size_t>(t * K + k)] = best;
            s += p[best];
            cnt[mine + static_cast<size_t>(best)] += 1.0;
        }
        for (int k = 0; k < K; ++k)
            gates[static_cast<size_t>(t * K + k)] = p[a.sel[static_cast<size_t>(t * K + k)]] / s;
    }
    a.probs = be.empty({n, E}, cat);
    be.upload(probs, a.probs);
    a.gates = be.empty({n, K}, cat);
    be.upload(gates, a.gates);
    gates = be.download(a.gates); // what backward sees (rounded to the element type)
    if (ep > 1) cnt = ctx.comm->allReduceHost(cnt, ctx.ep);
    if (tp > 1) cnt = ctx.comm->allReduceHost(cnt, ctx.expertTp);
    auto count = [&](int tr, int src, int e) { return static_cast<int64_t>(cnt[static_cast<size_t>((tr * ep + src) * E + e)]); };
    a.cap = 1;
    for (int tr = 0; tr < tp; ++tr)
        for (int s = 0; s < ep; ++s)
            for (int j = 0; j < ep; ++j) {
                int64_t c = 0;
                for (int e = j * El; e < (j + 1) * El; ++e) c += count(tr, s, e);
                a.cap = std::max(a.cap, c);
            }
    // Dispatch layout of my copies: block j = destination, ordered by expert then (token, k).
    std::vector<int64_t> next(static_cast<size_t>(E));
    for (int j = 0; j < ep; ++j) {
        int64_t at = j * a.cap;
        for (int e = j * El; e < (j + 1) * El; ++e) {
            next[static_cast<size_t>(e)] = at;
            at += count(ti, me, e);
        }
    }
    a.sendRow.assign(static_cast<size_t>(n * K), 0);
    const std::vector<double> xh = be.download(x);
    const int64_t rows = ep * a.cap;
    std::vector<double> send(static_cast<size_t>(rows * h), 0.0);
    for (int64_t t = 0; t < n; ++t)
        for (int k = 0; k < K; ++k) {
            const int64_t r = next[static_cast<size_t>(a.sel[static_cast<size_t>(t * K + k)])]++;
            a.sendRow[static_cast<size_t>(t * K + k)] = r;
            std::copy_n(xh.begin() + t * h, h, send.begin() + r * h);
        }
    const std::vector<double> recv = tpGatherRows(be.download(epExchange(send, rows)), rows); // [tp rows, h]
    // Rows of my experts: TP rank tr's block s holds my experts' rows from its EP member s, by expert.
    a.recvRows.assign(static_cast<size_t>(El), {});
    for (int tr = 0; tr < tp; ++tr)
        for (int s = 0; s < ep; ++s) {
            int64_t at = (tr * ep + s) * a.cap;
            for (int le = 0; le < El; ++le) {
                const int e = me * El + le;
                for (int64_t i = 0; i < count(tr, s, e); ++i) a.recvRows[static_cast<size_t>(le)].push_back(at++);
            }
        }
    a.xe.assign(static_cast<size_t>(El), {});
    a.h1e.assign(static_cast<size_t>(El), {});
    a.ae.assign(static_cast<size_t>(El), {});
    std::vector<double> outHost(static_cast<size_t>(tp * rows * h), 0.0);    // partial over TP
    for (int le = 0; le < El; ++le) {
        const auto& rr = a.recvRows[static_cast<size_t>(le)];
        if (rr.empty()) continue;
        const int64_t ne = static_cast<int64_t>(rr.size());
        Tensor xe = gatherHostRows(recv, rr, cat);                            // [n_e, h]
        const int b1 = L.expertFc1b.empty() ? -1 : L.expertFc1b[static_cast<size_t>(le)];
        Tensor h1 = linear(xe, L.expertFc1[static_cast<size_t>(le)], b1, cat); // [n_e, Fl or 2 Fl]
        Tensor act = be.empty({ne, expertFl}, dropped(recomputeMoeAct, cat)); // [n_e, Fl]
        if (gated) be.gluForward(h1, act, mlpAct);
        else be.activationForward(h1, act, mlpAct);
        Tensor ye = linear(act, L.expertFc2[static_cast<size_t>(le)], -1, kBuf); // [n_e, h] partial over TP
        // fc2's bias, replicated over expert TP, joins one rank's partial sum so that the reduce-scatter adds it once.
        if (!L.expertFc2b.empty() && ti == 0) be.addBias(ye, W(L.expertFc2b[static_cast<size_t>(le)]).view({h}));
        scatterHostRows(ye, rr, outHost);
        a.xe[static_cast<size_t>(le)] = xe;
        a.h1e[static_cast<size_t>(le)] = h1;
        if (!(recomputeMoeAct && cat == kAct)) a.ae[static_cast<size_t>(le)] = act; // moe_act: rebuilt from h1
    }
    const std::vector<double> combined =
        be.download(epExchange(tpReduceScatterRows(outHost, rows), rows));   // my copies' outputs
    a.out = gatherHostRows(combined, a.sendRow, cat);                        // [n K, h] in (token, k) order
    const std::vector<double> copies = be.download(a.out);
    std::vector<double> y(static_cast<size_t>(n * h), 0.0);
    for (int64_t t = 0; t < n; ++t)
        for (int k = 0; k < K; ++k) {
            const double g = gates[static_cast<size_t>(t * K + k)];
            const int64_t r = t * K + k;
            for (int64_t c = 0; c < h; ++c)
                y[static_cast<size_t>(t * h + c)] += g * copies[static_cast<size_t>(r * h + c)];
        }
    Tensor out = be.empty({n, h}, kBuf);
    be.upload(y, out);
    return out;
}

Tensor GptModel::Impl::moeBackward(const LayerParams& L, const Tensor& dy, const Tensor& x, LayerActs& la,
                                   ChunkActs& acts, bool defer) {
    MoeActs& a = la.moe;
    const int E = experts, K = topK, ep = ctx.ep.size(), El = E / ep, tp = ctx.expertTp.size();
    const int64_t n = x.dim(0);
    const int64_t rows = ep * a.cap;
    const std::vector<double> g = be.download(dy);
    const std::vector<double> probs = be.download(a.probs);                  // [n, E]
    const std::vector<double> gates = be.download(a.gates);                  // [n, K]
    const std::vector<double> out = be.download(a.out);                      // [n K, h] (summed over TP)
    std::vector<double> dgate(static_cast<size_t>(n * K), 0.0);
    std::vector<double> send(static_cast<size_t>(rows * h), 0.0);
    for (int64_t t = 0; t < n; ++t)
        for (int k = 0; k < K; ++k) {
            const int64_t r = a.sendRow[static_cast<size_t>(t * K + k)];
            const double gate = gates[static_cast<size_t>(t * K + k)];
            double dot = 0.0;
            for (int64_t c = 0; c < h; ++c) {
                const double gv = g[static_cast<size_t>(t * h + c)];
                dot += gv * out[static_cast<size_t>((t * K + k) * h + c)];
                send[static_cast<size_t>(r * h + c)] = gate * gv;
            }
            dgate[static_cast<size_t>(t * K + k)] = dot;
        }
    const std::vector<double> recv = tpGatherRows(be.download(epExchange(send, rows)), rows); // [tp rows, h]
    std::vector<double> dxHost(static_cast<size_t>(tp * rows * h), 0.0);     // partial over TP
    for (int le = 0; le < El; ++le) {
        const auto& rr = a.recvRows[static_cast<size_t>(le)];
        if (rr.empty()) continue;
        const int64_t ne = static_cast<int64_t>(rr.size());
        const int fc1 = L.expertFc1[static_cast<size_t>(le)], fc2 = L.expertFc2[static_cast<size_t>(le)];
        Tensor dye = gatherHostRows(recv, rr, kBuf);                          // [n_e, h]
        Tensor da = be.empty({ne, expertFl}, kBuf);                           // [n_e, Fl] = dye W2^T
        be.gemm(false, true, 1.0, dye, W(fc2), 0.0, da);
        weightGrad(acts, a.ae[static_cast<size_t>(le)], dye, fc2, false, defer);
        Tensor dh1 = be.empty(a.h1e[static_cast<size_t>(le)].shape(), kBuf);
        if (gated) be.gluBackward(da, a.h1e[static_cast<size_t>(le)], dh1, mlpAct);
        else be.activationBackward(da, a.h1e[static_cast<size_t>(le)], dh1, mlpAct);
        if (!L.expertFc1b.empty()) biasGrad(L.expertFc1b[static_cast<size_t>(le)], dh1);
        // dye holds every row of this expert (gathered over expert TP): each expert-TP rank's copy of fc2's bias
        // gets the whole gradient, as a replicated row-parallel bias does.
        if (!L.expertFc2b.empty()) biasGrad(L.expertFc2b[static_cast<size_t>(le)], dye);
        Tensor dxe = be.empty({ne, h}, kBuf);                                 // [n_e, h] = dh1 W1^T, partial over TP
        be.gemm(false, true, 1.0, dh1, W(fc1), 0.0, dxe);
        weightGrad(acts, a.xe[static_cast<size_t>(le)], dh1, fc1, false, defer);
        scatterHostRows(dxe, rr, dxHost);
    }
    const std::vector<double> back = be.download(epExchange(tpReduceScatterRows(dxHost, rows), rows));
    std::vector<double> dx(static_cast<size_t>(n * h), 0.0);
    std::vector<double> dlogits(static_cast<size_t>(n * E), 0.0);
    for (int64_t t = 0; t < n; ++t) {
        double S = 0.0, gd = 0.0;
        for (int k = 0; k < K; ++k) {
            const int64_t r = a.sendRow[static_cast<size_t>(t * K + k)];
            for (int64_t c = 0; c < h; ++c)
                dx[static_cast<size_t>(t * h + c)] += back[static_cast<size_t>(r * h + c)];
            S += probs[static_cast<size_t>(t * E + a.sel[static_cast<size_t>(t * K + k)])];
            gd += dgate[static_cast<size_t>(t * K + k)] * gates[static_cast<size_t>(t * K + k)];
        }
        // gate_k = p_k / S: dp_j = (dgate_j - sum_k dgate_k gate_k) / S on the selected j, 0 elsewhere;
        // softmax: dlogit_i = p_i (dp_i - sum_j dp_j p_j).
        std::vector<double> dp(static_cast<size_t>(E), 0.0);
        double pdp = 0.0;
        for (int k = 0; k < K; ++k) {
            const int e = a.sel[static_cast<size_t>(t * K + k)];
            dp[static_cast<size_t>(e)] = (dgate[static_cast<size_t>(t * K + k)] - gd) / S;
            pdp += dp[static_cast<size_t>(e)] * probs[static_cast<size_t>(t * E + e)];
        }
        for (int e = 0; e < E; ++e)
            dlogits[static_cast<size_t>(t * E + e)] =
                probs[static_cast<size_t>(t * E + e)] * (dp[static_cast<size_t>(e)] - pdp);
    }
    Tensor dl = be.empty({n, E}, kBuf);
    be.upload(dlogits, dl);
    Tensor dxf = be.empty({n, h}, kBuf);
    be.upload(dx, dxf);
    be.gemm(false, true, 1.0, dl, W(L.router), 1.0, dxf);                    // += dlogits Wr^T
    if (sp) {
        // The router is replicated over TP and each TP rank routed its own tokens: its gradient is summed over TP
        // now, as the norms' are (not deferred to a W pass: the sum is a TP collective inside the backward).
        Tensor dWr = be.zeros({h, E}, kBuf);                                 // [h, E] = x^T dlogits
        be.gemm(true, false, 1.0, x, dl, 0.0, dWr);
        addReplicatedGrad(L.router, dWr);
    } else {
        weightGrad(acts, x, dl, L.router, false, defer);
    }
    return dxf;
}

} // namespace tessel::exec
