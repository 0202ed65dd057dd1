// The one parameter block every attention kernel takes (flash-attention's style: named dimensions and
// explicit strides, in elements). Plain data, identical on host and device. The layouts are those
// cuda_layer.cpp allocates; the strides let a kernel read a rank's slice of a wider buffer.
#pragma once

#include <cstdint>

#include "core/model/precision.hpp"

namespace attncheck::cuda_impl {

struct AttentionParams {
  // Dimensions (the names used throughout attncheck).
  std::int32_t batch = 0;
  std::int32_t seq_q = 0;         // query rows per batch row
  std::int32_t seq_k = 0;         // key rows per batch row (seq_k >= seq_q when decoding from a cache)
  std::int32_t num_heads = 0;     // query heads H_q (on this rank)
  std::int32_t num_kv_heads = 0;  // KV heads H_kv (on this rank)
  std::int32_t head_dim = 0;      // d, any even value in [2, 256]
  std::int32_t group_size = 0;    // H_q / H_kv: query head h reads KV head h / group_size

  // Scores: scale * q.k, then softcap * tanh(scores / softcap) when softcap > 0.
  float scale = 1.0f;
  float softcap = 0.0f;  // 0: none
  // Mask: query i (aligned to key i + seq_k - seq_q, bottom-right) sees keys j with
  // j <= aligned (causal), aligned - window < j (window > 0), j < key_lengths[b] (padding).
  bool causal = true;
  std::int32_t window = 0;                    // 0: none
  const std::int32_t* key_lengths = nullptr;  // [batch] on the device; null: every row has seq_k keys
  // Attention sinks (gpt-oss): one logit per query head in every row's softmax denominator, with no
  // value (softmax_math.hpp: row_start).
  const float* sinks = nullptr;  // [num_heads] float on the device, this rank's query heads; null: none

  // Buffers, element strides. Row = one token.
  //   q               [batch, seq_q, num_heads, head_dim]     head h at column h * head_dim (q strides)
  //   o, d_o, d_q     the same shape, o strides (q and k, v are usually views of a fused QKV buffer,
  //                   o a packed [tokens, num_heads * head_dim] buffer)
  //   k, v, d_k, d_v  [batch, seq_k, num_kv_heads, head_dim]  (kv strides)
  //   lse             [batch, num_heads, seq_q] float: log of the row's sum of exp(score); -inf for a
  //                   query that sees no key
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  std::int64_t q_row_stride = 0;   // between tokens of q (num_heads * head_dim when packed)
  std::int64_t kv_row_stride = 0;  // between tokens of k / v / d_k / d_v (num_kv_heads * head_dim when packed)
  std::int64_t o_row_stride = 0;   // between tokens of o / d_o / d_q
  std::int64_t q_batch_stride = 0;
  std::int64_t kv_batch_stride = 0;
  std::int64_t o_batch_stride = 0;

  // Backward only (the same layouts as their forward counterparts; d_q accumulates in float).
  const void* d_o = nullptr;
  float* d_q = nullptr;  // float, o strides, zeroed by the caller (accumulated with atomicAdd)
  void* d_k = nullptr;
  void* d_v = nullptr;
  float* d_row = nullptr;    // [batch, num_heads, seq_q] float: rowsum(d_o * o), the backward's D
  float* d_sinks = nullptr;  // [num_heads] float, required with sinks: zeroed by the caller, atomicAdd

  Precision precision = Precision::fp32;  // fp32, bf16 or fp16: the kernels have no fp64 path
};

}  // namespace attncheck::cuda_impl
