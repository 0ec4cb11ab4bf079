// Compute cost of a layer, embedding, LM head and optimizer: FLOPs/bytes per op and roofline time (FORMULAS.md §3).
#include "tessel/cost/compute.hpp"

#include <algorithm>

namespace tessel {

namespace {
double d(int64_t v) { return static_cast<double>(v); }

// A GEMM (m x k) @ (k x n): 2mnk FLOPs; reads A and B, writes C (each once, the roofline's lower bound).
OpCost gemm(std::string name, int64_t m, int64_t n, int64_t k, int bytesPerElem, double count = 1.0) {
    OpCost op;
    op.name = std::move(name);
    op.opClass = OpClass::Gemm;
    op.m = m;
    op.n = n;
    op.k = k;
    op.flops = 2.0 * d(m) * d(n) * d(k) * count;
    op.modelFlops = op.flops;
    op.bytes = bytesPerElem * (d(m) * d(k) + d(k) * d(n) + d(m) * d(n)) * count;
    return op;
}

OpCost memoryOp(std::string name, double bytes) {
    OpCost op;
    op.name = std::move(name);
    op.opClass = OpClass::Memory;
    op.bytes = bytes;
    return op;
}

void finishBlock(BlockCompute& b, const ClusterConfig& cluster, Dtype dtype, Recompute recompute) {
    for (auto& op : b.forwardOps) {
        op.seconds = opSeconds(op, cluster, dtype);
        b.forward.add(op);
        // Convention: backward = 2 x forward model FLOPs (Narayanan et al. 2021, §5.1).
        if (op.opClass == OpClass::Gemm) {
            // dX and dW are each one GEMM of the forward's size.
            b.backwardInput.add(op);
            b.backwardWeight.add(op);
        } else if (op.opClass == OpClass::Attention) {
            // FlashAttention-2 backward: 5 matmuls against the forward's 2 (Dao 2023, §3.2) -> 2.5x;
            // unfused attention: dV, dP, dQ, dK -> 2x.
            const double f = op.name == "attention_core_flash" ? 2.5 : 2.0;
            OpCost scaled = op;
            scaled.flops *= f;
            scaled.bytes *= 2.0;
            scaled.seconds = opSeconds(scaled, cluster, dtype);
            scaled.modelFlops = 2.0 * op.modelFlops;
            b.backwardInput.add(scaled);
        } else {
            // Elementwise/norm backward reads the saved input and the output grad, writes the input grad.
            OpCost scaled = op;
            scaled.bytes *= 2.0;
            scaled.seconds = opSeconds(scaled, cluster, dtype);
            b.backwardInput.add(scaled);
        }
        const bool redo = recompute == Recompute::Full ||
                          (recompute == Recompute::Selective && op.opClass == OpClass::Attention);
        if (redo) {
            b.recompute.add(op);
            b.recompute.modelFlops -= op.modelFlops; // recompute is hardware work, not model work
        }
    }
    // GEMM backward model FLOPs were added once for dX and once for dW: 2 x forward in total.
}
} // namespace

double opSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype) {
    const auto& gpu = cluster.gpu;
    double computeSeconds = 0.0;
    if (op.flops > 0.0) {
        const double peak = cluster.peakFlops(dtype);
        double eff = 1.0;
        if (op.opClass == OpClass::Gemm) eff = gemmEfficiency(gpu, std::min({op.m, op.n, op.k}));
        else if (op.opClass == OpClass::Attention) eff = gemmEfficiency(gpu, op.k); // head_dim bounds the tiles
        else eff = 1.0;
        computeSeconds = op.flops / (peak * eff);
    }
    const double memorySeconds = op.bytes / (gpu.hbmBytesPerSecond * gpu.memoryEfficiency);
    // Roofline (Williams, Waterman & Patterson 2009): an op is bound by the slower of compute and memory.
    return std::max(computeSeconds, memorySeconds) + gpu.kernelOverheadSeconds;
}

