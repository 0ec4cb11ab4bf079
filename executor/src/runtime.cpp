// One rank's training step: the stage's action list from the simulator, executed in order — compute through
// the GPT model, pipeline transfers, data-parallel gradient buckets (ZeRO 0-3), AdamW with global-norm clipping.
#include "tessel/exec/runtime.hpp"

#include "tessel/cost/errors.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

namespace tessel::exec {

namespace {
using Clock = std::chrono::steady_clock;

// Tags of pipeline messages: distinct per (direction, micro-batch, chunk) so transfers can never pair up
// wrongly whatever the order in which two stages post them (MPI's tag space is at least 32767).
int transferTag(bool grad, int mb, int chunk, int vpp) { return ((mb * vpp + chunk) * 2 + (grad ? 1 : 0)) % 32000; }

// A ZeRO bucket: the flattened gradients (and, under ZeRO >= 1, the optimizer state) of a set of parameters,
// sharded over the data-parallel group: member i owns elements [i * shard, (i + 1) * shard) of the flat
// buffer padded to a multiple of the group size.
struct Bucket {
    std::vector<int> params;
    int64_t flat = 0;
    int64_t shard = 0;
    Tensor gradShard;   // [shard, 1] Grads: reduced gradient shard (ZeRO >= 1)
    Tensor valueShard;  // [shard, 1] Optimizer-owned updated values before the all-gather (ZeRO >= 1)
    Tensor m, v;        // [shard, 1] Adam moments of the shard (ZeRO >= 1)
};
} // namespace

struct Trainer::Impl {
    ModelConfig model;
    ParallelContext ctx;
    Backend& be;
    TrainHyper hyper;
    DataSource data;
    GptModel gpt;
    sim::ActionSchedule schedule;
    const sim::StageSchedule* mine = nullptr;
    // (chunk, schedule bucket) -> the buckets reduced by that action. A tied word embedding shared by the
    // first and last stage gets a bucket of its own on both, so the two stages' shards line up element by
    // element and the embedding-gradient all-reduce can sum them under any ZeRO stage.
    std::map<std::pair<int, int>, std::vector<Bucket>> buckets;
    std::map<int, std::pair<Tensor, Tensor>> moments;       // ZeRO-0: parameter -> (m, v)
    int64_t adamStep = 0;
    Clock::time_point runStart = Clock::now(); // records are timed from here, so steps follow each other
    std::array<int, 3> embeddingBucket{-1, -1, -1}; // (chunk, schedule bucket, index) of the tied embedding

    Impl(const ModelConfig& m, const ParallelContext& c, Backend& b, const TrainHyper& hp, DataSource d)
        : model(m), ctx(c), be(b), hyper(hp), data(std::move(d)), gpt(m, c, b, hp.seed) {
        schedule = sim::buildSchedule(model, ctx.plan);
        mine = &schedule.forRank(ctx.rank);
        const int dpSize = ctx.dp.size();
        auto makeBucket = [&](std::vector<int> params) {
            Bucket bk;
            bk.params = std::move(params);
            for (int p : bk.params) bk.flat += gpt.parameters()[static_cast<size_t>(p)].value.numel();
            bk.shard = (bk.flat + dpSize - 1) / dpSize;
            if (ctx.plan.zeroStage >= 1) {
                bk.gradShard = be.zeros({bk.shard, 1}, MemoryCategory::Grads);
                bk.m = be.zeros({bk.shard, 1}, MemoryCategory::Optimizer);
                bk.v = be.zeros({bk.shard, 1}, MemoryCategory::Optimizer);
                bk.valueShard = be.zeros({bk.shard, 1}, MemoryCategory::Optimizer);
            }
            return bk;
        };
        for (int chunk = 0; chunk < gpt.chunks(); ++chunk)
            for (int j = 0; j < gpt.bucketsPerChunk(); ++j) {
                std::vector<int> plain, shared;
                for (int p : gpt.bucketParameters(chunk, j, false)) {
                    const ParamInfo& info = gpt.parameters()[static_cast<size_t>(p)].info;
                    const bool tiedShared = ctx.embedding.size() > 1 && !info.pieces.empty() &&
                                            info.pieces.front().fullName == "wte";
                    (tiedShared ? shared : plain).push_back(p);
                }
                auto& list = buckets[{chunk, j}];
                if (!plain.empty()) list.push_back(makeBucket(plain));
                if (!shared.empty()) {
                    list.push_back(makeBucket(shared));
                    embeddingBucket = {chunk, j, static_cast<int>(list.size()) - 1};
                }
            }
        if (ctx.plan.zeroStage == 0) {
            for (size_t i = 0; i < gpt.parameters().size(); ++i) {
                const Tensor& value = gpt.parameters()[i].value;
                moments.emplace(static_cast<int>(i), std::make_pair(be.zeros(value.shape(), MemoryCategory::Optimizer),
                                                                     be.zeros(value.shape(), MemoryCategory::Optimizer)));
            }
        }
    }

