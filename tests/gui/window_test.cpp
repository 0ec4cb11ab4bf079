// The main window under the offscreen platform: a search started and cancelled from the panel with the
// event loop still turning, a searched GPT-3 175B plan selected with the charts' data checked against the
// cost model and simulator, an OOM plan, two pinned plans, a measured run; PNG screenshots of each state
// at 1280x800 go to $TESSEL_SCREENSHOT_DIR (default: <build>/screenshots) for a person to look at.
#include "gui_test_support.hpp"

#include "app/chart_widgets.hpp"
#include "app/knob_panel.hpp"
#include "app/main_window.hpp"
#include "app/scenario_panel.hpp"
#include "core/chart_export.hpp"

#include "tessel/cost/memory.hpp"
#include "tessel/sim/trace.hpp"

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QToolButton>

#include <fstream>

namespace tessel::gui::test {

namespace {
QString screenshotDir() {
    const QByteArray env = qgetenv("TESSEL_SCREENSHOT_DIR");
    return env.isEmpty() ? QStringLiteral(TESSEL_DEFAULT_SCREENSHOT_DIR) : QString::fromLocal8Bit(env);
}
} // namespace

class WindowTest : public QObject {
    Q_OBJECT
private:
    std::unique_ptr<MainWindow> window_;
    QString dir_;

    void shoot(const QString& name) {
        QApplication::processEvents();
        QTest::qWait(30);
        const QImage image = window_->grab().toImage();
        QCOMPARE(image.size(), QSize(1280, 800));
        const QString path = QDir(dir_).filePath(name);
        QVERIFY2(image.save(path, "PNG"), qPrintable(path));
        qInfo("screenshot: %s", qPrintable(path));
    }

private slots:
    void initTestCase() {
        dir_ = screenshotDir();
        QVERIFY(QDir().mkpath(dir_));
        window_ = std::make_unique<MainWindow>();
        window_->resize(1280, 800);
        window_->show();
        QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
        // The default scenario (GPT-3 175B, Megatron's TP8 PP8 DP16 plan) is shown before any search.
        QVERIFY(window_->session()->evaluation().ok());
        QCOMPARE(window_->session()->scenario().model.name, std::string("gpt3-175b"));
    }

    void cancelFromThePanelKeepsTheWindowResponsive() {
        ScenarioPanel* panel = window_->scenarioPanel();
        panel->setFixText(QString());   // the whole GPT-3 space: far longer than 100 ms
        QSignalSpy finished(window_->searchController(), &SearchController::finished);
        int ticks = 0, ticksAtFinish = -1;
        QTimer ticker;
        ticker.setInterval(5);
        QObject scope;   // the connections below capture locals: they must end with this function
        connect(&ticker, &QTimer::timeout, &scope, [&]() { ++ticks; });
        connect(window_->searchController(), &SearchController::finished, &scope, [&]() { ticksAtFinish = ticks; });
        ticker.start();
        QTest::mouseClick(panel->searchButton(), Qt::LeftButton);
        QVERIFY(window_->searchController()->isRunning());
        QVERIFY(!panel->searchButton()->isEnabled());
        QVERIFY(panel->cancelButton()->isEnabled());
        QTimer::singleShot(50, this, [panel]() { QTest::mouseClick(panel->cancelButton(), Qt::LeftButton); });
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.first().first().toBool(), true);
        QVERIFY2(ticksAtFinish >= 3, qPrintable(QString::number(ticksAtFinish)));
        QVERIFY(panel->searchButton()->isEnabled());
        QVERIFY(!panel->cancelButton()->isEnabled());
    }

