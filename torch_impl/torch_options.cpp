#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

std::vector<std::string> torch_implementation_names() {
  std::vector<std::string> names = {"torch-cpu-fp64", "torch-cpu-fp64-sdpa", "torch-cpu-fp32"};
  for (const char* type : {"fp32", "bf16", "fp16"}) {
    for (const char* path : {"math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn"}) {
      names.push_back(std::string("torch-cuda-") + type + "-" + path);
    }
  }
  return names;
}

std::optional<TorchOptions> parse_torch_implementation(const std::string& name) {
  if (name == "torch-cpu-fp64") return TorchOptions{};
  if (name == "torch-cpu-fp64-sdpa") return TorchOptions{.path = AttentionPath::sdpa};
  if (name == "torch-cpu-fp32") return TorchOptions{.precision = Precision::fp32};
  const std::string prefix = "torch-cuda-";
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string rest = name.substr(prefix.size());
  const std::size_t dash = rest.find('-');
  if (dash == std::string::npos) return std::nullopt;
  const std::string type = rest.substr(0, dash);
  const std::string path = rest.substr(dash + 1);
  TorchOptions options{.cuda = true};
  if (type == "fp32") {
    options.precision = Precision::fp32;
  } else if (type == "bf16") {
    options.precision = Precision::bf16;
  } else if (type == "fp16") {
    options.precision = Precision::fp16;
  } else {
    return std::nullopt;
  }
  if (path == "math") {
    options.path = AttentionPath::math;
  } else if (path == "sdpa-flash") {
    options = {options.precision, true, AttentionPath::sdpa, SdpaBackend::flash};
  } else if (path == "sdpa-efficient") {
    options = {options.precision, true, AttentionPath::sdpa, SdpaBackend::efficient};
  } else if (path == "sdpa-cudnn") {
    options = {options.precision, true, AttentionPath::sdpa, SdpaBackend::cudnn};
  } else {
    return std::nullopt;
  }
  return options;
}

Capabilities torch_capabilities(const TorchOptions& options) {
  Capabilities capabilities;
  capabilities.features.erase(Feature::context_parallel);
  if (options.path == AttentionPath::sdpa) {
    for (const Feature feature : {Feature::softcap, Feature::sinks, Feature::keyless_rows, Feature::latent}) {
      capabilities.features.erase(feature);
    }
  }
  capabilities.stated = options.backend == SdpaBackend::any;
  capabilities.precisions = {options.precision};
  return capabilities;
}

}  // namespace attncheck::torch_impl
