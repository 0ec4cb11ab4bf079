// Tests of the CPU backend: ops vs naive references, backwards vs finite differences, float32 bands, checks.
#include "tessel/exec/cpu_backend.hpp"

#include "tessel/cost/errors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel {
namespace {

using exec::Backend;
using exec::ElementType;
using exec::makeCpuBackend;
using exec::MemoryCategory;
using exec::Tensor;
using Values = std::vector<double>;
using Positions = std::vector<int64_t>;

// ---------------------------------------------------------------------------------------------------------
// Helpers

Values randomValues(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    Values v(n);
    for (auto& x : v) x = dist(gen);
    return v;
}

size_t count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return static_cast<size_t>(n);
}

Tensor make(Backend& b, const std::vector<int64_t>& shape, const Values& values,
            MemoryCategory category = MemoryCategory::Activations) {
    Tensor t = b.empty(shape, category);
    b.upload(values, t);
    return t;
}

Tensor filled(Backend& b, const std::vector<int64_t>& shape, double value) {
    Tensor t = b.empty(shape, MemoryCategory::Activations);
    b.fill(t, value);
    return t;
}

double dot(const Values& a, const Values& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

double norm(const Values& a) { return std::sqrt(dot(a, a)); }

// ||a - b|| / max(||a||, ||b||): the norm-wise relative error (0 for two zero vectors).
double relativeError(const Values& a, const Values& b) {
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
    Values d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    const double scale = std::max(norm(a), norm(b));
    return scale == 0.0 ? 0.0 : norm(d) / scale;
}

Values subtract(const Values& a, const Values& b) {
    Values d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    return d;
}

// Central finite differences: g_i = (f(x + h e_i) - f(x - h e_i)) / 2h.
Values finiteDifference(const std::function<double(const Values&)>& f, Values x, double h = 1e-5) {
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

constexpr double kFiniteDifferenceTolerance = 1e-6;

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
// Naive references (written independently of the backend: whole score matrices, explicit loops)

// C [m, n] = alpha op(A) op(B) + beta C, A stored [ar, ac], B stored [br, bc].
Values gemmReference(bool ta, bool tb, double alpha, const Values& a, int64_t ar, int64_t ac, const Values& b,
                     int64_t br, int64_t bc, double beta, const Values& c) {
    const int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
    Values out(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (int64_t p = 0; p < k; ++p) {
                const double av = ta ? a[static_cast<size_t>(p * ac + i)] : a[static_cast<size_t>(i * ac + p)];
                const double bv = tb ? b[static_cast<size_t>(j * bc + p)] : b[static_cast<size_t>(p * bc + j)];
                s += av * bv;
            }
            const size_t o = static_cast<size_t>(i * n + j);
            out[o] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[o]);
        }
    return out;
}

struct NormReference {
    Values y, mean, rstd;
};

// x [n, c]; LayerNorm y = (x - mean) / sqrt(var + eps) * gamma + beta, RMSNorm y = x / sqrt(mean(x^2) + eps) * gamma.
NormReference normReference(const Values& x, const Values& gamma, const Values* beta, bool rms, double eps,
                            int64_t n, int64_t c) {
    NormReference r{Values(x.size()), Values(static_cast<size_t>(n)), Values(static_cast<size_t>(n))};
    for (int64_t i = 0; i < n; ++i) {
        const auto row = x.begin() + i * c;
        double mu = 0.0;
        if (!rms) mu = std::accumulate(row, row + c, 0.0) / static_cast<double>(c);
        double second = 0.0;
        for (int64_t j = 0; j < c; ++j) second += (row[j] - mu) * (row[j] - mu);
        const double denom = std::sqrt(second / static_cast<double>(c) + eps);
        for (int64_t j = 0; j < c; ++j) {
            double v = (row[j] - mu) / denom * gamma[static_cast<size_t>(j)];
            if (beta) v += (*beta)[static_cast<size_t>(j)];
            r.y[static_cast<size_t>(i * c + j)] = v;
        }
        r.mean[static_cast<size_t>(i)] = mu;
        r.rstd[static_cast<size_t>(i)] = 1.0 / denom;
    }
    return r;
}

double geluReference(double x) {
    const double pi = std::acos(-1.0);
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// x [n, 2f] -> silu(x[:, :f]) * x[:, f:]  [n, f]
Values swigluReference(const Values& x, int64_t n, int64_t f) {
    Values y(static_cast<size_t>(n * f));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < f; ++j) {
            const double g = x[static_cast<size_t>(i * 2 * f + j)], u = x[static_cast<size_t>(i * 2 * f + f + j)];
            y[static_cast<size_t>(i * f + j)] = g / (1.0 + std::exp(-g)) * u;
        }
    return y;
}

// HF Llama apply_rotary_pos_emb: emb = cat(freqs, freqs), out = x cos(emb) + rotate_half(x) sin(emb),
// rotate_half(x) = cat(-x2, x1), freqs = pos / base^(2i/d). x [tokens, heads, d].
Values ropeReference(const Values& x, const Positions& pos, int64_t heads, int64_t d, double base) {
    Values y(x.size());
    const int64_t half = d / 2;
    for (size_t t = 0; t < pos.size(); ++t)
        for (int64_t h = 0; h < heads; ++h) {
            const size_t off = (t * static_cast<size_t>(heads) + static_cast<size_t>(h)) * static_cast<size_t>(d);
            for (int64_t c = 0; c < d; ++c) {
                const int64_t i = c % half;
                const double emb = static_cast<double>(pos[t]) / std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(d));
                const double rotated = c < half ? -x[off + static_cast<size_t>(c + half)] : x[off + static_cast<size_t>(c - half)];
                y[off + static_cast<size_t>(c)] = x[off + static_cast<size_t>(c)] * std::cos(emb) + rotated * std::sin(emb);
            }
        }
    return y;
}