    void searchedPlanChartsMatchTheLibraries() {
        ScenarioPanel* panel = window_->scenarioPanel();
        panel->setFixText(QStringLiteral("tp=8"));
        QSignalSpy finished(window_->searchController(), &SearchController::finished);
        QVERIFY(window_->startSearch());
        QVERIFY(finished.wait(120000));
        QCOMPARE(finished.first().first().toBool(), false);
        QVERIFY(window_->planProxy()->rowCount() > 0);
        QVERIFY(window_->rejectionModel()->rowCount() > 0);
        QCOMPARE(panel->progressBar()->value(), panel->progressBar()->maximum());
        // The best plan is selected: the charts show its memory and timeline.
        const sim::RankedPlan& best = window_->planModel()->plan(0);
        QCOMPARE(best.plan.tp, 8);
        QVERIFY(planToJson(window_->session()->currentPlan()) == planToJson(best.plan));
        const Scenario& s = window_->session()->scenario();
        const MemoryReport expected = predictMemory(s.model, s.cluster, best.plan);
        const MemoryChartData& memory = window_->memoryChart()->data();
        QCOMPARE(memory.stages.size(), expected.stages.size());
        for (size_t i = 0; i < expected.stages.size(); ++i)
            QCOMPARE(memory.stages[i].totalGib, expected.stages[i].totalBytes() / (1024.0 * 1024.0 * 1024.0));
        QCOMPARE(window_->breakdownChart()->data().stepSeconds, best.metrics.stepSeconds);
        QCOMPARE(window_->timeline()->geometry().totalSeconds(), best.metrics.stepSeconds);
        // Selecting another row shows that plan.
        if (window_->planProxy()->rowCount() > 1) {
            window_->selectPlanRow(1);
            const QModelIndex source = window_->planProxy()->mapToSource(window_->planProxy()->index(1, 0));
            QCOMPARE(window_->breakdownChart()->data().stepSeconds, window_->planModel()->plan(source.row()).metrics.stepSeconds);
            window_->selectPlanRow(0);
        }
        shoot(QStringLiteral("main-search.png"));
    }

    void oomPlanTurnsRed() {
        // Megatron's GPT-3 plan without recompute at micro-batch 4: the first stages hold too many activations.
        window_->session()->selectPlan(defaultScenario().plan);
        window_->session()->setRecompute(Recompute::None);
        window_->knobPanel()->microBatch()->setValue(4);   // through the knob, as a user would
        QCOMPARE(window_->session()->currentPlan().microBatch, 4);
        const MemoryChartData& memory = window_->memoryChart()->data();
        QVERIFY(!memory.fits);
        QVERIFY(memory.oomStageCount() > 0);
        QVERIFY(!memory.stages.front().fits);
        QVERIFY(memory.stages.back().fits);
        shoot(QStringLiteral("main-oom.png"));
    }

    void theLossKnobSetsTheKernel() {
        // Item 0 names the framework's kernel; choosing another sets the plan's, and a plan it cannot run (GPT-3's
        // tp 8 with Liger's fused linear loss) is shown as a problem, not simulated.
        QComboBox* loss = window_->knobPanel()->loss();
        QVERIFY(loss->itemText(0).startsWith(QStringLiteral("auto (")));
        const int liger = loss->findText(QStringLiteral("fused_linear"));
        QVERIFY(liger > 0);
        loss->setCurrentIndex(liger);
        emit loss->activated(liger); // as a user's choice
        QCOMPARE(window_->session()->currentPlan().framework.crossEntropy, std::optional<std::string>("fused_linear"));
        QVERIFY(!window_->session()->evaluation().ok());
        loss->setCurrentIndex(0);
        emit loss->activated(0);
        QVERIFY(!window_->session()->currentPlan().framework.crossEntropy);
        window_->session()->resetKnobs();
    }

