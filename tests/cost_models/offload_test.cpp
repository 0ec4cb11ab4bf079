// Offload memory against DeepSpeed's own estimators, and hand-checkable offload times.
//
// Reference: DeepSpeed's model-state estimators, reimplemented below from the source (microsoft/DeepSpeed,
// commit 38327e07, deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs and
// deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs). They return (cpu bytes per node,
// gpu bytes per GPU) for the model states; tessel's memory model must give the same per category: GPU
// weights + gradients + optimizer (+ the ZeRO-3 gather buffers, which the estimator counts as 4 x the largest
// layer: current + prefetched in 16 bits) and the host bytes of a node. The estimators' safety margin
// (additional_buffer_factor, default 1.5) is set to 1, and ZeRO-2 is compared at <= 4 GPUs, where its
// max(4 x total_gpus, 16) term is the 16 bytes per parameter of the optimizer partition (above that it is the
// fp32 copy each process loads at initialisation, a transient tessel does not model).
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"
#include "tessel/cost/offload.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

namespace tessel {
namespace {

struct DsEstimate {
    double cpuBytes = 0.0; // per node
    double gpuBytes = 0.0; // per GPU
};

// stage_1_and_2.py: estimate_zero2_model_states_mem_needs(total_params, num_gpus_per_node, num_nodes,
// cpu_offload, additional_buffer_factor)
DsEstimate dsZero2(double totalParams, int gpusPerNode, int nodes, bool cpuOffload, double bufferFactor) {
    const double totalGpus = static_cast<double>(nodes) * gpusPerNode;
    DsEstimate e;
    if (cpuOffload) {
        e.gpuBytes = 2.0 * totalParams;
        e.cpuBytes = totalParams * std::max(4.0 * totalGpus, 16.0) * bufferFactor;
    } else {
        e.gpuBytes = 2.0 * totalParams + static_cast<double>(static_cast<int64_t>(18.0 * totalParams / totalGpus));
        e.cpuBytes = totalParams * 4.0 * gpusPerNode * bufferFactor;
    }
    return e;
}

// stage3.py: estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, num_gpus_per_node,
// num_nodes, cpu_offload, cpu_offload_params, zero_init, additional_buffer_factor)
DsEstimate dsZero3(double totalParams, double largestLayerParams, int gpusPerNode, int nodes, bool cpuOffload,
                   bool cpuOffloadParams, bool zeroInit, double bufferFactor) {
    const double totalGpus = static_cast<double>(nodes) * gpusPerNode;
    const double gpusFactor = 1.0 / nodes;
    const double largestLayerMemory = 4.0 * largestLayerParams;
    DsEstimate e;
    if (cpuOffload) {
        if (cpuOffloadParams) {
            e.gpuBytes = largestLayerMemory;
            e.cpuBytes = zeroInit ? totalParams * 18.0 * gpusFactor * bufferFactor
                                  : totalParams * std::max(4.0 * gpusPerNode, 18.0 * gpusFactor) * bufferFactor;
        } else {
            e.gpuBytes = largestLayerMemory + static_cast<double>(static_cast<int64_t>(2.0 * totalParams / totalGpus));
            e.cpuBytes = zeroInit ? totalParams * 16.0 * gpusFactor * bufferFactor
                                  : totalParams * std::max(4.0 * gpusPerNode, 16.0 * gpusFactor) * bufferFactor;
        }
    } else {
        e.gpuBytes = largestLayerMemory + static_cast<double>(static_cast<int64_t>(18.0 * totalParams / totalGpus));
        e.cpuBytes = zeroInit ? largestLayerParams * 4.0 * gpusPerNode * bufferFactor
                              : totalParams * 4.0 * gpusPerNode * bufferFactor;
    }
    return e;
}

ClusterConfig hostCluster(int gpusPerNode, int nodes) {
    ClusterConfig c = test::roundCluster(gpusPerNode, nodes);
    c.gpu.memoryBytes = int64_t{1} << 50; // the comparison is of bytes, not of the verdict
    c.host = {1e16, 2.5e10, 4e9};
    return c;
}

Plan dataParallel(int ranks, int zero, const std::string& precision) {
    Plan p;
    p.dp = ranks;
    p.microBatch = 1;
    p.globalBatch = ranks;
    p.zeroStage = zero;
    p.precision = precision;
    return p;
}

// tessel's view of one configuration: GPU model states (with the ZeRO-3 gather buffers) and host bytes per node.
DsEstimate tesselEstimate(const ModelConfig& m, const ClusterConfig& c, const Plan& p) {
    ProblemList problems;
    validatePlan(m, c, p, "/plan", problems);
    EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems.items().front().message);
    const MemoryReport r = predictMemory(m, c, p);
    const StageMemory& s = r.stages.front();
    return {r.hostBytesPerNode(), s.weightsBytes + s.gradsBytes + s.optimizerBytes + s.other.zero3GatherBytes};
}

// Models whose transformer layer is the largest unit ZeRO-3 gathers (so the estimator's 4 x largest layer is
// the same quantity as tessel's two consecutive units), from 13B to 530B.
// GPU and host bytes of tessel against the estimator: within the 3%.
void expectWithinThreePercent(const DsEstimate& t, const DsEstimate& ds) {
    EXPECT_LT(test::relDiff(t.gpuBytes, ds.gpuBytes), 0.03) << t.gpuBytes << " vs " << ds.gpuBytes;
    EXPECT_LT(test::relDiff(t.cpuBytes, ds.cpuBytes), 0.03) << t.cpuBytes << " vs " << ds.cpuBytes;
}

class OffloadVsDeepSpeed : public ::testing::TestWithParam<const char*> {};

TEST_P(OffloadVsDeepSpeed, Zero2OptimizerOffload) {
    const ModelConfig m = test::preset(GetParam());
    const ClusterConfig c = hostCluster(4, 1);
    Plan p = dataParallel(4, 2, "mixed");
    p.offloadOptimizer = true;
    const double params = stageParameters(m, p, 0).total();
    const DsEstimate ds = dsZero2(params, 4, 1, true, 1.0);
    const DsEstimate t = tesselEstimate(m, c, p);
    expectWithinThreePercent(t, ds);
}

TEST_P(OffloadVsDeepSpeed, Zero3OptimizerOffload) {
    const ModelConfig m = test::preset(GetParam());
    const ClusterConfig c = hostCluster(8, 2);
    Plan p = dataParallel(16, 3, "mixed");
    p.offloadOptimizer = true;
    const double params = stageParameters(m, p, 0).total();
    const double largest = layerParameters(m, p).total();
    const DsEstimate ds = dsZero3(params, largest, 8, 2, true, false, true, 1.0);
    const DsEstimate t = tesselEstimate(m, c, p);
    expectWithinThreePercent(t, ds);
}

TEST_P(OffloadVsDeepSpeed, Zero3ParameterOffload) {
    const ModelConfig m = test::preset(GetParam());
    const ClusterConfig c = hostCluster(8, 2);
    Plan p = dataParallel(16, 3, "mixed");
    p.offloadOptimizer = true;
    p.offloadParameters = true;
    const double params = stageParameters(m, p, 0).total();
    const double largest = layerParameters(m, p).total();
    const DsEstimate ds = dsZero3(params, largest, 8, 2, true, true, true, 1.0);
    const DsEstimate t = tesselEstimate(m, c, p);
    expectWithinThreePercent(t, ds);
}

TEST_P(OffloadVsDeepSpeed, Zero3WithoutOffloadFp32Gradients) {
    // The estimator's 18 bytes/parameter without offload: 16-bit weights, fp32 gradients, fp32 master and
    // moments: tessel's "megatron" recipe. Nothing on the host.
    const ModelConfig m = test::preset(GetParam());
    const ClusterConfig c = hostCluster(8, 2);
    const Plan p = dataParallel(16, 3, "megatron");
    const double params = stageParameters(m, p, 0).total();
    const double largest = layerParameters(m, p).total();
    const DsEstimate ds = dsZero3(params, largest, 8, 2, false, false, true, 1.0);
    const DsEstimate t = tesselEstimate(m, c, p);
    EXPECT_LT(test::relDiff(t.gpuBytes, ds.gpuBytes), 0.03) << t.gpuBytes << " vs " << ds.gpuBytes;
    EXPECT_DOUBLE_EQ(t.cpuBytes, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Models, OffloadVsDeepSpeed, ::testing::Values("gpt3-13b", "llama2-70b", "megatron-530b"));

TEST(OffloadHand, OptimizerOffloadMovesStatesAndKeepsActivations) {
    const ModelConfig m = test::preset("gpt3-13b");
    const ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 1, "mixed");
    const StageMemory before = predictMemory(m, c, p).stages.front();
    p.offloadOptimizer = true;
    const StageMemory after = predictMemory(m, c, p).stages.front();
    EXPECT_DOUBLE_EQ(after.optimizerBytes, 0.0);
    EXPECT_DOUBLE_EQ(after.gradsBytes, before.gradsBytes); // ZeRO-1: the full gradient buffer stays on the GPU
    EXPECT_DOUBLE_EQ(after.activationsBytes, before.activationsBytes);
    EXPECT_NEAR(after.hostBytes, before.optimizerBytes * 16.0 / 12.0, 1.0); // + the fp32 gradient partition
}

TEST(OffloadHand, HostCapacityIsAVerdict) {
    const ModelConfig m = test::preset("gpt3-13b");
    ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 2, "mixed");
    p.offloadOptimizer = true;
    c.host.memoryBytes = 100e9; // 13B x 16 B = 208 GB does not fit in 100 GB of host memory
    const MemoryReport r = predictMemory(m, c, p);
    EXPECT_FALSE(r.fits);
    EXPECT_FALSE(r.stages.front().hostFits);
    c.host.memoryBytes = 300e9;
    EXPECT_TRUE(predictMemory(m, c, p).fits);
}

