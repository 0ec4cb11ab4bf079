// One rank's training step: the stage's action list from the simulator, executed in order — compute through
// the GPT model, pipeline transfers, data-parallel gradient buckets (ZeRO 0-3), AdamW with global-norm clipping;
// and the rank's shard of sharded, atomically written checkpoints.
#include "tessel/exec/runtime.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace tessel::exec {

namespace {
using Clock = std::chrono::steady_clock;

// Tags of pipeline messages: distinct per (direction, micro-batch, chunk) so transfers can never pair up
// wrongly whatever the order in which two stages post them (MPI's tag space is at least 32767).
int transferTag(bool grad, int mb, int chunk, int vpp) { return ((mb * vpp + chunk) * 2 + (grad ? 1 : 0)) % 32000; }

// A ZeRO bucket: the flattened gradients (and, under ZeRO >= 1, the optimizer state) of a set of parameters,
// sharded over the data-parallel group: member i owns elements [i * shard, (i + 1) * shard) of the flat
// buffer padded to a multiple of the group size.
struct Bucket {
    std::vector<int> params;
    int64_t flat = 0;
    int64_t shard = 0;
    Tensor gradShard;   // [shard, 1] reduced gradient shard where gradients accumulate (ZeRO-2/3, Grads). Under
                        // ZeRO-1 the reduced shard is written back into the full gradients' own elements.
    Tensor valueShard;  // [shard, 1] the parameters' only persistent copy (ZeRO-3, Weights). Under ZeRO-1/2 the
                        // optimizer updates the full values' own elements of the shard in place.
    Tensor m, v;        // [shard, 1] Adam moments of the shard (ZeRO >= 1)
    Tensor master;      // [shard, 1] fp32 master values of the shard (ZeRO >= 1, mixed precision only; Optimizer)
};

// Storage inside another tensor's: a parameter's full value as a piece of the flat buffer its bucket was
// gathered into (DeepSpeed's ZeRO-3 parameters are likewise narrow views of the gathered flat buffer). It
// counts no bytes of its own and keeps the flat buffer alive.
struct AliasStorage : Storage {
    AliasStorage(const Tensor& whole, void* data, int64_t bytes)
        : Storage(nullptr, data, bytes, whole.category()), owner(whole) {}
    Tensor owner;
};

// Elements [offset, offset + numel(shape)) of `flat` seen as a tensor of `shape`.
Tensor aliasElements(const Tensor& flat, int64_t offset, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (offset < 0 || offset + n > flat.numel())
        throw RuntimeError("alias of elements [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                           ") outside a tensor " + flat.shapeString());
    const int64_t width = elementBytes(flat.type());
    auto storage = std::make_shared<AliasStorage>(flat, flat.data<char>() + offset * width, n * width);
    return Tensor(std::move(storage), std::move(shape), flat.type());
}
} // namespace

struct Trainer::Impl : ParameterResidency {
    ModelConfig model;
    ParallelContext ctx;
    Backend& be;
    TrainHyper hyper;
    DataSource data;
    GptModel gpt;
    sim::ActionSchedule schedule;
    const sim::StageSchedule* mine = nullptr;
    // (chunk, schedule bucket) -> the buckets reduced by that action. A tied word embedding shared by the
    // first and last stage gets a bucket of its own on both, so the two stages' shards line up element by
    // element and the embedding-gradient all-reduce can sum them under any ZeRO stage.
    std::map<std::pair<int, int>, std::vector<Bucket>> buckets;
    std::map<int, std::pair<Tensor, Tensor>> moments;       // ZeRO-0: parameter -> (m, v)
    std::map<int, Tensor> masters;                          // ZeRO-0 in mixed precision: parameter -> fp32 master
    int64_t adamStep = 0;
    Clock::time_point runStart = Clock::now(); // records are timed from here, so steps follow each other
    // A device-timed backend's region starts count from its first region; that region's launch, on the host
    // clock since runStart, places them on the records' time axis (-1 until the first region).
    double deviceOriginSeconds = -1.0;
    std::array<int, 3> embeddingBucket{-1, -1, -1}; // (chunk, schedule bucket, index) of the tied embedding

    // ZeRO-3: buckets are the model's units (embedding, layer, head; ParameterResidency), keyed (chunk, unit);
    // a unit's full values exist only from the gather before its use to its release after it, one unit ahead
    // prefetched. `unitBuckets` gives the buckets holding a unit's parameters (a tied embedding on a rank
    // holding both ends lies in the embedding's bucket and is gathered with the head too).
    struct Resident {
        int chunk = 0, unit = 0;
        std::vector<std::pair<Bucket*, Tensor>> flats; // bucket -> its gathered [shard x members, 1] values
    };
    std::map<std::pair<int, int>, std::vector<Bucket*>> unitBuckets;
    std::map<int, int> unitCount;                   // chunk -> units
    std::list<Resident> resident;                   // oldest first; at most the unit in use and the next
    int64_t gatheredBytes = 0, gatheredPeakBytes = 0; // bytes of the resident gathered buffers (Buffers)

