#include "reference/reference.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <utility>

#include "core/errors/input_error.hpp"
#include "core/resources/memory_room.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/kv_cache.hpp"
#include "reference/latent_reference.hpp"
#include "reference/memory_estimate.hpp"
#include "reference/rank_layer.hpp"

namespace attncheck::reference {

namespace {

// Copies a rank's token-major [batch * seq, local_heads * head_dim] block into the global
// [batch, heads, seq, head_dim] tensor, local head h landing at global head first_head + h.
void scatter_heads(const RowMatrix& local, std::int64_t first_head, std::int64_t local_heads, std::int64_t batch,
                   std::int64_t seq, std::int64_t head_dim, Tensor& global) {
  const std::int64_t heads = global.shape[1];
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < local_heads; ++h) {
      MatrixMap target(global.data() + ((b * heads + first_head + h) * seq) * head_dim, seq, head_dim);
      target = local.block(b * seq, h * head_dim, seq, head_dim);
    }
  }
}

// Writes rank-local intermediates into the global ones. A replicated KV head is computed identically by
// every rank of its group; the first rank of the group writes it.
void scatter_intermediates(const RankForward& forward, const RankPlan& rank, const TpPlan& plan, std::int64_t batch,
                           std::int64_t seq, Intermediates& global) {
  const std::int64_t head_dim = plan.geometry.head_dim();
  const LocalHeads heads = LocalHeads::of(rank);
  scatter_heads(forward.projected.q, rank.q_heads.begin, heads.num_heads, batch, seq, head_dim, global.q);
  const bool first_of_group = rank.rank == plan.replica_groups[rank.replica_group].ranks.begin;
  if (first_of_group) {
    scatter_heads(forward.projected.k, rank.kv_heads.begin, heads.num_kv_heads, batch, seq, head_dim, global.k);
    scatter_heads(forward.projected.v, rank.kv_heads.begin, heads.num_kv_heads, batch, seq, head_dim, global.v);
  }
  MatrixMap context = as_matrix(global.context, batch * seq);
  context.middleCols(rank.q_proj_rows.begin, rank.query_width) = forward.context;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads.num_heads; ++h) {
      const std::int64_t global_row = b * plan.geometry.num_heads() + rank.q_heads.begin + h;
      std::copy_n(forward.log_sum_exp.row(b * heads.num_heads + h).data(), seq, global.lse.data() + global_row * seq);
    }
  }
}

Intermediates empty_intermediates(const Geometry& geometry, std::int64_t batch, std::int64_t seq) {
  const std::int64_t head_dim = geometry.head_dim();
  return {.q = Tensor({batch, geometry.num_heads(), seq, head_dim}),
          .k = Tensor({batch, geometry.num_kv_heads(), seq, head_dim}),
          .v = Tensor({batch, geometry.num_kv_heads(), seq, head_dim}),
          .context = Tensor({batch, seq, geometry.query_width()}),
          .lse = Tensor({batch, geometry.num_heads(), seq})};
}

// A rank's shard of the weights; with one rank, the weights themselves (no copy).
class RankShard {
 public:
  RankShard(const Parameters& weights, const TpPlan& plan, int rank)
      : shard_(plan.tp_size == 1 ? std::nullopt : std::optional(shard_parameters(weights, plan, rank))),
        parameters_(shard_ ? *shard_ : weights) {}
  const Parameters& get() const { return parameters_; }

 private:
  std::optional<Parameters> shard_;
  const Parameters& parameters_;
};

// out += o_bias, once, after the ranks' partials are summed.
void add_o_bias(const Parameters& weights, MatrixRef out) {
  if (weights.o_bias) out.rowwise() += as_matrix(*weights.o_bias, 1).row(0);
}

bool first_of_replica_group(const TpPlan& plan, int rank) {
  return rank == plan.replica_groups[plan.ranks[rank].replica_group].ranks.begin;
}

// Whole-width QK-norm's forward all-reduce: each token's sum of squares over the whole q and k
// projections, the ranks' parts summed in rank order. Every query channel lives on one rank; a
// replicated KV head's channels are on every rank of its replica group and are counted once, from the
// group's first rank (counting them per replica would weigh them kv_replicas times).
NormSums all_reduce_sum_squares(const std::deque<RankShard>& shards, const TpPlan& plan, const TokenBlock& tokens) {
  NormSums total{.q = RowVector::Zero(tokens.x.rows()), .k = RowVector::Zero(tokens.x.rows())};
  for (int r = 0; r < plan.tp_size; ++r) {
    const NormSums part = rank_norm_sum_squares(shards[r].get(), tokens);
    total.q += part.q;
    if (first_of_replica_group(plan, r)) total.k += part.k;
  }
  return total;
}

std::span<const double> as_span(const RowVector& values) {
  return {values.data(), static_cast<std::size_t>(values.size())};
}

