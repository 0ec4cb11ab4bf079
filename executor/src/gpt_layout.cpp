// GPT parameter layout: each parameter's TP shard, chunk and layer; its gradient buckets and ZeRO-3 units.
#include "tessel/exec/gpt.hpp"

#include "gpt_impl.hpp"

#include "tessel/exec/run_output.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/framework.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace tessel::exec {

namespace {
using namespace detail;

ParamPiece piece(const std::string& full, int64_t fullRows, int64_t fullCols, int64_t r0, int64_t r1, int64_t c0,
                 int64_t c1, int64_t localRow = 0, int64_t localCol = 0) {
    return {full, fullRows, fullCols, r0, r1, c0, c1, localRow, localCol};
}

// A SwiGLU fc1's bias on split index `at` of widthLocal columns: one local [1, 2 widthLocal] = [gate | up], as the
// fused weight, from the gate and up biases of width `width` (prefix + "gate.bias", "up.bias"), zero-initialised.
// The backends' activation for the model's MLP: GELU (GPT-2) and GeGLU's gate GELU's tanh form, SwiGLU's gate SiLU,
// Nemotron's squared ReLU.
Pointwise mlpActivationOf(Activation a) {
    switch (a) {
    case Activation::Gelu:
    case Activation::Geglu: return Pointwise::Gelu;
    case Activation::Swiglu: return Pointwise::Silu;
    case Activation::SquaredRelu: return Pointwise::SquaredRelu;
    }
    return Pointwise::Gelu;
}

ParamInfo gluBias(const std::string& prefix, int64_t width, int64_t widthLocal, int64_t at, int layer, int chunk) {
    ParamInfo b;
    b.name = prefix + "fc1.bias";
    b.pieces = {piece(prefix + "gate.bias", 1, width, 0, 1, at * widthLocal, (at + 1) * widthLocal, 0, 0),
                piece(prefix + "up.bias", 1, width, 0, 1, at * widthLocal, (at + 1) * widthLocal, 0, widthLocal)};
    b.init = InitKind::Zeros;
    b.layer = layer;
    b.chunk = chunk;
    return b;
}
} // namespace

GptModel::~GptModel() = default;

