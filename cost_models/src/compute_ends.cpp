// Compute outside the transformer layers: the embedding, the output layer and its loss, the multi-token-prediction
// modules, the optimizer step, and the model FLOPs of a step (FORMULAS.md §3).
#include "tessel/cost/compute.hpp"

#include "compute_ops.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>

namespace tessel {

using namespace compute_detail;

BlockCompute embeddingCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                              const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    BlockCompute b;
    // Vocab-parallel lookup: read token ids, read/write one row per token (rows outside the shard are zeros);
    // a learned position embedding is a second row read and written. Rows at the residual stream's width: under
    // autocast the embeddings stay fp32 (embedding is not an autocast op).
    const int r = s.residualBytes;
    double bytes = kernel_cost::embeddingForwardBytes(s.tokens, s.hidden, r);
    if (model.position == PositionEmbedding::Learned) bytes += 2.0 * r * d(s.tokens) * d(s.hidden);
    OpCost op = memoryOp("embedding", "embedding_forward", bytes);
    op.seconds = opSeconds(op, cluster, recipe.computeDtype);
    b.forwardOps.push_back(op);
    b.forward.add(op);
    // Backward scatter-adds the output grad into the embedding grad: a weight gradient.
    OpCost back = op;
    back.kernel = "embedding_backward";
    back.bytes = kernel_cost::embeddingBackwardBytes(s.tokens, s.hidden, r);
    // The dense gradient of the whole table PyTorch's embedding backward writes, and where it goes
    // (embeddingGradientBytesPerParameter; the word table and learned positions, the parameter passes below the rest).
    const double table = d(vocabParallelEmbeddingOf(plan.framework) ? s.vocabLocal : s.vocabPadded) * d(s.hidden) +
                         (model.position == PositionEmbedding::Learned ? d(model.seqLen) * d(model.hidden) : 0.0);
    back.bytes += table * embeddingGradientBytesPerParameter(plan.framework, plan.pp, plan.zeroStage, plan.zeroShardSize(),
                                                             plan.microBatchesPerStep(), recipe.weightBytes,
                                                             recipe.gradBytes, recipe.autocast);
    back.seconds = opSeconds(back, cluster, recipe.computeDtype);
    b.backwardWeight.add(back);
    if (plan.recompute == Recompute::Full) {
        b.recompute.add(op);
        b.recompute.modelFlops -= op.modelFlops;
    }
    // An elementwise op on the embedding's output before the first layer: its kernel forward and backward (its bytes
    // times its backwardByteFactor). No layer checkpoint covers it, so no recompute reruns it.
    auto addOutsideCheckpoints = [&](OpCost extra) {
        const std::string kernel = extra.kernel;
        extra.kernel = kernel + "_forward";
        extra.seconds = opSeconds(extra, cluster, recipe.computeDtype);
        b.forwardOps.push_back(extra);
        b.forward.add(extra);
        extra.kernel = kernel + "_backward";
        extra.bytes *= extra.backwardByteFactor;
        extra.seconds = opSeconds(extra, cluster, recipe.computeDtype);
        b.backwardInput.add(extra);
    };
    // BLOOM's norm over the embedding's output (word_embeddings_layernorm; BigScience's Megatron-DeepSpeed
    // --embed-layernorm, applied in VocabParallelEmbedding.forward after the TP all-reduce): a norm's bytes.
    if (model.embeddingNorm) {
        addOutsideCheckpoints(normOp("norm_embedding", model, s, !fusedKernelsOf(plan.framework), recipe.autocast));
    }
    // Gemma's hidden_states * sqrt(hidden) (a 0-d tensor in the embedding's dtype): the rows read and written, and
    // backward the gradient times the same constant. Nothing is kept.
    if (model.embeddingScale) {
        OpCost scale = memoryOp("embedding_scale", "scale", 2.0 * r * d(s.tokens) * d(s.hidden));
        scale.backwardByteFactor = 1.0;
        addOutsideCheckpoints(scale);
    }
    addParameterPasses(b, embeddingParameters(model, plan), cluster, plan, recipe);
    return b;
}

