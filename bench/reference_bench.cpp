// Throughput of the fp64 reference: forward, and forward + backward, per geometry and sequence length.
//
// GFLOP/s counts 2 FLOPs per multiply-add of the projections (q, k, v, o) and of attention (q k^T and
// p v over the full seq x seq score matrix, which the reference computes densely before masking).
// The backward pass is counted as twice the forward (d_input and d_weight for every product), so
// forward + backward = 3 x forward: model FLOPs. The backward's recomputation of q k^T (it does not
// store the probabilities, reference/attention_head.hpp) is work done but not counted, so forward +
// backward figures understate the arithmetic rate. Softmax, RoPE and norms are not counted. Inputs are generated once,
// outside the timed loop. Real time is reported (the reference uses every core through OpenMP).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <string>

#include "core/config/presets.hpp"
#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"

namespace attncheck {
namespace {

double forward_flops(const Geometry& g, std::int64_t batch, std::int64_t seq) {
  const double tokens = static_cast<double>(batch * seq);
  const double projections = 2.0 * tokens * g.hidden_size() * (g.qkv_width() + g.query_width());
  const double attention = 2.0 * 2.0 * batch * g.num_heads() * static_cast<double>(seq) * seq * g.head_dim();
  return projections + attention;
}

void run_layer(benchmark::State& state, const GeometrySpec& spec, bool with_backward) {
  const Geometry geometry = resolve_geometry(spec);
  const std::int64_t seq = state.range(0);
  const Case test_case = generate_case(geometry, {.seed = 1, .batch = 1, .seq = seq});
  const reference::RunOptions options{.gradients = with_backward, .decode = false};
  for (auto _ : state) {
    Result result = reference::run_reference(test_case, options);
    benchmark::DoNotOptimize(result.out.values.data());
  }
  const double flops = forward_flops(geometry, 1, seq) * (with_backward ? 3.0 : 1.0);
  // Printed with an SI prefix: "FLOPS=63.2G/s" is 63.2 GFLOP/s.
  state.counters["FLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Qwen3-0.6B: hidden 1024, 16 query heads, 8 KV heads, head_dim 128 (q_proj 1024 -> 2048), QK-norm.
// small_gqa: hidden 256, 8 query heads, 2 KV heads, head_dim 64 (query width 512), half rotary.
const GeometrySpec kSmallGqa = {
    .hidden_size = 256, .num_heads = 8, .num_kv_heads = 2, .head_dim = 64, .rotary_pct = 0.5};

// The yardstick in the same run: a plain square Eigen dgemm (what the reference's GEMMs can reach).
void eigen_dgemm(benchmark::State& state) {
  const Eigen::Index n = state.range(0);
  const Eigen::MatrixXd a = Eigen::MatrixXd::Random(n, n);
  const Eigen::MatrixXd b = Eigen::MatrixXd::Random(n, n);
  Eigen::MatrixXd c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void register_suite(const std::string& name, const GeometrySpec& spec) {
  for (bool with_backward : {false, true}) {
    benchmark::RegisterBenchmark(
        (name + (with_backward ? "/forward_backward" : "/forward")).c_str(),
        [spec, with_backward](benchmark::State& state) { run_layer(state, spec, with_backward); })
        ->ArgName("seq")
        ->Arg(128)
        ->Arg(512)
        ->Arg(2048)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace attncheck

int main(int argc, char** argv) {
  attncheck::register_suite("qwen3_0.6b", attncheck::find_preset("qwen3-0.6b")->spec);
  attncheck::register_suite("small_gqa", attncheck::kSmallGqa);
  benchmark::RegisterBenchmark("eigen_dgemm", attncheck::eigen_dgemm)
      ->Arg(2048)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
