// Shared by the compute tests: a block's forward op by name (it must be there), a layer's collectives' bytes
// by name, a small TP case, the FP8 and NVFP4 tests' layer, and the tp 2 plan the hand-counted layer tests
// share.
#pragma once

#include "tessel/cost/compute.hpp"
#include "tessel/cost/traffic.hpp"
#include "test_support.hpp"

#include <map>
#include <stdexcept>
#include <string>

namespace tessel::test {

inline const OpCost& forwardOpNamed(const BlockCompute& b, const std::string& name) {
    if (const OpCost* op = findOp(b, name)) return *op;
    throw std::runtime_error("no op " + name);
}

// A layer's TP, CP and EP collectives by name: the bytes each moves.
inline std::map<std::string, double> layerCommBytesByName(const ModelConfig& m, const ClusterConfig& c,
                                                          const Plan& p) {
    std::map<std::string, double> out;
    for (const auto& op : layerCommOps(m, c, p))
        out[op.name] = op.bytes;
    return out;
}

// A 4-layer model of hidden 1024 (16 heads), sequence 2048, at tp 4 x dp 2 and micro-batch 2 on 8 GPUs.
struct Tp4Case {
    ModelConfig m = test::megatronStyleModel(4, 1024, 16, 51200, 2048);
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    Tp4Case() {
        p.tp = 4;
        p.dp = 2;
        p.microBatch = 2;
    }
};

// The FP8 and NVFP4 tests' layer: four layers of hidden 4096 (T = 4096 tokens a micro-batch), tp 2 with SP over a
// round cluster whose FP8 peak is twice its bf16 one and whose FP4 peak is twice that.
struct QuantizedLayerCase {
    ModelConfig m = test::megatronStyleModel(4, 4096, 32, 32000, 4096);
    ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    QuantizedLayerCase() {
        m.dropout = 0.0;
        c.gpu.peakFlopsPerSecond[Dtype::Fp8] = 2e15;
        c.gpu.peakFlopsPerSecond[Dtype::Fp4] = 4e15;
        p.tp = 2;
        p.dp = 4;
        p.globalBatch = 8;
        p.sequenceParallel = true;
    }
};

// tp 2 x dp 4 on one node of 8, one sequence a rank: the plan the hand-counted layer tests below share.
inline Plan tp2OnEight() {
    Plan p;
    p.tp = 2;
    p.dp = 4;
    p.globalBatch = 4;
    return p;
}

} // namespace tessel::test
