// Reads a published training run (runs.json schema) into a tessel scenario: the model here, the cluster and plan in
// validation_plan.cpp, the measurement in validation_measured.cpp; every value the record does not state is listed
// as an assumption.
#include "tessel/sim/validation.hpp"

#include "validation_measured.hpp"
#include "validation_plan.hpp"
#include "validation_prose.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <system_error>
#include <utility>
#include <vector>

namespace tessel::sim {

namespace {
using namespace prose;

struct Family {
    Activation activation = Activation::Gelu;
    NormKind norm = NormKind::LayerNorm;
    PositionEmbedding position = PositionEmbedding::Learned;
    bool bias = true;
    bool tied = true;
    std::string name;
    double dropout = 0.0;
    bool qkNorm = false;
    double rotaryPercent = 1.0; // the part of each head RoPE rotates
    bool postNorms = false;     // norms after attention and the MLP too (Gemma 2 and 3)
    bool embeddingNorm = false; // a norm over the embedding's output (BLOOM)
    bool embeddingScale = false;   // the embedding multiplied by sqrt(hidden) (Gemma)
    double attentionSoftcap = 0.0; // tanh soft-capping of the attention scores (Gemma 2: 50)
    double logitSoftcap = 0.0;     // and of the logits (Gemma 2: 30)
    bool parallelResidual = false; // attention and the MLP side by side (GPT-NeoX, Pythia, Falcon)
};

// The names a parallel block goes by: the model file's, Hugging Face's (GPTNeoXConfig, StableLmConfig; FalconConfig)
// and GPT-NeoX's own config key.
constexpr const char* kParallelResidualKeys[] = {"parallel_residual", "use_parallel_residual", "parallel_attn", "gpt_j_residual"};

// Architecture conventions of a model family, from the record's name (and explicit fields where present).
Family familyOf(const nlohmann::json& model) {
    const std::string n = lower(text(model, "name") + " " + text(model, "family") + " " + text(model, "architecture"));
    Family f;
    if (contains(n, "llama") || contains(n, "mistral") || contains(n, "mixtral") || contains(n, "qwen") ||
        contains(n, "deepseek")) {
        f = {Activation::Swiglu, NormKind::RmsNorm, PositionEmbedding::Rope, false, false, "Llama-style"};
    } else if (contains(n, "internlm") || contains(n, "baichuan") || contains(n, "granite") || contains(n, "smollm") ||
               contains(n, "phi-3") || contains(n, "phi3")) {
        // Models built on LLaMA's block (their Hugging Face configs: SwiGLU, RMSNorm, rotary, no biases in the
        // linears).
        f = {Activation::Swiglu, NormKind::RmsNorm, PositionEmbedding::Rope, false, false, "Llama-style"};
    } else if (contains(n, "olmo")) {
        // AI2's OLMo (Groeneveld et al. 2024, arXiv:2402.00838 §2.1): SwiGLU, rotary, no biases, no dropout, a
        // LayerNorm without parameters. OLMo 2 (OLMo-1124; OLMo-core's reordered_norm block with qk_norm): RMSNorm,
        // and q and k normalised before attention.
        const bool olmo2 = contains(n, "olmo 2") || contains(n, "olmo-2") || contains(n, "olmo2") ||
                           contains(n, "1124") || contains(n, "olmo 3") || contains(n, "olmo-3") || contains(n, "olmo3");
        f = {Activation::Swiglu, olmo2 ? NormKind::RmsNorm : NormKind::LayerNorm, PositionEmbedding::Rope, false, false,
             olmo2 ? "OLMo 2" : "OLMo"};
        f.qkNorm = olmo2;
    } else if (contains(n, "gemma")) {
        // Gemma (Gemma Team 2024, arXiv:2403.08295 §2): GeGLU (a gated MLP: three matrices), RMSNorm, rotary, no
        // biases, the embedding shared with the output.
        f = {Activation::Geglu, NormKind::RmsNorm, PositionEmbedding::Rope, false, true, "Gemma"};
        f.embeddingScale = true; // its embedding times sqrt(hidden) (the models' normalizer)
        // Gemma 2 and 3 (arXiv:2408.00118 §2, arXiv:2503.19786 §2): RMSNorm after each block as well as before; Gemma
        // 3 normalises q and k (QK-norm) in place of Gemma 2's soft-capping of the attention scores and the logits
        // (Gemma2Config's attn_logit_softcapping 50 and final_logit_softcapping 30).
        const bool v3 = std::regex_search(n, std::regex(R"(gemma[ -]?3)"));
        if (v3 || std::regex_search(n, std::regex(R"(gemma[ -]?2)"))) {
            f.name = v3 ? "Gemma 3" : "Gemma 2";
            f.postNorms = true;
            f.qkNorm = v3;
            if (!v3) {
                f.attentionSoftcap = 50.0;
                f.logitSoftcap = 30.0;
            }
        }
    } else if (contains(n, "falcon")) {
        // Falcon (Almazrouei et al. 2023, arXiv:2311.16867 §4.1): GELU, LayerNorm, rotary, no biases, tied
        // embeddings, no dropout; its attention and MLP read the same input side by side (parallel_attn).
        f = {Activation::Gelu, NormKind::LayerNorm, PositionEmbedding::Rope, false, true, "Falcon"};
        f.parallelResidual = true; // FalconConfig's parallel_attn, true in every released Falcon
    } else if (contains(n, "pythia") || contains(n, "neox")) {
        // GPT-NeoX and Pythia (Black et al. 2022; Biderman et al. 2023): GELU, LayerNorm, rotary on part of each
        // head, biases, untied embeddings, no dropout.
        f = {Activation::Gelu, NormKind::LayerNorm, PositionEmbedding::Rope, true, false, "GPT-NeoX"};
        f.rotaryPercent = 0.25; // rotary_pct in 20B.yml and every Pythia config
        f.parallelResidual = true; // gpt_j_residual in 20B.yml, use_parallel_residual in every Pythia config
    } else if (contains(n, "mpt")) {
        // MPT as llm-foundry's pretraining yamls build it: no biases, LayerNorm without bias, tied embeddings, and
        // learned positions (MPTConfig's learned_pos_emb default; the yamls set no ALiBi: the benchmark table's
        // NumParams grows with the sequence by exactly its extra rows x d_model).
        f = {Activation::Gelu, NormKind::LayerNorm, PositionEmbedding::Learned, false, true, "MPT"};
    } else if (contains(n, "bloom")) {
        // BLOOM: ALiBi on the attention scores (Le Scao et al. 2022, BigScience's Megatron-DeepSpeed), trained with
        // Megatron's default dropout of 0.1 (tr11-176B-ml README: "The default Megatron-LM dropout settings are
        // inherited"); the released Hugging Face config's 0.0 is for inference.
        f = {Activation::Gelu, NormKind::LayerNorm, PositionEmbedding::Alibi, true, true, "BLOOM", 0.1};
        // Its LayerNorm over the word embeddings (BloomModel.word_embeddings_layernorm; every tr11 recipe, the
        // 2022-02 tr11-200B-ml rounds' included, passes Megatron-DeepSpeed --embed-layernorm).
        f.embeddingNorm = true;
    } else if (contains(n, "nemotron")) {
        // Nemotron-3 / -4 as NeMo's launcher configs build them (conf/training/nemotron/*.yaml): squared ReLU,
        // layernorm1p (a LayerNorm), rotary positions on half the head, no biases, untied embeddings, no dropout.
        f = {Activation::SquaredRelu, NormKind::LayerNorm, PositionEmbedding::Rope, false, false, "Nemotron"};
        f.rotaryPercent = 0.5; // rotary_percentage 0.5
    } else if (contains(n, "gpt") || contains(n, "megatron") || contains(n, "opt")) {
        // Megatron-LM's GPT defaults: --attention-dropout 0.1 --hidden-dropout 0.1 (arguments.py).
        f = {Activation::Gelu, NormKind::LayerNorm, PositionEmbedding::Learned, true, true, "GPT", 0.1};
    } else {
        f.name = "GPT (default)";
        f.dropout = 0.1;
    }
    // HuggingFace configs name it hidden_act ("silu" behind a gate projection: SwiGLU).
    const std::string act = lower(text(model, "activation") + " " + text(model, "hidden_act"));
    // Any GLU (SwiGLU, GeGLU, ReGLU), T5's "gated-gelu", or HF's "silu" (behind a gate projection).
    const bool gated = contains(act, "glu") || contains(act, "silu") || contains(act, "gated");
    const std::string statedNorm = lower(text(model, "norm"));
    // A model of no family tessel knows whose record states LLaMA's gated MLP or RMSNorm is of LLaMA's generation,
    // which trains without dropout and (but for some QKV projections) without biases: its conventions, not GPT-2's.
    if (f.name == "GPT (default)" && (gated || contains(statedNorm, "rms")))
        f = {Activation::Swiglu, NormKind::RmsNorm, PositionEmbedding::Rope, false, false,
             "Llama-style (from its stated gated MLP or RMSNorm)"};
    // A GELU behind a gate (GeGLU, T5's "gated-gelu"; Gemma's configs name the gate's GELU alone: hidden_act "gelu").
    const bool gelu = contains(act, "gelu") || contains(act, "geglu");
    if (gated) f.activation = gelu ? Activation::Geglu : Activation::Swiglu;
    else if (contains(act, "relu2") || (contains(act, "squared") && contains(act, "relu"))) f.activation = Activation::SquaredRelu;
    else if (f.name == "Gemma" && gelu) f.activation = Activation::Geglu;
    else if (act.find_first_not_of(' ') != std::string::npos) f.activation = Activation::Gelu;
    if (contains(statedNorm, "rms")) f.norm = NormKind::RmsNorm;
    else if (contains(statedNorm, "layer")) f.norm = NormKind::LayerNorm;
    const std::string pos = lower(text(model, "position_embedding") + text(model, "positional_embedding"));
    if (contains(pos, "alibi")) f.position = PositionEmbedding::Alibi;
    else if (contains(pos, "rope") || contains(pos, "rotary")) f.position = PositionEmbedding::Rope;
    else if (contains(pos, "learned") || contains(pos, "absolute")) f.position = PositionEmbedding::Learned;
    if (auto t = boolean(model, "tied_embeddings")) f.tied = *t;
    if (auto b = boolean(model, "bias")) f.bias = *b;
    if (auto dr = number(model, "dropout")) f.dropout = *dr;
    // Qwen3 normalises each head of q and k (q_norm, k_norm); a record may say so for any model.
    f.qkNorm = f.qkNorm || contains(n, "qwen3");
    if (auto qk = boolean(model, "qk_norm")) f.qkNorm = *qk;
    // Megatron-DeepSpeed's flag (--embed-layernorm) or the model key, for a run that states it either way.
    for (const char* key : {"embedding_norm", "embed_layernorm"})
        if (auto en = boolean(model, key)) f.embeddingNorm = *en;
    if (auto es = boolean(model, "embedding_scale")) f.embeddingScale = *es;
    for (const char* key : kParallelResidualKeys)
        if (auto pr = boolean(model, key)) f.parallelResidual = *pr;
    // Soft-capping under the model file's names or Hugging Face's (a null there: none).
    for (const auto& [key, cap] : {std::pair{"attention_softcap", &Family::attentionSoftcap},
                                   std::pair{"attn_logit_softcapping", &Family::attentionSoftcap},
                                   std::pair{"logit_softcap", &Family::logitSoftcap},
                                   std::pair{"final_logit_softcapping", &Family::logitSoftcap}})
        if (model.is_object() && model.contains(key)) f.*cap = number(model, key).value_or(0.0);
    return f;
}

// A routed-expert count under the names papers and configs use (Megatron-LM num_experts, HuggingFace
// num_local_experts, DeepSeek n_routed_experts, DBRX moe_num_experts).
const std::initializer_list<const char*> kExpertCountKeys{"experts",     "num_experts",     "num_local_experts", "n_routed_experts",
                                                          "moe_experts", "moe_num_experts", "num_moe_experts",   "n_experts"};

// A key of a block nested as configs nest it, read as its section's own: the section ("model", "plan"), the block,
// the key as written and the key it is read as.
struct LiftedKey {
    std::string section, block, key, as;
};

// Blocks nested as configs nest them, read as their section's own keys, a key the section states itself winning:
// the model's expert and attention blocks (a record's "moe" object, DBRX's ffn_config and attn_config, MPT's
// attn_config), the plan's DeepSpeed zero_optimization (its stage read as zero_stage), llm-foundry's and Hugging
// Face's fsdp_config, and torchtitan's parallelism and training sections. Returns each key lifted; none, and `flat`
// untouched, when nothing nests.
std::vector<LiftedKey> liftNestedBlocks(const nlohmann::json& rec, nlohmann::json& flat) {
    static const std::vector<std::pair<const char*, std::vector<const char*>>> sections = {
        {"model", {"moe", "moe_config", "mixture_of_experts", "ffn_config", "attn_config"}},
        {"plan", {"zero_optimization", "fsdp_config", "parallelism", "training"}}};
    std::vector<LiftedKey> lifted;
    for (const auto& [section, blocks] : sections) {
        const nlohmann::json* from = member(rec, section);
        if (!from || !from->is_object()) continue;
        for (const char* block : blocks) {
            const nlohmann::json* b = member(*from, block);
            if (!b || !b->is_object()) continue;
            for (const auto& [key, value] : b->items()) {
                const std::string as = std::string(block) == "zero_optimization" && key == "stage" ? "zero_stage" : key;
                if (from->contains(as) || value.is_null()) continue;
                if (lifted.empty()) flat = rec;
                flat[section][as] = value;
                lifted.push_back({section, block, key, as});
            }
        }
    }
    return lifted;
}

// The lifted keys by block, for the assumption that says so: "section/block", "key, key".
std::vector<std::pair<std::string, std::string>> liftedByBlock(const std::vector<LiftedKey>& lifted) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const LiftedKey& k : lifted) {
        const std::string block = k.section + "/" + k.block;
        const std::string key = k.as == k.key ? k.key : k.key + " (as " + k.as + ")";
        if (out.empty() || out.back().first != block) out.emplace_back(block, key);
        else out.back().second += ", " + key;
    }
    return out;
}

