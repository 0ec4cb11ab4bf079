// Reads the attention kernel a published record's run used (validation_reading.hpp): the record's words or its
// config's keys, else what its framework and software year ran, and what its GPU and precision allow.
#include "validation_reading.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/compute.hpp"

#include <regex>
#include <string>
#include <utility>

namespace tessel::sim::detail {

using namespace prose;

// The attention kernel under a config's own keys, as the words the kernel is read from: Megatron-LM's
// --use-flash-attn and a record's flash_attention flag, Megatron-core's --attention-backend (flash, fused: cuDNN's
// through Transformer Engine, unfused, local), Hugging Face's attn_implementation and llm-foundry's attn_impl.
namespace {
std::string attentionConfigWords(const nlohmann::json& pl) {
    std::string words;
    for (const char* key : {"use_flash_attn", "flash_attention", "use_flash_attention", "flash_attn"})
        if (auto on = boolean(pl, key)) words += *on ? " flash" : " no flash";
    static const std::pair<const char*, const char*> named[] = {
        {"flash_attention_3", " flash3"}, {"flash_attention_2", " flash2"}, {"flash", " flash"}, {"unfused", " unfused"},
        {"fused", " cudnn"}, {"cudnn", " cudnn"}, {"triton", " triton"}, {"local", " unfused"}, {"eager", " eager"},
        {"torch", " unfused"}, {"sdpa", " sdpa"}}; // "unfused" before "fused", which it contains
    for (const char* key : {"attention_backend", "attn_implementation", "attn_impl"}) {
        const std::string v = lower(text(pl, key));
        for (const auto& [word, read] : named)
            if (contains(v, word)) {
                words += read;
                break;
            }
    }
    return words;
}
} // namespace

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
    const std::string attn = lower(text(rec.value("model", nlohmann::json::object()), "attention") + " " + text(pl, "attention") +
                                   attentionConfigWords(pl));
    bool kernelUnread = false; // no word of the record named a kernel (the last three readings below)
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
    // The kernel a framework's launcher chose for the run, where the GPU has it (NeMo 24.01-24.07 on Hopper: flash-attn
    // 2, cuDNN's attention off).
    const std::string launcherKernel = launcherAttentionKernelOf(plan, c.scenario.cluster.gpu);
    plan.flashAttention = true;
    // llm-foundry's benchmark runs take `attn_impl` from submit_benchmarks.py's --attn_impl, default "triton"
    // (llm-foundry's Triton kernel, triton-pre-mlir in its install_requires) at 5f43bf160, b2a43a147 and 5e85bd62d
    // alike; its sweep.sh never sets it. The "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table came with
    // sweep.py (5e85bd62d, 2024-01), which sets it per model: "flash" (flash-attn 2.4.2, installed as
    // .[gpu-flash2]) for MPT-1B, -3B, -7B and -70B, "triton" for MPT-13B and -30B.
    const bool llmFoundryLargeScale = contains(lower(source), "llm-foundry") && contains(lower(source), "large scale");
    const std::string modelName = lower(text(rec.value("model", nlohmann::json::object()), "name"));
    const bool largeScaleTriton = std::regex_search(modelName, std::regex(R"((^|[^0-9.])(13|30)b)"));
    bool triton = false; // the run's attention was a Triton kernel (read as FlashAttention-1 class)
    if (llmFoundryLargeScale && !contains(attn, "flash1") && !contains(attn, "flash2") && !contains(attn, "flash3")) {
        plan.attentionKernel = kernelFor(largeScaleTriton ? "flash1" : "flash2");
        triton = largeScaleTriton;
        r.assume(largeScaleTriton
                   ? "llm-foundry's Large Scale sweep (sweep.py, 5e85bd62d): attn_impl triton for this model, read as "
                     "FlashAttention-1 class (the 2022-23 Triton kernels follow its algorithm)"
                   : "llm-foundry's Large Scale sweep (sweep.py, 5e85bd62d): attn_impl flash, flash-attn 2.4.2");
    } else if (contains(attn, "triton") || contains(attn, "flash1") || contains(attn, "flashattention-1") ||
        contains(attn, "flash-attn 1") || contains(attn, "flash attention 1") || contains(attn, "flash-attention 1")) {
        plan.attentionKernel = kernelFor("flash1");
        triton = contains(attn, "triton");
        if (triton)
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
    } else if (!launcherKernel.empty() && (contains(attn, "flash") || contains(attn, "sdpa") || attn.find_first_not_of(' ') == std::string::npos)) {
        // A NeMo container of 2024-01 to 2024-07 under its launcher's NVTE_FUSED_ATTN=0 (attentionKernelDefaultOf).
        plan.attentionKernel = kernelFor(launcherKernel);
        r.assume("attention kernel not stated: " + plan.attentionKernel + ", as NeMo " + plan.framework.version +
                 "'s launcher ran it (NeMo-Framework-Launcher config.yaml: NVTE_FUSED_ATTN=0, cuDNN's attention off)");
    } else if (contains(attn, "flash") || contains(attn, "sdpa")) {
        plan.attentionKernel = softwareYr >= 2024 ? kernelFor(sdpaFramework ? "flash3" : "cudnn")
                               : softwareYr == 2023 ? kernelFor("flash2") : softwareYr == 2022 ? kernelFor("flash1") : "auto";
        r.assume("FlashAttention version not stated: " + (plan.attentionKernel == "auto" ? c.scenario.cluster.gpu.defaultAttentionKernel : plan.attentionKernel) +
               (softwareYr > 0 ? " (software of " + std::to_string(softwareYr) + ")" : " (the GPU's default)"));
    } else if (framework == "megatron" && softwareYr > 0 && softwareYr <= 2023) {
        kernelUnread = true;
        plan.flashAttention = false;
        r.assume("attention kernel not stated: Megatron-LM of " + std::to_string(softwareYr) +
               " without FlashAttention (fused softmax, s^2 scores in HBM)");
    } else if (softwareYr > 0 && softwareYr <= 2022) {
        kernelUnread = true;
        plan.flashAttention = false;
        r.assume("attention kernel not stated: a " + std::to_string(softwareYr) + " run predates FlashAttention's adoption");
    } else {
        kernelUnread = true;
        plan.attentionKernel = softwareYr == 2023 ? kernelFor("flash2") : "auto";
        r.assume("attention kernel not stated: " + (plan.attentionKernel == "auto" ? c.scenario.cluster.gpu.defaultAttentionKernel : plan.attentionKernel));
    }
    // Attention words that named no kernel ("GQA", "magic") read as unstated: said so, with what they were.
    if (kernelUnread)
        for (const auto& [field, obj] :
             {std::pair<const char*, const nlohmann::json*>{"model/attention", member(rec, "model")},
              {"plan/attention", &pl}})
            if (obj && !text(*obj, "attention").empty())
                r.unread(field, text(*obj, "attention"),
                         "attention kernel tessel reads (flash, flash2, flash3, cudnn, triton, unfused, "
                         "eager, sdpa)",
                         "read as not stated");
    // FlashAttention takes 16-bit inputs: a TF32 run's fp32 tensors go through attention unfused, its score GEMMs
    // at the TF32 rate (the fp32 recipe is left as it was read).
    if (plan.flashAttention && plan.precision == "tf32") {
        plan.flashAttention = false;
        plan.attentionKernel = "auto";
        r.assume("TF32 run: attention unfused (FlashAttention takes 16-bit inputs), the scores in HBM");
    }
    // A GPU without fused attention kernels (Volta: FlashAttention is built for sm75/sm80 and later) computes
    // attention as GEMMs around a softmax, whatever the record calls it.
    if (plan.flashAttention && c.scenario.cluster.gpu.attentionKernels.empty()) {
        plan.flashAttention = false;
        plan.attentionKernel = "auto";
        r.assume(c.scenario.cluster.gpu.name + " has no fused attention kernel (FlashAttention needs sm75/sm80 or later): "
                 "attention unfused, the scores in HBM");
    }
    // llm-foundry's unpadded layout is its flash_attn_fn's: bert_padding gathers q, k and v for flash-attn's varlen
    // kernel and scatters the output back. Its triton_flash_attn_fn hands the Triton kernel [b, s, h, d] views of
    // the fused projection's output, no gather or scatter (attention.py at 5f43bf160, b2a43a147 and 5e85bd62d alike).
    // A record that states attention_unpad is read as stated, whatever its framework.
    if (auto v = boolean(pl, "attention_unpad")) plan.framework.attentionUnpad = *v;
    else if (r.llmFoundry && plan.flashAttention) {
        plan.framework.attentionUnpad = !triton;
        r.assume(triton ? "llm-foundry: the Triton kernel on q, k and v as the projection left them (triton_flash_attn_fn: no unpadding)"
                        : "llm-foundry: flash attention on unpadded q, k, v (flash_attn_fn's bert_padding gather and scatter)");
    }
    return true;
}

} // namespace tessel::sim::detail
