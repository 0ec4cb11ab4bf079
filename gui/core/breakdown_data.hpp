// Where the step goes, per pipeline stage: compute, exposed communication by group (TP, CP, EP, PP, DP),
// optimizer and bubble, read off the simulator's timeline; with the step's headline numbers.
#pragma once

#include "core/palette.hpp"

#include "tessel/sim/simulate.hpp"

#include <QString>

#include <array>
#include <optional>
#include <vector>

namespace tessel::gui {

using BreakdownSeconds = std::array<double, kBreakdownPartCount>;
BreakdownSeconds breakdownSeconds(const sim::StepBreakdown& b);

struct BreakdownRow {
    int stage = 0;
    BreakdownSeconds seconds{};
    double totalSeconds = 0.0;
    double bubbleFraction = 0.0;
    bool bottleneck = false;
};

struct BreakdownData {
    std::vector<BreakdownRow> stages;     // one per pipeline stage, from timeline.perStage
    BreakdownRow bottleneck;              // metrics.breakdown (the stage with the most compute)
    double stepSeconds = 0.0;
    double bubbleFraction = 0.0;          // mean over stages
    double mfu = 0.0;
    double tokensPerSecond = 0.0;
    std::optional<double> measuredStepSeconds;
    QString message;                      // shown instead of bars when there is nothing to draw

    static BreakdownData fromSimulation(const sim::PlanSimulation& sim);
    static BreakdownData empty(const QString& message);
};

} // namespace tessel::gui
