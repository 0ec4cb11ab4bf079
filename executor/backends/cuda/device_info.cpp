// Version codes to text, and the provenance pairs a CUDA run records.
#include "device_info.hpp"

namespace tessel::exec::cuda {

std::string cudaVersionText(int version) {
    if (version <= 0) return "none";
    return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string cublasVersionText(int64_t version) {
    if (version <= 0) return "none";
    return std::to_string(version / 10000) + "." + std::to_string((version % 10000) / 100) + "." +
           std::to_string(version % 100);
}

std::string ncclVersionText(int code) {
    if (code <= 0) return "none";
    // NCCL_VERSION(X, Y, Z): X * 1000 + Y * 100 + Z while X <= 2 and Y <= 8, X * 10000 + Y * 100 + Z after.
    if (code < 10000) return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 100) + "." +
                              std::to_string(code % 100);
    return std::to_string(code / 10000) + "." + std::to_string((code % 10000) / 100) + "." + std::to_string(code % 100);
}

std::vector<std::pair<std::string, std::string>> DeviceProvenance::asPairs() const {
    std::vector<std::pair<std::string, std::string>> p{
        {"device", deviceName},
        {"compute_capability", std::to_string(computeMajor) + "." + std::to_string(computeMinor)},
        {"memory_bytes", std::to_string(memoryBytes)},
        {"multiprocessors", std::to_string(multiprocessors)},
        {"driver", driver},
        {"cuda", cudaRuntime},
        {"cublas", cublas},
    };
    if (!nccl.empty()) p.emplace_back("nccl", nccl);
    return p;
}

} // namespace tessel::exec::cuda
