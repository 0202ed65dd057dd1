// The CUDA implementation against the fp64 reference, through the same check the property suite and the
// fuzzer use (properties/checks.hpp: the reference-tp oracle and, below fp64, the yardstick of
// reference/emulated_layer.hpp held to core/compare/tolerance.hpp).
// Label gpu. Without a device the binary exits 77, which ctest reports as "Not Run" (SKIP_RETURN_CODE),
// never as passed.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/cuda_layer.hpp"
#include "impl/registry.hpp"
#include "properties/checks.hpp"
#include "properties/generators.hpp"

namespace attncheck::properties {
namespace {

const std::vector<std::string>& names() {
  static const std::vector<std::string> all = cuda_impl::cuda_implementation_names();
  return all;
}

struct NamedSpec {
  std::string name;
  CaseSpec spec;
};

// Named shapes: head_dim 80 and 256 (fast paths), 34 (generic), GQA, MQA, TP with replicated
// KV heads, every mask and score feature, and the whole-width QK-norm.
std::vector<NamedSpec> shapes() {
  return {
      {"head_dim_80_gqa",
       {.geometry = {.hidden_size = 320, .num_heads = 8, .num_kv_heads = 2, .head_dim = 80},
        .inputs = {.seed = 1, .batch = 2, .seq = 37, .tp_size = 2}}},
      {"head_dim_256_mqa_softcap",
       {.geometry = {.hidden_size = 640,
                     .num_heads = 4,
                     .num_kv_heads = 1,
                     .head_dim = 256,
                     .qk_norm = QkNorm::rms_one_plus,
                     .softcap = 30.0,
                     .sliding_window = 16},
        .inputs = {.seed = 2, .batch = 1, .seq = 70, .tp_size = 4}}},
      {"head_dim_34_generic_padding_decode",
       {.geometry = {.hidden_size = 96,
                     .num_heads = 6,
                     .num_kv_heads = 3,
                     .head_dim = 34,
                     .rotary_dim = 16,
                     .qkv_bias = true,
                     .out_bias = true},
        .inputs = {.seed = 3,
                   .batch = 3,
                   .seq = 21,
                   .pad_keys = true,
                   .decode = {.prefill = 5, .steps = {1, 3, 1}},
                   .tp_size = 6}}},
      {"qwen3_like_128",
       {.geometry = {.hidden_size = 256, .num_heads = 4, .num_kv_heads = 2, .head_dim = 128, .qk_norm = QkNorm::rms},
        .inputs = {.seed = 4, .batch = 2, .seq = 129, .tp_size = 1}}},
      // OLMo-2's whole-width QK-norm: sums all-reduced between the phases, each KV head on 2 ranks.
      {"olmo2_like_full_width_norm_replicated_kv_decode",
       {.geometry = {.hidden_size = 256,
                     .num_heads = 8,
                     .num_kv_heads = 2,
                     .head_dim = 32,
                     .qk_norm = QkNorm::rms_full_width,
                     .qkv_bias = true},
        .inputs = {.seed = 5, .batch = 2, .seq = 33, .decode = {.prefill = 7, .steps = {1, 2}}, .tp_size = 4}}},
  };
}

TEST(CudaLayer, NamedShapesMatchTheReference) {
  for (const NamedSpec& shape : shapes()) {
    const Case test_case = make_case(shape.spec);
    for (const std::string& name : names()) {
      const auto implementation = impl::open_implementation(name);
      const CheckOutcome outcome = check_matches_reference(*implementation, test_case);
      EXPECT_EQ(outcome.verdict, Verdict::pass) << shape.name << " on " << name << ": " << outcome.detail;
    }
  }
}

RC_GTEST_PROP(CudaLayer, GeneratedCasesMatchTheReference, ()) {
  const CaseSpec spec = *case_specs();
  const Case test_case = make_case(spec);
  for (const std::string& name : names()) {
    const auto implementation = impl::open_implementation(name);
    const CheckOutcome outcome = check_matches_reference(*implementation, test_case);
    if (outcome.verdict == Verdict::fail) RC_FAIL(name + ": " + outcome.detail);
  }
}

}  // namespace
}  // namespace attncheck::properties

int main(int argc, char** argv) {
  if (attncheck::cuda_impl::cuda_device_count() == 0) {
    std::printf("cuda_gpu_test: no CUDA device, skipped (ctest: Not Run)\n");
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