struct AttentionCase {
    int64_t sequences, hq, hkv, d;
    Positions queryPositions, keyPositions;
    int64_t sq() const { return static_cast<int64_t>(queryPositions.size()); }
    int64_t skv() const { return static_cast<int64_t>(keyPositions.size()); }
    std::vector<int64_t> qShape() const { return {sequences * sq(), hq, d}; }
    std::vector<int64_t> kShape() const { return {sequences * skv(), hkv, d}; }
    std::vector<int64_t> lseShape() const { return {sequences * sq(), hq}; }
};

struct AttentionReference {
    Values o, lse;
};

// Full masked score matrix per (sequence, head), softmax over each row: o = softmax(q k^T / sqrt(d)) v.
AttentionReference attentionReference(const AttentionCase& a, const Values& q, const Values& k, const Values& v) {
    AttentionReference r{Values(count(a.qShape())), Values(count(a.lseShape()))};
    const double inf = std::numeric_limits<double>::infinity();
    const int64_t sq = a.sq(), skv = a.skv();
    for (int64_t s = 0; s < a.sequences; ++s)
        for (int64_t h = 0; h < a.hq; ++h) {
            const int64_t g = h / (a.hq / a.hkv);
            for (int64_t i = 0; i < sq; ++i) {
                Values scores(static_cast<size_t>(skv), -inf);
                const auto qi = static_cast<size_t>(((s * sq + i) * a.hq + h) * a.d);
                for (int64_t j = 0; j < skv; ++j) {
                    if (a.keyPositions[static_cast<size_t>(j)] > a.queryPositions[static_cast<size_t>(i)]) continue;
                    const auto kj = static_cast<size_t>(((s * skv + j) * a.hkv + g) * a.d);
                    double sc = 0.0;
                    for (int64_t c = 0; c < a.d; ++c) sc += q[qi + static_cast<size_t>(c)] * k[kj + static_cast<size_t>(c)];
                    scores[static_cast<size_t>(j)] = sc / std::sqrt(static_cast<double>(a.d));
                }
                const double m = *std::max_element(scores.begin(), scores.end());
                double sum = 0.0;
                for (double sc : scores) sum += std::exp(sc - m);
                for (int64_t c = 0; c < a.d; ++c) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < skv; ++j) {
                        const auto kj = static_cast<size_t>(((s * skv + j) * a.hkv + g) * a.d);
                        acc += std::exp(scores[static_cast<size_t>(j)] - m) / sum * v[kj + static_cast<size_t>(c)];
                    }
                    r.o[qi + static_cast<size_t>(c)] = acc;
                }
                r.lse[static_cast<size_t>((s * sq + i) * a.hq + h)] = m + std::log(sum);
            }
        }
    return r;
}

