// Plan search ranking: simulates pruned candidates until the top K are exact, then ranks and explains them.
#include "tessel/sim/search.hpp"
#include "tessel/sim/error_band.hpp"

#include "search_estimate.hpp"
#include "search_prune.hpp"
#include "search_space.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace tessel::sim {

std::string toString(Objective o) {
    switch (o) {
    case Objective::Time: return "time";
    case Objective::Memory: return "memory";
    case Objective::TokensPerDollar: return "tokens_per_dollar";
    }
    return "?";
}

std::optional<Objective> parseObjective(const std::string& text) {
    if (text == "time") return Objective::Time;
    if (text == "memory") return Objective::Memory;
    if (text == "tokens_per_dollar") return Objective::TokensPerDollar;
    return std::nullopt;
}

namespace {
using namespace detail;
// Plans simulated per round; fixed (not tied to the thread count) so that `simulated` is deterministic.
constexpr size_t kSimulationBatch = 8;

// A simulated candidate.
struct Simulated {
    Candidate candidate;
    StepMetrics metrics;
    StageMemory peakStage;
    double peakBytes = 0.0;
    double reservedPeakBytes = 0.0;
    int peakStageIndex = 0;
};

Simulated simulateCandidate(const ModelConfig& model, const ClusterConfig& cluster, const Space& space, const Candidate& c,
                            double stopAbove) {
    const Plan plan = toPlan(space, c.code);
    // stopAbove is in the ranking's unit (seconds per sample x the largest batch when the batch is a range).
    const PlanSimulation sim = simulatePlan(model, cluster, plan, stopAbove / space.perSampleScale(plan.globalBatch));
    Simulated r;
    r.candidate = c;
    r.metrics = sim.metrics;
    r.peakBytes = sim.memory.peakBytes;
    r.reservedPeakBytes = sim.memory.reservedPeakBytes;
    r.peakStageIndex = sim.memory.peakStage;
    r.peakStage = sim.memory.stages[static_cast<size_t>(sim.memory.peakStage)];
    return r;
}

// Simulates candidates[from, to) on the worker threads, in place.
// `stopAbove`: the K-th best step found so far (infinity before K are known); a candidate slower than it before
// contention is not refined (simulatePlan's stopAbove).
void simulateRange(const ModelConfig& model, const ClusterConfig& cluster, const Space& space,
                   const std::vector<Candidate>& candidates, size_t from, size_t to, int threads,
                   std::vector<Simulated>& out, double stopAbove = std::numeric_limits<double>::infinity()) {
    const size_t n = to - from;
    const size_t base = out.size();
    out.resize(base + n);
    std::atomic<size_t> next{0};
    runThreads(std::max(1, std::min<int>(threads, static_cast<int>(n))), [&](int) {
        for (;;) {
            const size_t i = next.fetch_add(1);
            if (i >= n) return;
            out[base + i] = simulateCandidate(model, cluster, space, candidates[from + i], stopAbove);
        }
    });
}

// --- why each plan ranks where it does ---

// "12.3%", or two decimals under 1% so that small gaps stay visible.
std::string percent(double fraction) {
    char buf[32];
    const double pct = fraction * 100.0;
    std::snprintf(buf, sizeof buf, "%.*f%%", std::fabs(pct) >= 1.0 ? 1 : 2, pct);
    return buf;
}
// Step times closer than this (relative) are reported as a tie, though the order stays exact.
constexpr double kTieFraction = 5e-5;
std::string gibText(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

// The plan fields that differ, e.g. "pp 8 vs 16, ZeRO-1 vs ZeRO-0".
std::string planDiff(const Plan& a, const Plan& b) {
    std::vector<std::string> parts;
    auto num = [&](const char* name, int x, int y) {
        if (x != y) parts.push_back(std::string(name) + " " + std::to_string(x) + " vs " + std::to_string(y));
    };
    num("GPUs", a.worldSize(), b.worldSize()); // idle-GPU searches compare plans on different counts
    num("batch", a.globalBatch, b.globalBatch); // and batch ranges, different batches
    num("tp", a.tp, b.tp);
    num("pp", a.pp, b.pp);
    num("dp", a.dp, b.dp);
    num("cp", a.cp, b.cp);
    if (a.cp > 1 && b.cp > 1 && a.cpComm != b.cpComm) parts.push_back("CP " + toString(a.cpComm) + " vs " + toString(b.cpComm));
    num("ep", a.ep, b.ep);
    num("etp", a.expertTp(), b.expertTp());
    num("vpp", a.vpp, b.vpp);
    num("micro-batch", a.microBatch, b.microBatch);
    if (a.zeroStage != b.zeroStage)
        parts.push_back("ZeRO-" + std::to_string(a.zeroStage) + " vs ZeRO-" + std::to_string(b.zeroStage));
    num("ZeRO replicas", a.zeroReplicas, b.zeroReplicas);
    if (recomputeString(a) != recomputeString(b))
        parts.push_back(recomputeString(a) + " vs " + recomputeString(b) + " recompute");
    if (a.sequenceParallel != b.sequenceParallel) parts.push_back(std::string("SP ") + (a.sequenceParallel ? "on" : "off") + " vs " + (b.sequenceParallel ? "on" : "off"));
    if (a.schedule != b.schedule) parts.push_back(toString(a.schedule) + " vs " + toString(b.schedule));
    if (a.rankOrder != b.rankOrder) parts.push_back("order " + a.rankOrderString() + " vs " + b.rankOrderString());
    if (offloadString(a) != offloadString(b)) parts.push_back("offload " + offloadString(a) + " vs " + offloadString(b));
    std::string out;
    for (size_t i = 0; i < parts.size() && i < 3; ++i) out += (i ? ", " : "") + parts[i];
    if (parts.size() > 3) out += ", ...";
    return out;
}

// The step-time component where `a` and `b` differ most in the direction `sign` (+1: a spends more).
std::string timeComponent(const StepBreakdown& a, const StepBreakdown& b, double sign, bool less) {
    const std::array<std::pair<const char*, double>, 8> parts{{
        {"compute", a.computeSeconds - b.computeSeconds},
        {"exposed TP communication", a.tpSeconds - b.tpSeconds},
        {"exposed CP communication", a.cpSeconds - b.cpSeconds},
        {"exposed EP all-to-all", a.epSeconds - b.epSeconds},
        {"waiting on pipeline transfers", a.ppSeconds - b.ppSeconds},
        {"exposed DP communication", a.dpSeconds - b.dpSeconds},
        {"optimizer time", a.optimizerSeconds - b.optimizerSeconds},
        {"pipeline bubble", a.bubbleSeconds - b.bubbleSeconds},
    }};
    size_t best = 0;
    for (size_t i = 1; i < parts.size(); ++i)
        if (sign * parts[i].second > sign * parts[best].second) best = i;
    return std::string(less ? "less " : "more ") + parts[best].first;
}

std::string memoryComponent(const StageMemory& a, const StageMemory& b, double sign, bool less) {
    const std::array<std::pair<const char*, double>, 5> parts{{
        {"weights", a.weightsBytes - b.weightsBytes},
        {"gradients", a.gradsBytes - b.gradsBytes},
        {"optimizer state", a.optimizerBytes - b.optimizerBytes},
        {"activations", a.activationsBytes - b.activationsBytes},
        {"other buffers", a.otherBytes() - b.otherBytes()},
    }};
    size_t best = 0;
    for (size_t i = 1; i < parts.size(); ++i)
        if (sign * parts[i].second > sign * parts[best].second) best = i;
    return std::string(less ? "less " : "more ") + parts[best].first;
}

// "9.2% bubble, MFU 63%, 10.7 GiB headroom"
std::string planStats(const RankedPlan& r) {
    char stats[160];
    std::snprintf(stats, sizeof stats, "%s bubble, MFU %.0f%%, %s headroom", percent(r.metrics.bubbleFraction).c_str(),
                  r.metrics.mfu * 100.0, gibText(r.headroomBytes).c_str());
    return stats;
}
} // namespace

// Time per token (time per step for a fixed batch and GPU count) decides; the sentences compare neighbours.
void explainRanking(std::vector<RankedPlan>& top, Objective objective) {
    const size_t n = top.size();
    for (size_t i = 0; i < n; ++i) {
        RankedPlan& r = top[i];
        const std::string stats = planStats(r);
        std::string head;
        std::string versus;
        const char* bestWord = objective == Objective::Time ? "fastest" : "most tokens per dollar";
        head = i == 0 ? std::string(bestWord)
                      : percent(top[0].metrics.tokensPerSecond / r.metrics.tokensPerSecond - 1.0) + " slower than #1";
        if (i + 1 < n) {
            const double gain = r.metrics.tokensPerSecond / top[i + 1].metrics.tokensPerSecond - 1.0;
            versus = gain > kTieFraction ? "; beats #" + std::to_string(i + 2) + " by " + percent(gain) + " via " +
                                      timeComponent(r.metrics.breakdown, top[i + 1].metrics.breakdown, -1.0, true) + " (" +
                                      planDiff(r.plan, top[i + 1].plan) + ")"
                                : "; within 0.01% of #" + std::to_string(i + 2) + " (ahead on step time or plan key)";
        } else if (i > 0) {
            const double loss = top[i - 1].metrics.tokensPerSecond / r.metrics.tokensPerSecond - 1.0;
            versus = loss > kTieFraction ? "; behind #" + std::to_string(i) + " by " + percent(loss) + " on " +
                                      timeComponent(r.metrics.breakdown, top[i - 1].metrics.breakdown, 1.0, false) + " (" +
                                      planDiff(r.plan, top[i - 1].plan) + ")"
                                : "; within 0.01% of #" + std::to_string(i) + " (behind on step time or plan key)";
        } else {
            versus = "; the only feasible plan";
        }
        r.why = head + ": " + stats + versus;
    }
}

namespace {
void explain(std::vector<RankedPlan>& top, const std::vector<Simulated>& sims, Objective objective) {
    if (objective != Objective::Memory) {
        explainRanking(top, objective);
        return;
    }
    // Memory: the gap in peak bytes to #1 and to the neighbours, on the category that differs most.
    const size_t n = top.size();
    for (size_t i = 0; i < n; ++i) {
        RankedPlan& r = top[i];
        const std::string head = i == 0 ? "least memory: " + gibText(r.peakBytes) + " peak on stage " + std::to_string(r.peakStage)
                                        : gibText(r.peakBytes - top[0].peakBytes) + " more than #1";
        std::string versus;
        {
            if (i + 1 < n) {
                const double diff = top[i + 1].peakBytes - r.peakBytes;
                versus = diff > 0.0 ? "; " + gibText(diff) + " below #" + std::to_string(i + 2) + " via " +
                                          memoryComponent(sims[i].peakStage, sims[i + 1].peakStage, -1.0, true) + " (" +
                                          planDiff(r.plan, top[i + 1].plan) + ")"
                                    : "; same peak as #" + std::to_string(i + 2) + ", ranked by plan key";
            } else if (i > 0) {
                const double diff = r.peakBytes - top[i - 1].peakBytes;
                versus = diff > 0.0 ? "; " + gibText(diff) + " above #" + std::to_string(i) + " on " +
                                          memoryComponent(sims[i].peakStage, sims[i - 1].peakStage, 1.0, false) + " (" +
                                          planDiff(r.plan, top[i - 1].plan) + ")"
                                    : "; same peak as #" + std::to_string(i) + ", ranked by plan key";
            }
            r.why = head + ", " + planStats(r) + versus;
        }
    }
}

} // namespace

SearchResult searchPlans(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                         const SearchOptions& options) {
    const auto t0 = Clock::now();
    const Prepared p = prepare(model, cluster, space, options);
    SearchContext ctx = makeContext(model, p.cluster, p.space.base.precision, p.space.base.framework);
    if (p.space.memoryBand) requireFitWithinPeakBand(ctx, p.space.base.framework);
    Progress progress(options);
    const bool memoryObjective = options.objective == Objective::Memory;
    const size_t topK = static_cast<size_t>(options.topK);

    SearchResult result;
    result.threads = p.threads;
    Band band;
    band.memoryObjective = memoryObjective;
    band.topK = topK;
    // Progress: the pruning pass is 0-40%, simulation the rest.
    constexpr double kPruneShare = 0.4;
    PassResult pass = prunePass(p.space, ctx, p.items, band, p.threads, options, progress, 0.0, kPruneShare);
    result.considered = pass.total.considered;
    result.feasible = pass.total.feasible;
    result.rejected = rejectedMap(pass.total, p.space.runnableBy);
    result.pruningSeconds = secondsSince(t0);
    result.cancelled = pass.cancelled;
    const auto tSim = Clock::now();

    std::vector<Simulated> sims;
    std::vector<Candidate> candidates = std::move(pass.total.candidates);
    if (!result.cancelled && memoryObjective) {
        simulateRange(model, p.cluster, p.space, candidates, 0, candidates.size(), p.threads, sims);
        progress.report(1.0);
    } else if (!result.cancelled) {
        // Simulate in increasing bound order until the K-th best simulated step is below every remaining bound.
        const double bestBound = pass.total.bestBound;
        double bandHi = kBandFactor * bestBound;
        uint64_t stored = candidates.size();
        size_t next = 0;
        std::vector<double> steps; // sorted simulated step times
        for (;;) {
            if (cancelled(options)) {
                result.cancelled = true;
                break;
            }
            if (next >= candidates.size()) {
                if (stored >= result.feasible || !std::isfinite(bestBound)) break; // nothing left anywhere
                // Every stored candidate is simulated and the K-th best is still above the band: collect the
                // next band of bounds with another pruning pass (rare: only when the bound is far below the
                // simulated step time). Bands end at the K-th best step once K plans are known.
                Band more = band;
                more.lo = bandHi;
                more.hi = bandHi > 0.0 ? bandHi * kBandFactor : std::numeric_limits<double>::infinity();
                if (steps.size() >= topK) more.hi = std::max(more.hi, steps[topK - 1] * (1.0 + kBoundSlack));
                PassResult extra = prunePass(p.space, ctx, p.items, more, p.threads, options, progress, kPruneShare, kPruneShare);
                if (extra.cancelled) {
                    result.cancelled = true;
                    break;
                }
                bandHi = more.hi;
                candidates = std::move(extra.total.candidates);
                stored += candidates.size();
                next = 0;
                continue;
            }
            const size_t to = std::min(candidates.size(), next + kSimulationBatch);
            const size_t before = sims.size();
            simulateRange(model, p.cluster, p.space, candidates, next, to, p.threads, sims,
                          steps.size() >= topK ? steps[topK - 1] : std::numeric_limits<double>::infinity());
            for (size_t i = before; i < sims.size(); ++i) {
                const double key = sims[i].metrics.stepSeconds * p.space.perSampleScale(sims[i].candidate.code.globalBatch);
                steps.insert(std::upper_bound(steps.begin(), steps.end(), key), key);
            }
            next = to;
            if (steps.size() >= topK) {
                const double kth = steps[topK - 1];
                const double nextBound = next < candidates.size() ? candidates[next].key : bandHi;
                const double closed = (nextBound - bestBound) / std::max(kth - bestBound, 1e-300);
                progress.report(kPruneShare + (1.0 - kPruneShare) * std::min(1.0, closed));
                if (nextBound > kth * (1.0 + kBoundSlack)) break;
            }
        }
        progress.report(1.0);
    }
    result.simulated = sims.size();

    // Rank by the simulated objective (memory: the exact peak), ties by the canonical plan key.
    std::vector<size_t> order(sims.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        auto key = [&](const Simulated& x) {
            return memoryObjective ? x.candidate.peakBytes
                                   : x.metrics.stepSeconds * p.space.perSampleScale(x.candidate.code.globalBatch);
        };
        const double ka = key(sims[a]);
        const double kb = key(sims[b]);
        if (ka != kb) return ka < kb;
        return codeLess(sims[a].candidate.code, sims[b].candidate.code);
    });
    if (order.size() > topK) order.resize(topK);
    std::vector<Simulated> ranked;
    for (size_t i : order) {
        const Simulated& s = sims[i];
        ranked.push_back(s);
        RankedPlan r;
        r.plan = toPlan(p.space, s.candidate.code);
        resolvePipelineSplit(model, p.cluster, r.plan);
        r.metrics = s.metrics;
        r.peakBytes = s.peakBytes;
        r.reservedPeakBytes = s.reservedPeakBytes;
        r.peakStage = s.peakStageIndex;
        r.headroomBytes = static_cast<double>(p.cluster.gpu.memoryBytes) - s.peakBytes;
        r.lowerBoundSeconds = memoryObjective ? estimatePlan(model, p.cluster, r.plan).boundSeconds : s.candidate.boundSeconds;
        for (ExportFormat f : allExportFormats())
            if (frameworkRuns(model, p.cluster, r.plan, f)) r.frameworks.push_back(toString(f));
        if (p.cluster.pricePerGpuHour > 0.0)
            r.tokensPerDollar = s.metrics.tokensPerSecond / (p.space.gpus * p.cluster.pricePerGpuHour / 3600.0);
        result.top.push_back(std::move(r));
    }
    explain(result.top, ranked, options.objective);
    // Honest ranking: each plan with the error the model showed on published runs of its kind, and the plans
    // whose step is inside the wider of its own band and #1's marked as ties (a context-parallel #1, whose kind
    // is off by 14% or more, cannot be told from a plan 5% behind it however narrow that plan's band is).
    const std::optional<ErrorBand> bestBand =
        result.top.empty() ? std::nullopt : errorBandFor(p.cluster, result.top.front().plan, model.moe.has_value());
    for (size_t i = 0; i < result.top.size(); ++i) {
        RankedPlan& r = result.top[i];
        r.memoryAtRisk = memoryVerdict(r.peakBytes, r.reservedPeakBytes, static_cast<double>(p.cluster.gpu.memoryBytes),
                                         memoryBandFor(r.plan)) ==
                         MemoryVerdict::MayNotFit;
        if (const auto validated = errorBandFor(p.cluster, r.plan, model.moe.has_value())) {
            r.errorBandKind = validated->kind;
            r.errorBand = validated->medianAbsError;
            const ErrorBand& wider =
                bestBand && bestBand->medianAbsError > validated->medianAbsError ? *bestBand : *validated;
            r.tiedWithBest = i > 0 && !memoryObjective &&
                             tiedWithin(r.metrics.stepSeconds * p.space.perSampleScale(r.plan.globalBatch),
                                        result.top.front().metrics.stepSeconds * p.space.perSampleScale(result.top.front().plan.globalBatch),
                                        wider);
            if (r.tiedWithBest)
                r.why = "a tie with #1 within the model's validated error (" + percent(wider.medianAbsError) +
                        ", " + wider.kind + "); " + r.why;
        }
    }
    result.simulationSeconds = secondsSince(tSim);
    result.wallSeconds = secondsSince(t0);
    return result;
}

} // namespace tessel::sim
