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
// Multi-head latent attention (geometry.is_latent(), core/model/latent_attention.hpp), HF state-dict
// names; `latent` is true, k_proj and v_proj are absent (shape {}, never visited), and:
//   q_proj [query_width, hidden_size]                  only without q_lora_rank (then no q_a_*, q_b_proj)
//   q_a_proj [q_lora_rank, hidden_size]                with q_lora_rank; every TP rank holds it whole
//   q_a_layernorm [q_lora_rank]                        with q_lora_rank; whole on every rank
//   q_b_proj [query_width, q_lora_rank]                rows h*qk_head_dim .. belong to query head h:
//                                                    its qk_nope_head_dim no-RoPE rows, then its RoPE rows
//   kv_a_proj_with_mqa [kv_lora_rank + qk_rope_head_dim, hidden_size]   rows: c_kv, then the shared k_pe;
//                                                    whole on every rank
//   kv_a_layernorm [kv_lora_rank]                      whole on every rank
//   kv_b_proj [kv_width, kv_lora_rank]                 kv_width = num_heads * (qk_nope_head_dim + v_head_dim):
//                                                    head h's k_nope rows, then its v rows
//   o_proj [hidden_size, value_width]                  value_width = num_heads * v_head_dim; columns
//                                                    h*v_head_dim .. read query head h's context
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
  // Multi-head latent attention only (see above).
  bool latent = false;
  std::optional<Tensor> q_a_proj;
  std::optional<Tensor> q_a_layernorm;
  std::optional<Tensor> q_b_proj;
  std::optional<Tensor> kv_a_proj_with_mqa;
  std::optional<Tensor> kv_a_layernorm;
  std::optional<Tensor> kv_b_proj;

  // Whether q_proj / k_proj and v_proj are tensors of this layer (a latent layer has neither k_proj nor
  // v_proj, and q_proj only without q_lora_rank).
  bool has_q_proj() const { return !latent || !q_b_proj; }
  bool has_kv_proj() const { return !latent; }

  friend bool operator==(const Parameters&, const Parameters&) = default;
};

// Every parameter's name, as under /weights and /expected/grads (SCHEMA.md): the plain layer's, then the latent
// layer's; for_each_parameter visits those a geometry has, in this order.
inline constexpr std::string_view kParameterNames[] = {
    "q_proj",         "k_proj",   "v_proj",        "o_proj",   "q_bias",
    "k_bias",         "v_bias",   "o_bias",        "q_norm",   "k_norm",
    "sinks",          "q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa",
    "kv_a_layernorm", "kv_b_proj"};

// Calls fn(name, tensor) for every present tensor, in the order of the struct. Works on const and
// non-const Parameters; names are the field names above.
template <class ParametersT, class Fn>
void for_each_parameter(ParametersT& parameters, Fn&& fn) {
  if (parameters.has_q_proj()) fn(std::string_view("q_proj"), parameters.q_proj);
  if (parameters.has_kv_proj()) {
    fn(std::string_view("k_proj"), parameters.k_proj);
    fn(std::string_view("v_proj"), parameters.v_proj);
  }
  fn(std::string_view("o_proj"), parameters.o_proj);
  if (parameters.q_bias) fn(std::string_view("q_bias"), *parameters.q_bias);
  if (parameters.k_bias) fn(std::string_view("k_bias"), *parameters.k_bias);
  if (parameters.v_bias) fn(std::string_view("v_bias"), *parameters.v_bias);
  if (parameters.o_bias) fn(std::string_view("o_bias"), *parameters.o_bias);
  if (parameters.q_norm) fn(std::string_view("q_norm"), *parameters.q_norm);
  if (parameters.k_norm) fn(std::string_view("k_norm"), *parameters.k_norm);
  if (parameters.sinks) fn(std::string_view("sinks"), *parameters.sinks);
  if (parameters.q_a_proj) fn(std::string_view("q_a_proj"), *parameters.q_a_proj);
  if (parameters.q_a_layernorm) fn(std::string_view("q_a_layernorm"), *parameters.q_a_layernorm);
  if (parameters.q_b_proj) fn(std::string_view("q_b_proj"), *parameters.q_b_proj);
  if (parameters.kv_a_proj_with_mqa) fn(std::string_view("kv_a_proj_with_mqa"), *parameters.kv_a_proj_with_mqa);
  if (parameters.kv_a_layernorm) fn(std::string_view("kv_a_layernorm"), *parameters.kv_a_layernorm);
  if (parameters.kv_b_proj) fn(std::string_view("kv_b_proj"), *parameters.kv_b_proj);
}

// Local widths of a (possibly sharded) parameter set: the whole layer, or one TP rank's part of it.
struct ParameterWidths {
  std::int64_t query_width = 0;  // q_proj rows (q_b_proj rows in MLA)
  std::int64_t kv_width = 0;     // k_proj and v_proj rows (kv_b_proj rows in MLA)
  std::int64_t num_heads = 0;    // query heads (sinks entries): query_width / head_dim
  std::int64_t value_width = 0;  // MLA only: o_proj columns, num_heads * v_head_dim (a plain o_proj has query_width)
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
