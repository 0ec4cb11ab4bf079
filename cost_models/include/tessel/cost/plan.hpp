// Parallelism plan (TP/PP/DP/CP/EP, ZeRO, micro-batching, recompute, schedule) and precision recipes.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/model.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

enum class Recompute { None, Selective, Full };
// The parts of a layer selective recompute reruns in backward (Megatron-core's --recompute-modules,
// transformer_config.py recompute_modules; FORMULAS.md §2 and §3.4), as bits of Plan::recomputeModules. CoreAttn: the
// attention core (the only one before Megatron-core 0.12, and every other framework's selective recompute);
// Layernorm: the norms Transformer Engine does not fuse into the GEMM after them (an MLA layer's input norm, an MoE
// layer's pre-MLP norm), their outputs dropped once the GEMMs have read them; MlaUpProj: MLA's up projections and
// RoPE, q, k and v dropped once the attention kernel has read them; Mlp: a dense layer's whole MLP with its norm;
// MoeAct: the experts' activation, its output dropped once fc2 has read it; Moe: the whole MoE layer, router,
// dispatch and combine included; SharedExperts: the shared experts' MLP.
namespace recompute_module {
constexpr uint8_t CoreAttn = 1, Layernorm = 2, MlaUpProj = 4, Mlp = 8, MoeAct = 16, Moe = 32, SharedExperts = 64;
constexpr uint8_t Default = CoreAttn; // Megatron-core's default, ["core_attn"]
constexpr uint8_t All = CoreAttn | Layernorm | MlaUpProj | Mlp | MoeAct | Moe | SharedExperts;
} // namespace recompute_module
// Megatron-core's names of the modules, in its documentation's order, with their bits.
const std::vector<std::pair<std::string, uint8_t>>& recomputeModuleNames();
// "core_attn,mlp": the set's names joined by `separator`, in recomputeModuleNames' order ("" for none).
std::string recomputeModulesString(uint8_t modules, const char* separator = ",");
// The set's names, in the same order (a plan file's recompute_modules list).
std::vector<std::string> recomputeModulesList(uint8_t modules);
// The bit of one of Megatron-core's module names; nothing for a name tessel does not cost.
std::optional<uint8_t> recomputeModuleBit(const std::string& name);
// DualPipeV: DeepSeek's DualPipe cut in half (PyTorch's ScheduleDualPipeV): two chunks a rank laid out in a V,
// rank s running virtual stages s and 2 pp - 1 - s, one micro-batch's forward chunk overlapped with another's
// backward chunk (FORMULAS.md §6). ZeroBubbleV: ZB-V (Qi et al. 2024 §6; PyTorch's ScheduleZBVZeroBubble), the same V
// with every backward split into its input and weight halves.
enum class Schedule { Gpipe, OneFOneB, Interleaved1F1B, ZeroBubble, DualPipeV, ZeroBubbleV };
// The process-group dimensions of a plan; rank_order lists them fastest first.
enum class ParallelDim { Tp, Cp, Ep, Dp, Pp };
// How transformer layers are spread over pipeline stages when the plan does not list them: evenly (pp x vpp
// must divide the layers); balanced against the time of the embedding on the first stage and the output layer
// and loss on the last; or counting each of those as one layer, as Megatron-LM's
// --account-for-embedding/loss-in-pipeline-split and DeepSpeed's "type:transformer|embedding" partition do
// (FORMULAS.md §5.4).
enum class PipelineSplit { Even, Balanced, EndsAsLayers };
// How context parallelism exchanges what attention needs (Megatron-core --cp-comm-type, Transformer Engine's
// attn_forward_func_with_cp; FORMULAS.md §3.2, §5): P2p the ring, each rank's K and V passed around the CP group
// step by step under the steps' attention; A2a DeepSpeed-Ulysses' all-to-all, which trades the sequence split for a
// head split around attention (q, k, v in, the output back); AllGather K and V gathered whole before attention and
// their gradients reduce-scattered after it (Llama 3, Dubey et al. 2024, §3.3.2); A2aP2p both, hierarchically: the
// all-to-all over groups of cp_a2a_size consecutive CP ranks, the ring across those groups (Megatron-core's
// --hierarchical-context-parallel-sizes).
enum class CpComm { P2p, A2a, AllGather, A2aP2p };

