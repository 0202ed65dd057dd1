// Query heads attending over their KV head: masks, scaled scores, optional tanh softcap, a stable
// softmax, and the context; and the backward pass of the same.
//
// Every mask attncheck knows is an interval of keys per query (core/model/case.hpp):
//   query i (aligned bottom-right: key index i' = i + key_offset) sees keys j in [begin, end) with
//   begin = max(0, i' - window + 1) if windowed, else 0
//   end   = min(key_length, i' + 1)  if causal,   else key_length       (and never past seq_k)
// so the softmax runs over [begin, end) only; an empty interval gives probabilities 0, context 0
// and log-sum-exp -inf. With attention sinks (core/model/geometry.hpp) a query head's sink logit s joins
// each of its rows' denominators: p_ij = exp(S_ij - m) / (sum_j exp(S_ij - m) + exp(s - m)), m the
// maximum over the row and s; an empty interval then gives probabilities 0 and log-sum-exp s.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/model/geometry.hpp"
#include "core/model/tensor.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::reference {

struct KeyInterval {
  std::int64_t begin = 0;
  std::int64_t end = 0;  // empty when end <= begin
};

struct MaskSpec {
  std::int64_t key_offset = 0;  // seq_k - seq_q: bottom-right alignment
  std::int64_t key_length = 0;  // keys >= key_length are padding
  std::int64_t key_count = 0;   // seq_k: keys that exist (a cache holds fewer than the padded length)
  bool causal = true;
  std::optional<std::int64_t> window;

  static MaskSpec for_geometry(const Geometry& geometry, std::int64_t seq_q, std::int64_t seq_k,
                               std::int64_t key_length);
  KeyInterval visible_keys(std::int64_t query) const;
};

struct ScoreSpec {
  double scale = 1.0;             // scores = scale * q . k
  std::optional<double> softcap;  // scores -> softcap * tanh(scores / softcap)
  // The sink logits of the group's query heads (entry j: the group's head j), or empty: no sinks.
  std::span<const double> sinks;
  static ScoreSpec for_geometry(const Geometry& geometry);
  // This spec with the sinks of local query heads [first_head, first_head + count) of `sinks` (a
  // rank's [local heads] tensor), or unchanged when sinks is absent.
  ScoreSpec with_sinks(const std::optional<Tensor>& sink_logits, std::int64_t first_head, std::int64_t count) const;
};

// One KV head and the query heads that read it (its GQA group; one head for MHA):
//   q, d_q                       [seq_q, group * head_dim]   query head j of the group in columns
//                                                           j*head_dim .. (j+1)*head_dim - 1
//   context, d_context           [seq_q, group * value_dim]  query head j in columns j*value_dim ..
//   k, d_k                       [seq_k, head_dim]
//   v, d_v                       [seq_k, value_dim]          value_dim = head_dim except in latent
//                                                           attention (v_head_dim, or kv_lora_rank absorbed)
//   log_sum_exp                  [group, seq_q]              optional
// group = q.cols() / k.cols(). The group's heads are stacked into one matrix per block of query rows,
// so every GEMM against the shared k and v covers the whole group.
void attention_group_forward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                             const MaskSpec& mask, const ScoreSpec& score, MatrixRef context, double* log_sum_exp);

// d_q is overwritten; d_k and d_v are overwritten with the gradient of the KV head, summed over the
// group's query heads. With sinks, d_sinks ([group], not null) accumulates each head's sink gradient:
// -sum over its rows of p_sink * sum_j p_ij dp_ij. The probabilities are recomputed block by block by the same code as
// the forward pass (in larger blocks, so equal to the forward's up to rounding), and no seq_q x seq_k matrix is ever
// stored.
void attention_group_backward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                              const MaskSpec& mask, const ScoreSpec& score, const ConstMatrixRef& d_context,
                              MatrixRef d_q, MatrixRef d_k, MatrixRef d_v, double* d_sinks = nullptr);

// The whole [seq_q, seq_k] probability matrix (0 outside each query's interval), for tests.
RowMatrix attention_probabilities(const ConstMatrixRef& q, const ConstMatrixRef& k, const MaskSpec& mask,
                                  const ScoreSpec& score);

}  // namespace attncheck::reference
