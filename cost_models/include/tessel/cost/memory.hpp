// Memory per GPU for every pipeline stage: weights, grads, optimizer state, activations and other buffers.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/parameters.hpp"
#include "tessel/cost/plan.hpp"

#include <cstdint>
#include <vector>

namespace tessel {

// DeepSpeed's ZeRO-3 (a deepspeed plan at stage 3 on one pipeline stage) gathers module by module under its
// parameter coordinator's limits (deepSpeedStage3Of), which the gather term walks (FORMULAS.md §2 "Other").
bool deepSpeedGathersByModule(const Plan& plan);

// Activation bytes one transformer layer keeps for backward, for one micro-batch on one rank
// (Korthikanti et al. 2022, Table 2, generalised to GQA, SwiGLU, MoE, flash attention and any dtype;
// FORMULAS.md §2). Under full recompute only the layer's input is kept.
double layerActivationBytes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);
// The same layer's activations with no recompute (the working set rebuilt during full recompute).
double layerActivationBytesNoRecompute(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);
// What selective recompute's modules drop from one layer and micro-batch on one rank, split by the block whose
// backward reruns them (FORMULAS.md §2, "Selective recompute by module"): the attention block's (core_attn,
// mla_up_proj, MLA's input norm) and the MLP block's (mlp, moe, moe_act, shared_experts, an MoE layer's pre-MLP
// norm). Stored activations lose both; during one block's backward its part is alive again. Zero unless
// recompute is selective by module (torchtitan's op policy is counted in layerActivationBytes).
struct SelectiveRebuild {
    double attentionBytes = 0.0;
    double mlpBytes = 0.0;
    // What a module's checkpoint keeps as its input that the layer keeps nowhere else (mla_up_proj's rotary key
    // before RoPE): stored beside the layer's other activations.
    double keptInputBytes = 0.0;
};
SelectiveRebuild layerSelectiveRebuild(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);

// Mean and 1/std kept by the two norms of a layer for backward (not part of Korthikanti's Table 2, which
// omits them; fp32, or the compute dtype when wider). Zero under full recompute.
double layerNormStatisticsBytes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);

// What ZB-H1's deferred weight-gradient (W) pass keeps per layer and micro-batch: the inputs and output
// gradients of the layer's GEMMs.
double weightGradientPendingBytes(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);

// Micro-batches whose activations stage `stage` holds at its peak, in units of one micro-batch through
// all the stage's layers. GPipe: m; 1F1B and ZB-H1: min(m, p - stage); interleaved: Megatron-LM's warm-up
// count (p - stage - 1) x 2 + (v - 1) x p + 1, capped at m x v, in chunk units divided by v (m on every stage where
// m == p under a framework version that ran every forward first: interleavedAllForwardsFirstWhenMEqualsP).
double inFlightMicroBatches(const Plan& plan, int stage);
// The most transformer layers' activations (in one micro-batch's layers) stage `stage` holds at once: in-flight
// micro-batches x the stage's layers, or, under the interleaved schedule with chunks of unequal layers (an uneven
// split, an end chunk of no layer), the in-flight (micro-batch, chunk) passes weighted by their chunks' layers at
// the order's peak.
double peakInFlightLayers(const ModelConfig& model, const Plan& plan, int stage);
// The same, on the last rank split by whether a pass of the model's last virtual stage (the output layer and loss) is
// alive at that moment; `interleavedWalk` false where no walk was needed (both fields then the same peak).
struct InFlightLayers {
    double withHead = 0.0, withoutHead = 0.0;
    bool interleavedWalk = false;
};
InFlightLayers inFlightLayers(const ModelConfig& model, const Plan& plan, int stage);
// The same from the stage's chunks' layer counts (chunk c of `stage`, c < vpp).
InFlightLayers inFlightLayers(const Plan& plan, const std::vector<int>& chunkLayersOfStage, int stage);

