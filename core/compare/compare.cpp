#include "core/compare/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "core/compare/rank_regroup.hpp"
#include "core/compare/sketch.hpp"
#include "core/compare/tolerance.hpp"
#include "core/errors/input_error.hpp"
#include "core/model/parameters.hpp"

namespace attncheck {

bool TensorNameOrder::operator()(std::string_view a, std::string_view b) const {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      // Whole runs of digits: without leading zeros, the shorter run is the smaller number.
      std::size_t a_end = i, b_end = j;
      while (a_end < a.size() && is_digit(a[a_end])) ++a_end;
      while (b_end < b.size() && is_digit(b[b_end])) ++b_end;
      std::size_t a_first = i, b_first = j;
      while (a_first + 1 < a_end && a[a_first] == '0') ++a_first;
      while (b_first + 1 < b_end && b[b_first] == '0') ++b_first;
      const std::string_view a_run = a.substr(a_first, a_end - a_first), b_run = b.substr(b_first, b_end - b_first);
      if (a_run.size() != b_run.size()) return a_run.size() < b_run.size();
      if (a_run != b_run) return a_run < b_run;
      if (a_end - i != b_end - j) return a_end - i < b_end - j;  // "01" after "1": an order, not equality
      i = a_end;
      j = b_end;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

namespace {

Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    index[axis] = flat % shape[axis];
    flat /= shape[axis];
  }
  return index;
}

// Each rank's holdings under the convention the per-rank tensors follow, computed on first use: a
// comparison without per-rank tensors never asks whether the convention can partition the plan.
class LazyHoldings {
 public:
  LazyHoldings(const TpPlan& plan, TpConvention convention) : plan_(plan), convention_(convention) {}
  // nullptr for a rank outside the plan.
  const RankHoldings* of(int rank) {
    if (rank < 0 || rank >= plan_.tp_size) return nullptr;
    if (holdings_.empty()) holdings_ = rank_holdings(plan_, convention_);  // never empty once computed
    return &holdings_[rank];
  }

 private:
  const TpPlan& plan_;
  TpConvention convention_;
  std::vector<RankHoldings> holdings_;  // (std::optional here trips GCC 12's -Wmaybe-uninitialized)
};

// Where one element of a named tensor lives: batch row and position for activations, heads for
// projection rows/columns (a rank's row i is row holdings.begin + i of the layer's tensor, which need
// not start at a whole head under megatron-equal-block), the rank for per-rank gradients.
struct Locator {
  const Case& test_case;
  std::string base;  // name without "ranks/<r>/" and "#sketch"
  int rank = -1;
  const RankHoldings* holdings = nullptr;  // the rank's, for per-rank tensors
  bool sketched = false;                   // a sketch's row is a line along the head axis, for o_proj too

  Locator(const Case& c, const std::string& full_name, LazyHoldings& all_holdings) : test_case(c), base(full_name) {
    std::string name = full_name;
    if (name.ends_with(kSketchSuffix)) {
      sketched = true;
      name.resize(name.size() - kSketchSuffix.size());
      base = name;
    }
    if (const std::optional<RankTensorName> rank_name = parse_rank_tensor_name(name)) {
      rank = rank_name->rank;
      base = "grads/" + rank_name->parameter;
      holdings = all_holdings.of(rank);
    }
  }

