#include "core/resources/fresh_pages.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/model/tensor.hpp"

namespace attncheck {
namespace {

constexpr std::size_t kLarge = kPrefaultBytes * 4;  // 64 MiB, above glibc's default mapping threshold too

// What prefault_next_block rests on: under keep_heap_for_reuse's policy glibc hands a freed large block to the
// next request of its size. Were a glibc to stop doing so, the prefault would only cost time; this says so.
TEST(FreshPages, FreedLargeBlockGoesToTheNextRequestOfItsSize) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator quarantines freed blocks: the assumption is glibc's";
#else
  keep_heap_for_reuse();
  void* first = std::malloc(kLarge);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(mallinfo2().hblkhd, 0u) << "a large block was mapped by itself: the heap policy is not in force";
  std::free(first);
  void* second = std::malloc(kLarge);
  EXPECT_EQ(first, second) << "the prefaulted block is not the one the tensor gets: prefault_next_block is wasted";
  std::free(second);
#endif
}

// A large tensor is still all zeros when its block held other values before (the prefault writes a byte per
// page of a block it frees; the zero-fill comes after).
TEST(FreshPages, LargeTensorIsZeroFilledOverReusedMemory) {
  keep_heap_for_reuse();
  const auto count = static_cast<std::int64_t>(kLarge / sizeof(double));
  { const std::vector<double> earlier(static_cast<std::size_t>(count), 3.5); }
  const Tensor tensor({count});
  ASSERT_EQ(tensor.numel(), count);
  EXPECT_TRUE(std::all_of(tensor.values.begin(), tensor.values.end(), [](double v) { return v == 0.0; }));
}

}  // namespace
}  // namespace attncheck
