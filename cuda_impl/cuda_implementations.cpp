// Registers the CUDA implementation's names (cuda_layer.hpp) in the registry (impl/registry.hpp), kind
// device: cuda-{fp32,bf16,fp16} run one rank, the -tp variants the case's whole plan with per-rank
// gradients. Without a GPU they answer "unavailable: no CUDA device" (unsupported).
#include "cuda_impl/cuda_layer.hpp"
#include "cuda_impl/head_dim_dispatch.hpp"
#include "impl/registry.hpp"

namespace attncheck::cuda_impl {

namespace {

class CudaImplementation : public impl::Implementation {
 public:
  CudaImplementation(std::string name, CudaOptions options) : name_(std::move(name)), options_(options) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return options_.sharded; }
  Precision precision() const override { return options_.precision; }
  NamedTensors run(const Case& test_case) override {
    try {
      return named_tensors(run_cuda(test_case, options_, name_));
    } catch (const CudaUnavailable& error) {
      throw impl::Unsupported(name_, error.what());
    } catch (const UnsupportedHeadDim& error) {
      throw impl::Unsupported(name_, error.what());
    }
  }

 private:
  std::string name_;
  CudaOptions options_;
};

const impl::BackendRegistration kRegistration(20, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const std::string& name : cuda_implementation_names()) {
    const CudaOptions options = *parse_cuda_implementation(name);
    entries.push_back({name, impl::ImplementationKind::device,
                       [name, options] { return std::make_unique<CudaImplementation>(name, options); }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::cuda_impl
