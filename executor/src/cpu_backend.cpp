// The CPU reference backend: every Backend op for float64 and float32, naive loops plus Eigen GEMM.

// Ranks are processes, so Eigen must not start threads of its own (and one thread keeps sums in a fixed order).
#define EIGEN_DONT_PARALLELIZE
#include "tessel/exec/cpu_backend.hpp"

#include "backend_checks.hpp"

#include "tessel/cost/errors.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tessel::exec {
namespace {

constexpr int64_t kAlignmentBytes = 64;

template <typename T>
constexpr ElementType elementTypeOf();
template <>
constexpr ElementType elementTypeOf<double>() { return ElementType::F64; }
template <>
constexpr ElementType elementTypeOf<float>() { return ElementType::F32; }

std::string typeName(ElementType t) { return t == ElementType::F64 ? "f64" : "f32"; }

using detail::rowWidth;

[[noreturn]] void fail(const char* op, const std::string& message) {
    throw RuntimeError(std::string("cpu backend ") + op + ": " + message);
}

// Every loop runs in a fixed order, so results are bitwise reproducible run to run. Element-wise math and
// reductions are carried in float64 (long double for sumSquares) whatever T is, so float32 differs from
// float64 by storage rounding and its GEMM only.
template <typename T>
class CpuBackend final : public Backend, public detail::BackendChecks<CpuBackend<T>> {
    using Checks = detail::BackendChecks<CpuBackend<T>>;
    using Checks::check;
    using Checks::checkBias;
    using Checks::checkShape;
    using Checks::columnBlock;
    using Checks::logitShape;
    using Checks::matrixShape;
    using Checks::rowBlock;
    using Checks::rowVector;
    using Checks::sameNumel;

public:
    static constexpr const char* kCheckName = "cpu backend";
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using MatrixMap = Eigen::Map<Matrix>;
    using ConstMatrixMap = Eigen::Map<const Matrix>;

    std::string name() const override { return "cpu"; }
    ElementType elementType() const override { return elementTypeOf<T>(); }

    void upload(const std::vector<double>& host, Tensor& dst) override {
        check("upload", "dst", dst);
        if (static_cast<int64_t>(host.size()) != dst.numel())
            fail("upload", std::to_string(host.size()) + " host values for a tensor " + dst.shapeString());
        T* p = dst.data<T>();
        for (int64_t i = 0; i < dst.numel(); ++i) p[i] = static_cast<T>(host[static_cast<size_t>(i)]);
    }

    std::vector<double> download(const Tensor& src) override {
        check("download", "src", src);
        const T* p = src.data<T>();
        std::vector<double> host(static_cast<size_t>(src.numel()));
        for (int64_t i = 0; i < src.numel(); ++i) host[static_cast<size_t>(i)] = static_cast<double>(p[i]);
        return host;
    }

    void copy(const Tensor& src, Tensor& dst) override {
        check("copy", "src", src);
        check("copy", "dst", dst);
        sameNumel("copy", src, dst);
        std::memmove(dst.data<T>(), src.data<T>(), static_cast<size_t>(src.numel()) * sizeof(T));
    }

    void fill(Tensor& t, double value) override {
        check("fill", "t", t);
        std::fill_n(t.data<T>(), t.numel(), static_cast<T>(value));
    }

    void add(const Tensor& a, Tensor& inout, double scale) override {
        check("add", "a", a);
        check("add", "inout", inout);
        sameNumel("add", a, inout);
        const T* x = a.data<T>();
        T* y = inout.data<T>();
        // inout += scale * a
        for (int64_t i = 0; i < a.numel(); ++i)
            y[i] = static_cast<T>(static_cast<double>(y[i]) + scale * static_cast<double>(x[i]));
    }

    void scale(Tensor& t, double factor) override {
        check("scale", "t", t);
        T* p = t.data<T>();
        for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(static_cast<double>(p[i]) * factor);
    }

    // src [n, w] rows [rowBegin, rowBegin + r) -> dst [r, w] (higher ranks seen as [dim 0, rest]).
    void copyRows(const Tensor& src, int64_t rowBegin, Tensor& dst) override {
        rowBlock("copyRows", "src", src, "dst", dst, rowBegin);
        const int64_t w = rowWidth(src);
        std::memmove(dst.data<T>(), src.data<T>() + rowBegin * w, static_cast<size_t>(dst.numel()) * sizeof(T));
    }

    // src [r, w] -> dst [n, w] rows [rowBegin, rowBegin + r).
    void copyRowsInto(const Tensor& src, Tensor& dst, int64_t rowBegin) override {
        rowBlock("copyRowsInto", "dst", dst, "src", src, rowBegin);
        const int64_t w = rowWidth(dst);
        std::memmove(dst.data<T>() + rowBegin * w, src.data<T>(), static_cast<size_t>(src.numel()) * sizeof(T));
    }

    // src [n, c] columns [colBegin, colBegin + w) -> dst [n, w].
    void copyColumns(const Tensor& src, int64_t colBegin, Tensor& dst) override {
        columnBlock("copyColumns", "src", src, "dst", dst, colBegin);
        const int64_t n = src.dim(0), c = rowWidth(src), w = rowWidth(dst);
        const T* s = src.data<T>();
        T* d = dst.data<T>();
        for (int64_t r = 0; r < n; ++r) std::memmove(d + r * w, s + r * c + colBegin, static_cast<size_t>(w) * sizeof(T));
    }

