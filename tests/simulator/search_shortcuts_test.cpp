// The search's shortcuts against the slow paths they stand in for: the step lower bound never above the
// simulated step, the fast peak memory equal to predictMemory, the fast verdict equal to validatePlan's first
// problem, the fast placement equal to placeGroup and to every rank visited, and the distinct rank orders.
#include "search_support.hpp"

#include "../../simulator/src/search_estimate.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/sim/search.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using search_support::permutations;
using search_support::smallNodes;
using search_support::spaceFor;

// (d) The lower bound never exceeds the simulated step, over a grid of models and plans.
struct GridCase {
    ModelConfig model;
    ClusterConfig cluster;
    Plan plan;
};

// tiny-moe with DeepSeek's shape of block: latent attention, its first layer dense among the expert layers, and a
// multi-token-prediction module on the output layer's stage.
ModelConfig latentTinyMoe() {
    ModelConfig m = test::preset("tiny-moe");
    m.name = "tiny-moe-mla-dense-mtp";
    m.mtpLayers = 1;
    m.kvHeads = m.heads;
    m.mla = MlaConfig{32, 16, 16, 8, 16};
    m.headDim = 24;
    m.moe->denseLayers = {0};
    return m;
}

// tiny-moe with four kinds of layer: a dense first layer among the expert layers, a sliding window of 16 keys of its
// 64 and every other layer attending in full (gpt-oss's alternation).
ModelConfig windowPatternTinyMoe() {
    ModelConfig m = test::preset("tiny-moe");
    m.name = "tiny-moe-dense-window-pattern";
    m.moe->denseLayers = {0};
    m.slidingWindow = 16;
    m.fullAttentionLayers = {1, 3};
    return m;
}

std::vector<GridCase> boundGrid() {
    std::vector<GridCase> cases;
    const std::vector<std::pair<std::string, int>> models{{"tiny", 1},
                                                          {"tiny-moe", 1},
                                                          {"tiny-moe-mla-dense-mtp", 2},
                                                          {"tiny-moe-dense-window-pattern", 2},
                                                          {"gpt3-1.3b", 1},
                                                          {"llama3-8b", 2}};
    for (const auto& [name, stride] : models) {
        const ModelConfig m = name == "tiny-moe-mla-dense-mtp"          ? latentTinyMoe()
                            : name == "tiny-moe-dense-window-pattern" ? windowPatternTinyMoe()
                                                                      : test::preset(name);
        for (int gpn : {4, 8})
            for (int tp : {1, 2, 4})
                for (int pp : {1, 2, 3, 4})
                    for (int cp : {1, 2})
                        for (int dp : {1, 2, 4})
                            for (int zero : {0, 1, 2, 3})
                                for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
                                    for (Schedule sch : {Schedule::Gpipe, Schedule::OneFOneB, Schedule::Interleaved1F1B,
                                                         Schedule::ZeroBubble, Schedule::DualPipeV, Schedule::ZeroBubbleV}) {
                                        const int world = tp * pp * cp * dp;
                                        if (world < gpn || world % gpn != 0) continue;
                                        if ((tp + pp + dp + zero + static_cast<int>(rc)) % stride != 0) continue;
                                        Plan p;
                                        p.tp = tp;
                                        p.pp = pp;
                                        p.cp = cp;
                                        p.dp = dp;
                                        p.ep = m.moe && dp % 2 == 0 ? 2 : 1;
                                        p.zeroStage = zero;
                                        // Hybrid sharding (two replicas of the sharded state) on half the dp-4 plans.
                                        if (zero >= 1 && dp == 4 && (tp + pp) % 2 == 0) p.zeroReplicas = 2;
                                        p.recompute = rc;
                                        // Megatron-core's recompute modules on half the selective plans, a set each
                                        // model can run (latent attention, a dense layer and experts; experts; dense).
                                        if (rc == Recompute::Selective && (tp + pp + dp) % 2 == 1)
                                            p.recomputeModules = m.mla    ? recompute_module::MlaUpProj | recompute_module::Mlp | recompute_module::Moe
                                                                 : m.moe ? recompute_module::Layernorm | recompute_module::MoeAct
                                                                         : recompute_module::Mlp;
                                        p.schedule = sch;
                                        p.vpp = sch == Schedule::Interleaved1F1B || sch == Schedule::DualPipeV || sch == Schedule::ZeroBubbleV ? 2 : 1;
                                        // pp 3 (and tiny's 4 layers on 4 x 2 chunks): the balanced split.
                                        if (m.layers % (pp * p.vpp) != 0) p.pipelineSplit = PipelineSplit::Balanced;
                                        p.sequenceParallel = tp > 1 && (zero % 2 == 0);
                                        p.microBatch = 1 + (zero % 2);
                                        p.globalBatch = dp * p.microBatch * pp * 2;
                                        p.rankOrder = (tp + dp) % 2 == 0 ? p.rankOrder
                                                                          : std::array<ParallelDim, 5>{ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp,
                                                                                                       ParallelDim::Pp, ParallelDim::Ep};
                                        ClusterConfig c = test::clusterPreset("dgx-a100-80g");
                                        c.gpusPerNode = gpn;
                                        c.nodes = world / gpn;
                                        ProblemList problems;
                                        validatePlan(m, c, p, "/plan", problems);
                                        if (problems.empty()) cases.push_back({m, c, p});
                                        // And folded (MoE parallel folding): whole experts, EP over tp x cp x dp.
                                        if (!m.moe || tp == 1 || !p.sequenceParallel) continue;
                                        Plan f = p;
                                        f.etp = 1;
                                        f.ep = m.moe->experts % (tp * cp * dp) == 0 ? tp * cp * dp : tp;
                                        f.rankOrder = Plan{}.rankOrder;
                                        ProblemList foldedProblems;
                                        validatePlan(m, c, f, "/plan", foldedProblems);
                                        if (foldedProblems.empty()) cases.push_back({m, c, f});
                                    }
    }
    return cases;
}

