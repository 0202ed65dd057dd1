#include "reference/latent_layer.hpp"

#include <vector>

#include "reference/attention_head.hpp"
#include "reference/parallel.hpp"
#include "reference/qk_norm.hpp"
#include "reference/rope.hpp"

namespace attncheck::reference {

namespace {

ConstMatrixMap weight(const Tensor& tensor) { return as_matrix(tensor, tensor.shape[0]); }

RowVector as_row_vector(const Tensor& tensor) { return Eigen::Map<const RowVector>(tensor.data(), tensor.numel()); }

// x @ W^T for W [out, in] as nn.Linear stores it (latent attention's projections have no biases).
RowMatrix linear(const ConstMatrixRef& x, const Tensor& w) {
  RowMatrix out(x.rows(), w.shape[0]);
  out.noalias() = x * weight(w).transpose();
  return out;
}

// A latent RMSNorm over the whole row, in place: rows / sqrt(mean(rows^2) + eps) * w.
void latent_norm_forward(RowMatrix& rows, const Tensor& norm_weight, double eps, RowMatrix& inverse_rms) {
  full_width_norm_forward(rows, as_row_vector(norm_weight), full_width_sum_squares(rows), rows.cols(), eps,
                          inverse_rms);
}

// Replaces d(y) by d(x) and returns d(w) for a latent RMSNorm whose input was `input`.
Tensor latent_norm_backward(RowMatrix& gradient, const RowMatrix& input, const RowMatrix& inverse_rms,
                            const Tensor& norm_weight) {
  const RowVector w = as_row_vector(norm_weight);
  const RowVector dot = full_width_dot(gradient, input, inverse_rms, w);
  RowVector d_weight = RowVector::Zero(w.size());
  full_width_norm_backward(gradient, input, inverse_rms, w, dot, input.cols(), true, d_weight);
  return to_tensor(d_weight, {d_weight.size()});
}

RopeLayout k_pe_layout(const LatentAttentionSpec& latent) { return {latent.qk_rope_head_dim, 0}; }

}  // namespace

LatentProjected latent_project(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                               const TokenBlock& tokens, bool expand) {
  const LatentAttentionSpec& latent = *geometry.latent();
  const double eps = latent.latent_norm_eps;
  LatentProjected p;
  if (shard.q_a_proj) {
    p.c_q_input = linear(tokens.x, *shard.q_a_proj);
    p.c_q = p.c_q_input;
    latent_norm_forward(p.c_q, *shard.q_a_layernorm, eps, p.c_q_inverse_rms);
    p.q = linear(p.c_q, *shard.q_b_proj);
  } else {
    p.q = linear(tokens.x, shard.q_proj);
  }
  const RowMatrix kv_a = linear(tokens.x, *shard.kv_a_proj_with_mqa);  // [tokens, kv_lora_rank + qk_rope_head_dim]
  p.c_kv_input = kv_a.leftCols(latent.kv_lora_rank);
  p.c_kv = p.c_kv_input;
  latent_norm_forward(p.c_kv, *shard.kv_a_layernorm, eps, p.c_kv_inverse_rms);
  p.k_pe = kv_a.rightCols(latent.qk_rope_head_dim);
  apply_rope(p.k_pe, tokens.positions, 1, geometry, k_pe_layout(latent), RopeDirection::forward);
  apply_rope(p.q, tokens.positions, heads, geometry, RopeDirection::forward);  // each head's last rope channels
  if (!expand) return p;

  const std::int64_t nope = latent.qk_nope_head_dim, rope = latent.qk_rope_head_dim, v_dim = latent.v_head_dim;
  const std::int64_t qk = latent.qk_head_dim(), per_head = latent.kv_b_rows_per_head();
  const RowMatrix kv = linear(p.c_kv, *shard.kv_b_proj);  // [tokens, heads * (nope + v)]
  const std::int64_t rows = kv.rows();
  p.k.resize(rows, heads * qk);
  p.v.resize(rows, heads * v_dim);
  for (std::int64_t h = 0; h < heads; ++h) {
    p.k.middleCols(h * qk, nope) = kv.middleCols(h * per_head, nope);
    p.k.middleCols(h * qk + nope, rope) = p.k_pe;
    p.v.middleCols(h * v_dim, v_dim) = kv.middleCols(h * per_head + nope, v_dim);
  }
  return p;
}

LatentForward latent_rank_forward(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                                  const TokenBlock& tokens, std::span<const std::int64_t> key_lengths) {
  const std::int64_t qk = geometry.head_dim(), v_dim = geometry.v_head_dim(), seq = tokens.seq;
  LatentForward forward;
  forward.projected = latent_project(geometry, heads, shard, tokens);
  const LatentProjected& p = forward.projected;
  forward.context.resize(p.q.rows(), heads * v_dim);
  forward.log_sum_exp.resize(tokens.batch * heads, seq);
  const ScoreSpec score = ScoreSpec::for_geometry(geometry);
  // One task per (batch row, head): the expanded form is multi-head attention with qk- and v-wide heads.
  const std::int64_t tasks = tokens.batch * heads;
  const bool parallel = worth_parallel(tasks, seq * seq * (qk + v_dim));
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t b = task / heads;
    const std::int64_t h = task % heads;
    const MaskSpec mask = MaskSpec::for_geometry(geometry, seq, seq, key_lengths[b]);
    attention_group_forward(p.q.block(b * seq, h * qk, seq, qk), p.k.block(b * seq, h * qk, seq, qk),
                            p.v.block(b * seq, h * v_dim, seq, v_dim), mask, score.with_sinks(shard.sinks, h, 1),
                            forward.context.block(b * seq, h * v_dim, seq, v_dim),
                            forward.log_sum_exp.row(b * heads + h).data());
  }
  forward.partial_out = linear(forward.context, shard.o_proj);
  return forward;
}

