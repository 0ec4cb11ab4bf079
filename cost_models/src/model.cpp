// Model JSON loading/validation and exact parameter counts (formulas in FORMULAS.md §1).
#include "tessel/cost/model.hpp"

#include "tessel/cost/hf_config.hpp"
#include "tessel/cost/json_reader.hpp"

#include <sstream>

namespace tessel {

std::string toString(Activation a) {
    return a == Activation::Gelu ? "gelu" : a == Activation::Swiglu ? "swiglu" : a == Activation::Geglu ? "geglu" : "squared_relu";
}
std::string toString(NormKind n) { return n == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
std::string toString(PositionEmbedding p) {
    return p == PositionEmbedding::Learned ? "learned" : p == PositionEmbedding::Rope ? "rope" : "alibi";
}

namespace {
// Elements of one MLP of width `ffn`: GELU has fc1 (h x f) and fc2 (f x h); SwiGLU and GeGLU have gate, up (h x f)
// and down (f x h). Biases: f (or 2f) + h.
int64_t mlpParameters(const ModelConfig& m, int64_t ffn) {
    const int64_t h = m.hidden;
    const int64_t inWidth = m.gatedMlp() ? 2 * ffn : ffn;
    int64_t n = h * inWidth + ffn * h;
    if (m.linearBias) n += inWidth + h;
    return n;
}

int64_t normParameters(const ModelConfig& m, int64_t width) { return m.norm == NormKind::LayerNorm ? 2 * width : width; }
int64_t normParameters(const ModelConfig& m) { return normParameters(m, m.hidden); }

std::string numberText(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

// A list of 0-based layer indices (moe.dense_layers, full_attention_layers): integers of the model's layers,
// ascending and distinct, each problem under its element's pointer.
std::vector<int> readLayerIndices(const nlohmann::json& list, const std::string& where, int layers, ProblemList& problems) {
    std::vector<int> out;
    if (!list.is_array()) {
        problems.add(where, "expected an array of layer indices (0-based)");
        return out;
    }
    for (size_t i = 0; i < list.size(); ++i) {
        const auto& v = list[i];
        const std::string at = where + "/" + std::to_string(i);
        if (!v.is_number_integer()) problems.add(at, "expected a layer index (an integer)");
        else if (v.get<int64_t>() < 0 || v.get<int64_t>() >= layers)
            problems.add(at, "layer " + std::to_string(v.get<int64_t>()) + " is not one of the model's " +
                                 std::to_string(layers) + " layers (0-based)");
        else if (!out.empty() && v.get<int>() <= out.back()) problems.add(at, "layer indices must be ascending and distinct");
        else out.push_back(v.get<int>());
    }
    return out;
}

// Cross-field checks. `hf` selects the HuggingFace key names so pointers name keys the file really has.
void checkModel(const ModelConfig& m, const std::string& ptr, ProblemList& problems, bool hf,
                const std::string& rotaryKey = "/rotary_percent") {
    const std::string kvKey = hf ? "/num_key_value_heads" : "/kv_heads";
    const std::string headsKey = hf ? "/num_attention_heads" : "/heads";
    const std::string topKKey = hf ? "/num_experts_per_tok" : "/moe/top_k";
    if (m.heads > 0 && m.kvHeads > 0 && m.heads % m.kvHeads != 0)
        problems.add(ptr + kvKey, "must divide the number of attention heads (" + std::to_string(m.heads) +
                                      "), got " + std::to_string(m.kvHeads));
    if (m.heads > 0 && m.hidden > 0 && m.headDim == 0 && m.hidden % m.heads != 0)
        problems.add(ptr + headsKey, "must divide hidden (" + std::to_string(m.hidden) + ") unless head_dim is given");
    if (m.moe && m.moe->topK > m.moe->experts)
        problems.add(ptr + topKKey, "must not exceed the number of experts (" + std::to_string(m.moe->experts) + ")");
    if (m.moe && (m.moe->routingGroups > 1 || m.moe->groupsPerToken > 0)) {
        // Group-limited routing: equal groups of whole experts, a token's groups among them, enough experts there.
        const MoeConfig& e = *m.moe;
        const std::string groupsKey = ptr + (hf ? "/n_group" : "/moe/routing_groups");
        const std::string perTokenKey = ptr + (hf ? "/topk_group" : "/moe/groups_per_token");
        if (e.routingGroups < 1 || e.experts % e.routingGroups != 0)
            problems.add(groupsKey, "must divide the " + std::to_string(e.experts) + " experts into equal groups, got " +
                                        std::to_string(e.routingGroups));
        else if (e.groupsPerToken < 1 || e.groupsPerToken > e.routingGroups)
            problems.add(perTokenKey, "must be between 1 and the " + std::to_string(e.routingGroups) + " groups, got " +
                                          std::to_string(e.groupsPerToken));
        else if (static_cast<int64_t>(e.groupsPerToken) * (e.experts / e.routingGroups) < e.topK)
            problems.add(perTokenKey, std::to_string(e.groupsPerToken) + " groups of " +
                                          std::to_string(e.experts / e.routingGroups) + " experts hold fewer than top_k " +
                                          std::to_string(e.topK));
    }
    // tessel costs a parallel block's one reduction as the sum of a dense MLP's and attention's row-parallel outputs;
    // an MoE layer's experts return through their own combine, and no model pairs the two.
    if (m.parallelResidual && m.moe)
        problems.add(ptr + (hf ? "/use_parallel_residual" : "/parallel_residual"),
                     "attention and MLP side by side are modelled with a dense MLP; this model's MLP is a mixture of experts");
    // A norm after each block needs each block's output whole, which the parallel block's one reduction of their sum
    // never forms; no model has both.
    if (m.parallelResidual && m.postNorms)
        problems.add(ptr + (hf ? "/use_parallel_residual" : "/parallel_residual"),
                     "attention and MLP side by side are modelled without norms after each block (post_norms)");
    if (m.rotaryPercent != 1.0) {
        const std::string key = ptr + (hf ? rotaryKey : "/rotary_percent");
        if (m.position != PositionEmbedding::Rope)
            problems.add(key, "a rotary fraction needs position_embedding rope, got " + toString(m.position));
        else if (m.mla)
            problems.add(key, "multi-head latent attention rotates its own part of the heads (qk_rope_head_dim); "
                              "leave the rotary fraction at 1");
        else if (m.headDim > 0 && (m.rotaryDim() < 2 || m.rotaryDim() % 2 != 0))
            problems.add(key, "rotates int(" + std::to_string(m.headDim) + " x " + numberText(m.rotaryPercent) +
                                  ") = " + std::to_string(m.rotaryDim()) +
                                  " columns of each head; RoPE rotates pairs, so that must be even and at least 2");
    }
    if (m.mla) {
        // Latent attention gives every head its own key and value from the shared latent: no grouped heads, and
        // its q and k are not normed per head (the latents are).
        if (m.kvHeads != m.heads)
            problems.add(ptr + kvKey, "must equal the number of attention heads (" + std::to_string(m.heads) +
                                          ") with multi-head latent attention, got " + std::to_string(m.kvHeads));
        if (m.qkNorm) problems.add(ptr + (hf ? "/model_type" : "/qk_norm"), "multi-head latent attention norms its latents, not q and k per head: qk_norm must be false");
        if (m.mla->qkRopeHeadDim > 0 && m.position != PositionEmbedding::Rope)
            problems.add(ptr + (hf ? "/qk_rope_head_dim" : "/mla/qk_rope_head_dim"),
                         "a rotary part of the heads needs position_embedding rope, got " + toString(m.position));
    }
}

// The attention block's parameters, whole (tp 1): MLA's down and up projections, norms apart, or QKV and the output.
int64_t attentionParameters(const ModelConfig& m) {
    const int64_t h = m.hidden, a = m.heads;
    if (m.mla) {
        const MlaConfig& l = *m.mla;
        const int64_t q = l.qLoraRank > 0 ? h * l.qLoraRank + l.qLoraRank * a * l.qkHeadDim() : h * a * l.qkHeadDim();
        const int64_t kv = h * (l.kvLoraRank + l.qkRopeHeadDim) + l.kvLoraRank * a * (l.qkNopeHeadDim + l.vHeadDim);
        int64_t n = q + kv + a * l.vHeadDim * h;
        if (m.linearBias) n += h;
        if (m.attentionSinks) n += a;
        return n;
    }
    const int64_t qDim = static_cast<int64_t>(m.heads) * m.headDim;
    const int64_t kvDim = static_cast<int64_t>(m.kvHeads) * m.headDim;
    // QKV: h x (q + 2 kv); output projection: q x h.
    int64_t n = h * (qDim + 2 * kvDim) + qDim * h;
    if (m.linearBias || m.qkvBias) n += qDim + 2 * kvDim;
    if (m.linearBias) n += h;
    if (m.attentionSinks) n += m.heads;
    return n;
}
} // namespace

void checkModelShape(const ModelConfig& m, const std::string& pointer, ProblemList& problems) {
    checkModel(m, pointer, problems, false);
}

int64_t ModelConfig::rotaryDim() const {
    if (mla) return mla->qkRopeHeadDim;
    // Megatron-core: dim = int(kv_channels * rotary_percent) when rotary_percent < 1.0; transformers: int(head_dim *
    // partial_rotary_factor). The same double product truncated, so the same width.
    return rotaryPercent < 1.0 ? static_cast<int64_t>(static_cast<double>(headDim) * rotaryPercent) : headDim;
}

int ModelConfig::denseLayersIn(int first, int count) const {
    if (!moe) return count;
    int n = 0;
    for (int l : moe->denseLayers) n += l >= first && l < first + count ? 1 : 0;
    return n;
}

ModelConfig ModelConfig::denseLayerModel() const {
    ModelConfig m = *this;
    m.moe.reset();
    return m;
}

int ModelConfig::windowedLayersIn(int first, int count) const {
    if (slidingWindow <= 0) return 0;
    int full = 0;
    for (int l : fullAttentionLayers) full += l >= first && l < first + count ? 1 : 0;
    return count - full;
}

ModelConfig ModelConfig::fullAttentionLayerModel() const {
    ModelConfig m = *this;
    m.slidingWindow = 0;
    m.fullAttentionLayers.clear();
    return m;
}

ModelConfig ModelConfig::layerModel(int index) const {
    ModelConfig m = isDenseLayer(index) && moe ? denseLayerModel() : *this;
    if (slidingWindow > 0 && !isWindowedLayer(index)) m = m.fullAttentionLayerModel();
    return m;
}

ParameterCounts countParameters(const ModelConfig& m) {
    ParameterCounts c;
    const int64_t h = m.hidden;
    c.positionEmbedding = m.position == PositionEmbedding::Learned ? m.seqLen * h : 0;
    c.embedding = m.vocab * h + c.positionEmbedding + (m.embeddingNorm ? normParameters(m) : 0);
    c.perLayerAttention = attentionParameters(m);
    if (m.moe) {
        c.perLayerMlp = m.moe->experts * mlpParameters(m, m.moe->expertFfnHidden) + h * m.moe->experts; // + router
        if (m.moe->sharedFfnHidden > 0) c.perLayerMlp += mlpParameters(m, m.moe->sharedFfnHidden);
        c.denseLayers = static_cast<int>(m.moe->denseLayers.size());
        c.perDenseLayerMlp = mlpParameters(m, m.ffnHidden);
    } else {
        c.perLayerMlp = mlpParameters(m, m.ffnHidden);
    }
    c.perLayerNorms = (m.postNorms ? 4 : 2) * normParameters(m);
    // q and k norms (Qwen3's q_norm / k_norm, Megatron-LM's --qk-layernorm): one weight a head wide each, shared by
    // the heads.
    if (m.qkNorm) c.perLayerNorms += 2 * normParameters(m, m.headDim);
    // MLA's norms over its latents (DeepSeek-V2's q_a_layernorm and kv_a_layernorm).
    if (m.mla) c.perLayerNorms += (m.mla->qLoraRank > 0 ? normParameters(m, m.mla->qLoraRank) : 0) +
                                  normParameters(m, m.mla->kvLoraRank);
    c.finalNorm = normParameters(m);
    c.lmHead = m.tiedEmbeddings ? 0 : m.vocab * h;
    // Multi-token prediction modules (Megatron-core MultiTokenPredictionLayer): enorm, hnorm, eh_proj (2h -> h, no
    // bias), a layer of the last layer's kind (an expert layer unless the last is listed dense), final_layernorm.
    c.mtpModules = m.mtpLayers;
    const bool lastDense = m.moe && !m.moe->denseLayers.empty() && m.moe->denseLayers.back() == m.layers - 1;
    c.perMtpModule = c.perLayerAttention + (lastDense ? c.perDenseLayerMlp : c.perLayerMlp) + c.perLayerNorms +
                     3 * normParameters(m) + 2 * h * h;
    return c;
}

int64_t activeParameters(const ModelConfig& m) {
    auto c = countParameters(m);
    if (!m.moe) return c.total(m.layers);
    int64_t activeMlp = m.moe->topK * mlpParameters(m, m.moe->expertFfnHidden) + m.hidden * m.moe->experts;
    if (m.moe->sharedFfnHidden > 0) activeMlp += mlpParameters(m, m.moe->sharedFfnHidden);
    const int64_t moeLayers = m.layers - static_cast<int64_t>(m.moe->denseLayers.size());
    return c.total(m.layers) - moeLayers * (c.perLayerMlp - activeMlp);
}

ModelConfig parseModel(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems) {
    if (isHuggingFaceConfig(doc)) {
        ModelConfig m = parseHuggingFaceConfig(doc, pointer, problems);
        const bool neox = doc.is_object() && doc.value("model_type", "") == "gpt_neox";
        checkModel(m, pointer, problems, true, neox ? "/rotary_pct" : "/partial_rotary_factor");
        return m;
    }
    ModelConfig m;
    ObjectReader r(doc, pointer, problems);
    if (!r.isObject()) return m;
    checkSchemaVersion(r);
    m.name = r.requireString("name");
    using L = ModelLimits;
    m.layers = static_cast<int>(r.requireInt("layers", 1, L::layers));
    m.hidden = r.requireInt("hidden", 1, L::hidden);
    m.heads = static_cast<int>(r.requireInt("heads", 1, L::heads));
    m.kvHeads = static_cast<int>(r.optInt("kv_heads", m.heads, 1, L::heads));
    m.headDim = r.optInt("head_dim", 0, 1, L::heads);
    m.ffnHidden = r.requireInt("ffn_hidden", 1, L::ffnHidden);
    m.vocab = r.requireInt("vocab", 1, L::vocab);
    m.seqLen = r.requireInt("seq_len", 1, L::seqLen);
    const std::string activation = r.requireEnum("activation", {"gelu", "swiglu", "squared_relu", "geglu"});
    m.activation = activation == "gelu"     ? Activation::Gelu
                 : activation == "swiglu"   ? Activation::Swiglu
                 : activation == "geglu"    ? Activation::Geglu
                                            : Activation::SquaredRelu;
    m.norm = r.optEnum("norm", "layernorm", {"layernorm", "rmsnorm"}) == "layernorm" ? NormKind::LayerNorm
                                                                                        : NormKind::RmsNorm;
    const std::string position = r.optEnum("position_embedding", "learned", {"learned", "rope", "alibi"});
    m.position = position == "learned" ? PositionEmbedding::Learned
               : position == "rope"    ? PositionEmbedding::Rope
                                       : PositionEmbedding::Alibi;
    m.tiedEmbeddings = r.requireBool("tied_embeddings");
    m.linearBias = r.optBool("linear_bias", false);
    m.qkvBias = r.optBool("qkv_bias", false);
    m.qkNorm = r.optBool("qk_norm", false);
    m.postNorms = r.optBool("post_norms", false);
    m.embeddingNorm = r.optBool("embedding_norm", false);
    m.embeddingScale = r.optBool("embedding_scale", false);
    m.attentionSinks = r.optBool("attention_sinks", false);
    m.parallelResidual = r.optBool("parallel_residual", false);
    m.attentionSoftcap = r.optNumber("attention_softcap", 0.0, 0.0, 1e6);
    m.logitSoftcap = r.optNumber("logit_softcap", 0.0, 0.0, 1e6);
    m.dropout = r.optNumber("dropout", 0.0, 0.0, 0.99);
    m.rotaryPercent = r.optNumber("rotary_percent", 1.0, 0.0, 1.0);
    m.slidingWindow = r.optInt("sliding_window", 0, 0, L::seqLen);
    if (const auto* full = r.child("full_attention_layers")) {
        const std::string where = r.pointer("full_attention_layers");
        m.fullAttentionLayers = readLayerIndices(*full, where, m.layers, problems);
        if (m.slidingWindow == 0) problems.add(where, "names the layers a sliding window skips; the model has no sliding_window");
        else if (m.layers > 0 && static_cast<int>(m.fullAttentionLayers.size()) == m.layers)
            problems.add(where, "lists every layer: a model that windows none has no sliding_window");
    }
    m.mtpLayers = static_cast<int>(r.optInt("mtp_layers", 0, 0, 16));
    if (const auto* moe = r.child("moe")) {
        ObjectReader mr(*moe, r.pointer("moe"), problems);
        MoeConfig cfg;
        cfg.experts = static_cast<int>(mr.requireInt("experts", 1, L::heads));
        cfg.topK = static_cast<int>(mr.requireInt("top_k", 1, L::heads));
        cfg.expertFfnHidden = mr.requireInt("expert_ffn_hidden", 1, L::ffnHidden);
        cfg.sharedFfnHidden = mr.optInt("shared_ffn_hidden", 0, 0, L::ffnHidden);
        if (const auto* dense = mr.child("dense_layers"))
            cfg.denseLayers = readLayerIndices(*dense, mr.pointer("dense_layers"), m.layers, problems);
        cfg.routingGroups = static_cast<int>(mr.optInt("routing_groups", 0, 0, L::heads));
        cfg.groupsPerToken = static_cast<int>(mr.optInt("groups_per_token", 0, 0, L::heads));
        mr.finish();
        m.moe = cfg;
    }
    if (const auto* mla = r.child("mla")) {
        ObjectReader lr(*mla, r.pointer("mla"), problems);
        MlaConfig cfg;
        cfg.qLoraRank = lr.optInt("q_lora_rank", 0, 0, L::hidden);
        cfg.kvLoraRank = lr.requireInt("kv_lora_rank", 1, L::hidden);
        cfg.qkNopeHeadDim = lr.requireInt("qk_nope_head_dim", 1, L::heads);
        cfg.qkRopeHeadDim = lr.optInt("qk_rope_head_dim", 0, 0, L::heads);
        cfg.vHeadDim = lr.requireInt("v_head_dim", 1, L::heads);
        lr.finish();
        if (m.headDim != 0 && m.headDim != cfg.qkHeadDim())
            problems.add(r.pointer("head_dim"), "with mla the heads are qk_nope_head_dim + qk_rope_head_dim = " +
                                                    std::to_string(cfg.qkHeadDim()) + " wide; leave head_dim out");
        m.headDim = cfg.qkHeadDim();
        m.mla = cfg;
    }
    if (const auto* src = r.child("sources")) {
        if (!src->is_array()) {
            problems.add(r.pointer("sources"), "expected an array of strings");
        } else {
            for (size_t i = 0; i < src->size(); ++i) {
                if ((*src)[i].is_string()) m.sources.push_back((*src)[i].get<std::string>());
                else problems.add(r.pointer("sources") + "/" + std::to_string(i), "expected a string");
            }
        }
    }
    r.finish();
    if (m.headDim == 0 && m.heads > 0) m.headDim = m.hidden / m.heads;
    checkModel(m, pointer, problems, false);
    return m;
}

ModelConfig parseModel(const nlohmann::json& doc, const std::string& pointer) {
    ProblemList problems;
    ModelConfig m = parseModel(doc, pointer, problems);
    problems.throwIfAny();
    return m;
}

nlohmann::json modelToJson(const ModelConfig& m) {
    nlohmann::json j{{"schema_version", 1},
                     {"name", m.name},
                     {"layers", m.layers},
                     {"hidden", m.hidden},
                     {"heads", m.heads},
                     {"kv_heads", m.kvHeads},
                     {"ffn_hidden", m.ffnHidden},
                     {"vocab", m.vocab},
                     {"seq_len", m.seqLen},
                     {"activation", toString(m.activation)},
                     {"norm", toString(m.norm)},
                     {"position_embedding", toString(m.position)},
                     {"tied_embeddings", m.tiedEmbeddings},
                     {"linear_bias", m.linearBias},
                     {"qkv_bias", m.qkvBias},
                     {"dropout", m.dropout}};
    if (m.heads > 0 && m.headDim != m.hidden / m.heads && !m.mla) j["head_dim"] = m.headDim;
    if (m.mla) {
        j["mla"] = {{"kv_lora_rank", m.mla->kvLoraRank}, {"qk_nope_head_dim", m.mla->qkNopeHeadDim},
                    {"qk_rope_head_dim", m.mla->qkRopeHeadDim}, {"v_head_dim", m.mla->vHeadDim}};
        if (m.mla->qLoraRank > 0) j["mla"]["q_lora_rank"] = m.mla->qLoraRank;
    }
    if (m.qkNorm) j["qk_norm"] = true;
    if (m.postNorms) j["post_norms"] = true;
    if (m.embeddingNorm) j["embedding_norm"] = true;
    if (m.embeddingScale) j["embedding_scale"] = true;
    if (m.attentionSinks) j["attention_sinks"] = true;
    if (m.parallelResidual) j["parallel_residual"] = true;
    if (m.attentionSoftcap > 0.0) j["attention_softcap"] = m.attentionSoftcap;
    if (m.logitSoftcap > 0.0) j["logit_softcap"] = m.logitSoftcap;
    if (m.rotaryPercent != 1.0) j["rotary_percent"] = m.rotaryPercent;
    if (m.slidingWindow > 0) j["sliding_window"] = m.slidingWindow;
    if (!m.fullAttentionLayers.empty()) j["full_attention_layers"] = m.fullAttentionLayers;
    if (m.mtpLayers > 0) j["mtp_layers"] = m.mtpLayers;
    if (m.moe) {
        j["moe"] = {{"experts", m.moe->experts}, {"top_k", m.moe->topK}, {"expert_ffn_hidden", m.moe->expertFfnHidden}};
        if (m.moe->sharedFfnHidden > 0) j["moe"]["shared_ffn_hidden"] = m.moe->sharedFfnHidden;
        if (!m.moe->denseLayers.empty()) j["moe"]["dense_layers"] = m.moe->denseLayers;
        if (m.moe->routingGroups > 1) {
            j["moe"]["routing_groups"] = m.moe->routingGroups;
            j["moe"]["groups_per_token"] = m.moe->groupsPerToken;
        }
    }
    if (!m.sources.empty()) j["sources"] = m.sources;
    return j;
}

} // namespace tessel