    Parameter& param(int i) { return gpt.parameters()[static_cast<size_t>(i)]; }

    // Flat [padded, 1] copy of the bucket's gradients (or values).
    Tensor flatten(const Bucket& bk, bool values, MemoryCategory cat) {
        Tensor flat = be.zeros({bk.shard * ctx.dp.size(), 1}, cat);
        int64_t at = 0;
        for (int p : bk.params) {
            const Tensor& t = values ? param(p).value : param(p).grad;
            be.copyRowsInto(t.view({t.numel(), 1}), flat, at);
            at += t.numel();
        }
        return flat;
    }
    void unflatten(const Tensor& flat, const Bucket& bk, bool values) {
        int64_t at = 0;
        for (int p : bk.params) {
            Tensor& t = values ? param(p).value : param(p).grad;
            Tensor view = t.view({t.numel(), 1});
            be.copyRows(flat, at, view);
            at += t.numel();
        }
    }

    const Group& denseGroup() const { return ctx.dp; }

    void reduceBucket(const sim::Action& a, ActionRecord& rec) {
        for (Bucket& bk : buckets.at({a.chunk, a.bucket})) reduceOne(bk, rec);
    }

    void reduceOne(Bucket& bk, ActionRecord& rec) {
        const Group& g = denseGroup();
        rec.group = g.name;
        rec.groupSize = g.size();
        Tensor flat = flatten(bk, false, MemoryCategory::Buffers);
        rec.bytes += static_cast<double>(flat.numel() * elementBytes(be.elementType()));
        if (ctx.plan.zeroStage == 0) {
            ctx.comm->allReduce(flat, g);
            unflatten(flat, bk, false);
            return;
        }
        // ZeRO >= 1: reduce-scatter; this rank keeps its shard. Under ZeRO-2/3 this runs per micro-batch, so
        // the shard accumulates and the full gradients are cleared for the next micro-batch.
        Tensor shard = be.empty({bk.shard, 1}, MemoryCategory::Buffers);
        ctx.comm->reduceScatter(flat, shard, g);
        be.add(shard, bk.gradShard);
        for (int p : bk.params) be.fill(param(p).grad, 0.0);
    }

    void gatherParams(const sim::Action& a, ActionRecord& rec) {
        const Group& g = denseGroup();
        rec.group = g.name;
        rec.groupSize = g.size();
        for (auto& [key, list] : buckets) {
            if (key.first != a.chunk) continue;
            for (Bucket& bk : list) gatherOne(a, bk, rec);
        }
    }

