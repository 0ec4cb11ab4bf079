// Context parallelism's exchanges of one layer's attention (tensor shapes: gpt_impl.hpp): K and V gathered over the CP
// group (p2p and allgather), or the heads traded for the positions by all-to-all within groups of cp_a2a_size (a2a:
// the whole group; a2a+p2p: each all-to-all group's K and V then gathered over the groups).
#include "tessel/exec/gpt.hpp"

#include "gpt_impl.hpp"

namespace tessel::exec {

using namespace detail;

// ---- K/V all-gather over CP and the reduce-scatter of their gradients ----
void GptModel::Impl::cpReorder(const Tensor& src, Tensor& dst, bool toPositionOrder) {
    const int64_t c = seqLen / (2 * cp), cols = src.dim(1);
    Tensor tmp = be.empty({c, cols}, kBuf);
    for (int r = 0; r < cp; ++r)
        for (int64_t i = 0; i < sequences; ++i)
            for (int half = 0; half < 2; ++half) {
                const int64_t rankRow = (r * sequences + i) * sLocal + half * c;
                const int64_t posRow = i * seqLen + rankPos[static_cast<size_t>(r)][static_cast<size_t>(half * c)];
                be.copyRows(src, toPositionOrder ? rankRow : posRow, tmp);
                be.copyRowsInto(tmp, dst, toPositionOrder ? posRow : rankRow);
            }
}

Tensor GptModel::Impl::cpGather(const Tensor& x) {
    if (cp == 1) return x;
    Tensor all = be.empty({T * cp, x.dim(1)}, kBuf);
    ctx.comm->allGather(x, all, ctx.cp);
    Tensor full = be.empty({sequences * seqLen, x.dim(1)}, kBuf);
    cpReorder(all, full, true);
    return full;
}

Tensor GptModel::Impl::cpReduce(const Tensor& full) {
    if (cp == 1) return full;
    Tensor all = be.empty({T * cp, full.dim(1)}, kBuf);
    cpReorder(full, all, false);
    Tensor mine = be.empty({T, full.dim(1)}, kBuf);
    ctx.comm->reduceScatter(all, mine, ctx.cp);
    return mine;
}

// ---- the all-to-all exchanges ----
const Group& GptModel::Impl::cpHeadsGroup() const { return cpRing ? ctx.cpA2a : ctx.cp; }

Tensor GptModel::Impl::headsToGroup(const Tensor& x) {
    const Group& g = cpHeadsGroup();
    const int n = g.size();
    const int64_t w = x.dim(1) / n;                                           // one block of the heads' columns
    Tensor recv = be.empty({n * T, w}, kBuf);                                 // [n T, w] block i from member i
    Tensor send = be.empty({n * T, w}, kBuf);                                 // [n T, w] block j to member j
    Tensor block = be.empty({T, w}, kBuf);
    for (int j = 0; j < n; ++j) {
        be.copyColumns(x, j * w, block);
        be.copyRowsInto(block, send, j * T);
    }
    ctx.comm->allToAll(send, recv, g);
    return recv;
}

Tensor GptModel::Impl::headsFromGroup(const Tensor& rows, MemoryCategory cat) {
    const Group& g = cpHeadsGroup();
    const int n = g.size();
    const int64_t w = rows.dim(1);
    Tensor recv = be.empty({n * T, w}, kBuf);                                 // [n T, w] block j: head block j
    ctx.comm->allToAll(rows, recv, g);
    Tensor mine = be.zeros({T, n * w}, cat);                                  // [T, heads x d]
    Tensor block = be.empty({T, w}, kBuf);
    for (int j = 0; j < n; ++j) {
        be.copyRows(recv, j * T, block);
        be.addColumnsInto(block, mine, j * w);
    }
    return mine;
}

void GptModel::Impl::groupRowsToSequences(const Tensor& src, Tensor& dst, bool toSequences) {
    const int n = cpHeadsGroup().size();
    Tensor tmp = be.empty({sLocal, src.dim(1)}, kBuf);
    for (int i = 0; i < n; ++i)
        for (int64_t q = 0; q < sequences; ++q) {
            const int64_t memberRow = (i * sequences + q) * sLocal, sequenceRow = (q * n + i) * sLocal;
            be.copyRows(src, toSequences ? memberRow : sequenceRow, tmp);
            be.copyRowsInto(tmp, dst, toSequences ? sequenceRow : memberRow);
        }
}

std::vector<int64_t> GptModel::Impl::groupQueryPositions() const {
    const Group& g = cpHeadsGroup();
    const int first = ctx.cp.myIndex - g.myIndex;                              // the group's first CP index
    std::vector<int64_t> pos;
    for (int i = 0; i < g.size(); ++i) {
        const auto& p = rankPos[static_cast<size_t>(first + i)];
        pos.insert(pos.end(), p.begin(), p.end());
    }
    return pos;
}

Tensor GptModel::Impl::queriesOfGroup(const Tensor& x) {
    const Tensor rows = headsToGroup(x);
    Tensor out = be.empty(rows.shape(), kBuf);
    groupRowsToSequences(rows, out, true);
    return out;
}

Tensor GptModel::Impl::queriesToMine(const Tensor& x, MemoryCategory cat) {
    Tensor rows = be.empty(x.shape(), kBuf);
    groupRowsToSequences(x, rows, false);
    return headsFromGroup(rows, cat);
}

Tensor GptModel::Impl::keysOfAll(const Tensor& x) {
    Tensor rows = headsToGroup(x);                                            // [n T, w] the group's members
    if (cpRing) {                                                             // ... of every group, by CP index
        Tensor all = be.empty({cp * T, rows.dim(1)}, kBuf);
        ctx.comm->allGather(rows, all, ctx.cpP2p);
        rows = all;
    }
    Tensor full = be.empty({sequences * seqLen, rows.dim(1)}, kBuf);          // [S, w] position order
    cpReorder(rows, full, true);
    return full;
}

Tensor GptModel::Impl::keyGradientsToMine(const Tensor& full) {
    Tensor all = be.empty({cp * T, full.dim(1)}, kBuf);                       // [cp T, w] by CP index
    cpReorder(full, all, false);
    if (cpRing) {                                                             // my group's share, summed over groups
        Tensor mine = be.empty({cpHeadsGroup().size() * T, full.dim(1)}, kBuf);
        ctx.comm->reduceScatter(all, mine, ctx.cpP2p);
        all = mine;
    }
    return headsFromGroup(all, kBuf);
}

Tensor GptModel::Impl::attentionA2aForward(const Tensor& q, const Tensor& k, const Tensor& v, const ScoreRule& rule,
                                           Tensor& lse, MemoryCategory cat) {
    const int n = cpHeadsGroup().size();
    const int64_t Sq = sequences * n * sLocal, S = sequences * seqLen, aH = aL / n, kvH = kvhL / n;
    Tensor qh = queriesOfGroup(q);                                            // [Sq, aH d] the group's queries
    Tensor kh = keysOfAll(k), vh = keysOfAll(v);                              // [S, kvH d] every position's keys
    // The log-sum-exp stays in the heads' layout ([Sq, aH], as many values as [T, aL]): the backward reads it there,
    // and a device backend keeps its fp32 values beside the tensor its forward wrote.
    Tensor oh = be.empty({Sq, aH * d}, kBuf);
    lse = be.empty({Sq, aH}, cat);
    Tensor ohv = oh.view({Sq, aH, d});
    be.attentionForward(qh.view({Sq, aH, d}), kh.view({S, kvH, d}), vh.view({S, kvH, d}), sequences,
                        groupQueryPositions(), allPositions(), ohv, lse, rule);
    return queriesToMine(oh, cat);                                            // [T, qL] the projection's input
}

void GptModel::Impl::attentionA2aBackward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                          const Tensor& lse, const ScoreRule& rule, const Tensor& dO, Tensor& dq,
                                          Tensor& dk, Tensor& dv) {
    const int n = cpHeadsGroup().size();
    const int64_t Sq = sequences * n * sLocal, S = sequences * seqLen, aH = aL / n, kvH = kvhL / n;
    // The kept q, k, v and output in this rank's tokens' layout go to the heads' layout again (Transformer Engine keeps
    // that layout instead; the same bytes); the log-sum-exp was kept there.
    Tensor qh = queriesOfGroup(q), kh = keysOfAll(k), vh = keysOfAll(v);
    Tensor oh = queriesOfGroup(o), dOh = queriesOfGroup(dO);
    Tensor dqh = be.empty({Sq, aH * d}, kBuf), dkh = be.zeros({S, kvH * d}, kBuf), dvh = be.zeros({S, kvH * d}, kBuf);
    Tensor dqv = dqh.view({Sq, aH, d}), dkv = dkh.view({S, kvH, d}), dvv = dvh.view({S, kvH, d});
    be.attentionBackward(dOh.view({Sq, aH, d}), qh.view({Sq, aH, d}), kh.view({S, kvH, d}), vh.view({S, kvH, d}),
                         oh.view({Sq, aH, d}), lse, sequences, groupQueryPositions(), allPositions(), dqv, dkv, dvv,
                         rule);
    dq = queriesToMine(dqh, kBuf);                                            // [T, qL]
    dk = keyGradientsToMine(dkh);                                             // [T, kvL]
    dv = keyGradientsToMine(dvh);                                             // [T, kvL]
}

} // namespace tessel::exec
