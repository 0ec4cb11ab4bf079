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

} // namespace

BENCHMARK_MAIN();
