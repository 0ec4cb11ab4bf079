// One rank's training step: the simulator's action list for its stage, executed in order, action by action.
#include "tessel/exec/runtime.hpp"

#include "trainer_impl.hpp"

#include "tessel/cost/errors.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {

namespace {
using detail::Bucket;
using detail::Clock;

// Tags of pipeline messages: distinct per (direction, micro-batch, chunk) so transfers can never pair up
// wrongly whatever the order in which two stages post them (MPI's tag space is at least 32767).
int transferTag(bool grad, int mb, int chunk, int vpp) { return ((mb * vpp + chunk) * 2 + (grad ? 1 : 0)) % 32000; }
} // namespace

Trainer::Trainer(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, const TrainHyper& hyper,
                 DataSource data)
    : impl_(std::make_unique<Impl>(model, ctx, backend, hyper, std::move(data))) {}

Trainer::~Trainer() = default;
GptModel& Trainer::model() { return impl_->gpt; }
const sim::StageSchedule& Trainer::actions() const { return *impl_->mine; }
double Trainer::zero3GatherPeakBytes() const { return static_cast<double>(impl_->gatheredPeakBytes); }

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
    // On an asynchronous backend (CUDA) the host clock around an action measures only its launches: each action
    // is also a timed region on the device, whose times replace the host ones once the step is collected. The
    // CPU backend times nothing on a device (timesOnDevice() is false) and keeps the host clock, which is exact
    // around its synchronous work.
    const bool deviceTimed = m.be.timesOnDevice();
    std::map<int64_t, size_t> regionRecords; // region handle -> index in records_
    // The chunk of this rank that runs the virtual stage after (+1) or before (-1) `chunk`'s, or -1 when another
    // rank runs it (every boundary but DualPipeV's tip).
    auto nextOnThisRank = [&](int chunk, int direction) {
        const int u = plan.virtualStage(m.ctx.stage(), chunk) + direction;
        if (u < 0 || u >= plan.pp * plan.vpp || plan.stageOfVirtual(u) != m.ctx.stage()) return -1;
        return plan.chunkOfVirtual(u);
    };
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
        if (deviceTimed && m.deviceOriginSeconds < 0.0)
            m.deviceOriginSeconds = std::chrono::duration<double>(t0 - m.runStart).count();
        const int64_t region = deviceTimed ? m.be.beginTimedRegion() : -1;
        const std::pair<int, int> key{a.microBatch, a.chunk};
        switch (a.kind) {
        case sim::ActionKind::Forward: {
            Tensor in;
            if (auto it = received.find(key); it != received.end()) {
                in = it->second;
                received.erase(it);
            }
            Tensor out = m.gpt.forward(a.microBatch, a.chunk, in, batch(a.microBatch));
            // DualPipeV's tip: the next virtual stage is this rank's other chunk, which takes the output as it is.
            if (out.defined() && nextOnThisRank(a.chunk, +1) >= 0) received[{a.microBatch, nextOnThisRank(a.chunk, +1)}] = out;
            else if (out.defined()) toSend[key] = out;
            break;
        }
        case sim::ActionKind::Backward:
        case sim::ActionKind::BackwardInput: {
            Tensor grad;
            if (auto it = received.find(key); it != received.end()) {
                grad = it->second;
                received.erase(it);
            }
            m.ensureGrads(a.chunk);
            Tensor dx = m.gpt.backward(a.microBatch, a.chunk, grad, a.kind == sim::ActionKind::BackwardInput);
            if (dx.defined() && nextOnThisRank(a.chunk, -1) >= 0) received[{a.microBatch, nextOnThisRank(a.chunk, -1)}] = dx;
            else if (dx.defined()) toSend[key] = dx;
            if (m.gpt.chunkHasEmbedding(a.chunk) && a.kind == sim::ActionKind::Backward) batches.erase(a.microBatch);
            break;
        }
        case sim::ActionKind::BackwardWeight:
            m.ensureGrads(a.chunk);
            m.gpt.backwardWeight(a.microBatch, a.chunk);
            break;
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
            rec.bytes = static_cast<double>(it->second.numel() * elementBytes(it->second.type()));
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
            rec.bytes = static_cast<double>(t.numel() * elementBytes(t.type()));
            // The sender's chunk: activations come from virtual stage u-1, gradients from u+1.
            const int u = plan.virtualStage(m.ctx.stage(), a.chunk);
            const int peerVirtual = grad ? u + 1 : u - 1;
            m.ctx.comm->recv(t, rec.peerRank, transferTag(grad, a.microBatch, plan.chunkOfVirtual(peerVirtual), plan.vpp));
            received[key] = t;
            break;
        }
        case sim::ActionKind::Collective: {
            if (a.name.rfind("dp_all_reduce_grads_across_replicas", 0) == 0) {
                m.reduceAcrossReplicas(a, rec);
            } else if (a.name.rfind("dp_all_reduce_grads", 0) == 0 || a.name.rfind("dp_reduce_scatter_grads", 0) == 0) {
                m.reduceBucket(a, rec);
            } else if (a.name.rfind("dp_all_gather_params", 0) == 0) {
                m.gatherParams(a, rec);
            } else if (a.name.rfind("zero3_all_gather_params", 0) == 0) {
                m.zero3GatherAction(a, rec);
            } else if (a.name == "embedding_grad_all_reduce") {
                rec.group = m.ctx.embedding.name;
                rec.groupSize = m.ctx.embedding.size();
                if (plan.zeroStage == 0) {
                    for (auto& p : m.gpt.parameters()) {
                        if (p.info.pieces.empty() || p.info.pieces.front().fullName != "wte") continue;
                        rec.bytes = static_cast<double>(p.grad.numel() * elementBytes(p.grad.type()));
                        m.ctx.comm->allReduce(p.grad, m.ctx.embedding);
                    }
                } else {
                    // The embedding's own bucket has the same layout on both stages: sum the reduced shards.
                    const auto& eb = m.embeddingBucket;
                    Bucket& bk = m.buckets.at({eb[0], eb[1]}).at(static_cast<size_t>(eb[2]));
                    // Under ZeRO-1 the reduced shard lives in the full gradients: sum a copy, write it back.
                    if (bk.pending.defined())
                        throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": the embedding's gradient shard is not "
                                           "yet summed across the ZeRO replicas when the embedding sync runs");
                    Tensor shard = plan.zeroStage == 1 ? m.readShard(bk, false) : bk.gradShard;
                    rec.bytes = static_cast<double>(shard.numel() * elementBytes(shard.type()));
                    m.ctx.comm->allReduce(shard, m.ctx.embedding);
                    if (plan.zeroStage == 1) m.writeShard(bk, shard, false);
                }
            } else {
                throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": unknown collective " + std::string(a.name));
            }
            break;
        }
        case sim::ActionKind::OptimizerStep: gradNorm = m.optimizerStep(); break;
        }
        if (deviceTimed) m.be.endTimedRegion(region);
        const auto t1 = Clock::now();
        rec.startSeconds = std::chrono::duration<double>(t0 - m.runStart).count();
        rec.durationSeconds = std::chrono::duration<double>(t1 - t0).count();
        if (deviceTimed) regionRecords[region] = records_.size();
        records_.push_back(std::move(rec));
    }
    if (deviceTimed) {
        // Waits for the step's device work once, at its end (no device-wide sync inside the step). Regions of an
        // earlier step that threw before its collection are not in regionRecords and are dropped.
        for (const Backend::TimedRegion& r : m.be.collectTimedRegions()) {
            const auto it = regionRecords.find(r.handle);
            if (it == regionRecords.end()) continue;
            ActionRecord& rec = records_[it->second];
            rec.startSeconds = m.deviceOriginSeconds + r.startSeconds;
            rec.durationSeconds = r.durationSeconds;
        }
    }
    if (!received.empty() || !toSend.empty())
        throw RuntimeError("rank " + std::to_string(m.ctx.rank) + ": step ended with transfers left over");
    // Mean token loss over the global batch: the last stage's TP rank 0 of every DP replica contributes.
    const bool contributes = plan.holdsHead(m.ctx.stage()) && m.ctx.tp.myIndex == 0;
    const double local = m.gpt.takeLossSum();
    const std::vector<double> total = m.ctx.comm->allReduceHost({contributes ? local : 0.0}, m.ctx.world);
    StepStats stats;
    stats.loss = total[0] / (static_cast<double>(plan.globalBatch) * static_cast<double>(m.model.seqLen));
    stats.gradNorm = gradNorm;
    return stats;
}

