// The CUDA backend's GEMMs through cuBLASLt (a cached plan per shape), and the bias add and bias gradient.
#include "cuda_backend_impl.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

namespace tessel::exec::detail {

// ---- GEMM (cuBLASLt) ----
void CudaBackend::gemm(bool transA, bool transB, double alpha, const Tensor& a, const Tensor& b, double beta,
                       Tensor& c) {
    const auto [m, n, k] = gemmShape(transA, transB, a, b, c);
    if (a.type() != b.type() || a.type() != c.type())
        fail("gemm", "element types differ: a " + typeName(a.type()) + ", b " + typeName(b.type()) + ", c " +
                         typeName(c.type()));
    touched(c);
    if (m == 0 || n == 0) return;
    if (k == 0) {
        // No products: C = beta C (cuBLASLt needs k >= 1).
        if (beta == 0.0) cuda::fill(kc_, dt(c), c.data<void>(), c.numel(), 0.0f);
        else if (beta != 1.0) cuda::scale(kc_, dt(c), c.data<void>(), c.numel(), static_cast<float>(beta));
        return;
    }
    // Row-major C [m, n] = op(A) op(B) is column-major C^T [n, m] = op(B)^T op(A)^T: hand cuBLASLt B as its
    // first operand and A as its second, each seen column-major with its row-major leading dimension.
    const GemmPlan& plan = gemmPlan(GemmKey{transA, transB, beta != 0.0, m, n, k, static_cast<int>(a.type())});
    const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    checkLt(cublasLtMatmul(lt_, plan.desc, &fa, b.data<void>(), plan.a, a.data<void>(), plan.b, &fb,
                           c.data<void>(), plan.c, c.data<void>(), plan.c, &plan.algo, workspace_,
                           static_cast<size_t>(cuda::kGemmWorkspaceBytes), stream_),
            "cublasLtMatmul " + a.shapeString() + (transA ? "^T" : "") + " x " + b.shapeString() +
                (transB ? "^T" : ""));
}

void CudaBackend::addBias(Tensor& x, const Tensor& bias) {
    const auto [n, c] = matrixShape("addBias", "x", x);
    checkBias("addBias", "bias", bias, c);
    touched(x);
    cuda::addBias(kc_, dt(x), x.data<void>(), dt(bias), bias.data<void>(), n, c);
}

void CudaBackend::biasGrad(const Tensor& dy, Tensor& dbias) {
    const auto [n, c] = matrixShape("biasGrad", "dy", dy);
    checkBias("biasGrad", "dbias", dbias, c);
    touched(dbias);
    Scratch partials(allocator_, cuda::planColumnSum(n, c).chunks * c * 4);
    cuda::biasGrad(kc_, dt(dy), dy.data<void>(), n, c, partials.as<float>(), dt(dbias), dbias.data<void>());
}

const GemmPlan& CudaBackend::gemmPlan(const GemmKey& key) {
    auto it = gemmPlans_.find(key);
    if (it != gemmPlans_.end()) return it->second;
    const bool bf = key.type == static_cast<int>(ElementType::Bf16);
    const cudaDataType_t type = bf ? CUDA_R_16BF : CUDA_R_32F;
    GemmPlan p;
    // fp32 accumulation; the fp32 mode keeps full fp32 products (no TF32), as a checking mode should.
    checkLt(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t opA = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;   // first operand: B
    const cublasOperation_t opB = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N;   // second operand: A
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA), "TRANSA");
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB), "TRANSB");
    // Column-major views: B [k, n] row-major is [n, k] (ld n) or, transposed, [k, n] (ld k)...
    const uint64_t bRows = static_cast<uint64_t>(key.transB ? key.k : key.n);
    const uint64_t bCols = static_cast<uint64_t>(key.transB ? key.n : key.k);
    const uint64_t aRows = static_cast<uint64_t>(key.transA ? key.m : key.k);
    const uint64_t aCols = static_cast<uint64_t>(key.transA ? key.k : key.m);
    checkLt(cublasLtMatrixLayoutCreate(&p.a, type, bRows, bCols, static_cast<int64_t>(bRows)), "layout of b");
    checkLt(cublasLtMatrixLayoutCreate(&p.b, type, aRows, aCols, static_cast<int64_t>(aRows)), "layout of a");
    checkLt(cublasLtMatrixLayoutCreate(&p.c, type, static_cast<uint64_t>(key.n), static_cast<uint64_t>(key.m),
                                       key.n),
            "layout of c");
    cublasLtMatmulPreference_t pref = nullptr;
    checkLt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = static_cast<uint64_t>(cuda::kGemmWorkspaceBytes);
    checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
            "workspace preference");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0)
        throw DeviceError("cuda backend gemm: cuBLASLt has no algorithm for m " + std::to_string(key.m) + ", n " +
                          std::to_string(key.n) + ", k " + std::to_string(key.k));
    p.algo = result.algo;
    return gemmPlans_.emplace(key, p).first->second;
}

} // namespace tessel::exec::detail
