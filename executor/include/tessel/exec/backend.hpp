// The Backend interface: allocation (counted per memory category) and every operation the GPT model needs.
// The model is written once against it; `cpu` (float64/float32, Eigen) is the reference, `cuda` follows.
#pragma once

#include "tessel/exec/dropout.hpp"
#include "tessel/exec/pointwise.hpp"
#include "tessel/exec/score_rule.hpp"
#include "tessel/exec/tensor.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {

// Shapes: activations are row-major [tokens, features] with tokens ordered (sequence, position) of the
// micro-batch; attention tensors are [tokens, heads, head_dim]. "+=" in a comment means the op accumulates
// into its output (gradients accumulate over micro-batches).
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    virtual ElementType elementType() const = 0;
    // The element type of a new tensor of `category` (mixed precision: fp32 optimizer state beside bf16
    // weights, grads and activations). Default: elementType() for every category.
    virtual ElementType elementTypeFor(MemoryCategory /*category*/) const { return elementType(); }

    Tensor empty(std::vector<int64_t> shape, MemoryCategory category);
    Tensor zeros(std::vector<int64_t> shape, MemoryCategory category);
    const MemoryStats& memory() const { return memory_; }
    void resetPeaks();

    // Host <-> device (values as float64 on the host).
    virtual void upload(const std::vector<double>& host, Tensor& dst) = 0;
    virtual std::vector<double> download(const Tensor& src) = 0;
    virtual void copy(const Tensor& src, Tensor& dst) = 0;
    virtual void fill(Tensor& t, double value) = 0;
    virtual void add(const Tensor& a, Tensor& inout, double scale = 1.0) = 0;   // inout += scale * a
    virtual void scale(Tensor& t, double factor) = 0;
    // Copies rows [rowBegin, rowBegin + dst rows) of src [n, c] into dst (or dst into src with `scatter`).
    virtual void copyRows(const Tensor& src, int64_t rowBegin, Tensor& dst) = 0;
    virtual void copyRowsInto(const Tensor& src, Tensor& dst, int64_t rowBegin) = 0;
    // Column block [colBegin, colBegin + dst cols) of src [n, c] -> dst [n, w] (and the reverse, +=).
    virtual void copyColumns(const Tensor& src, int64_t colBegin, Tensor& dst) = 0;
    virtual void addColumnsInto(const Tensor& src, Tensor& dst, int64_t colBegin) = 0;

    // C = alpha op(A) op(B) + beta C, A [m, k] (or [k, m] with transA), B [k, n] (or [n, k] with transB).
    virtual void gemm(bool transA, bool transB, double alpha, const Tensor& a, const Tensor& b, double beta,
                      Tensor& c) = 0;
    virtual void addBias(Tensor& x, const Tensor& bias) = 0;                      // x [n, c] += bias [c]
    virtual void biasGrad(const Tensor& dy, Tensor& dbias) = 0;                   // dbias [c] += column sums

    // LayerNorm (rms = false, beta may be undefined) or RMSNorm (rms = true) over the last dim of x [n, c].
    // mean and rstd [n] are saved for backward (mean unused by RMSNorm).
    virtual void normForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool rms, double eps,
                             Tensor& y, Tensor& mean, Tensor& rstd) = 0;
    // dx = (not +=), dgamma +=, dbeta += (when defined).
    virtual void normBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                              const Tensor& rstd, bool rms, Tensor& dx, Tensor& dgamma, Tensor& dbeta) = 0;

    // The MLP's activation f (pointwise.hpp), y = f(x), dx = dy f'(x); and a gated MLP's (x [n, 2f] = [gate | up] ->
    // f(gate) * up [n, f]: SwiGLU with Silu, GeGLU with Gelu).
    virtual void activationForward(const Tensor& x, Tensor& y, Pointwise f) = 0;
    virtual void activationBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise f) = 0;
    virtual void gluForward(const Tensor& x, Tensor& y, Pointwise act) = 0;
    virtual void gluBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise act) = 0;
    // Dropout in place on x [n, c] (dropout.hpp): element (r, col) is multiplied by dropoutFactor(rule, sequences[r],
    // positions[r], col), 1 / (1 - p) or 0. The same call on the output's gradient is its backward.
    virtual void dropout(Tensor& x, const DropoutRule& rule, const std::vector<int64_t>& sequences,
                         const std::vector<int64_t>& positions) = 0;
    // Tanh soft-capping in place, x = cap tanh(x / cap) (Gemma 2's final_logit_softcapping), and its backward from the
    // capped values y: dy *= 1 - (y / cap)^2.
    virtual void softcap(Tensor& x, double cap) = 0;
    virtual void softcapBackward(Tensor& dy, const Tensor& y, double cap) = 0;

    // Rotary embedding in place on x [tokens, heads, d]: the first `rotated` columns of each head (even, at most d;
    // d for the whole head, less for a partial rotary) in pairs (i, i + rotated/2) at angles position x
    // base^(-2i/rotated), the rest untouched; `positions` gives each token's position in its sequence;
    // inverse = true rotates back (the backward pass).
    virtual void rope(Tensor& x, const std::vector<int64_t>& positions, double base, int64_t rotated, bool inverse) = 0;

    // Causal attention with GQA for `sequences` sequences. q [sequences * sq, hq, d]; k, v [sequences * skv,
    // hkv, d]; query i may see key j when keyPositions[j] <= queryPositions[i] (positions per sequence,
    // length sq and skv) and, with a window, keyVisible says so. o [sequences * sq, hq, d]; lse [sequences * sq, hq]
    // (log-sum-exp, for backward). `rule` (score_rule.hpp): the window, the soft-cap and ALiBi's biases, the same in
    // the backward.
    virtual void attentionForward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t sequences,
                                  const std::vector<int64_t>& queryPositions, const std::vector<int64_t>& keyPositions,
                                  Tensor& o, Tensor& lse, const ScoreRule& rule = {}) = 0;
    // dq = ; dk +=, dv += (so chunks of keys from several sources can accumulate).
    virtual void attentionBackward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& o, const Tensor& lse, int64_t sequences,
                                   const std::vector<int64_t>& queryPositions,
                                   const std::vector<int64_t>& keyPositions, Tensor& dq, Tensor& dk, Tensor& dv,
                                   const ScoreRule& rule = {}) = 0;

    // Vocab-parallel embedding: rows of table [vocabLocal, h] hold tokens [vocabBegin, vocabBegin + vocabLocal);
    // out [n, h] gets the row of each token in the shard and zeros elsewhere; backward scatter-adds.
    virtual void embeddingForward(const std::vector<int32_t>& tokens, const Tensor& table, int64_t vocabBegin,
                                  Tensor& out) = 0;
    virtual void embeddingBackward(const std::vector<int32_t>& tokens, const Tensor& dout, int64_t vocabBegin,
                                   Tensor& dtable) = 0;

    // Vocab-parallel cross-entropy pieces over logits [n, vocabLocal] (Megatron-LM's vocab_parallel_cross_entropy):
    // per-row max; per-row sum of exp(logit - max); per-row logit of the target (0 outside the shard);
    // and the gradient scale * (softmax - onehot(target)) written over the logits.
    virtual std::vector<double> rowMax(const Tensor& logits) = 0;
    virtual std::vector<double> rowSumExp(const Tensor& logits, const std::vector<double>& max) = 0;
    virtual std::vector<double> targetLogits(const Tensor& logits, const std::vector<int32_t>& targets,
                                             int64_t vocabBegin) = 0;
    virtual void crossEntropyBackward(Tensor& logits, const std::vector<double>& max,
                                      const std::vector<double>& sumExp, const std::vector<int32_t>& targets,
                                      int64_t vocabBegin, double scale) = 0;

    // AdamW (Loshchilov & Hutter 2019) on one tensor: m, v updated; step counts from 1.
    virtual void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                       double beta2, double eps, double weightDecay, int64_t step) = 0;
    virtual double sumSquares(const Tensor& t) = 0;
    // The sum of sumSquares over several tensors, added in their order. A device backend waits for its one
    // result once rather than once per tensor (GPT-2 has 148 gradient tensors; per-tensor reads were most of
    // its optimizer step on an H100).
    virtual double sumSquaresAll(const std::vector<Tensor>& ts) {
        double sum = 0.0;
        for (const Tensor& t : ts) sum += sumSquares(t);
        return sum;
    }

    // ---- asynchronous backends (CUDA); the defaults suit a synchronous backend such as cpu ----
    // Waits until every operation issued so far has finished.
    virtual void synchronize() {}
    // Device timing of one action: beginTimedRegion marks its start on the stream that runs it and returns a
    // handle, endTimedRegion its end; nothing waits. collectTimedRegions waits for the regions recorded since
    // the last collection and returns, by handle order, {start since the backend's first region, duration}
    // in seconds. A backend that returns false from timesOnDevice() records nothing (the host clock around
    // synchronous work is exact there).
    struct TimedRegion {
        int64_t handle = 0;
        double startSeconds = 0.0;
        double durationSeconds = 0.0;
    };
    virtual bool timesOnDevice() const { return false; }
    virtual int64_t beginTimedRegion() { return -1; }
    virtual void endTimedRegion(int64_t /*handle*/) {}
    virtual std::vector<TimedRegion> collectTimedRegions() { return {}; }
    // Device and library versions (device, driver, cuda, cublas, nccl, ...), empty for the CPU backend.
    virtual std::vector<std::pair<std::string, std::string>> provenance() const { return {}; }

protected:
    virtual void* allocateBytes(int64_t bytes) = 0;
    virtual void freeBytes(void* p, int64_t bytes) = 0;

private:
    friend class Storage;
    void release(void* p, int64_t bytes, MemoryCategory c);
    MemoryStats memory_;
};

} // namespace tessel::exec
