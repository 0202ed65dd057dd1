// Sketches of weight gradients and activations, for golden files whose full tensors would be too large
// (golden/SCHEMA.md, "Gradient sketches", attncheck-sketch-v1).
//
// A projection's gradient is sketched along its head axis: rows of q_proj, k_proj, v_proj; columns of
// o_proj. Each such line (length n) becomes [its 2-norm, its dot products with kSketchProjections
// vectors of +-1] — the vectors come from SplitMixStream(0, "attncheck-sketch-v1", 0): for j < n, for
// p < kSketchProjections, entry (j, p) = coin() ? -1 : +1. A wrong head changes its lines' sketches,
// so a sketched comparison still localises by head. Activations (out, grads/x, decode/out, shaped
// [batch, tokens, hidden]) are sketched along hidden, one line per token, giving [batch, tokens, 4]:
// a wrong token still shows at its batch row and position.
#pragma once

#include <string>
#include <string_view>

#include "core/model/tensor.hpp"

namespace attncheck {

inline constexpr std::int64_t kSketchProjections = 3;
inline constexpr std::string_view kSketchSuffix = "#sketch";

// "grads/q_proj", "ranks/3/grads/o_proj", ...: the projection gradients that may be sketched.
bool sketchable(std::string_view name);

// "out", "grads/x", "decode/out": the activations that may be sketched (long sequences).
bool sketchable_activation(std::string_view name);

// [lines, 1 + kSketchProjections] for a sketchable gradient of shape [rows, cols]; [batch, tokens,
// 1 + kSketchProjections] for an activation of shape [batch, tokens, hidden].
Tensor sketch(std::string_view name, const Tensor& gradient);
Shape sketch_shape(std::string_view name, const Shape& gradient_shape);

}  // namespace attncheck
