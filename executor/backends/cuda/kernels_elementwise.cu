// The CUDA backend's own kernels other than attention: copies, fills, bias, norms, activations, RoPE,
// embedding, cross-entropy pieces, AdamW and the sum of squares. Math in fp32 (fp64 for RoPE angles and the
// sum of squares); reductions deterministic.
#include "cuda_common.cuh"

#include "tessel/cost/errors.hpp"

#include <string>

namespace tessel::exec::cuda {

int dtypeBytes(DType t) { return t == DType::F32 ? 4 : 2; }

void checkLaunch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw DeviceError(std::string("cuda kernel ") + what + ": " + cudaGetErrorString(e));
}

namespace {

constexpr float kGeluScale = 0.7978845608028654f;   // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

#define TESSEL_GRID_STRIDE(i, n)                                                                             \
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                     \
         i += static_cast<int64_t>(blockDim.x) * gridDim.x)

template <typename S, typename D>
__global__ void copy2dKernel(const S* src, int64_t sStride, int64_t sOff, D* dst, int64_t dStride, int64_t dOff,
                             int64_t rows, int64_t width, float alpha, bool accumulate) {
    TESSEL_GRID_STRIDE(i, rows * width) {
        const int64_t r = i / width, j = i % width;
        const float v = alpha * ld(src, r * sStride + sOff + j);
        const int64_t di = r * dStride + dOff + j;
        st(dst, di, accumulate ? ld(dst, di) + v : v);
    }
}

template <typename T>
__global__ void fillKernel(T* p, int64_t n, float value) {
    TESSEL_GRID_STRIDE(i, n) st(p, i, value);
}

template <typename T>
__global__ void scaleKernel(T* p, int64_t n, float factor) {
    TESSEL_GRID_STRIDE(i, n) st(p, i, ld(p, i) * factor);
}

template <typename T, typename B>
__global__ void addBiasKernel(T* x, const B* bias, int64_t n, int64_t c) {
    TESSEL_GRID_STRIDE(i, n * c) st(x, i, ld(x, i) + ld(bias, i % c));
}

// Stage 1 of a column sum: partial[chunk, col] = sum of rows [chunk * rowsPerChunk, ...) in row order.
template <typename T>
__global__ void columnPartialsKernel(const T* a, int64_t n, int64_t c, int64_t rowsPerChunk, float* partial) {
    const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (col >= c) return;
    const int64_t r0 = chunk * rowsPerChunk, r1 = min(n, r0 + rowsPerChunk);
    float s = 0.0f;
    for (int64_t r = r0; r < r1; ++r) s += ld(a, r * c + col);
    partial[chunk * c + col] = s;
}

// Stage 2: out[col] += sum of the chunks in chunk order.
template <typename T>
__global__ void columnFinishKernel(const float* partial, int64_t chunks, int64_t c, T* out) {
    const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (col >= c) return;
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * c + col];
    st(out, col, ld(out, col) + s);
}

template <typename T>
__global__ void normForwardKernel(const T* x, const T* gamma, const T* beta, bool rms, float eps, int64_t c, T* y,
                                  T* mean, T* rstd, float* meanF, float* rstdF) {
    extern __shared__ float red[];
    const int64_t row = blockIdx.x;
    const T* xr = x + row * c;
    float mu = 0.0f, inv;
    if (rms) {
        // RMSNorm (Zhang & Sennrich 2019): rstd = 1 / sqrt(mean(x^2) + eps)
        float ss = 0.0f;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) { const float v = ld(xr, j); ss += v * v; }
        ss = blockSum(ss, red);
        inv = 1.0f / sqrtf(ss / static_cast<float>(c) + eps);
    } else {
        // LayerNorm (Ba et al. 2016), biased variance, two passes (mean first) for accuracy
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += ld(xr, j);
        mu = blockSum(s, red) / static_cast<float>(c);
        float var = 0.0f;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) { const float d = ld(xr, j) - mu; var += d * d; }
        var = blockSum(var, red);
        inv = 1.0f / sqrtf(var / static_cast<float>(c) + eps);
    }
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
        float v = (ld(xr, j) - mu) * inv * ld(gamma, j);
        if (beta) v += ld(beta, j);
        st(y, row * c + j, v);
    }
    if (threadIdx.x == 0) {
        if (mean) st(mean, row, mu);
        st(rstd, row, inv);
        meanF[row] = mu;
        rstdF[row] = inv;
    }
}

