// What the framework overlaps and what overlap costs (FORMULAS.md §6.1, §6.2): streamed dependencies by hand,
// gradient reduction after or during the backward, blocking pipeline transfers, TP overlap, parameter gathers
// and compute lost to concurrent communication.
#include "../cost_models/test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/cost/traffic.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

namespace tessel::sim {
namespace {

// One stage: a gather on the data-parallel stream and a forward that consumes it layer by layer.
TEST(Streamed, AConsumerStartsAfterTheFirstUnitAndEndsAfterTheLast) {
    ActionSchedule s;
    s.plan = Plan{};
    s.microBatches = 1;
    s.stages.resize(1);
    Action gather;
    gather.kind = ActionKind::Collective;
    gather.name = "gather";
    Action fwd;
    fwd.kind = ActionKind::Forward;
    fwd.microBatch = 0;
    fwd.deps.push_back({0, 0, Dependency::When::StartPlus, 0.25, 0.25});
    s.stages[0].actions = {gather, fwd};
    CostTable costs;
    costs.perAction = {{ActionCost{}, ActionCost{}}};
    auto run = [&](double p, double c) {
        costs.perAction[0][0].computeSeconds = costs.perAction[0][0].seconds = p;
        costs.perAction[0][1].computeSeconds = costs.perAction[0][1].seconds = c;
        return simulate(s, costs).perAction[0][1];
    };
    // Gather of 4 s in 4 units, compute of 2 s: starts at 1, and the last unit (arriving at 4) still needs
    // 0.5 s of compute: ends at 4.5, not at 1 + 2.
    TimedAction t = run(4.0, 2.0);
    EXPECT_DOUBLE_EQ(t.startSeconds, 1.0);
    EXPECT_DOUBLE_EQ(t.endSeconds, 4.5);
    // Compute-bound: gather of 1 s, compute of 8 s: starts at 0.25, ends at 8.25.
    t = run(1.0, 8.0);
    EXPECT_DOUBLE_EQ(t.startSeconds, 0.25);
    EXPECT_DOUBLE_EQ(t.endSeconds, 8.25);
}

struct Case {
    ModelConfig model = test::megatronStyleModel(8, 1024, 16, 32000, 1024);
    ClusterConfig cluster = test::roundCluster(8, 2);
    Plan plan;
    Case() {
        plan.dp = 16;
        plan.globalBatch = 64;
        plan.microBatch = 1;
    }
};

// One term of stage 0's first forward and first backward action, as costSchedule costs them.
std::pair<double, double> firstForwardBackward(const Case& c, const Plan& p, double ActionCost::*term) {
    const ActionSchedule s = buildSchedule(c.model, p);
    const CostTable t = costSchedule(s, c.model, c.cluster);
    double fwd = -1.0, bwd = -1.0;
    for (size_t i = 0; i < s.stages[0].actions.size(); ++i) {
        if (s.stages[0].actions[i].kind == ActionKind::Forward && fwd < 0) fwd = t.perAction[0][i].*term;
        if (s.stages[0].actions[i].kind == ActionKind::Backward && bwd < 0) bwd = t.perAction[0][i].*term;
    }
    return {fwd, bwd};
}

double lastComputeEnd(const PlanSimulation& sim, int stage) {
    double end = 0.0;
    const auto& acts = sim.schedule.stages[static_cast<size_t>(stage)].actions;
    for (size_t i = 0; i < acts.size(); ++i)
        if (acts[i].kind == ActionKind::Backward) end = std::max(end, sim.timeline.perAction[static_cast<size_t>(stage)][i].endSeconds);
    return end;
}

TEST(FrameworkOverlap, WithoutOverlapEveryBucketWaitsForTheWholeBackward) {
    Case c;
    c.plan.framework.name = "megatron"; // ddp_impl local: reduce after the backward
    c.plan.framework.version = "2023";
    const PlanSimulation local = simulatePlan(c.model, c.cluster, c.plan);
    const double backwardEnd = lastComputeEnd(local, 0);
    const auto& acts = local.schedule.stages[0].actions;
    int collectives = 0;
    for (size_t i = 0; i < acts.size(); ++i)
        if (acts[i].kind == ActionKind::Collective) {
            ++collectives;
            EXPECT_GE(local.timeline.perAction[0][i].startSeconds, backwardEnd - 1e-12) << acts[i].name;
        }
    EXPECT_EQ(collectives, 8); // one bucket per layer
    c.plan.framework.ddpImpl = "torch";
    const PlanSimulation hooks = simulatePlan(c.model, c.cluster, c.plan);
    EXPECT_LT(hooks.metrics.stepSeconds, local.metrics.stepSeconds);
    for (const auto& b : local.timeline.perStage) EXPECT_NEAR(b.total(), local.metrics.stepSeconds, 1e-9 * local.metrics.stepSeconds);
}

// Two pipeline stages of 8 data-parallel ranks, 4 micro-batches a step, on `framework` of `version`.
Case twoStages(const char* framework, const char* version) {
    Case c;
    c.plan.dp = 8;
    c.plan.pp = 2;
    c.plan.globalBatch = 32;
    c.plan.framework.name = framework;
    c.plan.framework.version = version;
    return c;
}

TEST(FrameworkOverlap, BlockingPipelineSendsHoldTheComputeStream) {
    Case c = twoStages("megatron", "2022");
    const PlanSimulation blocking = simulatePlan(c.model, c.cluster, c.plan);
    ASSERT_TRUE(blocking.schedule.p2pBlocksCompute);
    // Every send starts after the compute before it and the next compute starts after the send.
    for (size_t s = 0; s < 2; ++s) {
        const auto& acts = blocking.schedule.stages[s].actions;
        const auto& tl = blocking.timeline.perAction[s];
        double computeEnd = 0.0;
        double sendEnd = 0.0;
        for (size_t i = 0; i < acts.size(); ++i) {
            if (acts[i].kind == ActionKind::SendActivation || acts[i].kind == ActionKind::SendGrad) {
                EXPECT_GE(tl[i].startSeconds, computeEnd - 1e-12);
                sendEnd = tl[i].endSeconds;
            } else if (isCompute(acts[i].kind)) {
                EXPECT_GE(tl[i].startSeconds, sendEnd - 1e-12);
                computeEnd = tl[i].endSeconds;
            }
        }
        EXPECT_NEAR(blocking.timeline.perStage[s].total(), blocking.metrics.stepSeconds, 1e-9 * blocking.metrics.stepSeconds);
        EXPECT_GT(blocking.timeline.perStage[s].ppSeconds, 0.0);
    }
    c.plan.framework.overlapP2pComm = true;
    const PlanSimulation overlapped = simulatePlan(c.model, c.cluster, c.plan);
    EXPECT_FALSE(overlapped.schedule.p2pBlocksCompute);
    EXPECT_LT(overlapped.metrics.stepSeconds, blocking.metrics.stepSeconds);
}

// DeepSpeed's pipeline engine sends and receives with one blocking call each, in turn on the compute stream
// (engine.py's _exec_send_* / _exec_recv_* over p2p.py): on every stage the compute, the sends and the receives run one
// after another, and the step is longer than with Megatron-LM's batched send and receive, which overlap each other.
TEST(FrameworkOverlap, DeepSpeedsPipelineEngineRunsEachTransferAlone) {
    Case c = twoStages("deepspeed", "2022");
    c.plan.zeroStage = 1;
    const ActionSchedule serial = buildSchedule(c.model, c.plan);
    ASSERT_TRUE(serial.p2pBlocksCompute && serial.p2pSerial);
    const CostTable costs = costSchedule(serial, c.model, c.cluster);
    const Timeline t = simulate(serial, costs);
    int receives = 0;
    for (size_t s = 0; s < 2; ++s) {
        const auto& acts = serial.stages[s].actions;
        double streamEnd = 0.0;
        for (size_t i = 0; i < acts.size(); ++i) {
            if (!isCompute(acts[i].kind) && !isTransfer(acts[i].kind)) continue;
            EXPECT_GE(t.perAction[s][i].startSeconds, streamEnd - 1e-12) << s << " " << acts[i].traceName();
            streamEnd = t.perAction[s][i].endSeconds;
            receives += acts[i].kind == ActionKind::RecvActivation || acts[i].kind == ActionKind::RecvGrad;
        }
        EXPECT_NEAR(t.perStage[s].total(), t.stepSeconds, 1e-9 * t.stepSeconds);
    }
    EXPECT_EQ(receives, 2 * c.plan.microBatchesPerStep());
    ActionSchedule batched = serial;
    batched.p2pSerial = false;
    EXPECT_LT(simulate(batched, costs).stepSeconds, t.stepSeconds);
    // Megatron-LM's plans keep the batched pair.
    c.plan.framework.name = "megatron";
    EXPECT_FALSE(buildSchedule(c.model, c.plan).p2pSerial);
}

TEST(FrameworkOverlap, TensorParallelOverlapByHand) {
    Case c;
    c.plan.tp = 8;
    c.plan.dp = 2;
    c.plan.globalBatch = 8;
    const PrecisionRecipe& recipe = *findPrecisionRecipe(c.plan.precision);
    double fwdTp = 0.0, bwdTp = 0.0;
    for (const auto& op : layerCommOps(c.model, c.cluster, c.plan))
        (op.phase == CommPhase::Forward ? fwdTp : bwdTp) += op.cost.seconds;
    const BlockCompute layer = layerCompute(c.model, c.cluster, c.plan, recipe);
    double budget = 0.0;
    for (const auto& op : layer.forwardOps)
        if (op.name == "qkv" || op.name == "fc1") budget += op.seconds;
    auto forwardTp = [&](const Plan& p) { return firstForwardBackward(c, p, &ActionCost::tpSeconds); };
    const double layers = 8.0;
    // generic: every TP collective exposed. With pp = 1 the forward and backward also hold the embedding's and
    // the head's TP collectives, which no overlap setting touches.
    auto [f0, b0] = forwardTp(c.plan);
    const double headFwd = f0 - layers * fwdTp, headBwd = b0 - layers * bwdTp;
    EXPECT_GT(headFwd, 0.0);
    // Megatron's asynchronous backward all-reduce runs under the QKV and fc1 weight gradients; what it hides
    // still costs κ of its time.
    c.cluster.gpu.commContention = 0.5;
    Plan asyncTp = c.plan;
    asyncTp.framework.asyncTpGradReduce = true;
    auto [f1, b1] = forwardTp(asyncTp);
    EXPECT_NEAR(f1, f0, 1e-12);
    const double hidden = std::min(bwdTp, budget);
    EXPECT_GT(hidden, 0.0);
    EXPECT_NEAR(b1, headBwd + layers * (bwdTp - hidden + 0.5 * hidden), 1e-12);
    // The GEMMs it hides under lose at most the ceiling's share of their own time.
    c.cluster.gpu.commContentionMax = 0.1;
    ASSERT_GT(0.5 * hidden, 0.1 * budget);
    auto [f1c, b1c] = forwardTp(asyncTp);
    EXPECT_NEAR(f1c, f0, 1e-12);
    EXPECT_NEAR(b1c, headBwd + layers * (bwdTp - hidden + 0.1 * budget), 1e-12);
    c.cluster.gpu.commContentionMax = 0.0;
    // Transformer Engine's overlap leaves one of tp chunks exposed, both ways.
    Plan te = c.plan;
    te.framework.tpCommOverlap = true;
    auto [f2, b2] = forwardTp(te);
    EXPECT_NEAR(f2, headFwd + layers * fwdTp / 8.0, 1e-12);
    EXPECT_NEAR(b2, headBwd + layers * bwdTp / 8.0, 1e-12);
}

// PyTorch's async TP (torchtitan) by hand: Inductor's micro_pipeline_tp fuses the forward's gathers and
// reduce-scatters and the backward's output-gradient gathers with their GEMMs, each pair lasting the longer of the
// two plus one of tp chunks of the shorter, and leaves the backward's input-gradient reduce-scatters and re-gathered
// inputs whole; without sequence parallelism it fuses nothing.
TEST(FrameworkOverlap, TorchAsyncTensorParallelByHand) {
    Case c;
    // Wide enough that fc1 outlasts its gather while the attention's projection is shorter than its reduce-scatter.
    c.model = test::megatronStyleModel(8, 8192, 64, 32000, 2048);
    c.plan.tp = 8;
    c.plan.dp = 2;
    c.plan.globalBatch = 8;
    c.plan.sequenceParallel = true;
    c.plan.framework.name = "torchtitan";
    Plan async = c.plan;
    async.framework.tpCommOverlap = true;
    const BlockCompute layer = layerCompute(c.model, c.cluster, async, *findPrecisionRecipe(async.precision));
    auto gemmSeconds = [&](const std::string& name) {
        for (const auto& op : layer.forwardOps)
            if (op.name == name) return op.seconds;
        ADD_FAILURE() << "no " << name;
        return 0.0;
    };
    double fwdTp = 0.0, bwdTp = 0.0, fwdFused = 0.0, bwdFused = 0.0, rest = 0.0;
    bool collectiveLonger = false, gemmLonger = false;
    for (const auto& op : layerCommOps(c.model, c.cluster, c.plan)) {
        if (op.group != GroupKind::Tp) continue;
        const bool fwd = op.phase == CommPhase::Forward;
        (fwd ? fwdTp : bwdTp) += op.cost.seconds;
        const std::string& n = op.name;
        const std::string gemm = n == "tp_all_gather_attn"                                         ? "qkv"
                                 : n == "tp_reduce_scatter_attn" || n == "tp_all_gather_attn_grad" ? "attn_proj"
                                 : n == "tp_all_gather_mlp"                                        ? "fc1"
                                 : n == "tp_reduce_scatter_mlp" || n == "tp_all_gather_mlp_grad"   ? "fc2"
                                                                                                   : "";
        if (gemm.empty()) {
            ASSERT_FALSE(fwd) << n;
            rest += op.cost.seconds; // the input gradients' reduce-scatters and the re-gathered inputs
            continue;
        }
        const double G = gemmSeconds(gemm), C = op.cost.seconds;
        (C > G ? collectiveLonger : gemmLonger) = true;
        (fwd ? fwdFused : bwdFused) += std::max(G, C) + std::min(G, C) / 8.0 - G;
    }
    ASSERT_TRUE(collectiveLonger && gemmLonger) << "the case should hold pairs of both kinds";
    ASSERT_GT(rest, 0.0);
    auto tpOf = [&](const Plan& p) { return firstForwardBackward(c, p, &ActionCost::tpSeconds); };
    const double layers = 8.0;
    auto [f0, b0] = tpOf(c.plan);
    const double headFwd = f0 - layers * fwdTp, headBwd = b0 - layers * bwdTp;
    auto [f1, b1] = tpOf(async);
    EXPECT_NEAR(f1, headFwd + layers * fwdFused, 1e-12);
    EXPECT_NEAR(b1, headBwd + layers * (bwdFused + rest), 1e-12);
    EXPECT_GT(f1, headFwd + layers * fwdTp / 8.0); // more than a chunk, where a collective outlasts its GEMM
    // Transformer Engine's overlap on the same plan (Megatron-LM) keeps one chunk of every collective exposed.
    Plan te = async;
    te.framework.name = "megatron";
    auto [f2, b2] = tpOf(te);
    EXPECT_NEAR(f2, headFwd + layers * fwdTp / 8.0, 1e-12);
    EXPECT_LT(b2, b1);
    // Without sequence parallelism (all-reduces) there is no gather or reduce-scatter to fuse.
    Plan noSp = c.plan;
    noSp.sequenceParallel = false;
    Plan noSpAsync = noSp;
    noSpAsync.framework.tpCommOverlap = true;
    EXPECT_EQ(tpOf(noSpAsync), tpOf(noSp));
}

// Context parallelism's exchange in the simulated actions (FORMULAS.md §6.1): the ring (p2p) adds what
// ringExposure gives for its steps, the all-to-all and the gather their collectives whole, per layer.
TEST(FrameworkOverlap, ContextParallelExchangesByHand) {
    Case c;
    c.plan.cp = 4;
    c.plan.dp = 4;
    c.plan.globalBatch = 16;
    c.plan.framework.name = "megatron";
    c.cluster.gpu.commContention = 0.5;
    auto cpOf = [&](const Plan& p) { return firstForwardBackward(c, p, &ActionCost::cpSeconds); };
    const double layers = 8.0;
    const PrecisionRecipe& recipe = *findPrecisionRecipe(c.plan.precision);
    // p2p: the steps' kernels and one step's K and V to the next rank (the group sits in one node).
    const BlockCompute ring = layerCompute(c.model, c.cluster, c.plan, recipe);
    ASSERT_GT(ring.ringStepsForwardSeconds, 0.0);
    const double transfer = ringStepTransferSeconds(ringStepBytes(c.model, c.plan).kv, c.cluster, placeGroup(c.plan, c.cluster, GroupKind::Cp));
    const RingExposure want = ringExposure(ring.ringDiagForwardSeconds, ring.ringStepsForwardSeconds, ring.ringDiagBackwardSeconds,
                                           ring.ringStepsBackwardSeconds, 4, transfer, transfer, c.cluster.gpu);
    auto [f, b] = cpOf(c.plan);
    EXPECT_NEAR(f, layers * want.forwardSeconds, 1e-12);
    EXPECT_NEAR(b, layers * want.backwardSeconds, 1e-12);
    // The gather and the all-to-all hold the compute stream for their whole collectives.
    Plan gather = c.plan;
    gather.cpComm = CpComm::AllGather;
    Plan a2a = c.plan;
    a2a.cpComm = CpComm::A2a;
    for (const Plan& p : {gather, a2a}) {
        double fwd = 0.0, bwd = 0.0;
        for (const auto& op : layerCommOps(c.model, c.cluster, p))
            if (op.group == GroupKind::Cp) (op.phase == CommPhase::Forward ? fwd : bwd) += op.cost.seconds;
        auto [fp, bp] = cpOf(p);
        EXPECT_NEAR(fp, layers * fwd, 1e-12) << toString(p.cpComm);
        EXPECT_NEAR(bp, layers * bwd, 1e-12) << toString(p.cpComm);
    }
}

// Megatron-core's batch-level EP overlap (FORMULAS.md §6.1) by hand: each backward followed by a forward of another
// micro-batch runs with it layer by layer in four steps (F attention | B combine, F dispatch | B experts, F experts |
// B dispatch, F combine | B attention), each the longer of its compute and its all-to-all, the shorter hidden at
// κ of its time. With pp = 1 and m micro-batches that is m - 1 pairs; the first forward and the last backward keep
// their all-to-alls, and the step is shorter by exactly what the pairs hide.
// An MoE case with 8 experts over ep 8 and contention share 0.5 (no ceiling): what one layer of a forward and one
// of a backward run together save, by hand (FORMULAS.md §6.1): the four steps F attention | B combine, B experts |
// F dispatch, F experts | B dispatch, B attention | F combine, each hiding the shorter at half its time.
double pairedLayerSavingByHand(const Case& c) {
    const PrecisionRecipe& recipe = *findPrecisionRecipe(c.plan.precision);
    double epF = 0.0, epB = 0.0;
    for (const auto& op : layerCommOps(c.model, c.cluster, c.plan))
        if (op.group != GroupKind::Tp && op.group != GroupKind::Cp) (op.phase == CommPhase::Forward ? epF : epB) += op.cost.seconds;
    EXPECT_GT(epF, 0.0);
    const BlockCompute layer = layerCompute(c.model, c.cluster, c.plan, recipe);
    double expertSide = 0.0, all = 0.0;
    for (const auto& op : layer.forwardOps) {
        all += op.seconds;
        const bool expert = op.name == "router" || op.name.rfind("moe_", 0) == 0 || op.name.rfind("expert_", 0) == 0;
        if (expert) expertSide += op.seconds;
    }
    const double share = expertSide / all;
    EXPECT_GT(share, 0.0);
    EXPECT_LT(share, 1.0);
    const double F = layer.forward.seconds, B = layer.backwardInput.seconds + layer.backwardWeight.seconds;
    return 0.5 * (std::min((1.0 - share) * F, epB / 2.0) + std::min(share * B, epF / 2.0) +
                  std::min(share * F, epB / 2.0) + std::min((1.0 - share) * B, epF / 2.0));
}

Case moeCase() {
    Case c;
    c.model.moe = MoeConfig{8, 2, 4096};
    c.plan.ep = 8;
    c.cluster.gpu.commContention = 0.5;
    c.cluster.gpu.commContentionMax = 0.0;
    return c;
}

TEST(FrameworkOverlap, MoeBatchLevelOverlapByHand) {
    const Case c = moeCase();
    const double perLayer = pairedLayerSavingByHand(c);
    const double layers = 8.0, microBatches = 4.0; // global batch 64 over dp 16
    auto epSeconds = [&](const Plan& p) {
        const ActionSchedule s = buildSchedule(c.model, p);
        const CostTable t = costSchedule(s, c.model, c.cluster);
        std::vector<double> ep;
        for (size_t i = 0; i < s.stages[0].actions.size(); ++i)
            if (s.stages[0].actions[i].kind == ActionKind::Forward || s.stages[0].actions[i].kind == ActionKind::Backward)
                ep.push_back(t.perAction[0][i].epSeconds);
        return ep;
    };
    Plan on = c.plan;
    on.framework.moeA2aOverlap = true;
    const std::vector<double> off = epSeconds(c.plan), with = epSeconds(on);
    ASSERT_EQ(off.size(), 2 * static_cast<size_t>(microBatches));
    EXPECT_NEAR(off.front() - with.front(), 0.0, 1e-15);  // the first forward has no backward before it
    EXPECT_NEAR(off.back() - with.back(), 0.0, 1e-15);    // the last backward no forward after it
    double saved = 0.0;
    for (size_t i = 0; i < off.size(); ++i) {
        EXPECT_GE(with[i], 0.0);
        saved += off[i] - with[i];
    }
    EXPECT_NEAR(saved, (microBatches - 1.0) * layers * perLayer, 1e-12);
    EXPECT_GT(saved, 0.0);
    const double stepOff = simulatePlan(c.model, c.cluster, c.plan).metrics.stepSeconds;
    const double stepOn = simulatePlan(c.model, c.cluster, on).metrics.stepSeconds;
    EXPECT_NEAR(stepOff - stepOn, saved, 1e-9 * stepOff);
}

// Megatron-core's shared-expert overlap (FORMULAS.md §6.1) by hand: the shared experts' fc1 and activation beside the
// dispatch all-to-all, fc2 beside the combine, each hiding the shorter at the contention share 0.5 of its time;
// backward the same at twice the shared experts' forward. Every forward and backward of every micro-batch saves it.
TEST(FrameworkOverlap, SharedExpertOverlapByHand) {
    Case c = moeCase();
    c.model.moe->sharedFfnHidden = 4096;
    const double layers = 8.0, microBatches = 4.0;
    double dispatchF = 0.0, combineF = 0.0, dispatchB = 0.0, combineB = 0.0;
    for (const auto& op : layerCommOps(c.model, c.cluster, c.plan)) {
        const bool fwd = op.phase == CommPhase::Forward;
        if (op.name.rfind("ep_all_to_all_dispatch", 0) == 0) (fwd ? dispatchF : dispatchB) += op.cost.seconds;
        if (op.name.rfind("ep_all_to_all_combine", 0) == 0) (fwd ? combineF : combineB) += op.cost.seconds;
    }
    const BlockCompute layer = layerCompute(c.model, c.cluster, c.plan, *findPrecisionRecipe(c.plan.precision));
    double fc1AndAct = 0.0, fc2 = 0.0;
    int before = 0;
    for (const auto& op : layer.forwardOps) {
        if (op.name == "shared_fc2") {
            fc2 += op.seconds;
        } else if (op.name.rfind("shared_", 0) == 0) { // shared_fc1 and the activation (shared_gelu here)
            fc1AndAct += op.seconds;
            ++before;
        }
    }
    EXPECT_EQ(before, 2);
    ASSERT_GT(fc1AndAct * fc2 * dispatchF * combineF, 0.0);
    const double savedF = 0.5 * (std::min(dispatchF, fc1AndAct) + std::min(combineF, fc2));
    const double savedB = 0.5 * (std::min(combineB, 2.0 * fc2) + std::min(dispatchB, 2.0 * fc1AndAct));
    auto epSums = [&](const Plan& p) {
        const ActionSchedule s = buildSchedule(c.model, p);
        const CostTable t = costSchedule(s, c.model, c.cluster);
        std::pair<double, double> sums{0.0, 0.0};
        for (size_t i = 0; i < s.stages[0].actions.size(); ++i) {
            if (s.stages[0].actions[i].kind == ActionKind::Forward) sums.first += t.perAction[0][i].epSeconds;
            if (s.stages[0].actions[i].kind == ActionKind::Backward) sums.second += t.perAction[0][i].epSeconds;
        }
        return sums;
    };
    Plan on = c.plan;
    on.framework.moeSharedExpertOverlap = true;
    const auto off = epSums(c.plan), with = epSums(on);
    EXPECT_NEAR(off.first - with.first, microBatches * layers * savedF, 1e-12);
    EXPECT_NEAR(off.second - with.second, microBatches * layers * savedB, 1e-12);
    EXPECT_GT(savedF, 0.0);
    // It runs only with shared experts, without the batch-level overlap and the shared experts' own recompute.
    ProblemList fine;
    validatePlan(c.model, c.cluster, on, "/plan", fine);
    EXPECT_TRUE(fine.empty());
    const Case plain = moeCase(); // no shared experts
    Plan withA2a = on;
    withA2a.framework.moeA2aOverlap = true;
    Plan withModule = on;
    withModule.recompute = Recompute::Selective;
    withModule.recomputeModules = recompute_module::SharedExperts;
    const std::vector<std::pair<const ModelConfig*, const Plan*>> refused{{&plain.model, &on}, {&c.model, &withA2a}, {&c.model, &withModule}};
    for (const auto& [model, plan] : refused) {
        ProblemList problems;
        validatePlan(*model, c.cluster, *plan, "/plan", problems);
        ASSERT_FALSE(problems.empty());
        EXPECT_EQ(problems.items().front().where, "/plan/moe_shared_expert_overlap") << problems.items().front().message;
    }
}

// DualPipeV overlaps the forward and backward chunks of each OVERLAP_F_B pair as Megatron-core's combined 1F1B does
// a backward and the next forward: each pair saves its chunks' expert layers x the paired-layer saving, whatever
// the framework; the rest of its actions keep their all-to-all.
TEST(FrameworkOverlap, DualPipeVHidesTheAllToAllOfItsPairs) {
    Case c = moeCase();
    c.plan.dp = 8;
    c.plan.pp = 2;
    c.plan.vpp = 2;
    c.plan.schedule = Schedule::DualPipeV; // m = 64 / 8 = 8, chunks of 2 layers
    const double perLayer = pairedLayerSavingByHand(c);
    ASSERT_GT(perLayer, 0.0);
    ActionSchedule paired = buildSchedule(c.model, c.plan);
    ActionSchedule unpaired = paired;
    for (auto& st : unpaired.stages)
        for (auto& a : st.actions) a.overlapsNext = false;
    const CostTable with = costSchedule(paired, c.model, c.cluster), without = costSchedule(unpaired, c.model, c.cluster);
    const int m = 8, p = 2, layersPerChunk = 2;
    for (int r = 0; r < p; ++r) {
        const auto& acts = paired.stages[static_cast<size_t>(r)].actions;
        double saved = 0.0;
        int pairs = 0;
        for (size_t i = 0; i < acts.size(); ++i) {
            saved += without.perAction[static_cast<size_t>(r)][i].epSeconds - with.perAction[static_cast<size_t>(r)][i].epSeconds;
            pairs += acts[i].overlapsNext;
        }
        EXPECT_EQ(pairs, 2 * (m - 2 * p + r + 1) - (r == p - 1 ? 1 : 0) + (p - r - 1));
        EXPECT_NEAR(saved, pairs * layersPerChunk * perLayer, 1e-12) << "stage " << r;
    }
}

// torch.utils.checkpoint's early stop and JAX's remat (FORMULAS.md §3.4): a recompute that stops before fc2
// does not rerun the tensor-parallel collective after it either, so the backward holds the rerun collectives
// less that one.
TEST(FrameworkOverlap, ARecomputeThatStopsBeforeFc2SkipsItsCollective) {
    Case c;
    c.model.dropout = 0.0;
    c.plan.tp = 8;
    c.plan.dp = 2;
    c.plan.globalBatch = 8;
    // Full recompute, and a selective one that reruns the dense MLP (JAX's remat of a layer, a non-reentrant
    // torch checkpoint of the MLP): both stop before fc2.
    for (bool selective : {false, true}) {
        c.plan.recompute = selective ? Recompute::Selective : Recompute::Full;
        c.plan.recomputeModules = recompute_module::CoreAttn | (selective ? recompute_module::Mlp : 0);
        double fwdTp = 0.0, bwdTp = 0.0, fc2 = 0.0;
        for (bool sp : {false, true}) {
            c.plan.sequenceParallel = sp;
            fwdTp = bwdTp = fc2 = 0.0;
            for (const auto& op : layerCommOps(c.model, c.cluster, c.plan)) {
                (op.phase == CommPhase::Forward ? fwdTp : bwdTp) += op.cost.seconds;
                if (op.name == (sp ? "tp_reduce_scatter_mlp" : "tp_all_reduce_mlp")) fc2 = op.cost.seconds;
            }
            ASSERT_GT(fc2, 0.0);
            auto backwardTp = [&](const Plan& p) {
                const ActionSchedule s = buildSchedule(c.model, p);
                const CostTable t = costSchedule(s, c.model, c.cluster);
                for (size_t i = 0; i < s.stages[0].actions.size(); ++i)
                    if (s.stages[0].actions[i].kind == ActionKind::Backward)
                        return std::pair{t.perAction[0][i].tpSeconds, t.perAction[0][i].computeSeconds};
                return std::pair{-1.0, -1.0};
            };
            Plan whole = c.plan;
            whole.framework.checkpointEarlyStop = false;
            Plan early = c.plan;
            early.framework.checkpointEarlyStop = true;
            ASSERT_TRUE(recomputeStopsBeforeFc2(c.model, early));
            const auto [wholeTp, wholeCompute] = backwardTp(whole);
            const auto [earlyTp, earlyCompute] = backwardTp(early);
            const std::string label =
                std::string(selective ? "selective" : "full") + (sp ? ", sp" : ", no sp");
            // The layers' part (8 of them) moves by exactly fc2's collective each; the head's TP collectives
            // are in both.
            EXPECT_NEAR(wholeTp - earlyTp, 8.0 * fc2, 1e-12) << label;
            EXPECT_LT(earlyCompute, wholeCompute)
                << label; // fc2 (and, under full recompute, its residual) not rerun
            if (!selective) EXPECT_GT(wholeTp, 8.0 * (bwdTp + fwdTp) - 1e-12);
        }
    }
    // Selective recompute without the MLP never reran fc2: nothing to stop before.
    c.plan.recompute = Recompute::Selective;
    c.plan.recomputeModules = recompute_module::CoreAttn;
    c.plan.framework.checkpointEarlyStop = true;
    EXPECT_FALSE(recomputeStopsBeforeFc2(c.model, c.plan));
}

TEST(FrameworkOverlap, ParameterGatherMovesIntoTheNextForward) {
    Case c;
    c.plan.zeroStage = 1;
    const PlanSimulation after = simulatePlan(c.model, c.cluster, c.plan);
    auto gathers = [](const PlanSimulation& sim) {
        std::vector<size_t> at;
        const auto& acts = sim.schedule.stages[0].actions;
        for (size_t i = 0; i < acts.size(); ++i)
            if (acts[i].name.rfind("dp_all_gather_params", 0) == 0) at.push_back(i);
        return at;
    };
    const auto& acts = after.schedule.stages[0].actions;
    size_t optimizer = 0;
    for (size_t i = 0; i < acts.size(); ++i)
        if (acts[i].kind == ActionKind::OptimizerStep) optimizer = i;
    for (size_t i : gathers(after)) EXPECT_GT(i, optimizer);
    c.plan.framework.overlapParamGather = true;
    const PlanSimulation overlapped = simulatePlan(c.model, c.cluster, c.plan);
    const auto g = gathers(overlapped);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g.front(), 0u); // at the start of the list
    // The first forward streams behind it.
    const auto& first = overlapped.schedule.stages[0].actions;
    for (size_t i = 0; i < first.size(); ++i)
        if (first[i].kind == ActionKind::Forward) {
            ASSERT_FALSE(first[i].deps.empty());
            EXPECT_EQ(first[i].deps.back().index, 0);
            EXPECT_GT(first[i].deps.back().tailFraction, 0.0);
            break;
        }
    EXPECT_LT(overlapped.metrics.stepSeconds, after.metrics.stepSeconds);
}

TEST(FrameworkOverlap, ShardGradOpKeepsParametersForTheBackward) {
    Case c;
    c.plan.zeroStage = 3;
    auto count = [](const PlanSimulation& sim, const std::string& prefix) {
        int n = 0;
        for (const auto& a : sim.schedule.stages[0].actions) n += a.name.rfind(prefix, 0) == 0 ? 1 : 0;
        return n;
    };
    const PlanSimulation full = simulatePlan(c.model, c.cluster, c.plan);
    EXPECT_EQ(count(full, "zero3_all_gather_params_bwd"), 4); // one per micro-batch
    c.plan.framework.reshardAfterForward = false;
    const PlanSimulation kept = simulatePlan(c.model, c.cluster, c.plan);
    EXPECT_EQ(count(kept, "zero3_all_gather_params_bwd"), 0);
    EXPECT_EQ(count(kept, "zero3_all_gather_params_fwd"), 4);
    EXPECT_LE(kept.metrics.stepSeconds, full.metrics.stepSeconds);
}

// A ZeRO-3 gather action stands for its chunk's 8 layers, one collective each (FSDP's unit is the block): it
// costs 8 gathers of an eighth of the bytes, so 8 ring latencies, not one (FORMULAS.md §5).
TEST(FrameworkOverlap, AZero3GatherPaysOneCollectiveLatencyPerLayer) {
    Case c;
    c.plan.zeroStage = 3;
    const PlanSimulation sim = simulatePlan(c.model, c.cluster, c.plan);
    const auto& acts = sim.schedule.stages[0].actions;
    int checked = 0;
    for (size_t i = 0; i < acts.size(); ++i) {
        if (acts[i].name.rfind("zero3_all_gather_params", 0) != 0) continue;
        const GroupPlacement place = placeGroup(c.plan, c.cluster, acts[i].group);
        ASSERT_TRUE(place.spansNodes());
        const CommCost layer = commCost(Primitive::AllGather, acts[i].bytes / 8.0, place, c.cluster);
        const CommCost whole = commCost(Primitive::AllGather, acts[i].bytes, place, c.cluster);
        EXPECT_NEAR(sim.costs.perAction[0][i].computeSeconds, 8.0 * layer.seconds, 1e-12);
        EXPECT_NEAR(8.0 * layer.seconds - whole.seconds, 7.0 * whole.latencySeconds, 1e-12);
        ++checked;
    }
    EXPECT_EQ(checked, 8); // forward and backward, four micro-batches
}

TEST(FrameworkOverlap, WithoutBackwardPrefetchGatherAndBackwardAlternate) {
    Case c;
    c.plan.zeroStage = 3;
    c.cluster.gpu.commContention = 0.0; // overlap is then free, so what it hides shows in full
    const PlanSimulation pre = simulatePlan(c.model, c.cluster, c.plan);
    c.plan.framework.backwardPrefetch = false;
    const PlanSimulation none = simulatePlan(c.model, c.cluster, c.plan);
    const auto& acts = none.schedule.stages[0].actions;
    double gatherSeconds = 0.0;
    int checked = 0;
    for (size_t i = 0; i < acts.size(); ++i) {
        if (acts[i].name.rfind("zero3_all_gather_params_bwd", 0) != 0) continue;
        gatherSeconds += none.costs.perAction[0][i].computeSeconds;
        // Issued after the previous compute ends, not when it starts...
        ASSERT_FALSE(acts[i].deps.empty());
        EXPECT_EQ(acts[i].deps.back().when, Dependency::When::End);
        // ...and the backward after it waits for all of it.
        for (size_t j = i + 1; j < acts.size(); ++j)
            if (acts[j].kind == ActionKind::Backward || acts[j].kind == ActionKind::BackwardInput) {
                bool waits = false;
                for (const auto& d : acts[j].deps)
                    waits = waits || (d.index == static_cast<int>(i) && d.when == Dependency::When::End && d.tailFraction == 0.0);
                EXPECT_TRUE(waits);
                ++checked;
                break;
            }
    }
    EXPECT_EQ(checked, 4); // one per micro-batch
    ASSERT_GT(gatherSeconds, 0.0);
    // Every backward gather is exposed now; prefetched, some of it hid under the previous compute.
    EXPECT_GT(none.metrics.stepSeconds, pre.metrics.stepSeconds);
    EXPECT_LE(none.metrics.stepSeconds, pre.metrics.stepSeconds + gatherSeconds + 1e-9);
}

TEST(Contention, OverlappedCommunicationSlowsComputeByKappaOfItsTime) {
    Case c;
    c.plan.framework.ddpImpl = "torch";
    c.plan.framework.name = "megatron";
    const PlanSimulation free = simulatePlan(c.model, c.cluster, c.plan);
    double dpSeconds = 0.0;
    const auto& acts = free.schedule.stages[0].actions;
    for (size_t i = 0; i < acts.size(); ++i)
        if (acts[i].kind == ActionKind::Collective) dpSeconds += free.costs.perAction[0][i].computeSeconds;
    ASSERT_GT(dpSeconds, 0.0);
    c.cluster.gpu.commContention = 0.6;
    const PlanSimulation slowed = simulatePlan(c.model, c.cluster, c.plan);
    double lost = 0.0;
    for (size_t i = 0; i < acts.size(); ++i) lost += slowed.costs.perAction[0][i].contentionDpSeconds;
    // Some of the reduction overlapped the last backward; at most all of it, at κ per second.
    EXPECT_GT(lost, 0.0);
    EXPECT_LE(lost, 0.6 * dpSeconds + 1e-12);
    EXPECT_GT(slowed.metrics.stepSeconds, free.metrics.stepSeconds);
    EXPECT_LE(slowed.metrics.stepSeconds, free.metrics.stepSeconds + lost + 1e-12);
    for (const auto& b : slowed.timeline.perStage) EXPECT_NEAR(b.total(), slowed.metrics.stepSeconds, 1e-9 * slowed.metrics.stepSeconds);
    // Communication that does not overlap (local DDP) costs no compute.
    c.plan.framework.ddpImpl = "local";
    const PlanSimulation local = simulatePlan(c.model, c.cluster, c.plan);
    double none = 0.0;
    for (const auto& cost : local.costs.perAction[0]) none += cost.contentionDpSeconds;
    EXPECT_DOUBLE_EQ(none, 0.0);
}

// The ceiling (FORMULAS.md §6.2): however much communication runs beside a compute action, it loses at most
// comm_contention_max of its own compute time. With more DP traffic than compute (a slow link), the charge that
// κ alone gives exceeds the ceiling on some action, and the ceiling then holds it there exactly.
TEST(Contention, AComputeActionLosesAtMostTheCeilingShareOfItsOwnTime) {
    Case c;
    c.plan.framework.ddpImpl = "torch";
    c.plan.framework.name = "megatron";
    c.plan.zeroStage = 3;
    c.cluster.interNode.bandwidthBytesPerSecond /= 20.0; // communication well beyond the compute it overlaps
    c.cluster.gpu.commContention = 0.87;
    const PlanSimulation uncapped = simulatePlan(c.model, c.cluster, c.plan);
    c.cluster.gpu.commContentionMax = 0.3;
    const PlanSimulation capped = simulatePlan(c.model, c.cluster, c.plan);
    const auto& acts = capped.schedule.stages[0].actions;
    double lostUncapped = 0.0, lostCapped = 0.0;
    int binding = 0;
    for (size_t i = 0; i < acts.size(); ++i) {
        if (!isCompute(acts[i].kind)) continue;
        const ActionCost& u = uncapped.costs.perAction[0][i];
        const ActionCost& k = capped.costs.perAction[0][i];
        const double lost = k.contentionDpSeconds + k.contentionPpSeconds;
        EXPECT_LE(lost, 0.3 * k.computeSeconds * (1.0 + 1e-12)) << acts[i].name;
        if (lost > 0.3 * k.computeSeconds * (1.0 - 1e-9)) ++binding;
        lostUncapped += u.contentionDpSeconds + u.contentionPpSeconds;
        lostCapped += lost;
    }
    EXPECT_GT(binding, 0);
    EXPECT_GT(lostUncapped, lostCapped);
    EXPECT_LE(capped.metrics.stepSeconds, uncapped.metrics.stepSeconds); // equal where the link bounds the step
    for (const auto& b : capped.timeline.perStage) EXPECT_NEAR(b.total(), capped.metrics.stepSeconds, 1e-9 * capped.metrics.stepSeconds);
}

// NCCL user buffers (Megatron-core's nccl_ub, FORMULAS.md §6.2): the data-parallel collectives hold NCCL's few
// SM-efficient CTAs, so the compute beside them loses κ less the part NCCL's channels make plus the part those
// CTAs make (GpuSpec::collectiveContention). On a GPU without the measured curve nothing changes.
TEST(Contention, DataParallelCollectivesOnNcclUserBuffersCostTheComputeLess) {
    Case c;
    c.plan.framework.name = "megatron";
    c.plan.zeroStage = 3;
    c.plan.dp = 8; // one node of the 8 x 2 cluster: NVLink only, 4 CTAs a gather and 5 a reduce-scatter
    c.plan.globalBatch = 32;
    c.cluster.gpu.commContention = 0.87;
    c.cluster.gpu.ncclCollChannels = 32;
    auto lostOf = [](const PlanSimulation& sim) {
        double lost = 0.0;
        for (const auto& cost : sim.costs.perAction[0]) lost += cost.contentionDpSeconds;
        return lost;
    };
    const PlanSimulation channels = simulatePlan(c.model, c.cluster, c.plan);
    c.plan.framework.ncclUb = true;
    const PlanSimulation noCurve = simulatePlan(c.model, c.cluster, c.plan);
    EXPECT_DOUBLE_EQ(noCurve.metrics.stepSeconds, channels.metrics.stepSeconds); // no curve: κ as before
    ASSERT_GT(lostOf(channels), 0.0);

    c.cluster.gpu.contentionByCtas = {{8.0, 0.139}, {16.0, 0.34}, {32.0, 0.433}, {64.0, 0.571}};
    c.plan.framework.ncclUb = false;
    const PlanSimulation own = simulatePlan(c.model, c.cluster, c.plan);
    EXPECT_DOUBLE_EQ(own.metrics.stepSeconds, channels.metrics.stepSeconds); // the curve alone changes nothing
    c.plan.framework.ncclUb = true;
    const PlanSimulation registered = simulatePlan(c.model, c.cluster, c.plan);
    const auto& acts = registered.schedule.stages[0].actions;
    for (size_t i = 0; i < acts.size(); ++i) {
        if (acts[i].kind != ActionKind::Collective) continue;
        const double weight = registered.costs.perAction[0][i].contentionWeight;
        // 0.87 - 0.433 + 0.139 x 4 / 8 for a gather, x 5 / 8 for a reduce-scatter, over 0.87.
        const double expected = acts[i].primitive == Primitive::AllGather ? (0.87 - 0.433 + 0.0695) / 0.87
                                                                          : (0.87 - 0.433 + 0.086875) / 0.87;
        EXPECT_NEAR(weight, expected, 1e-12) << acts[i].name;
    }
    // Less than at the channels' κ, not below the weights' share of it (the fixed point moves the overlap a little).
    EXPECT_LT(lostOf(registered), 0.8 * lostOf(own));
    EXPECT_GT(lostOf(registered), 0.5 * lostOf(own));
    EXPECT_LT(registered.metrics.stepSeconds, own.metrics.stepSeconds);
    for (const auto& b : registered.timeline.perStage)
        EXPECT_NEAR(b.total(), registered.metrics.stepSeconds, 1e-9 * registered.metrics.stepSeconds);
}

TEST(Contention, TheChargeIsKappaOfTheCommunicationAtMostTheCeilingOfTheCompute) {
    EXPECT_DOUBLE_EQ(contentionSeconds(0.87, 0.0, 2.0, 1.0), 1.74);   // no ceiling
    EXPECT_DOUBLE_EQ(contentionSeconds(0.87, 0.76, 0.5, 1.0), 0.435); // below it
    EXPECT_DOUBLE_EQ(contentionSeconds(0.87, 0.76, 2.0, 1.0), 0.76);  // held at 0.76 of the compute
    GpuSpec g;
    g.commContention = 0.5;
    g.commContentionMax = 0.2;
    EXPECT_DOUBLE_EQ(g.contentionSeconds(1.0, 10.0), 0.5);
    EXPECT_DOUBLE_EQ(g.contentionSeconds(1.0, 1.0), 0.2);
}

} // namespace
} // namespace tessel::sim
