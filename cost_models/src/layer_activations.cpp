// One layer's activations per micro-batch on one rank: what it keeps for its backward (Korthikanti et al. 2022 with
// the parts each recompute drops), its norms' statistics, and zero-bubble's deferred weight-gradient set (FORMULAS.md §2).
#include "layer_activations.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/shapes.hpp"

#include <algorithm>

namespace tessel {

namespace {
double d(int64_t v) { return static_cast<double>(v); }

// The parameters of one layer that autocast copies on this rank: its GEMMs' weights and biases (the norms run
// in fp32 and are not copied; counted here, about 1e-4 of a layer).
double autocastCopiedParameters(const ModelConfig& m, const Plan& p) { return layerParameters(m, p).total(); }

// A layer's activations without recompute and the parts of them each selective-recompute module drops (FORMULAS.md
// §2, "Selective recompute by module"). A module checkpointed whole (Megatron-core's tensor_parallel.checkpoint: the
// forward under no_grad, its inputs saved) keeps its input and drops what its ops saved; an output-discarding one
// (CheckpointWithoutOutput) keeps its input and frees its output once the ops after it have saved it, so that
// saved copy goes too.
struct LayerActivationParts {
    double total = 0.0;
    double coreAttn = 0.0;      // the attention core's own: scores, softmax and dropout; flash: the log-sum-exp (and O
                                // under FP8 GEMMs); q, k, v are its inputs and stay, its output is the projection's input
    double inputNormOut = 0.0;  // the input norm's output, the input of the GEMMs after it
    double preMlpNormOut = 0.0; // the pre-MLP norm's output, the input of fc1 (or the router and shared experts)
    double mlaUpProj = 0.0;     // MLA: q, k, v and the latent norms' outputs (the up projections' inputs)
    double mlaUpProjInput = 0.0; // MLA: the rotary key before RoPE, which mla_up_proj's checkpoint keeps as its input
    double mlp = 0.0;           // a dense MLP's, but its input: fc1's input, fc1's output, fc2's input
    double moeAct = 0.0;        // the experts' activation output, fc2's input
    double moe = 0.0;           // an MoE layer's, but its input: router, permuted tokens, experts, shared experts
    double shared = 0.0;        // the shared experts' fc1 output and fc2 input
};
LayerActivationParts layerActivationParts(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);

// What selective recompute's modules drop from a layer, by the block whose backward reruns them: the stored
// activations lose both, and while one block's backward runs its part is alive again (its modules' forward rerun
// just before, their tensors freed as that backward consumes them). Zero but under selective recompute.
SelectiveRebuild selectiveRebuild(const LayerActivationParts& a, const ModelConfig& model, const Plan& plan) {
    SelectiveRebuild r;
    if (plan.recompute != Recompute::Selective || opLevelSelectiveRecompute(model, plan)) return r;
    namespace m = recompute_module;
    // Where two modules overlap (moe holds moe_act and shared_experts) the larger is dropped once.
    if (plan.recomputes(m::CoreAttn)) r.attentionBytes += a.coreAttn;
    if (plan.recomputes(m::Layernorm)) {
        r.attentionBytes += model.mla ? a.inputNormOut : 0.0;
        r.mlpBytes += model.moe ? a.preMlpNormOut : 0.0;
    }
    if (plan.recomputes(m::MlaUpProj)) {
        r.attentionBytes += a.mlaUpProj;
        r.keptInputBytes += a.mlaUpProjInput;
    }
    if (plan.recomputes(m::Mlp) && !model.moe) r.mlpBytes += a.mlp;
    if (plan.recomputes(m::Moe)) r.mlpBytes += a.moe;
    else r.mlpBytes += (plan.recomputes(m::MoeAct) ? a.moeAct : 0.0) + (plan.recomputes(m::SharedExperts) ? a.shared : 0.0);
    return r;
}
} // namespace

SelectiveRebuild layerSelectiveRebuild(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    return selectiveRebuild(layerActivationParts(model, plan, recipe), model, plan);
}

double layerActivationBytes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    if (opLevelSelectiveRecompute(model, plan)) {
        // torchtitan's "op" policy keeps the block input and the outputs it saves: q, v, the attention output
        // and its log-sum-exp, w1 and w2 (every other matmul; FORMULAS.md §3.4).
        const LocalShapes s = localShapes(model, plan, recipe);
        const double e = s.activationBytes;
        return e * d(s.tokensSp) * d(s.hidden) * 2.0 +
               e * d(s.tokens) * (2.0 * d(s.qDimLocal) + d(s.kvDimLocal) + d(s.ffnLocal)) +
               std::max(4.0, e) * d(s.microBatch) * d(s.headsLocal) * d(s.seqLocal);
    }
    if (plan.recompute == Recompute::Full) {
        // Full recompute keeps only each layer's input (Korthikanti et al. 2022 §4: 2sbh per layer, /t with SP),
        // at the residual stream's width (fp32 under autocast).
        const LocalShapes s = localShapes(model, plan, recipe);
        return d(s.residualBytes) * d(s.tokensSp) * d(s.hidden);
    }
    // Selective recompute drops what its modules saved (the attention core alone unless the plan names others).
    const LayerActivationParts a = layerActivationParts(model, plan, recipe);
    const SelectiveRebuild dropped = selectiveRebuild(a, model, plan);
    return a.total - dropped.attentionBytes - dropped.mlpBytes + dropped.keptInputBytes;
}

