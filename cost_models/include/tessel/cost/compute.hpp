// Compute cost: FLOPs and HBM bytes of every operation of a layer, embedding, LM head, loss and optimizer;
// time from a roofline with the GPU's shape-dependent GEMM efficiency.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/shapes.hpp"

#include <optional>
#include <string>
#include <vector>

namespace tessel {

enum class OpClass { Gemm, Attention, Memory };

// FLOPs and HBM bytes the model counts for each kernel (FORMULAS.md §3). compute.cpp builds its ops from
// these, and the executor's microbenchmarks (`tessel bench`) report their points with them, so a calibration
// fit of seconds against flops or bytes lands on exactly the model's terms. e = bytes per element.
namespace kernel_cost {
// A backward element-wise/norm kernel reads the saved input and the output gradient and writes the input
// gradient: twice the forward's traffic.
constexpr double kBackwardByteFactor = 2.0;
// FlashAttention-2 backward: 5 matmuls against the forward's 2 (Dao 2023, §3.2).
constexpr double kFlashBackwardFlopFactor = 2.5;
double gemmFlops(int64_t m, int64_t n, int64_t k);                  // 2 m n k
double gemmBytes(int64_t m, int64_t n, int64_t k, int e);          // e (mk + kn + mn): each operand once
double normBytes(int64_t rows, int64_t cols, int e);               // read x, write y: 2 e n c
double activationBytes(bool swiglu, int64_t rows, int64_t outCols, int e); // GELU 2 e n f, SwiGLU 3 e n f
double ropeBytes(int64_t tokens, int64_t rotatedCols, int e);      // 2 e T d
double residualBytes(int64_t rows, int64_t cols, int e, int maskBytes); // (3 e + mask) n c
// The residual add under autocast: reads the stream (r bytes) and the branch output (e), writes the stream:
// (2 r + e + mask) n c; r = e is residualBytes.
double residualBytes(int64_t rows, int64_t cols, int e, int maskBytes, int streamBytes);
// Autocast casts (torch.autocast over fp32 parameters): each weight element read at r and written at e once a
// forward, its gradient cast back in the backward; the same per element of an fp32 activation cast to a GEMM
// input. (r + e) per element either way.
double autocastCastBytes(double elements, int e, int r);
// Unpadded attention (llm-foundry's flash_attn_fn over flash-attn's bert_padding): the forward gathers q, k and v
// (index_first_axis: read and write each, 2e) and scatters the output into a zeroed tensor (pad_input: zero, read,
// write, 3e); the backward scatters the q, k, v gradients into zeroed tensors (3e each) and gathers the output
// gradient (2e). `qkv` = elements of q, k and v, `out` = of the output, on this rank.
double unpadForwardBytes(double qkv, double out, int e);
double unpadBackwardBytes(double qkv, double out, int e);
double embeddingForwardBytes(int64_t tokens, int64_t hidden, int e);    // ids 8 T + one row read and written
double embeddingBackwardBytes(int64_t tokens, int64_t hidden, int e);   // scatter-add 3 e T h
double crossEntropyBytes(int64_t tokens, int64_t vocab, int e);    // logits read + fp32 max/sum: (e + 8) T V
// Unfused attention (no FlashAttention): the fused scale-mask-softmax reads the scores and writes the
// probabilities, e per element each; attention dropout reads them and writes its output and a byte mask.
double softmaxBytes(double elements, int e);                       // 2 e x elements
// ALiBi's bias under an unfused attention: baddbmm(bias, q, k^T, beta = 1) copies the broadcast bias into the
// scores, then the batched GEMM reads them back as its C operand: 2 e per score.
double alibiBiasBytes(double scores, int e);
double dropoutBytes(double elements, int e);                       // (2 e + 1) x elements
// FP8 casts around a layer's GEMMs (Transformer Engine): forward, the bf16 inputs of the GEMMs whose input no
// fused norm writes in FP8 (the attention projection's, fc2's, the experts'); backward, each output gradient cast
// and transposed (read e, write 1 + 1) and each saved FP8 input transposed for its weight gradient (read 1,
// write 1). `outputs` and `inputs` are the elements of the layer's GEMM outputs and inputs on this rank. Without
// transposes (a GPU whose FP8 GEMMs take any layout, fp8OnGpu) each output gradient is cast once (read e, write 1).
double fp8CastForwardBytes(double castInputs, int e);
double fp8CastBackwardBytes(double outputs, double inputs, int e, bool transposes = true);
// What current scaling (Transformer Engine's Float8CurrentScaling, Megatron-core's --fp8-recipe tensorwise) adds to
// those casts: its scale is the tensor's own amax, taken in a pass of its own before the cast (nvte_compute_amax,
// then nvte_quantize_v2), so every cast input is read once more (e); the norms before qkv and fc1 take the amax in
// their own kernel but write their output in 16 bits for a separate cast to read and write in FP8 (e + 1), where
// delayed scaling's fused norm writes FP8 directly; backward, each output gradient is read once more for its amax.
double fp8CurrentScalingForwardBytes(double castInputs, double normFusedInputs, int e); // e x cast + (e + 1) x norm-fused
double fp8CurrentScalingBackwardBytes(double outputs, int e);                             // e x outputs
// NVFP4 casts around a layer's GEMMs (Transformer Engine's NVFP4BlockScaling; q = 0.5625 B an element of one copy with
// its block scales): forward, every GEMM input read once (e) and written rowwise and columnwise (2q), the norm's
// 16-bit output too, and read once more for the tensor's amax where no producer took it (`amaxInputs`); backward,
// each output gradient read for its amax (e), then read and written twice (e + 2q), at the rate the stochastic
// rounding leaves the cast kernel where it is on: Transformer Engine's tuned NVFP4 cast (NVIDIA/TransformerEngine
// #2412, B300, BF16 in, rowwise and columnwise) ran 6.4 TB/s rounding to nearest, 4.5 TB/s rounding stochastically,
// so those bytes take 6.4 / 4.5 of their time (kNvfp4StochasticRoundingTimeFactor).
constexpr double kNvfp4StochasticRoundingTimeFactor = 6.4 / 4.5;
double nvfp4CastForwardBytes(double inputs, double amaxInputs, int e, double q);            // (e + 2q) in + e amax
double nvfp4CastBackwardBytes(double outputs, int e, double q, bool stochasticRounding);    // e + (e + 2q) x SR
// Eager PyTorch (framework fused_kernels false, FORMULAS.md §3.4): every op a model line launches moves its own
// bytes. Forward bytes per element, and the backward's (autograd through the same ops) per element:
//   RMSNorm as torchtitan writes it, x.float() -> pow -> mean -> * rsqrt -> type_as -> * weight: 4e + 28, 6e + 52;
//   rotary embedding through fp32 complex numbers (float, complex multiply, type_as): 2e + 16 both ways;
//   SwiGLU as silu(a) * b: 5e per output element, 9e backward;
//   repeat_kv (grouped-query K and V copied to every head) and the attention output made contiguous: a copy;
//   the loss as cross_entropy(logits.float()): e + 16, 20 + e.
//   an unfused attention's scale, mask and softmax as three ops on the scores (scores / sqrt(d), the causal mask
//   applied, softmax: Megatron-LM before its fused kernels of 2020-09, Hugging Face's eager attention): 6e per score,
//   and backward 7e (softmax's backward reads the probabilities and the gradient and writes one; the mask's and the
//   scale's each read and write the gradient).
double eagerRmsNormBytes(int64_t rows, int64_t cols, int e);
double eagerRmsNormBackwardFactor(int e);
double eagerScaleMaskSoftmaxBytes(double scores, int e);
double eagerScaleMaskSoftmaxBackwardFactor();
// Gemma 2's soft-capping, cap * tanh(x / cap), as every framework that trains it writes it (Hugging Face's
// Gemma2Attention and Gemma2ForCausalLM, NeMo's logit_softcapping, llm-foundry): three eager ops over `elements`
// (divide, tanh, multiply), each reading and writing them, 6e; backward, the multiply's and the divide's gradients
// read and write the gradient (2e each) and tanh's reads it and the saved output and writes one (3e): 7e.
double eagerSoftcapBytes(double elements, int e);
constexpr double kEagerSoftcapBackwardFactor = 7.0 / 6.0;
double eagerRopeBytes(int64_t tokens, int64_t rotatedCols, int e);
double eagerSwigluBytes(int64_t rows, int64_t outCols, int e);
constexpr double kEagerSwigluBackwardFactor = 9.0 / 5.0;
double eagerAttentionLayoutBytes(int64_t tokens, int64_t qCols, int64_t kvCols, int e); // repeat_kv + output copy
double eagerCrossEntropyBytes(int64_t tokens, int64_t vocab, int e);
// A cross-entropy outside autograd under autocast (a trainer's metric): the fp32 cast and the log-softmax.
double metricCrossEntropyBytes(int64_t tokens, int64_t vocab, int e);
double eagerCrossEntropyBackwardFactor(int e);
// Megatron's vocab-parallel cross-entropy without --cross-entropy-loss-fusion ("unfused", Megatron-LM's and
// Megatron-DeepSpeed's default; megatron/core/tensor_parallel/cross_entropy.py): each step its own kernel over the
// rank's logits. Forward: the fp32 copy (e read, 4 written; none where the logits are already fp32), the row max (4),
// the max subtracted in place (8), exp in place (8), the row sum (4), the division in place (8): e + 36 a logit.
// Backward: the gradient multiplied in place (8) and cast back to the logits' type (4 + e): 12 + e.
double unfusedCrossEntropyBytes(int64_t tokens, int64_t vocab, int e);
double unfusedCrossEntropyBackwardFactor(int e);
// torch.compile's cross_entropy(logits.float()): one read of the 16-bit logits for the log-sum-exp (Inductor's online
// softmax, torch/_inductor/config.py `online_softmax`, default on; the release that made it the default was not
// checked, and a two-pass reduction before it reads them twice), and a backward that reads them again and writes
// the 16-bit gradient (factor 2).
double compiledCrossEntropyBytes(int64_t tokens, int64_t vocab, int e);
constexpr double kCompiledCrossEntropyBackwardFactor = 2.0;
// PyTorch's cross_entropy over 16-bit logits without an upcast ("eager_16bit"): log_softmax's row kernel reads a
// row for its max, again for its sum and again for its output, which it writes in the logits' type (4e a logit);
// the backward zero-fills nll_loss's dense gradient (e) and log_softmax_backward reads it for its row sum and again
// with the saved output and writes the input gradient (4e): 5e, factor 5/4.
double eager16BitCrossEntropyBytes(int64_t tokens, int64_t vocab, int e);
constexpr double kEager16BitCrossEntropyBackwardFactor = 5.0 / 4.0;
// Liger-Kernel's fused linear cross-entropy (LigerFusedLinearCrossEntropyLoss, cross_entropy "fused_linear"): the
// tokens go through the output layer and the loss a chunk at a time, so the logits are never whole. The chunk is
// next_pow2(ceil(T / ceil(V / h))) tokens, a chunk of logits about the size of the chunk's hidden states
// (ops/fused_linear_cross_entropy.py, unchanged since 2024-08), at most T.
int64_t fusedLinearCrossEntropyChunkTokens(int64_t tokens, int64_t vocab, int64_t hidden);
// The loss kernel's bytes over every chunk: liger_cross_entropy_kernel reads a row of logits for its online max and
// sum, then reads it again and writes the gradient in place (3e a logit), writing an fp32 loss a row; the forward
// first zeroes the input gradient and the weight gradient it accumulates (e T h + e V h).
double fusedLinearCrossEntropyBytes(int64_t tokens, int64_t vocab, int64_t hidden, int e);
// Causal flash attention executes half of the full 4 b a s_q s_kv d (Narayanan et al. 2021, eq. 2 terms).
double flashAttentionFlops(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t headDim);
// The same where q/k and v heads differ in width (MLA): half of 2 b a s_q s_kv (d_qk + d_v).
double flashAttentionFlops(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t qkHeadDim, int64_t vHeadDim);
double attentionBytes(int64_t tokens, int64_t qCols, int64_t kvCols, int e); // q, k, v, o once: e T (2q + 2kv)
// The same with each of q, k, v and o at its own width (MLA: v and o narrower than q and k).
double attentionBytes(int64_t tokens, int64_t qCols, int64_t kCols, int64_t vCols, int64_t oCols, int e);
// Context-parallel ring attention (FORMULAS.md §3.2): around each step's attention kernel the rank merges the
// step's output into the running one, accumulates the gradients and copies what it sends on, memory-bound passes
// over tensors of the rank's queries (`eq` elements: b s/cp heads d) and keys (`ekv` elements of K, and as many
// of V, at the heads the kernel sees). The byte counts are those of the rank whose later steps all take every
// query (the last), read off each implementation's code; `e` is the activation width.
enum class RingMerge {
    TransformerEngine, // Megatron-core / NeMo: TE's AttnFuncWithCPAndKVP2P (fp32 output, fused corrections)
    PyTorch,           // torchtitan: torch.distributed.tensor.experimental._attention (eager fp32 merges)
};
double ringMergeForwardBytes(RingMerge style, double eq, double ekv, int cp, int e);
double ringMergeBackwardBytes(RingMerge style, double eq, double ekv, int cp, int e);
// The CUDA executor's GEMM attention (executor/backends/cuda/attention_gemm.cu), per sequence and query head
// an [s_q, s_kv] score block materialised in full (the causal half is computed, then masked):
//   FLOPs: forward S = Q K^T and O = P V, 4 s_q s_kv d; backward S again, dV = P^T dO, dP = dO V^T, dQ = dS K,
//          dK = dS^T Q, 10 s_q s_kv d.
//   bytes per score: forward S written fp32 (4), read by the softmax row kernel (4; its second pass over the
//          row is an L2 hit), P written and read by the PV GEMM (e + e): 8 + 2e. Backward S written and read
//          (4 + 4), P written (e) and read by dV (e), dP written and read (4 + 4), P read and dS written by the
//          score-gradient kernel (e + e), dS read by dQ and by dK (e + e): 16 + 6e.
//   plus the operands once per query head: forward Q read, O written (s_q rows), K and V read (s_kv rows),
//          e d (2 s_q + 2 s_kv); backward Q twice, dO twice, dQ written, dO and O by the delta kernel (7 s_q
//          rows), K twice, V once, dV and dK read and written (beta = 1) (7 s_kv rows), e d (7 s_q + 7 s_kv).
// `heads` are query heads: a GQA group's query heads each run their own GEMMs against the shared K, V.
double scoreGemmFlops(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t headDim, bool backward);
double scoreGemmBytes(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t headDim, int e,
                      bool backward);
// The GEMM attention's launch steps: it loops over sequences, the query heads of a kv group and chunks of kv heads,
// each step a few launches (forward: two batched GEMMs and the softmax rows; backward: five and two row kernels),
// so each sequence pays the host's launches beside its FLOPs and bytes (FORMULAS.md §7.2). A chunk holds
// the scores of as many kv heads as fit kScoreGemmWorkspaceBytes at (4 + e) bytes a score, at least one.
constexpr int64_t kScoreGemmWorkspaceBytes = 256 * 1024 * 1024;
// Workspace one kv head's scores take in a chunk: fp32 scores and their e-byte probabilities, queries x keys.
int64_t scoreGemmBytesPerHead(int64_t seqQ, int64_t seqKv, int e);
int64_t scoreGemmKvHeadsPerChunk(int64_t seqQ, int64_t seqKv, int64_t kvHeads, int e);
int64_t scoreGemmSteps(int64_t sequences, int64_t queryHeads, int64_t kvHeads, int64_t seqQ, int64_t seqKv, int e);
double optimizerFlops(double parameters);                           // ~12 per parameter (AdamW)
double optimizerBytes(double parameters, const PrecisionRecipe& recipe);    // the AdamW kernel itself
// What torch.optim's foreach AdamW moves beyond the fused kernel: 2p + 10m + 2g per parameter (56 B in fp32).
double foreachOptimizerExtraBytes(double parameters, const PrecisionRecipe& recipe);
// Around AdamW: gradient-norm read and buffer zeroing (2 g) and, with a master copy, master -> weights (master + w).
double optimizerAuxBytes(double parameters, const PrecisionRecipe& recipe);
// The kernel names a cluster file's gpu.kernels may calibrate ("gemm", "attention_forward", "norm_backward", ...).
const std::vector<std::string>& kernelNames();
// Copies `tessel bench` times beside the kernels, moving bytes and computing nothing: device memory to device
// memory, host to device and device to host. No step of the model is one of them; calibration reports their
// bandwidth (FORMULAS.md §7.7).
const std::vector<std::string>& transferNames();
} // namespace kernel_cost

// One operation on one rank for one micro-batch. A GEMM is (m x k) @ (k x n).
struct OpCost {
    std::string name;
    OpClass opClass = OpClass::Memory;
    double flops = 0.0;          // floating-point operations actually executed
    double modelFlops = 0.0;     // operations counted for MFU (attention as full, non-causal; see FORMULAS.md §3)
    double bytes = 0.0;          // HBM traffic
    int64_t m = 0, n = 0, k = 0; // GEMM shape; for attention (s_q, s_kv, head_dim)
    int64_t batch = 1;           // GEMMs in one batched kernel; attention: sequences x query heads
    int64_t sequences = 1;       // attention: the sequences of the micro-batch (batch / sequences = query heads)
    int64_t kvHeads = 0;         // attention: key/value heads (0: as many as query heads)
    std::string kernel;          // the kernel a calibration may have timed: "gemm", "norm_forward", ...
    std::string variant;         // attention: the fused kernel's name ("flash2", ...), "" for the GPU's default
    bool backward = false;       // attention: the backward kernel (its own efficiency)
    bool causal = true;          // attention: causal (false: every key visible, a context-parallel ring's later steps)
    bool hasWeights = true;      // GEMM: the B operand is a weight (dW in backward); false for attention's batched GEMMs
    bool perHead = false;        // GEMM: batched over attention heads (the unfused attention's scores and context)
    bool dropout = false;        // fused attention: attention dropout drawn inside the kernel
    bool notRecomputed = false;  // a full recompute that stops early does not rerun it (checkpointEarlyStopOf)
    bool noBackward = false;     // GEMM: its gradients are other ops of the block, run in the forward (fused linear cross-entropy)
    uint8_t module = 0;          // the recompute_module it belongs to (Plan::recomputeModules); the attention core's are
                                 // known by their kind (forEachKernel), 0: rerun by full recompute only
    std::optional<Dtype> dtype;  // the dtype it computes in when not the recipe's (FP8 GEMMs)
    double backwardByteFactor = kernel_cost::kBackwardByteFactor; // memory op: backward bytes / forward bytes
    double seconds = 0.0;        // roofline time, filled by costOps
};

// The three compute phases the schedules use. backward = backwardInput + backwardWeight.
// `flops` are what the kernels execute (causal flash attention at half) and set the time; `modelFlops` follow
// the MFU convention; `hardwareFlops` are model-convention FLOPs of everything executed, recompute included
// (HFU's numerator, Korthikanti et al. 2022 §5), so hardwareFlops >= modelFlops.
struct PhaseCost {
    double seconds = 0.0;
    double flops = 0.0;
    double modelFlops = 0.0;
    double hardwareFlops = 0.0;
    void add(const OpCost& op, double factor = 1.0) {
        seconds += op.seconds * factor;
        flops += op.flops * factor;
        modelFlops += op.modelFlops * factor;
        hardwareFlops += op.modelFlops * factor;
    }
    PhaseCost& operator+=(const PhaseCost& o) {
        seconds += o.seconds;
        flops += o.flops;
        modelFlops += o.modelFlops;
        hardwareFlops += o.hardwareFlops;
        return *this;
    }
};

// Cost of a block (one transformer layer, the embedding, or the LM head + loss) for one micro-batch.
struct BlockCompute {
    std::vector<OpCost> forwardOps;
    PhaseCost forward;           // forward pass
    PhaseCost backwardInput;     // gradients w.r.t. inputs (and all non-GEMM backward work)
    PhaseCost backwardWeight;    // gradients w.r.t. weights (GEMM dW)
    PhaseCost recompute;         // extra forward work redone in backward under the plan's recompute mode
    // The sustained tensor-core share its GEMMs and attention ran at (GpuSpec::sustainedTensorShare of the
    // block's duty, FORMULAS.md §3.3) and that duty.
    double tensorShare = 1.0;
    double tensorDuty = 0.0;
    // Context parallelism's ring (cp_comm_type p2p): the attention kernels of its first step (the diagonal) and of
    // all its later steps together, forward and backward, under which the next step's K and V travel
    // (ringExposure, traffic.hpp). 0 without a ring.
    double ringDiagForwardSeconds = 0.0, ringDiagBackwardSeconds = 0.0;
    double ringStepsForwardSeconds = 0.0, ringStepsBackwardSeconds = 0.0;
    // Host time the block's kernels wait for under blocking launches (CUDA_LAUNCH_BLOCKING=1, FORMULAS.md §3.8),
    // one micro-batch, forward + backward + recompute; already inside the phases' seconds. 0 otherwise.
    double launchHostSeconds = 0.0;
    // Under asynchronous launches of eager ops, what the phases whose kernels are shorter than their launches wait on
    // the host (the host-bound floor, FORMULAS.md §3.8), one micro-batch; already inside the phases' seconds.
    double hostWaitSeconds = 0.0;
    PhaseCost backward() const {
        PhaseCost b = backwardInput;
        b += backwardWeight;
        return b;
    }
};

// Time of one op. Uncalibrated: the roofline max(flops / (peak x efficiency), bytes / (HBM x memory
// efficiency)) + kernel overhead. Where the cluster has a calibrated fit for op.kernel (GpuSpec::kernels),
// memory and attention kernels take overhead + bytes (or flops) / fitted rate, and GEMMs the fitted overhead
// with the (calibrated) efficiency table. Tensor-core kernels (GEMMs, attention) run at `tensorShare` of their
// benchmarked rate; without it, at the share of a block that is all tensor-core work (duty 1).
double opSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype);
double opSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype, double tensorShare);

