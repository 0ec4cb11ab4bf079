// Reads a published record's system and plan (runs.json schema) into a tessel cluster and plan, step by step:
// the GPU's preset in the record's shape, parallel degrees and batches, the pipeline, the framework's overlap
// settings, precision and sharding, the attention kernel, recompute. What the record does not state is an assumption;
// a plan tessel cannot run is a refusal that names the field.
#include "validation_plan.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <regex>

namespace tessel::sim::detail {

namespace {
using namespace prose;

// One record's reading in progress: what each step reads from the record and writes into the case.
struct Reading {
    const nlohmann::json& rec;
    const std::string& ptr;
    ValidationCase& c;
    std::string& refusal;
    const nlohmann::json sys;  // the record's "system" (an empty object when absent)
    const nlohmann::json pl;   // its "plan"
    const std::string source;  // its source and source_url, for the year and the framework
    const std::string framework;
    int64_t world = 0;              // GPUs in all (readCluster)
    bool microBatchAssumed = false; // one micro-batch a step, the framework's default (readBatch)
    // What the record did not state and tessel took, listed with the case.
    void assume(std::string what) { c.assumptions.push_back(std::move(what)); }
};

// A pipeline schedule the record names besides 1F1B and its interleaved form: GPipe (all forwards, then all
// backwards: "fill-drain", torchtitan's GPipe) and zero bubble (ZB-H1, torchtitan's ZBVZeroBubble and
// InterleavedZeroBubble) are schedules tessel simulates, without virtual stages; any other (DualPipe, LoopedBFS)
// keeps the 1F1B reading, and the assumption says so. `text` is the named schedule with the record's techniques,
// `named` the schedule keys alone.
void readNamedSchedule(const std::string& text, const std::string& named, Plan& plan, Reading& r) {
    if (plan.pp < 2) return;
    const bool gpipe = contains(text, "gpipe") || contains(text, "fill-drain") || contains(text, "fill drain") ||
                       contains(text, "all-forward-all-backward") || contains(text, "all forward all backward");
    const bool zeroBubble = contains(text, "zero bubble") || contains(text, "zero-bubble") ||
                            contains(text, "zerobubble") || contains(text, "zb-h1") || contains(text, "zbv") ||
                            contains(text, "zb-v") || contains(text, "zbh1");
    const std::string shown = [&] {
        size_t a = named.find_first_not_of(' '), b = named.find_last_not_of(' ');
        return a == std::string::npos ? std::string() : named.substr(a, b - a + 1);
    }();
    if (gpipe || zeroBubble) {
        const char* which = gpipe ? "GPipe" : "zero bubble (ZB-H1)";
        if (plan.vpp > 1) {
            r.assume(std::string(which) + " schedule with " + std::to_string(plan.vpp) +
                   " virtual stages: tessel simulates it without them; read as interleaved 1F1B");
        } else {
            plan.schedule = gpipe ? Schedule::Gpipe : Schedule::ZeroBubble;
            r.assume(std::string("pipeline schedule read as ") + which);
        }
    } else if (!shown.empty() && !contains(shown, "1f1b") && !contains(shown, "interleav") &&
               !contains(shown, "one-forward") && !contains(shown, "one forward") && !contains(shown, "pipedream")) {
        r.assume("pipeline schedule \"" + shown + "\" is not one tessel simulates: read as " +
               (plan.vpp > 1 ? std::string("interleaved 1F1B") : std::string("1F1B")));
    }
}

// The cluster: the GPU's preset (its figures and their sources live in scenarios/clusters) in the record's
// shape (GPUs per node, nodes) and with its inter-node link.
bool readCluster(Reading& r) {
    const nlohmann::json& sys = r.sys;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    // Cluster: the GPU's preset (its figures and their sources live in scenarios/clusters), the record's shape.
    const GpuChoice gpu = gpuPreset(text(sys, "gpu"));
    if (gpu.preset.empty()) {
        refusal = ptr + "/system/gpu: \"" + text(sys, "gpu") + "\" is not a GPU tessel has figures for" +
                  (gpu.note.empty() ? "" : " (" + gpu.note + ")");
        return false;
    }
    if (!gpu.note.empty()) r.assume(gpu.note);
    ClusterConfig cluster = loadClusterRef(gpu.preset, ptr + "/system/gpu");
    if (gpu.nvlinkBytesPerSecond > 0.0) cluster.intraNode.bandwidthBytesPerSecond = gpu.nvlinkBytesPerSecond;
    if (const GpuPartMemory part = gpuPartMemory(text(sys, "gpu")); !part.name.empty()) {
        cluster.gpu.name = part.name;
        cluster.gpu.memoryBytes = part.memoryBytes;
        cluster.gpu.hbmBytesPerSecond = part.hbmBytesPerSecond;
    }
    const int64_t most = PlanLimits::degree; // GPUs in all, a node's and nodes: as many as a data-parallel degree
    const int64_t total = count(sys, "total_gpus", 1, most, ptr + "/system", refusal).value_or(0);
    const int64_t statedPerNode = count(sys, "gpus_per_node", 1, most, ptr + "/system", refusal).value_or(0);
    int64_t perNode = statedPerNode;
    if (perNode <= 0) {
        perNode = cluster.gpusPerNode;
        if (gpu.nvlinkDomainGpus == 0) r.assume("gpus_per_node not stated: " + std::to_string(perNode) + " (" + gpu.preset + ")");
    }
    int64_t nodes = count(sys, "nodes", 1, most, ptr + "/system", refusal).value_or(0);
    if (!refusal.empty()) return false;
    int64_t world = total > 0 ? total : nodes * perNode;
    if (world > most) {
        refusal = ptr + "/system/nodes: " + std::to_string(nodes) + " nodes of " + std::to_string(perNode) + " GPUs are more than " +
                  std::to_string(most) + " GPUs";
        return false;
    }
    if (world <= 0) {
        refusal = ptr + "/system/total_gpus: neither total_gpus nor nodes is stated";
        return false;
    }
    if (gpu.nvlinkDomainGpus > 0) {
        // A rack-scale NVLink domain: tessel's node is the domain, whatever the record calls a node (a GB200
        // compute tray holds 4). A job that does not fill whole racks takes the largest share of one that divides
        // it (a 256-GPU job as 4 x 64; schedulers place such jobs in equal NVLink partitions).
        int64_t domain = std::min<int64_t>(gpu.nvlinkDomainGpus, world);
        while (world % domain != 0) --domain;
        if (domain != perNode)
            r.assume("NVLink domain of " + std::to_string(domain) + " GPUs (" + gpu.preset + ": " +
                     std::to_string(gpu.nvlinkDomainGpus) + " a rack" +
                     (statedPerNode > 0 ? ", not the " + std::to_string(statedPerNode) + " a node the record counts" : "") +
                     (domain < std::min<int64_t>(gpu.nvlinkDomainGpus, world) ? "; the job does not fill whole racks" : "") + ")");
        perNode = domain;
    }
    if (perNode > world) perNode = world;
    nodes = (world + perNode - 1) / perNode;
    if (nodes * perNode != world) {
        refusal = ptr + "/system/total_gpus: " + std::to_string(world) + " GPUs do not fill nodes of " + std::to_string(perNode);
        return false;
    }
    cluster.gpusPerNode = static_cast<int>(perNode);
    cluster.nodes = static_cast<int>(nodes);
    std::string how;
    const double inter = interNodeBytesPerSecond(text(sys, "inter_node_link"), cluster.gpusPerNode, how);
    if (inter > 0.0) {
        // The record's link, not the preset's name for its own (Jean Zay's 4 Omni-Path ports per node are not a
        // DGX's eight InfiniBand HCAs): its bandwidth is the record's; latency and protocol stay the preset's.
        if (std::abs(inter - cluster.interNode.bandwidthBytesPerSecond) > 1e-6 * inter) {
            char rate[64];
            std::snprintf(rate, sizeof rate, "%.2f GB/s per GPU", inter / 1e9);
            cluster.interNode.name = text(sys, "inter_node_link") + " (" + rate + ", as the record states)";
        }
        cluster.interNode.bandwidthBytesPerSecond = inter;
        if (contains(how, "one NIC per GPU")) r.assume("inter-node link read as " + how);
    } else if (nodes > 1) {
        r.assume("inter-node link not stated: " + cluster.interNode.name + " (" + gpu.preset + ")");
    }
    c.scenario.cluster = cluster;
    c.scenario.name = c.id;
    r.world = world;
    return true;
}

// Parallel degrees, the global batch and the micro-batch: stated, implied by the GPU count, or the framework's
// default.
bool readBatch(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    const std::string& framework = r.framework;
    const int64_t world = r.world;
    // Plan.
    Plan& plan = c.scenario.plan;
    using L = PlanLimits;
    const std::string where = ptr + "/plan";
    plan.tp = static_cast<int>(count(pl, "tp", 1, L::degree, where, refusal).value_or(1));
    plan.pp = static_cast<int>(count(pl, "pp", 1, L::degree, where, refusal).value_or(1));
    plan.cp = static_cast<int>(count(pl, "cp", 1, L::degree, where, refusal).value_or(1));
    plan.ep = static_cast<int>(count(pl, "ep", 1, L::degree, where, refusal).value_or(1));
    // Expert tensor parallelism (Megatron-core's expert_tensor_parallel_size; absent: tp). One that differs from tp
    // is MoE parallel folding.
    for (const char* key : {"etp", "expert_tensor_parallel_size"})
        if (pl.contains(key)) {
            const int etp = static_cast<int>(count(pl, key, 1, L::degree, where, refusal).value_or(0));
            if (etp != plan.tp) plan.etp = etp;
            break;
        }
    plan.vpp = static_cast<int>(count(pl, "vpp", 1, L::virtualStages, where, refusal).value_or(1));
    if (!refusal.empty()) return false;
    const int64_t modelRanks = static_cast<int64_t>(plan.tp) * plan.pp * plan.cp;
    if (world % modelRanks != 0) {
        refusal = ptr + "/plan: tp x pp x cp = " + std::to_string(modelRanks) + " does not divide the " +
                  std::to_string(world) + " GPUs";
        return false;
    }
    const int impliedDp = static_cast<int>(world / modelRanks);
    auto dp = integer(pl, "dp");
    if (!dp || *dp != impliedDp) {
        if (dp) r.assume("dp " + std::to_string(*dp) + " does not fill the " + std::to_string(world) + " GPUs with tp x pp x cp; dp = " + std::to_string(impliedDp));
        else r.assume("dp = GPUs / (tp x pp x cp) = " + std::to_string(impliedDp));
    }
    plan.dp = impliedDp;
    auto gb = count(pl, "global_batch", 1, L::globalBatch, where, refusal);
    if (!refusal.empty()) return false;
    if (!gb) {
        // A batch given in tokens (Meta's "Tokens/Batch", llm-foundry's "GlobalBatchSize (T)") is that many
        // sequences of the model's length when it divides.
        for (const char* key : {"global_batch_tokens", "tokens_per_batch", "global_batch_size_tokens", "batch_tokens"}) {
            const auto tokens = integer(pl, key);
            if (!tokens || *tokens <= 0) continue;
            if (*tokens % c.scenario.model.seqLen != 0) {
                refusal = ptr + "/plan/" + key + ": " + std::to_string(*tokens) + " tokens are not a whole number of " +
                          std::to_string(c.scenario.model.seqLen) + "-token sequences";
                return false;
            }
            gb = *tokens / c.scenario.model.seqLen;
            if (*gb > L::globalBatch) {
                refusal = ptr + "/plan/" + key + ": " + std::to_string(*gb) + " sequences are more than " +
                          std::to_string(L::globalBatch);
                return false;
            }
            r.assume("global_batch = " + std::string(key) + " / seq = " + std::to_string(*gb));
            break;
        }
    }
    if (!gb || *gb <= 0) {
        refusal = ptr + "/plan/global_batch: missing (nor a batch in tokens: global_batch_tokens)";
        return false;
    }
    plan.globalBatch = static_cast<int>(*gb);
    bool microBatchAssumed = false; // one micro-batch a step, read from the framework's default
    const auto mb = count(pl, "micro_batch", 1, L::microBatch, where, refusal);
    const auto ga = count(pl, "grad_accum", 1, L::globalBatch, where, refusal);
    if (!refusal.empty()) return false;
    if (mb) {
        plan.microBatch = static_cast<int>(*mb);
    } else if (ga && plan.globalBatch % (*ga * plan.dp) == 0) {
        plan.microBatch = static_cast<int>(plan.globalBatch / (*ga * plan.dp));
        r.assume("micro_batch = global_batch / (grad_accum x dp) = " + std::to_string(plan.microBatch));
    } else if (plan.pp == 1 && (framework == "fsdp" || framework == "torchtitan" || framework == "deepspeed") &&
               plan.globalBatch % plan.dp == 0) {
        // Without a pipeline these frameworks take one micro-batch a step unless told to accumulate (DeepSpeed's
        // gradient_accumulation_steps, Composer's device_train_microbatch_size, torchtitan's and plain training
        // loops' accumulation all default to none); 1 would multiply ZeRO-3's per-micro-batch gathers.
        plan.microBatch = plan.globalBatch / plan.dp;
        microBatchAssumed = true;
        r.assume("micro_batch not stated: global_batch / dp = " + std::to_string(plan.microBatch) + ", no gradient accumulation (" +
               framework + "'s default)");
    } else {
        plan.microBatch = 1;
        r.assume("micro_batch not stated: 1 (the Megatron-LM default)");
    }
    if (plan.globalBatch % (static_cast<int64_t>(plan.microBatch) * plan.dp) != 0) {
        refusal = ptr + "/plan/global_batch: " + std::to_string(plan.globalBatch) + " is not a multiple of micro_batch x dp = " +
                  std::to_string(static_cast<int64_t>(plan.microBatch) * plan.dp);
        return false;
    }
    r.microBatchAssumed = microBatchAssumed;
    return true;
}

// The pipeline: virtual stages, the schedule and the split of the layers over the stages.
bool readPipeline(Reading& r) {
    const nlohmann::json& rec = r.rec;
    const nlohmann::json& pl = r.pl;
    Plan& plan = r.c.scenario.plan;
    ModelConfig& model = r.c.scenario.model;
    // Megatron-LM's first/last-rank layer counts, under the names records use.
    int statedFirst = 0, statedLast = 0;
    for (const char* key : {"first_stage_layers", "num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"})
        if (auto v = count(pl, key, 1, model.layers, r.ptr + "/plan", r.refusal)) statedFirst = static_cast<int>(*v);
    for (const char* key : {"last_stage_layers", "num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"})
        if (auto v = count(pl, key, 1, model.layers, r.ptr + "/plan", r.refusal)) statedLast = static_cast<int>(*v);
    if (!r.refusal.empty()) return false;
    // The schedule a record names, under the keys records use (torchtitan's config: pipeline_parallel_schedule).
    const std::string namedSchedule = lower(text(pl, "schedule") + " " + text(pl, "pipeline_schedule") + " " +
                                            text(pl, "pp_schedule") + " " + text(pl, "pipeline_parallel_schedule"));
    const bool vppInferred = plan.pp > 1 && !integer(pl, "vpp");
    if (vppInferred) {
        // No virtual stages stated. A record that says its schedule is interleaved gets two layers per virtual
        // stage, the median of NVIDIA's published NeMo recipes (1-4: GPT-3 175B pp 8 vp 6, Llama 3 70B pp 4 vp 5,
        // Llama 3.1 405B pp 8 vp 8), where the layers (or the layers plus embedding and loss) split evenly and
        // the micro-batches divide by pp, as Megatron-LM's interleaved schedule needs; otherwise 1F1B. Stated
        // first/last-rank counts must leave the other ranks a whole number of layers per chunk.
        std::string sched = namedSchedule + " " + lower(text(pl, "techniques"));
        // The record's notes count where they say it and never deny it ("non-interleaved", "without interleaving"
        // anywhere in them leaves the notes out: a note that says both is no reading).
        const std::string notes = lower(text(rec, "notes"));
        if (contains(notes, "interleav") && !std::regex_search(notes, std::regex(R"((non|not|without|no)[- ]+interleav)")))
            sched += " " + notes;
        const int microBatches = plan.globalBatch / (plan.microBatch * plan.dp);
        auto fitsStated = [&](int cand) {
            if (statedFirst == 0 && statedLast == 0) return true;
            int rest = model.layers, ranks = plan.pp;
            if (statedFirst > 0) rest -= statedFirst, --ranks;
            if (statedLast > 0) rest -= statedLast, --ranks;
            return (statedFirst == 0 || statedFirst >= cand) && (statedLast == 0 || statedLast >= cand) &&
                   (ranks == 0 ? rest == 0 : rest > 0 && rest % (ranks * cand) == 0);
        };
        int v = 1;
        if (contains(sched, "interleav") && microBatches % plan.pp == 0) {
            for (int extra : {0, 2}) {
                for (int cand = (model.layers + extra) / (2 * plan.pp); cand >= 2 && v == 1; --cand)
                    if ((model.layers + extra) % (plan.pp * cand) == 0 && fitsStated(cand)) v = cand;
                if (v > 1) break;
            }
        }
        plan.vpp = v;
        if (v > 1)
            r.assume("interleaved schedule without a vpp: vpp = " + std::to_string(v) + " (about two layers per virtual stage, "
                   "the median of NVIDIA's published recipes)");
        else if (contains(sched, "interleav"))
            r.assume("interleaved schedule without a vpp, and no split of two layers per virtual stage fits: 1F1B");
        else
            r.assume("vpp not stated: 1 (no interleaving)");
    }
    plan.schedule = plan.vpp > 1 ? Schedule::Interleaved1F1B : Schedule::OneFOneB;
    readNamedSchedule(namedSchedule + " " + lower(text(pl, "techniques")), namedSchedule, plan, r);

    // Pipeline split: as stated (per-stage layers, or Megatron-LM's first/last-stage counts), else even where
    // pp x vpp divides the layers and, where it does not, what the frameworks do: the embedding and the output
    // layer + loss counted as one layer each (Megatron-LM --account-for-embedding/loss-in-pipeline-split,
    // DeepSpeed's "type:transformer|embedding" partition of BLOOM; Llama 3 405B's 7,8x14,7 is the same), or the
    // time-balanced split where the record says so (FORMULAS.md §5.4).
    if (pl.contains("pipeline_layers") && pl["pipeline_layers"].is_array()) {
        for (const auto& v : pl["pipeline_layers"])
            if (v.is_number_integer()) plan.pipelineLayers.push_back(v.get<int>());
    }
    plan.firstStageLayers = statedFirst;
    plan.lastStageLayers = statedLast;
    if (vppInferred && plan.vpp > 1 && (statedFirst % plan.vpp != 0 || statedLast % plan.vpp != 0)) {
        // The vpp is tessel's reading, not the record's: first/last-rank counts it does not divide are the
        // record's schedule, not Megatron-LM's rule (which would refuse them). Llama 3's 405B run "reduces one
        // Transformer layer each from the first and the last stages" under its interleaved schedule (Llama Team
        // 2024, arXiv:2407.21783 §3.3.2): the missing layer comes off the chunk with the embedding or the loss.
        const auto chunks = firstLastChunkLayers(model.layers, plan.pp, plan.vpp, statedFirst, statedLast);
        if (!chunks.empty()) {
            plan.pipelineLayers = chunks;
            plan.firstStageLayers = plan.lastStageLayers = 0;
            r.assume("first/last pipeline ranks as stated under the inferred vpp " + std::to_string(plan.vpp) +
                   ": the layers they lack come off the chunk with the embedding / the loss (" + pipelineSplitText(chunks) + ")");
        }
    }
    if (plan.pipelineLayers.empty() && plan.firstStageLayers == 0 && plan.lastStageLayers == 0 &&
        model.layers % (plan.pp * plan.vpp) != 0) {
        plan.pipelineSplit = contains(lower(text(pl, "pipeline_split")), "balanced") ? PipelineSplit::Balanced
                                                                                    : PipelineSplit::EndsAsLayers;
    }
    return true;
}

// The framework and the settings that decide overlap, the main-gradient dtype, compilation and llm-foundry's
// unpadded attention.
bool readFramework(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const std::string& source = r.source;
    const std::string& framework = r.framework;
    Plan& plan = r.c.scenario.plan;
    // Framework and the settings that decide overlap: stated in the record, else the framework's defaults for
    // the year of its software (docs/frameworks.md).
    if (!framework.empty()) {
        plan.framework.name = framework;
        const std::string stated = text(pl, "framework_version");
        const int swYear = softwareYear(source);
        plan.framework.version = !stated.empty() ? stated : swYear > 0 ? std::to_string(swYear) : "";
        if (stated.empty() && swYear > 0) r.assume(framework + " version taken as of " + std::to_string(swYear) + " (the source's date)");
    } else if (!text(pl, "framework").empty()) {
        r.assume("framework \"" + text(pl, "framework") + "\" is not one tessel has defaults for: every overlap tessel models (generic)");
    } else {
        r.assume("framework not stated: every overlap tessel models (generic)");
    }
    const std::string ddp = lower(text(pl, "ddp_impl"));
    if (contains(ddp, "torch")) plan.framework.ddpImpl = "torch";
    else if (contains(ddp, "local")) plan.framework.ddpImpl = "local";
    for (const FrameworkFlag& flag : frameworkFlags())
        if (auto v = boolean(pl, flag.key)) plan.framework.*flag.member = *v;
    // The main-gradient dtype under its frameworks' names: Megatron-LM's --grad-reduce-in-bf16 and
    // --accumulate-allreduce-grads-in-fp32, NeMo's optim.grad_sync_dtype, Megatron-core's grad_reduce_in_fp32.
    if (auto v = boolean(pl, "grad_reduce_in_bf16")) plan.framework.gradReduceInFp32 = !*v;
    if (auto v = boolean(pl, "accumulate_allreduce_grads_in_fp32")) plan.framework.gradReduceInFp32 = *v;
    for (const char* key : {"grad_sync_dtype", "grad_reduce_dtype"}) {
        const std::string dt = lower(text(pl, key));
        if (contains(dt, "bf16") || contains(dt, "bfloat16")) plan.framework.gradReduceInFp32 = false;
        else if (contains(dt, "fp32") || contains(dt, "float32")) plan.framework.gradReduceInFp32 = true;
    }
    // The optimizer state's dtype: NeMo 1's optim.dtype (Apex DistributedFusedAdam), as optimizer_dtype or optim_dtype.
    // A value tessel does not cost is said among the assumptions, not dropped unseen.
    for (const char* key : {"optimizer_dtype", "optim_dtype"}) {
        const std::string dt = lower(text(pl, key));
        if (contains(dt, "bf16") || contains(dt, "bfloat16")) plan.framework.optimizerDtype = "bf16";
        else if (contains(dt, "fp32") || contains(dt, "float32")) plan.framework.optimizerDtype = "fp32";
        else if (!dt.empty())
            r.assume(std::string(key) + " \"" + text(pl, key) + "\" is not a state dtype tessel costs (fp32, bf16): read as fp32");
    }
    // DeepSpeed's zero_optimization.reduce_bucket_size, as a record states it (elements).
    if (const auto bucket = number(pl, "reduce_bucket_size")) {
        if (*bucket >= 1) plan.framework.reduceBucketSize = static_cast<int64_t>(*bucket);
        else r.assume("reduce_bucket_size " + std::to_string(*bucket) + " is no bucket: the framework's default taken");
    }
    if (parseZero(pl) == 2 && framework == "fsdp") plan.framework.reshardAfterForward = false;
    // torch.compile fuses a block's elementwise ops (torchtitan compiles each transformer block).
    if (auto compiled = boolean(pl, "compile")) {
        if (!plan.framework.fusedKernels) plan.framework.fusedKernels = *compiled;
    } else if (contains(lower(text(pl, "techniques") + " " + text(pl, "framework")), "compile")) {
        if (!plan.framework.fusedKernels) plan.framework.fusedKernels = true;
    }

    // llm-foundry (MosaicML's MPT benchmarks): its flash_attn_fn gathers q, k, v into flash-attn's unpadded layout
    // and scatters the output back. Its other ops are one kernel each either way (LayerNorm, GELU), and its loss
    // is flash-attn's fused cross-entropy (modeling_mpt.py: loss_fn 'fused_crossentropy', the default since
    // 2023-05): no fp32 copy of the logits, so the plan keeps fused kernels, and its loss is that kernel
    // (cross_entropy flash_attn), not Megatron-core's with its fp32 softmax.
    // A record that states either is read as stated, whatever its framework.
    const bool llmFoundry = contains(lower(source), "llm-foundry") || contains(lower(text(pl, "framework")), "composer");
    if (auto v = boolean(pl, "attention_unpad")) plan.framework.attentionUnpad = *v;
    else if (llmFoundry) {
        plan.framework.attentionUnpad = true;
        r.assume("llm-foundry: flash attention on unpadded q, k, v (flash_attn_fn's bert_padding gather and scatter)");
    }
    // llm-foundry's benchmark runs checkpoint activations non-reentrantly (submit_benchmarks.py sets
    // fsdp_config.activation_checkpointing_reentrant = False), which under PyTorch >= 2.1 stops the recompute early
    // (pytorch#96866; FORMULAS.md §3.4). The H100 tables and the A100 80 GB table but its 70B rows ran PyTorch 2.1
    // (b2a43a147, 5e85bd62d); the A100 40 GB table and the 80 GB 70B rows PyTorch 1.13.1 (sweep.sh at 5f43bf160),
    // whose non-reentrant checkpoint reran the whole block (docs/validation.md, "Where the MPT tables come from").
    if (llmFoundry && !plan.framework.checkpointEarlyStop) {
        const std::string src = lower(source);
        const std::string model = lower(text(r.rec.value("model", nlohmann::json::object()), "name"));
        const bool torch21 = contains(src, "h100") || (contains(src, "a100 80gb") && !contains(model, "70b"));
        plan.framework.checkpointEarlyStop = torch21;
        r.assume(torch21 ? "llm-foundry: non-reentrant activation checkpointing (submit_benchmarks.py) under PyTorch 2.1, "
                           "whose recompute stops early (fc2 and the last residual not rerun)"
                         : "llm-foundry: non-reentrant activation checkpointing under PyTorch 1.13.1 (this table's "
                           "software), which reran the whole block");
    }
    const std::string loss = lower(text(pl, "cross_entropy"));
    const bool named = loss == "fused" || loss == "te" || loss == "eager" || loss == "flash_attn";
    if (named) plan.framework.crossEntropy = loss;
    else if (llmFoundry) {
        plan.framework.crossEntropy = "flash_attn";
        r.assume("llm-foundry: flash-attn's cross_entropy (loss_fn fused_crossentropy): the bf16 logits kept, their "
                 "gradient a new bf16 tensor, no fp32 softmax");
    }
    if (!named && !loss.empty())
        r.assume("cross_entropy \"" + text(pl, "cross_entropy") + "\" names no loss kernel tessel costs (fused, te, eager, "
                 "flash_attn): read as " + crossEntropyOf(plan.framework));
    // The MoE token dispatcher (Megatron-core's moe_token_dispatcher_type; DeepEP / HybridEP are the flex one's
    // backends). Unstated: the all-to-all.
    std::string dispatcher = lower(text(pl, "moe_dispatcher"));
    if (dispatcher.empty()) dispatcher = lower(text(pl, "moe_token_dispatcher_type"));
    if (dispatcher == "deepep" || dispatcher == "hybridep") dispatcher = "flex";
    if (dispatcher == "alltoall" || dispatcher == "flex") plan.framework.moeDispatcher = dispatcher;
    else if (!dispatcher.empty())
        r.assume("MoE dispatcher \"" + dispatcher + "\" is not one tessel costs (alltoall, flex): read as alltoall");
    return true;
}

// Precision recipe, ZeRO stage and hybrid sharding.
bool readPrecisionAndSharding(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const nlohmann::json& sys = r.sys;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    const std::string& framework = r.framework;
    Plan& plan = r.c.scenario.plan;
    // Precision.
    const std::string prec = lower(text(sys, "precision") + " " + text(pl, "precision"));
    plan.precision = "megatron";
    // 4-bit training (NVFP4, MXFP4) has no recipe: its GEMMs run at twice FP8's rate behind Hadamard transforms and
    // stochastic rounding, with some layers kept in BF16, none of which tessel costs. Refused, not read as BF16.
    if (contains(prec, "fp4") || contains(prec, "float4") || contains(prec, "int4")) {
        refusal = ptr + "/system/precision: \"" + text(sys, "precision") + text(pl, "precision") +
                  "\": 4-bit training is not modelled (tessel's recipes stop at FP8)";
        return false;
    }
    if (contains(prec, "fp8") || contains(prec, "float8")) {
        if (c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Fp8) && (framework == "torchtitan" || contains(prec, "torchao"))) {
            plan.precision = "fsdp_fp8";
            r.assume("FP8 as torchao runs it under FSDP2: FP8 GEMMs with dynamic scales, fp32 shards, no cached FP8 copies");
        } else if (c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Fp8)) {
            plan.precision = "fp8";
            r.assume("FP8 as Transformer Engine runs it: FP8 GEMMs, BF16 elsewhere, FP8 weight copies");
            if (contains(prec, "mx"))
                r.assume("MXFP8 read as FP8: its block scales (one byte per 32 elements) and both-direction casts are "
                         "costed as per-tensor FP8's cast and transpose");
        } else {
            r.assume("FP8 stated, but " + c.scenario.cluster.gpu.name + " has no FP8 tensor cores: read as BF16");
        }
    }
    else if (framework == "fsdp" || framework == "torchtitan") {
        // PyTorch FSDP keeps fp32 parameter shards (the master), gathers them as bf16 and reduces in fp32, or in
        // bf16 under Composer's 'PURE' mixed precision (reduce_dtype = param_dtype).
        plan.precision = contains(prec, "pure") ? "fsdp_pure" : "fsdp";
        if (prec.empty() || contains(prec, "not stated"))
            r.assume("precision not stated: FSDP mixed precision (fp32 shards, bf16 compute and gathers, fp32 reduction)");
    }
    else if (prec.empty() || contains(prec, "not stated")) r.assume("precision not stated: BF16 mixed precision with fp32 master weights and grads");

