// The ZeRO-3 gather term and what the memory model shares with it (internal to the cost model library).
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

namespace tessel {

// Parameters the stage holds gathered at its peak under ZeRO-3 (zero3_gather.cpp).
double zero3GatherParameters(const ModelConfig& model, const Plan& plan, int stage);
// DeepSpeed's largest module's parameters (its whole gradient is autograd's before stage3.py's hook buckets it).
double deepSpeedLargestModuleParameters(const ModelConfig& model, const Plan& plan);
// A dense layer's linear modules on one rank with their biases (standard attention, the model's dense MLP): the units
// DeepSpeed's ZeRO-3 gathers one at a time; with the layer's norms they sum to its parameters (memory.cpp).
struct LinearModules {
    double qkv = 0.0, proj = 0.0, fc1 = 0.0, fc2 = 0.0;
};
LinearModules denseLinearModules(const ModelConfig& model, const Plan& plan);
// The word embedding the MTP modules look the next tokens up in, where the output layer's rank lacks the model's
// (memory.cpp).
double mtpEmbeddingCopy(const ModelConfig& model, const Plan& plan);

} // namespace tessel