GptModel::GptModel(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, uint64_t seed)
    : impl_(std::make_unique<Impl>(model, ctx, backend, params_)) {
    Impl& m = *impl_;
    const Plan& plan = ctx.plan;
    if (model.moe) {
        // Megatron-LM and Megatron-core refuse MoE with tensor parallelism but without sequence parallelism
        // (arguments.py, TransformerConfig); the experts are split over TP as the dense MLP is (etp = tp).
        if (plan.tp > 1 && !plan.sequenceParallel)
            throw InputError("/plan/sequence_parallel",
                             "mixture-of-experts layers with tp > 1 need sequence parallelism (as Megatron requires)");
        if (model.moe->experts < 1 || model.moe->topK < 1 || model.moe->topK > model.moe->experts)
            throw InputError("/model/moe", "top_k must be between 1 and the number of experts");
        if (model.moe->experts % plan.ep != 0)
            throw InputError("/plan/ep", "ep must divide the model's experts");
        if (!plan.expertLayoutApart() && plan.dp % plan.ep != 0) throw InputError("/plan/ep", "ep must divide dp");
        m.experts = model.moe->experts;
        m.topK = model.moe->topK;
        m.expertF = model.moe->expertFfnHidden;
        if (m.expertF % plan.expertTp() != 0)
            throw InputError(plan.etp > 0 ? "/plan/etp" : "/plan/tp", "expert TP must divide moe.expert_ffn_hidden");
        m.expertFl = m.expertF / plan.expertTp();
        if (model.moe->sharedFfnHidden % plan.tp != 0) throw InputError("/plan/tp", "tp must divide moe.shared_ffn_hidden");
        m.sharedFl = model.moe->sharedFfnHidden / plan.tp;
    } else if (plan.ep > 1) {
        throw InputError("/plan/ep", "ep > 1 needs a model with a moe block");
    }
    if (plan.cp > 1 && model.seqLen % (2 * plan.cp) != 0)
        throw InputError("/plan/cp", "seq_len must divide by 2 cp (the load-balanced context-parallel split)");
    if (model.mla) {
        ProblemList mlaProblems;
        latentAttentionProblems(model, mlaProblems);
        mlaProblems.throwIfAny();
    }
    if (model.dropout > 0.0 && (model.layers >= kDropoutMaxLayers || model.heads >= kDropoutMaxHeads))
        throw InputError("/model/dropout", "the executor's dropout masks name at most " +
                                               std::to_string(kDropoutMaxLayers) + " layers and " +
                                               std::to_string(kDropoutMaxHeads) + " heads");
    m.dropout = model.dropout;
    if (!plan.flashAttention)
        throw InputError("/plan/flash_attention",
                         "the executor's attention keeps only the log-sum-exp (memory-efficient); set flash_attention true");
    const int64_t tp = plan.tp;
    m.h = model.hidden;
    m.d = model.qkHeadDim();
    m.aL = model.heads / tp;
    m.kvhL = model.kvHeads / tp;
    m.qL = m.aL * m.d;
    m.kvL = m.kvhL * m.d;
    m.oL = m.aL * model.vHeadDim();
    if (model.mla) {
        m.mla = true;
        m.qLora = model.mla->qLoraRank;
        m.kvLora = model.mla->kvLoraRank;
        m.dNope = model.mla->qkNopeHeadDim;
        m.dRope = model.mla->qkRopeHeadDim;
        m.dV = model.mla->vHeadDim;
    }
    m.fL = model.ffnHidden / tp;
    m.seqLen = model.seqLen;
    m.sequences = plan.microBatch;
    m.cp = plan.cp;
    m.cpA2a = plan.cp > 1 && (plan.cpComm == CpComm::A2a || plan.cpComm == CpComm::A2aP2p);
    m.cpRing = plan.cp > 1 && plan.cpComm == CpComm::A2aP2p;
    const int heads = m.cpRing ? plan.cpA2a : m.cp;   // the ranks of one all-to-all
    if (m.cpA2a && (m.aL % heads != 0 || m.kvhL % heads != 0))   // plan validation's rule, for a model built without it
        throw InputError(m.cpRing ? "/plan/cp_a2a_size" : "/plan/cp_comm_type",
                         "the all-to-all splits each rank's " + std::to_string(m.aL) + " query and " +
                             std::to_string(m.kvhL) + " key/value heads over " + std::to_string(heads) +
                             " ranks: they must divide by it");
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
    m.gated = model.gatedMlp();
    m.mlpAct = mlpActivationOf(model.activation);
    m.rope = model.position == PositionEmbedding::Rope;
    m.ropeDim = model.rotaryDim();
    m.bias = model.linearBias;
    m.qkvBias = model.linearBias || model.qkvBias;
    m.postNorms = model.postNorms;
    m.qkNorm = model.qkNorm;
    m.embeddingNorm = model.embeddingNorm;
    m.embeddingScale = model.embeddingScale ? std::sqrt(static_cast<double>(model.hidden)) : 1.0;
    m.parallel = model.parallelResidual;
    m.reduceOnce = model.parallelResidual && parallelResidualReducesOnceOf(plan.framework, plan.pp);
    m.fullRecompute = plan.recompute == Recompute::Full;
    m.recomputeMlp = plan.recompute == Recompute::Selective && (plan.recomputeModules & recompute_module::Mlp) && !model.moe;
    const auto recomputes = [&](uint8_t module) {
        return plan.recompute == Recompute::Selective && (plan.recomputeModules & module) != 0 && model.moe;
    };
    m.recomputeMoe = recomputes(recompute_module::Moe);
    m.recomputeMoeAct = recomputes(recompute_module::MoeAct) && !m.recomputeMoe;
    m.recomputeShared = recomputes(recompute_module::SharedExperts) && !m.recomputeMoe;
    m.recomputeMoeNorm = recomputes(recompute_module::Layernorm);
    const auto recomputesMla = [&](uint8_t module) {
        return plan.recompute == Recompute::Selective && (plan.recomputeModules & module) != 0 && model.mla;
    };
    m.recomputeMlaUpProj = recomputesMla(recompute_module::MlaUpProj);
    m.recomputeMlaNorm = recomputesMla(recompute_module::Layernorm);
    m.recomputeLayers = plan.recomputeLayers;
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

    // A matrix every TP rank holds whole (MLA's down projections).
    auto replicatedMatrix = [&](const std::string& name, int64_t rows, int64_t cols, double stdDev, int layer, int chunk) {
        ParamInfo p;
        p.name = name;
        p.pieces = {piece(name, rows, cols, 0, rows, 0, cols)};
        p.initStd = stdDev;
        p.replicatedOverTp = true;
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
        const int virt = plan.virtualStage(stage, c);
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
            if (model.embeddingNorm) {
                cp.lnew = vec("embed_norm.weight", h, InitKind::Ones, true, -1, c);
                if (!m.rms) cp.lneb = vec("embed_norm.bias", h, InitKind::Zeros, true, -1, c);
            }
        }
        for (int layer = cp.firstLayer; layer < cp.lastLayer; ++layer) {
            const std::string pre = "layer." + std::to_string(layer) + ".";
            LayerParams L;
            L.layer = layer;
            L.ln1w = vec(pre + "ln1.weight", h, InitKind::Ones, true, layer, c);
            if (!m.rms) L.ln1b = vec(pre + "ln1.bias", h, InitKind::Zeros, true, layer, c);
            if (m.mla) {
                // A head of q and of k is [rotary | position-free] (gpt_impl.hpp), so q's up projection holds each
                // head's rotary columns first; kv_up each head's key columns, then its value columns.
                if (m.qLora > 0) {
                    L.qDown = replicatedMatrix(pre + "attn.q_down.weight", h, m.qLora, 0.02, layer, c);
                    L.qLatentNormW = vec(pre + "attn.q_latent_norm.weight", m.qLora, InitKind::Ones, true, layer, c);
                    if (!m.rms) L.qLatentNormB = vec(pre + "attn.q_latent_norm.bias", m.qLora, InitKind::Zeros, true, layer, c);
                    L.q = colSplit(pre + "attn.q_up.weight", m.qLora, q, m.qL, 0.02, layer, c);
                } else {
                    L.q = colSplit(pre + "attn.q.weight", h, q, m.qL, 0.02, layer, c);
                }
                L.kvDown = replicatedMatrix(pre + "attn.kv_down.weight", h, m.kvLora + m.dRope, 0.02, layer, c);
                L.kvLatentNormW = vec(pre + "attn.kv_latent_norm.weight", m.kvLora, InitKind::Ones, true, layer, c);
                if (!m.rms) L.kvLatentNormB = vec(pre + "attn.kv_latent_norm.bias", m.kvLora, InitKind::Zeros, true, layer, c);
                L.kvUp = colSplit(pre + "attn.kv_up.weight", m.kvLora, model.heads * (m.dNope + m.dV), m.aL * (m.dNope + m.dV),
                                  0.02, layer, c);
            } else {
                L.q = colSplit(pre + "attn.q.weight", h, q, m.qL, 0.02, layer, c);
                L.k = colSplit(pre + "attn.k.weight", h, kv, m.kvL, 0.02, layer, c);
                L.v = colSplit(pre + "attn.v.weight", h, kv, m.kvL, 0.02, layer, c);
            }
            if (m.qkvBias && !m.mla) {
                L.qb = vec(pre + "attn.q.bias", q, InitKind::Zeros, false, layer, c, t * m.qL, (t + 1) * m.qL);
                L.kb = vec(pre + "attn.k.bias", kv, InitKind::Zeros, false, layer, c, t * m.kvL, (t + 1) * m.kvL);
                L.vb = vec(pre + "attn.v.bias", kv, InitKind::Zeros, false, layer, c, t * m.kvL, (t + 1) * m.kvL);
            }
            if (model.qkNorm) {
                L.qnw = vec(pre + "attn.q_norm.weight", m.d, InitKind::Ones, true, layer, c);
                L.knw = vec(pre + "attn.k_norm.weight", m.d, InitKind::Ones, true, layer, c);
                if (!m.rms) {
                    L.qnb = vec(pre + "attn.q_norm.bias", m.d, InitKind::Zeros, true, layer, c);
                    L.knb = vec(pre + "attn.k_norm.bias", m.d, InitKind::Zeros, true, layer, c);
                }
            }
            L.proj = rowSplit(pre + "attn.proj.weight", model.heads * model.vHeadDim(), h, m.oL, outStd, layer, c);
            if (m.bias) L.projb = vec(pre + "attn.proj.bias", h, InitKind::Zeros, true, layer, c);
            if (model.postNorms) {
                L.lnpaw = vec(pre + "ln_post_attn.weight", h, InitKind::Ones, true, layer, c);
                if (!m.rms) L.lnpab = vec(pre + "ln_post_attn.bias", h, InitKind::Zeros, true, layer, c);
                L.lnpmw = vec(pre + "ln_post_mlp.weight", h, InitKind::Ones, true, layer, c);
                if (!m.rms) L.lnpmb = vec(pre + "ln_post_mlp.bias", h, InitKind::Zeros, true, layer, c);
            }
            L.ln2w = vec(pre + "ln2.weight", h, InitKind::Ones, true, layer, c);
            if (!m.rms) L.ln2b = vec(pre + "ln2.bias", h, InitKind::Zeros, true, layer, c);
            L.moe = model.moe && std::find(model.moe->denseLayers.begin(), model.moe->denseLayers.end(), layer) ==
                                     model.moe->denseLayers.end();
            // The dense MLP (a dense layer's, or an MoE layer's shared experts): fc1 column-split over TP, one local
            // [h, 2 wl] weight = [gate columns | up columns] with SwiGLU (Megatron's fused fc1), its bias split the same
            // way; fc2 row-split.
            auto denseMlp = [&](const std::string& mpre, int64_t width, int64_t wl, bool withBias, int& fc1, int& fc1b,
                                int& fc2) {
                if (m.gated) {
                    ParamInfo w1;
                    w1.name = mpre + "fc1.weight";
                    w1.pieces = {piece(mpre + "gate.weight", h, width, 0, h, t * wl, (t + 1) * wl, 0, 0),
                                 piece(mpre + "up.weight", h, width, 0, h, t * wl, (t + 1) * wl, 0, wl)};
                    w1.layer = layer;
                    w1.chunk = c;
                    fc1 = add(w1);
                    if (withBias) fc1b = add(gluBias(mpre, width, wl, t, layer, c));
                } else {
                    fc1 = colSplit(mpre + "fc1.weight", h, width, wl, 0.02, layer, c);
                    if (withBias) fc1b = vec(mpre + "fc1.bias", width, InitKind::Zeros, false, layer, c, t * wl, (t + 1) * wl);
                }
                fc2 = rowSplit(mpre + "fc2.weight", width, h, wl, outStd, layer, c);
            };
            if (L.moe) {
                const int E = m.experts, El = E / plan.ep;
                const int64_t F = m.expertF, Fl = m.expertFl, te = ctx.expertTp.myIndex;
                ParamInfo r;
                r.name = pre + "mlp.router.weight";
                r.pieces = {piece(r.name, h, E, 0, h, 0, E)};
                r.replicatedOverTp = true;
                r.layer = layer;
                r.chunk = c;
                L.router = add(r);
                // One of an expert's parameters: sharded over EP, reduced over the expert data-parallel group;
                // `replicated` over expert TP, the group that splits the expert.
                auto expertParam = [&](const std::string& name, std::vector<ParamPiece> pieces, InitKind init,
                                       double stdDev, bool replicated) {
                    ParamInfo info;
                    info.name = name;
                    info.pieces = std::move(pieces);
                    info.init = init;
                    info.initStd = stdDev;
                    info.replicatedOverTp = replicated;
                    info.expert = true;
                    info.layer = layer;
                    info.chunk = c;
                    return add(info);
                };
                for (int le = 0; le < El; ++le) {
                    const int e = ctx.ep.myIndex * El + le;
                    const std::string epre = pre + "mlp.expert." + std::to_string(e) + ".";
                    const int64_t c0 = te * Fl, c1 = (te + 1) * Fl;
                    L.expertFc1.push_back(expertParam(
                        epre + "fc1.weight",
                        m.gated ? std::vector<ParamPiece>{piece(epre + "gate.weight", h, F, 0, h, c0, c1, 0, 0),
                                                           piece(epre + "up.weight", h, F, 0, h, c0, c1, 0, Fl)}
                                 : std::vector<ParamPiece>{piece(epre + "fc1.weight", h, F, 0, h, c0, c1)},
                        InitKind::Normal, 0.02, false));
                    if (m.bias) {
                        // fc1's bias split over expert TP as fc1 (SwiGLU: [gate | up] as the fused weight); fc2's
                        // replicated over it (added once, on expert-TP rank 0, before the partial outputs are
                        // reduce-scattered).
                        L.expertFc1b.push_back(expertParam(
                            epre + "fc1.bias",
                            m.gated ? gluBias(epre, F, Fl, te, layer, c).pieces
                                     : std::vector<ParamPiece>{piece(epre + "fc1.bias", 1, F, 0, 1, c0, c1)},
                            InitKind::Zeros, 0.0, false));
                        L.expertFc2b.push_back(
                            expertParam(epre + "fc2.bias", {piece(epre + "fc2.bias", 1, h, 0, 1, 0, h)}, InitKind::Zeros, 0.0, true));
                    }
                    L.expertFc2.push_back(expertParam(epre + "fc2.weight", {piece(epre + "fc2.weight", F, h, c0, c1, 0, h)},
                                                      InitKind::Normal, outStd, false));
                }
                if (m.sharedFl > 0) {
                    denseMlp(pre + "mlp.shared.", model.moe->sharedFfnHidden, m.sharedFl, m.bias, L.sharedFc1, L.sharedFc1b,
                             L.sharedFc2);
                    if (m.bias) L.sharedFc2b = vec(pre + "mlp.shared.fc2.bias", h, InitKind::Zeros, true, layer, c);
                }
                cp.layers.push_back(L);
                continue;
            }
            denseMlp(pre + "mlp.", f, m.fL, m.bias, L.fc1, L.fc1b, L.fc2);
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

int GptModel::bucketsPerChunk(int chunk) const {
    const auto& c = impl_->chunks.at(static_cast<size_t>(chunk));
    return std::max(1, c.lastLayer - c.firstLayer);
}

std::vector<int> GptModel::bucketParameters(int chunk, int bucket, bool expert) const {
    const auto& c = impl_->chunks.at(static_cast<size_t>(chunk));
    const int n = std::max(1, c.lastLayer - c.firstLayer); // buckets
    std::vector<int> out;
    const int layer = c.lastLayer - 1 - bucket;
    for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
        const ParamInfo& info = params_[static_cast<size_t>(i)].info;
        if (info.chunk != chunk || info.expert != expert) continue;
        const bool inLayer = info.layer == layer;
        const bool embeddingParam = i == c.wte || i == c.wpe || i == c.lnew || i == c.lneb;
        const bool isHead = !expert && info.layer < 0 && bucket == 0 && c.head && !embeddingParam;
        const bool isEmbedding = !expert && info.layer < 0 && bucket == n - 1 && c.embedding && embeddingParam;
        if (inLayer || isHead || isEmbedding) out.push_back(i);
    }
    return out;
}

std::vector<std::vector<int>> GptModel::parameterUnits(int chunk) const {
    const auto& c = impl_->chunks.at(static_cast<size_t>(chunk));
    std::vector<std::vector<int>> units;
    if (c.embedding) {
        units.push_back({c.wte});
        for (int i : {c.wpe, c.lnew, c.lneb})
            if (i >= 0) units.back().push_back(i);
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

} // namespace tessel::exec
