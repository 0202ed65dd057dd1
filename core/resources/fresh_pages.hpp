// The first touch of fresh heap pages, spread over OpenMP's threads. On this project's VM a page's first touch
// costs the guest kernel's zeroing and the host's fault (about 1.4 ns a byte with 2 MB pages, ~10 CPU-s over
// `attncheck run`'s heap), and a large tensor's zero-fill pays it on one thread while the other core waits
// (perf over the two widest goldens: 29% of the samples in that fault, under Tensor's zero-fill).
#pragma once

#include <cstddef>

namespace attncheck {

// Blocks from this size on are faulted in by prefault_next_block (smaller ones: the parallel region's start
// costs more than the faults it shares).
inline constexpr std::size_t kPrefaultBytes = std::size_t{16} << 20;

// The heap policy of the commands that hold gigabytes (cli/main.cpp says why): one arena, no block mapped by
// itself, freed memory never handed back. It also turns prefault_next_block on, which relies on it: under
// glibc's defaults a large block is mapped afresh for each allocation, and touching one first would only
// double its faults.
void keep_heap_for_reuse();

// Where keep_heap_for_reuse() has run: takes a block of `bytes` from the heap, writes one byte of each 4 KiB
// page on OpenMP's threads and frees it, so that the next allocation of that size gets pages already faulted
// in: glibc hands a freed block back to the next request of its size (main() keeps one arena, maps nothing and
// never trims). Only a matter of time: where the allocator hands out another block (another allocator, ASan's
// quarantine), that allocation faults its pages itself as before, and the touched pages stay in the heap for
// later ones. Below kPrefaultBytes, inside a parallel region, or on one thread, it does nothing.
void prefault_next_block(std::size_t bytes);

}  // namespace attncheck
