// Internal to libtessel_exec: Trainer::Impl, one rank's training state (ZeRO buckets, optimizer, residency).
#pragma once

#include "tessel/exec/runtime.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {

namespace detail {
using Clock = std::chrono::steady_clock;

// A ZeRO bucket: the flattened gradients (and, under ZeRO >= 1, the optimizer state) of a set of parameters,
// sharded over the data-parallel group: member i owns elements [i * shard, (i + 1) * shard) of the flat
// buffer padded to a multiple of the group size.
struct Bucket {
    std::vector<int> params;
    bool expert = false; // expert parameters: sharded and reduced over the expert data-parallel group
    int64_t flat = 0;
    int64_t shard = 0;
    Tensor gradShard;   // [shard, 1] reduced gradient shard where gradients accumulate (ZeRO-2/3, Grads). Under
                        // ZeRO-1 the reduced shard is written back into the full gradients' own elements.
    Tensor valueShard;  // [shard, 1] the parameters' only persistent copy (ZeRO-3, Weights). Under ZeRO-1/2 the
                        // optimizer updates the full values' own elements of the shard in place.
    Tensor m, v;        // [shard, 1] Adam moments of the shard (ZeRO >= 1)
    Tensor master;      // [shard, 1] fp32 master values of the shard (ZeRO >= 1, mixed precision only; Optimizer)
    Tensor pending;     // [shard, 1] hybrid sharding, ZeRO-2/3: the micro-batch's shard reduced inside its copy, not yet
                        // summed across the copies (dp_all_reduce_grads_across_replicas adds it to gradShard)
};
} // namespace detail

struct Trainer::Impl : ParameterResidency {
    using Bucket = detail::Bucket;
    using Clock = detail::Clock;

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
    // (chunk, expert part) whose gradients the schedule reduces. A part with no data-parallel peer (dp x cp of one,
    // or an expert data-parallel group of one) has no reduction; under ZeRO-2/3 its gradients reach their shard (all
    // of the bucket) at the optimizer step (foldUnreduced).
    std::set<std::pair<int, bool>> reducedParts;

    // ZeRO-3: buckets are the model's units (embedding, layer, head; ParameterResidency), keyed (chunk, unit);
    // a unit's full values exist only from the gather before its use to its release after it, one unit ahead
    // prefetched. `unitBuckets` gives the buckets holding a unit's parameters (a tied embedding on a rank
    // holding both ends lies in the embedding's bucket and is gathered with the head too).
    struct Gathered {
        Bucket* bucket = nullptr;
        Tensor flat;           // the bucket's gathered [shard x members, 1] values
        bool done = false;     // gathered since the unit became resident (the dense and expert parts come apart)
    };
    struct Resident {
        int chunk = 0, unit = 0;
        std::vector<Gathered> flats;
    };
    std::map<std::pair<int, int>, std::vector<Bucket*>> unitBuckets;
    std::map<int, int> unitCount;                   // chunk -> units
    std::list<Resident> resident;                   // oldest first; at most the unit in use and the next
    int64_t gatheredBytes = 0, gatheredPeakBytes = 0; // bytes of the resident gathered buffers (Buffers)

    Impl(const ModelConfig& m, const ParallelContext& c, Backend& b, const TrainHyper& hp, DataSource d);

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
    Tensor flatten(const Bucket& bk, bool values, MemoryCategory cat, bool release = false);
    void unflatten(const Tensor& flat, const Bucket& bk, bool values);

    // Gradients are summed over every rank holding the same weights: dp x cp (CP ranks see other tokens).
    // ZeRO shards over dp x cp with zero_over_cp (one collective over dp_cp); otherwise over dp only, after
    // an all-reduce over cp (so every CP rank of a replica holds the same reduced gradients and shards).
    bool shardOverCp() const { return ctx.plan.cp > 1 && ctx.plan.zeroOverCp; }
    bool preReduceCp() const { return ctx.plan.cp > 1 && !ctx.plan.zeroOverCp; }
    bool hybrid() const { return ctx.plan.zeroReplicas > 1 && ctx.plan.zeroStage >= 1; }
    const Group& shardGroup() const { return hybrid() ? ctx.zeroShard : shardOverCp() ? ctx.dpCp : ctx.dp; }
    // Expert parameters are sharded over EP and replicated over the expert data-parallel group (cp x dp / ep ranks):
    // their gradients are summed there, and ZeRO shards their state there (Megatron-core's expert distributed
    // optimizer); without zero_over_cp, as the dense state, over the ranks of one CP index after the cp all-reduce.
    // Experts laid out apart (folded, or Megatron-core's expert layout with cp > 1) have the CP ranks inside their expert
    // data-parallel group, where across cp they hold other experts: their gradients are never pre-reduced over cp, but
    // summed and sharded over that group alone.
    const Group& expertShardGroup() const {
        return hybrid() ? ctx.expertZeroShard : preReduceCp() && !ctx.plan.expertLayoutApart() ? ctx.expertDpInCp : ctx.expertDp;
    }
    // Whether a bucket's gradients are all-reduced over cp before its own group's reduction.
    bool preReducesCp(const Bucket& bk) const { return preReduceCp() && !(bk.expert && ctx.plan.expertLayoutApart()); }
    // The group a bucket is reduced and sharded over, and (hybrid sharding) the one its shards are summed across.
    const Group& groupOf(const Bucket& bk) const { return bk.expert ? expertShardGroup() : shardGroup(); }
    const Group& replicaGroupOf(const Bucket& bk) const { return bk.expert ? ctx.expertZeroReplica : ctx.zeroReplica; }
    // Whether a collective of the schedule moves the expert part of a chunk's parameters (its name ends in "_expert").
    static bool expertAction(const sim::Action& a) { return a.name.find("_expert") != std::string::npos; }
    // Calls f(bucket) for every bucket of a chunk's (or, with bucket >= 0, of one schedule bucket's) dense or expert part.
    template <class F>
    void forBucketsOf(int chunk, int bucket, bool expert, F f) {
        for (auto& [key, list] : buckets)
            if (key.first == chunk && (bucket < 0 || key.second == bucket))
                for (Bucket& bk : list)
                    if (bk.expert == expert) f(bk);
    }