std::map<std::string, std::vector<double>> Trainer::gatherFullParameters() {
    Impl& m = *impl_;
    const int64_t trainingPeak = m.gatheredPeakBytes; // this copy is no part of training
    if (m.ctx.plan.zeroStage >= 3) {
        // Only the shards persist: gather every unit for the copy, and release them all after it.
        for (auto& [chunk, units] : m.unitCount)
            for (int unit = 0; unit < units; ++unit)
                if (!m.findResident(chunk, unit)) m.gatherUnit(chunk, unit, nullptr);
    }
    // name -> (values, counts), dense and expert apart: a tensor's pieces are summed over the ranks that split it,
    // TP for dense ones, expert TP for experts (with MoE parallel folding the TP ranks hold other experts).
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> sumsOf[2];
    std::map<std::string, std::pair<int64_t, int64_t>> shapes;
    for (auto& p : m.gpt.parameters()) {
        const std::vector<double> local = m.be.download(p.value);
        const int64_t cols = localCols(p.info);
        auto& sums = sumsOf[p.info.expert ? 1 : 0];
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
    if (m.ctx.plan.zeroStage >= 3) m.releaseResidentBut(nullptr);
    m.gatheredPeakBytes = trainingPeak;
    std::map<std::string, std::vector<double>> out;
    for (int expert = 0; expert < 2; ++expert) {
        const Group& g = expert ? m.ctx.expertTp : m.ctx.tp;
        for (auto& [name, vc] : sumsOf[expert]) {
            std::vector<double> values = vc.first, counts = vc.second;
            if (g.size() > 1) {
                values = m.ctx.comm->allReduceHost(values, g);
                counts = m.ctx.comm->allReduceHost(counts, g);
            }
            for (size_t i = 0; i < values.size(); ++i)
                if (counts[i] > 0.0) values[i] /= counts[i];
            out[name] = std::move(values);
        }
    }
    return out;
}

} // namespace tessel::exec
