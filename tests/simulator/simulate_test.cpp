// The event simulation against closed forms (bubble fractions), overlap, breakdowns and real plans.
#include "../cost_models/test_support.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/cost/traffic.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace tessel::sim {
namespace {

// Free communication and chunk passes of F (forward), b (input gradient) and W (weight gradient), a whole backward
// b + W; the optimizer and every transfer and collective cost nothing.
CostTable chunkCosts(const ActionSchedule& s, double F, double b, double W) {
    CostTable t;
    for (const auto& st : s.stages) {
        std::vector<ActionCost> costs;
        for (const auto& a : st.actions) {
            ActionCost c;
            if (a.kind == ActionKind::Forward) c.computeSeconds = F;
            if (a.kind == ActionKind::Backward) c.computeSeconds = b + W;
            if (a.kind == ActionKind::BackwardInput) c.computeSeconds = b;
            if (a.kind == ActionKind::BackwardWeight) c.computeSeconds = W;
            c.seconds = c.computeSeconds;
            costs.push_back(c);
        }
        t.perAction.push_back(costs);
    }
    return t;
}

// Uniform stages: F = 1, B = 2 (ZB-H1: b = W = 1) per micro-batch through a stage, each chunk 1/v of that.
CostTable uniformCosts(const ActionSchedule& s) {
    const double v = s.plan.vpp;
    return chunkCosts(s, 1.0 / v, 1.0 / v, 1.0 / v);
}

ActionSchedule pipeline(int pp, int m, Schedule schedule, int vpp = 1) {
    ModelConfig model = test::megatronStyleModel(48, 256, 4, 1000, 128);
    Plan p;
    p.pp = pp;
    p.vpp = vpp;
    p.globalBatch = m;
    p.schedule = schedule;
    return buildSchedule(model, p);
}

TEST(ClosedForm, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
    for (int p : {2, 3, 4, 8})
        for (int m : {1, 2, 4, 8, 16, 32}) {
            ActionSchedule s = pipeline(p, m, Schedule::OneFOneB);
            Timeline t = simulate(s, uniformCosts(s));
            EXPECT_NEAR(t.stepSeconds, 3.0 * (m + p - 1), 1e-9) << "p=" << p << " m=" << m;
            for (const auto& b : t.perStage) {
                EXPECT_NEAR(b.bubbleSeconds / t.stepSeconds, (p - 1.0) / (m + p - 1.0), 1e-9);
                EXPECT_NEAR(b.total(), t.stepSeconds, 1e-9);
            }
        }
}

TEST(ClosedForm, GpipeTakesAsLongAs1F1BButHoldsEveryMicroBatch) {
    for (int p : {2, 4, 8})
        for (int m : {4, 8, 16}) {
            ActionSchedule g = pipeline(p, m, Schedule::Gpipe);
            ActionSchedule f = pipeline(p, m, Schedule::OneFOneB);
            EXPECT_NEAR(simulate(g, uniformCosts(g)).stepSeconds, simulate(f, uniformCosts(f)).stepSeconds, 1e-9);
            EXPECT_DOUBLE_EQ(peakInFlight(g.stages[0], 1), m);
            EXPECT_DOUBLE_EQ(peakInFlight(f.stages[0], 1), std::min(m, p));
        }
}

TEST(ClosedForm, InterleavingDividesTheBubbleByV) {
    for (int p : {2, 4})
        for (int v : {2, 3, 4})
            for (int m : {p, 2 * p, 4 * p}) {
                if (48 % (p * v) != 0) continue;
                ActionSchedule s = pipeline(p, m, Schedule::Interleaved1F1B, v);
                Timeline t = simulate(s, uniformCosts(s));
                // Narayanan et al. 2021 §2.2.2: bubble time (p - 1)(t_f + t_b) / v.
                EXPECT_NEAR(t.stepSeconds - 3.0 * m, 3.0 * (p - 1) / v, 1e-9) << "p=" << p << " v=" << v << " m=" << m;
            }
}

TEST(ClosedForm, ZeroBubbleH1HasASmallerBubbleAtEqualMemory) {
    for (int p : {2, 4, 8})
        for (int m : {8, 16, 32}) {
            ActionSchedule zb = pipeline(p, m, Schedule::ZeroBubble);
            ActionSchedule f = pipeline(p, m, Schedule::OneFOneB);
            const double tz = simulate(zb, uniformCosts(zb)).stepSeconds;
            const double tf = simulate(f, uniformCosts(f)).stepSeconds;
            EXPECT_LT(tz, tf) << "p=" << p << " m=" << m;
            // With F = B = W, ZB-H1's bubble is about a third of 1F1B's (Qi et al. 2024, Table 2).
            EXPECT_LE(tz - 3.0 * m, (tf - 3.0 * m) / 3.0 + 1.0 + 1e-9);
            for (int st = 0; st < p; ++st) EXPECT_DOUBLE_EQ(peakInFlight(zb.stages[st], 1), peakInFlight(f.stages[st], 1));
        }
}

// DualPipeV with uniform chunks (F = 1/2, b = W = 1/2 each) and free transfers: each rank computes 2 m chunk
// passes, 3 m in all, and waits (p - 1)(F + b - W) = (p - 1) / 2, a third of interleaved 1F1B's at v = 2 and a
// sixth of 1F1B's. The bubble is what an independent event simulation of PyTorch's order (a dozen lines of Python
// over the same eight steps, each action waiting for its predecessor in the model) gives for p = 2 .. 8 and
// m = 2p .. 4p, and for other F, b, W: (1, 1, 1) -> (p - 1), (1, 1, 1/2) -> 1.5 (p - 1), (2, 1, 1) -> 2 (p - 1).
TEST(ClosedForm, DualPipeVWaitsPMinusOneTimesFPlusBMinusW) {
    for (int p : {2, 3, 4, 6})
        for (int m : {2 * p, 2 * p + 1, 3 * p, 4 * p}) {
            ActionSchedule s = pipeline(p, m, Schedule::DualPipeV, 2);
            for (const auto& [F, b, W] : {std::tuple{0.5, 0.5, 0.5}, std::tuple{1.0, 1.0, 0.5}, std::tuple{2.0, 1.0, 1.0}}) {
                Timeline t = simulate(s, chunkCosts(s, F, b, W));
                EXPECT_NEAR(t.stepSeconds, 2.0 * m * (F + b + W) + (p - 1) * (F + b - W), 1e-9)
                    << "p=" << p << " m=" << m << " F=" << F << " b=" << b << " W=" << W;
            }
            for (int st = 0; st < p; ++st) EXPECT_DOUBLE_EQ(peakInFlight(s.stages[static_cast<size_t>(st)], 2), p + 0.5);
        }
}

// Multi-token prediction (FORMULAS.md §6): one module on the output layer's stage costs there one more layer, the head
// and loss again and its own ops (mtpCompute), forward and backward, and nothing on the other stage; it holds the
// module's parameters and an embedding copy where that stage lacks the model's (none under DualPipeV's V); model
// FLOPs count its projection and logits as Megatron-LM does, not its layer.
// ZB-V with uniform chunks (F = b = W = 1/2) and free transfers: 3 m of work and (p - 1) / 2 of bubble from 2p
// micro-batches on (the same independent event simulation of PyTorch's order gives p - 1 at F = b = W = 1), and the
// in-flight peak of 1F1B's stage 0 (p stage-equivalents) on every stage, the ZB paper's equal-memory claim.
TEST(ClosedForm, ZeroBubbleVWaitsPMinusOneHalves) {
    for (int p : {2, 3, 4, 6})
        for (int m : {2 * p, 3 * p, 4 * p}) {
            ActionSchedule s = pipeline(p, m, Schedule::ZeroBubbleV, 2);
            Timeline t = simulate(s, uniformCosts(s));
            EXPECT_NEAR(t.stepSeconds, 3.0 * m + 0.5 * (p - 1), 1e-9) << "p=" << p << " m=" << m;
            for (int st = 0; st < p; ++st) EXPECT_DOUBLE_EQ(peakInFlight(s.stages[static_cast<size_t>(st)], 2), p);
        }
}

TEST(Simulation, MultiTokenPredictionRunsOnTheOutputLayersStageByHand) {
    ModelConfig plain = test::megatronStyleModel(8, 1024, 16, 32000, 1024);
    plain.tiedEmbeddings = false;
    plain.dropout = 0.0;
    ModelConfig mtp = plain;
    mtp.mtpLayers = 1;
    const ClusterConfig cluster = test::roundCluster(2, 1);
    Plan p;
    p.pp = 2;
    p.globalBatch = 4;
    p.recompute = Recompute::Full;
    const PrecisionRecipe recipe = precisionRecipeOf(p);
    auto firstOf = [](const ActionSchedule& s, const CostTable& t, int stage, ActionKind kind) {
        const auto& acts = s.stages[static_cast<size_t>(stage)].actions;
        for (size_t i = 0; i < acts.size(); ++i)
            if (acts[i].kind == kind) return t.perAction[static_cast<size_t>(stage)][i].computeSeconds;
        return -1.0;
    };
    const ActionSchedule sp = buildSchedule(plain, p), sm = buildSchedule(mtp, p);
    const CostTable tp = costSchedule(sp, plain, cluster), tm = costSchedule(sm, mtp, cluster);
    const BlockCompute layer = layerCompute(plain, cluster, p, recipe), head = headCompute(plain, cluster, p, recipe);
    const BlockCompute own = mtpCompute(plain, cluster, p, recipe);
    EXPECT_NEAR(firstOf(sm, tm, 1, ActionKind::Forward) - firstOf(sp, tp, 1, ActionKind::Forward),
                layer.forward.seconds + head.forward.seconds + own.forward.seconds, 1e-12);
    EXPECT_NEAR(firstOf(sm, tm, 1, ActionKind::Backward) - firstOf(sp, tp, 1, ActionKind::Backward),
                layer.backwardInput.seconds + layer.recompute.seconds + layer.backwardWeight.seconds +
                    head.backwardInput.seconds + head.backwardWeight.seconds + own.backwardInput.seconds +
                    own.recompute.seconds + own.backwardWeight.seconds,
                1e-12);
    EXPECT_DOUBLE_EQ(firstOf(sm, tm, 0, ActionKind::Forward), firstOf(sp, tp, 0, ActionKind::Forward));
    EXPECT_GT(own.forward.seconds, 0.0);
    // Parameters: the module (tp 1: all of it) and the embedding copy on stage 1; stage 0 unchanged.
    const double module = static_cast<double>(countParameters(mtp).perMtpModule);
    EXPECT_NEAR(stageParameters(mtp, p, 1).total() - stageParameters(plain, p, 1).total(), module + embeddingParameters(mtp, p), 1.0);
    EXPECT_DOUBLE_EQ(stageParameters(mtp, p, 0).total(), stageParameters(plain, p, 0).total());
    Plan v = p;
    v.vpp = 2;
    v.schedule = Schedule::DualPipeV;
    EXPECT_NEAR(stageParameters(mtp, v, 0).total() - stageParameters(plain, v, 0).total(), module, 1.0);
    // Memory: stage 1 holds more, by at least the module's model state and its logits' saved softmax.
    EXPECT_GT(predictMemory(mtp, cluster, p).stages[1].totalBytes(), predictMemory(plain, cluster, p).stages[1].totalBytes());
    EXPECT_DOUBLE_EQ(predictMemory(mtp, cluster, p).stages[0].totalBytes(), predictMemory(plain, cluster, p).stages[0].totalBytes());
    // Model FLOPs: 3 x (eh_proj 2 T h 2h + logits 2 T h V) a sequence more.
    const double T = 1024.0, h = 1024.0, V = 32000.0;
    EXPECT_NEAR(modelFlopsPerStep(mtp, p) - modelFlopsPerStep(plain, p), 3.0 * 4.0 * (2.0 * T * h * 2.0 * h + 2.0 * T * h * V),
                1e-6 * modelFlopsPerStep(plain, p));
    EXPECT_GT(simulatePlan(mtp, cluster, p).metrics.stepSeconds, simulatePlan(plain, cluster, p).metrics.stepSeconds);
}

TEST(Simulation, PartialRecomputeReplaysItsLayersOnly) {
    // GPT-3 175B's default plan (12 layers a stage): the replay grows with the layers recomputed, and
    // recompute_layers at the chunk's size is full recompute.
    Scenario s = defaultScenario();
    finishScenario(s);
    auto step = [&](Recompute rc, int layers) {
        Plan p = s.plan;
        p.recompute = rc;
        p.recomputeLayers = layers;
        return simulatePlan(s.model, s.cluster, p).metrics.stepSeconds;
    };
    const double none = step(Recompute::None, 0), full = step(Recompute::Full, 0);
    double previous = none;
    for (int n : {1, 6, 11}) {
        const double t = step(Recompute::Full, n);
        EXPECT_GT(t, previous) << n;
        EXPECT_LT(t, full) << n;
        previous = t;
    }
    EXPECT_DOUBLE_EQ(step(Recompute::Full, 12), full);
}

TEST(Simulation, ACyclicScheduleIsReportedNotHung) {
    ActionSchedule s = pipeline(2, 2, Schedule::OneFOneB);
    // Make stage 0's first forward wait for stage 1's first backward: a cycle through the pipeline.
    int backward = -1;
    for (int i = 0; i < static_cast<int>(s.stages[1].actions.size()); ++i)
        if (s.stages[1].actions[i].kind == ActionKind::Backward) backward = i;
    s.stages[0].actions[0].deps.push_back({1, backward, Dependency::When::End, 1.0});
    try {
        simulate(s, uniformCosts(s));
        FAIL() << "expected a deadlock error";
    } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find("deadlocks"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("stage 0"), std::string::npos);
    }
}

