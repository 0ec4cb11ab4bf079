// Process groups of one rank, from the plan's rank order (the same layout the cost model costs).
#include "tessel/exec/context.hpp"

#include <numeric>

namespace tessel::exec {

namespace {
Group makeGroup(const std::string& name, std::vector<int> ranks, int me) {
    Group g;
    g.name = name;
    g.ranks = std::move(ranks);
    for (int i = 0; i < g.size(); ++i)
        if (g.ranks[static_cast<size_t>(i)] == me) g.myIndex = i;
    return g;
}
} // namespace

int ParallelContext::stageRank(int s) const {
    RankCoords c = coords;
    c.pp = s;
    return rankOf(plan, c);
}

ParallelContext makeContext(const Plan& plan, int rank, Comm& comm, bool tiedEmbeddings) {
    ParallelContext ctx;
    ctx.plan = plan;
    ctx.rank = rank;
    ctx.coords = rankCoords(plan, rank);
    ctx.comm = &comm;
    ctx.tp = makeGroup("tp", groupRanks(plan, GroupKind::Tp, rank), rank);
    ctx.cp = makeGroup("cp", groupRanks(plan, GroupKind::Cp, rank), rank);
    ctx.ep = makeGroup("ep", groupRanks(plan, GroupKind::Ep, rank), rank);
    ctx.dp = makeGroup("dp", groupRanks(plan, GroupKind::Dp, rank), rank);
    ctx.expertDp = makeGroup("expert_dp", groupRanks(plan, GroupKind::ExpertDp, rank), rank);
    ctx.dpCp = makeGroup("dp_cp", groupRanks(plan, GroupKind::DpCp, rank), rank);
    ctx.pp = makeGroup("pp", groupRanks(plan, GroupKind::Pp, rank), rank);
    std::vector<int> all(static_cast<size_t>(plan.worldSize()));
    std::iota(all.begin(), all.end(), 0);
    ctx.world = makeGroup("world", all, rank);
    // Every rank creates every kind of group in the same order, so collective creation lines up.
    for (const Group* g : {&ctx.tp, &ctx.cp, &ctx.ep, &ctx.dp, &ctx.expertDp, &ctx.dpCp, &ctx.pp, &ctx.world})
        comm.createGroup(*g);
    // Every rank holds the same plan, so all create it or none.
    if (plan.cp > 1) {
        std::vector<int> inCp;
        for (int r : ctx.expertDp.ranks)
            if (rankCoords(plan, r).cp == ctx.coords.cp) inCp.push_back(r);
        ctx.expertDpInCp = makeGroup("expert_dp_in_cp", inCp, rank);
        comm.createGroup(ctx.expertDpInCp);
    } else {
        ctx.expertDpInCp = ctx.expertDp;
    }
    if (plan.cp > 1 && plan.cpComm == CpComm::A2aP2p) {
        const int a = plan.cpA2a, c = ctx.cp.myIndex;   // CP index c: group c / a, member c % a
        std::vector<int> inner, outer;
        for (int i = 0; i < a; ++i) inner.push_back(ctx.cp.ranks[static_cast<size_t>(c - c % a + i)]);
        for (int o = 0; o < plan.cp / a; ++o) outer.push_back(ctx.cp.ranks[static_cast<size_t>(o * a + c % a)]);
        ctx.cpA2a = makeGroup("cp_a2a", inner, rank);
        ctx.cpP2p = makeGroup("cp_p2p", outer, rank);
        comm.createGroup(ctx.cpA2a);
        comm.createGroup(ctx.cpP2p);
    }
    if (plan.expertLayoutApart()) {
        ctx.expertTp = makeGroup("expert_tp", groupRanks(plan, GroupKind::ExpertTp, rank), rank);
        comm.createGroup(ctx.expertTp);
    } else {
        ctx.expertTp = ctx.tp;
    }
    // The embedding group pairs the first and last stage; ranks on middle stages form singleton groups so
    // that the collective creation still lines up.
    const int last = plan.stageOfVirtual(plan.pp * plan.vpp - 1);
    if (tiedEmbeddings && plan.pp > 1 && (ctx.coords.pp == 0 || ctx.coords.pp == last))
        ctx.embedding = makeGroup("embedding", {ctx.stageRank(0), ctx.stageRank(last)}, rank);
    else
        ctx.embedding = makeGroup("embedding", {rank}, rank);
    comm.createGroup(ctx.embedding);
    // Every rank holds the same plan, so all create these four or none (the expert pair equals the dense one without
    // expert parallelism; the plan's check makes zero_replicas divide both groups).
    if (plan.zeroReplicas > 1 && plan.zeroStage >= 1) {
        ctx.zeroShard = makeGroup("zero_shard", groupRanks(plan, GroupKind::ZeroShard, rank), rank);
        ctx.zeroReplica = makeGroup("zero_replica", groupRanks(plan, GroupKind::ZeroReplica, rank), rank);
        ctx.expertZeroShard = makeGroup("expert_zero_shard", groupRanks(plan, GroupKind::ExpertZeroShard, rank), rank);
        ctx.expertZeroReplica = makeGroup("expert_zero_replica", groupRanks(plan, GroupKind::ExpertZeroReplica, rank), rank);
        for (const Group* g : {&ctx.zeroShard, &ctx.zeroReplica, &ctx.expertZeroShard, &ctx.expertZeroReplica})
            comm.createGroup(*g);
    }
    return ctx;
}

} // namespace tessel::exec
