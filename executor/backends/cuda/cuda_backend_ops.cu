// The CUDA backend's op launches: norms, activations, RoPE, attention, embedding, cross-entropy, AdamW.
#include "cuda_backend_impl.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec::detail {

// ---- norms ----
void CudaBackend::normForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool rms, double eps,
                              Tensor& y, Tensor& mean, Tensor& rstd) {
    const auto [n, c] = matrixShape("normForward", "x", x);
    if (c == 0) fail("normForward", "x " + x.shapeString() + " has no features");
    checkShape("normForward", "gamma", gamma, {c}, x.type());
    if (beta.defined()) checkShape("normForward", "beta", beta, {c}, x.type());
    checkShape("normForward", "y", y, {n, c}, x.type());
    if (!rms || mean.defined()) checkShape("normForward", "mean", mean, {n}, x.type());
    checkShape("normForward", "rstd", rstd, {n}, x.type());
    touched(y);
    if (mean.defined()) touched(mean);
    touched(rstd);
    Scratch spare(allocator_, n * 4);
    float* meanF = mean.defined() ? fp32View(mean) : spare.as<float>();
    float* rstdF = fp32View(rstd);
    cuda::normForward(kc_, dt(x), x.data<void>(), gamma.data<void>(), beta.defined() ? beta.data<void>() : nullptr,
                      rms, static_cast<float>(eps), n, c, y.data<void>(),
                      mean.defined() && x.type() != ElementType::F32 ? mean.data<void>() : nullptr,
                      x.type() != ElementType::F32 ? rstd.data<void>() : rstdF, meanF, rstdF);
}

void CudaBackend::normBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                               const Tensor& rstd, bool rms, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
    const auto [n, c] = matrixShape("normBackward", "x", x);
    if (c == 0) fail("normBackward", "x " + x.shapeString() + " has no features");
    checkShape("normBackward", "dy", dy, {n, c}, x.type());
    checkShape("normBackward", "gamma", gamma, {c}, x.type());
    if (!rms) checkShape("normBackward", "mean", mean, {n}, x.type());
    checkShape("normBackward", "rstd", rstd, {n}, x.type());
    checkShape("normBackward", "dx", dx, {n, c}, x.type());
    checkShape("normBackward", "dgamma", dgamma, {c}, x.type());
    if (dbeta.defined()) checkShape("normBackward", "dbeta", dbeta, {c}, x.type());
    const float* meanF = rms ? nullptr : statistics("normBackward", "mean", mean);
    const float* rstdF = statistics("normBackward", "rstd", rstd);
    touched(dx);
    touched(dgamma);
    if (dbeta.defined()) touched(dbeta);
    Scratch partials(allocator_, 2 * cuda::planColumnSum(n, c).chunks * c * 4);
    cuda::normBackward(kc_, dt(x), dy.data<void>(), x.data<void>(), gamma.data<void>(), meanF, rstdF, rms, n, c,
                       dx.data<void>(), dgamma.data<void>(), dbeta.defined() ? dbeta.data<void>() : nullptr,
                       partials.as<float>());
}

// ---- activations ----
void CudaBackend::activationForward(const Tensor& x, Tensor& y, Pointwise f) {
    check("activationForward", "x", x);
    checkShape("activationForward", "y", y, x.shape(), x.type());
    touched(y);
    cuda::activationForward(kc_, dt(x), x.data<void>(), y.data<void>(), x.numel(), f);
}

void CudaBackend::activationBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise f) {
    check("activationBackward", "x", x);
    checkShape("activationBackward", "dy", dy, x.shape(), x.type());
    checkShape("activationBackward", "dx", dx, x.shape(), x.type());
    touched(dx);
    cuda::activationBackward(kc_, dt(x), dy.data<void>(), x.data<void>(), dx.data<void>(), x.numel(), f);
}

void CudaBackend::gluForward(const Tensor& x, Tensor& y, Pointwise act) {
    const auto [n, twoF] = matrixShape("gluForward", "x", x);
    if (twoF % 2 != 0) fail("gluForward", "x " + x.shapeString() + " has an odd number of columns");
    checkShape("gluForward", "y", y, {n, twoF / 2}, x.type());
    touched(y);
    cuda::gluForward(kc_, dt(x), x.data<void>(), y.data<void>(), n, twoF / 2, act);
}