    Impl(const ModelConfig& m, const ParallelContext& c, Backend& b, const TrainHyper& hp, DataSource d)
        : model(m), ctx(c), be(b), hyper(hp), data(std::move(d)), gpt(m, c, b, hp.seed) {
        schedule = sim::buildSchedule(model, ctx.plan);
        mine = &schedule.forRank(ctx.rank);
        const int dpSize = shardGroup().size();
        auto makeBucket = [&](std::vector<int> params) {
            Bucket bk;
            bk.params = std::move(params);
            for (int p : bk.params) bk.flat += gpt.parameters()[static_cast<size_t>(p)].value.numel();
            bk.shard = (bk.flat + dpSize - 1) / dpSize;
            if (ctx.plan.zeroStage >= 1) {
                // Under ZeRO-2/3 the gradient shard is where gradients accumulate, and under ZeRO-3 the value
                // shard is the parameters' only copy: both persist. Under ZeRO-1 the full gradients and under
                // ZeRO-1/2 the full values hold the shard in place (their elements [lo, lo + shard) of the
                // bucket's flat order), as Megatron's distributed optimizer keeps shards as views of its grad
                // and param buffers: no shard-sized copy persists (readShard/writeShard, optimizerStep).
                if (ctx.plan.zeroStage >= 2) bk.gradShard = be.zeros({bk.shard, 1}, MemoryCategory::Grads);
                bk.m = be.zeros({bk.shard, 1}, MemoryCategory::Optimizer);
                bk.v = be.zeros({bk.shard, 1}, MemoryCategory::Optimizer);
                if (ctx.plan.zeroStage >= 3) bk.valueShard = be.zeros({bk.shard, 1}, MemoryCategory::Weights);
            }
            return bk;
        };
        auto addBuckets = [&](int chunk, int j, const std::vector<int>& params) {
            std::vector<int> plain, shared;
            for (int p : params) {
                const ParamInfo& info = gpt.parameters()[static_cast<size_t>(p)].info;
                const bool tiedShared = ctx.embedding.size() > 1 && !info.pieces.empty() &&
                                        info.pieces.front().fullName == "wte";
                (tiedShared ? shared : plain).push_back(p);
            }
            if (plain.empty() && shared.empty()) return;
            auto& list = buckets[{chunk, j}];
            if (!plain.empty()) list.push_back(makeBucket(plain));
            if (!shared.empty()) {
                list.push_back(makeBucket(shared));
                embeddingBucket = {chunk, j, static_cast<int>(list.size()) - 1};
            }
        };
        for (int chunk = 0; chunk < gpt.chunks(); ++chunk) {
            if (ctx.plan.zeroStage >= 3) {
                const std::vector<std::vector<int>> units = gpt.parameterUnits(chunk);
                std::set<int> placed;
                for (int k = 0; k < static_cast<int>(units.size()); ++k) {
                    std::vector<int> fresh;
                    for (int p : units[static_cast<size_t>(k)])
                        if (placed.insert(p).second) fresh.push_back(p);
                    addBuckets(chunk, k, fresh);
                }
                unitCount[chunk] = static_cast<int>(units.size());
                for (int k = 0; k < static_cast<int>(units.size()); ++k) {
                    auto& holders = unitBuckets[{chunk, k}];
                    for (int p : units[static_cast<size_t>(k)])
                        for (auto& [key, list] : buckets)
                            for (Bucket& bk : list)
                                if (key.first == chunk && std::count(bk.params.begin(), bk.params.end(), p) != 0 &&
                                    std::find(holders.begin(), holders.end(), &bk) == holders.end())
                                    holders.push_back(&bk);
                }
            } else {
                for (int j = 0; j < gpt.bucketsPerChunk(); ++j) addBuckets(chunk, j, gpt.bucketParameters(chunk, j, false));
            }
        }
        if (ctx.plan.zeroStage >= 1 && mixedPrecision()) {
            // Mixed precision (Micikevicius et al. 2018): the weights are bf16, so the optimizer updates an fp32
            // master copy of this rank's shard and rounds the result into the bf16 value shard. Under ZeRO-0 the
            // backend keeps a master per parameter itself (adamw on a bf16 parameter with fp32 moments), but
            // here adamw sees only transient row temporaries, so the master must persist here. It is made from
            // the initial values (still resident: ZeRO-3 drops them just below) and counted under Optimizer,
            // which gives the mixed recipe's 4 B/param of master weights.
            const int64_t lo0 = static_cast<int64_t>(shardGroup().myIndex);
            for (auto& [key, list] : buckets)
                for (Bucket& bk : list) {
                    bk.master = be.empty({bk.shard, 1}, MemoryCategory::Optimizer);
                    be.copyRows(flatten(bk, true, MemoryCategory::Buffers), lo0 * bk.shard, bk.master);
                }
        }
        if (ctx.plan.zeroStage >= 3) {
            // Only this rank's shard of the values persists; the full values are gathered around their use.
            const int64_t lo0 = static_cast<int64_t>(shardGroup().myIndex);
            for (auto& [key, list] : buckets)
                for (Bucket& bk : list) {
                    Tensor flatValues = flatten(bk, true, MemoryCategory::Buffers);
                    be.copyRows(flatValues, lo0 * bk.shard, bk.valueShard);
                }
            for (auto& p : gpt.parameters()) p.value = Tensor();
            gpt.setParameterResidency(this);
        }
        if (ctx.plan.zeroStage >= 2) {
            // Gradients are sharded: the full ones exist only from a backward to its reduce-scatter.
            for (auto& p : gpt.parameters()) p.grad = Tensor();
            be.resetPeaks();
        }
        if (ctx.plan.zeroStage == 0) {
            for (size_t i = 0; i < gpt.parameters().size(); ++i) {
                const Tensor& value = gpt.parameters()[i].value;
                moments.emplace(static_cast<int>(i), std::make_pair(be.zeros(value.shape(), MemoryCategory::Optimizer),
                                                                     be.zeros(value.shape(), MemoryCategory::Optimizer)));
                // Mixed precision: the fp32 master of every parameter, kept here (not inside the backend) so
                // that checkpoints hold it, as the ZeRO >= 1 master shards above; counted under Optimizer.
                if (mixedPrecision()) {
                    Tensor master = be.empty(value.shape(), MemoryCategory::Optimizer);
                    be.copy(value, master);
                    masters.emplace(static_cast<int>(i), std::move(master));
                }
            }
        }
    }

