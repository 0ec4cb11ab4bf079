// The plan the user is looking at: the scenario (model, cluster), the selected plan with the knobs the user
// turned, and its validation problems or its simulation; plus the two plans pinned for comparison.
#pragma once

#include "tessel/cost/scenario.hpp"
#include "tessel/sim/simulate.hpp"

#include <QObject>
#include <QString>

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace tessel::gui {

// A plan checked (validatePlan) and, if valid, simulated (simulatePlan). Never throws: problems and
// runtime errors become data the window shows inline.
struct PlanEvaluation {
    Plan plan;
    std::vector<Problem> problems;             // validatePlan's; non-empty means not simulated
    QString error;                             // a RuntimeError/InputError from the simulator
    std::optional<sim::PlanSimulation> simulation;
    bool ok() const { return simulation.has_value(); }
};
PlanEvaluation evaluatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);

// A plan kept for comparison: its knobs and the numbers the compare view shows.
struct PinnedPlan {
    QString label;
    Plan plan;
    sim::StepMetrics metrics;
    MemoryReport memory;
};

class PlanSession : public QObject {
    Q_OBJECT
public:
    // The knobs the detail view exposes on the selected plan.
    enum class Knob { MicroBatch, Recompute, Zero, Vpp, Schedule };

    explicit PlanSession(QObject* parent = nullptr);

    // Replaces model and cluster (and the scenario's own plan); selects the scenario's plan.
    void setScenario(const Scenario& scenario);
    const Scenario& scenario() const { return scenario_; }
    // Changes model or cluster in place (fields edited by hand) and re-evaluates the current plan.
    void setModel(const ModelConfig& model);
    void setCluster(const ClusterConfig& cluster);
    void setGlobalBatch(int globalBatch);

    // Shows `plan` (e.g. a search result); `basePlan()` remembers it so the knobs can be reset.
    void selectPlan(const Plan& plan);
    const Plan& basePlan() const { return base_; }
    const Plan& currentPlan() const { return evaluation_.plan; }
    bool isEdited() const;
    void resetKnobs();

    // Turns one knob of the current plan and re-evaluates at once. Setting the schedule keeps the plan
    // valid where only one vpp works: interleaved_1f1b needs vpp >= 2 (vpp 1 becomes 2), the other
    // schedules need vpp 1.
    void setMicroBatch(int microBatch);
    void setRecompute(Recompute recompute);
    // Partial recompute: the layers of each chunk recomputed under full recompute (0: every layer).
    void setRecomputeLayers(int layers);
    void setZeroStage(int zeroStage);
    void setZeroReplicas(int replicas); // hybrid sharding: replicas of the sharded ZeRO state (1 = shard over all)
    void setVpp(int vpp);
    void setSchedule(Schedule schedule);
    // The loss kernel (plan key cross_entropy; unset: the framework's), what the last stage keeps of the logits.
    void setCrossEntropy(const std::optional<std::string>& kind);
    // Transformer Engine's FP8 scaling (plan key fp8_recipe; unset: delayed), for FP8 plans.
    void setFp8Recipe(const std::optional<std::string>& recipe);
    // What selective recompute reruns (recompute_module bits); kept aside while the recompute is not selective.
    void setRecomputeModules(uint8_t modules);
    void setPlan(const Plan& plan);             // any edit (file open, several knobs at once)

    const PlanEvaluation& evaluation() const { return evaluation_; }
    // The scenario with the current plan, for saving, exporting and copying as framework arguments.
    Scenario currentScenario() const;

    // Pins the current plan (slot 0 = A, 1 = B); false when it is not simulated.
    bool pin(int slot);
    void unpin(int slot);
    const std::optional<PinnedPlan>& pinned(int slot) const { return pinned_.at(static_cast<size_t>(slot)); }

signals:
    void scenarioChanged();
    void evaluationChanged();
    void pinnedChanged();

private:
    void reevaluate();

    Scenario scenario_;
    Plan base_;
    PlanEvaluation evaluation_;
    // What selective recompute reruns, kept while the recompute knob is elsewhere (only selective reads it).
    uint8_t selectiveModules_ = recompute_module::Default;
    std::array<std::optional<PinnedPlan>, 2> pinned_;
};

} // namespace tessel::gui