template <typename T>
__global__ void normBackwardKernel(const T* dy, const T* x, const T* gamma, const float* meanF, const float* rstdF,
                                   bool rms, int64_t c, T* dx) {
    extern __shared__ float red[];
    const int64_t row = blockIdx.x;
    const float mu = rms ? 0.0f : meanF[row], inv = rstdF[row];
    float sumD = 0.0f, sumDX = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
        const float xhat = (ld(x, row * c + j) - mu) * inv;
        const float dxhat = ld(dy, row * c + j) * ld(gamma, j);
        sumD += dxhat;
        sumDX += dxhat * xhat;
    }
    const float meanD = blockSum(sumD, red) / static_cast<float>(c);
    const float meanDX = blockSum(sumDX, red) / static_cast<float>(c);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
        const float xhat = (ld(x, row * c + j) - mu) * inv;
        const float dxhat = ld(dy, row * c + j) * ld(gamma, j);
        // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) (llm.c layernorm_backward); RMSNorm drops mean(dxhat)
        const float centred = rms ? dxhat : dxhat - meanD;
        st(dx, row * c + j, inv * (centred - xhat * meanDX));
    }
}

// partialG[chunk, col] = sum dy xhat; partialB[chunk, col] = sum dy, over the chunk's rows in order.
template <typename T>
__global__ void normParamPartialsKernel(const T* dy, const T* x, const float* meanF, const float* rstdF, bool rms,
                                        int64_t n, int64_t c, int64_t rowsPerChunk, float* partialG, float* partialB) {
    const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (col >= c) return;
    const int64_t r0 = chunk * rowsPerChunk, r1 = min(n, r0 + rowsPerChunk);
    float g = 0.0f, b = 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
        const float d = ld(dy, r * c + col);
        const float xhat = (ld(x, r * c + col) - (rms ? 0.0f : meanF[r])) * rstdF[r];
        g += d * xhat;
        b += d;
    }
    partialG[chunk * c + col] = g;
    partialB[chunk * c + col] = b;
}

__device__ __forceinline__ float sigmoidf(float g) { return 1.0f / (1.0f + expf(-g)); }

// The MLP's activations (pointwise.hpp): GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2): 0.5 x (1 +
// tanh(sqrt(2/pi) (x + 0.044715 x^3))); SiLU, x sigmoid(x) (the gate of SwiGLU, Shazeer 2020); squared ReLU, max(0,
// x)^2 (Primer; Nemotron-4); and their derivatives (d silu(g)/dg = s (1 + g (1 - s)); d relu(g)^2/dg = 2 max(0, g)).
__device__ __forceinline__ float activationOf(float v, Pointwise f) {
    switch (f) {
    case Pointwise::Silu: return v * sigmoidf(v);
    case Pointwise::Gelu: return 0.5f * v * (1.0f + tanhf(kGeluScale * (v + kGeluCubic * v * v * v)));
    case Pointwise::SquaredRelu: return v > 0.0f ? v * v : 0.0f;
    }
    return 0.0f;
}
__device__ __forceinline__ float activationDerivativeOf(float v, Pointwise f) {
    switch (f) {
    case Pointwise::Silu: {
        const float s = sigmoidf(v);
        return s * (1.0f + v * (1.0f - s));
    }
    case Pointwise::Gelu: {
        const float t = tanhf(kGeluScale * (v + kGeluCubic * v * v * v));
        const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
        return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
    }
    case Pointwise::SquaredRelu: return v > 0.0f ? 2.0f * v : 0.0f;
    }
    return 0.0f;
}

template <typename T>
__global__ void activationForwardKernel(const T* x, T* y, int64_t n, Pointwise f) {
    TESSEL_GRID_STRIDE(i, n) { st(y, i, activationOf(ld(x, i), f)); }
}

