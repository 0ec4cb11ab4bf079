// Shared helpers for cost-model tests: small hand-made models and clusters, preset loading.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/scenario.hpp"

#include <string>

namespace tessel::test {

// A GPT-style model matching the assumptions of Megatron-LM's theoretical memory formula: MHA, GELU,
// ffn = 4h, LayerNorm, dropout masks, no linear biases, no learned positions (so the parameter count is
// exactly the formula's).
inline ModelConfig megatronStyleModel(int layers, int64_t hidden, int heads, int64_t vocab, int64_t seq) {
    ModelConfig m;
    m.name = "megatron-style";
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kvHeads = heads;
    m.headDim = hidden / heads;
    m.ffnHidden = 4 * hidden;
    m.vocab = vocab;
    m.seqLen = seq;
    m.activation = Activation::Gelu;
    m.norm = NormKind::LayerNorm;
    m.position = PositionEmbedding::Rope;
    m.tiedEmbeddings = true;
    m.linearBias = false;
    m.dropout = 0.1;
    return m;
}

// Llama-3-8B's attention shapes in a two-layer model: hidden 4096, 32 heads of 128, 8 kv heads, sequence 8192, no
// dropout (the context-parallel tests).
inline ModelConfig gqaModel() {
    ModelConfig m = megatronStyleModel(2, 4096, 32, 128256, 8192);
    m.kvHeads = 8;
    m.dropout = 0.0;
    return m;
}

// A cluster with round numbers: 80 GiB GPUs, 1e15 FLOP/s bf16, 2e12 B/s HBM, perfect efficiency.
inline ClusterConfig roundCluster(int gpusPerNode, int nodes) {
    ClusterConfig c;
    c.name = "round";
    c.gpusPerNode = gpusPerNode;
    c.nodes = nodes;
    c.gpu.name = "round-gpu";
    c.gpu.memoryBytes = int64_t{80} << 30;
    c.gpu.reservedBytes = int64_t{1} << 30;
    c.gpu.hbmBytesPerSecond = 2e12;
    c.gpu.memoryEfficiency = 1.0;
    c.gpu.kernelOverheadSeconds = 0.0;
    c.gpu.peakFlopsPerSecond = {{Dtype::Bf16, 1e15}, {Dtype::Fp16, 1e15}, {Dtype::Fp32, 1e14}, {Dtype::Fp64, 5e13}};
    c.intraNode = {"nvlink", 4e11, 2e-6, 1.0, {}};
    c.interNode = {"ib", 5e10, 5e-6, 1.0, {}};
    return c;
}

inline ModelConfig preset(const std::string& name) { return loadModelRef(name, "test"); }
inline ClusterConfig clusterPreset(const std::string& name) { return loadClusterRef(name, "test"); }

// A plan of tp x pp x dp ranks and its batch, every other field at its default; `framework` and `version` name
// whose defaults it runs with.
inline Plan plan3d(int tp, int pp, int dp, int microBatch, int globalBatch, const std::string& framework = "megatron",
                   const std::string& version = "") {
    Plan p;
    p.tp = tp;
    p.pp = pp;
    p.dp = dp;
    p.microBatch = microBatch;
    p.globalBatch = globalBatch;
    p.framework.name = framework;
    p.framework.version = version;
    return p;
}

// What the InputError `f` throws says, or "" where it throws none: a test checks the pointer it must name.
template <class F> std::string inputErrorOf(F&& f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    return {};
}

inline double relDiff(double a, double b) { return std::abs(a - b) / std::max(std::abs(a), std::abs(b)); }

// A block's forward op by name, or null.
inline const OpCost* findOp(const BlockCompute& b, const std::string& name) {
    for (const auto& op : b.forwardOps)
        if (op.name == name) return &op;
    return nullptr;
}

} // namespace tessel::test
