// Context-parallel ring attention: the steps' kernels at their own shapes and the merges' bytes (FORMULAS.md §3.2).
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace tessel {
namespace {

using test::findOp;

using test::gqaModel;

Plan cpPlan(int cp, const std::string& framework) {
    Plan p;
    p.cp = cp;
    p.dp = 8 / cp;
    p.framework.name = framework;
    return p;
}

TEST(RingAttention, TheStepsSplitTheCausalShareEachAtItsOwnShape) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    const PrecisionRecipe& r = *findPrecisionRecipe("megatron");
    const BlockCompute one = layerCompute(m, c, cpPlan(1, "megatron"), r);
    const OpCost* whole = findOp(one, "attention_core_flash");
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(whole->n, 8192);
    EXPECT_EQ(findOp(one, "attention_core_flash_ring"), nullptr);
    EXPECT_EQ(findOp(one, "attention_ring_merge"), nullptr);

    const BlockCompute two = layerCompute(m, c, cpPlan(2, "megatron"), r);
    const OpCost* diag = findOp(two, "attention_core_flash");
    const OpCost* ring = findOp(two, "attention_core_flash_ring");
    ASSERT_NE(diag, nullptr);
    ASSERT_NE(ring, nullptr);
    // Step 0: causal over the rank's 4096 queries and keys; step 1: all 4096 queries against 2048 keys, no mask.
    EXPECT_TRUE(diag->causal);
    EXPECT_EQ(diag->m, 4096);
    EXPECT_EQ(diag->n, 4096);
    EXPECT_FALSE(ring->causal);
    EXPECT_EQ(ring->n, 2048);
    EXPECT_DOUBLE_EQ(diag->flops, 2.0 * 32 * 4096.0 * 4096.0 * 128);
    EXPECT_DOUBLE_EQ(ring->flops, 4.0 * 32 * 4096.0 * 2048.0 * 128);
    // Together the causal share of one rank: half of 4 b h (s/cp) s d, and the MFU convention's full count.
    EXPECT_DOUBLE_EQ(diag->flops + ring->flops, kernel_cost::flashAttentionFlops(1, 32, 4096, 8192, 128));
    EXPECT_DOUBLE_EQ(diag->modelFlops + ring->modelFlops, 4.0 * 32 * 4096.0 * 8192.0 * 128);
    // Each runs at its own key length's rate: the ring step reads the non-causal curve at 2048 keys (at the
    // block's sustained share).
    const auto& spec = c.gpu.attentionKernels.at(resolveAttentionKernel(c.gpu, ring->variant));
    EXPECT_NEAR(ring->seconds,
                ring->flops / (c.peakFlops(Dtype::Bf16) * two.tensorShare *
                               attentionKernelEfficiency(spec, 128, 2048, false, false)) +
                    c.gpu.kernelOverheadSeconds,
                1e-12);
}

TEST(RingAttention, TesselsOwnExecutorGathersTheKeysAndRunsOneKernel) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = cpPlan(2, "generic");
    p.framework.lossInPlace = true; // what `tessel run` sets
    const BlockCompute b = layerCompute(gqaModel(), c, p, *findPrecisionRecipe("megatron"));
    const OpCost* whole = findOp(b, "attention_core_flash");
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(whole->m, 4096);
    EXPECT_EQ(whole->n, 8192);
    EXPECT_EQ(findOp(b, "attention_core_flash_ring"), nullptr);
    EXPECT_EQ(findOp(b, "attention_ring_merge"), nullptr);
}

TEST(RingAttention, MergeBytesAreEachImplementationsPassesCountedByHand) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    const PrecisionRecipe& r = *findPrecisionRecipe("megatron");
    const double eq = 4096.0 * 4096.0; // the rank's tokens x query columns
    const double ekv = 4096.0 * 1024.0; // x K (or V) columns at 8 kv heads
    // Transformer Engine, cp 2, bf16: forward (8 + 2 + 2 x 10) eq + (8 + 4) ekv; backward (4 + 6) eq + (20 + 10) ekv.
    const OpCost* te = findOp(layerCompute(m, c, cpPlan(2, "megatron"), r), "attention_ring_merge");
    ASSERT_NE(te, nullptr);
    EXPECT_DOUBLE_EQ(te->bytes, 30.0 * eq + 12.0 * ekv);
    EXPECT_NEAR(te->bytes * te->backwardByteFactor, 10.0 * eq + 30.0 * ekv, 1e-3);
    // PyTorch's (torchtitan), whose kernel sees K and V repeated to all 32 heads: forward (12 + 38) eq + 8 eq,
    // backward (10 + 20) eq + (56 + 50) eq.
    Plan titan = cpPlan(2, "torchtitan");
    titan.framework.version = "2024-12"; // before pytorch/torchtitan#2259 (2026-01-27), which passes enable_gqa instead
    const OpCost* pt = findOp(layerCompute(m, c, titan, r), "attention_ring_merge");
    ASSERT_NE(pt, nullptr);
    EXPECT_DOUBLE_EQ(pt->bytes, 58.0 * eq);
    EXPECT_NEAR(pt->bytes * pt->backwardByteFactor, 136.0 * eq, 1e-3);
    // More ranks, more steps: PyTorch at cp 4 adds 2 x (38 eq + 8 eq) forward.
    EXPECT_DOUBLE_EQ(kernel_cost::ringMergeForwardBytes(kernel_cost::RingMerge::PyTorch, eq, eq, 4, 2), 150.0 * eq);
}

