#include "cuda_impl/cuda_options.hpp"

#include <utility>

namespace attncheck::cuda_impl {

std::vector<std::string> cuda_implementation_names() {
  return {"cuda-fp32", "cuda-bf16", "cuda-fp16", "cuda-fp32-tp", "cuda-bf16-tp", "cuda-fp16-tp"};
}

std::optional<CudaOptions> parse_cuda_implementation(const std::string& name) {
  for (const auto& [type, type_name] :
       {std::pair{Precision::fp32, "fp32"}, std::pair{Precision::bf16, "bf16"}, std::pair{Precision::fp16, "fp16"}}) {
    const std::string base = std::string("cuda-") + type_name;
    if (name == base) return CudaOptions{.precision = type, .sharded = false};
    if (name == base + "-tp") return CudaOptions{.precision = type, .sharded = true};
  }
  return std::nullopt;
}

}  // namespace attncheck::cuda_impl