TEST(OffloadHand, ActivationOffloadKeepsTwoLayerInputs) {
    const ModelConfig m = test::preset("gpt3-13b");
    const ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 1, "mixed");
    p.recompute = Recompute::Full;
    p.pp = 1;
    const StageMemory before = predictMemory(m, c, p).stages.front();
    p.offloadActivations = true;
    const StageMemory after = predictMemory(m, c, p).stages.front();
    const double layerInput = layerActivationBytes(m, p, *findPrecisionRecipe("mixed"));
    const double stored = before.inFlight * m.layers * layerInput;
    EXPECT_NEAR(before.activationsBytes - after.activationsBytes, stored - 2.0 * layerInput, 1.0);
    EXPECT_NEAR(after.hostBytes, stored, 1.0);
}

TEST(OffloadHand, LayerOffloadMovesWholeLayersAndKeepsTwoOnTheGpu) {
    // Megatron-core's CPU offloading: every activation of the first N layers goes to the host after its forward;
    // Transformer Engine's double-buffered handler keeps at most two of those layers on the GPU.
    const ModelConfig m = test::preset("gpt3-13b");
    const ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 1, "mixed");
    p.recompute = Recompute::None;
    const StageMemory before = predictMemory(m, c, p).stages.front();
    p.offloadActivationLayers = 10;
    const StageMemory ten = predictMemory(m, c, p).stages.front();
    p.offloadActivationLayers = 1;
    const StageMemory one = predictMemory(m, c, p).stages.front();
    // Ten layers offloaded, two of them held: eight layers' worth fewer on the GPU; one layer: none fewer.
    const double layer = ten.hostBytes / 10.0;
    EXPECT_GT(layer, 0.0);
    EXPECT_NEAR(before.activationsBytes - ten.activationsBytes, 8.0 * layer, 1.0);
    EXPECT_NEAR(before.activationsBytes - one.activationsBytes, 0.0, 1.0);
    EXPECT_NEAR(one.hostBytes, layer, 1.0);
    // A layer's worth is what the layer keeps without recompute, with its norm statistics.
    const PrecisionRecipe& mixed = *findPrecisionRecipe("mixed");
    EXPECT_NEAR(layer, before.inFlight * (layerActivationBytes(m, p, mixed) + layerNormStatisticsBytes(m, p, mixed)), 1.0);
    EXPECT_EQ(offloadString(p), "activations:1");
    // The swap each pass moves N layers' activations over the host link.
    StageParameters params;
    params.dense = 1e9;
    const OffloadTimes t = offloadTimes(c, p, mixed, params, 10.0 * layerActivationBytes(m, p, mixed));
    EXPECT_DOUBLE_EQ(t.activationSwapSecondsPerPass, 10.0 * layerActivationBytes(m, p, mixed) / c.host.pcieBytesPerSecond);
}

