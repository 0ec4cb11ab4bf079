// Sharded checkpoints: a run stopped after a checkpoint and resumed on fresh trainers gives bitwise the losses
// and parameters of an uninterrupted run (ZeRO 0-3, TP, PP, interleaving); incomplete, corrupt and foreign
// checkpoints are skipped or refused with errors that say why.
#include "executor_support.hpp"

#include "tessel/cost/errors.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace tessel::exec {
namespace {
namespace fs = std::filesystem;

using test::basePlan;

ModelConfig tinyModel() { return test::tinyModel(false); }

// What one segment of a run on fresh in-process ranks gave: the step it started at, the losses of the steps
// it ran, the full parameters at its end, and each rank's error (empty when none).
struct Segment {
    int first = 0;
    std::vector<double> losses;
    std::map<std::string, std::vector<double>> params;
    std::vector<std::string> errors;
    std::vector<bool> inputErrors;
    bool failed() const {
        for (const auto& e : errors)
            if (!e.empty()) return true;
        return false;
    }
};

// Builds new trainers, optionally restores the newest checkpoint under `dir`, runs steps up to `last` (from 0
// or the restored step) saving after every step listed in `saveAt`, then gathers the parameters.
Segment runSegment(const ModelConfig& model, const Plan& plan, const std::string& dir, bool resume, int last,
                   std::vector<int> saveAt) {
    const int world = plan.worldSize();
    Segment seg;
    seg.errors.assign(static_cast<size_t>(world), "");
    seg.inputErrors.assign(static_cast<size_t>(world), false);
    std::mutex mu;
    const std::string text = test::testText();
    const ElementType type = plan.precision == "cpu_fp32" ? ElementType::F32 : ElementType::F64;
    const auto errors = runInProcessRanks(world, [&](int r, const std::shared_ptr<InProcessWorld>& w) {
        auto comm = makeInProcessComm(w, r);
        comm->setTimeoutSeconds(60.0);
        auto backend = makeCpuBackend(type);
        ParallelContext ctx = makeContext(plan, r, *comm, model.tiedEmbeddings);
        Trainer trainer(model, ctx, *backend, TrainHyper{},
                        textDataSource(text, model.seqLen, plan.microBatch, plan.globalBatch, plan.dp, 7));
        const int first = resume ? trainer.loadCheckpoint(dir) : 0;
        std::vector<double> losses;
        for (int s = first; s < last; ++s) {
            losses.push_back(trainer.step(s).loss);
            if (std::find(saveAt.begin(), saveAt.end(), s + 1) != saveAt.end()) trainer.saveCheckpoint(dir, s + 1);
        }
        auto params = trainer.gatherFullParameters();
        std::lock_guard<std::mutex> lock(mu);
        if (r == 0) {
            seg.first = first;
            seg.losses = losses;
        }
        for (auto& [name, values] : params) seg.params[name] = values;
    });
    for (size_t r = 0; r < errors.size(); ++r) {
        if (!errors[r]) continue;
        try {
            std::rethrow_exception(errors[r]);
        } catch (const InputError& e) {
            seg.errors[r] = e.what();
            seg.inputErrors[r] = true;
        } catch (const std::exception& e) {
            seg.errors[r] = e.what();
        }
    }
    return seg;
}

std::string errorsOf(const Segment& s) {
    std::string text;
    for (size_t r = 0; r < s.errors.size(); ++r)
        if (!s.errors[r].empty()) text += "rank " + std::to_string(r) + ": " + s.errors[r] + "\n";
    return text;
}

// A fresh folder per test under the system temp folder, removed afterwards.
class CheckpointDir {
public:
    CheckpointDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = std::string(info->test_suite_name()) + "_" + info->name();
        for (char& c : name)
            if (c == '/') c = '_';
        path_ = fs::temp_directory_path() / ("tessel-checkpoint-test-" + std::to_string(::getpid()) + "-" + name);
        fs::remove_all(path_);
    }
    ~CheckpointDir() { fs::remove_all(path_); }
    std::string str() const { return path_.string(); }
    fs::path path() const { return path_; }

private:
    fs::path path_;
};

