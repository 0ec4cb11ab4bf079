// Benchmarks of the cost model: how many plans per second the memory, compute and traffic models evaluate.
#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/report.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/cost/traffic.hpp"
#include "tessel/sim/simulate.hpp"

#include <benchmark/benchmark.h>

namespace {

const tessel::Scenario& gpt3() {
    static const tessel::Scenario s = [] {
        tessel::Scenario sc = tessel::defaultScenario();
        tessel::finishScenario(sc);
        return sc;
    }();
    return s;
}

void BM_PredictMemoryGpt3_8Stages(benchmark::State& state) {
    const auto& s = gpt3();
    for (auto _ : state) benchmark::DoNotOptimize(tessel::predictMemory(s.model, s.cluster, s.plan));
    state.SetItemsProcessed(state.iterations());
    state.counters["plans_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PredictMemoryGpt3_8Stages);

void BM_LayerCompute(benchmark::State& state) {
    const auto& s = gpt3();
    for (auto _ : state) benchmark::DoNotOptimize(tessel::layerCompute(s.model, s.cluster, s.plan, s.recipe()));
    state.counters["layers_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LayerCompute);

void BM_LayerComm(benchmark::State& state) {
    const auto& s = gpt3();
    for (auto _ : state) benchmark::DoNotOptimize(tessel::layerCommOps(s.model, s.cluster, s.plan));
}
BENCHMARK(BM_LayerComm);

void BM_FullPrediction(benchmark::State& state) {
    const auto& s = gpt3();
    for (auto _ : state) benchmark::DoNotOptimize(tessel::predictCosts(s));
    state.counters["plans_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FullPrediction);

void BM_SimulatePlanGpt3_1F1B(benchmark::State& state) {
    const auto& s = gpt3();
    for (auto _ : state) benchmark::DoNotOptimize(tessel::sim::simulatePlan(s.model, s.cluster, s.plan));
    state.counters["plans_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulatePlanGpt3_1F1B)->Unit(benchmark::kMillisecond);

// One stage under ZeRO-3 (gathers and a reduce-scatter every micro-batch) with 2^10-2^14 micro-batches a step: the
// time per micro-batch should stay flat. Before the exposed-DP attribution used sorted intervals it grew with the
// count (0.91 s at 8192, 3.5 s at 16384, 57 s at 65536 for `tessel predict`).
void BM_SimulateZero3MicroBatches(benchmark::State& state) {
    tessel::Scenario s = gpt3();
    s.model.layers = 8;
    s.plan.tp = 1;
    s.plan.pp = 1;
    s.plan.vpp = 1;
    s.plan.schedule = tessel::Schedule::OneFOneB;
    s.plan.sequenceParallel = false;
    s.plan.dp = s.cluster.totalGpus();
    s.plan.zeroStage = 3;
    s.plan.microBatch = 1;
    s.plan.globalBatch = static_cast<int>(state.range(0)) * s.plan.dp;
    for (auto _ : state) benchmark::DoNotOptimize(tessel::sim::simulatePlan(s.model, s.cluster, s.plan));
    state.counters["micro_batches_per_second"] =
        benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateZero3MicroBatches)->RangeMultiplier(4)->Range(1 << 10, 1 << 14)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