template <typename T>
__global__ void activationBackwardKernel(const T* dy, const T* x, T* dx, int64_t n, Pointwise f) {
    TESSEL_GRID_STRIDE(i, n) { st(dx, i, ld(dy, i) * activationDerivativeOf(ld(x, i), f)); }
}

// A gated MLP's activation over x [n, 2f] = [gate | up]: act(gate) * up (SwiGLU with SiLU, GeGLU with GELU).
template <typename T>
__global__ void gluForwardKernel(const T* x, T* y, int64_t n, int64_t f, Pointwise act) {
    TESSEL_GRID_STRIDE(i, n * f) {
        const int64_t r = i / f, j = i % f;
        const float g = ld(x, r * 2 * f + j), u = ld(x, r * 2 * f + f + j);
        st(y, i, activationOf(g, act) * u);
    }
}

template <typename T>
__global__ void gluBackwardKernel(const T* dy, const T* x, T* dx, int64_t n, int64_t f, Pointwise act) {
    TESSEL_GRID_STRIDE(i, n * f) {
        const int64_t r = i / f, j = i % f;
        const float g = ld(x, r * 2 * f + j), u = ld(x, r * 2 * f + f + j), d = ld(dy, i);
        st(dx, r * 2 * f + j, d * u * activationDerivativeOf(g, act));   // dgate = dy up act'(g)
        st(dx, r * 2 * f + f + j, d * activationOf(g, act));             // dup = dy act(g)
    }
}

template <typename T>
__global__ void softcapKernel(T* x, int64_t n, float cap) {
    TESSEL_GRID_STRIDE(i, n) { st(x, i, cap * tanhf(ld(x, i) / cap)); }   // Gemma 2's soft-capping
}

template <typename T>
__global__ void softcapBackwardKernel(T* dy, const T* y, int64_t n, float cap) {
    TESSEL_GRID_STRIDE(i, n) {
        const float t = ld(y, i) / cap;   // tanh(x / cap) from the capped value
        st(dy, i, ld(dy, i) * (1.0f - t * t));
    }
}

// One thread per four neighbouring columns of a row: one Philox draw serves them (dropout.hpp).
template <typename T>
__global__ void dropoutKernel(T* x, const int64_t* sequences, const int64_t* positions, int64_t n, int64_t c,
                              DropoutRule rule) {
    const float kept = static_cast<float>(1.0 / (1.0 - rule.p));
    const int64_t groups = (c + 3) / 4;
    TESSEL_GRID_STRIDE(i, n * groups) {
        const int64_t r = i / groups, g = i % groups;
        const Philox4x32 draw = dropoutDraw(rule, sequences[r], positions[r], g);
        for (int64_t w = 0; w < 4 && 4 * g + w < c; ++w) {
            const int64_t at = r * c + 4 * g + w;
            st(x, at, dropoutKeepsWord(rule, draw.v[w]) ? ld(x, at) * kept : 0.0f);
        }
    }
}

template <typename T>
__global__ void ropeKernel(T* x, const int64_t* positions, const double* invFreq, int64_t tokens, int64_t heads,
                           int64_t d, int64_t rotated, bool inverse) {
    const int64_t half = rotated / 2;
    TESSEL_GRID_STRIDE(idx, tokens * heads * half) {
        const int64_t i = idx % half, th = idx / half, t = th / heads;
        // RoFormer (Su et al. 2021) eq. 15, rotate_half pairs (i, i + r/2) of the rotated width r; angle in fp64
        const double angle = static_cast<double>(positions[t]) * invFreq[i];
        double sn, cs;
        sincos(angle, &sn, &cs);
        if (inverse) sn = -sn;
        T* row = x + th * d;
        const double x1 = ld(row, i), x2 = ld(row, i + half);
        st(row, i, static_cast<float>(x1 * cs - x2 * sn));
        st(row, i + half, static_cast<float>(x2 * cs + x1 * sn));
    }
}

template <typename T>
__global__ void embeddingForwardKernel(const T* table, const int64_t* rows, int64_t n, int64_t h, T* out) {
    TESSEL_GRID_STRIDE(i, n * h) {
        const int64_t r = rows[i / h];
        st(out, i, r < 0 ? 0.0f : ld(table, r * h + i % h));
    }
}