// Architecture a record states that ModelConfig cannot express: shared experts without routed ones to sit beside.
// Key and what it says, for each one stated with a value that changes the network.
std::vector<std::pair<std::string, std::string>> unmodelledArchitecture(const nlohmann::json& m) {
    std::vector<std::pair<std::string, std::string>> out;
    auto positive = [&](const char* key) {
        const auto v = integer(m, key);
        return v && *v > 0;
    };
    const bool routed = [&] {
        for (const char* key : kExpertCountKeys)
            if (const auto v = integer(m, key); v && *v > 1) return true;
        return false;
    }();
    if (!routed)
        for (const char* key : {"n_shared_experts", "shared_experts", "num_shared_experts", "shared_expert_intermediate_size",
                                "moe_shared_expert_intermediate_size", "shared_ffn_hidden"})
            if (positive(key)) out.emplace_back(key, "shared experts without routed experts stated beside them");
    return out;
}

// The built-in model (scenarios/models) a record's model name names, compared without case, spaces, dashes and
// underscores, a "Meta" in front and Llama 3's point releases ("Meta-Llama-3.1-70B" is llama3-70b); none when no
// preset's name is the same.
std::optional<ModelConfig> namedModelPreset(const std::string& name) {
    auto squash = [](std::string s) {
        s = lower(s);
        s.erase(std::remove_if(s.begin(), s.end(), [](char ch) { return ch == ' ' || ch == '-' || ch == '_'; }), s.end());
        return s;
    };
    std::string n = squash(name);
    if (n.rfind("meta", 0) == 0) n.erase(0, 4);
    for (const char* release : {"llama3.1", "llama3.2", "llama3.3"})
        if (n.rfind(release, 0) == 0) n.replace(0, std::string(release).size(), "llama3");
    if (n.empty()) return std::nullopt;
    for (const std::string& preset : presetNames("models"))
        if (squash(preset) == n) {
            try {
                return loadModelRef(preset, "/model/name");
            } catch (const std::exception&) {
                return std::nullopt;
            }
        }
    return std::nullopt;
}

