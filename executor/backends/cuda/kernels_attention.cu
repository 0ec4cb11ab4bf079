// Memory-efficient causal GQA attention, forward and backward (FlashAttention-2, Dao 2023, alg. 1 and 2):
// tiles of keys (forward, dq) or queries (dk/dv) stream through shared memory, the softmax is computed
// online and only the log-sum-exp is kept, so memory grows with s, not s^2. A row's head vector is split
// over 4 threads with dims interleaved (thread p owns dims c * 4 + p), so a warp's shared-memory reads of
// one tile row hit 4 consecutive words. Deterministic: dq and dk/dv come from separate kernels, every output
// element summed by one thread in key or query order; no atomics. Fully masked tiles are skipped.
#include "cuda_common.cuh"

#include "tessel/cost/errors.hpp"
#include "tessel/exec/score_rule.hpp"

#include <climits>
#include <string>

namespace tessel::exec::cuda {

namespace {

constexpr int kThreadsPerRow = 4;
constexpr int kRows = 32;
constexpr int kTile = 32;
constexpr int kThreads = kRows * kThreadsPerRow;

// Sum over the 4 threads of a row (lanes 4r .. 4r + 3 of a warp).
__device__ __forceinline__ float rowSum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return v;
}

// kTile rows of head `head` of a [tokens, heads, D] tensor, tokens [first, first + kTile) below `limit`,
// into shared memory as fp32 (rows past the limit: zeros).
template <int D, typename T>
__device__ void loadTile(const T* base, int64_t first, int64_t limit, int64_t heads, int64_t head, float* dst) {
    for (int idx = static_cast<int>(threadIdx.x); idx < kTile * D; idx += static_cast<int>(blockDim.x)) {
        const int j = idx / D, c = idx % D;
        const int64_t row = first + j;
        dst[idx] = row < limit ? ld(base, (row * heads + head) * D + c) : 0.0f;
    }
}

// Largest position among the block's queries (rows past the end left out), for skipping masked tiles.
__device__ long long blockMaxQueryPosition(const AttentionArgs& a) {
    long long m = LLONG_MIN;
    for (int r = 0; r < kRows; ++r) {
        const int64_t i = static_cast<int64_t>(blockIdx.x) * kRows + r;
        if (i < a.dims.queries) m = max(m, static_cast<long long>(a.queryPositions[i]));
    }
    return m;
}

// The key/value tile starting at key kt of sequence s, kv head g, with the keys' positions (past the end:
// LLONG_MAX, never visible); returns the smallest position of the tile. Ends with a block barrier.
template <int D, typename T>
__device__ long long loadKeyValueTile(const T* k, const T* v, const AttentionArgs& a, int64_t s, int64_t g, int64_t kt,
                                      float* sK, float* sV, long long* sPos) {
    const AttentionDims& d = a.dims;
    loadTile<D>(k, s * d.keys + kt, s * d.keys + d.keys, d.kvHeads, g, sK);
    loadTile<D>(v, s * d.keys + kt, s * d.keys + d.keys, d.kvHeads, g, sV);
    for (int j = static_cast<int>(threadIdx.x); j < kTile; j += static_cast<int>(blockDim.x))
        sPos[j] = kt + j < d.keys ? static_cast<long long>(a.keyPositions[kt + j]) : LLONG_MAX;
    __syncthreads();
    long long tileMin = LLONG_MAX;
    for (int j = 0; j < kTile; ++j) tileMin = min(tileMin, sPos[j]);
    return tileMin;
}

// ALiBi's slope of the call's head h (score_rule.hpp; 0 without ALiBi).
__device__ __forceinline__ float headSlope(const AttentionArgs& a, int64_t h) {
    return a.alibiHeads > 0 ? static_cast<float>(alibiSlope(a.headOffset + h, a.alibiHeads)) : 0.0f;
}

// Attention dropout's factor on P_ij of the call's sequence s and head h (score_rule.hpp): 1 without dropout.
__device__ __forceinline__ float dropFactor(const AttentionArgs& a, int64_t s, long long qpos, long long kpos, int64_t h) {
    if (!a.dropout.active()) return 1.0f;
    return dropoutKeeps(a.dropout, a.firstSequence + s, qpos, kpos, a.headOffset + h)
               ? static_cast<float>(1.0 / (1.0 - a.dropout.p))
               : 0.0f;
}

// The same factors for one query walking its keys in order: the draw of the last group of four key positions is kept,
// so consecutive keys take one Philox draw per four (dropout.hpp).
struct QueryDropout {
    DropoutWalk walk;
    __device__ __forceinline__ float factor(const AttentionArgs& a, int64_t s, long long qpos, long long kpos, int64_t h) {
        if (!a.dropout.active()) return 1.0f;
        return walk.keeps(a.dropout, a.firstSequence + s, qpos, kpos, a.headOffset + h)
                   ? static_cast<float>(1.0 / (1.0 - a.dropout.p))
                   : 0.0f;
    }
};

// A soft-capped score, cap tanh(s / cap) (Gemma 2), and its slope 1 - tanh^2; s and 1 where cap is 0.
__device__ __forceinline__ float cappedScore(float s, float cap) { return cap > 0.0f ? cap * tanhf(s / cap) : s; }
__device__ __forceinline__ float capSlope(float capped, float cap) {
    if (cap <= 0.0f) return 1.0f;
    const float t = capped / cap;
    return 1.0f - t * t;
}

template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(const T* q, const T* k, const T* v, T* o, float* lseF, T* lse, AttentionArgs a) {
    constexpr int P = D / kThreadsPerRow;
    extern __shared__ float smem[];
    float* sK = smem;
    float* sV = smem + kTile * D;
    auto* sPos = reinterpret_cast<long long*>(sV + kTile * D);
    __shared__ long long sMaxQ;
    const AttentionDims& d = a.dims;
    const int64_t s = blockIdx.z, h = blockIdx.y, g = h / (d.queryHeads / d.kvHeads);
    const int row = static_cast<int>(threadIdx.x) / kThreadsPerRow, part = static_cast<int>(threadIdx.x) % kThreadsPerRow;
    const int64_t qi = static_cast<int64_t>(blockIdx.x) * kRows + row;
    const bool valid = qi < d.queries;
    const long long qpos = valid ? a.queryPositions[qi] : LLONG_MIN;
    const int64_t qoff = ((s * d.queries + qi) * d.queryHeads + h) * D;
    const float slope = headSlope(a, h);
    float qr[P], acc[P];
#pragma unroll
    for (int c = 0; c < P; ++c) {
        qr[c] = valid ? ld(q, qoff + c * kThreadsPerRow + part) : 0.0f;
        acc[c] = 0.0f;
    }
    if (threadIdx.x == 0) sMaxQ = blockMaxQueryPosition(a);
    QueryDropout drop;
    float m = -INFINITY, l = 0.0f;
    for (int64_t kt = 0; kt < d.keys; kt += kTile) {
        __syncthreads();
        const long long tileMin = loadKeyValueTile<D>(k, v, a, s, g, kt, sK, sV, sPos);
        if (tileMin > sMaxQ) continue;   // every key of the tile is in every query's future (uniform branch)
        // S_j = q . k_j / sqrt(d) for visible keys (Vaswani et al. 2017, eq. 1), soft-capped, plus ALiBi's bias
        float sc[kTile];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < kTile; ++j) {
            float dot = 0.0f;
#pragma unroll
            for (int c = 0; c < P; ++c) dot += qr[c] * sK[j * D + c * kThreadsPerRow + part];
            dot = rowSum(dot);
            sc[j] = keyVisible(a.window, sPos[j], qpos)
                        ? cappedScore(dot * a.scale, a.softcap) + slope * static_cast<float>(sPos[j] - qpos)
                        : -INFINITY;
            tmax = fmaxf(tmax, sc[j]);
        }
        if (tmax != -INFINITY) {
            // online softmax (FlashAttention-2 alg. 1 lines 8-10): rescale by exp(m_old - m_new)
            const float mNew = fmaxf(m, tmax);
            const float corr = expf(m - mNew);
            l *= corr;
#pragma unroll
            for (int c = 0; c < P; ++c) acc[c] *= corr;
#pragma unroll
            for (int j = 0; j < kTile; ++j) {
                const float p = expf(sc[j] - mNew);
                l += p;   // the normaliser of the undropped probabilities
                const float pd = p == 0.0f ? 0.0f : p * drop.factor(a, s, qpos, sPos[j], h);
#pragma unroll
                for (int c = 0; c < P; ++c) acc[c] += pd * sV[j * D + c * kThreadsPerRow + part];
            }
            m = mNew;
        }
    }
    if (valid) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
        for (int c = 0; c < P; ++c) st(o, qoff + c * kThreadsPerRow + part, acc[c] * inv);
        if (part == 0) {
            const int64_t at = (s * d.queries + qi) * d.queryHeads + h;
            const float value = m + logf(l);   // lse = max + log(sum exp(S - max))
            lseF[at] = value;
            if (lse) st(lse, at, value);
        }
    }
}

