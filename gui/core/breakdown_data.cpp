// Where the step goes, per pipeline stage, read off the simulator's timeline.
#include "core/breakdown_data.hpp"

namespace tessel::gui {

BreakdownSeconds breakdownSeconds(const sim::StepBreakdown& b) {
    return {b.computeSeconds, b.tpSeconds, b.cpSeconds, b.epSeconds, b.ppSeconds, b.dpSeconds, b.optimizerSeconds,
            b.bubbleSeconds};
}

BreakdownData BreakdownData::fromSimulation(const sim::PlanSimulation& s) {
    BreakdownData d;
    const sim::StepMetrics& m = s.metrics;
    d.stepSeconds = m.stepSeconds;
    d.bubbleFraction = m.bubbleFraction;
    d.mfu = m.mfu;
    d.tokensPerSecond = m.tokensPerSecond;
    for (size_t i = 0; i < s.timeline.perStage.size(); ++i) {
        BreakdownRow r;
        r.stage = static_cast<int>(i);
        r.seconds = breakdownSeconds(s.timeline.perStage[i]);
        r.totalSeconds = s.timeline.perStage[i].total();
        r.bubbleFraction = i < m.bubbleFractionPerStage.size() ? m.bubbleFractionPerStage[i] : 0.0;
        r.bottleneck = r.stage == m.bottleneckStage;
        d.stages.push_back(r);
    }
    d.bottleneck.stage = m.bottleneckStage;
    d.bottleneck.seconds = breakdownSeconds(m.breakdown);
    d.bottleneck.totalSeconds = m.breakdown.total();
    d.bottleneck.bottleneck = true;
    if (d.stages.empty()) d.message = QStringLiteral("no pipeline stages");
    return d;
}

BreakdownData BreakdownData::empty(const QString& message) {
    BreakdownData d;
    d.message = message;
    return d;
}

} // namespace tessel::gui
