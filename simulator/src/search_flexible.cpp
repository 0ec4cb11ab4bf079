// Search over GPU counts up to a bound (idle GPUs allowed): one exact search per whole-node count, largest first,
// skipping counts whose best conceivable throughput cannot reach the K-th best found, and one merged ranking.
#include "tessel/sim/search.hpp"

#include "tessel/cost/model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace tessel::sim {

namespace {

// The GPU counts a plan may use on `maxGpus` GPUs of this cluster, largest first: whole nodes, then the parts of one
// node that divide it (as clusterForGpus accepts).
std::vector<int> gpuCounts(int maxGpus, int gpusPerNode) {
    std::vector<int> out;
    const int perNode = std::max(1, gpusPerNode);
    for (int g = maxGpus / perNode * perNode; g >= perNode; g -= perNode) out.push_back(g);
    for (int g = std::min(maxGpus, perNode - 1); g >= 1; --g)
        if (perNode % g == 0) out.push_back(g);
    return out;
}

// An upper bound on the tokens per second of any plan on `gpus` GPUs: every GPU runs GEMMs at its best rate and does
// only the 6 N FLOPs per token of the active linear weights (Kaplan et al. 2020's 6N; attention, norms and
// communication only add time), N without the embedding lookup and the norms (a 1% margin covers biases).
double maxTokensPerSecond(const ModelConfig& model, const ClusterConfig& cluster, const std::string& precision, int gpus) {
    const ParameterCounts c = countParameters(model);
    double linear = static_cast<double>(activeParameters(model) - c.embedding - c.finalNorm) -
                    static_cast<double>(model.layers) * static_cast<double>(c.perLayerNorms);
    if (model.tiedEmbeddings) linear += static_cast<double>(model.vocab) * static_cast<double>(model.hidden); // the head GEMM
    const PrecisionRecipe* recipe = findPrecisionRecipe(precision);
    const Dtype dtype = recipe ? recipe->gemmDtype : Dtype::Bf16;
    double peak = 0.0;
    for (const auto& [d, flops] : cluster.gpu.peakFlopsPerSecond)
        if (d == dtype || d == Dtype::Bf16 || d == Dtype::Fp16) peak = std::max(peak, flops);
    if (!(linear > 0.0) || !(peak > 0.0)) return std::numeric_limits<double>::infinity();
    // No GEMM runs above the GPU's best efficiency (the shape model's plateau, or the table's largest point), unless
    // calibration replaced the kernels or scales the phases down: then the peak itself.
    double efficiency = 1.0;
    bool calibrated = !cluster.gpu.kernels.empty();
    for (const auto& [phase, fit] : cluster.gpu.phaseFits) calibrated = calibrated || fit.timeScale < 1.0 || fit.overheadSeconds < 0.0;
    if (!calibrated && cluster.gpu.gemmModel && !cluster.gpu.gemmModel->maxEfficiency.empty()) {
        efficiency = 0.0;
        for (const auto& [d, e] : cluster.gpu.gemmModel->maxEfficiency) efficiency = std::max(efficiency, e);
    } else if (!calibrated && !cluster.gpu.gemmModel && !cluster.gpu.gemmEfficiency.empty()) {
        efficiency = 0.0;
        for (const auto& point : cluster.gpu.gemmEfficiency) efficiency = std::max(efficiency, point.efficiency);
    }
    efficiency = std::clamp(efficiency, 1e-4, 1.0);
    return gpus * peak * efficiency / (6.0 * 0.99 * linear);
}

// Whether some split of `gpus` into tp x pp x cp x dp passes the model's divisibility rules (validatePlan's: tp divides
// heads, kv heads and the dense and shared-expert FFN widths, pp divides the layers, 2 cp divides seq_len, a batch of
// the range divisible by dp). The routed experts' width is not asked of tp: the search's folded MoE plans split the
// experts over etp 1 whatever tp is. Necessary for any valid plan, so a count that fails it has none and is not
// searched.
bool anySplit(const ModelConfig& m, int gpus, int minBatch, int maxBatch) {
    auto batchFits = [&](int dp) { return (std::max(minBatch, maxBatch) / dp) * dp >= minBatch; };
    // Each degree divides a model size (tp the heads, pp the layers, 2 cp the sequence), so it stops there: the loops
    // are the model's, not the GPU count's (a million GPUs would otherwise cost a million steps a count).
    const int64_t maxCp = std::max<int64_t>(1, m.seqLen / 2);
    for (int tp = 1; tp <= std::min(gpus, std::max(1, m.heads)); ++tp) {
        if (gpus % tp || m.heads % tp || m.kvHeads % tp || m.ffnHidden % tp) continue;
        if (m.moe && m.moe->sharedFfnHidden % tp) continue;
        const int rest = gpus / tp;
        for (int pp = 1; pp <= std::min(rest, std::max(1, m.layers)); ++pp) {
            if (rest % pp || m.layers % pp) continue;
            const int rest2 = rest / pp;
            for (int cp = 1; cp <= std::min<int64_t>(rest2, maxCp); ++cp) {
                if (rest2 % cp || (cp > 1 && m.seqLen % (2 * cp))) continue;
                if (batchFits(rest2 / cp)) return true;
            }
        }
    }
    return false;
}

double rankKey(const RankedPlan& r, Objective objective) {
    if (objective == Objective::Memory) return r.peakBytes;
    return r.metrics.tokensPerSecond > 0.0 ? 1.0 / r.metrics.tokensPerSecond : std::numeric_limits<double>::infinity();
}

} // namespace

