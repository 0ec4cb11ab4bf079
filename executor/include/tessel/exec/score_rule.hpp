// Which keys a query sees and what is done to its scores and probabilities (the causal mask, a sliding window, ALiBi's
// linear biases, Gemma 2's soft-cap, attention dropout): one definition for the CPU reference backend and the CUDA
// kernels.
#pragma once

#include "tessel/exec/dropout.hpp"

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TESSEL_HOST_DEVICE __host__ __device__
#else
#define TESSEL_HOST_DEVICE
#endif

namespace tessel::exec {

// What one attention call does to its scores beyond q . k / sqrt(d) under the causal mask. The default changes
// nothing.
struct ScoreRule {
    // > 0: each score S capped to softcap tanh(S / softcap) before the softmax (Gemma 2's attn_logit_softcapping).
    double softcap = 0.0;
    // > 0: a query at position p sees the keys at p - window < position <= p, itself and the window - 1 before it
    // (ModelConfig::slidingWindow; Megatron-LM --window-size window-1,0).
    int64_t window = 0;
    // > 0: ALiBi (Press, Smith & Lewis 2022, "Train Short, Test Long"): head h of the model's alibiHeads adds
    // alibiSlope(h, alibiHeads) x (key position - query position) to its scores, after the soft-cap; the call's head
    // i is the model's head headOffset + i (tensor parallelism gives each rank a contiguous block of heads).
    int64_t alibiHeads = 0;
    int64_t headOffset = 0;
    // Attention dropout (dropout.hpp) on the probabilities: the probability P_ij of query i for key j is multiplied by
    // dropoutFactor(dropout, firstSequence + the call's sequence, query position, key position, headOffset + head);
    // the softmax's normaliser and the log-sum-exp stay those of the undropped P (FlashAttention's dropout).
    DropoutRule dropout;
    int64_t firstSequence = 0;
    TESSEL_HOST_DEVICE bool changesScores() const {
        return softcap > 0.0 || window > 0 || alibiHeads > 0 || dropout.active();
    }
};

// Whether a query at queryPos sees the key at keyPos: the causal mask, and the window where there is one.
TESSEL_HOST_DEVICE inline bool keyVisible(int64_t window, long long keyPos, long long queryPos) {
    return keyPos <= queryPos && (window <= 0 || queryPos - keyPos < window);
}

// ALiBi's slope of head `head` (0-based) of `heads`, as the paper's get_slopes and BLOOM's build_alibi_tensor compute
// it: with m the largest power of two <= heads, the first m heads take 2^(-8 (head + 1) / m), the geometric sequence
// from 2^(-8/m); the rest take the odd terms of the 2m sequence, 2^(-4 (2 (head - m) + 1) / m). For heads a power of
// two that is MPT's gen_slopes too; for other counts MPT orders the 2m sequence's terms differently.
TESSEL_HOST_DEVICE inline double alibiSlope(int64_t head, int64_t heads) {
    int64_t m = 1;
    while (m * 2 <= heads) m *= 2;
    const double e = head < m ? 8.0 * static_cast<double>(head + 1) / static_cast<double>(m)
                              : 4.0 * static_cast<double>(2 * (head - m) + 1) / static_cast<double>(m);
    return exp2(-e);
}

} // namespace tessel::exec
