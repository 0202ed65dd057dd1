// Only the chosen scaled_dot_product_attention backend enabled while a guard lives (CUDA: flash,
// memory-efficient or cuDNN, each a separate implementation name and benchmark column), the previous
// choice restored after.
#pragma once

#include <torch/torch.h>

#include <array>

#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

class SdpaBackendGuard {
 public:
  explicit SdpaBackendGuard(SdpaBackend backend) : active_(backend != SdpaBackend::any) {
    if (!active_) return;
    at::Context& context = at::globalContext();
    saved_ = {context.userEnabledFlashSDP(), context.userEnabledMemEfficientSDP(), context.userEnabledMathSDP(),
              context.userEnabledCuDNNSDP()};
    context.setSDPUseFlash(backend == SdpaBackend::flash);
    context.setSDPUseMemEfficient(backend == SdpaBackend::efficient);
    context.setSDPUseMath(false);
    context.setSDPUseCuDNN(backend == SdpaBackend::cudnn);
  }
  ~SdpaBackendGuard() {
    if (!active_) return;
    at::Context& context = at::globalContext();
    context.setSDPUseFlash(saved_[0]);
    context.setSDPUseMemEfficient(saved_[1]);
    context.setSDPUseMath(saved_[2]);
    context.setSDPUseCuDNN(saved_[3]);
  }
  SdpaBackendGuard(const SdpaBackendGuard&) = delete;
  SdpaBackendGuard& operator=(const SdpaBackendGuard&) = delete;

 private:
  bool active_;
  std::array<bool, 4> saved_{};
};

}  // namespace attncheck::torch_impl
