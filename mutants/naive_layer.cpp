#include "mutants/naive_layer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "core/tp/tp_shard.hpp"
#include "reference/rope.hpp"

namespace attncheck::mutants {

using reference::as_matrix;
using reference::RowVector;

std::int64_t NaiveLayer::aligned_key(const MaskQuery& query) const {
  return query.query + query.seq_k - query.seq_q;
}

KeyRange NaiveLayer::visible_keys(const Geometry& geometry, const MaskQuery& query) const {
  const std::int64_t aligned = aligned_key(query);
  KeyRange keys{.begin = 0, .end = std::min(query.key_length, query.seq_k)};
  if (geometry.sliding_window()) keys.begin = std::max<std::int64_t>(0, aligned - *geometry.sliding_window() + 1);
  if (geometry.causal()) keys.end = std::min(keys.end, aligned + 1);
  return keys;
}

KeyRange NaiveLayer::cached_keys_seen(const Geometry&, const MaskQuery& query, KeyRange visible) const {
  return {.begin = visible.begin, .end = std::min(visible.end, query.cached_keys)};
}

std::optional<std::int64_t> NaiveLayer::rolling_cache_slots(const Geometry& geometry) const {
  return geometry.sliding_window();
}

std::int64_t NaiveLayer::rolling_read_start(std::int64_t past, std::int64_t kept, std::int64_t slots) const {
  return (past - kept) % slots;
}

std::int64_t NaiveLayer::heads_per_norm(std::int64_t) const {
  return 1;
}

bool NaiveLayer::norm_before_rope() const {
  return true;
}

bool NaiveLayer::norm_sums_all_reduced() const {
  return true;
}

bool NaiveLayer::counts_kv_norm_channels(const TpPlan& plan, int rank) const {
  return rank == plan.replica_groups[plan.ranks[rank].replica_group].ranks.begin;
}

void NaiveLayer::probabilities_without_keys(Eigen::Ref<reference::RowVector>) const {}

double NaiveLayer::softmax_shift(double row_maximum) const {
  return row_maximum;
}

RowMatrix NaiveLayer::head_context(const RowMatrix&, std::span<const KeyRange>, const ConstMatrixRef& v,
                                   const RowMatrix& probabilities) const {
  return probabilities * v;
}

void NaiveLayer::store_query_gradient(MatrixRef d_q_head, const RowMatrix& gradient) const {
  d_q_head = gradient;
}

void NaiveLayer::add_kv_gradient(MatrixRef kv_gradient, const RowMatrix& head_share) const {
  kv_gradient += head_share;
}

std::vector<Parameters> NaiveLayer::reduce_gradients(const std::vector<Parameters>& rank_partials,
                                                     const TpPlan& plan) const {
  return reduce_rank_gradients(rank_partials, plan);
}

bool NaiveLayer::o_bias_on_every_rank() const {
  return false;
}

std::optional<double> NaiveLayer::sink_logit(const Parameters& shard, std::int64_t local_head) const {
  if (!shard.sinks) return std::nullopt;
  return shard.sinks->values[static_cast<std::size_t>(local_head)];
}

Parameters NaiveLayer::rank_shard(const Parameters& weights, const TpPlan& plan, int rank) const {
  return shard_parameters(weights, plan, rank);
}

RopeFrequencies NaiveLayer::call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const {
  return call_rope_frequencies(geometry, positions);
}

namespace {

RowMatrix linear(const RowMatrix& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  RowMatrix out = x * as_matrix(weight, weight.shape[0]).transpose();
  if (bias) out.rowwise() += as_matrix(*bias, 1).row(0);
  return out;
}

Tensor column_sums(const RowMatrix& matrix) {
  const RowVector sums = matrix.colwise().sum();
  return Tensor({sums.size()}, std::vector<double>(sums.data(), sums.data() + sums.size()));
}

// Rows [first, first + count) of every batch row of a [batch * seq, width] matrix, as [batch * count, width].
RowMatrix token_rows(const RowMatrix& all, std::int64_t batch, std::int64_t seq, std::int64_t first,
                     std::int64_t count) {
  RowMatrix rows(batch * count, all.cols());
  for (std::int64_t b = 0; b < batch; ++b) rows.middleRows(b * count, count) = all.middleRows(b * seq + first, count);
  return rows;
}

}  // namespace

// A block of tokens projected by one rank: q, k, v after QK-norm and RoPE, and what the backward needs.
struct Projected {
  RowMatrix q, k, v;
  RowMatrix q_input, k_input;              // before QK-norm
  RowMatrix q_inverse_rms, k_inverse_rms;  // [tokens, heads / heads_per_norm(heads)]; whole width: [tokens, 1]
};

// A whole-width norm's per-token sums for q and k over the whole width, all ranks' parts all-reduced:
// of squares (forward), of dn * n (backward). [tokens] each; empty for other norms.
struct WidthSums {
  Eigen::VectorXd q, k;
};

// Probabilities (and tanh of the scaled scores, with a softcap) of one (batch row, query head), and the
// sink's probability per query (with a sink; 1 for a query that sees no key).
struct HeadAttention {
  RowMatrix probabilities;
  RowMatrix tanh;
  Eigen::VectorXd sink_probability;
};

// One rank of the layer: its shard, its local heads, and the layer whose steps it takes.
struct RankComputation {
  RankComputation(const NaiveLayer& steps, const TpPlan& plan, int rank_index, const Parameters& rank_shard)
      : layer(steps),
        geometry(plan.geometry),
        rank(rank_index),
        tp_size(plan.tp_size),
        shard(rank_shard),
        heads(plan.ranks[rank_index].q_heads.size()),
        kv_heads(plan.ranks[rank_index].kv_heads.size()),
        head_dim(geometry.head_dim()) {}

