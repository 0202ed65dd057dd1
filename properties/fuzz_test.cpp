// The fuzzer's promises: a seed names one sequence of cases, shards split it without overlap or gap,
// every generated spec is a valid case, a failure shrinks (the length first, by bisection) to a case no
// larger than the original within a count of candidates, a run stopped by its time limit says so, and a
// failure that needs earlier cases in the same instance is reported with the shortest such sequence.
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
#include "properties/length_shrinking.hpp"
#include "properties/repro.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {
namespace {

// Records the cases it is given (by description) and answers with the reference.
class RecordingImplementation : public impl::Implementation {
 public:
  const std::string& name() const override { return name_; }
  Candidate run(const Case& test_case) override {
    seen.insert(fmt_case(test_case));
    return {.tensors = named_tensors(reference::run_reference_tp(test_case)), .sharded = true};
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
  Candidate run(const Case& test_case) override {
    Result result = reference::run_reference_tp(test_case);
    result.rank_gradients = regroup_rank_gradients(result.rank_gradients, test_case.plan, TpConvention::replicated_kv,
                                                   TpConvention::megatron_equal_block);
    if (perturbed_rank_) result.rank_gradients.at(*perturbed_rank_).k_proj.values.front() += 1.0;
    return {.tensors = named_tensors(result), .tp_convention = TpConvention::megatron_equal_block, .sharded = true};
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

// The latent profile's YaRN draws mscale and mscale_all_dim apart (an equal pair makes RoPE's attention factor 1,
// which would hide a layer that swaps or drops one) and sometimes states an attention factor (issue 56.12).
TEST(Fuzz, TheLatentProfileDrawsUnequalMscalePairsAndStatedAttentionFactors) {
  const GenLimits limits = GenLimits::for_profile(SizeProfile::latent_attention);
  int yarn = 0, unequal = 0, stated = 0;
  for (std::int64_t i = 0; i < 600; ++i) {
    const CaseSpec spec = fuzz_case(3, i, limits);
    const RopeScaling& scaling = spec.geometry.rope_scaling;
    if (scaling.type != RopeScalingType::yarn) continue;
    ++yarn;
    unequal += scaling.mscale.value_or(0.0) != scaling.mscale_all_dim.value_or(0.0) ? 1 : 0;
    stated += scaling.attention_factor ? 1 : 0;
    (void)make_case(spec);  // every draw a valid case
  }
  EXPECT_GT(yarn, 100);
  EXPECT_GT(unequal, yarn / 3);  // 6 of the 9 pairs differ
  EXPECT_GT(stated, yarn / 10);  // one in four
  EXPECT_LT(stated, yarn / 2);
}

// Latent attention x context parallelism is drawn for a statement with both (the CP profile's latent layers, the
// latent profile's layouts), and degenerate layouts stay a small share: Ulysses over one CP rank was 369 of
// 1000 context-parallel cases (issue 56.11).
TEST(Fuzz, LatentLayersMeetContextParallelLayoutsAndFewLayoutsAreDegenerate) {
  GenLimits cp_limits = GenLimits::for_profile(SizeProfile::context_parallel);
  ASSERT_TRUE(cp_limits.capabilities.features.contains(Feature::latent));  // everything(): gives both
  int latent_under_cp = 0, single_rank = 0;
  constexpr int kCases = 600;
  for (std::int64_t i = 0; i < kCases; ++i) {
    const CaseSpec spec = fuzz_case(4, i, cp_limits);
    ASSERT_TRUE(spec.inputs.context_parallel.has_value());
    const Case test_case = make_case(spec);  // every draw a valid case
    latent_under_cp += test_case.geometry().is_latent() && spec.inputs.context_parallel->cp_size > 1 ? 1 : 0;
    single_rank += spec.inputs.context_parallel->cp_size == 1 ? 1 : 0;
  }
  EXPECT_GT(latent_under_cp, kCases / 10);  // one case in four is latent, most with CP > 1
  EXPECT_LT(single_rank, kCases / 10);
  // Without latent in the statement (reference-cp), none is latent, and still few are degenerate.
  cp_limits.capabilities = cp_limits.capabilities.narrowed({}, {Feature::latent});
  single_rank = 0;
  for (std::int64_t i = 0; i < kCases; ++i) {
    const CaseSpec spec = fuzz_case(4, i, cp_limits);
    EXPECT_FALSE(spec.geometry.latent.has_value());
    single_rank += spec.inputs.context_parallel->cp_size == 1 ? 1 : 0;
  }
  EXPECT_LT(single_rank, kCases / 10);

  const GenLimits latent_limits = GenLimits::for_profile(SizeProfile::latent_attention);
  int with_layout = 0;
  for (std::int64_t i = 0; i < kCases; ++i) {
    const CaseSpec spec = fuzz_case(5, i, latent_limits);
    EXPECT_TRUE(spec.geometry.latent.has_value());
    with_layout += spec.inputs.context_parallel.has_value() ? 1 : 0;
    (void)make_case(spec);
  }
  EXPECT_GT(with_layout, kCases / 8);  // one in four
  EXPECT_LT(with_layout, kCases / 2);
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
  Candidate run(const Case& test_case) override {
    NamedTensors tensors = named_tensors(reference::run_reference_tp(test_case));
    if (test_case.inputs.seq > 64) tensors.at("out").values[0] += 1.0;
    return {.tensors = std::move(tensors), .sharded = true};
  }

 private:
  std::string name_ = "wrong-past-one-tile";
};

// A fresh instance of T for fuzz()'s checks of a failure.
template <typename T>
ImplementationFactory fresh() {
  return [] { return std::make_unique<T>(); };
}

TEST(Fuzz, ALongProfileFailureShrinksToTheSmallestFailingLength) {
  WrongPastOneTile wrong;
  const FuzzReport report = fuzz(wrong, fresh<WrongPastOneTile>(),
                                 {.seed = 2,
                                  .cases = 20,
                                  .shard_index = 60,  // RapidCheck size 60 every time: sequences of up to ~2500
                                  .shard_count = 101,
                                  .limits = GenLimits::for_profile(SizeProfile::long_sequences),
                                  .repro_dir = ::testing::TempDir() + "/fuzz_test_long_repro",
                                  .progress_seconds = 0},
                                 nullptr);
  ASSERT_TRUE(report.failure.has_value());
  EXPECT_GT(report.failure->original.inputs.seq, 64);
  EXPECT_EQ(report.failure->shrunk.inputs.seq, 65) << describe(report.failure->shrunk);
  EXPECT_EQ(report.failure->reproduction, Reproduction::alone);
  EXPECT_FALSE(report.failure->shrink_stopped_by_time_limit);
  // The length by bisection first: about log2(seq) probes, not a walk down from the original length.
  EXPECT_LE(report.failure->shrink_length_probes, 2 * 13);
  std::printf("shrunk in %lld steps (%lld candidates, %lld length probes; %.1f s) from: %s\n  to: %s\n",
              static_cast<long long>(report.failure->shrink_steps),
              static_cast<long long>(report.failure->shrink_candidates),
              static_cast<long long>(report.failure->shrink_length_probes), report.failure->shrink_seconds,
              describe(report.failure->original).c_str(), describe(report.failure->shrunk).c_str());
}

// Every generated spec cut to any shorter length is still a valid case of that length: key lengths and
// decode schedules follow (the length bisection's candidates).
TEST(Fuzz, EverySpecCutToAShorterLengthIsAValidCase) {
  int decoding = 0, padded = 0;
  for (const SizeProfile profile : {SizeProfile::short_sequences, SizeProfile::long_sequences}) {
    const GenLimits limits = GenLimits::for_profile(profile);
    for (std::int64_t i = 0; i < 202; ++i) {
      const CaseSpec spec = fuzz_case(17, i, limits);
      for (const std::int64_t seq : {limits.min_seq, (limits.min_seq + spec.inputs.seq) / 2, spec.inputs.seq - 1}) {
        if (seq < limits.min_seq) continue;
        const CaseSpec shorter = with_length(spec, seq);
        const Case test_case = make_case(shorter);  // throws on an invalid spec
        EXPECT_EQ(test_case.inputs.seq, seq);
        EXPECT_EQ(shorter.geometry, spec.geometry);
        EXPECT_EQ(shorter.inputs.seed, spec.inputs.seed);
        EXPECT_EQ(shorter.inputs.decode.empty(), spec.inputs.decode.empty()) << describe(spec);
        decoding += !shorter.inputs.decode.empty();
        padded += !shorter.inputs.key_lengths.empty();
      }
    }
  }
  EXPECT_GT(decoding, 100);
  EXPECT_GT(padded, 30);
}

// Bisection: the smallest failing length in about log2(seq) probes, within the probe budget.
TEST(Fuzz, LengthBisectionFindsTheSmallestFailingLength) {
  CaseSpec spec = fuzz_case(1, 0, {});
  spec.inputs.seq = 3000;
  spec.inputs.decode = {};
  spec.inputs.key_lengths = {};
  std::int64_t calls = 0;
  const auto fails_past_1234 = [&calls](const CaseSpec& probe) {
    ++calls;
    return probe.inputs.seq > 1234;
  };
  const LengthShrink found = shrink_length(spec, 3, 100, fails_past_1234);
  EXPECT_EQ(found.spec.inputs.seq, 1235);
  EXPECT_EQ(found.probes, calls);
  EXPECT_LE(found.probes, 12);
  EXPECT_FALSE(found.budget_spent);
  calls = 0;
  const LengthShrink stopped = shrink_length(spec, 3, 4, fails_past_1234);
  EXPECT_EQ(calls, 4);
  EXPECT_TRUE(stopped.budget_spent);
  EXPECT_GT(stopped.spec.inputs.seq, 1234);  // still a failing length
}

// The shrink budget is a count of candidates: the same shrunk case every time, and never more candidates.
TEST(Fuzz, AShrinkIsBoundedByItsCandidateCountAndRepeats) {
  const auto mutant = impl::open_implementation("mutant-gqa-kv-grad-last-head-only");
  const ImplementationFactory open = [] { return impl::open_implementation("mutant-gqa-kv-grad-last-head-only"); };
  const FuzzOptions options{.seed = 1,
                            .cases = 2000,
                            .repro_dir = ::testing::TempDir() + "/fuzz_test_budget",
                            .shrink_candidates = 7,
                            .progress_seconds = 0};
  const FuzzReport first = fuzz(*mutant, open, options, nullptr);
  const FuzzReport second = fuzz(*open(), open, options, nullptr);
  ASSERT_TRUE(first.failure && second.failure);
  EXPECT_EQ(first.failure->shrink_candidates, 7);
  EXPECT_TRUE(first.failure->shrink_budget_spent);
  EXPECT_EQ(describe(first.failure->shrunk), describe(second.failure->shrunk));
  EXPECT_EQ(first.failure->repro_path, second.failure->repro_path);
}

// A case budget with a time limit: when the limit fires first, the report says so (no verdict), and it
// never counts as clean.
TEST(Fuzz, ARunStoppedByItsTimeLimitSaysSo) {
  RecordingImplementation recording;
  const FuzzReport report =
      fuzz(recording, fresh<RecordingImplementation>(),
           {.seed = 3, .cases = 1000000, .time_limit_seconds = 0.2, .progress_seconds = 0}, nullptr);
  EXPECT_TRUE(report.stopped_by_time_limit);
  EXPECT_LT(report.cases, 1000000);
  EXPECT_FALSE(report.failure.has_value());
  EXPECT_FALSE(report.time_bounded);
}

// Answers with the reference, except that it keeps each answer under the shapes of x and q_proj and
// returns it again for a later case of the same shapes (a cache never cleared).
class ShapeCachingImplementation : public impl::Implementation {
 public:
  const std::string& name() const override { return name_; }
  Candidate run(const Case& test_case) override {
    const auto key = std::make_pair(test_case.inputs.x.shape, test_case.weights.q_proj.shape);
    for (const auto& [cached_key, answer] : cache_) {
      if (cached_key == key) return {.tensors = answer, .sharded = true};
    }
    cache_.emplace_back(key, named_tensors(reference::run_reference_tp(test_case)));
    return {.tensors = cache_.back().second, .sharded = true};
  }

 private:
  std::vector<std::pair<std::pair<Shape, Shape>, NamedTensors>> cache_;
  std::string name_ = "shape-caching";
};

// A failure that needs an earlier case is reported as such, with the earlier case it needs, and saved
// as a sequence whose replay in a fresh instance fails; never as a pass.
TEST(Fuzz, AFailureAfterEarlierCasesIsReportedWithItsSequence) {
  ShapeCachingImplementation caching;
  const std::string directory = ::testing::TempDir() + "/fuzz_test_sequence";
  const FuzzReport report = fuzz(caching, fresh<ShapeCachingImplementation>(),
                                 {.seed = 1, .cases = 200, .repro_dir = directory, .progress_seconds = 0}, nullptr);
  ASSERT_TRUE(report.failure.has_value());
  const Counterexample& failure = *report.failure;
  EXPECT_EQ(failure.reproduction, Reproduction::after_earlier_cases);
  ASSERT_EQ(failure.earlier_cases.size(), 1u);
  const auto case_at = [](std::int64_t index) { return fuzz_case(1, index, {}); };
  const Case earlier = make_case(case_at(failure.earlier_cases[0]));
  const Case failing = make_case(failure.failing);
  EXPECT_EQ(earlier.inputs.x.shape, failing.inputs.x.shape);  // the case whose answer the cache returns
  EXPECT_EQ(check_alone(fresh<ShapeCachingImplementation>(), failure.failing).verdict, Verdict::pass);
  EXPECT_EQ(
      replay_sequence(fresh<ShapeCachingImplementation>(), failure.earlier_cases, case_at, failure.failing).verdict,
      Verdict::fail);
  EXPECT_EQ(failure.outcome.verdict, Verdict::fail);
  const std::vector<std::string> files = read_sequence_repro(failure.repro_path);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files[1].find("failing-case-"), std::string::npos);
}

// Fails a case (told by its x's element count) only after two given cases ran in the same instance.
class NeedsTwoEarlierCases : public impl::Implementation {
 public:
  const std::string& name() const override { return name_; }
  Candidate run(const Case& test_case) override {
    NamedTensors tensors = named_tensors(reference::run_reference_tp(test_case));
    const auto size = static_cast<std::int64_t>(test_case.inputs.x.values.size());
    if (size == failing_size && saw(size_5) && saw(size_11)) tensors.at("out").values[0] += 1.0;
    seen_.push_back(size);
    return {.tensors = std::move(tensors), .sharded = true};
  }
  static inline std::int64_t failing_size = 0, size_5 = 0, size_11 = 0;

 private:
  bool saw(std::int64_t size) const { return std::find(seen_.begin(), seen_.end(), size) != seen_.end(); }
  std::vector<std::int64_t> seen_;
  std::string name_ = "needs-two";
};

TEST(Fuzz, TheSequenceSearchKeepsOnlyTheEarlierCasesItNeeds) {
  // Cases told apart by their x's element count: sixteen made-up cases of distinct sizes.
  const auto case_at = [](std::int64_t index) {
    CaseSpec spec = fuzz_case(1, 0, {});
    spec.inputs.seq = 3 + index;
    spec.inputs.decode = {};
    spec.inputs.key_lengths = {};
    return spec;
  };
  const auto size_of = [&](std::int64_t index) {
    return static_cast<std::int64_t>(make_case(case_at(index)).inputs.x.values.size());
  };
  NeedsTwoEarlierCases::failing_size = size_of(20);
  NeedsTwoEarlierCases::size_5 = size_of(5);
  NeedsTwoEarlierCases::size_11 = size_of(11);
  std::vector<std::int64_t> earlier;
  for (std::int64_t i = 0; i < 16; ++i) earlier.push_back(i);
  const SequenceSearch found = find_sequence(fresh<NeedsTwoEarlierCases>(), earlier, case_at, case_at(20), 1000);
  ASSERT_TRUE(found.reproduced);
  EXPECT_EQ(found.earlier, (std::vector<std::int64_t>{5, 11}));
  EXPECT_FALSE(found.budget_spent);
  EXPECT_LE(found.cases_run, 1000);
  // Too small a budget: stops, and says so.
  const SequenceSearch stopped = find_sequence(fresh<NeedsTwoEarlierCases>(), earlier, case_at, case_at(20), 20);
  EXPECT_TRUE(stopped.budget_spent);
  EXPECT_LE(stopped.cases_run, 20);
}

// Fails its fifth case, only in the first instance made (a failure from outside the cases: timing,
// memory, the environment).
class FailsOnceInTheFirstInstance : public impl::Implementation {
 public:
  FailsOnceInTheFirstInstance() : first_(instances_++ == 0) {}
  const std::string& name() const override { return name_; }
  Candidate run(const Case& test_case) override {
    NamedTensors tensors = named_tensors(reference::run_reference_tp(test_case));
    if (first_ && ++runs_ == 5) tensors.at("out").values[0] += 1.0;
    return {.tensors = std::move(tensors), .sharded = true};
  }
  static inline int instances_ = 0;

 private:
  bool first_;
  int runs_ = 0;
  std::string name_ = "fails-once";
};

// A failure no fresh instance reproduces, alone or after its earlier cases, is reported as not
// reproduced, with the failing case saved: still a failure, never a pass.
TEST(Fuzz, AFailureNoFreshInstanceReproducesIsReportedSo) {
  FailsOnceInTheFirstInstance::instances_ = 0;
  FailsOnceInTheFirstInstance first;
  const FuzzReport report = fuzz(first, fresh<FailsOnceInTheFirstInstance>(),
                                 {.seed = 1,
                                  .cases = 100,
                                  .repro_dir = ::testing::TempDir() + "/fuzz_test_not_reproduced",
                                  .progress_seconds = 0},
                                 nullptr);
  ASSERT_TRUE(report.failure.has_value());
  EXPECT_EQ(report.cases, 5);
  EXPECT_EQ(report.failure->reproduction, Reproduction::not_reproduced);
  EXPECT_EQ(report.failure->outcome.verdict, Verdict::fail);
  EXPECT_EQ(report.failure->sequence_longest_tried, 4);  // every earlier case, from the start
  EXPECT_FALSE(report.failure->sequence_budget_spent);
  EXPECT_TRUE(std::filesystem::is_regular_file(report.failure->repro_path));
}

TEST(Fuzz, ShardsSplitTheCasesWithoutOverlapOrGap) {
  RecordingImplementation whole, first, second;
  FuzzOptions options{.seed = 3, .cases = 30, .progress_seconds = 0};
  fuzz(whole, fresh<RecordingImplementation>(), options, nullptr);
  FuzzOptions half = options;
  half.cases = 15;
  half.shard_count = 2;
  fuzz(first, fresh<RecordingImplementation>(), half, nullptr);
  half.shard_index = 1;
  fuzz(second, fresh<RecordingImplementation>(), half, nullptr);
  std::multiset<std::string> both = first.seen;
  both.insert(second.seen.begin(), second.seen.end());
  EXPECT_EQ(both, whole.seen);
  for (const std::string& key : first.seen) EXPECT_EQ(second.seen.count(key), 0u) << key;
}

TEST(Fuzz, AFailureShrinksToNoLargerACaseAndIsSaved) {
  const auto mutant = impl::open_implementation("mutant-gqa-kv-grad-last-head-only");
  const ImplementationFactory open = [] { return impl::open_implementation("mutant-gqa-kv-grad-last-head-only"); };
  const std::string directory = ::testing::TempDir() + "/fuzz_test_repro";
  const FuzzReport report =
      fuzz(*mutant, open, {.seed = 1, .cases = 2000, .repro_dir = directory, .progress_seconds = 0}, nullptr);
  ASSERT_TRUE(report.failure.has_value());
  EXPECT_LE(work(report.failure->shrunk), work(report.failure->original));
  EXPECT_GT(resolve_geometry(report.failure->shrunk.geometry).group_size(), 1);  // the bug needs a GQA group
  EXPECT_EQ(report.failure->outcome.verdict, Verdict::fail);
  EXPECT_TRUE(std::filesystem::exists(report.failure->repro_path));
  EXPECT_EQ(report.failure->reproduction, Reproduction::alone);  // a mutant keeps no state
}

}  // namespace
}  // namespace attncheck::properties
