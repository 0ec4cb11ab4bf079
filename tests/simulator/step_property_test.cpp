// Property tests of the simulated step over grids of real presets and plans: more work never makes a step
// shorter, faster hardware never makes it longer.
#include "../cost_models/test_support.hpp"
#include "tessel/sim/simulate.hpp"

#include <functional>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

// A plan of the grid and where it came from, for the failure message.
struct GridCase {
    std::string label;
    ModelConfig model;
    ClusterConfig cluster;
    Plan plan;
};

// Dense and MoE presets on two nodes of H100 and A100, tp x pp x dp over 16 GPUs, ZeRO 0/1/3, 1F1B and
// interleaving, under tessel's generic overlap and under Megatron-LM 2024's (gradient reduce and parameter
// gather overlapped). Each case is a plan `validatePlan` accepts.
const std::vector<GridCase>& grid() {
    static const std::vector<GridCase> cases = [] {
        std::vector<GridCase> out;
        struct ModelOn {
            const char* model;
            const char* cluster;
        };
        for (ModelOn mc : {ModelOn{"llama3-8b", "dgx-h100-80g"}, ModelOn{"gpt3-13b", "dgx-a100-80g"},
                           ModelOn{"mixtral-8x7b", "dgx-h100-80g"}}) {
            ModelConfig model = test::preset(mc.model);
            ClusterConfig cluster = test::clusterPreset(mc.cluster);
            cluster.nodes = 2;
            // framework, version, and whether its gradient reduce and parameter gather overlap (Megatron-LM's
            // switches; the other frameworks' own defaults otherwise)
            struct Framework {
                const char* name;
                const char* version;
                bool overlap;
            };
            for (Framework fw :
                 {Framework{"generic", "", false}, Framework{"megatron", "2024", true},
                  Framework{"deepspeed", "2022", false}, Framework{"torchtitan", "2025", false}})
                for (int tp : {1, 2, 8})
                    for (int pp : {1, 2, 4})
                        for (int cp : {1, 2})
                            for (int zero : {0, 1, 3})
                                for (Schedule sch : {Schedule::OneFOneB, Schedule::Interleaved1F1B,
                                                     Schedule::ZeroBubble, Schedule::DualPipeV}) {
                                    if (sch != Schedule::OneFOneB && pp == 1) continue;
                                    if (tp * pp * cp > 16) continue;
                                    Plan p;
                                    p.framework.name = fw.name;
                                    p.framework.version = fw.version;
                                    if (fw.overlap) {
                                        p.framework.overlapParamGather = true;
                                        p.framework.overlapGradReduce = true;
                                    }
                                    p.tp = tp;
                                    p.pp = pp;
                                    p.cp = cp;
                                    p.dp = 16 / (tp * pp * cp);
                                    p.ep = model.moe ? std::min(p.dp, 2) : 1;
                                    p.zeroStage = zero;
                                    p.schedule = sch;
                                    p.vpp = sch == Schedule::Interleaved1F1B || p.vShape() ? 2 : 1;
                                    p.sequenceParallel = tp > 1;
                                    p.recompute = Recompute::Selective;
                                    p.globalBatch = p.dp * 4 * pp;
                                    // FP8 GEMMs (Transformer Engine's recipe) on Hopper under Megatron-LM.
                                    if (fw.overlap && cluster.gpu.peakFlopsPerSecond.count(Dtype::Fp8) &&
                                        tp != 2)
                                        p.precision = "fp8";
                                    ProblemList problems;
                                    validatePlan(model, cluster, p, "/plan", problems);
                                    if (!problems.empty()) continue;
                                    std::ostringstream label;
                                    label << mc.model << " on " << mc.cluster << " " << fw.name << " tp" << tp
                                          << " pp" << pp << " cp" << cp << " dp" << p.dp << " ep" << p.ep
                                          << " zero" << zero << " schedule " << static_cast<int>(sch) << " "
                                          << p.precision;
                                    out.push_back({label.str(), model, cluster, p});
                                }
        }
        return out;
    }();
    return cases;
}

double stepOf(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan) {
    return simulatePlan(model, cluster, plan).metrics.stepSeconds;
}

