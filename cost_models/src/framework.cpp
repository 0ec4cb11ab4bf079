// Framework defaults for the settings that decide overlap (docs/frameworks.md), and their JSON form in a plan.
#include "tessel/cost/framework.hpp"

#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/plan.hpp"

#include <algorithm>
#include <optional>
#include <regex>
#include <unordered_map>
#include <utility>

namespace tessel {

const std::vector<std::string>& frameworkNames() {
    static const std::vector<std::string> names{"generic", "megatron", "nemo", "megascale", "deepspeed", "fsdp", "torchtitan"};
    return names;
}

const std::vector<FrameworkFlag>& frameworkFlags() {
    static const std::vector<FrameworkFlag> flags{{"overlap_grad_reduce", &FrameworkSettings::overlapGradReduce},
                                                  {"overlap_param_gather", &FrameworkSettings::overlapParamGather},
                                                  {"tp_comm_overlap", &FrameworkSettings::tpCommOverlap},
                                                  {"async_tp_grad_reduce", &FrameworkSettings::asyncTpGradReduce},
                                                  {"overlap_p2p_comm", &FrameworkSettings::overlapP2pComm},
                                                  {"reshard_after_forward", &FrameworkSettings::reshardAfterForward},
                                                  {"backward_prefetch", &FrameworkSettings::backwardPrefetch},
                                                  {"fused_kernels", &FrameworkSettings::fusedKernels},
                                                  {"grad_reduce_in_fp32", &FrameworkSettings::gradReduceInFp32},
                                                  {"fp8_param_gather", &FrameworkSettings::fp8ParamGather},
                                                  {"foreach_optimizer", &FrameworkSettings::foreachOptimizer},
                                                  {"checkpoint_early_stop", &FrameworkSettings::checkpointEarlyStop},
                                                  {"store_param_remainders", &FrameworkSettings::storeParamRemainders},
                                                  {"grad_sync_each_micro_batch", &FrameworkSettings::gradSyncEachMicroBatch}};
    return flags;
}

namespace {
// What a version string says, parsed once per distinct string and thread: the framework defaults are asked for
// inside the plan search's inner loop (a stage's memory asks for the loss kernel), where a std::regex a call cost
// the search 100x its pruning time under NeMo.
struct VersionReading {
    int year = 0;                                     // frameworkYear
    std::optional<std::pair<int, int>> containerYm;   // containerYearMonth
    int deepSpeedMinor = -1;                          // DeepSpeed 0.x's x, where the version is one
};

VersionReading readVersion(const std::string& framework, const std::string& v) {
    VersionReading out;
    if (v.empty()) return out;
    std::smatch m;
    // A NeMo / NGC container version, YY.MM (e.g. 23.11), as 2000 + YY and MM.
    if (std::regex_search(v, m, std::regex(R"(^\s*([12][0-9])\.(0[1-9]|1[0-2])\b)")))
        out.containerYm = std::make_pair(2000 + std::stoi(m[1]), std::stoi(m[2]));
    if (std::regex_search(v, m, std::regex(R"((20[1-3][0-9]))"))) out.year = std::stoi(m[1]);
    else if (out.containerYm) out.year = out.containerYm->first;
    // A release number is the framework's own: DeepSpeed 0.6.0 is 2022, where Megatron-core 0.6 is 2024.
    else if (framework == "deepspeed") {
        if (std::regex_search(v, m, std::regex(R"(^\s*v?0\.([0-9]+)(\.[0-9]+)*\s*$)"))) {
            out.deepSpeedMinor = std::stoi(m[1]);
            out.year = deepSpeedReleaseYear(out.deepSpeedMinor);
        }
    } else if (framework == "fsdp" || framework == "torchtitan") {
        if (std::regex_search(v, m, std::regex(R"(^\s*v?([12])\.([0-9]+)(\.[0-9]+)*\s*$)")))
            out.year = pytorchReleaseYear(std::stoi(m[1]), std::stoi(m[2]));
    }
    // Megatron-core releases: 0.1-0.4 in 2023, 0.5-0.9 in 2024, 0.10 and later from 2025 (GitHub release dates).
    else if (std::regex_search(v, m, std::regex(R"((?:core[_ r]*|^\s*v?)0\.([0-9]+))"))) {
        const int minor = std::stoi(m[1]);
        out.year = minor <= 4 ? 2023 : minor <= 9 ? 2024 : 2025;
    }
    // Megatron-LM v2.x (2020-21), v3.x (2022).
    else if (std::regex_search(v, m, std::regex(R"(^\s*v?([23])\.[0-9])"))) out.year = m[1] == "2" ? 2021 : 2022;
    return out;
}

// The frameworks whose release numbers read alike: DeepSpeed's, PyTorch's (fsdp, torchtitan), Megatron's (the rest).
int releaseFamily(const std::string& framework) {
    return framework == "deepspeed" ? 1 : framework == "fsdp" || framework == "torchtitan" ? 2 : 0;
}

// One cache per release family, looked up by the version text itself: no string is built on the search's hot path.
const VersionReading& versionReading(const std::string& framework, const std::string& v) {
    thread_local std::unordered_map<std::string, VersionReading> cache[3];
    auto& family = cache[releaseFamily(framework)];
    auto it = family.find(v);
    if (it == family.end()) it = family.emplace(v, readVersion(framework, v)).first;
    return it->second;
}

} // namespace

int deepSpeedReleaseYear(int minor) {
    return minor <= 3 ? 2020 : minor <= 5 ? 2021 : minor <= 7 ? 2022 : minor <= 12 ? 2023 : minor <= 16 ? 2024 : 2025;
}
int pytorchReleaseYear(int major, int minor) {
    if (major <= 1) return minor <= 7 ? 2020 : minor <= 10 ? 2021 : 2022;
    return minor <= 1 ? 2023 : minor <= 5 ? 2024 : minor <= 9 ? 2025 : 2026;
}

std::optional<std::pair<int, int>> containerYearMonth(const std::string& v) { return versionReading("", v).containerYm; }

int frameworkYear(const FrameworkSettings& f) { return versionReading(f.name, f.version).year; }

bool frameworkVersionDated(const std::string& framework, const std::string& version) {
    const VersionReading& r = versionReading(framework, version);
    return r.year > 0 || r.containerYm.has_value();
}

std::string frameworkVersionProblem(const std::string& framework, const std::string& version) {
    const std::string release = framework == "deepspeed"                          ? "a DeepSpeed release (0.6.0)"
                                : framework == "fsdp" || framework == "torchtitan" ? "a PyTorch release (2.1)"
                                                                                   : "a Megatron-core release (core_r0.9.0)";
    return "no date can be read from \"" + version + "\" for " + framework + ": give a year (2024), a NeMo or NGC container " +
           "(24.05) or " + release + "; the framework's defaults follow its date";
}

std::string attentionKernelDefaultOf(const FrameworkSettings& f) {
    if (f.name != "nemo") return "";
    const auto ym = containerYearMonth(f.version);
    return ym && *ym >= std::make_pair(2024, 1) && *ym <= std::make_pair(2024, 7) ? "flash2" : "";
}

NcclGeneration ncclGenerationOf(const FrameworkSettings& f) {
    NcclGeneration g;
    if (const auto ym = containerYearMonth(f.version)) {
        const int at = ym->first * 100 + ym->second;
        g.cuMem = at >= 202310;
        g.connectsPerAlgorithm = at >= 202407;
        return g;
    }
    const int year = frameworkYear(f);
    if (year == 0) return g;
    g.cuMem = year >= 2024;
    g.connectsPerAlgorithm = year >= 2025;
    return g;
}

namespace {
// Megatron-LM keeps bf16 models' main gradients in fp32 (arguments.py forces --accumulate-allreduce-grads-in-fp32
// for --bf16), and so does NeMo's base configuration (optim.grad_sync_dtype fp32). NVIDIA's published NeMo
// performance runs reduce them in bf16: the launcher's H100 performance examples set
// optim.grad_sync_dtype=bf16 from April 2024 (NeMo-Framework-Launcher e743722a, examples/training/*/h100/*.sh),
// NeMo 2's performance scripts grad_reduce_in_fp32 = False (scripts/performance/helpers.py
// set_precision_configs). NeMo's defaults in tessel are its performance recipes', as for its overlaps.
// Fused kernels: torchtitan's models run their norms, rotary embedding and SwiGLU as eager PyTorch ops
// (models/norms.py RMSNorm, models/llama/model.py apply_rotary_emb and FeedForward) unless training.compile, off in
// its shipped train_configs. Megatron-LM ran its attention's scale, mask and softmax, its loss and its layout
// copies as PyTorch ops until "Various speed optimizations" (51a2e6b0ff, 2020-09-11) brought the fused
// scale-mask-softmax, bias-GeLU and bias-dropout-add kernels: a Megatron-LM of 2019 runs eager.
bool fusedKernelsDefault(const FrameworkSettings& f) {
    if (f.name == "torchtitan") return false;
    const int year = frameworkYear(f);
    return !(f.name == "megatron" && year > 0 && year <= 2019);
}

bool gradReduceInFp32Default(const FrameworkSettings& f) {
    if (f.name != "nemo") return true;
    const int year = frameworkYear(f);
    return year != 0 && year < 2024;
}

// NeMo 2 (containers from 24.09) builds its FP8 precision plugins with FP8 parameters: bf16_with_fp8_mixed() sets
// fp8_params = True (NeMo 3e251a0418, Sept 2024; later fp8_param_gather = True), as do Megatron-Bridge's FP8
// configs (training/mixed_precision.py). NeMo 1's launcher examples (24.07 and before) leave it off but for its
// Mixtral and Grok recipes. Megatron-LM: --fp8-param-gather is off unless given; so is FP8 gathering in PyTorch FSDP.
// torchtitan built torch.optim.AdamW with fused = job_config.optimizer.fused (default false) and foreach = not
// fused (torchtitan/optimizer.py at 9dec370, 2024-12) until #881 (2025-02-24) made "fused" the default; a year is
// all a version says here, so 2025 counts as fused.
bool foreachOptimizerDefault(const FrameworkSettings& f) {
    if (f.name != "torchtitan") return false;
    const int year = frameworkYear(f);
    return year > 0 && year <= 2024;
}

// NeMo's optimizers (storeParamRemaindersOf in framework.hpp has the sources): NeMo 1's Apex
// DistributedFusedAdam through container 24.12, Megatron-core's precision-aware optimizer for bf16 runs from 25.07.
bool storeParamRemaindersDefault(const FrameworkSettings& f, bool fp8) {
    if (f.name != "nemo") return false;
    if (f.version.empty()) return !fp8;
    if (const auto ym = containerYearMonth(f.version)) {
        if (*ym <= std::make_pair(2024, 12)) return true;
        return *ym >= std::make_pair(2025, 7) && !fp8;
    }
    const int year = frameworkYear(f);
    return year != 0 && year <= 2024 ? true : !fp8;
}

bool fp8ParamGatherDefault(const FrameworkSettings& f) {
    // torchtitan's float8 guide (docs/float8.md, 9dec370) launches FP8 training with
    // --float8.enable_fsdp_float8_all_gather: FSDP2 casts each Float8Linear weight shard to FP8 before gathering.
    if (f.name == "torchtitan") return true;
    if (f.name != "nemo") return false;
    if (f.version.empty()) return true;
    if (const auto ym = containerYearMonth(f.version)) return *ym >= std::make_pair(2024, 9);
    const int year = frameworkYear(f);
    return year == 0 || year >= 2025;
}
} // namespace

bool pipelineScatterGatherOf(const FrameworkSettings& f, int tp, bool sequenceParallel) {
    if (tp < 2 || sequenceParallel) return false;
    if (f.name == "deepspeed") return true;
    if (f.name != "megatron") return false;
    const int year = frameworkYear(f);
    return year >= 2021 && year <= 2022;
}

bool deepSpeedBf16OptimizerOf(const FrameworkSettings& f, int pp, int zeroStage, int weightBytes, int gradBytes) {
    return f.name == "deepspeed" && pp > 1 && zeroStage < 2 && weightBytes == 2 && gradBytes == 4;
}

double gradAccumulationBytesPerParameter(const FrameworkSettings& f, int pp, int zeroStage, int zeroShards,
                                         int microBatches, int weightBytes, int accumulateBytes, bool autocast) {
    const double m = std::max(1, microBatches);
    const double w = weightBytes, g = accumulateBytes;
    // AccumulateGrad: the first micro-batch's gradient becomes .grad; each later one is added in place (reads
    // both, writes one).
    const double autograd = 3.0 * w * (m - 1.0) / m;
    const double shards = std::max(1, zeroShards);
    if (f.name == "fsdp" || f.name == "torchtitan") {
        // FSDP reduce-scatters every micro-batch's gradients and adds the new shard into the saved one
        // (torch.distributed.fsdp _runtime_utils _accumulate_sharded_grad; FSDP2 likewise).
        return 3.0 * g * (m - 1.0) / m / shards;
    }
    if (f.name == "megatron" || f.name == "nemo" || f.name == "megascale") {
        // Megatron-LM from 2022-02 (83b1e42f "gradient accumulation fusion", on by default where APEX's
        // fused_weight_gradient_mlp_cuda is built: every NGC container): the weight-gradient GEMM accumulates into
        // main_grad. Before it, the local DDP's hook ran param.main_grad.add_(param.grad) after every micro-batch's
        // backward (megatron/model/distributed.py, 2021), torch DDP left autograd to accumulate under no_sync.
        // Turned off (--no-gradient-accumulation-fusion), the GEMM writes a 16-bit .grad and Megatron-core's DDP
        // param hook runs param.main_grad.add_(param.grad.data) after it (distributed_data_parallel.py
        // _make_backward_post_hook), as the 2021 local DDP did.
        const int year = frameworkYear(f);
        const bool before = f.name == "megatron" && year > 0 && year < 2022;
        if (!before) return gradAccumulationFusionOf(f) ? 0.0 : 2.0 * g + w;
        if (f.ddpImpl.value_or("local") == "torch") return autograd;
        return 2.0 * g + w;
    }
    if (f.name == "deepspeed") {
        // ZeRO-2/3: each micro-batch's reduced partition is added to the fp32 partition (stage_1_and_2.py
        // averaged_gradients / stage3 fp32 partitioned grads).
        if (zeroStage >= 2) return (2.0 * 4.0 + w) / shards;
        // BF16_Optimizer: after every backward micro-batch the pipeline engine calls update_hp_grads, which runs
        // hp_grad.add_(lp.grad.to(fp32)) per parameter (bf16_optimizer.py, 2022 to today): the cast reads the bf16
        // gradient and writes an fp32 copy (w + 4), the add reads both fp32 tensors and writes one (3 x 4).
        // fp16 keeps 16-bit gradients: autograd's add.
        if (deepSpeedBf16OptimizerOf(f, pp, zeroStage, weightBytes, accumulateBytes)) return w + 4.0 + 3.0 * 4.0;
        return autograd;
    }
    // Generic: the best case, but for autocast over fp32 parameters, which is plain PyTorch's (HF Trainer,
    // Lightning, nanoGPT: autograd accumulates the fp32 .grad).
    return autocast ? autograd : 0.0;
}

double embeddingGradientBytesPerParameter(const FrameworkSettings& f, int pp, int zeroStage, int zeroShards,
                                          int microBatches, int weightBytes, int accumulateBytes, bool autocast) {
    const bool megatron = f.name == "megatron" || f.name == "nemo" || f.name == "megascale";
    const bool pytorch = megatron || f.name == "deepspeed" || f.name == "fsdp" || f.name == "torchtitan";
    if (!pytorch || f.lossInPlace.value_or(false)) return 0.0;
    const double zeroFill = weightBytes;
    const bool fused = megatron && gradAccumulationBytesPerParameter(f, pp, zeroStage, zeroShards, microBatches, weightBytes,
                                                                     accumulateBytes, autocast) == 0.0;
    return zeroFill + (fused ? 2.0 * accumulateBytes + weightBytes : 0.0);
}

FsdpCopyBytes fsdpCopyBytesPerParameter(const FrameworkSettings& f, int pp, int zeroStage, int zeroShards,
                                        int microBatches, bool reshardAfterForward, int gradBytes, int reduceBytes,
                                        int shardBytes, double gatherBytes) {
    FsdpCopyBytes out;
    const bool fsdp1 = f.name == "fsdp", fsdp2 = f.name == "torchtitan";
    if ((!fsdp1 && !fsdp2) || zeroStage < 2 || zeroShards < 2) return out;
    const double shards = zeroShards, g = gradBytes, r = reduceBytes, w = shardBytes, a = gatherBytes;
    const double gathers = zeroStage >= 3 && reshardAfterForward ? 2.0 : 1.0;
    const double shardBack = r != w ? (r + w) / shards : 0.0;
    // Per gather, on the gather's stream: the shards copied (cast) into the all-gather input.
    const double gatherIn = fsdp1 ? (a != w ? (w + a) / shards : 0.0) : (w + a) / shards;
    if (fsdp1) {
        // torch.distributed.fsdp (2023-24, what Composer ran): _use_low_precision_shard copies the fp32 shard to
        // param_dtype before every unshard; on the compute stream SplitWithSizesBackward concatenates the views'
        // gradients into the flat parameter's; _post_backward_hook, on the post-backward stream that then
        // reduce-scatters, casts it to reduce_dtype and the default reduce_scatter_hook divides it by the
        // gradient_predivide_factor (> 1 for world size >= 2), and the shard by the postdivide factor after.
        out.backward = 2.0 * g;
        out.reduceStream = (r != g ? g + r : 0.0) + 2.0 * r + 2.0 * r / shards + shardBack;
        out.gatherStream = gatherIn;
        return out;
    }
    // fully_shard: foreach_all_gather's copy-in on the all-gather's copy-in stream, foreach_all_gather_copy_out
    // (split_with_sizes_copy) on the compute stream, foreach_reduce's copy-in (chunk_cat into the reduce-scatter
    // input, cast to reduce_dtype) on the reduce-scatter stream.
    // Under torchtitan's pipelining a stage gathers once a step: its copy-out spread over the micro-batches.
    const bool once = fsdpGathersOncePerStep(f, pp, zeroStage);
    out.forward = 2.0 * a / (once ? std::max(1, microBatches) : 1.0);
    out.backward = once ? 0.0 : (gathers - 1.0) * 2.0 * a;
    out.reduceStream = g + r + shardBack;
    out.gatherStream = gatherIn;
    return out;
}

bool fsdpGathersOncePerStep(const FrameworkSettings& f, int pp, int zeroStage) {
    if (pp < 2 || zeroStage < 3) return false;
    // torchtitan's default under pipelining; generic's where the plan states reshard_after_forward false (the Llama
    // 3 paper's own FSDP, §3.3.2). FSDP1 frees after each backward and regathers the next forward's units.
    if (f.name == "torchtitan") return !f.reshardAfterForward.value_or(false);
    return f.name == "generic" && !f.reshardAfterForward.value_or(true);
}

bool fsdpReducesOncePerStep(const FrameworkSettings& f, int pp, int zeroStage) {
    return fsdpGathersOncePerStep(f, pp, zeroStage) ||
           ((f.name == "fsdp" || f.name == "torchtitan") && zeroStage >= 2 && !f.gradSyncEachMicroBatch.value_or(true));
}

double fsdpNoSyncGradBytes(const FrameworkSettings& f, const PrecisionRecipe& recipe) {
    return f.name == "torchtitan" ? recipe.gradReduceBytes() : recipe.paramGatherBytes();
}

bool torchPipeliningOf(const FrameworkSettings& f, int pp) { return f.name == "torchtitan" && pp > 1; }

RetainedStageOutputs torchPipeliningRetainedOutputsOf(const FrameworkSettings& f, int pp) {
    RetainedStageOutputs r;
    const int year = frameworkYear(f);
    if (!torchPipeliningOf(f, pp) || year == 0) return r;
    r.lastStage = year <= 2025;
    r.everyStage = year <= 2024;
    return r;
}

OverlapSettings resolveOverlap(const FrameworkSettings& f, bool interleaved, int zeroStage) {
    OverlapSettings o;
    const int year = frameworkYear(f);
    const bool current = year == 0;
    const std::string who = f.name + (year ? " " + std::to_string(year) : std::string(" (current)"));
    // Defaults, then the plan's stated values.
    if (f.name == "megatron" || f.name == "nemo" || f.name == "megascale") {
        // Megatron-LM: gradients are reduced after the backward unless DDP hooks (ddp_impl torch) or
        // --overlap-grad-reduce (megatron-core DDP, 2023-24, default off) say otherwise; the distributed
        // optimizer's parameter all-gather runs after the step unless --overlap-param-gather; TP collectives
        // block their GEMMs unless --tp-comm-overlap (Transformer Engine userbuffers); since v2.6 (2021) the
        // backward TP input-gradient collective runs asynchronously under the weight-gradient GEMM
        // (--async-tensor-model-parallel-allreduce, later always on); pipeline sends and receives block the
        // compute stream except in the interleaved schedule with --overlap-p2p-communication (store_true until
        // 2024, then on by default: --no-overlap-p2p-communication).
        const std::string ddp = f.ddpImpl.value_or("local");
        o.overlapGradReduce = ddp == "torch";
        o.overlapParamGather = false;
        o.tpCommOverlap = false;
        o.asyncTpGradReduce = current || year >= 2022;
        o.overlapP2pComm = interleaved && (current || year >= 2024);
        if (f.name == "nemo") {
            // NeMo's pre-training recipes switch the overlaps on (overlap_grad_reduce, overlap_param_gather,
            // tp_comm_overlap on Hopper, overlap_p2p_comm with the interleaved schedule).
            o.overlapGradReduce = o.overlapParamGather = o.tpCommOverlap = true;
            o.overlapP2pComm = interleaved;
        } else if (f.name == "megascale") {
            // MegaScale (Jiang et al. 2024, section 3.2): TP, PP and DP communication overlapped with compute.
            o.overlapGradReduce = o.overlapParamGather = o.tpCommOverlap = o.asyncTpGradReduce = o.overlapP2pComm = true;
        }
    } else if (f.name == "deepspeed") {
        // DeepSpeed ZeRO: overlap_comm defaults to true for stage 3 and false below; the pipeline engine's
        // sends and receives are blocking; stage 3 prefetches (stage3_prefetch_bucket_size).
        o.overlapGradReduce = deepSpeedOverlapCommOf(f, zeroStage);
        o.overlapParamGather = false;
        o.overlapP2pComm = false;
    } else if (f.name == "fsdp" || f.name == "torchtitan") {
        // PyTorch FSDP (1 and 2): each wrapped unit's gradients are reduce-scattered during backward, the
        // next unit's parameters gathered ahead (BACKWARD_PRE by default), resharded after forward for
        // FULL_SHARD; torch.distributed.pipelining posts its sends and receives asynchronously.
        o.overlapGradReduce = true;
        o.overlapP2pComm = true;
    }
    o.fusedKernels = fusedKernelsDefault(f);
    o.gradReduceInFp32 = gradReduceInFp32Default(f);
    o.fp8ParamGather = fp8ParamGatherDefault(f);
    o.foreachOptimizer = foreachOptimizerDefault(f);
    o.checkpointEarlyStop = f.name == "torchtitan";
    o.storeParamRemainders = storeParamRemaindersDefault(f, false);
    bool* resolved[] = {&o.overlapGradReduce, &o.overlapParamGather, &o.tpCommOverlap,    &o.asyncTpGradReduce, &o.overlapP2pComm,
                        &o.reshardAfterForward, &o.backwardPrefetch, &o.fusedKernels, &o.gradReduceInFp32, &o.fp8ParamGather,
                        &o.foreachOptimizer, &o.checkpointEarlyStop, &o.storeParamRemainders, &o.gradSyncEachMicroBatch};
    static_assert(sizeof(resolved) / sizeof(resolved[0]) == 14, "one resolved value per framework flag");
    for (size_t i = 0; i < frameworkFlags().size(); ++i) {
        const FrameworkFlag& flag = frameworkFlags()[i];
        if (f.*flag.member) *resolved[i] = *(f.*flag.member);
        else if (f.name != "generic")
            o.defaulted.push_back(std::string(flag.key) + " = " + (*resolved[i] ? "true" : "false") + " (" + who + " default)");
    }
    return o;
}

bool fusedKernelsOf(const FrameworkSettings& f) { return f.fusedKernels.value_or(fusedKernelsDefault(f)); }
bool gradReduceInFp32Of(const FrameworkSettings& f) { return f.gradReduceInFp32.value_or(gradReduceInFp32Default(f)); }
bool fp8ParamGatherOf(const FrameworkSettings& f) { return f.fp8ParamGather.value_or(fp8ParamGatherDefault(f)); }
bool foreachOptimizerOf(const FrameworkSettings& f) { return f.foreachOptimizer.value_or(foreachOptimizerDefault(f)); }
bool checkpointEarlyStopOf(const FrameworkSettings& f) { return f.checkpointEarlyStop.value_or(f.name == "torchtitan"); }
bool storeParamRemaindersOf(const FrameworkSettings& f, bool fp8) {
    return f.storeParamRemainders.value_or(storeParamRemaindersDefault(f, fp8));
}
std::string optimizerDtypeOf(const FrameworkSettings& f) { return f.optimizerDtype.value_or("fp32"); }
bool deepSpeedOverlapCommOf(const FrameworkSettings& f, int zeroStage) { return f.overlapGradReduce.value_or(zeroStage >= 3); }
bool deepSpeedContiguousGradientsOf(const FrameworkSettings& f, int zeroStage, bool offloadOptimizer) {
    if (offloadOptimizer) return true;
    const VersionReading& r = versionReading(f.name, f.version);
    const int minor = f.name == "deepspeed" ? r.deepSpeedMinor : -1;
    // ZeRO-1 on stage2's code with the engine's override: v0.4.4-v0.12 (years 2021-2023). v0.4.0-0.4.3 left it at
    // the then default, off, which the same minor covers.
    if (zeroStage == 1 && (minor >= 0 ? minor >= 4 && minor <= 12 : r.year >= 2021 && r.year <= 2023)) return false;
    if (f.contiguousGradients) return *f.contiguousGradients;
    return minor >= 0 ? minor >= 5 : r.year == 0 || r.year >= 2021;
}
bool deepSpeedAllReducesGradientsOf(const FrameworkSettings& f, int zeroStage, bool offloadOptimizer) {
    if (f.name != "deepspeed" || zeroStage < 1 || zeroStage > 2) return false;
    const VersionReading& r = versionReading(f.name, f.version);
    const bool stage1py = zeroStage == 1 && (r.deepSpeedMinor >= 0 ? r.deepSpeedMinor <= 3 : r.year > 0 && r.year <= 2020);
    return !stage1py && !deepSpeedContiguousGradientsOf(f, zeroStage, offloadOptimizer);
}
int64_t reduceBucketElementsOf(const FrameworkSettings& f) {
    return f.reduceBucketSize.value_or(f.name == "deepspeed" ? int64_t{500000000} : int64_t{40000000});
}
DeepSpeedStage3 deepSpeedStage3Of(const FrameworkSettings& f) {
    DeepSpeedStage3 d;
    d.maxLiveParameters = f.stage3MaxLiveParameters.value_or(d.maxLiveParameters);
    d.prefetchBucketSize = f.stage3PrefetchBucketSize.value_or(d.prefetchBucketSize);
    d.maxReuseDistance = f.stage3MaxReuseDistance.value_or(d.maxReuseDistance);
    return d;
}
const std::vector<std::string>& crossEntropyKinds() {
    static const std::vector<std::string> kinds = {"fused", "unfused", "te", "eager", "flash_attn", "compiled", "fused_linear", "eager_16bit"};
    return kinds;
}
std::string crossEntropyOf(const FrameworkSettings& f) {
    if (f.crossEntropy) return *f.crossEntropy;
    if (f.lossInPlace.value_or(false)) return "te"; // tessel's executor, whatever framework the plan names
    if (!fusedKernelsOf(f)) return "eager";
    if (f.name == "torchtitan") {
        // torchtitan's loss, cross_entropy(pred.float()), ran outside the compiled blocks in 2024 (train.py at
        // 9dec370, 2024-12: "compiling loss function causes CUDA errors, turning off for now"; it had been compiled
        // from e10cb9494, 2024-10-22, until e8977b007, 2024-12-18); from bbb1b616e (2025-04-02)
        // build_cross_entropy_loss compiles it under training.compile (compile.components "loss" since 177b050ca).
        // A year is all a version says here: 2025 on, and an unstated version, count as compiled (January to March
        // 2025 ran it eager, and late 2024 compiled: a plan states cross_entropy to say so).
        const int year = frameworkYear(f);
        return year == 0 || year >= 2025 ? "compiled" : "eager";
    }
    if (f.name == "nemo") {
        if (f.version.empty()) return "te";
        if (const auto ym = containerYearMonth(f.version)) return *ym >= std::make_pair(2025, 9) ? "te" : "fused";
        const int year = frameworkYear(f);
        return year == 0 || year >= 2026 ? "te" : "fused";
    }
    // Megatron-LM (and Megatron-DeepSpeed, its fork) run the vocab-parallel loss unfused unless
    // --cross-entropy-loss-fusion, which defaults to false (model_parallel_config.py, 2024-2026); NeMo's configs set it.
    if (f.name == "megatron" || f.name == "deepspeed") return "unfused";
    return "fused";
}

bool eagerLossOf(const FrameworkSettings& f) { return crossEntropyOf(f) == "eager"; }

std::string moeDispatcherOf(const FrameworkSettings& f) { return f.moeDispatcher.value_or("alltoall"); }
std::string halfDtypeOf(const FrameworkSettings& f) { return f.halfDtype.value_or("bf16"); }
const std::vector<std::string>& fp8RecipeKinds() {
    static const std::vector<std::string> kinds = {"delayed", "tensorwise", "mxfp8", "blockwise"};
    return kinds;
}
std::string fp8RecipeOf(const FrameworkSettings& f) { return f.fp8Recipe.value_or("delayed"); }
bool moeA2aOverlapOf(const FrameworkSettings& f) { return f.moeA2aOverlap.value_or(false); }
bool fp4ParamGatherOf(const FrameworkSettings& f) { return f.fp4ParamGather.value_or(false); }
bool nvfp4RhtOf(const FrameworkSettings& f) { return f.nvfp4Rht.value_or(true); }
bool teOpFuserOf(const FrameworkSettings& f) { return f.teOpFuser.value_or(false); }
bool nvfp4StochasticRoundingOf(const FrameworkSettings& f) { return f.nvfp4StochasticRounding.value_or(true); }
bool moeSharedExpertOverlapOf(const FrameworkSettings& f) { return f.moeSharedExpertOverlap.value_or(false); }
bool torchAsyncTpOf(const FrameworkSettings& f) { return f.name == "torchtitan"; }
bool dtensorTpOf(const FrameworkSettings& f) { return f.name == "torchtitan" || f.name == "fsdp"; }
bool parallelResidualReducesOnceOf(const FrameworkSettings& f, int pp) { return f.name == "deepspeed" && pp > 1; }
int trainMetricLossesOf(const FrameworkSettings& f) { return f.trainMetricLosses.value_or(0); }
bool launchBlockingOf(const FrameworkSettings& f) { return f.launchBlocking.value_or(false); }
bool gradAccumulationFusionOf(const FrameworkSettings& f) { return f.gradAccumulationFusion.value_or(true); }
bool ncclUbOf(const FrameworkSettings& f) { return f.ncclUb.value_or(false); }
bool kvReplicationOf(const FrameworkSettings& f) { return f.kvReplication.value_or(false); }
bool repeatKvOf(const FrameworkSettings& f) {
    if (f.repeatKv) return *f.repeatKv;
    if (f.name == "torchtitan") {
        const int year = frameworkYear(f);
        return year > 0 && year < 2026;
    }
    return !fusedKernelsOf(f);
}
bool lossParallelOf(const FrameworkSettings& f) { return f.lossParallel.value_or(true); }
bool vocabParallelEmbeddingOf(const FrameworkSettings& f) { return f.vocabParallelEmbedding.value_or(true); }
bool logitsHeldThroughBackwardOf(const FrameworkSettings& f) {
    return f.logitsHeldThroughBackward.value_or(trainMetricLossesOf(f) > 0);
}
bool compileWholeModelOf(const FrameworkSettings& f) { return f.compileWholeModel.value_or(false); }

bool interleavedAllForwardsFirstWhenMEqualsP(const FrameworkSettings& f) {
    if (f.name != "megatron" && f.name != "nemo" && f.name != "megascale") return false;
    if (const auto ym = containerYearMonth(f.version)) return *ym < std::make_pair(2024, 12);
    const int year = frameworkYear(f);
    return year != 0 && year <= 2024;
}

bool expertRankGeneratorOf(const FrameworkSettings& f) {
    if (f.name == "generic" || f.name == "torchtitan") return true;
    if (f.name != "megatron" && f.name != "nemo") return false;
    if (const auto ym = containerYearMonth(f.version)) return *ym >= std::make_pair(2024, 12);
    const int year = frameworkYear(f);
    return year == 0 || year >= 2025;
}

// The plan keys of DeepSpeed ZeRO-3's coordinator limits, DeepSpeed's own config names.
const std::vector<std::pair<const char*, std::optional<int64_t> FrameworkSettings::*>>& stage3Keys() {
    static const std::vector<std::pair<const char*, std::optional<int64_t> FrameworkSettings::*>> keys = {
        {"stage3_max_live_parameters", &FrameworkSettings::stage3MaxLiveParameters},
        {"stage3_prefetch_bucket_size", &FrameworkSettings::stage3PrefetchBucketSize},
        {"stage3_max_reuse_distance", &FrameworkSettings::stage3MaxReuseDistance}};
    return keys;
}

FrameworkSettings parseFrameworkSettings(ObjectReader& r) {
    FrameworkSettings f;
    f.name = r.optEnum("framework", "generic", frameworkNames());
    f.version = r.optString("framework_version", "");
    if (!f.version.empty() && !frameworkVersionDated(f.name, f.version))
        r.problems().add(r.pointer("framework_version"), frameworkVersionProblem(f.name, f.version));
    if (r.has("ddp_impl")) f.ddpImpl = r.optEnum("ddp_impl", "local", {"local", "torch"});
    if (r.has("cross_entropy"))
        f.crossEntropy = r.optEnum("cross_entropy", "fused", crossEntropyKinds());
    if (r.has("optimizer_dtype")) f.optimizerDtype = r.optEnum("optimizer_dtype", "fp32", {"fp32", "bf16"});
    if (r.has("moe_dispatcher")) f.moeDispatcher = r.optEnum("moe_dispatcher", "alltoall", {"alltoall", "flex"});
    if (r.has("half_dtype")) f.halfDtype = r.optEnum("half_dtype", "bf16", {"bf16", "fp16"});
    if (r.has("fp8_recipe")) f.fp8Recipe = r.optEnum("fp8_recipe", "delayed", fp8RecipeKinds());
    if (r.has("moe_a2a_overlap")) f.moeA2aOverlap = r.optBool("moe_a2a_overlap", false);
    if (r.has("fp4_param_gather")) f.fp4ParamGather = r.optBool("fp4_param_gather", false);
    if (r.has("nvfp4_rht")) f.nvfp4Rht = r.optBool("nvfp4_rht", true);
    if (r.has("nvfp4_stochastic_rounding")) f.nvfp4StochasticRounding = r.optBool("nvfp4_stochastic_rounding", true);
    if (r.has("te_op_fuser")) f.teOpFuser = r.optBool("te_op_fuser", false);
    if (r.has("moe_shared_expert_overlap")) f.moeSharedExpertOverlap = r.optBool("moe_shared_expert_overlap", false);
    if (r.has("reduce_bucket_size")) f.reduceBucketSize = r.optInt("reduce_bucket_size", 500000000, 1, int64_t{1} << 40);
    for (const auto& [key, member] : stage3Keys())
        if (r.has(key)) f.*member = r.optInt(key, 0, 0, int64_t{1} << 50);
    for (const FrameworkFlag& flag : frameworkFlags())
        if (r.has(flag.key)) f.*flag.member = r.optBool(flag.key, false);
    if (r.has("loss_in_place")) f.lossInPlace = r.optBool("loss_in_place", false);
    if (r.has("dropout_masks_kept")) f.dropoutMasksKept = r.optBool("dropout_masks_kept", true);
    if (r.has("attention_unpad")) f.attentionUnpad = r.optBool("attention_unpad", false);
    if (r.has("train_metric_losses")) f.trainMetricLosses = static_cast<int>(r.optInt("train_metric_losses", 0, 0, 16));
    if (r.has("launch_blocking")) f.launchBlocking = r.optBool("launch_blocking", false);
    if (r.has("contiguous_gradients")) f.contiguousGradients = r.optBool("contiguous_gradients", true);
    if (r.has("gradient_accumulation_fusion")) f.gradAccumulationFusion = r.optBool("gradient_accumulation_fusion", true);
    if (r.has("nccl_ub")) f.ncclUb = r.optBool("nccl_ub", false);
    if (r.has("kv_replication")) f.kvReplication = r.optBool("kv_replication", false);
    if (r.has("repeat_kv")) f.repeatKv = r.optBool("repeat_kv", false);
    if (r.has("loss_parallel")) f.lossParallel = r.optBool("loss_parallel", true);
    if (r.has("vocab_parallel_embedding")) f.vocabParallelEmbedding = r.optBool("vocab_parallel_embedding", true);
    if (r.has("logits_held_through_backward")) f.logitsHeldThroughBackward = r.optBool("logits_held_through_backward", false);
    if (r.has("compile_whole_model")) f.compileWholeModel = r.optBool("compile_whole_model", false);
    return f;
}

void frameworkToJson(const FrameworkSettings& f, nlohmann::json& plan) {
    plan["framework"] = f.name;
    if (!f.version.empty()) plan["framework_version"] = f.version;
    if (f.ddpImpl) plan["ddp_impl"] = *f.ddpImpl;
    if (f.crossEntropy) plan["cross_entropy"] = *f.crossEntropy;
    if (f.optimizerDtype) plan["optimizer_dtype"] = *f.optimizerDtype;
    if (f.moeDispatcher) plan["moe_dispatcher"] = *f.moeDispatcher;
    if (f.halfDtype) plan["half_dtype"] = *f.halfDtype;
    if (f.fp8Recipe) plan["fp8_recipe"] = *f.fp8Recipe;
    if (f.moeA2aOverlap) plan["moe_a2a_overlap"] = *f.moeA2aOverlap;
    if (f.fp4ParamGather) plan["fp4_param_gather"] = *f.fp4ParamGather;
    if (f.nvfp4Rht) plan["nvfp4_rht"] = *f.nvfp4Rht;
    if (f.nvfp4StochasticRounding) plan["nvfp4_stochastic_rounding"] = *f.nvfp4StochasticRounding;
    if (f.teOpFuser) plan["te_op_fuser"] = *f.teOpFuser;
    if (f.moeSharedExpertOverlap) plan["moe_shared_expert_overlap"] = *f.moeSharedExpertOverlap;
    if (f.reduceBucketSize) plan["reduce_bucket_size"] = *f.reduceBucketSize;
    for (const auto& [key, member] : stage3Keys())
        if (f.*member) plan[key] = *(f.*member);
    for (const FrameworkFlag& flag : frameworkFlags())
        if (f.*flag.member) plan[flag.key] = *(f.*flag.member);
    if (f.lossInPlace) plan["loss_in_place"] = *f.lossInPlace;
    if (f.dropoutMasksKept) plan["dropout_masks_kept"] = *f.dropoutMasksKept;
    if (f.attentionUnpad) plan["attention_unpad"] = *f.attentionUnpad;
    if (f.trainMetricLosses) plan["train_metric_losses"] = *f.trainMetricLosses;
    if (f.launchBlocking) plan["launch_blocking"] = *f.launchBlocking;
    if (f.contiguousGradients) plan["contiguous_gradients"] = *f.contiguousGradients;
    if (f.gradAccumulationFusion) plan["gradient_accumulation_fusion"] = *f.gradAccumulationFusion;
    if (f.ncclUb) plan["nccl_ub"] = *f.ncclUb;
    if (f.kvReplication) plan["kv_replication"] = *f.kvReplication;
    if (f.repeatKv) plan["repeat_kv"] = *f.repeatKv;
    if (f.lossParallel) plan["loss_parallel"] = *f.lossParallel;
    if (f.vocabParallelEmbedding) plan["vocab_parallel_embedding"] = *f.vocabParallelEmbedding;
    if (f.logitsHeldThroughBackward) plan["logits_held_through_backward"] = *f.logitsHeldThroughBackward;
    if (f.compileWholeModel) plan["compile_whole_model"] = *f.compileWholeModel;
}

} // namespace tessel
