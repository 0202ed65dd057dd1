// Feature coverage (`attncheck golden coverage`): does each feature a case claims actually change its expected
// answer? An analysis that runs the oracle, so it lives beside it rather than with the golden file format.
//
// A golden "claims" a feature when its case has it (padding shorter than seq, a window, a softcap, rows
// whose queries see no key, decoding over a cache, a replicated KV head, ...). The feature "bites" when
// switching it off in the case changes the fp64 reference's answer by more than the fp64 tolerance
// (core/compare/tolerance.hpp) in some tensor: only then can the golden catch an implementation that
// gets the feature wrong. A window of 512 at seq 6, or key lengths equal to seq, are claims that do
// not bite. What "off" means for each feature is written beside it in feature_coverage.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/compare/compare.hpp"
#include "core/model/case.hpp"
#include "core/tp/tp_convention.hpp"

namespace attncheck::reference {

struct FeatureBite {
  std::string feature;      // "padding", "window", "rows without keys", ...
  std::string claim;        // what the case has, e.g. "key_lengths [1024, 897] of 1024"
  std::string off;          // what the feature switched off is, e.g. "every key_length = seq"
  bool bites = false;       // some tensor changed beyond its fp64 tolerance
  std::string tensor;       // the tensor that changed most, relative to its tolerance (forward first: below)
  double change = 0.0;      // that tensor's largest change, relative to its scale
  double tolerances = 0.0;  // that change in units of the tensor's fp64 tolerance (> 1: bites)
};

// The features whose claims a committed set of goldens must show biting (golden coverage
// --require-all): the list, each exercised by at least one committed golden.
const std::vector<std::string>& coverage_features();

// How a golden stores its expectations: what it holds sketched is judged as sketched (a line's tolerance
// is about sqrt(length) times an element's), so a bite is one the golden itself can show.
struct StoredForm {
  bool activations_sketched = false;  // out, grads/x, decode/out
  bool gradients_sketched = false;    // q/k/v/o_proj gradients, per rank too
  // How /expected/ranks holds each rank's gradients (/geometry@tp_convention): a golden under another
  // convention than replicated-kv claims the feature "tp convention".
  TpConvention tp_convention = TpConvention::replicated_kv;
  // The seed /weights names when the golden's weights are the generator's (SCHEMA.md "Weight generator v1")
  // rather than stored: only then does a reader rebuild them, so only then can the generator's rule that
  // redraws a head block equal to an earlier head's (the "duplicate-block rule") change what it reads.
  std::optional<std::uint64_t> weight_generator_seed;
};

// A feature whose "off" no case change expresses: the answer of an implementation that gets it wrong (for
// multi-head latent attention, a latent mutant's; the caller runs it, since the oracle knows no mutant).
struct AlternativeAnswer {
  std::string feature;  // one of coverage_features()
  std::string claim;    // what the case has
  std::string off;      // what the alternative does instead
  NamedTensors answer;  // its tensors (unsharded names; per-rank ones are ignored)
};

// Every feature the case claims, each with its bite. Runs the fp64 reference once per claimed feature
// (and each TP rank's layer once for the replication features); each alternative answer is measured the same way.
// Forward first: the backward runs only for a feature whose forward outputs stay within their tolerance, so
// `tensor` is the forward output that moved most whenever one bites (the verdict is that of every tensor).
std::vector<FeatureBite> feature_coverage(const Case& test_case, const StoredForm& stored = {},
                                          const std::vector<AlternativeAnswer>& alternatives = {});

}  // namespace attncheck::reference
