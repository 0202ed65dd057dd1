// The LibTorch implementation against the reference: autograd's gradients against the reference's
// analytic ones on property-generated cases with every feature switched on (QK-norm, biases, softcap,
// sliding window, partial RoPE, padding, decoding, TP with replicated KV heads), on both attention
// paths; and the sdpa path's refusals reported as unsupported.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/tp_plan.hpp"
#include "properties/checks.hpp"
#include "properties/generators.hpp"

namespace attncheck::properties {
namespace {

// A generated case with every feature on (the generator's choices kept where they are features).
CaseSpec all_features(CaseSpec spec) {
  GeometrySpec& g = spec.geometry;
  if (g.qk_norm == QkNorm::none) g.qk_norm = QkNorm::rms;
  g.qkv_bias = g.out_bias = true;
  if (!g.softcap) g.softcap = 30.0;
  if (!g.sliding_window) g.sliding_window = spec.inputs.seq / 2 + 1;
  g.causal = true;
  spec.inputs.pad_keys = true;
  if (spec.inputs.decode.empty()) spec.inputs.decode = {.prefill = 2, .steps = {1}};
  const std::vector<std::int64_t> tp_sizes = valid_tp_sizes(resolve_geometry(g));
  spec.inputs.tp_size = tp_sizes.back();  // the most ranks: replication wherever the geometry allows it
  return spec;
}

RC_GTEST_PROP(TorchCpuFp64, AutogradMatchesTheReferenceWithEveryFeatureOn, ()) {
  const CaseSpec spec = all_features(*case_specs());
  RC_CLASSIFY(spec.inputs.tp_size > resolve_geometry(spec.geometry).num_kv_heads(), "KV replicated");
  RC_CLASSIFY(resolve_geometry(spec.geometry).rotary_dim() < resolve_geometry(spec.geometry).head_dim(),
              "partial RoPE");
  const auto torch = open_implementation("torch-cpu-fp64");
  const CheckOutcome outcome = check_matches_reference(*torch, make_case(spec));
  if (outcome.verdict != Verdict::pass) RC_FAIL(outcome.detail);
}

RC_GTEST_PROP(TorchCpuFp64Sdpa, MatchesTheReferenceOrSaysUnsupported, ()) {
  CaseSpec spec = *case_specs();
  spec.geometry.softcap.reset();  // sdpa has no softcap
  const auto torch = open_implementation("torch-cpu-fp64-sdpa");
  const CheckOutcome outcome = check_matches_reference(*torch, make_case(spec));
  RC_CLASSIFY(outcome.verdict == Verdict::unsupported, "unsupported (a query without keys)");
  if (outcome.verdict == Verdict::fail) RC_FAIL(outcome.detail);
}

TEST(TorchCpuFp64Sdpa, SoftcapIsUnsupportedNotWrong) {
  CaseSpec spec{.geometry = {.hidden_size = 16, .num_heads = 2, .head_dim = 8, .softcap = 5.0},
                .inputs = {.seed = 1, .batch = 1, .seq = 4}};
  const auto torch = open_implementation("torch-cpu-fp64-sdpa");
  const CheckOutcome outcome = check_matches_reference(*torch, make_case(spec));
  EXPECT_EQ(outcome.verdict, Verdict::unsupported) << outcome.detail;
  EXPECT_NE(outcome.detail.find("softcap"), std::string::npos) << outcome.detail;
}

TEST(TorchCuda, WithoutADeviceItIsUnsupported) {
  const auto torch = open_implementation("torch-cuda-bf16-sdpa-flash");
  CaseSpec spec{.geometry = {.hidden_size = 16, .num_heads = 2, .head_dim = 8}, .inputs = {.seed = 1, .seq = 4}};
  try {
    (void)torch->run(make_case(spec));
    GTEST_SKIP() << "a CUDA device is present: this test is for machines without one";
  } catch (const Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("torch-cuda-bf16-sdpa-flash"), std::string::npos);
  }
}

}  // namespace
}  // namespace attncheck::properties