template <typename T>
__global__ void embeddingBackwardKernel(const T* dout, const int64_t* uniqueRows, const int64_t* offsets,
                                        const int64_t* tokenIndex, int64_t uniqueCount, int64_t h, T* dtable) {
    TESSEL_GRID_STRIDE(i, uniqueCount * h) {
        const int64_t u = i / h, col = i % h;
        float s = 0.0f;
        for (int64_t k = offsets[u]; k < offsets[u + 1]; ++k) s += ld(dout, tokenIndex[k] * h + col);
        const int64_t at = uniqueRows[u] * h + col;
        st(dtable, at, ld(dtable, at) + s);
    }
}

template <typename T>
__global__ void rowMaxKernel(const T* logits, int64_t v, float* out) {
    extern __shared__ float red[];
    const int64_t row = blockIdx.x;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, ld(logits, row * v + j));
    m = blockMax(m, red);
    if (threadIdx.x == 0) out[row] = m;
}

template <typename T>
__global__ void rowSumExpKernel(const T* logits, const float* max, int64_t v, float* out) {
    extern __shared__ float red[];
    const int64_t row = blockIdx.x;
    const float m = max[row];
    float s = 0.0f;
    // sum_j exp(l_j - max) (Megatron-LM vocab_parallel_cross_entropy: sum_exp_logits)
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(ld(logits, row * v + j) - m);
    s = blockSum(s, red);
    if (threadIdx.x == 0) out[row] = s;
}

template <typename T>
__global__ void gatherColumnsKernel(const T* logits, const int64_t* cols, int64_t n, int64_t v, float* out) {
    TESSEL_GRID_STRIDE(r, n) out[r] = cols[r] < 0 ? 0.0f : ld(logits, r * v + cols[r]);
}

template <typename T>
__global__ void crossEntropyBackwardKernel(T* logits, const float* max, const float* sumExp, const int64_t* cols,
                                           int64_t v, float scale) {
    const int64_t row = blockIdx.x;
    const float m = max[row], inv = 1.0f / sumExp[row];
    const int64_t col = cols[row];
    // d/dl (log sum exp(l) - l_target) = softmax(l) - onehot(target); probabilities are never stored
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
        const float p = expf(ld(logits, row * v + j) - m) * inv;
        st(logits, row * v + j, scale * (p - (j == col ? 1.0f : 0.0f)));
    }
}

template <typename P, typename G, typename M>
__global__ void adamwKernel(P* param, const G* grad, M* m, M* v, float* master, int64_t n, AdamParams a) {
    TESSEL_GRID_STRIDE(i, n) {
        const float g = ld(grad, i);
        // PyTorch AdamW order: decoupled decay p *= 1 - lr wd (Loshchilov & Hutter 2019, alg. 2), then
        // m, v (Kingma & Ba 2015, alg. 1), then p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
        float p = (master ? master[i] : ld(param, i)) * (1.0f - a.lr * a.weightDecay);
        const float mi = a.beta1 * ld(m, i) + (1.0f - a.beta1) * g;
        const float vi = a.beta2 * ld(v, i) + (1.0f - a.beta2) * g * g;
        p -= (a.lr / a.bias1) * mi / (sqrtf(vi) / a.bias2Sqrt + a.eps);
        st(m, i, mi);
        st(v, i, vi);
        if (master) master[i] = p;
        st(param, i, p);
    }
}

template <typename P>
__global__ void widenKernel(const P* param, float* master, int64_t n) {
    TESSEL_GRID_STRIDE(i, n) master[i] = ld(param, i);
}

template <typename T>
__global__ void sumSquaresPartialKernel(const T* x, int64_t n, int64_t perBlock, double* partials) {
    extern __shared__ double dred[];
    const int64_t b0 = static_cast<int64_t>(blockIdx.x) * perBlock, b1 = min(n, b0 + perBlock);
    double s = 0.0;
    for (int64_t i = b0 + threadIdx.x; i < b1; i += blockDim.x) {
        const double v = ld(x, i);
        s += v * v;
    }
    s = blockSum(s, dred);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void sumPartialsKernel(const double* partials, int64_t count, double* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double s = 0.0;
        for (int64_t i = 0; i < count; ++i) s += partials[i];   // in order: the same bits every time
        *out = s;
    }
}

