// Test support for the executor: run a plan on N in-process ranks (threads) and collect losses and the
// full parameters, so N-rank runs can be compared with one rank.
#pragma once

#include "tessel/cost/memory.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/exec/context.hpp"
#include "tessel/exec/cpu_backend.hpp"
#include "tessel/exec/data.hpp"
#include "tessel/exec/gpt.hpp"
#include "tessel/exec/inproc_comm.hpp"
#include "tessel/exec/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::exec::test {

// Runs body(rank, world) on `size` threads of one in-process world. A rank that throws is failed in the world,
// so the others stop waiting on it within their timeouts; after every thread has joined, the first rank's
// exception is rethrown.
template <class Body>
void onInProcessRanks(int size, Body&& body) {
    for (auto& e : runInProcessRanks(size, body))
        if (e) std::rethrow_exception(e);
}

struct RunResult {
    std::vector<double> losses;
    std::map<std::string, std::vector<double>> params;   // full values, merged over stages
    std::vector<MemoryStats> memory;                     // per rank
    std::vector<std::vector<ActionRecord>> records;      // per rank
};

// Deterministic text for tests: pseudo-English from a small fixed vocabulary of words.
inline std::string testText() {
    static const char* words[] = {"the", "pipeline", "stage", "sends", "a", "tensor", "to", "next", "rank",
                                  "and", "waits", "for", "gradient", "of", "micro", "batch", "while", "bubble",
                                  "shrinks", "when", "more", "batches", "flow", "through", "model"};
    std::string text;
    uint64_t x = 12345;
    for (int i = 0; i < 4000; ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        text += words[(x >> 33) % 25];
        text += (i % 13 == 12) ? ".\n" : " ";
    }
    return text;
}

// The tiny test model (scenarios/models/tiny.json, or the SwiGLU/RMSNorm/RoPE variant tiny-moe without its MoE
// block), with short sequences so a step takes milliseconds.
inline ModelConfig tinyModel(bool swiglu = false) {
    ModelConfig m = loadModelRef(swiglu ? "tiny-moe" : "tiny", "test");
    m.moe.reset();
    m.ffnHidden = swiglu ? 128 : 256;
    m.seqLen = 16;
    return m;
}

// The tiny MoE model (scenarios/models/tiny-moe.json) with narrow experts and short sequences; `mixed`: DeepSeek's
// layout, a dense first layer and shared experts beside the routed ones.
inline ModelConfig tinyMoeModel(bool mixed = false) {
    ModelConfig m = loadModelRef("tiny-moe", "test");
    m.ffnHidden = 128;
    m.moe->expertFfnHidden = 64;
    m.seqLen = 16;
    if (mixed) {
        m.moe->denseLayers = {0};
        m.moe->sharedFfnHidden = 32;
    }
    return m;
}

// The executor's reference recipe on a global batch of 8 sequences in micro-batches of 2.
inline Plan basePlan() {
    Plan p;
    p.precision = "cpu_fp64";
    p.globalBatch = 8;
    p.microBatch = 2;
    p.flashAttention = true;
    return p;
}

inline RunResult runPlan(const ModelConfig& model, const Plan& plan, int steps, TrainHyper hyper = {}) {
    const int world = plan.worldSize();
    RunResult result;
    result.losses.assign(static_cast<size_t>(steps), 0.0);
    result.memory.resize(static_cast<size_t>(world));
    result.records.resize(static_cast<size_t>(world));
    std::mutex mu;
    const std::string text = testText();
    onInProcessRanks(world, [&](int r, const std::shared_ptr<InProcessWorld>& w) {
        auto comm = makeInProcessComm(w, r);
        comm->setTimeoutSeconds(60.0);
        auto backend = makeCpuBackend(ElementType::F64);
        ParallelContext ctx = makeContext(plan, r, *comm, model.tiedEmbeddings);
        Trainer trainer(model, ctx, *backend, hyper,
                        textDataSource(text, model.seqLen, plan.microBatch, plan.globalBatch, plan.dp, 7));
        std::vector<double> losses;
        for (int s = 0; s < steps; ++s) losses.push_back(trainer.step(s).loss);
        auto params = trainer.gatherFullParameters();
        std::lock_guard<std::mutex> lock(mu);
        if (r == 0) result.losses = losses;
        for (auto& [name, values] : params) result.params[name] = values;
        result.memory[static_cast<size_t>(r)] = backend->memory();
        result.records[static_cast<size_t>(r)] = trainer.records();
    });
    return result;
}