    // dst [n, c] columns [colBegin, colBegin + w) += src [n, w].
    void addColumnsInto(const Tensor& src, Tensor& dst, int64_t colBegin) override {
        columnBlock("addColumnsInto", "dst", dst, "src", src, colBegin);
        const int64_t n = dst.dim(0), c = rowWidth(dst), w = rowWidth(src);
        const T* s = src.data<T>();
        T* d = dst.data<T>();
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < w; ++j) d[r * c + colBegin + j] += s[r * w + j];
    }

    // C = alpha op(A) op(B) + beta C (BLAS xGEMM semantics, row-major; beta == 0 ignores C's contents).
    void gemm(bool transA, bool transB, double alpha, const Tensor& a, const Tensor& b, double beta,
              Tensor& c) override {
        // op(A) [m, k], op(B) [k, n], C [m, n]
        const auto [m, n, k] = Checks::gemmShape(transA, transB, a, b, c);
        ConstMatrixMap ma(a.data<T>(), a.dim(0), a.dim(1));
        ConstMatrixMap mb(b.data<T>(), b.dim(0), b.dim(1));
        MatrixMap mc(c.data<T>(), m, n);
        const T tAlpha = static_cast<T>(alpha);
        const T tBeta = static_cast<T>(beta);
        auto run = [&](const auto& opA, const auto& opB) {
            if (beta == 0.0) {
                mc.noalias() = tAlpha * (opA * opB);
            } else {
                if (beta != 1.0) mc *= tBeta;
                mc.noalias() += tAlpha * (opA * opB);
            }
        };
        if (!transA && !transB) run(ma, mb);
        else if (!transA && transB) run(ma, mb.transpose());
        else if (transA && !transB) run(ma.transpose(), mb);
        else run(ma.transpose(), mb.transpose());
    }