    // ZeRO / distributed optimizer.
    int zero = parseZero(pl);
    const auto distOpt = boolean(pl, "distributed_optimizer");
    if (zero < 0) {
        if (distOpt && *distOpt) zero = 1;
        else if (framework == "fsdp") zero = 3;
        else {
            zero = 0;
            if (!distOpt) r.assume("ZeRO stage / distributed optimizer not stated: none (framework default)");
        }
    }
    if ((framework == "megatron" || framework == "megascale") && zero == 0 && distOpt && *distOpt) zero = 1;
    plan.zeroStage = zero;
    // torch.autocast over fp32 parameters (plain PyTorch, DDP, ZeRO-1/2; Composer's amp_bf16 without FSDP): the
    // casts FSDP's param_dtype would make before the gather, autocast makes before every GEMM.
    if (zero < 3 && !contains(plan.precision, "fp8") &&
        (contains(prec, "autocast") || contains(prec, "torch.amp") || contains(prec, "amp_bf16")))
        plan.precision = "amp";
    // Plain-PyTorch trainers (Hugging Face Trainer / Accelerate, Lightning, nanoGPT, PyTorch DDP) run 16-bit mixed
    // precision as torch.autocast over fp32 weights when nothing shards them (Trainer --bf16 and Lightning
    // "bf16-mixed" through torch.amp).
    if (plan.precision != "amp" && framework.empty() && zero < 3 && !contains(plan.precision, "fp8") &&
        !contains(prec, "fp8")) {
        const std::string fw = lower(text(pl, "framework"));
        const bool plainTorch = contains(fw, "trainer") || contains(fw, "accelerate") || contains(fw, "lightning") ||
                                contains(fw, "nanogpt") || contains(fw, "ddp") || contains(fw, "distributeddataparallel");
        const bool mixed16 = contains(prec, "bf16") || contains(prec, "bfloat16") || contains(prec, "fp16") ||
                             contains(prec, "float16") || contains(prec, "mixed");
        if (plainTorch && mixed16) {
            plan.precision = "amp";
            r.assume(text(pl, "framework") + ": 16-bit mixed precision read as torch.autocast over fp32 weights (recipe amp)");
        }
    }