  const NaiveLayer& layer;
  const Geometry& geometry;
  int rank;
  int tp_size;
  const Parameters& shard;
  std::int64_t heads;     // local query heads; local head h reads local KV head h / (heads / kv_heads)
  std::int64_t kv_heads;  // local KV heads
  std::int64_t head_dim;

  // The RoPE frequencies of one call at these positions, as the layer computes them.
  RopeFrequencies frequencies(std::span<const std::int64_t> positions) const {
    return layer.call_frequencies(geometry, positions);
  }

  // q, k, v of a block of tokens.
  // sums: a whole-width norm's all-reduced sums of squares for x's rows (else unused).
  Projected project(const RowMatrix& x, std::span<const std::int64_t> positions, const WidthSums& sums) const {
    Projected p{.q = linear(x, shard.q_proj, shard.q_bias),
                .k = linear(x, shard.k_proj, shard.k_bias),
                .v = linear(x, shard.v_proj, shard.v_bias)};
    const RopeFrequencies rope = frequencies(positions);
    const auto rotate = [&] {
      reference::apply_rope(p.q, positions, heads, geometry, rope, reference::RopeDirection::forward);
      reference::apply_rope(p.k, positions, kv_heads, geometry, rope, reference::RopeDirection::forward);
    };
    if (!layer.norm_before_rope()) rotate();
    if (geometry.qk_norm() != QkNorm::none) {
      p.q_input = p.q;
      p.k_input = p.k;
      normalise(p.q, *shard.q_norm, heads, geometry.query_width(), sums.q, p.q_inverse_rms);
      normalise(p.k, *shard.k_norm, kv_heads, geometry.kv_width(), sums.k, p.k_inverse_rms);
    }
    if (layer.norm_before_rope()) rotate();
    return p;
  }

