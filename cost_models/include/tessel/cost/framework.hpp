// The training framework a plan runs on and the settings that decide what overlaps what (Megatron-LM's DDP and
// overlap flags, FSDP's prefetch and resharding), with each framework's defaults by version.
#pragma once

#include "tessel/cost/errors.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

struct PrecisionRecipe; // plan.hpp

// What the plan states. An unset knob takes the framework's default for its version (resolveOverlap).
struct FrameworkSettings {
    std::string name = "generic";  // megatron | nemo | megascale | deepspeed | fsdp | torchtitan | generic
    std::string version;           // free text: a year ("2023"), a Megatron-core version ("core_r0.9.0"), ...
    std::optional<std::string> ddpImpl;          // Megatron: "local" (bucketed after backward) | "torch" (DDP hooks)
    // The loss kernel: "fused" (Megatron-core's vocab-parallel cross-entropy under --cross-entropy-loss-fusion: an
    // fp32 softmax kept for backward), "unfused" (the same loss without the flag, Megatron-LM's and
    // Megatron-DeepSpeed's default: the same memory, its elementwise steps as separate kernels), "te" (Transformer Engine's parallel_cross_entropy, --cross-entropy-fusion-impl te: the gradient
    // written into the logits in forward) or "eager" (PyTorch's cross_entropy(logits.float())). Unset: the
    // framework's default for its version (crossEntropyOf). "flash_attn": flash-attn's cross_entropy (llm-foundry's
    // fused_crossentropy): the logits and a per-row fp32 log-sum-exp kept, the gradient a new tensor of the
    // logits' type (inplace_backward off, its default). "compiled": torch.compile's Inductor kernels for
    // cross_entropy(logits.float()) (torchtitan's loss under training.compile from 2025-04): the upcast and the
    // log-softmax fused, so the same as flash_attn's: the 16-bit logits kept, a new 16-bit gradient. "eager_16bit":
    // PyTorch's cross_entropy over the 16-bit logits as they are, no upcast (KempnerForge's loss, AutoModel's
    // MaskedCrossEntropy(fp32_upcast=False)): the logits and log_softmax's 16-bit output kept, and at the backward
    // nll_loss's dense gradient and the input gradient beside them.
    std::optional<std::string> crossEntropy;
    std::optional<bool> overlapGradReduce;       // gradient reduction runs during backward (per bucket)
    std::optional<bool> overlapParamGather;      // ZeRO-1/2: updated-parameter all-gather overlaps the next forward
    std::optional<bool> tpCommOverlap;           // TP collectives pipelined with their GEMMs (TE userbuffers)
    std::optional<bool> asyncTpGradReduce;       // Megatron: backward TP input-gradient collective overlaps dW
    std::optional<bool> overlapP2pComm;          // pipeline sends/receives on their own stream, not blocking compute
    std::optional<bool> reshardAfterForward;     // ZeRO-3/FSDP: free gathered parameters after forward
    std::optional<bool> backwardPrefetch;        // ZeRO-3/FSDP: gather the next unit's parameters ahead
    std::optional<bool> fusedKernels;            // norms, rotary, GLU and loss as fused kernels (false: eager PyTorch ops)
    std::optional<bool> gradReduceInFp32;        // Megatron-style main gradients kept and reduced in fp32 (false: bf16)
    std::optional<bool> fp8ParamGather;          // FP8 recipe: the weights are FP8 (TE fp8_model_init), gathered at 1 B
    // How Transformer Engine scales the FP8 tensors (Megatron-core's --fp8-recipe): "delayed" (DelayedScaling: the
    // scale from the amax history, the amax taken inside the cast), "tensorwise" (Float8CurrentScaling: each
    // tensor's own amax in a pass of its own before the cast), "mxfp8" (MXFP8BlockScaling, Blackwell: a scale per
    // 32 elements) or "blockwise" (Float8BlockScaling: per 1 x 128 / 128 x 128 block). Unset: fp8RecipeOf.
    std::optional<std::string> fp8Recipe;
    std::optional<bool> foreachOptimizer;        // AdamW as torch.optim's foreach ops, not one fused kernel
    std::optional<bool> checkpointEarlyStop;     // a recompute stops once every saved tensor is back (torch
                                                 // non-reentrant, JAX remat)
    // ZeRO-2/3 and FSDP reduce-scatter each micro-batch's gradients (true); false: gradient accumulation without
    // synchronisation, FSDP's no_sync (Hugging Face Accelerate's accumulate, Lightning Fabric's no_backward_sync):
    // the unsharded gradients kept until the step's last micro-batch reduces them once (fsdpReducesOncePerStep).
    std::optional<bool> gradSyncEachMicroBatch;
    // The distributed optimizer keeps the fp32 master as the 16 low bits each bf16 weight lacks (2 B, not 4):
    // Apex DistributedFusedAdam (NeMo 1's distributed_fused_adam), Transformer Engine's FusedAdam under
    // Megatron-core's precision-aware optimizer. Unset: storeParamRemaindersOf.
    std::optional<bool> storeParamRemainders;
    // The dtype the optimizer keeps its state in: "fp32", or "bf16" (Adam's moments in bf16 and no master beside
    // the bf16 weights: NeMo 1's distributed_fused_adam with optim.dtype=bf16). Unset: fp32.
    std::optional<std::string> optimizerDtype;
    // The 16-bit type the run computes in (Megatron-LM's --fp16 / --bf16, DeepSpeed's fp16 / bf16 sections):
    // "bf16", or "fp16", the only one Volta's tensor cores run (V100). The recipes keep the same bytes either way.
    // Unset: bf16.
    std::optional<std::string> halfDtype;
    // How MoE tokens reach their experts (Megatron-core's --moe-token-dispatcher-type): "alltoall", one all-to-all
    // of every token copy over the EP group, or "flex" (DeepEP / HybridEP, --moe-flex-dispatcher-backend): a token
    // crosses the network once per destination node and is forwarded over NVLink inside it. Unset: alltoall.
    std::optional<std::string> moeDispatcher;
    // Megatron-core's batch-level EP overlap (--overlap-moe-expert-parallel-comm, 0.14 on): in the steady state of
    // the 1F1B schedules a backward and the next forward, of two micro-batches, run layer by layer together, each
    // one's dispatch and combine all-to-alls under the other's attention and expert compute (FORMULAS.md §6.1).
    // Unset: off, Megatron-core's default.
    std::optional<bool> moeA2aOverlap;
    // NVFP4 training (precision nvfp4), Megatron-core's --fp4-param-gather (TransformerConfig.fp4_param): the linear
    // weights kept in NVFP4 alone, their rowwise 0.5 B gathered by the distributed optimizer. Unset: off, Megatron-core's
    // default (Megatron-Bridge's bf16_with_nvfp4_mixed sets it).
    std::optional<bool> fp4ParamGather;
    // Transformer Engine's NVFP4BlockScaling switches (NVTE_NVFP4_DISABLE_RHT, NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING
    // negated): the random Hadamard transform before the columnwise (weight-gradient) casts of inputs and gradients,
    // and stochastic rounding of the gradients' casts. Unset: on, Transformer Engine's defaults (recipe/__init__.py).
    std::optional<bool> nvfp4Rht;
    std::optional<bool> nvfp4StochasticRounding;
    // Megatron-core's --use-transformer-engine-op-fuser (TransformerConfig.use_transformer_engine_op_fuser):
    // the dense MLP as Transformer Engine's operation sequence (TEFusedMLP), whose activation kernel
    // quantizes its output for fc2 and its input gradient for fc1 itself (ops/basic/activation.py,
    // FORMULAS.md §6.3). Unset: off, Megatron-core's default (MLPerf v5.1's Llama 3.1 8B configs set it:
    // USE_TE_OPS=True).
    std::optional<bool> teOpFuser;
    // Megatron-core's shared-expert overlap (--moe-shared-expert-overlap; token_dispatcher.py, shared_experts.py): the
    // shared experts run on a stream of their own, fc1 and the activation while the dispatch all-to-all runs, fc2
    // while the combine runs (FORMULAS.md §6.1). Unset: off, Megatron-core's default (Megatron-Bridge's DeepSeek-V2/V3
    // and GLM-4.5 providers set it, and turn it off with the flex dispatcher: flex_dispatcher_backend.py).
    std::optional<bool> moeSharedExpertOverlap;
    // Elements of the gradient bucket a ZeRO-2/3 optimizer reduces at a time (DeepSpeed's
    // zero_optimization.reduce_bucket_size). Unset: reduceBucketElementsOf.
    std::optional<int64_t> reduceBucketSize;
    // DeepSpeed ZeRO-3's parameter coordinator (zero_optimization.stage3_max_live_parameters,
    // stage3_prefetch_bucket_size, stage3_max_reuse_distance), in elements. Unset: deepSpeedStage3Of.
    std::optional<int64_t> stage3MaxLiveParameters, stage3PrefetchBucketSize, stage3MaxReuseDistance;
    // The loss overwrites the logits with their gradient and keeps per-row max and sum only, no softmax copy
    // (tessel's own executor, `tessel run`). Not a framework default anywhere: unset means false.
    std::optional<bool> lossInPlace;
    // Dropout keeps its masks for the backward, a byte an element (torch's dropout, Megatron-LM's bias-dropout-add);
    // false: the backward reads them again from a counter-based generator and nothing is kept (tessel's own executor,
    // `tessel run`). Not a framework default anywhere: unset means true.
    std::optional<bool> dropoutMasksKept;
    // The model gathers q, k and v into flash-attn's unpadded (varlen) layout and scatters the output back,
    // padding or none (llm-foundry's flash_attn_fn, bert_padding.index_first_axis / pad_input). Model code, not a
    // framework default anywhere: unset means false.
    std::optional<bool> attentionUnpad;
    // Eager cross-entropies the trainer computes over each micro-batch's logits for its training metrics, outside
    // autograd (Composer's _eval_train_metrics after every micro-batch's backward; llm-foundry's MPT models report
    // LanguageCrossEntropy and LanguagePerplexity: 2). Trainer code, not a framework default: unset means 0.
    std::optional<int> trainMetricLosses;
    // CUDA_LAUNCH_BLOCKING=1 in the job's environment: every kernel launch returns only once the kernel is done, so
    // the host's time between kernels is not hidden behind the GPU's queue (BigScience's BLOOM runs set it against
    // hangs). An environment setting, not a framework default: unset means false. FORMULAS.md §3.8.
    std::optional<bool> launchBlocking;
    // DeepSpeed's zero_optimization.contiguous_gradients (deepSpeedContiguousGradientsOf): unset means the version's
    // default.
    std::optional<bool> contiguousGradients;
    // Megatron-LM's gradient_accumulation_fusion (on unless --no-gradient-accumulation-fusion): the weight-gradient
    // GEMM accumulates into the fp32 main_grad (APEX's fused_weight_gradient_mlp_cuda). Off, the GEMM writes a
    // 16-bit .grad that Megatron-core's DDP hook adds into main_grad every micro-batch (gradAccumulationBytesPerParameter).
    // Off in Megatron-LM's deterministic-mode tests and in ROCm runs that pass the flag. Unset means on.
    std::optional<bool> gradAccumulationFusion;
    // Megatron-core's NCCL user buffers (--nccl-ub, DistributedDataParallelConfig.nccl_ub): the parameter and
    // gradient buffers of the data-parallel collectives (the distributed optimizer's, Megatron FSDP's) registered
    // with NCCL, which then runs them with its SM-efficient kernels, 4-5 SMs inside an NVLink domain in place of its
    // channels' (ncclUserBufferCtas, FORMULAS.md §6.2). A launch setting: unset means false.
    std::optional<bool> ncclUb;
    // K and V replicated over TP where the model has fewer key/value heads than tp ranks (tp a multiple of them):
    // each rank projects the one K/V head its query heads read, and the copies' weight gradients are summed over
    // their ranks. BigCode's Megatron-LM fork ran StarCoder's multi-query attention at tp 4 so; Megatron-core and
    // Transformer Engine need kv_heads % tp == 0 instead. Not a default anywhere: unset means false.
    std::optional<bool> kvReplication;
    // The model code repeats grouped-query K and V to every query head before the attention kernel (torchtitan's
    // Llama `repeat_kv` before 2026-01-27, KempnerForge's `repeat_interleave`, eager attention); false: the kernel
    // takes them as they are (Transformer Engine, flash-attn, SDPA's enable_gqa). repeatKvOf gives the default.
    std::optional<bool> repeatKv;
    // The loss over each TP rank's vocabulary shard of the logits (Megatron-core's vocab-parallel cross-entropy,
    // torchtitan's loss_parallel): true unless stated. False: the column-parallel LM head's logits are all-gathered
    // over TP (DTensor's ColwiseParallel(output_layouts=Replicate()), torchtitan's disable_loss_parallel) and every
    // rank holds them whole and runs the loss over the whole vocabulary.
    std::optional<bool> lossParallel;
    // The word embedding split over TP by vocabulary (Megatron-core's VocabParallelEmbedding, torchtitan's
    // RowwiseParallel tok_embeddings): true unless stated. False: every TP rank holds the whole table (a TP plan that
    // leaves the embedding out, KempnerForge's), with its gradient and optimizer state.
    std::optional<bool> vocabParallelEmbedding;
    // The trainer keeps each micro-batch's logits referenced until its backward is over: a Python local bound to the
    // model's output across loss.backward() (KempnerForge's `logits = model(...)`, AutoModel's Engine `output`), or
    // a state it reads afterwards (Composer's state.outputs, which its training metrics read). The logits then outlive
    // the loss's backward and sit beside the last layer's backward (memory.cpp, the last stage's two moments).
    // torchtitan deletes them before the backward (`del pred`), Megatron-LM computes its loss inside the model: unset
    // means true where the trainer computes training metrics over them (train_metric_losses > 0), false elsewhere
    // (tessel's executor frees them with the head's other saved tensors as the head's backward ends).
    std::optional<bool> logitsHeldThroughBackward;
    // The trainer compiles the whole model as one graph (`torch.compile(model)`: KempnerForge's train.py, nanoGPT's),
    // not block by block (torchtitan). Where nothing splits that graph (no FSDP or ZeRO wrapper, whose hooks break it
    // at every unit, and no DDP, whose DDPOptimizer breaks it at every bucket: zero stage 0 and dp 1), its backward
    // is one autograd.Function (AOTAutograd's CompiledFunction) that returns every parameter's gradient at once,
    // after the whole backward, and the autograd engine adds them into .grad only then: from the second micro-batch
    // of accumulation a whole second set of the gradients sits beside the accumulated one (memory.cpp). Trainer
    // code, not a framework default: unset means false.
    std::optional<bool> compileWholeModel;
};

