// Parameters one rank holds, per transformer layer, embedding, head, MTP module, pipeline stage and virtual chunk.
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

#include <vector>

namespace tessel {

// Parameters held by one rank of a pipeline stage before ZeRO sharding, split by how they are sharded:
// dense parameters shard over dp (or dp x cp); expert parameters over dp/ep (or dp/ep x cp).
struct StageParameters {
    double dense = 0.0;
    double expert = 0.0;
    double largestLayer = 0.0;   // parameters of the largest layer on the stage (ZeRO-3 gather granularity)
    double total() const { return dense + expert; }
};

// Parameters one rank holds for one transformer layer (after TP/EP splits), for the word embedding (+ learned
// positions) and for the LM head + final norm (the head counts the word embedding only when untied or pp > 1).
StageParameters layerParameters(const ModelConfig& model, const Plan& plan);
double embeddingParameters(const ModelConfig& model, const Plan& plan);
double headParameters(const ModelConfig& model, const Plan& plan);
// The multi-token-prediction modules on the rank holding the output layer (model.mtpLayers; Megatron-core's
// MultiTokenPredictionBlock on the last pipeline stage): each its layer (of the last layer's kind, experts sharded as
// the model's), enorm, hnorm, eh_proj (2h x h, column-parallel) and final norm; and the word embedding it looks the
// next tokens up in, where that rank does not hold the model's (untied; Megatron-core builds it on the MTP stage).
StageParameters mtpParameters(const ModelConfig& model, const Plan& plan);

// Parameters of one rank of pipeline stage `stage` (0-based) under TP/PP/EP: its layers (vpp chunks
// included), the embedding on stage 0, the LM head and final norm on the last stage (with tied embeddings
// and pp > 1 the last stage keeps its own copy of the word embedding, as Megatron-LM does).
StageParameters stageParameters(const ModelConfig& model, const Plan& plan, int stage);
// The parameters of chunk `chunk` of pipeline rank `stage` (its layers, the embedding on virtual stage 0, the head on
// the last), each layer at its kind: an MoE model's dense layers hold the dense MLP.
StageParameters chunkParameters(const ModelConfig& model, const Plan& plan, int stage, int chunk);
// The same from the plan's chunk layer counts already in hand (chunkLayerCounts).
StageParameters chunkParameters(const ModelConfig& model, const Plan& plan, const std::vector<int>& chunkLayers, int stage,
                                int chunk);

} // namespace tessel
