// The fuzzer's promises: a seed names one sequence of cases, shards split it without overlap or gap,
// every generated spec is a valid case, and a failure shrinks to a case no larger than the original.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/generation/input_generation.hpp"
#include "core/tp/tp_convention.hpp"
#include "impl/registry.hpp"
#include "properties/checks.hpp"
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

// SCHEMA.md: per-rank gradients exist when tp_size > 1. A TP 1 case asks none of a sharded
// implementation (a worker greeting "sharded" that answers tp_size 1 used to fail on ranks/0/*).
TEST(Fuzz, ATp1CaseAsksNoPerRankGradients) {
  const Geometry geometry = resolve_geometry({.hidden_size = 8, .num_heads = 2, .head_dim = 4});
  const auto has_ranks = [](const NamedTensors& tensors) {
    return std::any_of(tensors.begin(), tensors.end(), [](const auto& e) { return e.first.starts_with("ranks/"); });
  };
  EXPECT_FALSE(has_ranks(oracle_tensors(generate_case(geometry, {.seed = 3, .tp_size = 1}), true)));
  EXPECT_TRUE(has_ranks(oracle_tensors(generate_case(geometry, {.seed = 3, .tp_size = 2}), true)));
  EXPECT_FALSE(has_ranks(oracle_tensors(generate_case(geometry, {.seed = 3, .tp_size = 2}), false)));
}

// Answers with the reference, its per-rank gradients held as megatron-equal-block (as Megatron-Core's
// would be), optionally with one held K row of one rank changed.
class MegatronHeldImplementation : public impl::Implementation {
 public:
  explicit MegatronHeldImplementation(std::optional<int> perturbed_rank) : perturbed_rank_(perturbed_rank) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return true; }
  TpConvention tp_convention() const override { return TpConvention::megatron_equal_block; }
  NamedTensors run(const Case& test_case) override {
    Result result = reference::run_reference_tp(test_case);
    result.rank_gradients = regroup_rank_gradients(result.rank_gradients, test_case.plan, TpConvention::replicated_kv,
                                                   TpConvention::megatron_equal_block);
    if (perturbed_rank_) result.rank_gradients.at(*perturbed_rank_).k_proj.values.front() += 1.0;
    return named_tensors(result);
  }

 private:
  std::optional<int> perturbed_rank_;
  std::string name_ = "megatron-held";
};

// Fuzzing and the property checks judge per-rank gradients as the implementation holds them: the
// oracle's replicated-kv ones are regrouped, so a correct Megatron layout passes and a changed K row
// fails on its rank. TP 8 over 2 KV heads: rank 3 holds K rows 2-3 (KV head 0) and all of V head 0.
TEST(Fuzz, PerRankGradientsAreJudgedAsTheImplementationHoldsThem) {
  const Geometry geometry =
      resolve_geometry({.hidden_size = 16, .num_heads = 8, .num_kv_heads = 2, .head_dim = 4, .qkv_bias = true});
  const Case test_case = generate_case(geometry, {.seed = 9, .batch = 1, .seq = 5, .tp_size = 8});
  MegatronHeldImplementation right(std::nullopt);
  const CheckOutcome passed = check_matches_reference(right, test_case);
  EXPECT_EQ(passed.verdict, Verdict::pass) << passed.detail;
  ASSERT_TRUE(passed.report);
  const auto compared = [&](const std::string& name) {
    return std::any_of(passed.report->tensors.begin(), passed.report->tensors.end(),
                       [&](const TensorReport& tensor) { return tensor.name == name; });
  };
  EXPECT_TRUE(compared("ranks/3/grads/k_proj"));
  EXPECT_FALSE(compared("ranks/0/grads/k_proj"));  // rank 0 holds q rows 0-5 alone
  MegatronHeldImplementation wrong(3);
  const CheckOutcome failed = check_matches_reference(wrong, test_case);
  EXPECT_EQ(failed.verdict, Verdict::fail);
  EXPECT_NE(failed.detail.find("ranks/3/grads/k_proj MISMATCH"), std::string::npos) << failed.detail;
}

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

