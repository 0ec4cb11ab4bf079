// Schedule generators: hand-checked orders and invariants over a grid of pipeline shapes and plans.
#include "../cost_models/test_support.hpp"

#include "tessel/cost/memory.hpp"
#include "tessel/sim/schedule.hpp"

#include <gtest/gtest.h>

#include <array>

#include <set>

#include <vector>

namespace tessel::sim {
namespace {

std::string orderText(const std::vector<Action>& order) {
    std::string s;
    for (const auto& a : order) {
        if (!s.empty()) s += ' ';
        const char* k = a.kind == ActionKind::Forward ? "F"
                        : a.kind == ActionKind::Backward ? "B"
                        : a.kind == ActionKind::BackwardInput ? "b"
                                                              : "W";
        s += k + std::to_string(a.microBatch);
        if (a.chunk > 0) s += "." + std::to_string(a.chunk);
    }
    return s;
}

Plan pipelinePlan(int pp, int m, Schedule schedule, int vpp = 1) {
    Plan p;
    p.pp = pp;
    p.vpp = vpp;
    p.globalBatch = m;
    p.schedule = schedule;
    return p;
}

// The dependency list keeps two inline and the rest on the heap, in order, through every operation the schedule
// builder uses: push_back past the inline two, insert at the front and at the end, copy and move.
TEST(DependencyList, KeepsOrderInlineAndOnTheHeap) {
    auto dep = [](int i) { return Dependency{0, i, Dependency::When::End, 1.0, 0.0}; };
    auto indices = [](const DependencyList& l) {
        std::vector<int> out;
        for (const Dependency& d : l) out.push_back(d.index);
        return out;
    };
    DependencyList l;
    EXPECT_TRUE(l.empty());
    l.push_back(dep(1));
    l.push_back(dep(2));
    EXPECT_EQ(indices(l), (std::vector<int>{1, 2}));
    l.insert(l.begin(), dep(0)); // the receive's send goes first (buildSchedule)
    EXPECT_EQ(indices(l), (std::vector<int>{0, 1, 2}));
    const std::vector<Dependency> more{dep(3), dep(4)};
    l.insert(l.end(), more.begin(), more.end());
    l.push_back(dep(5));
    EXPECT_EQ(indices(l), (std::vector<int>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(l.size(), 6u);
    EXPECT_EQ(l.front().index, 0);
    EXPECT_EQ(l.back().index, 5);
    EXPECT_EQ(l[3].index, 3);
    EXPECT_EQ(l.end() - l.begin(), 6); // contiguous
    DependencyList copy = l;
    EXPECT_EQ(indices(copy), indices(l));
    DependencyList moved = std::move(copy);
    EXPECT_EQ(indices(moved), indices(l));
    EXPECT_TRUE(copy.empty()); // NOLINT: a moved-from list is empty
    DependencyList small;
    small.push_back(dep(7));
    small.insert(small.begin(), dep(6));
    EXPECT_EQ(indices(small), (std::vector<int>{6, 7}));
    moved = small; // back to inline
    EXPECT_EQ(indices(moved), (std::vector<int>{6, 7}));
    moved.push_back(dep(8));
    EXPECT_EQ(indices(moved), (std::vector<int>{6, 7, 8}));
    EXPECT_EQ(indices(small), (std::vector<int>{6, 7}));
}

TEST(ScheduleOrder, OneFOneBByHand) {
    Plan p = pipelinePlan(4, 6, Schedule::OneFOneB);
    EXPECT_EQ(orderText(computeOrder(p, 6, 0)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
    EXPECT_EQ(orderText(computeOrder(p, 6, 2)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
    EXPECT_EQ(orderText(computeOrder(p, 6, 3)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(ScheduleOrder, GpipeByHand) {
    Plan p = pipelinePlan(2, 3, Schedule::Gpipe);
    EXPECT_EQ(orderText(computeOrder(p, 3, 1)), "F0 F1 F2 B0 B1 B2");
}

TEST(ScheduleOrder, InterleavedFollowsMegatron) {
    // p = 2, v = 2, m = 4, stage 0: warm-up (2-0-1)*2 + (2-1)*2 = 4 virtual micro-batches.
    Plan p = pipelinePlan(2, 4, Schedule::Interleaved1F1B, 2);
    EXPECT_EQ(orderText(computeOrder(p, 4, 0)),
              "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
    // Stage 1: warm-up 2.
    EXPECT_EQ(orderText(computeOrder(p, 4, 1)),
              "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
}

TEST(ScheduleOrder, ZeroBubbleDelaysWeightGradientsByStage) {
    Plan p = pipelinePlan(3, 4, Schedule::ZeroBubble);
    EXPECT_EQ(orderText(computeOrder(p, 4, 0)), "F0 F1 F2 b0 W0 F3 b1 W1 b2 W2 b3 W3");
    EXPECT_EQ(orderText(computeOrder(p, 4, 1)), "F0 F1 b0 F2 b1 W0 F3 b2 W1 b3 W2 W3");
    EXPECT_EQ(orderText(computeOrder(p, 4, 2)), "F0 b0 F1 b1 F2 b2 W0 F3 b3 W1 W2 W3");
}

// PyTorch's ScheduleDualPipeV._calculate_single_rank_operations, step by step (p = 2, m = 4, rank 0): F0 x 2;
// F0 F1; I1 W F1; (F0 B1) (F1 B0); B1 (F1 B0); B1 then b0 (split from here on, rank 0 being even); W b0; W.
TEST(ScheduleOrder, DualPipeVFollowsPyTorch) {
    Plan p = pipelinePlan(2, 4, Schedule::DualPipeV, 2);
    EXPECT_EQ(orderText(computeOrder(p, 4, 0)), "F0 F1 F2 F0.1 b0.1 W0.1 F1.1 F3 B1.1 F2.1 B0 B2.1 F3.1 B1 B3.1 b2 W2 b3 W3");
    // The V's tip runs its first F0 B1 apart, the rest in pairs; rank 1 (odd) splits its last chunk-1 backward.
    EXPECT_EQ(orderText(computeOrder(p, 4, 1)), "F0 F0.1 F1 F1.1 F2 B0.1 F2.1 B0 F3 B1.1 F3.1 B1 B2.1 B2 b3.1 b3 W3.1 W3");
    // Overlapped pairs (OVERLAP_F_B): step 4's two a round (the tip's first one not) and step 5's one each.
    for (int pp : {2, 3, 4, 8})
        for (int m : {2 * pp, 2 * pp + 1, 5 * pp}) {
            Plan q = pipelinePlan(pp, m, Schedule::DualPipeV, 2);
            for (int r = 0; r < pp; ++r) {
                const std::vector<Action> order = computeOrder(q, m, r);
                int pairs = 0;
                for (size_t i = 0; i < order.size(); ++i)
                    if (order[i].overlapsNext) {
                        ++pairs;
                        ASSERT_EQ(order[i].kind, ActionKind::Forward);
                        ASSERT_LT(i + 1, order.size());
                        EXPECT_EQ(order[i + 1].kind, ActionKind::Backward);
                        EXPECT_NE(order[i + 1].chunk, order[i].chunk);
                    }
                EXPECT_EQ(pairs, 2 * (m - 2 * pp + r + 1) - (r == pp - 1 ? 1 : 0) + (pp - r - 1)) << pp << " " << m << " " << r;
            }
        }
}

// PyTorch's ScheduleZBVZeroBubble (p = 2, m = 4): rank 0 warms up with 2(p - r) - 1 chunk-0 forwards, then runs
// chunk 1 forward, input and weight halves p - r times, then the steady F0 b0 W0 F1 b1 W1, then the cool-down.
TEST(ScheduleOrder, ZeroBubbleVFollowsPyTorch) {
    Plan p = pipelinePlan(2, 4, Schedule::ZeroBubbleV, 2);
    EXPECT_EQ(orderText(computeOrder(p, 4, 0)),
              "F0 F1 F2 F0.1 b0.1 W0.1 F1.1 b1.1 W1.1 F3 b0 W0 F2.1 b2.1 W2.1 b1 W1 F3.1 b3.1 W3.1 b2 W2 b3 W3");
    EXPECT_EQ(orderText(computeOrder(p, 4, 1)),
              "F0 F0.1 F1 F1.1 b0.1 W0.1 F2 b0 W0 F2.1 b1.1 W1.1 F3 b1 W1 F3.1 b2.1 W2.1 b2 b3.1 b3 W2 W3.1 W3");
    // Fewer micro-batches than 2p - 1: built for 2p - 1 and the rest dropped, as PyTorch does.
    EXPECT_EQ(orderText(computeOrder(pipelinePlan(2, 1, Schedule::ZeroBubbleV, 2), 1, 0)), "F0 F0.1 b0.1 W0.1 b0 W0");
}

struct GridCase {
    int pp, m, vpp;
    Schedule schedule;
    int zero, dp, tp;
    bool tied;
};

std::vector<GridCase> gridCases() {
    std::vector<GridCase> cases;
    for (Schedule sch : {Schedule::Gpipe, Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubble, Schedule::DualPipeV,
                         Schedule::ZeroBubbleV})
        for (int pp : {1, 2, 3, 4, 8})
            for (int m : {1, 2, 4, 8, 16, 24})
                for (int vpp : {1, 2, 3})
                    for (int zero : {0, 1, 2, 3}) {
                        if (sch == Schedule::Interleaved1F1B && (pp < 2 || m % pp != 0)) continue;
                        if (sch == Schedule::ZeroBubbleV) {
                            if (vpp != 2 || pp < 2) continue;
                        } else if (sch == Schedule::DualPipeV) {
                            if (vpp != 2 || pp < 2 || m < 2 * pp) continue;
                        } else if ((sch == Schedule::Interleaved1F1B) != (vpp > 1)) {
                            continue;
                        }
                        if (24 % (pp * vpp) != 0) continue;
                        cases.push_back({pp, m, vpp, sch, zero, zero == 0 ? 1 : 2, 1, (m + pp) % 2 == 0});
                    }
    return cases;
}

TEST(ScheduleInvariants, HoldOverAGridOfShapesAndZeroStages) {
    int checked = 0;
    for (const auto& g : gridCases()) {
        ModelConfig model = test::megatronStyleModel(24, 256, 4, 1000, 128);
        model.tiedEmbeddings = g.tied;
        Plan p = pipelinePlan(g.pp, g.m * g.dp, g.schedule, g.vpp);
        p.dp = g.dp;
        p.zeroStage = g.zero;
        ProblemList problems;
        validatePlan(model, test::roundCluster(g.pp * g.dp, 1), p, "/plan", problems);
        ASSERT_TRUE(problems.empty()) << problems.items().front().message;
        const ActionSchedule s = buildSchedule(model, p);
        const auto violations = checkSchedule(s);
        ASSERT_TRUE(violations.empty()) << toString(g.schedule) << " pp=" << g.pp << " m=" << g.m << " vpp=" << g.vpp
                                        << " zero=" << g.zero << ": " << violations.front();
        // Every stage ends with its optimizer step (ZeRO-1/2 then all-gather the updated shards).
        for (const auto& st : s.stages) {
            int optimizers = 0;
            for (const auto& a : st.actions) optimizers += a.kind == ActionKind::OptimizerStep;
            ASSERT_EQ(optimizers, 1);
        }
        ++checked;
    }
    EXPECT_GT(checked, 300);
}

// The V's tip hands a micro-batch from its first chunk to its second in its own order: a list that runs the second
// chunk's forward first is reported.
TEST(ScheduleInvariants, DetectsATipThatRunsTheLaterChunkFirst) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    ActionSchedule s = buildSchedule(model, pipelinePlan(2, 4, Schedule::DualPipeV, 2));
    ASSERT_TRUE(checkSchedule(s).empty());
    auto& acts = s.stages[1].actions;
    auto forwardOf = [&](int chunk) {
        return std::find_if(acts.begin(), acts.end(), [&](const Action& a) {
            return a.kind == ActionKind::Forward && a.microBatch == 0 && a.chunk == chunk;
        });
    };
    std::swap(forwardOf(0)->chunk, forwardOf(1)->chunk); // micro-batch 0 now enters chunk 1 first
    bool reported = false;
    for (const auto& msg : checkSchedule(s)) reported = reported || msg.find("enters virtual stage 2 before leaving 1") != std::string::npos;
    EXPECT_TRUE(reported);
}

TEST(ScheduleInvariants, DetectsAMissingReceive) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    Plan p = pipelinePlan(2, 4, Schedule::OneFOneB);
    ActionSchedule s = buildSchedule(model, p);
    auto& acts = s.stages[1].actions;
    auto it = std::find_if(acts.begin(), acts.end(), [](const Action& a) { return a.kind == ActionKind::RecvActivation; });
    ASSERT_NE(it, acts.end());
    it->kind = ActionKind::SendGrad; // corrupt: one receive fewer, one unmatched send more
    const auto v = checkSchedule(s);
    ASSERT_FALSE(v.empty());
    bool mentions = false;
    for (const auto& msg : v) mentions = mentions || msg.find("never received") != std::string::npos;
    EXPECT_TRUE(mentions);
}

// Chunks of unequal layers under the interleaved schedule, end chunks of no layer included (ends_as_layers with
// layers + 2 = pp x vpp, Megatron-Bridge's Llama 3.1 405B on pp 16 x vpp 8): checkSchedule compares the layers in
// flight at the order's peak with the memory model's walk (inFlightLayers), stage by stage, over a grid.
TEST(ScheduleInvariants, LayersInFlightMatchTheMemoryModelWithUnequalChunks) {
    int checked = 0;
    for (int pp : {2, 3, 4})
        for (int vpp : {2, 3, 4})
            for (int extra : {-2, -1, 1, 3})
                for (int mPerPp : {1, 2, 3, 5}) {
                    const int layers = pp * vpp + extra;
                    ModelConfig model = test::megatronStyleModel(layers, 256, 4, 1000, 128);
                    Plan p = pipelinePlan(pp, pp * mPerPp, Schedule::Interleaved1F1B, vpp);
                    p.pipelineSplit = PipelineSplit::EndsAsLayers;
                    ProblemList problems;
                    validatePlan(model, test::roundCluster(pp, 1), p, "/plan", problems);
                    ASSERT_TRUE(problems.empty()) << problems.items().front().message;
                    const ActionSchedule s = buildSchedule(model, p);
                    const auto violations = checkSchedule(s);
                    ASSERT_TRUE(violations.empty()) << "pp " << pp << " vpp " << vpp << " layers " << layers << ": " << violations.front();
                    ++checked;
                }
    EXPECT_EQ(checked, 144);
    // By hand: 4 layers on pp 2 x vpp 3 (0,1,1 | 1,1,0), 4 micro-batches. Stage 1 holds chunks of 1, 1 and 0 layers;
    // its 4 warmup forwards (chunks 0,0,1,1) hold 4 layers, then the output layer's two passes come and go (4 with
    // one alive), then forwards of chunk 0 against backwards of chunk 1 reach 5 with none alive.
    ModelConfig model = test::megatronStyleModel(4, 256, 4, 1000, 128);
    Plan p = pipelinePlan(2, 4, Schedule::Interleaved1F1B, 3);
    p.pipelineSplit = PipelineSplit::EndsAsLayers;
    EXPECT_EQ(chunkLayerCounts(model, p), (std::vector<int>{0, 1, 1, 1, 1, 0}));
    const InFlightLayers last = inFlightLayers(model, p, 1);
    EXPECT_DOUBLE_EQ(last.withHead, 4.0);
    EXPECT_DOUBLE_EQ(last.withoutHead, 5.0);
    EXPECT_DOUBLE_EQ(peakInFlightLayers(model, p, 1), 5.0);
    // An even split gives in-flight micro-batches x layers, as before.
    Plan even = pipelinePlan(2, 4, Schedule::Interleaved1F1B, 2);
    EXPECT_DOUBLE_EQ(peakInFlightLayers(model, even, 0), inFlightMicroBatches(even, 0) * 2.0);
}

TEST(ScheduleInvariants, InFlightMatchesTheMemoryModel) {
    for (Schedule sch : {Schedule::Gpipe, Schedule::OneFOneB, Schedule::ZeroBubble, Schedule::Interleaved1F1B, Schedule::DualPipeV,
                         Schedule::ZeroBubbleV}) {
        const int v = sch == Schedule::Interleaved1F1B || sch == Schedule::DualPipeV || sch == Schedule::ZeroBubbleV ? 2 : 1;
        Plan p = pipelinePlan(4, 8, sch, v);
        ModelConfig model = test::megatronStyleModel(16, 256, 4, 1000, 128);
        ActionSchedule s = buildSchedule(model, p);
        for (int st = 0; st < 4; ++st)
            EXPECT_DOUBLE_EQ(peakInFlight(s.stages[st], v), inFlightMicroBatches(p, st)) << toString(sch) << " stage " << st;
    }
    // Interleaved with as many micro-batches as stages, under Megatron-LM of 2024 (every forward first) and of 2025.
    for (const char* version : {"2024", "2025"}) {
        Plan p = pipelinePlan(4, 4, Schedule::Interleaved1F1B, 2);
        p.framework.name = "megatron";
        p.framework.version = version;
        ModelConfig model = test::megatronStyleModel(16, 256, 4, 1000, 128);
        ActionSchedule s = buildSchedule(model, p);
        for (int st = 0; st < 4; ++st)
            EXPECT_DOUBLE_EQ(peakInFlight(s.stages[st], 2), inFlightMicroBatches(p, st)) << version << " stage " << st;
        EXPECT_DOUBLE_EQ(peakInFlight(s.stages[3], 2), std::string(version) == "2024" ? 4.0 : 2.5);
    }
}

TEST(ScheduleContent, DataParallelCollectivesPerZeroStage) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    auto count = [&](int zero, const std::string& name) {
        Plan p = pipelinePlan(2, 8, Schedule::OneFOneB);
        p.dp = 2;
        p.zeroStage = zero;
        ActionSchedule s = buildSchedule(model, p);
        int n = 0;
        for (const auto& a : s.stages[0].actions) n += a.kind == ActionKind::Collective && a.name == name;
        return n;
    };
    // 4 micro-batches per DP rank, 4 layers per stage = 4 gradient buckets.
    EXPECT_EQ(count(0, "dp_all_reduce_grads"), 4);
    EXPECT_EQ(count(1, "dp_reduce_scatter_grads"), 4);
    EXPECT_EQ(count(1, "dp_all_gather_params"), 1);
    EXPECT_EQ(count(2, "dp_reduce_scatter_grads"), 16);
    EXPECT_EQ(count(3, "zero3_all_gather_params_fwd"), 4);
    EXPECT_EQ(count(3, "zero3_all_gather_params_bwd"), 4);
    EXPECT_EQ(count(3, "dp_reduce_scatter_grads"), 4);
    EXPECT_EQ(count(0, "embedding_grad_all_reduce"), 1); // tied embeddings on stages 0 and 1
}

// FSDP's no_sync (grad_sync_each_micro_batch false): the gathers stay per micro-batch, the reduce-scatter runs once,
// after the last micro-batch's backward; DeepSpeed's ZeRO-3 has no such switch.
TEST(ScheduleContent, FsdpNoSyncReducesOnceAStep) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    auto count = [&](const Plan& p, const std::string& name) {
        ActionSchedule s = buildSchedule(model, p);
        int n = 0;
        for (const auto& a : s.stages[0].actions) n += a.kind == ActionKind::Collective && a.name == name;
        return n;
    };
    Plan p = pipelinePlan(1, 8, Schedule::OneFOneB);
    p.dp = 2;
    p.zeroStage = 3;
    p.framework.name = "fsdp";
    EXPECT_EQ(count(p, "dp_reduce_scatter_grads"), 4);
    p.framework.gradSyncEachMicroBatch = false;
    EXPECT_EQ(count(p, "dp_reduce_scatter_grads"), 1);
    EXPECT_EQ(count(p, "zero3_all_gather_params_fwd"), 4);
    EXPECT_EQ(count(p, "zero3_all_gather_params_bwd"), 4);
    p.framework.name = "deepspeed";
    EXPECT_EQ(count(p, "dp_reduce_scatter_grads"), 4);
}

// torchtitan's FSDP under pipelining (parallelize_llama.py, PipelineStage): no resharding after forward and
// gradients synced on the last backward only, so each chunk is gathered once a step and reduce-scattered once,
// after its last backward; a plan that states reshard_after_forward true gathers per micro-batch again.
TEST(ScheduleContent, TorchtitanPipelinedFsdpGathersAndReducesOnceAStep) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    auto count = [&](Plan p, const std::string& name, int stage = 0) {
        ActionSchedule s = buildSchedule(model, p);
        int n = 0;
        for (const auto& a : s.stages[static_cast<size_t>(stage)].actions) n += a.kind == ActionKind::Collective && a.name == name;
        return n;
    };
    auto fsdp = [](const char* framework, Schedule schedule, int vpp) {
        Plan p = pipelinePlan(2, 8, schedule, vpp);
        p.dp = 2;
        p.zeroStage = 3;
        p.framework.name = framework;
        return p;
    };
    // Stage 0's forward gathers, backward gathers and gradient reduce-scatters.
    auto collectives = [&](const Plan& p) {
        return std::array<int, 3>{count(p, "zero3_all_gather_params_fwd"), count(p, "zero3_all_gather_params_bwd"),
                                  count(p, "dp_reduce_scatter_grads")};
    };
    using Counts = std::array<int, 3>;
    Plan p = fsdp("torchtitan", Schedule::OneFOneB, 1);
    EXPECT_EQ(collectives(p), (Counts{1, 0, 1}));
    EXPECT_EQ(count(p, "dp_reduce_scatter_grads", 1), 1);
    // Interleaved: once per model chunk.
    EXPECT_EQ(collectives(fsdp("torchtitan", Schedule::Interleaved1F1B, 2)), (Counts{2, 0, 2}));
    // Stated resharding, FSDP outside torchtitan, or no pipeline: per micro-batch, as before.
    p.framework.reshardAfterForward = true;
    EXPECT_EQ(count(p, "zero3_all_gather_params_fwd"), 4);
    Plan f = fsdp("fsdp", Schedule::OneFOneB, 1);
    EXPECT_EQ(collectives(f), (Counts{4, 4, 4}));
    // FSDP1 that does not reshard after forward still frees after each backward: gathered every forward.
    f.framework.reshardAfterForward = false;
    EXPECT_EQ(collectives(f), (Counts{4, 0, 4}));
    // The generic framework reshards by default; stated false under a pipeline (Llama 3's 405B run, arXiv:2407.21783
    // §3.3.2), each chunk is kept gathered through the step and its gradients reduced once, as torchtitan's.
    Plan g = fsdp("generic", Schedule::Interleaved1F1B, 2);
    EXPECT_EQ(collectives(g), (Counts{8, 8, 8}));
    g.framework.reshardAfterForward = false;
    EXPECT_EQ(collectives(g), (Counts{2, 0, 2}));
    g.pp = 1;
    g.vpp = 1;
    g.schedule = Schedule::OneFOneB;
    EXPECT_EQ(collectives(g), (Counts{4, 0, 4})); // no pipeline: per micro-batch
}

// Hybrid sharding: ZeRO's collectives run inside a replica's shard group, and every gradient reduce-scatter is
// followed by an all-reduce of its shard across the replicas (1/shard of its bytes), which the optimizer waits for.
TEST(ScheduleContent, HybridShardingReducesInsideTheShardAndAllReducesAcrossReplicas) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    for (int zero : {1, 3}) {
        Plan p;
        p.dp = 4;
        p.globalBatch = 8; // 2 micro-batches per rank
        p.zeroStage = zero;
        p.zeroReplicas = 2;
        const ActionSchedule s = buildSchedule(model, p);
        const auto& acts = s.stages[0].actions;
        int scatters = 0, allReduces = 0, gathers = 0;
        for (size_t i = 0; i < acts.size(); ++i) {
            const Action& a = acts[i];
            if (a.kind != ActionKind::Collective) continue;
            if (a.name == "dp_reduce_scatter_grads") {
                ++scatters;
                EXPECT_EQ(a.group, GroupKind::ZeroShard);
            } else if (a.name == "dp_all_reduce_grads_across_replicas") {
                ++allReduces;
                EXPECT_EQ(a.group, GroupKind::ZeroReplica);
                ASSERT_EQ(a.deps.size(), 1u);
                const Action& rs = acts[static_cast<size_t>(a.deps[0].index)];
                EXPECT_EQ(rs.name, "dp_reduce_scatter_grads");
                EXPECT_DOUBLE_EQ(a.bytes, rs.bytes / 2.0); // the shard of a 2-rank shard group
            } else if (a.name.rfind("zero3_all_gather", 0) == 0 || a.name == "dp_all_gather_params") {
                ++gathers;
                EXPECT_EQ(a.group, GroupKind::ZeroShard);
            }
        }
        EXPECT_EQ(allReduces, scatters) << "zero " << zero;
        EXPECT_EQ(scatters, zero == 1 ? 8 : 2) << "zero " << zero; // a bucket per layer per step; one per micro-batch
        EXPECT_GT(gathers, 0);
        // The optimizer step waits for every all-reduce.
        const Action& opt = acts.back().kind == ActionKind::OptimizerStep ? acts.back() : acts[acts.size() - 2];
        int waited = 0;
        for (const auto& d : opt.deps)
            if (acts[static_cast<size_t>(d.index)].name == "dp_all_reduce_grads_across_replicas") ++waited;
        EXPECT_EQ(waited, allReduces) << "zero " << zero;
    }
}

// Collective names are literals (Action::name is a view): the dense part's plain, the expert part's with "_expert", in
// every ZeRO stage, with and without hybrid sharding, and the same text in two schedules built apart.
TEST(ScheduleContent, ExpertPartsCarryTheirSuffixAndNamesAreTheSameLiteralsEachBuild) {
    ModelConfig model = test::megatronStyleModel(4, 256, 4, 1000, 128);
    model.moe = MoeConfig{8, 2, 512};
    const std::set<std::string> bases{"zero3_all_gather_params_fwd", "zero3_all_gather_params_bwd", "dp_all_reduce_grads",
                                      "dp_reduce_scatter_grads", "dp_all_reduce_grads_across_replicas", "dp_all_gather_params"};
    for (int zero : {0, 1, 2, 3}) {
        for (int replicas : {1, 2}) {
            if (zero == 0 && replicas > 1) continue;
            Plan p;
            p.dp = 8;
            p.ep = 2;
            p.globalBatch = 16;
            p.zeroStage = zero;
            p.zeroReplicas = replicas;
            p.framework.name = "megatron";
            const ActionSchedule s = buildSchedule(model, p), again = buildSchedule(model, p);
            int dense = 0, expert = 0;
            const auto& acts = s.stages[0].actions;
            for (size_t i = 0; i < acts.size(); ++i) {
                const Action& a = acts[i];
                if (a.kind != ActionKind::Collective) continue;
                EXPECT_EQ(a.name, again.stages[0].actions[i].name);
                const bool isExpert = a.group == GroupKind::ExpertDp || a.group == GroupKind::ExpertZeroShard ||
                                      a.group == GroupKind::ExpertZeroReplica;
                const std::string name(a.name);
                const std::string suffix = "_expert";
                const bool suffixed = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
                if (a.name == "embedding_grad_all_reduce") continue;
                EXPECT_EQ(suffixed, isExpert) << name << " zero " << zero << " replicas " << replicas;
                EXPECT_TRUE(bases.count(suffixed ? name.substr(0, name.size() - suffix.size()) : name)) << name;
                ++(isExpert ? expert : dense);
            }
            EXPECT_GT(dense, 0) << "zero " << zero;
            EXPECT_GT(expert, 0) << "zero " << zero;
        }
    }
}

TEST(ScheduleContent, EveryRankMapsToItsStage) {
    ModelConfig model = test::megatronStyleModel(8, 256, 4, 1000, 128);
    Plan p = pipelinePlan(2, 8, Schedule::OneFOneB);
    p.tp = 2;
    p.dp = 2;
    ActionSchedule s = buildSchedule(model, p);
    for (int r = 0; r < p.worldSize(); ++r) EXPECT_EQ(s.forRank(r).stage, rankCoords(p, r).pp);
}

} // namespace
} // namespace tessel::sim