Positions iota(int64_t begin, int64_t end) {
    Positions p;
    for (int64_t i = begin; i < end; ++i) p.push_back(i);
    return p;
}

// Two sequences of 5 tokens, GQA with 4 query heads on 2 kv heads.
AttentionCase gqaCase() { return {2, 4, 2, 4, iota(0, 5), iota(0, 5)}; }
// A query block at positions 8..15 against keys 0..15 (context parallelism), GQA, two sequences.
AttentionCase offsetCase() { return {2, 4, 2, 4, iota(8, 16), iota(0, 16)}; }

// Mean over rows of log sum_j exp(l_ij) - l_i,target for logits [n, V].
double crossEntropyReference(const Values& logits, const std::vector<int32_t>& targets, int64_t n, int64_t vocab) {
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
Values columns(const Values& x, int64_t n, int64_t c, int64_t begin, int64_t end) {
    Values out;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = begin; j < end; ++j) out.push_back(x[static_cast<size_t>(i * c + j)]);
    return out;
}

// ---------------------------------------------------------------------------------------------------------
// Forward ops against the references, for float64 (1e-12) and float32 (1e-4)

template <typename T>
class CpuBackendTyped : public ::testing::Test {
protected:
    static constexpr ElementType kType = std::is_same_v<T, double> ? ElementType::F64 : ElementType::F32;
    static constexpr double kTolerance = std::is_same_v<T, double> ? 1e-12 : 1e-4;
    std::unique_ptr<Backend> backend = makeCpuBackend(kType);
};
using ElementTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(CpuBackendTyped, ElementTypes);

TYPED_TEST(CpuBackendTyped, ReportsItsType) {
    EXPECT_EQ(this->backend->elementType(), this->kType);
    EXPECT_EQ(this->backend->name(), "cpu");
}

TYPED_TEST(CpuBackendTyped, GemmAllTransposeCombinations) {
    Backend& b = *this->backend;
    for (auto [m, k, n] : {std::array<int64_t, 3>{3, 4, 5}, std::array<int64_t, 3>{33, 47, 29}})
        for (bool ta : {false, true})
            for (bool tb : {false, true}) {
                const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
                const Values av = randomValues(static_cast<size_t>(m * k), 1), bv = randomValues(static_cast<size_t>(k * n), 2);
                const Values cv = randomValues(static_cast<size_t>(m * n), 3);
                Tensor a = make(b, {ar, ac}, av), bt = make(b, {br, bc}, bv), c = make(b, {m, n}, cv);
                b.gemm(ta, tb, 0.7, a, bt, 0.3, c);  // c [m, n]
                EXPECT_LT(relativeError(b.download(c), gemmReference(ta, tb, 0.7, av, ar, ac, bv, br, bc, 0.3, cv)),
                          this->kTolerance)
                    << "transA " << ta << " transB " << tb << " m " << m;
            }
}

TYPED_TEST(CpuBackendTyped, GemmBetaZeroIgnoresNanInOutput) {
    Backend& b = *this->backend;
    const Values av = randomValues(12, 4), bv = randomValues(20, 5);
    Tensor a = make(b, {3, 4}, av), bt = make(b, {4, 5}, bv);
    Tensor c = filled(b, {3, 5}, std::numeric_limits<double>::quiet_NaN());  // c [3, 5]
    b.gemm(false, false, 1.5, a, bt, 0.0, c);
    const Values out = b.download(c);
    for (double x : out) EXPECT_FALSE(std::isnan(x));
    EXPECT_LT(relativeError(out, gemmReference(false, false, 1.5, av, 3, 4, bv, 4, 5, 0.0, Values(15, 0.0))),
              this->kTolerance);
}

