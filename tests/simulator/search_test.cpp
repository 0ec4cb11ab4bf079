// The plan search against brute force: exhaustive counts, verdicts equal to validatePlan / predictMemory,
// top plans equal to the argmin of simulatePlan over every feasible plan, determinism, honest ties, options.
// Its shortcuts (the step bound, the fast memory and validity paths, placement) are in search_shortcuts_test.cpp.
#include "search_support.hpp"

#include "../../simulator/src/search_estimate.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/sim/search.hpp"
#include "tessel/sim/error_band.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <tuple>

namespace tessel::sim {
namespace {

using search_support::permutations;
using search_support::smallNodes;
using search_support::spaceFor;

std::vector<int> divisors(int n) {
    std::vector<int> out;
    for (int i = 1; i <= n; ++i)
        if (n % i == 0) out.push_back(i);
    return out;
}


// Independent of the search: dedupe rank orders by the placement (tessel::placeGroup) of every group the
// simulator costs, keeping the first permutation of each class.
std::vector<std::array<ParallelDim, 5>> ordersByPlacement(Plan plan, const ClusterConfig& cluster) {
    std::vector<std::array<ParallelDim, 5>> out;
    std::vector<std::vector<int>> seen;
    for (const auto& o : permutations()) {
        if (plan.expertLayoutApart() && o.back() != ParallelDim::Pp) continue; // the expert layout needs pp last
        plan.rankOrder = o;
        std::vector<int> key;
        std::vector<GroupKind> kinds{GroupKind::Tp, GroupKind::Cp, GroupKind::Ep, GroupKind::Dp, GroupKind::ExpertDp,
                                     GroupKind::DpCp, GroupKind::PpPair};
        // Hybrid sharding: the shard and replica groups too (the expert ones where the replicas split them).
        if (plan.zeroReplicas > 1) {
            kinds.insert(kinds.end(), {GroupKind::ZeroShard, GroupKind::ZeroReplica});
            if (plan.expertDp() % plan.zeroReplicas == 0)
                kinds.insert(kinds.end(), {GroupKind::ExpertZeroShard, GroupKind::ExpertZeroReplica});
        }
        for (GroupKind g : kinds) {
            const GroupPlacement p = placeGroup(plan, cluster, g);
            key.insert(key.end(), {p.size, p.nodes, p.ranksPerNode});
        }
        const std::vector<int> pipe = groupRanks(plan, GroupKind::Pp, 0);
        const GroupPlacement sync = placeRanks({pipe.front(), pipe.back()}, cluster.gpusPerNode);
        key.insert(key.end(), {sync.size, sync.nodes, sync.ranksPerNode});
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        out.push_back(o);
    }
    return out;
}

// The declared space of docs/search.md, by nested loops, with every plan's verdict from validatePlan and
// predictMemory.
struct BruteForce {
    uint64_t considered = 0;
    uint64_t feasible = 0;
    std::map<std::string, uint64_t> rejected;
    std::vector<Plan> feasiblePlans;
};

// The module sets the search tries under selective recompute when none is named (docs/search.md), for the models the
// brute force sees: the attention core, and for an MoE model without latent attention or shared experts moe_act,
// layernorm + moe_act and the whole MoE layer.
std::vector<uint8_t> selectiveSets(const ModelConfig& m) {
    namespace rm = recompute_module;
    EXPECT_FALSE(m.mla.has_value()) << "the brute force's sets are for models without latent attention";
    if (!m.moe) return {rm::CoreAttn};
    EXPECT_EQ(m.moe->sharedFfnHidden, 0);
    return {rm::CoreAttn, rm::MoeAct, rm::Layernorm | rm::MoeAct, rm::Moe};
}

BruteForce bruteForce(const ModelConfig& model, const ClusterConfig& cluster, int gpus, int globalBatch,
                      std::map<std::string, int> fixed = {}, const std::string& precision = "megatron",
                      bool hybrid = false,
                      std::vector<Schedule> schedules = {Schedule::Gpipe, Schedule::OneFOneB, Schedule::Interleaved1F1B,
                                                         Schedule::ZeroBubble},
                      std::pair<int, int> bf16Ends = {0, 0}) {
    BruteForce bf;
    auto pick = [&](const char* key, std::vector<int> all) {
        auto it = fixed.find(key);
        return it == fixed.end() ? all : std::vector<int>{it->second};
    };
    for (int tp : pick("tp", divisors(gpus)))
        for (int pp : pick("pp", divisors(gpus)))
            for (int cp : pick("cp", divisors(gpus))) {
                if (gpus % (tp * pp * cp) != 0) continue;
                const int dp = gpus / (tp * pp * cp);
                if (fixed.count("dp") && fixed["dp"] != dp) continue;
                // MoE: the experts over tp with EP inside dp (inside cp x dp with cp > 1: the plans' framework is
                // generic, laid out as Megatron-core 0.10 on), and (tp > 1) folded: whole experts, EP over
                // tp x cp x dp, SP on (docs/search.md).
                // Context parallelism's exchange: the ring, the all-to-all and the gather where cp > 1 and tp divides the
                // heads and the MLP and 2 x cp the sequence (elsewhere every plan is rejected whatever the exchange,
                // and the ring stands for them).
                const bool shapeRuns = model.heads % tp == 0 && model.kvHeads % tp == 0 && model.ffnHidden % tp == 0 &&
                                       model.seqLen % (2 * cp) == 0;
                for (CpComm comm : cp > 1 && shapeRuns ? std::vector<CpComm>{CpComm::P2p, CpComm::A2a, CpComm::AllGather}
                                                       : std::vector<CpComm>{CpComm::P2p})
                for (int etp : model.moe && tp > 1 ? std::vector<int>{0, 1} : std::vector<int>{0})
                for (int ep : pick("ep", !model.moe ? std::vector<int>{1} : etp ? divisors(tp * cp * dp) : divisors(cp * dp)))
                    for (int mb : pick("micro_batch", globalBatch % dp == 0 ? divisors(globalBatch / dp) : std::vector<int>{1}))
                        for (bool sp : etp ? std::vector<bool>{true} : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
                            for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
                              for (uint8_t modules : rc == Recompute::Selective ? selectiveSets(model)
                                                                                  : std::vector<uint8_t>{recompute_module::Default})
                                for (Schedule sch : schedules) {
                                    // With one stage ZB-H1 is 1F1B, and GPipe 1F1B holding more: not plans of their own.
                                    const bool has1f1b = std::find(schedules.begin(), schedules.end(), Schedule::OneFOneB) != schedules.end();
                                    if ((sch == Schedule::ZeroBubble || sch == Schedule::Gpipe) && pp == 1 && has1f1b) continue;
                                    const bool vShape = sch == Schedule::DualPipeV || sch == Schedule::ZeroBubbleV;
                                    if (vShape && pp == 1) continue;  // two chunks a rank, pp >= 2
                                    std::vector<int> vpps;
                                    if (vShape) vpps = {2};
                                    else if (sch != Schedule::Interleaved1F1B) vpps = {1};
                                    else
                                        for (int v = 2; v <= 8; ++v)
                                            if (model.layers % (pp * v) == 0) vpps.push_back(v);
                                    if (fixed.count("vpp")) {
                                        const int v = fixed["vpp"];
                                        vpps.erase(std::remove_if(vpps.begin(), vpps.end(), [&](int x) { return x != v; }), vpps.end());
                                    }
                                    for (int vpp : vpps)
                                        for (int zero : pick("zero_stage", {0, 1, 2, 3})) {
                                            Plan p;
                                            p.tp = tp;
                                            p.pp = pp;
                                            p.cp = cp;
                                            p.cpComm = comm;
                                            p.dp = dp;
                                            p.ep = ep;
                                            p.etp = etp;
                                            p.microBatch = mb;
                                            p.globalBatch = globalBatch;
                                            p.sequenceParallel = sp;
                                            p.recompute = rc;
                                            p.recomputeModules = modules;
                                            p.schedule = sch;
                                            p.vpp = vpp;
                                            p.zeroStage = zero;
                                            p.precision = precision;
                                            p.bf16LayersAtStart = bf16Ends.first;
                                            p.bf16LayersAtEnd = bf16Ends.second;
                                            // Depths that do not divide the layers take the balanced split (the
                                            // ends as a stage each where the stages outnumber the layers).
                                            if (model.layers % (pp * vpp) != 0)
                                                p.pipelineSplit = model.layers < pp * vpp ? PipelineSplit::EndsAsLayers : PipelineSplit::Balanced;
                                            // With hybrid sharding, ZeRO >= 1 plans also with their node-local replicas.
                                            std::vector<int> replicaChoices{1};
                                            if (hybrid && zero >= 1) {
                                                const int r = hybridShardingReplicas(model, p, cluster.gpusPerNode);
                                                if (r > 1) replicaChoices.push_back(r);
                                            }
                                            for (int r : replicaChoices) {
                                            p.zeroReplicas = r;
                                            p.rankOrder = Plan{}.rankOrder;
                                            const auto orders = p.expertLayoutApart() || dp % ep == 0 ? ordersByPlacement(p, cluster)
                                                                             : std::vector<std::array<ParallelDim, 5>>{p.rankOrder};
                                            for (const auto& o : orders) {
                                                p.rankOrder = o;
                                                ++bf.considered;
                                                ProblemList problems;
                                                validatePlan(model, cluster, p, "/plan", problems);
                                                if (!problems.empty()) {
                                                    ++bf.rejected[problemCategory(problems.items().front())];
                                                    continue;
                                                }
                                                const MemoryReport mem = predictMemory(model, cluster, p);
                                                if (!mem.fits) {
                                                    ++bf.rejected[mem.peakStage == 0 ? "OOM (stage 0)" : "OOM (a later stage)"];
                                                    continue;
                                                }
                                                ++bf.feasible;
                                                bf.feasiblePlans.push_back(p);
                                                // Beside a fitting full-recompute plan, the fewest layers of each
                                                // chunk recomputed that still fit (partial recompute), by a scan.
                                                if (rc != Recompute::Full) continue;
                                                const std::vector<int> chunks =
                                                    chunkLayerCounts(model, withResolvedPipelineSplit(model, cluster, p));
                                                const int most = *std::max_element(chunks.begin(), chunks.end());
                                                for (int n = 1; n < most; ++n) {
                                                    Plan q = p;
                                                    q.recomputeLayers = n;
                                                    if (!predictMemory(model, cluster, q).fits) continue;
                                                    ++bf.considered;
                                                    ++bf.feasible;
                                                    bf.feasiblePlans.push_back(q);
                                                    break;
                                                }
                                            }
                                            }
                                        }
                                }
            }
    return bf;
}


void expectSameCounts(const SearchResult& r, const BruteForce& bf) {
    EXPECT_EQ(r.considered, bf.considered);
    EXPECT_EQ(r.feasible, bf.feasible);
    EXPECT_EQ(r.rejected, bf.rejected);
    uint64_t rejected = 0;
    for (const auto& [reason, n] : r.rejected) rejected += n;
    EXPECT_EQ(r.feasible + rejected, r.considered);
}

// (a) Exhaustiveness: counts and every verdict agree with nested loops over validatePlan and predictMemory.
TEST(Search, CountsEqualBruteForceOnOneNode) {
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(8, 1, 80);
    const SearchResult r = searchPlans(model, cluster, spaceFor(8, 16), {});
    const BruteForce bf = bruteForce(model, cluster, 8, 16);
    EXPECT_GT(bf.considered, 1000u);
    EXPECT_GT(bf.rejected.size(), 3u); // several reasons occur, not just one
    expectSameCounts(r, bf);
}

TEST(Search, CountsEqualBruteForceAcrossNodesWithOom) {
    // 16 GPUs on 4-GPU nodes: rank orders matter; 6 GiB GPUs make gpt3-1.3b run out of memory on some stages.
    const ModelConfig model = test::preset("gpt3-1.3b");
    const ClusterConfig cluster = smallNodes(4, 4, 6);
    const SearchSpace space = spaceFor(16, 32, {{"micro_batch", 1}});
    const SearchResult r = searchPlans(model, cluster, space, {});
    const BruteForce bf = bruteForce(model, cluster, 16, 32, {{"micro_batch", 1}});
    EXPECT_GT(bf.rejected.count("OOM (stage 0)"), 0u);
    EXPECT_GT(bf.rejected.count("OOM (a later stage)"), 0u);
    EXPECT_GT(bf.feasible, 0u);
    expectSameCounts(r, bf);
}

TEST(Search, CountsEqualBruteForceForMoe) {
    const ModelConfig model = test::preset("tiny-moe");
    const ClusterConfig cluster = smallNodes(4, 2, 80);
    const SearchResult r = searchPlans(model, cluster, spaceFor(8, 8), {});
    const BruteForce bf = bruteForce(model, cluster, 8, 8);
    EXPECT_GT(r.feasible, 0u);
    // ep > 1 plans exist among the feasible ones
    EXPECT_TRUE(std::any_of(bf.feasiblePlans.begin(), bf.feasiblePlans.end(), [](const Plan& p) { return p.ep > 1; }));
    expectSameCounts(r, bf);
}

TEST(Search, FixingAKeyPartitionsTheSpace) {
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(4, 2, 80);
    const SearchResult all = searchPlans(model, cluster, spaceFor(8, 16), {});
    uint64_t considered = 0, feasible = 0;
    for (int tp : divisors(8)) {
        SearchOptions o;
        o.topK = 3;
        const SearchResult part = searchPlans(model, cluster, spaceFor(8, 16, {{"tp", tp}}), o);
        considered += part.considered;
        feasible += part.feasible;
        for (const auto& r : part.top) EXPECT_EQ(r.plan.tp, tp);
    }
    EXPECT_EQ(considered, all.considered);
    EXPECT_EQ(feasible, all.feasible);
}

// (b) Pruning never changes the answer: the top K equal the K best simulated plans over every feasible plan.
struct Simulated {
    Plan plan;
    double step = 0.0;
    double peak = 0.0;
};

std::vector<Simulated> simulateAll(const ModelConfig& model, const ClusterConfig& cluster, const BruteForce& bf) {
    std::vector<Simulated> out;
    for (const Plan& p : bf.feasiblePlans) {
        const PlanSimulation sim = simulatePlan(model, cluster, p);
        out.push_back({p, sim.metrics.stepSeconds, sim.memory.peakBytes});
    }
    return out;
}

void expectTopMatches(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                      const std::map<std::string, int>& fixed) {
    const BruteForce bf =
        bruteForce(model, cluster, space.gpus, space.globalBatch, fixed, space.precision, space.hybridSharding,
                   space.schedules.empty() ? std::vector<Schedule>{Schedule::Gpipe, Schedule::OneFOneB,
                                                                   Schedule::Interleaved1F1B, Schedule::ZeroBubble}
                                           : space.schedules,
                   {space.bf16LayersAtStart, space.bf16LayersAtEnd});
    ASSERT_GT(bf.feasible, 10u);
    std::vector<Simulated> all = simulateAll(model, cluster, bf);
    for (Objective objective : {Objective::Time, Objective::Memory, Objective::TokensPerDollar}) {
        SCOPED_TRACE(toString(objective));
        SearchOptions o;
        o.topK = 5;
        o.objective = objective;
        const SearchResult r = searchPlans(model, cluster, space, o);
        ASSERT_EQ(r.top.size(), 5u);
        EXPECT_LE(r.simulated, r.feasible);
        std::vector<double> want;
        // Partial recompute is a time objective's variant (it never holds less than recomputing every layer of its
        // plan): a memory search does not rank it.
        for (const auto& s : all)
            if (objective != Objective::Memory || s.plan.recomputeLayers == 0)
                want.push_back(objective == Objective::Memory ? s.peak : s.step);
        std::sort(want.begin(), want.end());
        for (size_t i = 0; i < r.top.size(); ++i) {
            const double got = objective == Objective::Memory ? r.top[i].peakBytes : r.top[i].metrics.stepSeconds;
            EXPECT_NEAR(got, want[i], 1e-12 * want[i]) << "rank " << i + 1;
        }
        // The winner is an argmin of the brute force, and its metrics are simulatePlan's.
        const Plan& best = r.top[0].plan;
        const PlanSimulation sim = simulatePlan(model, cluster, best);
        EXPECT_DOUBLE_EQ(sim.metrics.stepSeconds, r.top[0].metrics.stepSeconds);
        EXPECT_DOUBLE_EQ(sim.memory.peakBytes, r.top[0].peakBytes);
        if (objective == Objective::TokensPerDollar) {
            EXPECT_GT(r.top[0].tokensPerDollar, 0.0);
            for (size_t i = 1; i < r.top.size(); ++i) EXPECT_GE(r.top[i - 1].tokensPerDollar, r.top[i].tokensPerDollar);
        }
        for (const auto& t : r.top) {
            EXPECT_FALSE(t.why.empty());
            EXPECT_LE(t.lowerBoundSeconds, t.metrics.stepSeconds * (1.0 + 1e-9));
        }
        if (objective == Objective::Time) {
            EXPECT_LT(r.simulated, r.feasible); // the bound pruned something
        }
    }
}

TEST(Search, TopPlansEqualBruteForceArgminOnOneNode) {
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(8, 1, 80);
    expectTopMatches(model, cluster, spaceFor(8, 16), {});
}

TEST(Search, TopPlansEqualBruteForceArgminAcrossNodes) {
    const ModelConfig model = test::preset("gpt3-1.3b");
    const ClusterConfig cluster = smallNodes(4, 4, 16);
    const std::map<std::string, int> fixed{{"micro_batch", 1}};
    expectTopMatches(model, cluster, spaceFor(16, 32, fixed), fixed);
}

TEST(Search, TopPlansEqualBruteForceArgminForMoe) {
    const ModelConfig model = test::preset("tiny-moe");
    const ClusterConfig cluster = smallNodes(4, 2, 80);
    expectTopMatches(model, cluster, spaceFor(8, 8), {});
}

// An FP8 plan's BF16 end layers (first_last_layers_bf16) are the space's: every plan keeps them, the counts and verdicts
// agree with the loops and the top plans with the brute-force argmin. At this size a BF16 layer is the cheaper kind
// (FP8's casts outweigh its GEMMs), so a bound that priced every layer as FP8 would prune best plans.
TEST(Search, TopPlansEqualBruteForceArgminWithBf16EndLayers) {
    const ModelConfig model = test::preset("tiny");
    ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    cluster.nodes = 1;
    cluster.host = {};
    cluster.gpu.reservedBytes = 0;
    SearchSpace space = spaceFor(8, 16);
    space.precision = "fp8";
    space.bf16LayersAtStart = 1;
    space.bf16LayersAtEnd = 1;
    Plan probe = test::plan3d(1, 1, 8, 1, 16, "generic", "");
    probe.precision = "fp8";
    const double fp8Layer = layerCompute(model, cluster, probe, precisionRecipeOf(probe)).forward.seconds;
    const Plan bf16 = bf16EndLayerPlan(probe);
    ASSERT_LT(layerCompute(model, cluster, bf16, precisionRecipeOf(bf16)).forward.seconds, fp8Layer);
    expectTopMatches(model, cluster, space, {});
    const SearchResult r = searchPlans(model, cluster, space, {});
    ASSERT_FALSE(r.top.empty());
    for (const RankedPlan& t : r.top) EXPECT_TRUE(t.plan.bf16LayersAtStart == 1 && t.plan.bf16LayersAtEnd == 1);
    expectSameCounts(r, bruteForce(model, cluster, 8, 16, {}, "fp8", false,
                                   {Schedule::Gpipe, Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubble},
                                   {1, 1}));
    // A recipe without a quantized context to keep them out of is the space's problem, said once at the plan's key.
    space.precision = "megatron";
    bool named = false;
    for (const Problem& p : searchProblems(model, cluster, space, {})) named |= p.where == "/plan/first_last_layers_bf16";
    EXPECT_TRUE(named);
}

// DualPipeV is searched when asked for (schedule=dualpipev): its plans' counts and verdicts agree with the loops, and
// its top plans with the brute-force argmin, so the bound's V branch never prunes a best plan (dense and MoE).
TEST(Search, DualPipeVWhenAskedEqualsBruteForce) {
    for (Schedule sch : {Schedule::DualPipeV, Schedule::ZeroBubbleV})
        for (const char* name : {"tiny", "tiny-moe"}) {
            SCOPED_TRACE(std::string(name) + " " + toString(sch));
            const ModelConfig model = test::preset(name);
            const ClusterConfig cluster = smallNodes(4, 2, 80);
            SearchSpace space = spaceFor(8, 32);
            space.schedules = {sch};
            const SearchResult r = searchPlans(model, cluster, space, {});
            const BruteForce bf = bruteForce(model, cluster, 8, 32, {}, "megatron", false, {sch});
            EXPECT_GT(bf.feasible, 10u);
            expectSameCounts(r, bf);
            for (const Plan& p : bf.feasiblePlans) ASSERT_EQ(p.schedule, sch);
            expectTopMatches(model, cluster, space, {});
        }
}

// Hybrid sharding as a dimension: every ZeRO >= 1 plan also with its state in node-local replicas (4-GPU nodes,
// so a ZeRO group of 16 ranks at tp 1 gives 4 replicas of 4). Counts, verdicts and the argmin agree with the loops.
TEST(Search, PartialRecomputeIsTheFastestPlanWhereOnlyRecomputeFits) {
    // GPT-3 1.3B (24 layers) on one node, the shape fixed, and a GPU between what every layer recomputed and
    // no recompute need: the search's #1 recomputes the fewest layers that fit (a scan over predictMemory says
    // which), faster than recomputing all 24.
    const ModelConfig model = test::preset("gpt3-1.3b");
    Plan p;
    p.dp = 8;
    p.microBatch = 8;
    p.globalBatch = 64;
    p.zeroStage = 1;
    ClusterConfig cluster = smallNodes(8, 1, 80);
    Plan none = p, full = p;
    full.recompute = Recompute::Full;
    const double noneBytes = predictMemory(model, cluster, none).peakBytes;
    const double fullBytes = predictMemory(model, cluster, full).peakBytes;
    ASSERT_LT(fullBytes, noneBytes);
    cluster.gpu.memoryBytes = static_cast<int64_t>((noneBytes + fullBytes) / 2.0);
    int least = 0;
    for (int n = 1; n < model.layers && least == 0; ++n) {
        Plan q = full;
        q.recomputeLayers = n;
        if (predictMemory(model, cluster, q).fits) least = n;
    }
    ASSERT_GT(least, 1);
    ASSERT_LT(least, model.layers - 1);
    SearchSpace space = spaceFor(8, 64, {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"micro_batch", 8}, {"zero_stage", 1}});
    space.sequenceParallel = {false};
    SearchOptions o;
    o.topK = 3;
    const SearchResult r = searchPlans(model, cluster, space, o);
    ASSERT_FALSE(r.top.empty());
    const Plan& best = r.top.front().plan;
    EXPECT_EQ(best.recompute, Recompute::Full);
    EXPECT_EQ(best.recomputeLayers, least);
    EXPECT_LT(r.top.front().metrics.stepSeconds, simulatePlan(model, cluster, full).metrics.stepSeconds);
    EXPECT_NE(r.top.front().why.find("fastest"), std::string::npos);
    // Without the dimension, full recompute of every layer is the best there is.
    space.partialRecompute = false;
    const SearchResult without = searchPlans(model, cluster, space, o);
    ASSERT_FALSE(without.top.empty());
    EXPECT_EQ(without.top.front().plan.recomputeLayers, 0);
    EXPECT_LT(without.considered, r.considered);
}

TEST(Search, HybridShardingAddsTheNodeLocalVariantOfEveryShardedPlan) {
    const ModelConfig model = test::preset("gpt3-1.3b");
    const ClusterConfig cluster = smallNodes(4, 4, 16);
    SearchSpace space = spaceFor(16, 32, {{"micro_batch", 1}});
    space.hybridSharding = true;
    const SearchResult r = searchPlans(model, cluster, space, {});
    const BruteForce bf = bruteForce(model, cluster, 16, 32, {{"micro_batch", 1}}, "megatron", true);
    expectSameCounts(r, bf);
    const BruteForce plain = bruteForce(model, cluster, 16, 32, {{"micro_batch", 1}});
    EXPECT_GT(bf.considered, plain.considered);
    size_t hybrid = 0;
    for (const Plan& p : bf.feasiblePlans) hybrid += p.zeroReplicas > 1;
    EXPECT_GT(hybrid, 0u);
    Plan p;
    p.dp = 16;
    EXPECT_EQ(hybridShardingReplicas(model, p, 4), 4); // 16 ranks, 4 on a node
    p.tp = 4;
    p.dp = 4;
    EXPECT_EQ(hybridShardingReplicas(model, p, 4), 4); // one data-parallel rank per node: shards of one
    p.tp = 1;
    p.dp = 4;
    EXPECT_EQ(hybridShardingReplicas(model, p, 4), 1); // the whole group is one node
    expectTopMatches(model, cluster, space, {{"micro_batch", 1}});
    // With experts: their data-parallel group splits too, where the replicas divide it.
    const ModelConfig moe = test::preset("tiny-moe");
    const ClusterConfig twoNodes = smallNodes(4, 2, 80);
    SearchSpace moeSpace = spaceFor(8, 8);
    moeSpace.hybridSharding = true;
    expectSameCounts(searchPlans(moe, twoNodes, moeSpace, {}), bruteForce(moe, twoNodes, 8, 8, {}, "megatron", true));
    // Folded experts (etp 1 under tp 2) with pipeline stages: their hybrid variants keep the expert layout's rule that
    // pp comes last in the rank order (the search once tried every order there and stopped with an InputError).
    const ClusterConfig fourNodes = smallNodes(4, 4, 80);
    const std::map<std::string, int> folded{{"tp", 2}, {"pp", 2}, {"micro_batch", 1}, {"zero_stage", 1}};
    SearchSpace foldedSpace = spaceFor(16, 16, folded);
    foldedSpace.hybridSharding = true;
    const BruteForce foldedBf = bruteForce(moe, fourNodes, 16, 16, folded, "megatron", true);
    size_t foldedHybrid = 0;
    for (const Plan& p : foldedBf.feasiblePlans) foldedHybrid += p.expertFolded() && p.zeroReplicas > 1;
    EXPECT_GT(foldedHybrid, 0u);
    expectSameCounts(searchPlans(moe, fourNodes, foldedSpace, {}), foldedBf);
}

TEST(Search, AskingForEveryPlanSimulatesEveryFeasiblePlan) {
    // K above the feasible count: the candidates within the first bound band run out before K plans are
    // ranked, so further pruning passes collect the next bands; the ranking must still be the brute force's.
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(4, 2, 80);
    const std::map<std::string, int> fixed{{"zero_stage", 1}};
    const BruteForce bf = bruteForce(model, cluster, 8, 16, fixed);
    std::vector<double> want;
    for (const auto& s : simulateAll(model, cluster, bf)) want.push_back(s.step);
    std::sort(want.begin(), want.end());
    std::vector<double> bounds;
    for (const Plan& p : bf.feasiblePlans) bounds.push_back(stepLowerBoundSeconds(model, cluster, p));
    std::sort(bounds.begin(), bounds.end());
    ASSERT_GT(bounds.back(), 4.0 * bounds.front()) << "the bounds span several bands";
    SearchOptions o;
    o.topK = static_cast<int>(bf.feasible) + 10;
    const SearchResult r = searchPlans(model, cluster, spaceFor(8, 16, fixed), o);
    EXPECT_EQ(r.simulated, bf.feasible);
    ASSERT_EQ(r.top.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.top[i].metrics.stepSeconds, want[i], 1e-12 * want[i]);
}

// (c) Determinism: the same answer on one thread and on several.
TEST(Search, SameResultOnOneAndSeveralThreads) {
    const ModelConfig model = test::preset("gpt3-1.3b");
    const ClusterConfig cluster = smallNodes(4, 4, 16);
    std::vector<SearchResult> results;
    for (int threads : {1, 2, 3}) {
        SearchOptions o;
        o.threads = threads;
        o.topK = 8;
        results.push_back(searchPlans(model, cluster, spaceFor(16, 64), o));
    }
    for (size_t k = 1; k < results.size(); ++k) {
        const SearchResult& a = results[0];
        const SearchResult& b = results[k];
        EXPECT_EQ(a.considered, b.considered);
        EXPECT_EQ(a.feasible, b.feasible);
        EXPECT_EQ(a.simulated, b.simulated);
        EXPECT_EQ(a.rejected, b.rejected);
        ASSERT_EQ(a.top.size(), b.top.size());
        for (size_t i = 0; i < a.top.size(); ++i) {
            EXPECT_EQ(planToJson(a.top[i].plan), planToJson(b.top[i].plan));
            EXPECT_EQ(a.top[i].metrics.stepSeconds, b.top[i].metrics.stepSeconds);
            EXPECT_EQ(a.top[i].why, b.top[i].why);
        }
    }
}

// Honest ranking: every plan carries its kind's validated error band, and a plan is a tie with #1 exactly when its
// step is inside #1's band.
// GPT-3 175B (the default scenario) on 64 A100 with tp 8 and pp 8 pinned, on Megatron-LM: a search of a second.
SearchSpace gpt3On64WithTp8Pp8() {
    SearchSpace space;
    space.gpus = 64;
    space.globalBatch = 256;
    space.fixed = {{"tp", 8}, {"pp", 8}};
    space.framework.name = "megatron";
    return space;
}

TEST(SearchHonesty, TiesAreThePlansInsideTheBestPlansBand) {
    Scenario s = defaultScenario();
    SearchOptions o;
    o.topK = 8;
    const SearchResult r = searchPlans(s.model, s.cluster, gpt3On64WithTp8Pp8(), o);
    ASSERT_GE(r.top.size(), 2u);
    const auto band = errorBandFor(s.cluster, r.top.front().plan, s.model.moe.has_value());
    ASSERT_TRUE(band.has_value());
    EXPECT_FALSE(r.top.front().tiedWithBest);
    for (size_t i = 0; i < r.top.size(); ++i) {
        EXPECT_EQ(r.top[i].errorBandKind, "A100 / Megatron-style");
        EXPECT_DOUBLE_EQ(r.top[i].errorBand, band->medianAbsError);
        if (i > 0)
            EXPECT_EQ(r.top[i].tiedWithBest,
                      r.top[i].metrics.stepSeconds <= r.top[0].metrics.stepSeconds * (1.0 + band->medianAbsError));
        if (r.top[i].tiedWithBest) EXPECT_NE(r.top[i].why.find("a tie with #1"), std::string::npos);
    }
}

// Plans of two kinds: a tie is judged on the wider of the two plans' bands. Llama-3-8B at 8k tokens on 16 A100s:
// #1 runs without context parallelism (its kind's band, A100 Megatron-style, 3.0%), and plans with it (no A100 run
// has cp > 1, so every context-parallel run's band, 5.0%) up to that far behind are ties with it, though outside
// #1's own band.
TEST(SearchHonesty, ATieIsJudgedOnTheWiderOfTheTwoPlansBands) {
    Scenario s = defaultScenario();
    s.model = loadModelRef("llama3-8b", "model");
    // Where context parallelism and plain data parallelism are close (at 8192 tokens CP plans sit 1-5% behind).
    s.model.seqLen = 8192;
    s.cluster = test::clusterPreset("dgx-a100-80g");
    SearchSpace space; // as `tessel search --cluster dgx-a100-80g --gpus 16 --global-batch 16 --framework megatron`
    space.gpus = 16;
    space.globalBatch = 16;
    space.precision = s.plan.precision;
    space.flashAttention = s.plan.flashAttention;
    space.attentionKernel = s.plan.attentionKernel;
    space.framework.name = "megatron";
    space.runnableBy = exportFormatOf("megatron");
    SearchOptions o;
    o.topK = 32;
    const SearchResult r = searchPlans(s.model, s.cluster, space, o);
    ASSERT_GE(r.top.size(), 2u);
    const auto best = errorBandFor(s.cluster, r.top.front().plan, s.model.moe.has_value());
    ASSERT_TRUE(best.has_value());
    const bool bestCp = r.top.front().plan.cp > 1;
    int otherKind = 0, tiedOnlyByTheWiderBand = 0;
    for (size_t i = 1; i < r.top.size(); ++i) {
        const auto own = errorBandFor(s.cluster, r.top[i].plan, s.model.moe.has_value());
        ASSERT_TRUE(own.has_value());
        EXPECT_EQ(r.top[i].errorBandKind, own->kind);
        if ((r.top[i].plan.cp > 1) != bestCp) {
            ++otherKind;
            EXPECT_NE(own->kind, best->kind) << i;
        }
        const double behind = r.top[i].metrics.stepSeconds / r.top[0].metrics.stepSeconds - 1.0;
        const double band = std::max(own->medianAbsError, best->medianAbsError);
        EXPECT_EQ(r.top[i].tiedWithBest, behind <= band) << i;
        if (r.top[i].tiedWithBest && behind > std::min(own->medianAbsError, best->medianAbsError))
            ++tiedOnlyByTheWiderBand;
    }
    // Plans with and without context parallelism are both near the top, each kind with its own band ...
    EXPECT_GT(otherKind, 0);
    // ... and some plan is a tie only because the wider of the two bands covers it.
    EXPECT_GT(tiedOnlyByTheWiderBand, 0);
}

// The peak's band (error_band.hpp): GPT-3 175B on 64 A100 with tp 8 pp 8 under DeepSpeed's pipeline engine, whose
// published peaks (BLOOM's) ran 23% over tessel at the median. Off, the fastest plans are marked at risk; on, the search
// leaves those out as OOM plans are, counts them under their own reason, and ranks the fastest of the rest, none at
// risk. A Megatron-style search, whose family's published peaks (Megatron-LM's own) are within about 1%, marks only
// the plans within that of the GPU's memory.
TEST(SearchHonesty, ThePeakBandMarksOrLeavesOutPlansThatMayNotFit) {
    Scenario s = defaultScenario();
    SearchSpace space = gpt3On64WithTp8Pp8();
    space.framework.name = "deepspeed";
    SearchOptions o;
    o.topK = 8;
    Plan pipelined;
    pipelined.framework = space.framework;
    pipelined.pp = 8;
    const auto band = memoryBandFor(pipelined);
    ASSERT_TRUE(band.has_value());
    EXPECT_EQ(band->kind, "DeepSpeed pipeline");
    const double capacity = static_cast<double>(s.cluster.gpu.memoryBytes);
    const char* const reason = "may not fit (the validated peak band reaches past the GPU's memory)";
    const SearchResult off = searchPlans(s.model, s.cluster, space, o);
    ASSERT_FALSE(off.top.empty());
    int atRisk = 0;
    for (const auto& r : off.top) {
        EXPECT_EQ(r.memoryAtRisk, memoryVerdict(r.peakBytes, r.reservedPeakBytes, capacity, band) == MemoryVerdict::MayNotFit);
        atRisk += r.memoryAtRisk ? 1 : 0;
    }
    EXPECT_TRUE(off.top.front().memoryAtRisk);
    EXPECT_EQ(off.rejected.count(reason), 0u);
    space.memoryBand = true;
    const SearchResult on = searchPlans(s.model, s.cluster, space, o);
    ASSERT_FALSE(on.top.empty());
    for (const auto& r : on.top) {
        EXPECT_FALSE(r.memoryAtRisk);
        EXPECT_LE(r.reservedPeakBytes, capacity * (1.0 - band->medianAbsError)); // the band on the reserved peak
        EXPECT_GE(r.reservedPeakBytes, r.peakBytes);
    }
    ASSERT_EQ(on.rejected.count(reason), 1u);
    EXPECT_GE(on.rejected.at(reason), static_cast<uint64_t>(atRisk));
    // What fits only at the band costs time: the best plan left is no faster than the best plan at risk.
    EXPECT_GE(on.top.front().metrics.stepSeconds, off.top.front().metrics.stepSeconds);
    // Megatron-LM: its own family's band, far narrower; a plan is marked only within it of the GPU's memory.
    SearchSpace megatron = gpt3On64WithTp8Pp8();
    Plan megatronPlan;
    megatronPlan.framework = megatron.framework;
    const auto mBand = memoryBandFor(megatronPlan);
    ASSERT_TRUE(mBand.has_value());
    EXPECT_EQ(mBand->kind, "Megatron-style");
    EXPECT_LT(mBand->medianAbsError, band->medianAbsError);
    const SearchResult m = searchPlans(s.model, s.cluster, megatron, o);
    ASSERT_FALSE(m.top.empty());
    for (const auto& r : m.top) {
        EXPECT_EQ(r.memoryAtRisk, memoryVerdict(r.peakBytes, r.reservedPeakBytes, capacity, mBand) == MemoryVerdict::MayNotFit);
        EXPECT_EQ(r.memoryAtRisk,
                  std::max(r.peakBytes, r.reservedPeakBytes) > capacity * (1.0 - mBand->medianAbsError) && r.peakBytes <= capacity);
    }
}

// Options, errors, progress and cancellation.
TEST(SearchInput, BadSpacesListEveryProblem) {
    const ModelConfig model = test::preset("tiny");
    ClusterConfig cluster = smallNodes(8, 1, 80);
    cluster.pricePerGpuHour = 0.0;
    SearchSpace space = spaceFor(12, 0, {{"tq", 2}, {"zero_stage", 5}});
    SearchOptions o;
    o.objective = Objective::TokensPerDollar;
    o.topK = 0;
    try {
        searchPlans(model, cluster, space, o);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        std::set<std::string> where;
        for (const auto& p : e.problems()) where.insert(p.where);
        for (const char* w : {"--gpus", "--global-batch", "--fix tq", "--fix zero_stage", "--top", "--objective"})
            EXPECT_TRUE(where.count(w)) << w;
    }
}

TEST(SearchInput, GpusResizeTheCluster) {
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(8, 1, 80);
    SearchOptions o;
    o.topK = 1;
    const SearchResult r = searchPlans(model, cluster, spaceFor(16, 16), o);
    ASSERT_EQ(r.top.size(), 1u);
    EXPECT_EQ(r.top[0].plan.worldSize(), 16);
    const SearchResult part = searchPlans(model, cluster, spaceFor(4, 16), o); // half a node
    ASSERT_EQ(part.top.size(), 1u);
    EXPECT_EQ(part.top[0].plan.worldSize(), 4);
    EXPECT_THROW(searchPlans(model, cluster, spaceFor(12, 16), o), InputError);
}

TEST(SearchOptions, ProgressIsMonotoneAndEndsAtOne) {
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(8, 1, 80);
    std::vector<double> seen;
    std::mutex m;
    SearchOptions o;
    o.progress = [&](double f) {
        std::lock_guard<std::mutex> lock(m);
        seen.push_back(f);
    };
    searchPlans(model, cluster, spaceFor(8, 16), o);
    ASSERT_FALSE(seen.empty());
    EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end(), std::greater_equal<double>()) == seen.end())
        << "strictly increasing";
    EXPECT_DOUBLE_EQ(seen.back(), 1.0);
}

