// Selecting a plan and turning its knobs: the chart data must equal the cost model's and the simulator's
// numbers, invalid knobs become problems (never crashes), pinned plans feed the compare view.
#include "gui_test_support.hpp"

#include "core/breakdown_data.hpp"
#include "core/gpu_types.hpp"
#include "core/memory_chart_data.hpp"
#include "core/plan_session.hpp"

#include "tessel/cost/memory.hpp"

#include <QSignalSpy>
#include <QTest>

namespace tessel::gui::test {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The chart's numbers against predictMemory's, component by component and stage by stage.
void checkMemoryChart(const MemoryChartData& d, const MemoryReport& m) {
    QCOMPARE(d.stages.size(), m.stages.size());
    QCOMPARE(d.capacityGib, m.capacityBytes / kGiB);
    QCOMPARE(d.fits, m.fits);
    QCOMPARE(d.peakStage, m.peakStage);
    for (size_t i = 0; i < m.stages.size(); ++i) {
        const StageMemory& s = m.stages[i];
        const MemoryStageBar& b = d.stages[i];
        QCOMPARE(b.stage, s.stage);
        QCOMPARE(b.gib[0], s.weightsBytes / kGiB);
        QCOMPARE(b.gib[1], s.gradsBytes / kGiB);
        QCOMPARE(b.gib[2], s.optimizerBytes / kGiB);
        QCOMPARE(b.gib[3], s.activationsBytes / kGiB);
        QCOMPARE(b.gib[4], s.otherBytes() / kGiB);
        QCOMPARE(b.totalGib, s.totalBytes() / kGiB);
        QCOMPARE(b.fits, s.fits);
        QCOMPARE(b.headroomGib, s.headroomBytes / kGiB);
    }
    // The axis covers every bar and the capacity line.
    QVERIFY(d.axis.maxValue >= d.capacityGib);
    for (const auto& b : d.stages) QVERIFY(d.axis.maxValue >= b.totalGib);
}

void checkBreakdown(const BreakdownData& d, const sim::PlanSimulation& s) {
    QCOMPARE(d.stepSeconds, s.metrics.stepSeconds);
    QCOMPARE(d.mfu, s.metrics.mfu);
    QCOMPARE(d.bubbleFraction, s.metrics.bubbleFraction);
    QCOMPARE(d.tokensPerSecond, s.metrics.tokensPerSecond);
    QCOMPARE(d.stages.size(), s.timeline.perStage.size());
    for (size_t i = 0; i < d.stages.size(); ++i) {
        const sim::StepBreakdown& b = s.timeline.perStage[i];
        const auto& r = d.stages[i];
        QCOMPARE(r.seconds[0], b.computeSeconds);
        QCOMPARE(r.seconds[1], b.tpSeconds);
        QCOMPARE(r.seconds[2], b.cpSeconds);
        QCOMPARE(r.seconds[3], b.epSeconds);
        QCOMPARE(r.seconds[4], b.ppSeconds);
        QCOMPARE(r.seconds[5], b.dpSeconds);
        QCOMPARE(r.seconds[6], b.optimizerSeconds);
        QCOMPARE(r.seconds[7], b.bubbleSeconds);
        QCOMPARE(r.totalSeconds, b.total());
        QCOMPARE(r.bottleneck, static_cast<int>(i) == s.metrics.bottleneckStage);
        // The parts add up to the step on every stage (the simulator's invariant, visible in the chart).
        QVERIFY(std::abs(r.totalSeconds - s.metrics.stepSeconds) <= 1e-9 * s.metrics.stepSeconds);
    }
    QCOMPARE(d.bottleneck.seconds[0], s.metrics.breakdown.computeSeconds);
    QCOMPARE(d.bottleneck.seconds[7], s.metrics.breakdown.bubbleSeconds);
}
} // namespace

