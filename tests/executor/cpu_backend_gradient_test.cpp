// Tests of the CPU backend's backward ops: float64 against finite differences, float32 against float64.
#include "tessel/exec/cpu_backend.hpp"

#include "cpu_backend_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace tessel::exec::test::cpu_backend {
namespace {

constexpr double kFiniteDifferenceTolerance = 1e-6;

// ---------------------------------------------------------------------------------------------------------
// Backward ops against central finite differences (float64)

TEST(CpuBackendGradients, BiasGradIsTheGradientOfAddBias) {
    auto b = f64();
    const Values xv = randomValues(12, 20), biasv = randomValues(4, 21), w = randomValues(12, 22);
    auto loss = [&](const Values& bv) {
        Tensor x = make(*b, {3, 4}, xv);
        b->addBias(x, make(*b, {4}, bv));
        return dot(b->download(x), w);
    };
    Tensor dbias = b->zeros({4}, MemoryCategory::Grads);
    b->biasGrad(make(*b, {3, 4}, w), dbias);
    EXPECT_LT(relativeError(b->download(dbias), finiteDifference(loss, biasv)), kFiniteDifferenceTolerance);
}

TEST(CpuBackendGradients, NormBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const int64_t n = 3, c = 5;
    const Values xv = randomValues(15, 23, -2.0, 2.0), gv = randomValues(5, 24, 0.5, 1.5), bv = randomValues(5, 25);
    const Values w = randomValues(15, 26);  // dy [n, c]: the loss is sum(w * y)
    for (int variant = 0; variant < 3; ++variant) {
        const bool rms = variant == 2, withBeta = variant == 0;
        auto loss = [&](const Values& x, const Values& g, const Values& be) {
            Tensor y = b->empty({n, c}, MemoryCategory::Activations), mean = b->empty({n}, MemoryCategory::Activations),
                   rstd = b->empty({n}, MemoryCategory::Activations);
            b->normForward(make(*b, {n, c}, x), make(*b, {c}, g), withBeta ? make(*b, {c}, be) : Tensor(), rms, 1e-5,
                           y, mean, rstd);
            return dot(b->download(y), w);
        };
        Tensor x = make(*b, {n, c}, xv), gamma = make(*b, {c}, gv);
        Tensor beta = withBeta ? make(*b, {c}, bv) : Tensor();
        Tensor y = b->empty({n, c}, MemoryCategory::Activations), mean = b->empty({n}, MemoryCategory::Activations),
               rstd = b->empty({n}, MemoryCategory::Activations);
        b->normForward(x, gamma, beta, rms, 1e-5, y, mean, rstd);
        // dx is written over NaN; dgamma and dbeta accumulate onto 1.
        Tensor dx = filled(*b, {n, c}, std::numeric_limits<double>::quiet_NaN());
        Tensor dgamma = filled(*b, {c}, 1.0);
        Tensor dbeta = withBeta ? filled(*b, {c}, 1.0) : Tensor();
        b->normBackward(make(*b, {n, c}, w), x, gamma, mean, rstd, rms, dx, dgamma, dbeta);
        const Values ones(static_cast<size_t>(c), 1.0);
        EXPECT_LT(relativeError(b->download(dx), finiteDifference([&](const Values& v) { return loss(v, gv, bv); }, xv)),
                  kFiniteDifferenceTolerance)
            << "variant " << variant;
        EXPECT_LT(relativeError(subtract(b->download(dgamma), ones),
                                finiteDifference([&](const Values& v) { return loss(xv, v, bv); }, gv)),
                  kFiniteDifferenceTolerance)
            << "variant " << variant;
        if (withBeta) {
            EXPECT_LT(relativeError(subtract(b->download(dbeta), ones),
                                    finiteDifference([&](const Values& v) { return loss(xv, gv, v); }, bv)),
                      kFiniteDifferenceTolerance);
        }
    }
}

// GELU, SiLU and squared ReLU (its kink at 0 is not among these 20 points, none within the differences' step of it).
TEST(CpuBackendGradients, ActivationBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const Values xv = randomValues(20, 27, -4.0, 4.0), w = randomValues(20, 28);
    for (const Pointwise f : {Pointwise::Gelu, Pointwise::Silu, Pointwise::SquaredRelu}) {
        auto loss = [&](const Values& x) {
            Tensor y = b->empty({4, 5}, MemoryCategory::Activations);
            b->activationForward(make(*b, {4, 5}, x), y, f);
            return dot(b->download(y), w);
        };
        Tensor dx = filled(*b, {4, 5}, std::numeric_limits<double>::quiet_NaN());
        b->activationBackward(make(*b, {4, 5}, w), make(*b, {4, 5}, xv), dx, f);
        EXPECT_LT(relativeError(b->download(dx), finiteDifference(loss, xv)), kFiniteDifferenceTolerance)
            << static_cast<int>(f);
    }
}

// SwiGLU and GeGLU: silu or GELU (tanh form) of the gate times the up half; squared ReLU's gate as well.
TEST(CpuBackendGradients, GatedActivationBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const Values xv = randomValues(24, 29, -3.0, 3.0), w = randomValues(12, 30);  // x [4, 6], dy [4, 3]
    for (const Pointwise act : {Pointwise::Silu, Pointwise::Gelu, Pointwise::SquaredRelu}) {
        auto loss = [&](const Values& x) {
            Tensor y = b->empty({4, 3}, MemoryCategory::Activations);
            b->gluForward(make(*b, {4, 6}, x), y, act);
            return dot(b->download(y), w);
        };
        Tensor dx = filled(*b, {4, 6}, std::numeric_limits<double>::quiet_NaN());
        b->gluBackward(make(*b, {4, 3}, w), make(*b, {4, 6}, xv), dx, act);
        EXPECT_LT(relativeError(b->download(dx), finiteDifference(loss, xv)), kFiniteDifferenceTolerance);
    }
}

TEST(CpuBackendGradients, RopeInverseIsTheBackward) {
    auto b = f64();
    const Positions pos = {3, 4, 5, 9};
    const Values xv = randomValues(count({4, 2, 6}), 31), w = randomValues(count({4, 2, 6}), 32);
    for (const int64_t rotated : {6, 4}) {  // the whole head and a partial rotary
        auto loss = [&](const Values& x) {
            Tensor t = make(*b, {4, 2, 6}, x);
            b->rope(t, pos, 500.0, rotated, false);
            return dot(b->download(t), w);
        };
        Tensor grad = make(*b, {4, 2, 6}, w);  // dx = rope^-1(dy)
        b->rope(grad, pos, 500.0, rotated, true);
        EXPECT_LT(relativeError(b->download(grad), finiteDifference(loss, xv)), kFiniteDifferenceTolerance) << rotated;
    }
}

TEST(CpuBackendGradients, SoftcapBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const Values xv = randomValues(20, 37, -60.0, 60.0), w = randomValues(20, 38);  // beyond the cap and inside it
    auto loss = [&](const Values& x) {
        Tensor t = make(*b, {4, 5}, x);
        b->softcap(t, 30.0);
        return dot(b->download(t), w);
    };
    Tensor y = make(*b, {4, 5}, xv), dy = make(*b, {4, 5}, w);
    b->softcap(y, 30.0);
    b->softcapBackward(dy, y, 30.0);
    EXPECT_LT(relativeError(b->download(dy), finiteDifference(loss, xv)), kFiniteDifferenceTolerance);
}

// Plain and soft-capped scores (a cap of 1.5 bends most of these scores; Gemma 2 caps at 50), a sliding window of 3
// keys, ALiBi's biases (heads 4-7 of 8: slopes 2^-5 .. 2^-8, too gentle to test; heads 0-3 of 4: 2^-2 .. 2^-8), and
// all three at once.
TEST(CpuBackendGradients, AttentionBackwardMatchesFiniteDifferences) {
    auto b = f64();
    ScoreRule capped, windowed, alibi, all;
    capped.softcap = 1.5;
    windowed.window = 3;
    alibi.alibiHeads = 4;
    all.softcap = 1.5;
    all.window = 3;
    all.alibiHeads = 8;
    all.headOffset = 1;
    for (const ScoreRule& rule : {ScoreRule{}, capped, windowed, alibi, all})
    for (const AttentionCase& a : {gqaCase(), offsetCase()}) {
        const Values qv = randomValues(count(a.qShape()), 33, -2.0, 2.0);
        const Values kv = randomValues(count(a.kShape()), 34, -2.0, 2.0), vv = randomValues(count(a.kShape()), 35);
        const Values w = randomValues(count(a.qShape()), 36);
        auto loss = [&](const Values& q, const Values& k, const Values& v) {
            Tensor o = b->empty(a.qShape(), MemoryCategory::Activations);
            Tensor lse = b->empty(a.lseShape(), MemoryCategory::Activations);
            b->attentionForward(make(*b, a.qShape(), q), make(*b, a.kShape(), k), make(*b, a.kShape(), v), a.sequences,
                                a.queryPositions, a.keyPositions, o, lse, rule);
            return dot(b->download(o), w);
        };
        // dk, dv accumulate onto 0.5.
        const AttentionGradients g = attentionGradients(*b, a, qv, kv, vv, w, 0.5, rule);
        const Values half(count(a.kShape()), 0.5);
        const std::string label = "sq " + std::to_string(a.sq()) + " skv " + std::to_string(a.skv()) + " softcap " +
                                  std::to_string(rule.softcap) + " window " + std::to_string(rule.window) +
                                  " alibi heads " + std::to_string(rule.alibiHeads);
        EXPECT_LT(relativeError(g.dq, finiteDifference([&](const Values& x) { return loss(x, kv, vv); }, qv)),
                  kFiniteDifferenceTolerance)
            << label;
        EXPECT_LT(relativeError(subtract(g.dk, half), finiteDifference([&](const Values& x) { return loss(qv, x, vv); }, kv)),
                  kFiniteDifferenceTolerance)
            << label;
        EXPECT_LT(relativeError(subtract(g.dv, half), finiteDifference([&](const Values& x) { return loss(qv, kv, x); }, vv)),
                  kFiniteDifferenceTolerance)
            << label;
    }
}

// Context parallelism splits the keys into chunks; backward over each chunk with the full o and lse must give
// the chunk's slice of dk, dv and a share of dq that sums to the full dq.
TEST(CpuBackendGradients, AttentionBackwardOverKeyChunksAddsUp) {
    auto b = f64();
    const AttentionCase a{1, 2, 1, 4, iota(8, 16), iota(0, 16)};
    const Values qv = randomValues(count(a.qShape()), 37, -2.0, 2.0);
    const Values kv = randomValues(count(a.kShape()), 38, -2.0, 2.0), vv = randomValues(count(a.kShape()), 39);
    const Values w = randomValues(count(a.qShape()), 40);
    const AttentionGradients full = attentionGradients(*b, a, qv, kv, vv, w, 0.0);

    Tensor q = make(*b, a.qShape(), qv), k = make(*b, a.kShape(), kv), v = make(*b, a.kShape(), vv);
    Tensor o = b->empty(a.qShape(), MemoryCategory::Activations), lse = b->empty(a.lseShape(), MemoryCategory::Activations);
    b->attentionForward(q, k, v, 1, a.queryPositions, a.keyPositions, o, lse);
    Tensor dout = make(*b, a.qShape(), w);
    Values dqSum(count(a.qShape()), 0.0), dkAll, dvAll;
    for (int64_t chunk = 0; chunk < 2; ++chunk) {
        // keys [8 chunk, 8 chunk + 8): kc, vc [8, hkv, d]
        const Positions kp = iota(8 * chunk, 8 * chunk + 8);
        Tensor kc = b->empty({8, 1, 4}, MemoryCategory::Activations), vc = b->empty({8, 1, 4}, MemoryCategory::Activations);
        b->copyRows(k, 8 * chunk, kc);
        b->copyRows(v, 8 * chunk, vc);
        Tensor dq = b->empty(a.qShape(), MemoryCategory::Activations);
        Tensor dk = b->zeros({8, 1, 4}, MemoryCategory::Activations), dv = b->zeros({8, 1, 4}, MemoryCategory::Activations);
        b->attentionBackward(dout, q, kc, vc, o, lse, 1, a.queryPositions, kp, dq, dk, dv);
        const Values dqc = b->download(dq), dkc = b->download(dk), dvc = b->download(dv);
        for (size_t i = 0; i < dqSum.size(); ++i) dqSum[i] += dqc[i];
        dkAll.insert(dkAll.end(), dkc.begin(), dkc.end());
        dvAll.insert(dvAll.end(), dvc.begin(), dvc.end());
    }
    EXPECT_LT(relativeError(dqSum, full.dq), 1e-13);
    EXPECT_LT(relativeError(dkAll, full.dk), 1e-13);
    EXPECT_LT(relativeError(dvAll, full.dv), 1e-13);
}

TEST(CpuBackendGradients, EmbeddingBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const int64_t vocabBegin = 4, vocabLocal = 5, h = 3;
    const std::vector<int32_t> tokens = {0, 4, 8, 9, 5, 5, 12};  // 5 twice, three tokens in other shards
    const Values tv = randomValues(15, 41), w = randomValues(21, 42);
    auto loss = [&](const Values& table) {
        Tensor out = b->empty({7, h}, MemoryCategory::Activations);
        b->embeddingForward(tokens, make(*b, {vocabLocal, h}, table), vocabBegin, out);
        return dot(b->download(out), w);
    };
    Tensor dtable = filled(*b, {vocabLocal, h}, 2.0);  // accumulates onto 2
    b->embeddingBackward(tokens, make(*b, {7, h}, w), vocabBegin, dtable);
    EXPECT_LT(relativeError(subtract(b->download(dtable), Values(15, 2.0)), finiteDifference(loss, tv)),
              kFiniteDifferenceTolerance);
}

TEST(CpuBackendGradients, CrossEntropyBackwardOverShardsMatchesFiniteDifferences) {
    auto b = f64();
    const int64_t n = 4, vocab = 10, split = 6;
    const std::vector<int32_t> targets = {1, 7, 5, 9};
    const Values lv = randomValues(static_cast<size_t>(n * vocab), 43, -3.0, 3.0);
    Tensor left = make(*b, {n, split}, columns(lv, n, vocab, 0, split));
    Tensor right = make(*b, {n, vocab - split}, columns(lv, n, vocab, split, vocab));
    Values mx = b->rowMax(left);
    const Values mr = b->rowMax(right);
    for (size_t i = 0; i < mx.size(); ++i) mx[i] = std::max(mx[i], mr[i]);
    Values sum = b->rowSumExp(left, mx);
    const Values sr = b->rowSumExp(right, mx);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += sr[i];
    b->crossEntropyBackward(left, mx, sum, targets, 0, 1.0 / static_cast<double>(n));
    b->crossEntropyBackward(right, mx, sum, targets, split, 1.0 / static_cast<double>(n));
    const Values gl = b->download(left), gr = b->download(right);
    Values grad(lv.size());
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < vocab; ++j)
            grad[static_cast<size_t>(i * vocab + j)] =
                j < split ? gl[static_cast<size_t>(i * split + j)] : gr[static_cast<size_t>(i * (vocab - split) + j - split)];
    auto loss = [&](const Values& l) { return crossEntropyReference(l, targets, n, vocab); };
    EXPECT_LT(relativeError(grad, finiteDifference(loss, lv)), kFiniteDifferenceTolerance);
}

