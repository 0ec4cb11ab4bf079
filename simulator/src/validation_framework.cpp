// Reads the framework a published record's run used (validation_reading.hpp): its name and version (stated, in
// its name, or the source's year), the settings that decide overlap, the main-gradient dtype, compilation,
// llm-foundry's checkpointing and loss, and the MoE dispatcher.
#include "validation_reading.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/framework.hpp"

#include <cmath>
#include <regex>
#include <string>

namespace tessel::sim::detail {

using namespace prose;

namespace {
// The version a framework's name carries, as the version string framework defaults read (a container YY.MM, a
// Megatron-core release, or the year of a DeepSpeed or PyTorch release: GitHub release dates); empty when none.
// `how` says which reading.
std::string versionInFrameworkName(const std::string& framework, const std::string& written, std::string& how) {
    const std::string w = lower(written);
    std::smatch m;
    if ((framework == "nemo" || framework == "megatron") &&
        std::regex_search(w, m, std::regex(R"((^|[^0-9.])([12][0-9]\.(0[1-9]|1[0-2]))(\.[0-9]+)?([^0-9.]|$))"))) {
        how = "an NGC container's YY.MM";
        return m[2].str();
    }
    if (std::regex_search(w, m, std::regex(R"((20[12][0-9])-(0[1-9]|1[0-2]))")) ||
        std::regex_search(w, m, std::regex(R"(\b(20[12][0-9])\b)"))) {
        how = "a date";
        return m[1].str();
    }
    if (framework == "megatron" && std::regex_search(w, m, std::regex(R"(core[_ r-]*v?(0\.[0-9]+))"))) {
        how = "a Megatron-core release";
        return "core_r" + m[1].str();
    }
    // A release of the framework's own, kept as its number (frameworkYear reads it; DeepSpeed's minor also decides
    // its ZeRO optimizer's defaults, deepSpeedContiguousGradientsOf).
    if (framework == "deepspeed" && std::regex_search(w, m, std::regex(R"(deepspeed[^0-9]{0,12}v?(0\.[0-9]+))"))) {
        how = "a DeepSpeed release";
        return m[1].str();
    }
    if ((framework == "fsdp" || framework == "torchtitan") &&
        std::regex_search(w, m, std::regex(R"((torch|pytorch|fsdp)[^0-9]{0,12}v?([12]\.[0-9]+))"))) {
        how = "a PyTorch release";
        return m[2].str();
    }
    return "";
}

} // namespace

// The framework and the settings that decide overlap, the main-gradient dtype, compilation and llm-foundry's
// checkpointing and loss.
bool readFramework(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const std::string& source = r.source;
    const std::string& framework = r.framework;
    Plan& plan = r.c.scenario.plan;
    // Framework and the settings that decide overlap: stated in the record, else the framework's defaults for
    // the year of its software (docs/frameworks.md).
    if (!framework.empty()) {
        plan.framework.name = framework;
        std::string stated = text(pl, "framework_version");
        if (stated.empty()) {
            // A version written in the framework's name ("NeMo 24.12", "DeepSpeed 0.14", "PyTorch FSDP 2.4").
            std::string how;
            stated = versionInFrameworkName(framework, text(pl, "framework"), how);
            if (!stated.empty()) r.assume(framework + " version " + stated + ", read from the framework's name (" + how + ")");
        }
        const int swYear = softwareYear(source);
        if (!stated.empty() && !frameworkVersionDated(framework, stated)) {
            r.assume("framework_version not used: " + frameworkVersionProblem(framework, stated));
            stated.clear();
        }
        plan.framework.version = !stated.empty() ? stated : swYear > 0 ? std::to_string(swYear) : "";
        if (stated.empty() && swYear > 0) r.assume(framework + " version taken as of " + std::to_string(swYear) + " (the source's date)");
        if (const std::string kin = torchtitanKin(text(pl, "framework") + " " + text(pl, "fsdp_sharding"));
            framework == "torchtitan" && !kin.empty())
            r.assume(kin + " read as torchtitan: " +
                     (kin == "OLMo-core" ? std::string("FSDP2 and per-block torch.compile built as torchtitan builds them "
                                                       "(OLMo-core's apply_fsdp is adapted from torchtitan's parallelize_llama)")
                                         : std::string("PyTorch FSDP2 (fully_shard), whose per-parameter sharding and copies "
                                                       "torchtitan's costs are")) +
                     ", its defaults for the year");
    } else if (lower(text(pl, "framework")) == "generic") {
        r.assume("framework generic, as stated: every overlap tessel models, the plan's stated settings on top");
    } else if (!text(pl, "framework").empty()) {
        r.assume("framework \"" + text(pl, "framework") + "\" is not one tessel has defaults for: every overlap tessel models (generic)");
    } else {
        r.assume("framework not stated: every overlap tessel models (generic)");
    }
    const std::string ddp = lower(text(pl, "ddp_impl"));
    if (contains(ddp, "torch")) plan.framework.ddpImpl = "torch";
    else if (contains(ddp, "local")) plan.framework.ddpImpl = "local";
    for (const FrameworkFlag& flag : frameworkFlags()) {
        if (auto v = boolean(pl, flag.key)) plan.framework.*flag.member = *v;
        else if (member(pl, flag.key))
            r.assume(std::string(flag.key) + " \"" + text(pl, flag.key) + "\" is neither true nor false: the framework's "
                     "default taken");
    }
    // Megatron-core's --use-transformer-engine-op-fuser (MLPerf's USE_TE_OPS), by either name.
    for (const char* key : {"te_op_fuser", "use_transformer_engine_op_fuser"}) {
        if (!member(pl, key)) continue;
        if (auto v = boolean(pl, key))
            plan.framework.teOpFuser = *v;
        else
            r.assume(std::string(key) + " \"" + text(pl, key) + "\" is neither true nor false: off taken");
        break;
    }
    // DeepSpeed's ZeRO config names the gradient reduction's overlap with the backward overlap_comm
    // (zero_optimization.overlap_comm, read as a plan key).
    if (!member(pl, "overlap_grad_reduce"))
        if (auto overlap = boolean(pl, "overlap_comm")) {
            plan.framework.overlapGradReduce = *overlap;
            r.assume(std::string("overlap_grad_reduce = ") + (*overlap ? "true" : "false") + ", read from DeepSpeed's overlap_comm");
        }
    // Blocking launches: the plan's launch_blocking (or cuda_launch_blocking), else CUDA_LAUNCH_BLOCKING=1 written in
    // the record's environment, techniques or notes (BigScience's BLOOM jobs set it against hangs).
    {
        std::optional<bool> blocking;
        for (const char* key : {"launch_blocking", "cuda_launch_blocking"}) {
            if (!member(pl, key)) continue;
            blocking = boolean(pl, key);
            if (!blocking)
                r.assume(std::string(key) + " \"" + text(pl, key) + "\" is neither true nor false: asynchronous launches taken");
            break;
        }
        const std::string words = lower(text(pl, "environment") + " " + text(pl, "env") + " " + text(pl, "techniques") + " " +
                                        text(r.rec, "notes"));
        if (!blocking && std::regex_search(words, std::regex(R"(cuda_launch_blocking\s*=\s*1\b)"))) {
            blocking = true;
            r.assume("CUDA_LAUNCH_BLOCKING=1 read from the record's words: blocking launches, the host's time between "
                     "kernels exposed");
        }
        // BigScience's BLOOM jobs on Jean Zay's A100s (tr11, 2022) all set it against NCCL hangs (tr11-176B-ml.slurm
        // and its smaller-model twins; chronicles-prequel.md "dealing with JZ hanging"): their run read as they ran it.
        // Theirs: a record from BigScience itself, or a BLOOM pre-training run under DeepSpeed's pipeline engine (a
        // fine-tune elsewhere, ZeRO without a pipeline, is not).
        const std::string from = lower(source + " " + text(r.rec, "notes"));
        const bool bloomPipeline = contains(lower(text(r.rec.value("model", nlohmann::json::object()), "name")), "bloom") && plan.pp > 1;
        if (!member(pl, "launch_blocking") && !member(pl, "cuda_launch_blocking") && !blocking && framework == "deepspeed" &&
            (contains(from, "bigscience") || bloomPipeline) && contains(lower(text(r.sys, "gpu")), "a100")) {
            blocking = true;
            r.assume("CUDA_LAUNCH_BLOCKING=1 as BigScience's A100 jobs ran (tr11-176B-ml.slurm, from February 2022): "
                     "blocking launches");
        }
        if (blocking) plan.framework.launchBlocking = *blocking;
    }
    // Megatron-LM's gradient accumulation fusion, under its argument's name or the flag that turns it off
    // (no_gradient_accumulation_fusion: true, or --no-gradient-accumulation-fusion in the record's words).
    {
        std::optional<bool> fusion;
        if (member(pl, "gradient_accumulation_fusion")) {
            fusion = boolean(pl, "gradient_accumulation_fusion");
            if (!fusion)
                r.assume("gradient_accumulation_fusion \"" + text(pl, "gradient_accumulation_fusion") +
                         "\" is neither true nor false: the fusion taken");
        } else if (member(pl, "no_gradient_accumulation_fusion")) {
            if (auto off = boolean(pl, "no_gradient_accumulation_fusion")) fusion = !*off;
            else r.assume("no_gradient_accumulation_fusion \"" + text(pl, "no_gradient_accumulation_fusion") +
                          "\" is neither true nor false: the fusion taken");
        } else if (contains(lower(text(pl, "techniques") + " " + text(r.rec, "notes")), "--no-gradient-accumulation-fusion")) {
            fusion = false;
            r.assume("--no-gradient-accumulation-fusion read from the record's words: each micro-batch's 16-bit weight "
                     "gradient added into main_grad");
        }
        if (fusion) plan.framework.gradAccumulationFusion = *fusion;
    }
    // DeepSpeed's zero_optimization.contiguous_gradients (lifted from a nested zero_optimization block as a plan key).
    if (member(pl, "contiguous_gradients")) {
        if (auto v = boolean(pl, "contiguous_gradients")) plan.framework.contiguousGradients = *v;
        else r.assume("contiguous_gradients \"" + text(pl, "contiguous_gradients") + "\" is neither true nor false: the "
                      "version's default taken");
    }
    // The data-parallel collectives on NCCL user buffers (Megatron-core's nccl_ub, Megatron-LM's --nccl-ub).
    if (member(pl, "nccl_ub")) {
        if (auto v = boolean(pl, "nccl_ub")) plan.framework.ncclUb = *v;
        else r.assume("nccl_ub \"" + text(pl, "nccl_ub") + "\" is neither true nor false: NCCL's own buffers taken");
    }
    // The TP plan's ends: the loss over each rank's vocabulary shard or over logits gathered to every rank
    // (loss_parallel, torchtitan's disable_loss_parallel), the embedding split by vocabulary or whole on each rank.
    if (auto v = boolean(pl, "loss_parallel")) plan.framework.lossParallel = *v;
    else if (auto off = boolean(pl, "disable_loss_parallel")) plan.framework.lossParallel = !*off;
    if (auto v = boolean(pl, "vocab_parallel_embedding")) plan.framework.vocabParallelEmbedding = *v;
    for (const char* key : {"loss_parallel", "disable_loss_parallel", "vocab_parallel_embedding"})
        if (member(pl, key) && !boolean(pl, key))
            r.assume(std::string(key) + " \"" + text(pl, key) + "\" is neither true nor false: the split kept");
    // Whether the model code repeats K and V to every query head before its kernel (repeatKvOf's default otherwise).
    if (auto v = boolean(pl, "repeat_kv")) plan.framework.repeatKv = *v;
    else if (member(pl, "repeat_kv")) r.assume("repeat_kv \"" + text(pl, "repeat_kv") + "\" is neither true nor false: the framework's default kept");
    // Fewer key/value heads than tp ranks, tp a multiple of them: the run replicated K and V over the ranks (no other
    // way runs it: Megatron-core and Transformer Engine refuse such a plan), said; a stated kv_replication wins.
    const int64_t kvHeads = r.c.scenario.model.kvHeads;
    if (auto v = boolean(pl, "kv_replication")) {
        plan.framework.kvReplication = *v;
    } else if (kvHeads > 0 && kvHeads < plan.tp && plan.tp % kvHeads == 0) {
        plan.framework.kvReplication = true;
        r.assume("kv_heads " + std::to_string(kvHeads) + " < tp " + std::to_string(plan.tp) +
                 ": each K/V head replicated on tp / kv_heads = " + std::to_string(plan.tp / kvHeads) +
                 " ranks (kv_replication, as BigCode's Megatron-LM fork ran multi-query attention; Megatron-core "
                 "needs kv_heads % tp == 0)");
    }
    // The main-gradient dtype under its frameworks' names: Megatron-LM's --grad-reduce-in-bf16 and
    // --accumulate-allreduce-grads-in-fp32, NeMo's optim.grad_sync_dtype, Megatron-core's grad_reduce_in_fp32.
    if (auto v = boolean(pl, "grad_reduce_in_bf16")) plan.framework.gradReduceInFp32 = !*v;
    if (auto v = boolean(pl, "accumulate_allreduce_grads_in_fp32")) plan.framework.gradReduceInFp32 = *v;
    for (const char* key : {"grad_sync_dtype", "grad_reduce_dtype", "reduce_dtype", "mixed_precision_reduce"}) {
        const std::string dt = lower(text(pl, key));
        if (contains(dt, "bf16") || contains(dt, "bfloat16")) plan.framework.gradReduceInFp32 = false;
        else if (contains(dt, "fp32") || contains(dt, "float32")) plan.framework.gradReduceInFp32 = true;
    }
    // The same in the precision's prose: FSDP's MixedPrecision "reduce_dtype float32", "reduce in fp32".
    if (!plan.framework.gradReduceInFp32) {
        const std::string prec = lower(text(r.sys, "precision") + " " + text(pl, "precision"));
        std::smatch m;
        if (std::regex_search(prec, m, std::regex(R"(reduc\w*[ _]*(?:dtype)?[ =:(]*(?:in )?(?:torch\.)?(fp32|float32|bf16|bfloat16|fp16|float16)\b)")))
            plan.framework.gradReduceInFp32 = m[1] == "fp32" || m[1] == "float32";
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
    // DeepSpeed ZeRO-3's coordinator limits (zero_optimization.stage3_*), as a record states them (elements).
    for (const auto& [key, member] : stage3Keys())
        if (const auto v = number(pl, key)) {
            if (framework != "deepspeed") r.assume(std::string(key) + " read for DeepSpeed only: this record's framework gathers whole units");
            else if (*v >= 0) plan.framework.*member = static_cast<int64_t>(*v);
        }
    if (parseZero(pl) == 2 && framework == "fsdp") plan.framework.reshardAfterForward = false;
    // torch.compile fuses a block's elementwise ops (torchtitan compiles each transformer block).
    if (auto compiled = boolean(pl, "compile") ? boolean(pl, "compile") : boolean(pl, "torch_compile")) {
        if (!plan.framework.fusedKernels) plan.framework.fusedKernels = *compiled;
    } else if (contains(lower(text(pl, "techniques") + " " + text(pl, "framework")), "compile")) {
        if (!plan.framework.fusedKernels) plan.framework.fusedKernels = true;
    }
    // Hugging Face Transformers' model code (Trainer, Accelerate, TRL) runs its norms, rotary embedding and gated
    // activation as separate PyTorch ops (modeling_llama.py: LlamaRMSNorm, apply_rotary_pos_emb, act_fn(gate_proj)
    // * up_proj) whichever engine shards it: eager, unless compiled (above) or a kernel library replaces them.
    {
        const std::string words = lower(text(pl, "framework") + " " + text(pl, "techniques"));
        const bool hfModelCode = contains(words, "hugging face") || contains(words, "huggingface") ||
                                 contains(words, "hf trainer") || contains(words, "transformers") ||
                                 contains(words, "accelerate") || std::regex_search(words, std::regex(R"(\btrl\b)"));
        const bool kernelLibrary =
            contains(words, "liger") || contains(words, "unsloth") ||
            std::regex_search(words, std::regex(R"(fused[- ](kernels?|rms ?norm|layer ?norm|norms?|rope|rotary|swiglu|mlp))"));
        if (hfModelCode && !kernelLibrary && !plan.framework.fusedKernels) {
            plan.framework.fusedKernels = false;
            r.assume("Hugging Face Transformers' model code: norms, rotary embedding and activations as separate PyTorch "
                     "ops (fused_kernels off; compile or a kernel library such as Liger would fuse them)");
        }
        // Gradient accumulation without synchronisation: the Hugging Face Trainer's loop (Accelerate's accumulate)
        // and Lightning Fabric's no_backward_sync (lit-gpt's pretraining loops) run FSDP's no_sync between
        // micro-batches, reduce-scattering once a step.
        const bool lightning = namesLightning(words);
        const int64_t accumulation = plan.globalBatch / std::max<int64_t>(1, int64_t{plan.microBatch} * plan.dp);
        if (framework == "fsdp" && (hfModelCode || lightning) && accumulation > 1 && !plan.framework.gradSyncEachMicroBatch) {
            plan.framework.gradSyncEachMicroBatch = false;
            r.assume(std::string(lightning ? "Lightning Fabric's no_backward_sync" : "Hugging Face Accelerate's accumulate") +
                     ": FSDP's no_sync over the " + std::to_string(accumulation) + " micro-batches a step, the unsharded "
                     "gradients kept and reduce-scattered once (grad_sync_each_micro_batch false)");
        }
    }

    // llm-foundry (MosaicML's MPT benchmarks): its flash_attn_fn gathers q, k, v into flash-attn's unpadded layout
    // and scatters the output back. Its other ops are one kernel each either way (LayerNorm, GELU), and its loss
    // is flash-attn's fused cross-entropy (modeling_mpt.py: loss_fn 'fused_crossentropy', the default since
    // 2023-05): no fp32 copy of the logits, so the plan keeps fused kernels, and its loss is that kernel
    // (cross_entropy flash_attn), not Megatron-core's with its fp32 softmax.
    // A record that states either is read as stated, whatever its framework.
    // Whether its attention is unpadded depends on the kernel its table ran: readAttention settles it.
    const std::string namedFramework = lower(text(pl, "framework"));
    r.llmFoundry = contains(lower(source), "llm-foundry") || contains(namedFramework, "composer") ||
                   contains(namedFramework, "llm-foundry") || contains(namedFramework, "llmfoundry") ||
                   contains(namedFramework, "llm foundry");
    const bool llmFoundry = r.llmFoundry;
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
    // Composer updates the model's training metrics after every micro-batch's backward (trainer.py
    // _eval_train_metrics, Composer 0.11 to 0.17), and llm-foundry's MPT models report two, LanguageCrossEntropy and
    // LanguagePerplexity, each a torch CrossEntropyLoss over the logits (use_train_metrics defaults true).
    if (auto v = number(pl, "train_metric_losses")) {
        if (*v >= 0 && *v <= 16 && *v == static_cast<int>(*v)) plan.framework.trainMetricLosses = static_cast<int>(*v);
        else r.assume("train_metric_losses " + std::to_string(*v) + " is not a count of 0 to 16: read as unstated");
    }
    if (!plan.framework.trainMetricLosses && llmFoundry) {
        plan.framework.trainMetricLosses = 2;
        r.assume("llm-foundry: Composer's training metrics after every micro-batch, two eager cross-entropies over the "
                 "logits (LanguageCrossEntropy, LanguagePerplexity)");
    }
    // Whether the trainer keeps each micro-batch's logits referenced through its backward (memory.cpp: they then sit
    // beside the last layer's backward). Composer binds the model's output to state.outputs before the loss and keeps
    // it until the next micro-batch's forward replaces it (trainer.py _train_microbatch), metrics or not.
    if (auto v = boolean(pl, "logits_held_through_backward")) {
        plan.framework.logitsHeldThroughBackward = *v;
    } else if (member(pl, "logits_held_through_backward")) {
        r.assume("logits_held_through_backward \"" + text(pl, "logits_held_through_backward") +
                 "\" is neither true nor false: the framework's default taken");
    } else if (llmFoundry) {
        plan.framework.logitsHeldThroughBackward = true;
        r.assume("llm-foundry: Composer keeps each micro-batch's outputs, the logits, in state.outputs through its backward");
    }
    // Whether the trainer compiles the whole model as one graph (memory.cpp: without FSDP or DDP to split it, its
    // backward returns every gradient at once).
    if (auto v = boolean(pl, "compile_whole_model")) {
        plan.framework.compileWholeModel = *v;
    } else if (member(pl, "compile_whole_model")) {
        r.assume("compile_whole_model \"" + text(pl, "compile_whole_model") + "\" is neither true nor false: read as false");
    }
    const std::string loss = lower(text(pl, "cross_entropy"));
    const auto& kinds = crossEntropyKinds();
    const bool named = std::find(kinds.begin(), kinds.end(), loss) != kinds.end();
    // OLMo-core's trainer names its loss by two switches (TrainerConfig, 2024-09 on): fused_loss, its Triton
    // cross-entropy adapted from flash-attn's (the z-loss in the same kernel), and compile_loss,
    // cross_entropy(logits.float()) and the z-loss under torch.compile.
    const bool fusedLoss = boolean(pl, "fused_loss").value_or(false);
    const bool compiledLoss = boolean(pl, "compile_loss").value_or(false);
    for (const char* key : {"fused_loss", "compile_loss"})
        if (member(pl, key) && !boolean(pl, key))
            r.assume(std::string(key) + " \"" + text(pl, key) + "\" is not a yes or no: not read");
    // Liger-Kernel (Hugging Face's use_liger_kernel, TRL's and Axolotl's liger options, or Liger named among the
    // techniques): its patch of a Hugging Face model replaces the output layer and the loss in training with
    // LigerFusedLinearCrossEntropyLoss (fused_linear_cross_entropy, on by default in its apply_liger_kernel_to_*).
    const std::string ligerWords = lower(text(pl, "framework") + " " + text(pl, "techniques") + " " + text(pl, "kernels") +
                                         " " + text(pl, "loss") + " " + text(r.rec, "notes"));
    static const std::regex fusedLinearRe(R"(fused[-_ ]?linear[-_ ]?cross[-_ ]?entropy)");
    bool liger = std::regex_search(ligerWords, fusedLinearRe) ||
                 contains(lower(text(pl, "framework") + " " + text(pl, "techniques") + " " + text(pl, "kernels")), "liger");
    for (const char* key : {"use_liger_kernel", "use_liger", "liger_kernel"}) {
        if (const auto v = boolean(pl, key)) liger = *v;
        else if (member(pl, key)) r.assume(std::string(key) + " \"" + text(pl, key) + "\" is not a yes or no: not read");
    }
    const bool ligerLoss = !named && liger && plan.tp == 1 && !plan.framework.trainMetricLosses.value_or(0);
    if (!named && liger && !ligerLoss)
        r.assume("Liger-Kernel named, but its fused linear cross-entropy " +
                 std::string(plan.tp > 1 ? "runs the whole output layer on each rank, and this run has tp " + std::to_string(plan.tp)
                                         : "makes no logits for the trainer's metrics, which this run computes") +
                 ": its loss not read as it");
    if (named) {
        plan.framework.crossEntropy = loss;
    } else if (ligerLoss) {
        plan.framework.crossEntropy = "fused_linear";
        r.assume("Liger-Kernel: the output layer and the loss as its fused linear cross-entropy (chunked over the tokens, "
                 "the logits never whole, the head's gradients computed in the forward)");
    } else if (fusedLoss) {
        plan.framework.crossEntropy = "flash_attn";
        r.assume("fused_loss: a Triton cross-entropy of flash-attn's kind (the 16-bit logits kept, their gradient a new "
                 "16-bit tensor, no fp32 softmax)");
    } else if (compiledLoss) {
        plan.framework.crossEntropy = "compiled";
        r.assume("compile_loss: cross_entropy(logits.float()) under torch.compile (the upcast fused away)");
    } else if (llmFoundry) {
        plan.framework.crossEntropy = "flash_attn";
        r.assume("llm-foundry: flash-attn's cross_entropy (loss_fn fused_crossentropy): the bf16 logits kept, their "
                 "gradient a new bf16 tensor, no fp32 softmax");
    }
    if (!named && !loss.empty()) {
        std::string list;
        for (const std::string& k : kinds) list += (list.empty() ? "" : ", ") + k;
        r.assume("cross_entropy \"" + text(pl, "cross_entropy") + "\" names no loss kernel tessel costs (" + list +
                 "): read as " + crossEntropyOf(plan.framework));
    }
    // PaLM's z-loss (1e-4 x log(Z)^2 beside the cross-entropy): inside a fused or compiled loss kernel it costs
    // nothing tessel counts; beside the eager loss it is one more logsumexp pass over the fp32 logits and its
    // gradient, which is not costed.
    if (const auto z = number(pl, "z_loss_multiplier"); z && *z > 0.0 && crossEntropyOf(plan.framework) == "eager")
        r.assume("z-loss beside the eager loss: its logsumexp over the fp32 logits and that pass's gradient not costed");
    // The MoE token dispatcher (Megatron-core's moe_token_dispatcher_type; DeepEP / HybridEP are the flex one's
    // backends). Unstated: the all-to-all.
    std::string dispatcher = lower(text(pl, "moe_dispatcher"));
    if (dispatcher.empty()) dispatcher = lower(text(pl, "moe_token_dispatcher_type"));
    if (dispatcher == "deepep" || dispatcher == "hybridep") dispatcher = "flex";
    if (dispatcher == "alltoall" || dispatcher == "flex") plan.framework.moeDispatcher = dispatcher;
    else if (!dispatcher.empty())
        r.assume("MoE dispatcher \"" + dispatcher + "\" is not one tessel costs (alltoall, flex): read as alltoall");
    // An expert capacity (Megatron-core's --moe-expert-capacity-factor, GShard's capacity_factor): tessel routes
    // tokens evenly, so no expert is over capacity and none is padded to it; said where a record states one (it had
    // been passed over in silence). Megatron-core pads to it only with --moe-pad-expert-input-to-capacity.
    for (const char* key : {"moe_expert_capacity_factor", "expert_capacity_factor", "capacity_factor"})
        if (const auto cf = number(pl, key); cf && *cf > 0.0 && r.c.scenario.model.moe) {
            const bool padded = boolean(pl, "moe_pad_expert_input_to_capacity").value_or(false);
            r.assume(std::string(key) + " " + text(pl, key) + ": routing read as even, so no token dropped" +
                     (padded ? "; the padding to capacity (moe_pad_expert_input_to_capacity) not costed"
                             : " and no expert padded"));
            break;
        }
    // Megatron-core's batch-level EP overlap is read once recompute is settled (readRecomputeAndCheck).
    return true;
}

} // namespace tessel::sim::detail