BlockCompute layerCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                          const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const int e = s.activationBytes;
    const double T = d(s.tokens), Tsp = d(s.tokensSp), h = d(s.hidden);
    BlockCompute b;
    auto& ops = b.forwardOps;
    ops.push_back(memoryOp("norm_attn", 2.0 * e * Tsp * h));
    ops.push_back(gemm("qkv", s.tokens, s.qDimLocal + 2 * s.kvDimLocal, s.hidden, e));
    if (model.position == PositionEmbedding::Rope)
        ops.push_back(memoryOp("rope", 2.0 * e * T * d(s.qDimLocal + s.kvDimLocal)));
    {
        // Attention core per rank: QK^T and PV over a/tp heads, s/cp queries against s keys:
        // 4 * b * heads * s_q * s_kv * head_dim FLOPs (Narayanan et al. 2021, eq. 2 terms).
        OpCost att;
        att.opClass = OpClass::Attention;
        att.m = s.seqLocal;
        att.n = s.seqFull;
        att.k = s.headDim;
        const double full = 4.0 * d(s.microBatch) * d(s.headsLocal) * d(s.seqLocal) * d(s.seqFull) * d(s.headDim);
        att.modelFlops = full;
        const double scores = d(s.microBatch) * d(s.headsLocal) * d(s.seqLocal) * d(s.seqFull);
        const double qkvo = e * T * d(2 * s.qDimLocal + 2 * s.kvDimLocal);
        if (plan.flashAttention) {
            // Causal FlashAttention skips the masked upper triangle: about half the products.
            att.name = "attention_core_flash";
            att.flops = 0.5 * full;
            att.bytes = qkvo;
        } else {
            // Unfused: scores written and read, softmax written and read (+ dropout mask and output).
            att.name = "attention_core";
            att.flops = full;
            att.bytes = qkvo + scores * (4.0 * e + (s.maskBytes ? (1.0 + 2.0 * e) : 0.0));
        }
        ops.push_back(att);
    }
    ops.push_back(gemm("attn_proj", s.tokens, s.hidden, s.qDimLocal, e));
    ops.push_back(memoryOp("residual_attn", (3.0 * e + s.maskBytes) * Tsp * h));
    ops.push_back(memoryOp("norm_mlp", 2.0 * e * Tsp * h));
    const bool swiglu = model.activation == Activation::Swiglu;
    if (model.moe) {
        const double routed = T * d(s.topK);
        ops.push_back(gemm("router", s.tokens, model.moe->experts, s.hidden, e));
        ops.push_back(memoryOp("moe_permute", 2.0 * e * routed * h));
        const int64_t perExpert = std::max<int64_t>(1, static_cast<int64_t>(routed / d(std::max<int64_t>(1, s.expertsLocal))));
        const double nExp = d(s.expertsLocal);
        ops.push_back(gemm("expert_fc1", perExpert, (swiglu ? 2 : 1) * s.expertFfnLocal, s.hidden, e, nExp));
        ops.push_back(memoryOp(swiglu ? "expert_swiglu" : "expert_gelu",
                               (swiglu ? 3.0 : 2.0) * e * routed * d(s.expertFfnLocal)));
        ops.push_back(gemm("expert_fc2", perExpert, s.hidden, s.expertFfnLocal, e, nExp));
        ops.push_back(memoryOp("moe_unpermute", 3.0 * e * routed * h));
    } else {
        ops.push_back(gemm("fc1", s.tokens, (swiglu ? 2 : 1) * s.ffnLocal, s.hidden, e));
        ops.push_back(memoryOp(swiglu ? "swiglu" : "gelu", (swiglu ? 3.0 : 2.0) * e * T * d(s.ffnLocal)));
        ops.push_back(gemm("fc2", s.tokens, s.hidden, s.ffnLocal, e));
    }
    ops.push_back(memoryOp("residual_mlp", (3.0 * e + s.maskBytes) * Tsp * h));
    finishBlock(b, cluster, recipe.computeDtype, plan.recompute);
    return b;
}

BlockCompute embeddingCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                              const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const int e = s.activationBytes;
    BlockCompute b;
    // Vocab-parallel lookup: read token ids, read/write one row per token (rows outside the shard are zeros).
    double bytes = 8.0 * d(s.tokens) + 2.0 * e * d(s.tokens) * d(s.hidden);
    if (model.position == PositionEmbedding::Learned) bytes += 2.0 * e * d(s.tokens) * d(s.hidden);
    OpCost op = memoryOp("embedding", bytes);
    op.seconds = opSeconds(op, cluster, recipe.computeDtype);
    b.forwardOps.push_back(op);
    b.forward.add(op);
    // Backward scatter-adds the output grad into the embedding grad: a weight gradient.
    OpCost back = op;
    back.bytes = 3.0 * e * d(s.tokens) * d(s.hidden);
    back.seconds = opSeconds(back, cluster, recipe.computeDtype);
    b.backwardWeight.add(back);
    if (plan.recompute == Recompute::Full) {
        b.recompute.add(op);
        b.recompute.modelFlops -= op.modelFlops;
    }
    return b;
}

BlockCompute headCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                         const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const int e = s.activationBytes;
    BlockCompute b;
    b.forwardOps.push_back(memoryOp("norm_final", 2.0 * e * d(s.tokensSp) * d(s.hidden)));
    b.forwardOps.push_back(gemm("lm_head", s.tokens, s.vocabLocal, s.hidden, e));
    // Fused vocab-parallel cross-entropy: reads the logits, keeps fp32 softmax for backward.
    b.forwardOps.push_back(memoryOp("cross_entropy", (e + 4.0 + 4.0) * d(s.tokens) * d(s.vocabLocal)));
    finishBlock(b, cluster, recipe.computeDtype, Recompute::None);
    return b;
}

OpCost optimizerCompute(double localParameters, const ClusterConfig& cluster, const PrecisionRecipe& recipe) {
    // AdamW reads the grad, reads and writes the master (or the weights) and both moments, and writes the
    // low-precision weights when a master copy exists. ~12 FLOPs per parameter, memory bound.
    const double master = recipe.masterBytes > 0 ? recipe.masterBytes : recipe.weightBytes;
    double perParam = recipe.gradBytes + 2.0 * master + 4.0 * recipe.momentBytes;
    if (recipe.masterBytes > 0) perParam += recipe.weightBytes;
    OpCost op = memoryOp("optimizer_step", perParam * localParameters);
    op.flops = 12.0 * localParameters;
    op.seconds = opSeconds(op, cluster, recipe.computeDtype);
    return op;
}

double modelFlopsPerStep(const ModelConfig& model, const Plan& plan) {
    // Evaluate on one rank with no model-parallel split, one sequence, then scale by the global batch.
    Plan one = plan;
    one.tp = one.cp = one.ep = one.dp = one.pp = 1;
    one.vpp = 1;
    one.sequenceParallel = false;
    one.microBatch = 1;
    ClusterConfig dummy;
    dummy.gpu.hbmBytesPerSecond = 1.0;
    dummy.gpu.peakFlopsPerSecond[Dtype::Bf16] = 1.0;
    const PrecisionRecipe& recipe = *findPrecisionRecipe("mixed");
    auto sumForward = [](const BlockCompute& b) {
        double f = 0.0;
        for (const auto& op : b.forwardOps) f += op.modelFlops;
        return f;
    };
    const double perSequence = model.layers * sumForward(layerCompute(model, dummy, one, recipe)) +
                               sumForward(headCompute(model, dummy, one, recipe));
    return 3.0 * perSequence * plan.globalBatch;
}

} // namespace tessel
