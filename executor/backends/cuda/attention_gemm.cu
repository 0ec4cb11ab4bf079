// The CUDA backend's default attention: scores and products through cuBLASLt strided-batched GEMMs (tensor
// cores), softmax and gradient pieces in row kernels. Per sequence, per query head j of a GQA group, per chunk
// of kv heads g: S = scale Q_h K_g^T (fp32), P = exp(S - lse) (Vaswani et al. 2017 eq. 1; lse as
// FlashAttention-2, Dao 2023), O = P V; backward as FlashAttention-2 alg. 2 with the [sq, sk] blocks
// materialised: dV += P^T dO, dP = dO V^T, dS = P (dP - D), dQ = scale dS K, dK += scale dS^T Q.
//
// Row-major to column-major: cuBLASLt is column-major, and a row-major [r, c] matrix with leading dimension L
// is the column-major [c, r] matrix with the same L. Every GEMM below is written as the column-major product
// cuBLASLt computes, with the row-major meaning beside it.
//
// Determinism: no atomics; a fixed chunking and a cached algorithm per shape and alignment; split-K
// reductions are excluded through the preference's reduction-scheme mask (NONE) when cuBLASLt offers such an
// algorithm. cuBLAS documents bitwise-identical results run to run for the same toolkit, architecture and SM
// count; dV and dK add the query heads of a group in order j = 0, 1, ... (beta = 1).
#include "cuda_backend_impl.hpp"

#include "cuda_common.cuh"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

namespace tessel::exec::detail {

namespace {

using cuda::bf16;
using cuda::ld;
using cuda::st;

// Which keys a query sees: keyPositions[col] <= queryPositions[i].
__device__ __forceinline__ bool visible(const int64_t* qpos, const int64_t* kpos, int64_t i, int64_t col) {
    return kpos[col] <= qpos[i];
}

// Forward softmax of one row (b, i) of S [batch, sq, sk] per block: masked entries are -inf; per thread an
// online max and sum (FlashAttention-2 alg. 1 lines 8-10), combined with block reductions in a fixed order;
// lse = m + log l; P = exp(S - lse) in T (0 where masked). The row's query head is headBase + b * headStride.
template <typename T>
__global__ void softmaxRowsKernel(const float* S, T* P, int64_t sq, int64_t sk, const int64_t* qpos,
                                  const int64_t* kpos, int64_t tokenBase, int64_t hq, int64_t headBase,
                                  int64_t headStride, float* lseF, T* lse) {
    __shared__ float red[32];
    const int64_t r = blockIdx.x, b = r / sq, i = r % sq;
    const float* srow = S + r * sk;
    T* prow = P + r * sk;
    float m = -INFINITY, l = 0.0f;
    for (int64_t c = threadIdx.x; c < sk; c += blockDim.x) {
        if (!visible(qpos, kpos, i, c)) continue;
        const float x = srow[c];
        if (x > m) {
            l = l * expf(m - x) + 1.0f;   // expf(-inf) = 0 on the first visible key
            m = x;
        } else {
            l += expf(x - m);
        }
    }
    const float rowMax = cuda::blockMax(m, red);
    const float part = m == -INFINITY ? 0.0f : l * expf(m - rowMax);
    const float rowSum = cuda::blockSum(part, red);
    // No visible key: rowMax = -inf, rowSum = 0, lse = -inf (as the tiles kernel); P stays 0, no NaN.
    const float value = rowMax == -INFINITY ? -INFINITY : rowMax + logf(rowSum);
    for (int64_t c = threadIdx.x; c < sk; c += blockDim.x)
        st(prow, c, visible(qpos, kpos, i, c) ? expf(srow[c] - value) : 0.0f);
    if (threadIdx.x == 0) {
        const int64_t at = (tokenBase + i) * hq + headBase + b * headStride;
        lseF[at] = value;
        if (lse) st(lse, at, value);
    }
}

// Backward: P = exp(S - lse) from the saved fp32 lse (0 where masked), one row per block.
template <typename T>
__global__ void probabilitiesKernel(const float* S, T* P, int64_t sq, int64_t sk, const int64_t* qpos,
                                    const int64_t* kpos, int64_t tokenBase, int64_t hq, int64_t headBase,
                                    int64_t headStride, const float* lseF) {
    const int64_t r = blockIdx.x, b = r / sq, i = r % sq;
    const float lseI = lseF[(tokenBase + i) * hq + headBase + b * headStride];
    for (int64_t c = threadIdx.x; c < sk; c += blockDim.x)
        st(P + r * sk, c, visible(qpos, kpos, i, c) ? expf(S[r * sk + c] - lseI) : 0.0f);
}

// dS = P (dP - D_i) (FlashAttention-2 alg. 2 line 14), in place over P, one row per block.
template <typename T>
__global__ void scoreGradKernel(const float* dP, T* P, int64_t sq, int64_t sk, int64_t tokenBase, int64_t hq,
                                int64_t headBase, int64_t headStride, const float* delta) {
    const int64_t r = blockIdx.x, b = r / sq, i = r % sq;
    const float deltaI = delta[(tokenBase + i) * hq + headBase + b * headStride];
    for (int64_t c = threadIdx.x; c < sk; c += blockDim.x) {
        const int64_t at = r * sk + c;
        st(P, at, ld(P, at) * (dP[at] - deltaI));
    }
}

// D_r = rowsum(dO_r * O_r) (FlashAttention-2 alg. 2 line 4) for rows r of [rows, dim]: a warp per row, the
// lanes' partial sums added in a fixed shuffle tree.
template <typename T>
__global__ void deltaKernel(const T* dout, const T* o, int64_t rows, int64_t dim, float* delta) {
    const int64_t warpsPerBlock = blockDim.x / 32;
    const int lane = static_cast<int>(threadIdx.x % 32);
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * warpsPerBlock + threadIdx.x / 32; r < rows;
         r += static_cast<int64_t>(gridDim.x) * warpsPerBlock) {
        float s = 0.0f;
        for (int64_t c = lane; c < dim; c += 32) s += ld(dout, r * dim + c) * ld(o, r * dim + c);
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) delta[r] = s;
    }
}

