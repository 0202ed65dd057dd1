// The cuda-* names in the registry (impl/registry.hpp), the CUDA plugin's manifest, kind device. Listing
// them needs no CUDA library; opening one loads lib/attncheck/libattncheck_cuda.so (cuda_plugin.cpp)
// through impl/plugin_loader.
#include "cuda_impl/cuda_options.hpp"
#include "impl/plugin_loader.hpp"
#include "impl/registry.hpp"

namespace attncheck::cuda_impl {

namespace {

const impl::BackendRegistration kRegistration(20, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const std::string& name : cuda_implementation_names()) {
    entries.push_back(
        {name, impl::ImplementationKind::device, [name] { return impl::open_plugin_implementation("cuda", name); }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::cuda_impl
