#include "core/errors/nearby.hpp"

#include <gtest/gtest.h>

namespace attncheck {
namespace {

TEST(Nearby, Divisors) {
  EXPECT_EQ(divisors(1), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(divisors(36), (std::vector<std::int64_t>{1, 2, 3, 4, 6, 9, 12, 18, 36}));
}

TEST(Nearby, NearestDivisorsBracketTheTarget) {
  EXPECT_EQ(nearest_divisors(16, 3), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(nearest_divisors(16, 4), (std::vector<std::int64_t>{4}));
  EXPECT_EQ(nearest_divisors(16, 40), (std::vector<std::int64_t>{16}));
  EXPECT_EQ(nearest_divisors(16, 0), (std::vector<std::int64_t>{1}));
}

TEST(Nearby, NearestMultiplesBracketTheTarget) {
  EXPECT_EQ(nearest_multiples(16, 1000), (std::vector<std::int64_t>{992, 1008}));
  EXPECT_EQ(nearest_multiples(16, 1024), (std::vector<std::int64_t>{1024}));
  EXPECT_EQ(nearest_multiples(16, 5), (std::vector<std::int64_t>{16}));
}

TEST(Nearby, Formatting) {
  EXPECT_EQ(alternatives("num_kv_heads", {2, 4}), "num_kv_heads = 2 or 4");
  EXPECT_EQ(join({1, 2, 4}), "1, 2, 4");
  EXPECT_EQ(format_number(1e6), "1000000");
  EXPECT_EQ(format_number(0.25), "0.25");
}

}  // namespace
}  // namespace attncheck