// Whether the loss runs over each TP rank's vocabulary shard (true unless loss_parallel is stated false).
bool lossParallelOf(const FrameworkSettings& f);
// Whether the word embedding is split over TP by vocabulary (true unless vocab_parallel_embedding is stated false).
bool vocabParallelEmbeddingOf(const FrameworkSettings& f);
// Whether the trainer holds each micro-batch's logits until its backward is over (logits_held_through_backward;
// unset: true where it computes training metrics over them).
bool logitsHeldThroughBackwardOf(const FrameworkSettings& f);
// Whether the trainer compiles the whole model as one graph (compile_whole_model; false unless stated).
bool compileWholeModelOf(const FrameworkSettings& f);

// Whether the data-parallel collectives run on NCCL user buffers (--nccl-ub; false unless stated).
bool ncclUbOf(const FrameworkSettings& f);
// Whether K and V are replicated over TP ranks beyond the model's key/value heads (false unless stated).
bool kvReplicationOf(const FrameworkSettings& f);
// Whether K and V reach the attention kernel (and a context-parallel ring) at every query head: stated, else for
// torchtitan by its date (its Llama repeats them until "GQA without kv repeats", pytorch/torchtitan#2259,
// 2026-01-27, read as: a year before 2026), else for the eager frameworks (fusedKernelsOf false), whose model code
// repeats them for SDPA. FORMULAS.md §3.2, §5.
bool repeatKvOf(const FrameworkSettings& f);
// A NeMo / NGC container version, YY.MM, as 2000 + YY and MM; nothing for any other version text.
std::optional<std::pair<int, int>> containerYearMonth(const std::string& version);
// Whether tessel reads a date from a framework version (a year such as 2024, a container YY.MM such as 24.05, and
// the framework's own releases: Megatron-core such as core_r0.9.0 and Megatron-LM v2.x / v3.x under megatron, nemo,
// megascale and generic; DeepSpeed's 0.x under deepspeed; PyTorch's 1.x / 2.x under fsdp and torchtitan): the
// framework's defaults follow that date. A release number is read as the framework's own, never another's.
bool frameworkVersionDated(const std::string& framework, const std::string& version);
// What to say about a version tessel reads no date from (the accepted forms for that framework).
std::string frameworkVersionProblem(const std::string& framework, const std::string& version);
// The year of a DeepSpeed 0.x release by its minor version (the first tag of each minor in microsoft/DeepSpeed:
// v0.3.0 2020-09, v0.4.0 2021-06, v0.6.0 2022-03, v0.8.0 2023-01, v0.13.0 2024-01, v0.17 2025).
int deepSpeedReleaseYear(int minor);
// The year of a PyTorch release (1.6-1.7 2020, 1.8-1.10 2021, 1.11-1.13 2022, 2.0-2.1 2023, 2.2-2.5 2024,
// 2.6-2.9 2025, 2.10 on 2026).
int pytorchReleaseYear(int major, int minor);

