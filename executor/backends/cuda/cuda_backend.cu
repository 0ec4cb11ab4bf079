// The CUDA backend: tensors in the caching allocator, GEMMs through cuBLASLt (bf16 or fp32 in, fp32
// accumulate), own kernels for the rest, fp32 master weights and fp32 statistics kept beside bf16 tensors,
// and CUDA-event timing of actions on the compute stream.
//
// fp32 shadows: in mixed mode the tensors a later op reads back as statistics (the norms' mean and rstd, the
// attention log-sum-exp) are bf16 because their category is Activations, which would cost their backward
// passes up to 0.4% (rstd) or 3% (exp(S - lse)) in accuracy. The backend keeps an fp32 copy beside each one
// (allocated under the same category, so its bytes are counted), keyed on the tensor's storage, dropped
// when the storage is freed or overwritten. Master weights are kept the same way, under Optimizer.
#include "cuda_backend.hpp"

#include "caching_allocator.hpp"
#include "kernels.cuh"
#include "launch_plan.hpp"

#include "../../src/backend_checks.hpp"

#include "../../comm/nccl/staged_comm.hpp"

#include "tessel/cost/errors.hpp"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessel::exec {

namespace {

using cuda::DType;

void checkCuda(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess) throw DeviceError("cuda backend: " + what + ": " + cudaGetErrorString(e));
}

void checkLt(cublasStatus_t s, const std::string& what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw DeviceError("cuda backend: " + what + ": cuBLASLt status " + std::to_string(static_cast<int>(s)));
}


std::string typeName(ElementType t) { return toString(t); }

using detail::rowWidth;

using detail::shapeText;

class CudaRawAllocator final : public cuda::RawAllocator {
public:
    void* allocate(int64_t bytes) override {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();   // clear the sticky-free error so the caller may retry
            return nullptr;
        }
        checkCuda(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
        return p;
    }
    void release(void* p, int64_t /*bytes*/) override { (void)cudaFree(p); }
};

// A block of device scratch from the caching allocator, returned when it goes out of scope. Safe while a
// kernel still uses it: the next user of the block is queued on the same stream, after that kernel.
class Scratch {
public:
    Scratch(cuda::CachingAllocator& a, int64_t bytes) : a_(a), p_(a.allocate(std::max<int64_t>(bytes, 1))) {}
    ~Scratch() { a_.free(p_); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    template <typename T>
    T* as() const { return static_cast<T*>(p_); }

private:
    cuda::CachingAllocator& a_;
    void* p_;
};

struct GemmKey {
    bool transA, transB, accumulate;
    int64_t m, n, k;
    int type;
    bool operator<(const GemmKey& o) const {
        return std::tie(transA, transB, accumulate, m, n, k, type) <
               std::tie(o.transA, o.transB, o.accumulate, o.m, o.n, o.k, o.type);
    }
};

// A matmul plan: descriptors and the heuristic's algorithm for one shape, made once and reused.
struct GemmPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
};

class CudaBackend;

class CudaStaging final : public DeviceStaging {
public:
    explicit CudaStaging(CudaBackend& be) : be_(be) {}
    void toHost(const Tensor& device, float* host) override;
    void fromHost(const float* host, Tensor& device) override;

private:
    CudaBackend& be_;
};