    void theFp8KnobSetsTheScalingRecipe() {
        // Off for a bf16 plan; on an FP8 plan (Llama 3 70B on H100s) current scaling is chosen, slows the step (an
        // amax pass before each cast, and its all-reduce over TP under SP) and goes back to the default.
        window_->session()->resetKnobs();
        QComboBox* fp8 = window_->knobPanel()->fp8Recipe();
        QVERIFY(!fp8->isEnabled());
        QVERIFY(window_->openScenarioFile(QStringLiteral("llama3-70b-h100")));
        Plan plan = window_->session()->currentPlan();
        plan.precision = "fp8";
        window_->session()->setPlan(plan);
        QVERIFY(fp8->isEnabled());
        QVERIFY(window_->session()->evaluation().ok());
        const double delayed = window_->session()->evaluation().simulation->metrics.stepSeconds;
        const int current = fp8->findText(QStringLiteral("tensorwise"));
        QVERIFY(current > 0);
        fp8->setCurrentIndex(current);
        emit fp8->activated(current); // as a user's choice
        QCOMPARE(window_->session()->currentPlan().framework.fp8Recipe, std::optional<std::string>("tensorwise"));
        QVERIFY(window_->session()->evaluation().ok());
        QVERIFY(window_->session()->evaluation().simulation->metrics.stepSeconds > delayed);
        fp8->setCurrentIndex(0);
        emit fp8->activated(0);
        QVERIFY(!window_->session()->currentPlan().framework.fp8Recipe);
        QVERIFY(window_->openScenarioFile(QStringLiteral("gpt3-175b-megatron"))); // the other tests' scenario
    }

    void theModulesKnobSetsSelectiveRecompute() {
        // Under selective recompute the modules menu sets the plan's set (GPT-3: the MLP beside the attention core), a
        // module the model lacks (moe) is a problem shown, not simulated; under full recompute the menu is off.
        window_->session()->resetKnobs();
        window_->session()->setRecompute(Recompute::Selective);
        QToolButton* modules = window_->knobPanel()->recomputeModules();
        QVERIFY(modules->isEnabled());
        QCOMPARE(modules->text(), QStringLiteral("core_attn"));
        const auto& actions = window_->knobPanel()->moduleActions();
        QCOMPARE(actions.size(), recomputeModuleNames().size());
        auto action = [&](const char* name) {
            for (QAction* a : actions)
                if (a->text() == QLatin1String(name)) return a;
            return static_cast<QAction*>(nullptr);
        };
        action("mlp")->trigger(); // as a user's click: checks it
        QCOMPARE(window_->session()->currentPlan().recomputeModules, recompute_module::CoreAttn | recompute_module::Mlp);
        QVERIFY(window_->session()->evaluation().ok());
        QCOMPARE(modules->text(), QStringLiteral("core_attn,mlp"));
        action("moe")->trigger();
        QVERIFY(!window_->session()->evaluation().ok());
        action("moe")->trigger();
        QVERIFY(window_->session()->evaluation().ok());
        window_->session()->setRecompute(Recompute::Full);
        QVERIFY(!modules->isEnabled());
        QCOMPARE(window_->session()->currentPlan().recomputeModules, recompute_module::Default);
        window_->session()->resetKnobs();
    }

    void pinnedPlansCompare() {
        window_->session()->resetKnobs();
        QTest::mouseClick(window_->knobPanel()->pinA(), Qt::LeftButton);
        window_->knobPanel()->microBatch()->setValue(2);
        QTest::mouseClick(window_->knobPanel()->pinB(), Qt::LeftButton);
        QCOMPARE(window_->detailTabs()->currentIndex(), 1);
        const CompareModel* compare = window_->compareModel();
        const int step = compare->rowForMetric(QStringLiteral("step time"));
        QCOMPARE(*compare->value(step, CompareModel::A), window_->session()->pinned(0)->metrics.stepSeconds);
        QCOMPARE(*compare->value(step, CompareModel::B), window_->session()->evaluation().simulation->metrics.stepSeconds);
        shoot(QStringLiteral("main-compare.png"));
    }