BlockCompute headCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                         const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const int e = s.activationBytes;
    BlockCompute b;
    const bool eager = !fusedKernelsOf(plan.framework);
    const bool eagerLoss = eagerLossOf(plan.framework);
    b.forwardOps.push_back(normOp("norm_final", model, s, eager, recipe.autocast));
    // An eager framework multiplies by the vocabulary as it is; one that compiles (torch.compile's pad_mm) pads the
    // GEMM to 16 bytes of its element, so only eager runs of a vocabulary such as GPT-2's 50257 take cuBLAS's
    // unaligned fallback (FORMULAS.md §3.1).
    const int64_t align = 16 / e;
    const int64_t vocabGemm = eager ? s.vocabLocal : (s.vocabLocal + align - 1) / align * align;
    const bool fusedLinear = crossEntropyOf(plan.framework) == "fused_linear";
    if (fusedLinear) {
        // Liger-Kernel's fused linear cross-entropy (FORMULAS.md §3): chunk by chunk of the tokens, in the forward,
        // the logits x_c W^T, the loss kernel's gradient written over them, dx_c = g W and dW += g^T x_c (addmm into
        // the weight gradient, which reads it back each chunk). The backward only passes dx on. Liger multiplies
        // with the vocabulary as it is (eager torch matmuls, no padding).
        const int64_t chunk = kernel_cost::fusedLinearCrossEntropyChunkTokens(s.tokens, s.vocabLocal, s.hidden);
        const double chunks = d(s.tokens) / d(chunk);
        OpCost logits = gemm("lm_head", chunk, s.vocabLocal, s.hidden, e, chunks);
        OpCost dgrad = gemm("lm_head_dgrad", chunk, s.hidden, s.vocabLocal, e, chunks);
        OpCost wgrad = gemm("lm_head_wgrad", s.vocabLocal, s.hidden, chunk, e, chunks);
        wgrad.bytes += chunks * d(s.vocabLocal) * d(s.hidden) * e;
        for (OpCost* g : {&logits, &dgrad, &wgrad}) {
            g->noBackward = true;
            b.forwardOps.push_back(*g);
        }
    } else {
        b.forwardOps.push_back(gemm("lm_head", s.tokens, vocabGemm, s.hidden, e));
        // Gemma 2's soft-capping of the logits before the loss, three ops over them each way. Liger's fused linear
        // cross-entropy takes the cap inside its kernel (softcap), on logits it reads anyway: nothing added there.
        if (model.logitSoftcap > 0.0)
            b.forwardOps.push_back(softcapOp("logit_softcap", d(s.tokens) * d(s.vocabLoss), e));
    }
    if (recipe.autocast) {
        // The output weight cast for this forward (and its gradient back), and in eager code the final norm's
        // fp32 output cast to the LM head's input.
        const double elements = d(s.vocabLocal) * d(s.hidden) + (eager ? d(s.tokensSp) * d(s.hidden) : 0.0);
        OpCost cast = memoryOp("autocast_casts", "cast", kernel_cost::autocastCastBytes(elements, e, s.residualBytes));
        cast.backwardByteFactor = 1.0;
        b.forwardOps.push_back(cast);
    }
    if (fusedLinear) {
        OpCost ce = memoryOp("cross_entropy", "cross_entropy",
                             kernel_cost::fusedLinearCrossEntropyBytes(s.tokens, s.vocabLocal, s.hidden, e));
        ce.backwardByteFactor = 0.0; // the gradient was written in the forward
        b.forwardOps.push_back(ce);
    } else if (eagerLoss) {
        // From here the loss reads the logits it holds: the rank's vocabulary shard, or, where they are gathered over
        // TP (loss_parallel false), all of them on every rank (s.vocabLoss).
        // cross_entropy(logits.float()): an fp32 copy, log-softmax, and their backward.
        OpCost ce = memoryOp("cross_entropy", "cross_entropy", kernel_cost::eagerCrossEntropyBytes(s.tokens, s.vocabLoss, e));
        ce.backwardByteFactor = kernel_cost::eagerCrossEntropyBackwardFactor(e);
        b.forwardOps.push_back(ce);
    } else if (crossEntropyOf(plan.framework) == "eager_16bit") {
        OpCost ce = memoryOp("cross_entropy", "cross_entropy", kernel_cost::eager16BitCrossEntropyBytes(s.tokens, s.vocabLoss, e));
        ce.backwardByteFactor = kernel_cost::kEager16BitCrossEntropyBackwardFactor;
        b.forwardOps.push_back(ce);
    } else if (crossEntropyOf(plan.framework) == "compiled") {
        // torch.compile's kernels for cross_entropy(logits.float()) (torchtitan's compiled loss): the upcast fused
        // into an online log-sum-exp over the 16-bit logits, and a backward that writes their 16-bit gradient.
        OpCost ce = memoryOp("cross_entropy", "cross_entropy", kernel_cost::compiledCrossEntropyBytes(s.tokens, s.vocabLoss, e));
        ce.backwardByteFactor = kernel_cost::kCompiledCrossEntropyBackwardFactor;
        b.forwardOps.push_back(ce);
    } else if (crossEntropyOf(plan.framework) == "unfused") {
        OpCost ce = memoryOp("cross_entropy", "cross_entropy", kernel_cost::unfusedCrossEntropyBytes(s.tokens, s.vocabLoss, e));
        ce.backwardByteFactor = kernel_cost::unfusedCrossEntropyBackwardFactor(e);
        b.forwardOps.push_back(ce);
    } else {
        // Fused vocab-parallel cross-entropy: reads the logits, keeps fp32 softmax for backward.
        b.forwardOps.push_back(memoryOp("cross_entropy", "cross_entropy", kernel_cost::crossEntropyBytes(s.tokens, s.vocabLoss, e)));
    }
    // The trainer's training metrics, each an eager cross_entropy over the same logits outside autograd (Composer's
    // _eval_train_metrics after every micro-batch's backward, in its autocast context, where cross_entropy runs in
    // fp32): the cast and the log-softmax, no backward (FORMULAS.md §3.4).
    if (const int metrics = trainMetricLossesOf(plan.framework); metrics > 0) {
        OpCost m = memoryOp("train_metrics", "cross_entropy",
                            metrics * kernel_cost::metricCrossEntropyBytes(s.tokens, s.vocabLoss, e));
        m.backwardByteFactor = 0.0;
        b.forwardOps.push_back(m);
    }
    finishBlock(b, cluster, recipe.computeDtype, Recompute::None);
    addParameterPasses(b, headParameters(model, plan), cluster, plan, recipe);
    return b;
}

