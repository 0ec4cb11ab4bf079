// retainFreedHeap: on glibc, a block of a simulation's size comes from the heap and stays there once freed.
#include "tessel/sim/heap.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
TEST(Heap, AFreedSimulationSizedBlockStaysInTheHeap) {
    ASSERT_TRUE(tessel::sim::retainFreedHeap()); // false: glibc refused a threshold (e.g. one over its maximum)
    constexpr size_t kBlockBytes = 16u << 20;    // a long pipeline's schedule and timeline are of this order
    const struct mallinfo2 before = mallinfo2();
    void* block = std::malloc(kBlockBytes);
    ASSERT_NE(block, nullptr);
    std::memset(block, 1, kBlockBytes);
    const struct mallinfo2 held = mallinfo2();
    // Served from the heap, not mapped on its own (glibc's default threshold is 128 KiB).
    EXPECT_EQ(held.hblks, before.hblks);
    std::free(block);
    const struct mallinfo2 after = mallinfo2();
    // Kept for the next simulation: at least the block is free in the heap, where glibc's default 128 KiB trim
    // threshold hands the top of the heap back to the kernel.
    EXPECT_GE(after.fordblks, kBlockBytes);
}
#else
TEST(Heap, OffGlibcNothingIsChanged) { EXPECT_FALSE(tessel::sim::retainFreedHeap()); }
#endif
