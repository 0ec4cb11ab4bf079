// Sharded checkpoints of one rank's training state: atomic, checksummed writes and verified resumption.
#include "tessel/exec/runtime.hpp"

#include "trainer_impl.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace tessel::exec {

// ---- Checkpoints ----
//
// dir/step-<N>/rank-<R>.bin, one per rank, little-endian:
//   "TESSELCK", u32 format version (1), u32 rank, u32 world size, u32 bytes per element of the backend's
//   element type (8 f64, 4 f32, 2 bf16),
//   u64 fingerprint (FNV-1a 64 of the plan, model and hyper-parameter JSON and the element type),
//   i64 step (the next step to run), i64 Adam step counter, string model name (u32 length + bytes),
//   u64 tensor count, then per tensor: string name, u64 element count, the raw elements at the tensor's own
//   width (in mixed precision the bf16 values and the fp32 moments and master shards differ; the element type
//   is in the fingerprint, so both sides agree on every tensor's type).
// The tensors, in order: every parameter's value ("param.<i>.<name>"; not under ZeRO-3, where only the
// shards persist); under ZeRO-0 each parameter's Adam moments ("adam_m.<i>", "adam_v.<i>", and in mixed
// precision its fp32 master "master.<i>" after them); under ZeRO >= 1
// each bucket's "bucket.<chunk>.<j>.<k>.{m,v}" and under ZeRO-3 its "...value_shard" (j: the schedule's bucket,
// or the unit under ZeRO-3), and in mixed precision its fp32 master shard "bucket.<chunk>.<j>.<k>.master" after
// them. Checkpoints written before the ZeRO-1/2 value shard became transient also hold a "...value_shard" under
// ZeRO-1/2 (a copy of the parameters' values): loading reads and ignores it.
// Gradients (and ZeRO gradient shards) are zero between steps: saving checks that and stores none of them.
// dir/step-<N>/manifest.json, written by rank 0 once every shard is on disk, marks the checkpoint complete.
namespace {
using detail::Bucket;
namespace fs = std::filesystem;

constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'L', 'C', 'K'};
constexpr uint32_t kFormatVersion = 1;
static_assert(std::endian::native == std::endian::little, "checkpoint shards are written little-endian");

uint64_t fnv1a64(const std::string& bytes) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : bytes) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return h;
}

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string rankFileName(int rank) { return "rank-" + std::to_string(rank) + ".bin"; }

std::string quoted(const fs::path& p) { return "\"" + p.string() + "\""; }

// Best effort: makes a rename in `dir` durable.
void syncDirectory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    [[maybe_unused]] const int rc = ::fsync(fd);
    ::close(fd);
}

// Writes `bytes` to `path` through `path.tmp`, fsync and a rename, so a reader sees the old file or the whole
// new one, and the new one survives a crash once this returns.
void writeDurably(const fs::path& path, const std::string& bytes) {
    const std::string tmp = path.string() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw RuntimeError("cannot write \"" + tmp + "\": " + std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            throw RuntimeError("cannot write \"" + tmp + "\": " + std::strerror(err));
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        throw RuntimeError("cannot flush \"" + tmp + "\" to disk: " + std::strerror(err));
    }
    if (::close(fd) != 0) throw RuntimeError("cannot write \"" + tmp + "\": " + std::strerror(errno));
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw RuntimeError("cannot rename \"" + tmp + "\" to " + quoted(path) + ": " + ec.message());
    syncDirectory(path.parent_path());
}

std::string readWholeFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RuntimeError("cannot read checkpoint file " + quoted(path));
    std::ostringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) throw RuntimeError("cannot read checkpoint file " + quoted(path));
    return buf.str();
}

class ByteWriter {
public:
    void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
    void u32(uint32_t v) { raw(&v, sizeof v); }
    void u64(uint64_t v) { raw(&v, sizeof v); }
    void i64(int64_t v) { raw(&v, sizeof v); }
    void str(const std::string& s) {
        u32(static_cast<uint32_t>(s.size()));
        raw(s.data(), s.size());
    }
    std::string& bytes() { return out_; }

private:
    std::string out_;
};

