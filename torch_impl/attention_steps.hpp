// The steps both LibTorch attention layers (parallel_self_attention.hpp, latent_self_attention.hpp) take the
// same way: RoPE from golden/SCHEMA.md's float64 frequencies, the visible-keys mask, and the math path's
// attention (scores, softcap, mask, softmax with gpt-oss's sink column, probabilities @ values).
// Internal to attncheck_torch.
//
// Layouts: positions [batch, seq] int64; values to rotate [batch, seq, rotary_dim] or [batch, heads, seq,
// rotary_dim]; q [batch, heads, seq_q, qk width]; keys [batch, heads, seq_k, qk width] and values [batch, heads,
// seq_k, v width], one per query head; visible [batch, 1, seq_q, seq_k] bool; sinks [heads] or undefined.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "core/model/geometry.hpp"

namespace attncheck::torch_impl {

class RotaryEmbedding {
 public:
  RotaryEmbedding(const Geometry& geometry, const torch::TensorOptions& options);

  // Every channel of values' last dimension (rotary_dim of them) rotated by its token's position, pairs as
  // the geometry's rope_style says. Angles position x frequency in float64, then cos and sin (times the
  // scaling's attention factor, in float64) in the working type.
  torch::Tensor rotate(const torch::Tensor& values, const torch::Tensor& positions) const;

 private:
  const Geometry& geometry_;
  torch::Dtype dtype_;
  torch::Tensor inv_freq_;       // [rotary_dim / 2] float64, as SCHEMA.md (longrope: its short factors)
  torch::Tensor long_inv_freq_;  // longrope only: with its long factors; undefined otherwise
  double attention_factor_ = 1.0;  // the RoPE scaling's, on cos and sin (yarn, longrope)
};

// Which keys each query sees, [batch, 1, seq, past + seq] bool: a call's seq queries at key indices past ..
// (bottom-right alignment), keys below key_lengths [batch], causal and the window as the geometry says.
torch::Tensor visible_keys(const Geometry& geometry, std::int64_t batch, std::int64_t seq, std::int64_t past,
                           const torch::Tensor& key_lengths);

// The context [batch, heads, seq_q, v width] of the math path: a query that sees no key outputs 0.
torch::Tensor math_attention(const Geometry& geometry, const torch::Tensor& q, const torch::Tensor& keys,
                             const torch::Tensor& values, const torch::Tensor& visible, const torch::Tensor& sinks);

}  // namespace attncheck::torch_impl
