// Loads every shipped model, cluster and plan file, checks citations and parameter counts, and keeps the
// JSON schemas in step with what the C++ writers emit.
#include "tessel/cost/cluster.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include <unistd.h>

namespace tessel {
namespace {

namespace fs = std::filesystem;

const fs::path kScenarioDir = TESSEL_SCENARIO_DIR;

// The *.json files of one scenarios/ subfolder, sorted, found at test time so a new preset is tested
// without touching this file.
std::vector<fs::path> jsonFilesIn(const std::string& kind) {
    std::vector<fs::path> files;
    const fs::path dir = kScenarioDir / kind;
    if (!fs::is_directory(dir)) return files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

std::string problemsText(const InputError& e) {
    std::string s;
    for (const auto& p : e.problems()) s += "  " + p.where + ": " + p.message + "\n";
    return s;
}

std::string testName(const ::testing::TestParamInfo<fs::path>& info) {
    std::string n = info.param.stem().string();
    std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
    return n;
}

TEST(ScenarioFiles, EveryKindHasFiles) {
    EXPECT_GE(jsonFilesIn("models").size(), 16u);
    EXPECT_GE(jsonFilesIn("clusters").size(), 4u);
    EXPECT_GE(jsonFilesIn("plans").size(), 5u);
    EXPECT_EQ(jsonFilesIn("schema").size(), 4u);
}

// ---------------------------------------------------------------- models

class ModelFile : public ::testing::TestWithParam<fs::path> {};

TEST_P(ModelFile, LoadsWithSourcesAndItsOwnName) {
    const fs::path path = GetParam();
    const nlohmann::json doc = readJsonFile(path.string());
    ModelConfig m;
    try {
        m = parseModel(doc);
    } catch (const InputError& e) {
        FAIL() << path << " does not load:\n" << problemsText(e);
    }
    EXPECT_EQ(m.name, path.stem().string()) << "a preset is found by file name, so the two must agree";
    EXPECT_FALSE(m.sources.empty()) << path << " cites no source for its shapes";
    for (const auto& s : m.sources) EXPECT_FALSE(s.empty());
    EXPECT_GT(countParameters(m).total(m.layers), 0);
    // Reachable as a preset by name.
    const auto names = presetNames("models");
    EXPECT_NE(std::find(names.begin(), names.end(), m.name), names.end());
    EXPECT_EQ(loadModelRef(m.name, "--model").hidden, m.hidden);
}

INSTANTIATE_TEST_SUITE_P(Shipped, ModelFile, ::testing::ValuesIn(jsonFilesIn("models")), testName);

// ---------------------------------------------------------------- clusters

// True when `prefix` is `pointer` or a parent of it (whole reference tokens only: "/gpu/name" does not
// cover "/gpu/name_extra").
bool pointerCovers(const std::string& prefix, const std::string& pointer) {
    if (pointer.compare(0, prefix.size(), prefix) != 0) return false;
    return pointer.size() == prefix.size() || pointer[prefix.size()] == '/';
}

// JSON pointers of every number in `doc` (the figures a cluster file must cite).
void numericLeaves(const nlohmann::json& doc, const std::string& pointer, std::vector<std::string>& out) {
    if (doc.is_object()) {
        for (auto it = doc.begin(); it != doc.end(); ++it)
            numericLeaves(it.value(), pointer + "/" + jsonPointerEscape(it.key()), out);
    } else if (doc.is_array()) {
        for (size_t i = 0; i < doc.size(); ++i) numericLeaves(doc[i], pointer + "/" + std::to_string(i), out);
    } else if (doc.is_number()) {
        out.push_back(pointer);
    }
}

class ClusterFile : public ::testing::TestWithParam<fs::path> {};

TEST_P(ClusterFile, LoadsAndNamesItself) {
    const fs::path path = GetParam();
    const nlohmann::json doc = readJsonFile(path.string());
    ClusterConfig c;
    try {
        c = parseCluster(doc);
    } catch (const InputError& e) {
        FAIL() << path << " does not load:\n" << problemsText(e);
    }
    EXPECT_EQ(c.name, path.stem().string());
    EXPECT_GT(c.gpu.memoryBytes, c.gpu.reservedBytes);
    EXPECT_TRUE(!c.gpu.gemmEfficiency.empty() || c.gpu.gemmModel) << "needs gemm_efficiency or gemm_model";
    EXPECT_EQ(loadClusterRef(c.name, "--cluster").gpu.memoryBytes, c.gpu.memoryBytes);
}

TEST_P(ClusterFile, EverySourcePointerResolves) {
    const nlohmann::json doc = readJsonFile(GetParam().string());
    ASSERT_TRUE(doc.contains("sources") && doc["sources"].is_object()) << "a cluster file must cite its figures";
    for (auto it = doc["sources"].begin(); it != doc["sources"].end(); ++it) {
        SCOPED_TRACE(it.key());
        nlohmann::json::json_pointer ptr;
        ASSERT_NO_THROW(ptr = nlohmann::json::json_pointer(it.key())) << "not a JSON pointer";
        EXPECT_TRUE(doc.contains(ptr)) << "points at nothing in this file";
        ASSERT_TRUE(it.value().is_string());
        EXPECT_FALSE(it.value().get<std::string>().empty());
    }
}

TEST_P(ClusterFile, EveryFigureIsCited) {
    const nlohmann::json doc = readJsonFile(GetParam().string());
    std::vector<std::string> leaves;
    numericLeaves(doc, "", leaves);
    // Counts that describe the shape rather than measure hardware need no citation.
    const std::set<std::string> exempt{"/schema_version", "/gpus_per_node", "/nodes"};
    for (const auto& leaf : leaves) {
        if (exempt.count(leaf) || leaf.rfind("/calibration", 0) == 0) continue;
        bool cited = false;
        for (auto it = doc["sources"].begin(); it != doc["sources"].end() && !cited; ++it)
            cited = pointerCovers(it.key(), leaf);
        EXPECT_TRUE(cited) << leaf << " has no entry in \"sources\" (nor does any parent)";
    }
}

INSTANTIATE_TEST_SUITE_P(Shipped, ClusterFile, ::testing::ValuesIn(jsonFilesIn("clusters")), testName);

TEST(ClusterSources, PointerCoverIsByWholeTokens) {
    EXPECT_TRUE(pointerCovers("/gpu", "/gpu/name"));
    EXPECT_TRUE(pointerCovers("/gpu/name", "/gpu/name"));
    EXPECT_FALSE(pointerCovers("/gpu/name", "/gpu/name_extra"));
    EXPECT_FALSE(pointerCovers("/network/intra_node", "/network/inter_node/efficiency"));
}

// ---------------------------------------------------------------- plans

class PlanFile : public ::testing::TestWithParam<fs::path> {};

TEST_P(PlanFile, LoadsAndValidates) {
    const fs::path path = GetParam();
    const nlohmann::json doc = readJsonFile(path.string());
    Scenario s;
    try {
        s = loadScenarioFile(path);
        finishScenario(s);
    } catch (const InputError& e) {
        FAIL() << path << " is not a valid scenario:\n" << problemsText(e);
    }
    EXPECT_EQ(s.name, path.stem().string());
    EXPECT_FALSE(s.description.empty());
    if (doc.contains("model") && doc["model"].is_string()) {
        EXPECT_EQ(s.model.name, doc["model"].get<std::string>());
    }
    if (doc.contains("cluster") && doc["cluster"].is_string()) {
        EXPECT_EQ(s.cluster.name, doc["cluster"].get<std::string>());
    }
    if (doc.contains("nodes")) {
        EXPECT_EQ(s.cluster.nodes, doc["nodes"].get<int>());
    }
    EXPECT_EQ(s.plan.worldSize(), s.cluster.totalGpus());
    const auto names = presetNames("plans");
    EXPECT_NE(std::find(names.begin(), names.end(), s.name), names.end());
}

INSTANTIATE_TEST_SUITE_P(Shipped, PlanFile, ::testing::ValuesIn(jsonFilesIn("plans")), testName);

TEST(PlanFiles, DefaultScenarioIsTheShippedMegatronPlan) {
    const Scenario shipped = loadScenarioFile(kScenarioDir / "plans" / "gpt3-175b-megatron.json");
    const Scenario builtIn = defaultScenario();
    EXPECT_EQ(builtIn.model.name, shipped.model.name);
    EXPECT_EQ(builtIn.cluster.name, shipped.cluster.name);
    EXPECT_EQ(builtIn.cluster.nodes, shipped.cluster.nodes);
    EXPECT_EQ(planToJson(builtIn.plan), planToJson(shipped.plan));
}

TEST(ScenarioFiles, ARelativeReferenceIsFoundBesideTheScenarioFileFirst) {
    // A scenario and the cluster file it names, copied together to a folder that is not the working directory.
    const fs::path dir = fs::temp_directory_path() / ("tessel-relative-ref-" + std::to_string(::getpid()));
    fs::create_directories(dir / "parts");
    fs::copy_file(kScenarioDir / "clusters" / "dgx-h100-80g.json", dir / "parts" / "mine.json",
                  fs::copy_options::overwrite_existing);
    {
        std::ofstream out(dir / "scenario.json");
        out << R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "parts/mine.json", "nodes": 1,
                   "plan": {"tp": 1, "pp": 1, "dp": 8, "global_batch": 8}})";
    }
    const Scenario s = loadScenarioFile(dir / "scenario.json");
    EXPECT_EQ(s.cluster.name, loadClusterRef((kScenarioDir / "clusters" / "dgx-h100-80g.json").string(), "test").name);
    EXPECT_EQ(s.model.name, "gpt3-1.3b"); // a preset name is still a preset
    // A path that is not beside it is still read from the working directory, and a missing one is named.
    std::ofstream(dir / "bad.json") << R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "parts/none.json",
                                           "plan": {}})";
    try {
        loadScenarioFile(dir / "bad.json");
        ADD_FAILURE() << "expected an error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("parts/none.json"), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
}