TEST(SearchBound, NeverAboveTheSimulatedStep) {
    const std::vector<GridCase> cases = boundGrid();
    ASSERT_GT(cases.size(), 1000u);
    std::vector<double> ratios;
    for (const auto& c : cases) {
        const double bound = stepLowerBoundSeconds(c.model, c.cluster, c.plan);
        const double step = simulatePlan(c.model, c.cluster, c.plan).metrics.stepSeconds;
        ASSERT_LE(bound, step * (1.0 + 1e-9)) << c.model.name << " " << planToJson(c.plan).dump();
        ASSERT_GT(bound, 0.0);
        ratios.push_back(bound / step);
    }
    // Not trivially admissible: on most plans the bound is close to the simulated step.
    std::sort(ratios.begin(), ratios.end());
    EXPECT_GT(ratios[ratios.size() / 2], 0.8);
}

// The same on calibrated clusters: phase scales, a communication scale above and below 1 and synchronisation
// waits (which the bound leaves out, so it stays below).
TEST(SearchBound, NeverAboveTheSimulatedStepOnACalibratedCluster) {
    const std::vector<GridCase> cases = boundGrid();
    int checked = 0;
    for (size_t i = 0; i < cases.size(); i += 7)
        for (double commScale : {0.5, 2.0}) {
            GridCase c = cases[i];
            c.cluster.gpu.phaseFits["forward"] = PhaseFit{1e-4, 1.2};
            c.cluster.gpu.phaseFits["backward"] = PhaseFit{2e-4, 0.9};
            c.cluster.gpu.phaseFits["communication"] = PhaseFit{0.0, commScale};
            c.cluster.gpu.syncJitterFraction = 0.1;
            const double bound = stepLowerBoundSeconds(c.model, c.cluster, c.plan);
            const double step = simulatePlan(c.model, c.cluster, c.plan).metrics.stepSeconds;
            ASSERT_LE(bound, step * (1.0 + 1e-9)) << c.model.name << " scale " << commScale << " " << planToJson(c.plan).dump();
            ++checked;
        }
    RecordProperty("plans_checked", checked);
    EXPECT_GT(checked, 2000); // 2954 when written
}