    // Whether the backend keeps optimizer state in another element type than the weights (cuda's mixed recipe:
    // fp32 moments and master values beside bf16 weights, gradients and buffers).
    bool mixedPrecision() const {
        return be.elementTypeFor(MemoryCategory::Optimizer) != be.elementTypeFor(MemoryCategory::Weights) ||
               be.elementTypeFor(MemoryCategory::Optimizer) != be.elementTypeFor(MemoryCategory::Buffers);
    }

    Parameter& param(int i) { return gpt.parameters()[static_cast<size_t>(i)]; }
    // Elements of a parameter (its value may not be resident under ZeRO-3).
    int64_t paramElements(int i) { return localRows(param(i).info) * localCols(param(i).info); }
    // Vectors (norm weights, biases) get no weight decay.
    bool isVector(int i) { return localRows(param(i).info) == 1; }

    // Flat [padded, 1] copy of the bucket's gradients (or values). With `release`, each gradient is freed once
    // copied, as DeepSpeed frees a parameter's .grad once it is in the reduce bucket: the bucket's gradients
    // never exist twice.
    Tensor flatten(const Bucket& bk, bool values, MemoryCategory cat, bool release = false) {
        Tensor flat = be.zeros({bk.shard * shardGroup().size(), 1}, cat);
        int64_t at = 0;
        for (int p : bk.params) {
            Tensor& t = values ? param(p).value : param(p).grad;
            if (!t.defined())
                throw RuntimeError("rank " + std::to_string(ctx.rank) + ": " + param(p).info.name + "'s " +
                                   (values ? "value" : "gradient") + " is not resident");
            be.copyRowsInto(t.view({t.numel(), 1}), flat, at);
            at += t.numel();
            if (release) t = Tensor();
        }
        return flat;
    }
    void unflatten(const Tensor& flat, const Bucket& bk, bool values) {
        int64_t at = 0;
        for (int p : bk.params) {
            Tensor& t = values ? param(p).value : param(p).grad;
            Tensor view = t.view({t.numel(), 1});
            be.copyRows(flat, at, view);
            at += t.numel();
        }
    }

    // Gradients are summed over every rank holding the same weights: dp x cp (CP ranks see other tokens).
    // ZeRO shards over dp x cp with zero_over_cp (one collective over dp_cp); otherwise over dp only, after
    // an all-reduce over cp (so every CP rank of a replica holds the same reduced gradients and shards).
    bool shardOverCp() const { return ctx.plan.cp > 1 && ctx.plan.zeroOverCp; }
    bool preReduceCp() const { return ctx.plan.cp > 1 && !ctx.plan.zeroOverCp; }
    const Group& shardGroup() const { return shardOverCp() ? ctx.dpCp : ctx.dp; }
    const Group& denseGroup() const { return shardGroup(); }

    // Elements [offset, offset + length) of a parameter's tensor as a [length, 1] view.
    Tensor elementRange(const Tensor& t, int64_t offset, int64_t length) { return aliasElements(t, offset, {length, 1}); }
    // Calls f(parameter, offset in it, offset in this rank's shard, length) for every piece of the bucket's
    // flat order [lo, lo + shard) that this rank's shard covers.
    template <class F>
    void forShardPieces(const Bucket& bk, F f) {
        const int64_t lo = static_cast<int64_t>(shardGroup().myIndex) * bk.shard;
        int64_t at = 0;
        for (int p : bk.params) {
            const int64_t n = paramElements(p);
            const int64_t b0 = std::max(at, lo), b1 = std::min(at + n, lo + bk.shard);
            if (b1 > b0) f(p, b0 - at, b0 - lo, b1 - b0);
            at += n;
        }
    }
    // This rank's shard of the bucket's full gradients or values ([shard, 1], zero past the bucket's end), a
    // transient copy: the ZeRO-1 reduced gradients and the ZeRO-1/2 updated values live in the full tensors.
    Tensor readShard(const Bucket& bk, bool values) {
        Tensor shard = be.zeros({bk.shard, 1}, MemoryCategory::Buffers);
        forShardPieces(bk, [&](int p, int64_t inParam, int64_t inShard, int64_t length) {
            be.copyRowsInto(elementRange(values ? param(p).value : param(p).grad, inParam, length), shard, inShard);
        });
        return shard;
    }
    void writeShard(const Bucket& bk, const Tensor& shard, bool values) {
        forShardPieces(bk, [&](int p, int64_t inParam, int64_t inShard, int64_t length) {
            Tensor piece = elementRange(values ? param(p).value : param(p).grad, inParam, length);
            be.copyRows(shard, inShard, piece);
        });
    }

