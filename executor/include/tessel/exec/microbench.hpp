// Microbenchmarks for calibration (`tessel bench`): GEMMs over the model's layer shapes and a sweep around
// them, attention, the element-wise/norm kernels, the optimizer step and every collective over message
// sizes, each repeated after warm-up, with the median and spread of the samples.
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/exec/backend.hpp"
#include "tessel/exec/comm.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessel::exec {

// One measured point. `kernel` is the cost model's name for what was timed ("gemm", "attention_forward",
// "norm_backward", "all_reduce", ...); `flops` and `bytes` are counted with the cost model's formulas for
// that kernel (FORMULAS.md §3, §4), so a fit of seconds against them maps straight onto the model's terms.
struct BenchPoint {
    std::string kernel;
    std::map<std::string, int64_t> shape;  // m/n/k, tokens/features, sequences/seq/heads/head_dim, ...
    double flops = 0.0;
    double bytes = 0.0;
    int groupSize = 1;                     // collectives: ranks in the group
    int samples = 0;
    double medianSeconds = 0.0;
    double minSeconds = 0.0;
    double maxSeconds = 0.0;
    double p10Seconds = 0.0;               // spread: 10th and 90th percentiles of the samples
    double p90Seconds = 0.0;
};

struct BenchOptions {
    int warmup = 2;                   // untimed repetitions before sampling
    int minSamples = 5;               // at least this many timed samples...
    double minSecondsPerPoint = 0.05; // ...and at least this long in all (short kernels get more samples)
    int maxSamples = 200;
    bool quick = false;               // fewer shapes and sizes (CI)
    // Models whose layer shapes seed the GEMM / kernel shapes (each at micro-batch 1 and 2, tp 1 and 2).
    std::vector<ModelConfig> models;
    int64_t maxMessageBytes = int64_t{64} << 20; // collectives: 8 B .. this, x4 apart
};

// Summary statistics of timed samples (seconds); `samples` must not be empty.
BenchPoint summarize(std::string kernel, std::vector<double> samples);

// How ranks that measure together stay in step: `barrier` runs before each sample (and after each warm-up
// run) so every sample starts together and covers completed work; `agree` turns this rank's wish for a
// sample count into the count every rank uses (the group must run the same number of barriers).
struct BenchSync {
    std::function<void()> barrier;
    std::function<int(int)> agree;
};

// Times `body`: warm-up runs, then as many samples as minSecondsPerPoint needs judged from the last warm-up
// (between minSamples and maxSamples, as `sync.agree` settles it).
std::vector<double> timeSamples(const std::function<void()>& body, const BenchSync& sync, const BenchOptions& options);

// The compute kernels on `backend`, every rank of `sync` measuring at once (as training loads the host), and a
// device copy ("copy_device_to_device", Backend::copy, bytes read plus written; kernel_cost::transferNames()).
// Each sample ends with backend.synchronize(), so asynchronous backends are timed whole.
std::vector<BenchPoint> runComputeBenchmarks(Backend& backend, const BenchOptions& options, const BenchSync& sync = {});

// Every collective of Comm and send/recv over `group`, at message sizes 8 B .. options.maxMessageBytes.
// Every member of the group must call it with the same options. Send/recv pairs member 0 with member 1.
std::vector<BenchPoint> runCommBenchmarks(Backend& backend, Comm& comm, const Group& group, const BenchOptions& options);

// A JSON-lines record (DESIGN.md §3): kind "microbenchmark", the point, and rank/device/dtype provenance.
nlohmann::json benchPointToJson(const BenchPoint& p, int rank, const std::string& device, const std::string& dtype);

} // namespace tessel::exec