// Achieved / peak of a fused attention kernel running causal attention with head dimension headDim over `keys`
// keys, forward or backward, before the sustained share σ (FORMULAS.md §3.2). With a benchmark: its causal curve
// interpolated linearly in head dimension (held at the ends) and in log2 of the keys (held above the longest
// sequence, scaled by s/(s + seqHalf) below the shortest); a causal backward the benchmark lacks is its
// non-causal backward x (causal / non-causal forward) at the same head dimension and keys. A head dimension
// between the kernel's built ones (spec.headDims) is taken at the next one up, times d / padded: the useful share.
// `causal` false: the benchmark's non-causal curve (a non-causal kernel the benchmark lacks is the causal one
// without the s/(s + seqHalf) ramp).
double attentionKernelEfficiency(const AttentionKernelSpec& spec, int64_t headDim, int64_t keys, bool backward,
                                 bool causal = true);

BlockCompute layerCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                          const PrecisionRecipe& recipe);
// PyTorch FSDP's copies on a collective's own stream ahead of it (FORMULAS.md §3.7: FSDP1's gradient cast and
// divides before each reduce-scatter, FSDP2's reduce-scatter copy-in; the shards' copy into each all-gather), in
// seconds, for a collective over `parameters`; 0 where the plan is not PyTorch FSDP.
double fsdpCollectiveCopySeconds(const ClusterConfig& cluster, const Plan& plan, const PrecisionRecipe& recipe,
                                 bool reduceScatter, double parameters);
