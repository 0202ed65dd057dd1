// How `attncheck mutants` fuzzes each mutant of the catalog (mutants/catalog.hpp): with the size profile
// its bug needs and a fixed case budget, so that killed or survived is the same verdict on every machine.
#pragma once

#include <cstdint>

#include "mutants/catalog.hpp"
#include "properties/generators.hpp"

namespace attncheck::properties {

// The long profile for a bug that needs long sequences, the latent one for a latent-attention bug, the short
// one otherwise.
SizeProfile mutant_size_profile(const mutants::Mutant& mutant);

// The cases `attncheck mutants` gives each mutant of a profile (default seed 1): killed or survived after
// this many cases is the verdict, the same on every machine at any load. Measured 2026-12-04 (seed 1): the
// short-profile mutants die within 1 .. 165 cases (mutant-vllm-4405-prefix-prefill-window the last), the
// long-profile ones within 3 .. 59 (the bf16 and fp16 P.V accumulation mutants the last); the budgets
// leave a margin of six and two and a half times: 1000 short cases (about a second) and 150 long ones.
// The latent profile's mutants get the short budget (their cases are as cheap).
std::int64_t mutant_case_budget(SizeProfile profile);

}  // namespace attncheck::properties
