#include <algorithm>
#include <vector>

#include "mutants/mutant_functions.hpp"
#include "reference/reference.hpp"

namespace attncheck::mutants {

namespace {

// Moves query head h's weights to slot target[h]: q_proj rows, q_bias entries, o_proj columns, its sink.
Parameters permute_query_heads(const Parameters& weights, const Geometry& g, const std::vector<std::int64_t>& target) {
  Parameters permuted = weights;
  const std::int64_t d = g.head_dim();
  const std::int64_t hidden = g.hidden_size();
  const std::int64_t query_width = g.query_width();
  for (std::int64_t h = 0; h < g.num_heads(); ++h) {
    const std::int64_t to = target[h];
    std::copy_n(weights.q_proj.values.begin() + h * d * hidden, d * hidden,
                permuted.q_proj.values.begin() + to * d * hidden);
    if (weights.q_bias) {
      std::copy_n(weights.q_bias->values.begin() + h * d, d, permuted.q_bias->values.begin() + to * d);
    }
    if (weights.sinks) permuted.sinks->values[to] = weights.sinks->values[h];
    for (std::int64_t row = 0; row < hidden; ++row) {
      std::copy_n(weights.o_proj.values.begin() + row * query_width + h * d, d,
                  permuted.o_proj.values.begin() + row * query_width + to * d);
    }
  }
  return permuted;
}

}  // namespace

Result swapped_query_heads(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  if (g.num_heads() < 2) return reference::run_reference_tp(test_case);
  Case mutated = test_case;
  auto& q = mutated.weights.q_proj.values;
  const std::int64_t block = g.head_dim() * g.hidden_size();
  std::swap_ranges(q.begin(), q.begin() + block, q.begin() + block);
  return reference::run_reference_tp(mutated);
}

// The mutant computes out = sum_h o_h(attn(q_h, kv_{h % H_kv})). The reference on weights whose head h
// sits in slot s(h) = (h % H_kv) * group + h / H_kv computes exactly that (slot s reads KV head
// s / group = h % H_kv), and the gradients of slot s(h) are those of head h. Unsharded: which rank would
// hold which head is the mutant's own business.
Result kv_head_modulo(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  std::vector<std::int64_t> slot(g.num_heads());
  for (std::int64_t h = 0; h < g.num_heads(); ++h)
    slot[h] = (h % g.num_kv_heads()) * g.group_size() + h / g.num_kv_heads();
  Case mutated = test_case;
  mutated.weights = permute_query_heads(test_case.weights, g, slot);
  Result result = reference::run_reference(mutated);
  std::vector<std::int64_t> back(g.num_heads());
  for (std::int64_t h = 0; h < g.num_heads(); ++h) back[slot[h]] = h;
  if (result.gradients) {
    Parameters& grads = result.gradients->params;
    const Parameters restored = permute_query_heads(grads, g, back);
    grads.q_proj = restored.q_proj;
    grads.q_bias = restored.q_bias;
    grads.o_proj = restored.o_proj;
    grads.sinks = restored.sinks;
  }
  result.implementation = "mutant-kv-head-modulo";
  return result;
}

// A layer built with o_proj [hidden, hidden] that loads the checkpoint's [hidden, query_width] leniently:
// context channels past hidden_size never reach the output (when the query width exceeds hidden).
Result o_proj_hidden_wide(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  Case mutated = test_case;
  for (std::int64_t row = 0; row < g.hidden_size(); ++row) {
    for (std::int64_t column = g.hidden_size(); column < g.query_width(); ++column) {
      mutated.weights.o_proj.values[row * g.query_width() + column] = 0.0;
    }
  }
  return reference::run_reference_tp(mutated);
}

// Each rank reads the sinks of the next rank's query heads (an offset into the unsharded sinks taken
// from the wrong rank, or none): with its gradient written to its own slots. That is the reference on
// sinks rotated by one rank's heads, whose gradients it reports at the rotated places.
Result sinks_of_another_rank(const Case& test_case) {
  const TpPlan& plan = test_case.plan;
  if (!test_case.weights.sinks || plan.tp_size < 2) return reference::run_reference_tp(test_case);
  Case mutated = test_case;
  std::vector<double>& sinks = mutated.weights.sinks->values;
  std::rotate(sinks.begin(), sinks.begin() + plan.ranks[0].q_heads.size(), sinks.end());
  return reference::run_reference_tp(mutated);
}

// The sinks' gradient never computed (a sink tensor created without requires_grad, or a kernel whose
// backward ignores it): everything else right, d(sinks) zero on every rank.
Result sink_gradient_missing(const Case& test_case) {
  Result result = reference::run_reference_tp(test_case);
  const auto zero = [](std::optional<Tensor>& sinks) {
    if (sinks) std::fill(sinks->values.begin(), sinks->values.end(), 0.0);
  };
  if (result.gradients) zero(result.gradients->params.sinks);
  for (Parameters& rank : result.rank_gradients) zero(rank.sinks);
  return result;
}

}  // namespace attncheck::mutants