// How many training-metric cross-entropies the trainer runs over a micro-batch's logits (0 unless stated).
int trainMetricLossesOf(const FrameworkSettings& f);
// Whether kernel launches block (CUDA_LAUNCH_BLOCKING=1; false unless stated).
bool launchBlockingOf(const FrameworkSettings& f);
// Whether Megatron's weight-gradient GEMMs accumulate into main_grad (gradient_accumulation_fusion; true unless stated).
bool gradAccumulationFusionOf(const FrameworkSettings& f);
// Whether Megatron's interleaved schedule runs every forward before any backward when the step has exactly as many
// micro-batches as pipeline stages (schedules.py: `if num_microbatches == pipeline_parallel_size:
// num_warmup_microbatches = total_num_microbatches; all_warmup_microbatches = True`), as it did until "tunable
// schedule with overlapping" (Megatron-LM 4295be1a6c, 2024-11-01; first in core_r0.10.0, NeMo's 24.12 container).
// Since then the warm-up is (p - rank - 1) * 2 + (v - 1) * p chunks whatever the count, all of them only where that
// reaches m v (get_pp_rank_microbatches). True for Megatron-LM and MegaScale versions of 2024 or earlier and NeMo
// containers before 24.12; false for later ones, for an unstated version (today's code) and for every other framework
// (tessel's generic plans run today's Megatron order; DeepSpeed's pipeline engine does not interleave).
bool interleavedAllForwardsFirstWhenMEqualsP(const FrameworkSettings& f);
// Whether the expert layers take a rank layout of their own whatever etp is. Megatron-core from 0.10 ("MoE parallel
// folding: separate MoE parallel states from dense", Megatron-LM 7f22e210cd, 2024-11-23; first in core_r0.10.0,
// NeMo's 24.12 container) builds the expert groups from a RankGenerator of sizes etp, ep, edp = tp x cp x dp /
// (etp x ep), pp with cp = 1 (parallel_state.py, expert_decoder_rank_generator), so with cp > 1 an EP group takes CP
// ranks before data-parallel ones and ep need only divide cp x dp. Before it (core_r0.9.0: generator_wrapper('ep',
// independent_ep=True)) EP was carved out of dp, as MegaScale's fork of 2023 does. True for Megatron-LM / Megatron-core
// of 2025 or core 0.10 on, NeMo containers from 24.12, an unstated version (today's code), generic plans (tessel's
// MoE plans follow Megatron-core) and torchtitan, whose expert mesh has always borrowed the CP ranks (parallel_dims.py:
// ep = dp_shard_in_ep x cp, x tp at expert_tensor_parallel_degree 1); false for older versions and other frameworks.
bool expertRankGeneratorOf(const FrameworkSettings& f);

