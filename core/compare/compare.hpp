// Comparing an implementation's tensors with the reference's, with localisation.
//
// Tensors are named as in golden files: "out", "grads/x", "grads/<weight>", "decode/out",
// "ranks/<r>/grads/<weight>". An expected "<name>#sketch" (core/compare/sketch.hpp) is compared with the
// sketch of the actual "<name>". For every expected tensor the report gives the largest error, that error
// in units of the candidate precision's epsilon times the tensor's scale (max |expected|), the worst
// coordinate, and which batch rows, positions, query heads, KV heads and ranks hold an element beyond
// tolerance. A missing tensor, a wrong shape, or NaN/Inf where the expected value is finite is a named
// failure of that tensor.
//
// Tolerance: core/compare/tolerance.hpp (fp64: 2^16 ulps of the tensor's scale; lower precisions: k times
// a naive same-precision implementation's error, plus 4 ulps of that precision). A gradient's scale is at
// least the case's largest gradient (sketches: the largest sketch): gradients that vanish by
// cancellation carry their terms' rounding (tolerance.hpp, kGradientScaleFloor, says why).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/compare/tolerance.hpp"
#include "core/model/case.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck {

// Orders tensor names as people read them: runs of digits compare as numbers, so "ranks/2/..." comes
// before "ranks/10/..." (plain string order would list ranks 0, 1, 10, 11, ..., 2).
struct TensorNameOrder {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};

using NamedTensors = std::map<std::string, Tensor, TensorNameOrder>;

// The tensors of a Result under their golden-file names. A rank that holds no line of a tensor (a
// 0-row k_proj under megatron-equal-block, core/tp/tp_convention.hpp) has no entry for it.
NamedTensors named_tensors(const Result& result);
// The same, moving the tensors out of a Result no longer needed (an implementation's run): no second copy
// of a layer's gradients is resident while it is judged.
NamedTensors named_tensors(Result&& result);
// Calls fn(name, tensor) for each tensor named_tensors would hold, in its order, without copying any.
void for_each_named_tensor(const Result& result, const std::function<void(const std::string&, const Tensor&)>& fn);

// declined: the candidate declined the tensor (DeclinedParts, core/model/result.hpp), with a reason; it
// is not judged, fails nothing, and is always reported.
enum class TensorStatus { ok, mismatch, missing, wrong_shape, non_finite, declined };
std::string_view to_string(TensorStatus status);  // as tables print it: "ok", "MISMATCH", "WRONG SHAPE", ...
std::string_view json_word(TensorStatus status);  // as --json states it: "ok", "mismatch", "wrong_shape", ...
std::optional<TensorStatus> tensor_status_from_json(std::string_view word);  // json_word's inverse

struct TensorReport {
  std::string name;
  TensorStatus status = TensorStatus::ok;
  Shape expected_shape;
  Shape actual_shape;              // empty when missing
  double scale = 0.0;              // max |expected| (for a gradient: at least the largest gradient's)
  double max_error = 0.0;          // max |actual - expected|
  double error_ulps = 0.0;         // max_error / (epsilon(precision) * scale)
  double tolerance = 0.0;          // absolute
  double yardstick_error = 0.0;    // the emulated naive implementation's max |error| (fp64: 0 unless computed)
  std::int64_t elements_over = 0;  // elements beyond tolerance (or non-finite)
  Shape worst_index;               // coordinate of max_error
  double expected_at_worst = 0.0;
  double actual_at_worst = 0.0;
  // Where the elements beyond tolerance lie (sorted, unique); an axis the tensor lacks stays empty.
  std::vector<std::int64_t> batch_rows, positions, query_heads, kv_heads, ranks;
  std::string declined_reason;  // declined only: the candidate's reason
};

