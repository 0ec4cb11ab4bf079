// Offload to host memory: what the host keeps per GPU, and what the CPU optimizer step and the PCIe copies cost
// (DeepSpeed ZeRO-Offload / ZeRO-Infinity, Megatron's optimizer CPU offload; FORMULAS.md §8).
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"

namespace tessel {

// Parameters of this rank's ZeRO partition of a stage (dense over dp or dp x cp, experts over dp/ep (x cp)):
// what the optimizer, and with ZeRO-3 the weights, of one rank hold. Unsharded at zero_stage 0.
double zeroPartitionParameters(const Plan& plan, const StageParameters& params);

// Bytes per partition parameter the host keeps for one GPU under the plan's offload: optimizer offload keeps the
// recipe's optimizer state (fp32 master, two Adam moments) and the fp32 gradient partition CPU Adam reads
// (DeepSpeed's 16 bytes/parameter: stage_1_and_2.py / stage3.py estimators); parameter offload adds the 16-bit
// weights (18 bytes).
double hostBytesPerParameter(const Plan& plan, const PrecisionRecipe& recipe);

// Times of the offload traffic and the CPU step for one rank of a stage.
struct OffloadTimes {
    double cpuOptimizerSeconds = 0.0;          // CPU Adam over the partition; the node's CPUs serve all its GPUs
    double paramUploadSeconds = 0.0;           // updated 16-bit partition host -> GPU after the step (exposed)
    double gradDownloadSeconds = 0.0;          // gradient partition GPU -> host during the last backward (overlapped)
    double paramFetchSecondsPerPass = 0.0;     // ZeRO-Infinity: the partition host -> GPU, every forward/backward pass
    double activationSwapSecondsPerPass = 0.0; // the activations offload moves for one micro-batch, each way
    // The optimizer action's time when the optimizer is offloaded, given the stage's last backward (which hides the
    // gradient download as far as it lasts): CPU Adam + the parameter upload + what the download exceeds.
    double optimizerStepSeconds(double lastBackwardSeconds) const;
};
// `activationSwapBytes`: the stored activations of one micro-batch on the stage (what activation offload moves).
OffloadTimes offloadTimes(const ClusterConfig& cluster, const Plan& plan, const PrecisionRecipe& recipe,
                          const StageParameters& params, double activationSwapBytes);

} // namespace tessel