void CudaBackend::gluBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise act) {
    const auto [n, twoF] = matrixShape("gluBackward", "x", x);
    if (twoF % 2 != 0) fail("gluBackward", "x " + x.shapeString() + " has an odd number of columns");
    checkShape("gluBackward", "dy", dy, {n, twoF / 2}, x.type());
    checkShape("gluBackward", "dx", dx, {n, twoF}, x.type());
    touched(dx);
    cuda::gluBackward(kc_, dt(x), dy.data<void>(), x.data<void>(), dx.data<void>(), n, twoF / 2, act);
}

void CudaBackend::rope(Tensor& x, const std::vector<int64_t>& positions, double base, int64_t rotated, bool inverse) {
    const auto [tokens, heads, d] = ropeShape(x, positions, rotated);
    touched(x);
    // theta_i = base^(-2i/r) over the rotated width r (RoFormer eq. 15), in fp64 on the host
    std::vector<double> invFreq(static_cast<size_t>(rotated / 2));
    for (int64_t i = 0; i < rotated / 2; ++i)
        invFreq[static_cast<size_t>(i)] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rotated));
    Scratch pos(allocator_, tokens * 8), freq(allocator_, (rotated / 2) * 8);
    h2d(positions.data(), pos.as<void>(), positions.size() * 8);
    h2d(invFreq.data(), freq.as<void>(), invFreq.size() * 8);
    cuda::rope(kc_, dt(x), x.data<void>(), pos.as<int64_t>(), freq.as<double>(), tokens, heads, d, rotated, inverse);
}

void CudaBackend::softcap(Tensor& x, double cap) {
    check("softcap", "x", x);
    touched(x);
    cuda::softcap(kc_, dt(x), x.data<void>(), x.numel(), static_cast<float>(cap));
}

void CudaBackend::softcapBackward(Tensor& dy, const Tensor& y, double cap) {
    check("softcapBackward", "y", y);
    checkShape("softcapBackward", "dy", dy, y.shape(), y.type());
    touched(dy);
    cuda::softcapBackward(kc_, dt(y), dy.data<void>(), y.data<void>(), y.numel(), static_cast<float>(cap));
}

void CudaBackend::dropout(Tensor& x, const DropoutRule& rule, const std::vector<int64_t>& sequences,
                          const std::vector<int64_t>& positions) {
    const auto [rows, cols] = dropoutShape(x, rule, sequences, positions);
    if (!rule.active() || rows == 0) return;
    touched(x);
    Scratch seq(allocator_, rows * 8), pos(allocator_, rows * 8);
    h2d(sequences.data(), seq.as<void>(), sequences.size() * 8);
    h2d(positions.data(), pos.as<void>(), positions.size() * 8);
    cuda::dropout(kc_, dt(x), x.data<void>(), seq.as<int64_t>(), pos.as<int64_t>(), rows, cols, rule);
}

// ---- attention ----
namespace {
// The tiled kernels' copy of a score rule.
void withRule(cuda::AttentionArgs& args, const ScoreRule& rule) {
    args.softcap = static_cast<float>(rule.softcap);
    args.window = static_cast<long long>(rule.window);
    args.alibiHeads = static_cast<long long>(rule.alibiHeads);
    args.headOffset = static_cast<long long>(rule.headOffset);
    args.dropout = rule.dropout;
    args.firstSequence = static_cast<long long>(rule.firstSequence);
}
} // namespace