    // fp16 keeps 16-bit gradients: Megatron-LM's --accumulate-allreduce-grads-in-fp32 is a store_true flag that only
    // --bf16 forces on (megatron/arguments.py, 2021 to today); DeepSpeed's fp16 path (FP16_Optimizer, ZeRO-1/2)
    // accumulates and reduces the fp16 .grad, where its bf16 path keeps fp32 gradients (bf16_optimizer.py).
    const bool fp16Only = (contains(prec, "fp16") || contains(prec, "float16")) && !contains(prec, "bf16") &&
                          !contains(prec, "bfloat16");
    if ((framework == "megatron" || framework == "deepspeed") && fp16Only && !plan.framework.gradReduceInFp32 &&
        !contains(plan.precision, "fp8")) {
        plan.framework.gradReduceInFp32 = false;
        r.assume(std::string("fp16 under ") + (framework == "megatron" ? "Megatron-LM" : "DeepSpeed") +
               ": gradients accumulated and reduced in fp16 (only --bf16 keeps fp32 ones)");
    }

    // Hybrid sharding (HSDP): replicas of the sharded state, under the names records use (a replica count, or the
    // size of a shard group). FSDP's HYBRID_SHARD shards inside a node and replicates across nodes. A count that
    // is not positive or does not split the group is a refusal naming it, never a silent full shard.
    {
        const std::string sharding = lower(text(pl, "fsdp_sharding") + " " + text(pl, "zero") + " " + text(pl, "sharding"));
        const int zeroGroup = plan.dp * (plan.zeroOverCp ? plan.cp : 1);
        struct Name {
            const char* key;
            int shardOf; // 0: the value is the replica count; else the value is a shard size of this many ranks
        };
        const Name names[] = {{"zero_replicas", 0}, {"num_distributed_optimizer_instances", 0}, {"dp_replicate", 0},
                              {"data_parallel_replicate_degree", 0}, {"dp_shard", plan.dp}, {"mics_shard_size", zeroGroup}};
        int replicas = 1;
        bool stated = false;
        for (const Name& n : names) {
            const auto v = integer(pl, n.key);
            if (!v) continue;
            if (*v < 1 || (n.shardOf > 0 && n.shardOf % *v != 0)) {
                refusal = ptr + "/plan/" + n.key + ": " + std::to_string(*v) +
                          (*v < 1 ? " is not a positive count" : " does not divide the " + std::to_string(n.shardOf) + " ranks it shards");
                return false;
            }
            replicas = n.shardOf > 0 ? n.shardOf / static_cast<int>(*v) : static_cast<int>(*v);
            if (replicas > 1) r.assume(std::string(n.key) + ": the ZeRO state is replicated " + std::to_string(replicas) + " times (hybrid sharding)");
            stated = true;
            break;
        }
        if (!stated && contains(sharding, "hybrid")) {
            // One shard group per node: the data-parallel ranks of a node (tp x cp of them share it).
            const int shard = std::min(plan.dp, std::max(1, c.scenario.cluster.gpusPerNode / (plan.tp * plan.cp)));
            if (plan.dp % shard != 0) {
                refusal = ptr + "/plan/fsdp_sharding: " + text(pl, "fsdp_sharding") + " shards inside a node, and the " +
                          std::to_string(plan.dp) + " data-parallel ranks do not split into nodes of " + std::to_string(shard);
                return false;
            }
            replicas = plan.dp / shard;
            r.assume("hybrid sharding (" + text(pl, "fsdp_sharding") + "): state sharded over the " + std::to_string(shard) +
                   " data-parallel ranks of a node, replicated over " + std::to_string(replicas) + " nodes (FSDP's HYBRID_SHARD default)");
        }
        if (replicas > 1 && plan.zeroStage == 0) plan.zeroStage = framework == "fsdp" || framework == "torchtitan" ? 3 : 1;
        plan.zeroReplicas = replicas;
    }
    return true;
}

