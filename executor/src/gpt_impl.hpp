// Internal to libtessel_exec: GptModel::Impl, the model's shapes, parameter indices and saved activations.
#pragma once

#include "tessel/exec/gpt.hpp"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tessel::exec {

namespace detail {
constexpr MemoryCategory kAct = MemoryCategory::Activations;
constexpr MemoryCategory kBuf = MemoryCategory::Buffers;
constexpr double kNormEps = 1e-5;
constexpr double kRopeBase = 10000.0;

// Indices of one layer's parameters in the model's list (-1 when the layer has none of that kind).
struct LayerParams {
    int layer = -1;
    int ln1w = -1, ln1b = -1, q = -1, k = -1, v = -1, qb = -1, kb = -1, vb = -1, proj = -1, projb = -1;
    int ln2w = -1, ln2b = -1, fc1 = -1, fc1b = -1, fc2 = -1, fc2b = -1;
    // Norms after attention and after the MLP on each block's output (post_norms: Gemma 2 and 3).
    int lnpaw = -1, lnpab = -1, lnpmw = -1, lnpmb = -1;
    // qk_norm: one norm over each head of q and one over each head of k, head_dim wide, shared by the heads.
    int qnw = -1, qnb = -1, knw = -1, knb = -1;
    // Multi-head latent attention (model.mla): the down projections to the latents [h, qLora] and [h, kvLora + dr],
    // replicated over TP; the latents' norms; the key/value up projection [kvLora, heads (dn + dv)], column-split by
    // heads. q's up projection [qLora, heads dqk] (or, without a q latent, q's projection [h, heads dqk]) is `q`, the
    // output projection [heads dv, h] `proj`.
    int qDown = -1, qLatentNormW = -1, qLatentNormB = -1, kvDown = -1, kvLatentNormW = -1, kvLatentNormB = -1, kvUp = -1;
    // Mixture of experts: the router [h, E] (replicated over TP) and this EP rank's experts, F split over expert TP as
    // the dense MLP's over TP (fc1 [h, Fl or 2 Fl], fc2 [Fl, h]; Fl = F / etp). With linear_bias each expert has an fc1
    // bias [Fl or 2 Fl] split as fc1 and an fc2 bias [h] replicated over expert TP (empty vectors without).
    int router = -1;
    std::vector<int> expertFc1, expertFc2, expertFc1b, expertFc2b;
    bool moe = false;                     // an MoE layer (an MoE model's dense_layers keep the dense MLP: fc1, fc2)
    // Shared experts: a dense MLP of shared_ffn_hidden / tp beside the routed ones (its biases with linear_bias).
    int sharedFc1 = -1, sharedFc2 = -1, sharedFc1b = -1, sharedFc2b = -1;
};

// What an MoE layer keeps from forward for backward. The tensors a GPU implementation keeps on the device are
// backend tensors, counted as activations (FORMULAS.md §2); the integer routing layout stays on the host.
struct MoeActs {
    Tensor probs;                               // [T, E] router softmax (the router's backward)
    Tensor gates;                               // [T, K] renormalised top-k probabilities
    std::vector<int> sel;                       // [T, K] chosen experts, in selection order
    std::vector<int64_t> sendRow;               // [T, K] row of each (token, k) copy in the dispatch buffer
    int64_t cap = 0;                            // rows per all-to-all block (padded)
    std::vector<std::vector<int64_t>> recvRows; // per local expert: its rows in the received buffer, gathered over TP
    std::vector<Tensor> xe, h1e, ae;            // per local expert: [n_e, h], [n_e, Fl or 2 Fl], [n_e, Fl]
    Tensor out;                                 // [T K, h] expert output of each (token, k) copy, after the combine
};

struct ChunkParams {
    int chunk = 0;
    int firstLayer = 0, lastLayer = 0; // [first, last)
    bool embedding = false, head = false;
    int wte = -1, wpe = -1, lnfw = -1, lnfb = -1, lmHead = -1;
    int lnew = -1, lneb = -1; // the norm over the embedding (embedding_norm: BLOOM's word_embeddings_layernorm)
    std::vector<LayerParams> layers;
};

// What one layer keeps from forward for backward.
struct LayerActs {
    Tensor x;                 // [Tl, h] layer input
    Tensor n1, mean1, rstd1;  // [Tl, h], [Tl], [Tl]
    Tensor q, k, v;           // [T, qL], [T, kvL], [T, kvL] (q, k after RoPE)
    Tensor qIn, kIn;          // qk_norm: q and k before their norms [T, qL], [T, kvL]
    Tensor meanq, rstdq, meank, rstdk; // qk_norm: their statistics [T aL], [T kvhL]
    Tensor o, lse;            // [T, oL], [T, aL] ([S, aL / cp] of the CP rank's heads with the all-to-all exchange)
    // MLA: the latents gathered to T rows, each norm's input and output (the up projection's input) and statistics.
    Tensor cq, cqn, meancq, rstdcq;     // [T, qLora] x2, [T] x2
    Tensor ckv, ckvn, meanckv, rstdckv; // [T, kvLora] x2, [T] x2
    Tensor kr;                          // [T, dRope] the rotary key before RoPE: kept under mla_up_proj only
    Tensor x2;                // [Tl, h] after the attention residual (a parallel block has none: its MLP reads x)
    Tensor n2, mean2, rstd2;  // [Tl, h], [Tl], [Tl]
    Tensor h1;                // [T, fL] (GELU) or [T, 2 fL] (SwiGLU: gate | up)
    Tensor a;                 // [T, fL] activation output
    Tensor ya, meanpa, rstdpa; // post_norms: the attention block's output [Tl, h] before its norm, [Tl], [Tl]
    Tensor ym, meanpm, rstdpm; // post_norms: the MLP block's output [Tl, h] before its norm, [Tl], [Tl]
    MoeActs moe;              // MoE layers only
    Tensor sh1, sa;           // shared experts: as h1 and a, sharedFl wide
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
    Tensor embX, meane, rstde;          // embedding_norm: its input [Tl, h] and statistics [Tl]
    // Head (last virtual stage).
    Tensor headX, nf, meanf, rstdf;     // [Tl, h] x3, [Tl] x2
    Tensor logits;                      // [T, Vl] overwritten by its gradient in backward
    Tensor cappedLogits;                // [T, Vl] logit_softcap: the capped logits, for the cap's backward
    std::vector<double> max, sumExp;    // [T]
    std::vector<int32_t> targets;
    std::vector<PendingWeightGrad> pending;
    // Dropout's coordinates of the micro-batch (MicroBatchData): the step's index of its first sequence, the step's key.
    int64_t firstSequence = 0;
    uint64_t dropoutKey = 0;
};
} // namespace detail

