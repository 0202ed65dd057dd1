// Registers the fp64 references as implementations (impl/registry.hpp): "reference" (unsharded, no
// per-rank gradients), "reference-tp" (the case's TP plan, per-rank gradients) and, on request,
// "reference-cp" (the case's context-parallel layout over its TP plan, reference/context_parallel.hpp: a
// case that states none is unsupported, by name).
#include "impl/function_implementation.hpp"
#include "impl/registry.hpp"
#include "reference/context_parallel.hpp"
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
      {"reference-tp", impl::ImplementationKind::default_run,
       [] {
         return impl::function_implementation(
             "reference-tp", true, [](const Case& c) { return run_reference_tp(c); }, Precision::fp64,
             RopeAngles::float32, impl::LatentAttentionSupport::runs);
       }},
      {"reference-cp", impl::ImplementationKind::on_request, [] {
         const auto run = [](const Case& c) {
           if (!c.context_parallel) {
             throw impl::Unsupported("reference-cp",
                                     "a case without a context-parallel layout (a golden's /geometry@cp_size, "
                                     "`golden make --cp`, `fuzz --profile context-parallel`)");
           }
           return run_reference_cp(c, *c.context_parallel);
         };
         return impl::function_implementation("reference-cp", true, run, Precision::fp64, RopeAngles::float32,
                                              impl::LatentAttentionSupport::refused);
       }}};
});

}  // namespace

}  // namespace attncheck::reference