TEST(Simulation, DataParallelReductionOverlapsTheLastBackward) {
    ModelConfig model = test::preset("gpt3-1.3b");
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    cluster.nodes = 2;
    Plan p;
    p.dp = 16;
    p.globalBatch = 64;
    p.zeroStage = 0;
    PlanSimulation sim = simulatePlan(model, cluster, p);
    double collectives = 0.0, compute = 0.0;
    const auto& acts = sim.schedule.stages[0].actions;
    for (size_t i = 0; i < acts.size(); ++i) {
        if (acts[i].kind == ActionKind::Collective) collectives += sim.costs.perAction[0][i].seconds;
        else if (isCompute(acts[i].kind))
            compute += sim.costs.perAction[0][i].seconds - sim.costs.perAction[0][i].contentionDpSeconds -
                       sim.costs.perAction[0][i].contentionPpSeconds;
    }
    ASSERT_GT(collectives, 0.0);
    EXPECT_LT(sim.metrics.stepSeconds, compute + collectives - 1e-6); // part of the reduction is hidden
    EXPECT_GE(sim.metrics.stepSeconds, compute);
    // Exposed reduction and the compute the overlapped part took (contention) are both DP time.
    EXPECT_NEAR(sim.metrics.breakdown.dpSeconds, sim.metrics.stepSeconds - compute, 1e-9);
}

