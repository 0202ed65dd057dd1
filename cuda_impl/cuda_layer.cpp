#include "cuda_impl/cuda_layer.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "core/model/tp_plan.hpp"
#include "core/tp/fused_qkv_convert.hpp"
#include "core/tp/tp_shard.hpp"
#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_buffer.hpp"
#include "cuda_impl/element_conversion.hpp"
#include "cuda_impl/gemm.hpp"
#include "cuda_impl/layer_kernels.hpp"
#include "cuda_impl/rope_table.hpp"
#include "cuda_impl/tp_comm.hpp"

namespace attncheck::cuda_impl {
namespace {

constexpr std::int64_t kDecodeKernelMaxTokens = 16;

// ATTNCHECK_NCCL=0 keeps every rank on device 0 even on a machine with enough GPUs (to compare the two
// paths, or where NCCL cannot run).
bool nccl_tensor_parallelism_enabled() {
  const char* setting = std::getenv("ATTNCHECK_NCCL");
  return setting == nullptr || std::string(setting) != "0";
}

// Inputs reach T through float (element_conversion.hpp); the generators' values are exact in bf16 and
// fp16 (core/generation/input_generation.hpp), so that double rounding never changes a generated input.
template <typename T>
T to_element(double value) {
  return from_float<T>(static_cast<float>(value));
}

template <typename T>
DeviceBuffer<T> upload(std::span<const double> values) {
  std::vector<T> host(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) host[i] = to_element<T>(values[i]);
  DeviceBuffer<T> buffer(host.size());
  buffer.upload(host);
  return buffer;
}

Tensor download(const DeviceBuffer<float>& buffer, Shape shape) {
  const std::vector<float> host = buffer.download();
  Tensor tensor(std::move(shape));
  for (std::size_t i = 0; i < host.size(); ++i) tensor.values[i] = host[i];
  return tensor;
}

// One rank's weights on the device. qkv [qkv_rows, hidden] T: the rank's fused QKV in GPT-NeoX's
// per-rank stacked layout [Q | K | V], made by core's fuse_qkv (the converters every layout is tested
// with); qkv_bias [qkv_rows] float; o [hidden, query_width] T.
template <typename T>
struct RankWeights {
  DeviceBuffer<T> qkv, o;
  std::optional<DeviceBuffer<float>> qkv_bias, q_norm, k_norm;

  RankWeights(const Parameters& shard, const TpPlan& plan, int rank) {
    const FusedQkv fused = fuse_qkv(shard, plan, rank, FusedQkvLayout::stacked);
    qkv = upload<T>(fused.weight.values);
    o = upload<T>(shard.o_proj.values);
    if (fused.bias) qkv_bias = upload<float>(fused.bias->values);
    if (shard.q_norm) {
      q_norm = upload<float>(shard.q_norm->values);
      k_norm = upload<float>(shard.k_norm->values);
    }
  }
};

// One rank's parameter gradients: on the host (HF shard layout; o_bias's added by the caller) and, for
// the NCCL reductions, the device buffers they came from.
struct RankGradients {
  Parameters partial;
  DeviceBuffer<float> d_qkv_weight;               // [qkv_rows, hidden]: rows [Q | K | V]
  std::optional<DeviceBuffer<float>> d_qkv_bias;  // [qkv_rows]
  DeviceBuffer<float> d_q_norm, d_k_norm;         // [head_dim], zero without QK-norm
};

// What every rank on one device shares: the case, its device inputs, the stream and the GEMM handle.
template <typename T>
struct Layer {
  const Case& test_case;
  const Geometry& g;
  const TpPlan& plan;
  Precision type;
  cudaStream_t stream;
  Gemm& gemm;
  std::int64_t batch, seq, tokens, hidden;
  DeviceBuffer<std::int32_t> key_lengths;

