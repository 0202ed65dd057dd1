#include "properties/mutant_budget.hpp"

namespace attncheck::properties {

SizeProfile mutant_size_profile(const mutants::Mutant& mutant) {
  if (mutant.latent) return SizeProfile::latent_attention;
  if (mutant.context_parallel) return SizeProfile::context_parallel;
  return mutant.sequences == mutants::Sequences::long_sequences ? SizeProfile::long_sequences
                                                                : SizeProfile::short_sequences;
}

std::int64_t mutant_case_budget(SizeProfile profile) {
  return profile == SizeProfile::long_sequences ? 150 : 1000;
}

}  // namespace attncheck::properties
