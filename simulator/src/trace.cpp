// Chrome trace (Perfetto / chrome://tracing) export of a simulated timeline.
#include "tessel/sim/trace.hpp"

#include "tessel/cost/errors.hpp"

namespace tessel::sim {

nlohmann::json chromeTrace(const PlanSimulation& sim, const TraceOptions& options) {
    const Plan& plan = sim.schedule.plan;
    std::vector<int> ranks = options.ranks;
    if (ranks.empty()) {
        for (int s = 0; s < plan.pp; ++s) {
            RankCoords c;
            c.pp = s;
            ranks.push_back(rankOf(plan, c));
        }
    }
    nlohmann::json events = nlohmann::json::array();
    for (int rank : ranks) {
        if (rank < 0 || rank >= plan.worldSize())
            throw InputError("--ranks", "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(plan.worldSize() - 1));
        const int stage = rankCoords(plan, rank).pp;
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank},
                          {"args", {{"name", "rank " + std::to_string(rank) + " (stage " + std::to_string(stage) + ")"}}}});
        events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
        for (int st = 0; st < kStreamCount; ++st)
            events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", st},
                              {"args", {{"name", toString(static_cast<Stream>(st))}}}});
        const auto& acts = sim.schedule.stages[static_cast<size_t>(stage)].actions;
        for (size_t i = 0; i < acts.size(); ++i) {
            const Action& a = acts[i];
            const TimedAction& t = sim.timeline.perAction[static_cast<size_t>(stage)][i];
            const ActionCost& c = sim.costs.perAction[static_cast<size_t>(stage)][i];
            nlohmann::json args{{"stage", stage}, {"chunk", a.chunk}, {"index", i}};
            if (a.microBatch >= 0) args["micro_batch"] = a.microBatch;
            if (a.kind == ActionKind::Collective) {
                args["group"] = toString(a.group);
                args["primitive"] = toString(a.primitive);
                args["bytes"] = a.bytes;
                if (a.bucket >= 0) args["bucket"] = a.bucket;
            } else if (isCompute(a.kind)) {
                args["compute_us"] = c.computeSeconds * 1e6;
                if (c.tpSeconds > 0) args["tp_us"] = c.tpSeconds * 1e6;
                if (c.cpSeconds > 0) args["cp_us"] = c.cpSeconds * 1e6;
                if (c.epSeconds > 0) args["ep_us"] = c.epSeconds * 1e6;
            } else {
                args["peer_stage"] = a.peerStage;
            }
            events.push_back({{"ph", "X"},
                              {"name", a.traceName()},
                              {"cat", toString(a.kind)},
                              {"pid", rank},
                              {"tid", static_cast<int>(streamOf(a.kind))},
                              {"ts", t.startSeconds * 1e6},
                              {"dur", (t.endSeconds - t.startSeconds) * 1e6},
                              {"args", args}});
        }
    }
    return {{"traceEvents", events},
            {"displayTimeUnit", "ms"},
            {"otherData",
             {{"source", "tessel predicted"},
              {"plan", planToJson(plan)},
              {"step_seconds", sim.metrics.stepSeconds},
              {"bubble_fraction", sim.metrics.bubbleFraction}}}};
}

} // namespace tessel::sim
