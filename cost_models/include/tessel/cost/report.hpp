// The full cost-model prediction of a scenario (memory per stage, compute and communication per layer),
// as data and as the JSON that `tessel predict --json` prints.
#pragma once

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/cost/traffic.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <vector>

namespace tessel {

struct CostPrediction {
    MemoryReport memory;
    BlockCompute layer;            // one transformer layer, one micro-batch, one rank
    std::optional<BlockCompute> denseLayer; // an MoE model's dense layers (moe.dense_layers), the same way
    std::optional<BlockCompute> fullAttentionLayer; // a windowed model's full-attention layers, the same way
    BlockCompute embedding;
    BlockCompute head;
    // A multi-token-prediction module's own ops (model.mtpLayers > 0), beside its layer and the head it runs again.
    std::optional<BlockCompute> mtpModule;
    std::vector<OpCost> optimizerPerStage;
    std::vector<CommOp> layerComm;             // per layer per micro-batch
    std::vector<CommOp> pipelineComm;          // per micro-batch per stage boundary
    std::vector<std::vector<CommOp>> dpComm;   // per stage
    int64_t parameters = 0;
    int64_t activeParameters = 0;
    double modelFlopsPerStep = 0.0;
};

// Evaluates every part of the cost model. The scenario's plan must be valid (finishScenario).
CostPrediction predictCosts(const Scenario& scenario);

nlohmann::json memoryToJson(const MemoryReport& m);
nlohmann::json opToJson(const OpCost& op);
nlohmann::json blockToJson(const BlockCompute& b);
nlohmann::json commOpToJson(const CommOp& op);
// {"scenario": ..., "model": {...}, "memory": {...}, "compute": {...}, "communication": {...}}
nlohmann::json predictionToJson(const Scenario& scenario, const CostPrediction& p);

} // namespace tessel