// The compute of a stage's first action of a kind (its first micro-batch's forward, by default).
double firstPassSeconds(const ActionSchedule& schedule, const CostTable& costs, int stage,
                        ActionKind kind = ActionKind::Forward) {
    const auto& acts = schedule.stages[static_cast<size_t>(stage)].actions;
    for (size_t i = 0; i < acts.size(); ++i)
        if (acts[i].kind == kind) return costs.perAction[static_cast<size_t>(stage)][i].computeSeconds;
    throw std::runtime_error("no action of that kind");
}

// Activation offload on one node of GPT-3 1.3B (dp 8, ZeRO-1, full recompute, 4 micro-batches each):
// DeepSpeed's cpu_checkpointing copies each layer's checkpointed input down in the forward and up in the
// backward with a plain tensor.to(device) on the compute stream (checkpointing.py), so each pass lasts its
// compute plus the swap, the stage's 24 layer inputs over the host link; Megatron-core's layer offload copies
// on a side stream, so a pass lasts the longer of the two.
TEST(Simulation, DeepSpeedActivationSwapsAddToEachPassLayerOffloadHidesUnderIt) {
    ModelConfig model = test::preset("gpt3-1.3b");
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    cluster.nodes = 1;
    Plan p;
    p.dp = 8;
    p.globalBatch = 32;
    p.zeroStage = 1;
    p.recompute = Recompute::Full;
    auto passes = [&](const Plan& plan) {
        PlanSimulation sim = simulatePlan(model, cluster, plan);
        std::map<ActionKind, double> first;
        for (ActionKind k : {ActionKind::Forward, ActionKind::Backward})
            first[k] = firstPassSeconds(sim.schedule, sim.costs, 0, k);
        return first;
    };
    const auto plain = passes(p);
    Plan deepspeed = p;
    deepspeed.offloadActivations = true;
    const auto swapped = passes(deepspeed);
    const PrecisionRecipe& recipe = *findPrecisionRecipe(p.precision);
    const double swap =
        model.layers * layerActivationBytes(model, p, recipe) / cluster.host.pcieBytesPerSecond;
    ASSERT_GT(swap, 0.0);
    EXPECT_NEAR(swapped.at(ActionKind::Forward) - plain.at(ActionKind::Forward), swap, 1e-9);
    EXPECT_NEAR(swapped.at(ActionKind::Backward) - plain.at(ActionKind::Backward), swap, 1e-9);
    // Megatron-core's offload (no recompute) of the first layer: its copy hides under the pass; of the first
    // 23: the pass lasts the copy, the longer of the two, not the sum.
    Plan megatron = p;
    megatron.recompute = Recompute::None;
    const double eager = passes(megatron).at(ActionKind::Forward);
    const double oneLayer = layerActivationBytes(model, megatron, recipe) / cluster.host.pcieBytesPerSecond;
    megatron.offloadActivationLayers = 1;
    ASSERT_LT(oneLayer, eager);
    EXPECT_DOUBLE_EQ(passes(megatron).at(ActionKind::Forward), eager);
    megatron.offloadActivationLayers = 23;
    ASSERT_GT(23 * oneLayer, eager);
    EXPECT_NEAR(passes(megatron).at(ActionKind::Forward), 23 * oneLayer, 1e-9);
}