  // axes: batch rows, positions, query heads, KV heads, ranks.
  void locate(const Shape& index, std::set<std::int64_t> (&axes)[5]) const {
    const std::int64_t head_dim = test_case.geometry().head_dim();
    const auto first = [&](IndexRange RankHoldings::*lines) { return holdings ? (holdings->*lines).begin : 0; };
    if (rank >= 0) axes[4].insert(rank);
    if (base == "out" || base == "grads/x" || base == "decode/out") {
      axes[0].insert(index[0]);
      axes[1].insert(index[1]);
    } else if (base == "grads/q_proj" || base == "grads/q_bias") {
      axes[2].insert((first(&RankHoldings::q_proj_rows) + index[0]) / head_dim);
    } else if (base == "grads/o_proj") {  // columns are value heads: v_head_dim wide (head_dim but in MLA)
      axes[2].insert((first(&RankHoldings::o_proj_columns) + (sketched ? index[0] : index[1])) /
                     test_case.geometry().v_head_dim());
    } else if (base == "grads/q_b_proj") {  // latent attention: rows per query head, as q_proj's
      axes[2].insert(index[0] / head_dim);
    } else if (base == "grads/kv_b_proj") {  // latent attention: k_nope and v rows of each query head
      axes[2].insert(index[0] / test_case.geometry().latent()->kv_b_rows_per_head());
    } else if (base == "grads/k_proj" || base == "grads/k_bias") {
      axes[3].insert((first(&RankHoldings::k_proj_rows) + index[0]) / head_dim);
    } else if (base == "grads/v_proj" || base == "grads/v_bias") {
      axes[3].insert((first(&RankHoldings::v_proj_rows) + index[0]) / head_dim);
    } else if (base == "grads/sinks") {  // one entry per query head
      axes[2].insert(first(&RankHoldings::q_heads) + index[0]);
    }
  }
};

double max_abs(const Tensor& tensor) {
  double scale = 0.0;
  for (double value : tensor.values) scale = std::max(scale, std::fabs(value));
  return scale;
}

bool is_gradient(const std::string& name) {
  return name.starts_with("grads/") || (name.starts_with("ranks/") && name.find("/grads/") != std::string::npos);
}

// The largest |a - b| of two same-shaped tensors (infinity if either holds a non-finite value).
double max_difference(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const double difference = std::fabs(a.values[i] - b.values[i]);
    worst = std::isfinite(difference) ? std::max(worst, difference) : std::numeric_limits<double>::infinity();
  }
  return worst;
}

TensorReport compare_tensor(const Case& test_case, const std::string& name, const Tensor& expected,
                            const Tensor* actual, Precision precision, double scale_floor,
                            std::optional<double> yardstick_error, LazyHoldings& holdings) {
  TensorReport report{.name = name, .expected_shape = expected.shape};
  report.scale = std::max(max_abs(expected), scale_floor);
  // A tensor the yardstick lacks is held to the floor alone (a missing yardstick tensor is the caller's
  // bug to fix, not a reason to pass anything).
  report.yardstick_error = yardstick_error.value_or(0.0);
  report.tolerance = tolerance(precision, is_gradient(name) ? TensorRole::gradient : TensorRole::output, report.scale,
                               report.yardstick_error);
  if (actual == nullptr) {
    report.status = TensorStatus::missing;
    return report;
  }
  report.actual_shape = actual->shape;
  if (actual->shape != expected.shape || actual->numel() != expected.numel()) {
    report.status = TensorStatus::wrong_shape;
    return report;
  }
  const Locator locator(test_case, name, holdings);
  std::set<std::int64_t> axes[5];
  std::int64_t worst = -1;
  bool non_finite = false;
  for (std::int64_t i = 0; i < expected.numel(); ++i) {
    const double difference = std::fabs(actual->values[i] - expected.values[i]);
    const bool bad_value = !std::isfinite(actual->values[i]) && std::isfinite(expected.values[i]);
    if (bad_value) non_finite = true;
    if (bad_value || difference > report.tolerance) {
      ++report.elements_over;
      locator.locate(unravel(i, expected.shape), axes);
    }
    const double error = bad_value ? std::numeric_limits<double>::infinity() : difference;
    if (worst < 0 || error > report.max_error) {
      report.max_error = error;
      worst = i;
    }
  }
  if (worst >= 0) {
    report.worst_index = unravel(worst, expected.shape);
    report.expected_at_worst = expected.values[worst];
    report.actual_at_worst = actual->values[worst];
  }
  report.error_ulps = report.max_error / ulp_at(precision, report.scale);
  report.batch_rows.assign(axes[0].begin(), axes[0].end());
  report.positions.assign(axes[1].begin(), axes[1].end());
  report.query_heads.assign(axes[2].begin(), axes[2].end());
  report.kv_heads.assign(axes[3].begin(), axes[3].end());
  report.ranks.assign(axes[4].begin(), axes[4].end());
  report.status =
      non_finite ? TensorStatus::non_finite : (report.elements_over > 0 ? TensorStatus::mismatch : TensorStatus::ok);
  return report;
}