// Largest power of two (<= 256) dividing the address of every batch: p + b * strideBytes.
int64_t alignmentOf(const void* p, int64_t strideBytes) {
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)) | static_cast<uint64_t>(strideBytes) |
                      uint64_t{256};
    return static_cast<int64_t>(bits & (~bits + 1));
}

cudaDataType_t ltType(DType t) { return t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF; }

template <typename T>
const T* at(const void* p, int64_t elements) {
    return static_cast<const T*>(p) + elements;
}

} // namespace

struct CudaBackend::BatchedGemm {
    bool transA = false, transB = false;
    int64_t m = 0, n = 0, k = 0, batch = 1;
    const void* a = nullptr;
    int64_t lda = 0, sa = 0;
    const void* b = nullptr;
    int64_t ldb = 0, sb = 0;
    void* c = nullptr;
    int64_t ldc = 0, sc = 0;
    DType ab = DType::F32, ct = DType::F32;
    float alpha = 1.0f, beta = 0.0f;
};

const GemmPlan& CudaBackend::batchedPlan(const BatchedGemmKey& key) {
    auto it = batchedPlans_.find(key);
    if (it != batchedPlans_.end()) return it->second;
    const auto& v = key.v;
    const bool transA = v[0] != 0, transB = v[1] != 0;
    const int64_t m = v[2], n = v[3], k = v[4], batch = v[5];
    const cudaDataType_t ab = ltType(static_cast<DType>(v[12])), ct = ltType(static_cast<DType>(v[13]));
    GemmPlan p;
    // fp32 accumulation and scale; fp32 inputs keep full fp32 products (no TF32), as cuda_backend_gemm.cu.
    checkLt(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "attention cublasLtMatmulDescCreate");
    const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA), "attention TRANSA");
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB), "attention TRANSB");
    auto layout = [&](cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ldim,
                      int64_t stride, const char* what) {
        checkLt(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ldim),
                std::string("attention layout of ") + what);
        const int32_t count = static_cast<int32_t>(batch);
        checkLt(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                std::string("attention batch count of ") + what);
        checkLt(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof stride),
                std::string("attention batch stride of ") + what);
    };
    layout(&p.a, ab, transA ? k : m, transA ? m : k, v[6], v[9], "a");
    layout(&p.b, ab, transB ? n : k, transB ? k : n, v[7], v[10], "b");
    layout(&p.c, ct, m, n, v[8], v[11], "c");
    const uint64_t ws = static_cast<uint64_t>(cuda::kGemmWorkspaceBytes);
    const uint32_t alignA = static_cast<uint32_t>(v[14]), alignB = static_cast<uint32_t>(v[15]),
                   alignC = static_cast<uint32_t>(v[16]);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    // The best algorithm for the actual alignments; without split-K reductions when `noSplitK`.
    auto heuristic = [&](bool noSplitK) {
        cublasLtMatmulPreference_t pref = nullptr;
        checkLt(cublasLtMatmulPreferenceCreate(&pref), "attention cublasLtMatmulPreferenceCreate");
        auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t bytes, const char* what) {
            const cublasStatus_t e = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, bytes);
            if (e != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);
            checkLt(e, std::string("attention preference: ") + what);
        };
        set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws, "workspace");
        set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof alignA, "alignment of a");
        set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof alignB, "alignment of b");
        set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof alignC, "alignment of c");
        set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC, sizeof alignC, "alignment of d");
        if (noSplitK) {
            const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
            set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask, "reduction scheme");
        }
        st = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        if (st != CUBLAS_STATUS_SUCCESS) found = 0;
    };
    heuristic(true);
    // None without split-K: any algorithm (cuBLAS's reproducibility statement still holds; the order of the
    // split-K reduction is then its own).
    if (found == 0) heuristic(false);
    if (found == 0) {
        cublasLtMatrixLayoutDestroy(p.a);
        cublasLtMatrixLayoutDestroy(p.b);
        cublasLtMatrixLayoutDestroy(p.c);
        cublasLtMatmulDescDestroy(p.desc);
        throw DeviceError("cuda backend attention: cuBLASLt has no algorithm for a batch of " +
                          std::to_string(batch) + " GEMMs m " + std::to_string(m) + ", n " + std::to_string(n) +
                          ", k " + std::to_string(k) + " (status " + std::to_string(static_cast<int>(st)) + ")");
    }
    p.algo = result.algo;
    return batchedPlans_.emplace(key, p).first->second;
}

