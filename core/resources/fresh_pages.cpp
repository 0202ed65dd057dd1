#include "core/resources/fresh_pages.hpp"

#include <malloc.h>
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace attncheck {

namespace {

std::atomic<bool> heap_kept{false};

}  // namespace

void keep_heap_for_reuse() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // cast to unsigned: never trim
  heap_kept = true;
}

void prefault_next_block(std::size_t bytes) {
  // The size first: every Tensor built zero-filled asks, and almost all are small.
  if (bytes < kPrefaultBytes || !heap_kept || omp_in_parallel() || omp_get_max_threads() < 2) return;
  // volatile: the writes are the point; a compiler seeing the block freed unread could drop them.
  volatile char* block = static_cast<volatile char*>(std::malloc(bytes));
  if (block == nullptr) return;  // the allocation that follows reports the shortage itself
  constexpr std::int64_t kPage = 4096;
  const auto pages = static_cast<std::int64_t>((bytes + kPage - 1) / kPage);
#pragma omp parallel for schedule(static)
  for (std::int64_t page = 0; page < pages; ++page) block[page * kPage] = 0;
  std::free(const_cast<char*>(block));
}

}  // namespace attncheck
