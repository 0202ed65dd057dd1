#include "torch_impl/latent_self_attention.hpp"

#include <limits>

#include "core/model/rope_frequencies.hpp"
#include "torch_impl/parallel_self_attention.hpp"

namespace attncheck::torch_impl {

namespace {

namespace F = torch::nn::functional;

torch::Tensor leaf(const Tensor& tensor, const torch::TensorOptions& options) {
  return to_torch(tensor, options).requires_grad_(true);
}

Tensor gradient_of(const torch::Tensor& parameter) {
  return from_torch(parameter.grad().defined() ? parameter.grad() : torch::zeros_like(parameter));
}

}  // namespace

LatentSelfAttention::LatentSelfAttention(const TpPlan& plan, int rank, const Parameters& shard,
                                         const TorchOptions& options)
    : plan_(plan),
      latent_(*plan.geometry.latent()),
      tensor_options_(
          torch::TensorOptions().dtype(dtype_of(options.precision)).device(options.cuda ? torch::kCUDA : torch::kCPU)),
      num_heads_(plan.ranks[rank].q_heads.size()) {
  if (options.precision != Precision::fp64) {
    throw TorchUnsupported("latent attention below fp64: the yardstick does not model it yet, so no tolerance exists");
  }
  if (options.path != AttentionPath::math) throw TorchUnsupported("latent attention on the sdpa path (math only)");
  if (shard.sinks) throw TorchUnsupported("attention sinks in a latent-attention layer");
  if (shard.q_a_proj) {
    q_a_proj_ = leaf(*shard.q_a_proj, tensor_options_);
    q_a_layernorm_ = leaf(*shard.q_a_layernorm, tensor_options_);
    q_b_proj_ = leaf(*shard.q_b_proj, tensor_options_);
  } else {
    q_proj_ = leaf(shard.q_proj, tensor_options_);
  }
  kv_a_proj_ = leaf(*shard.kv_a_proj_with_mqa, tensor_options_);
  kv_a_layernorm_ = leaf(*shard.kv_a_layernorm, tensor_options_);
  kv_b_proj_ = leaf(*shard.kv_b_proj, tensor_options_);
  o_proj_ = leaf(shard.o_proj, tensor_options_);
  // The frequencies in float64 exactly as golden/SCHEMA.md (core/model/rope_frequencies.hpp), over the RoPE part.
  const RopeFrequencies frequencies = rope_frequencies(plan.geometry, 0);
  inv_freq_ = torch::tensor(frequencies.inv_freq, torch::kFloat64).to(tensor_options_.device());
  attention_factor_ = frequencies.attention_factor;
}

torch::Tensor LatentSelfAttention::rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + latent_.latent_norm_eps) * weight;
}

torch::Tensor LatentSelfAttention::rotate(const torch::Tensor& values, const torch::Tensor& positions) const {
  // values [batch, (heads,) seq, rope]; positions [batch, seq]. Angles in float64, cos/sin in the working type.
  const std::int64_t pairs = latent_.qk_rope_head_dim / 2;
  if (pairs == 0) return values;
  torch::Tensor angles = positions.to(torch::kFloat64).unsqueeze(-1) * inv_freq_;  // [batch, seq, pairs]
  if (values.dim() == 4) angles = angles.unsqueeze(1);
  const torch::Tensor cos = (angles.cos() * attention_factor_).to(tensor_options_.dtype());
  const torch::Tensor sin = (angles.sin() * attention_factor_).to(tensor_options_.dtype());
  if (plan_.geometry.rope_style() == RopeStyle::half_split) {
    const torch::Tensor a = values.narrow(-1, 0, pairs), b = values.narrow(-1, pairs, pairs);
    return torch::cat({a * cos - b * sin, b * cos + a * sin}, -1);
  }
  const torch::Tensor channel_pairs = values.unflatten(-1, {pairs, 2});
  const torch::Tensor a = channel_pairs.select(-1, 0), b = channel_pairs.select(-1, 1);
  return torch::stack({a * cos - b * sin, b * cos + a * sin}, -1).flatten(-2);
}

