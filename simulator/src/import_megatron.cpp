// Megatron-LM training logs -> a tessel scenario (model and plan from the printed arguments) and a measured run
// (step time from the iteration lines, peak memory per rank from the memory reports); docs/import.md.
// Formats: megatron/training/arguments.py `_print_args` ("  name ....... value" between "---- arguments ----"
// and "---- end of arguments ----"), training.py `training_log` (" iteration N/ M | key: value | ... |") and
// utils.py `report_memory` ("[Rank R] (after N iterations) memory (MB) | allocated: A | max allocated: ...").
#include "tessel/sim/import.hpp"

#include "validation_prose.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessel::sim {

namespace {

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r");
    return s.substr(a, b - a + 1);
}

std::optional<double> toNumber(const std::string& s) {
    const std::string t = trim(s);
    if (t.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

std::string where(const std::string& source, int line) { return source + ":" + std::to_string(line); }

// Megatron prints None, True/False, numbers and enums ("AttnBackend.auto") as Python's str() does.
// A Megatron-LM per-layer argument (--moe-layer-freq, --window-attn-skip-freq): an integer N, expanded layer by layer
// (0-based) as `everyN` says, or the list of 0s and 1s it was expanded to; empty unless one flag a layer.
template <class EveryN>
std::vector<int> layerFlagsOf(const std::string& value, int64_t layers, EveryN everyN) {
    std::vector<int> pattern;
    if (const auto n = toNumber(value); n && *n >= 1.0 && *n == std::floor(*n))
        for (int64_t i = 0; i < layers; ++i) pattern.push_back(everyN(i, static_cast<int64_t>(*n)) ? 1 : 0);
    else if (const auto list = prose::layerPattern(value)) pattern = *list;
    if (pattern.size() != static_cast<size_t>(std::max<int64_t>(layers, 0))) pattern.clear();
    return pattern;
}

bool isUnset(const std::string& v) { return v == "None" || v == "False" || v == "0" || v == "0.0" || v == "[]" || v.empty(); }

double medianOf(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0.0;
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Arguments that decide nothing tessel predicts (data, optimizer hyperparameters, logging, checkpoints, seeds,
// evaluation, initialisation, launch plumbing), by name prefix. Everything not mapped and not here is named.
bool noEffectOnPrediction(const std::string& name) {
    static const char* prefixes[] = {
        "lr", "min_lr", "adam_", "sgd_", "weight_decay", "start_weight_decay", "end_weight_decay", "clip_grad", "seed",
        "data_", "train_", "valid_", "test_", "eval_", "save", "load", "log_", "tensorboard", "wandb", "vocab_file",
        "merge_file", "tokenizer_", "init_method", "split", "exit_", "timing_log", "distributed_timeout", "local_rank",
        "rank", "iteration", "consumed_", "skip_train", "finetune", "pretrained_checkpoint", "ckpt_", "dist_ckpt",
        "use_checkpoint", "non_persistent", "async_save", "auto_detect_ckpt", "one_logger", "app_tag", "logging_level",
        "barrier_with_L1_time", "check_for_nan", "num_workers", "dataloader_", "mock_data", "mmap_", "reset_",
        "eod_mask_loss", "create_attention_mask", "object_storage", "hidden_dropout_is_zero", "loss_scale",
        "initial_loss_scale", "min_loss_scale", "hysteresis", "override_opt_param_scheduler",
        "use_checkpoint_opt_param_scheduler", "decoupled_lr", "decoupled_min_lr", "head_lr_mult", "adlr_",
        "print_", "profile", "record_memory_history", "memory_snapshot_path", "enable_one_logger", "params_dtype",
        "padded_vocab_size", "vocab_size", "make_vocab_size_divisible_by", "max_position_embeddings", "world_size",
        "transformer_impl", "use_mcore_models", "spec", "kv_channels", "distributed_backend", "micro_batch_size",
        "global_batch_size", "rampup_batch_size", "encoder_", "decoder_", "retro_", "ict_", "bert_", "biencoder_",
        "img_", "vision_", "titles_data_path", "indexer_", "block_data_path", "embedding_path", "query_in_block_prob",
        "use_one_sent_docs", "mask_", "short_seq_prob", "sample_rate", "short_", "inference_", "num_classes",
        "attention_dropout", "apply_query_key_layer_scaling", "attention_softmax_in_fp32", "fp32_residual_connection",
        "apply_residual_connection_post_layernorm", "layernorm_epsilon", "norm_epsilon", "init_", "rotary_",
        "rope_scaling", "use_rotary_position_embeddings", "yaml_cfg", "timing_", "tp_comm_bootstrap_backend",
        "enable_ft_package", "calculate_per_token_loss", "deterministic_mode", "test_mode", "use_torch_fsdp2",
        "nccl_communicator_config_path", "straggler_", "run_workload_inspector_server"};
    for (const char* p : prefixes)
        if (name.rfind(p, 0) == 0) return true;
    return false;
}

} // namespace

MegatronLog parseMegatronLog(const std::string& text, const std::string& source) {
    MegatronLog log;
    log.source = source;
    static const std::regex argLine(R"(^\s+([A-Za-z_][A-Za-z0-9_]*) \.* ?(.*)$)");
    static const std::regex iterationLine(R"(\biteration\s+(\d+)/\s*(\d+)\s*\|(.*)$)");
    static const std::regex memoryReport(
        R"(\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\) \| allocated: ([-+0-9.eE]+) \| max allocated: ([-+0-9.eE]+) \| reserved: ([-+0-9.eE]+) \| max reserved: ([-+0-9.eE]+))");
    static const std::regex paddedVocab(R"(padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\))");
    std::istringstream in(text);
    int lineNo = 0, blockStart = 0;
    // A count the log prints (an iteration, a rank, a vocabulary size): digits that fit an int.
    auto count = [&](const std::string& digits, const char* what) -> int {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (ec != std::errc() || end != digits.data() + digits.size() || v > std::numeric_limits<int>::max())
            throw InputError(where(source, lineNo), std::string(what) + " " + digits + " is not a count tessel reads (0 to " +
                                                        std::to_string(std::numeric_limits<int>::max()) + ")");
        return static_cast<int>(v);
    };
    auto megabytes = [&](const std::string& figure, const char* what) -> double {
        const auto v = toNumber(figure);
        if (!v || *v < 0.0)
            throw InputError(where(source, lineNo), std::string("memory report's ") + what + " \"" + figure + "\" is not a size in MB");
        return *v;
    };
    bool inArgs = false, sawArgs = false;
    for (std::string line; std::getline(in, line);) {
        ++lineNo;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find("-- arguments --") != std::string::npos) {
            if (sawArgs || inArgs) throw InputError(where(source, lineNo), "a second arguments block (one run per log)");
            inArgs = true;
            blockStart = lineNo;
            continue;
        }
        if (inArgs) {
            if (line.find("-- end of arguments --") != std::string::npos) {
                inArgs = false;
                sawArgs = true;
                continue;
            }
            std::smatch m;
            if (!std::regex_match(line, m, argLine))
                throw InputError(where(source, lineNo), "not an argument line (\"  name ...... value\") inside the arguments "
                                                        "block opened at line " + std::to_string(blockStart));
            log.args[m[1]] = trim(m[2]);
            log.argLines[m[1]] = lineNo;
            continue;
        }
        std::smatch m;
        if (std::regex_search(line, m, paddedVocab)) log.paddedVocab = count(m[3], "padded vocabulary size");
        if (line.find("memory (MB)") != std::string::npos && line.find("[Rank") != std::string::npos) {
            // Several ranks print at once, so one line may hold more than one report.
            int found = 0;
            for (auto it = std::sregex_iterator(line.begin(), line.end(), memoryReport); it != std::sregex_iterator(); ++it) {
                const std::smatch& r = *it;
                MegatronMemoryReport rep;
                rep.line = lineNo;
                rep.rank = count(r[1], "rank");
                rep.afterIterations = count(r[2], "iteration count");
                rep.allocatedMb = megabytes(r[3], "allocated");
                rep.maxAllocatedMb = megabytes(r[4], "max allocated");
                rep.reservedMb = megabytes(r[5], "reserved");
                rep.maxReservedMb = megabytes(r[6], "max reserved");
                log.memory.push_back(rep);
                ++found;
            }
            size_t reports = 0;
            for (size_t p = line.find("memory (MB)"); p != std::string::npos; p = line.find("memory (MB)", p + 1)) ++reports;
            if (static_cast<size_t>(found) != reports)
                throw InputError(where(source, lineNo), "a memory report that is not \"[Rank R] (after N iterations) memory (MB) "
                                                        "| allocated: A | max allocated: A | reserved: R | max reserved: R\"");
            continue;
        }
        if (std::regex_search(line, m, iterationLine)) {
            MegatronIteration it;
            it.line = lineNo;
            it.iteration = count(m[1], "iteration");
            it.trainIters = count(m[2], "train iterations");
            const std::string rest = m[3];
            // training_log ends every field with " |": a line that does not was cut off.
            if (trim(rest).empty() || trim(rest).back() != '|')
                throw InputError(where(source, lineNo), "truncated iteration line (training_log ends every field with '|')");
            std::stringstream fields(rest);
            for (std::string f; std::getline(fields, f, '|');) {
                f = trim(f);
                if (f.empty()) continue;
                const size_t colon = f.rfind(':');
                if (colon == std::string::npos)
                    throw InputError(where(source, lineNo), "iteration field \"" + f + "\" is not \"name: value\"");
                it.fields[trim(f.substr(0, colon))] = trim(f.substr(colon + 1));
            }
            auto number = [&](const char* key, bool required) -> std::optional<double> {
                const auto f = it.fields.find(key);
                if (f == it.fields.end()) {
                    if (required) throw InputError(where(source, lineNo), std::string("iteration line has no \"") + key + "\"");
                    return std::nullopt;
                }
                const auto v = toNumber(f->second);
                if (!v) throw InputError(where(source, lineNo), std::string("\"") + key + "\" is not a number: \"" + f->second + "\"");
                return v;
            };
            it.elapsedMs = *number("elapsed time per iteration (ms)", true);
            if (!(it.elapsedMs > 0.0)) throw InputError(where(source, lineNo), "elapsed time per iteration must be positive");
            it.tflopsPerGpu = number("throughput per GPU (TFLOP/s/GPU)", false);
            it.lossScale = number("loss scale", false);
            it.skipped = static_cast<int>(number("number of skipped iterations", false).value_or(0.0));
            it.nan = static_cast<int>(number("number of nan iterations", false).value_or(0.0));
            if (!log.iterations.empty() && it.iteration <= log.iterations.back().iteration)
                throw InputError(where(source, lineNo), "iteration " + std::to_string(it.iteration) +
                                                            " does not follow iteration " + std::to_string(log.iterations.back().iteration) +
                                                            " (two runs in one log?)");
            log.iterations.push_back(it);
        }
    }
    if (inArgs)
        throw InputError(where(source, blockStart), "the arguments block is not terminated (no \"end of arguments\" line): "
                                                    "truncated log");
    if (!sawArgs)
        throw InputError(source, "no Megatron-LM arguments block (\"------------------------ arguments "
                                 "------------------------\"): the scenario cannot be read from this log");
    if (log.iterations.empty())
        throw InputError(source, "no iteration lines (\" iteration N/ M | ... | elapsed time per iteration (ms): X | ...\")");
    return log;
}

ImportedRun importMegatronLog(const MegatronLog& log, const ClusterConfig& cluster, const MegatronImportOptions& o) {
    ProblemList problems;
    std::set<std::string> used;
    auto at = [&](const std::string& name) {
        const auto it = log.argLines.find(name);
        return it == log.argLines.end() ? log.source + " (arguments)" : where(log.source, it->second);
    };
    auto str = [&](const std::string& name) -> std::optional<std::string> {
        used.insert(name);
        const auto it = log.args.find(name);
        if (it == log.args.end()) return std::nullopt;
        return it->second;
    };
    // Every count the scenario takes from the arguments is a size, a degree or a batch: from 1 to `most` (the
    // limits a model or plan file has), so a 0 or a wrapped value never reaches the arithmetic below.
    auto integer = [&](const std::string& name, std::optional<int64_t> fallback, int64_t most) -> int64_t {
        const auto v = str(name);
        if (!v || *v == "None") {
            if (fallback) return *fallback;
            problems.add(at(name), "argument " + name + " is " + (v ? "None" : "not printed") + "; the scenario needs it");
            return 1;
        }
        const auto n = toNumber(*v);
        if (!n || *n != std::floor(*n)) {
            problems.add(at(name), "argument " + name + " = \"" + *v + "\" is not an integer");
            return 1;
        }
        if (*n < 1.0 || *n > static_cast<double>(most)) {
            problems.add(at(name), "argument " + name + " = " + *v + " is not from 1 to " + std::to_string(most));
            return 1;
        }
        return static_cast<int64_t>(*n);
    };
    using ML = ModelLimits;
    using PL = PlanLimits;
    auto flag = [&](const std::string& name) -> std::optional<bool> {
        const auto v = str(name);
        if (!v || *v == "None") return std::nullopt;
        if (*v == "True") return true;
        if (*v == "False") return false;
        problems.add(at(name), "argument " + name + " = \"" + *v + "\" is not True or False");
        return std::nullopt;
    };
    std::vector<std::string> warnings;

    // Model (megatron/training/arguments.py names).
    nlohmann::json model{{"schema_version", 1}, {"name", "megatron-import"}};
    const int64_t layers = integer("num_layers", std::nullopt, ML::layers), hidden = integer("hidden_size", std::nullopt, ML::hidden);
    const int64_t heads = integer("num_attention_heads", std::nullopt, ML::heads);
    model["layers"] = layers;
    model["hidden"] = hidden;
    model["heads"] = heads;
    model["kv_heads"] = flag("group_query_attention").value_or(false) ? integer("num_query_groups", std::nullopt, ML::heads) : heads;
    model["ffn_hidden"] = integer("ffn_hidden_size", 4 * hidden, ML::ffnHidden);
    model["seq_len"] = integer("seq_length", std::nullopt, ML::seqLen);
    if (heads > 0) {
        const int64_t kv = integer("kv_channels", hidden / heads, ML::heads);
        if (kv != hidden / heads) model["head_dim"] = kv;
    }
    if (const auto pv = str("padded_vocab_size"); pv && *pv != "None") model["vocab"] = integer("padded_vocab_size", std::nullopt, ML::vocab);
    else if (log.paddedVocab) model["vocab"] = *log.paddedVocab;
    else problems.add(log.source, "the log states no vocabulary size (padded_vocab_size, or the tokenizer's \"> padded vocab "
                                  "(size: V) with D dummy tokens (new size: P)\" line)");
    model["activation"] = flag("swiglu").value_or(false)         ? "swiglu"
                          : flag("squared_relu").value_or(false) ? "squared_relu"
                                                                 : "gelu";
    for (const char* other : {"openai_gelu", "onnx_safe"})
        if (flag(other).value_or(false)) warnings.push_back(std::string(other) + " = True: tessel models GELU, SwiGLU or squared ReLU");
    const std::string norm = str("normalization").value_or("LayerNorm");
    model["norm"] = norm == "RMSNorm" ? "rmsnorm" : "layernorm";
    if (norm != "RMSNorm" && norm != "LayerNorm") warnings.push_back("normalization = " + norm + ": modelled as LayerNorm");
    const std::string position = str("position_embedding_type").value_or(flag("use_rotary_position_embeddings").value_or(false) ? "rope" : "learned_absolute");
    // Megatron-DeepSpeed logs the enum itself ("PositionEmbeddingType.alibi", ".rotary", ".absolute").
    const bool alibi = position.find("alibi") != std::string::npos;
    const bool rope = position == "rope" || position.find("rotary") != std::string::npos;
    const bool learned = position == "learned_absolute" || position.find("absolute") != std::string::npos;
    model["position_embedding"] = alibi ? "alibi" : rope ? "rope" : "learned";
    if (!alibi && !rope && !learned)
        warnings.push_back("position_embedding_type = " + position + ": modelled as learned positions");
    // --rotary-percent (default 1.0): the part of each head RoPE rotates.
    if (const auto pct = str("rotary_percent"); rope && pct)
        if (const auto v = toNumber(*pct); v && *v != 1.0) model["rotary_percent"] = *v;
    model["tied_embeddings"] = !flag("untie_embeddings_and_output_weights").value_or(false);
    model["linear_bias"] = flag("add_bias_linear").value_or(true);
    if (flag("add_qkv_bias").value_or(false)) model["qkv_bias"] = true;
    if (flag("qk_layernorm").value_or(false)) model["qk_norm"] = true;
    // --window-size (left, right): a causal window of left + 1 keys when right is 0, in every layer unless
    // --window-attn-skip-freq gives some layers full attention: an integer N, every N-th layer (1-based, Megatron-core
    // is_layer_window_attention), or the list it was expanded to (1: windowed).
    if (const auto w = str("window_size"); w && !isUnset(*w)) {
        std::vector<int64_t> sides;
        for (size_t i = 0; i < w->size();) {
            const size_t digit = w->find_first_of("-0123456789", i);
            if (digit == std::string::npos) break;
            size_t len = 0;
            try { sides.push_back(std::stoll(w->substr(digit), &len)); } catch (const std::exception&) { break; }
            i = digit + std::max<size_t>(len, 1);
        }
        const auto skip = str("window_attn_skip_freq");
        if (sides.size() == 2 && sides[0] >= 0 && sides[1] == 0) {
            model["sliding_window"] = sides[0] + 1;
            if (skip && !isUnset(*skip)) {
                const std::vector<int> pattern =
                    layerFlagsOf(*skip, layers, [](int64_t i, int64_t n) { return (i + 1) % n != 0; });
                if (pattern.empty() && layers > 0)
                    problems.add(at("window_attn_skip_freq"), "argument window_attn_skip_freq = \"" + *skip + "\" is neither a "
                                                              "layer count nor a list of 0s and 1s for the model's " +
                                                              std::to_string(layers) + " layers");
                nlohmann::json full = nlohmann::json::array();
                for (size_t i = 0; i < pattern.size(); ++i)
                    if (pattern[i] == 0) full.push_back(i);
                if (full.size() == pattern.size() && !pattern.empty()) model.erase("sliding_window"); // no layer windowed
                else if (!full.empty()) model["full_attention_layers"] = full;
            }
        } else {
            warnings.push_back("window_size = " + *w + ": tessel's model windows causally (left, 0) or not at all; modelled "
                               "without it");
        }
    }
    if (const auto d = str("hidden_dropout"); d && toNumber(*d)) model["dropout"] = *toNumber(*d);
    if (const auto e = str("num_experts"); e && *e != "None") {
        model["moe"] = {{"experts", integer("num_experts", std::nullopt, ML::heads)},
                        {"top_k", integer("moe_router_topk", 2, ML::heads)},
                        {"expert_ffn_hidden", integer("moe_ffn_hidden_size", model["ffn_hidden"].get<int64_t>(), ML::ffnHidden)}};
        if (const auto shared = str("moe_shared_expert_intermediate_size"); shared && *shared != "None")
            model["moe"]["shared_ffn_hidden"] = integer("moe_shared_expert_intermediate_size", std::nullopt, ML::ffnHidden);
        // --moe-layer-freq: an integer N (an expert layer where i % N == 0) or the list it was expanded to (1: expert).
        if (const auto freq = str("moe_layer_freq"); freq && *freq != "None") {
            const std::vector<int> pattern = layerFlagsOf(*freq, layers, [](int64_t i, int64_t n) { return i % n == 0; });
            if (pattern.empty() && layers > 0)
                problems.add(at("moe_layer_freq"), "argument moe_layer_freq = \"" + *freq + "\" is neither a layer count nor a list "
                                                   "of 0s and 1s for the model's " + std::to_string(layers) + " layers");
            nlohmann::json dense = nlohmann::json::array();
            for (size_t i = 0; i < pattern.size(); ++i)
                if (pattern[i] == 0) dense.push_back(i);
            if (!dense.empty()) model["moe"]["dense_layers"] = dense;
        }
        // Group-limited routing (--moe-router-num-groups, --moe-router-group-topk).
        if (const auto groups = str("moe_router_num_groups"); groups && *groups != "None") {
            model["moe"]["routing_groups"] = integer("moe_router_num_groups", std::nullopt, ML::heads);
            model["moe"]["groups_per_token"] = integer("moe_router_group_topk", std::nullopt, ML::heads);
        }
    }
    // Multi-token prediction (--mtp-num-layers; None when off).
    if (const auto mtp = str("mtp_num_layers"); mtp && *mtp != "None") model["mtp_layers"] = integer("mtp_num_layers", std::nullopt, 16);
    // Multi-head latent attention (--multi-latent-attention and its widths).
    if (flag("multi_latent_attention").value_or(false)) {
        model["mla"] = {{"kv_lora_rank", integer("kv_lora_rank", std::nullopt, ML::hidden)},
                        {"qk_nope_head_dim", integer("qk_head_dim", std::nullopt, ML::heads)},
                        {"qk_rope_head_dim", integer("qk_pos_emb_head_dim", std::nullopt, ML::heads)},
                        {"v_head_dim", integer("v_head_dim", std::nullopt, ML::heads)}};
        if (const auto q = str("q_lora_rank"); q && *q != "None")
            model["mla"]["q_lora_rank"] = integer("q_lora_rank", std::nullopt, ML::hidden);
        model["kv_heads"] = heads;
        model.erase("head_dim"); // kv_channels does not size MLA's heads
    }

    // Plan.
    nlohmann::json plan;
    const int64_t tp = integer("tensor_model_parallel_size", 1, PL::degree), pp = integer("pipeline_model_parallel_size", 1, PL::degree);
    const int64_t cp = integer("context_parallel_size", 1, PL::degree), ep = integer("expert_model_parallel_size", 1, PL::degree);
    const int64_t vpp = integer("virtual_pipeline_model_parallel_size", 1, PL::virtualStages);
    // Data parallelism: stated, or the world over tp x pp x cp, which must then divide it; a stated one must agree
    // with a stated world (tp and pp from one run, dp from another is not a run).
    int64_t dp = 1;
    const auto statedWorld = str("world_size");
    const int64_t modelRanks = tp * pp * cp; // each from 1 to 2^20: fits an int64
    if (const auto v = str("data_parallel_size"); v && *v != "None") {
        dp = integer("data_parallel_size", std::nullopt, PL::degree);
        if (statedWorld && *statedWorld != "None") {
            const int64_t world = integer("world_size", std::nullopt, PL::ranks);
            if (static_cast<double>(modelRanks) * static_cast<double>(dp) != static_cast<double>(world))
                problems.add(at("data_parallel_size"), "tp x pp x cp x dp = " + std::to_string(tp) + " x " + std::to_string(pp) +
                                                           " x " + std::to_string(cp) + " x " + std::to_string(dp) +
                                                           " is not the log's world_size " + std::to_string(world));
        }
    } else {
        const int64_t world = integer("world_size", std::nullopt, PL::ranks);
        if (world % modelRanks != 0)
            problems.add(at("world_size"), "world_size " + std::to_string(world) + " is not a multiple of tp x pp x cp = " +
                                               std::to_string(modelRanks));
        else
            dp = world / modelRanks;
    }
    plan["tp"] = tp;
    plan["pp"] = pp;
    plan["dp"] = dp;
    plan["cp"] = cp;
    plan["ep"] = ep;
    // Megatron-core >= 0.10 logs expert_tensor_parallel_size (tp when not given); one that differs from tp is MoE
    // parallel folding, the expert layers laid out on their own.
    if (const auto v = str("expert_tensor_parallel_size"); v && *v != "None") {
        const int64_t etp = integer("expert_tensor_parallel_size", std::nullopt, PL::degree);
        if (etp != tp) plan["etp"] = etp;
    }
    plan["vpp"] = vpp;
    // Uneven pipeline splits: --decoder-first/last-pipeline-num-layers are the plan's first/last_stage_layers.
    if (const auto v = str("decoder_first_pipeline_num_layers"); v && *v != "None")
        plan["first_stage_layers"] = integer("decoder_first_pipeline_num_layers", std::nullopt, PL::layers);
    if (const auto v = str("decoder_last_pipeline_num_layers"); v && *v != "None")
        plan["last_stage_layers"] = integer("decoder_last_pipeline_num_layers", std::nullopt, PL::layers);
    plan["micro_batch"] = integer("micro_batch_size", std::nullopt, PL::microBatch);
    plan["global_batch"] = integer("global_batch_size", std::nullopt, PL::globalBatch);
    plan["zero_stage"] = flag("use_distributed_optimizer").value_or(false) ? 1 : 0;
    // --num-distributed-optimizer-instances: copies of the distributed optimizer across the data-parallel domain.
    if (const auto v = str("num_distributed_optimizer_instances"); v && *v != "None") {
        const int64_t instances = integer("num_distributed_optimizer_instances", 1, PL::degree);
        if (instances > 1) plan["zero_replicas"] = instances;
    }
    std::string recompute = "none";
    if (const auto g = str("recompute_granularity"); g && *g != "None") recompute = *g;
    else if (flag("checkpoint_activations").value_or(false)) recompute = "full";
    if (recompute != "none" && recompute != "selective" && recompute != "full") {
        problems.add(at("recompute_granularity"), "recompute_granularity = " + recompute + " (expected selective or full)");
        recompute = "none";
    }
    if (recompute == "full") {
        // block: the first n layers of each chunk (plan recompute_layers); uniform: every layer, one checkpoint
        // per n layers (tessel keeps one per layer: the same replay, a little more memory for n > 1).
        const std::string method = str("recompute_method").value_or("None");
        const auto nText = str("recompute_num_layers");
        const int64_t n = nText && toNumber(*nText) ? static_cast<int64_t>(*toNumber(*nText)) : 1;
        const int64_t perChunk = pp > 0 ? layers / (pp * std::max<int64_t>(1, vpp)) : layers;
        if (method == "block") {
            if (n <= 0) recompute = "none";
            else if (n < perChunk) plan["recompute_layers"] = n;
        } else if (method == "uniform") {
            if (n > 1)
                warnings.push_back("recompute_method = uniform, recompute_num_layers = " + *nText +
                                   ": tessel keeps one checkpoint per layer, not one per " + *nText + " layers");
        } else if (nText) {
            warnings.push_back("recompute_method = " + method + ", recompute_num_layers = " + *nText +
                               ": read as every layer recomputed, one checkpoint each (" + std::to_string(perChunk) +
                               " a chunk)");
        }
    }
    plan["recompute"] = recompute;
    // --recompute-modules (Megatron-core from 2025-04, printed as a Python list): what selective recompute reruns.
    // A module that names nothing in this model Megatron-core skips (or refuses), so it is dropped with a word, as is a
    // name tessel does not model (Gated DeltaNet's, hyper-connections').
    if (const auto v = str("recompute_modules"); v && *v != "None") {
        used.insert("recompute_modules");
        if (recompute == "selective") {
            ModelConfig probe; // the parts the modules name, for recomputeModuleProblems
            if (model.contains("mla")) probe.mla = MlaConfig{};
            if (model.contains("moe")) {
                probe.moe = MoeConfig{};
                probe.moe->sharedFfnHidden = model["moe"].value("shared_ffn_hidden", int64_t{0});
                if (model["moe"].contains("dense_layers")) probe.moe->denseLayers = {0};
            }
            uint8_t bits = 0;
            for (const std::string& name : prose::pythonStringList(*v)) {
                const auto bit = recomputeModuleBit(name);
                if (!bit) {
                    warnings.push_back("recompute_modules names " + name + ", which tessel does not model: not recomputed");
                    continue;
                }
                Plan one;
                one.recompute = Recompute::Selective;
                one.framework.name = "megatron";
                one.recomputeModules = *bit;
                if (const auto why = recomputeModuleProblems(probe, one); !why.empty())
                    warnings.push_back("recompute_modules names " + name + ": " + why.front().second + "; dropped");
                else
                    bits |= *bit;
            }
            if (bits != recompute_module::Default) plan["recompute_modules"] = nlohmann::json(recomputeModulesList(bits));
        }
    }
    used.insert("moe_grouped_gemm"); // tessel costs a rank's experts as one grouped GEMM (TEGroupedMLP)
    plan["sequence_parallel"] = flag("sequence_parallel").value_or(false);
    // --cp-comm-type: one type, or one per layer (printed as a list); Megatron-core keeps a one-element list's type.
    if (const auto comm = str("cp_comm_type"); comm && cp > 1) {
        std::vector<std::string> types = prose::pythonStringList(*comm);
        if (types.empty()) types.emplace_back();
        const bool uniform = std::all_of(types.begin(), types.end(), [&](const std::string& t) { return t == types.front(); });
        const std::string& type = types.front();
        // a2a+p2p's levels: --hierarchical-context-parallel-sizes, the all-to-all group's size first.
        int64_t a2aSize = 0;
        if (const auto sizes = str("hierarchical_context_parallel_sizes"); sizes && *sizes != "None") {
            std::string first;
            for (char ch : *sizes) {
                if (ch == ',') break;
                if (ch >= '0' && ch <= '9') first += ch;
            }
            if (!first.empty() && first.size() < 8) a2aSize = std::stoll(first);
        }
        if (uniform && (type == "p2p" || type == "a2a" || type == "allgather")) {
            plan["cp_comm_type"] = type;
        } else if (uniform && type == "a2a+p2p" && a2aSize > 0) {
            plan["cp_comm_type"] = type;
            plan["cp_a2a_size"] = a2aSize;
        } else {
            warnings.push_back("cp_comm_type = " + *comm + ": tessel costs one exchange for every layer, p2p, a2a, allgather " +
                               "or a2a+p2p with its hierarchical_context_parallel_sizes; read as p2p");
        }
    }
    bool flash = flag("use_flash_attn").value_or(false);
    if (const auto b = str("attention_backend"); b && *b != "None") {
        flash = b->find("flash") != std::string::npos || b->find("auto") != std::string::npos || b->find("fused") != std::string::npos;
        if (b->find("auto") != std::string::npos)
            warnings.push_back("attention_backend = " + *b + ": taken as a fused (flash) attention kernel, which "
                               "Transformer Engine picks on Ampere and later");
    }
    plan["flash_attention"] = flash;
    plan["schedule"] = vpp > 1 ? "interleaved_1f1b" : "1f1b";
    const bool fp8 = (str("fp8").value_or("None") != "None") || (str("fp8_format").value_or("None") != "None") ||
                     flag("fp8_e4m3").value_or(false) || flag("fp8_hybrid").value_or(false);
    const bool bf16 = flag("bf16").value_or(false), fp16 = flag("fp16").value_or(false);
    // fp16 keeps 2-byte weights, an fp32 master and moments as bf16 does, computes in fp16 (dtype fp16: half_dtype),
    // and keeps fp16 main gradients unless --accumulate-allreduce-grads-in-fp32 (a store_true flag only --bf16
    // forces on); dynamic loss scaling is not modelled.
    if (fp16 && !fp8) warnings.push_back("fp16 = True: the megatron recipe computing in fp16; dynamic loss scaling is not modelled");
    // --fp4-format e2m1 (Megatron-core refuses it beside --fp8-format): Transformer Engine's NVFP4 recipe, the one
    // 4-bit recipe tessel costs (--fp4-recipe nvfp4, Megatron-core's default; custom is said and read as it).
    const bool fp4 = str("fp4").value_or("None") != "None" || str("fp4_format").value_or("None") != "None";
    if (fp4) {
        plan["precision"] = "nvfp4";
        plan["dtype"] = "bf16";
        if (const auto recipe = str("fp4_recipe"); recipe && *recipe != "None" && *recipe != "nvfp4")
            warnings.push_back("fp4_recipe = " + *recipe + ": not a recipe tessel costs; read as nvfp4");
        if (const auto v = flag("fp4_param_gather")) plan["fp4_param_gather"] = *v;
        else if (const auto w = flag("fp4_param")) plan["fp4_param_gather"] = *w;
        for (const char* name : {"fp4", "fp4_format", "fp4_recipe", "fp4_param_gather", "fp4_param"}) used.insert(name);
    } else if (fp8) {
        plan["precision"] = "fp8";
        plan["dtype"] = "bf16";
        // Transformer Engine's scaling (--fp8-recipe, Megatron-core's default delayed); one it has that tessel does
        // not name (custom) is said and read as delayed.
        if (const auto recipe = str("fp8_recipe"); recipe && *recipe != "None") {
            const auto& kinds = fp8RecipeKinds();
            if (std::find(kinds.begin(), kinds.end(), *recipe) != kinds.end()) plan["fp8_recipe"] = *recipe;
            else warnings.push_back("fp8_recipe = " + *recipe + ": not a recipe tessel costs; read as delayed scaling");
            used.insert("fp8_recipe");
        }
    } else if (bf16 || fp16) {
        plan["precision"] = "megatron";
        plan["dtype"] = bf16 ? "bf16" : "fp16";
        if (!bf16) {
            plan["grad_reduce_in_fp32"] = flag("accumulate_allreduce_grads_in_fp32").value_or(false);
            used.insert("accumulate_allreduce_grads_in_fp32");
        }
    } else {
        plan["precision"] = "fp32";
        plan["dtype"] = "fp32";
    }
    // --first-last-layers-bf16 with its counts (Megatron-core's defaults 1 and 1), where the run is FP8 or NVFP4.
    if ((fp8 || fp4) && flag("first_last_layers_bf16").value_or(false)) {
        plan["first_last_layers_bf16"] = true;
        for (const char* key : {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"})
            plan[key] = integer(key, 1, layers);
    }
    for (const char* name : {"first_last_layers_bf16", "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"}) used.insert(name);
    plan["framework"] = "megatron";
    // Overlap flags: Megatron-LM's argument names are the plan's keys (docs/frameworks.md).
    for (const char* key : {"overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "overlap_p2p_comm"})
        if (const auto v = flag(key)) plan[key] = *v;
    if (const auto v = flag("async_tensor_model_parallel_allreduce")) plan["async_tp_grad_reduce"] = *v;
    // --no-gradient-accumulation-fusion: a 16-bit weight gradient added into main_grad every micro-batch (on is the
    // plan's default, so only the off is written).
    if (const auto v = flag("gradient_accumulation_fusion"); v && !*v) plan["gradient_accumulation_fusion"] = false;
    // The MoE token dispatcher: alltoall, or flex (DeepEP / HybridEP, whichever --moe-flex-dispatcher-backend):
    // what tessel costs. The allgather dispatcher (Megatron-core's default) is not, and stays among the arguments
    // the scenario does not express.
    if (model.contains("moe") && log.args.count("moe_token_dispatcher_type")) {
        const std::string& type = log.args.at("moe_token_dispatcher_type");
        if (type == "alltoall" || type == "flex") {
            used.insert("moe_token_dispatcher_type");
            used.insert("moe_flex_dispatcher_backend");
            used.insert("moe_enable_deepep");
            plan["moe_dispatcher"] = type;
        }
    }
    // Megatron-core's batch-level EP overlap (--overlap-moe-expert-parallel-comm).
    if (model.contains("moe"))
        if (const auto v = flag("overlap_moe_expert_parallel_comm")) plan["moe_a2a_overlap"] = *v;
    // Megatron-core's shared-expert overlap (--moe-shared-expert-overlap), where there are shared experts to overlap.
    if (model.contains("moe") && model["moe"].contains("shared_ffn_hidden"))
        if (const auto v = flag("moe_shared_expert_overlap")) plan["moe_shared_expert_overlap"] = *v;
    // The loss kernel: --cross-entropy-fusion-impl te with --cross-entropy-loss-fusion is Transformer Engine's
    // in-place cross-entropy; native keeps the fp32 softmax, fused (the plan's "fused") or, without the flag, as
    // separate kernels ("unfused").
    if (const auto fused = flag("cross_entropy_loss_fusion")) {
        const auto impl = str("cross_entropy_fusion_impl");
        plan["cross_entropy"] = !*fused ? "unfused" : impl && *impl == "te" ? "te" : "fused";
    }
    // Main gradients: bf16 models keep them in fp32 (the megatron recipe; arguments.py forces
    // accumulate_allreduce_grads_in_fp32 for bf16) unless --grad-reduce-in-bf16.
    // On an fp32 run the flag decides nothing tessel models and is named among what is not expressed.
    if (bf16 || fp8) {
        if (flag("grad_reduce_in_bf16").value_or(false)) plan["grad_reduce_in_fp32"] = false;
        used.insert("grad_reduce_in_bf16");
    }
    if (bf16 || fp8) used.insert("accumulate_allreduce_grads_in_fp32");
    // The precision-aware optimizer (Transformer Engine's FusedAdam under the distributed optimizer) keeps the fp32
    // master as 16-bit remainders unless --no-store-param-remainders; moments or a master in another dtype
    // (--exp-avg-dtype, --main-params-dtype) are not modelled and stay among what is not expressed.
    if (flag("use_precision_aware_optimizer").value_or(false) && flag("use_distributed_optimizer").value_or(false) &&
        (bf16 || fp8)) {
        plan["store_param_remainders"] = flag("store_param_remainders").value_or(true);
        used.insert("use_precision_aware_optimizer");
        used.insert("store_param_remainders");
    }
    if (const auto v = str("rank_order"); v && *v != "None") plan["rank_order"] = *v;
    // --use-tp-pp-dp-mapping: Megatron-core's other rank order, pp inside dp (tessel's export writes it so).
    else if (flag("use_tp_pp_dp_mapping").value_or(false)) plan["rank_order"] = "tp-cp-ep-pp-dp";
    used.insert("use_tp_pp_dp_mapping");
    for (const char* name : {"bf16", "fp16", "fp8", "fp8_format", "fp8_e4m3", "fp8_hybrid", "use_flash_attn", "attention_backend",
                             "checkpoint_activations", "recompute_method", "recompute_num_layers", "data_parallel_size",
                             "world_size", "swiglu", "normalization", "group_query_attention", "num_query_groups"})
        used.insert(name);
    problems.throwIfAny();

    // The run's GPUs: part of one node (gpus_per_node = world), or whole nodes of the cluster. Each degree is from
    // 1 to 2^20 here; their product is bounded (in double, where it cannot overflow) before it is formed.
    if (static_cast<double>(tp) * static_cast<double>(pp) * static_cast<double>(cp) * static_cast<double>(dp) >
        static_cast<double>(PL::ranks))
        problems.add(at("world_size"), "tp x pp x cp x dp = " + std::to_string(tp) + " x " + std::to_string(pp) + " x " +
                                           std::to_string(cp) + " x " + std::to_string(dp) + " GPUs, more than " +
                                           std::to_string(PL::ranks));
    problems.throwIfAny();
    const int64_t world = tp * pp * cp * dp;
    const int64_t perNode = std::min<int64_t>(world, cluster.gpusPerNode);
    if (world % perNode != 0)
        problems.add(at("world_size"), "the run's " + std::to_string(world) + " GPUs do not fill whole nodes of " +
                                           std::to_string(cluster.gpusPerNode) + " GPUs (--cluster " + cluster.name + ")");
    problems.throwIfAny();
    nlohmann::json scenario{{"schema_version", 1},
                            {"name", "megatron-import"},
                            {"description", "imported from the Megatron-LM log " + log.source},
                            {"model", model},
                            {"cluster", clusterToJson(cluster)},
                            {"nodes", world / perNode},
                            {"gpus_per_node", perNode},
                            {"plan", plan}};
    // Validates every field as `tessel predict` would, so the written scenario loads without hand edits.
    Scenario parsed = parseScenario(scenario, log.source + " (imported scenario)");
    finishScenario(parsed);
    parsed.name = scenario["name"];
    parsed.description = scenario["description"];
    scenario = scenarioToJson(parsed);   // every plan key explicit, as `tessel compare` sets it against a prediction

    // Step: intervals past the warm-up with no skipped or nan iteration; an interval ending at iteration N after one
    // ending at P covers P+1..N (the first covers 1..N).
    ImportedRun out;
    std::vector<double> kept;
    nlohmann::json steps = nlohmann::json::array();
    int previous = 0, dropped = 0;
    for (const MegatronIteration& it : log.iterations) {
        const int first = previous + 1;
        previous = it.iteration;
        const bool warm = first <= o.warmupIterations;
        const bool bad = it.skipped > 0 || it.nan > 0;
        steps.push_back({{"line", it.line}, {"iteration", it.iteration}, {"seconds", it.elapsedMs * 1e-3},
                         {"used", !warm && !bad}, {"reason", warm ? "warm-up" : bad ? "skipped or nan iterations" : ""}});
        if (warm || bad) {
            ++dropped;
            continue;
        }
        kept.push_back(it.elapsedMs * 1e-3);
    }
    if (kept.empty())
        throw InputError(where(log.source, log.iterations.back().line),
                         "no iteration interval after the first " + std::to_string(o.warmupIterations) +
                             " iterations without skipped or nan iterations: no measured step (lower --warmup-iterations?)");
    out.stepSeconds = medianOf(kept);

    // Memory: per rank the largest max allocated of its reports (MB = 2^20 bytes in report_memory).
    std::map<int, MegatronMemoryReport> perRank;
    for (const MegatronMemoryReport& m : log.memory) {
        if (m.rank < 0 || m.rank >= world) throw InputError(where(log.source, m.line), "rank " + std::to_string(m.rank) +
                                                                                       " outside the run's " + std::to_string(world) + " ranks");
        auto& r = perRank[m.rank];
        if (m.maxAllocatedMb >= r.maxAllocatedMb) r = m;
    }
    nlohmann::json ranks = nlohmann::json::array();
    const double mib = 1024.0 * 1024.0;
    for (const auto& [rank, m] : perRank) {
        // Megatron's default order (tp-cp-ep-dp-pp, tp fastest) puts the pipeline stage outermost.
        const int stage = static_cast<int>(rank / (world / pp));
        ranks.push_back({{"rank", rank}, {"stage", stage}, {"peak_total_bytes", m.maxAllocatedMb * mib},
                         {"max_reserved_bytes", m.maxReservedMb * mib}, {"line", m.line}});
    }
    if (!ranks.empty()) out.memory = {{"schema_version", 1}, {"ranks", ranks}};

    // Settings of a feature the run does not use (FP8 recipe without FP8, MoE routing without experts, TP overlap
    // options without TP overlap, CP communication with cp = 1) say nothing about this run.
    auto inactive = [&](const std::string& name) {
        auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
        return (starts("fp8_") && !fp8) || (starts("moe_") && !model.contains("moe")) ||
               (starts("tp_comm_") && !plan.value("tp_comm_overlap", false)) || (starts("cp_comm") && cp == 1) ||
               (name == "expert_tensor_parallel_size" && !model.contains("moe")) ||
               (!model.contains("mla") && (name == "q_lora_rank" || name == "kv_lora_rank" || name == "qk_head_dim" ||
                                           name == "qk_pos_emb_head_dim" || name == "v_head_dim"));
    };
    // What the plan's precision recipe and optimizer already state (megatron: fp32 main grads, params and Adam moments).
    for (const char* name : {"main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"})
        if (str(name).value_or("torch.float32") != "torch.float32")
            warnings.push_back(std::string(name) + " = " + *str(name) + ": the precision recipe keeps it in fp32");
    if (const auto opt = str("optimizer"); opt && *opt != "adam")
        warnings.push_back("optimizer = " + *opt + ": tessel models Adam(W)'s state and step");
    used.insert("add_position_embedding");
    // Every printed argument: mapped, off (None/False/0), no effect on the prediction (by name), or named here.
    nlohmann::json notExpressed = nlohmann::json::array(), noEffect = nlohmann::json::array();
    for (const auto& [name, value] : log.args) {
        if (used.count(name) || inactive(name)) continue;
        if (noEffectOnPrediction(name)) noEffect.push_back(name);
        else if (!isUnset(value)) {
            notExpressed.push_back({{"argument", name}, {"value", value}, {"line", log.argLines.at(name)}});
            warnings.push_back(name + " = " + value + " (line " + std::to_string(log.argLines.at(name)) + "): not expressed by tessel");
        }
    }
    out.warnings = warnings;
    out.scenario = scenario;
    out.trace = {{"traceEvents", nlohmann::json::array()},
                 {"otherData", {{"source", "tessel import megatron"}, {"step_seconds", out.stepSeconds}, {"plan", scenario["plan"]}}}};
    std::vector<std::string> mapped(used.begin(), used.end());
    mapped.erase(std::remove_if(mapped.begin(), mapped.end(), [&](const std::string& n) { return !log.args.count(n); }), mapped.end());
    out.report = {{"schema_version", 1},
                  {"importer", "megatron"},
                  {"sources", {log.source}},
                  {"step_seconds", out.stepSeconds},
                  {"rules",
                   {"step: the median of the per-iteration times of the logged intervals that start after iteration " +
                        std::to_string(o.warmupIterations) + " and report no skipped or nan iteration",
                    "memory: per rank the largest 'max allocated' of its memory reports (MB = 2^20 bytes); 'max reserved' "
                    "kept beside it",
                    "stage of a rank: rank / (world / pp), Megatron's default order tp-cp-ep-dp-pp"}},
                  {"intervals", steps},
                  {"intervals_dropped", dropped},
                  {"arguments_mapped", mapped},
                  {"arguments_without_effect_on_prediction", noEffect},
                  {"arguments_not_expressed", notExpressed},
                  {"warnings", warnings}};
    return out;
}

} // namespace tessel::sim
