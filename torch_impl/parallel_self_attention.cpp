#include "torch_impl/parallel_self_attention.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/tp/fused_qkv_convert.hpp"
#include "torch_impl/sdpa_backend_guard.hpp"

namespace attncheck::torch_impl {

torch::Dtype dtype_of(Precision precision) {
  switch (precision) {
    case Precision::fp64:
      return torch::kFloat64;
    case Precision::fp32:
      return torch::kFloat32;
    case Precision::bf16:
      return torch::kBFloat16;
    case Precision::fp16:
      return torch::kFloat16;
  }
  return torch::kFloat64;
}

namespace {

std::vector<std::int64_t> sizes_of(const Shape& shape) {
  return {shape.begin(), shape.end()};
}

// `rows` rows of a row-major float64 host buffer [*, hidden] (bias: elements of a vector) from `first_row`, as a
// torch view (no copy): what copy_ reads a weight from or writes a gradient into.
torch::Tensor host_rows(const double* data, std::int64_t first_row, std::int64_t rows, std::int64_t hidden, bool bias) {
  double* first = const_cast<double*>(data) + first_row * (bias ? 1 : hidden);
  return bias ? torch::from_blob(first, {rows}, torch::kFloat64) : torch::from_blob(first, {rows, hidden}, torch::kFloat64);
}

// The rank's fused QKV weight (bias: its fused bias) [qkv_rows(, hidden)] in `options`, copied row segment by
// segment straight from the shard's q/k/v projections: one copy, no fused float64 intermediate (for a 151M-
// parameter layer that intermediate was 0.9 GB). copy_ converts to the dtype as to() does (rounded to nearest).
torch::Tensor fused_to_torch(const Parameters& shard, const std::vector<FusedRowCopy>& copies, std::int64_t qkv_rows,
                             std::int64_t hidden, bool bias, const torch::TensorOptions& options) {
  torch::Tensor fused = torch::empty(bias ? std::vector<std::int64_t>{qkv_rows} : std::vector<std::int64_t>{qkv_rows, hidden},
                                     options);
  for (const FusedRowCopy& copy : copies) {
    const Tensor& source = bias ? *shard_bias(shard, copy.projection) : shard_projection(shard, copy.projection);
    fused.narrow(0, copy.fused_row, copy.rows).copy_(host_rows(source.data(), copy.shard_row, copy.rows, hidden, bias));
  }
  return fused;
}

// The inverse for a fused gradient: its rows written straight into the shard's q/k/v tensors (float64, converted
// by copy_), which are allocated here; zeros where autograd left none. The caller frees torch's copy.
void split_from_torch(const torch::Tensor& fused, const std::vector<FusedRowCopy>& copies, const RankPlan& rank,
                      std::int64_t hidden, bool bias, Parameters& shard) {
  const auto shape = [&](std::int64_t width) { return bias ? Shape{width} : Shape{width, hidden}; };
  for (const Projection projection : {Projection::q, Projection::k, Projection::v}) {
    Tensor zeros(shape(projection == Projection::q ? rank.query_width : rank.kv_width));
    if (bias) {
      shard_bias(shard, projection) = std::move(zeros);
    } else {
      shard_projection(shard, projection) = std::move(zeros);
    }
  }
  if (!fused.defined()) return;
  for (const FusedRowCopy& copy : copies) {
    Tensor& target = bias ? *shard_bias(shard, copy.projection) : shard_projection(shard, copy.projection);
    host_rows(target.data(), copy.shard_row, copy.rows, hidden, bias).copy_(fused.narrow(0, copy.fused_row, copy.rows));
  }
}

}  // namespace

torch::Tensor to_torch(const Tensor& tensor, const torch::TensorOptions& options) {
  const torch::Tensor view =
      torch::from_blob(const_cast<double*>(tensor.data()), sizes_of(tensor.shape), torch::kFloat64);
  return view.to(options, /*non_blocking=*/false, /*copy=*/true);
}

Tensor from_torch(const torch::Tensor& tensor) {
  const torch::Tensor host = tensor.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const double* values = host.data_ptr<double>();  // copied as it stands, not into a zero-filled vector
  return Tensor(Shape(host.sizes().begin(), host.sizes().end()), std::vector<double>(values, values + host.numel()));
}

Tensor take_gradient(torch::Tensor& parameter) {
  Tensor gradient = from_torch(parameter.grad().defined() ? parameter.grad() : torch::zeros_like(parameter));
  parameter.mutable_grad().reset();
  return gradient;
}

ParallelSelfAttention::ParallelSelfAttention(const TpPlan& plan, int rank, const Parameters& shard,
                                             const TorchOptions& options)
    : plan_(plan),
      rank_(rank),
      options_(options),
      tensor_options_(
          torch::TensorOptions().dtype(dtype_of(options.precision)).device(options.cuda ? torch::kCUDA : torch::kCPU)),
      num_heads_(plan.ranks[rank].q_heads.size()),
      num_kv_heads_(plan.ranks[rank].kv_heads.size()),
      head_dim_(plan.geometry.head_dim()),
      query_hidden_size_(num_heads_ * head_dim_),
      kv_hidden_size_(num_kv_heads_ * head_dim_),
      rotary_(plan.geometry, tensor_options_) {
  const std::vector<FusedRowCopy> copies = fused_row_copies(plan, rank, FusedQkvLayout::stacked);
  const std::int64_t qkv_rows = plan.ranks[rank].qkv_rows, hidden = plan.geometry.hidden_size();
  qkv_weight_ = fused_to_torch(shard, copies, qkv_rows, hidden, /*bias=*/false, tensor_options_).requires_grad_(true);
  if (shard.q_bias) {
    qkv_bias_ = fused_to_torch(shard, copies, qkv_rows, hidden, /*bias=*/true, tensor_options_).requires_grad_(true);
  }
  dense_weight_ = to_torch(shard.o_proj, tensor_options_).requires_grad_(true);
  if (shard.q_norm) {
    q_norm_ = to_torch(*shard.q_norm, tensor_options_).requires_grad_(true);
    k_norm_ = to_torch(*shard.k_norm, tensor_options_).requires_grad_(true);
  }
  if (shard.sinks) sinks_ = to_torch(*shard.sinks, tensor_options_).requires_grad_(true);
}

torch::Tensor ParallelSelfAttention::normalise(const torch::Tensor& heads, const torch::Tensor& weight) const {
  const torch::Tensor inverse_rms =
      torch::rsqrt(heads.pow(2).mean(-1, /*keepdim=*/true) + plan_.geometry.qk_norm_eps());
  const torch::Tensor factor = plan_.geometry.qk_norm() == QkNorm::rms_one_plus ? weight + 1.0 : weight;
  return heads * inverse_rms * factor;
}

torch::Tensor ParallelSelfAttention::rotate(const torch::Tensor& heads, const torch::Tensor& positions) const {
  const std::int64_t rotary_dim = plan_.geometry.rotary_dim();
  if (rotary_dim == 0) return heads;
  // The first rotary_dim channels of each head rotate; the rest pass.
  return torch::cat({rotary_.rotate(heads.narrow(-1, 0, rotary_dim), positions),
                     heads.narrow(-1, rotary_dim, head_dim_ - rotary_dim)},
                    -1);
}

NormSums ParallelSelfAttention::partial_sum_squares(const torch::Tensor& x) const {
  const torch::Tensor qkv = torch::nn::functional::linear(x, qkv_weight_, qkv_bias_);
  const std::vector<torch::Tensor> parts =
      qkv.split_with_sizes({query_hidden_size_, kv_hidden_size_, kv_hidden_size_}, -1);
  return {.q = parts[0].pow(2).sum(-1), .k = parts[1].pow(2).sum(-1)};
}

torch::Tensor ParallelSelfAttention::project(const torch::Tensor& x, const torch::Tensor& positions, torch::Tensor& k,
                                             torch::Tensor& v, const NormSums* all_reduced) {
  const Geometry& g = plan_.geometry;
  const std::int64_t batch = x.size(0), seq = x.size(1);
  // ColumnParallel fused QKV, split [Q | K | V] into this rank's heads.
  const torch::Tensor qkv = torch::nn::functional::linear(x, qkv_weight_, qkv_bias_);
  std::vector<torch::Tensor> parts = qkv.split_with_sizes({query_hidden_size_, kv_hidden_size_, kv_hidden_size_}, -1);
  if (g.qk_norm_full_width()) {
    // OLMo-2's norm over the whole projection width, from the all-reduced sums: [batch, seq, 1] each.
    if (all_reduced == nullptr) throw std::logic_error("a whole-width QK-norm needs the all-reduced sums of squares");
    const auto normalise_width = [&](const torch::Tensor& channels, const torch::Tensor& sums, std::int64_t width,
                                     const torch::Tensor& weight) {
      return channels * torch::rsqrt(sums.unsqueeze(-1) / double(width) + g.qk_norm_eps()) * weight;
    };
    parts[0] = normalise_width(parts[0], all_reduced->q, g.query_width(), q_norm_);
    parts[1] = normalise_width(parts[1], all_reduced->k, g.kv_width(), k_norm_);
  }
  torch::Tensor q = parts[0].view({batch, seq, num_heads_, head_dim_}).transpose(1, 2);
  k = parts[1].view({batch, seq, num_kv_heads_, head_dim_}).transpose(1, 2);
  v = parts[2].view({batch, seq, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm_.defined() && !g.qk_norm_full_width()) {
    q = normalise(q, q_norm_);
    k = normalise(k, k_norm_);
  }
  k = rotate(k, positions);
  return rotate(q, positions);
}

torch::Tensor ParallelSelfAttention::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& visible) const {
  const Geometry& g = plan_.geometry;
  const torch::Tensor has_key = visible.any(-1, /*keepdim=*/true);  // [batch, 1, seq_q, 1]
  if (options_.path == AttentionPath::sdpa) {
    if (g.softcap()) throw TorchUnsupported("softcap: scaled_dot_product_attention has none");
    if (sinks_.defined()) throw TorchUnsupported("attention sinks: scaled_dot_product_attention has none");
    if (!has_key.all().item<bool>()) {
      throw TorchUnsupported("a query that sees no key: scaled_dot_product_attention leaves that row undefined");
    }
    const SdpaBackend chosen = options_.cuda ? options_.backend : SdpaBackend::any;
    const SdpaBackendGuard backend(chosen);
    // The mask as a framework passes it: none when every key is visible, is_causal when the mask is exactly the
    // square causal one, an explicit boolean mask only otherwise (padding, a window, a KV cache). The flash
    // backend takes no explicit mask: passed one always, it declined every case (first H200 run, 2026-12-04).
    const std::int64_t seq_q = q.size(2), seq_k = k.size(2);
    std::optional<torch::Tensor> mask = visible;
    bool is_causal = false;
    if (visible.all().item<bool>()) {
      mask.reset();
    } else if (const auto index = torch::TensorOptions().dtype(torch::kInt64).device(visible.device());
               seq_q == seq_k && visible.equal(torch::arange(seq_k, index)
                                                   .view({1, seq_k})
                                                   .le(torch::arange(seq_q, index).view({seq_q, 1}))
                                                   .expand(visible.sizes()))) {
      mask.reset();
      is_causal = true;
    }
    // The memory-efficient backend has no grouped-query form: KV heads repeated for their groups, as frameworks
    // did before enable_gqa (autograd sums the repeats' gradients back).
    const bool repeat_kv = chosen == SdpaBackend::efficient && num_heads_ != num_kv_heads_;
    const torch::Tensor keys = repeat_kv ? k.repeat_interleave(num_heads_ / num_kv_heads_, 1) : k;
    const torch::Tensor values = repeat_kv ? v.repeat_interleave(num_heads_ / num_kv_heads_, 1) : v;
    try {
      return at::scaled_dot_product_attention(q, keys, values, mask, /*dropout_p=*/0.0, is_causal, g.scale(),
                                              /*enable_gqa=*/!repeat_kv);
    } catch (const c10::Error& error) {
      // A backend that refuses the inputs (head_dim over its limit, a mask it cannot take, the type) is
      // unsupported for this case: "No available kernel" is torch's message for that.
      if (options_.backend != SdpaBackend::any) throw TorchUnsupported(error.what_without_backtrace());
      throw;
    }
  }
  // math: KV heads repeated for their groups (query head h reads KV head h / group).
  const std::int64_t group = num_heads_ / num_kv_heads_;
  return math_attention(g, q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), visible, sinks_);
}

