#include "core/compare/sketch.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/generation/splitmix_stream.hpp"

namespace attncheck {

namespace {

std::string_view base_name(std::string_view name) {
  const std::size_t grads = name.rfind("grads/");
  return grads == std::string_view::npos ? name : name.substr(grads);
}

bool along_columns(std::string_view name) {
  return base_name(name) == "grads/o_proj";
}

// out, grads/x and decode/out: [batch, tokens, hidden], sketched along hidden per token.
bool is_activation(std::string_view name) {
  return name == "out" || name == "grads/x" || name == "decode/out";
}

}  // namespace

bool sketchable(std::string_view name) {
  const std::string_view base = base_name(name);
  return base == "grads/q_proj" || base == "grads/k_proj" || base == "grads/v_proj" || base == "grads/o_proj";
}

bool sketchable_activation(std::string_view name) {
  return is_activation(name);
}

Shape sketch_shape(std::string_view name, const Shape& gradient_shape) {
  if (is_activation(name)) {
    if (gradient_shape.size() != 3) throw std::logic_error("sketch_shape: an activation is [batch, tokens, hidden]");
    return {gradient_shape[0], gradient_shape[1], 1 + kSketchProjections};
  }
  if (!sketchable(name) || gradient_shape.size() != 2) throw std::logic_error("sketch_shape: not a projection");
  return {along_columns(name) ? gradient_shape[1] : gradient_shape[0], 1 + kSketchProjections};
}

Tensor sketch(std::string_view name, const Tensor& gradient) {
  const Shape shape = sketch_shape(name, gradient.shape);
  const bool columns = along_columns(name);
  // An activation's lines are its tokens (batch * tokens of them), each of length hidden.
  const std::int64_t lines = is_activation(name) ? shape[0] * shape[1] : shape[0];
  const std::int64_t length = columns ? gradient.shape[0] : gradient.shape.back();
  std::vector<double> signs(static_cast<std::size_t>(length * kSketchProjections));
  SplitMixStream stream(0, "attncheck-sketch-v1");
  for (double& sign : signs) sign = stream.coin() ? -1.0 : 1.0;
  Tensor result(shape);
  // Each line sums over j = 0 .. length-1 in order, whichever loop is outermost, so the sketch is the same
  // number for number. o_proj's lines are columns: walking one column at a time strides through the whole
  // matrix (a 6144 x 6144 gradient: a cache miss per element), so the rows are walked in order and every
  // line of a block keeps its own sums. Blocks of lines run on OpenMP threads when the gradient is large.
  constexpr std::int64_t kBlock = 256;
  const std::int64_t blocks = (lines + kBlock - 1) / kBlock;
  const bool parallel = lines * length >= (std::int64_t{1} << 20);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t first = block * kBlock, count = std::min(kBlock, lines - first);
    std::vector<double> squares(static_cast<std::size_t>(count), 0.0);
    std::vector<double> projections(static_cast<std::size_t>(count * kSketchProjections), 0.0);
    const auto add = [&](std::int64_t i, std::int64_t j, double value) {
      squares[i] += value * value;
      for (std::int64_t p = 0; p < kSketchProjections; ++p) {
        projections[i * kSketchProjections + p] += value * signs[j * kSketchProjections + p];
      }
    };
    if (columns) {
      for (std::int64_t j = 0; j < length; ++j) {
        const double* row = gradient.values.data() + j * gradient.shape[1] + first;
        for (std::int64_t i = 0; i < count; ++i) add(i, j, row[i]);
      }
    } else {
      for (std::int64_t i = 0; i < count; ++i) {
        const double* line = gradient.values.data() + (first + i) * length;
        for (std::int64_t j = 0; j < length; ++j) add(i, j, line[j]);
      }
    }
    for (std::int64_t i = 0; i < count; ++i) {
      double* out = result.values.data() + (first + i) * (1 + kSketchProjections);
      out[0] = std::sqrt(squares[i]);
      for (std::int64_t p = 0; p < kSketchProjections; ++p) out[1 + p] = projections[i * kSketchProjections + p];
    }
  }
  return result;
}

}  // namespace attncheck