// Every tensor carries a shape comment; T = tokens of the micro-batch, Tl = T/tp with sequence parallelism
// (else T), h hidden, qL/kvL local query/key-value width, fL local ffn width.
struct GptModel::Impl {
    ModelConfig model;
    ParallelContext ctx;
    Backend& be;
    std::vector<Parameter>& params;
    std::vector<detail::ChunkParams> chunks;
    int64_t T = 0, Tl = 0, h = 0, qL = 0, kvL = 0, aL = 0, kvhL = 0, d = 0, fL = 0, vocabLocal = 0, vocabBegin = 0;
    int64_t seqLen = 0, sequences = 0;
    // Context parallelism: each sequence is cut into 2 cp chunks; CP rank r holds chunks r and 2cp-1-r
    // (the load-balanced zig-zag split), sLocal = s/cp tokens per sequence at global positions localPos.
    int cp = 1;
    int64_t sLocal = 0;
    std::vector<int64_t> localPos;      // [sLocal] this rank's global positions within a sequence
    std::vector<std::vector<int64_t>> rankPos; // [cp][sLocal] every CP rank's positions
    double lossScale = 1.0;
    bool rms = false, rope = false, bias = false, qkvBias = false, sp = false;
    // A gated MLP (SwiGLU, GeGLU): fc1 [h, 2 fl] = [gate | up]; the activation, of the gate where gated.
    bool gated = false;
    Pointwise mlpAct = Pointwise::Gelu;
    // Attention and the MLP side by side (ModelConfig::parallelResidual): both read the layer input; with
    // reduceOnce their row-parallel outputs are summed before one TP reduction (parallelResidualReducesOnceOf).
    bool parallel = false, reduceOnce = false;
    bool postNorms = false, embeddingNorm = false, qkNorm = false;
    double embeddingScale = 1.0; // embedding_scale: sqrt(hidden) (Gemma's normalizer), else 1
    int64_t ropeDim = 0; // with rope: the columns of each head it rotates (ModelConfig::rotaryDim)
    // The attention output's width on this rank, the output projection's input: aL x v's head width (qL but for MLA).
    int64_t oL = 0;
    // ---- multi-head latent attention (model.mla, gpt_mla.cpp; DeepSeek-V2/V3 as Megatron-core's MLASelfAttention) ----
    // A head of q and k is [rotary dRope | position-free dNope] (d = dRope + dNope; the order inside a head is the
    // executor's, the same for q and k, so the scores are those of [dNope | dRope]); k's rotary part is one key of
    // dRope columns shared by the heads; v's heads are dV wide, padded with zero columns to d for the attention kernel
    // (exact: the padded output columns are zero and their gradient is zero).
    bool mla = false;
    int64_t qLora = 0, kvLora = 0, dNope = 0, dRope = 0, dV = 0;
    void latentNormForward(const Tensor& x, int w, int b, Tensor& y, Tensor& mean, Tensor& rstd, MemoryCategory cat);
    // The latent norm's backward from a gradient that is partial over TP (each rank's heads' share): dx partial too,
    // the norm's own gradient summed over TP.
    Tensor latentNormBackward(const Tensor& dy, const Tensor& x, int w, int b, const Tensor& mean, const Tensor& rstd);
    // [T, aL w] <-> [T, aL d] per head: w columns at column `at` of each d-wide head (zeros elsewhere), and back.
    Tensor widenHeads(const Tensor& x, int64_t w, int64_t at, MemoryCategory cat);
    Tensor narrowHeads(const Tensor& x, int64_t w, int64_t at, MemoryCategory cat);
    // q, k, v (kept in a), the attention and its output a.o [T, oL] from the layer's norm output a.n1 [Tl, h].
    void mlaForward(const detail::LayerParams& L, detail::LayerActs& a, const detail::ChunkActs& acts, MemoryCategory cat);
    // From the latents a.cq, a.ckv (and, without a q latent, a.n1) and the rotary key before RoPE kr [T, dRope]: the
    // latent norms, q, k and v in `cat` (what mla_up_proj reruns).
    void mlaUpProjections(const detail::LayerParams& L, detail::LayerActs& a, const Tensor& kr, MemoryCategory cat);
    // Megatron-core's recompute modules of a latent-attention layer: mla_up_proj drops the latent norms' outputs, q, k
    // and v (keeping the latents and the rotary key before RoPE), layernorm the input norm's output and statistics;
    // each is rebuilt before the attention's backward.
    bool recomputeMlaUpProj = false, recomputeMlaNorm = false;
    void rebuildMla(const detail::LayerParams& L, detail::LayerActs& a);
    // dn1 [Tl, h] from dO [T, oL]; the weight gradients accumulate.
    Tensor mlaBackward(const detail::LayerParams& L, const detail::LayerActs& a, detail::ChunkActs& acts, const Tensor& dO,
                       bool defer);
    bool fullRecompute = false;
    int recomputeLayers = 0; // with fullRecompute: the first n layers of each chunk (0: all; Plan::recomputeLayers)
    bool recomputes(size_t layerInChunk) const {
        return fullRecompute && (recomputeLayers == 0 || layerInChunk < static_cast<size_t>(recomputeLayers));
    }
    int experts = 0, topK = 0;
    int64_t expertF = 0, expertFl = 0; // expert FFN width, and this expert-TP rank's share of it (F / etp)
    int64_t sharedFl = 0;              // shared experts' FFN width on this TP rank (0: none)
    std::map<std::pair<int, int>, detail::ChunkActs> live; // (mb, chunk) -> activations
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
    Tensor gatherSeq(const Tensor& x, MemoryCategory cat);
    // [T, h] partial sums -> [Tl, h]: reduce-scatter over TP with SP; all-reduce without.
    Tensor reduceSeq(Tensor& partial);
    // Gradient of a parameter replicated over TP but fed by sequence-sharded tokens: sum the partial over TP.
    void addReplicatedGrad(int param, Tensor& partial);
    Tensor zerosLike(const Tensor& t, MemoryCategory cat) { return be.zeros(t.shape(), cat); }

