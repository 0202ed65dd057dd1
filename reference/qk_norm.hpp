// Per-head RMS normalisation of q and k over head_dim, before RoPE (Qwen3, Gemma 3).
//   rms:           y = x / sqrt(mean(x^2) + eps) * w
//   rms-one-plus:  y = x / sqrt(mean(x^2) + eps) * (1 + w)
// The same weight w [head_dim] serves every head of q (q_norm) or of k (k_norm).
#pragma once

#include <cstdint>

#include "core/model/geometry.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::reference {

// rows: [tokens, heads * head_dim], normalised in place. inverse_rms receives [tokens, heads]:
// 1 / sqrt(mean(x^2) + eps) per token and head, which the backward pass needs.
void qk_norm_forward(MatrixRef rows, const RowVector& weight, std::int64_t heads, const Geometry& geometry,
                     RowMatrix& inverse_rms);

// Given the pre-norm input x and d(y) for the same rows, replaces d(y) by d(x) and adds d(w) into
// weight_gradient ([head_dim], summed over tokens and heads).
void qk_norm_backward(MatrixRef gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                      const RowVector& weight, std::int64_t heads, const Geometry& geometry,
                      RowVector& weight_gradient);

}  // namespace attncheck::reference
