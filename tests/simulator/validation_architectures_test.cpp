// Model architectures read from published records in their configs' words: the shape under config names, families by
// name (their norms, embeddings, parallel blocks), ALiBi, mixture-of-experts (expert counts, expert tensor parallelism,
// dispatchers and their overlap), latent attention, QK norms, and what tessel leaves unmodelled.
#include "validation_support.hpp"

#include "../../simulator/src/search_space.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/simulate.hpp"

#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {
namespace {
using test::load;
using test::mentions;
using test::onNodes;
using test::record;
using test::refusalOf;

// Mixtral 8x7B under its HuggingFace config names on `nodes` nodes of 8 H100 at tp x pp, ep 8, batch 256.
nlohmann::json mixtralRecord(int nodes, int tp, int pp) {
    nlohmann::json r = onNodes(record(), nodes, tp, pp);
    r["model"] = {{"name", "Mixtral 8x7B"}, {"layers", 32}, {"hidden", 4096}, {"heads", 32}, {"kv_heads", 8},
                  {"ffn_hidden", 14336}, {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"vocab", 32000}, {"seq", 4096}};
    r["system"]["gpu"] = "H100 SXM";
    r["plan"]["ep"] = 8;
    r["plan"]["global_batch"] = 256;
    return r;
}

// A model block nested as configs nest it (DBRX's ffn_config and attn_config, a record's "moe" object) is read as the
// model's own keys, said; a refusal inside it names it where it is. An ep over a model with no experts is 1, said:
// before, a nested expert count was dropped in silence and the model predicted dense.
TEST(ValidationRecord, NestedExpertBlocksAreReadAndEpOverADenseModelIsSaid) {
    nlohmann::json r = mixtralRecord(2, 1, 1);
    r["model"].erase("num_local_experts");
    r["model"].erase("num_experts_per_tok");
    r["model"].erase("kv_heads");
    r["model"]["ffn_config"] = {{"moe_num_experts", 16}, {"moe_top_k", 4}, {"ffn_hidden_size", 10752}};
    r["model"]["attn_config"] = {{"kv_n_heads", 8}};
    const ValidationCase dbrx = load(r);
    ASSERT_TRUE(dbrx.scenario.model.moe.has_value());
    EXPECT_EQ(dbrx.scenario.model.moe->experts, 16);
    EXPECT_EQ(dbrx.scenario.model.moe->topK, 4);
    EXPECT_EQ(dbrx.scenario.model.ffnHidden, 14336);              // the model's own key wins over the block's
    EXPECT_EQ(dbrx.scenario.model.moe->expertFfnHidden, 14336);
    EXPECT_EQ(dbrx.scenario.model.kvHeads, 8);
    EXPECT_EQ(dbrx.scenario.plan.ep, 8);
    EXPECT_TRUE(mentions(dbrx.assumptions, "model/ffn_config's keys read as the model's own: ffn_hidden_size, moe_num_experts, moe_top_k"));
    EXPECT_TRUE(mentions(dbrx.assumptions, "model/attn_config's keys read as the model's own: kv_n_heads"));
    // A bad value inside the block is refused at its own pointer.
    r["model"].erase("ffn_config");
    r["model"]["moe"] = {{"experts", 8}, {"top_k", 9}};
    EXPECT_NE(refusalOf(r).find("/model/moe/top_k: got 9"), std::string::npos) << refusalOf(r);
    // No experts anywhere: the model is dense and ep 8 is 1, said.
    r["model"].erase("moe");
    const ValidationCase dense = load(r);
    EXPECT_FALSE(dense.scenario.model.moe.has_value());
    EXPECT_EQ(dense.scenario.plan.ep, 1);
    EXPECT_TRUE(mentions(dense.assumptions, "ep 8 read as 1: the model states no routed experts"));
}

// BLOOM biases its attention scores with ALiBi; a record naming ALiBi gets it, not a rotary embedding. BLOOM trained
// with Megatron's default dropout (0.1), which a record that states none is read with; a stated value wins.
TEST(ValidationRecord, BloomAndAlibiRecordsAreReadWithAlibi) {
    nlohmann::json r = record();
    r["model"]["name"] = "BLOOM 176B";
    EXPECT_EQ(load(r).scenario.model.position, PositionEmbedding::Alibi);
    EXPECT_DOUBLE_EQ(load(r).scenario.model.dropout, 0.1);
    r["model"]["dropout"] = 0.0;
    EXPECT_DOUBLE_EQ(load(r).scenario.model.dropout, 0.0);
    r["model"].erase("dropout");
    r["model"]["name"] = "GPT 7B";
    r["model"]["position_embedding"] = "ALiBi";
    EXPECT_EQ(load(r).scenario.model.position, PositionEmbedding::Alibi);
    r["model"]["position_embedding"] = "rotary";
    EXPECT_EQ(load(r).scenario.model.position, PositionEmbedding::Rope);
}

// GPT-NeoX and Pythia rotate a quarter of each head (rotary_pct 0.25), Nemotron half; a stated fraction wins, under
// Megatron-LM's, NeMo's or HuggingFace's name, and one that is not a fraction of the heads is refused at its key.
TEST(ValidationRecord, GptNeoxAndNemotronRotatePartOfEachHead) {
    nlohmann::json r = record(); // 32 heads of 128
    r["model"]["name"] = "Pythia 6.9B";
    const ValidationCase pythia = load(r);
    EXPECT_EQ(pythia.scenario.model.position, PositionEmbedding::Rope);
    EXPECT_EQ(pythia.scenario.model.rotaryDim(), 32);
    EXPECT_TRUE(mentions(pythia.assumptions, "rotary embedding on 32 of each head's 128 columns"));
    r["model"]["name"] = "Nemotron-4 15B";
    EXPECT_EQ(load(r).scenario.model.rotaryDim(), 64);
    r["model"]["rotary_percentage"] = 1.0;
    EXPECT_EQ(load(r).scenario.model.rotaryDim(), 128);
    r["model"].erase("rotary_percentage");
    r["model"]["rotary_pct"] = 0.01; // int(128 x 0.01) = 1 column
    EXPECT_NE(refusalOf(r).find("/model/rotary_pct: got 0.01"), std::string::npos) << refusalOf(r);
    r["model"]["rotary_pct"] = "a quarter";
    EXPECT_NE(refusalOf(r).find("/model/rotary_pct: got"), std::string::npos) << refusalOf(r);
    r["model"].erase("rotary_pct");
    r["model"]["name"] = "GPT 7B";
    r["model"]["position_embedding"] = "rotary";
    EXPECT_EQ(load(r).scenario.model.rotaryDim(), 128);
}

// A record's sliding_window (HuggingFace's name: the keys each query sees) is the model's; null is none, and the
// ring exchange the record's cp would otherwise use cannot run it.
TEST(ValidationRecord, SlidingWindowIsReadAsStated) {
    nlohmann::json r = record();
    r["model"]["name"] = "Mistral 7B";
    r["model"]["sliding_window"] = 1024;
    EXPECT_EQ(load(r).scenario.model.slidingWindow, 1024);
    r["model"]["sliding_window"] = nullptr;
    EXPECT_EQ(load(r).scenario.model.slidingWindow, 0);
    r["model"]["sliding_window"] = "4k";
    EXPECT_NE(refusalOf(r).find("/model/sliding_window"), std::string::npos) << refusalOf(r);
}

// A record's published parameter count checks the shape read. Yi-34B's shape (60 layers, hidden 7168, 56 heads over
// 8 kv heads, ffn 20480, vocabulary 64000) under a name tessel does not know: GPT-2's conventions give two MLP
// matrices and tied embeddings, 25 B; LLaMA's give 60 x (7168 x 16384 + 3 x 7168 x 20480 + 2 x 7168) + 2 x 64000 x
// 7168 + 7168 = 34,388,917,248, the published 34.39 B: read so, and said.
TEST(ValidationRecord, PublishedParametersChooseTheUnstatedConventions) {
    nlohmann::json r = record();
    r["model"] = {{"name", "Foo 34B"}, {"layers", 60}, {"hidden", 7168}, {"heads", 56}, {"kv_heads", 8},
                  {"ffn_hidden", 20480}, {"vocab", 64000}, {"seq", 4096}, {"params", 34.39e9}};
    const ValidationCase c = load(r);
    const ModelConfig& m = c.scenario.model;
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_EQ(m.norm, NormKind::RmsNorm);
    EXPECT_FALSE(m.tiedEmbeddings);
    EXPECT_FALSE(m.linearBias);
    EXPECT_EQ(countParameters(m).total(m.layers), 34388917248);
    EXPECT_TRUE(mentions(c.assumptions, "model/params 34.39 B against tessel's"));
    EXPECT_TRUE(mentions(c.assumptions, "read with LLaMA's conventions instead"));
    EXPECT_FALSE(mentions(c.assumptions, "architecture: GPT (default) conventions")); // replaced, not contradicted
    // The same shape with its conventions stated agrees with the count: nothing to say.
    r["model"]["activation"] = "swiglu";
    r["model"]["norm"] = "rmsnorm";
    r["model"]["position_embedding"] = "rope";
    r["model"]["tied_embeddings"] = false;
    r["model"]["bias"] = false;
    EXPECT_FALSE(mentions(load(r).assumptions, "model/params"));
    // Stated GPT-2 conventions are kept however far the count is: the gap is said, the stated shape predicted.
    r["model"]["activation"] = "gelu";
    r["model"]["norm"] = "layernorm";
    const ValidationCase stated = load(r);
    EXPECT_EQ(stated.scenario.model.activation, Activation::Gelu);
    EXPECT_EQ(stated.scenario.model.ffnHidden, 20480);
    EXPECT_TRUE(mentions(stated.assumptions, "the prediction follows the stated shape"));
}

// An MLP width the record leaves out is solved from its published count where the conventions alone do not reach it:
// a GPT of 32 layers at hidden 4096 (biases, tied embeddings, learned positions) counts 6.7 B at 4 x hidden; 8.0 B
// published is 32 x (2 x 4096 + 1) x ffn more, ffn about 21500, rounded to 128.
TEST(ValidationRecord, PublishedParametersSolveAnUnstatedMlpWidth) {
    nlohmann::json r = record();
    r["model"]["params"] = 8.0e9;
    const ValidationCase c = load(r);
    const ModelConfig& m = c.scenario.model;
    EXPECT_EQ(m.activation, Activation::Gelu); // "GPT 7B": GPT's conventions, a family tessel knows
    EXPECT_EQ(m.ffnHidden % 128, 0);
    EXPECT_GT(m.ffnHidden, 21000);
    EXPECT_LT(m.ffnHidden, 22000);
    EXPECT_NEAR(static_cast<double>(countParameters(m).total(m.layers)) / 8.0e9, 1.0, 0.01);
    EXPECT_TRUE(mentions(c.assumptions, "ffn_hidden solved from it"));
    // A width the record states is never moved: the gap is said.
    r["model"]["ffn_hidden"] = 16384;
    const ValidationCase stated = load(r);
    EXPECT_EQ(stated.scenario.model.ffnHidden, 16384);
    EXPECT_TRUE(mentions(stated.assumptions, "the prediction follows the stated shape"));
    // A width that would have to leave 0.5-8 x hidden is not taken: 30 B from this shape is not an MLP's doing.
    r["model"].erase("ffn_hidden");
    r["model"]["params"] = 30e9;
    const ValidationCase far = load(r);
    EXPECT_EQ(far.scenario.model.ffnHidden, 4 * 4096);
    EXPECT_TRUE(mentions(far.assumptions, "the prediction follows the stated shape"));
    // A count that is not one is said, not compared.
    r["model"]["params"] = "unknown";
    EXPECT_TRUE(mentions(load(r).assumptions, "model/params \"unknown\" is not a parameter count: not compared"));
}

// StarCoder's multi-query attention (one key/value head) at tp 4: no framework that splits the heads runs it, so the
// run replicated K and V over the ranks, read so and said; a record that states kv_replication false is refused at
// its tp, where the plan cannot run.
TEST(ValidationRecord, FewerKvHeadsThanTpRanksAreReadAsReplicated) {
    nlohmann::json r = record(); // tp 4
    r["model"]["kv_heads"] = 1;
    const ValidationCase c = load(r);
    EXPECT_TRUE(kvReplicationOf(c.scenario.plan.framework));
    EXPECT_TRUE(mentions(c.assumptions, "kv_heads 1 < tp 4: each K/V head replicated on tp / kv_heads = 4 ranks"));
    r["model"]["kv_heads"] = 4;
    EXPECT_FALSE(kvReplicationOf(load(r).scenario.plan.framework));
    r["model"]["kv_heads"] = 1;
    r["plan"]["kv_replication"] = false;
    EXPECT_NE(test::refusalOf(r).find("/plan/tp"), std::string::npos);
}

// Whether the model code repeats K and V before its kernel: a record's repeat_kv is read, and a value neither true
// nor false keeps the framework's default and says so.
TEST(ValidationRecord, RepeatKvIsReadOrItsOddValueSaid) {
    nlohmann::json r = record();
    r["plan"]["repeat_kv"] = true;
    EXPECT_TRUE(repeatKvOf(load(r).scenario.plan.framework));
    r["plan"]["repeat_kv"] = false;
    EXPECT_FALSE(repeatKvOf(load(r).scenario.plan.framework));
    r["plan"]["repeat_kv"] = "sometimes";
    const ValidationCase c = load(r);
    EXPECT_FALSE(c.scenario.plan.framework.repeatKv.has_value());
    EXPECT_TRUE(mentions(c.assumptions, "repeat_kv \"sometimes\" is neither true nor false"));
}

// Shared experts without routed ones have no term yet: a record that states them is predicted without them and says
// so, never silently. Dense layers among the expert layers and latent attention are read (this test and the next).
TEST(ValidationRecord, UnmodelledMoeAndAttentionAreSaid) {
    nlohmann::json r = record();
    r["model"]["name"] = "DeepSeek-V3";
    r["model"]["n_routed_experts"] = 256;
    r["model"]["num_experts_per_tok"] = 8;
    r["model"]["moe_intermediate_size"] = 2048;
    EXPECT_FALSE(mentions(load(r).assumptions, "not modelled"));
    r["model"]["n_shared_experts"] = 1;   // modelled: one shared expert of the routed experts' width
    r["model"]["first_k_dense_replace"] = 3;
    r["model"]["kv_lora_rank"] = 512;
    r["model"]["mlp_only_layers"] = nlohmann::json::array();    // empty: every layer sparse, nothing to say
    r["model"]["moe_layer_freq"] = 1;                           // every layer: nothing to say
    const ValidationCase c = load(r);
    ASSERT_TRUE(c.scenario.model.moe.has_value());
    EXPECT_EQ(c.scenario.model.moe->sharedFfnHidden, 2048);
    EXPECT_FALSE(mentions(c.assumptions, "n_shared_experts"));
    EXPECT_FALSE(mentions(c.assumptions, "not modelled"));
    EXPECT_EQ(c.scenario.model.moe->denseLayers, (std::vector<int>{0, 1, 2}));
    EXPECT_TRUE(mentions(c.assumptions, "3 of 32 layers dense"));
    EXPECT_FALSE(mentions(c.assumptions, "kv_lora_rank"));
    ASSERT_TRUE(c.scenario.model.mla.has_value());
    EXPECT_EQ(c.scenario.model.mtpLayers, 0);
    EXPECT_FALSE(mentions(c.assumptions, "mlp_only_layers"));
    // Multi-token prediction under HuggingFace's or Megatron-LM's name.
    for (const char* key : {"num_nextn_predict_layers", "mtp_num_layers"}) {
        nlohmann::json withMtp = r;
        withMtp["model"][key] = 1;
        EXPECT_EQ(load(withMtp).scenario.model.mtpLayers, 1) << key;
    }
    EXPECT_FALSE(mentions(c.assumptions, "moe_layer_freq"));
    // Every other layer an expert layer (Megatron-LM's --moe-layer-freq 2, DeepSeek's rule: i % 2 == 0), Qwen's
    // step (an expert layer where (i + 1) % step == 0) and its listed dense layers, each under its own name.
    nlohmann::json alt = r;
    alt["model"].erase("first_k_dense_replace");
    alt["model"]["moe_layer_freq"] = 2;
    EXPECT_EQ(load(alt).scenario.model.moe->denseLayers.size(), 16u);
    EXPECT_EQ(load(alt).scenario.model.moe->denseLayers.front(), 1);
    alt["model"].erase("moe_layer_freq");
    alt["model"]["decoder_sparse_step"] = 4;
    alt["model"]["mlp_only_layers"] = {3};
    EXPECT_EQ(load(alt).scenario.model.moe->denseLayers.size(), 25u); // 24 by the step, layer 3 listed
    alt["model"]["mlp_only_layers"] = {32};
    EXPECT_NE(refusalOf(alt).find("mlp_only_layers/0"), std::string::npos);
    // Megatron-LM's list expression: its 0s are the dense layers; one that does not cover the layers is refused.
    alt["model"].erase("mlp_only_layers");
    alt["model"].erase("decoder_sparse_step");
    alt["model"]["moe_layer_freq"] = "([0]*3+[1]*29)";
    EXPECT_EQ(load(alt).scenario.model.moe->denseLayers, (std::vector<int>{0, 1, 2}));
    alt["model"]["moe_layer_freq"] = "[1,0]*16";
    EXPECT_EQ(load(alt).scenario.model.moe->denseLayers.size(), 16u);
    alt["model"]["moe_layer_freq"] = "([0]*3+[1]*28)";
    EXPECT_NE(refusalOf(alt).find("moe_layer_freq"), std::string::npos);
    // DeepSeek's group-limited routing under its config's names (or Megatron-LM's); a group count alone is said.
    r["model"]["n_group"] = 8;
    r["model"]["topk_group"] = 4;
    EXPECT_EQ(load(r).scenario.model.moe->routingGroups, 8);
    EXPECT_EQ(load(r).scenario.model.moe->groupsPerToken, 4);
    r["model"].erase("topk_group");
    EXPECT_EQ(load(r).scenario.model.moe->routingGroups, 0);
    EXPECT_TRUE(mentions(load(r).assumptions, "routing read as unlimited"));
    r["model"].erase("n_group");
    // A width wins over a count (Qwen's shared_expert_intermediate_size); shared experts with no routed ones are said.
    r["model"]["shared_expert_intermediate_size"] = 5632;
    EXPECT_EQ(load(r).scenario.model.moe->sharedFfnHidden, 5632);
    // None is a count too: 0 shared experts read as none, not a refused record; a negative count is refused by name.
    r["model"].erase("shared_expert_intermediate_size");
    r["model"]["n_shared_experts"] = 0;
    EXPECT_EQ(load(r).scenario.model.moe->sharedFfnHidden, 0);
    r["model"]["n_shared_experts"] = -1;
    const auto refused = loadValidationRecords(nlohmann::json::array({r}), "t.json");
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_NE(refused[0].refusal.find("n_shared_experts"), std::string::npos) << refused[0].refusal;
    nlohmann::json dense = record();
    dense["model"]["n_shared_experts"] = 2;
    EXPECT_TRUE(mentions(load(dense).assumptions, "not modelled: n_shared_experts (shared experts without routed"));
}

// DeepSeek's multi-head latent attention under its config's names (and Megatron-LM's), its unstated widths said.
TEST(ValidationRecord, LatentAttentionIsReadUnderDeepSeeksAndMegatronsNames) {
    nlohmann::json r = record();
    r["model"]["name"] = "DeepSeek-V3";
    r["model"]["hidden"] = 7168;
    r["model"]["heads"] = 128;
    r["model"]["kv_heads"] = 128;
    r["model"]["head_dim"] = 64; // transformers' DeepseekV3Config sets head_dim = qk_rope_head_dim
    r["model"]["q_lora_rank"] = 1536;
    r["model"]["kv_lora_rank"] = 512;
    r["model"]["qk_nope_head_dim"] = 128;
    r["model"]["qk_rope_head_dim"] = 64;
    r["model"]["v_head_dim"] = 128;
    ValidationCase c = load(r);
    ASSERT_TRUE(c.scenario.model.mla.has_value());
    const MlaConfig& mla = *c.scenario.model.mla;
    EXPECT_EQ(mla.qLoraRank, 1536);
    EXPECT_EQ(mla.kvLoraRank, 512);
    EXPECT_EQ(mla.qkHeadDim(), 192);
    EXPECT_EQ(mla.vHeadDim, 128);
    EXPECT_EQ(c.scenario.model.headDim, 192);
    EXPECT_EQ(c.scenario.model.position, PositionEmbedding::Rope);
    EXPECT_TRUE(mentions(c.assumptions, "head_dim 64 read as MLA's q and k heads"));
    // 128 x 128 x 7168 output + 7168 x 1536 + 1536 x 128 x 192 (q) + 7168 x 576 + 512 x 128 x 256 (kv):
    // DeepSeek-V3's 187,105,280 attention parameters a layer.
    EXPECT_EQ(countParameters(c.scenario.model).perLayerAttention, 187105280);
    // Megatron-LM's names, q without a latent (DeepSeek-V2-Lite), the rotary width unstated.
    r["model"].erase("q_lora_rank");
    r["model"].erase("qk_nope_head_dim");
    r["model"].erase("qk_rope_head_dim");
    r["model"].erase("head_dim");
    r["model"]["qk_head_dim"] = 128;
    c = load(r);
    EXPECT_EQ(c.scenario.model.mla->qLoraRank, 0);
    EXPECT_EQ(c.scenario.model.mla->qkNopeHeadDim, 128);
    EXPECT_EQ(c.scenario.model.mla->qkRopeHeadDim, 64);
    EXPECT_TRUE(mentions(c.assumptions, "qk_rope_head_dim not stated, DeepSeek-V2/V3's 64"));
    // Grouped kv heads do not exist under MLA: refused at the field.
    r["model"]["kv_heads"] = 8;
    const auto refused = loadValidationRecords(nlohmann::json::array({r}), "t.json");
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_NE(refused[0].refusal.find("kv_heads"), std::string::npos) << refused[0].refusal;
}

// Qwen3 normalises each head of q and k; a record may say qk_norm for any model, or deny it.
TEST(ValidationRecord, Qwen3RecordsHaveQkNorms) {
    nlohmann::json r = record();
    r["model"]["name"] = "Qwen3-32B";
    EXPECT_TRUE(load(r).scenario.model.qkNorm);
    EXPECT_TRUE(mentions(load(r).assumptions, "with q and k norms"));
    r["model"]["qk_norm"] = false;
    EXPECT_FALSE(load(r).scenario.model.qkNorm);
    r["model"]["name"] = "Llama 3 8B";
    EXPECT_FALSE(load(r).scenario.model.qkNorm);
    r["model"]["qk_norm"] = true;
    EXPECT_TRUE(load(r).scenario.model.qkNorm);
}

TEST(ValidationRecord, MixtureOfExpertsUnderConfigNames) {
    nlohmann::json r = mixtralRecord(8, 1, 4);
    const ValidationCase c = load(r);
    ASSERT_TRUE(c.scenario.model.moe.has_value());
    EXPECT_EQ(c.scenario.model.moe->experts, 8);
    EXPECT_EQ(c.scenario.model.moe->topK, 2);
    EXPECT_EQ(c.scenario.model.moe->expertFfnHidden, 14336);
    EXPECT_EQ(c.scenario.plan.ep, 8);
    EXPECT_FALSE(mentions(c.assumptions, "experts per token"));
}

// A record's expert_tensor_parallel_size (or etp): the plan's etp where it differs from tp, so EP may take TP ranks.
TEST(ValidationRecord, ExpertTensorParallelSizeFoldsTheExperts) {
    for (const char* key : {"etp", "expert_tensor_parallel_size"}) {
        nlohmann::json r = mixtralRecord(8, 2, 8);
        r["plan"]["sequence_parallel"] = true;
        r["plan"][key] = 1;
        const ValidationCase c = load(r);
        EXPECT_EQ(c.scenario.plan.etp, 1) << key;
        EXPECT_TRUE(c.scenario.plan.expertFolded()) << key;
        EXPECT_EQ(c.scenario.plan.dp, 4) << key;
        r["plan"][key] = 2; // tp's own: the default layout (ep 8 then exceeds dp 4 and the record is refused)
        const auto refused = loadValidationRecords(nlohmann::json::array({r}), "runs.json");
        ASSERT_EQ(refused.size(), 1u);
        EXPECT_FALSE(refused[0].validationCase.has_value()) << key;
        EXPECT_NE(refused[0].refusal.find("ep"), std::string::npos) << refused[0].refusal;
    }
}

// An expert capacity is said (tessel routes evenly: nothing dropped, nothing padded), where it had been passed over.
TEST(ValidationRecord, AnExpertCapacityIsSaid) {
    nlohmann::json r = mixtralRecord(2, 1, 1);
    const ValidationCase plain = load(r);
    r["plan"]["moe_expert_capacity_factor"] = 1.25;
    const ValidationCase c = load(r);
    EXPECT_TRUE(mentions(c.assumptions, "moe_expert_capacity_factor 1.25: routing read as even, so no token dropped and no expert padded"));
    r["plan"]["moe_pad_expert_input_to_capacity"] = true;
    EXPECT_TRUE(mentions(load(r).assumptions, "the padding to capacity (moe_pad_expert_input_to_capacity) not costed"));
    EXPECT_FALSE(mentions(plain.assumptions, "capacity"));
}

// A record's MoE dispatcher (moe_token_dispatcher_type, DeepEP / HybridEP as flex) is the plan's, and so is the
// batch-level EP overlap where the plan passes Megatron-core's checks for it; where it does not, it is said.
TEST(ValidationRecord, MoeDispatcherAndEpOverlapAreRead) {
    for (const auto& [stated, want] : std::vector<std::pair<std::string, std::string>>{
             {"flex", "flex"}, {"hybridep", "flex"}, {"alltoall", "alltoall"}, {"allgather", "alltoall"}}) {
        nlohmann::json r = mixtralRecord(2, 1, 1);
        r["plan"]["moe_token_dispatcher_type"] = stated;
        r["plan"]["overlap_moe_expert_parallel_comm"] = true;
        r["plan"]["recompute"] = "selective";
        const ValidationCase c = load(r);
        EXPECT_EQ(moeDispatcherOf(c.scenario.plan.framework), want) << stated;
        EXPECT_EQ(mentions(c.assumptions, "is not one tessel costs"), stated == "allgather") << stated;
        EXPECT_TRUE(moeA2aOverlapOf(c.scenario.plan.framework)) << stated;
        EXPECT_TRUE(mentions(c.assumptions, "overlap_moe_expert_parallel_comm: a backward and the next forward")) << stated;
    }
    nlohmann::json full = mixtralRecord(2, 1, 1);
    full["plan"]["moe_a2a_overlap"] = true;
    full["plan"]["recompute"] = "full";
    const ValidationCase c = load(full);
    EXPECT_FALSE(moeA2aOverlapOf(c.scenario.plan.framework));
    EXPECT_TRUE(mentions(c.assumptions, "moe_a2a_overlap stated, but Megatron-core does not run it with full recompute"));
}

// A DeepSeek-V3 record without its recompute (Megatron-Bridge's GB200 BF16 row of 25.11: tp 1, pp 4 x vp 4, ep 64):
// the attention core alone does not fit, so before full recompute the module sets Megatron-Bridge's MoE recipes use
// are tried and the fastest that fits is read, said.
TEST(ValidationRecord, UnstatedMoeRecomputeTakesTheFastestFittingModuleSet) {
    nlohmann::json r = nlohmann::json::parse(R"json({
      "id": "dsv3-gb200", "group": "g", "kind": "training_throughput", "source": "Megatron-Bridge performance summary, 25.11",
      "model": {"name": "DeepSeek-V3", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128, "ffn_hidden": 18432,
                "vocab": 129280, "seq": 4096, "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
                "n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
                "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128},
      "system": {"gpu": "GB200 (DGX GB200, NVL72)", "gpus_per_node": 4, "nodes": 64, "total_gpus": 256,
                 "intra_node_link": "NVLink 5 (NVL72)", "inter_node_link": "InfiniBand NDR 400 Gb/s", "precision": "bf16"},
      "plan": {"tp": 1, "pp": 4, "dp": 64, "cp": 1, "ep": 64, "etp": 1, "vpp": 4, "micro_batch": 1, "global_batch": 4096,
               "sequence_parallel": false, "zero": 1, "distributed_optimizer": true, "framework": "Megatron-Bridge",
               "framework_version": "25.11", "moe_token_dispatcher_type": "flex"},
      "measured": {"iteration_time_s": 20.88}})json");
    const ValidationCase c = load(r);
    const Plan& p = c.scenario.plan;
    ASSERT_EQ(p.recompute, Recompute::Selective);
    EXPECT_NE(p.recomputeModules, recompute_module::Default);
    EXPECT_TRUE(mentions(c.assumptions, "(the fastest of Megatron-Bridge's module sets that fits)"));
    EXPECT_TRUE(predictMemory(c.scenario.model, c.scenario.cluster, p).fits);
    Plan core = p;
    core.recomputeModules = recompute_module::Default;
    EXPECT_FALSE(predictMemory(c.scenario.model, c.scenario.cluster, core).fits);
    // No other set of the ladder that fits is faster.
    const double step = simulatePlan(c.scenario.model, c.scenario.cluster, p).metrics.stepSeconds;
    for (uint8_t set : detail::selectiveModuleLadder(c.scenario.model, p.framework)) {
        Plan q = p;
        q.recomputeModules = set;
        if (predictMemory(c.scenario.model, c.scenario.cluster, q).fits)
            EXPECT_GE(simulatePlan(c.scenario.model, c.scenario.cluster, q).metrics.stepSeconds, step) << recomputeModulesString(set);
    }
}

// A record's moe_shared_expert_overlap is the plan's where there are shared experts to overlap; otherwise it is said.
TEST(ValidationRecord, SharedExpertOverlapIsReadWhereItRuns) {
    nlohmann::json r = mixtralRecord(2, 1, 1);
    r["plan"]["moe_shared_expert_overlap"] = true;
    ValidationCase c = load(r);
    EXPECT_FALSE(moeSharedExpertOverlapOf(c.scenario.plan.framework));
    EXPECT_TRUE(mentions(c.assumptions, "moe_shared_expert_overlap stated, not read: moe_shared_expert_overlap runs the shared "
                                        "experts beside the dispatch; the model has none"));
    r["model"]["moe_shared_expert_intermediate_size"] = 4096;
    c = load(r);
    EXPECT_TRUE(moeSharedExpertOverlapOf(c.scenario.plan.framework));
    EXPECT_TRUE(mentions(c.assumptions, "moe_shared_expert_overlap: the shared experts on their own stream"));
}

// A record's recompute_modules (Megatron-core's --recompute-modules, a list or its command line's words) is the plan's
// under selective recompute; beside another recompute, or naming what the model lacks, it is said and not read; a
// name tessel does not cost is a refusal at the field.
TEST(ValidationRecord, RecomputeModulesAreReadUnderSelective) {
    nlohmann::json r = mixtralRecord(2, 1, 1);
    r["plan"]["recompute"] = "selective";
    r["plan"]["recompute_modules"] = {"moe_act", "layernorm", "mla_up_proj"};
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.recomputeModules, recompute_module::MoeAct | recompute_module::Layernorm);
    EXPECT_TRUE(mentions(c.assumptions, "selective recompute of moe_act,layernorm (Megatron-core's recompute_modules)"));
    EXPECT_TRUE(mentions(c.assumptions, "not read: mla_up_proj needs multi-latent attention"));
    r["plan"]["recompute_modules"] = "moe_act layernorm";
    EXPECT_EQ(load(r).scenario.plan.recomputeModules, recompute_module::MoeAct | recompute_module::Layernorm);
    r["plan"]["recompute"] = "full";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.recomputeModules, recompute_module::Default);
    EXPECT_TRUE(mentions(c.assumptions, "Megatron-core reads it under selective recompute only"));
    // Listed in the recompute's own words, without the key.
    r["plan"].erase("recompute_modules");
    r["plan"]["recompute"] = "selective (moe_act, layernorm)";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.recomputeModules, recompute_module::MoeAct | recompute_module::Layernorm);
    r["plan"]["recompute"] = "selective";
    EXPECT_EQ(load(r).scenario.plan.recomputeModules, recompute_module::Default);
    r["plan"]["recompute"] = "selective";
    r["plan"]["recompute_modules"] = {"moe_act", "attention"};
    EXPECT_NE(refusalOf(r).find("/plan/recompute_modules: \"attention\" is not a recompute module"), std::string::npos)
        << refusalOf(r);
}


