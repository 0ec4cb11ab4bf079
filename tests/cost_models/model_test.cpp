// Tests of model loading and exact parameter counts on models small enough to count by hand.
#include "test_support.hpp"

#include "tessel/cost/model.hpp"

#include <gtest/gtest.h>

#include <set>

namespace tessel {
namespace {

ModelConfig handModel() {
    // h=4, 2 heads of 2, 1 kv head, ffn 8, vocab 10, seq 3, SwiGLU, RMSNorm, RoPE, untied, no bias.
    ModelConfig m;
    m.name = "hand";
    m.layers = 2;
    m.hidden = 4;
    m.heads = 2;
    m.kvHeads = 1;
    m.headDim = 2;
    m.ffnHidden = 8;
    m.vocab = 10;
    m.seqLen = 3;
    m.activation = Activation::Swiglu;
    m.norm = NormKind::RmsNorm;
    m.position = PositionEmbedding::Rope;
    return m;
}

TEST(ModelParameters, HandCountedSwigluGqa) {
    auto c = countParameters(handModel());
    EXPECT_EQ(c.embedding, 40);             // 10 x 4
    EXPECT_EQ(c.perLayerAttention, 48);     // QKV 4 x (4 + 2 + 2) = 32, projection 4 x 4 = 16
    EXPECT_EQ(c.perLayerMlp, 96);           // gate + up 4 x 16 = 64, down 8 x 4 = 32
    EXPECT_EQ(c.perLayerNorms, 8);          // two RMSNorm weights of 4
    EXPECT_EQ(c.finalNorm, 4);
    EXPECT_EQ(c.lmHead, 40);
    EXPECT_EQ(c.total(2), 40 + 2 * 152 + 4 + 40);
}

TEST(ModelParameters, HandCountedGeluWithBiasLearnedTied) {
    ModelConfig m = handModel();
    m.kvHeads = 2;
    m.activation = Activation::Gelu;
    m.norm = NormKind::LayerNorm;
    m.position = PositionEmbedding::Learned;
    m.tiedEmbeddings = true;
    m.linearBias = true;
    auto c = countParameters(m);
    EXPECT_EQ(c.embedding, 40 + 12);                  // + 3 positions x 4
    EXPECT_EQ(c.perLayerAttention, 4 * 12 + 16 + 12 + 4);
    EXPECT_EQ(c.perLayerMlp, 4 * 8 + 8 * 4 + 8 + 4);
    EXPECT_EQ(c.perLayerNorms, 16);                   // two LayerNorms with weight and bias
    EXPECT_EQ(c.lmHead, 0);
}

TEST(ModelParameters, MoeCountsAllExpertsButActivatesTopK) {
    ModelConfig m = handModel();
    m.moe = MoeConfig{4, 2, 8};
    auto c = countParameters(m);
    EXPECT_EQ(c.perLayerMlp, 4 * 96 + 4 * 4);        // four experts + router 4 x 4
    EXPECT_EQ(activeParameters(m), c.total(2) - 2 * (2 * 96));
}

TEST(ModelParameters, SharedExpertsAreADenseMlpEveryTokenUses) {
    // Four SwiGLU experts of 8 (96 each), top 2, and shared experts of summed width 16: one more MLP of 3 x 4 x 16.
    ModelConfig m = handModel();
    m.moe = MoeConfig{4, 2, 8};
    const auto routedOnly = countParameters(m);
    const int64_t activeRoutedOnly = activeParameters(m);
    m.moe->sharedFfnHidden = 16;
    EXPECT_EQ(countParameters(m).perLayerMlp, routedOnly.perLayerMlp + 192);
    EXPECT_EQ(activeParameters(m), activeRoutedOnly + 2 * 192); // two layers, every token through them
    const ModelConfig back = parseModel(modelToJson(m));
    ASSERT_TRUE(back.moe.has_value());
    EXPECT_EQ(back.moe->sharedFfnHidden, 16);
    EXPECT_FALSE(modelToJson(handModel()).contains("moe"));
    m.moe->sharedFfnHidden = 0;
    EXPECT_FALSE(modelToJson(m)["moe"].contains("shared_ffn_hidden")); // written only when there are some
}

TEST(ModelParameters, LatentAttentionCountsItsDownAndUpProjections) {
    // h 4, 2 heads; q latent 3, kv latent 2, q/k heads of 2 + 1 (rope), v heads of 2.
    ModelConfig m = handModel();
    m.kvHeads = 2;
    m.mla = MlaConfig{3, 2, 2, 1, 2};
    m.headDim = 3;
    auto c = countParameters(m);
    // q: 4 x 3 + 3 x 2 x 3 = 30; kv: 4 x (2 + 1) + 2 x 2 x (2 + 2) = 28; output 2 x 2 x 4 = 16.
    EXPECT_EQ(c.perLayerAttention, 30 + 28 + 16);
    EXPECT_EQ(c.perLayerNorms, 8 + 3 + 2); // the pre-norms and an RMSNorm over each latent
    m.mla->qLoraRank = 0;                  // q straight from the hidden state: 4 x 2 x 3
    EXPECT_EQ(countParameters(m).perLayerAttention, 24 + 28 + 16);
    EXPECT_EQ(countParameters(m).perLayerNorms, 8 + 2);
}

TEST(ModelJson, LatentAttentionRoundTripsAndItsRulesNameTheirFields) {
    nlohmann::json doc = modelToJson(handModel());
    doc["kv_heads"] = 2;
    doc["mla"] = {{"q_lora_rank", 3}, {"kv_lora_rank", 2}, {"qk_nope_head_dim", 2}, {"qk_rope_head_dim", 1}, {"v_head_dim", 2}};
    doc.erase("head_dim");
    const ModelConfig m = parseModel(doc);
    ASSERT_TRUE(m.mla.has_value());
    EXPECT_EQ(m.headDim, 3);
    EXPECT_EQ(m.qkHeadDim(), 3);
    EXPECT_EQ(m.vHeadDim(), 2);
    const ModelConfig back = parseModel(modelToJson(m));
    ASSERT_TRUE(back.mla.has_value());
    EXPECT_EQ(back.mla->qLoraRank, 3);
    EXPECT_EQ(back.mla->qkRopeHeadDim, 1);
    EXPECT_EQ(countParameters(back).total(2), countParameters(m).total(2));
    auto problemsOf = [](const nlohmann::json& d) {
        ProblemList problems;
        parseModel(d, "", problems);
        std::set<std::string> where;
        for (const auto& p : problems.items()) where.insert(p.where);
        return where;
    };
    nlohmann::json grouped = doc;
    grouped["kv_heads"] = 1;
    EXPECT_TRUE(problemsOf(grouped).count("/kv_heads"));
    nlohmann::json normed = doc;
    normed["qk_norm"] = true;
    EXPECT_TRUE(problemsOf(normed).count("/qk_norm"));
    nlohmann::json learned = doc;
    learned["position_embedding"] = "learned";
    EXPECT_TRUE(problemsOf(learned).count("/mla/qk_rope_head_dim"));
    nlohmann::json wide = doc;
    wide["head_dim"] = 4;
    EXPECT_TRUE(problemsOf(wide).count("/head_dim"));
    nlohmann::json partial = doc; // latent attention's rotary part is its own qk_rope_head_dim
    partial["rotary_percent"] = 0.5;
    EXPECT_TRUE(problemsOf(partial).count("/rotary_percent"));
    nlohmann::json missing = doc;
    missing["mla"].erase("kv_lora_rank");
    EXPECT_TRUE(problemsOf(missing).count("/mla/kv_lora_rank"));
}

TEST(ModelParameters, DenseLayersAmongExpertLayersHoldTheDenseMlp) {
    ModelConfig m = handModel();
    m.moe = MoeConfig{4, 2, 8};
    const auto allExperts = countParameters(m);
    const int64_t activeAll = activeParameters(m);
    m.moe->denseLayers = {0};
    // Layer 0: the dense SwiGLU MLP of 8 (96) in place of four experts and the router (4 x 96 + 16).
    EXPECT_EQ(countParameters(m).total(2), allExperts.total(2) - (4 * 96 + 16) + 96);
    EXPECT_EQ(activeParameters(m), activeAll - (2 * 96 + 16) + 96);
    EXPECT_EQ(m.denseLayerCount(), 1);
    EXPECT_EQ(m.denseLayersIn(0, 1), 1);
    EXPECT_EQ(m.denseLayersIn(1, 1), 0);
    EXPECT_FALSE(m.denseLayerModel().moe.has_value());
    nlohmann::json doc = modelToJson(m);
    EXPECT_EQ(parseModel(doc).moe->denseLayers, (std::vector<int>{0}));
    auto problemAt = [](const nlohmann::json& d) {
        ProblemList problems;
        parseModel(d, "", problems);
        return problems.items().empty() ? std::string() : problems.items().front().where;
    };
    doc["moe"]["dense_layers"] = {2};
    EXPECT_EQ(problemAt(doc), "/moe/dense_layers/0");
    doc["moe"]["dense_layers"] = {1, 0};
    EXPECT_EQ(problemAt(doc), "/moe/dense_layers/1");
    doc["moe"]["dense_layers"] = 1;
    EXPECT_EQ(problemAt(doc), "/moe/dense_layers");
    // Group-limited routing: equal groups, a token's groups among them holding at least top_k experts.
    doc["moe"]["dense_layers"] = {0};
    doc["moe"]["routing_groups"] = 2;
    doc["moe"]["groups_per_token"] = 1;
    EXPECT_EQ(problemAt(doc), "");
    EXPECT_EQ(parseModel(modelToJson(parseModel(doc))).moe->groupsPerToken, 1);
    doc["moe"]["routing_groups"] = 3;
    EXPECT_EQ(problemAt(doc), "/moe/routing_groups");
    doc["moe"]["routing_groups"] = 4;
    EXPECT_EQ(problemAt(doc), "/moe/groups_per_token"); // one group of one expert holds fewer than top_k 2
    doc["moe"]["groups_per_token"] = 5;
    EXPECT_EQ(problemAt(doc), "/moe/groups_per_token");
}

TEST(ModelJson, RoundTripsAndRejectsUnknownKeys) {
    ModelConfig m = handModel();
    m.moe = MoeConfig{4, 2, 8};
    auto j = modelToJson(m);
    ModelConfig back = parseModel(j);
    EXPECT_EQ(modelToJson(back), j);
    j["hiden"] = 5;
    j["moe"]["experts"] = 0;
    try {
        parseModel(j);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        std::set<std::string> where;
        for (const auto& p : e.problems()) where.insert(p.where);
        EXPECT_TRUE(where.count("/moe/experts"));
        EXPECT_TRUE(where.count("/hiden"));
    }
}

TEST(ModelJson, AlibiHasNoParametersAndRoundTrips) {
    // ALiBi biases the attention scores by a fixed per-head slope x distance: no table, no rotation.
    ModelConfig m = handModel();
    const auto rope = countParameters(m);
    m.position = PositionEmbedding::Alibi;
    EXPECT_EQ(countParameters(m).total(2), rope.total(2));
    auto j = modelToJson(m);
    EXPECT_EQ(j["position_embedding"], "alibi");
    EXPECT_EQ(parseModel(j).position, PositionEmbedding::Alibi);
    j["position_embedding"] = "relative";
    try {
        parseModel(j);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "/position_embedding");
    }
}

// Where reading `doc` reports its first problem; empty when it reads cleanly.
std::string problemAt(const nlohmann::json& doc) {
    ProblemList problems;
    parseModel(doc, "", problems);
    return problems.empty() ? std::string() : problems.items().front().where;
}

// Attention and the MLP side by side: the same parameters, written back only when set, and refused beside experts,
// whose combine tessel does not merge with attention's reduction, and beside norms after each block.
TEST(ModelJson, ParallelResidualRoundTripsWithTheSameParameters) {
    ModelConfig m = handModel();
    const auto sequential = countParameters(m);
    EXPECT_FALSE(modelToJson(m).contains("parallel_residual"));
    m.parallelResidual = true;
    EXPECT_EQ(countParameters(m).total(2), sequential.total(2));
    auto j = modelToJson(m);
    EXPECT_EQ(j["parallel_residual"], true);
    EXPECT_TRUE(parseModel(j).parallelResidual);
    j["parallel_residual"] = 1;
    EXPECT_EQ(problemAt(j), "/parallel_residual");
    j["parallel_residual"] = true;
    j["moe"] = {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 64}};
    EXPECT_EQ(problemAt(j), "/parallel_residual");
    j.erase("moe");
    j["post_norms"] = true;
    EXPECT_EQ(problemAt(j), "/parallel_residual");
}