struct Case {
    std::string name;
    Plan plan;
    bool tied = false;
    bool moe = false; // tiny-moe (4 experts, top 2), short sequences
    bool dropout = false; // dropout 0.2: the resumed steps' masks from the step index, as the uninterrupted run's
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> plans() {
    std::vector<Case> cases;
    auto add = [&](std::string name, auto edit, bool tied = false) {
        Plan p = basePlan();
        edit(p);
        cases.push_back({std::move(name), p, tied});
    };
    add("one_rank", [](Plan&) {});
    add("pp2_1f1b", [](Plan& p) { p.pp = 2; p.schedule = Schedule::OneFOneB; });
    add("tp2_sp", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("tp2_sp_dropout", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    cases.back().dropout = true;
    for (int z = 0; z <= 3; ++z) add("dp2_zero" + std::to_string(z), [z](Plan& p) { p.dp = 2; p.zeroStage = z; });
    add("tp2_pp2_dp2_zero1", [](Plan& p) { p.tp = 2; p.pp = 2; p.dp = 2; p.zeroStage = 1; });
    add("pp2_interleaved_vpp2", [](Plan& p) { p.pp = 2; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    add("pp2_dp2_zero2_tied", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 2; }, true);
    add("dp2_zero3_fp32", [](Plan& p) { p.dp = 2; p.zeroStage = 3; p.precision = "cpu_fp32"; });
    add("dp1_zero2", [](Plan& p) { p.zeroStage = 2; });
    // Expert buckets: their shards over the expert data-parallel group, and its hybrid split.
    add("moe_ep2_dp4_zero1", [](Plan& p) { p.dp = 4; p.ep = 2; p.zeroStage = 1; p.globalBatch = 16; });
    cases.back().moe = true;
    add("moe_ep2_dp4_zero3_x2", [](Plan& p) { p.dp = 4; p.ep = 2; p.zeroStage = 3; p.zeroReplicas = 2; p.globalBatch = 16; });
    cases.back().moe = true;
    return cases;
}

class Resume : public ::testing::TestWithParam<Case> {};

TEST_P(Resume, IsBitwiseEqualToAnUninterruptedRun) {
    const Case& c = GetParam();
    ModelConfig model = tinyModel();
    if (c.moe) {
        model = loadModelRef("tiny-moe", "test");
        model.seqLen = 16;
    }
    model.tiedEmbeddings = c.tied;
    if (c.dropout) model.dropout = 0.2;
    CheckpointDir dir;
    const Segment whole = runSegment(model, c.plan, dir.str() + "/whole", false, 4, {});
    ASSERT_FALSE(whole.failed()) << errorsOf(whole);
    const Segment before = runSegment(model, c.plan, dir.str() + "/split", false, 2, {2});
    ASSERT_FALSE(before.failed()) << errorsOf(before);
    ASSERT_TRUE(fs::exists(dir.path() / "split" / "step-2" / "manifest.json"));
    for (int r = 0; r < c.plan.worldSize(); ++r)
        EXPECT_TRUE(fs::exists(dir.path() / "split" / "step-2" / ("rank-" + std::to_string(r) + ".bin"))) << r;
    const Segment after = runSegment(model, c.plan, dir.str() + "/split", true, 4, {});
    ASSERT_FALSE(after.failed()) << errorsOf(after);
    EXPECT_EQ(after.first, 2);
    ASSERT_EQ(whole.losses.size(), 4u);
    ASSERT_EQ(before.losses.size(), 2u);
    ASSERT_EQ(after.losses.size(), 2u);
    for (int s = 0; s < 2; ++s) EXPECT_EQ(before.losses[static_cast<size_t>(s)], whole.losses[static_cast<size_t>(s)]) << s;
    for (int s = 0; s < 2; ++s) EXPECT_EQ(after.losses[static_cast<size_t>(s)], whole.losses[static_cast<size_t>(s + 2)]) << s + 2;
    ASSERT_EQ(after.params.size(), whole.params.size());
    for (const auto& [name, values] : whole.params) {
        auto it = after.params.find(name);
        ASSERT_NE(it, after.params.end()) << name;
        EXPECT_EQ(it->second, values) << name;
    }
    EXPECT_LT(whole.losses.back(), whole.losses.front()); // it trains
}

INSTANTIATE_TEST_SUITE_P(Plans, Resume, ::testing::ValuesIn(plans()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

Plan dp2Zero1() {
    Plan p = basePlan();
    p.dp = 2;
    p.zeroStage = 1;
    return p;
}

TEST(Checkpoint, ManifestRecordsEveryShardAndOnlyTheLastTwoAreKept) {
    const ModelConfig model = tinyModel();
    const Plan plan = dp2Zero1();
    CheckpointDir dir;
    const Segment run = runSegment(model, plan, dir.str(), false, 3, {1, 2, 3});
    ASSERT_FALSE(run.failed()) << errorsOf(run);
    EXPECT_FALSE(fs::exists(dir.path() / "step-1"));
    EXPECT_TRUE(fs::exists(dir.path() / "step-2" / "manifest.json"));
    EXPECT_TRUE(fs::exists(dir.path() / "step-3" / "manifest.json"));
    EXPECT_EQ(newestCheckpointStep(dir.str()), 3);
    std::ifstream in(dir.path() / "step-3" / "manifest.json");
    const nlohmann::json man = nlohmann::json::parse(in);
    EXPECT_EQ(man["step"], 3);
    EXPECT_EQ(man["world_size"], 2);
    EXPECT_EQ(man["model_name"], "tiny");
    EXPECT_EQ(man["plan"], planToJson(plan));
    ASSERT_EQ(man["files"].size(), 2u);
    for (int r = 0; r < 2; ++r) {
        const auto& f = man["files"][static_cast<size_t>(r)];
        const fs::path file = dir.path() / "step-3" / f["file"].get<std::string>();
        EXPECT_EQ(f["rank"], r);
        EXPECT_EQ(f["bytes"].get<uintmax_t>(), fs::file_size(file));
        EXPECT_EQ(f["fnv1a64"].get<std::string>().size(), 16u);
        std::ifstream bin(file, std::ios::binary);
        char magic[8];
        bin.read(magic, 8);
        EXPECT_EQ(std::string(magic, 8), "TESSELCK");
    }
    for (const auto& entry : fs::recursive_directory_iterator(dir.path()))
        EXPECT_NE(entry.path().extension(), ".tmp") << entry.path(); // no temp file left behind
}

TEST(Checkpoint, AMissingManifestMeansThePreviousCheckpointIsUsed) {
    const ModelConfig model = tinyModel();
    const Plan plan = dp2Zero1();
    CheckpointDir dir;
    const Segment whole = runSegment(model, plan, dir.str() + "/whole", false, 4, {});
    ASSERT_FALSE(whole.failed()) << errorsOf(whole);
    const std::string split = dir.str() + "/split";
    ASSERT_FALSE(runSegment(model, plan, split, false, 3, {1, 3}).failed());
    // As if the run died after writing the shards of step 3 but before its manifest.
    fs::remove(fs::path(split) / "step-3" / "manifest.json");
    EXPECT_EQ(newestCheckpointStep(split), 1);
    const Segment after = runSegment(model, plan, split, true, 4, {});
    ASSERT_FALSE(after.failed()) << errorsOf(after);
    EXPECT_EQ(after.first, 1);
    ASSERT_EQ(after.losses.size(), 3u);
    for (size_t s = 0; s < 3; ++s) EXPECT_EQ(after.losses[s], whole.losses[s + 1]) << s + 1;
    EXPECT_EQ(after.params, whole.params);
}

TEST(Checkpoint, ResumingTwiceIsStillBitwiseEqual) {
    const ModelConfig model = tinyModel();
    Plan plan = basePlan();
    plan.pp = 2;
    plan.dp = 2;
    plan.zeroStage = 3;
    CheckpointDir dir;
    const Segment whole = runSegment(model, plan, dir.str() + "/whole", false, 4, {});
    ASSERT_FALSE(whole.failed()) << errorsOf(whole);
    const std::string split = dir.str() + "/split";
    ASSERT_FALSE(runSegment(model, plan, split, false, 1, {1}).failed());
    const Segment middle = runSegment(model, plan, split, true, 3, {3});
    ASSERT_FALSE(middle.failed()) << errorsOf(middle);
    const Segment last = runSegment(model, plan, split, true, 4, {4});
    ASSERT_FALSE(last.failed()) << errorsOf(last);
    EXPECT_EQ(middle.first, 1);
    EXPECT_EQ(last.first, 3);
    ASSERT_EQ(last.losses.size(), 1u);
    EXPECT_EQ(middle.losses, std::vector<double>(whole.losses.begin() + 1, whole.losses.begin() + 3));
    EXPECT_EQ(last.losses[0], whole.losses[3]);
    EXPECT_EQ(last.params, whole.params);
}

TEST(Checkpoint, ACorruptShardIsAnErrorNamingTheFile) {
    const ModelConfig model = tinyModel();
    const Plan plan = dp2Zero1();
    CheckpointDir dir;
    ASSERT_FALSE(runSegment(model, plan, dir.str(), false, 2, {1, 2}).failed());
    const fs::path file = dir.path() / "step-2" / "rank-1.bin";
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(fs::file_size(file) / 2));
        char c = 0;
        f.read(&c, 1);
        c = static_cast<char>(c ^ 0x10);
        f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
        f.write(&c, 1);
    }
    const Segment after = runSegment(model, plan, dir.str(), true, 3, {});
    ASSERT_TRUE(after.failed());
    for (int r = 0; r < 2; ++r) {
        const std::string& e = after.errors[static_cast<size_t>(r)];
        EXPECT_NE(e.find(file.string()), std::string::npos) << "rank " << r << ": " << e;
        EXPECT_FALSE(after.inputErrors[static_cast<size_t>(r)]) << e;
    }
    EXPECT_NE(after.errors[1].find("corrupt"), std::string::npos) << after.errors[1];
    EXPECT_NE(after.errors[1].find("checksum"), std::string::npos) << after.errors[1];
}

TEST(Checkpoint, AShardOfAnotherRankIsRefusedEvenWithAMatchingManifest) {
    const ModelConfig model = tinyModel();
    const Plan plan = dp2Zero1();
    CheckpointDir dir;
    ASSERT_FALSE(runSegment(model, plan, dir.str(), false, 1, {1}).failed());
    const fs::path stepDir = dir.path() / "step-1";
    fs::copy_file(stepDir / "rank-0.bin", stepDir / "rank-1.bin", fs::copy_options::overwrite_existing);
    nlohmann::json man;
    {
        std::ifstream in(stepDir / "manifest.json");
        man = nlohmann::json::parse(in);
    }
    man["files"][1]["bytes"] = man["files"][0]["bytes"];
    man["files"][1]["fnv1a64"] = man["files"][0]["fnv1a64"];
    std::ofstream(stepDir / "manifest.json") << man.dump(2);
    const Segment after = runSegment(model, plan, dir.str(), true, 2, {});
    ASSERT_TRUE(after.failed());
    EXPECT_NE(after.errors[1].find((stepDir / "rank-1.bin").string()), std::string::npos) << after.errors[1];
    EXPECT_NE(after.errors[1].find("holds rank 0's shard"), std::string::npos) << after.errors[1];
}

TEST(Checkpoint, APlanMismatchIsAnInputErrorNamingTheDifference) {
    const ModelConfig model = tinyModel();
    Plan tp2 = basePlan();
    tp2.tp = 2;
    Plan pp2 = basePlan();
    pp2.pp = 2;
    CheckpointDir dir;
    ASSERT_FALSE(runSegment(model, tp2, dir.str(), false, 1, {1}).failed());
    const Segment after = runSegment(model, pp2, dir.str(), true, 2, {});
    ASSERT_TRUE(after.failed());
    for (int r = 0; r < 2; ++r) {
        const std::string& e = after.errors[static_cast<size_t>(r)];
        EXPECT_TRUE(after.inputErrors[static_cast<size_t>(r)]) << e;
        EXPECT_NE(e.find("checkpoint was written by tp=2 pp=1 dp=1"), std::string::npos) << e;
        EXPECT_NE(e.find("this run is tp=1 pp=2 dp=1"), std::string::npos) << e;
    }
    // The same from the manifest alone (what `tessel run --resume` checks before starting any rank).
    try {
        checkCheckpointMatches(dir.str(), 1, model, pp2, TrainHyper{});
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("tp=2 pp=1 dp=1"), std::string::npos) << e.what();
    }
    // A ZeRO stage that differs is named too, and so is a model that differs.
    Plan tp2z1 = tp2;
    tp2z1.zeroStage = 1;
    EXPECT_THROW(checkCheckpointMatches(dir.str(), 1, model, tp2z1, TrainHyper{}), InputError);
    try {
        checkCheckpointMatches(dir.str(), 1, model, tp2z1, TrainHyper{});
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("zero_stage=0"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("zero_stage=1"), std::string::npos) << e.what();
    }
    ModelConfig wider = model;
    wider.ffnHidden = 512;
    try {
        checkCheckpointMatches(dir.str(), 1, wider, tp2, TrainHyper{});
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("ffn_hidden=256"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("ffn_hidden=512"), std::string::npos) << e.what();
    }
}

// Rewrites a checkpoint shard in the layout written before the ZeRO-1/2 value shard became transient: after
// each bucket's "...v" a "...value_shard" of as many values (a copy of v's bytes: the loader must ignore them).
// Updates the manifest's byte count and FNV-1a 64 checksum (Fowler-Noll-Vo, 64-bit offset basis and prime).
// With `claimedCount`, the legacy entries claim that many values instead (a corrupt count).
void addLegacyValueShards(const fs::path& stepDir, int rank, uint64_t claimedCount = 0) {
    const fs::path file = stepDir / ("rank-" + std::to_string(rank) + ".bin");
    std::string in;
    {
        std::ifstream f(file, std::ios::binary);
        in.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    size_t at = 0;
    auto take = [&](size_t n) { std::string s = in.substr(at, n); at += n; return s; };
    auto u32 = [](const std::string& b) { uint32_t v; std::memcpy(&v, b.data(), 4); return v; };
    auto u64 = [](const std::string& b) { uint64_t v; std::memcpy(&v, b.data(), 8); return v; };
    std::string out = take(8 + 4 * 4); // magic, version, rank, world, width
    const uint32_t width = u32(out.substr(out.size() - 4));
    out += take(8 + 8 + 8);            // fingerprint, step, Adam step
    const std::string nameLength = take(4);
    out += nameLength + take(u32(nameLength));
    const uint64_t count = u64(take(8));
    std::string body;
    uint64_t added = 0;
    for (uint64_t k = 0; k < count; ++k) {
        const std::string length = take(4);
        const std::string name = take(u32(length));
        const std::string n = take(8);
        const std::string values = take(u64(n) * width);
        body += length + name + n + values;
        if (name.size() > 2 && name.compare(name.size() - 2, 2, ".v") == 0 && name.rfind("bucket.", 0) == 0) {
            const std::string legacy = name.substr(0, name.size() - 1) + "value_shard";
            const uint32_t legacyLength = static_cast<uint32_t>(legacy.size());
            const std::string count = claimedCount ? std::string(reinterpret_cast<const char*>(&claimedCount), 8) : n;
            body += std::string(reinterpret_cast<const char*>(&legacyLength), 4) + legacy + count + values;
            ++added;
        }
    }
    ASSERT_EQ(at, in.size());
    ASSERT_GT(added, 0u);
    const uint64_t total = count + added;
    out += std::string(reinterpret_cast<const char*>(&total), 8) + body;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << out;
    uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : out) hash = (hash ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    nlohmann::json man;
    {
        std::ifstream f(stepDir / "manifest.json");
        man = nlohmann::json::parse(f);
    }
    for (auto& f : man["files"])
        if (f["rank"] == rank) {
            f["bytes"] = out.size();
            f["fnv1a64"] = std::string(hex);
        }
    std::ofstream(stepDir / "manifest.json", std::ios::trunc) << man.dump(2);
}

// Checkpoints of ZeRO-1/2 runs written before the value shard became a transient send buffer held a copy of
// every bucket's values as "...value_shard": they still resume, bitwise equal to an uninterrupted run.
TEST(Checkpoint, ALegacyZeroValueShardIsReadAndIgnored) {
    const ModelConfig model = tinyModel();
    for (int z : {1, 2}) {
        Plan plan = basePlan();
        plan.dp = 2;
        plan.zeroStage = z;
        CheckpointDir dir;
        const std::string sub = dir.str() + "/zero" + std::to_string(z);
        const Segment whole = runSegment(model, plan, sub + "/whole", false, 3, {});
        ASSERT_FALSE(whole.failed()) << errorsOf(whole);
        ASSERT_FALSE(runSegment(model, plan, sub + "/split", false, 1, {1}).failed());
        for (int r = 0; r < 2; ++r) addLegacyValueShards(fs::path(sub) / "split" / "step-1", r);
        const Segment after = runSegment(model, plan, sub + "/split", true, 3, {});
        ASSERT_FALSE(after.failed()) << "ZeRO-" << z << ": " << errorsOf(after);
        EXPECT_EQ(after.first, 1);
        EXPECT_EQ(after.losses, std::vector<double>(whole.losses.begin() + 1, whole.losses.end())) << "ZeRO-" << z;
        EXPECT_EQ(after.params, whole.params) << "ZeRO-" << z;
    }
    // A legacy entry claiming more values than any shard is an error naming it, not an allocation of 2^60.
    Plan plan = basePlan();
    plan.dp = 2;
    plan.zeroStage = 1;
    CheckpointDir dir;
    ASSERT_FALSE(runSegment(model, plan, dir.str(), false, 1, {1}).failed());
    addLegacyValueShards(dir.path() / "step-1", 0, uint64_t{1} << 60);
    const Segment bad = runSegment(model, plan, dir.str(), true, 2, {});
    ASSERT_TRUE(bad.failed());
    EXPECT_NE(bad.errors[0].find("value_shard\" has 1152921504606846976 values, more than any bucket shard"),
              std::string::npos)
        << bad.errors[0];
}

TEST(Checkpoint, NoCheckpointIsAnInputError) {
    CheckpointDir dir;
    EXPECT_EQ(newestCheckpointStep(dir.str()), -1);
    fs::create_directories(dir.path() / "step-5"); // shards without a manifest do not count
    EXPECT_EQ(newestCheckpointStep(dir.str()), -1);
    const Segment s = runSegment(tinyModel(), dp2Zero1(), dir.str(), true, 2, {});
    ASSERT_TRUE(s.failed());
    for (int r = 0; r < 2; ++r) {
        EXPECT_TRUE(s.inputErrors[static_cast<size_t>(r)]) << s.errors[static_cast<size_t>(r)];
        EXPECT_NE(s.errors[static_cast<size_t>(r)].find("no complete checkpoint"), std::string::npos);
    }
}

} // namespace
} // namespace tessel::exec
