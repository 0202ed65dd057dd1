// The generators draw within a statement of capabilities by construction (GenLimits::within): every case the
// fuzzer draws for a statement is one the statement admits, whole (no part left out that it could have kept
// out), in every profile, and a statement that leaves no case is refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/capabilities/capabilities_json.hpp"
#include "core/errors/input_error.hpp"
#include "properties/fuzz.hpp"

namespace attncheck::properties {
namespace {

struct Statement {
  std::string name;
  std::string json;
  SizeProfile profile = SizeProfile::short_sequences;
};

// Draws `cases` cases of the seed's sequence within the statement and checks each against it.
void expect_every_case_within(const Statement& statement, std::int64_t cases) {
  SCOPED_TRACE(statement.name);
  const Capabilities stated = parse_capabilities_text(statement.json, statement.name);
  const GenLimits limits = GenLimits::for_profile(statement.profile).within(stated, statement.name);
  for (std::int64_t index = 0; index < cases; ++index) {
    const CaseSpec spec = fuzz_case(7, index, limits);
    const Case test_case = make_case(spec);
    const Admission admission = admit(stated, outline_of(test_case));
    ASSERT_TRUE(admission.admitted()) << admission.reason() << "\n" << describe(spec);
    // The parts it lacks are never drawn (only backward, which every case has, may be left out).
    ASSERT_TRUE(admission.parts_not_stated.empty() ||
                (admission.parts_not_stated.size() == 1 && admission.parts_not_stated.contains("grads")))
        << describe(spec);
    if (!stated.features.contains(Feature::tensor_parallel)) {
      ASSERT_EQ(test_case.plan.tp_size, 1) << describe(spec);
    }
    if (test_case.plan.tp_size > 1) {
      ASSERT_TRUE(admission.per_rank_gradients) << describe(spec);
    }
  }
}

TEST(StatedGeneration, EveryCaseDrawnIsWithinTheStatement) {
  const std::vector<Statement> statements = {
      {"a plain GQA layer",
       R"({"features": ["gqa", "explicit-head-dim", "rope-half-split", "causal", "key-padding", "backward"]})"},
      {"head_dim a multiple of 8, at most 64, hidden at most 48, forward only",
       R"({"features": "all", "without": ["latent", "backward", "tensor-parallel"], "head_dim_multiple_of": 8,
           "max_head_dim": 64, "max_hidden_size": 48, "max_num_heads": 4})"},
      {"no RoPE, bidirectional, windows and padding but no keyless row",
       R"({"features": ["no-rope", "bidirectional", "sliding-window", "key-padding", "gqa", "backward"]})"},
      {"TP at most 2 under Megatron's convention, no KV replication",
       R"({"features": "all", "without": ["latent", "kv-replication"], "max_tp_size": 2,
           "tp_convention": "megatron-equal-block"})"},
      {"long sequences, interleaved pairs, decode, at most seq 300",
       R"({"features": ["rope-interleaved", "partial-rope", "causal", "decode", "key-padding", "backward"],
           "max_seq": 300})",
       SizeProfile::long_sequences},
      {"latent attention, head widths multiples of 4, no sinks",
       R"({"features": "all", "without": ["sinks", "rope-scaling-yarn"], "head_dim_multiple_of": 4})",
       SizeProfile::latent_attention},
      {"latent attention within size limits",
       R"({"features": "all", "max_head_dim": 8, "max_num_heads": 2, "max_hidden_size": 8})",
       SizeProfile::latent_attention},
      {"tensor-parallel stated without backward: drawn at TP 1",
       R"({"features": ["gqa", "rope-half-split", "causal", "tensor-parallel", "kv-replication"]})"},
  };
  for (const Statement& statement : statements) {
    expect_every_case_within(statement, statement.profile == SizeProfile::long_sequences ? 30 : 300);
  }
}

TEST(StatedGeneration, AStatementThatLeavesNoCaseIsRefusedByName) {
  const Capabilities plain =
      parse_capabilities_text(R"({"features": ["causal", "rope-half-split"], "max_seq": 20})", "test");
  try {
    (void)GenLimits::for_profile(SizeProfile::latent_attention).within(plain, "plain");
    FAIL() << "the latent profile was accepted for a layer without latent attention";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("latent"), std::string::npos) << error.what();
  }
  // The long profile's shortest sequence is 48.
  EXPECT_THROW((void)GenLimits::for_profile(SizeProfile::long_sequences).within(plain, "plain"), InputError);
  // --without every mask.
  const Capabilities no_mask = plain.narrowed({}, {Feature::causal});
  EXPECT_THROW((void)GenLimits{}.within(no_mask, "narrowed"), InputError);
  // Context-parallel layouts for a layer that does not run them.
  EXPECT_THROW((void)GenLimits::for_profile(SizeProfile::context_parallel).within(plain, "plain"), InputError);
}

}  // namespace
}  // namespace attncheck::properties