// The model's shape under Megatron-LM's and Hugging Face's names reads as under the schema's; missing names the schema's.
TEST(ValidationRecord, ModelShapeUnderConfigNames) {
    nlohmann::json r = record();
    const ValidationCase schema = load(r);
    r["model"] = {{"name", "GPT 7B"}, {"num_hidden_layers", 32}, {"hidden_size", 4096}, {"num_attention_heads", 32},
                  {"num_key_value_heads", 8}, {"vocab_size", 51200}, {"seq_length", 2048}};
    const ValidationCase hf = load(r);
    EXPECT_EQ(hf.scenario.model.layers, schema.scenario.model.layers);
    EXPECT_EQ(hf.scenario.model.hidden, schema.scenario.model.hidden);
    EXPECT_EQ(hf.scenario.model.heads, schema.scenario.model.heads);
    EXPECT_EQ(hf.scenario.model.kvHeads, 8);
    EXPECT_EQ(hf.scenario.model.vocab, schema.scenario.model.vocab);
    EXPECT_EQ(hf.scenario.model.seqLen, schema.scenario.model.seqLen);
    r["model"].erase("num_hidden_layers");
    EXPECT_NE(refusalOf(r).find("/model/layers: missing"), std::string::npos);
}

// Model families by name: OLMo 2's q and k norms, Gemma's tied embeddings, Falcon's and GPT-NeoX's conventions, and a
// model of no known family whose record states a gated MLP read with LLaMA's conventions (no biases, no dropout), not
// GPT-2's.
TEST(ValidationRecord, ModelFamiliesByName) {
    struct Case {
        const char* name;
        Activation activation;
        NormKind norm;
        bool bias, tied, qkNorm;
        double dropout;
    };
    for (const Case& k : {Case{"OLMo 2 13B", Activation::Swiglu, NormKind::RmsNorm, false, false, true, 0.0},
                          Case{"OLMo 7B", Activation::Swiglu, NormKind::LayerNorm, false, false, false, 0.0},
                          Case{"Gemma 7B", Activation::Geglu, NormKind::RmsNorm, false, true, false, 0.0},
                          Case{"Falcon-40B", Activation::Gelu, NormKind::LayerNorm, false, true, false, 0.0},
                          Case{"Pythia 12B", Activation::Gelu, NormKind::LayerNorm, true, false, false, 0.0},
                          Case{"InternLM2 20B", Activation::Swiglu, NormKind::RmsNorm, false, false, false, 0.0},
                          Case{"an in-house 30B", Activation::Gelu, NormKind::LayerNorm, true, true, false, 0.1}}) {
        nlohmann::json r = record();
        r["model"]["name"] = k.name;
        const ModelConfig& m = load(r).scenario.model;
        EXPECT_EQ(m.activation, k.activation) << k.name;
        EXPECT_EQ(m.norm, k.norm) << k.name;
        EXPECT_EQ(m.linearBias, k.bias) << k.name;
        EXPECT_EQ(m.tiedEmbeddings, k.tied) << k.name;
        EXPECT_EQ(m.qkNorm, k.qkNorm) << k.name;
        EXPECT_DOUBLE_EQ(m.dropout, k.dropout) << k.name;
    }
    // The unknown model with a stated gated MLP or RMSNorm: LLaMA's generation.
    nlohmann::json r = record();
    r["model"]["name"] = "an in-house 30B";
    r["model"]["activation"] = "SwiGLU";
    const ValidationCase c = load(r);
    EXPECT_FALSE(c.scenario.model.linearBias);
    EXPECT_FALSE(c.scenario.model.tiedEmbeddings);
    EXPECT_DOUBLE_EQ(c.scenario.model.dropout, 0.0);
    EXPECT_EQ(c.scenario.model.position, PositionEmbedding::Rope);
    EXPECT_TRUE(mentions(c.assumptions, "Llama-style (from its stated gated MLP or RMSNorm)"));
    // What the record states still decides.
    r["model"]["dropout"] = 0.1;
    r["model"]["position_embedding"] = "learned";
    const ModelConfig& stated = load(r).scenario.model;
    EXPECT_DOUBLE_EQ(stated.dropout, 0.1);
    EXPECT_EQ(stated.position, PositionEmbedding::Learned);
    r["model"].erase("activation");
    r["model"].erase("dropout");
    r["model"]["norm"] = "RMSNorm";
    EXPECT_FALSE(load(r).scenario.model.linearBias);
    // A gated GELU, in the words records use (GLM-130B's GeGLU, T5 v1.1's "gated-gelu"), is the gated MLP geglu; a
    // plain GELU is not gated, but in a Gemma, whose configs name the gate's GELU alone.
    for (const char* act : {"GeGLU", "gated-gelu"}) {
        r["model"]["activation"] = act;
        const ValidationCase g = load(r);
        EXPECT_EQ(g.scenario.model.activation, Activation::Geglu) << act;
        EXPECT_TRUE(mentions(g.assumptions, "(geglu,")) << act;
    }
    r["model"]["activation"] = "gelu";
    EXPECT_EQ(load(r).scenario.model.activation, Activation::Gelu);
    r["model"]["name"] = "Gemma 7B";
    EXPECT_EQ(load(r).scenario.model.activation, Activation::Geglu);
    r["model"].erase("activation");
    EXPECT_TRUE(mentions(load(r).assumptions, "Gemma conventions (geglu,"));
    EXPECT_EQ(load(r).scenario.model.activation, Activation::Geglu);
    EXPECT_FALSE(load(r).scenario.model.postNorms);
    // Gemma 2 and 3 normalise each block's output too; Gemma 3 q and k as well, Gemma 2 soft-caps its scores and
    // logits (Gemma2Config's 50 and 30), said, unless the record states its own caps (null: none).
    r["model"]["name"] = "Gemma 2 9B";
    EXPECT_TRUE(load(r).scenario.model.postNorms);
    EXPECT_FALSE(load(r).scenario.model.qkNorm);
    EXPECT_TRUE(load(r).scenario.model.embeddingScale);
    EXPECT_DOUBLE_EQ(load(r).scenario.model.attentionSoftcap, 50.0);
    EXPECT_DOUBLE_EQ(load(r).scenario.model.logitSoftcap, 30.0);
    EXPECT_TRUE(mentions(load(r).assumptions, "tanh soft-capping"));
    r["model"]["attn_logit_softcapping"] = nullptr;
    r["model"]["logit_softcap"] = 20;
    EXPECT_DOUBLE_EQ(load(r).scenario.model.attentionSoftcap, 0.0);
    EXPECT_DOUBLE_EQ(load(r).scenario.model.logitSoftcap, 20.0);
    r["model"]["logit_softcap"] = "capped";
    EXPECT_NE(test::refusalOf(r).find("/model/logit_softcap: got \"capped\""), std::string::npos) << test::refusalOf(r);
    // The same cap under both names: one value is read, two that differ are refused at both pointers.
    r["model"]["logit_softcap"] = 20;
    r["model"]["final_logit_softcapping"] = 20.0;
    EXPECT_DOUBLE_EQ(load(r).scenario.model.logitSoftcap, 20.0);
    r["model"]["final_logit_softcapping"] = 30;
    EXPECT_NE(test::refusalOf(r).find("/0/model/logit_softcap and runs.json#/0/model/final_logit_softcapping: got 20 and 30"), std::string::npos)
        << test::refusalOf(r);
    r["model"]["attention_softcap"] = 0;
    EXPECT_NE(test::refusalOf(r).find("/model/logit_softcap and"), std::string::npos) << test::refusalOf(r);
    r["model"].erase("final_logit_softcapping");
    EXPECT_DOUBLE_EQ(load(r).scenario.model.attentionSoftcap, 0.0);
    r["model"]["attention_softcap"] = 50;
    EXPECT_NE(test::refusalOf(r).find("/0/model/attention_softcap and runs.json#/0/model/attn_logit_softcapping: got 50 and null"),
              std::string::npos)
        << test::refusalOf(r);
    r["model"].erase("attention_softcap");
    r["model"].erase("logit_softcap");
    r["model"].erase("attn_logit_softcapping");
    r["model"]["name"] = "gemma-3-27b";
    EXPECT_TRUE(load(r).scenario.model.postNorms);
    EXPECT_TRUE(load(r).scenario.model.qkNorm);
    EXPECT_DOUBLE_EQ(load(r).scenario.model.logitSoftcap, 0.0);
    EXPECT_TRUE(mentions(load(r).assumptions, "rmsnorm before and after each block with q and k norms"));
}

