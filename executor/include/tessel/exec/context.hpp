// Where one rank sits in a plan: its coordinates and the process groups it talks to, built from the plan's
// rank_order exactly as the cost model lays them out (tessel::groupRanks).
#pragma once

#include "tessel/cost/plan.hpp"
#include "tessel/cost/topology.hpp"
#include "tessel/exec/comm.hpp"

namespace tessel::exec {

struct ParallelContext {
    Plan plan;
    int rank = 0;
    RankCoords coords;
    Comm* comm = nullptr;
    Group tp, cp, ep, dp, expertDp, dpCp, pp;
    // The expert data-parallel ranks of my CP index (dp / ep ranks; expertDp spans cp x dp / ep): the group expert
    // state is sharded over after the all-reduce over cp, without zero_over_cp. expertDp itself when cp is 1.
    Group expertDpInCp;
    // The ranks splitting an expert's FFN (Megatron-core's expert tensor-parallel group): tp itself unless the plan
    // folds the experts (etp != tp), whose layout is etp x ep x edp over the stage's tp x cp x dp ranks.
    Group expertTp;
    // Hybrid sharding (plan.zeroReplicas > 1): the run of the ZeRO group one copy of the state is sharded over, and
    // the ranks holding the same shard in the other copies; the same split of the expert data-parallel group for
    // expert parameters. Empty otherwise.
    Group zeroShard, zeroReplica, expertZeroShard, expertZeroReplica;
    // a2a+p2p (plan.cpComm A2aP2p): the all-to-all group, cp_a2a_size consecutive CP ranks, and the ranks of my index in
    // every such group (Megatron-core's hierarchical context-parallel groups). Empty otherwise.
    Group cpA2a, cpP2p;
    Group embedding;        // first and last stage of this pipeline (tied embeddings, pp > 1); empty otherwise
    Group world;
    int stage() const { return coords.pp; }
    // World rank of the rank with my coordinates but pipeline stage `stage`.
    int stageRank(int stage) const;
};

// Builds every group and creates its communicator. Every rank must call it (collective on the world).
ParallelContext makeContext(const Plan& plan, int rank, Comm& comm, bool tiedEmbeddings);

} // namespace tessel::exec