void CudaBackend::attentionForward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t sequences,
                                   const std::vector<int64_t>& queryPositions,
                                   const std::vector<int64_t>& keyPositions, Tensor& o, Tensor& lse,
                                   const ScoreRule& rule) {
    const cuda::AttentionDims dims = attentionDims("attentionForward", q, k, v, sequences, queryPositions, keyPositions);
    checkShape("attentionForward", "o", o, q.shape(), q.type());
    checkShape("attentionForward", "lse", lse, {sequences * dims.queries, dims.queryHeads}, q.type());
    // Every query must see a key (the CPU backend's rule): the smallest key position bounds them all.
    const int64_t minKey = keyPositions.empty() ? INT64_MAX : *std::min_element(keyPositions.begin(), keyPositions.end());
    for (size_t i = 0; i < queryPositions.size(); ++i)
        if (queryPositions[i] < minKey)
            fail("attentionForward", "query " + std::to_string(i) + " (position " +
                                         std::to_string(queryPositions[i]) + ") sees no key");
    touched(o);
    touched(lse);
    float* lseF = fp32View(lse);
    Scratch qp(allocator_, dims.queries * 8), kp(allocator_, dims.keys * 8);
    cuda::AttentionArgs args = attentionArgs(dims, queryPositions, keyPositions, qp, kp);
    withRule(args, rule);
    void* lseT = lse.type() == ElementType::F32 ? nullptr : lse.data<void>();
    // Soft-capped, windowed and ALiBi scores and dropped probabilities run on the tiled kernels, which apply the rule to
    // each score as they form it (the GEMM path masks causally only, and its backward overwrites its score buffer with dP before the score
    // gradient that needs the cap's slope).
    if (attention_ == CudaAttention::Gemm && !rule.changesScores())
        attentionGemmForward(dt(q), args, q.data<void>(), k.data<void>(), v.data<void>(), o.data<void>(), lseF, lseT);
    else
        cuda::attentionForward(kc_, dt(q), args, q.data<void>(), k.data<void>(), v.data<void>(), o.data<void>(), lseF,
                               lseT);
}

void CudaBackend::attentionBackward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& o, const Tensor& lse, int64_t sequences,
                                    const std::vector<int64_t>& queryPositions,
                                    const std::vector<int64_t>& keyPositions, Tensor& dq, Tensor& dk,
                                    Tensor& dv, const ScoreRule& rule) {
    const cuda::AttentionDims dims =
        attentionDims("attentionBackward", q, k, v, sequences, queryPositions, keyPositions);
    checkShape("attentionBackward", "dout", dout, q.shape(), q.type());
    checkShape("attentionBackward", "o", o, q.shape(), q.type());
    checkShape("attentionBackward", "lse", lse, {sequences * dims.queries, dims.queryHeads}, q.type());
    checkShape("attentionBackward", "dq", dq, q.shape(), q.type());
    checkShape("attentionBackward", "dk", dk, k.shape(), q.type());
    checkShape("attentionBackward", "dv", dv, v.shape(), q.type());
    const float* lseF = statistics("attentionBackward", "lse", lse);
    touched(dq);
    touched(dk);
    touched(dv);
    Scratch qp(allocator_, dims.queries * 8), kp(allocator_, dims.keys * 8);
    Scratch delta(allocator_, sequences * dims.queries * dims.queryHeads * 4);
    cuda::AttentionArgs args = attentionArgs(dims, queryPositions, keyPositions, qp, kp);
    withRule(args, rule);
    if (attention_ == CudaAttention::Gemm && !rule.changesScores())   // a score rule: the tiled kernels, as forward
        attentionGemmBackward(dt(q), args, dout.data<void>(), q.data<void>(), k.data<void>(), v.data<void>(),
                              o.data<void>(), lseF, delta.as<float>(), dq.data<void>(), dk.data<void>(),
                              dv.data<void>());
    else
        cuda::attentionBackward(kc_, dt(q), args, dout.data<void>(), q.data<void>(), k.data<void>(), v.data<void>(),
                                o.data<void>(), lseF, delta.as<float>(), dq.data<void>(), dk.data<void>(),
                                dv.data<void>());
}

// ---- embedding ----
void CudaBackend::embeddingForward(const std::vector<int32_t>& tokens, const Tensor& table,
                                   int64_t vocabBegin, Tensor& out) {
    const auto [vocabLocal, h] = matrixShape("embeddingForward", "table", table);
    checkShape("embeddingForward", "out", out, {static_cast<int64_t>(tokens.size()), h}, table.type());
    touched(out);
    const std::vector<int64_t> rows = localRows("embeddingForward", tokens, vocabBegin, vocabLocal);
    Scratch r(allocator_, static_cast<int64_t>(rows.size()) * 8);
    h2d(rows.data(), r.as<void>(), rows.size() * 8);
    cuda::embeddingForward(kc_, dt(table), table.data<void>(), r.as<int64_t>(), static_cast<int64_t>(tokens.size()),
                           h, out.data<void>());
}

