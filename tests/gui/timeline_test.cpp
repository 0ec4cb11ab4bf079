// TimelineGeometry without a window: time <-> pixel under zoom and pan, row and lane layout, idle gaps and
// hit-testing the right action.
#include "gui_test_support.hpp"

#include "core/timeline_geometry.hpp"

#include <QTest>

#include <cmath>

namespace tessel::gui::test {

namespace {
sim::PlanSimulation gpt3Simulation() {
    const Scenario s = defaultScenario();
    return sim::simulatePlan(s.model, s.cluster, s.plan);
}

bool near(double a, double b, double tolerance) { return std::abs(a - b) <= tolerance; }
} // namespace

class TimelineTest : public QObject {
    Q_OBJECT
private slots:
    void layoutHoldsEveryActionOnItsStreamLane() {
        const auto sim = gpt3Simulation();
        TimelineGeometry g;
        g.setSimulation(sim);
        QCOMPARE(g.stageCount(), 8);
        QCOMPARE(g.items().size(), sim.schedule.actionCount());
        QCOMPARE(g.totalSeconds(), sim.timeline.stepSeconds);
        // pp = 8: compute, pp send, pp recv and dp lanes; no measured lane yet.
        QCOMPARE(g.lanes().size(), size_t(4));
        QVERIFY(!g.hasLane(TimelineLane::Measured));
        for (const auto& it : g.items()) {
            const sim::Action& a = sim.schedule.stages[static_cast<size_t>(it.stage)].actions[static_cast<size_t>(it.index)];
            QCOMPARE(static_cast<int>(it.kind), static_cast<int>(a.kind));
            QCOMPARE(static_cast<int>(it.lane), static_cast<int>(sim::streamOf(a.kind)));
            QCOMPARE(it.startSeconds, sim.timeline.perAction[static_cast<size_t>(it.stage)][static_cast<size_t>(it.index)].startSeconds);
        }
        // pp = 1 has no pipeline lanes.
        const Scenario llama = llamaScenario();
        TimelineGeometry flat;
        flat.setSimulation(sim::simulatePlan(llama.model, llama.cluster, llama.plan));
        QVERIFY(!flat.hasLane(TimelineLane::PipelineSend));
        QVERIFY(flat.hasLane(TimelineLane::Compute));
    }

    void timeAndPixelRoundTripUnderZoomAndPan() {
        TimelineGeometry g;
        g.setSimulation(gpt3Simulation());
        g.setViewport(1000, 400);
        const QRectF plot = g.plotRect();
        // Fitted: 0 at the plot's left edge, the step at its right edge.
        QVERIFY(near(g.xForTime(0.0), plot.left(), 1e-9));
        QVERIFY(near(g.xForTime(g.totalSeconds()), plot.right(), 1e-6));
        const double tAt = g.totalSeconds() * 0.37;
        const double x = g.xForTime(tAt);
        // Zoom in 4x at x: the time under x stays under x.
        g.zoomAt(x, 4.0);
        QVERIFY(near(g.viewEndSeconds() - g.viewStartSeconds(), g.totalSeconds() / 4.0, 1e-9));
        QVERIFY(near(g.xForTime(tAt), x, 1e-6));
        QVERIFY(near(g.timeForX(x), tAt, 1e-9));
        for (double px : {plot.left(), plot.center().x(), plot.right() - 3.0})
            QVERIFY(near(g.xForTime(g.timeForX(px)), px, 1e-6));
        // Pan 100 pixels right: everything moves 100 pixels right.
        const double before = g.xForTime(tAt);
        g.panByPixels(100.0);
        QVERIFY(near(g.xForTime(tAt), before + 100.0, 1e-6));
        // Panning past the start clamps at 0; zooming out past the step clamps at the whole step.
        g.panByPixels(1e7);
        QCOMPARE(g.viewStartSeconds(), 0.0);
        g.zoomAt(x, 1e-3);
        QCOMPARE(g.viewStartSeconds(), 0.0);
        QVERIFY(near(g.viewEndSeconds(), g.totalSeconds(), 1e-12));
        // A resize keeps the view (seconds), not the pixels.
        g.zoomAt(x, 8.0);
        const double start = g.viewStartSeconds();
        g.setViewport(600, 300);
        QCOMPARE(g.viewStartSeconds(), start);
    }

