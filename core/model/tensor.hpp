// Tensor: a dense row-major fp64 array with a shape, the exchange type of Case and Result.
//
// Every implementation reads its inputs from and writes its results into Tensors, whatever precision
// it computes in: generated inputs are exactly representable in bf16/fp16 (core/generation/input_generation), so
// fp64 storage loses nothing on the way in, and results are compared in fp64 on the way out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attncheck {

using Shape = std::vector<std::int64_t>;

std::int64_t element_count(const Shape& shape);  // product of the extents (1 for a scalar)
std::string to_string(const Shape& shape);       // "[2, 5, 8]"

struct Tensor {
  Shape shape;
  std::vector<double> values;  // row-major over shape

  Tensor() = default;
  explicit Tensor(Shape tensor_shape);                            // zero-filled
  Tensor(Shape tensor_shape, std::vector<double> tensor_values);  // sizes must agree (else logic_error)

  std::int64_t numel() const { return static_cast<std::int64_t>(values.size()); }
  double* data() { return values.data(); }
  const double* data() const { return values.data(); }

  friend bool operator==(const Tensor&, const Tensor&) = default;
};

}  // namespace attncheck
