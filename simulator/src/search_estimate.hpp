// Internal to libtessel_sim: the search's fast paths (validity, peak memory, lower bound on step time) and the
// caches that make them cheap enough to run on every plan of a space.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/comm.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/cost/traffic.hpp"
#include "tessel/sim/search.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace tessel::sim::detail {

// Why a plan is invalid: one value per validatePlan problem category, in validatePlan's order.
enum class Reason : uint8_t {
    None,
    InvalidDegrees,
    TpHeads,
    TpKvHeads,
    TpFfn,
    TpExpertFfn,
    Layers,
    VppNeedsInterleaved,
    InterleavedVpp,
    InterleavedPp,
    DualPipeVPp,
    DualPipeVVpp,
    World,
    GlobalBatch,
    ScheduleSize,
    InterleavedMicroBatches,
    DualPipeVMicroBatches,
    EpNeedsMoe,
    EpDp,
    EtpRanks,
    EtpOrder,
    EtpSp,
    ZeroReplicas,
    EpOverlap,
    SharedExpertOverlap,
    EpExperts,
    CpSeq,
    CpA2aHeads,
    CpWindow,
    SpTp,
    SpSeq,
    RecomputeModules,
    LossKernel,
    AttentionSoftcap,
    Precision,
    Count
};
constexpr int kReasonCount = static_cast<int>(Reason::Count);
const char* reasonText(Reason r);
constexpr const char* kOomFirst = "OOM (stage 0)";
constexpr const char* kOomLast = "OOM (a later stage)"; // the last, or a middle one with more layers (uneven split)
constexpr const char* kPeakBand = "may not fit (the validated peak band reaches past the GPU's memory)";

// The first problem validatePlan would report, as a category; `precisionOk` = the recipe exists and the GPU
// has peak flops for its dtype (a property of the whole space); `gpu`, where given, for the attention kernel's
// soft-cap (softcapKernelMissing).
Reason fastReason(const ModelConfig& model, int gpus, const Plan& plan, bool precisionOk, const GpuSpec* gpu = nullptr);
bool precisionSupported(const ClusterConfig& cluster, const std::string& precision, const FrameworkSettings& framework);

// All 120 rank orders, in std::next_permutation order starting from tp-cp-ep-dp-pp.
const std::vector<std::array<ParallelDim, 5>>& allRankOrders();
int rankOrderIndex(const std::array<ParallelDim, 5>& order);
// Sequence of the dims of size > 1 in `order`, packed 3 bits per dim (the class of orders with equal effect).
uint32_t orderSignature(const Plan& plan, const std::array<ParallelDim, 5>& order);
// Indices (into allRankOrders) of the orders of `candidates` distinct in effect for the plan's degrees.
std::vector<int> distinctOrderIndices(const Plan& plan, const std::vector<int>& candidates);

// Placement of a group kind computed in O(world) without allocation; equal to tessel::placeGroup (tested).
GroupPlacement fastPlaceGroup(const Plan& plan, int gpusPerNode, GroupKind kind);
// Placement of {first rank, last rank} of rank 0's pipeline group (the tied-embedding all-reduce).
GroupPlacement embeddingSyncPlacement(const Plan& plan, int gpusPerNode);