  // One query head over its KV head: q [seq_q, head_dim], k and v [seq_k, head_dim], the first
  // cached_keys of them from the KV cache. Returns the probabilities (and tanh, with a softcap) and
  // writes the context [seq_q, head_dim]. Each query's softmax runs over two runs of keys, the cached ones
  // it sees (cached_keys_seen) and the call's own, as a prefix-prefill kernel loops over them.
  HeadAttention attend(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                       std::int64_t key_length, std::int64_t cached_keys, std::int64_t local_head,
                       MatrixRef context) const {
    const std::optional<double> sink = layer.sink_logit(shard, local_head);
    const std::int64_t seq_q = q.rows(), seq_k = k.rows();
    HeadAttention head;
    RowMatrix scores = geometry.scale() * (q * k.transpose());
    if (geometry.softcap()) {
      head.tanh = (scores.array() / *geometry.softcap()).tanh().matrix();
      scores = *geometry.softcap() * head.tanh;
    }
    head.probabilities = RowMatrix::Zero(seq_q, seq_k);
    if (sink) head.sink_probability = Eigen::VectorXd::Ones(seq_q);
    std::vector<KeyRange> visible_keys(static_cast<std::size_t>(seq_q));
    for (std::int64_t i = 0; i < seq_q; ++i) {
      const MaskQuery query{.query = i,
                            .seq_q = seq_q,
                            .seq_k = seq_k,
                            .key_length = key_length,
                            .cached_keys = cached_keys,
                            .rank = rank,
                            .tp_size = tp_size};
      const KeyRange keys = layer.visible_keys(geometry, query);
      visible_keys[i] = keys;
      const KeyRange runs[] = {layer.cached_keys_seen(geometry, query, keys),
                               {.begin = std::max(keys.begin, cached_keys), .end = keys.end}};
      double maximum = -std::numeric_limits<double>::infinity();
      for (const KeyRange& run : runs) {
        if (run.end > run.begin)
          maximum = std::max(maximum, scores.row(i).segment(run.begin, run.end - run.begin).maxCoeff());
      }
      if (maximum ==
          -std::numeric_limits<double>::infinity()) {  // a query that sees no key: probabilities and context 0
        layer.probabilities_without_keys(head.probabilities.row(i));
        continue;
      }
      const double shift = layer.softmax_shift(sink ? std::max(maximum, *sink) : maximum);
      const double sink_term = sink ? std::exp(*sink - shift) : 0.0;
      double sum = sink_term;
      for (const KeyRange& run : runs) {
        if (run.end <= run.begin) continue;
        auto exps = head.probabilities.row(i).segment(run.begin, run.end - run.begin);
        exps = (scores.row(i).segment(run.begin, run.end - run.begin).array() - shift).exp().matrix();
        sum += exps.sum();
      }
      head.probabilities.row(i) /= sum;
      if (sink) head.sink_probability(i) = sink_term / sum;
    }
    context = layer.head_context(scores, visible_keys, v, head.probabilities);
    return head;
  }

  // QK-norm in place over units of heads_per_norm(head_count) heads; inverse_rms [tokens, units]. A
  // whole-width norm: one unit, the row, divided by the rms over whole_width channels from the all-reduced
  // sums (or, when the layer does not reduce, its own row's).
  void normalise(RowMatrix& rows, const Tensor& weight, std::int64_t head_count, std::int64_t whole_width,
                 const Eigen::VectorXd& all_reduced_sums, RowMatrix& inverse_rms) const {
    if (geometry.qk_norm_full_width()) {
      const bool reduced = layer.norm_sums_all_reduced();
      const double width = static_cast<double>(reduced ? whole_width : rows.cols());
      const RowVector factor = norm_factor(weight);
      inverse_rms.resize(rows.rows(), 1);
      for (std::int64_t t = 0; t < rows.rows(); ++t) {
        const double sum = reduced ? all_reduced_sums(t) : rows.row(t).squaredNorm();
        inverse_rms(t, 0) = 1.0 / std::sqrt(sum / width + geometry.qk_norm_eps());
        rows.row(t) = rows.row(t).cwiseProduct(factor) * inverse_rms(t, 0);
      }
      return;
    }
    const std::int64_t unit_heads = layer.heads_per_norm(head_count);
    const std::int64_t width = unit_heads * head_dim;
    const RowVector factor = norm_factor(weight).replicate(1, unit_heads);
    inverse_rms.resize(rows.rows(), head_count / unit_heads);
    for (std::int64_t t = 0; t < rows.rows(); ++t) {
      for (std::int64_t unit = 0; unit < head_count / unit_heads; ++unit) {
        auto channels = rows.row(t).segment(unit * width, width);
        inverse_rms(t, unit) = 1.0 / std::sqrt(channels.squaredNorm() / width + geometry.qk_norm_eps());
        channels = (channels.array() * inverse_rms(t, unit) * factor.array()).matrix();
      }
    }
  }