    void reduceBucket(const sim::Action& a, ActionRecord& rec) {
        for (Bucket& bk : buckets.at({a.chunk, a.bucket})) reduceOne(bk, rec);
    }

    void reduceOne(Bucket& bk, ActionRecord& rec) {
        const Group& g = denseGroup();
        rec.group = ctx.plan.cp > 1 ? ctx.dpCp.name : g.name;
        rec.groupSize = ctx.plan.cp > 1 ? ctx.dpCp.size() : g.size();
        // Under ZeRO-2/3 the full gradients are spent once flattened (only the shard is kept).
        Tensor flat = flatten(bk, false, MemoryCategory::Buffers, ctx.plan.zeroStage >= 2);
        rec.bytes += static_cast<double>(flat.numel() * elementBytes(flat.type()));
        if (preReduceCp()) ctx.comm->allReduce(flat, ctx.cp);
        if (g.size() == 1) {
            // No data-parallel peers: the cp all-reduce was the whole reduction.
            if (ctx.plan.zeroStage <= 1) {
                unflatten(flat, bk, false);
            } else {
                be.add(flat, bk.gradShard);
            }
            return;
        }
        if (ctx.plan.zeroStage == 0) {
            ctx.comm->allReduce(flat, g);
            unflatten(flat, bk, false);
            return;
        }
        // ZeRO >= 1: reduce-scatter; this rank keeps its shard. Under ZeRO-1 (once per step) the shard goes
        // back into the full gradients' own elements; the others keep unreduced values nothing reads and are
        // cleared after the optimizer. Under ZeRO-2/3 this runs per micro-batch, so the shard accumulates and
        // the full gradients are freed for the next micro-batch.
        Tensor shard = be.empty({bk.shard, 1}, MemoryCategory::Buffers);
        ctx.comm->reduceScatter(flat, shard, g);
        if (ctx.plan.zeroStage == 1) {
            writeShard(bk, shard, false);
            return;
        }
        be.add(shard, bk.gradShard);
    }

    // Under ZeRO-2/3 the full gradients exist from a backward to their bucket's reduction (flatten frees
    // them); ensureGrads brings them back, zeroed, for the next backward: a transient buffer, as in DeepSpeed's
    // stage 2.
    void ensureGrads(int chunk) {
        if (ctx.plan.zeroStage < 2) return;
        for (auto& p : gpt.parameters())
            if (p.info.chunk == chunk && !p.grad.defined())
                p.grad = be.zeros({localRows(p.info), localCols(p.info)}, MemoryCategory::Buffers);
    }

    // Expert parameters are sharded over EP and replicated over the expert data-parallel group (dp/ep ranks):
    // their gradients are summed there. ZeRO-0 only (the model rejects MoE with ZeRO >= 1 for now).
    void reduceExpertBucket(const sim::Action& a, ActionRecord& rec) {
        if (ctx.plan.zeroStage != 0)
            throw RuntimeError("expert-parallel gradient buckets run under ZeRO-0 only");
        const Group& g = ctx.expertDp;
        rec.group = g.name;
        rec.groupSize = g.size();
        for (int p : gpt.bucketParameters(a.chunk, a.bucket, true)) {
            Tensor& grad = param(p).grad;
            rec.bytes += static_cast<double>(grad.numel() * elementBytes(grad.type()));
            if (g.size() > 1) ctx.comm->allReduce(grad, g);
        }
    }

    // ZeRO-1/2: the updated shards are all-gathered into the resident full values after the optimizer.
    void gatherParams(const sim::Action& a, ActionRecord& rec) {
        const Group& g = denseGroup();
        rec.group = g.name;
        rec.groupSize = g.size();
        for (auto& [key, list] : buckets) {
            if (key.first != a.chunk) continue;
            for (Bucket& bk : list) {
                Tensor flat = be.empty({bk.shard * g.size(), 1}, MemoryCategory::Buffers);
                ctx.comm->allGather(readShard(bk, true), flat, g);
                rec.bytes += static_cast<double>(flat.numel() * elementBytes(flat.type()));
                unflatten(flat, bk, true);
            }
        }
    }

