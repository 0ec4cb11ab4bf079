// Painting of the memory chart, the step breakdown and the pipeline timeline with QPainter.
#include "core/chart_painters.hpp"

#include "core/format.hpp"
#include "core/palette.hpp"

#include <QFontMetricsF>
#include <QPainterPath>

#include <algorithm>
#include <cmath>

namespace tessel::gui {

namespace {
constexpr double kPad = 6.0;

void drawMessage(QPainter& p, const QRectF& rect, const QString& message) {
    p.setPen(mutedTextColor());
    p.drawText(rect.adjusted(kPad, kPad, -kPad, -kPad), Qt::AlignCenter | Qt::TextWordWrap, message);
}

// A row of coloured swatches with names, wrapped onto more lines when the width runs out; returns the
// height used. With `paint` false it only measures.
struct LegendEntry {
    QColor color;
    QString name;
    Qt::BrushStyle pattern = Qt::NoBrush;
    enum class Shape { Box, Line, Diamond, Text } shape = Shape::Box;
};

double drawLegend(QPainter& p, const QRectF& rect, const std::vector<LegendEntry>& entries) {
    const QFontMetricsF fm(p.font());
    const double h = fm.height();
    const double box = std::floor(h * 0.7);
    double x = rect.left();
    double y = rect.top();
    for (const LegendEntry& e : entries) {
        const double swatchWidth = e.shape == LegendEntry::Shape::Text ? 0.0 : box + 4.0;
        const double w = swatchWidth + fm.horizontalAdvance(e.name) + 12.0;
        if (x > rect.left() && x + w > rect.right()) {
            x = rect.left();
            y += h;
        }
        if (e.shape == LegendEntry::Shape::Text) {
            p.setPen(mutedTextColor());
            p.drawText(QRectF(x, y, w, h), Qt::AlignLeft | Qt::AlignVCenter, e.name);
        } else {
            const QRectF swatch(x, y + (h - box) / 2.0, box, box);
            if (e.shape == LegendEntry::Shape::Line) {
                p.setPen(QPen(e.color, 2.0, Qt::DashLine));
                p.drawLine(QPointF(swatch.left(), swatch.center().y()), QPointF(swatch.right(), swatch.center().y()));
            } else if (e.shape == LegendEntry::Shape::Diamond) {
                QPainterPath d;
                const QPointF c = swatch.center();
                const double r = box / 2.0;
                d.moveTo(c.x(), c.y() - r);
                d.lineTo(c.x() + r, c.y());
                d.lineTo(c.x(), c.y() + r);
                d.lineTo(c.x() - r, c.y());
                d.closeSubpath();
                p.fillPath(d, e.color);
            } else {
                p.fillRect(swatch, e.color);
                if (e.pattern != Qt::NoBrush) p.fillRect(swatch, QBrush(QColor(255, 255, 255, 200), e.pattern));
                p.setPen(QPen(e.color.darker(140), 1.0));
                p.drawRect(swatch);
            }
            p.setPen(textColor());
            p.drawText(QRectF(x + box + 4.0, y, w, h), Qt::AlignLeft | Qt::AlignVCenter, e.name);
        }
        x += w;
    }
    return y + h - rect.top();
}

double drawTitle(QPainter& p, const QRectF& rect, const QString& title) {
    QFont bold = p.font();
    bold.setBold(true);
    p.save();
    p.setFont(bold);
    p.setPen(textColor());
    const QFontMetricsF fm(bold);
    p.drawText(QRectF(rect.left(), rect.top(), rect.width(), fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(title, Qt::ElideRight, rect.width()));
    p.restore();
    return fm.height();
}

std::vector<LegendEntry> memoryLegend(const MemoryChartData& d) {
    std::vector<LegendEntry> e;
    for (int c = 0; c < kMemoryComponentCount; ++c)
        e.push_back({memoryComponentColor(static_cast<MemoryComponent>(c)), memoryComponentName(static_cast<MemoryComponent>(c))});
    e.push_back({capacityColor(), QStringLiteral("GPU memory"), Qt::NoBrush, LegendEntry::Shape::Line});
    bool measured = false;
    for (const auto& s : d.stages) measured = measured || s.measuredGib.has_value();
    if (measured) e.push_back({measuredColor(), QStringLiteral("measured peak"), Qt::NoBrush, LegendEntry::Shape::Diamond});
    return e;
}

// Height of a legend laid out in `width` (the same wrapping as drawLegend).
double legendHeight(const QFontMetricsF& fm, double width, const std::vector<LegendEntry>& entries) {
    const double h = fm.height();
    const double box = std::floor(h * 0.7);
    double x = 0.0, y = 0.0;
    for (const LegendEntry& e : entries) {
        const double w = (e.shape == LegendEntry::Shape::Text ? 0.0 : box + 4.0) + fm.horizontalAdvance(e.name) + 12.0;
        if (x > 0.0 && x + w > width) x = 0.0, y += h;
        x += w;
    }
    return y + h;
}
} // namespace

MemoryChartData::Layout memoryChartLayout(const MemoryChartData& data, const QRectF& rect, const QFontMetricsF& fm) {
    // Header: title line, the legend (wrapped to the width), the labels above the bars.
    const double header = fm.height() + 2.0 + legendHeight(fm, rect.width() - 2.0 * kPad, memoryLegend(data)) + fm.height() + 4.0;
    const double axisWidth = fm.horizontalAdvance(QStringLiteral("0000")) + 10.0;
    const double footer = fm.height() * 2.2;
    return data.layout(rect.adjusted(kPad, kPad, -kPad, -kPad), axisWidth, header, footer);
}

void paintMemoryChart(QPainter& p, const QRectF& rect, const MemoryChartData& d, int hoveredStage) {
    p.save();
    p.fillRect(rect, Qt::white);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QFontMetricsF fm(p.font());
    const QRectF inner = rect.adjusted(kPad, kPad, -kPad, -kPad);
    const double titleHeight = drawTitle(p, inner, d.title());
    if (!d.message.isEmpty() || d.stages.empty()) {
        drawMessage(p, inner.adjusted(0, titleHeight, 0, 0), d.message.isEmpty() ? QStringLiteral("no plan") : d.message);
        p.restore();
        return;
    }
    drawLegend(p, QRectF(inner.left(), inner.top() + titleHeight + 2.0, inner.width(), fm.height() * 3.0), memoryLegend(d));

    const MemoryChartData::Layout l = memoryChartLayout(d, rect, fm);
    const QRectF& plot = l.plot;

    // Grid and axis labels (GiB).
    for (int i = 0; i <= d.axis.ticks(); ++i) {
        const double gib = d.axis.step * i;
        const double y = d.yForGib(l, gib);
        p.setPen(QPen(gridColor(), 1.0));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(mutedTextColor());
        p.drawText(QRectF(inner.left(), y - fm.height() / 2.0, plot.left() - inner.left() - 4.0, fm.height()),
                   Qt::AlignRight | Qt::AlignVCenter, gibLabel(gib));
    }
    p.save();
    p.translate(inner.left() + fm.height() * 0.1, plot.top() - fm.height() * 1.2);
    p.setPen(mutedTextColor());
    p.drawText(QPointF(0, fm.ascent()), QStringLiteral("GiB"));
    p.restore();

    const int n = static_cast<int>(d.stages.size());
    // Stage labels every k-th bar so they never overlap.
    const double labelWidth = fm.horizontalAdvance(QStringLiteral("000")) + 4.0;
    const int labelEvery = std::max(1, static_cast<int>(std::ceil(labelWidth / std::max(1.0, l.slotWidth))));
    for (int i = 0; i < n; ++i) {
        const MemoryStageBar& b = d.stages[static_cast<size_t>(i)];
        const double x = l.xForBar(i);
        const QRectF slot(plot.left() + l.slotWidth * i, plot.top(), l.slotWidth, plot.height());
        if (!b.fits) p.fillRect(slot, QColor(oomColor().red(), oomColor().green(), oomColor().blue(), 28));
        if (i == hoveredStage) p.fillRect(slot, QColor(0, 0, 0, 18));
        double base = 0.0;
        for (int c = 0; c < kMemoryComponentCount; ++c) {
            const double g = b.gib[static_cast<size_t>(c)];
            if (g <= 0.0) continue;
            const double y0 = d.yForGib(l, base);
            const double y1 = d.yForGib(l, base + g);
            p.fillRect(QRectF(x, y1, l.barWidth, y0 - y1), memoryComponentColor(static_cast<MemoryComponent>(c)));
            base += g;
        }
        const double top = d.yForGib(l, b.totalGib);
        if (!b.fits) {
            // Red outline and label: the stage that needs more than the GPU has.
            p.setPen(QPen(oomColor(), 3.0));
            p.drawRect(QRectF(x, top, l.barWidth, plot.bottom() - top));
        }
        p.setPen(b.fits ? textColor() : oomColor());
        QFont f = p.font();
        f.setBold(!b.fits);
        p.save();
        p.setFont(f);
        const QString label = b.fits ? gibLabel(b.totalGib) : QStringLiteral("OOM");
        // Above the bar, centred on its slot, on a white backing so grid and capacity lines do not cross it.
        const double lw = QFontMetricsF(f).horizontalAdvance(label) + 4.0;
        const QRectF labelRect(slot.center().x() - lw / 2.0, top - fm.height() - 1.0, lw, fm.height());
        p.fillRect(labelRect, QColor(255, 255, 255, 220));
        p.drawText(labelRect, Qt::AlignCenter, label);
        p.restore();
        if (b.measuredGib) {
            const double y = d.yForGib(l, *b.measuredGib);
            p.setPen(QPen(measuredColor(), 2.0));
            p.drawLine(QPointF(x - 3.0, y), QPointF(x + l.barWidth + 3.0, y));
            QPainterPath diamond;
            const double r = 4.0;
            diamond.moveTo(x + l.barWidth + 3.0, y - r);
            diamond.lineTo(x + l.barWidth + 3.0 + r, y);
            diamond.lineTo(x + l.barWidth + 3.0, y + r);
            diamond.lineTo(x + l.barWidth + 3.0 - r, y);
            diamond.closeSubpath();
            p.fillPath(diamond, measuredColor());
        }
        if (i % labelEvery == 0) {
            p.setPen(textColor());
            p.drawText(QRectF(slot.left(), plot.bottom() + 2.0, slot.width(), fm.height()), Qt::AlignHCenter | Qt::AlignTop,
                       QString::number(b.stage));
        }
    }
    p.setPen(mutedTextColor());
    p.drawText(QRectF(plot.left(), plot.bottom() + fm.height() + 2.0, plot.width(), fm.height()), Qt::AlignHCenter | Qt::AlignTop,
               QStringLiteral("pipeline stage (one GPU of each)"));

    // Capacity line last so it stays visible over the bars.
    const double cy = d.yForGib(l, d.capacityGib);
    p.setPen(QPen(capacityColor(), 1.5, Qt::DashLine));
    p.drawLine(QPointF(plot.left(), cy), QPointF(plot.right(), cy));
    const QString cap = QStringLiteral("GPU %1 GiB").arg(gibLabel(d.capacityGib));
    const double cw = fm.horizontalAdvance(cap) + 6.0;
    const QRectF capRect(plot.right() - cw, cy - fm.height() - 1.0, cw, fm.height());
    p.fillRect(capRect, QColor(255, 255, 255, 210));
    p.setPen(capacityColor());
    p.drawText(capRect, Qt::AlignCenter, cap);
    p.setPen(QPen(QColor(0x99, 0x99, 0x99), 1.0));
    p.drawLine(QPointF(plot.left(), plot.bottom()), QPointF(plot.right(), plot.bottom()));
    p.restore();
}

namespace {
struct BreakdownLayout {
    double headerHeight = 0.0;
    double labelWidth = 0.0;
    QRectF bars;
    double rowHeight = 0.0;
};

// Only the parts that occur somewhere: a dense model has no EP, most plans no CP.
std::vector<LegendEntry> breakdownLegend(const BreakdownData& d) {
    std::array<bool, kBreakdownPartCount> present{};
    present[static_cast<size_t>(BreakdownPart::Compute)] = true;
    for (const auto& r : d.stages)
        for (size_t k = 0; k < present.size(); ++k) present[k] = present[k] || r.seconds[k] > 0.0;
    std::vector<LegendEntry> legend;
    for (int k = 0; k < kBreakdownPartCount; ++k)
        if (present[static_cast<size_t>(k)])
            legend.push_back({breakdownPartColor(static_cast<BreakdownPart>(k)), breakdownPartName(static_cast<BreakdownPart>(k))});
    return legend;
}

BreakdownLayout breakdownLayout(const BreakdownData& d, const QRectF& rect, const QFontMetricsF& fm) {
    BreakdownLayout l;
    const QRectF inner = rect.adjusted(kPad, kPad, -kPad, -kPad);
    // Title, summary line, the legend (wrapped), a small gap.
    l.headerHeight = fm.height() * 2.0 + 2.0 + legendHeight(fm, inner.width(), breakdownLegend(d)) + 6.0;
    l.labelWidth = fm.horizontalAdvance(QStringLiteral("stage 00*")) + 8.0;
    const double right = fm.horizontalAdvance(QStringLiteral("00.00 ms")) + 8.0;
    l.bars = QRectF(inner.left() + l.labelWidth, inner.top() + l.headerHeight, inner.width() - l.labelWidth - right,
                    inner.height() - l.headerHeight - fm.height() * 1.4);
    const int n = std::max<int>(1, static_cast<int>(d.stages.size()));
    l.rowHeight = std::min(fm.height() * 1.5, l.bars.height() / n);
    return l;
}
} // namespace

std::vector<QRectF> breakdownRowRects(const BreakdownData& d, const QRectF& rect, const QFontMetricsF& fm) {
    const BreakdownLayout l = breakdownLayout(d, rect, fm);
    std::vector<QRectF> rows;
    for (size_t i = 0; i < d.stages.size(); ++i)
        rows.emplace_back(rect.left(), l.bars.top() + l.rowHeight * static_cast<double>(i), rect.width(), l.rowHeight);
    return rows;
}

void paintBreakdown(QPainter& p, const QRectF& rect, const BreakdownData& d, int hoveredStage) {
    p.save();
    p.fillRect(rect, Qt::white);
    const QFontMetricsF fm(p.font());
    const QRectF inner = rect.adjusted(kPad, kPad, -kPad, -kPad);
    const double titleHeight = drawTitle(p, inner, QStringLiteral("Where the step goes, per stage"));
    if (!d.message.isEmpty() || d.stages.empty()) {
        drawMessage(p, inner.adjusted(0, titleHeight, 0, 0), d.message.isEmpty() ? QStringLiteral("no plan") : d.message);
        p.restore();
        return;
    }
    // The headline numbers, dropping the least important ones when the chart is narrow.
    struct Part {
        QString text;
        int priority;   // lower survives longer
    };
    std::vector<Part> parts{{QStringLiteral("step %1").arg(secondsText(d.stepSeconds)), 0}};
    if (d.measuredStepSeconds)
        parts.push_back({QStringLiteral("measured %1 (%2)")
                             .arg(secondsText(*d.measuredStepSeconds), signedPercentText(*d.measuredStepSeconds / d.stepSeconds - 1.0)),
                         1});
    parts.push_back({QStringLiteral("MFU %1").arg(percentText(d.mfu)), 2});
    parts.push_back({QStringLiteral("bubble %1").arg(percentText(d.bubbleFraction)), 3});
    parts.push_back({QStringLiteral("%1k tokens/s").arg(d.tokensPerSecond / 1e3, 0, 'f', 1), 4});
    QString summary;
    for (int keep = 4; keep >= 0; --keep) {
        QStringList shown;
        for (const Part& part : parts)
            if (part.priority <= keep) shown << part.text;
        summary = shown.join(QStringLiteral("   "));
        if (fm.horizontalAdvance(summary) <= inner.width()) break;
    }
    p.setPen(textColor());
    p.drawText(QRectF(inner.left(), inner.top() + titleHeight, inner.width(), fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(summary, Qt::ElideRight, inner.width()));

    drawLegend(p, QRectF(inner.left(), inner.top() + titleHeight + fm.height() + 2.0, inner.width(), fm.height() * 3.0),
               breakdownLegend(d));

    const BreakdownLayout l = breakdownLayout(d, rect, fm);
    double longest = d.stepSeconds;
    for (const auto& r : d.stages) longest = std::max(longest, r.totalSeconds);
    if (longest <= 0.0) longest = 1.0;
    const bool labels = l.rowHeight >= fm.height() * 0.9;
    const int labelEvery = labels ? 1 : std::max(1, static_cast<int>(std::ceil(fm.height() / std::max(1.0, l.rowHeight))));
    for (size_t i = 0; i < d.stages.size(); ++i) {
        const BreakdownRow& r = d.stages[i];
        const double y = l.bars.top() + l.rowHeight * static_cast<double>(i);
        const double barH = std::max(1.0, l.rowHeight * 0.72);
        const double by = y + (l.rowHeight - barH) / 2.0;
        if (static_cast<int>(i) == hoveredStage) p.fillRect(QRectF(inner.left(), y, inner.width(), l.rowHeight), QColor(0, 0, 0, 18));
        double x = l.bars.left();
        for (int k = 0; k < kBreakdownPartCount; ++k) {
            const double w = r.seconds[static_cast<size_t>(k)] / longest * l.bars.width();
            if (w <= 0.0) continue;
            const QRectF seg(x, by, w, barH);
            p.fillRect(seg, breakdownPartColor(static_cast<BreakdownPart>(k)));
            // The share of the step inside the segment when it is wide enough to read.
            const QString share = percentText(r.totalSeconds > 0 ? r.seconds[static_cast<size_t>(k)] / r.totalSeconds : 0.0, 0);
            if (labels && w > fm.horizontalAdvance(share) + 6.0) {
                p.setPen(k == static_cast<int>(BreakdownPart::Bubble) ? textColor() : QColor(Qt::white));
                p.drawText(seg, Qt::AlignCenter, share);
            }
            x += w;
        }
        if (static_cast<int>(i) % labelEvery == 0) {
            QFont f = p.font();
            f.setBold(r.bottleneck);
            p.save();
            p.setFont(f);
            p.setPen(textColor());
            p.drawText(QRectF(inner.left(), y, l.labelWidth - 6.0, l.rowHeight), Qt::AlignRight | Qt::AlignVCenter,
                       QStringLiteral("stage %1%2").arg(r.stage).arg(r.bottleneck ? QStringLiteral("*") : QString()));
            p.restore();
            if (labels) {
                p.setPen(mutedTextColor());
                p.drawText(QRectF(x + 4.0, y, inner.right() - x - 4.0, l.rowHeight), Qt::AlignLeft | Qt::AlignVCenter,
                           secondsText(r.totalSeconds));
            }
        }
    }
    p.setPen(mutedTextColor());
    p.drawText(QRectF(inner.left(), l.bars.top() + l.rowHeight * static_cast<double>(d.stages.size()) + 2.0, inner.width(), fm.height()),
               Qt::AlignLeft | Qt::AlignTop,
               fm.elidedText(QStringLiteral("* bottleneck stage (most compute); TP..DP: exposed communication"),
                             Qt::ElideRight, inner.width()));
    p.restore();
}

namespace {
std::vector<LegendEntry> timelineLegend(bool measured) {
    std::vector<LegendEntry> e{
        {computeColor(sim::ActionKind::Forward, 0), QStringLiteral("forward")},
        {computeColor(sim::ActionKind::Backward, 0), QStringLiteral("backward")},
        {computeColor(sim::ActionKind::BackwardWeight, 0), QStringLiteral("weight grad"), Qt::BDiagPattern},
        {computeColor(sim::ActionKind::OptimizerStep, 0), QStringLiteral("optimizer")},
        {bubbleColor().darker(115), QStringLiteral("idle (bubble)"), Qt::NoBrush},
        {communicationColor(sim::ActionKind::SendActivation), QStringLiteral("pp send")},
        {communicationColor(sim::ActionKind::RecvActivation), QStringLiteral("pp recv")},
        {communicationColor(sim::ActionKind::Collective), QStringLiteral("dp collective")},
    };
    if (measured) e.push_back({measuredColor(), QStringLiteral("measured (lowest lane)"), Qt::NoBrush});
    e.push_back({QColor(), QStringLiteral("(hue = micro-batch)"), Qt::NoBrush, LegendEntry::Shape::Text});
    return e;
}
} // namespace

double timelineLegendHeight(const QFontMetricsF& fm, double width, bool measured) {
    return legendHeight(fm, width - 4.0, timelineLegend(measured)) + 6.0;
}

void paintTimelineLegend(QPainter& p, const QRectF& rect, bool measured) {
    p.save();
    p.fillRect(rect, Qt::white);
    drawLegend(p, rect.adjusted(4.0, 3.0, 0, 0), timelineLegend(measured));
    p.restore();
}

void paintTimeline(QPainter& p, const TimelineGeometry& g, int hovered) {
    p.save();
    const QRectF all(0, 0, g.widthPx(), g.heightPx());
    p.fillRect(all, Qt::white);
    const QFontMetricsF fm(p.font());
    if (g.isEmpty()) {
        drawMessage(p, all, QStringLiteral("no timeline"));
        p.restore();
        return;
    }
    const QRectF plot = g.plotRect();
    const double t0 = g.viewStartSeconds();
    const double t1 = g.viewEndSeconds();

    // Rows: alternate backgrounds, labels, idle shading, blocks. Clipped below the axis.
    p.save();
    p.setClipRect(QRectF(0, plot.top(), all.width(), plot.height()));
    for (int s = 0; s < g.stageCount(); ++s) {
        const double top = g.rowTop(s);
        if (top > all.bottom() || top + g.rowHeight() < plot.top()) continue;
        if (s % 2 == 1) p.fillRect(QRectF(0, top, all.width(), g.rowHeight() - TimelineGeometry::kRowGap / 2.0), QColor(0xf6, 0xf7, 0xf9));
        const QRectF compute = g.laneRect(s, TimelineLane::Compute);
        p.setPen(textColor());
        // Centred on the compute lane, never clipped by it (the lane can be thinner than a line of text).
        const double labelTop = std::max(top, compute.center().y() - fm.height() / 2.0);
        p.drawText(QRectF(4.0, labelTop, TimelineGeometry::kLabelWidth - 8.0, fm.height()),
                   Qt::AlignLeft | Qt::AlignVCenter | Qt::TextDontClip, QStringLiteral("stage %1").arg(s));
        // The lane's own label only where the row has room for two lines; the legend names it otherwise.
        if (g.hasLane(TimelineLane::Measured) && g.rowHeight() >= fm.height() * 2.4) {
            const QRectF m = g.laneRect(s, TimelineLane::Measured);
            QFont small = p.font();
            small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.75));
            p.save();
            p.setFont(small);
            p.setPen(mutedTextColor());
            p.drawText(QRectF(4.0, m.top() - 2.0, TimelineGeometry::kLabelWidth - 8.0, m.height() + 4.0), Qt::AlignLeft | Qt::AlignVCenter,
                       QStringLiteral("measured"));
            p.restore();
        }
        // Idle compute: grey with a light hatch, behind everything.
        for (const TimeGap& gap : g.idleGaps(s)) {
            if (gap.endSeconds < t0 || gap.startSeconds > t1) continue;
            const double x0 = std::max(plot.left(), g.xForTime(gap.startSeconds));
            const double x1 = std::min(plot.right(), g.xForTime(gap.endSeconds));
            if (x1 - x0 < 0.5) continue;
            const QRectF r(x0, compute.top(), x1 - x0, compute.height());
            p.fillRect(r, bubbleColor());
            p.fillRect(r, QBrush(QColor(0xbb, 0xbb, 0xbb), Qt::BDiagPattern));
        }
        for (TimelineLane lane : g.lanes()) {
            const auto& ids = g.laneItems(s, lane);
            const auto [first, last] = g.visibleRange(s, lane, t0, t1);
            // Blocks thinner than a pixel are merged into runs so a zoomed-out step stays fast and solid.
            double runStart = -1.0, runEnd = -1.0;
            QColor runColor;
            const QRectF laneR = g.laneRect(s, lane);
            auto flush = [&]() {
                if (runEnd > runStart) p.fillRect(QRectF(runStart, laneR.top(), std::max(1.0, runEnd - runStart), laneR.height()), runColor);
                runStart = runEnd = -1.0;
            };
            for (size_t k = first; k < last; ++k) {
                const TimelineItem& it = g.items()[static_cast<size_t>(ids[k])];
                QRectF r = g.itemRect(it);
                r.setLeft(std::max(r.left(), plot.left() - 2.0));
                r.setRight(std::min(r.right(), plot.right() + 2.0));
                const bool computeLane = lane == TimelineLane::Compute || lane == TimelineLane::Measured;
                QColor fill = computeLane ? computeColor(it.kind, it.microBatch) : communicationColor(it.kind);
                if (lane == TimelineLane::Measured) fill = fill.darker(115);
                if (r.width() < 1.5) {
                    if (runEnd >= 0.0 && (r.left() - runEnd > 1.0 || fill != runColor)) flush();
                    if (runStart < 0.0) runStart = r.left(), runColor = fill;
                    runEnd = std::max(runEnd, r.right());
                    continue;
                }
                flush();
                p.fillRect(r, fill);
                if (computeLane && computePattern(it.kind) != Qt::NoBrush)
                    p.fillRect(r, QBrush(QColor(255, 255, 255, 170), computePattern(it.kind)));
                if (r.width() > 4.0 && computeLane) {
                    p.setPen(QPen(fill.darker(150), 1.0));
                    p.drawRect(r.adjusted(0, 0, -1, -1));
                }
                // The micro-batch number where it fits.
                if (lane == TimelineLane::Compute && it.microBatch >= 0 && r.height() >= fm.height() * 0.8) {
                    const QString label = QString::number(it.microBatch);
                    if (r.width() > fm.horizontalAdvance(label) + 4.0) {
                        p.setPen(it.kind == sim::ActionKind::Forward || it.kind == sim::ActionKind::BackwardWeight ? textColor()
                                                                                                                   : QColor(Qt::white));
                        p.drawText(r, Qt::AlignCenter, label);
                    }
                }
            }
            flush();
        }
    }
    if (hovered >= 0 && hovered < static_cast<int>(g.items().size())) {
        const QRectF r = g.itemRect(g.items()[static_cast<size_t>(hovered)]);
        p.setPen(QPen(Qt::black, 2.0));
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(-1, -1, 1, 1));
    }
    p.restore();

