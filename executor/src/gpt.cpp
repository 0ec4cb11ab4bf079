// The executor's GPT model: forward and backward of this rank's pipeline chunks with Megatron-style tensor
// and sequence parallelism, vocab-parallel embedding and cross-entropy, full recompute and deferred weight
// gradients (ZB-H1). Every tensor carries a shape comment; T = tokens of the micro-batch, Tl = T/tp with
// sequence parallelism (else T), h hidden, qL/kvL local query/key-value width, fL local ffn width.
#include "tessel/exec/gpt.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace tessel::exec {

namespace {
constexpr double kNormEps = 1e-5;
constexpr double kRopeBase = 10000.0;
constexpr MemoryCategory kAct = MemoryCategory::Activations;
constexpr MemoryCategory kBuf = MemoryCategory::Buffers;

ParamPiece piece(const std::string& full, int64_t fullRows, int64_t fullCols, int64_t r0, int64_t r1, int64_t c0,
                 int64_t c1, int64_t localRow = 0, int64_t localCol = 0) {
    return {full, fullRows, fullCols, r0, r1, c0, c1, localRow, localCol};
}

// Indices of one layer's parameters in the model's list (-1 when the layer has none of that kind).
struct LayerParams {
    int layer = -1;
    int ln1w = -1, ln1b = -1, q = -1, k = -1, v = -1, qb = -1, kb = -1, vb = -1, proj = -1, projb = -1;
    int ln2w = -1, ln2b = -1, fc1 = -1, fc1b = -1, fc2 = -1, fc2b = -1;
    // Mixture of experts: the router [h, E] and this EP rank's experts (fc1 [h, F or 2F], fc2 [F, h]).
    int router = -1;
    std::vector<int> expertFc1, expertFc2;
};

// What an MoE layer keeps from forward for backward. The tensors a GPU implementation keeps on the device are
// backend tensors, counted as activations (FORMULAS.md §2); the integer routing layout stays on the host.
struct MoeActs {
    Tensor probs;                               // [T, E] router softmax (the router's backward)
    Tensor gates;                               // [T, K] renormalised top-k probabilities
    std::vector<int> sel;                       // [T, K] chosen experts, in selection order
    std::vector<int64_t> sendRow;               // [T, K] row of each (token, k) copy in the dispatch buffer
    int64_t cap = 0;                            // rows per all-to-all block (padded)
    std::vector<std::vector<int64_t>> recvRows; // per local expert: its rows in the received buffer
    std::vector<Tensor> xe, h1e, ae;            // per local expert: [n_e, h], [n_e, F or 2F], [n_e, F]
    Tensor out;                                 // [T K, h] expert output of each (token, k) copy, after the combine
};

struct ChunkParams {
    int chunk = 0;
    int firstLayer = 0, lastLayer = 0; // [first, last)
    bool embedding = false, head = false;
    int wte = -1, wpe = -1, lnfw = -1, lnfb = -1, lmHead = -1;
    std::vector<LayerParams> layers;
};

// What one layer keeps from forward for backward.
struct LayerActs {
    Tensor x;                 // [Tl, h] layer input
    Tensor n1, mean1, rstd1;  // [Tl, h], [Tl], [Tl]
    Tensor q, k, v;           // [T, qL], [T, kvL], [T, kvL] (q, k after RoPE)
    Tensor o, lse;            // [T, qL], [T, aL]
    Tensor x2;                // [Tl, h] after the attention residual
    Tensor n2, mean2, rstd2;  // [Tl, h], [Tl], [Tl]
    Tensor h1;                // [T, fL] (GELU) or [T, 2 fL] (SwiGLU: gate | up)
    Tensor a;                 // [T, fL] activation output
    MoeActs moe;              // MoE layers only
};

// A GEMM weight gradient dW += X^T dY whose computation ZB-H1 defers to the W pass.
struct PendingWeightGrad {
    Tensor x;   // [T, in]
    Tensor dy;  // [T, out]
    int param;  // weight [in, out]; or, with transposedWeight, [out, in] (LM head / tied embedding)
    bool transposedWeight = false;
};

struct ChunkActs {
    std::vector<LayerActs> layers;
    // Embedding (virtual stage 0).
    std::vector<int32_t> tokens;
    std::vector<int64_t> positions;     // per local row
    // Head (last virtual stage).
    Tensor headX, nf, meanf, rstdf;     // [Tl, h] x3, [Tl] x2
    Tensor logits;                      // [T, Vl] overwritten by its gradient in backward
    std::vector<double> max, sumExp;    // [T]
    std::vector<int32_t> targets;
    std::vector<PendingWeightGrad> pending;
};
} // namespace

struct GptModel::Impl {
    ModelConfig model;
    ParallelContext ctx;
    Backend& be;
    std::vector<Parameter>& params;
    std::vector<ChunkParams> chunks;
    int64_t T = 0, Tl = 0, h = 0, qL = 0, kvL = 0, aL = 0, kvhL = 0, d = 0, fL = 0, vocabLocal = 0, vocabBegin = 0;
    int64_t seqLen = 0, sequences = 0;
    // Context parallelism: each sequence is cut into 2 cp chunks; CP rank r holds chunks r and 2cp-1-r
    // (the load-balanced zig-zag split), sLocal = s/cp tokens per sequence at global positions localPos.
    int cp = 1;
    int64_t sLocal = 0;
    std::vector<int64_t> localPos;      // [sLocal] this rank's global positions within a sequence
    std::vector<std::vector<int64_t>> rankPos; // [cp][sLocal] every CP rank's positions
    double lossScale = 1.0;
    bool rms = false, swiglu = false, rope = false, bias = false, qkvBias = false, sp = false;
    bool fullRecompute = false;
    bool moe = false;
    int experts = 0, topK = 0;
    int64_t expertF = 0;
    std::map<std::pair<int, int>, ChunkActs> live; // (mb, chunk) -> activations
    double lossSum = 0.0;
    ParameterResidency* residency = nullptr;       // ZeRO-3: gathers units' values around their use

    // Runs `work` with unit `unit` of `chunk` resident (units numbered as parameterUnits()).
    template <typename Work>
    void withUnit(int chunk, int unit, bool backward, Work&& work) {
        if (residency) residency->beforeUnit(chunk, unit, backward);
        work();
        if (residency) residency->afterUnit(chunk, unit, backward);
    }