template <typename T>
T* as(void* p) { return static_cast<T*>(p); }
template <typename T>
const T* as(const void* p) { return static_cast<const T*>(p); }

} // namespace

void copy2d(const KernelContext& k, DType stp, const void* src, int64_t sStride, int64_t sOff, DType dtp, void* dst,
            int64_t dStride, int64_t dOff, int64_t rows, int64_t width, float alpha, bool accumulate) {
    if (rows <= 0 || width <= 0) return;
    if (stp == dtp && alpha == 1.0f && !accumulate) {
        const size_t e = static_cast<size_t>(dtypeBytes(stp));
        const cudaError_t err = cudaMemcpy2DAsync(
            static_cast<char*>(dst) + static_cast<size_t>(dOff) * e, static_cast<size_t>(dStride) * e,
            static_cast<const char*>(src) + static_cast<size_t>(sOff) * e, static_cast<size_t>(sStride) * e,
            static_cast<size_t>(width) * e, static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, k.stream);
        if (err != cudaSuccess) throw DeviceError(std::string("cuda copy: ") + cudaGetErrorString(err));
        return;
    }
    const ElementwiseLaunch l = planElementwise(rows * width, k.multiprocessors);
    withType(stp, [&](auto s) {
        withType(dtp, [&](auto d) {
            using S = decltype(s);
            using D = decltype(d);
            copy2dKernel<S, D><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(
                as<S>(src), sStride, sOff, as<D>(dst), dStride, dOff, rows, width, alpha, accumulate);
        });
    });
    checkLaunch("copy");
}

void fill(const KernelContext& k, DType t, void* p, int64_t n, float value) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        fillKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(p), n, value);
    });
    checkLaunch("fill");
}

void scale(const KernelContext& k, DType t, void* p, int64_t n, float factor) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        scaleKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(p), n, factor);
    });
    checkLaunch("scale");
}

void addBias(const KernelContext& k, DType t, void* x, DType bt, const void* bias, int64_t n, int64_t c) {
    if (n * c <= 0) return;
    const ElementwiseLaunch l = planElementwise(n * c, k.multiprocessors);
    withType(t, [&](auto tag) {
        withType(bt, [&](auto btag) {
            using T = decltype(tag);
            using B = decltype(btag);
            addBiasKernel<T, B><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(x), as<B>(bias), n, c);
        });
    });
    checkLaunch("addBias");
}

void biasGrad(const KernelContext& k, DType t, const void* dy, int64_t n, int64_t c, float* partials, DType ot,
              void* out) {
    if (c <= 0) return;
    const ColumnSumLaunch l = planColumnSum(n, c);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        columnPartialsKernel<T><<<dim3(gridOf(l.columnBlocks), gridOf(l.chunks)), l.threads, 0, k.stream>>>(
            as<T>(dy), n, c, l.rowsPerChunk, partials);
    });
    withType(ot, [&](auto tag) {
        using O = decltype(tag);
        columnFinishKernel<O><<<gridOf(l.columnBlocks), l.threads, 0, k.stream>>>(partials, l.chunks, c, as<O>(out));
    });
    checkLaunch("biasGrad");
}

void normForward(const KernelContext& k, DType t, const void* x, const void* gamma, const void* beta, bool rms,
                 float eps, int64_t n, int64_t c, void* y, void* mean, void* rstd, float* meanF, float* rstdF) {
    if (n <= 0) return;
    const RowLaunch l = planRows(n, c);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        normForwardKernel<T><<<gridOf(l.blocks), l.threads, static_cast<size_t>(l.sharedBytes), k.stream>>>(
            as<T>(x), as<T>(gamma), beta ? as<T>(beta) : nullptr, rms, eps, c, as<T>(y),
            mean ? as<T>(mean) : nullptr, as<T>(rstd), meanF, rstdF);
    });
    checkLaunch("normForward");
}

