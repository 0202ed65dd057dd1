#include "reference/feature_coverage.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "core/compare/compare.hpp"
#include "core/compare/rank_regroup.hpp"
#include "core/compare/sketch.hpp"
#include "core/compare/tolerance.hpp"
#include "core/generation/input_generation.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/attention_head.hpp"
#include "reference/rank_layer.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {

namespace {

// A float32 angle error above this (radians) moves scores by ~1e-3 of their size: far beyond the fp64
// and fp32 tolerances, so a golden at such positions catches angles formed in float32.
constexpr double kAngleErrorThatBites = 1e-3;

// The reference's answer to a case, unsharded (no "ranks/" tensors): its forward outputs (out, decode/out).
NamedTensors forward_answers(const Case& test_case) {
  return named_tensors(reference::run_reference(test_case, {.gradients = false}));
}

// The forward answer completed with the gradients: the forward pass again with its backward, but not the decode
// schedule (whose decode/out the forward answer holds already; it does not enter the gradients).
NamedTensors with_gradients(const Case& test_case, NamedTensors forward, std::vector<Parameters>* rank_slices_out) {
  Result result = reference::run_reference(test_case, {.decode = false});
  if (rank_slices_out != nullptr) *rank_slices_out = rank_slices(result.gradients->params, test_case.plan);
  for (auto& [name, tensor] : named_tensors(std::move(result))) forward.insert_or_assign(name, std::move(tensor));
  return forward;
}

// The tensors as the golden stores them: sketched where it sketches them (core/compare/sketch.hpp).
NamedTensors as_stored(const NamedTensors& tensors, const StoredForm& stored) {
  NamedTensors result;
  for (const auto& [name, tensor] : tensors) {
    if ((stored.activations_sketched && sketchable_activation(name)) ||
        (stored.gradients_sketched && sketchable(name))) {
      result[name + std::string(kSketchSuffix)] = sketch(name, tensor);
    } else {
      result[name] = tensor;
    }
  }
  return result;
}

// The tensor of `alternative` that moved most from `base`, in units of its fp64 tolerance, both as the
// golden stores them: compare() does the judging (scales, the gradient floor, sketches), so a bite is
// what `attncheck compare` would report. Tensors the alternative lacks are not part of the question.
FeatureBite measure(FeatureBite bite, const Case& test_case, const NamedTensors& full_base,
                    const NamedTensors& full_alternative, const StoredForm& stored) {
  // compare() sketches the alternative's full tensors where the base holds sketches, as for a candidate.
  const CompareReport report = compare(test_case, as_stored(full_base, stored), full_alternative, Precision::fp64);
  for (const TensorReport& tensor : report.tensors) {
    if (tensor.status == TensorStatus::missing || tensor.status == TensorStatus::wrong_shape) continue;
    const double tolerances =
        tensor.tolerance > 0.0 ? tensor.max_error / tensor.tolerance : (tensor.max_error > 0.0 ? HUGE_VAL : 0.0);
    if (tolerances > bite.tolerances) {
      bite.tolerances = tolerances;
      bite.tensor = tensor.name;
      bite.change = tensor.scale > 0.0 ? tensor.max_error / tensor.scale : 0.0;
    }
  }
  bite.bites = bite.tolerances > 1.0;
  return bite;
}

// The same case with another geometry (weights kept, those the new geometry lacks dropped).
Case with_spec(const Case& base, const GeometrySpec& spec) {
  Case changed = base;
  changed.plan = make_tp_plan(resolve_geometry(spec), base.plan.tp_size);
  if (spec.qk_norm == QkNorm::none) changed.weights.q_norm = changed.weights.k_norm = std::nullopt;
  if (!spec.attention_sinks) changed.weights.sinks = std::nullopt;
  return changed;
}

// Tokens [begin, end) of every batch row as a case of their own (no cache, no schedule, unsharded).
Case token_slice(const Case& base, std::int64_t begin, std::int64_t end) {
  const Inputs& in = base.inputs;
  const std::int64_t hidden = base.geometry().hidden_size(), count = end - begin;
  Case slice = base;
  slice.plan = make_tp_plan(base.geometry(), 1);
  Inputs& out = slice.inputs;
  out.seq = count;
  out.decode = {};
  out.x = Tensor({in.batch, count, hidden});
  out.dout = Tensor({in.batch, count, hidden});
  out.positions.clear();
  for (std::int64_t b = 0; b < in.batch; ++b) {
    const auto row = [&](const Tensor& t) { return t.values.begin() + (b * in.seq + begin) * hidden; };
    std::copy_n(row(in.x), count * hidden, out.x.values.begin() + b * count * hidden);
    std::copy_n(row(in.dout), count * hidden, out.dout.values.begin() + b * count * hidden);
    out.positions.insert(out.positions.end(), in.positions.begin() + b * in.seq + begin,
                         in.positions.begin() + b * in.seq + end);
    // Key j of the slice is key begin + j of the row: padding from key_length - begin on.
    out.key_lengths[b] = std::clamp<std::int64_t>(in.key_lengths[b] - begin, 0, count);
  }
  return slice;
}

std::vector<std::pair<std::int64_t, std::int64_t>> queries_without_keys(const Case& test_case) {
  std::vector<std::pair<std::int64_t, std::int64_t>> rows;  // (batch row, query)
  const Inputs& in = test_case.inputs;
  for (std::int64_t b = 0; b < in.batch; ++b) {
    const auto mask = reference::MaskSpec::for_geometry(test_case.geometry(), in.seq, in.seq, in.key_lengths[b]);
    for (std::int64_t i = 0; i < in.seq; ++i) {
      const auto keys = mask.visible_keys(i);
      if (keys.end <= keys.begin) rows.emplace_back(b, i);
    }
  }
  return rows;
}

// Off: such a row softmaxes a row of equal masked scores, i.e. takes the mean of V over all seq keys of
// its batch row (what an additive finite mask gives), instead of outputting 0 before o_proj.
FeatureBite rows_without_keys(const Case& test_case, const NamedTensors& base, FeatureBite bite,
                              const StoredForm& stored) {
  const auto rows = queries_without_keys(test_case);
  const Geometry& g = test_case.geometry();
  const Parameters& w = test_case.weights;
  const std::int64_t hidden = g.hidden_size(), head_dim = g.head_dim(), seq = test_case.inputs.seq;
  const std::int64_t group = g.num_heads() / g.num_kv_heads();
  NamedTensors alternative{{"out", base.at("out")}};
  std::int64_t mean_row = -1;  // the batch row mean_v holds (rows come in batch order)
  std::vector<double> mean_v(static_cast<std::size_t>(g.kv_width()), 0.0);
  for (const auto& [b, i] : rows) {
    // mean_v[c] = mean over keys j of (x_j . v_proj[c] + v_bias[c]); v_proj is [kv_width, hidden].
    for (std::int64_t c = 0; c < g.kv_width() && b != mean_row; ++c) {
      double sum = 0.0;
      for (std::int64_t j = 0; j < seq; ++j) {
        const double* x = &test_case.inputs.x.values[(b * seq + j) * hidden];
        for (std::int64_t k = 0; k < hidden; ++k) sum += x[k] * w.v_proj.values[c * hidden + k];
      }
      mean_v[c] = sum / static_cast<double>(seq) + (w.v_bias ? w.v_bias->values[c] : 0.0);
    }
    mean_row = b;
    // out row += o_proj . context, context of query head h = mean_v of its KV head; o_proj [hidden, q_width].
    double* out = &alternative.at("out").values[(b * seq + i) * hidden];
    for (std::int64_t r = 0; r < hidden; ++r) {
      double sum = 0.0;
      for (std::int64_t h = 0; h < g.num_heads(); ++h) {
        for (std::int64_t d = 0; d < head_dim; ++d) {
          sum += w.o_proj.values[r * g.query_width() + h * head_dim + d] * mean_v[(h / group) * head_dim + d];
        }
      }
      out[r] += sum;
    }
  }
  return measure(std::move(bite), test_case, base, alternative, stored);
}

// Off: each decode step attends to its own tokens only (the cache ignored).
FeatureBite decode_without_cache(const Case& test_case, const NamedTensors& base, FeatureBite bite,
                                 const StoredForm& stored) {
  const DecodeSchedule& schedule = test_case.inputs.decode;
  const std::int64_t hidden = test_case.geometry().hidden_size(), total = schedule.total();
  NamedTensors alternative{{"decode/out", base.at("decode/out")}};
  std::int64_t begin = schedule.prefill;
  for (const std::int64_t step : schedule.steps) {
    const Tensor slice_out = reference::run_reference(token_slice(test_case, begin, begin + step)).out;
    for (std::int64_t b = 0; b < test_case.inputs.batch; ++b) {
      std::copy_n(slice_out.values.begin() + b * step * hidden, step * hidden,
                  alternative.at("decode/out").values.begin() + (b * total + begin) * hidden);
    }
    begin += step;
  }
  return measure(std::move(bite), test_case, base, alternative, stored);
}

// Off: every decode call rotates with the full forward's longrope factors, so decode/out is the full
// forward's first rows (what a kernel that chooses the factors once per sequence, or from the allocated
// context, computes).
FeatureBite decode_without_factor_switch(const Case& test_case, const NamedTensors& base, FeatureBite bite,
                                         const StoredForm& stored) {
  const Inputs& in = test_case.inputs;
  const std::int64_t hidden = test_case.geometry().hidden_size(), total = in.decode.total();
  NamedTensors alternative{{"decode/out", base.at("decode/out")}};
  for (std::int64_t b = 0; b < in.batch; ++b) {
    std::copy_n(base.at("out").values.begin() + b * in.seq * hidden, total * hidden,
                alternative.at("decode/out").values.begin() + b * total * hidden);
  }
  return measure(std::move(bite), test_case, base, alternative, stored);
}

// Off: the per-rank gradients held as replicated-kv, as a candidate that knows no other convention holds
// them (and declares none). Where the two conventions cut a tensor differently its shape differs: such a
// candidate fails there whatever its values (tolerances: infinite); elsewhere the values are measured.
FeatureBite rank_gradients_as_replicated_kv(const Case& test_case, FeatureBite bite, const StoredForm& stored) {
  NamedTensors replicated;
  for (auto& [name, tensor] : named_tensors(reference::run_reference_tp(test_case))) {
    if (name.starts_with("ranks/")) replicated.emplace(name, std::move(tensor));
  }
  const NamedTensors held =
      regroup_rank_tensors(replicated, test_case.plan, TpConvention::replicated_kv, stored.tp_convention);
  for (const auto& [name, tensor] : held) {
    const auto other = replicated.find(name);
    if (other == replicated.end() || other->second.shape != tensor.shape) {
      bite.bites = true;
      bite.tensor = name;
      bite.change = 1.0;
      bite.tolerances = HUGE_VAL;
      return bite;
    }
  }
  return measure(std::move(bite), test_case, held, replicated, stored);
}

NamedTensors rank_tensors(const Parameters& parameters, int rank, const std::vector<std::string>& names) {
  NamedTensors tensors;
  for_each_parameter(parameters, [&](std::string_view name, const Tensor& tensor) {
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      tensors[fmt::format("ranks/{}/grads/{}", rank, name)] = tensor;
    }
  });
  return tensors;
}

