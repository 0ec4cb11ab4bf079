// Time of one kernel on the GPU: the roofline of its FLOPs and bytes with the GEMM shape model, the fused attention
// kernels' benchmark curves and the sustained tensor-core share, or a calibrated fit (FORMULAS.md §3.1-§3.3). Which
// kernels a layer is made of is compute.cpp's.
#include "tessel/cost/compute.hpp"

#include "compute_ops.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

namespace tessel {
using compute_detail::d;

namespace {
double kernelSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype, double tensorShare) {
    const auto& gpu = cluster.gpu;
    double overheadSeconds = gpu.kernelOverheadSeconds;
    if (!op.kernel.empty()) {
        const auto it = gpu.kernels.find(op.kernel);
        if (it != gpu.kernels.end()) {
            // Calibrated (FORMULAS.md §7): a straight line in the quantity the kernel was benchmarked against.
            const KernelFit& f = it->second;
            if (f.scoreGemms && op.opClass == OpClass::Attention) {
                // The executor's GEMM attention: its own counts from the op's shape (m queries, n keys, k head
                // dim, batch = sequences x query heads), not the fused kernel's.
                const int e = static_cast<int>(bytesPerElement(op.dtype ? *op.dtype : dtype));
                const double flops = kernel_cost::scoreGemmFlops(1, op.batch, op.m, op.n, op.k, op.backward);
                const double bytes = kernel_cost::scoreGemmBytes(1, op.batch, op.m, op.n, op.k, e, op.backward);
                const int64_t sequences = std::max<int64_t>(op.sequences, 1);
                const int64_t heads = std::max<int64_t>(op.batch / sequences, 1);
                const double steps = static_cast<double>(kernel_cost::scoreGemmSteps(
                    sequences, heads, op.kvHeads > 0 ? op.kvHeads : heads, op.m, op.n, e));
                return f.overheadSeconds + f.stepSeconds * steps +
                       (f.bytesPerSecond > 0.0 ? bytes / f.bytesPerSecond : 0.0) +
                       (f.flopsPerSecond > 0.0 ? flops / f.flopsPerSecond : 0.0);
            }
            if ((f.bytesPerSecond > 0.0 || f.flopsPerSecond > 0.0) && op.opClass != OpClass::Gemm)
                return f.overheadSeconds + (f.bytesPerSecond > 0.0 ? op.bytes / f.bytesPerSecond : 0.0) +
                       (f.flopsPerSecond > 0.0 ? op.flops / f.flopsPerSecond : 0.0);
            overheadSeconds = f.overheadSeconds;
        }
    }
    double computeSeconds = 0.0;
    if (op.dtype) dtype = *op.dtype;
    if (op.flops > 0.0) {
        const double peak = cluster.peakFlops(dtype);
        double eff = 1.0, dropoutFactor = 1.0;
        if (op.opClass == OpClass::Gemm) {
            eff = gemmEfficiency(gpu, op.m, op.n, op.k, dtype, op.batch, op.perHead);
        } else if (op.opClass == OpClass::Attention) {
            const auto spec = gpu.attentionKernels.find(resolveAttentionKernel(gpu, op.variant));
            if (spec != gpu.attentionKernels.end()) {
                // A fused attention kernel's measured efficiency, lower for short key ranges (FORMULAS.md §3.2).
                eff = attentionKernelEfficiency(spec->second, op.k, op.n, op.backward, op.causal);
                // Attention dropout inside the kernel, where its cost was measured (§3.2).
                const double f = op.backward ? spec->second.dropoutBackwardTimeFactor : spec->second.dropoutForwardTimeFactor;
                if (op.dropout && f > 0.0) dropoutFactor = f;
            } else {
                eff = gemmEfficiency(gpu, op.m, op.n, op.k, dtype); // tiles of (queries x keys x head_dim)
            }
        }
        // Tensor-core kernels run at the share of their benchmarked throughput a training step sustains (§3.3);
        // fp32 GEMMs on the CUDA cores keep their benchmarked rate (measured, runsOnTensorCores).
        if ((op.opClass == OpClass::Gemm || op.opClass == OpClass::Attention) && runsOnTensorCores(dtype))
            eff *= tensorShare;
        computeSeconds = dropoutFactor * op.flops / (peak * eff);
    }
    const double memorySeconds = op.bytes / (gpu.hbmBytesPerSecond * gpu.memoryEfficiency);
    // Roofline (Williams, Waterman & Patterson 2009): an op is bound by the slower of compute and memory.
    return std::max(computeSeconds, memorySeconds) + overheadSeconds;
}
// A benchmark quantity at `keys`: linear in log2(keys) between the benchmark's sequence lengths, the last value
// above them, and the first scaled by the kernel's s/(s + seqHalf) ramp below them.
double atKeys(const AttentionBenchmark& b, const std::vector<double>& v, double keys, double seqHalf) {
    const double first = d(b.seq.front());
    if (keys <= first) return v.front() * (keys / (keys + seqHalf)) / (first / (first + seqHalf));
    if (keys >= d(b.seq.back())) return v.back();
    size_t i = 0;
    while (d(b.seq[i + 1]) < keys) ++i;
    const double t = std::log2(keys / d(b.seq[i])) / std::log2(d(b.seq[i + 1]) / d(b.seq[i]));
    return v[i] + t * (v[i + 1] - v[i]);
}

// The benchmark's FLOP/s for (causal, backward) at headDim and keys: linear in head dimension between the curves
// that have it, held beyond the outermost; empty when no curve has it.
std::optional<double> benchmarkRate(const AttentionBenchmark& b, bool causal, bool backward, double headDim,
                                    double keys, double seqHalf) {
    std::vector<std::pair<double, double>> byDim; // (head dim, rate at keys)
    for (const auto& c : b.curves) {
        const auto& v = backward ? c.backwardFlopsPerSecond : c.forwardFlopsPerSecond;
        if (c.causal == causal && !v.empty()) byDim.emplace_back(d(c.headDim), atKeys(b, v, keys, seqHalf));
    }
    if (byDim.empty()) return std::nullopt;
    std::sort(byDim.begin(), byDim.end());
    if (headDim <= byDim.front().first) return byDim.front().second;
    if (headDim >= byDim.back().first) return byDim.back().second;
    size_t i = 0;
    while (byDim[i + 1].first < headDim) ++i;
    const double t = (headDim - byDim[i].first) / (byDim[i + 1].first - byDim[i].first);
    return byDim[i].second + t * (byDim[i + 1].second - byDim[i].second);
}

// The kernel's achieved / peak at a head dimension it is built for (attentionKernelEfficiency pads to one).
double paddedKernelEfficiency(const AttentionKernelSpec& spec, int64_t headDim, int64_t keys, bool backward,
                              bool causal) {
    const double s = static_cast<double>(std::max<int64_t>(1, keys));
    const double ramp = s / (s + spec.seqHalf); // a causal kernel computes its diagonal key blocks whole
    const double base = backward ? spec.backwardEfficiency : spec.forwardEfficiency;
    if (!spec.benchmark) return causal ? base * ramp : base;
    const AttentionBenchmark& b = *spec.benchmark;
    const double h = static_cast<double>(headDim);
    auto rate = [&](bool c, bool bwd) { return benchmarkRate(b, c, bwd, h, s, spec.seqHalf); };
    if (!causal) {
        // Every key visible: the non-causal curve, else the causal one without its diagonal ramp.
        std::optional<double> r = rate(false, backward);
        if (!r) {
            const auto c = rate(true, backward);
            if (c) r = *c / ramp;
        }
        return r ? *r / b.peakFlopsPerSecond : base;
    }
    std::optional<double> r = rate(true, backward);
    if (!r && backward) {
        // The causal backward as the non-causal one scaled by what the mask costs the forward.
        const auto open = rate(false, true), causalFwd = rate(true, false), openFwd = rate(false, false);
        if (open && causalFwd && openFwd) r = *open * *causalFwd / *openFwd;
        else if (open) r = *open * ramp;
    }
    if (!r) {
        const auto open = rate(false, backward);
        if (open) r = *open * ramp;
    }
    if (!r) return (backward ? spec.backwardEfficiency : spec.forwardEfficiency) * ramp;
    return *r / b.peakFlopsPerSecond;
}
} // namespace

double attentionKernelEfficiency(const AttentionKernelSpec& spec, int64_t headDim, int64_t keys, bool backward,
                                 bool causal) {
    // A head dimension the kernel is not built for runs the next one up, zero-padded (FlashAttention's
    // HEADDIM_SWITCH, the Triton kernel's next power of two): the rate is the padded kernel's, d / padded of it useful.
    int64_t padded = headDim;
    for (int64_t built : spec.headDims)
        if (built >= headDim) {
            padded = built;
            break;
        }
    const double useful = static_cast<double>(headDim) / static_cast<double>(std::max<int64_t>(1, padded));
    return useful * paddedKernelEfficiency(spec, padded, keys, backward, causal);
}

double opSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype, double tensorShare) {
    return kernelSeconds(op, cluster, dtype, tensorShare);
}
double opSeconds(const OpCost& op, const ClusterConfig& cluster, Dtype dtype) {
    return kernelSeconds(op, cluster, dtype, cluster.gpu.sustainedTensorShare(1.0));
}

} // namespace tessel
