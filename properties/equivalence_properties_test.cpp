// Properties that hold implementations to the reference and the reference to itself: every
// implementation matches the oracle, reference-tp equals reference at every valid TP size, an omitted
// head_dim is the explicit quotient bit for bit, decoding equals the full forward, and invalid
// geometries never produce numbers. Each is an RC_GTEST_PROP, so a failure shrinks.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/model/tp_plan.hpp"
#include "impl/registry.hpp"
#include "mutants/catalog.hpp"
#include "properties/checks.hpp"
#include "properties/generators.hpp"
#include "properties/property_test_support.hpp"
#include "reference/emulated_layer.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {
namespace {

using testing::assert_close;
using testing::without_ranks;

RC_GTEST_PROP(Properties, EveryImplementationMatchesTheReference, ()) {
  const CaseSpec spec = *case_specs();
  testing::classify(spec);
  const Case test_case = make_case(spec);
  const OracleAnswer oracle = oracle_answer(test_case);  // once for every implementation: a pure function of the case
  for (const std::string& name : impl::implementation_names()) {
    const auto implementation = impl::open_implementation(name);
    const CheckOutcome outcome = check_matches_reference(*implementation, test_case, oracle);
    if (outcome.verdict == Verdict::fail) RC_FAIL(name + ": " + outcome.detail);
  }
}

RC_GTEST_PROP(Properties, ReferenceTpEqualsReferenceAtEveryValidTpSize, ()) {
  const CaseSpec spec = *case_specs();
  const Case test_case = make_case(spec);
  const NamedTensors unsharded = named_tensors(reference::run_reference(test_case));
  for (const std::int64_t tp_size : valid_tp_sizes(test_case.geometry())) {
    Case sharded_case = test_case;
    sharded_case.plan = make_tp_plan(test_case.geometry(), tp_size);
    RC_TAG(tp_size > test_case.geometry().num_kv_heads() ? "replicated KV seen" : "no replication");
    assert_close(sharded_case, unsharded, without_ranks(named_tensors(reference::run_reference_tp(sharded_case))));
  }
}

RC_GTEST_PROP(Properties, OmittedHeadDimIsTheExplicitQuotientBitForBit, ()) {
  CaseSpec spec = *case_specs();
  const Geometry generated = resolve_geometry(spec.geometry);
  // The layer whose hidden_size is num_heads x head_dim, with head_dim omitted and stated.
  spec.geometry.hidden_size = generated.query_width();
  spec.geometry.head_dim.reset();
  spec.inputs.tp_size = 1;
  CaseSpec stated = spec;
  stated.geometry.head_dim = generated.head_dim();
  const Case omitted_case = make_case(spec);
  const Case stated_case = make_case(stated);
  RC_ASSERT(omitted_case.geometry().head_dim() == generated.head_dim());
  RC_ASSERT(omitted_case.plan.unsharded_params.total() == stated_case.plan.unsharded_params.total());
  const NamedTensors omitted = named_tensors(reference::run_reference(omitted_case));
  const NamedTensors explicit_ = named_tensors(reference::run_reference(stated_case));
  RC_ASSERT(omitted.size() == explicit_.size());
  for (const auto& [name, tensor] : omitted) {
    RC_ASSERT(explicit_.at(name).shape == tensor.shape);
    RC_ASSERT(explicit_.at(name).values == tensor.values);  // bit for bit
  }
}

RC_GTEST_PROP(Properties, DecodingEqualsTheFullForward, ()) {
  CaseSpec spec = *case_specs();
  spec.geometry.causal = true;
  if (spec.inputs.decode.empty()) {
    // Prefill one token, then one at a time: the schedule every decoder runs.
    spec.inputs.decode = {.prefill = 1, .steps = std::vector<std::int64_t>(spec.inputs.seq - 1, 1)};
  }
  const Case test_case = make_case(spec);
  const Result result = reference::run_reference_tp(test_case, {.gradients = false});
  RC_ASSERT(result.decode_out.has_value());
  // decode_out [batch, total, hidden] against the first `total` rows of out.
  const std::int64_t total = spec.inputs.decode.total();
  const std::int64_t hidden = test_case.geometry().hidden_size();
  Tensor first_rows({spec.inputs.batch, total, hidden});
  for (std::int64_t b = 0; b < spec.inputs.batch; ++b) {
    std::copy_n(result.out.values.begin() + b * spec.inputs.seq * hidden, total * hidden,
                first_rows.values.begin() + b * total * hidden);
  }
  assert_close(test_case, {{"decode/out", first_rows}}, {{"decode/out", *result.decode_out}});
}

// Latent attention (core/model/latent_attention.hpp): its two decode forms agree with each other and with the
// full forward's rows, and its TP ranks with one rank; neither form is the one that produced the goldens'
// answer by construction, so each is held to the same tolerance.
RC_GTEST_PROP(Properties, LatentAbsorbedAndExpandedDecodingAgree, ()) {
  CaseSpec spec = *latent_case_specs();
  if (spec.inputs.decode.empty()) spec.inputs.decode = {.prefill = 1, .steps = std::vector<std::int64_t>(spec.inputs.seq - 1, 1)};
  RC_CLASSIFY(spec.geometry.latent->q_lora_rank.has_value(), "q_lora_rank");
  RC_CLASSIFY(spec.inputs.tp_size > 1, "tp > 1");
  RC_CLASSIFY(spec.geometry.rope_scaling.type == RopeScalingType::yarn, "yarn mscale");
  const Case test_case = make_case(spec);
  const Result expanded = reference::run_reference_tp(test_case, {.gradients = false});
  const Result absorbed = reference::run_reference_tp(
      test_case, {.gradients = false, .latent_decode = reference::LatentDecodeForm::absorbed});
  const std::int64_t total = spec.inputs.decode.total(), hidden = test_case.geometry().hidden_size();
  Tensor first_rows({spec.inputs.batch, total, hidden});
  for (std::int64_t b = 0; b < spec.inputs.batch; ++b) {
    std::copy_n(expanded.out.values.begin() + b * spec.inputs.seq * hidden, total * hidden,
                first_rows.values.begin() + b * total * hidden);
  }
  assert_close(test_case, {{"decode/out", *expanded.decode_out}}, {{"decode/out", *absorbed.decode_out}});
  assert_close(test_case, {{"decode/out", first_rows}}, {{"decode/out", *absorbed.decode_out}});
}

RC_GTEST_PROP(Properties, LatentReferenceTpEqualsReference, ()) {
  const CaseSpec spec = *latent_case_specs();
  RC_CLASSIFY(spec.inputs.tp_size > 1, "tp > 1");
  const Case test_case = make_case(spec);
  assert_close(test_case, named_tensors(reference::run_reference(test_case)),
               without_ranks(named_tensors(reference::run_reference_tp(test_case))));
}

// Every implementation either runs latent attention right (the references, torch-cpu-fp64 and -fp32; the latent
// mutants bend it on purpose) or refuses it by name: none reads a latent layer's weights as q/k/v projections.
TEST(LatentAttention, EveryImplementationRunsItRightOrRefusesItByName) {
  const Case test_case = make_case(CaseSpec{
      .geometry = {.hidden_size = 8,
                   .num_heads = 2,
                   .latent = LatentAttentionSpec{
                       .q_lora_rank = 4, .kv_lora_rank = 3, .qk_nope_head_dim = 2, .qk_rope_head_dim = 2, .v_head_dim = 3}},
      .inputs = {.seed = 1, .batch = 1, .seq = 3, .tp_size = 2}});
  int refused = 0;
  std::vector<std::string> ran;
  for (const impl::RegisteredImplementation& registered : impl::registered_implementations()) {
    const std::string& name = registered.name;
    SCOPED_TRACE(name);
    const auto implementation = impl::open_implementation(name);
    // A refusal names latent attention, by its feature name (core/capabilities: "outside what it runs: latent") or
    // in words (a device implementation without its device refuses for that first).
    const auto refusal = [&](const std::string& reason) {
      if (registered.kind != impl::ImplementationKind::device) {
        EXPECT_TRUE(reason.find("latent attention") != std::string::npos ||
                    reason.find(": latent") != std::string::npos)
            << reason;
      }
      ++refused;
    };
    if (const mutants::Mutant* mutant = mutants::find_mutant(name); mutant != nullptr) {
      try {
        (void)implementation->run(test_case);  // a latent mutant bends the answer on purpose: not judged here
      } catch (const impl::Unsupported& error) {
        refusal(error.what());
        continue;
      }
      ran.push_back(name);
      EXPECT_TRUE(mutant->latent) << "a plain layer's mutant ran a latent case";
      continue;
    }
    // The others are judged by their own precision contract (torch-cpu-fp32: the latent yardstick).
    const CheckOutcome outcome = check_matches_reference(*implementation, test_case);
    if (outcome.verdict == Verdict::unsupported) {
      refusal(outcome.unsupported_reason);
      continue;
    }
    ran.push_back(name);
    EXPECT_EQ(outcome.verdict, Verdict::pass) << outcome.detail;
  }
  EXPECT_GT(refused, 72);  // the plain mutants, LibTorch's sdpa layers and the CUDA layers
  for (const char* name : {"reference", "reference-tp", "torch-cpu-fp64", "torch-cpu-fp32"}) {
    EXPECT_NE(std::find(ran.begin(), ran.end(), name), ran.end()) << name << " did not run it";
  }
}

// An invalid geometry or TP size, made from a valid one by breaking one rule.
RC_GTEST_PROP(Properties, InvalidGeometriesAreRejectedWithoutNumbers, ()) {
  const CaseSpec valid = *case_specs();
  const Geometry geometry = resolve_geometry(valid.geometry);
  const int breakage = *rc::gen::element(0, 1, 2, 3, 4);
  CaseSpec broken = valid;
  switch (breakage) {
    case 0:  // KV heads that do not divide the query heads
      broken.geometry.num_kv_heads = geometry.num_heads() + 1;
      break;
    case 1:  // an odd head_dim rotated whole (RoPE pairs channels)
      broken.geometry.head_dim = 2 * *rc::gen::inRange<std::int64_t>(0, 64) + 1;
      broken.geometry.rotary_dim.reset();
      broken.geometry.rotary_pct.reset();
      break;
    case 2:  // more rotary channels than the head has
      broken.geometry.rotary_pct.reset();
      broken.geometry.rotary_dim = geometry.head_dim() + 2;
      break;
    case 3:  // a TP size that splits a head or a KV head unevenly
      broken.inputs.tp_size = geometry.num_heads() + 1 + geometry.num_heads() * *rc::gen::inRange<std::int64_t>(0, 3);
      break;
    default:  // a non-positive width
      broken.geometry.hidden_size = -*rc::gen::inRange<std::int64_t>(0, 4);
      break;
  }
  RC_TAG(breakage);
  bool rejected = false;
  try {
    const Case test_case = make_case(broken);
    (void)reference::run_reference_tp(test_case);
  } catch (const InputError& error) {
    rejected = true;
    RC_ASSERT(!error.violations().empty());  // it names what is wrong
  }
  RC_ASSERT(rejected);
}

}  // namespace
}  // namespace attncheck::properties