class ByteReader {
public:
    ByteReader(const std::string& in, fs::path path) : in_(in), path_(std::move(path)) {}
    [[noreturn]] void fail(const std::string& why) const {
        throw RuntimeError("checkpoint file " + quoted(path_) + " is invalid: " + why);
    }
    void raw(void* p, size_t n) {
        if (in_.size() - at_ < n) fail("it ends early (at byte " + std::to_string(at_) + ")");
        std::memcpy(p, in_.data() + at_, n);
        at_ += n;
    }
    uint32_t u32() { uint32_t v; raw(&v, sizeof v); return v; }
    uint64_t u64() { uint64_t v; raw(&v, sizeof v); return v; }
    int64_t i64() { int64_t v; raw(&v, sizeof v); return v; }
    std::string str() {
        const uint32_t n = u32();
        if (in_.size() - at_ < n) fail("it ends early (at byte " + std::to_string(at_) + ")");
        std::string s = in_.substr(at_, n);
        at_ += n;
        return s;
    }
    bool atEnd() const { return at_ == in_.size(); }

private:
    const std::string& in_;
    fs::path path_;
    size_t at_ = 0;
};

nlohmann::json hyperToJson(const TrainHyper& h) {
    return {{"learning_rate", h.learningRate}, {"beta1", h.beta1},         {"beta2", h.beta2},
            {"eps", h.eps},                    {"weight_decay", h.weightDecay}, {"clip_norm", h.clipNorm},
            {"seed", h.seed}};
}

std::string elementName(ElementType t) { return toString(t); }

// A tensor's values (as downloaded, float64) at the width of its element type.
void writeValues(ByteWriter& w, const std::vector<double>& values, ElementType type) {
    switch (type) {
    case ElementType::F64: w.raw(values.data(), values.size() * sizeof(double)); return;
    case ElementType::F32: {
        const std::vector<float> narrow(values.begin(), values.end()); // exact: the values are floats
        w.raw(narrow.data(), narrow.size() * sizeof(float));
        return;
    }
    case ElementType::Bf16: {
        std::vector<uint16_t> narrow(values.size());
        for (size_t i = 0; i < values.size(); ++i) narrow[i] = narrowToBf16(static_cast<float>(values[i]));
        w.raw(narrow.data(), narrow.size() * sizeof(uint16_t));
        return;
    }
    }
}

std::vector<double> readValues(ByteReader& r, uint64_t n, ElementType type) {
    std::vector<double> v(n);
    switch (type) {
    case ElementType::F64: r.raw(v.data(), n * sizeof(double)); break;
    case ElementType::F32: {
        std::vector<float> narrow(n);
        r.raw(narrow.data(), n * sizeof(float));
        v.assign(narrow.begin(), narrow.end());
        break;
    }
    case ElementType::Bf16: {
        std::vector<uint16_t> narrow(n);
        r.raw(narrow.data(), n * sizeof(uint16_t));
        for (size_t i = 0; i < n; ++i) v[i] = widenBf16(narrow[i]);
        break;
    }
    }
    return v;
}

uint64_t fingerprint(const ModelConfig& model, const Plan& plan, const TrainHyper& hyper, ElementType type) {
    return fnv1a64(planToJson(plan).dump() + "\n" + modelToJson(model).dump() + "\n" + hyperToJson(hyper).dump() +
                   "\n" + elementName(type));
}

// Keys of two objects whose values differ (in the first's order, then keys only the second has).
std::vector<std::string> differingKeys(const nlohmann::json& a, const nlohmann::json& b) {
    std::vector<std::string> keys;
    if (!a.is_object() || !b.is_object()) return keys;
    for (const auto& [k, v] : a.items())
        if (!b.contains(k) || b.at(k) != v) keys.push_back(k);
    for (const auto& [k, v] : b.items())
        if (!a.contains(k)) keys.push_back(k);
    return keys;
}

std::string valueText(const nlohmann::json& j, const std::string& key) {
    if (!j.is_object() || !j.contains(key)) return "(none)";
    const nlohmann::json& v = j.at(key);
    return v.is_string() ? v.get<std::string>() : v.dump();
}

