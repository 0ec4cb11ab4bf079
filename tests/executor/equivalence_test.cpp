// The equivalence grid: a tiny model trained for a few steps on N ranks gives the same losses and updated
// parameters as on one rank (float64, relative difference under 1e-10), plan by plan.
#include "executor_support.hpp"

#include <gtest/gtest.h>

namespace tessel::exec {
namespace {

using test::basePlan;
using test::tinyModel;

struct Case {
    std::string name;
    Plan plan;
    bool swiglu = false;
};

std::vector<Case> grid() {
    std::vector<Case> cases;
    auto add = [&](std::string name, auto edit, bool swiglu = false) {
        Plan p = basePlan();
        edit(p);
        cases.push_back({std::move(name), p, swiglu});
    };
    add("tp2", [](Plan& p) { p.tp = 2; });
    add("tp2_sp", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("tp2_swiglu_rope", [](Plan& p) { p.tp = 2; }, true);
    for (Schedule s : {Schedule::Gpipe, Schedule::OneFOneB, Schedule::ZeroBubble}) {
        add("pp2_" + toString(s), [s](Plan& p) { p.pp = 2; p.schedule = s; });
        add("pp4_" + toString(s), [s](Plan& p) { p.pp = 4; p.schedule = s; });
    }
    add("pp2_interleaved_vpp2", [](Plan& p) { p.pp = 2; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    for (int z = 0; z <= 3; ++z) add("dp2_zero" + std::to_string(z), [z](Plan& p) { p.dp = 2; p.zeroStage = z; });
    add("tp2_pp2_dp2_zero1", [](Plan& p) { p.tp = 2; p.pp = 2; p.dp = 2; p.zeroStage = 1; });
    add("pp2_dp2_zero2_tied", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 2; });
    // Context parallelism (load-balanced zig-zag split of each sequence; seq_len 16 % (2 cp) == 0).
    add("cp2", [](Plan& p) { p.cp = 2; });
    add("cp4", [](Plan& p) { p.cp = 4; });
    add("cp2_tp2", [](Plan& p) { p.cp = 2; p.tp = 2; });
    add("cp2_tp2_sp", [](Plan& p) { p.cp = 2; p.tp = 2; p.sequenceParallel = true; });
    add("cp2_pp2", [](Plan& p) { p.cp = 2; p.pp = 2; });
    add("cp2_dp2_zero0", [](Plan& p) { p.cp = 2; p.dp = 2; });
    add("cp2_dp2_zero1", [](Plan& p) { p.cp = 2; p.dp = 2; p.zeroStage = 1; });
    add("cp2_dp2_zero1_over_cp", [](Plan& p) { p.cp = 2; p.dp = 2; p.zeroStage = 1; p.zeroOverCp = true; });
    add("cp2_zero3_over_cp", [](Plan& p) { p.cp = 2; p.zeroStage = 3; p.zeroOverCp = true; });
    add("cp2_swiglu_rope", [](Plan& p) { p.cp = 2; }, true);
    add("cp2_pp2_tied", [](Plan& p) { p.cp = 2; p.pp = 2; });
    return cases;
}

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, MatchesOneRank) {
    const Case& c = GetParam();
    ModelConfig model = tinyModel(c.swiglu);
    if (c.name.find("tied") != std::string::npos) model.tiedEmbeddings = true;
    Plan one = basePlan();
    one.precision = c.plan.precision;
    const test::RunResult ref = test::runPlan(model, one, 3);
    const test::RunResult got = test::runPlan(model, c.plan, 3);
    ASSERT_EQ(ref.losses.size(), got.losses.size());
    for (size_t i = 0; i < ref.losses.size(); ++i)
        EXPECT_LT(std::abs(ref.losses[i] - got.losses[i]) / ref.losses[i], 1e-10) << "step " << i;
    ASSERT_EQ(ref.params.size(), got.params.size());
    for (const auto& [name, values] : ref.params) {
        auto it = got.params.find(name);
        ASSERT_NE(it, got.params.end()) << name;
        EXPECT_LT(test::maxRelDiff(values, it->second), 1e-10) << name;
    }
    EXPECT_LT(got.losses.back(), got.losses.front()); // it trains
}

INSTANTIATE_TEST_SUITE_P(Grid, Equivalence, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// With a clip norm far below the gradient norm every step is clipped, so the updated parameters depend on the
// global gradient norm: each distinct gradient element must be counted once over dp x cp.
TEST(ContextParallel, ClippedStepsMatchOneRank) {
    ModelConfig model = tinyModel(false);
    TrainHyper hyper;
    hyper.clipNorm = 1e-3;
    const test::RunResult ref = test::runPlan(model, basePlan(), 2, hyper);
    struct { const char* name; int dp, zero; bool overCp; } cases[] = {
        {"cp2_dp2_zero0", 2, 0, false}, {"cp2_dp2_zero1", 2, 1, false}, {"cp2_dp2_zero2_over_cp", 2, 2, true},
        {"cp2_zero1", 1, 1, false}};
    for (const auto& c : cases) {
        Plan p = basePlan();
        p.cp = 2;
        p.dp = c.dp;
        p.zeroStage = c.zero;
        p.zeroOverCp = c.overCp;
        const test::RunResult got = test::runPlan(model, p, 2, hyper);
        for (size_t i = 0; i < ref.losses.size(); ++i)
            EXPECT_LT(std::abs(ref.losses[i] - got.losses[i]) / ref.losses[i], 1e-10) << c.name << " step " << i;
        for (const auto& [name, values] : ref.params)
            EXPECT_LT(test::maxRelDiff(values, got.params.at(name)), 1e-10) << c.name << " " << name;
    }
}

TEST(Recompute, SelectiveAndFullAreBitwiseEqualToNone) {
    ModelConfig model = tinyModel(false);
    Plan p = basePlan();
    p.pp = 2;
    const test::RunResult none = test::runPlan(model, p, 2);
    for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
        Plan q = p;
        q.recompute = rc;
        const test::RunResult r = test::runPlan(model, q, 2);
        EXPECT_EQ(r.losses, none.losses) << toString(rc);
        EXPECT_EQ(r.params, none.params) << toString(rc);
    }
}

TEST(Training, LossFallsOnTheTinyModel) {
    ModelConfig model = tinyModel(false);
    Plan p = basePlan();
    const test::RunResult r = test::runPlan(model, p, 12);
    EXPECT_LT(r.losses.back(), r.losses.front() - 0.5);
    EXPECT_NEAR(r.losses.front(), std::log(256.0), 0.3); // starts near uniform over bytes
}

} // namespace
} // namespace tessel::exec