    void hitTestFindsTheActionUnderThePointer() {
        const auto sim = gpt3Simulation();
        TimelineGeometry g;
        g.setSimulation(sim);
        g.setViewport(1200, 600);
        // The first forward of stage 3 and the last backward of stage 0, hit at their centres.
        for (int stage : {3, 0}) {
            const auto& acts = sim.schedule.stages[static_cast<size_t>(stage)].actions;
            int target = -1;
            for (size_t i = 0; i < acts.size(); ++i)
                if (acts[i].kind == (stage == 3 ? sim::ActionKind::Forward : sim::ActionKind::Backward)) {
                    target = static_cast<int>(i);
                    if (stage == 3) break;
                }
            QVERIFY(target >= 0);
            // Zoom so the block is a comfortable 40 pixels wide.
            const auto& t = sim.timeline.perAction[static_cast<size_t>(stage)][static_cast<size_t>(target)];
            const double mid = (t.startSeconds + t.endSeconds) / 2.0;
            const double width = (t.endSeconds - t.startSeconds) * g.plotRect().width() / 40.0;
            g.setView(mid - width / 2.0, mid + width / 2.0);
            int found = -1;
            for (size_t k = 0; k < g.items().size(); ++k)
                if (g.items()[k].stage == stage && g.items()[k].index == target) found = static_cast<int>(k);
            const QRectF r = g.itemRect(g.items()[static_cast<size_t>(found)]);
            QVERIFY(r.width() > 30.0 && r.width() < 50.0);
            QCOMPARE(g.hitTest(r.center()), found);
            // The same x on the row below belongs to the next stage (another action or none, not this one).
            QVERIFY(g.hitTest(QPointF(r.center().x(), r.center().y() + g.rowHeight())) != found);
        }
        // The labels column and the axis hit nothing.
        QCOMPARE(g.hitTest(QPointF(5.0, 100.0)), -1);
        QCOMPARE(g.hitTest(QPointF(500.0, 5.0)), -1);
    }

    void hitTestInAnIdleGapFindsNothing() {
        TimelineGeometry g;
        g.setSimulation(gpt3Simulation());
        g.setViewport(1200, 600);
        // Stage 7 waits for the whole pipeline fill before its first forward: a long gap at the start.
        const auto& gaps = g.idleGaps(7);
        QVERIFY(!gaps.empty());
        QCOMPARE(gaps.front().startSeconds, 0.0);
        const double mid = (gaps.front().startSeconds + gaps.front().endSeconds) / 2.0;
        const QRectF lane = g.laneRect(7, TimelineLane::Compute);
        QCOMPARE(g.hitTest(QPointF(g.xForTime(mid), lane.center().y())), -1);
    }

    void idleGapsAreTheComplementOfCompute() {
        const auto sim = gpt3Simulation();
        TimelineGeometry g;
        g.setSimulation(sim);
        for (int s = 0; s < g.stageCount(); ++s) {
            double busy = 0.0, idle = 0.0;
            for (int idx : g.laneItems(s, TimelineLane::Compute)) {
                const auto& it = g.items()[static_cast<size_t>(idx)];
                busy += it.endSeconds - it.startSeconds;
            }
            for (const auto& gap : g.idleGaps(s)) {
                QVERIFY(gap.endSeconds > gap.startSeconds);
                idle += gap.endSeconds - gap.startSeconds;
            }
            QVERIFY(near(busy + idle, g.totalSeconds(), 1e-9 * g.totalSeconds()));
            // Idle compute is at least the simulator's bubble (it also holds exposed PP/DP waits).
            QVERIFY(idle + 1e-9 >= sim.timeline.perStage[static_cast<size_t>(s)].bubbleSeconds);
        }
    }

    void visibleRangeIsExactlyTheIntersectingItems() {
        TimelineGeometry g;
        g.setSimulation(gpt3Simulation());
        const double t0 = g.totalSeconds() * 0.3, t1 = g.totalSeconds() * 0.31;
        for (TimelineLane lane : g.lanes()) {
            const auto& ids = g.laneItems(2, lane);
            const auto [first, last] = g.visibleRange(2, lane, t0, t1);
            for (size_t k = 0; k < ids.size(); ++k) {
                const auto& it = g.items()[static_cast<size_t>(ids[k])];
                const bool intersects = it.endSeconds >= t0 && it.startSeconds <= t1;
                QCOMPARE(k >= first && k < last, intersects);
            }
        }
    }

    void rowsScrollWhenTheyDoNotFit() {
        TimelineGeometry g;
        g.setSimulation(gpt3Simulation());
        g.setViewport(800, 150);   // 8 rows of at least 30 px do not fit in 128 px
        QCOMPARE(g.rowHeight(), TimelineGeometry::kMinRowHeight);
        const double top = g.rowTop(4);
        g.panByPixels(0.0, -60.0);
        QCOMPARE(g.rowTop(4), top - 60.0);
        g.panByPixels(0.0, -1e6);   // clamped: the last row ends at the bottom
        QVERIFY(near(g.rowTop(7) + g.rowHeight(), 150.0, 1e-9));
    }

    void ticksAreRoundAndInView() {
        TimelineGeometry g;
        g.setSimulation(gpt3Simulation());
        double step = 0.0;
        const auto ticks = g.timeTicks(8, &step);
        QVERIFY(ticks.size() >= 4 && ticks.size() <= 12);
        const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
        QVERIFY(near(mantissa, 1.0, 1e-9) || near(mantissa, 2.0, 1e-9) || near(mantissa, 5.0, 1e-9));
        for (double t : ticks) QVERIFY(t >= g.viewStartSeconds() - 1e-12 && t <= g.viewEndSeconds() + 1e-9);
    }
};

std::unique_ptr<QObject> makeTimelineTest() { return std::make_unique<TimelineTest>(); }

} // namespace tessel::gui::test

#include "timeline_test.moc"
