// The fuzzer's promises: a seed names one sequence of cases, shards split it without overlap or gap,
// every generated spec is a valid case, and a failure shrinks to a case no larger than the original.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "impl/registry.hpp"
#include "properties/fuzz.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {
namespace {

// Records the cases it is given (by description) and answers with the reference.
class RecordingImplementation : public impl::Implementation {
 public:
  const std::string& name() const override { return name_; }
  bool sharded() const override { return true; }
  NamedTensors run(const Case& test_case) override {
    seen.insert(fmt_case(test_case));
    return named_tensors(reference::run_reference_tp(test_case));
  }
  static std::string fmt_case(const Case& c) {
    return std::to_string(c.inputs.x.values.size()) + ":" + std::to_string(c.inputs.x.values.front()) + ":" +
           std::to_string(c.weights.q_proj.values.back()) + ":" + std::to_string(c.inputs.positions.back());
  }
  std::multiset<std::string> seen;

 private:
  std::string name_ = "recording";
};

TEST(Fuzz, ASeedNamesOneSequenceOfCases) {
  for (std::int64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(describe(fuzz_case(5, i, {})), describe(fuzz_case(5, i, {}))) << i;
  }
  int differing = 0;
  for (std::int64_t i = 0; i < 40; ++i) differing += describe(fuzz_case(5, i, {})) != describe(fuzz_case(6, i, {}));
  EXPECT_GT(differing, 30);
}

TEST(Fuzz, EveryGeneratedSpecIsAValidCase) {
  for (std::int64_t i = 0; i < 404; ++i) {  // every size 0 .. 100, four times
    const CaseSpec spec = fuzz_case(11, i, {});
    const Case test_case = make_case(spec);  // throws on an invalid spec
    EXPECT_GE(test_case.inputs.seq, 3);
    EXPECT_EQ(test_case.geometry().head_dim() % 2, 0);
    EXPECT_LE(test_case.geometry().head_dim(), 256);
  }
}

TEST(Fuzz, ShardsSplitTheCasesWithoutOverlapOrGap) {
  RecordingImplementation whole, first, second;
  FuzzOptions options{.seed = 3, .cases = 30, .progress_seconds = 0};
  fuzz(whole, options, nullptr);
  FuzzOptions half = options;
  half.cases = 15;
  half.shard_count = 2;
  fuzz(first, half, nullptr);
  half.shard_index = 1;
  fuzz(second, half, nullptr);
  std::multiset<std::string> both = first.seen;
  both.insert(second.seen.begin(), second.seen.end());
  EXPECT_EQ(both, whole.seen);
  for (const std::string& key : first.seen) EXPECT_EQ(second.seen.count(key), 0u) << key;
}

TEST(Fuzz, AFailureShrinksToNoLargerACaseAndIsSaved) {
  const auto mutant = impl::open_implementation("mutant-gqa-kv-grad-last-head-only");
  const std::string directory = ::testing::TempDir() + "/fuzz_test_repro";
  const FuzzReport report =
      fuzz(*mutant, {.seed = 1, .cases = 2000, .repro_dir = directory, .shrink_seconds = 30, .progress_seconds = 0},
           nullptr);
  ASSERT_TRUE(report.failure.has_value());
  EXPECT_LE(work(report.failure->shrunk), work(report.failure->original));
  EXPECT_GT(resolve_geometry(report.failure->shrunk.geometry).group_size(), 1);  // the bug needs a GQA group
  EXPECT_EQ(report.failure->outcome.verdict, Verdict::fail);
  EXPECT_TRUE(std::filesystem::exists(report.failure->repro_path));
}

}  // namespace
}  // namespace attncheck::properties