void CudaBackend::embeddingBackward(const std::vector<int32_t>& tokens, const Tensor& dout,
                                    int64_t vocabBegin, Tensor& dtable) {
    const auto [vocabLocal, h] = matrixShape("embeddingBackward", "dtable", dtable);
    checkShape("embeddingBackward", "dout", dout, {static_cast<int64_t>(tokens.size()), h}, dtable.type());
    touched(dtable);
    const std::vector<int64_t> rows = localRows("embeddingBackward", tokens, vocabBegin, vocabLocal);
    // CSR on the host: for each distinct row, its tokens in token order, so the device sums them in that
    // order with no atomics (deterministic).
    std::vector<int64_t> order;
    for (size_t t = 0; t < rows.size(); ++t)
        if (rows[t] >= 0) order.push_back(static_cast<int64_t>(t));
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return rows[static_cast<size_t>(a)] < rows[static_cast<size_t>(b)];
    });
    std::vector<int64_t> unique, offsets{0};
    for (size_t i = 0; i < order.size(); ++i) {
        const int64_t row = rows[static_cast<size_t>(order[i])];
        if (unique.empty() || unique.back() != row) {
            if (!unique.empty()) offsets.push_back(static_cast<int64_t>(i));
            unique.push_back(row);
        }
    }
    offsets.push_back(static_cast<int64_t>(order.size()));
    if (unique.empty()) return;
    Scratch u(allocator_, static_cast<int64_t>(unique.size()) * 8), off(allocator_, static_cast<int64_t>(offsets.size()) * 8),
        idx(allocator_, static_cast<int64_t>(order.size()) * 8);
    h2d(unique.data(), u.as<void>(), unique.size() * 8);
    h2d(offsets.data(), off.as<void>(), offsets.size() * 8);
    h2d(order.data(), idx.as<void>(), order.size() * 8);
    cuda::embeddingBackward(kc_, dt(dout), dout.data<void>(), u.as<int64_t>(), off.as<int64_t>(), idx.as<int64_t>(),
                            static_cast<int64_t>(unique.size()), h, dtable.data<void>());
}

// ---- cross-entropy pieces ----
std::vector<double> CudaBackend::rowMax(const Tensor& logits) {
    const auto [n, v] = logitShape("rowMax", logits);
    Scratch out(allocator_, n * 4);
    cuda::rowMax(kc_, dt(logits), logits.data<void>(), n, v, out.as<float>());
    return d2hFloats(out.as<float>(), n);
}

std::vector<double> CudaBackend::rowSumExp(const Tensor& logits, const std::vector<double>& max) {
    const auto [n, v] = logitShape("rowSumExp", logits);
    rowVector("rowSumExp", "max", max, n);
    Scratch m(allocator_, n * 4), out(allocator_, n * 4);
    h2dFloats(max, m.as<float>());
    cuda::rowSumExp(kc_, dt(logits), logits.data<void>(), m.as<float>(), n, v, out.as<float>());
    return d2hFloats(out.as<float>(), n);
}

std::vector<double> CudaBackend::targetLogits(const Tensor& logits, const std::vector<int32_t>& targets,
                                              int64_t vocabBegin) {
    const auto [n, v] = logitShape("targetLogits", logits);
    if (static_cast<int64_t>(targets.size()) != n)
        fail("targetLogits", std::to_string(targets.size()) + " targets for logits " + logits.shapeString());
    const std::vector<int64_t> cols = localRows("targetLogits", targets, vocabBegin, v);
    Scratch c(allocator_, n * 8), out(allocator_, n * 4);
    h2d(cols.data(), c.as<void>(), cols.size() * 8);
    cuda::gatherColumns(kc_, dt(logits), logits.data<void>(), c.as<int64_t>(), n, v, out.as<float>());
    return d2hFloats(out.as<float>(), n);
}

