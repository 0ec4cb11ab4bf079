// Compute cost of a transformer layer: the ops it is made of, their FLOPs and bytes, and the phases they run in
// (FORMULAS.md §3); the ops every block builds on (compute_ops.hpp). How long one kernel takes is kernel_time.cpp's;
// attention's own ops (MLA's projections, context parallelism's kernels) compute_attention.cpp's; the embedding, the
// output layer and loss and the optimizer compute_ends.cpp's.
#include "tessel/cost/compute.hpp"

#include "compute_ops.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace tessel {

namespace compute_detail {
double d(int64_t v) { return static_cast<double>(v); }

// A GEMM (m x k) @ (k x n): 2mnk FLOPs; reads A and B, writes C (each once, the roofline's lower bound).
OpCost gemm(std::string name, int64_t m, int64_t n, int64_t k, int bytesPerElem, double count) {
    OpCost op;
    op.name = std::move(name);
    op.kernel = "gemm";
    op.opClass = OpClass::Gemm;
    op.m = m;
    op.n = n;
    op.k = k;
    op.batch = std::max<int64_t>(1, static_cast<int64_t>(count));
    op.flops = kernel_cost::gemmFlops(m, n, k) * count;
    op.modelFlops = op.flops;
    op.bytes = kernel_cost::gemmBytes(m, n, k, bytesPerElem) * count;
    return op;
}

// A memory-bound op; `kernel` names its kernel without the phase ("norm" -> "norm_forward"/"norm_backward").
OpCost memoryOp(std::string name, std::string kernel, double bytes) {
    OpCost op;
    op.name = std::move(name);
    op.kernel = std::move(kernel);
    op.opClass = OpClass::Memory;
    op.bytes = bytes;
    return op;
}

OpCost softcapOp(const char* name, double elements, int e) {
    OpCost op = memoryOp(name, "softcap", kernel_cost::eagerSoftcapBytes(elements, e));
    op.backwardByteFactor = kernel_cost::kEagerSoftcapBackwardFactor;
    op.hasWeights = false;
    return op;
}

// A pre-norm (or the final norm) as the framework runs it (FORMULAS.md §3.4, §3.5). LayerNorm is one native kernel
// either way; eager RMSNorm is torchtitan's chain of ops. Under autocast it reads the fp32 residual stream and
// writes fp32 (eager: the cast to the GEMM's input is its own kernel, autocast_casts) or, compiled, writes the
// GEMM's input with the cast fused in.
OpCost normOp(const char* name, const ModelConfig& model, const LocalShapes& s, bool eager, bool autocast) {
    const int e = s.activationBytes, r = s.residualBytes;
    if (eager && model.norm == NormKind::RmsNorm) {
        OpCost op = memoryOp(name, "norm", kernel_cost::eagerRmsNormBytes(s.tokensSp, s.hidden, r));
        op.backwardByteFactor = kernel_cost::eagerRmsNormBackwardFactor(r);
        return op;
    }
    if (autocast && !eager) return memoryOp(name, "norm", d(r + e) * d(s.tokensSp) * d(s.hidden));
    return memoryOp(name, "norm", kernel_cost::normBytes(s.tokensSp, s.hidden, r));
}

// The kernels one forward op of a block stands for, each handed to `emit` with the phase it runs in: the forward
// kernel, its backward (a GEMM's dX and dW, attention's backward kernel, an elementwise op's backward) and, where
// the plan recomputes it, the forward again. `seconds(op)` times a kernel; `op` is left as its forward kernel
// (named by phase, timed). Selective recompute reruns the ops of the plan's modules (`modules`, recompute_module
// bits): the attention core's ops by their kind, the others by the module their block gave them.
enum class BlockPhase { Forward, BackwardInput, BackwardWeight, Recompute };
template <class Seconds, class Emit>
void forEachKernel(OpCost& op, Recompute recompute, uint8_t modules, Seconds seconds, Emit emit) {
    const std::string kernel = op.kernel;
    if (op.opClass != OpClass::Gemm) op.kernel = kernel + "_forward";
    op.seconds = seconds(op);
    emit(op, BlockPhase::Forward);
    if (op.noBackward) return; // computed where it stands, its gradients its block's other ops; never recomputed
    // Convention: backward = 2 x forward model FLOPs (Narayanan et al. 2021, §5.1).
    if (op.opClass == OpClass::Gemm) {
        // dX and dW are each one GEMM of the forward's size (for attention's batched GEMMs both gradients
        // are input gradients: no weights).
        emit(op, BlockPhase::BackwardInput);
        emit(op, op.hasWeights ? BlockPhase::BackwardWeight : BlockPhase::BackwardInput);
    } else if (op.opClass == OpClass::Attention) {
        // FlashAttention-2 backward: 5 matmuls against the forward's 2 (Dao 2023, §3.2) -> 2.5x;
        // unfused attention: dV, dP, dQ, dK -> 2x.
        const bool flash = op.name.rfind("attention_core_flash", 0) == 0; // the ring's steps too
        const double f = flash ? kernel_cost::kFlashBackwardFlopFactor : 2.0;
        OpCost scaled = op;
        scaled.kernel = kernel + "_backward";
        scaled.backward = true;
        scaled.flops *= f;
        scaled.bytes *= kernel_cost::kBackwardByteFactor;
        scaled.seconds = seconds(scaled);
        scaled.modelFlops = 2.0 * op.modelFlops;
        emit(scaled, BlockPhase::BackwardInput);
    } else {
        // Elementwise/norm backward reads the saved input and the output grad, writes the input grad. An op
        // whose inputs need no gradient (ALiBi's fixed bias) has no backward kernel.
        if (op.backwardByteFactor > 0.0) {
            OpCost scaled = op;
            scaled.kernel = kernel + "_backward";
            scaled.bytes *= op.backwardByteFactor;
            scaled.seconds = seconds(scaled);
            emit(scaled, BlockPhase::BackwardInput);
        }
    }
    const bool attentionCore = op.opClass == OpClass::Attention || !op.hasWeights || op.kernel == "softmax_forward" ||
                               op.kernel == "dropout_forward";
    if (op.notRecomputed) return;
    const uint8_t module = attentionCore ? recompute_module::CoreAttn : op.module;
    if (recompute == Recompute::Full || (recompute == Recompute::Selective && (module & modules) != 0))
        emit(op, BlockPhase::Recompute);
}

// The block's duty and the share of their benchmarked rate its tensor-core kernels sustain at the power limit
// (FORMULAS.md §3.3). The duty is the block's tensor-core load over its kernel time, both at benchmark rates
// (forward, backward and recompute together): a kernel's load is the time its FLOPs would take at the GEMM
// plateau, so a GEMM at the plateau loads the tensor cores for all of its time and an attention kernel at two
// thirds of the plateau's rate for two thirds of it (the power probe: causal attention held alone sustained what
// GEMMs at its load do). The probe sets its duty cycles by the GEMMs' time at the start of a burst, so the duty
// is taken at benchmark rates too.
void setTensorShare(BlockCompute& b, const ClusterConfig& cluster, Dtype dtype, Recompute recompute, uint8_t modules) {
    if (cluster.gpu.sustainedShareByDuty.empty()) {
        b.tensorShare = cluster.gpu.sustainedTensorFraction;
        return;
    }
    double load = 0.0, total = 0.0;
    for (OpCost op : b.forwardOps)
        forEachKernel(op, recompute, modules, [&](const OpCost& k) { return opSeconds(k, cluster, dtype, 1.0); },
                      [&](const OpCost& k, BlockPhase) {
                          total += k.seconds;
                          const Dtype kd = k.dtype ? *k.dtype : dtype;
                          if (k.opClass == OpClass::Memory || k.flops <= 0.0 || !runsOnTensorCores(kd)) return;
                          const double plateau = cluster.peakFlops(kd) * gemmPlateauEfficiency(cluster.gpu, kd);
                          load += std::min(k.seconds, k.flops / plateau);
                      });
    b.tensorDuty = total > 0.0 ? load / total : 0.0;
    b.tensorShare = cluster.gpu.sustainedTensorShare(b.tensorDuty);
}

void finishBlock(BlockCompute& b, const ClusterConfig& cluster, Dtype dtype, Recompute recompute, uint8_t modules) {
    setTensorShare(b, cluster, dtype, recompute, modules);
    for (OpCost& op : b.forwardOps)
        forEachKernel(op, recompute, modules, [&](const OpCost& k) { return opSeconds(k, cluster, dtype, b.tensorShare); },
                      [&](const OpCost& k, BlockPhase phase) {
                          if (k.opClass == OpClass::Attention && (phase == BlockPhase::Forward || phase == BlockPhase::BackwardInput)) {
                              const bool fwd = phase == BlockPhase::Forward;
                              if (k.name == "attention_core_flash_ring") (fwd ? b.ringStepsForwardSeconds : b.ringStepsBackwardSeconds) += k.seconds;
                              else if (k.name == "attention_core_flash") (fwd ? b.ringDiagForwardSeconds : b.ringDiagBackwardSeconds) += k.seconds;
                          }
                          switch (phase) {
                          case BlockPhase::Forward: b.forward.add(k); break;
                          case BlockPhase::BackwardInput: b.backwardInput.add(k); break;
                          case BlockPhase::BackwardWeight: b.backwardWeight.add(k); break;
                          case BlockPhase::Recompute:
                              b.recompute.add(k);
                              b.recompute.modelFlops -= k.modelFlops; // recompute is hardware work, not model work
                              break;
                          }
                      });
    // GEMM backward model FLOPs were added once for dX and once for dW: 2 x forward in total.
    if (b.ringStepsForwardSeconds <= 0.0) b.ringDiagForwardSeconds = b.ringDiagBackwardSeconds = 0.0; // no ring
}
} // namespace compute_detail
using namespace compute_detail;


