// Schedule generators (GPipe, 1F1B, Megatron interleaved 1F1B, ZB-H1, DualPipeV, ZB-V) and the complete per-stage action lists
// with pipeline transfers, data-parallel/ZeRO collectives and the optimizer step; invariant checks.
#include "tessel/sim/schedule.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace tessel::sim {

std::string toString(ActionKind k) {
    switch (k) {
    case ActionKind::Forward: return "forward";
    case ActionKind::Backward: return "backward";
    case ActionKind::BackwardInput: return "backward_input";
    case ActionKind::BackwardWeight: return "backward_weight";
    case ActionKind::SendActivation: return "send_activation";
    case ActionKind::RecvActivation: return "recv_activation";
    case ActionKind::SendGrad: return "send_grad";
    case ActionKind::RecvGrad: return "recv_grad";
    case ActionKind::Collective: return "collective";
    case ActionKind::OptimizerStep: return "optimizer_step";
    }
    return "?";
}

bool isCompute(ActionKind k) {
    return k == ActionKind::Forward || k == ActionKind::Backward || k == ActionKind::BackwardInput ||
           k == ActionKind::BackwardWeight || k == ActionKind::OptimizerStep;
}

std::string toString(Stream s) {
    switch (s) {
    case Stream::Compute: return "compute";
    case Stream::PipelineSend: return "pp_send";
    case Stream::PipelineRecv: return "pp_recv";
    case Stream::DataParallel: return "dp";
    }
    return "?";
}

Stream streamOf(ActionKind k) {
    switch (k) {
    case ActionKind::SendActivation:
    case ActionKind::SendGrad: return Stream::PipelineSend;
    case ActionKind::RecvActivation:
    case ActionKind::RecvGrad: return Stream::PipelineRecv;
    case ActionKind::Collective: return Stream::DataParallel;
    default: return Stream::Compute;
    }
}

bool isTransfer(ActionKind k) {
    return k == ActionKind::SendActivation || k == ActionKind::RecvActivation || k == ActionKind::SendGrad ||
           k == ActionKind::RecvGrad;
}

std::string Action::traceName() const { return kind == ActionKind::Collective ? std::string(name) : toString(kind); }

const StageSchedule& ActionSchedule::forRank(int rank) const {
    return stages.at(static_cast<size_t>(rankCoords(plan, rank).pp));
}

size_t ActionSchedule::actionCount() const {
    size_t n = 0;
    for (const auto& s : stages) n += s.actions.size();
    return n;
}

namespace {
Action compute(ActionKind kind, int mb, int chunk) {
    Action a;
    a.kind = kind;
    a.microBatch = mb;
    a.chunk = chunk;
    return a;
}

void gpipe(int m, std::vector<Action>& out) {
    // Huang et al. 2019: all forwards, then all backwards.
    for (int mb = 0; mb < m; ++mb) out.push_back(compute(ActionKind::Forward, mb, 0));
    for (int mb = 0; mb < m; ++mb) out.push_back(compute(ActionKind::Backward, mb, 0));
}

void oneFOneB(int m, int p, int s, std::vector<Action>& out) {
    // Narayanan et al. 2021 (PipeDream-Flush): p - s - 1 warm-up forwards, then one forward one backward.
    const int warmup = std::min(p - s - 1, m);
    for (int mb = 0; mb < warmup; ++mb) out.push_back(compute(ActionKind::Forward, mb, 0));
    for (int j = 0; j < m - warmup; ++j) {
        out.push_back(compute(ActionKind::Forward, warmup + j, 0));
        out.push_back(compute(ActionKind::Backward, j, 0));
    }
    for (int mb = m - warmup; mb < m; ++mb) out.push_back(compute(ActionKind::Backward, mb, 0));
}

void interleaved(int m, int p, int v, int s, bool allForwardsFirstWhenMEqualsP, std::vector<Action>& out) {
    // Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving: virtual micro-batch k runs
    // chunk (k / p) % v (backward: v - 1 - that) of micro-batch (k / (p v)) p + k % p.
    const int total = m * v;
    auto mbOf = [&](int k) { return (k / (p * v)) * p + k % p; };
    auto fwdChunk = [&](int k) { return (k / p) % v; };
    auto bwdChunk = [&](int k) { return v - 1 - (k / p) % v; };
    // Before Megatron-core 0.10 a step of m == p micro-batches ran every forward first (framework.hpp).
    int warmup = m == p && allForwardsFirstWhenMEqualsP ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k) out.push_back(compute(ActionKind::Forward, mbOf(k), fwdChunk(k)));
    const int remaining = total - warmup;
    for (int j = 0; j < remaining; ++j) {
        out.push_back(compute(ActionKind::Forward, mbOf(warmup + j), fwdChunk(warmup + j)));
        out.push_back(compute(ActionKind::Backward, mbOf(j), bwdChunk(j)));
    }
    for (int k = remaining; k < total; ++k) out.push_back(compute(ActionKind::Backward, mbOf(k), bwdChunk(k)));
}

