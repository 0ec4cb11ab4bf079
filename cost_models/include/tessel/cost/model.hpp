// Transformer model description (tessel model JSON or HuggingFace config.json) and its exact parameter counts.
#pragma once

#include "tessel/cost/errors.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

// The MLP's activation. GELU and squared ReLU (Nemotron-3/-4, Megatron-LM --squared-relu) are one fc1 and one fc2
// around an elementwise op of the same bytes; SwiGLU and GeGLU (Gemma: GELU's tanh form on the gate) gate: fc1 is
// twice as wide (gate and up) and the gated op reads both halves.
enum class Activation { Gelu, Swiglu, SquaredRelu, Geglu };
enum class NormKind { LayerNorm, RmsNorm };
// Where a layer learns token positions: a learned table added to the embedding (GPT-2, GPT-3), rotary embeddings on
// q and k (Llama), or ALiBi's fixed per-head linear bias on the attention scores (Press et al. 2022; BLOOM): neither
// of the last two has parameters.
enum class PositionEmbedding { Learned, Rope, Alibi };

struct MoeConfig {
    int experts = 0;               // routed experts per MoE layer
    int topK = 0;                  // experts each token is sent to
    int64_t expertFfnHidden = 0;   // hidden width of one expert's MLP
    // Shared experts every token passes through beside its routed ones (DeepSeekMoE, Qwen-MoE, Llama 4;
    // Megatron-LM --moe-shared-expert-intermediate-size): one dense MLP of their summed width, 0 for none.
    int64_t sharedFfnHidden = 0;
    // Layers (0-based, ascending) whose MLP is the dense one of ffn_hidden instead of the experts: DeepSeek-V2/V3's
    // first_k_dense_replace, Qwen-MoE's mlp_only_layers and decoder_sparse_step, Megatron-LM's --moe-layer-freq.
    std::vector<int> denseLayers;
    // Group-limited routing (DeepSeek-V2's device-limited and V3's node-limited routing; HF n_group / topk_group,
    // Megatron-LM --moe-router-num-groups / --moe-router-group-topk): the experts fall into routingGroups equal
    // contiguous groups and a token picks its top_k among the experts of groupsPerToken of them. 0: unlimited.
    int routingGroups = 0;
    int groupsPerToken = 0;
};

// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 §2.1; Megatron-core's MLASelfAttention): q through a
// low-rank pair h -> q_lora_rank -> heads x (nope + rope) with a norm between (or one h -> heads x (nope + rope)
// projection when q_lora_rank is 0), keys and values from one latent of kv_lora_rank beside a rotary key of
// qk_rope_head_dim shared by every head (h -> kv_lora_rank + rope, normed, then kv_lora_rank -> heads x (nope + v)),
// and the output projection from heads x v_head_dim. Attention runs over heads of nope + rope for q and k and
// v_head_dim for v (FORMULAS.md §1, §3.2).
struct MlaConfig {
    int64_t qLoraRank = 0;      // 0: q projected straight from the hidden state
    int64_t kvLoraRank = 0;
    int64_t qkNopeHeadDim = 0;  // the part of a q/k head without position
    int64_t qkRopeHeadDim = 0;  // the rotary part (one key of this width shared by the heads)
    int64_t vHeadDim = 0;
    int64_t qkHeadDim() const { return qkNopeHeadDim + qkRopeHeadDim; }
};

// The largest shape tessel reads, from any source (model JSON, HuggingFace config.json, a validation record): past
// these a count no longer fits the int it is kept in, or the arithmetic on it overflows.
struct ModelLimits {
    static constexpr int64_t layers = 100000;
    static constexpr int64_t hidden = int64_t{1} << 24;
    static constexpr int64_t heads = int64_t{1} << 16;   // also kv_heads, head_dim, experts and top_k
    static constexpr int64_t ffnHidden = int64_t{1} << 26; // also an expert's MLP width
    static constexpr int64_t vocab = int64_t{1} << 26;
    static constexpr int64_t seqLen = int64_t{1} << 40;
};

