#include "reference/attention_head.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace attncheck::reference {

MaskSpec MaskSpec::for_geometry(const Geometry& geometry, std::int64_t seq_q, std::int64_t seq_k,
                                std::int64_t key_length) {
  return {.key_offset = seq_k - seq_q,
          .key_length = key_length,
          .key_count = seq_k,
          .causal = geometry.causal(),
          .window = geometry.sliding_window()};
}

KeyInterval MaskSpec::visible_keys(std::int64_t query) const {
  const std::int64_t aligned = query + key_offset;
  KeyInterval interval{.begin = 0, .end = std::min(key_length, key_count)};
  if (window) interval.begin = std::max<std::int64_t>(0, aligned - *window + 1);
  if (causal) interval.end = std::min({key_length, key_count, aligned + 1});
  return interval;
}

ScoreSpec ScoreSpec::for_geometry(const Geometry& geometry) {
  return {.scale = geometry.scale(), .softcap = geometry.softcap()};
}

ScoreSpec ScoreSpec::with_sinks(const std::optional<Tensor>& sink_logits, std::int64_t first_head,
                                std::int64_t count) const {
  ScoreSpec spec = *this;
  if (sink_logits) spec.sinks = std::span<const double>(sink_logits->values).subspan(first_head, count);
  return spec;
}

