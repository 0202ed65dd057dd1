// Registers the LibTorch implementation's names (torch_options.hpp) in the registry (impl/registry.hpp):
// torch-cpu-* run on any machine (kind default), torch-cuda-* need a GPU (kind device). Every one runs
// every rank of the case's plan, so reports per-rank gradients; TorchUnsupported becomes Unsupported.
#include "impl/function_implementation.hpp"
#include "impl/registry.hpp"
#include "torch_impl/torch_layer.hpp"
#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

namespace {

std::unique_ptr<impl::Implementation> open_torch(const std::string& name, const TorchOptions& options) {
  const auto run = [name, options](const Case& test_case) {
    try {
      return run_torch(test_case, options, name);
    } catch (const TorchUnsupported& error) {
      throw impl::Unsupported(name, error.what());
    }
  };
  // Angles from float64 frequencies and positions, cos/sin then cast (parallel_self_attention.cpp).
  return impl::function_implementation(name, true, run, options.precision, RopeAngles::float64);
}

const impl::BackendRegistration kRegistration(10, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const std::string& name : torch_implementation_names()) {
    const TorchOptions options = *parse_torch_implementation(name);
    entries.push_back({name, options.cuda ? impl::ImplementationKind::device : impl::ImplementationKind::default_run,
                       [name, options] { return open_torch(name, options); }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::torch_impl