  AttentionParams attention(const RankPlan& rank, std::int64_t seq_q, std::int64_t seq_k) const {
    AttentionParams p;
    p.batch = std::int32_t(batch);
    p.seq_q = std::int32_t(seq_q);
    p.seq_k = std::int32_t(seq_k);
    p.num_heads = std::int32_t(rank.q_heads.size());
    p.num_kv_heads = std::int32_t(rank.kv_heads.size());
    p.head_dim = std::int32_t(g.head_dim());
    p.group_size = p.num_heads / p.num_kv_heads;
    p.scale = float(g.scale());
    p.softcap = float(g.softcap().value_or(0.0));
    p.causal = g.causal();
    p.window = std::int32_t(g.sliding_window().value_or(0));
    p.key_lengths = key_lengths.data();
    p.precision = type;
    return p;
  }

  QkNormRopeParams norm_rope(const RankPlan& rank, const RankWeights<T>& weights, std::int64_t count_tokens,
                             const DeviceBuffer<float>& table, DeviceBuffer<float>& normalised,
                             DeviceBuffer<float>& inverse_rms) const {
    return {.tokens = std::int32_t(count_tokens),
            .num_heads = std::int32_t(rank.q_heads.size()),
            .num_kv_heads = std::int32_t(rank.kv_heads.size()),
            .head_dim = std::int32_t(g.head_dim()),
            .rotary_dim = std::int32_t(g.rotary_dim()),
            .interleaved = g.rope_style() == RopeStyle::interleaved,
            .norm = g.qk_norm(),
            .norm_eps = float(g.qk_norm_eps()),
            .q_norm_weight = weights.q_norm ? weights.q_norm->data() : nullptr,
            .k_norm_weight = weights.k_norm ? weights.k_norm->data() : nullptr,
            .cos_sin = table.data(),
            .row_stride = rank.qkv_rows,
            .k_column = std::int32_t(rank.query_width),
            .normalised = normalised.data(),
            .inverse_rms = inverse_rms.data()};
  }

  // qkv [count_tokens, qkv_rows] = x W_qkv^T + b, then QK-norm and RoPE in place.
  DeviceBuffer<T> project(const RankPlan& rank, const RankWeights<T>& weights, const T* x, std::int64_t count_tokens,
                          const QkNormRopeParams& norm_params) const {
    DeviceBuffer<T> qkv(std::size_t(count_tokens * rank.qkv_rows));
    gemm.run(stream, type, count_tokens, rank.qkv_rows, hidden, {x, hidden, Transpose::no},
             {weights.qkv.data(), hidden, Transpose::yes}, qkv.data(), rank.qkv_rows, false);
    if (weights.qkv_bias) {
      add_bias(type, qkv.data(), count_tokens, rank.qkv_rows, rank.qkv_rows, weights.qkv_bias->data(), stream);
    }
    qk_norm_rope_forward(norm_params, type, qkv.data(), stream);
    return qkv;
  }