    void gatherOne(const sim::Action& a, Bucket& bk, ActionRecord& rec) {
        const Group& g = denseGroup();
        {
            Tensor flat = be.empty({bk.shard * g.size(), 1}, MemoryCategory::Buffers);
            if (a.name.rfind("zero3_", 0) == 0) {
                // ZeRO-3 gathers the current parameters before forward/backward. The CPU executor keeps the
                // full values resident (they are rebuilt here from the shards every time, so a shard that
                // diverged would show), so the gather's traffic is real while its memory saving is not.
                Tensor mineFlat = flatten(bk, true, MemoryCategory::Buffers);
                Tensor myShard = be.empty({bk.shard, 1}, MemoryCategory::Buffers);
                be.copyRows(mineFlat, static_cast<int64_t>(g.myIndex) * bk.shard, myShard);
                ctx.comm->allGather(myShard, flat, g);
            } else {
                ctx.comm->allGather(bk.valueShard, flat, g);
            }
            rec.bytes += static_cast<double>(flat.numel() * elementBytes(be.elementType()));
            unflatten(flat, bk, true);
        }
    }

    // Squared norm of this rank's gradients, counting each distinct gradient element once over the world:
    // replicated-over-TP parameters on TP rank 0 only, unsharded (ZeRO-0) gradients on DP rank 0 only, the
    // tied embedding's last-stage copy not at all (it equals the first stage's after the sync).
    double localSquaredNorm() {
        double sum = 0.0;
        const bool tpLead = ctx.tp.myIndex == 0;
        if (ctx.plan.zeroStage == 0) {
            if (ctx.dp.myIndex != 0) return 0.0;
            for (auto& p : gpt.parameters()) {
                if ((p.info.replicatedOverTp && !tpLead) || p.info.tiedEmbeddingCopy) continue;
                sum += be.sumSquares(p.grad);
            }
            return sum;
        }
        for (auto& [key, list] : buckets)
            for (Bucket& bk : list) {
            // A bucket mixes kinds of parameters; count the shard's element ranges parameter by parameter.
            int64_t at = 0;
            const int64_t lo = static_cast<int64_t>(ctx.dp.myIndex) * bk.shard, hi = lo + bk.shard;
            std::vector<double> shard = be.download(bk.gradShard);
            for (int p : bk.params) {
                const int64_t n = param(p).value.numel();
                const bool skip = (param(p).info.replicatedOverTp && !tpLead) || param(p).info.tiedEmbeddingCopy;
                for (int64_t e = std::max(at, lo); e < std::min(at + n, hi); ++e)
                    if (!skip) sum += shard[static_cast<size_t>(e - lo)] * shard[static_cast<size_t>(e - lo)];
                at += n;
            }
        }
        return sum;
    }