    // Elements [offset, offset + length) of a parameter's tensor as a [length, 1] view.
    Tensor elementRange(const Tensor& t, int64_t offset, int64_t length);
    // Calls f(parameter, offset in it, offset in this rank's shard, length) for every piece of the bucket's
    // flat order [lo, lo + shard) that this rank's shard covers.
    template <class F>
    void forShardPieces(const Bucket& bk, F f);
    // This rank's shard of the bucket's full gradients or values ([shard, 1], zero past the bucket's end), a
    // transient copy: the ZeRO-1 reduced gradients and the ZeRO-1/2 updated values live in the full tensors.
    Tensor readShard(const Bucket& bk, bool values);
    void writeShard(const Bucket& bk, const Tensor& shard, bool values);

    // The schedule's gradient reduction of a bucket (ZeRO-0-2) or of a chunk (ZeRO-3), its dense or expert part.
    void reduceBucket(const sim::Action& a, ActionRecord& rec);
    void reduceOne(Bucket& bk, ActionRecord& rec);
    // Hybrid sharding: the reduced shards of the action's buckets summed across the copies (zero_replica group).
    void reduceAcrossReplicas(const sim::Action& a, ActionRecord& rec);

    // Under ZeRO-2/3 the full gradients exist from a backward to their bucket's reduction (flatten frees
    // them); ensureGrads brings them back, zeroed, for the next backward: a transient buffer, as in DeepSpeed's
    // stage 2.
    void ensureGrads(int chunk);

    // ZeRO-1/2: the updated shards are all-gathered into the resident full values after the optimizer.
    void gatherParams(const sim::Action& a, ActionRecord& rec);

    // ---- ZeRO-3 parameter residency ----
    Resident* findResident(int chunk, int unit);
    // Points every parameter of the resident units at its piece of the newest gathered copy; the others have
    // no value.
    void aliasResident();
    // All-gathers the full values of a unit from every member's shard (again, in place, when it is resident): the
    // buckets `which` picks (all by default; the schedule gathers a unit's dense and expert parts as two actions).
    enum class Part { All, Dense, Expert, Missing };
    Resident& gatherUnit(int chunk, int unit, ActionRecord* rec, Part which = Part::All);
    // Frees every gathered unit but `keep` (nullptr: all of them).
    void releaseResidentBut(const Resident* keep);

    // The schedule's zero3_all_gather_params_{fwd,bwd}: prefetches the first unit the next compute uses (the
    // embedding or first layer forward, the head or last layer backward). It may start with the previous
    // compute (simulator/src/schedule.cpp), so the previous compute's last unit is released only after it.
    void zero3GatherAction(const sim::Action& a, ActionRecord& rec);

    // Inside a compute: the unit in use and, one ahead in the pass's direction, the next (DeepSpeed's and
    // FSDP's one-deep prefetch); anything else gathered earlier is done.
    void beforeUnit(int chunk, int unit, bool backward) override;
    // A unit is released when it is done, except the pass's last one, which stays until the next compute's
    // first unit is gathered (its prefetch overlaps this unit's compute in the schedule).
    void afterUnit(int chunk, int unit, bool backward) override;

    // Squared norm of this rank's gradients, counting each distinct gradient element once over the world:
    // replicated-over-TP parameters on TP rank 0 only, unsharded (ZeRO-0) gradients on DP rank 0 only, the
    // tied embedding's last-stage copy not at all (it equals the first stage's after the sync).
    double localSquaredNorm();

    // ZeRO-2/3: the gradients of the parts the schedule never reduces, accumulated in the full tensors over the
    // step's micro-batches, added into their buckets' gradient shards (which are the whole bucket) and freed.
    void foldUnreduced();

    double optimizerStep();
};

} // namespace tessel::exec
