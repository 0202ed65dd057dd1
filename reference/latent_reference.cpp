#include "reference/latent_reference.hpp"

#include <algorithm>
#include <optional>

#include "core/tp/tp_shard.hpp"
#include "reference/latent_layer.hpp"

namespace attncheck::reference {

namespace {

// Intermediates of a latent layer: q, k [batch, num_heads, seq, qk_head_dim] (k's RoPE part the shared
// k_pe), v [batch, num_heads, seq, v_head_dim], context [batch, seq, num_heads * v_head_dim], lse.
Intermediates latent_intermediates(const Geometry& geometry, std::int64_t batch, std::int64_t seq) {
  const std::int64_t heads = geometry.num_heads();
  return {.q = Tensor({batch, heads, seq, geometry.head_dim()}),
          .k = Tensor({batch, heads, seq, geometry.head_dim()}),
          .v = Tensor({batch, heads, seq, geometry.v_head_dim()}),
          .context = Tensor({batch, seq, geometry.value_width()}),
          .lse = Tensor({batch, heads, seq})};
}

// Copies a rank's [batch * seq, heads * width] block into a global [batch, num_heads, seq, width] tensor at
// head first_head.
void scatter_heads(const RowMatrix& local, std::int64_t first_head, std::int64_t batch, std::int64_t seq,
                   Tensor& global) {
  const std::int64_t heads = global.shape[1], width = global.shape[3], local_heads = local.cols() / width;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < local_heads; ++h) {
      MatrixMap(global.data() + ((b * heads + first_head + h) * seq) * width, seq, width) =
          local.block(b * seq, h * width, seq, width);
    }
  }
}

void scatter_rank(const LatentForward& forward, const RankPlan& rank, std::int64_t batch, std::int64_t seq,
                  Intermediates& global) {
  const std::int64_t first = rank.q_heads.begin, heads = rank.q_heads.size();
  scatter_heads(forward.projected.q, first, batch, seq, global.q);
  scatter_heads(forward.projected.k, first, batch, seq, global.k);
  scatter_heads(forward.projected.v, first, batch, seq, global.v);
  as_matrix(global.context, batch * seq).middleCols(rank.o_proj_columns.begin, rank.value_width) = forward.context;
  const std::int64_t num_heads = global.lse.shape[1];
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      std::copy_n(forward.log_sum_exp.row(b * heads + h).data(), seq,
                  global.lse.data() + (b * num_heads + first + h) * seq);
    }
  }
}

// A rank's shard, or the weights themselves with one rank.
const Parameters& rank_shard(const Case& test_case, const TpPlan& plan, int rank, std::optional<Parameters>& storage) {
  if (plan.tp_size == 1) return test_case.weights;
  storage = shard_parameters(test_case.weights, plan, rank);
  return *storage;
}

Tensor run_latent_decode(const Case& test_case, const TpPlan& plan, LatentDecodeForm form) {
  const Geometry& geometry = plan.geometry;
  const Inputs& inputs = test_case.inputs;
  const std::int64_t total = inputs.decode.total();
  Tensor decode_out({inputs.batch, total, geometry.hidden_size()});
  MatrixMap out = as_matrix(decode_out, inputs.batch * total);
  for (int r = 0; r < plan.tp_size; ++r) {
    std::optional<Parameters> storage;
    const Parameters& shard = rank_shard(test_case, plan, r, storage);
    const std::int64_t heads = plan.ranks[r].q_heads.size();
    LatentCache cache(geometry, form, inputs.batch, heads, total);
    std::int64_t start = 0;
    for (std::int64_t count : inputs.decode.calls()) {
      const CallTokens call = gather_call_tokens(inputs, start, count);
      const RowMatrix partial =
          latent_decode_call(geometry, heads, shard, call.block(inputs.batch, count), inputs.key_lengths, cache);
      for (std::int64_t b = 0; b < inputs.batch; ++b) {
        out.middleRows(b * total + start, count) += partial.middleRows(b * count, count);
      }
      start += count;
    }
  }
  return decode_out;
}

}  // namespace

Result run_latent_ranks(const Case& test_case, const TpPlan& plan, const RunOptions& options, const char* name,
                        bool report_rank_gradients,
                        const std::function<void(int rank, const Parameters& partial)>& on_rank_partial) {
  const Geometry& geometry = plan.geometry;
  const Inputs& inputs = test_case.inputs;
  const std::int64_t tokens_count = inputs.batch * inputs.seq, hidden = geometry.hidden_size();
  const TokenBlock tokens{
      .batch = inputs.batch, .seq = inputs.seq, .x = as_matrix(inputs.x, tokens_count), .positions = inputs.positions};
  const ConstMatrixMap d_out = as_matrix(inputs.dout, tokens_count);

  Result result;
  result.implementation = name;
  if (options.intermediates) result.intermediates = latent_intermediates(geometry, inputs.batch, inputs.seq);
  RowMatrix out = RowMatrix::Zero(tokens_count, hidden);
  RowMatrix dx = RowMatrix::Zero(tokens_count, hidden);
  std::optional<GradientAssembler> assembler;
  if (options.gradients) assembler.emplace(plan);
  for (int r = 0; r < plan.tp_size; ++r) {
    std::optional<Parameters> storage;
    const Parameters& shard = rank_shard(test_case, plan, r, storage);
    const std::int64_t heads = plan.ranks[r].q_heads.size();
    const LatentForward forward = latent_rank_forward(geometry, heads, shard, tokens, inputs.key_lengths);
    out += forward.partial_out;
    if (options.intermediates) scatter_rank(forward, plan.ranks[r], inputs.batch, inputs.seq, *result.intermediates);
    if (options.gradients) {
      const LatentBackward backward =
          latent_rank_backward(geometry, heads, shard, tokens, inputs.key_lengths, forward, d_out);
      dx += backward.dx;
      if (on_rank_partial) on_rank_partial(r, backward.gradients);
      assembler->add_rank(backward.gradients);
    }
  }
  result.out = to_tensor(out, {inputs.batch, inputs.seq, hidden});
  if (options.gradients) {
    result.gradients =
        Gradients{.x = to_tensor(dx, {inputs.batch, inputs.seq, hidden}), .params = std::move(*assembler).finish()};
    if (report_rank_gradients) result.rank_gradients = rank_slices(result.gradients->params, plan);
  }
  if (options.decode && !inputs.decode.empty()) {
    result.decode_out = run_latent_decode(test_case, plan, options.latent_decode);
  }
  return result;
}

}  // namespace attncheck::reference
