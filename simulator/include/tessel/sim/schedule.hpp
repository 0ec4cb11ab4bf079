// Pipeline schedules as per-rank ordered action lists (gpipe, 1f1b, interleaved_1f1b, zero_bubble ZB-H1, dualpipev),
// with the data-parallel collectives and the optimizer step, and explicit dependencies between actions.
#pragma once

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/topology.hpp"

#include <string>
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

struct Action {
    ActionKind kind = ActionKind::Forward;
    int microBatch = -1;   // -1 for per-step actions (optimizer, per-step collectives)
    int chunk = 0;         // model chunk on this rank, 0..vpp-1; virtual stage = plan.virtualStage(stage, chunk)
    // DualPipeV: this forward and the backward after it run as one overlapped pair (PyTorch's OVERLAP_F_B), one
    // micro-batch's all-to-all under the other's compute (cost_schedule.cpp).
    bool overlapsNext = false;
    int peerStage = -1;    // send/recv: the stage at the other end
    // Collectives only:
    std::string name;      // the traffic name, e.g. "dp_reduce_scatter_grads", "zero3_all_gather_params_fwd"
    GroupKind group = GroupKind::Dp;
    Primitive primitive = Primitive::AllReduce;
    double bytes = 0.0;
    int bucket = -1;       // gradient bucket within the chunk (one per layer), -1 otherwise
    std::vector<Dependency> deps; // besides the previous action on the same stream
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
