#include "reference/attention_head.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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
  if (causal) interval.end = std::min(key_length, aligned + 1);
  return interval;
}

ScoreSpec ScoreSpec::for_geometry(const Geometry& geometry) {
  return {.scale = geometry.scale(), .softcap = geometry.softcap()};
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
//   recomputed, 4 MiB backward blocks (chosen):  qwen3-0.6b 63 / 65,    small_gqa 66 / 58-62
// Recomputing costs qwen3 a little and saves batch * heads * seq^2 stored values (512 MB at seq 2048).
constexpr std::int64_t kForwardBlockElements = std::int64_t{1} << 17;
constexpr std::int64_t kBackwardBlockElements = std::int64_t{1} << 19;

std::int64_t query_block_rows(std::int64_t seq_k, std::int64_t block_elements) {
  return std::clamp<std::int64_t>(block_elements / std::max<std::int64_t>(seq_k, 1), 16, 4096);
}

// Turns one row of raw dot products into probabilities over [keys.begin, keys.end) (0 elsewhere) and
// returns the log-sum-exp. capped (optional) points at the row's first element in a buffer receiving
// tanh(score / softcap) for the backward pass. The interval must not be empty.
double softmax_row(Eigen::Ref<RowVector> row, const KeyInterval& keys, const ScoreSpec& score, double* capped) {
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
  const double maximum = visible.maxCoeff();
  visible = (visible.array() - maximum).exp().matrix();
  const double sum = visible.sum();
  visible *= 1.0 / sum;
  return maximum + std::log(sum);
}

// Probabilities of query rows [first, first + block.rows()) into block ([rows, seq_k]); capped
// receives tanh(score / softcap) of the same rows when there is a softcap; log_sum_exp (optional) is
// indexed by query. Dense scores by one GEMM, then each row's interval: simple to trust, and the FLOPs
// bench/ counts are the ones performed.
void probability_block(const ConstMatrixRef& q, const ConstMatrixRef& k, const MaskSpec& mask, const ScoreSpec& score,
                       std::int64_t first, MatrixRef block, RowMatrix& capped, double* log_sum_exp) {
  const std::int64_t rows = block.rows();
  block.noalias() = q.middleRows(first, rows) * k.transpose();
  if (score.softcap) capped.resize(rows, k.rows());
  for (std::int64_t r = 0; r < rows; ++r) {
    const KeyInterval keys = mask.visible_keys(first + r);
    double lse = -std::numeric_limits<double>::infinity();
    if (keys.end <= keys.begin) {
      block.row(r).setZero();
    } else {
      lse = softmax_row(block.row(r), keys, score, score.softcap ? capped.row(r).data() : nullptr);
    }
    if (log_sum_exp != nullptr) log_sum_exp[first + r] = lse;
  }
}

}  // namespace

void attention_head_forward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                            const MaskSpec& mask, const ScoreSpec& score, MatrixRef context, double* log_sum_exp) {
  const std::int64_t seq_q = q.rows();
  const std::int64_t block_rows = query_block_rows(k.rows(), kForwardBlockElements);
  RowMatrix block(std::min(block_rows, seq_q), k.rows());
  RowMatrix capped;
  for (std::int64_t first = 0; first < seq_q; first += block_rows) {
    const std::int64_t rows = std::min(block_rows, seq_q - first);
    auto probabilities = block.topRows(rows);
    probability_block(q, k, mask, score, first, probabilities, capped, log_sum_exp);
    context.middleRows(first, rows).noalias() = probabilities * v;
  }
}

void attention_head_backward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                             const MaskSpec& mask, const ScoreSpec& score, const ConstMatrixRef& d_context,
                             MatrixRef d_q, MatrixRef d_k, MatrixRef d_v) {
  const std::int64_t seq_q = q.rows();
  const std::int64_t seq_k = k.rows();
  const std::int64_t block_rows = query_block_rows(seq_k, kBackwardBlockElements);
  d_k.setZero();
  d_v.setZero();
  RowMatrix probability_buffer(std::min(block_rows, seq_q), seq_k);
  RowMatrix d_scores(std::min(block_rows, seq_q), seq_k);
  RowMatrix capped;
  for (std::int64_t first = 0; first < seq_q; first += block_rows) {
    const std::int64_t rows = std::min(block_rows, seq_q - first);
    auto probabilities = probability_buffer.topRows(rows);
    probability_block(q, k, mask, score, first, probabilities, capped, nullptr);
    const auto d_context_block = d_context.middleRows(first, rows);
    d_v.noalias() += probabilities.transpose() * d_context_block;
    // d_scores starts as d_probabilities = d_context v^T and is turned, row by row, into the gradient
    // of the raw dot products: softmax backward p * (dp - sum(p * dp)), the softcap's 1 - tanh^2, the
    // scale.
    auto block = d_scores.topRows(rows);
    block.noalias() = d_context_block * v.transpose();
    for (std::int64_t r = 0; r < rows; ++r) {
      const KeyInterval keys = mask.visible_keys(first + r);
      auto row = block.row(r);
      if (keys.end <= keys.begin) {
        row.setZero();
        continue;
      }
      const std::int64_t count = keys.end - keys.begin;
      const auto p = probabilities.row(r).segment(keys.begin, count);
      auto dp = row.segment(keys.begin, count);
      const double weighted = p.dot(dp);
      dp = (p.array() * (dp.array() - weighted)).matrix();
      if (score.softcap) {
        const auto tanh_values = capped.row(r).segment(keys.begin, count);
        dp = (dp.array() * (1.0 - tanh_values.array().square())).matrix();
      }
      dp *= score.scale;
      row.head(keys.begin).setZero();
      row.tail(seq_k - keys.end).setZero();
    }
    d_q.middleRows(first, rows).noalias() = block * k;
    d_k.noalias() += block.transpose() * q.middleRows(first, rows);
  }
}

RowMatrix attention_probabilities(const ConstMatrixRef& q, const ConstMatrixRef& k, const MaskSpec& mask,
                                  const ScoreSpec& score) {
  RowMatrix probabilities(q.rows(), k.rows());
  RowMatrix capped;
  const std::int64_t block_rows = query_block_rows(k.rows(), kForwardBlockElements);
  for (std::int64_t first = 0; first < q.rows(); first += block_rows) {
    const std::int64_t rows = std::min(block_rows, q.rows() - first);
    probability_block(q, k, mask, score, first, probabilities.middleRows(first, rows), capped, nullptr);
  }
  return probabilities;
}

}  // namespace attncheck::reference