// pp 2 x dp 4 with experts over 2 ranks, 8 sequences a step: two stages of four layers of an 8-layer model.
Plan pipelinedExpertPlan() {
    Plan p;
    std::tie(p.pp, p.dp, p.ep, p.globalBatch) = std::make_tuple(2, 4, 2, 8);
    return p;
}

// An MoE model's dense layers (moe.dense_layers) are costed as the dense model's layers: a chunk's forward is its
// expert layers at the MoE layer's cost plus its dense layers at the dense one's, and its parameters and gradient
// reductions hold the dense MLP where the experts would be.
TEST(Simulation, DenseLayersAmongExpertLayersCostTheDenseLayer) {
    ModelConfig model = test::preset("mixtral-8x7b");
    model.layers = 8;
    model.moe->denseLayers = {0, 1, 2};
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    const Plan p = pipelinedExpertPlan();
    const ActionSchedule schedule = buildSchedule(model, p);
    const CostTable costs = costSchedule(schedule, model, cluster);
    const PrecisionRecipe recipe = precisionRecipeOf(p);
    const BlockCompute expert = layerCompute(model, cluster, p, recipe);
    const BlockCompute dense = layerCompute(model.denseLayerModel(), cluster, p, recipe);
    const BlockCompute emb = embeddingCompute(model, cluster, p, recipe);
    const BlockCompute head = headCompute(model, cluster, p, recipe);
    auto firstForward = [&](int stage) { return firstPassSeconds(schedule, costs, stage); };
    // Stage 0 holds layers 0-3 (three dense, one expert) and the embedding; stage 1 layers 4-7 and the head.
    EXPECT_NEAR(firstForward(0), 3.0 * dense.forward.seconds + expert.forward.seconds + emb.forward.seconds, 1e-12);
    EXPECT_NEAR(firstForward(1), 4.0 * expert.forward.seconds + head.forward.seconds, 1e-12);
    const StageParameters s0 = stageParameters(model, p, 0), s1 = stageParameters(model, p, 1);
    const StageParameters e = layerParameters(model, p), dl = layerParameters(model.denseLayerModel(), p);
    EXPECT_DOUBLE_EQ(s0.expert, e.expert);
    EXPECT_DOUBLE_EQ(s0.dense, e.dense + 3.0 * dl.dense + embeddingParameters(model, p));
    EXPECT_DOUBLE_EQ(s1.expert, 4.0 * e.expert);
    const StageParameters c0 = chunkParameters(model, p, 0, 0);
    EXPECT_DOUBLE_EQ(c0.dense + c0.expert, s0.dense + s0.expert);
    // The model's FLOPs count the dense layers' MLP: three layers' worth less than all eight with experts.
    ModelConfig allExperts = model;
    allExperts.moe->denseLayers.clear();
    EXPECT_LT(modelFlopsPerStep(model, p), modelFlopsPerStep(allExperts, p));
    // Memory: stage 0 keeps the dense layers' activations, which an expert layer's exceed (top-2 routing).
    const MemoryShapeTerms t = memoryShapeTerms(model, p, recipe);
    EXPECT_LT(t.denseLayerActivations, t.layerActivations);
    EXPECT_DOUBLE_EQ(t.denseLayerActivations, layerActivationBytes(model.denseLayerModel(), p, recipe));
}

