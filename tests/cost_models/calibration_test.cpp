// Calibration fits on synthetic measurements with known answers: the robust least squares, the GEMM table,
// kernel lines, collectives per tier, phase fits, and the cluster file round trip of every calibrated field.
#include "test_support.hpp"

#include "tessel/cost/calibration.hpp"
#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace tessel {
namespace {

TEST(RelativeLeastSquares, RecoversALineExactly) {
    // t = 2e-6 + 3e-9 x at x = 1e3 .. 1e6: both coefficients back to 1e-9 relative.
    Eigen::MatrixXd x(4, 2);
    Eigen::VectorXd t(4);
    const double xs[] = {1e3, 1e4, 1e5, 1e6};
    for (int i = 0; i < 4; ++i) {
        x(i, 0) = 1.0;
        x(i, 1) = xs[i];
        t(i) = 2e-6 + 3e-9 * xs[i];
    }
    const LinearFit f = fitRelativeLeastSquares(x, t);
    EXPECT_NEAR(f.beta(0), 2e-6, 2e-15);
    EXPECT_NEAR(f.beta(1), 3e-9, 3e-18);
    EXPECT_EQ(f.rejected(), 0);
    EXPECT_LT(f.rmsRelativeResidual(), 1e-9);
}

TEST(RelativeLeastSquares, RejectsOneWildPointAndKeepsTheLine) {
    // Ten points on t = 1 + x, one measured 5x too slow (a context switch): it is rejected, the fit is exact.
    Eigen::MatrixXd x(10, 2);
    Eigen::VectorXd t(10);
    for (int i = 0; i < 10; ++i) {
        x(i, 0) = 1.0;
        x(i, 1) = i + 1.0;
        t(i) = 1.0 + (i + 1.0);
    }
    t(6) *= 5.0;
    const LinearFit f = fitRelativeLeastSquares(x, t);
    EXPECT_FALSE(f.kept[6]);
    EXPECT_EQ(f.rejected(), 1);
    EXPECT_NEAR(f.beta(0), 1.0, 1e-9);
    EXPECT_NEAR(f.beta(1), 1.0, 1e-9);
}

TEST(RelativeLeastSquares, PinsANegativeCoefficientAtZero) {
    // Pure proportional data with a slight downward intercept in the noise-free fit: t = 2x - 0.1 would need a
    // negative overhead; the fit pins it at 0 and refits the slope alone.
    Eigen::MatrixXd x(3, 2);
    Eigen::VectorXd t(3);
    const double xs[] = {1.0, 2.0, 4.0};
    for (int i = 0; i < 3; ++i) {
        x(i, 0) = 1.0;
        x(i, 1) = xs[i];
        t(i) = 2.0 * xs[i] - 0.1;
    }
    const LinearFit f = fitRelativeLeastSquares(x, t);
    EXPECT_EQ(f.beta(0), 0.0);
    EXPECT_GT(f.beta(1), 1.9);
    EXPECT_LT(f.beta(1), 2.0);
}

TEST(RelativeLeastSquares, TooFewPointsIsAnError) {
    Eigen::MatrixXd x(1, 2);
    x << 1.0, 1.0;
    Eigen::VectorXd t(1);
    t << 1.0;
    EXPECT_THROW(fitRelativeLeastSquares(x, t), RuntimeError);
}

BenchSample gemmPoint(int64_t m, int64_t n, int64_t k, double peak, double eff, double overhead) {
    BenchSample s;
    s.kernel = "gemm";
    s.shape = {{"m", m}, {"n", n}, {"k", k}};
    s.flops = kernel_cost::gemmFlops(m, n, k);
    s.bytes = kernel_cost::gemmBytes(m, n, k, 8);
    s.seconds = overhead + s.flops / (peak * eff);
    return s;
}

TEST(CalibrateFromBench, RecoversTheGemmTableKernelLinesAndCollectives) {
    const ClusterConfig base = loadClusterRef("cpu-host", "test");
    const double peak = base.peakFlops(Dtype::Fp64);
    CalibrationInputs in;
    // GEMMs: efficiency 0.3 at min dim 16, 0.6 at 64, 0.7 at 256; 1 us overhead; two shapes per knot.
    for (auto [m, n, k, eff] : std::vector<std::tuple<int64_t, int64_t, int64_t, double>>{
             {16, 64, 64, 0.3}, {128, 16, 256, 0.3}, {64, 64, 64, 0.6}, {64, 512, 128, 0.6}, {256, 256, 256, 0.7},
             {256, 1024, 512, 0.7}})
        in.bench.push_back(gemmPoint(m, n, k, peak, eff, 1e-6));
    // A memory kernel: 3 us + bytes / 5 GB/s.
    for (double bytes : {1e4, 1e5, 1e6}) {
        BenchSample s;
        s.kernel = "norm_forward";
        s.bytes = bytes;
        s.seconds = 3e-6 + bytes / 5e9;
        in.bench.push_back(s);
    }
    // All-reduce over 2 ranks on the intra-node tier: alpha 4 us per ring step (2 steps), bus 8 GB/s;
    // all-gather at bus 4 GB/s, alpha 5 us.
    for (double bytes : {1e3, 1e5, 1e7}) {
        BenchSample ar;
        ar.kernel = "all_reduce";
        ar.groupSize = 2;
        ar.tier = "intra_node";
        ar.bytes = bytes;
        ar.seconds = 2 * 4e-6 + bytes * busFactor(Primitive::AllReduce, 2) / 8e9;
        in.bench.push_back(ar);
        BenchSample ag = ar;
        ag.kernel = "all_gather";
        ag.seconds = 5e-6 + bytes * busFactor(Primitive::AllGather, 2) / 4e9;
        in.bench.push_back(ag);
    }
    CalibrationOptions o;
    o.provenance = {{"dtype", "fp64"}};
    const CalibrationResult r = calibrateFromBench(base, in, o);
    const GpuSpec& gpu = r.cluster.gpu;
    ASSERT_EQ(gpu.gemmEfficiency.size(), 3u);
    EXPECT_EQ(gpu.gemmEfficiency[0].minDim, 16);
    EXPECT_NEAR(gpu.gemmEfficiency[0].efficiency, 0.3, 1e-6);
    EXPECT_NEAR(gpu.gemmEfficiency[1].efficiency, 0.6, 1e-6);
    EXPECT_NEAR(gpu.gemmEfficiency[2].efficiency, 0.7, 1e-6);
    EXPECT_NEAR(gpu.kernels.at("gemm").overheadSeconds, 1e-6, 1e-12);
    EXPECT_NEAR(gpu.kernels.at("norm_forward").overheadSeconds, 3e-6, 1e-12);
    EXPECT_NEAR(gpu.kernels.at("norm_forward").bytesPerSecond, 5e9, 1.0);
    // The tier takes the fastest bus rate; each primitive keeps its own through its efficiency.
    const LinkTier& intra = r.cluster.intraNode;
    EXPECT_NEAR(intra.bandwidthBytesPerSecond, 8e9, 1e-3 * 8e9);
    EXPECT_NEAR(intra.efficiencyFor(Primitive::AllReduce), 1.0, 1e-6);
    EXPECT_NEAR(intra.efficiencyFor(Primitive::AllGather), 0.5, 1e-6);
    EXPECT_NEAR(intra.latencyFor(Primitive::AllReduce), 4e-6, 1e-10);
    EXPECT_NEAR(intra.latencyFor(Primitive::AllGather), 5e-6, 1e-10);
    // What had no data keeps its base value and is listed.
    EXPECT_EQ(r.cluster.interNode.bandwidthBytesPerSecond, base.interNode.bandwidthBytesPerSecond);
    bool listed = false;
    for (const auto& u : r.uncalibrated) listed = listed || u.rfind("network/inter_node", 0) == 0;
    EXPECT_TRUE(listed);

    // The calibrated model now reproduces a benchmark point: a 64^3 GEMM costs overhead + flops / (peak 0.6).
    OpCost op;
    op.kernel = "gemm";
    op.opClass = OpClass::Gemm;
    op.m = op.n = op.k = 64;
    op.flops = kernel_cost::gemmFlops(64, 64, 64);
    EXPECT_NEAR(opSeconds(op, r.cluster, Dtype::Fp64), 1e-6 + op.flops / (peak * 0.6), 1e-10);
    // And a collective: all-gather of 1e5 bytes over 2 intra-node ranks.
    const GroupPlacement two{2, 1, 2};
    EXPECT_NEAR(commCost(Primitive::AllGather, 1e5, two, r.cluster).seconds, 5e-6 + 1e5 * 0.5 / 4e9, 1e-9);
}

// Attention points as `tessel bench` counts them: FLOPs grow with s^2, bytes with s.
BenchSample attentionPoint(int64_t sequences, int64_t seq, double overhead, double flopRate, double byteRate) {
    BenchSample s;
    s.kernel = "attention_forward";
    s.shape = {{"sequences", sequences}, {"seq", seq}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 16}};
    s.flops = kernel_cost::flashAttentionFlops(sequences, 4, seq, seq, 16);
    s.bytes = kernel_cost::attentionBytes(sequences * seq, 64, 32, 8);
    s.seconds = overhead + s.flops / flopRate + s.bytes / byteRate;
    return s;
}

