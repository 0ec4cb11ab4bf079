// Exhaustive plan search: enumerates the declared space on every core, rejects invalid and OOM plans with
// counted reasons, prunes with the admissible lower bound and ranks the survivors by full simulation.
#include "tessel/sim/search.hpp"
#include "tessel/sim/error_band.hpp"

#include "search_estimate.hpp"
#include "search_offload.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <tuple>

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
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Relative slack for comparing a lower bound with simulated times summed in another order.
constexpr double kBoundSlack = 1e-9;
// Candidates are kept for simulation only when their bound is within this factor of the best bound; if the
// search ever needs more, a further pruning pass collects the next band (so the answer stays exact).
constexpr double kBandFactor = 2.0;
// Plans simulated per round; fixed (not tied to the thread count) so that `simulated` is deterministic.
constexpr size_t kSimulationBatch = 8;

std::vector<int> divisorsOf(int n) {
    std::vector<int> out;
    for (int i = 1; i <= n; ++i)
        if (n % i == 0) out.push_back(i);
    return out;
}

// A plan in 44 bytes; the field order is the canonical order used to break ties. `split`: 1 where pp x vpp does
// not divide the layers and the plan takes the balanced split (FORMULAS.md §5.4).
struct PlanCode {
    int32_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, vpp = 1, microBatch = 1, globalBatch = 1;
    uint8_t zero = 0, recompute = 0, sp = 0, schedule = 0, order = 0, split = 0;
    uint8_t offload = 0; // search_offload.hpp bits
};
bool codeLess(const PlanCode& a, const PlanCode& b) {
    return std::tie(a.tp, a.pp, a.dp, a.cp, a.ep, a.vpp, a.microBatch, a.globalBatch, a.zero, a.recompute, a.sp, a.schedule,
                    a.offload, a.order, a.split) <
           std::tie(b.tp, b.pp, b.dp, b.cp, b.ep, b.vpp, b.microBatch, b.globalBatch, b.zero, b.recompute, b.sp, b.schedule,
                    b.offload, b.order, b.split);
}

struct Candidate {
    double key = 0.0;        // what the pruning stage sorts by: the bound (time objectives) or the peak (memory)
    double boundSeconds = 0.0;
    double peakBytes = 0.0;
    PlanCode code;
};
bool candidateLess(const Candidate& a, const Candidate& b) {
    if (a.key != b.key) return a.key < b.key;
    return codeLess(a.code, b.code);
}

// The space after defaults, fixed keys and checks.
struct Space {
    int gpus = 0, globalBatch = 0, maxGlobalBatch = 0, maxVpp = 8;
    bool unevenSplits = true;   // pp x vpp that does not divide the layers takes the balanced split
    // The batch a plan runs: fixed, or the largest of [globalBatch, maxGlobalBatch] that dp x micro-batch (x pp for
    // interleaved_1f1b, whose micro-batches per step must be a multiple of pp) divides; globalBatch when none does
    // (the plan is then rejected as "global batch not divisible").
    bool batchRange() const { return maxGlobalBatch > globalBatch; }
    int largestMultiple(int64_t step) const {
        if (!batchRange() || step < 1) return globalBatch;
        const int64_t b = maxGlobalBatch / step * step;
        return b >= globalBatch ? static_cast<int>(b) : globalBatch;
    }
    int batchFor(int dataParallel, int sequences, int stages, bool interleaved) const {
        return largestMultiple(int64_t{dataParallel} * sequences * (interleaved ? stages : 1));
    }
    // What the time objective compares: seconds per sample, scaled by the largest batch so that a fixed batch keeps
    // plain step seconds.
    double perSampleScale(int batch) const {
        return maxGlobalBatch > globalBatch ? static_cast<double>(maxGlobalBatch) / batch : 1.0;
    }
    std::vector<int> tp, pp, cp, dpFilter, ep, microBatch, vpp, zero;
    std::vector<Recompute> recompute;
    std::vector<Schedule> schedules;
    std::vector<bool> sequenceParallel;
    std::vector<int> orders;  // candidate rank orders, indices into allRankOrders()
    Plan base;                // precision, flash attention, global batch
    bool offload = true;      // offload variants for plans that do not fit (search_offload.hpp)
    std::optional<ExportFormat> runnableBy; // admit only plans this framework runs
};

struct WorkItem {
    int tp = 1, pp = 1, cp = 1, dp = 1, ep = 1;
    uint64_t plans = 0;   // estimated plan count, to weight progress
};

