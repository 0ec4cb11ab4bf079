// Item models checked with QAbstractItemModelTester: the plan table and its sort/filter proxy, the
// rejection counts, the compare model and the measured-vs-predicted model.
#include "gui_test_support.hpp"

#include "core/compare_model.hpp"
#include "core/plan_filter_proxy.hpp"
#include "core/plan_table_model.hpp"
#include "core/rejection_model.hpp"

#include <QAbstractItemModelTester>
#include <QTest>

namespace tessel::gui::test {

class ModelsTest : public QObject {
    Q_OBJECT
private slots:
    void planTableModelPassesTheTester() {
        PlanTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const auto& r = smallSearchResult();
        QVERIFY(r.top.size() >= 5);
        model.setPlans(r.top, 80e9);
        QCOMPARE(model.rowCount(), static_cast<int>(r.top.size()));
        QCOMPARE(model.columnCount(), static_cast<int>(PlanTableModel::ColumnCount));
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void cellsShowTheSearchNumbers() {
        PlanTableModel model;
        const auto& r = smallSearchResult();
        model.setPlans(r.top, 80e9);
        for (int row = 0; row < model.rowCount(); ++row) {
            const auto& p = r.top[static_cast<size_t>(row)];
            QCOMPARE(model.data(model.index(row, PlanTableModel::Tp), PlanTableModel::SortRole).toDouble(), double(p.plan.tp));
            QCOMPARE(model.data(model.index(row, PlanTableModel::Pp), Qt::DisplayRole).toString(), QString::number(p.plan.pp));
            QCOMPARE(model.data(model.index(row, PlanTableModel::StepSeconds), PlanTableModel::SortRole).toDouble(),
                     p.metrics.stepSeconds);
            QCOMPARE(model.data(model.index(row, PlanTableModel::Mfu), PlanTableModel::SortRole).toDouble(), p.metrics.mfu * 100.0);
            QCOMPARE(model.data(model.index(row, PlanTableModel::PeakGiB), PlanTableModel::SortRole).toDouble(),
                     p.peakBytes / (1024.0 * 1024.0 * 1024.0));
            QCOMPARE(model.data(model.index(row, PlanTableModel::Schedule)).toString(),
                     QString::fromStdString(toString(p.plan.schedule)));
            QCOMPARE(model.data(model.index(row, 0), Qt::ToolTipRole).toString(), QString::fromStdString(p.why));
        }
        QVERIFY(!model.data(model.index(model.rowCount(), 0)).isValid());
    }

    void aPeakAtRiskIsMarkedAndSaysWhy() {
        // A plan whose peak fits but not at the validated peak band's upper end: "!" on the peak, the reason in its
        // tooltip, and the number alone for sorting and filtering.
        std::vector<sim::RankedPlan> plans(smallSearchResult().top.begin(), smallSearchResult().top.begin() + 1);
        plans[0].memoryAtRisk = true;
        PlanTableModel model;
        model.setPlans(plans, 80e9);
        const QModelIndex peak = model.index(0, PlanTableModel::PeakGiB);
        QVERIFY(model.data(peak, Qt::DisplayRole).toString().endsWith(QStringLiteral("!")));
        QCOMPARE(model.data(peak, PlanTableModel::SortRole).toDouble(), plans[0].peakBytes / (1024.0 * 1024.0 * 1024.0));
        QVERIFY(model.data(peak, Qt::ToolTipRole).toString().startsWith(QStringLiteral("may not fit")));
        QCOMPARE(model.data(model.index(0, 0), Qt::ToolTipRole).toString(), QString::fromStdString(plans[0].why));
    }

    void proxyPassesTheTesterWhileFilteringAndSorting() {
        PlanTableModel model;
        PlanFilterProxy proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setPlans(smallSearchResult().top, 80e9);
        proxy.sort(PlanTableModel::StepSeconds, Qt::DescendingOrder);
        proxy.setFilterText(QStringLiteral("zero>=1"));
        proxy.setFilterText(QStringLiteral("nonsense-word-that-matches-nothing"));
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setFilterText(QString());
        QCOMPARE(proxy.rowCount(), model.rowCount());
    }

    void sortingIsNumeric() {
        PlanTableModel model;
        PlanFilterProxy proxy;
        proxy.setSourceModel(&model);
        model.setPlans(smallSearchResult().top, 80e9);
        proxy.sort(PlanTableModel::StepSeconds, Qt::DescendingOrder);
        double previous = 1e300;
        for (int row = 0; row < proxy.rowCount(); ++row) {
            const double v = proxy.data(proxy.index(row, PlanTableModel::StepSeconds), PlanTableModel::SortRole).toDouble();
            QVERIFY(v <= previous);
            previous = v;
        }
        // Micro-batch 16 must sort after 2 (text sorting would put "16" first).
        proxy.sort(PlanTableModel::MicroBatch, Qt::AscendingOrder);
        previous = -1;
        for (int row = 0; row < proxy.rowCount(); ++row) {
            const double v = proxy.data(proxy.index(row, PlanTableModel::MicroBatch), PlanTableModel::SortRole).toDouble();
            QVERIFY(v >= previous);
            previous = v;
        }
    }

    void filterTermsSelectTheMatchingPlans() {
        PlanTableModel model;
        PlanFilterProxy proxy;
        proxy.setSourceModel(&model);
        const auto& top = smallSearchResult().top;
        model.setPlans(top, 80e9);
        auto count = [&](auto pred) { return static_cast<int>(std::count_if(top.begin(), top.end(), pred)); };

        proxy.setFilterText(QStringLiteral("zero>=1"));
        QCOMPARE(proxy.rowCount(), count([](const sim::RankedPlan& p) { return p.plan.zeroStage >= 1; }));
        proxy.setFilterText(QStringLiteral("zero=0 mb<=2"));
        QCOMPARE(proxy.rowCount(), count([](const sim::RankedPlan& p) { return p.plan.zeroStage == 0 && p.plan.microBatch <= 2; }));
        const double median = top[top.size() / 2].metrics.mfu * 100.0;
        proxy.setFilterText(QStringLiteral("mfu>%1").arg(median, 0, 'g', 17));
        QCOMPARE(proxy.rowCount(), count([&](const sim::RankedPlan& p) { return p.metrics.mfu * 100.0 > median; }));
        proxy.setFilterText(QStringLiteral("recompute=full"));
        QCOMPARE(proxy.rowCount(), count([](const sim::RankedPlan& p) { return p.plan.recompute == Recompute::Full; }));
        // A bare word matches any column's text; an unknown key is reported and matched as a word.
        proxy.setFilterText(QStringLiteral("selective"));
        QCOMPARE(proxy.rowCount(), count([](const sim::RankedPlan& p) { return p.plan.recompute == Recompute::Selective; }));
        proxy.setFilterText(QStringLiteral("bogus=3"));
        QCOMPARE(proxy.unknownKeys(), QStringList{QStringLiteral("bogus")});
        QCOMPARE(proxy.rowCount(), 0);
    }

    void rejectionModelCountsByReason() {
        RejectionModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const auto& r = smallSearchResult();
        QVERIFY(!r.rejected.empty());
        model.setCounts(r.rejected);
        QCOMPARE(model.rowCount(), static_cast<int>(r.rejected.size()));
        uint64_t total = 0;
        for (const auto& [reason, n] : r.rejected) total += n;
        QCOMPARE(model.total(), total);
        // Most frequent first.
        for (int row = 1; row < model.rowCount(); ++row)
            QVERIFY(model.data(model.index(row - 1, 1), Qt::UserRole).toDouble() >= model.data(model.index(row, 1), Qt::UserRole).toDouble());
        const QString reason = model.data(model.index(0, 0)).toString();
        QCOMPARE(model.data(model.index(0, 1), Qt::UserRole).toDouble(), double(r.rejected.at(reason.toStdString())));
    }

    void compareModelShowsBothPlansAndTheDelta() {
        CompareModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const auto& top = smallSearchResult().top;
        auto pinned = [](const sim::RankedPlan& r) {
            PinnedPlan p;
            p.label = QStringLiteral("x");
            p.plan = r.plan;
            p.metrics = r.metrics;
            p.memory.peakBytes = r.peakBytes;
            p.memory.capacityBytes = 80e9;
            return p;
        };
        model.setPlans(pinned(top[0]), std::nullopt);
        const int step = model.rowForMetric(QStringLiteral("step time"));
        QVERIFY(step >= 0);
        QCOMPARE(*model.value(step, CompareModel::A), top[0].metrics.stepSeconds);
        QVERIFY(!model.value(step, CompareModel::B).has_value());
        QVERIFY(model.data(model.index(step, CompareModel::Delta)).toString().isEmpty());
        model.setPlans(pinned(top[0]), pinned(top[1]));
        QCOMPARE(*model.value(step, CompareModel::B), top[1].metrics.stepSeconds);
        QVERIFY(!model.data(model.index(step, CompareModel::Delta)).toString().isEmpty());
        const int peak = model.rowForMetric(QStringLiteral("peak memory"));
        QCOMPARE(*model.value(peak, CompareModel::B), top[1].peakBytes);
    }

    void compareModelsFitsRowReadsThePeakBand() {
        // The same peak, 78.5 of 80 GB: a DeepSpeed pipeline plan (its published peaks 3% over tessel's at the
        // median) may not fit; a Megatron-LM plan (its family's published peaks within about 1%) fits; over the GPU
        // is OOM either way.
        PinnedPlan megatron;
        megatron.label = QStringLiteral("a");
        megatron.plan.framework.name = "megatron";
        megatron.plan.pp = 8;
        megatron.memory.peakBytes = 78.5e9;
        megatron.memory.capacityBytes = 80e9;
        PinnedPlan deepspeed = megatron;
        deepspeed.plan.framework.name = "deepspeed";
        CompareModel model;
        model.setPlans(megatron, deepspeed);
        const int fits = model.rowForMetric(QStringLiteral("fits"));
        QVERIFY(fits >= 0);
        QCOMPARE(model.data(model.index(fits, CompareModel::A)).toString(), QStringLiteral("yes"));
        QVERIFY(model.data(model.index(fits, CompareModel::B)).toString().startsWith(QStringLiteral("may not fit")));
        deepspeed.memory.fits = false;
        deepspeed.memory.peakBytes = 90e9;
        model.setPlans(megatron, deepspeed);
        QVERIFY(model.data(model.index(fits, CompareModel::B)).toString().startsWith(QStringLiteral("no (OOM")));
    }
};

std::unique_ptr<QObject> makeModelsTest() { return std::make_unique<ModelsTest>(); }

} // namespace tessel::gui::test

#include "models_test.moc"