    Impl(const ModelConfig& m, const ParallelContext& c, Backend& b, std::vector<Parameter>& p)
        : model(m), ctx(c), be(b), params(p) {}

    Tensor& W(int i) { return params[static_cast<size_t>(i)].value; }
    Tensor& G(int i) { return params[static_cast<size_t>(i)].grad; }

    // ---- tensor-parallel communication (Megatron's f and g operators; Korthikanti's SP variants) ----
    // [Tl, h] -> [T, h]: all-gather over TP with SP; identity without (every TP rank holds all tokens).
    Tensor gatherSeq(const Tensor& x, MemoryCategory cat) {
        if (!sp) return x;
        Tensor out = be.empty({T, x.dim(1)}, cat);
        ctx.comm->allGather(x, out, ctx.tp);
        return out;
    }
    // [T, h] partial sums -> [Tl, h]: reduce-scatter over TP with SP; all-reduce without.
    Tensor reduceSeq(Tensor& partial) {
        if (ctx.tp.size() == 1) return partial;
        if (!sp) {
            ctx.comm->allReduce(partial, ctx.tp);
            return partial;
        }
        Tensor out = be.empty({Tl, partial.dim(1)}, kBuf);
        ctx.comm->reduceScatter(partial, out, ctx.tp);
        return out;
    }
    // Gradient of a parameter replicated over TP but fed by sequence-sharded tokens: sum the partial over TP.
    void addReplicatedGrad(int param, Tensor& partial) {
        if (sp && ctx.tp.size() > 1) ctx.comm->allReduce(partial, ctx.tp);
        be.add(partial, G(param));
    }
    Tensor zerosLike(const Tensor& t, MemoryCategory cat) { return be.zeros(t.shape(), cat); }

    // dW += X^T dY now, or later in the W pass.
    // What the W pass keeps is stored for backward: an activation. Tensors that are transient buffers
    // (gathered inputs, output gradients) are copied into activation memory so the accounting says so.
    Tensor retain(const Tensor& t) {
        if (t.category() == kAct) return t;
        Tensor kept = be.empty(t.shape(), kAct);
        be.copy(t, kept);
        return kept;
    }
    void weightGrad(ChunkActs& acts, const Tensor& x, const Tensor& dy, int param, bool transposed, bool defer) {
        if (defer) {
            acts.pending.push_back({retain(x), retain(dy), param, transposed});
            return;
        }
        if (transposed) be.gemm(true, false, 1.0, dy, x, 1.0, G(param)); // W [out, in]: dW += dY^T X
        else be.gemm(true, false, 1.0, x, dy, 1.0, G(param));             // W [in, out]: dW += X^T dY
    }
    void biasGrad(int param, const Tensor& dy) {
        if (param < 0) return;
        Tensor db = be.zeros({1, dy.dim(1)}, kBuf);
        be.biasGrad(dy, db);
        be.add(db, G(param));
    }
    void replicatedBiasGrad(int param, const Tensor& dy) {
        if (param < 0) return;
        Tensor db = be.zeros({1, dy.dim(1)}, kBuf);
        be.biasGrad(dy, db);
        addReplicatedGrad(param, db);
    }

    Tensor linear(const Tensor& x, int w, int b, MemoryCategory cat) {
        Tensor y = be.empty({x.dim(0), W(w).dim(1)}, cat); // y [n, out] = x [n, in] W [in, out]
        be.gemm(false, false, 1.0, x, W(w), 0.0, y);
        if (b >= 0) be.addBias(y, W(b).view({W(b).numel()}));
        return y;
    }

    std::vector<int64_t> allPositions() const {
        std::vector<int64_t> pos(static_cast<size_t>(seqLen));
        for (int64_t i = 0; i < seqLen; ++i) pos[static_cast<size_t>(i)] = i;
        return pos;
    }
    std::vector<int64_t> tokenPositions(int64_t rows, int64_t firstRow) const {
        std::vector<int64_t> pos(static_cast<size_t>(rows));
        for (int64_t i = 0; i < rows; ++i) pos[static_cast<size_t>(i)] = localPos[static_cast<size_t>((firstRow + i) % sLocal)];
        return pos;
    }

    // ---- context parallelism: K/V all-gather over CP and the reduce-scatter of their gradients ----
    // Rank-major rows [cp][sequences][sLocal] <-> sequence-major, position-ordered rows [sequences][seqLen].
    // Each half-chunk of s/(2cp) rows is contiguous on both sides.
    void cpReorder(const Tensor& src, Tensor& dst, bool toPositionOrder) {
        const int64_t c = seqLen / (2 * cp), cols = src.dim(1);
        Tensor tmp = be.empty({c, cols}, kBuf);
        for (int r = 0; r < cp; ++r)
            for (int64_t i = 0; i < sequences; ++i)
                for (int half = 0; half < 2; ++half) {
                    const int64_t rankRow = (r * sequences + i) * sLocal + half * c;
                    const int64_t posRow = i * seqLen + rankPos[static_cast<size_t>(r)][static_cast<size_t>(half * c)];
                    be.copyRows(src, toPositionOrder ? rankRow : posRow, tmp);
                    be.copyRowsInto(tmp, dst, toPositionOrder ? posRow : rankRow);
                }
    }
    // [T, kvL] local -> [sequences * seqLen, kvL] every position's rows (identity without CP).
    Tensor cpGather(const Tensor& x) {
        if (cp == 1) return x;
        Tensor all = be.empty({T * cp, x.dim(1)}, kBuf);
        ctx.comm->allGather(x, all, ctx.cp);
        Tensor full = be.empty({sequences * seqLen, x.dim(1)}, kBuf);
        cpReorder(all, full, true);
        return full;
    }
    // [sequences * seqLen, kvL] partial gradients -> [T, kvL] this rank's rows, summed over CP.
    Tensor cpReduce(const Tensor& full) {
        if (cp == 1) return full;
        Tensor all = be.empty({T * cp, full.dim(1)}, kBuf);
        cpReorder(full, all, false);
        Tensor mine = be.empty({T, full.dim(1)}, kBuf);
        ctx.comm->reduceScatter(all, mine, ctx.cp);
        return mine;
    }
    // This rank's tokens (or targets) of the full micro-batch.
    std::vector<int32_t> localRows(const std::vector<int32_t>& full) const {
        if (cp == 1) return full;
        std::vector<int32_t> out;
        out.reserve(static_cast<size_t>(T));
        for (int64_t i = 0; i < sequences; ++i)
            for (int64_t p : localPos) out.push_back(full[static_cast<size_t>(i * seqLen + p)]);
        return out;
    }