// A family's conventions on a model.
void applyFamily(const Family& f, ModelConfig& model) {
    model.activation = f.activation;
    model.norm = f.norm;
    model.position = f.position;
    model.tiedEmbeddings = f.tied;
    model.linearBias = f.bias;
    model.dropout = f.dropout;
    model.qkNorm = f.qkNorm;
    model.postNorms = f.postNorms;
    model.embeddingNorm = f.embeddingNorm;
    model.embeddingScale = f.embeddingScale;
    model.attentionSoftcap = f.attentionSoftcap;
    model.logitSoftcap = f.logitSoftcap;
    model.parallelResidual = f.parallelResidual;
}

// LLaMA's MLP width rule (Meta's llama model.py FeedForward; torchtitan's the same): 2/3 of 4 x hidden, times
// ffn_dim_multiplier where given, rounded up to multiple_of.
int64_t llamaFfnWidth(int64_t hidden, std::optional<double> multiplier, int64_t multipleOf) {
    int64_t width = static_cast<int64_t>(2.0 * 4.0 * static_cast<double>(hidden) / 3.0);
    if (multiplier && *multiplier > 0.0) width = static_cast<int64_t>(*multiplier * static_cast<double>(width));
    return std::min<int64_t>((width + multipleOf - 1) / multipleOf * multipleOf, ModelLimits::ffnHidden);
}

std::string billions(double parameters) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f B", parameters / 1e9);
    return buf;
}

