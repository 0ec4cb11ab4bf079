// The CUDA backend's entry points in a build without the CUDA toolkit (TESSEL_CUDA=OFF or not found): there
// is no device to run on, so every request for one is a DeviceError saying why.
#include "cuda_backend.hpp"

#include "../../comm/nccl/nccl_comm.hpp"

#include "tessel/cost/errors.hpp"

namespace tessel::exec {

namespace {
[[noreturn]] void notBuilt() {
    throw DeviceError("this tessel was built without the CUDA backend (TESSEL_CUDA found no CUDA toolkit or was "
                      "OFF); rebuild on a machine with the toolkit");
}
} // namespace

bool cudaBackendBuilt() { return false; }
int cudaDeviceCount() { return 0; }
std::unique_ptr<Backend> makeCudaBackend(CudaPrecision, int) { notBuilt(); }
int cudaDeviceForThisProcess() { notBuilt(); }
cuda::DeviceProvenance cudaProvenance(const Backend&) { notBuilt(); }
void* cudaComputeStream(Backend&) { notBuilt(); }
int cudaDeviceOf(const Backend&) { notBuilt(); }
std::shared_ptr<DeviceStaging> cudaStagingFor(Backend&) { notBuilt(); }
int64_t cudaPeakReservedBytes(const Backend&) { notBuilt(); }
CudaAttention cudaAttention(const Backend&) { notBuilt(); }
void setCudaAttention(Backend&, CudaAttention) { notBuilt(); }
std::unique_ptr<Comm> makeNcclComm(std::unique_ptr<Comm>, Backend&) { notBuilt(); }
std::vector<BenchPoint> cudaHostTransferBenchmarks(Backend&, const BenchOptions&, const BenchSync&) { notBuilt(); }

} // namespace tessel::exec
