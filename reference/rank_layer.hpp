// One TP rank's share of the attention layer, forward and backward, on its shard of the weights
// (core/tp/tp_shard.hpp). The unsharded reference is the one-rank case: a rank holding every head.
//
// Buffers are row-major over tokens, batch-major: token t = b * seq + s. Per rank:
//   q, q_input, d_q        [tokens, local_heads.num_heads * head_dim]     query head h in columns h*head_dim..
//   k, v, k_input          [tokens, local_heads.num_kv_heads * head_dim]
//   context                [tokens, local query width]
//   log_sum_exp            [batch * num_heads, seq]                        i.e. [batch, heads, seq]
//   partial_out, d_out, dx [tokens, hidden_size]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/geometry.hpp"
#include "core/model/parameters.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/model/tp_plan.hpp"
#include "reference/attention_head.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::reference {

// The heads a rank computes; local query head h reads local KV head h / group_size().
struct LocalHeads {
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t group_size() const { return num_heads / num_kv_heads; }
  static LocalHeads of(const RankPlan& rank) { return {rank.q_heads.size(), rank.kv_heads.size()}; }
};

// The tokens a call runs: `batch` rows of `seq` tokens each.
struct TokenBlock {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  ConstMatrixMap x;                         // [batch * seq, hidden_size]
  std::span<const std::int64_t> positions;  // [batch * seq]
  // Whole-width QK-norm (rms-full-width) only: each token's sum of squares over the whole q / k
  // projection, all ranks' parts all-reduced (reference.cpp), [batch * seq] each; empty otherwise.
  std::span<const double> q_sum_squares;
  std::span<const double> k_sum_squares;
  // The frequencies of the forward call these tokens are part of, when the block is only part of it (a
  // context-parallel chunk: longrope chooses its factors from the whole call's largest position); null: the
  // block is the call, and its positions choose.
  const RopeFrequencies* call_frequencies = nullptr;
};

// q, k, v of a block of tokens: projections (+bias), QK-norm, RoPE.
struct ProjectedTokens {
  RowMatrix q;  // after QK-norm and RoPE
  RowMatrix k;  // after QK-norm and RoPE
  RowMatrix v;
  RowMatrix q_input;  // before QK-norm (kept only when the geometry normalises)
  RowMatrix k_input;
  RowMatrix q_inverse_rms;  // [tokens, heads]; [tokens, 1] for a whole-width norm
  RowMatrix k_inverse_rms;
};

// A whole-width norm's per-token sums over one rank's channels: what the rank contributes to an
// all-reduce. [tokens] each.
struct NormSums {
  RowVector q;
  RowVector k;
};
// The rank's sums of squares of its q and k projections (before the norm), per token.
NormSums rank_norm_sum_squares(const Parameters& shard, const TokenBlock& tokens);
ProjectedTokens project_tokens(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                               const TokenBlock& tokens);

struct RankForward {
  ProjectedTokens projected;
  RowMatrix context;
  RowMatrix log_sum_exp;
  RowMatrix partial_out;  // context @ o_proj_shard^T, without o_bias
};

// Full self-attention over the block (seq_q = seq_k = tokens.seq). The backward pass needs only the
// projected q, k, v kept here: it recomputes the probabilities (attention_group_backward).
RankForward rank_forward(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                         const TokenBlock& tokens, std::span<const std::int64_t> key_lengths);

struct RankBackward {
  Parameters gradients;  // this rank's partial gradients, shard layout; o_bias = column sums of d_out
  RowMatrix dx;          // this rank's contribution to d(x)
  // Between the two stages: d(q), d(k) with respect to the normalised, unrotated q and k; d(v).
  RowMatrix d_q, d_k, d_v;
};

// The whole backward pass of one rank (per-head QK-norm or none).
RankBackward rank_backward(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                           const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                           const RankForward& forward, const ConstMatrixMap& d_out);

// The same in two stages, for a whole-width norm whose backward needs an all-reduce in between:
// stage 1 runs o_proj, attention and RoPE backward (gradients o_proj, o_bias, sinks; d_q, d_k, d_v);
// rank_norm_dots gives the rank's part of each token's sum of dn * n; stage 2, given the all-reduced
// sums, runs the norm and projection backward. subtract_kv_dot_term: whether this rank is the first of
// its KV head's replica group (qk_norm.hpp: full_width_norm_backward).
RankBackward rank_backward_attention(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                                     const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                                     const RankForward& forward, const ConstMatrixMap& d_out);
NormSums rank_norm_dots(const Parameters& shard, const RankForward& forward, const RankBackward& backward);
void rank_backward_finish(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                          const TokenBlock& tokens, const RankForward& forward, const NormSums* all_reduced_dots,
                          bool subtract_kv_dot_term, RankBackward& backward);

}  // namespace attncheck::reference