// Off: a rank's gradients of what it shares with other ranks (a replicated KV head; q_norm and k_norm)
// are its own partial sums, the all-reduce missing. The partials come from reference-tp's own pass over
// the ranks (reference::rank_partial_gradients: a whole-width norm's all-reduces of the forward kept).
// full: the unsharded reference's gradients cut into each rank's slices (rank_slices of the base answer's).
std::vector<FeatureBite> rank_reductions(const Case& test_case, const NamedTensors& base,
                                         const std::vector<Parameters>& full, FeatureBite replication,
                                         FeatureBite norms, const StoredForm& stored) {
  const TpPlan& plan = test_case.plan;
  const std::vector<Parameters> partials = reference::rank_partial_gradients(test_case);
  const std::vector<std::string> kv_names = {"k_proj", "v_proj", "k_bias", "v_bias"};
  const std::vector<std::string> norm_names = {"q_norm", "k_norm"};
  NamedTensors base_ranks = base, kv_alternative, norm_alternative;
  for (int r = 0; r < plan.tp_size; ++r) {
    const Parameters& partial = partials[static_cast<std::size_t>(r)];
    for (auto& entry : rank_tensors(full[r], r, kv_names)) base_ranks.insert(entry);
    for (auto& entry : rank_tensors(full[r], r, norm_names)) base_ranks.insert(entry);
    for (auto& entry : rank_tensors(partial, r, kv_names)) kv_alternative.insert(entry);
    for (auto& entry : rank_tensors(partial, r, norm_names)) norm_alternative.insert(entry);
  }
  std::vector<FeatureBite> bites;
  if (!replication.feature.empty())
    bites.push_back(measure(std::move(replication), test_case, base_ranks, kv_alternative, stored));
  if (!norms.feature.empty())
    bites.push_back(measure(std::move(norms), test_case, base_ranks, norm_alternative, stored));
  return bites;
}

