// Process groups of a plan: rank <-> coordinates by rank_order, group membership and node placement.
#include "tessel/cost/topology.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace tessel {
namespace {

// The two layouts of a plan's ranks. Dense: rank_order's dims with sizes tp, cp, ep, dp/ep, pp ("dp" is the
// expert-data-parallel part: EP is carved out of DP, as in Megatron-core without folding; dp % ep == 0 is checked by
// validatePlan). Expert: the expert layers' own layout (Plan::expertLayoutApart: etp differs from tp, MoE parallel
// folding, or Megatron-core's expert RankGenerator with cp > 1): the same order with sizes etp, 1, ep,
// tp x cp x dp / (etp x ep), pp. Such a plan's dense layout keeps ep out of it (ep 1, dp whole).
enum class Layout { Dense, Expert };

// The layout a group of `kind` is laid out in: the expert groups of a plan laid out apart take the expert layout.
Layout layoutOf(const Plan& plan, GroupKind kind) {
    return isExpertGroup(kind) && plan.expertLayoutApart() ? Layout::Expert : Layout::Dense;
}

int dimSize(const Plan& plan, ParallelDim d, Layout layout = Layout::Dense) {
    const bool folded = plan.expertLayoutApart();
    const bool expert = layout == Layout::Expert && folded;
    switch (d) {
    case ParallelDim::Tp:
        return expert ? plan.expertTp() : plan.tp;
    case ParallelDim::Cp:
        return expert ? 1 : plan.cp;
    case ParallelDim::Ep:
        return folded && !expert ? 1 : plan.ep;
    case ParallelDim::Dp:
        if (expert) return plan.expertDp();
        if (folded) return plan.dp;
        return plan.ep > 0 ? plan.dp / plan.ep : 0;
    case ParallelDim::Pp:
        return plan.pp;
    }
    return 0;
}

int& coordRef(RankCoords& c, ParallelDim d) {
    switch (d) {
    case ParallelDim::Tp:
        return c.tp;
    case ParallelDim::Cp:
        return c.cp;
    case ParallelDim::Ep:
        return c.ep;
    case ParallelDim::Dp:
        return c.edp;
    case ParallelDim::Pp:
        return c.pp;
    }
    return c.tp;
}

int coordOf(const RankCoords& c, ParallelDim d) { return coordRef(const_cast<RankCoords&>(c), d); }

// rank_order spelling of a dim, for error messages (kept local so topology does not need plan.cpp).
const char* dimName(ParallelDim d) {
    switch (d) {
    case ParallelDim::Tp:
        return "tp";
    case ParallelDim::Cp:
        return "cp";
    case ParallelDim::Ep:
        return "ep";
    case ParallelDim::Dp:
        return "dp";
    case ParallelDim::Pp:
        return "pp";
    }
    return "?";
}

void checkLayout(const Plan& plan) {
    for (Layout layout : {Layout::Dense, Layout::Expert})
        for (ParallelDim d : {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp, ParallelDim::Pp}) {
            if (dimSize(plan, d, layout) < 1)
                throw InputError("/plan", std::string("cannot lay out ranks: dim ") + dimName(d) +
                                              " has size < 1 (every degree must be >= 1 and ep must divide dp, or with etp "
                                              "etp x ep must divide tp x cp x dp)");
        }
    if (!plan.expertLayoutApart() && plan.dp % plan.ep != 0) throw InputError("/plan/ep", "ep must divide dp to lay out ranks");
    if (plan.expertLayoutApart() && plan.expertDp() < 1)
        throw InputError(plan.expertFolded() ? "/plan/etp" : "/plan/ep",
                         "etp x ep must divide tp x cp x dp to lay out the expert ranks");
    if (plan.expertLayoutApart() && plan.rankOrder.back() != ParallelDim::Pp)
        throw InputError("/plan/rank_order", "a plan whose expert layers have a layout of their own needs pp last in rank_order");
}

// Coordinates of `rank` in `layout` (rank_order's dims, fastest first).
RankCoords coordsIn(const Plan& plan, Layout layout, int rank) {
    RankCoords c;
    int rest = rank;
    for (ParallelDim d : plan.rankOrder) {
        const int n = dimSize(plan, d, layout);
        coordRef(c, d) = rest % n;
        rest /= n;
    }
    return c;
}

int rankIn(const Plan& plan, Layout layout, const RankCoords& c) {
    int rank = 0;
    int stride = 1;
    for (ParallelDim d : plan.rankOrder) {
        const int n = dimSize(plan, d, layout);
        const int x = coordOf(c, d);
        if (x < 0 || x >= n)
            throw InputError("rank", "coordinate " + std::to_string(x) + " is outside dim " +
                                         std::string(dimName(d)) + " of size " + std::to_string(n));
        rank += x * stride;
        stride *= n;
    }
    return rank;
}

// The dims a group of `kind` varies, in the order of the group's own index (fastest first).
// Dp: ep then edp, so the position in the group is dpIndex = ep + ep * edp (see RankCoords::dpIndex).
// DpCp: cp, then ep, then edp (position = cp + cp * dpIndex), matching ascending ranks in the default order.
std::vector<ParallelDim> variedDims(GroupKind kind) {
    switch (kind) {
    case GroupKind::Tp:
        return {ParallelDim::Tp};
    case GroupKind::Cp:
        return {ParallelDim::Cp};
    case GroupKind::Ep:
        return {ParallelDim::Ep};
    case GroupKind::ExpertTp:
        return {ParallelDim::Tp};
    case GroupKind::Dp:
        return {ParallelDim::Ep, ParallelDim::Dp};
    case GroupKind::ExpertDp:
        // The CP ranks see other tokens of the same experts: expert gradients sum over them too (Megatron-core's
        // expert data-parallel group with CP). A folded plan's expert layout has cp 1, so there it is edp alone.
        return {ParallelDim::Cp, ParallelDim::Dp};
    case GroupKind::DpCp:
        return {ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp};
    case GroupKind::Pp:
        return {ParallelDim::Pp};
    case GroupKind::PpPair:
    case GroupKind::ZeroShard:
    case GroupKind::ZeroReplica:
    case GroupKind::ExpertZeroShard:
    case GroupKind::ExpertZeroReplica:
        return {}; // not whole dims: see hybridGroups
    }
    return {};
}

bool isSplitKind(GroupKind kind) {
    return kind == GroupKind::ZeroShard || kind == GroupKind::ZeroReplica || kind == GroupKind::ExpertZeroShard ||
           kind == GroupKind::ExpertZeroReplica;
}

// The whole data-parallel group a ZeRO collective of dense or expert parameters spans (gradients sum over dp x cp).
GroupKind wholeZeroGroup(const Plan& plan, bool expert) {
    return expert ? GroupKind::ExpertDp : plan.cp > 1 ? GroupKind::DpCp : GroupKind::Dp;
}

// Members of the group that varies `dims` around `base`, in group-index order (mixed radix, first dim
// fastest).
std::vector<int> enumerateGroup(const Plan& plan, Layout layout, const std::vector<ParallelDim>& dims, RankCoords base) {
    int size = 1;
    for (ParallelDim d : dims)
        size *= dimSize(plan, d, layout);
    std::vector<int> ranks;
    ranks.reserve(static_cast<size_t>(size));
    for (int index = 0; index < size; ++index) {
        int rest = index;
        for (ParallelDim d : dims) {
            const int n = dimSize(plan, d, layout);
            coordRef(base, d) = rest % n;
            rest /= n;
        }
        ranks.push_back(rankIn(plan, layout, base));
    }
    return ranks;
}

// Hybrid sharding: the groups of `kind` (a split kind) that the whole data-parallel group around `base` splits into.
// Its members, in the group's own order, form zeroReplicas runs of consecutive members: a shard group is one run, a
// replica group the members at one place of every run.
std::vector<std::vector<int>> hybridGroups(const Plan& plan, GroupKind kind, const RankCoords& base) {
    const bool expert = kind == GroupKind::ExpertZeroShard || kind == GroupKind::ExpertZeroReplica;
    const bool shards = kind == GroupKind::ZeroShard || kind == GroupKind::ExpertZeroShard;
    const GroupKind whole = wholeZeroGroup(plan, expert);
    const std::vector<int> all = enumerateGroup(plan, layoutOf(plan, kind), variedDims(whole), base);
    const int replicas = std::max(1, plan.zeroReplicas);
    const int size = static_cast<int>(all.size());
    if (size % replicas != 0)
        throw InputError("/plan/zero_replicas", "zero_replicas=" + std::to_string(replicas) + " does not divide the " +
                                                    std::to_string(size) + " ranks of the " + toString(whole) + " group");
    const int run = size / replicas;
    std::vector<std::vector<int>> out(static_cast<size_t>(shards ? replicas : run));
    for (int i = 0; i < size; ++i) out[static_cast<size_t>(shards ? i / run : i % run)].push_back(all[static_cast<size_t>(i)]);
    return out;
}

// Leaders (varied coords 0) of groups that vary `dims` in `layout`, one for each residue their first rank takes mod
// gpusPerNode. A group's ranks are its first rank plus offsets set by the varied coords alone, so first ranks a whole
// number of nodes apart place their groups alike; a fixed dim's coordinate c adds c x stride, whose residue repeats
// every gpusPerNode / gcd(stride, gpusPerNode) values of c, so the coordinates below that reach every residue there
// is. At most gpusPerNode leaders, from at most as many candidates as there are groups.
std::vector<RankCoords> residueLeaders(const Plan& plan, Layout layout, const std::vector<ParallelDim>& dims,
                                       int gpusPerNode) {
    const int node = std::max(1, gpusPerNode);
    std::vector<int> strides, reaches;
    int stride = 1;
    for (ParallelDim d : plan.rankOrder) {
        const int n = dimSize(plan, d, layout);
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
            strides.push_back(stride);
            reaches.push_back(std::min(n, node / std::gcd(stride, node)));
        }
        stride *= n;
    }
    std::vector<RankCoords> leaders;
    std::vector<bool> seen(static_cast<size_t>(node), false);
    std::vector<int> c(strides.size(), 0);
    for (bool more = true; more;) {
        int base = 0;
        for (size_t j = 0; j < c.size(); ++j) base += c[j] * strides[j];
        if (!seen[static_cast<size_t>(base % node)]) {
            seen[static_cast<size_t>(base % node)] = true;
            leaders.push_back(coordsIn(plan, layout, base));
        }
        more = false;
        for (size_t j = 0; j < c.size() && !more; ++j) {
            if (++c[j] < reaches[j]) more = true;
            else c[j] = 0;
        }
    }
    return leaders;
}

} // namespace