namespace compute_detail {
// Adding this micro-batch's weight gradients of `parameters` (held by the rank, before ZeRO sharding) into the
// step's accumulated gradients: a memory-bound weight-gradient op (FORMULAS.md §3.6).
void addGradAccumulation(BlockCompute& b, double parameters, const ClusterConfig& cluster, const Plan& plan,
                         const PrecisionRecipe& recipe) {
    double perParameter = gradAccumulationBytesPerParameter(
        plan.framework, plan.pp, plan.zeroStage, plan.zeroShardSize(), plan.microBatchesPerStep(), recipe.weightBytes,
        recipe.gradBytes, recipe.autocast);
    // FSDP's no_sync: each later micro-batch's gradient added into the unsharded one (reads both, writes one), with
    // no reduce-scatter between: FSDP1's by autograd in the gathered parameter's dtype; FSDP2's upcast once to the
    // reduce dtype after the first backward (reads e, writes a) and each later one added into it (a + e + a), the
    // total of a step spread over its micro-batches.
    if (fsdpReducesOncePerStep(plan.framework, plan.pp, plan.zeroStage) &&
        !fsdpGathersOncePerStep(plan.framework, plan.pp, plan.zeroStage)) {
        const double m = std::max(1, plan.microBatchesPerStep());
        const double e = recipe.paramGatherBytes(), a = fsdpNoSyncGradBytes(plan.framework, recipe);
        perParameter = a == e ? 3.0 * e * (m - 1.0) / m : (e + a + (m - 1.0) * (2.0 * a + e)) / m;
    }
    if (!(perParameter > 0.0) || !(parameters > 0.0)) return;
    OpCost op = memoryOp("grad_accumulate", "grad_accumulate_backward", perParameter * parameters);
    op.seconds = opSeconds(op, cluster, recipe.computeDtype);
    b.backwardWeight.add(op);
}

// PyTorch FSDP's copies around a sharded unit's collectives, each micro-batch (FORMULAS.md §3.7): the gathered
// weights' copies in the forward (and the backward's gather), the gradient's assembly, cast and divides in the
// backward. Memory-bound kernels on the compute stream or contending with it.
FsdpCopyBytes fsdpCopies(const Plan& plan, const PrecisionRecipe& recipe) {
    // Most plans the search weighs are not PyTorch FSDP: no overlap settings resolved for them.
    const bool fsdp = plan.framework.name == "fsdp" || plan.framework.name == "torchtitan";
    if (!fsdp || plan.zeroStage < 2 || plan.zeroShardSize() < 2) return {};
    const OverlapSettings o = resolveOverlap(plan.framework, plan.schedule == Schedule::Interleaved1F1B, plan.zeroStage);
    return fsdpCopyBytesPerParameter(plan.framework, plan.pp, plan.zeroStage, plan.zeroShardSize(),
                                     plan.microBatchesPerStep(), o.reshardAfterForward,
                                     static_cast<int>(bytesPerElement(recipe.computeDtype)), recipe.gradReduceBytes(),
                                     recipe.weightBytes, recipe.paramGatherBytes());
}

void addFsdpCopies(BlockCompute& b, double parameters, const ClusterConfig& cluster, const Plan& plan,
                   const PrecisionRecipe& recipe) {
    const FsdpCopyBytes per = fsdpCopies(plan, recipe);
    if (!(parameters > 0.0)) return;
    if (per.forward > 0.0) {
        OpCost op = memoryOp("fsdp_copies", "cast_forward", per.forward * parameters);
        op.seconds = opSeconds(op, cluster, recipe.computeDtype);
        b.forward.add(op);
    }
    if (per.backward > 0.0) {
        OpCost op = memoryOp("fsdp_copies", "cast_backward", per.backward * parameters);
        op.seconds = opSeconds(op, cluster, recipe.computeDtype);
        b.backwardWeight.add(op);
    }
}
void addParameterPasses(BlockCompute& b, double parameters, const ClusterConfig& cluster, const Plan& plan,
                        const PrecisionRecipe& recipe) {
    addGradAccumulation(b, parameters, cluster, plan, recipe);
    addFsdpCopies(b, parameters, cluster, plan, recipe);
}
} // namespace compute_detail

