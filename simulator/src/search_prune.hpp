// Internal to libtessel_sim: the search's pruning stage (candidates, bands, passes), threads and progress.
#pragma once

#include "search_estimate.hpp"
#include "search_space.hpp"

#include "tessel/sim/search.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace tessel::sim::detail {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Relative slack for comparing a lower bound with simulated times summed in another order.
constexpr double kBoundSlack = 1e-9;
// Candidates are kept for simulation only when their bound is within this factor of the best bound; if the
// search ever needs more, a further pruning pass collects the next band (so the answer stays exact).
constexpr double kBandFactor = 2.0;

struct Candidate {
    double key = 0.0;        // what the pruning stage sorts by: the bound (time objectives) or the peak (memory)
    double boundSeconds = 0.0;
    double peakBytes = 0.0;
    PlanCode code;
};
inline bool candidateLess(const Candidate& a, const Candidate& b) {
    if (a.key != b.key) return a.key < b.key;
    return codeLess(a.code, b.code);
}

// Serialises progress reports from all threads, at most every 50 ms or 1%.
class Progress {
public:
    explicit Progress(const SearchOptions& o) : fn_(o.progress) {}
    void report(double fraction) {
        if (!fn_) return;
        std::lock_guard<std::mutex> lock(mutex_);
        fraction = std::clamp(fraction, 0.0, 1.0);
        if (fraction < last_ || (fraction == last_ && reported_)) return; // strictly increasing
        const auto now = Clock::now();
        if (fraction < 1.0 && fraction - last_ < 0.01 && now - lastTime_ < std::chrono::milliseconds(50)) return;
        last_ = fraction;
        lastTime_ = now;
        reported_ = true;
        fn_(fraction);
    }

private:
    std::function<void(double)> fn_;
    std::mutex mutex_;
    double last_ = 0.0;
    bool reported_ = false;
    Clock::time_point lastTime_{};
};
inline bool cancelled(const SearchOptions& o) {
    return o.cancel && o.cancel->load(std::memory_order_relaxed);
}

// Runs worker(thread index) on `threads` threads (the calling thread is one), rethrowing the first exception.
template <class Worker>
void runThreads(int threads, Worker&& worker) {
    std::exception_ptr error;
    std::mutex errorMutex;
    auto guarded = [&](int t) {
        try {
            worker(t);
        } catch (...) {
            std::lock_guard<std::mutex> lock(errorMutex);
            if (!error) error = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(guarded, t);
    guarded(0);
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

// What one thread gathers in the pruning stage.
struct Accumulator {
    // `n` plans whose peak did not fit (pm.fits false): out of the GPU's memory on the first or a later stage, or
    // (with the search's memory band) fitting the GPU but not at the band's upper end.
    void rejectPeak(const PeakMemory& pm, double capacityBytes, uint64_t n) {
        if (pm.bytes <= capacityBytes) peakBand += n;
        else (pm.stage == 0 ? oomFirst : oomLast) += n;
    }
    uint64_t considered = 0, feasible = 0, oomFirst = 0, oomLast = 0, peakBand = 0, notRunnable = 0;
    std::array<uint64_t, kReasonCount> reasons{};
    std::vector<Candidate> candidates;
    double bestBound = std::numeric_limits<double>::infinity();
    size_t compactAt = 1 << 14;
    // The last stage's work after its last input-gradient backward, per (schedule, m, pp, vpp): shared by
    // every work item this thread runs.
    std::map<std::tuple<int, int, int, int>, LastStageTail> tailCache;
};

// Which candidates a pruning pass keeps.
struct Band {
    bool memoryObjective = false;
    size_t topK = 10;          // memory objective: the K smallest peaks
    double lo = -1.0;          // time objectives: keep lo < bound <= hi; hi < 0 means "within kBandFactor of the
    double hi = -1.0;          //   best bound seen so far" (the first pass)
};

struct PassResult {
    Accumulator total;
    bool cancelled = false;
};

// One pruning pass over every work item on `threads` threads; merges the per-thread results.
PassResult prunePass(const Space& space, const SearchContext& ctx, const std::vector<WorkItem>& items,
                     const Band& band, int threads, const SearchOptions& options, Progress& progress,
                     double progressFrom, double progressTo);
// Rejection counts by reason, as SearchResult::rejected and PruningResult::rejected show them.
std::map<std::string, uint64_t> rejectedMap(const Accumulator& a,
                                            const std::optional<ExportFormat>& framework);

} // namespace tessel::sim::detail
