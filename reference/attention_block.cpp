#include "reference/attention_block.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace attncheck::reference {

void attention_block_backward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                              const MaskSpec& mask, const ScoreSpec& score, const double* log_sum_exp,
                              const double* d_weighted, const ConstMatrixRef& d_context, MatrixRef d_q, MatrixRef d_k,
                              MatrixRef d_v) {
  if (!score.sinks.empty()) throw std::logic_error("attention_block_backward: sinks belong to the caller");
  const Eigen::Index rows = q.rows(), keys = k.rows(), head_dim = k.cols(), value_dim = v.cols();
  const Eigen::Index group = head_dim == 0 ? 0 : q.cols() / head_dim;
  for (Eigen::Index j = 0; j < group; ++j) {
    const auto q_head = q.middleCols(j * head_dim, head_dim);
    const auto d_out = d_context.middleCols(j * value_dim, value_dim);
    RowMatrix scores = score.scale * (q_head * k.transpose());  // [rows, keys]
    RowMatrix tanh_values;
    if (score.softcap) {
      tanh_values = (scores.array() / *score.softcap).tanh().matrix();
      scores = *score.softcap * tanh_values;
    }
    RowMatrix p = RowMatrix::Zero(rows, keys);
    for (Eigen::Index i = 0; i < rows; ++i) {
      const KeyInterval interval = mask.visible_keys(i);
      const Eigen::Index begin = std::max<Eigen::Index>(interval.begin, 0);
      const Eigen::Index end = std::min<Eigen::Index>(interval.end, keys);
      for (Eigen::Index key = begin; key < end; ++key) p(i, key) = std::exp(scores(i, key) - log_sum_exp[j * rows + i]);
    }
    d_v.noalias() += p.transpose() * d_out;
    RowMatrix ds = d_out * v.transpose();  // dP
    for (Eigen::Index i = 0; i < rows; ++i) ds.row(i).array() -= d_weighted[j * rows + i];
    ds = ds.cwiseProduct(p);
    if (score.softcap) ds = ds.cwiseProduct((1.0 - tanh_values.array().square()).matrix());
    ds *= score.scale;
    d_q.middleCols(j * head_dim, head_dim).noalias() += ds * k;
    d_k.noalias() += ds.transpose() * q_head;
  }
}

}  // namespace attncheck::reference