void CudaBackend::batchedGemm(const BatchedGemm& g) {
    const int64_t abBytes = cuda::dtypeBytes(g.ab), cBytes = cuda::dtypeBytes(g.ct);
    BatchedGemmKey key;
    key.v = {g.transA ? 1 : 0, g.transB ? 1 : 0, g.m, g.n, g.k, g.batch, g.lda, g.ldb, g.ldc, g.sa, g.sb, g.sc,
             static_cast<int64_t>(g.ab), static_cast<int64_t>(g.ct), alignmentOf(g.a, g.sa * abBytes),
             alignmentOf(g.b, g.sb * abBytes), alignmentOf(g.c, g.sc * cBytes)};
    const GemmPlan& plan = batchedPlan(key);
    checkLt(cublasLtMatmul(lt_, plan.desc, &g.alpha, g.a, plan.a, g.b, plan.b, &g.beta, g.c, plan.c, g.c, plan.c,
                           &plan.algo, workspace_, static_cast<size_t>(cuda::kGemmWorkspaceBytes), stream_),
            "attention cublasLtMatmul m " + std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " +
                std::to_string(g.k) + ", batch " + std::to_string(g.batch));
}

// Row-major tensors: q/o/dO/dq [S sq, hq, D] (leading dim Lq = hq D), k/v/dk/dv [S sk, hkv, D] (Lk = hkv D);
// the workspace holds [cg, sq, sk] for one (sequence s, group member j, kv heads [g0, g0 + cg)) step.
void CudaBackend::attentionGemmForward(DType t, const cuda::AttentionArgs& a, const void* q, const void* k,
                                       const void* v, void* o, float* lseF, void* lse) {
    const cuda::AttentionDims& d = a.dims;
    if (d.queries == 0 || d.sequences == 0) return;
    if (d.keys == 0) throw DeviceError("cuda backend attention: queries without keys");
    const int64_t group = d.queryHeads / d.kvHeads, D = d.headDim, sq = d.queries, sk = d.keys;
    const int64_t Lq = d.queryHeads * D, Lk = d.kvHeads * D, eb = cuda::dtypeBytes(t);
    const cuda::AttentionGemmChunk chunk = cuda::planAttentionGemmChunk(d, eb);
    Scratch scores(allocator_, chunk.kvHeadsPerChunk * sq * sk * 4);
    Scratch probs(allocator_, chunk.kvHeadsPerChunk * sq * sk * eb);
    const cuda::RowLaunch rl = cuda::planRows(1, sk);
    for (int64_t s = 0; s < d.sequences; ++s)
        for (int64_t j = 0; j < group; ++j)
            for (int64_t g0 = 0; g0 < d.kvHeads; g0 += chunk.kvHeadsPerChunk) {
                const int64_t cg = std::min(chunk.kvHeadsPerChunk, d.kvHeads - g0);
                const int64_t qOff = (s * sq * d.queryHeads + g0 * group + j) * D;   // query head g0 group + j
                const int64_t kOff = (s * sk * d.kvHeads + g0) * D;                  // kv head g0
                // S_b = scale Q_h K_g^T, row-major [sq, sk] (ld sk) = column-major S^T [sk, sq]
                //     = op(A) op(B) with A = K_g stored column-major [D, sk] (ld Lk), transposed, and
                //       B = Q_h stored column-major [D, sq] (ld Lq); m = sk, n = sq, k = D.
                BatchedGemm g1;
                g1.transA = true;
                g1.m = sk, g1.n = sq, g1.k = D, g1.batch = cg;
                g1.a = at<char>(k, kOff * eb), g1.lda = Lk, g1.sa = D;
                g1.b = at<char>(q, qOff * eb), g1.ldb = Lq, g1.sb = group * D;
                g1.c = scores.as<void>(), g1.ldc = sk, g1.sc = sq * sk;
                g1.ab = t, g1.ct = DType::F32, g1.alpha = a.scale, g1.beta = 0.0f;
                batchedGemm(g1);
                cuda::withType(t, [&](auto tag) {
                    using T = decltype(tag);
                    softmaxRowsKernel<T><<<cuda::gridOf(cg * sq), rl.threads, 0, stream_>>>(
                        scores.as<float>(), probs.as<T>(), sq, sk, a.queryPositions, a.keyPositions, s * sq,
                        d.queryHeads, g0 * group + j, group, lseF, static_cast<T*>(lse));
                });
                cuda::checkLaunch("attention softmax rows");
                // O_h = P V_g, row-major [sq, D] (ld Lq) = column-major O^T [D, sq]
                //     = A B with A = V_g stored column-major [D, sk] (ld Lk) and B = P stored column-major
                //       [sk, sq] (ld sk); m = D, n = sq, k = sk.
                BatchedGemm g2;
                g2.m = D, g2.n = sq, g2.k = sk, g2.batch = cg;
                g2.a = at<char>(v, kOff * eb), g2.lda = Lk, g2.sa = D;
                g2.b = probs.as<void>(), g2.ldb = sk, g2.sb = sq * sk;
                g2.c = static_cast<char*>(o) + qOff * eb, g2.ldc = Lq, g2.sc = group * D;
                g2.ab = t, g2.ct = t, g2.alpha = 1.0f, g2.beta = 0.0f;
                batchedGemm(g2);
            }
}

