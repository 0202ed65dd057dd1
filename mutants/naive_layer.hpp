// A second fp64 implementation of the attention layer, written plainly for the mutant catalog: one head
// at a time, dense [seq_q, seq_k] scores, a hand-written backward. Each step where real frameworks have
// gone wrong is a virtual function, correct here; a mutant is this layer with one step overridden
// (layer_mutants.cpp), so its bug reaches the forward pass, the backward pass and decoding alike, as it
// would under autograd. The oracle (reference/) carries no mutant's branch: this layer is the one that
// bends, and naive_layer_test holds it, with no step overridden, to reference-tp.
//
// Like a Megatron-style layer it runs the case's TP plan rank by rank: each rank projects with its shard
// (core/tp/tp_shard.hpp), attends with its local heads over all keys, and returns an o_proj partial; the
// partials are summed in rank order and o_bias added; the partial gradients are reduced by
// reduce_gradients() and gathered into the full ones. Decoding keeps one KV cache per rank. A whole-width
// QK-norm (rms-full-width) needs two all-reduces, written out in run(): each token's sums of squares
// before any rank normalises, and each token's sum of dn * n between the ranks' attention backward and
// their norm backward (so every rank's pass stops there and resumes once all have run).
//
// Buffers, row-major, token t = b * seq + s of the call's rows:
//   x, d_out, partial_out, dx   [tokens, hidden_size]
//   q, d_q, context             [tokens, local_heads * head_dim]     local query head h at columns h * head_dim
//   k, v, d_k, d_v              [tokens, local_kv_heads * head_dim]  local KV head g at columns g * head_dim
//   probabilities, tanh         [seq_q, seq_k] of one (batch row, local query head) at a time: the backward
//                               pass recomputes them, so memory stays at one head's whatever the length
//   KV cache                    [slots, local_kv_heads * head_dim] per batch row: slots = decode.total(),
//                               token t in row t; a windowed layer's rolling cache: slots = W, token t in
//                               row t % W (rolling_cache_slots)
//   a decode call's keys, values  [cached + count, local_kv_heads * head_dim]: the cached tokens in order,
//                               then the call's own
//   width sums (whole-width norm) [tokens] for q and k: all-reduced sums of squares, then of dn * n
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/model/case.hpp"
#include "core/model/result.hpp"
#include "core/model/rope_frequencies.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::mutants {

using reference::ConstMatrixRef;
using reference::MatrixRef;
using reference::RowMatrix;

// Keys [begin, end) of a query; empty when end <= begin.
struct KeyRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// What decides which keys a query sees.
struct MaskQuery {
  std::int64_t query = 0;       // row among the call's seq_q queries
  std::int64_t seq_q = 0;       // queries in the call
  std::int64_t seq_k = 0;       // keys that exist (when decoding: the cache's length)
  std::int64_t key_length = 0;  // keys >= key_length are padding
  std::int64_t cached_keys =
      0;  // keys [0, cached_keys) came from the KV cache (a decode call), the rest are the call's
  int rank = 0;
  int tp_size = 1;
};

class NaiveLayer {
 public:
  virtual ~NaiveLayer() = default;

  // Forward, backward of sum(out * dout), each rank's reduced gradients, and the decode schedule.
  // Validates the case (InputError); returns non-finite values as they come, for the comparison to catch.
  Result run(const Case& test_case) const;