  // A whole-width norm's part of each token's sum of dn * n over this rank's channels.
  Eigen::VectorXd width_dot(const RowMatrix& gradient, const RowMatrix& input, const RowMatrix& inverse_rms,
                            const Tensor& weight) const {
    const RowVector factor = norm_factor(weight);
    Eigen::VectorXd dots(gradient.rows());
    for (std::int64_t t = 0; t < gradient.rows(); ++t) {
      dots(t) = gradient.row(t).cwiseProduct(factor).dot(input.row(t) * inverse_rms(t, 0));
    }
    return dots;
  }

  // A whole-width norm's backward on this rank's channels: d(input) = inv * (dn - n * dot / width) with
  // the all-reduced dots (or, when the layer does not reduce, its own); the n * dot term only where
  // subtract_term (a replicated KV head's first replica applies it, for the whole group).
  void width_normalise_backward(RowMatrix& gradient, const RowMatrix& input, const RowMatrix& inverse_rms,
                                const Tensor& weight, std::int64_t whole_width, const Eigen::VectorXd& all_reduced_dots,
                                bool subtract_term, RowVector& weight_gradient) const {
    const bool reduced = layer.norm_sums_all_reduced();
    const Eigen::VectorXd own = reduced ? Eigen::VectorXd() : width_dot(gradient, input, inverse_rms, weight);
    const double width = static_cast<double>(reduced ? whole_width : gradient.cols());
    const RowVector factor = norm_factor(weight);
    for (std::int64_t t = 0; t < gradient.rows(); ++t) {
      const RowVector normalised = input.row(t) * inverse_rms(t, 0);
      weight_gradient += gradient.row(t).cwiseProduct(normalised);
      RowVector d_normalised = gradient.row(t).cwiseProduct(factor);
      if (subtract_term || !reduced) d_normalised -= ((reduced ? all_reduced_dots(t) : own(t)) / width) * normalised;
      gradient.row(t) = inverse_rms(t, 0) * d_normalised;
    }
  }

  // Replaces d(normalised) by d(input) and adds d(weight) into weight_gradient.
  void normalise_backward(RowMatrix& gradient, const RowMatrix& input, const RowMatrix& inverse_rms,
                          const Tensor& weight, std::int64_t head_count, RowVector& weight_gradient) const {
    const std::int64_t unit_heads = layer.heads_per_norm(head_count);
    const std::int64_t width = unit_heads * head_dim;
    const RowVector factor = norm_factor(weight).replicate(1, unit_heads);
    for (std::int64_t t = 0; t < gradient.rows(); ++t) {
      for (std::int64_t unit = 0; unit < head_count / unit_heads; ++unit) {
        const double inverse = inverse_rms(t, unit);
        const RowVector normalised = input.row(t).segment(unit * width, width) * inverse;
        auto d_y = gradient.row(t).segment(unit * width, width);
        for (std::int64_t h = 0; h < unit_heads; ++h) {
          weight_gradient +=
              d_y.segment(h * head_dim, head_dim).cwiseProduct(normalised.segment(h * head_dim, head_dim));
        }
        const RowVector d_normalised = d_y.cwiseProduct(factor);
        d_y = inverse * (d_normalised - (d_normalised.dot(normalised) / width) * normalised);
      }
    }
  }

  // The layer's steps, for the passes below.
  bool norm_before_rope() const { return layer.norm_before_rope(); }
  void store_query_gradient(MatrixRef d_q_head, const RowMatrix& gradient) const {
    layer.store_query_gradient(d_q_head, gradient);
  }
  std::optional<std::int64_t> rolling_cache_slots() const { return layer.rolling_cache_slots(geometry); }
  std::int64_t rolling_read_start(std::int64_t past, std::int64_t kept, std::int64_t slots) const {
    return layer.rolling_read_start(past, kept, slots);
  }
  void add_kv_gradient(MatrixRef kv_gradient, const RowMatrix& head_share) const {
    layer.add_kv_gradient(kv_gradient, head_share);
  }

