#include "reference/attention_head.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attncheck::reference {

MaskSpec MaskSpec::for_geometry(const Geometry& geometry, std::int64_t seq_q, std::int64_t seq_k,
                                std::int64_t key_length) {
  return {.key_offset = seq_k - seq_q,
          .key_length = key_length,
          .causal = geometry.causal(),
          .window = geometry.sliding_window()};
}

KeyInterval MaskSpec::visible_keys(std::int64_t query) const {
  const std::int64_t aligned = query + key_offset;
  KeyInterval interval{.begin = 0, .end = key_length};
  if (window) interval.begin = std::max<std::int64_t>(0, aligned - *window + 1);
  if (causal) interval.end = std::min(key_length, aligned + 1);
  return interval;
}

ScoreSpec ScoreSpec::for_geometry(const Geometry& geometry) {
  return {.scale = geometry.scale(), .softcap = geometry.softcap()};
}

void attention_head_forward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                            const MaskSpec& mask, const ScoreSpec& score, MatrixRef context, double* log_sum_exp,
                            HeadSaved* saved) {
  const std::int64_t seq_q = q.rows();
  const std::int64_t seq_k = k.rows();
  RowMatrix local_probabilities;
  RowMatrix& probabilities = saved != nullptr ? saved->probabilities : local_probabilities;
  // Dense scores, then the interval of each row: a dense GEMM is faster than skipping masked blocks at
  // the sizes the reference runs, and keeps the code obviously right.
  probabilities.resize(seq_q, seq_k);
  probabilities.noalias() = q * k.transpose();
  if (saved != nullptr && score.softcap) saved->capped.setZero(seq_q, seq_k);

  for (std::int64_t i = 0; i < seq_q; ++i) {
    const KeyInterval keys = mask.visible_keys(i);
    auto row = probabilities.row(i);
    if (keys.end <= keys.begin) {
      row.setZero();
      if (log_sum_exp != nullptr) log_sum_exp[i] = -std::numeric_limits<double>::infinity();
      continue;
    }
    double maximum = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = keys.begin; j < keys.end; ++j) {
      double value = score.scale * row(j);
      if (score.softcap) {
        const double capped = std::tanh(value / *score.softcap);
        if (saved != nullptr) saved->capped(i, j) = capped;
        value = *score.softcap * capped;
      }
      row(j) = value;
      maximum = std::max(maximum, value);
    }
    double sum = 0.0;
    for (std::int64_t j = keys.begin; j < keys.end; ++j) {
      row(j) = std::exp(row(j) - maximum);
      sum += row(j);
    }
    const double inverse_sum = 1.0 / sum;
    row.head(keys.begin).setZero();
    row.segment(keys.begin, keys.end - keys.begin) *= inverse_sum;
    row.tail(seq_k - keys.end).setZero();
    if (log_sum_exp != nullptr) log_sum_exp[i] = maximum + std::log(sum);
  }
  context.noalias() = probabilities * v;
}

void attention_head_backward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                             const MaskSpec& mask, const ScoreSpec& score, const HeadSaved& saved,
                             const ConstMatrixRef& d_context, MatrixRef d_q, MatrixRef d_k, MatrixRef d_v) {
  const RowMatrix& probabilities = saved.probabilities;
  d_v.noalias() = probabilities.transpose() * d_context;
  // d_scores starts as d_probabilities = d_context v^T and is turned, row by row, into the gradient of
  // the scaled scores: softmax backward p * (dp - sum(p * dp)), then the softcap's 1 - tanh^2.
  RowMatrix d_scores = d_context * v.transpose();
  for (std::int64_t i = 0; i < d_scores.rows(); ++i) {
    const KeyInterval keys = mask.visible_keys(i);
    auto row = d_scores.row(i);
    if (keys.end <= keys.begin) {
      row.setZero();
      continue;
    }
    const std::int64_t count = keys.end - keys.begin;
    auto p = probabilities.row(i).segment(keys.begin, count);
    auto dp = row.segment(keys.begin, count);
    const double weighted = p.dot(dp);
    dp = (p.array() * (dp.array() - weighted)).matrix();
    if (score.softcap) {
      auto capped = saved.capped.row(i).segment(keys.begin, count);
      dp = (dp.array() * (1.0 - capped.array().square())).matrix();
    }
    dp *= score.scale;
    row.head(keys.begin).setZero();
    row.tail(d_scores.cols() - keys.end).setZero();
  }
  d_q.noalias() = d_scores * k;
  d_k.noalias() = d_scores.transpose() * q;
}

}  // namespace attncheck::reference