 protected:
  // The key index a query is aligned to: bottom-right, query + seq_k - seq_q (core/model/case.hpp).
  virtual std::int64_t aligned_key(const MaskQuery& query) const;
  // The keys a query sees: the window before its aligned key, the aligned key itself if causal, padding.
  virtual KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const;
  // Of the keys a query sees (`visible`), those that came from the cache, which a prefix-prefill kernel
  // masks in a loop of its own: visible keys below query.cached_keys. The rest of `visible` are the call's.
  virtual KeyRange cached_keys_seen(const Geometry& geometry, const MaskQuery& query, KeyRange visible) const;
  // Decoding: the slots of each batch row's KV cache when it is a rolling one, as Hugging Face's
  // sliding-window caches are: a windowed layer keeps its last W tokens (token t in slot t % W; a query
  // never sees a key W or more behind it). None (every token kept, in order): a layer without a window.
  virtual std::optional<std::int64_t> rolling_cache_slots(const Geometry& geometry) const;
  // The slot a rolling cache's oldest kept token sits in, where reading starts, when `past` tokens were
  // written and min(past, slots) = `kept` remain: (past - kept) % slots.
  virtual std::int64_t rolling_read_start(std::int64_t past, std::int64_t kept, std::int64_t slots) const;
  // How many of a token's local heads one QK-norm RMS covers: 1 (each head on its own). Not asked for a
  // whole-width norm (rms-full-width), which covers every head of every rank.
  virtual std::int64_t heads_per_norm(std::int64_t local_heads) const;
  // Whether QK-norm comes before RoPE (it does: every family normalises the unrotated q and k).
  virtual bool norm_before_rope() const;
  // A whole-width norm's sums over the width: whether they are all-reduced over the ranks (they are; else
  // each rank normalises its own slice of the width by its own sum).
  virtual bool norm_sums_all_reduced() const;
  // Whether `rank` adds its k channels' sum of squares to the all-reduce: only the first rank of its KV
  // head's replica group, so that a replicated head is counted once.
  virtual bool counts_kv_norm_channels(const TpPlan& plan, int rank) const;
  // The probabilities of a query that sees no key ([seq_k], zero on entry): left 0, so its context is 0.
  virtual void probabilities_without_keys(Eigen::Ref<reference::RowVector> row) const;
  // What a row of scores is shifted by before exp: its maximum.
  virtual double softmax_shift(double row_maximum) const;
  // One query head's context: the softmax of each query's visible scores times v. scores [seq_q, seq_k]
  // (scaled and capped), visible[i] the keys query i sees, v [seq_k, head_dim]; probabilities is that
  // softmax, dense, as the backward pass uses it. Returns [seq_q, head_dim]: probabilities * v here; a
  // tiled layer (tiled_layer.hpp) computes it tile by tile instead.
  virtual RowMatrix head_context(const RowMatrix& scores, std::span<const KeyRange> visible, const ConstMatrixRef& v,
                                 const RowMatrix& probabilities) const;
  // Stores one (batch row, query head)'s dQ, [seq, head_dim], into d_q_head: as it is.
  virtual void store_query_gradient(MatrixRef d_q_head, const RowMatrix& gradient) const;
  // Adds one query head's share of its KV head's gradient (dK or dV rows of one batch row).
  virtual void add_kv_gradient(MatrixRef kv_gradient, const RowMatrix& head_share) const;
  // Each rank's gradients as its optimiser sees them, from every rank's partial gradients: the
  // reductions of core/tp/tp_shard.hpp.
  virtual std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& rank_partials,
                                                   const TpPlan& plan) const;
  // Whether every rank adds o_bias to its partial output (else it is added once, after the sum).
  virtual bool o_bias_on_every_rank() const;
  // The sink logit local query head `local_head` of a rank's shard adds to its softmax's denominator, or
  // none (core/model/geometry.hpp, attention_sinks): the shard's own entry.
  virtual std::optional<double> sink_logit(const Parameters& shard, std::int64_t local_head) const;
  // The shard rank `rank` computes with: shard_parameters (core/tp/tp_shard.hpp).
  virtual Parameters rank_shard(const Parameters& weights, const TpPlan& plan, int rank) const;
  // The RoPE frequencies and attention factor of one forward call whose tokens sit at `positions`
  // (every batch row of the call): core/model/rope_frequencies.hpp.
  virtual RopeFrequencies call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const;

 private:
  friend struct RankComputation;
};

}  // namespace attncheck::mutants
