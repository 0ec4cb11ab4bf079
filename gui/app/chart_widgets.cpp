// The chart widgets: paint with the shared painters, forward hover, zoom and pan to the geometry.
#include "app/chart_widgets.hpp"

#include "core/chart_painters.hpp"
#include "core/format.hpp"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>

namespace tessel::gui {

// --- shared by the stage charts ---------------------------------------------------------------------------

HoverChartWidget::HoverChartWidget(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
}

int HoverChartWidget::setHovered(int stage) {
    if (stage != hovered_) {
        hovered_ = stage;
        update();
    }
    if (stage < 0) QToolTip::hideText();
    return stage;
}

void HoverChartWidget::leaveEvent(QEvent*) { setHovered(-1); }

// --- memory ---------------------------------------------------------------------------------------------

MemoryChartWidget::MemoryChartWidget(QWidget* parent) : HoverChartWidget(parent) {
    data_ = MemoryChartData::empty(QStringLiteral("select a plan"));
}

void MemoryChartWidget::setData(MemoryChartData data) {
    data_ = std::move(data);
    hovered_ = -1;
    update();
}

void MemoryChartWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paintMemoryChart(p, QRectF(rect()), data_, hovered_);
}

void MemoryChartWidget::mouseMoveEvent(QMouseEvent* e) {
    const auto layout = memoryChartLayout(data_, QRectF(rect()), QFontMetricsF(font()));
    const int stage = setHovered(data_.stageAt(layout, e->position()));
    if (stage < 0) return;
    const MemoryStageBar& b = data_.stages[static_cast<size_t>(stage)];
    QString tip = QStringLiteral("<b>stage %1</b>: %2 GiB of %3 GiB - %4<table>")
                      .arg(b.stage)
                      .arg(b.totalGib, 0, 'f', 2)
                      .arg(data_.capacityGib, 0, 'f', 1)
                      .arg(b.fits ? QStringLiteral("fits, %1 GiB free").arg(b.headroomGib, 0, 'f', 2)
                                  : QStringLiteral("<span style='color:#d62728'><b>OOM</b> by %1 GiB</span>").arg(-b.headroomGib, 0, 'f', 2));
    for (int c = kMemoryComponentCount - 1; c >= 0; --c)
        tip += QStringLiteral("<tr><td>%1</td><td align=right>%2 GiB</td></tr>")
                   .arg(memoryComponentName(static_cast<MemoryComponent>(c)))
                   .arg(b.gib[static_cast<size_t>(c)], 0, 'f', 2);
    tip += QStringLiteral("</table>");
    if (b.measuredGib)
        tip += QStringLiteral("measured peak %1 GiB (%2)")
                   .arg(*b.measuredGib, 0, 'f', 2)
                   .arg(signedPercentText(b.totalGib > 0 ? *b.measuredGib / b.totalGib - 1.0 : 0.0));
    QToolTip::showText(e->globalPosition().toPoint(), tip, this);
}

// --- breakdown ------------------------------------------------------------------------------------------

BreakdownWidget::BreakdownWidget(QWidget* parent) : HoverChartWidget(parent) {
    data_ = BreakdownData::empty(QStringLiteral("select a plan"));
}

void BreakdownWidget::setData(BreakdownData data) {
    data_ = std::move(data);
    hovered_ = -1;
    update();
}

void BreakdownWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paintBreakdown(p, QRectF(rect()), data_, hovered_);
}

void BreakdownWidget::mouseMoveEvent(QMouseEvent* e) {
    const auto rows = breakdownRowRects(data_, QRectF(rect()), QFontMetricsF(font()));
    int stage = -1;
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].contains(e->position())) stage = static_cast<int>(i);
    if (setHovered(stage) < 0) return;
    const BreakdownRow& r = data_.stages[static_cast<size_t>(stage)];
    QString tip = QStringLiteral("<b>stage %1</b>%2: %3<table>")
                      .arg(r.stage)
                      .arg(r.bottleneck ? QStringLiteral(" (bottleneck)") : QString())
                      .arg(secondsText(r.totalSeconds));
    for (int k = 0; k < kBreakdownPartCount; ++k) {
        const double s = r.seconds[static_cast<size_t>(k)];
        tip += QStringLiteral("<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td></tr>")
                   .arg(breakdownPartName(static_cast<BreakdownPart>(k)), secondsText(s),
                        percentText(r.totalSeconds > 0 ? s / r.totalSeconds : 0.0));
    }
    tip += QStringLiteral("</table>");
    QToolTip::showText(e->globalPosition().toPoint(), tip, this);
}

// --- timeline -------------------------------------------------------------------------------------------

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setToolTip(QString());
}

double TimelineWidget::legendHeight() const {
    return timelineLegendHeight(QFontMetricsF(font()), width(), geometry_.hasLane(TimelineLane::Measured));
}

QPointF TimelineWidget::toGeometry(const QPointF& p) const { return {p.x(), p.y() - legendHeight()}; }

void TimelineWidget::setSimulation(const sim::PlanSimulation* sim) {
    hovered_ = -1;
    if (sim) {
        sim_ = *sim;
        geometry_.setSimulation(*sim_);
    } else {
        sim_.reset();
        geometry_.clear();
    }
    geometry_.setViewport(width(), height() - legendHeight());
    update();
}

void TimelineWidget::setMeasured(std::vector<TimelineItem> measured) {
    geometry_.setMeasured(std::move(measured));
    geometry_.setViewport(width(), height() - legendHeight());   // the legend may have grown a line
    update();
}

void TimelineWidget::fitAll() {
    geometry_.fitAll();
    update();
}

void TimelineWidget::zoomIn() {
    geometry_.zoomAt(geometry_.plotRect().center().x(), 2.0);
    update();
}