// The resolved settings the simulator uses, with what was taken from defaults (for reports).
struct OverlapSettings {
    bool overlapGradReduce = true;
    bool overlapParamGather = false;
    bool tpCommOverlap = false;
    bool asyncTpGradReduce = false;
    bool overlapP2pComm = true;
    bool reshardAfterForward = true;
    bool backwardPrefetch = true;
    bool fusedKernels = true;
    bool gradReduceInFp32 = true;
    bool fp8ParamGather = false;
    bool foreachOptimizer = false;
    bool checkpointEarlyStop = false;
    bool storeParamRemainders = false;   // as for a bf16 plan (FP8 ones: storeParamRemaindersOf)
    bool gradSyncEachMicroBatch = true;
    std::vector<std::string> defaulted;  // "overlap_grad_reduce = false (megatron 2023 default)", ...
};

const std::vector<std::string>& frameworkNames();
// The plan keys of the stated overlap settings and the member each fills, in one place for parsing, writing
// and reading published runs.
struct FrameworkFlag {
    const char* key;
    std::optional<bool> FrameworkSettings::*member;
};
const std::vector<FrameworkFlag>& frameworkFlags();
// The year a version string stands for: a year itself, a container's, or a release of the plan's framework mapped
// to its release year (frameworkVersionDated), 0 when unknown (= the framework's current defaults).
int frameworkYear(const FrameworkSettings& f);
// The NCCL a framework's version ran (collectiveLibraryMemory, FORMULAS.md §2): cuMem allocations from NCCL 2.19
// (2023-09; NGC containers from 23.10, other frameworks from 2024), buffers connected per algorithm on first use
// from 2.22 (2024-06; NGC containers from 24.07, PyTorch's wheels from 2.7, so other frameworks from 2025). A
// version not stated is today's.
struct NcclGeneration {
    bool cuMem = true;
    bool connectsPerAlgorithm = true;
};
NcclGeneration ncclGenerationOf(const FrameworkSettings& f);
// Resolves every knob: stated values win, the rest are the framework's defaults for its version
// (docs/frameworks.md lists them with their sources). `interleaved`: the plan uses the interleaved schedule.
OverlapSettings resolveOverlap(const FrameworkSettings& f, bool interleaved, int zeroStage);
// Whether the model's elementwise work (RMSNorm, rotary embedding, SwiGLU, the loss) runs as fused kernels:
// stated, else true except for torchtitan, whose models run them as eager PyTorch ops unless torch.compile is
// on (off in its shipped configs). FORMULAS.md §3.4.
bool fusedKernelsOf(const FrameworkSettings& f);
// Whether Megatron-style main gradients (bf16 weights, fp32 gradient buffer) stay fp32: stated, else true except
// for NeMo from 2024, whose published performance recipes reduce gradients in bf16 (docs/frameworks.md).
bool gradReduceInFp32Of(const FrameworkSettings& f);
// Whether an FP8 plan keeps its linear weights in FP8 (Megatron-LM --fp8-param-gather, NeMo fp8_params): stated,
// else true for NeMo from container 24.09 (NeMo 2's FP8 precision recipes) and for torchtitan (its float8 guide's
// enable_fsdp_float8_all_gather), false otherwise (docs/frameworks.md).
bool fp8ParamGatherOf(const FrameworkSettings& f);
bool fp4ParamGatherOf(const FrameworkSettings& f);
bool nvfp4RhtOf(const FrameworkSettings& f);
bool nvfp4StochasticRoundingOf(const FrameworkSettings& f);
bool teOpFuserOf(const FrameworkSettings& f);
// The FP8 recipes Megatron-core names (--fp8-recipe), and the plan's: "delayed" unless stated (Megatron-core's
// default, TransformerConfig.fp8_recipe, and Transformer Engine's DelayedScaling before Blackwell).
const std::vector<std::string>& fp8RecipeKinds();
std::string fp8RecipeOf(const FrameworkSettings& f);
// Whether AdamW runs as torch.optim's foreach implementation (_multi_tensor_adamw: one pass per op over every
// tensor, about 84 B moved per fp32 parameter) rather than one fused kernel (28 B): stated, else true for torchtitan
// before 2025 (foreach = not job_config.optimizer.fused until pytorch/torchtitan #881, 2025-02-24, made "fused" the
// default), false otherwise (Megatron-LM, NeMo, DeepSpeed: fused Adam). FORMULAS.md §3.
bool foreachOptimizerOf(const FrameworkSettings& f);
// Whether a full recompute stops as soon as every tensor the backward saved is recomputed, so a layer's trailing
// ops that save nothing, and the GEMM whose input is the last one saved, are not rerun: torch.utils.checkpoint's
// non-reentrant implementation with its early stop (on by default since PyTorch 2.1, pytorch#96866), which
// torchtitan's activation checkpointing wraps (checkpoint_wrapper, NO_REENTRANT). Stated, else true for torchtitan,
// false otherwise (Megatron-LM, NeMo and DeepSpeed recompute with their own reentrant checkpoint functions; a plain
// PyTorch FSDP job says which it runs). FORMULAS.md §3.4.
bool checkpointEarlyStopOf(const FrameworkSettings& f);
// Whether a plan with bf16 weights beside an fp32 master under a distributed optimizer (ZeRO >= 1) keeps that
// master as 16-bit remainders (FrameworkSettings::storeParamRemainders): stated, else NeMo's recipes: containers up
// to 24.12 run NeMo 1's distributed_fused_adam, which stores remainders whenever the optimizer is fp32 and the
// model bf16 without fp8_params (megatron_base_model.py setup_optimization, NeMo 46aa1eef5e, 2024-08); from 25.07
// NeMo 2's and Megatron-Bridge's performance scripts turn on Megatron-core's precision-aware optimizer for bf16
// runs (NeMo 1053bed8be, 2025-05-05; Megatron-Bridge 568b3a3ef), whose store_param_remainders defaults to true,
// and not for FP8 ones (`fp8`: the plan's GEMMs are FP8). False for every other framework. docs/frameworks.md.
bool storeParamRemaindersOf(const FrameworkSettings& f, bool fp8);
// The optimizer state's dtype (FrameworkSettings::optimizerDtype): stated, else "fp32".
std::string optimizerDtypeOf(const FrameworkSettings& f);
// Elements of a ZeRO-2/3 gradient bucket (FrameworkSettings::reduceBucketSize): stated, else DeepSpeed's default
// reduce_bucket_size, 5e8 (deepspeed/runtime/zero/config.py), for deepspeed, and Megatron's 40M (its DDP bucket)
// for every other framework.
int64_t reduceBucketElementsOf(const FrameworkSettings& f);
// DeepSpeed ZeRO-3's parameter coordinator limits, in elements: stated, else DeepSpeed's defaults
// (deepspeed/runtime/zero/config.py: max_live_parameters 1e9, prefetch_bucket_size 5e7, max_reuse_distance 1e9).
struct DeepSpeedStage3 {
    int64_t maxLiveParameters = 1000000000;
    int64_t prefetchBucketSize = 50000000;
    int64_t maxReuseDistance = 1000000000;
};
DeepSpeedStage3 deepSpeedStage3Of(const FrameworkSettings& f);
// The plan keys of those limits (DeepSpeed's own config names) and the fields they set.
const std::vector<std::pair<const char*, std::optional<int64_t> FrameworkSettings::*>>& stage3Keys();
// DeepSpeed's zero_optimization.overlap_comm (the plan's overlap_grad_reduce): stated, else its default, true for
// ZeRO-3 and false below (deepspeed/runtime/zero/config.py); resolveOverlap's deepspeed value, without its report.
bool deepSpeedOverlapCommOf(const FrameworkSettings& f, int zeroStage);
// Whether DeepSpeed's ZeRO-1/2 optimizer (stage_1_and_2.py) runs with contiguous_gradients: the plan's
// contiguous_gradients (DeepSpeed's zero_optimization key), else its default, false until v0.5.0 (2021-08-16; a
// DeepSpeed 0.3-0.4 version, or a year up to 2020) and true since; with the optimizer on the host (ZeRO-Offload)
// always on (stage_1_and_2.py sets it whatever it was passed). At ZeRO-1 the engine forced it off from #1246 (v0.4.4,
// 2021-07-26, "Overlap and contiguous grads are meaningless in stage 1 and are ignored") until #4887 (v0.13.0,
// 2024-01, "Release overlap_comm & contiguous_gradients restrictions for ZeRO 1"): a DeepSpeed 0.4-0.12 version or a
// year 2021-2023, whatever the plan states. Off, there is no reduce buffer (ipg_buffer) of its own. A plan of no
// stated version runs today's DeepSpeed.
bool deepSpeedContiguousGradientsOf(const FrameworkSettings& f, int zeroStage, bool offloadOptimizer);
// Whether DeepSpeed's ZeRO-1/2 all-reduces the whole gradient rather than reducing each rank's partition: with
// contiguous_gradients off each bucket goes through buffered_reduce_fallback to allreduce_bucket, which is passed
// rank None (and until #4946, v0.13.0, set `rank = None` on entry whatever it was passed), so it calls dist.all_reduce
// (stage2.py from ZeRO-2's first release, 2020-05, stage_1_and_2.py to today). DeepSpeed 0.3's ZeRO-1 (a year up to
// 2020) was stage1.py's own reduce_scatter_gradients.
bool deepSpeedAllReducesGradientsOf(const FrameworkSettings& f, int zeroStage, bool offloadOptimizer);
// The loss kernel a plan runs (FrameworkSettings::crossEntropy): stated, else "te" for tessel's own executor
// (loss_in_place, the same in-place gradient); "eager" without fused kernels and always under torchtitan, whose
// loss_fn runs outside the compiled blocks (train.py, Dec 2024); "te" for NeMo from container 25.09, whose
// Megatron-Bridge performance scripts set cross_entropy_fusion_impl = "te" (Megatron-Bridge 568b3a3ef,
// 2025-08-28: scripts/performance configs; v0.2.0 utils/helpers.py and recipes/llama/llama3.py); "fused"
// otherwise (Megatron-LM's --cross-entropy-fusion-impl defaults to native). docs/frameworks.md.
std::string crossEntropyOf(const FrameworkSettings& f);
// The loss kernels a plan may name (plan key cross_entropy): fused, te, eager, flash_attn, compiled, fused_linear.
const std::vector<std::string>& crossEntropyKinds();
// The plan's MoE token dispatcher: "alltoall" (unset) or "flex" (FrameworkSettings::moeDispatcher).
std::string moeDispatcherOf(const FrameworkSettings& f);
// The 16-bit compute type: "bf16" (unset) or "fp16" (FrameworkSettings::halfDtype).
std::string halfDtypeOf(const FrameworkSettings& f);
// Whether one micro-batch's EP all-to-alls run under another's compute (FrameworkSettings::moeA2aOverlap).
bool moeA2aOverlapOf(const FrameworkSettings& f);
// Whether the shared experts run beside the dispatch and combine (FrameworkSettings::moeSharedExpertOverlap).
bool moeSharedExpertOverlapOf(const FrameworkSettings& f);
// Whether the loss is eager PyTorch, cross_entropy(logits.float()) (crossEntropyOf is "eager").
bool eagerLossOf(const FrameworkSettings& f);

