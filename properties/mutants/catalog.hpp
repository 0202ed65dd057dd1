// The mutant catalog: realistic broken implementations, each a correct fp64 layer (the reference, or the
// naive layer of naive_layer.hpp) with one bug that a real framework has made (or could easily make), registered like
// any implementation so that the property suite, the fuzzer and `attncheck mutants` can show they are caught. A mutant
// runs on every case; where its bug cannot show (a swap of heads in a one-head layer, a quotient scale where head_dim
// is the quotient) it simply gives the right answer, as the broken framework would.
#pragma once

#include <cstdint>
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
  // Shrink candidates `attncheck mutants` checks for it unless told otherwise (0: the fuzzer's default).
  // Set where every candidate is expensive, so that the gate stays affordable.
  std::int64_t shrink_candidates = 0;
};

const std::vector<Mutant>& mutant_catalog();

// The cases `attncheck mutants` gives each mutant of a profile (default seed 1): killed or survived after
// this many cases is the verdict, the same on every machine at any load. Measured 2026-12-04 (seed 1): the
// short-profile mutants die within 1 .. 165 cases (mutant-vllm-4405-prefix-prefill-window the last), the
// long-profile ones within 3 .. 59 (the bf16 and fp16 P.V accumulation mutants the last); the budgets
// leave a margin of six and two and a half times: 1000 short cases (about a second) and 150 long ones.
std::int64_t mutant_case_budget(SizeProfile profile);
std::vector<std::string> mutant_names();
// The catalog entry of that name, or null.
const Mutant* find_mutant(const std::string& name);

}  // namespace attncheck::properties