struct ModelConfig {
    std::string name;
    int layers = 0;
    int64_t hidden = 0;
    int heads = 0;
    int kvHeads = 0;               // == heads for MHA, < heads for GQA, 1 for MQA
    int64_t headDim = 0;           // defaults to hidden / heads
    int64_t ffnHidden = 0;         // dense MLP width (SwiGLU: width of each of gate and up)
    int64_t vocab = 0;
    int64_t seqLen = 0;            // training sequence length
    Activation activation = Activation::Gelu;
    NormKind norm = NormKind::LayerNorm;
    PositionEmbedding position = PositionEmbedding::Learned;
    bool tiedEmbeddings = false;
    bool linearBias = false;       // biases on QKV/proj/MLP linears (GPT-2/3: yes, Llama: no)
    bool qkvBias = false;          // bias on QKV only (Qwen2); implied by linearBias
    bool qkNorm = false;           // the model's norm over each head of q and k before attention (Qwen3)
    // Norms after attention and after the MLP, on each block's output before its residual add, beside the two
    // before them (Gemma 2 and 3's post_attention_layernorm and post_feedforward_layernorm): four a layer.
    bool postNorms = false;
    // A norm over the embedding's output on the first stage, outside the transformer layers (BLOOM's
    // word_embeddings_layernorm; BigScience's Megatron-DeepSpeed --embed-layernorm): its weights, one norm op, and its
    // saved input and statistics per micro-batch in flight, since no layer checkpoint covers it.
    bool embeddingNorm = false;
    // The embedding's output multiplied by sqrt(hidden) before the first layer (Gemma 1-3: Gemma*Model.forward's
    // normalizer, in the embedding's dtype): one elementwise pass over it forward and backward, nothing kept.
    bool embeddingScale = false;
    // A learned logit for every head in each attention softmax, a "sink" the scores may spill into (gpt-oss's
    // self_attn.sinks; Megatron-core's --softmax-type learnable): heads parameters a layer, sharded with the heads
    // over TP. One more column in each softmax row: no cost tessel counts.
    bool attentionSinks = false;
    // Attention and the MLP side by side, each reading the layer's input, their outputs added to it together: x +
    // attn(ln1(x)) + mlp(ln2(x)) (GPT-J; GPT-NeoX's gpt_j_residual and Hugging Face's use_parallel_residual, Pythia
    // and GPT-NeoX-20B; Falcon's parallel_attn; PaLM, Chowdhery et al. 2022 §2). The same GEMMs and kernels; the
    // MLP's norm reads the tensor the attention's norm already keeps, and a framework that sums the two row-parallel
    // outputs before reducing them runs one tensor-parallel reduction a layer forward, not two (FORMULAS.md §2, §5).
    bool parallelResidual = false;
    // Gemma 2's tanh soft-capping, cap x tanh(x / cap) (Gemma Team 2024, arXiv:2408.00118 §2; Gemma2Config's
    // attn_logit_softcapping 50 and final_logit_softcapping 30): of each attention score before the softmax, and of
    // the logits before the loss. 0: none. Three elementwise ops over the scores or logits each way, and the tanh
    // output kept for the backward (FORMULAS.md §2-3).
    double attentionSoftcap = 0.0;
    double logitSoftcap = 0.0;
    double dropout = 0.0;          // dropout probability; > 0 means dropout masks are kept for backward
    // Partial rotary embedding: the fraction of each q and k head RoPE rotates, the rest passed through
    // (Megatron-LM --rotary-percent, HuggingFace GPT-NeoX rotary_pct, Phi-3 / Nemotron partial_rotary_factor).
    double rotaryPercent = 1.0;
    // Sliding-window attention in every layer (Mistral-7B v0.1, Phi-3-mini, StarCoder2; HuggingFace sliding_window,
    // Megatron-LM --window-size W-1,0): each query sees itself and the sliding_window - 1 keys before it. 0: the whole
    // causal prefix.
    int64_t slidingWindow = 0;
    // Layers (0-based, ascending) that attend over the whole causal prefix although the model has a sliding window:
    // Megatron-LM --window-attn-skip-freq, HuggingFace layer_types' "full_attention" (Gemma 2/3, gpt-oss), Qwen2's
    // layers below max_window_layers. Empty: every layer windowed. Only with slidingWindow > 0.
    std::vector<int> fullAttentionLayers;
    std::optional<MoeConfig> moe;  // every layer's MLP is an MoE block when set
    std::optional<MlaConfig> mla;  // latent attention instead of the QKV projection when set (kv_heads == heads)
    // Multi-token prediction (DeepSeek-V3 report §2.2; Megatron-core --mtp-num-layers; HuggingFace
    // num_nextn_predict_layers): modules after the last layer, each an embedding of the next token (the shared
    // embedding), two norms and a projection 2h -> h, a transformer layer of the last layer's kind, a final norm and the
    // shared output head with its own loss. Trained with the model, not counted in its parameters.
    int mtpLayers = 0;
    // A gated MLP (SwiGLU, GeGLU): gate and up of ffn_hidden each, and the gated elementwise op between.
    bool gatedMlp() const { return activation == Activation::Swiglu || activation == Activation::Geglu; }
    // Head widths attention runs at: q and k, and v (and the output). head_dim for both without MLA.
    int64_t qkHeadDim() const { return mla ? mla->qkHeadDim() : headDim; }
    // Width of each q and k head RoPE rotates: int(head_dim x rotary_percent), as Megatron-core's RotaryEmbedding
    // and transformers' rope init round it (MLA: its own rotary part, qk_rope_head_dim).
    int64_t rotaryDim() const;
    // Layers whose MLP is dense (all of them without MoE; those listed in moe.dense_layers with it).
    int denseLayerCount() const { return moe ? static_cast<int>(moe->denseLayers.size()) : layers; }
    // Dense layers among the first `count` layers from `first` (a chunk of a pipeline stage).
    int denseLayersIn(int first, int count) const;
    // The model a dense layer of an MoE model is: the same attention, the dense MLP.
    ModelConfig denseLayerModel() const;
    int64_t vHeadDim() const { return mla ? mla->vHeadDim : headDim; }
    // Layers among the first `count` from `first` whose attention is windowed (0 without a sliding window).
    int windowedLayersIn(int first, int count) const;
    // Whether layer `index` (0-based) has a dense MLP (an MoE model's moe.dense_layers; every layer without MoE) and
    // whether it attends through the sliding window.
    bool isDenseLayer(int index) const { return denseLayersIn(index, 1) == 1; }
    bool isWindowedLayer(int index) const { return windowedLayersIn(index, 1) == 1; }
    // The model a full-attention layer of a windowed model is: the same layer without the window.
    ModelConfig fullAttentionLayerModel() const;
    // The model layer `index` is: its own MLP kind and attention kind (denseLayerModel, fullAttentionLayerModel).
    ModelConfig layerModel(int index) const;
    std::vector<std::string> sources;
};

