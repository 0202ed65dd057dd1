// compare(): passes what only sums in another order, names the heads, positions and ranks of real
// differences, and reports missing, misshapen and non-finite tensors as failures of those tensors.
#include "core/compare/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/compare/judge.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"
#include "reference/yardstick.hpp"

namespace attncheck {
namespace {

const GeometrySpec kSpec = {
    .hidden_size = 12, .num_heads = 4, .num_kv_heads = 2, .head_dim = 6, .qk_norm = QkNorm::rms, .qkv_bias = true};

Case make_case(const GeometrySpec& spec = kSpec) {
  return generate_case(resolve_geometry(spec),
                       {.seed = 3, .batch = 2, .seq = 6, .decode = {.prefill = 4, .steps = {1, 1}}, .tp_size = 4});
}

TEST(Compare, TensorNamesAreOrderedWithRanksAsNumbers) {
  const TensorNameOrder less;
  EXPECT_TRUE(less("ranks/2/grads/q_proj", "ranks/10/grads/k_norm"));
  EXPECT_FALSE(less("ranks/10/grads/k_norm", "ranks/2/grads/q_proj"));
  EXPECT_TRUE(less("ranks/9/grads/v_proj#sketch", "ranks/10/grads/k_norm"));
  EXPECT_TRUE(less("grads/x", "out"));
  EXPECT_TRUE(less("ranks/1/grads/k_norm", "ranks/1/grads/q_norm"));
  EXPECT_FALSE(less("out", "out"));
  EXPECT_TRUE(less("ranks/1", "ranks/01"));  // equal numbers: the shorter spelling first, never equal
  NamedTensors tensors;
  for (const char* name : {"ranks/10/grads/k_norm", "ranks/2/grads/k_norm", "ranks/1/grads/k_norm", "out"}) {
    tensors[name] = Tensor({1});
  }
  std::vector<std::string> order;
  for (const auto& [name, tensor] : tensors) order.push_back(name);
  EXPECT_EQ(order,
            (std::vector<std::string>{"out", "ranks/1/grads/k_norm", "ranks/2/grads/k_norm", "ranks/10/grads/k_norm"}));
}

const TensorReport& find(const CompareReport& report, const std::string& name) {
  for (const TensorReport& t : report.tensors) {
    if (t.name == name) return t;
  }
  throw std::logic_error("no tensor " + name);
}

TEST(Compare, ReferenceTpPassesAgainstReference) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  const CompareReport same = compare(test_case, expected, expected, Precision::fp64);
  EXPECT_TRUE(same.passed());
  // The unsharded reference has no rank gradients: those are reported missing, everything else passes.
  const CompareReport unsharded =
      compare(test_case, expected, named_tensors(reference::run_reference(test_case)), Precision::fp64);
  for (const TensorReport& t : unsharded.tensors) {
    EXPECT_EQ(t.status, t.name.starts_with("ranks/") ? TensorStatus::missing : TensorStatus::ok) << t.name;
  }
  EXPECT_FALSE(unsharded.passed());
}

const DeclinedParts kDeclined = {{"decode", "no KV cache"}, {"ranks/1", "rank 1 not gathered"}};

// A declined part (SCHEMA.md, "Candidate files") is reported as declined with its reason, never as
// passing and never left out; it fails nothing, and the counts keep passed, failed and declined apart.
TEST(Compare, DeclinedPartsAreReportedAndCountedApart) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  NamedTensors actual = expected;
  std::erase_if(actual, [](const auto& entry) { return declined_reason(kDeclined, entry.first) != nullptr; });
  // decode/out and rank 1's 9 gradients (q/k/v/o_proj, q/k/v_bias, q_norm, k_norm).
  ASSERT_EQ(actual.size() + 1 + 9, expected.size());
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64, nullptr, RopeAngles::float32,
                                       TpConvention::replicated_kv, kDeclined);
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(report.declined_count(), 10);
  EXPECT_EQ(report.failed_count(), 0);
  EXPECT_EQ(report.passed_count(), static_cast<std::int64_t>(expected.size()) - 10);
  EXPECT_EQ(report.tensors.size(), expected.size());  // every expected tensor is reported
  EXPECT_EQ(find(report, "decode/out").status, TensorStatus::declined);
  EXPECT_EQ(find(report, "decode/out").declined_reason, "no KV cache");
  EXPECT_EQ(find(report, "ranks/1/grads/k_norm").declined_reason, "rank 1 not gathered");
  EXPECT_EQ(find(report, "ranks/2/grads/k_norm").status, TensorStatus::ok);
  const std::string text = render_text(report);
  EXPECT_NE(text.find("declined: no KV cache"), std::string::npos) << text;
  EXPECT_NE(text.find("; 10 declined (listed above, not judged)"), std::string::npos) << text;
  EXPECT_EQ(render_json(report)["counts"]["declined"], 10);
  // A real failure elsewhere still fails, and is counted apart from the declined ones.
  actual["out"].values.front() += 1.0;
  const CompareReport failing = compare(test_case, expected, actual, Precision::fp64, nullptr, RopeAngles::float32,
                                        TpConvention::replicated_kv, kDeclined);
  EXPECT_FALSE(failing.passed());
  EXPECT_EQ(failing.failed_count(), 1);
  EXPECT_EQ(failing.declined_count(), 10);
  EXPECT_NE(render_text(failing).find("FAIL: 1 of "), std::string::npos);
  // A part no expected tensor falls under (a case without ranks 7) declines nothing.
  const CompareReport nothing = compare(test_case, expected, expected, Precision::fp64, nullptr, RopeAngles::float32,
                                        TpConvention::replicated_kv, {{"ranks/7", "never gathered"}});
  EXPECT_EQ(nothing.declined_count(), 0);
  EXPECT_TRUE(nothing.passed());
}

