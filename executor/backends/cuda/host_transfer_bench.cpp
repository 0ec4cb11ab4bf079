// Microbenchmarks of copies between host and device memory on a CUDA backend's device: pageable and pinned
// host buffers, each direction, timed with the host clock around a copy and a stream synchronisation.
#include "cuda_backend.hpp"

#include "tessel/cost/errors.hpp"

#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

namespace tessel::exec {

namespace {
void check(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess) throw DeviceError("host transfer benchmark: " + what + ": " + cudaGetErrorString(e));
}

// A host buffer of `bytes`, pageable (std::vector, pages touched before timing) or pinned (cudaMallocHost).
class HostBuffer {
public:
    HostBuffer(size_t bytes, bool pinned) : pinned_(pinned) {
        if (pinned) {
            check(cudaMallocHost(&pinnedData_, bytes), "cudaMallocHost(" + std::to_string(bytes) + ")");
            std::memset(pinnedData_, 1, bytes);
        } else {
            pageable_.assign(bytes, 1);
        }
    }
    ~HostBuffer() {
        if (pinnedData_) cudaFreeHost(pinnedData_);
    }
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    void* data() { return pinned_ ? pinnedData_ : static_cast<void*>(pageable_.data()); }

private:
    bool pinned_;
    void* pinnedData_ = nullptr;
    std::vector<char> pageable_;
};

struct Stream {
    cudaStream_t s = nullptr;
    Stream() { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream() { cudaStreamDestroy(s); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
};
} // namespace

std::vector<BenchPoint> cudaHostTransferBenchmarks(Backend& backend, const BenchOptions& options, const BenchSync& sync) {
    check(cudaSetDevice(cudaDeviceOf(backend)), "cudaSetDevice");
    backend.synchronize();
    Stream stream;
    std::vector<BenchPoint> out;
    // From 4 MiB (smaller pageable sources would sit in the host's caches) to 256 MiB (quick: 16 MiB), x4 apart.
    const int64_t last = options.quick ? int64_t{16} << 20 : int64_t{256} << 20;
    for (int64_t bytes = int64_t{4} << 20; bytes <= last; bytes *= 4) {
        // The device side is a tensor of the backend, so its allocator counts it like any other buffer.
        Tensor device = backend.empty({bytes / 4}, MemoryCategory::Buffers);
        void* dev = device.data<void>();
        const size_t size = static_cast<size_t>(device.numel() * elementBytes(device.type()));
        for (bool pinned : {false, true}) {
            HostBuffer host(size, pinned);
            for (bool toDevice : {true, false}) {
                BenchPoint p = summarize(toDevice ? "copy_host_to_device" : "copy_device_to_host", timeSamples(
                    [&] {
                        check(toDevice ? cudaMemcpyAsync(dev, host.data(), size, cudaMemcpyHostToDevice, stream.s)
                                       : cudaMemcpyAsync(host.data(), dev, size, cudaMemcpyDeviceToHost, stream.s),
                              "cudaMemcpyAsync");
                        check(cudaStreamSynchronize(stream.s), "cudaStreamSynchronize");
                    },
                    sync, options));
                p.shape = {{"bytes", static_cast<int64_t>(size)}, {"pinned", pinned ? 1 : 0}};
                p.bytes = static_cast<double>(size);
                out.push_back(std::move(p));
            }
        }
    }
    return out;
}

} // namespace tessel::exec
