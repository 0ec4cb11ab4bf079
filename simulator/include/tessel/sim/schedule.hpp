// Pipeline schedules as per-rank ordered action lists (gpipe, 1f1b, interleaved_1f1b, zero_bubble ZB-H1, dualpipev),
// with the data-parallel collectives and the optimizer step, and explicit dependencies between actions.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/topology.hpp"

#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::sim {

enum class ActionKind {
    Forward,         // forward of one micro-batch through one model chunk
    Backward,        // full backward (input and weight gradients) of one micro-batch and chunk
    BackwardInput,   // ZB-H1: gradients w.r.t. the chunk's input only
    BackwardWeight,  // ZB-H1: gradients w.r.t. the chunk's weights
    SendActivation,  // to the next virtual stage
    RecvActivation,  // from the previous virtual stage
    SendGrad,        // to the previous virtual stage
    RecvGrad,        // from the next virtual stage
    Collective,      // data-parallel / ZeRO / embedding-sync collective on the data-parallel stream
    OptimizerStep,
};
std::string toString(ActionKind k);   // "forward", "backward", "backward_input", ...
bool isCompute(ActionKind k);         // Forward, Backward*, OptimizerStep

// The streams of one rank. Compute runs F/B/W and the optimizer (TP/CP/EP collectives inside a layer are
// part of the compute action: they block it); pipeline sends and receives and data-parallel collectives
// run on their own streams, so they may overlap compute.
enum class Stream { Compute = 0, PipelineSend = 1, PipelineRecv = 2, DataParallel = 3 };
constexpr int kStreamCount = 4;
std::string toString(Stream s);
Stream streamOf(ActionKind k);
bool isTransfer(ActionKind k);        // SendActivation, RecvActivation, SendGrad, RecvGrad

// An action may start only after each dependency is satisfied: `End` = the other action has finished;
// `StartPlus` = the other action has run for `fraction` of its duration (gradients of the last layers of a
// backward are ready before the whole backward ends; a ZeRO-3 prefetch starts with the previous compute).
struct Dependency {
    enum class When { End, StartPlus };
    int stage = 0;      // pipeline stage whose list holds the action
    int index = 0;      // index in that list
    When when = When::End;
    double fraction = 1.0;
    // Streaming: the action consumes what the other produces unit by unit (a layer's parameters as they are
    // gathered), so it cannot end before the other ends plus `tailFraction` of its own duration (the last
    // unit's work). 0 = no such bound.
    double tailFraction = 0.0;
};

// The dependencies of one action. Most actions have none, one or two, so the first two live inside the action and
// only a longer list (an optimizer step waiting on every stage's reductions) moves to the heap. Written by hand:
// no library the project uses has a small-buffer vector (Boost's small_vector is not among its dependencies), and
// growing a std::vector for each action's first and second dependency was 5% of a long search's instructions
// (callgrind, docs/search.md). Contiguous, in insertion order, never shrinking.
class DependencyList {
public:
    using value_type = Dependency;
    using iterator = Dependency*;
    using const_iterator = const Dependency*;

    DependencyList() = default;
    DependencyList(const DependencyList& o) { assign(o.begin(), o.end()); }
    DependencyList(DependencyList&& o) noexcept : heap_(std::move(o.heap_)), size_(o.size_) {
        if (size_ <= kInline)
            for (size_t i = 0; i < size_; ++i) inline_[i] = o.inline_[i];
        o.heap_.clear();
        o.size_ = 0;
    }
    DependencyList& operator=(const DependencyList& o) {
        if (this != &o) assign(o.begin(), o.end());
        return *this;
    }
    DependencyList& operator=(DependencyList&& o) noexcept {
        if (this == &o) return *this;
        heap_ = std::move(o.heap_);
        size_ = o.size_;
        if (size_ <= kInline)
            for (size_t i = 0; i < size_; ++i) inline_[i] = o.inline_[i];
        o.heap_.clear();
        o.size_ = 0;
        return *this;
    }

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    Dependency* begin() { return data(); }
    Dependency* end() { return data() + size_; }
    const Dependency* begin() const { return data(); }
    const Dependency* end() const { return data() + size_; }
    Dependency& operator[](size_t i) { return data()[i]; }
    const Dependency& operator[](size_t i) const { return data()[i]; }
    Dependency& front() { return data()[0]; }
    const Dependency& front() const { return data()[0]; }
    Dependency& back() { return data()[size_ - 1]; }
    const Dependency& back() const { return data()[size_ - 1]; }