namespace {
BlockCompute layerComputeOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                             const PrecisionRecipe& recipe);
} // namespace

namespace {
// Host time of one eager PyTorch kernel, per kernel tessel costs: a stack of pre-norm GPT blocks (LayerNorm, QKV,
// causal SDPA, projection, LayerNorm, 4x MLP, GELU, residual adds) under autocast launched about 61 kernels a layer's
// forward and backward at 23-29 us of host time each, 1.4-1.8 ms a layer (bench/gpu_kernels_probe.py --only host
// on a lent H100's host; docs/gpu-report-h100-2026-11-26.md §4); tessel costs that block's forward and backward as
// 24 kernels (10 forward, 8 GEMM gradients, 6 others), so 1.6 ms / 24 each.
constexpr double kEagerHostSecondsPerKernel = 1.6e-3 / 24.0;

// The host's launches (FORMULAS.md §3.8). Blocking (CUDA_LAUNCH_BLOCKING=1): each launch returns once its kernel is
// done, so the host's time before the next kernel is the GPU's idle time, in every phase that launches kernels.
// Asynchronous, with eager PyTorch ops (fused_kernels off): the host runs ahead of the GPU through its queue, and a
// phase whose kernels take less than their launches lasts as long as the launches (the host-bound floor). With
// fused or compiled kernels the per-kernel host time is not measured, and nothing is charged; nor on a device that
// runs its ops in the caller's thread (the CPU presets: no queue to run ahead of).
void addHostLaunches(BlockCompute& b, const ClusterConfig& cluster, const Plan& plan) {
    const bool blocking = launchBlockingOf(plan.framework);
    if (!blocking && (fusedKernelsOf(plan.framework) || !cluster.gpu.overlapsCommunication)) return;
    double kernels[4] = {0.0, 0.0, 0.0, 0.0}; // by BlockPhase
    for (OpCost op : b.forwardOps)
        forEachKernel(op, plan.recompute, plan.recomputeModules, [](const OpCost&) { return 0.0; },
                      [&](const OpCost&, BlockPhase phase) { kernels[static_cast<int>(phase)] += 1.0; });
    const double h = kEagerHostSecondsPerKernel;
    PhaseCost* phases[4] = {&b.forward, &b.backwardInput, &b.backwardWeight, &b.recompute};
    const BlockPhase order[4] = {BlockPhase::Forward, BlockPhase::BackwardInput, BlockPhase::BackwardWeight,
                                 BlockPhase::Recompute};
    for (int i = 0; i < 4; ++i) {
        const double host = h * kernels[static_cast<int>(order[i])];
        if (blocking) {
            phases[i]->seconds += host;
            b.launchHostSeconds += host;
        } else if (host > phases[i]->seconds) {
            b.hostWaitSeconds += host - phases[i]->seconds;
            phases[i]->seconds = host;
        }
    }
}
} // namespace

BlockCompute layerCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                          const PrecisionRecipe& recipe) {
    BlockCompute b = layerComputeOps(model, cluster, plan, recipe);
    addParameterPasses(b, layerParameters(model, plan).total(), cluster, plan, recipe);
    addHostLaunches(b, cluster, plan);
    return b;
}

