// The power probe's two terms (bench/power_probe.py and gpu_kernels_probe.py on a lent H200): the sustained
// tensor-core share as a function of a block's duty, and attention dropout inside the fused kernel (FORMULAS.md
// §3.2, §3.3).
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/json_reader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <string>

namespace tessel {
namespace {

using test::findOp;

bool named(const ProblemList& problems, const std::string& where) {
    for (const auto& p : problems.items())
        if (p.where == where) return true;
    return false;
}

GpuSpec::DutyShare point(double duty, double share) {
    GpuSpec::DutyShare p;
    p.duty = duty;
    p.share = share;
    return p;
}

TEST(SustainedShare, TheCurveIsJoinedByStraightLinesFromOneAtNoDuty) {
    GpuSpec g;
    g.sustainedTensorFraction = 0.9;
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(0.7), 0.9); // no curve: the fitted constant at any duty
    g.sustainedShareByDuty = {point(0.25, 1.0), point(0.5, 0.917), point(0.75, 0.877), point(1.0, 0.853)};
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(0.0), 1.0);
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(0.1), 1.0);             // between (0, 1) and (0.25, 1)
    EXPECT_NEAR(g.sustainedTensorShare(0.375), (1.0 + 0.917) / 2, 1e-12);
    EXPECT_NEAR(g.sustainedTensorShare(0.625), (0.917 + 0.877) / 2, 1e-12);
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(1.0), 0.853);
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(1.5), 0.853);           // clamped at the ends
    g.sustainedShareByDuty = {point(0.5, 0.8)};                      // one point: a line from (0, 1), then held
    EXPECT_NEAR(g.sustainedTensorShare(0.25), 0.9, 1e-12);
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(0.9), 0.8);
}

TEST(SustainedShare, TheCurveAndTheDropoutFactorsAreReadWrittenAndRefusedAtTheirPointers) {
    const ClusterConfig h100 = test::clusterPreset("dgx-h100-80g");
    ASSERT_EQ(h100.gpu.sustainedShareByDuty.size(), 4u);
    nlohmann::json j = clusterToJson(h100);
    ProblemList ok;
    const ClusterConfig back = parseCluster(j, "", ok);
    EXPECT_TRUE(ok.empty());
    ASSERT_EQ(back.gpu.sustainedShareByDuty.size(), 4u);
    EXPECT_DOUBLE_EQ(back.gpu.sustainedTensorShare(0.6), h100.gpu.sustainedTensorShare(0.6));
    EXPECT_DOUBLE_EQ(back.gpu.attentionKernels.at("cudnn").dropoutForwardTimeFactor, 1.95);
    EXPECT_DOUBLE_EQ(back.gpu.attentionKernels.at("cudnn").dropoutBackwardTimeFactor, 1.2);

    nlohmann::json bad = j;
    bad["gpu"]["sustained_share_by_duty"][1]["duty"] = 0.2; // below the point before it
    bad["gpu"]["sustained_share_by_duty"][2]["share"] = 0.0;
    bad["gpu"]["attention_kernels"]["flash2"]["dropout_time_factor"] = {{"forward", 0.5}};
    ProblemList problems;
    parseCluster(bad, "", problems);
    EXPECT_TRUE(named(problems, "/gpu/sustained_share_by_duty/1/duty"));
    EXPECT_TRUE(named(problems, "/gpu/sustained_share_by_duty/2/share"));
    EXPECT_TRUE(named(problems, "/gpu/attention_kernels/flash2/dropout_time_factor/forward"));
    EXPECT_TRUE(named(problems, "/gpu/attention_kernels/flash2/dropout_time_factor/backward"));
    EXPECT_DOUBLE_EQ(back.gpu.commContentionMax, 0.76);
    bad = j;
    bad["gpu"]["comm_contention_max"] = -0.1;
    ProblemList ceiling;
    parseCluster(bad, "", ceiling);
    EXPECT_TRUE(named(ceiling, "/gpu/comm_contention_max"));
    bad = j;
    bad["gpu"]["sustained_tensor_fraction"] = 0.9; // beside the curve: one of them would be ignored
    ProblemList both;
    parseCluster(bad, "", both);
    EXPECT_TRUE(named(both, "/gpu/sustained_tensor_fraction"));
    ASSERT_EQ(back.gpu.contentionByCtas.size(), 4u); // the contention probe's curve, read back as written
    EXPECT_DOUBLE_EQ(back.gpu.contentionShareOfCtas(16.0), 0.34);
    bad = j;
    bad["gpu"]["contention_by_ctas"][2]["ctas"] = 12; // below the point before it
    bad["gpu"]["contention_by_ctas"][0]["share"] = -0.1;
    ProblemList curve;
    parseCluster(bad, "", curve);
    EXPECT_TRUE(named(curve, "/gpu/contention_by_ctas/2/ctas"));
    EXPECT_TRUE(named(curve, "/gpu/contention_by_ctas/0/share"));
    bad = j;
    bad["gpu"].erase("nccl_channels"); // the curve without the channels it is read against
    ProblemList channels;
    parseCluster(bad, "", channels);
    EXPECT_TRUE(named(channels, "/gpu/contention_by_ctas"));
    bad = j;
    bad["gpu"]["sustained_share_by_duty"] = nlohmann::json::array();
    ProblemList empty;
    parseCluster(bad, "", empty);
    EXPECT_TRUE(named(empty, "/gpu/sustained_share_by_duty"));
}

