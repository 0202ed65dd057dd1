// Registers the CUDA implementation's names (cuda_layer.hpp) in the registry (impl/registry.hpp), kind
// device: cuda-{fp32,bf16,fp16} run one rank, the -tp variants the case's whole plan with per-rank
// gradients. Without a GPU they answer "unavailable: no CUDA device", and a head_dim the kernels lack is
// refused: both Unsupported.
#include "cuda_impl/cuda_layer.hpp"
#include "cuda_impl/head_dim_dispatch.hpp"
#include "impl/function_implementation.hpp"
#include "impl/registry.hpp"

namespace attncheck::cuda_impl {

namespace {

std::unique_ptr<impl::Implementation> open_cuda(const std::string& name, const CudaOptions& options) {
  const auto run = [name, options](const Case& test_case) {
    try {
      return run_cuda(test_case, options, name);
    } catch (const CudaUnavailable& error) {
      throw impl::Unsupported(name, error.what());
    } catch (const UnsupportedHeadDim& error) {
      throw impl::Unsupported(name, error.what());
    }
  };
  // Angles from an fp64 table (rope_table), cos/sin then rounded to the element type.
  return impl::function_implementation(name, options.sharded, run, options.precision, RopeAngles::float64);
}

const impl::BackendRegistration kRegistration(20, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const std::string& name : cuda_implementation_names()) {
    const CudaOptions options = *parse_cuda_implementation(name);
    entries.push_back({name, impl::ImplementationKind::device, [name, options] { return open_cuda(name, options); }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::cuda_impl