// Whether a plan's TP overlap (tp_comm_overlap) is PyTorch's async TP rather than Transformer Engine's: torchtitan
// turns on Inductor's micro_pipeline_tp pass (torch/_inductor/fx_passes/micro_pipeline_tp.py), which fuses an
// all-gather with the matmuls that take its result as their first operand and a reduce-scatter whose input is one
// matmul. Under sequence parallelism that is the forward's gathers before QKV and fc1 and reduce-scatters after the
// projection and fc2, and in the backward the output gradients' gathers before the input-gradient GEMMs; the
// backward's reduce-scatters take a sum of matmuls (q, k and v, or the gate and up projections, torchtitan's
// separate linears; pytorch#149946) and the inputs re-gathered for the weight gradients feed them transposed, so
// neither is fused (FORMULAS.md §6.1). Without sequence parallelism there is nothing it fuses.
bool torchAsyncTpOf(const FrameworkSettings& f);
// Whether the plan's tensor parallelism is PyTorch's DTensor (torchtitan, and any PyTorch-native TP, framework fsdp),
// whose sequence parallelism shards the [b, s, h] activations on dim 1 (Shard(1)): each all-gather and
// reduce-scatter of it runs through torch.distributed._functional_collectives on dim 0 with a torch.cat around it
// (all_gather_tensor: cat(chunk(out, tp, dim=0), dim=1) after; reduce_scatter_tensor: cat(chunk(x, tp, dim=1)) before),
// a copy of the whole gathered tensor each (FORMULAS.md §3.7a; torchtitan#437). Megatron-core and Transformer
// Engine keep [s, b, h] and gather on dim 0, with no copy.
bool dtensorTpOf(const FrameworkSettings& f);

