// What the property generators produce: a geometry as a user states it, a TP size and the input options.
// Everything else in a case (x, dout, positions, key lengths, weights) follows from these through
// core/generation/input_generation, so a CaseSpec is small to shrink, print and save.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "core/generation/input_generation.hpp"
#include "core/model/case.hpp"
#include "core/model/geometry.hpp"

namespace attncheck::properties {

struct CaseSpec {
  GeometrySpec geometry;
  InputOptions inputs;  // inputs.tp_size is the plan's TP size
};

// Every field of the geometry and the input options equal (shrinking skips a candidate equal to the case
// at hand).
bool operator==(const CaseSpec& a, const CaseSpec& b);

// The case itself (InputError if the spec is invalid, which generators never produce).
Case make_case(const CaseSpec& spec);

// One line: "heads 4/2, head_dim 6, hidden 10, rotary full half-split; tp 2; batch 1, seq 4, uniform, ...,
// seed N" (the fuzzer's and `attncheck mutants`' shrunk counterexamples).
std::string describe(const CaseSpec& spec);

// A size to report and bound: multiply-adds of one forward pass (projections and attention).
std::int64_t work(const CaseSpec& spec);

// RapidCheck prints counterexamples with this.
void showValue(const CaseSpec& spec, std::ostream& os);

}  // namespace attncheck::properties
