// The long-sequence profile in the property suite (label slow): every implementation of kind default
// matches the oracle on cases of 48 .. 4096 tokens around tile edges (generators.hpp,
// SizeProfile::long_sequences). A fixed seed, like the short properties; `attncheck fuzz --profile long`
// explores beyond it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "impl/registry.hpp"
#include "properties/checks.hpp"
#include "properties/generators.hpp"
#include "properties/property_test_support.hpp"

namespace attncheck::properties {
namespace {

RC_GTEST_PROP(LongSequences, EveryImplementationMatchesTheReference, ()) {
  const CaseSpec spec = *case_specs(GenLimits::for_profile(SizeProfile::long_sequences));
  testing::classify(spec);
  RC_CLASSIFY(spec.inputs.seq > 1024, "seq > 1024");
  RC_CLASSIFY(!spec.inputs.key_lengths.empty(), "padded");
  const Case test_case = make_case(spec);
  for (const std::string& name : impl::implementation_names()) {
    const auto implementation = impl::open_implementation(name);
    const CheckOutcome outcome = check_matches_reference(*implementation, test_case);
    if (outcome.verdict == Verdict::fail) RC_FAIL(name + ": " + outcome.detail);
  }
}

}  // namespace
}  // namespace attncheck::properties
