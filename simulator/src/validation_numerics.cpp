// Reads the precision of a published record's run (validation_reading.hpp): its precision recipe (FP8's scaling
// recipe, NVFP4's options, BF16 end layers), ZeRO stage, hybrid sharding and offload. Recompute, SP and the checks of
// the finished plan are validation_recompute.cpp's; the attention kernel validation_attention.cpp's.
#include "validation_reading.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>

namespace tessel::sim::detail {

using namespace prose;

namespace {
// Where a record puts training state in host memory (plan offload_optimizer / offload_parameters, FORMULAS.md §8):
// DeepSpeed's offload_optimizer / offload_param (a device name, a flag or {"device": ...}), a general offload or
// cpu_offload field, or the names ZeRO-Offload (the optimizer) and ZeRO-Infinity (the optimizer and the parameter
// partitions). Prose that denies it ("no offload", "without CPU offload") names none.
struct OffloadReading {
    bool optimizer = false, parameters = false, nvme = false;
};
OffloadReading readOffload(const nlohmann::json& pl) {
    auto device = [&](std::initializer_list<const char*> keys) -> std::optional<std::string> {
        for (const char* key : keys)
            if (const nlohmann::json* v = member(pl, key)) {
                if (v->is_boolean()) return std::string(v->get<bool>() ? "cpu" : "none");
                if (v->is_object()) return lower(text(*v, "device"));
                return lower(text(pl, key));
            }
        return std::nullopt;
    };
    auto on = [](const std::string& d) {
        return contains(d, "cpu") || contains(d, "nvme") || contains(d, "host") || d == "true" || d == "yes" || d == "on";
    };
    auto affirmed = [](const std::string& s) {
        return std::regex_replace(s, std::regex(R"((no|not|without|w/o)[- ]+(cpu[- ]+|nvme[- ]+)?offload(ing)?)"), " ");
    };
    const auto optimizer = device({"offload_optimizer", "optimizer_offload", "cpu_offload_optimizer"});
    const auto parameters = device({"offload_param", "offload_params", "offload_parameters", "param_offload"});
    const std::string named = affirmed(lower(text(pl, "zero") + " " + text(pl, "techniques")));
    const std::string general = affirmed(lower(text(pl, "offload") + " " + text(pl, "cpu_offload")));
    // FSDP's CPU offload named beside its sharding ("FULL_SHARD with CPU offload"): FSDP's CPUOffload offloads the
    // parameters only (offload_params), with their gradients and the optimizer step on the host.
    const std::string sharding = affirmed(lower(text(pl, "fsdp_sharding") + " " + text(pl, "sharding")));
    OffloadReading o;
    o.parameters = parameters && on(*parameters);
    o.optimizer = o.parameters || (optimizer && on(*optimizer));
    if (!optimizer && !parameters) {
        o.parameters = contains(named, "infinity") || contains(general, "param") || contains(general, "infinity") ||
                       contains(sharding, "offload");
        o.optimizer = o.parameters || contains(named, "offload") || contains(general, "optimizer") || on(general);
    }
    const std::string all = (optimizer ? *optimizer : "") + " " + (parameters ? *parameters : "") + " " + named + " " + general;
    o.nvme = o.optimizer && contains(all, "nvme");
    return o;
}
} // namespace

namespace {
// A table of Megatron-Bridge's performance scripts from a 25.11 or later container: they name FP8 by its recipe
// from 2025-11 (NVIDIA-NeMo/Megatron-Bridge#1279, scripts/performance/argument_parser.py: --compute_dtype bf16,
// fp8_cs, fp8_mx, fp8_sc), with no delayed scaling among them, where --fp8_recipe had defaulted to ds; the tables
// print MXFP8 and NVFP4 by name, so their plain "FP8" is fp8_cs.
bool megatronBridgeNamesFp8ByRecipe(const Reading& r) {
    const std::string who = lower(text(r.pl, "framework") + " " + r.source);
    if (!std::regex_search(who, std::regex(R"(megatron[ _-]?bridge)"))) return false;
    std::smatch m;
    const std::string version = r.c.scenario.plan.framework.version;
    if (!std::regex_search(version, m, std::regex(R"(^\s*([0-9]{2})\.([0-9]{2}))"))) return false;
    const int yy = std::stoi(m[1]), mm = std::stoi(m[2]);
    return yy > 25 || (yy == 25 && mm >= 11);
}

// Transformer Engine's FP8 scaling recipe, from the words of the record's precision or its plan's fp8_recipe:
// Megatron-core's names (tensorwise, delayed, mxfp8, blockwise), NeMo's and Megatron-Bridge's (cs, ds, mx, ss; the
// performance tables' FP8-CS, FP8-DS, MXFP8) and TE's class names. Unstated, it is Megatron-core's default, delayed,
// except in Megatron-Bridge's tables from 25.11 on (megatronBridgeNamesFp8ByRecipe), current scaling.
void readFp8Recipe(Reading& r, const std::string& prec) {
    const std::string stated = lower(text(r.pl, "fp8_recipe"));
    const std::string words = prec + " " + stated;
    auto said = [&](const char* pattern) { return std::regex_search(words, std::regex(pattern)); };
    Plan& plan = r.c.scenario.plan;
    if (said(R"(tensorwise|current[ _-]?scal|fp8[ _-]cs\b)") || stated == "cs") {
        plan.framework.fp8Recipe = "tensorwise";
        r.assume("FP8 with current scaling (Transformer Engine's Float8CurrentScaling, --fp8-recipe tensorwise): each "
                 "cast reads its input once more for the tensor's amax");
    } else if (said(R"(mxfp8|mx[ _-]?fp8|fp8[ _-]mx\b)") || stated == "mx") {
        plan.framework.fp8Recipe = "mxfp8";
        r.assume("MXFP8 (--fp8-recipe mxfp8): its block scales (one byte per 32 elements, taken inside the cast) and "
                 "both-direction casts are costed as delayed scaling's cast and transpose");
    } else if (said(R"(blockwise|block[ _-]scal|subchannel|fp8[ _-]ss\b)") || stated == "ss") {
        plan.framework.fp8Recipe = "blockwise";
        r.assume("FP8 with block scaling (--fp8-recipe blockwise): its per-block scales, taken inside the cast, are "
                 "costed as delayed scaling's cast");
    } else if (said(R"(delayed|fp8[ _-]ds\b)") || stated == "ds") {
        plan.framework.fp8Recipe = "delayed";
    } else if (!stated.empty()) {
        r.assume("plan/fp8_recipe \"" + text(r.pl, "fp8_recipe") + "\" names no scaling recipe tessel costs: read as "
                 "delayed scaling, Megatron-core's default");
    } else if (megatronBridgeNamesFp8ByRecipe(r)) {
        plan.framework.fp8Recipe = "tensorwise";
        r.assume("FP8 in a Megatron-Bridge table of " + plan.framework.version + ": fp8_cs, current scaling (its "
                 "performance scripts name FP8 by recipe from 25.11, delayed scaling not among them; MXFP8 and NVFP4 "
                 "are printed by name): each cast reads its input once more for the tensor's amax");
    }
}
} // namespace

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
    // Megatron-LM's and Transformer Engine's FP8 switches in the plan (--fp8-format hybrid / e4m3, --fp8-recipe, a
    // record's fp8: true) say FP8 beside a bf16 precision; false, "none" or "off" say nothing.
    std::string fp8Switch;
    for (const char* key : {"fp8", "fp8_format", "fp8_recipe"}) {
        const std::string v = lower(text(pl, key));
        if (!v.empty() && v != "false" && v != "none" && v != "off" && v != "no" && v != "0" && v != "null") {
            fp8Switch = std::string(key) + " " + text(pl, key);
            break;
        }
    }
    const std::string prec = lower(text(sys, "precision") + " " + text(pl, "precision")) + (fp8Switch.empty() ? "" : " fp8");
    if (!fp8Switch.empty()) r.assume("FP8 read from plan/" + fp8Switch);
    const bool noBf16 = r.c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Bf16) == 0;
    plan.precision = "megatron";
    // 4-bit training: NVFP4 as Transformer Engine runs it (its NVFP4BlockScaling, the only 4-bit training recipe it
    // has; Megatron-core's --fp4-format e2m1 --fp4-recipe nvfp4), on a GPU with FP4 tensor cores. MXFP4 (E8M0 scales
    // a 32-element block) and integer 4-bit training are other recipes, not costed: refused, not read as NVFP4.
    const bool fp4Said = contains(prec, "fp4") || contains(prec, "float4") || contains(prec, "e2m1");
    if (fp4Said && (contains(prec, "mxfp4") || contains(prec, "mx fp4"))) {
        refusal = ptr + "/system/precision: \"" + text(sys, "precision") + text(pl, "precision") +
                  "\": MXFP4 training is not modelled (tessel's 4-bit recipe is NVFP4, Transformer Engine's NVFP4BlockScaling)";
        return false;
    }
    if (contains(prec, "int4")) {
        refusal = ptr + "/system/precision: \"" + text(sys, "precision") + text(pl, "precision") +
                  "\": integer 4-bit training is not modelled (tessel's 4-bit recipe is NVFP4)";
        return false;
    }
    if (fp4Said && !c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Fp4)) {
        refusal = ptr + "/system/precision: \"" + text(sys, "precision") + text(pl, "precision") + "\": NVFP4 needs FP4 "
                  "tensor cores (Blackwell); " + c.scenario.cluster.gpu.name + " has no fp4 peak";
        return false;
    }
    // Full-precision training: every word of the field names 32 bits. "fp32" beside a 16-bit or FP8 word is the master
    // copy of a mixed recipe ("bf16 with fp32 master weights"), not this.
    std::string words = prec; // "no mixed precision" says fp32, not mixed
    for (const char* negated : {"no mixed", "not mixed", "without mixed", "non-mixed"})
        for (size_t at = words.find(negated); at != std::string::npos; at = words.find(negated))
            words.erase(at, std::string(negated).size());
    const bool lowPrecision = contains(words, "bf16") || contains(words, "bfloat16") || contains(words, "fp16") ||
                              contains(words, "float16") || contains(words, "half") || contains(words, "mixed") ||
                              std::regex_search(words, std::regex(R"(\bamp\b)")) || contains(words, "fp8") ||
                              contains(words, "float8");
    // "TF32 off" / "no TF32" is the fp32 recipe's own setting, not TF32 training.
    const std::string tf32 = std::regex_replace(prec, std::regex(R"(tf32[ =:]*(off|disabled|false)|(no|without)[- ]+tf32)"), " ");
    const bool tf32Off = tf32 != prec;
    // Words that name no recipe ("weird", "default") are said, and BF16 mixed precision (or the GPU's 16-bit
    // type) taken.
    const bool precisionRead = lowPrecision || fp4Said || contains(prec, "tf32") || contains(prec, "fp32") ||
                               contains(prec, "float32") || contains(prec, "full precision") ||
                               contains(prec, "32-true") || contains(prec, "not stated") ||
                               prec.find_first_not_of(' ') == std::string::npos;
    if (!precisionRead)
        r.unread(text(sys, "precision").empty() ? "plan/precision" : "system/precision",
                 text(sys, "precision") +
                     (text(sys, "precision").empty() || text(pl, "precision").empty() ? "" : " ") +
                     text(pl, "precision"),
                 "precision tessel reads (bf16, fp16, mixed, fp8, nvfp4, fp32, tf32)",
                 noBf16 ? "fp16 mixed precision taken" : "BF16 mixed precision taken");
    const bool hasTf32 = c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Tf32) > 0;
    // Transformer Engine's FP8 attention (Megatron-core's --fp8-dot-product-attention, NVTE_DPA_FP8_RECIPE) has no
    // cost of its own here: said, and the attention costed in BF16.
    for (const char* key : {"fp8_dot_product_attention", "fp8_dpa"})
        if (boolean(pl, key).value_or(false)) {
            r.assume(std::string(key) + ": Transformer Engine's FP8 attention is not costed; the attention is costed in BF16");
            break;
        }
    if (fp4Said) {
        plan.precision = "nvfp4";
        // Megatron-core's --fp4-param-gather and Transformer Engine's NVTE_NVFP4_DISABLE_* switches, as plan keys.
        for (const auto& [key, knob] : {std::pair<const char*, std::optional<bool> FrameworkSettings::*>{
                                            "fp4_param_gather", &FrameworkSettings::fp4ParamGather},
                                        {"nvfp4_rht", &FrameworkSettings::nvfp4Rht},
                                        {"nvfp4_stochastic_rounding", &FrameworkSettings::nvfp4StochasticRounding}}) {
            if (auto v = boolean(pl, key)) plan.framework.*knob = *v;
            else if (member(pl, key))
                r.assume(std::string(key) + " \"" + text(pl, key) + "\" is neither true nor false: the default taken");
        }
        const auto& fw = plan.framework;
        r.assume(std::string("NVFP4 as Transformer Engine runs it (NVFP4BlockScaling): the linear layers' three GEMMs in "
                             "E2M1 with E4M3 block scales, attention, norms, embedding and output layer in BF16; ") +
                 (nvfp4RhtOf(fw) ? "the Hadamard transform" : "no Hadamard transform") + ", " +
                 (nvfp4StochasticRoundingOf(fw) ? "stochastically rounded gradients" : "gradients rounded to nearest") +
                 (fp4ParamGatherOf(fw) ? ", NVFP4 parameters gathered at 0.5 B" : ""));
    } else if (!lowPrecision && contains(tf32, "tf32")) {
        // TF32: fp32 tensors, matmuls on the tensor cores at the TF32 rate (recipe tf32). A GPU without TF32 units
        // (Volta, CDNA2) runs them as fp32.
        plan.precision = hasTf32 ? "tf32" : "fp32";
        r.assume(hasTf32 ? "TF32 training: fp32 weights, gradients, optimizer state and activations, matmuls on the tensor "
                           "cores at the TF32 rate"
                         : "TF32 stated, but " + c.scenario.cluster.gpu.name + " has no TF32 units: read as fp32");
    } else if (!lowPrecision && (contains(prec, "fp32") || contains(prec, "float32") || contains(prec, "full precision"))) {
        // PyTorch ran fp32 matmuls on TF32 tensor cores by default from 1.7 to 1.11 (torch.backends.cuda.matmul.
        // allow_tf32 True), off from 1.12 (June 2022; pytorch/pytorch#67384, the numerical-accuracy notes of #79537):
        // an fp32 run of software before 2022 on a GPU with TF32 units ran its matmuls in TF32 unless it says not.
        const int softwareYr = softwareYear(r.source);
        if (hasTf32 && !tf32Off && softwareYr > 0 && softwareYr <= 2021) {
            plan.precision = "tf32";
            r.assume("fp32 training of " + std::to_string(softwareYr) + ": matmuls on the tensor cores at the TF32 rate, "
                     "PyTorch's default from 1.7 to 1.11 (allow_tf32, off from 1.12)");
        } else {
            plan.precision = "fp32";
            r.assume("fp32 training: fp32 weights, gradients, optimizer state and GEMMs on the CUDA cores (TF32 off, "
                     "PyTorch's default for matmul from 1.12)");
        }
    }
    else if (contains(prec, "fp8") || contains(prec, "float8")) {
        if (c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Fp8) && (framework == "torchtitan" || contains(prec, "torchao"))) {
            plan.precision = "fsdp_fp8";
            r.assume("FP8 as torchao runs it under FSDP2: FP8 GEMMs with dynamic scales, fp32 shards, no cached FP8 copies");
        } else if (c.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Fp8)) {
            plan.precision = "fp8";
            r.assume("FP8 as Transformer Engine runs it: FP8 GEMMs, BF16 elsewhere, FP8 weight copies");
            readFp8Recipe(r, prec);
        } else {
            r.assume("FP8 stated, but " + c.scenario.cluster.gpu.name + " has no FP8 tensor cores: read as " +
                     (noBf16 ? "FP16" : "BF16"));
        }
    }
    else if (framework == "fsdp" || framework == "torchtitan") {
        // PyTorch FSDP keeps fp32 parameter shards (the master) and gathers them in 16 bits. Where it reduces is the
        // trainer's: Composer's 'DEFAULT' (llm-foundry) and torchtitan (mixed_precision_reduce float32) in fp32;
        // Composer's 'PURE', PyTorch's MixedPrecision with reduce_dtype unset (it takes param_dtype), FairScale's FSDP
        // (fp32_reduce_scatter off: metaseq), Hugging Face Accelerate and Lightning (one dtype for all three) in 16
        // bits. A reduce dtype the record states decides.
        const std::optional<bool> fp32Reduce = plan.framework.gradReduceInFp32;
        const bool trainerReducesFp32 = framework == "torchtitan" || r.llmFoundry;
        const bool sixteenBitReduce = contains(prec, "pure") || (fp32Reduce && !*fp32Reduce) ||
                                      (!fp32Reduce && !trainerReducesFp32);
        plan.precision = sixteenBitReduce ? "fsdp_pure" : "fsdp";
        // Lightning's FSDP "bf16-mixed" / "16-mixed" (Fabric, Trainer, lit-gpt): from 2.1 (2023-10) to 2.5 its
        // MixedPrecision keeps param_dtype float32 and reduces in 16 bits inside torch.autocast
        // (fabric/plugins/precision/fsdp.py): fp32 gathers, autocast's casts (recipe fsdp_amp). Before 2.1 and from
        // 2.6 (pytorch-lightning#21361) it gathers in 16 bits: the 16-bit FSDP recipe.
        bool lightningRead = false;
        if (framework == "fsdp" && contains(prec, "mixed") && !fp32Reduce && namesLightning(text(pl, "framework"))) {
            std::smatch v;
            int minor = -1, year = softwareYear(r.source);
            // Lightning's own version: beside its name in the framework ("lightning==2.1.2", "Lightning 2.0.9"), or
            // the record's framework_version; a PyTorch version elsewhere in the words is not it.
            const std::string fwName = lower(text(pl, "framework")), fwVersion = lower(text(pl, "framework_version"));
            if (std::regex_search(fwName, v, std::regex(R"((lightning|fabric|lit-?gpt)[^0-9]{0,12}2\.([0-9]+))")))
                minor = std::stoi(v[2].str());
            else if (std::regex_search(fwVersion, v, std::regex(R"(^\s*v?2\.([0-9]+))")))
                minor = std::stoi(v[1].str());
            const bool fp32Gathers = minor >= 0 ? minor >= 1 && minor <= 5 : year >= 2023 && year <= 2025;
            plan.precision = fp32Gathers ? "fsdp_amp" : "fsdp_pure";
            lightningRead = true;
            r.assume(std::string("Lightning's FSDP \"") + text(r.sys, "precision") + "\"" +
                     (minor >= 0 ? " (Lightning 2." + std::to_string(minor) + ")" : year > 0 ? " (a " + std::to_string(year) + " source)" : "") +
                     (fp32Gathers ? ": fp32 parameters gathered and autocast over them, gradients reduced in 16 bits "
                                    "(param_dtype float32 from Lightning 2.1 to 2.5; recipe fsdp_amp)"
                                  : ": parameters gathered and gradients reduced in 16 bits (Lightning before 2.1 and from 2.6)"));
        }
        if (prec.find_first_not_of(' ') == std::string::npos || contains(prec, "not stated"))
            r.assume(std::string("precision not stated: FSDP mixed precision (fp32 shards, 16-bit compute and gathers, ") +
                     (sixteenBitReduce ? "16-bit" : "fp32") + " reduction)");
        if (sixteenBitReduce && !fp32Reduce && !contains(prec, "pure") && !lightningRead)
            r.assume("FSDP gradients reduced in 16 bits (reduce dtype not stated: PyTorch FSDP's reduce_dtype takes "
                     "param_dtype, FairScale reduces in fp16, Accelerate and Lightning use one dtype; only Composer's "
                     "DEFAULT and torchtitan reduce in fp32)");
        // A model held in bf16 (Hugging Face's torch_dtype, NeMo AutoModel's model.to(bf16), torchtune's dtype): FSDP
        // shards the bf16 parameters themselves and no fp32 master exists (recipe bf16_no_master); the optimizer's
        // state is what optimizer_dtype says (torch.optim keeps it in the parameters' dtype, Transformer Engine's
        // FusedAdam in fp32 unless told).
        for (const char* key : {"torch_dtype", "model_dtype"}) {
            const std::string held = lower(text(pl, key));
            // An fp16 model without a master (or any other dtype) is no recipe tessel costs: said, not dropped.
            if (!held.empty() && !contains(held, "bf16") && !contains(held, "bfloat16") && !contains(held, "32"))
                r.assume(std::string(key) + " \"" + text(pl, key) + "\" is not a held dtype tessel costs (bf16, fp32): "
                         "read as FSDP's fp32 shards");
            if (!contains(held, "bf16") && !contains(held, "bfloat16")) continue;
            plan.precision = "bf16_no_master";
            r.assume(std::string(key) + " \"" + text(pl, key) + "\": FSDP shards the bf16 parameters and gradients "
                     "themselves, no fp32 master (recipe bf16_no_master)");
            break;
        }
    }
    else if ((prec.find_first_not_of(' ') == std::string::npos || contains(prec, "not stated")) && !noBf16)
        r.assume("precision not stated: BF16 mixed precision with fp32 master weights and grads");
    // A model dtype stated beside a recipe that keeps its own master (Megatron-style, DeepSpeed, FP8): said, not read.
    if (framework != "fsdp" && framework != "torchtitan")
        for (const char* key : {"torch_dtype", "model_dtype"})
            if (!text(pl, key).empty())
                r.assume(std::string(key) + " \"" + text(pl, key) + "\" read under FSDP only: this record's recipe (" +
                         plan.precision + ") keeps its own weights and master");

    // ZeRO / distributed optimizer; host offload (ZeRO-Offload runs on ZeRO-2, ZeRO-Infinity on ZeRO-3, the stages an
    // unstated one takes).
    const OffloadReading offload = readOffload(pl);
    // A stage written as a number is 0, 1, 2 or 3; any other number is no stage a framework has.
    for (const char* key : {"zero", "zero_stage"})
        if (const nlohmann::json* z = member(pl, key); z && z->is_number()) {
            const double v = z->get<double>();
            if (!(v >= 0.0 && v <= 3.0 && std::floor(v) == v)) {
                refusal = ptr + "/plan/" + key + ": got " + z->dump() + ", expected a ZeRO stage 0, 1, 2 or 3";
                return false;
            }
        }
    int zero = parseZero(pl);
    const auto distOpt = boolean(pl, "distributed_optimizer");
    if (const nlohmann::json* v = member(pl, "distributed_optimizer"); v && !v->is_null() && !distOpt)
        r.unread("plan/distributed_optimizer", text(pl, "distributed_optimizer"),
                 "setting tessel reads (true / false)", "read as not stated");
    if (zero < 0)
        for (const char* key : {"zero", "zero_stage"})
            if (const nlohmann::json* v = member(pl, key); v && !v->is_null()) {
                r.unread(std::string("plan/") + key, text(pl, key),
                         "ZeRO stage tessel reads (0-3, ZeRO-n, FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, none)",
                         "read as not stated");
                break;
            }
    const bool zeroStated = zero >= 0 || (distOpt && *distOpt);
    if (zero < 0) {
        if (distOpt && *distOpt) zero = 1;
        else if (framework == "fsdp" || framework == "torchtitan") {
            // Their data parallelism shards: PyTorch FSDP's sharding_strategy defaults to FULL_SHARD, torchtitan's
            // data_parallel_shard_degree to -1 (every rank the other dimensions leave) under FSDP2's fully_shard.
            zero = 3;
            r.assume(std::string("ZeRO stage not stated: ") +
                     (framework == "fsdp" ? "PyTorch FSDP's default FULL_SHARD" : "torchtitan's default FSDP2 sharding over all data-parallel ranks") +
                     " (ZeRO-3)");
        }
        else if (offload.optimizer) zero = offload.parameters ? 3 : 2;
        else {
            zero = 0;
            if (!distOpt) r.assume("ZeRO stage / distributed optimizer not stated: none (framework default)");
        }
    }
    if ((framework == "megatron" || framework == "megascale") && zero == 0 && distOpt && *distOpt) zero = 1;
    plan.zeroStage = zero;
    // Megatron-Bridge's performance recipes register Megatron FSDP's buffers with NCCL on H100 (the Llama 3 8B
    // configs from the 25.09 container on: llama3_8b_llm_pretrain.yaml `nccl_ub: true` at cac49dcd7, 2025-09;
    // `cfg.ddp.nccl_ub = True` under Megatron FSDP in llama3_8b_h100_config / llama3_8b_pretrain_config_h100 through
    // 2026-07): a row of their tables that runs Megatron FSDP on H100 and does not say is read as its recipe ran it.
    if (framework == "nemo" && zero == 3 && !member(pl, "nccl_ub") &&
        contains(lower(r.source + " " + text(pl, "framework")), "megatron-bridge") &&
        contains(lower(text(r.sys, "gpu")), "h100")) {
        const auto ym = containerYearMonth(plan.framework.version);
        if (ym && *ym >= std::make_pair(2025, 9)) {
            plan.framework.ncclUb = true;
            r.assume("nccl_ub: Megatron FSDP's buffers registered with NCCL, as Megatron-Bridge's H100 performance "
                     "recipes set it under Megatron FSDP from the 25.09 container (FORMULAS.md §6.2)");
        }
    }
    // ZeRO++ (DeepSpeed's zero_hpz_partition_size, zero_quantized_weights, zero_quantized_gradients, or the names in
    // prose): not plan features, so said: its communication is costed as ZeRO-3's, an upper bound.
    {
        const std::string named = lower(text(pl, "zero") + " " + text(pl, "techniques") + " " + text(pl, "framework"));
        std::vector<std::string> parts;
        if (const auto hpz = number(pl, "zero_hpz_partition_size"); (hpz && *hpz > 1) || contains(named, "hpz"))
            parts.push_back("hpZ's secondary partition: backward gathers inside a node, and its copy of the parameters not in memory");
        if (boolean(pl, "zero_quantized_weights").value_or(false) || contains(named, "qwz"))
            parts.push_back("qwZ's int8 parameter gathers");
        if (boolean(pl, "zero_quantized_gradients").value_or(false) || contains(named, "qgz"))
            parts.push_back("qgZ's int4 gradient all-to-all");
        if (parts.empty() && (contains(named, "zero++") || contains(named, "zeropp")))
            parts.push_back("its quantized and hierarchical collectives");
        if (!parts.empty()) {
            std::string list;
            for (const auto& part : parts) list += (list.empty() ? "" : ", ") + part;
            r.assume("ZeRO++ not costed (" + list + "): its communication read as ZeRO-3's, full-precision over the "
                     "whole data-parallel group, an upper bound");
        }
    }
    if (offload.optimizer) {
        plan.offloadOptimizer = true; // parameter offload runs with the optimizer's (ZeRO-Infinity)
        plan.offloadParameters = offload.parameters;
        r.assume(std::string("offload: the optimizer's state and step in host memory") +
                 (offload.parameters ? " and the parameter partitions (ZeRO-Infinity)" : " (ZeRO-Offload)") + ", ZeRO-" +
                 std::to_string(zero) + (zeroStated ? "" : " (the stage it runs on; not stated)") +
                 (offload.nvme ? "; NVMe read as host memory (its bandwidth is not modelled)" : ""));
    }
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
    // Lightning's "16-mixed" / "16-true" are fp16 too.
    bool fp16Only = (contains(prec, "fp16") || contains(prec, "float16") || contains(prec, "16-mixed") ||
                     contains(prec, "16-true")) &&
                    !contains(prec, "bf16") && !contains(prec, "bfloat16");
    // Unstated, or a 16-bit recipe that names no type ("mixed precision", "AMP", "half"), on a GPU without bf16
    // (Volta): the 16-bit type it has, fp16. A record that says bf16 there keeps it and is refused by the plan check.
    const bool unstated = prec.find_first_not_of(' ') == std::string::npos || contains(prec, "not stated");
    if (!fp16Only && noBf16 && !contains(prec, "bf16") && !contains(prec, "bfloat16") && plan.precision != "fp32" &&
        plan.precision != "tf32" && !contains(plan.precision, "fp8")) {
        fp16Only = true;
        r.assume((unstated ? std::string("precision not stated") : "\"" + text(sys, "precision") + text(pl, "precision") + "\"") +
                 " on " + r.c.scenario.cluster.gpu.name + ", which has no bf16: fp16 mixed precision with fp32 master weights");
    }
    // The 16-bit type itself: fp16 runs compute in fp16 (the only one Volta has; on Ampere and later the same rate).
    if (fp16Only && !contains(plan.precision, "fp8") && !plan.framework.halfDtype) plan.framework.halfDtype = "fp16";
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
        // FSDP's HYBRID_SHARD, or HSDP as PyTorch's FSDP2 and torchtitan call it.
        const bool hybridNamed = contains(sharding, "hybrid") || std::regex_search(sharding, std::regex(R"((^|[^a-z])hsdp([^a-z]|$))"));
        if (!stated && hybridNamed) {
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
        // Sharded state, replicated or not (HYBRID_SHARD on one node is FULL_SHARD over it).
        if ((replicas > 1 || hybridNamed) && plan.zeroStage == 0) plan.zeroStage = framework == "fsdp" || framework == "torchtitan" ? 3 : 1;
        plan.zeroReplicas = replicas;
    }
    // Megatron-core's --first-last-layers-bf16 (and its counts, each 1 unstated): under Transformer Engine's FP8 or
    // NVFP4 the end layers run outside the quantized context, costed as the megatron recipe runs them.
    if (member(pl, "first_last_layers_bf16") && !boolean(pl, "first_last_layers_bf16"))
        r.assume("first_last_layers_bf16 \"" + text(pl, "first_last_layers_bf16") + "\" is neither true nor false: every "
                 "layer taken in the run's precision");
    if (boolean(pl, "first_last_layers_bf16").value_or(false)) {
        const PrecisionRecipe* named = findPrecisionRecipe(plan.precision);
        if (!named || !named->quantizedGemms() || plan.precision == "fsdp_fp8") {
            r.assume("first_last_layers_bf16 stated, but the run is " + plan.precision + ", not Transformer Engine's FP8 "
                     "or NVFP4: nothing is kept in BF16 apart");
        } else {
            int counts[2] = {1, 1};
            const char* keys[2] = {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"};
            for (int i = 0; i < 2; ++i) {
                if (!member(pl, keys[i])) continue;
                const auto v = number(pl, keys[i]);
                if (!v || *v < 0 || *v != std::floor(*v) || *v > r.c.scenario.model.layers) {
                    refusal = ptr + "/plan/" + keys[i] + ": \"" + text(pl, keys[i]) + "\" is no count of the model's " +
                              std::to_string(r.c.scenario.model.layers) + " layers";
                    return false;
                }
                counts[i] = static_cast<int>(*v);
            }
            if (counts[0] + counts[1] > r.c.scenario.model.layers) {
                refusal = ptr + "/plan/num_layers_at_end_in_bf16: " + std::to_string(counts[0]) + " + " +
                          std::to_string(counts[1]) + " BF16 end layers, more than the model's " + std::to_string(r.c.scenario.model.layers);
                return false;
            }
            plan.bf16LayersAtStart = counts[0];
            plan.bf16LayersAtEnd = counts[1];
            r.assume("first_last_layers_bf16: the first " + std::to_string(counts[0]) + " and last " +
                     std::to_string(counts[1]) + " layers in BF16 (Megatron-core), costed as the megatron recipe runs them");
        }
    }
    return true;
}

} // namespace tessel::sim::detail