// And under every framework's overlap settings (docs/frameworks.md): blocking transfers, reductions after the
// backward, asynchronous or pipelined TP, parameter gathers moved into the next forward, kept ZeRO-3 weights.
TEST(SearchBound, NeverAboveTheSimulatedStepUnderEveryFramework) {
    const std::vector<GridCase> cases = boundGrid();
    int checked = 0, overlapped = 0;
    for (size_t i = 0; i < cases.size(); i += 5)
        for (const char* fw : {"megatron", "nemo", "megascale", "deepspeed", "fsdp"})
            for (const char* version : {"2021", ""}) {
                GridCase c = cases[i];
                c.plan.framework = FrameworkSettings{};
                c.plan.framework.name = fw;
                c.plan.framework.version = version;
                if (i % 2) c.plan.framework.reshardAfterForward = false;
                if (i % 3 == 0) c.plan.framework.overlapParamGather = true;
                if (i % 4 == 1) c.plan.framework.moeDispatcher = "flex"; // the dispatcher's two legs where EP spans nodes
                if ((i / 5) % 3 == 2) c.plan.framework.gradSyncEachMicroBatch = false; // FSDP's no_sync
                // Megatron-core's batch-level EP overlap, wherever the plan can run it.
                if (i % 3 != 1 && c.model.moe && c.plan.ep > 1 && c.plan.recompute != Recompute::Full &&
                    !(c.plan.recompute == Recompute::Selective && c.plan.recomputes(recompute_module::Moe)) &&
                    (c.plan.pp == 1 || c.plan.vpp > 1))
                    c.plan.framework.moeA2aOverlap = true, ++overlapped;
                const double bound = stepLowerBoundSeconds(c.model, c.cluster, c.plan);
                const double step = simulatePlan(c.model, c.cluster, c.plan).metrics.stepSeconds;
                ASSERT_LE(bound, step * (1.0 + 1e-9)) << fw << " " << version << " " << planToJson(c.plan).dump();
                ++checked;
            }
    EXPECT_GT(checked, 3000);
    EXPECT_GT(overlapped, 10);
}

// And for parallel blocks (attention and MLP side by side), reduced once (GPT-NeoX, read as deepspeed with pp > 1)
// or each block on its own (Megatron-core).
TEST(SearchBound, NeverAboveTheSimulatedStepForParallelBlocks) {
    const std::vector<GridCase> cases = boundGrid();
    int checked = 0, reducedOnce = 0;
    for (size_t i = 0; i < cases.size(); i += 5)
        for (const char* fw : {"deepspeed", "megatron"}) {
            GridCase c = cases[i];
            if (c.model.moe) continue;
            c.model.parallelResidual = true;
            c.plan.framework = FrameworkSettings{};
            c.plan.framework.name = fw;
            const double bound = stepLowerBoundSeconds(c.model, c.cluster, c.plan);
            const double step = simulatePlan(c.model, c.cluster, c.plan).metrics.stepSeconds;
            ASSERT_LE(bound, step * (1.0 + 1e-9)) << fw << " " << planToJson(c.plan).dump();
            ++checked;
            reducedOnce += std::string(fw) == "deepspeed" && c.plan.tp > 1 && c.plan.pp > 1 ? 1 : 0;
        }
    EXPECT_GT(checked, 200);
    EXPECT_GT(reducedOnce, 50);
}

TEST(SearchBound, TightForGpt3Megatron) {
    Scenario s = defaultScenario();
    const double bound = stepLowerBoundSeconds(s.model, s.cluster, s.plan);
    const double step = simulatePlan(s.model, s.cluster, s.plan).metrics.stepSeconds;
    EXPECT_LE(bound, step * (1.0 + 1e-9));
    EXPECT_GT(bound, 0.9 * step);
}

// (e) The fast memory path equals predictMemory; the fast verdict equals validatePlan's first problem.
TEST(SearchMemory, FastPeakEqualsPredictMemory) {
    int checked = 0;
    for (const auto& c : boundGrid()) {
        for (int gpn : {c.cluster.gpusPerNode}) {
            (void)gpn;
            const MemoryReport full = predictMemory(c.model, c.cluster, c.plan);
            const PeakMemory fast = fastPeakMemory(c.model, c.cluster, c.plan);
            ASSERT_NEAR(fast.bytes, full.peakBytes, 1e-9 * full.peakBytes) << planToJson(c.plan).dump();
            ASSERT_EQ(fast.stage, full.peakStage);
            ASSERT_EQ(fast.fits, full.fits);
            ++checked;
        }
    }
    EXPECT_GT(checked, 1000);
}

