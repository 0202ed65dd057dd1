// Per-rank tensors under their golden names, regrouped from one TP convention to another
// (core/tp/tp_convention.hpp): how a golden whose per-rank gradients are held one way judges a candidate
// that holds them the other way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/compare/compare.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck {

// "ranks/<rank>/grads/<parameter>" or the same with "#sketch".
struct RankTensorName {
  int rank = 0;
  std::string parameter;  // "q_proj", "k_norm", ...
  bool sketched = false;
};
std::optional<RankTensorName> parse_rank_tensor_name(std::string_view name);

// `tensors` with every per-rank tensor ("ranks/<r>/grads/...", full or "#sketch") re-cut from the
// `from` holdings to the `to` holdings of `plan`, line by line (regroup_lines: a full o_proj's lines
// are its columns, a sketch's its rows); other tensors pass unchanged. A rank that holds no line of a
// tensor has no entry for it, in both. Only the per-rank tensors present are regrouped (a set without
// any, e.g. an unsharded candidate's expectations, comes back as it went in). InputError when a
// convention cannot partition the plan; std::invalid_argument when a rank's tensor is missing or its
// shape disagrees with its holdings.
// Taken by value: pass an rvalue where the input is not needed again (nothing but the per-rank tensors
// is copied then).
NamedTensors regroup_rank_tensors(NamedTensors tensors, const TpPlan& plan, TpConvention from, TpConvention to);

}  // namespace attncheck
