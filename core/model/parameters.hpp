// Parameters: the weights of one attention layer in Hugging Face layout, or their gradients, or one
// TP rank's shard of either (then the widths are the rank's local widths).
//
// Layouts (row-major, "out x in" as torch.nn.Linear stores them):
//   q_proj [query_width, hidden_size]   rows h*head_dim .. (h+1)*head_dim-1 belong to query head h
//   k_proj [kv_width, hidden_size]      rows g*head_dim .. belong to KV head g (v_proj the same)
//   v_proj [kv_width, hidden_size]
//   o_proj [hidden_size, query_width]   columns h*head_dim .. read query head h's context
//   q_bias [query_width], k_bias/v_bias [kv_width]   present iff geometry.qkv_bias()
//   o_bias [hidden_size]                             present iff geometry.out_bias()
//   q_norm, k_norm [head_dim]                        present iff geometry.qk_norm() != none; with
//                                                    rms-full-width q_norm [query_width], k_norm
//                                                    [kv_width], entry c scaling channel c (a rank:
//                                                    the channels of its own heads)
//   sinks [num_heads]                                present iff geometry.attention_sinks(): entry h is
//                                                    query head h's sink logit (a rank: its own heads')
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/model/geometry.hpp"
#include "core/model/tensor.hpp"

namespace attncheck {

class ViolationList;

struct Parameters {
  Tensor q_proj;
  Tensor k_proj;
  Tensor v_proj;
  Tensor o_proj;
  std::optional<Tensor> q_bias;
  std::optional<Tensor> k_bias;
  std::optional<Tensor> v_bias;
  std::optional<Tensor> o_bias;
  std::optional<Tensor> q_norm;
  std::optional<Tensor> k_norm;
  std::optional<Tensor> sinks;

  friend bool operator==(const Parameters&, const Parameters&) = default;
};

// Calls fn(name, tensor) for every present tensor, in the order of the struct. Works on const and
// non-const Parameters; names are the field names above.
template <class ParametersT, class Fn>
void for_each_parameter(ParametersT& parameters, Fn&& fn) {
  fn(std::string_view("q_proj"), parameters.q_proj);
  fn(std::string_view("k_proj"), parameters.k_proj);
  fn(std::string_view("v_proj"), parameters.v_proj);
  fn(std::string_view("o_proj"), parameters.o_proj);
  if (parameters.q_bias) fn(std::string_view("q_bias"), *parameters.q_bias);
  if (parameters.k_bias) fn(std::string_view("k_bias"), *parameters.k_bias);
  if (parameters.v_bias) fn(std::string_view("v_bias"), *parameters.v_bias);
  if (parameters.o_bias) fn(std::string_view("o_bias"), *parameters.o_bias);
  if (parameters.q_norm) fn(std::string_view("q_norm"), *parameters.q_norm);
  if (parameters.k_norm) fn(std::string_view("k_norm"), *parameters.k_norm);
  if (parameters.sinks) fn(std::string_view("sinks"), *parameters.sinks);
}

// Local widths of a (possibly sharded) parameter set: the whole layer, or one TP rank's part of it.
struct ParameterWidths {
  std::int64_t query_width = 0;  // q_proj rows, o_proj columns
  std::int64_t kv_width = 0;     // k_proj and v_proj rows
  std::int64_t num_heads = 0;    // query heads (sinks entries): query_width / head_dim
};
ParameterWidths full_widths(const Geometry& geometry);

// Zero-filled parameters with the shapes above (present tensors decided by the geometry).
Parameters zero_parameters(const Geometry& geometry, ParameterWidths widths);
// The same tensors with their shapes alone: values empty (numel() 0; element_count(shape) is the size). What a
// reader needs to know what to read, without allocating it first (a golden's gradients are as large as its
// weights).
Parameters parameter_shapes(const Geometry& geometry, ParameterWidths widths);
// Fills every tensor of shape-only parameters with zeros.
Parameters zero_filled(Parameters shapes);

// Adds a violation for every tensor whose presence, shape or values (NaN, Inf) are wrong.
// prefix is prepended to field names ("weights.", "rank 3 weights.").
void check_parameters(const Parameters& parameters, const Geometry& geometry, ParameterWidths widths,
                      const std::string& prefix, ViolationList& violations);

// Adds a violation naming the first non-finite value of the tensor, if any.
void check_finite(const Tensor& tensor, const std::string& field, ViolationList& violations);

}  // namespace attncheck