// A path that names no regular file says which: absent, or there but a device (before, /dev/null was said not
// to exist).
TEST(ScenarioFiles, APathThatIsNoFileSaysWhetherItIsAbsentOrNotAFile) {
    auto messageOf = [](const std::string& ref) {
        try {
            loadClusterRef(ref, "--cluster");
        } catch (const InputError& e) {
            return problemsText(e);
        }
        return std::string("loaded");
    };
    EXPECT_NE(messageOf("/dev/null").find("\"/dev/null\" is not a regular file"), std::string::npos);
    const std::string absent = (fs::temp_directory_path() / "tessel-no-such-cluster.json").string();
    EXPECT_NE(messageOf(absent).find("file \"" + absent + "\" does not exist"), std::string::npos);
}

// ---------------------------------------------------------------- parameter counts

struct ParameterSpot {
    const char* model;
    int64_t expected;
    double relativeTolerance; // 0 = exact
};

class PresetParameters : public ::testing::TestWithParam<ParameterSpot> {};

TEST_P(PresetParameters, MatchPublishedCounts) {
    const auto& spot = GetParam();
    const ModelConfig m = parseModel(readJsonFile((kScenarioDir / "models" / (std::string(spot.model) + ".json")).string()));
    const int64_t total = countParameters(m).total(m.layers);
    if (spot.relativeTolerance == 0.0) {
        EXPECT_EQ(total, spot.expected);
    } else {
        EXPECT_NEAR(static_cast<double>(total), static_cast<double>(spot.expected),
                    spot.relativeTolerance * static_cast<double>(spot.expected));
    }
}