// The full shape of a sketchable tensor for this case: a projection gradient ("grads/q_proj",
// "ranks/3/grads/o_proj", a rank's shaped by its holdings) or an activation ("out", "grads/x",
// "decode/out"). Empty for a rank outside the plan.
Shape full_gradient_shape(const Case& test_case, const std::string& name, LazyHoldings& holdings) {
  const Geometry& g = test_case.geometry();
  const Inputs& inputs = test_case.inputs;
  if (name == "out" || name == "grads/x") return {inputs.batch, inputs.seq, g.hidden_size()};
  if (name == "decode/out") return {inputs.batch, inputs.decode.total(), g.hidden_size()};
  std::int64_t q_rows = g.query_width(), k_rows = g.kv_width(), v_rows = g.kv_width(), o_columns = g.value_width();
  if (const std::optional<RankTensorName> rank_name = parse_rank_tensor_name(name)) {
    const RankHoldings* held = holdings.of(rank_name->rank);
    if (held == nullptr) return {};
    q_rows = held->q_proj_rows.size();
    k_rows = held->k_proj_rows.size();
    v_rows = held->v_proj_rows.size();
    o_columns = held->o_proj_columns.size();
  }
  const std::string base = name.substr(name.rfind("grads/"));
  if (base == "grads/q_proj") return {q_rows, g.hidden_size()};
  if (base == "grads/o_proj") return {g.hidden_size(), o_columns};
  if (base == "grads/k_proj") return {k_rows, g.hidden_size()};
  return {v_rows, g.hidden_size()};  // v_proj
}

std::string list(const std::vector<std::int64_t>& values) {
  if (values.size() <= 8) return fmt::format("{}", fmt::join(values, ","));
  return fmt::format("{},... ({} in all)", fmt::join(values.begin(), values.begin() + 6, ","), values.size());
}

}  // namespace