LatentBackward latent_rank_backward(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                                    const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                                    const LatentForward& forward, const ConstMatrixMap& d_out) {
  const LatentAttentionSpec& latent = *geometry.latent();
  const std::int64_t nope = latent.qk_nope_head_dim, rope = latent.qk_rope_head_dim, v_dim = latent.v_head_dim;
  const std::int64_t qk = latent.qk_head_dim(), per_head = latent.kv_b_rows_per_head(), seq = tokens.seq;
  const LatentProjected& p = forward.projected;
  LatentBackward backward;
  Parameters& grads = backward.gradients;
  grads.latent = true;

  // out = context @ o_proj^T.
  grads.o_proj = Tensor(shard.o_proj.shape);
  as_matrix(grads.o_proj, grads.o_proj.shape[0]).noalias() = d_out.transpose() * forward.context;
  const RowMatrix d_context = d_out * weight(shard.o_proj);

  RowMatrix d_q(p.q.rows(), p.q.cols()), d_k(p.k.rows(), p.k.cols()), d_v(p.v.rows(), p.v.cols());
  const ScoreSpec score = ScoreSpec::for_geometry(geometry);
  const std::int64_t tasks = tokens.batch * heads;
  const bool parallel = worth_parallel(tasks, 2 * seq * seq * (qk + v_dim));
  std::vector<double> task_sinks(shard.sinks ? static_cast<std::size_t>(tasks) : 0, 0.0);  // [tasks]
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t b = task / heads;
    const std::int64_t h = task % heads;
    const MaskSpec mask = MaskSpec::for_geometry(geometry, seq, seq, key_lengths[b]);
    attention_group_backward(p.q.block(b * seq, h * qk, seq, qk), p.k.block(b * seq, h * qk, seq, qk),
                             p.v.block(b * seq, h * v_dim, seq, v_dim), mask, score.with_sinks(shard.sinks, h, 1),
                             d_context.block(b * seq, h * v_dim, seq, v_dim), d_q.block(b * seq, h * qk, seq, qk),
                             d_k.block(b * seq, h * qk, seq, qk), d_v.block(b * seq, h * v_dim, seq, v_dim),
                             task_sinks.empty() ? nullptr : &task_sinks[task]);
  }
  if (shard.sinks) {
    grads.sinks = Tensor(shard.sinks->shape);  // summed over batch rows in task order
    for (std::int64_t task = 0; task < tasks; ++task) grads.sinks->values[task % heads] += task_sinks[task];
  }

  // RoPE backward: each head's q rope part; k_pe is shared, so its gradient is the heads' sum (head order).
  apply_rope(d_q, tokens.positions, heads, geometry, RopeDirection::backward);
  RowMatrix d_k_pe = RowMatrix::Zero(d_k.rows(), rope);
  for (std::int64_t h = 0; h < heads; ++h) d_k_pe += d_k.middleCols(h * qk + nope, rope);
  apply_rope(d_k_pe, tokens.positions, 1, geometry, k_pe_layout(latent), RopeDirection::backward);

  // kv = c_kv @ kv_b_proj^T, head h's columns [k_nope_h, v_h].
  RowMatrix d_kv(d_k.rows(), heads * per_head);
  for (std::int64_t h = 0; h < heads; ++h) {
    d_kv.middleCols(h * per_head, nope) = d_k.middleCols(h * qk, nope);
    d_kv.middleCols(h * per_head + nope, v_dim) = d_v.middleCols(h * v_dim, v_dim);
  }
  grads.kv_b_proj = Tensor(shard.kv_b_proj->shape);
  as_matrix(*grads.kv_b_proj, grads.kv_b_proj->shape[0]).noalias() = d_kv.transpose() * p.c_kv;
  RowMatrix d_c_kv = d_kv * weight(*shard.kv_b_proj);
  grads.kv_a_layernorm = latent_norm_backward(d_c_kv, p.c_kv_input, p.c_kv_inverse_rms, *shard.kv_a_layernorm);

  // kv_a = x @ kv_a_proj_with_mqa^T = [c_kv input, k_pe before RoPE].
  RowMatrix d_kv_a(d_c_kv.rows(), latent.kv_a_rows());
  d_kv_a.leftCols(latent.kv_lora_rank) = d_c_kv;
  d_kv_a.rightCols(rope) = d_k_pe;
  grads.kv_a_proj_with_mqa = Tensor(shard.kv_a_proj_with_mqa->shape);
  as_matrix(*grads.kv_a_proj_with_mqa, grads.kv_a_proj_with_mqa->shape[0]).noalias() = d_kv_a.transpose() * tokens.x;
  backward.dx = d_kv_a * weight(*shard.kv_a_proj_with_mqa);

  if (shard.q_a_proj) {  // q = q_b_proj(q_a_layernorm(q_a_proj(x)))
    grads.q_b_proj = Tensor(shard.q_b_proj->shape);
    as_matrix(*grads.q_b_proj, grads.q_b_proj->shape[0]).noalias() = d_q.transpose() * p.c_q;
    RowMatrix d_c_q = d_q * weight(*shard.q_b_proj);
    grads.q_a_layernorm = latent_norm_backward(d_c_q, p.c_q_input, p.c_q_inverse_rms, *shard.q_a_layernorm);
    grads.q_a_proj = Tensor(shard.q_a_proj->shape);
    as_matrix(*grads.q_a_proj, grads.q_a_proj->shape[0]).noalias() = d_c_q.transpose() * tokens.x;
    backward.dx.noalias() += d_c_q * weight(*shard.q_a_proj);
  } else {  // q = q_proj(x)
    grads.q_proj = Tensor(shard.q_proj.shape);
    as_matrix(grads.q_proj, grads.q_proj.shape[0]).noalias() = d_q.transpose() * tokens.x;
    backward.dx.noalias() += d_q * weight(shard.q_proj);
  }
  return backward;
}