// The virtual stage (model order) chunk `chunk` of pipeline stage `stage` runs: chunk x pp + stage (Megatron-LM's
// interleaving), or, laid out in a V (DualPipeV, ZB-V), chunk 0 at stage and chunk 1 at 2 pp - 1 - stage.
constexpr int virtualStageOf(int pp, int stage, int chunk, bool vShape) {
    return vShape && chunk == 1 ? 2 * pp - 1 - stage : chunk * pp + stage;
}

std::string toString(Recompute r);
std::string toString(Schedule s);
std::string toString(ParallelDim d);
std::string toString(PipelineSplit s);
std::string toString(CpComm c);

// What a training recipe keeps per parameter. Bytes per element; 0 = not kept.
struct PrecisionRecipe {
    std::string name;
    Dtype computeDtype = Dtype::Bf16;   // weights as used by GEMMs, activations
    int weightBytes = 2;
    int gradBytes = 2;                  // gradient buffer the backward accumulates into
    int masterBytes = 4;                // fp32 master copy (0 when the weights are the master; 2 as remainders)
    int momentBytes = 4;                // each of Adam's two moments
    // FP8 and NVFP4 training as Transformer Engine does it: GEMMs in this dtype (activations and everything else in
    // computeDtype), GEMM inputs saved for backward at its width (quantizedBytes), and per linear weight its
    // quantized copies (quantizedWeightCopyBytes: FP8's copy and transpose, NVFP4's rowwise and columnwise copies)
    // kept for the step.
    Dtype gemmDtype = Dtype::Bf16;
    double quantizedWeightCopyBytes = 0.0;
    // What the data-parallel collectives move per parameter when it differs from what is kept: PyTorch FSDP
    // keeps fp32 parameter shards and gathers them cast to bf16 (param_dtype), and reduces in reduce_dtype.
    // 0 = the kept width (weightBytes, gradBytes).
    double gatherBytes = 0.0;
    int reduceBytes = 0;
    // PyTorch autocast over fp32 parameters (torch.autocast: HF Trainer --bf16, Lightning bf16-mixed, nanoGPT):
    // GEMMs and attention run in computeDtype on copies autocast makes, the residual stream, the norms and the
    // loss stay fp32 (autocastResidualBytes), every weight is cast once a forward and the copy is kept by its
    // GEMM for the backward (FORMULAS.md §2, §3.5).
    bool autocast = false;
    // Quantized parameters (fp8_param_gather, fp4_param_gather): the linear weights are kept in FP8 or NVFP4 alone,
    // no 16-bit copy beside them.
    bool quantizedParams = false;
    // Whether Transformer Engine keeps each FP8 tensor's transpose beside it (Hopper's FP8 GEMMs take TN operands
    // only); false on a GPU whose FP8 GEMMs take any layout under per-tensor scaling (fp8OnGpu).
    bool fp8Transposes = true;
    bool fp8() const { return gemmDtype == Dtype::Fp8; }
    bool fp4() const { return gemmDtype == Dtype::Fp4; }
    // Transformer Engine's (or torchao's) quantized GEMMs: FP8 or NVFP4.
    bool quantizedGemms() const { return fp8() || fp4(); }
    // One quantized copy of a GEMM operand, bytes an element with its scales: FP8 1 (one fp32 scale a tensor);
    // NVFP4 0.5 of E2M1 data and one E4M3 scale per 16 elements, 0.5625 (Transformer Engine
    // pytorch/tensor/nvfp4_tensor.py: two elements a byte, get_scale_shape's K/16 scales a row; the scales' padding
    // to 128 x 4 blocks is left out). Otherwise the dtype's width.
    double quantizedBytes() const { return fp4() ? 0.5 + 1.0 / 16.0 : bytesPerElement(gemmDtype); }
    // What a quantized parameter takes as kept (quantizedParams): FP8 its data and transpose (1 B without the
    // transpose, fp8OnGpu); NVFP4 its rowwise and columnwise copies, the columnwise rebuilt by transposing the gathered
    // rowwise one (Transformer Engine utils.py _nvfp4_2d_multi_tensor_transpose).
    double quantizedParamBytes() const { return fp4() ? 2.0 * quantizedBytes() : fp8Transposes ? 2.0 : 1.0; }
    // Megatron-style fp32 main gradients beside bf16 weights and an fp32 master (megatron, fp8): what the
    // framework's grad_reduce_in_fp32 decides (precisionRecipeOf).
    bool megatronMainGrads() const { return weightBytes == 2 && gradBytes == 4 && masterBytes == 4; }
    double paramGatherBytes() const { return gatherBytes > 0.0 ? gatherBytes : weightBytes; }
    int gradReduceBytes() const { return reduceBytes > 0 ? reduceBytes : gradBytes; }
    int bytesPerParameter() const { return weightBytes + gradBytes + masterBytes + 2 * momentBytes; }
    int optimizerBytesPerParameter() const { return masterBytes + 2 * momentBytes; }
};