// KV-cache decoding of inputs.decode on every rank of the plan: [batch, decode.total(), hidden].
// Ranks run one after another (each with its own cache), adding their partials into the output, so
// every element is summed in rank order; o_bias is added once at the end.
// sum_squares: the whole-width norm's all-reduced sums for every token of inputs.x (empty without one).
Tensor run_decode(const Case& test_case, const TpPlan& plan, const NormSums& sum_squares) {
  const Geometry& geometry = plan.geometry;
  const Inputs& inputs = test_case.inputs;
  const std::int64_t hidden = geometry.hidden_size();
  const std::int64_t total = inputs.decode.total();
  const std::vector<std::int64_t> calls = inputs.decode.calls();

  Tensor decode_out({inputs.batch, total, hidden});
  MatrixMap out = as_matrix(decode_out, inputs.batch * total);
  for (int r = 0; r < plan.tp_size; ++r) {
    const RankShard shard(test_case.weights, plan, r);
    const LocalHeads heads = LocalHeads::of(plan.ranks[r]);
    KvCache cache(inputs.batch, heads.num_kv_heads, total, geometry.head_dim());
    std::int64_t start = 0;
    for (std::int64_t count : calls) {
      // Tokens [start, start + count) of every batch row in a contiguous block, with their norm sums.
      const CallTokens call = gather_call_tokens(inputs, start, count);
      RowVector q_sums(sum_squares.q.size() > 0 ? inputs.batch * count : 0), k_sums(q_sums.size());
      for (std::int64_t b = 0; b < inputs.batch && q_sums.size() > 0; ++b) {
        q_sums.segment(b * count, count) = sum_squares.q.segment(b * inputs.seq + start, count);
        k_sums.segment(b * count, count) = sum_squares.k.segment(b * inputs.seq + start, count);
      }
      TokenBlock tokens = call.block(inputs.batch, count);
      tokens.q_sum_squares = as_span(q_sums);
      tokens.k_sum_squares = as_span(k_sums);
      const RowMatrix partial = decode_call(geometry, heads, shard.get(), tokens, inputs.key_lengths, cache);
      for (std::int64_t b = 0; b < inputs.batch; ++b) {
        out.middleRows(b * total + start, count) += partial.middleRows(b * count, count);
      }
      start += count;
    }
  }
  add_o_bias(test_case.weights, out);
  return decode_out;
}


// Called with each rank's own gradients (its shard's layout) before any reduction across ranks.
using RankPartialSink = std::function<void(int rank, const Parameters& partial)>;

