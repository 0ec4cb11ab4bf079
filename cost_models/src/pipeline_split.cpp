// How transformer layers are spread over pipeline stages: even, Megatron's first/last-stage counts, an explicit
// list, or a split balanced against the embedding and the output layer + loss (FORMULAS.md §5.4).
#include "tessel/cost/compute.hpp"
#include "tessel/cost/plan.hpp"

#include <algorithm>
#include <numeric>

namespace tessel {

std::string toString(PipelineSplit s) {
    switch (s) {
    case PipelineSplit::Even: return "even";
    case PipelineSplit::Balanced: return "balanced";
    case PipelineSplit::EndsAsLayers: return "ends_as_layers";
    }
    return "?";
}

namespace {

size_t slotOf(int pp, int stage, int chunk, bool vShape) { return static_cast<size_t>(virtualStageOf(pp, stage, chunk, vShape)); }

// Spreads `total` layers of one rank over its `vpp` chunks as evenly as possible; the remainder goes to the
// chunks listed first in `preference`.
void spreadOverChunks(std::vector<int>& out, int pp, int vpp, int stage, int total, const std::vector<int>& preference,
                      bool vShape = false) {
    const int base = total / vpp;
    int extra = total % vpp;
    for (int c = 0; c < vpp; ++c) out[slotOf(pp, stage, c, vShape)] = base;
    for (int c : preference) {
        if (extra == 0) break;
        ++out[slotOf(pp, stage, c, vShape)];
        --extra;
    }
}

std::vector<int> chunkPreference(int pp, int vpp, int stage) {
    std::vector<int> order(static_cast<size_t>(vpp));
    std::iota(order.begin(), order.end(), 0);
    // The first rank's chunk 0 carries the embedding: its remainder goes to later chunks first.
    if (stage == 0 && pp > 1) std::reverse(order.begin(), order.end());
    return order;
}

// Megatron-LM core (transformer_block.get_num_layers_to_build): the first/last rank hold the stated counts,
// the other ranks share the rest evenly; every rank divides its layers evenly over its vpp chunks.
std::vector<int> firstLastSplit(const ModelConfig& model, const Plan& plan) {
    const int p = plan.pp, v = plan.vpp;
    int rest = model.layers, ranks = p;
    if (plan.firstStageLayers > 0) rest -= plan.firstStageLayers, --ranks;
    if (plan.lastStageLayers > 0 && p > 1) rest -= plan.lastStageLayers, --ranks;
    const int middle = ranks > 0 ? rest / ranks : 0;
    std::vector<int> out(static_cast<size_t>(p * v), 0);
    for (int s = 0; s < p; ++s) {
        int total = middle;
        if (s == 0 && plan.firstStageLayers > 0) total = plan.firstStageLayers;
        else if (s == p - 1 && plan.lastStageLayers > 0) total = plan.lastStageLayers;
        for (int c = 0; c < v; ++c) out[static_cast<size_t>(c * p + s)] = total / v;
    }
    return out;
}

// Work of the embedding and of the output layer + loss in layers' worth of `work` (forward, backward and the
// plan's recompute of one micro-batch): seconds on a cluster, or FLOPs when none is known. An FP8 or NVFP4 plan's
// BF16 end layers (first_last_layers_bf16) add what each costs beyond a quantized layer to its end: the first N are
// the first virtual stage's, the last M the last one's (a count that overflows that stage's layers is still charged
// to it, an approximation the balance makes only for N or M above a chunk's layers).
template <class Work>
std::pair<double, double> extraLayers(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan, Work work) {
    const PrecisionRecipe recipe = findPrecisionRecipe(plan.precision) ? precisionRecipeOf(plan) : precisionRecipeOf("megatron", plan.framework);
    auto total = [&](const BlockCompute& b) { return work(b.forward) + work(b.backward()) + work(b.recompute); };
    const double layer = total(layerCompute(model, cluster, plan, recipe));
    if (!(layer > 0.0)) return {0.0, 0.0};
    // The output layer's end also runs the multi-token-prediction modules: each a layer, the head again and its own.
    const double head = total(headCompute(model, cluster, plan, recipe));
    const double mtp = model.mtpLayers > 0 ? model.mtpLayers * (layer + head + total(mtpCompute(model, cluster, plan, recipe))) : 0.0;
    double bf16Extra = 0.0;
    if (plan.bf16EndLayers() && findPrecisionRecipe(plan.precision)) {
        const Plan bf16 = bf16EndLayerPlan(plan);
        bf16Extra = total(layerCompute(model, cluster, bf16, precisionRecipeOf(bf16))) / layer - 1.0;
    }
    return {total(embeddingCompute(model, cluster, plan, recipe)) / layer + plan.bf16LayersAtStart * bf16Extra,
            (head + mtp) / layer + plan.bf16LayersAtEnd * bf16Extra};
}

std::pair<double, double> extraLayersByFlops(const ModelConfig& model, const Plan& plan) {
    ClusterConfig unit; // FLOPs do not depend on the cluster's figures
    unit.gpu.hbmBytesPerSecond = 1.0;
    for (Dtype d : {Dtype::Bf16, Dtype::Fp16, Dtype::Fp32, Dtype::Fp64, Dtype::Fp8, Dtype::Fp4}) unit.gpu.peakFlopsPerSecond[d] = 1.0;
    return extraLayers(model, unit, plan, [](const PhaseCost& c) { return c.flops; });
}

} // namespace

std::vector<int> balancedPipelineLayers(int layers, int pp, int vpp, double firstExtraLayers, double lastExtraLayers,
                                        bool vShape) {
    std::vector<int> perRank(static_cast<size_t>(pp), vpp);
    std::vector<double> load(static_cast<size_t>(pp), vpp);
    load.front() += firstExtraLayers;
    (vShape ? load.front() : load.back()) += lastExtraLayers;
    // Unit jobs onto the least loaded rank: the smallest possible maximum load. Ties go to the rank with fewer
    // layers (the most even split among the best), then to the later rank, which holds fewer micro-batches in
    // flight under 1F1B.
    for (int left = layers - pp * vpp; left > 0; --left) {
        size_t best = 0;
        for (size_t r = 1; r < perRank.size(); ++r)
            if (load[r] < load[best] || (load[r] == load[best] && perRank[r] <= perRank[best])) best = r;
        ++perRank[best];
        load[best] += 1.0;
    }
    std::vector<int> out(static_cast<size_t>(pp * vpp), 0);
    for (int s = 0; s < pp; ++s)
        spreadOverChunks(out, pp, vpp, s, perRank[static_cast<size_t>(s)], chunkPreference(pp, vpp, s), vShape);
    return out;
}

std::vector<int> endsOnlySplit(int layers, int pp, int vpp) {
    const int slots = pp * vpp;
    if (pp < 2 || layers >= slots || layers + 2 < slots) return {};
    // Megatron-core get_num_layers_to_build: (layers + 2) / (pp vpp) a virtual stage, one fewer on the first
    // (the embedding's) and the last (the loss's). One layer short of that (layers + 1 = pp vpp) goes to the
    // embedding's stage, the lighter end.
    std::vector<int> out(static_cast<size_t>(slots), 1);
    out.front() = layers + 2 - slots;
    out.back() = 0;
    return out;
}

std::vector<int> firstLastChunkLayers(int layers, int pp, int vpp, int first, int last) {
    if (pp < 2 || vpp < 1) return {};
    int rest = layers, ranks = pp;
    if (first > 0) rest -= first, --ranks;
    if (last > 0) rest -= last, --ranks;
    if (ranks < 0 || (ranks == 0 && rest != 0) || (ranks > 0 && (rest <= 0 || rest % ranks != 0))) return {};
    const int middle = ranks > 0 ? rest / ranks : 0;
    std::vector<int> out(static_cast<size_t>(pp * vpp), 0);
    for (int s = 0; s < pp; ++s) {
        const int total = s == 0 && first > 0 ? first : s == pp - 1 && last > 0 ? last : middle;
        if (total < vpp) return {};
        spreadOverChunks(out, pp, vpp, s, total, chunkPreference(pp, vpp, s));
    }
    return out;
}

std::vector<int> chunkLayerCounts(const ModelConfig& model, const Plan& plan) {
    const int p = std::max(plan.pp, 1), v = std::max(plan.vpp, 1);
    if (!plan.pipelineLayers.empty()) return plan.pipelineLayers;
    if (plan.firstStageLayers > 0 || plan.lastStageLayers > 0) return firstLastSplit(model, plan);
    // Each multi-token-prediction module one layer more at the end, as Megatron-LM's pipeline layouts place it ("m").
    if (plan.pipelineSplit == PipelineSplit::EndsAsLayers && model.layers >= p * v)
        return balancedPipelineLayers(model.layers, p, v, p > 1 ? 1.0 : 0.0, p > 1 ? 1.0 + model.mtpLayers : 0.0,
                                      plan.vShape());
    if (plan.pipelineSplit == PipelineSplit::EndsAsLayers && !plan.vShape()) {
        const std::vector<int> ends = endsOnlySplit(model.layers, p, v);
        if (!ends.empty()) return ends;
    }
    if (plan.pipelineSplit == PipelineSplit::Balanced && model.layers >= p * v) {
        const std::vector<int>& cached = plan.resolvedPipelineLayers;
        if (cached.size() == static_cast<size_t>(p * v) && std::accumulate(cached.begin(), cached.end(), 0) == model.layers)
            return cached;
        const auto [first, last] = extraLayersByFlops(model, plan);
        return balancedPipelineLayers(model.layers, p, v, p > 1 ? first : 0.0, p > 1 ? last : 0.0, plan.vShape());
    }
    return std::vector<int>(static_cast<size_t>(p * v), model.layers / (p * v));
}

int largestChunkLayers(const ModelConfig& model, const Plan& plan) {
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

void resolvePipelineSplit(const ModelConfig& model, const ClusterConfig& cluster, Plan& plan) {
    plan.resolvedPipelineLayers.clear();
    const int p = std::max(plan.pp, 1), v = std::max(plan.vpp, 1);
    if (plan.pipelineSplit != PipelineSplit::Balanced || !plan.pipelineLayers.empty() || plan.firstStageLayers > 0 ||
        plan.lastStageLayers > 0 || model.layers < p * v || p == 1)
        return;
    if (cluster.gpu.peakFlopsPerSecond.empty()) return;
    const auto [first, last] = extraLayers(model, cluster, plan, [](const PhaseCost& c) { return c.seconds; });
    plan.resolvedPipelineLayers = balancedPipelineLayers(model.layers, p, v, first, last, plan.vShape());
}

namespace {
bool plainEven(const Plan& plan) {
    return plan.pipelineLayers.empty() && plan.firstStageLayers <= 0 && plan.lastStageLayers <= 0 &&
           plan.pipelineSplit == PipelineSplit::Even && plan.pp > 0 && plan.vpp > 0;
}
} // namespace

Plan withResolvedPipelineSplit(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    Plan out = plan;
    if (plan.pipelineSplit == PipelineSplit::Balanced && plan.resolvedPipelineLayers.empty()) resolvePipelineSplit(model, cluster, out);
    return out;
}

int chunkLayerCount(const ModelConfig& model, const Plan& plan, int stage, int chunk) {
    if (plainEven(plan)) return model.layers / (plan.pp * plan.vpp);
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    const size_t u = static_cast<size_t>(plan.virtualStage(stage, chunk));
    return u < counts.size() ? counts[u] : 0;
}

int denseLayersOfChunk(const ModelConfig& model, const Plan& plan, int stage, int chunk) {
    if (!model.moe || model.moe->denseLayers.empty()) return 0;
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    const size_t u = static_cast<size_t>(plan.virtualStage(stage, chunk));
    if (u >= counts.size()) return 0;
    const int first = std::accumulate(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(u), 0);
    return model.denseLayersIn(first, counts[u]);
}

int denseLayersOfStage(const ModelConfig& model, const Plan& plan, int stage) {
    if (!model.moe || model.moe->denseLayers.empty()) return 0;
    int n = 0;
    for (int c = 0; c < plan.vpp; ++c) n += denseLayersOfChunk(model, plan, stage, c);
    return n;
}

int bf16LayersOfStage(const ModelConfig& model, const Plan& plan, int stage) {
    if (!plan.bf16EndLayers()) return 0;
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    int n = 0;
    for (int c = 0; c < plan.vpp; ++c) {
        const size_t u = static_cast<size_t>(plan.virtualStage(stage, c));
        if (u >= counts.size()) continue;
        const int first = std::accumulate(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(u), 0);
        for (int i = first; i < first + counts[u]; ++i) n += plan.isBf16Layer(i, model.layers) ? 1 : 0;
    }
    return n;
}

RecomputedLayers recomputedLayers(const ModelConfig& model, const Plan& plan, int stage) {
    RecomputedLayers r;
    if (plan.recompute != Recompute::Full) return r;
    // (The search's memory check calls this for millions of plans: chunk counts only where some layers are kept.)
    // (A stage of no layer, the embedding or the output layer alone, rebuilds none.)
    if (plan.recomputeLayers == 0) {
        const int n = stageLayerCount(model, plan, stage);
        return {n, n > 0};
    }
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    for (int c = 0; c < plan.vpp; ++c) {
        const size_t u = static_cast<size_t>(plan.virtualStage(stage, c));
        const int n = u < counts.size() ? counts[u] : 0, replayed = plan.recomputedLayersOf(n);
        r.layers += replayed;
        r.wholeChunk = r.wholeChunk || (n > 0 && replayed == n);
    }
    return r;
}

int stageLayerCount(const ModelConfig& model, const Plan& plan, int stage) {
    if (plainEven(plan)) return model.layers / (plan.pp * plan.vpp) * plan.vpp;
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    int total = 0;
    for (int c = 0; c < plan.vpp; ++c) {
        const size_t u = static_cast<size_t>(plan.virtualStage(stage, c));
        if (u < counts.size()) total += counts[u];
    }
    return total;
}

int stageParameterTensors(const ModelConfig& model, const Plan& plan, int stage) {
    // Per layer: two norms (weight, and bias unless RMSNorm; four with q and k norms); q, k, v (each with a bias under linear or QKV
    // bias); the output projection (and its bias); the MLP's fc1 (gate and up fused) and fc2 with their biases
    // (fc1's only without SwiGLU), or a router and fc1 + fc2 for each of the rank's experts.
    const int norm = model.norm == NormKind::RmsNorm ? 1 : 2;
    const bool bias = model.linearBias, qkvBias = model.linearBias || model.qkvBias;
    const bool swiglu = model.gatedMlp();
    // MLA: q_down, its latent's norm and q_up (or one q_proj), kv_down, its latent's norm and kv_up, the output.
    const int attention = model.mla ? 2 * norm + (model.mla->qLoraRank > 0 ? 2 + norm : 1) + 2 + norm + 1 + (bias ? 1 : 0)
                                    : (model.qkNorm ? 4 : 2) * norm + 3 + (qkvBias ? 3 : 0) + 1 + (bias ? 1 : 0);
    const int postNorms = model.postNorms ? 2 * norm : 0; // after attention and after the MLP
    const int denseMlp = 2 + (bias && !swiglu ? 1 : 0) + (bias ? 1 : 0);
    const int moeMlp = model.moe ? 1 + 2 * (model.moe->experts / std::max(1, plan.ep)) + (model.moe->sharedFfnHidden > 0 ? 2 : 0)
                                 : denseMlp;
    // An MoE model's dense layers (moe.dense_layers) hold the dense MLP's tensors.
    const int layers = stageLayerCount(model, plan, stage), dense = denseLayersOfStage(model, plan, stage);
    int tensors = (layers - dense) * (attention + moeMlp) + dense * (attention + denseMlp) + layers * postNorms;
    // The embedding (and learned positions, and BLOOM's norm over it) on the first stage; the final norm and the
    // output matrix on the last, which is the embedding's own tensor only when one chunk holds both ends (tied,
    // pp x vpp = 1).
    if (plan.holdsEmbedding(stage))
        tensors += 1 + (model.position == PositionEmbedding::Learned ? 1 : 0) + (model.embeddingNorm ? norm : 0);
    if (plan.holdsHead(stage)) tensors += norm + (model.tiedEmbeddings && plan.pp * plan.vpp == 1 ? 0 : 1);
    return tensors;
}

bool evenPipelineSplit(const ModelConfig& model, const Plan& plan) {
    if (plainEven(plan)) return true;
    const std::vector<int> counts = chunkLayerCounts(model, plan);
    return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

std::string pipelineSplitText(const std::vector<int>& counts) {
    if (std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end()) return "";
    std::string out;
    for (size_t i = 0; i < counts.size();) {
        size_t j = i;
        while (j < counts.size() && counts[j] == counts[i]) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(counts[i]) + (j - i > 1 ? "x" + std::to_string(j - i) : "");
        i = j;
    }
    return out;
}

std::string pipelineSplitText(const ModelConfig& model, const Plan& plan) {
    if (evenPipelineSplit(model, plan)) return "";
    return pipelineSplitText(chunkLayerCounts(model, plan));
}

} // namespace tessel