  RowVector norm_factor(const Tensor& weight) const {
    RowVector factor = as_matrix(weight, 1).row(0);
    if (geometry.qk_norm() == QkNorm::rms_one_plus) factor.array() += 1.0;
    return factor;
  }
};

namespace {

// One rank's forward and backward over the whole sequence: its partial output, dx share and partial
// gradients (shard layout). Between run_rank and finish_rank: the projections and the gradients with
// respect to the normalised q and k (d_q, d_k; d_v).
struct RankPass {
  RowMatrix partial_out;
  RowMatrix dx;
  Parameters gradients;
  Projected projected;
  RowMatrix d_q, d_k, d_v;
};

// RoPE's backward on d_q and d_k (rotating back).
void rotate_back(const RankComputation& rank, std::span<const std::int64_t> positions, RowMatrix& d_q, RowMatrix& d_k) {
  const RopeFrequencies frequencies = rank.frequencies(positions);
  reference::apply_rope(d_q, positions, rank.heads, rank.geometry, frequencies, reference::RopeDirection::backward);
  reference::apply_rope(d_k, positions, rank.kv_heads, rank.geometry, frequencies, reference::RopeDirection::backward);
}

RankPass run_rank(const RankComputation& rank, const Inputs& inputs, const WidthSums& sum_squares) {
  const Geometry& g = rank.geometry;
  const Parameters& shard = rank.shard;
  const std::int64_t batch = inputs.batch, seq = inputs.seq, d = rank.head_dim;
  const std::int64_t group = rank.heads / rank.kv_heads;
  const RowMatrix x = as_matrix(inputs.x, batch * seq);
  RankPass pass;
  pass.projected = rank.project(x, inputs.positions, sum_squares);
  const Projected& p = pass.projected;

  RowMatrix context(batch * seq, rank.heads * d);
  const auto attend = [&](std::int64_t b, std::int64_t h, MatrixRef head_context) {
    const std::int64_t kv = h / group;
    return rank.attend(p.q.block(b * seq, h * d, seq, d), p.k.block(b * seq, kv * d, seq, d),
                       p.v.block(b * seq, kv * d, seq, d), inputs.key_lengths[b], 0, h, head_context);
  };
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < rank.heads; ++h) attend(b, h, context.block(b * seq, h * d, seq, d));
  }
  pass.partial_out = context * as_matrix(shard.o_proj, shard.o_proj.shape[0]).transpose();

  // Backward of sum(out * dout).
  const RowMatrix d_out = as_matrix(inputs.dout, batch * seq);
  Parameters& grads = pass.gradients;
  grads.o_proj = reference::to_tensor(d_out.transpose() * context, shard.o_proj.shape);
  if (shard.o_bias) grads.o_bias = column_sums(d_out);
  const RowMatrix d_context = d_out * as_matrix(shard.o_proj, shard.o_proj.shape[0]);
  RowMatrix& d_q = pass.d_q;
  RowMatrix& d_k = pass.d_k;
  RowMatrix& d_v = pass.d_v;
  d_q = RowMatrix::Zero(batch * seq, rank.heads * d);
  d_k = RowMatrix::Zero(batch * seq, rank.kv_heads * d);
  d_v = RowMatrix::Zero(batch * seq, rank.kv_heads * d);
  RowMatrix recomputed_context(seq, d);  // the forward's, thrown away: only the probabilities are needed
  if (shard.sinks) grads.sinks = Tensor(shard.sinks->shape);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < rank.heads; ++h) {
      const std::int64_t kv = h / group;
      const HeadAttention head = attend(b, h, recomputed_context);
      const RowMatrix& probabilities = head.probabilities;
      const RowMatrix d_context_head = d_context.block(b * seq, h * d, seq, d);
      rank.add_kv_gradient(d_v.block(b * seq, kv * d, seq, d), probabilities.transpose() * d_context_head);
      // Softmax backward p * (dp - sum(p * dp)), then the softcap's 1 - tanh^2, then the scale.
      const RowMatrix d_probabilities = d_context_head * p.v.block(b * seq, kv * d, seq, d).transpose();
      const Eigen::VectorXd weighted = probabilities.cwiseProduct(d_probabilities).rowwise().sum();
      RowMatrix d_scores = probabilities.cwiseProduct(d_probabilities.colwise() - weighted);
      // The sink carries no value (its dp is 0): its logit's gradient is -p_sink * weighted per query.
      if (grads.sinks && head.sink_probability.size() > 0)
        grads.sinks->values[h] -= head.sink_probability.dot(weighted);
      if (g.softcap()) d_scores = d_scores.cwiseProduct((1.0 - head.tanh.array().square()).matrix());
      d_scores *= g.scale();
      rank.store_query_gradient(d_q.block(b * seq, h * d, seq, d), d_scores * p.k.block(b * seq, kv * d, seq, d));
      rank.add_kv_gradient(d_k.block(b * seq, kv * d, seq, d),
                           d_scores.transpose() * p.q.block(b * seq, h * d, seq, d));
    }
  }
  if (rank.norm_before_rope()) rotate_back(rank, inputs.positions, d_q, d_k);
  return pass;
}

