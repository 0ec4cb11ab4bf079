// Simulates the per-rank streams of a costed schedule (cost_schedule.cpp) as a dependency graph, with the
// contention of overlapped communication as a fixed point, and reads the step metrics (step time, bubble, exposed
// communication, MFU/HFU) off the resulting timeline.
#include "tessel/sim/simulate.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace tessel::sim {

namespace {
// Busy intervals of one stream, each with the rate at which it moves its own work, for overlap queries.
class BusyLine {
public:
    void add(double from, double to, double rate) {
        from_.push_back(from);
        to_.push_back(to);
        rate_.push_back(rate);
    }
    void finish() {
        prefix_.assign(from_.size() + 1, 0.0);
        for (size_t i = 0; i < from_.size(); ++i) prefix_[i + 1] = prefix_[i] + rate_[i] * (to_[i] - from_[i]);
    }
    // Work-weighted seconds of the line inside [a, b].
    double overlap(double a, double b) const {
        if (!(b > a) || from_.empty()) return 0.0;
        const size_t i = static_cast<size_t>(std::upper_bound(to_.begin(), to_.end(), a) - to_.begin());
        const size_t j = static_cast<size_t>(std::lower_bound(from_.begin(), from_.end(), b) - from_.begin());
        if (i >= j) return 0.0;
        double sum = prefix_[j] - prefix_[i];
        sum -= rate_[i] * std::max(0.0, a - from_[i]);
        sum -= rate_[j - 1] * std::max(0.0, to_[j - 1] - b);
        return std::max(0.0, sum);
    }

private:
    std::vector<double> from_, to_, rate_, prefix_;
};

// The dependency graph of a schedule, in compressed-sparse-row form (one allocation, not one per action): edges from
// each action's stream predecessor and from each of its dependencies. It depends on the schedule and on whether the
// streams are serial, not on the costs, so the contention passes of simulatePlan build it once.
struct ActionGraph {
    std::vector<size_t> offset;     // node id of (stage, 0)
    size_t total = 0;
    std::vector<int> indegree;      // before any action has run
    std::vector<long> streamPrev;   // the previous action on the same stream, -1 for none
    std::vector<size_t> edgeCount;  // successors of node n: successors[edgeCount[n] .. edgeCount[n + 1])
    std::vector<size_t> successors;
    std::vector<int> stageOf;
    size_t id(int s, int i) const { return offset[static_cast<size_t>(s)] + static_cast<size_t>(i); }
};

namespace {
// A pipeline transfer the schedule runs on the compute stream: blocking sends (overlap_p2p_comm off), and under
// DeepSpeed's pipeline engine its receives too (ActionSchedule::p2pSerial).
bool holdsComputeStream(const ActionSchedule& schedule, ActionKind k) {
    const bool send = k == ActionKind::SendActivation || k == ActionKind::SendGrad;
    const bool recv = k == ActionKind::RecvActivation || k == ActionKind::RecvGrad;
    return schedule.p2pBlocksCompute && (send || (recv && schedule.p2pSerial));
}
} // namespace

ActionGraph buildGraph(const ActionSchedule& schedule, bool serialStreams) {
    ActionGraph g;
    const size_t stages = schedule.stages.size();
    // Flatten (stage, index) into node ids.
    g.offset.assign(stages + 1, 0);
    for (size_t s = 0; s < stages; ++s) g.offset[s + 1] = g.offset[s] + schedule.stages[s].actions.size();
    const size_t total = g.total = g.offset[stages];
    auto id = [&](int s, int i) { return g.id(s, i); };
    std::vector<int>& indegree = g.indegree;
    std::vector<long>& streamPrev = g.streamPrev;
    std::vector<size_t>& edgeCount = g.edgeCount;
    indegree.assign(total, 0);
    streamPrev.assign(total, -1);
    edgeCount.assign(total + 1, 0);
    for (size_t s = 0; s < stages; ++s) {
        std::array<long, kStreamCount> last;
        last.fill(-1);
        const auto& acts = schedule.stages[s].actions;
        for (size_t i = 0; i < acts.size(); ++i) {
            const size_t me = id(static_cast<int>(s), static_cast<int>(i));
            // A device that cannot overlap communication with compute runs each rank's list in order on one
            // stream (the CPU executor's single thread).
            const bool blocking = holdsComputeStream(schedule, acts[i].kind);
            const auto st = serialStreams || blocking ? size_t{0} : static_cast<size_t>(streamOf(acts[i].kind));
            if (last[st] >= 0) {
                streamPrev[me] = last[st];
                ++edgeCount[static_cast<size_t>(last[st]) + 1];
                ++indegree[me];
            }
            last[st] = static_cast<long>(me);
            for (const auto& d : acts[i].deps) {
                ++edgeCount[id(d.stage, d.index) + 1];
                ++indegree[me];
            }
        }
    }
    for (size_t n = 0; n < total; ++n) edgeCount[n + 1] += edgeCount[n];
    g.successors.resize(edgeCount[total]);
    {
        std::vector<size_t> fill(edgeCount.begin(), edgeCount.end() - 1);
        for (size_t s = 0; s < stages; ++s) {
            const auto& acts = schedule.stages[s].actions;
            for (size_t i = 0; i < acts.size(); ++i) {
                const size_t me = id(static_cast<int>(s), static_cast<int>(i));
                if (streamPrev[me] >= 0) g.successors[fill[static_cast<size_t>(streamPrev[me])]++] = me;
                for (const auto& d : acts[i].deps) g.successors[fill[id(d.stage, d.index)]++] = me;
            }
        }
    }
    g.stageOf.resize(total);
    for (size_t s = 0; s < stages; ++s)
        for (size_t n = g.offset[s]; n < g.offset[s + 1]; ++n) g.stageOf[n] = static_cast<int>(s);
    return g;
}

// When every action starts and ends with these costs (Timeline::perAction and stepSeconds; perStage untouched).
void timeActions(const ActionSchedule& schedule, const CostTable& costs, const ActionGraph& g, Timeline& t) {
    const size_t stages = schedule.stages.size();
    const size_t total = g.total;
    const std::vector<size_t>& offset = g.offset;
    const std::vector<long>& streamPrev = g.streamPrev;
    const std::vector<size_t>& edgeCount = g.edgeCount;
    const std::vector<size_t>& successors = g.successors;
    const std::vector<int>& stageOf = g.stageOf;
    auto id = [&](int s, int i) { return g.id(s, i); };
    std::vector<int> indegree = g.indegree;

    t.stepSeconds = 0.0;
    t.perAction.resize(stages);
    for (size_t s = 0; s < stages; ++s) t.perAction[s].resize(schedule.stages[s].actions.size());
    std::vector<double> start(total, 0.0), end(total, 0.0);
    std::vector<size_t> ready;
    ready.reserve(total);
    for (size_t n = 0; n < total; ++n)
        if (indegree[n] == 0) ready.push_back(n);

    size_t done = 0;
    while (!ready.empty()) {
        const size_t n = ready.back();
        ready.pop_back();
        ++done;
        const int s = stageOf[n];
        const size_t i = n - offset[static_cast<size_t>(s)];
        const Action& a = schedule.stages[static_cast<size_t>(s)].actions[i];
        double begin = streamPrev[n] >= 0 ? end[static_cast<size_t>(streamPrev[n])] : 0.0;
        for (const auto& d : a.deps) {
            const size_t o = id(d.stage, d.index);
            const double when =
                d.when == Dependency::When::End ? end[o] : start[o] + d.fraction * (end[o] - start[o]);
            begin = std::max(begin, when);
        }
        start[n] = begin;
        end[n] = begin + costs.perAction[static_cast<size_t>(s)][i].seconds;
        for (const auto& d : a.deps)
            if (d.tailFraction > 0.0)
                end[n] = std::max(end[n], end[id(d.stage, d.index)] +
                                              d.tailFraction * costs.perAction[static_cast<size_t>(s)][i].seconds);
        const bool recv = a.kind == ActionKind::RecvActivation || a.kind == ActionKind::RecvGrad;
        if (recv && !a.deps.empty()) {
            // The receive ends when both the data and the receiver are there. With jittered work on both sides
            // (σ W each, FORMULAS.md §6) that is the expected maximum of the two arrivals: the receiver's (its
            // stream free, plus the transfer) and the data's (the send's end), s² = (σ W_recv)² + (σ W_send)².
            const size_t sendId = id(a.deps.front().stage, a.deps.front().index);
            const double streamFree = streamPrev[n] >= 0 ? end[static_cast<size_t>(streamPrev[n])] : 0.0;
            const double own = streamFree + costs.perAction[static_cast<size_t>(s)][i].seconds, arrival = end[sendId];
            end[n] = std::max(end[n], arrival);
            const ActionCost& sendCost =
                costs.perAction[static_cast<size_t>(a.deps.front().stage)][static_cast<size_t>(a.deps.front().index)];
            end[n] += expectedMaxExcess(own - arrival,
                                        costs.syncJitterFraction * std::hypot(costs.perAction[static_cast<size_t>(s)][i].syncWorkSeconds,
                                                                              sendCost.syncWorkSeconds));
        }
        t.perAction[static_cast<size_t>(s)][i] = {start[n], end[n]};
        t.stepSeconds = std::max(t.stepSeconds, end[n]);
        for (size_t e = edgeCount[n]; e < edgeCount[n + 1]; ++e)
            if (--indegree[successors[e]] == 0) ready.push_back(successors[e]);
    }
    if (done != total) {
        std::string stuck;
        int shown = 0;
        for (size_t n = 0; n < total && shown < 4; ++n) {
            if (indegree[n] <= 0) continue;
            const int s = stageOf[n];
            const Action& a = schedule.stages[static_cast<size_t>(s)].actions[n - offset[static_cast<size_t>(s)]];
            stuck += (shown ? "; " : "") + std::string("stage ") + std::to_string(s) + " " + a.traceName() +
                     " micro-batch " + std::to_string(a.microBatch) + " chunk " + std::to_string(a.chunk);
            ++shown;
        }
        throw RuntimeError("schedule deadlocks: " + std::to_string(total - done) + " actions can never start (" +
                           stuck + ")");
    }
}

// Attributes every second of each stage's compute stream (FORMULAS.md §6): Timeline::perStage from the timed actions.
void attribute(const ActionSchedule& schedule, const CostTable& costs, Timeline& t) {
    const size_t stages = schedule.stages.size();
    t.perStage.assign(stages, StepBreakdown{});
    for (size_t s = 0; s < stages; ++s) {
        const auto& acts = schedule.stages[s].actions;
        StepBreakdown& b = t.perStage[s];
        // Intervals of the data-parallel stream: it runs its actions in list order, so they are disjoint and sorted,
        // and a gap's overlap with them is two binary searches (a scan over all of them made ZeRO-3's per-micro-batch
        // collectives quadratic in the micro-batches).
        BusyLine dpBusy;
        for (size_t i = 0; i < acts.size(); ++i)
            if (streamOf(acts[i].kind) == Stream::DataParallel)
                dpBusy.add(t.perAction[s][i].startSeconds, t.perAction[s][i].endSeconds, 1.0);
        dpBusy.finish();
        double prevEnd = 0.0;
        double lastEnd = 0.0;
        for (size_t i = 0; i < acts.size(); ++i) {
            const Action& a = acts[i];
            const TimedAction& ta = t.perAction[s][i];
            const bool blockingTransfer = holdsComputeStream(schedule, a.kind);
            if (streamOf(a.kind) != Stream::Compute && !blockingTransfer) {
                lastEnd = std::max(lastEnd, ta.endSeconds);
                continue;
            }
            if (blockingTransfer) {
                // A send or receive that holds the compute stream: while the peer is still computing it is bubble,
                // from the matching send's start on it is exposed PP.
                double dataFrom = prevEnd;
                const bool recv = a.kind == ActionKind::RecvActivation || a.kind == ActionKind::RecvGrad;
                if (recv && !a.deps.empty())
                    dataFrom = std::max(prevEnd, t.perAction[static_cast<size_t>(a.deps.front().stage)]
                                                            [static_cast<size_t>(a.deps.front().index)].startSeconds);
                const double until = std::max(prevEnd, ta.endSeconds);
                b.bubbleSeconds += std::max(0.0, std::min(dataFrom, until) - prevEnd);
                b.ppSeconds += std::max(0.0, until - std::max(dataFrom, prevEnd));
                prevEnd = until;
                continue;
            }
            const double gap = ta.startSeconds - prevEnd;
            if (gap > 0.0) {
                // The dependency that was met last decides what the compute stream waited for.
                double latest = -1.0;
                const Action* binding = nullptr;
                TimedAction bindingTime{};
                for (const auto& d : a.deps) {
                    const TimedAction& dt = t.perAction[static_cast<size_t>(d.stage)][static_cast<size_t>(d.index)];
                    const double when = d.when == Dependency::When::End ? dt.endSeconds
                                                                        : dt.startSeconds + d.fraction * (dt.endSeconds - dt.startSeconds);
                    if (when > latest) {
                        latest = when;
                        binding = &schedule.stages[static_cast<size_t>(d.stage)].actions[static_cast<size_t>(d.index)];
                        bindingTime = dt;
                    }
                }
                // A transfer the stage waits for: time before it began was the sender still computing
                // (bubble), the transfer itself is exposed PP. A collective: the data-parallel stream was
                // busy with it or with the collectives queued before it, all exposed DP.
                double comm = 0.0;
                if (binding) {
                    if (binding->kind == ActionKind::RecvActivation || binding->kind == ActionKind::RecvGrad) {
                        const double overlap = std::max(0.0, std::min(ta.startSeconds, bindingTime.endSeconds) -
                                                                 std::max(prevEnd, bindingTime.startSeconds));
                        comm = std::min(gap, overlap);
                        b.ppSeconds += comm;
                    } else if (binding->kind == ActionKind::Collective) {
                        // Count the part of the gap during which this stage's data-parallel stream was busy.
                        comm = std::min(gap, dpBusy.overlap(prevEnd, ta.startSeconds));
                        b.dpSeconds += comm;
                    }
                }
                b.bubbleSeconds += gap - comm;
            }
            const ActionCost& c = costs.perAction[s][i];
            // A compute action that streams what a collective delivers (parameters gathered unit by unit under
            // ZeRO-3 / FSDP prefetch, or Megatron's overlapped parameter all-gather into the first forward) cannot
            // end before that collective ends plus its last unit's work: the stretch beyond its own cost is the
            // compute stream waiting on the data-parallel stream, exposed DP.
            const double stretch = (ta.endSeconds - ta.startSeconds) - c.seconds;
            if (stretch > 0.0) {
                bool onCollective = false;
                for (const auto& d : a.deps)
                    if (d.tailFraction > 0.0 &&
                        schedule.stages[static_cast<size_t>(d.stage)].actions[static_cast<size_t>(d.index)].kind ==
                            ActionKind::Collective)
                        onCollective = true;
                (onCollective ? b.dpSeconds : b.bubbleSeconds) += stretch;
            }
            if (a.kind == ActionKind::OptimizerStep) {
                b.optimizerSeconds += c.seconds;
            } else {
                b.computeSeconds += c.computeSeconds;
                b.dpSeconds += c.contentionDpSeconds;
                b.ppSeconds += c.contentionPpSeconds;
                // A wait inside a compute action is for its TP/CP/EP collectives: shared out in their proportion.
                const double inner = c.tpSeconds + c.cpSeconds + c.epSeconds;
                const double waitShare = inner > 0.0 ? c.waitSeconds / inner : 0.0;
                b.tpSeconds += c.tpSeconds * (1.0 + waitShare);
                b.cpSeconds += c.cpSeconds * (1.0 + waitShare);
                b.epSeconds += c.epSeconds * (1.0 + waitShare);
            }
            prevEnd = ta.endSeconds;
        }
        // After its last compute, a stage waits for its own trailing collectives (exposed DP), then for
        // the slowest stage (bubble).
        const double tail = t.stepSeconds - prevEnd;
        const double dpTail = std::max(0.0, std::min(lastEnd, t.stepSeconds) - prevEnd);
        b.dpSeconds += dpTail;
        b.bubbleSeconds += tail - dpTail;
        // Sums and differences of the same times leave rounding residue (-1e-17 s where a term is zero): a part of
        // the step is never negative, so the residue is cleared rather than reported as a negative time.
        for (double* part : {&b.computeSeconds, &b.tpSeconds, &b.cpSeconds, &b.epSeconds, &b.ppSeconds, &b.dpSeconds,
                             &b.optimizerSeconds, &b.bubbleSeconds})
            if (*part < 0.0 && *part > -1e-9 * std::max(1.0, t.stepSeconds)) *part = 0.0;
    }
}
} // namespace