double layerActivationBytesNoRecompute(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    return layerActivationParts(model, plan, recipe).total;
}

double eagerNormExtraBytes(const ModelConfig& model, const Plan& plan, double residualBytes) {
    return !fusedKernelsOf(plan.framework) && model.norm == NormKind::RmsNorm ? std::max(4.0, residualBytes) : 0.0;
}

namespace {

LayerActivationParts layerActivationParts(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const double e = s.activationBytes, mask = s.maskBytes;
    const double T = d(s.tokens), Tsp = d(s.tokensSp), h = d(s.hidden);
    LayerActivationParts parts;
    double& a = parts.total;
    // Attention block (Korthikanti et al. 2022 §4.1: 11sbh + 5as^2b for MHA, 16-bit, with dropout).
    const double g = s.gemmInputBytes;                  // FP8 (Transformer Engine) saves GEMM inputs cast to FP8
    const double r = s.residualBytes;                   // the residual stream (fp32 under autocast)
    // Eager PyTorch ops (fused_kernels off: torchtitan's Llama without torch.compile; FORMULAS.md §2 "Eager
    // ops"): RMSNorm as x.float() ... type_as(x) * weight keeps the fp32 input (a copy of a 16-bit residual) and
    // the normalised value before the weight besides its output; repeat_kv hands SDPA K and V at every query
    // head; silu(w1 x) * w3 x keeps the SiLU output beside both GEMM outputs. Measured on an H100: 3.25 GiB per
    // Llama 3.1 8B layer at 2 x 8192 tokens, where the fused count gives 2.13 (docs/validation.md).
    const bool eager = !fusedKernelsOf(plan.framework);
    const double eagerNormExtra = eagerNormExtraBytes(model, plan, r);
    const bool repeated = eager && repeatKvOf(plan.framework) && s.kvDimLocal < s.qDimLocal;
    const int64_t kvSaved = repeated ? s.qDimLocal : s.kvDimLocal, vSaved = repeated ? s.oDimLocal : s.vDimLocal;
    a += (r + eagerNormExtra) * Tsp * h;                // norm input (eager: its fp32 copy and the normalised value)
    parts.inputNormOut = g * Tsp * h;                   // QKV GEMM input (norm output; sharded with SP)
    a += parts.inputNormOut;
    const double qkv = e * T * d(s.qDimLocal + kvSaved + vSaved);
    a += qkv;                                           // Q, K, V (GQA: K and V have kv_heads heads; eager: repeated)
    if (model.mla) {
        // MLA's latents, gathered to T rows: each norm keeps its input (the down projection's output) and the up
        // projection its input (the norm's output); the rotary key and q's rotary part keep nothing (RoPE's backward
        // needs only its angles), nor does the concatenation of q and k.
        a += (e + g) * T * d(s.qLatent + s.kvLoraRank);
        // Megatron-core's mla_up_proj reruns the up projections (each with its latent norm, a LayerNormLinear)
        // and RoPE: the latents stay as its inputs; q, k, v and the norms' outputs go.
        parts.mlaUpProj = qkv + g * T * d(s.qLatent + s.kvLoraRank);
        // Its checkpoint's inputs are the latents, kept anyway, and the rotary key before RoPE (k_pos_emb), which
        // nothing else keeps.
        parts.mlaUpProjInput = e * T * d(model.mla->qkRopeHeadDim);
    }
    if (model.qkNorm) {
        // q and k norms: each keeps its input (the QKV GEMM's q and k; eager RMSNorm its fp32 copy and the
        // normalised value too) and its statistics per token and head (1/rms, and the mean for LayerNorm).
        const double stats = model.norm == NormKind::LayerNorm ? 2.0 : 1.0;
        a += (e + eagerNormExtra) * T * d(s.qDimLocal + s.kvDimLocal);
        a += stats * std::max(4.0, e) * T * d(s.headsLocal + s.kvHeadsLocal);
    }
    if (plan.flashAttention) {
        // Log-sum-exp per query and head: fp32 for 16-bit recipes, the compute dtype when it is wider.
        parts.coreAttn = std::max(4.0, e) * d(s.microBatch) * d(s.headsLocal) * d(s.seqLocal);
    } else {
        const double scores = d(s.microBatch) * d(s.headsLocal) * d(s.seqLocal) * d(s.seqFull);
        parts.coreAttn = (e + (mask > 0 ? 1.0 + e : 0.0)) * scores; // softmax output, dropout mask, dropout output
        // Gemma 2's soft-capping keeps its tanh output for tanh's backward (the divide and multiply by a constant
        // keep nothing).
        if (model.attentionSoftcap > 0.0) parts.coreAttn += e * scores;
    }
    a += g * T * d(s.oDimLocal);                        // projection GEMM input (attention output)
    // A fused attention's backward reads its output O (D = rowsum(dO * O)): FlashAttention, cuDNN and Transformer
    // Engine's FusedAttnFunc save it beside Q, K, V. It is the projection's input, the same tensor, in 16-bit
    // recipes; with FP8 GEMMs the projection keeps its own FP8 copy and O stays in the activation type.
    if (plan.flashAttention && g < e) parts.coreAttn += e * T * d(s.oDimLocal);
    a += parts.coreAttn;
    // Gemma 2 / 3's post-attention norm keeps its input, the projection's output (eager: its fp32 copy and the
    // normalised value too); the post-MLP norm the same below.
    const double postNorm = model.postNorms ? (e + eagerNormExtra) * Tsp * h : 0.0;
    a += postNorm;
    a += mask * Tsp * h;                                // dropout mask after the projection
    // MLP block (Korthikanti: 19sbh for f = 4h with GELU).
    // norm input (eager: as the first norm's); a parallel block's MLP norm reads the layer input, which the attention's
    // norm already keeps (its own eager copies are its own)
    a += ((model.parallelResidual ? 0.0 : r) + eagerNormExtra) * Tsp * h;
    parts.preMlpNormOut = g * Tsp * h;                  // fc1 input (norm output)
    a += parts.preMlpNormOut;
    const double before = a;                            // what the MLP block's own tensors add from here
    const double gated = model.gatedMlp() ? 2.0 : 1.0;
    if (model.moe) {
        const double routed = d(s.expertTokens);
        const double router = d(s.moeTokensIn);
        // Router probabilities (softmax kept for the router's backward) and the renormalised top-k gate
        // weights (kept for the weighted combine's backward): fp32, or the compute dtype when wider; over the
        // router's tokens (this rank's own with SP).
        a += std::max(4.0, e) * router * d(model.moe->experts);
        a += std::max(4.0, e) * router * d(s.topK);
        a += g * routed * h;                            // permuted tokens: expert fc1 input
        a += e * routed * d(s.expertFfnLocal) * gated;  // fc1 output (gate+up)
        a += g * routed * d(s.expertFfnLocal);          // fc2 input
        // Expert outputs, kept for the weighted combine: its own copies (router x top-k rows), after expert TP's
        // reduce-scatter and the return all-to-all (Megatron-core's token_unpermutation weights the rows with
        // the probabilities last, on the rank that routed them).
        a += e * router * d(s.topK) * h;
        // Shared experts: a dense MLP over every token beside the routed ones (its input is the norm output above).
        parts.moeAct = g * routed * d(s.expertFfnLocal);
        const double sharedFrom = a;
        a += e * T * d(s.sharedFfnLocal) * gated;       // fc1 output
        a += g * T * d(s.sharedFfnLocal);               // fc2 input
        if (eager && gated > 1.0) a += e * T * d(s.sharedFfnLocal);
        parts.shared = a - sharedFrom;
        parts.moe = a - before;
    } else {
        a += e * T * d(s.ffnLocal) * gated;             // fc1 output = activation input (gate and up)
        a += g * T * d(s.ffnLocal);                     // activation output = fc2 input
        if (eager && gated > 1.0) a += e * T * d(s.ffnLocal); // eager SwiGLU: the SiLU output, kept by the product
        parts.mlp = parts.preMlpNormOut + (a - before);
    }
    a += postNorm;                                      // the post-MLP norm's input (fc2's output)
    a += mask * Tsp * h;                                // dropout mask after fc2
    // Autocast's copy of each weight in the compute dtype, made for this forward and saved by its GEMM for the
    // backward: a micro-batch's copies live as long as its activations (full recompute drops them with the rest
    // of the layer's forward and makes them again). Whole layers: the copy is made from the gathered weight, so
    // ZeRO-3 does not shard it.
    if (s.residualBytes > e) a += e * autocastCopiedParameters(model, plan);
    return parts;
}
} // namespace

