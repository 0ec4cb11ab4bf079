// Test support for the CPU backend's tests: random values, tensors, relative errors, attention cases.
#pragma once

#include "tessel/exec/cpu_backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace tessel::exec::test::cpu_backend {

using Values = std::vector<double>;
using Positions = std::vector<int64_t>;

// ---------------------------------------------------------------------------------------------------------
// Helpers

inline Values randomValues(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    Values v(n);
    for (auto& x : v) x = dist(gen);
    return v;
}

inline size_t count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return static_cast<size_t>(n);
}

inline Tensor make(Backend& b, const std::vector<int64_t>& shape, const Values& values,
                   MemoryCategory category = MemoryCategory::Activations) {
    Tensor t = b.empty(shape, category);
    b.upload(values, t);
    return t;
}

inline Tensor filled(Backend& b, const std::vector<int64_t>& shape, double value) {
    Tensor t = b.empty(shape, MemoryCategory::Activations);
    b.fill(t, value);
    return t;
}

inline double dot(const Values& a, const Values& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

inline double norm(const Values& a) { return std::sqrt(dot(a, a)); }

// ||a - b|| / max(||a||, ||b||): the norm-wise relative error (0 for two zero vectors).
inline double relativeError(const Values& a, const Values& b) {
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
    Values d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    const double scale = std::max(norm(a), norm(b));
    return scale == 0.0 ? 0.0 : norm(d) / scale;
}

// Central finite differences: g_i = (f(x + h e_i) - f(x - h e_i)) / 2h.
inline Values finiteDifference(const std::function<double(const Values&)>& f, Values x, double h = 1e-5) {
    Values g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double xi = x[i];
        x[i] = xi + h;
        const double plus = f(x);
        x[i] = xi - h;
        const double minus = f(x);
        x[i] = xi;
        g[i] = (plus - minus) / (2.0 * h);
    }
    return g;
}

inline Values subtract(const Values& a, const Values& b) {
    Values d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    return d;
}

// ---------------------------------------------------------------------------------------------------------
// Attention cases, cross-entropy, attention gradients (the forward, backward and check tests share them)

struct AttentionCase {
    int64_t sequences, hq, hkv, d;
    Positions queryPositions, keyPositions;
    int64_t sq() const { return static_cast<int64_t>(queryPositions.size()); }
    int64_t skv() const { return static_cast<int64_t>(keyPositions.size()); }
    std::vector<int64_t> qShape() const { return {sequences * sq(), hq, d}; }
    std::vector<int64_t> kShape() const { return {sequences * skv(), hkv, d}; }
    std::vector<int64_t> lseShape() const { return {sequences * sq(), hq}; }
};

inline Positions iota(int64_t begin, int64_t end) {
    Positions p;
    for (int64_t i = begin; i < end; ++i) p.push_back(i);
    return p;
}

// Two sequences of 5 tokens, GQA with 4 query heads on 2 kv heads.
inline AttentionCase gqaCase() { return {2, 4, 2, 4, iota(0, 5), iota(0, 5)}; }
// A query block at positions 8..15 against keys 0..15 (context parallelism), GQA, two sequences.
inline AttentionCase offsetCase() { return {2, 4, 2, 4, iota(8, 16), iota(0, 16)}; }

// Mean over rows of log sum_j exp(l_ij) - l_i,target for logits [n, V].
inline double crossEntropyReference(const Values& logits, const std::vector<int32_t>& targets, int64_t n,
                                    int64_t vocab) {
    double loss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const auto row = logits.begin() + i * vocab;
        const double m = *std::max_element(row, row + vocab);
        double sum = 0.0;
        for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
        loss += m + std::log(sum) - row[targets[static_cast<size_t>(i)]];
    }
    return loss / static_cast<double>(n);
}

// Columns [begin, end) of a row-major [n, c] matrix.
inline Values columns(const Values& x, int64_t n, int64_t c, int64_t begin, int64_t end) {
    Values out;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = begin; j < end; ++j) out.push_back(x[static_cast<size_t>(i * c + j)]);
    return out;
}

inline std::unique_ptr<Backend> f64() { return makeCpuBackend(ElementType::F64); }

struct AttentionGradients {
    Values dq, dk, dv;
};

// Runs forward then backward with dout = w, dk and dv starting from `dkvStart`.
inline AttentionGradients attentionGradients(Backend& b, const AttentionCase& a, const Values& qv,
                                             const Values& kv, const Values& vv, const Values& w,
                                             double dkvStart, const ScoreRule& rule = {}) {
    Tensor q = make(b, a.qShape(), qv), k = make(b, a.kShape(), kv), v = make(b, a.kShape(), vv);
    Tensor o = b.empty(a.qShape(), MemoryCategory::Activations), lse = b.empty(a.lseShape(), MemoryCategory::Activations);
    b.attentionForward(q, k, v, a.sequences, a.queryPositions, a.keyPositions, o, lse, rule);
    Tensor dq = filled(b, a.qShape(), std::numeric_limits<double>::quiet_NaN());
    Tensor dk = filled(b, a.kShape(), dkvStart), dv = filled(b, a.kShape(), dkvStart);
    b.attentionBackward(make(b, a.qShape(), w), q, k, v, o, lse, a.sequences, a.queryPositions, a.keyPositions, dq,
                        dk, dv, rule);
    return {b.download(dq), b.download(dk), b.download(dv)};
}

} // namespace tessel::exec::test::cpu_backend