Space normalizeSpace(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& in, ProblemList& problems) {
    Space s;
    s.gpus = in.gpus;
    s.globalBatch = in.globalBatch;
    s.maxGlobalBatch = in.maxGlobalBatch;
    s.maxVpp = in.maxVpp;
    s.offload = in.offload;
    s.runnableBy = in.runnableBy;
    s.unevenSplits = in.unevenSplits;
    if (in.gpus < 1) problems.add("--gpus", "must be at least 1, got " + std::to_string(in.gpus));
    if (in.globalBatch < 1) problems.add("--global-batch", "must be at least 1, got " + std::to_string(in.globalBatch));
    if (in.maxGlobalBatch != 0 && in.maxGlobalBatch < in.globalBatch)
        problems.add("--global-batch", "the range's upper end " + std::to_string(in.maxGlobalBatch) +
                                           " is below its lower end " + std::to_string(in.globalBatch));
    if (in.maxVpp < 1) problems.add("max_vpp", "must be at least 1, got " + std::to_string(in.maxVpp));
    if (!findPrecisionRecipe(in.precision)) problems.add("--precision", "unknown precision recipe \"" + in.precision + "\"");
    else if (!precisionSupported(cluster, in.precision))
        problems.add("--precision", "\"" + in.precision + "\" computes in a dtype for which cluster '" + cluster.name +
                                        "' gives no peak flops");
    auto checkList = [&](const std::vector<int>& values, const char* key, int lo, int hi) {
        for (int v : values)
            if (v < lo || v > hi)
                problems.add(std::string("space/") + key, "value " + std::to_string(v) + " is outside " +
                                                               std::to_string(lo) + ".." + std::to_string(hi));
    };
    constexpr int kMax = 1 << 20;
    checkList(in.tp, "tp", 1, kMax);
    checkList(in.pp, "pp", 1, kMax);
    checkList(in.dp, "dp", 1, kMax);
    checkList(in.cp, "cp", 1, kMax);
    checkList(in.ep, "ep", 1, kMax);
    checkList(in.vpp, "vpp", 1, 1024);
    checkList(in.microBatch, "micro_batch", 1, 1 << 30);
    checkList(in.zeroStage, "zero_stage", 0, 3);

    s.tp = in.tp;
    s.pp = in.pp;
    s.cp = in.cp;
    s.dpFilter = in.dp;
    s.ep = in.ep;
    s.microBatch = in.microBatch;
    s.vpp = in.vpp;
    s.zero = in.zeroStage;
    static const std::set<std::string> kKeys{"tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero_stage"};
    for (const auto& [key, value] : in.fixed) {
        const std::string where = "--fix " + key;
        if (!kKeys.count(key)) {
            problems.add(where, "unknown key; known keys: tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage, recompute, "
                                "schedule, sp, rank_order");
            continue;
        }
        const int lo = key == "zero_stage" ? 0 : 1;
        const int hi = key == "zero_stage" ? 3 : (1 << 30);
        if (value < lo || value > hi) {
            problems.add(where, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                                    std::to_string(value));
            continue;
        }
        if ((key == "tp" || key == "pp" || key == "dp" || key == "cp") && in.gpus >= 1 && in.gpus % value != 0)
            problems.add(where, std::to_string(value) + " does not divide the " + std::to_string(in.gpus) + " GPUs");
        std::vector<int>* target = key == "tp"            ? &s.tp
                                   : key == "pp"          ? &s.pp
                                   : key == "dp"          ? &s.dpFilter
                                   : key == "cp"          ? &s.cp
                                   : key == "ep"          ? &s.ep
                                   : key == "vpp"         ? &s.vpp
                                   : key == "micro_batch" ? &s.microBatch
                                                          : &s.zero;
        *target = {value};
    }
    auto defaultTo = [&](std::vector<int>& list) {
        if (list.empty() && in.gpus >= 1) list = divisorsOf(in.gpus);
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
    };
    defaultTo(s.tp);
    defaultTo(s.pp);
    defaultTo(s.cp);
    std::sort(s.dpFilter.begin(), s.dpFilter.end());
    for (auto* list : {&s.ep, &s.microBatch, &s.vpp}) {
        std::sort(list->begin(), list->end());
        list->erase(std::unique(list->begin(), list->end()), list->end());
    }
    if (s.zero.empty()) s.zero = {0, 1, 2, 3};
    std::sort(s.zero.begin(), s.zero.end());
    s.zero.erase(std::unique(s.zero.begin(), s.zero.end()), s.zero.end());
    s.recompute = in.recompute.empty() ? std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full}
                                       : in.recompute;
    std::sort(s.recompute.begin(), s.recompute.end());
    s.recompute.erase(std::unique(s.recompute.begin(), s.recompute.end()), s.recompute.end());
    s.schedules = in.schedules.empty() ? std::vector<Schedule>{Schedule::Gpipe, Schedule::OneFOneB,
                                                               Schedule::Interleaved1F1B, Schedule::ZeroBubble}
                                       : in.schedules;
    std::sort(s.schedules.begin(), s.schedules.end());
    s.schedules.erase(std::unique(s.schedules.begin(), s.schedules.end()), s.schedules.end());
    s.sequenceParallel = in.sequenceParallel;
    std::sort(s.sequenceParallel.begin(), s.sequenceParallel.end());
    s.sequenceParallel.erase(std::unique(s.sequenceParallel.begin(), s.sequenceParallel.end()), s.sequenceParallel.end());
    if (in.rankOrders.empty()) {
        s.orders.resize(allRankOrders().size());
        std::iota(s.orders.begin(), s.orders.end(), 0);
    } else {
        for (const auto& o : in.rankOrders) {
            const int idx = rankOrderIndex(o);
            if (idx >= static_cast<int>(allRankOrders().size())) problems.add("space/rank_orders", "not a permutation of tp, cp, ep, dp, pp");
            else if (std::find(s.orders.begin(), s.orders.end(), idx) == s.orders.end()) s.orders.push_back(idx);
        }
    }
    s.base.globalBatch = in.globalBatch;
    s.base.precision = in.precision;
    s.base.flashAttention = in.flashAttention;
    s.base.attentionKernel = in.attentionKernel;
    s.base.framework = in.framework;
    (void)model;
    return s;
}