// A CUDA bf16 attention point as `tessel bench` writes it (MHA, the fused counts in flops and bytes, the shape
// beside them) with the time given; calibrate recounts it from the shape (score_gemms).
BenchSample cudaAttentionPoint(const std::string& kernel, int64_t sequences, int64_t seq, int64_t heads, int64_t dim,
                               double seconds) {
    const bool backward = kernel == "attention_backward";
    BenchSample s;
    s.kernel = kernel;
    s.shape = {{"sequences", sequences}, {"seq", seq}, {"heads", heads}, {"kv_heads", heads}, {"head_dim", dim}};
    s.flops = (backward ? 2.5 : 1.0) * kernel_cost::flashAttentionFlops(sequences, heads, seq, seq, dim);
    s.bytes = (backward ? 2.0 : 1.0) * kernel_cost::attentionBytes(sequences * seq, heads * dim, heads * dim, 2);
    s.seconds = seconds;
    return s;
}

TEST(CalibrateFromBench, AttentionOverASequenceSweepSeparatesFlopsFromBytes) {
    const ClusterConfig base = loadClusterRef("cpu-host", "test");
    CalibrationOptions o;
    o.provenance = {{"dtype", "fp64"}};
    // 2 us + FLOPs / 4 GFLOP/s + bytes / 1 GB/s, at half, once and twice s = 64, one and two sequences.
    CalibrationInputs in;
    for (int64_t sequences : {1, 2})
        for (int64_t seq : {32, 64, 128}) in.bench.push_back(attentionPoint(sequences, seq, 2e-6, 4e9, 1e9));
    const KernelFit f = calibrateFromBench(base, in, o).cluster.gpu.kernels.at("attention_forward");
    EXPECT_NEAR(f.overheadSeconds, 2e-6, 1e-9);
    EXPECT_NEAR(f.flopsPerSecond, 4e9, 1e-4 * 4e9);
    EXPECT_NEAR(f.bytesPerSecond, 1e9, 1e-4 * 1e9);
    // The model then extrapolates to a longer sequence the bench never ran: 1 sequence of 512.
    const BenchSample far = attentionPoint(1, 512, 2e-6, 4e9, 1e9);
    OpCost op;
    op.kernel = "attention_forward";
    op.opClass = OpClass::Attention;
    op.flops = far.flops;
    op.bytes = far.bytes;
    EXPECT_NEAR(opSeconds(op, calibrateFromBench(base, in, o).cluster, Dtype::Fp64), far.seconds, 1e-4 * far.seconds);

    // At one sequence length FLOPs and bytes are proportional: only the FLOP rate is fitted, and it carries both.
    CalibrationInputs one;
    for (int64_t sequences : {1, 2, 4}) one.bench.push_back(attentionPoint(sequences, 64, 2e-6, 4e9, 1e9));
    const KernelFit g = calibrateFromBench(base, one, o).cluster.gpu.kernels.at("attention_forward");
    EXPECT_EQ(g.bytesPerSecond, 0.0);
    const BenchSample p = one.bench[1];
    EXPECT_NEAR(g.overheadSeconds + p.flops / g.flopsPerSecond, p.seconds, 1e-6 * p.seconds);
}

