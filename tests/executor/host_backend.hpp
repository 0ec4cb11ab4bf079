// Test-only Backend that allocates plain host memory and implements only upload/download/copy/fill, so the
// communicator tests make Tensors (f64, f32 or bf16) without depending on the CPU backend or a GPU.
#pragma once

#include "tessel/exec/backend.hpp"

#include "tessel/cost/errors.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tessel::exec::test {

class HostBackend final : public Backend {
public:
    explicit HostBackend(ElementType type) : type_(type) {}
    std::string name() const override { return "host-test"; }
    ElementType elementType() const override { return type_; }

    Tensor make(const std::vector<double>& values, std::vector<int64_t> shape) {
        Tensor t = empty(std::move(shape), MemoryCategory::Buffers);
        upload(values, t);
        return t;
    }
    Tensor make(const std::vector<double>& values) { return make(values, {static_cast<int64_t>(values.size())}); }

    // bfloat16 is the upper half of an IEEE float: widening is exact, narrowing rounds to nearest even.

    void upload(const std::vector<double>& host, Tensor& dst) override {
        if (static_cast<int64_t>(host.size()) != dst.numel()) throw RuntimeError("upload: size mismatch");
        for (size_t i = 0; i < host.size(); ++i) {
            if (dst.type() == ElementType::F64)
                dst.data<double>()[i] = host[i];
            else if (dst.type() == ElementType::Bf16)
                dst.data<uint16_t>()[i] = narrowToBf16(static_cast<float>(host[i]));
            else
                dst.data<float>()[i] = static_cast<float>(host[i]);
        }
    }
    std::vector<double> download(const Tensor& src) override {
        std::vector<double> host(static_cast<size_t>(src.numel()));
        for (size_t i = 0; i < host.size(); ++i) {
            if (src.type() == ElementType::F64)
                host[i] = src.data<double>()[i];
            else if (src.type() == ElementType::Bf16)
                host[i] = widenBf16(src.data<uint16_t>()[i]);
            else
                host[i] = double(src.data<float>()[i]);
        }
        return host;
    }
    void copy(const Tensor& src, Tensor& dst) override {
        std::memcpy(dst.data<void>(), src.data<void>(), static_cast<size_t>(src.numel() * elementBytes(src.type())));
    }
    void fill(Tensor& t, double value) override { upload(std::vector<double>(static_cast<size_t>(t.numel()), value), t); }

    [[noreturn]] static void unsupported() { throw RuntimeError("HostBackend: not implemented in the test backend"); }
    void add(const Tensor&, Tensor&, double) override { unsupported(); }
    void scale(Tensor&, double) override { unsupported(); }
    void copyRows(const Tensor&, int64_t, Tensor&) override { unsupported(); }
    void copyRowsInto(const Tensor&, Tensor&, int64_t) override { unsupported(); }
    void copyColumns(const Tensor&, int64_t, Tensor&) override { unsupported(); }
    void addColumnsInto(const Tensor&, Tensor&, int64_t) override { unsupported(); }
    void gemm(bool, bool, double, const Tensor&, const Tensor&, double, Tensor&) override { unsupported(); }
    void addBias(Tensor&, const Tensor&) override { unsupported(); }
    void biasGrad(const Tensor&, Tensor&) override { unsupported(); }
    void normForward(const Tensor&, const Tensor&, const Tensor&, bool, double, Tensor&, Tensor&, Tensor&) override {
        unsupported();
    }
    void normBackward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, Tensor&, Tensor&,
                      Tensor&) override {
        unsupported();
    }
    void activationForward(const Tensor&, Tensor&, Pointwise) override { unsupported(); }
    void activationBackward(const Tensor&, const Tensor&, Tensor&, Pointwise) override { unsupported(); }
    void gluForward(const Tensor&, Tensor&, Pointwise) override { unsupported(); }
    void gluBackward(const Tensor&, const Tensor&, Tensor&, Pointwise) override { unsupported(); }
    void rope(Tensor&, const std::vector<int64_t>&, double, int64_t, bool) override { unsupported(); }
    void dropout(Tensor&, const DropoutRule&, const std::vector<int64_t>&, const std::vector<int64_t>&) override {
        unsupported();
    }
    void attentionForward(const Tensor&, const Tensor&, const Tensor&, int64_t, const std::vector<int64_t>&,
                          const std::vector<int64_t>&, Tensor&, Tensor&, const ScoreRule&) override {
        unsupported();
    }
    void attentionBackward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&, Tensor&, Tensor&,
                           Tensor&, const ScoreRule&) override {
        unsupported();
    }
    void softcap(Tensor&, double) override { unsupported(); }
    void softcapBackward(Tensor&, const Tensor&, double) override { unsupported(); }
    void embeddingForward(const std::vector<int32_t>&, const Tensor&, int64_t, Tensor&) override { unsupported(); }
    void embeddingBackward(const std::vector<int32_t>&, const Tensor&, int64_t, Tensor&) override { unsupported(); }
    std::vector<double> rowMax(const Tensor&) override { unsupported(); }
    std::vector<double> rowSumExp(const Tensor&, const std::vector<double>&) override { unsupported(); }
    std::vector<double> targetLogits(const Tensor&, const std::vector<int32_t>&, int64_t) override { unsupported(); }
    void crossEntropyBackward(Tensor&, const std::vector<double>&, const std::vector<double>&,
                              const std::vector<int32_t>&, int64_t, double) override {
        unsupported();
    }
    void adamw(Tensor&, const Tensor&, Tensor&, Tensor&, double, double, double, double, double, int64_t) override {
        unsupported();
    }
    double sumSquares(const Tensor&) override { unsupported(); }

protected:
    void* allocateBytes(int64_t bytes) override { return std::malloc(static_cast<size_t>(bytes)); }
    void freeBytes(void* p, int64_t) override { std::free(p); }

private:
    ElementType type_;
};

} // namespace tessel::exec::test
