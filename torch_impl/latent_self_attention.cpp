#include "torch_impl/latent_self_attention.hpp"

#include "torch_impl/parallel_self_attention.hpp"

namespace attncheck::torch_impl {

namespace {

namespace F = torch::nn::functional;

torch::Tensor leaf(const Tensor& tensor, const torch::TensorOptions& options) {
  return to_torch(tensor, options).requires_grad_(true);
}


}  // namespace

LatentSelfAttention::LatentSelfAttention(const TpPlan& plan, int rank, const Parameters& shard,
                                         const TorchOptions& options)
    : plan_(plan),
      latent_(*plan.geometry.latent()),
      tensor_options_(
          torch::TensorOptions().dtype(dtype_of(options.precision)).device(options.cuda ? torch::kCUDA : torch::kCPU)),
      num_heads_(plan.ranks[rank].q_heads.size()),
      rotary_(plan.geometry, tensor_options_) {
  if (options.path != AttentionPath::math) throw TorchUnsupported("latent attention on the sdpa path (math only)");
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
  if (shard.sinks) sinks_ = leaf(*shard.sinks, tensor_options_);
}

torch::Tensor LatentSelfAttention::rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + latent_.latent_norm_eps) * weight;
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
      torch::cat({q_heads.narrow(-1, 0, nope), rotary_.rotate(q_heads.narrow(-1, nope, rope), positions)}, -1);
  // The compressed KV: the normed latent and the rotated k_pe, appended to the cache when decoding.
  const torch::Tensor kv_a = F::linear(x, kv_a_proj_);
  torch::Tensor latent = rms_norm(kv_a.narrow(-1, 0, lora), kv_a_layernorm_);
  torch::Tensor k_pe = rotary_.rotate(kv_a.narrow(-1, lora, rope), positions);
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
  const torch::Tensor attended = math_attention(g, q, k, v, visible_keys(g, batch, seq, past, key_lengths), sinks_);
  // The context flattened to heads x v_head_dim (not qk_head_dim, not hidden), then the row-parallel o_proj.
  const torch::Tensor context = attended.transpose(1, 2).reshape({batch, seq, heads * v_dim});
  return F::linear(context, o_proj_);
}

Parameters LatentSelfAttention::take_shard_gradients() {
  Parameters shard;
  shard.latent = true;
  if (q_proj_.defined()) {
    shard.q_proj = take_gradient(q_proj_);
  } else {
    shard.q_a_proj = take_gradient(q_a_proj_);
    shard.q_a_layernorm = take_gradient(q_a_layernorm_);
    shard.q_b_proj = take_gradient(q_b_proj_);
  }
  shard.kv_a_proj_with_mqa = take_gradient(kv_a_proj_);
  shard.kv_a_layernorm = take_gradient(kv_a_layernorm_);
  shard.kv_b_proj = take_gradient(kv_b_proj_);
  shard.o_proj = take_gradient(o_proj_);
  if (sinks_.defined()) shard.sinks = take_gradient(sinks_);
  return shard;
}

}  // namespace attncheck::torch_impl