Result run_sharded(const Case& test_case, const TpPlan& plan, const RunOptions& options, const char* name,
                   bool report_rank_gradients, const RankPartialSink& on_rank_partial = {}) {
  validate_case(test_case);
  const Geometry& geometry = plan.geometry;
  const Inputs& inputs = test_case.inputs;
  require_memory("the fp64 reference run",
                 reference_run_bytes(geometry, {.batch = inputs.batch, .seq = inputs.seq, .tp_size = plan.tp_size}),
                 [](std::uint64_t) { return std::string("a case with fewer tokens (batch * seq) or fewer heads"); });
  if (geometry.is_latent()) {
    Result result = run_latent_ranks(test_case, plan, options, name, report_rank_gradients, on_rank_partial);
    check_result_finite(result);
    return result;
  }
  const std::int64_t tokens_count = inputs.batch * inputs.seq;
  const std::int64_t hidden = geometry.hidden_size();
  TokenBlock tokens{
      .batch = inputs.batch, .seq = inputs.seq, .x = as_matrix(inputs.x, tokens_count), .positions = inputs.positions};
  const ConstMatrixMap d_out = as_matrix(inputs.dout, tokens_count);
  const bool full_width = geometry.qk_norm_full_width();
  // A whole-width norm's ranks meet at two all-reduces, so their shards are kept for all three passes
  // (a deque: RankShard refers into itself and must not move); otherwise each rank's shard lives only
  // while that rank runs.
  std::deque<RankShard> width_shards;
  if (full_width) {
    for (int r = 0; r < plan.tp_size; ++r) width_shards.emplace_back(test_case.weights, plan, r);
  }
  NormSums sum_squares;
  if (full_width) {
    sum_squares = all_reduce_sum_squares(width_shards, plan, tokens);
    tokens.q_sum_squares = as_span(sum_squares.q);
    tokens.k_sum_squares = as_span(sum_squares.k);
  }

  Result result;
  result.implementation = name;
  if (options.intermediates) result.intermediates = empty_intermediates(geometry, inputs.batch, inputs.seq);

  // Each rank runs forward and backward on its own shard; the backward needs only dout, not the summed
  // out, so a rank's shard and saved state are dropped before the next rank runs. Sums go in rank order.
  RowMatrix out = RowMatrix::Zero(tokens_count, hidden);
  RowMatrix dx = RowMatrix::Zero(tokens_count, hidden);
  std::optional<GradientAssembler> assembler;
  if (options.gradients) assembler.emplace(plan);
  // A whole-width norm's backward needs every rank's stage-1 state before its second all-reduce.
  std::vector<RankForward> forwards;
  std::vector<RankBackward> backwards;
  for (int r = 0; r < plan.tp_size; ++r) {
    const std::optional<RankShard> own_shard =
        full_width ? std::nullopt : std::optional<RankShard>(std::in_place, test_case.weights, plan, r);
    const RankShard& shard = full_width ? width_shards[r] : *own_shard;
    const LocalHeads heads = LocalHeads::of(plan.ranks[r]);
    RankForward forward = rank_forward(geometry, heads, shard.get(), tokens, inputs.key_lengths);
    out += forward.partial_out;
    if (options.intermediates) {
      scatter_intermediates(forward, plan.ranks[r], plan, inputs.batch, inputs.seq, *result.intermediates);
    }
    if (options.gradients && full_width) {
      backwards.push_back(
          rank_backward_attention(geometry, heads, shard.get(), tokens, inputs.key_lengths, forward, d_out));
      forwards.push_back(std::move(forward));
    } else if (options.gradients) {
      const RankBackward backward =
          rank_backward(geometry, heads, shard.get(), tokens, inputs.key_lengths, forward, d_out);
      dx += backward.dx;
      if (on_rank_partial) on_rank_partial(r, backward.gradients);
      assembler->add_rank(backward.gradients);
    }
  }
  if (!backwards.empty()) {
    // The backward's all-reduce: each token's sum of dn * n over the whole width. Every rank's part
    // counts, replicas included: each holds a different share of its KV head's gradient.
    NormSums dots{.q = RowVector::Zero(tokens_count), .k = RowVector::Zero(tokens_count)};
    for (int r = 0; r < plan.tp_size; ++r) {
      const NormSums part = rank_norm_dots(width_shards[r].get(), forwards[r], backwards[r]);
      dots.q += part.q;
      dots.k += part.k;
    }
    for (int r = 0; r < plan.tp_size; ++r) {
      rank_backward_finish(geometry, LocalHeads::of(plan.ranks[r]), width_shards[r].get(), tokens, forwards[r], &dots,
                           first_of_replica_group(plan, r), backwards[r]);
      dx += backwards[r].dx;
      if (on_rank_partial) on_rank_partial(r, backwards[r].gradients);
      assembler->add_rank(backwards[r].gradients);
    }
  }
  add_o_bias(test_case.weights, out);
  result.out = to_tensor(out, {inputs.batch, inputs.seq, hidden});

  if (options.gradients) {
    result.gradients =
        Gradients{.x = to_tensor(dx, {inputs.batch, inputs.seq, hidden}), .params = std::move(*assembler).finish()};
    if (report_rank_gradients) result.rank_gradients = rank_slices(result.gradients->params, plan);
  }
  if (options.decode && !inputs.decode.empty()) result.decode_out = run_decode(test_case, plan, sum_squares);
  check_result_finite(result);
  return result;
}

}  // namespace

// A finite case can still give NaN or Inf in fp64 (values near 1e154 overflow a dot product; a zero
// q or k vector with qk_norm_eps 0 divides by zero). The oracle never returns such a result silently.
void check_result_finite(const Result& result) {
  ViolationList violations;
  check_finite(result.out, "out", violations);
  if (result.gradients) {
    check_finite(result.gradients->x, "gradients.x", violations);
    for_each_parameter(result.gradients->params, [&](std::string_view name, const Tensor& tensor) {
      check_finite(tensor, "gradients." + std::string(name), violations);
    });
  }
  if (result.decode_out) check_finite(*result.decode_out, "decode_out", violations);
  violations.throw_if_any(
      "the fp64 reference produced a non-finite value (inputs too large, or qk_norm_eps 0 on a zero vector); "
      "no valid reference result exists for this case");
}

Result run_reference(const Case& test_case, const RunOptions& options) {
  return run_sharded(test_case, make_tp_plan(test_case.geometry(), 1), options, "reference", false);
}

Result run_reference_tp(const Case& test_case, const RunOptions& options) {
  return run_sharded(test_case, test_case.plan, options, "reference-tp", true);
}

std::vector<Parameters> rank_partial_gradients(const Case& test_case) {
  std::vector<Parameters> partials(static_cast<std::size_t>(test_case.plan.tp_size));
  run_sharded(test_case, test_case.plan, {.gradients = true, .intermediates = false, .decode = false}, "reference-tp",
              false, [&](int rank, const Parameters& partial) { partials[static_cast<std::size_t>(rank)] = partial; });
  return partials;
}

}  // namespace attncheck::reference