    // x [n, c] += bias [c] (or [1, c]) on every row.
    void addBias(Tensor& x, const Tensor& bias) override {
        const auto [n, c] = matrixShape("addBias", "x", x);
        checkBias("addBias", "bias", bias, c);
        T* px = x.data<T>();
        const T* pb = bias.data<T>();
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < c; ++j) px[r * c + j] += pb[j];
    }

    // dbias [c] (or [1, c]) += column sums of dy [n, c] (d/dbias of x + bias), rows summed in order.
    void biasGrad(const Tensor& dy, Tensor& dbias) override {
        const auto [n, c] = matrixShape("biasGrad", "dy", dy);
        checkBias("biasGrad", "dbias", dbias, c);
        const T* pd = dy.data<T>();
        T* pb = dbias.data<T>();
        for (int64_t j = 0; j < c; ++j) {
            double sum = 0.0;
            for (int64_t r = 0; r < n; ++r) sum += static_cast<double>(pd[r * c + j]);
            pb[j] = static_cast<T>(static_cast<double>(pb[j]) + sum);
        }
    }

    void normForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool rms, double eps, Tensor& y,
                     Tensor& mean, Tensor& rstd) override {
        // x [n, c], gamma [c], beta [c] (optional), y [n, c], mean [n] (LayerNorm; optional for RMSNorm), rstd [n]
        const auto [n, c] = matrixShape("normForward", "x", x);
        if (c == 0) fail("normForward", "x " + x.shapeString() + " has no features");
        checkShape("normForward", "gamma", gamma, {c});
        if (beta.defined()) checkShape("normForward", "beta", beta, {c});
        checkShape("normForward", "y", y, {n, c});
        if (!rms || mean.defined()) checkShape("normForward", "mean", mean, {n});
        checkShape("normForward", "rstd", rstd, {n});
        const T* px = x.data<T>();
        const T* pg = gamma.data<T>();
        const T* pbeta = beta.defined() ? beta.data<T>() : nullptr;
        T* py = y.data<T>();
        for (int64_t r = 0; r < n; ++r) {
            const T* xr = px + r * c;
            double mu = 0.0, inv = 0.0;
            if (rms) {
                // RMSNorm (Zhang & Sennrich 2019): rstd = 1 / sqrt(mean(x^2) + eps)
                double ss = 0.0;
                for (int64_t j = 0; j < c; ++j) ss += static_cast<double>(xr[j]) * static_cast<double>(xr[j]);
                inv = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
            } else {
                // LayerNorm (Ba et al. 2016), biased variance as torch.nn.LayerNorm: rstd = 1 / sqrt(var + eps)
                double sum = 0.0;
                for (int64_t j = 0; j < c; ++j) sum += static_cast<double>(xr[j]);
                mu = sum / static_cast<double>(c);
                double var = 0.0;
                for (int64_t j = 0; j < c; ++j) {
                    const double dlt = static_cast<double>(xr[j]) - mu;
                    var += dlt * dlt;
                }
                inv = 1.0 / std::sqrt(var / static_cast<double>(c) + eps);
            }
            // y = (x - mean) * rstd * gamma + beta (mean = 0 for RMSNorm)
            for (int64_t j = 0; j < c; ++j) {
                double v = (static_cast<double>(xr[j]) - mu) * inv * static_cast<double>(pg[j]);
                if (pbeta) v += static_cast<double>(pbeta[j]);
                py[r * c + j] = static_cast<T>(v);
            }
            if (mean.defined()) mean.data<T>()[r] = static_cast<T>(mu);
            rstd.data<T>()[r] = static_cast<T>(inv);
        }
    }

    void normBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                      const Tensor& rstd, bool rms, Tensor& dx, Tensor& dgamma, Tensor& dbeta) override {
        // dy, x, dx [n, c]; gamma, dgamma, dbeta [c]; mean, rstd [n]
        const auto [n, c] = matrixShape("normBackward", "x", x);
        if (c == 0) fail("normBackward", "x " + x.shapeString() + " has no features");
        checkShape("normBackward", "dy", dy, {n, c});
        checkShape("normBackward", "gamma", gamma, {c});
        if (!rms) checkShape("normBackward", "mean", mean, {n});
        checkShape("normBackward", "rstd", rstd, {n});
        checkShape("normBackward", "dx", dx, {n, c});
        checkShape("normBackward", "dgamma", dgamma, {c});
        if (dbeta.defined()) checkShape("normBackward", "dbeta", dbeta, {c});
        const T* pdy = dy.data<T>();
        const T* px = x.data<T>();
        const T* pg = gamma.data<T>();
        T* pdx = dx.data<T>();
        T* pdg = dgamma.data<T>();
        T* pdb = dbeta.defined() ? dbeta.data<T>() : nullptr;
        // Parameter gradients summed over rows in order in float64, then added once.
        std::vector<double> dgSum(static_cast<size_t>(c), 0.0), dbSum(static_cast<size_t>(c), 0.0);
        std::vector<double> xhat(static_cast<size_t>(c)), dxhat(static_cast<size_t>(c));
        const double invC = 1.0 / static_cast<double>(c);
        for (int64_t r = 0; r < n; ++r) {
            const double mu = rms ? 0.0 : static_cast<double>(mean.data<T>()[r]);
            const double inv = static_cast<double>(rstd.data<T>()[r]);
            double meanDxhat = 0.0, meanDxhatXhat = 0.0;
            for (int64_t j = 0; j < c; ++j) {
                const auto jj = static_cast<size_t>(j);
                const double g = static_cast<double>(pdy[r * c + j]);
                xhat[jj] = (static_cast<double>(px[r * c + j]) - mu) * inv;     // xhat = (x - mean) * rstd
                dxhat[jj] = g * static_cast<double>(pg[j]);                       // dxhat = dy * gamma
                meanDxhat += dxhat[jj];
                meanDxhatXhat += dxhat[jj] * xhat[jj];
                dgSum[jj] += g * xhat[jj];                                        // dgamma += dy * xhat
                dbSum[jj] += g;                                                   // dbeta += dy
            }
            meanDxhat *= invC;
            meanDxhatXhat *= invC;
            for (int64_t j = 0; j < c; ++j) {
                const auto jj = static_cast<size_t>(j);
                // LayerNorm: dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) (llm.c layernorm_backward);
                // RMSNorm drops the mean(dxhat) term, since no mean was subtracted.
                const double centred = rms ? dxhat[jj] : dxhat[jj] - meanDxhat;
                pdx[r * c + j] = static_cast<T>(inv * (centred - xhat[jj] * meanDxhatXhat));
            }
        }
        for (int64_t j = 0; j < c; ++j) {
            pdg[j] = static_cast<T>(static_cast<double>(pdg[j]) + dgSum[static_cast<size_t>(j)]);
            if (pdb) pdb[j] = static_cast<T>(static_cast<double>(pdb[j]) + dbSum[static_cast<size_t>(j)]);
        }
    }

    void activationForward(const Tensor& x, Tensor& y, Pointwise f) override {
        // x, y: any shape, equal
        check("activationForward", "x", x);
        checkShape("activationForward", "y", y, x.shape());
        const T* px = x.data<T>();
        T* py = y.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) py[i] = static_cast<T>(activation(static_cast<double>(px[i]), f));
    }

    void activationBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise f) override {
        // dy, x, dx: any shape, equal
        check("activationBackward", "x", x);
        checkShape("activationBackward", "dy", dy, x.shape());
        checkShape("activationBackward", "dx", dx, x.shape());
        const T* pdy = dy.data<T>();
        const T* px = x.data<T>();
        T* pdx = dx.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i)
            pdx[i] = static_cast<T>(static_cast<double>(pdy[i]) * activationDerivative(static_cast<double>(px[i]), f));
    }

    // SiLU, silu(g) = g sigmoid(g), d/dg = s (1 + g (1 - s)); GELU's tanh form (Hendrycks & Gimpel 2016, sec. 2;
    // GPT-2) 0.5 g (1 + tanh(u)), u = c (g + 0.044715 g^3), d/dg = 0.5 (1 + t) + 0.5 g (1 - t^2) c (1 + 3 0.044715 g^2)
    // with t = tanh(u), c = sqrt(2/pi); squared ReLU max(0, g)^2, d/dg = 2 max(0, g).
    static double activation(double g, Pointwise f) {
        switch (f) {
        case Pointwise::Silu: return g * sigmoid(g);
        case Pointwise::Gelu: return 0.5 * g * (1.0 + std::tanh(geluInner(g)));
        case Pointwise::SquaredRelu: return g > 0.0 ? g * g : 0.0;
        }
        return 0.0;
    }
    static double activationDerivative(double g, Pointwise f) {
        switch (f) {
        case Pointwise::Silu: {
            const double s = sigmoid(g);
            return s * (1.0 + g * (1.0 - s));
        }
        case Pointwise::Gelu: {
            const double t = std::tanh(geluInner(g));
            return 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * kGeluScale * (1.0 + 3.0 * kGeluCubic * g * g);
        }
        case Pointwise::SquaredRelu: return g > 0.0 ? 2.0 * g : 0.0;
        }
        return 0.0;
    }

    void gluForward(const Tensor& x, Tensor& y, Pointwise act) override {
        // x [n, 2f] = [gate | up], y [n, f]
        const auto [n, twoF] = matrixShape("gluForward", "x", x);
        if (twoF % 2 != 0) fail("gluForward", "x " + x.shapeString() + " has an odd number of columns");
        const int64_t f = twoF / 2;
        checkShape("gluForward", "y", y, {n, f});
        const T* px = x.data<T>();
        T* py = y.data<T>();
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < f; ++j) {
                const double g = static_cast<double>(px[r * twoF + j]);
                const double u = static_cast<double>(px[r * twoF + f + j]);
                py[r * f + j] = static_cast<T>(activation(g, act) * u); // act(gate) * up
            }
    }

    void gluBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise act) override {
        // dy [n, f], x [n, 2f], dx [n, 2f]
        const auto [n, twoF] = matrixShape("gluBackward", "x", x);
        if (twoF % 2 != 0) fail("gluBackward", "x " + x.shapeString() + " has an odd number of columns");
        const int64_t f = twoF / 2;
        checkShape("gluBackward", "dy", dy, {n, f});
        checkShape("gluBackward", "dx", dx, {n, twoF});
        const T* pdy = dy.data<T>();
        const T* px = x.data<T>();
        T* pdx = dx.data<T>();
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < f; ++j) {
                const double g = static_cast<double>(px[r * twoF + j]);
                const double u = static_cast<double>(px[r * twoF + f + j]);
                const double d = static_cast<double>(pdy[r * f + j]);
                // dgate = dy up act'(g); dup = dy act(g)
                pdx[r * twoF + j] = static_cast<T>(d * u * activationDerivative(g, act));
                pdx[r * twoF + f + j] = static_cast<T>(d * activation(g, act));
            }
    }

    void dropout(Tensor& x, const DropoutRule& rule, const std::vector<int64_t>& sequences,
                 const std::vector<int64_t>& positions) override {
        const auto [rows, cols] = Checks::dropoutShape(x, rule, sequences, positions);
        if (!rule.active()) return;
        T* px = x.data<T>();
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const double f = dropoutFactor(rule, sequences[static_cast<size_t>(r)], positions[static_cast<size_t>(r)], c);
                px[r * cols + c] = static_cast<T>(static_cast<double>(px[r * cols + c]) * f);
            }
    }

    void softcap(Tensor& x, double cap) override {
        check("softcap", "x", x);
        T* px = x.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) px[i] = static_cast<T>(capped(static_cast<double>(px[i]), cap));
    }

    void softcapBackward(Tensor& dy, const Tensor& y, double cap) override {
        check("softcapBackward", "y", y);
        checkShape("softcapBackward", "dy", dy, y.shape());
        T* pdy = dy.data<T>();
        const T* py = y.data<T>();
        for (int64_t i = 0; i < y.numel(); ++i) {
            const double t = static_cast<double>(py[i]) / cap; // tanh(x / cap), from the capped value
            pdy[i] = static_cast<T>(static_cast<double>(pdy[i]) * (1.0 - t * t));
        }
    }

    void rope(Tensor& x, const std::vector<int64_t>& positions, double base, int64_t rotated, bool inverse) override {
        // x [tokens, heads, d], positions [tokens]; columns from `rotated` on are passed through
        const auto [tokens, heads, d] = Checks::ropeShape(x, positions, rotated);
        const int64_t half = rotated / 2;
        T* px = x.data<T>();
        for (int64_t t = 0; t < tokens; ++t) {
            const double pos = static_cast<double>(positions[static_cast<size_t>(t)]);
            for (int64_t i = 0; i < half; ++i) {
                // RoFormer (Su et al. 2021) eq. 15 over the rotated width r: theta_i = base^(-2i/r); angle =
                // position * theta_i; the inverse rotates by -angle, the transpose (= backward) of the rotation.
                const double angle = pos * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rotated));
                const double cs = std::cos(angle);
                const double sn = inverse ? -std::sin(angle) : std::sin(angle);
                for (int64_t h = 0; h < heads; ++h) {
                    T* row = px + (t * heads + h) * d;
                    const double x1 = static_cast<double>(row[i]);
                    const double x2 = static_cast<double>(row[i + half]);
                    // rotate_half convention (GPT-NeoX, HF Llama): pairs (i, i + r/2),
                    // [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin]
                    row[i] = static_cast<T>(x1 * cs - x2 * sn);
                    row[i + half] = static_cast<T>(x2 * cs + x1 * sn);
                }
            }
        }
    }

    void attentionForward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t sequences,
                          const std::vector<int64_t>& queryPositions, const std::vector<int64_t>& keyPositions,
                          Tensor& o, Tensor& lse, const ScoreRule& rule) override {
        // q [S * sq, hq, d]; k, v [S * skv, hkv, d]; o [S * sq, hq, d]; lse [S * sq, hq]
        const AttentionShape a = attentionShape("attentionForward", q, k, v, sequences, queryPositions, keyPositions);
        checkShape("attentionForward", "o", o, q.shape());
        checkShape("attentionForward", "lse", lse, {a.sequences * a.sq, a.hq});
        const T* pq = q.data<T>();
        const T* pk = k.data<T>();
        const T* pv = v.data<T>();
        T* po = o.data<T>();
        T* plse = lse.data<T>();
        std::vector<double> score(static_cast<size_t>(a.skv)), acc(static_cast<size_t>(a.d));
        for (int64_t s = 0; s < a.sequences; ++s)
            for (int64_t i = 0; i < a.sq; ++i) {
                const int64_t qRow = s * a.sq + i;
                const int64_t qPos = queryPositions[static_cast<size_t>(i)];
                for (int64_t h = 0; h < a.hq; ++h) {
                    const int64_t g = h / a.group;  // GQA: query head h reads kv head h / (hq / hkv)
                    const T* qi = pq + (qRow * a.hq + h) * a.d;
                    const double slope = headSlope(rule, h);
                    // S_j = q . k_j / sqrt(d) (Vaswani et al. 2017, eq. 1) for visible keys, soft-capped, plus
                    // ALiBi's bias; max subtracted before exp for stability (as FlashAttention's online softmax)
                    double maxScore = -std::numeric_limits<double>::infinity();
                    bool any = false;
                    for (int64_t j = 0; j < a.skv; ++j) {
                        const int64_t kPos = keyPositions[static_cast<size_t>(j)];
                        if (!keyVisible(rule.window, kPos, qPos)) continue;
                        const T* kj = pk + ((s * a.skv + j) * a.hkv + g) * a.d;
                        const double sc = capped(dotRow(qi, kj, a.d) * a.scale, rule.softcap) +
                                          slope * static_cast<double>(kPos - qPos);
                        score[static_cast<size_t>(j)] = sc;
                        maxScore = any ? std::max(maxScore, sc) : sc;
                        any = true;
                    }
                    if (!any)
                        fail("attentionForward", "query " + std::to_string(i) + " of sequence " + std::to_string(s) +
                                                     " (position " + std::to_string(qPos) + ") sees no key");
                    std::fill(acc.begin(), acc.end(), 0.0);
                    double sum = 0.0;
                    for (int64_t j = 0; j < a.skv; ++j) {
                        if (!keyVisible(rule.window, keyPositions[static_cast<size_t>(j)], qPos)) continue;
                        const double p = std::exp(score[static_cast<size_t>(j)] - maxScore);
                        sum += p;
                        // attention dropout on the probability; the normaliser stays the undropped one's
                        const double pd = p * dropoutFactor(rule.dropout, rule.firstSequence + s, qPos,
                                                            keyPositions[static_cast<size_t>(j)], rule.headOffset + h);
                        const T* vj = pv + ((s * a.skv + j) * a.hkv + g) * a.d;
                        for (int64_t c = 0; c < a.d; ++c) acc[static_cast<size_t>(c)] += pd * static_cast<double>(vj[c]);
                    }
                    // o = sum_j softmax_j v_j; lse = max + log(sum_j exp(S_j - max))
                    T* oi = po + (qRow * a.hq + h) * a.d;
                    for (int64_t c = 0; c < a.d; ++c) oi[c] = static_cast<T>(acc[static_cast<size_t>(c)] / sum);
                    plse[qRow * a.hq + h] = static_cast<T>(maxScore + std::log(sum));
                }
            }
    }

    void attentionBackward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                           const Tensor& lse, int64_t sequences, const std::vector<int64_t>& queryPositions,
                           const std::vector<int64_t>& keyPositions, Tensor& dq, Tensor& dk, Tensor& dv,
                           const ScoreRule& rule) override {
        // dout, q, o, dq [S * sq, hq, d]; k, v, dk, dv [S * skv, hkv, d]; lse [S * sq, hq]
        const AttentionShape a =
            attentionShape("attentionBackward", q, k, v, sequences, queryPositions, keyPositions);
        checkShape("attentionBackward", "dout", dout, q.shape());
        checkShape("attentionBackward", "o", o, q.shape());
        checkShape("attentionBackward", "lse", lse, {a.sequences * a.sq, a.hq});
        checkShape("attentionBackward", "dq", dq, q.shape());
        checkShape("attentionBackward", "dk", dk, k.shape());
        checkShape("attentionBackward", "dv", dv, v.shape());
        const T* pdo = dout.data<T>();
        const T* pq = q.data<T>();
        const T* pk = k.data<T>();
        const T* pv = v.data<T>();
        const T* po = o.data<T>();
        const T* plse = lse.data<T>();
        // Key/value gradients gathered in float64 and added to dk, dv once at the end. A query that sees no key
        // here contributes nothing (legitimate when this call holds only one chunk of the keys, and lse is global).
        std::vector<double> dkAcc(static_cast<size_t>(k.numel()), 0.0), dvAcc(static_cast<size_t>(v.numel()), 0.0);
        std::vector<double> dqAcc(static_cast<size_t>(a.d));
        for (int64_t s = 0; s < a.sequences; ++s)
            for (int64_t i = 0; i < a.sq; ++i) {
                const int64_t qRow = s * a.sq + i;
                const int64_t qPos = queryPositions[static_cast<size_t>(i)];
                for (int64_t h = 0; h < a.hq; ++h) {
                    const int64_t g = h / a.group;
                    const int64_t qOff = (qRow * a.hq + h) * a.d;
                    const T* qi = pq + qOff;
                    const T* doi = pdo + qOff;
                    const double l = static_cast<double>(plse[qRow * a.hq + h]);
                    // D_i = rowsum(dO * O) (FlashAttention-2, Dao 2023, alg. 2 line 4)
                    const double dsum = dotRow(doi, po + qOff, a.d);
                    const double alibi = headSlope(rule, h);
                    std::fill(dqAcc.begin(), dqAcc.end(), 0.0);
                    for (int64_t j = 0; j < a.skv; ++j) {
                        const int64_t kPos = keyPositions[static_cast<size_t>(j)];
                        if (!keyVisible(rule.window, kPos, qPos)) continue;
                        const int64_t kOff = ((s * a.skv + j) * a.hkv + g) * a.d;
                        const T* kj = pk + kOff;
                        const T* vj = pv + kOff;
                        // P = exp(S - lse); dV += P^T dO; dP = dO V^T; dS = P (dP - D) (FlashAttention-2, alg. 2);
                        // through a soft-cap, dS times 1 - tanh^2 of the raw score over the cap; ALiBi's bias, a
                        // constant, only moves P
                        const double sc = capped(dotRow(qi, kj, a.d) * a.scale, rule.softcap);
                        const double p = std::exp(sc + alibi * static_cast<double>(kPos - qPos) - l);
                        // with dropout's factor z on P: O = sum_j z_j P_j V_j, so dV += z P dO and dP = z dO V^T,
                        // while D = rowsum(dO * O) is still sum_j P_j dP_j
                        const double z = dropoutFactor(rule.dropout, rule.firstSequence + s, qPos, kPos, rule.headOffset + h);
                        const double dp = z * dotRow(doi, vj, a.d);
                        const double capSlope = rule.softcap > 0.0 ? 1.0 - (sc / rule.softcap) * (sc / rule.softcap) : 1.0;
                        const double ds = p * (dp - dsum) * capSlope;
                        for (int64_t c = 0; c < a.d; ++c) {
                            const auto cc = static_cast<size_t>(c);
                            const auto kc = static_cast<size_t>(kOff + c);
                            dvAcc[kc] += z * p * static_cast<double>(doi[c]);
                            dqAcc[cc] += ds * static_cast<double>(kj[c]);   // dQ = dS K * scale
                            dkAcc[kc] += ds * static_cast<double>(qi[c]);   // dK += dS^T Q * scale
                        }
                    }
                    T* dqi = dq.data<T>() + qOff;
                    for (int64_t c = 0; c < a.d; ++c) dqi[c] = static_cast<T>(dqAcc[static_cast<size_t>(c)] * a.scale);
                }
            }
        T* pdk = dk.data<T>();
        T* pdv = dv.data<T>();
        for (int64_t e = 0; e < k.numel(); ++e) {
            const auto ee = static_cast<size_t>(e);
            pdk[e] = static_cast<T>(static_cast<double>(pdk[e]) + dkAcc[ee] * a.scale);
            pdv[e] = static_cast<T>(static_cast<double>(pdv[e]) + dvAcc[ee]);
        }
    }

    void embeddingForward(const std::vector<int32_t>& tokens, const Tensor& table, int64_t vocabBegin,
                          Tensor& out) override {
        // table [vocabLocal, h], out [n, h], tokens [n]
        const auto [vocabLocal, h] = matrixShape("embeddingForward", "table", table);
        checkShape("embeddingForward", "out", out, {static_cast<int64_t>(tokens.size()), h});
        const T* pt = table.data<T>();
        T* po = out.data<T>();
        for (size_t t = 0; t < tokens.size(); ++t) {
            const int64_t row = localIndex("embeddingForward", tokens[t], vocabBegin, vocabLocal);
            T* dst = po + static_cast<int64_t>(t) * h;
            if (row < 0) std::fill_n(dst, h, T(0));
            else std::memcpy(dst, pt + row * h, static_cast<size_t>(h) * sizeof(T));
        }
    }

    void embeddingBackward(const std::vector<int32_t>& tokens, const Tensor& dout, int64_t vocabBegin,
                           Tensor& dtable) override {
        // dout [n, h], dtable [vocabLocal, h] += rows of dout scattered by token (in token order)
        const auto [vocabLocal, h] = matrixShape("embeddingBackward", "dtable", dtable);
        checkShape("embeddingBackward", "dout", dout, {static_cast<int64_t>(tokens.size()), h});
        const T* pd = dout.data<T>();
        T* pt = dtable.data<T>();
        for (size_t t = 0; t < tokens.size(); ++t) {
            const int64_t row = localIndex("embeddingBackward", tokens[t], vocabBegin, vocabLocal);
            if (row < 0) continue;
            const T* src = pd + static_cast<int64_t>(t) * h;
            for (int64_t c = 0; c < h; ++c) pt[row * h + c] += src[c];
        }
    }

    std::vector<double> rowMax(const Tensor& logits) override {
        // logits [n, vocabLocal] -> [n]
        const auto [n, vl] = logitShape("rowMax", logits);
        const T* p = logits.data<T>();
        std::vector<double> out(static_cast<size_t>(n));
        for (int64_t r = 0; r < n; ++r) {
            double m = static_cast<double>(p[r * vl]);
            for (int64_t j = 1; j < vl; ++j) m = std::max(m, static_cast<double>(p[r * vl + j]));
            out[static_cast<size_t>(r)] = m;
        }
        return out;
    }

    std::vector<double> rowSumExp(const Tensor& logits, const std::vector<double>& max) override {
        // logits [n, vocabLocal], max [n] (the global row max) -> [n]
        const auto [n, vl] = logitShape("rowSumExp", logits);
        rowVector("rowSumExp", "max", max, n);
        const T* p = logits.data<T>();
        std::vector<double> out(static_cast<size_t>(n));
        for (int64_t r = 0; r < n; ++r) {
            const double m = max[static_cast<size_t>(r)];
            double sum = 0.0;
            // sum_j exp(l_j - max) (Megatron-LM vocab_parallel_cross_entropy: sum_exp_logits)
            for (int64_t j = 0; j < vl; ++j) sum += std::exp(static_cast<double>(p[r * vl + j]) - m);
            out[static_cast<size_t>(r)] = sum;
        }
        return out;
    }

    std::vector<double> targetLogits(const Tensor& logits, const std::vector<int32_t>& targets,
                                     int64_t vocabBegin) override {
        // logits [n, vocabLocal], targets [n] -> [n] (0 where the target is in another shard)
        const auto [n, vl] = logitShape("targetLogits", logits);
        if (static_cast<int64_t>(targets.size()) != n)
            fail("targetLogits", std::to_string(targets.size()) + " targets for logits " + logits.shapeString());
        const T* p = logits.data<T>();
        std::vector<double> out(static_cast<size_t>(n), 0.0);
        for (int64_t r = 0; r < n; ++r) {
            const int64_t col = localIndex("targetLogits", targets[static_cast<size_t>(r)], vocabBegin, vl);
            if (col >= 0) out[static_cast<size_t>(r)] = static_cast<double>(p[r * vl + col]);
        }
        return out;
    }

    void crossEntropyBackward(Tensor& logits, const std::vector<double>& max, const std::vector<double>& sumExp,
                              const std::vector<int32_t>& targets, int64_t vocabBegin, double scale) override {
        // logits [n, vocabLocal] overwritten by their gradient; max, sumExp, targets [n]
        const auto [n, vl] = logitShape("crossEntropyBackward", logits);
        rowVector("crossEntropyBackward", "max", max, n);
        rowVector("crossEntropyBackward", "sumExp", sumExp, n);
        if (static_cast<int64_t>(targets.size()) != n)
            fail("crossEntropyBackward",
                 std::to_string(targets.size()) + " targets for logits " + logits.shapeString());
        T* p = logits.data<T>();
        for (int64_t r = 0; r < n; ++r) {
            const auto rr = static_cast<size_t>(r);
            const int64_t col = localIndex("crossEntropyBackward", targets[rr], vocabBegin, vl);
            for (int64_t j = 0; j < vl; ++j) {
                // d/dl of (log sum exp(l) - l_target) = softmax(l) - onehot(target) (Megatron-LM
                // _VocabParallelCrossEntropy.backward), softmax from the global max and sum
                const double softmax = std::exp(static_cast<double>(p[r * vl + j]) - max[rr]) / sumExp[rr];
                p[r * vl + j] = static_cast<T>(scale * (softmax - (j == col ? 1.0 : 0.0)));
            }
        }
    }

    void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1, double beta2,
               double eps, double weightDecay, int64_t step) override {
        // param, grad, m, v: same shape
        check("adamw", "param", param);
        checkShape("adamw", "grad", grad, param.shape());
        checkShape("adamw", "m", m, param.shape());
        checkShape("adamw", "v", v, param.shape());
        if (step < 1) fail("adamw", "step " + std::to_string(step) + " (steps count from 1)");
        T* pp = param.data<T>();
        const T* pg = grad.data<T>();
        T* pm = m.data<T>();
        T* pv = v.data<T>();
        const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
        const double bias2Sqrt = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
        const double stepSize = lr / bias1;
        for (int64_t i = 0; i < param.numel(); ++i) {
            const double g = static_cast<double>(pg[i]);
            // PyTorch torch.optim.AdamW (_single_tensor_adamw) order: decoupled decay first, p *= 1 - lr wd
            // (Loshchilov & Hutter 2019, alg. 2 line 12) ...
            double p = static_cast<double>(pp[i]) * (1.0 - lr * weightDecay);
            // ... then m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2 (Kingma & Ba 2015, alg. 1) ...
            const double mi = beta1 * static_cast<double>(pm[i]) + (1.0 - beta1) * g;
            const double vi = beta2 * static_cast<double>(pv[i]) + (1.0 - beta2) * g * g;
            // ... and p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), i.e. lr mhat / (sqrt(vhat) + eps)
            p -= stepSize * mi / (std::sqrt(vi) / bias2Sqrt + eps);
            pm[i] = static_cast<T>(mi);
            pv[i] = static_cast<T>(vi);
            pp[i] = static_cast<T>(p);
        }
    }

    double sumSquares(const Tensor& t) override {
        check("sumSquares", "t", t);
        const T* p = t.data<T>();
        // sum_i t_i^2 in long double, in index order (fixed, so reproducible)
        long double sum = 0.0L;
        for (int64_t i = 0; i < t.numel(); ++i) sum += static_cast<long double>(p[i]) * static_cast<long double>(p[i]);
        return static_cast<double>(sum);
    }