// "k1=v1 k2=v2" over `always` and then the differing keys not already listed.
std::string describe(const nlohmann::json& j, std::vector<std::string> always, const std::vector<std::string>& diff) {
    for (const auto& k : diff)
        if (std::find(always.begin(), always.end(), k) == always.end()) always.push_back(k);
    std::string text;
    for (const auto& k : always) text += (text.empty() ? "" : " ") + k + "=" + valueText(j, k);
    return text;
}

nlohmann::json readManifest(const fs::path& path) {
    const std::string text = readWholeFile(path);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw RuntimeError("checkpoint manifest " + quoted(path) + " is not a JSON object");
    for (const char* key : {"format", "format_version", "step", "world_size", "plan", "model", "hyper", "files"})
        if (!j.contains(key)) throw RuntimeError("checkpoint manifest " + quoted(path) + " lacks \"" + key + "\"");
    return j;
}

// N of a folder named step-<N> (at most 9 digits), or -1.
int stepOfFolder(const fs::path& path) {
    const std::string name = path.filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 14 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos)
        return -1;
    return std::atoi(name.c_str() + 5);
}

// Deletes what an older checkpoint left under `dir` once `keepStep`'s is complete: every step-<N> folder with
// N < keepStep except the newest complete one among them. Later steps are left alone. Best effort.
void pruneCheckpoints(const fs::path& dir, int keepStep) {
    std::error_code ec;
    std::vector<std::pair<int, bool>> older; // (step, complete)
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const int step = stepOfFolder(entry.path());
        if (step >= 0 && step < keepStep && entry.is_directory(ec)) older.emplace_back(step, fs::is_regular_file(entry.path() / "manifest.json", ec));
    }
    int previous = -1;
    for (const auto& [step, complete] : older)
        if (complete) previous = std::max(previous, step);
    for (const auto& [step, complete] : older)
        if (step != previous) fs::remove_all(fs::path(checkpointStepDir(dir.string(), step)), ec);
}
} // namespace

std::string checkpointStepDir(const std::string& dir, int step) {
    return (fs::path(dir) / ("step-" + std::to_string(step))).string();
}

int newestCheckpointStep(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return -1;
    int newest = -1;
    fs::directory_iterator it(dir, ec);
    if (ec) throw RuntimeError("cannot list the checkpoint folder \"" + dir + "\": " + ec.message());
    for (const auto& entry : it) {
        const int step = stepOfFolder(entry.path());
        if (step >= 0 && fs::is_regular_file(entry.path() / "manifest.json", ec)) newest = std::max(newest, step);
    }
    return newest;
}

void checkCheckpointMatches(const std::string& dir, int step, const ModelConfig& model, const Plan& plan,
                            const TrainHyper& hyper) {
    const fs::path path = fs::path(checkpointStepDir(dir, step)) / "manifest.json";
    const nlohmann::json man = readManifest(path);
    const std::string where = path.string();
    if (man["format"] != "tessel-checkpoint" || man["format_version"] != kFormatVersion)
        throw InputError(where, "not a tessel checkpoint of format version " + std::to_string(kFormatVersion) +
                                    " (format " + valueText(man, "format") + ", version " +
                                    valueText(man, "format_version") + ")");
    if (man["step"] != step)
        throw InputError(where, "the manifest is of step " + valueText(man, "step") + ", its folder says " +
                                    std::to_string(step));
    const nlohmann::json planNow = planToJson(plan);
    if (man["world_size"] != plan.worldSize() || man["plan"] != planNow) {
        const auto diff = differingKeys(man["plan"], planNow);
        throw InputError(where, "checkpoint was written by " + describe(man["plan"], {"tp", "pp", "dp"}, diff) + " (" +
                                    valueText(man, "world_size") + " ranks), this run is " +
                                    describe(planNow, {"tp", "pp", "dp"}, diff) + " (" +
                                    std::to_string(plan.worldSize()) + " ranks); resuming needs the same plan");
    }
    const nlohmann::json modelNow = modelToJson(model);
    if (man["model"] != modelNow) {
        const auto diff = differingKeys(man["model"], modelNow);
        throw InputError(where, "checkpoint was written for model " + describe(man["model"], {"name"}, diff) +
                                    ", this run trains " + describe(modelNow, {"name"}, diff));
    }
    const nlohmann::json hyperNow = hyperToJson(hyper);
    if (man["hyper"] != hyperNow) {
        const auto diff = differingKeys(man["hyper"], hyperNow);
        throw InputError(where, "checkpoint was written with " + describe(man["hyper"], {}, diff) + ", this run uses " +
                                    describe(hyperNow, {}, diff));
    }
}