class CudaBackend final : public Backend, public detail::BackendChecks<CudaBackend> {
    using Checks = detail::BackendChecks<CudaBackend>;

public:
    static constexpr const char* kCheckName = "cuda backend";
    CudaBackend(CudaPrecision precision, int device) : precision_(precision), device_(device), allocator_(raw_) {
        const int count = cudaDeviceCount();
        if (count == 0) throw DeviceError("cuda backend: no CUDA device answers on this machine");
        if (device < 0 || device >= count)
            throw DeviceError("cuda backend: device " + std::to_string(device) + " does not exist (" +
                              std::to_string(count) + " present)");
        checkCuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
        checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
        cudaDeviceProp prop{};
        checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
        kc_.stream = stream_;
        kc_.multiprocessors = prop.multiProcessorCount;
        provenance_.deviceName = prop.name;
        provenance_.computeMajor = prop.major;
        provenance_.computeMinor = prop.minor;
        provenance_.multiprocessors = prop.multiProcessorCount;
        provenance_.memoryBytes = static_cast<int64_t>(prop.totalGlobalMem);
        int driver = 0, runtime = 0, nccl = 0;
        (void)cudaDriverGetVersion(&driver);
        (void)cudaRuntimeGetVersion(&runtime);
        provenance_.driver = cuda::cudaVersionText(driver);
        provenance_.cudaRuntime = cuda::cudaVersionText(runtime);
        provenance_.cublas = cuda::cublasVersionText(static_cast<int64_t>(cublasLtGetVersion()));
        if (ncclGetVersion(&nccl) == ncclSuccess) provenance_.nccl = cuda::ncclVersionText(nccl);
        checkLt(cublasLtCreate(&lt_), "cublasLtCreate");
        workspace_ = allocator_.allocate(cuda::kGemmWorkspaceBytes);
    }

    ~CudaBackend() override {
        (void)cudaSetDevice(device_);
        (void)cudaStreamSynchronize(stream_);
        // The maps hold tensors whose storage returns to this backend: empty them while it is whole.
        auto shadows = std::move(shadows_);
        auto masters = std::move(masters_);
        shadows.clear();
        masters.clear();
        for (auto& [key, plan] : gemmPlans_) {
            cublasLtMatrixLayoutDestroy(plan.a);
            cublasLtMatrixLayoutDestroy(plan.b);
            cublasLtMatrixLayoutDestroy(plan.c);
            cublasLtMatmulDescDestroy(plan.desc);
        }
        for (auto& r : regions_) {
            cudaEventDestroy(r.first);
            cudaEventDestroy(r.second);
        }
        if (base_) cudaEventDestroy(base_);
        allocator_.free(workspace_);
        cublasLtDestroy(lt_);
        cudaStreamDestroy(stream_);
    }

    std::string name() const override { return "cuda"; }
    ElementType elementType() const override {
        return precision_ == CudaPrecision::Mixed ? ElementType::Bf16 : ElementType::F32;
    }
    ElementType elementTypeFor(MemoryCategory c) const override {
        return c == MemoryCategory::Optimizer ? ElementType::F32 : elementType();
    }

    // ---- host <-> device ----
    void upload(const std::vector<double>& host, Tensor& dst) override {
        check("upload", "dst", dst);
        if (static_cast<int64_t>(host.size()) != dst.numel())
            fail("upload", std::to_string(host.size()) + " host values for a tensor " + dst.shapeString());
        touched(dst);
        const size_t n = host.size();
        if (dst.type() == ElementType::F32) {
            std::vector<float> v(n);
            for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(host[i]);
            h2d(v.data(), dst.data<void>(), n * sizeof(float));
        } else {
            std::vector<__nv_bfloat16> v(n);
            for (size_t i = 0; i < n; ++i) v[i] = __float2bfloat16_rn(static_cast<float>(host[i]));
            h2d(v.data(), dst.data<void>(), n * sizeof(__nv_bfloat16));
        }
    }

    std::vector<double> download(const Tensor& src) override {
        check("download", "src", src);
        std::vector<float> f = toFloats(src);
        return std::vector<double>(f.begin(), f.end());
    }

    void copy(const Tensor& src, Tensor& dst) override {
        check("copy", "src", src);
        check("copy", "dst", dst);
        if (src.numel() != dst.numel()) fail("copy", "sizes differ: " + src.shapeString() + " and " + dst.shapeString());
        touched(dst);
        cuda::copy2d(kc_, dt(src), src.data<void>(), src.numel(), 0, dt(dst), dst.data<void>(), dst.numel(), 0, 1,
                     src.numel(), 1.0f, false);
        auto it = shadows_.find(src.data<void>());
        if (it != shadows_.end() && src.data<void>() != dst.data<void>()) {
            Tensor& shadow = shadowFor(dst);
            checkCuda(cudaMemcpyAsync(shadow.data<void>(), it->second.data<void>(),
                                      static_cast<size_t>(src.numel()) * sizeof(float), cudaMemcpyDeviceToDevice,
                                      stream_),
                      "copy of fp32 statistics");
        }
    }