    void measuredRunOverlay() {
        // A "run" of the plan on screen, 10% slower than predicted everywhere, with memory 3% above.
        const sim::PlanSimulation& sim = *window_->session()->evaluation().simulation;
        nlohmann::json trace = sim::chromeTrace(sim);
        for (auto& ev : trace["traceEvents"])
            if (ev.value("ph", "") == "X") {
                ev["ts"] = ev["ts"].get<double>() * 1.1;
                ev["dur"] = ev["dur"].get<double>() * 1.1;
            }
        trace["otherData"].erase("step_seconds");
        nlohmann::json stages = nlohmann::json::array();
        for (const auto& st : sim.memory.stages) stages.push_back({{"stage", st.stage}, {"peak_bytes", st.totalBytes() * 1.03}});
        QTemporaryDir tmp;
        const QString tracePath = tmp.filePath(QStringLiteral("run-trace.json"));
        const QString memoryPath = tmp.filePath(QStringLiteral("memory.json"));
        std::ofstream(tracePath.toStdString()) << trace.dump();
        std::ofstream(memoryPath.toStdString()) << nlohmann::json{{"stages", stages}}.dump();
        QVERIFY(window_->openMeasuredRunFiles(tracePath, memoryPath));
        QCOMPARE(window_->detailTabs()->currentIndex(), 2);
        QVERIFY(window_->measuredModel()->rowCount() > 0);
        QVERIFY(std::abs(window_->measuredModel()->comparison().stepError() - 0.1) < 1e-6);
        QVERIFY(window_->timeline()->geometry().hasLane(TimelineLane::Measured));
        QVERIFY(window_->memoryChart()->data().stages.front().measuredGib.has_value());
        QVERIFY(window_->breakdownChart()->data().measuredStepSeconds.has_value());
        shoot(QStringLiteral("main-measured.png"));
        // With the measured lane, show the timeline too.
        window_->detailTabs()->setCurrentIndex(0);
        shoot(QStringLiteral("main-measured-timeline.png"));

        // The exported charts of the same state, as File > Export charts writes them.
        ChartSet set{window_->memoryChart()->data(), window_->breakdownChart()->data(), window_->timeline()->geometry(),
                     QStringLiteral("GPT-3 175B, measured vs predicted")};
        QCOMPARE(exportCharts(QDir(dir_).filePath(QStringLiteral("charts.png")), set), QString());
        if (svgExportAvailable()) QCOMPARE(exportCharts(QDir(dir_).filePath(QStringLiteral("charts.svg")), set), QString());
        window_->clearMeasuredRun();
        QVERIFY(!window_->timeline()->geometry().hasLane(TimelineLane::Measured));
    }

    void scenarioFilesRoundTripThroughTheCliFormat() {
        QTemporaryDir tmp;
        const QString path = tmp.filePath(QStringLiteral("my-plan.json"));
        window_->session()->setMicroBatch(3);   // 1536 / (3 x 16) = 32 micro-batches
        QVERIFY(window_->session()->evaluation().ok());
        const Plan saved = window_->session()->currentPlan();
        QVERIFY(window_->saveScenarioFile(path));
        // The file is what `tessel predict FILE` reads.
        const Scenario loaded = loadScenarioFile(path.toStdString());
        QVERIFY(planToJson(loaded.plan) == planToJson(saved));
        QCOMPARE(loaded.model.layers, 96);
        finishScenario(loaded);
        window_->session()->resetKnobs();
        QVERIFY(window_->openScenarioFile(path));
        QVERIFY(planToJson(window_->session()->currentPlan()) == planToJson(saved));
        QVERIFY(window_->session()->evaluation().ok());
        QCOMPARE(window_->planModel()->rowCount(), 0);   // a new scenario clears the old search
    }

    void traceExportAndFrameworkSettings() {
        QTemporaryDir tmp;
        const QString path = tmp.filePath(QStringLiteral("trace.json"));
        QString error;
        QVERIFY2(window_->writeTraceFile(path, &error), qPrintable(error));
        std::ifstream in(path.toStdString());
        const nlohmann::json trace = nlohmann::json::parse(in);
        QCOMPARE(trace["traceEvents"].size(), sim::chromeTrace(*window_->session()->evaluation().simulation)["traceEvents"].size());
        // Megatron-LM takes this plan; it refuses ZeRO-3, and says why.
        QString problems;
        const QString megatron = window_->frameworkSettings(0, &problems);
        QVERIFY2(megatron.contains(QStringLiteral("--tensor-model-parallel-size 8")), qPrintable(megatron.left(400)));
        window_->session()->setZeroStage(3);
        QVERIFY(window_->frameworkSettings(0, &problems).isEmpty());
        QVERIFY(problems.contains(QStringLiteral("/plan/zero_stage")));
        window_->session()->setZeroStage(0);
    }