TYPED_TEST(CpuBackendTyped, AddBiasAndBiasGrad) {
    Backend& b = *this->backend;
    const Values xv = randomValues(12, 6), biasv = randomValues(4, 7);
    Tensor x = make(b, {3, 4}, xv), bias = make(b, {4}, biasv);  // x [3, 4], bias [4]
    b.addBias(x, bias);
    Values expected = xv;
    for (size_t i = 0; i < 12; ++i) expected[i] += biasv[i % 4];
    EXPECT_LT(relativeError(b.download(x), expected), this->kTolerance);

    Tensor dbias = make(b, {4}, {1.0, 2.0, 3.0, 4.0});  // dbias [4] += column sums
    b.biasGrad(make(b, {3, 4}, xv), dbias);
    Values sums = {1.0, 2.0, 3.0, 4.0};
    for (size_t i = 0; i < 12; ++i) sums[i % 4] += xv[i];
    EXPECT_LT(relativeError(b.download(dbias), sums), this->kTolerance);

    Tensor rowBias = make(b, {1, 4}, biasv);  // a bias stored as one row [1, 4] is accepted too
    Tensor x2 = make(b, {3, 4}, xv);
    b.addBias(x2, rowBias);
    EXPECT_LT(relativeError(b.download(x2), expected), this->kTolerance);
    b.fill(rowBias, 0.0);
    b.biasGrad(make(b, {3, 4}, xv), rowBias);
    EXPECT_LT(relativeError(b.download(rowBias), subtract(sums, {1.0, 2.0, 3.0, 4.0})), this->kTolerance);
}

TYPED_TEST(CpuBackendTyped, NormForwardMatchesReference) {
    Backend& b = *this->backend;
    const int64_t n = 4, c = 6;
    const Values xv = randomValues(24, 8, -2.0, 3.0), gv = randomValues(6, 9, 0.5, 1.5), bv = randomValues(6, 10);
    for (int variant = 0; variant < 3; ++variant) {
        const bool rms = variant == 2, withBeta = variant == 0;
        Tensor x = make(b, {n, c}, xv), gamma = make(b, {c}, gv);
        Tensor beta = withBeta ? make(b, {c}, bv) : Tensor();
        Tensor y = b.empty({n, c}, MemoryCategory::Activations), mean = b.empty({n}, MemoryCategory::Activations),
               rstd = b.empty({n}, MemoryCategory::Activations);
        b.normForward(x, gamma, beta, rms, 1e-5, y, mean, rstd);
        const NormReference r = normReference(xv, gv, withBeta ? &bv : nullptr, rms, 1e-5, n, c);
        EXPECT_LT(relativeError(b.download(y), r.y), this->kTolerance) << "variant " << variant;
        EXPECT_LT(relativeError(b.download(rstd), r.rstd), this->kTolerance) << "variant " << variant;
        if (!rms) {
            EXPECT_LT(relativeError(b.download(mean), r.mean), this->kTolerance) << "variant " << variant;
        }
    }
}

TYPED_TEST(CpuBackendTyped, GeluAndSwigluForwardMatchReference) {
    Backend& b = *this->backend;
    const Values xv = randomValues(24, 11, -4.0, 4.0);
    Tensor x = make(b, {4, 6}, xv), y = b.empty({4, 6}, MemoryCategory::Activations);
    b.geluForward(x, y);
    Values expected(xv.size());
    std::transform(xv.begin(), xv.end(), expected.begin(), geluReference);
    EXPECT_LT(relativeError(b.download(y), expected), this->kTolerance);

    Tensor ys = b.empty({4, 3}, MemoryCategory::Activations);  // x [4, 6] = [gate | up] -> [4, 3]
    b.swigluForward(x, ys);
    EXPECT_LT(relativeError(b.download(ys), swigluReference(xv, 4, 3)), this->kTolerance);
}