    double optimizerStep() {
        const std::vector<double> total = ctx.comm->allReduceHost({localSquaredNorm()}, ctx.world);
        const double norm = std::sqrt(total[0]);
        // Global-norm clipping (Pascanu et al. 2013), as torch.nn.utils.clip_grad_norm_ (eps 1e-6).
        const double clip = hyper.clipNorm > 0.0 ? std::min(1.0, hyper.clipNorm / (norm + 1e-6)) : 1.0;
        ++adamStep;
        if (ctx.plan.zeroStage == 0) {
            for (auto& [i, mv] : moments) {
                Parameter& p = param(i);
                if (clip < 1.0) be.scale(p.grad, clip);
                const double wd = p.value.dim(0) == 1 ? 0.0 : hyper.weightDecay; // no decay on vectors
                be.adamw(p.value, p.grad, mv.first, mv.second, hyper.learningRate, hyper.beta1, hyper.beta2, hyper.eps,
                         wd, adamStep);
                be.fill(p.grad, 0.0);
            }
            return norm;
        }
        for (auto& [key, list] : buckets)
            for (Bucket& bk : list) {
            // Values of this rank's shard, updated element-wise; weight decay only on matrices, so update the
            // shard parameter by parameter over the ranges it covers.
            Tensor flatValues = flatten(bk, true, MemoryCategory::Buffers);
            const int64_t lo = static_cast<int64_t>(ctx.dp.myIndex) * bk.shard;
            be.copyRows(flatValues, lo, bk.valueShard);
            if (clip < 1.0) be.scale(bk.gradShard, clip);
            int64_t at = 0;
            for (int p : bk.params) {
                const int64_t n = param(p).value.numel();
                const int64_t b0 = std::max(at, lo), b1 = std::min(at + n, lo + bk.shard);
                if (b1 > b0) {
                    const double wd = param(p).value.dim(0) == 1 ? 0.0 : hyper.weightDecay;
                    Tensor val = be.empty({b1 - b0, 1}, MemoryCategory::Buffers);
                    Tensor grad = be.empty({b1 - b0, 1}, MemoryCategory::Buffers);
                    Tensor m1 = be.empty({b1 - b0, 1}, MemoryCategory::Buffers);
                    Tensor v1 = be.empty({b1 - b0, 1}, MemoryCategory::Buffers);
                    be.copyRows(bk.valueShard, b0 - lo, val);
                    be.copyRows(bk.gradShard, b0 - lo, grad);
                    be.copyRows(bk.m, b0 - lo, m1);
                    be.copyRows(bk.v, b0 - lo, v1);
                    be.adamw(val, grad, m1, v1, hyper.learningRate, hyper.beta1, hyper.beta2, hyper.eps, wd, adamStep);
                    be.copyRowsInto(val, bk.valueShard, b0 - lo);
                    be.copyRowsInto(m1, bk.m, b0 - lo);
                    be.copyRowsInto(v1, bk.v, b0 - lo);
                }
                at += n;
            }
            be.fill(bk.gradShard, 0.0);
            for (int p : bk.params) be.fill(param(p).grad, 0.0);
            if (ctx.plan.zeroStage >= 3) {
                // No all-gather follows the optimizer under ZeRO-3: write this rank's updated shard into its
                // range of the resident values, which the next gather collects from every member.
                be.copyRowsInto(bk.valueShard, flatValues, lo);
                unflatten(flatValues, bk, true);
            }
        }
        return norm;
    }
};

Trainer::Trainer(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, const TrainHyper& hyper,
                 DataSource data)
    : impl_(std::make_unique<Impl>(model, ctx, backend, hyper, std::move(data))) {}

Trainer::~Trainer() = default;
GptModel& Trainer::model() { return impl_->gpt; }
const sim::StageSchedule& Trainer::actions() const { return *impl_->mine; }

StepStats Trainer::step(int stepIndex) {
    Impl& m = *impl_;
    const Plan& plan = m.ctx.plan;
    const int dpIndex = m.ctx.dp.myIndex;
    std::map<std::pair<int, int>, Tensor> received;   // (mb, chunk) -> input activation or output gradient
    std::map<std::pair<int, int>, Tensor> toSend;     // (mb, chunk) -> output activation or input gradient
    std::map<int, MicroBatchData> batches;
    auto batch = [&](int mb) -> const MicroBatchData& {
        auto it = batches.find(mb);
        if (it == batches.end()) it = batches.emplace(mb, m.data(stepIndex, dpIndex, mb)).first;
        return it->second;
    };
    double gradNorm = 0.0;
    const auto& acts = m.mine->actions;
    for (size_t i = 0; i < acts.size(); ++i) {
        const sim::Action& a = acts[i];
        ActionRecord rec;
        rec.step = stepIndex;
        rec.rank = m.ctx.rank;
        rec.stage = m.ctx.stage();
        rec.index = static_cast<int>(i);
        rec.name = a.traceName();
        rec.kind = sim::toString(a.kind);
        rec.microBatch = a.microBatch;
        rec.chunk = a.chunk;
        rec.bucket = a.bucket;
        const auto t0 = Clock::now();
        const std::pair<int, int> key{a.microBatch, a.chunk};
        switch (a.kind) {
        case sim::ActionKind::Forward: {
            Tensor in;
            if (auto it = received.find(key); it != received.end()) {
                in = it->second;
                received.erase(it);
            }
            Tensor out = m.gpt.forward(a.microBatch, a.chunk, in, batch(a.microBatch));
            if (out.defined()) toSend[key] = out;
            break;
        }
        case sim::ActionKind::Backward:
        case sim::ActionKind::BackwardInput: {
            Tensor grad;
            if (auto it = received.find(key); it != received.end()) {
                grad = it->second;
                received.erase(it);
            }
            Tensor dx = m.gpt.backward(a.microBatch, a.chunk, grad, a.kind == sim::ActionKind::BackwardInput);
            if (dx.defined()) toSend[key] = dx;
            if (m.gpt.chunkHasEmbedding(a.chunk) && a.kind == sim::ActionKind::Backward) batches.erase(a.microBatch);
            break;
        }
        case sim::ActionKind::BackwardWeight: m.gpt.backwardWeight(a.microBatch, a.chunk); break;
        case sim::ActionKind::SendActivation:
        case sim::ActionKind::SendGrad: {
            auto it = toSend.find(key);
            if (it == toSend.end())
                throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": nothing to send for micro-batch " +
                                   std::to_string(a.microBatch) + " chunk " + std::to_string(a.chunk));
            const bool grad = a.kind == sim::ActionKind::SendGrad;
            rec.peerRank = m.ctx.stageRank(a.peerStage);
            rec.group = "pp";
            rec.groupSize = 2;
            rec.bytes = static_cast<double>(it->second.numel() * elementBytes(m.be.elementType()));
            m.ctx.comm->send(it->second, rec.peerRank, transferTag(grad, a.microBatch, a.chunk, plan.vpp));
            toSend.erase(it);
            break;
        }
        case sim::ActionKind::RecvActivation:
        case sim::ActionKind::RecvGrad: {
            const bool grad = a.kind == sim::ActionKind::RecvGrad;
            // The activation a stage receives is the input its layers keep; a gradient is transient.
            Tensor t = m.be.empty({m.gpt.hiddenRows(), m.model.hidden},
                                  grad ? MemoryCategory::Buffers : MemoryCategory::Activations);
            rec.peerRank = m.ctx.stageRank(a.peerStage);
            rec.group = "pp";
            rec.groupSize = 2;
            rec.bytes = static_cast<double>(t.numel() * elementBytes(m.be.elementType()));
            // The sender's chunk: activations come from virtual stage u-1, gradients from u+1.
            const int u = a.chunk * plan.pp + m.ctx.stage();
            const int peerVirtual = grad ? u + 1 : u - 1;
            m.ctx.comm->recv(t, rec.peerRank, transferTag(grad, a.microBatch, peerVirtual / plan.pp, plan.vpp));
            received[key] = t;
            break;
        }
        case sim::ActionKind::Collective: {
            if (a.name.rfind("dp_all_reduce_grads", 0) == 0 || a.name.rfind("dp_reduce_scatter_grads", 0) == 0) {
                if (a.name.find("_expert") != std::string::npos)
                    throw RuntimeError("expert-parallel gradient buckets are not executed yet");
                if (plan.zeroStage >= 3) {
                    // ZeRO-3 reduces a chunk's gradients as one bucket per micro-batch.
                    for (int j = 0; j < m.gpt.bucketsPerChunk(); ++j) {
                        sim::Action each = a;
                        each.bucket = j;
                        m.reduceBucket(each, rec);
                    }
                } else {
                    m.reduceBucket(a, rec);
                }
            } else if (a.name.rfind("dp_all_gather_params", 0) == 0 || a.name.rfind("zero3_all_gather_params", 0) == 0) {
                m.gatherParams(a, rec);
            } else if (a.name == "embedding_grad_all_reduce") {
                rec.group = m.ctx.embedding.name;
                rec.groupSize = m.ctx.embedding.size();
                if (plan.zeroStage == 0) {
                    for (auto& p : m.gpt.parameters()) {
                        if (p.info.pieces.empty() || p.info.pieces.front().fullName != "wte") continue;
                        rec.bytes = static_cast<double>(p.grad.numel() * elementBytes(m.be.elementType()));
                        m.ctx.comm->allReduce(p.grad, m.ctx.embedding);
                    }
                } else {
                    // The embedding's own bucket has the same layout on both stages: sum the reduced shards.
                    const auto& eb = m.embeddingBucket;
                    Bucket& bk = m.buckets.at({eb[0], eb[1]}).at(static_cast<size_t>(eb[2]));
                    rec.bytes = static_cast<double>(bk.gradShard.numel() * elementBytes(m.be.elementType()));
                    m.ctx.comm->allReduce(bk.gradShard, m.ctx.embedding);
                }
            } else {
                throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": unknown collective " + a.name);
            }
            break;
        }
        case sim::ActionKind::OptimizerStep: gradNorm = m.optimizerStep(); break;
        }
        const auto t1 = Clock::now();
        rec.startSeconds = std::chrono::duration<double>(t0 - m.runStart).count();
        rec.durationSeconds = std::chrono::duration<double>(t1 - t0).count();
        records_.push_back(std::move(rec));
    }
    if (!received.empty() || !toSend.empty())
        throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": step ended with transfers left over");
    // Mean token loss over the global batch: the last stage's TP rank 0 of every DP replica contributes.
    const bool contributes = m.ctx.stage() == plan.pp - 1 && m.ctx.tp.myIndex == 0;
    const double local = m.gpt.takeLossSum();
    const std::vector<double> total = m.ctx.comm->allReduceHost({contributes ? local : 0.0}, m.ctx.world);
    StepStats stats;
    stats.loss = total[0] / (static_cast<double>(plan.globalBatch) * static_cast<double>(m.model.seqLen));
    stats.gradNorm = gradNorm;
    return stats;
}

