// The search's plan space: the declared space normalised and checked, its work items and per-item choices.
#include "tessel/sim/search.hpp"

#include "search_estimate.hpp"
#include "search_offload.hpp"
#include "search_space.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/framework.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
#include <numeric>
#include <set>
#include <thread>

namespace tessel::sim::detail {

namespace {
// The divisors of n in increasing order, by trial up to sqrt(n): with the plain loop over 1..n a global batch of 2^30
// on 8 GPUs took 46 s of pruning, now 0.09 s.
std::vector<int> divisorsOf(int n) {
    std::vector<int> low, high;
    for (int i = 1; static_cast<int64_t>(i) * i <= n; ++i) {
        if (n % i != 0) continue;
        low.push_back(i);
        if (i != n / i) high.push_back(n / i);
    }
    low.insert(low.end(), high.rbegin(), high.rend());
    return low;
}

void checkOptions(const ClusterConfig& cluster, const SearchOptions& options, ProblemList& problems) {
    if (options.topK < 1) problems.add("--top", "must be at least 1, got " + std::to_string(options.topK));
    if (options.threads < 0) problems.add("--threads", "must be 0 (every core) or more, got " + std::to_string(options.threads));
    if (options.objective == Objective::TokensPerDollar && !(cluster.pricePerGpuHour > 0.0))
        problems.add("--objective", "tokens_per_dollar needs a price: cluster '" + cluster.name +
                                        "' has no price_per_gpu_hour");
}
} // namespace

Space normalizeSpace(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& in, ProblemList& problems) {
    Space s;
    s.gpus = in.gpus;
    s.globalBatch = in.globalBatch;
    s.maxGlobalBatch = in.maxGlobalBatch;
    s.maxVpp = in.maxVpp;
    s.offload = in.offload;
    s.partialRecompute = in.partialRecompute;
    s.hybridSharding = in.hybridSharding;
    s.memoryBand = in.memoryBand;
    s.runnableBy = in.runnableBy;
    s.unevenSplits = in.unevenSplits;
    if (in.gpus < 1) problems.add("--gpus", "must be at least 1, got " + std::to_string(in.gpus));
    else if (in.gpus > kMaxClusterGpus)
        problems.add("--gpus", "must be at most " + std::to_string(kMaxClusterGpus) + " (2^20, the most a cluster may have), got " +
                                   std::to_string(in.gpus));
    if (in.globalBatch < 1) problems.add("--global-batch", "must be at least 1, got " + std::to_string(in.globalBatch));
    if (in.maxGlobalBatch != 0 && in.maxGlobalBatch < in.globalBatch)
        problems.add("--global-batch", "the range's upper end " + std::to_string(in.maxGlobalBatch) +
                                           " is below its lower end " + std::to_string(in.globalBatch));
    if (!in.framework.version.empty() && !frameworkVersionDated(in.framework.name, in.framework.version))
        problems.add("--framework-version", frameworkVersionProblem(in.framework.name, in.framework.version));
    if (in.maxVpp < 1 || in.maxVpp > 1024)
        problems.add("--max-vpp", "must be in 1..1024 (as a vpp in the space), got " + std::to_string(in.maxVpp));
    if (!findPrecisionRecipe(in.precision)) problems.add("--precision", "unknown precision recipe \"" + in.precision + "\"");
    else if (const std::string why = precisionUnsupported(cluster, in.precision, in.framework); !why.empty())
        problems.add("--precision", why);
    auto checkList = [&](const std::vector<int>& values, const char* key, int lo, int hi) {
        for (int v : values)
            if (v < lo || v > hi)
                problems.add(std::string("space/") + key, "value " + std::to_string(v) + " is outside " +
                                                               std::to_string(lo) + ".." + std::to_string(hi));
    };
    constexpr int kMax = 1 << 20;
    checkList(in.tp, "tp", 1, kMax);
    checkList(in.pp, "pp", 1, kMax);
    checkList(in.dp, "dp", 1, kMax);
    checkList(in.cp, "cp", 1, kMax);
    checkList(in.ep, "ep", 1, kMax);
    checkList(in.vpp, "vpp", 1, 1024);
    checkList(in.microBatch, "micro_batch", 1, 1 << 30);
    checkList(in.zeroStage, "zero_stage", 0, 3);

    s.tp = in.tp;
    s.pp = in.pp;
    s.cp = in.cp;
    s.dpFilter = in.dp;
    s.ep = in.ep;
    s.microBatch = in.microBatch;
    s.vpp = in.vpp;
    s.zero = in.zeroStage;
    static const std::set<std::string> kKeys{"tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero_stage"};
    for (const auto& [key, value] : in.fixed) {
        const std::string where = "--fix " + key;
        if (!kKeys.count(key)) {
            problems.add(where, "unknown key; known keys: tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage, recompute, "
                                "schedule, sp, cp_comm_type, rank_order");
            continue;
        }
        const int lo = key == "zero_stage" ? 0 : 1;
        const int hi = key == "zero_stage" ? 3 : (1 << 30);
        if (value < lo || value > hi) {
            problems.add(where, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                                    std::to_string(value));
            continue;
        }
        if ((key == "tp" || key == "pp" || key == "dp" || key == "cp") && in.gpus >= 1 && in.gpus % value != 0)
            problems.add(where, std::to_string(value) + " does not divide the " + std::to_string(in.gpus) + " GPUs");
        std::vector<int>* target = key == "tp"            ? &s.tp
                                   : key == "pp"          ? &s.pp
                                   : key == "dp"          ? &s.dpFilter
                                   : key == "cp"          ? &s.cp
                                   : key == "ep"          ? &s.ep
                                   : key == "vpp"         ? &s.vpp
                                   : key == "micro_batch" ? &s.microBatch
                                                          : &s.zero;
        *target = {value};
    }
    auto defaultTo = [&](std::vector<int>& list) {
        if (list.empty() && in.gpus >= 1) list = divisorsOf(in.gpus);
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
    };
    defaultTo(s.tp);
    defaultTo(s.pp);
    defaultTo(s.cp);
    std::sort(s.dpFilter.begin(), s.dpFilter.end());
    for (auto* list : {&s.ep, &s.microBatch, &s.vpp}) {
        std::sort(list->begin(), list->end());
        list->erase(std::unique(list->begin(), list->end()), list->end());
    }
    if (s.zero.empty()) s.zero = {0, 1, 2, 3};
    std::sort(s.zero.begin(), s.zero.end());
    s.zero.erase(std::unique(s.zero.begin(), s.zero.end()), s.zero.end());
    s.recompute = in.recompute.empty() ? std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full}
                                       : in.recompute;
    std::sort(s.recompute.begin(), s.recompute.end());
    s.recompute.erase(std::unique(s.recompute.begin(), s.recompute.end()), s.recompute.end());
    s.schedules = in.schedules.empty() ? std::vector<Schedule>{Schedule::Gpipe, Schedule::OneFOneB,
                                                               Schedule::Interleaved1F1B, Schedule::ZeroBubble}
                                       : in.schedules;
    std::sort(s.schedules.begin(), s.schedules.end());
    s.schedules.erase(std::unique(s.schedules.begin(), s.schedules.end()), s.schedules.end());
    s.cpComms = in.cpComms.empty() ? std::vector<CpComm>{CpComm::P2p, CpComm::A2a, CpComm::AllGather} : in.cpComms;
    std::sort(s.cpComms.begin(), s.cpComms.end());
    s.cpComms.erase(std::unique(s.cpComms.begin(), s.cpComms.end()), s.cpComms.end());
    s.sequenceParallel = in.sequenceParallel;
    std::sort(s.sequenceParallel.begin(), s.sequenceParallel.end());
    s.sequenceParallel.erase(std::unique(s.sequenceParallel.begin(), s.sequenceParallel.end()), s.sequenceParallel.end());
    if (in.rankOrders.empty()) {
        s.orders.resize(allRankOrders().size());
        std::iota(s.orders.begin(), s.orders.end(), 0);
    } else {
        for (const auto& o : in.rankOrders) {
            const int idx = rankOrderIndex(o);
            if (idx >= static_cast<int>(allRankOrders().size())) problems.add("space/rank_orders", "not a permutation of tp, cp, ep, dp, pp");
            else if (std::find(s.orders.begin(), s.orders.end(), idx) == s.orders.end()) s.orders.push_back(idx);
        }
    }
    s.base.globalBatch = in.globalBatch;
    s.base.precision = in.precision;
    s.base.flashAttention = in.flashAttention;
    s.base.attentionKernel = in.attentionKernel;
    s.base.framework = in.framework;
    s.base.bf16LayersAtStart = in.bf16LayersAtStart;
    s.base.bf16LayersAtEnd = in.bf16LayersAtEnd;
    // The space's own: every plan would be refused for them, so they are said once, at the plan keys they come from.
    for (const auto& [key, message] : bf16EndLayerProblems(model, s.base)) problems.add("/plan/" + key, message);
    s.selectiveModules = in.recomputeModules ? std::vector<uint8_t>{*in.recomputeModules}
                                             : selectiveModuleLadder(model, in.framework);
    return s;
}

