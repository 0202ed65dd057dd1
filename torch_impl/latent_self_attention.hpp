// One tensor-parallel rank of multi-head latent attention (core/model/latent_attention.hpp) in LibTorch, as
// DeepSeek's and Megatron-Core's MLA modules are written: q through q_a_proj, q_a_layernorm and q_b_proj (or
// q_proj); the compressed [c_kv | k_pe] through kv_a_proj_with_mqa, kv_a_layernorm on c_kv, kv_b_proj split
// per head into k_nope and v; k_pe one head broadcast to all; RoPE on the last qk_rope_head_dim channels of
// q and on k_pe; q/k heads qk_head_dim wide and v heads v_head_dim wide through the attention, the context
// flattened to heads x v_head_dim before the row-parallel o_proj. Parameters are leaf tensors (the replicated
// down-projections and norms one copy per rank, as each rank holds them); autograd gives the gradients.
// Decoding caches the normed latent and RoPE(k_pe) (the compressed cache every MLA serving stack keeps) and
// re-expands K and V through kv_b_proj at each call.
//
// Layouts: x [batch, seq, hidden]; positions [batch, seq] int64; q, k [batch, heads, seq, qk_head_dim];
// v [batch, heads, seq, v_head_dim]; the cache: latent [batch, keys, kv_lora_rank], k_pe [batch, keys,
// qk_rope_head_dim]; the partial output [batch, seq, hidden].
#pragma once

#include <torch/torch.h>

#include "core/model/parameters.hpp"
#include "core/model/tp_plan.hpp"
#include "torch_impl/attention_steps.hpp"
#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

struct LatentCache {
  torch::Tensor latent;  // [batch, length, kv_lora_rank], normed; empty before the first call
  torch::Tensor k_pe;    // [batch, length, qk_rope_head_dim], rotated
  std::int64_t length = 0;
};

class LatentSelfAttention {
 public:
  LatentSelfAttention(const TpPlan& plan, int rank, const Parameters& shard, const TorchOptions& options);

  // The rank's partial output for x's tokens at key indices cache->length .. (0 without a cache).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& key_lengths,
                        LatentCache* cache = nullptr);

  // The gradients autograd left on the rank's parameters, HF shard layout (the replicated ones: this rank's
  // share, before any reduction), taken: torch's copies are freed (take_gradient).
  Parameters take_shard_gradients();

 private:
  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const;

  const TpPlan& plan_;
  LatentAttentionSpec latent_;
  torch::TensorOptions tensor_options_;
  std::int64_t num_heads_;  // local
  torch::Tensor q_proj_, q_a_proj_, q_a_layernorm_, q_b_proj_;  // q_proj without q_lora_rank, else the other three
  torch::Tensor kv_a_proj_, kv_a_layernorm_, kv_b_proj_, o_proj_;
  torch::Tensor sinks_;  // [local heads] sink logits, or undefined
  RotaryEmbedding rotary_;  // over the qk_rope_head_dim channels of q's heads and of k_pe
};

}  // namespace attncheck::torch_impl