double layerNormStatisticsBytes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    // Rebuilt with the layer in backward (full recompute, or torchtitan's op policy, which redoes the norms).
    if (plan.recompute == Recompute::Full || opLevelSelectiveRecompute(model, plan)) return 0.0;
    const LocalShapes s = localShapes(model, plan, recipe);
    // Selective recompute of a norm's module runs its forward under no_grad: no statistics until its rerun. The
    // input norm under layernorm (MLA's; the others are fused into the QKV GEMM), the pre-MLP norm under layernorm
    // (an MoE layer's) or under mlp (a dense layer's, inside Transformer Engine's LayerNormMLP).
    namespace m = recompute_module;
    const bool selective = plan.recompute == Recompute::Selective;
    const int rerun = (selective && plan.recomputes(m::Layernorm) && model.mla ? 1 : 0) +
                      (selective && ((plan.recomputes(m::Layernorm) && model.moe) || (plan.recomputes(m::Mlp) && !model.moe)) ? 1 : 0);
    // Two norms per layer (four with post-norms), each keeping mean and 1/std per token (fp32, or the compute dtype
    // when wider).
    return d((model.postNorms ? 4 : 2) - rerun) * 2.0 * d(s.tokensSp) * std::max(4.0, static_cast<double>(s.activationBytes));
}

