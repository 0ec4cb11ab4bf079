// Tests of the CPU backend's forward ops against naive references, for float64 (1e-12) and float32 (1e-4).
#include "tessel/exec/cpu_backend.hpp"

#include "cpu_backend_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessel::exec::test::cpu_backend {
namespace {

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

// x [n, 2f] -> silu(x[:, :f]) * x[:, f:]  [n, f] (SwiGLU), or gelu(x[:, :f]) * x[:, f:] (GeGLU)
Values gluReference(const Values& x, int64_t n, int64_t f, bool gelu) {
    Values y(static_cast<size_t>(n * f));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < f; ++j) {
            const double g = x[static_cast<size_t>(i * 2 * f + j)], u = x[static_cast<size_t>(i * 2 * f + f + j)];
            y[static_cast<size_t>(i * f + j)] = (gelu ? geluReference(g) : g / (1.0 + std::exp(-g))) * u;
        }
    return y;
}

// HF Llama apply_rotary_pos_emb: emb = cat(freqs, freqs), out = x cos(emb) + rotate_half(x) sin(emb),
// rotate_half(x) = cat(-x2, x1), freqs = pos / base^(2i/d). x [tokens, heads, d].
// transformers' apply_rotary_pos_emb as GPT-NeoX and Phi-3 write it: the first r columns of each head become
// x cos(emb) + rotate_half(x) sin(emb) with emb = cat(freqs, freqs), freqs_i = pos / base^(2i/r); the rest pass.
Values ropeReference(const Values& x, const Positions& pos, int64_t heads, int64_t d, int64_t r, double base) {
    Values y(x);
    const int64_t half = r / 2;
    for (size_t t = 0; t < pos.size(); ++t)
        for (int64_t h = 0; h < heads; ++h) {
            const size_t off = (t * static_cast<size_t>(heads) + static_cast<size_t>(h)) * static_cast<size_t>(d);
            for (int64_t c = 0; c < r; ++c) {
                const int64_t i = c % half;
                const double emb = static_cast<double>(pos[t]) / std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(r));
                const double rotated = c < half ? -x[off + static_cast<size_t>(c + half)] : x[off + static_cast<size_t>(c - half)];
                y[off + static_cast<size_t>(c)] = x[off + static_cast<size_t>(c)] * std::cos(emb) + rotated * std::sin(emb);
            }
        }
    return y;
}

struct AttentionReference {
    Values o, lse;
};

// ALiBi's slopes as the paper's code writes them (Press, Smith & Lewis 2022, github.com/ofirpress/attention_with_linear_biases,
// get_slopes): a geometric sequence from 2^(-2^-(log2 n - 3)) for n a power of two; otherwise that of the closest
// smaller power of two, then every other slope of twice it.
Values pressSlopes(int64_t n) {
    auto powerOfTwo = [](int64_t m) {
        const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3.0)));
        Values out;
        for (int64_t i = 0; i < m; ++i) out.push_back(start * std::pow(start, static_cast<double>(i)));
        return out;
    };
    const double l = std::log2(static_cast<double>(n));
    if (l == std::floor(l)) return powerOfTwo(n);
    const auto closest = static_cast<int64_t>(std::pow(2.0, std::floor(l)));
    Values out = powerOfTwo(closest);
    const Values twice = pressSlopes(2 * closest);
    for (size_t i = 0; i < twice.size() && static_cast<int64_t>(out.size()) < n; i += 2) out.push_back(twice[i]);
    return out;
}

TEST(ScoreRule, AlibiSlopesAreThePapers) {
    EXPECT_DOUBLE_EQ(alibiSlope(0, 8), 0.5);         // 2^-1 .. 2^-8 over 8 heads
    EXPECT_DOUBLE_EQ(alibiSlope(7, 8), 1.0 / 256.0);
    EXPECT_DOUBLE_EQ(alibiSlope(8, 12), std::pow(2.0, -0.5)); // 12 heads: 8 of the 8-sequence, then 2^-0.5, 2^-1.5, ...
    EXPECT_DOUBLE_EQ(alibiSlope(9, 12), std::pow(2.0, -1.5));
    for (int64_t n : {1, 2, 5, 12, 16, 40, 96, 112}) {   // 112: BLOOM-176B's heads
        const Values press = pressSlopes(n);
        ASSERT_EQ(static_cast<int64_t>(press.size()), n);
        for (int64_t h = 0; h < n; ++h) EXPECT_NEAR(alibiSlope(h, n), press[static_cast<size_t>(h)], 1e-15) << n << " " << h;
    }
}

