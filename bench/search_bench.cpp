// Benchmarks of `tessel search` on GPT-3 175B over 1024 A100 GPUs (global batch 1536, the whole declared space):
// plans per second through the pruning stage (validity + memory + lower bound) and the full search's wall time;
// the pruning stage on worlds up to 2^20 GPUs (and Mixtral 8x7B's up to 65,536); and the full search of Llama 3 70B
// over 64 H100 (global batch 512).
#include "tessel/cost/scenario.hpp"
#include "tessel/sim/heap.hpp"
#include "tessel/sim/search.hpp"

#include <benchmark/benchmark.h>

#include <string>
#include <thread>

namespace {

// The gpt3-175b-megatron preset: GPT-3 175B on 128 DGX A100 80GB nodes, global batch 1536.
const tessel::Scenario& gpt3() {
    static const tessel::Scenario s = [] {
        tessel::Scenario sc = tessel::loadScenarioFile(tessel::resolveScenarioPath("gpt3-175b-megatron", "bench"));
        sc.cluster.nodes = 128;
        return sc;
    }();
    return s;
}

tessel::sim::SearchSpace gpt3Space() {
    tessel::sim::SearchSpace space;
    space.gpus = 1024;
    space.globalBatch = 1536;
    return space; // every other list empty: the whole declared space
}

// Arg: worker threads (0 = every core).
void BM_PruningStage(benchmark::State& state) {
    const auto& s = gpt3();
    tessel::sim::SearchOptions options;
    options.threads = static_cast<int>(state.range(0));
    tessel::sim::PruningResult r;
    double plans = 0.0;
    for (auto _ : state) {
        r = tessel::sim::prunePlans(s.model, s.cluster, gpt3Space(), options);
        plans += static_cast<double>(r.considered);
    }
    state.counters["plans_per_second"] = benchmark::Counter(plans, benchmark::Counter::kIsRate);
    state.counters["considered"] = static_cast<double>(r.considered);
    state.counters["feasible"] = static_cast<double>(r.feasible);
    state.counters["threads"] = options.threads > 0 ? options.threads : static_cast<double>(std::thread::hardware_concurrency());
}
BENCHMARK(BM_PruningStage)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// GPT-3 175B's pruning stage on worlds of 1024 to 2^20 GPUs (global batch 1536, every core): the rank placements
// are read from a node's residues, so the stage's time should grow with the plans, not with the ranks.
// The pruning stage of `s` on a world of state.range(0) GPUs (every core).
void pruneWorld(benchmark::State& state, tessel::Scenario s, tessel::sim::SearchSpace space) {
    space.gpus = static_cast<int>(state.range(0));
    s.cluster.nodes = space.gpus / s.cluster.gpusPerNode;
    tessel::sim::PruningResult r;
    double plans = 0.0;
    for (auto _ : state) {
        r = tessel::sim::prunePlans(s.model, s.cluster, space, tessel::sim::SearchOptions{});
        plans += static_cast<double>(r.considered);
    }
    state.counters["plans_per_second"] = benchmark::Counter(plans, benchmark::Counter::kIsRate);
    state.counters["considered"] = static_cast<double>(r.considered);
    state.counters["feasible"] = static_cast<double>(r.feasible);
}

void BM_PruningStageWorld(benchmark::State& state) { pruneWorld(state, gpt3(), gpt3Space()); }
BENCHMARK(BM_PruningStageWorld)->Arg(1024)->Arg(131072)->Arg(1 << 20)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// Mixtral 8x7B (the mixtral-8x7b-h100 preset, global batch 1536) the same way on 1024 to 65,536 H100: a mixture of
// experts adds the folded plans (etp other than tp), whose expert groups have a layout of their own.
void BM_PruningStageWorldMoe(benchmark::State& state) {
    tessel::sim::SearchSpace space;
    space.globalBatch = 1536;
    pruneWorld(state, tessel::loadScenarioFile(tessel::resolveScenarioPath("mixtral-8x7b-h100", "bench")), space);
}
BENCHMARK(BM_PruningStageWorldMoe)->Arg(1024)->Arg(8192)->Arg(65536)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

void BM_FullSearch(benchmark::State& state) {
    const auto& s = gpt3();
    tessel::sim::SearchOptions options;
    options.threads = static_cast<int>(state.range(0));
    tessel::sim::SearchResult r;
    double plans = 0.0;
    for (auto _ : state) {
        r = tessel::sim::searchPlans(s.model, s.cluster, gpt3Space(), options);
        plans += static_cast<double>(r.considered);
    }
    state.counters["plans_per_second"] = benchmark::Counter(plans, benchmark::Counter::kIsRate);
    state.counters["considered"] = static_cast<double>(r.considered);
    state.counters["feasible"] = static_cast<double>(r.feasible);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["pruning_s"] = r.pruningSeconds;
    state.counters["simulation_s"] = r.simulationSeconds;
    state.counters["best_step_s"] = r.top.empty() ? 0.0 : r.top.front().metrics.stepSeconds;
}
BENCHMARK(BM_FullSearch)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Llama 3 70B (sequence 8192) on 64 H100, global batch 512: most plans it simulates run hundreds of micro-batches,
// so each simulation builds and frees tens of MiB (what retainFreedHeap is measured on, with --malloc-default).
void BM_FullSearchLlama3_70b(benchmark::State& state) {
    static const tessel::Scenario s = tessel::loadScenarioFile(tessel::resolveScenarioPath("llama3-70b-h100", "bench"));
    tessel::sim::SearchSpace space;
    space.gpus = 64;
    space.globalBatch = 512;
    tessel::sim::SearchOptions options;
    options.threads = static_cast<int>(state.range(0));
    tessel::sim::SearchResult r;
    for (auto _ : state) r = tessel::sim::searchPlans(s.model, s.cluster, space, options);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["simulation_s"] = r.simulationSeconds;
    state.counters["best_step_s"] = r.top.empty() ? 0.0 : r.top.front().metrics.stepSeconds;
}
BENCHMARK(BM_FullSearchLlama3_70b)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

} // namespace

// Arg of main: --malloc-default leaves glibc's allocator as it is (the baseline retainFreedHeap is measured against).
int main(int argc, char** argv) {
    bool keepDefault = false;
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--malloc-default") keepDefault = true;
        else argv[kept++] = argv[i];
    }
    argc = kept;
    if (!keepDefault) tessel::sim::retainFreedHeap();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