void CudaBackend::crossEntropyBackward(Tensor& logits, const std::vector<double>& max,
                                       const std::vector<double>& sumExp, const std::vector<int32_t>& targets,
                                       int64_t vocabBegin, double s) {
    const auto [n, v] = logitShape("crossEntropyBackward", logits);
    rowVector("crossEntropyBackward", "max", max, n);
    rowVector("crossEntropyBackward", "sumExp", sumExp, n);
    if (static_cast<int64_t>(targets.size()) != n)
        fail("crossEntropyBackward", std::to_string(targets.size()) + " targets for logits " + logits.shapeString());
    touched(logits);
    const std::vector<int64_t> cols = localRows("crossEntropyBackward", targets, vocabBegin, v);
    Scratch m(allocator_, n * 4), se(allocator_, n * 4), c(allocator_, n * 8);
    h2dFloats(max, m.as<float>());
    h2dFloats(sumExp, se.as<float>());
    h2d(cols.data(), c.as<void>(), cols.size() * 8);
    cuda::crossEntropyBackward(kc_, dt(logits), logits.data<void>(), m.as<float>(), se.as<float>(), c.as<int64_t>(),
                               n, v, static_cast<float>(s));
}

// ---- optimizer ----
void CudaBackend::adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                        double beta2, double eps, double weightDecay, int64_t step) {
    check("adamw", "param", param);
    check("adamw", "grad", grad);
    check("adamw", "m", m);
    check("adamw", "v", v);
    if (grad.shape() != param.shape() || m.shape() != param.shape() || v.shape() != param.shape())
        fail("adamw", "shapes differ: param " + param.shapeString() + ", grad " + grad.shapeString() + ", m " +
                          m.shapeString() + ", v " + v.shapeString());
    if (m.type() != v.type()) fail("adamw", "m is " + typeName(m.type()) + " but v is " + typeName(v.type()));
    if (step < 1) fail("adamw", "step " + std::to_string(step) + " (steps count from 1)");
    // Mixed precision (Micikevicius et al. 2018): a bf16 parameter with fp32 moments is updated through its
    // fp32 master copy, made from the bf16 values at the first step.
    float* master = nullptr;
    if (param.type() == ElementType::Bf16 && m.type() == ElementType::F32) {
        auto it = masters_.find(param.data<void>());
        if (it == masters_.end()) {
            Tensor copy = empty(param.shape(), MemoryCategory::Optimizer);   // fp32
            cuda::widen(kc_, dt(param), param.data<void>(), copy.data<float>(), param.numel());
            it = masters_.emplace(param.data<void>(), std::move(copy)).first;
        }
        master = it->second.data<float>();
    }
    touchedShadowOnly(param);
    cuda::AdamParams a{};
    a.lr = static_cast<float>(lr);
    a.beta1 = static_cast<float>(beta1);
    a.beta2 = static_cast<float>(beta2);
    a.eps = static_cast<float>(eps);
    a.weightDecay = static_cast<float>(weightDecay);
    a.bias1 = static_cast<float>(1.0 - std::pow(beta1, static_cast<double>(step)));
    a.bias2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step))));
    cuda::adamw(kc_, dt(param), param.data<void>(), dt(grad), grad.data<void>(), dt(m), m.data<void>(),
                v.data<void>(), master, param.numel(), a);
}

double CudaBackend::sumSquares(const Tensor& t) {
    check("sumSquares", "t", t);
    const cuda::ReductionLaunch l = cuda::planReduction(t.numel());
    Scratch partials(allocator_, l.blocks * 8), out(allocator_, 8);
    cuda::sumSquares(kc_, dt(t), t.data<void>(), t.numel(), partials.as<double>(), out.as<double>());
    double result = 0.0;
    checkCuda(cudaMemcpyAsync(&result, out.as<void>(), 8, cudaMemcpyDeviceToHost, stream_), "sumSquares result");
    checkCuda(cudaStreamSynchronize(stream_), "sumSquares");
    return result;
}