// Relative slack for "never shorter": the event simulation is list scheduling, where a longer task may in
// principle let another start earlier; a hundredth of a percent is far below any figure tessel prints.
constexpr double kSlack = 1e-4;

TEST(StepProperties, GridIsLargeEnoughToMeanSomething) {
    EXPECT_GT(grid().size(), 80u);
}

TEST(StepProperties, MoreRecomputeNeverShortensTheStep) {
    for (const auto& c : grid()) {
        double previous = 0.0;
        for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
            Plan p = c.plan;
            p.recompute = r;
            const double step = stepOf(c.model, c.cluster, p);
            EXPECT_GE(step, previous * (1.0 - kSlack)) << c.label << " recompute " << static_cast<int>(r);
            previous = step;
        }
    }
}

// Twice the micro-batches: a longer step, at most twice as long, since the fill, the drain and the per-step
// work are paid once. DualPipeV's schedule for 2m is not two copies of its schedule for m, and under ZeRO-3
// (a gather per chunk and micro-batch) it comes out up to 0.15% over twice: the looser slack. Where the
// stages' waits are the schedule's (no ZeRO-3 gathers, whose waits on one stage show as idle on its
// neighbours), the idle share falls.
TEST(StepProperties, TwiceTheMicroBatchesTakeLongerButNoMoreThanTwice) {
    constexpr double kScheduleSlack = 2e-3;
    for (const auto& c : grid()) {
        Plan twice = c.plan;
        twice.globalBatch *= 2;
        const PlanSimulation one = simulatePlan(c.model, c.cluster, c.plan);
        const PlanSimulation two = simulatePlan(c.model, c.cluster, twice);
        EXPECT_GT(two.metrics.stepSeconds, one.metrics.stepSeconds) << c.label;
        EXPECT_LE(two.metrics.stepSeconds, 2.0 * one.metrics.stepSeconds * (1.0 + kScheduleSlack)) << c.label;
        if (c.plan.zeroStage < 3)
            EXPECT_LE(two.metrics.bubbleFraction, one.metrics.bubbleFraction + kScheduleSlack) << c.label;
    }
}

TEST(StepProperties, FlashAttentionNeverLengthensTheStep) {
    for (const auto& c : grid()) {
        Plan eager = c.plan;
        eager.flashAttention = false;
        EXPECT_LE(stepOf(c.model, c.cluster, c.plan), stepOf(c.model, c.cluster, eager) * (1.0 + kSlack))
            << c.label;
    }
}

// Each change makes one part of the machine twice as fast.
TEST(StepProperties, FasterHardwareNeverLengthensTheStep) {
    const std::vector<std::pair<std::string, std::function<void(ClusterConfig&)>>> faster = {
        {"NVLink x2", [](ClusterConfig& k) { k.intraNode.bandwidthBytesPerSecond *= 2.0; }},
        {"network x2", [](ClusterConfig& k) { k.interNode.bandwidthBytesPerSecond *= 2.0; }},
        {"latencies / 2",
         [](ClusterConfig& k) {
             k.intraNode.latencySeconds /= 2.0;
             k.interNode.latencySeconds /= 2.0;
             for (auto* tier : {&k.intraNode, &k.interNode})
                 for (auto& [primitive, seconds] : tier->primitiveLatencySeconds)
                     seconds /= 2.0;
         }},
        {"HBM x2", [](ClusterConfig& k) { k.gpu.hbmBytesPerSecond *= 2.0; }},
        {"tensor cores x2",
         [](ClusterConfig& k) {
             for (auto& [dtype, flops] : k.gpu.peakFlopsPerSecond)
                 flops *= 2.0;
         }},
        {"kernel launches / 2", [](ClusterConfig& k) { k.gpu.kernelOverheadSeconds /= 2.0; }},
        {"no contention", [](ClusterConfig& k) { k.gpu.commContention = 0.0; }},
    };
    for (const auto& c : grid()) {
        const double base = stepOf(c.model, c.cluster, c.plan);
        for (const auto& [name, change] : faster) {
            ClusterConfig k = c.cluster;
            change(k);
            EXPECT_LE(stepOf(c.model, k, c.plan), base * (1.0 + kSlack)) << c.label << ", " << name;
        }
    }
}

} // namespace
} // namespace tessel::sim