TEST(ModelJson, PartialRotaryRoundTripsAndItsRulesNameTheField) {
    // Megatron-LM's --rotary-percent: int(head_dim x fraction) columns of each head rotated, no parameters.
    nlohmann::json doc = modelToJson(handModel());
    EXPECT_FALSE(doc.contains("rotary_percent")); // the whole head: not written
    doc["head_dim"] = 8;
    doc["rotary_percent"] = 0.5;
    const ModelConfig m = parseModel(doc);
    EXPECT_DOUBLE_EQ(m.rotaryPercent, 0.5);
    EXPECT_EQ(m.rotaryDim(), 4);
    EXPECT_EQ(handModel().rotaryDim(), 2);
    EXPECT_DOUBLE_EQ(parseModel(modelToJson(m)).rotaryPercent, 0.5);
    ModelConfig whole = m;
    whole.rotaryPercent = 1.0;
    EXPECT_EQ(countParameters(m).total(2), countParameters(whole).total(2));
    nlohmann::json odd = doc;
    odd["rotary_percent"] = 0.375; // int(8 x 0.375) = 3 columns: not pairs
    EXPECT_EQ(problemAt(odd), "/rotary_percent");
    nlohmann::json wide = doc;
    wide["rotary_percent"] = 1.25;
    EXPECT_EQ(problemAt(wide), "/rotary_percent");
    nlohmann::json learned = doc;
    learned["position_embedding"] = "learned";
    EXPECT_EQ(problemAt(learned), "/rotary_percent");
}