// A part held to another power limit than its curve's (FORMULAS.md §3.3): a throttled block draws the limit,
// idle + c f^n, so its clock and its kernels' share scale by ((cap - idle) / (measured - idle))^(1/n). By hand with
// idle 100 W, n = 2, measured at 700 W: at 400 W sqrt(300 / 600), at 1000 W sqrt(900 / 600), shares capped at 1.
TEST(SustainedShare, APowerLimitMovesTheCurveByItsKernelsPowerLaw) {
    GpuSpec g;
    g.sustainedShareByDuty = {point(0.5, 0.9), point(1.0, 0.8)};
    EXPECT_DOUBLE_EQ(g.powerLimitShareScale(), 1.0); // no power law: the curve as measured
    g.sustainedSharePower = GpuSpec::SharePower{700.0, 100.0, 2.0};
    EXPECT_DOUBLE_EQ(g.powerLimitShareScale(), 1.0); // no limit: the one it was measured at
    g.powerLimitWatts = 700.0;
    EXPECT_NEAR(g.powerLimitShareScale(), 1.0, 1e-12);
    g.powerLimitWatts = 400.0;
    const double down = std::sqrt(300.0 / 600.0);
    EXPECT_NEAR(g.powerLimitShareScale(), down, 1e-12);
    EXPECT_NEAR(g.sustainedTensorShare(1.0), 0.8 * down, 1e-12);
    EXPECT_NEAR(g.sustainedTensorShare(0.5), 0.9 * down, 1e-12);
    EXPECT_NEAR(g.sustainedTensorShare(0.25), (1.0 + 0.9 * down) / 2, 1e-12); // from (0, 1): no tensor work, no throttle
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(0.0), 1.0);
    g.powerLimitWatts = 1000.0;
    const double up = std::sqrt(900.0 / 600.0);
    EXPECT_NEAR(g.sustainedTensorShare(1.0), 0.8 * up, 1e-12); // 0.98
    EXPECT_DOUBLE_EQ(g.sustainedTensorShare(0.5), 1.0);         // 1.10, never above the benchmark's rate
}

// The presets: the 700 W H100 carries the power law at its own limit; Meta's 500 W Grand Teton part moves the
// same curve to 500 W (bench/power_dvfs_fit.py: x0.844).
TEST(SustainedShare, TheGrandTetonPartRunsTheHopperCurveAtItsFiveHundredWatts) {
    const ClusterConfig h100 = test::clusterPreset("dgx-h100-80g");
    const ClusterConfig teton = test::clusterPreset("grand-teton-h100-96g");
    ASSERT_TRUE(h100.gpu.sustainedSharePower && teton.gpu.sustainedSharePower);
    EXPECT_DOUBLE_EQ(h100.gpu.powerLimitShareScale(), 1.0);
    EXPECT_DOUBLE_EQ(teton.gpu.powerLimitWatts, 500.0);
    EXPECT_NEAR(teton.gpu.powerLimitShareScale(), 0.844, 0.001);
    for (double duty : {0.3, 0.6, 0.9}) EXPECT_LT(teton.gpu.sustainedTensorShare(duty), h100.gpu.sustainedTensorShare(duty));
}