// CUDA attention points as `tessel bench` writes them (fused counts in flops/bytes), timed on a machine whose
// GEMM attention takes 30 us + full-GEMM FLOPs / 900 TFLOP/s + score-workspace bytes / 2 TB/s: calibrate counts
// from each point's shape, recovers the three terms, and marks the fit "score_gemms".
TEST(CalibrateFromBench, CudaAttentionFitsScoreGemmCountsFromTheShape) {
    const ClusterConfig base = loadClusterRef("h200-single", "test");
    CalibrationOptions o;
    o.provenance = {{"dtype", "mixed"}, {"backend", "cuda"}};
    CalibrationInputs in;
    for (const char* kernel : {"attention_forward", "attention_backward"})
        for (int64_t sequences : {1, 2})
            for (int64_t seq : {512, 1024, 2048})
                for (int64_t dim : {64, 128}) {
                    const bool backward = std::string(kernel) == "attention_backward";
                    in.bench.push_back(cudaAttentionPoint(
                        kernel, sequences, seq, 8, dim,
                        3e-5 + kernel_cost::scoreGemmFlops(sequences, 8, seq, seq, dim, backward) / 9e14 +
                            kernel_cost::scoreGemmBytes(sequences, 8, seq, seq, dim, 2, backward) / 2e12));
                }
    const ClusterConfig fitted = calibrateFromBench(base, in, o).cluster;
    for (const char* kernel : {"attention_forward", "attention_backward"}) {
        const KernelFit& f = fitted.gpu.kernels.at(kernel);
        EXPECT_TRUE(f.scoreGemms) << kernel;
        EXPECT_NEAR(f.overheadSeconds, 3e-5, 1e-4 * 3e-5) << kernel;
        EXPECT_NEAR(f.flopsPerSecond, 9e14, 1e-4 * 9e14) << kernel;
        EXPECT_NEAR(f.bytesPerSecond, 2e12, 1e-4 * 2e12) << kernel;
    }
    // The model then times a plan's attention op (4 sequences of 4096, 16 heads of 128) with the same counts.
    OpCost op;
    op.kernel = "attention_forward";
    op.opClass = OpClass::Attention;
    op.m = 4096, op.n = 4096, op.k = 128, op.batch = 4 * 16;
    const double expected = 3e-5 + kernel_cost::scoreGemmFlops(4, 16, 4096, 4096, 128, false) / 9e14 +
                            kernel_cost::scoreGemmBytes(4, 16, 4096, 4096, 128, 2, false) / 2e12;
    EXPECT_NEAR(opSeconds(op, fitted, Dtype::Bf16), expected, 1e-4 * expected);
    // The counts survive the cluster file; a file without the key (written before it) reads as fused.
    const ClusterConfig back = parseCluster(clusterToJson(fitted));
    EXPECT_TRUE(back.gpu.kernels.at("attention_backward").scoreGemms);
    nlohmann::json old = clusterToJson(fitted);
    old["gpu"]["kernels"]["attention_forward"].erase("counts");
    EXPECT_FALSE(parseCluster(old).gpu.kernels.at("attention_forward").scoreGemms);
    old["gpu"]["kernels"]["attention_forward"]["counts"] = "tiles";
    EXPECT_THROW(parseCluster(old), InputError);
}

