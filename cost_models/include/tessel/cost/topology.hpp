// Process groups of a plan laid out by rank_order on the cluster, and which network tier each group uses.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/plan.hpp"

#include <string>
#include <vector>

namespace tessel {

// The groups a plan communicates over. Dp is the dense-parameter data-parallel group (ep x dp/ep ranks);
// ExpertDp is the data-parallel group of expert parameters (cp x dp/ep ranks: the CP ranks' tokens differ, so
// their expert gradients are summed too; folded, the expert layout's edp); DpCp is dp x cp (ZeRO over CP);
// PpPair is two ranks of adjacent pipeline stages (stage s and s+1). With hybrid sharding (plan.zeroReplicas > 1)
// the dense gradient group (DpCp with cp > 1, else Dp) splits into ZeroShard groups of zeroShardSize() consecutive
// members (in the group's own order), and ZeroReplica joins the members at the same place of every shard group;
// ExpertZeroShard and ExpertZeroReplica split ExpertDp the same way. ExpertTp splits each expert (the Tp group
// unless etp differs from tp). With etp != tp (MoE parallel folding), or Megatron-core's expert RankGenerator with
// cp > 1 (Plan::expertLayoutApart), the expert groups (Ep, ExpertTp, ExpertDp and its splits) come from the expert layout: rank_order with sizes etp, 1, ep, tp x cp x dp / (etp x ep), pp, as
// Megatron-core's expert RankGenerator lays them; the dense layout then has no ep (Dp is the whole dp).
enum class GroupKind { Tp, Cp, Ep, Dp, ExpertDp, DpCp, Pp, PpPair, ZeroShard, ZeroReplica, ExpertZeroShard, ExpertZeroReplica, ExpertTp };
constexpr int kGroupKinds = 13;
std::string toString(GroupKind g);
// The group a ZeRO/FSDP collective of dense (expert = false) or expert parameters runs over: the whole
// data-parallel group, or its shard group under hybrid sharding; the replica group (for the gradient all-reduce
// across replicas) when `replicas` is set. Kinds only: the ranks come from groupRanks.
GroupKind zeroGroupKind(const Plan& plan, bool expert, bool replicas = false);

// Rank coordinates. The world is laid out as the five dims of rank_order, fastest first, with sizes
// tp, cp, ep, dp/ep, pp (EP is carved out of DP, as in Megatron-core; a folded plan's dense layout has ep 1 and
// dp whole). `dpIndex` is ep_index + ep * edp_index.
struct RankCoords {
    int tp = 0, cp = 0, ep = 0, edp = 0, pp = 0;
    int dpIndex(const Plan& p) const { return ep + (p.expertLayoutApart() ? 1 : p.ep) * edp; }
};
RankCoords rankCoords(const Plan& plan, int rank);
int rankOf(const Plan& plan, const RankCoords& c);

// Ranks of the group of `kind` that contains `rank`, ascending by the group's own index.
// For PpPair: {rank, rank of the next stage} (empty on the last stage).
std::vector<int> groupRanks(const Plan& plan, GroupKind kind, int rank);

// Where a group's ranks sit: how many nodes it spans and the most ranks it has on one node.
struct GroupPlacement {
    int size = 1;
    int nodes = 1;
    int ranksPerNode = 1;   // max over the nodes it touches; == size when it stays in one node
    int minRanksPerNode = 0; // min over the nodes it touches (its NICs bound a ring); 0: not known, taken as size / nodes
    bool spansNodes() const { return nodes > 1; }
};
GroupPlacement placeRanks(const std::vector<int>& ranks, int gpusPerNode);
// Worse placement first: more nodes spanned, then fewer ranks sharing the busiest node (more traffic leaves
// it), then fewer on the emptiest (fewer NICs for a ring's traffic). placeGroup reports the worst group.
bool worsePlacement(const GroupPlacement& a, const GroupPlacement& b);
// The groups of a kind a folded plan (etp != tp) lays out in its expert layout: Ep, ExpertDp, ExpertTp and their
// hybrid-sharding splits.
bool isExpertGroup(GroupKind kind);
// Placement of the group of `kind`; the worst case (most nodes spanned) over all groups of that kind.
GroupPlacement placeGroup(const Plan& plan, const ClusterConfig& cluster, GroupKind kind);
GroupPlacement placeGroup(const Plan& plan, int gpusPerNode, GroupKind kind);
// Placement of the pipeline transfers between stages `from` and `to` (any two stages: the interleaved schedule's
// last-to-first hop too): the worst over every rank of stage `from` paired with its counterpart on stage `to`.
GroupPlacement placeStagePair(const Plan& plan, const ClusterConfig& cluster, int from, int to);
// Ranks of pipeline stage `stage` whose hops to any other stage show every placement such a hop has: a hop's
// placement depends on its rank only through the rank mod gpus_per_node (the hop's length is fixed by the two stages),
// so of the stage's ranks a + s (stage + pp b) (s: pp's stride in rank_order, a < s) the a below gpus_per_node and
// the b below gpus_per_node / gcd(s pp, gpus_per_node) suffice: at most gpus_per_node^2 whatever the world size, so a
// search over 100,000 GPUs places its hops without visiting every rank.
std::vector<int> stageRepresentatives(const Plan& plan, int gpusPerNode, int stage);

} // namespace tessel