// Whether a parallel block (ModelConfig::parallelResidual) sums its attention's and MLP's row-parallel outputs before
// one tensor-parallel reduction (an all-reduce, or with sequence parallelism a reduce-scatter) in place of one each.
// GPT-NeoX's ParallelTransformerLayer does (megatron/model/transformer.py, gpt_j_residual: the two sublayers'
// RowParallelLinears built with parallel_output, then reduce_from_model_parallel_region of their sum), and it is the
// DeepSpeed pipeline codebase with such a block: framework deepspeed with pp > 1, the Megatron-style model code
// under PipelineModule. With pp = 1 tessel reads DeepSpeed's TP as AutoTP on a Hugging Face model (as its export
// does), whose LinearAllreduce reduces attention.dense and mlp.dense_4h_to_h each. Megatron-core's RowParallelLinear
// reduces its own output (NeMo's Falcon layer sums two reduced outputs; Megatron-LM has no parallel block), as
// PyTorch's RowwiseParallel plans do. The backward keeps one input-gradient reduction per column-parallel block
// either way: each block's ColumnParallelLinear copies its own input into the TP region.
bool parallelResidualReducesOnceOf(const FrameworkSettings& f, int pp);

// Whether pipeline sends use the scatter-gather optimization (Narayanan et al. SC'21 §4.1): with tp > 1 and no
// sequence parallelism each tensor-parallel rank sends 1/tp of the hidden state to its peer and the receiving
// stage all-gathers it over its tensor-parallel group. Megatron-LM ran it by default from 2021-02
// (72e4230bb5, p2p_communication.py) until its pipeline moved into megatron/core without it (39b83c7953,
// 2023-01); DeepSpeed's pipeline engine partitions what it sends over the model-parallel group whenever there is
// one (runtime/pipe/engine.py is_pipe_partitioned, 2020 on; pipe_partitioned, default true, from 2023-11).
// Megatron-LM records of unknown year are taken as today's code: no.
bool pipelineScatterGatherOf(const FrameworkSettings& f, int tp, bool sequenceParallel);

