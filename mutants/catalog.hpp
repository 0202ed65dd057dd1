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

namespace attncheck::mutants {

// The sequences a mutant's bug needs before it can show: any (short ones suffice), or long ones, past a
// kernel's first tile of keys (every short case passes such a bug). `attncheck mutants` fuzzes the
// latter with the generators' long size profile (properties/mutant_budget.hpp).
enum class Sequences { short_sequences, long_sequences };

struct Mutant {
  std::string name;  // "mutant-..."
  std::string bug;   // one line: what is wrong
  bool sharded = true;
  std::function<Result(const Case&)> run;
  Sequences sequences = Sequences::short_sequences;
  // The precision it declares, which decides its tolerance (the yardstick's, below fp64).
  Precision precision = Precision::fp64;
  RopeAngles rope_angles = RopeAngles::float32;
  // The real bug it re-plants, "owner/repository#number" (a PR, or the issue and its fix), as docs/MUTANTS.md's
  // mutant table shows it; empty for the bugs the team imagined.
  std::string source;
  // Shrink candidates `attncheck mutants` checks for it unless told otherwise (0: the fuzzer's default).
  // Set where every candidate is expensive, so that the gate stays affordable.
  std::int64_t shrink_candidates = 0;
  // A bug of multi-head latent attention (latent_mutants.cpp, on the naive latent layer): it runs latent cases
  // only (a plain one is unsupported) and `attncheck mutants` fuzzes it with latent ones (properties: the
  // generators' latent profile).
  bool latent = false;
  // A bug of context parallelism (context_parallel_mutants.cpp, on the context-parallel reference's steps): it
  // runs cases with a context-parallel layout only and `attncheck mutants` fuzzes it with the generators'
  // context-parallel profile.
  bool context_parallel = false;
};

const std::vector<Mutant>& mutant_catalog();

// The latent-attention mutants (latent_mutants.cpp), in catalog order.
std::vector<Mutant> latent_mutants();
// The context-parallel mutants (context_parallel_mutants.cpp), in catalog order.
std::vector<Mutant> context_parallel_mutants();

std::vector<std::string> mutant_names();
// The catalog entry of that name, or null.
const Mutant* find_mutant(const std::string& name);

}  // namespace attncheck::mutants