// The rest of a rank's backward: QK-norm (a whole-width one with the all-reduced dots) and the
// projections.
void finish_rank(const RankComputation& rank, const Inputs& inputs, const WidthSums& dots, bool subtract_kv_term,
                 RankPass& pass) {
  const Geometry& g = rank.geometry;
  const Parameters& shard = rank.shard;
  const std::int64_t batch = inputs.batch, seq = inputs.seq, d = rank.head_dim;
  const RowMatrix x = as_matrix(inputs.x, batch * seq);
  const Projected& p = pass.projected;
  Parameters& grads = pass.gradients;
  RowMatrix& d_q = pass.d_q;
  RowMatrix& d_k = pass.d_k;
  const RowMatrix& d_v = pass.d_v;
  if (g.qk_norm_full_width()) {
    RowVector d_q_norm = RowVector::Zero(d_q.cols()), d_k_norm = RowVector::Zero(d_k.cols());
    rank.width_normalise_backward(d_q, p.q_input, p.q_inverse_rms, *shard.q_norm, g.query_width(), dots.q, true,
                                  d_q_norm);
    rank.width_normalise_backward(d_k, p.k_input, p.k_inverse_rms, *shard.k_norm, g.kv_width(), dots.k,
                                  subtract_kv_term, d_k_norm);
    grads.q_norm = reference::to_tensor(d_q_norm, {d_q_norm.size()});
    grads.k_norm = reference::to_tensor(d_k_norm, {d_k_norm.size()});
  } else if (g.qk_norm() != QkNorm::none) {
    RowVector d_q_norm = RowVector::Zero(d), d_k_norm = RowVector::Zero(d);
    rank.normalise_backward(d_q, p.q_input, p.q_inverse_rms, *shard.q_norm, rank.heads, d_q_norm);
    rank.normalise_backward(d_k, p.k_input, p.k_inverse_rms, *shard.k_norm, rank.kv_heads, d_k_norm);
    grads.q_norm = reference::to_tensor(d_q_norm, {d});
    grads.k_norm = reference::to_tensor(d_k_norm, {d});
  }
  if (!rank.norm_before_rope()) rotate_back(rank, inputs.positions, d_q, d_k);
  pass.dx = RowMatrix::Zero(batch * seq, g.hidden_size());
  const auto projection = [&](const RowMatrix& d_projected, const Tensor& weight, Tensor& d_weight,
                              const std::optional<Tensor>& bias, std::optional<Tensor>& d_bias) {
    d_weight = reference::to_tensor(d_projected.transpose() * x, weight.shape);
    if (bias) d_bias = column_sums(d_projected);
    pass.dx += d_projected * as_matrix(weight, weight.shape[0]);
  };
  projection(d_q, shard.q_proj, grads.q_proj, shard.q_bias, grads.q_bias);
  projection(d_k, shard.k_proj, grads.k_proj, shard.k_bias, grads.k_bias);
  projection(d_v, shard.v_proj, grads.v_proj, shard.v_bias, grads.v_bias);
}