    void fill(Tensor& t, double value) override {
        check("fill", "t", t);
        touched(t);
        cuda::fill(kc_, dt(t), t.data<void>(), t.numel(), static_cast<float>(value));
    }

    void add(const Tensor& a, Tensor& inout, double s) override {
        check("add", "a", a);
        check("add", "inout", inout);
        if (a.numel() != inout.numel()) fail("add", "sizes differ: " + a.shapeString() + " and " + inout.shapeString());
        touched(inout);
        // inout += scale * a
        cuda::copy2d(kc_, dt(a), a.data<void>(), a.numel(), 0, dt(inout), inout.data<void>(), inout.numel(), 0, 1,
                     a.numel(), static_cast<float>(s), true);
    }

    void scale(Tensor& t, double factor) override {
        check("scale", "t", t);
        touched(t);
        cuda::scale(kc_, dt(t), t.data<void>(), t.numel(), static_cast<float>(factor));
    }

    void copyRows(const Tensor& src, int64_t rowBegin, Tensor& dst) override {
        rowBlock("copyRows", "src", src, "dst", dst, rowBegin);
        touched(dst);
        const int64_t w = rowWidth(src);
        cuda::copy2d(kc_, dt(src), src.data<void>(), 0, rowBegin * w, dt(dst), dst.data<void>(), 0, 0, 1, dst.numel(),
                     1.0f, false);
    }

    void copyRowsInto(const Tensor& src, Tensor& dst, int64_t rowBegin) override {
        rowBlock("copyRowsInto", "dst", dst, "src", src, rowBegin);
        touched(dst);
        const int64_t w = rowWidth(dst);
        cuda::copy2d(kc_, dt(src), src.data<void>(), 0, 0, dt(dst), dst.data<void>(), 0, rowBegin * w, 1, src.numel(),
                     1.0f, false);
    }

    void copyColumns(const Tensor& src, int64_t colBegin, Tensor& dst) override {
        columnBlock("copyColumns", "src", src, "dst", dst, colBegin);
        touched(dst);
        const int64_t n = src.dim(0), c = rowWidth(src), w = rowWidth(dst);
        cuda::copy2d(kc_, dt(src), src.data<void>(), c, colBegin, dt(dst), dst.data<void>(), w, 0, n, w, 1.0f, false);
    }

    void addColumnsInto(const Tensor& src, Tensor& dst, int64_t colBegin) override {
        columnBlock("addColumnsInto", "dst", dst, "src", src, colBegin);
        touched(dst);
        const int64_t n = dst.dim(0), c = rowWidth(dst), w = rowWidth(src);
        cuda::copy2d(kc_, dt(src), src.data<void>(), w, 0, dt(dst), dst.data<void>(), c, colBegin, n, w, 1.0f, true);
    }

