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

// What each states: every feature, less what it does not run (per-rank gradients for "reference", a
// context-parallel layout for both: the layout changes no tensor). reference-cp states nothing: it needs what
// no statement can say, a case with a layout, and refuses any other by name.
Capabilities stated_without(std::initializer_list<Feature> missing) {
  Capabilities capabilities{.stated = true};
  for (const Feature feature : missing) capabilities.features.erase(feature);
  return capabilities;
}

const impl::BackendRegistration kRegistration(0, [] {
  return std::vector<impl::ImplementationEntry>{
      {"reference", impl::ImplementationKind::default_run,
       [] {
         return impl::function_implementation(
             "reference", false, [](const Case& c) { return run_reference(c); }, Precision::fp64, RopeAngles::float32,
             stated_without({Feature::tensor_parallel, Feature::kv_replication, Feature::context_parallel}));
       }},
      {"reference-tp", impl::ImplementationKind::default_run,
       [] {
         return impl::function_implementation(
             "reference-tp", true, [](const Case& c) { return run_reference_tp(c); }, Precision::fp64,
             RopeAngles::float32, stated_without({Feature::context_parallel}));
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
         return impl::function_implementation("reference-cp", true, run, Precision::fp64, RopeAngles::float32);
       }}};
});

}  // namespace

}  // namespace attncheck::reference
