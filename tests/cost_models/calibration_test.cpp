// Calibration fits on synthetic measurements with known answers: the robust least squares, the GEMM table,
// kernel lines, collectives per tier, phase fits, and the cluster file round trip of every calibrated field.
#include "tessel/cost/calibration.hpp"
#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(CalibratedCluster, RoundTripsThroughJsonAndRejectsUnknownKernels) {
    ClusterConfig c = loadClusterRef("cpu-host", "test");
    c.gpu.kernels["norm_backward"] = KernelFit{2e-6, 3e9, 0.0};
    c.gpu.kernels["attention_forward"] = KernelFit{1e-6, 0.0, 5e9};
    c.gpu.phaseFits["backward"] = PhaseFit{1e-4, 1.3};
    c.intraNode.primitiveLatencySeconds[Primitive::AllReduce] = 4e-6;
    const ClusterConfig back = parseCluster(clusterToJson(c));
    EXPECT_EQ(back.gpu.kernels.at("norm_backward").bytesPerSecond, 3e9);
    EXPECT_EQ(back.gpu.kernels.at("attention_forward").flopsPerSecond, 5e9);
    EXPECT_EQ(back.gpu.phaseFit("backward").timeScale, 1.3);
    EXPECT_EQ(back.intraNode.latencyFor(Primitive::AllReduce), 4e-6);
    EXPECT_FALSE(back.gpu.overlapsCommunication); // cpu-host: one thread per rank
    nlohmann::json j = clusterToJson(c);
    j["gpu"]["kernels"]["norm_sideways"] = {{"overhead_seconds", 1e-6}};
    try {
        parseCluster(j);
        FAIL() << "an unknown kernel name must be refused";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/gpu/kernels/norm_sideways"), std::string::npos) << e.what();
    }
}

TEST(BenchSamples, ParseAndNameTheBadField) {
    const std::string text = "{\"kind\":\"microbenchmark\",\"kernel\":\"gemm\",\"median_seconds\":1e-5,\"flops\":1e6,"
                             "\"shape\":{\"m\":16,\"n\":16,\"k\":16}}\n"
                             "{\"kind\":\"other\"}\n"
                             "{\"kind\":\"microbenchmark\",\"kernel\":\"gemm\",\"median_seconds\":\"fast\"}\n";
    try {
        parseBenchSamples(text, "b.jsonl");
        FAIL() << "a non-numeric duration must be refused";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("b.jsonl:3#/median_seconds"), std::string::npos) << e.what();
    }
    const auto ok = parseBenchSamples(text.substr(0, text.rfind("{\"kind\":\"microbenchmark\"")), "b.jsonl");
    ASSERT_EQ(ok.size(), 1u);
    EXPECT_EQ(ok[0].shape.at("m"), 16);
}

} // namespace
} // namespace tessel