// The CUDA executor's GEMM attention at short sequences is bound by its launches, one step per (sequence, query
// head of a kv group, chunk of kv heads): bench points timed as 20 us + 12 us a step + FLOPs / 900 TFLOP/s + bytes /
// 2 TB/s over 1-4 sequences and 512-4096 tokens (4096 takes 8 chunks of 2 heads) give back the step time, and the
// model then charges it per step of a plan's op (16 sequences of 512: 16 steps). The step time survives the
// cluster file; on a fused fit it is refused.
TEST(CalibrateFromBench, CudaAttentionFitsItsLaunchSteps) {
    const ClusterConfig base = loadClusterRef("h200-single", "test");
    CalibrationOptions o;
    o.provenance = {{"dtype", "mixed"}, {"backend", "cuda"}};
    CalibrationInputs in;
    auto truth = [](int64_t n, int64_t seq, int64_t dim, bool backward) {
        return 2e-5 + 1.2e-5 * static_cast<double>(kernel_cost::scoreGemmSteps(n, 16, 16, seq, seq, 2)) +
               kernel_cost::scoreGemmFlops(n, 16, seq, seq, dim, backward) / 9e14 +
               kernel_cost::scoreGemmBytes(n, 16, seq, seq, dim, 2, backward) / 2e12;
    };
    for (const char* kernel : {"attention_forward", "attention_backward"})
        for (int64_t sequences : {1, 2, 4})
            for (int64_t seq : {512, 1024, 2048, 4096})
                for (int64_t dim : {64, 128})
                    in.bench.push_back(cudaAttentionPoint(kernel, sequences, seq, 16, dim,
                                                          truth(sequences, seq, dim, std::string(kernel) == "attention_backward")));
    const ClusterConfig fitted = calibrateFromBench(base, in, o).cluster;
    for (const char* kernel : {"attention_forward", "attention_backward"}) {
        const KernelFit& f = fitted.gpu.kernels.at(kernel);
        EXPECT_TRUE(f.scoreGemms) << kernel;
        EXPECT_NEAR(f.stepSeconds, 1.2e-5, 1e-4 * 1.2e-5) << kernel;
        EXPECT_NEAR(f.overheadSeconds, 2e-5, 1e-4 * 2e-5) << kernel;
    }
    OpCost op;
    op.kernel = "attention_backward";
    op.opClass = OpClass::Attention;
    op.backward = true;
    op.m = 512, op.n = 512, op.k = 64, op.batch = 16 * 16, op.sequences = 16, op.kvHeads = 16;
    EXPECT_NEAR(opSeconds(op, fitted, Dtype::Bf16), truth(16, 512, 64, true), 1e-4 * truth(16, 512, 64, true));
    const ClusterConfig back = parseCluster(clusterToJson(fitted));
    EXPECT_DOUBLE_EQ(back.gpu.kernels.at("attention_forward").stepSeconds,
                     fitted.gpu.kernels.at("attention_forward").stepSeconds);
    nlohmann::json bad = clusterToJson(fitted);
    bad["gpu"]["kernels"]["attention_forward"].erase("counts");
    const std::string refused = test::inputErrorOf([&] { parseCluster(bad); });
    EXPECT_NE(refused.find("/gpu/kernels/attention_forward/step_seconds"), std::string::npos) << refused;
}