    void editingTheClusterByHandReevaluates() {
        auto* nodes = window_->scenarioPanel()->findChild<QSpinBox*>(QStringLiteral("nodes"));
        QVERIFY(nodes);
        nodes->setValue(64);   // 512 GPUs: tp8 pp8 dp16 no longer fills the cluster
        QCOMPARE(window_->session()->scenario().cluster.nodes, 64);
        QVERIFY(!window_->session()->evaluation().ok());
        QVERIFY(!window_->memoryChart()->data().message.isEmpty());
        nodes->setValue(128);
        QVERIFY(window_->session()->evaluation().ok());
        auto* batch = window_->scenarioPanel()->findChild<QSpinBox*>(QStringLiteral("globalBatch"));
        batch->setValue(768);
        QCOMPARE(window_->session()->currentPlan().globalBatch, 768);
        QVERIFY(window_->session()->evaluation().ok());
        QCOMPARE(window_->session()->evaluation().simulation->schedule.microBatches, 768 / (16 * window_->session()->currentPlan().microBatch));
        auto* layers = window_->scenarioPanel()->findChild<QSpinBox*>(QStringLiteral("layers"));
        layers->setValue(48);
        QCOMPARE(window_->session()->scenario().model.layers, 48);
        QVERIFY(window_->session()->evaluation().ok());
        QCOMPARE(window_->session()->evaluation().simulation->memory.stages.front().layers, 6);
    }

    void runFolderBringsItsScenario() {
        // A run folder as the executor leaves it: scenario.json, trace.json (two steps), memory.json.
        const Scenario s = llamaScenario();
        const sim::PlanSimulation sim = sim::simulatePlan(s.model, s.cluster, s.plan);
        nlohmann::json trace = sim::chromeTrace(sim);
        nlohmann::json events = nlohmann::json::array();
        for (int step = 0; step < 2; ++step)
            for (auto ev : trace["traceEvents"]) {
                if (ev.value("ph", "") != "X") continue;
                const double factor = step == 0 ? 1.5 : 1.2;
                ev["ts"] = ev["ts"].get<double>() * factor + step * 1.5 * sim.metrics.stepSeconds * 1e6;
                ev["dur"] = ev["dur"].get<double>() * factor;
                ev["args"]["step"] = step;
                events.push_back(ev);
            }
        nlohmann::json ranks = nlohmann::json::array();
        ranks.push_back({{"rank", 0}, {"stage", 0}, {"peak_total_bytes", sim.memory.stages[0].totalBytes() * 0.9}});
        QTemporaryDir tmp;
        std::ofstream(tmp.filePath(QStringLiteral("scenario.json")).toStdString()) << scenarioToJson(s).dump(2);
        std::ofstream(tmp.filePath(QStringLiteral("trace.json")).toStdString())
            << nlohmann::json{{"traceEvents", events}, {"otherData", {{"source", "tessel measured"}}}}.dump();
        std::ofstream(tmp.filePath(QStringLiteral("memory.json")).toStdString())
            << nlohmann::json{{"schema_version", 1}, {"ranks", ranks}}.dump();
        QVERIFY(window_->openMeasuredRunWithSiblings(tmp.filePath(QStringLiteral("trace.json"))));
        QCOMPARE(window_->session()->scenario().model.name, s.model.name);
        QVERIFY(planToJson(window_->session()->currentPlan()) == planToJson(s.plan));
        const MeasuredComparison& c = window_->measuredModel()->comparison();
        QVERIFY(std::abs(c.stepError() - 0.2) < 1e-6);   // the warm-up step is left out
        QVERIFY(std::abs(*c.memory[0].error() + 0.1) < 1e-9);
        QVERIFY(window_->memoryChart()->data().stages[0].measuredGib.has_value());
    }

