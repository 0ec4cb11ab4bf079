// Launch planning for the CUDA kernels: grid/block/tile and shared-memory choices as pure host functions,
// so every choice is unit-tested without a GPU (the kernels take these plans as they are).
#pragma once

#include <cstdint>

namespace tessel::exec::cuda {

// CUDA limits the kernels are planned against (H100/H200, sm_90).
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridZ = 65535;
constexpr int64_t kDefaultSharedBytes = 48 * 1024;   // dynamic shared memory without an opt-in attribute

// Grid-stride element-wise kernels: `blocks` blocks of `threads`, each thread looping over elements.
struct ElementwiseLaunch {
    int64_t blocks = 1;
    int threads = 256;
};
// n elements on a device with `multiprocessors` SMs: enough blocks to fill it (32 per SM), none idle.
ElementwiseLaunch planElementwise(int64_t n, int multiprocessors);

// One block per row of a [rows, cols] tensor (norms, cross-entropy, softmax pieces): a power-of-two thread
// count from 32 to 1024, about four columns per thread, and shared memory for a block reduction of two
// floats per warp.
struct RowLaunch {
    int64_t blocks = 1;
    int threads = 32;
    int64_t sharedBytes = 0;
};
RowLaunch planRows(int64_t rows, int64_t cols);

// Deterministic column sums of [rows, cols] (bias and norm-parameter gradients): stage 1 sums fixed chunks
// of `rowsPerChunk` rows per column into partials [chunks, cols]; stage 2 adds the chunks in order. The
// order of every addition depends on the shape only, never on scheduling.
struct ColumnSumLaunch {
    int64_t rowsPerChunk = 256;
    int64_t chunks = 1;
    int threads = 256;             // one column per thread
    int64_t columnBlocks = 1;      // blocks along the columns
};
ColumnSumLaunch planColumnSum(int64_t rows, int64_t cols);

// Deterministic sum of n values (sum of squares for clipping): `blocks` partial sums of contiguous ranges,
// each reduced in a fixed tree, then one block adds the partials in order.
struct ReductionLaunch {
    int64_t blocks = 1;
    int threads = 256;
    int64_t elementsPerBlock = 0;
};
ReductionLaunch planReduction(int64_t n);

// Memory-efficient causal attention (FlashAttention-style tiles; only the log-sum-exp is kept). A head of
// `headDim` values is split over `threadsPerRow` threads; a block owns `rowsPerBlock` rows (queries in the
// forward and dq kernels, keys in the dk/dv kernel) and streams tiles of `tileRows` of the other side
// through shared memory (fp32). Supported head dims: 16, 32, 64, 128 (compile-time register tiles).
struct AttentionDims {
    int64_t sequences = 1, queries = 0, keys = 0, queryHeads = 1, kvHeads = 1, headDim = 0;
};
struct AttentionLaunch {
    int threadsPerRow = 4;
    int rowsPerBlock = 32;
    int tileRows = 32;
    int threads = 128;
    int64_t gridX = 1, gridY = 1, gridZ = 1;   // row blocks, heads, sequences
    int64_t sharedBytes = 0;
};
bool attentionHeadDimSupported(int64_t headDim);
// Forward and dq: blocks over (query tiles, query heads, sequences); tiles of keys and values (K, V: 2 tiles).
// dk/dv: blocks over (key tiles, kv heads, sequences); tiles of queries with dO, lse and D = rowsum(dO o).
// Throws tessel::RuntimeError naming the dimension when the shape cannot be launched.
AttentionLaunch planAttentionForward(const AttentionDims& dims);
AttentionLaunch planAttentionBackwardKeys(const AttentionDims& dims);
AttentionLaunch planAttentionBackwardQueries(const AttentionDims& dims);

// The GEMM attention path (attention_gemm.cu) holds the scores of `kvHeadsPerChunk` heads at a time, each
// [queries, keys] in fp32 plus the same in the element type (`elementBytes`), within kAttentionGemmWorkspaceBytes;
// at least one head, even when one head alone is larger.
// The rule is the cost model's (kernel_cost::scoreGemmKvHeadsPerChunk, which counts this path's launch steps);
// launch_plan.cpp holds the two constants equal.
constexpr int64_t kAttentionGemmWorkspaceBytes = 256 * 1024 * 1024;
struct AttentionGemmChunk {
    int64_t kvHeadsPerChunk = 1;
    int64_t bytesPerHead = 0;   // queries * keys * (4 + elementBytes)
};
AttentionGemmChunk planAttentionGemmChunk(const AttentionDims& dims, int64_t elementBytes);

// cuBLASLt workspace: 32 MiB (NVIDIA recommends at least 32 MiB on Hopper for the best kernels).
constexpr int64_t kGemmWorkspaceBytes = 32 * 1024 * 1024;

} // namespace tessel::exec::cuda
