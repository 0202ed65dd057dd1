#include "core/model/case.hpp"

#include <fmt/format.h>

#include "core/errors/input_error.hpp"

namespace attncheck {

std::vector<std::int64_t> DecodeSchedule::calls() const {
  std::vector<std::int64_t> counts;
  if (prefill > 0) counts.push_back(prefill);
  counts.insert(counts.end(), steps.begin(), steps.end());
  return counts;
}

std::int64_t DecodeSchedule::total() const {
  std::int64_t tokens = prefill;
  for (std::int64_t step : steps) tokens += step;
  return tokens;
}

namespace {

void check_shape(const Tensor& tensor, const Shape& shape, const std::string& field, ViolationList& violations) {
  if (tensor.shape != shape || tensor.numel() != element_count(shape)) {
    violations.add(field, to_string(tensor.shape), fmt::format("shape must be {}", to_string(shape)),
                   "[batch, seq, hidden_size] with the case's batch and seq");
    return;
  }
  check_finite(tensor, field, violations);
}

void check_inputs(const Inputs& inputs, const Geometry& geometry, ViolationList& violations) {
  if (inputs.batch < 1 || inputs.seq < 1) {
    violations.add("inputs.batch/seq", fmt::format("{}/{}", inputs.batch, inputs.seq), "both must be >= 1",
                   "batch 1, seq 1 is the smallest case");
    return;
  }
  const Shape activation_shape = {inputs.batch, inputs.seq, geometry.hidden_size()};
  check_shape(inputs.x, activation_shape, "inputs.x", violations);
  check_shape(inputs.dout, activation_shape, "inputs.dout", violations);

  if (static_cast<std::int64_t>(inputs.positions.size()) != inputs.batch * inputs.seq) {
    violations.add("inputs.positions", fmt::format("{} values", inputs.positions.size()),
                   fmt::format("must hold batch * seq = {} values", inputs.batch * inputs.seq), "");
  } else {
    for (std::size_t i = 0; i < inputs.positions.size(); ++i) {
      if (inputs.positions[i] < 0 || inputs.positions[i] > kMaxPosition) {
        violations.add(fmt::format("inputs.positions[{}][{}]", i / inputs.seq, i % inputs.seq),
                       std::to_string(inputs.positions[i]), "positions must lie in [0, 2^31)",
                       "use offsets below 2147483648");
        break;
      }
    }
  }
  if (static_cast<std::int64_t>(inputs.key_lengths.size()) != inputs.batch) {
    violations.add("inputs.key_lengths", fmt::format("{} values", inputs.key_lengths.size()),
                   fmt::format("must hold one value per batch row ({})", inputs.batch), "");
  } else {
    for (std::size_t b = 0; b < inputs.key_lengths.size(); ++b) {
      if (inputs.key_lengths[b] < 0 || inputs.key_lengths[b] > inputs.seq) {
        violations.add(fmt::format("inputs.key_lengths[{}]", b), std::to_string(inputs.key_lengths[b]),
                       fmt::format("must lie in [0, seq = {}]", inputs.seq), fmt::format("{}", inputs.seq));
      }
    }
  }

  const DecodeSchedule& decode = inputs.decode;
  if (decode.empty()) return;
  if (decode.prefill < 0) {
    violations.add("inputs.decode.prefill", std::to_string(decode.prefill), "must be >= 0", "0");
  }
  // Bounds before the sum, so total() cannot overflow: at most seq steps, each of at most seq tokens.
  if (static_cast<std::int64_t>(decode.steps.size()) > inputs.seq || decode.prefill > inputs.seq) {
    violations.add("inputs.decode", fmt::format("prefill {}, {} steps", decode.prefill, decode.steps.size()),
                   fmt::format("prefill + steps must not exceed seq = {} tokens", inputs.seq),
                   "drop steps or lengthen the sequence");
    return;
  }
  bool steps_valid = true;
  for (std::size_t i = 0; i < decode.steps.size(); ++i) {
    if (decode.steps[i] < 1 || decode.steps[i] > inputs.seq) {
      violations.add(fmt::format("inputs.decode.steps[{}]", i), std::to_string(decode.steps[i]),
                     fmt::format("every step decodes between 1 and seq = {} tokens", inputs.seq), "1");
      steps_valid = false;
    }
  }
  if (steps_valid && decode.prefill >= 0 && decode.total() > inputs.seq) {
    violations.add("inputs.decode", fmt::format("prefill + steps = {}", decode.total()),
                   fmt::format("must not exceed seq = {}", inputs.seq), "drop steps or lengthen the sequence");
  }
  if (!geometry.causal()) {
    violations.add("inputs.decode", "present", "KV-cache decoding needs a causal geometry",
                   "drop the decode schedule or set causal");
  }
}

}  // namespace

namespace {

void check_case(const Case& test_case, bool weights) {
  ViolationList violations;
  check_inputs(test_case.inputs, test_case.geometry(), violations);
  if (weights) {
    check_parameters(test_case.weights, test_case.geometry(), full_widths(test_case.geometry()), "weights.",
                     violations);
  }
  if (test_case.context_parallel) {
    try {
      (void)make_parallel_layout(test_case.geometry(), test_case.plan.tp_size, *test_case.context_parallel);
    } catch (const InputError& error) {
      for (const Violation& violation : error.violations()) {
        violations.add("context_parallel." + violation.field, violation.value, violation.rule, violation.suggestion);
      }
    }
  }
  violations.throw_if_any("invalid case");
}

}  // namespace

void validate_case(const Case& test_case) { check_case(test_case, /*weights=*/true); }

void validate_case_but_weights(const Case& test_case) { check_case(test_case, /*weights=*/false); }

}  // namespace attncheck