// The (schedule, vpp) pairs of the space for a pipeline depth.
std::vector<std::pair<Schedule, int>> scheduleChoices(const Space& s, const ModelConfig& model, int pp) {
    std::vector<std::pair<Schedule, int>> out;
    for (Schedule sch : s.schedules) {
        if (sch == Schedule::Interleaved1F1B) {
            if (!s.vpp.empty()) {
                for (int v : s.vpp)
                    if (v >= 2) out.push_back({sch, v});
            } else {
                for (int v = 2; v <= s.maxVpp; ++v)
                    if (model.layers % (pp * v) == 0) out.push_back({sch, v});
            }
        } else if (s.vpp.empty() || std::binary_search(s.vpp.begin(), s.vpp.end(), 1)) {
            // With one stage ZB-H1 is 1F1B (each W follows its B at once: same time, same memory), so it is
            // not a plan of its own when 1F1B is in the space.
            const bool same = sch == Schedule::ZeroBubble && pp == 1 &&
                              std::find(s.schedules.begin(), s.schedules.end(), Schedule::OneFOneB) != s.schedules.end();
            if (!same) out.push_back({sch, 1});
        }
    }
    return out;
}

std::vector<int> microBatchChoices(const Space& s, int dp, int pp) {
    if (!s.microBatch.empty()) return s.microBatch;
    if (!s.batchRange()) {
        if (s.globalBatch % dp != 0) return {1}; // stands for the shape; rejected as "global batch not divisible"
        return divisorsOf(s.globalBatch / dp);
    }
    // A range: the micro-batches of the largest batch dp divides and of the largest dp x pp divides (interleaved).
    std::vector<int> out;
    for (int64_t step : {int64_t{dp}, int64_t{dp} * pp}) {
        const int batch = s.largestMultiple(step);
        if (batch % step != 0) continue;
        for (int mb : divisorsOf(batch / dp)) out.push_back(mb);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out.empty() ? std::vector<int>{1} : out;
}

std::vector<bool> spChoices(const Space& s, int tp) {
    if (!s.sequenceParallel.empty()) return s.sequenceParallel;
    return tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

Plan itemPlan(const Space& s, const WorkItem& it) {
    Plan p = s.base;
    p.tp = it.tp;
    p.pp = it.pp;
    p.cp = it.cp;
    p.dp = it.dp;
    p.ep = it.ep;
    p.globalBatch = s.largestMultiple(it.dp);
    return p;
}

std::vector<WorkItem> workItems(const Space& s, const ModelConfig& model) {
    std::vector<WorkItem> items;
    for (int tp : s.tp)
        for (int pp : s.pp)
            for (int cp : s.cp) {
                const int64_t prod = int64_t{tp} * pp * cp;
                if (prod > s.gpus || s.gpus % prod != 0) continue;
                const int dp = static_cast<int>(s.gpus / prod);
                if (!s.dpFilter.empty() && !std::binary_search(s.dpFilter.begin(), s.dpFilter.end(), dp)) continue;
                const std::vector<int> eps = !s.ep.empty() ? s.ep : (model.moe ? divisorsOf(dp) : std::vector<int>{1});
                for (int ep : eps) {
                    WorkItem it{tp, pp, cp, dp, ep, 0};
                    Plan plan = itemPlan(s, it);
                    // An estimate for progress (orders equal in placement are merged later, per item).
                    const uint64_t orders = plan.dp % plan.ep == 0 ? distinctOrderIndices(plan, s.orders).size() : 1;
                    const uint64_t perShape = s.recompute.size() * s.zero.size() * orders;
                    it.plans = microBatchChoices(s, dp, pp).size() * spChoices(s, tp).size() *
                               scheduleChoices(s, model, pp).size() * perShape;
                    if (it.plans > 0) items.push_back(it);
                }
            }
    return items;
}

// Serialises progress reports from all threads, at most every 50 ms or 1%.
class Progress {
public:
    explicit Progress(const SearchOptions& o) : fn_(o.progress) {}
    void report(double fraction) {
        if (!fn_) return;
        std::lock_guard<std::mutex> lock(mutex_);
        fraction = std::clamp(fraction, 0.0, 1.0);
        if (fraction < last_ || (fraction == last_ && reported_)) return; // strictly increasing
        const auto now = Clock::now();
        if (fraction < 1.0 && fraction - last_ < 0.01 && now - lastTime_ < std::chrono::milliseconds(50)) return;
        last_ = fraction;
        lastTime_ = now;
        reported_ = true;
        fn_(fraction);
    }

private:
    std::function<void(double)> fn_;
    std::mutex mutex_;
    double last_ = 0.0;
    bool reported_ = false;
    Clock::time_point lastTime_{};
};

bool cancelled(const SearchOptions& o) { return o.cancel && o.cancel->load(std::memory_order_relaxed); }

// Runs worker(thread index) on `threads` threads (the calling thread is one), rethrowing the first exception.
template <class Worker>
void runThreads(int threads, Worker&& worker) {
    std::exception_ptr error;
    std::mutex errorMutex;
    auto guarded = [&](int t) {
        try {
            worker(t);
        } catch (...) {
            std::lock_guard<std::mutex> lock(errorMutex);
            if (!error) error = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(guarded, t);
    guarded(0);
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

// What one thread gathers in the pruning stage.
struct Accumulator {
    uint64_t considered = 0, feasible = 0, oomFirst = 0, oomLast = 0, notRunnable = 0;
    std::array<uint64_t, kReasonCount> reasons{};
    std::vector<Candidate> candidates;
    double bestBound = std::numeric_limits<double>::infinity();
    size_t compactAt = 1 << 14;
    // The last stage's work after its last input-gradient backward, per (schedule, m, pp, vpp): shared by
    // every work item this thread runs.
    std::map<std::tuple<int, int, int, int>, LastStageTail> tailCache;
};

// Which candidates a pruning pass keeps.
struct Band {
    bool memoryObjective = false;
    size_t topK = 10;          // memory objective: the K smallest peaks
    double lo = -1.0;          // time objectives: keep lo < bound <= hi; hi < 0 means "within kBandFactor of the
    double hi = -1.0;          //   best bound seen so far" (the first pass)
};

struct Pruner {
    const Space& space;
    const SearchContext& ctx;
    const Band& band;

    void keep(Accumulator& acc, const Candidate& c) const {
        if (band.memoryObjective) {
            // A max-heap of the K best (peak, code).
            if (acc.candidates.size() < band.topK) {
                acc.candidates.push_back(c);
                std::push_heap(acc.candidates.begin(), acc.candidates.end(), candidateLess);
            } else if (candidateLess(c, acc.candidates.front())) {
                std::pop_heap(acc.candidates.begin(), acc.candidates.end(), candidateLess);
                acc.candidates.back() = c;
                std::push_heap(acc.candidates.begin(), acc.candidates.end(), candidateLess);
            }
            return;
        }
        if (band.hi >= 0.0) {
            if (c.key > band.lo && c.key <= band.hi) acc.candidates.push_back(c);
            return;
        }
        acc.bestBound = std::min(acc.bestBound, c.key);
        if (c.key > kBandFactor * acc.bestBound) return;
        acc.candidates.push_back(c);
        if (acc.candidates.size() >= acc.compactAt) {
            const double cutoff = kBandFactor * acc.bestBound;
            acc.candidates.erase(std::remove_if(acc.candidates.begin(), acc.candidates.end(),
                                                [&](const Candidate& x) { return x.key > cutoff; }),
                                 acc.candidates.end());
            acc.compactAt = std::max<size_t>(1 << 14, 2 * acc.candidates.size());
        }
    }

    void run(const WorkItem& it, Accumulator& acc) const {
        const ModelConfig& model = *ctx.model;
        const int gpn = ctx.cluster->gpusPerNode;
        Plan plan = itemPlan(space, it);
        const std::vector<std::pair<Schedule, int>> schedules = scheduleChoices(space, model, it.pp);
        const std::vector<bool> sps = spChoices(space, it.tp);

        // Rank orders distinct in effect (placements of every group the simulator costs).
        OrderClasses oc;
        if (plan.dp % plan.ep != 0) {
            oc.orders = {space.orders.front()}; // every plan of the item is rejected ("ep does not divide dp")
            oc.innerOf = oc.dpOf = {0};
            oc.inner.resize(1);
            oc.dp.resize(1);
        } else {
            oc = effectiveOrders(plan, gpn, space.orders);
        }
        const std::vector<int>& orders = oc.orders;
        const std::vector<int>& innerOf = oc.innerOf;
        const std::vector<int>& dpOf = oc.dpOf;
        const std::vector<InnerPlacements>& innerClasses = oc.inner;
        const std::vector<DpPlacements>& dpClasses = oc.dp;
        const uint64_t nOrders = orders.size();

        // Lazily built per item: stage parameters, optimizer time per ZeRO stage, DP costs per
        // (vpp, zero, class), the last stage's post-backward work per (schedule, m, vpp).
        // An uneven split (balanced, where pp x vpp does not divide the layers) changes the stage parameters with
        // vpp and the plan's shape: they are rebuilt whenever the split differs from the one they were built for.
        bool paramsReady = false;
        std::vector<int> paramsSplit;
        StageParameters first, last;
        std::array<double, 8> optFirst{}, optLast{}; // per ZeRO stage x optimizer offload
        std::array<bool, 8> optReady{};
        std::map<std::tuple<int, int, int, std::vector<int>>, DpCosts> dpCache;
        const bool timeObjective = !band.memoryObjective;

        PlanCode code;
        code.tp = it.tp;
        code.pp = it.pp;
        code.dp = it.dp;
        code.cp = it.cp;
        code.ep = it.ep;
        for (int mb : microBatchChoices(space, it.dp, it.pp)) {
            plan.microBatch = mb;
            code.microBatch = mb;
            for (bool sp : sps) {
                plan.sequenceParallel = sp;
                code.sp = sp ? 1 : 0;
                for (Recompute rc : space.recompute) {
                    plan.recompute = rc;
                    code.recompute = static_cast<uint8_t>(rc);
                    bool shapeReady = false;
                    ShapeCosts shape;
                    std::vector<std::optional<InnerComm>> innerComms;
                    const uint64_t perRc = space.zero.size() * nOrders;
                    for (const auto& [sch, vpp] : schedules) {
                        plan.schedule = sch;
                        plan.vpp = vpp;
                        plan.globalBatch = space.batchFor(it.dp, mb, it.pp, sch == Schedule::Interleaved1F1B);
                        code.globalBatch = plan.globalBatch;
                        code.schedule = static_cast<uint8_t>(sch);
                        code.vpp = vpp;
                        const bool uneven = space.unevenSplits && model.layers % (it.pp * vpp) != 0;
                        code.split = uneven ? 1 : 0;
                        plan.pipelineSplit = uneven ? PipelineSplit::Balanced : PipelineSplit::Even;
                        plan.resolvedPipelineLayers.clear();
                        acc.considered += perRc;
                        const Reason reason = fastReason(model, ctx.gpus, plan, ctx.precisionOk);
                        if (reason != Reason::None) {
                            acc.reasons[static_cast<size_t>(reason)] += perRc;
                            continue;
                        }
                        if (uneven) resolvePipelineSplit(model, *ctx.cluster, plan);
                        std::vector<int> split = uneven ? chunkLayerCounts(model, plan) : std::vector<int>{};
                        if (!paramsReady || split != paramsSplit) {
                            paramsReady = true;
                            paramsSplit = split;
                            first = stageParameters(model, plan, 0);
                            last = stageParameters(model, plan, plan.pp - 1);
                            optReady = {};
                        }
                        const std::vector<int> chunkLayers = uneven ? split : chunkLayerCounts(model, plan);
                        if (!shapeReady) {
                            shapeReady = true;
                            shape = makeShapeCosts(ctx, plan);
                        }
                        const int m = plan.microBatchesPerStep();
                        LastStageTail tail;
                        if (timeObjective) {
                            const auto key = std::make_tuple(static_cast<int>(sch), m, it.pp, vpp);
                            auto t = acc.tailCache.find(key);
                            if (t == acc.tailCache.end()) t = acc.tailCache.emplace(key, lastStageTail(plan, m)).first;
                            tail = t->second;
                        }
                        for (int z : space.zero) {
                          plan.zeroStage = z;
                          code.zero = static_cast<uint8_t>(z);
                          setOffload(plan, 0);
                          const PeakMemory plain = peakMemory(ctx, plan, shape, first, last);
                          // Offload only where the plan does not fit without it (search_offload.hpp): the fitting
                          // variants no smaller offload also fits.
                          std::vector<std::pair<uint8_t, PeakMemory>> variants;
                          if (plain.fits || !space.offload || !ctx.cluster->host.present()) {
                              variants.emplace_back(uint8_t{0}, plain);
                          } else {
                              // The plain plan is rejected; each offload variant tried is a plan of its own. The
                              // largest variant holds the least GPU memory of all: when it does not fit the GPU, none
                              // does, and it stands for them (one plan considered, rejected).
                              (plain.stage == 0 ? acc.oomFirst : acc.oomLast) += nOrders;
                              const std::vector<uint8_t> all = offloadVariants(plan);
                              PeakMemory most;
                              if (!all.empty()) {
                                  setOffload(plan, all.back());
                                  most = peakMemory(ctx, plan, shape, first, last, true);
                              }
                              if (all.empty() || !most.fits) {
                                  if (!all.empty()) {
                                      acc.considered += nOrders;
                                      (most.stage == 0 ? acc.oomFirst : acc.oomLast) += nOrders;
                                  }
                              } else {
                              const size_t tried = fittingOffloads(plan, [&](uint8_t bits) {
                                  setOffload(plan, bits);
                                  const PeakMemory pm = peakMemory(ctx, plan, shape, first, last);
                                  if (pm.fits) variants.emplace_back(bits, pm);
                                  else (pm.stage == 0 ? acc.oomFirst : acc.oomLast) += nOrders;
                                  return pm.fits;
                              });
                              acc.considered += nOrders * tried;
                              }
                          }
                          for (const auto& [bits, mem] : variants) {
                            setOffload(plan, bits);
                            code.offload = bits;
                            if (!mem.fits) {
                                (mem.stage == 0 ? acc.oomFirst : acc.oomLast) += nOrders;
                                continue;
                            }
                            // The framework's rules (export.cpp): the plan without its order, then each order.
                            std::vector<char> orderOk;
                            uint64_t runnable = nOrders;
                            if (space.runnableBy) {
                                if (!frameworkRuns(model, *ctx.cluster, plan, *space.runnableBy, false)) {
                                    acc.notRunnable += nOrders;
                                    continue;
                                }
                                orderOk.assign(nOrders, 0);
                                runnable = 0;
                                for (size_t i = 0; i < nOrders; ++i) {
                                    plan.rankOrder = allRankOrders()[static_cast<size_t>(orders[i])];
                                    orderOk[i] = frameworkRuns(model, *ctx.cluster, plan, *space.runnableBy, true) ? 1 : 0;
                                    runnable += static_cast<uint64_t>(orderOk[i]);
                                }
                                acc.notRunnable += nOrders - runnable;
                                if (runnable == 0) continue;
                            }
                            acc.feasible += runnable;
                            Candidate c;
                            c.peakBytes = mem.bytes;
                            if (!timeObjective) {
                                c.key = mem.bytes;
                                for (size_t i = 0; i < nOrders; ++i) {
                                    if (!orderOk.empty() && !orderOk[i]) continue;
                                    c.code = code;
                                    c.code.order = static_cast<uint8_t>(orders[i]);
                                    keep(acc, c);
                                }
                                continue;
                            }
                            const size_t oz = static_cast<size_t>(z) * 2 + (plan.offloadOptimizer ? 1 : 0);
                            if (!optReady[oz]) {
                                optReady[oz] = true;
                                optFirst[oz] = optimizerSeconds(ctx, plan, first);
                                optLast[oz] = optimizerSeconds(ctx, plan, last);
                            }
                            if (innerComms.empty()) innerComms.resize(innerClasses.size());
                            BoundInputs in;
                            in.shape = &shape;
                            in.optimizerFirst = optFirst[oz];
                            in.optimizerLast = optLast[oz];
                            in.tail = tail;
                            in.p2pBlocksCompute = plan.pp > 1 && !ctx.overlapOf(plan).overlapP2pComm;
                            for (size_t i = 0; i < nOrders; ++i) {
                                if (!orderOk.empty() && !orderOk[i]) continue;
                                auto& ic = innerComms[static_cast<size_t>(innerOf[i])];
                                if (!ic) {
                                    plan.rankOrder = allRankOrders()[static_cast<size_t>(orders[i])];
                                    ic = innerComm(ctx, plan, shape, innerClasses[static_cast<size_t>(innerOf[i])]);
                                }
                                const auto dkey = std::make_tuple(vpp, z, dpOf[i], split);
                                auto dc = dpCache.find(dkey);
                                if (dc == dpCache.end()) {
                                    plan.rankOrder = allRankOrders()[static_cast<size_t>(orders[i])];
                                    dc = dpCache.emplace(dkey, dpCosts(ctx, plan, dpClasses[static_cast<size_t>(dpOf[i])])).first;
                                }
                                in.comm = &*ic;
                                in.dp = &dc->second;
                                c.boundSeconds = lowerBoundSeconds(plan, chunkLayers, in);
                                c.key = c.boundSeconds * space.perSampleScale(plan.globalBatch);
                                c.code = code;
                                c.code.order = static_cast<uint8_t>(orders[i]);
                                keep(acc, c);
                            }
                          }
                        }
                    }
                }
            }
        }
    }
};

struct PassResult {
    Accumulator total;
    bool cancelled = false;
};

// One pruning pass over every work item on `threads` threads; merges the per-thread results.
PassResult prunePass(const Space& space, const SearchContext& ctx, const std::vector<WorkItem>& items, const Band& band,
                     int threads, const SearchOptions& options, Progress& progress, double progressFrom,
                     double progressTo) {
    uint64_t totalPlans = 0;
    for (const auto& it : items) totalPlans += it.plans;
    std::atomic<size_t> next{0};
    std::atomic<uint64_t> donePlans{0};
    std::atomic<bool> stop{false};
    std::vector<Accumulator> accs(static_cast<size_t>(threads));
    const Pruner pruner{space, ctx, band};
    runThreads(threads, [&](int t) {
        Accumulator& acc = accs[static_cast<size_t>(t)];
        for (;;) {
            if (cancelled(options)) {
                stop = true;
                return;
            }
            const size_t i = next.fetch_add(1);
            if (i >= items.size()) return;
            pruner.run(items[i], acc);
            const uint64_t done = donePlans.fetch_add(items[i].plans) + items[i].plans;
            if (totalPlans > 0)
                progress.report(progressFrom + (progressTo - progressFrom) * static_cast<double>(done) / static_cast<double>(totalPlans));
        }
    });
    PassResult r;
    r.cancelled = stop;
    Accumulator& total = r.total;
    for (auto& a : accs) {
        total.considered += a.considered;
        total.feasible += a.feasible;
        total.oomFirst += a.oomFirst;
        total.oomLast += a.oomLast;
        total.notRunnable += a.notRunnable;
        for (size_t k = 0; k < a.reasons.size(); ++k) total.reasons[k] += a.reasons[k];
        total.bestBound = std::min(total.bestBound, a.bestBound);
        total.candidates.insert(total.candidates.end(), a.candidates.begin(), a.candidates.end());
        a.candidates = {};
    }
    if (band.memoryObjective) {
        std::sort(total.candidates.begin(), total.candidates.end(), candidateLess);
        if (total.candidates.size() > band.topK) total.candidates.resize(band.topK);
    } else {
        if (band.hi < 0.0) {
            // Every thread kept at least what is within the factor of the global best: filter to exactly that.
            const double cutoff = kBandFactor * total.bestBound;
            total.candidates.erase(std::remove_if(total.candidates.begin(), total.candidates.end(),
                                                  [&](const Candidate& x) { return x.key > cutoff; }),
                                   total.candidates.end());
        }
        std::sort(total.candidates.begin(), total.candidates.end(), candidateLess);
    }
    return r;
}

std::map<std::string, uint64_t> rejectedMap(const Accumulator& a, const std::optional<ExportFormat>& framework) {
    std::map<std::string, uint64_t> out;
    for (int k = 1; k < kReasonCount; ++k)
        if (a.reasons[static_cast<size_t>(k)] > 0) out[reasonText(static_cast<Reason>(k))] = a.reasons[static_cast<size_t>(k)];
    if (a.oomFirst > 0) out[kOomFirst] = a.oomFirst;
    if (a.oomLast > 0) out[kOomLast] = a.oomLast;
    if (a.notRunnable > 0 && framework) out["not runnable on " + toString(*framework) + " (tessel export's rules)"] = a.notRunnable;
    return out;
}

Plan toPlan(const Space& s, const PlanCode& c) {
    Plan p = s.base;
    p.tp = c.tp;
    p.pp = c.pp;
    p.dp = c.dp;
    p.cp = c.cp;
    p.ep = c.ep;
    p.vpp = c.vpp;
    p.microBatch = c.microBatch;
    p.zeroStage = c.zero;
    p.recompute = static_cast<Recompute>(c.recompute);
    p.sequenceParallel = c.sp != 0;
    p.schedule = static_cast<Schedule>(c.schedule);
    p.rankOrder = allRankOrders()[c.order];
    p.globalBatch = c.globalBatch;
    setOffload(p, c.offload);
    p.pipelineSplit = c.split ? PipelineSplit::Balanced : PipelineSplit::Even;
    p.pipelineLayers.clear();
    p.firstStageLayers = p.lastStageLayers = 0;
    return p;
}

// A simulated candidate.
struct Simulated {
    Candidate candidate;
    StepMetrics metrics;
    StageMemory peakStage;
    double peakBytes = 0.0;
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
    num("ep", a.ep, b.ep);
    num("vpp", a.vpp, b.vpp);
    num("micro-batch", a.microBatch, b.microBatch);
    if (a.zeroStage != b.zeroStage)
        parts.push_back("ZeRO-" + std::to_string(a.zeroStage) + " vs ZeRO-" + std::to_string(b.zeroStage));
    if (a.recompute != b.recompute) parts.push_back(toString(a.recompute) + " vs " + toString(b.recompute) + " recompute");
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

ClusterConfig clusterForGpus(const ClusterConfig& cluster, int gpus, ProblemList& problems) {
    ClusterConfig c = cluster;
    if (gpus < 1 || cluster.gpusPerNode < 1 || c.totalGpus() == gpus) return c;
    if (gpus % cluster.gpusPerNode == 0) {
        c.nodes = gpus / cluster.gpusPerNode;
    } else if (gpus < cluster.gpusPerNode && cluster.gpusPerNode % gpus == 0) {
        c.gpusPerNode = gpus; // part of one node
        c.nodes = 1;
    } else {
        problems.add("--gpus", std::to_string(gpus) + " GPUs do not fill whole nodes of " +
                                   std::to_string(cluster.gpusPerNode) + " GPUs (cluster '" + cluster.name + "')");
    }
    return c;
}

struct Prepared {
    ClusterConfig cluster;
    Space space;
    std::vector<WorkItem> items;
    int threads = 1;
};

void checkOptions(const ClusterConfig& cluster, const SearchOptions& options, ProblemList& problems) {
    if (options.topK < 1) problems.add("--top", "must be at least 1, got " + std::to_string(options.topK));
    if (options.threads < 0) problems.add("--threads", "must be 0 (every core) or more, got " + std::to_string(options.threads));
    if (options.objective == Objective::TokensPerDollar && !(cluster.pricePerGpuHour > 0.0))
        problems.add("--objective", "tokens_per_dollar needs a price: cluster '" + cluster.name +
                                        "' has no price_per_gpu_hour");
}

Prepared prepare(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& in,
                 const SearchOptions& options) {
    ProblemList problems;
    Prepared p;
    p.cluster = clusterForGpus(cluster, in.gpus, problems);
    p.space = normalizeSpace(model, p.cluster, in, problems);
    checkOptions(p.cluster, options, problems);
    problems.throwIfAny();
    p.items = workItems(p.space, model);
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    p.threads = options.threads > 0 ? options.threads : hw;
    p.threads = std::max(1, std::min<int>(p.threads, static_cast<int>(std::max<size_t>(1, p.items.size()))));
    return p;
}
} // namespace

std::vector<Problem> searchProblems(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                                    const SearchOptions& options) {
    ProblemList problems;
    SearchSpace checked = space;
    if (space.allowIdle && space.gpus >= 1 && cluster.gpusPerNode >= 1) {
        // An upper bound: checked at the largest count searchPlansUpTo can use (whole nodes, or part of one node).
        checked.gpus = space.gpus / cluster.gpusPerNode * cluster.gpusPerNode;
        for (int g = std::min(space.gpus, cluster.gpusPerNode); checked.gpus == 0 && g >= 1; --g)
            if (cluster.gpusPerNode % g == 0) checked.gpus = g;
    }
    const ClusterConfig resized = clusterForGpus(cluster, checked.gpus, problems);
    normalizeSpace(model, resized, checked, problems);
    checkOptions(resized, options, problems);
    return problems.items();
}

PruningResult prunePlans(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                         const SearchOptions& options) {
    const auto t0 = Clock::now();
    const Prepared p = prepare(model, cluster, space, options);
    const SearchContext ctx = makeContext(model, p.cluster, p.space.base.precision, p.space.base.framework);
    Progress progress(options);
    Band band;
    band.memoryObjective = options.objective == Objective::Memory;
    band.topK = static_cast<size_t>(options.topK);
    const PassResult pass = prunePass(p.space, ctx, p.items, band, p.threads, options, progress, 0.0, 1.0);
    PruningResult r;
    r.considered = pass.total.considered;
    r.feasible = pass.total.feasible;
    r.rejected = rejectedMap(pass.total, p.space.runnableBy);
    r.bestLowerBoundSeconds = std::isfinite(pass.total.bestBound) ? pass.total.bestBound : 0.0;
    r.cancelled = pass.cancelled;
    r.wallSeconds = secondsSince(t0);
    return r;
}

SearchResult searchPlans(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                         const SearchOptions& options) {
    const auto t0 = Clock::now();
    const Prepared p = prepare(model, cluster, space, options);
    const SearchContext ctx = makeContext(model, p.cluster, p.space.base.precision, p.space.base.framework);
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
    // whose step is inside #1's band marked as ties.
    for (size_t i = 0; i < result.top.size(); ++i) {
        RankedPlan& r = result.top[i];
        if (const auto validated = errorBandFor(p.cluster, r.plan)) {
            r.errorBandKind = validated->kind;
            r.errorBand = validated->medianAbsError;
            r.tiedWithBest = i > 0 && !memoryObjective &&
                             tiedWithin(r.metrics.stepSeconds * p.space.perSampleScale(r.plan.globalBatch),
                                        result.top.front().metrics.stepSeconds * p.space.perSampleScale(result.top.front().plan.globalBatch),
                                        *validated);
            if (r.tiedWithBest)
                r.why = "a tie with #1 within the model's validated error (" + percent(validated->medianAbsError) +
                        ", " + validated->kind + "); " + r.why;
        }
    }
    result.simulationSeconds = secondsSince(tSim);
    result.wallSeconds = secondsSince(t0);
    return result;
}

double stepLowerBoundSeconds(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return estimatePlan(model, cluster, plan).boundSeconds;
}

std::string rejectionReason(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return reasonText(fastReason(model, cluster.totalGpus(), plan, precisionSupported(cluster, plan.precision)));
}

std::string problemCategory(const Problem& problem) {
    const std::string& m = problem.message;
    auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
    if (has("must be at least 1")) return reasonText(Reason::InvalidDegrees);
    if (has("attention heads")) return reasonText(Reason::TpHeads);
    if (has("key/value heads")) return reasonText(Reason::TpKvHeads);
    if (has("does not divide ffn_hidden")) return reasonText(Reason::TpFfn);
    if (has("moe.expert_ffn_hidden")) return reasonText(Reason::TpExpertFfn);
    if (has("pp x vpp")) return reasonText(Reason::Layers);
    if (has("vpp > 1 needs schedule")) return reasonText(Reason::VppNeedsInterleaved);
    if (has("needs vpp >= 2")) return reasonText(Reason::InterleavedVpp);
    if (has("needs pp >= 2")) return reasonText(Reason::InterleavedPp);
    if (has("ranks, but the cluster has")) return reasonText(Reason::World);
    if (has("is not a multiple of micro_batch x dp")) return reasonText(Reason::GlobalBatch);
    if (has("micro-batches per step")) return reasonText(Reason::InterleavedMicroBatches);
    if (has("needs a model with a moe block")) return reasonText(Reason::EpNeedsMoe);
    if (has("must divide dp")) return reasonText(Reason::EpDp);
    if (has("experts")) return reasonText(Reason::EpExperts);
    if (has("load-balanced causal attention")) return reasonText(Reason::CpSeq);
    if (has("sequence parallelism needs tp > 1")) return reasonText(Reason::SpTp);
    if (has("seq_len / cp must be divisible")) return reasonText(Reason::SpSeq);
    if (has("peak flops") || has("precision recipe")) return reasonText(Reason::Precision);
    return m;
}

PeakMemory fastPeakMemory(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return estimatePlan(model, cluster, plan).memory;
}

std::vector<std::array<ParallelDim, 5>> distinctRankOrders(const Plan& plan, int gpusPerNode,
                                                           const std::vector<std::array<ParallelDim, 5>>& candidates) {
    std::vector<int> idx;
    if (candidates.empty()) {
        idx.resize(allRankOrders().size());
        std::iota(idx.begin(), idx.end(), 0);
    } else {
        for (const auto& o : candidates) {
            const int i = rankOrderIndex(o);
            if (i < static_cast<int>(allRankOrders().size()) && std::find(idx.begin(), idx.end(), i) == idx.end())
                idx.push_back(i);
        }
    }
    std::vector<std::array<ParallelDim, 5>> out;
    if (idx.empty()) return out;
    for (int i : effectiveOrders(plan, gpusPerNode, idx).orders) out.push_back(allRankOrders()[static_cast<size_t>(i)]);
    return out;
}

void applySearchFixes(const std::vector<std::string>& entries, SearchSpace& space, ProblemList& problems,
                      const std::string& flag) {
    const std::map<std::string, std::string> intKeys{{"tp", "tp"},       {"pp", "pp"},
                                                     {"dp", "dp"},       {"cp", "cp"},
                                                     {"ep", "ep"},       {"vpp", "vpp"},
                                                     {"micro_batch", "micro_batch"}, {"mb", "micro_batch"},
                                                     {"micro-batch", "micro_batch"}, {"zero_stage", "zero_stage"},
                                                     {"zero", "zero_stage"}};
    for (const auto& entry : entries) {
        if (entry.empty()) continue;
        const auto eq = entry.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
            problems.add(flag, "expected key=value, got \"" + entry + "\"");
            continue;
        }
        std::string key = entry.substr(0, eq);
        for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        const std::string value = entry.substr(eq + 1);
        const std::string where = flag + " " + key;
        if (auto it = intKeys.find(key); it != intKeys.end()) {
            try {
                size_t used = 0;
                const int v = std::stoi(value, &used);
                if (used != value.size()) throw std::invalid_argument(value);
                space.fixed[it->second] = v;
            } catch (const std::exception&) {
                problems.add(where, "expected an integer, got \"" + value + "\"");
            }
        } else if (key == "recompute") {
            if (value == "none") space.recompute = {Recompute::None};
            else if (value == "selective") space.recompute = {Recompute::Selective};
            else if (value == "full") space.recompute = {Recompute::Full};
            else problems.add(where, "must be none, selective or full, got \"" + value + "\"");
        } else if (key == "schedule") {
            if (value == "gpipe") space.schedules = {Schedule::Gpipe};
            else if (value == "1f1b") space.schedules = {Schedule::OneFOneB};
            else if (value == "interleaved_1f1b") space.schedules = {Schedule::Interleaved1F1B};
            else if (value == "zero_bubble") space.schedules = {Schedule::ZeroBubble};
            else problems.add(where, "must be gpipe, 1f1b, interleaved_1f1b or zero_bubble, got \"" + value + "\"");
        } else if (key == "sp" || key == "sequence_parallel") {
            if (value == "on" || value == "true") space.sequenceParallel = {true};
            else if (value == "off" || value == "false") space.sequenceParallel = {false};
            else problems.add(where, "must be on or off, got \"" + value + "\"");
        } else if (key == "rank_order") {
            space.rankOrders = {parseRankOrder(value, where, problems)};
        } else {
            problems.add(where, "unknown key; known keys: tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage, recompute, "
                                "schedule, sp, rank_order");
        }
    }
}


} // namespace tessel::sim