class SessionTest : public QObject {
    Q_OBJECT
private slots:
    void selectingASearchedPlanGivesTheSimulatorsNumbers() {
        PlanSession session;
        const Scenario s = llamaScenario();
        session.setScenario(s);
        const auto& top = smallSearchResult().top;
        for (size_t i = 0; i < std::min<size_t>(top.size(), 4); ++i) {
            session.selectPlan(top[i].plan);
            QVERIFY(session.evaluation().ok());
            const auto& sim = *session.evaluation().simulation;
            const MemoryReport expected = predictMemory(s.model, s.cluster, top[i].plan);
            checkMemoryChart(MemoryChartData::fromReport(sim.memory), expected);
            QCOMPARE(expected.peakBytes, top[i].peakBytes);
            const sim::PlanSimulation direct = sim::simulatePlan(s.model, s.cluster, top[i].plan);
            checkBreakdown(BreakdownData::fromSimulation(sim), direct);
            QCOMPARE(sim.metrics.stepSeconds, top[i].metrics.stepSeconds);
        }
    }

    void aVoltaClusterRunsThePlanInFp16() {
        // The V100 has no bf16: picking its preset makes the session's plans compute in fp16, and they evaluate.
        PlanSession session;
        Scenario s = llamaScenario();
        session.setScenario(s);
        ClusterConfig v100 = loadClusterRef("dgx2-v100", "test");
        v100.nodes = std::max(1, s.cluster.totalGpus() / v100.gpusPerNode);
        v100.gpusPerNode = s.cluster.totalGpus() / v100.nodes;
        session.setCluster(v100);
        QCOMPARE(halfDtypeOf(session.currentPlan().framework), std::string("fp16"));
        QCOMPARE(halfDtypeOf(session.scenario().plan.framework), std::string("fp16"));
        QVERIFY(session.evaluation().ok());
    }

    void gpt3OomPlanIsRedOnTheRightStages() {
        PlanSession session;
        Scenario s = defaultScenario();
        s.plan.zeroStage = 0;
        s.plan.recompute = Recompute::None;
        s.plan.microBatch = 4;
        session.setScenario(s);
        QVERIFY(session.evaluation().ok());
        const MemoryReport expected = predictMemory(s.model, s.cluster, s.plan);
        const MemoryChartData d = MemoryChartData::fromReport(session.evaluation().simulation->memory);
        checkMemoryChart(d, expected);
        QVERIFY(!d.fits);
        int oom = 0;
        for (const auto& st : expected.stages) oom += st.fits ? 0 : 1;
        QVERIFY(oom > 0);
        QCOMPARE(d.oomStageCount(), oom);
    }

