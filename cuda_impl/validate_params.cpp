#include <stdexcept>
#include <string>

#include "cuda_impl/attention_kernels.hpp"

namespace attncheck::cuda_impl {
namespace {

void require(bool condition, const std::string& field, const std::string& valid) {
  if (!condition) throw std::invalid_argument("AttentionParams." + field + ": must be " + valid);
}

}  // namespace

void validate_params(const AttentionParams& p, bool backward) {
  require(p.precision != Precision::fp64, "precision", "fp32, bf16 or fp16 (the kernels have no fp64 path)");
  require(p.batch >= 1 && p.seq_q >= 1 && p.seq_k >= 1, "batch/seq_q/seq_k", ">= 1");
  require(p.num_heads >= 1 && p.num_kv_heads >= 1, "num_heads/num_kv_heads", ">= 1");
  require(p.num_heads % p.num_kv_heads == 0 && p.group_size == p.num_heads / p.num_kv_heads, "group_size",
          "num_heads / num_kv_heads (" + std::to_string(p.num_heads) + " / " + std::to_string(p.num_kv_heads) + ")");
  if (p.head_dim < 2 || p.head_dim > kMaxHeadDim || p.head_dim % 2 != 0) throw UnsupportedHeadDim(p.head_dim);
  require(p.window >= 0, "window", ">= 0 (0: none)");
  require(p.softcap >= 0.0f, "softcap", ">= 0 (0: none)");
  require(!p.causal || p.seq_k >= p.seq_q, "seq_k", ">= seq_q when causal (queries are the cache's last rows)");
  require(p.q_row_stride >= std::int64_t{p.num_heads} * p.head_dim, "q_row_stride", ">= num_heads * head_dim");
  require(p.kv_row_stride >= std::int64_t{p.num_kv_heads} * p.head_dim, "kv_row_stride", ">= num_kv_heads * head_dim");
  require(p.o_row_stride >= std::int64_t{p.num_heads} * p.head_dim, "o_row_stride", ">= num_heads * head_dim");
  require(p.q_batch_stride >= p.q_row_stride * p.seq_q, "q_batch_stride", ">= q_row_stride * seq_q");
  require(p.o_batch_stride >= p.o_row_stride * p.seq_q, "o_batch_stride", ">= o_row_stride * seq_q");
  require(p.kv_batch_stride >= p.kv_row_stride * p.seq_k, "kv_batch_stride", ">= kv_row_stride * seq_k");
  require(p.q != nullptr && p.k != nullptr && p.v != nullptr && p.o != nullptr, "q/k/v/o", "device buffers");
  if (backward) {
    require(p.lse != nullptr && p.d_o != nullptr && p.d_q != nullptr && p.d_k != nullptr && p.d_v != nullptr &&
                p.d_row != nullptr,
            "lse/d_o/d_q/d_k/d_v/d_row", "device buffers for the backward pass");
    require(p.sinks == nullptr || p.d_sinks != nullptr, "d_sinks",
            "a device buffer of num_heads floats when sinks are given (their gradient)");
  }
}

}  // namespace attncheck::cuda_impl