// ---------------------------------------------------------------------------------------------------------
// float32 backward ops within 1e-4 of the (finite-difference checked) float64 ones

TEST(CpuBackendFloat, BackwardOpsMatchFloat64) {
    auto b32 = makeCpuBackend(ElementType::F32);
    auto b64 = f64();
    constexpr double tol = 1e-4;
    {
        const Values xv = randomValues(15, 44, -2.0, 2.0), gv = randomValues(5, 45, 0.5, 1.5), bv = randomValues(5, 46);
        const Values w = randomValues(15, 47);
        std::vector<Values> results;
        for (Backend* b : {b64.get(), b32.get()}) {
            Tensor x = make(*b, {3, 5}, xv), gamma = make(*b, {5}, gv), beta = make(*b, {5}, bv);
            Tensor y = b->empty({3, 5}, MemoryCategory::Activations), mean = b->empty({3}, MemoryCategory::Activations),
                   rstd = b->empty({3}, MemoryCategory::Activations);
            b->normForward(x, gamma, beta, false, 1e-5, y, mean, rstd);
            Tensor dx = b->empty({3, 5}, MemoryCategory::Activations), dg = b->zeros({5}, MemoryCategory::Grads),
                   db = b->zeros({5}, MemoryCategory::Grads);
            b->normBackward(make(*b, {3, 5}, w), x, gamma, mean, rstd, false, dx, dg, db);
            Values all = b->download(dx), g = b->download(dg), bb = b->download(db);
            all.insert(all.end(), g.begin(), g.end());
            all.insert(all.end(), bb.begin(), bb.end());
            results.push_back(all);
        }
        EXPECT_LT(relativeError(results[1], results[0]), tol);
    }
    {
        const Values xv = randomValues(24, 48, -3.0, 3.0), w = randomValues(24, 49), w2 = randomValues(12, 50);
        std::vector<Values> results;
        for (Backend* b : {b64.get(), b32.get()}) {
            Tensor x = make(*b, {4, 6}, xv), dx = b->empty({4, 6}, MemoryCategory::Activations);
            b->activationBackward(make(*b, {4, 6}, w), x, dx, Pointwise::Gelu);
            Values all = b->download(dx);
            b->gluBackward(make(*b, {4, 3}, w2), x, dx, Pointwise::Silu);
            const Values s = b->download(dx);
            all.insert(all.end(), s.begin(), s.end());
            results.push_back(all);
        }
        EXPECT_LT(relativeError(results[1], results[0]), tol);
    }
    {
        const AttentionCase a = offsetCase();
        const Values qv = randomValues(count(a.qShape()), 51, -2.0, 2.0);
        const Values kv = randomValues(count(a.kShape()), 52, -2.0, 2.0), vv = randomValues(count(a.kShape()), 53);
        const Values w = randomValues(count(a.qShape()), 54);
        const AttentionGradients g64 = attentionGradients(*b64, a, qv, kv, vv, w, 0.0);
        const AttentionGradients g32 = attentionGradients(*b32, a, qv, kv, vv, w, 0.0);
        EXPECT_LT(relativeError(g32.dq, g64.dq), tol);
        EXPECT_LT(relativeError(g32.dk, g64.dk), tol);
        EXPECT_LT(relativeError(g32.dv, g64.dv), tol);
    }
}

} // namespace
} // namespace tessel::exec::test::cpu_backend