TEST(SearchMemory, VerdictFollowsCapacity) {
    // Shrinking the GPU until the plan no longer fits flips the fast verdict exactly where predictMemory does.
    Scenario s = defaultScenario();
    const double peak = predictMemory(s.model, s.cluster, s.plan).peakBytes;
    s.cluster.gpu.memoryBytes = static_cast<int64_t>(peak) + 1;
    EXPECT_TRUE(fastPeakMemory(s.model, s.cluster, s.plan).fits);
    s.cluster.gpu.memoryBytes = static_cast<int64_t>(peak) - 1;
    EXPECT_FALSE(fastPeakMemory(s.model, s.cluster, s.plan).fits);
    EXPECT_FALSE(predictMemory(s.model, s.cluster, s.plan).fits);
}

// A model whose sizes make each divisibility rule fail somewhere: heads 8 but ffn 12, experts 6 of width 12,
// 12 layers, sequence 40 (cp 16 breaks the 2 x cp rule, cp 4 with tp 4 the SP rule).
ModelConfig oddModel(bool moe) {
    ModelConfig m = test::megatronStyleModel(12, 64, 8, 100, 40);
    m.name = moe ? "odd-moe" : "odd";
    m.ffnHidden = moe ? 64 : 12;
    if (moe) m.moe = MoeConfig{6, 2, 12};
    return m;
}

TEST(SearchValidity, FastReasonEqualsValidatePlan) {
    const ClusterConfig cluster = smallNodes(8, 2, 80);
    ModelConfig windowed = test::preset("tiny"); // sliding-window attention: the ring exchange refused
    windowed.name = "tiny-window";
    windowed.slidingWindow = 16;
    std::vector<ModelConfig> models{test::preset("tiny"), test::preset("tiny-moe"), test::preset("gpt3-1.3b"),
                                    oddModel(false), oddModel(true), windowed};
    int invalid = 0;
    std::map<std::string, int> seen;
    for (const ModelConfig& model : models)
        for (int tp : {1, 2, 3, 4, 8, 16})
            for (int pp : {1, 2, 3, 4})
                for (int cp : {1, 2, 4, 16, 64})
                    for (int ep : {1, 2, 3, 4})
                        for (int vpp : {1, 2, 3})
                            for (Schedule sch : {Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::DualPipeV, Schedule::ZeroBubbleV})
                                for (int mb : {1, 3})
                                    for (int gb : {24, 7, 1 << 20}) // 2^20: past the schedule's slots at pp >= 2
                                        for (bool sp : {false, true}) {
                                            Plan p;
                                            p.tp = tp;
                                            p.pp = pp;
                                            p.cp = cp;
                                            // Mostly plans that fill the 16 GPUs, so later rules get their turn.
                                            p.dp = 16 % (tp * pp * cp) == 0 ? 16 / (tp * pp * cp) : 1;
                                            p.ep = ep;
                                            p.vpp = vpp;
                                            p.schedule = sch;
                                            p.microBatch = mb;
                                            p.globalBatch = gb;
                                            p.sequenceParallel = sp;
                                            // Hybrid sharding on some plans: two replicas, at ZeRO 0 or 1.
                                            if (vpp == 2 && sp) {
                                                p.zeroReplicas = 2;
                                                p.zeroStage = mb == 1 ? 1 : 0;
                                            }
                                            if (tp == 1 && pp == 1 && mb == 1) p.precision = "no-such-recipe";
                                            // Folded experts (etp 1) on a slice, some with pp not last.
                                            if (vpp == 1 && mb == 3) {
                                                p.etp = 1;
                                                if (gb == 24 && cp == 1)
                                                    p.rankOrder = {ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp};
                                            }
                                            // The head-split CP exchange on a slice (tiny's heads do not divide by every cp).
                                            if (vpp == 1 && gb == 24 && !sp) p.cpComm = mb == 1 ? CpComm::A2a : CpComm::AllGather;
                                            // Liger's fused linear loss on a slice (refused with tp > 1), some
                                            // with a trainer's metrics over the logits it never makes.
                                            if (gb == 24 && mb == 1 && vpp == 1 && !sp) {
                                                p.framework.crossEntropy = "fused_linear";
                                                if (cp == 2) p.framework.trainMetricLosses = 1;
                                            }
                                            // Megatron-core's recompute modules on a slice: the MoE layer and
                                            // its norms, which only the MoE models have.
                                            // Megatron-core's shared-expert overlap on a slice: no model here has
                                            // shared experts, so it is refused wherever the plan gets that far.
                                            if (gb == 24 && mb == 1 && vpp == 2 && sp) p.framework.moeSharedExpertOverlap = true;
                                            if (gb == 24 && mb == 3 && sp) {
                                                p.recompute = Recompute::Selective;
                                                p.recomputeModules = recompute_module::Moe | recompute_module::Layernorm;
                                            }
                                            // Megatron-core's EP overlap on a slice, some with full recompute.
                                            if (gb == 7 && mb == 1) {
                                                p.framework.moeA2aOverlap = true;
                                                if (sp) p.recompute = Recompute::Full;
                                            }
                                            ProblemList problems;
                                            validatePlan(model, cluster, p, "/plan", problems);
                                            const std::string want =
                                                problems.empty() ? "" : problemCategory(problems.items().front());
                                            ASSERT_EQ(rejectionReason(model, cluster, p), want)
                                                << model.name << " " << planToJson(p).dump();
                                            if (!want.empty()) {
                                                ++invalid;
                                                ++seen[want];
                                            }
                                        }
    EXPECT_GT(invalid, 10000);
    // Every category but "invalid degrees" (degrees < 1 never reach the search) is exercised.
    EXPECT_EQ(seen.size(), 32u);
    for (const auto& [reason, n] : seen) EXPECT_LT(reason.size(), 50u) << reason; // short names, not messages
}