TEST(OffloadHand, LayerOffloadRulesAreMegatronCoresAndNameTheField) {
    const ModelConfig m = test::preset("gpt3-13b"); // 40 layers
    ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 1, "mixed");
    p.recompute = Recompute::Full;
    p.pp = 2;
    p.dp = 4;
    p.offloadActivationLayers = 40;
    p.offloadActivations = true;
    ProblemList problems;
    validatePlan(m, c, p, "/plan", problems);
    std::vector<std::string> messages;
    for (const auto& item : problems.items())
        if (item.where == "/plan/offload_activation_layers") messages.push_back(item.message);
    ASSERT_EQ(messages.size(), 4u);
    EXPECT_NE(messages[0].find("fewer than the model's 40"), std::string::npos);
    EXPECT_NE(messages[1].find("needs pp 1"), std::string::npos);
    EXPECT_NE(messages[2].find("needs recompute none"), std::string::npos);
    EXPECT_NE(messages[3].find("one activation offload at a time"), std::string::npos);
    // Without a host block, the field is named.
    Plan q = dataParallel(8, 1, "mixed");
    q.recompute = Recompute::None;
    q.offloadActivationLayers = 4;
    c.host = {};
    ProblemList noHost;
    validatePlan(m, c, q, "/plan", noHost);
    ASSERT_EQ(noHost.items().size(), 1u);
    EXPECT_EQ(noHost.items()[0].where, "/plan/offload_activation_layers");
    // The plan key round-trips and a negative count is named.
    ProblemList none;
    const Plan back = parsePlan(planToJson(q), "/plan", none);
    EXPECT_TRUE(none.empty());
    EXPECT_EQ(back.offloadActivationLayers, 4);
    nlohmann::json bad = planToJson(q);
    bad["offload_activation_layers"] = -1;
    ProblemList negative;
    parsePlan(bad, "/plan", negative);
    ASSERT_FALSE(negative.empty());
    EXPECT_EQ(negative.items().front().where, "/plan/offload_activation_layers");
}