    void normForward(const Tensor& x, int w, int b, Tensor& y, Tensor& mean, Tensor& rstd, MemoryCategory cat) {
        y = be.empty(x.shape(), cat);
        mean = be.empty({x.dim(0)}, cat);
        rstd = be.empty({x.dim(0)}, cat);
        be.normForward(x, W(w).view({h}), b >= 0 ? W(b).view({h}) : Tensor(), rms, kNormEps, y, mean, rstd);
    }
    // dx = norm backward; the norm's weight/bias gradients are replicated over TP.
    Tensor normBackward(const Tensor& dy, const Tensor& x, int w, int b, const Tensor& mean, const Tensor& rstd) {
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

    // ---- mixture of experts (GShard-style dispatch/combine over the EP group; no capacity dropping) ----
    // Expert e lives on EP member e / (E/ep). Every rank routes its own tokens; the dispatch buffer has one
    // block of `cap` rows per EP member (padded to the largest block of the call), rows ordered by expert,
    // then by (token, k). Padding rows are zeros and never read.
    Tensor epExchange(const std::vector<double>& host, int64_t rows) {
        Tensor t = be.empty({rows, h}, kBuf);
        be.upload(host, t);
        if (ctx.ep.size() == 1) return t;
        Tensor out = be.empty({rows, h}, kBuf);
        ctx.comm->allToAll(t, out, ctx.ep);
        return out;
    }
    Tensor gatherHostRows(const std::vector<double>& src, const std::vector<int64_t>& rows, MemoryCategory cat) {
        std::vector<double> buf(rows.size() * static_cast<size_t>(h));
        for (size_t i = 0; i < rows.size(); ++i)
            std::copy_n(src.begin() + rows[i] * h, h, buf.begin() + static_cast<int64_t>(i) * h);
        Tensor t = be.empty({static_cast<int64_t>(rows.size()), h}, cat);
        be.upload(buf, t);
        return t;
    }
    void scatterHostRows(const Tensor& t, const std::vector<int64_t>& rows, std::vector<double>& dst) {
        const std::vector<double> v = be.download(t);
        for (size_t i = 0; i < rows.size(); ++i)
            std::copy_n(v.begin() + static_cast<int64_t>(i) * h, h, dst.begin() + rows[i] * h);
    }

    // y [T, h] = sum_k gate_tk expert_{sel_tk}(x_t) for x = n2f [T, h].
    Tensor moeForward(const LayerParams& L, const Tensor& xf, LayerActs& la, ChunkActs& acts, MemoryCategory cat) {
        (void)acts;
        MoeActs& a = la.moe;
        const int E = experts, K = topK, ep = ctx.ep.size(), me = ctx.ep.myIndex, El = E / ep;
        Tensor logits = be.empty({T, E}, kBuf);                                   // [T, E]
        be.gemm(false, false, 1.0, xf, W(L.router), 0.0, logits);
        const std::vector<double> lg = be.download(logits);
        std::vector<double> probs(static_cast<size_t>(T * E), 0.0);              // [T, E]
        std::vector<double> gates(static_cast<size_t>(T * K), 0.0);              // [T, K]
        a.sel.assign(static_cast<size_t>(T * K), 0);
        std::vector<double> cnt(static_cast<size_t>(ep * E), 0.0);                // [src EP member, expert]
        for (int64_t t = 0; t < T; ++t) {
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
                cnt[static_cast<size_t>(me * E + best)] += 1.0;
            }
            for (int k = 0; k < K; ++k)
                gates[static_cast<size_t>(t * K + k)] = p[a.sel[static_cast<size_t>(t * K + k)]] / s;
        }
        a.probs = be.empty({T, E}, cat);
        be.upload(probs, a.probs);
        a.gates = be.empty({T, K}, cat);
        be.upload(gates, a.gates);
        gates = be.download(a.gates); // what backward sees (rounded to the element type)
        if (ep > 1) cnt = ctx.comm->allReduceHost(cnt, ctx.ep);
        auto count = [&](int src, int e) { return static_cast<int64_t>(cnt[static_cast<size_t>(src * E + e)]); };
        a.cap = 1;
        for (int s = 0; s < ep; ++s)
            for (int j = 0; j < ep; ++j) {
                int64_t n = 0;
                for (int e = j * El; e < (j + 1) * El; ++e) n += count(s, e);
                a.cap = std::max(a.cap, n);
            }
        // Dispatch layout of my copies: block j = destination, ordered by expert then (token, k).
        std::vector<int64_t> next(static_cast<size_t>(E));
        for (int j = 0; j < ep; ++j) {
            int64_t at = j * a.cap;
            for (int e = j * El; e < (j + 1) * El; ++e) {
                next[static_cast<size_t>(e)] = at;
                at += count(me, e);
            }
        }
        a.sendRow.assign(static_cast<size_t>(T * K), 0);
        const std::vector<double> x = be.download(xf);
        const int64_t rows = ep * a.cap;
        std::vector<double> send(static_cast<size_t>(rows * h), 0.0);
        for (int64_t t = 0; t < T; ++t)
            for (int k = 0; k < K; ++k) {
                const int64_t r = next[static_cast<size_t>(a.sel[static_cast<size_t>(t * K + k)])]++;
                a.sendRow[static_cast<size_t>(t * K + k)] = r;
                std::copy_n(x.begin() + t * h, h, send.begin() + r * h);
            }
        const std::vector<double> recv = be.download(epExchange(send, rows));
        // Rows of my experts in the received blocks: block s holds my experts' rows from member s, by expert.
        a.recvRows.assign(static_cast<size_t>(El), {});
        for (int s = 0; s < ep; ++s) {
            int64_t at = s * a.cap;
            for (int le = 0; le < El; ++le) {
                const int e = me * El + le;
                for (int64_t i = 0; i < count(s, e); ++i) a.recvRows[static_cast<size_t>(le)].push_back(at++);
            }
        }
        a.xe.assign(static_cast<size_t>(El), {});
        a.h1e.assign(static_cast<size_t>(El), {});
        a.ae.assign(static_cast<size_t>(El), {});
        std::vector<double> outHost(static_cast<size_t>(rows * h), 0.0);
        for (int le = 0; le < El; ++le) {
            const auto& rr = a.recvRows[static_cast<size_t>(le)];
            if (rr.empty()) continue;
            const int64_t n = static_cast<int64_t>(rr.size());
            Tensor xe = gatherHostRows(recv, rr, cat);                            // [n_e, h]
            Tensor h1 = linear(xe, L.expertFc1[static_cast<size_t>(le)], -1, cat); // [n_e, F or 2F]
            Tensor act = be.empty({n, expertF}, cat);                             // [n_e, F]
            if (swiglu) be.swigluForward(h1, act);
            else be.geluForward(h1, act);
            Tensor ye = linear(act, L.expertFc2[static_cast<size_t>(le)], -1, kBuf); // [n_e, h]
            scatterHostRows(ye, rr, outHost);
            a.xe[static_cast<size_t>(le)] = xe;
            a.h1e[static_cast<size_t>(le)] = h1;
            a.ae[static_cast<size_t>(le)] = act;
        }
        const std::vector<double> combined = be.download(epExchange(outHost, rows)); // my copies' outputs
        a.out = gatherHostRows(combined, a.sendRow, cat);                        // [T K, h] in (token, k) order
        const std::vector<double> copies = be.download(a.out);
        std::vector<double> y(static_cast<size_t>(T * h), 0.0);
        for (int64_t t = 0; t < T; ++t)
            for (int k = 0; k < K; ++k) {
                const double g = gates[static_cast<size_t>(t * K + k)];
                const int64_t r = t * K + k;
                for (int64_t c = 0; c < h; ++c)
                    y[static_cast<size_t>(t * h + c)] += g * copies[static_cast<size_t>(r * h + c)];
            }
        Tensor out = be.empty({T, h}, kBuf);
        be.upload(y, out);
        return out;
    }