std::vector<std::pair<Schedule, int>> scheduleChoices(const Space& s, const ModelConfig& model, int pp) {
    std::vector<std::pair<Schedule, int>> out;
    for (Schedule sch : s.schedules) {
        if (sch == Schedule::DualPipeV || sch == Schedule::ZeroBubbleV) {
            // Two chunks a rank, in a V; searched when asked for (schedule=dualpipev, zero_bubble_v): only PyTorch's
            // pipelining and DeepSeek's code run them, not the Megatron-LM family most plans are for.
            if (pp >= 2 && (s.vpp.empty() || std::binary_search(s.vpp.begin(), s.vpp.end(), 2))) out.push_back({sch, 2});
        } else if (sch == Schedule::Interleaved1F1B) {
            if (!s.vpp.empty()) {
                for (int v : s.vpp)
                    if (v >= 2) out.push_back({sch, v});
            } else {
                // No more chunks than layers: pp x v stays within the model's layers (and an int).
                for (int v = 2; v <= s.maxVpp && static_cast<int64_t>(pp) * v <= model.layers; ++v)
                    if (model.layers % (pp * v) == 0) out.push_back({sch, v});
            }
        } else if (s.vpp.empty() || std::binary_search(s.vpp.begin(), s.vpp.end(), 1)) {
            // With one stage ZB-H1 is 1F1B (each W follows its B at once: same time, same memory), and GPipe is 1F1B
            // with every micro-batch's activations held to the end (same time, more memory; what Megatron-LM's
            // no-pipelining schedule runs is 1F1B's order), so neither is a plan of its own when 1F1B is in the space.
            const bool same = (sch == Schedule::ZeroBubble || sch == Schedule::Gpipe) && pp == 1 &&
                              std::find(s.schedules.begin(), s.schedules.end(), Schedule::OneFOneB) != s.schedules.end();
            if (!same) out.push_back({sch, 1});
        }
    }
    return out;
}

