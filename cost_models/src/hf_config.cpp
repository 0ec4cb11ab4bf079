// Translates HuggingFace transformers config.json files (llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe,
// phi3, nemotron, stablelm, gpt_neox, deepseek_v2, deepseek_v3, gemma 1-3, gpt_oss, gpt2) into tessel ModelConfigs.
#include "tessel/cost/hf_config.hpp"

#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

namespace tessel {

namespace {

// The two architecture families tessel maps. Llama-like: pre-RMSNorm, RoPE, SwiGLU MLP, no biases
// (llama, mistral, mixtral, phi3 (its fused qkv_proj and gate_up_proj hold the same weights); qwen2 adds a QKV
// bias, qwen3 an RMSNorm over each head of q and k, qwen3_moe experts; gpt_oss biases on every linear, experts,
// the even layers windowed). GPT-2: pre-LayerNorm, learned positions,
// GELU MLP, biases everywhere, tied embeddings.
enum class Family { LlamaLike, Gpt2 };

struct SupportedType {
    const char* modelType;
    Family family;
};

// qwen2_moe: routed experts and one shared expert (moe.shared_ffn_hidden); the shared expert's sigmoid gate
// (shared_expert_gate, hidden weights a layer: 3.4e-6 of Qwen1.5-MoE-A2.7B, and a scalar a token) has no
// counterpart in ModelConfig and is left out, as DeepSeek-V3's router bias is. qwen3_moe has no shared expert;
// both mix dense and sparse layers (decoder_sparse_step, mlp_only_layers) as moe.dense_layers. gpt_neox (Pythia,
// GPT-NeoX-20B): GELU MLP, LayerNorm and biases everywhere, rotary over rotary_pct of each head, and attention and
// MLP side by side (use_parallel_residual, ModelConfig::parallelResidual). stablelm (StableLM-3B-4E1T,
// StableLM 2): Llama's SwiGLU MLP and untied head with LayerNorm (weight and bias), rotary over
// partial_rotary_factor of each head, q/k/v biases where use_qkv_bias. deepseek_v2 / deepseek_v3: latent
// attention, shared experts and their leading dense layers; the multi-token-prediction modules
// (num_nextn_predict_layers) are the model's mtp_layers, trained with it (DeepSeek-V3 report §2.2) though
// transformers does not build them (and tessel does not count them in the model's parameters).
constexpr SupportedType kSupported[] = {
    {"llama", Family::LlamaLike}, {"mistral", Family::LlamaLike}, {"mixtral", Family::LlamaLike},
    {"qwen2", Family::LlamaLike}, {"qwen2_moe", Family::LlamaLike}, {"qwen3", Family::LlamaLike},
    {"qwen3_moe", Family::LlamaLike},
    {"phi3", Family::LlamaLike},  {"nemotron", Family::LlamaLike}, {"deepseek_v2", Family::LlamaLike},
    {"deepseek_v3", Family::LlamaLike}, {"gpt_neox", Family::LlamaLike}, {"stablelm", Family::LlamaLike},
    {"gemma", Family::LlamaLike}, {"gemma2", Family::LlamaLike}, {"gemma3_text", Family::LlamaLike},
    {"gpt_oss", Family::LlamaLike}, {"gpt2", Family::Gpt2},
};

std::string supportedList() {
    std::string s;
    for (const auto& t : kSupported) s += (s.empty() ? "" : ", ") + std::string(t.modelType);
    return s;
}

// HF configs name a field differently per family (GPT2Config's attribute_map makes hidden_size an alias of
// n_embd, and so on). Returns the first of `names` present in the config; when none is, the first name,
// so that a "required field is missing" problem points at the family's canonical key.
std::string firstPresent(const ObjectReader& r, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (r.has(n)) return n;
    return *names.begin();
}

bool isNull(const nlohmann::json& doc, const std::string& key) {
    auto it = doc.find(key);
    return it != doc.end() && it->is_null();
}

// An optional integer that HF configs may also write as null (meaning "use the default").
int64_t optIntOrNull(ObjectReader& r, const nlohmann::json& doc, const std::string& key, int64_t fallback,
                     int64_t lo, int64_t hi) {
    if (isNull(doc, key)) {
        r.accept(key);
        return fallback;
    }
    return r.optInt(key, fallback, lo, hi);
}

// Sliding-window attention as transformers builds it: Mistral, Mixtral and Phi-3 window every layer by
// sliding_window (null: none); Qwen2 / Qwen3 (and their MoE) only with use_sliding_window, and then the layers from
// max_window_layers on (Qwen2Config's layer_types; its default 28); a layer_types list says it layer by layer
// ("sliding_attention" or "full_attention"). Gemma 2 windows the even layers (Gemma2DecoderLayer's is_sliding), Gemma
// 3 all but every sliding_window_pattern-th (default 6: (layer + 1) % 6 != 0), both at 4096 keys unless told.
// Each query sees itself and the sliding_window - 1 keys before it
// (sliding_window_causal_mask_function). The layers left whole are the model's full_attention_layers. Other
// families' modeling code attends over the whole prefix whatever the config holds.
void readSlidingWindow(ObjectReader& r, const nlohmann::json& doc, const std::string& modelType, ModelConfig& m,
                       ProblemList& problems) {
    const bool qwen = modelType.rfind("qwen", 0) == 0;
    const bool gemma2 = modelType == "gemma2", gemma3 = modelType == "gemma3_text", gptOss = modelType == "gpt_oss";
    if (!(qwen || gemma2 || gemma3 || gptOss || modelType == "mistral" || modelType == "mixtral" || modelType == "phi3"))
        return;
    if ((!doc.contains("sliding_window") && !(gemma2 || gemma3 || gptOss)) || isNull(doc, "sliding_window")) return;
    if (qwen && !r.optBool("use_sliding_window", false)) return;
    const int64_t window = r.optInt("sliding_window", gptOss ? 128 : 4096, 1, ModelLimits::seqLen);
    const int64_t firstWindowed = qwen ? r.optInt("max_window_layers", 28, 0, ModelLimits::layers) : 0;
    // gpt-oss (GptOssConfig's default layer_types) windows the even layers, as Gemma 2 does.
    const int64_t everyNthFull = gemma2 || gptOss ? 2 : gemma3 ? r.optInt("sliding_window_pattern", 6, 1, ModelLimits::layers) : 0;
    std::vector<bool> windowed(static_cast<size_t>(std::max(m.layers, 0)), false);
    for (int i = 0; i < m.layers; ++i)
        windowed[static_cast<size_t>(i)] = i >= firstWindowed && (everyNthFull == 0 || (i + 1) % everyNthFull != 0);
    if (const auto types = doc.find("layer_types"); types != doc.end() && !types->is_null()) {
        const std::string where = r.pointer("layer_types");
        if (!types->is_array() || types->size() != windowed.size()) {
            problems.add(where, "expected one entry a layer (" + std::to_string(m.layers) + ")");
            return;
        }
        for (size_t i = 0; i < types->size(); ++i) {
            const auto& t = (*types)[i];
            if (t == "sliding_attention" || t == "full_attention") windowed[i] = t == "sliding_attention";
            else problems.add(where + "/" + std::to_string(i), "expected \"sliding_attention\" or \"full_attention\"");
        }
    }
    if (std::find(windowed.begin(), windowed.end(), true) == windowed.end()) return;
    m.slidingWindow = window;
    for (int i = 0; i < m.layers; ++i)
        if (!windowed[static_cast<size_t>(i)]) m.fullAttentionLayers.push_back(i);
}

} // namespace

bool isHuggingFaceConfig(const nlohmann::json& doc) {
    return doc.is_object() && doc.contains("model_type") && !doc.contains("schema_version");
}

ModelConfig parseHuggingFaceConfig(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems) {
    ModelConfig m;
    ObjectReader r(doc, pointer, problems);
    if (!r.isObject()) return m;

    const std::string modelType = r.requireString("model_type");
    const auto* type = std::find_if(std::begin(kSupported), std::end(kSupported),
                                    [&](const SupportedType& t) { return modelType == t.modelType; });
    if (type == std::end(kSupported)) {
        if (doc.contains("model_type") && doc["model_type"].is_string())
            problems.add(r.pointer("model_type"), "unsupported model_type \"" + modelType +
                                                      "\" (tessel reads HuggingFace configs of: " + supportedList() +
                                                      "); write a tessel model file instead");
        return m;
    }
    const bool gpt2 = type->family == Family::Gpt2;

    // Shapes. GPT-2 spells them n_layer/n_embd/n_head/n_positions; the aliases are accepted in both families.
    const std::string layersKey = gpt2 ? firstPresent(r, {"n_layer", "num_hidden_layers"})
                                       : firstPresent(r, {"num_hidden_layers", "n_layer"});
    const std::string hiddenKey = gpt2 ? firstPresent(r, {"n_embd", "hidden_size"})
                                       : firstPresent(r, {"hidden_size", "n_embd"});
    const std::string headsKey = gpt2 ? firstPresent(r, {"n_head", "num_attention_heads"})
                                      : firstPresent(r, {"num_attention_heads", "n_head"});
    const std::string seqKey = gpt2 ? firstPresent(r, {"n_positions", "n_ctx", "max_position_embeddings"})
                                    : firstPresent(r, {"max_position_embeddings", "n_positions"});
    m.layers = static_cast<int>(r.requireInt(layersKey, 1, ModelLimits::layers));
    m.hidden = r.requireInt(hiddenKey, 1, ModelLimits::hidden);
    m.heads = static_cast<int>(r.requireInt(headsKey, 1, ModelLimits::heads));
    // The position table size stands in for the training sequence length (Llama 3: 8192); a user who
    // trains shorter or longer overrides seq_len in a tessel model file.
    m.seqLen = r.requireInt(seqKey, 1, ModelLimits::seqLen);
    m.vocab = r.requireInt("vocab_size", 1, ModelLimits::vocab);

    // kv heads default to heads (MHA), as in LlamaConfig when num_key_value_heads is absent or null.
    m.kvHeads = gpt2 ? m.heads
                     : static_cast<int>(optIntOrNull(r, doc, "num_key_value_heads", m.heads, 1, ModelLimits::heads));
    // Nemotron configs converted from NeMo name it kv_channels (Megatron's word).
    const char* headDimKey = modelType == "nemotron" && !doc.contains("head_dim") ? "kv_channels" : "head_dim";
    const int64_t headDim = gpt2 ? 0 : optIntOrNull(r, doc, headDimKey, 0, 1, ModelLimits::heads);
    if (headDim > 0) m.headDim = headDim;
    else if (m.heads > 0 && m.hidden % m.heads == 0) m.headDim = m.hidden / m.heads;
    // else: left 0, and parseModel's model check reports that heads must divide hidden.

    if (gpt2) {
        // n_inner null (the released GPT-2 configs) means 4 x n_embd (GPT2MLP in transformers).
        m.ffnHidden = optIntOrNull(r, doc, "n_inner", 4 * m.hidden, 1, ModelLimits::ffnHidden);
        const std::string act = r.optString("activation_function", "gelu_new");
        if (act.rfind("gelu", 0) == 0) {
            m.activation = Activation::Gelu; // gelu, gelu_new, gelu_fast, gelu_pytorch_tanh: same cost
        } else {
            problems.add(r.pointer("activation_function"),
                         "unsupported activation \"" + act + "\" for gpt2 (tessel models GELU MLPs)");
        }
        m.norm = NormKind::LayerNorm;
        m.position = PositionEmbedding::Learned;
        m.tiedEmbeddings = r.optBool("tie_word_embeddings", true); // GPT-2 ties wte and lm_head
        m.linearBias = true;                                       // Conv1D layers all carry biases
        m.dropout = r.optNumber("resid_pdrop", 0.1, 0.0, 0.99);
    } else {
        m.ffnHidden = r.requireInt("intermediate_size", 1, ModelLimits::ffnHidden);
        const bool neox = modelType == "gpt_neox";
        // Gemma 1, 2 and 3 (text): a gated GELU, a head tied to the embedding; 2 and 3 normalise each block's
        // output too, 3 each head of q and k.
        const bool gemma = modelType == "gemma" || modelType == "gemma2" || modelType == "gemma3_text";
        // Gemma names its gate's GELU hidden_activation (GemmaConfig; hidden_act in its first configs, "gelu" there).
        const std::string actKey = gemma && doc.contains("hidden_activation") && !isNull(doc, "hidden_activation")
                                       ? "hidden_activation"
                                       : "hidden_act";
        if (actKey != "hidden_act") r.accept("hidden_act");
        const std::string act = r.optString(actKey, modelType == "nemotron" ? "relu2" : neox ? "gelu" : gemma ? "gelu_pytorch_tanh" : "silu");
        if (gemma) {
            // GemmaMLP: down_proj(act(gate_proj(x)) * up_proj(x)), the GELU in its tanh form (Gemma Team 2024,
            // arXiv:2403.08295 §2: GeGLU).
            if (act.rfind("gelu", 0) == 0) m.activation = Activation::Geglu;
            else
                problems.add(r.pointer(actKey), "unsupported " + actKey + " \"" + act +
                                                    "\" for model_type " + modelType +
                                                    " (tessel models its gated GELU MLP)");
        } else if (neox) {
            // GPTNeoXMLP: dense_h_to_4h, act, dense_4h_to_h (no gate).
            if (act.rfind("gelu", 0) == 0) m.activation = Activation::Gelu; // gelu, gelu_new, gelu_fast: same cost
            else
                problems.add(r.pointer("hidden_act"), "unsupported hidden_act \"" + act +
                                                          "\" for model_type gpt_neox (tessel models its GELU MLP)");
        } else if (act == "silu" || act == "swish") {
            m.activation = Activation::Swiglu; // gate_proj * silu, up_proj, down_proj
        } else if (act == "relu2" && modelType == "nemotron") {
            m.activation = Activation::SquaredRelu; // NemotronMLP: up_proj, relu(x)^2, down_proj (no gate)
        } else {
            problems.add(r.pointer("hidden_act"), "unsupported hidden_act \"" + act + "\" for model_type " +
                                                      modelType + " (tessel models the SwiGLU MLP, hidden_act silu)");
        }
        // Nemotron normalises with LayerNorm1P (a LayerNorm with weight and bias, modeling_nemotron.py).
        const bool stablelm = modelType == "stablelm";
        m.norm = modelType == "nemotron" || neox || stablelm ? NormKind::LayerNorm : NormKind::RmsNorm;
        m.position = PositionEmbedding::Rope;
        // Partial rotary: the part of each head RoPE rotates. GPTNeoXConfig's rotary_pct (default 0.25),
        // NemotronConfig's and Phi3Config's partial_rotary_factor (defaults 0.5 and 1.0); their modeling files
        // rotate q[..., :int(head_dim x factor)] and pass the rest. The other families' modeling code rotates the
        // whole head whatever the config says, so the key is not read for them.
        if (neox) m.rotaryPercent = r.optNumber("rotary_pct", 0.25, 0.0, 1.0);
        else if (modelType == "nemotron") m.rotaryPercent = r.optNumber("partial_rotary_factor", 0.5, 0.0, 1.0);
        else if (stablelm) m.rotaryPercent = r.optNumber("partial_rotary_factor", 0.25, 0.0, 1.0);
        else if (modelType == "phi3") m.rotaryPercent = r.optNumber("partial_rotary_factor", 1.0, 0.0, 1.0);
        // GemmaConfig ties the output layer to the embedding unless told (its released configs do not say).
        m.tiedEmbeddings = r.optBool("tie_word_embeddings", gemma);
        // Llama's attention_bias puts biases on q/k/v and o_proj, mlp_bias on the MLP. ModelConfig has
        // "all linears" or "QKV only": attention_bias alone maps to QKV bias, leaving out o_proj's `hidden`
        // bias elements per layer (no released llama/mistral/mixtral checkpoint sets it).
        // GPT-NeoX: query_key_value and dense take attention_bias (GPTNeoXConfig's default true); its MLP always
        // has biases.
        // gpt-oss: q/k/v and o_proj take attention_bias (GptOssConfig: true), and its router and experts always
        // have biases (GptOssTopKRouter's bias, GptOssExperts' gate_up_proj_bias and down_proj_bias).
        const bool gptOss = modelType == "gpt_oss";
        const bool attentionBias = r.optBool("attention_bias", neox || gptOss);
        const bool mlpBias = neox || gptOss || r.optBool("mlp_bias", false);
        if ((neox || gptOss) && !attentionBias)
            problems.add(r.pointer("attention_bias"),
                         std::string("false beside ") + (neox ? "GPT-NeoX's MLP" : "gpt-oss's expert") +
                             " biases: tessel's model has biases on every linear or on q/k/v only, not on the MLP alone");
        m.linearBias = attentionBias && mlpBias;
        // Qwen2 and Qwen2-MoE always have q/k/v biases (modeling_qwen2.py, modeling_qwen2_moe.py: bias=True on
        // q_proj, k_proj, v_proj; o_proj none).
        m.qkvBias = attentionBias || modelType == "qwen2" || modelType == "qwen2_moe" ||
                    (stablelm && r.optBool("use_qkv_bias", false));
        // StableLM's qk_layernorm is a LayerNorm of its own for every head (StableLmLayerNormPerHead: heads x
        // head_dim weights and biases), where tessel's q and k norms are one head wide and shared by the heads.
        if (stablelm && r.optBool("qk_layernorm", false))
            problems.add(r.pointer("qk_layernorm"), "StableLM's per-head LayerNorms (a weight and bias for every head) "
                                                    "have no counterpart in tessel's model, whose q and k norms are "
                                                    "shared by the heads");
        // attention_dropout is the only dropout these configs carry (0.0 in every released checkpoint). GPT-NeoX
        // and StableLM have attention_dropout and hidden_dropout (0.0 both in Pythia's); tessel's model has one
        // probability, so two that differ are a problem rather than one of them taken.
        m.dropout = r.optNumber("attention_dropout", 0.0, 0.0, 0.99);
        if ((neox || stablelm) && doc.contains("hidden_dropout")) {
            const double hidden = r.optNumber("hidden_dropout", 0.0, 0.0, 0.99);
            if (doc.contains("attention_dropout") && hidden != m.dropout)
                problems.add(r.pointer("attention_dropout"),
                             "differs from hidden_dropout; tessel's model has one dropout probability for both");
            m.dropout = hidden;
        }
        // Qwen3 normalises each head of q and k with an RMSNorm of head_dim weights (q_norm, k_norm in
        // modeling_qwen3.py and modeling_qwen3_moe.py).
        m.qkNorm = modelType == "qwen3" || modelType == "qwen3_moe" || modelType == "gemma3_text";
        // Gemma 2 and 3 (Gemma2DecoderLayer, Gemma3DecoderLayer): post_attention_layernorm and
        // post_feedforward_layernorm on each block's output before its residual add.
        m.postNorms = modelType == "gemma2" || modelType == "gemma3_text";
        // GPT-NeoX (GPTNeoXLayer: x + attn(ln1(x)) + mlp(ln2(x)) where use_parallel_residual, its default and every
        // Pythia config's) and StableLM (StableLmDecoderLayer, default false; StableLM 2 12B sets it) run attention
        // and the MLP side by side.
        if (neox || stablelm) m.parallelResidual = r.optBool("use_parallel_residual", neox);
        // Gemma 1-3 multiply the embedding by sqrt(hidden_size) (GemmaModel, Gemma2Model, Gemma3TextModel's normalizer).
        m.embeddingScale = gemma;
        // gpt-oss's attention has a learned sink a head (GptOssAttention.sinks).
        m.attentionSinks = modelType == "gpt_oss";
        // Gemma 2's tanh soft-capping of the attention scores and of the logits (Gemma2Config's defaults 50 and 30;
        // Gemma 3's are null, and no other model's config names them).
        const double softcapLimit = 1e6;
        auto softcap = [&](const char* key, double gemma2Default) {
            if (!doc.contains(key)) return modelType == "gemma2" ? gemma2Default : 0.0;
            if (isNull(doc, key)) return 0.0;
            return r.optNumber(key, 0.0, 0.0, softcapLimit);
        };
        m.attentionSoftcap = softcap("attn_logit_softcapping", 50.0);
        m.logitSoftcap = softcap("final_logit_softcapping", 30.0);
        if (modelType == "mixtral" || gptOss) {
            // Every layer sparse. gpt-oss (modeling_gpt_oss.py): num_local_experts experts of intermediate_size, top
            // num_experts_per_tok (its own checkpoints' experts_per_token), a gated SiLU clamped at swiglu_limit and
            // costed as SwiGLU; each head's learned attention sink is attention_sinks; the router's bias (experts
            // parameters a layer) has no place in ModelConfig and is not counted; the YaRN rotary scaling changes no shape.
            MoeConfig moe;
            moe.experts = static_cast<int>(r.requireInt("num_local_experts", 1, ModelLimits::heads));
            moe.topK = static_cast<int>(r.requireInt(gptOss ? firstPresent(r, {"num_experts_per_tok", "experts_per_token"})
                                                            : std::string("num_experts_per_tok"),
                                                     1, ModelLimits::heads));
            if (gptOss) r.accept("experts_per_token");
            moe.expertFfnHidden = m.ffnHidden; // each expert is a SwiGLU MLP of intermediate_size
            m.moe = moe;
        } else if (modelType == "qwen3_moe" || modelType == "qwen2_moe") {
            // Every layer sparse unless the config says otherwise: Qwen3MoeDecoderLayer uses the experts where the
            // layer is not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0; intermediate_size is then
            // unused. Each expert is a SwiGLU MLP of moe_intermediate_size; the router is hidden x num_experts.
            // Qwen2-MoE (Qwen2MoeSparseMoeBlock, the same layer rule) adds one shared expert, a SwiGLU MLP of
            // shared_expert_intermediate_size beside the routed ones; its sigmoid gate (shared_expert_gate, hidden
            // x 1 a layer: 49,152 parameters of Qwen1.5-MoE-A2.7B's 14.3 B) is not counted.
            MoeConfig moe;
            moe.experts = static_cast<int>(r.requireInt("num_experts", 1, ModelLimits::heads));
            moe.topK = static_cast<int>(r.requireInt("num_experts_per_tok", 1, ModelLimits::heads));
            moe.expertFfnHidden = r.requireInt("moe_intermediate_size", 1, ModelLimits::ffnHidden);
            if (modelType == "qwen2_moe")
                moe.sharedFfnHidden = r.requireInt("shared_expert_intermediate_size", 1, ModelLimits::ffnHidden);
            // Qwen3MoeDecoderLayer: an expert layer where the layer is not in mlp_only_layers and
            // (layer + 1) % decoder_sparse_step == 0, else the dense MLP of intermediate_size.
            const int64_t step = r.optInt("decoder_sparse_step", 1, 1, ModelLimits::layers);
            std::vector<bool> dense(static_cast<size_t>(m.layers), false);
            for (int i = 0; i < m.layers; ++i) dense[static_cast<size_t>(i)] = (i + 1) % step != 0;
            const auto only = doc.find("mlp_only_layers");
            if (only != doc.end() && !only->is_null()) {
                if (!only->is_array()) problems.add(r.pointer("mlp_only_layers"), "expected an array of layer indices");
                else
                    for (size_t i = 0; i < only->size(); ++i) {
                        const auto& v = (*only)[i];
                        if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < m.layers)
                            dense[static_cast<size_t>(v.get<int64_t>())] = true;
                        else
                            problems.add(r.pointer("mlp_only_layers") + "/" + std::to_string(i),
                                         "not a layer index of the model's " + std::to_string(m.layers) + " layers (0-based)");
                    }
            }
            r.accept("mlp_only_layers");
            for (int i = 0; i < m.layers; ++i)
                if (dense[static_cast<size_t>(i)]) moe.denseLayers.push_back(i);
            m.moe = moe;
        } else if (modelType == "deepseek_v2" || modelType == "deepseek_v3") {
            // DeepseekV2/V3 (modeling_deepseek_v3.py): multi-head latent attention; an expert layer where
            // n_routed_experts is set, layer >= first_k_dense_replace and layer % moe_layer_freq == 0, with
            // n_shared_experts experts of moe_intermediate_size beside the routed ones; else the dense MLP of
            // intermediate_size. The router's e_score_correction_bias (V3, n_routed_experts a layer) is not counted.
            MlaConfig mla;
            mla.qLoraRank = optIntOrNull(r, doc, "q_lora_rank", 0, 0, ModelLimits::hidden);
            mla.kvLoraRank = r.requireInt("kv_lora_rank", 1, ModelLimits::hidden);
            mla.qkNopeHeadDim = r.requireInt("qk_nope_head_dim", 1, ModelLimits::heads);
            mla.qkRopeHeadDim = r.requireInt("qk_rope_head_dim", 0, ModelLimits::heads);
            mla.vHeadDim = r.requireInt("v_head_dim", 1, ModelLimits::heads);
            m.mla = mla;
            m.headDim = mla.qkHeadDim(); // transformers' head_dim is the rotary part's width, not a head's
            m.mtpLayers = static_cast<int>(optIntOrNull(r, doc, "num_nextn_predict_layers", 0, 0, 16));
            const int64_t routed = optIntOrNull(r, doc, "n_routed_experts", 0, 0, ModelLimits::heads);
            if (routed > 0) {
                MoeConfig moe;
                moe.experts = static_cast<int>(routed);
                moe.topK = static_cast<int>(r.requireInt("num_experts_per_tok", 1, ModelLimits::heads));
                moe.expertFfnHidden = r.requireInt("moe_intermediate_size", 1, ModelLimits::ffnHidden);
                moe.sharedFfnHidden = optIntOrNull(r, doc, "n_shared_experts", 0, 0, ModelLimits::heads) * moe.expertFfnHidden;
                const int64_t first = r.optInt("first_k_dense_replace", 0, 0, ModelLimits::layers);
                const int64_t freq = r.optInt("moe_layer_freq", 1, 1, ModelLimits::layers);
                for (int i = 0; i < m.layers; ++i)
                    if (i < first || i % freq != 0) moe.denseLayers.push_back(i);
                // Group-limited routing (MoEGate's n_group / topk_group; V2-Lite's 1 / 1 is none).
                const int64_t groups = optIntOrNull(r, doc, "n_group", 1, 1, ModelLimits::heads);
                if (groups > 1) {
                    moe.routingGroups = static_cast<int>(groups);
                    moe.groupsPerToken = static_cast<int>(optIntOrNull(r, doc, "topk_group", groups, 1, ModelLimits::heads));
                }
                m.moe = moe;
            }
        }
        readSlidingWindow(r, doc, modelType, m, problems);
    }

    const auto nameIt = doc.find("_name_or_path");
    if (nameIt != doc.end() && nameIt->is_string() && !nameIt->get<std::string>().empty())
        m.name = nameIt->get<std::string>();
    else
        m.name = modelType;
    m.sources.push_back("HuggingFace config.json (model_type " + modelType + ")");
    // No finish(): keys tessel does not read (rope_theta, torch_dtype, ...) are fine in a foreign format.
    return m;
}

} // namespace tessel