// Points whose time falls with the step count (a made-up -4 us a step) give no step time: the fit's active set pins
// the column at 0 and refits on overhead, FLOPs and bytes, so no negative or zero step_seconds is written.
TEST(CalibrateFromBench, ALaunchStepThatComesOutNegativeIsLeftOutOfTheFit) {
    const ClusterConfig base = loadClusterRef("h200-single", "test");
    CalibrationOptions o;
    o.provenance = {{"dtype", "mixed"}, {"backend", "cuda"}};
    CalibrationInputs in;
    for (int64_t sequences : {1, 2, 4})
        for (int64_t seq : {512, 1024, 2048})
            for (int64_t dim : {64, 128})
                in.bench.push_back(cudaAttentionPoint(
                    "attention_forward", sequences, seq, 8, dim,
                    5e-5 - 4e-6 * static_cast<double>(kernel_cost::scoreGemmSteps(sequences, 8, 8, seq, seq, 2)) +
                        kernel_cost::scoreGemmFlops(sequences, 8, seq, seq, dim, false) / 9e14 +
                        kernel_cost::scoreGemmBytes(sequences, 8, seq, seq, dim, 2, false) / 2e12));
    const CalibrationResult r = calibrateFromBench(base, in, o);
    const ClusterConfig& fitted = r.cluster;
    const KernelFit& f = fitted.gpu.kernels.at("attention_forward");
    EXPECT_EQ(f.stepSeconds, 0.0);
    // The residuals reported are the refitted line's, which cannot follow a negative step cost (the four-column
    // fit would have matched these points exactly).
    for (const TermReport& t : r.terms)
        if (t.term == "gpu/kernels/attention_forward") EXPECT_GT(t.rmsRelativeResidual, 1e-3);
    EXPECT_GT(f.bytesPerSecond, 0.0);
    EXPECT_FALSE(clusterToJson(fitted)["gpu"]["kernels"]["attention_forward"].contains("step_seconds"));
}

// Attention bound by bytes alone (30 us + score-workspace bytes / 2 TB/s, no FLOP term): a FLOP rate fitted to
// such points is no physical rate (it lands above the GPU's peak, as the H100's backward did at 3.6e16 /s),
// so the kernel is fitted on bytes and overhead only and keeps no flops_per_second.
TEST(CalibrateFromBench, AFlopRateAbovePeakIsLeftOutAndBytesAloneAreFitted) {
    const ClusterConfig base = loadClusterRef("h200-single", "test");
    CalibrationOptions o;
    o.provenance = {{"dtype", "mixed"}, {"backend", "cuda"}};
    CalibrationInputs in;
    for (int64_t sequences : {1, 2})
        for (int64_t seq : {512, 1024, 2048})
            for (int64_t dim : {64, 128})
                // A FLOP share far below the peak's: 1e-9 of a second per PFLOP keeps the points strictly
                // bytes-bound while the FLOP column stays in the fit.
                in.bench.push_back(cudaAttentionPoint(
                    "attention_backward", sequences, seq, 8, dim,
                    3e-5 + kernel_cost::scoreGemmBytes(sequences, 8, seq, seq, dim, 2, true) / 2e12 +
                        kernel_cost::scoreGemmFlops(sequences, 8, seq, seq, dim, true) / 1e18));
    const KernelFit& f = calibrateFromBench(base, in, o).cluster.gpu.kernels.at("attention_backward");
    EXPECT_EQ(f.flopsPerSecond, 0.0);
    EXPECT_NEAR(f.bytesPerSecond, 2e12, 0.01 * 2e12);
    EXPECT_NEAR(f.overheadSeconds, 3e-5, 0.05 * 3e-5);
}

