// What memory.cpp's stage totals share with one layer's activations (layer_activations.cpp): internal to libtessel_cost.
#pragma once

#include "tessel/cost/shapes.hpp"

namespace tessel {

// What an eager RMSNorm keeps per element beside its input (fused_kernels off: x.float() and the normalised value
// before the weight, FORMULAS.md §2 "Eager ops"); a fused norm or a LayerNorm keeps its input only.
double eagerNormExtraBytes(const ModelConfig& model, const Plan& plan, double residualBytes);
// The MLP block's GEMM width per token of the layer: the dense MLP's, or the routed experts' rows (expertTokens, each
// expertFfnLocal wide) spread over the layer's T tokens plus the shared experts'.
double mlpWidthPerToken(const ModelConfig& model, const LocalShapes& s);

} // namespace tessel