// The named recipes: megatron (18 B), mixed (16 B), bf16_no_master (12 B), fp32 (16 B), amp (16 B + the
// 2 B autocast copy of each weight from its forward to its backward),
// cpu_fp64 (32 B) and cpu_fp32 (16 B), the last two being what the CPU executor allocates; fp8 is megatron's
// 18 B with FP8 GEMMs and 2 B more per linear weight (Transformer Engine); nvfp4 the same with NVFP4 GEMMs and
// 1.125 B more per linear weight.
const std::vector<PrecisionRecipe>& precisionRecipes();
const PrecisionRecipe* findPrecisionRecipe(const std::string& name);
// The recipe as the framework runs it: a recipe with Megatron-style main gradients (bf16 weights, fp32 gradient
// buffer: megatron, fp8) keeps and reduces them in bf16 (2 B) when grad_reduce_in_fp32 resolves false
// (gradReduceInFp32Of). Under a distributed optimizer (zeroStage >= 1) the fp32 master of bf16 weights is 2 B of
// remainders where storeParamRemaindersOf says so, and optimizer_dtype bf16 keeps 2 B moments and no master
// (FORMULAS.md §2). Throws InputError for an unknown recipe name.
// Under DeepSpeed the fp32 gradients of a 16-bit recipe are reduced in 16 bits (reduceBytes 2): the engine's
// communication_data_type is the 16-bit dtype where fp16 or bf16 is enabled and the config names none, for its
// BF16_Optimizer and its ZeRO-1/2/3 optimizers alike. half_dtype fp16 computes in fp16 (Volta).
PrecisionRecipe precisionRecipeOf(const std::string& precision, const FrameworkSettings& framework, int zeroStage = 0);
// What keeps `cluster` from running the recipe `precision` as the framework runs it ("" where nothing does): an FP8
// recipe's GEMMs on a GPU with no FP8 peak, or a compute dtype with no peak (bf16 on Volta). validatePlan and the
// search's space both say it.
std::string precisionUnsupported(const ClusterConfig& cluster, const std::string& precision, const FrameworkSettings& framework);

// The largest counts a plan may hold, from any source (plan JSON, CLI, a validation record): past these a count
// no longer fits the int it is kept in, or the products of degrees overflow.
struct PlanLimits {
    static constexpr int64_t degree = int64_t{1} << 20;      // tp, pp, dp, cp, ep, zero_replicas
    static constexpr int64_t virtualStages = 1024;           // vpp
    static constexpr int64_t microBatch = int64_t{1} << 20;
    static constexpr int64_t globalBatch = int64_t{1} << 30;
    static constexpr int64_t layers = int64_t{1} << 20;      // per-stage layer counts, recompute and offload layers
    static constexpr int64_t ranks = int64_t{1} << 20;       // tp x pp x dp x cp
    // pp x vpp x micro-batches a step: the chunk passes a simulated schedule holds (a forward and a backward each,
    // with their sends). The largest published plan needs 32,768 (SC'21's 1T: pp 64 x 512 micro-batches; `tessel
    // predict` 0.30 s, 84 MB); time and memory grow with the count, and 2^28 micro-batches exhausted memory.
    static constexpr int64_t scheduleSlots = int64_t{1} << 16;
};

