// Registers the LibTorch implementation's names (torch_options.hpp) in the registry (impl/registry.hpp):
// torch-cpu-* run on any machine (kind default), torch-cuda-* need a GPU (kind device). Every one runs
// every rank of the case's plan, so reports per-rank gradients.
#include "impl/registry.hpp"
#include "torch_impl/torch_layer.hpp"
#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

namespace {

class TorchImplementation : public impl::Implementation {
 public:
  TorchImplementation(std::string name, TorchOptions options) : name_(std::move(name)), options_(options) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return true; }
  Precision precision() const override { return options_.precision; }
  NamedTensors run(const Case& test_case) override {
    try {
      return named_tensors(run_torch(test_case, options_, name_));
    } catch (const TorchUnsupported& error) {
      throw impl::Unsupported(name_, error.what());
    }
  }

 private:
  std::string name_;
  TorchOptions options_;
};

const impl::BackendRegistration kRegistration(10, [] {
  std::vector<impl::ImplementationEntry> entries;
  for (const std::string& name : torch_implementation_names()) {
    const TorchOptions options = *parse_torch_implementation(name);
    entries.push_back({name, options.cuda ? impl::ImplementationKind::device : impl::ImplementationKind::default_run,
                       [name, options] { return std::make_unique<TorchImplementation>(name, options); }});
  }
  return entries;
});

}  // namespace

}  // namespace attncheck::torch_impl
