// JSON of the simulated step metrics and per-stage breakdowns.
#include "tessel/sim/report.hpp"

namespace tessel::sim {

nlohmann::json breakdownToJson(const StepBreakdown& b) {
    return {{"compute_seconds", b.computeSeconds},   {"tp_seconds", b.tpSeconds},
            {"cp_seconds", b.cpSeconds},             {"ep_seconds", b.epSeconds},
            {"pp_seconds", b.ppSeconds},             {"dp_seconds", b.dpSeconds},
            {"optimizer_seconds", b.optimizerSeconds}, {"bubble_seconds", b.bubbleSeconds}};
}

nlohmann::json timeToJson(const StepMetrics& m, const Timeline& t) {
    nlohmann::json stages = nlohmann::json::array();
    for (size_t s = 0; s < t.perStage.size(); ++s)
        stages.push_back({{"stage", s},
                          {"bubble_fraction", m.bubbleFractionPerStage[s]},
                          {"breakdown", breakdownToJson(t.perStage[s])}});
    return {{"step_seconds", m.stepSeconds},
            {"bubble_fraction", m.bubbleFraction},
            {"mfu", m.mfu},
            {"hfu", m.hfu},
            {"tokens_per_second", m.tokensPerSecond},
            {"model_flops_per_step", m.modelFlopsPerStep},
            {"hardware_flops_per_step", m.hardwareFlopsPerStep},
            {"breakdown", breakdownToJson(m.breakdown)},
            {"bottleneck_stage", m.bottleneckStage},
            {"stages", stages},
            {"flop_convention",
             "MFU: model FLOPs = every GEMM plus full non-causal attention (4 b a s^2 d per layer forward), "
             "backward = 2 x forward, no recompute, optimizer excluded (Narayanan et al. 2021 eq. 3); HFU adds "
             "recomputed work. Both over step time x GPUs x the recipe dtype's dense peak."}};
}

} // namespace tessel::sim