struct Plan {
    int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
    // Expert tensor parallelism (Megatron-core's --expert-tensor-parallel-size); 0: the same as tp. With etp != tp
    // the expert layers have their own layout (MoE parallel folding, Liu et al. 2025): etp x ep x edp spans the
    // stage's tp x cp x dp ranks, so EP can take TP and CP ranks; with etp == tp, EP is carved out of dp.
    int etp = 0;
    int vpp = 1;                        // virtual pipeline stages (model chunks) per pipeline rank
    // Uneven pipeline splits. pipelineLayers: transformer layers of every virtual stage in model order
    // (virtual stage u = virtualStage(stage, chunk)), pp x vpp entries; empty = decided by the fields below.
    // first/lastStageLayers: Megatron-LM's --decoder-first/last-pipeline-num-layers (0 = not set): the first
    // (last) pipeline rank holds that many layers, the other ranks share the rest evenly.
    std::vector<int> pipelineLayers;
    int firstStageLayers = 0, lastStageLayers = 0;
    PipelineSplit pipelineSplit = PipelineSplit::Even;
    std::vector<int> resolvedPipelineLayers; // the balanced split on a cluster (resolvePipelineSplit); not saved
    int microBatch = 1;
    int globalBatch = 1;
    int zeroStage = 0;                  // 0-3, over dp (or dp x cp with zeroOverCp)
    bool zeroOverCp = true;             // as Megatron-core and torchtitan shard with cp > 1
    CpComm cpComm = CpComm::P2p;        // context parallelism's exchange (cp_comm_type); p2p, the ring, by default
    int cpA2a = 0;                      // a2a+p2p: ranks of each all-to-all group (cp_a2a_size); 0 otherwise
    // The CP ranks each rank's heads are split over by an all-to-all, and the length of the K/V ring across them:
    // a2a cp and 1, a2a+p2p cp_a2a_size and cp / cp_a2a_size, p2p 1 and cp (allgather 1 and cp: no ring, a gather).
    int cpHeadSplit() const { return cpComm == CpComm::A2a ? cp : cpComm == CpComm::A2aP2p ? std::max(1, cpA2a) : 1; }
    int cpRing() const { return cp / cpHeadSplit(); }
    // Hybrid sharding (HSDP): the ZeRO group (dp, or dp x cp) splits into this many replicas, each sharding the
    // model state over its own ranks (the group's fastest-varying ones); gradients are reduce-scattered inside a
    // replica and all-reduced across replicas. PyTorch FSDP HYBRID_SHARD, torchtitan data_parallel_replicate_degree,
    // Megatron-core --num-distributed-optimizer-instances, DeepSpeed MiCS. 1 = shard over the whole group.
    int zeroReplicas = 1;
    Recompute recompute = Recompute::None;
    // With full recompute: how many layers of each model chunk (a stage's layers, or one virtual stage's)
    // are recomputed, from the chunk's first; the rest keep their activations (Megatron-LM's
    // --recompute-method block --recompute-num-layers N). 0: every layer (--recompute-method uniform, 1 layer).
    int recomputeLayers = 0;
    // With selective recompute: the parts of each layer rerun (recompute_module bits; Megatron-core's
    // --recompute-modules). Without selective recompute it stays the default.
    uint8_t recomputeModules = recompute_module::Default;
    // Whether the backward reruns the forward of `module` (a recompute_module bit): every part under full recompute,
    // the plan's modules under selective.
    bool recomputes(uint8_t module) const {
        return recompute == Recompute::Full || (recompute == Recompute::Selective && (recomputeModules & module) != 0);
    }
    // Layers recomputed of a chunk holding `chunkLayers` layers (FORMULAS.md §2, partial recompute).
    int recomputedLayersOf(int chunkLayers) const {
        if (recompute != Recompute::Full) return 0;
        return recomputeLayers > 0 ? std::min(recomputeLayers, chunkLayers) : chunkLayers;
    }
    bool sequenceParallel = false;
    bool flashAttention = true;
    std::string attentionKernel = "auto"; // fused attention kernel ("flash2", "flash3", ...); "auto": the GPU's default
    Schedule schedule = Schedule::OneFOneB;
    std::string precision = "megatron";
    std::array<ParallelDim, 5> rankOrder{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp,
                                         ParallelDim::Pp};
    // Offload to host memory (FORMULAS.md §8): the fp32 master weights, Adam moments and fp32 gradient partition
    // with the optimizer step on the CPU (DeepSpeed ZeRO-Offload, Megatron's --optimizer-cpu-offload); the 16-bit
    // parameter partition (ZeRO-Infinity, ZeRO-3 only); the checkpointed layer inputs (DeepSpeed's
    // cpu_checkpointing, full recompute only); or every activation of the first offloadActivationLayers layers
    // (Megatron-core's --cpu-offloading-num-layers: pp 1, no recompute).
    bool offloadOptimizer = false;
    bool offloadParameters = false;
    bool offloadActivations = false;
    int offloadActivationLayers = 0;
    bool offloads() const {
        return offloadOptimizer || offloadParameters || offloadActivations || offloadActivationLayers > 0;
    }
    // Megatron-core's --first-last-layers-bf16 under an FP8 or NVFP4 recipe: the model's first bf16LayersAtStart and
    // last bf16LayersAtEnd transformer layers run outside the quantized context, in bf16 (Megatron-core fp8_utils.py /
    // fp4_utils.py get_fp8_context / get_fp4_context: nullcontext for layer < num_layers_at_start_in_bf16 or >= layers
    // - num_layers_at_end_in_bf16; FORMULAS.md §6.3). 0 and 0: every layer quantized.
    int bf16LayersAtStart = 0;
    int bf16LayersAtEnd = 0;
    bool bf16EndLayers() const { return bf16LayersAtStart > 0 || bf16LayersAtEnd > 0; }
    // Whether transformer layer `index` (0-based, model order) of a model of `layers` layers is one of them.
    bool isBf16Layer(int index, int layers) const {
        return index < bf16LayersAtStart || index >= layers - bf16LayersAtEnd;
    }
    int vocabDivisibleBy = 0;           // vocabulary padded to a multiple of this x tp; 0: the framework's (vocabMultipleOf)
    FrameworkSettings framework;        // what runs the plan, and the settings that decide overlap

