// Compute cost: FLOPs and HBM bytes of every operation of a layer, embedding, LM head, loss and optimizer;
// time from a roofline with the GPU's shape-dependent GEMM efficiency.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/shapes.hpp"

#include <string>
#include <vector>

namespace tessel {

enum class OpClass { Gemm, Attention, Memory };

// One operation on one rank for one micro-batch. A GEMM is (m x k) @ (k x n).
struct OpCost {
    std::string name;
    OpClass opClass = OpClass::Memory;
    double flops = 0.0;          // floating-point operations actually executed
    double modelFlops = 0.0;     // operations counted for MFU (attention as full, non-causal; see FORMULAS.md §3)
    double bytes = 0.0;          // HBM traffic
    int64_t m = 0, n = 0, k = 0; // GEMM shape; for attention (s_q, s_kv, head_dim)
    double seconds = 0.0;        // roofline time, filled by costOps
};

// The three compute phases the schedules use. backward = backwardInput + backwardWeight.
// `flops` are what the kernels execute (causal flash attention at half) and set the time; `modelFlops` follow
// the MFU convention; `hardwareFlops` are model-convention FLOPs of everything executed, recompute included
// (HFU's numerator, Korthikanti et al. 2022 §5), so hardwareFlops >= modelFlops.
struct PhaseCost {
    double seconds = 0.0;
    double flops = 0.0;
    double modelFlops = 0.0;
    double hardwareFlops = 0.0;
    void add(const OpCost& op, double factor = 1.0) {
        seconds += op.seconds * factor;
        flops += op.flops * factor;
        modelFlops += op.modelFlops * factor;
        hardwareFlops += op.modelFlops * factor;
    }
    PhaseCost& operator+=(const PhaseCost& o) {
        seconds += o.seconds;
        flops += o.flops;
        modelFlops += o.modelFlops;
        hardwareFlops += o.hardwareFlops;
        return *this;
    }
};

// Cost of a block (one transformer layer, the embedding, or the LM head + loss) for one micro-batch.
struct BlockCompute {
    std::vector<OpCost> forwardOps;
    PhaseCost forward;           // forward pass
    PhaseCost backwardInput;     // gradients w.r.t. inputs (and all non-GEMM backward work)
    PhaseCost backwardWeight;    // gradients w.r.t. weights (GEMM dW)
    PhaseCost recompute;         // extra forward work redone in backward under the plan's recompute mode
    PhaseCost backward() const {
        PhaseCost b = backwardInput;
        b += backwardWeight;
        return b;
    }
};

// Roofline time of one op: max(flops / (peak x efficiency), bytes / (HBM x memory efficiency)) + overhead.
double opSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype);

BlockCompute layerCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                          const PrecisionRecipe& recipe);
BlockCompute embeddingCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                              const PrecisionRecipe& recipe);
BlockCompute headCompute(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                         const PrecisionRecipe& recipe);
// AdamW over `localParameters` parameters held by this rank's optimizer (after ZeRO sharding).
OpCost optimizerCompute(double localParameters, const ClusterConfig& cluster, const PrecisionRecipe& recipe);

// Model FLOPs of one training step (forward + backward, no recompute) for the whole model and global batch,
// the numerator of MFU: 3 x the forward model FLOPs of every layer, the embedding and the LM head.
double modelFlopsPerStep(const ModelConfig& model, const Plan& plan);

} // namespace tessel
