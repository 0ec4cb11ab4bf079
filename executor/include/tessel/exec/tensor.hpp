// Tensors of the executor: a shape, an element type and storage allocated by a backend under a memory
// category, so every byte a rank holds is counted (weights, grads, optimizer, activations, buffers).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::exec {

enum class MemoryCategory { Weights = 0, Grads = 1, Optimizer = 2, Activations = 3, Buffers = 4 };
constexpr int kMemoryCategories = 5;
std::string toString(MemoryCategory c);

// Bf16: bfloat16 (1 sign, 8 exponent, 7 mantissa bits), the CUDA backend's weights, activations and grads.
enum class ElementType { F64, F32, Bf16 };
int elementBytes(ElementType t);
std::string toString(ElementType t);   // "f64", "f32", "bf16"
// bfloat16 is the upper half of an IEEE float: widening is exact; narrowing rounds to nearest even (NaN stays
// a quiet NaN), as CUDA's __float2bfloat16_rn. One pair for the comms, the runtime and the tests.
float widenBf16(uint16_t h);
uint16_t narrowToBf16(float f);

// Current and peak bytes per category, as allocated through a backend.
struct MemoryStats {
    std::array<int64_t, kMemoryCategories> currentBytes{};
    std::array<int64_t, kMemoryCategories> peakBytes{};
    std::array<int64_t, kMemoryCategories> atPeakBytes{}; // per category at the moment of peakTotalBytes
    int64_t currentTotalBytes = 0;
    int64_t peakTotalBytes = 0;
    void allocate(MemoryCategory c, int64_t bytes);
    void release(MemoryCategory c, int64_t bytes);
};

class Backend;

// A block of device memory; returns itself to its backend when the last Tensor using it goes away.
class Storage {
public:
    Storage(Backend* backend, void* data, int64_t bytes, MemoryCategory category)
        : backend_(backend), data_(data), bytes_(bytes), category_(category) {}
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    void* data() const { return data_; }
    int64_t bytes() const { return bytes_; }
    MemoryCategory category() const { return category_; }

private:
    Backend* backend_;
    void* data_;
    int64_t bytes_;
    MemoryCategory category_;
};

class Tensor {
public:
    Tensor() = default;
    Tensor(std::shared_ptr<Storage> storage, std::vector<int64_t> shape, ElementType type)
        : storage_(std::move(storage)), shape_(std::move(shape)), type_(type) {}
    bool defined() const { return storage_ != nullptr; }
    const std::vector<int64_t>& shape() const { return shape_; }
    int64_t dim(size_t i) const { return shape_.at(i); }
    int64_t numel() const;
    ElementType type() const { return type_; }
    MemoryCategory category() const { return storage_->category(); }
    template <typename T>
    T* data() const { return static_cast<T*>(storage_->data()); }
    // Same storage, another shape with the same number of elements.
    Tensor view(std::vector<int64_t> shape) const;
    std::string shapeString() const;

private:
    std::shared_ptr<Storage> storage_;
    std::vector<int64_t> shape_;
    ElementType type_ = ElementType::F64;
};

} // namespace tessel::exec