// Where "other" memory goes.
struct OtherMemory {
    double zero3GatherBytes = 0.0;    // gathered parameters at their peak (current + prefetched layer; DeepSpeed: its coordinator's)
    double commBufferBytes = 0.0;     // PP send/recv, SP all-gather, CP KV, EP all-to-all, ZeRO-2/3 buckets
    double logitsLossBytes = 0.0;     // last stage: the logits and the loss's tensors at the peak's moment (StageMemory::moment)
    // One layer's transient backward gradients at the peak's moment: 0 where the last stage peaks at the loss's backward.
    double backwardWorkingBytes = 0.0; // MLP [T, f] and [T, h] sets
    // Gradient copies held after a backward: DeepSpeed's optimizers' at the step (BF16_Optimizer's 16-bit copy of
    // its whole flat fp32 gradient for the all-reduce; ZeRO-1/2's flattened 16-bit partition and its fp32 cast), or
    // a whole-model compiled graph's gradients, returned at once beside the accumulated ones (compile_whole_model):
    // what that phase holds beyond what the backward held (0 where the backward's peak is the larger).
    double stepCopyBytes = 0.0;
    double reservedBytes = 0.0;       // the cluster's reserved bytes (CUDA context, allocator slack)
    // NCCL's own buffers for the communicators this rank uses (collectiveLibraryBytes): device memory outside
    // PyTorch's caching allocator, so in nvidia-smi's figure and the fits verdict, not in the allocator's counters.
    double collectiveLibraryBytes = 0.0;
    double total() const {
        return zero3GatherBytes + commBufferBytes + logitsLossBytes + backwardWorkingBytes + stepCopyBytes + reservedBytes +
               collectiveLibraryBytes;
    }
};

struct StageMemory {
    int stage = 0;
    int layers = 0;                   // transformer layers held by one rank of this stage
    double parameters = 0.0;          // before ZeRO sharding
    double inFlight = 0.0;            // micro-batches in flight (see inFlightMicroBatches)
    double weightsBytes = 0.0;
    double gradsBytes = 0.0;
    double optimizerBytes = 0.0;
    double activationsBytes = 0.0;
    OtherMemory other;
    double otherBytes() const { return other.total(); }
    double totalBytes() const { return weightsBytes + gradsBytes + optimizerBytes + activationsBytes + otherBytes(); }
    bool fits = true;                 // GPU memory and (when the plan offloads) the host's share both suffice
    double headroomBytes = 0.0;       // capacity - total; negative when it does not fit
    double hostBytes = 0.0;           // what this GPU's offload keeps in host memory (offload.hpp)
    bool hostFits = true;             // hostBytes within the node's host memory / GPUs per node
    // What PyTorch's caching allocator holds beyond the allocated peak (totalBytes): a step-phase transient made
    // after the backward freed its activations, larger than any block they left cached, is a new segment, which
    // the allocator keeps beside them (it returns memory to the device only when an allocation fails). Memory
    // that torch.cuda.max_memory_reserved and nvidia-smi show, not what the plan needs: it never decides `fits`.
    double allocatorKeptBytes = 0.0;
    double reservedPeakBytes() const;  // totalBytes + allocatorKeptBytes, at most the larger of totalBytes and capacity
    double capacityBytes = 0.0;
    // The last stage's peak is the larger of two moments (FORMULAS.md §2, "The last stage's two moments"): the loss's
    // backward, or the last layer's backward. Which one the figures above are of, and the activations with the
    // logits and loss at the other one (what an activations-only counter peaks at where that is the larger share).
    enum class Moment { Whole, LossBackward, LastLayerBackward };
    Moment moment = Moment::Whole; // Whole: a stage without the loss, or of the output layer alone
    double otherMomentActivationsBytes = 0.0;
    // Whatever the moment: the loss's bytes at its own backward (last stage: every micro-batch's in flight, and the
    // current one's backward), and one layer's backward working set (a stage with layers).
    double lossBackwardBytes = 0.0;
    double layerBackwardWorkingBytes = 0.0;
};

// The stage's figures as a per-category counter (tessel's executor's MemoryStats) files them: activations with the
// logits and loss; buffers (ZeRO-3 gathers, communication buffers, a layer's backward working set, the step's copies).
// At the peak's moment they add up to the allocated total (all but the reserved and collective-library bytes).
double activationsAtPeakBytes(const StageMemory& st);
double buffersAtPeakBytes(const StageMemory& st);
// The same, each category at its own moment: the activations at whichever of the last stage's two moments holds more
// of them, the buffers with a layer's backward working set where the peak's moment has none.
double activationsCategoryPeakBytes(const StageMemory& st);
double buffersCategoryPeakBytes(const StageMemory& st);

struct MemoryReport {
    std::vector<StageMemory> stages;  // one per pipeline stage
    double capacityBytes = 0.0;
    double peakBytes = 0.0;
    int peakStage = 0;
    double reservedPeakBytes = 0.0;   // largest StageMemory::reservedPeakBytes() over the stages (>= peakBytes)
    bool fits = true;
    double hostPeakBytes = 0.0;       // largest per-GPU host share over the stages (offload)
    double hostCapacityBytes = 0.0;   // host memory per node (0: the cluster describes no host)
    double hostBytesPerNode() const;  // hostPeakBytes x GPUs per node
    int gpusPerNode = 1;
};

