// Internal to tessel_cuda: the CudaBackend class and its helpers, seen by the three files that define it.
#pragma once

#include "cuda_backend.hpp"

#include "caching_allocator.hpp"
#include "kernels.cuh"
#include "launch_plan.hpp"

#include "../../src/backend_checks.hpp"

#include "tessel/cost/errors.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessel::exec {

namespace detail {

using cuda::DType;

inline void checkCuda(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess) throw DeviceError("cuda backend: " + what + ": " + cudaGetErrorString(e));
}

inline void checkLt(cublasStatus_t s, const std::string& what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw DeviceError("cuda backend: " + what + ": cuBLASLt status " + std::to_string(static_cast<int>(s)));
}

inline std::string typeName(ElementType t) { return toString(t); }

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

// A strided-batched column-major GEMM of the attention path (attention_gemm.cu):
// C [m, n] (ld ldc, batch stride sc) = alpha op(A) op(B) + beta C, `batch` times. op(A) is [m, k]: A stored
// [k, m] when transA, else [m, k]; op(B) is [k, n]: B stored [n, k] when transB, else [k, n]. A and B are of
// type `ab`, C of type `c`; align*: the largest power of two (<= 256) dividing every batch's address in bytes.
struct BatchedGemmKey {
    // transA, transB, m, n, k, batch, lda, ldb, ldc, sa, sb, sc, ab, c, alignA, alignB, alignC
    std::array<int64_t, 17> v{};
    bool operator<(const BatchedGemmKey& o) const { return v < o.v; }
};

// The CUDA backend: tensors in the caching allocator, GEMMs through cuBLASLt (bf16 or fp32 in, fp32
// accumulate), own kernels for the rest, fp32 master weights and fp32 statistics kept beside bf16 tensors,
// and CUDA-event timing of actions on the compute stream. Its members are defined in cuda_backend.cu (device,
// stream, memory, copies, fp32 shadows, timing), cuda_backend_gemm.cu (cuBLASLt) and cuda_backend_ops.cu (the
// launches of the other ops' kernels).
//
// fp32 shadows: in mixed mode the tensors a later op reads back as statistics (the norms' mean and rstd, the
// attention log-sum-exp) are bf16 because their category is Activations, which would cost their backward
// passes up to 0.4% (rstd) or 3% (exp(S - lse)) in accuracy. The backend keeps an fp32 copy beside each one
// (allocated under the same category, so its bytes are counted), keyed on the tensor's storage, dropped
// when the storage is freed or overwritten. Master weights are kept the same way, under Optimizer.
class CudaBackend final : public Backend, public detail::BackendChecks<CudaBackend> {
    using Checks = detail::BackendChecks<CudaBackend>;

public:
    static constexpr const char* kCheckName = "cuda backend";
    CudaBackend(CudaPrecision precision, int device);
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    ElementType elementType() const override {
        return precision_ == CudaPrecision::Mixed ? ElementType::Bf16 : ElementType::F32;
    }
    ElementType elementTypeFor(MemoryCategory c) const override {
        return c == MemoryCategory::Optimizer ? ElementType::F32 : elementType();
    }

    // ---- host <-> device (cuda_backend.cu) ----
    void upload(const std::vector<double>& host, Tensor& dst) override;
    std::vector<double> download(const Tensor& src) override;
    void copy(const Tensor& src, Tensor& dst) override;
    void fill(Tensor& t, double value) override;
    void add(const Tensor& a, Tensor& inout, double s) override;
    void scale(Tensor& t, double factor) override;
    void copyRows(const Tensor& src, int64_t rowBegin, Tensor& dst) override;
    void copyRowsInto(const Tensor& src, Tensor& dst, int64_t rowBegin) override;
    void copyColumns(const Tensor& src, int64_t colBegin, Tensor& dst) override;
    void addColumnsInto(const Tensor& src, Tensor& dst, int64_t colBegin) override;

    // ---- GEMM (cuBLASLt) (cuda_backend_gemm.cu) ----
    void gemm(bool transA, bool transB, double alpha, const Tensor& a, const Tensor& b, double beta,
              Tensor& c) override;
    void addBias(Tensor& x, const Tensor& bias) override;
    void biasGrad(const Tensor& dy, Tensor& dbias) override;

