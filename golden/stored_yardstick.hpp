// Yardsticks stored in a golden file (SCHEMA.md, "Stored yardsticks"): the errors of the emulated naive layer
// (reference/yardstick.hpp) for one precision contract, computed once (`attncheck golden yardstick`) and
// reused by every later check of that golden, for as long as the golden's case and the yardstick's
// version are the ones they were computed for. Without one a check computes the yardstick itself:
// twelve naive runs of the layer, most of `attncheck run`'s time on the long and wide goldens.
//
// Layout written: /yardstick/<precision>.<rope_angles>.<tp_convention> (a group), e.g.
// /yardstick/fp32.float32.replicated-kv, with string attributes `version` (the yardstick's version) and
// `case_digest` (case_digest() below, hex), and one float64 attribute per expected tensor name (with the
// per-rank ones, under that convention): the yardstick's error on that tensor in units of its scale.
#pragma once

#include <optional>
#include <string>

#include "core/compare/compare.hpp"
#include "core/model/precision.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck::golden {

// The contract a yardstick is computed for: what changes it besides the golden.
struct YardstickContract {
  Precision precision = Precision::fp32;  // below fp64
  RopeAngles rope_angles = RopeAngles::float32;
  TpConvention tp_convention = TpConvention::replicated_kv;
};
std::string contract_key(const YardstickContract& contract);  // "fp32.float32.replicated-kv"

// A digest of what a yardstick depends on in the file: the root attributes but `generator`; /geometry,
// /inputs and /weights, every attribute and dataset (raw stored bytes, by name, recursively); and the names
// of every dataset under /expected (which tensors are measured, and whether sketched). FNV-1a 64 over
// that stream, as 16 hex digits. InputError when the file cannot be read.
std::string case_digest(const std::string& path);

// The stored errors for `contract` when the file has them for `version` and its current case_digest;
// nullopt when it has none, or has one for another version or case (stale: the caller recomputes).
// InputError when the group is malformed (an attribute that is not a finite, non-negative float64).
std::optional<YardstickErrors> read_stored_yardstick(const std::string& path, const YardstickContract& contract,
                                                     const std::string& version);

// Writes (replacing any) /yardstick/<contract_key> with the errors, `version` and the file's case_digest.
// The file is changed in place; nothing else in it is touched.
void write_stored_yardstick(const std::string& path, const YardstickContract& contract, const std::string& version,
                            const YardstickErrors& errors);

}  // namespace attncheck::golden