struct CompareReport {
  Precision precision = Precision::fp64;
  RopeAngles rope_angles = RopeAngles::float32;  // below fp64: how the candidate (and its yardstick) form angles
  TpConvention tp_convention = TpConvention::replicated_kv;  // how the per-rank tensors compared are held
  // fp64 only: the fp64 yardstick was computed (a tensor was beyond 2^16 ulps of its scale) and held every
  // tensor a second time (core/compare/tolerance.hpp, kFp64YardstickFactor).
  bool fp64_yardstick = false;
  std::vector<TensorReport> tensors;
  bool passed() const;                // nothing failed (declined tensors fail nothing)
  std::int64_t passed_count() const;  // ok
  std::int64_t failed_count() const;  // mismatch, missing, wrong shape, non-finite
  std::int64_t declined_count() const;
};

// The yardstick's error per expected tensor name: the largest |naive - expected| over its runs.
using YardstickErrors = std::map<std::string, double, TensorNameOrder>;

// Folds one run of the naive implementation into `errors` (sketching it where `expected` holds a
// sketch), so that no run needs to be kept in memory.
void add_yardstick_run(const NamedTensors& expected, const NamedTensors& run, YardstickErrors& errors);

// Compares every expected tensor with the actual one of the same name (extra actual tensors are
// ignored). The case supplies the layouts for localisation. A precision below fp64 needs `yardstick`:
// the emulated naive implementation's errors in that precision (reference::yardstick_errors); InputError
// without it. fp64 takes one where the judge computed it after a first comparison failed (a non-empty map
// sets fp64_yardstick in the report).
// rope_angles: the angle policy the candidate declared and the yardstick was built with (named in the
// report: the precision contract that judged the candidate, golden/SCHEMA.md).
// tp_convention: how expected and actual per-rank tensors are held (core/tp/tp_convention.hpp): their
// shapes and which heads a row belongs to follow its holdings. Expected tensors held another way are
// regrouped first (core/compare/rank_regroup.hpp).
// declined: the parts the candidate declined; each expected tensor within one is reported declined with
// its reason instead of being compared. InputError when a part is malformed or `out`, or when the
// candidate also supplies a tensor it declines (it disagrees with itself).
CompareReport compare(const Case& test_case, const NamedTensors& expected, const NamedTensors& actual,
                      Precision precision, const YardstickErrors* yardstick = nullptr,
                      RopeAngles rope_angles = RopeAngles::float32,
                      TpConvention tp_convention = TpConvention::replicated_kv, const DeclinedParts& declined = {});

// Why `part` is not a part that can be declined, or empty when it is: a tensor name as under /expected
// or a prefix of such names ending at a '/' (grads, grads/x, grads/<weight>, decode, decode/out, ranks,
// ranks/<r>, ranks/<r>/grads, ranks/<r>/grads/<weight>), with a non-empty reason; never `out`.
std::string declined_part_problem(std::string_view part, std::string_view reason);

// The reason `tensor_name` (a golden name; a "#sketch" suffix is ignored) is declined, or nullptr.
const std::string* declined_reason(const DeclinedParts& declined, std::string_view tensor_name);

// "bf16 storage, fp32 accumulation, RoPE angles in float64": the contract a candidate below fp64 is
// held to (golden/SCHEMA.md, "Precision contract"); "fp64" for fp64.
std::string precision_contract(Precision precision, RopeAngles rope_angles);

std::string render_text(const CompareReport& report);  // a table for people
// The tolerance the report's tensors were held to: "65536 ulps of their scale (fp64)" (and the fp64 yardstick's
// rule where it was computed), or below fp64 the yardstick rule with its precision contract.
std::string tolerance_rule(const CompareReport& report);
// Where a failing tensor's elements beyond tolerance are: "ranks 0,1; batch 0; positions 3,4; query heads 5"
// (the axes it has, each list cut at 8 values).
std::string failure_location(const TensorReport& report);
// The worst element's values, round-trip exact (the shortest decimal that reads back as the same double) beside
// the difference in ulps of the tensor's scale: "expected 0.3125, got 0.31250000000000011 (0.5 ulps)". Six
// significant digits used to print the two alike.
std::string worst_values(const TensorReport& report);

// One line per failing tensor (neither ok nor declined): its error, count beyond tolerance, worst index and
// failure_location; each line starts with `indent`.
std::string describe_failures(const CompareReport& report, std::string_view indent = "  ");
nlohmann::json render_json(const CompareReport& report);

}  // namespace attncheck