// The attention kernel: the record's words, else what its framework and software year ran.
bool readAttention(Reading& r) {
    const nlohmann::json& rec = r.rec;
    const nlohmann::json& pl = r.pl;
    ValidationCase& c = r.c;
    const std::string& source = r.source;
    const std::string& framework = r.framework;
    Plan& plan = r.c.scenario.plan;
    // Attention kernel: FlashAttention (Dao et al., arXiv:2205.14135, May 2022) cannot have been used by a run
    // published before it; Megatron-LM made it a default only with Transformer Engine (2023-24). Which fused
    // kernel follows the record's words, else the year of its software (as the framework version does):
    // FlashAttention-2 from July 2023, -3 (and cuDNN's fused attention on Hopper) from 2024. MegaScale (NSDI'24,
    // arXiv 2402) ran its Megatron-LM baseline in 2023 and names FlashAttention-2 among its own changes.
    const std::string attn =
        lower(text(rec.value("model", nlohmann::json::object()), "attention") + " " + text(pl, "attention"));
    auto kernelFor = [&](const std::string& wanted) {
        const auto& kernels = c.scenario.cluster.gpu.attentionKernels;
        if (kernels.count(wanted)) return wanted;
        // cuDNN's fused attention where the GPU has no figure for it (it runs on Hopper and later): Transformer
        // Engine then runs FlashAttention, the best the GPU has.
        if (wanted == "cudnn" && kernels.count("flash3")) return std::string("flash3");
        if ((wanted == "flash3" || wanted == "cudnn") && kernels.count("flash2")) return std::string("flash2");
        return std::string("auto");
    };
    // The software's year decides the default kernel, not the paper's (a paper submitted early in a year
    // reports work run the year before).
    const int softwareYr = softwareYear(source);
    // Frameworks whose models call torch.nn.functional.scaled_dot_product_attention unless told otherwise.
    const bool sdpaFramework = framework == "torchtitan" || framework == "fsdp";
    plan.flashAttention = true;
    // llm-foundry's benchmark runs take `attn_impl` from submit_benchmarks.py's --attn_impl, default "triton"
    // (llm-foundry's Triton kernel, triton-pre-mlir in its install_requires) at 5f43bf160, b2a43a147 and 5e85bd62d
    // alike; its sweep.sh never sets it. The "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table came with
    // sweep.py (5e85bd62d, 2024-01), which sets it per model: "flash" (flash-attn 2.4.2, installed as
    // .[gpu-flash2]) for MPT-1B, -3B, -7B and -70B, "triton" for MPT-13B and -30B.
    const bool llmFoundryLargeScale = contains(lower(source), "llm-foundry") && contains(lower(source), "large scale");
    const std::string modelName = lower(text(rec.value("model", nlohmann::json::object()), "name"));
    const bool largeScaleTriton = std::regex_search(modelName, std::regex(R"((^|[^0-9.])(13|30)b)"));
    if (llmFoundryLargeScale && !contains(attn, "flash1") && !contains(attn, "flash2") && !contains(attn, "flash3")) {
        plan.attentionKernel = kernelFor(largeScaleTriton ? "flash1" : "flash2");
        r.assume(largeScaleTriton
                   ? "llm-foundry's Large Scale sweep (sweep.py, 5e85bd62d): attn_impl triton for this model, read as "
                     "FlashAttention-1 class (the 2022-23 Triton kernels follow its algorithm)"
                   : "llm-foundry's Large Scale sweep (sweep.py, 5e85bd62d): attn_impl flash, flash-attn 2.4.2");
    } else if (contains(attn, "triton") || contains(attn, "flash1") || contains(attn, "flashattention-1") ||
        contains(attn, "flash-attn 1") || contains(attn, "flash attention 1") || contains(attn, "flash-attention 1")) {
        plan.attentionKernel = kernelFor("flash1");
        if (contains(attn, "triton"))
            r.assume("Triton attention read as FlashAttention-1 class (the 2022-23 Triton kernels follow its algorithm)");
    } else if (contains(attn, "flash3") || contains(attn, "flashattention-3")) {
        plan.attentionKernel = kernelFor("flash3");
    } else if (contains(attn, "cudnn") || contains(attn, "fused attention") || contains(attn, "fused_attn")) {
        plan.attentionKernel = kernelFor("cudnn");
    } else if (contains(attn, "flash2") || contains(attn, "flashattention-2") || contains(attn, "flash-attn 2") ||
               contains(attn, "flash_attn_2") || contains(attn, "flash attention 2") || contains(attn, "flash-attention-2")) {
        plan.attentionKernel = kernelFor("flash2");
    } else if (contains(attn, "unfused") || contains(attn, "no flash") || contains(attn, "softmax") ||
               contains(attn, "eager") || contains(attn, "standard")) {
        plan.flashAttention = false;
    } else if (sdpaFramework && softwareYr >= 2026 && c.scenario.cluster.gpu.attentionKernels.count("cudnn")) {
        // From PyTorch 2.11 (2026) SDPA prefers cuDNN's attention on Hopper: check_prefer_cudnn_attention
        // (sdp_utils.cpp) gates it on a bundled cuDNN newer than 9.15, which 2.11's wheel has; the H200 profile of
        // docs/gpu-report-h200.md shows its kernels.
        plan.attentionKernel = "cudnn";
        r.assume("attention through PyTorch SDPA: cuDNN's fused attention (its default on Hopper from PyTorch 2.11)");
    } else if (sdpaFramework && softwareYr >= 2024) {
        // PyTorch's scaled_dot_product_attention runs FlashAttention-2 (PyTorch 2.2 release notes); its cuDNN
        // backend is opt-in from 2.5.1 (pytorch/pytorch PR 138522; torchtitan's selective-checkpoint save list names
        // only the flash and memory-efficient SDPA ops, torchtitan parallelize_llama.py, Dec 2024).
        plan.attentionKernel = kernelFor("flash2");
        r.assume("attention through PyTorch SDPA: FlashAttention-2 (its flash backend since PyTorch 2.2)");
    } else if (contains(attn, "flash") || contains(attn, "sdpa")) {
        plan.attentionKernel = softwareYr >= 2024 ? kernelFor(sdpaFramework ? "flash3" : "cudnn")
                               : softwareYr == 2023 ? kernelFor("flash2") : softwareYr == 2022 ? kernelFor("flash1") : "auto";
        r.assume("FlashAttention version not stated: " + (plan.attentionKernel == "auto" ? c.scenario.cluster.gpu.defaultAttentionKernel : plan.attentionKernel) +
               (softwareYr > 0 ? " (software of " + std::to_string(softwareYr) + ")" : " (the GPU's default)"));
    } else if (framework == "megatron" && softwareYr > 0 && softwareYr <= 2023) {
        plan.flashAttention = false;
        r.assume("attention kernel not stated: Megatron-LM of " + std::to_string(softwareYr) +
               " without FlashAttention (fused softmax, s^2 scores in HBM)");
    } else if (softwareYr > 0 && softwareYr <= 2022) {
        plan.flashAttention = false;
        r.assume("attention kernel not stated: a " + std::to_string(softwareYr) + " run predates FlashAttention's adoption");
    } else {
        plan.attentionKernel = softwareYr == 2023 ? kernelFor("flash2") : "auto";
        r.assume("attention kernel not stated: " + (plan.attentionKernel == "auto" ? c.scenario.cluster.gpu.defaultAttentionKernel : plan.attentionKernel));
    }
    return true;
}