    // ---- ZeRO-3 parameter residency ----
    Resident* findResident(int chunk, int unit) {
        for (auto it = resident.rbegin(); it != resident.rend(); ++it)
            if (it->chunk == chunk && it->unit == unit) return &*it;
        return nullptr;
    }
    // Points every parameter of the resident units at its piece of the newest gathered copy; the others have
    // no value.
    void aliasResident() {
        if (ctx.plan.zeroStage < 3) return; // values are always resident below ZeRO-3
        for (auto& p : gpt.parameters()) p.value = Tensor();
        gatheredBytes = 0;
        for (Resident& r : resident)
            for (auto& [bk, flat] : r.flats) {
                gatheredBytes += flat.numel() * elementBytes(flat.type());
                int64_t at = 0;
                for (int p : bk->params) {
                    param(p).value = aliasElements(flat, at, {localRows(param(p).info), localCols(param(p).info)});
                    at += paramElements(p);
                }
            }
        gatheredPeakBytes = std::max(gatheredPeakBytes, gatheredBytes);
    }
    // All-gathers the full values of a unit from every member's shard (again, in place, when it is resident).
    Resident& gatherUnit(int chunk, int unit, ActionRecord* rec) {
        const Group& g = denseGroup();
        Resident* r = findResident(chunk, unit);
        if (!r) {
            auto it = unitBuckets.find({chunk, unit});
            if (it == unitBuckets.end())
                throw RuntimeError("rank " + std::to_string(ctx.rank) + ": chunk " + std::to_string(chunk) +
                                   " has no parameter unit " + std::to_string(unit));
            resident.push_back({chunk, unit, {}});
            r = &resident.back();
            for (Bucket* bk : it->second)
                r->flats.emplace_back(bk, be.empty({bk->shard * g.size(), 1}, MemoryCategory::Buffers));
        }
        for (auto& [bk, flat] : r->flats) {
            ctx.comm->allGather(bk->valueShard, flat, g);
            if (rec) rec->bytes += static_cast<double>(flat.numel() * elementBytes(flat.type()));
        }
        aliasResident();
        return *r;
    }
    // Frees every gathered unit but `keep` (nullptr: all of them).
    void releaseResidentBut(const Resident* keep) {
        if (ctx.plan.zeroStage < 3) return;
        resident.remove_if([&](const Resident& r) { return &r != keep; });
        aliasResident();
    }

    // The schedule's zero3_all_gather_params_{fwd,bwd}: prefetches the first unit the next compute uses (the
    // embedding or first layer forward, the head or last layer backward). It may start with the previous
    // compute (simulator/src/schedule.cpp), so the previous compute's last unit is released only after it.
    void zero3GatherAction(const sim::Action& a, ActionRecord& rec) {
        if (a.name.find("_expert") != std::string::npos)
            throw RuntimeError("expert-parallel ZeRO-3 gathers are not implemented (the executor runs MoE under ZeRO-0)");
        const Group& g = denseGroup();
        rec.group = g.name;
        rec.groupSize = g.size();
        const bool backward = a.name.find("_bwd") != std::string::npos;
        const Resident& gathered = gatherUnit(a.chunk, backward ? unitCount.at(a.chunk) - 1 : 0, &rec);
        releaseResidentBut(&gathered);
    }

    // Inside a compute: the unit in use and, one ahead in the pass's direction, the next (DeepSpeed's and
    // FSDP's one-deep prefetch); anything else gathered earlier is done.
    void beforeUnit(int chunk, int unit, bool backward) override {
        Resident* cur = findResident(chunk, unit);
        releaseResidentBut(cur);
        if (!cur) cur = &gatherUnit(chunk, unit, nullptr);
        const int next = backward ? unit - 1 : unit + 1;
        if (next >= 0 && next < unitCount.at(chunk) && !findResident(chunk, next)) gatherUnit(chunk, next, nullptr);
    }
    // A unit is released when it is done, except the pass's last one, which stays until the next compute's
    // first unit is gathered (its prefetch overlaps this unit's compute in the schedule).
    void afterUnit(int chunk, int unit, bool backward) override {
        const bool last = backward ? unit == 0 : unit == unitCount.at(chunk) - 1;
        if (last) return;
        resident.remove_if([&](const Resident& r) { return r.chunk == chunk && r.unit == unit; });
        aliasResident();
    }

    // Squared norm of this rank's gradients, counting each distinct gradient element once over the world:
    // replicated-over-TP parameters on TP rank 0 only, unsharded (ZeRO-0) gradients on DP rank 0 only, the
    // tied embedding's last-stage copy not at all (it equals the first stage's after the sync).
    double localSquaredNorm() {
        double sum = 0.0;
        const bool tpLead = ctx.tp.myIndex == 0;
        if (ctx.plan.zeroStage == 0) {
            // Expert gradients are identical over the expert data-parallel group: count them on its index 0.
            if (ctx.cp.myIndex != 0) return 0.0;
            for (auto& p : gpt.parameters()) {
                if ((p.info.replicatedOverTp && !tpLead) || p.info.tiedEmbeddingCopy) continue;
                if ((p.info.expert ? ctx.expertDp.myIndex : ctx.dp.myIndex) != 0) continue;
                sum += be.sumSquares(p.grad);
            }
            return sum;
        }
        // Without zero_over_cp the CP ranks of a replica hold identical shards: count them on cp index 0.
        if (preReduceCp() && ctx.cp.myIndex != 0) return 0.0;
        for (auto& [key, list] : buckets)
            for (Bucket& bk : list) {
            // A bucket mixes kinds of parameters; count the shard's element ranges parameter by parameter.
            int64_t at = 0;
            const int64_t lo = static_cast<int64_t>(shardGroup().myIndex) * bk.shard, hi = lo + bk.shard;
            std::vector<double> shard = be.download(ctx.plan.zeroStage == 1 ? readShard(bk, false) : bk.gradShard);
            for (int p : bk.params) {
                const int64_t n = paramElements(p);
                const bool skip = (param(p).info.replicatedOverTp && !tpLead) || param(p).info.tiedEmbeddingCopy;
                for (int64_t e = std::max(at, lo); e < std::min(at + n, hi); ++e)
                    if (!skip) sum += shard[static_cast<size_t>(e - lo)] * shard[static_cast<size_t>(e - lo)];
                at += n;
            }
        }
        return sum;
    }