// A candidate that declines out (that is "unsupported", the whole case), names no tensor path, gives no
// reason, or declines a tensor it also supplies is bad input.
TEST(Compare, DeclinedPartsThatCannotBeAreBadInput) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  for (const DeclinedParts& declined :
       {DeclinedParts{{"out", "no forward"}}, DeclinedParts{{"grads/q_nrm", "typo"}}, DeclinedParts{{"decode", ""}},
        DeclinedParts{{"ranks/01", "leading zero"}}, DeclinedParts{{"decode", "no KV cache"}}}) {
    EXPECT_THROW(compare(test_case, expected, expected, Precision::fp64, nullptr, RopeAngles::float32,
                         TpConvention::replicated_kv, declined),
                 InputError)
        << declined.begin()->first;  // the last: decode/out declined and supplied
  }
  EXPECT_NE(declined_part_problem("out", "x").find("unsupported"), std::string::npos);
  for (const char* part : {"grads", "grads/x", "grads/o_bias", "decode/out", "ranks", "ranks/12", "ranks/3/grads",
                           "ranks/3/grads/k_norm"}) {
    EXPECT_EQ(declined_part_problem(part, "a reason"), "") << part;
  }
  EXPECT_EQ(declined_reason({{"ranks/1", "r"}}, "ranks/10/grads/q_proj"), nullptr);  // a prefix ends at '/'
  EXPECT_NE(declined_reason({{"ranks/1", "r"}}, "ranks/1/grads/q_proj#sketch"), nullptr);
}

