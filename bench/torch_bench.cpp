// The fp64 reference against the LibTorch implementation (torch-cpu-fp64, autograd) in the same run:
// forward + backward of the same cases, so their ratio is the number to read. Both use every core.
// torch-cpu-fp64's time includes what an implementation of attncheck pays: turning the case's float64
// tensors into torch tensors (fused per rank) and its gradients back into HF layout.
#include <benchmark/benchmark.h>

#include <string>

#include "core/config/presets.hpp"
#include "core/generation/input_generation.hpp"
#include "reference/reference.hpp"
#include "torch_impl/torch_layer.hpp"

namespace attncheck {
namespace {

const GeometrySpec kSmallGqa = {
    .hidden_size = 256, .num_heads = 8, .num_kv_heads = 2, .head_dim = 64, .rotary_pct = 0.5};

void reference_forward_backward(benchmark::State& state, const GeometrySpec& spec) {
  const Case test_case = generate_case(resolve_geometry(spec), {.seed = 1, .batch = 1, .seq = state.range(0)});
  for (auto _ : state) {
    Result result = reference::run_reference(test_case, {.gradients = true, .decode = false});
    benchmark::DoNotOptimize(result.out.values.data());
  }
}

void torch_forward_backward(benchmark::State& state, const GeometrySpec& spec) {
  const Case test_case = generate_case(resolve_geometry(spec), {.seed = 1, .batch = 1, .seq = state.range(0)});
  for (auto _ : state) {
    Result result = torch_impl::run_torch(test_case, {}, "torch-cpu-fp64");
    benchmark::DoNotOptimize(result.out.values.data());
  }
}

void register_pair(const std::string& name, const GeometrySpec& spec) {
  benchmark::RegisterBenchmark(("reference/" + name).c_str(),
                               [spec](benchmark::State& state) { reference_forward_backward(state, spec); })
      ->ArgName("seq")
      ->Arg(128)
      ->Arg(512)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("torch-cpu-fp64/" + name).c_str(),
                               [spec](benchmark::State& state) { torch_forward_backward(state, spec); })
      ->ArgName("seq")
      ->Arg(128)
      ->Arg(512)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace
}  // namespace attncheck

int main(int argc, char** argv) {
  attncheck::register_pair("qwen3_0.6b", attncheck::find_preset("qwen3-0.6b")->spec);
  attncheck::register_pair("small_gqa", attncheck::kSmallGqa);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
