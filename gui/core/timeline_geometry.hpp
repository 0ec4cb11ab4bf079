// The pipeline timeline's geometry, kept apart from painting (as hotspot does) so it is tested without a
// window: the items laid out per stage and stream lane, time <-> pixel under zoom and pan, the idle gaps on
// each compute lane, and hit-testing for hover.
#pragma once

#include "tessel/sim/simulate.hpp"

#include <QPointF>
#include <QRectF>

#include <vector>

namespace tessel::gui {

// Lanes of one stage's row, top to bottom. Compute is tall; the streams that may overlap it are thin lanes
// under it; Measured (only with a measured run) shows the run's compute actions at their measured times.
enum class TimelineLane { Compute = 0, PipelineSend, PipelineRecv, DataParallel, Measured };
constexpr int kTimelineLaneCount = 5;
const char* laneName(TimelineLane lane);

struct TimelineItem {
    int stage = 0;
    int index = -1;                 // the action's index in schedule.stages[stage].actions (-1: unmatched)
    sim::ActionKind kind = sim::ActionKind::Forward;
    int microBatch = -1;
    int chunk = 0;
    TimelineLane lane = TimelineLane::Compute;
    double startSeconds = 0.0;
    double endSeconds = 0.0;
};

struct TimeGap {
    double startSeconds = 0.0;
    double endSeconds = 0.0;
};

class TimelineGeometry {
public:
    static constexpr double kLabelWidth = 70.0;   // stage labels left of the plot
    static constexpr double kAxisHeight = 22.0;   // time axis above the rows
    static constexpr double kMinRowHeight = 26.0; // below this the rows scroll vertically
    static constexpr double kMaxRowHeight = 72.0;
    static constexpr double kRowGap = 5.0;
    static constexpr double kHitTolerancePx = 3.0;

    // Lays out every action of the simulation; the view shows the whole step.
    void setSimulation(const sim::PlanSimulation& sim);
    // Measured compute actions (TimelineLane::Measured, index = the matched predicted action or -1).
    void setMeasured(std::vector<TimelineItem> measured);
    void clear();
    bool isEmpty() const { return items_.empty(); }

    void setViewport(double widthPx, double heightPx);
    double widthPx() const { return width_; }
    double heightPx() const { return height_; }

    // The whole step: [0, stepSeconds] (or the last end, whichever is later).
    double totalSeconds() const { return total_; }
    double viewStartSeconds() const { return viewStart_; }
    double viewEndSeconds() const { return viewEnd_; }
    void setView(double startSeconds, double endSeconds);   // clamped to the step, at least kMinSpan wide
    void fitAll();
    // Zooms by `factor` (> 1 in, < 1 out) keeping the time under pixel x where it is.
    void zoomAt(double x, double factor);
    // Moves the view by dx pixels (positive: content moves right, earlier times come into view) and the
    // rows by dy pixels when they do not all fit.
    void panByPixels(double dx, double dy = 0.0);

    QRectF plotRect() const;        // right of the labels, below the axis
    double xForTime(double seconds) const;
    double timeForX(double x) const;

    int stageCount() const { return stages_; }
    const std::vector<TimelineLane>& lanes() const { return lanes_; }   // lanes present, in order
    bool hasLane(TimelineLane lane) const;
    double rowHeight() const;
    double rowTop(int stage) const;                                     // after vertical scrolling
    double contentHeight() const;                                       // all rows
    double scrollY() const { return scrollY_; }
    QRectF laneRect(int stage, TimelineLane lane) const;                // across the plot's width
    QRectF itemRect(const TimelineItem& item) const;

    const std::vector<TimelineItem>& items() const { return items_; }
    // Indices into items() of one lane of one stage, sorted by start (actions of one stream never overlap).
    const std::vector<int>& laneItems(int stage, TimelineLane lane) const;
    // [first, last) positions in laneItems(stage, lane) that intersect [t0, t1].
    std::pair<size_t, size_t> visibleRange(int stage, TimelineLane lane, double t0, double t1) const;
    // Idle time on a stage's compute lane within [0, totalSeconds()]: the bubbles (and waits) shaded grey.
    const std::vector<TimeGap>& idleGaps(int stage) const;
    // The item under a point (index into items()), or -1: the lane from y, then the action whose span covers
    // x, within kHitTolerancePx for blocks too thin to aim at.
    int hitTest(const QPointF& point) const;

    // Time-axis ticks in the view at 1/2/5 x 10^k seconds, about `target` of them.
    std::vector<double> timeTicks(int target, double* stepSeconds = nullptr) const;

private:
    size_t laneSlot(int stage, TimelineLane lane) const { return static_cast<size_t>(stage) * kTimelineLaneCount + static_cast<size_t>(lane); }
    void rebuildLanes();
    double laneOffset(TimelineLane lane) const;   // y within the row
    double laneHeight(TimelineLane lane) const;
    void clampScroll();

    std::vector<TimelineItem> items_;
    std::vector<std::vector<int>> byLane_;        // stage x lane -> sorted item indices
    std::vector<std::vector<TimeGap>> idle_;
    std::vector<TimelineLane> lanes_;
    int stages_ = 0;
    double total_ = 0.0;
    double viewStart_ = 0.0, viewEnd_ = 1.0;
    double width_ = 800.0, height_ = 400.0;
    double scrollY_ = 0.0;
};

} // namespace tessel::gui