torch::Tensor ParallelSelfAttention::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                             const torch::Tensor& key_lengths, RankCache* cache,
                                             const NormSums* all_reduced) {
  const Geometry& g = plan_.geometry;
  const std::int64_t batch = x.size(0), seq = x.size(1);
  const std::int64_t past = cache ? cache->length : 0;
  torch::Tensor k, v;
  const torch::Tensor q = project(x, positions, k, v, all_reduced);
  if (cache) {
    if (cache->length > 0) {
      k = torch::cat({cache->keys, k}, 2);
      v = torch::cat({cache->values, v}, 2);
    }
    cache->keys = k;
    cache->values = v;
    cache->length += seq;
  }
  const torch::Tensor visible = visible_keys(g, batch, seq, past, key_lengths);
  // The context flattened to query_hidden_size (not hidden_size), then RowParallel dense.
  const torch::Tensor context = attend(q, k, v, visible).transpose(1, 2).reshape({batch, seq, query_hidden_size_});
  return torch::nn::functional::linear(context, dense_weight_);
}

Parameters ParallelSelfAttention::take_shard_gradients() {
  const auto gradient = [](torch::Tensor& parameter) { return take_gradient(parameter); };
  const std::vector<FusedRowCopy> copies = fused_row_copies(plan_, rank_, FusedQkvLayout::stacked);
  const std::int64_t hidden = plan_.geometry.hidden_size();
  Parameters shard;
  split_from_torch(qkv_weight_.grad(), copies, plan_.ranks[rank_], hidden, /*bias=*/false, shard);
  qkv_weight_.mutable_grad().reset();
  if (qkv_bias_.defined()) {
    split_from_torch(qkv_bias_.grad(), copies, plan_.ranks[rank_], hidden, /*bias=*/true, shard);
    qkv_bias_.mutable_grad().reset();
  }
  shard.o_proj = gradient(dense_weight_);
  if (q_norm_.defined()) {
    shard.q_norm = gradient(q_norm_);
    shard.k_norm = gradient(k_norm_);
  }
  if (sinks_.defined()) shard.sinks = gradient(sinks_);
  return shard;
}

}  // namespace attncheck::torch_impl