torch::Tensor LatentSelfAttention::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                           const torch::Tensor& key_lengths, LatentCache* cache) {
  const Geometry& g = plan_.geometry;
  const std::int64_t batch = x.size(0), seq = x.size(1), heads = num_heads_;
  const std::int64_t nope = latent_.qk_nope_head_dim, rope = latent_.qk_rope_head_dim, v_dim = latent_.v_head_dim;
  const std::int64_t lora = latent_.kv_lora_rank, qk = latent_.qk_head_dim();
  // q [batch, heads, seq, qk]: [no-RoPE part, RoPE part], the RoPE part rotated.
  const torch::Tensor q_flat = q_proj_.defined() ? F::linear(x, q_proj_)
                                                 : F::linear(rms_norm(F::linear(x, q_a_proj_), q_a_layernorm_), q_b_proj_);
  const torch::Tensor q_heads = q_flat.view({batch, seq, heads, qk}).transpose(1, 2);
  const torch::Tensor q =
      torch::cat({q_heads.narrow(-1, 0, nope), rotate(q_heads.narrow(-1, nope, rope), positions)}, -1);
  // The compressed KV: the normed latent and the rotated k_pe, appended to the cache when decoding.
  const torch::Tensor kv_a = F::linear(x, kv_a_proj_);
  torch::Tensor latent = rms_norm(kv_a.narrow(-1, 0, lora), kv_a_layernorm_);
  torch::Tensor k_pe = rotate(kv_a.narrow(-1, lora, rope), positions);
  const std::int64_t past = cache ? cache->length : 0;
  if (cache) {
    if (cache->length > 0) {
      latent = torch::cat({cache->latent, latent}, 1);
      k_pe = torch::cat({cache->k_pe, k_pe}, 1);
    }
    cache->latent = latent;
    cache->k_pe = k_pe;
    cache->length += seq;
  }
  const std::int64_t keys = past + seq;
  // Expanded per head: kv_b_proj gives head h's [k_nope, v]; k = [k_nope, k_pe] with one k_pe for all heads.
  const torch::Tensor kv = F::linear(latent, kv_b_proj_).view({batch, keys, heads, nope + v_dim}).transpose(1, 2);
  const torch::Tensor k = torch::cat({kv.narrow(-1, 0, nope), k_pe.unsqueeze(1).expand({batch, heads, keys, rope})}, -1);
  const torch::Tensor v = kv.narrow(-1, nope, v_dim);
  const torch::Tensor visible = visible_keys(g, batch, seq, past, key_lengths);
  const torch::Tensor has_key = visible.any(-1, /*keepdim=*/true);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * g.scale();
  if (g.softcap()) scores = torch::tanh(scores / *g.softcap()) * *g.softcap();
  scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity());
  scores = torch::where(has_key, scores, torch::zeros_like(scores));  // a query without keys: finite, then 0
  const torch::Tensor probabilities = torch::where(has_key, torch::softmax(scores, -1), torch::zeros_like(scores));
  // The context flattened to heads x v_head_dim (not qk_head_dim, not hidden), then the row-parallel o_proj.
  const torch::Tensor context = torch::matmul(probabilities, v).transpose(1, 2).reshape({batch, seq, heads * v_dim});
  return F::linear(context, o_proj_);
}

Parameters LatentSelfAttention::shard_gradients() const {
  Parameters shard;
  shard.latent = true;
  if (q_proj_.defined()) {
    shard.q_proj = gradient_of(q_proj_);
  } else {
    shard.q_a_proj = gradient_of(q_a_proj_);
    shard.q_a_layernorm = gradient_of(q_a_layernorm_);
    shard.q_b_proj = gradient_of(q_b_proj_);
  }
  shard.kv_a_proj_with_mqa = gradient_of(kv_a_proj_);
  shard.kv_a_layernorm = gradient_of(kv_a_layernorm_);
  shard.kv_b_proj = gradient_of(kv_b_proj_);
  shard.o_proj = gradient_of(o_proj_);
  return shard;
}

}  // namespace attncheck::torch_impl
