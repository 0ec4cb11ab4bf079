// Reads what a published training run measured (runs.json schema, "measured" and "derived"): its step time under the
// names and units sources give it, the peak memory and the rank it was read on, the out-of-memory outcome.
#include "validation_measured.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/model.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <utility>

namespace tessel::sim::detail {

namespace {
using namespace prose;

// The names records give each figure (every one a positive number). A field of `measured` under none of these
// names, nor the memory and outcome names read below, is said as not read (kReadElsewhere holds the rest).
using Keys = std::initializer_list<const char*>;
constexpr Keys kSecondsKeys = {"iteration_time_s", "step_time_s", "time_per_iteration_s", "seconds_per_step",
                               "seconds_per_iteration", "sec_per_step", "sec_per_iter", "step_seconds",
                               "iteration_seconds", "time_per_step_s", "step_time_sec", "iteration_time_sec"};
constexpr Keys kMillisecondsKeys = {"iteration_time_ms", "step_time_ms", "elapsed_time_per_iteration_ms", "ms_per_step",
                                    "ms_per_iteration", "time_per_step_ms", "time_per_iteration_ms", "step_ms"};
constexpr Keys kStepRateKeys = {"steps_per_second", "train_steps_per_second", "steps_per_s", "iterations_per_second",
                                "it_per_s", "iters_per_s"};
constexpr Keys kSampleRateKeys = {"samples_per_s", "sequences_per_s", "seqs_per_s", "samples_per_second", "samples_per_sec",
                                  "sequences_per_second", "seq_per_s", "train_samples_per_second", "throughput_samples_per_s"};
constexpr Keys kTokenRateKeys = {"tokens_per_s", "tokens_per_second", "tokens_per_sec", "tok_per_s",
                                 "throughput_tokens_per_s", "throughput_tokens_per_second", "global_tokens_per_s"};
constexpr Keys kTokenRatePerGpuKeys = {"tokens_per_s_per_gpu", "tokens_per_second_per_gpu", "tokens_per_sec_per_gpu",
                                       "tps_per_gpu", "tgs", "tokens_per_gpu_per_s", "tokens_per_gpu_per_second",
                                       "tokens_per_s_per_device", "tokens_per_second_per_device", "tokens_per_device_per_s"};
// TFLOP/s a GPU in the convention tflops_kind states; in the model or the hardware count by their names.
constexpr Keys kFlopRateKeys = {"tflops_per_gpu", "tflops_per_device", "achieved_tflops_per_gpu"};
constexpr Keys kModelFlopRateKeys = {"model_tflops_per_gpu", "model_tflops_per_device"};
constexpr Keys kHardwareFlopRateKeys = {"hardware_tflops_per_gpu", "hfu_tflops_per_gpu", "hardware_tflops_per_device"};
constexpr Keys kMfuKeys = {"mfu", "mfu_percent", "mfu_pct"};
constexpr Keys kHfuKeys = {"hfu", "hfu_percent", "hfu_pct"};
constexpr Keys kUnitlessStepKeys = {"step_time", "iteration_time", "time_per_iteration", "time_per_step"};
constexpr Keys kUnitMemoryKeys = {"memory_gb", "memory_gib", "peak_memory_gb", "peak_memory_gib", "memory_per_gpu_gb",
                                  "max_memory_allocated_gb", "max_memory_reserved_gb", "max_memory_allocated_gib",
                                  "max_memory_reserved_gib", "memory_allocated_gb", "memory_reserved_gb",
                                  "memory_allocated_gib", "memory_reserved_gib", "allocated_memory_gb",
                                  "reserved_memory_gb", "gpu_memory_gb", "memory_used_gb", "max_memory_gb"};
constexpr Keys kUnitlessMemoryKeys = {"peak_memory", "memory", "memory_per_gpu", "peak_memory_per_gpu", "gpu_memory",
                                      "max_memory_allocated", "max_memory_reserved", "memory_allocated",
                                      "memory_reserved", "memory_used"};
// Read beside the figures: their conventions and units, the rank a peak was read on, the outcome.
constexpr Keys kReadElsewhere = {"throughput", "aggregate_pflops", "tflops_kind", "model_tflop_column", "memory_unit",
                                 "memory_kind", "memory_metric", "memory_note", "memory_stage", "memory_rank", "oom",
                                 "out_of_memory", "fits", "outcome", "status", "result", "error"};

// The fields of `measured` that hold a figure (a number, or text with a digit) under a name none of the lists reads.
std::vector<std::string> unreadFields(const nlohmann::json& meas) {
    std::vector<std::string> out;
    if (!meas.is_object()) return out;
    for (const auto& [key, value] : meas.items()) {
        const bool figure = (value.is_number() && !value.is_boolean()) ||
                            (value.is_string() && value.get<std::string>().find_first_of("0123456789") != std::string::npos);
        if (!figure) continue;
        bool known = false;
        for (const Keys& keys : {kSecondsKeys, kMillisecondsKeys, kStepRateKeys, kSampleRateKeys, kTokenRateKeys,
                                 kTokenRatePerGpuKeys, kFlopRateKeys, kModelFlopRateKeys, kHardwareFlopRateKeys, kMfuKeys,
                                 kHfuKeys, kUnitlessStepKeys, kUnitMemoryKeys, kUnitlessMemoryKeys, kReadElsewhere})
            for (const char* k : keys) known = known || key == k;
        if (!known) out.push_back(key);
    }
    return out;
}

// Which rank's memory the record gives (measured.memory_stage: "first", "last" or a stage index; measured.memory_rank:
// a global rank, or "last" for world_size - 1). Megatron-LM writes its memory to TensorBoard from the last rank only
// (global_vars.py: the writer is made where rank == world_size - 1), so its logged peak is the last stage's. A rank
// is its stage under the rank order records run with, Megatron's tp-cp-ep-dp-pp: the stages outermost.
void readMemoryStage(const nlohmann::json& meas, const std::string& ptr, ValidationCase& c, std::string& refusal) {
    const Plan& plan = c.scenario.plan;
    for (const char* key : {"memory_stage", "memory_rank"}) {
        if (!meas.contains(key) || meas[key].is_null()) continue;
        const nlohmann::json& v = meas[key];
        const std::string at = ptr + "/measured/" + key;
        const bool isRank = std::string(key) == "memory_rank";
        const int count = isRank ? plan.worldSize() : plan.pp;
        if (v.is_string()) {
            const std::string w = lower(v.get<std::string>());
            if (w == "last" || w == "last stage" || w == "last rank" || w == "world_size - 1" || w == "world_size-1")
                c.measured.memoryStage = plan.pp - 1;
            else if (w == "first" || w == "first stage" || w == "first rank")
                c.measured.memoryStage = 0;
            else {
                refusal = at + ": expected \"first\", \"last\" or " + (isRank ? "a rank" : "a stage index") + ", got \"" +
                          v.get<std::string>() + "\"";
                return;
            }
        } else if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < count) {
            const int64_t n = v.get<int64_t>();
            c.measured.memoryStage = static_cast<int>(isRank ? n / (plan.worldSize() / plan.pp) : n);
        } else {
            refusal = at + ": expected \"first\", \"last\" or " + (isRank ? "a rank from 0 to " : "a stage index from 0 to ") +
                      std::to_string(count - 1) + ", got " + v.dump();
            return;
        }
        c.assumptions.push_back("peak memory compared on pipeline stage " + std::to_string(*c.measured.memoryStage) +
                                " (measured/" + key + ")");
        return;
    }
}

// A run in deterministic mode (Megatron-LM's --deterministic-mode, Transformer Engine's
// NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, torch.use_deterministic_algorithms) runs other kernels than tessel costs: on
// Hopper cuDNN's attention backward takes its dP-workspace decomposition (NVIDIA/cudnn-frontend PR 398), on Ampere
// FlashAttention-2's ordered dQ accumulation, on Blackwell Transformer Engine leaves cuDNN for FlashAttention when
// the attention has dropout (fused_attn.cpp, PR 2584), and NCCL is held to its ring algorithm. Its step time is kept
// out of the comparison, said; its memory is compared.
void readDeterministicMode(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c) {
    const nlohmann::json& plan = rec.value("plan", nlohmann::json::object());
    for (const char* key : {"deterministic", "deterministic_mode", "deterministic_algorithms"}) {
        if (!boolean(plan, key).value_or(false)) continue;
        if (c.measured.stepSeconds) {
            char text[64];
            std::snprintf(text, sizeof text, "%.4g s", *c.measured.stepSeconds);
            c.assumptions.push_back("measured step (" + std::string(text) + ", " + c.measured.stepSource.substr(ptr.size() + 1) +
                                    ") not compared: plan/" + key +
                                    " runs deterministic kernels (attention backward, NCCL ring) tessel does not cost");
            c.measured.stepSeconds.reset();
            c.measured.stepSource.clear();
        }
        return;
    }
}

// The figure a memory field holds, in the unit written beside it: a number, a number with its unit ("67.6 GiB"),
// approximate ("~56 GiB", "about 56 GB"), a range ("55-57 GiB": its midpoint), a share of the GPU's memory ("71%",
// "71% of 80 GB"), or one figure per rank or stage (an array, or an object of them: the highest, the peak the run
// needed, compared with tessel's highest stage). A bound ("< 80 GB", "under 40 GB") is no peak: not read, said.
struct MemoryFigure {
    double value = 0.0;          // in the field's unit (unless `bytes`)
    std::string written;         // the text the unit is read from
    std::string note;            // what was made of a field that is not one plain figure ("" for one)
    std::optional<double> bytes; // a share of the GPU's memory, already in bytes
    bool bound = false;          // a bound, not a figure: not compared
};

std::optional<MemoryFigure> memoryFigure(const nlohmann::json& meas, const char* key, double gpuBytes) {
    const nlohmann::json* v = member(meas, key);
    if (!v) return std::nullopt;
    const std::string at = std::string("measured/") + key;
    char num[48];
    if (v->is_number()) return MemoryFigure{v->get<double>(), "", "", std::nullopt, false};
    if (v->is_array() || v->is_object()) {
        // One figure a rank or stage: the highest of those that read as a plain figure.
        MemoryFigure best;
        int n = 0;
        for (const auto& [k, e] : v->items()) {
            nlohmann::json one = {{"x", e}};
            const auto f = memoryFigure(one, "x", gpuBytes);
            if (!f || f->bound || f->bytes) continue;
            ++n;
            if (n == 1 || f->value > best.value) best = *f;
            if (best.written.empty() && e.is_string()) best.written = e.get<std::string>();
        }
        if (n == 0) return std::nullopt;
        std::snprintf(num, sizeof num, "%g", best.value);
        best.note = at + " lists " + std::to_string(n) + " figures (one a rank or stage): the highest, " + num +
                    ", compared with tessel's highest stage";
        return best;
    }
    if (!v->is_string()) return std::nullopt;
    const std::string raw = v->get<std::string>();
    std::string l = lower(raw);
    std::smatch m;
    if (std::regex_search(l, std::regex(R"(^\s*(<|>|≤|≥|(under|over|below|above|at most|at least|up to|less than|more than)\b))"))) {
        MemoryFigure b;
        b.bound = true;
        b.note = at + " \"" + raw + "\" is a bound, not a peak: not compared";
        return b;
    }
    std::string note;
    if (std::regex_search(l, m, std::regex(R"(^\s*(~|≈|about|approx\.?|approximately|around|roughly|circa|ca\.)\s*)"))) {
        l = l.substr(static_cast<size_t>(m.length(0)));
        note = at + " \"" + raw + "\" read as approximate";
    }
    if (std::regex_search(l, m, std::regex(R"(^\s*([0-9]+(\.[0-9]+)?)\s*%)"))) {
        // A share of the GPU's memory: of the capacity written after it ("of 80 GB"), else the GPU's.
        double capacity = gpuBytes;
        std::smatch c;
        if (std::regex_search(l, c, std::regex(R"(of\s+([0-9]+(\.[0-9]+)?)\s*(gib|gb)\b)")))
            capacity = std::stod(c[1].str()) * (c[3].str() == "gib" ? 1073741824.0 : 1e9);
        MemoryFigure f;
        f.value = std::stod(m[1].str());
        f.bytes = f.value / 100.0 * capacity;
        std::snprintf(num, sizeof num, "%.2f GiB", *f.bytes / 1073741824.0);
        f.note = at + " \"" + raw + "\" read as that share of " +
                 (capacity == gpuBytes ? std::string("the GPU's memory") : std::string("the capacity it names")) + ": " + num;
        return f;
    }
    if (std::regex_search(l, m, std::regex(R"(^\s*([0-9]+(\.[0-9]+)?)\s*(-|–|to)\s*([0-9]+(\.[0-9]+)?)(?![0-9.]))"))) {
        const double lo = std::stod(m[1].str()), hi = std::stod(m[4].str());
        if (hi > lo) {
            std::snprintf(num, sizeof num, "%g", (lo + hi) / 2.0);
            return MemoryFigure{(lo + hi) / 2.0, raw, at + " \"" + raw + "\" is a range: its midpoint, " + num, std::nullopt, false};
        }
    }
    nlohmann::json plain = {{"x", l}};
    const auto n = number(plain, "x");
    if (!n) return std::nullopt;
    return MemoryFigure{*n, raw, note, std::nullopt, false};
}

// What a source's FLOP count holds of attention, read from its stated convention (tflops_kind, model_tflop_column;
// lower case): whole (tessel's count, Narayanan et al. 2021 eq. 3), half under a causal mask ("causal" without
// "whole" or "full": NeMo's flops_formulas since 2025-08-09), or none: 6 N a token ("6ND", "6 x params"; 8 N with the
// recompute) with no term added, or attention said to be left out.
enum class AttentionCounted { Whole, Causal, None };
AttentionCounted attentionCountedIn(const std::string& kind) {
    static const std::regex excluded(R"((exclud\w*|without|not count\w*|ignor\w*|omit\w*)\s+(the\s+)?attention|attention\s+(flops\s+)?((is|are)\s+)?(excluded|not counted|ignored|omitted|left out))");
    // 6 N a token, or 8 N where the count takes in the recomputed forward (read as hardware FLOPs by its words).
    static const std::regex sixN(R"((^|[^0-9.])[68]\s*[x*]?\s*n(d|t)?\b|(^|[^0-9.])[68]\s*[x*]\s*(the\s+)?(num_|number of )?param)");
    if (std::regex_search(kind, excluded) ||
        (std::regex_search(kind, sixN) && kind.find('+') == std::string::npos && !contains(kind, "attention")))
        return AttentionCounted::None;
    if (contains(kind, "causal") && !contains(kind, "whole") && !contains(kind, "full")) return AttentionCounted::Causal;
    return AttentionCounted::Whole;
}

// The figure fields written under a name tessel reads whose value is not one: not a positive number (a negative or
// zero figure, a word, an object), a utilization above 100%, a memory figure its reader cannot read (a bound, or
// words saying the run ran out of memory, are read as such below): "measured/<key>: <value> ...", each said, not read.
std::vector<std::string> invalidFigures(const nlohmann::json& meas, double gpuBytes) {
    std::vector<std::string> out;
    if (!meas.is_object()) return out;
    auto bad = [&](const char* key, const char* why) { out.push_back(std::string("measured/") + key + ": " + member(meas, key)->dump() + why); };
    for (const Keys& keys : {kSecondsKeys, kMillisecondsKeys, kStepRateKeys, kSampleRateKeys, kTokenRateKeys,
                             kTokenRatePerGpuKeys, kFlopRateKeys, kModelFlopRateKeys, kHardwareFlopRateKeys, kMfuKeys,
                             kHfuKeys, kUnitlessStepKeys})
        for (const char* key : keys) {
            const nlohmann::json* v = member(meas, key);
            if (!v || v->is_null()) continue;
            const auto n = number(meas, key);
            if (!n || !(*n > 0) || !std::isfinite(*n)) bad(key, " is not a positive number");
            else if ((keys.begin() == kMfuKeys.begin() || keys.begin() == kHfuKeys.begin()) && *n > 100.0) bad(key, " is above 100%");
        }
    for (const Keys& keys : {kUnitMemoryKeys, kUnitlessMemoryKeys})
        for (const char* key : keys) {
            const nlohmann::json* v = member(meas, key);
            if (!v || v->is_null()) continue;
            if (v->is_string() && outOfMemoryInProse(v->get<std::string>()).value_or(false)) continue;
            const auto f = memoryFigure(meas, key, gpuBytes);
            if (f && (f->bound || (f->value > 0 && std::isfinite(f->value)))) continue;
            bad(key, " is not a memory figure tessel reads (a positive number with its unit)");
        }
    return out;
}

} // namespace