BlockCompute mtpCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                        const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const int e = s.activationBytes, r = s.residualBytes;
    const bool eager = !fusedKernelsOf(plan.framework);
    BlockCompute b;
    // The lookup as the model's embedding (vocab-parallel, a row per token); its scatter-add backward at its bytes.
    const double lookupBytes = kernel_cost::embeddingForwardBytes(s.tokens, s.hidden, r);
    OpCost lookup = memoryOp("mtp_embedding", "embedding", lookupBytes);
    lookup.backwardByteFactor = kernel_cost::embeddingBackwardBytes(s.tokens, s.hidden, r) / lookupBytes;
    b.forwardOps.push_back(lookup);
    b.forwardOps.push_back(normOp("mtp_enorm", model, s, eager, recipe.autocast));
    b.forwardOps.push_back(normOp("mtp_hnorm", model, s, eager, recipe.autocast));
    b.forwardOps.push_back(gemm("mtp_eh_proj", s.tokens, s.hidden / plan.tp, 2 * s.hidden, e));
    b.forwardOps.push_back(normOp("mtp_final_norm", model, s, eager, recipe.autocast));
    finishBlock(b, cluster, recipe.computeDtype, plan.recompute);
    const double own = 2.0 * d(s.hidden) * d(s.hidden) / plan.tp + 3.0 * d(s.hidden);
    addGradAccumulation(b, own, cluster, plan, recipe);
    return b;
}

