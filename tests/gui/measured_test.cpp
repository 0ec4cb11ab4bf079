// MeasuredRun against a run made in the test: the predicted Chrome trace with every time scaled by 1.1
// must read as +10% on every action and on the step, matched action by action.
#include "gui_test_support.hpp"

#include "core/measured_model.hpp"
#include "core/measured_run.hpp"

#include "tessel/sim/import.hpp"
#include "tessel/sim/trace.hpp"

#include <QAbstractItemModelTester>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>
#include <sstream>

namespace tessel::gui::test {

namespace {
sim::PlanSimulation gpt3Simulation() {
    const Scenario s = defaultScenario();
    return sim::simulatePlan(s.model, s.cluster, s.plan);
}

// The predicted trace as a run would write it, every timestamp and duration stretched by `factor`.
nlohmann::json scaledTrace(const sim::PlanSimulation& sim, double factor, const sim::TraceOptions& options = {}) {
    nlohmann::json trace = sim::chromeTrace(sim, options);
    for (auto& ev : trace["traceEvents"]) {
        if (ev.value("ph", "") != "X") continue;
        ev["ts"] = ev["ts"].get<double>() * factor;
        ev["dur"] = ev["dur"].get<double>() * factor;
    }
    trace["otherData"].erase("step_seconds");   // the run's own step comes from its events
    trace["otherData"]["source"] = "test run";
    return trace;
}
} // namespace

class MeasuredTest : public QObject {
    Q_OBJECT
private slots:
    void aRunTenPercentSlowerReadsPlusTenPercent() {
        const auto sim = gpt3Simulation();
        const MeasuredRun run = MeasuredRun::fromTrace(scaledTrace(sim, 1.1));
        QCOMPARE(run.skippedEvents(), 0);
        QVERIFY(run.planJson().has_value());
        const MeasuredComparison c = compareWithPrediction(run, sim);
        QCOMPARE(c.unmatchedMeasured, 0);
        QCOMPARE(c.unmatchedPredicted, 0);
        QCOMPARE(c.actions.size(), sim.schedule.actionCount());
        for (const auto& a : c.actions) {
            if (a.predictedSeconds <= 0.0) continue;
            QVERIFY2(std::abs(a.error() - 0.1) < 1e-6, a.name.c_str());
            QCOMPARE(a.ranks, 1);
        }
        QVERIFY(std::abs(c.stepError() - 0.1) < 1e-6);
        QVERIFY(std::abs(c.meanAbsoluteError() - 0.1) < 1e-6);
        // The measured lane: every compute action of every stage, at its measured (stretched) time.
        size_t compute = 0;
        for (const auto& st : sim.schedule.stages)
            for (const auto& a : st.actions) compute += sim::isCompute(a.kind) ? 1 : 0;
        QCOMPARE(c.measuredLane.size(), compute);
        for (const auto& it : c.measuredLane) {
            const auto& t = sim.timeline.perAction[static_cast<size_t>(it.stage)][static_cast<size_t>(it.index)];
            QVERIFY(std::abs(it.startSeconds - t.startSeconds * 1.1) < 1e-9);
        }
    }

    void ranksOfOneStageAreAveraged() {
        const auto sim = gpt3Simulation();
        // Two ranks of stage 0 (tp 0 and tp 1: ranks 0 and 1), one 1.1x and one 1.3x slower: the mean is 1.2x.
        nlohmann::json a = scaledTrace(sim, 1.1, {{0}});
        nlohmann::json b = scaledTrace(sim, 1.3, {{1}});
        for (auto& ev : b["traceEvents"]) a["traceEvents"].push_back(ev);
        const MeasuredComparison c = compareWithPrediction(MeasuredRun::fromTrace(a), sim);
        QVERIFY(!c.actions.empty());
        for (const auto& x : c.actions) {
            QCOMPARE(x.stage, 0);
            QCOMPARE(x.ranks, 2);
            if (x.predictedSeconds > 0.0) QVERIFY(std::abs(x.error() - 0.2) < 1e-6);
        }
        // Stages nobody measured are counted, not invented.
        QVERIFY(c.unmatchedPredicted > 0);
    }

