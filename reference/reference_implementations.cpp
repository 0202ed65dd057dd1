// Registers the fp64 references as implementations (impl/registry.hpp): "reference" (unsharded, no
// per-rank gradients) and "reference-tp" (the case's TP plan, per-rank gradients).
#include "impl/function_implementation.hpp"
#include "impl/registry.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {

namespace {

const impl::BackendRegistration kRegistration(0, [] {
  return std::vector<impl::ImplementationEntry>{
      {"reference", impl::ImplementationKind::default_run,
       [] {
         return impl::function_implementation(
             "reference", false, [](const Case& c) { return run_reference(c); }, Precision::fp64,
             RopeAngles::float32, impl::LatentAttentionSupport::runs);
       }},
      {"reference-tp", impl::ImplementationKind::default_run, [] {
         return impl::function_implementation(
             "reference-tp", true, [](const Case& c) { return run_reference_tp(c); }, Precision::fp64,
             RopeAngles::float32, impl::LatentAttentionSupport::runs);
       }}};
});

}  // namespace

}  // namespace attncheck::reference