    int worldSize() const { return tp * pp * dp * cp; }
    // The virtual stage (model order, 0 .. pp x vpp - 1) chunk `chunk` of pipeline stage `stage` runs: chunk x pp +
    // stage (Megatron-LM's interleaving), or the V of DualPipeV (chunk 0: stage, chunk 1: 2 pp - 1 - stage).
    int virtualStage(int stage, int chunk) const { return virtualStageOf(pp, stage, chunk, vShape()); }
    // The schedules whose two chunks a rank lie in a V (DualPipeV, ZB-V).
    bool vShape() const { return schedule == Schedule::DualPipeV || schedule == Schedule::ZeroBubbleV; }
    // The pipeline stage and chunk that run virtual stage u.
    int stageOfVirtual(int u) const { return vShape() && u >= pp ? 2 * pp - 1 - u : u % pp; }
    int chunkOfVirtual(int u) const { return u / pp; }
    // Whether the stage runs the model's first virtual stage (the embedding) or its last (output layer and loss):
    // stages 0 and pp - 1, both stage 0 under a V (DualPipeV, ZB-V).
    bool holdsEmbedding(int stage) const { return stage == 0; }
    bool holdsHead(int stage) const { return stage == stageOfVirtual(pp * vpp - 1); }
    int expertTp() const { return etp > 0 ? etp : tp; }
    // MoE parallel folding: etp differs from tp, so the expert layers split their experts their own way.
    bool expertFolded() const { return etp > 0 && etp != tp; }
    // The expert layers laid out on their own (topology.hpp's expert layout): folded, or Megatron-core's expert
    // RankGenerator (expertRankGeneratorOf) with cp > 1 and ep > 1, where its EP takes CP ranks first. Elsewhere
    // (cp 1, or older frameworks) EP is carved out of dp, which with cp 1 is the same layout.
    bool expertLayoutApart() const {
        return expertFolded() || (cp > 1 && ep > 1 && expertRankGeneratorOf(framework));
    }
    // Expert data parallelism: the ranks holding the same expert shard. Laid out apart: tp x cp x dp / (etp x ep);
    // otherwise dp / ep (EP carved out of dp).
    // 0 where etp x ep does not divide the stage's ranks (validatePlan's /plan/etp); in 64 bits, as the degrees
    // are checked only after.
    int expertDp() const {
        if (ep < 1) return 0;
        if (!expertLayoutApart()) return dp / ep;
        const int64_t stage = int64_t{tp} * cp * dp, expert = int64_t{expertTp()} * ep;
        return stage % expert == 0 ? static_cast<int>(stage / expert) : 0;
    }
    int microBatchesPerStep() const { return static_cast<int>(globalBatch / (static_cast<int64_t>(microBatch) * dp)); }
    // Ranks one copy of the ZeRO state is sharded over: the ZeRO group over its replicas.
    int zeroShardSize() const { return (zeroOverCp ? dp * cp : dp) / std::max(1, zeroReplicas); }
    // Ranks that hold the same expert shard and sum its gradients: expertDp(), or dp / ep x cp where EP is carved out
    // of dp (the CP ranks' tokens differ, so their gradients are summed too).
    int expertGradientGroup() const { return expertLayoutApart() ? expertDp() : expertDp() * cp; }
    // The same for expert parameters: their data-parallel group (dp / ep, x cp with zeroOverCp; laid out apart:
    // expertDp(), which already spans the CP ranks) over the replicas.
    int expertZeroShardSize() const {
        return (expertLayoutApart() ? expertDp() : expertDp() * (zeroOverCp ? cp : 1)) / std::max(1, zeroReplicas);
    }
    // Whether hybrid sharding's `replicas` split the expert data-parallel group a model with experts shards over (the
    // group is checked only where experts are laid out apart: ep > 1 or folded). validatePlan and the search's
    // verdict and replica choice ask it.
    bool replicasSplitExperts(int replicas) const {
        return (ep <= 1 && !expertLayoutApart()) || (expertGradientGroup() > 0 && expertGradientGroup() % replicas == 0);
    }
    // Ranks a hybrid-sharding gradient reduce-scatter spans (the ZeroShard / ExpertZeroShard group of topology.hpp):
    // the dense gradient group (dp x cp) or the expert one (expertGradientGroup()) over the replicas.
    int zeroReduceGroupSize(bool expert) const { return (expert ? expertGradientGroup() : dp * cp) / std::max(1, zeroReplicas); }
    std::string rankOrderString() const;
};