LatentCache::LatentCache(const Geometry& geometry, LatentDecodeForm form, std::int64_t batch, std::int64_t heads,
                         std::int64_t max_seq)
    : form_(form),
      cache_(form == LatentDecodeForm::expanded
                 ? KvCache(batch, heads, max_seq, geometry.head_dim(), geometry.v_head_dim())
                 : KvCache(batch, 1, max_seq, geometry.latent()->absorbed_cache_elements(),
                           geometry.latent()->kv_lora_rank)) {}

RowMatrix latent_decode_call(const Geometry& geometry, std::int64_t heads, const Parameters& shard,
                             const TokenBlock& tokens, std::span<const std::int64_t> key_lengths,
                             LatentCache& cache) {
  const LatentAttentionSpec& latent = *geometry.latent();
  const std::int64_t nope = latent.qk_nope_head_dim, rope = latent.qk_rope_head_dim, v_dim = latent.v_head_dim;
  const std::int64_t qk = latent.qk_head_dim(), per_head = latent.kv_b_rows_per_head();
  const std::int64_t lora = latent.kv_lora_rank, key_width = latent.absorbed_cache_elements();
  const std::int64_t count = tokens.seq;
  const bool expanded = cache.form() == LatentDecodeForm::expanded;
  const LatentProjected p = latent_project(geometry, heads, shard, tokens, expanded);
  const ScoreSpec score = ScoreSpec::for_geometry(geometry);
  KvCache& kv_cache = cache.cache();
  RowMatrix context(p.q.rows(), heads * v_dim);

  if (expanded) {
    kv_cache.append(p.k, p.v, count);
    for (std::int64_t task = 0; task < tokens.batch * heads; ++task) {
      const std::int64_t b = task / heads;
      const std::int64_t h = task % heads;
      const MaskSpec mask = MaskSpec::for_geometry(geometry, count, kv_cache.length(), key_lengths[b]);
      attention_group_forward(p.q.block(b * count, h * qk, count, qk), kv_cache.keys(b, h), kv_cache.values(b, h),
                              mask, score.with_sinks(shard.sinks, h, 1),
                              context.block(b * count, h * v_dim, count, v_dim), nullptr);
    }
  } else {
    // Keys [c_kv, RoPE(k_pe)] and values c_kv, once for every head.
    RowMatrix keys(p.c_kv.rows(), key_width);
    keys.leftCols(lora) = p.c_kv;
    keys.rightCols(rope) = p.k_pe;
    kv_cache.append(keys, p.c_kv, count);
    // Head h's absorbed query [q_nope_h @ W_UK_h, q_pe_h]; W_UK_h = kv_b_proj rows of k_nope_h [nope, lora].
    const ConstMatrixMap kv_b = weight(*shard.kv_b_proj);
    RowMatrix q_absorbed(p.q.rows(), heads * key_width);
    for (std::int64_t h = 0; h < heads; ++h) {
      q_absorbed.middleCols(h * key_width, lora).noalias() =
          p.q.middleCols(h * qk, nope) * kv_b.middleRows(h * per_head, nope);
      q_absorbed.middleCols(h * key_width + lora, rope) = p.q.middleCols(h * qk + nope, rope);
    }
    // Every head of the rank reads the one latent "KV head": a group of all of them.
    RowMatrix latent_context(p.q.rows(), heads * lora);
    for (std::int64_t b = 0; b < tokens.batch; ++b) {
      const MaskSpec mask = MaskSpec::for_geometry(geometry, count, kv_cache.length(), key_lengths[b]);
      attention_group_forward(q_absorbed.middleRows(b * count, count), kv_cache.keys(b, 0), kv_cache.values(b, 0),
                              mask, score.with_sinks(shard.sinks, 0, heads),
                              latent_context.middleRows(b * count, count), nullptr);
    }
    // Head h's context c_h @ W_UV_h^T; W_UV_h = kv_b_proj rows of v_h [v_dim, lora].
    for (std::int64_t h = 0; h < heads; ++h) {
      context.middleCols(h * v_dim, v_dim).noalias() =
          latent_context.middleCols(h * lora, lora) * kv_b.middleRows(h * per_head + nope, v_dim).transpose();
    }
  }
  return linear(context, shard.o_proj);
}

}  // namespace attncheck::reference
