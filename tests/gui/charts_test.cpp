// Chart data and painting without a window: axis scales, the memory chart's layout and OOM flags, measured
// overlays, and the PNG / SVG export of a plan's charts.
#include "gui_test_support.hpp"

#include "core/chart_export.hpp"
#include "core/chart_painters.hpp"
#include "core/format.hpp"

#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

namespace tessel::gui::test {

class ChartsTest : public QObject {
    Q_OBJECT
private slots:
    void numbersReadLikeTheCli() {
        QCOMPARE(secondsText(18.549), QStringLiteral("18.5 s"));
        QCOMPARE(secondsText(0.33441), QStringLiteral("334 ms"));
        QCOMPARE(secondsText(-0.33441), QStringLiteral("-334 ms"));
        QCOMPARE(secondsText(4.5e-5), QStringLiteral("45.0 us"));
        QCOMPARE(secondsText(0.0), QStringLiteral("0 s"));
        QCOMPARE(gibText(85520809984.0), QStringLiteral("79.6 GiB"));
        QCOMPARE(countText(452928), QStringLiteral("452,928"));
        QCOMPARE(countText(12), QStringLiteral("12"));
        QCOMPARE(signedPercentText(0.1), QStringLiteral("+10.0%"));
        QCOMPARE(signedPercentText(-0.032), QStringLiteral("-3.2%"));
        Plan p;
        p.tp = 8;
        p.pp = 8;
        p.dp = 16;
        p.recompute = Recompute::Selective;
        p.sequenceParallel = true;
        QCOMPARE(planSummary(p), QStringLiteral("tp8 pp8 dp16 mb1 zero0 selective 1f1b sp"));
        p.pp = 4;
        p.pipelineLayers = {7, 8, 8, 7};
        QCOMPARE(pipelineSplitLabel(p), QStringLiteral("7,8x2,7"));
        QCOMPARE(planSummary(p), QStringLiteral("tp8 pp4 (7,8x2,7) dp16 mb1 zero0 selective 1f1b sp"));
        p.zeroStage = 3;
        p.zeroReplicas = 2; // hybrid sharding: two replicas of the sharded state
        QCOMPARE(planSummary(p), QStringLiteral("tp8 pp4 (7,8x2,7) dp16 mb1 zero3x2 selective 1f1b sp"));
        p.zeroStage = 0;
        p.zeroReplicas = 1;
        p.pipelineLayers.clear();
        p.firstStageLayers = 6;
        QCOMPARE(pipelineSplitLabel(p), QStringLiteral("first 6"));
    }

    void niceAxisPicksRoundSteps() {
        struct Case {
            double max;
            double step, end;
        };
        for (const Case& c : {Case{84.0, 20.0, 100.0}, Case{80.0, 20.0, 80.0}, Case{0.93, 0.2, 1.0}, Case{18.55, 5.0, 20.0},
                              Case{1234.0, 500.0, 1500.0}}) {
            const AxisScale a = niceAxis(c.max, 5);
            QVERIFY2(std::abs(a.step - c.step) < 1e-12, qPrintable(QString::number(c.max)));
            QVERIFY2(std::abs(a.maxValue - c.end) < 1e-9, qPrintable(QString::number(c.max)));
            QVERIFY(a.maxValue >= c.max);
        }
        QCOMPARE(niceAxis(0.0).maxValue, 1.0);   // nothing to show: a unit axis, never a division by zero
    }

    void memoryLayoutMapsGibToPixels() {
        const Scenario s = defaultScenario();
        const MemoryChartData d = MemoryChartData::fromReport(predictMemory(s.model, s.cluster, s.plan));
        const auto l = d.layout(QRectF(0, 0, 500, 300), 40, 50, 30);
        QCOMPARE(l.plot, QRectF(40, 50, 452, 220));
        QCOMPARE(d.yForGib(l, 0.0), 270.0);
        QCOMPARE(d.yForGib(l, d.axis.maxValue), 50.0);
        // Bars sit inside their slots, left to right by stage.
        for (int i = 0; i < 8; ++i) {
            const double x = l.xForBar(i);
            QCOMPARE(d.stageAt(l, QPointF(x + l.barWidth / 2.0, 200.0)), i);
        }
        QCOMPARE(d.stageAt(l, QPointF(10.0, 200.0)), -1);
    }