namespace {
// Every tensor of one rank's training state that a checkpoint holds, in file order, with its name.
std::vector<std::pair<std::string, Tensor*>> stateTensors(GptModel& gpt, int zeroStage,
                                                          std::map<int, std::pair<Tensor, Tensor>>& moments,
                                                          std::map<int, Tensor>& masters,
                                                          std::map<std::pair<int, int>, std::vector<Bucket>>& buckets) {
    std::vector<std::pair<std::string, Tensor*>> out;
    auto& params = gpt.parameters();
    if (zeroStage < 3) // under ZeRO-3 the value shards are the only copy of the parameters
        for (size_t i = 0; i < params.size(); ++i)
            out.emplace_back("param." + std::to_string(i) + "." + params[i].info.name, &params[i].value);
    if (zeroStage == 0) {
        for (auto& [i, mv] : moments) {
            out.emplace_back("adam_m." + std::to_string(i), &mv.first);
            out.emplace_back("adam_v." + std::to_string(i), &mv.second);
            if (auto it = masters.find(i); it != masters.end()) out.emplace_back("master." + std::to_string(i), &it->second);
        }
    } else {
        for (auto& [key, list] : buckets)
            for (size_t k = 0; k < list.size(); ++k) {
                const std::string prefix =
                    "bucket." + std::to_string(key.first) + "." + std::to_string(key.second) + "." + std::to_string(k) + ".";
                out.emplace_back(prefix + "m", &list[k].m);
                out.emplace_back(prefix + "v", &list[k].v);
                if (zeroStage >= 3) out.emplace_back(prefix + "value_shard", &list[k].valueShard);
                if (list[k].master.defined()) out.emplace_back(prefix + "master", &list[k].master);
            }
    }
    return out;
}

// Runs `work` on every rank of the world and agrees on the outcome, so that no rank goes on to wait in a
// collective for a rank that failed: when `work` threw anywhere, every rank throws (a failing rank its own
// error, the others a RuntimeError built by `othersFailed` from the failing ranks). `work` fills its share
// of a payload of `payloadSize` values, summed over the world and returned.
std::vector<double> agreeOnOutcome(const ParallelContext& ctx, size_t payloadSize,
                                   const std::function<void(std::vector<double>&)>& work,
                                   const std::function<std::string(const std::vector<int>&)>& othersFailed) {
    const size_t world = static_cast<size_t>(ctx.world.size());
    std::vector<double> payload(payloadSize, 0.0);
    std::exception_ptr error;
    try {
        work(payload);
    } catch (...) {
        error = std::current_exception();
    }
    std::vector<double> buf(world, 0.0);
    buf[static_cast<size_t>(ctx.world.myIndex)] = error ? 1.0 : 0.0;
    buf.insert(buf.end(), payload.begin(), payload.end());
    const std::vector<double> total = ctx.comm->allReduceHost(buf, ctx.world);
    if (error) std::rethrow_exception(error);
    std::vector<int> failed;
    for (size_t r = 0; r < world; ++r)
        if (total[r] != 0.0) failed.push_back(ctx.world.ranks[r]);
    if (!failed.empty()) throw RuntimeError(othersFailed(failed));
    return {total.begin() + static_cast<std::ptrdiff_t>(world), total.end()};
}

std::string rankList(const std::vector<int>& ranks) {
    std::string text;
    for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return (ranks.size() == 1 ? "rank " : "ranks ") + text;
}
} // namespace