// GPT-NeoX, Pythia and Falcon run attention and the MLP side by side (gpt_j_residual, use_parallel_residual,
// parallel_attn), said in the record's assumptions; a record may state it under any of those names or tessel's, and
// names that disagree, or a value that is not true or false, are refused at their pointers.
TEST(ValidationForms, ParallelBlocksByFamilyAndByName) {
    nlohmann::json r = record();
    for (const char* name : {"GPT-NeoX-20B", "Pythia 12B", "Falcon-40B"}) {
        r["model"]["name"] = name;
        EXPECT_TRUE(load(r).scenario.model.parallelResidual) << name;
        EXPECT_TRUE(mentions(load(r).assumptions, "attention and MLP side by side")) << name;
    }
    r["model"]["name"] = "an in-house 30B";
    EXPECT_FALSE(load(r).scenario.model.parallelResidual);
    for (const char* key : {"parallel_residual", "use_parallel_residual", "parallel_attn", "gpt_j_residual"}) {
        nlohmann::json k = r;
        k["model"][key] = true;
        EXPECT_TRUE(load(k).scenario.model.parallelResidual) << key;
    }
    r["model"]["name"] = "Pythia 12B";
    r["model"]["use_parallel_residual"] = false;
    EXPECT_FALSE(load(r).scenario.model.parallelResidual);
    r["model"]["gpt_j_residual"] = false;
    EXPECT_FALSE(load(r).scenario.model.parallelResidual);
    r["model"]["gpt_j_residual"] = true;
    EXPECT_NE(test::refusalOf(r).find("/0/model/use_parallel_residual and runs.json#/0/model/gpt_j_residual: got false and true"),
              std::string::npos)
        << test::refusalOf(r);
    r["model"].erase("gpt_j_residual");
    r["model"]["use_parallel_residual"] = "yes";
    EXPECT_NE(test::refusalOf(r).find("/model/use_parallel_residual: got \"yes\", expected true or false"), std::string::npos)
        << test::refusalOf(r);
}

// BLOOM normalises its embedding (word_embeddings_layernorm, Megatron-DeepSpeed --embed-layernorm), as every BLOOM
// record's run did; a record may say otherwise under the model key or the flag's name. Other families have none.
TEST(ValidationForms, BloomRecordsNormaliseTheEmbeddingUnlessTheyStateOtherwise) {
    nlohmann::json r = record();
    r["model"]["name"] = "an in-house 30B";
    EXPECT_FALSE(load(r).scenario.model.embeddingNorm);
    r["model"]["name"] = "BLOOM-style";
    const ValidationCase c = load(r);
    EXPECT_TRUE(c.scenario.model.embeddingNorm);
    EXPECT_TRUE(mentions(c.assumptions, "layernorm, one over the embedding"));
    r["model"]["embed_layernorm"] = false;
    EXPECT_FALSE(load(r).scenario.model.embeddingNorm);
    r["model"].erase("embed_layernorm");
    r["model"]["name"] = "GPT 7B";
    r["model"]["embedding_norm"] = true;
    EXPECT_TRUE(load(r).scenario.model.embeddingNorm);
}
} // namespace
} // namespace tessel::sim
