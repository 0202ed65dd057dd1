#include "reference/qk_norm.hpp"

#include <cmath>

namespace attncheck::reference {

namespace {

// The factor each normalised channel is multiplied by: w, or 1 + w.
RowVector effective_weight(const RowVector& weight, const Geometry& geometry) {
  return geometry.qk_norm() == QkNorm::rms_one_plus ? (weight.array() + 1.0).matrix() : weight;
}

}  // namespace

void qk_norm_forward(MatrixRef rows, const RowVector& weight, std::int64_t heads, const Geometry& geometry,
                     RowMatrix& inverse_rms) {
  const std::int64_t head_dim = geometry.head_dim();
  const RowVector factor = effective_weight(weight, geometry);
  inverse_rms.resize(rows.rows(), heads);
  for (std::int64_t t = 0; t < rows.rows(); ++t) {
    for (std::int64_t head = 0; head < heads; ++head) {
      auto channels = rows.row(t).segment(head * head_dim, head_dim);
      const double inv = 1.0 / std::sqrt(channels.squaredNorm() / head_dim + geometry.qk_norm_eps());
      inverse_rms(t, head) = inv;
      channels = (channels.array() * inv * factor.array()).matrix();
    }
  }
}

void qk_norm_backward(MatrixRef gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                      const RowVector& weight, std::int64_t heads, const Geometry& geometry,
                      RowVector& weight_gradient) {
  const std::int64_t head_dim = geometry.head_dim();
  const RowVector factor = effective_weight(weight, geometry);
  for (std::int64_t t = 0; t < gradient.rows(); ++t) {
    for (std::int64_t head = 0; head < heads; ++head) {
      const double inv = inverse_rms(t, head);
      const RowVector normalised = input.row(t).segment(head * head_dim, head_dim) * inv;
      auto channels = gradient.row(t).segment(head * head_dim, head_dim);
      // y = n * f(w): dw += dy * n; dn = dy * f(w); dx = inv * (dn - n * mean(dn * n)).
      weight_gradient.array() += channels.array() * normalised.array();
      const RowVector d_normalised = (channels.array() * factor.array()).matrix();
      const double mean_product = d_normalised.dot(normalised) / head_dim;
      channels = (inv * (d_normalised - mean_product * normalised));
    }
  }
}

RowVector full_width_sum_squares(const ConstMatrixRef& rows) {
  return rows.rowwise().squaredNorm().transpose();
}

void full_width_norm_forward(MatrixRef rows, const RowVector& weight, const RowVector& sum_squares, std::int64_t width,
                             double eps, RowMatrix& inverse_rms) {
  inverse_rms.resize(rows.rows(), 1);
  for (std::int64_t t = 0; t < rows.rows(); ++t) {
    const double inv = 1.0 / std::sqrt(sum_squares[t] / static_cast<double>(width) + eps);
    inverse_rms(t, 0) = inv;
    rows.row(t) = (rows.row(t).array() * inv * weight.array()).matrix();
  }
}

RowVector full_width_dot(const ConstMatrixRef& gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                         const RowVector& weight) {
  RowVector dot(gradient.rows());
  for (std::int64_t t = 0; t < gradient.rows(); ++t) {
    dot[t] = (gradient.row(t).array() * weight.array() * input.row(t).array()).sum() * inverse_rms(t, 0);
  }
  return dot;
}

void full_width_norm_backward(MatrixRef gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                              const RowVector& weight, const RowVector& dot, std::int64_t width, bool subtract_dot_term,
                              RowVector& weight_gradient) {
  for (std::int64_t t = 0; t < gradient.rows(); ++t) {
    const double inv = inverse_rms(t, 0);
    const RowVector normalised = input.row(t) * inv;
    auto channels = gradient.row(t);
    // y = n * w: dw += dy * n; dn = dy * w; dx = inv * (dn - n * sum(dn * n) / N).
    weight_gradient.array() += channels.array() * normalised.array();
    RowVector d_x = (channels.array() * weight.array()).matrix();
    if (subtract_dot_term) d_x -= (dot[t] / static_cast<double>(width)) * normalised;
    channels = inv * d_x;
  }
}

}  // namespace attncheck::reference