// A whole-width norm under TP without its all-reduce: each rank's heads run as a layer of their own (its
// shard, its local head counts), so each normalises only its own slice of the width; the ranks' outputs
// and dx summed, o_bias added once.
NamedTensors width_norm_per_rank(const Case& test_case) {
  const TpPlan& plan = test_case.plan;
  Tensor out(test_case.inputs.x.shape), dx(test_case.inputs.x.shape);
  for (int r = 0; r < plan.tp_size; ++r) {
    GeometrySpec spec = plan.geometry.spec();
    spec.num_heads = plan.ranks[r].q_heads.size();
    spec.num_kv_heads = plan.ranks[r].kv_heads.size();
    spec.head_dim = plan.geometry.head_dim();
    spec.out_bias = false;
    Case rank_case{.plan = make_tp_plan(resolve_geometry(spec), 1),
                   .inputs = test_case.inputs,
                   .weights = shard_parameters(test_case.weights, plan, r)};
    rank_case.weights.o_bias.reset();
    const Result result = reference::run_reference(rank_case);
    for (std::size_t i = 0; i < out.values.size(); ++i) {
      out.values[i] += result.out.values[i];
      dx.values[i] += result.gradients->x.values[i];
    }
  }
  if (test_case.weights.o_bias) {
    const std::vector<double>& bias = test_case.weights.o_bias->values;
    for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] += bias[i % bias.size()];
  }
  return {{"out", out}, {"grads/x", dx}};
}

