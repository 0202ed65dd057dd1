#include "core/model/parameters.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {

// The parameters a geometry calls for, as (name, shape) pairs in for_each_parameter order.
std::vector<std::pair<std::string, Shape>> expected_shapes(const Geometry& geometry, ParameterWidths widths) {
  const std::int64_t hidden = geometry.hidden_size();
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
  return nullptr;
}

}  // namespace

ParameterWidths full_widths(const Geometry& geometry) {
  return {.query_width = geometry.query_width(), .kv_width = geometry.kv_width(), .num_heads = geometry.num_heads()};
}

Parameters parameter_shapes(const Geometry& geometry, ParameterWidths widths) {
  Parameters parameters;
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
  for_each_parameter(shapes, [](std::string_view, Tensor& tensor) {
    tensor.values.assign(static_cast<std::size_t>(element_count(tensor.shape)), 0.0);
  });
  return shapes;
}

Parameters zero_parameters(const Geometry& geometry, ParameterWidths widths) {
  return zero_filled(parameter_shapes(geometry, widths));
}

void check_finite(const Tensor& tensor, const std::string& field, ViolationList& violations) {
  for (std::size_t i = 0; i < tensor.values.size(); ++i) {
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
                     "the geometry has no such parameter (qkv_bias/out_bias/qk_norm/attention_sinks off)",
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
  // Absent tensors the geometry needs.
  for (const auto& [name, shape] : expected) {
    const std::optional<Tensor>* slot = optional_slot(parameters, name);
    if (slot != nullptr && !slot->has_value()) {
      violations.add(prefix + name, "absent", fmt::format("the geometry needs it, shape {}", to_string(shape)),
                     "provide the tensor or disable the matching geometry option");
    }
  }
}

}  // namespace attncheck
