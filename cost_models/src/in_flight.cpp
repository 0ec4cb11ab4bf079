// Micro-batches and layers a pipeline stage holds in flight at its peak, schedule by schedule (FORMULAS.md §2, §5.4):
// the count the memory model multiplies its per-micro-batch activations by.
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

namespace tessel {

double inFlightMicroBatches(const Plan& plan, int stage) {
    const double m = plan.microBatchesPerStep();
    const double p = plan.pp;
    switch (plan.schedule) {
    case Schedule::Gpipe: return m;
    case Schedule::OneFOneB:
    case Schedule::ZeroBubble: return std::min(m, p - stage);
    case Schedule::Interleaved1F1B: {
        const double v = plan.vpp;
        // Megatron-LM schedules.py: num_warmup_microbatches = (p - rank - 1) * 2 + (v - 1) * p, then one
        // more enters before the first backward frees one; counted in model chunks of L/(p v) layers.
        // With m == p Megatron before core 0.10 ran every forward first (interleavedAllForwardsFirstWhenMEqualsP).
        const bool allFirst = m == p && interleavedAllForwardsFirstWhenMEqualsP(plan.framework);
        const double chunks = allFirst ? m * v : std::min(m * v, (p - stage - 1.0) * 2.0 + (v - 1.0) * p + 1.0);
        return chunks / v;
    }
    case Schedule::DualPipeV:
        // PyTorch's ScheduleDualPipeV (DeepSeek's DualPipe cut in half), m >= 2 p: every rank's peak is 2 p + 1
        // chunk forwards not yet through their input-gradient backward (the DualPipe README's "PP + 1" in its
        // units), counted in model chunks of L / (2 p) layers.
        return (2.0 * p + 1.0) / 2.0;
    case Schedule::ZeroBubbleV:
        // PyTorch's ScheduleZBVZeroBubble (padded to 2p - 1 micro-batches, the extra ones dropped): min(m + s + 1,
        // 2m, 2p) chunk forwards not yet through their input-gradient backward at stage s's peak (found by running
        // the order, the ZB paper's "same peak as 1F1B" at m >= 2p - 1), in chunks of L / (2p) layers.
        return std::min({m + stage + 1.0, 2.0 * m, 2.0 * p}) / 2.0;
    }
    return m;
}

InFlightLayers inFlightLayers(const ModelConfig& model, const Plan& plan, int stage) {
    const int v = std::max(plan.vpp, 1);
    if (v == 1 || plan.schedule != Schedule::Interleaved1F1B) { // one chunk a rank, or a V: no walk
        const double n = inFlightMicroBatches(plan, stage) * stageLayerCount(model, plan, stage);
        return {n, n, false};
    }
    std::vector<int> chunk(static_cast<size_t>(v));
    for (int c = 0; c < v; ++c) chunk[static_cast<size_t>(c)] = chunkLayerCount(model, plan, stage, c);
    return inFlightLayers(plan, chunk, stage);
}

InFlightLayers inFlightLayers(const Plan& plan, const std::vector<int>& chunk, int stage) {
    const int v = std::max(plan.vpp, 1);
    const double layers = std::accumulate(chunk.begin(), chunk.end(), 0.0);
    const bool equal = std::adjacent_find(chunk.begin(), chunk.end(), std::not_equal_to<>()) == chunk.end();
    const double m = plan.microBatchesPerStep();
    const int p = plan.pp;
    if (equal || plan.schedule != Schedule::Interleaved1F1B || (m == p && interleavedAllForwardsFirstWhenMEqualsP(plan.framework))) {
        const double n = inFlightMicroBatches(plan, stage) * layers;
        return {n, n, false};
    }
    // Megatron-LM's interleaved order (schedules.py; the simulator's computeOrder): forward k runs chunk (k / p) % v,
    // backward k chunk v - 1 - (k / p) % v; the warmup's forwards, then one forward and one backward at a time. The
    // peak is right after a forward. Past the warmup the chunk sequence repeats every p v passes with no net change
    // (p forwards and p backwards of each chunk), so one period of the steady phase holds its peak.
    const int total = static_cast<int>(m) * v;
    const int warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
    // The model's last virtual stage (the output layer and loss) is chunk v - 1 of the last rank: whether one of its
    // passes is alive at each moment is tracked beside the layers.
    const bool headRank = plan.holdsHead(stage);
    auto fwdChunk = [&](int k) { return (k / p) % v; };
    auto bwdChunk = [&](int k) { return v - 1 - (k / p) % v; };
    double held = 0.0;
    int heads = 0;
    auto take = [&](int c, int sign) {
        held += sign * chunk[static_cast<size_t>(c)];
        if (headRank && c == v - 1) heads += sign;
    };
    InFlightLayers r;
    r.interleavedWalk = true;
    auto note = [&] { (heads > 0 ? r.withHead : r.withoutHead) = std::max(heads > 0 ? r.withHead : r.withoutHead, held); };
    for (int k = 0; k < warmup; ++k) take(fwdChunk(k), +1);
    note();
    for (int j = 0; j < std::min(total - warmup, p * v); ++j) {
        take(fwdChunk(warmup + j), +1);
        note();
        take(bwdChunk(j), -1);
    }
    return r;
}

double peakInFlightLayers(const ModelConfig& model, const Plan& plan, int stage) {
    const InFlightLayers r = inFlightLayers(model, plan, stage);
    return std::max(r.withHead, r.withoutHead);
}

} // namespace tessel