// What is wrong with the plan's recompute modules (key, message): stated without selective recompute, on a framework
// other than Megatron-core's, or naming a part the model lacks. Empty for the default set. validatePlan and the
// search's verdict both read it.
std::vector<std::pair<std::string, std::string>> recomputeModuleProblems(const ModelConfig& model, const Plan& plan);
// What keeps Megatron-core's shared-expert overlap from running (key, message): no shared experts to overlap, the
// batch-level EP overlap beside it, or the shared experts' own recompute module (Megatron-core refuses the last two).
// Empty when the plan does not ask for it. validatePlan and the search's verdict both read it.
std::vector<std::pair<std::string, std::string>> sharedExpertOverlapProblems(const ModelConfig& model, const Plan& plan);
// What keeps the plan's BF16 end layers from running (key, message): no Transformer Engine FP8 or NVFP4 recipe to keep
// them out of (Megatron-core's fp8_utils.py / fp4_utils.py; torchao's Float8Linear has no such option), or more of them
// than the model has layers. Empty without them. validatePlan and the search's space check both read it.
std::vector<std::pair<std::string, std::string>> bf16EndLayerProblems(const ModelConfig& model, const Plan& plan);
// The plan a BF16 end layer is costed with: the same plan under the megatron recipe (bf16 GEMMs, no casts, no
// quantized copies), as Megatron-core runs a layer outside the FP8 / FP4 context. The simulator, the balanced
// pipeline split and the search's bound all cost such a layer with it.
Plan bf16EndLayerPlan(const Plan& plan);
// The plan's recompute as a table shows it: "none", "selective", "full", "full:n" for partial recompute, or
// "selective:mla_up_proj,mlp" for selective recompute of other modules than the attention core.
std::string recomputeString(const Plan& p);
// What the plan offloads: "none", or "optimizer", "parameters", "activations", "activations:N" (N layers' worth,
// Megatron-core's CPU offloading) joined by '+'.
std::string offloadString(const Plan& p);

