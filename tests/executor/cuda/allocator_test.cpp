// Caching allocator bookkeeping over a host fake of the raw allocator: size classes, reuse, peaks, the
// empty-cache-and-retry policy on out-of-memory, and errors.
#include "caching_allocator.hpp"

#include "tessel/cost/errors.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

namespace tessel::exec::cuda {
namespace {

// Hands out host memory up to a capacity; nullptr beyond it (as cudaMalloc's out-of-memory).
class FakeRaw final : public RawAllocator {
public:
    explicit FakeRaw(int64_t capacityBytes) : capacity_(capacityBytes) {}
    ~FakeRaw() override { EXPECT_TRUE(live_.empty()) << live_.size() << " raw blocks never released"; }
    void* allocate(int64_t bytes) override {
        if (usedBytes + bytes > capacity_) return nullptr;
        void* p = std::malloc(static_cast<size_t>(bytes));
        live_[p] = bytes;
        usedBytes += bytes;
        ++allocations;
        return p;
    }
    void release(void* p, int64_t bytes) override {
        auto it = live_.find(p);
        ASSERT_NE(it, live_.end()) << "release of a block the fake never handed out";
        EXPECT_EQ(it->second, bytes) << "released with another size than allocated";
        usedBytes -= bytes;
        live_.erase(it);
        std::free(p);
    }
    int64_t usedBytes = 0;
    int allocations = 0;

private:
    int64_t capacity_;
    std::map<void*, int64_t> live_;
};

TEST(SizeClass, HandCheckedValues) {
    EXPECT_EQ(CachingAllocator::sizeClass(0), 512);
    EXPECT_EQ(CachingAllocator::sizeClass(1), 512);
    EXPECT_EQ(CachingAllocator::sizeClass(512), 512);
    EXPECT_EQ(CachingAllocator::sizeClass(513), 1024);
    EXPECT_EQ(CachingAllocator::sizeClass((1 << 20) - 1), 1 << 20);
    EXPECT_EQ(CachingAllocator::sizeClass(1 << 20), 1 << 20);
    // 1 MiB + 1 B: steps of 1 MiB / 8 = 128 KiB -> 1 MiB + 128 KiB
    EXPECT_EQ(CachingAllocator::sizeClass((1 << 20) + 1), (1 << 20) + (1 << 17));
    // 3 MiB: largest power of two below is 2 MiB, step 256 KiB, 3 MiB is a multiple
    EXPECT_EQ(CachingAllocator::sizeClass(3 << 20), 3 << 20);
}

TEST(SizeClass, CoversTheRequestWithBoundedWasteOverAGrid) {
    std::mt19937_64 rng(7);
    int64_t previous = 0;
    for (int64_t bytes = 1; bytes < (int64_t{1} << 34); bytes = bytes * 3 / 2 + static_cast<int64_t>(rng() % 1000)) {
        const int64_t c = CachingAllocator::sizeClass(bytes);
        EXPECT_GE(c, bytes);
        if (bytes >= 4096) EXPECT_LE(static_cast<double>(c - bytes), 0.125 * static_cast<double>(c) + 512.0) << bytes;
        EXPECT_EQ(c % 512, 0);
        EXPECT_GE(c, previous);   // monotone in the request
        EXPECT_EQ(CachingAllocator::sizeClass(c), c);   // a class is its own class
        previous = c;
    }
}

TEST(CachingAllocator, ReusesAFreedBlockOfTheSameClass) {
    FakeRaw raw(1 << 30);
    {
        CachingAllocator a(raw);
        void* p = a.allocate(1000);
        a.free(p);
        void* q = a.allocate(1024);   // same 1024-byte class
        EXPECT_EQ(q, p);
        EXPECT_EQ(raw.allocations, 1);
        EXPECT_EQ(a.stats().cacheHits, 1);
        void* r = a.allocate(4096);   // another class: a new raw block
        EXPECT_NE(r, q);
        EXPECT_EQ(raw.allocations, 2);
        a.free(q);
        a.free(r);
        EXPECT_EQ(a.stats().inUseBytes, 0);
        EXPECT_EQ(a.stats().reservedBytes, 1024 + 4096);
    }
    EXPECT_EQ(raw.usedBytes, 0);   // the destructor hands the cache back
}

TEST(CachingAllocator, TracksCurrentAndPeakBytes) {
    FakeRaw raw(1 << 30);
    CachingAllocator a(raw);
    void* p = a.allocate(100);      // class 512
    void* q = a.allocate(3000);     // class 3072
    AllocatorStats s = a.stats();
    EXPECT_EQ(s.requestedBytes, 3100);
    EXPECT_EQ(s.inUseBytes, 512 + 3072);
    a.free(q);
    void* r = a.allocate(200);      // class 512: a new block (p's is in use)
    s = a.stats();
    EXPECT_EQ(s.requestedBytes, 300);
    EXPECT_EQ(s.peakRequestedBytes, 3100);
    EXPECT_EQ(s.peakInUseBytes, 512 + 3072);
    EXPECT_EQ(s.reservedBytes, 512 + 3072 + 512);
    EXPECT_EQ(s.peakReservedBytes, 512 + 3072 + 512);
    a.free(p);
    a.free(r);
    a.emptyCache();
    EXPECT_EQ(a.stats().reservedBytes, 0);
    EXPECT_EQ(a.stats().rawReleases, 3);
    EXPECT_EQ(raw.usedBytes, 0);
}

TEST(CachingAllocator, EmptiesTheCacheAndRetriesWhenTheDeviceIsFull) {
    FakeRaw raw(8192);
    CachingAllocator a(raw);
    void* p = a.allocate(4096);
    a.free(p);                      // cached: 4096 of 8192 reserved
    void* q = a.allocate(6000);     // class 6144 does not fit beside the cached block
    EXPECT_NE(q, nullptr);
    EXPECT_EQ(a.stats().oomRetries, 1);
    EXPECT_EQ(a.stats().reservedBytes, 6144);
    a.free(q);
}

TEST(CachingAllocator, OutOfMemoryIsADeviceErrorNamingTheRequest) {
    FakeRaw raw(4096);
    CachingAllocator a(raw);
    void* p = a.allocate(4096);
    try {
        a.allocate(2048);
        FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
    }
    a.free(p);
}

TEST(CachingAllocator, FreeingAForeignOrFreedPointerThrows) {
    FakeRaw raw(1 << 20);
    CachingAllocator a(raw);
    int local = 0;
    EXPECT_THROW(a.free(&local), RuntimeError);
    void* p = a.allocate(10);
    a.free(p);
    EXPECT_THROW(a.free(p), RuntimeError);
    EXPECT_THROW(a.allocate(-1), RuntimeError);
}

TEST(CachingAllocator, RandomTraceKeepsTheBooksBalanced) {
    // A random interleaving of allocations and frees: current bytes always equal the sum of live requests,
    // peaks never fall below current, and no live block is handed out twice.
    FakeRaw raw(int64_t{1} << 32);
    CachingAllocator a(raw);
    std::mt19937_64 rng(11);
    std::map<void*, int64_t> live;
    int64_t liveBytes = 0;
    for (int i = 0; i < 3000; ++i) {
        if (live.empty() || rng() % 3 != 0) {
            const int64_t bytes = static_cast<int64_t>(rng() % (3u << 20));
            void* p = a.allocate(bytes);
            ASSERT_EQ(live.count(p), 0u);
            live[p] = bytes;
            liveBytes += bytes;
        } else {
            auto it = live.begin();
            std::advance(it, static_cast<long>(rng() % live.size()));
            liveBytes -= it->second;
            a.free(it->first);
            live.erase(it);
        }
        const AllocatorStats s = a.stats();
        ASSERT_EQ(s.requestedBytes, liveBytes);
        ASSERT_GE(s.peakRequestedBytes, s.requestedBytes);
        ASSERT_GE(s.reservedBytes, s.inUseBytes);
        ASSERT_GE(s.inUseBytes, s.requestedBytes);
    }
    for (auto& [p, b] : live) a.free(p);
}

} // namespace
} // namespace tessel::exec::cuda
