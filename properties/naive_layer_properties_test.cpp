// The layer the in-layer mutants bend (naive_layer.hpp), with no step overridden, is a correct fp64
// implementation: it matches reference-tp on out, every gradient, each rank's gradients and decoding, so
// a mutant built on it differs from the oracle by its bug alone.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/generators.hpp"
#include "impl/implementation.hpp"
#include "mutants/naive_latent_layer.hpp"
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

// The latent layer the MLA mutants bend (naive_latent_layer.hpp), nothing overridden, in both decode forms:
// out, every gradient, each rank's gradients and decoding match reference-tp. (Sinks it declines.)
class AbsorbedNaiveLatentLayer : public mutants::NaiveLatentLayer {
  bool decode_absorbed() const override { return true; }
};

RC_GTEST_PROP(Properties, TheMutantsNaiveLatentLayerMatchesTheReference, ()) {
  CaseSpec spec = *latent_case_specs();
  spec.geometry.attention_sinks = false;
  RC_CLASSIFY(spec.inputs.tp_size > 1, "tp > 1");
  RC_CLASSIFY(!spec.inputs.decode.empty(), "decode");
  const Case test_case = make_case(spec);
  const NamedTensors expected = testing::reference_tp_or_discard(test_case);
  for (const NamedTensors& naive : {named_tensors(mutants::NaiveLatentLayer().run(test_case)),
                                    named_tensors(AbsorbedNaiveLatentLayer().run(test_case))}) {
    RC_ASSERT(naive.size() == expected.size());
    testing::assert_close(test_case, expected, naive);
  }
}

TEST(NaiveLatentLayer, DeclinesAPlainLayer) {
  const Case plain = make_case({.geometry = {.hidden_size = 4, .num_heads = 2, .head_dim = 2}, .inputs = {.seq = 3}});
  EXPECT_THROW(mutants::NaiveLatentLayer().run(plain), impl::Unsupported);
}

}  // namespace
}  // namespace attncheck::properties