    void knobsReevaluateAtOnce() {
        PlanSession session;
        Scenario s = defaultScenario();
        session.setScenario(s);
        QSignalSpy changed(&session, &PlanSession::evaluationChanged);
        session.setMicroBatch(2);
        QCOMPARE(changed.count(), 1);
        Plan expectedPlan = s.plan;
        expectedPlan.microBatch = 2;
        QVERIFY(session.evaluation().ok());
        QVERIFY(session.isEdited());
        checkMemoryChart(MemoryChartData::fromReport(session.evaluation().simulation->memory),
                         predictMemory(s.model, s.cluster, expectedPlan));
        checkBreakdown(BreakdownData::fromSimulation(*session.evaluation().simulation),
                       sim::simulatePlan(s.model, s.cluster, expectedPlan));

        session.setRecompute(Recompute::Full);
        expectedPlan.recompute = Recompute::Full;
        session.setZeroStage(1);
        expectedPlan.zeroStage = 1;
        QVERIFY(session.evaluation().ok());
        QCOMPARE(session.evaluation().simulation->memory.peakBytes, predictMemory(s.model, s.cluster, expectedPlan).peakBytes);
        // Partial recompute: 4 of each stage's 12 layers; back to every layer, and away from full clears it.
        session.setRecomputeLayers(4);
        Plan partial = expectedPlan;
        partial.recomputeLayers = 4;
        QVERIFY(session.evaluation().ok());
        QCOMPARE(session.evaluation().simulation->memory.peakBytes, predictMemory(s.model, s.cluster, partial).peakBytes);
        QCOMPARE(session.evaluation().simulation->metrics.stepSeconds, sim::simulatePlan(s.model, s.cluster, partial).metrics.stepSeconds);
        session.setRecompute(Recompute::Selective);
        QCOMPARE(session.currentPlan().recomputeLayers, 0);
        session.setRecompute(Recompute::Full);
        QCOMPARE(session.currentPlan().recomputeLayers, 0);
        // Selective recompute of named modules (the MLP here): set aside while full is chosen, so the plan stays
        // valid, and back with selective.
        {
            Plan modules = session.currentPlan();
            modules.recompute = Recompute::Selective;
            modules.recomputeModules = recompute_module::Mlp;
            session.setPlan(modules);
            QVERIFY(session.evaluation().ok());
            session.setRecompute(Recompute::Full);
            QVERIFY(session.evaluation().ok());
            QCOMPARE(session.currentPlan().recomputeModules, recompute_module::Default);
            session.setRecompute(Recompute::Selective);
            QCOMPARE(session.currentPlan().recomputeModules, recompute_module::Mlp);
            QVERIFY(session.evaluation().ok());
            session.setRecompute(Recompute::Full);
        }
        // Hybrid sharding: two replicas of the sharded optimizer state hold twice the state per GPU.
        session.setZeroReplicas(2);
        expectedPlan.zeroReplicas = 2;
        QVERIFY(session.evaluation().ok());
        QCOMPARE(session.evaluation().simulation->memory.peakBytes, predictMemory(s.model, s.cluster, expectedPlan).peakBytes);
        QCOMPARE(session.evaluation().simulation->metrics.stepSeconds, sim::simulatePlan(s.model, s.cluster, expectedPlan).metrics.stepSeconds);
        session.setZeroReplicas(1);
        expectedPlan.zeroReplicas = 1;

        // Interleaving needs vpp >= 2: the schedule knob brings vpp along; back to 1f1b resets it.
        session.setSchedule(Schedule::Interleaved1F1B);
        QCOMPARE(session.currentPlan().vpp, 2);
        QVERIFY2(session.evaluation().ok(), qPrintable(QString::number(session.evaluation().problems.size())));
        session.setVpp(4);
        QVERIFY(session.evaluation().ok());
        QCOMPARE(session.evaluation().simulation->schedule.plan.vpp, 4);
        // DualPipeV runs two chunks a rank in a V: the knob sets vpp 2.
        session.setSchedule(Schedule::DualPipeV);
        QCOMPARE(session.currentPlan().vpp, 2);
        QVERIFY(session.evaluation().ok());
        session.setSchedule(Schedule::ZeroBubbleV);
        QCOMPARE(session.currentPlan().vpp, 2);
        QVERIFY(session.evaluation().ok());
        session.setSchedule(Schedule::OneFOneB);
        QCOMPARE(session.currentPlan().vpp, 1);

        session.resetKnobs();
        QVERIFY(!session.isEdited());
        QCOMPARE(session.evaluation().simulation->metrics.stepSeconds, sim::simulatePlan(s.model, s.cluster, s.plan).metrics.stepSeconds);
    }

    void theLossKnobMovesTheLastStagesLogits() {
        PlanSession session;
        const Scenario s = llamaScenario();
        session.setScenario(s);
        // tp 2: Liger's fused linear loss runs the whole output layer on each rank, so the plan is refused at its field.
        session.setCrossEntropy(std::string("fused_linear"));
        QVERIFY(!session.evaluation().ok());
        QCOMPARE(session.evaluation().problems.front().where, std::string("/plan/cross_entropy"));
        // At tp 1 (data parallel 8, full recompute) it runs: the last stage keeps no logits, as predictMemory has it.
        Plan p = session.currentPlan();
        p.tp = 1;
        p.dp = 8;
        p.sequenceParallel = false;
        p.recompute = Recompute::Full;
        session.setPlan(p);
        QVERIFY(session.evaluation().ok());
        const double liger = session.evaluation().simulation->memory.stages.back().other.logitsLossBytes;
        QCOMPARE(liger, predictMemory(s.model, s.cluster, p).stages.back().other.logitsLossBytes);
        // Back to the framework's kernel: the logits' bytes are back.
        session.setCrossEntropy(std::nullopt);
        QVERIFY(session.evaluation().ok());
        QVERIFY(!session.currentPlan().framework.crossEntropy);
        Plan unstated = p;
        unstated.framework.crossEntropy.reset();
        const double fused = session.evaluation().simulation->memory.stages.back().other.logitsLossBytes;
        QCOMPARE(fused, predictMemory(s.model, s.cluster, unstated).stages.back().other.logitsLossBytes);
        QVERIFY(fused > 4.0 * liger); // Megatron-core's fp32 softmax beside the bf16 logits, 6 B a logit
        QVERIFY(session.evaluation().simulation->memory.peakBytes > predictMemory(s.model, s.cluster, p).peakBytes);
    }