// One rank's decoding of the schedule through its KV cache: its o_proj partials, [batch * total, hidden].
// sum_squares: a whole-width norm's all-reduced sums for every row of x (empty otherwise). Each call
// attends over the cache's kept tokens, read in order, then its own; then writes its own into the cache
// (a rolling cache: only the last `slots` of them).
RowMatrix decode_rank(const RankComputation& rank, const Inputs& inputs, const WidthSums& sum_squares) {
  const std::int64_t batch = inputs.batch, seq = inputs.seq, d = rank.head_dim, total = inputs.decode.total();
  const std::int64_t group = rank.heads / rank.kv_heads, width = rank.kv_heads * d;
  std::vector<std::int64_t> calls;
  if (inputs.decode.prefill > 0) calls.push_back(inputs.decode.prefill);
  calls.insert(calls.end(), inputs.decode.steps.begin(), inputs.decode.steps.end());

  const std::optional<std::int64_t> rolling = rank.rolling_cache_slots();
  const std::int64_t slots = rolling ? *rolling : total;
  const RowMatrix x = as_matrix(inputs.x, batch * seq);
  std::vector<RowMatrix> keys(batch, RowMatrix::Zero(slots, width));
  std::vector<RowMatrix> values(batch, RowMatrix::Zero(slots, width));
  RowMatrix partials = RowMatrix::Zero(batch * total, rank.geometry.hidden_size());
  std::int64_t start = 0;  // tokens written so far (past)
  for (const std::int64_t count : calls) {
    const RowMatrix x_new = token_rows(x, batch, seq, start, count);
    std::vector<std::int64_t> positions(batch * count);
    for (std::int64_t b = 0; b < batch; ++b) {
      std::copy_n(inputs.positions.begin() + b * seq + start, count, positions.begin() + b * count);
    }
    WidthSums call_sums;
    if (sum_squares.q.size() > 0) {
      call_sums.q.resize(batch * count);
      call_sums.k.resize(batch * count);
      for (std::int64_t b = 0; b < batch; ++b) {
        call_sums.q.segment(b * count, count) = sum_squares.q.segment(b * seq + start, count);
        call_sums.k.segment(b * count, count) = sum_squares.k.segment(b * seq + start, count);
      }
    }
    const Projected p = rank.project(x_new, positions, call_sums);
    const std::int64_t kept = std::min(start, slots);
    const std::int64_t read_start = rolling ? rank.rolling_read_start(start, kept, slots) : 0;
    const std::int64_t first_kept = start - kept;  // the token the call's key 0 is
    RowMatrix context(batch * count, rank.heads * d);
    RowMatrix call_keys(kept + count, width), call_values(kept + count, width);
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t j = 0; j < kept; ++j) {
        call_keys.row(j) = keys[b].row((read_start + j) % slots);
        call_values.row(j) = values[b].row((read_start + j) % slots);
      }
      call_keys.bottomRows(count) = p.k.middleRows(b * count, count);
      call_values.bottomRows(count) = p.v.middleRows(b * count, count);
      for (std::int64_t h = 0; h < rank.heads; ++h) {
        const std::int64_t kv = h / group;
        rank.attend(p.q.block(b * count, h * d, count, d), call_keys.middleCols(kv * d, d),
                    call_values.middleCols(kv * d, d), inputs.key_lengths[b] - first_kept, kept, h,
                    context.block(b * count, h * d, count, d));
      }
      for (std::int64_t j = std::max<std::int64_t>(0, count - slots); j < count; ++j) {
        keys[b].row((start + j) % slots) = p.k.row(b * count + j);
        values[b].row((start + j) % slots) = p.v.row(b * count + j);
      }
    }
    const RowMatrix partial = context * as_matrix(rank.shard.o_proj, rank.shard.o_proj.shape[0]).transpose();
    for (std::int64_t b = 0; b < batch; ++b) {
      partials.middleRows(b * total + start, count) = partial.middleRows(b * count, count);
    }
    start += count;
  }
  return partials;
}

}  // namespace

