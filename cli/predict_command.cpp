// `tessel predict`: memory per pipeline stage with the OOM verdict, and per-layer compute/communication cost.
#include "commands.hpp"
#include "scenario_flags.hpp"
#include "table.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/report.hpp"
#include "tessel/sim/export.hpp"
#include "tessel/sim/report.hpp"
#include "tessel/sim/error_band.hpp"
#include "tessel/sim/simulate.hpp"

#include <cstdio>
#include <iostream>
#include <memory>

namespace tessel::cli {

namespace {
// What the mixture-of-experts band is measured on (error_band.hpp kMoeKind and its per-GPU kinds): a plan's
// routing, dispatcher and expert shapes may be none of these (docs/validation.md, "A mixture of experts: DGX Cloud's
// Grok-1 314B recipe", "Megatron-Bridge's Qwen3 MoE on H100" and "NeMo AutoModel").
const char* const kMoeUnvalidated =
    "the mixture-of-experts runs the band is measured on: DGX Cloud's Grok-1 314B (8 experts, top-2, the all-to-all "
    "padded to capacity), NeMo AutoModel's Qwen3-30B-A3B and DeepSeek-V3 (DeepEP) and Megatron-Bridge's Qwen3-30B-A3B "
    "and 235B-A22B on H100 (128 fine-grained experts, dropless; HybridEP, and the all-to-all under batch-level "
    "overlap); other expert designs are not validated (docs/validation.md)";

// The model's tanh soft-capping as costed: inside a FlashAttention kernel that takes softcap the tanh runs on the
// scores the kernel computes anyway, one special-function op a score beside its exponential, and is not costed.
std::string softcapText(const ModelConfig& m, const Plan& pl, const GpuSpec& gpu) {
    if (m.attentionSoftcap == 0.0 && m.logitSoftcap == 0.0) return {};
    std::string t = ", tanh soft-capping of the ";
    if (m.attentionSoftcap > 0.0)
        t += "scores at " + fixed(m.attentionSoftcap, 1) +
             (pl.flashAttention ? " (inside " + attentionKernelOf(m, pl, gpu) + ": not costed)" : "");
    if (m.logitSoftcap > 0.0) t += std::string(m.attentionSoftcap > 0.0 ? " and the " : "") + "logits at " + fixed(m.logitSoftcap, 1);
    return t;
}

void printHuman(const Scenario& s, const CostPrediction& p, const sim::PlanSimulation& simulation, const std::string& nodeNote,
                std::ostream& out) {
    const auto& m = s.model;
    const auto& c = s.cluster;
    const auto& pl = s.plan;
    out << "tessel predict: " << (s.name.empty() ? "scenario" : s.name) << "\n";
    out << "  model    " << m.name << ": " << fixed(static_cast<double>(p.parameters) / 1e9, 2) << " B parameters"
        << (m.moe ? " (" + fixed(static_cast<double>(p.activeParameters) / 1e9, 2) + " B active)" : std::string())
        << ", " << m.layers << " layers, hidden " << m.hidden << ", " << m.heads << " heads / "
        << (m.mla ? "latent attention (q latent " + std::to_string(m.mla->qLoraRank) + ", kv latent " +
                        std::to_string(m.mla->kvLoraRank) + ", heads " + std::to_string(m.mla->qkHeadDim()) + " / " +
                        std::to_string(m.mla->vHeadDim) + " wide)"
                  : std::to_string(m.kvHeads) + " kv")
        << ", ffn " << m.ffnHidden << (m.postNorms ? " (norms before and after each block)" : "")
        << (m.parallelResidual ? " (beside attention, one residual add)" : "") << ", vocab " << m.vocab
        << (m.embeddingNorm ? " (a norm over the embedding)" : "") << (m.embeddingScale ? " (embedding x sqrt(hidden))" : "")
        << (m.attentionSinks ? " (a learned attention sink a head)" : "")
        << ", seq " << m.seqLen
        << (m.slidingWindow > 0 ? ", sliding window " + std::to_string(m.slidingWindow) +
                                      (m.fullAttentionLayers.empty() ? std::string()
                                                                     : " (" + std::to_string(m.fullAttentionLayers.size()) +
                                                                           " layers full)")
                                : std::string())
        << (m.rotaryPercent != 1.0 && !m.mla ? ", rotary on " + std::to_string(m.rotaryDim()) + " of " +
                                                   std::to_string(m.headDim) + " per head"
                                             : std::string())
        << softcapText(m, pl, c.gpu) << "\n";
    out << "  cluster  " << c.name << ": " << c.nodes << " x " << c.gpusPerNode << " " << c.gpu.name << " ("
        << gib(static_cast<double>(c.gpu.memoryBytes), 1) << " GiB), " << c.intraNode.name << " / " << c.interNode.name
        << "\n";
    if (!nodeNote.empty()) out << "  note     " << nodeNote << "\n";
    const std::string split = pipelineSplitText(m, pl);
    out << "  plan     tp " << pl.tp << ", pp " << pl.pp << (split.empty() ? "" : " (layers " + split + ")") << ", dp " << pl.dp << ", cp " << pl.cp << (pl.cp > 1 ? " (" + toString(pl.cpComm) + (pl.cpComm == CpComm::A2aP2p ? ", " + std::to_string(pl.cpHeadSplit()) + " x " + std::to_string(pl.cpRing()) : std::string()) + ")" : std::string()) << ", ep " << pl.ep
        << (pl.expertFolded() ? ", etp " + std::to_string(pl.etp) : std::string()) << ", vpp " << pl.vpp << " | micro-batch " << pl.microBatch << ", global batch " << pl.globalBatch << " ("
        << pl.microBatchesPerStep() << " micro-batches per step) | ZeRO-" << pl.zeroStage
        << (pl.zeroReplicas > 1 ? " over " + std::to_string(pl.zeroShardSize()) + " ranks x " + std::to_string(pl.zeroReplicas) + " replicas"
                                : std::string())
        << " | recompute "
        << toString(pl.recompute) << (pl.recomputeLayers > 0 ? " (" + std::to_string(pl.recomputeLayers) + " layers a chunk)" : "")
        << (pl.recompute == Recompute::Selective && pl.recomputeModules != recompute_module::Default
                ? " (" + (pl.recomputeModules ? recomputeModulesString(pl.recomputeModules) : std::string("nothing")) + ")"
                : "") << " | SP " << (pl.sequenceParallel ? "on" : "off") << " | flash "
        << (pl.flashAttention ? "on" : "off") << " | " << toString(pl.schedule) << " | " << pl.precision
        << " | " << pl.rankOrderString() << (pl.offloads() ? " | offload " + offloadString(pl) : std::string()) << "\n";
    {
        const OverlapSettings ov = resolveOverlap(pl.framework, pl.schedule == Schedule::Interleaved1F1B, pl.zeroStage);
        auto onOff = [](bool b) { return b ? "on" : "off"; };
        out << "  runs on  " << pl.framework.name << (pl.framework.version.empty() ? "" : " " + pl.framework.version)
            << ": grad reduce overlap " << onOff(ov.overlapGradReduce) << ", param gather overlap "
            << onOff(ov.overlapParamGather) << ", TP overlap " << onOff(ov.tpCommOverlap) << ", async TP grad "
            << onOff(ov.asyncTpGradReduce) << ", p2p overlap " << onOff(ov.overlapP2pComm);
        if (fsdpGathersOncePerStep(pl.framework, pl.pp, pl.zeroStage))
            out << ", parameters gathered once a step and gradients reduced once (FSDP under torchtitan's pipelining)";
        else if (pl.zeroStage == 3)
            out << ", reshard after forward " << onOff(ov.reshardAfterForward) << ", backward prefetch "
                << onOff(ov.backwardPrefetch);
        if (deepSpeedGathersByModule(pl)) {
            const DeepSpeedStage3 z = deepSpeedStage3Of(pl.framework);
            char limits[160];
            std::snprintf(limits, sizeof limits, ", ZeRO-3 gathers module by module (max live %.3g, prefetch %.3g, reuse distance %.3g elements)",
                          static_cast<double>(z.maxLiveParameters), static_cast<double>(z.prefetchBucketSize),
                          static_cast<double>(z.maxReuseDistance));
            out << limits;
        }
        out << ", " << (ov.fusedKernels ? "fused" : "eager PyTorch") << " elementwise kernels";
        if (const auto* named = findPrecisionRecipe(pl.precision)) {
            const PrecisionRecipe kept = precisionRecipeOf(pl);
            if (named->gradBytes != kept.gradBytes) out << ", 16-bit main gradients";
            if (pl.precision == "fp8") {
                const std::string r = fp8RecipeOf(pl.framework);
                out << ", FP8 " << (r == "tensorwise" ? "current scaling (an amax pass before each cast)"
                                    : r == "mxfp8"    ? "MXFP8 block scaling"
                                    : r == "blockwise" ? "block scaling"
                                                       : "delayed scaling");
            }
            if (pl.precision == "nvfp4")
                out << ", NVFP4 " << (nvfp4RhtOf(pl.framework) ? "with" : "without") << " the Hadamard transform, gradients "
                    << (nvfp4StochasticRoundingOf(pl.framework) ? "stochastically rounded" : "rounded to nearest")
                    << (fp4ParamGatherOf(pl.framework) ? ", NVFP4 parameters" : "");
            if (teOpFuserOf(pl.framework))
                out << ", Transformer Engine's op fuser (the MLP's activation quantizes)";
            if (pl.bf16EndLayers())
                out << ", the first " << pl.bf16LayersAtStart << " and last " << pl.bf16LayersAtEnd
                    << " layers in BF16 (first_last_layers_bf16)";
            if (kept.momentBytes < named->momentBytes) out << ", bf16 optimizer state (no fp32 master)";
            else if (kept.masterBytes == 2 && named->masterBytes == 4) out << ", fp32 master as 16-bit remainders";
            const std::string loss = crossEntropyOf(pl.framework);
            if (loss != "fused")
                out << ", "
                    << (loss == "te"             ? "Transformer Engine's"
                        : loss == "eager"          ? "eager PyTorch"
                        : loss == "compiled"       ? "torch.compile's"
                        : loss == "fused_linear"   ? "Liger-Kernel's fused linear (output layer and loss chunked)"
                        : loss == "eager_16bit"    ? "eager PyTorch, over the 16-bit logits (no upcast),"
                        : loss == "flash_attn"     ? "flash-attn's"
                        : loss == "unfused"        ? "Megatron's unfused vocab-parallel"
                                                   : loss)
                    << " cross-entropy";
        }
        if (pl.pp > 1 && pipelineScatterGatherOf(pl.framework, pl.tp, pl.sequenceParallel))
            out << ", pipeline sends split over TP and all-gathered (scatter-gather)";
        if (deepSpeedBf16OptimizerOf(pl.framework, pl.pp, pl.zeroStage, precisionRecipeOf(pl).weightBytes, precisionRecipeOf(pl).gradBytes))
            out << ", DeepSpeed's BF16 optimizer (bf16 gradients beside fp32 ones, all-reduced in bf16)";
        if (opLevelSelectiveRecompute(s.model, pl)) out << ", selective recompute as torchtitan's per-op policy";
        if (s.model.moe && pl.ep > 1 && moeA2aOverlapOf(pl.framework))
            out << ", EP all-to-alls under another micro-batch's compute (batch-level overlap)";
        if (s.model.moe && pl.ep > 1 && moeSharedExpertOverlapOf(pl.framework))
            out << ", shared experts beside the dispatch and combine";
        if (pl.framework.attentionUnpad.value_or(false) && pl.flashAttention)
            out << ", attention on unpadded q/k/v (llm-foundry's gathers)";
        if (const int metrics = trainMetricLossesOf(pl.framework); metrics > 0)
            out << ", " << metrics << " training-metric cross-entropies a micro-batch (Composer's)";
        if (precisionRecipeOf(pl).autocast) out << ", torch.autocast over fp32 weights";
        if (ov.foreachOptimizer) out << ", AdamW as torch.optim's foreach ops";
        if (ov.checkpointEarlyStop && pl.recompute == Recompute::Full)
            out << ", full recompute stopping early (torch.utils.checkpoint: fc2 and the last residual not rerun)";
        if (launchBlockingOf(pl.framework)) out << ", blocking kernel launches (CUDA_LAUNCH_BLOCKING=1)";
        if (ncclUbOf(pl.framework)) out << ", data-parallel collectives on NCCL user buffers (nccl_ub: NCCL's SM-efficient kernels)";
        if (kvReplicationOf(pl.framework)) out << ", K and V replicated over TP beyond the model's key/value heads (kv_replication)";
        if (pl.tp > 1 && !lossParallelOf(pl.framework)) out << ", logits gathered over TP and the loss run whole on every rank (loss_parallel false)";
        if (pl.tp > 1 && !vocabParallelEmbeddingOf(pl.framework)) out << ", the word embedding whole on every TP rank (vocab_parallel_embedding false)";
        if (const std::string launcher = launcherAttentionKernelOf(pl, s.cluster.gpu);
            pl.flashAttention && pl.attentionKernel == "auto" && !launcher.empty() && launcher != s.cluster.gpu.defaultAttentionKernel)
            out << ", attention " << launcher << " (its launcher set NVTE_FUSED_ATTN=0, cuDNN's attention off)";
        if (const std::string kernel = attentionKernelOf(s.model, pl, s.cluster.gpu);
            pl.flashAttention && pl.attentionKernel == "auto" && s.model.attentionSoftcap > 0.0 &&
            kernel != resolveAttentionKernel(s.cluster.gpu, launcherAttentionKernelOf(pl, s.cluster.gpu).empty()
                                                                ? "auto" : launcherAttentionKernelOf(pl, s.cluster.gpu)))
            out << ", attention " << kernel << " (the model soft-caps its scores, which the GPU's default kernel does not)";
        out << (ov.defaulted.empty() ? "" : " (framework defaults where unstated)") << "\n";
        // The same framework's rules as `tessel export` and `tessel search --framework` (one source of truth).
        if (const auto format = sim::exportFormatOf(pl.framework.name)) {
            ProblemList refusals;
            sim::frameworkRules(s.model, s.cluster, pl, *format, refusals);
            if (!refusals.empty())
                out << "  note     " << sim::toString(*format) << " cannot run this plan (" << refusals.items().front().where
                    << ": " << refusals.items().front().message << ")" << (refusals.items().size() > 1 ? ", and more" : "")
                    << "; tessel export --format " << sim::toString(*format) << " lists every reason\n";
        }
        out << "\n";
    }

    out << "Memory per GPU, GiB (one rank of each pipeline stage)\n";
    Table mem({"stage", "layers", "in-flight", "weights", "grads", "optimizer", "activations", "other", "total",
               "headroom", "verdict"});
    for (const auto& st : p.memory.stages) {
        mem.addRow({std::to_string(st.stage), std::to_string(st.layers), fixed(st.inFlight, 2), gib(st.weightsBytes),
                    gib(st.gradsBytes), gib(st.optimizerBytes), gib(st.activationsBytes), gib(st.otherBytes()),
                    gib(st.totalBytes()), gib(st.headroomBytes), st.fits ? "fits" : "OOM"});
    }
    out << mem.render();
    const auto& peak = p.memory.stages[static_cast<size_t>(p.memory.peakStage)];
    out << "  other = ZeRO-3 gather " << gib(peak.other.zero3GatherBytes) << " + comm buffers "
        << gib(peak.other.commBufferBytes) << " + logits/loss " << gib(peak.other.logitsLossBytes)
        << " + backward working set " << gib(peak.other.backwardWorkingBytes);
    if (peak.other.stepCopyBytes > 0.0)
        out << (compileWholeModelOf(s.plan.framework) ? " + the compiled backward's gradients, returned at once, "
                                                      : " + the step's gradient copies ")
            << gib(peak.other.stepCopyBytes) << " (beyond the backward's)";
    if (peak.other.collectiveLibraryBytes > 0.0) out << " + NCCL's buffers " << gib(peak.other.collectiveLibraryBytes);
    out << " + reserved " << gib(peak.other.reservedBytes) << " (stage " << peak.stage << ")\n";
    // The last stage's peak is one of its two moments (FORMULAS.md §2): say which, and what the other holds; or a
    // phase after the backward, where it holds more (FORMULAS.md §2, "Phases after the backward").
    if (peak.other.stepCopyBytes > 0.0)
        out << "  after the backward, its activations freed: "
            << (compileWholeModelOf(s.plan.framework) ? "the compiled graph's gradients, returned at once beside the "
                                                        "accumulated ones"
                                                      : "the step's gradient copies")
            << " (the backward itself peaks " << gib(peak.other.stepCopyBytes) << " GiB lower)\n";
    else if (peak.moment == StageMemory::Moment::LossBackward)
        out << "  at the loss's backward (no layer rebuilt yet, no layer's backward running; the last layer's backward "
               "holds " << gib(peak.otherMomentActivationsBytes + peak.layerBackwardWorkingBytes)
            << " GiB of activations, loss and working set)\n";
    else if (peak.moment == StageMemory::Moment::LastLayerBackward)
        out << "  at the last layer's backward (the loss's backward, before it, holds " << gib(peak.lossBackwardBytes)
            << " GiB of loss beside " << gib(peak.otherMomentActivationsBytes - peak.lossBackwardBytes)
            << " GiB of activations)\n";
    if (pl.offloads())
        out << "  host     " << gib(p.memory.hostPeakBytes) << " GiB per GPU offloaded (" << offloadString(pl) << "), "
            << gib(p.memory.hostBytesPerNode()) << " of " << gib(p.memory.hostCapacityBytes) << " GiB host memory per node: "
            << (p.memory.hostBytesPerNode() <= p.memory.hostCapacityBytes ? "fits" : "HOST OUT OF MEMORY") << "\n";
    const auto memoryBand = sim::memoryBandFor(pl);
    const sim::MemoryVerdict verdict = sim::memoryVerdict(p.memory.peakBytes, p.memory.reservedPeakBytes, p.memory.capacityBytes, memoryBand);
    out << "  peak " << gib(p.memory.peakBytes) << " GiB on stage " << p.memory.peakStage << " of "
        << gib(p.memory.capacityBytes) << " GiB: "
        << (verdict == sim::MemoryVerdict::OutOfMemory ? "OUT OF MEMORY"
            : verdict == sim::MemoryVerdict::MayNotFit ? "MAY NOT FIT (fits as predicted, not at the band's upper end)"
                                                         : "FITS")
        << "\n";
    // The published peaks the bands come from are reserved memory (torch.cuda.max_memory_reserved, nvidia-smi).
    const bool reservedAbove = p.memory.reservedPeakBytes > p.memory.peakBytes;
    if (reservedAbove)
        out << "  reserved " << gib(p.memory.reservedPeakBytes)
            << " GiB: PyTorch's caching allocator keeps DeepSpeed's step-time gradient copies (and ZeRO-1's reduce "
               "bucket) as segments of their own beside the activations' cached blocks, as torch.cuda.max_memory_reserved and nvidia-smi "
               "show; it gives memory back only when an allocation fails, so out of memory is the allocated peak's, the "
               "band the reserved one's\n";
    if (memoryBand) {
        const sim::PeakRange range = sim::peakRangeWithin(p.memory.reservedPeakBytes, *memoryBand);
        out << "  trust: on " << memoryBand->records << " published " << memoryBand->kind
            << " runs with a measured peak, tessel's peak was off by " << fixed(100.0 * memoryBand->medianAbsError, 1)
            << "% at the median (90% within " << fixed(100.0 * memoryBand->p90AbsError, 1) << "%, mean "
            << (memoryBand->meanSignedError >= 0 ? "+" : "") << fixed(100.0 * memoryBand->meanSignedError, 1)
            << "%): " << (reservedAbove ? "reserved " : "") << "peak " << gib(range.lowBytes) << "-"
            << gib(range.highBytes) << " GiB (tessel validate)\n";
        if (verdict == sim::MemoryVerdict::MayNotFit) {
            const double safe = sim::peakFittingBandBytes(p.memory.capacityBytes, *memoryBand);
            out << "  to fit at the band's upper end the " << (reservedAbove ? "reserved " : "") << "peak must be at most "
                << gib(safe) << " GiB ("
                << gib(p.memory.reservedPeakBytes - safe) << " GiB less); tessel search --memory-band on ranks only such plans\n";
        }
    } else if (sim::shippedErrorBands().memoryOverall.records > 0) {
        out << "  trust: " << sim::noMemoryBandText(pl) << "\n";
    }
    out << "\n";

    out << "Compute per transformer layer, one micro-batch, one rank\n";
    Table ops({"op", "m x n x k", "GFLOP", "MB", "forward ms"});
    for (const auto& op : p.layer.forwardOps) {
        const std::string shape = op.opClass == OpClass::Memory
                                      ? "-"
                                      : std::to_string(op.m) + " x " + std::to_string(op.n) + " x " + std::to_string(op.k);
        ops.addRow({op.name, shape, fixed(op.flops / 1e9, 2), fixed(op.bytes / 1e6, 1), milliseconds(op.seconds)});
    }
    out << ops.render();
    out << "  forward " << milliseconds(p.layer.forward.seconds) << " ms, backward "
        << milliseconds(p.layer.backward().seconds) << " ms (input " << milliseconds(p.layer.backwardInput.seconds)
        << " + weight " << milliseconds(p.layer.backwardWeight.seconds) << "), recompute "
        << milliseconds(p.layer.recompute.seconds) << " ms; LM head + loss forward "
        << milliseconds(p.head.forward.seconds) << " ms";
    // The trainer's metrics over the logits ride in the head's forward (FORMULAS.md §3.4): said apart.
    for (const auto& op : p.head.forwardOps)
        if (op.name == "train_metrics") out << " (training metrics " << milliseconds(op.seconds) << " ms of it)";
    out << "; optimizer step (stage 0) "
        << milliseconds(p.optimizerPerStage.front().seconds) << " ms\n";
    if (p.denseLayer) {
        // An MoE model's dense layers (moe.dense_layers) are costed as the dense model's layer.
        const auto& dense = m.moe->denseLayers;
        out << "  dense layers (" << dense.size() << " of " << m.layers << ", from layer " << dense.front() << "): the dense "
            << "MLP of ffn " << m.ffnHidden << " in place of the experts: forward " << milliseconds(p.denseLayer->forward.seconds)
            << " ms, backward " << milliseconds(p.denseLayer->backward().seconds) << " ms\n";
    }
    if (p.fullAttentionLayer) {
        // A windowed model's full-attention layers (full_attention_layers) are costed as the model without its window.
        out << "  full-attention layers (" << m.fullAttentionLayers.size() << " of " << m.layers << ", the rest windowed at "
            << m.slidingWindow << "): forward " << milliseconds(p.fullAttentionLayer->forward.seconds) << " ms, backward "
            << milliseconds(p.fullAttentionLayer->backward().seconds) << " ms\n";
    }
    if (m.mtpLayers > 0) {
        // Multi-token prediction: each module a layer, the head and loss again and its own ops, on the head's stage.
        const int at = pl.stageOfVirtual(pl.pp * pl.vpp - 1);
        const BlockCompute& own = *p.mtpModule;
        out << "  multi-token prediction: " << m.mtpLayers << (m.mtpLayers == 1 ? " module" : " modules") << " on stage "
            << at << ", each a layer, the LM head and loss again and its own (lookup, norms, eh_proj "
            << milliseconds(own.forward.seconds) << " ms forward)\n";
    }
    // The share of their benchmarked rate the layer's GEMMs and attention run at (FORMULAS.md §3.3); fp32 GEMMs
    // run on the CUDA cores and take none.
    const Dtype gemmDtype = precisionRecipeOf(pl).gemmDtype;
    if (!runsOnTensorCores(gemmDtype))
        out << "  " << toString(gemmDtype) << " GEMMs on the CUDA cores at their benchmarked rate (no tensor-core share)";
    else if (!s.cluster.gpu.sustainedShareByDuty.empty()) {
        out << "  tensor cores at " << fixed(p.layer.tensorShare, 3) << " of their benchmarked rate (the GPU's measured "
            << "power curve at the layer's tensor-core duty " << fixed(p.layer.tensorDuty, 2);
        // A part held to another power limit than the curve's runs a throttled block's clock where its draw meets it.
        if (const double scale = s.cluster.gpu.powerLimitShareScale(); scale != 1.0)
            out << ", the curve's " << fixed(s.cluster.gpu.sustainedSharePower->measuredAtWatts, 0) << " W moved to this part's "
                << fixed(s.cluster.gpu.powerLimitWatts, 0) << " W limit: x" << fixed(scale, 3);
        out << ")";
    }
    else
        out << "  tensor cores at " << fixed(p.layer.tensorShare, 3)
            << " of their benchmarked rate (gpu.sustained_tensor_fraction)";
    // Attention's GEMMs over heads whose dimension is not a multiple of 16 bytes: cuBLAS's batched fallback, at the
    // GPU's measured figure where it has one (FORMULAS.md §3.1, "Batched over heads"), said so the table's times read.
    for (const auto& op : p.layer.forwardOps) {
        const Dtype dt = op.dtype.value_or(precisionRecipeOf(pl).computeDtype);
        const int64_t align = std::max<int64_t>(1, static_cast<int64_t>(16.0 / bytesPerElement(dt)));
        if (!op.perHead || (op.n % align == 0 && op.k % align == 0)) continue;
        const auto& g = s.cluster.gpu.gemmModel;
        const bool perHead = g && !g->unalignedPerHeadEfficiency.empty();
        const bool plain = g && !g->unalignedEfficiency.empty();
        const int64_t headDim = op.name == "attention_scores" ? op.k : op.n;
        out << "\n  heads of " << headDim << " (not a multiple of " << align << " " << toString(dt)
            << " elements): attention's batched GEMMs "
            << (perHead || plain ? "at cuBLAS's unaligned fallback, " +
                                       fixed(gemmEfficiency(s.cluster.gpu, op.m, op.n, op.k, dt, op.batch, true), 3) +
                                       " of peak (gpu.gemm_model." +
                                       (perHead ? "unaligned_per_head_efficiency" : "unaligned_efficiency") + ")"
                                 : "not penalised (this GPU has no unaligned figure)");
        break;
    }
    // Blocking launches (CUDA_LAUNCH_BLOCKING=1): the host's time between kernels is in the phases above (FORMULAS.md §3.8).
    if (p.layer.launchHostSeconds > 0.0)
        out << "\n  launches block (CUDA_LAUNCH_BLOCKING=1): " << milliseconds(p.layer.launchHostSeconds)
            << " ms a layer and micro-batch of the host's time between kernels, in the forward, backward and recompute above";
    // Eager ops shorter than their launches: the phases last as long as the host takes to launch them (§3.8).
    if (p.layer.hostWaitSeconds > 0.0)
        out << "\n  host-bound: the GPU waits " << milliseconds(p.layer.hostWaitSeconds)
            << " ms a layer and micro-batch for the host's launches of eager ops (shorter kernels than launches), in the"
            << " phases above";
    // A calibrated cluster's phase fits (FORMULAS.md §7.5, §7.8) act on the step, not on the per-op times above: said,
    // so the table and the step are read together.
    {
        std::string fits;
        for (const char* phase : {"forward", "backward", "optimizer", "communication"}) {
            const PhaseFit& f = s.cluster.gpu.phaseFit(phase);
            if (f.timeScale == 1.0 && f.overheadSeconds == 0.0 && f.perTensorSeconds == 0.0) continue;
            fits += std::string(fits.empty() ? "" : ", ") + phase + " x" + fixed(f.timeScale, 3);
            if (f.overheadSeconds != 0.0) fits += " + " + fixed(f.overheadSeconds * 1e6, 1) + " us";
            if (f.perTensorSeconds != 0.0) fits += " + " + fixed(f.perTensorSeconds * 1e6, 1) + " us a tensor";
        }
        if (!fits.empty())
            out << "\n  calibrated phases (tessel calibrate, the cluster file's calibration block): " << fits
                << "; the step below applies them, the per-op times above do not";
    }
    // A GPU without fused attention kernels (Volta: FlashAttention needs sm75/sm80 and later) costs a flash plan's
    // attention as GEMM tiles: said, since the run would use another kernel or none.
    if (pl.flashAttention && s.cluster.gpu.attentionKernels.empty() && s.cluster.gpu.overlapsCommunication)
        out << "\n  " << s.cluster.gpu.name << " has no fused attention kernel in its preset: flash attention costed as GEMM "
            << "tiles at the GEMM rate (FlashAttention needs sm75/sm80 or later; flash_attention off costs the scores "
            << "in HBM between GEMMs)";
    out << "\n\n";

    out << "Communication\n";
    Table comm({"collective", "group", "ranks", "nodes", "primitive", "when", "MiB", "ms", "tier"});
    auto addOps = [&](const std::vector<CommOp>& list, const std::string& suffix) {
        for (const auto& op : list) {
            comm.addRow({op.name + suffix, toString(op.group), std::to_string(op.placement.size),
                         std::to_string(op.placement.nodes), toString(op.primitive), toString(op.phase),
                         fixed(op.bytes / (1024.0 * 1024.0), 2), milliseconds(op.cost.seconds), op.cost.tier});
        }
    };
    addOps(p.layerComm, "");
    addOps(p.pipelineComm, "");
    if (!p.dpComm.empty()) addOps(p.dpComm.front(), " (stage 0)");
    if (p.layerComm.empty() && p.pipelineComm.empty() && (p.dpComm.empty() || p.dpComm.front().empty()))
        out << "  (none: a single rank)\n";
    else out << comm.render();
    out << "  per-layer collectives repeat for every layer and micro-batch; pipeline sends per micro-batch and "
           "stage boundary\n\n";

    const auto& mt = simulation.metrics;
    out << "Step time (simulated schedule: " << simulation.schedule.actionCount() << " actions on "
        << pl.pp << " stage" << (pl.pp == 1 ? "" : "s") << ")\n";
    out << "  step " << fixed(mt.stepSeconds, 3) << " s, " << human(mt.tokensPerSecond) << " tokens/s, MFU "
        << fixed(100.0 * mt.mfu, 1) << "%, HFU " << fixed(100.0 * mt.hfu, 1) << "%, bubble "
        << fixed(100.0 * mt.bubbleFraction, 1) << "% (mean over stages)\n";
    // MFU and HFU are against the compute dtype's peak; an FP8 recipe's GEMMs have a peak twice that (so MFU
    // can pass 100%), which is why MFU is ill-defined for FP8 training and is said here.
    if (const auto* recipe = findPrecisionRecipe(pl.precision); recipe && recipe->gemmDtype != recipe->computeDtype)
        out << "  MFU and HFU are of the " << toString(recipe->computeDtype) << " peak ("
            << fixed(s.cluster.peakFlops(recipe->computeDtype) / 1e12, 0) << " TFLOP/s); the " << toString(recipe->gemmDtype)
            << " GEMMs' peak is " << fixed(s.cluster.peakFlops(recipe->gemmDtype) / 1e12, 0) << " TFLOP/s\n";
    if (const auto band = sim::errorBandFor(s.cluster, s.plan, s.model.moe.has_value()))
        out << "  trust: on " << band->records << " " << sim::bandSourceText(band->kind) << ", tessel's step was off by "
            << fixed(100.0 * band->medianAbsError, 1) << "% at the median (90% within " << fixed(100.0 * band->p90AbsError, 1)
            << "%, mean " << (band->meanSignedError >= 0 ? "+" : "") << fixed(100.0 * band->meanSignedError, 1)
            << "%): step " << fixed(mt.stepSeconds * (1.0 - band->medianAbsError), 2) << "-"
            << fixed(mt.stepSeconds * (1.0 + band->medianAbsError), 2) << " s (" << sim::bandCommand(band->kind) << ")\n";
    if (s.model.moe) out << "  " << kMoeUnvalidated << "\n";
    Table br({"stage", "compute", "TP", "CP", "EP", "PP", "DP", "optimizer", "bubble", "step s"});
    auto pct = [&](double v) { return fixed(100.0 * v / mt.stepSeconds, 1) + "%"; };
    for (size_t st = 0; st < simulation.timeline.perStage.size(); ++st) {
        const auto& b = simulation.timeline.perStage[st];
        br.addRow({std::to_string(st) + (static_cast<int>(st) == mt.bottleneckStage ? "*" : ""), pct(b.computeSeconds),
                   pct(b.tpSeconds), pct(b.cpSeconds), pct(b.epSeconds), pct(b.ppSeconds), pct(b.dpSeconds),
                   pct(b.optimizerSeconds), pct(b.bubbleSeconds), fixed(b.total(), 3)});
    }
    out << br.render();
    out << "  * bottleneck stage (most compute); TP/CP/EP/PP/DP are exposed (not overlapped) communication\n";
}
} // namespace

std::function<int()> addPredictCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("predict", "Predict memory per pipeline stage and per-layer costs of a plan");
    auto flags = std::make_shared<ScenarioFlags>();
    auto json = std::make_shared<bool>(false);
    flags->addTo(*cmd);
    cmd->add_flag("--json", *json, "Print one JSON object instead of tables");
    return [cmd, flags, json]() {
        if (!cmd->parsed()) return -1;
        std::string nodeNote;
        Scenario s = flags->resolve(&nodeNote);
        CostPrediction p = predictCosts(s);
        const sim::PlanSimulation simulation = sim::simulatePlan(s.model, s.cluster, s.plan);
        if (*json) {
            nlohmann::json j = predictionToJson(s, p);
            j["time"] = sim::timeToJson(simulation.metrics, simulation.timeline);
            if (const auto band = sim::errorBandFor(s.cluster, s.plan, s.model.moe.has_value()))
                j["time"]["error_band"] = {{"kind", band->kind},
                                           {"records", band->records},
                                           {"median_abs_error", band->medianAbsError},
                                           {"p90_abs_error", band->p90AbsError},
                                           {"mean_signed_error", band->meanSignedError}};
            if (s.model.moe) j["time"]["error_band_note"] = kMoeUnvalidated;
            // The peak with its validated band and the verdict at the band's upper end ("fits" stays the verdict
            // on the predicted peak alone); the band is the reserved peak's (memory.reserved_peak_bytes).
            const auto memoryBand = sim::memoryBandFor(s.plan);
            j["memory"]["verdict"] = sim::toString(sim::memoryVerdict(p.memory.peakBytes, p.memory.reservedPeakBytes, p.memory.capacityBytes, memoryBand));
            if (memoryBand) {
                const sim::PeakRange range = sim::peakRangeWithin(p.memory.reservedPeakBytes, *memoryBand);
                j["memory"]["error_band"] = {{"kind", memoryBand->kind},
                                             {"records", memoryBand->records},
                                             {"median_abs_error", memoryBand->medianAbsError},
                                             {"p90_abs_error", memoryBand->p90AbsError},
                                             {"mean_signed_error", memoryBand->meanSignedError},
                                             {"peak_low_bytes", range.lowBytes},
                                             {"peak_high_bytes", range.highBytes},
                                             {"fits_band_below_bytes", sim::peakFittingBandBytes(p.memory.capacityBytes, *memoryBand)}};
            }
            if (!nodeNote.empty()) j["cluster_note"] = nodeNote;
            std::cout << j.dump(2) << "\n";
        } else {
            printHuman(s, p, simulation, nodeNote, std::cout);
        }
        return 0;
    };
}

} // namespace tessel::cli
