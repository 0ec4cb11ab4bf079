// Tests of the CPU backend's memory accounting, argument checks and bitwise reproducibility.
#include "tessel/exec/cpu_backend.hpp"

#include "cpu_backend_test_support.hpp"

#include "tessel/cost/errors.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::exec::test::cpu_backend {
namespace {

// Runs `fn` and expects a RuntimeError whose message names `op`.
template <typename Fn>
void expectRuntimeError(Fn&& fn, const std::string& op) {
    try {
        fn();
        ADD_FAILURE() << "no RuntimeError from " << op;
    } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Memory accounting, checks, determinism

TEST(CpuBackend, MemoryIsCountedPerCategoryAndReleased) {
    auto b = f64();
    const auto cur = [&](MemoryCategory c) { return b->memory().currentBytes[static_cast<size_t>(c)]; };
    const auto peak = [&](MemoryCategory c) { return b->memory().peakBytes[static_cast<size_t>(c)]; };
    {
        Tensor w = b->empty({3, 5}, MemoryCategory::Weights);  // 15 * 8 bytes
        EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data<double>()) % 64, 0u);
        EXPECT_EQ(cur(MemoryCategory::Weights), 120);
        {
            Tensor a = b->zeros({10}, MemoryCategory::Activations);
            Tensor view = a.view({2, 5});  // same storage: no new bytes
            EXPECT_EQ(cur(MemoryCategory::Activations), 80);
            EXPECT_EQ(b->memory().currentTotalBytes, 200);
            EXPECT_EQ(b->memory().peakTotalBytes, 200);
        }
        EXPECT_EQ(cur(MemoryCategory::Activations), 0);
        EXPECT_EQ(peak(MemoryCategory::Activations), 80);
        Tensor o = b->empty({4}, MemoryCategory::Optimizer);
        EXPECT_EQ(b->memory().currentTotalBytes, 152);
        EXPECT_EQ(b->memory().peakTotalBytes, 200);
        b->resetPeaks();
        EXPECT_EQ(peak(MemoryCategory::Activations), 0);
        EXPECT_EQ(b->memory().peakTotalBytes, 152);
    }
    EXPECT_EQ(b->memory().currentTotalBytes, 0);
    for (int c = 0; c < exec::kMemoryCategories; ++c) EXPECT_EQ(b->memory().currentBytes[static_cast<size_t>(c)], 0);

    auto b32 = makeCpuBackend(ElementType::F32);
    Tensor g = b32->empty({3, 5}, MemoryCategory::Grads);  // 15 * 4 bytes
    EXPECT_EQ(b32->memory().currentBytes[static_cast<size_t>(MemoryCategory::Grads)], 60);
}

