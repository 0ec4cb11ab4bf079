// Test support for the executor: run a plan on N in-process ranks (threads) and collect losses and the
// full parameters, so N-rank runs can be compared with one rank.
#pragma once

#include "tessel/cost/scenario.hpp"
#include "tessel/exec/context.hpp"
#include "tessel/exec/cpu_backend.hpp"
#include "tessel/exec/data.hpp"
#include "tessel/exec/inproc_comm.hpp"
#include "tessel/exec/runtime.hpp"

#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::exec::test {

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
    auto w = makeInProcessWorld(world);
    RunResult result;
    result.losses.assign(static_cast<size_t>(steps), 0.0);
    result.memory.resize(static_cast<size_t>(world));
    result.records.resize(static_cast<size_t>(world));
    std::mutex mu;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
    const std::string text = testText();
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
        threads.emplace_back([&, r] {
            try {
                auto comm = makeInProcessComm(w, r);
                comm->setTimeoutSeconds(60.0);
                auto backend = makeCpuBackend(ElementType::F64);
                ParallelContext ctx = makeContext(plan, r, *comm, model.tiedEmbeddings);
                Trainer trainer(model, ctx, *backend,  hyper,
                                textDataSource(text, model.seqLen, plan.microBatch, plan.globalBatch, plan.dp, 7));
                std::vector<double> losses;
                for (int s = 0; s < steps; ++s) losses.push_back(trainer.step(s).loss);
                auto params = trainer.gatherFullParameters();
                std::lock_guard<std::mutex> lock(mu);
                if (r == 0) result.losses = losses;
                for (auto& [name, values] : params) result.params[name] = values;
                result.memory[static_cast<size_t>(r)] = backend->memory();
                result.records[static_cast<size_t>(r)] = trainer.records();
            } catch (...) {
                errors[static_cast<size_t>(r)] = std::current_exception();
                failRank(*w, r, "threw");
            }
        });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    return result;
}

inline double maxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
    double worst = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double scale = std::max({std::abs(a[i]), std::abs(b[i]), 1e-3});
        worst = std::max(worst, std::abs(a[i] - b[i]) / scale);
    }
    return a.size() == b.size() ? worst : 1e300;
}

} // namespace tessel::exec::test
