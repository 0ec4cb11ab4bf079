// The GPT model of the executor, written once against Backend and Comm: token + position embedding or RoPE,
// pre-norm LayerNorm/RMSNorm, causal GQA attention, GELU or SwiGLU MLP, tied or untied LM head, vocab-parallel
// cross-entropy; Megatron-style tensor parallelism (column/row pairs) with optional sequence parallelism;
// the layers of this rank's pipeline chunks; full recompute; ZB-H1's split backward.
// Mixture-of-experts MLPs (top-k routing, experts sharded over EP, dispatch/combine all-to-all; tp 1 only).
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/exec/backend.hpp"
#include "tessel/exec/context.hpp"
#include "tessel/exec/params.hpp"

#include <map>
#include <memory>
#include <vector>

namespace tessel::exec {

// Under ZeRO-3 a parameter's full value is resident only while it is used: the model announces each unit of
// a chunk before and after it runs, and the runtime gathers the unit's values (prefetching the next) and
// releases them. Units, in forward order: the embedding (where the chunk has it), each layer, the head (final
// norm and LM head, where it has it); a backward pass visits them in reverse.
class ParameterResidency {
public:
    virtual ~ParameterResidency() = default;
    virtual void beforeUnit(int chunk, int unit, bool backward) = 0;
    virtual void afterUnit(int chunk, int unit, bool backward) = 0;
};

// One micro-batch of training data as every rank sees it: `sequences` rows of `seqLen` tokens and the
// next-token targets, sequence-major.
struct MicroBatchData {
    int64_t sequences = 0;
    int64_t seqLen = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> targets;
    // Dropout's coordinates (dropout.hpp): the step's index of the first sequence (data-parallel replica d of D
    // starts at d B / D, whatever the plan) and the step's key, so that every plan drops the same elements.
    int64_t firstSequence = 0;
    uint64_t dropoutKey = 0;
};

class GptModel {
public:
    GptModel(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, uint64_t seed);
    ~GptModel();
    GptModel(const GptModel&) = delete;
    GptModel& operator=(const GptModel&) = delete;

    std::vector<Parameter>& parameters() { return params_; }
    int chunks() const;
    // Global layer indices [first, last) of chunk `chunk` on this rank.
    std::pair<int, int> chunkLayers(int chunk) const;
    bool chunkHasEmbedding(int chunk) const;
    bool chunkHasHead(int chunk) const;
    // Indices into parameters() of the parameters whose gradients are ready after (bucket+1)/buckets of
    // chunk `chunk`'s backward: bucket j holds the chunk's (n-1-j)-th layer (backward runs layers in
    // reverse), the head joins bucket 0 and the embedding the last bucket. Matches the schedule's buckets.
    // `expert` selects the layer's expert parameters (reduced over the expert data-parallel group) instead of
    // the dense ones (the router is dense); head and embedding are dense. A chunk of no layer (the embedding
    // or the head alone) has one bucket.
    std::vector<int> bucketParameters(int chunk, int bucket, bool expert) const;
    // Buckets of chunk `chunk`: one a layer, at least one (the schedule's gradReduce).
    int bucketsPerChunk(int chunk) const;
    // Indices into parameters() of the parameters each unit of chunk `chunk` uses, units in forward order
    // (see ParameterResidency). A tied word embedding on a rank holding both ends is in two units.
    std::vector<std::vector<int>> parameterUnits(int chunk) const;
    // Announce every unit's use to `residency` (nullptr: the values are always resident). Not owned.
    void setParameterResidency(ParameterResidency* residency);
    // Rows of the hidden state one rank exchanges between stages: b*s (/tp with sequence parallelism).
    int64_t hiddenRows() const;

    // Forward of `chunk` for micro-batch `mb`; `input` [hiddenRows, h] from the previous virtual stage
    // (ignored on virtual stage 0, which embeds data.tokens). Returns the output hidden state, or an undefined
    // tensor on the last virtual stage, where the micro-batch's token losses are added to the loss sum.
    Tensor forward(int mb, int chunk, const Tensor& input, const MicroBatchData& data);
    // Backward; `gradOutput` is ignored on the last virtual stage. Returns the gradient of the input
    // (undefined on virtual stage 0). With deferWeights (ZB-H1's B pass) the GEMM weight gradients wait for
    // backwardWeight (the W pass). Gradients accumulate; the loss is scaled by 1 / (global batch x seq).
    Tensor backward(int mb, int chunk, const Tensor& gradOutput, bool deferWeights);
    void backwardWeight(int mb, int chunk);

    // Sum of the token losses this rank computed since the last call (last stage; 0 elsewhere).
    double takeLossSum();
    // Micro-batch activations still held (for tests of the schedules' in-flight counts).
    size_t liveActivationSets() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::vector<Parameter> params_;
};

} // namespace tessel::exec