void normBackward(const KernelContext& k, DType t, const void* dy, const void* x, const void* gamma,
                  const float* meanF, const float* rstdF, bool rms, int64_t n, int64_t c, void* dx, void* dgamma,
                  void* dbeta, float* partials) {
    if (n <= 0) return;
    const RowLaunch l = planRows(n, c);
    const ColumnSumLaunch cl = planColumnSum(n, c);
    float* partialG = partials;
    float* partialB = partials + cl.chunks * c;
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        normBackwardKernel<T><<<gridOf(l.blocks), l.threads, static_cast<size_t>(l.sharedBytes), k.stream>>>(
            as<T>(dy), as<T>(x), as<T>(gamma), meanF, rstdF, rms, c, as<T>(dx));
        normParamPartialsKernel<T><<<dim3(gridOf(cl.columnBlocks), gridOf(cl.chunks)), cl.threads, 0, k.stream>>>(
            as<T>(dy), as<T>(x), meanF, rstdF, rms, n, c, cl.rowsPerChunk, partialG, partialB);
        columnFinishKernel<T><<<gridOf(cl.columnBlocks), cl.threads, 0, k.stream>>>(partialG, cl.chunks, c,
                                                                                    as<T>(dgamma));
        if (dbeta)
            columnFinishKernel<T><<<gridOf(cl.columnBlocks), cl.threads, 0, k.stream>>>(partialB, cl.chunks, c,
                                                                                        as<T>(dbeta));
    });
    checkLaunch("normBackward");
}

void activationForward(const KernelContext& k, DType t, const void* x, void* y, int64_t n, Pointwise f) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        activationForwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(x), as<T>(y), n, f);
    });
    checkLaunch("activationForward");
}

void activationBackward(const KernelContext& k, DType t, const void* dy, const void* x, void* dx, int64_t n, Pointwise f) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        activationBackwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(dy), as<T>(x), as<T>(dx), n, f);
    });
    checkLaunch("activationBackward");
}

void gluForward(const KernelContext& k, DType t, const void* x, void* y, int64_t n, int64_t f, Pointwise act) {
    if (n * f <= 0) return;
    const ElementwiseLaunch l = planElementwise(n * f, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        gluForwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(x), as<T>(y), n, f, act);
    });
    checkLaunch("gluForward");
}

void gluBackward(const KernelContext& k, DType t, const void* dy, const void* x, void* dx, int64_t n, int64_t f,
                 Pointwise act) {
    if (n * f <= 0) return;
    const ElementwiseLaunch l = planElementwise(n * f, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        gluBackwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(dy), as<T>(x), as<T>(dx), n, f, act);
    });
    checkLaunch("gluBackward");
}

void softcap(const KernelContext& k, DType t, void* x, int64_t n, float cap) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        softcapKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(x), n, cap);
    });
    checkLaunch("softcap");
}

void softcapBackward(const KernelContext& k, DType t, void* dy, const void* y, int64_t n, float cap) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        softcapBackwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(dy), as<T>(y), n, cap);
    });
    checkLaunch("softcapBackward");
}

void dropout(const KernelContext& k, DType t, void* x, const int64_t* sequences, const int64_t* positions, int64_t n,
             int64_t c, const DropoutRule& rule) {
    if (n * c <= 0 || !rule.active()) return;
    const ElementwiseLaunch l = planElementwise(n * ((c + 3) / 4), k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        dropoutKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(x), sequences, positions, n, c, rule);
    });
    checkLaunch("dropout");
}

void rope(const KernelContext& k, DType t, void* x, const int64_t* positions, const double* invFreq, int64_t tokens,
          int64_t heads, int64_t d, int64_t rotated, bool inverse) {
    if (tokens * heads * rotated <= 0) return;
    const ElementwiseLaunch l = planElementwise(tokens * heads * (rotated / 2), k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        ropeKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(x), positions, invFreq, tokens, heads, d,
                                                                    rotated, inverse);
    });
    checkLaunch("rope");
}