TEST(ScoreRule, AWindowKeepsItselfAndTheKeysBeforeIt) {
    EXPECT_TRUE(keyVisible(0, 0, 9));    // no window: the causal prefix
    EXPECT_FALSE(keyVisible(0, 10, 9));
    EXPECT_TRUE(keyVisible(3, 9, 9));    // window 3: positions 7, 8, 9
    EXPECT_TRUE(keyVisible(3, 7, 9));
    EXPECT_FALSE(keyVisible(3, 6, 9));
    EXPECT_FALSE(keyVisible(3, 10, 9));
    EXPECT_FALSE(ScoreRule{}.changesScores());
}

// Full masked score matrix per (sequence, head), softmax over each row: o = softmax(q k^T / sqrt(d) + bias) v, the
// mask causal and windowed, the bias ALiBi's from the paper's slopes; no soft-cap.
AttentionReference attentionReference(const AttentionCase& a, const Values& q, const Values& k, const Values& v,
                                      int64_t window = 0, int64_t alibiHeads = 0, int64_t headOffset = 0) {
    const Values slopes = alibiHeads > 0 ? pressSlopes(alibiHeads) : Values{};
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
                    const int64_t kp = a.keyPositions[static_cast<size_t>(j)], qp = a.queryPositions[static_cast<size_t>(i)];
                    if (kp > qp || (window > 0 && kp <= qp - window)) continue;
                    const auto kj = static_cast<size_t>(((s * skv + j) * a.hkv + g) * a.d);
                    double sc = 0.0;
                    for (int64_t c = 0; c < a.d; ++c) sc += q[qi + static_cast<size_t>(c)] * k[kj + static_cast<size_t>(c)];
                    const double bias = slopes.empty() ? 0.0 : -slopes[static_cast<size_t>(headOffset + h)] * static_cast<double>(qp - kp);
                    scores[static_cast<size_t>(j)] = sc / std::sqrt(static_cast<double>(a.d)) + bias;
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

TYPED_TEST(CpuBackendTyped, GeluAndGatedForwardMatchReference) {
    Backend& b = *this->backend;
    const Values xv = randomValues(24, 11, -4.0, 4.0);
    Tensor x = make(b, {4, 6}, xv), y = b.empty({4, 6}, MemoryCategory::Activations);
    b.activationForward(x, y, Pointwise::Gelu);
    Values expected(xv.size());
    std::transform(xv.begin(), xv.end(), expected.begin(), geluReference);
    EXPECT_LT(relativeError(b.download(y), expected), this->kTolerance);
    b.activationForward(x, y, Pointwise::SquaredRelu);                       // max(0, x)^2
    std::transform(xv.begin(), xv.end(), expected.begin(), [](double v) { return v > 0.0 ? v * v : 0.0; });
    EXPECT_LT(relativeError(b.download(y), expected), this->kTolerance);

    Tensor ys = b.empty({4, 3}, MemoryCategory::Activations);  // x [4, 6] = [gate | up] -> [4, 3]
    for (const bool gelu : {false, true}) {
        b.gluForward(x, ys, gelu ? Pointwise::Gelu : Pointwise::Silu);
        EXPECT_LT(relativeError(b.download(ys), gluReference(xv, 4, 3, gelu)), this->kTolerance) << gelu;
    }
}

TYPED_TEST(CpuBackendTyped, RopeMatchesReferenceAndInverseIsIdentity) {
    Backend& b = *this->backend;
    const int64_t tokens = 6, heads = 3, d = 8;
    const Positions pos = {0, 1, 2, 7, 8, 100};
    const Values xv = randomValues(count({tokens, heads, d}), 12);
    const Values stored = b.download(make(b, {tokens, heads, d}, xv));  // xv in the backend's type
    for (const int64_t rotated : {d, int64_t{4}, int64_t{2}}) {  // the whole head, then partial rotaries
        Tensor x = make(b, {tokens, heads, d}, xv);  // x [tokens, heads, d]
        b.rope(x, pos, 10000.0, rotated, false);
        const Values y = b.download(x);
        EXPECT_LT(relativeError(y, ropeReference(xv, pos, heads, d, rotated, 10000.0)), this->kTolerance) << rotated;
        for (size_t c = static_cast<size_t>(rotated); c < static_cast<size_t>(d); ++c)
            EXPECT_EQ(y[c], stored[c]) << "column " << c << " of the first head is past the rotated " << rotated;
        b.rope(x, pos, 10000.0, rotated, true);
        EXPECT_LT(relativeError(b.download(x), xv), this->kTolerance) << rotated;
    }
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
        // A sliding window of 3 keys, ALiBi over the call's heads, and the second half of 2 hq heads (TP rank 1 of
        // 2) with a window of 2.
        struct Rule {
            int64_t window, heads, offset;
        };
        for (const Rule& rl : {Rule{3, 0, 0}, Rule{0, a.hq, 0}, Rule{2, 2 * a.hq, a.hq}}) {
            ScoreRule rule;
            rule.window = rl.window;
            rule.alibiHeads = rl.heads;
            rule.headOffset = rl.offset;
            b.attentionForward(q, k, v, a.sequences, a.queryPositions, a.keyPositions, o, lse, rule);
            const AttentionReference ruled = attentionReference(a, qv, kv, vv, rl.window, rl.heads, rl.offset);
            const std::string what = "hq " + std::to_string(a.hq) + " sq " + std::to_string(a.sq()) + " window " +
                                     std::to_string(rl.window) + " alibi " + std::to_string(rl.heads);
            EXPECT_LT(relativeError(b.download(o), ruled.o), this->kTolerance) << what;
            EXPECT_LT(relativeError(b.download(lse), ruled.lse), this->kTolerance) << what;
            EXPECT_GT(relativeError(ruled.o, r.o), 1e-3) << what << ": the rule changes nothing here";
        }
    }
}