// Parameter counts of the full (unsharded) model, in elements. Formulas in cost_models/FORMULAS.md §1.
struct ParameterCounts {
    int64_t embedding = 0;         // word embedding V*h (+ learned positions s*h)
    int64_t positionEmbedding = 0; // learned positions only (part of `embedding`)
    int64_t perLayerAttention = 0; // QKV + output projection (+ biases)
    int64_t perLayerMlp = 0;       // dense MLP, or all experts + router for MoE
    int64_t perLayerNorms = 0;     // the two pre-norms (and the q and k norms, one head wide each)
    int64_t finalNorm = 0;
    int64_t lmHead = 0;            // 0 when tied
    int denseLayers = 0;           // MoE models: layers whose MLP is dense (moe.dense_layers), each of perDenseLayerMlp
    int64_t perDenseLayerMlp = 0;
    // Multi-token prediction: each module's own parameters (its layer, enorm, hnorm, the 2h x h projection and its
    // final norm; the embedding and output head are the model's), outside total().
    int mtpModules = 0;
    int64_t perMtpModule = 0;
    int64_t perLayer() const { return perLayerAttention + perLayerMlp + perLayerNorms; }
    // The whole model of `layers` layers (the model's own count: its dense layers are among them).
    int64_t total(int layers) const {
        return embedding + layers * perLayer() + denseLayers * (perDenseLayerMlp - perLayerMlp) + finalNorm + lmHead;
    }
};

ParameterCounts countParameters(const ModelConfig& m);
// Parameters a token actually uses (MoE: top_k of the experts), for MFU and 6*N*T estimates.
int64_t activeParameters(const ModelConfig& m);

// Loads a tessel model document (schema_version, snake_case keys; see scenarios/schema/model.schema.json)
// or a HuggingFace config.json (detected by "model_type"). `pointer` locates `doc` inside a larger file.
ModelConfig parseModel(const nlohmann::json& doc, const std::string& pointer = "");
// The shape rules every model must meet however it was read (kv_heads divides heads, heads divide hidden unless
// head_dim is given, top_k <= experts), each added to `problems` under pointer + its field's key.
void checkModelShape(const ModelConfig& m, const std::string& pointer, ProblemList& problems);
// Same, collecting problems instead of throwing.
ModelConfig parseModel(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems);
// Writes the tessel form of a model (round-trips through parseModel).
nlohmann::json modelToJson(const ModelConfig& m);

std::string toString(Activation a);
std::string toString(NormKind n);
std::string toString(PositionEmbedding p);

} // namespace tessel