protected:
    void* allocateBytes(int64_t bytes) override {
        // std::aligned_alloc needs a size that is a multiple of the alignment.
        const int64_t rounded = (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
        void* p = std::aligned_alloc(static_cast<size_t>(kAlignmentBytes), static_cast<size_t>(rounded));
        if (!p) throw RuntimeError("cpu backend: cannot allocate " + std::to_string(bytes) + " bytes");
        return p;
    }

    void freeBytes(void* p, int64_t /*bytes*/) override { std::free(p); }

private:
    static constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
    static constexpr double kGeluCubic = 0.044715;

    struct AttentionShape {
        int64_t sequences, sq, skv, hq, hkv, d, group;
        double scale;
    };

    static double geluInner(double x) { return kGeluScale * (x + kGeluCubic * x * x * x); }
    // cap tanh(x / cap) (Gemma 2's soft-capping), x where cap is 0.
    static double capped(double x, double cap) { return cap > 0.0 ? cap * std::tanh(x / cap) : x; }
    // ALiBi's slope of the call's head h (0 without ALiBi).
    static double headSlope(const ScoreRule& rule, int64_t h) {
        return rule.alibiHeads > 0 ? alibiSlope(rule.headOffset + h, rule.alibiHeads) : 0.0;
    }
    static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

    static double dotRow(const T* a, const T* b, int64_t n) {
        double s = 0.0;
        for (int64_t c = 0; c < n; ++c) s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
        return s;
    }

    // The backend computes in one element type (the shared checks of backend_checks.hpp call this).
    friend class detail::BackendChecks<CpuBackend<T>>;
    void checkType(const char* op, const char* what, const Tensor& t) const {
        if (t.type() != elementType())
            fail(op, std::string(what) + " is " + typeName(t.type()) + ", the backend computes in " +
                         typeName(elementType()));
    }

    // Row of `token` in a vocab shard [vocabBegin, vocabBegin + vocabLocal), or -1 when another shard holds it.
    static int64_t localIndex(const char* op, int32_t token, int64_t vocabBegin, int64_t vocabLocal) {
        if (token < 0) fail(op, "negative token id " + std::to_string(token));
        const int64_t local = static_cast<int64_t>(token) - vocabBegin;
        return local >= 0 && local < vocabLocal ? local : -1;
    }

    AttentionShape attentionShape(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                  int64_t sequences, const std::vector<int64_t>& queryPositions,
                                  const std::vector<int64_t>& keyPositions) const {
        check(op, "q", q);
        check(op, "k", k);
        if (q.shape().size() != 3 || k.shape().size() != 3)
            fail(op, "q " + q.shapeString() + " and k " + k.shapeString() + " must be [tokens, heads, d]");
        checkShape(op, "v", v, k.shape());
        AttentionShape a{};
        a.sequences = sequences;
        a.sq = static_cast<int64_t>(queryPositions.size());
        a.skv = static_cast<int64_t>(keyPositions.size());
        a.hq = q.dim(1);
        a.hkv = k.dim(1);
        a.d = q.dim(2);
        if (sequences < 1) fail(op, std::to_string(sequences) + " sequences");
        if (q.dim(0) != sequences * a.sq || k.dim(0) != sequences * a.skv)
            fail(op, "q " + q.shapeString() + " and k " + k.shapeString() + " do not hold " +
                         std::to_string(sequences) + " sequences of " + std::to_string(a.sq) + " queries and " +
                         std::to_string(a.skv) + " keys");
        if (k.dim(2) != a.d) fail(op, "head dims differ: q " + q.shapeString() + ", k " + k.shapeString());
        if (a.hkv < 1 || a.hq % a.hkv != 0)
            fail(op, "query heads of q " + q.shapeString() + " are not a multiple of kv heads of k " +
                         k.shapeString());
        if (a.d < 1) fail(op, "head dim of q " + q.shapeString() + " is 0");
        a.group = a.hq / a.hkv;
        a.scale = 1.0 / std::sqrt(static_cast<double>(a.d));  // 1 / sqrt(d) (Vaswani et al. 2017, eq. 1)
        return a;
    }
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend(ElementType type) {
    // Eigen would only thread with OpenMP; EIGEN_DONT_PARALLELIZE above keeps every product single-threaded.
    if (type == ElementType::F64) return std::make_unique<CpuBackend<double>>();
    return std::make_unique<CpuBackend<float>>();
}

} // namespace tessel::exec
