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
                     RowMatrix& inverse_rms, bool over_all_heads) {
  const std::int64_t head_dim = geometry.head_dim();
  // A normalisation unit: one head's head_dim channels, or (mutant) every head of the token at once.
  const std::int64_t units = over_all_heads ? 1 : heads;
  const std::int64_t unit_width = heads * head_dim / units;
  const RowVector factor = effective_weight(weight, geometry).replicate(1, unit_width / head_dim);
  inverse_rms.resize(rows.rows(), units);
  for (std::int64_t t = 0; t < rows.rows(); ++t) {
    for (std::int64_t unit = 0; unit < units; ++unit) {
      auto channels = rows.row(t).segment(unit * unit_width, unit_width);
      const double inv = 1.0 / std::sqrt(channels.squaredNorm() / unit_width + geometry.qk_norm_eps());
      inverse_rms(t, unit) = inv;
      channels = (channels.array() * inv * factor.array()).matrix();
    }
  }
}

void qk_norm_backward(MatrixRef gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                      const RowVector& weight, std::int64_t heads, const Geometry& geometry, RowVector& weight_gradient,
                      bool over_all_heads) {
  const std::int64_t head_dim = geometry.head_dim();
  const std::int64_t units = over_all_heads ? 1 : heads;
  const std::int64_t unit_width = heads * head_dim / units;
  const std::int64_t heads_per_unit = unit_width / head_dim;
  const RowVector factor = effective_weight(weight, geometry).replicate(1, heads_per_unit);
  for (std::int64_t t = 0; t < gradient.rows(); ++t) {
    for (std::int64_t unit = 0; unit < units; ++unit) {
      const double inv = inverse_rms(t, unit);
      const RowVector normalised = input.row(t).segment(unit * unit_width, unit_width) * inv;
      auto channels = gradient.row(t).segment(unit * unit_width, unit_width);
      // y = n * f(w): dw += dy * n; dn = dy * f(w); dx = inv * (dn - n * mean(dn * n)).
      for (std::int64_t head = 0; head < heads_per_unit; ++head) {
        weight_gradient.array() +=
            channels.segment(head * head_dim, head_dim).array() * normalised.segment(head * head_dim, head_dim).array();
      }
      const RowVector d_normalised = (channels.array() * factor.array()).matrix();
      const double mean_product = d_normalised.dot(normalised) / unit_width;
      channels = (inv * (d_normalised - mean_product * normalised));
    }
  }
}

}  // namespace attncheck::reference
