// Chrome trace export of a simulated timeline: one process per rank, one thread per stream, the schedule's
// action names (the executor writes measured traces with the same names so they can be laid side by side).
#pragma once

#include "tessel/sim/simulate.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace tessel::sim {

struct TraceOptions {
    // Ranks to emit. Empty = one representative rank per pipeline stage (tp = cp = dp = 0): every rank of a
    // stage runs the same list, so the others add nothing but size.
    std::vector<int> ranks;
};

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}; complete events (ph "X") with ts and
// dur in microseconds, pid = rank, tid = stream; args carry micro_batch, chunk, stage and, for collectives,
// group, primitive and bytes, and each compute action's split into compute and TP/CP/EP time.
nlohmann::json chromeTrace(const PlanSimulation& sim, const TraceOptions& options = {});

} // namespace tessel::sim
