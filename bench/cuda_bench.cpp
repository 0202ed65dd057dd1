// Attention kernels on the GPU (Google Benchmark, manual time from CUDA events, L2 flushed before every
// timed iteration, median of 10 repetitions): attncheck's flash_forward / flash_backward against torch's
// scaled_dot_product_attention with its flash and cuDNN backends (when built with LibTorch), on the same
// shapes in the same run;
// and decoding (one query against a KV cache) as bandwidth. FLOPs: forward 4 b s^2 H_q d (halved when
// causal), backward 2.5x that. Without a device every benchmark is skipped with that message.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_buffer.hpp"
#ifdef ATTNCHECK_BENCH_TORCH
#include <torch/torch.h>

#include "torch_impl/sdpa_backend_guard.hpp"
#endif

namespace attncheck::cuda_impl {
namespace {

constexpr std::int64_t kTokens = 16384;            // batch x seq for the prefill shapes
constexpr std::size_t kL2FlushBytes = 256u << 20;  // > any L2 (an H200's is 50-60 MB)

struct Shape {
  std::string name;
  int num_heads, num_kv_heads, head_dim;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      // GQA 64/8 at every head_dim real models use (the H200 comparison table), then 16/8 ones.
      {"gqa64x8_d64", 64, 8, 64},   {"gqa64x8_d80", 64, 8, 80},   {"gqa64x8_d96", 64, 8, 96},
      {"gqa64x8_d128", 64, 8, 128}, {"gqa64x8_d192", 64, 8, 192}, {"gqa64x8_d256", 64, 8, 256},
      {"gqa16x8_d128", 16, 8, 128}, {"gqa16x8_d64", 16, 8, 64},   {"gqa16x8_d80", 16, 8, 80},
      {"gqa16x8_d256", 16, 8, 256},
  };
  return all;
}

// Times one launch between CUDA events after the L2 is flushed; the state's manual time is the kernel's.
class Timer {
 public:
  Timer() : flush_(kL2FlushBytes) {
    check_cuda(cudaEventCreate(&start_), "event");
    check_cuda(cudaEventCreate(&stop_), "event");
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  template <typename F>
  double seconds(F&& launch) {
    check_cuda(cudaMemsetAsync(flush_.data(), 0, flush_.size()), "L2 flush");
    check_cuda(cudaEventRecord(start_), "event");
    launch();
    check_cuda(cudaEventRecord(stop_), "event");
    check_cuda(cudaEventSynchronize(stop_), "event");
    float milliseconds = 0.0f;
    check_cuda(cudaEventElapsedTime(&milliseconds, start_, stop_), "event");
    return milliseconds / 1e3;
  }

 private:
  DeviceBuffer<unsigned char> flush_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Deterministic values in [-1, 1) (bf16), so every run times the same data.
std::vector<__nv_bfloat16> pattern(std::size_t count, std::uint64_t seed) {
  std::vector<__nv_bfloat16> values(count);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& value : values) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    value = __float2bfloat16_rn(float(state >> 40) / float(1 << 23) - 1.0f);
  }
  return values;
}

double forward_flops(std::int64_t batch, std::int64_t seq_q, std::int64_t seq_k, const Shape& shape, bool causal) {
  const double full = 4.0 * double(batch) * double(seq_q) * double(seq_k) * shape.num_heads * shape.head_dim;
  return causal ? full / 2 : full;
}

bool skip_without_device(benchmark::State& state) {
  if (cuda_device_count() > 0) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

// Dimensions, scale and packed strides of a bf16 case: q, o [batch, seq_q, H_q, d]; k, v
// [batch, seq_k, H_kv, d]. Buffers are the caller's.
AttentionParams packed_params(const Shape& shape, std::int64_t batch, std::int64_t seq_q, std::int64_t seq_k,
                              bool causal) {
  AttentionParams p;
  p.batch = int(batch);
  p.seq_q = int(seq_q);
  p.seq_k = int(seq_k);
  p.num_heads = shape.num_heads;
  p.num_kv_heads = shape.num_kv_heads;
  p.head_dim = shape.head_dim;
  p.group_size = shape.num_heads / shape.num_kv_heads;
  p.scale = 1.0f / std::sqrt(float(shape.head_dim));
  p.causal = causal;
  p.q_row_stride = p.o_row_stride = std::int64_t(shape.num_heads) * shape.head_dim;
  p.kv_row_stride = std::int64_t(shape.num_kv_heads) * shape.head_dim;
  p.q_batch_stride = p.o_batch_stride = seq_q * p.q_row_stride;
  p.kv_batch_stride = seq_k * p.kv_row_stride;
  p.precision = Precision::bf16;
  return p;
}

// attncheck's kernels. q, o, d_o [batch, seq, H_q, d]; k, v [batch, seq, H_kv, d], all bf16, packed.
void attncheck_prefill(benchmark::State& state, const Shape& shape, bool causal, bool backward) {
  if (skip_without_device(state)) return;
  const std::int64_t seq = state.range(0), batch = kTokens / seq;
  const std::int64_t q_count = kTokens * shape.num_heads * shape.head_dim;
  const std::int64_t kv_count = kTokens * shape.num_kv_heads * shape.head_dim;
  DeviceBuffer<__nv_bfloat16> q(q_count), k(kv_count), v(kv_count), o(q_count), d_o(q_count), d_k(kv_count),
      d_v(kv_count);
  q.upload(pattern(q_count, 1));
  k.upload(pattern(kv_count, 2));
  v.upload(pattern(kv_count, 3));
  d_o.upload(pattern(q_count, 4));
  DeviceBuffer<float> lse(batch * shape.num_heads * seq), d_q(q_count), d_row(batch * shape.num_heads * seq);
  AttentionParams p = packed_params(shape, batch, seq, seq, causal);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  p.lse = lse.data();
  p.d_o = d_o.data();
  p.d_q = d_q.data();
  p.d_k = d_k.data();
  p.d_v = d_v.data();
  p.d_row = d_row.data();
  flash_forward(p, nullptr);  // o and lse for the backward
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  Timer timer;
  for (auto _ : state) {
    state.SetIterationTime(timer.seconds([&] { backward ? flash_backward(p, nullptr) : flash_forward(p, nullptr); }));
  }
  const double flops = forward_flops(batch, seq, seq, shape, causal) * (backward ? 2.5 : 1.0);
  state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

// Decode (flash_decode, split-KV): one query per batch row against a cache of seq keys; bandwidth counts
// K and V read once (against the H200's 4.8 TB/s).
void attncheck_decode(benchmark::State& state, const Shape& shape) {
  if (skip_without_device(state)) return;
  const std::int64_t seq = state.range(0), batch = 8;
  const std::int64_t kv_count = batch * seq * shape.num_kv_heads * shape.head_dim;
  const std::int64_t q_count = batch * shape.num_heads * shape.head_dim;
  DeviceBuffer<__nv_bfloat16> q(q_count), k(kv_count), v(kv_count), o(q_count);
  q.upload(pattern(q_count, 5));
  k.upload(pattern(kv_count, 6));
  v.upload(pattern(kv_count, 7));
  AttentionParams p = packed_params(shape, batch, 1, seq, true);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  Timer timer;
  DecodeWorkspace workspace;
  flash_decode(p, workspace, nullptr);  // sizes the workspace outside the timed region
  for (auto _ : state) state.SetIterationTime(timer.seconds([&] { flash_decode(p, workspace, nullptr); }));
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * kv_count * sizeof(__nv_bfloat16) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

#ifdef ATTNCHECK_BENCH_TORCH
// torch's scaled_dot_product_attention, one backend enabled: [batch, heads, seq, d] bf16, GQA by
// enable_gqa. The backward is timed alone, after an untimed forward that builds its graph.
void torch_prefill(benchmark::State& state, const Shape& shape, bool causal, bool backward,
                   torch_impl::SdpaBackend backend) {
  if (skip_without_device(state)) return;
  const std::int64_t seq = state.range(0), batch = kTokens / seq;
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  torch::manual_seed(1);
  const torch::Tensor q = torch::randn({batch, shape.num_heads, seq, shape.head_dim}, options).requires_grad_(backward);
  const torch::Tensor k =
      torch::randn({batch, shape.num_kv_heads, seq, shape.head_dim}, options).requires_grad_(backward);
  const torch::Tensor v =
      torch::randn({batch, shape.num_kv_heads, seq, shape.head_dim}, options).requires_grad_(backward);
  const torch::Tensor d_o = torch::randn({batch, shape.num_heads, seq, shape.head_dim}, options);
  const torch_impl::SdpaBackendGuard guard(backend);
  const auto attention = [&] {
    return torch::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, std::nullopt, /*enable_gqa=*/true);
  };
  try {
    (void)attention();
    torch::cuda::synchronize();
  } catch (const std::exception& error) {
    state.SkipWithError(("backend refused the shape: " + std::string(error.what()).substr(0, 120)).c_str());
    return;
  }
  Timer timer;
  for (auto _ : state) {
    if (backward) {
      const torch::Tensor out = attention();
      torch::cuda::synchronize();
      state.SetIterationTime(timer.seconds([&] { out.backward(d_o); }));
    } else {
      state.SetIterationTime(timer.seconds([&] { (void)attention(); }));
    }
  }
  const double flops = forward_flops(batch, seq, seq, shape, causal) * (backward ? 2.5 : 1.0);
  state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

template <typename F>
void add(const std::string& name, F&& function) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<F>(function))
      ->ArgName("seq")
      ->Arg(1024)
      ->Arg(4096)
      ->Arg(16384)
      ->UseManualTime()
      ->Repetitions(10)
      ->ReportAggregatesOnly(true)
      ->Unit(benchmark::kMillisecond);
}

void register_all() {
  for (const Shape& shape : shapes()) {
    for (const bool causal : {false, true}) {
      for (const bool backward : {false, true}) {
        const std::string suffix = shape.name + (causal ? "/causal" : "/full") + (backward ? "/backward" : "/forward");
        add("attncheck/" + suffix,
            [shape, causal, backward](benchmark::State& state) { attncheck_prefill(state, shape, causal, backward); });
#ifdef ATTNCHECK_BENCH_TORCH
        add("sdpa_flash/" + suffix, [shape, causal, backward](benchmark::State& state) {
          torch_prefill(state, shape, causal, backward, torch_impl::SdpaBackend::flash);
        });
        add("sdpa_cudnn/" + suffix, [shape, causal, backward](benchmark::State& state) {
          torch_prefill(state, shape, causal, backward, torch_impl::SdpaBackend::cudnn);
        });
#endif
      }
    }
    add("attncheck_decode/" + shape.name, [shape](benchmark::State& state) { attncheck_decode(state, shape); });
  }
}

}  // namespace
}  // namespace attncheck::cuda_impl

int main(int argc, char** argv) {
  attncheck::cuda_impl::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