// The merges' bytes against the lent H100's measurement of PyTorch's ring for its last rank (bench/
// ring_attention_probe.py): the ring's time minus its kernels' time, forward and backward, at 8k-256k tokens and
// cp 2-8, where torchtitan's kernel sees K and V at every head (E_kv = E_q). Timed as the cost model times a
// memory-bound op on the H100 preset.
TEST(RingAttention, MergeBytesGiveTheH100ProbesMergeTimes) {
    std::ifstream in(std::string(TESSEL_SCENARIO_DIR) + "/../data/gpu/h100-2026-11-26/call6-ring-attention/ring.json");
    ASSERT_TRUE(in.good());
    const nlohmann::json probe = nlohmann::json::parse(in);
    const ClusterConfig h100 = test::clusterPreset("dgx-h100-80g");
    auto seconds = [&](double bytes) {
        OpCost op;
        op.bytes = bytes;
        return opSeconds(op, h100, Dtype::Bf16);
    };
    double lo = 1e9, hi = 0.0;
    int points = 0;
    for (const auto& p : probe["points"]) {
        if (p["kind"] != "ring" || p["cp"].get<int>() < 2) continue;
        const int cp = p["cp"].get<int>();
        const double eq = p["seq"].get<double>() / cp * p["heads"].get<double>() * p["head_dim"].get<double>();
        const double fwd = p["rank_last_forward_s"].get<double>() - p["rank_last_forward_kernels_s"].get<double>();
        const double bwd = p["rank_last_backward_s"].get<double>() - p["rank_last_backward_kernels_s"].get<double>();
        for (const double r : {seconds(kernel_cost::ringMergeForwardBytes(kernel_cost::RingMerge::PyTorch, eq, eq, cp, 2)) / fwd,
                               seconds(kernel_cost::ringMergeBackwardBytes(kernel_cost::RingMerge::PyTorch, eq, eq, cp, 2)) / bwd}) {
            lo = std::min(lo, r);
            hi = std::max(hi, r);
        }
        ++points;
    }
    EXPECT_EQ(points, 10);
    // Modelled / measured, all 20 within 0.83-1.27 (the measured side is the difference of two timings, a few
    // percent of each at long sequences); the short chunks' ten or so launches a step are what the bytes miss.
    EXPECT_GT(lo, 0.75) << lo;
    EXPECT_LT(hi, 1.35) << hi;
    std::printf("merge time modelled / measured: %.2f-%.2f over %d points\n", lo, hi, 2 * points);
}

TEST(RingAttention, AStepWithoutMaskReadsTheNonCausalCurve) {
    AttentionKernelSpec k;
    k.seqHalf = 512.0;
    AttentionBenchmark b;
    b.peakFlopsPerSecond = 1000e12;
    b.seq = {1024, 4096};
    b.curves.push_back({128, true, {200e12, 400e12}, {100e12, 300e12}});
    b.curves.push_back({128, false, {250e12, 500e12}, {150e12, 350e12}});
    k.benchmark = b;
    EXPECT_NEAR(attentionKernelEfficiency(k, 128, 1024, false, false), 0.25, 1e-12);
    EXPECT_NEAR(attentionKernelEfficiency(k, 128, 1024, true, false), 0.15, 1e-12);
    EXPECT_NEAR(attentionKernelEfficiency(k, 128, 1024, false, true), 0.2, 1e-12); // causal as before
    // Only causal curves: the causal rate without the diagonal's s/(s + 512) ramp.
    k.benchmark->curves.pop_back();
    EXPECT_NEAR(attentionKernelEfficiency(k, 128, 1024, false, false), 0.2 * (1536.0 / 1024.0), 1e-12);
    // No benchmark: the flat efficiency, without the ramp a causal kernel takes.
    const AttentionKernelSpec flat{0.5, 0.4, 1024.0, std::nullopt};
    EXPECT_NEAR(attentionKernelEfficiency(flat, 128, 1024, false, false), 0.5, 1e-12);
    EXPECT_NEAR(attentionKernelEfficiency(flat, 128, 1024, false, true), 0.25, 1e-12);
}

} // namespace
} // namespace tessel