TEST(Compare, PermutedHeadIsLocalised) {
  const Case test_case = make_case();
  Case permuted = test_case;  // query heads 0 and 1 exchange their q_proj rows
  auto& q = permuted.weights.q_proj.values;
  std::swap_ranges(q.begin(), q.begin() + 6 * 12, q.begin() + 6 * 12);
  const CompareReport report = compare(test_case, named_tensors(reference::run_reference_tp(test_case)),
                                       named_tensors(reference::run_reference_tp(permuted)), Precision::fp64);
  EXPECT_FALSE(report.passed());
  const TensorReport& q_grad = find(report, "grads/q_proj");
  EXPECT_EQ(q_grad.status, TensorStatus::mismatch);
  EXPECT_EQ(q_grad.query_heads, (std::vector<std::int64_t>{0, 1}));
  // TP 4 over 4 query heads: head 0 is rank 0's, head 1 rank 1's (global head ids in the report).
  EXPECT_EQ(find(report, "ranks/0/grads/q_proj").ranks, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(find(report, "ranks/1/grads/q_proj").query_heads, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(find(report, "ranks/2/grads/q_proj").status, TensorStatus::ok);
  EXPECT_EQ(find(report, "out").status, TensorStatus::mismatch);
  EXPECT_EQ(find(report, "out").batch_rows, (std::vector<std::int64_t>{0, 1}));
  EXPECT_NE(render_text(report).find("query heads 0,1"), std::string::npos) << render_text(report);
}

TEST(Compare, WrongScaleFailsEverywhere) {
  const Case test_case = make_case();
  GeometrySpec wrong = kSpec;
  wrong.query_pre_attn_scalar = 8.0;  // scale 8^-0.5 instead of 6^-0.5
  Case scaled = make_case(wrong);
  const CompareReport report = compare(test_case, named_tensors(reference::run_reference_tp(test_case)),
                                       named_tensors(reference::run_reference_tp(scaled)), Precision::fp64);
  const TensorReport& out = find(report, "out");
  EXPECT_EQ(out.status, TensorStatus::mismatch);
  EXPECT_EQ(out.positions.size(), 5u);  // position 0 sees one key: its output does not depend on the scale
  EXPECT_GT(out.error_ulps, 1e6);
  EXPECT_EQ(find(report, "grads/q_proj").status, TensorStatus::mismatch);
  EXPECT_EQ(find(report, "grads/q_proj").query_heads, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(find(report, "decode/out").status, TensorStatus::mismatch);
}

TEST(Compare, WorstValuesPrintRoundTripExactBesideTheirUlps) {
  // Two doubles six significant digits print alike: the report prints each so that it reads back as itself.
  const double expected = 0.1234567, actual = std::nextafter(std::nextafter(expected, 1.0), 1.0);
  const TensorReport report{.name = "out", .error_ulps = 2.5, .expected_at_worst = expected, .actual_at_worst = actual};
  const std::string text = worst_values(report);
  const std::size_t got = text.find(", got ");
  ASSERT_NE(got, std::string::npos) << text;
  EXPECT_EQ(text.substr(0, got), "expected 0.1234567");
  const std::string actual_text = text.substr(got + 6, text.find(' ', got + 6) - (got + 6));
  EXPECT_EQ(std::stod(actual_text), actual) << text;  // reads back as itself
  EXPECT_NE(actual_text, "0.1234567") << text;        // six significant digits would print the two alike
  EXPECT_TRUE(text.ends_with("(2.5 ulps)")) << text;
}

TEST(Compare, MissingWrongShapeAndNonFiniteAreNamedFailures) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  NamedTensors actual = expected;
  actual.erase("grads/k_proj");
  actual["grads/v_proj"] = Tensor({3, 3});
  actual["out"].values[17] = std::numeric_limits<double>::quiet_NaN();
  const CompareReport report = compare(test_case, expected, actual, Precision::fp64);
  EXPECT_EQ(find(report, "grads/k_proj").status, TensorStatus::missing);
  EXPECT_EQ(find(report, "grads/v_proj").status, TensorStatus::wrong_shape);
  const TensorReport& out = find(report, "out");
  EXPECT_EQ(out.status, TensorStatus::non_finite);
  EXPECT_EQ(out.worst_index, (Shape{0, 1, 5}));  // flat 17 of [2, 6, 12]
  EXPECT_EQ(out.elements_over, 1);
  const nlohmann::json json = render_json(report);
  EXPECT_FALSE(json["passed"].get<bool>());
  EXPECT_EQ(json["tensors"].size(), report.tensors.size());
}

TEST(Compare, LowerPrecisionsNeedTheirYardstick) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference(test_case));
  EXPECT_THROW(compare(test_case, expected, expected, Precision::bf16), InputError);
}

// Below fp64 the tolerance is k x the yardstick's error (k = 2 outputs) + 4 ulps at the tensor's scale.
TEST(Compare, BelowFp64TheToleranceIsKTimesTheYardsticksError) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference(test_case));
  const Tensor& out = expected.at("out");
  double scale = 0.0;
  for (double value : out.values) scale = std::max(scale, std::fabs(value));
  const double floor = kYardstickFloorUlps * std::ldexp(1.0, -23) * scale;
  const double yardstick_error = 100 * floor;  // well above the floor
  NamedTensors naive_run = expected;
  naive_run["out"].values[3] += yardstick_error;
  YardstickErrors yardstick;
  add_yardstick_run(expected, naive_run, yardstick);
  NamedTensors within = expected, beyond = expected;
  within["out"].values[5] += kYardstickFactorOutputs * yardstick_error;  // at the limit
  beyond["out"].values[5] += 1.01 * (kYardstickFactorOutputs * yardstick_error + floor);
  EXPECT_EQ(find(compare(test_case, expected, within, Precision::fp32, &yardstick), "out").status, TensorStatus::ok);
  const TensorReport over = find(compare(test_case, expected, beyond, Precision::fp32, &yardstick), "out");
  EXPECT_EQ(over.status, TensorStatus::mismatch);
  EXPECT_NEAR(over.yardstick_error, yardstick_error, 1e-12 * scale);  // (x + e) - x rounds
}

