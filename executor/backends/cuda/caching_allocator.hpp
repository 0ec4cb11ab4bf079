// Caching device allocator: size-class bins over an injectable raw allocator (cudaMalloc on a GPU, a host
// fake in tests), so its bookkeeping is plain C++ and unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tessel::exec::cuda {

// The memory a caching allocator draws from. allocate returns nullptr when the device is out of memory
// (anything else it may throw); release gets back exactly what allocate handed out.
class RawAllocator {
public:
    virtual ~RawAllocator() = default;
    virtual void* allocate(int64_t bytes) = 0;
    virtual void release(void* p, int64_t bytes) = 0;
};

struct AllocatorStats {
    int64_t requestedBytes = 0;        // bytes callers asked for, of blocks now in use
    int64_t inUseBytes = 0;            // size-class bytes of blocks now in use
    int64_t reservedBytes = 0;         // bytes held from the raw allocator (in use + cached)
    int64_t peakRequestedBytes = 0;
    int64_t peakInUseBytes = 0;
    int64_t peakReservedBytes = 0;
    int64_t rawAllocations = 0;        // calls to RawAllocator::allocate that succeeded
    int64_t rawReleases = 0;
    int64_t cacheHits = 0;             // allocations served from a cached block
    int64_t oomRetries = 0;            // raw allocations that failed, emptied the cache and were retried
};

// Blocks are rounded up to a size class and kept, once freed, in a bin of their class for the next request
// of that class (exact-class reuse: no splitting, so a block never straddles two users). Frees are
// stream-ordered by construction in the CUDA backend: every kernel runs on one compute stream, so a block
// freed by the host while a kernel still reads it is only reused by work queued after that kernel. When the
// raw allocator reports out-of-memory the cache is emptied and the request retried once; a second failure
// throws tessel::DeviceError naming the request and the allocator's state. Thread-safe.
class CachingAllocator {
public:
    explicit CachingAllocator(RawAllocator& raw) : raw_(raw) {}
    ~CachingAllocator();
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    void* allocate(int64_t bytes);
    // Returns a block to its bin; tessel::RuntimeError if `p` is not a block of this allocator in use.
    void free(void* p);
    // Hands every cached (free) block back to the raw allocator.
    void emptyCache();
    AllocatorStats stats() const;
    // Size class of a request: multiples of 512 B below 1 MiB (as PyTorch's CUDA caching allocator rounds
    // small blocks); above, multiples of 1/8 of the largest power of two not above the request, so no block
    // wastes more than 12.5% of itself.
    static int64_t sizeClass(int64_t bytes);

private:
    struct Block {
        int64_t classBytes = 0;
        int64_t requestedBytes = 0;
    };
    void* rawAllocate(int64_t classBytes);   // with the empty-cache-and-retry policy; lock held
    void emptyCacheLocked();

    RawAllocator& raw_;
    mutable std::mutex mutex_;
    std::map<int64_t, std::vector<void*>> bins_;     // size class -> cached blocks
    std::unordered_map<void*, Block> inUse_;
    AllocatorStats stats_;
};

} // namespace tessel::exec::cuda
