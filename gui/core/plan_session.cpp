// The plan the user is looking at, re-validated and re-simulated whenever a knob turns.
#include "core/plan_session.hpp"

#include "core/format.hpp"

#include <exception>

namespace tessel::gui {

PlanEvaluation evaluatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    PlanEvaluation e;
    e.plan = plan;
    ProblemList problems;
    validatePlan(model, cluster, plan, "/plan", problems);
    if (!problems.empty()) {
        e.problems = problems.items();
        return e;
    }
    try {
        e.simulation = sim::simulatePlan(model, cluster, plan);
    } catch (const InputError& err) {
        e.problems = err.problems();
    } catch (const std::exception& err) {
        // A schedule that would deadlock or a cost the model cannot give: shown, never fatal.
        e.error = QString::fromUtf8(err.what());
    }
    return e;
}

PlanSession::PlanSession(QObject* parent) : QObject(parent) {}

void PlanSession::setScenario(const Scenario& scenario) {
    scenario_ = scenario;
    base_ = scenario.plan;
    selectiveModules_ = recompute_module::Default;
    evaluation_.plan = scenario.plan;
    emit scenarioChanged();
    reevaluate();
}

void PlanSession::setModel(const ModelConfig& model) {
    scenario_.model = model;
    emit scenarioChanged();
    reevaluate();
}

void PlanSession::setCluster(const ClusterConfig& cluster) {
    scenario_.cluster = cluster;
    // The 16-bit type follows the GPU where it must: Volta has fp16 tensor cores and no bf16, so a plan picked from
    // a preset runs fp16 there (the same bytes; framework half_dtype). A GPU with both keeps the plan's choice.
    const auto& peaks = cluster.gpu.peakFlopsPerSecond;
    if (!peaks.count(Dtype::Bf16) && peaks.count(Dtype::Fp16))
        for (Plan* p : {&scenario_.plan, &base_, &evaluation_.plan}) p->framework.halfDtype = "fp16";
    emit scenarioChanged();
    reevaluate();
}

void PlanSession::setGlobalBatch(int globalBatch) {
    scenario_.plan.globalBatch = globalBatch;
    base_.globalBatch = globalBatch;
    evaluation_.plan.globalBatch = globalBatch;
    emit scenarioChanged();
    reevaluate();
}

void PlanSession::selectPlan(const Plan& plan) {
    base_ = plan;
    selectiveModules_ = recompute_module::Default;
    evaluation_.plan = plan;
    reevaluate();
}

bool PlanSession::isEdited() const { return planToJson(base_) != planToJson(evaluation_.plan); }

void PlanSession::resetKnobs() { setPlan(base_); }

void PlanSession::setPlan(const Plan& plan) {
    evaluation_.plan = plan;
    reevaluate();
}

void PlanSession::setMicroBatch(int microBatch) {
    Plan p = evaluation_.plan;
    p.microBatch = microBatch;
    setPlan(p);
}

void PlanSession::setRecompute(Recompute recompute) {
    Plan p = evaluation_.plan;
    // The plan's recompute modules name what selective recompute reruns: kept aside while another is chosen, and
    // back when selective is.
    if (p.recompute == Recompute::Selective && recompute != Recompute::Selective) {
        selectiveModules_ = p.recomputeModules;
        p.recomputeModules = recompute_module::Default;
    } else if (p.recompute != Recompute::Selective && recompute == Recompute::Selective) {
        p.recomputeModules = selectiveModules_;
    }
    p.recompute = recompute;
    if (recompute != Recompute::Full) p.recomputeLayers = 0; // partial recompute is a form of full recompute
    setPlan(p);
}

void PlanSession::setRecomputeLayers(int layers) {
    Plan p = evaluation_.plan;
    p.recomputeLayers = layers;
    setPlan(p);
}

void PlanSession::setZeroStage(int zeroStage) {
    Plan p = evaluation_.plan;
    p.zeroStage = zeroStage;
    setPlan(p);
}

void PlanSession::setZeroReplicas(int replicas) {
    Plan p = evaluation_.plan;
    p.zeroReplicas = replicas;
    setPlan(p);
}

void PlanSession::setVpp(int vpp) {
    Plan p = evaluation_.plan;
    p.vpp = vpp;
    setPlan(p);
}

void PlanSession::setSchedule(Schedule schedule) {
    Plan p = evaluation_.plan;
    p.schedule = schedule;
    if (schedule == Schedule::Interleaved1F1B && p.vpp < 2) p.vpp = 2;
    if (schedule == Schedule::DualPipeV || schedule == Schedule::ZeroBubbleV) p.vpp = 2; // their V: two chunks a rank
    else if (schedule != Schedule::Interleaved1F1B) p.vpp = 1;
    setPlan(p);
}

void PlanSession::setCrossEntropy(const std::optional<std::string>& kind) {
    Plan p = evaluation_.plan;
    p.framework.crossEntropy = kind;
    setPlan(p);
}

void PlanSession::setFp8Recipe(const std::optional<std::string>& recipe) {
    Plan p = evaluation_.plan;
    p.framework.fp8Recipe = recipe;
    setPlan(p);
}

void PlanSession::setRecomputeModules(uint8_t modules) {
    if (evaluation_.plan.recompute != Recompute::Selective) {
        selectiveModules_ = modules;
        return;
    }
    Plan p = evaluation_.plan;
    p.recomputeModules = modules;
    setPlan(p);
}

Scenario PlanSession::currentScenario() const {
    Scenario s = scenario_;
    s.plan = evaluation_.plan;
    return s;
}

bool PlanSession::pin(int slot) {
    if (slot < 0 || slot > 1 || !evaluation_.ok()) return false;
    PinnedPlan p;
    p.label = planSummary(evaluation_.plan);
    p.plan = evaluation_.plan;
    p.metrics = evaluation_.simulation->metrics;
    p.memory = evaluation_.simulation->memory;
    pinned_[static_cast<size_t>(slot)] = std::move(p);
    emit pinnedChanged();
    return true;
}

void PlanSession::unpin(int slot) {
    if (slot < 0 || slot > 1) return;
    pinned_[static_cast<size_t>(slot)].reset();
    emit pinnedChanged();
}

void PlanSession::reevaluate() {
    evaluation_ = evaluatePlan(scenario_.model, scenario_.cluster, evaluation_.plan);
    emit evaluationChanged();
}

} // namespace tessel::gui
