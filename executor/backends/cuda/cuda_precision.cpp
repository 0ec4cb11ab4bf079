// The precision recipes the CUDA backend runs (plain C++, built with or without the toolkit).
#include "cuda_backend.hpp"

#include "tessel/cost/errors.hpp"

namespace tessel::exec {

CudaPrecision cudaPrecisionOf(const std::string& recipe, const std::string& pointer) {
    if (recipe == "mixed") return CudaPrecision::Mixed;
    if (recipe == "fp32") return CudaPrecision::Fp32;
    throw InputError(pointer, "the cuda backend runs the \"mixed\" recipe (bf16 with fp32 master weights and Adam "
                              "moments) or \"fp32\", not \"" + recipe + "\"");
}

} // namespace tessel::exec
