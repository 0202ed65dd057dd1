// half_precision.hpp against the compiler's own _Float16 conversions, bit for bit: a stride through
// every float bit pattern (both signs, subnormals, overflow, NaN) and every one of the 65536 halves.
#include "core/model/half_precision.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

namespace attncheck {
namespace {

TEST(HalfPrecision, RoundsAsFloat16CastsDo) {
  std::uint64_t checked = 0;
  // 65521 is prime: the stride visits every exponent and many mantissa patterns of both signs.
  for (std::uint64_t pattern = 0; pattern <= 0xFFFFFFFFull; pattern += 65521) {
    const float value = std::bit_cast<float>(static_cast<std::uint32_t>(pattern));
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
    ASSERT_EQ(half_bits(value), expected) << "float bits " << std::hex << pattern;
    ++checked;
  }
  // Ties (exactly halfway between two halves) round to even; the largest half and the overflow beyond it.
  for (const float value : {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, 0x1p-25f, 0x1p-24f,
                            -0x1p-25f, 3 * 0x1p-26f}) {
    EXPECT_EQ(half_bits(value), std::bit_cast<std::uint16_t>(static_cast<_Float16>(value))) << value;
  }
  EXPECT_GT(checked, 65000u);
}

TEST(HalfPrecision, WidensEveryHalfExactly) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float expected = static_cast<float>(std::bit_cast<_Float16>(half));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(from_half_bits(half)), std::bit_cast<std::uint32_t>(expected))
        << "half bits " << std::hex << bits;
  }
  EXPECT_EQ(round_to_half(65520.0f), INFINITY);
  EXPECT_TRUE(std::isnan(round_to_half(NAN)));
}

TEST(HalfPrecision, RoundsToBfloat16ToNearestEven) {
  EXPECT_EQ(round_to_bfloat16(1.0f + 0x1p-8f), 1.0f);                    // a tie: to the even 1.0
  EXPECT_EQ(round_to_bfloat16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);      // a tie: to the even 1 + 2^-6
  EXPECT_EQ(round_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);  // past the tie: up
  EXPECT_EQ(round_to_bfloat16(-0x1.FFFFFEp127f), -INFINITY);             // overflow
  EXPECT_EQ(round_to_bfloat16(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(round_to_bfloat16(std::bit_cast<float>(0x7FFFFFFFu))));  // a NaN that would carry
}

}  // namespace
}  // namespace attncheck