    // ---- GEMM (cuBLASLt) ----
    void gemm(bool transA, bool transB, double alpha, const Tensor& a, const Tensor& b, double beta,
              Tensor& c) override {
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

    void addBias(Tensor& x, const Tensor& bias) override {
        const auto [n, c] = matrixShape("addBias", "x", x);
        checkBias("addBias", "bias", bias, c);
        touched(x);
        cuda::addBias(kc_, dt(x), x.data<void>(), dt(bias), bias.data<void>(), n, c);
    }

    void biasGrad(const Tensor& dy, Tensor& dbias) override {
        const auto [n, c] = matrixShape("biasGrad", "dy", dy);
        checkBias("biasGrad", "dbias", dbias, c);
        touched(dbias);
        Scratch partials(allocator_, cuda::planColumnSum(n, c).chunks * c * 4);
        cuda::biasGrad(kc_, dt(dy), dy.data<void>(), n, c, partials.as<float>(), dt(dbias), dbias.data<void>());
    }

    // ---- norms ----
    void normForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool rms, double eps, Tensor& y,
                     Tensor& mean, Tensor& rstd) override {
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

    void normBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                      bool rms, Tensor& dx, Tensor& dgamma, Tensor& dbeta) override {
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
    void geluForward(const Tensor& x, Tensor& y) override {
        check("geluForward", "x", x);
        checkShape("geluForward", "y", y, x.shape(), x.type());
        touched(y);
        cuda::geluForward(kc_, dt(x), x.data<void>(), y.data<void>(), x.numel());
    }
    void geluBackward(const Tensor& dy, const Tensor& x, Tensor& dx) override {
        check("geluBackward", "x", x);
        checkShape("geluBackward", "dy", dy, x.shape(), x.type());
        checkShape("geluBackward", "dx", dx, x.shape(), x.type());
        touched(dx);
        cuda::geluBackward(kc_, dt(x), dy.data<void>(), x.data<void>(), dx.data<void>(), x.numel());
    }
    void swigluForward(const Tensor& x, Tensor& y) override {
        const auto [n, twoF] = matrixShape("swigluForward", "x", x);
        if (twoF % 2 != 0) fail("swigluForward", "x " + x.shapeString() + " has an odd number of columns");
        checkShape("swigluForward", "y", y, {n, twoF / 2}, x.type());
        touched(y);
        cuda::swigluForward(kc_, dt(x), x.data<void>(), y.data<void>(), n, twoF / 2);
    }
    void swigluBackward(const Tensor& dy, const Tensor& x, Tensor& dx) override {
        const auto [n, twoF] = matrixShape("swigluBackward", "x", x);
        if (twoF % 2 != 0) fail("swigluBackward", "x " + x.shapeString() + " has an odd number of columns");
        checkShape("swigluBackward", "dy", dy, {n, twoF / 2}, x.type());
        checkShape("swigluBackward", "dx", dx, {n, twoF}, x.type());
        touched(dx);
        cuda::swigluBackward(kc_, dt(x), dy.data<void>(), x.data<void>(), dx.data<void>(), n, twoF / 2);
    }

    void rope(Tensor& x, const std::vector<int64_t>& positions, double base, bool inverse) override {
        const auto [tokens, heads, d] = ropeShape(x, positions);
        touched(x);
        // theta_i = base^(-2i/d) (RoFormer eq. 15), in fp64 on the host
        std::vector<double> invFreq(static_cast<size_t>(d / 2));
        for (int64_t i = 0; i < d / 2; ++i)
            invFreq[static_cast<size_t>(i)] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        Scratch pos(allocator_, tokens * 8), freq(allocator_, (d / 2) * 8);
        h2d(positions.data(), pos.as<void>(), positions.size() * 8);
        h2d(invFreq.data(), freq.as<void>(), invFreq.size() * 8);
        cuda::rope(kc_, dt(x), x.data<void>(), pos.as<int64_t>(), freq.as<double>(), tokens, heads, d, inverse);
    }

    // ---- attention ----
    void attentionForward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t sequences,
                          const std::vector<int64_t>& queryPositions, const std::vector<int64_t>& keyPositions,
                          Tensor& o, Tensor& lse) override {
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
        const cuda::AttentionArgs args = attentionArgs(dims, queryPositions, keyPositions, qp, kp);
        cuda::attentionForward(kc_, dt(q), args, q.data<void>(), k.data<void>(), v.data<void>(), o.data<void>(), lseF,
                               lse.type() == ElementType::F32 ? nullptr : lse.data<void>());
    }