TEST(CpuBackend, ShapeMismatchesThrowRuntimeErrorNamingTheOp) {
    auto b = f64();
    auto t = [&](std::vector<int64_t> shape) { return b->zeros(std::move(shape), MemoryCategory::Activations); };
    Tensor a23 = t({2, 3}), b45 = t({4, 5}), c25 = t({2, 5}), c24 = t({2, 4}), b35 = t({3, 5});
    expectRuntimeError([&] { b->gemm(false, false, 1.0, a23, b45, 0.0, c25); }, "gemm");
    expectRuntimeError([&] { b->gemm(false, false, 1.0, a23, b35, 0.0, c24); }, "gemm");
    expectRuntimeError([&] { b->gemm(true, false, 1.0, a23, b35, 0.0, c25); }, "gemm");
    expectRuntimeError([&] { b->gemm(false, false, 1.0, t({2, 3, 1}), b35, 0.0, c25); }, "gemm");
    Tensor undefined;
    expectRuntimeError([&] { b->gemm(false, false, 1.0, a23, b35, 0.0, undefined); }, "gemm");
    try {
        b->gemm(false, false, 1.0, a23, b45, 0.0, c25);
    } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
    }
    expectRuntimeError([&] { b->addBias(a23, t({2})); }, "addBias");
    expectRuntimeError([&] { b->addBias(a23, t({3, 1})); }, "addBias");
    Tensor bias2 = t({2});
    expectRuntimeError([&] { b->biasGrad(a23, bias2); }, "biasGrad");
    Tensor y23 = t({2, 3}), mean2 = t({2}), rstd2 = t({2});
    expectRuntimeError([&] { b->normForward(a23, t({2}), Tensor(), false, 1e-5, y23, mean2, rstd2); }, "normForward");
    Tensor rstd3 = t({3});
    expectRuntimeError([&] { b->normForward(a23, t({3}), t({3}), false, 1e-5, y23, mean2, rstd3); }, "normForward");
    Tensor dx23 = t({2, 3}), dg3 = t({3}), db3 = t({3});
    expectRuntimeError([&] { b->normBackward(t({2, 4}), a23, t({3}), mean2, rstd2, false, dx23, dg3, db3); },
                       "normBackward");
    expectRuntimeError([&] { b->activationForward(a23, c24, Pointwise::Gelu); }, "activationForward");
    expectRuntimeError([&] { b->activationBackward(a23, a23, c24, Pointwise::SquaredRelu); }, "activationBackward");
    expectRuntimeError([&] { b->gluForward(a23, c24, Pointwise::Silu); }, "gluForward");  // odd columns
    expectRuntimeError([&] { b->gluForward(c24, c24, Pointwise::Gelu); }, "gluForward");  // y must be [2, 2]
    expectRuntimeError([&] { b->gluBackward(c24, c24, c24, Pointwise::Silu); }, "gluBackward");
    Tensor x3 = t({2, 1, 4}), x3odd = t({2, 1, 3});
    expectRuntimeError([&] { b->rope(x3, {0, 1, 2}, 10000.0, 4, false); }, "rope");
    expectRuntimeError([&] { b->rope(x3odd, {0, 1}, 10000.0, 3, false); }, "rope");  // an odd rotated width
    expectRuntimeError([&] { b->rope(x3, {0, 1}, 10000.0, 6, false); }, "rope");     // wider than the head
    expectRuntimeError([&] { b->rope(x3, {0, 1}, 10000.0, 0, false); }, "rope");
    expectRuntimeError([&] { b->rope(a23, {0, 1}, 10000.0, 2, false); }, "rope");
    Tensor q = t({4, 3, 2}), k = t({4, 2, 2}), v = t({4, 2, 2}), o = t({4, 3, 2}), lse = t({4, 3});
    expectRuntimeError([&] { b->attentionForward(q, k, v, 1, iota(0, 4), iota(0, 4), o, lse); }, "attentionForward");
    Tensor k1 = t({4, 1, 2}), v1 = t({4, 1, 2});
    expectRuntimeError([&] { b->attentionForward(q, k1, v1, 1, iota(0, 3), iota(0, 4), o, lse); }, "attentionForward");
    Tensor lse42 = t({4, 2});
    expectRuntimeError([&] { b->attentionForward(q, k1, v1, 1, iota(0, 4), iota(0, 4), o, lse42); },
                       "attentionForward");
    expectRuntimeError([&] { b->attentionForward(q, k1, t({4, 1, 3}), 1, iota(0, 4), iota(0, 4), o, lse); },
                       "attentionForward");
    Tensor dq = t({4, 3, 2}), dk = t({4, 1, 2}), dv = t({4, 1, 3});
    expectRuntimeError([&] { b->attentionBackward(o, q, k1, v1, o, lse, 1, iota(0, 4), iota(0, 4), dq, dk, dv); },
                       "attentionBackward");
    Tensor out = t({3, 3});
    expectRuntimeError([&] { b->embeddingForward({1, 2}, a23, 0, out); }, "embeddingForward");
    expectRuntimeError([&] { b->embeddingForward({1, -2, 0}, a23, 0, out); }, "embeddingForward");
    expectRuntimeError([&] { b->embeddingBackward({1, 2}, out, 0, a23); }, "embeddingBackward");
    expectRuntimeError([&] { b->rowMax(t({2})); }, "rowMax");
    expectRuntimeError([&] { b->rowSumExp(a23, {0.0}); }, "rowSumExp");
    expectRuntimeError([&] { b->targetLogits(a23, {0}, 0); }, "targetLogits");
    expectRuntimeError([&] { b->crossEntropyBackward(a23, {0.0, 0.0}, {1.0}, {0, 0}, 0, 1.0); }, "crossEntropyBackward");
    Tensor p = t({3}), g = t({3}), m = t({3}), vv = t({2});
    expectRuntimeError([&] { b->adamw(p, g, m, vv, 0.1, 0.9, 0.999, 1e-8, 0.0, 1); }, "adamw");
    expectRuntimeError([&] { b->adamw(p, g, m, m, 0.1, 0.9, 0.999, 1e-8, 0.0, 0); }, "adamw");
    Tensor r1 = t({2, 3});
    expectRuntimeError([&] { b->copyRows(a23, 1, r1); }, "copyRows");
    expectRuntimeError([&] { b->copyRows(a23, 0, c24); }, "copyRows");
    expectRuntimeError([&] { b->copyRowsInto(a23, r1, 1); }, "copyRowsInto");
    expectRuntimeError([&] { b->copyColumns(a23, 2, c25); }, "copyColumns");
    Tensor c32 = t({3, 2});
    expectRuntimeError([&] { b->copyColumns(a23, 0, c32); }, "copyColumns");
    expectRuntimeError([&] { b->addColumnsInto(c24, a23, 0); }, "addColumnsInto");
    expectRuntimeError([&] { b->copy(a23, c24); }, "copy");
    expectRuntimeError([&] { b->add(a23, c24); }, "add");
    expectRuntimeError([&] { b->upload(Values(5, 0.0), a23); }, "upload");
}