TEST(SearchOptions, CancelStopsEarly) {
    const ModelConfig model = test::preset("tiny");
    const ClusterConfig cluster = smallNodes(8, 1, 80);
    std::atomic<bool> cancel{true};
    SearchOptions o;
    o.cancel = &cancel;
    const SearchResult r = searchPlans(model, cluster, spaceFor(8, 16), o);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.considered, 0u);
    EXPECT_TRUE(r.top.empty());
}

TEST(SearchOptions, WhyNamesTheComparison) {
    const ModelConfig model = test::preset("gpt3-1.3b");
    const ClusterConfig cluster = smallNodes(4, 4, 16);
    SearchOptions o;
    o.topK = 3;
    const SearchResult r = searchPlans(model, cluster, spaceFor(16, 32, {{"micro_batch", 1}}), o);
    ASSERT_EQ(r.top.size(), 3u);
    EXPECT_EQ(r.top[0].why.rfind("fastest: ", 0), 0u) << r.top[0].why;
    EXPECT_NE(r.top[0].why.find("#2"), std::string::npos) << r.top[0].why;
    EXPECT_NE(r.top[1].why.find("slower than #1"), std::string::npos) << r.top[1].why;
    EXPECT_NE(r.top[2].why.find("#2"), std::string::npos) << r.top[2].why;
    o.objective = Objective::Memory;
    const SearchResult mem = searchPlans(model, cluster, spaceFor(16, 32, {{"micro_batch", 1}}), o);
    EXPECT_EQ(mem.top[0].why.rfind("least memory: ", 0), 0u) << mem.top[0].why;
}

TEST(SearchOptions, ObjectiveNamesRoundTrip) {
    for (Objective o : {Objective::Time, Objective::Memory, Objective::TokensPerDollar})
        EXPECT_EQ(parseObjective(toString(o)), o);
    EXPECT_FALSE(parseObjective("speed").has_value());
}

} // namespace
} // namespace tessel::sim
