// ZeRO-3 gather buffers: the parameters a stage holds gathered at once, unit by unit (FSDP, tessel's executor) or
// module by module under DeepSpeed's parameter coordinator (FORMULAS.md §2 "Other").
#include "zero3_gather.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/plan.hpp"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace tessel {

namespace {
double d(int64_t v) { return static_cast<double>(v); }

// DeepSpeed's ZeRO-3 gathers module by module, not layer by layer (partitioned_param_coordinator.py, DeepSpeed 0.5
// on): fetch_sub_module gathers the module about to run, then, once the trace of the first step is recorded,
// prefetches the trace's next modules while fewer than stage3_max_live_parameters elements are gathered, at most
// stage3_prefetch_bucket_size at a time (whole parameters: the last may pass it; parameters already gathered are
// passed over); release_sub_module frees a module's parameters after it ran unless the trace uses them again within
// stage3_max_reuse_distance elements, or the prefetch has already passed that use. Walked over one pass of the stage
// (forward, then backward, each fully recomputed layer's forward replayed before its backward), the largest total
// gathered is the peak. Modules: the word and position embeddings, each layer's QKV, output projection, fc1 and fc2
// (weights with their biases; norms and small biases are under stage3_param_persistence_threshold, 1e5, kept whole,
// and not counted), the head (a tied head is the word embedding again). An MoE or MLA layer counts as one module.
// Only a one-stage plan (DeepSpeed runs ZeRO-3 without its pipeline engine); others take the unit rule below.
struct DeepSpeedLiveSet {
    double peak = 0.0;    // parameters gathered at once, at most
    double largest = 0.0; // the largest module's parameters: autograd writes its whole gradient before the hook takes it
};
DeepSpeedLiveSet deepSpeedZero3LiveParameters(const ModelConfig& model, const Plan& plan) {
    const DeepSpeedStage3 limits = deepSpeedStage3Of(plan.framework);
    std::vector<double> numel;          // per module id
    std::vector<std::vector<int>> layer; // the module ids of each layer, in forward order
    const double h = d(model.hidden);
    const double tp = plan.tp;
    // An MoE or MLA layer is one module; a dense layer's linears one each.
    std::vector<double> perLayer;
    if (model.moe || model.mla) {
        const StageParameters whole = layerParameters(model, plan);
        perLayer = {whole.dense + whole.expert};
    } else {
        const LinearModules lin = denseLinearModules(model, plan);
        perLayer = {lin.qkv, lin.proj, lin.fc1, lin.fc2};
    }
    for (int l = 0; l < model.layers; ++l) {
        std::vector<int> ids;
        for (const double n : perLayer) {
            ids.push_back(static_cast<int>(numel.size()));
            numel.push_back(n);
        }
        layer.push_back(std::move(ids));
    }
    const int word = static_cast<int>(numel.size());
    numel.push_back(d(paddedVocab(model, plan)) * h / (vocabParallelEmbeddingOf(plan.framework) ? tp : 1.0));
    int position = -1;
    if (model.position == PositionEmbedding::Learned) {
        position = static_cast<int>(numel.size());
        numel.push_back(d(model.seqLen) * h);
    }
    int head = word;
    if (!model.tiedEmbeddings) {
        head = static_cast<int>(numel.size());
        numel.push_back(d(paddedVocab(model, plan)) * h / tp);
    }
    // The trace of one micro-batch's pass.
    std::vector<int> trace;
    trace.push_back(word);
    if (position >= 0) trace.push_back(position);
    for (const auto& ids : layer) trace.insert(trace.end(), ids.begin(), ids.end());
    trace.push_back(head); // forward
    trace.push_back(head); // backward
    const int replayed = plan.recomputedLayersOf(model.layers);
    for (int l = model.layers - 1; l >= 0; --l) {
        const auto& ids = layer[static_cast<size_t>(l)];
        if (l < replayed) trace.insert(trace.end(), ids.begin(), ids.end());
        trace.insert(trace.end(), ids.rbegin(), ids.rend());
    }
    if (position >= 0) trace.push_back(position);
    trace.push_back(word);

    const size_t n = trace.size();
    // Elements of the trace before each step, and each step's next use of its module (n: none).
    std::vector<double> before(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i) before[i + 1] = before[i] + numel[static_cast<size_t>(trace[i])];
    std::vector<size_t> nextUse(n, n), last(numel.size(), n);
    for (size_t i = n; i-- > 0;) {
        nextUse[i] = last[static_cast<size_t>(trace[i])];
        last[static_cast<size_t>(trace[i])] = i;
    }
    std::vector<bool> gathered(numel.size(), false);
    double live = 0.0, peak = 0.0;
    size_t queue = 0; // the prefetch queue: trace steps not yet passed
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<size_t>(trace[i]);
        if (!gathered[id]) {
            gathered[id] = true;
            live += numel[id];
        }
        queue = std::max(queue, i + 1);
        const double budget = std::min(d(limits.maxLiveParameters) - live, d(limits.prefetchBucketSize));
        for (double fetched = 0.0; queue < n && fetched < budget; ++queue) {
            const auto next = static_cast<size_t>(trace[queue]);
            if (gathered[next]) continue;
            gathered[next] = true;
            live += numel[next];
            fetched += numel[next];
        }
        peak = std::max(peak, live);
        // Released unless reused within the distance (the elements of the steps between) or already passed by the
        // prefetch.
        const size_t k = nextUse[i];
        const bool keep = k < n && (before[k] - before[i + 1] < d(limits.maxReuseDistance) || k < queue);
        if (!keep) {
            gathered[id] = false;
            live -= numel[id];
        }
    }
    return {peak, *std::max_element(numel.begin(), numel.end())};
}

} // namespace