// The record's published parameter count against tessel's count of the shape it read (FORMULAS.md §1). Published
// counts are exact or rounded ("7B" for 6.74 B); within 5% the two agree and nothing is done. Further apart, what the
// record left unstated is the suspect, tried in turn, the first that brings tessel's count within 5% kept and said:
// - a model of no family tessel knows, whose record states no activation, norm, positions, biases or tying, read with
//   LLaMA's conventions (a gated MLP, RMSNorm, rotary, no biases, untied: the open models since 2023 are built so)
//   instead of GPT-2's, its MLP width by LLaMA's rule where the record gives none;
// - an MLP width the record does not give, solved from the count under the conventions read (rounded to 128, and
//   only between hidden / 2 and 8 x hidden).
// Where neither reconciles them (or the record states all of it, or the model has experts, whose published totals
// follow no one convention), the gap is said and the stated shape is predicted.
void reconcileParameters(ModelConfig& model, ValidationCase& c, double published, bool conventionsFree, bool ffnDerived) {
    const auto countOf = [](const ModelConfig& mc) { return static_cast<double>(countParameters(mc).total(mc.layers)); };
    const auto within = [published](double n) { return std::abs(n / published - 1.0) <= 0.05; };
    const double read = countOf(model);
    if (published <= 0.0 || within(read)) return;
    char gap[48];
    std::snprintf(gap, sizeof gap, "%+.1f%%", 100.0 * (read / published - 1.0));
    const std::string head = "model/params " + billions(published) + " against tessel's " + billions(read) +
                             " for the shape read (" + gap + "): ";
    if (!model.moe && conventionsFree) {
        ModelConfig llama = model;
        applyFamily({Activation::Swiglu, NormKind::RmsNorm, PositionEmbedding::Rope, false, false, "Llama-style"}, llama);
        if (ffnDerived) llama.ffnHidden = llamaFfnWidth(model.hidden, std::nullopt, 256);
        if (within(countOf(llama))) {
            // The conventions line said before is no longer what is predicted: this one stands in its place.
            c.assumptions.erase(std::remove_if(c.assumptions.begin(), c.assumptions.end(),
                                               [](const std::string& a) { return a.rfind("architecture: ", 0) == 0; }),
                                c.assumptions.end());
            c.assumptions.push_back(head + "read with LLaMA's conventions instead (swiglu, rmsnorm, rotary, no biases, "
                                    "untied embeddings, no dropout" +
                                    (ffnDerived ? ", ffn_hidden " + std::to_string(llama.ffnHidden) : std::string()) +
                                    "), " + billions(countOf(llama)));
            model = llama;
            return;
        }
    }
    if (!model.moe && ffnDerived) {
        // The count is linear in the MLP's width: two widths give the slope.
        ModelConfig solved = model;
        const double at = countOf(solved);
        solved.ffnHidden += 128;
        const double slope = (countOf(solved) - at) / 128.0;
        const double width = static_cast<double>(model.ffnHidden) + (published - at) / slope;
        const int64_t rounded = static_cast<int64_t>(std::llround(width / 128.0)) * 128;
        solved.ffnHidden = rounded;
        if (slope > 0.0 && rounded >= model.hidden / 2 && rounded <= 8 * model.hidden &&
            rounded <= ModelLimits::ffnHidden && within(countOf(solved))) {
            c.assumptions.push_back(head + "ffn_hidden solved from it, " + std::to_string(rounded) + " (was " +
                                    std::to_string(model.ffnHidden) + "), " + billions(countOf(solved)));
            model.ffnHidden = rounded;
            return;
        }
    }
    c.assumptions.push_back(head + "the prediction follows the stated shape" +
                            (model.moe ? " (a model with experts: its published total is not reconciled)" : ""));
}