// D_i = rowsum(dO_i * O_i) (FlashAttention-2 alg. 2 line 4), one (token, head) per thread, fp32.
template <typename T>
__global__ void attentionDeltaKernel(const T* dout, const T* o, int64_t rows, int64_t dim, float* delta) {
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
         r += static_cast<int64_t>(blockDim.x) * gridDim.x) {
        float s = 0.0f;
        for (int64_t c = 0; c < dim; ++c) s += ld(dout, r * dim + c) * ld(o, r * dim + c);
        delta[r] = s;
    }
}

// dK, dV for a tile of keys of one kv head: loops over the query heads of its group and over query tiles.
template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
    attentionBackwardKeysKernel(const T* dout, const T* q, const T* k, const T* v, const float* lseF,
                                const float* delta, T* dk, T* dv, AttentionArgs a) {
    constexpr int P = D / kThreadsPerRow;
    extern __shared__ float smem[];
    float* sQ = smem;
    float* sdO = smem + kTile * D;
    float* sLse = sdO + kTile * D;
    float* sDelta = sLse + kTile;
    auto* sPos = reinterpret_cast<long long*>(sDelta + kTile);
    __shared__ long long sMinK;
    const AttentionDims& d = a.dims;
    const int64_t group = d.queryHeads / d.kvHeads;
    const int64_t s = blockIdx.z, g = blockIdx.y;
    const int row = static_cast<int>(threadIdx.x) / kThreadsPerRow, part = static_cast<int>(threadIdx.x) % kThreadsPerRow;
    const int64_t kj = static_cast<int64_t>(blockIdx.x) * kRows + row;
    const bool valid = kj < d.keys;
    const long long kpos = valid ? a.keyPositions[kj] : LLONG_MAX;
    const int64_t koff = ((s * d.keys + kj) * d.kvHeads + g) * D;
    float kr[P], vr[P], dkAcc[P], dvAcc[P];
#pragma unroll
    for (int c = 0; c < P; ++c) {
        kr[c] = valid ? ld(k, koff + c * kThreadsPerRow + part) : 0.0f;
        vr[c] = valid ? ld(v, koff + c * kThreadsPerRow + part) : 0.0f;
        dkAcc[c] = 0.0f;
        dvAcc[c] = 0.0f;
    }
    if (threadIdx.x == 0) {
        long long mk = LLONG_MAX;
        for (int r = 0; r < kRows; ++r) {
            const int64_t j = static_cast<int64_t>(blockIdx.x) * kRows + r;
            if (j < d.keys) mk = min(mk, static_cast<long long>(a.keyPositions[j]));
        }
        sMinK = mk;
    }
    for (int64_t hh = 0; hh < group; ++hh) {
        const int64_t h = g * group + hh;
        const float slope = headSlope(a, h);
        for (int64_t qt = 0; qt < d.queries; qt += kTile) {
            __syncthreads();
            loadTile<D>(q, s * d.queries + qt, s * d.queries + d.queries, d.queryHeads, h, sQ);
            loadTile<D>(dout, s * d.queries + qt, s * d.queries + d.queries, d.queryHeads, h, sdO);
            for (int j = static_cast<int>(threadIdx.x); j < kTile; j += static_cast<int>(blockDim.x)) {
                const int64_t qrow = qt + j;
                const bool in = qrow < d.queries;
                const int64_t at = (s * d.queries + qrow) * d.queryHeads + h;
                sLse[j] = in ? lseF[at] : 0.0f;
                sDelta[j] = in ? delta[at] : 0.0f;
                sPos[j] = in ? static_cast<long long>(a.queryPositions[qrow]) : LLONG_MIN;
            }
            __syncthreads();
            long long tileMax = LLONG_MIN;
            for (int j = 0; j < kTile; ++j) tileMax = max(tileMax, sPos[j]);
            if (tileMax < sMinK) continue;   // no query of the tile sees any key of the block
#pragma unroll 4
            for (int i = 0; i < kTile; ++i) {
                float dqk = 0.0f, ddv = 0.0f;
#pragma unroll
                for (int c = 0; c < P; ++c) {
                    dqk += kr[c] * sQ[i * D + c * kThreadsPerRow + part];
                    ddv += vr[c] * sdO[i * D + c * kThreadsPerRow + part];
                }
                dqk = rowSum(dqk);
                ddv = rowSum(ddv);
                // P = exp(S - lse); dV += P^T dO; dP = dO V^T; dS = P (dP - D); dK += dS^T Q (alg. 2 lines 11-16);
                // ALiBi's bias, a constant, only moves P
                const float sc = cappedScore(dqk * a.scale, a.softcap);
                const float p = keyVisible(a.window, kpos, sPos[i])
                                    ? expf(sc + slope * static_cast<float>(kpos - sPos[i]) - sLse[i])
                                    : 0.0f;
                // dropout's factor z: dV += z P dO, dP = z dO V^T (D = rowsum(dO * O) already holds it)
                const float z = p == 0.0f ? 0.0f : dropFactor(a, s, sPos[i], kpos, h);
                const float ds = p * (z * ddv - sDelta[i]) * capSlope(sc, a.softcap);
#pragma unroll
                for (int c = 0; c < P; ++c) {
                    dvAcc[c] += z * p * sdO[i * D + c * kThreadsPerRow + part];
                    dkAcc[c] += ds * sQ[i * D + c * kThreadsPerRow + part];
                }
            }
        }
    }
    if (valid) {
#pragma unroll
        for (int c = 0; c < P; ++c) {
            const int64_t at = koff + c * kThreadsPerRow + part;
            st(dk, at, ld(dk, at) + dkAcc[c] * a.scale);
            st(dv, at, ld(dv, at) + dvAcc[c]);
        }
    }
}

