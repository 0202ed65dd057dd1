// The long-sequence profile in the property suite (label slow): every implementation of kind default,
// and the long mutants' tiled layer, match the oracle on cases of 48 .. 4096 tokens around tile edges
// (generators.hpp, SizeProfile::long_sequences). A fixed seed, like the short properties; `attncheck fuzz --profile long`
// explores beyond it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "impl/registry.hpp"
#include "properties/checks.hpp"
#include "properties/generators.hpp"
#include "mutants/tiled_layer.hpp"
#include "properties/property_test_support.hpp"

namespace attncheck::properties {
namespace {

RC_GTEST_PROP(LongSequences, EveryImplementationMatchesTheReference, ()) {
  const CaseSpec spec = *case_specs(GenLimits::for_profile(SizeProfile::long_sequences));
  testing::classify(spec);
  RC_CLASSIFY(spec.inputs.seq > 1024, "seq > 1024");
  RC_CLASSIFY(!spec.inputs.key_lengths.empty(), "padded");
  const Case test_case = make_case(spec);
  const OracleAnswer oracle = oracle_answer(test_case);  // once for every implementation: a pure function of the case
  for (const std::string& name : impl::implementation_names()) {
    const auto implementation = impl::open_implementation(name);
    const CheckOutcome outcome = check_matches_reference(*implementation, test_case, oracle);
    if (outcome.verdict == Verdict::fail) RC_FAIL(name + ": " + outcome.detail);
  }
}

// The vehicle of the long-profile mutants (tiled_layer.hpp), with no step overridden, is a correct
// layer on long cases: its online softmax over tiles and its split-KV decoding match reference-tp, so a
// mutant built on it differs from the oracle by its bug alone.
RC_GTEST_PROP(LongSequences, TheMutantsTiledLayerMatchesTheReference, ()) {
  const CaseSpec spec = *case_specs(GenLimits::for_profile(SizeProfile::long_sequences));
  RC_CLASSIFY(spec.inputs.seq > mutants::TiledLayer::kTileKeys, "more than one key tile");
  RC_CLASSIFY(!spec.inputs.decode.empty(), "split-KV decoding");
  const Case test_case = make_case(spec);
  const NamedTensors expected = testing::reference_tp_or_discard(test_case);
  testing::assert_close(test_case, expected, named_tensors(mutants::TiledLayer().run(test_case)));
}

}  // namespace
}  // namespace attncheck::properties
