// A second fp64 implementation of multi-head latent attention (core/model/latent_attention.hpp), written
// plainly for the mutant catalog as naive_layer.hpp is for the plain layer: per token block the projections
// and latent norms, one (batch row, head) at a time with dense [seq_q, seq_k] scores, and a hand-written
// backward. Each step where real MLA implementations have gone wrong is a virtual function, correct here; a
// mutant overrides one (latent_mutants.cpp), so its bug reaches forward, backward and decoding alike. The
// oracle (reference/latent_layer.hpp) carries no mutant's branch; naive_latent_layer_test holds this layer,
// nothing overridden, to reference-tp in both decode forms.
//
// It runs the case's TP plan rank by rank on shards (core/tp/tp_shard.hpp: q_b_proj / kv_b_proj rows and
// o_proj columns of the rank's heads, the down-projections and latent norms whole); partial outputs summed
// in rank order, rank gradients reduced by reduce_gradients() and gathered into the full ones.
//
// Buffers, row-major, token t = b * seq + s of the call's rows; H = the rank's heads, Q = qk_head_dim,
// N = qk_nope_head_dim, R = qk_rope_head_dim, V = v_head_dim, L = kv_lora_rank:
//   x, dx, partial_out               [tokens, hidden_size]
//   q, k (and their gradients)       [tokens, H * Q]   head h at columns h * Q: [N no-RoPE, R RoPE] channels
//   v, context                       [tokens, H * V]
//   o_proj input                     [tokens, H * V]   columns from context by o_proj_input_columns()
//   latent, latent input             [tokens, L]       after / before kv_a_layernorm
//   k_pe                             [tokens, R]       one for every head
//   absorbed cache (decode)          keys [cached, L + R] = [latent, RoPE(k_pe)], values [cached, L]
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/case.hpp"
#include "core/model/result.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::mutants {

class NaiveLatentLayer {
 public:
  virtual ~NaiveLatentLayer() = default;

  // Forward, backward of sum(out * dout), each rank's reduced gradients, and the decode schedule.
  // Unsupported (impl) for a plain layer or attention sinks.
  Result run(const Case& test_case) const;

 protected:
  // scores = score_scale * q . k: the geometry's (qk_head_dim^-0.5, times yarn's mscale^2).
  virtual double score_scale(const Geometry& geometry) const;
  // The first channel of a q/k head RoPE rotates (qk_rope_head_dim of them): qk_nope_head_dim, the last ones.
  virtual std::int64_t rope_first_channel(const LatentAttentionSpec& latent) const;
  // For each o_proj input column j of a rank with `heads` heads, the context column it reads, or -1 for a
  // zero: the identity (head h's V columns in order).
  virtual std::vector<std::int64_t> o_proj_input_columns(const LatentAttentionSpec& latent, std::int64_t heads) const;
  // Where kv_a_proj_with_mqa's output puts the shared k_pe: after the latent (false, DeepSeek's layout) or
  // before it.
  virtual bool k_pe_rows_first() const;
  // Decoding in the absorbed form (the cache holds the latent and RoPE(k_pe)) instead of the expanded one.
  virtual bool decode_absorbed() const;
  // Absorbed form: what the cache keeps as the latent, kv_a_layernorm's output (true) or its input.
  virtual bool absorbed_cache_normed() const;
  // Absorbed form: k_pe rotated with its own token's position when cached (true), or cached unrotated and
  // rotated with the position of the call's last query each time it is read.
  virtual bool absorbed_k_pe_rotated_when_cached() const;
  // Each rank's gradients as its optimiser sees them, from the ranks' own partials: the replicated latent
  // tensors summed over all ranks (core/tp/tp_shard.hpp: reduce_rank_gradients).
  virtual std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& rank_partials,
                                                   const TpPlan& plan) const;
};

}  // namespace attncheck::mutants
