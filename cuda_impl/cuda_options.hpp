// The CUDA implementation's names and what each runs: plain C++, so the registry's manifest
// (cuda_implementations.cpp) lists them without loading CUDA.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/model/precision.hpp"

namespace attncheck::cuda_impl {

struct CudaOptions {
  Precision precision = Precision::bf16;
  bool sharded = false;  // -tp: run the case's TP plan and report per-rank gradients; else one rank
};

// cuda-{fp32,bf16,fp16} and cuda-{fp32,bf16,fp16}-tp.
std::vector<std::string> cuda_implementation_names();
// The options of one of those names; nullopt for any other.
std::optional<CudaOptions> parse_cuda_implementation(const std::string& name);

}  // namespace attncheck::cuda_impl