// Constant over a search.
struct SearchContext {
    const ModelConfig* model = nullptr;
    const ClusterConfig* cluster = nullptr;
    // The plan's recipe as the framework runs it (precisionRecipeOf), per ZeRO stage: what the optimizer keeps
    // depends on it (remainders, optimizer_dtype); every width the shapes and collectives use is the same in all four.
    // The recipe by ZeRO stage, without and with a pipeline (precisionRecipeOf: DeepSpeed's BF16_Optimizer).
    std::array<std::array<PrecisionRecipe, 4>, 2> recipeByZero{};
    const PrecisionRecipe& recipeOf(const Plan& p) const {
        return recipeByZero[p.pp > 1 ? 1 : 0][static_cast<size_t>(std::clamp(p.zeroStage, 0, 3))];
    }
    int gpus = 0;
    bool precisionOk = true;
    double capacityBytes = 0.0;
    // The peak a plan may have and count as fitting, [pp > 1]: the GPU's memory, or with the search's memory band
    // what fits even at the band's upper end (requireFitWithinPeakBand).
    std::array<double, 2> fitBytes{};
    double fitBytesOf(const Plan& p) const { return fitBytes[p.pp > 1 ? 1 : 0]; }
    double reservedBytes = 0.0;
    // The framework's overlap settings for [interleaved][zero stage], resolved once for the whole space.
    std::array<std::array<OverlapSettings, 4>, 2> overlap{};
    const OverlapSettings& overlapOf(const Plan& p) const {
        return overlap[p.schedule == Schedule::Interleaved1F1B ? 1 : 0][static_cast<size_t>(std::clamp(p.zeroStage, 0, 3))];
    }
};
SearchContext makeContext(const ModelConfig& model, const ClusterConfig& cluster, const std::string& precision,
                          const FrameworkSettings& framework);
// Plans count as fitting only at the validated peak band's upper end: predicted / (1 - e) within the GPU's memory,
// e the median peak error of the framework family (memoryBandFor; a DeepSpeed plan's band depends on pp > 1).
void requireFitWithinPeakBand(SearchContext& ctx, const FrameworkSettings& framework);

// Per (tp, cp, ep, micro_batch, sp, recompute): memory and compute of one micro-batch on one rank.
struct ShapeCosts {
    // memory (predictMemory's terms)
    MemoryShapeTerms memory;                 // the memory model's per-shape terms
    double tokens = 0.0, tokensSp = 0.0, hidden = 0.0, elemBytes = 2.0, maskBytes = 0.0;
    double kvDimLocal = 0.0, topK = 0.0, vocabLocal = 0.0, vocabPadded = 0.0;
    // bytes moved per micro-batch (traffic.cpp): a hidden state, CP K/V, EP routed tokens, a p2p message
    double actBytes = 0.0, kvBytes = 0.0, routedBytes = 0.0, p2pBytes = 0.0;
    // What the attention block's SP all-gather (and its gradient's reduce-scatter) carries: MLA's latents, else 0
    // (the hidden state, as the MLP's).
    double latentBytes = 0.0;
    double expertGatherBytes = 0.0; // the expert-TP all-gather's rows (0 where etp ranks hold copies or etp is 1)
    int denseTpBlocks = 2;          // blocks with a dense TP collective pair: attention, and the MLP unless routed under SP
    // compute seconds of one layer / the embedding / the head (costSchedule's phases)
    double layerFwd = 0.0, layerBwdInput = 0.0, layerBwdWeight = 0.0, layerRecompute = 0.0;
    double embFwd = 0.0, embBwdWeight = 0.0;
    double headFwd = 0.0, headBwdInput = 0.0, headBwdWeight = 0.0;
    double tpOverlapBudget = 0.0;            // forward seconds of the QKV and fc1 GEMMs (simulate.cpp's async TP budget)
    // CP: each rank's q (and output) and K or V (cp_comm_type a2a's all-to-alls), the ring's attention steps (p2p)
    double qLocalBytes = 0.0, kvLocalBytes = 0.0;
    RingStepBytes ringStep; // one ring step's K, V and dK, dV (ringStepBytes)
    double ringDiagFwd = 0.0, ringStepsFwd = 0.0, ringDiagBwd = 0.0, ringStepsBwd = 0.0;
};
ShapeCosts makeShapeCosts(const SearchContext& ctx, const Plan& plan);