// The long profile reaches where kernels break: lengths next to tile edges and prime ones, up to 4096,
// windows and padding ending next to tile edges, rows with no key, long prefills with many decode calls,
// the widths kernels specialise; and every case stays within the work budget.
TEST(Fuzz, TheLongProfileReachesTileEdgesAndStaysWithinItsBudget) {
  const GenLimits limits = GenLimits::for_profile(SizeProfile::long_sequences);
  const auto near_edge = [](std::int64_t n) {
    for (const std::int64_t tile : {64, 128}) {
      const std::int64_t distance = std::min(n % tile, tile - n % tile);
      if (n >= tile - 2 && distance <= 2) return true;
    }
    return false;
  };
  const auto is_prime = [](std::int64_t n) {
    for (std::int64_t d = 2; d * d <= n; ++d) {
      if (n % d == 0) return false;
    }
    return n > 1;
  };
  int edges = 0, primes = 0, beyond_2048 = 0, windows = 0, edge_windows = 0, padded = 0, edge_padding = 0;
  int keyless_rows = 0, many_calls = 0, specialised = 0;
  std::int64_t longest = 0;
  for (std::int64_t i = 0; i < 404; ++i) {
    const CaseSpec spec = fuzz_case(13, i, limits);
    const Case test_case = make_case(spec);  // throws on an invalid spec
    const Geometry& g = test_case.geometry();
    const std::int64_t seq = spec.inputs.seq;
    EXPECT_GE(seq, 48);
    EXPECT_LE(seq, 4096);
    EXPECT_LE(g.num_heads(), 4);
    EXPECT_LE(
        spec.inputs.batch * g.num_heads() * seq * seq * g.head_dim(),
        std::max<std::int64_t>(limits.max_attention_work, spec.inputs.batch * g.num_heads() * 48 * 48 * g.head_dim()));
    longest = std::max(longest, seq);
    edges += near_edge(seq);
    primes += is_prime(seq);
    beyond_2048 += seq > 2048;
    specialised += g.head_dim() == 64 || g.head_dim() == 80 || g.head_dim() == 128 || g.head_dim() == 256;
    if (g.sliding_window()) {
      ++windows;
      edge_windows += near_edge(*g.sliding_window());
    }
    for (std::size_t b = 0; b < spec.inputs.key_lengths.size(); ++b) {
      ++padded;
      edge_padding += near_edge(spec.inputs.key_lengths[b]);
      keyless_rows += spec.inputs.key_lengths[b] == 0;
    }
    many_calls += spec.inputs.decode.steps.size() >= 4 && spec.inputs.decode.prefill > seq / 2;
  }
  EXPECT_GT(edges, 100);
  EXPECT_GT(primes, 20);
  EXPECT_GT(beyond_2048, 5);
  EXPECT_GT(longest, 3000);  // 4096 at RapidCheck size 100 only
  EXPECT_GT(windows, 50);
  EXPECT_GT(edge_windows, 10);
  EXPECT_GT(padded, 30);
  EXPECT_GT(edge_padding, 5);
  EXPECT_GT(keyless_rows, 3);
  EXPECT_GT(many_calls, 20);
  EXPECT_GT(specialised, 40);
  std::printf(
      "long profile over 404 cases: %d near a tile edge, %d prime, %d beyond 2048 (longest %lld), %d windows "
      "(%d near an edge), %d padded rows (%d near an edge, %d without keys), %d long prefills with 4+ calls, "
      "%d with head_dim 64/80/128/256\n",
      edges, primes, beyond_2048, static_cast<long long>(longest), windows, edge_windows, padded, edge_padding,
      keyless_rows, many_calls, specialised);
}

// Right up to 64 keys, wrong beyond: a bug past a kernel's first tile.
class WrongPastOneTile : public impl::Implementation {
 public:
  const std::string& name() const override { return name_; }
  bool sharded() const override { return true; }
  NamedTensors run(const Case& test_case) override {
    NamedTensors tensors = named_tensors(reference::run_reference_tp(test_case));
    if (test_case.inputs.seq > 64) tensors.at("out").values[0] += 1.0;
    return tensors;
  }

 private:
  std::string name_ = "wrong-past-one-tile";
};

TEST(Fuzz, ALongProfileFailureShrinksToTheSmallestFailingLength) {
  WrongPastOneTile wrong;
  const FuzzReport report = fuzz(wrong,
                                 {.seed = 2,
                                  .cases = 20,
                                  .shard_index = 60,  // RapidCheck size 60 every time: sequences of up to ~2500
                                  .shard_count = 101,
                                  .limits = GenLimits::for_profile(SizeProfile::long_sequences),
                                  .repro_dir = ::testing::TempDir() + "/fuzz_test_long_repro",
                                  .shrink_seconds = 120,
                                  .progress_seconds = 0},
                                 nullptr);
  ASSERT_TRUE(report.failure.has_value());
  EXPECT_GT(report.failure->original.inputs.seq, 64);
  EXPECT_EQ(report.failure->shrunk.inputs.seq, 65) << describe(report.failure->shrunk);
  std::printf("shrunk in %lld steps (%.1f s) from: %s\n  to: %s\n",
              static_cast<long long>(report.failure->shrink_steps), report.failure->shrink_seconds,
              describe(report.failure->original).c_str(), describe(report.failure->shrunk).c_str());
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