TEST(CpuBackend, ElementTypeMismatchThrows) {
    auto b64 = f64();
    auto b32 = makeCpuBackend(ElementType::F32);
    Tensor x32 = b32->zeros({2, 2}, MemoryCategory::Activations);
    Tensor y64 = b64->zeros({2, 2}, MemoryCategory::Activations);
    expectRuntimeError([&] { b64->activationForward(x32, y64, Pointwise::Gelu); }, "activationForward");
    expectRuntimeError([&] { b64->download(x32); }, "download");
    expectRuntimeError([&] { b32->gemm(false, false, 1.0, x32, y64, 0.0, x32); }, "gemm");
}

TEST(CpuBackend, QueryWithoutVisibleKeyThrows) {
    auto b = f64();
    const AttentionCase a{1, 1, 1, 2, {0, 1}, {1, 2}};  // query at position 0 sees neither key
    Tensor q = b->zeros(a.qShape(), MemoryCategory::Activations), k = b->zeros(a.kShape(), MemoryCategory::Activations);
    Tensor v = b->zeros(a.kShape(), MemoryCategory::Activations), o = b->empty(a.qShape(), MemoryCategory::Activations);
    Tensor lse = b->empty(a.lseShape(), MemoryCategory::Activations);
    expectRuntimeError([&] { b->attentionForward(q, k, v, 1, a.queryPositions, a.keyPositions, o, lse); },
                       "attentionForward");
}

TEST(CpuBackend, ResultsAreBitwiseReproducible) {
    for (ElementType type : {ElementType::F64, ElementType::F32}) {
        std::vector<Values> runs;
        for (int run = 0; run < 2; ++run) {
            auto b = makeCpuBackend(type);
            Tensor a = make(*b, {37, 53}, randomValues(37 * 53, 60)), w = make(*b, {53, 29}, randomValues(53 * 29, 61));
            Tensor c = b->empty({37, 29}, MemoryCategory::Activations);
            b->gemm(false, false, 1.0, a, w, 0.0, c);
            Values all = b->download(c);
            const AttentionCase ac = offsetCase();
            const AttentionGradients g = attentionGradients(*b, ac, randomValues(count(ac.qShape()), 62),
                                                            randomValues(count(ac.kShape()), 63),
                                                            randomValues(count(ac.kShape()), 64),
                                                            randomValues(count(ac.qShape()), 65), 0.0);
            for (const Values* part : {&g.dq, &g.dk, &g.dv}) all.insert(all.end(), part->begin(), part->end());
            all.push_back(b->sumSquares(c));
            runs.push_back(all);
        }
        EXPECT_EQ(runs[0], runs[1]);
    }
}

} // namespace
} // namespace tessel::exec::test::cpu_backend
