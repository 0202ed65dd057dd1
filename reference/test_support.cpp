#include "reference/test_support.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace attncheck::testing {

double relative_error(const Tensor& actual, const Tensor& expected) {
  if (actual.shape != expected.shape) throw std::logic_error("relative_error: shapes differ");
  double max_difference = 0.0;
  double max_expected = 0.0;
  for (std::size_t i = 0; i < actual.values.size(); ++i) {
    const double difference = std::fabs(actual.values[i] - expected.values[i]);
    if (std::isnan(difference)) return std::numeric_limits<double>::infinity();
    max_difference = std::max(max_difference, difference);
    max_expected = std::max(max_expected, std::fabs(expected.values[i]));
  }
  return max_expected > 0.0 ? max_difference / max_expected : max_difference;
}

void for_each_gradient_pair(const Gradients& actual, const Gradients& expected,
                            const std::function<void(const std::string&, const Tensor&, const Tensor&)>& fn) {
  fn("x", actual.x, expected.x);
  std::vector<std::pair<std::string, const Tensor*>> expected_tensors;
  for_each_parameter(expected.params, [&](std::string_view name, const Tensor& tensor) {
    expected_tensors.emplace_back(std::string(name), &tensor);
  });
  std::size_t index = 0;
  for_each_parameter(actual.params, [&](std::string_view name, const Tensor& tensor) {
    if (index >= expected_tensors.size() || expected_tensors[index].first != name) {
      throw std::logic_error(fmt::format("gradient sets differ at {}", name));
    }
    fn(std::string(name), tensor, *expected_tensors[index++].second);
  });
  if (index != expected_tensors.size()) throw std::logic_error("gradient sets differ in length");
}

double loss(const Tensor& out, const Tensor& dout) {
  double sum = 0.0;
  for (std::size_t i = 0; i < out.values.size(); ++i) sum += out.values[i] * dout.values[i];
  return sum;
}

Gradients finite_difference_gradients(const Case& test_case, const std::function<Tensor(const Case&)>& forward) {
  const double step = std::ldexp(1.0, -16);
  Case perturbed = test_case;
  auto derivative = [&](double& value) {
    const double original = value;
    auto loss_at = [&](double offset) {
      value = original + offset * step;
      return loss(forward(perturbed), test_case.inputs.dout);
    };
    const double result = (-loss_at(2) + 8 * loss_at(1) - 8 * loss_at(-1) + loss_at(-2)) / (12 * step);
    value = original;
    return result;
  };
  Gradients gradients;
  gradients.x = Tensor(test_case.inputs.x.shape);
  for (std::size_t i = 0; i < gradients.x.values.size(); ++i) {
    gradients.x.values[i] = derivative(perturbed.inputs.x.values[i]);
  }
  gradients.params = test_case.weights;
  // Walk the perturbed weights and the gradient slots in the same order.
  std::vector<Tensor*> slots;
  for_each_parameter(gradients.params, [&](std::string_view, Tensor& tensor) { slots.push_back(&tensor); });
  std::size_t index = 0;
  for_each_parameter(perturbed.weights, [&](std::string_view, Tensor& tensor) {
    Tensor& slot = *slots[index++];
    for (std::size_t i = 0; i < tensor.values.size(); ++i) slot.values[i] = derivative(tensor.values[i]);
  });
  return gradients;
}

GeometrySpec random_small_geometry(std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return low + static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(high - low + 1));
  };
  GeometrySpec spec;
  const std::int64_t num_kv_heads = pick(1, 3);
  spec.num_heads = num_kv_heads * pick(1, 3);
  spec.num_kv_heads = num_kv_heads;
  spec.head_dim = 2 * pick(1, 4);
  spec.hidden_size = pick(3, 12);
  spec.rotary_dim = 2 * pick(0, *spec.head_dim / 2);  // anything from no RoPE to the whole head
  spec.rope_theta = pick(0, 1) ? 10000.0 : 1000000.0;
  spec.rope_style = pick(0, 1) ? RopeStyle::half_split : RopeStyle::interleaved;
  const QkNorm norms[] = {QkNorm::none, QkNorm::rms, QkNorm::rms_one_plus, QkNorm::rms_full_width};
  spec.qk_norm = norms[pick(0, 3)];
  spec.qkv_bias = pick(0, 1) == 1;
  spec.out_bias = pick(0, 1) == 1;
  if (pick(0, 2) == 0) spec.softcap = 2.0;
  if (pick(0, 2) == 0) spec.sliding_window = pick(1, 3);
  spec.causal = pick(0, 3) != 0;
  if (pick(0, 3) == 0) spec.query_pre_attn_scalar = static_cast<double>(pick(1, 64));
  return spec;
}

std::string describe(const Geometry& g) {
  return fmt::format(
      "hidden {} heads {}/{} head_dim {} rotary {} {} norm {} bias {}/{} scale {:.4g} softcap {} window {} {}",
      g.hidden_size(), g.num_heads(), g.num_kv_heads(), g.head_dim(), g.rotary_dim(), to_string(g.rope_style()),
      to_string(g.qk_norm()), g.qkv_bias(), g.out_bias(), g.scale(),
      g.softcap() ? fmt::format("{}", *g.softcap()) : "-",
      g.sliding_window() ? std::to_string(*g.sliding_window()) : "-", g.causal() ? "causal" : "bidirectional");
}

}  // namespace attncheck::testing