double mlpWidthPerToken(const ModelConfig& model, const LocalShapes& s) {
    if (!model.moe) return d(s.ffnLocal);
    return d(s.expertTokens) / d(std::max<int64_t>(1, s.tokens)) * d(s.expertFfnLocal) + d(s.sharedFfnLocal);
}

double weightGradientPendingBytes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const double e = s.activationBytes, T = d(s.tokens), h = d(s.hidden);
    const double gated = model.gatedMlp() ? 2.0 : 1.0;
    const double f = mlpWidthPerToken(model, s);
    // dW = X^T dY for QKV, projection, fc1, fc2: inputs X (norm outputs gathered to T rows, attention output,
    // activation output) and output gradients dY (QKV, projection output, fc1 output, fc2 output).
    // MLA: the up projections' inputs are the latents, and the down projections' outputs have their gradients too.
    const double latents = T * d(s.qLatent + s.kvLoraRank);
    const double qkvOut = model.mla ? d(s.qDimLocal + s.headsLocal * model.mla->qkNopeHeadDim + s.vDimLocal + s.qLatent + s.kvLatent)
                                    : d(s.qDimLocal + s.kvDimLocal + s.vDimLocal);
    const double inputs = 2.0 * T * h + T * d(s.oDimLocal) + T * f + latents;
    const double outputGrads = T * qkvOut + 2.0 * T * h + T * f * gated;
    return e * (inputs + outputGrads);
}

} // namespace tessel