// Whether DeepSpeed's BF16_Optimizer runs the plan: DeepSpeed, bf16 weights beside fp32 gradients (the megatron
// recipe), under its pipeline engine (pp > 1), below ZeRO-2. It keeps each parameter's bf16 .grad beside a full,
// unsharded fp32 gradient (fp32_groups_gradients_flat) and adds the first into the second after every micro-batch's
// backward (runtime/pipe/engine.py _exec_backward_pass -> bf16_optimizer.py update_hp_grads; BLOOM's tr11 recipe,
// which runs it as "ZeRO stage 0" sharding the master and moments as ZeRO-1 does).
bool deepSpeedBf16OptimizerOf(const FrameworkSettings& f, int pp, int zeroStage, int weightBytes, int gradBytes);

// Bytes moved per parameter a rank holds, per micro-batch (averaged over the step's micro-batches), to add each
// micro-batch's weight gradients into what the step accumulates (FORMULAS.md §3.6): 0
// where the weight-gradient GEMM accumulates in place (Megatron-LM's gradient_accumulation_fusion, from 2022;
// the generic best case); Megatron-LM's local DDP before it, and Megatron-core's DDP hook when the plan turns the
// fusion off (gradAccumulationFusionOf), main_grad.add_(grad) every micro-batch: 2 g + w;
// autograd's .grad += new_grad from the second micro-batch on: 3 w (m - 1)/m (torch DDP under no_sync,
// DeepSpeed fp16, plain PyTorch); DeepSpeed's BF16_Optimizer (deepSpeedBf16OptimizerOf), update_hp_grads every
// micro-batch, hp.add_(lp.to(fp32)): w + 4 for the fp32 copy, 3 x 4 for the add; ZeRO-2/3 and FSDP add each micro-batch's reduced shard into the accumulated one, 1/shard
// of that; a generic plan under autocast is plain PyTorch (autograd's). w: the gradient's bytes (the weights'
// width), g: the accumulation buffer's.
double gradAccumulationBytesPerParameter(const FrameworkSettings& f, int pp, int zeroStage, int zeroShards,
                                         int microBatches, int weightBytes, int accumulateBytes, bool autocast);
// Bytes per embedding-table element per micro-batch beyond the tokens' scatter and gradAccumulationBytesPerParameter
// (FORMULAS.md §3.6): PyTorch's embedding backward (embedding_dense_backward) zero-fills a dense gradient of the whole
// table in the weight's type (w); where the Megatron family's GEMMs accumulate into main_grad (the fusion: 0 above),
// its DDP hook still adds this table's gradient there (2 g + w: the embedding is no GEMM). The PyTorch trainers
// tessel names; 0 for a plan of no named framework and for tessel's executor (loss_in_place), which scatter-adds into
// its own gradient.
double embeddingGradientBytesPerParameter(const FrameworkSettings& f, int pp, int zeroStage, int zeroShards,
                                          int microBatches, int weightBytes, int accumulateBytes, bool autocast);