    // dx [T, h] of the MoE block for dy [T, h]; router and expert weight gradients accumulate.
    Tensor moeBackward(const LayerParams& L, const Tensor& dy, const Tensor& xf, LayerActs& la, ChunkActs& acts,
                       bool defer) {
        MoeActs& a = la.moe;
        const int E = experts, K = topK, ep = ctx.ep.size(), El = E / ep;
        const int64_t rows = ep * a.cap;
        const std::vector<double> g = be.download(dy);
        const std::vector<double> probs = be.download(a.probs);                  // [T, E]
        const std::vector<double> gates = be.download(a.gates);                  // [T, K]
        const std::vector<double> out = be.download(a.out);                      // [T K, h]
        std::vector<double> dgate(static_cast<size_t>(T * K), 0.0);
        std::vector<double> send(static_cast<size_t>(rows * h), 0.0);
        for (int64_t t = 0; t < T; ++t)
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
        const std::vector<double> recv = be.download(epExchange(send, rows));
        std::vector<double> dxHost(static_cast<size_t>(rows * h), 0.0);
        for (int le = 0; le < El; ++le) {
            const auto& rr = a.recvRows[static_cast<size_t>(le)];
            if (rr.empty()) continue;
            const int64_t n = static_cast<int64_t>(rr.size());
            const int fc1 = L.expertFc1[static_cast<size_t>(le)], fc2 = L.expertFc2[static_cast<size_t>(le)];
            Tensor dye = gatherHostRows(recv, rr, kBuf);                          // [n_e, h]
            Tensor da = be.empty({n, expertF}, kBuf);                             // [n_e, F] = dye W2^T
            be.gemm(false, true, 1.0, dye, W(fc2), 0.0, da);
            weightGrad(acts, a.ae[static_cast<size_t>(le)], dye, fc2, false, defer);
            Tensor dh1 = be.empty(a.h1e[static_cast<size_t>(le)].shape(), kBuf);
            if (swiglu) be.swigluBackward(da, a.h1e[static_cast<size_t>(le)], dh1);
            else be.geluBackward(da, a.h1e[static_cast<size_t>(le)], dh1);
            Tensor dxe = be.empty({n, h}, kBuf);                                  // [n_e, h] = dh1 W1^T
            be.gemm(false, true, 1.0, dh1, W(fc1), 0.0, dxe);
            weightGrad(acts, a.xe[static_cast<size_t>(le)], dh1, fc1, false, defer);
            scatterHostRows(dxe, rr, dxHost);
        }
        const std::vector<double> back = be.download(epExchange(dxHost, rows));
        std::vector<double> dx(static_cast<size_t>(T * h), 0.0);
        std::vector<double> dlogits(static_cast<size_t>(T * E), 0.0);
        for (int64_t t = 0; t < T; ++t) {
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
        Tensor dl = be.empty({T, E}, kBuf);
        be.upload(dlogits, dl);
        Tensor dxf = be.empty({T, h}, kBuf);
        be.upload(dx, dxf);
        be.gemm(false, true, 1.0, dl, W(L.router), 1.0, dxf);                    // += dlogits Wr^T
        weightGrad(acts, xf, dl, L.router, false, defer);
        return dxf;
    }

    // ---- one transformer layer ----
    Tensor layerForward(const LayerParams& L, const Tensor& x, LayerActs& a, ChunkActs& acts, MemoryCategory cat) {
        a.x = x;                                                                  // [Tl, h]
        normForward(x, L.ln1w, L.ln1b, a.n1, a.mean1, a.rstd1, cat);              // [Tl, h]
        Tensor n1f = gatherSeq(a.n1, kBuf);                                       // [T, h]
        a.q = linear(n1f, L.q, L.qb, cat);                                        // [T, qL]
        a.k = linear(n1f, L.k, L.kb, cat);                                        // [T, kvL]
        a.v = linear(n1f, L.v, L.vb, cat);                                        // [T, kvL]
        const std::vector<int64_t> pos = tokenPositions(T, 0);
        if (rope) {
            Tensor qv = a.q.view({T, aL, d}), kv = a.k.view({T, kvhL, d});
            be.rope(qv, pos, kRopeBase, false);
            be.rope(kv, pos, kRopeBase, false);
        }
        a.o = be.empty({T, qL}, cat);                                             // [T, qL]
        a.lse = be.empty({T, aL}, cat);                                           // [T, aL]
        const std::vector<int64_t> seqPos = tokenPositions(sLocal, 0);            // queries: this rank's positions
        const std::vector<int64_t> keyPos = allPositions();                       // keys: every position
        const int64_t S = sequences * seqLen;
        Tensor kAll = cpGather(a.k), vAll = cpGather(a.v);                        // [b s, kvL] with CP
        Tensor ov = a.o.view({T, aL, d});
        be.attentionForward(a.q.view({T, aL, d}), kAll.view({S, kvhL, d}), vAll.view({S, kvhL, d}), sequences,
                            seqPos, keyPos, ov, a.lse);
        Tensor partial = linear(a.o, L.proj, -1, kBuf);                           // [T, h] partial over TP
        Tensor y = reduceSeq(partial);                                            // [Tl, h]
        if (L.projb >= 0) be.addBias(y, W(L.projb).view({h}));
        a.x2 = be.empty({Tl, h}, cat);                                            // [Tl, h] x + attention
        be.copy(x, a.x2);
        be.add(y, a.x2);
        normForward(a.x2, L.ln2w, L.ln2b, a.n2, a.mean2, a.rstd2, cat);           // [Tl, h]
        Tensor n2f = gatherSeq(a.n2, kBuf);                                       // [T, h]
        Tensor y2;
        if (moe) {
            y2 = moeForward(L, n2f, a, acts, cat);                                // [T, h] (tp == 1)
        } else {
            a.h1 = linear(n2f, L.fc1, L.fc1b, cat);                               // [T, fL or 2 fL]
            a.a = be.empty({T, fL}, cat);                                         // [T, fL]
            if (swiglu) be.swigluForward(a.h1, a.a);
            else be.geluForward(a.h1, a.a);
            Tensor partial2 = linear(a.a, L.fc2, -1, kBuf);                       // [T, h] partial over TP
            y2 = reduceSeq(partial2);                                             // [Tl, h]
        }
        if (L.fc2b >= 0) be.addBias(y2, W(L.fc2b).view({h}));
        // The output is the next layer's input (kept for backward, also under full recompute) or the stage's
        // output: an activation either way.
        Tensor out = be.empty({Tl, h}, kAct);                                     // [Tl, h]
        be.copy(a.x2, out);
        be.add(y2, out);
        return out;
    }

    Tensor layerBackward(const LayerParams& L, const Tensor& dout, LayerActs& a, ChunkActs& acts, bool defer) {
        // MLP block: out = x2 + g(act(f(n2) W1) W2).
        replicatedBiasGrad(L.fc2b, dout);
        Tensor dp2 = gatherSeq(dout, kBuf);                                       // [T, h]
        Tensor dn2;
        if (moe) {
            dn2 = moeBackward(L, dp2, gatherSeq(a.n2, kBuf), a, acts, defer);      // [T, h] (tp == 1)
        } else {
            Tensor da = be.empty({T, fL}, kBuf);                                      // [T, fL] = dp2 W2^T
            be.gemm(false, true, 1.0, dp2, W(L.fc2), 0.0, da);
            weightGrad(acts, a.a, dp2, L.fc2, false, defer);
            Tensor dh1 = be.empty(a.h1.shape(), kBuf);                                // [T, fL or 2 fL]
            if (swiglu) be.swigluBackward(da, a.h1, dh1);
            else be.geluBackward(da, a.h1, dh1);
            biasGrad(L.fc1b, dh1);
            Tensor n2f = gatherSeq(a.n2, kBuf);                                       // [T, h] re-gathered for dW
            Tensor dn2f = be.empty({T, h}, kBuf);                                     // [T, h] partial
            be.gemm(false, true, 1.0, dh1, W(L.fc1), 0.0, dn2f);
            weightGrad(acts, n2f, dh1, L.fc1, false, defer);
            dn2 = reduceSeq(dn2f);                                                    // [Tl, h]
        }
        Tensor dx2 = normBackward(dn2, a.x2, L.ln2w, L.ln2b, a.mean2, a.rstd2);   // [Tl, h]
        be.add(dout, dx2);                                                        // residual
        // Attention block: x2 = x + g(attn(f(n1)) Wproj).
        replicatedBiasGrad(L.projb, dx2);
        Tensor dpp = gatherSeq(dx2, kBuf);                                        // [T, h]
        Tensor dO = be.empty({T, qL}, kBuf);                                      // [T, qL]
        be.gemm(false, true, 1.0, dpp, W(L.proj), 0.0, dO);
        weightGrad(acts, a.o, dpp, L.proj, false, defer);
        const int64_t S = sequences * seqLen;                                     // keys: T without CP
        Tensor dq = be.empty({T, qL}, kBuf);                                      // [T, qL]
        Tensor dkAll = be.zeros({S, kvL}, kBuf);                                  // [S, kvL] accumulated
        Tensor dvAll = be.zeros({S, kvL}, kBuf);                                  // [S, kvL] accumulated
        const std::vector<int64_t> seqPos = tokenPositions(sLocal, 0);
        const std::vector<int64_t> keyPos = allPositions();
        Tensor kAll = cpGather(a.k), vAll = cpGather(a.v);                        // re-gathered over CP
        Tensor dqv = dq.view({T, aL, d});
        {
            Tensor dkv0 = dkAll.view({S, kvhL, d}), dvv0 = dvAll.view({S, kvhL, d});
            be.attentionBackward(dO.view({T, aL, d}), a.q.view({T, aL, d}), kAll.view({S, kvhL, d}),
                                 vAll.view({S, kvhL, d}), a.o.view({T, aL, d}), a.lse, sequences, seqPos, keyPos, dqv,
                                 dkv0, dvv0);
        }
        Tensor dk = cpReduce(dkAll);                                              // [T, kvL] this rank's keys
        Tensor dv = cpReduce(dvAll);                                              // [T, kvL]
        Tensor dkv = dk.view({T, kvhL, d});
        if (rope) {
            const std::vector<int64_t> pos = tokenPositions(T, 0);
            be.rope(dqv, pos, kRopeBase, true);
            be.rope(dkv, pos, kRopeBase, true);
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
    Tensor embed(const ChunkParams& c, ChunkActs& acts, const MicroBatchData& data) {
        acts.tokens = localRows(data.tokens);
        Tensor partial = be.empty({T, h}, kBuf);                                  // [T, h] this vocab shard's rows
        be.embeddingForward(acts.tokens, W(c.wte), vocabBegin, partial);
        Tensor x = reduceSeq(partial);                                            // [Tl, h]
        Tensor out = be.empty({Tl, h}, kAct);
        be.copy(x, out);
        if (c.wpe >= 0) {
            const int64_t firstRow = sp ? ctx.tp.myIndex * Tl : 0;
            acts.positions = tokenPositions(Tl, firstRow);
            std::vector<int32_t> pos(acts.positions.begin(), acts.positions.end());
            Tensor pe = be.empty({Tl, h}, kBuf);
            be.embeddingForward(pos, W(c.wpe), 0, pe);
            be.add(pe, out);
        }
        return out;
    }
    void embedBackward(const ChunkParams& c, ChunkActs& acts, const Tensor& dx) {
        if (c.wpe >= 0) {
            std::vector<int32_t> pos(acts.positions.begin(), acts.positions.end());
            Tensor dpe = be.zeros(W(c.wpe).shape(), kBuf);
            be.embeddingBackward(pos, dx, 0, dpe);
            addReplicatedGrad(c.wpe, dpe);
        }
        Tensor dfull = gatherSeq(dx, kBuf);                                       // [T, h]
        be.embeddingBackward(acts.tokens, dfull, vocabBegin, G(c.wte));
    }

    // ---- LM head and vocab-parallel cross-entropy (last virtual stage) ----
    void head(const ChunkParams& c, ChunkActs& acts, const Tensor& x, const MicroBatchData& data) {
        acts.headX = x;                                                           // [Tl, h]
        normForward(x, c.lnfw, c.lnfb, acts.nf, acts.meanf, acts.rstdf, kAct);
        Tensor nff = gatherSeq(acts.nf, kBuf);                                    // [T, h]
        acts.logits = be.empty({T, vocabLocal}, kAct);                            // [T, Vl] = nff W^T, W [Vl, h]
        be.gemm(false, true, 1.0, nff, W(c.lmHead), 0.0, acts.logits);
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
    Tensor headBackward(const ChunkParams& c, ChunkActs& acts, bool defer) {
        be.crossEntropyBackward(acts.logits, acts.max, acts.sumExp, acts.targets, vocabBegin, lossScale); // [T, Vl]
        Tensor nff = gatherSeq(acts.nf, kBuf);                                    // [T, h]
        Tensor dnff = be.empty({T, h}, kBuf);                                     // [T, h] partial = dlogits W
        be.gemm(false, false, 1.0, acts.logits, W(c.lmHead), 0.0, dnff);
        weightGrad(acts, nff, acts.logits, c.lmHead, true, defer);
        Tensor dnf = reduceSeq(dnff);                                             // [Tl, h]
        return normBackward(dnf, acts.headX, c.lnfw, c.lnfb, acts.meanf, acts.rstdf);
    }
};

GptModel::~GptModel() = default;

GptModel::GptModel(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, uint64_t seed)
    : impl_(std::make_unique<Impl>(model, ctx, backend, params_)) {
    Impl& m = *impl_;
    const Plan& plan = ctx.plan;
    if (model.moe) {
        // Expert TP, CP and ZeRO >= 1 for expert buckets are not implemented yet.
        if (plan.tp > 1)
            throw InputError("/plan/tp", "the executor runs mixture-of-experts layers with tp 1 only (no expert tensor parallelism yet)");
        if (plan.cp > 1)
            throw InputError("/plan/cp", "the executor runs mixture-of-experts layers with cp 1 only");
        if (plan.zeroStage > 0)
            throw InputError("/plan/zero_stage", "the executor runs mixture-of-experts layers with zero_stage 0 only");
        if (model.moe->experts < 1 || model.moe->topK < 1 || model.moe->topK > model.moe->experts)
            throw InputError("/model/moe", "top_k must be between 1 and the number of experts");
        if (model.moe->experts % plan.ep != 0)
            throw InputError("/plan/ep", "ep must divide the model's experts");
        if (plan.dp % plan.ep != 0) throw InputError("/plan/ep", "ep must divide dp");
        m.moe = true;
        m.experts = model.moe->experts;
        m.topK = model.moe->topK;
        m.expertF = model.moe->expertFfnHidden;
    } else if (plan.ep > 1) {
        throw InputError("/plan/ep", "ep > 1 needs a model with a moe block");
    }
    if (plan.cp > 1 && model.seqLen % (2 * plan.cp) != 0)
        throw InputError("/plan/cp", "seq_len must divide by 2 cp (the load-balanced context-parallel split)");
    if (model.dropout > 0.0)
        throw InputError("/model/dropout", "the executor trains without dropout; set dropout to 0");
    if (!plan.flashAttention)
        throw InputError("/plan/flash_attention",
                         "the executor's attention keeps only the log-sum-exp (memory-efficient); set flash_attention true");
    const int64_t tp = plan.tp;
    m.h = model.hidden;
    m.d = model.headDim;
    m.aL = model.heads / tp;
    m.kvhL = model.kvHeads / tp;
    m.qL = m.aL * m.d;
    m.kvL = m.kvhL * m.d;
    m.fL = model.ffnHidden / tp;
    m.seqLen = model.seqLen;
    m.sequences = plan.microBatch;
    m.cp = plan.cp;
    m.sLocal = m.seqLen / m.cp;
    m.rankPos.resize(static_cast<size_t>(m.cp));
    for (int r = 0; r < m.cp; ++r) {
        const int64_t c = m.seqLen / (2 * m.cp);
        auto& pos = m.rankPos[static_cast<size_t>(r)];
        if (m.cp == 1) {
            for (int64_t i = 0; i < m.seqLen; ++i) pos.push_back(i);
            continue;
        }
        for (int64_t i = 0; i < c; ++i) pos.push_back(r * c + i);
        for (int64_t i = 0; i < c; ++i) pos.push_back((2 * m.cp - 1 - r) * c + i);
    }
    m.localPos = m.rankPos[static_cast<size_t>(ctx.cp.myIndex)];
    m.T = m.sequences * m.sLocal;
    m.sp = plan.sequenceParallel && tp > 1;
    m.Tl = m.sp ? m.T / tp : m.T;
    if (m.sp && m.T % tp != 0) throw InputError("/plan/sequence_parallel", "micro_batch x seq_len must divide by tp");
    const int64_t vPad = paddedVocab(model, plan);
    m.vocabLocal = vPad / tp;
    m.vocabBegin = ctx.tp.myIndex * m.vocabLocal;
    m.rms = model.norm == NormKind::RmsNorm;
    m.swiglu = model.activation == Activation::Swiglu;
    m.rope = model.position == PositionEmbedding::Rope;
    m.bias = model.linearBias;
    m.qkvBias = model.linearBias || model.qkvBias;
    m.fullRecompute = plan.recompute == Recompute::Full;
    m.lossScale = 1.0 / (static_cast<double>(plan.globalBatch) * static_cast<double>(model.seqLen));

    const int64_t t = ctx.tp.myIndex;
    const int64_t h = m.h, q = static_cast<int64_t>(model.heads) * m.d, kv = static_cast<int64_t>(model.kvHeads) * m.d;
    const int64_t f = model.ffnHidden;
    const double outStd = 0.02 / std::sqrt(2.0 * model.layers); // GPT-2's scaled init of residual projections
    auto add = [&](ParamInfo info) {
        params_.push_back({std::move(info), {}, {}});
        return static_cast<int>(params_.size()) - 1;
    };
    auto vec = [&](const std::string& name, int64_t n, InitKind init, bool replicated, int layer, int chunk,
                   int64_t begin = 0, int64_t end = -1) {
        ParamInfo p;
        p.name = name;
        p.pieces = {piece(name, 1, n, 0, 1, begin, end < 0 ? n : end)};
        p.init = init;
        p.replicatedOverTp = replicated;
        p.layer = layer;
        p.chunk = chunk;
        return add(p);
    };
    auto colSplit = [&](const std::string& name, int64_t rows, int64_t cols, int64_t colsLocal, double stdDev,
                        int layer, int chunk) {
        ParamInfo p;
        p.name = name;
        p.pieces = {piece(name, rows, cols, 0, rows, t * colsLocal, (t + 1) * colsLocal)};
        p.initStd = stdDev;
        p.layer = layer;
        p.chunk = chunk;
        return add(p);
    };
    auto rowSplit = [&](const std::string& name, int64_t rows, int64_t cols, int64_t rowsLocal, double stdDev,
                        int layer, int chunk) {
        ParamInfo p;
        p.name = name;
        p.pieces = {piece(name, rows, cols, t * rowsLocal, (t + 1) * rowsLocal, 0, cols)};
        p.initStd = stdDev;
        p.layer = layer;
        p.chunk = chunk;
        return add(p);
    };

    const int p = plan.pp, v = plan.vpp, stage = ctx.coords.pp;
    // Virtual stage u holds layers [start[u], start[u + 1]) of the model (even or uneven split, FORMULAS.md §5.4).
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    std::vector<int> start(counts.size() + 1, 0);
    for (size_t u = 0; u < counts.size(); ++u) start[u + 1] = start[u] + counts[u];
    for (int c = 0; c < v; ++c) {
        ChunkParams cp;
        cp.chunk = c;
        const int virt = c * p + stage;
        cp.firstLayer = start[static_cast<size_t>(virt)];
        cp.lastLayer = start[static_cast<size_t>(virt) + 1];
        cp.embedding = virt == 0;
        cp.head = virt == p * v - 1;
        if (cp.embedding) {
            cp.wte = rowSplit("wte", vPad, h, m.vocabLocal, 0.02, -1, c);
            if (model.position == PositionEmbedding::Learned) {
                ParamInfo pe;
                pe.name = "wpe";
                pe.pieces = {piece("wpe", model.seqLen, h, 0, model.seqLen, 0, h)};
                pe.initStd = 0.01;
                pe.replicatedOverTp = true;
                pe.chunk = c;
                cp.wpe = add(pe);
            }
        }
        for (int layer = cp.firstLayer; layer < cp.lastLayer; ++layer) {
            const std::string pre = "layer." + std::to_string(layer) + ".";
            LayerParams L;
            L.layer = layer;
            L.ln1w = vec(pre + "ln1.weight", h, InitKind::Ones, true, layer, c);
            if (!m.rms) L.ln1b = vec(pre + "ln1.bias", h, InitKind::Zeros, true, layer, c);
            L.q = colSplit(pre + "attn.q.weight", h, q, m.qL, 0.02, layer, c);
            L.k = colSplit(pre + "attn.k.weight", h, kv, m.kvL, 0.02, layer, c);
            L.v = colSplit(pre + "attn.v.weight", h, kv, m.kvL, 0.02, layer, c);
            if (m.qkvBias) {
                L.qb = vec(pre + "attn.q.bias", q, InitKind::Zeros, false, layer, c, t * m.qL, (t + 1) * m.qL);
                L.kb = vec(pre + "attn.k.bias", kv, InitKind::Zeros, false, layer, c, t * m.kvL, (t + 1) * m.kvL);
                L.vb = vec(pre + "attn.v.bias", kv, InitKind::Zeros, false, layer, c, t * m.kvL, (t + 1) * m.kvL);
            }
            L.proj = rowSplit(pre + "attn.proj.weight", q, h, m.qL, outStd, layer, c);
            if (m.bias) L.projb = vec(pre + "attn.proj.bias", h, InitKind::Zeros, true, layer, c);
            L.ln2w = vec(pre + "ln2.weight", h, InitKind::Ones, true, layer, c);
            if (!m.rms) L.ln2b = vec(pre + "ln2.bias", h, InitKind::Zeros, true, layer, c);
            if (m.moe) {
                const int E = m.experts, El = E / plan.ep;
                const int64_t F = m.expertF;
                ParamInfo r;
                r.name = pre + "mlp.router.weight";
                r.pieces = {piece(r.name, h, E, 0, h, 0, E)};
                r.replicatedOverTp = true;
                r.layer = layer;
                r.chunk = c;
                L.router = add(r);
                for (int le = 0; le < El; ++le) {
                    const int e = ctx.ep.myIndex * El + le;
                    const std::string epre = pre + "mlp.expert." + std::to_string(e) + ".";
                    ParamInfo fc1;
                    fc1.name = epre + "fc1.weight";
                    if (m.swiglu)
                        fc1.pieces = {piece(epre + "gate.weight", h, F, 0, h, 0, F, 0, 0),
                                      piece(epre + "up.weight", h, F, 0, h, 0, F, 0, F)};
                    else
                        fc1.pieces = {piece(fc1.name, h, F, 0, h, 0, F)};
                    fc1.expert = true;
                    fc1.layer = layer;
                    fc1.chunk = c;
                    L.expertFc1.push_back(add(fc1));
                    ParamInfo fc2;
                    fc2.name = epre + "fc2.weight";
                    fc2.pieces = {piece(fc2.name, F, h, 0, F, 0, h)};
                    fc2.initStd = outStd;
                    fc2.expert = true;
                    fc2.layer = layer;
                    fc2.chunk = c;
                    L.expertFc2.push_back(add(fc2));
                }
                cp.layers.push_back(L);
                continue;
            }
            if (m.swiglu) {
                // One local [h, 2 fL] weight = [gate columns | up columns] of this TP rank (Megatron's fused fc1).
                ParamInfo fc1;
                fc1.name = pre + "mlp.fc1.weight";
                fc1.pieces = {piece(pre + "mlp.gate.weight", h, f, 0, h, t * m.fL, (t + 1) * m.fL, 0, 0),
                              piece(pre + "mlp.up.weight", h, f, 0, h, t * m.fL, (t + 1) * m.fL, 0, m.fL)};
                fc1.layer = layer;
                fc1.chunk = c;
                L.fc1 = add(fc1);
            } else {
                L.fc1 = colSplit(pre + "mlp.fc1.weight", h, f, m.fL, 0.02, layer, c);
                if (m.bias) L.fc1b = vec(pre + "mlp.fc1.bias", f, InitKind::Zeros, false, layer, c, t * m.fL, (t + 1) * m.fL);
            }
            L.fc2 = rowSplit(pre + "mlp.fc2.weight", f, h, m.fL, outStd, layer, c);
            if (m.bias) L.fc2b = vec(pre + "mlp.fc2.bias", h, InitKind::Zeros, true, layer, c);
            cp.layers.push_back(L);
        }
        if (cp.head) {
            cp.lnfw = vec("lnf.weight", h, InitKind::Ones, true, -1, c);
            if (!m.rms) cp.lnfb = vec("lnf.bias", h, InitKind::Zeros, true, -1, c);
            if (model.tiedEmbeddings && cp.embedding) {
                cp.lmHead = cp.wte; // one rank holds both ends: literally the same tensor
            } else {
                // Untied: its own matrix; tied across stages: a copy of wte (same name, same values),
                // kept equal by the embedding-gradient all-reduce.
                const std::string name = model.tiedEmbeddings ? "wte" : "lm_head";
                cp.lmHead = rowSplit(name, vPad, h, m.vocabLocal, 0.02, -1, c);
                params_[static_cast<size_t>(cp.lmHead)].info.tiedEmbeddingCopy = model.tiedEmbeddings;
            }
        }
        m.chunks.push_back(std::move(cp));
    }
    initialiseParameters(backend, params_, seed, true);
}

int GptModel::chunks() const { return static_cast<int>(impl_->chunks.size()); }

std::pair<int, int> GptModel::chunkLayers(int chunk) const {
    const auto& c = impl_->chunks.at(static_cast<size_t>(chunk));
    return {c.firstLayer, c.lastLayer};
}
bool GptModel::chunkHasEmbedding(int chunk) const { return impl_->chunks.at(static_cast<size_t>(chunk)).embedding; }
bool GptModel::chunkHasHead(int chunk) const { return impl_->chunks.at(static_cast<size_t>(chunk)).head; }
int64_t GptModel::hiddenRows() const { return impl_->Tl; }
double GptModel::takeLossSum() {
    const double s = impl_->lossSum;
    impl_->lossSum = 0.0;
    return s;
}
size_t GptModel::liveActivationSets() const { return impl_->live.size(); }

int GptModel::bucketsPerChunk() const {
    const auto& c = impl_->chunks.front();
    return c.lastLayer - c.firstLayer;
}

std::vector<int> GptModel::bucketParameters(int chunk, int bucket, bool expert) const {
    const auto& c = impl_->chunks.at(static_cast<size_t>(chunk));
    const int n = c.lastLayer - c.firstLayer;
    std::vector<int> out;
    const int layer = c.lastLayer - 1 - bucket;
    for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
        const ParamInfo& info = params_[static_cast<size_t>(i)].info;
        if (info.chunk != chunk || info.expert != expert) continue;
        const bool inLayer = info.layer == layer;
        const bool isHead = !expert && info.layer < 0 && bucket == 0 && c.head && i != c.wte && i != c.wpe;
        const bool isEmbedding = !expert && info.layer < 0 && bucket == n - 1 && c.embedding && (i == c.wte || i == c.wpe);
        if (inLayer || isHead || isEmbedding) out.push_back(i);
    }
    return out;
}

std::vector<std::vector<int>> GptModel::parameterUnits(int chunk) const {
    const auto& c = impl_->chunks.at(static_cast<size_t>(chunk));
    std::vector<std::vector<int>> units;
    if (c.embedding) {
        units.push_back({c.wte});
        if (c.wpe >= 0) units.back().push_back(c.wpe);
    }
    for (const LayerParams& L : c.layers) {
        std::vector<int> unit;
        for (int i = 0; i < static_cast<int>(params_.size()); ++i)
            if (params_[static_cast<size_t>(i)].info.chunk == chunk && params_[static_cast<size_t>(i)].info.layer == L.layer)
                unit.push_back(i);
        units.push_back(std::move(unit));
    }
    if (c.head) {
        units.push_back({c.lnfw});
        if (c.lnfb >= 0) units.back().push_back(c.lnfb);
        units.back().push_back(c.lmHead);
    }
    return units;
}

void GptModel::setParameterResidency(ParameterResidency* residency) { impl_->residency = residency; }

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
    Tensor x = input;                                                             // [Tl, h]
    if (c.embedding) m.withUnit(chunk, 0, false, [&] { x = m.embed(c, acts, data); });
    if (!c.embedding && (x.dim(0) != m.Tl || x.dim(1) != m.h))
        throw RuntimeError("forward input " + x.shapeString() + " is not [" + std::to_string(m.Tl) + ", " + std::to_string(m.h) + "]");
    acts.layers.resize(c.layers.size());
    const int firstLayerUnit = c.embedding ? 1 : 0;
    for (size_t l = 0; l < c.layers.size(); ++l) {
        m.withUnit(chunk, firstLayerUnit + static_cast<int>(l), false, [&] {
            if (m.fullRecompute) {
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
            if (m.fullRecompute) {
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
