#include "core/compare/sketch.hpp"

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
  for (std::int64_t line = 0; line < lines; ++line) {
    double squares = 0.0;
    double projections[kSketchProjections] = {};
    for (std::int64_t j = 0; j < length; ++j) {
      const double value = columns ? gradient.values[j * gradient.shape[1] + line] : gradient.values[line * length + j];
      squares += value * value;
      for (std::int64_t p = 0; p < kSketchProjections; ++p) projections[p] += value * signs[j * kSketchProjections + p];
    }
    result.values[line * (1 + kSketchProjections)] = std::sqrt(squares);
    for (std::int64_t p = 0; p < kSketchProjections; ++p) {
      result.values[line * (1 + kSketchProjections) + 1 + p] = projections[p];
    }
  }
  return result;
}

}  // namespace attncheck
