#include "reference/rank_layer.hpp"

#include <stdexcept>
#include <vector>

#include "reference/parallel.hpp"
#include "reference/qk_norm.hpp"
#include "reference/rope.hpp"

namespace attncheck::reference {

namespace {

RowVector as_row_vector(const Tensor& tensor) {
  return Eigen::Map<const RowVector>(tensor.data(), tensor.numel());
}

// x @ weight^T (+ bias): weight is [out, in] as nn.Linear stores it.
RowMatrix linear(const ConstMatrixMap& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  const ConstMatrixMap w = as_matrix(weight, weight.shape[0]);
  RowMatrix out(x.rows(), w.rows());
  out.noalias() = x * w.transpose();
  if (bias) out.rowwise() += as_row_vector(*bias);
  return out;
}

// Column sums of a [tokens, width] matrix as a Tensor [width]: the gradient of a bias.
Tensor column_sums(const RowMatrix& matrix) {
  const RowVector sums = matrix.colwise().sum();
  return Tensor({sums.size()}, std::vector<double>(sums.data(), sums.data() + sums.size()));
}

}  // namespace

ProjectedTokens project_tokens(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                               const TokenBlock& tokens) {
  ProjectedTokens projected;
  projected.q = linear(tokens.x, shard.q_proj, shard.q_bias);
  projected.k = linear(tokens.x, shard.k_proj, shard.k_bias);
  projected.v = linear(tokens.x, shard.v_proj, shard.v_bias);
  if (geometry.qk_norm() != QkNorm::none) {
    projected.q_input = projected.q;
    projected.k_input = projected.k;
  }
  if (geometry.qk_norm_full_width()) {
    if (tokens.q_sum_squares.size() != static_cast<std::size_t>(tokens.x.rows()) ||
        tokens.k_sum_squares.size() != static_cast<std::size_t>(tokens.x.rows())) {
      throw std::logic_error("project_tokens: a whole-width QK-norm needs the all-reduced sums of squares");
    }
    const auto sums = [](std::span<const double> values) {
      return RowVector(Eigen::Map<const RowVector>(values.data(), static_cast<Eigen::Index>(values.size())));
    };
    full_width_norm_forward(projected.q, as_row_vector(*shard.q_norm), sums(tokens.q_sum_squares),
                            geometry.query_width(), geometry.qk_norm_eps(), projected.q_inverse_rms);
    full_width_norm_forward(projected.k, as_row_vector(*shard.k_norm), sums(tokens.k_sum_squares), geometry.kv_width(),
                            geometry.qk_norm_eps(), projected.k_inverse_rms);
  } else if (geometry.qk_norm() != QkNorm::none) {
    qk_norm_forward(projected.q, as_row_vector(*shard.q_norm), heads.num_heads, geometry, projected.q_inverse_rms);
    qk_norm_forward(projected.k, as_row_vector(*shard.k_norm), heads.num_kv_heads, geometry, projected.k_inverse_rms);
  }
  if (tokens.call_frequencies != nullptr) {
    apply_rope(projected.q, tokens.positions, heads.num_heads, geometry, *tokens.call_frequencies,
               RopeDirection::forward);
    apply_rope(projected.k, tokens.positions, heads.num_kv_heads, geometry, *tokens.call_frequencies,
               RopeDirection::forward);
  } else {
    apply_rope(projected.q, tokens.positions, heads.num_heads, geometry, RopeDirection::forward);
    apply_rope(projected.k, tokens.positions, heads.num_kv_heads, geometry, RopeDirection::forward);
  }
  return projected;
}

NormSums rank_norm_sum_squares(const Parameters& shard, const TokenBlock& tokens) {
  return {.q = full_width_sum_squares(linear(tokens.x, shard.q_proj, shard.q_bias)),
          .k = full_width_sum_squares(linear(tokens.x, shard.k_proj, shard.k_bias))};
}

RankForward rank_forward(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                         const TokenBlock& tokens, std::span<const std::int64_t> key_lengths) {
  const std::int64_t head_dim = geometry.head_dim();
  const std::int64_t seq = tokens.seq;
  RankForward forward;
  forward.projected = project_tokens(geometry, heads, shard, tokens);
  const ProjectedTokens& p = forward.projected;
  forward.context.resize(p.q.rows(), p.q.cols());
  forward.log_sum_exp.resize(tokens.batch * heads.num_heads, seq);
  const ScoreSpec score = ScoreSpec::for_geometry(geometry);

  // One task per (batch row, KV head) with its group of query heads; each writes only its own blocks,
  // so tasks never race and the result does not depend on the thread count. Eigen runs single-threaded
  // inside the region (and uses every core itself when the loop runs serially).
  const std::int64_t group = heads.group_size();
  const std::int64_t group_width = group * head_dim;
  const std::int64_t tasks = tokens.batch * heads.num_kv_heads;
  const bool parallel = worth_parallel(tasks, 2 * group * seq * seq * head_dim);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t b = task / heads.num_kv_heads;
    const std::int64_t g = task % heads.num_kv_heads;
    const MaskSpec mask = MaskSpec::for_geometry(geometry, seq, seq, key_lengths[b]);
    // log_sum_exp rows b * num_heads + g * group .. are the group's heads: [group, seq] as the call wants.
    attention_group_forward(
        p.q.block(b * seq, g * group_width, seq, group_width), p.k.block(b * seq, g * head_dim, seq, head_dim),
        p.v.block(b * seq, g * head_dim, seq, head_dim), mask, score.with_sinks(shard.sinks, g * group, group),
        forward.context.block(b * seq, g * group_width, seq, group_width),
        forward.log_sum_exp.row(b * heads.num_heads + g * group).data());
  }
  const ConstMatrixMap o_proj = as_matrix(shard.o_proj, shard.o_proj.shape[0]);
  forward.partial_out.resize(forward.context.rows(), o_proj.rows());
  forward.partial_out.noalias() = forward.context * o_proj.transpose();
  return forward;
}

