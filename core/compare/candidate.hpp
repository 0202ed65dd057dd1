// What an implementation's run returns (impl::Implementation::run), and what a candidate file holds
// (golden/SCHEMA.md, "Candidate files"): its tensors and everything it declares about them. The judge
// (core/compare/judge.hpp) needs nothing else, so nothing is asked of an implementation after it ran.
#pragma once

#include "core/compare/compare.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck {

struct Candidate {
  // Under golden-file names: "out", "grads/q_proj", "decode/out", "ranks/1/grads/k_proj" (SCHEMA.md).
  NamedTensors tensors;
  // The precision it computed in; below fp64 it is held to the yardstick of its contract (tolerance.hpp).
  Precision precision = Precision::fp64;
  // How it forms RoPE angles below fp64, the rest of its precision contract (core/model/precision.hpp).
  RopeAngles rope_angles = RopeAngles::float32;
  // How its per-rank gradients are held (core/tp/tp_convention.hpp): the expected ones are regrouped to it.
  TpConvention tp_convention = TpConvention::replicated_kv;
  // Whether it reports per-rank gradients (ran the case's TP plan); one that does not is judged on out,
  // decode/out and the full gradients only.
  bool sharded = false;
  // Parts it declined, part -> reason (core/model/result.hpp): reported as declined, never as passing.
  DeclinedParts declined;
};

}  // namespace attncheck