TEST(SustainedShare, ThePowerLawAndLimitAreReadWrittenAndRefusedAtTheirPointers) {
    const ClusterConfig teton = test::clusterPreset("grand-teton-h100-96g");
    const nlohmann::json j = clusterToJson(teton);
    ProblemList ok;
    const ClusterConfig back = parseCluster(j, "", ok);
    EXPECT_TRUE(ok.empty());
    EXPECT_DOUBLE_EQ(back.gpu.powerLimitWatts, 500.0);
    EXPECT_DOUBLE_EQ(back.gpu.powerLimitShareScale(), teton.gpu.powerLimitShareScale());
    auto problemsOf = [&](const std::function<void(nlohmann::json&)>& edit) {
        nlohmann::json bad = j;
        edit(bad);
        ProblemList p;
        parseCluster(bad, "", p);
        return p;
    };
    // A limit without the curve's power law would be ignored in silence.
    EXPECT_TRUE(named(problemsOf([](nlohmann::json& b) { b["gpu"].erase("sustained_share_power"); }), "/gpu/power_limit_watts"));
    EXPECT_TRUE(named(problemsOf([](nlohmann::json& b) { b["gpu"]["power_limit_watts"] = 50; }), "/gpu/power_limit_watts"));
    EXPECT_TRUE(named(problemsOf([](nlohmann::json& b) { b["gpu"]["sustained_share_power"]["idle_watts"] = 800; }),
                      "/gpu/sustained_share_power/idle_watts"));
    EXPECT_TRUE(named(problemsOf([](nlohmann::json& b) { b["gpu"]["sustained_share_power"]["clock_exponent"] = 0.1; }),
                      "/gpu/sustained_share_power/clock_exponent"));
    EXPECT_TRUE(named(problemsOf([](nlohmann::json& b) { b["gpu"]["sustained_share_power"].erase("measured_at_watts"); }),
                      "/gpu/sustained_share_power/measured_at_watts"));
    // The power law describes the measured curve: on a GPU with the fitted constant it would describe nothing.
    EXPECT_TRUE(named(problemsOf([](nlohmann::json& b) {
                          b["gpu"].erase("sustained_share_by_duty");
                          b["gpu"].erase("power_limit_watts");
                      }),
                      "/gpu/sustained_share_power"));
}

// The LM head by hand: norm, GEMM and loss forward, their backward (the GEMM twice), no recompute. The duty is the
// GEMM's load (its FLOPs at the plateau, three times) over every kernel's time at benchmark rates.
TEST(SustainedShare, ABlocksDutyIsItsTensorLoadOverItsKernelTimeAtBenchmarkRates) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    ClusterConfig burst = c;
    burst.gpu.sustainedShareByDuty = {point(1.0, 1.0)}; // every block at the benchmark's rate
    const ModelConfig m = test::megatronStyleModel(2, 4096, 32, 50304, 2048);
    Plan p;
    const PrecisionRecipe& r = *findPrecisionRecipe("megatron");
    const BlockCompute atBurst = headCompute(m, burst, p, r);
    double load = 0.0, total = 0.0, gemm = 0.0;
    for (const OpCost& op : atBurst.forwardOps) {
        if (op.opClass == OpClass::Gemm) {
            const double plateau = c.peakFlops(r.computeDtype) * gemmPlateauEfficiency(c.gpu, r.computeDtype);
            load += 3.0 * std::min(op.seconds, op.flops / plateau);
            total += 3.0 * op.seconds;
            gemm += 3.0 * op.seconds;
        } else {
            OpCost back = op;
            back.kernel = op.kernel.substr(0, op.kernel.size() - std::string("_forward").size()) + "_backward";
            back.bytes *= op.backwardByteFactor;
            total += op.seconds + opSeconds(back, c, r.computeDtype);
        }
    }
    // The GEMM runs below the plateau (its shape's waves and k overhead), so its load is less than its time.
    EXPECT_LT(load, 0.99 * gemm);
    const BlockCompute head = headCompute(m, c, p, r);
    EXPECT_NEAR(head.tensorDuty, load / total, 1e-12);
    EXPECT_GT(head.tensorDuty, 0.3);
    EXPECT_LT(head.tensorDuty, 1.0);
    EXPECT_DOUBLE_EQ(head.tensorShare, c.gpu.sustainedTensorShare(head.tensorDuty));
    // The GEMM runs at that share of its benchmarked rate: its compute time over the burst block's is 1 / share.
    const OpCost* g = findOp(head, "lm_head");
    const OpCost* g1 = findOp(atBurst, "lm_head");
    ASSERT_TRUE(g && g1);
    const double overhead = c.gpu.kernelOverheadSeconds;
    EXPECT_NEAR((g->seconds - overhead) * head.tensorShare, g1->seconds - overhead, 1e-12);
    // A GPU without the curve keeps the fitted constant, whatever the duty.
    ClusterConfig fitted = c;
    fitted.gpu.sustainedShareByDuty.clear();
    fitted.gpu.sustainedTensorFraction = 0.9;
    EXPECT_DOUBLE_EQ(headCompute(m, fitted, p, r).tensorShare, 0.9);
}