RankBackward rank_backward_attention(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                                     const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                                     const RankForward& forward, const ConstMatrixMap& d_out) {
  const std::int64_t head_dim = geometry.head_dim();
  const std::int64_t seq = tokens.seq;
  const ProjectedTokens& p = forward.projected;
  RankBackward backward;
  Parameters& grads = backward.gradients;

  // out = context @ o_proj^T: d(o_proj) = d_out^T @ context, d(context) = d_out @ o_proj.
  const ConstMatrixMap o_proj = as_matrix(shard.o_proj, shard.o_proj.shape[0]);
  grads.o_proj = Tensor(shard.o_proj.shape);
  as_matrix(grads.o_proj, grads.o_proj.shape[0]).noalias() = d_out.transpose() * forward.context;
  if (shard.o_bias) grads.o_bias = column_sums(d_out);
  RowMatrix d_context = d_out * o_proj;

  // Per (batch row, KV head): d_k and d_v come back summed over the group's query heads.
  RowMatrix& d_q = backward.d_q;
  RowMatrix& d_k = backward.d_k;
  RowMatrix& d_v = backward.d_v;
  d_q.resize(p.q.rows(), p.q.cols());
  d_k.resize(p.k.rows(), p.k.cols());
  d_v.resize(p.v.rows(), p.v.cols());
  const ScoreSpec score = ScoreSpec::for_geometry(geometry);
  const std::int64_t group = heads.group_size();
  const std::int64_t group_width = group * head_dim;
  const std::int64_t tasks = tokens.batch * heads.num_kv_heads;
  const bool parallel = worth_parallel(tasks, 5 * group * seq * seq * head_dim);
  // Sink gradients per task ([tasks, group]), summed over batch rows in task order after the loop, so
  // that no two threads write one value and the sum does not depend on the thread count.
  std::vector<double> task_sinks(shard.sinks ? static_cast<std::size_t>(tasks * group) : 0, 0.0);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t b = task / heads.num_kv_heads;
    const std::int64_t g = task % heads.num_kv_heads;
    const MaskSpec mask = MaskSpec::for_geometry(geometry, seq, seq, key_lengths[b]);
    attention_group_backward(
        p.q.block(b * seq, g * group_width, seq, group_width), p.k.block(b * seq, g * head_dim, seq, head_dim),
        p.v.block(b * seq, g * head_dim, seq, head_dim), mask, score.with_sinks(shard.sinks, g * group, group),
        d_context.block(b * seq, g * group_width, seq, group_width),
        d_q.block(b * seq, g * group_width, seq, group_width), d_k.block(b * seq, g * head_dim, seq, head_dim),
        d_v.block(b * seq, g * head_dim, seq, head_dim), task_sinks.empty() ? nullptr : &task_sinks[task * group]);
  }
  if (shard.sinks) {
    grads.sinks = Tensor(shard.sinks->shape);  // [local query heads]; head g * group + j of task (b, g)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t g = task % heads.num_kv_heads;
      for (std::int64_t j = 0; j < group; ++j) grads.sinks->values[g * group + j] += task_sinks[task * group + j];
    }
  }

  // Undo RoPE (rotate back); QK-norm's backward is stage 2's.
  apply_rope(d_q, tokens.positions, heads.num_heads, geometry, RopeDirection::backward);
  apply_rope(d_k, tokens.positions, heads.num_kv_heads, geometry, RopeDirection::backward);
  return backward;
}