// One query at position 1 over keys at 0 and 1 with equal q . k: ALiBi's slope s on the one head of one moves the
// weights from 1/2 each to 1 / (1 + e^s) and e^s / (1 + e^s), with s = 2^-8; on head 0 of 8, s = 1/2. A window of 1
// leaves the query its own key.
TEST(CpuBackendAttention, AlibiAndWindowOnTwoKeysByHand) {
    auto b = f64();
    const AttentionCase a{1, 1, 1, 2, {1}, {0, 1}};
    Tensor q = make(*b, a.qShape(), {0.0, 0.0}), k = make(*b, a.kShape(), {0.3, -0.2, 0.3, -0.2});
    Tensor v = make(*b, a.kShape(), {1.0, 0.0, 0.0, 1.0});
    Tensor o = b->empty(a.qShape(), MemoryCategory::Activations), lse = b->empty(a.lseShape(), MemoryCategory::Activations);
    for (const auto& [heads, s] : {std::pair<int64_t, double>{1, 1.0 / 256.0}, {8, 0.5}}) {
        ScoreRule rule;
        rule.alibiHeads = heads;
        b->attentionForward(q, k, v, 1, a.queryPositions, a.keyPositions, o, lse, rule);
        const Values out = b->download(o);
        EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(s)), 1e-15) << heads;   // key 0's weight, its bias -s
        EXPECT_NEAR(out[1], std::exp(s) / (1.0 + std::exp(s)), 1e-15) << heads;
    }
    ScoreRule window;
    window.window = 1;
    b->attentionForward(q, k, v, 1, a.queryPositions, a.keyPositions, o, lse, window);
    EXPECT_EQ(b->download(o), (Values{0.0, 1.0}));
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

} // namespace
} // namespace tessel::exec::test::cpu_backend
