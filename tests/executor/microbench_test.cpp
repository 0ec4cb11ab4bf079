// `tessel bench`'s measuring core: every kernel the cost model names gets points at the models' shapes (any head
// width), attention over three sequence lengths, sane statistics, and collectives over an in-process group.
#include "tessel/cost/compute.hpp"
#include "tessel/exec/cpu_backend.hpp"
#include "tessel/exec/inproc_comm.hpp"
#include "tessel/exec/microbench.hpp"

#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

namespace tessel::exec {
namespace {

BenchOptions fastOptions() {
    BenchOptions o;
    o.quick = true;
    o.warmup = 1;
    o.minSamples = 2;
    o.maxSamples = 3;
    o.minSecondsPerPoint = 1e-9;
    return o;
}

TEST(Microbench, EveryKernelAtTheModelsShapesWithSaneStatistics) {
    // A hidden width that is not a multiple of 64 (6 heads of 16): RoPE must rotate the model's heads.
    ModelConfig mid = loadModelRef("tiny", "test");
    mid.hidden = 96;
    mid.heads = 6;
    mid.kvHeads = 3;
    mid.ffnHidden = 384;
    mid.seqLen = 32;
    BenchOptions o = fastOptions();
    o.models = {mid};
    auto backend = makeCpuBackend(ElementType::F64);
    const std::vector<BenchPoint> points = runComputeBenchmarks(*backend, o);

    std::map<std::string, int> count;
    std::map<std::string, std::set<int64_t>> attentionSeq;
    for (const BenchPoint& p : points) {
        ++count[p.kernel];
        EXPECT_GE(p.samples, 2) << p.kernel;
        EXPECT_LE(p.minSeconds, p.p10Seconds) << p.kernel;
        EXPECT_LE(p.p10Seconds, p.medianSeconds) << p.kernel;
        EXPECT_LE(p.medianSeconds, p.p90Seconds) << p.kernel;
        EXPECT_LE(p.p90Seconds, p.maxSeconds) << p.kernel;
        EXPECT_GT(p.bytes, 0.0) << p.kernel;
        if (p.kernel == "gemm")
            EXPECT_EQ(p.flops, kernel_cost::gemmFlops(p.shape.at("m"), p.shape.at("n"), p.shape.at("k")));
        if (p.kernel.rfind("attention", 0) == 0) {
            EXPECT_GT(p.flops, 0.0);
            attentionSeq[p.kernel].insert(p.shape.at("seq"));
        }
    }
    // MoE token permutation and the unfused softmax are the kernels not timed: the executor routes tokens with row
    // copies and always runs fused attention, so there is no permute or softmax kernel to time; they stay on the
    // roofline and `tessel calibrate` lists them as uncalibrated (a PyTorch trace, `tessel import torch`, times softmax).
    for (const std::string& k : kernel_cost::kernelNames())
        if (k.rfind("permute", 0) != 0 && k.rfind("softmax", 0) != 0) EXPECT_GT(count[k], 0) << k << " was not measured";
    EXPECT_EQ(count["permute_forward"] + count["permute_backward"], 0);
    EXPECT_EQ(count["softmax_forward"] + count["softmax_backward"], 0);
    // Half, once and twice the model's sequence, so calibration can tell FLOPs (s^2) from bytes (s).
    for (const char* k : {"attention_forward", "attention_backward"})
        EXPECT_EQ(attentionSeq[k], (std::set<int64_t>{16, 32, 64})) << k;
    // The device copy at 1, 4 and 16 MiB (quick), counting each byte read and written: 2 x elements x 8 B.
    std::set<double> copyBytes;
    for (const BenchPoint& p : points)
        if (p.kernel == "copy_device_to_device") {
            EXPECT_EQ(p.bytes, 2.0 * 8.0 * static_cast<double>(p.shape.at("elements")));
            copyBytes.insert(p.bytes);
        }
    EXPECT_EQ(copyBytes, (std::set<double>{2.0 * (1 << 20), 2.0 * (4 << 20), 2.0 * (16 << 20)}));
    // The CPU backend has no host link to time: the host copies are CUDA's alone.
    EXPECT_EQ(count["copy_host_to_device"] + count["copy_device_to_host"], 0);
}

TEST(Microbench, CollectivesOverATwoRankGroup) {
    BenchOptions o = fastOptions();
    o.maxMessageBytes = 2048;
    auto world = makeInProcessWorld(2);
    std::vector<std::vector<BenchPoint>> out(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
            auto comm = makeInProcessComm(world, r);
            auto backend = makeCpuBackend(ElementType::F64);
            Group g;
            g.name = "world";
            g.ranks = {0, 1};
            g.myIndex = r;
            out[static_cast<size_t>(r)] = runCommBenchmarks(*backend, *comm, g, o);
        });
    for (auto& t : threads) t.join();
    // Both ranks ran the same calls: 8 B, 32 B, ..., 2 KiB for each of the 6 primitives.
    ASSERT_EQ(out[0].size(), out[1].size());
    std::map<std::string, std::vector<double>> sizes;
    for (const BenchPoint& p : out[0]) {
        EXPECT_EQ(p.groupSize, 2);
        EXPECT_EQ(p.samples, out[1][&p - out[0].data()].samples) << "ranks must agree on the sample count";
        sizes[p.kernel].push_back(p.bytes);
    }
    for (const char* k : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"}) {
        ASSERT_EQ(sizes[k].size(), 5u) << k;
        for (size_t i = 1; i < sizes[k].size(); ++i) EXPECT_GT(sizes[k][i], sizes[k][i - 1]) << k;
    }
}

} // namespace
} // namespace tessel::exec
