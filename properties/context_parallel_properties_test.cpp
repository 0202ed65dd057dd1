// The context-parallel reference (reference/context_parallel.hpp) against reference-tp: over random geometries,
// TP plans and CP layouts (Ulysses with KV heads split or replicated inside a TP rank, the ring load-balanced
// or contiguous, CP sizes up to 8 so that chunks are uneven and some empty, windows and padding crossing chunk
// edges), every rank's own tokens and heads give the same out, dx and per-rank gradients within fp64 tolerance,
// and the same decode/out when the case decodes after its CP prefill.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "core/compare/compare.hpp"
#include "core/model/parallel_layout.hpp"
#include "properties/generators.hpp"
#include "properties/property_test_support.hpp"
#include "reference/context_parallel.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {
namespace {

RC_GTEST_PROP(Properties, ContextParallelReferenceEqualsReferenceTp, ()) {
  const CaseSpec spec = *case_specs();
  const Case test_case = make_case(spec);
  const CpScheme scheme = *rc::gen::element(CpScheme::ulysses, CpScheme::ring);
  std::vector<std::int64_t> sizes = valid_cp_sizes(test_case.plan, scheme, 8);
  if (sizes.size() > 1) sizes.erase(sizes.begin());  // CP 1 only where the heads admit nothing else
  const std::int64_t cp_size = *rc::gen::elementOf(sizes);
  const bool load_balanced = *rc::gen::arbitrary<bool>();
  const CpSpec cp{.cp_size = cp_size, .scheme = scheme, .load_balanced = load_balanced};
  const ParallelLayout layout = make_parallel_layout(test_case.geometry(), test_case.plan.tp_size, cp);
  RC_CLASSIFY(scheme == CpScheme::ulysses, "ulysses");
  RC_CLASSIFY(layout.ulysses_kv_replicas > 1, "KV heads replicated over CP");
  RC_CLASSIFY(scheme == CpScheme::ring && load_balanced, "ring, load-balanced");
  RC_CLASSIFY(spec.inputs.seq % layout.chunk_count != 0, "uneven chunks");
  RC_CLASSIFY(spec.inputs.seq < layout.chunk_count, "empty chunks");
  RC_CLASSIFY(cp_size > 1, "cp > 1");
  RC_CLASSIFY(spec.geometry.qk_norm == QkNorm::rms_full_width, "whole-width QK-norm");
  RC_CLASSIFY(spec.geometry.rope_scaling.type == RopeScalingType::longrope, "longrope");
  RC_CLASSIFY(!spec.inputs.decode.empty(), "decoding after the CP prefill");
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  RC_ASSERT(expected.contains("decode/out") == !spec.inputs.decode.empty());
  testing::assert_close(test_case, expected, named_tensors(reference::run_reference_cp(test_case, cp)));
}

// longrope chooses its factors from the whole call's largest position: with the pretraining length at half
// the sequence, the first contiguous chunk alone would choose the short factors, the call chooses the long.
TEST(ContextParallelReference, LongropeFactorsAreTheWholeCallsNotAChunks) {
  CaseSpec spec{.geometry = {.hidden_size = 32, .num_heads = 2, .num_kv_heads = 1, .head_dim = 8},
                .inputs = {.seed = 4, .batch = 1, .seq = 8, .position_offset = 0}};
  spec.geometry.rope_scaling = {.type = RopeScalingType::longrope,
                                .factor = 16.0,
                                .original_max_position_embeddings = 4,
                                .short_factor = {1.0, 1.1, 1.2, 1.3},
                                .long_factor = {2.0, 4.0, 8.0, 16.0}};
  const Case test_case = make_case(spec);
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  for (const CpSpec cp : {CpSpec{.cp_size = 2, .scheme = CpScheme::ring, .load_balanced = false},
                          CpSpec{.cp_size = 2, .scheme = CpScheme::ulysses}}) {
    SCOPED_TRACE(std::string(to_string(cp.scheme)));
    const CompareReport report = compare(test_case, expected, named_tensors(reference::run_reference_cp(test_case, cp)),
                                         Precision::fp64);
    EXPECT_TRUE(report.passed());
  }
}

// Decoding after a ring prefill with a window of one key: step token t's only key lives on CP rank t mod 3, so
// its query sees no key on two ranks; their empty partials merge to nothing (not NaN), and decode/out equals
// reference-tp's.
TEST(ContextParallelReference, DecodeQueryThatSeesNoKeyOnTwoRanksMergesToNothing) {
  CaseSpec spec{.geometry = {.hidden_size = 8, .num_heads = 2, .num_kv_heads = 1, .head_dim = 4},
                .inputs = {.seed = 9, .batch = 2, .seq = 7, .position_offset = 0}};
  spec.geometry.sliding_window = 1;
  spec.inputs.decode = {.prefill = 3, .steps = {1, 2, 1}};
  const Case test_case = make_case(spec);
  const NamedTensors expected = named_tensors(reference::run_reference_tp(test_case));
  const NamedTensors actual =
      named_tensors(reference::run_reference_cp(test_case, {.cp_size = 3, .scheme = CpScheme::ring}));
  ASSERT_TRUE(actual.contains("decode/out"));
  EXPECT_TRUE(compare(test_case, expected, actual, Precision::fp64).passed());
}

// The ring's blocks grow as chunks^2: a CP size that would make a run of 67 million blocks is refused, by the
// work it would take (never by time).
TEST(ContextParallelReference, RefusesARingTooLargeToRun) {
  const Case test_case = make_case(CaseSpec{.geometry = {.hidden_size = 4, .num_heads = 1, .head_dim = 2},
                                            .inputs = {.seed = 1, .batch = 1, .seq = 3}});
  try {
    (void)reference::run_reference_cp(test_case, {.cp_size = 4096, .scheme = CpScheme::ring});
    FAIL() << "a ring of 4096 ranks ran";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("blocks"), std::string::npos) << error.what();
  }
}

TEST(ContextParallelReference, RefusesWhatItDoesNotModelByName) {
  const Case latent = make_case(CaseSpec{
      .geometry = {.hidden_size = 8,
                   .num_heads = 2,
                   .latent = LatentAttentionSpec{
                       .q_lora_rank = 4, .kv_lora_rank = 3, .qk_nope_head_dim = 2, .qk_rope_head_dim = 2, .v_head_dim = 3}},
      .inputs = {.seed = 1, .batch = 1, .seq = 3}});
  try {
    (void)reference::run_reference_cp(latent, {.cp_size = 2, .scheme = CpScheme::ring});
    FAIL() << "a latent case ran";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("multi-head latent attention"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace attncheck::properties
