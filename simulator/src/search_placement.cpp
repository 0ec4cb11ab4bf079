// The search's placements: rank orders, which dims a group spans, and where each group and pipeline hop lands on
// the nodes, computed the fast way (bit masks over rank orders) with the topology's placeGroup for what it cannot
// shortcut; search_estimate.cpp prices what these placements carry.
#include "search_estimate.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

namespace tessel::sim::detail {

namespace {
// Size of a dense-layout dim: "dp" in rank_order is the expert-data-parallel part dp/ep; a folded plan's dense
// layout has no ep (topology.cpp).
int dimSize(const Plan& plan, ParallelDim dim) {
    const bool folded = plan.expertLayoutApart();
    switch (dim) {
    case ParallelDim::Tp: return plan.tp;
    case ParallelDim::Cp: return plan.cp;
    case ParallelDim::Ep: return folded ? 1 : plan.ep;
    case ParallelDim::Dp: return folded ? plan.dp : plan.ep > 0 ? plan.dp / plan.ep : 0;
    case ParallelDim::Pp: return plan.pp;
    }
    return 1;
}

// Size of a dim in a folded plan's expert layout: etp, 1, ep, tp x cp x dp / (etp x ep), pp (topology.cpp).
int expertDimSize(const Plan& plan, ParallelDim dim) {
    switch (dim) {
    case ParallelDim::Tp: return plan.expertTp();
    case ParallelDim::Cp: return 1;
    case ParallelDim::Ep: return plan.ep;
    case ParallelDim::Dp: return plan.expertDp();
    case ParallelDim::Pp: return plan.pp;
    }
    return 1;
}

// Dims a group of `kind` varies (topology.cpp's variedDims), as a bit mask over ParallelDim values.
unsigned variedMask(GroupKind kind) {
    auto bit = [](ParallelDim dim) { return 1u << static_cast<unsigned>(dim); };
    switch (kind) {
    case GroupKind::Tp: return bit(ParallelDim::Tp);
    case GroupKind::Cp: return bit(ParallelDim::Cp);
    case GroupKind::Ep: return bit(ParallelDim::Ep);
    case GroupKind::Dp: return bit(ParallelDim::Ep) | bit(ParallelDim::Dp);
    case GroupKind::ExpertDp: return bit(ParallelDim::Cp) | bit(ParallelDim::Dp);
    case GroupKind::ExpertTp: return bit(ParallelDim::Tp);
    case GroupKind::DpCp: return bit(ParallelDim::Cp) | bit(ParallelDim::Ep) | bit(ParallelDim::Dp);
    case GroupKind::Pp: return bit(ParallelDim::Pp);
    case GroupKind::PpPair:
    // Hybrid-sharding groups are runs of the data-parallel group, not whole dims: placed by placeGroup.
    case GroupKind::ZeroShard:
    case GroupKind::ZeroReplica:
    case GroupKind::ExpertZeroShard:
    case GroupKind::ExpertZeroReplica: return 0;
    }
    return 0;
}

GroupPlacement pairPlacement(int a, int b, int gpusPerNode) {
    const bool same = a / gpusPerNode == b / gpusPerNode;
    return GroupPlacement{2, same ? 1 : 2, same ? 2 : 1, same ? 2 : 1};
}
} // namespace

const std::vector<std::array<ParallelDim, 5>>& allRankOrders() {
    static const std::vector<std::array<ParallelDim, 5>> orders = [] {
        std::vector<std::array<ParallelDim, 5>> out;
        std::array<ParallelDim, 5> o{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp, ParallelDim::Pp};
        do {
            out.push_back(o);
        } while (std::next_permutation(o.begin(), o.end()));
        return out;
    }();
    return orders;
}

int rankOrderIndex(const std::array<ParallelDim, 5>& order) {
    const auto& all = allRankOrders();
    return static_cast<int>(std::find(all.begin(), all.end(), order) - all.begin());
}

uint32_t orderSignature(const Plan& plan, const std::array<ParallelDim, 5>& order) {
    uint32_t sig = 0;
    // A dim of one rank goes anywhere; a folded plan's dim counts where either layout has more than one.
    for (ParallelDim dim : order)
        if (dimSize(plan, dim) > 1 || (plan.expertLayoutApart() && expertDimSize(plan, dim) > 1))
            sig = (sig << 3) | (static_cast<uint32_t>(dim) + 1u);
    return sig;
}

std::vector<int> distinctOrderIndices(const Plan& plan, const std::vector<int>& candidates) {
    std::vector<int> out;
    std::vector<uint32_t> seen;
    for (int idx : candidates) {
        const uint32_t sig = orderSignature(plan, allRankOrders()[static_cast<size_t>(idx)]);
        if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
        seen.push_back(sig);
        out.push_back(idx);
    }
    return out;
}

GroupPlacement fastPlaceGroup(const Plan& plan, int gpusPerNode, GroupKind kind) {
    // Layout (topology.cpp): rank = sum over rank_order dims (fastest first) of coord x stride. A folded plan's expert
    // groups are laid out by the expert sizes, the same world of ranks in the same order (pp last in both).
    // Hybrid-sharding groups are runs of a group, not whole dims: the topology places them.
    if (variedMask(kind) == 0 && kind != GroupKind::PpPair) return placeGroup(plan, gpusPerNode, kind);
    const bool expertLayout = plan.expertLayoutApart() && isExpertGroup(kind);
    std::array<int, 5> size{}, stride{};
    int world = 1;
    for (size_t i = 0; i < 5; ++i) {
        size[i] = expertLayout ? expertDimSize(plan, plan.rankOrder[i]) : dimSize(plan, plan.rankOrder[i]);
        stride[i] = world;
        world *= size[i];
    }
    if (kind == GroupKind::PpPair) {
        size_t ppPos = 0;
        while (plan.rankOrder[ppPos] != ParallelDim::Pp) ++ppPos;
        if (plan.pp < 2) return GroupPlacement{};
        GroupPlacement worst{};
        bool any = false;
        for (int stage = 0; stage + 1 < plan.pp && worst.nodes < 2; ++stage)
            for (int r : stageRepresentatives(plan, gpusPerNode, stage)) {
                const GroupPlacement p = pairPlacement(r, r + stride[ppPos], gpusPerNode);
                if (!any || worsePlacement(p, worst)) worst = p;
                any = true;
                if (worst.nodes == 2) break; // cannot get worse than spanning two nodes
            }
        return worst;
    }
    // Varied dims in ascending stride order: members enumerated this way have increasing ranks, so ranks on
    // one node form one run and no sort is needed.
    const unsigned mask = variedMask(kind);
    std::array<int, 5> vpos{}, fpos{};
    int nv = 0, nf = 0, groupSize = 1;
    for (int i = 0; i < 5; ++i) {
        if (mask & (1u << static_cast<unsigned>(plan.rankOrder[static_cast<size_t>(i)]))) {
            vpos[static_cast<size_t>(nv++)] = i;
            groupSize *= size[static_cast<size_t>(i)];
        } else {
            fpos[static_cast<size_t>(nf++)] = i;
        }
    }
    if (groupSize == 1) return GroupPlacement{1, 1, 1, 1};
    if (world <= gpusPerNode) return GroupPlacement{groupSize, 1, groupSize, groupSize}; // the whole world is one node
    // A group's placement depends on its first rank only through that rank mod gpusPerNode (a whole node's shift moves
    // every member by the same nodes), and a fixed dim's coordinate c adds c x stride to it, whose residue repeats every
    // gpusPerNode / gcd(stride, gpusPerNode) values of c: the coordinates below that show every placement there is.
    std::array<int, 5> reach{};
    for (int j = 0; j < nf; ++j) {
        const int st = stride[static_cast<size_t>(fpos[static_cast<size_t>(j)])];
        reach[static_cast<size_t>(j)] = std::min(size[static_cast<size_t>(fpos[static_cast<size_t>(j)])],
                                                 gpusPerNode / std::gcd(st, gpusPerNode));
    }
    GroupPlacement worst{};
    bool any = false;
    std::array<int, 5> fc{};
    for (bool more = true; more;) {
        int base = 0;
        for (int j = 0; j < nf; ++j) base += fc[static_cast<size_t>(j)] * stride[static_cast<size_t>(fpos[static_cast<size_t>(j)])];
        std::array<int, 5> vc{};
        int nodes = 0, maxRun = 0, minRun = groupSize, run = 0, prevNode = -1;
        for (int k = 0; k < groupSize; ++k) {
            int r = base;
            for (int j = 0; j < nv; ++j) r += vc[static_cast<size_t>(j)] * stride[static_cast<size_t>(vpos[static_cast<size_t>(j)])];
            const int node = r / gpusPerNode;
            if (node != prevNode) {
                if (prevNode >= 0) minRun = std::min(minRun, run);
                ++nodes;
                run = 1;
                prevNode = node;
            } else {
                ++run;
            }
            maxRun = std::max(maxRun, run);
            for (int j = 0; j < nv; ++j) {
                if (++vc[static_cast<size_t>(j)] < size[static_cast<size_t>(vpos[static_cast<size_t>(j)])]) break;
                vc[static_cast<size_t>(j)] = 0;
            }
        }
        minRun = std::min(minRun, run);
        const GroupPlacement p{groupSize, nodes, maxRun, minRun};
        if (!any || worsePlacement(p, worst)) worst = p;
        any = true;
        if (worst.nodes == groupSize) break; // one rank per node: no group can be worse
        more = false;
        for (int j = 0; j < nf && !more; ++j) {
            if (++fc[static_cast<size_t>(j)] < reach[static_cast<size_t>(j)]) more = true;
            else fc[static_cast<size_t>(j)] = 0;
        }
    }
    return worst;
}

// The cheapest pipeline hop of the plan: the best placement over every rank's transfer to the next stage and the
// interleaved schedule's last-to-first hop. The simulation costs each hop by its own placement (placeStagePair),
// so a bound may assume no hop is cheaper than this one.
GroupPlacement cheapestStagePair(const Plan& plan, int gpusPerNode) {
    if (plan.pp < 2) return GroupPlacement{};
    int stridePp = 1;
    for (ParallelDim dim : plan.rankOrder) {
        if (dim == ParallelDim::Pp) break;
        stridePp *= dimSize(plan, dim);
    }
    GroupPlacement best = pairPlacement(0, stridePp, gpusPerNode);
    // A hop of s >= gpusPerNode ranks always leaves the node (the last-to-first one is (pp - 1) s long).
    if (stridePp >= gpusPerNode) return best;
    for (int stage = 0; stage < plan.pp && best.nodes > 1; ++stage)
        for (int r : stageRepresentatives(plan, gpusPerNode, stage)) {
            const int peer = stage + 1 < plan.pp ? r + stridePp : r - (plan.pp - 1) * stridePp;
            const GroupPlacement p = pairPlacement(r, peer, gpusPerNode);
            if (worsePlacement(best, p)) best = p;
            if (best.nodes == 1) break;
        }
    return best;
}

GroupPlacement embeddingSyncPlacement(const Plan& plan, int gpusPerNode) {
    // simulate.cpp: the first and last member of rank 0's pipeline group.
    int stridePp = 1;
    for (ParallelDim dim : plan.rankOrder) {
        if (dim == ParallelDim::Pp) break;
        stridePp *= dimSize(plan, dim);
    }
    return pairPlacement(0, (plan.pp - 1) * stridePp, gpusPerNode);
}

bool samePlacement(const GroupPlacement& a, const GroupPlacement& b) {
    return a.size == b.size && a.nodes == b.nodes && a.ranksPerNode == b.ranksPerNode &&
           a.minRanksPerNode == b.minRanksPerNode;
}
bool sameInner(const InnerPlacements& a, const InnerPlacements& b) {
    return samePlacement(a.tp, b.tp) && samePlacement(a.cp, b.cp) && samePlacement(a.ep, b.ep) &&
           samePlacement(a.ppPair, b.ppPair);
}
bool sameDp(const DpPlacements& a, const DpPlacements& b) {
    return samePlacement(a.dense, b.dense) && samePlacement(a.expert, b.expert) && samePlacement(a.embSync, b.embSync) &&
           samePlacement(a.denseReplicas, b.denseReplicas) && samePlacement(a.expertReplicas, b.expertReplicas);
}

InnerPlacements innerPlacements(const Plan& plan, int gpusPerNode) {
    InnerPlacements p;
    if (plan.tp > 1) p.tp = fastPlaceGroup(plan, gpusPerNode, GroupKind::Tp);
    if (plan.cp > 1) p.cp = fastPlaceGroup(plan, gpusPerNode, GroupKind::Cp);
    if (plan.ep > 1) p.ep = fastPlaceGroup(plan, gpusPerNode, GroupKind::Ep);
    if (plan.pp > 1) p.ppPair = cheapestStagePair(plan, gpusPerNode);
    return p;
}

DpPlacements dpPlacements(const Plan& plan, int gpusPerNode) {
    DpPlacements p;
    // Hybrid sharding: the shard and replica groups are runs of the data-parallel group, not whole dims (the ZeRO
    // stage is chosen later; a stage-0 plan with replicas is rejected by fastReason). The expert groups split only
    // where the replicas divide them (validatePlan requires it of a model with experts).
    const int r = plan.zeroReplicas;
    const bool denseHybrid = r > 1 && (plan.cp == 1 || plan.zeroOverCp) && (plan.dp * plan.cp) % r == 0;
    const bool expertHybrid = r > 1 && plan.ep > 0 && (plan.expertLayoutApart() || plan.dp % plan.ep == 0) &&
                              plan.expertGradientGroup() > 0 && plan.expertGradientGroup() % r == 0;
    if (denseHybrid) {
        p.dense = placeGroup(plan, gpusPerNode, GroupKind::ZeroShard);
        p.denseReplicas = placeGroup(plan, gpusPerNode, GroupKind::ZeroReplica);
    } else {
        p.dense = fastPlaceGroup(plan, gpusPerNode, plan.cp > 1 ? GroupKind::DpCp : GroupKind::Dp);
    }
    if (expertHybrid) {
        p.expert = placeGroup(plan, gpusPerNode, GroupKind::ExpertZeroShard);
        p.expertReplicas = placeGroup(plan, gpusPerNode, GroupKind::ExpertZeroReplica);
    } else {
        p.expert = fastPlaceGroup(plan, gpusPerNode, GroupKind::ExpertDp);
    }
    if (plan.pp > 1) p.embSync = embeddingSyncPlacement(plan, gpusPerNode);
    return p;
}

OrderClasses effectiveOrders(const Plan& planIn, int gpusPerNode, const std::vector<int>& candidates) {
    Plan plan = planIn;
    OrderClasses oc;
    std::vector<std::pair<int, int>> seen;
    for (int idx : distinctOrderIndices(plan, candidates)) {
        plan.rankOrder = allRankOrders()[static_cast<size_t>(idx)];
        const InnerPlacements ip = innerPlacements(plan, gpusPerNode);
        const DpPlacements dpp = dpPlacements(plan, gpusPerNode);
        auto ii = std::find_if(oc.inner.begin(), oc.inner.end(), [&](const auto& x) { return sameInner(x, ip); });
        const int ic = static_cast<int>(ii - oc.inner.begin());
        if (ii == oc.inner.end()) oc.inner.push_back(ip);
        auto di = std::find_if(oc.dp.begin(), oc.dp.end(), [&](const auto& x) { return sameDp(x, dpp); });
        const int dc = static_cast<int>(di - oc.dp.begin());
        if (di == oc.dp.end()) oc.dp.push_back(dpp);
        if (std::find(seen.begin(), seen.end(), std::make_pair(ic, dc)) != seen.end()) continue;
        seen.push_back({ic, dc});
        oc.orders.push_back(idx);
        oc.innerOf.push_back(ic);
        oc.dpOf.push_back(dc);
    }
    return oc;
}

} // namespace tessel::sim::detail
