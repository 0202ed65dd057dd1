// The sketch against its definition (golden/SCHEMA.md, attncheck-sketch-v1), number for number: sketch.cpp
// blocks, interleaves and threads its lines for speed, and a golden's stored sketches are only comparable if
// every line is still summed in the defined order.
#include "core/compare/sketch.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/generation/splitmix_stream.hpp"

namespace attncheck {
namespace {

// SCHEMA.md's text, line by line: signs s[j][p] from the stream (p fastest), then for each line
// [sqrt(q), t0, t1, t2] with q = fma(v[j], v[j], q) and tp += v[j] * s[j][p], j ascending from 0.0.
Tensor sketch_by_definition(const std::string& name, const Tensor& tensor) {
  const bool columns = name.ends_with("o_proj");
  const bool activation = tensor.shape.size() == 3;
  const std::int64_t length = columns ? tensor.shape[0] : tensor.shape.back();
  const std::int64_t lines = activation ? tensor.shape[0] * tensor.shape[1] : (columns ? tensor.shape[1] : tensor.shape[0]);
  std::vector<double> signs(static_cast<std::size_t>(length * 3));
  SplitMixStream stream(0, "attncheck-sketch-v1");
  for (double& sign : signs) sign = stream.coin() ? -1.0 : 1.0;
  Tensor result(sketch_shape(name, tensor.shape));
  for (std::int64_t line = 0; line < lines; ++line) {
    double q = 0.0, t[3] = {0.0, 0.0, 0.0};
    for (std::int64_t j = 0; j < length; ++j) {
      const double v = columns ? tensor.values[j * tensor.shape[1] + line] : tensor.values[line * length + j];
      q = std::fma(v, v, q);
      for (int p = 0; p < 3; ++p) t[p] = t[p] + v * signs[j * 3 + p];
    }
    double* out = result.values.data() + line * 4;
    out[0] = std::sqrt(q);
    for (int p = 0; p < 3; ++p) out[1 + p] = t[p];
  }
  return result;
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed) {
  Tensor tensor(shape);
  SplitMixStream stream(seed, "sketch-test");
  // Values of mixed magnitude, so that a changed order of additions would change the rounding.
  for (double& value : tensor.values) {
    value = static_cast<double>(stream.symmetric_integer(1 << 20)) * std::ldexp(1.0, static_cast<int>(stream.uniform_below(40)) - 30);
  }
  return tensor;
}

void expect_bitwise_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (std::size_t i = 0; i < expected.values.size(); ++i) {
    ASSERT_EQ(std::memcmp(&actual.values[i], &expected.values[i], sizeof(double)), 0)
        << what << ": entry " << i << " is " << actual.values[i] << ", the definition gives " << expected.values[i];
  }
}

// Shapes with line counts that are not multiples of the 4 interleaved lines or the 256-line blocks, and one
// large enough (lines x length >= 2^20) for the threaded path.
TEST(Sketch, EqualsItsDefinitionNumberForNumber) {
  const std::vector<Shape> matrices = {{1, 1}, {3, 5}, {7, 64}, {260, 33}, {513, 129}, {1031, 1024}};
  std::uint64_t seed = 1;
  for (const Shape& shape : matrices) {
    for (const std::string name : {"grads/q_proj", "ranks/1/grads/k_proj", "grads/v_proj", "grads/o_proj"}) {
      const Tensor tensor = random_tensor(shape, seed++);
      expect_bitwise_equal(sketch(name, tensor), sketch_by_definition(name, tensor),
                           name + " of shape " + to_string(shape));
    }
  }
  for (const Shape& shape : std::vector<Shape>{{1, 1, 8}, {2, 3, 17}, {3, 345, 1024}}) {
    for (const std::string name : {"out", "grads/x", "decode/out"}) {
      const Tensor tensor = random_tensor(shape, seed++);
      expect_bitwise_equal(sketch(name, tensor), sketch_by_definition(name, tensor),
                           name + " of shape " + to_string(shape));
    }
  }
}

}  // namespace
}  // namespace attncheck