bool isExpertGroup(GroupKind kind) {
    return kind == GroupKind::Ep || kind == GroupKind::ExpertDp || kind == GroupKind::ExpertTp ||
           kind == GroupKind::ExpertZeroShard || kind == GroupKind::ExpertZeroReplica;
}

// The order of badness placeGroup reports by (topology.hpp).
bool worsePlacement(const GroupPlacement& a, const GroupPlacement& b) {
    if (a.nodes != b.nodes) return a.nodes > b.nodes;
    if (a.ranksPerNode != b.ranksPerNode) return a.ranksPerNode < b.ranksPerNode;
    return a.minRanksPerNode < b.minRanksPerNode;
}

std::string toString(GroupKind g) {
    switch (g) {
    case GroupKind::Tp:
        return "tp";
    case GroupKind::Cp:
        return "cp";
    case GroupKind::Ep:
        return "ep";
    case GroupKind::Dp:
        return "dp";
    case GroupKind::ExpertDp:
        return "expert_dp";
    case GroupKind::ExpertTp:
        return "expert_tp";
    case GroupKind::DpCp:
        return "dp_cp";
    case GroupKind::Pp:
        return "pp";
    case GroupKind::PpPair:
        return "pp_pair";
    case GroupKind::ZeroShard:
        return "zero_shard";
    case GroupKind::ZeroReplica:
        return "zero_replica";
    case GroupKind::ExpertZeroShard:
        return "expert_zero_shard";
    case GroupKind::ExpertZeroReplica:
        return "expert_zero_replica";
    }
    return "unknown";
}