// Copies are measured and reported beside the terms, never applied: 3 us + bytes / 20 GB/s for the device copy,
// pageable and pinned host copies as separate lines.
TEST(CalibrateFromBench, CopiesAreReportedNotApplied) {
    const ClusterConfig base = loadClusterRef("h200-single", "test");
    CalibrationOptions o;
    o.provenance = {{"dtype", "mixed"}};
    CalibrationInputs in;
    auto copy = [&](const std::string& kernel, double bytes, int pinned, double overhead, double rate) {
        BenchSample s;
        s.kernel = kernel;
        s.bytes = bytes;
        if (pinned >= 0) s.shape["pinned"] = pinned;
        s.seconds = overhead + bytes / rate;
        in.bench.push_back(s);
    };
    for (double mib : {1.0, 4.0, 16.0, 64.0}) {
        copy("copy_device_to_device", mib * 1048576.0, -1, 3e-6, 2e10);
        copy("copy_host_to_device", mib * 1048576.0, 0, 1e-5, 1e10);
        copy("copy_host_to_device", mib * 1048576.0, 1, 5e-6, 5e10);
    }
    const CalibrationResult r = calibrateFromBench(base, in, o);
    ASSERT_EQ(r.measured.size(), 3u);
    std::map<std::string, nlohmann::json> byTerm;
    for (const TermReport& t : r.measured) byTerm[t.term] = t.values;
    EXPECT_NEAR(byTerm.at("measured/copy_device_to_device")["bytes_per_second"].get<double>(), 2e10, 2e10 * 1e-6);
    EXPECT_NEAR(byTerm.at("measured/copy_device_to_device")["overhead_seconds"].get<double>(), 3e-6, 1e-10);
    EXPECT_NEAR(byTerm.at("measured/copy_device_to_device")["fraction_of_datasheet_hbm"].get<double>(), 2e10 / 4.8e12, 1e-9);
    EXPECT_NEAR(byTerm.at("measured/copy_host_to_device/pageable")["bytes_per_second"].get<double>(), 1e10, 1e10 * 1e-6);
    EXPECT_NEAR(byTerm.at("measured/copy_host_to_device/pinned")["bytes_per_second"].get<double>(), 5e10, 5e10 * 1e-6);
    // Nothing in the cluster moved: no term was fitted, and the GPU's memory terms are the base's.
    EXPECT_TRUE(r.terms.empty());
    EXPECT_EQ(r.cluster.gpu.memoryEfficiency, base.gpu.memoryEfficiency);
    EXPECT_EQ(r.cluster.gpu.kernelOverheadSeconds, base.gpu.kernelOverheadSeconds);
    EXPECT_EQ(r.cluster.gpu.hbmBytesPerSecond, base.gpu.hbmBytesPerSecond);
    // And the calibration block lists them under "measured".
    const nlohmann::json block = calibrationBlock(r, in, o);
    EXPECT_EQ(block["measured"].size(), 3u);
    EXPECT_TRUE(block["terms"].empty());
}

TEST(CalibrateFromRuns, FitsReservedBytesAndPhaseLines) {
    CalibrationResult r;
    r.cluster = loadClusterRef("cpu-host", "test");
    CalibrationInputs in;
    for (double tensors : {8e6, 12e6, 20e6}) in.memory.push_back({tensors + 25e6, tensors, "rank"});
    // forward: 0.5 ms + 1.2 x predicted; optimizer: 2.5 x predicted (two points: scale alone).
    for (double pred : {1e-3, 4e-3, 1e-2}) in.actions.push_back({"forward", pred, 5e-4 + 1.2 * pred, "a"});
    for (double pred : {1e-3, 3e-3}) in.actions.push_back({"optimizer_step", pred, 2.5 * pred, "o"});
    calibrateFromRuns(r, in, CalibrationOptions{});
    EXPECT_EQ(r.cluster.gpu.reservedBytes, 25000000);
    EXPECT_NEAR(r.cluster.gpu.phaseFit("forward").overheadSeconds, 5e-4, 1e-10);
    EXPECT_NEAR(r.cluster.gpu.phaseFit("forward").timeScale, 1.2, 1e-9);
    EXPECT_EQ(r.cluster.gpu.phaseFit("optimizer").overheadSeconds, 0.0);
    EXPECT_NEAR(r.cluster.gpu.phaseFit("optimizer").timeScale, 2.5, 1e-9);
    EXPECT_EQ(r.cluster.gpu.phaseFit("backward").timeScale, 1.0); // no backward actions: identity, listed
}