    double optimizerStep() {
        const std::vector<double> total = ctx.comm->allReduceHost({localSquaredNorm()}, ctx.world);
        const double norm = std::sqrt(total[0]);
        // Global-norm clipping (Pascanu et al. 2013), as torch.nn.utils.clip_grad_norm_ (eps 1e-6).
        const double clip = hyper.clipNorm > 0.0 ? std::min(1.0, hyper.clipNorm / (norm + 1e-6)) : 1.0;
        ++adamStep;
        // Gathered ZeRO-3 values would be stale after the update: the next gather collects the new shards.
        releaseResidentBut(nullptr);
        if (ctx.plan.zeroStage == 0) {
            for (auto& [i, mv] : moments) {
                Parameter& p = param(i);
                if (clip < 1.0) be.scale(p.grad, clip);
                const double wd = isVector(i) ? 0.0 : hyper.weightDecay; // no decay on vectors
                if (auto master = masters.find(i); master != masters.end()) {
                    be.adamw(master->second, p.grad, mv.first, mv.second, hyper.learningRate, hyper.beta1, hyper.beta2,
                             hyper.eps, wd, adamStep);
                    be.copy(master->second, p.value); // rounded to bf16
                } else {
                    be.adamw(p.value, p.grad, mv.first, mv.second, hyper.learningRate, hyper.beta1, hyper.beta2,
                             hyper.eps, wd, adamStep);
                }
                be.fill(p.grad, 0.0);
            }
            return norm;
        }
        for (auto& [key, list] : buckets)
            for (Bucket& bk : list) {
            // This rank's shard, updated element-wise in place, parameter by parameter over the pieces it covers
            // (weight decay only on matrices): the values are the full values' own elements under ZeRO-1/2, the
            // value shard under ZeRO-3, or the fp32 master shard in mixed precision (then rounded into the
            // values); the gradients are the full gradients' own elements under ZeRO-1, the shard above.
            const bool zero1 = ctx.plan.zeroStage == 1, zero3 = ctx.plan.zeroStage >= 3;
            forShardPieces(bk, [&](int p, int64_t inParam, int64_t inShard, int64_t length) {
                const double wd = isVector(p) ? 0.0 : hyper.weightDecay;
                Tensor values = zero3 ? elementRange(bk.valueShard, inShard, length)
                                      : elementRange(param(p).value, inParam, length);
                Tensor grad = zero1 ? elementRange(param(p).grad, inParam, length)
                                    : elementRange(bk.gradShard, inShard, length);
                Tensor m1 = elementRange(bk.m, inShard, length), v1 = elementRange(bk.v, inShard, length);
                if (clip < 1.0) be.scale(grad, clip);
                if (bk.master.defined()) {
                    Tensor master = elementRange(bk.master, inShard, length);
                    be.adamw(master, grad, m1, v1, hyper.learningRate, hyper.beta1, hyper.beta2, hyper.eps, wd, adamStep);
                    be.copy(master, values); // rounded to bf16
                } else {
                    be.adamw(values, grad, m1, v1, hyper.learningRate, hyper.beta1, hyper.beta2, hyper.eps, wd, adamStep);
                }
            });
            if (!zero1) be.fill(bk.gradShard, 0.0);
            for (int p : bk.params)
                if (param(p).grad.defined()) be.fill(param(p).grad, 0.0);
        }
        return norm;
    }
};

Trainer::Trainer(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, const TrainHyper& hyper,
                 DataSource data)
    : impl_(std::make_unique<Impl>(model, ctx, backend, hyper, std::move(data))) {}

Trainer::~Trainer() = default;
GptModel& Trainer::model() { return impl_->gpt; }
const sim::StageSchedule& Trainer::actions() const { return *impl_->mine; }
double Trainer::zero3GatherPeakBytes() const { return static_cast<double>(impl_->gatheredPeakBytes); }

