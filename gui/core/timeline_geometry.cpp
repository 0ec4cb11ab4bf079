// The pipeline timeline's geometry: layout, time <-> pixel, idle gaps and hit-testing.
#include "core/timeline_geometry.hpp"

#include "core/memory_chart_data.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::gui {

const char* laneName(TimelineLane lane) {
    switch (lane) {
    case TimelineLane::Compute: return "compute";
    case TimelineLane::PipelineSend: return "pp send";
    case TimelineLane::PipelineRecv: return "pp recv";
    case TimelineLane::DataParallel: return "dp";
    case TimelineLane::Measured: return "measured";
    }
    return "?";
}

namespace {
TimelineLane laneOf(sim::Stream s) {
    switch (s) {
    case sim::Stream::Compute: return TimelineLane::Compute;
    case sim::Stream::PipelineSend: return TimelineLane::PipelineSend;
    case sim::Stream::PipelineRecv: return TimelineLane::PipelineRecv;
    case sim::Stream::DataParallel: return TimelineLane::DataParallel;
    }
    return TimelineLane::Compute;
}
} // namespace

void TimelineGeometry::clear() {
    items_.clear();
    byLane_.clear();
    idle_.clear();
    lanes_.clear();
    stages_ = 0;
    total_ = 0.0;
    viewStart_ = 0.0;
    viewEnd_ = 1.0;
    scrollY_ = 0.0;
}

void TimelineGeometry::setSimulation(const sim::PlanSimulation& s) {
    clear();
    stages_ = static_cast<int>(s.schedule.stages.size());
    total_ = s.timeline.stepSeconds;
    for (int st = 0; st < stages_; ++st) {
        const auto& actions = s.schedule.stages[static_cast<size_t>(st)].actions;
        const auto& timed = s.timeline.perAction[static_cast<size_t>(st)];
        for (size_t i = 0; i < actions.size() && i < timed.size(); ++i) {
            const sim::Action& a = actions[i];
            TimelineItem it;
            it.stage = st;
            it.index = static_cast<int>(i);
            it.kind = a.kind;
            it.microBatch = a.microBatch;
            it.chunk = a.chunk;
            it.lane = laneOf(sim::streamOf(a.kind));
            it.startSeconds = timed[i].startSeconds;
            it.endSeconds = timed[i].endSeconds;
            total_ = std::max(total_, it.endSeconds);
            items_.push_back(it);
        }
    }
    rebuildLanes();
    // Idle gaps of each compute lane: the complement of its (sequential) actions within the step.
    idle_.assign(static_cast<size_t>(stages_), {});
    for (int st = 0; st < stages_; ++st) {
        double cursor = 0.0;
        for (int idx : laneItems(st, TimelineLane::Compute)) {
            const TimelineItem& it = items_[static_cast<size_t>(idx)];
            if (it.startSeconds > cursor) idle_[static_cast<size_t>(st)].push_back({cursor, it.startSeconds});
            cursor = std::max(cursor, it.endSeconds);
        }
        if (total_ > cursor) idle_[static_cast<size_t>(st)].push_back({cursor, total_});
    }
    fitAll();
}

void TimelineGeometry::setMeasured(std::vector<TimelineItem> measured) {
    items_.erase(std::remove_if(items_.begin(), items_.end(),
                                [](const TimelineItem& it) { return it.lane == TimelineLane::Measured; }),
                 items_.end());
    for (TimelineItem& it : measured) {
        if (it.stage < 0 || it.stage >= stages_) continue;
        it.lane = TimelineLane::Measured;
        // The view may need to grow to show a measured step longer than the predicted one.
        if (it.endSeconds > total_) {
            const bool showingAll = viewStart_ <= 0.0 && viewEnd_ >= total_;
            total_ = it.endSeconds;
            if (showingAll) viewEnd_ = total_;
        }
        items_.push_back(it);
    }
    rebuildLanes();
}