namespace {

// Queries are processed in blocks of rows so that a block's scores stay in cache between the GEMMs
// and the row passes: 1 MiB of scores per block in the forward pass (the L2 is 1-2 MiB per core),
// 4 MiB per buffer in the backward pass, whose accumulating GEMMs (d_k, d_v += [seq_k, rows] products)
// gain more from fewer, larger blocks. Measured on the 2-core EPYC machine, GFLOP/s forward +
// backward (model FLOPs; run-to-run noise on this VM is about 10%), seq 512 / 2048:
//   stored probabilities, whole-matrix passes:   small_gqa - / 46
//   stored probabilities, 1 MiB blocks:          qwen3-0.6b 64 / 66-69, small_gqa 74 / 44-58
//   recomputed, 1 MiB backward blocks:           qwen3-0.6b 57 / 57-64, small_gqa 69 / 51-54
//   recomputed, 4 MiB backward blocks:           qwen3-0.6b 63 / 65,    small_gqa 66 / 58-62
//   and a KV group's query heads stacked (now):   qwen3-0.6b 58-63 / 69,  small_gqa 67-68 / 60-62
// Recomputing costs qwen3 a little and saves batch * heads * seq^2 stored values (512 MB at seq 2048).
// With stacking, the block holds group_size times as many rows (rows per head shrink to match).
constexpr std::int64_t kForwardBlockElements = std::int64_t{1} << 17;
constexpr std::int64_t kBackwardBlockElements = std::int64_t{1} << 19;

std::int64_t query_block_rows(std::int64_t seq_k, std::int64_t block_elements) {
  return std::clamp<std::int64_t>(block_elements / std::max<std::int64_t>(seq_k, 1), 16, 4096);
}

// Turns one row of raw dot products into probabilities over [keys.begin, keys.end) (0 elsewhere) and
// returns the log-sum-exp. capped (optional) points at the row's first element in a buffer receiving
// tanh(score / softcap) for the backward pass; sink (optional) is the head's sink logit, which joins the
// maximum and the sum but gets no probability of its own here. The interval must not be empty.
double softmax_row(Eigen::Ref<RowVector> row, const KeyInterval& keys, const ScoreSpec& score, double* capped,
                   const double* sink) {
  const std::int64_t count = keys.end - keys.begin;
  row.head(keys.begin).setZero();
  row.tail(row.size() - keys.end).setZero();
  auto visible = row.segment(keys.begin, count);
  visible *= score.scale;
  if (score.softcap) {
    visible = (visible.array() / *score.softcap).tanh().matrix();
    if (capped != nullptr) Eigen::Map<RowVector>(capped + keys.begin, count) = visible;
    visible *= *score.softcap;
  }
  const double maximum = sink != nullptr ? std::max(visible.maxCoeff(), *sink) : visible.maxCoeff();
  visible = (visible.array() - maximum).exp().matrix();
  const double sum = visible.sum() + (sink != nullptr ? std::exp(*sink - maximum) : 0.0);
  visible *= 1.0 / sum;
  return maximum + std::log(sum);
}

// Query rows [first, first + rows) of every query head of one KV group, stacked head-major into one
// matrix, so that each GEMM against the group's shared k and v covers all its heads at once (GQA's
// group_size times fewer, larger GEMMs, and d_k, d_v accumulated once per block for the whole group).
// Stacked row j * rows + r is query first + r of the group's head j.
struct StackedRows {
  std::int64_t first = 0;
  std::int64_t rows = 0;
  std::int64_t group = 1;
  std::int64_t query(std::int64_t stacked_row) const { return first + stacked_row % rows; }
  std::int64_t head(std::int64_t stacked_row) const { return stacked_row / rows; }
};

// heads: [seq, group * head_dim] (head j in columns j*head_dim..) -> stacked: [group * rows, head_dim].
void stack_heads(const ConstMatrixRef& heads, const StackedRows& block, MatrixRef stacked) {
  const std::int64_t head_dim = stacked.cols();
  for (std::int64_t j = 0; j < block.group; ++j) {
    stacked.middleRows(j * block.rows, block.rows) = heads.block(block.first, j * head_dim, block.rows, head_dim);
  }
}

void unstack_heads(const ConstMatrixRef& stacked, const StackedRows& block, MatrixRef heads) {
  const std::int64_t head_dim = stacked.cols();
  for (std::int64_t j = 0; j < block.group; ++j) {
    heads.block(block.first, j * head_dim, block.rows, head_dim) = stacked.middleRows(j * block.rows, block.rows);
  }
}

// Probabilities of the stacked query rows into probabilities ([group * rows, seq_k]); capped receives
// tanh(score / softcap) of the same rows when there is a softcap; log_sum_exp (optional) is
// [group, seq_q]. Dense scores by one GEMM, then each row's interval: simple to trust, and in the
// forward pass the FLOPs bench/ counts are the ones performed.
void probability_block(const RowMatrix& q_stacked, const ConstMatrixRef& k, const MaskSpec& mask,
                       const ScoreSpec& score, const StackedRows& block, std::int64_t seq_q, MatrixRef probabilities,
                       RowMatrix& capped, double* log_sum_exp) {
  probabilities.noalias() = q_stacked * k.transpose();
  if (score.softcap) capped.resize(probabilities.rows(), k.rows());
  for (std::int64_t r = 0; r < probabilities.rows(); ++r) {
    const KeyInterval keys = mask.visible_keys(block.query(r));
    const double* sink = score.sinks.empty() ? nullptr : &score.sinks[static_cast<std::size_t>(block.head(r))];
    double lse = sink != nullptr ? *sink : -std::numeric_limits<double>::infinity();
    if (keys.end <= keys.begin) {
      probabilities.row(r).setZero();
    } else {
      lse = softmax_row(probabilities.row(r), keys, score, score.softcap ? capped.row(r).data() : nullptr, sink);
    }
    if (log_sum_exp != nullptr) log_sum_exp[block.head(r) * seq_q + block.query(r)] = lse;
  }
}

// Rows per block so that group * rows * seq_k is about block_elements.
std::int64_t block_rows_for(std::int64_t group, std::int64_t seq_k, std::int64_t block_elements) {
  return query_block_rows(group * seq_k, block_elements);
}

std::int64_t group_of(const ConstMatrixRef& q, const ConstMatrixRef& k) {
  return q.cols() / k.cols();
}

}  // namespace

void attention_group_forward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                             const MaskSpec& mask, const ScoreSpec& score, MatrixRef context, double* log_sum_exp) {
  const std::int64_t seq_q = q.rows();
  const std::int64_t head_dim = k.cols();
  const std::int64_t group = group_of(q, k);
  const std::int64_t block_rows = std::min(block_rows_for(group, k.rows(), kForwardBlockElements), seq_q);
  RowMatrix q_stacked(group * block_rows, head_dim);
  RowMatrix probabilities(group * block_rows, k.rows());
  RowMatrix context_stacked(group * block_rows, v.cols());
  RowMatrix capped;
  for (std::int64_t first = 0; first < seq_q; first += block_rows) {
    const StackedRows block{.first = first, .rows = std::min(block_rows, seq_q - first), .group = group};
    const std::int64_t stacked_rows = group * block.rows;
    q_stacked.conservativeResize(stacked_rows, head_dim);  // shrinks only for the last block
    stack_heads(q, block, q_stacked);
    auto block_probabilities = probabilities.topRows(stacked_rows);
    probability_block(q_stacked, k, mask, score, block, seq_q, block_probabilities, capped, log_sum_exp);
    context_stacked.topRows(stacked_rows).noalias() = block_probabilities * v;
    unstack_heads(context_stacked.topRows(stacked_rows), block, context);
  }
}