void Trainer::saveCheckpoint(const std::string& dir, int nextStep) {
    Impl& m = *impl_;
    const fs::path stepDir = checkpointStepDir(dir, nextStep);
    const int world = m.ctx.world.size();
    const int me = m.ctx.world.myIndex;
    auto failedOn = [&](const std::vector<int>& ranks) {
        return "cannot save checkpoint " + quoted(stepDir) + ": it failed on " + rankList(ranks);
    };
    // 1. Between steps only; rank 0 invalidates an earlier checkpoint of this step before any of its shards
    // is replaced.
    agreeOnOutcome(m.ctx, 0, [&](std::vector<double>&) {
        if (m.gpt.liveActivationSets() != 0)
            throw RuntimeError("saveCheckpoint: rank " + std::to_string(m.ctx.rank) +
                               " holds activations of a step in progress; save between steps");
        for (auto& p : m.gpt.parameters())
            if (p.grad.defined() && m.be.sumSquares(p.grad) != 0.0)
                throw RuntimeError("saveCheckpoint: rank " + std::to_string(m.ctx.rank) + "'s gradient of " + p.info.name +
                                   " is not zero; save between steps");
        for (auto& [key, list] : m.buckets)
            for (Bucket& bk : list)
                if (bk.gradShard.defined() && m.be.sumSquares(bk.gradShard) != 0.0)
                    throw RuntimeError("saveCheckpoint: rank " + std::to_string(m.ctx.rank) +
                                       " holds a gradient shard that is not zero; save between steps");
        std::error_code ec;
        fs::create_directories(stepDir, ec);
        if (!fs::is_directory(stepDir, ec)) throw RuntimeError("cannot create " + quoted(stepDir) + ": " + ec.message());
        if (m.ctx.rank == 0) {
            fs::remove(stepDir / "manifest.json", ec);
            if (ec) throw RuntimeError("cannot remove " + quoted(stepDir / "manifest.json") + ": " + ec.message());
            syncDirectory(stepDir);
            syncDirectory(dir);
        }
    }, failedOn);
    // 2. Every rank writes its own shard; sizes and checksums (as four exact 16-bit pieces) reach rank 0.
    const std::vector<double> info = agreeOnOutcome(m.ctx, static_cast<size_t>(world) * 5, [&](std::vector<double>& out) {
        ByteWriter w;
        w.raw(kMagic, sizeof kMagic);
        w.u32(kFormatVersion);
        w.u32(static_cast<uint32_t>(m.ctx.rank));
        w.u32(static_cast<uint32_t>(world));
        w.u32(static_cast<uint32_t>(elementBytes(m.be.elementType())));
        w.u64(fingerprint(m.model, m.ctx.plan, m.hyper, m.be.elementType()));
        w.i64(nextStep);
        w.i64(m.adamStep);
        w.str(m.model.name);
        const auto tensors = stateTensors(m.gpt, m.ctx.plan.zeroStage, m.moments, m.masters, m.buckets);
        w.u64(tensors.size());
        for (const auto& [name, t] : tensors) {
            w.str(name);
            const std::vector<double> values = m.be.download(*t);
            w.u64(values.size());
            writeValues(w, values, t->type());
        }
        writeDurably(stepDir / rankFileName(m.ctx.rank), w.bytes());
        const uint64_t sum = fnv1a64(w.bytes());
        double* slot = out.data() + static_cast<size_t>(me) * 5;
        slot[0] = static_cast<double>(w.bytes().size());
        for (int k = 0; k < 4; ++k) slot[1 + k] = static_cast<double>((sum >> (16 * k)) & 0xffffULL);
    }, failedOn);
    // 3. Rank 0 writes the manifest, which completes the checkpoint, then drops the older ones.
    agreeOnOutcome(m.ctx, 0, [&](std::vector<double>&) {
        if (m.ctx.rank != 0) return;
        nlohmann::json files = nlohmann::json::array();
        for (int r = 0; r < world; ++r) {
            const double* slot = info.data() + static_cast<size_t>(r) * 5;
            uint64_t sum = 0;
            for (int k = 0; k < 4; ++k) sum |= static_cast<uint64_t>(slot[1 + k]) << (16 * k);
            const int rank = m.ctx.world.ranks[static_cast<size_t>(r)];
            files.push_back({{"rank", rank},
                             {"file", rankFileName(rank)},
                             {"bytes", static_cast<int64_t>(slot[0])},
                             {"fnv1a64", hex64(sum)}});
        }
        const nlohmann::json manifest{{"format", "tessel-checkpoint"},
                                      {"format_version", kFormatVersion},
                                      {"step", nextStep},
                                      {"world_size", world},
                                      {"model_name", m.model.name},
                                      {"element_type", elementName(m.be.elementType())},
                                      {"adam_step", m.adamStep},
                                      {"plan", planToJson(m.ctx.plan)},
                                      {"model", modelToJson(m.model)},
                                      {"hyper", hyperToJson(m.hyper)},
                                      {"files", files}};
        writeDurably(stepDir / "manifest.json", manifest.dump(2) + "\n");
        pruneCheckpoints(dir, nextStep);
    }, failedOn);
}

