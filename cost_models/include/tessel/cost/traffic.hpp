// What each process group moves: TP/SP, CP, EP collectives per layer, PP sends per micro-batch, DP/ZeRO per step.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/comm.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/topology.hpp"

#include <string>
#include <vector>

namespace tessel {

// When a communication happens: inside a layer's forward or backward (per micro-batch), between stages
// (per micro-batch and chunk boundary), or once per micro-batch / per step for data parallelism.
enum class CommPhase { Forward, Backward, PerMicroBatch, PerStep };
std::string toString(CommPhase p);

struct CommOp {
    std::string name;        // e.g. "tp_all_reduce_attn", "dp_reduce_scatter_grads"
    GroupKind group = GroupKind::Tp;
    Primitive primitive = Primitive::AllReduce;
    double bytes = 0.0;      // nccl-tests size convention (see comm.hpp)
    CommPhase phase = CommPhase::Forward;
    GroupPlacement placement;
    CommCost cost;
};

// How a framework's sequence-parallel TP moves one layer's hidden states (FORMULAS.md §5).
struct SequenceParallelTraffic {
    // Bytes per element of the forward all-gathers of the attention and MLP inputs: the activation type, or 1
    // where torchao's float8 TP casts the input before gathering it (PrepareFloat8ModuleInput; recipe fsdp_fp8).
    double forwardGatherBytesPerElement = 2.0;
    // Bytes per element of the backward all-gathers of the row-parallel GEMMs' output gradients: the activation type,
    // or NVFP4's two copies (2 x 0.5625) where Transformer Engine quantizes the gradient before gathering it.
    double gradGatherBytesPerElement = 2.0;
    // Backward all-gathers the sharded inputs of the QKV and fc1 GEMMs again for dW: Megatron-LM and Transformer
    // Engine keep the shard; PyTorch's DTensor TP (torchtitan, fsdp) keeps the gathered input in autograd, except
    // under torchtitan's per-op selective checkpointing, whose recompute replays the all-gathers (not in its
    // save list).
    bool backwardRegathersInputs = true;
};
SequenceParallelTraffic sequenceParallelTraffic(const ModelConfig& model, const Plan& plan, const PrecisionRecipe& recipe,
                                                double activationBytes);

// One all-to-all that an MoE dispatch (or combine) takes: its ranks' placement and each rank's buffer (nccl-tests
// size convention: the rank keeps 1/size of it).
struct DispatchLeg {
    std::string suffix;       // "" for the plain all-to-all, "_internode" / "_intranode" for the flex dispatcher's
    GroupPlacement placement;
    double bytes = 0.0;
};
// The legs of one dispatch of `routedBytes` (every top-k copy of the router's tokens) over an EP group placed at
// `ep`. The all-to-all dispatcher: one all-to-all of them over the group. The flex dispatcher (DeepEP / HybridEP)
// across nodes: each token once to every other node holding one of its experts, the rank's peer there (one rank a
// node), then over NVLink to the group's ranks on the node that hold one of its experts (DeepSeek-V3 report,
// arXiv:2412.19437, §3.2.2; DeepEP's normal kernels); inside one node only the NVLink leg. Each leg sends a token once
// per destination (DeepEP's `is_token_in_rank`), not once per expert: with balanced routing a token reaches a node
// (or rank) of E/N experts with probability 1 - C(E - E/N, k) / C(E, k) (FORMULAS.md §5). The two legs run pipelined in one kernel (chunks forwarded over
// NVLink while the next cross the network), so the dispatch takes the longer leg: the NVLink leg is costed as what
// it adds beyond the network leg (traffic.cpp).
std::vector<DispatchLeg> dispatchLegs(const ModelConfig& model, const Plan& plan, const GroupPlacement& ep, double routedBytes);
// The legs' seconds as a dispatch takes them, from each leg's own (`seconds[i]` for legs[i]): the NVLink leg of
// the flex dispatcher only beyond the network leg; every other leg as it is.
std::vector<double> pipelinedLegSeconds(const std::vector<DispatchLeg>& legs, std::vector<double> seconds);
// The chance that a token's top_k of `experts` experts (drawn evenly) include one of a node's `perNode`.
double nodeHitProbability(int64_t experts, int64_t perNode, int64_t topK);
// The same under the model's group-limited routing (moe.routing_groups, groups_per_token; FORMULAS.md §5): its groups
// drawn evenly, its top_k evenly among their experts. Without a limit, the plain probability.
double nodeHitProbability(const MoeConfig& moe, int64_t perNode);

// Collectives of ONE transformer layer for ONE micro-batch (forward and backward): TP all-reduce or SP
// all-gather/reduce-scatter, CP K/V exchange, EP all-to-all. Each op's cost is filled in.
std::vector<CommOp> layerCommOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);
// FP8 current scaling (Transformer Engine's recipe, fp8_recipe tensorwise) and NVFP4 under sequence parallelism
// all-reduce the amax of each column-parallel input and each row-parallel output gradient over the TP group before
// casting, the compute stream waiting for it: layerCommOps names them kFp8AmaxAllReducePrefix + block (+ "_grad"),
// and no TP overlap hides them.
bool amaxAllReducedOverTp(const Plan& plan, const PrecisionRecipe& recipe);
inline constexpr const char* kFp8AmaxAllReducePrefix = "tp_fp8_amax_all_reduce_";
// The selective-recompute module (recompute_module bit) whose forward holds the forward TP collective `opName` of
// layerCommOps, 0 for none: MLA's latent gather (with SP the up projections gather their input), a dense MLP's pair,
// the shared experts' (theirs and the MoE layer's), an MoE layer's routed block without SP (the MoE layer's).
uint8_t tpCollectiveModule(const ModelConfig& model, const std::string& opName);
// Context parallelism's ring (cp_comm_type p2p, FORMULAS.md §6.1): what its K/V traffic adds to a layer once each
// step's transfer runs under that step's attention (Transformer Engine's AttnFuncWithCPAndKVP2P posts the next
// step's send and receive before computing the current step). `transferSeconds`: one step's K and V between ring
// neighbours (ringStepTransferSeconds). Forward, transfer i runs under step i's attention (step 0 the diagonal,
// then cp - 2 of the later steps; the last step has nothing to fetch); backward step 0 fetches the next K and V,
// the middle steps those and send the previous step's dK, dV (twice the bytes), the last step only the dK, dV,
// and its own dK, dV hop to their owner after it, exposed. What overlaps still costs the contention share of its
// own time (GpuSpec::contentionSeconds, FORMULAS.md §6.2). `gradTransferSeconds`: one step's dK, dV, which PyTorch's
// ring passes on in fp32 (ringStepBytes). Returns the forward's and the backward's seconds.
struct RingExposure {
    double forwardSeconds = 0.0, backwardSeconds = 0.0;
};
RingExposure ringExposure(double diagForward, double stepsForward, double diagBackward, double stepsBackward, int cp,
                          double transferSeconds, double gradTransferSeconds, const GpuSpec& gpu);