// Exact counts of the released checkpoints (tied GPT-2 embeddings with 1024 learned positions; Mixtral
// including its routers); GPT-3 175B as the ~174.6B implied by Brown et al. 2020 Table 2.1; gpt-oss-120b as OpenAI's
// model card's 116.83 B (to its rounding; its router's biases, 4,608 parameters, are not counted).
INSTANTIATE_TEST_SUITE_P(Published, PresetParameters,
                         ::testing::Values(ParameterSpot{"gpt2-124m", 124'439'808, 0.0},
                                           ParameterSpot{"llama2-7b", 6'738'415'616, 0.0},
                                           ParameterSpot{"llama3-8b", 8'030'261'248, 0.0},
                                           ParameterSpot{"llama3-70b", 70'553'706'496, 0.0},
                                           ParameterSpot{"mixtral-8x7b", 46'702'792'704, 0.0},
                                           ParameterSpot{"deepseek-v3", 671'026'404'352, 0.0},
                                           ParameterSpot{"gemma2-9b", 9'241'705'984, 0.0},
                                           ParameterSpot{"gemma2-27b", 27'227'128'320, 0.0},
                                           ParameterSpot{"gpt3-175b", 174'600'000'000, 0.005},
                                           ParameterSpot{"gpt-oss-120b", 116'830'000'000, 0.00005}),
                         [](const ::testing::TestParamInfo<ParameterSpot>& param) {
                             std::string n = param.param.model;
                             std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                             return n;
                         });

// ---------------------------------------------------------------- schemas

nlohmann::json schema(const std::string& name) {
    return readJsonFile((kScenarioDir / "schema" / (name + ".schema.json")).string());
}

// Every key the writer emits in `written` is a property of `schemaObject` (the schema may describe more:
// optional keys the writer leaves out when they hold their default).
void expectKeysDescribed(const nlohmann::json& schemaObject, const nlohmann::json& written, const std::string& where) {
    ASSERT_TRUE(schemaObject.contains("properties")) << where << " has no properties in the schema";
    const auto& props = schemaObject["properties"];
    EXPECT_EQ(schemaObject.value("additionalProperties", true), false) << where << " must reject unknown keys";
    for (auto it = written.begin(); it != written.end(); ++it)
        EXPECT_TRUE(props.contains(it.key())) << where << ": the writer emits \"" << it.key()
                                              << "\" but the schema does not describe it";
}

TEST(Schemas, AllParseAsDraft2020_12) {
    for (const auto& path : jsonFilesIn("schema")) {
        SCOPED_TRACE(path.string());
        nlohmann::json s;
        ASSERT_NO_THROW(s = readJsonFile(path.string()));
        EXPECT_EQ(s.value("$schema", ""), "https://json-schema.org/draft/2020-12/schema");
        EXPECT_EQ(s.value("type", ""), "object");
        EXPECT_TRUE(s.contains("properties"));
    }
}

TEST(Schemas, ModelSchemaDescribesModelToJson) {
    // A model that makes the writer emit every optional key: head_dim != hidden / heads, moe, sources.
    ModelConfig m = parseModel(readJsonFile((kScenarioDir / "models" / "tiny-moe.json").string()));
    m.headDim = 32;
    m.qkNorm = true;
    m.moe->sharedFfnHidden = 64;
    m.embeddingScale = true;
    m.attentionSoftcap = 50.0;
    m.logitSoftcap = 30.0;
    const nlohmann::json written = modelToJson(m);
    ASSERT_TRUE(written.contains("head_dim") && written.contains("moe") && written.contains("sources") &&
                written.contains("qk_norm") && written.contains("embedding_scale") && written.contains("logit_softcap"));
    const nlohmann::json s = schema("model");
    expectKeysDescribed(s, written, "model");
    expectKeysDescribed(s["properties"]["moe"], written["moe"], "model/moe");
    EXPECT_TRUE(written["moe"].contains("shared_ffn_hidden"));
    // Round trip: what the writer emits loads again.
    EXPECT_NO_THROW(parseModel(written));
    // A parallel block is a dense model's (refused beside experts).
    ModelConfig dense = parseModel(readJsonFile((kScenarioDir / "models" / "tiny.json").string()));
    dense.parallelResidual = true;
    const nlohmann::json parallel = modelToJson(dense);
    ASSERT_TRUE(parallel.contains("parallel_residual"));
    expectKeysDescribed(s, parallel, "model");
    EXPECT_TRUE(parseModel(parallel).parallelResidual);
}

TEST(Schemas, ModelSchemaEnumsAreWhatTheReaderAcceptsAndTheWriterEmits) {
    // Each enum value the schema lists loads, and every kind the writer can emit is listed.
    const nlohmann::json s = schema("model");
    const nlohmann::json base = modelToJson(parseModel(readJsonFile((kScenarioDir / "models" / "tiny.json").string())));
    auto listed = [&](const char* key) { return s["properties"][key]["enum"]; };
    for (const char* key : {"activation", "norm", "position_embedding"}) {
        ASSERT_TRUE(listed(key).is_array()) << key;
        for (const auto& value : listed(key)) {
            nlohmann::json j = base;
            j[key] = value;
            EXPECT_NO_THROW(parseModel(j)) << key << " = " << value;
        }
    }
    auto emits = [&](const char* key, auto set) {
        ModelConfig m = parseModel(base);
        set(m);
        const nlohmann::json value = modelToJson(m)[key];
        const auto& values = listed(key);
        EXPECT_NE(std::find(values.begin(), values.end(), value), values.end()) << key << " = " << value;
    };
    for (auto a : {Activation::Gelu, Activation::Swiglu, Activation::SquaredRelu, Activation::Geglu})
        emits("activation", [a](ModelConfig& m) { m.activation = a; });
    for (auto n : {NormKind::LayerNorm, NormKind::RmsNorm}) emits("norm", [n](ModelConfig& m) { m.norm = n; });
    for (auto p : {PositionEmbedding::Learned, PositionEmbedding::Rope, PositionEmbedding::Alibi})
        emits("position_embedding", [p](ModelConfig& m) { m.position = p; });
}

TEST(Schemas, PlanSchemaEnumsAreWhatTheReaderAccepts) {
    // The lists the reader builds from its tables are the schema's, in full; every other listed value loads
    // without a problem at its own key (dtype beside a precision whose compute type it is).
    const nlohmann::json s = schema("plan");
    auto listed = [&](const char* key) {
        std::set<std::string> out;
        for (const auto& v : s["properties"][key]["enum"]) out.insert(v.get<std::string>());
        return out;
    };
    std::set<std::string> recipes;
    for (const auto& r : precisionRecipes()) recipes.insert(r.name);
    EXPECT_EQ(listed("precision"), recipes);
    EXPECT_EQ(listed("framework"), std::set<std::string>(frameworkNames().begin(), frameworkNames().end()));
    // The loss kernels in full (eager_16bit had been left out of the schema when it was added).
    EXPECT_EQ(listed("cross_entropy"), std::set<std::string>(crossEntropyKinds().begin(), crossEntropyKinds().end()));
    for (const char* key :
         {"pipeline_split", "recompute", "schedule", "ddp_impl", "cross_entropy", "optimizer_dtype", "half_dtype"})
        for (const auto& value : listed(key)) {
            ProblemList problems;
            parsePlan(nlohmann::json{{key, value}}, "", problems);
            for (const auto& p : problems.items()) EXPECT_NE(p.where, std::string("/") + key) << value << ": " << p.message;
        }
    for (const auto& [dtype, precision] : std::vector<std::pair<std::string, std::string>>{
             {"bf16", "megatron"}, {"fp16", "megatron"}, {"fp32", "fp32"}, {"tf32", "tf32"}, {"fp64", "cpu_fp64"}}) {
        ProblemList problems;
        parsePlan(nlohmann::json{{"dtype", dtype}, {"precision", precision}}, "", problems);
        for (const auto& p : problems.items()) EXPECT_NE(p.where, "/dtype") << dtype << ": " << p.message;
    }
    EXPECT_EQ(listed("dtype"), (std::set<std::string>{"bf16", "fp16", "fp32", "tf32", "fp64"}));
}

TEST(Schemas, ClusterSchemaDescribesClusterToJson) {
    // A switched node (NVSwitch) and a switchless mesh (the MI300X platform's mesh_links).
    for (const char* preset : {"dgx-a100-80g", "mi300x-platform"}) {
        SCOPED_TRACE(preset);
        const ClusterConfig c = parseCluster(readJsonFile((kScenarioDir / "clusters" / (std::string(preset) + ".json")).string()));
        const nlohmann::json written = clusterToJson(c);
        const nlohmann::json s = schema("cluster");
        expectKeysDescribed(s, written, "cluster");
        expectKeysDescribed(s["properties"]["gpu"], written["gpu"], "cluster/gpu");
        expectKeysDescribed(s["properties"]["network"], written["network"], "cluster/network");
        for (const char* tier : {"intra_node", "inter_node"})
            expectKeysDescribed(s["properties"]["network"]["properties"][tier], written["network"][tier],
                                std::string("cluster/network/") + tier);
        EXPECT_EQ(parseCluster(written).intraNode.meshLinks, c.intraNode.meshLinks);
    }
}

TEST(ClusterSources, AMeshIsANodesLinksAndABadCountIsNamed) {
    // mesh_links describes direct GPU links inside a node: on the inter-node tier, or negative, it is an error at
    // its pointer, not a silent cost.
    nlohmann::json doc = readJsonFile((kScenarioDir / "clusters" / "mi300x-platform.json").string());
    auto problemsAt = [](const nlohmann::json& d) {
        std::vector<std::string> where;
        try {
            parseCluster(d);
        } catch (const InputError& e) {
            for (const auto& p : e.problems()) where.push_back(p.where);
        }
        return where;
    };
    EXPECT_TRUE(problemsAt(doc).empty());
    doc["network"]["inter_node"]["mesh_links"] = 7;
    EXPECT_EQ(problemsAt(doc), std::vector<std::string>{"/network/inter_node/mesh_links"});
    doc["network"]["inter_node"].erase("mesh_links");
    doc["network"]["intra_node"]["mesh_links"] = -1;
    EXPECT_EQ(problemsAt(doc), std::vector<std::string>{"/network/intra_node/mesh_links"});
}

TEST(ClusterSources, AWorldPast2To20GpusIsRefusedAtTheCountThatMadeIt) {
    // nodes and gpus_per_node are each in range, their product is not: refused at the count, never wrapped to an int.
    auto problemsOf = [](auto&& parse) {
        std::vector<std::string> out;
        try {
            parse();
        } catch (const InputError& e) {
            for (const auto& p : e.problems()) out.push_back(p.where + ": " + p.message);
        }
        return out;
    };
    nlohmann::json cluster = readJsonFile((kScenarioDir / "clusters" / "dgx-a100-80g.json").string());
    cluster["nodes"] = kMaxClusterGpus / 8; // exactly 2^20 GPUs: still a cluster
    EXPECT_TRUE(problemsOf([&] { parseCluster(cluster); }).empty());
    cluster["nodes"] = kMaxClusterGpus / 8 + 1;
    EXPECT_EQ(problemsOf([&] { parseCluster(cluster); }),
              std::vector<std::string>{"/nodes: 131073 nodes x 8 GPUs = 1048584 GPUs, more than the 1048576 (2^20) a "
                                       "cluster may have"});
    // A scenario's own nodes and gpus_per_node: 2^20 x 2^20 GPUs would be 0 in an int; both problems say 2^40.
    const nlohmann::json scenario = nlohmann::json::parse(R"({"schema_version": 1, "model": "gpt3-1.3b",
        "cluster": "dgx-a100-80g", "nodes": 1048576, "gpus_per_node": 1048576, "plan": {"tp": 1, "pp": 1, "dp": 8,
        "global_batch": 8}})");
    const std::vector<std::string> problems = problemsOf([&] { parseScenario(scenario, "test"); });
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems[0], "test#/nodes: 1048576 nodes x 1048576 GPUs = 1099511627776 GPUs, more than the 1048576 (2^20) a "
                           "cluster may have");
    for (const auto& p : problems) EXPECT_EQ(p.find("= 0 GPUs"), std::string::npos) << p;
}

TEST(Schemas, PlanSchemaDescribesPlanToJson) {
    const nlohmann::json s = schema("plan");
    expectKeysDescribed(s, planToJson(Plan{}), "plan");
    expectKeysDescribed(s, planToJson(defaultScenario().plan), "plan (default scenario)");
    // A plan computing in fp16 (Volta) writes half_dtype beside its dtype.
    Plan fp16;
    fp16.framework.halfDtype = "fp16";
    const nlohmann::json written = planToJson(fp16);
    ASSERT_TRUE(written.contains("half_dtype"));
    expectKeysDescribed(s, written, "plan (fp16)");
    // A plan setting the optional keys the writer leaves out at their defaults: each one it writes is described
    // (the schema once lacked seven keys the reader took, and rejected files tessel accepts).
    Plan all;
    all.cp = 4;
    all.cpComm = CpComm::A2aP2p;
    all.cpA2a = 2;
    all.recompute = Recompute::Full;
    all.recomputeLayers = 1;
    all.precision = "fp8";
    all.framework.fp8Recipe = "mxfp8";
    all.framework.launchBlocking = true;
    all.framework.ncclUb = true;
    all.framework.kvReplication = true;
    // (and four more the schema lacked until 2026-12-06: the trainer-code keys KempnerForge's records state)
    all.framework.lossParallel = false;
    all.framework.vocabParallelEmbedding = false;
    all.framework.logitsHeldThroughBackward = true;
    all.framework.compileWholeModel = true;
    all.framework.repeatKv = false;
    const nlohmann::json every = planToJson(all);
    for (const char* key : {"cp_comm_type", "cp_a2a_size", "recompute_layers", "fp8_recipe", "launch_blocking", "nccl_ub",
                            "kv_replication", "loss_parallel", "vocab_parallel_embedding", "logits_held_through_backward",
                            "compile_whole_model", "repeat_kv"})
        EXPECT_TRUE(every.contains(key)) << key;
    expectKeysDescribed(s, every, "plan (optional keys)");
}

TEST(Schemas, ScenarioSchemaDescribesScenarioToJson) {
    const nlohmann::json s = schema("scenario");
    expectKeysDescribed(s, scenarioToJson(defaultScenario()), "scenario");
    for (const char* required : {"schema_version", "model", "cluster"})
        EXPECT_NE(std::find(s["required"].begin(), s["required"].end(), required), s["required"].end()) << required;
}

} // namespace
} // namespace tessel