    // Time axis on top.
    p.fillRect(QRectF(0, 0, all.width(), TimelineGeometry::kAxisHeight), Qt::white);
    double step = 0.0;
    const int target = std::max(2, static_cast<int>(plot.width() / 110.0));
    for (double t : g.timeTicks(target, &step)) {
        const double x = g.xForTime(t);
        p.setPen(QPen(gridColor(), 1.0));
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.top() + std::min(plot.height(), g.contentHeight())));
        p.setPen(QPen(mutedTextColor(), 1.0));
        p.drawLine(QPointF(x, TimelineGeometry::kAxisHeight - 5.0), QPointF(x, TimelineGeometry::kAxisHeight));
        const QString label = secondsText(t);
        const double w = fm.horizontalAdvance(label) + 4.0;
        // Centred on its tick, but kept inside the plot so the first and last labels are whole.
        const double left = std::clamp(x - w / 2.0, plot.left(), std::max(plot.left(), plot.right() - w));
        p.drawText(QRectF(left, 2.0, w, TimelineGeometry::kAxisHeight - 6.0), Qt::AlignCenter, label);
    }
    p.setPen(QPen(QColor(0x99, 0x99, 0x99), 1.0));
    p.drawLine(QPointF(plot.left(), TimelineGeometry::kAxisHeight), QPointF(plot.right(), TimelineGeometry::kAxisHeight));
    p.fillRect(QRectF(0, 0, TimelineGeometry::kLabelWidth - 2.0, TimelineGeometry::kAxisHeight), Qt::white);
    p.setPen(mutedTextColor());
    p.drawText(QRectF(4.0, 2.0, TimelineGeometry::kLabelWidth - 8.0, TimelineGeometry::kAxisHeight - 6.0), Qt::AlignLeft | Qt::AlignVCenter,
               QStringLiteral("time"));
    p.restore();
}

} // namespace tessel::gui
