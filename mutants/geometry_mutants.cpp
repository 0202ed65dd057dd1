#include <fmt/format.h>

#include <stdexcept>

#include "core/model/tp_plan.hpp"
#include "mutants/mutant_functions.hpp"
#include "reference/reference.hpp"

namespace attncheck::mutants {

Result run_with_spec(const Case& test_case, const GeometrySpec& spec) {
  const Case mutated{.plan = make_tp_plan(resolve_geometry(spec), test_case.plan.tp_size),
                     .inputs = test_case.inputs,
                     .weights = test_case.weights};
  return reference::run_reference_tp(mutated);
}

// Scores scaled by (hidden_size / num_heads)^-0.5: the scale of a framework that derives head_dim from
// the quotient. Where there is no such quotient, or it is head_dim, or the scale comes from
// query_pre_attn_scalar, the framework would be right.
Result quotient_scale(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  const auto quotient = g.quotient_head_dim();
  if (!quotient || *quotient == g.head_dim() || g.spec().query_pre_attn_scalar) {
    return reference::run_reference_tp(test_case);
  }
  GeometrySpec spec = g.spec();
  spec.query_pre_attn_scalar = static_cast<double>(*quotient);
  return run_with_spec(test_case, spec);
}

// GPT-NeoX before head_dim existed: the layer is built with head_dim = hidden_size / num_heads, and
// loading the checkpoint fails on the first projection whose shape differs (as load_state_dict does).
Result head_dim_from_quotient(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  const std::int64_t built = g.hidden_size() / g.num_heads();
  if (g.hidden_size() % g.num_heads() != 0 || built != g.head_dim()) {
    throw std::runtime_error(
        fmt::format("size mismatch for q_proj.weight: copying a param with shape [{}, {}] "
                    "into the layer's [{}, {}]",
                    g.query_width(), g.hidden_size(), g.num_heads() * built, g.hidden_size()));
  }
  return reference::run_reference_tp(test_case);
}

// attn_output.reshape(batch, seq, hidden_size) before o_proj: fine while query_width == hidden_size.
Result context_hidden_width(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  if (g.query_width() != g.hidden_size()) {
    throw std::runtime_error(fmt::format("shape '[{}, {}, {}]' is invalid for input of size {}", test_case.inputs.batch,
                                         test_case.inputs.seq, g.hidden_size(),
                                         test_case.inputs.batch * test_case.inputs.seq * g.query_width()));
  }
  return reference::run_reference_tp(test_case);
}

Result rope_full_head(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  GeometrySpec spec = g.spec();
  spec.rotary_pct.reset();
  spec.rotary_dim.reset();  // absent: the whole head
  // longrope's factors are per rotated pair: the pairs the whole head adds rotate unscaled.
  for (auto* factors : {&spec.rope_scaling.short_factor, &spec.rope_scaling.long_factor}) {
    if (!factors->empty()) factors->resize(static_cast<std::size_t>(g.head_dim() / 2), 1.0);
  }
  return run_with_spec(test_case, spec);
}

// Granite's attention_multiplier ignored: scores scaled by head_dim^-0.5 as in every other Llama.
Result attention_multiplier_ignored(const Case& test_case) {
  GeometrySpec spec = test_case.geometry().spec();
  spec.attention_multiplier.reset();
  return run_with_spec(test_case, spec);
}

// A NoPE layer (SmolLM3's no_rope_layers) rotated over its whole head like its neighbours.
Result nope_rotated(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  if (g.rotary_dim() != 0) return reference::run_reference_tp(test_case);
  GeometrySpec spec = g.spec();
  spec.rotary_pct.reset();
  spec.rotary_dim = g.head_dim();
  spec.rope_scaling = {};
  return run_with_spec(test_case, spec);
}

// Gemma 2's softcap and scale in the wrong order: cap * tanh(q.k / cap) * scale instead of cap *
// tanh(scale * q.k / cap). That is scale * cap * tanh(s / (scale * cap)) of the scaled score s: the
// right order with a softcap of scale * cap.
Result softcap_before_scale(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  if (!g.softcap()) return reference::run_reference_tp(test_case);
  GeometrySpec spec = g.spec();
  spec.softcap = *g.softcap() * g.scale();
  return run_with_spec(test_case, spec);
}

Result rope_style_swapped(const Case& test_case) {
  GeometrySpec spec = test_case.geometry().spec();
  spec.rope_style = spec.rope_style == RopeStyle::half_split ? RopeStyle::interleaved : RopeStyle::half_split;
  return run_with_spec(test_case, spec);
}

// position_ids dropped: every row's tokens rotated by their index 0, 1, 2, ... (RoPE being relative,
// this shows only where positions are not consecutive).
Result rope_ignores_position_ids(const Case& test_case) {
  Case mutated = test_case;
  for (std::size_t t = 0; t < mutated.inputs.positions.size(); ++t) {
    mutated.inputs.positions[t] = static_cast<std::int64_t>(t) % mutated.inputs.seq;
  }
  return reference::run_reference_tp(mutated);
}

}  // namespace attncheck::mutants