void CudaBackend::attentionGemmBackward(DType t, const cuda::AttentionArgs& a, const void* dout, const void* q,
                                        const void* k, const void* v, const void* o, const float* lseF,
                                        float* delta, void* dq, void* dk, void* dv) {
    const cuda::AttentionDims& d = a.dims;
    if (d.queries == 0 || d.sequences == 0) return;
    const int64_t group = d.queryHeads / d.kvHeads, D = d.headDim, sq = d.queries, sk = d.keys;
    const int64_t Lq = d.queryHeads * D, Lk = d.kvHeads * D, eb = cuda::dtypeBytes(t);
    if (sk == 0) {   // no keys: dq = 0, dk and dv hold no rows
        cuda::fill(kc_, t, dq, d.sequences * sq * Lq, 0.0f);
        return;
    }
    const int64_t rows = d.sequences * sq * d.queryHeads;
    cuda::withType(t, [&](auto tag) {
        using T = decltype(tag);
        const int64_t blocks = std::min<int64_t>((rows + 7) / 8, int64_t{kc_.multiprocessors} * 32);
        deltaKernel<T><<<cuda::gridOf(blocks), 256, 0, stream_>>>(static_cast<const T*>(dout),
                                                                  static_cast<const T*>(o), rows, D, delta);
    });
    cuda::checkLaunch("attention delta");
    const cuda::AttentionGemmChunk chunk = cuda::planAttentionGemmChunk(d, eb);
    Scratch scores(allocator_, chunk.kvHeadsPerChunk * sq * sk * 4);   // S, then dP
    Scratch probs(allocator_, chunk.kvHeadsPerChunk * sq * sk * eb);   // P, then dS
    const cuda::RowLaunch rl = cuda::planRows(1, sk);
    for (int64_t s = 0; s < d.sequences; ++s)
        for (int64_t j = 0; j < group; ++j)
            for (int64_t g0 = 0; g0 < d.kvHeads; g0 += chunk.kvHeadsPerChunk) {
                const int64_t cg = std::min(chunk.kvHeadsPerChunk, d.kvHeads - g0);
                const int64_t qOff = (s * sq * d.queryHeads + g0 * group + j) * D;
                const int64_t kOff = (s * sk * d.kvHeads + g0) * D;
                const void* qh = at<char>(q, qOff * eb);
                const void* doh = at<char>(dout, qOff * eb);
                const void* kg = at<char>(k, kOff * eb);
                const void* vg = at<char>(v, kOff * eb);
                // Scores as the forward (column-major S^T [sk, sq] = K_g^T-op times Q_h); then P.
                auto scoresOf = [&](const void* keysLike, const void* queriesLike, float alpha) {
                    BatchedGemm g;
                    g.transA = true;
                    g.m = sk, g.n = sq, g.k = D, g.batch = cg;
                    g.a = keysLike, g.lda = Lk, g.sa = D;
                    g.b = queriesLike, g.ldb = Lq, g.sb = group * D;
                    g.c = scores.as<void>(), g.ldc = sk, g.sc = sq * sk;
                    g.ab = t, g.ct = DType::F32, g.alpha = alpha, g.beta = 0.0f;
                    batchedGemm(g);
                };
                // Key-side gradient += alpha X^T Y: row-major [sk, D] (ld Lk) = column-major [D, sk]
                //     = A op(B) with A = Y_h stored column-major [D, sq] (ld Lq) and B = X stored column-major
                //       [sk, sq] (ld sk), transposed to [sq, sk]; m = D, n = sk, k = sq; beta = 1.
                auto keysGrad = [&](const void* queriesLike, void* out, float alpha) {
                    BatchedGemm g;
                    g.transB = true;
                    g.m = D, g.n = sk, g.k = sq, g.batch = cg;
                    g.a = queriesLike, g.lda = Lq, g.sa = group * D;
                    g.b = probs.as<void>(), g.ldb = sk, g.sb = sq * sk;
                    g.c = static_cast<char*>(out) + kOff * eb, g.ldc = Lk, g.sc = D;
                    g.ab = t, g.ct = t, g.alpha = alpha, g.beta = 1.0f;
                    batchedGemm(g);
                };
                scoresOf(kg, qh, a.scale);   // S = scale Q_h K_g^T
                cuda::withType(t, [&](auto tag) {
                    using T = decltype(tag);
                    probabilitiesKernel<T><<<cuda::gridOf(cg * sq), rl.threads, 0, stream_>>>(
                        scores.as<float>(), probs.as<T>(), sq, sk, a.queryPositions, a.keyPositions, s * sq,
                        d.queryHeads, g0 * group + j, group, lseF);
                });
                cuda::checkLaunch("attention probabilities");
                keysGrad(doh, dv, 1.0f);      // dV_g += P^T dO_h
                scoresOf(vg, doh, 1.0f);      // dP = dO_h V_g^T (fp32, over S)
                cuda::withType(t, [&](auto tag) {
                    using T = decltype(tag);
                    scoreGradKernel<T><<<cuda::gridOf(cg * sq), rl.threads, 0, stream_>>>(
                        scores.as<float>(), probs.as<T>(), sq, sk, s * sq, d.queryHeads, g0 * group + j, group,
                        delta);
                });
                cuda::checkLaunch("attention score gradient");
                // dQ_h = scale dS K_g, row-major [sq, D] (ld Lq) = column-major dQ^T [D, sq]
                //      = A B with A = K_g stored column-major [D, sk] (ld Lk) and B = dS stored column-major
                //        [sk, sq] (ld sk); m = D, n = sq, k = sk; beta = 0 (dq is overwritten, once per head).
                BatchedGemm gq;
                gq.m = D, gq.n = sq, gq.k = sk, gq.batch = cg;
                gq.a = kg, gq.lda = Lk, gq.sa = D;
                gq.b = probs.as<void>(), gq.ldb = sk, gq.sb = sq * sk;
                gq.c = static_cast<char*>(dq) + qOff * eb, gq.ldc = Lq, gq.sc = group * D;
                gq.ab = t, gq.ct = t, gq.alpha = a.scale, gq.beta = 0.0f;
                batchedGemm(gq);
                keysGrad(qh, dk, a.scale);    // dK_g += scale dS^T Q_h
            }
}

} // namespace tessel::exec::detail