// dQ for a tile of queries of one head: dQ_i = scale sum_j dS_ij K_j, over key tiles in order.
template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
    attentionBackwardQueriesKernel(const T* dout, const T* q, const T* k, const T* v, const float* lseF,
                                   const float* delta, T* dq, AttentionArgs a) {
    constexpr int P = D / kThreadsPerRow;
    extern __shared__ float smem[];
    float* sK = smem;
    float* sV = smem + kTile * D;
    auto* sPos = reinterpret_cast<long long*>(sV + kTile * D);
    __shared__ long long sMaxQ;
    const AttentionDims& d = a.dims;
    const int64_t s = blockIdx.z, h = blockIdx.y, g = h / (d.queryHeads / d.kvHeads);
    const int row = static_cast<int>(threadIdx.x) / kThreadsPerRow, part = static_cast<int>(threadIdx.x) % kThreadsPerRow;
    const int64_t qi = static_cast<int64_t>(blockIdx.x) * kRows + row;
    const bool valid = qi < d.queries;
    const long long qpos = valid ? a.queryPositions[qi] : LLONG_MIN;
    const int64_t at = (s * d.queries + qi) * d.queryHeads + h;
    const int64_t qoff = at * D;
    const float lseI = valid ? lseF[at] : 0.0f, deltaI = valid ? delta[at] : 0.0f;
    const float slope = headSlope(a, h);
    float qr[P], dor[P], dqAcc[P];
#pragma unroll
    for (int c = 0; c < P; ++c) {
        qr[c] = valid ? ld(q, qoff + c * kThreadsPerRow + part) : 0.0f;
        dor[c] = valid ? ld(dout, qoff + c * kThreadsPerRow + part) : 0.0f;
        dqAcc[c] = 0.0f;
    }
    if (threadIdx.x == 0) sMaxQ = blockMaxQueryPosition(a);
    QueryDropout drop;
    for (int64_t kt = 0; kt < d.keys; kt += kTile) {
        __syncthreads();
        const long long tileMin = loadKeyValueTile<D>(k, v, a, s, g, kt, sK, sV, sPos);
        if (tileMin > sMaxQ) continue;
#pragma unroll 4
        for (int j = 0; j < kTile; ++j) {
            float dqk = 0.0f, dpv = 0.0f;
#pragma unroll
            for (int c = 0; c < P; ++c) {
                dqk += qr[c] * sK[j * D + c * kThreadsPerRow + part];
                dpv += dor[c] * sV[j * D + c * kThreadsPerRow + part];
            }
            dqk = rowSum(dqk);
            dpv = rowSum(dpv);
            const float sc = cappedScore(dqk * a.scale, a.softcap);
            const float p =
                keyVisible(a.window, sPos[j], qpos) ? expf(sc + slope * static_cast<float>(sPos[j] - qpos) - lseI) : 0.0f;
            const float z = p == 0.0f ? 0.0f : drop.factor(a, s, qpos, sPos[j], h);
            const float ds = p * (z * dpv - deltaI) * capSlope(sc, a.softcap);
#pragma unroll
            for (int c = 0; c < P; ++c) dqAcc[c] += ds * sK[j * D + c * kThreadsPerRow + part];
        }
    }
    if (valid) {
#pragma unroll
        for (int c = 0; c < P; ++c) st(dq, qoff + c * kThreadsPerRow + part, dqAcc[c] * a.scale);
    }
}