// PyTorch FSDP's own memory-bound copies around one sharded unit, bytes per parameter of the unit per micro-batch
// (FORMULAS.md §3.7), beside its collectives and the shard accumulation above. `fsdp` is FullyShardedDataParallel
// (FSDP1: flat parameters): the mixed-precision shard copy before each all-gather, (w + a) / shards; in the
// backward the flat gradient assembled from its views (2g), cast to reduce_dtype (g + r when they differ), divided
// before the reduce-scatter (2r) and after it (2r / shards), the shard cast back (r + w when they differ, / shards).
// `torchtitan` is fully_shard (FSDP2: per-parameter): each all-gather copies the shards in, (w + a) / shards, and
// out into every parameter (2a); the backward copies the gradients into the reduce-scatter buffer in reduce_dtype
// (g + r); fp32 and bf16 reduce with ReduceOp.AVG, no divide. g: the autograd gradient's bytes, r: reduce_dtype's,
// w: the kept shard's, a: the gathered weights'. Gathers per micro-batch: 2 with resharding after forward, else 1;
// under torchtitan's pipelining one gather and one reduction a step. What runs on the compute stream is per
// micro-batch (forward, backward); what runs on a collective's own stream ahead of it is per collective and
// lengthens it (reduceStream, gatherStream: fsdpCollectiveCopySeconds). Zero for every other framework, below
// ZeRO-2 and on one shard.
struct FsdpCopyBytes {
    double forward = 0.0;       // on the compute stream, in the forward
    double backward = 0.0;      // on the compute stream, in the backward
    double reduceStream = 0.0;  // on the reduce-scatter's stream, around each reduce-scatter (per its parameter)
    double gatherStream = 0.0;  // on the all-gather's stream, before each all-gather (per its parameter)
};
FsdpCopyBytes fsdpCopyBytesPerParameter(const FrameworkSettings& f, int pp, int zeroStage, int zeroShards,
                                        int microBatches, bool reshardAfterForward, int gradBytes, int reduceBytes,
                                        int shardBytes, double gatherBytes);

// FSDP under torch.distributed.pipelining as torchtitan runs it (parallelize_llama.py at 9dec370: with pp > 1 no
// block reshards after forward; PipelineStage syncs gradients on the last backward only): a stage gathers its
// parameters once a step and keeps them, accumulates unsharded gradients in the reduce dtype, and reduce-scatters
// them once at the step's end (FORMULAS.md §2, §5). A plan that states reshard_after_forward true does not. The
// generic framework does the same where its plan states reshard_after_forward false: Llama 3's 405B run (Llama
// Team 2024, arXiv:2407.21783 §3.3.2: FSDP that does not reshard after forward under its pipeline, gradients
// accumulated and reduce-scattered in fp32).
bool fsdpGathersOncePerStep(const FrameworkSettings& f, int pp, int zeroStage);
// Gradients reduce-scattered once a step, the whole unsharded gradient kept until then: FSDP under torchtitan's
// pipelining (fsdpGathersOncePerStep), or FSDP (1 or 2) with grad_sync_each_micro_batch false, its no_sync
// (FrameworkSettings::gradSyncEachMicroBatch), which still gathers the parameters every micro-batch.
bool fsdpReducesOncePerStep(const FrameworkSettings& f, int pp, int zeroStage);
// The bytes a parameter of the unsharded gradient FSDP's no_sync keeps: FSDP1 (fsdp) in the gathered parameter's
// dtype, FSDP2 (torchtitan's costs) in the reduce dtype (FSDPParam.to_accumulated_grad_if_needed upcasts it).
double fsdpNoSyncGradBytes(const FrameworkSettings& f, const PrecisionRecipe& recipe);

// Pipeline transfers through torch.distributed.pipelining (torchtitan with pp > 1): a PipelineStage allocates a
// receive buffer per micro-batch for its input (not on the first stage) and another for the gradient of its output
// (not on the last), once, and keeps them for the run (stage.py _prepare_forward_infra / _prepare_backward_infra:
// args_recv_info and grad_recv_info per chunk, 2024 to today); a received input is the stage's input itself, and
// each stage output stays in fwd_cache until its backward. Megatron-LM and DeepSpeed receive into a tensor per
// transfer.
bool torchPipeliningOf(const FrameworkSettings& f, int pp);

// Which stage outputs torch.distributed.pipelining keeps in output_chunks until the step returns, as torchtitan's
// version runs it: every stage's every micro-batch in 2024 (pytorch/pytorch#153383, 2025-05, kept the last stage's
// only), the last stage's (its logits) through 2025 (torchtitan e5ef99aab, 2025-10-22, passes return_outputs=False,
// pytorch/pytorch#165822), none for a later or unstated version.
struct RetainedStageOutputs {
    bool lastStage = false;
    bool everyStage = false;
};
RetainedStageOutputs torchPipeliningRetainedOutputsOf(const FrameworkSettings& f, int pp);

// The attention kernel a framework's own launcher chose where the plan names none, or "" for the GPU's default
// (cluster gpu.default_attention_kernel). NeMo containers 24.01 to 24.07 ran under NeMo-Framework-Launcher's
// launcher_scripts/conf/config.yaml, whose env_vars set NVTE_FUSED_ATTN: 0 ("Disable cudnn FA until we've tested it
// more"; added 562dcb45, 2024-02-13, in the 24.01-24.07 tags, removed 04b8d098, 2024-08-29, before 24.09), so
// Transformer Engine ran flash-attn 2 where it would have chosen cuDNN's fused attention on Hopper: "flash2".
std::string attentionKernelDefaultOf(const FrameworkSettings& f);

// Reads the framework keys of a plan object ("framework", "framework_version", "ddp_impl", "overlap_grad_reduce",
// "overlap_param_gather", "tp_comm_overlap", "async_tp_grad_reduce", "overlap_p2p_comm", "reshard_after_forward",
// "backward_prefetch", "fused_kernels", "grad_reduce_in_fp32", "fp8_param_gather", "foreach_optimizer",
// "store_param_remainders", "cross_entropy", "optimizer_dtype"); problems carry their JSON pointers.
class ObjectReader;
FrameworkSettings parseFrameworkSettings(ObjectReader& r);
void frameworkToJson(const FrameworkSettings& f, nlohmann::json& plan);

} // namespace tessel