void TimelineGeometry::rebuildLanes() {
    byLane_.assign(static_cast<size_t>(stages_) * kTimelineLaneCount, {});
    for (size_t i = 0; i < items_.size(); ++i)
        byLane_[laneSlot(items_[i].stage, items_[i].lane)].push_back(static_cast<int>(i));
    bool present[kTimelineLaneCount] = {true, false, false, false, false};
    for (auto& v : byLane_)
        std::stable_sort(v.begin(), v.end(), [this](int a, int b) {
            return items_[static_cast<size_t>(a)].startSeconds < items_[static_cast<size_t>(b)].startSeconds;
        });
    for (const TimelineItem& it : items_) present[static_cast<int>(it.lane)] = true;
    lanes_.clear();
    for (int l = 0; l < kTimelineLaneCount; ++l)
        if (present[l]) lanes_.push_back(static_cast<TimelineLane>(l));
    clampScroll();
}

void TimelineGeometry::setViewport(double widthPx, double heightPx) {
    width_ = std::max(widthPx, kLabelWidth + 10.0);
    height_ = std::max(heightPx, kAxisHeight + 10.0);
    clampScroll();
}

void TimelineGeometry::setView(double startSeconds, double endSeconds) {
    const double total = total_ > 0.0 ? total_ : 1.0;
    // Zooming further than a microsecond-in-a-step (1e-6 of the step) shows nothing new.
    const double minSpan = std::max(total * 1e-6, 1e-12);
    double span = std::clamp(endSeconds - startSeconds, minSpan, total);
    double start = std::clamp(startSeconds, 0.0, total - span);
    viewStart_ = start;
    viewEnd_ = start + span;
}

void TimelineGeometry::fitAll() {
    setView(0.0, total_ > 0.0 ? total_ : 1.0);
    scrollY_ = 0.0;
}

void TimelineGeometry::zoomAt(double x, double factor) {
    if (!(factor > 0.0)) return;
    const double anchor = timeForX(x);
    const double span = (viewEnd_ - viewStart_) / factor;
    const double left = (x - plotRect().left()) / std::max(1.0, plotRect().width());
    setView(anchor - left * span, anchor - left * span + span);
}

void TimelineGeometry::panByPixels(double dx, double dy) {
    const double secondsPerPixel = (viewEnd_ - viewStart_) / std::max(1.0, plotRect().width());
    const double span = viewEnd_ - viewStart_;
    setView(viewStart_ - dx * secondsPerPixel, viewStart_ - dx * secondsPerPixel + span);
    scrollY_ -= dy;
    clampScroll();
}

void TimelineGeometry::clampScroll() {
    const double visible = height_ - kAxisHeight;
    scrollY_ = std::clamp(scrollY_, 0.0, std::max(0.0, contentHeight() - visible));
}

QRectF TimelineGeometry::plotRect() const {
    return QRectF(kLabelWidth, kAxisHeight, std::max(1.0, width_ - kLabelWidth - 6.0), std::max(1.0, height_ - kAxisHeight));
}

double TimelineGeometry::xForTime(double seconds) const {
    const QRectF p = plotRect();
    return p.left() + (seconds - viewStart_) / (viewEnd_ - viewStart_) * p.width();
}

double TimelineGeometry::timeForX(double x) const {
    const QRectF p = plotRect();
    return viewStart_ + (x - p.left()) / p.width() * (viewEnd_ - viewStart_);
}

bool TimelineGeometry::hasLane(TimelineLane lane) const { return std::find(lanes_.begin(), lanes_.end(), lane) != lanes_.end(); }

double TimelineGeometry::rowHeight() const {
    if (stages_ <= 0) return kMinRowHeight;
    return std::clamp((height_ - kAxisHeight) / stages_, kMinRowHeight, kMaxRowHeight);
}

double TimelineGeometry::contentHeight() const { return rowHeight() * stages_; }

double TimelineGeometry::rowTop(int stage) const { return kAxisHeight + rowHeight() * stage - scrollY_; }

double TimelineGeometry::laneHeight(TimelineLane lane) const {
    const double usable = rowHeight() - kRowGap;
    const int thin = static_cast<int>(lanes_.size()) - 1;
    // Thin lanes get 15% of the row each (4-10 px); the compute lane keeps the rest.
    const double thinHeight = std::clamp(usable * 0.15, 4.0, 10.0);
    return lane == TimelineLane::Compute ? usable - thin * thinHeight : thinHeight;
}

