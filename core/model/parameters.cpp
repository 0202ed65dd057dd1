#include "core/model/parameters.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {

// The parameters a geometry calls for, as (name, shape) pairs in for_each_parameter order.
std::vector<std::pair<std::string, Shape>> expected_shapes(const Geometry& geometry, ParameterWidths widths) {
  const std::int64_t hidden = geometry.hidden_size();
  if (geometry.is_latent()) {
    const LatentAttentionSpec& latent = *geometry.latent();
    std::vector<std::pair<std::string, Shape>> shapes;
    if (!latent.q_lora_rank) shapes.push_back({"q_proj", {widths.query_width, hidden}});
    shapes.push_back({"o_proj", {hidden, widths.value_width}});
    if (geometry.attention_sinks()) shapes.push_back({"sinks", {widths.num_heads}});
    if (latent.q_lora_rank) {
      shapes.push_back({"q_a_proj", {*latent.q_lora_rank, hidden}});
      shapes.push_back({"q_a_layernorm", {*latent.q_lora_rank}});
      shapes.push_back({"q_b_proj", {widths.query_width, *latent.q_lora_rank}});
    }
    shapes.push_back({"kv_a_proj_with_mqa", {latent.kv_a_rows(), hidden}});
    shapes.push_back({"kv_a_layernorm", {latent.kv_lora_rank}});
    shapes.push_back({"kv_b_proj", {widths.kv_width, latent.kv_lora_rank}});
    return shapes;
  }
  std::vector<std::pair<std::string, Shape>> shapes = {
      {"q_proj", {widths.query_width, hidden}},
      {"k_proj", {widths.kv_width, hidden}},
      {"v_proj", {widths.kv_width, hidden}},
      {"o_proj", {hidden, widths.query_width}},
  };
  if (geometry.qkv_bias()) {
    shapes.push_back({"q_bias", {widths.query_width}});
    shapes.push_back({"k_bias", {widths.kv_width}});
    shapes.push_back({"v_bias", {widths.kv_width}});
  }
  if (geometry.out_bias()) shapes.push_back({"o_bias", {hidden}});
  if (geometry.qk_norm_full_width()) {  // one weight per channel of the (local) projection
    shapes.push_back({"q_norm", {widths.query_width}});
    shapes.push_back({"k_norm", {widths.kv_width}});
  } else if (geometry.qk_norm() != QkNorm::none) {
    shapes.push_back({"q_norm", {geometry.head_dim()}});
    shapes.push_back({"k_norm", {geometry.head_dim()}});
  }
  if (geometry.attention_sinks()) shapes.push_back({"sinks", {widths.num_heads}});
  return shapes;
}

// The optional member called name (const or not), or nullptr for a required tensor.
template <class ParametersT>
auto optional_slot(ParametersT& parameters, const std::string& name) -> decltype(&parameters.q_bias) {
  if (name == "q_bias") return &parameters.q_bias;
  if (name == "k_bias") return &parameters.k_bias;
  if (name == "v_bias") return &parameters.v_bias;
  if (name == "o_bias") return &parameters.o_bias;
  if (name == "q_norm") return &parameters.q_norm;
  if (name == "k_norm") return &parameters.k_norm;
  if (name == "sinks") return &parameters.sinks;
  if (name == "q_a_proj") return &parameters.q_a_proj;
  if (name == "q_a_layernorm") return &parameters.q_a_layernorm;
  if (name == "q_b_proj") return &parameters.q_b_proj;
  if (name == "kv_a_proj_with_mqa") return &parameters.kv_a_proj_with_mqa;
  if (name == "kv_a_layernorm") return &parameters.kv_a_layernorm;
  if (name == "kv_b_proj") return &parameters.kv_b_proj;
  return nullptr;
}

}  // namespace

ParameterWidths full_widths(const Geometry& geometry) {
  const std::int64_t kv_width = geometry.is_latent()
                                    ? geometry.num_heads() * geometry.latent()->kv_b_rows_per_head()
                                    : geometry.kv_width();
  return {.query_width = geometry.query_width(),
          .kv_width = kv_width,
          .num_heads = geometry.num_heads(),
          .value_width = geometry.value_width()};
}

Parameters parameter_shapes(const Geometry& geometry, ParameterWidths widths) {
  Parameters parameters;
  parameters.latent = geometry.is_latent();
  for (auto& [name, shape] : expected_shapes(geometry, widths)) {
    Tensor shaped;
    shaped.shape = std::move(shape);
    if (name == "q_proj")
      parameters.q_proj = std::move(shaped);
    else if (name == "k_proj")
      parameters.k_proj = std::move(shaped);
    else if (name == "v_proj")
      parameters.v_proj = std::move(shaped);
    else if (name == "o_proj")
      parameters.o_proj = std::move(shaped);
    else
      *optional_slot(parameters, name) = std::move(shaped);
  }
  return parameters;
}

