// What the memory chart shows, computed from the memory model's report: per pipeline stage a stacked bar of
// weights / grads / optimizer / activations / other in GiB, the GPU capacity line and the axis; measured
// peaks laid over it when a run was opened. Plain data: tested without a window.
#pragma once

#include "core/palette.hpp"

#include "tessel/cost/memory.hpp"

#include <QRectF>
#include <QString>

#include <array>
#include <optional>
#include <vector>

namespace tessel::gui {

// Axis ticks at 1, 2 or 5 x 10^k covering [0, maxValue] with about `targetTicks` intervals.
struct AxisScale {
    double maxValue = 1.0;     // the axis end: a whole number of steps >= the data
    double step = 1.0;
    int ticks() const;         // number of intervals
};
AxisScale niceAxis(double maxValue, int targetTicks = 5);

struct MemoryStageBar {
    int stage = 0;
    std::array<double, kMemoryComponentCount> gib{};  // weights, grads, optimizer, activations, other
    double totalGib = 0.0;
    double headroomGib = 0.0;                         // negative when the stage does not fit
    bool fits = true;
    std::optional<double> measuredGib;                // from a measured run
};

struct MemoryChartData {
    std::vector<MemoryStageBar> stages;
    double capacityGib = 0.0;
    int peakStage = 0;
    bool fits = true;
    // Fits as predicted, but the validated peak band (tessel validate) reaches past the GPU's memory
    // (sim::memoryVerdict); set by whoever knows the plan.
    bool mayNotFit = false;
    AxisScale axis;
    QString message;   // shown instead of bars when there is nothing to draw (invalid plan, no plan)

    static MemoryChartData fromReport(const MemoryReport& report);
    static MemoryChartData empty(const QString& message);
    // Measured peak GiB per stage (missing stages stay without a marker); re-fits the axis.
    void setMeasured(const std::vector<std::optional<double>>& gibPerStage);
    int oomStageCount() const;
    // "Memory per GPU by pipeline stage - fits, peak 61.2 GiB" (or how many stages run out, or that it may not fit).
    QString title() const;

    // Layout inside a chart rectangle (the painter and the widget's hover use the same numbers).
    struct Layout {
        QRectF plot;                  // the bars' area, axis labels outside it
        double barWidth = 0.0;
        double slotWidth = 0.0;
        double xForBar(int i) const { return plot.left() + slotWidth * i + (slotWidth - barWidth) / 2.0; }
    };
    Layout layout(const QRectF& chart, double axisLabelWidth, double legendHeight, double labelHeight) const;
    double yForGib(const Layout& l, double gib) const;
    // The stage whose bar (full slot height) holds `point`, or -1.
    int stageAt(const Layout& l, const QPointF& point) const;
};

} // namespace tessel::gui
