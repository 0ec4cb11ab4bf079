// Parameters one rank holds: per transformer layer under TP/EP (attention, MLA, MLP, experts, norms), the word
// embedding and LM head, the MTP modules, and per pipeline stage and virtual chunk (FORMULAS.md §1).
#include "tessel/cost/parameters.hpp"

#include "zero3_gather.hpp"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace tessel {

namespace {
double d(int64_t v) { return static_cast<double>(v); }

double normParams(const ModelConfig& m, int64_t width) { return m.norm == NormKind::LayerNorm ? 2.0 * d(width) : d(width); }
double normParams(const ModelConfig& m) { return normParams(m, m.hidden); }

// One MLP of width `ffn` split over tp: fc1 (gate and up for SwiGLU) column-parallel, fc2 row-parallel with its bias
// replicated.
std::pair<double, double> mlpModulesLocal(const ModelConfig& m, int64_t ffn, int tp) {
    const double h = d(m.hidden);
    const double inWidth = (m.gatedMlp() ? 2.0 : 1.0) * d(ffn);
    const double bias = m.linearBias ? 1.0 : 0.0;
    return {h * inWidth / tp + bias * inWidth / tp, d(ffn) * h / tp + bias * h};
}
double mlpParamsLocal(const ModelConfig& m, int64_t ffn, int tp) {
    const auto [fc1, fc2] = mlpModulesLocal(m, ffn, tp);
    return fc1 + fc2;
}

// Standard attention's QKV (column-parallel, with its bias where the model has one) and output projection
// (row-parallel, its bias replicated) on one rank. With fewer key/value heads than tp ranks (kv_replication), each
// rank holds the one K/V head its query heads read.
std::pair<double, double> attentionModulesLocal(const ModelConfig& m, int tp) {
    const double h = d(m.hidden), q = d(m.heads) * d(m.headDim) / tp;
    const double kv = d(std::max<int64_t>(1, m.kvHeads / tp)) * d(m.headDim);
    // A learned sink per head (attention_sinks) goes with its head's share.
    const double sinks = m.attentionSinks ? d(m.heads) / tp : 0.0;
    return {h * (q + 2.0 * kv) + (m.linearBias || m.qkvBias ? q + 2.0 * kv : 0.0) + sinks, q * h + (m.linearBias ? h : 0.0)};
}

struct LayerParamsLocal {
    double dense = 0.0;
    double expert = 0.0;
};

LayerParamsLocal layerParamsLocal(const ModelConfig& m, const Plan& p) {
    LayerParamsLocal l;
    const double h = d(m.hidden);
    if (m.mla) {
        // MLA under TP (Megatron-core MLASelfAttention): the down projections to the latents are duplicated on every
        // TP rank (TELinear parallel_mode "duplicated"), the up projections column- and the output row-parallel;
        // the latents' norms are replicated.
        const MlaConfig& a = *m.mla;
        const double heads = d(m.heads);
        const double down = h * d(a.qLoraRank) + h * d(a.kvLoraRank + a.qkRopeHeadDim);
        const double up = (a.qLoraRank > 0 ? d(a.qLoraRank) : h) * heads * d(a.qkHeadDim()) +
                          d(a.kvLoraRank) * heads * d(a.qkNopeHeadDim + a.vHeadDim) + heads * d(a.vHeadDim) * h;
        l.dense = down + (up + (m.attentionSinks ? heads : 0.0)) / p.tp + normParams(m, a.qLoraRank) + normParams(m, a.kvLoraRank);
        if (m.linearBias) l.dense += h;                          // projection bias is replicated
    } else {
        const auto [qkv, proj] = attentionModulesLocal(m, p.tp);
        l.dense = qkv + proj;
    }
    l.dense += (m.postNorms ? 4.0 : 2.0) * normParams(m);        // the two pre-norms (and post-norms), replicated over TP
    if (m.qkNorm) l.dense += (m.norm == NormKind::LayerNorm ? 4.0 : 2.0) * d(m.headDim); // q and k norms, replicated
    if (m.moe) {
        l.dense += h * m.moe->experts;                           // router, replicated
        if (m.moe->sharedFfnHidden > 0) l.dense += mlpParamsLocal(m, m.moe->sharedFfnHidden, p.tp); // shared experts, /tp
        l.expert = d(m.moe->experts / p.ep) * mlpParamsLocal(m, m.moe->expertFfnHidden, p.expertTp()); // /etp
    } else {
        l.dense += mlpParamsLocal(m, m.ffnHidden, p.tp);
    }
    return l;
}

} // namespace

LinearModules denseLinearModules(const ModelConfig& model, const Plan& plan) {
    const auto [qkv, proj] = attentionModulesLocal(model, plan.tp);
    const auto [fc1, fc2] = mlpModulesLocal(model, model.ffnHidden, plan.tp);
    return {qkv, proj, fc1, fc2};
}

