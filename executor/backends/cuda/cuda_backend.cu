// The CUDA backend's device, stream and memory: construction, copies, fp32 shadows, timing, entry points.
#include "cuda_backend.hpp"

#include "cuda_backend_impl.hpp"

#include "../../comm/nccl/staged_comm.hpp"

#include "tessel/cost/errors.hpp"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {

namespace detail {

CudaBackend::CudaBackend(CudaPrecision precision, int device)
    : precision_(precision), device_(device), attention_(cudaAttentionFromEnvironment()), allocator_(raw_) {
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

CudaBackend::~CudaBackend() {
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
    for (auto& [key, plan] : batchedPlans_) {
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

// ---- host <-> device ----
void CudaBackend::upload(const std::vector<double>& host, Tensor& dst) {
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

std::vector<double> CudaBackend::download(const Tensor& src) {
    check("download", "src", src);
    std::vector<float> f = toFloats(src);
    return std::vector<double>(f.begin(), f.end());
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
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

void CudaBackend::fill(Tensor& t, double value) {
    check("fill", "t", t);
    touched(t);
    cuda::fill(kc_, dt(t), t.data<void>(), t.numel(), static_cast<float>(value));
}

void CudaBackend::add(const Tensor& a, Tensor& inout, double s) {
    check("add", "a", a);
    check("add", "inout", inout);
    if (a.numel() != inout.numel()) fail("add", "sizes differ: " + a.shapeString() + " and " + inout.shapeString());
    touched(inout);
    // inout += scale * a
    cuda::copy2d(kc_, dt(a), a.data<void>(), a.numel(), 0, dt(inout), inout.data<void>(), inout.numel(), 0, 1,
                 a.numel(), static_cast<float>(s), true);
}

void CudaBackend::scale(Tensor& t, double factor) {
    check("scale", "t", t);
    touched(t);
    cuda::scale(kc_, dt(t), t.data<void>(), t.numel(), static_cast<float>(factor));
}

void CudaBackend::copyRows(const Tensor& src, int64_t rowBegin, Tensor& dst) {
    rowBlock("copyRows", "src", src, "dst", dst, rowBegin);
    touched(dst);
    const int64_t w = rowWidth(src);
    cuda::copy2d(kc_, dt(src), src.data<void>(), 0, rowBegin * w, dt(dst), dst.data<void>(), 0, 0, 1, dst.numel(),
                 1.0f, false);
}

void CudaBackend::copyRowsInto(const Tensor& src, Tensor& dst, int64_t rowBegin) {
    rowBlock("copyRowsInto", "dst", dst, "src", src, rowBegin);
    touched(dst);
    const int64_t w = rowWidth(dst);
    cuda::copy2d(kc_, dt(src), src.data<void>(), 0, 0, dt(dst), dst.data<void>(), 0, rowBegin * w, 1, src.numel(),
                 1.0f, false);
}

void CudaBackend::copyColumns(const Tensor& src, int64_t colBegin, Tensor& dst) {
    columnBlock("copyColumns", "src", src, "dst", dst, colBegin);
    touched(dst);
    const int64_t n = src.dim(0), c = rowWidth(src), w = rowWidth(dst);
    cuda::copy2d(kc_, dt(src), src.data<void>(), c, colBegin, dt(dst), dst.data<void>(), w, 0, n, w, 1.0f, false);
}

void CudaBackend::addColumnsInto(const Tensor& src, Tensor& dst, int64_t colBegin) {
    columnBlock("addColumnsInto", "dst", dst, "src", src, colBegin);
    touched(dst);
    const int64_t n = dst.dim(0), c = rowWidth(dst), w = rowWidth(src);
    cuda::copy2d(kc_, dt(src), src.data<void>(), w, 0, dt(dst), dst.data<void>(), c, colBegin, n, w, 1.0f, true);
}

// ---- asynchronous execution and timing ----
int64_t CudaBackend::beginTimedRegion() {
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

void CudaBackend::endTimedRegion(int64_t handle) {
    const int64_t i = handle - firstHandle_;
    if (i < 0 || i >= static_cast<int64_t>(regions_.size()))
        fail("endTimedRegion", "unknown region " + std::to_string(handle));
    checkCuda(cudaEventRecord(regions_[static_cast<size_t>(i)].second, stream_), "cudaEventRecord");
}

std::vector<CudaBackend::TimedRegion> CudaBackend::collectTimedRegions() {
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

// ---- for the communicators and the staging ----
std::vector<float> CudaBackend::toFloats(const Tensor& src) {
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

void CudaBackend::fromFloats(const float* host, Tensor& dst) {
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

void CudaBackend::freeBytes(void* p, int64_t /*bytes*/) {
    // Drop what the backend kept beside this storage; the extracted node's tensor frees its own storage
    // (a nested freeBytes) after the map is consistent again.
    auto shadow = shadows_.extract(p);
    auto master = masters_.extract(p);
    allocator_.free(p);
}

void CudaBackend::h2d(const void* host, void* device, size_t bytes) {
    if (bytes == 0) return;
    checkCuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "host-to-device copy");
    // Pageable sources are staged before cudaMemcpyAsync returns; waiting keeps small uploads simple to
    // reason about (they are never on the hot path of a step).
    checkCuda(cudaStreamSynchronize(stream_), "host-to-device copy");
}

void CudaBackend::d2h(const void* device, void* host, size_t bytes) {
    if (bytes == 0) return;
    checkCuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "device-to-host copy");
    checkCuda(cudaStreamSynchronize(stream_), "device-to-host copy");
}

void CudaBackend::h2dFloats(const std::vector<double>& values, float* device) {
    std::vector<float> f(values.begin(), values.end());
    h2d(f.data(), device, f.size() * sizeof(float));
}

std::vector<double> CudaBackend::d2hFloats(const float* device, int64_t n) {
    std::vector<float> f(static_cast<size_t>(n));
    d2h(device, f.data(), f.size() * sizeof(float));
    return std::vector<double>(f.begin(), f.end());
}

// The fp32 shadow of a statistics tensor (created, counted under its category, when missing).
Tensor& CudaBackend::shadowFor(const Tensor& t) {
    auto it = shadows_.find(t.data<void>());
    if (it == shadows_.end()) {
        // Allocated in the tensor's category and element type with the bytes of numel floats.
        Tensor s = empty({t.numel() * 4 / elementBytes(elementTypeFor(t.category()))}, t.category());
        it = shadows_.emplace(t.data<void>(), std::move(s)).first;
    }
    return it->second;
}

// Where an op writes fp32 statistics: the tensor itself when fp32, else its shadow.
float* CudaBackend::fp32View(const Tensor& t) {
    if (t.type() == ElementType::F32) return t.data<float>();
    return shadowFor(t).data<float>();
}

// Where an op reads fp32 statistics written by an earlier op.
const float* CudaBackend::statistics(const char* op, const char* what, const Tensor& t) {
    if (t.type() == ElementType::F32) return t.data<float>();
    auto it = shadows_.find(t.data<void>());
    if (it == shadows_.end())
        fail(op, std::string(what) + " was not written by this backend's forward op (its fp32 values are gone), "
                                     "so the backward pass cannot use it");
    return it->second.data<float>();
}

} // namespace detail

namespace {

using detail::CudaBackend;

class CudaStaging final : public DeviceStaging {
public:
    explicit CudaStaging(CudaBackend& be) : be_(be) {}
    void toHost(const Tensor& device, float* host) override;
    void fromHost(const float* host, Tensor& device) override;

private:
    CudaBackend& be_;
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
CudaAttention cudaAttention(const Backend& backend) { return cudaOf(backend).attention(); }
void setCudaAttention(Backend& backend, CudaAttention attention) { cudaOf(backend).setAttention(attention); }

} // namespace tessel::exec
