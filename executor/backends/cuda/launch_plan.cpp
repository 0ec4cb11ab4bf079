// Launch planning: the grid, block, tile and shared-memory choices of every CUDA kernel, as pure functions.
#include "launch_plan.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <string>

namespace tessel::exec::cuda {

static_assert(kAttentionGemmWorkspaceBytes == kernel_cost::kScoreGemmWorkspaceBytes,
              "the GEMM attention's workspace is the cost model's, which counts its launch steps");

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void checkDims(const AttentionDims& d, const char* what) {
    auto fail = [&](const std::string& m) { throw RuntimeError(std::string("cuda ") + what + ": " + m); };
    if (d.sequences < 1) fail(std::to_string(d.sequences) + " sequences");
    if (d.queries < 0 || d.keys < 0) fail("negative query or key count");
    if (d.kvHeads < 1 || d.queryHeads < 1 || d.queryHeads % d.kvHeads != 0)
        fail(std::to_string(d.queryHeads) + " query heads are not a multiple of " + std::to_string(d.kvHeads) +
             " kv heads");
    if (!attentionHeadDimSupported(d.headDim))
        fail("head dim " + std::to_string(d.headDim) + " is not one the kernels are built for (16, 32, 64, 128)");
    if (d.sequences > kMaxGridZ) fail(std::to_string(d.sequences) + " sequences exceed the grid's z limit");
    if (d.queryHeads > kMaxGridY) fail(std::to_string(d.queryHeads) + " heads exceed the grid's y limit");
}

AttentionLaunch tiles(const AttentionDims& d) {
    AttentionLaunch l;
    // 4 threads per row keep headDim / 4 <= 32 fp32 values per thread per register tile (q or k, and the
    // accumulator), so head dim 128 fits without spilling; 32 rows per block give 128 threads.
    l.threadsPerRow = 4;
    l.rowsPerBlock = 32;
    l.tileRows = 32;
    l.threads = l.threadsPerRow * l.rowsPerBlock;
    (void)d;
    return l;
}
} // namespace

ElementwiseLaunch planElementwise(int64_t n, int multiprocessors) {
    ElementwiseLaunch l;
    l.threads = 256;
    const int64_t needed = std::max<int64_t>(1, ceilDiv(std::max<int64_t>(n, 1), l.threads));
    l.blocks = std::min<int64_t>(needed, std::max(1, multiprocessors) * int64_t{32});
    return l;
}

RowLaunch planRows(int64_t rows, int64_t cols) {
    RowLaunch l;
    l.blocks = std::max<int64_t>(rows, 1);
    const int64_t want = std::max<int64_t>(ceilDiv(std::max<int64_t>(cols, 1), 4), 32);
    int threads = 32;
    while (threads < want && threads < 1024) threads *= 2;
    l.threads = threads;
    l.sharedBytes = static_cast<int64_t>(threads / 32) * 2 * 4;   // two floats per warp
    return l;
}

ColumnSumLaunch planColumnSum(int64_t rows, int64_t cols) {
    ColumnSumLaunch l;
    l.rowsPerChunk = 256;
    l.chunks = std::max<int64_t>(1, ceilDiv(std::max<int64_t>(rows, 0), l.rowsPerChunk));
    l.threads = 256;
    l.columnBlocks = std::max<int64_t>(1, ceilDiv(std::max<int64_t>(cols, 1), l.threads));
    if (l.chunks > kMaxGridY) {
        // Very tall inputs: larger chunks keep the grid's y dimension in range.
        l.rowsPerChunk = ceilDiv(rows, kMaxGridY);
        l.chunks = ceilDiv(rows, l.rowsPerChunk);
    }
    return l;
}

ReductionLaunch planReduction(int64_t n) {
    ReductionLaunch l;
    l.threads = 256;
    // At most 1024 partials (one block adds them in stage 2); at least 4 elements per thread per block.
    const int64_t minPerBlock = int64_t{l.threads} * 4;
    l.blocks = std::clamp<int64_t>(ceilDiv(std::max<int64_t>(n, 1), minPerBlock), 1, 1024);
    l.elementsPerBlock = ceilDiv(std::max<int64_t>(n, 1), l.blocks);
    return l;
}

bool attentionHeadDimSupported(int64_t headDim) {
    return headDim == 16 || headDim == 32 || headDim == 64 || headDim == 128;
}

AttentionLaunch planAttentionForward(const AttentionDims& d) {
    checkDims(d, "attentionForward");
    AttentionLaunch l = tiles(d);
    l.gridX = std::max<int64_t>(1, ceilDiv(d.queries, l.rowsPerBlock));
    l.gridY = d.queryHeads;
    l.gridZ = d.sequences;
    // K and V tiles in fp32 plus the tile's key positions (int64).
    l.sharedBytes = 2 * int64_t{l.tileRows} * d.headDim * 4 + int64_t{l.tileRows} * 8;
    return l;
}

AttentionLaunch planAttentionBackwardQueries(const AttentionDims& d) {
    checkDims(d, "attentionBackward");
    AttentionLaunch l = planAttentionForward(d);
    return l;
}

AttentionLaunch planAttentionBackwardKeys(const AttentionDims& d) {
    checkDims(d, "attentionBackward");
    AttentionLaunch l = tiles(d);
    l.gridX = std::max<int64_t>(1, ceilDiv(d.keys, l.rowsPerBlock));
    l.gridY = d.kvHeads;
    l.gridZ = d.sequences;
    // Q and dO tiles in fp32, lse and D (fp32) and the query positions (int64) of the tile.
    l.sharedBytes = 2 * int64_t{l.tileRows} * d.headDim * 4 + 2 * int64_t{l.tileRows} * 4 + int64_t{l.tileRows} * 8;
    return l;
}

AttentionGemmChunk planAttentionGemmChunk(const AttentionDims& dims, int64_t elementBytes) {
    AttentionGemmChunk c;
    c.bytesPerHead = kernel_cost::scoreGemmBytesPerHead(dims.queries, dims.keys, static_cast<int>(elementBytes));
    c.kvHeadsPerChunk = kernel_cost::scoreGemmKvHeadsPerChunk(dims.queries, dims.keys, dims.kvHeads,
                                                              static_cast<int>(elementBytes));
    return c;
}

} // namespace tessel::exec::cuda
