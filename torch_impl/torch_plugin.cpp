// The LibTorch plugin's entry points (impl/plugin_abi.hpp), built into lib/attncheck/libattncheck_torch.so:
// opens a torch-* name as a function implementation over run_torch. Every one runs every rank of the
// case's plan, so reports per-rank gradients; TorchUnsupported becomes Unsupported.
#include "impl/function_implementation.hpp"
#include "impl/plugin_abi.hpp"
#include "torch_impl/torch_layer.hpp"
#include "torch_impl/torch_options.hpp"

extern "C" const char* attncheck_plugin_abi() {
  return attncheck::impl::kPluginAbi;
}

extern "C" attncheck::impl::Implementation* attncheck_plugin_open(const char* name_text) {
  using namespace attncheck;
  const std::string name = name_text;
  const std::optional<torch_impl::TorchOptions> parsed = torch_impl::parse_torch_implementation(name);
  if (!parsed) return nullptr;
  const torch_impl::TorchOptions options = *parsed;
  const auto run = [name, options](const Case& test_case) {
    try {
      return torch_impl::run_torch(test_case, options, name);
    } catch (const torch_impl::TorchUnavailable& error) {
      throw impl::Unavailable(name, error.what());
    } catch (const torch_impl::TorchUnsupported& error) {
      throw impl::Unsupported(name, error.what());
    }
  };
  // Angles from float64 frequencies and positions, cos/sin then cast (parallel_self_attention.cpp).
  return impl::function_implementation(name, true, run, options.precision, RopeAngles::float64,
                                       torch_impl::torch_capabilities(options))
      .release();
}
