// Launch planning of the CUDA kernels: grids cover their work, thread counts and shared memory stay within
// the device's limits, and unsupported shapes are refused with the dimension named.
#include "launch_plan.hpp"

#include "tessel/cost/errors.hpp"

#include <gtest/gtest.h>

namespace tessel::exec::cuda {
namespace {

TEST(LaunchPlan, ElementwiseCoversEveryElementWithoutIdleBlocks) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{1} << 20, int64_t{3} << 30}) {
        const ElementwiseLaunch l = planElementwise(n, 132);
        EXPECT_GE(l.blocks, 1);
        EXPECT_LE(l.blocks, 132 * 32);
        // grid-stride: blocks * threads never exceeds what the elements need (beyond one block)
        EXPECT_LE((l.blocks - 1) * l.threads, std::max<int64_t>(n, 1)) << n;
    }
    EXPECT_EQ(planElementwise(1000, 132).blocks, 4);   // ceil(1000 / 256)
}

TEST(LaunchPlan, RowsUseAPowerOfTwoOfWarps) {
    for (int64_t cols : {1, 31, 64, 100, 768, 4096, 50304, 1 << 20}) {
        const RowLaunch l = planRows(7, cols);
        EXPECT_EQ(l.blocks, 7);
        EXPECT_GE(l.threads, 32);
        EXPECT_LE(l.threads, 1024);
        EXPECT_EQ(l.threads & (l.threads - 1), 0) << "not a power of two";
        EXPECT_EQ(l.sharedBytes, l.threads / 32 * 8);
    }
    EXPECT_EQ(planRows(1, 768).threads, 256);   // 768 / 4 = 192 -> 256
    EXPECT_EQ(planRows(1, 50304).threads, 1024);
}

TEST(LaunchPlan, ColumnSumChunksCoverEveryRowOnce) {
    for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{16384}, int64_t{1} << 26}) {
        const ColumnSumLaunch l = planColumnSum(rows, 768);
        EXPECT_GE(l.chunks * l.rowsPerChunk, rows);
        EXPECT_LT((l.chunks - 1) * l.rowsPerChunk, std::max<int64_t>(rows, 1));
        EXPECT_LE(l.chunks, kMaxGridY);
        EXPECT_EQ(l.columnBlocks, 3);   // 768 / 256
    }
}

TEST(LaunchPlan, ReductionPartialsCoverEveryElement) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1023}, int64_t{1024}, int64_t{1025}, int64_t{124} << 20}) {
        const ReductionLaunch l = planReduction(n);
        EXPECT_GE(l.blocks, 1);
        EXPECT_LE(l.blocks, 1024);
        EXPECT_GE(l.blocks * l.elementsPerBlock, n);
    }
}

// GPT-2 124M's attention at micro-batch 8: 8 sequences of 1024, 12 heads of 64.
AttentionDims gpt2Attention() {
    AttentionDims d;
    d.sequences = 8;
    d.queries = 1024;
    d.keys = 1024;
    d.queryHeads = 12;
    d.kvHeads = 12;
    d.headDim = 64;
    return d;
}

TEST(LaunchPlan, AttentionTilesAndSharedMemory) {
    AttentionDims d = gpt2Attention();
    const AttentionLaunch f = planAttentionForward(d);
    EXPECT_EQ(f.threads, f.rowsPerBlock * f.threadsPerRow);
    EXPECT_EQ(f.gridX, 32);   // 1024 / 32 queries per block
    EXPECT_EQ(f.gridY, 12);
    EXPECT_EQ(f.gridZ, 8);
    EXPECT_EQ(f.sharedBytes, 2 * 32 * 64 * 4 + 32 * 8);
    d.queryHeads = 32;
    d.kvHeads = 8;
    d.headDim = 128;   // Llama GQA
    const AttentionLaunch k = planAttentionBackwardKeys(d);
    EXPECT_EQ(k.gridY, 8);   // one block column per kv head
    EXPECT_EQ(k.gridX, 32);
    EXPECT_LE(k.sharedBytes, kDefaultSharedBytes);
    EXPECT_LE(planAttentionForward(d).sharedBytes, kDefaultSharedBytes);
    // Each thread holds headDim / threadsPerRow values per register tile: 32 at most.
    EXPECT_LE(d.headDim / k.threadsPerRow, 32);
}

TEST(LaunchPlan, AttentionRefusesShapesItCannotRun) {
    AttentionDims d;
    d.queries = 16;
    d.keys = 16;
    d.queryHeads = 4;
    d.kvHeads = 2;
    d.headDim = 80;
    try {
        planAttentionForward(d);
        FAIL() << "head dim 80 accepted";
    } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find("head dim 80"), std::string::npos) << e.what();
    }
    d.headDim = 64;
    d.kvHeads = 3;
    EXPECT_THROW(planAttentionBackwardKeys(d), RuntimeError);
    d.kvHeads = 2;
    d.sequences = 0;
    EXPECT_THROW(planAttentionBackwardQueries(d), RuntimeError);
    for (int64_t hd : {16, 32, 64, 128}) EXPECT_TRUE(attentionHeadDimSupported(hd));
    EXPECT_FALSE(attentionHeadDimSupported(96));
}

TEST(LaunchPlan, AttentionGemmChunksStayWithinTheWorkspaceButTakeAtLeastOneHead) {
    AttentionDims d = gpt2Attention();
    // gpt2-124m: 12 heads of 1024 x 1024 x (4 + 2) bytes = 72 MiB, all in one chunk
    AttentionGemmChunk c = planAttentionGemmChunk(d, 2);
    EXPECT_EQ(c.bytesPerHead, 1024 * 1024 * 6);
    EXPECT_EQ(c.kvHeadsPerChunk, 12);
    // 8192 x 8192 x 8 bytes = 512 MiB per head: still one head
    d.queries = d.keys = 8192;
    c = planAttentionGemmChunk(d, 4);
    EXPECT_EQ(c.kvHeadsPerChunk, 1);
    // 4096 x 4096 x 6 = 96 MiB per head: two heads fit in 256 MiB
    d.queries = d.keys = 4096;
    c = planAttentionGemmChunk(d, 2);
    EXPECT_EQ(c.kvHeadsPerChunk, 2);
    EXPECT_LE(c.kvHeadsPerChunk * c.bytesPerHead, kAttentionGemmWorkspaceBytes);
}

} // namespace
} // namespace tessel::exec::cuda