// A windowed model's full-attention layers (full_attention_layers) are layers of their own kind, as an MoE model's
// dense layers are, and the two mix: a chunk's forward is each of its layers at its own kind's cost (dense or expert
// MLP, windowed or full attention); the model's FLOPs count each layer's keys; the kinds change no parameter.
TEST(Simulation, FullAttentionLayersAmongWindowedLayersCostTheFullLayer) {
    ModelConfig model = test::preset("mixtral-8x7b");
    model.layers = 8;
    model.seqLen = 8192;
    model.slidingWindow = 1024;
    model.moe->denseLayers = {0, 1, 2};
    model.fullAttentionLayers = {1, 3, 5, 7}; // every other layer, as gpt-oss and Gemma 2
    ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    const Plan p = pipelinedExpertPlan();
    const ActionSchedule schedule = buildSchedule(model, p);
    const CostTable costs = costSchedule(schedule, model, cluster);
    const PrecisionRecipe recipe = precisionRecipeOf(p);
    const double expertWindowed = layerCompute(model, cluster, p, recipe).forward.seconds;
    const double expertFull = layerCompute(model.fullAttentionLayerModel(), cluster, p, recipe).forward.seconds;
    const double denseWindowed = layerCompute(model.denseLayerModel(), cluster, p, recipe).forward.seconds;
    const double denseFull = layerCompute(model.denseLayerModel().fullAttentionLayerModel(), cluster, p, recipe).forward.seconds;
    ASSERT_LT(expertWindowed, expertFull);
    ASSERT_LT(denseWindowed, denseFull);
    for (int l = 0; l < model.layers; ++l) {
        const ModelConfig kind = model.layerModel(l);
        EXPECT_EQ(kind.slidingWindow, l % 2 ? 0 : 1024) << l;
        EXPECT_EQ(kind.moe.has_value(), l > 2) << l;
    }
    auto firstForward = [&](int stage) { return firstPassSeconds(schedule, costs, stage); };
    const double emb = embeddingCompute(model, cluster, p, recipe).forward.seconds;
    const double head = headCompute(model, cluster, p, recipe).forward.seconds;
    // Stage 0: layers 0 (dense, windowed), 1 (dense, full), 2 (dense, windowed), 3 (expert, full) and the embedding;
    // stage 1: layers 4 and 6 (expert, windowed), 5 and 7 (expert, full) and the head.
    EXPECT_NEAR(firstForward(0), 2.0 * denseWindowed + denseFull + expertFull + emb, 1e-12);
    EXPECT_NEAR(firstForward(1), 2.0 * expertWindowed + 2.0 * expertFull + head, 1e-12);
    // The model FLOPs: between the all-windowed and the unwindowed model's, halfway in attention.
    ModelConfig allWindowed = model, none = model.fullAttentionLayerModel();
    allWindowed.fullAttentionLayers.clear();
    const double windowed = modelFlopsPerStep(allWindowed, p), full = modelFlopsPerStep(none, p);
    ASSERT_LT(windowed, full);
    EXPECT_NEAR(modelFlopsPerStep(model, p), 0.5 * (windowed + full), 1e-9 * full);
    EXPECT_EQ(countParameters(model).total(model.layers), countParameters(none).total(none.layers));
    // The step lies between the all-windowed and the unwindowed model's.
    const double step = simulatePlan(model, cluster, p).metrics.stepSeconds;
    EXPECT_GT(step, simulatePlan(allWindowed, cluster, p).metrics.stepSeconds);
    EXPECT_LT(step, simulatePlan(none, cluster, p).metrics.stepSeconds);
}

