// Argument checks the backends make alike (defined tensors, shapes, biases, row and column blocks, row
// vectors), so an error reads the same from the CPU and the CUDA backend; each keeps its own element types.
#pragma once

#include "tessel/exec/dropout.hpp"
#include "tessel/exec/tensor.hpp"

#include "tessel/cost/errors.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec::detail {

// Product of all dimensions after the first (the row width of a tensor seen as [dim 0, rest]).
inline int64_t rowWidth(const Tensor& t) {
    int64_t w = 1;
    for (size_t i = 1; i < t.shape().size(); ++i) w *= t.shape()[i];
    return w;
}

inline std::string shapeText(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// Derived (the backend) provides `static constexpr const char* kCheckName` ("cpu backend") and
// `void checkType(const char* op, const char* what, const Tensor& t) const`, which fails through `fail`.
template <class Derived>
class BackendChecks {
public:
    [[noreturn]] static void fail(const char* op, const std::string& message) {
        throw RuntimeError(std::string(Derived::kCheckName) + " " + op + ": " + message);
    }

    // The tensor exists and holds an element type the backend computes in.
    void check(const char* op, const char* what, const Tensor& t) const {
        if (!t.defined()) fail(op, std::string(what) + " is undefined");
        static_cast<const Derived&>(*this).checkType(op, what, t);
    }

    void checkShape(const char* op, const char* what, const Tensor& t, const std::vector<int64_t>& shape) const {
        check(op, what, t);
        if (t.shape() != shape) fail(op, std::string(what) + " has shape " + t.shapeString() + ", expected " + shapeText(shape));
    }

    // A bias of c values: [c] or [1, c] (a one-row parameter).
    void checkBias(const char* op, const char* what, const Tensor& t, int64_t c) const {
        check(op, what, t);
        if (t.shape() != std::vector<int64_t>{c} && t.shape() != std::vector<int64_t>{1, c})
            fail(op, std::string(what) + " has shape " + t.shapeString() + ", expected [" + std::to_string(c) +
                         "] or [1, " + std::to_string(c) + "]");
    }

    std::pair<int64_t, int64_t> matrixShape(const char* op, const char* what, const Tensor& t) const {
        check(op, what, t);
        if (t.shape().size() != 2) fail(op, std::string(what) + " must be 2-D, got " + t.shapeString());
        return {t.dim(0), t.dim(1)};
    }

    std::pair<int64_t, int64_t> logitShape(const char* op, const Tensor& logits) const {
        const auto shape = matrixShape(op, "logits", logits);
        if (shape.second == 0) fail(op, "logits " + logits.shapeString() + " have no vocabulary columns");
        return shape;
    }

    static void rowVector(const char* op, const char* what, const std::vector<double>& values, int64_t n) {
        if (static_cast<int64_t>(values.size()) != n)
            fail(op, std::string(what) + " has " + std::to_string(values.size()) + " values for " + std::to_string(n) +
                         " rows");
    }

    void sameNumel(const char* op, const Tensor& a, const Tensor& b) const {
        if (a.numel() != b.numel()) fail(op, "sizes differ: " + a.shapeString() + " and " + b.shapeString());
    }

    // C = op(A) op(B): the three are 2-D of this backend, A [m, k] (or [k, m] with transA), B [k, n] (or [n, k]),
    // C [m, n], and C is not an input. Returns {m, n, k}.
    struct GemmShape {
        int64_t m, n, k;
    };
    GemmShape gemmShape(bool transA, bool transB, const Tensor& a, const Tensor& b, const Tensor& c) const {
        check("gemm", "a", a);
        check("gemm", "b", b);
        check("gemm", "c", c);
        if (a.shape().size() != 2 || b.shape().size() != 2 || c.shape().size() != 2)
            fail("gemm", "needs 2-D tensors, got a " + a.shapeString() + ", b " + b.shapeString() + ", c " +
                             c.shapeString());
        const int64_t m = transA ? a.dim(1) : a.dim(0);
        const int64_t k = transA ? a.dim(0) : a.dim(1);
        const int64_t kb = transB ? b.dim(1) : b.dim(0);
        const int64_t n = transB ? b.dim(0) : b.dim(1);
        if (k != kb || c.dim(0) != m || c.dim(1) != n)
            fail("gemm", std::string("shapes do not match: a ") + a.shapeString() + (transA ? "^T" : "") + ", b " +
                             b.shapeString() + (transB ? "^T" : "") + ", c " + c.shapeString());
        if (c.data<void>() == a.data<void>() || c.data<void>() == b.data<void>()) fail("gemm", "c aliases an input");
        return {m, n, k};
    }

    // RoPE's x [tokens, heads, d], `rotated` columns of each head (even, 2..d) and one position per token.
    // Returns {tokens, heads, d}.
    struct RopeShape {
        int64_t tokens, heads, d;
    };
    RopeShape ropeShape(const Tensor& x, const std::vector<int64_t>& positions, int64_t rotated) const {
        check("rope", "x", x);
        if (x.shape().size() != 3) fail("rope", "x must be [tokens, heads, d], got " + x.shapeString());
        const int64_t tokens = x.dim(0), heads = x.dim(1), d = x.dim(2);
        if (rotated < 2 || rotated > d || rotated % 2 != 0)
            fail("rope", std::to_string(rotated) + " rotated columns of x " + x.shapeString() +
                             ": RoPE rotates an even number of columns, 2 to the head dim");
        if (static_cast<int64_t>(positions.size()) != tokens)
            fail("rope", std::to_string(positions.size()) + " positions for x " + x.shapeString());
        return {tokens, heads, d};
    }

    // Dropout's x [n, c], one sequence and one position per row, p in [0, 1). Returns {n, c}.
    std::pair<int64_t, int64_t> dropoutShape(const Tensor& x, const DropoutRule& rule, const std::vector<int64_t>& sequences,
                                             const std::vector<int64_t>& positions) const {
        const auto shape = matrixShape("dropout", "x", x);
        if (static_cast<int64_t>(sequences.size()) != shape.first || static_cast<int64_t>(positions.size()) != shape.first)
            fail("dropout", std::to_string(sequences.size()) + " sequences and " + std::to_string(positions.size()) +
                                " positions for x " + x.shapeString());
        if (!(rule.p >= 0.0 && rule.p < 1.0)) fail("dropout", "p = " + std::to_string(rule.p) + " is outside [0, 1)");
        return shape;
    }

    // whole [n, w] and block [r, w] (rank >= 1, seen as [dim 0, rest]) with rows [rowBegin, rowBegin + r) in range.
    void rowBlock(const char* op, const char* wholeName, const Tensor& whole, const char* blockName,
                  const Tensor& block, int64_t rowBegin) const {
        check(op, wholeName, whole);
        check(op, blockName, block);
        if (whole.shape().empty() || block.shape().empty())
            fail(op, "needs tensors with rows, got " + whole.shapeString() + " and " + block.shapeString());
        if (rowWidth(whole) != rowWidth(block))
            fail(op, "row widths differ: " + whole.shapeString() + " and " + block.shapeString());
        if (rowBegin < 0 || rowBegin + block.dim(0) > whole.dim(0))
            fail(op, "rows [" + std::to_string(rowBegin) + ", " + std::to_string(rowBegin + block.dim(0)) +
                         ") outside " + whole.shapeString());
    }

    // whole [n, c] and block [n, w] (seen as [dim 0, rest]) with columns [colBegin, colBegin + w) in range.
    void columnBlock(const char* op, const char* wholeName, const Tensor& whole, const char* blockName,
                     const Tensor& block, int64_t colBegin) const {
        check(op, wholeName, whole);
        check(op, blockName, block);
        if (whole.shape().empty() || block.shape().empty() || whole.dim(0) != block.dim(0))
            fail(op, "row counts differ: " + whole.shapeString() + " and " + block.shapeString());
        if (colBegin < 0 || colBegin + rowWidth(block) > rowWidth(whole))
            fail(op, "columns [" + std::to_string(colBegin) + ", " + std::to_string(colBegin + rowWidth(block)) +
                         ") outside " + whole.shapeString());
    }
};

} // namespace tessel::exec::detail