void TimelineWidget::zoomOut() {
    geometry_.zoomAt(geometry_.plotRect().center().x(), 0.5);
    update();
}

void TimelineWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const double lh = legendHeight();
    paintTimelineLegend(p, QRectF(0, 0, width(), lh), geometry_.hasLane(TimelineLane::Measured));
    p.translate(0, lh);
    p.setClipRect(QRectF(0, 0, width(), height() - lh));
    paintTimeline(p, geometry_, hovered_);
}

void TimelineWidget::resizeEvent(QResizeEvent*) { geometry_.setViewport(width(), height() - legendHeight()); }

void TimelineWidget::wheelEvent(QWheelEvent* e) {
    const double notches = e->angleDelta().y() / 120.0;
    if (e->modifiers() & Qt::ShiftModifier) {
        geometry_.panByPixels(notches * 60.0, 0.0);   // shift + wheel pans, as in most timeline viewers
    } else {
        geometry_.zoomAt(toGeometry(e->position()).x(), std::pow(1.25, notches));
    }
    update();
    e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
    if (e->button() == Qt::LeftButton) {
        dragging_ = true;
        lastDrag_ = e->position();
        setCursor(Qt::ClosedHandCursor);
    }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
    if (dragging_) {
        const QPointF d = e->position() - lastDrag_;
        lastDrag_ = e->position();
        geometry_.panByPixels(d.x(), d.y());
        update();
        return;
    }
    const int hit = geometry_.hitTest(toGeometry(e->position()));
    if (hit != hovered_) {
        hovered_ = hit;
        update();
    }
    if (hit < 0) QToolTip::hideText();
    else QToolTip::showText(e->globalPosition().toPoint(), tooltipFor(hit), this);
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent*) {
    dragging_ = false;
    unsetCursor();
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent*) { fitAll(); }

void TimelineWidget::leaveEvent(QEvent*) {
    hovered_ = -1;
    update();
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
    switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoomIn(); break;
    case Qt::Key_Minus: zoomOut(); break;
    case Qt::Key_0: fitAll(); break;
    case Qt::Key_Left: geometry_.panByPixels(80.0); update(); break;
    case Qt::Key_Right: geometry_.panByPixels(-80.0); update(); break;
    default: QWidget::keyPressEvent(e);
    }
}

QString TimelineWidget::tooltipFor(int item) const {
    if (!sim_ || item < 0 || item >= static_cast<int>(geometry_.items().size())) return {};
    const TimelineItem& it = geometry_.items()[static_cast<size_t>(item)];
    QString tip;
    if (it.lane == TimelineLane::Measured) {
        tip = QStringLiteral("<b>measured %1</b> stage %2").arg(QString::fromStdString(sim::toString(it.kind))).arg(it.stage);
        if (it.microBatch >= 0) tip += QStringLiteral(", micro-batch %1").arg(it.microBatch);
        if (it.chunk > 0) tip += QStringLiteral(", chunk %1").arg(it.chunk);
        const double measured = it.endSeconds - it.startSeconds;
        tip += QStringLiteral("<br>%1 at %2").arg(secondsText(measured), secondsText(it.startSeconds));
        if (it.index >= 0) {
            const auto& t = sim_->timeline.perAction[static_cast<size_t>(it.stage)][static_cast<size_t>(it.index)];
            const double predicted = t.endSeconds - t.startSeconds;
            tip += QStringLiteral("<br>predicted %1 (error %2)")
                       .arg(secondsText(predicted), signedPercentText(predicted > 0 ? measured / predicted - 1.0 : 0.0));
        }
        return tip;
    }
    const sim::Action& a = sim_->schedule.stages[static_cast<size_t>(it.stage)].actions[static_cast<size_t>(it.index)];
    const sim::ActionCost& c = sim_->costs.perAction[static_cast<size_t>(it.stage)][static_cast<size_t>(it.index)];
    tip = QStringLiteral("<b>%1</b> - stage %2").arg(QString::fromStdString(a.traceName())).arg(it.stage);
    if (a.microBatch >= 0) tip += QStringLiteral(", micro-batch %1").arg(a.microBatch);
    if (sim_->schedule.plan.vpp > 1) tip += QStringLiteral(", chunk %1").arg(a.chunk);
    tip += QStringLiteral("<br>%1 - %2 (%3)")
               .arg(secondsText(it.startSeconds), secondsText(it.endSeconds), secondsText(it.endSeconds - it.startSeconds));
    if (sim::isCompute(a.kind)) {
        tip += QStringLiteral("<br>math %1").arg(secondsText(c.computeSeconds));
        if (c.tpSeconds > 0) tip += QStringLiteral(", TP %1").arg(secondsText(c.tpSeconds));
        if (c.cpSeconds > 0) tip += QStringLiteral(", CP %1").arg(secondsText(c.cpSeconds));
        if (c.epSeconds > 0) tip += QStringLiteral(", EP %1").arg(secondsText(c.epSeconds));
        if (c.flops > 0) tip += QStringLiteral("<br>%1 TFLOP").arg(c.flops / 1e12, 0, 'f', 2);
    } else if (a.kind == sim::ActionKind::Collective) {
        tip += QStringLiteral("<br>%1 over %2, %3 MiB")
                   .arg(QString::fromStdString(toString(a.primitive)), QString::fromStdString(toString(a.group)))
                   .arg(a.bytes / (1024.0 * 1024.0), 0, 'f', 1);
        if (a.bucket >= 0) tip += QStringLiteral(", bucket %1").arg(a.bucket);
    } else {
        tip += QStringLiteral("<br>peer stage %1").arg(a.peerStage);
    }
    return tip;
}

} // namespace tessel::gui