StepStats Trainer::step(int stepIndex) {
    Impl& m = *impl_;
    const Plan& plan = m.ctx.plan;
    const int dpIndex = m.ctx.dp.myIndex;
    std::map<std::pair<int, int>, Tensor> received;   // (mb, chunk) -> input activation or output gradient
    std::map<std::pair<int, int>, Tensor> toSend;     // (mb, chunk) -> output activation or input gradient
    std::map<int, MicroBatchData> batches;
    auto batch = [&](int mb) -> const MicroBatchData& {
        auto it = batches.find(mb);
        if (it == batches.end()) it = batches.emplace(mb, m.data(stepIndex, dpIndex, mb)).first;
        return it->second;
    };
    double gradNorm = 0.0;
    // On an asynchronous backend (CUDA) the host clock around an action measures only its launches: each action
    // is also a timed region on the device, whose times replace the host ones once the step is collected. The
    // CPU backend times nothing on a device (timesOnDevice() is false) and keeps the host clock, which is exact
    // around its synchronous work.
    const bool deviceTimed = m.be.timesOnDevice();
    std::map<int64_t, size_t> regionRecords; // region handle -> index in records_
    const auto& acts = m.mine->actions;
    for (size_t i = 0; i < acts.size(); ++i) {
        const sim::Action& a = acts[i];
        ActionRecord rec;
        rec.step = stepIndex;
        rec.rank = m.ctx.rank;
        rec.stage = m.ctx.stage();
        rec.index = static_cast<int>(i);
        rec.name = a.traceName();
        rec.kind = sim::toString(a.kind);
        rec.microBatch = a.microBatch;
        rec.chunk = a.chunk;
        rec.bucket = a.bucket;
        const auto t0 = Clock::now();
        if (deviceTimed && m.deviceOriginSeconds < 0.0)
            m.deviceOriginSeconds = std::chrono::duration<double>(t0 - m.runStart).count();
        const int64_t region = deviceTimed ? m.be.beginTimedRegion() : -1;
        const std::pair<int, int> key{a.microBatch, a.chunk};
        switch (a.kind) {
        case sim::ActionKind::Forward: {
            Tensor in;
            if (auto it = received.find(key); it != received.end()) {
                in = it->second;
                received.erase(it);
            }
            Tensor out = m.gpt.forward(a.microBatch, a.chunk, in, batch(a.microBatch));
            if (out.defined()) toSend[key] = out;
            break;
        }
        case sim::ActionKind::Backward:
        case sim::ActionKind::BackwardInput: {
            Tensor grad;
            if (auto it = received.find(key); it != received.end()) {
                grad = it->second;
                received.erase(it);
            }
            m.ensureGrads(a.chunk);
            Tensor dx = m.gpt.backward(a.microBatch, a.chunk, grad, a.kind == sim::ActionKind::BackwardInput);
            if (dx.defined()) toSend[key] = dx;
            if (m.gpt.chunkHasEmbedding(a.chunk) && a.kind == sim::ActionKind::Backward) batches.erase(a.microBatch);
            break;
        }
        case sim::ActionKind::BackwardWeight:
            m.ensureGrads(a.chunk);
            m.gpt.backwardWeight(a.microBatch, a.chunk);
            break;
        case sim::ActionKind::SendActivation:
        case sim::ActionKind::SendGrad: {
            auto it = toSend.find(key);
            if (it == toSend.end())
                throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": nothing to send for micro-batch " +
                                   std::to_string(a.microBatch) + " chunk " + std::to_string(a.chunk));
            const bool grad = a.kind == sim::ActionKind::SendGrad;
            rec.peerRank = m.ctx.stageRank(a.peerStage);
            rec.group = "pp";
            rec.groupSize = 2;
            rec.bytes = static_cast<double>(it->second.numel() * elementBytes(it->second.type()));
            m.ctx.comm->send(it->second, rec.peerRank, transferTag(grad, a.microBatch, a.chunk, plan.vpp));
            toSend.erase(it);
            break;
        }
        case sim::ActionKind::RecvActivation:
        case sim::ActionKind::RecvGrad: {
            const bool grad = a.kind == sim::ActionKind::RecvGrad;
            // The activation a stage receives is the input its layers keep; a gradient is transient.
            Tensor t = m.be.empty({m.gpt.hiddenRows(), m.model.hidden},
                                  grad ? MemoryCategory::Buffers : MemoryCategory::Activations);
            rec.peerRank = m.ctx.stageRank(a.peerStage);
            rec.group = "pp";
            rec.groupSize = 2;
            rec.bytes = static_cast<double>(t.numel() * elementBytes(t.type()));
            // The sender's chunk: activations come from virtual stage u-1, gradients from u+1.
            const int u = a.chunk * plan.pp + m.ctx.stage();
            const int peerVirtual = grad ? u + 1 : u - 1;
            m.ctx.comm->recv(t, rec.peerRank, transferTag(grad, a.microBatch, peerVirtual / plan.pp, plan.vpp));
            received[key] = t;
            break;
        }
        case sim::ActionKind::Collective: {
            if (a.name.rfind("dp_all_reduce_grads", 0) == 0 || a.name.rfind("dp_reduce_scatter_grads", 0) == 0) {
                if (a.name.find("_expert") != std::string::npos) {
                    m.reduceExpertBucket(a, rec);
                } else if (plan.zeroStage >= 3) {
                    // ZeRO-3 reduces a chunk's gradients, all its unit buckets, once per micro-batch.
                    for (auto& [bucketKey, list] : m.buckets)
                        if (bucketKey.first == a.chunk)
                            for (Bucket& bk : list) m.reduceOne(bk, rec);
                } else {
                    m.reduceBucket(a, rec);
                }
            } else if (a.name.rfind("dp_all_gather_params", 0) == 0) {
                m.gatherParams(a, rec);
            } else if (a.name.rfind("zero3_all_gather_params", 0) == 0) {
                m.zero3GatherAction(a, rec);
            } else if (a.name == "embedding_grad_all_reduce") {
                rec.group = m.ctx.embedding.name;
                rec.groupSize = m.ctx.embedding.size();
                if (plan.zeroStage == 0) {
                    for (auto& p : m.gpt.parameters()) {
                        if (p.info.pieces.empty() || p.info.pieces.front().fullName != "wte") continue;
                        rec.bytes = static_cast<double>(p.grad.numel() * elementBytes(p.grad.type()));
                        m.ctx.comm->allReduce(p.grad, m.ctx.embedding);
                    }
                } else {
                    // The embedding's own bucket has the same layout on both stages: sum the reduced shards.
                    const auto& eb = m.embeddingBucket;
                    Bucket& bk = m.buckets.at({eb[0], eb[1]}).at(static_cast<size_t>(eb[2]));
                    // Under ZeRO-1 the reduced shard lives in the full gradients: sum a copy, write it back.
                    Tensor shard = plan.zeroStage == 1 ? m.readShard(bk, false) : bk.gradShard;
                    rec.bytes = static_cast<double>(shard.numel() * elementBytes(shard.type()));
                    m.ctx.comm->allReduce(shard, m.ctx.embedding);
                    if (plan.zeroStage == 1) m.writeShard(bk, shard, false);
                }
            } else {
                throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": unknown collective " + a.name);
            }
            break;
        }
        case sim::ActionKind::OptimizerStep: gradNorm = m.optimizerStep(); break;
        }
        if (deviceTimed) m.be.endTimedRegion(region);
        const auto t1 = Clock::now();
        rec.startSeconds = std::chrono::duration<double>(t0 - m.runStart).count();
        rec.durationSeconds = std::chrono::duration<double>(t1 - t0).count();
        if (deviceTimed) regionRecords[region] = records_.size();
        records_.push_back(std::move(rec));
    }
    if (deviceTimed) {
        // Waits for the step's device work once, at its end (no device-wide sync inside the step). Regions of an
        // earlier step that threw before its collection are not in regionRecords and are dropped.
        for (const Backend::TimedRegion& r : m.be.collectTimedRegions()) {
            const auto it = regionRecords.find(r.handle);
            if (it == regionRecords.end()) continue;
            ActionRecord& rec = records_[it->second];
            rec.startSeconds = m.deviceOriginSeconds + r.startSeconds;
            rec.durationSeconds = r.durationSeconds;
        }
    }
    if (!received.empty() || !toSend.empty())
        throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": step ended with transfers left over");
    // Mean token loss over the global batch: the last stage's TP rank 0 of every DP replica contributes.
    const bool contributes = m.ctx.stage() == plan.pp - 1 && m.ctx.tp.myIndex == 0;
    const double local = m.gpt.takeLossSum();
    const std::vector<double> total = m.ctx.comm->allReduceHost({contributes ? local : 0.0}, m.ctx.world);
    StepStats stats;
    stats.loss = total[0] / (static_cast<double>(plan.globalBatch) * static_cast<double>(m.model.seqLen));
    stats.gradNorm = gradNorm;
    return stats;
}