void zeroBubbleH1(int m, int p, int s, std::vector<Action>& out) {
    // ZB-H1 (Qi et al. 2024, §2.1): 1F1B with the backward split into B (input grad, on the critical path)
    // and W (weight grad); stage s delays its W passes by s, so every stage keeps p micro-batches between
    // F and W, B passes start earlier, and the delayed W passes fill the tail bubble.
    const int warmup = std::min(p - s - 1, m);
    const int delay = s;
    std::deque<int> pendingW;
    auto backward = [&](int mb) {
        out.push_back(compute(ActionKind::BackwardInput, mb, 0));
        pendingW.push_back(mb);
        if (static_cast<int>(pendingW.size()) > delay) {
            out.push_back(compute(ActionKind::BackwardWeight, pendingW.front(), 0));
            pendingW.pop_front();
        }
    };
    for (int mb = 0; mb < warmup; ++mb) out.push_back(compute(ActionKind::Forward, mb, 0));
    for (int j = 0; j < m - warmup; ++j) {
        out.push_back(compute(ActionKind::Forward, warmup + j, 0));
        backward(j);
    }
    for (int mb = m - warmup; mb < m; ++mb) backward(mb);
    for (int mb : pendingW) out.push_back(compute(ActionKind::BackwardWeight, mb, 0));
}

void dualPipeV(int m, int p, int r, std::vector<Action>& out) {
    // PyTorch's ScheduleDualPipeV (torch/distributed/pipelining/schedules.py; DeepSeek's DualPipe cut in half,
    // github.com/deepseek-ai/DualPipe): rank r runs chunk 0 (virtual stage r) and chunk 1 (2p - 1 - r) in eight
    // steps. Micro-batches are numbered per chunk and action kind in the order they run; an input-gradient
    // backward queues its weight-gradient half, which a later W step runs (zero bubble); a full backward does not.
    std::map<std::pair<int, int>, int> next; // (chunk, kind: 0 forward, 1 backward input, 2 weight) -> micro-batch
    std::deque<std::pair<int, int>> weights; // queued (chunk, micro-batch)
    auto forward = [&](int c) { out.push_back(compute(ActionKind::Forward, next[{c, 0}]++, c)); };
    auto backward = [&](int c, bool split) {
        const int mb = next[{c, 1}]++;
        out.push_back(compute(split ? ActionKind::BackwardInput : ActionKind::Backward, mb, c));
        if (split) weights.push_back({c, mb});
    };
    auto weight = [&] {
        if (weights.empty()) return;
        out.push_back(compute(ActionKind::BackwardWeight, weights.front().second, weights.front().first));
        weights.pop_front();
    };
    auto overlapped = [&](int f, int b) {
        forward(f);
        out.back().overlapsNext = true;
        backward(b, false);
    };
    for (int i = 0; i < (p - r - 1) * 2; ++i) forward(0);                       // 1: F0
    for (int i = 0; i < r + 1; ++i) forward(0), forward(1);                     // 2: F0 F1
    for (int i = 0; i < p - r - 1; ++i) backward(1, true), weight(), forward(1); // 3: I1 W F1
    for (int i = 0; i < m - 2 * p + r + 1; ++i) {                                // 4: (F0 B1) (F1 B0)
        if (i == 0 && r == p - 1) forward(0), backward(1, false);              //    the V's tip: not overlapped
        else overlapped(0, 1);
        overlapped(1, 0);
    }
    for (int i = 0; i < p - r - 1; ++i) backward(1, false), overlapped(1, 0); // 5: B1 (F1 B0)
    bool split = false;                                                          // 6: B1 B0, the later ones split
    for (int i = 0; i < r + 1; ++i) {
        if (i == (r + 1) / 2 && r % 2 == 1) split = true;
        backward(1, split);
        if (i == (r + 1) / 2 && r % 2 == 0) split = true;
        backward(0, split);
    }
    for (int i = 0; i < p - r - 1; ++i) weight(), backward(0, split);           // 7: W B0
    for (int i = 0; i < r + 1; ++i) weight();                                    // 8: W
}

void zeroBubbleV(int m, int p, int r, std::vector<Action>& out) {
    // PyTorch's ScheduleZBVZeroBubble (Qi et al. 2024 §6): rank r runs chunk 0 (virtual stage r) and chunk 1
    // (2p - 1 - r); the order is built for max(2p - 1, m) micro-batches and those past m dropped, as PyTorch does.
    const int n = std::max(2 * p - 1, m);
    std::vector<Action> all;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto add = [&](ActionKind k, int mb, int c) { all.push_back(compute(k, mb, c)); };
    for (int i = 0; i < 2 * (p - r) - 1; ++i) add(ActionKind::Forward, f0++, 0);
    for (int i = 0; i < r; ++i) add(ActionKind::Forward, f1++, 1), add(ActionKind::Forward, f0++, 0);
    for (int i = 0; i < p - r; ++i) {
        add(ActionKind::Forward, f1++, 1);
        add(ActionKind::BackwardInput, b1, 1);
        add(ActionKind::BackwardWeight, b1++, 1);
    }
    while (f1 < f0 || f0 < n) {
        if (f0 < n) add(ActionKind::Forward, f0++, 0);
        add(ActionKind::BackwardInput, b0, 0);
        add(ActionKind::BackwardWeight, b0++, 0);
        add(ActionKind::Forward, f1++, 1);
        add(ActionKind::BackwardInput, b1, 1);
        add(ActionKind::BackwardWeight, b1++, 1);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; ++i) add(ActionKind::BackwardInput, b0++, 0), add(ActionKind::BackwardInput, b1++, 1);
    for (int i = 0; i < p - r; ++i) add(ActionKind::BackwardInput, b0++, 0), add(ActionKind::BackwardWeight, w0++, 0);
    while (w1 < b1) add(ActionKind::BackwardWeight, w1++, 1);
    while (w0 < b0) add(ActionKind::BackwardWeight, w0++, 0);
    for (const Action& a : all)
        if (a.microBatch < m) out.push_back(a);
}

