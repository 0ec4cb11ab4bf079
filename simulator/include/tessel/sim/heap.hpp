// Keeping the memory one simulation frees for the next: a process-wide allocator setting that programs simulating
// many plans (tessel, tessel-gui, the benchmarks, the simulator's tests) opt into from main().
#pragma once

namespace tessel::sim {

// Each simulation builds and frees a schedule, its costs and its timeline (a few MiB to tens of MiB for a pipeline
// of hundreds of micro-batches). glibc's malloc by default hands the top of its heap back to the kernel when it is
// freed and maps large blocks afresh, so the next simulation takes a page fault for every page it touches again; the
// kernel serialises the page faults of a process's threads, so a search on several threads spent most of its time
// there (docs/search.md, "Memory the simulations free"). This keeps up to 256 MiB of freed heap for reuse and serves
// blocks up to 32 MiB from the heap (mallopt M_TRIM_THRESHOLD, M_MMAP_THRESHOLD; the latter is glibc's largest).
// Process-wide, so no library calls it: a program's main() does, once, before it starts threads. Returns whether it
// took effect (false off glibc, where nothing is changed).
bool retainFreedHeap();

} // namespace tessel::sim