  // Forward and backward of one rank: out_sum += its o_proj partial, dx_sum += its dx partial; returns
  // its partial parameter gradients.
  RankGradients forward_backward(const RankPlan& rank, const RankWeights<T>& weights, const DeviceBuffer<T>& x,
                                 const DeviceBuffer<T>& dout, const DeviceBuffer<float>& table, float* out_sum,
                                 float* dx_sum) const {
    const std::int64_t qw = rank.query_width, kw = rank.kv_width, rows = rank.qkv_rows, d = g.head_dim();
    const std::int64_t heads = rank.q_heads.size() + rank.kv_heads.size();
    DeviceBuffer<float> normalised(std::size_t(tokens * heads * d)), inverse_rms(std::size_t(tokens * heads));
    const QkNormRopeParams norm_params = norm_rope(rank, weights, tokens, table, normalised, inverse_rms);
    DeviceBuffer<T> qkv = project(rank, weights, x.data(), tokens, norm_params);

    DeviceBuffer<T> context(std::size_t(tokens * qw));
    DeviceBuffer<float> lse(std::size_t(batch * rank.q_heads.size() * seq));
    AttentionParams p = attention(rank, seq, seq);
    p.q = qkv.data();
    p.k = qkv.data() + qw;
    p.v = qkv.data() + qw + kw;
    p.q_row_stride = p.kv_row_stride = rows;
    p.q_batch_stride = p.kv_batch_stride = seq * rows;
    p.o = context.data();
    p.o_row_stride = qw;
    p.o_batch_stride = seq * qw;
    p.lse = lse.data();
    flash_forward(p, stream);
    gemm.run(stream, type, tokens, hidden, qw, {context.data(), qw, Transpose::no},
             {weights.o.data(), qw, Transpose::yes}, out_sum, hidden, true, 1.0f, 1.0f);

    // Backward. d_context = dout W_o; dW_o = dout^T context.
    DeviceBuffer<T> d_context(std::size_t(tokens * qw));
    gemm.run(stream, type, tokens, qw, hidden, {dout.data(), hidden, Transpose::no},
             {weights.o.data(), qw, Transpose::no}, d_context.data(), qw, false);
    DeviceBuffer<float> d_o_proj(std::size_t(hidden * qw));
    gemm.run(stream, type, hidden, qw, tokens, {dout.data(), hidden, Transpose::yes},
             {context.data(), qw, Transpose::no}, d_o_proj.data(), qw, true);
    // Attention backward into d_q (float, packed) and the K / V columns of d_qkv; then RoPE and the norm
    // backward put dQ and dK into d_qkv's Q and K columns.
    DeviceBuffer<float> d_q(std::size_t(tokens * qw)), d_row(std::size_t(batch * rank.q_heads.size() * seq));
    d_q.zero();
    DeviceBuffer<T> d_qkv(std::size_t(tokens * rows));
    p.d_o = d_context.data();
    p.d_q = d_q.data();
    p.d_k = d_qkv.data() + qw;
    p.d_v = d_qkv.data() + qw + kw;
    p.d_row = d_row.data();
    flash_backward(p, stream);
    DeviceBuffer<float> d_q_norm{static_cast<std::size_t>(d)}, d_k_norm{static_cast<std::size_t>(d)};
    d_q_norm.zero();
    d_k_norm.zero();
    qk_norm_rope_backward(norm_params, type, d_q.data(), qw, d_qkv.data(), d_q_norm.data(), d_k_norm.data(), stream);
    DeviceBuffer<float> d_qkv_weight(std::size_t(rows * hidden));
    gemm.run(stream, type, rows, hidden, tokens, {d_qkv.data(), rows, Transpose::yes},
             {x.data(), hidden, Transpose::no}, d_qkv_weight.data(), hidden, true);
    gemm.run(stream, type, tokens, hidden, rows, {d_qkv.data(), rows, Transpose::no},
             {weights.qkv.data(), hidden, Transpose::no}, dx_sum, hidden, true, 1.0f, 1.0f);
    std::optional<DeviceBuffer<float>> d_bias;
    if (weights.qkv_bias) {
      d_bias.emplace(std::size_t(rows));
      column_sums(type, d_qkv.data(), tokens, rows, rows, d_bias->data(), stream);
    }
    check_cuda(cudaStreamSynchronize(stream), "rank forward/backward");

    RankGradients gradients;
    Parameters& partial = gradients.partial;
    // Back from the stacked fused layout to the shard's q/k/v_proj (and biases) by core's split_qkv.
    FusedQkv fused_gradient{.weight = download(d_qkv_weight, {rows, hidden})};
    if (d_bias) fused_gradient.bias = download(*d_bias, {rows});
    split_qkv(fused_gradient, plan, rank.rank, FusedQkvLayout::stacked, partial);
    partial.o_proj = download(d_o_proj, {hidden, qw});
    if (weights.q_norm) {
      partial.q_norm = download(d_q_norm, {d});
      partial.k_norm = download(d_k_norm, {d});
    }
    gradients.d_qkv_weight = std::move(d_qkv_weight);
    gradients.d_qkv_bias = std::move(d_bias);
    gradients.d_q_norm = std::move(d_q_norm);
    gradients.d_k_norm = std::move(d_k_norm);
    return gradients;
  }