void readModel(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c, std::string& refusal) {
    const nlohmann::json& m = rec.value("model", nlohmann::json::object());
    ModelConfig& model = c.scenario.model;
    model.name = text(m, "name");
    using L = ModelLimits;
    const std::string where = ptr + "/model";
    // The schema's key of each shape field, then the names Megatron-LM and Hugging Face configs give it.
    static const std::vector<const char*> layerKeys{"layers", "num_layers", "n_layers", "num_hidden_layers", "n_layer"};
    static const std::vector<const char*> hiddenKeys{"hidden", "hidden_size", "d_model", "n_embd", "dim"};
    static const std::vector<const char*> headKeys{"heads", "num_attention_heads", "n_heads", "n_head"};
    static const std::vector<const char*> vocabKeys{"vocab", "vocab_size", "padded_vocab_size"};
    static const std::vector<const char*> seqKeys{"seq", "seq_len", "seq_length", "sequence_length", "context_length", "max_seq_len"};
    auto firstKey = [&](const std::vector<const char*>& keys) -> const char* {
        for (const char* k : keys)
            if (member(m, k)) return k;
        return nullptr;
    };
    // A model named as a built-in one gives the shape fields the record leaves out, where every one it states agrees
    // with it (a "Llama 3 8B" of other widths is not the preset); each taken is said.
    std::optional<ModelConfig> preset = namedModelPreset(model.name);
    if (preset) {
        const int64_t layers = preset->layers, hidden = preset->hidden, heads = preset->heads;
        auto disagrees = [&](const char* k, int64_t value) { return k && integer(m, k) && *integer(m, k) != value; };
        if (disagrees(firstKey(layerKeys), layers) || disagrees(firstKey(hiddenKeys), hidden) ||
            disagrees(firstKey(headKeys), heads))
            preset.reset();
    }
    // The schema's key, else the first of the names Megatron-LM and Hugging Face configs give it; missing takes the
    // named preset's value, else the family's convention where one is given (fallback, with its reason), else is
    // refused naming the schema's key.
    auto need = [&](const std::vector<const char*>& keys, int64_t most, int64_t fromPreset,
                    std::pair<int64_t, std::string> fallback = {0, ""}) -> int64_t {
        const char* key = firstKey(keys);
        if (!key && preset && refusal.empty()) {
            c.assumptions.push_back(where.substr(ptr.size() + 1) + "/" + keys.front() + " not stated: " +
                                    std::to_string(fromPreset) + " (the built-in " + preset->name + "'s, which the model's name names)");
            return fromPreset;
        }
        if (!key && fallback.first > 0 && refusal.empty()) {
            c.assumptions.push_back(where.substr(ptr.size() + 1) + "/" + keys.front() + " not stated: " +
                                    std::to_string(fallback.first) + " (" + fallback.second + ")");
            return fallback.first;
        }
        if (!key) key = keys.front();
        const auto v = count(m, key, 1, most, where, refusal);
        if (!v && !member(m, key) && refusal.empty()) refusal = where + "/" + key + ": missing";
        return v.value_or(0);
    };
    const int64_t none = 0; // no preset: the value is never taken
    model.layers = static_cast<int>(need(layerKeys, L::layers,
                                         preset ? preset->layers : none));
    model.hidden = need(hiddenKeys, L::hidden, preset ? preset->hidden : none);
    // Conventions of the families, for a record that leaves them out and names no built-in model: heads of 128
    // (GPT-3's and Llama's width from 6.7B / 7B up), LLaMA 1-2's SentencePiece vocabulary of 32000 and Llama 3's of
    // 128256, GPT-2's BPE (50257) padded to 51200 as Megatron-LM's SC'21 runs state it, and the pre-training sequence of the family (GPT-3
    // 2048, Llama 2 4096, Llama 3 8192).
    const std::string named = lower(model.name);
    const bool llama3 = std::regex_search(named, std::regex(R"(llama[\s_-]*3(?![0-9]))"));
    const bool llama2 = std::regex_search(named, std::regex(R"(llama[\s_-]*2(?![0-9]))"));
    const bool llama12 = contains(named, "llama") && !llama3;
    // Heads: the stated head width's, else 128's; where a stated kv_heads does not divide that, as many as it
    // (multi-head attention).
    std::pair<int64_t, std::string> heads128{0, ""};
    {
        const auto headDim = integer(m, "head_dim");
        const int64_t width = headDim && *headDim > 0 ? *headDim : 128;
        if (model.hidden > 0 && model.hidden % width == 0)
            heads128 = {model.hidden / width, headDim ? "hidden / head_dim" : "hidden / 128: heads of 128, GPT-3's and Llama's from 6.7B up"};
        std::optional<int64_t> kv;
        for (const char* k : {"kv_heads", "num_key_value_heads", "num_query_groups", "n_kv_heads", "kv_n_heads"})
            if (!kv) kv = integer(m, k);
        if (kv && *kv > 0 && (heads128.first == 0 || heads128.first % *kv != 0))
            heads128 = {*kv, "kv_heads, which does not divide hidden / 128: multi-head attention"};
    }
    const std::pair<int64_t, std::string> vocabOf =
        llama3 ? std::pair<int64_t, std::string>{128256, "Llama 3's tokenizer"}
        : llama12 ? std::pair<int64_t, std::string>{32000, "LLaMA 1 and 2's SentencePiece vocabulary"}
                  : std::pair<int64_t, std::string>{51200, "GPT-2's BPE of 50257 padded to 51200, as Megatron-LM's SC'21 runs state it"};
    const std::pair<int64_t, std::string> seqOf =
        llama3 ? std::pair<int64_t, std::string>{8192, "Llama 3's pre-training sequence"}
        : llama2 ? std::pair<int64_t, std::string>{4096, "Llama 2's pre-training sequence"}
        : llama12 ? std::pair<int64_t, std::string>{2048, "LLaMA's pre-training sequence"}
                  : std::pair<int64_t, std::string>{2048, "GPT-3's sequence, the common one of GPT-style runs"};
    model.heads = static_cast<int>(need(headKeys, L::heads,
                                        preset ? preset->heads : none, heads128));
    model.vocab = need(vocabKeys, L::vocab, preset ? preset->vocab : none, vocabOf);
    // A sequence length written "2k" or "32K" is 2048 or 32768: k is 1024 in a sequence length, said.
    std::smatch abbreviated;
    const char* seqKey = firstKey(seqKeys);
    const std::string seqText = seqKey && member(m, seqKey)->is_string() ? member(m, seqKey)->get<std::string>() : "";
    if (std::regex_match(seqText, abbreviated, std::regex(R"(\s*([0-9]{1,5})\s*[kK]\s*(tokens?)?\s*)")) &&
        std::stoll(abbreviated[1].str()) * 1024 <= L::seqLen && std::stoll(abbreviated[1].str()) > 0) {
        model.seqLen = std::stoll(abbreviated[1].str()) * 1024;
        c.assumptions.push_back(std::string("model/") + seqKey + " \"" + seqText + "\" read as " + std::to_string(model.seqLen) +
                                " (k = 1024 in a sequence length)");
    } else {
        model.seqLen = need(seqKeys, L::seqLen, preset ? preset->seqLen : none, seqOf);
    }
    if (!refusal.empty()) return;
    // A dropout is a probability: below 1 (at 1 every activation is zeroed), not negative.
    if (const auto dr = number(m, "dropout"); dr && !(*dr >= 0.0 && *dr < 1.0)) {
        refusal = where + "/dropout: got " + text(m, "dropout") + ", expected a probability from 0 up to (not including) 1";
        return;
    }
    // A soft-cap is a positive number, or null (or 0) for none.
    for (const char* key : {"attention_softcap", "attn_logit_softcapping", "logit_softcap", "final_logit_softcapping"})
        if (const nlohmann::json* v = member(m, key); v && !(v->is_number() && v->get<double>() >= 0.0)) {
            refusal = where + "/" + key + ": got " + v->dump() + ", expected a soft-cap (a positive number), or null or 0 for none";
            return;
        }
    // A parallel block is stated true or false, under one name or several that agree.
    std::string parallelKey;
    for (const char* key : kParallelResidualKeys) {
        const nlohmann::json* v = member(m, key);
        if (!v) continue;
        if (!v->is_boolean()) {
            refusal = where + "/" + key + ": got " + v->dump() + ", expected true or false (attention and the MLP side by side)";
            return;
        }
        if (!parallelKey.empty() && m[parallelKey] != *v) {
            refusal = where + "/" + parallelKey + " and " + where + "/" + key + ": got " + m[parallelKey].dump() + " and " +
                      v->dump() + ", the same block under two names; state one, or the same value in both";
            return;
        }
        parallelKey = key;
    }
    // The same cap under tessel's name and Hugging Face's: two values that differ leave no way to choose one.
    for (const auto& [ours, theirs] : {std::pair{"attention_softcap", "attn_logit_softcapping"},
                                       std::pair{"logit_softcap", "final_logit_softcapping"}})
        if (m.is_object() && m.contains(ours) && m.contains(theirs) &&
            number(m, ours).value_or(0.0) != number(m, theirs).value_or(0.0)) {
            refusal = where + "/" + ours + " and " + where + "/" + theirs + ": got " + m[ours].dump() + " and " +
                      m[theirs].dump() + ", the same soft-cap under two names; state one, or the same value in both";
            return;
        }
    const Family f = familyOf(m);
    applyFamily(f, model);
    const std::string actName = toString(f.activation);
    c.assumptions.push_back("architecture: " + f.name + " conventions (" + actName + ", " +
                            toString(f.norm) + (f.postNorms ? " before and after each block" : "") +
                            (f.embeddingNorm ? ", one over the embedding" : "") +
                            (f.qkNorm ? " with q and k norms" : "") +
                            (f.parallelResidual ? ", attention and MLP side by side" : "") +
                            (f.attentionSoftcap > 0.0 || f.logitSoftcap > 0.0 ? ", tanh soft-capping" : "") +
                            (f.embeddingScale ? ", the embedding scaled by sqrt(hidden)" : "") + ", " +
                            (f.bias ? "biases" : "no biases") + ", " +
                            (f.tied ? "tied" : "untied") + " embeddings" +
                            (f.dropout > 0.0 ? ", dropout " + std::to_string(f.dropout).substr(0, 4) : "") + ")");
    const char* kvKey = "kv_heads";
    for (const char* k : {"kv_heads", "num_key_value_heads", "num_query_groups", "n_kv_heads", "kv_n_heads"})
        if (member(m, k)) {
            kvKey = k;
            break;
        }
    if (auto kv = count(m, kvKey, 1, L::heads, where, refusal)) {
        model.kvHeads = static_cast<int>(*kv);
    } else if (preset) {
        model.kvHeads = preset->kvHeads;
        c.assumptions.push_back("kv_heads not stated: " + std::to_string(model.kvHeads) + " (the built-in " + preset->name +
                                "'s, which the model's name names)");
    } else {
        model.kvHeads = model.heads;
        c.assumptions.push_back("kv_heads not stated: multi-head attention (kv_heads = heads)");
    }
    if (auto hd = count(m, "head_dim", 1, L::heads, where, refusal)) model.headDim = *hd;
    // The MLP's width under the names configs use (Megatron-LM ffn_hidden_size, HuggingFace intermediate_size).
    std::optional<int64_t> ffn;
    for (const char* key : {"ffn_hidden", "ffn_hidden_size", "intermediate_size", "ffn_dim"})
        if (!ffn && member(m, key)) ffn = count(m, key, 1, L::ffnHidden, where, refusal);
    const std::optional<double> multiplier = member(m, "ffn_dim_multiplier") ? number(m, "ffn_dim_multiplier") : number(m, "ffn_multiplier");
    const std::optional<int64_t> multipleOf = integer(m, "multiple_of");
    bool ffnDerived = false; // by a rule, not stated nor a named model's
    if (ffn) {
        model.ffnHidden = *ffn;
    } else if (preset && preset->hidden == model.hidden && !multiplier && !multipleOf) {
        model.ffnHidden = preset->ffnHidden;
        c.assumptions.push_back("ffn_hidden not stated: " + std::to_string(model.ffnHidden) + " (the built-in " + preset->name +
                                "'s, which the model's name names)");
    } else if (model.activation == Activation::Swiglu || multiplier || multipleOf) {
        // LLaMA's rule (Meta's llama model.py FeedForward; torchtitan's the same): 2/3 of 4 x hidden, times
        // ffn_dim_multiplier where given, rounded up to multiple_of (256 in Llama 1 and 2); Llama 3 8B (4096, 1.3,
        // 1024) gives 14336, Llama 2 7B (4096, none, 256) 11008.
        const int64_t of = multipleOf && *multipleOf > 0 ? *multipleOf : 256;
        model.ffnHidden = llamaFfnWidth(model.hidden, multiplier, of);
        ffnDerived = true;
        c.assumptions.push_back("ffn_hidden not stated: LLaMA's SwiGLU width, 2/3 of 4 x hidden" +
                                std::string(multiplier ? " x ffn_dim_multiplier" : "") + " rounded up to a multiple of " +
                                std::to_string(of) + ": " + std::to_string(model.ffnHidden));
    } else {
        model.ffnHidden = 4 * model.hidden;
        ffnDerived = true;
        c.assumptions.push_back("ffn_hidden not stated: 4 x hidden");
    }
    // Mixture of experts, under the names papers and configs use (Megatron-LM num_experts / moe_router_topk /
    // moe_ffn_hidden_size, HuggingFace num_local_experts / num_experts_per_tok).
    auto firstInteger = [&](std::initializer_list<const char*> keys) -> std::optional<int64_t> {
        for (const char* k : keys)
            if (auto v = integer(m, k)) return v;
        return std::nullopt;
    };
    if (auto experts = firstInteger(kExpertCountKeys);
        experts && *experts > 1) {
        MoeConfig moe;
        // Each under whichever name the record uses, bounded as a model file's moe block is.
        auto firstCount = [&](std::initializer_list<const char*> keys, int64_t most,
                              int64_t least = 1) -> std::optional<int64_t> {
            for (const char* k : keys)
                if (member(m, k)) return count(m, k, least, most, where, refusal);
            return std::nullopt;
        };
        if (!firstCount(kExpertCountKeys, L::heads)) return;
        moe.experts = static_cast<int>(*experts);
        const auto topK = firstCount({"top_k", "moe_top_k", "moe_router_topk", "num_experts_per_tok", "experts_per_token"}, *experts);
        moe.topK = static_cast<int>(topK.value_or(std::min<int64_t>(2, *experts)));
        if (!topK) c.assumptions.push_back("experts per token not stated: top-2");
        moe.expertFfnHidden = firstCount({"expert_ffn_hidden", "moe_ffn_hidden", "moe_ffn_hidden_size", "moe_intermediate_size"},
                                         L::ffnHidden)
                                  .value_or(model.ffnHidden);
        // Shared experts: their summed width (Qwen's shared_expert_intermediate_size, Megatron-LM's
        // moe_shared_expert_intermediate_size), or DeepSeek's count of them at the routed experts' width; 0 says
        // there are none.
        if (const auto width = firstCount({"shared_ffn_hidden", "shared_expert_intermediate_size",
                                           "moe_shared_expert_intermediate_size"}, L::ffnHidden, 0))
            moe.sharedFfnHidden = *width;
        else if (const auto shared = firstCount({"n_shared_experts", "num_shared_experts", "shared_experts"}, L::heads, 0))
            moe.sharedFfnHidden = *shared * moe.expertFfnHidden;
        // Dense layers among the expert layers, under each family's names: DeepSeek's first_k_dense_replace and
        // moe_layer_freq (layer i is an expert layer when i >= k and i % freq == 0; Megatron-LM's --moe-layer-freq the
        // same with k = 0), Qwen's decoder_sparse_step and mlp_only_layers and Llama 4's interleave_moe_layer_step
        // (an expert layer when (i + 1) % step == 0 and i is not listed).
        std::optional<int64_t> leading;
        for (const char* key : {"first_k_dense_replace", "first_k_dense", "num_dense_layers", "dense_layers"})
            if (!leading && member(m, key) && !member(m, key)->is_null()) leading = count(m, key, 0, model.layers, where, refusal);
        // Megatron-LM's --moe-layer-freq may be a list expression ("([0]*3+[1]*58)"): its 0s are the dense layers.
        std::optional<std::vector<int>> pattern;
        if (const auto* written = member(m, "moe_layer_freq"); written && written->is_string() && !integer(m, "moe_layer_freq")) {
            pattern = layerPattern(written->get<std::string>());
            if ((!pattern || pattern->size() != static_cast<size_t>(model.layers)) && refusal.empty())
                refusal = where + "/moe_layer_freq: \"" + written->get<std::string>() + "\" is neither a layer count nor a list " +
                          "expression of 0s and 1s for the model's " + std::to_string(model.layers) + " layers";
        }
        const auto freq = pattern ? std::nullopt : firstCount({"moe_layer_freq"}, model.layers);
        const auto step = firstCount({"decoder_sparse_step", "interleave_moe_layer_step"}, model.layers);
        std::vector<bool> dense(static_cast<size_t>(std::max(model.layers, 0)), false);
        for (int i = 0; i < model.layers; ++i)
            dense[static_cast<size_t>(i)] = i < leading.value_or(0) || (freq && i % *freq != 0) || (step && (i + 1) % *step != 0) ||
                                            (pattern && pattern->size() == dense.size() && (*pattern)[static_cast<size_t>(i)] == 0);
        if (const auto* only = member(m, "mlp_only_layers"); only && only->is_array())
            for (size_t i = 0; i < only->size(); ++i) {
                const auto& v = (*only)[i];
                if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < model.layers) dense[static_cast<size_t>(v.get<int64_t>())] = true;
                else if (refusal.empty())
                    refusal = where + "/mlp_only_layers/" + std::to_string(i) + ": not a layer index of the model's " +
                              std::to_string(model.layers) + " layers (0-based)";
            }
        for (int i = 0; i < model.layers; ++i)
            if (dense[static_cast<size_t>(i)]) moe.denseLayers.push_back(i);
        // Group-limited routing: DeepSeek's n_group / topk_group, Megatron-LM's moe_router_num_groups /
        // moe_router_group_topk (one group, or every group, is no limit).
        const auto groups = firstCount({"n_group", "moe_router_num_groups", "routing_groups"}, moe.experts);
        const auto perToken = firstCount({"topk_group", "moe_router_group_topk", "groups_per_token"}, moe.experts);
        if (groups && *groups > 1 && perToken && *perToken < *groups) {
            moe.routingGroups = static_cast<int>(*groups);
            moe.groupsPerToken = static_cast<int>(*perToken);
        } else if (groups && *groups > 1 && !perToken) {
            c.assumptions.push_back("n_group " + std::to_string(*groups) + " without the groups a token may use (topk_group): "
                                    "routing read as unlimited");
        }
        if (!moe.denseLayers.empty())
            c.assumptions.push_back(std::to_string(moe.denseLayers.size()) + " of " + std::to_string(model.layers) +
                                    " layers dense (the dense MLP of ffn_hidden " + std::to_string(model.ffnHidden) +
                                    "), the rest expert layers");
        model.moe = moe;
    }
    // Multi-head latent attention (DeepSeek-V2/V3's kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
    // v_head_dim; Megatron-LM's --kv-lora-rank, --q-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim).
    if (const auto kvr = integer(m, "kv_lora_rank"); kvr && *kvr > 0) {
        MlaConfig mla;
        auto width = [&](std::initializer_list<const char*> keys, int64_t least, int64_t fallback, const char* what) {
            for (const char* k : keys)
                if (member(m, k) && !member(m, k)->is_null()) return count(m, k, least, L::heads, where, refusal).value_or(fallback);
            c.assumptions.push_back(std::string("multi-head latent attention: ") + what + " not stated, DeepSeek-V2/V3's " +
                                    std::to_string(fallback));
            return fallback;
        };
        mla.kvLoraRank = count(m, "kv_lora_rank", 1, L::hidden, where, refusal).value_or(0);
        if (member(m, "q_lora_rank") && !member(m, "q_lora_rank")->is_null())
            mla.qLoraRank = count(m, "q_lora_rank", 0, L::hidden, where, refusal).value_or(0);
        mla.qkNopeHeadDim = width({"qk_nope_head_dim", "qk_head_dim"}, 1, 128, "qk_nope_head_dim");
        mla.qkRopeHeadDim = width({"qk_rope_head_dim", "qk_pos_emb_head_dim"}, 0, 64, "qk_rope_head_dim");
        mla.vHeadDim = width({"v_head_dim"}, 1, 128, "v_head_dim");
        if (model.headDim != 0 && model.headDim != mla.qkHeadDim())
            c.assumptions.push_back("head_dim " + std::to_string(model.headDim) + " read as MLA's q and k heads, " +
                                    "qk_nope_head_dim + qk_rope_head_dim = " + std::to_string(mla.qkHeadDim()));
        model.headDim = mla.qkHeadDim();
        model.mla = mla;
    }
    // Multi-token prediction (DeepSeek-V3 §2.2): its depth under Megatron-LM's, HuggingFace's or the report's names.
    for (const char* key : {"mtp_num_layers", "num_nextn_predict_layers", "mtp_layers", "mtp_depth"}) {
        if (!member(m, key) || member(m, key)->is_null()) continue;
        model.mtpLayers = static_cast<int>(count(m, key, 0, 16, where, refusal).value_or(0));
        break;
    }
    // What a record may state that tessel's model has no term for yet: said among the assumptions, never dropped
    // silently (the prediction leaves it out, so it has fewer FLOPs and parameters than the run).
    for (const auto& [key, what] : unmodelledArchitecture(m))
        c.assumptions.push_back("not modelled: " + key + " (" + what + "); the prediction leaves it out");
    if (!refusal.empty()) return;
    // The rules a model file's shape must meet (heads divide hidden unless head_dim is stated, kv_heads divide
    // heads), under the record's own pointers.
    ProblemList shape;
    checkModelShape(model, where, shape);
    if (!shape.items().empty()) {
        refusal = shape.items().front().where + ": " + shape.items().front().message;
        return;
    }
    if (model.headDim == 0) model.headDim = model.hidden / model.heads;
    // A partial rotary as stated (Megatron-LM rotary_percent, NeMo rotary_percentage, HuggingFace rotary_pct or
    // partial_rotary_factor), else the family's; only the eager rotary op's bytes depend on it.
    if (model.position == PositionEmbedding::Rope && !model.mla) {
        model.rotaryPercent = f.rotaryPercent;
        for (const char* key : {"rotary_percent", "rotary_percentage", "rotary_pct", "partial_rotary_factor"}) {
            if (!member(m, key)) continue;
            const auto pct = number(m, key);
            model.rotaryPercent = pct.value_or(-1.0);
            if (!pct || *pct <= 0.0 || *pct > 1.0 || model.rotaryDim() < 2 || model.rotaryDim() % 2 != 0) {
                refusal = where + "/" + key + ": got " + text(m, key) + ", expected a fraction of the " +
                          std::to_string(model.headDim) + "-wide heads that rotates an even number of columns";
                return;
            }
            break;
        }
        if (model.rotaryDim() < 2 || model.rotaryDim() % 2 != 0) model.rotaryPercent = 1.0;
        if (model.rotaryPercent != 1.0)
            c.assumptions.push_back("rotary embedding on " + std::to_string(model.rotaryDim()) + " of each head's " +
                                    std::to_string(model.headDim) + " columns");
    }
    // Sliding-window attention in every layer (HuggingFace sliding_window: the keys each query sees, itself among
    // them; null or absent: none).
    if (const nlohmann::json* w = member(m, "sliding_window"); w && !w->is_null())
        if (const auto window = count(m, "sliding_window", 1, L::seqLen, where, refusal)) model.slidingWindow = *window;
    if (!refusal.empty()) return;
    if (const nlohmann::json* stated = member(m, "params"); stated && !stated->is_null() && !(number(m, "params") > 0.0))
        c.assumptions.push_back("model/params \"" + text(m, "params") + "\" is not a parameter count: not compared");
    if (auto p = number(m, "params"); p && *p > 0.0) {
        c.publishedParameters = *p;
        const bool conventionsFree =
            f.name == "GPT (default)" && lower(text(m, "activation") + text(m, "hidden_act") + text(m, "norm") +
                                               text(m, "position_embedding") + text(m, "positional_embedding"))
                                             .find_first_not_of(' ') == std::string::npos &&
            !boolean(m, "tied_embeddings") && !boolean(m, "bias");
        reconcileParameters(model, c, *p, conventionsFree, ffnDerived);
    }
}

} // namespace

