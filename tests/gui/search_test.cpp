// The search controller: a search runs on a worker thread while the event loop keeps turning; progress
// arrives on the GUI thread; cancel stops it and still delivers a finished signal (cancelled = true).
#include "gui_test_support.hpp"

#include "core/search_controller.hpp"

#include <QSignalSpy>
#include <QTest>
#include <QThread>
#include <QTimer>

namespace tessel::gui::test {

class SearchTest : public QObject {
    Q_OBJECT
private slots:
    void fixesParseLikeTheCli() {
        sim::SearchSpace space;
        ProblemList problems;
        applyFixes(QStringLiteral("tp=8, pp=4 mb=2 zero=1 recompute=full schedule=interleaved_1f1b sp=on"), space, problems);
        QVERIFY(problems.empty());
        QCOMPARE(space.fixed.at("tp"), 8);
        QCOMPARE(space.fixed.at("pp"), 4);
        QCOMPARE(space.fixed.at("micro_batch"), 2);
        QCOMPARE(space.fixed.at("zero_stage"), 1);
        QVERIFY(space.recompute == std::vector<Recompute>{Recompute::Full});
        QVERIFY(space.schedules == std::vector<Schedule>{Schedule::Interleaved1F1B});
        QVERIFY(space.sequenceParallel == std::vector<bool>{true});
        ProblemList bad;
        applyFixes(QStringLiteral("tp=x colour=red schedule=fast =3"), space, bad);
        QCOMPARE(bad.items().size(), size_t(4));
        QCOMPARE(bad.items()[0].where, std::string("fix tp"));
    }

    void requestTakesTheScenariosShape() {
        ProblemList problems;
        const Scenario s = defaultScenario();
        const SearchRequest r = makeSearchRequest(s, QStringLiteral("tp=8"), 25, problems);
        QVERIFY(problems.empty());
        QCOMPARE(r.space.gpus, 1024);
        QCOMPARE(r.space.globalBatch, 1536);
        QCOMPARE(r.options.topK, 25);
        QVERIFY(!r.space.hybridSharding);
        QVERIFY(!r.space.memoryBand);
        // The panel's "only plans that fit at the validated peak band" asks the search to leave the others out.
        QVERIFY(makeSearchRequest(s, QString(), 25, problems, true).space.memoryBand);
        // A scenario with hybrid sharding has the search weigh it too.
        Scenario hybrid = s;
        hybrid.plan.zeroStage = 1;
        hybrid.plan.zeroReplicas = 2;
        QVERIFY(makeSearchRequest(hybrid, QString(), 25, problems).space.hybridSharding);
        // A request the search refuses (keep top 0) is reported before anything starts.
        ProblemList refused;
        makeSearchRequest(s, QString(), 0, refused);
        QVERIFY(!refused.empty());
    }

    void aSmallSearchFinishesWithPlans() {
        SearchController controller;
        QSignalSpy started(&controller, &SearchController::started);
        QSignalSpy progress(&controller, &SearchController::progressChanged);
        QSignalSpy finished(&controller, &SearchController::finished);
        ProblemList problems;
        QVERIFY(controller.start(makeSearchRequest(llamaScenario(), QStringLiteral("tp=2"), 20, problems)));
        QVERIFY(problems.empty());
        QCOMPARE(started.count(), 1);
        QVERIFY(controller.isRunning());
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.count(), 1);
        QCOMPARE(finished.first().first().toBool(), false);
        QVERIFY(!controller.isRunning());
        QVERIFY(!controller.result().cancelled);
        QVERIFY(!controller.result().top.empty());
        QVERIFY(controller.result().top.size() <= 20);
        // Same plans as calling the library directly (the controller adds threads, not numbers).
        const auto& direct = smallSearchResult();
        QCOMPARE(controller.result().considered, direct.considered);
        QCOMPARE(controller.result().top.front().metrics.stepSeconds, direct.top.front().metrics.stepSeconds);
        // Progress, when reported, is in [0, 1] and was delivered on this (the GUI) thread before finished.
        for (const auto& args : progress) {
            const double f = args.first().toDouble();
            QVERIFY(f >= 0.0 && f <= 1.0);
        }
    }

    void cancelWithin100MsFinishesCancelledAndTheLoopKeepsTurning() {
        SearchController controller;
        QSignalSpy finished(&controller, &SearchController::finished);
        // GPT-3 175B on 1024 GPUs with nothing pinned: far more than 100 ms of search.
        ProblemList problems;
        SearchRequest request = makeSearchRequest(defaultScenario(), QString(), 50, problems);
        QVERIFY(problems.empty());
        int ticks = 0;
        int ticksAtFinish = -1;
        QTimer ticker;
        ticker.setInterval(5);
        connect(&ticker, &QTimer::timeout, this, [&]() { ++ticks; });
        connect(&controller, &SearchController::finished, this, [&]() { ticksAtFinish = ticks; });
        ticker.start();
        QVERIFY(controller.start(std::move(request)));
        QVERIFY(!controller.start(SearchRequest{}));   // one search at a time
        QTimer::singleShot(50, &controller, &SearchController::cancel);
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.count(), 1);
        QCOMPARE(finished.first().first().toBool(), true);
        QVERIFY(controller.result().cancelled);
        // The event loop ran timers while the search was busy: the window would have repainted.
        QVERIFY2(ticksAtFinish >= 3, qPrintable(QString::number(ticksAtFinish)));
        // A new search can start after a cancelled one.
        ProblemList again;
        QVERIFY(controller.start(makeSearchRequest(llamaScenario(), QStringLiteral("tp=2,pp=1,mb=1"), 5, again)));
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.last().first().toBool(), false);
    }

    void destroyingARunningControllerCancelsAndJoins() {
        auto controller = std::make_unique<SearchController>();
        ProblemList problems;
        QVERIFY(controller->start(makeSearchRequest(defaultScenario(), QString(), 50, problems)));
        QThread::msleep(20);
        // Fails by hanging (ctest's timeout) or crashing: the destructor cancels, joins, and the queued
        // completion addressed to the dead controller is dropped.
        controller.reset();
        QCoreApplication::processEvents();
    }
};

std::unique_ptr<QObject> makeSearchTest() { return std::make_unique<SearchTest>(); }

} // namespace tessel::gui::test

#include "search_test.moc"