  // The decode schedule on one rank through a KV cache: decode_sum [batch, total, hidden] += its o_proj
  // partial for every decoded token.
  void decode(const RankPlan& rank, const RankWeights<T>& weights, float* decode_sum) const {
    const Inputs& inputs = test_case.inputs;
    const std::int64_t total = inputs.decode.total(), qw = rank.query_width, kw = rank.kv_width;
    const std::int64_t rows = rank.qkv_rows, d = g.head_dim();
    const std::int64_t heads = rank.q_heads.size() + rank.kv_heads.size();
    // cache_k, cache_v [batch, total, kv_width] T
    DeviceBuffer<T> cache_k(std::size_t(batch * total * kw)), cache_v(std::size_t(batch * total * kw));
    DecodeWorkspace workspace;
    std::vector<std::int64_t> calls;
    if (inputs.decode.prefill > 0) calls.push_back(inputs.decode.prefill);
    calls.insert(calls.end(), inputs.decode.steps.begin(), inputs.decode.steps.end());
    std::int64_t start = 0;
    for (const std::int64_t count : calls) {
      // The call's tokens of every batch row, contiguous: x_step [batch * count, hidden].
      std::vector<double> x_step;
      std::vector<std::int64_t> positions;
      for (std::int64_t b = 0; b < batch; ++b) {
        const auto first = inputs.x.values.begin() + (b * seq + start) * hidden;
        x_step.insert(x_step.end(), first, first + count * hidden);
        const auto first_position = inputs.positions.begin() + b * seq + start;
        positions.insert(positions.end(), first_position, first_position + count);
      }
      const DeviceBuffer<T> x = upload<T>(x_step);
      const DeviceBuffer<float> table = upload<float>(rope_table(g, positions));
      DeviceBuffer<float> normalised(std::size_t(batch * count * heads * d)),
          inverse_rms(std::size_t(batch * count * heads));
      const DeviceBuffer<T> qkv = project(rank, weights, x.data(), batch * count,
                                          norm_rope(rank, weights, batch * count, table, normalised, inverse_rms));
      for (std::int64_t b = 0; b < batch; ++b) {  // append K and V to the cache
        for (const std::int64_t column : {qw, qw + kw}) {
          T* cache = (column == qw ? cache_k : cache_v).data() + (b * total + start) * kw;
          check_cuda(cudaMemcpy2DAsync(cache, kw * sizeof(T), qkv.data() + b * count * rows + column, rows * sizeof(T),
                                       kw * sizeof(T), count, cudaMemcpyDeviceToDevice, stream),
                     "KV-cache append");
        }
      }
      DeviceBuffer<T> context(std::size_t(batch * count * qw));
      AttentionParams p = attention(rank, count, start + count);
      p.q = qkv.data();
      p.q_row_stride = rows;
      p.q_batch_stride = count * rows;
      p.k = cache_k.data();
      p.v = cache_v.data();
      p.kv_row_stride = kw;
      p.kv_batch_stride = total * kw;
      p.o = context.data();
      p.o_row_stride = qw;
      p.o_batch_stride = count * qw;
      // A step of a few tokens takes the split-KV decode kernel; a long prefill the flash forward.
      if (count <= kDecodeKernelMaxTokens) {
        flash_decode(p, workspace, stream);
      } else {
        flash_forward(p, stream);
      }
      for (std::int64_t b = 0; b < batch; ++b) {
        gemm.run(stream, type, count, hidden, qw, {context.data() + b * count * qw, qw, Transpose::no},
                 {weights.o.data(), qw, Transpose::yes}, decode_sum + (b * total + start) * hidden, hidden, true, 1.0f,
                 1.0f);
      }
      check_cuda(cudaStreamSynchronize(stream), "decode call");
      start += count;
    }
  }
};

// sum [rows, hidden] float + o_bias (if any), rounded to T as the layer would store it, back in double.
template <typename T>
Tensor finish_output(DeviceBuffer<float>& sum, const std::optional<DeviceBuffer<float>>& o_bias, std::int64_t rows,
                     std::int64_t hidden, Precision type, cudaStream_t stream, Shape shape) {
  if (o_bias) add_bias(Precision::fp32, sum.data(), rows, hidden, hidden, o_bias->data(), stream);
  DeviceBuffer<T> rounded(sum.size());
  round_to(type, sum.data(), rounded.data(), std::int64_t(sum.size()), stream);
  check_cuda(cudaStreamSynchronize(stream), "output");
  const std::vector<T> host = rounded.download();
  Tensor tensor(std::move(shape));
  for (std::size_t i = 0; i < host.size(); ++i) tensor.values[i] = to_float(host[i]);
  return tensor;
}

// Everything one device holds for the ranks it runs: a stream, a GEMM handle, the case's inputs, and the
// sums of its ranks' o_proj partials, dx and decode outputs (fp32). Made with `device` current.
template <typename T>
struct DeviceState {
  cudaStream_t stream = nullptr;
  std::optional<Gemm> gemm;
  std::optional<Layer<T>> layer;
  DeviceBuffer<T> x, dout;
  DeviceBuffer<float> table, out_sum, dx_sum, decode_sum;
  std::optional<DeviceBuffer<float>> o_bias;

