// RMS normalisation of q and k before RoPE.
// Per head over head_dim (Qwen3, Gemma 3); the same weight w [head_dim] serves every head of q (q_norm)
// or of k (k_norm):
//   rms:           y = x / sqrt(mean(x^2) + eps) * w
//   rms-one-plus:  y = x / sqrt(mean(x^2) + eps) * (1 + w)
// Whole width (rms-full-width, OLMo-2): y = x / sqrt(sum(x^2) / N + eps) * w over all N channels of a
// token's q (N = num_heads * head_dim) or k (num_kv_heads * head_dim), w [N]. A TP rank holds only its
// heads' channels, so the sums over the width are all-reduced between ranks (reference.cpp writes the
// reductions out); the functions below take the reduced sums and work on the rank's channels.
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

// Whole width, one rank's part. rows: [tokens, local channels]; weight: the local channels' weights.
// Each token's sum of x^2 over the rank's channels: what the rank contributes to the all-reduce.
RowVector full_width_sum_squares(const ConstMatrixRef& rows);
// Normalises rows in place given each token's all-reduced sum of squares [tokens] over the whole
// width; inverse_rms receives [tokens, 1]: 1 / sqrt(sum / width + eps).
void full_width_norm_forward(MatrixRef rows, const RowVector& weight, const RowVector& sum_squares, std::int64_t width,
                             double eps, RowMatrix& inverse_rms);
// Each token's sum over the rank's channels of dn * n (dn = dy * w, n = x / rms): the backward's second
// all-reduce. gradient holds d(y) for the rank's channels (its own partial, for a replicated KV head).
RowVector full_width_dot(const ConstMatrixRef& gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                         const RowVector& weight);
// Replaces d(y) by the rank's part of d(x) = inv * (dn - n * dot / width), dot the all-reduced sum over
// the whole width and every rank, and adds d(w) into weight_gradient [local channels]. The term
// n * dot / width belongs to the full gradient once: with subtract_dot_term false (a KV head's replica
// other than the first), the rank's part leaves it to the first, so the replica group's sum is d(x).
void full_width_norm_backward(MatrixRef gradient, const ConstMatrixRef& input, const RowMatrix& inverse_rms,
                              const RowVector& weight, const RowVector& dot, std::int64_t width, bool subtract_dot_term,
                              RowVector& weight_gradient);

}  // namespace attncheck::reference