    void invalidKnobsBecomeProblemsNotCrashes() {
        PlanSession session;
        session.setScenario(defaultScenario());
        session.setMicroBatch(7);   // 1536 / (7 x 16) is not whole
        QVERIFY(!session.evaluation().ok());
        QVERIFY(!session.evaluation().problems.empty());
        session.setMicroBatch(1);
        session.setVpp(5);          // vpp without interleaving, and 96 layers / (8 x 5) is not whole
        QVERIFY(!session.evaluation().ok());
        QVERIFY(session.evaluation().problems.size() >= 1);
        session.setVpp(1);
        QVERIFY(session.evaluation().ok());
        // A model edit that breaks the plan (heads not divisible by tp) is a problem too.
        ModelConfig m = session.scenario().model;
        m.heads = 90;
        m.kvHeads = 90;
        session.setModel(m);
        QVERIFY(!session.evaluation().ok());
        bool namesTp = false;
        for (const auto& p : session.evaluation().problems) namesTp = namesTp || p.where.find("tp") != std::string::npos || p.message.find("tp") != std::string::npos;
        QVERIFY(namesTp);
    }

    // The cluster box's GPU types: the first preset naming a GPU gives it, a calibrated preset never does (its GPU
    // predicts tessel's own executor), whatever the order.
    void gpuTypesComeFromTheFirstUncalibratedPreset() {
        ClusterConfig first, calibrated, later;
        first.gpu.name = calibrated.gpu.name = later.gpu.name = "H100";
        first.gpu.kernelOverheadSeconds = 1e-6;
        calibrated.gpu.kernelOverheadSeconds = 2e-6;
        calibrated.calibration = nlohmann::json::object();
        later.gpu.kernelOverheadSeconds = 3e-6;
        ClusterConfig other;
        other.gpu.name = "A100";
        for (const auto& order : {std::vector<ClusterConfig>{calibrated, first, later, other},
                                  std::vector<ClusterConfig>{first, calibrated, later, other}}) {
            const auto types = gpuTypesFromPresets(order);
            QCOMPARE(types.size(), size_t(2));
            QCOMPARE(types.at(QStringLiteral("H100")).kernelOverheadSeconds, 1e-6);
        }
        QVERIFY(gpuTypesFromPresets({calibrated}).empty());
    }

    void pinnedPlansKeepTheirNumbers() {
        PlanSession session;
        session.setScenario(defaultScenario());
        QVERIFY(session.pin(0));
        const double stepA = session.evaluation().simulation->metrics.stepSeconds;
        session.setMicroBatch(2);
        QVERIFY(session.pin(1));
        QCOMPARE(session.pinned(0)->metrics.stepSeconds, stepA);
        QCOMPARE(session.pinned(1)->metrics.stepSeconds, session.evaluation().simulation->metrics.stepSeconds);
        QVERIFY(session.pinned(0)->plan.microBatch != session.pinned(1)->plan.microBatch);
        session.setMicroBatch(7);
        QVERIFY(!session.pin(0));   // an invalid plan cannot be pinned; A stays
        QCOMPARE(session.pinned(0)->metrics.stepSeconds, stepA);
        session.unpin(1);
        QVERIFY(!session.pinned(1).has_value());
    }
};

std::unique_ptr<QObject> makeSessionTest() { return std::make_unique<SessionTest>(); }

} // namespace tessel::gui::test

#include "session_test.moc"
