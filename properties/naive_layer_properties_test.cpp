// The layer the in-layer mutants bend (naive_layer.hpp), with no step overridden, is a correct fp64
// implementation: it matches reference-tp on out, every gradient, each rank's gradients and decoding, so
// a mutant built on it differs from the oracle by its bug alone.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/generators.hpp"
#include "mutants/naive_layer.hpp"
#include "properties/property_test_support.hpp"

namespace attncheck::properties {
namespace {

RC_GTEST_PROP(Properties, TheMutantsNaiveLayerMatchesTheReference, ()) {
  const CaseSpec spec = *case_specs();
  testing::classify(spec);
  const Case test_case = make_case(spec);
  const NamedTensors expected = testing::reference_tp_or_discard(test_case);
  const NamedTensors naive = named_tensors(mutants::NaiveLayer().run(test_case));
  RC_ASSERT(naive.size() == expected.size());
  testing::assert_close(test_case, expected, naive);
}

}  // namespace
}  // namespace attncheck::properties