// Placements that decide communication costs, grouped by what they affect.
struct InnerPlacements {
    GroupPlacement tp, cp, ep, ppPair;
};
struct DpPlacements {
    GroupPlacement dense, expert, embSync;
    GroupPlacement denseReplicas, expertReplicas; // hybrid sharding: the all-reduce across replicas (else size 1)
};
bool samePlacement(const GroupPlacement& a, const GroupPlacement& b);
bool sameInner(const InnerPlacements& a, const InnerPlacements& b);
bool sameDp(const DpPlacements& a, const DpPlacements& b);
InnerPlacements innerPlacements(const Plan& plan, int gpusPerNode);
DpPlacements dpPlacements(const Plan& plan, int gpusPerNode);

// The rank orders of `candidates` (indices into allRankOrders) distinct in effect for the plan's degrees:
// the first of each class with equal placements of every group the simulator costs (TP, CP, EP, PP pairs,
// dense DP or DP x CP, expert DP, embedding sync). Orders with the same sequence of dims of size > 1 always
// share a class, so only the first of each sequence is placed.
struct OrderClasses {
    std::vector<int> orders;                // kept orders
    std::vector<int> innerOf, dpOf;         // per kept order: its inner / DP placement class
    std::vector<InnerPlacements> inner;
    std::vector<DpPlacements> dp;
};
OrderClasses effectiveOrders(const Plan& plan, int gpusPerNode, const std::vector<int>& candidates);

// Blocking collectives of one layer / embedding / head for one micro-batch (seconds), and the p2p transfer.
struct InnerComm {
    double fwd = 0.0, bwd = 0.0, recompute = 0.0;
    double emb = 0.0, headFwd = 0.0, headBwd = 0.0;
    double p2pActivation = 0.0, p2pGrad = 0.0;
};
InnerComm innerComm(const SearchContext& ctx, const Plan& plan, const ShapeCosts& shape, const InnerPlacements& place);

// Data-parallel stream of stages 0 and pp-1 (index 0 = first, 1 = last) for a (vpp, zero, placement).
struct DpCosts {
    std::array<double, 2> perMicroBatch{};   // DP-stream seconds repeated every micro-batch (ZeRO-2/3)
    std::array<double, 2> perStep{};         // once per step (ZeRO-0/1 reductions, ZeRO-1/2 gathers, embedding sync)
    std::array<double, 2> tail{};            // after the stage's last gradient action: last bucket + embedding sync
    std::array<double, 2> afterOptimizer{};  // ZeRO-1/2 parameter all-gathers after the optimizer step
};
DpCosts dpCosts(const SearchContext& ctx, const Plan& plan, const DpPlacements& place);

// Compute actions that run after the last input-gradient backward on the last stage (ZB-H1's deferred W).
struct LastStageTail {
    int forwards = 0;
    int weightGrads = 0;
};
LastStageTail lastStageTail(const Plan& plan, int microBatches);

// Exact peak memory of a valid plan from the cached terms (stages 0 and pp-1, every stage for an uneven split).
// `gpuOnly`: the GPU verdict alone (an offload that overfills the host still counts as fitting).
PeakMemory peakMemory(const SearchContext& ctx, const Plan& plan, const ShapeCosts& shape,
                      const StageParameters& first, const StageParameters& last, bool gpuOnly = false);
double optimizerSeconds(const SearchContext& ctx, const Plan& plan, const StageParameters& params);

// The admissible lower bound (lowerBoundSeconds in search_estimate.cpp documents each term).
struct BoundInputs {
    const ShapeCosts* shape = nullptr;
    const InnerComm* comm = nullptr;
    const DpCosts* dp = nullptr;
    double optimizerFirst = 0.0, optimizerLast = 0.0;
    LastStageTail tail;
    bool p2pBlocksCompute = false;           // sends hold the compute stream (overlap_p2p_comm off)
};
double lowerBoundSeconds(const Plan& plan, const std::vector<int>& chunkLayers, const BoundInputs& in);

// Everything the bound and memory need for one plan, computed from scratch (the single-plan entry points).
struct SinglePlanEstimate {
    PeakMemory memory;
    double boundSeconds = 0.0;
};
SinglePlanEstimate estimatePlan(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);

} // namespace tessel::sim::detail