std::map<std::string, std::vector<double>> Trainer::gatherFullParameters() {
    Impl& m = *impl_;
    const int64_t trainingPeak = m.gatheredPeakBytes; // this copy is no part of training
    if (m.ctx.plan.zeroStage >= 3) {
        // Only the shards persist: gather every unit for the copy, and release them all after it.
        for (auto& [chunk, units] : m.unitCount)
            for (int unit = 0; unit < units; ++unit)
                if (!m.findResident(chunk, unit)) m.gatherUnit(chunk, unit, nullptr);
    }
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> sums; // name -> (values, counts)
    std::map<std::string, std::pair<int64_t, int64_t>> shapes;
    for (auto& p : m.gpt.parameters()) {
        const std::vector<double> local = m.be.download(p.value);
        const int64_t cols = localCols(p.info);
        for (const auto& pc : p.info.pieces) {
            auto& entry = sums[pc.fullName];
            const size_t n = static_cast<size_t>(pc.fullRows * pc.fullCols);
            if (entry.first.empty()) {
                entry.first.assign(n, 0.0);
                entry.second.assign(n, 0.0);
                shapes[pc.fullName] = {pc.fullRows, pc.fullCols};
            }
            for (int64_t r = pc.rowBegin; r < pc.rowEnd; ++r)
                for (int64_t c = pc.colBegin; c < pc.colEnd; ++c) {
                    const int64_t lr = pc.localRow + (r - pc.rowBegin), lc = pc.localCol + (c - pc.colBegin);
                    const size_t at = static_cast<size_t>(r * pc.fullCols + c);
                    // A tensor held twice on one rank (tied embedding on one stage) counts once.
                    if (entry.second[at] == 0.0) {
                        entry.first[at] = local[static_cast<size_t>(lr * cols + lc)];
                        entry.second[at] = 1.0;
                    }
                }
        }
    }
    if (m.ctx.plan.zeroStage >= 3) m.releaseResidentBut(nullptr);
    m.gatheredPeakBytes = trainingPeak;
    std::map<std::string, std::vector<double>> out;
    for (auto& [name, vc] : sums) {
        std::vector<double> values = vc.first, counts = vc.second;
        if (m.ctx.tp.size() > 1) {
            values = m.ctx.comm->allReduceHost(values, m.ctx.tp);
            counts = m.ctx.comm->allReduceHost(counts, m.ctx.tp);
        }
        for (size_t i = 0; i < values.size(); ++i)
            if (counts[i] > 0.0) values[i] /= counts[i];
        out[name] = std::move(values);
    }
    return out;
}

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