    void attentionBackward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                           const Tensor& lse, int64_t sequences, const std::vector<int64_t>& queryPositions,
                           const std::vector<int64_t>& keyPositions, Tensor& dq, Tensor& dk, Tensor& dv) override {
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
        const cuda::AttentionArgs args = attentionArgs(dims, queryPositions, keyPositions, qp, kp);
        cuda::attentionBackward(kc_, dt(q), args, dout.data<void>(), q.data<void>(), k.data<void>(), v.data<void>(),
                                o.data<void>(), lseF, delta.as<float>(), dq.data<void>(), dk.data<void>(),
                                dv.data<void>());
    }

    // ---- embedding ----
    void embeddingForward(const std::vector<int32_t>& tokens, const Tensor& table, int64_t vocabBegin,
                          Tensor& out) override {
        const auto [vocabLocal, h] = matrixShape("embeddingForward", "table", table);
        checkShape("embeddingForward", "out", out, {static_cast<int64_t>(tokens.size()), h}, table.type());
        touched(out);
        const std::vector<int64_t> rows = localRows("embeddingForward", tokens, vocabBegin, vocabLocal);
        Scratch r(allocator_, static_cast<int64_t>(rows.size()) * 8);
        h2d(rows.data(), r.as<void>(), rows.size() * 8);
        cuda::embeddingForward(kc_, dt(table), table.data<void>(), r.as<int64_t>(), static_cast<int64_t>(tokens.size()),
                               h, out.data<void>());
    }

    void embeddingBackward(const std::vector<int32_t>& tokens, const Tensor& dout, int64_t vocabBegin,
                           Tensor& dtable) override {
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
    std::vector<double> rowMax(const Tensor& logits) override {
        const auto [n, v] = logitShape("rowMax", logits);
        Scratch out(allocator_, n * 4);
        cuda::rowMax(kc_, dt(logits), logits.data<void>(), n, v, out.as<float>());
        return d2hFloats(out.as<float>(), n);
    }

    std::vector<double> rowSumExp(const Tensor& logits, const std::vector<double>& max) override {
        const auto [n, v] = logitShape("rowSumExp", logits);
        rowVector("rowSumExp", "max", max, n);
        Scratch m(allocator_, n * 4), out(allocator_, n * 4);
        h2dFloats(max, m.as<float>());
        cuda::rowSumExp(kc_, dt(logits), logits.data<void>(), m.as<float>(), n, v, out.as<float>());
        return d2hFloats(out.as<float>(), n);
    }

    std::vector<double> targetLogits(const Tensor& logits, const std::vector<int32_t>& targets,
                                     int64_t vocabBegin) override {
        const auto [n, v] = logitShape("targetLogits", logits);
        if (static_cast<int64_t>(targets.size()) != n)
            fail("targetLogits", std::to_string(targets.size()) + " targets for logits " + logits.shapeString());
        const std::vector<int64_t> cols = localRows("targetLogits", targets, vocabBegin, v);
        Scratch c(allocator_, n * 8), out(allocator_, n * 4);
        h2d(cols.data(), c.as<void>(), cols.size() * 8);
        cuda::gatherColumns(kc_, dt(logits), logits.data<void>(), c.as<int64_t>(), n, v, out.as<float>());
        return d2hFloats(out.as<float>(), n);
    }

    void crossEntropyBackward(Tensor& logits, const std::vector<double>& max, const std::vector<double>& sumExp,
                              const std::vector<int32_t>& targets, int64_t vocabBegin, double s) override {
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
    void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1, double beta2,
               double eps, double weightDecay, int64_t step) override {
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

    double sumSquares(const Tensor& t) override {
        check("sumSquares", "t", t);
        const cuda::ReductionLaunch l = cuda::planReduction(t.numel());
        Scratch partials(allocator_, l.blocks * 8), out(allocator_, 8);
        cuda::sumSquares(kc_, dt(t), t.data<void>(), t.numel(), partials.as<double>(), out.as<double>());
        double result = 0.0;
        checkCuda(cudaMemcpyAsync(&result, out.as<void>(), 8, cudaMemcpyDeviceToHost, stream_), "sumSquares result");
        checkCuda(cudaStreamSynchronize(stream_), "sumSquares");
        return result;
    }

    // ---- asynchronous execution and timing ----
    void synchronize() override { checkCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
    bool timesOnDevice() const override { return true; }

    int64_t beginTimedRegion() override {
        if (!base_) {
            checkCuda(cudaEventCreate(&base_), "cudaEventCreate");
            checkCuda(cudaEventRecord(base_, stream_), "cudaEventRecord");
        }
        cudaEvent_t start = nullptr, end = nullptr;
        checkCuda(cudaEventCreate(&start), "cudaEventCreate");
        checkCuda(cudaEventCreate(&end), "cudaEventCreate");
        checkCuda(cudaEventRecord(start, stream_), "cudaEventRecord");
        regions_.emplace_back(start, end);
        return firstHandle_ + static_cast<int64_t>(regions_.size()) - 1;
    }

    void endTimedRegion(int64_t handle) override {
        const int64_t i = handle - firstHandle_;
        if (i < 0 || i >= static_cast<int64_t>(regions_.size()))
            fail("endTimedRegion", "unknown region " + std::to_string(handle));
        checkCuda(cudaEventRecord(regions_[static_cast<size_t>(i)].second, stream_), "cudaEventRecord");
    }

    std::vector<TimedRegion> collectTimedRegions() override {
        std::vector<TimedRegion> out;
        for (size_t i = 0; i < regions_.size(); ++i) {
            auto [start, end] = regions_[i];
            checkCuda(cudaEventSynchronize(end), "cudaEventSynchronize (a region was begun but never ended?)");
            float sinceBase = 0.0f, duration = 0.0f;
            checkCuda(cudaEventElapsedTime(&sinceBase, base_, start), "cudaEventElapsedTime");
            checkCuda(cudaEventElapsedTime(&duration, start, end), "cudaEventElapsedTime");
            out.push_back({firstHandle_ + static_cast<int64_t>(i), 1e-3 * sinceBase, 1e-3 * duration});
            cudaEventDestroy(start);
            cudaEventDestroy(end);
        }
        firstHandle_ += static_cast<int64_t>(regions_.size());
        regions_.clear();
        return out;
    }

    std::vector<std::pair<std::string, std::string>> provenance() const override { return provenance_.asPairs(); }

    // ---- for the communicators and the staging ----
    const cuda::DeviceProvenance& deviceProvenance() const { return provenance_; }
    cudaStream_t stream() const { return stream_; }
    int device() const { return device_; }
    int64_t peakReservedBytes() const { return allocator_.stats().peakReservedBytes; }

    std::vector<float> toFloats(const Tensor& src) {
        const size_t n = static_cast<size_t>(src.numel());
        std::vector<float> out(n);
        if (src.type() == ElementType::F32) {
            d2h(src.data<void>(), out.data(), n * sizeof(float));
        } else {
            std::vector<__nv_bfloat16> raw(n);
            d2h(src.data<void>(), raw.data(), n * sizeof(__nv_bfloat16));
            for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(raw[i]);
        }
        return out;
    }

    void fromFloats(const float* host, Tensor& dst) {
        check("staging", "dst", dst);
        touched(dst);
        const size_t n = static_cast<size_t>(dst.numel());
        if (dst.type() == ElementType::F32) {
            h2d(host, dst.data<void>(), n * sizeof(float));
        } else {
            std::vector<__nv_bfloat16> raw(n);
            for (size_t i = 0; i < n; ++i) raw[i] = __float2bfloat16_rn(host[i]);
            h2d(raw.data(), dst.data<void>(), n * sizeof(__nv_bfloat16));
        }
    }

protected:
    void* allocateBytes(int64_t bytes) override { return allocator_.allocate(bytes); }

    void freeBytes(void* p, int64_t /*bytes*/) override {
        // Drop what the backend kept beside this storage; the extracted node's tensor frees its own storage
        // (a nested freeBytes) after the map is consistent again.
        auto shadow = shadows_.extract(p);
        auto master = masters_.extract(p);
        allocator_.free(p);
    }

private:
    static DType dt(const Tensor& t) { return t.type() == ElementType::F32 ? DType::F32 : DType::Bf16; }

    void h2d(const void* host, void* device, size_t bytes) {
        if (bytes == 0) return;
        checkCuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "host-to-device copy");
        // Pageable sources are staged before cudaMemcpyAsync returns; waiting keeps small uploads simple to
        // reason about (they are never on the hot path of a step).
        checkCuda(cudaStreamSynchronize(stream_), "host-to-device copy");
    }

    void d2h(const void* device, void* host, size_t bytes) {
        if (bytes == 0) return;
        checkCuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "device-to-host copy");
        checkCuda(cudaStreamSynchronize(stream_), "device-to-host copy");
    }

    void h2dFloats(const std::vector<double>& values, float* device) {
        std::vector<float> f(values.begin(), values.end());
        h2d(f.data(), device, f.size() * sizeof(float));
    }

    std::vector<double> d2hFloats(const float* device, int64_t n) {
        std::vector<float> f(static_cast<size_t>(n));
        d2h(device, f.data(), f.size() * sizeof(float));
        return std::vector<double>(f.begin(), f.end());
    }

    // A write other than adamw: the fp32 master and shadow kept for this storage no longer describe it.
    void touched(const Tensor& t) {
        auto shadow = shadows_.extract(t.data<void>());
        auto master = masters_.extract(t.data<void>());
    }
    void touchedShadowOnly(const Tensor& t) { auto shadow = shadows_.extract(t.data<void>()); }

    // The fp32 shadow of a statistics tensor (created, counted under its category, when missing).
    Tensor& shadowFor(const Tensor& t) {
        auto it = shadows_.find(t.data<void>());
        if (it == shadows_.end()) {
            // Allocated in the tensor's category and element type with the bytes of numel floats.
            Tensor s = empty({t.numel() * 4 / elementBytes(elementTypeFor(t.category()))}, t.category());
            it = shadows_.emplace(t.data<void>(), std::move(s)).first;
        }
        return it->second;
    }

    // Where an op writes fp32 statistics: the tensor itself when fp32, else its shadow.
    float* fp32View(const Tensor& t) {
        if (t.type() == ElementType::F32) return t.data<float>();
        return shadowFor(t).data<float>();
    }

    // Where an op reads fp32 statistics written by an earlier op.
    const float* statistics(const char* op, const char* what, const Tensor& t) {
        if (t.type() == ElementType::F32) return t.data<float>();
        auto it = shadows_.find(t.data<void>());
        if (it == shadows_.end())
            fail(op, std::string(what) + " was not written by this backend's forward op (its fp32 values are gone), "
                                         "so the backward pass cannot use it");
        return it->second.data<float>();
    }

    const GemmPlan& gemmPlan(const GemmKey& key) {
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

    cuda::AttentionArgs attentionArgs(const cuda::AttentionDims& dims, const std::vector<int64_t>& queryPositions,
                                      const std::vector<int64_t>& keyPositions, Scratch& qp, Scratch& kp) {
        h2d(queryPositions.data(), qp.as<void>(), queryPositions.size() * 8);
        h2d(keyPositions.data(), kp.as<void>(), keyPositions.size() * 8);
        cuda::AttentionArgs a;
        a.dims = dims;
        a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.headDim)));   // 1 / sqrt(d)
        a.queryPositions = qp.as<int64_t>();
        a.keyPositions = kp.as<int64_t>();
        return a;
    }

    cuda::AttentionDims attentionDims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                      int64_t sequences, const std::vector<int64_t>& queryPositions,
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

    static std::vector<int64_t> localRows(const char* op, const std::vector<int32_t>& tokens, int64_t vocabBegin,
                                          int64_t vocabLocal) {
        std::vector<int64_t> rows(tokens.size());
        for (size_t t = 0; t < tokens.size(); ++t) {
            if (tokens[t] < 0) fail(op, "negative token id " + std::to_string(tokens[t]));
            const int64_t local = static_cast<int64_t>(tokens[t]) - vocabBegin;
            rows[t] = local >= 0 && local < vocabLocal ? local : -1;
        }
        return rows;
    }

    // The backend holds f32 and bf16 tensors (the shared checks of backend_checks.hpp call this).
    friend class detail::BackendChecks<CudaBackend>;
    void checkType(const char* op, const char* what, const Tensor& t) const {
        if (t.type() != ElementType::F32 && t.type() != ElementType::Bf16)
            fail(op, std::string(what) + " is " + typeName(t.type()) + "; the cuda backend holds f32 and bf16 tensors");
    }

    // A shape and an element type.
    void checkShape(const char* op, const char* what, const Tensor& t, const std::vector<int64_t>& shape,
                    ElementType type) const {
        Checks::checkShape(op, what, t, shape);
        if (t.type() != type)
            fail(op, std::string(what) + " is " + typeName(t.type()) + ", expected " + typeName(type));
    }

    CudaPrecision precision_;
    int device_;
    cudaStream_t stream_ = nullptr;
    cuda::KernelContext kc_;
    cuda::DeviceProvenance provenance_;
    CudaRawAllocator raw_;
    cuda::CachingAllocator allocator_;
    cublasLtHandle_t lt_ = nullptr;
    void* workspace_ = nullptr;
    std::map<GemmKey, GemmPlan> gemmPlans_;
    std::unordered_map<void*, Tensor> shadows_;   // storage -> fp32 statistics beside a bf16 tensor
    std::unordered_map<void*, Tensor> masters_;   // storage -> fp32 master copy of a bf16 parameter
    cudaEvent_t base_ = nullptr;
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> regions_;
    int64_t firstHandle_ = 0;
};