void readMeasured(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c, std::string& refusal) {
    const nlohmann::json& meas = rec.value("measured", nlohmann::json::object());
    const nlohmann::json& der = rec.value("derived", nlohmann::json::object());
    const Plan& plan = c.scenario.plan;
    const double tokens = static_cast<double>(plan.globalBatch) * static_cast<double>(c.scenario.model.seqLen);
    // The first of `keys` the record states as a positive number, with its key.
    auto firstOf = [&](std::initializer_list<const char*> keys) -> std::optional<std::pair<double, std::string>> {
        for (const char* key : keys)
            if (auto v = number(meas, key); v && *v > 0) return std::pair<double, std::string>{*v, key};
        return std::nullopt;
    };
    // A step time under the names records give it, in seconds or in milliseconds (Megatron-LM's log line).
    auto seconds = firstOf(kSecondsKeys);
    auto millis = firstOf(kMillisecondsKeys);
    // Unitless names: the unit written beside the number ("1.42 s", "1420 ms"); a bare number is seconds, said.
    if (!seconds && !millis)
        for (const char* key : kUnitlessStepKeys) {
            const auto v = number(meas, key);
            if (!v || *v <= 0) continue;
            const std::string written = lower(text(meas, key));
            if (std::regex_search(written, std::regex(R"([0-9.]\s*(ms|msec|millisecond))"))) millis = std::pair<double, std::string>{*v, key};
            else if (std::regex_search(written, std::regex(R"([0-9.]\s*(min|minute)s?\b)")))
                seconds = std::pair<double, std::string>{*v * 60.0, key}; // "0.5 min" had been read as 0.5 s
            else {
                seconds = std::pair<double, std::string>{*v, key};
                if (!std::regex_search(written, std::regex(R"([0-9.]\s*(s|sec|second)s?\b)")))
                    c.assumptions.push_back(std::string("measured/") + key + " has no unit: read in seconds");
            }
            break;
        }
    // Steps a second (Hugging Face Trainer's train_steps_per_second, a progress bar's it/s): the step is its inverse.
    if (!seconds && !millis)
        if (auto rate = firstOf(kStepRateKeys))
            seconds = std::pair<double, std::string>{1.0 / rate->first, rate->second};
    auto samples = firstOf(kSampleRateKeys);
    auto tokensPerSecond = firstOf(kTokenRateKeys);
    auto tokensPerGpu = firstOf(kTokenRatePerGpuKeys);
    // A throughput in prose ("5770 tokens/s", "710 tokens/s/GPU", "2.8 samples/s"): by its unit.
    if (!seconds && !millis && !samples && !tokensPerSecond && !tokensPerGpu)
        if (const auto v = number(meas, "throughput"); v && *v > 0) {
            const std::string written = lower(text(meas, "throughput"));
            const bool perGpu = contains(written, "/gpu") || contains(written, "per gpu") || contains(written, "/device");
            if (contains(written, "token") || contains(written, "tok/")) {
                (perGpu ? tokensPerGpu : tokensPerSecond) = std::pair<double, std::string>{*v, "throughput"};
            } else if (std::regex_search(written, std::regex(R"([0-9.]\s*(s|sec|seconds?)\s*/\s*(it|iter|iteration|step)s?\b)"))) {
                seconds = std::pair<double, std::string>{*v, "throughput"}; // "1.1 s/it"
            } else if (std::regex_search(written, std::regex(R"([0-9.]\s*(it|iter|iteration|step)s?\s*/\s*(s|sec|second)\b)"))) {
                seconds = std::pair<double, std::string>{1.0 / *v, "throughput"}; // "0.9 it/s"
            } else if (!perGpu && (contains(written, "sample") || contains(written, "seq"))) {
                samples = std::pair<double, std::string>{*v, "throughput"};
            } else {
                c.assumptions.push_back("measured/throughput \"" + text(meas, "throughput") +
                                        "\" is in a unit tessel does not read (tokens/s, tokens/s/GPU, samples/s, it/s, s/it): not used");
            }
        }
    if (seconds || millis) {
        c.measured.stepSeconds = seconds ? seconds->first : millis->first / 1000.0;
        c.measured.stepSource = ptr + "/measured/" + (seconds ? seconds->second : millis->second);
    } else if (tokensPerSecond) {
        c.measured.stepSeconds = tokens / tokensPerSecond->first;
        c.measured.stepSource = ptr + "/measured/" + tokensPerSecond->second;
    } else if (tokensPerGpu) {
        c.measured.stepSeconds = tokens / (tokensPerGpu->first * plan.worldSize());
        c.measured.stepSource = ptr + "/measured/" + tokensPerGpu->second;
    } else if (samples) {
        c.measured.stepSeconds = static_cast<double>(plan.globalBatch) / samples->first;
        c.measured.stepSource = ptr + "/measured/" + samples->second;
    } else if (auto dt = number(der, "iteration_time_s"); dt && *dt > 0) {
        c.measured.stepSeconds = *dt;
        c.measured.stepSource = ptr + "/derived/iteration_time_s";
    } else {
        // Only a FLOP rate: the step that rate implies with tessel's model-FLOP count (FORMULAS.md §3, Narayanan
        // et al. 2021 eq. 3), a hardware count (HFU, or SC'21's 96 B s l h^2) with full recompute being 4/3 of
        // it. Listed as an assumption: the source's own FLOP formula may differ by a few percent.
        const std::string kind = lower(text(meas, "tflops_kind") + " " + text(meas, "model_tflop_column"));
        auto stated = [&](std::initializer_list<const char*> keys) -> std::optional<std::pair<double, std::string>> {
            for (const char* key : keys)
                if (auto v = number(meas, key); v && *v > 0) return std::pair<double, std::string>{*v, key};
            return std::nullopt;
        };
        // A rate per GPU whose convention the record's tflops_kind says; one whose name says it (model_, hardware_).
        const auto rate = stated(kFlopRateKeys);
        const auto modelRate = stated(kModelFlopRateKeys);
        const auto hardwareRate = stated(kHardwareFlopRateKeys);
        const auto aggregate = stated({"aggregate_pflops"});
        const auto mfuKey = stated(kMfuKeys);
        const auto hfuKey = stated(kHfuKeys);
        // A record with only an HFU (or only hardware FLOP rates) counts hardware FLOPs.
        const bool onlyHfu = !rate && !modelRate && !aggregate && !mfuKey && (hfuKey || hardwareRate);
        // A convention that counts the recomputed forward ("including activation recomputation", "counted with
        // recompute") is a hardware count; one that excludes it ("excluding recompute") is not.
        const bool countsRecompute =
            std::regex_search(kind, std::regex(R"((recomput|rematerial|checkpoint))")) &&
            !std::regex_search(kind, std::regex(R"((exclud|without|w/o|not count|no |excl\.?)[a-z ]*(activation )?(recomput|rematerial|checkpoint))")) &&
            !std::regex_search(kind, std::regex(R"((recomput|rematerial|checkpoint)[a-z]*[ ,(]*(excluded|not counted|omitted|left out))"));
        // Megatron's 96 B s l h^2 formula (SC'21 eq. 3) counts the recomputed forward; a bare 96 ("6ND on 96 GPUs") is not it.
        static const std::regex megatron96(R"((^|[^0-9.])96\s*[*x]?\s*b\b)");
        bool hardware = onlyHfu || contains(kind, "hfu") || contains(kind, "hardware") || std::regex_search(kind, megatron96) || countsRecompute;
        // A rate named for its convention is read in it, whatever tflops_kind says of the record's other columns.
        if (!rate && modelRate) hardware = false;
        else if (!rate && !modelRate && hardwareRate) hardware = true;
        // Partial recompute (recompute_layers) replays that share of the layers' forward.
        double replayed = 0.0;
        for (int s = 0; s < plan.pp; ++s) replayed += recomputedLayers(c.scenario.model, plan, s).layers;
        replayed /= std::max(1, c.scenario.model.layers);
        // The source's own count where its convention says how it counts attention (whole is tessel's).
        const AttentionCounted counted = attentionCountedIn(kind);
        std::string countName = "tessel's " + std::string(hardware ? "hardware" : "model") + "-FLOP count";
        double counts = 0.0;
        if (counted == AttentionCounted::None) {
            // 6 N a token: N the record's params for a dense model, else (an MoE model, or none stated) the
            // parameters a token uses by tessel's count.
            const auto published = number(rec.value("model", nlohmann::json::object()), "params");
            const bool byRecord = !c.scenario.model.moe && published && *published > 0;
            const double n = byRecord ? *published : static_cast<double>(activeParameters(c.scenario.model));
            counts = 6.0 * n * tokens;
            char text[256];
            std::snprintf(text, sizeof text, "the source's 6 x N x tokens (N = %.4g B, %s; attention not counted, as its convention says)",
                          n / 1e9, byRecord ? "model/params" : "the parameters a token uses");
            countName = text;
        } else {
            counts = modelFlopsPerStep(c.scenario.model, plan, counted == AttentionCounted::Causal ? 0.5 : 1.0);
            if (counted == AttentionCounted::Causal)
                countName += " with attention under its causal mask counted half, as the source's convention says";
        }
        const double flops = counts * (hardware ? 1.0 + replayed / 3.0 : 1.0);
        const double peak = c.scenario.cluster.peakFlops(findPrecisionRecipe(plan.precision) ? precisionRecipeOf(plan).computeDtype
                                                                                             : Dtype::Bf16);
        const double gpus = static_cast<double>(plan.worldSize());
        // A utilization as a fraction, or a percentage as tables print it (42 for 42%; none exceeds 1.5), said.
        auto utilization = [&](const std::string& key) -> std::optional<double> {
            auto u = number(meas, key.c_str());
            if (!u || *u <= 0 || *u > 100.0) return std::nullopt;
            if (*u < 1.5) return *u;
            char text[48];
            std::snprintf(text, sizeof text, "%g", *u);
            c.assumptions.push_back("measured/" + key + " " + text + " read as a percentage");
            return *u / 100.0;
        };
        const auto perGpu = rate ? rate : modelRate ? modelRate : hardwareRate;
        if (perGpu && flops > 0) {
            c.measured.stepSeconds = flops / (perGpu->first * 1e12 * gpus);
            c.measured.stepSource = ptr + "/measured/" + perGpu->second;
        } else if (aggregate && flops > 0) {
            c.measured.stepSeconds = flops / (aggregate->first * 1e15);
            c.measured.stepSource = ptr + "/measured/aggregate_pflops";
        } else if (const auto& key = onlyHfu ? hfuKey : mfuKey; key && flops > 0 && peak > 0) {
            if (const auto u = utilization(key->second)) {
                c.measured.stepSeconds = flops / (*u * peak * gpus);
                c.measured.stepSource = ptr + "/measured/" + key->second;
            }
        }
        if (c.measured.stepSeconds)
            c.assumptions.push_back("step time not stated: derived from " + c.measured.stepSource.substr(ptr.size() + 1) +
                                    " with " + countName);
    }
    // A step no run of this plan on this GPU can have: not a positive finite time (a rate so large it rounds the step to
    // nothing), or one at which the model's FLOPs would run faster than twice the GPU's highest dense peak (twice:
    // a count of causal attention as whole, as some sources make, at most doubles what the kernels do).
    if (c.measured.stepSeconds) {
        double highestPeak = 0.0;
        for (const auto& [dtype, flops] : c.scenario.cluster.gpu.peakFlopsPerSecond) highestPeak = std::max(highestPeak, flops);
        const double step = *c.measured.stepSeconds;
        const double rate = step > 0 ? modelFlopsPerStep(c.scenario.model, plan) / (step * plan.worldSize()) : 0.0;
        std::string why;
        char text[256];
        if (!(step > 0) || !std::isfinite(step) || !std::isfinite(rate)) {
            std::snprintf(text, sizeof text, "gives a step of %g s, no time a step can take", step);
            why = text;
        } else if (highestPeak > 0 && rate < 1e-6 * highestPeak) {
            // A bound on what a record can mean, not on efficiency: a millionth of the peak is a GPU that idles.
            std::snprintf(text, sizeof text, "gives a step of %.3g s, at which the model's FLOPs would run at %.3g FLOP/s a GPU, "
                          "below a millionth of the GPU's highest dense peak (%.4g TFLOP/s)", step, rate, highestPeak / 1e12);
            why = text;
        } else if (highestPeak > 0 && rate > 2.0 * highestPeak) {
            std::snprintf(text, sizeof text, "gives a step of %.3g s, at which the model's FLOPs would run at %.3g TFLOP/s a GPU, "
                          "above twice the GPU's highest dense peak (%.4g TFLOP/s)", step, rate / 1e12, highestPeak / 1e12);
            why = text;
        }
        if (!why.empty()) {
            c.measured.invalidFields.push_back(c.measured.stepSource.substr(ptr.size() + 1) + " " + why);
            c.assumptions.push_back(c.measured.invalidFields.back() + ": not compared");
            c.measured.stepSeconds.reset();
            c.measured.stepSource.clear();
        }
    }
    // The peak memory under the names records give it; a key naming GiB or the allocator's counter says so itself.
    std::optional<std::pair<MemoryFigure, std::string>> memory;
    const double gpuBytes = static_cast<double>(c.scenario.cluster.gpu.memoryBytes);
    // Keys that name no unit: the unit written beside the number ("67.6 GiB", "61 GB (nvidia-smi)", "70000 MiB").
    std::optional<std::string> memoryOom; // a memory field that says the run ran out of memory
    // The first key of `keys` whose figure reads; a bound is said and passed over.
    auto firstFigure = [&](std::initializer_list<const char*> keys) {
        for (const char* key : keys)
            if (auto f = memoryFigure(meas, key, gpuBytes)) {
                if (f->bound) {
                    c.assumptions.push_back(f->note);
                    continue;
                }
                if (f->value > 0) return std::optional<std::pair<MemoryFigure, std::string>>{{*f, key}};
            }
        return std::optional<std::pair<MemoryFigure, std::string>>{};
    };
    // Keys that name their unit (and, with "allocated" or "reserved", the allocator's counter).
    memory = firstFigure(kUnitMemoryKeys);
    if (!memory) memory = firstFigure(kUnitlessMemoryKeys);
    for (const char* key : {"memory_gb", "memory_gib", "peak_memory_gb", "peak_memory_gib", "memory_per_gpu_gb", "peak_memory",
                            "memory", "memory_per_gpu", "peak_memory_per_gpu", "gpu_memory"})
        if (!number(meas, key) && outOfMemoryInProse(text(meas, key)).value_or(false)) {
            memoryOom = key;
            break;
        }
    if (memory) {
        // Sources print memory in GB of 1e9 bytes or GiB; torch.cuda.max_memory_allocated()/1e9 and nvidia-smi
        // GiB both appear. The record's unit note (or a key in GiB, or the unit written beside the number)
        // decides; GB (1e9) otherwise, said for a key that names no unit.
        const MemoryFigure& fig = memory->first;
        const std::string& key = memory->second;
        const std::string written = lower(fig.written);
        const std::string unit = lower(text(meas, "memory_unit")) + " " + key + " " + written;
        double scale = contains(unit, "gib") ? 1073741824.0 : 1e9;
        if (contains(written, "mib")) scale = 1048576.0;
        else if (std::regex_search(written, std::regex(R"([0-9.]\s*mb\b)"))) scale = 1e6;
        else if (std::regex_search(written, std::regex(R"([0-9.]\s*tb\b)"))) scale = 1e12;
        const bool unitStated = contains(unit, "gib") || contains(unit, "gb") || contains(unit, "mib") || scale != 1e9;
        if (!fig.note.empty()) c.assumptions.push_back(fig.note);
        if (!unitStated && !fig.bytes)
            c.assumptions.push_back(std::string("measured/") + key + " has no unit: read in GB (1e9 bytes)");
        c.measured.memoryBytes = fig.bytes ? *fig.bytes : fig.value * scale;
        c.measured.memorySource = ptr + "/measured/" + key;
        const std::string kind = lower(text(meas, "memory_kind") + " " + text(meas, "memory_metric") + " " +
                                       text(meas, "memory_note") + " " + text(rec, "notes")) +
                                 (contains(key, "allocated") ? " allocated" : contains(key, "reserved") ? " reserved" : "");
        c.measured.memoryIsAllocated = (contains(kind, "allocated") || contains(kind, "memory_allocated")) &&
                                       !contains(kind, "reserved") && !contains(kind, "nvidia-smi");
        c.measured.memoryIsAllocatorReserved = !c.measured.memoryIsAllocated && contains(kind, "reserved") &&
                                               !contains(kind, "nvidia-smi") && !contains(kind, "nvidia smi");
        if (!c.measured.memoryIsAllocated && kind.find_first_not_of(' ') == std::string::npos)
            c.assumptions.push_back("memory figure's kind not stated: taken as the device's, as nvidia-smi shows it (CUDA "
                                    "context, NCCL's buffers and the allocator's cache included)");
    }
    // A peak no GPU of this kind can hold: above twice its memory (a device's own figure cannot pass it; twice leaves
    // room for a requirement a run that ran out of memory states), or not finite.
    if (c.measured.memoryBytes && (!std::isfinite(*c.measured.memoryBytes) || *c.measured.memoryBytes > 2.0 * gpuBytes)) {
        char text[256];
        std::snprintf(text, sizeof text, " gives a peak of %.4g GB, above twice the GPU's %.4g GB",
                      *c.measured.memoryBytes / 1e9, gpuBytes / 1e9);
        c.measured.invalidFields.push_back(c.measured.memorySource.substr(ptr.size() + 1) + text);
        c.assumptions.push_back(c.measured.invalidFields.back() + ": not compared");
        c.measured.memoryBytes.reset();
        c.measured.memorySource.clear();
        memory.reset();
    }
    if (memory) readMemoryStage(meas, ptr, c, refusal);
    readDeterministicMode(rec, ptr, c);
    if (auto oom = boolean(meas, "oom")) c.measured.outOfMemory = *oom;
    else if (auto oom2 = boolean(meas, "out_of_memory")) c.measured.outOfMemory = *oom2;
    else if (auto fits = boolean(meas, "fits")) c.measured.outOfMemory = !*fits;
    else if (memoryOom) {
        c.measured.outOfMemory = true;
        c.assumptions.push_back("out-of-memory outcome read from measured/" + *memoryOom + " (\"" + text(meas, memoryOom->c_str()) + "\")");
    } else
        for (const char* key : {"outcome", "status", "result", "error"})
            if (auto said = outOfMemoryInProse(text(meas, key))) {
                c.measured.outOfMemory = *said;
                c.assumptions.push_back(std::string("out-of-memory outcome read from measured/") + key + " (\"" +
                                        text(meas, key) + "\")");
                break;
            }
    for (const std::string& bad : invalidFigures(meas, gpuBytes)) {
        c.measured.invalidFields.push_back(bad);
        c.assumptions.push_back(bad + ": not read");
    }
    for (const std::string& key : unreadFields(meas)) {
        c.measured.unreadFields.push_back("measured/" + key);
        c.assumptions.push_back("measured/" + key + " is not a field tessel reads: not compared");
    }
}

} // namespace tessel::sim::detail