// Whether the plan's selective recompute is torchtitan's per-op policy (keep the attention output and every
// other matmul's, redo the rest) rather than Megatron-LM's (redo the attention core): FORMULAS.md §3.4.
bool opLevelSelectiveRecompute(const ModelConfig& model, const Plan& plan);
// The attention kernel the plan's framework version ran where its launcher chose one and this GPU has it
// (attentionKernelDefaultOf: NeMo 24.01-24.07's flash-attn 2), else "": the plan's own, or the GPU's default.
std::string launcherAttentionKernelOf(const Plan& plan, const GpuSpec& gpu);
// Whether a fused attention kernel applies a soft-cap to its scores (ModelConfig::attentionSoftcap): flash-attn 2
// from 2.6 (`softcap`, Dao-AILab/flash-attention #1025) and FlashAttention-3 do; cuDNN's fused attention (Transformer
// Engine's) and FlashAttention-1 do not.
bool attentionKernelTakesSoftcap(const std::string& kernel);
// The fused attention kernel a plan runs on this GPU: the plan's own; for "auto", its launcher's
// (launcherAttentionKernelOf), else the GPU's default; and for a model that soft-caps its scores, where that default
// takes no soft-cap, the GPU's flash2, else its flash3 (what Hugging Face's flash_attention_2 and llm-foundry run for
// Gemma 2). A kernel that takes no soft-cap for such a model is validatePlan's problem.
std::string attentionKernelOf(const ModelConfig& model, const Plan& plan, const GpuSpec& gpu);
// Whether the plan runs a soft-capping model's attention in a fused kernel that cannot cap (validatePlan's problem
// at flash_attention or attention_kernel, search's rejection).
bool softcapKernelMissing(const ModelConfig& model, const Plan& plan, const GpuSpec& gpu);
// A layer's column-parallel GEMM fed by a tensor-parallel gather of its input (QKV, fc1, the experts' and shared
// experts' fc1, MLA's q and kv up projections): Megatron-LM's asynchronous TP overlap runs the all-reduce or
// reduce-scatter of its input gradient under its weight-gradient GEMM.
bool columnParallelInputGemm(const std::string& opName);