std::string failure_location(const TensorReport& report) {
  std::vector<std::string> parts;
  if (!report.ranks.empty()) parts.push_back("ranks " + list(report.ranks));
  if (!report.batch_rows.empty()) parts.push_back("batch " + list(report.batch_rows));
  if (!report.positions.empty()) parts.push_back("positions " + list(report.positions));
  if (!report.query_heads.empty()) parts.push_back("query heads " + list(report.query_heads));
  if (!report.kv_heads.empty()) parts.push_back("kv heads " + list(report.kv_heads));
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string worst_values(const TensorReport& report) {
  return fmt::format("expected {}, got {} ({:.3g} ulps)", report.expected_at_worst, report.actual_at_worst,
                     report.error_ulps);
}

std::string describe_failures(const CompareReport& report, std::string_view indent) {
  std::string text;
  for (const TensorReport& t : report.tensors) {
    if (t.status == TensorStatus::ok || t.status == TensorStatus::declined) continue;
    if (t.status == TensorStatus::missing || t.status == TensorStatus::wrong_shape) {
      text += fmt::format("{}{}: {} (expected shape {})\n", indent, t.name, to_string(t.status),
                          to_string(t.expected_shape));
      continue;
    }
    text += fmt::format("{}{}: {} ulps of its scale, {} elements beyond tolerance, worst at {} ({}): {}\n", indent,
                        t.name, fmt::format("{:.3g}", t.error_ulps), t.elements_over, to_string(t.worst_index),
                        worst_values(t), failure_location(t));
  }
  return text;
}

namespace {

// fn(name, tensor) over a Result's tensors in named_tensors' order; ResultT is Result or const Result.
template <class ResultT, class Fn>
void visit_named_tensors(ResultT& result, Fn&& fn) {
  fn(std::string("out"), result.out);
  if (result.gradients) {
    fn(std::string("grads/x"), result.gradients->x);
    for_each_parameter(result.gradients->params, [&](std::string_view name, auto& t) { fn("grads/" + std::string(name), t); });
  }
  if (result.decode_out) fn(std::string("decode/out"), *result.decode_out);
  for (std::size_t r = 0; r < result.rank_gradients.size(); ++r) {
    for_each_parameter(result.rank_gradients[r], [&](std::string_view name, auto& t) {
      if (t.numel() > 0) fn(fmt::format("ranks/{}/grads/{}", r, name), t);  // 0 rows: holds none
    });
  }
}

}  // namespace

void for_each_named_tensor(const Result& result, const std::function<void(const std::string&, const Tensor&)>& fn) {
  visit_named_tensors(result, fn);
}

NamedTensors named_tensors(const Result& result) {
  NamedTensors tensors;
  visit_named_tensors(result, [&](const std::string& name, const Tensor& tensor) { tensors[name] = tensor; });
  return tensors;
}

NamedTensors named_tensors(Result&& result) {
  NamedTensors tensors;
  visit_named_tensors(result, [&](const std::string& name, Tensor& tensor) { tensors[name] = std::move(tensor); });
  return tensors;
}

std::string_view to_string(TensorStatus status) {
  switch (status) {
    case TensorStatus::ok:
      return "ok";
    case TensorStatus::mismatch:
      return "MISMATCH";
    case TensorStatus::missing:
      return "MISSING";
    case TensorStatus::wrong_shape:
      return "WRONG SHAPE";
    case TensorStatus::non_finite:
      return "NON-FINITE";
    case TensorStatus::declined:
      return "declined";
  }
  return "?";
}

std::string_view json_word(TensorStatus status) {
  switch (status) {
    case TensorStatus::ok:
      return "ok";
    case TensorStatus::mismatch:
      return "mismatch";
    case TensorStatus::missing:
      return "missing";
    case TensorStatus::wrong_shape:
      return "wrong_shape";
    case TensorStatus::non_finite:
      return "non_finite";
    case TensorStatus::declined:
      return "declined";
  }
  return "?";
}

std::optional<TensorStatus> tensor_status_from_json(std::string_view word) {
  for (const TensorStatus status : {TensorStatus::ok, TensorStatus::mismatch, TensorStatus::missing,
                                    TensorStatus::wrong_shape, TensorStatus::non_finite, TensorStatus::declined}) {
    if (json_word(status) == word) return status;
  }
  return std::nullopt;
}

bool CompareReport::passed() const {
  return failed_count() == 0;
}

std::int64_t CompareReport::passed_count() const {
  return std::count_if(tensors.begin(), tensors.end(),
                       [](const TensorReport& t) { return t.status == TensorStatus::ok; });
}

std::int64_t CompareReport::declined_count() const {
  return std::count_if(tensors.begin(), tensors.end(),
                       [](const TensorReport& t) { return t.status == TensorStatus::declined; });
}

std::int64_t CompareReport::failed_count() const {
  return static_cast<std::int64_t>(tensors.size()) - passed_count() - declined_count();
}

std::string declined_part_problem(std::string_view part, std::string_view reason) {
  const auto is_weight = [](std::string_view name) {
    return std::find(std::begin(kParameterNames), std::end(kParameterNames), name) != std::end(kParameterNames);
  };
  const auto is_rank = [](std::string_view text) {
    return !text.empty() && text.size() <= 9 &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
           (text.size() == 1 || text.front() != '0');
  };
  if (part == "out") {
    return "out cannot be declined: an implementation that cannot produce out does not support the case "
           "(unsupported), rather than declining a part of it";
  }
  std::vector<std::string_view> components;
  for (std::size_t start = 0;;) {
    const std::size_t slash = part.find('/', start);
    components.push_back(part.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  const std::size_t n = components.size();
  bool valid = false;
  if (components[0] == "grads") {
    valid = n == 1 || (n == 2 && (components[1] == "x" || is_weight(components[1])));
  } else if (components[0] == "decode") {
    valid = n == 1 || (n == 2 && components[1] == "out");
  } else if (components[0] == "ranks") {
    valid = n == 1 || (n >= 2 && is_rank(components[1]) &&
                       (n == 2 || (components[2] == "grads" && (n == 3 || (n == 4 && is_weight(components[3]))))));
  }
  if (!valid) {
    return "must be a tensor name as under /expected, or a prefix of such names ending at a '/': grads, grads/x, "
           "grads/<weight>, decode, decode/out, ranks, ranks/<r>, ranks/<r>/grads, ranks/<r>/grads/<weight>";
  }
  if (reason.find_first_not_of(" \t\n") == std::string_view::npos) return "a declined part needs a reason";
  return {};
}

const std::string* declined_reason(const DeclinedParts& declined, std::string_view tensor_name) {
  if (tensor_name.ends_with(kSketchSuffix)) tensor_name.remove_suffix(kSketchSuffix.size());
  for (const auto& [part, reason] : declined) {
    if (tensor_name == part ||
        (tensor_name.starts_with(part) && tensor_name.size() > part.size() && tensor_name[part.size()] == '/')) {
      return &reason;
    }
  }
  return nullptr;
}

void add_yardstick_run(const NamedTensors& expected, const NamedTensors& run, YardstickErrors& errors) {
  for (const auto& [name, tensor] : expected) {
    const bool sketch_tensor = name.ends_with(kSketchSuffix);
    const std::string base = sketch_tensor ? name.substr(0, name.size() - kSketchSuffix.size()) : name;
    const auto naive = run.find(base);
    if (naive == run.end()) continue;
    const Tensor naive_tensor = sketch_tensor ? sketch(base, naive->second) : naive->second;
    if (naive_tensor.shape != tensor.shape) continue;
    double& error = errors[name];
    error = std::max(error, max_difference(naive_tensor, tensor));
  }
}

std::string precision_contract(Precision precision, RopeAngles rope_angles) {
  if (precision == Precision::fp64) return "fp64";
  return fmt::format("{} storage, fp32 accumulation, RoPE angles in {}", to_string(precision), to_string(rope_angles));
}

CompareReport compare(const Case& test_case, const NamedTensors& expected, const NamedTensors& actual,
                      Precision precision, const YardstickErrors* yardstick, RopeAngles rope_angles,
                      TpConvention tp_convention, const DeclinedParts& declined) {
  {
    // A malformed part, `out`, or a part the candidate also supplies: it disagrees with itself.
    ViolationList violations;
    for (const auto& [part, reason] : declined) {
      if (std::string problem = declined_part_problem(part, reason); !problem.empty()) {
        violations.add("declined " + part, reason, std::move(problem), "");
      }
    }
    for (const auto& [name, tensor] : actual) {
      if (const std::string* reason = declined_reason(declined, name)) {
        violations.add("declined", name,
                       fmt::format("a candidate supplies no tensor it declines (declined: {})", *reason),
                       "supply the tensor or decline it, not both");
      }
    }
    violations.throw_if_any("the candidate's declined parts");
  }
  if (precision != Precision::fp64 && yardstick == nullptr) {
    ViolationList violations;
    violations.add("precision", std::string(to_string(precision)),
                   "a candidate below fp64 is compared with the emulated same-precision yardstick "
                   "(reference/emulated_layer.hpp), which this caller did not supply",
                   "fp64");
    violations.throw_if_any("unsupported comparison");
  }
  CompareReport report{.precision = precision,
                       .rope_angles = rope_angles,
                       .tp_convention = tp_convention,
                       .fp64_yardstick = precision == Precision::fp64 && yardstick != nullptr && !yardstick->empty()};
  LazyHoldings holdings(test_case.plan, tp_convention);
  double largest_gradient = 0.0;
  double largest_sketch = 0.0;
  for (const auto& [name, tensor] : expected) {
    if (!is_gradient(name)) continue;
    double& largest = name.ends_with(kSketchSuffix) ? largest_sketch : largest_gradient;
    largest = std::max(largest, max_abs(tensor));
  }
  for (const auto& [name, tensor] : expected) {
    if (const std::string* reason = declined_reason(declined, name)) {
      report.tensors.push_back(
          {.name = name, .status = TensorStatus::declined, .expected_shape = tensor.shape, .declined_reason = *reason});
      continue;
    }
    auto found = actual.find(name);
    // An expected sketch is compared with the sketch of the candidate's full gradient.
    std::optional<Tensor> sketched;
    if (name.ends_with(kSketchSuffix)) {
      found = actual.end();  // a candidate's own "#sketch" tensor is never taken at its word
      const std::string base = name.substr(0, name.size() - kSketchSuffix.size());
      if (const auto full = actual.find(base); full != actual.end()) {
        // The full gradient must have the full shape: padding a line with zeros would keep its sketch.
        sketched = full->second.shape == full_gradient_shape(test_case, base, holdings) ? sketch(base, full->second)
                                                                                        : full->second;  // wrong shape
      }
    }
    const Tensor* candidate = sketched ? &*sketched : (found == actual.end() ? nullptr : &found->second);
    const bool sketch_tensor = name.ends_with(kSketchSuffix);
    const double scale_floor =
        is_gradient(name) ? kGradientScaleFloor * (sketch_tensor ? largest_sketch : largest_gradient) : 0.0;
    std::optional<double> yardstick_error;
    if (yardstick != nullptr) {  // fp64: empty unless the judge computed the fp64 yardstick after a mismatch
      if (const auto found_error = yardstick->find(name); found_error != yardstick->end()) {
        yardstick_error = found_error->second;
      }
    }
    report.tensors.push_back(
        compare_tensor(test_case, name, tensor, candidate, precision, scale_floor, yardstick_error, holdings));
  }
  return report;
}

std::string tolerance_rule(const CompareReport& report) {
  if (report.precision == Precision::fp64 && report.fp64_yardstick) {
    return fmt::format(
        "{} ulps of their scale, or where rounding cancels {} x the error of naive fp64 implementations (the fp64 "
        "yardstick, computed because a tensor was beyond the first)",
        kFp64ToleranceUlps, kFp64YardstickFactor);
  }
  if (report.precision == Precision::fp64) return fmt::format("{} ulps of their scale (fp64)", kFp64ToleranceUlps);
  return fmt::format(
      "{} x (outputs) / {} x (gradients) the emulated naive {} implementation's error + {} ulps (contract: {})",
      kYardstickFactorOutputs, kYardstickFactorGradients, to_string(report.precision), kYardstickFloorUlps,
      precision_contract(report.precision, report.rope_angles));
}

std::string render_text(const CompareReport& report) {
  std::string text = fmt::format("{:<28} {:<11} {:>11} {:>10}  {:<24} {}\n", "tensor", "status", "max error", "ulps",
                                 "worst at", "beyond tolerance");
  for (const TensorReport& t : report.tensors) {
    std::string detail;
    if (t.status == TensorStatus::declined)
      detail = "declined: " + t.declined_reason;
    else if (t.status == TensorStatus::missing)
      detail = fmt::format("expected shape {}", to_string(t.expected_shape));
    else if (t.status == TensorStatus::wrong_shape)
      detail = fmt::format("shape {}, expected {}", to_string(t.actual_shape), to_string(t.expected_shape));
    else if (t.status != TensorStatus::ok)
      detail = fmt::format("{} elements: {} ({})", t.elements_over, failure_location(t), worst_values(t));
    const bool compared = t.status != TensorStatus::missing && t.status != TensorStatus::wrong_shape &&
                          t.status != TensorStatus::declined;
    text += fmt::format("{:<28} {:<11} {:>11} {:>10}  {:<24} {}\n", t.name, to_string(t.status),
                        compared ? fmt::format("{:.3g}", t.max_error) : "-",
                        compared ? fmt::format("{:.3g}", t.error_ulps) : "-", compared ? to_string(t.worst_index) : "-",
                        detail);
  }
  const std::string rule = tolerance_rule(report);
  // Declined tensors are counted apart: neither passed nor failed, and never left out of the count.
  const std::int64_t passed = report.passed_count(), failed = report.failed_count(), declined = report.declined_count();
  const std::string declined_note =
      declined == 0 ? "" : fmt::format("; {} declined (listed above, not judged)", declined);
  text += failed == 0
              ? fmt::format("PASS: {} tensors within {}{}\n", passed, rule, declined_note)
              : fmt::format("FAIL: {} of {} tensors ({} passed){}\n", failed, passed + failed, passed, declined_note);
  return text;
}

nlohmann::json render_json(const CompareReport& report) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorReport& t : report.tensors) {
    const bool finite_error = std::isfinite(t.max_error);
    tensors.push_back({{"name", t.name},
                       {"status", json_word(t.status)},
                       {"expected_shape", t.expected_shape},
                       {"actual_shape", t.actual_shape},
                       {"scale", t.scale},
                       {"yardstick_error", t.yardstick_error},
                       {"max_error", finite_error ? nlohmann::json(t.max_error) : nlohmann::json("inf")},
                       {"error_ulps", finite_error ? nlohmann::json(t.error_ulps) : nlohmann::json("inf")},
                       {"tolerance", t.tolerance},
                       {"elements_over", t.elements_over},
                       {"worst_index", t.worst_index},
                       {"batch_rows", t.batch_rows},
                       {"positions", t.positions},
                       {"query_heads", t.query_heads},
                       {"kv_heads", t.kv_heads},
                       {"ranks", t.ranks}});
    if (t.status == TensorStatus::declined) tensors.back()["declined_reason"] = t.declined_reason;
  }
  return {
      {"precision", to_string(report.precision)},
      {"contract", precision_contract(report.precision, report.rope_angles)},
      {"tp_convention", to_string(report.tp_convention)},
      {"passed", report.passed()},
      {"counts",
       {{"passed", report.passed_count()}, {"failed", report.failed_count()}, {"declined", report.declined_count()}}},
      {"tensors", tensors}};
}

}  // namespace attncheck