    void push_back(const Dependency& d) {
        if (size_ < kInline) {
            inline_[size_++] = d;
            return;
        }
        if (size_ == kInline) spill();
        heap_.push_back(d);
        ++size_;
    }
    // Inserts before `pos` (an iterator of this list), as std::vector::insert; [first, last) must not be of this list.
    const Dependency* insert(const Dependency* pos, const Dependency& d) { return insert(pos, &d, &d + 1); }
    template <typename It>
    const Dependency* insert(const Dependency* pos, It first, It last) {
        const size_t at = static_cast<size_t>(pos - data());
        const size_t n = static_cast<size_t>(std::distance(first, last));
        if (size_ + n <= kInline) {
            for (size_t i = size_; i-- > at;) inline_[i + n] = inline_[i];
            size_t k = at;
            for (It it = first; it != last; ++it) inline_[k++] = *it;
        } else {
            if (size_ <= kInline) spill();
            heap_.insert(heap_.begin() + static_cast<std::ptrdiff_t>(at), first, last);
        }
        size_ += n;
        return data() + at;
    }

private:
    // The elements are inline while there are at most kInline of them, all on the heap once there are more (the list
    // never shrinks but by assignment).
    static constexpr size_t kInline = 2;
    Dependency* data() { return size_ <= kInline ? inline_ : heap_.data(); }
    const Dependency* data() const { return size_ <= kInline ? inline_ : heap_.data(); }
    void spill() {
        heap_.reserve(2 * kInline);
        heap_.assign(inline_, inline_ + size_);
    }
    template <typename It>
    void assign(It first, It last) {
        const size_t n = static_cast<size_t>(std::distance(first, last));
        heap_.clear();
        if (n <= kInline) {
            size_t k = 0;
            for (It it = first; it != last; ++it) inline_[k++] = *it;
        } else {
            heap_.assign(first, last);
        }
        size_ = n;
    }

    Dependency inline_[kInline];
    std::vector<Dependency> heap_; // every element once there are more than kInline
    size_t size_ = 0;
};

struct Action {
    ActionKind kind = ActionKind::Forward;
    int microBatch = -1;   // -1 for per-step actions (optimizer, per-step collectives)
    int chunk = 0;         // model chunk on this rank, 0..vpp-1; virtual stage = plan.virtualStage(stage, chunk)
    // DualPipeV: this forward and the backward after it run as one overlapped pair (PyTorch's OVERLAP_F_B), one
    // micro-batch's all-to-all under the other's compute (cost_schedule.cpp).
    bool overlapsNext = false;
    int peerStage = -1;    // send/recv: the stage at the other end
    // Collectives only:
    // The traffic name, e.g. "dp_reduce_scatter_grads", "zero3_all_gather_params_fwd_expert": a view of a string
    // literal (static storage, never a temporary), so that building and copying an action allocates nothing for it.
    std::string_view name;
    GroupKind group = GroupKind::Dp;
    Primitive primitive = Primitive::AllReduce;
    double bytes = 0.0;
    int bucket = -1;       // gradient bucket within the chunk (one per layer), -1 otherwise
    DependencyList deps; // besides the previous action on the same stream
    // The trace/measurement name: "forward", "send_activation", or the collective's name.
    std::string traceName() const;
};

struct StageSchedule {
    int stage = 0;
    std::vector<Action> actions;
};

// Every rank of a pipeline stage runs the same list (TP, CP and DP peers are symmetric), so a schedule
// holds one list per stage; forRank maps any rank to its stage's list through the plan's rank order.
struct ActionSchedule {
    Plan plan;
    OverlapSettings overlap;      // the plan's framework settings, resolved (resolveOverlap)
    // Pipeline transfers block the compute stream (overlap_p2p_comm off), as Megatron-LM's batched
    // isend/irecv followed by a wait does: sends run on the compute stream, and each receive is posted only after
    // the compute action before it, so a send and the next receive overlap each other but not compute.
    bool p2pBlocksCompute = false;
    // DeepSpeed's pipeline engine: each send and each receive is its own blocking call on the compute stream, one
    // after the other (deepspeed/runtime/pipe/engine.py _exec_send_activations / _exec_recv_activations over p2p.py's
    // send and recv), so a receive does not overlap the send beside it either. Implies p2pBlocksCompute.
    bool p2pSerial = false;
    int microBatches = 0;
    std::vector<int> chunkLayers; // transformer layers of every virtual stage, model order (chunkLayerCounts)
    int layersOf(int stage, int chunk) const {
        return chunkLayers[static_cast<size_t>(plan.virtualStage(stage, chunk))];
    }
    std::vector<StageSchedule> stages;
    const StageSchedule& forRank(int rank) const;
    size_t actionCount() const;
};

// Builds the complete action lists of a plan: pipeline compute in the schedule's order, every send and
// receive, data-parallel gradient reduction per layer bucket (overlapping the last backward of each
// chunk; per micro-batch under ZeRO-2), ZeRO-1/2 parameter all-gathers after the optimizer, ZeRO-3
// parameter gathers before every forward and backward (prefetched one compute action ahead), the
// embedding-gradient all-reduce between first and last stage for tied embeddings, and the optimizer step.
// The plan must be valid for the model (validatePlan).
ActionSchedule buildSchedule(const ModelConfig& model, const Plan& plan);

// Order of (micro-batch, chunk) compute work of one stage, without communication: exposed for tests and
// for the executor, which replays the same order. Kinds are Forward, Backward, BackwardInput, BackwardWeight.
std::vector<Action> computeOrder(const Plan& plan, int microBatches, int stage);

// Invariant checks (used by tests and `tessel trace --check`): each micro-batch forwarded and backwarded
// exactly once per chunk on every stage (a whole backward, or its input and weight halves); every send matched by one receive of the same micro-batch,
// chunk and direction on the peer; no dependency on itself or on a later action of its own stream; the
// dependency graph is acyclic; the peak number of micro-batches in flight per stage equals the memory
// model's count. Returns the violations found (empty = valid).
std::vector<std::string> checkSchedule(const ActionSchedule& schedule);
// Peak number of (micro-batch, chunk) units forwarded but not yet backwarded on a stage, divided by vpp
// (the unit of inFlightMicroBatches in the memory model).
double peakInFlight(const StageSchedule& stage, int vpp);

} // namespace tessel::sim
