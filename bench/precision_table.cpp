// What golden/SCHEMA.md's precision contract allows, and what breaking it costs, against sequence
// length: a measurement (docs/PRECISION.md's table), not a benchmark. For a Qwen3-shaped head pair at the goldens'
// large positions it prints, per seq, the largest error of out relative to out's scale for
//   - one nearest-rounded run of the yardstick (reference/emulated_layer) in fp32 with float32 angles
//     and with float64 angles, in bf16 and in fp16 (float64 angles): what the contract allows is k times
//     the worst of several such runs (core/compare/tolerance.hpp), plus 4 ulps of the precision;
//   - layers exact but for P.V or the softmax row sum accumulated key by key in bf16 / fp16
//     (mutants/: pv_accumulated_in, row_sum_accumulated_in), as a kernel that keeps its
//     accumulators in 16 bits would.
// Usage: precision_table [--seqs 64,256,1024,4096] [--position-offset 440000] [--bias]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "core/generation/input_generation.hpp"
#include "mutants/mutant_functions.hpp"
#include "reference/emulated_layer.hpp"
#include "reference/reference.hpp"

namespace {

using namespace attncheck;

double relative_error(const Tensor& actual, const Tensor& expected) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < expected.values.size(); ++i) {
    worst = std::max(worst, std::fabs(actual.values[i] - expected.values[i]));
    scale = std::max(scale, std::fabs(expected.values[i]));
  }
  return worst / scale;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Yardstick and 16-bit-accumulation errors against sequence length (a Markdown table)");
  std::vector<std::int64_t> seqs = {64, 256, 1024, 4096};
  std::int64_t position_offset = 440000;
  bool bias = false;
  app.add_option("--seqs", seqs, "sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--position-offset", position_offset, "first position id (the goldens' reach 4.4e5)")
      ->capture_default_str();
  app.add_flag("--bias", bias, "q/k/v and o biases (V gets a constant part, as in Qwen2 or GPT-NeoX)");
  CLI11_PARSE(app, argc, argv);

  // Qwen3's head: head_dim 128, two query heads on one KV head, QK-norm, theta 1e6; a small hidden so
  // that seq 4096 stays a minute on two cores.
  const Geometry geometry = resolve_geometry({.hidden_size = 256,
                                              .num_heads = 2,
                                              .num_kv_heads = 1,
                                              .head_dim = 128,
                                              .rope_theta = 1e6,
                                              .qk_norm = QkNorm::rms,
                                              .qkv_bias = bias,
                                              .out_bias = bias});
  const std::vector<std::pair<std::string, std::function<Tensor(const Case&)>>> columns = {
      {"fp32 yardstick, float32 angles",
       [](const Case& c) { return reference::run_emulated(c, Precision::fp32, {}).out; }},
      {"fp32 yardstick, float64 angles",
       [](const Case& c) { return reference::run_emulated(c, Precision::fp32, {.angles = RopeAngles::float64}).out; }},
      {"bf16 yardstick",
       [](const Case& c) { return reference::run_emulated(c, Precision::bf16, {.angles = RopeAngles::float64}).out; }},
      {"P.V in bf16", [](const Case& c) { return mutants::pv_accumulated_in(Precision::bf16, c).out; }},
      {"row sum in bf16",
       [](const Case& c) { return mutants::row_sum_accumulated_in(Precision::bf16, c).out; }},
      {"fp16 yardstick",
       [](const Case& c) { return reference::run_emulated(c, Precision::fp16, {.angles = RopeAngles::float64}).out; }},
      {"P.V in fp16", [](const Case& c) { return mutants::pv_accumulated_in(Precision::fp16, c).out; }},
      {"row sum in fp16",
       [](const Case& c) { return mutants::row_sum_accumulated_in(Precision::fp16, c).out; }},
  };
  std::string header = "| seq |", rule = "| --- |";
  for (const auto& [name, run] : columns) {
    header += fmt::format(" {} |", name);
    rule += " --- |";
  }
  fmt::print("{}\n{}\n", header, rule);
  for (const std::int64_t seq : seqs) {
    const Case test_case =
        generate_case(geometry, {.seed = 2026, .batch = 1, .seq = seq, .position_offset = position_offset});
    const Tensor expected = reference::run_reference(test_case, {.decode = false}).out;
    std::string row = fmt::format("| {} |", seq);
    for (const auto& [name, run] : columns) row += fmt::format(" {:.2e} |", relative_error(run(test_case), expected));
    fmt::print("{}\n", row);
    std::fflush(stdout);
  }
  return 0;
}
