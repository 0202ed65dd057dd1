// The mutant catalog: realistic broken implementations, each a correct fp64 layer (the reference, or the
// naive layer of naive_layer.hpp) with one bug that a real framework has made (or could easily make), registered like
// any implementation so that the property suite, the fuzzer and `attncheck mutants` can show they are caught. A mutant
// runs on every case; where its bug cannot show (a swap of heads in a one-head layer, a quotient scale where head_dim
// is the quotient) it simply gives the right answer, as the broken framework would.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/model/case.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"
#include "properties/generators.hpp"

namespace attncheck::properties {

struct Mutant {
  std::string name;  // "mutant-..."
  std::string bug;   // one line: what is wrong
  bool sharded = true;
  std::function<Result(const Case&)> run;
  // The size profile `attncheck mutants` fuzzes it with: the long one for bugs that need more keys than
  // a kernel's first tile (every short case passes them).
  SizeProfile profile = SizeProfile::short_sequences;
  // The precision it declares, which decides its tolerance (the yardstick's, below fp64).
  Precision precision = Precision::fp64;
  RopeAngles rope_angles = RopeAngles::float32;
  // The real bug it re-plants, "owner/repository#number" (a PR, or the issue and its fix), as README's
  // mutant table shows it; empty for the bugs the team imagined.
  std::string source;
};

const std::vector<Mutant>& mutant_catalog();
std::vector<std::string> mutant_names();
// The catalog entry of that name, or null.
const Mutant* find_mutant(const std::string& name);

}  // namespace attncheck::properties