  DeviceState(const Case& test_case, const TpPlan& plan, Precision type, int device) {
    check_cuda(cudaSetDevice(device), "device");
    check_cuda(cudaStreamCreate(&stream), "stream");
    gemm.emplace();
    const Inputs& inputs = test_case.inputs;
    const Geometry& g = test_case.geometry();
    std::vector<std::int32_t> key_lengths(inputs.key_lengths.begin(), inputs.key_lengths.end());
    layer.emplace(Layer<T>{.test_case = test_case,
                           .g = g,
                           .plan = plan,
                           .type = type,
                           .stream = stream,
                           .gemm = *gemm,
                           .batch = inputs.batch,
                           .seq = inputs.seq,
                           .tokens = inputs.batch * inputs.seq,
                           .hidden = g.hidden_size(),
                           .key_lengths = DeviceBuffer<std::int32_t>(key_lengths.size())});
    layer->key_lengths.upload(key_lengths);
    x = upload<T>(inputs.x.values);
    dout = upload<T>(inputs.dout.values);
    table = upload<float>(rope_table(g, inputs.positions));
    if (test_case.weights.o_bias) o_bias = upload<float>(test_case.weights.o_bias->values);
    const std::size_t activations = std::size_t(layer->tokens * layer->hidden);
    out_sum = DeviceBuffer<float>(activations);
    dx_sum = DeviceBuffer<float>(activations);
    decode_sum = DeviceBuffer<float>(std::size_t(inputs.batch * inputs.decode.total() * layer->hidden));
    out_sum.zero();
    dx_sum.zero();
    decode_sum.zero();
  }
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  ~DeviceState() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // One rank's forward, backward and decode on this device, into the sums.
  RankGradients run_rank(const Case& test_case, const TpPlan& plan, int r) {
    const Parameters shard = plan.tp_size == 1 ? test_case.weights : shard_parameters(test_case.weights, plan, r);
    const RankWeights<T> weights(shard, plan, r);
    RankGradients gradients =
        layer->forward_backward(plan.ranks[r], weights, x, dout, table, out_sum.data(), dx_sum.data());
    if (test_case.inputs.decode.total() > 0) layer->decode(plan.ranks[r], weights, decode_sum.data());
    return gradients;
  }
};

// The NCCL path: rank r on GPU r, its sums all-reduced over the world; replicated-KV gradients summed
// over each replica group and q_norm / k_norm over the world on the devices, and reported as the ranks'
// gradients (so reference-tp's per-rank gradients check the communicators).
template <typename T>
std::vector<Parameters> run_ranks_on_their_devices(const Case& test_case, const TpPlan& plan, Precision type,
                                                   std::vector<std::unique_ptr<DeviceState<T>>>& devices,
                                                   std::vector<Parameters>& partials) {
  TpCommunicators communicators(plan);
  std::vector<RankGradients> gradients;
  for (int r = 0; r < plan.tp_size; ++r) {
    devices.push_back(std::make_unique<DeviceState<T>>(test_case, plan, type, r));
    gradients.push_back(devices.back()->run_rank(test_case, plan, r));
    partials.push_back(gradients.back().partial);
  }
  std::vector<cudaStream_t> streams;
  for (const auto& device : devices) streams.push_back(device->stream);
  const auto pointers = [&](auto member) {
    std::vector<float*> result;
    for (const auto& device : devices) result.push_back(((*device).*member).data());
    return result;
  };
  const std::int64_t hidden = test_case.geometry().hidden_size();
  communicators.world_sum(pointers(&DeviceState<T>::out_sum), devices[0]->out_sum.size(), streams);
  communicators.world_sum(pointers(&DeviceState<T>::dx_sum), devices[0]->dx_sum.size(), streams);
  if (devices[0]->decode_sum.size() > 0) {
    communicators.world_sum(pointers(&DeviceState<T>::decode_sum), devices[0]->decode_sum.size(), streams);
  }
  // k_proj and v_proj are the rows after the rank's query rows: one contiguous run per rank.
  const RankPlan& first = plan.ranks[0];
  std::vector<float*> kv_weights, kv_biases, q_norms, k_norms;
  for (int r = 0; r < plan.tp_size; ++r) {
    kv_weights.push_back(gradients[r].d_qkv_weight.data() + plan.ranks[r].query_width * hidden);
    if (gradients[r].d_qkv_bias) kv_biases.push_back(gradients[r].d_qkv_bias->data() + plan.ranks[r].query_width);
    q_norms.push_back(gradients[r].d_q_norm.data());
    k_norms.push_back(gradients[r].d_k_norm.data());
  }
  communicators.replica_sum(kv_weights, std::size_t(2 * first.kv_width * hidden), streams);
  if (!kv_biases.empty()) communicators.replica_sum(kv_biases, std::size_t(2 * first.kv_width), streams);
  if (test_case.weights.q_norm) {
    communicators.world_sum(q_norms, gradients[0].d_q_norm.size(), streams);
    communicators.world_sum(k_norms, gradients[0].d_k_norm.size(), streams);
  }
  for (const cudaStream_t stream : streams) check_cuda(cudaStreamSynchronize(stream), "all-reduce");

  std::vector<Parameters> reduced = reduce_rank_gradients(partials, plan);  // q, o, o_bias: owned, as computed
  for (int r = 0; r < plan.tp_size; ++r) {
    const std::int64_t rows = plan.ranks[r].qkv_rows;
    FusedQkv fused{.weight = download(gradients[r].d_qkv_weight, {rows, hidden})};
    if (gradients[r].d_qkv_bias) fused.bias = download(*gradients[r].d_qkv_bias, {rows});
    Parameters unstacked;
    split_qkv(fused, plan, r, FusedQkvLayout::stacked, unstacked);
    reduced[r].k_proj = std::move(unstacked.k_proj);
    reduced[r].v_proj = std::move(unstacked.v_proj);
    reduced[r].k_bias = std::move(unstacked.k_bias);
    reduced[r].v_bias = std::move(unstacked.v_bias);
    if (test_case.weights.q_norm) {
      reduced[r].q_norm = download(gradients[r].d_q_norm, {test_case.geometry().head_dim()});
      reduced[r].k_norm = download(gradients[r].d_k_norm, {test_case.geometry().head_dim()});
    }
  }
  return reduced;
}

template <typename T>
Result run_layer(const Case& test_case, const CudaOptions& options, const std::string& name) {
  const Geometry& g = test_case.geometry();
  const TpPlan plan = options.sharded ? test_case.plan : make_tp_plan(g, 1);
  const Inputs& inputs = test_case.inputs;
  const Precision type = options.precision;
  std::vector<std::unique_ptr<DeviceState<T>>> devices;
  std::vector<Parameters> partials;
  std::vector<Parameters> rank_gradients;
  if (plan.tp_size > 1 && cuda_device_count() >= plan.tp_size && nccl_tensor_parallelism_enabled()) {
    rank_gradients = run_ranks_on_their_devices<T>(test_case, plan, type, devices, partials);
  } else {  // every rank in turn on device 0: outputs and dx summed there in rank order, gradients on the host
    devices.push_back(std::make_unique<DeviceState<T>>(test_case, plan, type, 0));
    for (int r = 0; r < plan.tp_size; ++r) partials.push_back(devices[0]->run_rank(test_case, plan, r).partial);
    rank_gradients = reduce_rank_gradients(partials, plan);
  }
  DeviceState<T>& first = *devices[0];
  check_cuda(cudaSetDevice(0), "device");
  const std::int64_t tokens = inputs.batch * inputs.seq, hidden = g.hidden_size(), total = inputs.decode.total();
  Result result;
  result.implementation = name;
  result.out = finish_output<T>(first.out_sum, first.o_bias, tokens, hidden, type, first.stream, inputs.x.shape);
  const std::optional<DeviceBuffer<float>> no_bias;
  Tensor dx = finish_output<T>(first.dx_sum, no_bias, tokens, hidden, type, first.stream, inputs.x.shape);
  if (test_case.weights.o_bias) {  // sum over tokens of dout, the same on every rank
    Tensor d_o_bias({hidden});
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (std::int64_t c = 0; c < hidden; ++c) d_o_bias.values[c] += inputs.dout.values[t * hidden + c];
    }
    for (Parameters& partial : partials) partial.o_bias = d_o_bias;
    for (Parameters& rank : rank_gradients) rank.o_bias = d_o_bias;
  }
  result.gradients = Gradients{.x = std::move(dx), .params = assemble_gradients(partials, plan)};
  if (options.sharded) result.rank_gradients = std::move(rank_gradients);
  if (total > 0) {
    result.decode_out = finish_output<T>(first.decode_sum, first.o_bias, inputs.batch * total, hidden, type,
                                         first.stream, {inputs.batch, total, hidden});
  }
  return result;
}

}  // namespace

