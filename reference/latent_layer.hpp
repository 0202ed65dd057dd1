// One TP rank's share of a multi-head latent attention layer (core/model/latent_attention.hpp), forward,
// backward and KV-cache decoding in both forms. The unsharded reference is the one-rank case.
//
// A rank holds its query heads' rows of q_b_proj (or q_proj) and kv_b_proj and its o_proj columns, and the
// down-projections and latent norms whole (core/tp/tp_shard.hpp), so every rank computes the same latents.
// Buffers are row-major over tokens, batch-major (token t = b * seq + s). Per rank, heads = its query heads:
//   c_q, c_q_input          [tokens, q_lora_rank]                 after / before q_a_layernorm (with q_lora_rank)
//   c_kv, c_kv_input        [tokens, kv_lora_rank]                after / before kv_a_layernorm
//   k_pe                    [tokens, qk_rope_head_dim]            after RoPE, shared by every head
//   q, k                    [tokens, heads * qk_head_dim]         head h: [nope part, RoPE part]
//   v                       [tokens, heads * v_head_dim]
//   context                 [tokens, heads * v_head_dim]
//   log_sum_exp             [batch * heads, seq]
//   partial_out, d_out, dx  [tokens, hidden_size]
#pragma once

#include <cstdint>
#include <span>

#include "core/model/geometry.hpp"
#include "core/model/parameters.hpp"
#include "reference/eigen_types.hpp"
#include "reference/kv_cache.hpp"
#include "reference/rank_layer.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {

struct LatentProjected {
  RowMatrix c_q, c_q_input, c_q_inverse_rms;     // empty without q_lora_rank; inverse_rms [tokens, 1]
  RowMatrix c_kv, c_kv_input, c_kv_inverse_rms;  // inverse_rms [tokens, 1]
  RowMatrix k_pe;
  RowMatrix q, k, v;
};

// The latents, then q of every head of the rank (RoPE applied) and, with expand, k and v (the absorbed
// decode form never decompresses them).
LatentProjected latent_project(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                               const TokenBlock& tokens, bool expand = true);

struct LatentForward {
  LatentProjected projected;
  RowMatrix context;
  RowMatrix log_sum_exp;
  RowMatrix partial_out;  // context @ o_proj_shard^T
};

// Self-attention over the block (seq_q = seq_k = tokens.seq) in the expanded form.
LatentForward latent_rank_forward(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                                  const TokenBlock& tokens, std::span<const std::int64_t> key_lengths);

struct LatentBackward {
  Parameters gradients;  // the rank's partial gradients, shard layout (replicated tensors: its heads' share)
  RowMatrix dx;          // the rank's contribution to d(x)
};

LatentBackward latent_rank_backward(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                                    const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                                    const LatentForward& forward, const ConstMatrixMap& d_out);

class LatentCache {
 public:
  LatentCache(const Geometry& geometry, LatentDecodeForm form, std::int64_t batch, std::int64_t heads,
              std::int64_t max_seq);
  LatentDecodeForm form() const { return form_; }
  KvCache& cache() { return cache_; }

 private:
  LatentDecodeForm form_;
  KvCache cache_;  // expanded: heads KV heads; absorbed: one
};

// Runs tokens.seq new tokens of every batch row through one rank at key indices cache length ..: appends
// to the cache, attends over all of it, returns the rank's o_proj partial [batch * count, hidden_size].
RowMatrix latent_decode_call(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                             const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                             LatentCache& cache);

}  // namespace attncheck::reference
