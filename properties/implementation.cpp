#include "properties/implementation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "properties/mutants/catalog.hpp"
#include "properties/worker.hpp"
#include "reference/reference.hpp"
#ifdef ATTNCHECK_HAS_TORCH
#include "torch_impl/torch_layer.hpp"
#endif
#ifdef ATTNCHECK_HAS_CUDA
#include "cuda_impl/cuda_layer.hpp"
#include "cuda_impl/head_dim_dispatch.hpp"
#endif

namespace attncheck::properties {

Unsupported::Unsupported(const std::string& implementation, const std::string& reason)
    : InputError(fmt::format("{} cannot run this case", implementation), {{"--impl", implementation, reason, ""}}) {}

namespace {

// An implementation that is a function of the case (the references and the mutants).
class FunctionImplementation : public Implementation {
 public:
  FunctionImplementation(std::string name, bool sharded, std::function<Result(const Case&)> run)
      : name_(std::move(name)), sharded_(sharded), run_(std::move(run)) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return sharded_; }
  NamedTensors run(const Case& test_case) override { return named_tensors(run_(test_case)); }

 private:
  std::string name_;
  bool sharded_;
  std::function<Result(const Case&)> run_;
};

#ifdef ATTNCHECK_HAS_TORCH
// The LibTorch implementation (torch_impl/): every rank of the plan, so sharded.
class TorchImplementation : public Implementation {
 public:
  TorchImplementation(std::string name, torch_impl::TorchOptions options) : name_(std::move(name)), options_(options) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return true; }
  Precision precision() const override {
    switch (options_.element_type) {
      case torch_impl::ElementType::fp64:
        return Precision::fp64;
      case torch_impl::ElementType::fp32:
        return Precision::fp32;
      case torch_impl::ElementType::bf16:
        return Precision::bf16;
      case torch_impl::ElementType::fp16:
        return Precision::fp16;
    }
    return Precision::fp64;
  }
  NamedTensors run(const Case& test_case) override {
    try {
      return named_tensors(torch_impl::run_torch(test_case, options_, name_));
    } catch (const torch_impl::TorchUnsupported& error) {
      throw Unsupported(name_, error.what());
    }
  }

 private:
  std::string name_;
  torch_impl::TorchOptions options_;
};
#endif

#ifdef ATTNCHECK_HAS_CUDA
// The CUDA implementation (cuda_impl/): one rank, or (-tp) every rank of the plan in turn.
class CudaImplementation : public Implementation {
 public:
  CudaImplementation(std::string name, cuda_impl::CudaOptions options) : name_(std::move(name)), options_(options) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return options_.sharded; }
  Precision precision() const override {
    switch (options_.element_type) {
      case cuda_impl::ElementType::fp32:
        return Precision::fp32;
      case cuda_impl::ElementType::bf16:
        return Precision::bf16;
      case cuda_impl::ElementType::fp16:
        return Precision::fp16;
    }
    return Precision::fp32;
  }
  NamedTensors run(const Case& test_case) override {
    try {
      return named_tensors(cuda_impl::run_cuda(test_case, options_, name_));
    } catch (const cuda_impl::CudaUnavailable& error) {
      throw Unsupported(name_, error.what());
    } catch (const cuda_impl::UnsupportedHeadDim& error) {
      throw Unsupported(name_, error.what());
    }
  }

 private:
  std::string name_;
  cuda_impl::CudaOptions options_;
};
#endif

}  // namespace

std::vector<std::string> implementation_names() {
  // What runs on any machine. The torch-cuda-* and cuda-* names (torch_impl/torch_options.hpp,
  // cuda_impl/cuda_layer.hpp) are left out: on a machine without a GPU they could only answer
  // "unsupported"; ci/gpu-check names them explicitly.
  std::vector<std::string> names = {"reference", "reference-tp"};
#ifdef ATTNCHECK_HAS_TORCH
  names.insert(names.end(), {"torch-cpu-fp64", "torch-cpu-fp64-sdpa", "torch-cpu-fp32"});
#endif
  return names;
}

std::vector<RegisteredImplementation> registered_implementations() {
  std::vector<RegisteredImplementation> registered;
  for (const std::string& name : implementation_names()) registered.push_back({name, "default"});
  std::vector<std::string> device_names;
#ifdef ATTNCHECK_HAS_TORCH
  device_names = torch_impl::torch_implementation_names();
#endif
#ifdef ATTNCHECK_HAS_CUDA
  for (const std::string& cuda_name : cuda_impl::cuda_implementation_names()) device_names.push_back(cuda_name);
#endif
  for (const std::string& device_name : device_names) {
    const bool listed = std::any_of(registered.begin(), registered.end(),
                                    [&](const RegisteredImplementation& entry) { return entry.name == device_name; });
    if (!listed) registered.push_back({device_name, "device"});
  }
  for (const std::string& mutant : mutant_names()) registered.push_back({mutant, "mutant"});
  return registered;
}

std::unique_ptr<Implementation> open_implementation(const std::string& name) {
  if (name == "reference") {
    return std::make_unique<FunctionImplementation>(
        name, false, [](const Case& test_case) { return reference::run_reference(test_case); });
  }
  if (name == "reference-tp") {
    return std::make_unique<FunctionImplementation>(
        name, true, [](const Case& test_case) { return reference::run_reference_tp(test_case); });
  }
  for (const Mutant& mutant : mutant_catalog()) {
    if (mutant.name == name) return std::make_unique<FunctionImplementation>(name, mutant.sharded, mutant.run);
  }
  if (name.starts_with(kExecPrefix)) return open_worker(name.substr(kExecPrefix.size()));
#ifdef ATTNCHECK_HAS_TORCH
  if (const auto options = torch_impl::parse_torch_implementation(name)) {
    return std::make_unique<TorchImplementation>(name, *options);
  }
#endif
#ifdef ATTNCHECK_HAS_CUDA
  if (const auto options = cuda_impl::parse_cuda_implementation(name)) {
    return std::make_unique<CudaImplementation>(name, *options);
  }
#endif
  std::vector<std::string> valid;
  for (const RegisteredImplementation& registered : registered_implementations()) valid.push_back(registered.name);
  valid.push_back("exec:COMMAND");
  ViolationList violations;
  violations.add("--impl", name, "must name an implementation attncheck has",
                 fmt::format("valid: {}", fmt::join(valid, ", ")));
  violations.throw_if_any("unknown implementation");
  return nullptr;
}

}  // namespace attncheck::properties