    void missingAndExtraEventsAreCounted() {
        const auto sim = gpt3Simulation();
        nlohmann::json trace = scaledTrace(sim, 1.0);
        auto& events = trace["traceEvents"];
        int dropped = 0;
        nlohmann::json kept = nlohmann::json::array();
        for (auto& ev : events) {
            if (ev.value("ph", "") == "X" && ev["name"] == "forward" && ev["args"]["stage"] == 2 && dropped < 3) {
                ++dropped;
                continue;
            }
            kept.push_back(ev);
        }
        kept.push_back({{"ph", "X"}, {"name", "mystery_kernel"}, {"pid", 0}, {"tid", 0}, {"ts", 1.0}, {"dur", 2.0}, {"args", {{"stage", 0}}}});
        kept.push_back({{"ph", "X"}, {"name", "no_stage"}, {"pid", 0}, {"tid", 0}, {"ts", 1.0}, {"dur", 2.0}});
        trace["traceEvents"] = kept;
        const MeasuredRun run = MeasuredRun::fromTrace(trace);
        QCOMPARE(run.skippedEvents(), 1);
        const MeasuredComparison c = compareWithPrediction(run, sim);
        QCOMPARE(c.unmatchedPredicted, 3);
        QCOMPARE(c.unmatchedMeasured, 1);
    }

    void severalStepsLeaveTheWarmUpOut() {
        const auto sim = gpt3Simulation();
        // Step 0 runs 2x slower (allocation, warm-up), steps 1 and 2 run 1.1x: the comparison says +10%.
        nlohmann::json trace = scaledTrace(sim, 2.0);
        for (auto& ev : trace["traceEvents"])
            if (ev.value("ph", "") == "X") ev["args"]["step"] = 0;
        double offset = 2.0 * sim.metrics.stepSeconds * 1e6;
        for (int step = 1; step <= 2; ++step) {
            nlohmann::json next = scaledTrace(sim, 1.1);
            for (auto& ev : next["traceEvents"]) {
                if (ev.value("ph", "") != "X") continue;
                ev["args"]["step"] = step;
                ev["ts"] = ev["ts"].get<double>() + offset;
                trace["traceEvents"].push_back(ev);
            }
            offset += 1.1 * sim.metrics.stepSeconds * 1e6;
        }
        const MeasuredRun run = MeasuredRun::fromTrace(trace);
        QCOMPARE(run.comparedSteps(), (std::vector<int>{1, 2}));
        QVERIFY(std::abs(run.stepSeconds() / sim.metrics.stepSeconds - 1.1) < 1e-6);
        const MeasuredComparison c = compareWithPrediction(run, sim);
        QCOMPARE(c.unmatchedMeasured, 0);
        QCOMPARE(c.unmatchedPredicted, 0);
        for (const auto& a : c.actions) {
            QCOMPARE(a.ranks, 1);
            if (a.predictedSeconds > 0.0) QVERIFY(std::abs(a.error() - 0.1) < 1e-6);
        }
        // The measured lane shows the last step from its own start.
        double earliest = 1e300;
        for (const auto& it : c.measuredLane) earliest = std::min(earliest, it.startSeconds);
        QVERIFY(std::abs(earliest) < 1e-9);
    }

    void memoryFileShapes() {
        const auto sim = gpt3Simulation();
        MeasuredRun run = MeasuredRun::fromTrace(scaledTrace(sim, 1.0));
        // As `tessel predict --json` writes it, 5% above the prediction.
        nlohmann::json stages = nlohmann::json::array();
        for (const auto& s : sim.memory.stages) stages.push_back({{"stage", s.stage}, {"total_bytes", s.totalBytes() * 1.05}});
        run.setMemory({{"memory", {{"stages", stages}}}});
        MeasuredComparison c = compareWithPrediction(run, sim);
        QCOMPARE(c.memory.size(), sim.memory.stages.size());
        for (const auto& m : c.memory) QVERIFY(std::abs(*m.error() - 0.05) < 1e-9);
        // Per rank: the hungriest rank of a stage counts.
        run.setMemory({{"ranks", {{{"rank", 0}, {"stage", 0}, {"peak_bytes", 1e9}}, {{"rank", 1}, {"stage", 0}, {"peak_bytes", 3e9}}}}});
        c = compareWithPrediction(run, sim);
        QCOMPARE(*c.memory[0].measuredBytes, 3e9);
        QVERIFY(!c.memory[1].measuredBytes.has_value());
        // As the executor's run folder has it: peak_bytes per category, peak_total_bytes the total.
        nlohmann::json rank0{{"rank", 0}, {"stage", 0}, {"peak_bytes", {{"weights_bytes", 1e9}}}, {"peak_total_bytes", 4e9}};
        run.setMemory({{"schema_version", 1}, {"ranks", nlohmann::json::array({rank0})}});
        c = compareWithPrediction(run, sim);
        QCOMPARE(*c.memory[0].measuredBytes, 4e9);
        QVERIFY_THROWS_EXCEPTION(InputError, run.setMemory({{"stages", {{{"stage", 0}}}}}));
        QVERIFY_THROWS_EXCEPTION(InputError, run.setMemory(nlohmann::json::array()));
    }