// Parameters of one model chunk of a stage, split dense/expert (for bucket sizes and ZeRO-3 gathers).
struct ChunkParams {
    double dense = 0.0;
    double expert = 0.0;
};

// A collective's name for the dense or the expert part of a chunk's parameters: the literal chosen, so an action's name
// is never a temporary (Action::name is a view).
struct PartNames {
    const char* dense;
    const char* expert;
    std::string_view of(bool expertPart) const { return expertPart ? expert : dense; }
};
constexpr PartNames kParamGather{"dp_all_gather_params", "dp_all_gather_params_expert"};
constexpr PartNames kAcrossReplicas{"dp_all_reduce_grads_across_replicas", "dp_all_reduce_grads_across_replicas_expert"};

// Calls fn(parameters, group, expert part) for the dense and the expert parameters of a chunk that have a
// data-parallel group to talk to (dense: dp [x cp]; expert: dp/ep [x cp]); under hybrid sharding the group is
// the replica's shard group (gathers and reduce-scatters stay inside it).
template <typename Fn>
void forEachShardedPart(const ChunkParams& c, const Plan& plan, Fn&& fn) {
    if (c.dense > 0.0 && plan.dp * plan.cp > 1) fn(c.dense, zeroGroupKind(plan, false), false);
    if (c.expert > 0.0 && plan.expertGradientGroup() > 1) fn(c.expert, zeroGroupKind(plan, true), true);
}

Action transfer(ActionKind kind, int mb, int chunk, int peer) {
    Action a;
    a.kind = kind;
    a.microBatch = mb;
    a.chunk = chunk;
    a.peerStage = peer;
    return a;
}

ChunkParams chunkParams(const ModelConfig& model, const Plan& plan, const std::vector<int>& chunkLayers, int stage, int chunk) {
    const StageParameters p = chunkParameters(model, plan, chunkLayers, stage, chunk);
    return {p.dense, p.expert};
}

struct Builder {
    const ModelConfig& model;
    const Plan& plan;
    const PrecisionRecipe& recipe;
    std::vector<Action>& out;
    int stage;

    int add(Action a) {
        out.push_back(std::move(a));
        return static_cast<int>(out.size()) - 1;
    }
    Action collective(std::string_view name, GroupKind g, Primitive p, double bytes, int mb, int chunk, int bucket) const {
        Action a;
        a.kind = ActionKind::Collective;
        a.name = name;
        a.group = g;
        a.primitive = p;
        a.bytes = bytes;
        a.microBatch = mb;
        a.chunk = chunk;
        a.bucket = bucket;
        return a;
    }
};
} // namespace

std::vector<Action> computeOrder(const Plan& plan, int microBatches, int stage) {
    std::vector<Action> out;
    // A forward and a backward (or its two halves) for each micro-batch and chunk.
    out.reserve(static_cast<size_t>(3) * static_cast<size_t>(std::max(microBatches, 0)) * static_cast<size_t>(std::max(plan.vpp, 1)));
    switch (plan.schedule) {
    case Schedule::Gpipe: gpipe(microBatches, out); break;
    case Schedule::OneFOneB: oneFOneB(microBatches, plan.pp, stage, out); break;
    case Schedule::Interleaved1F1B:
        interleaved(microBatches, plan.pp, plan.vpp, stage, interleavedAllForwardsFirstWhenMEqualsP(plan.framework), out);
        break;
    case Schedule::ZeroBubble: zeroBubbleH1(microBatches, plan.pp, stage, out); break;
    case Schedule::DualPipeV: dualPipeV(microBatches, plan.pp, stage, out); break;
    case Schedule::ZeroBubbleV: zeroBubbleV(microBatches, plan.pp, stage, out); break;
    }
    return out;
}

