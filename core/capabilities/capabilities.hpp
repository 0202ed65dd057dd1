// What an implementation states it supports (docs/CAPABILITIES.md): the features of core/capabilities/feature.hpp
// it runs, the head_dim it accepts, the sizes it can hold, the precisions its candidates may declare. A
// statement is a promise: a case within it is judged, and declining such a case, or a part of it the statement
// includes, is the implementation's failure ("broken promise"), never a decline. An implementation that states
// nothing is offered every case and may decline any, as attncheck's reports have always counted declines.
//
// admit() decides, from a case's outline alone (no tensor, no reference run), what the case is for an
// implementation: outside its statement (not run: "not stated"), or run, with the parts it does not state left
// out (their tensors reported declined, its per-rank gradients judged only where it runs the case's TP plan).
// `fuzz` and `mutants` construct cases inside a statement (properties/generators.hpp), so that none is drawn to
// be thrown away.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/capabilities/case_outline.hpp"
#include "core/capabilities/feature.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck {

// A set of precisions (a bitmask: a std::set member here trips GCC 12's maybe-uninitialized in aggregates).
class PrecisionSet {
 public:
  PrecisionSet() = default;
  PrecisionSet(std::initializer_list<Precision> precisions) {
    for (const Precision precision : precisions) insert(precision);
  }
  void insert(Precision precision) { bits_ |= static_cast<std::uint8_t>(1U << static_cast<unsigned>(precision)); }
  bool contains(Precision precision) const { return (bits_ >> static_cast<unsigned>(precision)) & 1U; }
  bool empty() const { return bits_ == 0; }
  std::vector<Precision> list() const {
    std::vector<Precision> precisions;
    for (const Precision precision : {Precision::fp64, Precision::fp32, Precision::bf16, Precision::fp16}) {
      if (contains(precision)) precisions.push_back(precision);
    }
    return precisions;
  }
  friend bool operator==(const PrecisionSet&, const PrecisionSet&) = default;

 private:
  std::uint8_t bits_ = 0;
};

struct Capabilities {
  FeatureSet features = FeatureSet::all();
  std::int64_t head_dim_multiple_of = 1;  // every head width (q/k, and v in latent attention) a multiple of this
  std::optional<std::int64_t> max_head_dim;
  std::optional<std::int64_t> max_seq;
  std::optional<std::int64_t> max_batch;
  std::optional<std::int64_t> max_num_heads;  // query heads
  std::optional<std::int64_t> max_hidden_size;
  std::optional<std::int64_t> max_tp_size;  // with tensor-parallel: the largest TP plan it runs
  // With tensor-parallel: how its per-rank gradients are held; a plan this convention cannot partition
  // (core/tp/tp_convention.hpp) is run as one process.
  std::optional<TpConvention> tp_convention;
  PrecisionSet precisions;  // its candidates declare one of these (empty: any)
  // Whether the implementation stated these (a promise), or they are assumed because it stated nothing.
  bool stated = false;

  // Every case, no promise: what an implementation that states nothing is offered.
  static Capabilities everything() { return {}; }
  // Without `without`, and, when `only` is not empty, within it (`fuzz --only / --without`: a plain
  // intersection, parts included, so `--only` lists every feature the cases may use). Stays stated or
  // unstated as it was.
  Capabilities narrowed(const FeatureSet& only, const FeatureSet& without) const;
  friend bool operator==(const Capabilities&, const Capabilities&) = default;
};

// One line: "gqa, explicit-head-dim, ...; head_dim a multiple of 8, at most 256; seq at most 4096" (or
// "everything (stated nothing)").
std::string describe(const Capabilities& capabilities);

// How the reason of a part attncheck leaves out ends ("decode is not among its stated capabilities"): what tells
// it apart from a part the implementation declined itself (cli's support matrix).
inline constexpr std::string_view kNotStatedPart = "is not among its stated capabilities";

// What a case is for an implementation.
struct Admission {
  // What the case needs beyond the statement, each named: "softcap", "head_dim 6 (a multiple of 8 stated)",
  // "seq 40 (at most 16 stated)". Not empty: the case is not run.
  std::vector<std::string> outside;
  // The parts it has that the statement lacks (decode, backward), part -> reason: run without them, their
  // tensors declined by attncheck on the implementation's behalf.
  DeclinedParts parts_not_stated;
  // Whether its per-rank gradients are judged: TP above 1, and the statement runs this plan (tensor-parallel,
  // within max_tp_size, kv-replication where the plan needs it, a plan its tp_convention partitions). Otherwise the
  // case is run as one process (TP 1).
  bool per_rank_gradients = false;
  // Whether the case's context-parallel layout is handed to the implementation (it states context-parallel).
  bool context_parallel = false;
  // The case's features (parts included), as features_of() gives them.
  FeatureSet features;
  bool stated = false;  // the capabilities were stated (a promise)

  bool admitted() const { return outside.empty(); }
  // "outside its stated capabilities: softcap, head_dim 6 (a multiple of 8 stated)" ("outside what it runs:
  // latent" for capabilities it did not state).
  std::string reason() const;
};

Admission admit(const Capabilities& capabilities, const CaseOutline& outline);

}  // namespace attncheck
