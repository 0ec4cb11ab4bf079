// Device helpers shared by the kernel files: fp32 loads/stores of float and bf16, type dispatch, and the
// deterministic block reductions (fixed shuffle tree, then warps added in order by every thread).
#pragma once

#include "kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tessel::exec::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Calls f with a value of the C++ type for `t` (float or bf16).
template <typename F>
void withType(DType t, F&& f) {
    if (t == DType::F32) f(float{});
    else f(bf16{});
}

inline unsigned gridOf(int64_t blocks) { return static_cast<unsigned>(blocks); }

// Sum over the block; every thread returns the same value, added in the same order on every launch of the
// same geometry. `shared` holds at least blockDim.x / 32 values. blockDim.x is a multiple of 32.
template <typename A>
__device__ A blockSum(A v, A* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    __syncthreads();   // the previous use of `shared` is finished
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    A total = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) total += shared[w];
    return total;
}

__device__ inline float blockMax(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float m = shared[0];
    for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) m = fmaxf(m, shared[w]);
    return m;
}

} // namespace tessel::exec::cuda