// The plan's recipe (precisionRecipeOf above, with the plan's precision and framework).
PrecisionRecipe precisionRecipeOf(const Plan& plan);
// The recipe on a GPU: Transformer Engine 2.x keeps no FP8 transpose on a GPU whose FP8 GEMMs take any layout
// (GpuSpec::fp8GemmAnyLayout) under per-tensor scaling (fp8_recipe delayed or tensorwise; MXFP8 and blockwise
// scaling quantize the columnwise copy on its own blocks, kept as Hopper's transpose is), so an FP8 weight is 1 B,
// not data and transpose, 2 (FORMULAS.md §3.6).
PrecisionRecipe fp8OnGpu(PrecisionRecipe recipe, const FrameworkSettings& framework, const GpuSpec& gpu);
// The precision recipe a plan that names none runs, its framework's: torchtitan's and PyTorch FSDP's fp32 parameters,
// sharded by fully_shard and gathered cast to bf16 ("fsdp": mixed_precision_param bfloat16, reduce float32) where
// they shard (dp / zero_replicas > 1 under ZeRO, or cp > 1), autocast over replicated ones ("amp", DDP or one
// device), and under torchtitan fp32 throughout with tensor or pipeline parallelism and no sharding, where it
// neither shards nor autocasts (maybe_enable_amp: "Mixed precision training with TP or PP is only supported when
// FSDP/HSDP/CP is enabled"); every other framework Megatron-LM's bf16 weights beside an fp32 master ("megatron").
std::string defaultPrecisionOf(const Plan& plan);

// Parses a plan object (keys in scenarios/schema/plan.schema.json); absent keys take the defaults above.
Plan parsePlan(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems);
nlohmann::json planToJson(const Plan& p);
// Parses "tp-cp-ep-dp-pp"; records a problem at `where` unless it is a permutation of the five dims.
std::array<ParallelDim, 5> parseRankOrder(const std::string& text, const std::string& where, ProblemList& problems);

// Checks the plan against the model and cluster: divisibility (heads, kv heads, layers, vocab, batch,
// experts), world size = GPUs, schedule vs vpp, recipe vs GPU dtype. `pointer` prefixes the plan's
// fields (e.g. "/plan"); problems about the model or cluster name those pointers.
void validatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                  const std::string& pointer, ProblemList& problems);

// What the vocabulary is padded to a multiple of (times tp): vocab_divisible_by where the plan gives it, else the
// framework's: Megatron-LM and what builds on it (NeMo, MegaScale, Megatron-DeepSpeed; tessel's generic plans
// too) pad to 128 (--make-vocab-size-divisible-by); PyTorch FSDP and torchtitan train the model's own
// vocabulary, unpadded (1).
int vocabMultipleOf(const Plan& plan);
// The vocabulary after that padding, to a multiple of vocabMultipleOf(plan) * tp.
int64_t paddedVocab(const ModelConfig& model, const Plan& plan);

