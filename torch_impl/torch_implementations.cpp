// The torch-* names in the registry (impl/registry.hpp), the LibTorch plugin's manifest: torch-cpu-* run
// on any machine (kind default), torch-cuda-* need a GPU (kind device). Listing them needs no LibTorch;
// opening one loads lib/attncheck/libattncheck_torch.so (torch_plugin.cpp) through impl/plugin_loader.
#include "impl/plugin_loader.hpp"
#include "impl/registry.hpp"
#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

namespace {

const impl::BackendRegistration kRegistration(10, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const std::string& name : torch_implementation_names()) {
    const TorchOptions options = *parse_torch_implementation(name);
    entries.push_back({name, options.cuda ? impl::ImplementationKind::device : impl::ImplementationKind::default_run,
                       [name] { return impl::open_plugin_implementation("torch", name); }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::torch_impl
