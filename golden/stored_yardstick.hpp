// Yardsticks stored in a golden file (SCHEMA.md, "Stored yardsticks"): the errors of the emulated naive layer
// (reference/yardstick.hpp) for one precision contract, computed once (`attncheck golden yardstick`) and
// reused by every later check of that golden, for as long as the golden's case and the yardstick's
// version are the ones they were computed for. Without one a check computes the yardstick itself:
// twelve naive runs of the layer, most of `attncheck run`'s time on the long and wide goldens.
//
// Layout written: /yardstick/<precision>.<rope_angles>.<tp_convention> (a group), e.g.
// /yardstick/fp32.float32.replicated-kv, with string attributes `version` (the yardstick's version),
// `case_digest` (case_digest() below, hex) and, in a sealed file, `binding` (binding_digest() below), and one
// float64 attribute per expected tensor name (with the per-rank ones, under that convention): the
// yardstick's error on that tensor in units of its scale.
//
// A yardstick sets a tolerance, so a stored one is used only when bound to its file: /yardstick is outside the file's
// integrity digest (storing one must not reseal the file, and `golden seal` must not bless an edited one),
// so each group carries its own SHA-256 `binding` over its values, its contract and the file's integrity
// digest. A stored yardstick is used as it stands only when the file's integrity digest was verified when the
// golden was read and the binding matches that digest; otherwise the check recomputes the yardstick and refuses
// the file when the stored values differ (cli/yardstick_source.hpp). The recipe is public (SCHEMA.md): the
// binding guards against stale, damaged, copied and swapped yardsticks, not against a forger who can write the
// file (who could rewrite /expected as well).
#pragma once

#include <algorithm>
#include <cmath>
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

// Whether a stored yardstick value is its recomputation: the computation is deterministic
// (reference/fixed_order_product.hpp), so a relative 1e-9 allows only for printing and reading back.
inline bool same_yardstick_value(double stored, double computed) {
  return std::abs(stored - computed) <= 1e-9 * std::max(std::abs(computed), 1e-300);
}

// A digest of what a yardstick depends on in the file: the root attributes but `generator`; /geometry,
// /inputs and /weights, every attribute and dataset (raw stored bytes, by name, recursively); and the names
// of every dataset under /expected (which tensors are measured, and whether sketched). FNV-1a 64 over
// that stream, as 16 hex digits. InputError when the file cannot be read.
std::string case_digest(const std::string& path);

inline constexpr const char* kYardstickBindingVersion = "attncheck-yardstick-binding-v1";

// "attncheck-yardstick-binding-v1:<64 hex digits>": SHA-256 over the length-prefixed fields (SCHEMA.md,
// "Stored yardsticks") kYardstickBindingVersion, the file's integrity attribute as stored, the contract key,
// the version, the case digest, then each tensor name in TensorNameOrder (digit runs as numbers: ranks/2
// before ranks/10) with its error as 8 little-endian bytes of float64.
std::string binding_digest(const std::string& file_integrity, const YardstickContract& contract,
                           const std::string& version, const std::string& case_digest, const YardstickErrors& errors);

struct StoredYardstick {
  YardstickErrors errors;
  // Its binding matches the file's integrity digest, which the caller verified: usable as it stands.
  // Otherwise (a file without a digest, a group without a binding, or one that does not match) the values
  // are only a claim, which the caller must check against a recomputation before using them.
  bool bound = false;
};

// The stored errors for `contract` when the file has them for `version` and its current case_digest;
// nullopt when it has none, or has one for another version or case (stale: the caller recomputes).
// verified_digest: the integrity digest the caller verified when it read the golden (Golden::verified_digest;
// empty: none verified, and no binding counts). A binding counts only over that digest, never over the one the
// path holds now: a file replaced after it was read (a worker can do it) lends its yardstick to nothing
// (nullopt when the file's integrity attribute is not that digest: the check computes its own). InputError when /yardstick is not what the schema allows (a dataset, a named datatype or a
// link where a group belongs, a contract group holding objects) or the group is malformed (an error that is
// not a finite, non-negative float64).
std::optional<StoredYardstick> read_stored_yardstick(const std::string& path, const YardstickContract& contract,
                                                     const std::string& version, const std::string& verified_digest);

// Writes (replacing any) /yardstick/<contract_key> with the errors, `version`, the file's case_digest and,
// when the file carries an integrity digest (verified first: a damaged file is refused), the binding.
// computed_from: the integrity digest of the file the errors were computed from (Golden::verified_digest;
// empty when it had none). The file is opened once; when its digest now is not that one (it was replaced or
// edited since), nothing is written: InputError, exit 2. Returns whether it was bound. The file is changed in
// place; nothing else in it is touched.
bool write_stored_yardstick(const std::string& path, const YardstickContract& contract, const std::string& version,
                            const YardstickErrors& errors, const std::string& computed_from);

}  // namespace attncheck::golden