namespace attncheck::properties {
namespace {

// The low-precision yardstick (reference/emulated_layer) is a second, naive implementation of the layer
// (loops and plain GEMMs, hand-written backward); run in fp64 it must be the reference.
RC_GTEST_PROP(Properties, TheEmulatedYardstickInFp64IsTheReference, ()) {
  const Case test_case = make_case(*case_specs());
  testing::assert_close(test_case, oracle_tensors(test_case, /*sharded=*/true),
                        named_tensors(reference::run_emulated(test_case, Precision::fp64)));
}

// The same for latent attention (reference/emulated_latent_layer): its naive layer in fp64 is the latent
// reference, decode/out (the expanded form's per-query arithmetic), the latents' gradients, their per-rank
// sums and the sinks' included.
RC_GTEST_PROP(Properties, TheEmulatedLatentYardstickInFp64IsTheReference, ()) {
  const CaseSpec spec = *latent_case_specs();
  RC_CLASSIFY(spec.geometry.latent->q_lora_rank.has_value(), "q_lora_rank");
  RC_CLASSIFY(spec.inputs.tp_size > 1, "tp > 1");
  RC_CLASSIFY(!spec.inputs.decode.empty(), "decode");
  RC_CLASSIFY(spec.geometry.attention_sinks, "sinks");
  const Case test_case = make_case(spec);
  testing::assert_close(test_case, named_tensors(reference::run_reference_tp(test_case)),
                        named_tensors(reference::run_emulated(test_case, Precision::fp64)));
}

}  // namespace
}  // namespace attncheck::properties