// Synchronisation waits (FORMULAS.md §6) by hand: a DP collective waits σ e(dp) x the compute since the DP
// group last met; a compute action with TP collectives inside waits σ e(tp) x its compute; the communication
// scale multiplies every collective; σ = 0 and scale 1 change nothing.
TEST(Simulation, SynchronisationWaitsAndCommunicationScaleByHand) {
    ModelConfig model = test::preset("gpt3-1.3b");
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    cluster.nodes = 2;
    Plan p;
    p.tp = 2;
    p.dp = 8;
    p.globalBatch = 32;
    p.zeroStage = 2; // a reduce-scatter after every micro-batch's backward
    const ActionSchedule schedule = buildSchedule(model, p);
    const CostTable plain = costSchedule(schedule, model, cluster);
    ClusterConfig noisy = cluster;
    noisy.gpu.syncJitterFraction = 0.1;
    noisy.gpu.phaseFits["communication"] = PhaseFit{0.0, 2.0};
    const CostTable costs = costSchedule(schedule, model, noisy);
    const auto& acts = schedule.stages[0].actions;
    double work = 0.0;
    int collectivesAfterWork = 0, computeWithTp = 0;
    for (size_t i = 0; i < acts.size(); ++i) {
        const ActionCost& c0 = plain.perAction[0][i];
        const ActionCost& c = costs.perAction[0][i];
        EXPECT_EQ(c0.waitSeconds, 0.0);
        if (acts[i].kind == ActionKind::Collective && acts[i].group == GroupKind::Dp) {
            EXPECT_NEAR(c.computeSeconds, 2.0 * c0.computeSeconds, 1e-12 * c0.computeSeconds);
            EXPECT_EQ(c.syncGroupSize, 8);
            EXPECT_NEAR(c.waitSeconds, 0.1 * expectedMaxOfNormals(8) * work, 1e-12);
            if (work > 0.0) ++collectivesAfterWork;
            work = 0.0;
        } else if (isCompute(acts[i].kind)) {
            EXPECT_NEAR(c.computeSeconds, c0.computeSeconds, 1e-15); // compute is not communication
            work += c.computeSeconds;
            if (c0.tpSeconds > 0.0) {
                EXPECT_NEAR(c.tpSeconds, 2.0 * c0.tpSeconds, 1e-12 * c0.tpSeconds);
                EXPECT_NEAR(c.waitSeconds, 0.1 * expectedMaxOfNormals(2) * c.computeSeconds, 1e-12);
                EXPECT_NEAR(c.seconds, c.computeSeconds + c.tpSeconds + c.waitSeconds, 1e-12);
                ++computeWithTp;
            }
        }
    }
    EXPECT_GE(collectivesAfterWork, 4); // one per micro-batch under ZeRO-2
    EXPECT_GT(computeWithTp, 0);
    // The breakdown still sums to the step with the waits attributed, and the step grew.
    const Timeline t0 = simulate(schedule, plain), t = simulate(schedule, costs);
    EXPECT_GT(t.stepSeconds, t0.stepSeconds);
    for (const auto& b : t.perStage) EXPECT_NEAR(b.total(), t.stepSeconds, 1e-9 * t.stepSeconds);
}

// A pipeline receive with jittered work on both sides (FORMULAS.md §6) ends at the expected maximum of the two
// arrivals, the receiver's (its stream free + the transfer) and the data's (the send's end). pp 2, one
// micro-batch, F = 1, B = 2: step 6 without waits.
TEST(Simulation, PipelineReceiveWaitsForTheLaterOfTwoJitteredArrivals) {
    const ActionSchedule s = pipeline(2, 1, Schedule::OneFOneB);
    auto find = [&](int stage, ActionKind kind) {
        const auto& acts = s.stages[static_cast<size_t>(stage)].actions;
        for (size_t i = 0; i < acts.size(); ++i)
            if (acts[i].kind == kind) return i;
        throw std::runtime_error("no such action");
    };
    const size_t recv = find(1, ActionKind::RecvActivation), send = find(0, ActionKind::SendActivation);
    CostTable costs = uniformCosts(s);
    EXPECT_NEAR(simulate(s, costs).stepSeconds, 6.0, 1e-12);
    costs.syncJitterFraction = 0.1;
    costs.perAction[1][recv].syncWorkSeconds = 1.0;
    costs.perAction[0][send].syncWorkSeconds = 1.0;
    // Stage 1 is ready at 0, the activation arrives at 1: 7 spreads apart (s = 0.1 sqrt 2), nothing to add.
    EXPECT_NEAR(simulate(s, costs).stepSeconds, 6.0, 1e-9);
    // A 1 s receive: the receiver's side arrives at 0 + 1, the data at 1. Both at once: the receive (1 to 2)
    // ends s / sqrt(2 pi) later, and everything after it on both stages moves by as much.
    costs.perAction[1][recv].seconds = 1.0;
    CostTable calm = costs;
    calm.syncJitterFraction = 0.0;
    EXPECT_NEAR(simulate(s, calm).stepSeconds, 7.0, 1e-12);
    const double wait = 0.1 * std::sqrt(2.0) / std::sqrt(2.0 * 3.14159265358979323846);
    const Timeline t = simulate(s, costs);
    EXPECT_NEAR(t.perAction[1][recv].endSeconds, 2.0 + wait, 1e-12);
    EXPECT_NEAR(t.stepSeconds, 7.0 + wait, 1e-12);
    for (const auto& b : t.perStage) EXPECT_NEAR(b.total(), t.stepSeconds, 1e-12);
    // costSchedule gives each transfer the stage's compute since its previous transfer, and the table σ.
    const ModelConfig model = test::megatronStyleModel(48, 256, 4, 1000, 128);
    ClusterConfig cluster = test::clusterPreset("dgx-a100-80g");
    cluster.gpu.syncJitterFraction = 0.1;
    const CostTable real = costSchedule(s, model, cluster);
    EXPECT_EQ(real.syncJitterFraction, 0.1);
    EXPECT_EQ(real.perAction[1][recv].syncWorkSeconds, 0.0); // nothing computed on stage 1 before it
    EXPECT_NEAR(real.perAction[0][send].syncWorkSeconds, real.perAction[0][find(0, ActionKind::Forward)].computeSeconds,
                1e-15);
    EXPECT_EQ(real.perAction[0][send].waitSeconds, 0.0); // transfers carry W; simulate adds the wait
}