    // A run measured on the H100 of docs/gpu-report.md opens with its scenario (cluster h100-single-calibrated)
    // and overlays the error `tessel compare` gives for it (data/gpu/h100-2026-11-25/holdout-results.json).
    void gpuReportRunOpens() {
        const std::string dir = std::string(TESSEL_REPO_DATA_DIR) + "/gpu/h100-2026-11-25";
        QVERIFY(window_->openMeasuredRunWithSiblings(
            QString::fromStdString(dir + "/holdout/run-h1536-d128-mb4/trace.json")));
        QCOMPARE(window_->session()->scenario().cluster.name, std::string("h100-single-calibrated"));
        std::ifstream in(dir + "/holdout-results.json");
        const nlohmann::json results = nlohmann::json::parse(in);
        const double want = results["plans"]["h1536-d128-mb4"]["step_error"].get<double>();
        QVERIFY(std::abs(window_->measuredModel()->comparison().stepError() - want) < 1e-3);
        window_->clearMeasuredRun();
    }

    // The cluster box's power field: a Hopper preset's measured share curve moves to the limit set there (FORMULAS.md
    // §3.3), its own limit being no cap; a GPU whose share is a fitted constant shows n/a and cannot be set.
    void aPowerLimitMovesTheMeasuredCurve() {
        auto* power = window_->scenarioPanel()->findChild<QSpinBox*>(QStringLiteral("powerLimit"));
        QVERIFY(power);
        QVERIFY(window_->openScenarioFile(QStringLiteral("gpt3-175b-megatron")));   // A100: the fitted share
        QVERIFY(!power->isEnabled());
        QCOMPARE(power->text(), QStringLiteral("n/a"));
        window_->setScenario(llamaScenario());   // 8 H100 with the curve measured at 700 W
        QVERIFY(power->isEnabled());
        QCOMPARE(power->value(), 700);
        QVERIFY(window_->session()->evaluation().ok());
        const double at700 = window_->session()->evaluation().simulation->metrics.stepSeconds;
        power->setValue(500);
        QCOMPARE(window_->session()->scenario().cluster.gpu.powerLimitWatts, 500.0);
        QVERIFY(window_->session()->evaluation().ok());
        QVERIFY(window_->session()->evaluation().simulation->metrics.stepSeconds > 1.05 * at700);
        power->setValue(700);
        QCOMPARE(window_->session()->scenario().cluster.gpu.powerLimitWatts, 0.0);
        // An edit of a cluster field keeps the cluster's own GPU figures, not another preset's of the same GPU name.
        QVERIFY(window_->session()->scenario().cluster.gpu.kernelOverheadSeconds == llamaScenario().cluster.gpu.kernelOverheadSeconds);
        // Picking a GPU type takes it from the first preset that names it, never a calibrated one: away to the A100
        // and back, the H100 is dgx-h100-80g's (h100-single-calibrated names the same GPU with its executor's figures).
        auto* gpuType = window_->scenarioPanel()->findChild<QComboBox*>(QStringLiteral("gpuType"));
        QVERIFY(gpuType);
        const QString h100 = gpuType->currentText();
        for (const QString& pick : {QStringLiteral("NVIDIA A100-SXM4-80GB"), h100}) {
            const int i = gpuType->findText(pick);
            QVERIFY(i >= 0);
            gpuType->setCurrentIndex(i);
            emit gpuType->activated(i);
        }
        const GpuSpec& back = window_->session()->scenario().cluster.gpu;
        QCOMPARE(QString::fromStdString(back.name), h100);
        QVERIFY(back.phaseFits.empty());   // the calibrated preset's GPU carries its executor's phase fits
        QVERIFY(back.sustainedSharePower.has_value());
        QVERIFY(std::abs(window_->session()->evaluation().simulation->metrics.stepSeconds - at700) < 1e-9 * at700);
    }

    void cleanupTestCase() { window_.reset(); }
};

std::unique_ptr<QObject> makeWindowTest() { return std::make_unique<WindowTest>(); }

} // namespace tessel::gui::test

#include "window_test.moc"
