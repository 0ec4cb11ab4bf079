// Exhaustive plan search: enumerate every valid plan of a declared space, reject with counted reasons,
// prune with an admissible lower bound, and rank the survivors by full simulation.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/sim/export.hpp"
#include "tessel/sim/simulate.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {

enum class Objective { Time, Memory, TokensPerDollar };
std::string toString(Objective o);
// Parses "time", "memory" or "tokens_per_dollar"; nullopt otherwise.
std::optional<Objective> parseObjective(const std::string& text);

// The declared space (docs/search.md). A non-empty list is used as given (values that make a plan invalid
// are enumerated and rejected with a reason); an empty list means every candidate value:
//   tp, pp, cp: every divisor of the GPU count (with tp x pp x cp dividing it; dp = gpus / (tp pp cp));
//   dp: not enumerated (it follows), a list or a fixed value filters;
//   ep: divisors of dp for MoE models, 1 otherwise;
//   vpp: 1 for gpipe / 1f1b / zero_bubble; for interleaved_1f1b every v in 2..maxVpp with pp x v dividing
//        the layers (a vpp list gives 1 to the non-interleaved schedules only if it holds 1, and its values
//        >= 2 to interleaved_1f1b);
//   pipeline split: where pp (x vpp) does not divide the layers, the balanced split (FORMULAS.md §5.4;
//        unevenSplits false: such plans are rejected as before);
//   micro_batch: divisors of global_batch / dp (when dp does not divide the global batch, the one plan
//        with micro_batch 1 stands for that shape and is rejected);
//   ZeRO 0-3; recompute none/selective/full; SP off, and on when tp > 1; all four schedules;
//   rank orders: of all 120 permutations of tp-cp-ep-dp-pp (or of `rankOrders`), those distinct in effect
//        (distinctRankOrders: the first of each class with the same placement of every group).
// `fixed` pins fields by plan key (tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage) as from
// `--fix tp=8,pp=4`; a fixed key replaces that key's list.
struct SearchSpace {
    int gpus = 0;
    int globalBatch = 0;
    // A batch range [globalBatch, maxGlobalBatch] (0 or equal: the batch is fixed): each plan takes the largest batch
    // of the range that dp x micro-batch (x pp for interleaved_1f1b) divides (for a fixed plan shape a larger batch
    // never costs more per sample: the pipeline fill, DP reduction and optimizer step are paid once per step); the
    // micro-batches tried are the divisors of (largest batch dp divides) / dp and of (largest batch dp x pp
    // divides) / dp; plans rank by time per sample.
    int maxGlobalBatch = 0;
    // GPUs as an upper bound: plans may use fewer whole nodes and leave the rest idle (searchPlansUpTo).
    bool allowIdle = false;
    std::vector<int> tp, pp, dp, cp, ep, vpp, microBatch, zeroStage;
    std::vector<Recompute> recompute;
    // What selective recompute reruns (recompute_module bits, Megatron-core's --recompute-modules): the one set the
    // user names, or, unset, a ladder of the sets Megatron-Bridge's MoE recipes use wherever the model has their parts
    // and the framework is Megatron-core's (docs/search.md); the attention core alone for every other model.
    std::optional<uint8_t> recomputeModules;
    std::vector<Schedule> schedules;
    std::vector<bool> sequenceParallel;
    std::vector<CpComm> cpComms;                         // cp > 1: empty = p2p, a2a and allgather (cp_comm_type)
    std::vector<std::array<ParallelDim, 5>> rankOrders;  // empty = every order distinct in effect
    std::map<std::string, int> fixed;
    int maxVpp = 8;
    bool unevenSplits = true;                          // pp x vpp not dividing the layers: balanced split
    std::string precision = "megatron";
    bool flashAttention = true;
    std::string attentionKernel = "auto";
    FrameworkSettings framework;                       // every plan runs on this framework (its overlap settings)
    // An FP8 or NVFP4 space's BF16 end layers (Plan::bf16LayersAtStart / End, Megatron-core's
    // --first-last-layers-bf16): every plan keeps the model's first and last this many layers in BF16.
    int bf16LayersAtStart = 0;
    int bf16LayersAtEnd = 0;
    // Offload (optimizer, parameters, activations to host memory) as a dimension: tried only for plans that do not
    // fit without it, on clusters with a host block (docs/search.md).
    bool offload = true;
    // Partial recompute (Plan::recomputeLayers) as a dimension: for every plan that fits with full recompute, the
    // fewest layers of each chunk recomputed that still fit (time objectives; docs/search.md).
    bool partialRecompute = true;
    // Hybrid sharding as a dimension: every ZeRO >= 1 plan is also tried with its state sharded inside a node and
    // replicated across nodes (zero_replicas = the ZeRO group over its ranks on one node, hybridShardingReplicas).
    bool hybridSharding = false;
    // Plans must fit at the validated peak band's upper end (memoryVerdict, error_band.hpp): one whose predicted peak
    // fits but which may not fit is left out as an OOM plan is ("may not fit" among the rejections). Off: every plan
    // whose predicted peak fits is ranked, those at risk marked (RankedPlan::memoryAtRisk).
    bool memoryBand = false;
    // Only plans this framework can run (export.hpp's rules, the ones `tessel export` refuses with); empty = every
    // plan, each row then marked with the frameworks that run it (RankedPlan::frameworks).
    std::optional<ExportFormat> runnableBy;
};