// A recompute that stops before fc2 (torch.utils.checkpoint's early stop, JAX's remat; FORMULAS.md §3.4):
// full recompute, or selective recompute of the dense MLP, of a layer without hidden dropout under a
// framework whose checkpoint stops early. fc2, the residual add after it and the tensor-parallel collective
// between them are not rerun.
bool recomputeStopsBeforeFc2(const ModelConfig& model, const Plan& plan);
// How the plan's framework runs context parallelism's ring (FORMULAS.md §3.2, §5): whose merges and gradient
// accumulations (PyTorch's for torchtitan, Transformer Engine's otherwise), and whether K and V reach the ring at
// every query head (repeatKvOf: the model code repeats them before the kernel), so the ring carries and merges them
// at the query heads' width, where Transformer Engine and SDPA's enable_gqa take grouped-query K and V as they are.
struct RingAttentionStyle {
    kernel_cost::RingMerge merge = kernel_cost::RingMerge::TransformerEngine;
    bool kvAtQueryHeads = false;
};
RingAttentionStyle ringAttentionStyleOf(const Plan& plan);
BlockCompute embeddingCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                              const PrecisionRecipe& recipe);
BlockCompute headCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                         const PrecisionRecipe& recipe);
// One multi-token-prediction module's own work (model.mtpLayers; Megatron-core MultiTokenPredictionLayer), beside its
// transformer layer and the shared output head and loss, which are costed as the model's: the next tokens' embedding
// lookup, enorm and hnorm, eh_proj over the concatenated [embedding, hidden] (2h -> h, column-parallel) and the
// module's final norm.
BlockCompute mtpCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                        const PrecisionRecipe& recipe);
// AdamW over `localParameters` parameters held by this rank's optimizer (after ZeRO sharding); `foreachAdamw`:
// torch.optim's foreach implementation (foreachOptimizerOf) rather than one fused kernel.
OpCost optimizerCompute(double localParameters, const ClusterConfig& cluster, const PrecisionRecipe& recipe,
                        bool foreachAdamw);

// Model FLOPs of one training step (forward + backward, no recompute) for the whole model and global batch,
// the numerator of MFU: 3 x the forward model FLOPs of every layer, the embedding and the LM head. The attention
// scores' and context's FLOPs (QK^T and PV, fused or not) are counted whole, as Narayanan et al. 2021 eq. 3 and
// most sources count them; `attentionShare` scales them for a source that counts otherwise (0.5: a causal mask's
// half, NeMo's flops_formulas since 2025-08-09).
double modelFlopsPerStep(const ModelConfig& model, const Plan& plan, double attentionShare = 1.0);

} // namespace tessel