ActionSchedule buildSchedule(const ModelConfig& model, const Plan& plan) {
    ActionSchedule sched;
    sched.plan = plan;
    sched.overlap = resolveOverlap(plan.framework, plan.schedule == Schedule::Interleaved1F1B, plan.zeroStage);
    const OverlapSettings& ov = sched.overlap;
    sched.microBatches = plan.microBatchesPerStep();
    sched.chunkLayers = chunkLayerCounts(model, plan);
    const std::vector<int>& chunkLayers = sched.chunkLayers;
    const int p = plan.pp, v = plan.vpp, m = sched.microBatches;
    sched.p2pBlocksCompute = p > 1 && !ov.overlapP2pComm;
    sched.p2pSerial = sched.p2pBlocksCompute && plan.framework.name == "deepspeed";
    const int lastVirtual = p * v - 1;
    const PrecisionRecipe recipe = precisionRecipeOf(plan);
    // Gradient buckets per chunk: one per layer.
    auto layersOf = [&](int stage, int chunk) { return sched.layersOf(stage, chunk); };
    sched.stages.resize(static_cast<size_t>(p));

    // Index of send actions, to let receivers depend on them: key (kind, mb, virtual stage of the data) -> (stage,
    // index), (-1, -1) for none. A flat table (2 x m x p v entries): a schedule of hundreds of micro-batches makes
    // thousands of sends, and a tree of them was a measurable share of a long search's simulations.
    using SendKey = std::tuple<int, int, int>;
    const int virtualStages = p * v;
    std::vector<std::pair<int, int>> sends(static_cast<size_t>(2) * static_cast<size_t>(m) * static_cast<size_t>(virtualStages),
                                           {-1, -1});
    auto sendSlot = [&](const SendKey& k) -> std::pair<int, int>& {
        const auto [kind, mb, u] = k;
        return sends[(static_cast<size_t>(kind) * static_cast<size_t>(m) + static_cast<size_t>(mb)) *
                         static_cast<size_t>(virtualStages) + static_cast<size_t>(u)];
    };
    std::vector<std::vector<std::pair<int, SendKey>>> pendingRecvs(static_cast<size_t>(p));
    // Index of the last weight-gradient action of virtual stages 0 and last (tied-embedding sync).
    std::pair<int, int> embeddingLast{-1, -1}, headLast{-1, -1};

    for (int s = 0; s < p; ++s) {
        auto& list = sched.stages[static_cast<size_t>(s)];
        list.stage = s;
        Builder b{model, plan, recipe, list.actions, s};
        const std::vector<Action> order = computeOrder(plan, m, s);
        // The last action per chunk that produces weight gradients, to anchor per-step DP reductions.
        std::map<int, int> lastGradOfChunk; // chunk -> position in `order`
        size_t backwards = 0;
        for (int i = 0; i < static_cast<int>(order.size()); ++i) {
            const auto k = order[static_cast<size_t>(i)].kind;
            if (k == ActionKind::Backward || k == ActionKind::BackwardWeight) {
                lastGradOfChunk[order[static_cast<size_t>(i)].chunk] = i;
                ++backwards;
            }
        }
        // Room for the whole list once, so it is never moved while it grows: each compute action brings a few more
        // (transfers, gathers), each chunk's per-step gradients up to a bucket a layer for each of its dense and expert
        // parts (twice with hybrid sharding's all-reduce across replicas), and under ZeRO-2 every backward as many.
        int stageLayers = 0, chunkLayersMax = 0;
        for (int c = 0; c < v; ++c) {
            stageLayers += layersOf(s, c);
            chunkLayersMax = std::max(chunkLayersMax, layersOf(s, c));
        }
        const size_t bucketsPerBackward = plan.zeroStage == 2 ? static_cast<size_t>(std::max(1, chunkLayersMax)) * (model.moe ? 2 : 1) *
                                                                    (plan.zeroReplicas > 1 ? 2 : 1)
                                                              : 0;
        list.actions.reserve(order.size() * 3 + backwards * bucketsPerBackward + 16 + static_cast<size_t>(4 * stageLayers));
        std::vector<int> gradCollectives;   // indices the optimizer waits for
        int previousCompute = -1;
        // FSDP under torchtitan's pipelining: each chunk gathered once a step, reduced once (fsdpGathersOncePerStep).
        const bool oncePerStep = fsdpGathersOncePerStep(plan.framework, plan.pp, plan.zeroStage);
        // ... and FSDP's no_sync, which gathers every micro-batch but reduces once (fsdpReducesOncePerStep).
        const bool reducesOncePerStep = fsdpReducesOncePerStep(plan.framework, plan.pp, plan.zeroStage);
        std::set<int> gatheredChunks;
        auto zero3Gather = [&](const Action& c, const PartNames& names, bool prefetch) {
            if (plan.zeroStage < 3) return -1;
            if (oncePerStep && (c.kind != ActionKind::Forward || !gatheredChunks.insert(c.chunk).second)) return -1;
            int last = -1;
            forEachShardedPart(chunkParams(model, plan, chunkLayers, s, c.chunk), plan,
                               [&](double params, GroupKind group, bool expertPart) {
                                   Action g = b.collective(names.of(expertPart), group, Primitive::AllGather,
                                                           params * recipe.paramGatherBytes(), c.microBatch, c.chunk, -1);
                                   // Prefetch: the gather may start as soon as the previous compute starts.
                                   // Without (FSDP backward_prefetch=None: "no overlap", PyTorch FSDP docs),
                                   // a unit's gather is issued when its own backward is reached, after the
                                   // previous compute, and its compute waits for all of it (below).
                                   if (previousCompute >= 0)
                                       g.deps.push_back({s, previousCompute, prefetch ? Dependency::When::StartPlus : Dependency::When::End,
                                                         prefetch ? 0.0 : 1.0});
                                   last = b.add(std::move(g));
                               });
            return last;
        };
        // A compute action that uses parameters gathered layer by layer starts once the first layer is there
        // and cannot end before the last layer is, plus that layer's share of the compute.
        auto streamedFrom = [&](int gather, int chunk) {
            const double unit = 1.0 / std::max(1, layersOf(s, chunk));
            return Dependency{s, gather, Dependency::When::StartPlus, unit, unit};
        };
        // Gradient reduction, one bucket per layer. With overlap (DDP hooks, --overlap-grad-reduce, FSDP), bucket j
        // of a backward is ready after (j+1)/buckets of it (layers run last to first); without, every bucket waits
        // for the end of `anchor`.
        // Under ZeRO-3 the executor reduces a chunk's gradients as one flat bucket; FSDP reduce-scatters unit by
        // unit as the backward produces them, so that one action streams behind the backward (it starts after the
        // first layer's gradients and ends no sooner than one layer's share of it after the backward).
        auto gradReduce = [&](int anchor, const Action& c, bool perMicroBatch, bool overlapped) {
            const Primitive prim = gradReducePrimitive(plan, recipe);
            const PartNames names = prim == Primitive::AllReduce ? PartNames{"dp_all_reduce_grads", "dp_all_reduce_grads_expert"}
                                                                 : PartNames{"dp_reduce_scatter_grads", "dp_reduce_scatter_grads_expert"};
            const int n = layersOf(s, c.chunk);
            // (A chunk of no layer, the embedding or the output layer alone, reduces its one tensor as one bucket.)
            const int buckets = plan.zeroStage >= 3 ? 1 : std::max(1, n);
            forEachShardedPart(chunkParams(model, plan, chunkLayers, s, c.chunk), plan,
                               [&](double params, GroupKind group, bool expertPart) {
                                   for (int j = 0; j < buckets; ++j) {
                                       Action r = b.collective(names.of(expertPart), group, prim,
                                                               params * recipe.gradReduceBytes() / buckets,
                                                               perMicroBatch ? c.microBatch : -1, c.chunk, j);
                                       if (buckets == 1 && overlapped && n > 1)
                                           r.deps.push_back(streamedFrom(anchor, c.chunk));
                                       else
                                           r.deps.push_back({s, anchor, Dependency::When::StartPlus,
                                                             overlapped ? static_cast<double>(j + 1) / buckets : 1.0});
                                       const int reduced = b.add(std::move(r));
                                       gradCollectives.push_back(reduced);
                                       // Hybrid sharding: each rank's reduced shard is then all-reduced across the
                                       // replicas (FSDP HYBRID_SHARD's post-backward, Megatron-core's inter-instance
                                       // all-reduce), once the reduce-scatter is done.
                                       if (group == GroupKind::ZeroShard || group == GroupKind::ExpertZeroShard) {
                                           const double shards = plan.zeroReduceGroupSize(expertPart);
                                           Action ar = b.collective(kAcrossReplicas.of(expertPart),
                                                                    zeroGroupKind(plan, expertPart, true), Primitive::AllReduce,
                                                                    params * recipe.gradReduceBytes() / buckets / shards,
                                                                    perMicroBatch ? c.microBatch : -1, c.chunk, j);
                                           ar.deps.push_back({s, reduced, Dependency::When::End, 1.0});
                                           gradCollectives.push_back(b.add(std::move(ar)));
                                       }
                                   }
                               });
        };
        // ZeRO-1/2 with overlap_param_gather: the updated parameters of the previous step are gathered while
        // this step's first forwards run (Megatron-LM --overlap-param-gather), bucket by bucket.
        std::map<int, int> paramGatherOfChunk;
        if ((plan.zeroStage == 1 || plan.zeroStage == 2) && ov.overlapParamGather) {
            for (int c = 0; c < v; ++c)
                forEachShardedPart(chunkParams(model, plan, chunkLayers, s, c), plan, [&](double params, GroupKind group, bool expertPart) {
                    Action g = b.collective(kParamGather.of(expertPart), group, Primitive::AllGather,
                                            params * recipe.paramGatherBytes(), -1, c, -1);
                    paramGatherOfChunk[c] = b.add(std::move(g));
                });
        }
        std::vector<int> deferredChunks;   // chunks whose reduction waits for the stage's last compute

        for (int i = 0; i < static_cast<int>(order.size()); ++i) {
            Action c = order[static_cast<size_t>(i)];
            const int u = plan.virtualStage(s, c.chunk);
            const bool fwd = c.kind == ActionKind::Forward;
            const bool bwdInput = c.kind == ActionKind::Backward || c.kind == ActionKind::BackwardInput;
            // DualPipeV's tip: the last rank's two chunks are neighbours in the model, and pass the activation and
            // its gradient in its own memory, in the order its compute stream runs them.
            auto remote = [&](int other) { return plan.stageOfVirtual(other) != s; };
            int recv = -1;
            if (fwd && u > 0 && remote(u - 1)) {
                recv = b.add(transfer(ActionKind::RecvActivation, c.microBatch, c.chunk, plan.stageOfVirtual(u - 1)));
                pendingRecvs[static_cast<size_t>(s)].push_back({recv, {0, c.microBatch, u - 1}});
            } else if (bwdInput && u < lastVirtual && remote(u + 1)) {
                recv = b.add(transfer(ActionKind::RecvGrad, c.microBatch, c.chunk, plan.stageOfVirtual(u + 1)));
                pendingRecvs[static_cast<size_t>(s)].push_back({recv, {1, c.microBatch, u + 1}});
            }
            // Blocking p2p posts the receive with the send that follows the previous compute action.
            if (recv >= 0 && sched.p2pBlocksCompute && previousCompute >= 0)
                list.actions[static_cast<size_t>(recv)].deps.push_back({s, previousCompute, Dependency::When::End, 1.0});
            int gather = -1;
            // FSDP and ZeRO-3 gather forward parameters ahead of use (the next unit's all-gather is issued while
            // the current one computes); backward gathers are prefetched with backward_prefetch, and skipped
            // when parameters stay gathered from the forward (reshard_after_forward off: SHARD_GRAD_OP).
            const bool prefetched = fwd || ov.backwardPrefetch;
            if (fwd) gather = zero3Gather(c, {"zero3_all_gather_params_fwd", "zero3_all_gather_params_fwd_expert"}, true);
            else if (bwdInput && ov.reshardAfterForward) gather = zero3Gather(c, {"zero3_all_gather_params_bwd", "zero3_all_gather_params_bwd_expert"}, ov.backwardPrefetch);
            if (recv >= 0) c.deps.push_back({s, recv, Dependency::When::End, 1.0});
            // Unprefetched, gather and compute alternate unit by unit; over the chunk that is the sum of the two,
            // which the chunk's compute waiting for its whole gather gives.
            if (gather >= 0) c.deps.push_back(prefetched ? streamedFrom(gather, c.chunk) : Dependency{s, gather, Dependency::When::End, 1.0});
            if (fwd) {
                auto pg = paramGatherOfChunk.find(c.chunk);
                if (pg != paramGatherOfChunk.end()) {
                    c.deps.push_back(streamedFrom(pg->second, c.chunk));
                    paramGatherOfChunk.erase(pg); // only the chunk's first forward waits for it
                }
            }
            const int idx = b.add(c);
            previousCompute = idx;
            if (fwd && u < lastVirtual && remote(u + 1)) {
                Action snd = transfer(ActionKind::SendActivation, c.microBatch, c.chunk, plan.stageOfVirtual(u + 1));
                snd.deps.push_back({s, idx, Dependency::When::End, 1.0});
                sendSlot({0, c.microBatch, u}) = {s, b.add(std::move(snd))};
            }
            if (bwdInput && u > 0 && remote(u - 1)) {
                Action snd = transfer(ActionKind::SendGrad, c.microBatch, c.chunk, plan.stageOfVirtual(u - 1));
                snd.deps.push_back({s, idx, Dependency::When::End, 1.0});
                sendSlot({1, c.microBatch, u}) = {s, b.add(std::move(snd))};
            }
            const bool producesGrads = c.kind == ActionKind::Backward || c.kind == ActionKind::BackwardWeight;
            if (producesGrads) {
                if (reducesOncePerStep) {
                    if (lastGradOfChunk[c.chunk] == i) gradReduce(idx, c, false, true);
                } else if (plan.zeroStage >= 2) gradReduce(idx, c, true, ov.overlapGradReduce);
                else if (lastGradOfChunk[c.chunk] == i) {
                    if (ov.overlapGradReduce) gradReduce(idx, c, false, true);
                    else deferredChunks.push_back(c.chunk);
                }
                if (lastGradOfChunk[c.chunk] == i) {
                    if (u == 0) embeddingLast = {s, idx};
                    if (u == lastVirtual) headLast = {s, idx};
                }
            }
        }
        // Without overlap the reduction runs once the stage's whole backward is done (Megatron-LM's
        // finalize_model_grads after the pipeline schedule).
        for (int chunk : deferredChunks) {
            Action c;
            c.chunk = chunk;
            gradReduce(previousCompute, c, false, false);
        }
        // The optimizer waits for every gradient collective of its stage; the tied-embedding sync and the
        // ZeRO parameter all-gathers are added after all stages exist.
        Action opt;
        opt.kind = ActionKind::OptimizerStep;
        for (int g : gradCollectives) opt.deps.push_back({s, g, Dependency::When::End, 1.0});
        b.add(std::move(opt));
    }

    // Embedding-gradient sync for tied embeddings with the embedding and head on different stages: an all-reduce of
    // the accumulated gradient buffer in place, at its own width (Megatron-LM's main_grad; DeepSpeed's pipeline engine
    // all-reduces the BF16_Optimizer's fp32 _hp_grad, allreduce_tied_weight_gradients, 2022-04 on).
    // (DualPipeV holds both ends on stage 0: nothing crosses stages.)
    if (model.tiedEmbeddings && p > 1 && embeddingLast.first >= 0 && headLast.first >= 0 && embeddingLast.first != headLast.first) {
        const double bytes = static_cast<double>(paddedVocab(model, plan)) * static_cast<double>(model.hidden) /
                             plan.tp * recipe.gradBytes;
        for (const auto& [mine, other] : {std::pair{embeddingLast, headLast}, std::pair{headLast, embeddingLast}}) {
            auto& acts = sched.stages[static_cast<size_t>(mine.first)].actions;
            Action sync;
            sync.kind = ActionKind::Collective;
            sync.name = "embedding_grad_all_reduce";
            sync.group = GroupKind::Pp;
            sync.primitive = Primitive::AllReduce;
            sync.bytes = bytes;
            sync.deps.push_back({mine.first, mine.second, Dependency::When::End, 1.0});
            sync.deps.push_back({other.first, other.second, Dependency::When::End, 1.0});
            // Insert before the optimizer step (the list's last action), which waits for it.
            Action opt = std::move(acts.back());
            acts.pop_back();
            acts.push_back(std::move(sync));
            opt.deps.push_back({mine.first, static_cast<int>(acts.size()) - 1, Dependency::When::End, 1.0});
            acts.push_back(std::move(opt));
        }
    }

    // Gradient clipping by the global norm (Megatron-LM clip_grad_norm_fp32; the executor's Trainer): the norm
    // is all-reduced over every rank, so no stage's optimizer starts before every stage's gradients are
    // complete. Each optimizer also waits for what the other stages' optimizers wait for (their gradient
    // collectives and their last gradient-producing compute).
    if (p > 1) {
        std::vector<std::vector<Dependency>> ready(static_cast<size_t>(p));
        std::vector<int> optIndex(static_cast<size_t>(p), -1);
        for (int s = 0; s < p; ++s) {
            const auto& acts = sched.stages[static_cast<size_t>(s)].actions;
            int lastGrad = -1;
            for (int i = 0; i < static_cast<int>(acts.size()); ++i) {
                const ActionKind k = acts[static_cast<size_t>(i)].kind;
                if (k == ActionKind::Backward || k == ActionKind::BackwardWeight) lastGrad = i;
                if (k == ActionKind::OptimizerStep) optIndex[static_cast<size_t>(s)] = i;
            }
            const int opt = optIndex[static_cast<size_t>(s)];
            if (opt < 0) continue;
            for (const Dependency& d : acts[static_cast<size_t>(opt)].deps)
                if (d.stage == s) ready[static_cast<size_t>(s)].push_back(d);
            if (lastGrad >= 0) ready[static_cast<size_t>(s)].push_back({s, lastGrad, Dependency::When::End, 1.0});
        }
        for (int s = 0; s < p; ++s) {
            const int opt = optIndex[static_cast<size_t>(s)];
            if (opt < 0) continue;
            auto& deps = sched.stages[static_cast<size_t>(s)].actions[static_cast<size_t>(opt)].deps;
            for (int t = 0; t < p; ++t)
                if (t != s) deps.insert(deps.end(), ready[static_cast<size_t>(t)].begin(), ready[static_cast<size_t>(t)].end());
        }
    }

    // ZeRO-1/2: updated parameter shards are all-gathered after the optimizer step (unless overlapped with
    // the next step's forward, above).
    if ((plan.zeroStage == 1 || plan.zeroStage == 2) && !ov.overlapParamGather) {
        for (int s = 0; s < p; ++s) {
            auto& acts = sched.stages[static_cast<size_t>(s)].actions;
            const int opt = static_cast<int>(acts.size()) - 1;
            for (int c = 0; c < v; ++c) {
                forEachShardedPart(chunkParams(model, plan, chunkLayers, s, c), plan,
                                   [&](double params, GroupKind group, bool expertPart) {
                                       Action g;
                                       g.kind = ActionKind::Collective;
                                       g.name = kParamGather.of(expertPart);
                                       g.group = group;
                                       g.primitive = Primitive::AllGather;
                                       g.bytes = params * recipe.paramGatherBytes();
                                       g.chunk = c;
                                       g.deps.push_back({s, opt, Dependency::When::End, 1.0});
                                       acts.push_back(std::move(g));
                                   });
            }
        }
    }

    // Receivers depend on the matching send (the two form one transfer).
    for (int s = 0; s < p; ++s) {
        auto& acts = sched.stages[static_cast<size_t>(s)].actions;
        for (const auto& [idx, key] : pendingRecvs[static_cast<size_t>(s)]) {
            const std::pair<int, int> send = sendSlot(key);
            if (send.first < 0)
                throw RuntimeError("schedule: stage " + std::to_string(s) + " receives micro-batch " +
                                   std::to_string(std::get<1>(key)) + " that no stage sends");
            acts[static_cast<size_t>(idx)].deps.insert(acts[static_cast<size_t>(idx)].deps.begin(),
                                                       {send.first, send.second, Dependency::When::StartPlus, 0.0});
        }
    }
    return sched;
}

