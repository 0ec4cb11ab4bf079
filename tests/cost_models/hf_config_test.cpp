// Tests the HuggingFace config.json translation: shapes of real configs, agreement with presets, error pointers.
#include "tessel/cost/hf_config.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace tessel {
namespace {

const std::string kDataDir = TESSEL_TEST_DATA_DIR;
const std::string kScenarioDir = TESSEL_SCENARIO_DIR;

nlohmann::json hfConfig(const std::string& folder) { return readJsonFile(kDataDir + "/hf/" + folder + "/config.json"); }

ModelConfig parseHf(const std::string& folder) { return parseModel(hfConfig(folder)); }

// The routed experts a config declares: count, experts a token and each one's MLP width. A fatal failure when there
// are none: callers wrap it in ASSERT_NO_FATAL_FAILURE before they read m.moe.
void expectRoutedExperts(const ModelConfig& m, int experts, int topK, int64_t width) {
    ASSERT_TRUE(m.moe.has_value());
    EXPECT_EQ(m.moe->experts, experts);
    EXPECT_EQ(m.moe->topK, topK);
    EXPECT_EQ(m.moe->expertFfnHidden, width);
}

ModelConfig preset(const std::string& name) { return parseModel(readJsonFile(kScenarioDir + "/models/" + name + ".json")); }

bool hasProblemAt(const ProblemList& problems, const std::string& where) {
    return std::any_of(problems.items().begin(), problems.items().end(),
                       [&](const Problem& p) { return p.where == where; });
}

std::string describe(const ProblemList& problems) {
    std::string s;
    for (const auto& p : problems.items()) s += p.where + ": " + p.message + "\n";
    return s;
}

// Whether reading `doc` as a model (a HuggingFace config, then the model's cross-field checks) reports a problem at
// `where`; else the problems it did report.
::testing::AssertionResult problemAt(const nlohmann::json& doc, const std::string& where) {
    ProblemList problems;
    (void)parseModel(doc, "", problems);
    if (hasProblemAt(problems, where)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "no problem at " << where << "; got:\n" << describe(problems);
}

// The shape every config gives: layers, hidden, heads, kv heads, head size, MLP width, vocabulary.
struct Shape {
    int layers, heads, kvHeads;
    int64_t hidden, headDim, ffn, vocab;
};
void expectShape(const ModelConfig& m, const Shape& want) {
    EXPECT_EQ(m.layers, want.layers);
    EXPECT_EQ(m.hidden, want.hidden);
    EXPECT_EQ(m.heads, want.heads);
    EXPECT_EQ(m.kvHeads, want.kvHeads);
    EXPECT_EQ(m.headDim, want.headDim);
    EXPECT_EQ(m.ffnHidden, want.ffn);
    EXPECT_EQ(m.vocab, want.vocab);
}

TEST(HfConfig, DetectsHuggingFaceConfigsOnly) {
    EXPECT_TRUE(isHuggingFaceConfig(hfConfig("llama3-8b")));
    EXPECT_TRUE(isHuggingFaceConfig(hfConfig("gpt2")));
    EXPECT_FALSE(isHuggingFaceConfig(readJsonFile(kScenarioDir + "/models/llama3-8b.json")));
    EXPECT_FALSE(isHuggingFaceConfig(nlohmann::json::array()));
    EXPECT_FALSE(isHuggingFaceConfig(nlohmann::json{{"model_type", "llama"}, {"schema_version", 1}}));
}

TEST(HfConfig, Llama3_8bShapes) {
    const ModelConfig m = parseHf("llama3-8b");
    EXPECT_EQ(m.name, "llama"); // the public config has no _name_or_path
    expectShape(m, {32, 32, 8, 4096, 128, 14336, 128256});
    EXPECT_EQ(m.seqLen, 8192);
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_EQ(m.norm, NormKind::RmsNorm);
    EXPECT_EQ(m.position, PositionEmbedding::Rope);
    EXPECT_FALSE(m.tiedEmbeddings);
    EXPECT_FALSE(m.linearBias);
    EXPECT_FALSE(m.qkvBias);
    EXPECT_FALSE(m.moe.has_value());
    EXPECT_DOUBLE_EQ(m.dropout, 0.0);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{8'030'261'248});
}

TEST(HfConfig, MixtralShapes) {
    const ModelConfig m = parseHf("mixtral-8x7b");
    EXPECT_EQ(m.layers, 32);
    EXPECT_EQ(m.hidden, 4096);
    EXPECT_EQ(m.heads, 32);
    EXPECT_EQ(m.kvHeads, 8);
    EXPECT_EQ(m.ffnHidden, 14336);
    EXPECT_EQ(m.vocab, 32000);
    EXPECT_EQ(m.seqLen, 32768); // max_position_embeddings; the tessel preset trains at 4096
    ASSERT_TRUE(m.moe.has_value());
    EXPECT_EQ(m.moe->experts, 8);
    EXPECT_EQ(m.moe->topK, 2);
    EXPECT_EQ(m.moe->expertFfnHidden, 14336);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{46'702'792'704});
}

TEST(HfConfig, Gpt2Shapes) {
    const ModelConfig m = parseHf("gpt2");
    EXPECT_EQ(m.layers, 12);
    EXPECT_EQ(m.hidden, 768);
    EXPECT_EQ(m.heads, 12);
    EXPECT_EQ(m.kvHeads, 12);
    EXPECT_EQ(m.headDim, 64);
    EXPECT_EQ(m.ffnHidden, 3072); // n_inner absent -> 4 x n_embd
    EXPECT_EQ(m.vocab, 50257);
    EXPECT_EQ(m.seqLen, 1024);
    EXPECT_EQ(m.activation, Activation::Gelu);
    EXPECT_EQ(m.norm, NormKind::LayerNorm);
    EXPECT_EQ(m.position, PositionEmbedding::Learned);
    EXPECT_TRUE(m.tiedEmbeddings);
    EXPECT_TRUE(m.linearBias);
    EXPECT_DOUBLE_EQ(m.dropout, 0.1);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{124'439'808});
}

TEST(HfConfig, Qwen2_7bHasQkvBiasOnly) {
    const ModelConfig m = parseHf("qwen2-7b");
    expectShape(m, {28, 28, 4, 3584, 128, 18944, 152064});
    EXPECT_EQ(m.seqLen, 131072);
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_TRUE(m.qkvBias);
    EXPECT_FALSE(m.linearBias);
    EXPECT_FALSE(m.tiedEmbeddings);
    // Qwen2-7B's published size, 7.62B: the q/k/v biases add (28 + 2 x 4) x 128 elements per layer.
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{7'615'616'512});
}

// Qwen3-8B: head_dim given, an RMSNorm over each head of q and k, no biases. Its model card: 8.2B parameters,
// 6.95B without the embeddings (the input and the untied output one).
TEST(HfConfig, Qwen3_8bHasQkNorms) {
    const ModelConfig m = parseHf("qwen3-8b");
    expectShape(m, {36, 32, 8, 4096, 128, 12288, 151936});
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_EQ(m.norm, NormKind::RmsNorm);
    EXPECT_TRUE(m.qkNorm);
    EXPECT_FALSE(m.qkvBias);
    EXPECT_FALSE(m.tiedEmbeddings);
    const ParameterCounts c = countParameters(m);
    EXPECT_EQ(c.perLayerNorms, 2 * 4096 + 2 * 128);
    EXPECT_EQ(c.total(m.layers), int64_t{8'190'735'360});
    EXPECT_EQ(m.layers * c.perLayer(), int64_t{6'946'071'552});
}

// Qwen3-30B-A3B: every layer 128 SwiGLU experts of 768, 8 a token; its model card: 30.5B parameters, 3.3B active.
TEST(HfConfig, Qwen3MoeIsEveryLayerSparse) {
    const ModelConfig m = parseHf("qwen3-30b-a3b");
    ASSERT_NO_FATAL_FAILURE(expectRoutedExperts(m, 128, 8, 768));
    EXPECT_TRUE(m.qkNorm);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{30'532'122'624});
    EXPECT_EQ(activeParameters(m), int64_t{3'353'032'704});
    EXPECT_TRUE(m.moe->denseLayers.empty());
    // Dense layers among the sparse ones (Qwen3MoeDecoderLayer): every layer with (i + 1) % step != 0, and those listed.
    nlohmann::json doc = hfConfig("qwen3-30b-a3b");
    doc["decoder_sparse_step"] = 2;
    const ModelConfig alternating = parseModel(doc);
    ASSERT_EQ(alternating.moe->denseLayers.size(), 24u);
    EXPECT_EQ(alternating.moe->denseLayers.front(), 0);
    EXPECT_EQ(alternating.moe->denseLayers.back(), 46);
    doc["decoder_sparse_step"] = 1;
    doc["mlp_only_layers"] = nlohmann::json::array({0, 47});
    const ModelConfig listed = parseModel(doc);
    EXPECT_EQ(listed.moe->denseLayers, (std::vector<int>{0, 47}));
    // Two layers with the dense MLP of intermediate_size 6144 in place of 128 experts of 768 and the router.
    const int64_t expertMlp = 128 * 3 * 2048 * 768 + 2048 * 128, denseMlp = 3 * 2048 * 6144;
    EXPECT_EQ(countParameters(listed).total(listed.layers), int64_t{30'532'122'624} - 2 * (expertMlp - denseMlp));
    doc["mlp_only_layers"] = nlohmann::json::array({48});
    EXPECT_TRUE(problemAt(doc, "/mlp_only_layers/0"));
}

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): latent attention, 1 shared and 256 routed experts, the first 3
// layers dense; the report's 671B parameters, 37B activated (arXiv:2412.19437 §1), without the MTP module.
TEST(HfConfig, DeepSeekV3IsLatentAttentionOverExpertsAfterThreeDenseLayers) {
    const ModelConfig m = parseHf("deepseek-v3");
    ASSERT_TRUE(m.mla.has_value());
    ASSERT_TRUE(m.moe.has_value());
    EXPECT_EQ(m.mla->qLoraRank, 1536);
    EXPECT_EQ(m.headDim, 192);
    EXPECT_EQ(m.kvHeads, 128);
    EXPECT_EQ(m.moe->experts, 256);
    EXPECT_EQ(m.moe->sharedFfnHidden, 2048);
    EXPECT_EQ(m.moe->denseLayers, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(m.moe->routingGroups, 8);
    EXPECT_EQ(m.moe->groupsPerToken, 4);
    EXPECT_EQ(m.ffnHidden, 18432);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{671'026'404'352});
    EXPECT_EQ(activeParameters(m), int64_t{37'552'282'624});
    // Its multi-token-prediction module (num_nextn_predict_layers 1), trained with it and not in the 671B: an expert
    // layer, enorm, hnorm and the final norm, and eh_proj 2 x 7168^2: 11,610,067,968; with the embedding and output
    // head the checkpoint stores beside it (129,280 x 7,168 each), 13.46B, the card's 685B in all.
    EXPECT_EQ(m.mtpLayers, 1);
    const ParameterCounts pc = countParameters(m);
    EXPECT_EQ(pc.perMtpModule, int64_t{11'610'067'968});
    EXPECT_EQ(pc.total(m.layers) + pc.perMtpModule + 2 * int64_t{129'280} * 7'168, int64_t{684'489'830'400});
    // DeepSeek-V2-Lite: q straight from the hidden state (q_lora_rank null), one dense layer; its card's 15.7B.
    const ModelConfig lite = parseHf("deepseek-v2-lite");
    ASSERT_TRUE(lite.mla.has_value());
    EXPECT_EQ(lite.mla->qLoraRank, 0);
    EXPECT_EQ(lite.moe->denseLayers, (std::vector<int>{0}));
    EXPECT_EQ(lite.moe->routingGroups, 0); // n_group 1: no limit
    EXPECT_EQ(countParameters(lite).total(lite.layers), int64_t{15'706'484'224});
    EXPECT_EQ(lite.mtpLayers, 0);
    // A round trip through tessel's own model file keeps both.
    const ModelConfig back = parseModel(modelToJson(m));
    EXPECT_EQ(countParameters(back).total(back.layers), countParameters(m).total(m.layers));
    EXPECT_EQ(back.mtpLayers, 1);
}

// Phi-3-mini: Llama's shapes behind fused qkv_proj and gate_up_proj; its model card: 3.8B parameters.
TEST(HfConfig, Phi3IsLlamaLike) {
    const ModelConfig m = parseHf("phi3-mini");
    EXPECT_EQ(m.name, "Phi-3-mini-4k-instruct");
    EXPECT_EQ(m.headDim, 96);
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_FALSE(m.qkNorm);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{3'821'079'552});
    EXPECT_EQ(m.rotaryDim(), 96); // Phi3Config's partial_rotary_factor defaults to 1.0
    EXPECT_EQ(m.slidingWindow, 2047); // its config's sliding_window, every layer
    // Phi-4-mini's 0.75 (its config.json): int(128 x 0.75) = 96 of each head rotated.
    nlohmann::json doc = hfConfig("phi3-mini");
    doc["partial_rotary_factor"] = 0.75;
    doc["head_dim"] = 128;
    EXPECT_EQ(parseModel(doc).rotaryDim(), 96);
    // int(128 x 0.01) = 1 column cannot be rotated in pairs: a problem at the key.
    doc["partial_rotary_factor"] = 0.01;
    EXPECT_TRUE(problemAt(doc, "/partial_rotary_factor"));
}

// Nemotron-4 4B (Minitron) as TensorRT-LLM's tests write its HuggingFace config: squared ReLU without a gate,
// LayerNorm1P, GQA, untied, head dimension as kv_channels.
TEST(HfConfig, NemotronIsSquaredReluWithLayerNorm) {
    const ModelConfig m = parseHf("nemotron-4-4b");
    expectShape(m, {32, 24, 8, 3072, 128, 9216, 256000});
    EXPECT_EQ(m.activation, Activation::SquaredRelu);
    EXPECT_EQ(m.norm, NormKind::LayerNorm);
    EXPECT_EQ(m.position, PositionEmbedding::Rope);
    EXPECT_DOUBLE_EQ(m.rotaryPercent, 0.5); // partial_rotary_factor: 64 of each 128-wide head rotated
    EXPECT_EQ(m.rotaryDim(), 64);
    EXPECT_FALSE(m.tiedEmbeddings);
    EXPECT_FALSE(m.linearBias);
    // By hand: embedding and head 2 x 256000 x 3072; a layer q and o 2 x 3072^2, k and v 2 x 3072 x 1024, up and
    // down 2 x 3072 x 9216, two LayerNorms 4 x 3072; the final LayerNorm 2 x 3072: 4.19 B, Minitron's "4B".
    const int64_t layer = 2 * 3072LL * 3072 + 2 * 3072LL * 1024 + 2 * 3072LL * 9216 + 4 * 3072;
    EXPECT_EQ(countParameters(m).total(m.layers), 2 * 256000LL * 3072 + 32 * layer + 2 * 3072);
    // relu2 is Nemotron's; another family with it is refused at hidden_act.
    auto llama = hfConfig("llama3-8b");
    llama["hidden_act"] = "relu2";
    ProblemList problems;
    (void)parseModel(llama, "", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.items().front().where.find("hidden_act"), std::string::npos);
}

TEST(HfConfig, NameComesFromNameOrPath) {
    auto doc = hfConfig("llama3-8b");
    doc["_name_or_path"] = "meta-llama/Meta-Llama-3-8B";
    EXPECT_EQ(parseModel(doc).name, "meta-llama/Meta-Llama-3-8B");
}

TEST(HfConfig, Gpt2InnerWidthWhenGiven) {
    auto doc = hfConfig("gpt2");
    doc["n_inner"] = nullptr;
    EXPECT_EQ(parseModel(doc).ffnHidden, 3072);
    doc["n_inner"] = 1024;
    EXPECT_EQ(parseModel(doc).ffnHidden, 1024);
}

TEST(HfConfig, ExplicitHeadDimIsKept) {
    auto doc = hfConfig("mixtral-8x7b");
    doc["head_dim"] = 128;
    EXPECT_EQ(parseModel(doc).headDim, 128);
    doc["head_dim"] = nullptr; // some configs write null for "hidden / heads"
    EXPECT_EQ(parseModel(doc).headDim, 128);
    doc["head_dim"] = 256;
    EXPECT_EQ(parseModel(doc).headDim, 256);
}

// The HF config of a model and the shipped tessel preset describe the same network.
struct PresetPair {
    const char* hfFolder;
    const char* presetName;
};

class HfMatchesPreset : public ::testing::TestWithParam<PresetPair> {};

TEST_P(HfMatchesPreset, SameShapes) {
    const ModelConfig hf = parseHf(GetParam().hfFolder);
    const ModelConfig tessel = preset(GetParam().presetName);
    EXPECT_EQ(hf.layers, tessel.layers);
    EXPECT_EQ(hf.hidden, tessel.hidden);
    EXPECT_EQ(hf.heads, tessel.heads);
    EXPECT_EQ(hf.kvHeads, tessel.kvHeads);
    EXPECT_EQ(hf.headDim, tessel.headDim);
    EXPECT_EQ(hf.ffnHidden, tessel.ffnHidden);
    EXPECT_EQ(hf.vocab, tessel.vocab);
    EXPECT_EQ(hf.activation, tessel.activation);
    EXPECT_EQ(hf.norm, tessel.norm);
    EXPECT_EQ(hf.position, tessel.position);
    EXPECT_EQ(hf.tiedEmbeddings, tessel.tiedEmbeddings);
    EXPECT_EQ(hf.linearBias, tessel.linearBias);
    EXPECT_EQ(hf.qkvBias, tessel.qkvBias);
    EXPECT_EQ(hf.qkNorm, tessel.qkNorm);
    EXPECT_EQ(hf.moe.has_value(), tessel.moe.has_value());
    if (hf.moe && tessel.moe) {
        EXPECT_EQ(hf.moe->experts, tessel.moe->experts);
        EXPECT_EQ(hf.moe->topK, tessel.moe->topK);
        EXPECT_EQ(hf.moe->expertFfnHidden, tessel.moe->expertFfnHidden);
    }
    EXPECT_EQ(hf.attentionSinks, tessel.attentionSinks);
    EXPECT_EQ(hf.slidingWindow, tessel.slidingWindow);
    EXPECT_EQ(hf.fullAttentionLayers, tessel.fullAttentionLayers);
    // seq_len may differ (Mixtral's preset trains at 4096), but only learned positions would change the count.
    if (hf.position == PositionEmbedding::Learned) {
        EXPECT_EQ(hf.seqLen, tessel.seqLen);
    }
    EXPECT_EQ(countParameters(hf).total(hf.layers), countParameters(tessel).total(tessel.layers));
}

INSTANTIATE_TEST_SUITE_P(Presets, HfMatchesPreset,
                         ::testing::Values(PresetPair{"llama3-8b", "llama3-8b"},
                                           PresetPair{"mixtral-8x7b", "mixtral-8x7b"},
                                           PresetPair{"qwen3-8b", "qwen3-8b"},
                                           PresetPair{"qwen3-30b-a3b", "qwen3-30b-a3b"},
                                           PresetPair{"gpt-oss-120b", "gpt-oss-120b"},
                                           PresetPair{"gpt2", "gpt2-124m"}),
                         [](const ::testing::TestParamInfo<PresetPair>& param) {
                             std::string n = param.param.presetName;
                             std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                             return n;
                         });

TEST(HfConfig, CheckpointFolderResolvesViaLoadModelRef) {
    const ModelConfig fromFolder = loadModelRef(kDataDir + "/hf/llama3-8b", "--model");
    EXPECT_EQ(fromFolder.hidden, 4096);
    EXPECT_EQ(fromFolder.kvHeads, 8);
    EXPECT_EQ(fromFolder.vocab, 128256);
    const ModelConfig fromFile = loadModelRef(kDataDir + "/hf/llama3-8b/config.json", "--model");
    EXPECT_EQ(countParameters(fromFile).total(fromFile.layers), countParameters(fromFolder).total(fromFolder.layers));
}

TEST(HfConfig, UnresolvableRefNamesWhere) {
    try {
        loadModelRef(kDataDir + "/hf/no-such-checkpoint", "--model");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        ASSERT_FALSE(e.problems().empty());
        EXPECT_EQ(e.problems().front().where, "--model");
    }
}

TEST(HfConfig, UnsupportedModelTypeIsAProblemAtModelType) {
    const nlohmann::json bert = {{"model_type", "bert"}, {"hidden_size", 768}, {"num_hidden_layers", 12},
                                 {"num_attention_heads", 12}, {"intermediate_size", 3072}, {"vocab_size", 30522},
                                 {"max_position_embeddings", 512}};
    ProblemList problems;
    parseHuggingFaceConfig(bert, "/model", problems);
    ASSERT_EQ(problems.items().size(), 1u) << describe(problems);
    EXPECT_EQ(problems.items().front().where, "/model/model_type");
    EXPECT_NE(problems.items().front().message.find("bert"), std::string::npos);

    // Through the generic entry point, as a scenario's inline model would be read.
    try {
        parseModel(bert, "/model");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        ASSERT_FALSE(e.problems().empty());
        EXPECT_EQ(e.problems().front().where, "/model/model_type");
    }
}

// Qwen1.5-MoE-A2.7B (Qwen/Qwen1.5-MoE-A2.7B config.json): 60 routed experts of 1408, top 4, and one shared expert
// of 5632 in every layer; q/k/v biases. Its model card: "14.3B parameters in total and 2.7B activated". By hand,
// a layer is attention 4 x 2048^2 + 3 x 2048 (biases), routed 60 x 3 x 2048 x 1408, router 2048 x 60, shared
// 3 x 2048 x 5632 and two norms: 570,558,464; 24 of them, untied 151936 x 2048 embedding and head, the final
// norm: 14,315,735,040 (the card's 14.3 B less the 49,152 of the shared experts' gates, not counted).
TEST(HfConfig, Qwen2MoeHasASharedExpertBesideTheRoutedOnes) {
    const ModelConfig m = parseHf("qwen1.5-moe-a2.7b");
    ASSERT_NO_FATAL_FAILURE(expectRoutedExperts(m, 60, 4, 1408));
    EXPECT_EQ(m.moe->sharedFfnHidden, 5632);
    EXPECT_TRUE(m.moe->denseLayers.empty());
    EXPECT_TRUE(m.qkvBias);
    EXPECT_FALSE(m.linearBias);
    EXPECT_FALSE(m.qkNorm);
    EXPECT_FALSE(m.tiedEmbeddings);
    EXPECT_EQ(m.kvHeads, 16);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{14'315'735'040});
    // Activated (card: 2.7 B): a layer's attention with its biases 16,783,360, the router 122,880, 4 of the 60
    // experts 34,603,008, the shared one 34,603,008 and the norms 4,096, x 24; the embedding, head and final norm.
    EXPECT_EQ(activeParameters(m), int64_t{24} * (16'783'360 + 122'880 + 34'603'008 + 34'603'008 + 4'096) +
                                       int64_t{2} * 151'936 * 2'048 + 2'048);
    EXPECT_EQ(activeParameters(m), int64_t{2'689'124'352});
    // A missing shared width is a problem at its key, not the HF default taken silently.
    nlohmann::json doc = hfConfig("qwen1.5-moe-a2.7b");
    doc.erase("shared_expert_intermediate_size");
    EXPECT_TRUE(problemAt(doc, "/shared_expert_intermediate_size"));
}

// Pythia (EleutherAI/pythia-160m config.json), GPT-NeoX in transformers: LayerNorm, a GELU MLP and biases on every
// linear, rotary positions, untied embed_in and embed_out. Its model card: 162,322,944 parameters; pythia-70m's
// (6 layers of 512, 8 heads, an MLP of 2048): 70,426,624.
TEST(HfConfig, GptNeoxIsPythia) {
    const ModelConfig m = parseHf("pythia-160m");
    EXPECT_EQ(m.activation, Activation::Gelu);
    EXPECT_EQ(m.norm, NormKind::LayerNorm);
    EXPECT_EQ(m.position, PositionEmbedding::Rope);
    EXPECT_TRUE(m.linearBias);
    EXPECT_FALSE(m.tiedEmbeddings);
    EXPECT_FALSE(m.moe.has_value());
    EXPECT_EQ(m.seqLen, 2048);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{162'322'944});
    // rotary_pct 0.25 of each 64-wide head; GPTNeoXConfig's default is the same 0.25 when the key is absent.
    EXPECT_DOUBLE_EQ(m.rotaryPercent, 0.25);
    EXPECT_EQ(m.rotaryDim(), 16);
    EXPECT_DOUBLE_EQ(parseModel(modelToJson(m)).rotaryPercent, 0.25);
    nlohmann::json doc = hfConfig("pythia-160m");
    doc.erase("rotary_pct");
    EXPECT_DOUBLE_EQ(parseModel(doc).rotaryPercent, 0.25);
    doc["rotary_pct"] = 1.5;
    EXPECT_TRUE(problemAt(doc, "/rotary_pct"));
    doc["rotary_pct"] = 0.25;
    doc["num_hidden_layers"] = 6;
    doc["hidden_size"] = 512;
    doc["num_attention_heads"] = 8;
    doc["intermediate_size"] = 2048;
    const ModelConfig small = parseModel(doc);
    EXPECT_EQ(countParameters(small).total(small.layers), int64_t{70'426'624});
    // Attention without biases beside the MLP's has no layout of tessel's: a problem at the key, not a guess.
    doc["attention_bias"] = false;
    EXPECT_TRUE(problemAt(doc, "/attention_bias"));
    doc["attention_bias"] = true;
    // One dropout probability in tessel's model: GPT-NeoX's two, when they differ, are a problem, not one of them.
    doc["hidden_dropout"] = 0.1;
    EXPECT_DOUBLE_EQ(parseModel(doc).dropout, 0.1);
    doc["attention_dropout"] = 0.0;
    EXPECT_TRUE(problemAt(doc, "/attention_dropout"));
    doc.erase("attention_dropout");
    doc["hidden_act"] = "relu";
    EXPECT_TRUE(problemAt(doc, "/hidden_act"));
    // Attention and the MLP side by side: Pythia's use_parallel_residual, GPTNeoXConfig's default when absent.
    EXPECT_TRUE(m.parallelResidual);
    EXPECT_TRUE(parseModel(modelToJson(m)).parallelResidual);
    doc = hfConfig("pythia-160m");
    doc.erase("use_parallel_residual");
    EXPECT_TRUE(parseModel(doc).parallelResidual);
    doc["use_parallel_residual"] = false;
    EXPECT_FALSE(parseModel(doc).parallelResidual);
    doc["use_parallel_residual"] = "yes";
    EXPECT_TRUE(problemAt(doc, "/use_parallel_residual"));
}

// StableLM-3B-4E1T (stabilityai/stablelm-3b-4e1t config.json, transformers' stablelm): Llama's SwiGLU MLP and untied
// head with LayerNorm, a quarter of each head rotated. Its model card: 2,795,443,200 parameters; by hand, embedding
// and head 2 x 50,304 x 2,560, a layer 4 x 2,560^2 + 3 x 2,560 x 6,912 + two LayerNorms 4 x 2,560, and the final
// LayerNorm 2 x 2,560.
TEST(HfConfig, StableLmIsLlamaLikeWithLayerNormAndAPartialRotary) {
    const ModelConfig m = parseHf("stablelm-3b-4e1t");
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_EQ(m.norm, NormKind::LayerNorm);
    EXPECT_EQ(m.rotaryDim(), 20); // int(80 x 0.25)
    EXPECT_FALSE(m.qkvBias);
    EXPECT_FALSE(m.linearBias);
    EXPECT_FALSE(m.tiedEmbeddings);
    const int64_t layer = 4 * 2560LL * 2560 + 3 * 2560LL * 6912 + 4 * 2560;
    EXPECT_EQ(countParameters(m).total(m.layers), 2 * 50304LL * 2560 + 32 * layer + 2 * 2560);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{2'795'443'200});
    // StableLM 2's use_qkv_bias puts biases on q, k and v (3 x 2,560 a layer).
    nlohmann::json doc = hfConfig("stablelm-3b-4e1t");
    doc["use_qkv_bias"] = true;
    const ModelConfig biased = parseModel(doc);
    EXPECT_TRUE(biased.qkvBias);
    EXPECT_EQ(countParameters(biased).total(32) - countParameters(m).total(32), 32 * 3 * 2560LL);
    // A LayerNorm of every head's own (qk_layernorm) has no counterpart: a problem at the key.
    doc["qk_layernorm"] = true;
    EXPECT_TRUE(problemAt(doc, "/qk_layernorm"));
    // StableLmConfig's use_parallel_residual defaults to false (StableLM-3B-4E1T); StableLM 2 12B sets it.
    EXPECT_FALSE(m.parallelResidual);
    doc = hfConfig("stablelm-3b-4e1t");
    doc["use_parallel_residual"] = true;
    EXPECT_TRUE(parseModel(doc).parallelResidual);
}

// Sliding-window attention as transformers builds it: Mistral's sliding_window in every layer (null: none); Qwen2's
// only with use_sliding_window, from max_window_layers on; layer_types layer by layer. The layers left whole are the
// model's full_attention_layers.
TEST(HfConfig, SlidingWindowsAreReadWhereTheModelCodeUsesThem) {
    nlohmann::json mistral = hfConfig("llama3-8b");
    mistral["model_type"] = "mistral";
    mistral["sliding_window"] = 4096;
    EXPECT_EQ(parseModel(mistral).slidingWindow, 4096);
    EXPECT_EQ(parseModel(modelToJson(parseModel(mistral))).slidingWindow, 4096);
    mistral["sliding_window"] = nullptr;
    EXPECT_EQ(parseModel(mistral).slidingWindow, 0);
    nlohmann::json llama = hfConfig("llama3-8b"); // LlamaAttention has no window whatever the config says
    llama["sliding_window"] = 4096;
    EXPECT_EQ(parseModel(llama).slidingWindow, 0);
    nlohmann::json qwen = hfConfig("qwen2-7b"); // use_sliding_window false, sliding_window 131072
    EXPECT_EQ(parseModel(qwen).slidingWindow, 0);
    qwen["use_sliding_window"] = true;
    qwen["sliding_window"] = 4096;
    qwen["max_window_layers"] = 28; // windows the layers from 28 on: none of its 28
    EXPECT_EQ(parseModel(qwen).slidingWindow, 0);
    qwen["max_window_layers"] = 0;
    EXPECT_EQ(parseModel(qwen).slidingWindow, 4096);
    EXPECT_TRUE(parseModel(qwen).fullAttentionLayers.empty());
    qwen["max_window_layers"] = 14; // layers 0-13 whole, 14-27 windowed
    const ModelConfig half = parseModel(qwen);
    EXPECT_EQ(half.slidingWindow, 4096);
    ASSERT_EQ(half.fullAttentionLayers.size(), 14u);
    EXPECT_EQ(half.fullAttentionLayers.front(), 0);
    EXPECT_EQ(half.fullAttentionLayers.back(), 13);
    EXPECT_EQ(half.windowedLayersIn(0, 28), 14);
    EXPECT_EQ(half.windowedLayersIn(10, 8), 4); // layers 14-17 of 10-17
    EXPECT_EQ(parseModel(modelToJson(half)).fullAttentionLayers, half.fullAttentionLayers);
    mistral["sliding_window"] = 4096;
    mistral["layer_types"] = nlohmann::json::array();
    for (int i = 0; i < 32; ++i) mistral["layer_types"].push_back(i % 2 ? "full_attention" : "sliding_attention");
    const ModelConfig alternating = parseModel(mistral); // gpt-oss's and Gemma 2's alternation
    EXPECT_EQ(alternating.slidingWindow, 4096);
    ASSERT_EQ(alternating.fullAttentionLayers.size(), 16u);
    EXPECT_TRUE(alternating.isWindowedLayer(0));
    EXPECT_FALSE(alternating.isWindowedLayer(1));
    EXPECT_EQ(alternating.fullAttentionLayerModel().slidingWindow, 0);
    EXPECT_EQ(alternating.layerModel(1).slidingWindow, 0);
    EXPECT_EQ(alternating.layerModel(2).slidingWindow, 4096);
    // Every layer whole: no window. A kind tessel does not know, or a list of the wrong length: at its element.
    for (auto& t : mistral["layer_types"]) t = "full_attention";
    EXPECT_EQ(parseModel(mistral).slidingWindow, 0);
    mistral["layer_types"][3] = "chunked_attention";
    EXPECT_TRUE(problemAt(mistral, "/layer_types/3"));
    mistral["layer_types"].erase(3);
    EXPECT_TRUE(problemAt(mistral, "/layer_types"));
}

// gpt-oss-120b (openai/gpt-oss-120b config.json, transformers' gpt_oss): biases on every linear (q/k/v and o_proj under
// attention_bias, the experts' gate_up_proj_bias and down_proj_bias), 128 experts of 2,880, top 4, every layer
// sparse, the even layers windowed at 128 keys and the odd ones whole (layer_types), 64 heads of 64 (wider than
// hidden 2,880 / 64), a learned attention sink a head, an untied head. OpenAI's model card gives 116.83 B parameters;
// by hand a layer is 2,880 x (4,096 + 2 x 512) + 4,096 x 2,880 + 5,632 attention biases + 64 sinks + 2,880 x 128 router
// + 128 x (2,880 x 5,760 + 2,880 x 2,880 + 8,640 biases) + 2 x 2,880 norms = 3,213,073,344, x 36, with 2 x 201,088 x
// 2,880 of embedding and head and the final norm: 116,829,152,064, the card's 116,829,156,672 less the router's biases
// (128 a layer), which ModelConfig has no place for. gpt-oss-20b (24 layers, 32 experts) by the same hand:
// 20,914,756,416 (the card's 20.91 B).
TEST(HfConfig, GptOssIsBiasedExpertsOverAlternatingWindows) {
    const ModelConfig m = parseHf("gpt-oss-120b");
    expectShape(m, {36, 64, 8, 2880, 64, 2880, 201088});
    ASSERT_NO_FATAL_FAILURE(expectRoutedExperts(m, 128, 4, 2880));
    EXPECT_TRUE(m.moe->denseLayers.empty());
    EXPECT_EQ(m.moe->sharedFfnHidden, 0);
    EXPECT_TRUE(m.linearBias);
    EXPECT_TRUE(m.attentionSinks);
    EXPECT_EQ(modelToJson(m).value("attention_sinks", false), true);
    EXPECT_TRUE(parseModel(modelToJson(m)).attentionSinks);
    EXPECT_EQ(m.activation, Activation::Swiglu);
    EXPECT_EQ(m.norm, NormKind::RmsNorm);
    EXPECT_FALSE(m.tiedEmbeddings);
    EXPECT_EQ(m.slidingWindow, 128);
    std::vector<int> odd;
    for (int i = 1; i < 36; i += 2) odd.push_back(i);
    EXPECT_EQ(m.fullAttentionLayers, odd);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{116'829'152'064});
    // gpt-oss-20b's shape, its top-k under the checkpoints' own key alone, its layer_types left to the default.
    nlohmann::json small = hfConfig("gpt-oss-120b");
    small.erase("num_experts_per_tok");
    small.erase("layer_types");
    small.update({{"num_hidden_layers", 24}, {"num_local_experts", 32}});
    const ModelConfig s = parseModel(small);
    ASSERT_NO_FATAL_FAILURE(expectRoutedExperts(s, 32, 4, 2880));
    EXPECT_EQ(s.fullAttentionLayers.size(), 12u);
    EXPECT_EQ(s.fullAttentionLayers.front(), 1);
    EXPECT_EQ(countParameters(s).total(s.layers), int64_t{20'914'756'416});
    // Biases on the experts but not the attention: a shape tessel's model cannot hold, named rather than approximated.
    nlohmann::json unbiased = hfConfig("gpt-oss-120b");
    unbiased["attention_bias"] = false;
    EXPECT_TRUE(problemAt(unbiased, "/attention_bias"));
}

TEST(HfConfig, UnreadModelTypesAreRejectedRatherThanApproximated) {
    // Gemma 3's multimodal wrapper trains a vision tower beside its text model: refused, not read as its text.
    const nlohmann::json doc = {{"model_type", "gemma3"}, {"hidden_size", 2048}};
    EXPECT_TRUE(problemAt(doc, "/model_type"));
}

// Gemma 7B (google/gemma-7b config.json, transformers' gemma; Gemma Team 2024, arXiv:2403.08295 §2): a gated GELU MLP
// (GeGLU), RMSNorm, rotary, 16 heads of 256 (wider than hidden 3,072 / 16), the head tied to the embedding. Its
// 8.54 B parameters by hand: embedding 256,000 x 3,072, a layer 4 x 3,072 x 4,096 + 3 x 3,072 x 24,576 + 2 x 3,072,
// the final RMSNorm 3,072. Gemma 2B (one kv head, 18 layers of 2,048, ffn 16,384): 2,506,172,416.
TEST(HfConfig, GemmaIsAGatedGeluWithWideHeadsAndATiedHead) {
    const ModelConfig m = parseHf("gemma-7b");
    EXPECT_EQ(m.activation, Activation::Geglu);
    EXPECT_TRUE(m.gatedMlp());
    EXPECT_EQ(m.norm, NormKind::RmsNorm);
    EXPECT_EQ(m.headDim, 256);
    EXPECT_TRUE(m.tiedEmbeddings);
    EXPECT_FALSE(m.qkvBias);
    const int64_t layer = 4 * 3072LL * 4096 + 3 * 3072LL * 24576 + 2 * 3072;
    EXPECT_EQ(countParameters(m).total(m.layers), 256000LL * 3072 + 28 * layer + 3072);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{8'537'680'896});
    nlohmann::json doc = hfConfig("gemma-7b");
    doc.update({{"hidden_size", 2048}, {"intermediate_size", 16384}, {"num_attention_heads", 8}, {"num_key_value_heads", 1},
                {"num_hidden_layers", 18}});
    const ModelConfig small = parseModel(doc);
    EXPECT_EQ(countParameters(small).total(small.layers), int64_t{2'506'172'416});
    // The newer configs' hidden_activation wins over hidden_act; an MLP that is not GELU's is a problem at its key.
    doc["hidden_activation"] = "gelu_pytorch_tanh";
    EXPECT_EQ(parseModel(doc).activation, Activation::Geglu);
    doc["hidden_activation"] = "silu";
    EXPECT_TRUE(problemAt(doc, "/hidden_activation"));
    doc["tie_word_embeddings"] = false;
    doc.erase("hidden_activation");
    EXPECT_FALSE(parseModel(doc).tiedEmbeddings);
    // Costed as SwiGLU's shapes: the same parameters, the gated op under its own name.
    ModelConfig swiglu = m;
    swiglu.activation = Activation::Swiglu;
    EXPECT_EQ(countParameters(swiglu).total(28), countParameters(m).total(28));
    EXPECT_EQ(parseModel(modelToJson(m)).activation, Activation::Geglu);
}

// Gemma 3 1B (google/gemma-3-1b-pt config.json, transformers' gemma3_text): Gemma's gated GELU and tied head, RMSNorm
// before and after each block (four a layer), q and k normalised (one head-wide weight each), and a 512-key window in
// all layers but every sixth ((layer + 1) % 6 == 0: 5, 11, 17, 23). 999,885,952 parameters (its safetensors' total):
// embedding 262,144 x 1,152; a layer 1,152 x (1,024 + 2 x 256) + 1,024 x 1,152 + 3 x 1,152 x 6,912 + 4 x 1,152 + 2 x
// 256; the final norm 1,152.
TEST(HfConfig, Gemma3NormalisesEachBlocksOutputAndWindowsFiveLayersOfSix) {
    const ModelConfig m = parseHf("gemma-3-1b");
    EXPECT_EQ(m.activation, Activation::Geglu);
    EXPECT_TRUE(m.postNorms);
    EXPECT_TRUE(m.qkNorm);
    EXPECT_TRUE(m.tiedEmbeddings);
    EXPECT_EQ(m.slidingWindow, 512);
    EXPECT_EQ(m.fullAttentionLayers, (std::vector<int>{5, 11, 17, 23}));
    const int64_t layer = 1152LL * (1024 + 2 * 256) + 1024LL * 1152 + 3 * 1152LL * 6912 + 4 * 1152 + 2 * 256;
    EXPECT_EQ(countParameters(m).total(m.layers), 262144LL * 1152 + 26 * layer + 1152);
    EXPECT_EQ(countParameters(m).total(m.layers), int64_t{999'885'952});
    EXPECT_TRUE(parseModel(modelToJson(m)).postNorms);
    EXPECT_TRUE(m.embeddingScale); // Gemma3TextModel's normalizer, sqrt(hidden)
    EXPECT_DOUBLE_EQ(m.attentionSoftcap, 0.0); // Gemma 3's config: null
    EXPECT_DOUBLE_EQ(m.logitSoftcap, 0.0);
    // Gemma 2 2B's shape (gemma2: 26 layers of 2,304, 8 heads / 4 kv of 256, ffn 9,216, vocab 256,000), its
    // safetensors' 2,614,341,888, windows every other layer from the first. Its soft-capping: Gemma2Config's 50 and 30
    // where the config does not say, the config's own value where it does, none where it is null; a negative cap is a
    // problem at its key.
    nlohmann::json g2 = hfConfig("gemma-3-1b");
    g2.update({{"model_type", "gemma2"}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_attention_heads", 8},
               {"num_key_value_heads", 4}, {"vocab_size", 256000}, {"sliding_window", 4096}});
    g2.erase("sliding_window_pattern");
    g2.erase("attn_logit_softcapping");
    g2["final_logit_softcapping"] = 25.0;
    const ModelConfig capped = parseModel(g2);
    EXPECT_DOUBLE_EQ(capped.attentionSoftcap, 50.0);
    EXPECT_DOUBLE_EQ(capped.logitSoftcap, 25.0);
    EXPECT_DOUBLE_EQ(parseModel(modelToJson(capped)).logitSoftcap, 25.0);
    g2["final_logit_softcapping"] = -1.0;
    EXPECT_TRUE(problemAt(g2, "/final_logit_softcapping"));
    g2["attn_logit_softcapping"] = nullptr;
    g2["final_logit_softcapping"] = nullptr;
    const ModelConfig two = parseModel(g2);
    EXPECT_DOUBLE_EQ(two.attentionSoftcap, 0.0);
    EXPECT_DOUBLE_EQ(two.logitSoftcap, 0.0);
    EXPECT_FALSE(two.qkNorm);
    EXPECT_TRUE(two.postNorms);
    EXPECT_EQ(countParameters(two).total(two.layers), int64_t{2'614'341'888});
    EXPECT_EQ(two.fullAttentionLayers.size(), 13u);
    EXPECT_EQ(two.fullAttentionLayers.front(), 1);
    EXPECT_TRUE(two.isWindowedLayer(0));
    g2.erase("sliding_window"); // Gemma2Config's default
    EXPECT_EQ(parseModel(g2).slidingWindow, 4096);
}

TEST(HfConfig, MissingHiddenSizeIsAProblemAtItsPointer) {
    auto doc = hfConfig("llama3-8b");
    doc.erase("hidden_size");
    ProblemList problems;
    parseHuggingFaceConfig(doc, "", problems);
    ASSERT_TRUE(hasProblemAt(problems, "/hidden_size")) << describe(problems);
    for (const auto& p : problems.items()) {
        if (p.where == "/hidden_size") {
            EXPECT_EQ(p.message, "required field is missing");
        }
    }

    auto gpt2 = hfConfig("gpt2");
    gpt2.erase("n_embd");
    ProblemList gpt2Problems;
    parseHuggingFaceConfig(gpt2, "/model", gpt2Problems);
    EXPECT_TRUE(hasProblemAt(gpt2Problems, "/model/n_embd")) << describe(gpt2Problems);

    EXPECT_THROW(parseModel(doc), InputError);
}

TEST(HfConfig, MissingExpertCountIsAProblem) {
    auto doc = hfConfig("mixtral-8x7b");
    doc.erase("num_local_experts");
    EXPECT_TRUE(problemAt(doc, "/num_local_experts"));
}

TEST(HfConfig, UnsupportedActivationIsAProblem) {
    auto doc = hfConfig("llama3-8b");
    doc["hidden_act"] = "gelu";
    EXPECT_TRUE(problemAt(doc, "/hidden_act"));

    auto gpt2 = hfConfig("gpt2");
    gpt2["activation_function"] = "relu";
    EXPECT_TRUE(problemAt(gpt2, "/activation_function"));
}

TEST(HfConfig, ForeignKeysAreNotErrors) {
    // rope_theta, torch_dtype, task_specific_params ... are not tessel's business.
    ProblemList problems;
    parseHuggingFaceConfig(hfConfig("gpt2"), "", problems);
    parseHuggingFaceConfig(hfConfig("qwen2-7b"), "", problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
}

} // namespace
} // namespace tessel