// fp64: the fp64 yardstick (tolerance.hpp, kFp64YardstickFactor) is computed only for a candidate beyond 2^16
// ulps of a tensor's scale, and forgives rounding, not bugs: a wrong element stays a failure after it.
TEST(Judge, TheFp64YardstickIsComputedOnlyAfterAMismatchAndForgivesNoBug) {
  const Case test_case = make_case();
  const NamedTensors expected = named_tensors(reference::run_reference(test_case));
  int computed = 0;
  const YardstickFinder finder = [&](const NamedTensors& held, const Candidate& candidate) {
    ++computed;
    return SourcedYardstick{.errors = reference::yardstick_errors(test_case, held, candidate.precision),
                            .source = YardstickSource::computed,
                            .contract = "fp64"};
  };
  const auto judged = [&](const NamedTensors& tensors) {
    return judge({.test_case = test_case, .answers = expected, .yardstick = finder},
                 Candidate{.tensors = tensors, .precision = Precision::fp64}, "candidate");
  };
  const Judgement same = judged(expected);
  EXPECT_TRUE(same.report.passed());
  EXPECT_EQ(computed, 0);
  EXPECT_EQ(same.yardstick.source, YardstickSource::none);
  EXPECT_FALSE(same.report.fp64_yardstick);

  NamedTensors wrong = expected;
  wrong["grads/q_proj"].values[7] *= 1.001;  // a bug's size: O(1e-3) of the element, far above rounding
  const Judgement caught = judged(wrong);
  EXPECT_EQ(computed, 1);
  EXPECT_TRUE(caught.report.fp64_yardstick);
  EXPECT_EQ(caught.yardstick.contract, "fp64");
  const TensorReport& q_proj = find(caught.report, "grads/q_proj");
  EXPECT_EQ(q_proj.status, TensorStatus::mismatch);
  EXPECT_GT(q_proj.yardstick_error, 0.0);  // naive fp64 runs differ from the reference by their rounding
  EXPECT_LT(kFp64YardstickFactor * q_proj.yardstick_error, 1e-3 * q_proj.max_error);
  EXPECT_EQ(find(caught.report, "out").status, TensorStatus::ok);
  EXPECT_NE(tolerance_rule(caught.report).find("fp64 yardstick"), std::string::npos);
}

// The fp64 yardstick's work bound is a count of operations: a fuzz-sized case is within it, a layer of 4096 tokens
// at head_dim 256 beyond it (the judge then keeps the first rule's verdict and says so).
TEST(Judge, TheFp64YardstickHasAWorkBound) {
  EXPECT_EQ(reference::fp64_yardstick_beyond_bound(make_case()), "");
  const Case long_case = generate_case(resolve_geometry({.hidden_size = 256, .num_heads = 2, .head_dim = 256}),
                                       {.seed = 1, .batch = 1, .seq = 4096});
  EXPECT_NE(reference::fp64_yardstick_beyond_bound(long_case).find("beyond the fp64 yardstick's bound"),
            std::string::npos);
}

// A batch row whose queries see no key (every one of a head's rows empty) through the flash-style runs of the
// fp64 yardstick: their probabilities are that head's zeros (a segfault once, on a committed golden).
TEST(Judge, TheFp64YardstickRunsWhereAQuerySeesNoKey) {
  const Case test_case =
      generate_case(resolve_geometry(kSpec), {.seed = 5, .batch = 2, .seq = 5, .key_lengths = {5, 0}});
  const NamedTensors expected = named_tensors(reference::run_reference(test_case));
  const YardstickErrors errors = reference::yardstick_errors(test_case, expected, Precision::fp64);
  ASSERT_EQ(errors.size(), expected.size());
  for (const auto& [name, error] : errors) EXPECT_TRUE(std::isfinite(error)) << name;
}

}  // namespace
}  // namespace attncheck
