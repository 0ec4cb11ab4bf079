// The training runtime of one rank: walks the simulator's action list for its stage (the same list the
// prediction timed), running compute, pipeline transfers, data-parallel/ZeRO collectives and AdamW with
// global-norm clipping, and times every action.
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/exec/backend.hpp"
#include "tessel/exec/context.hpp"
#include "tessel/exec/gpt.hpp"
#include "tessel/sim/schedule.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::exec {

struct TrainHyper {
    double learningRate = 3e-3;
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    double weightDecay = 0.1;
    double clipNorm = 1.0;          // <= 0 disables clipping
    uint64_t seed = 1234;
};

// One executed action, timed with the host clock around synchronised work (the CPU backend is synchronous).
struct ActionRecord {
    int step = 0;
    int rank = 0;
    int stage = 0;
    int index = 0;                   // position in the stage's action list
    std::string name;                // the schedule's trace name ("forward", "dp_all_reduce_grads", ...)
    std::string kind;
    int microBatch = -1;
    int chunk = 0;
    int bucket = -1;
    std::string group;               // collectives and transfers: group name
    int groupSize = 0;
    int peerRank = -1;
    double bytes = 0.0;
    double startSeconds = 0.0;       // since this rank's trainer was created
    double durationSeconds = 0.0;
};

// Gives the micro-batch `mb` of step `step` for data-parallel index `dpIndex` (each DP rank its own slice).
using DataSource = std::function<MicroBatchData(int step, int dpIndex, int mb)>;

struct StepStats {
    double loss = 0.0;               // mean token loss over the global batch (every rank gets it)
    double gradNorm = 0.0;           // global gradient norm before clipping
};

class Trainer {
public:
    Trainer(const ModelConfig& model, const ParallelContext& ctx, Backend& backend, const TrainHyper& hyper,
            DataSource data);
    ~Trainer();
    StepStats step(int stepIndex);
    GptModel& model();
    const sim::StageSchedule& actions() const;
    const std::vector<ActionRecord>& records() const { return records_; }
    // ZeRO-3: the peak bytes of gathered full parameter values held at once (the unit in use, the prefetched
    // one; allocated as Buffers), the cost model's zero3_gather_bytes. 0 below ZeRO-3.
    double zero3GatherPeakBytes() const;
    void clearRecords() { records_.clear(); }

    // The full (unsharded) value of every parameter this rank holds a piece of, gathered over TP, keyed by
    // full name (for tests that compare against one rank). Collective over the TP group.
    std::map<std::string, std::vector<double>> gatherFullParameters();

    // Sharded checkpoint of the state after `nextStep` steps, in dir/step-<nextStep>/: this rank writes only
    // rank-<R>.bin (its parameter values, Adam moments or ZeRO shards, and Adam's step counter) through a temp
    // file, fsync and rename; once every rank has written, rank 0 writes manifest.json (sizes and checksums),
    // which marks the checkpoint complete, then deletes complete checkpoints older than the previous one.
    // Call between steps. Collective over the world; a failure on any rank throws on every rank.
    void saveCheckpoint(const std::string& dir, int nextStep);
    // Restores the newest complete checkpoint under `dir` and returns its step, the next step to run.
    // InputError when there is none, or when it was written by another world size, plan, model, element type
    // or hyper-parameters (naming what differs); RuntimeError naming the file when a shard fails its checksum
    // or header. Nothing is restored unless every rank's shard verifies. Collective over the world.
    int loadCheckpoint(const std::string& dir);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::vector<ActionRecord> records_;
};

// dir/step-<step>: the folder of one checkpoint.
std::string checkpointStepDir(const std::string& dir, int step);
// The step of the newest complete checkpoint (a step-<N> folder holding manifest.json) under `dir`, or -1.
int newestCheckpointStep(const std::string& dir);
// Throws InputError naming what differs when the checkpoint of `step` under `dir` was not written by a run
// of this world size, plan, model and hyper-parameters (its manifest is read; no shard is opened).
void checkCheckpointMatches(const std::string& dir, int step, const ModelConfig& model, const Plan& plan,
                            const TrainHyper& hyper);

} // namespace tessel::exec