Timeline simulate(const ActionSchedule& schedule, const CostTable& costs) {
    Timeline t;
    timeActions(schedule, costs, buildGraph(schedule, costs.serialStreams), t);
    attribute(schedule, costs, t);
    return t;
}

StepMetrics stepMetrics(const ActionSchedule& schedule, const CostTable& costs, const Timeline& timeline,
                        const ModelConfig& model, const ClusterConfig& cluster) {
    const Plan& plan = schedule.plan;
    StepMetrics m;
    m.stepSeconds = timeline.stepSeconds;
    const size_t stages = schedule.stages.size();
    double busiest = -1.0;
    double perStageFlops = 0.0;
    for (size_t s = 0; s < stages; ++s) {
        const StepBreakdown& b = timeline.perStage[s];
        const double frac = m.stepSeconds > 0.0 ? b.bubbleSeconds / m.stepSeconds : 0.0;
        m.bubbleFractionPerStage.push_back(frac);
        m.bubbleFraction += frac / static_cast<double>(stages);
        const double busy = b.computeSeconds + b.tpSeconds + b.cpSeconds + b.epSeconds;
        if (busy > busiest) {
            busiest = busy;
            m.bottleneckStage = static_cast<int>(s);
        }
        for (const auto& c : costs.perAction[s]) perStageFlops += c.flops;
    }
    m.breakdown = timeline.perStage[static_cast<size_t>(m.bottleneckStage)];
    const double ranksPerStage = static_cast<double>(plan.worldSize()) / plan.pp;
    m.hardwareFlopsPerStep = perStageFlops * ranksPerStage;
    m.modelFlopsPerStep = modelFlopsPerStep(model, plan);
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    const double peak = cluster.peakFlops(recipe.computeDtype) * plan.worldSize();
    if (m.stepSeconds > 0.0) {
        // MFU / HFU as defined by Chowdhery et al. 2022 (PaLM, appendix B) and Korthikanti et al. 2022.
        m.mfu = m.modelFlopsPerStep / (m.stepSeconds * peak);
        m.hfu = m.hardwareFlopsPerStep / (m.stepSeconds * peak);
        m.tokensPerSecond = static_cast<double>(plan.globalBatch) * static_cast<double>(model.seqLen) / m.stepSeconds;
    }
    return m;
}