TYPED_TEST(CpuBackendTyped, RopeMatchesReferenceAndInverseIsIdentity) {
    Backend& b = *this->backend;
    const int64_t tokens = 6, heads = 3, d = 8;
    const Positions pos = {0, 1, 2, 7, 8, 100};
    const Values xv = randomValues(count({tokens, heads, d}), 12);
    Tensor x = make(b, {tokens, heads, d}, xv);  // x [tokens, heads, d]
    b.rope(x, pos, 10000.0, false);
    EXPECT_LT(relativeError(b.download(x), ropeReference(xv, pos, heads, d, 10000.0)), this->kTolerance);
    b.rope(x, pos, 10000.0, true);
    EXPECT_LT(relativeError(b.download(x), xv), this->kTolerance);
}

TYPED_TEST(CpuBackendTyped, AttentionForwardMatchesReference) {
    Backend& b = *this->backend;
    const AttentionCase mha{1, 2, 2, 4, iota(0, 6), iota(0, 6)};
    for (const AttentionCase& a : {mha, gqaCase(), offsetCase()}) {
        const Values qv = randomValues(count(a.qShape()), 13, -2.0, 2.0);
        const Values kv = randomValues(count(a.kShape()), 14, -2.0, 2.0), vv = randomValues(count(a.kShape()), 15);
        Tensor q = make(b, a.qShape(), qv), k = make(b, a.kShape(), kv), v = make(b, a.kShape(), vv);
        Tensor o = b.empty(a.qShape(), MemoryCategory::Activations), lse = b.empty(a.lseShape(), MemoryCategory::Activations);
        b.attentionForward(q, k, v, a.sequences, a.queryPositions, a.keyPositions, o, lse);
        const AttentionReference r = attentionReference(a, qv, kv, vv);
        EXPECT_LT(relativeError(b.download(o), r.o), this->kTolerance) << "hq " << a.hq << " sq " << a.sq();
        EXPECT_LT(relativeError(b.download(lse), r.lse), this->kTolerance) << "hq " << a.hq << " sq " << a.sq();
    }
}

TYPED_TEST(CpuBackendTyped, EmbeddingForwardTakesRowsOfItsShard) {
    Backend& b = *this->backend;
    const int64_t vocabBegin = 4, vocabLocal = 5, h = 3;
    const std::vector<int32_t> tokens = {0, 4, 8, 9, 5, 5, 12};
    const Values tv = randomValues(static_cast<size_t>(vocabLocal * h), 16);
    Tensor table = make(b, {vocabLocal, h}, tv, MemoryCategory::Weights);  // table [vocabLocal, h]
    Tensor out = filled(b, {7, h}, 99.0);                                  // out [n, h]
    b.embeddingForward(tokens, table, vocabBegin, out);
    Values expected;
    for (int32_t t : tokens)
        for (int64_t c = 0; c < h; ++c)
            expected.push_back(t >= vocabBegin && t < vocabBegin + vocabLocal ? tv[static_cast<size_t>((t - vocabBegin) * h + c)] : 0.0);
    EXPECT_LT(relativeError(b.download(out), expected), this->kTolerance);
}