// The word embedding the MTP modules look the next tokens up in, where the output layer's rank lacks the model's.
double mtpEmbeddingCopy(const ModelConfig& model, const Plan& plan) {
    if (model.mtpLayers <= 0 || model.tiedEmbeddings || plan.holdsEmbedding(plan.stageOfVirtual(plan.pp * plan.vpp - 1))) return 0.0;
    return embeddingParameters(model, plan);
}

StageParameters layerParameters(const ModelConfig& model, const Plan& plan) {
    const LayerParamsLocal layer = layerParamsLocal(model, plan);
    StageParameters sp;
    sp.dense = layer.dense;
    sp.expert = layer.expert;
    sp.largestLayer = layer.dense + layer.expert;
    return sp;
}

double embeddingParameters(const ModelConfig& model, const Plan& plan) {
    // The vocab-parallel word embedding, or the whole table on every TP rank (vocab_parallel_embedding false).
    double emb = d(paddedVocab(model, plan)) * d(model.hidden) / (vocabParallelEmbeddingOf(plan.framework) ? plan.tp : 1);
    if (model.position == PositionEmbedding::Learned) emb += d(model.seqLen) * d(model.hidden);
    if (model.embeddingNorm) emb += normParams(model); // BLOOM's embedding norm, replicated over TP
    return emb;
}

double headParameters(const ModelConfig& model, const Plan& plan) {
    double head = normParams(model);
    if (!model.tiedEmbeddings || plan.pp > 1) head += d(paddedVocab(model, plan)) * d(model.hidden) / plan.tp;
    return head;
}

StageParameters mtpParameters(const ModelConfig& model, const Plan& plan) {
    StageParameters sp;
    if (model.mtpLayers <= 0) return sp;
    const bool lastDense = model.moe && !model.moe->denseLayers.empty() && model.moe->denseLayers.back() == model.layers - 1;
    const StageParameters layer = layerParameters(lastDense ? model.denseLayerModel() : model, plan);
    const double h = d(model.hidden);
    sp.dense = model.mtpLayers * (layer.dense + 3.0 * normParams(model) + 2.0 * h * h / plan.tp);
    sp.expert = model.mtpLayers * layer.expert;
    sp.largestLayer = layer.largestLayer;
    if (const double emb = mtpEmbeddingCopy(model, plan); emb > 0.0) {
        sp.dense += emb;
        sp.largestLayer = std::max(sp.largestLayer, emb);
    }
    return sp;
}

namespace {
// What a rank holds for `layers` transformer layers, `denseLayers` of them an MoE model's dense ones (moe.dense_layers:
// the dense MLP where the others hold the experts), with the word embedding and the LM head (and the MTP modules) where
// it holds them.
StageParameters heldParameters(const ModelConfig& model, const Plan& plan, int layers, int denseLayers, bool embedding, bool head) {
    const StageParameters layer = layerParameters(model, plan);
    StageParameters sp;
    sp.dense = (layers - denseLayers) * layer.dense;
    sp.expert = (layers - denseLayers) * layer.expert;
    sp.largestLayer = layers > denseLayers ? layer.largestLayer : 0.0;
    if (denseLayers > 0) {
        const double denseLayer = layerParameters(model.denseLayerModel(), plan).total();
        sp.dense += denseLayers * denseLayer;
        sp.largestLayer = std::max(sp.largestLayer, denseLayer);
    }
    if (embedding) {
        const double emb = embeddingParameters(model, plan);
        sp.dense += emb;
        sp.largestLayer = std::max(sp.largestLayer, emb);
    }
    if (head) {
        const double headParams = headParameters(model, plan);
        const StageParameters mtp = mtpParameters(model, plan);
        sp.dense += headParams + mtp.dense;
        sp.expert += mtp.expert;
        sp.largestLayer = std::max({sp.largestLayer, headParams, mtp.largestLayer});
    }
    return sp;
}
} // namespace

StageParameters stageParameters(const ModelConfig& model, const Plan& plan, int stage) {
    return heldParameters(model, plan, stageLayerCount(model, plan, stage), denseLayersOfStage(model, plan, stage),
                          plan.holdsEmbedding(stage), plan.holdsHead(stage));
}

StageParameters chunkParameters(const ModelConfig& model, const Plan& plan, int stage, int chunk) {
    return chunkParameters(model, plan, chunkLayerCounts(model, plan), stage, chunk);
}

StageParameters chunkParameters(const ModelConfig& model, const Plan& plan, const std::vector<int>& chunkLayers, int stage,
                                int chunk) {
    const int u = plan.virtualStage(stage, chunk);
    const size_t at = static_cast<size_t>(u);
    const int layers = at < chunkLayers.size() ? chunkLayers[at] : 0;
    const int dense = model.moe && !model.moe->denseLayers.empty() && at < chunkLayers.size()
                          ? model.denseLayersIn(std::accumulate(chunkLayers.begin(), chunkLayers.begin() + u, 0), layers)
                          : 0;
    return heldParameters(model, plan, layers, dense, u == 0, u == plan.pp * plan.vpp - 1);
}

} // namespace tessel