// A soft-capping model (Gemma 2) on a GPU whose only fused attention kernel takes no soft-cap: the search rejects the
// flash plans under validatePlan's category, keeps the unfused ones, and on an H100 "auto" takes flash2.
TEST(SearchValidity, ASoftcappingModelNeedsAKernelThatCaps) {
    const ModelConfig model = test::preset("gemma2-9b");
    const ClusterConfig b200 = test::clusterPreset("dgx-b200"), h100 = test::clusterPreset("dgx-h100-80g");
    Plan p;
    p.dp = 8;
    p.globalBatch = 64;
    ProblemList problems;
    validatePlan(model, b200, p, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(rejectionReason(model, b200, p), problemCategory(problems.items().front()));
    EXPECT_EQ(rejectionReason(model, b200, p), "attention kernel without soft-cap");
    p.flashAttention = false;
    EXPECT_EQ(rejectionReason(model, b200, p), "");
    p.flashAttention = true;
    EXPECT_EQ(rejectionReason(model, h100, p), "");
}

TEST(SearchValidity, PrecisionIsCheckedForTheWholeSpace) {
    const ModelConfig model = test::preset("tiny");
    ClusterConfig cluster = smallNodes(8, 1, 80);
    cluster.gpu.peakFlopsPerSecond.erase(Dtype::Fp64);
    SearchSpace space = spaceFor(8, 16);
    space.precision = "cpu_fp64";
    try {
        searchPlans(model, cluster, space, {});
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "--precision");
    }
    // An FP8 recipe on a GPU without an FP8 peak is refused at the flag too, not deep in the cost of a plan.
    ClusterConfig noFp8 = smallNodes(8, 1, 80);
    noFp8.gpu.peakFlopsPerSecond.erase(Dtype::Fp8);
    for (const char* fp8 : {"fp8", "fsdp_fp8"}) {
        space.precision = fp8;
        const std::string why = test::inputErrorOf([&] { searchPlans(model, noFp8, space, {}); });
        EXPECT_EQ(why.rfind("--precision", 0), 0u) << why;
        EXPECT_NE(why.find("FP8"), std::string::npos) << why;
    }
}