namespace {
BlockCompute layerComputeOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                             const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    const int e = s.activationBytes;
    const double T = d(s.tokens), h = d(s.hidden);
    BlockCompute b;
    auto& ops = b.forwardOps;
    // Fused kernels, or each op of the model's eager PyTorch code (FORMULAS.md §3.4).
    const bool eager = !fusedKernelsOf(plan.framework);
    // The residual stream's width: fp32 under autocast over fp32 parameters, else the activations'.
    const int r = s.residualBytes;
    namespace rm = recompute_module;
    // Each op's selective-recompute module (Megatron-core's --recompute-modules; the attention core's ops are known by
    // their kind). Transformer Engine fuses a pre-norm into the GEMM after it (LayerNormLinear, LayerNormMLP) but
    // where that is not a TE linear: MLA's input norm before its down projections, an MoE layer's pre-MLP norm before
    // the router; those are the layernorm module's. A dense layer's pre-MLP norm is inside its MLP.
    auto in = [](OpCost op, uint8_t module) {
        op.module = module;
        return op;
    };
    auto norm = [&](const char* name) { return normOp(name, model, s, eager, recipe.autocast); };
    ops.push_back(in(norm("norm_attn"), model.mla ? rm::Layernorm : 0));
    if (model.mla) addLatentProjections(ops, model, s, plan, eager);
    else ops.push_back(gemm("qkv", s.tokens, s.qDimLocal + 2 * s.kvDimLocal, s.hidden, e));
    if (model.qkNorm) {
        // The norm over each head of q and k (Qwen3, --qk-layernorm): one row a token and head, read and written;
        // eager RMSNorm moves its chain of ops' bytes, as the pre-norms do.
        const int64_t cols = s.qDimLocal + s.kvDimLocal;
        const bool eagerRms = eager && model.norm == NormKind::RmsNorm;
        OpCost qk = memoryOp("qk_norm", "norm", eagerRms ? kernel_cost::eagerRmsNormBytes(s.tokens, cols, e)
                                                         : kernel_cost::normBytes(s.tokens, cols, e));
        if (eagerRms) qk.backwardByteFactor = kernel_cost::eagerRmsNormBackwardFactor(e);
        ops.push_back(qk);
    }
    if (model.position == PositionEmbedding::Rope && !model.mla) {
        // A partial rotary (rotary_percent < 1) costs the fused kernel the same bytes: Transformer Engine's
        // fused_rope writes a new tensor and copies the unrotated tail into it ("copy the rest", fused_rope.cu).
        // Eager, the fp32 chain runs over the rotated columns and torch.cat then copies the whole head back
        // together (Megatron-core's _apply_rotary_pos_emb_bshd, transformers' GPT-NeoX and Phi-3).
        const int64_t cols = s.qDimLocal + s.kvDimLocal;
        const int64_t rotated = (s.headsLocal + s.kvHeadsLocal) * model.rotaryDim();
        const double eagerBytes = kernel_cost::eagerRopeBytes(s.tokens, rotated, e) +
                                  (rotated < cols ? kernel_cost::ropeBytes(s.tokens, cols, e) : 0.0);
        OpCost rope = memoryOp("rope", "rope", eager ? eagerBytes : kernel_cost::ropeBytes(s.tokens, cols, e));
        if (eager) rope.backwardByteFactor = 1.0;
        ops.push_back(rope);
    }
    {
        // Attention core per rank: QK^T and PV over a/tp heads, s/cp queries against s keys:
        // 2 * b * heads * s_q * s_kv * (qk head_dim + v head_dim) FLOPs, 4 * ... * head_dim where both are one
        // width (Narayanan et al. 2021, eq. 2 terms; MLA's heads are nope + rope wide for QK^T, v_head_dim for PV).
        const double full = attentionCoreFlops(s, s.seqLocal, s.seqFull);
        // The MFU convention counts every query against every key (PaLM appendix B's 12 L H Q T); under a sliding
        // window each query has w keys in place of s, so the model's attention FLOPs are w / s of that.
        const bool windowed = model.slidingWindow > 0 && model.slidingWindow < s.seqFull;
        const double modelShare = windowed ? d(model.slidingWindow) / d(s.seqFull) : 1.0;
        if (plan.flashAttention) {
            // Causal FlashAttention skips the masked upper triangle: about half the products; Q, K, V, O move once.
            OpCost att;
            att.kernel = "attention";
            // "auto": the kernel the plan's framework version ran where its launcher chose one (NeMo 24.01-24.07's
            // flash-attn 2, attentionKernelDefaultOf), else the GPU's default (resolveAttentionKernel), else one that
            // soft-caps for a model that needs it (attentionKernelOf).
            att.variant = plan.attentionKernel;
            if (const std::string launcher = launcherAttentionKernelOf(plan, cluster.gpu); att.variant == "auto" && !launcher.empty())
                att.variant = launcher;
            if (const std::string kernel = attentionKernelOf(model, plan, cluster.gpu); kernel != resolveAttentionKernel(cluster.gpu, att.variant))
                att.variant = kernel;
            att.opClass = OpClass::Attention;
            att.m = s.seqLocal;
            att.n = s.seqFull;
            att.k = s.headDim;
            att.batch = s.microBatch * s.headsLocal;
            att.sequences = s.microBatch;
            att.kvHeads = std::max<int64_t>(s.kvHeadsLocal, 1);
            att.modelFlops = full * modelShare;
            att.name = "attention_core_flash";
            att.flops = 0.5 * full;
            if (windowed) {
                // A sliding window: the kernel skips the key blocks left of the band (flash-attn's window_size,
                // cuDNN's (left, 0) window) and runs at the rate of a causal kernel as long as the window.
                att.flops *= slidingWindowKeyFraction(s.seqFull, model.slidingWindow);
                att.n = model.slidingWindow;
            }
            att.bytes = kernel_cost::attentionBytes(s.tokens, s.qDimLocal, s.kvDimLocal, s.vDimLocal, s.oDimLocal, e);
            att.dropout = model.dropout > 0.0;
            // tessel's own executor (`tessel run`, marked by its in-place loss) gathers K and V over the group and
            // runs one kernel over all the keys (executor/src/gpt.cpp): the whole share as one op.
            const bool ownExecutor = plan.framework.lossInPlace.value_or(false);
            if (plan.cp > 1 && !ownExecutor && plan.cpComm == CpComm::P2p) addRingAttention(ops, att, s, plan, e);
            else if (plan.cp > 1 && !ownExecutor) addCpAttention(ops, att, s, plan, e);
            else ops.push_back(att);
        } else {
            // Unfused (Megatron-LM before FlashAttention): batched QK^T writes the b (a/t) s_q s_kv scores to HBM,
            // the fused scale-mask-softmax rewrites them, dropout (when the model has it) reads them and writes
            // its output and mask, and a batched PV reads them again. Each is its own kernel, so the times add.
            const int64_t batch = s.microBatch * s.headsLocal;
            const double scores = d(batch) * d(s.seqLocal) * d(s.seqFull);
            if (model.position == PositionEmbedding::Alibi) {
                // ALiBi in the unfused path (Megatron-DeepSpeed's BLOOM code): the scores GEMM is a baddbmm whose
                // input is the per-head bias broadcast over the queries, with beta = 1. PyTorch copies that input
                // into the output before the batched GEMM accumulates into it (baddbmm_out_cuda), so the scores are
                // written once more and read back by the GEMM. The bias is a buffer: nothing in backward.
                OpCost alibi = memoryOp("attention_alibi", "permute", kernel_cost::alibiBiasBytes(scores, e));
                alibi.backwardByteFactor = 0.0;
                alibi.hasWeights = false; // part of the core attention selective recompute reruns
                ops.push_back(alibi);
            }
            OpCost qk = gemm("attention_scores", s.seqLocal, s.seqFull, s.headDim, e, d(batch));
            qk.hasWeights = false;
            qk.perHead = true;
            qk.modelFlops = qk.flops * modelShare;
            ops.push_back(qk);
            // Gemma 2's soft-capping of the scores before the mask and softmax (Hugging Face's eager Gemma2Attention,
            // NeMo's Gemma2DotProductAttention): its three ops over every score.
            if (model.attentionSoftcap > 0.0) ops.push_back(softcapOp("attention_softcap", scores, e));
            if (eager) {
                // The model's own ops on the scores (FORMULAS.md §3.4): scale, mask, softmax, each a pass.
                OpCost sm = memoryOp("attention_softmax", "softmax", kernel_cost::eagerScaleMaskSoftmaxBytes(scores, e));
                sm.backwardByteFactor = kernel_cost::eagerScaleMaskSoftmaxBackwardFactor();
                ops.push_back(sm);
            } else {
                ops.push_back(memoryOp("attention_softmax", "softmax", kernel_cost::softmaxBytes(scores, e)));
            }
            if (s.maskBytes) {
                OpCost drop = memoryOp("attention_dropout", "dropout", kernel_cost::dropoutBytes(scores, e));
                drop.backwardByteFactor = 1.0; // backward reads the gradient and mask, writes one gradient
                ops.push_back(drop);
            }
            OpCost pv = gemm("attention_context", s.seqLocal, s.vHeadDim, s.seqFull, e, d(batch));
            pv.hasWeights = false;
            pv.perHead = true;
            pv.modelFlops = pv.flops * modelShare;
            ops.push_back(pv);
        }
    }
    const bool unpadded = plan.framework.attentionUnpad.value_or(false) && plan.flashAttention;
    if (unpadded) {
        // llm-foundry's flash_attn_fn: q, k, v gathered into the varlen layout, the output scattered back, which
        // also lays it out for the projection (no eager layout copy beside it; FORMULAS.md §3.4).
        const double qkv = T * d(s.qDimLocal + s.kvDimLocal + s.vDimLocal), out = T * d(s.oDimLocal);
        OpCost unpad = memoryOp("attention_unpad", "permute", kernel_cost::unpadForwardBytes(qkv, out, e));
        unpad.backwardByteFactor = kernel_cost::unpadBackwardBytes(qkv, out, e) / unpad.bytes;
        ops.push_back(unpad);
    }
    if (eager && !unpadded) {
        // repeat_kv's copy only where the model code repeats K and V (repeatKvOf; SDPA's enable_gqa takes them as
        // they are, which the layout reads as K and V already at the query heads' width: nothing expanded).
        const int64_t kvCols = repeatKvOf(plan.framework) ? s.kvDimLocal : s.qDimLocal;
        OpCost layout = memoryOp("attention_layout", "permute", kernel_cost::eagerAttentionLayoutBytes(s.tokens, s.qDimLocal, kvCols, e));
        layout.backwardByteFactor = 1.0;
        ops.push_back(layout);
    }
    ops.push_back(gemm("attn_proj", s.tokens, s.hidden, s.oDimLocal, e));
    // Gemma 2 / 3's norm of the attention block's output before its residual add (and of the MLP's, below): the
    // norm's bytes over the same tokens (after the projection's reduce-scatter with SP); rerun by full recompute.
    if (model.postNorms) ops.push_back(norm("norm_post_attn"));
    ops.push_back(memoryOp("residual_attn", "residual", kernel_cost::residualBytes(s.tokensSp, s.hidden, e, s.maskBytes, r)));
    ops.push_back(in(norm("norm_mlp"), model.moe ? rm::Layernorm : rm::Mlp));
    const bool swiglu = model.gatedMlp();
    // Squared ReLU moves GELU's bytes (read the fc1 output, write its activation; backward the same again): it is
    // costed as the gelu kernel under its own name. GeGLU moves SwiGLU's (read gate and up, write their product; its
    // tanh-GELU's few more FLOPs an element stay under the bytes): the swiglu kernel under its own name.
    const std::string activation = toString(model.activation);
    if (model.moe) {
        // The router and the local permutation see this rank's own tokens (moeTokensIn: T / tp with SP); the
        // experts see what EP dispatched and the expert-TP group gathered (expertTokens, LocalShapes).
        const double dispatched = d(s.moeTokensIn) * d(s.topK);
        const double routed = d(s.expertTokens);
        ops.push_back(in(gemm("router", s.moeTokensIn, model.moe->experts, s.hidden, e), rm::Moe));
        ops.push_back(in(memoryOp("moe_permute", "permute", 2.0 * e * dispatched * h), rm::Moe));
        const int64_t perExpert = std::max<int64_t>(1, static_cast<int64_t>(routed / d(std::max<int64_t>(1, s.expertsLocal))));
        const double nExp = d(s.expertsLocal);
        ops.push_back(in(gemm("expert_fc1", perExpert, (swiglu ? 2 : 1) * s.expertFfnLocal, s.hidden, e, nExp), rm::Moe));
        ops.push_back(in(memoryOp("expert_" + activation, swiglu ? "swiglu" : "gelu",
                                  (swiglu ? 3.0 : 2.0) * e * routed * d(s.expertFfnLocal)),
                         rm::Moe | rm::MoeAct));
        ops.push_back(in(gemm("expert_fc2", perExpert, s.hidden, s.expertFfnLocal, e, nExp), rm::Moe));
        ops.push_back(in(memoryOp("moe_unpermute", "permute", 3.0 * e * dispatched * h), rm::Moe));
        if (s.sharedFfnLocal > 0) {
            // Shared experts: a dense MLP over every token, TP-split as the dense MLP is; its output joins the
            // routed experts' before the block's residual add (no collective of its own is costed).
            const uint8_t shared = rm::Moe | rm::SharedExperts;
            ops.push_back(in(gemm("shared_fc1", s.tokens, (swiglu ? 2 : 1) * s.sharedFfnLocal, s.hidden, e), shared));
            ops.push_back(in(memoryOp("shared_" + activation, swiglu ? "swiglu" : "gelu",
                                      kernel_cost::activationBytes(swiglu, s.tokens, s.sharedFfnLocal, e)),
                             shared));
            ops.push_back(in(gemm("shared_fc2", s.tokens, s.hidden, s.sharedFfnLocal, e), shared));
        }
    } else {
        ops.push_back(in(gemm("fc1", s.tokens, (swiglu ? 2 : 1) * s.ffnLocal, s.hidden, e), rm::Mlp));
        if (swiglu && eager) {
            OpCost act = memoryOp(activation, "swiglu", kernel_cost::eagerSwigluBytes(s.tokens, s.ffnLocal, e));
            act.backwardByteFactor = kernel_cost::kEagerSwigluBackwardFactor;
            ops.push_back(in(act, rm::Mlp));
        } else {
            ops.push_back(in(memoryOp(activation, swiglu ? "swiglu" : "gelu", kernel_cost::activationBytes(swiglu, s.tokens, s.ffnLocal, e)),
                             rm::Mlp));
        }
        ops.push_back(in(gemm("fc2", s.tokens, s.hidden, s.ffnLocal, e), rm::Mlp));
    }
    if (model.postNorms) ops.push_back(norm("norm_post_mlp"));
    ops.push_back(memoryOp("residual_mlp", "residual", kernel_cost::residualBytes(s.tokensSp, s.hidden, e, s.maskBytes, r)));
    if (recomputeStopsBeforeFc2(model, plan)) {
        // torch.utils.checkpoint's early stop (non-reentrant, PyTorch >= 2.1): the recompute ends when fc2
        // saves its input, the last tensor the backward needs (autograd saves a GEMM's inputs before its
        // kernel runs), so fc2 and the residual add after it, which saves nothing, are not rerun. With hidden
        // dropout its mask is saved after fc2, and nothing is skipped. Measured: torchtitan's Llama 3 8B
        // block recomputes in 14.3-14.4 ms against a 16.9-17.1 ms forward on an H200 and an H100 (FORMULAS.md
        // §3.4). JAX's remat (jax.checkpoint) recomputes only the linearization points the backward consumes,
        // so fc2, a linear map whose output nothing in the backward reads, is not rerun either; the same
        // holds where selective recompute reruns the MLP.
        ops[ops.size() - 2].notRecomputed = true;
        ops.back().notRecomputed = true;
    }
    const bool asyncTp = plan.tp > 1 && plan.sequenceParallel && torchAsyncTpOf(plan.framework) &&
                         resolveOverlap(plan.framework, plan.vpp > 1, plan.zeroStage).tpCommOverlap;
    if (asyncTp) {
        // PyTorch's async TP (torchAsyncTpOf): its fused matmul + reduce-scatter exchanges the tp partial outputs by
        // copy engine and then sums them in one reduction kernel on the compute stream, reading the stacked partials
        // (T x h) and writing the rank's T/tp x h (torch/distributed/_symmetric_memory/__init__.py,
        // _fused_matmul_reduce_scatter_impl: reduce_fn over stacked_partials), where NCCL's reduce-scatter sums
        // inside its ring. One after the projection, one after fc2 (not rerun where the recompute stops before fc2);
        // the backward's reduce-scatters are not fused, so nothing backward.
        const double bytes = e * T * h * (1.0 + 1.0 / plan.tp);
        OpCost attnSum = memoryOp("async_tp_sum_attn", "residual", bytes);
        attnSum.backwardByteFactor = 0.0;
        ops.push_back(attnSum);
        if (!model.moe) {
            OpCost mlpSum = memoryOp("async_tp_sum_mlp", "residual", bytes);
            mlpSum.backwardByteFactor = 0.0;
            mlpSum.notRecomputed = recomputeStopsBeforeFc2(model, plan);
            ops.push_back(mlpSum);
        }
    }
    if (plan.tp > 1 && plan.sequenceParallel && !model.moe && dtensorTpOf(plan.framework) && !asyncTp) {
        // DTensor's sequence-parallel collectives on dim 1 (dtensorTpOf): a torch.cat copy of the whole T x h tensor
        // (read and written) after each all-gather and before each reduce-scatter. Forward: the gathers before the
        // QKV and fc1 GEMMs (float8 under torchao's Float8ColwiseParallel, sequenceParallelTraffic) and the
        // reduce-scatters after the projection and fc2 (fc2's not rerun where the recompute stops before it).
        // Backward: each reduce-scatter's adjoint is a gather of the output gradient, copied before the
        // input-gradient GEMM; each gather's adjoint a reduce-scatter of the summed input gradients (q, k and v's, or
        // the gate and up projections'), whose cat is read as fused by torch.compile into that sum's pointwise kernel
        // (not profiled) and eager PyTorch runs as one more copy. torchtitan#437 measured the forward's two around an FFN at 0.18 ms of its
        // 3 ms (8k tokens, batch 1, H100). Async TP's fused collectives take their shards in place (none).
        const double gathered = sequenceParallelTraffic(model, plan, recipe, e).forwardGatherBytesPerElement;
        OpCost gathers = memoryOp("sp_gather_copies", "permute", 2.0 * 2.0 * gathered * T * h);
        gathers.backwardByteFactor = eager ? e / gathered : 0.0;
        ops.push_back(gathers);
        for (const char* blk : {"attn", "mlp"}) {
            OpCost scatter = memoryOp(std::string("sp_scatter_copies_") + blk, "permute", 2.0 * e * T * h);
            scatter.backwardByteFactor = 1.0;
            scatter.notRecomputed = std::string(blk) == "mlp" && recomputeStopsBeforeFc2(model, plan);
            ops.push_back(scatter);
        }
    }
    if (recipe.autocast) {
        // torch.autocast over fp32 parameters: every weight of the layer's GEMMs is cast to the compute dtype for
        // this forward and its gradient cast back to fp32 in the backward; eager code also casts each fp32 norm
        // output to the GEMM's input (and its gradient back), which torch.compile fuses into the norm.
        double weights = 0.0;
        for (const auto& op : ops)
            if (op.opClass == OpClass::Gemm && op.hasWeights) weights += d(op.n) * d(op.k) * d(op.batch);
        const double activations = eager ? 2.0 * d(s.tokensSp) * h : 0.0;
        OpCost cast = memoryOp("autocast_casts", "cast", kernel_cost::autocastCastBytes(weights + activations, e, r));
        cast.backwardByteFactor = 1.0;
        ops.push_back(cast);
    }
    if (recipe.quantizedGemms()) {
        // Transformer Engine: the linear layers' GEMMs run in FP8 (the router and attention's batched GEMMs do
        // not), with the casts around them as memory-bound kernels.
        // Transformer Engine's LayerNormLinear writes the norm's output in FP8 (qkv, fc1, and latent attention's up
        // projections, which Megatron-core's MLA spec builds as TELayerNormColumnParallelLinear with the latent norm
        // fused in, q_layernorm / kv_layernorm IdentityOp: gpt_layer_specs.py); every other FP8 GEMM
        // casts a bf16 input in its own kernel: the attention output before the projection, and the activation's
        // output before fc2, which Megatron-core's fused bias-GELU / bias-SwiGLU kernels write in bf16
        // (fused_bias_swiglu.py: activation_func_fp8_input_store keeps its input in FP8, not its output), as the
        // MoE experts' permuted tokens and activation are. torchao's Float8Linear (fsdp_fp8) casts every input with
        // dynamic scales, which torch.compile fuses into the producers: the projection input only, as before.
        double outputs = 0.0, inputs = 0.0, castInputs = 0.0;
        const bool te = recipe.name != "fsdp_fp8";
        for (auto& op : ops) {
            if (op.opClass != OpClass::Gemm || !op.hasWeights || op.name == "router") continue;
            op.dtype = recipe.gemmDtype;
            outputs += d(op.m) * d(op.n) * d(op.batch);
            inputs += d(op.m) * d(op.k) * d(op.batch);
            const bool normFused = op.name == "qkv" || op.name == "fc1" || op.name == "q_up" || op.name == "kv_up";
            if (te && !normFused) castInputs += d(op.m) * d(op.k) * d(op.batch);
        }
        if (!te) castInputs = T * d(s.oDimLocal);
        // Transformer Engine's op fuser (te_op_fuser: Megatron-core's TEFusedMLP over te.ops): the dense
        // MLP's activation kernel takes fc2's input quantizer forward and fc1's output-gradient quantizer
        // backward (ops/basic/activation.py op_forward / op_backward; csrc/extensions/activation.cpp). Under
        // delayed scaling and MXFP8 it writes the quantized copy itself (FULLY_FUSED): no cast kernel for
        // fc2's input or fc1's output gradient, the activation writing q where it wrote e (2e bytes an
        // element saved each way). Under current scaling and NVFP4 without the Hadamard transform it takes
        // the amax in the activation (FUSED_ACTIVATION_AMAX_*) and quantizes after: their amax passes go.
        // Block scaling and NVFP4 with the transform quantize unfused, as without the fuser.
        const std::string scaling = recipe.fp8() ? fp8RecipeOf(plan.framework) : std::string();
        double fc2In = 0.0, fc1Out = 0.0;
        if (te && teOpFuserOf(plan.framework) && !model.moe)
            for (const auto& op : ops) {
                if (op.name == "fc2") fc2In = d(op.m) * d(op.k) * d(op.batch);
                if (op.name == "fc1") fc1Out = d(op.m) * d(op.n) * d(op.batch);
            }
        const bool fullyFused = fc2In > 0.0 && recipe.fp8() && (scaling == "delayed" || scaling == "mxfp8");
        const bool amaxFused = fc2In > 0.0 && ((recipe.fp8() && scaling == "tensorwise") ||
                                               (recipe.fp4() && !nvfp4RhtOf(plan.framework)));
        const bool transposes = fp8OnGpu(recipe, plan.framework, cluster.gpu).fp8Transposes;
        if (fullyFused) {
            const double q = recipe.quantizedBytes(), gradWrites = transposes ? 2.0 : 1.0;
            for (auto& op : ops)
                if (op.opClass == OpClass::Memory && op.name == toString(model.activation)) {
                    const double backward = op.bytes * op.backwardByteFactor + (gradWrites - e) * fc1Out;
                    op.bytes += (q - e) * fc2In;
                    op.backwardByteFactor = backward / op.bytes;
                }
        }
        if (recipe.fp4()) {
            // NVFP4 (Transformer Engine's NVFP4BlockScaling, pytorch/csrc/quantizer.cpp NVFP4Quantizer::quantize_impl):
            // each GEMM input is quantized rowwise (forward) and columnwise (weight gradient) from 16 bits in one
            // kernel, e in and 2 x 0.5625 out, the norm's output too (FUSED_NORM_AMAX_NVFP4 writes a 16-bit
            // temporary and its amax, the cast reads it again: normalization.cpp); the per-tensor scale needs the
            // tensor's amax first, a pass of its own (nvte_compute_amax, or nvte_hadamard_transform_amax under the
            // Hadamard transform) but where the norm takes it, which it does only without the transform. Backward:
            // each output gradient's amax pass and its two casts, stochastically rounded (FORMULAS.md §6.4).
            const double q = recipe.quantizedBytes();
            const bool rht = nvfp4RhtOf(plan.framework);
            const double amaxInputs = rht ? inputs : castInputs - (amaxFused ? fc2In : 0.0);
            OpCost cast = memoryOp("nvfp4_casts", "fp8_cast", kernel_cost::nvfp4CastForwardBytes(inputs, amaxInputs, e, q));
            const double backward = kernel_cost::nvfp4CastBackwardBytes(
                                        outputs, e, q, nvfp4StochasticRoundingOf(plan.framework)) -
                                    (amaxFused ? e * fc1Out : 0.0);
            cast.backwardByteFactor = backward / cast.bytes;
            ops.push_back(cast);
        } else {
            // Without transposes (fp8OnGpu: a GPU whose FP8 GEMMs take any layout) the backward casts each output
            // gradient once and transposes no saved input for its weight gradient.
            OpCost cast =
                memoryOp("fp8_casts", "fp8_cast",
                         kernel_cost::fp8CastForwardBytes(castInputs - (fullyFused ? fc2In : 0.0), e));
            cast.backwardByteFactor = kernel_cost::fp8CastBackwardBytes(outputs - (fullyFused ? fc1Out : 0.0),
                                                                        inputs, e, transposes) /
                                      cast.bytes;
            ops.push_back(cast);
            if (te && scaling == "tensorwise") {
                // Current scaling (Float8CurrentScalingQuantizer::quantize_impl, Transformer Engine 2.2 on):
                // the scale is each tensor's own amax, so a cast reads its input twice, once in
                // nvte_compute_amax and once in nvte_quantize_v2. The norm before qkv and fc1 takes the amax
                // in its own kernel (FUSED_NORM_AMAX_FP8, normalization.cpp) but writes its output in 16 bits
                // for the cast to read again; the gradients of the four GEMMs' outputs are each read once
                // more for their amax. Under the op fuser the activation takes fc2's input's amax and fc1's
                // output gradient's.
                const double normFusedInputs = inputs - castInputs;
                OpCost amax = memoryOp("fp8_current_scaling", "fp8_cast",
                                       kernel_cost::fp8CurrentScalingForwardBytes(
                                           castInputs - (amaxFused ? fc2In : 0.0), normFusedInputs, e));
                amax.backwardByteFactor =
                    kernel_cost::fp8CurrentScalingBackwardBytes(outputs - (amaxFused ? fc1Out : 0.0), e) /
                    amax.bytes;
                ops.push_back(amax);
            }
        }
    }
    if (!opLevelSelectiveRecompute(model, plan)) {
        finishBlock(b, cluster, recipe.computeDtype, plan.recompute, plan.recomputeModules);
        return b;
    }
    // torchtitan's selective checkpointing ("op" policy, FORMULAS.md §3.4): the block's backward recomputes
    // every op whose output it did not keep. It keeps the attention kernel's output and every other matmul's
    // (q, v, w1, w2 of wq wk wv wo w1 w3 w2), so it redoes the k and output projections, w3, and every
    // elementwise op; attention itself is not redone.
    finishBlock(b, cluster, recipe.computeDtype, Recompute::None);
    auto redo = [&](OpCost op) {
        b.recompute.add(op);
        b.recompute.modelFlops -= op.modelFlops;
    };
    for (const OpCost& op : b.forwardOps) {
        if (op.opClass == OpClass::Memory) {
            redo(op);
        } else if (op.name == "qkv" || op.name == "fc1") {
            // The unsaved part of a GEMM tessel counts as one: wk of q|k|v, w3 of w1|w3.
            OpCost part = op;
            part.n = op.name == "qkv" ? s.kvDimLocal : op.n / 2;
            part.flops = kernel_cost::gemmFlops(part.m, part.n, part.k) * d(part.batch);
            part.modelFlops = part.flops;
            part.bytes = kernel_cost::gemmBytes(part.m, part.n, part.k, e) * d(part.batch);
            part.seconds = opSeconds(part, cluster, recipe.computeDtype, b.tensorShare);
            redo(part);
        } else if (op.name == "attn_proj") {
            redo(op);
        }
    }
    return b;
}
} // namespace

