#include "cuda_impl/cuda_layer.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "core/model/tp_plan.hpp"
#include "core/tp/fused_qkv_convert.hpp"
#include "core/tp/tp_shard.hpp"
#include "cuda_impl/attention_kernels.hpp"
#include "cuda_impl/cuda_check.hpp"
#include "cuda_impl/device_buffer.hpp"
#include "cuda_impl/element_conversion.hpp"
#include "cuda_impl/gemm.hpp"
#include "cuda_impl/layer_kernels.hpp"
#include "cuda_impl/qk_norm_math.hpp"
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
// with); qkv_bias [qkv_rows] float; o [hidden, query_width] T; q_norm, k_norm float: [head_dim] each for
// a per-head norm, the rank's channels [query_width] / [kv_width] for the whole-width one.
template <typename T>
struct RankWeights {
  DeviceBuffer<T> qkv, o;
  std::optional<DeviceBuffer<float>> qkv_bias, q_norm, k_norm;
  // sinks [rank's query heads] float: stored in T like every parameter, read as float by the kernels.
  std::optional<DeviceBuffer<float>> sinks;

  RankWeights(const Parameters& shard, const TpPlan& plan, int rank) {
    const FusedQkv fused = fuse_qkv(shard, plan, rank, FusedQkvLayout::stacked);
    qkv = upload<T>(fused.weight.values);
    o = upload<T>(shard.o_proj.values);
    if (fused.bias) qkv_bias = upload<float>(fused.bias->values);
    if (shard.q_norm) {
      q_norm = upload<float>(shard.q_norm->values);
      k_norm = upload<float>(shard.k_norm->values);
    }
    if (shard.sinks) {
      std::vector<double> stored(shard.sinks->values.size());
      for (std::size_t h = 0; h < stored.size(); ++h) stored[h] = to_float(to_element<T>(shard.sinks->values[h]));
      sinks = upload<float>(stored);
    }
  }
};

// One rank's parameter gradients: on the host (HF shard layout; o_bias's added by the caller) and, for
// the NCCL reductions, the device buffers they came from.
struct RankGradients {
  Parameters partial;
  DeviceBuffer<float> d_qkv_weight;               // [qkv_rows, hidden]: rows [Q | K | V]
  std::optional<DeviceBuffer<float>> d_qkv_bias;  // [qkv_rows]
  // [head_dim] each (per-head norm; zero without QK-norm), or the rank's [query_width] / [kv_width]
  // (whole-width norm).
  DeviceBuffer<float> d_q_norm, d_k_norm;
};

// The attention parameters' pointer to the rank's sinks (null without).
template <typename T>
const float* sinks_of(const RankWeights<T>& weights) {
  return weights.sinks ? weights.sinks->data() : nullptr;
}

// Whether rank r is the first rank of its KV head's replica group (every rank is, without replication):
// the one that counts the head's K channels in the whole-width norm's sum of squares, and whose dK
// partial carries the norm backward's n * S / N term (qk_norm_math.hpp).
bool first_of_replica_group(const TpPlan& plan, int r) {
  return counts_key_sum_squares(r, int(plan.replica_groups[plan.ranks[r].replica_group].ranks.begin));
}

// One rank's state between the phases of its work (Layer: A project, B norm + RoPE through the attention
// backward, C norm backward and projection gradients), on the rank's device. A whole-width norm
// all-reduces between the phases (run_ranks), so every rank's pass lives until the last phase; otherwise
// a pass is made and spent one rank at a time. Buffers are made by the phase that first writes them.
template <typename T>
struct RankPass {
  const RankPlan& rank;
  RankWeights<T> weights;
  DeviceBuffer<T> qkv;  // [tokens, qkv_rows] T: x W_qkv^T + b (A); Q and K normalised and rotated in place (B)
  DeviceBuffer<float> normalised;   // [tokens, (heads + kv heads) * head_dim] float: n, saved by B's norm
  DeviceBuffer<float> inverse_rms;  // [tokens, heads + kv heads] float: 1 / rms, saved by B's norm
  // Whole-width norm only (else empty), [tokens] float each: the rank's own sums, then in place the
  // all-reduced totals (every rank holds them, as after an NCCL all-reduce).
  //   q_sum_squares, k_sum_squares  A: sum of x^2 over its Q / K channels (K: zero on a replica other
  //                                 than its group's first, so that a plain sum counts the head once)
  //   q_dots, k_dots                B: sum of dn * n over its Q / K channels (every rank counts)
  DeviceBuffer<float> q_sum_squares, k_sum_squares, q_dots, k_dots;
  // Whole-width norm only: [tokens, (heads + kv heads) * head_dim] float, dQ and dK rotated back (B), the
  // norm's incoming gradient for C.
  DeviceBuffer<float> unrotated;
  // [tokens, qkv_rows] T: the attention backward's dK, dV (B); dQ and dK through the norm (B for a
  // per-head norm or none, C for the whole-width one).
  DeviceBuffer<T> d_qkv;
  DeviceBuffer<float> d_o_proj;            // [hidden, query_width] float
  DeviceBuffer<float> d_sinks;             // [rank's query heads] float, zero without sinks
  DeviceBuffer<float> d_q_norm, d_k_norm;  // as RankGradients', accumulated into from zero (B)