void attention_group_backward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                              const MaskSpec& mask, const ScoreSpec& score, const ConstMatrixRef& d_context,
                              MatrixRef d_q, MatrixRef d_k, MatrixRef d_v, double* d_sinks) {
  const std::int64_t seq_q = q.rows();
  const std::int64_t seq_k = k.rows();
  const std::int64_t head_dim = k.cols();
  const std::int64_t group = group_of(q, k);
  const std::int64_t block_rows = std::min(block_rows_for(group, seq_k, kBackwardBlockElements), seq_q);
  d_k.setZero();
  d_v.setZero();
  RowMatrix q_stacked(group * block_rows, head_dim);
  RowMatrix d_context_stacked(group * block_rows, v.cols());
  RowMatrix d_q_stacked(group * block_rows, head_dim);
  RowMatrix probability_buffer(group * block_rows, seq_k);
  RowMatrix d_scores(group * block_rows, seq_k);
  RowMatrix capped;
  // With sinks: each row's log-sum-exp ([group, seq_q]), from which its sink probability follows.
  std::vector<double> log_sum_exp(score.sinks.empty() ? 0 : static_cast<std::size_t>(group * seq_q));
  for (std::int64_t first = 0; first < seq_q; first += block_rows) {
    const StackedRows block{.first = first, .rows = std::min(block_rows, seq_q - first), .group = group};
    const std::int64_t stacked_rows = group * block.rows;
    q_stacked.conservativeResize(stacked_rows, head_dim);
    d_context_stacked.conservativeResize(stacked_rows, v.cols());
    stack_heads(q, block, q_stacked);
    stack_heads(d_context, block, d_context_stacked);
    auto probabilities = probability_buffer.topRows(stacked_rows);
    probability_block(q_stacked, k, mask, score, block, seq_q, probabilities, capped,
                      log_sum_exp.empty() ? nullptr : log_sum_exp.data());
    d_v.noalias() += probabilities.transpose() * d_context_stacked;
    // d_scores starts as d_probabilities = d_context v^T and is turned, row by row, into the gradient
    // of the raw dot products: softmax backward p * (dp - sum(p * dp)), the softcap's 1 - tanh^2, the
    // scale.
    auto scores = d_scores.topRows(stacked_rows);
    scores.noalias() = d_context_stacked * v.transpose();
    for (std::int64_t r = 0; r < stacked_rows; ++r) {
      const KeyInterval keys = mask.visible_keys(block.query(r));
      auto row = scores.row(r);
      if (keys.end <= keys.begin) {
        row.setZero();
        continue;
      }
      const std::int64_t count = keys.end - keys.begin;
      const auto p = probabilities.row(r).segment(keys.begin, count);
      auto dp = row.segment(keys.begin, count);
      const double weighted = p.dot(dp);
      if (!score.sinks.empty()) {
        // The sink's logit z_s gets p_s * (0 - weighted): it carries no value, so its dp is 0.
        const std::int64_t head = block.head(r);
        const double lse = log_sum_exp[static_cast<std::size_t>(head * seq_q + block.query(r))];
        d_sinks[head] -= std::exp(score.sinks[static_cast<std::size_t>(head)] - lse) * weighted;
      }
      dp = (p.array() * (dp.array() - weighted)).matrix();
      if (score.softcap) {
        const auto tanh_values = capped.row(r).segment(keys.begin, count);
        dp = (dp.array() * (1.0 - tanh_values.array().square())).matrix();
      }
      dp *= score.scale;
      row.head(keys.begin).setZero();
      row.tail(seq_k - keys.end).setZero();
    }
    d_q_stacked.topRows(stacked_rows).noalias() = scores * k;
    unstack_heads(d_q_stacked.topRows(stacked_rows), block, d_q);
    d_k.noalias() += scores.transpose() * q_stacked;
  }
}

RowMatrix attention_probabilities(const ConstMatrixRef& q, const ConstMatrixRef& k, const MaskSpec& mask,
                                  const ScoreSpec& score) {
  // One head (q [seq_q, head_dim]), the whole matrix as one block.
  const StackedRows block{.first = 0, .rows = q.rows(), .group = 1};
  RowMatrix q_copy = q;
  RowMatrix probabilities(q.rows(), k.rows());
  RowMatrix capped;
  probability_block(q_copy, k, mask, score, block, q.rows(), probabilities, capped, nullptr);
  return probabilities;
}

}  // namespace attncheck::reference
