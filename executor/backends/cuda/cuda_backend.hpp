// The CUDA backend (bf16 weights, activations and grads with fp32 master weights and Adam moments, or fp32
// throughout for checking): what the rest of tessel sees of it. Declared in every build; without the CUDA
// toolkit the functions throw tessel::DeviceError saying so.
#pragma once

#include "device_info.hpp"

#include "tessel/exec/backend.hpp"
#include "tessel/exec/microbench.hpp"

#include <memory>
#include <string>

namespace tessel::exec {

class DeviceStaging;

enum class CudaPrecision {
    Mixed,   // recipe "mixed": bf16 weights/grads/activations, fp32 master + Adam moments (16 B/param)
    Fp32,    // recipe "fp32": everything fp32 (GEMMs without TF32), for checking against the CPU backend
};

// The CUDA backend's attention implementation. Gemm (default): per sequence and chunk of heads, the scores
// S = scale Q K^T in fp32 and O = P V through cuBLASLt strided-batched GEMMs (tensor cores), the softmax in a
// row kernel; a transient workspace of O(heads per chunk * sq * sk), at most 256 MiB. Tiles: the
// FlashAttention-2-style CUDA-core kernel (O(s) memory), kept for checking.
enum class CudaAttention { Gemm, Tiles };
// "gemm" or "tiles"; anything else is an InputError at `where`.
CudaAttention cudaAttentionOf(const std::string& name, const std::string& where);
// The choice of the environment variable TESSEL_CUDA_ATTENTION (unset or empty: Gemm); an unknown value is an
// InputError naming the variable. Read once by every CUDA backend when it is made.
CudaAttention cudaAttentionFromEnvironment();

// The recipe a plan's `precision` names: "mixed" or "fp32"; anything else is an InputError at `pointer`.
CudaPrecision cudaPrecisionOf(const std::string& recipe, const std::string& pointer);

// Number of CUDA devices that answer; 0 when there is no driver, no device, or any CUDA error at discovery.
int cudaDeviceCount();
// True when this build has the CUDA backend (TESSEL_CUDA found a toolkit).
bool cudaBackendBuilt();

// A backend on `device` (a CUDA ordinal). tessel::DeviceError when no GPU answers or the device is invalid.
// Tensors follow their category: Optimizer tensors are fp32; the others bf16 in Mixed mode. adamw on a bf16
// parameter keeps its fp32 master copy inside the backend (counted under Optimizer), made at the first step.
std::unique_ptr<Backend> makeCudaBackend(CudaPrecision precision, int device = 0);

// The device for a process: its node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, else MPI_LOCALRANKID, else 0)
// modulo the number of devices; tessel::DeviceError when no GPU answers.
int cudaDeviceForThisProcess();

// The attention implementation a CUDA backend runs, and a change of it (for tests comparing the two).
// DeviceError for a backend that is not CUDA.
CudaAttention cudaAttention(const Backend& backend);
void setCudaAttention(Backend& backend, CudaAttention attention);

// Provenance of the device a CUDA backend runs on (DeviceError for a backend that is not a CUDA backend).
cuda::DeviceProvenance cudaProvenance(const Backend& backend);

// For the communicators: the CUDA backend's compute stream (a cudaStream_t), its device, and a staging of its
// tensors through fp32 host buffers (for the staged comm). DeviceError for a backend that is not CUDA.
void* cudaComputeStream(Backend& backend);
int cudaDeviceOf(const Backend& backend);
std::shared_ptr<DeviceStaging> cudaStagingFor(Backend& backend);
// Peak bytes the backend's caching allocator held from the device (tensors, scratch, cuBLASLt workspace,
// rounding and cached blocks): the device footprint beyond the per-category tensor bytes.
int64_t cudaPeakReservedBytes(const Backend& backend);

// `tessel bench` on CUDA: copies between host memory (pageable, and pinned by cudaMallocHost) and the backend's
// device, 4 MiB .. 256 MiB (quick: 16 MiB): points "copy_host_to_device" / "copy_device_to_host" with shape
// {bytes, pinned} and `bytes` the copy's size. DeviceError for a backend that is not CUDA.
std::vector<BenchPoint> cudaHostTransferBenchmarks(Backend& backend, const BenchOptions& options, const BenchSync& sync);

} // namespace tessel::exec
