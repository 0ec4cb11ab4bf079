// One rank's training state: ZeRO buckets and their collectives, the AdamW step, ZeRO-3 parameter residency.
#include "trainer_impl.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>

namespace tessel::exec {

namespace {
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

Trainer::Impl::Impl(const ModelConfig& m, const ParallelContext& c, Backend& b, const TrainHyper& hp, DataSource d)
    : model(m), ctx(c), be(b), hyper(hp), data(std::move(d)), gpt(m, c, b, hp.seed) {
    schedule = sim::buildSchedule(model, ctx.plan);
    mine = &schedule.forRank(ctx.rank);
    for (const sim::Action& a : mine->actions)
        if (a.kind == sim::ActionKind::Collective &&
            (a.name.rfind("dp_all_reduce_grads", 0) == 0 || a.name.rfind("dp_reduce_scatter_grads", 0) == 0))
            reducedParts.insert({a.chunk, expertAction(a)});
    auto makeBucket = [&](std::vector<int> params, bool expert) {
        Bucket bk;
        bk.params = std::move(params);
        bk.expert = expert;
        for (int p : bk.params) bk.flat += gpt.parameters()[static_cast<size_t>(p)].value.numel();
        const int64_t members = groupOf(bk).size();
        bk.shard = (bk.flat + members - 1) / members;
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
    // A schedule bucket's parameters, as up to three buckets: the dense ones, a tied embedding shared with the other
    // end of the pipeline, and the experts (their own group).
    auto addBuckets = [&](int chunk, int j, const std::vector<int>& params) {
        std::vector<int> plain, shared, experts;
        for (int p : params) {
            const ParamInfo& info = gpt.parameters()[static_cast<size_t>(p)].info;
            const bool tiedShared = ctx.embedding.size() > 1 && !info.pieces.empty() &&
                                    info.pieces.front().fullName == "wte";
            (info.expert ? experts : tiedShared ? shared : plain).push_back(p);
        }
        if (plain.empty() && shared.empty() && experts.empty()) return;
        auto& list = buckets[{chunk, j}];
        if (!plain.empty()) list.push_back(makeBucket(plain, false));
        if (!shared.empty()) {
            list.push_back(makeBucket(shared, false));
            embeddingBucket = {chunk, j, static_cast<int>(list.size()) - 1};
        }
        if (!experts.empty()) list.push_back(makeBucket(experts, true));
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
            for (int j = 0; j < gpt.bucketsPerChunk(chunk); ++j) {
                std::vector<int> params = gpt.bucketParameters(chunk, j, false);
                for (int p : gpt.bucketParameters(chunk, j, true)) params.push_back(p);
                addBuckets(chunk, j, params);
            }
        }
    }
    if (ctx.plan.zeroStage >= 1 && mixedPrecision()) {
        // Mixed precision (Micikevicius et al. 2018): the weights are bf16, so the optimizer updates an fp32
        // master copy of this rank's shard and rounds the result into the bf16 value shard. Under ZeRO-0 the
        // backend keeps a master per parameter itself (adamw on a bf16 parameter with fp32 moments), but
        // here adamw sees only transient row temporaries, so the master must persist here. It is made from
        // the initial values (still resident: ZeRO-3 drops them just below) and counted under Optimizer,
        // which gives the mixed recipe's 4 B/param of master weights.
        for (auto& [key, list] : buckets)
            for (Bucket& bk : list) {
                bk.master = be.empty({bk.shard, 1}, MemoryCategory::Optimizer);
                be.copyRows(flatten(bk, true, MemoryCategory::Buffers), groupOf(bk).myIndex * bk.shard, bk.master);
            }
    }
    if (ctx.plan.zeroStage >= 3) {
        // Only this rank's shard of the values persists; the full values are gathered around their use.
        for (auto& [key, list] : buckets)
            for (Bucket& bk : list) {
                Tensor flatValues = flatten(bk, true, MemoryCategory::Buffers);
                be.copyRows(flatValues, groupOf(bk).myIndex * bk.shard, bk.valueShard);
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

Tensor Trainer::Impl::flatten(const Bucket& bk, bool values, MemoryCategory cat, bool release) {
    Tensor flat = be.zeros({bk.shard * groupOf(bk).size(), 1}, cat);
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

void Trainer::Impl::unflatten(const Tensor& flat, const Bucket& bk, bool values) {
    int64_t at = 0;
    for (int p : bk.params) {
        Tensor& t = values ? param(p).value : param(p).grad;
        Tensor view = t.view({t.numel(), 1});
        be.copyRows(flat, at, view);
        at += t.numel();
    }
}

Tensor Trainer::Impl::elementRange(const Tensor& t, int64_t offset, int64_t length) {
    return aliasElements(t, offset, {length, 1});
}

template <class F>
void Trainer::Impl::forShardPieces(const Bucket& bk, F f) {
    const int64_t lo = static_cast<int64_t>(groupOf(bk).myIndex) * bk.shard;
    int64_t at = 0;
    for (int p : bk.params) {
        const int64_t n = paramElements(p);
        const int64_t b0 = std::max(at, lo), b1 = std::min(at + n, lo + bk.shard);
        if (b1 > b0) f(p, b0 - at, b0 - lo, b1 - b0);
        at += n;
    }
}

Tensor Trainer::Impl::readShard(const Bucket& bk, bool values) {
    Tensor shard = be.zeros({bk.shard, 1}, MemoryCategory::Buffers);
    forShardPieces(bk, [&](int p, int64_t inParam, int64_t inShard, int64_t length) {
        be.copyRowsInto(elementRange(values ? param(p).value : param(p).grad, inParam, length), shard, inShard);
    });
    return shard;
}

void Trainer::Impl::writeShard(const Bucket& bk, const Tensor& shard, bool values) {
    forShardPieces(bk, [&](int p, int64_t inParam, int64_t inShard, int64_t length) {
        Tensor piece = elementRange(values ? param(p).value : param(p).grad, inParam, length);
        be.copyRows(shard, inShard, piece);
    });
}

void Trainer::Impl::reduceBucket(const sim::Action& a, ActionRecord& rec) {
    // ZeRO-3 reduces a chunk's gradients, all its unit buckets, once per micro-batch.
    forBucketsOf(a.chunk, ctx.plan.zeroStage >= 3 ? -1 : a.bucket, expertAction(a), [&](Bucket& bk) { reduceOne(bk, rec); });
}

void Trainer::Impl::reduceOne(Bucket& bk, ActionRecord& rec) {
    const Group& g = groupOf(bk);
    const Group& reported = ctx.plan.cp > 1 && !hybrid() ? (bk.expert ? ctx.expertDp : ctx.dpCp) : g;
    rec.group = reported.name;
    rec.groupSize = reported.size();
    // Hybrid sharding under ZeRO-2/3: the micro-batch's shard waits for its sum across the copies before it joins
    // the accumulated gradients (an earlier one still waiting is summed with it: the sums commute).
    auto keep = [&](const Tensor& shard) {
        if (!hybrid()) {
            be.add(shard, bk.gradShard);
        } else if (bk.pending.defined()) {
            be.add(shard, bk.pending);
        } else {
            bk.pending = shard;
        }
    };
    // Under ZeRO-2/3 the full gradients are spent once flattened (only the shard is kept).
    Tensor flat = flatten(bk, false, MemoryCategory::Buffers, ctx.plan.zeroStage >= 2);
    rec.bytes += static_cast<double>(flat.numel() * elementBytes(flat.type()));
    if (preReducesCp(bk)) ctx.comm->allReduce(flat, ctx.cp);
    if (g.size() == 1) {
        // No data-parallel peers: the cp all-reduce was the whole reduction.
        if (ctx.plan.zeroStage <= 1) {
            unflatten(flat, bk, false);
        } else {
            keep(flat);
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
    keep(shard);
}

void Trainer::Impl::reduceAcrossReplicas(const sim::Action& a, ActionRecord& rec) {
    if (!hybrid()) throw RuntimeError("rank " + std::to_string(ctx.rank) + ": " + std::string(a.name) + " needs zero_replicas > 1");
    const Group& g = expertAction(a) ? ctx.expertZeroReplica : ctx.zeroReplica;
    rec.group = g.name;
    rec.groupSize = g.size();
    auto across = [&](Bucket& bk) {
        if (ctx.plan.zeroStage == 1) {
            // Under ZeRO-1 the shard reduced inside the copy lives in the full gradients' own elements.
            Tensor shard = readShard(bk, false);
            rec.bytes += static_cast<double>(shard.numel() * elementBytes(shard.type()));
            ctx.comm->allReduce(shard, g);
            writeShard(bk, shard, false);
            return;
        }
        if (!bk.pending.defined()) return; // summed already, with a later micro-batch's
        rec.bytes += static_cast<double>(bk.pending.numel() * elementBytes(bk.pending.type()));
        ctx.comm->allReduce(bk.pending, g);
        be.add(bk.pending, bk.gradShard);
        bk.pending = Tensor();
    };
    // ZeRO-3 reduces a chunk's gradients, all its unit buckets, at once (reduceBucket).
    forBucketsOf(a.chunk, ctx.plan.zeroStage >= 3 ? -1 : a.bucket, expertAction(a), across);
}

void Trainer::Impl::ensureGrads(int chunk) {
    if (ctx.plan.zeroStage < 2) return;
    for (auto& p : gpt.parameters())
        if (p.info.chunk == chunk && !p.grad.defined())
            p.grad = be.zeros({localRows(p.info), localCols(p.info)}, MemoryCategory::Buffers);
}

void Trainer::Impl::gatherParams(const sim::Action& a, ActionRecord& rec) {
    const bool expert = expertAction(a);
    const Group& g = expert ? expertShardGroup() : shardGroup();
    rec.group = g.name;
    rec.groupSize = g.size();
    forBucketsOf(a.chunk, -1, expert, [&](Bucket& bk) {
        Tensor flat = be.empty({bk.shard * g.size(), 1}, MemoryCategory::Buffers);
        ctx.comm->allGather(readShard(bk, true), flat, g);
        rec.bytes += static_cast<double>(flat.numel() * elementBytes(flat.type()));
        unflatten(flat, bk, true);
    });
}

// ---- ZeRO-3 parameter residency ----
Trainer::Impl::Resident* Trainer::Impl::findResident(int chunk, int unit) {
    for (auto it = resident.rbegin(); it != resident.rend(); ++it)
        if (it->chunk == chunk && it->unit == unit) return &*it;
    return nullptr;
}

void Trainer::Impl::aliasResident() {
    if (ctx.plan.zeroStage < 3) return; // values are always resident below ZeRO-3
    for (auto& p : gpt.parameters()) p.value = Tensor();
    gatheredBytes = 0;
    for (Resident& r : resident)
        for (const Gathered& gathered : r.flats) {
            gatheredBytes += gathered.flat.numel() * elementBytes(gathered.flat.type());
            int64_t at = 0;
            for (int p : gathered.bucket->params) {
                param(p).value = aliasElements(gathered.flat, at, {localRows(param(p).info), localCols(param(p).info)});
                at += paramElements(p);
            }
        }
    gatheredPeakBytes = std::max(gatheredPeakBytes, gatheredBytes);
}

Trainer::Impl::Resident& Trainer::Impl::gatherUnit(int chunk, int unit, ActionRecord* rec, Part which) {
    Resident* r = findResident(chunk, unit);
    if (!r) {
        auto it = unitBuckets.find({chunk, unit});
        if (it == unitBuckets.end())
            throw RuntimeError("rank " + std::to_string(ctx.rank) + ": chunk " + std::to_string(chunk) +
                               " has no parameter unit " + std::to_string(unit));
        resident.push_back({chunk, unit, {}});
        r = &resident.back();
        for (Bucket* bk : it->second)
            r->flats.push_back({bk, be.empty({bk->shard * groupOf(*bk).size(), 1}, MemoryCategory::Buffers), false});
    }
    for (Gathered& gathered : r->flats) {
        const bool expert = gathered.bucket->expert;
        const bool wanted = which == Part::All || (which == Part::Missing && !gathered.done) ||
                            (which == Part::Expert && expert) || (which == Part::Dense && !expert);
        if (!wanted) continue;
        ctx.comm->allGather(gathered.bucket->valueShard, gathered.flat, groupOf(*gathered.bucket));
        gathered.done = true;
        if (rec) rec->bytes += static_cast<double>(gathered.flat.numel() * elementBytes(gathered.flat.type()));
    }
    aliasResident();
    return *r;
}

void Trainer::Impl::releaseResidentBut(const Resident* keep) {
    if (ctx.plan.zeroStage < 3) return;
    resident.remove_if([&](const Resident& r) { return &r != keep; });
    aliasResident();
}

void Trainer::Impl::zero3GatherAction(const sim::Action& a, ActionRecord& rec) {
    // The dense and the expert part of the unit are two actions of the schedule (the expert one gathers nothing when
    // the unit has no experts: the embedding, the output layer).
    const bool expert = expertAction(a);
    const Group& g = expert ? expertShardGroup() : shardGroup();
    rec.group = g.name;
    rec.groupSize = g.size();
    const bool backward = a.name.find("_bwd") != std::string::npos;
    const Resident& gathered = gatherUnit(a.chunk, backward ? unitCount.at(a.chunk) - 1 : 0, &rec, expert ? Part::Expert : Part::Dense);
    releaseResidentBut(&gathered);
}

void Trainer::Impl::beforeUnit(int chunk, int unit, bool backward) {
    Resident* cur = findResident(chunk, unit);
    releaseResidentBut(cur);
    if (!cur) cur = &gatherUnit(chunk, unit, nullptr);
    else gatherUnit(chunk, unit, nullptr, Part::Missing); // a part the schedule's gathers left
    const int next = backward ? unit - 1 : unit + 1;
    if (next >= 0 && next < unitCount.at(chunk) && !findResident(chunk, next)) gatherUnit(chunk, next, nullptr);
}

void Trainer::Impl::afterUnit(int chunk, int unit, bool backward) {
    const bool last = backward ? unit == 0 : unit == unitCount.at(chunk) - 1;
    if (last) return;
    resident.remove_if([&](const Resident& r) { return r.chunk == chunk && r.unit == unit; });
    aliasResident();
}

double Trainer::Impl::localSquaredNorm() {
    // A replicated parameter counts on index 0 of the TP group that splits its layer: expert TP for an expert's.
    auto leadOf = [&](const ParamInfo& info) { return (info.expert ? ctx.expertTp.myIndex : ctx.tp.myIndex) == 0; };
    if (ctx.plan.zeroStage == 0) {
        // Reduced gradients are identical over dp x cp, expert ones over the expert data-parallel group (which spans
        // the CP ranks): count them on index 0.
        std::vector<Tensor> grads;
        for (auto& p : gpt.parameters()) {
            if ((p.info.replicatedOverTp && !leadOf(p.info)) || p.info.tiedEmbeddingCopy) continue;
            if (p.info.expert ? ctx.expertDp.myIndex != 0 : ctx.dp.myIndex != 0 || ctx.cp.myIndex != 0) continue;
            grads.push_back(p.grad);
        }
        return be.sumSquaresAll(grads);
    }
    for (const auto& [key, list] : buckets)
        for (const Bucket& bk : list)
            if (bk.pending.defined())
                throw RuntimeError("rank " + std::to_string(ctx.rank) + ": the optimizer step found a gradient shard of chunk " +
                                   std::to_string(key.first) + " not summed across the ZeRO replicas");
    // Without zero_over_cp the CP ranks of a replica hold identical shards (but experts laid out apart): count them on cp
    // index 0. With hybrid sharding the copies hold identical shards: count them on the first (of the dense or the
    // expert split).
    // A bucket mixes kinds of parameters: the shard's element ranges, parameter by parameter (the full
    // gradients' own elements under ZeRO-1, the reduced shard's above), summed where they live.
    std::vector<Tensor> pieces;
    for (auto& [key, list] : buckets)
        for (Bucket& bk : list) {
            if (hybrid() && replicaGroupOf(bk).myIndex != 0) continue;
            if (preReducesCp(bk) && ctx.cp.myIndex != 0) continue;
            forShardPieces(bk, [&](int p, int64_t inParam, int64_t inShard, int64_t length) {
                if ((param(p).info.replicatedOverTp && !leadOf(param(p).info)) || param(p).info.tiedEmbeddingCopy) return;
                pieces.push_back(ctx.plan.zeroStage == 1 ? elementRange(param(p).grad, inParam, length)
                                                         : elementRange(bk.gradShard, inShard, length));
            });
        }
    return be.sumSquaresAll(pieces);
}

void Trainer::Impl::foldUnreduced() {
    if (ctx.plan.zeroStage < 2) return;
    for (auto& [key, list] : buckets) {
        for (Bucket& bk : list) {
            if (reducedParts.count({key.first, bk.expert})) continue;
            if (groupOf(bk).size() != 1)
                throw RuntimeError("rank " + std::to_string(ctx.rank) + ": chunk " + std::to_string(key.first) + "'s " +
                                   (bk.expert ? "expert" : "dense") + " gradients have " + std::to_string(groupOf(bk).size()) +
                                   " data-parallel peers but no reduction in the schedule");
            bool any = false;
            for (int p : bk.params) any = any || param(p).grad.defined();
            if (any) be.add(flatten(bk, false, MemoryCategory::Buffers, true), bk.gradShard);
        }
    }
}

double Trainer::Impl::optimizerStep() {
    foldUnreduced();
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

} // namespace tessel::exec
