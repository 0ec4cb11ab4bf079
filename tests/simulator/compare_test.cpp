// Predicted vs measured (tessel/sim/compare.hpp): hand-made traces whose answer is known — matching by key
// and occurrence, averaging over ranks, unmatched actions on both sides, the warm-up step left out, memory per
// category, the most-wrong ranking — and two loaders that must agree (a simulation and its own Chrome trace).
#include "tessel/cost/report.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/sim/compare.hpp"
#include "tessel/sim/trace.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace tessel::sim {
namespace {

namespace fs = std::filesystem;

// A predicted action list for one stage: (name, micro-batch, seconds), chunk 0, back to back.
Prediction handPrediction(const std::vector<std::vector<std::tuple<std::string, int, double>>>& stages) {
    Prediction p;
    p.source = "hand";
    for (size_t s = 0; s < stages.size(); ++s) {
        std::vector<PredictedAction> list;
        double t = 0.0;
        for (const auto& [name, mb, seconds] : stages[s]) {
            PredictedAction a;
            a.stage = static_cast<int>(s);
            a.index = static_cast<int>(list.size());
            a.name = name;
            a.category = timeCategoryOf(name == "dp_all_reduce" ? "collective" : name);
            a.microBatch = mb;
            a.startSeconds = t;
            a.durationSeconds = seconds;
            t += seconds;
            list.push_back(a);
        }
        p.stepSeconds = std::max(p.stepSeconds, t);
        p.stages.push_back(std::move(list));
    }
    return p;
}

// Appends one complete event, as the executor writes it (seconds in, microseconds out).
void addEvent(nlohmann::json& trace, int rank, int stage, const std::string& name, int mb, double startSeconds,
              double durationSeconds, int step = 0) {
    nlohmann::json args{{"stage", stage}, {"chunk", 0}, {"step", step}};
    if (mb >= 0) args["micro_batch"] = mb;
    trace["traceEvents"].push_back({{"ph", "X"},
                                    {"name", name},
                                    {"cat", name == "dp_all_reduce" ? "collective" : name},
                                    {"pid", rank},
                                    {"tid", 0},
                                    {"ts", startSeconds * 1e6},
                                    {"dur", durationSeconds * 1e6},
                                    {"args", args}});
}

nlohmann::json emptyTrace() { return {{"traceEvents", nlohmann::json::array()}}; }

// Each event starts where the previous one of the rank ended, from `start`.
void addSequence(nlohmann::json& trace, int rank, int stage, const std::vector<std::tuple<std::string, int, double>>& events,
                 double start = 0.0, int step = 0) {
    for (const auto& [name, mb, seconds] : events) {
        addEvent(trace, rank, stage, name, mb, start, seconds, step);
        start += seconds;
    }
}

const ActionComparison& action(const RunComparison& c, int stage, int index) {
    for (const auto& a : c.actions)
        if (a.stage == stage && a.index == index) return a;
    throw std::runtime_error("no matched action " + std::to_string(stage) + "/" + std::to_string(index));
}

const std::vector<std::tuple<std::string, int, double>> kStage0{
    {"forward", 0, 1e-3}, {"forward", 1, 1e-3}, {"backward", 0, 2e-3}, {"backward", 1, 2e-3},
    {"dp_all_reduce", -1, 4e-3}, {"dp_all_reduce", -1, 6e-3}, {"optimizer_step", -1, 0.5e-3}};

TEST(CompareMatching, EachEventGoesToItsKeyAndOccurrence) {
    const Prediction p = handPrediction({kStage0});
    nlohmann::json trace = emptyTrace();
    // Measured: forward mb1 runs first (order among different keys does not matter), the two all-reduces
    // (same key) are told apart by their order: 5 ms then 3 ms.
    addSequence(trace, 0, 0,
                {{"forward", 1, 1.5e-3}, {"forward", 0, 1.0e-3}, {"backward", 0, 2.0e-3}, {"backward", 1, 3.0e-3},
                 {"dp_all_reduce", -1, 5e-3}, {"dp_all_reduce", -1, 3e-3}, {"optimizer_step", -1, 0.5e-3}});
    const MeasuredRun run = MeasuredRun::fromTrace(trace);
    const RunComparison c = compareRun(p, run);
    ASSERT_EQ(c.actions.size(), 7u);
    EXPECT_TRUE(c.unmatchedPredicted.empty());
    EXPECT_EQ(c.unmatchedMeasuredEvents, 0);
    EXPECT_NEAR(action(c, 0, 0).measuredMeanSeconds, 1.0e-3, 1e-12);   // forward mb0
    EXPECT_NEAR(action(c, 0, 1).measuredMeanSeconds, 1.5e-3, 1e-12);   // forward mb1
    EXPECT_NEAR(*action(c, 0, 1).error(), 0.5, 1e-9);
    EXPECT_NEAR(action(c, 0, 3).measuredMeanSeconds, 3.0e-3, 1e-12);   // backward mb1
    EXPECT_NEAR(action(c, 0, 4).measuredMeanSeconds, 5e-3, 1e-12);     // first all-reduce
    EXPECT_NEAR(action(c, 0, 5).measuredMeanSeconds, 3e-3, 1e-12);     // second all-reduce
    EXPECT_EQ(action(c, 0, 4).category, "collective");
    // One step only: it is compared, and the step is its span, 16 ms, against 16.5 ms predicted.
    EXPECT_EQ(c.comparedSteps, std::vector<int>{0});
    EXPECT_NEAR(c.measuredStepSeconds, 16e-3, 1e-12);
    EXPECT_NEAR(*c.stepError(), 16.0 / 16.5 - 1.0, 1e-9);
    // Per category: compute 6 ms predicted, 7.5 ms measured; collective 10 vs 8.
    for (const auto& k : c.categories) {
        if (k.category == "compute") {
            EXPECT_NEAR(k.predictedSeconds, 6e-3, 1e-12);
            EXPECT_NEAR(k.measuredSeconds, 7.5e-3, 1e-12);
            EXPECT_EQ(k.actions, 4);
        }
        if (k.category == "collective") EXPECT_NEAR(k.measuredSeconds, 8e-3, 1e-12);
    }
    ASSERT_EQ(c.ranks.size(), 1u);
    EXPECT_NEAR(c.ranks[0].measuredBusySeconds.at("compute"), 7.5e-3, 1e-12);
    EXPECT_NEAR(c.ranks[0].predictedBusySeconds.at("optimizer"), 0.5e-3, 1e-12);
}

TEST(CompareMatching, RanksOfAStageAreAveragedWithMinAndMax) {
    const Prediction p = handPrediction({{{"forward", 0, 2e-3}}});
    nlohmann::json trace = emptyTrace();
    addEvent(trace, 0, 0, "forward", 0, 0.0, 1e-3);
    addEvent(trace, 1, 0, "forward", 0, 0.0, 3e-3);
    addEvent(trace, 2, 0, "forward", 0, 0.0, 2.6e-3);
    const RunComparison c = compareRun(p, MeasuredRun::fromTrace(trace));
    ASSERT_EQ(c.actions.size(), 1u);
    const auto& a = c.actions[0];
    EXPECT_EQ(a.ranks, 3);
    EXPECT_EQ(a.samples, 3);
    EXPECT_NEAR(a.measuredMeanSeconds, 2.2e-3, 1e-12);
    EXPECT_NEAR(a.measuredMinSeconds, 1e-3, 1e-12);
    EXPECT_NEAR(a.measuredMaxSeconds, 3e-3, 1e-12);
    EXPECT_NEAR(*a.error(), 0.1, 1e-9);
    EXPECT_EQ(c.ranks.size(), 3u);
}

TEST(CompareMatching, UnmatchedActionsAreReportedOnBothSides) {
    const Prediction p = handPrediction({kStage0, {{"forward", 0, 1e-3}}});
    nlohmann::json trace = emptyTrace();
    // Stage 0 misses backward mb1 and runs a third forward mb0 and an unknown kernel; stage 1 never ran.
    addSequence(trace, 0, 0,
                {{"forward", 0, 1e-3}, {"forward", 1, 1e-3}, {"forward", 0, 1e-3}, {"backward", 0, 2e-3},
                 {"mystery_kernel", -1, 7e-3}, {"dp_all_reduce", -1, 4e-3}, {"dp_all_reduce", -1, 6e-3},
                 {"optimizer_step", -1, 0.5e-3}});
    const RunComparison c = compareRun(p, MeasuredRun::fromTrace(trace));
    ASSERT_EQ(c.unmatchedPredicted.size(), 2u);
    EXPECT_EQ(c.unmatchedPredicted[0].stage, 0);
    EXPECT_EQ(c.unmatchedPredicted[0].name, "backward");
    EXPECT_EQ(c.unmatchedPredicted[0].microBatch, 1);
    EXPECT_EQ(c.unmatchedPredicted[1].stage, 1);
    EXPECT_EQ(c.unmatchedMeasuredEvents, 2);
    ASSERT_EQ(c.unmatchedMeasured.size(), 2u);
    bool sawMystery = false, sawExtraForward = false;
    for (const auto& u : c.unmatchedMeasured) {
        sawMystery |= u.name == "mystery_kernel" && u.events == 1 && std::abs(u.totalSeconds - 7e-3) < 1e-12;
        sawExtraForward |= u.name == "forward" && u.microBatch == 0 && u.events == 1;
    }
    EXPECT_TRUE(sawMystery);
    EXPECT_TRUE(sawExtraForward);
    EXPECT_EQ(c.actions.size(), 6u);
    const nlohmann::json j = comparisonToJson(c, 3);
    EXPECT_EQ(j["unmatched"]["predicted"].size(), 2u);
    EXPECT_EQ(j["unmatched"]["measured"].size(), 2u);
    EXPECT_EQ(j["summary"]["unmatched_measured_events"], 2);
}

TEST(CompareSteps, TheFirstStepIsLeftOutAndTheStepIsAMedian) {
    const Prediction p = handPrediction({{{"forward", 0, 1e-3}, {"backward", 0, 2e-3}}});
    nlohmann::json trace = emptyTrace();
    // Step 0: 10x slower (warm-up). Steps 1..3: spans 3.3, 3.6 and 9 ms (one step disturbed).
    const double scale[] = {10.0, 1.1, 1.2, 3.0};
    double start = 0.0;
    for (int step = 0; step < 4; ++step) {
        addSequence(trace, 0, 0, {{"forward", 0, 1e-3 * scale[step]}, {"backward", 0, 2e-3 * scale[step]}}, start, step);
        start += 3e-3 * scale[step] + 1e-3;
    }
    const MeasuredRun run = MeasuredRun::fromTrace(trace);
    EXPECT_EQ(run.steps(), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(run.comparedSteps(), (std::vector<int>{1, 2, 3}));
    EXPECT_NEAR(run.stepSeconds(), 3.6e-3, 1e-12);   // the median of 3.3, 3.6, 9
    const RunComparison c = compareRun(p, run);
    ASSERT_EQ(c.steps.size(), 4u);
    EXPECT_FALSE(c.steps[0].compared);
    EXPECT_NEAR(c.steps[0].measuredSeconds, 30e-3, 1e-12);
    EXPECT_TRUE(c.steps[3].compared);
    EXPECT_NEAR(c.steps[3].measuredSeconds, 9e-3, 1e-12);
    // Per action: the mean over steps 1..3 only: forward (1.1 + 1.2 + 3.0) / 3 ms.
    EXPECT_NEAR(action(c, 0, 0).measuredMeanSeconds, 1.7667e-3, 1e-7);
    EXPECT_EQ(action(c, 0, 0).samples, 3);
    EXPECT_EQ(action(c, 0, 0).ranks, 1);
    EXPECT_EQ(c.unmatchedMeasuredEvents, 0);   // step 0's events are neither matched nor unmatched
    EXPECT_NEAR(c.ranks[0].measuredStepSeconds, 3.6e-3, 1e-12);
    EXPECT_NEAR(c.ranks[0].measuredBusySeconds.at("compute"), (3.3e-3 + 3.6e-3 + 9e-3) / 3, 1e-12);
}

TEST(CompareRanking, MostWrongIsByAbsoluteSecondsNotRatio) {
    // A: 1 ms -> 3 ms (3x, +2 ms); B: 100 ms -> 120 ms (+20%, +20 ms); C: 50 ms -> 40 ms (-10 ms); D exact.
    const Prediction p = handPrediction({{{"send_activation", 0, 1e-3}, {"forward", 0, 100e-3}, {"backward", 0, 50e-3},
                                          {"optimizer_step", -1, 5e-3}}});
    nlohmann::json trace = emptyTrace();
    addSequence(trace, 0, 0, {{"send_activation", 0, 3e-3}, {"forward", 0, 120e-3}, {"backward", 0, 40e-3}, {"optimizer_step", -1, 5e-3}});
    const RunComparison c = compareRun(p, MeasuredRun::fromTrace(trace));
    const std::vector<size_t> order = c.mostWrong(10);
    ASSERT_EQ(order.size(), 4u);
    EXPECT_EQ(c.actions[order[0]].name, "forward");
    EXPECT_EQ(c.actions[order[1]].name, "backward");
    EXPECT_EQ(c.actions[order[2]].name, "send_activation");
    EXPECT_EQ(c.actions[order[3]].name, "optimizer_step");
    EXPECT_EQ(c.mostWrong(2).size(), 2u);
    EXPECT_NEAR(c.actions[order[1]].errorSeconds(), -10e-3, 1e-12);
    const nlohmann::json j = comparisonToJson(c, 2);
    ASSERT_EQ(j["most_wrong"].size(), 2u);
    EXPECT_EQ(j["most_wrong"][0]["name"], "forward");
    EXPECT_EQ(j["actions"].size(), 4u);
}

TEST(CompareMemory, PerCategoryAgainstTheHungriestRankWithoutReserved) {
    Prediction p = handPrediction({{{"forward", 0, 1e-3}}, {{"forward", 0, 1e-3}}});
    PredictedStageMemory m0;
    m0.stage = 0;
    m0.categoryBytes = {{"weights", 100}, {"grads", 100}, {"optimizer", 200}, {"activations", 400}, {"other", 200}};
    m0.reservedBytes = 1000;
    m0.totalBytes = 2000;   // 1000 allocated + 1000 reserved
    p.memory = {m0};
    nlohmann::json trace = emptyTrace();
    addEvent(trace, 0, 0, "forward", 0, 0, 1e-3);
    MeasuredRun run = MeasuredRun::fromTrace(trace);
    // As the executor writes memory.json: two ranks of stage 0 and one of stage 1 (not predicted).
    nlohmann::json ranks = nlohmann::json::array();
    ranks.push_back({{"rank", 0}, {"stage", 0}, {"peak_total_bytes", 1100},
                     {"peak_bytes", {{"weights_bytes", 100}, {"grads_bytes", 100}, {"optimizer_bytes", 200},
                                     {"activations_bytes", 500}, {"buffers_bytes", 150}}}});
    ranks.push_back({{"rank", 1}, {"stage", 0}, {"peak_total_bytes", 900},
                     {"peak_bytes", {{"weights_bytes", 110}, {"grads_bytes", 100}, {"optimizer_bytes", 200},
                                     {"activations_bytes", 300}, {"buffers_bytes", 250}}}});
    ranks.push_back({{"rank", 2}, {"stage", 1}, {"peak_total_bytes", 50}, {"process_peak_resident_bytes", 3000}});
    ranks[0]["process_peak_resident_bytes"] = 2500;
    run.setMemory({{"schema_version", 1}, {"ranks", ranks}});
    EXPECT_EQ(run.stagePeakBytes().at(0), 1100);
    const RunComparison c = compareRun(p, run);
    ASSERT_EQ(c.memory.size(), 2u);
    const StageMemoryComparison& s0 = c.memory[0];
    EXPECT_DOUBLE_EQ(s0.predictedAllocatedBytes(), 1000);
    EXPECT_NEAR(*s0.error(), 0.1, 1e-12);   // 1100 measured vs 1000 allocated, the reserved 1000 left out
    ASSERT_EQ(s0.categories.size(), memoryCategories().size());
    auto cat = [&](const std::string& name) {
        for (const auto& x : s0.categories)
            if (x.category == name) return x;
        throw std::runtime_error(name);
    };
    EXPECT_NEAR(*cat("weights").error(), 0.1, 1e-12);        // rank 1's 110 vs 100
    EXPECT_NEAR(*cat("activations").error(), 0.25, 1e-12);   // rank 0's 500 vs 400
    EXPECT_NEAR(*cat("other").error(), 0.25, 1e-12);         // buffers: rank 1's 250 vs 200
    EXPECT_NEAR(*cat("optimizer").error(), 0.0, 1e-12);
    // The process's resident peak (runtime included) is set against the total, reserved bytes included.
    EXPECT_NEAR(*s0.processError(), 0.25, 1e-12);   // 2500 vs 2000
    // Stage 1: measured, never predicted: shown, with no error invented.
    EXPECT_EQ(c.memory[1].stage, 1);
    EXPECT_EQ(*c.memory[1].measuredPeakBytes, 50);
    EXPECT_FALSE(c.memory[1].error().has_value());
    EXPECT_FALSE(c.memory[1].processError().has_value());
    EXPECT_EQ(*c.memory[1].measuredProcessPeakBytes, 3000);
    // Bad memory files name the entry.
    try {
        run.setMemory({{"ranks", {{{"rank", 0}, {"stage", 0}}}}}, "mem.json");
        FAIL() << "no total accepted";
    } catch (const InputError& e) {
        ASSERT_EQ(e.problems().size(), 1u);
        EXPECT_EQ(e.problems()[0].where, "mem.json#/ranks/0");
    }
    EXPECT_THROW(run.setMemory(nlohmann::json::array()), InputError);
    // A run that recorded what each category held when the total peaked is compared on that, not on each
    // category's own peak (buffers peak in the optimizer step, after the activations are gone).
    nlohmann::json atPeak = nlohmann::json::array();
    atPeak.push_back({{"rank", 0}, {"stage", 0}, {"peak_total_bytes", 1000},
                      {"peak_bytes", {{"weights_bytes", 100}, {"grads_bytes", 100}, {"optimizer_bytes", 200},
                                      {"activations_bytes", 400}, {"buffers_bytes", 600}}},
                      {"at_peak_total_bytes", {{"weights_bytes", 100}, {"grads_bytes", 100}, {"optimizer_bytes", 200},
                                               {"activations_bytes", 400}, {"buffers_bytes", 200}}}});
    run.setMemory({{"schema_version", 1}, {"ranks", atPeak}});
    const RunComparison c2 = compareRun(p, run);
    for (const auto& x : c2.memory[0].categories)
        EXPECT_NEAR(*x.error(), 0.0, 1e-12) << x.category; // 200 buffers at the peak, not their own 600 peak
    EXPECT_TRUE(c2.memory[0].categoriesAtTotalPeak);
    EXPECT_FALSE(c.memory[0].categoriesAtTotalPeak);
    EXPECT_EQ(comparisonToJson(c2, 1)["memory"]["stages"][0]["categories_at"], "total_peak");
    EXPECT_EQ(comparisonToJson(c, 1)["memory"]["stages"][0]["categories_at"], "own_peak");
    // Like for like on the predicted side too: where the model's categories peak at other moments than its total
    // (the last stage's activations at the loss's backward, its buffers at the last layer's), a run's
    // at-the-total's-peak composition is set against the model's at its peak's moment, and a run's own peaks
    // against the model's own peaks.
    Prediction moments = p;
    moments.memory[0].categoryOwnPeakBytes = m0.categoryBytes;
    moments.memory[0].categoryOwnPeakBytes["activations"] = 480;
    moments.memory[0].categoryOwnPeakBytes["other"] = 600;
    const RunComparison atPeakRun = compareRun(moments, run);
    for (const auto& x : atPeakRun.memory[0].categories) EXPECT_NEAR(*x.error(), 0.0, 1e-12) << x.category;
    run.setMemory({{"schema_version", 1},
                   {"ranks", {{{"rank", 0}, {"stage", 0}, {"peak_total_bytes", 1000},
                               {"peak_bytes", {{"weights_bytes", 100}, {"grads_bytes", 100}, {"optimizer_bytes", 200},
                                               {"activations_bytes", 480}, {"buffers_bytes", 600}}}}}}});
    const RunComparison ownPeakRun = compareRun(moments, run);
    EXPECT_FALSE(ownPeakRun.memory[0].categoriesAtTotalPeak);
    for (const auto& x : ownPeakRun.memory[0].categories) EXPECT_NEAR(*x.error(), 0.0, 1e-12) << x.category;
    // A composition that is not an object, or a category that is not a number, is named, not skipped.
    for (const auto& [entry, where] : std::vector<std::pair<nlohmann::json, std::string>>{
             {{{"rank", 0}, {"stage", 0}, {"peak_total_bytes", 10}, {"at_peak_total_bytes", 5}}, "m.json#/ranks/0/at_peak_total_bytes"},
             {{{"rank", 0}, {"stage", 0}, {"peak_total_bytes", 10}, {"at_peak_total_bytes", {{"buffers_bytes", "x"}}}},
              "m.json#/ranks/0/at_peak_total_bytes/buffers_bytes"}}) {
        try {
            run.setMemory({{"ranks", {entry}}}, "m.json");
            ADD_FAILURE() << where << " accepted";
        } catch (const InputError& e) {
            ASSERT_EQ(e.problems().size(), 1u);
            EXPECT_EQ(e.problems()[0].where, where);
        }
    }
}

sim::PlanSimulation tinySimulation() {
    const Scenario s = loadScenarioFile(resolveScenarioPath("tiny-cpu", "test"));
    return simulatePlan(s.model, s.cluster, s.plan);
}

TEST(ComparePrediction, ASimulationAndItsOwnTraceAgree) {
    const PlanSimulation sim = tinySimulation();
    const Prediction a = predictionFromSimulation(sim);
    const Prediction b = predictionFromTrace(chromeTrace(sim), "trace");
    ASSERT_EQ(a.stages.size(), b.stages.size());
    ASSERT_EQ(a.actionCount(), sim.schedule.actionCount());
    EXPECT_EQ(a.actionCount(), b.actionCount());
    for (size_t s = 0; s < a.stages.size(); ++s)
        for (size_t i = 0; i < a.stages[s].size(); ++i) {
            const auto &x = a.stages[s][i], &y = b.stages[s][i];
            EXPECT_EQ(x.name, y.name);
            EXPECT_EQ(x.category, y.category);
            EXPECT_EQ(x.microBatch, y.microBatch);
            EXPECT_EQ(x.chunk, y.chunk);
            EXPECT_NEAR(x.durationSeconds, y.durationSeconds, 1e-12);
        }
    EXPECT_NEAR(a.stepSeconds, b.stepSeconds, 1e-12);
    ASSERT_TRUE(b.planJson.has_value());
    EXPECT_EQ(*a.planJson, *b.planJson);
    // Predicted memory from `tessel predict --json` equals the simulation's, category by category.
    Prediction withMemory = b;
    setPredictedMemory(withMemory, {{"memory", memoryToJson(sim.memory)}}, "predict.json");
    ASSERT_EQ(withMemory.memory.size(), a.memory.size());
    for (size_t s = 0; s < a.memory.size(); ++s) {
        EXPECT_EQ(withMemory.memory[s].categoryBytes, a.memory[s].categoryBytes);
        EXPECT_EQ(withMemory.memory[s].categoryOwnPeakBytes, a.memory[s].categoryOwnPeakBytes);
        // At the peak's moment the categories add up to the allocated total, as a run's at_peak_total_bytes do.
        double sum = 0.0;
        for (const auto& [cat, bytes] : a.memory[s].categoryBytes) sum += bytes;
        EXPECT_NEAR(sum, a.memory[s].allocatedBytes(), 1e-6 * sum) << "stage " << s;
        EXPECT_DOUBLE_EQ(withMemory.memory[s].reservedBytes, a.memory[s].reservedBytes);
        EXPECT_DOUBLE_EQ(withMemory.memory[s].totalBytes, a.memory[s].totalBytes);
    }
    // The executor's mapping: activations include the logits the model files under "other".
    const auto& last = sim.memory.stages.back();
    EXPECT_GT(last.lossBackwardBytes, 0.0);
    EXPECT_DOUBLE_EQ(a.memory.back().categoryBytes.at("activations"), last.activationsBytes + last.other.logitsLossBytes);
    EXPECT_DOUBLE_EQ(a.memory.back().categoryBytes.at("other"), last.other.zero3GatherBytes + last.other.commBufferBytes +
                                                                    last.other.backwardWorkingBytes + last.other.stepCopyBytes);
    EXPECT_DOUBLE_EQ(a.memory.back().categoryOwnPeakBytes.at("activations"), activationsCategoryPeakBytes(last));
    EXPECT_DOUBLE_EQ(a.memory.back().categoryOwnPeakBytes.at("other"), buffersCategoryPeakBytes(last));
    // tiny-cpu's last stage peaks at its last layer's backward; its activations peak at the loss's backward.
    EXPECT_EQ(last.moment, StageMemory::Moment::LastLayerBackward);
    EXPECT_GT(activationsCategoryPeakBytes(last), last.activationsBytes + last.other.logitsLossBytes);
    EXPECT_THROW(setPredictedMemory(withMemory, {{"memory", {{"stages", {{{"stage", 0}}}}}}}, "p.json"), InputError);
}

TEST(ComparePrediction, AllRanksOfARunSlowerByAQuarterReadPlusAQuarter) {
    const PlanSimulation sim = tinySimulation();
    // Every rank's predicted timeline, stretched by 1.25, as two steps (the first one 3x slower).
    nlohmann::json trace = emptyTrace();
    std::vector<int> ranks;
    for (int r = 0; r < sim.schedule.plan.worldSize(); ++r) ranks.push_back(r);
    const nlohmann::json predicted = chromeTrace(sim, {ranks});
    double offset = 0.0;
    for (int step = 0; step < 2; ++step) {
        const double factor = step == 0 ? 3.0 : 1.25;
        for (auto ev : predicted["traceEvents"]) {
            if (ev["ph"] != "X") continue;
            ev["ts"] = ev["ts"].get<double>() * factor + offset;
            ev["dur"] = ev["dur"].get<double>() * factor;
            ev["args"]["step"] = step;
            trace["traceEvents"].push_back(ev);
        }
        offset += factor * sim.metrics.stepSeconds * 1e6;
    }
    const RunComparison c = compareRun(predictionFromSimulation(sim), MeasuredRun::fromTrace(trace));
    EXPECT_TRUE(c.unmatchedPredicted.empty());
    EXPECT_EQ(c.unmatchedMeasuredEvents, 0);
    EXPECT_EQ(c.actions.size(), sim.schedule.actionCount());
    for (const auto& a : c.actions)
        if (a.error()) EXPECT_NEAR(*a.error(), 0.25, 1e-6) << a.name;
    EXPECT_NEAR(*c.stepError(), 0.25, 1e-6);
    EXPECT_NEAR(c.meanAbsoluteError(), 0.25, 1e-6);
}

TEST(CompareInput, NotATraceAndMissingFilesAreInputErrors) {
    try {
        MeasuredRun::fromTrace({{"foo", 1}}, "x.json");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems()[0].where, "x.json#/traceEvents");
    }
    EXPECT_THROW(MeasuredRun::fromTrace(emptyTrace()), InputError);
    EXPECT_THROW(predictionFromTrace({{"traceEvents", 3}}), InputError);
    const fs::path dir = fs::temp_directory_path() / ("tessel_compare_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "empty");
    try {
        MeasuredRun::load(dir / "missing");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems()[0].where, (dir / "missing").string());
    }
    EXPECT_THROW(MeasuredRun::load(dir / "empty"), InputError);   // a folder without trace.json
    std::ofstream(dir / "bad.json") << "{not json";
    EXPECT_THROW(MeasuredRun::load(dir / "bad.json"), InputError);
    fs::remove_all(dir);
}

// Found by mutating a run folder's trace.json: a "ph" that was a number ended in the JSON library's type_error, and
// a step of 0.5 or 2^62 was read as 0 or wrapped. A phase that is not a string is not a complete event (skipped, as
// metadata is); a rank, stage, step or index that is not a whole int is an error at its pointer.
TEST(CompareInput, TraceFieldsOfTheWrongKindNameTheirPointer) {
    nlohmann::json trace = chromeTrace(tinySimulation());
    auto& events = trace["traceEvents"];
    size_t firstComplete = 0;
    while (events[firstComplete].value("ph", "") != "X") ++firstComplete;
    nlohmann::json numericPhase = trace;
    numericPhase["traceEvents"][firstComplete]["ph"] = 7;
    EXPECT_EQ(MeasuredRun::fromTrace(numericPhase, "t.json").events().size() + 1,
              MeasuredRun::fromTrace(trace, "t.json").events().size());
    for (const nlohmann::json& bad : {nlohmann::json(0.5), nlohmann::json(int64_t{1} << 62), nlohmann::json("3")}) {
        nlohmann::json t = trace;
        t["traceEvents"][firstComplete]["args"]["step"] = bad;
        try {
            MeasuredRun::fromTrace(t, "t.json");
            FAIL() << bad.dump();
        } catch (const InputError& e) {
            EXPECT_EQ(e.problems()[0].where, "t.json#/traceEvents/" + std::to_string(firstComplete) + "/args/step");
        }
    }
}

TEST(CompareInput, ARunFolderBringsItsMemoryAndPlan) {
    const Scenario s = loadScenarioFile(resolveScenarioPath("tiny-cpu", "test"));
    const PlanSimulation sim = simulatePlan(s.model, s.cluster, s.plan);
    const fs::path dir = fs::temp_directory_path() / ("tessel_compare_run_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    nlohmann::json trace = chromeTrace(sim);
    trace["otherData"] = {{"source", "tessel measured"}};   // a measured trace names no plan itself
    std::ofstream(dir / "trace.json") << trace.dump();
    std::ofstream(dir / "memory.json") << nlohmann::json{{"ranks", {{{"rank", 0}, {"stage", 0}, {"peak_total_bytes", 1e6}}}}}.dump();
    Scenario other = s;
    other.plan.pp = 1;
    other.plan.dp = 2;
    std::ofstream(dir / "scenario.json") << scenarioToJson(other).dump();
    const MeasuredRun run = MeasuredRun::load(dir);
    EXPECT_EQ(run.stagePeakBytes().at(0), 1e6);
    ASSERT_TRUE(run.planJson().has_value());
    EXPECT_EQ(run.planSource(), (dir / "scenario.json").string() + "#/plan");
    // The plan check names exactly the fields that differ, at the run's pointer.
    const std::vector<Problem> diffs = jsonDifferences(planToJson(s.plan), *run.planJson(), run.planSource(), "the prediction");
    ASSERT_EQ(diffs.size(), 2u);
    EXPECT_EQ(diffs[0].where, run.planSource() + "/dp");
    EXPECT_EQ(diffs[0].message, "the run has 2, the prediction has 1");
    EXPECT_EQ(diffs[1].where, run.planSource() + "/pp");
    EXPECT_TRUE(jsonDifferences(modelToJson(s.model), *run.modelJson(), run.modelSource(), "p").empty());
    // The same run read through its trace file finds the same siblings.
    EXPECT_EQ(MeasuredRun::load(dir / "trace.json").stagePeakBytes().at(0), 1e6);
    fs::remove_all(dir);
}

} // namespace
} // namespace tessel::sim