// Recompute and sequence parallelism (raised until a published plan fits), the micro-batch where one a step
// does not fit, the framework defaults that decided something, and the plan checked as tessel's plan format checks it.
bool readRecomputeAndCheck(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    Plan& plan = r.c.scenario.plan;
    ModelConfig& model = r.c.scenario.model;
    const bool microBatchAssumed = r.microBatchAssumed;
    // Recompute and sequence parallelism: stated, or the framework default; a default that would not fit in
    // memory is raised step by step (a published run ran, so it fit).
    bool recomputeKnown = false;
    plan.recompute = parseRecompute(text(pl, "recompute"), recomputeKnown);
    // Megatron-LM's block method recomputes only --recompute-num-layers layers of each chunk (plan
    // recompute_layers); its uniform method with n > 1 layers per checkpoint recomputes every layer and keeps
    // fewer inputs than tessel's one per layer. Both read from the config's names or the record's prose.
    if (plan.recompute == Recompute::Full) {
        const std::string rc = lower(text(pl, "recompute"));
        const std::string method = lower(text(pl, "recompute_method")) + " " + rc;
        std::optional<int64_t> layers = integer(pl, "recompute_num_layers");
        std::smatch m;
        if (!layers && std::regex_search(rc, m, std::regex(R"(\b([0-9]{1,6}) layers?\b)"))) layers = std::stoll(m[1].str());
        if (layers && *layers > model.layers) layers = model.layers; // beyond any chunk: every layer
        const std::string shown = text(pl, "recompute").empty() ? text(pl, "recompute_method") : text(pl, "recompute");
        if (contains(method, "block") && layers && *layers >= model.layers) {
            r.assume("recompute \"" + shown + "\": the block method's count reaches every layer of every chunk: every layer "
                   "recomputed");
        } else if (contains(method, "block") && layers && *layers > 0) {
            plan.recomputeLayers = static_cast<int>(*layers);
            r.assume("recompute \"" + shown + "\": the first " + std::to_string(*layers) +
                   " layers of each chunk recomputed, the rest keep their activations (Megatron-LM's block method)");
        } else if (contains(method, "block") || (layers && *layers > 1)) {
            r.assume("recompute \"" + shown + "\" read as every layer recomputed, one checkpoint each" +
                   (contains(method, "block") ? " (no positive layer count given for the block method)"
                                              : " (tessel keeps one checkpoint per layer, not one per " +
                                                    std::to_string(*layers) + ")"));
        }
    }
    // As a flag (llm-foundry's "Activation Checkpointing: True", a config's activation_checkpointing): on is
    // every layer recomputed, off is none.
    for (const char* key : {"recompute", "activation_checkpointing"}) {
        if (recomputeKnown) break;
        if (const nlohmann::json* flag = member(pl, key); flag && flag->is_boolean()) {
            plan.recompute = flag->get<bool>() ? Recompute::Full : Recompute::None;
            recomputeKnown = true;
        }
    }
    // Megatron-core's CPU offloading of the first N layers' activations (cpu_offloading_num_layers, with
    // cpu_offloading on where stated): it runs without recompute, so an unstated recompute is none.
    const auto offloadLayers = integer(pl, "cpu_offloading_num_layers");
    if (const auto stated = number(pl, "cpu_offloading_num_layers");
        stated && (!offloadLayers || *offloadLayers >= model.layers)) {
        char shown[32];
        std::snprintf(shown, sizeof shown, "%g", *stated);
        refusal = ptr + "/plan/cpu_offloading_num_layers: " + shown + " is not a layer count Megatron-core offloads (0 to " +
                  std::to_string(model.layers - 1) + ")";
        return false;
    }
    if (const auto layers = offloadLayers; layers && *layers > 0 && boolean(pl, "cpu_offloading").value_or(true)) {
        plan.offloadActivationLayers = static_cast<int>(*layers);
        if (!recomputeKnown) {
            plan.recompute = Recompute::None;
            recomputeKnown = true;
            r.assume("recompute none: Megatron-core's CPU offloading (cpu_offloading_num_layers " + std::to_string(*layers) +
                     ") runs without activation recompute");
        }
    }
    const auto sp = boolean(pl, "sequence_parallel");
    plan.sequenceParallel = sp.value_or(false) && plan.tp > 1;
    if (!model.moe) plan.ep = 1;
    auto fits = [&] {
        ProblemList problems;
        validatePlan(model, c.scenario.cluster, plan, "/plan", problems);
        return problems.empty() && predictMemory(model, c.scenario.cluster, plan).fits;
    };
    if (!recomputeKnown || !sp) {
        std::vector<std::string> raised;
        if (!sp && plan.tp > 1 && !fits()) {
            plan.sequenceParallel = true;
            raised.push_back("sequence parallelism on");
        }
        if (!recomputeKnown && !fits()) {
            plan.recompute = Recompute::Selective;
            raised.push_back("selective recompute");
            if (!fits()) {
                plan.recompute = Recompute::Full;
                raised.back() = "full recompute";
            }
        }
        std::string what = std::string(!recomputeKnown ? "recompute" : "") + (!recomputeKnown && !sp ? " and " : "") +
                           (!sp ? "sequence parallelism" : "");
        r.assume(what + " not stated: " +
               (raised.empty() ? std::string("framework default (") + toString(plan.recompute) +
                                     (sp ? "" : plan.sequenceParallel ? ", SP on" : ", SP off") + ")"
                               : "raised until the plan fits in memory: " + [&] {
                                     std::string s;
                                     for (const auto& entry : raised) s += (s.empty() ? "" : ", ") + entry;
                                     return s;
                                 }()));
    }
    if (sp && *sp && plan.tp == 1) plan.sequenceParallel = false;
    // A run that ran fit: when one micro-batch a step (the assumed default above) does not, with the recompute
    // settled, the largest micro-batch that divides the batch and fits is taken, accumulating over the rest.
    if (microBatchAssumed && !fits()) {
        const int perRank = plan.globalBatch / plan.dp;
        int mb = plan.microBatch;
        while (mb > 1 && !fits()) {
            --mb;
            while (mb > 1 && perRank % mb != 0) --mb;
            plan.microBatch = mb;
        }
        r.assume("one micro-batch of " + std::to_string(perRank) + " sequences a rank does not fit in memory: micro_batch " +
               std::to_string(mb) + ", accumulated over " + std::to_string(perRank / mb) +
               (fits() ? "" : " (and that does not fit either)"));
    }
    // The defaults that decide something for this plan: the main-gradient dtype only for recipes with Megatron-style
    // fp32 main gradients, FP8 parameters only for FP8 recipes.
    const PrecisionRecipe* named = findPrecisionRecipe(plan.precision);
    const bool mainGrads = named && named->megatronMainGrads();
    const bool fp8 = named && named->fp8();
    for (const auto& d : resolveOverlap(plan.framework, plan.schedule == Schedule::Interleaved1F1B, plan.zeroStage).defaulted) {
        if ((d.rfind("grad_reduce_in_fp32 ", 0) == 0 && !mainGrads) || (d.rfind("fp8_param_gather ", 0) == 0 && !fp8) ||
            d.rfind("store_param_remainders ", 0) == 0)
            continue;
        r.assume(d);
    }
    // The master's remainders only where there is an fp32 master of bf16 weights under a distributed optimizer, and
    // their default depends on the GEMMs' dtype (storeParamRemaindersOf), so it is said here, resolved for this plan.
    if (named && named->weightBytes == 2 && named->masterBytes == 4 && plan.zeroStage >= 1 &&
        !plan.framework.storeParamRemainders && optimizerDtypeOf(plan.framework) == "fp32" &&
        !(fp8 && fp8ParamGatherOf(plan.framework)) && plan.framework.name == "nemo") {
        const bool remainders = storeParamRemaindersOf(plan.framework, fp8);
        r.assume(std::string("store_param_remainders = ") + (remainders ? "true" : "false") + " (" + plan.framework.name +
                 (plan.framework.version.empty() ? " (current)" : " " + plan.framework.version) + " default" +
                 (remainders ? ": the fp32 master as 16-bit remainders beside the bf16 weights)" : ")"));
    }
    if (plan.pipelineSplit != PipelineSplit::Even) {
        resolvePipelineSplit(model, c.scenario.cluster, plan); // once recompute and SP are settled
        if (plan.pipelineSplit == PipelineSplit::EndsAsLayers)
            r.assume("pipeline split not stated and pp x vpp = " + std::to_string(plan.pp * plan.vpp) + " does not divide " +
                   std::to_string(model.layers) + " layers: embedding and loss counted as a layer each, as the frameworks "
                   "split (" + pipelineSplitText(model, plan) + ")");
    }
    ProblemList problems;
    validatePlan(model, c.scenario.cluster, plan, ptr + "/plan", problems);
    if (!problems.empty()) {
        refusal = problems.items().front().where + ": " + problems.items().front().message;
        return false;
    }
    return true;
}
} // namespace

void readSystemAndPlan(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c, std::string& refusal) {
    const nlohmann::json pl = rec.value("plan", nlohmann::json::object());
    const std::string source = text(rec, "source") + " " + text(rec, "source_url");
    Reading r{rec, ptr, c, refusal, rec.value("system", nlohmann::json::object()), pl, source, frameworkOf(pl, source)};
    // In this order: each step reads what the ones before it settled; the first refusal ends the reading.
    for (bool (*step)(Reading&) : {readCluster, readBatch, readPipeline, readFramework, readPrecisionAndSharding,
                                   readAttention, readRecomputeAndCheck})
        if (!step(r)) return;
}

} // namespace tessel::sim::detail
