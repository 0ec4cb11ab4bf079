// Memory model per pipeline stage: model states under recipe + ZeRO, the stage's activations (one layer's from
// layer_activations.cpp) for its in-flight micro-batches, the last stage's two moments, and other buffers (FORMULAS.md §2).
#include "tessel/cost/memory.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"

#include "tessel/cost/offload.hpp"
#include "tessel/cost/shapes.hpp"

#include "layer_activations.hpp"
#include "zero3_gather.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

namespace tessel {

namespace {
double d(int64_t v) { return static_cast<double>(v); }

double shardDivisor(bool sharded, double shards) { return sharded ? shards : 1.0; }

// PyTorch FSDP (framework fsdp, FSDP1; torchtitan, FSDP2) reduce-scatters each wrapped unit's gradient as one
// tensor after the unit's backward, where the stage is not gathered once a step (then its whole unsharded
// gradient is counted with the gradients).
bool fsdpReducesPerUnit(const Plan& plan, int z) {
    const std::string& name = plan.framework.name;
    return (name == "fsdp" || name == "torchtitan") && z >= 2 && plan.zeroShardSize() >= 2 &&
           !fsdpReducesOncePerStep(plan.framework, plan.pp, z);
}

} // namespace

double modelStateBytesPerParameter(const PrecisionRecipe& recipe, int zeroStage, int shards) {
    const double n = shards;
    return recipe.weightBytes / shardDivisor(zeroStage >= 3, n) + recipe.gradBytes / shardDivisor(zeroStage >= 2, n) +
           recipe.optimizerBytesPerParameter() / shardDivisor(zeroStage >= 1, n);
}

MemoryShapeTerms memoryShapeTerms(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe) {
    const LocalShapes s = localShapes(model, plan, recipe);
    MemoryShapeTerms t;
    t.layerActivations = layerActivationBytes(model, plan, recipe);
    t.layerFullActivations = layerActivationBytesNoRecompute(model, plan, recipe);
    t.rebuild = layerSelectiveRebuild(model, plan, recipe);
    t.denseLayerActivations = t.layerActivations;
    t.denseLayerFullActivations = t.layerFullActivations;
    t.denseRebuild = t.rebuild;
    if (model.moe && !model.moe->denseLayers.empty()) {
        const ModelConfig dense = model.denseLayerModel();
        t.denseLayerActivations = layerActivationBytes(dense, plan, recipe);
        t.denseLayerFullActivations = layerActivationBytesNoRecompute(dense, plan, recipe);
        t.denseRebuild = layerSelectiveRebuild(dense, plan, recipe);
    }
    t.bf16LayerActivations = t.layerActivations;
    t.bf16LayerFullActivations = t.layerFullActivations;
    if (plan.bf16EndLayers()) {
        Plan bf16 = plan;
        bf16.precision = "megatron";
        const PrecisionRecipe r16 = precisionRecipeOf(bf16);
        t.bf16LayerActivations = layerActivationBytes(model, bf16, r16);
        t.bf16LayerFullActivations = layerActivationBytesNoRecompute(model, bf16, r16);
    }
    t.normStatistics = layerNormStatisticsBytes(model, plan, recipe);
    Plan kept = plan;
    kept.recompute = Recompute::None;
    t.keptNormStatistics = layerNormStatisticsBytes(model, kept, recipe);
    t.elementBytes = s.activationBytes;
    t.residualBytes = s.residualBytes;
    // The embedding's norm (BLOOM's word_embeddings_layernorm) saves its input, the embedding's output in the residual
    // stream's dtype, and its mean and 1/std per token, as a layer's first norm does; nothing recomputes it.
    if (model.embeddingNorm)
        t.embeddingNorm = (s.residualBytes + eagerNormExtraBytes(model, plan, s.residualBytes)) * d(s.tokensSp) * d(s.hidden) +
                          2.0 * std::max(4.0, static_cast<double>(s.activationBytes)) * d(s.tokensSp);
    t.tokens = d(s.tokens);
    t.tokensSp = d(s.tokensSp);
    t.hidden = d(s.hidden);
    t.maskBytes = s.maskBytes;
    t.qDimLocal = d(s.qDimLocal);
    t.kvDimLocal = 0.5 * d(s.kvDimLocal + s.vDimLocal); // K's and V's mean width (MLA's V is narrower)
    t.ffnLocal = d(s.ffnLocal);
    t.topK = d(s.topK);
    t.moeTokensIn = d(s.moeTokensIn);
    t.expertTokens = d(s.expertTokens);
    t.expertTpGather = d(s.expertTpGather);
    t.vocabLocal = d(s.vocabLocal);
    t.vocabLoss = d(s.vocabLoss);
    {
        // Used only by ZB-H1 plans, but computed for every shape so the terms do not depend on the schedule.
        t.weightGradientSet = weightGradientPendingBytes(model, plan, recipe);
        // During a B pass the layer being processed holds both its activations and the new parts of its W
        // set (the output gradients, and the gathered inputs with sequence parallelism).
        const double f = mlpWidthPerToken(model, s);
        const double gated = model.gatedMlp() ? 2.0 : 1.0;
        const double grads = t.elementBytes * t.tokens *
                             (d(s.qDimLocal + s.kvDimLocal + s.vDimLocal) + 2.0 * t.hidden + gated * f);
        t.duringBackwardInput = grads + (plan.sequenceParallel ? 2.0 * t.elementBytes * t.tokens * t.hidden : 0.0);
    }
    return t;
}

StageMemory stageMemory(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe,
                        const MemoryShapeTerms& t, const StageParameters& params, int stage, double reservedBytes,
                        double capacityBytes, double hostCapacityBytesPerGpu, double collectiveLibraryBytes) {
    const double e = t.elementBytes, T = t.tokens, Tsp = t.tokensSp, h = t.hidden;
    const double denseShards = plan.zeroShardSize();
    const double expertShards = static_cast<double>(plan.expertZeroShardSize());
    const int z = plan.zeroStage;
    const double statBytes = std::max(4.0, e);
    const int layersPerStage = stageLayerCount(model, plan, stage);
    const double m = plan.microBatchesPerStep();
    StageMemory st;
    st.stage = stage;
    st.layers = layersPerStage;
    st.parameters = params.total();
    auto states = [&](int bytes, bool sharded) {
        return bytes * (params.dense / shardDivisor(sharded, denseShards) + params.expert / shardDivisor(sharded, expertShards));
    };
    st.weightsBytes = states(recipe.weightBytes, z >= 3);
    const double keptAsParams = recipe.quantizedParams ? recipe.quantizedParamBytes() - recipe.weightBytes : 0.0;
    if (recipe.quantizedWeightCopyBytes > 0.0 || keptAsParams != 0.0) {
        // Transformer Engine's cached quantized weights for every linear layer of the stage (FP8's weight and
        // transpose, or the weight alone where the GPU keeps no transpose, fp8OnGpu; NVFP4's rowwise and columnwise
        // copies), sharded as the weights are under ZeRO-3, where they are made per gathered layer. Quantized
        // parameters are the weights themselves (quantizedParamBytes in place of the 16-bit weight: FP8 2 B with
        // the transpose, 1 B without; NVFP4 1.125 B).
        // The stage's layers' parameters: its embedding and head are not quantized linears.
        const StageParameters layers = stageParameters(model, plan, stage);
        const double ends = (plan.holdsEmbedding(stage) ? embeddingParameters(model, plan) : 0.0) +
                            (plan.holdsHead(stage) ? headParameters(model, plan) + mtpEmbeddingCopy(model, plan) : 0.0);
        // An FP8 or NVFP4 plan's BF16 end layers (first_last_layers_bf16) keep no quantized copy either.
        const StageParameters one = layerParameters(model, plan);
        const double bf16Layers = bf16LayersOfStage(model, plan, stage);
        const double linear = (layers.dense - ends - bf16Layers * one.dense) / shardDivisor(z >= 3, denseShards) +
                              (layers.expert - bf16Layers * one.expert) / shardDivisor(z >= 3, expertShards);
        st.weightsBytes += (recipe.quantizedWeightCopyBytes > 0.0 ? recipe.quantizedWeightCopyBytes : keptAsParams) * linear;
    }
    st.gradsBytes = states(recipe.gradBytes, z >= 2);
    // DeepSpeed's BF16_Optimizer keeps every parameter's bf16 .grad beside the full fp32 gradient it accumulates
    // into: the optimizer clears it before each backward and leaves it after (update_hp_grads(clear_lp_grads=False)).
    if (deepSpeedBf16OptimizerOf(plan.framework, plan.pp, z, recipe.weightBytes, recipe.gradBytes))
        st.gradsBytes += states(recipe.weightBytes, false);
    st.optimizerBytes = states(recipe.optimizerBytesPerParameter(), z >= 1);
    // Offload (FORMULAS.md §8): the optimizer state and, from ZeRO-2 on, the gradient partition live on the host
    // (DeepSpeed moves each reduced partition there; below ZeRO-2 the full gradient buffer stays on the GPU);
    // ZeRO-Infinity also moves the 16-bit weight partition (the gather buffers stay).
    st.hostBytes = hostBytesPerParameter(plan, recipe) * zeroPartitionParameters(plan, params);
    if (plan.offloadOptimizer) {
        st.optimizerBytes = 0.0;
        if (z >= 2) st.gradsBytes = 0.0;
    }
    if (plan.offloadParameters) st.weightsBytes -= states(recipe.weightBytes, z >= 3);

    st.inFlight = inFlightMicroBatches(plan, stage);
    const bool last = plan.holdsHead(stage);
    // Full recompute of some layers only (Megatron-LM's block method; FORMULAS.md §2, partial recompute): the
    // first recompute_layers of each chunk keep their input, the rest everything a layer without recompute keeps.
    const RecomputedLayers replayed = recomputedLayers(model, plan, stage);
    const int recomputed = replayed.layers;
    // An MoE model's dense layers keep the dense MLP's activations (taken among the kept layers first where only some
    // are recomputed: DeepSeek's are a stage's first).
    const int denseHere = denseLayersOfStage(model, plan, stage);
    const double denseKept = plan.recompute == Recompute::Full ? std::min(denseHere, layersPerStage - recomputed) : denseHere;
    const double denseReplayed = denseHere - denseKept;
    // An FP8 or NVFP4 plan's BF16 end layers keep their GEMM inputs in 16 bits, taken among the kept layers first as
    // the dense ones are; a replayed one keeps its input, whatever its precision.
    const int bf16Here = bf16LayersOfStage(model, plan, stage);
    const double bf16Kept = plan.recompute == Recompute::Full ? std::min(bf16Here, layersPerStage - recomputed) : bf16Here;
    const double perMicroBatch =
        (plan.recompute == Recompute::Full
             ? recomputed * (t.layerActivations + t.normStatistics) +
                   (layersPerStage - recomputed) * (t.layerFullActivations + t.keptNormStatistics) +
                   denseKept * (t.denseLayerFullActivations - t.layerFullActivations) +
                   bf16Kept * (t.bf16LayerFullActivations - t.layerFullActivations)
             : layersPerStage * (t.layerActivations + t.normStatistics) +
                   denseKept * (t.denseLayerActivations - t.layerActivations) +
                   bf16Kept * (t.bf16LayerActivations - t.layerActivations)) +
        denseReplayed * (t.denseLayerActivations - t.layerActivations);
    // What n micro-batches' stored activations occupy on the GPU: with activation offload the checkpointed
    // layer inputs go to the host as they are made, and the GPU keeps two layers' inputs (the running
    // layer's, until DeepSpeed's cpu_checkpointing points it at its host copy, and its output, the next
    // layer's). With Megatron-core's CPU offloading (pp 1, no recompute) the first N layers' activations go
    // to the host after their forward and come back before their backward; Transformer Engine's
    // double-buffered offload handler keeps at most two of those layers on the GPU while it copies
    // (cpu_offload.py, AsyncDoubleBufferGroupOffloadHandler).
    const double perLayer = layersPerStage > 0 ? perMicroBatch / layersPerStage : 0.0;
    const double layersOff = std::min<double>(plan.offloadActivationLayers, layersPerStage);
    auto stored = [&](double n) {
        if (plan.offloadActivations) return std::min(n * perMicroBatch, 2.0 * t.layerActivations);
        if (layersOff > 0.0) return n * (perMicroBatch - layersOff * perLayer) + std::min(layersOff, 2.0) * perLayer;
        return n * perMicroBatch;
    };
    if (plan.offloadActivations) st.hostBytes += st.inFlight * perMicroBatch;
    if (layersOff > 0.0) st.hostBytes += st.inFlight * layersOff * perLayer;
    // ZB-H1 delays stage s's weight-gradient passes by s, so besides the forwards in flight the stage holds
    // up to s sets of what the W pass needs; the peak is right after a forward, right after a B pass (before
    // the oldest W runs), or inside a B pass.
    const bool zeroBubble = plan.schedule == Schedule::ZeroBubble;
    // Chunks of unequal layers under the interleaved schedule (inFlightLayers): on the last rank the stash may peak
    // while no pass of the output layer is alive (its chunk holding fewer layers); both moments are costed below.
    const InFlightLayers walk = layersPerStage > 0 ? inFlightLayers(model, plan, stage) : InFlightLayers{};
    const double pendingW = zeroBubble ? std::min<double>(stage, m) : 0.0;
    if (zeroBubble) {
        const double wSet = layersPerStage * t.weightGradientSet + (last ? e * T * h : 0.0);
        st.activationsBytes = std::max({stored(st.inFlight) + pendingW * wSet,
                                        stored(std::max(st.inFlight - 1.0, 0.0)) + std::min(pendingW + 1.0, m) * wSet,
                                        stored(st.inFlight) + pendingW * wSet + t.duringBackwardInput});
    } else {
        // Chunks of unequal layers under the interleaved schedule: the in-flight passes weighted by their chunks'
        // layers (inFlightLayers), in the stage's micro-batches.
        const double layersHeld = last && walk.interleavedWalk ? walk.withHead : std::max(walk.withHead, walk.withoutHead);
        st.activationsBytes = stored(layersPerStage > 0 ? layersHeld / layersPerStage : st.inFlight);
    }
    // One layer rebuilt in backward on top of what is stored; where a chunk keeps some layers whole, their
    // backwards run first and free at least a layer's activations before the first rebuild.
    const double rebuiltLayer =
        !replayed.wholeChunk ? 0.0
                             : std::max({t.layerFullActivations, denseHere > 0 ? t.denseLayerFullActivations : 0.0,
                                         bf16Here > 0 ? t.bf16LayerFullActivations : 0.0});
    // (On the last rank of the walk, a chunk of the output layer alone rebuilds nothing while its pass is alive: the
    // rebuilt layer belongs to the other moment, below.)
    const bool headChunkEmpty = last && walk.interleavedWalk && chunkLayerCount(model, plan, stage, plan.vpp - 1) == 0;
    const double rebuiltAdded = headChunkEmpty ? 0.0 : rebuiltLayer;
    st.activationsBytes += rebuiltAdded;
    // Token ids (int64), the embedding dropout mask and the embedding norm's saved state per micro-batch in flight.
    if (plan.holdsEmbedding(stage)) st.activationsBytes += st.inFlight * (8.0 * T + t.maskBytes * Tsp * h + t.embeddingNorm);
    // A first stage of no transformer layer (FORMULAS.md §5.4): the embedding's output [Tsp, h], alive until it is
    // sent (and in the backward the gradient received for it), is all it adds; a stage with layers stashes it as its
    // first layer's input.
    if (plan.holdsEmbedding(stage) && layersPerStage == 0 && !last) st.activationsBytes += e * Tsp * h;
    // Micro-batches whose head state (norm input, LM-head input, norm statistics, logits) is alive at once.
    const double headInFlight = plan.schedule == Schedule::Gpipe ? m : zeroBubble ? std::min(pendingW + 1.0, m) : 1.0;
    const double activationsBeforeHead = st.activationsBytes;
    // The head's saved tensors are freed by its backward (B); what a delayed W pass needs of it, the gathered norm
    // output and the logits' gradient, is counted with the W sets and the loss.
    const double headStatesInFlight = zeroBubble ? 1.0 : headInFlight;
    if (last) st.activationsBytes += headStatesInFlight * ((t.residualBytes + e) * Tsp * h + 2.0 * statBytes * Tsp);
    // Autocast's copy of the output weight, kept by the LM head GEMM for its backward.
    if (last && t.residualBytes > e) st.activationsBytes += headStatesInFlight * e * t.vocabLocal * h;
    // Multi-token prediction (model.mtpLayers) beside each micro-batch's head state: per module its layer as the stage
    // keeps its layers (the plan's recompute; an MoE model's last layer's kind), eh_proj's input (the concatenated
    // [embedding, hidden], 2h), and a head state of its own; its loss's saved logits below.
    if (last && model.mtpLayers > 0) {
        const bool mtpDense = model.moe && !model.moe->denseLayers.empty() && model.moe->denseLayers.back() == model.layers - 1;
        const double layerKept = (mtpDense ? t.denseLayerActivations : t.layerActivations) + t.normStatistics;
        st.activationsBytes += headStatesInFlight * model.mtpLayers *
                               (layerKept + 2.0 * e * Tsp * h + (t.residualBytes + e) * Tsp * h + 2.0 * statBytes * Tsp);
    }
    // The head state (and the MTP modules') of the micro-batches in flight on the last stage: each micro-batch's is
    // freed by its head's backward, before its last layer's.
    const double headStateBytes = st.activationsBytes - activationsBeforeHead;

    OtherMemory& o = st.other;
    // Where FSDP reduces once a step, the sharded gradient exists only from that reduce-scatter on: the optimizer
    // set it to None after the last step (zero_grad(set_to_none=True), PyTorch's default from 2.0), every
    // micro-batch before the last accumulates into the unsharded gradient, and the last one's reduce-scatter frees
    // each unit's unsharded gradient as it writes its shard. The unsharded gradient is the stage's gradient memory,
    // in place of the shard, not beside it.
    const double shardedGrads = st.gradsBytes;
    if (fsdpGathersOncePerStep(plan.framework, plan.pp, z)) {
        // Gathered once a step and kept: the stage's whole unsharded copy, and its unsharded gradients accumulated in
        // the reduce dtype until the step's one reduce-scatter (FSDP2's to_accumulated_grad_if_needed).
        st.weightsBytes += params.total() * recipe.paramGatherBytes();
        st.gradsBytes = std::max(shardedGrads, params.total() * recipe.gradReduceBytes());
    } else {
        if (z >= 3)
            o.zero3GatherBytes = zero3GatherParameters(model, plan, stage) * recipe.paramGatherBytes(); // in use + prefetched
        // FSDP's no_sync (fsdpReducesOncePerStep without the once-a-step gathers): each unit's unsharded gradient,
        // kept from the first micro-batch's backward to the step's one reduce-scatter: FSDP1's in the dtype of the
        // unsharded parameter it belongs to, FSDP2's (torchtitan's costs) upcast to the reduce dtype
        // (FSDPParam.to_accumulated_grad_if_needed, then accumulate_unsharded_grad_if_needed adds each later one).
        if (fsdpReducesOncePerStep(plan.framework, plan.pp, z))
            st.gradsBytes = std::max(shardedGrads, params.total() * fsdpNoSyncGradBytes(plan.framework, recipe));
    }
    if (torchPipeliningOf(plan.framework, plan.pp)) {
        // torch.distributed.pipelining (torchPipeliningOf): each of the rank's virtual stages but the model's first
        // keeps a receive buffer per micro-batch, of which the in-flight ones are the stored stage inputs already
        // counted; each but the last keeps a gradient buffer per micro-batch and its in-flight outputs, or every
        // micro-batch's output where its version kept them all (torchPipeliningRetainedOutputsOf).
        const int v = std::max(1, plan.vpp), lastVirtual = plan.pp * v - 1;
        const double outputs = torchPipeliningRetainedOutputsOf(plan.framework, plan.pp).everyStage ? m : st.inFlight;
        double buffers = 0.0;
        for (int c = 0; c < v; ++c) {
            const int u = plan.virtualStage(stage, c);
            if (u != 0) buffers += std::max(m - st.inFlight, 0.0);
            if (u != lastVirtual) buffers += m + outputs;
        }
        o.commBufferBytes += buffers * e * Tsp * h;
    } else if (plan.pp > 1) {
        o.commBufferBytes += 2.0 * e * Tsp * h; // p2p send and receive
        if (plan.framework.name == "deepspeed") {
            // DeepSpeed's PipelineEngine (runtime/pipe/engine.py, 2020 on) keeps per micro-batch in flight what it
            // sent until that micro-batch's backward frees pipe_buffers['outputs']: with TP the partition of the
            // stage's output it sent (PartitionedTensor's clone of 1/tp; the output's own data is cleared), without
            // it the output whole. Without TP a receiving stage also keeps the received input beside the clone its
            // forward runs on (_exec_forward_pass: pipe_buffers['inputs'][id].clone()), whose gradient it sends back;
            // with TP the gathered input replaces the received part.
            const bool partitioned = pipelineScatterGatherOf(plan.framework, plan.tp, plan.sequenceParallel);
            double held = 0.0;
            if (!last) held += partitioned ? e * T * h / plan.tp : e * Tsp * h;
            if (!partitioned && !plan.holdsEmbedding(stage)) held += e * Tsp * h;
            o.commBufferBytes += st.inFlight * held;
        }
    }
    if (plan.sequenceParallel) o.commBufferBytes += e * T * h;               // all-gathered norm output
    if (plan.cp > 1) {
        // p2p: K/V of the next ring step (a2a+p2p's ring moves the same bytes: a times the tokens, 1/a of the heads);
        // a2a: the received q, k, v while their sequence chunks are put in order (Transformer Engine's empty_like
        // buffers); allgather: K and V gathered whole and, backward, dK and dV at the full length beside them.
        if (plan.cpComm == CpComm::P2p || plan.cpComm == CpComm::A2aP2p) o.commBufferBytes += 2.0 * e * T * 2.0 * t.kvDimLocal;
        if (plan.cpComm == CpComm::A2a || plan.cpComm == CpComm::A2aP2p) o.commBufferBytes += e * T * (t.qDimLocal + 2.0 * t.kvDimLocal);
        if (plan.cpComm == CpComm::AllGather) o.commBufferBytes += 2.0 * e * T * plan.cp * 2.0 * t.kvDimLocal;
    }
    if (model.moe && plan.ep > 1) o.commBufferBytes += 2.0 * e * t.moeTokensIn * t.topK * h; // dispatch + combine
    if (model.moe && t.expertTpGather > 1) o.commBufferBytes += e * t.expertTokens * h;     // expert-TP gathered rows
    // DeepSpeed's ZeRO-1 runs the same optimizer class as ZeRO-2 (stage_1_and_2.py). Where it keeps
    // contiguous_gradients (deepSpeedContiguousGradientsOf: DeepSpeed from 2024) and runs without a pipeline,
    // backward() allocates ZeRO-2's reduce bucket (ipg_buffer, two with overlap_comm) beside each backward's
    // activations. Under the pipeline engine, which never calls that backward, reduce_gradients(pipeline_parallel=True)
    // allocates one after the last backward and the epilogue releases it (_release_ipg_buffers); and where ZeRO-1 ran
    // with contiguous_gradients off (2021-07 to 2024-01), allreduce_bucket flattens each bucket of gradients into a new
    // tensor for its all-reduce and frees it. Both are a bucket alive after the backward, never beside the activations:
    // the step-phase transients below (zero1ReduceTransient). With the optimizer on the host, stage_1_and_2.py turns
    // contiguous_gradients on whatever the engine passed (deepSpeedContiguousGradientsOf says so). Not BF16_Optimizer
    // (deepSpeedBf16OptimizerOf, BLOOM's "stage 0"), which has no bucket.
    const bool deepSpeedZero1 = z == 1 && plan.framework.name == "deepspeed" &&
                                !deepSpeedBf16OptimizerOf(plan.framework, plan.pp, z, recipe.weightBytes, recipe.gradBytes);
    const bool deepSpeedZero1Bucket =
        deepSpeedZero1 && plan.pp == 1 && deepSpeedContiguousGradientsOf(plan.framework, 1, plan.offloadOptimizer);
    const double zero1ReduceTransient =
        deepSpeedZero1 && !deepSpeedZero1Bucket
            ? recipe.weightBytes * std::min(params.total(), static_cast<double>(reduceBucketElementsOf(plan.framework)))
            : 0.0;
    if (z >= 2 || deepSpeedZero1Bucket) {
        const double bucket = static_cast<double>(reduceBucketElementsOf(plan.framework));
        if (plan.framework.name == "deepspeed") {
            // DeepSpeed allocates its reduce bucket whole, whatever the model's size, in the weights' dtype:
            // stages 1 and 2 (stage_1_and_2.py backward: ipg_buffer, a second one "to avoid data access conflict when
            // overlap_comm is enabled", which ZeRO-1 had forced off with its contiguous_gradients until 2024), stage 3
            // one (stage3.py: __ipg_bucket_flat_buffer). ZeRO-2 without contiguous_gradients has no ipg_buffer: each
            // bucket's gradients are flattened into one new tensor for allreduce_bucket, a bucket beside the backward.
            // (ZeRO-1's overlap_comm stays forced off with the optimizer on the host in those years.)
            const bool twoBuffers = (z == 2 ? deepSpeedContiguousGradientsOf(plan.framework, 2, plan.offloadOptimizer)
                                            : deepSpeedZero1Bucket && deepSpeedContiguousGradientsOf(plan.framework, 1, false)) &&
                                    plan.pp == 1 && deepSpeedOverlapCommOf(plan.framework, z);
            o.commBufferBytes += (twoBuffers ? 2.0 : 1.0) * bucket * recipe.weightBytes;
            // ZeRO-3: a module's whole gradient, in the gathered parameters' dtype, is autograd's before stage3.py's
            // hook copies it into the bucket (or reduces it, when larger) and frees it: the largest module's, beside
            // the gathered ones (DeepSpeed's estimator's 4 B x largest_layer_params: 2 B gathered, 2 B gradient).
            if (z >= 3 && deepSpeedGathersByModule(plan))
                o.commBufferBytes += deepSpeedLargestModuleParameters(model, plan) * recipe.paramGatherBytes();
        } else if (fsdpReducesPerUnit(plan, z)) {
            // PyTorch FSDP reduces a wrapped unit (a layer) at once, not a bucket. FSDP2 (torchtitan's
            // fully_shard): foreach_reduce copies the unit's unsharded gradients (param dtype, e) into a new
            // reduce-scatter input in reduce_dtype (r) and the group keeps that input until the next unit's
            // post-backward, while that unit's gradients form (_fsdp_param_group.py reduce_scatter_state):
            // (e + r) x a unit during the backward. FSDP1 (Composer): _post_backward_hook casts the unit's flat
            // gradient to reduce_dtype beside it, (e + r) x a unit at the cast (torch 2.0's unconditional F.pad copy,
            // r more, is not counted). FORMULAS.md §2.
            const StageParameters unit = layerParameters(model, plan);
            o.commBufferBytes += (unit.dense + unit.expert) * (e + recipe.gradReduceBytes());
        } else {
            o.commBufferBytes += std::min(params.total(), bucket) * recipe.gradReduceBytes(); // Megatron-style bucket
        }
    }
    // The last stage's loss, by what outlives what (FORMULAS.md §2, "The last stage's two moments"): what each
    // micro-batch in flight keeps until its loss's backward (perMicroBatch), what that backward adds for the current
    // one (atBackward), and what of the current one outlives it (heldAfter: the logits, where the trainer still
    // references them).
    double lossPerMicroBatch = 0.0, lossAtBackward = 0.0, lossHeldAfter = 0.0, lossRetained = 0.0;
    if (last) {
        const std::string loss = crossEntropyOf(plan.framework);
        const double logits = e * T * t.vocabLoss;
        const bool held = logitsHeldThroughBackwardOf(plan.framework) && loss != "fused_linear";
        if (loss == "fused_linear") {
            // Liger-Kernel's fused linear cross-entropy: no logits outlive a chunk. Each micro-batch in flight keeps
            // the input gradient and the weight gradient its forward computed (zeros_like(_input), the final norm's
            // output, fp32 under autocast; zeros_like(weight), the head's whole weight, V/t x h, in the dtype the
            // forward multiplies with) until its backward hands them on; one chunk's logits (chunk x V/t) and an fp32
            // loss a token are the forward's transients. Each MTP module's loss the same.
            // (tp 1 only: the head's columns are the whole vocabulary.)
            const double chunk = static_cast<double>(kernel_cost::fusedLinearCrossEntropyChunkTokens(
                static_cast<int64_t>(T), static_cast<int64_t>(t.vocabLocal), static_cast<int64_t>(h)));
            const double kept = t.residualBytes * T * h + recipe.paramGatherBytes() * t.vocabLocal * h;
            lossPerMicroBatch = (1.0 + model.mtpLayers) * kept;
            lossAtBackward = e * chunk * t.vocabLocal + 4.0 * T;
        } else if (loss == "te" || e >= 4.0) {
            // The logits in their own type, overwritten by their gradient in the forward; per-row max and sum are
            // all the loss adds. Transformer Engine's parallel_cross_entropy (CrossEntropyFunction saves its
            // input, into which the Triton kernel wrote the gradient), tessel's executor (loss_in_place: the
            // CUDA backend's rowMax / rowSumExp / crossEntropyBackward, the CPU backend's crossEntropy), and
            // every loss computing in fp32/fp64, whose logits are already that type.
            lossPerMicroBatch = logits;
        } else if (loss == "flash_attn" || loss == "compiled") {
            // flash-attn's cross_entropy (flash_attn/ops/triton/cross_entropy.py; apex's xentropy before it): it
            // saves the 16-bit logits and an fp32 log-sum-exp per row, and its backward writes the gradient into a
            // new tensor like the logits (inplace_backward off, llm-foundry's FusedCrossEntropyLoss default).
            // torch.compile's kernels for cross_entropy(logits.float()) ("compiled") save the same: the upcast is
            // fused away, the 16-bit logits and a row's log-sum-exp kept, the gradient a new 16-bit tensor.
            lossPerMicroBatch = logits;
            lossAtBackward = logits;
        } else if (loss == "eager_16bit") {
            // cross_entropy over the 16-bit logits as they are: log_softmax saves its 16-bit output (not its input:
            // the logits live on only where the trainer holds them); at the backward nll_loss's dense gradient and
            // the input gradient log_softmax_backward writes, both of the logits' size.
            lossPerMicroBatch = logits + (held ? logits : 0.0);
            lossAtBackward = 2.0 * logits;
        } else if (loss == "eager") {
            // cross_entropy(logits.float()): the fp32 log-softmax output it kept (the fp32 copy it ran on is not
            // saved), and at its backward the dense fp32 gradient nll_loss hands back and the fp32 input gradient
            // it makes; the 16-bit logits beside them where the trainer holds them.
            lossPerMicroBatch = 4.0 * T * t.vocabLoss + (held ? logits : 0.0);
            // Under torchtitan's loss_parallel (tp > 1: DTensor's handlers in torch/distributed/tensor/parallel/loss.py)
            // the backward is _nll_loss_and_log_softmax_backward, separate ops over the rank's shard: zeros_like of
            // the saved output, then (grad_input + exp(output)) * grad_output, so the zero-filled gradient, the exp,
            // their sum and its product: three fp32 tensors beside the saved output at once, where the fused
            // kernels make two.
            const bool dtensorLossParallel = plan.framework.name == "torchtitan" && plan.tp > 1 && lossParallelOf(plan.framework);
            lossAtBackward = (dtensorLossParallel ? 12.0 : 8.0) * T * t.vocabLoss;
        } else {
            // Megatron-core's vocab-parallel cross-entropy (fused or not) keeps an fp32 softmax per micro-batch
            // in flight while the 16-bit logits of the current one exist.
            lossPerMicroBatch = 4.0 * T * t.vocabLoss + (held ? logits : 0.0);
            lossAtBackward = held ? 0.0 : logits;
        }
        lossHeldAfter = held ? logits : 0.0;
        // Each MTP module's loss keeps what the model's keeps per micro-batch (its logits, or their fp32 softmax)
        // until the backward; the current logits' transient is one at a time.
        const double savedPerLogit = loss == "eager_16bit"                                             ? 2.0 * e
                                     : loss == "te" || loss == "flash_attn" || loss == "compiled" || e >= 4.0 ? e
                                                                                                              : 4.0;
        if (loss != "fused_linear") lossPerMicroBatch += model.mtpLayers * savedPerLogit * T * t.vocabLoss;
        // Gemma 2's soft-capping of the logits keeps its tanh output, the logits' size in their type, per micro-batch
        // in flight until its backward; Liger's fused linear loss caps inside its kernel and keeps nothing more.
        if (model.logitSoftcap > 0.0 && loss != "fused_linear") lossPerMicroBatch += logits;
        // The last stage's outputs, the logits, kept in output_chunks until the step returns where the version did
        // (torchPipeliningRetainedOutputsOf): beside the head state of the micro-batches in flight there (one under
        // 1F1B, every one under GPipe), the outputs of all the others are held, detached, by the last one. Under an
        // interleaved schedule the last rank's first chunk drains while they pile up, which a sum at one instant
        // cannot size: not costed there (docs/validation.md). (The fused loss's stage outputs its loss, no logits.)
        if (plan.vpp <= 1 && torchPipeliningRetainedOutputsOf(plan.framework, plan.pp).lastStage && loss != "fused_linear")
            lossRetained = std::max(m - headInFlight, 0.0) * logits;
        o.logitsLossBytes = headInFlight * lossPerMicroBatch + lossAtBackward + lossRetained;
    }
    // The backward of one layer holds its own transient gradients on top of the stored activations: in the
    // MLP, the gradient at the fc2 input [T, f/tp] and at the fc1 output [T, f/tp] ([T, 2f/tp] for SwiGLU),
    // plus three [T, h] (the all-gathered output gradient, the re-gathered norm input for dW and the partial
    // input gradient before its TP reduction). A fused attention's backward set (dO, dQ, dK, dV, the gathered
    // gradient) is smaller for every dense model here (q and kv widths <= h, f >= 2h). Measured on the CPU
    // executor's Buffers peak; PyTorch autograd keeps the same tensors alive at that point.
    // The unfused attention's backward goes through its b (a/t) s s probabilities: the batched PV's backward writes
    // their gradient, the dropout's backward a second one beside it (the eager softmax's backward likewise: not in
    // place, where Megatron's fused kernel writes into its input gradient), so one or two score-sized gradients are
    // alive at once, with the rebuilt layer's own probabilities among the stored activations. With many heads a rank
    // and long sequences that is the larger set (BLOOM's 128 heads at tp 4, micro-batch 2: 1.07 GB against the
    // MLP's 0.59).
    const double scoreSeq = d(model.seqLen) / std::max(1, plan.cp);
    const double scoresBytes = plan.flashAttention ? 0.0 : e * plan.microBatch * d(model.heads) / plan.tp * scoreSeq * scoreSeq;
    // Under selective recompute a block's backward runs beside what its modules dropped and reran for it (the
    // rebuilt layer of full recompute is among the stored activations above); each block's set is the larger of
    // the stage's MoE and dense layers'. (An MoE layer's own backward gradients are not counted.)
    if (st.layers > 0) {
        double mlpSet = 0.0, attentionSet = 0.0;
        if (!model.moe) {
            mlpSet = e * T * ((model.gatedMlp() ? 3.0 : 2.0) * t.ffnLocal + 3.0 * h);
            const double scoreGradients = model.dropout > 0.0 || !fusedKernelsOf(plan.framework) ? 2.0 : 1.0;
            attentionSet = scoreGradients * scoresBytes;
        }
        const bool moeHere = st.layers > denseHere;
        auto rebuilt = [&](double SelectiveRebuild::*part) {
            return std::max(moeHere ? t.rebuild.*part : 0.0, denseHere > 0 ? t.denseRebuild.*part : 0.0);
        };
        o.backwardWorkingBytes = std::max(mlpSet + rebuilt(&SelectiveRebuild::mlpBytes),
                                          attentionSet + rebuilt(&SelectiveRebuild::attentionBytes));
    }
    // A stage of no transformer layer: the embedding's backward makes its weight gradient dense, [V/tp, h] (and the
    // learned positions'), in the parameters' dtype, before it is added into the gradient buffer (PyTorch's
    // embedding_dense_backward; Megatron-core's grad hook adds param.grad into main_grad and frees it); the output
    // layer's alone, the three [T, h] of a layer's set: the gathered norm output, the head's input gradient and the
    // norm's input gradient (its weight gradient goes into the buffer directly, gradient-accumulation fusion).
    if (st.layers == 0)
        o.backwardWorkingBytes = plan.holdsEmbedding(stage) && !last ? recipe.weightBytes * embeddingParameters(model, plan) : 3.0 * e * T * h;
    // The last stage's peak is one of two moments of the micro-batch whose backward starts it (FORMULAS.md §2, "The
    // last stage's two moments"), not their sum:
    // - the loss's backward: every stored activation and the head state, the loss's saved tensors and the gradients
    //   its backward makes; no layer has been rebuilt yet and no layer's backward runs;
    // - the last layer's backward: the layer rebuilt (full recompute) and its working set, beside what of the loss
    //   outlives its backward (the logits, where the trainer holds them; the other micro-batches' in flight) and the
    //   head state of the others.
    // A stage of the output layer alone keeps the sum (its head's backward runs beside the loss's gradient).
    const double layerWorkingBytes = o.backwardWorkingBytes;
    st.lossBackwardBytes = o.logitsLossBytes;
    st.layerBackwardWorkingBytes = st.layers > 0 ? layerWorkingBytes : 0.0;
    if (last && st.layers > 0) {
        const double atLoss = st.activationsBytes - rebuiltAdded + o.logitsLossBytes;
        const double othersInFlight = std::max(headInFlight - 1.0, 0.0);
        const double activationsAtLayer = st.activationsBytes - headStateBytes / headStatesInFlight;
        const double lossAtLayer = othersInFlight * lossPerMicroBatch + lossHeldAfter + lossRetained;
        const double atLayer = activationsAtLayer + lossAtLayer + o.backwardWorkingBytes;
        if (atLoss >= atLayer) {
            st.moment = StageMemory::Moment::LossBackward;
            st.otherMomentActivationsBytes = activationsAtLayer + lossAtLayer;
            st.activationsBytes -= rebuiltAdded;
            o.backwardWorkingBytes = 0.0;
        } else {
            st.moment = StageMemory::Moment::LastLayerBackward;
            st.otherMomentActivationsBytes = st.activationsBytes - rebuiltAdded + o.logitsLossBytes;
            st.activationsBytes = activationsAtLayer;
            o.logitsLossBytes = lossAtLayer;
        }
    }
    // The last rank of an interleaved schedule whose chunks differ: the moments above with an output-layer pass
    // alive, or a larger stash while none is (inFlightLayers); the larger is the peak.
    if (last && walk.interleavedWalk && !plan.offloads()) {
        const double perLayerStored = perMicroBatch / layersPerStage;
        const double alone = walk.withoutHead * perLayerStored + rebuiltLayer;
        if (alone + layerWorkingBytes > st.activationsBytes + o.logitsLossBytes + o.backwardWorkingBytes) {
            st.moment = StageMemory::Moment::Whole; // a moment with no output-layer pass alive
            st.otherMomentActivationsBytes = 0.0;
            st.activationsBytes = alone;
            o.logitsLossBytes = 0.0;
            o.backwardWorkingBytes = layerWorkingBytes;
        }
    }
    // What the backward holds at the stage's peak moment, against which each phase after it is measured (FORMULAS.md
    // §2, "Phases after the backward"): a phase's excess over it is the peak's.
    auto backwardPhase = [&] { return st.activationsBytes + o.logitsLossBytes + o.backwardWorkingBytes; };
    // A trainer's metrics over the logits (train_metric_losses, FORMULAS.md §3.4) run after the micro-batch's
    // backward has freed its activations, head state and transients: the logits, still held in the trainer's
    // outputs, beside one metric's fp32 copy and log-softmax (4 + 4 B a logit). Where that phase needs more than
    // the backward held, the excess is the stage's peak's, counted with the logits and loss.
    if (last && trainMetricLossesOf(plan.framework) > 0) {
        const double metricsPhase = (e + 8.0) * T * t.vocabLoss;
        o.logitsLossBytes += std::max(0.0, metricsPhase - backwardPhase());
    }
    // torch.compile over the whole model as one graph (compile_whole_model) where nothing splits it (no ZeRO or FSDP
    // wrapper, whose hooks break the graph at every unit, and no DDP, whose DDPOptimizer breaks it at every bucket): the
    // backward is one autograd.Function (AOTAutograd's CompiledFunction) that returns every parameter's gradient at
    // once, after the whole backward, and the autograd engine adds them into .grad only then. From the second
    // micro-batch of accumulation a whole second set of the gradients sits beside the accumulated one, after the
    // backward has freed its activations and transients, with the logits where the trainer holds them. Where that
    // phase needs more than the backward held, the excess is the stage's peak's (counted with the step's copies).
    double gradientsReturned = 0.0;
    if (compileWholeModelOf(plan.framework) && z == 0 && plan.dp == 1 && m > 1)
        gradientsReturned = std::max(0.0, st.gradsBytes + lossHeldAfter - backwardPhase());
    // DeepSpeed's optimizers copy the gradients at the step, after the last backward has freed the activations,
    // logits and backward transients (each parameter group in turn; its largest holds all but the biases and norms):
    // - BF16_Optimizer under its pipeline engine: _bf16_reduce_grads hands buffered_allreduce_fallback the flat
    //   fp32 gradient of each group, one tensor larger than the 5e8-element bucket, and allreduce_bucket casts it
    //   whole to the engine's communication_data_type (bf16 where bf16 is enabled and the config names none;
    //   BigScience's tr11 ds_config names none) for the all-reduce and copies it back (pipe/engine.py, engine.py,
    //   bf16_optimizer.py: v0.6.2 of 2022-04 through 2025): the stage's parameters at the reduce dtype.
    // - ZeRO-1/2 (stage_1_and_2.py step(), the same through 2025): the partition's 16-bit gradients flattened into
    //   one new tensor and that cast to the fp32 master's dtype for the group's optimizer step: (w + 4) / N a
    //   parameter (w alone in fp32 training, where the cast is the tensor itself); not with the optimizer on the
    //   host, whose partition is copied there as it is reduced.
    double stepCopy = 0.0;
    if (deepSpeedBf16OptimizerOf(plan.framework, plan.pp, z, recipe.weightBytes, recipe.gradBytes)) {
        stepCopy = params.total() * recipe.gradReduceBytes();
    } else if (plan.framework.name == "deepspeed" && (z == 1 || z == 2) && !plan.offloadOptimizer) {
        const double w = recipe.weightBytes;
        stepCopy = (w + (w < 4.0 ? 4.0 : 0.0)) *
                   (params.dense / shardDivisor(true, denseShards) + params.expert / shardDivisor(true, expertShards));
    }
    if (stepCopy > 0.0 || zero1ReduceTransient > 0.0) {
        // ZeRO-1's reduce bucket (above) comes first and is freed before the step's copies: the phase holds the
        // larger of the two at once.
        o.stepCopyBytes = std::max(0.0, std::max(stepCopy, zero1ReduceTransient) - backwardPhase());
        // PyTorch's caching allocator gave the backward's tensors segments of their own sizes; a transient larger
        // than any of them takes a new segment, kept beside the cached ones (CUDACachingAllocator: memory goes back
        // to the device only when an allocation fails). The largest: the MLP's inner activation, the unfused
        // attention's scores, the last stage's fp32 logits. The step's copies reuse the bucket's segment where they
        // fit in it.
        const double inner = e * T * t.ffnLocal * (model.gatedMlp() ? 2.0 : 1.0);
        const double largestFreedBlock = std::max({scoresBytes, inner, e * T * h, last ? 4.0 * T * t.vocabLoss : 0.0});
        const double bucketSegment = zero1ReduceTransient > largestFreedBlock ? zero1ReduceTransient : 0.0;
        const double copySegment = stepCopy > std::max(largestFreedBlock, bucketSegment) ? stepCopy : 0.0;
        st.allocatorKeptBytes = std::max(0.0, bucketSegment + copySegment - o.stepCopyBytes);
    }
    // The eager fp32 loss over 16-bit logits the trainer let go of (torchtitan's `del pred`): the logits' block is freed
    // before the loss's backward, whose tensors are each twice its size (4 B a logit), so none of them fits in it and
    // the caching allocator keeps it beside them at the peak (CUDACachingAllocator returns memory to the device only
    // when an allocation fails). Reserved, not allocated.
    if (last && st.moment == StageMemory::Moment::LossBackward && crossEntropyOf(plan.framework) == "eager" &&
        !logitsHeldThroughBackwardOf(plan.framework) && e < 4.0)
        st.allocatorKeptBytes += e * T * t.vocabLoss;
    o.stepCopyBytes = std::max(o.stepCopyBytes, gradientsReturned);
    o.reservedBytes = reservedBytes;
    o.collectiveLibraryBytes = collectiveLibraryBytes;
    st.capacityBytes = capacityBytes;
    st.headroomBytes = capacityBytes - st.totalBytes();
    st.hostFits = st.hostBytes <= 0.0 || st.hostBytes <= hostCapacityBytesPerGpu;
    st.fits = st.headroomBytes >= 0.0 && st.hostFits;
    return st;
}

double activationsAtPeakBytes(const StageMemory& st) { return st.activationsBytes + st.other.logitsLossBytes; }
double buffersAtPeakBytes(const StageMemory& st) {
    return st.other.zero3GatherBytes + st.other.commBufferBytes + st.other.backwardWorkingBytes + st.other.stepCopyBytes;
}
double activationsCategoryPeakBytes(const StageMemory& st) {
    return std::max(activationsAtPeakBytes(st), st.otherMomentActivationsBytes);
}
double buffersCategoryPeakBytes(const StageMemory& st) {
    return buffersAtPeakBytes(st) + std::max(0.0, st.layerBackwardWorkingBytes - st.other.backwardWorkingBytes);
}

double MemoryReport::hostBytesPerNode() const { return hostPeakBytes * gpusPerNode; }

double StageMemory::reservedPeakBytes() const {
    // Where the kept segment would not fit, the allocator frees its cached blocks and retries: it holds no more
    // than the device has (and no less than the allocated peak).
    const double kept = totalBytes() + allocatorKeptBytes;
    return capacityBytes > 0.0 ? std::min(kept, std::max(totalBytes(), capacityBytes)) : kept;
}

double hostCapacityPerGpu(const ClusterConfig& cluster) {
    // The node's host memory is shared by its GPUs; a rank may use its share (ranks of one node hold alike
    // partitions, stage by stage).
    return cluster.host.memoryBytes / std::max(1, cluster.gpusPerNode);
}

MemoryReport predictMemory(const ModelConfig& model, const ClusterConfig& cluster, const Plan& given) {
    const Plan plan = withResolvedPipelineSplit(model, cluster, given);
    const PrecisionRecipe recipe = fp8OnGpu(precisionRecipeOf(plan), plan.framework, cluster.gpu);
    const MemoryShapeTerms terms = memoryShapeTerms(model, plan, recipe);
    MemoryReport report;
    report.capacityBytes = d(cluster.gpu.memoryBytes);
    report.hostCapacityBytes = cluster.host.memoryBytes;
    report.gpusPerNode = std::max(1, cluster.gpusPerNode);
    for (int stage = 0; stage < plan.pp; ++stage) {
        StageMemory st = stageMemory(model, plan, recipe, terms, stageParameters(model, plan, stage), stage,
                                     d(cluster.gpu.reservedBytes), report.capacityBytes, hostCapacityPerGpu(cluster),
                                     collectiveLibraryMemory(model, plan, cluster, stage).bytes);
        report.hostPeakBytes = std::max(report.hostPeakBytes, st.hostBytes);
        report.reservedPeakBytes = std::max(report.reservedPeakBytes, st.reservedPeakBytes());
        if (st.totalBytes() > report.peakBytes) {
            report.peakBytes = st.totalBytes();
            report.peakStage = stage;
        }
        report.fits = report.fits && st.fits;
        report.stages.push_back(st);
    }
    return report;
}
} // namespace tessel
