#include "cli/implementations.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/input_error.hpp"
#include "reference/reference.hpp"

namespace attncheck::cli {

namespace {

// Mutants: realistic broken implementations, so that checks can be shown to bite (issue 5 grows the
// catalog). Each is the sharded reference with one bug a real framework has made.

// Query heads 0 and 1 exchange their q_proj rows: a wrong head permutation in a fused-QKV split.
Result swapped_query_heads(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  if (g.num_heads() < 2) {
    ViolationList violations;
    violations.add("--impl", "mutant-swap-query-heads", "needs a geometry with at least 2 query heads", "");
    violations.throw_if_any("mutant not applicable");
  }
  Case mutated = test_case;
  auto& q = mutated.weights.q_proj.values;
  const std::int64_t block = g.head_dim() * g.hidden_size();
  std::swap_ranges(q.begin(), q.begin() + block, q.begin() + block);
  return reference::run_reference_tp(mutated);
}

// Scores scaled by (hidden_size / num_heads)^-0.5: the scale of a framework that derives head_dim from
// the quotient. Uses the quotient resolve_head_dim() recorded; applicable where it differs from head_dim.
Result quotient_scale(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  const auto quotient = g.quotient_head_dim();
  if (!quotient || *quotient == g.head_dim() || g.spec().query_pre_attn_scalar) {
    ViolationList violations;
    violations.add("--impl", "mutant-quotient-scale",
                   "needs a geometry whose explicit head_dim differs from hidden_size / num_heads (e.g. Qwen3)", "");
    violations.throw_if_any("mutant not applicable");
  }
  GeometrySpec spec = g.spec();
  spec.query_pre_attn_scalar = static_cast<double>(*quotient);
  Case mutated{.plan = make_tp_plan(resolve_geometry(spec), test_case.plan.tp_size),
               .inputs = test_case.inputs,
               .weights = test_case.weights};
  return reference::run_reference_tp(mutated);
}

}  // namespace

std::vector<std::string> implementation_names() {
  return {"reference", "reference-tp"};
}

std::vector<std::string> mutant_names() {
  return {"mutant-swap-query-heads", "mutant-quotient-scale", "mutant-top-left-decode-mask"};
}

Result run_implementation(const std::string& name, const Case& test_case) {
  if (name == "reference") return reference::run_reference(test_case);
  if (name == "reference-tp") return reference::run_reference_tp(test_case);
  if (name == "mutant-swap-query-heads") return swapped_query_heads(test_case);
  if (name == "mutant-quotient-scale") return quotient_scale(test_case);
  if (name == "mutant-top-left-decode-mask") {
    return reference::run_reference_tp(test_case, {.top_left_decode_mask = true});
  }
  std::vector<std::string> valid = implementation_names();
  const std::vector<std::string> mutants = mutant_names();
  valid.insert(valid.end(), mutants.begin(), mutants.end());
  ViolationList violations;
  violations.add("--impl", name, "must name an implementation attncheck has",
                 fmt::format("valid: {}", fmt::join(valid, ", ")));
  violations.throw_if_any("unknown implementation");
  return {};
}

bool produces_rank_gradients(const std::string& name) {
  return name != "reference";
}

}  // namespace attncheck::cli