template <typename F>
void withHeadDim(int64_t headDim, F&& f) {
    switch (headDim) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default: throw RuntimeError("cuda attention: head dim " + std::to_string(headDim) + " is not supported");
    }
}

dim3 gridOf(const AttentionLaunch& l) {
    return dim3(static_cast<unsigned>(l.gridX), static_cast<unsigned>(l.gridY), static_cast<unsigned>(l.gridZ));
}

} // namespace

void attentionForward(const KernelContext& k, DType t, const AttentionArgs& a, const void* q, const void* kk,
                      const void* v, void* o, float* lseF, void* lse) {
    if (a.dims.queries == 0) return;
    const AttentionLaunch l = planAttentionForward(a.dims);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        withHeadDim(a.dims.headDim, [&](auto dim) {
            constexpr int D = decltype(dim)::value;
            attentionForwardKernel<D, T><<<gridOf(l), l.threads, static_cast<size_t>(l.sharedBytes), k.stream>>>(
                static_cast<const T*>(q), static_cast<const T*>(kk), static_cast<const T*>(v), static_cast<T*>(o),
                lseF, static_cast<T*>(lse), a);
        });
    });
    checkLaunch("attentionForward");
}

void attentionBackward(const KernelContext& k, DType t, const AttentionArgs& a, const void* dout, const void* q,
                       const void* kk, const void* v, const void* o, const float* lseF, float* delta, void* dq,
                       void* dk, void* dv) {
    if (a.dims.queries == 0) return;
    const AttentionLaunch lk = planAttentionBackwardKeys(a.dims);
    const AttentionLaunch lq = planAttentionBackwardQueries(a.dims);
    const int64_t rows = a.dims.sequences * a.dims.queries * a.dims.queryHeads;
    const ElementwiseLaunch dl = planElementwise(rows, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        attentionDeltaKernel<T><<<static_cast<unsigned>(dl.blocks), dl.threads, 0, k.stream>>>(
            static_cast<const T*>(dout), static_cast<const T*>(o), rows, a.dims.headDim, delta);
        withHeadDim(a.dims.headDim, [&](auto dim) {
            constexpr int D = decltype(dim)::value;
            if (a.dims.keys > 0)
                attentionBackwardKeysKernel<D, T><<<gridOf(lk), lk.threads, static_cast<size_t>(lk.sharedBytes),
                                                    k.stream>>>(
                    static_cast<const T*>(dout), static_cast<const T*>(q), static_cast<const T*>(kk),
                    static_cast<const T*>(v), lseF, delta, static_cast<T*>(dk), static_cast<T*>(dv), a);
            attentionBackwardQueriesKernel<D, T><<<gridOf(lq), lq.threads, static_cast<size_t>(lq.sharedBytes),
                                                   k.stream>>>(
                static_cast<const T*>(dout), static_cast<const T*>(q), static_cast<const T*>(kk),
                static_cast<const T*>(v), lseF, delta, static_cast<T*>(dq), a);
        });
    });
    checkLaunch("attentionBackward");
}

} // namespace tessel::exec::cuda