// A TP collective split into `chunks` and pipelined with the GEMM that consumes or produces it (PyTorch's async TP;
// Transformer Engine's overlap is costed as one chunk, cost_schedule.cpp): a two-stage pipeline of equal chunks lasts
// the longer stage plus one chunk of the shorter, so the collective adds comm / chunks to a longer GEMM and
// comm - gemm + gemm / chunks where it is itself the longer (FORMULAS.md §6.1).
double pipelinedCollectiveExposedSeconds(double gemmSeconds, double commSeconds, int chunks);
// One ring step's K and V (b s/cp 2 g d / t elements, at the query heads' a where the framework repeats them before
// the kernel, ringAttentionStyleOf) sent to the next rank: over the inter-node link where the CP group spans nodes (a
// ring over nodes has hops between them), else NVLink. ringStepBytes: those elements' bytes, and the bytes of the
// dK, dV a backward step passes on: fp32 under PyTorch's ring (_cp_options.convert_to_f32, on by default), else the
// activation type.
struct RingStepBytes {
    double kv = 0.0, grads = 0.0;
};
RingStepBytes ringStepBytes(const ModelConfig& model, const Plan& plan);
// The CP group's all-to-all and ring levels as rank 0's sit: under a2a+p2p the all-to-all over its first
// cp_a2a_size ranks (the fastest-varying, Megatron-core's first hierarchical size) and the ring over the ranks that
// far apart; otherwise the whole group for both.
struct CpLevels {
    GroupPlacement a2a, ring;
};
CpLevels cpLevels(const Plan& plan, const ClusterConfig& cluster);
double ringStepTransferSeconds(double stepBytes, const ClusterConfig& cluster, const GroupPlacement& cpGroup);
// What one pipeline transfer of a micro-batch's hidden state moves: the bytes over the stage pair and, with the
// scatter-gather optimization (pipelineScatterGatherOf), the full tensor the receiving stage all-gathers over its
// tensor-parallel group (0 without it).
struct PipelineTransfer {
    double pairBytes = 0.0;
    double gatherBytes = 0.0;
};
PipelineTransfer pipelineTransferOf(const Plan& plan, double hiddenStateBytes);
// Pipeline sends of one micro-batch across one stage boundary (activation forward, gradient backward), and with
// scatter-gather the receiver's tensor-parallel all-gathers (pp_all_gather_activation, pp_all_gather_grad).
std::vector<CommOp> pipelineCommOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);
// How a step's (or, from ZeRO-2, a micro-batch's) gradients are reduced over data parallelism: an all-reduce
// without ZeRO and under DeepSpeed's BF16 optimizer, which all-reduces its whole fp32 gradients and updates its
// partition from them (runtime/pipe/engine.py _bf16_reduce_grads -> buffered_allreduce_fallback, 2022 to today;
// deepSpeedBf16OptimizerOf); a reduce-scatter under ZeRO-1/2/3 otherwise.
Primitive gradReducePrimitive(const Plan& plan, const PrecisionRecipe& recipe);
// Data-parallel traffic of pipeline stage `stage`: gradient reduction and ZeRO gathers, with phase
// PerStep (once per step) or PerMicroBatch (ZeRO-2 reduce-scatter and ZeRO-3 gathers repeat per micro-batch).
std::vector<CommOp> dataParallelCommOps(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan,
                                        int stage);

} // namespace tessel