SearchResult searchPlansUpTo(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                             const SearchOptions& options) {
    if (!space.allowIdle) return searchPlans(model, cluster, space, options);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int> counts = gpuCounts(space.gpus, cluster.gpusPerNode);
    const size_t topK = static_cast<size_t>(std::max(1, options.topK));
    SearchResult merged;
    merged.gpuCountsSearched = 0;
    std::vector<RankedPlan> all;
    for (size_t i = 0; i < counts.size(); ++i) {
        const int gpus = counts[i];
        if (options.cancel && options.cancel->load()) {
            merged.cancelled = true;
            break;
        }
        // Counts only fall from here on, and so does the bound: stop once it cannot reach the K-th best.
        if (options.objective != Objective::Memory && all.size() >= topK) {
            std::vector<double> tps;
            for (const auto& r : all) tps.push_back(r.metrics.tokensPerSecond);
            std::nth_element(tps.begin(), tps.begin() + static_cast<long>(topK - 1), tps.end(), std::greater<>());
            if (maxTokensPerSecond(model, cluster, space.precision, gpus) < tps[topK - 1]) break;
        }
        if (!anySplit(model, gpus, space.globalBatch, space.maxGlobalBatch)) continue;
        SearchSpace one = space;
        one.gpus = gpus;
        one.allowIdle = false;
        // A count the space's own rules exclude (a fixed tp, pp, dp or cp that does not divide it) has no plan.
        if (!searchProblems(model, cluster, one, options).empty()) continue;
        SearchOptions sub = options;
        if (options.progress) {
            const double n = static_cast<double>(counts.size());
            const double from = static_cast<double>(i) / n, to = static_cast<double>(i + 1) / n;
            sub.progress = [&options, from, to](double f) { options.progress(from + (to - from) * f); };
        }
        const SearchResult r = searchPlans(model, cluster, one, sub);
        ++merged.gpuCountsSearched;
        merged.considered += r.considered;
        merged.feasible += r.feasible;
        merged.simulated += r.simulated;
        merged.pruningSeconds += r.pruningSeconds;
        merged.simulationSeconds += r.simulationSeconds;
        merged.threads = std::max(merged.threads, r.threads);
        for (const auto& [reason, n] : r.rejected) merged.rejected[reason] += n;
        for (RankedPlan p : r.top) {
            p.idleGpus = space.gpus - gpus;
            if (cluster.pricePerGpuHour > 0.0) {
                // Idle GPUs are paid for: the request's GPUs over the ones that work.
                p.pricePerUsedGpuHour = cluster.pricePerGpuHour * space.gpus / gpus;
                p.tokensPerDollar = p.metrics.tokensPerSecond / (space.gpus * cluster.pricePerGpuHour / 3600.0);
            }
            all.push_back(std::move(p));
        }
        if (r.cancelled) {
            merged.cancelled = true;
            break;
        }
    }
    // Best first; equal keys keep the larger GPU count's order (stable, searched first).
    std::stable_sort(all.begin(), all.end(), [&](const RankedPlan& a, const RankedPlan& b) {
        return rankKey(a, options.objective) < rankKey(b, options.objective);
    });
    if (all.size() > topK) all.resize(topK);
    merged.top = std::move(all);
    if (options.objective != Objective::Memory) explainRanking(merged.top, options.objective);
    for (size_t i = 0; i < merged.top.size(); ++i) {
        RankedPlan& r = merged.top[i];
        // The validated band of #1 against each plan's time per token (different GPU counts and batches).
        r.tiedWithBest = i > 0 && options.objective != Objective::Memory && !r.errorBandKind.empty() &&
                         merged.top.front().metrics.tokensPerSecond / r.metrics.tokensPerSecond - 1.0 <= r.errorBand;
        if (r.tiedWithBest) {
            char band[32];
            std::snprintf(band, sizeof band, "%.1f%%", 100.0 * r.errorBand);
            r.why = "a tie with #1 within the model's validated error (" + std::string(band) + ", " + r.errorBandKind +
                    "); " + r.why;
        }
    }
    merged.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return merged;
}

} // namespace tessel::sim