// The replica count of the search's hybrid-sharding variant of a plan: the ZeRO group (dp x cp) over its ranks on
// one node under the default rank order (gpusPerNode / tp, at most the group); 1 where that is the whole group or
// does not divide it (or, with experts, their data-parallel group), or with zero_over_cp off and cp > 1.
int hybridShardingReplicas(const ModelConfig& model, const Plan& plan, int gpusPerNode);

struct SearchOptions {
    int topK = 10;
    Objective objective = Objective::Time;
    int threads = 0;                                   // 0 = every core
    std::function<void(double fraction)> progress;     // called from the searching thread(s), may be empty
    const std::atomic<bool>* cancel = nullptr;         // set to true to stop early (result.cancelled)
};

struct RankedPlan {
    Plan plan;
    StepMetrics metrics;
    double peakBytes = 0.0;
    double reservedPeakBytes = 0.0;                    // what the caching allocator holds (MemoryReport::reservedPeakBytes)
    int peakStage = 0;
    double lowerBoundSeconds = 0.0;
    double tokensPerDollar = 0.0;                      // 0 when the cluster has no price
    std::string why;                                   // one sentence on why it ranks where it does
    double headroomBytes = 0.0;                        // GPU memory - peak
    // The validated error of this kind of run (error_band.hpp), and whether this plan's step lies inside the band
    // of #1's: the model cannot tell the two apart. Empty kind when no bands are shipped.
    std::string errorBandKind;
    double errorBand = 0.0;                            // median |step error| on published runs of the kind
    bool tiedWithBest = false;
    // The peak fits, but a published run of the plan's framework family was off by more than its headroom at the
    // median (memoryVerdict, error_band.hpp): it may not fit.
    bool memoryAtRisk = false;
    int idleGpus = 0;                                  // GPUs of the request the plan leaves idle
    double pricePerUsedGpuHour = 0.0;                  // price x requested GPUs / used GPUs (idle ones are paid too)
    std::vector<std::string> frameworks;               // the export formats that can run this plan (export.hpp)
};

struct SearchResult {
    std::vector<RankedPlan> top;
    int gpuCountsSearched = 1;                         // searchPlansUpTo: how many GPU counts were searched                       // best first, by the objective, ties broken deterministically
    uint64_t considered = 0;                           // plans enumerated
    uint64_t feasible = 0;                             // valid and fitting in memory
    uint64_t simulated = 0;                            // fully simulated
    std::map<std::string, uint64_t> rejected;          // reason -> count (e.g. "tp does not divide heads", "OOM (stage 0)")
    double wallSeconds = 0.0;
    bool cancelled = false;
    double pruningSeconds = 0.0;                       // enumeration + validity + memory + lower bound
    double simulationSeconds = 0.0;                    // sorting the candidates and simulating them
    int threads = 1;                                   // threads used
};

// Takes what a scenario's plan says of every plan into the space: its global batch, precision recipe, attention
// kernel, framework (settings and version), BF16 end layers, and a selective plan's own recompute modules. The
// command line's flags (tessel search) and the GUI's fields then override it.
void takeScenarioPlan(SearchSpace& space, const Plan& plan);