// Placement and rank orders.
// Every plan of the grid tp x pp x cp x dp x ep (ep dividing dp) whose world fills whole nodes of gpn GPUs, under every
// rank order, and its twins whose expert layers have a layout of their own (folded: etp 1..3 other than tp, ep 1..4
// with etp x ep dividing tp x cp x dp; and with cp > 1 Megatron-core's from 0.10, ep dividing cp x dp) under every
// order with pp last, beside Megatron-core 0.9's carved layout under every order: fn(plan, gpn, cluster).
template <class Fn>
void forEachPlacedPlan(std::initializer_list<int> gpns, std::initializer_list<int> tps, std::initializer_list<int> pps,
                       std::initializer_list<int> cps, std::initializer_list<int> dps, Fn fn) {
    for (int gpn : gpns)
        for (int tp : tps)
            for (int pp : pps)
                for (int cp : cps)
                    for (int dp : dps)
                        for (int etp : {0, 1, 2, 3})
                            for (int ep : {1, 2, 3, 4})
                            for (bool carved : {false, true}) {
                                if (etp == tp) continue;
                                // etp 0 with cp > 1: Megatron-core's own expert layout (0.10 on), and 0.9's carved one.
                                if (carved && (etp != 0 || cp == 1 || ep == 1)) continue;
                                Plan p = test::plan3d(tp, pp, dp, 1, dp); // placement reads no batch
                                p.cp = cp;
                                p.ep = ep;
                                p.etp = etp;
                                if (carved) {
                                    p.framework.name = "megatron";
                                    p.framework.version = "core_r0.9.0";
                                }
                                if (!p.expertLayoutApart() ? (ep > 2 || dp % ep != 0) : (tp * cp * dp) % (p.expertTp() * ep) != 0)
                                    continue;
                                if (p.worldSize() % gpn != 0) continue;
                                const ClusterConfig c = smallNodes(gpn, p.worldSize() / gpn, 80);
                                for (const auto& o : permutations()) {
                                    if (p.expertLayoutApart() && o.back() != ParallelDim::Pp) continue;
                                    p.rankOrder = o;
                                    fn(p, gpn, c);
                                }
                            }
}

TEST(SearchPlacement, FastPlacementEqualsPlaceGroup) {
    int checked = 0;
    forEachPlacedPlan({2, 4, 8}, {1, 2, 4}, {1, 2, 4}, {1, 2}, {1, 2, 4}, [&](const Plan& p, int gpn, const ClusterConfig& c) {
        for (GroupKind g : {GroupKind::Tp, GroupKind::Cp, GroupKind::Ep, GroupKind::Dp, GroupKind::ExpertDp,
                            GroupKind::ExpertTp, GroupKind::DpCp, GroupKind::Pp, GroupKind::PpPair}) {
            const GroupPlacement want = placeGroup(p, c, g);
            const GroupPlacement got = detail::fastPlaceGroup(p, gpn, g);
            ASSERT_TRUE(detail::samePlacement(want, got))
                << toString(g) << " " << p.rankOrderString() << " tp" << p.tp << " pp" << p.pp << " cp" << p.cp << " dp"
                << p.dp << " ep" << p.ep << " etp" << p.etp << " gpn" << gpn;
            ++checked;
        }
    });
    EXPECT_GT(checked, 10000);
}

