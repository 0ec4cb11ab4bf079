// Predicted vs measured memory: for plans of the equivalence grid, the cost model's per-stage prediction for
// the executor's recipe (cpu_fp64) against the peak bytes the CPU backend allocated, per category.
#include "executor_support.hpp"

#include "tessel/cost/memory.hpp"

#include <gtest/gtest.h>

#include <cstdio>

namespace tessel::exec {
namespace {

struct MemCase {
    std::string name;
    Plan plan;
    bool swiglu = false;
};

std::vector<MemCase> memoryCases() {
    std::vector<MemCase> cases;
    auto add = [&](std::string name, auto edit, bool swiglu = false) {
        Plan p = test::basePlan();
        edit(p);
        cases.push_back({std::move(name), p, swiglu});
    };
    add("one_rank", [](Plan&) {});
    add("tp2", [](Plan& p) { p.tp = 2; });
    add("tp2_sp", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("tp2_swiglu_rope", [](Plan& p) { p.tp = 2; }, true);
    for (Schedule s : {Schedule::Gpipe, Schedule::OneFOneB, Schedule::ZeroBubble}) {
        add("pp2_" + toString(s), [s](Plan& p) { p.pp = 2; p.schedule = s; });
        add("pp4_" + toString(s), [s](Plan& p) { p.pp = 4; p.schedule = s; });
    }
    add("pp2_interleaved_vpp2", [](Plan& p) { p.pp = 2; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    add("dp2_zero0", [](Plan& p) { p.dp = 2; });
    add("dp2_zero1", [](Plan& p) { p.dp = 2; p.zeroStage = 1; });
    add("tp2_pp2_dp2_zero1", [](Plan& p) { p.tp = 2; p.pp = 2; p.dp = 2; p.zeroStage = 1; });
    add("dp2_zero2", [](Plan& p) { p.dp = 2; p.zeroStage = 2; });
    add("pp2_dp2_zero2", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 2; });
    add("pp2_recompute_selective", [](Plan& p) { p.pp = 2; p.recompute = Recompute::Selective; });
    add("pp2_recompute_full", [](Plan& p) { p.pp = 2; p.recompute = Recompute::Full; });
    add("tp2_pp2_dp2", [](Plan& p) { p.tp = 2; p.pp = 2; p.dp = 2; });
    add("cp2", [](Plan& p) { p.cp = 2; });
    add("cp2_tp2_pp2", [](Plan& p) { p.cp = 2; p.tp = 2; p.pp = 2; });
    add("cp2_tp2_sp", [](Plan& p) { p.cp = 2; p.tp = 2; p.sequenceParallel = true; });
    add("cp2_dp2_zero0", [](Plan& p) { p.cp = 2; p.dp = 2; });
    add("cp2_swiglu_rope", [](Plan& p) { p.cp = 2; }, true);
    return cases;
}

class MemoryPrediction : public ::testing::TestWithParam<MemCase> {};

TEST_P(MemoryPrediction, WithinFivePercentPerCategory) {
    const MemCase& c = GetParam();
    const ModelConfig model = test::tinyModel(c.swiglu);
    const test::RunResult run = test::runPlan(model, c.plan, 1);
    ClusterConfig cluster = loadClusterRef("cpu-host", "test");
    cluster.gpusPerNode = c.plan.worldSize();
    cluster.nodes = 1;
    const MemoryReport predicted = predictMemory(model, cluster, c.plan);
    for (int r = 0; r < c.plan.worldSize(); ++r) {
        const StageMemory& st = predicted.stages[static_cast<size_t>(rankCoords(c.plan, r).pp)];
        const MemoryStats& m = run.memory[static_cast<size_t>(r)];
        auto measured = [&](MemoryCategory k) { return static_cast<double>(m.peakBytes[static_cast<size_t>(k)]); };
        const struct {
            const char* name;
            double predictedBytes, measuredBytes;
        } rows[] = {
            {"weights", st.weightsBytes, measured(MemoryCategory::Weights)},
            {"grads", st.gradsBytes, measured(MemoryCategory::Grads)},
            {"optimizer", st.optimizerBytes, measured(MemoryCategory::Optimizer)},
            // The executor keeps the logits among its activations; the model files them under "other".
            {"activations", st.activationsBytes + st.other.logitsLossBytes, measured(MemoryCategory::Activations)},
        };
        for (const auto& row : rows) {
            const double err = (row.predictedBytes - row.measuredBytes) / row.measuredBytes;
            std::printf("memory %-24s rank %d %-11s predicted %10.0f measured %10.0f error %+6.2f%%\n", c.name.c_str(), r,
                        row.name, row.predictedBytes, row.measuredBytes, 100.0 * err);
            EXPECT_LT(std::abs(err), 0.05) << c.name << " rank " << r << " " << row.name;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Grid, MemoryPrediction, ::testing::ValuesIn(memoryCases()),
                         [](const ::testing::TestParamInfo<MemCase>& i) { return i.param.name; });

} // namespace
} // namespace tessel::exec