// Two nodes of 8, pp 4 x dp 4 with dp fastest: stages 0 and 1 share node 0, 2 and 3 node 1. Each pipeline hop
// costs its own placement: NVLink inside a node, the NIC between nodes (the interleaved wrap from stage 3 to 0
// crosses too). The traffic report keeps the worst hop.
TEST(Simulation, EachPipelineHopCostsWhereItsTwoStagesLive) {
    const ModelConfig model = test::megatronStyleModel(8, 1024, 16, 32000, 1024);
    const ClusterConfig cluster = test::roundCluster(8, 2);
    Plan plan;
    plan.pp = 4;
    plan.dp = 4;
    plan.vpp = 2;
    plan.schedule = Schedule::Interleaved1F1B;
    plan.microBatch = 1;
    plan.globalBatch = 16;
    EXPECT_FALSE(placeStagePair(plan, cluster, 0, 1).spansNodes());
    EXPECT_TRUE(placeStagePair(plan, cluster, 1, 2).spansNodes());
    EXPECT_FALSE(placeStagePair(plan, cluster, 2, 3).spansNodes());
    EXPECT_TRUE(placeStagePair(plan, cluster, 3, 0).spansNodes());
    const PlanSimulation sim = simulatePlan(model, cluster, plan);
    std::map<std::pair<int, int>, double> hop; // (stage, peer) -> transfer seconds
    for (size_t st = 0; st < sim.schedule.stages.size(); ++st) {
        const auto& acts = sim.schedule.stages[st].actions;
        for (size_t i = 0; i < acts.size(); ++i)
            if (acts[i].kind == ActionKind::SendActivation)
                hop[{static_cast<int>(st), acts[i].peerStage}] = sim.costs.perAction[st][i].computeSeconds;
    }
    ASSERT_EQ(hop.size(), 4u);
    const double bytes = pipelineCommOps(model, cluster, plan).front().bytes;
    const double intra = commCost(Primitive::SendRecv, bytes, placeStagePair(plan, cluster, 0, 1), cluster).seconds;
    const double inter = commCost(Primitive::SendRecv, bytes, placeStagePair(plan, cluster, 1, 2), cluster).seconds;
    EXPECT_LT(intra, inter);
    EXPECT_DOUBLE_EQ(hop.at({0, 1}), intra);
    EXPECT_DOUBLE_EQ(hop.at({1, 2}), inter);
    EXPECT_DOUBLE_EQ(hop.at({2, 3}), intra);
    EXPECT_DOUBLE_EQ(hop.at({3, 0}), inter);
    EXPECT_DOUBLE_EQ(pipelineCommOps(model, cluster, plan).front().cost.seconds, inter); // the report's worst hop
}

// With scatter-gather (Megatron-LM 2021) each hop sends 1/tp over the pair and the receiver all-gathers the whole
// tensor over its tensor-parallel group: the transfer action lasts both.
TEST(Simulation, AScatterGatherHopIsAShareOverThePairAndAnAllGather) {
    const ModelConfig model = test::megatronStyleModel(8, 1024, 16, 32000, 1024);
    const ClusterConfig cluster = test::roundCluster(8, 2);
    const Plan plan = test::plan3d(8, 2, 1, 1, 4, "megatron", "2021");
    const PlanSimulation sim = simulatePlan(model, cluster, plan);
    double hop = 0.0;
    for (size_t i = 0; i < sim.schedule.stages[0].actions.size(); ++i)
        if (sim.schedule.stages[0].actions[i].kind == ActionKind::SendActivation) hop = sim.costs.perAction[0][i].computeSeconds;
    double send = 0.0, gather = 0.0;
    for (const auto& op : pipelineCommOps(model, cluster, plan)) {
        if (op.name == "pp_send_activation") send = commCost(Primitive::SendRecv, op.bytes, placeStagePair(plan, cluster, 0, 1), cluster).seconds;
        if (op.name == "pp_all_gather_activation") gather = cluster.gpu.phaseFit("communication").timeScale * op.cost.seconds;
    }
    EXPECT_GT(send, 0.0);
    EXPECT_GT(gather, 0.0);
    EXPECT_DOUBLE_EQ(hop, send + gather);
}

// Megatron-LM's overlapped parameter all-gather streams into the step's first forward, which cannot end before the
// gather does: with one micro-batch a step, tp 8 and one data-parallel rank per node over 16 nodes linked at an
// eighth of NDR's rate, Llama 3 8B's bf16 weights take longer to gather than the forward takes, and that wait is
// exposed data-parallel time in the breakdown, which still sums to the step.
TEST(Simulation, AParameterGatherLongerThanTheForwardItFeedsIsExposedDp) {
    const ModelConfig model = test::preset("llama3-8b");
    ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    cluster.nodes = 16;
    cluster.interNode.bandwidthBytesPerSecond /= 8.0;
    Plan p = test::plan3d(8, 1, 16, 1, 16, "megatron", "2024");
    p.sequenceParallel = true;
    p.zeroStage = 1;
    p.framework.overlapParamGather = true;
    p.framework.overlapGradReduce = true;
    const PlanSimulation sim = simulatePlan(model, cluster, p);
    const auto& acts = sim.schedule.stages[0].actions;
    double stretch = 0.0;
    for (size_t i = 0; i < acts.size(); ++i) {
        if (acts[i].kind != ActionKind::Forward) continue;
        const auto& ta = sim.timeline.perAction[0][i];
        stretch += (ta.endSeconds - ta.startSeconds) - sim.costs.perAction[0][i].seconds;
    }
    ASSERT_GT(stretch, 0.0) << "the gather should outlast the forward here";
    const StepBreakdown& b = sim.timeline.perStage[0];
    EXPECT_NEAR(b.total(), sim.metrics.stepSeconds, 1e-9 * sim.metrics.stepSeconds);
    EXPECT_GE(b.dpSeconds, stretch * (1.0 - 1e-9));
}

