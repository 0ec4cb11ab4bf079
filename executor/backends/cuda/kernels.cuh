// Host launchers of the CUDA backend's kernels (raw device pointers, element types, one stream). Every
// launcher takes its geometry from launch_plan.hpp; reductions are deterministic (fixed order, no atomics).
#pragma once

#include "launch_plan.hpp"
#include "tessel/exec/dropout.hpp"
#include "tessel/exec/pointwise.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace tessel::exec::cuda {

enum class DType { F32, Bf16 };
int dtypeBytes(DType t);

struct KernelContext {
    cudaStream_t stream = nullptr;
    int multiprocessors = 1;
};

// Throws tessel::DeviceError naming `what` when a launch failed (cudaGetLastError after the launch).
void checkLaunch(const char* what);

// dst[r * dStride + dOff + j] (=|+=) alpha * src[r * sStride + sOff + j] for r < rows, j < width (any types).
void copy2d(const KernelContext& k, DType st, const void* src, int64_t sStride, int64_t sOff, DType dt, void* dst,
            int64_t dStride, int64_t dOff, int64_t rows, int64_t width, float alpha, bool accumulate);
void fill(const KernelContext& k, DType t, void* p, int64_t n, float value);
void scale(const KernelContext& k, DType t, void* p, int64_t n, float factor);
// x [n, c] += bias [c]
void addBias(const KernelContext& k, DType t, void* x, DType bt, const void* bias, int64_t n, int64_t c);
// out [c] += column sums of dy [n, c]; `partials` holds planColumnSum(n, c).chunks * c floats.
void biasGrad(const KernelContext& k, DType t, const void* dy, int64_t n, int64_t c, float* partials, DType ot,
              void* out);

// LayerNorm / RMSNorm forward: y, and the row statistics in fp32 (statsF [2n]: mean, rstd) and in the
// tensors' type (mean may be null).
void normForward(const KernelContext& k, DType t, const void* x, const void* gamma, const void* beta, bool rms,
                 float eps, int64_t n, int64_t c, void* y, void* mean, void* rstd, float* meanF, float* rstdF);
// dx = ; dgamma, dbeta (may be null) +=, from fp32 statistics. `partials`: 2 * chunks * c floats.
void normBackward(const KernelContext& k, DType t, const void* dy, const void* x, const void* gamma,
                  const float* meanF, const float* rstdF, bool rms, int64_t n, int64_t c, void* dx, void* dgamma,
                  void* dbeta, float* partials);

// The MLP's activation f over n elements: y = f(x); dx = dy f'(x).
void activationForward(const KernelContext& k, DType t, const void* x, void* y, int64_t n, Pointwise f);
void activationBackward(const KernelContext& k, DType t, const void* dy, const void* x, void* dx, int64_t n, Pointwise f);
// A gated MLP's activation (x [n, 2f] = [gate | up] -> act(gate) * up [n, f]).
void gluForward(const KernelContext& k, DType t, const void* x, void* y, int64_t n, int64_t f, Pointwise act);
void gluBackward(const KernelContext& k, DType t, const void* dy, const void* x, void* dx, int64_t n, int64_t f,
                 Pointwise act);
// x = cap tanh(x / cap) in place; dy *= 1 - (y / cap)^2 from the capped values y.
void softcap(const KernelContext& k, DType t, void* x, int64_t n, float cap);
void softcapBackward(const KernelContext& k, DType t, void* dy, const void* y, int64_t n, float cap);

// x [tokens, heads, d]: each head's first `rotated` columns rotated in place, the rest untouched; positions [tokens]
// and invFreq [rotated / 2] (fp64) on the device.
void rope(const KernelContext& k, DType t, void* x, const int64_t* positions, const double* invFreq, int64_t tokens,
          int64_t heads, int64_t d, int64_t rotated, bool inverse);

// out [n, h] = table rows (row < 0: zeros); rows [n] on the device.
void embeddingForward(const KernelContext& k, DType t, const void* table, const int64_t* rows, int64_t n, int64_t h,
                      void* out);
// dtable[uniqueRows[u]] += sum of dout[tokenIndex[offsets[u] .. offsets[u + 1])] in that order (fp32 sums).
void embeddingBackward(const KernelContext& k, DType t, const void* dout, const int64_t* uniqueRows,
                       const int64_t* offsets, const int64_t* tokenIndex, int64_t uniqueCount, int64_t h,
                       void* dtable);

// Cross-entropy pieces over logits [n, v]: per-row max, sum of exp(l - max[r]), the logit at cols[r] (0 when
// cols[r] < 0), and the in-place gradient scale * (softmax - onehot(cols)). Outputs fp32 on the device.
void rowMax(const KernelContext& k, DType t, const void* logits, int64_t n, int64_t v, float* out);
void rowSumExp(const KernelContext& k, DType t, const void* logits, const float* max, int64_t n, int64_t v, float* out);
void gatherColumns(const KernelContext& k, DType t, const void* logits, const int64_t* cols, int64_t n, int64_t v,
                   float* out);
void crossEntropyBackward(const KernelContext& k, DType t, void* logits, const float* max, const float* sumExp,
                          const int64_t* cols, int64_t n, int64_t v, float scale);

// AdamW on n elements; master (fp32, may be null) is the value updated when present, and param gets it rounded.
struct AdamParams {
    float lr, beta1, beta2, eps, weightDecay, bias1, bias2Sqrt;
};
void adamw(const KernelContext& k, DType pt, void* param, DType gt, const void* grad, DType mt, void* m, void* v,
           float* master, int64_t n, const AdamParams& a);
// master [n] = param (fp32 copy of a bf16 parameter).
void widen(const KernelContext& k, DType pt, const void* param, float* master, int64_t n);

// Sum of squares in fp64: `partials` holds planReduction(n).blocks doubles; the result lands in *out.
void sumSquares(const KernelContext& k, DType t, const void* x, int64_t n, double* partials, double* out);

// Dropout in place on x [n, c]: element (r, col) times dropoutFactor(rule, sequences[r], positions[r], col);
// sequences, positions [n] on the device.
void dropout(const KernelContext& k, DType t, void* x, const int64_t* sequences, const int64_t* positions, int64_t n,
             int64_t c, const DropoutRule& rule);

// Attention (FlashAttention-2 style, Dao 2023): see launch_plan.hpp for the tiles. Positions on the device;
// lseF [S sq, hq] fp32; lse (may be null) gets it in the tensor type.
struct AttentionArgs {
    AttentionDims dims;
    float scale = 1.0f;
    // The soft-cap, the sliding window and ALiBi's biases (score_rule.hpp; the tiled kernels only).
    float softcap = 0.0f;
    long long window = 0;
    long long alibiHeads = 0, headOffset = 0;
    // Attention dropout on the probabilities (score_rule.hpp, dropout.hpp); sequence s of the call is the step's
    // firstSequence + s.
    DropoutRule dropout;
    long long firstSequence = 0;
    const int64_t* queryPositions = nullptr;
    const int64_t* keyPositions = nullptr;
};
void attentionForward(const KernelContext& k, DType t, const AttentionArgs& a, const void* q, const void* kk,
                      const void* v, void* o, float* lseF, void* lse);
// delta [S sq, hq] fp32 scratch. dq = ; dk, dv +=.
void attentionBackward(const KernelContext& k, DType t, const AttentionArgs& a, const void* dout, const void* q,
                       const void* kk, const void* v, const void* o, const float* lseF, float* delta, void* dq,
                       void* dk, void* dv);

} // namespace tessel::exec::cuda
