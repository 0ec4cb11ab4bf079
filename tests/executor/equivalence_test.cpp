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