// The largest error of RoPE angles formed in float32 (float position times float inv_freq) at the
// case's largest position.
double float_angle_error(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  const std::int64_t position = *std::max_element(test_case.inputs.positions.begin(), test_case.inputs.positions.end());
  double worst = 0.0;
  for (std::int64_t i = 0; i < g.rotary_dim() / 2; ++i) {
    const double inv_freq =
        std::pow(g.rope_theta(), -2.0 * static_cast<double>(i) / static_cast<double>(g.rotary_dim()));
    const float angle = static_cast<float>(position) * static_cast<float>(inv_freq);
    worst = std::max(worst, std::fabs(static_cast<double>(angle) - static_cast<double>(position) * inv_freq));
  }
  return worst;
}

// The heads whose projection blocks differ between two versions of the layer's weights, as "q_proj head 1":
// q/k/v_proj hold head h in rows [h * head_dim, (h + 1) * head_dim), o_proj in those columns.
std::vector<std::string> differing_head_blocks(const Parameters& ours, const Parameters& theirs, std::int64_t head_dim) {
  std::vector<std::string> heads;
  const auto rows = [&](const char* name, const Tensor& a, const Tensor& b) {
    const std::int64_t block = head_dim * a.shape[1];
    for (std::int64_t head = 0; head * block < a.numel(); ++head) {
      const auto begin = a.values.begin() + head * block;
      if (!std::equal(begin, begin + block, b.values.begin() + head * block))
        heads.push_back(fmt::format("{} head {}", name, head));
    }
  };
  rows("q_proj", ours.q_proj, theirs.q_proj);
  rows("k_proj", ours.k_proj, theirs.k_proj);
  rows("v_proj", ours.v_proj, theirs.v_proj);
  const std::int64_t hidden = ours.o_proj.shape[0], query_width = ours.o_proj.shape[1];
  for (std::int64_t head = 0; head * head_dim < query_width; ++head) {
    bool differs = false;
    for (std::int64_t row = 0; row < hidden && !differs; ++row) {
      for (std::int64_t col = head * head_dim; col < (head + 1) * head_dim; ++col)
        differs |= ours.o_proj.values[row * query_width + col] != theirs.o_proj.values[row * query_width + col];
    }
    if (differs) heads.push_back(fmt::format("o_proj head {}", head));
  }
  return heads;
}

}  // namespace

const std::vector<std::string>& coverage_features() {
  static const std::vector<std::string> features = {"padding",        "window",
                                                    "softcap",        "rows without keys",
                                                    "decode",         "kv replication",
                                                    "qk-norm reduce", "width-norm reduce",
                                                    "o_bias once",    "partial rope",
                                                    "qk-norm",        "bias",
                                                    "position gaps",  "large positions",
                                                    "scale source",   "rope scaling",
                                                    "nope",           "attention multiplier",
                                                    "sinks",          "stated attention factor",
                                                    "yarn mscale",    "yarn beta",
                                                    "yarn truncate",  "longrope switch",
                                                    "tp convention",  "outlier activations",
                                                    "duplicate-block rule",
                                                    // multi-head latent attention (alternative answers)
                                                    "latent value width", "latent rope part",
                                                    "latent scale width", "latent mscale",
                                                    "absorbed latent norm", "k_pe gradient reduce"};
  return features;
}

