// Internal to libtessel_sim: the search's plan space after defaults and checks, plan codes and work items.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/sim/export.hpp"
#include "tessel/sim/search.hpp"

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace tessel::sim::detail {

// A plan in 48 bytes; the field order is the canonical order used to break ties. `split`: 1 where pp x vpp does
// not divide the layers and the plan takes the balanced split, 2 where the virtual stages outnumber the layers by
// up to two and the embedding and the loss take one each (ends_as_layers; FORMULAS.md §5.4).
struct PlanCode {
    int32_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, vpp = 1, microBatch = 1, globalBatch = 1;
    int32_t etp = 0; // Plan::etp: 0 (experts over tp) or 1 (folded, whole experts: tp > 1 only)
    uint8_t zero = 0, recompute = 0, sp = 0, schedule = 0, order = 0, split = 0;
    uint8_t offload = 0; // search_offload.hpp bits
    uint16_t replicas = 1; // zero_replicas (hybrid sharding)
    uint16_t recomputeLayers = 0; // partial recompute (Plan::recomputeLayers), with recompute full
    uint8_t cpComm = 0;           // Plan::cpComm (CpComm's value)
    uint8_t modules = recompute_module::Default; // Plan::recomputeModules, with recompute selective
};
inline bool codeLess(const PlanCode& a, const PlanCode& b) {
    return std::tie(a.tp, a.pp, a.dp, a.cp, a.cpComm, a.ep, a.etp, a.vpp, a.microBatch, a.globalBatch, a.zero, a.replicas, a.recompute,
                    a.modules, a.recomputeLayers, a.sp, a.schedule, a.offload, a.order, a.split) <
           std::tie(b.tp, b.pp, b.dp, b.cp, b.cpComm, b.ep, b.etp, b.vpp, b.microBatch, b.globalBatch, b.zero, b.replicas, b.recompute,
                    b.modules, b.recomputeLayers, b.sp, b.schedule, b.offload, b.order, b.split);
}

// The space after defaults, fixed keys and checks.
struct Space {
    int gpus = 0, globalBatch = 0, maxGlobalBatch = 0, maxVpp = 8;
    bool unevenSplits = true;   // pp x vpp that does not divide the layers takes the balanced split
    // The batch a plan runs: fixed, or the largest of [globalBatch, maxGlobalBatch] that dp x micro-batch (x pp for
    // interleaved_1f1b, whose micro-batches per step must be a multiple of pp) divides; globalBatch when none does
    // (the plan is then rejected as "global batch not divisible").
    bool batchRange() const { return maxGlobalBatch > globalBatch; }
    int largestMultiple(int64_t step) const {
        if (!batchRange() || step < 1) return globalBatch;
        const int64_t b = maxGlobalBatch / step * step;
        return b >= globalBatch ? static_cast<int>(b) : globalBatch;
    }
    int batchFor(int dataParallel, int sequences, int stages, bool interleaved) const {
        return largestMultiple(int64_t{dataParallel} * sequences * (interleaved ? stages : 1));
    }
    // What the time objective compares: seconds per sample, scaled by the largest batch so that a fixed batch keeps
    // plain step seconds.
    double perSampleScale(int batch) const {
        return maxGlobalBatch > globalBatch ? static_cast<double>(maxGlobalBatch) / batch : 1.0;
    }
    std::vector<int> tp, pp, cp, dpFilter, ep, microBatch, vpp, zero;
    std::vector<Recompute> recompute;
    std::vector<uint8_t> selectiveModules{recompute_module::Default}; // the module sets tried under selective recompute
    std::vector<Schedule> schedules;
    std::vector<bool> sequenceParallel;
    std::vector<CpComm> cpComms; // cp_comm_type choices for cp > 1
    std::vector<int> orders;  // candidate rank orders, indices into allRankOrders()
    Plan base;                // precision, flash attention, global batch
    bool offload = true;      // offload variants for plans that do not fit (search_offload.hpp)
    bool partialRecompute = true; // the least recompute_layers that fits, beside each fitting full-recompute plan
    bool hybridSharding = false; // also the node-local hybrid-sharding variant of every ZeRO >= 1 plan
    bool memoryBand = false;  // plans must fit at the validated peak band's upper end (SearchSpace::memoryBand)
    std::optional<ExportFormat> runnableBy; // admit only plans this framework runs
};

struct WorkItem {
    int tp = 1, pp = 1, cp = 1, dp = 1, ep = 1;
    uint64_t plans = 0;   // estimated plan count, to weight progress
    int etp = 0;          // 0: experts over tp, EP inside dp; 1: MoE parallel folding (EP over tp x cp x dp)
    CpComm cpComm = CpComm::P2p; // context parallelism's exchange (cp > 1)
};

Space normalizeSpace(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& in,
                     ProblemList& problems);
// The (schedule, vpp) pairs of the space for a pipeline depth.
std::vector<std::pair<Schedule, int>> scheduleChoices(const Space& s, const ModelConfig& model, int pp);
std::vector<int> microBatchChoices(const Space& s, int dp, int pp);
std::vector<bool> spChoices(const Space& s, int tp);
// A folded item's SP choices (SP on, where the space allows it at this tp; empty: no folded items) and its rank
// orders (indices into allRankOrders with pp last).
std::vector<bool> foldedSpChoices(const Space& s, int tp);
std::vector<int> foldedOrders(const Space& s);
Plan itemPlan(const Space& s, const WorkItem& it);
std::vector<WorkItem> workItems(const Space& s, const ModelConfig& model);
// The (recompute, modules) pairs of the space: each recompute choice, selective once per module set tried.
std::vector<std::pair<Recompute, uint8_t>> recomputeChoices(const Space& s);
// The module sets a search tries under selective recompute when the user names none (SearchSpace::recomputeModules):
// the attention core, then Megatron-Bridge's MoE recipes' sets, each where the model has its parts and the framework
// runs it (recomputeModuleProblems).
std::vector<uint8_t> selectiveModuleLadder(const ModelConfig& model, const FrameworkSettings& framework);
Plan toPlan(const Space& s, const PlanCode& c);
ClusterConfig clusterForGpus(const ClusterConfig& cluster, int gpus, ProblemList& problems);

struct Prepared {
    ClusterConfig cluster;
    Space space;
    std::vector<WorkItem> items;
    int threads = 1;
};
Prepared prepare(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& in,
                 const SearchOptions& options);

} // namespace tessel::sim::detail
