// Support for the GPU tests: skip where no GPU answers, bf16 rounding on the host, random inputs, and the
// relative error of one result against the CPU float64 reference.
#pragma once

#include "cuda_backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

// Any CUDA error at discovery counts as "no GPU" (DESIGN.md §6).
#define TESSEL_REQUIRE_GPU()                                                                                   \
    do {                                                                                                       \
        if (::tessel::exec::cudaDeviceCount() == 0) GTEST_SKIP() << "no GPU answers on this machine";          \
    } while (0)

namespace tessel::exec::test {

// Round to the nearest bf16 (ties to even), as __float2bfloat16_rn.
inline double roundBf16(double x) {
    float f = static_cast<float>(x);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    bits &= 0xFFFF0000u;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Values exactly representable in the precision under test, so both backends start from the same inputs.
inline std::vector<double> randomValues(size_t n, uint64_t seed, CudaPrecision p, double scale = 1.0) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> dist(0.0, scale);
    std::vector<double> v(n);
    for (auto& x : v) {
        x = dist(rng);
        x = p == CudaPrecision::Mixed ? roundBf16(x) : static_cast<double>(static_cast<float>(x));
    }
    return v;
}

// max |got - want| / max |want| (0 when both are zero).
inline double relativeError(const std::vector<double>& got, const std::vector<double>& want) {
    if (got.size() != want.size()) return 1e300;
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        diff = std::max(diff, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
    }
    return scale == 0.0 ? diff : diff / scale;
}

// Relative error bands per dtype of the GPU kernels against float64: fp32 keeps products and sums in fp32
// (GEMMs without TF32); bf16 rounds every stored tensor to 8 bits of mantissa (relative 2^-9) with fp32 math
// inside each kernel, so one rounding of the output plus fp32 accumulation.
inline double bandFor(CudaPrecision p) { return p == CudaPrecision::Fp32 ? 2e-5 : 1.2e-2; }

} // namespace tessel::exec::test