NormSums rank_norm_dots(const Parameters& shard, const RankForward& forward, const RankBackward& backward) {
  const ProjectedTokens& p = forward.projected;
  return {.q = full_width_dot(backward.d_q, p.q_input, p.q_inverse_rms, as_row_vector(*shard.q_norm)),
          .k = full_width_dot(backward.d_k, p.k_input, p.k_inverse_rms, as_row_vector(*shard.k_norm))};
}

void rank_backward_finish(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                          const TokenBlock& tokens, const RankForward& forward, const NormSums* all_reduced_dots,
                          bool subtract_kv_dot_term, RankBackward& backward) {
  const std::int64_t head_dim = geometry.head_dim();
  const ProjectedTokens& p = forward.projected;
  Parameters& grads = backward.gradients;
  RowMatrix& d_q = backward.d_q;
  RowMatrix& d_k = backward.d_k;
  RowMatrix& d_v = backward.d_v;
  if (geometry.qk_norm_full_width()) {
    if (all_reduced_dots == nullptr) {
      throw std::logic_error("rank_backward_finish: a whole-width QK-norm needs the all-reduced sums of dn * n");
    }
    RowVector d_q_norm = RowVector::Zero(d_q.cols());
    RowVector d_k_norm = RowVector::Zero(d_k.cols());
    full_width_norm_backward(d_q, p.q_input, p.q_inverse_rms, as_row_vector(*shard.q_norm), all_reduced_dots->q,
                             geometry.query_width(), true, d_q_norm);
    full_width_norm_backward(d_k, p.k_input, p.k_inverse_rms, as_row_vector(*shard.k_norm), all_reduced_dots->k,
                             geometry.kv_width(), subtract_kv_dot_term, d_k_norm);
    grads.q_norm = to_tensor(d_q_norm, {d_q_norm.size()});
    grads.k_norm = to_tensor(d_k_norm, {d_k_norm.size()});
  } else if (geometry.qk_norm() != QkNorm::none) {
    RowVector d_q_norm = RowVector::Zero(head_dim);
    RowVector d_k_norm = RowVector::Zero(head_dim);
    qk_norm_backward(d_q, p.q_input, p.q_inverse_rms, as_row_vector(*shard.q_norm), heads.num_heads, geometry,
                     d_q_norm);
    qk_norm_backward(d_k, p.k_input, p.k_inverse_rms, as_row_vector(*shard.k_norm), heads.num_kv_heads, geometry,
                     d_k_norm);
    grads.q_norm = to_tensor(d_q_norm, {head_dim});
    grads.k_norm = to_tensor(d_k_norm, {head_dim});
  }

  // q = x @ q_proj^T + q_bias (k, v alike): d(q_proj) = d_q^T @ x, d(q_bias) = column sums, dx = d_q @ q_proj.
  auto projection_gradients = [&](const RowMatrix& d_projected, const Tensor& weight, Tensor& d_weight,
                                  const std::optional<Tensor>& bias, std::optional<Tensor>& d_bias) {
    d_weight = Tensor(weight.shape);
    as_matrix(d_weight, d_weight.shape[0]).noalias() = d_projected.transpose() * tokens.x;
    if (bias) d_bias = column_sums(d_projected);
    backward.dx.noalias() += d_projected * as_matrix(weight, weight.shape[0]);
  };
  backward.dx = RowMatrix::Zero(tokens.x.rows(), tokens.x.cols());
  projection_gradients(d_q, shard.q_proj, grads.q_proj, shard.q_bias, grads.q_bias);
  projection_gradients(d_k, shard.k_proj, grads.k_proj, shard.k_bias, grads.k_bias);
  projection_gradients(d_v, shard.v_proj, grads.v_proj, shard.v_bias, grads.v_bias);
  d_q.resize(0, 0);  // spent
  d_k.resize(0, 0);
  d_v.resize(0, 0);
}

RankBackward rank_backward(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                           const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                           const RankForward& forward, const ConstMatrixMap& d_out) {
  RankBackward backward = rank_backward_attention(geometry, heads, shard, tokens, key_lengths, forward, d_out);
  rank_backward_finish(geometry, heads, shard, tokens, forward, nullptr, true, backward);
  return backward;
}

}  // namespace attncheck::reference