TEST(ModelJson, SlidingWindowRoundTripsWithoutParameters) {
    ModelConfig m = handModel();
    EXPECT_FALSE(modelToJson(m).contains("sliding_window"));
    const auto whole = countParameters(m).total(2);
    m.slidingWindow = 2;
    EXPECT_EQ(parseModel(modelToJson(m)).slidingWindow, 2);
    EXPECT_EQ(countParameters(m).total(2), whole);
    nlohmann::json doc = modelToJson(m);
    doc["sliding_window"] = -1;
    EXPECT_EQ(problemAt(doc), "/sliding_window");
    // Layers that attend in full beside windowed ones: the model's two layers, 0-based, ascending, not all of them,
    // and only with a window.
    m.fullAttentionLayers = {1};
    const ModelConfig pattern = parseModel(modelToJson(m));
    EXPECT_EQ(pattern.fullAttentionLayers, (std::vector<int>{1}));
    EXPECT_EQ(pattern.windowedLayersIn(0, 2), 1);
    EXPECT_EQ(countParameters(pattern).total(2), whole);
    doc = modelToJson(m);
    doc["full_attention_layers"] = {2};
    EXPECT_EQ(problemAt(doc), "/full_attention_layers/0");
    doc["full_attention_layers"] = {0, 1};
    EXPECT_EQ(problemAt(doc), "/full_attention_layers");
    doc["full_attention_layers"] = "1";
    EXPECT_EQ(problemAt(doc), "/full_attention_layers");
    doc["full_attention_layers"] = {1};
    doc.erase("sliding_window");
    EXPECT_EQ(problemAt(doc), "/full_attention_layers");
}

TEST(ModelJson, InconsistentHeadsAreReported) {
    auto j = modelToJson(handModel());
    j["kv_heads"] = 3;     // does not divide 2 heads... and exceeds them
    j["top_level_typo"] = true;
    j.erase("schema_version");
    try {
        parseModel(j);
        FAIL();
    } catch (const InputError& e) {
        std::set<std::string> where;
        for (const auto& p : e.problems()) where.insert(p.where);
        EXPECT_TRUE(where.count("/kv_heads"));
        EXPECT_TRUE(where.count("/schema_version"));
        EXPECT_TRUE(where.count("/top_level_typo"));
    }
}

} // namespace
} // namespace tessel