// ZeRO-3 gather buffers, in parameters: a stage gathers its chunks unit by unit (the embedding, each layer, the
// head) and holds the unit in use plus the next one prefetched (FSDP's one-deep prefetch, tessel's executor). The
// next unit follows in the pass or, between passes, is another pass's first: the peak is the largest sum of two
// consecutive units of a chunk or of two distinct chunk ends; a stage whose only unit is one layer holds just that
// layer. A DeepSpeed plan on one stage walks its coordinator instead (above).
double zero3GatherParameters(const ModelConfig& model, const Plan& plan, int stage) {
    if (deepSpeedGathersByModule(plan)) return deepSpeedZero3LiveParameters(model, plan).peak;
    const StageParameters perLayer = layerParameters(model, plan);
    const double layer = perLayer.dense + perLayer.expert;
    const bool denseAmongMoe = model.moe && !model.moe->denseLayers.empty();
    const double denseLayer = denseAmongMoe ? layerParameters(model.denseLayerModel(), plan).total() : layer;
    const std::vector<int> counts = denseAmongMoe ? chunkLayerCounts(model, plan) : std::vector<int>{};
    double peak = 0.0;
    std::vector<std::pair<double, int>> ends; // (parameters, unit id) of every chunk's first and last unit
    int id = 0;
    for (int c = 0; c < plan.vpp; ++c) {
        const int virtualStage = plan.virtualStage(stage, c);
        std::vector<double> units;
        if (virtualStage == 0) units.push_back(embeddingParameters(model, plan));
        if (denseAmongMoe) {
            // Each layer at its own size: an MoE model's dense layers gather the dense MLP.
            const int first = std::accumulate(counts.begin(), counts.begin() + virtualStage, 0);
            for (int l = first; l < first + counts[static_cast<size_t>(virtualStage)]; ++l)
                units.push_back(model.denseLayersIn(l, 1) ? denseLayer : layer);
        } else {
            units.insert(units.end(), static_cast<size_t>(chunkLayerCount(model, plan, stage, c)), layer);
        }
        if (virtualStage == plan.pp * plan.vpp - 1) {
            double head = headParameters(model, plan);
            // A tied LM head on the embedding's own stage is the word embedding: gathered again for the head.
            if (model.tiedEmbeddings && plan.pp * plan.vpp == 1) head += d(paddedVocab(model, plan)) * d(model.hidden) / plan.tp;
            units.push_back(head);
            // The MTP modules after it, one unit each, and the embedding copy they look tokens up in.
            if (model.mtpLayers > 0) {
                const double copy = mtpEmbeddingCopy(model, plan);
                if (copy > 0.0) units.push_back(copy);
                const double module = (mtpParameters(model, plan).total() - copy) / model.mtpLayers;
                units.insert(units.end(), static_cast<size_t>(model.mtpLayers), module);
            }
        }
        if (units.empty()) continue;
        peak = std::max(peak, units.front());
        for (size_t i = 0; i + 1 < units.size(); ++i) peak = std::max(peak, units[i] + units[i + 1]);
        ends.emplace_back(units.front(), id);
        ends.emplace_back(units.back(), id + static_cast<int>(units.size()) - 1);
        id += static_cast<int>(units.size());
    }
    for (const auto& a : ends)
        for (const auto& b : ends)
            if (a.second != b.second) peak = std::max(peak, a.first + b.first);
    return peak;
}

double deepSpeedLargestModuleParameters(const ModelConfig& model, const Plan& plan) {
    return deepSpeedZero3LiveParameters(model, plan).largest;
}

bool deepSpeedGathersByModule(const Plan& plan) {
    return plan.framework.name == "deepspeed" && plan.zeroStage >= 3 && plan.pp == 1 && plan.vpp == 1;
}

} // namespace tessel
