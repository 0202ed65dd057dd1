// Eigen aliases for the reference: row-major matrices (the layout of every attncheck buffer), Ref
// views for arguments (any outer stride, so a head's column block of a [tokens, heads * head_dim]
// matrix passes without a copy) and Map views over Tensor storage.
#pragma once

#include <Eigen/Core>

#include "core/model/tensor.hpp"

namespace attncheck::reference {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<double, 1, Eigen::Dynamic>;
using MatrixRef = Eigen::Ref<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstMatrixRef = Eigen::Ref<const RowMatrix, 0, Eigen::OuterStride<>>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;

// A tensor viewed as [rows, numel / rows]: [batch, seq, hidden] as [batch * seq, hidden], a weight
// [out, in] as itself, a vector [n] as one row (rows = 1).
inline ConstMatrixMap as_matrix(const Tensor& tensor, std::int64_t rows) {
  return ConstMatrixMap(tensor.data(), rows, rows == 0 ? 0 : tensor.numel() / rows);
}
inline MatrixMap as_matrix(Tensor& tensor, std::int64_t rows) {
  return MatrixMap(tensor.data(), rows, rows == 0 ? 0 : tensor.numel() / rows);
}

// A matrix copied into a Tensor of the given shape (element counts must agree).
inline Tensor to_tensor(const RowMatrix& matrix, Shape shape) {
  return Tensor(std::move(shape), std::vector<double>(matrix.data(), matrix.data() + matrix.size()));
}

}  // namespace attncheck::reference