    // dW += X^T dY now, or later in the W pass.
    // What the W pass keeps is stored for backward: an activation. Tensors that are transient buffers
    // (gathered inputs, output gradients) are copied into activation memory so the accounting says so.
    Tensor retain(const Tensor& t);
    void weightGrad(detail::ChunkActs& acts, const Tensor& x, const Tensor& dy, int param, bool transposed,
                    bool defer);
    void biasGrad(int param, const Tensor& dy);
    void replicatedBiasGrad(int param, const Tensor& dy);

    Tensor linear(const Tensor& x, int w, int b, MemoryCategory cat);

    std::vector<int64_t> allPositions() const;
    std::vector<int64_t> tokenPositions(int64_t rows, int64_t firstRow) const;

    // ---- context parallelism: K/V all-gather over CP and the reduce-scatter of their gradients ----
    // Rank-major rows [cp][sequences][sLocal] <-> sequence-major, position-ordered rows [sequences][seqLen].
    // Each half-chunk of s/(2cp) rows is contiguous on both sides.
    void cpReorder(const Tensor& src, Tensor& dst, bool toPositionOrder);
    // [T, kvL] local -> [sequences * seqLen, kvL] every position's rows (identity without CP).
    Tensor cpGather(const Tensor& x);
    // [sequences * seqLen, kvL] partial gradients -> [T, kvL] this rank's rows, summed over CP.
    Tensor cpReduce(const Tensor& full);
    // The all-to-all exchanges (gpt_cp.cpp): cp_comm_type a2a (DeepSpeed-Ulysses, Transformer Engine's a2a) trades
    // the heads for the positions over the whole CP group; a2a+p2p (Megatron-core's hierarchical context parallelism)
    // over each group of cp_a2a_size consecutive CP ranks, whose K and V are then gathered over the groups (cpP2p: the
    // ranks of my index in every group), as the executor's p2p gathers them. Member i of the heads group takes head
    // block i of n; its queries are the group's tokens, its keys every position.
    bool cpA2a = false;  // cp > 1 with either all-to-all exchange
    bool cpRing = false; // ... with a2a+p2p
    const Group& cpHeadsGroup() const;
    // [T, heads x d] of this rank's tokens -> [n T, heads/n x d]: block j of the columns to member j, the rows
    // received member-major ([n][sequences][sLocal]); and back (rows [n T, w] member-major -> [T, n w] in `cat`).
    Tensor headsToGroup(const Tensor& x);
    Tensor headsFromGroup(const Tensor& rows, MemoryCategory cat);
    // Member-major rows [n][sequences][sLocal] <-> sequence-major [sequences][n sLocal] (the queries' layout), and
    // the queries' positions in a sequence: each member's, in member order.
    void groupRowsToSequences(const Tensor& src, Tensor& dst, bool toSequences);
    std::vector<int64_t> groupQueryPositions() const;
    // q (or o, dO) -> [sequences n sLocal, heads/n x d] the group's queries; and back to [T, heads x d] in `cat`.
    Tensor queriesOfGroup(const Tensor& x);
    Tensor queriesToMine(const Tensor& x, MemoryCategory cat);
    // k or v -> [sequences seqLen, kv heads/n x d] every position of my block of the heads; their gradients back to
    // [T, kv heads x d], summed over the groups.
    Tensor keysOfAll(const Tensor& x);
    Tensor keyGradientsToMine(const Tensor& full);
    // This rank's tokens (or targets) of the full micro-batch.
    std::vector<int32_t> localRows(const std::vector<int32_t>& full) const;