// Applies pinned fields written as `key=value` (the `--fix` syntax: tp, pp, dp, cp, ep, vpp, micro_batch or
// mb, zero_stage or zero, recompute, schedule, sp, rank_order) to the space. Problems are recorded at
// "<where> <key>" (e.g. "--fix tp"), or at `where` for an entry that is not key=value.
void applySearchFixes(const std::vector<std::string>& entries, SearchSpace& space, ProblemList& problems,
                      const std::string& where = "--fix");

// Throws InputError when the space itself is wrong (gpus < 1, global batch < 1, a fixed key unknown, a
// value out of range, GPUs that do not fill whole nodes of the cluster, an unknown or unsupported
// precision, top < 1, objective tokens_per_dollar on a cluster without a price). When the cluster's GPU
// count differs from space.gpus, its node count is set to gpus / gpus_per_node.
SearchResult searchPlans(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                         const SearchOptions& options);
// With space.allowIdle: searches every whole-node GPU count up to space.gpus (largest first), skipping counts whose
// throughput cannot reach the K-th best found (admissible: every GPU at its peak GEMM rate), and merges the rankings
// by time per sample (objective time), tokens per dollar with the idle GPUs paid, or memory. Without allowIdle it
// is searchPlans. Counts and rejections add up over the searches.
SearchResult searchPlansUpTo(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                             const SearchOptions& options);

// Rewrites each plan's `why` for the time and tokens-per-dollar objectives: its gap to #1 and to its neighbours in
// time per token (time per step for a fixed batch and GPU count), on the step component that differs most.
void explainRanking(std::vector<RankedPlan>& top, Objective objective);

// The problems searchPlans would throw for, without searching (empty = the search can run).
std::vector<Problem> searchProblems(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                                    const SearchOptions& options);

// The admissible lower bound on the simulated step time used for pruning: never above simulatePlan's
// stepSeconds for the same plan (tested over grids).
double stepLowerBoundSeconds(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);

// --- The pieces of the pruning stage, exposed for tests and benchmarks ---

// The search's fast validity check: "" for a valid plan, else the category of the first problem
// validatePlan would report (problemCategory of it). Same verdicts as validatePlan (tested).
std::string rejectionReason(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);
// A short, stable category for a validatePlan problem: "tp does not divide heads", "tp does not divide
// kv heads", "tp does not divide ffn_hidden", "tp does not divide expert ffn_hidden", "pp x vpp does not
// divide layers", "vpp > 1 needs interleaved_1f1b", "interleaved_1f1b needs vpp >= 2", "interleaved_1f1b
// needs pp >= 2", "world size differs from GPUs", "global batch not divisible", "interleaved needs
// micro-batches divisible by pp", "ep needs a MoE model", "ep does not divide dp", "ep does not divide
// experts", "cp needs seq_len divisible by 2 x cp", "sequence parallelism needs tp > 1", "seq_len / cp not
// divisible by tp", "precision not supported", "invalid degrees".
std::string problemCategory(const Problem& problem);

// Peak memory per GPU of a valid plan by the search's fast path (only stages 0 and pp - 1 can peak):
// equal to predictMemory's peakBytes / peakStage / fits (tested).
struct PeakMemory {
    double bytes = 0.0;
    int stage = 0;
    bool fits = true;
};
PeakMemory fastPeakMemory(const ModelConfig& model, const ClusterConfig& cluster, const Plan& plan);

// The rank orders of `candidates` (empty = all 120 permutations in std::next_permutation order from
// tp-cp-ep-dp-pp) that are distinct in effect for the plan's degrees on nodes of `gpusPerNode` GPUs: the
// first of each class that places every group the simulator costs (TP, CP, EP, PP pairs, DP or DP x CP,
// expert DP, the tied-embedding pair) on the same number of nodes with the same ranks per node.
std::vector<std::array<ParallelDim, 5>> distinctRankOrders(const Plan& plan, int gpusPerNode,
                                                           const std::vector<std::array<ParallelDim, 5>>& candidates = {});

// The pruning stage alone (enumeration, validity, memory, lower bound) over the whole space, on
// options.threads threads: counts and the number of candidates that would go on to simulation.
struct PruningResult {
    uint64_t considered = 0;
    uint64_t feasible = 0;
    std::map<std::string, uint64_t> rejected;
    double bestLowerBoundSeconds = 0.0;                // smallest bound among the feasible plans (0 if none)
    double wallSeconds = 0.0;
    bool cancelled = false;
};
PruningResult prunePlans(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                         const SearchOptions& options);

} // namespace tessel::sim
