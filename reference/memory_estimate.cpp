#include "reference/memory_estimate.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>

#include "core/model/tp_plan.hpp"

namespace attncheck::reference {

namespace {

// Counted in long double so that the largest documented geometries (hidden 2^20, seq 2^20) cannot
// overflow before the comparison with what fits.
using Count = long double;

Count ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<Count>((a + b - 1) / b);
}

struct Values {
  Count case_values = 0;
  Count run_values = 0;
};

// A quarter more for allocator rounding and the golden file's write buffers, and 64 MiB of fixed
// overhead (HDF5's caches, OpenMP's thread pools); saturating.
std::uint64_t to_bytes(Count values) {
  const Count bytes = values * 8 * 1.25L + Count(64 << 20);
  if (bytes >= static_cast<Count>(std::numeric_limits<std::uint64_t>::max())) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return static_cast<std::uint64_t>(bytes);
}

Values count_values(const Geometry& geometry, const RunSize& size) {
  const Count hidden = static_cast<Count>(geometry.hidden_size());
  const Count head_dim = static_cast<Count>(geometry.head_dim());
  const Count tokens = static_cast<Count>(size.batch) * static_cast<Count>(size.seq);
  const Count query_width = static_cast<Count>(geometry.query_width());
  const Count kv_width = static_cast<Count>(geometry.kv_width());
  const std::int64_t tp = std::max<std::int64_t>(size.tp_size, 1);
  // The layer's parameters: four projections; biases, norms and sinks are a width each at most.
  Count parameters = hidden * (2 * query_width + 2 * kv_width) + 2 * query_width + 2 * kv_width + 2 * hidden;
  // Latent attention: its own parameter count (below the formula's when qk_head_dim >= v_head_dim, the
  // latent projections being narrower), every rank holding the down-projections whole, and per token the
  // latents c_q, c_kv and k_pe with their inputs and gradients.
  Count latent_token_values = 0;
  if (geometry.is_latent()) {
    const LatentAttentionSpec& latent = *geometry.latent();
    parameters = std::max(parameters, static_cast<Count>(make_tp_plan(geometry, 1).unsharded_params.total()));
    latent_token_values = 6 * static_cast<Count>(latent.q_lora_rank.value_or(0) + latent.kv_a_rows() +
                                                 geometry.num_heads() * latent.kv_b_rows_per_head());
  }
  // The largest rank: ceil(heads / tp) query heads and at least one KV head (replicated when tp > kv heads).
  const Count rank_query_width = ceil_div(geometry.num_heads(), tp) * head_dim;
  const Count rank_kv_width = std::max<Count>(ceil_div(geometry.num_kv_heads(), tp), 1) * head_dim;
  const Count rank_parameters =
      geometry.is_latent()
          ? parameters
          : hidden * (2 * rank_query_width + 2 * rank_kv_width) + 2 * rank_query_width + 2 * rank_kv_width + 2 * hidden;

  // float64 values held at once (reference/reference.cpp, rank_layer.cpp, attention_head.cpp):
  // the case: weights, x, dout, positions and key lengths;
  const Count case_values = parameters + 2 * tokens * hidden + tokens + static_cast<Count>(size.batch);
  // the run's sums and results: out and dx, their result copies and the golden's copies for writing,
  // the assembled gradients and their result copy, and the per-rank gradient slices of a TP run
  // (replicated KV counted per holder);
  const Count result_values = 6 * tokens * hidden + 2 * parameters + (tp > 1 ? Count(tp) * rank_parameters : 0);
  // one rank's state: its shard and gradients; q, q_input, k, k_input, v, context, their gradients and
  // d_context; partial out and its dx; norms' inverse RMS; log-sum-exp; the decode cache's k and v.
  const Count rank_values = 2 * rank_parameters + tokens * (6 * rank_query_width + 8 * rank_kv_width) +
                            2 * tokens * hidden + 4 * tokens * (rank_query_width / head_dim + 1) +
                            tokens * latent_token_values;
  // A whole-width QK-norm keeps every rank's state between its two all-reduces; otherwise one rank lives.
  const Count live_ranks = geometry.qk_norm_full_width() ? Count(tp) : 1;
  // Each thread's attention blocks (attention_head.cpp): a block stacks the group's query heads over
  // rows = min(clamp(2^19 / (group * seq), 16, 4096), seq) queries; it holds scores, their gradient and
  // softcap's tanh ([stacked, seq] each) and the stacked q, context and gradient rows ([stacked, head_dim]).
  const std::int64_t group_size = std::max<std::int64_t>(geometry.group_size(), 1);
  const std::int64_t seq_tokens = std::max<std::int64_t>(size.seq, 1);
  const std::int64_t per_block = std::max<std::int64_t>((std::int64_t{1} << 19) / group_size / seq_tokens, 1);
  const std::int64_t block_rows = std::min(std::clamp<std::int64_t>(per_block, 16, 4096), seq_tokens);
  const Count stacked = static_cast<Count>(group_size) * static_cast<Count>(block_rows);
  const Count thread_values = 3 * stacked * static_cast<Count>(seq_tokens) + 4 * stacked * head_dim;
  const int threads = size.threads > 0 ? size.threads : omp_get_max_threads();
  return {.case_values = case_values,
          .run_values = result_values + live_ranks * rank_values + static_cast<Count>(threads) * thread_values};
}

}  // namespace

std::uint64_t case_bytes(const Geometry& geometry, const RunSize& size) {
  return to_bytes(count_values(geometry, size).case_values);
}

std::uint64_t reference_run_bytes(const Geometry& geometry, const RunSize& size) {
  return to_bytes(count_values(geometry, size).run_values);
}

std::uint64_t golden_make_peak_bytes(const Geometry& geometry, const RunSize& size) {
  const Values values = count_values(geometry, size);
  return to_bytes(values.case_values + values.run_values);
}

std::uint64_t layer_bytes(const Geometry& geometry, const RunSize& size) {
  const Count tokens = static_cast<Count>(size.batch) * static_cast<Count>(size.seq);
  const Count parameters = static_cast<Count>(make_tp_plan(geometry, 1).unsharded_params.total());
  Count token_values = 4 * static_cast<Count>(geometry.hidden_size()) + static_cast<Count>(geometry.query_width()) +
                       2 * static_cast<Count>(geometry.kv_width()) + static_cast<Count>(geometry.value_width());
  if (geometry.is_latent()) {
    const LatentAttentionSpec& latent = *geometry.latent();
    token_values += static_cast<Count>(latent.q_lora_rank.value_or(0) + latent.kv_a_rows());
  }
  const Count probabilities = static_cast<Count>(size.batch) * static_cast<Count>(geometry.num_heads()) *
                              static_cast<Count>(size.seq) * static_cast<Count>(size.seq);
  const Count bytes = 8 * (2 * parameters + tokens * token_values + 2 * probabilities);
  if (bytes >= static_cast<Count>(std::numeric_limits<std::uint64_t>::max())) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace attncheck::reference