GroupKind zeroGroupKind(const Plan& plan, bool expert, bool replicas) {
    if (plan.zeroReplicas <= 1 || plan.zeroStage < 1) return wholeZeroGroup(plan, expert);
    if (expert) return replicas ? GroupKind::ExpertZeroReplica : GroupKind::ExpertZeroShard;
    return replicas ? GroupKind::ZeroReplica : GroupKind::ZeroShard;
}

RankCoords rankCoords(const Plan& plan, int rank) {
    checkLayout(plan);
    const int world = plan.worldSize();
    if (rank < 0 || rank >= world)
        throw InputError("rank", "rank " + std::to_string(rank) + " is outside the world of " +
                                     std::to_string(world) + " ranks");
    // world rank = sum over rank_order (fastest first) of coord x stride; peel the fastest dim first.
    return coordsIn(plan, Layout::Dense, rank);
}

int rankOf(const Plan& plan, const RankCoords& c) {
    checkLayout(plan);
    return rankIn(plan, Layout::Dense, c);
}

std::vector<int> groupRanks(const Plan& plan, GroupKind kind, int rank) {
    const Layout layout = layoutOf(plan, kind);
    const RankCoords dense = rankCoords(plan, rank);
    const RankCoords c = layout == Layout::Dense ? dense : coordsIn(plan, layout, rank);
    if (kind == GroupKind::PpPair) {
        if (c.pp + 1 >= plan.pp) return {};
        RankCoords next = c;
        next.pp += 1;
        return {rank, rankOf(plan, next)};
    }
    if (isSplitKind(kind)) {
        for (auto& group : hybridGroups(plan, kind, c))
            if (std::find(group.begin(), group.end(), rank) != group.end()) return group;
    }
    return enumerateGroup(plan, layout, variedDims(kind), c);
}