namespace {
// withContention on the table itself: the passes of simulatePlan update one table rather than copy it each time
// (a long schedule's table is megabytes). Only the contention parts and `seconds` change; what the busy lines read
// (computeSeconds) does not.
void applyContention(const ActionSchedule& schedule, CostTable& out, const Timeline& timeline, double weight) {
    const CostTable& costs = out;
    if (!(costs.commContention > 0.0) || costs.serialStreams) return;
    for (size_t s = 0; s < schedule.stages.size(); ++s) {
        const auto& acts = schedule.stages[s].actions;
        // Busy intervals of this rank's communication streams with the rate at which each moves its own
        // (isolated) work: a collective that streams behind its producer is spread over its whole interval, a
        // receive that waited for its sender moved data only at its end.
        // One line per communication stream; a stream runs its actions in list order, so each line's intervals are
        // disjoint and sorted, and the overlap with a compute action is two binary searches and a prefix sum.
        BusyLine dp, send, recv;
        for (size_t i = 0; i < acts.size(); ++i) {
            const ActionKind k = acts[i].kind;
            const TimedAction& ta = timeline.perAction[s][i];
            const double own = costs.perAction[s][i].computeSeconds;
            const double span = ta.endSeconds - ta.startSeconds;
            if (!(own > 0.0) || !(span > 0.0)) continue;
            if (k == ActionKind::Collective) {
                dp.add(ta.startSeconds, ta.endSeconds, std::min(1.0, own / span) * costs.perAction[s][i].contentionWeight);
            } else if (holdsComputeStream(schedule, k)) {
                continue; // on the compute stream: beside no compute
            } else if (k == ActionKind::RecvActivation || k == ActionKind::RecvGrad) {
                recv.add(ta.endSeconds - std::min(own, span), ta.endSeconds, 1.0);
            } else if (isTransfer(k)) {
                send.add(ta.endSeconds - std::min(own, span), ta.endSeconds, 1.0);
            }
        }
        dp.finish();
        send.finish();
        recv.finish();
        auto overlap = [&](const BusyLine& line, double a, double b) { return line.overlap(a, b); };
        for (size_t i = 0; i < acts.size(); ++i) {
            if (!isCompute(acts[i].kind)) continue;
            ActionCost& c = out.perAction[s][i];
            const TimedAction& ta = timeline.perAction[s][i];
            // The action ran [start, end]; what it would take without contention is its uncontended cost, so the
            // comm overlapping its first that-long stretch is what slowed it.
            const double base = c.seconds - c.contentionDpSeconds - c.contentionPpSeconds;
            const double until = ta.startSeconds + base;
            const double dpComm = overlap(dp, ta.startSeconds, until);
            const double ppComm = overlap(send, ta.startSeconds, until) + overlap(recv, ta.startSeconds, until);
            // However much communication ran beside it, its kernels run at no less than 1 / (1 + ceiling) of their
            // speed: the charge, split between DP and PP as the communication was, is capped by its own compute.
            const double lost = contentionSeconds(costs.commContention, costs.commContentionMax, dpComm + ppComm, c.computeSeconds);
            const double dpNow = dpComm + ppComm > 0.0 ? lost * dpComm / (dpComm + ppComm) : 0.0;
            const double ppNow = std::max(0.0, lost - dpNow);
            c.contentionDpSeconds = weight * dpNow + (1.0 - weight) * c.contentionDpSeconds;
            c.contentionPpSeconds = weight * ppNow + (1.0 - weight) * c.contentionPpSeconds;
            c.sumParts();
        }
    }
}
} // namespace