TYPED_TEST(CpuBackendTyped, CrossEntropyPiecesAssembleTheLoss) {
    Backend& b = *this->backend;
    const int64_t n = 4, vocab = 10, split = 6;
    const std::vector<int32_t> targets = {1, 7, 5, 9};
    const Values lv = randomValues(static_cast<size_t>(n * vocab), 17, -3.0, 3.0);
    // Two vocab shards [0, 6) and [6, 10), as Megatron-LM's vocab_parallel_cross_entropy.
    Tensor left = make(b, {n, split}, columns(lv, n, vocab, 0, split));
    Tensor right = make(b, {n, vocab - split}, columns(lv, n, vocab, split, vocab));
    Values mx = b.rowMax(left);
    const Values mr = b.rowMax(right);
    for (size_t i = 0; i < mx.size(); ++i) mx[i] = std::max(mx[i], mr[i]);  // all-reduce max
    const Values sl = b.rowSumExp(left, mx), sr = b.rowSumExp(right, mx);
    const Values tl = b.targetLogits(left, targets, 0), tr = b.targetLogits(right, targets, split);
    double loss = 0.0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) loss += mx[i] + std::log(sl[i] + sr[i]) - (tl[i] + tr[i]);
    loss /= static_cast<double>(n);
    EXPECT_NEAR(loss, crossEntropyReference(lv, targets, n, vocab), this->kTolerance * std::abs(loss));
    EXPECT_EQ(tl[1], 0.0);  // target 7 lies in the right shard
    EXPECT_EQ(tr[0], 0.0);  // target 1 lies in the left shard
}

TYPED_TEST(CpuBackendTyped, AdamwOneStepMatchesHandComputedValues) {
    Backend& b = *this->backend;
    // Element 0: p = 1, g = 0.5, m = v = 0, lr = 0.1, betas (0.9, 0.999), eps 1e-8, wd 0.01, step 1:
    // m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, p = 1 (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8) = 0.899000002.
    // Element 1 starts from m = 0.1, v = 0.2 at step 3, checked against the textbook formula.
    Tensor p = make(b, {2}, {1.0, -0.5}, MemoryCategory::Weights), g = make(b, {2}, {0.5, -2.0}, MemoryCategory::Grads);
    Tensor m = make(b, {2}, {0.0, 0.1}, MemoryCategory::Optimizer), v = make(b, {2}, {0.0, 0.2}, MemoryCategory::Optimizer);
    b.adamw(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.01, 1);
    const Values pv = b.download(p), mv = b.download(m), vv = b.download(v);
    const double tol = this->kTolerance;
    EXPECT_NEAR(pv[0], 0.899000002, tol);
    EXPECT_NEAR(mv[0], 0.05, tol * 0.05);
    EXPECT_NEAR(vv[0], 0.00025, tol * 0.00025);

    Tensor p3 = make(b, {1}, {-0.5}), g3 = make(b, {1}, {-2.0}), m3 = make(b, {1}, {0.1}), v3 = make(b, {1}, {0.2});
    b.adamw(p3, g3, m3, v3, 0.01, 0.9, 0.95, 1e-6, 0.1, 3);
    const double m1 = 0.9 * 0.1 + 0.1 * -2.0, v1 = 0.95 * 0.2 + 0.05 * 4.0;
    const double mhat = m1 / (1.0 - std::pow(0.9, 3)), vhat = v1 / (1.0 - std::pow(0.95, 3));
    const double expected = -0.5 - 0.01 * (mhat / (std::sqrt(vhat) + 1e-6) + 0.1 * -0.5);
    EXPECT_NEAR(b.download(p3)[0], expected, tol * std::abs(expected));
    EXPECT_NEAR(b.download(m3)[0], m1, tol * std::abs(m1));
    EXPECT_NEAR(b.download(v3)[0], v1, tol * std::abs(v1));
}