    // ---- norms, activations, attention, embedding, cross-entropy, optimizer (cuda_backend_ops.cu) ----
    void normForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool rms, double eps, Tensor& y,
                     Tensor& mean, Tensor& rstd) override;
    void normBackward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                      bool rms, Tensor& dx, Tensor& dgamma, Tensor& dbeta) override;
    void activationForward(const Tensor& x, Tensor& y, Pointwise f) override;
    void activationBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise f) override;
    void gluForward(const Tensor& x, Tensor& y, Pointwise act) override;
    void gluBackward(const Tensor& dy, const Tensor& x, Tensor& dx, Pointwise act) override;
    void rope(Tensor& x, const std::vector<int64_t>& positions, double base, int64_t rotated, bool inverse) override;
    void attentionForward(const Tensor& q, const Tensor& k, const Tensor& v, int64_t sequences,
                          const std::vector<int64_t>& queryPositions, const std::vector<int64_t>& keyPositions,
                          Tensor& o, Tensor& lse, const ScoreRule& rule) override;
    void attentionBackward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                           const Tensor& lse, int64_t sequences, const std::vector<int64_t>& queryPositions,
                           const std::vector<int64_t>& keyPositions, Tensor& dq, Tensor& dk, Tensor& dv,
                           const ScoreRule& rule) override;
    void softcap(Tensor& x, double cap) override;
    void softcapBackward(Tensor& dy, const Tensor& y, double cap) override;
    void dropout(Tensor& x, const DropoutRule& rule, const std::vector<int64_t>& sequences,
                 const std::vector<int64_t>& positions) override;
    void embeddingForward(const std::vector<int32_t>& tokens, const Tensor& table, int64_t vocabBegin,
                          Tensor& out) override;
    void embeddingBackward(const std::vector<int32_t>& tokens, const Tensor& dout, int64_t vocabBegin,
                           Tensor& dtable) override;
    std::vector<double> rowMax(const Tensor& logits) override;
    std::vector<double> rowSumExp(const Tensor& logits, const std::vector<double>& max) override;
    std::vector<double> targetLogits(const Tensor& logits, const std::vector<int32_t>& targets,
                                     int64_t vocabBegin) override;
    void crossEntropyBackward(Tensor& logits, const std::vector<double>& max, const std::vector<double>& sumExp,
                              const std::vector<int32_t>& targets, int64_t vocabBegin, double s) override;
    void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1, double beta2,
               double eps, double weightDecay, int64_t step) override;
    double sumSquares(const Tensor& t) override;
    double sumSquaresAll(const std::vector<Tensor>& ts) override;

    // ---- asynchronous execution and timing (cuda_backend.cu) ----
    void synchronize() override { checkCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
    bool timesOnDevice() const override { return true; }
    int64_t beginTimedRegion() override;
    void endTimedRegion(int64_t handle) override;
    std::vector<TimedRegion> collectTimedRegions() override;

    std::vector<std::pair<std::string, std::string>> provenance() const override { return provenance_.asPairs(); }

    // ---- attention implementation (cuda_backend.hpp: CudaAttention) ----
    CudaAttention attention() const { return attention_; }
    void setAttention(CudaAttention a) { attention_ = a; }

    // ---- for the communicators and the staging (cuda_backend.cu) ----
    const cuda::DeviceProvenance& deviceProvenance() const { return provenance_; }
    cudaStream_t stream() const { return stream_; }
    int device() const { return device_; }
    int64_t peakReservedBytes() const { return allocator_.stats().peakReservedBytes; }
    std::vector<float> toFloats(const Tensor& src);
    void fromFloats(const float* host, Tensor& dst);

protected:
    void* allocateBytes(int64_t bytes) override { return allocator_.allocate(bytes); }
    void freeBytes(void* p, int64_t /*bytes*/) override;

private:
    static DType dt(const Tensor& t) { return t.type() == ElementType::F32 ? DType::F32 : DType::Bf16; }

    // Host <-> device copies and fp32 shadows (cuda_backend.cu).
    void h2d(const void* host, void* device, size_t bytes);
    void d2h(const void* device, void* host, size_t bytes);
    void h2dFloats(const std::vector<double>& values, float* device);
    std::vector<double> d2hFloats(const float* device, int64_t n);

    // A write other than adamw: the fp32 master and shadow kept for this storage no longer describe it.
    void touched(const Tensor& t) {
        auto shadow = shadows_.extract(t.data<void>());
        auto master = masters_.extract(t.data<void>());
    }
    void touchedShadowOnly(const Tensor& t) { auto shadow = shadows_.extract(t.data<void>()); }

    Tensor& shadowFor(const Tensor& t);
    float* fp32View(const Tensor& t);
    const float* statistics(const char* op, const char* what, const Tensor& t);

    // cuda_backend_gemm.cu
    const GemmPlan& gemmPlan(const GemmKey& key);

    // attention_gemm.cu: the Gemm attention (same contract as cuda::attentionForward / attentionBackward).
    void attentionGemmForward(DType t, const cuda::AttentionArgs& a, const void* q, const void* k, const void* v,
                              void* o, float* lseF, void* lse);
    void attentionGemmBackward(DType t, const cuda::AttentionArgs& a, const void* dout, const void* q, const void* k,
                               const void* v, const void* o, const float* lseF, float* delta, void* dq, void* dk,
                               void* dv);
    struct BatchedGemm;
    void batchedGemm(const BatchedGemm& g);
    const GemmPlan& batchedPlan(const BatchedGemmKey& key);

    // cuda_backend_ops.cu
    cuda::AttentionArgs attentionArgs(const cuda::AttentionDims& dims, const std::vector<int64_t>& queryPositions,
                                      const std::vector<int64_t>& keyPositions, Scratch& qp, Scratch& kp);
    cuda::AttentionDims attentionDims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                      int64_t sequences, const std::vector<int64_t>& queryPositions,
                                      const std::vector<int64_t>& keyPositions);
    static std::vector<int64_t> localRows(const char* op, const std::vector<int32_t>& tokens, int64_t vocabBegin,
                                          int64_t vocabLocal);

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
    CudaAttention attention_ = CudaAttention::Gemm;
    cudaStream_t stream_ = nullptr;
    cuda::KernelContext kc_;
    cuda::DeviceProvenance provenance_;
    CudaRawAllocator raw_;
    cuda::CachingAllocator allocator_;
    cublasLtHandle_t lt_ = nullptr;
    void* workspace_ = nullptr;
    std::map<GemmKey, GemmPlan> gemmPlans_;
    std::map<BatchedGemmKey, GemmPlan> batchedPlans_;
    std::unordered_map<void*, Tensor> shadows_;   // storage -> fp32 statistics beside a bf16 tensor
    std::unordered_map<void*, Tensor> masters_;   // storage -> fp32 master copy of a bf16 parameter
    cudaEvent_t base_ = nullptr;
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> regions_;
    int64_t firstHandle_ = 0;
};

} // namespace detail

} // namespace tessel::exec
