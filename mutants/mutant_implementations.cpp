// Registers the mutant catalog (catalog.hpp) as implementations of kind "mutant" (impl/registry.hpp). A mutant
// states no capabilities: its layer runs every case of its profile, and `attncheck mutants` keeps the case
// sequences its budgets were measured on; only latent attention is kept from the plain ones (their layers have
// q/k/v projections).
#include "impl/function_implementation.hpp"
#include "impl/registry.hpp"
#include "mutants/catalog.hpp"

namespace attncheck::mutants {

namespace {

const impl::BackendRegistration kRegistration(90, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const Mutant& mutant : mutant_catalog()) {
    entries.push_back({mutant.name, impl::ImplementationKind::mutant, [&mutant] {
                         return impl::function_implementation(
                             mutant.name, mutant.sharded, mutant.run, mutant.precision, mutant.rope_angles,
                             mutant.latent ? Capabilities::everything() : impl::without_latent_attention());
                       }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::mutants