double TimelineGeometry::laneOffset(TimelineLane lane) const {
    double y = 0.0;
    for (TimelineLane l : lanes_) {
        if (l == lane) return y;
        y += laneHeight(l);
    }
    return -1.0;
}

QRectF TimelineGeometry::laneRect(int stage, TimelineLane lane) const {
    const double off = laneOffset(lane);
    if (off < 0.0 || stage < 0 || stage >= stages_) return {};
    const QRectF p = plotRect();
    return QRectF(p.left(), rowTop(stage) + off, p.width(), laneHeight(lane));
}

QRectF TimelineGeometry::itemRect(const TimelineItem& item) const {
    const QRectF lane = laneRect(item.stage, item.lane);
    if (lane.isNull()) return {};
    const double x0 = xForTime(item.startSeconds);
    const double x1 = xForTime(item.endSeconds);
    return QRectF(x0, lane.top(), std::max(0.0, x1 - x0), lane.height());
}

const std::vector<int>& TimelineGeometry::laneItems(int stage, TimelineLane lane) const {
    static const std::vector<int> none;
    if (stage < 0 || stage >= stages_) return none;
    return byLane_[laneSlot(stage, lane)];
}

std::pair<size_t, size_t> TimelineGeometry::visibleRange(int stage, TimelineLane lane, double t0, double t1) const {
    const auto& v = laneItems(stage, lane);
    // Items of one lane are sequential, so their ends are sorted too: binary search both bounds.
    auto first = std::lower_bound(v.begin(), v.end(), t0,
                                  [this](int i, double t) { return items_[static_cast<size_t>(i)].endSeconds < t; });
    auto last = std::upper_bound(first, v.end(), t1,
                                 [this](double t, int i) { return t < items_[static_cast<size_t>(i)].startSeconds; });
    return {static_cast<size_t>(first - v.begin()), static_cast<size_t>(last - v.begin())};
}

const std::vector<TimeGap>& TimelineGeometry::idleGaps(int stage) const {
    static const std::vector<TimeGap> none;
    if (stage < 0 || stage >= static_cast<int>(idle_.size())) return none;
    return idle_[static_cast<size_t>(stage)];
}

int TimelineGeometry::hitTest(const QPointF& point) const {
    const QRectF p = plotRect();
    if (stages_ <= 0 || point.x() < p.left() || point.x() > p.right() || point.y() < p.top()) return -1;
    const int stage = static_cast<int>(std::floor((point.y() - kAxisHeight + scrollY_) / rowHeight()));
    if (stage < 0 || stage >= stages_) return -1;
    for (TimelineLane lane : lanes_) {
        const QRectF r = laneRect(stage, lane);
        if (point.y() < r.top() || point.y() >= r.bottom()) continue;
        const double tolerance = kHitTolerancePx * (viewEnd_ - viewStart_) / p.width();
        const double t = timeForX(point.x());
        const auto [first, last] = visibleRange(stage, lane, t - tolerance, t + tolerance);
        // Prefer the item that truly covers t; otherwise the nearest within the tolerance.
        int best = -1;
        double bestDistance = tolerance;
        const auto& v = laneItems(stage, lane);
        for (size_t k = first; k < last; ++k) {
            const TimelineItem& it = items_[static_cast<size_t>(v[k])];
            const double d = t < it.startSeconds ? it.startSeconds - t : t > it.endSeconds ? t - it.endSeconds : 0.0;
            if (d <= bestDistance) {
                bestDistance = d;
                best = v[k];
                if (d == 0.0) break;
            }
        }
        return best;
    }
    return -1;
}

std::vector<double> TimelineGeometry::timeTicks(int target, double* stepSeconds) const {
    const AxisScale a = niceAxis(viewEnd_ - viewStart_, target);
    std::vector<double> ticks;
    if (a.step <= 0.0) return ticks;
    const double first = std::ceil(viewStart_ / a.step - 1e-9) * a.step;
    for (double t = first; t <= viewEnd_ + a.step * 1e-9 && ticks.size() < 1000; t += a.step) ticks.push_back(t);
    if (stepSeconds) *stepSeconds = a.step;
    return ticks;
}

} // namespace tessel::gui
