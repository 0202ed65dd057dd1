// How the LibTorch implementation runs: element type, device, and the attention path.
//   math  explicit q k^T, mask, softcap, softmax, p v (every feature)
//   sdpa  torch's scaled_dot_product_attention with enable_gqa (no softcap; no query without keys)
// Names: torch-cpu-fp64 (math), torch-cpu-fp64-sdpa, torch-cpu-fp32 (math); on CUDA
// torch-cuda-{fp32,bf16,fp16}-{math,sdpa-flash,sdpa-efficient,sdpa-cudnn}.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/capabilities/capabilities.hpp"
#include "core/model/precision.hpp"

namespace attncheck::torch_impl {

enum class AttentionPath { math, sdpa };
enum class SdpaBackend { any, flash, efficient, cudnn };

struct TorchOptions {
  Precision precision = Precision::fp64;
  bool cuda = false;
  AttentionPath path = AttentionPath::math;
  SdpaBackend backend = SdpaBackend::any;  // CUDA only
};

// A case this configuration cannot run (softcap on the sdpa path, a backend refusing a head_dim,
// no CUDA device): reported as unsupported, never as a failure.
class TorchUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No CUDA device for a torch-cuda-* name: the implementation cannot run here at all (impl::Unavailable).
class TorchUnavailable : public TorchUnsupported {
 public:
  using TorchUnsupported::TorchUnsupported;
};

// Every torch implementation name (the torch-cuda-* ones always; without a CUDA device they are
// unsupported), and the options
// of one; nullopt for a name that is not a torch implementation.
std::vector<std::string> torch_implementation_names();
std::optional<TorchOptions> parse_torch_implementation(const std::string& name);

// What each configuration states (core/capabilities/capabilities.hpp). The math path runs every feature, its
// TP plan included, but context parallelism (it runs the layer whole; the layout changes no tensor). The sdpa
// path states the same less what scaled_dot_product_attention has no argument for (softcap, sinks, a query
// that sees no key) and latent attention (math only). A forced CUDA backend (sdpa-flash, -efficient, -cudnn)
// states nothing: which cases PyTorch's backend takes depends on the device and its build, so it is offered
// those cases and its refusals are declines, not broken promises.
Capabilities torch_capabilities(const TorchOptions& options);

}  // namespace attncheck::torch_impl