TYPED_TEST(CpuBackendTyped, CopiesFillScaleAddAndSumSquares) {
    Backend& b = *this->backend;
    Tensor src = make(b, {5, 4}, randomValues(20, 18));  // src [5, 4]
    const Values sv = b.download(src);                    // as stored (rounded to float32 there)

    Tensor rows = b.empty({2, 4}, MemoryCategory::Buffers);  // rows 1..2
    b.copyRows(src, 1, rows);
    EXPECT_EQ(b.download(rows), Values(sv.begin() + 4, sv.begin() + 12));

    Tensor whole = filled(b, {5, 4}, 0.0);
    b.copyRowsInto(rows, whole, 3);  // rows 3..4 of whole
    const Values w = b.download(whole);
    EXPECT_EQ(Values(w.begin() + 12, w.end()), Values(sv.begin() + 4, sv.begin() + 12));
    EXPECT_EQ(Values(w.begin(), w.begin() + 12), Values(12, 0.0));

    Tensor cols = b.empty({5, 2}, MemoryCategory::Buffers);  // columns 1..2
    b.copyColumns(src, 1, cols);
    EXPECT_EQ(b.download(cols), columns(sv, 5, 4, 1, 3));

    Tensor acc = filled(b, {5, 4}, 1.0);
    b.addColumnsInto(cols, acc, 2);  // acc[:, 2..3] += cols
    const Values av = b.download(acc), cv = b.download(cols);
    for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 4; ++j) {
            const double expected = 1.0 + (j >= 2 ? cv[static_cast<size_t>(i * 2 + j - 2)] : 0.0);
            EXPECT_NEAR(av[static_cast<size_t>(i * 4 + j)], expected, this->kTolerance);
        }

    Tensor copy = b.empty({20}, MemoryCategory::Buffers);  // same size, another shape
    b.copy(src, copy);
    EXPECT_EQ(b.download(copy), b.download(src));
    b.scale(copy, -2.0);
    b.add(src, copy, 3.0);  // copy = -2 src + 3 src = src
    EXPECT_LT(relativeError(b.download(copy), b.download(src)), this->kTolerance);
    b.fill(copy, 0.25);
    EXPECT_EQ(b.download(copy), Values(20, 0.25));

    double ss = 0.0;
    for (double x : b.download(src)) ss += x * x;
    EXPECT_NEAR(b.sumSquares(src), ss, this->kTolerance * ss);
}

// ---------------------------------------------------------------------------------------------------------
// Backward ops against central finite differences (float64)

std::unique_ptr<Backend> f64() { return makeCpuBackend(ElementType::F64); }

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

TEST(CpuBackendGradients, GeluBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const Values xv = randomValues(20, 27, -4.0, 4.0), w = randomValues(20, 28);
    auto loss = [&](const Values& x) {
        Tensor y = b->empty({4, 5}, MemoryCategory::Activations);
        b->geluForward(make(*b, {4, 5}, x), y);
        return dot(b->download(y), w);
    };
    Tensor dx = filled(*b, {4, 5}, std::numeric_limits<double>::quiet_NaN());
    b->geluBackward(make(*b, {4, 5}, w), make(*b, {4, 5}, xv), dx);
    EXPECT_LT(relativeError(b->download(dx), finiteDifference(loss, xv)), kFiniteDifferenceTolerance);
}

TEST(CpuBackendGradients, SwigluBackwardMatchesFiniteDifferences) {
    auto b = f64();
    const Values xv = randomValues(24, 29, -3.0, 3.0), w = randomValues(12, 30);  // x [4, 6], dy [4, 3]
    auto loss = [&](const Values& x) {
        Tensor y = b->empty({4, 3}, MemoryCategory::Activations);
        b->swigluForward(make(*b, {4, 6}, x), y);
        return dot(b->download(y), w);
    };
    Tensor dx = filled(*b, {4, 6}, std::numeric_limits<double>::quiet_NaN());
    b->swigluBackward(make(*b, {4, 3}, w), make(*b, {4, 6}, xv), dx);
    EXPECT_LT(relativeError(b->download(dx), finiteDifference(loss, xv)), kFiniteDifferenceTolerance);
}

TEST(CpuBackendGradients, RopeInverseIsTheBackward) {
    auto b = f64();
    const Positions pos = {3, 4, 5, 9};
    const Values xv = randomValues(count({4, 2, 6}), 31), w = randomValues(count({4, 2, 6}), 32);
    auto loss = [&](const Values& x) {
        Tensor t = make(*b, {4, 2, 6}, x);
        b->rope(t, pos, 500.0, false);
        return dot(b->download(t), w);
    };
    Tensor grad = make(*b, {4, 2, 6}, w);  // dx = rope^-1(dy)
    b->rope(grad, pos, 500.0, true);
    EXPECT_LT(relativeError(b->download(grad), finiteDifference(loss, xv)), kFiniteDifferenceTolerance);
}

