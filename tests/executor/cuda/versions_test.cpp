// Version text of the CUDA provenance, the precision recipes the cuda backend accepts, the Bf16 element
// type, and the backend's behaviour where no GPU answers (or the build has no CUDA).
#include "cuda_backend.hpp"
#include "device_info.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/exec/cpu_backend.hpp"

#include <gtest/gtest.h>

namespace tessel::exec {
namespace {

TEST(Versions, CudaCodes) {
    EXPECT_EQ(cuda::cudaVersionText(13000), "13.0");
    EXPECT_EQ(cuda::cudaVersionText(12040), "12.4");
    EXPECT_EQ(cuda::cudaVersionText(11080), "11.8");
    EXPECT_EQ(cuda::cudaVersionText(0), "none");
}

TEST(Versions, CublasCodes) {
    EXPECT_EQ(cuda::cublasVersionText(130100), "13.1.0");   // CUBLAS_VERSION of CUDA 13.0's cuBLAS
    EXPECT_EQ(cuda::cublasVersionText(120402), "12.4.2");
}

TEST(Versions, NcclCodesOldAndNewEncoding) {
    EXPECT_EQ(cuda::ncclVersionText(22809), "2.28.9");   // NCCL_VERSION(2, 28, 9)
    EXPECT_EQ(cuda::ncclVersionText(21903), "2.19.3");
    EXPECT_EQ(cuda::ncclVersionText(2708), "2.7.8");     // before 2.9: X * 1000 + Y * 100 + Z
}

TEST(Versions, ProvenancePairsNameEveryVersion) {
    cuda::DeviceProvenance p;
    p.deviceName = "NVIDIA H100 80GB HBM3";
    p.computeMajor = 9;
    p.driver = "13.0";
    p.cudaRuntime = "13.0";
    p.cublas = "13.1.0";
    p.nccl = "2.28.9";
    std::map<std::string, std::string> m;
    for (auto& [k, v] : p.asPairs()) m[k] = v;
    EXPECT_EQ(m.at("device"), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(m.at("compute_capability"), "9.0");
    EXPECT_EQ(m.at("driver"), "13.0");
    EXPECT_EQ(m.at("cuda"), "13.0");
    EXPECT_EQ(m.at("cublas"), "13.1.0");
    EXPECT_EQ(m.at("nccl"), "2.28.9");
}

TEST(Precision, RecipesOfTheCudaBackend) {
    EXPECT_EQ(cudaPrecisionOf("mixed", "/plan/precision"), CudaPrecision::Mixed);
    EXPECT_EQ(cudaPrecisionOf("fp32", "/plan/precision"), CudaPrecision::Fp32);
    try {
        cudaPrecisionOf("cpu_fp64", "/plan/precision");
        FAIL() << "cpu_fp64 accepted";
    } catch (const InputError& e) {
        ASSERT_EQ(e.problems().size(), 1u);
        EXPECT_EQ(e.problems()[0].where, "/plan/precision");
    }
}

TEST(ElementTypes, Bf16IsTwoBytesAndCpuTensorsFollowTheBackendType) {
    EXPECT_EQ(elementBytes(ElementType::Bf16), 2);
    EXPECT_EQ(elementBytes(ElementType::F32), 4);
    EXPECT_EQ(elementBytes(ElementType::F64), 8);
    auto cpu = makeCpuBackend(ElementType::F32);
    // The default elementTypeFor: every category in the backend's type.
    for (int c = 0; c < kMemoryCategories; ++c) {
        Tensor t = cpu->empty({3}, static_cast<MemoryCategory>(c));
        EXPECT_EQ(t.type(), ElementType::F32);
    }
}

TEST(NoGpu, AskingForTheCudaBackendWithoutAGpuIsADeviceError) {
    if (cudaDeviceCount() > 0) GTEST_SKIP() << "a GPU answers here; this checks the machines without one";
    EXPECT_THROW(makeCudaBackend(CudaPrecision::Mixed, 0), DeviceError);
    EXPECT_THROW(cudaDeviceForThisProcess(), DeviceError);
}

TEST(NoGpu, TheCpuBackendIsNotACudaBackend) {
    auto cpu = makeCpuBackend(ElementType::F64);
    EXPECT_THROW(cudaProvenance(*cpu), DeviceError);
    EXPECT_THROW(cudaComputeStream(*cpu), DeviceError);
}

} // namespace
} // namespace tessel::exec