double fsdpCollectiveCopySeconds(const ClusterConfig& cluster, const Plan& plan, const PrecisionRecipe& recipe,
                                 bool reduceScatter, double parameters) {
    const FsdpCopyBytes per = fsdpCopies(plan, recipe);
    const double bytes = (reduceScatter ? per.reduceStream : per.gatherStream) * parameters;
    if (!(bytes > 0.0)) return 0.0;
    return opSeconds(memoryOp("fsdp_copies", "cast_backward", bytes), cluster, recipe.computeDtype);
}

bool recomputeStopsBeforeFc2(const ModelConfig& model, const Plan& plan) {
    // Full recompute, or a selective one whose modules hold the dense MLP: both rerun the MLP up to fc2's
    // input.
    const bool rerunsMlp = plan.recompute == Recompute::Full ||
                           (plan.recompute == Recompute::Selective && plan.recomputes(recompute_module::Mlp));
    return rerunsMlp && checkpointEarlyStopOf(plan.framework) && !model.moe && !(model.dropout > 0.0);
}

RingAttentionStyle ringAttentionStyleOf(const Plan& plan) {
    const bool torchtitan = plan.framework.name == "torchtitan";
    RingAttentionStyle style;
    style.merge = torchtitan ? kernel_cost::RingMerge::PyTorch : kernel_cost::RingMerge::TransformerEngine;
    style.kvAtQueryHeads = repeatKvOf(plan.framework);
    return style;
}