OpCost optimizerCompute(double localParameters, const ClusterConfig& cluster, const PrecisionRecipe& recipe,
                        bool foreachAdamw) {
    OpCost op = memoryOp("optimizer_step", "adamw",
                         kernel_cost::optimizerBytes(localParameters, recipe) +
                             (foreachAdamw ? kernel_cost::foreachOptimizerExtraBytes(localParameters, recipe) : 0.0));
    op.flops = kernel_cost::optimizerFlops(localParameters);
    op.seconds = opSeconds(op, cluster, recipe.computeDtype);
    // The passes around AdamW (FORMULAS.md §3): the global gradient norm for clipping, the copy of the updated
    // master into the low-precision weights, and zeroing the gradient buffer for the next step.
    OpCost aux = memoryOp("optimizer_aux", "", kernel_cost::optimizerAuxBytes(localParameters, recipe));
    aux.seconds = opSeconds(aux, cluster, recipe.computeDtype);
    op.bytes += aux.bytes;
    op.seconds += aux.seconds;
    return op;
}

double modelFlopsPerStep(const ModelConfig& model, const Plan& plan, double attentionShare) {
    // Evaluate on one rank with no model-parallel split, one sequence, then scale by the global batch.
    Plan one = plan;
    one.tp = one.cp = one.ep = one.dp = one.pp = 1;
    one.etp = 0;
    one.vpp = 1;
    one.sequenceParallel = false;
    one.microBatch = 1;
    // The convention counts the output layer's forward GEMM, three times with its gradients, whichever kernel computes
    // them when (the fused linear cross-entropy's run in the forward): the loss kernel is left at the framework's.
    one.framework.crossEntropy.reset();
    ClusterConfig dummy;
    dummy.gpu.hbmBytesPerSecond = 1.0;
    dummy.gpu.peakFlopsPerSecond[Dtype::Bf16] = 1.0;
    const PrecisionRecipe& recipe = *findPrecisionRecipe("mixed");
    auto sumForward = [attentionShare](const BlockCompute& b) {
        double f = 0.0;
        for (const auto& op : b.forwardOps) {
            const bool scores = op.opClass == OpClass::Attention || op.name == "attention_scores" || op.name == "attention_context";
            f += (scores ? attentionShare : 1.0) * op.modelFlops;
        }
        return f;
    };
    // Each kind of layer counts its own: an MoE model's dense layers (moe.dense_layers) the dense MLP's FLOPs, a
    // windowed model's full-attention layers (full_attention_layers) every key.
    const int dense = model.moe ? static_cast<int>(model.moe->denseLayers.size()) : 0;
    const int full = model.slidingWindow > 0 ? static_cast<int>(model.fullAttentionLayers.size()) : 0;
    int denseFull = 0; // dense and full attention both
    if (model.moe && full > 0)
        for (int l : model.fullAttentionLayers) denseFull += model.isDenseLayer(l) ? 1 : 0;
    const double kindLayers[2][2] = {{static_cast<double>(model.layers - dense - full + denseFull), static_cast<double>(full - denseFull)},
                                     {static_cast<double>(dense - denseFull), static_cast<double>(denseFull)}};
    // (The model's own kind of layer first, then the head, then the other kinds: the sum's order before kinds.)
    double perSequence = kindLayers[0][0] * sumForward(layerCompute(model, dummy, one, recipe)) +
                         sumForward(headCompute(model, dummy, one, recipe));
    for (int d = 0; d < 2; ++d)
        for (int f = 0; f < 2; ++f)
            if ((d || f) && kindLayers[d][f] > 0.0) {
                ModelConfig kind = d ? model.denseLayerModel() : model;
                if (f) kind = kind.fullAttentionLayerModel();
                perSequence += kindLayers[d][f] * sumForward(layerCompute(kind, dummy, one, recipe));
            }
    // Multi-token prediction as Megatron-LM counts it (num_floating_point_operations): each module's eh_proj and
    // norms and its logits, not its transformer layer.
    if (model.mtpLayers > 0)
        perSequence += model.mtpLayers * (sumForward(mtpCompute(model, dummy, one, recipe)) +
                                          sumForward(headCompute(model, dummy, one, recipe)));
    return 3.0 * perSequence * plan.globalBatch;
}

} // namespace tessel