std::vector<std::string> cuda_implementation_names() {
  return {"cuda-fp32", "cuda-bf16", "cuda-fp16", "cuda-fp32-tp", "cuda-bf16-tp", "cuda-fp16-tp"};
}

std::optional<CudaOptions> parse_cuda_implementation(const std::string& name) {
  for (const auto& [type, type_name] :
       {std::pair{Precision::fp32, "fp32"}, std::pair{Precision::bf16, "bf16"}, std::pair{Precision::fp16, "fp16"}}) {
    const std::string base = std::string("cuda-") + type_name;
    if (name == base) return CudaOptions{.precision = type, .sharded = false};
    if (name == base + "-tp") return CudaOptions{.precision = type, .sharded = true};
  }
  return std::nullopt;
}

Result run_cuda(const Case& test_case, const CudaOptions& options, const std::string& name) {
  if (cuda_device_count() == 0) throw CudaUnavailable("unavailable: no CUDA device");
  validate_case(test_case);
  switch (options.precision) {
    case Precision::fp32:
      return run_layer<float>(test_case, options, name);
    case Precision::bf16:
      return run_layer<__nv_bfloat16>(test_case, options, name);
    case Precision::fp16:
      return run_layer<__half>(test_case, options, name);
    case Precision::fp64:
      break;
  }
  throw std::invalid_argument("run_cuda: the CUDA implementation computes in fp32, bf16 or fp16, not fp64");
}

}  // namespace attncheck::cuda_impl