std::vector<FeatureBite> feature_coverage(const Case& test_case, const StoredForm& stored,
                                          const std::vector<AlternativeAnswer>& alternatives) {
  const Geometry& g = test_case.geometry();
  const GeometrySpec& spec = g.spec();
  const Inputs& in = test_case.inputs;
  const int tp_size = test_case.plan.tp_size;
  FeatureBite replication, norms;
  if (tp_size > g.num_kv_heads()) {
    replication = {.feature = "kv replication",
                   .claim = fmt::format("tp {} over {} KV heads", tp_size, g.num_kv_heads()),
                   .off = "a replicated KV head's gradient not summed over its replica group"};
  }
  if (tp_size > 1 && g.qk_norm() != QkNorm::none && !g.qk_norm_full_width()) {
    norms = {.feature = "qk-norm reduce",
             .claim = fmt::format("q_norm, k_norm on all {} ranks", tp_size),
             .off = "q_norm/k_norm gradients not summed over the ranks"};
  }
  // Forward first: a feature bites as soon as a forward output (out, decode/out) moves past its fp64 tolerance,
  // as most do; the backward (about two thirds of a reference run's arithmetic) runs only for a feature whose
  // forward outputs stay within it, and then every tensor is measured. So the answer (bites or not) is the
  // same as measuring every tensor; what "most changed" names is the forward output that moved most when
  // one bites. The base answer with gradients is computed once, when first needed.
  // The rank reductions (measured below, in this order among the features) need the base gradients cut per rank:
  // cut from the base answer itself rather than from a second run of the reference (the same numbers; on a wide
  // TP golden that run was a tenth of the time).
  const bool rank_reductions_claimed = !replication.feature.empty() || !norms.feature.empty();
  std::vector<Parameters> base_rank_slices;
  const NamedTensors base_forward = forward_answers(test_case);
  std::optional<NamedTensors> base_with_gradients;
  const auto full_base = [&]() -> const NamedTensors& {
    if (!base_with_gradients) {
      base_with_gradients =
          with_gradients(test_case, base_forward, rank_reductions_claimed ? &base_rank_slices : nullptr);
    }
    return *base_with_gradients;
  };
  const NamedTensors& base = base_forward;  // what the forward-only alternatives below are measured against
  std::vector<FeatureBite> bites;
  // Measures `alternative` on its forward outputs; only when none bites, completes it (complete(alternative):
  // with its gradients) and measures every tensor against the base answer with gradients.
  const auto forward_first = [&](FeatureBite bite, NamedTensors alternative, const auto& complete) {
    FeatureBite forward = measure(bite, test_case, base_forward, alternative, stored);
    bites.push_back(forward.bites ? std::move(forward)
                                  : measure(std::move(bite), test_case, full_base(),
                                            complete(std::move(alternative)), stored));
  };
  const auto already_complete = [](NamedTensors alternative) { return alternative; };  // computed with gradients
  const auto off_by_case = [&](FeatureBite bite, const Case& changed) {
    forward_first(std::move(bite), forward_answers(changed),
                  [&](NamedTensors forward) { return with_gradients(changed, std::move(forward), nullptr); });
  };
  // A scale feature switched off (a case that differs only in where its score scale comes from): the reference
  // reads the geometry's scale() alone, never its source, so the same double gives the same bits in every
  // tensor and the feature cannot bite (Gemma's query_pre_attn_scalar equal to head_dim). Recorded as measured
  // rather than run: two forward and two backward passes of the golden saved (a quarter of a long golden's time).
  // The scale is compared on the geometry alone, before the changed case (a copy of every weight) is made.
  const auto off_by_scale = [&](FeatureBite bite, const GeometrySpec& changed) {
    if (resolve_geometry(changed).scale() != g.scale()) {
      return off_by_case(std::move(bite), with_spec(test_case, changed));
    }
    bite.off += " (the same scale: the same answer, not rerun)";
    bites.push_back(std::move(bite));
  };

  if (std::any_of(in.key_lengths.begin(), in.key_lengths.end(), [&](std::int64_t l) { return l < in.seq; })) {
    Case changed = test_case;
    std::fill(changed.inputs.key_lengths.begin(), changed.inputs.key_lengths.end(), in.seq);
    off_by_case({.feature = "padding",
                 .claim = fmt::format("key_lengths [{}] of {}", fmt::join(in.key_lengths, ", "), in.seq),
                 .off = "every key_length = seq"},
                changed);
  }
  if (spec.sliding_window) {
    GeometrySpec changed = spec;
    changed.sliding_window.reset();
    off_by_case({.feature = "window",
                 .claim = fmt::format("sliding_window {} at seq {}", *spec.sliding_window, in.seq),
                 .off = "no window"},
                with_spec(test_case, changed));
  }
  if (spec.softcap) {
    GeometrySpec changed = spec;
    changed.softcap.reset();
    off_by_case({.feature = "softcap", .claim = fmt::format("softcap {}", *spec.softcap), .off = "no softcap"},
                with_spec(test_case, changed));
  }
  if (const auto rows = queries_without_keys(test_case); !rows.empty()) {
    bites.push_back(
        rows_without_keys(test_case, base,
                          {.feature = "rows without keys",
                           .claim = fmt::format("{} queries see no key", rows.size()),
                           .off = "such a query takes the mean of V over its row's keys (a finite additive mask)"},
                          stored));
  }
  if (!in.decode.empty() && !in.decode.steps.empty()) {
    bites.push_back(decode_without_cache(
        test_case, base,
        {.feature = "decode",
         .claim = fmt::format("prefill {} then steps [{}]", in.decode.prefill, fmt::join(in.decode.steps, ", ")),
         .off = "each step attends to its own tokens only (cache ignored)"},
        stored));
    if (const std::int64_t call = decode_call_with_other_frequencies(test_case); call >= 0) {
      const bool full_long = call_rope_frequencies(g, in.positions).long_factors;
      bites.push_back(decode_without_factor_switch(
          test_case, base,
          {.feature = "longrope switch",
           .claim = fmt::format("call {} {} factors, whole sequence {}", call,
                                full_long ? "short" : "long", full_long ? "long" : "short"),
           .off = "every decode call with the whole sequence's factors"},
          stored));
    }
  }
  if (rank_reductions_claimed) {
    const NamedTensors& with_gradients = full_base();
    for (FeatureBite& bite : rank_reductions(test_case, with_gradients, base_rank_slices, replication, norms, stored))
      bites.push_back(std::move(bite));
  }
  if (tp_size > 1 && g.qk_norm_full_width()) {
    forward_first({.feature = "width-norm reduce",
                   .claim = fmt::format("q over {} and k over {} channels, split over {} ranks", g.query_width(),
                                        g.kv_width(), tp_size),
                   .off = "each rank normalises its own slice of the width (no all-reduce)"},
                  width_norm_per_rank(test_case), already_complete);
  }
  if (tp_size > 1 && g.out_bias()) {
    NamedTensors alternative{{"out", base.at("out")}};
    const std::int64_t hidden = g.hidden_size();
    Tensor& out = alternative.at("out");
    for (std::size_t i = 0; i < out.values.size(); ++i) {
      out.values[i] += (tp_size - 1) * test_case.weights.o_bias->values[i % hidden];
    }
    bites.push_back(measure({.feature = "o_bias once",
                             .claim = fmt::format("o_bias with tp {}", tp_size),
                             .off = "o_bias added on every rank before the partial outputs are summed"},
                            test_case, base, alternative, stored));
  }
  // (Latent attention's RoPE part is a width of its own, not a fraction of the head: not this feature.)
  if (g.rotary_dim() > 0 && g.rotary_dim() < g.head_dim() && !g.is_latent()) {
    GeometrySpec changed = spec;
    changed.rotary_pct.reset();
    changed.rotary_dim = g.head_dim();
    // longrope's factors are per rotated pair: the pairs the whole head adds rotate unscaled (factor 1).
    for (auto* factors : {&changed.rope_scaling.short_factor, &changed.rope_scaling.long_factor}) {
      if (!factors->empty()) factors->resize(static_cast<std::size_t>(g.head_dim() / 2), 1.0);
    }
    off_by_case({.feature = "partial rope",
                 .claim = fmt::format("rotary_dim {} of head_dim {}", g.rotary_dim(), g.head_dim()),
                 .off = "RoPE over the whole head"},
                with_spec(test_case, changed));
  }
  if (g.qk_norm() != QkNorm::none) {
    GeometrySpec changed = spec;
    changed.qk_norm = QkNorm::none;
    off_by_case({.feature = "qk-norm", .claim = std::string(to_string(g.qk_norm())), .off = "no QK-norm"},
                with_spec(test_case, changed));
  }
  if (g.qkv_bias() || g.out_bias()) {
    Case changed = test_case;
    for (auto* bias :
         {&changed.weights.q_bias, &changed.weights.k_bias, &changed.weights.v_bias, &changed.weights.o_bias}) {
      if (*bias) std::fill((*bias)->values.begin(), (*bias)->values.end(), 0.0);
    }
    off_by_case({.feature = "bias",
                 .claim = fmt::format("qkv_bias {}, out_bias {}", g.qkv_bias(), g.out_bias()),
                 .off = "every bias 0"},
                changed);
  }
  bool gaps = false;
  for (std::int64_t b = 0; b < in.batch; ++b) {
    for (std::int64_t s = 1; s < in.seq; ++s)
      gaps |= in.positions[b * in.seq + s] != in.positions[b * in.seq + s - 1] + 1;
  }
  if (gaps && g.rotary_dim() > 0) {
    Case changed = test_case;
    for (std::int64_t b = 0; b < in.batch; ++b) {
      for (std::int64_t s = 1; s < in.seq; ++s) {
        changed.inputs.positions[b * in.seq + s] = changed.inputs.positions[b * in.seq] + s;
      }
    }
    off_by_case(
        {.feature = "position gaps", .claim = "positions advance by more than 1", .off = "consecutive positions"},
        changed);
  }
  const std::int64_t largest_position = *std::max_element(in.positions.begin(), in.positions.end());
  if (largest_position >= (std::int64_t{1} << 16) && g.rotary_dim() > 0) {
    // RoPE is exact under a shift of all positions, so "off" cannot be another case: what large
    // positions exist to catch is angles formed in float32, and that error is measured directly.
    const double error = float_angle_error(test_case);
    bites.push_back({.feature = "large positions",
                     .claim = fmt::format("positions up to {}", largest_position),
                     .off = "RoPE angles formed in float32 (error in radians; bites above 1e-3)",
                     .bites = error > kAngleErrorThatBites,
                     .tensor = "angles",
                     .change = error,
                     .tolerances = error / kAngleErrorThatBites});
  }
  if (g.rope_scaling().type != RopeScalingType::none && g.rotary_dim() > 0) {
    GeometrySpec changed = spec;
    changed.rope_scaling = {};
    off_by_case({.feature = "rope scaling",
                 .claim = fmt::format("{} RoPE scaling", to_string(g.rope_scaling().type)),
                 .off = "unscaled frequencies, attention factor 1"},
                with_spec(test_case, changed));
  }
  // Optional fields of the scaling that real configs state or leave out: each bites when the answer
  // under the stated value differs from the one under the derived value or the default, so a golden
  // catches a framework that misreads one form (drops it, or applies the derived one on top).
  if (const RopeScaling& scaling = g.rope_scaling(); g.rotary_dim() > 0) {
    const auto scaling_off = [&](FeatureBite bite, const std::function<void(RopeScaling&)>& change) {
      GeometrySpec changed = spec;
      change(changed.rope_scaling);
      off_by_case(std::move(bite), with_spec(test_case, changed));
    };
    if (scaling.attention_factor) {
      scaling_off({.feature = "stated attention factor",
                   .claim = fmt::format("{} attention_factor {} stated", to_string(scaling.type), *scaling.attention_factor),
                   .off = "the attention factor derived from factor (mscale)"},
                  [](RopeScaling& changed) { changed.attention_factor.reset(); });
    }
    if (scaling.mscale || scaling.mscale_all_dim) {
      scaling_off({.feature = "yarn mscale",
                   .claim = fmt::format("mscale {} / mscale_all_dim {}", scaling.mscale.value_or(0.0),
                                        scaling.mscale_all_dim.value_or(0.0)),
                   .off = "neither stated: m(factor, 1)"},
                  [](RopeScaling& changed) {
                    changed.mscale.reset();
                    changed.mscale_all_dim.reset();
                  });
    }
    if (scaling.beta_fast || scaling.beta_slow) {
      scaling_off({.feature = "yarn beta",
                   .claim = fmt::format("beta_fast {} / beta_slow {}", scaling.beta_fast.value_or(32.0),
                                        scaling.beta_slow.value_or(1.0)),
                   .off = "the defaults 32 / 1"},
                  [](RopeScaling& changed) {
                    changed.beta_fast.reset();
                    changed.beta_slow.reset();
                  });
    }
    if (scaling.type == RopeScalingType::yarn && !scaling.truncate) {
      scaling_off({.feature = "yarn truncate", .claim = "truncate false", .off = "the ramp's edges floored and ceiled"},
                  [](RopeScaling& changed) { changed.truncate = true; });
    }
  }
  // Outlier activations (SCHEMA.md's `outliers` distribution, or any x like it): hidden channels whose
  // largest |x| is over 8 times the median channel's. Off: each such channel scaled down to the median's.
  {
    const std::int64_t hidden = g.hidden_size(), tokens = in.batch * in.seq;
    std::vector<double> largest(static_cast<std::size_t>(hidden), 0.0);
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (std::int64_t c = 0; c < hidden; ++c) {
        largest[c] = std::max(largest[c], std::abs(in.x.values[t * hidden + c]));
      }
    }
    std::vector<double> sorted = largest;
    std::nth_element(sorted.begin(), sorted.begin() + hidden / 2, sorted.end());
    const double median = sorted[hidden / 2];
    Case changed = test_case;
    std::int64_t outliers = 0;
    for (std::int64_t c = 0; c < hidden && median > 0.0; ++c) {
      if (largest[c] <= 8.0 * median) continue;
      ++outliers;
      const double down = median / largest[c];
      for (std::int64_t t = 0; t < tokens; ++t) changed.inputs.x.values[t * hidden + c] *= down;
    }
    if (outliers > 0) {
      off_by_case({.feature = "outlier activations",
                   .claim = fmt::format("{} of {} channels: max |x| > 8x the median", outliers, hidden),
                   .off = "those channels scaled down to the median's"},
                  changed);
    }
  }
  // The generator's duplicate-block rule (SCHEMA.md "Weight generator v1"): a head block whose first draw
  // equals an earlier head's is redrawn. Off: the first draws, which a reader that skips the rule rebuilds.
  if (stored.weight_generator_seed && !g.is_latent()) {  // (latent attention's head blocks: not yet measured)
    Case changed = test_case;
    const Parameters first_draws = generate_weights(g, *stored.weight_generator_seed, HeadBlocks::first_draws);
    changed.weights.q_proj = first_draws.q_proj;
    changed.weights.k_proj = first_draws.k_proj;
    changed.weights.v_proj = first_draws.v_proj;
    changed.weights.o_proj = first_draws.o_proj;
    if (const auto redrawn = differing_head_blocks(test_case.weights, first_draws, g.head_dim()); !redrawn.empty()) {
      off_by_case({.feature = "duplicate-block rule",
                   .claim = fmt::format("{} redrawn", fmt::join(redrawn, ", ")),
                   .off = "every head block as first drawn (equal to an earlier head's)"},
                  changed);
    }
  }
  if (stored.tp_convention != TpConvention::replicated_kv && test_case.plan.tp_size > 1) {
    bites.push_back(rank_gradients_as_replicated_kv(
        test_case,
        {.feature = "tp convention",
         .claim = fmt::format("rank gradients held as {}", to_string(stored.tp_convention)),
         .off = "held as replicated-kv"},
        stored));
  }
  if (g.rotary_dim() == 0 && !g.is_latent()) {
    // A NoPE layer: what an implementation that rotates every layer would compute.
    GeometrySpec changed = spec;
    changed.rotary_pct.reset();
    changed.rotary_dim = g.head_dim();
    off_by_case({.feature = "nope", .claim = "rotary_dim 0 (a layer without RoPE)", .off = "RoPE over the whole head"},
                with_spec(test_case, changed));
  }
  if (spec.attention_sinks) {
    GeometrySpec changed = spec;
    changed.attention_sinks = false;
    off_by_case({.feature = "sinks", .claim = "a sink logit per query head", .off = "no sinks"},
                with_spec(test_case, changed));
  }
  if (spec.attention_multiplier) {
    GeometrySpec changed = spec;
    changed.attention_multiplier.reset();
    off_by_scale(
        {.feature = "attention multiplier",
         .claim = fmt::format("attention_multiplier {} (head_dim {})", *spec.attention_multiplier, g.head_dim()),
         .off = "scale head_dim^-0.5"},
        changed);
  }
  for (const AlternativeAnswer& alternative : alternatives) {
    NamedTensors unsharded;
    for (const auto& [name, tensor] : alternative.answer) {
      if (!name.starts_with("ranks/")) unsharded.emplace(name, tensor);
    }
    forward_first({.feature = alternative.feature, .claim = alternative.claim, .off = alternative.off},
                  std::move(unsharded), already_complete);
  }
  if (spec.query_pre_attn_scalar) {
    GeometrySpec changed = spec;
    changed.query_pre_attn_scalar.reset();
    off_by_scale(
        {.feature = "scale source",
         .claim = fmt::format("query_pre_attn_scalar {} (head_dim {})", *spec.query_pre_attn_scalar, g.head_dim()),
         .off = "scale head_dim^-0.5"},
        changed);
  }
  return bites;
}

}  // namespace attncheck::reference
