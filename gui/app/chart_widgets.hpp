// The three chart widgets: they hold chart data, paint it with the shared painters and forward the mouse
// (hover tooltips; the timeline also zooms with the wheel and pans by dragging).
#pragma once

#include "core/breakdown_data.hpp"
#include "core/memory_chart_data.hpp"
#include "core/timeline_geometry.hpp"

#include "tessel/sim/simulate.hpp"

#include <QWidget>

#include <optional>

namespace tessel::gui {

// What the stage charts share: mouse tracking, an opaque paint, and the index of the hovered stage (-1: none).
class HoverChartWidget : public QWidget {
public:
    explicit HoverChartWidget(QWidget* parent);

protected:
    // Records the hovered stage and repaints when it changed; returns the stage.
    int setHovered(int stage);
    void leaveEvent(QEvent*) override;
    int hovered_ = -1;
};

class MemoryChartWidget : public HoverChartWidget {
    Q_OBJECT
public:
    explicit MemoryChartWidget(QWidget* parent = nullptr);
    void setData(MemoryChartData data);
    const MemoryChartData& data() const { return data_; }
    QSize sizeHint() const override { return {420, 260}; }
    QSize minimumSizeHint() const override { return {260, 180}; }

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent* e) override;

private:
    MemoryChartData data_;
};

class BreakdownWidget : public HoverChartWidget {
    Q_OBJECT
public:
    explicit BreakdownWidget(QWidget* parent = nullptr);
    void setData(BreakdownData data);
    const BreakdownData& data() const { return data_; }
    QSize sizeHint() const override { return {520, 260}; }
    QSize minimumSizeHint() const override { return {300, 180}; }

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent* e) override;

private:
    BreakdownData data_;
};

class TimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);
    // Shows a simulation (the view resets to the whole step); nullptr clears it.
    void setSimulation(const sim::PlanSimulation* sim);
    void setMeasured(std::vector<TimelineItem> measured);
    const TimelineGeometry& geometry() const { return geometry_; }
    QSize sizeHint() const override { return {900, 300}; }
    QSize minimumSizeHint() const override { return {300, 140}; }

public slots:
    void fitAll();
    void zoomIn();
    void zoomOut();

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void wheelEvent(QWheelEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mouseReleaseEvent(QMouseEvent* e) override;
    void mouseDoubleClickEvent(QMouseEvent* e) override;
    void leaveEvent(QEvent*) override;
    void keyPressEvent(QKeyEvent* e) override;

private:
    double legendHeight() const;
    QPointF toGeometry(const QPointF& widgetPoint) const;
    QString tooltipFor(int item) const;

    TimelineGeometry geometry_;
    std::optional<sim::PlanSimulation> sim_;   // a copy: the tooltip reads action details from it
    int hovered_ = -1;
    bool dragging_ = false;
    QPointF lastDrag_;
};

} // namespace tessel::gui