// Every rank visited, the slow way, against the shortcuts that visit a node's residues of them (stageRepresentatives,
// the fixed coordinates' residues mod the node size): nodes of 4, 6 and 8 GPUs, degrees of 3 and 6 among powers of
// two, so that world sizes are not multiples of the period and groups straddle nodes unevenly.
TEST(SearchPlacement, ShortcutsAgreeWithEveryRankVisited) {
    auto worst = [](const std::vector<GroupPlacement>& all) {
        GroupPlacement w{};
        bool any = false;
        for (const auto& p : all) {
            if (!any || worsePlacement(p, w)) w = p;
            any = true;
        }
        return w;
    };
    int checked = 0;
    forEachPlacedPlan({4, 6, 8}, {1, 2, 3}, {1, 2, 3, 4}, {1, 2}, {1, 2, 6}, [&](const Plan& p, int gpn, const ClusterConfig& c) {
        const int world = p.worldSize();
        for (GroupKind g : {GroupKind::Tp, GroupKind::Cp, GroupKind::Ep, GroupKind::Dp, GroupKind::ExpertDp,
                            GroupKind::ExpertTp, GroupKind::DpCp, GroupKind::PpPair}) {
            std::vector<GroupPlacement> every;
            for (int r = 0; r < world; ++r) {
                const std::vector<int> ranks = groupRanks(p, g, r);
                if (!ranks.empty()) every.push_back(placeRanks(ranks, gpn));
            }
            const GroupPlacement want = worst(every);
            ASSERT_TRUE(detail::samePlacement(want, placeGroup(p, c, g)))
                << toString(g) << " " << p.rankOrderString() << " world " << world << " gpn " << gpn << " etp " << p.etp;
            ASSERT_TRUE(detail::samePlacement(want, detail::fastPlaceGroup(p, gpn, g)))
                << toString(g) << " " << p.rankOrderString() << " world " << world << " gpn " << gpn << " etp " << p.etp;
            ++checked;
        }
        // Hybrid sharding: the shard and replica groups, runs of the whole data-parallel group, for each replica
        // count that divides it (placeGroup reads one leader a residue of the node size, not every group).
        for (GroupKind g : {GroupKind::ZeroShard, GroupKind::ZeroReplica, GroupKind::ExpertZeroShard,
                            GroupKind::ExpertZeroReplica}) {
            const bool expert = g == GroupKind::ExpertZeroShard || g == GroupKind::ExpertZeroReplica;
            const GroupKind whole = expert ? GroupKind::ExpertDp : p.cp > 1 ? GroupKind::DpCp : GroupKind::Dp;
            const int size = static_cast<int>(groupRanks(p, whole, 0).size());
            for (int replicas : {2, 3}) {
                if (size % replicas != 0) continue;
                Plan h = p;
                h.zeroStage = 1;
                h.zeroReplicas = replicas;
                std::vector<GroupPlacement> every;
                for (int r = 0; r < world; ++r) every.push_back(placeRanks(groupRanks(h, g, r), gpn));
                ASSERT_TRUE(detail::samePlacement(worst(every), placeGroup(h, c, g)))
                    << toString(g) << " x" << replicas << " " << p.rankOrderString() << " world " << world << " gpn " << gpn
                    << " etp " << p.etp;
                ++checked;
            }
        }
        // Each hop between two stages, and the cheapest hop of all (the bound's).
        GroupPlacement cheapest{};
        bool anyHop = false;
        for (int from = 0; from < p.pp; ++from)
            for (int to = 0; to < p.pp; ++to) {
                if (from == to) continue;
                std::vector<GroupPlacement> hops;
                for (int r = 0; r < world; ++r) {
                    RankCoords rc = rankCoords(p, r);
                    if (rc.pp != from) continue;
                    rc.pp = to;
                    hops.push_back(placeRanks({r, rankOf(p, rc)}, gpn));
                }
                const GroupPlacement want = worst(hops);
                ASSERT_TRUE(detail::samePlacement(want, placeStagePair(p, c, from, to)))
                    << from << "->" << to << " " << p.rankOrderString() << " world " << world;
                if (to != (from + 1) % p.pp) continue;
                for (const auto& h : hops)
                    if (!anyHop || worsePlacement(cheapest, h)) cheapest = h;
                anyHop = true;
            }
        if (p.pp > 1)
            ASSERT_TRUE(detail::samePlacement(cheapest, detail::innerPlacements(p, gpn).ppPair))
                << p.rankOrderString() << " world " << world << " gpn " << gpn;
    });
    EXPECT_GT(checked, 10000);
}

TEST(SearchPlacement, DistinctRankOrders) {
    Plan p;
    p.tp = 8;
    p.pp = 8;
    p.dp = 16;
    // Every dim of size 1 is irrelevant: at most 3! orders of tp, dp, pp.
    const auto orders = distinctRankOrders(p, 8);
    EXPECT_GE(orders.size(), 2u);
    EXPECT_LE(orders.size(), 6u);
    EXPECT_EQ(orders.front(), p.rankOrder); // the default order comes first
    // On one huge node every order is equivalent.
    EXPECT_EQ(distinctRankOrders(p, 1024).size(), 1u);
    // Orders the caller lists are kept in its order, minus duplicates in effect.
    const std::array<ParallelDim, 5> dpFirst{ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp};
    const auto listed = distinctRankOrders(p, 8, {dpFirst, p.rankOrder, dpFirst});
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0], dpFirst);
}

} // namespace
} // namespace tessel::sim