TEST(CalibrateSyncJitter, RecoversTheCommunicationScaleAndTheJitter) {
    CalibrationResult r;
    r.cluster = loadClusterRef("cpu-host", "test");
    CalibrationInputs in;
    // Collectives 1.8x slower than the benchmark, plus waits with σ = 0.08 over groups of 2 and 4; some right
    // after a long backward, some right after another collective (W = 0, no wait).
    for (int n : {2, 4})
        for (double transfer : {2e-4, 1e-3, 3e-3})
            for (double work : {0.0, 0.02, 0.06})
                in.syncs.push_back({n, work, transfer, 1.8 * transfer + 0.08 * expectedMaxOfNormals(n) * work, "s"});
    calibrateSyncJitter(r, in);
    EXPECT_NEAR(r.cluster.gpu.phaseFit("communication").timeScale, 1.8, 1e-9);
    EXPECT_NEAR(r.cluster.gpu.syncJitterFraction, 0.08, 1e-9);
    EXPECT_EQ(r.cluster.gpu.phaseFit("communication").overheadSeconds, 0.0);
    ASSERT_EQ(r.terms.size(), 1u);
    EXPECT_LT(r.terms[0].rmsRelativeResidual, 1e-9);

    // Waits of ranks that are sometimes faster than the model (negative residual) pin σ at 0, never below.
    CalibrationResult q;
    q.cluster = r.cluster;
    q.cluster.gpu.syncJitterFraction = 0.0;
    CalibrationInputs none;
    for (double transfer : {1e-3, 2e-3, 4e-3}) none.syncs.push_back({2, 0.05, transfer, transfer - 1e-4, "s"});
    calibrateSyncJitter(q, none);
    EXPECT_EQ(q.cluster.gpu.syncJitterFraction, 0.0);
    EXPECT_GT(q.cluster.gpu.phaseFit("communication").timeScale, 0.9);

    // Fewer than 3 collectives: nothing fitted, both terms listed.
    CalibrationResult few;
    few.cluster = loadClusterRef("cpu-host", "test");
    CalibrationInputs two;
    two.syncs = {in.syncs[0], in.syncs[1]};
    calibrateSyncJitter(few, two);
    EXPECT_EQ(few.cluster.gpu.syncJitterFraction, 0.0);
    ASSERT_EQ(few.uncalibrated.size(), 1u);
    EXPECT_NE(few.uncalibrated[0].find("sync_jitter_fraction"), std::string::npos);
}

TEST(CalibratedCluster, RoundTripsThroughJsonAndRejectsUnknownKernels) {
    ClusterConfig c = loadClusterRef("cpu-host", "test");
    c.gpu.kernels["norm_backward"] = KernelFit{2e-6, 3e9, 0.0};
    c.gpu.kernels["attention_forward"] = KernelFit{1e-6, 2e9, 5e9}; // both terms: a sequence sweep
    c.gpu.phaseFits["backward"] = PhaseFit{1e-4, 1.3};
    c.gpu.phaseFits["communication"] = PhaseFit{0.0, 1.9};
    c.gpu.syncJitterFraction = 0.07;
    c.intraNode.primitiveLatencySeconds[Primitive::AllReduce] = 4e-6;
    const ClusterConfig back = parseCluster(clusterToJson(c));
    EXPECT_EQ(back.gpu.kernels.at("norm_backward").bytesPerSecond, 3e9);
    EXPECT_EQ(back.gpu.kernels.at("attention_forward").flopsPerSecond, 5e9);
    EXPECT_EQ(back.gpu.kernels.at("attention_forward").bytesPerSecond, 2e9);
    EXPECT_EQ(back.gpu.phaseFit("backward").timeScale, 1.3);
    EXPECT_EQ(back.gpu.phaseFit("communication").timeScale, 1.9);
    EXPECT_EQ(back.gpu.syncJitterFraction, 0.07);
    EXPECT_EQ(back.intraNode.latencyFor(Primitive::AllReduce), 4e-6);
    EXPECT_FALSE(back.gpu.overlapsCommunication); // cpu-host: one thread per rank
    nlohmann::json j = clusterToJson(c);
    j["gpu"]["kernels"]["norm_sideways"] = {{"overhead_seconds", 1e-6}};
    const std::string refused = test::inputErrorOf([&] { parseCluster(j); });
    EXPECT_NE(refused.find("/gpu/kernels/norm_sideways"), std::string::npos) << "an unknown kernel name must be refused: " << refused;
}