// Host memory one GPU may use for offload: the node's host memory over its GPUs.
double hostCapacityPerGpu(const ClusterConfig& cluster);

// The memory model. The verdict is data (fits, headroom), never an exception; the plan must already be
// valid (validatePlan).
MemoryReport predictMemory(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);

// The parts of the memory model that depend only on the plan's shapes (degrees, micro-batch, recompute,
// SP, recipe), not on the stage: computed once per shape and reused for every stage (and, in the search,
// for every plan of the same shape).
struct MemoryShapeTerms {
    double layerActivations = 0.0;     // layerActivationBytes
    double layerFullActivations = 0.0; // layerActivationBytesNoRecompute
    // The same two for an MoE model's dense layers (moe.dense_layers: the dense MLP in place of the experts); equal
    // to the two above where there are none.
    double denseLayerActivations = 0.0, denseLayerFullActivations = 0.0;
    // An FP8 or NVFP4 plan's BF16 end layers (first_last_layers_bf16): their activations as the megatron recipe keeps
    // them (16-bit GEMM inputs); the quantized layer's where the plan has none.
    double bf16LayerActivations = 0.0, bf16LayerFullActivations = 0.0;
    // layerSelectiveRebuild of the model's layers and of its dense layers (equal where there are none).
    SelectiveRebuild rebuild, denseRebuild;
    double normStatistics = 0.0;       // layerNormStatisticsBytes
    double keptNormStatistics = 0.0;   // layerNormStatisticsBytes of a layer that is not recomputed
    double weightGradientSet = 0.0;    // weightGradientPendingBytes (ZB-H1)
    double duringBackwardInput = 0.0;  // ZB-H1: what one layer's B pass adds before it frees the layer
    double elementBytes = 2.0, tokens = 0.0, tokensSp = 0.0, hidden = 0.0, maskBytes = 0.0;
    double qDimLocal = 0.0, kvDimLocal = 0.0, topK = 0.0, vocabLocal = 0.0, ffnLocal = 0.0;
    double vocabLoss = 0.0; // the logits' columns the loss holds: vocabLocal, or V where gathered over TP (LocalShapes::vocabLoss)
    double moeTokensIn = 0.0, expertTokens = 0.0, expertTpGather = 1.0; // LocalShapes' MoE token flow
    double residualBytes = 2.0;        // the residual stream's element (fp32 under autocast)
    // A micro-batch's embedding norm (model.embeddingNorm) on the first stage: its saved input and statistics, kept
    // from its forward to its backward outside every layer checkpoint. 0 without one.
    double embeddingNorm = 0.0;
};
MemoryShapeTerms memoryShapeTerms(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe);
// One stage of predictMemory, from the shape terms and that stage's parameters.
StageMemory stageMemory(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe,
                        const MemoryShapeTerms& terms, const StageParameters& params, int stage,
                        double reservedBytes, double capacityBytes, double hostCapacityBytesPerGpu = 0.0,
                        double collectiveLibraryBytes = 0.0);

// The collective library's (NCCL's) device buffers on one rank of `stage` (FORMULAS.md §2, "The collective
// library's buffers"): per collective communicator the rank uses, channels x connections x the three protocols'
// FIFOs of a connection; per point-to-point peer it receives from, its channels per peer x the same. The
// communicators are the plan's groups (world, tp, cp, the gradient group, expert groups, the pipeline's), the
// NCCL generation is the framework's year's. 0 where the GPU states no channel count or one rank runs alone.
struct CollectiveLibraryMemory {
    int collectives = 0;              // communicators that run collectives on this rank
    int connectionsPerChannel = 0;    // summed over them: 3 a communicator where rings and trees are connected, 1 ring only
    int p2pConnections = 0;           // point-to-point connections, counted as halves held (pipeline, ring attention, all-to-all)
    int p2pChannels = 0;              // summed over them: NCCL's channels per peer
    double bytesPerConnection = 0.0;
    double bytes = 0.0;
};
CollectiveLibraryMemory collectiveLibraryMemory(const ModelConfig& model, const Plan& plan,
                                                const ClusterConfig& cluster, int stage);

// Model-state bytes (weights + grads + optimizer) per parameter under a recipe and ZeRO stage over N ranks
// (Rajbhandari et al. 2020, Figure 1): for checks and quick estimates.
double modelStateBytesPerParameter(const PrecisionRecipe& recipe, int zeroStage, int shards);

} // namespace tessel
