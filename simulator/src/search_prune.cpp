// Search pruning: screens every plan of the space for validity, memory and a lower bound on its step time.
#include "tessel/sim/search.hpp"

#include "search_estimate.hpp"
#include "search_offload.hpp"
#include "search_prune.hpp"
#include "search_space.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::sim::detail {

namespace {
// A plan variant the pruner keeps beside the plain plan: host offload bits, or partial recompute.
struct Variant {
    uint8_t offload = 0;
    int recomputeLayers = 0;
    PeakMemory memory;
};

// The fewest layers of each chunk whose recompute lets a full-recompute plan fit (FORMULAS.md §2, partial
// recompute): memory falls as layers are added, so a bisection over 1 .. largest chunk - 1; none when even one
// layer kept whole does not fit. Leaves plan.recomputeLayers at the last value tried.
std::optional<Variant> leastPartialRecompute(const SearchContext& ctx, Plan& plan, const ShapeCosts& shape,
                                             const StageParameters& first, const StageParameters& last,
                                             const std::vector<int>& chunkLayers) {
    const int most = chunkLayers.empty() ? 0 : *std::max_element(chunkLayers.begin(), chunkLayers.end());
    if (most < 2) return std::nullopt;
    auto memoryWith = [&](int n) {
        plan.recomputeLayers = n;
        return peakMemory(ctx, plan, shape, first, last);
    };
    int lo = 1, hi = most - 1;
    PeakMemory best = memoryWith(hi); // invariant: hi fits and best is its memory
    if (!best.fits) return std::nullopt;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        const PeakMemory pm = memoryWith(mid);
        if (pm.fits) {
            hi = mid;
            best = pm;
        } else {
            lo = mid + 1;
        }
    }
    return Variant{0, hi, best};
}

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
        const std::vector<bool> sps = it.etp > 0 ? foldedSpChoices(space, it.tp) : spChoices(space, it.tp);

        // Rank orders distinct in effect (placements of every group the simulator costs).
        OrderClasses oc;
        if (plan.expertLayoutApart()) {
            oc = effectiveOrders(plan, gpn, foldedOrders(space)); // the expert layout needs pp last
        } else if (plan.dp % plan.ep != 0) {
            oc.orders = {space.orders.front()}; // every plan of the item is rejected ("ep does not divide dp")
            oc.innerOf = oc.dpOf = {0};
            oc.inner.resize(1);
            oc.dp.resize(1);
        } else {
            oc = effectiveOrders(plan, gpn, space.orders);
        }
        // Hybrid sharding (space.hybridSharding): ZeRO >= 1 plans are also tried with their state in `replicas` node-local
        // copies; their shard and replica groups make their own rank-order classes.
        struct OrderSet {
            const OrderClasses* classes;
            int replicas;
        };
        std::vector<OrderSet> orderSets{{&oc, 1}};
        OrderClasses hybridClasses;
        const int replicas = space.hybridSharding ? hybridShardingReplicas(model, plan, gpn) : 1;
        if (replicas > 1) {
            Plan hybrid = plan;
            hybrid.zeroReplicas = replicas;
            hybridClasses = effectiveOrders(hybrid, gpn, plan.expertLayoutApart() ? foldedOrders(space) : space.orders);
            orderSets.push_back({&hybridClasses, replicas});
        }
        // Plans per (micro-batch, SP, recompute, schedule) shape: every ZeRO stage with each of its order sets.
        uint64_t perRc = 0;
        for (int z : space.zero)
            for (const OrderSet& set : orderSets)
                if (set.replicas == 1 || z >= 1) perRc += set.classes->orders.size();

        // Lazily built per item: stage parameters, optimizer time per ZeRO stage, DP costs per
        // (vpp, zero, class), the last stage's post-backward work per (schedule, m, vpp).
        // An uneven split (balanced, where pp x vpp does not divide the layers) changes the stage parameters with
        // vpp and the plan's shape: they are rebuilt whenever the split differs from the one they were built for.
        bool paramsReady = false;
        std::vector<int> paramsSplit;
        StageParameters first, last;
        std::array<double, 16> optFirst{}, optLast{}; // per ZeRO stage x optimizer offload x order set
        std::array<bool, 16> optReady{};
        std::map<std::tuple<int, int, size_t, int, std::vector<int>>, DpCosts> dpCache;
        const bool timeObjective = !band.memoryObjective;

        PlanCode code;
        code.tp = it.tp;
        code.pp = it.pp;
        code.dp = it.dp;
        code.cp = it.cp;
        code.ep = it.ep;
        code.etp = it.etp;
        code.cpComm = static_cast<uint8_t>(it.cpComm);
        for (int mb : microBatchChoices(space, it.dp, it.pp)) {
            plan.microBatch = mb;
            code.microBatch = mb;
            for (bool sp : sps) {
                plan.sequenceParallel = sp;
                code.sp = sp ? 1 : 0;
                for (const auto& [rc, modules] : recomputeChoices(space)) {
                    plan.recompute = rc;
                    plan.recomputeModules = modules;
                    code.recompute = static_cast<uint8_t>(rc);
                    code.modules = modules;
                    bool shapeReady = false;
                    ShapeCosts shape;
                    std::array<std::vector<std::optional<InnerComm>>, 2> innerComms; // per order set
                    for (const auto& [sch, vpp] : schedules) {
                        plan.schedule = sch;
                        plan.vpp = vpp;
                        plan.globalBatch = space.batchFor(it.dp, mb, it.pp, sch == Schedule::Interleaved1F1B);
                        code.globalBatch = plan.globalBatch;
                        code.schedule = static_cast<uint8_t>(sch);
                        code.vpp = vpp;
                        const bool uneven = space.unevenSplits && model.layers % (it.pp * vpp) != 0;
                        // More virtual stages than layers (at most two more): the embedding and the loss each take
                        // one, as Megatron-core's account-for-embedding/loss split does.
                        const bool endsOnly = uneven && model.layers < it.pp * vpp;
                        code.split = endsOnly ? 2 : uneven ? 1 : 0;
                        plan.pipelineSplit = endsOnly ? PipelineSplit::EndsAsLayers : uneven ? PipelineSplit::Balanced : PipelineSplit::Even;
                        plan.resolvedPipelineLayers.clear();
                        acc.considered += perRc;
                        const Reason reason = fastReason(model, ctx.gpus, plan, ctx.precisionOk, &ctx.cluster->gpu);
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
                        for (int z : space.zero)
                        for (size_t setIndex = 0; setIndex < orderSets.size(); ++setIndex) {
                          const OrderSet& set = orderSets[setIndex];
                          if (set.replicas > 1 && z < 1) continue; // nothing sharded to replicate
                          const std::vector<int>& orders = set.classes->orders;
                          const std::vector<int>& innerOf = set.classes->innerOf;
                          const std::vector<int>& dpOf = set.classes->dpOf;
                          const std::vector<InnerPlacements>& innerClasses = set.classes->inner;
                          const std::vector<DpPlacements>& dpClasses = set.classes->dp;
                          const uint64_t nOrders = orders.size();
                          plan.zeroStage = z;
                          plan.zeroReplicas = set.replicas;
                          code.zero = static_cast<uint8_t>(z);
                          code.replicas = static_cast<uint16_t>(set.replicas);
                          setOffload(plan, 0);
                          plan.recomputeLayers = 0;
                          code.recomputeLayers = 0;
                          const PeakMemory plain = peakMemory(ctx, plan, shape, first, last);
                          // Offload only where the plan does not fit without it (search_offload.hpp): the fitting
                          // variants no smaller offload also fits.
                          std::vector<Variant> variants;
                          if (plain.fits || !space.offload || !ctx.cluster->host.present()) {
                              variants.push_back({uint8_t{0}, 0, plain});
                              // Partial recompute (FORMULAS.md §2): where every layer recomputed fits, the fewest
                              // layers of each chunk whose recompute still fits is a plan of its own, with less
                              // replay. Time objectives only: it never holds less memory than full recompute.
                              if (plain.fits && rc == Recompute::Full && timeObjective && space.partialRecompute) {
                                  if (const auto least = leastPartialRecompute(ctx, plan, shape, first, last, chunkLayers)) {
                                      acc.considered += nOrders;
                                      variants.push_back(*least);
                                  }
                                  plan.recomputeLayers = 0;
                              }
                          } else {
                              // The plain plan is rejected; each offload variant tried is a plan of its own. The
                              // largest variant holds the least GPU memory of all: when it does not fit the GPU, none
                              // does, and it stands for them (one plan considered, rejected).
                              acc.rejectPeak(plain, ctx.capacityBytes, nOrders);
                              const std::vector<uint8_t> all = offloadVariants(plan);
                              PeakMemory most;
                              if (!all.empty()) {
                                  setOffload(plan, all.back());
                                  most = peakMemory(ctx, plan, shape, first, last, true);
                              }
                              if (all.empty() || !most.fits) {
                                  if (!all.empty()) {
                                      acc.considered += nOrders;
                                      acc.rejectPeak(most, ctx.capacityBytes, nOrders);
                                  }
                              } else {
                              const size_t tried = fittingOffloads(plan, [&](uint8_t bits) {
                                  setOffload(plan, bits);
                                  const PeakMemory pm = peakMemory(ctx, plan, shape, first, last);
                                  if (pm.fits) variants.push_back({bits, 0, pm});
                                  else acc.rejectPeak(pm, ctx.capacityBytes, nOrders);
                                  return pm.fits;
                              });
                              acc.considered += nOrders * tried;
                              }
                          }
                          for (const auto& [bits, partial, mem] : variants) {
                            setOffload(plan, bits);
                            code.offload = bits;
                            plan.recomputeLayers = partial;
                            code.recomputeLayers = static_cast<uint16_t>(partial);
                            if (!mem.fits) {
                                acc.rejectPeak(mem, ctx.capacityBytes, nOrders);
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
                            const size_t oz = (static_cast<size_t>(z) * 2 + (plan.offloadOptimizer ? 1 : 0)) * 2 + setIndex;
                            if (!optReady[oz]) {
                                optReady[oz] = true;
                                optFirst[oz] = optimizerSeconds(ctx, plan, first);
                                optLast[oz] = optimizerSeconds(ctx, plan, last);
                            }
                            auto& setComms = innerComms[setIndex];
                            if (setComms.empty()) setComms.resize(innerClasses.size());
                            BoundInputs in;
                            in.shape = &shape;
                            in.optimizerFirst = optFirst[oz];
                            in.optimizerLast = optLast[oz];
                            in.tail = tail;
                            in.p2pBlocksCompute = plan.pp > 1 && !ctx.overlapOf(plan).overlapP2pComm;
                            for (size_t i = 0; i < nOrders; ++i) {
                                if (!orderOk.empty() && !orderOk[i]) continue;
                                auto& ic = setComms[static_cast<size_t>(innerOf[i])];
                                if (!ic) {
                                    plan.rankOrder = allRankOrders()[static_cast<size_t>(orders[i])];
                                    ic = innerComm(ctx, plan, shape, innerClasses[static_cast<size_t>(innerOf[i])]);
                                }
                                const auto dkey = std::make_tuple(vpp, z, setIndex, dpOf[i], split);
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
} // namespace

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
        total.peakBand += a.peakBand;
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
    if (a.peakBand > 0) out[kPeakBand] = a.peakBand;
    if (a.notRunnable > 0 && framework) out["not runnable on " + toString(*framework) + " (tessel export's rules)"] = a.notRunnable;
    return out;
}

} // namespace tessel::sim::detail

namespace tessel::sim {
using namespace detail;

PruningResult prunePlans(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                         const SearchOptions& options) {
    const auto t0 = Clock::now();
    const Prepared p = prepare(model, cluster, space, options);
    SearchContext ctx = makeContext(model, p.cluster, p.space.base.precision, p.space.base.framework);
    if (p.space.memoryBand) requireFitWithinPeakBand(ctx, p.space.base.framework);
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

double stepLowerBoundSeconds(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return estimatePlan(model, cluster, plan).boundSeconds;
}

std::string rejectionReason(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return reasonText(fastReason(model, cluster.totalGpus(), plan, precisionSupported(cluster, plan.precision, plan.framework), &cluster.gpu));
}

std::string problemCategory(const Problem& problem) {
    const std::string& m = problem.message;
    auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
    if (problem.where.find("/moe_shared_expert_overlap") != std::string::npos) return reasonText(Reason::SharedExpertOverlap);
    if (has("moe_a2a_overlap")) return reasonText(Reason::EpOverlap); // its messages name the moe block and experts too
    if (has("fused_linear")) return reasonText(Reason::LossKernel); // its messages name tp and the metrics too
    if (problem.where.find("/recompute_modules") != std::string::npos) return reasonText(Reason::RecomputeModules);
    if (problem.where.find("/cp_comm_type") != std::string::npos)
        return reasonText(has("sliding") ? Reason::CpWindow : Reason::CpA2aHeads); // names heads too
    if (has("must be at least 1")) return reasonText(Reason::InvalidDegrees);
    if (has("attention heads")) return reasonText(Reason::TpHeads);
    if (has("key/value heads")) return reasonText(Reason::TpKvHeads);
    if (has("does not divide ffn_hidden")) return reasonText(Reason::TpFfn);
    if (has("moe.expert_ffn_hidden") || has("moe.shared_ffn_hidden")) return reasonText(Reason::TpExpertFfn);
    if (has("pp x vpp")) return reasonText(Reason::Layers);
    if (has("vpp > 1 needs schedule")) return reasonText(Reason::VppNeedsInterleaved);
    if (has("dualpipev needs pp >= 2") || has("zero_bubble_v needs pp >= 2")) return reasonText(Reason::DualPipeVPp);
    if (has("dualpipev runs two model chunks") || has("zero_bubble_v runs two model chunks")) return reasonText(Reason::DualPipeVVpp);
    if (has("dualpipev needs at least")) return reasonText(Reason::DualPipeVMicroBatches);
    if (has("needs vpp >= 2")) return reasonText(Reason::InterleavedVpp);
    if (has("needs pp >= 2")) return reasonText(Reason::InterleavedPp);
    if (has("ranks, but the cluster has")) return reasonText(Reason::World);
    if (has("is not a multiple of micro_batch x dp")) return reasonText(Reason::GlobalBatch);
    if (has("chunk passes to simulate")) return reasonText(Reason::ScheduleSize);
    if (has("is more than") && has("ranks")) return reasonText(Reason::World);
    if (has("micro-batches per step")) return reasonText(Reason::InterleavedMicroBatches);
    if (has("needs a model with a moe block")) return reasonText(Reason::EpNeedsMoe);
    if (has("must divide dp")) return reasonText(Reason::EpDp);
    if (has("ranks of a pipeline stage")) return reasonText(Reason::EtpRanks);
    if (has("needs pp last in rank_order")) return reasonText(Reason::EtpOrder);
    if (has("needs sequence parallelism (Megatron-core dispatches")) return reasonText(Reason::EtpSp);
    if (has("zero_replicas") || has("hybrid sharding")) return reasonText(Reason::ZeroReplicas);
    if (has("experts")) return reasonText(Reason::EpExperts);
    if (has("load-balanced causal attention")) return reasonText(Reason::CpSeq);
    if (has("sequence parallelism needs tp > 1")) return reasonText(Reason::SpTp);
    if (has("seq_len / cp must be divisible")) return reasonText(Reason::SpSeq);
    if (has("soft-caps its attention")) return reasonText(Reason::AttentionSoftcap);
    if (has("peak flops") || has("precision recipe")) return reasonText(Reason::Precision);
    return m;
}

PeakMemory fastPeakMemory(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return estimatePlan(model, cluster, plan).memory;
}
} // namespace tessel::sim