std::map<std::string, std::vector<double>> Trainer::gatherFullParameters() {
    Impl& m = *impl_;
    if (m.ctx.plan.zeroStage >= 3) {
        // Resident values hold only this rank's updated shard after the optimizer; gather the rest.
        ActionRecord unused;
        for (int chunk = 0; chunk < m.gpt.chunks(); ++chunk) {
            sim::Action a;
            a.kind = sim::ActionKind::Collective;
            a.name = "zero3_all_gather_params_fwd";
            a.chunk = chunk;
            m.gatherParams(a, unused);
        }
    }
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> sums; // name -> (values, counts)
    std::map<std::string, std::pair<int64_t, int64_t>> shapes;
    for (auto& p : m.gpt.parameters()) {
        const std::vector<double> local = m.be.download(p.value);
        const int64_t cols = localCols(p.info);
        for (const auto& pc : p.info.pieces) {
            auto& entry = sums[pc.fullName];
            const size_t n = static_cast<size_t>(pc.fullRows * pc.fullCols);
            if (entry.first.empty()) {
                entry.first.assign(n, 0.0);
                entry.second.assign(n, 0.0);
                shapes[pc.fullName] = {pc.fullRows, pc.fullCols};
            }
            for (int64_t r = pc.rowBegin; r < pc.rowEnd; ++r)
                for (int64_t c = pc.colBegin; c < pc.colEnd; ++c) {
                    const int64_t lr = pc.localRow + (r - pc.rowBegin), lc = pc.localCol + (c - pc.colBegin);
                    const size_t at = static_cast<size_t>(r * pc.fullCols + c);
                    // A tensor held twice on one rank (tied embedding on one stage) counts once.
                    if (entry.second[at] == 0.0) {
                        entry.first[at] = local[static_cast<size_t>(lr * cols + lc)];
                        entry.second[at] = 1.0;
                    }
                }
        }
    }
    std::map<std::string, std::vector<double>> out;
    for (auto& [name, vc] : sums) {
        std::vector<double> values = vc.first, counts = vc.second;
        if (m.ctx.tp.size() > 1) {
            values = m.ctx.comm->allReduceHost(values, m.ctx.tp);
            counts = m.ctx.comm->allReduceHost(counts, m.ctx.tp);
        }
        for (size_t i = 0; i < values.size(); ++i)
            if (counts[i] > 0.0) values[i] /= counts[i];
        out[name] = std::move(values);
    }
    return out;
}

} // namespace tessel::exec
