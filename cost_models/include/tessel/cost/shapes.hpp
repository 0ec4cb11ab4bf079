// Per-rank tensor sizes of one micro-batch under a plan (tokens, heads, widths after TP/SP/CP/EP splits).
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <cstdint>

namespace tessel {

// Every quantity is what ONE rank holds or computes for ONE micro-batch, in elements.
// Shared by the compute, communication-volume and memory models so they agree on the same shapes.
struct LocalShapes {
    int64_t microBatch = 0;     // b
    int64_t seqLocal = 0;       // s / cp: query positions on this rank
    int64_t seqFull = 0;        // s: key positions attention sees (all of them, over the CP ring)
    int64_t tokens = 0;         // T = b * s / cp
    int64_t tokensSp = 0;       // T / tp with sequence parallelism, T without (norms, dropout, residual)
    int64_t hidden = 0;         // h
    int64_t headsLocal = 0;     // a / tp
    int64_t kvHeadsLocal = 0;   // g / tp
    int64_t headDim = 0;        // q and k heads' width (MLA: nope + rope)
    int64_t vHeadDim = 0;       // v heads' width (head_dim without MLA)
    int64_t qDimLocal = 0;      // a / tp * head_dim
    int64_t kvDimLocal = 0;     // g / tp * head_dim: K's width (and V's without MLA)
    int64_t vDimLocal = 0;      // g / tp * v_head_dim: V's width
    int64_t oDimLocal = 0;      // a / tp * v_head_dim: the attention output's width, the projection's input
    // MLA (ModelConfig::mla): the latents' widths, whole on every TP rank (0 without MLA).
    int64_t qLatent = 0;        // q_lora_rank
    int64_t kvLatent = 0;       // kv_lora_rank + qk_rope_head_dim: the kv down projection's output
    int64_t kvLoraRank = 0;
    int64_t ffnLocal = 0;       // f / tp (dense MLP)
    int64_t expertFfnLocal = 0; // expert f / etp (MoE; etp = tp unless the plan sets it)
    int64_t sharedFfnLocal = 0; // shared experts' summed f / tp (MoE; 0 without)
    int64_t expertsLocal = 0;   // E / ep
    int64_t topK = 0;
    // MoE token flow (Megatron-core's all-to-all dispatcher): the router sees moeTokensIn tokens (T / tp with SP,
    // each TP rank its own; T without), dispatches top_k copies over EP, and the expert-TP group gathers what its
    // etp ranks received (expertTpGather = etp when their tokens differ, 1 when they are copies, i.e. tp > 1
    // without SP). expertTokens = moeTokensIn x top_k x expertTpGather rows reach this rank's local experts
    // (balanced routing).
    int64_t moeTokensIn = 0;
    int64_t expertTpGather = 1;
    int64_t expertTokens = 0;
    int64_t vocabLocal = 0;     // padded V / tp: the LM head's output columns on this rank
    int64_t vocabPadded = 0;
    int64_t vocabLoss = 0;      // the logits' columns the loss holds and reads on this rank: vocabLocal, or the
                                // whole padded V where they are gathered over TP (lossParallelOf false)
    int activationBytes = 2;    // bytes per activation element (the recipe's compute dtype)
    double gemmInputBytes = 2;  // bytes per element of a GEMM input saved for backward (1 under FP8, 0.5625 NVFP4)
    int maskBytes = 0;          // 1 when the model uses dropout (a byte mask per element), else 0
    int residualBytes = 2;      // the residual stream and the norms (fp32 under autocast, else activationBytes)
};

LocalShapes localShapes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);

} // namespace tessel
