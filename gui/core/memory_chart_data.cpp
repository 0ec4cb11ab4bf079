// What the memory chart shows, computed from the memory model's report.
#include "core/memory_chart_data.hpp"

#include "core/format.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::gui {

int AxisScale::ticks() const { return step > 0.0 ? static_cast<int>(std::lround(maxValue / step)) : 0; }

AxisScale niceAxis(double maxValue, int targetTicks) {
    AxisScale a;
    if (!(maxValue > 0.0) || !std::isfinite(maxValue)) return a;
    const double raw = maxValue / std::max(1, targetTicks);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double residual = raw / magnitude;
    // The smallest of 1, 2, 5, 10 x 10^k at least as large as the raw step.
    const double nice = residual <= 1.0 ? 1.0 : residual <= 2.0 ? 2.0 : residual <= 5.0 ? 5.0 : 10.0;
    a.step = nice * magnitude;
    a.maxValue = std::ceil(maxValue / a.step - 1e-9) * a.step;
    return a;
}

MemoryChartData MemoryChartData::fromReport(const MemoryReport& report) {
    MemoryChartData d;
    d.capacityGib = toGiB(report.capacityBytes);
    d.peakStage = report.peakStage;
    d.fits = report.fits;
    double top = d.capacityGib;
    for (const StageMemory& s : report.stages) {
        MemoryStageBar b;
        b.stage = s.stage;
        b.gib = {toGiB(s.weightsBytes), toGiB(s.gradsBytes), toGiB(s.optimizerBytes), toGiB(s.activationsBytes),
                 toGiB(s.otherBytes())};
        b.totalGib = toGiB(s.totalBytes());
        b.headroomGib = toGiB(s.headroomBytes);
        b.fits = s.fits;
        top = std::max(top, b.totalGib);
        d.stages.push_back(b);
    }
    d.axis = niceAxis(top * 1.05);
    if (d.stages.empty()) d.message = QStringLiteral("no pipeline stages");
    return d;
}

MemoryChartData MemoryChartData::empty(const QString& message) {
    MemoryChartData d;
    d.message = message;
    return d;
}

void MemoryChartData::setMeasured(const std::vector<std::optional<double>>& gibPerStage) {
    double top = capacityGib;
    for (size_t i = 0; i < stages.size(); ++i) {
        stages[i].measuredGib = i < gibPerStage.size() ? gibPerStage[i] : std::nullopt;
        top = std::max({top, stages[i].totalGib, stages[i].measuredGib.value_or(0.0)});
    }
    axis = niceAxis(top * 1.05);
}

int MemoryChartData::oomStageCount() const {
    return static_cast<int>(std::count_if(stages.begin(), stages.end(), [](const MemoryStageBar& b) { return !b.fits; }));
}

QString MemoryChartData::title() const {
    QString t = QStringLiteral("Memory per GPU by pipeline stage");
    if (stages.empty()) return t;
    const int oom = oomStageCount();
    const QString peak = gibLabel(stages[static_cast<size_t>(peakStage)].totalGib);
    if (oom) return t + QStringLiteral(" - %1 of %2 stages OOM").arg(oom).arg(stages.size());
    if (mayNotFit) return t + QStringLiteral(" - may not fit: peak %1 GiB, inside the validated peak band of the GPU's memory").arg(peak);
    return t + QStringLiteral(" - fits, peak %1 GiB").arg(peak);
}

MemoryChartData::Layout MemoryChartData::layout(const QRectF& chart, double axisLabelWidth, double legendHeight,
                                                double labelHeight) const {
    Layout l;
    l.plot = QRectF(chart.left() + axisLabelWidth, chart.top() + legendHeight, chart.width() - axisLabelWidth - 8.0,
                    chart.height() - legendHeight - labelHeight);
    const int n = std::max<int>(1, static_cast<int>(stages.size()));
    l.slotWidth = l.plot.width() / n;
    // Bars take 70% of their slot, at most 90 pixels so two stages do not look like a wall.
    l.barWidth = std::min(l.slotWidth * 0.7, 90.0);
    return l;
}

double MemoryChartData::yForGib(const Layout& l, double gib) const {
    const double frac = axis.maxValue > 0.0 ? gib / axis.maxValue : 0.0;
    return l.plot.bottom() - frac * l.plot.height();
}

int MemoryChartData::stageAt(const Layout& l, const QPointF& point) const {
    if (!l.plot.contains(point) || l.slotWidth <= 0.0) return -1;
    const int i = static_cast<int>((point.x() - l.plot.left()) / l.slotWidth);
    return i >= 0 && i < static_cast<int>(stages.size()) ? i : -1;
}

} // namespace tessel::gui
