// Provenance of a CUDA run (device, driver, CUDA, cuBLAS and NCCL versions) and the pure functions that
// turn the libraries' integer version codes into text.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec::cuda {

struct DeviceProvenance {
    std::string deviceName;          // "NVIDIA H100 80GB HBM3"
    int computeMajor = 0, computeMinor = 0;
    int multiprocessors = 0;
    int64_t memoryBytes = 0;
    std::string driver;              // highest CUDA version the driver supports, "13.0"
    std::string cudaRuntime;         // "13.0"
    std::string cublas;              // "13.1.0"
    std::string nccl;                // "2.28.9", or "" where NCCL is not used
    // As (key, value) pairs for measurements and versions.json: device, compute_capability, memory_bytes,
    // multiprocessors, driver, cuda, cublas, nccl.
    std::vector<std::pair<std::string, std::string>> asPairs() const;
};

// cudaRuntimeGetVersion / cudaDriverGetVersion code 1000 major + 10 minor: 13000 -> "13.0", 12040 -> "12.4".
std::string cudaVersionText(int version);
// cublasLtGetVersion: 10000 major + 100 minor + patch (CUBLAS_VERSION in cublas_api.h): 130100 -> "13.1.0".
std::string cublasVersionText(int64_t version);
// ncclGetVersion: 10000 major + 100 minor + patch from 2.9 on, 1000 major + 100 minor + patch before
// (NCCL_VERSION in nccl.h): 22809 -> "2.28.9", 2708 -> "2.7.8".
std::string ncclVersionText(int code);

} // namespace tessel::exec::cuda
