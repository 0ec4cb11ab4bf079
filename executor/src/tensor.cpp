// Tensors, storage and the per-category memory accounting every backend shares.
#include "tessel/exec/backend.hpp"
#include "tessel/exec/tensor.hpp"

#include <cstring>

#include "tessel/cost/errors.hpp"

#include <algorithm>

namespace tessel::exec {

std::string toString(MemoryCategory c) {
    switch (c) {
    case MemoryCategory::Weights: return "weights";
    case MemoryCategory::Grads: return "grads";
    case MemoryCategory::Optimizer: return "optimizer";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::Buffers: return "buffers";
    }
    return "?";
}

std::string toString(ElementType t) {
    switch (t) {
    case ElementType::F64: return "f64";
    case ElementType::F32: return "f32";
    case ElementType::Bf16: return "bf16";
    }
    return "?";
}

float widenBf16(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
uint16_t narrowToBf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
}

int elementBytes(ElementType t) {
    switch (t) {
    case ElementType::F64: return 8;
    case ElementType::F32: return 4;
    case ElementType::Bf16: return 2;
    }
    return 0;
}

void MemoryStats::allocate(MemoryCategory c, int64_t bytes) {
    auto& cur = currentBytes[static_cast<size_t>(c)];
    cur += bytes;
    peakBytes[static_cast<size_t>(c)] = std::max(peakBytes[static_cast<size_t>(c)], cur);
    currentTotalBytes += bytes;
    if (currentTotalBytes > peakTotalBytes) {
        peakTotalBytes = currentTotalBytes;
        atPeakBytes = currentBytes;
    }
}

void MemoryStats::release(MemoryCategory c, int64_t bytes) {
    currentBytes[static_cast<size_t>(c)] -= bytes;
    currentTotalBytes -= bytes;
}

Storage::~Storage() {
    if (backend_ && data_) backend_->release(data_, bytes_, category_);
}

int64_t Tensor::numel() const {
    int64_t n = 1;
    for (auto d : shape_) n *= d;
    return n;
}

Tensor Tensor::view(std::vector<int64_t> shape) const {
    Tensor t(storage_, std::move(shape), type_);
    if (t.numel() != numel())
        throw RuntimeError("view " + t.shapeString() + " of a tensor " + shapeString() + " changes its size");
    return t;
}

std::string Tensor::shapeString() const {
    std::string s = "[";
    for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
    return s + "]";
}

Tensor Backend::empty(std::vector<int64_t> shape, MemoryCategory category) {
    int64_t n = 1;
    for (auto d : shape) {
        if (d < 0) throw RuntimeError("negative tensor dimension");
        n *= d;
    }
    const ElementType type = elementTypeFor(category);
    const int64_t bytes = n * elementBytes(type);
    void* p = allocateBytes(std::max<int64_t>(bytes, 1));
    memory_.allocate(category, bytes);
    return Tensor(std::make_shared<Storage>(this, p, bytes, category), std::move(shape), type);
}

Tensor Backend::zeros(std::vector<int64_t> shape, MemoryCategory category) {
    Tensor t = empty(std::move(shape), category);
    fill(t, 0.0);
    return t;
}

void Backend::resetPeaks() {
    memory_.peakBytes = memory_.currentBytes;
    memory_.peakTotalBytes = memory_.currentTotalBytes;
    memory_.atPeakBytes = memory_.currentBytes;
}

void Backend::release(void* p, int64_t bytes, MemoryCategory c) {
    memory_.release(c, bytes);
    freeBytes(p, std::max<int64_t>(bytes, 1));
}

} // namespace tessel::exec
