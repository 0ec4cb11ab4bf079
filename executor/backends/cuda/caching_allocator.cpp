// Caching device allocator: bins per size class, peak accounting, empty-cache-and-retry on out-of-memory.
#include "caching_allocator.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <string>

namespace tessel::exec::cuda {

namespace {
constexpr int64_t kSmallLimitBytes = int64_t{1} << 20;   // 1 MiB
constexpr int64_t kSmallStepBytes = 512;

std::string mib(int64_t bytes) { return std::to_string(static_cast<double>(bytes) / (1024.0 * 1024.0)) + " MiB"; }
} // namespace

int64_t CachingAllocator::sizeClass(int64_t bytes) {
    if (bytes <= kSmallStepBytes) return kSmallStepBytes;
    if (bytes < kSmallLimitBytes) return (bytes + kSmallStepBytes - 1) / kSmallStepBytes * kSmallStepBytes;
    int64_t power = kSmallLimitBytes;
    while (power <= bytes / 2) power *= 2;   // largest power of two <= bytes
    const int64_t step = power / 8;
    return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
    std::lock_guard<std::mutex> lock(mutex_);
    emptyCacheLocked();
    // Blocks still in use belong to tensors that outlive the allocator (a bug elsewhere); hand them back too,
    // so the device memory is not lost with the process still running.
    for (auto& [p, b] : inUse_) raw_.release(p, b.classBytes);
    inUse_.clear();
}

void* CachingAllocator::rawAllocate(int64_t classBytes) {
    void* p = raw_.allocate(classBytes);
    if (!p) {
        ++stats_.oomRetries;
        emptyCacheLocked();
        p = raw_.allocate(classBytes);
    }
    if (!p)
        throw DeviceError("device out of memory: cannot allocate " + mib(classBytes) + " (in use " +
                          mib(stats_.inUseBytes) + ", reserved " + mib(stats_.reservedBytes) +
                          " after emptying the cache)");
    ++stats_.rawAllocations;
    stats_.reservedBytes += classBytes;
    stats_.peakReservedBytes = std::max(stats_.peakReservedBytes, stats_.reservedBytes);
    return p;
}

void* CachingAllocator::allocate(int64_t bytes) {
    if (bytes < 0) throw RuntimeError("caching allocator: negative request of " + std::to_string(bytes) + " bytes");
    const int64_t classBytes = sizeClass(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    auto bin = bins_.find(classBytes);
    if (bin != bins_.end() && !bin->second.empty()) {
        p = bin->second.back();
        bin->second.pop_back();
        ++stats_.cacheHits;
    } else {
        p = rawAllocate(classBytes);
    }
    inUse_[p] = Block{classBytes, bytes};
    stats_.inUseBytes += classBytes;
    stats_.requestedBytes += bytes;
    stats_.peakInUseBytes = std::max(stats_.peakInUseBytes, stats_.inUseBytes);
    stats_.peakRequestedBytes = std::max(stats_.peakRequestedBytes, stats_.requestedBytes);
    return p;
}

void CachingAllocator::free(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = inUse_.find(p);
    if (it == inUse_.end()) throw RuntimeError("caching allocator: free of a pointer it did not hand out (or freed twice)");
    const Block b = it->second;
    inUse_.erase(it);
    stats_.inUseBytes -= b.classBytes;
    stats_.requestedBytes -= b.requestedBytes;
    bins_[b.classBytes].push_back(p);
}

void CachingAllocator::emptyCacheLocked() {
    for (auto& [classBytes, blocks] : bins_) {
        for (void* p : blocks) {
            raw_.release(p, classBytes);
            ++stats_.rawReleases;
            stats_.reservedBytes -= classBytes;
        }
        blocks.clear();
    }
    bins_.clear();
}

void CachingAllocator::emptyCache() {
    std::lock_guard<std::mutex> lock(mutex_);
    emptyCacheLocked();
}

AllocatorStats CachingAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

} // namespace tessel::exec::cuda