    void theMemoryTitleSaysFitsMayNotFitOrOom() {
        const Scenario s = defaultScenario();
        MemoryChartData d = MemoryChartData::fromReport(predictMemory(s.model, s.cluster, s.plan));
        QVERIFY(d.fits);
        QVERIFY(d.title().contains(QStringLiteral("fits, peak")));
        d.mayNotFit = true; // the peak fits; the validated band's upper end does not
        QVERIFY(d.title().contains(QStringLiteral("may not fit: peak")));
        d.stages[0].fits = false; // a stage over the GPU's memory says so, band or not
        QVERIFY(d.title().contains(QStringLiteral("1 of 8 stages OOM")));
        QCOMPARE(MemoryChartData::empty(QStringLiteral("no plan")).title(), QStringLiteral("Memory per GPU by pipeline stage"));
    }

    void measuredMarkersRefitTheAxis() {
        const Scenario s = defaultScenario();
        MemoryChartData d = MemoryChartData::fromReport(predictMemory(s.model, s.cluster, s.plan));
        const double before = d.axis.maxValue;
        d.setMeasured({std::nullopt, 150.0});
        QVERIFY(!d.stages[0].measuredGib.has_value());
        QCOMPARE(*d.stages[1].measuredGib, 150.0);
        QVERIFY(d.axis.maxValue >= 150.0 && d.axis.maxValue > before);
    }

    void chartsPaintAndExport() {
        Scenario s = defaultScenario();
        s.plan.recompute = Recompute::None;
        s.plan.microBatch = 4;
        const auto sim = sim::simulatePlan(s.model, s.cluster, s.plan);
        ChartSet set;
        set.memory = MemoryChartData::fromReport(sim.memory);
        QVERIFY(set.memory.oomStageCount() > 0);
        set.breakdown = BreakdownData::fromSimulation(sim);
        set.timeline.setSimulation(sim);
        set.title = QStringLiteral("GPT-3 175B, an OOM plan");
        QTemporaryDir dir;
        const QString png = dir.filePath(QStringLiteral("charts.png"));
        QCOMPARE(exportCharts(png, set, QSize(1200, 800)), QString());
        QImage image(png);
        QCOMPARE(image.size(), QSize(1200, 800));
        // The OOM stages are painted red somewhere in the memory chart (top-left part of the image).
        int red = 0;
        for (int y = 0; y < 360; y += 2)
            for (int x = 0; x < 500; x += 2) {
                const QColor c = image.pixelColor(x, y);
                red += (c.red() > 180 && c.green() < 80 && c.blue() < 80) ? 1 : 0;
            }
        QVERIFY2(red > 50, qPrintable(QString::number(red)));
        if (svgExportAvailable()) {
            const QString svg = dir.filePath(QStringLiteral("charts.svg"));
            QCOMPARE(exportCharts(svg, set), QString());
            QFile f(svg);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray text = f.readAll();
            QVERIFY(text.contains("<svg"));
            QVERIFY(text.contains("OOM"));
        }
        QVERIFY(!exportCharts(dir.filePath(QStringLiteral("charts.bmpx")), set).isEmpty());
    }

    void emptyChartsPaintTheirMessage() {
        QImage image(400, 300, QImage::Format_ARGB32_Premultiplied);
        QPainter p(&image);
        paintMemoryChart(p, QRectF(0, 0, 400, 300), MemoryChartData::empty(QStringLiteral("no plan")));
        paintBreakdown(p, QRectF(0, 0, 400, 300), BreakdownData::empty(QStringLiteral("no plan")));
        TimelineGeometry empty;
        paintTimeline(p, empty);
        p.end();
        QVERIFY(!image.isNull());
    }
};

std::unique_ptr<QObject> makeChartsTest() { return std::make_unique<ChartsTest>(); }

} // namespace tessel::gui::test

#include "charts_test.moc"