bool columnParallelInputGemm(const std::string& opName) {
    return opName == "qkv" || opName == "fc1" || opName == "expert_fc1" || opName == "shared_fc1" || opName == "q_up" ||
           opName == "q_proj" || opName == "kv_up";
}

std::string launcherAttentionKernelOf(const Plan& plan, const GpuSpec& gpu) {
    const std::string kernel = attentionKernelDefaultOf(plan.framework);
    return gpu.attentionKernels.count(kernel) ? kernel : std::string();
}

bool attentionKernelTakesSoftcap(const std::string& kernel) { return kernel == "flash2" || kernel == "flash3"; }

bool softcapKernelMissing(const ModelConfig& model, const Plan& plan, const GpuSpec& gpu) {
    return model.attentionSoftcap > 0.0 && plan.flashAttention && !gpu.attentionKernels.empty() &&
           !attentionKernelTakesSoftcap(attentionKernelOf(model, plan, gpu));
}

std::string attentionKernelOf(const ModelConfig& model, const Plan& plan, const GpuSpec& gpu) {
    std::string requested = plan.attentionKernel;
    if (requested == "auto")
        if (const std::string launcher = launcherAttentionKernelOf(plan, gpu); !launcher.empty()) requested = launcher;
    const std::string kernel = resolveAttentionKernel(gpu, requested);
    if (model.attentionSoftcap > 0.0 && plan.attentionKernel == "auto" && !attentionKernelTakesSoftcap(kernel))
        for (const char* capped : {"flash2", "flash3"})
            if (gpu.attentionKernels.count(capped)) return capped;
    return kernel;
}

bool opLevelSelectiveRecompute(const ModelConfig& model, const Plan& plan) {
    return plan.recompute == Recompute::Selective && plan.framework.name == "torchtitan" && !model.moe &&
           !model.mla && model.activation == Activation::Swiglu;
}

} // namespace tessel