    void normForward(const Tensor& x, int w, int b, Tensor& y, Tensor& mean, Tensor& rstd,
                     MemoryCategory cat);
    // qk_norm: x [T, heads d] normalised over each head's d columns by the one norm `w`, `b` ([d]); y in cat. The
    // backward returns dx [T, heads d]; the norm's gradient, summed over this rank's heads, is summed over TP too
    // (the ranks hold different heads).
    Tensor headNormForward(const Tensor& x, int64_t heads, int w, int b, Tensor& mean, Tensor& rstd, MemoryCategory cat);
    // What layer L's attention does to its scores: the model's soft-cap, its sliding window where the layer is
    // windowed, ALiBi's biases for this TP rank's heads.
    // With dropout, attention dropout on the probabilities at the micro-batch's coordinates.
    ScoreRule scoreRule(const detail::LayerParams& L, const detail::ChunkActs& acts) const;
    // Attention of the group's queries over every position for this rank's block of the heads (the all-to-all
    // exchanges): forward, keeping o in this rank's tokens' layout and lse in the heads', and backward from them.
    Tensor attentionA2aForward(const Tensor& q, const Tensor& k, const Tensor& v, const ScoreRule& rule, Tensor& lse,
                               MemoryCategory cat);
    void attentionA2aBackward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                              const ScoreRule& rule, const Tensor& dO, Tensor& dq, Tensor& dk, Tensor& dv);
    // ---- dropout (dropout.hpp; ModelConfig::dropout on the embedding, the attention probabilities and each block's
    // output before its residual add, as Megatron-LM's embedding_dropout, attention_dropout and bias-dropout-add) ----
    double dropout = 0.0;
    DropoutRule dropoutRule(const detail::ChunkActs& acts, int layer, DropoutSite site) const {
        DropoutRule r;
        r.p = dropout;
        r.key = acts.dropoutKey;
        r.layer = static_cast<uint32_t>(layer);
        r.site = site;
        return r;
    }
    // x [Tl, h] of this rank's rows (its sequence-parallel share) in place; on a gradient, that dropout's backward.
    void hiddenDropout(Tensor& x, const detail::ChunkActs& acts, int layer, DropoutSite site);
    // The gradient through a block's output dropout: dy itself without dropout, else a masked copy.
    Tensor hiddenDropoutBackward(const Tensor& dy, const detail::ChunkActs& acts, int layer, DropoutSite site);
    Tensor headNormBackward(const Tensor& dy, const Tensor& x, int64_t heads, int w, int b, const Tensor& mean,
                            const Tensor& rstd);
    // A norm whose input is kept (cat) and whose output is a transient buffer: post_norms' and the embedding's.
    Tensor keptInputNorm(const Tensor& x, int w, int b, Tensor& kept, Tensor& mean, Tensor& rstd, MemoryCategory cat);
    // dx = norm backward; the norm's weight/bias gradients are replicated over TP.
    Tensor normBackward(const Tensor& dy, const Tensor& x, int w, int b, const Tensor& mean,
                        const Tensor& rstd);

    // ---- mixture of experts (GShard-style dispatch/combine over the EP group; no capacity dropping) ----
    // Expert e lives on EP member e / (E/ep). Every rank routes its own tokens (with TP, its sequence-parallel
    // share); the dispatch buffer has one block of `cap` rows per EP member (padded to the largest block of the
    // call over EP and TP), rows ordered by expert, then by (token, k). Padding rows are zeros and never read.
    // With expert TP (Megatron-core's order; etp = tp, or its own group when the plan folds the experts): the rows
    // received over EP are all-gathered over expert TP, each of its ranks runs its F/etp of every local expert on all
    // of them, and the partial outputs are reduce-scattered back before the return all-to-all.
    Tensor epExchange(const std::vector<double>& host, int64_t rows);
    // [rows, h] per expert-TP rank -> [etp rows, h] (gather), or [etp rows, h] partial -> [rows, h] summed.
    std::vector<double> tpGatherRows(const std::vector<double>& host, int64_t rows);
    std::vector<double> tpReduceScatterRows(const std::vector<double>& host, int64_t rows);
    Tensor gatherHostRows(const std::vector<double>& src, const std::vector<int64_t>& rows,
                          MemoryCategory cat);
    void scatterHostRows(const Tensor& t, const std::vector<int64_t>& rows, std::vector<double>& dst);

    // y [Tl, h] = sum_k gate_tk expert_{sel_tk}(x_t) for this rank's tokens x = n2 [Tl, h].
    Tensor moeForward(const detail::LayerParams& L, const Tensor& x, detail::LayerActs& la,
                      detail::ChunkActs& acts, MemoryCategory cat);

    // dx [Tl, h] of the MoE block for dy [Tl, h]; router and expert weight gradients accumulate.
    Tensor moeBackward(const detail::LayerParams& L, const Tensor& dy, const Tensor& x,
                       detail::LayerActs& la, detail::ChunkActs& acts, bool defer);

    // ---- the dense MLP block (a dense layer's, or an MoE layer's shared experts) ----
    // y [Tl, h] = g(act(f(n2) W1 + b1) W2) for n2 [Tl, h]; W1 column- and W2 row-split over TP, width fl on this
    // rank; keeps h1 [T, fl or 2 fl] and act [T, fl]; with `reduce` false, the [T, h] partial sum before g. Backward:
    // dn2 [Tl, h] for dy [Tl, h] (or its gathered [T, h] where the caller has it), weight grads accumulate.
    Tensor mlpForward(int fc1, int fc1b, int fc2, int64_t fl, const Tensor& n2, Tensor& h1, Tensor& act,
                      MemoryCategory cat, bool reduce = true);
    // Its first half: h1 and act from n2.
    void mlpActivations(int fc1, int fc1b, int64_t fl, const Tensor& n2, Tensor& h1, Tensor& act, MemoryCategory cat);
    // Megatron-core's selective recompute of the dense MLP (recompute_modules mlp): the forward keeps none of the MLP
    // block's own tensors (the norm's output and statistics, h1, act: the memory model's `mlp` part), the backward
    // rebuilds them from the block's input. The category the forward gives them, and the rebuild.
    MemoryCategory mlpCategory(MemoryCategory cat) const { return recomputeMlp && cat == detail::kAct ? detail::kBuf : cat; }
    void dropMlp(detail::LayerActs& a, MemoryCategory cat) const;
    void rebuildMlp(const detail::LayerParams& L, detail::LayerActs& a);
    bool recomputeMlp = false;
    // An MoE model's recompute modules (Megatron-core's): `moe` the whole MoE block from its input (router, dispatch,
    // experts, combine, shared experts, their collectives rerun in the backward); `moe_act` each expert's activation
    // (its fc2 input), `shared_experts` the shared experts' fc1 output and activation, `layernorm` an MoE layer's
    // pre-MLP norm output and statistics (a dense layer's norm is fused into its fc1: nothing to drop). What each
    // drops is made as a buffer in the forward and rebuilt before the backward that reads it.
    bool recomputeMoe = false, recomputeMoeAct = false, recomputeShared = false, recomputeMoeNorm = false;
    MemoryCategory dropped(bool recomputed, MemoryCategory cat) const {
        return recomputed && cat == detail::kAct ? detail::kBuf : cat;
    }
    // Rebuilds what the forward of MoE layer L dropped (a no-op for what it kept).
    void rebuildMoe(const detail::LayerParams& L, detail::LayerActs& a, detail::ChunkActs& acts);
    Tensor mlpBackward(int fc1, int fc1b, int fc2, int64_t fl, const Tensor& dy, const Tensor& n2, const Tensor& h1,
                       const Tensor& act, detail::ChunkActs& acts, bool defer, const Tensor& dyGathered = Tensor());

    // ---- one transformer layer ----
    Tensor layerForward(const detail::LayerParams& L, const Tensor& x, detail::LayerActs& a,
                        detail::ChunkActs& acts, MemoryCategory cat);

    // The rest of the layer's forward from the attention's output a.o [T, oL]: the output projection, its reduction,
    // the residual and the MLP block.
    Tensor attentionOutputForward(const detail::LayerParams& L, const Tensor& x, detail::LayerActs& a,
                                  detail::ChunkActs& acts, MemoryCategory cat);

    // The rest of a parallel block's forward from the attention's partial output [T, h]: its MLP on the layer input,
    // the reduction(s), the block's one output dropout and the residual.
    Tensor parallelBlockForward(const detail::LayerParams& L, const Tensor& x, Tensor& attnPartial,
                                detail::LayerActs& a, const detail::ChunkActs& acts, MemoryCategory cat);

    Tensor layerBackward(const detail::LayerParams& L, const Tensor& dout, detail::LayerActs& a,
                         detail::ChunkActs& acts, bool defer);

    // ---- embedding (virtual stage 0) ----
    Tensor embed(const detail::ChunkParams& c, detail::ChunkActs& acts, const MicroBatchData& data);
    void embedBackward(const detail::ChunkParams& c, detail::ChunkActs& acts, const Tensor& dx);

    // ---- LM head and vocab-parallel cross-entropy (last virtual stage) ----
    void head(const detail::ChunkParams& c, detail::ChunkActs& acts, const Tensor& x,
              const MicroBatchData& data);
    Tensor headBackward(const detail::ChunkParams& c, detail::ChunkActs& acts, bool defer);
};

} // namespace tessel::exec
