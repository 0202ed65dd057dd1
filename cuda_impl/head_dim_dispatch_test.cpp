// The head_dim dispatch table: each fast width reaches its own exact instantiation, every other even
// head_dim in [2, 256] the generic one with room for it, and anything else the error branch.
#include <gtest/gtest.h>

#include <string>

#include "cuda_impl/head_dim_dispatch.hpp"

namespace attncheck::cuda_impl {
namespace {

struct Chosen {
  std::int32_t capacity;
  bool exact;
};

Chosen choose(std::int32_t head_dim) {
  return dispatch_head_dim(head_dim, [](auto tag) { return Chosen{decltype(tag)::capacity, decltype(tag)::exact}; });
}

TEST(HeadDimDispatch, FastWidthsRunExactlyAtTheirWidth) {
  for (const std::int32_t head_dim : kFastHeadDims) {
    const Chosen chosen = choose(head_dim);
    EXPECT_TRUE(chosen.exact) << head_dim;
    EXPECT_EQ(chosen.capacity, head_dim) << head_dim;
    EXPECT_EQ(chosen.capacity % 16, 0) << "a fast width is whole mma chunks";
  }
  EXPECT_EQ(choose(80).capacity, 80) << "head_dim 80 is not padded to 96";
}

TEST(HeadDimDispatch, EveryOtherEvenHeadDimRunsGeneric) {
  for (std::int32_t head_dim = 2; head_dim <= kMaxHeadDim; head_dim += 2) {
    if (is_fast_head_dim(head_dim)) continue;
    const Chosen chosen = choose(head_dim);
    EXPECT_FALSE(chosen.exact) << head_dim;
    EXPECT_GE(chosen.capacity, padded_to_chunks(head_dim)) << head_dim;
  }
}

TEST(HeadDimDispatch, OddOrOutOfRangeIsAnErrorNamingTheValidRange) {
  for (const std::int32_t head_dim : {-2, 0, 1, 33, 255, 258, 512}) {
    try {
      (void)choose(head_dim);
      ADD_FAILURE() << head_dim << " was dispatched";
    } catch (const UnsupportedHeadDim& error) {
      EXPECT_NE(std::string(error.what()).find("even and in [2, 256]"), std::string::npos) << error.what();
    }
  }
}

TEST(HeadDimDispatch, ChunkPadding) {
  EXPECT_EQ(padded_to_chunks(2), 16);
  EXPECT_EQ(padded_to_chunks(34), 48);
  EXPECT_EQ(padded_to_chunks(80), 80);
  EXPECT_EQ(padded_to_chunks(256), 256);
}

}  // namespace
}  // namespace attncheck::cuda_impl