struct AttentionGradients {
    Values dq, dk, dv;
};

// Runs forward then backward with dout = w, dk and dv starting from `dkvStart`.
AttentionGradients attentionGradients(Backend& b, const AttentionCase& a, const Values& qv, const Values& kv,
                                      const Values& vv, const Values& w, double dkvStart) {
    Tensor q = make(b, a.qShape(), qv), k = make(b, a.kShape(), kv), v = make(b, a.kShape(), vv);
    Tensor o = b.empty(a.qShape(), MemoryCategory::Activations), lse = b.empty(a.lseShape(), MemoryCategory::Activations);
    b.attentionForward(q, k, v, a.sequences, a.queryPositions, a.keyPositions, o, lse);
    Tensor dq = filled(b, a.qShape(), std::numeric_limits<double>::quiet_NaN());
    Tensor dk = filled(b, a.kShape(), dkvStart), dv = filled(b, a.kShape(), dkvStart);
    b.attentionBackward(make(b, a.qShape(), w), q, k, v, o, lse, a.sequences, a.queryPositions, a.keyPositions, dq,
                        dk, dv);
    return {b.download(dq), b.download(dk), b.download(dv)};
}

TEST(CpuBackendGradients, AttentionBackwardMatchesFiniteDifferences) {
    auto b = f64();
    for (const AttentionCase& a : {gqaCase(), offsetCase()}) {
        const Values qv = randomValues(count(a.qShape()), 33, -2.0, 2.0);
        const Values kv = randomValues(count(a.kShape()), 34, -2.0, 2.0), vv = randomValues(count(a.kShape()), 35);
        const Values w = randomValues(count(a.qShape()), 36);
        auto loss = [&](const Values& q, const Values& k, const Values& v) {
            Tensor o = b->empty(a.qShape(), MemoryCategory::Activations);
            Tensor lse = b->empty(a.lseShape(), MemoryCategory::Activations);
            b->attentionForward(make(*b, a.qShape(), q), make(*b, a.kShape(), k), make(*b, a.kShape(), v), a.sequences,
                                a.queryPositions, a.keyPositions, o, lse);
            return dot(b->download(o), w);
        };
        // dk, dv accumulate onto 0.5.
        const AttentionGradients g = attentionGradients(*b, a, qv, kv, vv, w, 0.5);
        const Values half(count(a.kShape()), 0.5);
        const std::string label = "sq " + std::to_string(a.sq()) + " skv " + std::to_string(a.skv());
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
            b->geluBackward(make(*b, {4, 6}, w), x, dx);
            Values all = b->download(dx);
            b->swigluBackward(make(*b, {4, 3}, w2), x, dx);
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
    expectRuntimeError([&] { b->geluForward(a23, c24); }, "geluForward");
    expectRuntimeError([&] { b->geluBackward(a23, a23, c24); }, "geluBackward");
    expectRuntimeError([&] { b->swigluForward(a23, c24); }, "swigluForward");  // odd columns
    expectRuntimeError([&] { b->swigluForward(c24, c24); }, "swigluForward");  // y must be [2, 2]
    expectRuntimeError([&] { b->swigluBackward(c24, c24, c24); }, "swigluBackward");
    Tensor x3 = t({2, 1, 4}), x3odd = t({2, 1, 3});
    expectRuntimeError([&] { b->rope(x3, {0, 1, 2}, 10000.0, false); }, "rope");
    expectRuntimeError([&] { b->rope(x3odd, {0, 1}, 10000.0, false); }, "rope");
    expectRuntimeError([&] { b->rope(a23, {0, 1}, 10000.0, false); }, "rope");
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
    expectRuntimeError([&] { b64->geluForward(x32, y64); }, "geluForward");
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
} // namespace tessel