int Trainer::loadCheckpoint(const std::string& dir) {
    Impl& m = *impl_;
    // Rank 0 picks the checkpoint, so every rank restores the same one.
    const std::vector<double> picked = agreeOnOutcome(m.ctx, 1, [&](std::vector<double>& out) {
        if (m.ctx.rank == 0) out[0] = newestCheckpointStep(dir);
    }, [&](const std::vector<int>& ranks) { return "cannot look for checkpoints in \"" + dir + "\": it failed on " + rankList(ranks); });
    const int step = static_cast<int>(picked[0]);
    if (step < 0)
        throw InputError(dir, "no complete checkpoint here (a step-<N> folder holding manifest.json) to resume from");
    const fs::path stepDir = checkpointStepDir(dir, step);
    const auto tensors = stateTensors(m.gpt, m.ctx.plan.zeroStage, m.moments, m.masters, m.buckets);
    std::vector<std::vector<double>> values;
    int64_t adamStep = 0;
    // Every rank verifies and parses its shard before any rank restores anything.
    agreeOnOutcome(m.ctx, 0, [&](std::vector<double>&) {
        checkCheckpointMatches(dir, step, m.model, m.ctx.plan, m.hyper);
        const nlohmann::json manifest = readManifest(stepDir / "manifest.json");
        if (manifest.value("element_type", "") != elementName(m.be.elementType()))
            throw InputError((stepDir / "manifest.json").string(),
                             "checkpoint holds " + valueText(manifest, "element_type") + " values, this run's backend is " +
                                 elementName(m.be.elementType()));
        const fs::path path = stepDir / rankFileName(m.ctx.rank);
        const nlohmann::json* entry = nullptr;
        for (const auto& f : manifest["files"])
            if (f.is_object() && f.value("rank", -1) == m.ctx.rank) entry = &f;
        if (!entry || !entry->contains("bytes") || !entry->contains("fnv1a64"))
            throw RuntimeError("checkpoint manifest " + quoted(stepDir / "manifest.json") + " lists no file for rank " +
                               std::to_string(m.ctx.rank));
        if (!fs::exists(path)) throw RuntimeError("checkpoint file " + quoted(path) + " is missing");
        const std::string bytes = readWholeFile(path);
        if (static_cast<double>(bytes.size()) != (*entry)["bytes"].get<double>())
            throw RuntimeError("checkpoint file " + quoted(path) + " is corrupt: it has " + std::to_string(bytes.size()) +
                               " bytes, the manifest says " + (*entry)["bytes"].dump());
        const std::string sum = hex64(fnv1a64(bytes));
        if (sum != (*entry)["fnv1a64"].get<std::string>())
            throw RuntimeError("checkpoint file " + quoted(path) + " is corrupt: its FNV-1a 64 checksum is " + sum +
                               ", the manifest says " + (*entry)["fnv1a64"].get<std::string>());
        ByteReader r(bytes, path);
        char magic[sizeof kMagic];
        r.raw(magic, sizeof magic);
        if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) r.fail("it is not a tessel checkpoint shard");
        if (const uint32_t v = r.u32(); v != kFormatVersion)
            r.fail("format version " + std::to_string(v) + ", this tessel reads " + std::to_string(kFormatVersion));
        if (const uint32_t v = r.u32(); v != static_cast<uint32_t>(m.ctx.rank))
            r.fail("it holds rank " + std::to_string(v) + "'s shard, not rank " + std::to_string(m.ctx.rank) + "'s");
        if (const uint32_t v = r.u32(); v != static_cast<uint32_t>(m.ctx.world.size()))
            r.fail("it was written by " + std::to_string(v) + " ranks, this run has " + std::to_string(m.ctx.world.size()));
        const uint32_t width = r.u32();
        if (width != static_cast<uint32_t>(elementBytes(m.be.elementType())))
            r.fail("it holds " + std::to_string(width) + "-byte values, this run's backend uses " +
                   std::to_string(elementBytes(m.be.elementType())));
        if (r.u64() != fingerprint(m.model, m.ctx.plan, m.hyper, m.be.elementType()))
            r.fail("it was written by another plan, model or hyper-parameters than this run's");
        if (const int64_t v = r.i64(); v != step)
            r.fail("it holds step " + std::to_string(v) + ", its folder is step " + std::to_string(step));
        adamStep = r.i64();
        if (adamStep < 0) r.fail("negative Adam step " + std::to_string(adamStep));
        if (const std::string name = r.str(); name != m.model.name)
            r.fail("it holds model \"" + name + "\", this run trains \"" + m.model.name + "\"");
        const uint64_t count = r.u64();
        int64_t largestShard = 0;
        for (const auto& [key, list] : m.buckets)
            for (const Bucket& bk : list) largestShard = std::max(largestShard, bk.shard);
        values.resize(tensors.size());
        size_t i = 0; // the next expected tensor
        for (uint64_t k = 0; k < count; ++k) {
            const std::string name = r.str();
            const bool legacyValueShard = m.ctx.plan.zeroStage < 3 && name.size() > 12 &&
                                          name.compare(name.size() - 12, 12, ".value_shard") == 0;
            if (legacyValueShard && (i == tensors.size() || name != tensors[i].first)) {
                // See the format note. It held one bucket's shard: no more values than the largest shard.
                const uint64_t n = r.u64();
                if (n > static_cast<uint64_t>(largestShard))
                    r.fail("\"" + name + "\" has " + std::to_string(n) + " values, more than any bucket shard (" +
                           std::to_string(largestShard) + ")");
                (void)readValues(r, n, m.be.elementTypeFor(MemoryCategory::Buffers));
                continue;
            }
            if (i == tensors.size())
                r.fail("it holds " + std::to_string(count) + " tensors, more than the " + std::to_string(tensors.size()) +
                       " this rank has");
            if (name != tensors[i].first) r.fail("tensor " + std::to_string(k) + " is \"" + name + "\", expected \"" + tensors[i].first + "\"");
            const uint64_t n = r.u64();
            if (n != static_cast<uint64_t>(tensors[i].second->numel()))
                r.fail("\"" + name + "\" has " + std::to_string(n) + " values, expected " +
                       std::to_string(tensors[i].second->numel()));
            values[i] = readValues(r, n, tensors[i].second->type());
            ++i;
        }
        if (i != tensors.size())
            r.fail("it holds " + std::to_string(i) + " of the " + std::to_string(tensors.size()) + " tensors this rank has");
        if (!r.atEnd()) r.fail("it has bytes after its last tensor");
    }, [&](const std::vector<int>& ranks) {
        std::string files;
        for (int r : ranks) files += (files.empty() ? "" : ", ") + quoted(stepDir / rankFileName(r));
        return "cannot resume from checkpoint " + quoted(stepDir) + ": " + rankList(ranks) + " could not load " + files;
    });
    for (size_t i = 0; i < tensors.size(); ++i) m.be.upload(values[i], *tensors[i].second);
    m.adamStep = adamStep;
    return step;
}

} // namespace tessel::exec