TEST(OffloadHand, TimesFollowTheRates) {
    // 1e9 partition parameters on a node of 8 GPUs sharing 4e9 parameters/s of CPU Adam: 2 s; the 16-bit upload
    // and download at 25 GB/s: 0.08 s each.
    ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 2, "mixed");
    p.offloadOptimizer = true;
    StageParameters params;
    params.dense = 8e9;
    const OffloadTimes t = offloadTimes(c, p, *findPrecisionRecipe("mixed"), params, 0.0);
    EXPECT_DOUBLE_EQ(zeroPartitionParameters(p, params), 1e9);
    EXPECT_DOUBLE_EQ(t.cpuOptimizerSeconds, 2.0);
    EXPECT_DOUBLE_EQ(t.paramUploadSeconds, 0.08);
    EXPECT_DOUBLE_EQ(t.gradDownloadSeconds, 0.08);
    EXPECT_DOUBLE_EQ(t.optimizerStepSeconds(1.0), 2.08);     // the download hides under a 1 s backward
    EXPECT_DOUBLE_EQ(t.optimizerStepSeconds(0.03), 2.13);    // 0.05 s of it shows
    p.zeroStage = 3;
    p.offloadParameters = true;
    const OffloadTimes z3 = offloadTimes(c, p, *findPrecisionRecipe("mixed"), params, 5e9);
    EXPECT_DOUBLE_EQ(z3.paramUploadSeconds, 0.0);            // the weights live on the host
    EXPECT_DOUBLE_EQ(z3.paramFetchSecondsPerPass, 0.08);
    EXPECT_DOUBLE_EQ(z3.activationSwapSecondsPerPass, 0.0);  // no activation offload
}

TEST(OffloadHand, PlanRulesNameTheField) {
    const ModelConfig m = test::preset("gpt3-13b");
    ClusterConfig c = hostCluster(8, 1);
    Plan p = dataParallel(8, 0, "mixed");
    p.offloadOptimizer = true;
    p.offloadActivations = true;
    ProblemList problems;
    validatePlan(m, c, p, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 2u);
    EXPECT_EQ(problems.items()[0].where, "/plan/offload_optimizer");
    EXPECT_EQ(problems.items()[1].where, "/plan/offload_activations");
    c.host = {};
    p.zeroStage = 1;
    p.offloadActivations = false;
    ProblemList noHost;
    validatePlan(m, c, p, "/plan", noHost);
    ASSERT_EQ(noHost.items().size(), 1u);
    EXPECT_NE(noHost.items()[0].message.find("host block"), std::string::npos);
}

} // namespace
} // namespace tessel
