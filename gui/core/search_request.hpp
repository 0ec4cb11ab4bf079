// What the GUI asks the search for: the scenario's model and cluster, its global batch and precision, and
// the fields the user pinned ("tp=8, schedule=1f1b", the same keys as `tessel search --fix`).
#pragma once

#include "tessel/cost/errors.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/sim/search.hpp"

#include <QString>

namespace tessel::gui {

struct SearchRequest {
    ModelConfig model;
    ClusterConfig cluster;
    sim::SearchSpace space;
    sim::SearchOptions options;   // progress and cancel are set by SearchController
};

// Applies "key=value" entries separated by commas or spaces to `space`. Keys: tp, pp, dp, cp, ep, vpp,
// micro_batch (mb), zero_stage (zero), recompute, schedule, sp, rank_order. Problems name "fix <key>".
void applyFixes(const QString& text, sim::SearchSpace& space, ProblemList& problems);

// The request for searching `scenario`'s model on its cluster's GPUs with its global batch, precision and
// flash-attention setting, and hybrid sharding as a dimension when the scenario's plan shards hybrid. Problems (bad fixes, searchProblems) are collected in `problems`.
// `memoryBand`: only plans that fit at the validated peak band's upper end (sim::SearchSpace::memoryBand).
SearchRequest makeSearchRequest(const Scenario& scenario, const QString& fixText, int topK, ProblemList& problems,
                                bool memoryBand = false);

} // namespace tessel::gui