std::vector<LoadedRecord> loadValidationRecords(const nlohmann::json& doc, const std::string& source) {
    const nlohmann::json* arr = &doc;
    std::string base = source + "#";
    for (const char* key : {"runs", "records"})
        if (doc.is_object() && doc.contains(key)) {
            arr = &doc[key];
            base += std::string("/") + key;
            break;
        }
    if (!arr->is_array())
        throw InputError(source + "#", "expected an array of training-run records (or an object with a \"runs\" or \"records\" array)");
    std::vector<LoadedRecord> out;
    for (size_t i = 0; i < arr->size(); ++i) {
        const nlohmann::json& rec = (*arr)[i];
        const std::string ptr = base + "/" + std::to_string(i);
        LoadedRecord lr;
        lr.pointer = ptr;
        if (!rec.is_object()) {
            lr.id = "#" + std::to_string(i);
            lr.refusal = ptr + ": not an object";
            out.push_back(std::move(lr));
            continue;
        }
        lr.id = text(rec, "id");
        if (lr.id.empty()) lr.id = "#" + std::to_string(i);
        lr.group = text(rec, "group");
        if (lr.group.empty()) lr.group = "(no group)";
        ValidationCase c;
        c.id = lr.id;
        c.group = lr.group;
        c.kind = text(rec, "kind");
        c.source = text(rec, "source");
        c.pointer = ptr;
        std::string refusal;
        nlohmann::json flat;
        const auto lifted = liftNestedBlocks(rec, flat);
        const nlohmann::json& read = lifted.empty() ? rec : flat;
        for (const auto& [block, keys] : liftedByBlock(lifted))
            c.assumptions.push_back(block + "'s keys read as the " + block.substr(0, block.find('/')) + "'s own: " + keys);
        readModel(read, ptr, c, refusal);
        if (refusal.empty()) detail::readSystemAndPlan(read, ptr, c, refusal);
        if (refusal.empty()) detail::readMeasured(read, ptr, c, refusal);
        // A refusal at a lifted key names it where the record wrote it.
        for (const LiftedKey& k : lifted) {
            const std::string at = ptr + "/" + k.section + "/" + k.as;
            if (refusal.rfind(at, 0) == 0 && refusal.size() > at.size() && (refusal[at.size()] == ':' || refusal[at.size()] == '/'))
                refusal.replace(0, at.size(), ptr + "/" + k.section + "/" + k.block + "/" + k.key);
        }
        if (refusal.empty()) lr.validationCase = std::move(c);
        else lr.refusal = refusal;
        out.push_back(std::move(lr));
    }
    return out;
}

std::string defaultValidationFile() {
    for (const auto& dir : scenarioSearchPath()) {
        for (const auto& candidate : {dir.parent_path() / "data" / "validation" / "runs.json",
                                      dir.parent_path() / "validation" / "runs.json"}) {
            std::error_code ec;
            if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
        }
    }
    return "";
}

std::vector<LoadedRecord> loadValidationFile(const std::string& path) {
    return loadValidationRecords(readJsonFile(path), path);
}

} // namespace tessel::sim