GroupPlacement placeRanks(const std::vector<int>& ranks, int gpusPerNode) {
    if (gpusPerNode < 1) throw InputError("gpus_per_node", "must be >= 1 to place ranks on nodes");
    GroupPlacement placement;
    placement.size = static_cast<int>(ranks.size());
    if (ranks.empty()) {
        placement.nodes = 0;
        placement.ranksPerNode = 0;
        return placement;
    }
    std::vector<int> nodes;
    nodes.reserve(ranks.size());
    for (int r : ranks)
        nodes.push_back(r / gpusPerNode);
    std::sort(nodes.begin(), nodes.end());
    placement.nodes = 0;
    placement.ranksPerNode = 0;
    placement.minRanksPerNode = placement.size;
    for (size_t i = 0; i < nodes.size();) {
        size_t j = i;
        while (j < nodes.size() && nodes[j] == nodes[i])
            ++j;
        placement.nodes += 1;
        placement.ranksPerNode = std::max(placement.ranksPerNode, static_cast<int>(j - i));
        placement.minRanksPerNode = std::min(placement.minRanksPerNode, static_cast<int>(j - i));
        i = j;
    }
    return placement;
}

namespace {
GroupPlacement computePlacement(const Plan& plan, const ClusterConfig& cluster, GroupKind kind);
} // namespace

GroupPlacement placeGroup(const Plan& plan, const ClusterConfig& cluster, GroupKind kind) {
    // Placement depends only on the degrees, the rank order, the node size and the kind; a search asks for
    // the same few thousand combinations millions of times, so remember them (per thread, bounded).
    using Key = std::array<int, 14>;
    thread_local std::map<Key, GroupPlacement> cache;
    Key key{plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, static_cast<int>(plan.rankOrder[0]),
            static_cast<int>(plan.rankOrder[1]), static_cast<int>(plan.rankOrder[2]),
            static_cast<int>(plan.rankOrder[3]), static_cast<int>(plan.rankOrder[4]), cluster.gpusPerNode,
            static_cast<int>(kind), isSplitKind(kind) ? plan.zeroReplicas : 1, plan.expertLayoutApart() ? plan.expertTp() : 0};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const GroupPlacement placement = computePlacement(plan, cluster, kind);
    if (cache.size() > 65536) cache.clear();
    cache.emplace(key, placement);
    return placement;
}

GroupPlacement placeGroup(const Plan& plan, int gpusPerNode, GroupKind kind) {
    ClusterConfig nodes;
    nodes.gpusPerNode = gpusPerNode;
    return placeGroup(plan, nodes, kind);
}

