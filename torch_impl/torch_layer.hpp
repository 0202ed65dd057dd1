// The LibTorch implementation of the whole layer: one ParallelSelfAttention per TP rank in one process
// (ranks in order; partial outputs summed, o_bias added once, as reference-tp does), the backward pass
// by autograd from loss = sum(out * dout), rank gradients reduced by core/tp/tp_shard.hpp (reduce_rank_gradients), and the decode
// schedule through per-rank KV caches.
#pragma once

#include <string>

#include "core/model/case.hpp"
#include "core/model/result.hpp"
#include "torch_impl/torch_options.hpp"

namespace attncheck::torch_impl {

// TorchUnsupported when this configuration cannot run the case (see torch_options.hpp).
Result run_torch(const Case& test_case, const TorchOptions& options, const std::string& name);

}  // namespace attncheck::torch_impl
