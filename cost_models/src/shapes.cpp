// Per-rank tensor sizes of one micro-batch under a plan.
#include "tessel/cost/shapes.hpp"

#include <algorithm>

namespace tessel {

LocalShapes localShapes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    LocalShapes s;
    const int64_t t = plan.tp;
    s.microBatch = plan.microBatch;
    s.seqFull = model.seqLen;
    s.seqLocal = model.seqLen / plan.cp;
    s.tokens = s.microBatch * s.seqLocal;
    s.tokensSp = plan.sequenceParallel ? s.tokens / t : s.tokens;
    s.hidden = model.hidden;
    s.headsLocal = model.heads / t;
    s.kvHeadsLocal = std::max<int64_t>(1, model.kvHeads / t); // fewer than tp: each rank's one, replicated
    s.headDim = model.qkHeadDim();
    s.vHeadDim = model.vHeadDim();
    s.qDimLocal = s.headsLocal * s.headDim;
    s.kvDimLocal = s.kvHeadsLocal * s.headDim;
    s.vDimLocal = s.kvHeadsLocal * s.vHeadDim;
    s.oDimLocal = s.headsLocal * s.vHeadDim;
    if (model.mla) {
        s.qLatent = model.mla->qLoraRank;
        s.kvLoraRank = model.mla->kvLoraRank;
        s.kvLatent = model.mla->kvLoraRank + model.mla->qkRopeHeadDim;
    }
    s.ffnLocal = model.ffnHidden / t;
    if (model.moe) {
        s.expertFfnLocal = model.moe->expertFfnHidden / plan.expertTp();
        s.sharedFfnLocal = model.moe->sharedFfnHidden / t;
        s.expertsLocal = model.moe->experts / plan.ep;
        s.topK = model.moe->topK;
        s.moeTokensIn = s.tokensSp;
        s.expertTpGather = (plan.tp == 1 || plan.sequenceParallel) ? plan.expertTp() : 1;
        s.expertTokens = s.moeTokensIn * s.topK * s.expertTpGather;
    }
    s.vocabPadded = paddedVocab(model, plan);
    s.vocabLocal = s.vocabPadded / t;
    s.vocabLoss = lossParallelOf(plan.framework) ? s.vocabLocal : s.vocabPadded;
    s.activationBytes = static_cast<int>(bytesPerElement(recipe.computeDtype));
    // Transformer Engine saves a quantized GEMM's input in its quantized form: FP8's one copy, NVFP4's columnwise copy
    // alone (pytorch/module/linear.py: update_usage(rowwise_usage=False, columnwise_usage=True)).
    s.gemmInputBytes = recipe.quantizedBytes();
    // A byte a dropped element's mask, where the masks are kept for the backward (dropout_masks_kept).
    s.maskBytes = model.dropout > 0.0 && plan.framework.dropoutMasksKept.value_or(true) ? 1 : 0;
    // Autocast leaves the embedding, the residual adds and LayerNorm/RMSNorm in fp32 (torch.amp's op lists:
    // layer_norm runs in fp32, add keeps its widest input), so over fp32 parameters the residual stream is fp32.
    s.residualBytes = recipe.autocast ? std::max(4, s.activationBytes) : s.activationBytes;
    return s;
}

} // namespace tessel
