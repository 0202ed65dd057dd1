// The shrinking choices draw exactly what RapidCheck's draw (a seed names the same cases as before they
// shrank) and shrink towards earlier entries; a fuzz counterexample sheds features the bug does not need.
#include "properties/shrinking_choice.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "impl/registry.hpp"
#include "properties/fuzz.hpp"

namespace attncheck::properties {
namespace {

TEST(ShrinkingChoice, DrawsWhatRapidCheckDraws) {
  const auto ours = weighted_element<int>({{5, 0}, {3, 1}, {1, 2}, {1, 3}});
  const auto theirs = rc::gen::weightedElement<int>({{5, 0}, {3, 1}, {1, 2}, {1, 3}});
  const auto ours_equal = element(10, 20, 30);
  const auto theirs_equal = rc::gen::element(10, 20, 30);
  const auto ours_of = element_of(std::vector<int>{7, 8, 9, 10, 11});
  const auto theirs_of = rc::gen::elementOf(std::vector<int>{7, 8, 9, 10, 11});
  for (std::uint64_t seed = 0; seed < 2000; ++seed) {
    const rc::Random random(seed);
    EXPECT_EQ(ours(random, 50).value(), theirs(random, 50).value()) << "seed " << seed;
    EXPECT_EQ(ours_equal(random, 50).value(), theirs_equal(random, 50).value()) << "seed " << seed;
    EXPECT_EQ(ours_of(random, 50).value(), theirs_of(random, 50).value()) << "seed " << seed;
  }
}

TEST(ShrinkingChoice, ShrinksTowardsEarlierEntries) {
  const auto choice = weighted_element<int>({{1, 0}, {1, 1}, {1, 2}, {1, 3}});
  int checked = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const rc::Shrinkable<int> drawn = choice(rc::Random(seed), 50);
    std::vector<int> shrinks;
    auto sequence = drawn.shrinks();
    while (auto next = sequence.next()) shrinks.push_back(next->value());
    std::vector<int> earlier;
    for (int value = 0; value < drawn.value(); ++value) earlier.push_back(value);
    EXPECT_EQ(shrinks, earlier) << "drawn " << drawn.value();  // simplest first
    checked += drawn.value() == 3 ? 1 : 0;
  }
  EXPECT_GT(checked, 0);  // the last entry was drawn, and offered all three before it
}

TEST(ShrinkingChoice, CounterexamplesShedUnneededFeatures) {
  // A fully masked row returning the mean of V needs a window or padding and nothing else: before the
  // choices shrank, its counterexample kept TP 2, seq 9, QK-norm and heavy-tailed inputs.
  const auto mutant = impl::open_implementation("mutant-masked-row-mean-of-v");
  const FuzzReport report = fuzz(
      *mutant, [] { return impl::open_implementation("mutant-masked-row-mean-of-v"); },
      {.seed = 1, .cases = 5000, .repro_dir = ::testing::TempDir(), .progress_seconds = 0}, nullptr);
  ASSERT_TRUE(report.failure.has_value());
  const CaseSpec& shrunk = report.failure->shrunk;
  const std::string described = describe(shrunk);
  EXPECT_EQ(described.find("qk_norm"), std::string::npos) << described;
  EXPECT_EQ(described.find("softcap"), std::string::npos) << described;
  EXPECT_EQ(described.find("interleaved"), std::string::npos) << described;
  EXPECT_NE(described.find("tp 1;"), std::string::npos) << described;
  EXPECT_NE(described.find("seq 3,"), std::string::npos) << described;
}

}  // namespace
}  // namespace attncheck::properties