TEST(BenchSamples, ParseAndNameTheBadField) {
    const std::string text = "{\"kind\":\"microbenchmark\",\"kernel\":\"gemm\",\"median_seconds\":1e-5,\"flops\":1e6,"
                             "\"shape\":{\"m\":16,\"n\":16,\"k\":16}}\n"
                             "{\"kind\":\"other\"}\n"
                             "{\"kind\":\"microbenchmark\",\"kernel\":\"gemm\",\"median_seconds\":\"fast\"}\n";
    const std::string refused = test::inputErrorOf([&] { parseBenchSamples(text, "b.jsonl"); });
    EXPECT_NE(refused.find("b.jsonl:3#/median_seconds"), std::string::npos) << "a non-numeric duration must be refused: " << refused;
    const auto ok = parseBenchSamples(text.substr(0, text.rfind("{\"kind\":\"microbenchmark\"")), "b.jsonl");
    ASSERT_EQ(ok.size(), 1u);
    EXPECT_EQ(ok[0].shape.at("m"), 16);
}

// Found by mutating a shipped bench.jsonl: a "kind" or "device" that was not a string ended in the JSON library's
// type_error, and a gemm point without its k in std::map::at; both are now problems naming the line and field.
TEST(BenchSamples, WrongTypesAndMissingGemmDimensionsNameTheField) {
    auto problemsOf = [](const std::string& text) {
        try {
            parseBenchSamples(text, "b.jsonl");
        } catch (const InputError& e) {
            std::string all;
            for (const auto& p : e.problems()) all += p.where + ": " + p.message + "\n";
            return all;
        }
        return std::string("no error");
    };
    EXPECT_EQ(problemsOf("{\"kind\":7,\"kernel\":\"gemm\"}\n"), "b.jsonl:1#/kind: expected a string\n");
    EXPECT_EQ(problemsOf("{\"kind\":\"microbenchmark\",\"kernel\":\"gemm\",\"median_seconds\":1e-5,\"device\":[],"
                         "\"shape\":{\"m\":16,\"n\":16,\"k\":16}}\n"),
              "b.jsonl:1#/device: expected a string\n");
    EXPECT_EQ(problemsOf("{\"kind\":\"microbenchmark\",\"kernel\":\"gemm\",\"median_seconds\":1e-5,"
                         "\"shape\":{\"m\":16,\"n\":-16}}\n"),
              "b.jsonl:1#/shape/n: expected a whole number from 0 to 2^40\nb.jsonl:1#/shape/k: a gemm point needs its m, n and k\n");
    EXPECT_EQ(problemsOf("{\"kind\":\"microbenchmark\",\"kernel\":\"all_reduce\",\"median_seconds\":1e-5,\"bytes\":1e6,"
                         "\"group_size\":1e308,\"rank\":-1}\n"),
              "b.jsonl:1#/group_size: expected a whole number from 1 to 1048576\nb.jsonl:1#/rank: expected a whole number from 0 to 1048575\n");
}

// The held-out errors of a calibration from step times are read back as the calibrated cluster's error band, so a
// cluster file whose step_runs hold anything but numbers there is refused, every such entry named.
TEST(Calibration, StepRunsOfACalibratedClusterFileAreChecked) {
    nlohmann::json doc = clusterToJson(test::clusterPreset("dgx-a100-80g"));
    doc["calibration"] = {{"step_runs", {{{"run", "a"}, {"error_held_out", 0.05}}, {{"run", "b (a check)"}, {"error_after", 0.1}}}}};
    ASSERT_TRUE(parseCluster(doc).calibration);
    doc["calibration"]["step_runs"][0]["error_held_out"] = "5%";
    doc["calibration"]["step_runs"][1] = 3;
    try {
        parseCluster(doc);
        ADD_FAILURE() << "accepted step_runs that are not runs";
    } catch (const InputError& e) {
        ASSERT_EQ(e.problems().size(), 2u);
        EXPECT_EQ(e.problems()[0].where, "/calibration/step_runs/0/error_held_out");
        EXPECT_EQ(e.problems()[1].where, "/calibration/step_runs/1");
    }
    doc["calibration"]["step_runs"] = "none";
    EXPECT_THROW(parseCluster(doc), InputError);
}

} // namespace
} // namespace tessel