void CudaStaging::toHost(const Tensor& device, float* host) {
    const std::vector<float> f = be_.toFloats(device);
    std::memcpy(host, f.data(), f.size() * sizeof(float));
}

void CudaStaging::fromHost(const float* host, Tensor& device) { be_.fromFloats(host, device); }

CudaBackend& cudaOf(Backend& b) {
    auto* c = dynamic_cast<CudaBackend*>(&b);
    if (!c) throw DeviceError("backend \"" + b.name() + "\" is not the cuda backend");
    return *c;
}

const CudaBackend& cudaOf(const Backend& b) {
    const auto* c = dynamic_cast<const CudaBackend*>(&b);
    if (!c) throw DeviceError("backend \"" + b.name() + "\" is not the cuda backend");
    return *c;
}

} // namespace

bool cudaBackendBuilt() { return true; }

int cudaDeviceCount() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();   // no driver or no device: "no GPU", whatever the error
        return 0;
    }
    return count;
}

std::unique_ptr<Backend> makeCudaBackend(CudaPrecision precision, int device) {
    return std::make_unique<CudaBackend>(precision, device);
}

int cudaDeviceForThisProcess() {
    const int count = cudaDeviceCount();
    if (count == 0) throw DeviceError("cuda backend: no CUDA device answers on this machine");
    int local = 0;
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"}) {
        if (const char* v = std::getenv(name)) {
            local = std::atoi(v);
            break;
        }
    }
    return local % count;
}

cuda::DeviceProvenance cudaProvenance(const Backend& backend) { return cudaOf(backend).deviceProvenance(); }
void* cudaComputeStream(Backend& backend) { return static_cast<void*>(cudaOf(backend).stream()); }
int cudaDeviceOf(const Backend& backend) { return cudaOf(backend).device(); }
std::shared_ptr<DeviceStaging> cudaStagingFor(Backend& backend) {
    return std::make_shared<CudaStaging>(cudaOf(backend));
}
int64_t cudaPeakReservedBytes(const Backend& backend) { return cudaOf(backend).peakReservedBytes(); }

} // namespace tessel::exec
