// The CUDA plugin's entry points (impl/plugin_abi.hpp), built into lib/attncheck/libattncheck_cuda.so:
// opens a cuda-* name as a function implementation over run_cuda: cuda-{fp32,bf16,fp16} run one rank,
// the -tp variants the case's whole plan with per-rank gradients. Without a GPU they answer
// "unavailable: no CUDA device" (impl::Unavailable), and a head_dim the kernels lack is refused (Unsupported;
// the statement below keeps such cases away).
#include "cuda_impl/cuda_layer.hpp"
#include "cuda_impl/head_dim_dispatch.hpp"
#include "impl/function_implementation.hpp"
#include "impl/plugin_abi.hpp"

extern "C" const char* attncheck_plugin_abi() {
  return attncheck::impl::kPluginAbi;
}

extern "C" attncheck::impl::Implementation* attncheck_plugin_open(const char* name_text) {
  using namespace attncheck;
  const std::string name = name_text;
  const std::optional<cuda_impl::CudaOptions> parsed = cuda_impl::parse_cuda_implementation(name);
  if (!parsed) return nullptr;
  const cuda_impl::CudaOptions options = *parsed;
  const auto run = [name, options](const Case& test_case) {
    try {
      return cuda_impl::run_cuda(test_case, options, name);
    } catch (const cuda_impl::CudaUnavailable& error) {
      throw impl::Unavailable(name, error.what());
    } catch (const cuda_impl::UnsupportedHeadDim& error) {
      throw impl::Unsupported(name, error.what());
    }
  };
  // What the kernels state: every feature of a plain layer at any even head_dim up to kMaxHeadDim, the case's TP
  // plan for the -tp variants (NCCL), no latent attention and no context-parallel layout.
  Capabilities capabilities{.head_dim_multiple_of = 2, .max_head_dim = cuda_impl::kMaxHeadDim, .stated = true};
  for (const Feature feature : {Feature::latent, Feature::context_parallel}) capabilities.features.erase(feature);
  if (!options.sharded) {
    capabilities.features.erase(Feature::tensor_parallel);
    capabilities.features.erase(Feature::kv_replication);
  }
  capabilities.precisions = {options.precision};
  // Angles from an fp64 table (rope_table), cos/sin then rounded to the element type.
  return impl::function_implementation(name, options.sharded, run, options.precision, RopeAngles::float64, capabilities)
      .release();
}