// The backend's peak per category against the model's stage, one printed row each, expected within `bound`
// relative: weights, grads, optimizer and activations (the executor keeps the logits among its activations;
// the model files them under "other"), each category at its own moment (activationsCategoryPeakBytes).
inline void expectCategoryPeaksNear(const StageMemory& st, const MemoryStats& m, double bound, const std::string& label) {
    auto measured = [&](MemoryCategory k) { return static_cast<double>(m.peakBytes[static_cast<size_t>(k)]); };
    const struct {
        const char* name;
        double predictedBytes, measuredBytes;
    } rows[] = {
        {"weights", st.weightsBytes, measured(MemoryCategory::Weights)},
        {"grads", st.gradsBytes, measured(MemoryCategory::Grads)},
        {"optimizer", st.optimizerBytes, measured(MemoryCategory::Optimizer)},
        {"activations", activationsCategoryPeakBytes(st), measured(MemoryCategory::Activations)},
    };
    for (const auto& row : rows) {
        const double err = (row.predictedBytes - row.measuredBytes) / row.measuredBytes;
        std::printf("memory %-32s %-11s predicted %10.0f measured %10.0f error %+6.2f%%\n", label.c_str(), row.name,
                    row.predictedBytes, row.measuredBytes, 100.0 * err);
        EXPECT_LT(std::abs(err), bound) << label << " " << row.name;
    }
}

inline double maxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
    double worst = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double scale = std::max({std::abs(a[i]), std::abs(b[i]), 1e-3});
        worst = std::max(worst, std::abs(a[i] - b[i]) / scale);
    }
    return a.size() == b.size() ? worst : 1e300;
}

// Selective and full recompute of every layer train bitwise as `plan` without recompute (2 steps).
inline void expectRecomputeIsBitwise(const ModelConfig& model, const Plan& plan) {
    const RunResult none = runPlan(model, plan, 2);
    for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
        Plan q = plan;
        q.recompute = rc;
        const RunResult r = runPlan(model, q, 2);
        EXPECT_EQ(r.losses, none.losses) << toString(rc);
        EXPECT_EQ(r.params, none.params) << toString(rc);
    }
}

// Trains `model` for 3 steps on `plan` and on `oneRank`: same losses and updated parameters to 1e-10, and
// the loss falls.
inline void expectMatchesOneRank(const ModelConfig& model, const Plan& plan, const Plan& oneRank, const TrainHyper& hyper = {}) {
    const test::RunResult ref = runPlan(model, oneRank, 3, hyper);
    const test::RunResult got = runPlan(model, plan, 3, hyper);
    ASSERT_EQ(ref.losses.size(), got.losses.size());
    for (size_t i = 0; i < ref.losses.size(); ++i)
        EXPECT_LT(std::abs(ref.losses[i] - got.losses[i]) / ref.losses[i], 1e-10) << "step " << i;
    ASSERT_EQ(ref.params.size(), got.params.size());
    for (const auto& [name, values] : ref.params) {
        auto it = got.params.find(name);
        ASSERT_NE(it, got.params.end()) << name;
        EXPECT_LT(maxRelDiff(values, it->second), 1e-10) << name;
    }
    EXPECT_LT(got.losses.back(), got.losses.front()); // it trains
}

// The gradients `names` of `model` on one rank against central differences of the loss, at four or five elements each.
inline void expectGradientsMatchFiniteDifferences(const ModelConfig& model, const std::vector<std::string>& names) {
    const Plan plan = basePlan();
    auto w = makeInProcessWorld(1);
    auto comm = makeInProcessComm(w, 0);
    auto backend = makeCpuBackend(ElementType::F64);
    ParallelContext ctx = makeContext(plan, 0, *comm, model.tiedEmbeddings);
    GptModel gpt(model, ctx, *backend, 99);
    const MicroBatchData data =
        textDataSource(testText(), model.seqLen, plan.microBatch, plan.globalBatch, 1, 7)(0, 0, 0);
    const double scale = 1.0 / (static_cast<double>(plan.globalBatch) * static_cast<double>(model.seqLen));
    auto loss = [&] {
        gpt.forward(0, 0, Tensor(), data);
        gpt.backward(0, 0, Tensor(), false);
        return gpt.takeLossSum() * scale;
    };
    loss(); // gradients of the unperturbed parameters (read before the perturbed passes accumulate more)
    std::vector<std::vector<double>> grads;
    for (auto& p : gpt.parameters()) grads.push_back(backend->download(p.grad));
    int checked = 0;
    size_t index = 0, found = 0;
    for (auto& p : gpt.parameters()) {
        const std::vector<double>& grad = grads[index++];
        if (std::find(names.begin(), names.end(), p.info.name) == names.end()) continue;
        std::vector<double> value = backend->download(p.value);
        bool moves = false; // the loss depends on it (a parameter left out of the forward would pass at 0 = 0)
        for (size_t i = 0; i < value.size(); i += value.size() / 5 + 1) {
            const double v0 = value[i], eps = 1e-5;
            value[i] = v0 + eps;
            backend->upload(value, p.value);
            const double up = loss();
            value[i] = v0 - eps;
            backend->upload(value, p.value);
            const double down = loss();
            value[i] = v0;
            backend->upload(value, p.value);
            const double fd = (up - down) / (2 * eps);
            EXPECT_NEAR(grad[i], fd, 1e-4 * std::abs(fd) + 1e-10) << p.info.name << " " << i;
            moves = moves || std::abs(fd) > 1e-9;
            ++checked;
        }
        EXPECT_TRUE(moves) << p.info.name;
        ++found;
    }
    EXPECT_EQ(found, names.size()); // every name is one of the model's parameters
    EXPECT_GE(checked, 4 * static_cast<int>(names.size()));
}

} // namespace tessel::exec::test
