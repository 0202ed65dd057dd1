// One tensor-parallel rank of attention written the way GPT-NeoX's ParallelSelfAttention would be with
// an explicit head_dim: query_hidden_size = local query heads x head_dim and kv_hidden_size = local KV
// heads x head_dim are tracked apart from hidden_size; a fused ColumnParallel QKV weight
// [query_hidden_size + 2 kv_hidden_size, hidden] in the per-rank stacked [Q | K | V] layout
// (core/tp/fused_qkv.hpp; fused by core/tp/fused_qkv_convert.hpp); the context flattened to query_hidden_size, not
// hidden_size; a RowParallel dense (o_proj) [hidden, query_hidden_size] whose partial outputs the caller sums (and adds
// its bias once). QK-norm, RoPE (any even rotary_dim, both pairings), scale, softcap, causal / window / padding masks
// and a KV cache as the reference has them. Parameters are leaf tensors; autograd gives the gradients.
//
// Layouts: x [batch, seq, hidden]; positions [batch, seq] int64; q [batch, heads, seq, head_dim];
// k, v and the cache [batch, kv_heads, keys, head_dim]; the partial output [batch, seq, hidden].
#pragma once

#include <torch/torch.h>

#include <optional>

#include "core/model/parameters.hpp"
#include "core/model/tp_plan.hpp"
#include "torch_impl/attention_steps.hpp"
#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

// A whole-width QK-norm's per-token sums of squares over q's and k's channels: one rank's part, or, once
// the caller has all-reduced the parts (torch_layer.cpp), the whole width's. [batch, seq] each.
struct NormSums {
  torch::Tensor q;
  torch::Tensor k;
};

struct RankCache {
  torch::Tensor keys;  // [batch, local kv heads, length, head_dim], empty before the first call
  torch::Tensor values;
  std::int64_t length = 0;
};

class ParallelSelfAttention {
 public:
  // shard: the rank's HF-layout shard (core/tp/tp_shard.hpp); it is fused here.
  ParallelSelfAttention(const TpPlan& plan, int rank, const Parameters& shard, const TorchOptions& options);

  // The rank's partial output for x's tokens, which sit at key indices cache->length .. (0 without a
  // cache) and attend to everything before them (bottom-right causal alignment). key_lengths [batch].
  // all_reduced: required with a whole-width QK-norm (rms-full-width), the sums over every rank.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& key_lengths,
                        RankCache* cache = nullptr, const NormSums* all_reduced = nullptr);

  // This rank's part of a whole-width norm's sums of squares for x's tokens (differentiable: autograd
  // carries the all-reduce's backward to every rank's projection).
  NormSums partial_sum_squares(const torch::Tensor& x) const;

  // The gradients autograd left on the parameters, in the rank's HF shard layout (o_bias excluded: the
  // caller owns it), taken: torch's copies are freed (take_gradient).
  Parameters take_shard_gradients();

 private:
  torch::Tensor project(const torch::Tensor& x, const torch::Tensor& positions, torch::Tensor& k, torch::Tensor& v,
                        const NormSums* all_reduced);
  torch::Tensor normalise(const torch::Tensor& heads, const torch::Tensor& weight) const;
  torch::Tensor rotate(const torch::Tensor& heads, const torch::Tensor& positions) const;
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& visible) const;

  const TpPlan& plan_;
  int rank_;
  TorchOptions options_;
  torch::TensorOptions tensor_options_;
  std::int64_t num_heads_;     // local query heads
  std::int64_t num_kv_heads_;  // local KV heads
  std::int64_t head_dim_;
  std::int64_t query_hidden_size_;  // num_heads_ * head_dim_
  std::int64_t kv_hidden_size_;     // num_kv_heads_ * head_dim_
  torch::Tensor qkv_weight_;        // [query_hidden_size + 2 kv_hidden_size, hidden], stacked [Q | K | V]
  torch::Tensor qkv_bias_;          // [query_hidden_size + 2 kv_hidden_size] or undefined
  torch::Tensor dense_weight_;      // [hidden, query_hidden_size]
  torch::Tensor q_norm_, k_norm_;   // [head_dim], whole-width: [query_hidden_size] / [kv_hidden_size]; or undefined
  torch::Tensor sinks_;             // [local query heads] sink logits, or undefined
  RotaryEmbedding rotary_;
};

torch::Dtype dtype_of(Precision precision);

// A core Tensor (float64) as a torch tensor of the given options, and back.
torch::Tensor to_torch(const Tensor& tensor, const torch::TensorOptions& options);
Tensor from_torch(const torch::Tensor& tensor);
// A leaf's gradient on the host (zeros where autograd left none), torch's copy freed at once: a layer's
// gradients are then never resident twice over while they are read out (docs/ARCHITECTURE.md, "Memory").
Tensor take_gradient(torch::Tensor& parameter);

}  // namespace attncheck::torch_impl
