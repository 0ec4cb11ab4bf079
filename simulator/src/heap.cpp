// retainFreedHeap: glibc's mallopt, so that the heap one simulation frees serves the next without page faults.
#include "tessel/sim/heap.hpp"

#include <cstdlib> // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tessel::sim {

bool retainFreedHeap() {
#if defined(__GLIBC__)
    // Setting either threshold also stops glibc from moving them itself (its "dynamic" thresholds).
    constexpr int kTrimThresholdBytes = 256 << 20;
    constexpr int kMmapThresholdBytes = 32 << 20; // HEAP_MAX_SIZE / 2 on 64-bit: the largest mallopt accepts
    const bool trim = mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1;
    const bool mmap = mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1;
    return trim && mmap;
#else
    return false;
#endif
}

} // namespace tessel::sim
