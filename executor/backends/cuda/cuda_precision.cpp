// The precision recipes and attention implementations the CUDA backend runs (plain C++, built with or
// without the toolkit).
#include "cuda_backend.hpp"

#include "tessel/cost/errors.hpp"

#include <cstdlib>

namespace tessel::exec {

CudaPrecision cudaPrecisionOf(const std::string& recipe, const std::string& pointer) {
    if (recipe == "mixed") return CudaPrecision::Mixed;
    if (recipe == "fp32") return CudaPrecision::Fp32;
    throw InputError(pointer, "the cuda backend runs the \"mixed\" recipe (bf16 with fp32 master weights and Adam "
                              "moments) or \"fp32\", not \"" + recipe + "\"");
}

CudaAttention cudaAttentionOf(const std::string& name, const std::string& where) {
    if (name == "gemm") return CudaAttention::Gemm;
    if (name == "tiles") return CudaAttention::Tiles;
    throw InputError(where, "the cuda backend's attention is \"gemm\" (cuBLASLt batched GEMMs) or \"tiles\" "
                            "(FlashAttention-2-style kernel), not \"" + name + "\"");
}

CudaAttention cudaAttentionFromEnvironment() {
    const char* v = std::getenv("TESSEL_CUDA_ATTENTION");
    if (v == nullptr || *v == '\0') return CudaAttention::Gemm;
    return cudaAttentionOf(v, "TESSEL_CUDA_ATTENTION");
}

} // namespace tessel::exec