  RankPass(const Parameters& shard, const TpPlan& plan, int r) : rank(plan.ranks[r]), weights(shard, plan, r) {}
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

  // q_sum_squares / k_sum_squares: the whole-width norm's all-reduced sums [count_tokens] (null otherwise).
  QkNormRopeParams norm_rope(const RankPlan& rank, const RankWeights<T>& weights, std::int64_t count_tokens,
                             const float* cos_sin, float* normalised, float* inverse_rms,
                             const float* q_sum_squares = nullptr, const float* k_sum_squares = nullptr) const {
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
            .cos_sin = cos_sin,
            .row_stride = rank.qkv_rows,
            .k_column = std::int32_t(rank.query_width),
            .normalised = normalised,
            .inverse_rms = inverse_rms,
            .q_norm_width = std::int32_t(g.query_width()),
            .k_norm_width = std::int32_t(g.kv_width()),
            .q_sum_squares = q_sum_squares,
            .k_sum_squares = k_sum_squares};
  }

  // The pass's parameters over the layer's tokens (its sums are the all-reduced ones from phase B on).
  QkNormRopeParams norm_rope(RankPass<T>& pass, const DeviceBuffer<float>& table) const {
    return norm_rope(pass.rank, pass.weights, tokens, table.data(), pass.normalised.data(), pass.inverse_rms.data(),
                     pass.q_sum_squares.data(), pass.k_sum_squares.data());
  }

  // qkv [count_tokens, qkv_rows] = x W_qkv^T + b (QK-norm and RoPE are the caller's).
  DeviceBuffer<T> project(const RankPlan& rank, const RankWeights<T>& weights, const T* x,
                          std::int64_t count_tokens) const {
    DeviceBuffer<T> qkv(std::size_t(count_tokens * rank.qkv_rows));
    gemm.run(stream, type, count_tokens, rank.qkv_rows, hidden, {x, hidden, Transpose::no},
             {weights.qkv.data(), hidden, Transpose::yes}, qkv.data(), rank.qkv_rows, false);
    if (weights.qkv_bias) {
      add_bias(type, qkv.data(), count_tokens, rank.qkv_rows, rank.qkv_rows, weights.qkv_bias->data(), stream);
    }
    return qkv;
  }

  // Phase A: the projection; with a whole-width norm, the rank's sums of squares for the all-reduce (K's
  // only when count_keys: the first rank of the KV head's replica group).
  void project_phase(RankPass<T>& pass, const DeviceBuffer<T>& x, const DeviceBuffer<float>& table,
                     bool count_keys) const {
    pass.qkv = project(pass.rank, pass.weights, x.data(), tokens);
    if (g.qk_norm_full_width()) {
      pass.q_sum_squares = DeviceBuffer<float>(std::size_t(tokens));
      pass.k_sum_squares = DeviceBuffer<float>(std::size_t(tokens));
      qk_norm_full_width_sum_squares(norm_rope(pass, table), type, pass.qkv.data(), count_keys,
                                     pass.q_sum_squares.data(), pass.k_sum_squares.data(), stream);
    }
  }

  // Phase B: QK-norm (the whole-width one from the all-reduced sums of squares) and RoPE, attention,
  // out_sum += the rank's o_proj partial; the backward through o_proj and attention. A per-head norm (or
  // none) then rotates back and runs its whole backward; the whole-width one rotates back, accumulates
  // d_q_norm / d_k_norm and leaves its local dots for the all-reduce.
  void attend_phase(RankPass<T>& pass, const DeviceBuffer<T>& dout, const DeviceBuffer<float>& table,
                    float* out_sum) const {
    const RankPlan& rank = pass.rank;
    const RankWeights<T>& weights = pass.weights;
    const std::int64_t qw = rank.query_width, kw = rank.kv_width, rows = rank.qkv_rows, d = g.head_dim();
    const std::int64_t heads = rank.q_heads.size() + rank.kv_heads.size();
    pass.normalised = DeviceBuffer<float>(std::size_t(tokens * heads * d));
    pass.inverse_rms = DeviceBuffer<float>(std::size_t(tokens * heads));
    const QkNormRopeParams norm_params = norm_rope(pass, table);
    qk_norm_rope_forward(norm_params, type, pass.qkv.data(), stream);

    DeviceBuffer<T> context(std::size_t(tokens * qw));
    DeviceBuffer<float> lse(std::size_t(batch * rank.q_heads.size() * seq));
    AttentionParams p = attention(rank, seq, seq);
    p.q = pass.qkv.data();
    p.k = pass.qkv.data() + qw;
    p.v = pass.qkv.data() + qw + kw;
    p.q_row_stride = p.kv_row_stride = rows;
    p.q_batch_stride = p.kv_batch_stride = seq * rows;
    p.o = context.data();
    p.o_row_stride = qw;
    p.o_batch_stride = seq * qw;
    p.lse = lse.data();
    p.sinks = sinks_of(weights);
    flash_forward(p, stream);
    gemm.run(stream, type, tokens, hidden, qw, {context.data(), qw, Transpose::no},
             {weights.o.data(), qw, Transpose::yes}, out_sum, hidden, true, 1.0f, 1.0f);

    // Backward. d_context = dout W_o; dW_o = dout^T context.
    DeviceBuffer<T> d_context(std::size_t(tokens * qw));
    gemm.run(stream, type, tokens, qw, hidden, {dout.data(), hidden, Transpose::no},
             {weights.o.data(), qw, Transpose::no}, d_context.data(), qw, false);
    pass.d_o_proj = DeviceBuffer<float>(std::size_t(hidden * qw));
    gemm.run(stream, type, hidden, qw, tokens, {dout.data(), hidden, Transpose::yes},
             {context.data(), qw, Transpose::no}, pass.d_o_proj.data(), qw, true);
    // Attention backward into d_q (float, packed) and the K / V columns of d_qkv; then RoPE and the norm
    // backward put dQ and dK into d_qkv's Q and K columns (the whole-width norm: in phase C).
    DeviceBuffer<float> d_q(std::size_t(tokens * qw)), d_row(std::size_t(batch * rank.q_heads.size() * seq));
    d_q.zero();
    pass.d_qkv = DeviceBuffer<T>(std::size_t(tokens * rows));
    p.d_o = d_context.data();
    p.d_q = d_q.data();
    p.d_k = pass.d_qkv.data() + qw;
    p.d_v = pass.d_qkv.data() + qw + kw;
    p.d_row = d_row.data();
    pass.d_sinks = DeviceBuffer<float>(rank.q_heads.size());
    pass.d_sinks.zero();
    if (weights.sinks) p.d_sinks = pass.d_sinks.data();
    flash_backward(p, stream);
    pass.d_q_norm = DeviceBuffer<float>(weights.q_norm ? weights.q_norm->size() : std::size_t(d));
    pass.d_k_norm = DeviceBuffer<float>(weights.k_norm ? weights.k_norm->size() : std::size_t(d));
    pass.d_q_norm.zero();
    pass.d_k_norm.zero();
    if (g.qk_norm_full_width()) {
      pass.unrotated = DeviceBuffer<float>(std::size_t(tokens * heads * d));
      pass.q_dots = DeviceBuffer<float>(std::size_t(tokens));
      pass.k_dots = DeviceBuffer<float>(std::size_t(tokens));
      qk_norm_full_width_dots(norm_params, type, d_q.data(), qw, pass.d_qkv.data(), pass.unrotated.data(),
                              pass.q_dots.data(), pass.k_dots.data(), pass.d_q_norm.data(), pass.d_k_norm.data(),
                              stream);
    } else {
      qk_norm_rope_backward(norm_params, type, d_q.data(), qw, pass.d_qkv.data(), pass.d_q_norm.data(),
                            pass.d_k_norm.data(), stream);
    }
    check_cuda(cudaStreamSynchronize(stream), "rank attention");  // before the temporaries are freed
  }

  // Phase C: the whole-width norm's backward from the all-reduced dots (first_replica: whether this rank
  // is the first of its KV head's replica group); then the projection gradients, dx_sum += the rank's dx
  // partial. Returns its partial parameter gradients.
  RankGradients finish_phase(RankPass<T>& pass, const DeviceBuffer<T>& x, const DeviceBuffer<float>& table,
                             bool first_replica, float* dx_sum) const {
    const RankPlan& rank = pass.rank;
    const RankWeights<T>& weights = pass.weights;
    const std::int64_t qw = rank.query_width, rows = rank.qkv_rows;
    if (g.qk_norm_full_width()) {
      qk_norm_full_width_backward(norm_rope(pass, table), type, pass.unrotated.data(), pass.q_dots.data(),
                                  pass.k_dots.data(), first_replica, pass.d_qkv.data(), stream);
    }
    DeviceBuffer<float> d_qkv_weight(std::size_t(rows * hidden));
    gemm.run(stream, type, rows, hidden, tokens, {pass.d_qkv.data(), rows, Transpose::yes},
             {x.data(), hidden, Transpose::no}, d_qkv_weight.data(), hidden, true);
    gemm.run(stream, type, tokens, hidden, rows, {pass.d_qkv.data(), rows, Transpose::no},
             {weights.qkv.data(), hidden, Transpose::no}, dx_sum, hidden, true, 1.0f, 1.0f);
    std::optional<DeviceBuffer<float>> d_bias;
    if (weights.qkv_bias) {
      d_bias.emplace(std::size_t(rows));
      column_sums(type, pass.d_qkv.data(), tokens, rows, rows, d_bias->data(), stream);
    }
    check_cuda(cudaStreamSynchronize(stream), "rank backward");

    RankGradients gradients;
    Parameters& partial = gradients.partial;
    // Back from the stacked fused layout to the shard's q/k/v_proj (and biases) by core's split_qkv.
    FusedQkv fused_gradient{.weight = download(d_qkv_weight, {rows, hidden})};
    if (d_bias) fused_gradient.bias = download(*d_bias, {rows});
    split_qkv(fused_gradient, plan, rank.rank, FusedQkvLayout::stacked, partial);
    partial.o_proj = download(pass.d_o_proj, {hidden, qw});
    if (weights.q_norm) {
      partial.q_norm = download(pass.d_q_norm, {std::int64_t(pass.d_q_norm.size())});
      partial.k_norm = download(pass.d_k_norm, {std::int64_t(pass.d_k_norm.size())});
    }
    if (weights.sinks) partial.sinks = download(pass.d_sinks, {std::int64_t(rank.q_heads.size())});
    gradients.d_qkv_weight = std::move(d_qkv_weight);
    gradients.d_qkv_bias = std::move(d_bias);
    gradients.d_q_norm = std::move(pass.d_q_norm);
    gradients.d_k_norm = std::move(pass.d_k_norm);
    return gradients;
  }

  // The decode schedule on one rank through a KV cache: decode_sum [batch, total, hidden] += its o_proj
  // partial for every decoded token. q_sum_squares / k_sum_squares: a whole-width norm's all-reduced sums
  // for every token of the layer, [batch * seq] float (null otherwise); a token's sum depends on its x
  // alone, so the forward's serve each decode call, as in the reference (reference.cpp: run_decode).
  void decode(const RankPlan& rank, const RankWeights<T>& weights, const float* q_sum_squares,
              const float* k_sum_squares, float* decode_sum) const {
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
      // Whole-width norm: the call's tokens' sums, gathered as x_step is: step_q_sums, step_k_sums
      // [batch * count] float.
      DeviceBuffer<float> step_q_sums, step_k_sums;
      if (q_sum_squares != nullptr) {
        step_q_sums = DeviceBuffer<float>(std::size_t(batch * count));
        step_k_sums = DeviceBuffer<float>(std::size_t(batch * count));
        for (const auto& [from, to] :
             {std::pair{q_sum_squares, &step_q_sums}, std::pair{k_sum_squares, &step_k_sums}}) {
          check_cuda(cudaMemcpy2DAsync(to->data(), count * sizeof(float), from + start, seq * sizeof(float),
                                       count * sizeof(float), batch, cudaMemcpyDeviceToDevice, stream),
                     "decode sums gather");
        }
      }
      DeviceBuffer<T> qkv = project(rank, weights, x.data(), batch * count);
      qk_norm_rope_forward(norm_rope(rank, weights, batch * count, table.data(), normalised.data(), inverse_rms.data(),
                                     step_q_sums.data(), step_k_sums.data()),
                           type, qkv.data(), stream);
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
      p.sinks = sinks_of(weights);
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
  int device = 0;
  cudaStream_t stream = nullptr;
  std::optional<Gemm> gemm;
  std::optional<Layer<T>> layer;
  DeviceBuffer<T> x, dout;
  DeviceBuffer<float> table, out_sum, dx_sum, decode_sum;
  std::optional<DeviceBuffer<float>> o_bias;

  DeviceState(const Case& test_case, const TpPlan& plan, Precision type, int device_index) : device(device_index) {
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

  // Makes this device current: the phases of its ranks run with it.
  void use() const { check_cuda(cudaSetDevice(device), "device"); }
};

// An all-reduce (sum) of one float buffer per rank, [count] each, in place: every rank's buffer ends
// holding the total. On the device of rank r's DeviceState, enqueued on its stream.
using AllReduce = std::function<void(const std::vector<float*>& buffers, std::size_t count)>;

// Every rank's forward, backward and decode, rank r on device_of_rank[r], into the devices' sums; returns
// the ranks' partial gradients. A per-head norm (or none) needs no all-reduce inside a rank's work: each
// rank runs phases A, B, C and its decoding before the next starts. A whole-width norm runs phase A on
// every rank, all-reduces the sums of squares, phase B on every rank, all-reduces the dots, then phase C
// and decoding on every rank. The K sums of a replica other than its group's first are zero (phase A),
// so a plain all-reduce over all ranks counts a replicated KV head once; the dots count every rank.
template <typename T>
std::vector<RankGradients> run_ranks(const Case& test_case, const TpPlan& plan,
                                     const std::vector<DeviceState<T>*>& device_of_rank, const AllReduce& all_reduce) {
  const bool decoding = test_case.inputs.decode.total() > 0;
  const auto make_pass = [&](int r) {
    device_of_rank[r]->use();
    const Parameters shard = plan.tp_size == 1 ? test_case.weights : shard_parameters(test_case.weights, plan, r);
    return std::make_unique<RankPass<T>>(shard, plan, r);
  };
  std::vector<RankGradients> gradients;
  if (!plan.geometry.qk_norm_full_width()) {
    for (int r = 0; r < plan.tp_size; ++r) {
      const auto pass = make_pass(r);
      DeviceState<T>& device = *device_of_rank[r];
      device.layer->project_phase(*pass, device.x, device.table, true);
      device.layer->attend_phase(*pass, device.dout, device.table, device.out_sum.data());
      gradients.push_back(device.layer->finish_phase(*pass, device.x, device.table, true, device.dx_sum.data()));
      if (decoding) device.layer->decode(pass->rank, pass->weights, nullptr, nullptr, device.decode_sum.data());
    }
    return gradients;
  }
  std::vector<std::unique_ptr<RankPass<T>>> passes;
  const auto each_rank = [&](auto&& phase) {
    for (int r = 0; r < plan.tp_size; ++r) {
      device_of_rank[r]->use();
      phase(r, *device_of_rank[r], *passes[r]);
    }
  };
  const auto buffers = [&](DeviceBuffer<float> RankPass<T>::*member) {
    std::vector<float*> result;
    for (const auto& pass : passes) result.push_back(((*pass).*member).data());
    return result;
  };
  const std::size_t tokens = std::size_t(device_of_rank[0]->layer->tokens);
  for (int r = 0; r < plan.tp_size; ++r) {
    passes.push_back(make_pass(r));
    DeviceState<T>& device = *device_of_rank[r];
    device.layer->project_phase(*passes[r], device.x, device.table, first_of_replica_group(plan, r));
  }
  all_reduce(buffers(&RankPass<T>::q_sum_squares), tokens);
  all_reduce(buffers(&RankPass<T>::k_sum_squares), tokens);
  each_rank([&](int, DeviceState<T>& device, RankPass<T>& pass) {
    device.layer->attend_phase(pass, device.dout, device.table, device.out_sum.data());
  });
  all_reduce(buffers(&RankPass<T>::q_dots), tokens);
  all_reduce(buffers(&RankPass<T>::k_dots), tokens);
  each_rank([&](int r, DeviceState<T>& device, RankPass<T>& pass) {
    gradients.push_back(device.layer->finish_phase(pass, device.x, device.table, first_of_replica_group(plan, r),
                                                   device.dx_sum.data()));
    if (decoding) {
      device.layer->decode(pass.rank, pass.weights, pass.q_sum_squares.data(), pass.k_sum_squares.data(),
                           device.decode_sum.data());
    }
  });
  return gradients;
}

// The single-device all-reduce: rank 0's buffer += ranks 1, 2, ... in rank order (float), then copied to
// every rank's buffer, as an NCCL all-reduce would leave them.
AllReduce sum_in_rank_order(cudaStream_t stream) {
  return [stream](const std::vector<float*>& buffers, std::size_t count) {
    const auto columns = std::int64_t(count);
    for (std::size_t r = 1; r < buffers.size(); ++r) {
      add_bias(Precision::fp32, buffers[0], 1, columns, columns, buffers[r], stream);  // one row: += buffer r
    }
    for (std::size_t r = 1; r < buffers.size(); ++r) {
      check_cuda(cudaMemcpyAsync(buffers[r], buffers[0], count * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                 "all-reduce copy");
    }
  };
}

// The NCCL path: rank r on GPU r, its sums all-reduced over the world (a whole-width norm's sums of
// squares and dots too, between the phases); replicated-KV gradients summed over each replica group and
// per-head q_norm / k_norm over the world on the devices (a whole-width norm's: q_norm owned, k_norm over
// the replica group, as k_proj), and reported as the ranks' gradients (so reference-tp's per-rank
// gradients check the communicators).
template <typename T>
std::vector<Parameters> run_ranks_on_their_devices(const Case& test_case, const TpPlan& plan, Precision type,
                                                   std::vector<std::unique_ptr<DeviceState<T>>>& devices,
                                                   std::vector<Parameters>& partials) {
  TpCommunicators communicators(plan);
  std::vector<DeviceState<T>*> device_of_rank;
  for (int r = 0; r < plan.tp_size; ++r) {
    devices.push_back(std::make_unique<DeviceState<T>>(test_case, plan, type, r));
    device_of_rank.push_back(devices.back().get());
  }
  std::vector<cudaStream_t> streams;
  for (const auto& device : devices) streams.push_back(device->stream);
  std::vector<RankGradients> gradients = run_ranks<T>(
      test_case, plan, device_of_rank,
      [&](const std::vector<float*>& buffers, std::size_t count) { communicators.world_sum(buffers, count, streams); });
  for (const RankGradients& rank : gradients) partials.push_back(rank.partial);
  const auto pointers = [&](auto member) {
    std::vector<float*> result;
    for (const auto& device : devices) result.push_back(((*device).*member).data());
    return result;
  };
  const std::int64_t hidden = test_case.geometry().hidden_size();
  const bool full_width = test_case.geometry().qk_norm_full_width();
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
  if (test_case.weights.q_norm && full_width) {  // q_norm owned by its rank; k_norm as k_proj
    communicators.replica_sum(k_norms, gradients[0].d_k_norm.size(), streams);
  } else if (test_case.weights.q_norm) {  // every rank's heads used the whole weight
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
      reduced[r].q_norm = download(gradients[r].d_q_norm, {std::int64_t(gradients[r].d_q_norm.size())});
      reduced[r].k_norm = download(gradients[r].d_k_norm, {std::int64_t(gradients[r].d_k_norm.size())});
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
  } else {  // every rank in turn on device 0: outputs, dx (and norm sums) summed there in rank order,
            // gradients on the host
    devices.push_back(std::make_unique<DeviceState<T>>(test_case, plan, type, 0));
    const std::vector<DeviceState<T>*> device_of_rank(std::size_t(plan.tp_size), devices[0].get());
    for (RankGradients& rank : run_ranks<T>(test_case, plan, device_of_rank, sum_in_rank_order(devices[0]->stream))) {
      partials.push_back(std::move(rank.partial));
    }
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