CostTable withContention(const ActionSchedule& schedule, const CostTable& costs, const Timeline& timeline, double weight) {
    CostTable out = costs;
    applyContention(schedule, out, timeline, weight);
    return out;
}

PlanSimulation simulatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return simulatePlan(model, cluster, plan, std::numeric_limits<double>::infinity());
}

PlanSimulation simulatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& given, double stopAbove) {
    PlanSimulation r;
    const Plan plan = withResolvedPipelineSplit(model, cluster, given);
    r.schedule = buildSchedule(model, plan);
    r.costs = costSchedule(r.schedule, model, cluster);
    // The passes below time the same graph with new costs: it is built once, and the stages' attribution is made
    // for the last pass only.
    const ActionGraph graph = buildGraph(r.schedule, r.costs.serialStreams);
    timeActions(r.schedule, r.costs, graph, r.timeline);
    // Communication that overlaps compute slows it (FORMULAS.md §6.2): cost the overlap seen in the timeline and
    // simulate again.
    if (cluster.gpu.commContention > 0.0 && !r.costs.serialStreams && r.timeline.stepSeconds < stopAbove) {
        // The overlap depends on the slowdown it causes: a fixed point. The first estimate (from the uncontended
        // timeline) overshoots where communication is a large part of the step; two more passes, each averaged
        // with the one before, land within 2% of the fixed point on the published runs (undamped it oscillates).
        applyContention(r.schedule, r.costs, r.timeline, 1.0);
        timeActions(r.schedule, r.costs, graph, r.timeline);
        for (int pass = 0; pass < 2; ++pass) {
            applyContention(r.schedule, r.costs, r.timeline, 0.5);
            timeActions(r.schedule, r.costs, graph, r.timeline);
        }
    }
    attribute(r.schedule, r.costs, r.timeline);
    r.metrics = stepMetrics(r.schedule, r.costs, r.timeline, model, cluster);
    r.memory = predictMemory(model, cluster, plan);
    return r;
}

} // namespace tessel::sim