// Each tensor's sum of squares (the same two-stage fp64 reduction as sumSquares) into one device array, read
// back with one copy and one wait, then added on the host in the tensors' order: the same double as a loop of
// sumSquares, without a stream synchronisation per tensor.
double CudaBackend::sumSquaresAll(const std::vector<Tensor>& ts) {
    std::vector<cuda::ReductionLaunch> plans;
    int64_t blocks = 0;
    for (const Tensor& t : ts) {
        check("sumSquaresAll", "ts", t);
        plans.push_back(cuda::planReduction(t.numel()));
        blocks += plans.back().blocks;
    }
    if (ts.empty()) return 0.0;
    Scratch partials(allocator_, blocks * 8), outs(allocator_, static_cast<int64_t>(ts.size()) * 8);
    int64_t at = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
        cuda::sumSquares(kc_, dt(ts[i]), ts[i].data<void>(), ts[i].numel(), partials.as<double>() + at,
                         outs.as<double>() + i);
        at += plans[i].blocks;
    }
    std::vector<double> each(ts.size(), 0.0);
    checkCuda(cudaMemcpyAsync(each.data(), outs.as<void>(), each.size() * 8, cudaMemcpyDeviceToHost, stream_),
              "sumSquaresAll results");
    checkCuda(cudaStreamSynchronize(stream_), "sumSquaresAll");
    double sum = 0.0;
    for (double v : each) sum += v;
    return sum;
}

cuda::AttentionArgs CudaBackend::attentionArgs(const cuda::AttentionDims& dims,
                                               const std::vector<int64_t>& queryPositions,
                                               const std::vector<int64_t>& keyPositions, Scratch& qp,
                                               Scratch& kp) {
    h2d(queryPositions.data(), qp.as<void>(), queryPositions.size() * 8);
    h2d(keyPositions.data(), kp.as<void>(), keyPositions.size() * 8);
    cuda::AttentionArgs a;
    a.dims = dims;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.headDim)));   // 1 / sqrt(d)
    a.queryPositions = qp.as<int64_t>();
    a.keyPositions = kp.as<int64_t>();
    return a;
}

cuda::AttentionDims CudaBackend::attentionDims(const char* op, const Tensor& q, const Tensor& k,
                                               const Tensor& v, int64_t sequences,
                                               const std::vector<int64_t>& queryPositions,
                                               const std::vector<int64_t>& keyPositions) {
    check(op, "q", q);
    check(op, "k", k);
    if (q.shape().size() != 3 || k.shape().size() != 3)
        fail(op, "q " + q.shapeString() + " and k " + k.shapeString() + " must be [tokens, heads, d]");
    checkShape(op, "k", k, k.shape(), q.type());
    checkShape(op, "v", v, k.shape(), q.type());
    if (sequences < 1) fail(op, std::to_string(sequences) + " sequences");
    cuda::AttentionDims d;
    d.sequences = sequences;
    d.queries = static_cast<int64_t>(queryPositions.size());
    d.keys = static_cast<int64_t>(keyPositions.size());
    d.queryHeads = q.dim(1);
    d.kvHeads = k.dim(1);
    d.headDim = q.dim(2);
    if (q.dim(0) != sequences * d.queries || k.dim(0) != sequences * d.keys)
        fail(op, "q " + q.shapeString() + " and k " + k.shapeString() + " do not hold " + std::to_string(sequences) +
                     " sequences of " + std::to_string(d.queries) + " queries and " + std::to_string(d.keys) +
                     " keys");
    if (k.dim(2) != d.headDim) fail(op, "head dims differ: q " + q.shapeString() + ", k " + k.shapeString());
    if (d.kvHeads < 1 || d.queryHeads % d.kvHeads != 0)
        fail(op, "query heads of q " + q.shapeString() + " are not a multiple of kv heads of k " + k.shapeString());
    return d;
}

std::vector<int64_t> CudaBackend::localRows(const char* op, const std::vector<int32_t>& tokens,
                                            int64_t vocabBegin, int64_t vocabLocal) {
    std::vector<int64_t> rows(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
        if (tokens[t] < 0) fail(op, "negative token id " + std::to_string(tokens[t]));
        const int64_t local = static_cast<int64_t>(tokens[t]) - vocabBegin;
        rows[t] = local >= 0 && local < vocabLocal ? local : -1;
    }
    return rows;
}

} // namespace tessel::exec::detail