std::vector<int> microBatchChoices(const Space& s, int dp, int pp) {
    if (!s.microBatch.empty()) return s.microBatch;
    if (!s.batchRange()) {
        if (s.globalBatch % dp != 0) return {1}; // stands for the shape; rejected as "global batch not divisible"
        return divisorsOf(s.globalBatch / dp);
    }
    // A range: the micro-batches of the largest batch dp divides and of the largest dp x pp divides (interleaved).
    std::vector<int> out;
    for (int64_t step : {int64_t{dp}, int64_t{dp} * pp}) {
        const int batch = s.largestMultiple(step);
        if (batch % step != 0) continue;
        for (int mb : divisorsOf(batch / dp)) out.push_back(mb);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out.empty() ? std::vector<int>{1} : out;
}

std::vector<bool> spChoices(const Space& s, int tp) {
    if (!s.sequenceParallel.empty()) return s.sequenceParallel;
    return tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

std::vector<bool> foldedSpChoices(const Space& s, int tp) {
    const std::vector<bool> all = spChoices(s, tp);
    return tp > 1 && std::find(all.begin(), all.end(), true) != all.end() ? std::vector<bool>{true} : std::vector<bool>{};
}

std::vector<int> foldedOrders(const Space& s) {
    std::vector<int> out;
    for (int o : s.orders)
        if (allRankOrders()[static_cast<size_t>(o)].back() == ParallelDim::Pp) out.push_back(o);
    return out;
}

Plan itemPlan(const Space& s, const WorkItem& it) {
    Plan p = s.base;
    p.tp = it.tp;
    p.pp = it.pp;
    p.cp = it.cp;
    p.dp = it.dp;
    p.ep = it.ep;
    // The item's expert layout (a scenario's own etp is not carried over to degrees it was not written for).
    p.etp = it.etp;
    p.cpComm = it.cpComm;
    p.globalBatch = s.largestMultiple(it.dp);
    return p;
}

std::vector<WorkItem> workItems(const Space& s, const ModelConfig& model) {
    std::vector<WorkItem> items;
    for (int tp : s.tp)
        for (int pp : s.pp)
            for (int cp : s.cp) {
                const int64_t prod = int64_t{tp} * pp * cp;
                if (prod > s.gpus || s.gpus % prod != 0) continue;
                const int dp = static_cast<int>(s.gpus / prod);
                if (!s.dpFilter.empty() && !std::binary_search(s.dpFilter.begin(), s.dpFilter.end(), dp)) continue;
                // With cp > 1 Megatron-core's expert layout (0.10 on) lets EP take CP ranks: ep divides cp x dp.
                const bool expertLayoutOwn = cp > 1 && expertRankGeneratorOf(s.base.framework);
                const std::vector<int> eps = !s.ep.empty() ? s.ep
                                             : model.moe   ? divisorsOf(expertLayoutOwn ? cp * dp : dp)
                                                           : std::vector<int>{1};
                // Context parallelism's exchange is a choice only where there is context parallelism, and only for a
                // (tp, cp) that some plan can use: tp dividing the heads and the MLP, 2 x cp the sequence. Elsewhere
                // every plan is rejected whatever the exchange, so the ring stands for them once (docs/search.md).
                const bool shapeRuns = model.heads % tp == 0 && model.kvHeads % tp == 0 && model.ffnHidden % tp == 0 &&
                                       model.seqLen % (2 * int64_t{cp}) == 0;
                const std::vector<CpComm> comms = cp > 1 && shapeRuns ? s.cpComms : std::vector<CpComm>{CpComm::P2p};
                for (CpComm comm : comms)
                for (int ep : eps) {
                    WorkItem it{tp, pp, cp, dp, ep, 0};
                    it.cpComm = comm;
                    Plan plan = itemPlan(s, it);
                    // An estimate for progress (orders equal in placement are merged later, per item).
                    const uint64_t orders = plan.expertLayoutApart() ? distinctOrderIndices(plan, foldedOrders(s)).size()
                                            : plan.dp % plan.ep == 0 ? distinctOrderIndices(plan, s.orders).size()
                                                                     : 1;
                    const uint64_t perShape = recomputeChoices(s).size() * s.zero.size() * orders;
                    it.plans = microBatchChoices(s, dp, pp).size() * spChoices(s, tp).size() *
                               scheduleChoices(s, model, pp).size() * perShape;
                    if (it.plans > 0) items.push_back(it);
                }
                // MoE parallel folding (Megatron-core, etp 1): whole experts, EP over the stage's tp x cp x dp ranks,
                // with SP and pp last in the rank order.
                if (!model.moe || tp == 1 || foldedSpChoices(s, tp).empty() || foldedOrders(s).empty()) continue;
                const std::vector<int> foldedEps = !s.ep.empty() ? s.ep : divisorsOf(tp * cp * dp);
                for (CpComm comm : comms)
                for (int ep : foldedEps) {
                    if ((tp * cp * dp) % ep != 0) continue;
                    WorkItem it{tp, pp, cp, dp, ep, 0, 1};
                    it.cpComm = comm;
                    const Plan plan = itemPlan(s, it);
                    it.plans = microBatchChoices(s, dp, pp).size() * scheduleChoices(s, model, pp).size() * recomputeChoices(s).size() *
                               s.zero.size() * distinctOrderIndices(plan, foldedOrders(s)).size();
                    if (it.plans > 0) items.push_back(it);
                }
            }
    return items;
}

} // namespace tessel::sim::detail

namespace tessel::sim {
int hybridShardingReplicas(const ModelConfig& model, const Plan& plan, int gpusPerNode) {
    if (plan.ep < 1 || (!plan.expertLayoutApart() && plan.dp % plan.ep != 0) || (plan.cp > 1 && !plan.zeroOverCp) || plan.tp < 1)
        return 1;
    const int group = plan.dp * plan.cp;
    const int shard = std::min(group, std::max(1, gpusPerNode / plan.tp));
    if (shard >= group || group % shard != 0) return 1;
    const int replicas = group / shard;
    if (model.moe && !plan.replicasSplitExperts(replicas)) return 1;
    return replicas;
}
} // namespace tessel::sim

namespace tessel::sim::detail {

std::vector<std::pair<Recompute, uint8_t>> recomputeChoices(const Space& s) {
    std::vector<std::pair<Recompute, uint8_t>> out;
    for (Recompute rc : s.recompute) {
        if (rc != Recompute::Selective) out.emplace_back(rc, recompute_module::Default);
        else
            for (uint8_t modules : s.selectiveModules) out.emplace_back(rc, modules);
    }
    return out;
}

std::vector<uint8_t> selectiveModuleLadder(const ModelConfig& model, const FrameworkSettings& framework) {
    namespace rm = recompute_module;
    std::vector<uint8_t> out{rm::Default};
    if (!model.moe && !model.mla) return out;
    // Megatron-Bridge's performance recipes (scripts/performance/configs, 2026): DeepSeek-V3 ["mla_up_proj"],
    // ["mla_up_proj", "mlp"], ["mla_up_proj", "layernorm", "moe_act"], ["moe_act"]; GPT-OSS ["layernorm", "moe_act"];
    // and the whole MoE layer, the most an MoE layer frees short of full recompute.
    for (uint8_t set : {uint8_t(rm::MoeAct), uint8_t(rm::Layernorm | rm::MoeAct), uint8_t(rm::MlaUpProj),
                        uint8_t(rm::MlaUpProj | rm::Mlp), uint8_t(rm::MlaUpProj | rm::Layernorm | rm::MoeAct), uint8_t(rm::Moe)}) {
        Plan probe;
        probe.recompute = Recompute::Selective;
        probe.recomputeModules = set;
        probe.framework = framework;
        if (recomputeModuleProblems(model, probe).empty()) out.push_back(set);
    }
    return out;
}

Plan toPlan(const Space& s, const PlanCode& c) {
    Plan p = itemPlan(s, WorkItem{c.tp, c.pp, c.cp, c.dp, c.ep, 0, c.etp, static_cast<CpComm>(c.cpComm)});
    p.vpp = c.vpp;
    p.microBatch = c.microBatch;
    p.zeroStage = c.zero;
    p.zeroReplicas = c.replicas;
    p.recompute = static_cast<Recompute>(c.recompute);
    p.recomputeLayers = c.recomputeLayers;
    p.recomputeModules = p.recompute == Recompute::Selective ? c.modules : recompute_module::Default;
    p.sequenceParallel = c.sp != 0;
    p.schedule = static_cast<Schedule>(c.schedule);
    p.rankOrder = allRankOrders()[c.order];
    p.globalBatch = c.globalBatch;
    setOffload(p, c.offload);
    p.pipelineSplit = c.split == 2 ? PipelineSplit::EndsAsLayers : c.split ? PipelineSplit::Balanced : PipelineSplit::Even;
    p.pipelineLayers.clear();
    p.firstStageLayers = p.lastStageLayers = 0;
    return p;
}

ClusterConfig clusterForGpus(const ClusterConfig& cluster, int gpus, ProblemList& problems) {
    ClusterConfig c = cluster;
    if (gpus < 1 || cluster.gpusPerNode < 1 || c.totalGpus() == gpus) return c;
    if (gpus % cluster.gpusPerNode == 0) {
        c.nodes = gpus / cluster.gpusPerNode;
    } else if (gpus < cluster.gpusPerNode && cluster.gpusPerNode % gpus == 0) {
        c.gpusPerNode = gpus; // part of one node
        c.nodes = 1;
    } else {
        problems.add("--gpus", std::to_string(gpus) + " GPUs do not fill whole nodes of " +
                                   std::to_string(cluster.gpusPerNode) + " GPUs (cluster '" + cluster.name +
                                   "'); --gpus-per-node N uses N GPUs of each node");
    }
    return c;
}

Prepared prepare(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& in,
                 const SearchOptions& options) {
    ProblemList problems;
    Prepared p;
    p.cluster = clusterForGpus(cluster, in.gpus, problems);
    p.space = normalizeSpace(model, p.cluster, in, problems);
    checkOptions(p.cluster, options, problems);
    problems.throwIfAny();
    p.items = workItems(p.space, model);
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    p.threads = options.threads > 0 ? options.threads : hw;
    p.threads = std::max(1, std::min<int>(p.threads, static_cast<int>(std::max<size_t>(1, p.items.size()))));
    return p;
}

} // namespace tessel::sim::detail

namespace tessel::sim {
using namespace detail;

void takeScenarioPlan(SearchSpace& space, const Plan& plan) {
    space.globalBatch = plan.globalBatch;
    space.precision = plan.precision;
    space.flashAttention = plan.flashAttention;
    space.attentionKernel = plan.attentionKernel;
    space.framework = plan.framework;
    space.bf16LayersAtStart = plan.bf16LayersAtStart;
    space.bf16LayersAtEnd = plan.bf16LayersAtEnd;
    if (plan.recompute == Recompute::Selective && plan.recomputeModules != recompute_module::Default)
        space.recomputeModules = plan.recomputeModules;
}

std::vector<Problem> searchProblems(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                                    const SearchOptions& options) {
    ProblemList problems;
    SearchSpace checked = space;
    if (space.allowIdle && space.gpus >= 1 && cluster.gpusPerNode >= 1) {
        // An upper bound: checked at the largest count searchPlansUpTo can use (whole nodes, or part of one node).
        checked.gpus = space.gpus / cluster.gpusPerNode * cluster.gpusPerNode;
        for (int g = std::min(space.gpus, cluster.gpusPerNode); checked.gpus == 0 && g >= 1; --g)
            if (cluster.gpusPerNode % g == 0) checked.gpus = g;
    }
    const ClusterConfig resized = clusterForGpus(cluster, checked.gpus, problems);
    normalizeSpace(model, resized, checked, problems);
    checkOptions(resized, options, problems);
    return problems.items();
}

std::vector<std::array<ParallelDim, 5>> distinctRankOrders(const Plan& plan, int gpusPerNode,
                                                           const std::vector<std::array<ParallelDim, 5>>& candidates) {
    std::vector<int> idx;
    if (candidates.empty()) {
        idx.resize(allRankOrders().size());
        std::iota(idx.begin(), idx.end(), 0);
    } else {
        for (const auto& o : candidates) {
            const int i = rankOrderIndex(o);
            if (i < static_cast<int>(allRankOrders().size()) && std::find(idx.begin(), idx.end(), i) == idx.end())
                idx.push_back(i);
        }
    }
    std::vector<std::array<ParallelDim, 5>> out;
    if (idx.empty()) return out;
    for (int i : effectiveOrders(plan, gpusPerNode, idx).orders) out.push_back(allRankOrders()[static_cast<size_t>(i)]);
    return out;
}

void applySearchFixes(const std::vector<std::string>& entries, SearchSpace& space, ProblemList& problems,
                      const std::string& flag) {
    const std::map<std::string, std::string> intKeys{{"tp", "tp"},       {"pp", "pp"},
                                                     {"dp", "dp"},       {"cp", "cp"},
                                                     {"ep", "ep"},       {"vpp", "vpp"},
                                                     {"micro_batch", "micro_batch"}, {"mb", "micro_batch"},
                                                     {"micro-batch", "micro_batch"}, {"zero_stage", "zero_stage"},
                                                     {"zero", "zero_stage"}};
    for (const auto& entry : entries) {
        if (entry.empty()) continue;
        const auto eq = entry.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
            problems.add(flag, "expected key=value, got \"" + entry + "\"");
            continue;
        }
        std::string key = entry.substr(0, eq);
        for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        const std::string value = entry.substr(eq + 1);
        const std::string where = flag + " " + key;
        if (auto it = intKeys.find(key); it != intKeys.end()) {
            try {
                size_t used = 0;
                const int v = std::stoi(value, &used);
                if (used != value.size()) throw std::invalid_argument(value);
                space.fixed[it->second] = v;
            } catch (const std::exception&) {
                problems.add(where, "expected an integer, got \"" + value + "\"");
            }
        } else if (key == "recompute") {
            if (value == "none") space.recompute = {Recompute::None};
            else if (value == "selective") space.recompute = {Recompute::Selective};
            else if (value == "full") space.recompute = {Recompute::Full};
            else problems.add(where, "must be none, selective or full, got \"" + value + "\"");
        } else if (key == "schedule") {
            if (value == "gpipe") space.schedules = {Schedule::Gpipe};
            else if (value == "1f1b") space.schedules = {Schedule::OneFOneB};
            else if (value == "interleaved_1f1b") space.schedules = {Schedule::Interleaved1F1B};
            else if (value == "zero_bubble") space.schedules = {Schedule::ZeroBubble};
            else if (value == "dualpipev") space.schedules = {Schedule::DualPipeV};
            else if (value == "zero_bubble_v") space.schedules = {Schedule::ZeroBubbleV};
            else problems.add(where, "must be gpipe, 1f1b, interleaved_1f1b, zero_bubble, dualpipev or zero_bubble_v, got \"" + value + "\"");
        } else if (key == "sp" || key == "sequence_parallel") {
            if (value == "on" || value == "true") space.sequenceParallel = {true};
            else if (value == "off" || value == "false") space.sequenceParallel = {false};
            else problems.add(where, "must be on or off, got \"" + value + "\"");
        } else if (key == "cp_comm_type" || key == "cp_comm") {
            if (value == "p2p") space.cpComms = {CpComm::P2p};
            else if (value == "a2a") space.cpComms = {CpComm::A2a};
            else if (value == "allgather" || value == "all_gather") space.cpComms = {CpComm::AllGather};
            else if (value == "a2a+p2p")
                problems.add(where, "a2a+p2p is not searched (its levels are the plan's cp_a2a_size): predict it with a plan "
                                    "that states them, or search p2p, a2a or allgather");
            else problems.add(where, "must be p2p, a2a or allgather, got \"" + value + "\"");
        } else if (key == "rank_order") {
            space.rankOrders = {parseRankOrder(value, where, problems)};
        } else {
            problems.add(where, "unknown key; known keys: tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage, recompute, "
                                "schedule, sp, cp_comm_type, rank_order");
        }
    }
}

} // namespace tessel::sim