double peakInFlight(const StageSchedule& stage, int vpp) {
    // Units forwarded but not yet through their input-gradient backward (ZB-H1's W only needs the
    // smaller inputs of the linear layers, which the memory model does not count separately).
    int live = 0, peak = 0;
    for (const auto& a : stage.actions) {
        if (a.kind == ActionKind::Forward) peak = std::max(peak, ++live);
        else if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) --live;
    }
    return static_cast<double>(peak) / vpp;
}

std::vector<std::string> checkSchedule(const ActionSchedule& sched) {
    std::vector<std::string> problems;
    const Plan& plan = sched.plan;
    const int p = plan.pp, v = plan.vpp, m = sched.microBatches;
    const bool split = plan.schedule == Schedule::ZeroBubble || plan.schedule == Schedule::ZeroBubbleV;
    auto where = [](int s, int i) { return "stage " + std::to_string(s) + " action " + std::to_string(i); };
    std::map<std::tuple<int, int, int, int>, int> transfers; // (dir, mb, from virtual, to virtual) -> +1 send -1 recv
    for (int s = 0; s < p; ++s) {
        const auto& acts = sched.stages[static_cast<size_t>(s)].actions;
        std::map<std::tuple<int, int, int>, int> counts; // (kind, mb, chunk)
        std::set<std::pair<int, int>> forwarded;
        for (int i = 0; i < static_cast<int>(acts.size()); ++i) {
            const Action& a = acts[static_cast<size_t>(i)];
            const int u = plan.virtualStage(s, a.chunk);
            if (isCompute(a.kind) && a.kind != ActionKind::OptimizerStep) {
                ++counts[{static_cast<int>(a.kind), a.microBatch, a.chunk}];
                if (a.kind == ActionKind::Forward) forwarded.insert({a.microBatch, a.chunk});
                else if (!forwarded.count({a.microBatch, a.chunk}))
                    problems.push_back(where(s, i) + ": " + toString(a.kind) + " of micro-batch " +
                                       std::to_string(a.microBatch) + " before its forward");
            }
            if (a.kind == ActionKind::SendActivation) ++transfers[{0, a.microBatch, u, u + 1}];
            if (a.kind == ActionKind::RecvActivation) --transfers[{0, a.microBatch, u - 1, u}];
            if (a.kind == ActionKind::SendGrad) ++transfers[{1, a.microBatch, u, u - 1}];
            if (a.kind == ActionKind::RecvGrad) --transfers[{1, a.microBatch, u + 1, u}];
            for (const auto& d : a.deps) {
                if (d.stage == s && d.index == i) problems.push_back(where(s, i) + ": depends on itself");
                if (d.stage < 0 || d.stage >= p || d.index < 0 ||
                    d.index >= static_cast<int>(sched.stages[static_cast<size_t>(d.stage)].actions.size()))
                    problems.push_back(where(s, i) + ": dependency out of range");
                else if (d.stage == s && d.index > i &&
                         streamOf(acts[static_cast<size_t>(d.index)].kind) == streamOf(a.kind))
                    problems.push_back(where(s, i) + ": waits on a later action of its own stream");
            }
        }
        for (int mb = 0; mb < m; ++mb)
            for (int c = 0; c < v; ++c) {
                auto expect = [&](ActionKind k) {
                    const int got = counts[{static_cast<int>(k), mb, c}];
                    if (got != 1)
                        problems.push_back("stage " + std::to_string(s) + ": " + toString(k) + " of micro-batch " +
                                           std::to_string(mb) + " chunk " + std::to_string(c) + " runs " +
                                           std::to_string(got) + " times");
                };
                expect(ActionKind::Forward);
                // DualPipeV splits some backwards (zero bubble) and runs others whole.
                const bool splitHere = split || (plan.schedule == Schedule::DualPipeV &&
                                                 counts[{static_cast<int>(ActionKind::BackwardInput), mb, c}] > 0);
                if (splitHere) {
                    expect(ActionKind::BackwardInput);
                    expect(ActionKind::BackwardWeight);
                } else {
                    expect(ActionKind::Backward);
                }
            }
        // Neighbouring virtual stages on one stage (a V's tip) hand over through its compute order: the later chunk's
        // forward after the earlier's, the earlier's backward after the later's.
        std::map<std::tuple<bool, int, int>, int> at; // (backward, micro-batch, chunk) -> position
        for (int i = 0; i < static_cast<int>(acts.size()); ++i) {
            const ActionKind k = acts[static_cast<size_t>(i)].kind;
            if (k == ActionKind::Forward || k == ActionKind::Backward || k == ActionKind::BackwardInput)
                at[{k != ActionKind::Forward, acts[static_cast<size_t>(i)].microBatch, acts[static_cast<size_t>(i)].chunk}] = i;
        }
        for (int lo = 0; lo < v; ++lo)
            for (int hi = 0; hi < v; ++hi) {
                const int u = plan.virtualStage(s, lo);
                if (plan.virtualStage(s, hi) != u + 1) continue;
                for (int mb = 0; mb < m; ++mb) {
                    auto pos = [&](bool bwd, int chunk) { auto it = at.find({bwd, mb, chunk}); return it == at.end() ? -1 : it->second; };
                    const std::string who = "stage " + std::to_string(s) + ": micro-batch " + std::to_string(mb);
                    if (pos(false, hi) >= 0 && pos(false, hi) < pos(false, lo))
                        problems.push_back(who + " enters virtual stage " + std::to_string(u + 1) + " before leaving " + std::to_string(u));
                    if (pos(true, lo) >= 0 && pos(true, lo) < pos(true, hi))
                        problems.push_back(who + "'s gradient reaches virtual stage " + std::to_string(u) + " before leaving " +
                                           std::to_string(u + 1));
                }
            }
        const double inFlight = peakInFlight(sched.stages[static_cast<size_t>(s)], v);
        const double model = inFlightMicroBatches(plan, s);
        if (std::abs(inFlight - model) > 1e-9)
            problems.push_back("stage " + std::to_string(s) + ": " + std::to_string(inFlight) +
                               " micro-batches in flight, the memory model counts " + std::to_string(model));
        // With chunks of unequal layers, the layers in flight at the peak (the order's, against the memory model's
        // walk of the same schedule).
        if (plan.schedule == Schedule::Interleaved1F1B && sched.chunkLayers.size() == static_cast<size_t>(p * v)) {
            std::vector<int> layersOf(static_cast<size_t>(v));
            for (int c = 0; c < v; ++c) layersOf[static_cast<size_t>(c)] = sched.layersOf(s, c);
            double live = 0.0, peakLayers = 0.0;
            for (const auto& a : acts) {
                if (a.kind == ActionKind::Forward) peakLayers = std::max(peakLayers, live += layersOf[static_cast<size_t>(a.chunk)]);
                else if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) live -= layersOf[static_cast<size_t>(a.chunk)];
            }
            const InFlightLayers walk = inFlightLayers(plan, layersOf, s);
            const double modelLayers = std::max(walk.withHead, walk.withoutHead);
            if (std::abs(peakLayers - modelLayers) > 1e-9)
                problems.push_back("stage " + std::to_string(s) + ": " + std::to_string(peakLayers) +
                                   " layers in flight at the peak, the memory model counts " + std::to_string(modelLayers));
        }
    }
    for (const auto& [key, balance] : transfers)
        if (balance != 0)
            problems.push_back(std::string(std::get<0>(key) == 0 ? "activation" : "gradient") + " of micro-batch " +
                               std::to_string(std::get<1>(key)) + " from virtual stage " + std::to_string(std::get<2>(key)) +
                               (balance > 0 ? " is sent but never received" : " is received but never sent"));
    return problems;
}

} // namespace tessel::sim
