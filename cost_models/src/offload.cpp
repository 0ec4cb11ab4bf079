// Offload cost model: host bytes per parameter, CPU Adam step time and PCIe copy times (FORMULAS.md §8).
#include "tessel/cost/offload.hpp"

#include <algorithm>

namespace tessel {

double zeroPartitionParameters(const Plan& plan, const StageParameters& params) {
    if (plan.zeroStage < 1) return params.total();
    const double denseShards = plan.zeroShardSize();
    const double expertShards = static_cast<double>(plan.expertZeroShardSize());
    return params.dense / denseShards + params.expert / expertShards;
}

double hostBytesPerParameter(const Plan& plan, const PrecisionRecipe& recipe) {
    double bytes = 0.0;
    // CPU Adam updates the fp32 master from an fp32 gradient partition on the host (DeepSpeed copies each reduced
    // 16-bit gradient into that fp32 buffer: stage_1_and_2.py async_inplace_copy_grad_to_fp32_buffer_from_gpu).
    if (plan.offloadOptimizer) bytes += recipe.optimizerBytesPerParameter() + 4.0;
    if (plan.offloadParameters) bytes += recipe.weightBytes; // ZeRO-Infinity keeps the 16-bit partition on the host
    return bytes;
}

double OffloadTimes::optimizerStepSeconds(double lastBackwardSeconds) const {
    return cpuOptimizerSeconds + paramUploadSeconds + std::max(0.0, gradDownloadSeconds - lastBackwardSeconds);
}

OffloadTimes offloadTimes(const ClusterConfig& cluster, const Plan& plan, const PrecisionRecipe& recipe,
                          const StageParameters& params, double activationSwapBytes) {
    OffloadTimes t;
    const HostSpec& h = cluster.host;
    if (!h.present()) return t;
    const double partition = zeroPartitionParameters(plan, params);
    const double pcie = h.pcieBytesPerSecond;
    if (plan.offloadOptimizer) {
        // Every GPU of a node steps at once on the node's CPUs: the node's CPU Adam rate is shared by its GPUs.
        t.cpuOptimizerSeconds = partition * std::max(1, cluster.gpusPerNode) / h.cpuAdamParametersPerSecond;
        // Updated 16-bit weights go back before the next forward (DeepSpeed copies them after the step; not
        // overlapped without its opt-in delayed update); with parameter offload they stay on the host.
        if (!plan.offloadParameters) t.paramUploadSeconds = partition * recipe.weightBytes / pcie;
        t.gradDownloadSeconds = partition * recipe.gradBytes / pcie;
    }
    if (plan.offloadParameters) t.paramFetchSecondsPerPass = partition * recipe.weightBytes / pcie;
    if (plan.offloadActivations || plan.offloadActivationLayers > 0) t.activationSwapSecondsPerPass = activationSwapBytes / pcie;
    return t;
}

} // namespace tessel