// An FP8 or NVFP4 plan's BF16 end layers (first_last_layers_bf16) are a layer kind of their own, costed as the megatron
// recipe runs a layer: with 2 of 32 layers in BF16 the stage's forward and backward compute moves 2/32 of the way from
// the all-NVFP4 plan to the one with every layer in BF16, and that one computes what the megatron recipe does.
TEST(Simulation, Bf16EndLayersAreCostedAsTheMegatronRecipeRunsThem) {
    const ModelConfig model = test::preset("llama3-8b");
    const ClusterConfig cluster = test::clusterPreset("dgx-b200");
    Plan p = test::plan3d(2, 2, 2, 1, 8, "megatron", "2025");
    p.sequenceParallel = true;
    p.precision = "nvfp4";
    auto compute = [&](const Plan& plan) {
        const PlanSimulation sim = simulatePlan(model, cluster, plan);
        double sum = 0.0;
        for (size_t st = 0; st < sim.schedule.stages.size(); ++st) {
            const auto& acts = sim.schedule.stages[st].actions;
            for (size_t i = 0; i < acts.size(); ++i)
                if (acts[i].kind == ActionKind::Forward || acts[i].kind == ActionKind::Backward)
                    sum += sim.costs.perAction[st][i].computeSeconds;
        }
        return sum;
    };
    Plan ends = p, all = p, bf16 = p;
    ends.bf16LayersAtStart = ends.bf16LayersAtEnd = 1;
    all.bf16LayersAtStart = all.bf16LayersAtEnd = 16;
    bf16.precision = "megatron";
    const double a = compute(p), b = compute(ends), c = compute(all), d = compute(bf16);
    EXPECT_GT(c, a);
    EXPECT_NEAR(b - a, (c - a) * 2.0 / 32.0, 1e-9 * c);
    EXPECT_NEAR(c, d, 1e-9 * d);
}

TEST(Simulation, BreakdownSumsToTheStepOverAGridOfRealPlans) {
    ModelConfig model = test::preset("llama3-8b");
    ClusterConfig cluster = test::clusterPreset("dgx-h100-80g");
    cluster.nodes = 2;
    int n = 0;
    // The generic framework, and Megatron-LM with its parameter all-gather streamed into the first forward
    // (overlap_param_gather), whose wait for the gather lands inside that forward's span.
    for (bool megatron : {false, true})
    for (int tp : {1, 2, 8})
        for (int pp : {1, 2, 4})
            for (int zero : {0, 1, 3})
                for (Schedule sch : {Schedule::OneFOneB, Schedule::ZeroBubble, Schedule::Interleaved1F1B}) {
                    Plan p;
                    if (megatron) {
                        p.framework.name = "megatron";
                        p.framework.version = "2024";
                        p.framework.overlapParamGather = true;
                        p.framework.overlapGradReduce = true;
                    }
                    p.tp = tp;
                    p.pp = pp;
                    p.dp = 16 / (tp * pp);
                    p.zeroStage = zero;
                    p.schedule = sch;
                    p.vpp = sch == Schedule::Interleaved1F1B ? 2 : 1;
                    p.sequenceParallel = tp > 1;
                    p.globalBatch = p.dp * 8;
                    ProblemList problems;
                    validatePlan(model, cluster, p, "/plan", problems);
                    if (!problems.empty()) continue;
                    PlanSimulation sim = simulatePlan(model, cluster, p);
                    for (const auto& b : sim.timeline.perStage) ASSERT_NEAR(b.total(), sim.metrics.stepSeconds, 1e-9 * sim.metrics.stepSeconds);
                    ASSERT_GT(sim.metrics.mfu, 0.05);
                    ASSERT_LT(sim.metrics.mfu, sim.metrics.hfu + 1e-12);
                    ASSERT_LT(sim.metrics.hfu, 1.0);
                    ASSERT_TRUE(checkSchedule(sim.schedule).empty());
                    ++n;
                }
    EXPECT_GT(n, 60);
}

TEST(Simulation, DefaultScenarioIsPlausible) {
    Scenario s = defaultScenario();
    PlanSimulation sim = simulatePlan(s.model, s.cluster, s.plan);
    // Megatron-LM reports ~52% MFU for GPT-3 175B on A100 with this plan family (Korthikanti et al. 2022 Table 4).
    EXPECT_GT(sim.metrics.mfu, 0.30);
    EXPECT_LT(sim.metrics.mfu, 0.70);
    EXPECT_NEAR(sim.metrics.tokensPerSecond, 1536.0 * 2048 / sim.metrics.stepSeconds, 1e-6);
    // 1F1B with p = 8, m = 96: without contention the bubble is close to (p-1)/(m+p-1) = 6.8%. Contention
    // lengthens each stage's last backward (its data-parallel reduction runs under it), and the drain passes
    // that on from stage to stage: a larger bubble, and a longer step.
    ClusterConfig free = s.cluster;
    free.gpu.commContention = 0.0;
    PlanSimulation ideal = simulatePlan(s.model, free, s.plan);
    EXPECT_NEAR(ideal.metrics.bubbleFraction, 7.0 / 103.0, 0.03);
    EXPECT_GT(sim.metrics.stepSeconds, ideal.metrics.stepSeconds);
    EXPECT_GE(sim.metrics.bubbleFraction, ideal.metrics.bubbleFraction);
}

} // namespace
} // namespace tessel::sim