    void notATraceIsAnInputError() {
        QVERIFY_THROWS_EXCEPTION(InputError, MeasuredRun::fromTrace(nlohmann::json{{"foo", 1}}));
        QVERIFY_THROWS_EXCEPTION(InputError, MeasuredRun::fromTrace(nlohmann::json{{"traceEvents", nlohmann::json::array()}}));
        QTemporaryDir dir;
        const QString bad = dir.filePath(QStringLiteral("bad.json"));
        std::ofstream(bad.toStdString()) << "{not json";
        QVERIFY_THROWS_EXCEPTION(InputError, MeasuredRun::load(bad));
        QVERIFY_THROWS_EXCEPTION(InputError, MeasuredRun::load(dir.filePath(QStringLiteral("missing.json"))));
    }

    void loadReadsTraceAndMemoryFiles() {
        const auto sim = gpt3Simulation();
        QTemporaryDir dir;
        const QString trace = dir.filePath(QStringLiteral("trace.json"));
        const QString memory = dir.filePath(QStringLiteral("memory.json"));
        std::ofstream(trace.toStdString()) << scaledTrace(sim, 1.2).dump();
        std::ofstream(memory.toStdString()) << nlohmann::json{{"stages", {{{"stage", 3}, {"peak_bytes", 5e10}}}}}.dump();
        const MeasuredRun run = MeasuredRun::load(trace, memory);
        QCOMPARE(run.stagePeakBytes().at(3), 5e10);
        QVERIFY(std::abs(compareWithPrediction(run, sim).stepError() - 0.2) < 1e-6);
    }

    // A folder `tessel import megatron` writes opens as any run: the step from otherData, memory per stage, no actions.
    void anImportedMegatronRunOpens() {
        const std::string log = std::string(TESSEL_TEST_DATA_DIR) + "/megatron/gpt2-124m-1gpu-fp16.log";
        std::ifstream in(log);
        std::stringstream text;
        text << in.rdbuf();
        const sim::ImportedRun imported =
            sim::importMegatronLog(sim::parseMegatronLog(text.str(), log), loadClusterRef("dgx-a100-80g", "cluster"));
        QTemporaryDir dir;
        std::ofstream(dir.filePath("trace.json").toStdString()) << imported.trace.dump();
        std::ofstream(dir.filePath("memory.json").toStdString()) << imported.memory.dump();
        const MeasuredRun run = MeasuredRun::load(dir.filePath("trace.json"), dir.filePath("memory.json"));
        QVERIFY(run.events().empty());
        QVERIFY(std::abs(run.stepSeconds() - 0.8498) < 1e-9);
        const Scenario s = parseScenario(imported.scenario, "imported");
        const auto sim = sim::simulatePlan(s.model, s.cluster, s.plan);
        const MeasuredComparison c = compareWithPrediction(run, sim);
        QVERIFY(c.actions.empty());
        QCOMPARE(c.unmatchedMeasured, 0);
        QVERIFY(std::abs(c.measuredStepSeconds - 0.8498) < 1e-9);
        QVERIFY(std::abs(c.stepError() - (0.8498 / c.predictedStepSeconds - 1.0)) < 1e-9);
        QCOMPARE(c.memory.size(), size_t{1});
        QVERIFY(c.memory[0].measuredBytes.has_value());
        QVERIFY(std::abs(*c.memory[0].measuredBytes - 1464.3408203125 * 1024 * 1024) < 1.0);
    }

    void measuredModelPassesTheTester() {
        const auto sim = gpt3Simulation();
        MeasuredModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const MeasuredComparison c = compareWithPrediction(MeasuredRun::fromTrace(scaledTrace(sim, 1.1)), sim);
        model.setComparison(c);
        QCOMPARE(model.rowCount(), static_cast<int>(c.actions.size()));
        QCOMPARE(model.data(model.index(0, MeasuredModel::Error)).toString(), QStringLiteral("+10.0%"));
        QCOMPARE(model.data(model.index(0, MeasuredModel::Predicted), MeasuredModel::SortRole).toDouble(), c.actions[0].predictedSeconds);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }
};

std::unique_ptr<QObject> makeMeasuredTest() { return std::make_unique<MeasuredTest>(); }

} // namespace tessel::gui::test

#include "measured_test.moc"