Parameters zero_filled(Parameters shapes) {
  for_each_parameter(shapes, [](std::string_view, Tensor& tensor) { tensor = Tensor(std::move(tensor.shape)); });
  return shapes;
}

Parameters zero_parameters(const Geometry& geometry, ParameterWidths widths) {
  return zero_filled(parameter_shapes(geometry, widths));
}

namespace {

// Whether values[first, first + count) holds a NaN or an infinity: every exponent bit set. A branch-free scan the
// compiler vectorises (an early exit per value would not be), over every tensor read and every result returned.
bool any_not_finite(const double* values, std::size_t count) {
  constexpr std::uint64_t kExponent = 0x7FF0000000000000ULL;
  std::uint64_t not_finite = 0;
// GCC's -O2 cost model leaves this loop scalar unless told; clang vectorises it by itself at -O2, and at -O1 (the
// fuzzing build, ci/fuzz-parsers) a forced vectorisation it cannot do is an error (-Wpass-failed).
#if !defined(__clang__)
#pragma omp simd reduction(| : not_finite)
#endif
  for (std::size_t i = 0; i < count; ++i) {
    not_finite |= static_cast<std::uint64_t>((std::bit_cast<std::uint64_t>(values[i]) & kExponent) == kExponent);
  }
  return not_finite != 0;
}

}  // namespace

void check_finite(const Tensor& tensor, const std::string& field, ViolationList& violations) {
  // Chunk by chunk, so that the first bad value is found without scanning the rest of a large tensor twice.
  constexpr std::size_t kChunk = 4096;
  std::size_t first = 0;
  while (first < tensor.values.size() &&
         !any_not_finite(tensor.values.data() + first, std::min(kChunk, tensor.values.size() - first))) {
    first += kChunk;
  }
  for (std::size_t i = first; i < tensor.values.size(); ++i) {
    if (!std::isfinite(tensor.values[i])) {
      violations.add(fmt::format("{}[flat {}]", field, i), fmt::format("{}", tensor.values[i]),
                     "every value must be finite", "replace NaN and Inf values before running");
      return;
    }
  }
}

void check_parameters(const Parameters& parameters, const Geometry& geometry, ParameterWidths widths,
                      const std::string& prefix, ViolationList& violations) {
  const auto expected = expected_shapes(geometry, widths);
  auto find_expected = [&](std::string_view name) -> const Shape* {
    for (const auto& [expected_name, shape] : expected) {
      if (expected_name == name) return &shape;
    }
    return nullptr;
  };
  // Present tensors: wanted by the geometry, right shape, finite.
  for_each_parameter(parameters, [&](std::string_view name, const Tensor& tensor) {
    const std::string field = prefix + std::string(name);
    const Shape* shape = find_expected(name);
    if (shape == nullptr) {
      violations.add(field, "present",
                     geometry.is_latent()
                         ? "a latent-attention layer has no such parameter (core/model/parameters.hpp)"
                         : "the geometry has no such parameter (qkv_bias/out_bias/qk_norm/attention_sinks off)",
                     "drop the tensor or enable the matching geometry option");
      return;
    }
    if (tensor.shape != *shape || tensor.numel() != element_count(*shape)) {
      violations.add(field, to_string(tensor.shape), fmt::format("shape must be {}", to_string(*shape)),
                     "see core/model/parameters.hpp for the layout");
      return;
    }
    check_finite(tensor, field, violations);
  });
  if (parameters.latent != geometry.is_latent()) {
    violations.add(prefix + "latent", parameters.latent ? "true" : "false",
                   geometry.is_latent() ? "a latent-attention geometry needs latent-attention weights"
                                        : "a plain geometry needs q_proj, k_proj and v_proj, not latent weights",
                   "build the weights for this geometry (generate_weights, or the golden file's own)");
  }
  // Absent tensors the geometry needs (q_proj of a latent layer without q_lora_rank included).
  if (geometry.is_latent() && !geometry.latent()->q_lora_rank && !parameters.has_q_proj()) {
    violations.add(prefix + "q_proj", "absent", "a latent-attention layer without q_lora_rank needs q_proj",
                   "provide q_proj, or set q_lora_rank");
  }
  for (const auto& [name, shape] : expected) {
    const std::optional<Tensor>* slot = optional_slot(parameters, name);
    if (slot != nullptr && !slot->has_value()) {
      violations.add(prefix + name, "absent", fmt::format("the geometry needs it, shape {}", to_string(shape)),
                     "provide the tensor or disable the matching geometry option");
    }
  }
}

}  // namespace attncheck