void embeddingForward(const KernelContext& k, DType t, const void* table, const int64_t* rows, int64_t n, int64_t h,
                      void* out) {
    if (n * h <= 0) return;
    const ElementwiseLaunch l = planElementwise(n * h, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        embeddingForwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(table), rows, n, h, as<T>(out));
    });
    checkLaunch("embeddingForward");
}

void embeddingBackward(const KernelContext& k, DType t, const void* dout, const int64_t* uniqueRows,
                       const int64_t* offsets, const int64_t* tokenIndex, int64_t uniqueCount, int64_t h,
                       void* dtable) {
    if (uniqueCount * h <= 0) return;
    const ElementwiseLaunch l = planElementwise(uniqueCount * h, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        embeddingBackwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(
            as<T>(dout), uniqueRows, offsets, tokenIndex, uniqueCount, h, as<T>(dtable));
    });
    checkLaunch("embeddingBackward");
}

void rowMax(const KernelContext& k, DType t, const void* logits, int64_t n, int64_t v, float* out) {
    if (n <= 0) return;
    const RowLaunch l = planRows(n, v);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        rowMaxKernel<T><<<gridOf(l.blocks), l.threads, static_cast<size_t>(l.sharedBytes), k.stream>>>(as<T>(logits),
                                                                                                       v, out);
    });
    checkLaunch("rowMax");
}

void rowSumExp(const KernelContext& k, DType t, const void* logits, const float* max, int64_t n, int64_t v,
               float* out) {
    if (n <= 0) return;
    const RowLaunch l = planRows(n, v);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        rowSumExpKernel<T><<<gridOf(l.blocks), l.threads, static_cast<size_t>(l.sharedBytes), k.stream>>>(
            as<T>(logits), max, v, out);
    });
    checkLaunch("rowSumExp");
}

void gatherColumns(const KernelContext& k, DType t, const void* logits, const int64_t* cols, int64_t n, int64_t v,
                   float* out) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        gatherColumnsKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(logits), cols, n, v, out);
    });
    checkLaunch("targetLogits");
}

void crossEntropyBackward(const KernelContext& k, DType t, void* logits, const float* max, const float* sumExp,
                          const int64_t* cols, int64_t n, int64_t v, float scale) {
    if (n <= 0) return;
    const RowLaunch l = planRows(n, v);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        crossEntropyBackwardKernel<T><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<T>(logits), max, sumExp, cols,
                                                                                    v, scale);
    });
    checkLaunch("crossEntropyBackward");
}

void adamw(const KernelContext& k, DType pt, void* param, DType gt, const void* grad, DType mt, void* m, void* v,
           float* master, int64_t n, const AdamParams& a) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(pt, [&](auto ptag) {
        withType(gt, [&](auto gtag) {
            withType(mt, [&](auto mtag) {
                using P = decltype(ptag);
                using G = decltype(gtag);
                using M = decltype(mtag);
                adamwKernel<P, G, M><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<P>(param), as<G>(grad), as<M>(m),
                                                                                   as<M>(v), master, n, a);
            });
        });
    });
    checkLaunch("adamw");
}

void widen(const KernelContext& k, DType pt, const void* param, float* master, int64_t n) {
    if (n <= 0) return;
    const ElementwiseLaunch l = planElementwise(n, k.multiprocessors);
    withType(pt, [&](auto tag) {
        using P = decltype(tag);
        widenKernel<P><<<gridOf(l.blocks), l.threads, 0, k.stream>>>(as<P>(param), master, n);
    });
    checkLaunch("adamw master copy");
}

void sumSquares(const KernelContext& k, DType t, const void* x, int64_t n, double* partials, double* out) {
    const ReductionLaunch l = planReduction(n);
    withType(t, [&](auto tag) {
        using T = decltype(tag);
        sumSquaresPartialKernel<T><<<gridOf(l.blocks), l.threads, static_cast<size_t>(l.threads / 32) * sizeof(double),
                                     k.stream>>>(as<T>(x), n, l.elementsPerBlock, partials);
    });
    sumPartialsKernel<<<1, 32, 0, k.stream>>>(partials, l.blocks, out);
    checkLaunch("sumSquares");
}

} // namespace tessel::exec::cuda
