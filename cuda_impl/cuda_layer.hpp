// The whole attention layer on the GPU: per TP rank, the fused [Q | K | V] projection (cuBLASLt),
// QK-norm + RoPE, flash attention, o_proj, and the backward pass, o_bias added once. With tp_size > 1, at
// least tp_size GPUs and ATTNCHECK_NCCL != 0, each rank runs on its own GPU and NCCL all-reduces the
// o_proj partials, dx, decode outputs and the replicated / QK-norm gradients (cuda_impl/tp_comm.hpp);
// otherwise the ranks run in turn on GPU 0, outputs and dx are summed there in fp32, and the rank
// gradients are reduced on the host in fp64 (reduce_rank_gradients). Decoding runs the schedule through
// a KV cache.
// A rank's work is three phases: A project; B QK-norm + RoPE, attention, o_proj and the backward through
// attention and RoPE; C the norm's and projections' backward. The whole-width QK-norm (rms-full-width)
// all-reduces per-token sums between them: after A each token's sum of squares over q and over k (a
// replicated KV head counted once, by its replica group's first rank), after B each token's sum of
// dn * n (every rank). Those all-reduces are NCCL world sums on the NCCL path and fp32 sums in rank order
// on GPU 0 otherwise; decoding reuses the forward's sums (a token's sum depends on its x alone). Its
// gradients: q_norm owned by its rank, k_norm summed over the replica group as k_proj. Per-head norms
// and none run each rank's phases back to back, with no all-reduce between them.
#pragma once

#include <stdexcept>
#include <string>

#include "core/model/case.hpp"
#include "core/model/result.hpp"
#include "cuda_impl/attention_params.hpp"
#include "cuda_impl/cuda_options.hpp"

namespace attncheck::cuda_impl {

// No usable device (no GPU, no driver): the implementation is unavailable, not wrong.
class CudaUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws CudaUnavailable without a device; UnsupportedHeadDim (std::invalid_argument) for a head_dim
// the kernels lack; CudaError when a CUDA call fails.
Result run_cuda(const Case& test_case, const CudaOptions& options, const std::string& name);

}  // namespace attncheck::cuda_impl