// fp32 GEMMs run on the CUDA cores (TF32 off) and kept their rate held at the power limit on a lent H200 (1.004-1.008
// of their first 40 ms, data/gpu/h200-2026-11-28-tip/power-fp32.json): they load no tensor cores and take no share,
// so an fp32 layer on a GPU with the curve costs what it costs with a share of 1; a bf16 layer is still held back.
TEST(SustainedShare, Fp32GemmsOnTheCudaCoresKeepTheirBenchmarkedRate) {
    EXPECT_FALSE(runsOnTensorCores(Dtype::Fp32));
    for (Dtype d : {Dtype::Tf32, Dtype::Bf16, Dtype::Fp16, Dtype::Fp8, Dtype::Fp64}) EXPECT_TRUE(runsOnTensorCores(d));
    const ClusterConfig c = test::clusterPreset("h200-single");
    ASSERT_FALSE(c.gpu.sustainedShareByDuty.empty());
    ClusterConfig none = c;
    none.gpu.sustainedShareByDuty.clear();
    none.gpu.sustainedTensorFraction = 1.0;
    const ModelConfig m = test::megatronStyleModel(2, 2048, 16, 50304, 2048);
    Plan p;
    const PrecisionRecipe& fp32 = *findPrecisionRecipe("fp32");
    const BlockCompute layer = layerCompute(m, c, p, fp32);
    EXPECT_EQ(layer.tensorDuty, 0.0);
    EXPECT_EQ(layer.tensorShare, 1.0);
    EXPECT_DOUBLE_EQ(layer.forward.seconds, layerCompute(m, none, p, fp32).forward.seconds);
    EXPECT_DOUBLE_EQ(layer.backwardInput.seconds, layerCompute(m, none, p, fp32).backwardInput.seconds);
    // A fitted constant leaves fp32 alone too.
    ClusterConfig fitted = none;
    fitted.gpu.sustainedTensorFraction = 0.9;
    EXPECT_DOUBLE_EQ(layerCompute(m, fitted, p, fp32).forward.seconds, layer.forward.seconds);
    // bf16: the same layer loads the tensor cores and runs below its benchmarked rate.
    const PrecisionRecipe& bf16 = *findPrecisionRecipe("megatron");
    const BlockCompute mixed = layerCompute(m, c, p, bf16);
    EXPECT_GT(mixed.tensorDuty, 0.3);
    EXPECT_LT(mixed.tensorShare, 0.95);
    EXPECT_GT(mixed.forward.seconds, layerCompute(m, none, p, bf16).forward.seconds);
}

TEST(AttentionDropout, TheFusedKernelTakesItsMeasuredFactorWhereTheModelHasDropout) {
    ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    c.gpu.sustainedShareByDuty.clear(); // one share for both blocks, so only the kernel's own time moves
    c.gpu.sustainedTensorFraction = 0.9;
    ModelConfig m = test::megatronStyleModel(2, 4096, 32, 50304, 8192);
    const PrecisionRecipe& r = *findPrecisionRecipe("megatron");
    auto attention = [&](double dropout, const std::string& kernel) {
        ModelConfig mm = m;
        mm.dropout = dropout;
        Plan p;
        p.attentionKernel = kernel;
        const BlockCompute b = layerCompute(mm, c, p, r);
        const OpCost* a = findOp(b, "attention_core_flash");
        EXPECT_TRUE(a != nullptr);
        return a ? a->seconds - c.gpu.kernelOverheadSeconds : 0.0;
    };
    // cuDNN's forward with dropout measured at 1.95x its time without; FlashAttention-2's at 1.22x.
    EXPECT_NEAR(attention(0.1, "cudnn") / attention(0.0, "cudnn"), 1.95, 1e-9);
    EXPECT_NEAR(attention(0.1, "flash2") / attention(0.0, "flash2"), 1.22, 1e-9);
    // FlashAttention-3 has no measured factor (nor a dropout path): unchanged.
    EXPECT_DOUBLE_EQ(attention(0.1, "flash3"), attention(0.0, "flash3"));
    // The backward kernel takes its own factor: 1.20x for cuDNN.
    const OpCost fwd = *findOp(layerCompute(m, c, Plan{}, r), "attention_core_flash");
    OpCost bwd = fwd;
    bwd.dropout = false;
    bwd.kernel = "attention_backward";
    bwd.backward = true;
    bwd.flops *= kernel_cost::kFlashBackwardFlopFactor;
    bwd.bytes *= kernel_cost::kBackwardByteFactor;
    OpCost bwdDrop = bwd;
    bwdDrop.dropout = true;
    EXPECT_NEAR((opSeconds(bwdDrop, c, r.computeDtype) - c.gpu.kernelOverheadSeconds) /
                    (opSeconds(bwd, c, r.computeDtype) - c.gpu.kernelOverheadSeconds),
                1.2, 1e-9);
    // An A100 preset has no measurement: its kernels take none.
    const ClusterConfig a100 = test::clusterPreset("dgx-a100-80g");
    for (const auto& [name, spec] : a100.gpu.attentionKernels) EXPECT_EQ(spec.dropoutForwardTimeFactor, 0.0) << name;
}

} // namespace
} // namespace tessel