Result NaiveLayer::run(const Case& test_case) const {
  validate_case(test_case);
  const TpPlan& plan = test_case.plan;
  const Inputs& inputs = test_case.inputs;
  const std::int64_t tokens = inputs.batch * inputs.seq, hidden = plan.geometry.hidden_size();
  const std::optional<Tensor>& o_bias = test_case.weights.o_bias;
  const bool decode = !inputs.decode.empty();
  const std::int64_t decoded = inputs.batch * inputs.decode.total();

  RowMatrix out = RowMatrix::Zero(tokens, hidden), dx = RowMatrix::Zero(tokens, hidden);
  RowMatrix decode_out = RowMatrix::Zero(decoded, hidden);
  std::vector<Parameters> partials;
  std::vector<Parameters> shards;
  for (int r = 0; r < plan.tp_size; ++r) shards.push_back(rank_shard(test_case.weights, plan, r));
  // A whole-width norm's first all-reduce: each token's sums of squares, the ranks' parts in rank order
  // (k only from the ranks counts_kv_norm_channels names).
  WidthSums sum_squares;
  if (plan.geometry.qk_norm_full_width()) {
    const RowMatrix x = as_matrix(inputs.x, tokens);
    sum_squares.q = Eigen::VectorXd::Zero(tokens);
    sum_squares.k = Eigen::VectorXd::Zero(tokens);
    for (int r = 0; r < plan.tp_size; ++r) {
      sum_squares.q += linear(x, shards[r].q_proj, shards[r].q_bias).rowwise().squaredNorm();
      if (counts_kv_norm_channels(plan, r)) {
        sum_squares.k += linear(x, shards[r].k_proj, shards[r].k_bias).rowwise().squaredNorm();
      }
    }
  }
  // Every rank's pass up to QK-norm's backward; then (whole-width norm) the dots' all-reduce, every rank's
  // part in rank order; then each rank finishes.
  std::vector<RankPass> passes;
  for (int r = 0; r < plan.tp_size; ++r) {
    const RankComputation rank(*this, plan, r, shards[r]);
    passes.push_back(run_rank(rank, inputs, sum_squares));
    RowMatrix decode_partial = decode ? decode_rank(rank, inputs, sum_squares) : RowMatrix(0, hidden);
    if (o_bias && o_bias_on_every_rank()) {
      passes.back().partial_out.rowwise() += as_matrix(*o_bias, 1).row(0);
      decode_partial.rowwise() += as_matrix(*o_bias, 1).row(0);
    }
    out += passes.back().partial_out;
    decode_out += decode_partial;
  }
  WidthSums dots;
  if (plan.geometry.qk_norm_full_width() && norm_sums_all_reduced()) {
    dots.q = Eigen::VectorXd::Zero(tokens);
    dots.k = Eigen::VectorXd::Zero(tokens);
    for (int r = 0; r < plan.tp_size; ++r) {
      const RankComputation rank(*this, plan, r, shards[r]);
      const Projected& p = passes[r].projected;
      dots.q += rank.width_dot(passes[r].d_q, p.q_input, p.q_inverse_rms, *shards[r].q_norm);
      dots.k += rank.width_dot(passes[r].d_k, p.k_input, p.k_inverse_rms, *shards[r].k_norm);
    }
  }
  for (int r = 0; r < plan.tp_size; ++r) {
    const RankComputation rank(*this, plan, r, shards[r]);
    finish_rank(rank, inputs, dots, counts_kv_norm_channels(plan, r), passes[r]);
    dx += passes[r].dx;
    partials.push_back(std::move(passes[r].gradients));
  }
  if (o_bias && !o_bias_on_every_rank()) {
    out.rowwise() += as_matrix(*o_bias, 1).row(0);
    decode_out.rowwise() += as_matrix(*o_bias, 1).row(0);
  }

  Result result;
  result.implementation = "naive-layer";
  result.out = reference::to_tensor(out, inputs.x.shape);
  result.rank_gradients = reduce_gradients(partials, plan);
  result.gradients =
      Gradients{.x = reference::to_tensor(dx, inputs.x.shape), .params = gather_gradients(result.rank_gradients, plan)};
  if (decode) result.decode_out = reference::to_tensor(decode_out, {inputs.batch, inputs.decode.total(), hidden});
  return result;
}

}  // namespace attncheck::mutants