GroupPlacement placeStagePair(const Plan& plan, const ClusterConfig& cluster, int from, int to) {
    checkLayout(plan);
    if (from < 0 || to < 0 || from >= plan.pp || to >= plan.pp)
        throw InputError("/plan/pp", "stages " + std::to_string(from) + " and " + std::to_string(to) + " are not both in 0.." +
                                         std::to_string(plan.pp - 1));
    using Key = std::array<int, 13>;
    thread_local std::map<Key, GroupPlacement> cache;
    Key key{plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, static_cast<int>(plan.rankOrder[0]),
            static_cast<int>(plan.rankOrder[1]), static_cast<int>(plan.rankOrder[2]),
            static_cast<int>(plan.rankOrder[3]), static_cast<int>(plan.rankOrder[4]), cluster.gpusPerNode, from, to};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    GroupPlacement worst;
    bool any = false;
    for (int r : stageRepresentatives(plan, cluster.gpusPerNode, from)) {
        RankCoords c = rankCoords(plan, r);
        c.pp = to;
        const GroupPlacement p = placeRanks({r, rankOf(plan, c)}, cluster.gpusPerNode);
        if (!any || worsePlacement(p, worst)) worst = p;
        any = true;
    }
    if (cache.size() > 65536) cache.clear();
    cache.emplace(key, worst);
    return worst;
}

std::vector<int> stageRepresentatives(const Plan& plan, int gpusPerNode, int stage) {
    checkLayout(plan);
    int stride = 1;
    for (ParallelDim d : plan.rankOrder) {
        if (d == ParallelDim::Pp) break;
        stride *= dimSize(plan, d, Layout::Dense);
    }
    const int node = std::max(1, gpusPerNode);
    const int block = stride * plan.pp;  // ranks of one cycle through the stages
    const int cycles = plan.worldSize() / block;
    const int offsets = std::min(stride, node);
    const int repeats = std::min(cycles, node / std::gcd(block, node));
    std::vector<int> ranks;
    if (stage < 0 || stage >= plan.pp) return ranks;
    ranks.reserve(static_cast<size_t>(offsets) * static_cast<size_t>(repeats));
    for (int b = 0; b < repeats; ++b)
        for (int a = 0; a < offsets; ++a)
            ranks.push_back(a + stride * stage + block * b);
    return ranks;
}

namespace {
GroupPlacement computePlacement(const Plan& plan, const ClusterConfig& cluster, GroupKind kind) {
    checkLayout(plan);
    GroupPlacement worst;
    bool any = false;
    if (kind == GroupKind::PpPair) {
        // One pair per rank of stages 0..pp-2 (each stage's representatives show every placement there is);
        // with pp == 1 there is no pair and nothing to send.
        for (int stage = 0; stage + 1 < plan.pp; ++stage)
            for (int r : stageRepresentatives(plan, cluster.gpusPerNode, stage)) {
                const GroupPlacement p = placeRanks(groupRanks(plan, kind, r), cluster.gpusPerNode);
                if (!any || worsePlacement(p, worst)) worst = p;
                any = true;
            }
        return any ? worst : GroupPlacement{};
    }
    const Layout layout = layoutOf(plan, kind);
    if (isSplitKind(kind)) {
        // Each whole data-parallel group from its leader (one per residue, below), and every group it splits into.
        const bool expert = kind == GroupKind::ExpertZeroShard || kind == GroupKind::ExpertZeroReplica;
        for (const RankCoords& c : residueLeaders(plan, layout, variedDims(wholeZeroGroup(plan, expert)), cluster.gpusPerNode))
            for (const auto& group : hybridGroups(plan, kind, c)) {
                const GroupPlacement p = placeRanks(group, cluster.gpusPerNode);
                if (!any || worsePlacement(p, worst)) worst = p;
                any = true;
            }
        return worst;
    }
    const std::vector<ParallelDim> dims = variedDims(kind);
    for (const RankCoords& c : residueLeaders(plan, layout, dims, cluster.gpusPerNode)) {
        const GroupPlacement p = placeRanks(enumerateGroup(plan, layout, dims, c), cluster.gpusPerNode);
        if (!any || worsePlacement(p, worst)) worst = p;
        any = true;
    }
    return worst;
}

} // namespace

} // namespace tessel