// Transformer layers of every virtual stage, in model order (pp x vpp entries, virtual stage u =
// plan.virtualStage(stage, chunk)): pipelineLayers when set, else Megatron's first/last-stage rule, else the balanced split (resolved
// by resolvePipelineSplit, or balanced on FLOPs when no cluster resolved it), else even. Entries may be
// wrong (not summing to the layers) only for a plan validatePlan rejects.
std::vector<int> chunkLayerCounts(const ModelConfig& model, const Plan& plan);
// The most transformer layers any virtual stage holds (the largest of chunkLayerCounts; 0 for none).
int largestChunkLayers(const ModelConfig& model, const Plan& plan);
// Computes the balanced split on `cluster`'s compute model (time, not FLOPs) into resolvedPipelineLayers; a
// no-op for any other split. Call it whenever a plan meets its cluster or its shape changes.
void resolvePipelineSplit(const ModelConfig& model, const ClusterConfig& cluster, Plan& plan);
// The plan with its balanced split resolved on `cluster` when it is not yet (a copy either way).
Plan withResolvedPipelineSplit(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);
// Layers of one pipeline rank over all its chunks, and of chunk `chunk` of rank `stage`.
int stageLayerCount(const ModelConfig& model, const Plan& plan, int stage);
// Parameter tensors pipeline stage `stage` holds as tessel's executor lays them out (executor/src/gpt_layout.cpp;
// tests/executor/parameter_count_test.cpp checks the two agree): what its optimizer step loops over.
int stageParameterTensors(const ModelConfig& model, const Plan& plan, int stage);
int chunkLayerCount(const ModelConfig& model, const Plan& plan, int stage, int chunk);
// An MoE model's dense layers (moe.dense_layers) in chunk `chunk` of rank `stage`, and over all its chunks; 0 for a
// model without MoE or without dense layers among its expert layers.
int denseLayersOfChunk(const ModelConfig& model, const Plan& plan, int stage, int chunk);
int denseLayersOfStage(const ModelConfig& model, const Plan& plan, int stage);
// How many of the stage's transformer layers are BF16 end layers of an FP8 or NVFP4 plan (first_last_layers_bf16).
int bf16LayersOfStage(const ModelConfig& model, const Plan& plan, int stage);
// The layers of pipeline rank `stage` whose forward full recompute replays (recompute_layers of each chunk, or all),
// and whether some chunk of it replays every one of its layers (FORMULAS.md §2, partial recompute). None without
// full recompute.
struct RecomputedLayers {
    int layers = 0;
    bool wholeChunk = false;
};
RecomputedLayers recomputedLayers(const ModelConfig& model, const Plan& plan, int stage);
// The split in a few characters, runs collapsed: "7,8x14,7"; "" when every virtual stage holds the same.
std::string pipelineSplitText(const ModelConfig& model, const Plan& plan);
std::string pipelineSplitText(const std::vector<int>& counts);
// True when every virtual stage holds the same number of layers.
bool evenPipelineSplit(const ModelConfig& model, const Plan& plan);
// The balanced split: layers go one at a time to the pipeline rank with the least work, counting the first
// rank's embedding and the last rank's output layer and loss as `firstExtraLayers` and `lastExtraLayers`
// layers' worth of time; each virtual stage gets at least one layer, a rank's layers are spread evenly over
// its chunks (earlier chunks take the remainder). `vShape` (DualPipeV, vpp 2): rank 0 holds both ends, and its
// chunks are virtual stages s and 2 pp - 1 - s.
std::vector<int> balancedPipelineLayers(int layers, int pp, int vpp, double firstExtraLayers, double lastExtraLayers,
                                        bool vShape = false);
// ends_as_layers where the layers are fewer than the virtual stages, down to layers + 2 = pp x vpp (Megatron-core's
// --account-for-embedding/loss-in-pipeline-split with one unit a virtual stage: Megatron-Bridge's Llama 3.1 405B,
// 126 layers on pp 16 x vpp 8): one layer a virtual stage, none on the first (the embedding alone; one if
// layers + 1 = pp x vpp) nor on the last (the output layer and loss alone). Empty where that does not apply
// (pp < 2, layers >= pp x vpp, or layers + 2 < pp x vpp).
std::vector<int> endsOnlySplit(int layers, int pp, int vpp);
// First and last pipeline ranks holding `first` and `last` layers (0: as many as the others) under an interleaved
// schedule whose vpp does not divide them: the other ranks share the rest evenly over their chunks, and a rank's
// missing layers come off the chunk that holds its embedding (the first rank's chunk 0) or its output layer and
// loss (the last rank's last chunk), as Llama 3's 405B run split 126 layers over 16 ranks. Per virtual stage,
// chunk-major; empty when no such split gives every virtual stage a layer.
std::vector<int> firstLastChunkLayers(int layers, int pp, int vpp, int first, int last);

} // namespace tessel
