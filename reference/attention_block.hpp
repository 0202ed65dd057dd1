// One block of a longer attention (ring attention's pieces, context_parallel.hpp): the backward pass of a
// query block against one key block, with the probabilities normalised by the rows' final log-sum-exp over
// every key block (and the sink, where there is one) rather than by this block's keys alone:
//   P = exp(S - lse) inside each query's visible interval (attention_head.hpp), 0 outside;
//   dV += P^T dO;  dS = P o (dO V^T - D) (o (1 - tanh^2) with a softcap) x scale;  dQ += dS K;  dK += dS^T Q
// with D = rowsum(dO o O) over the whole output (the flash form, equal in exact arithmetic to the naive
// sum_j P_ij dP_ij over every block).
//
// Layouts, as attention_group_backward: q, d_q [rows, group * head_dim]; k, d_k [keys, head_dim];
// v, d_v [keys, value_dim]; d_context [rows, group * value_dim]; log_sum_exp and d_weighted [group, rows]
// (head j's rows contiguous). d_q, d_k and d_v are accumulated (+=).
#pragma once

#include "reference/attention_head.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::reference {

// score must carry no sinks: their share is in log_sum_exp already, and their gradient is the caller's.
void attention_block_backward(const ConstMatrixRef& q, const ConstMatrixRef& k, const ConstMatrixRef& v,
                              const MaskSpec& mask, const ScoreSpec& score, const double* log_sum_exp,
                              const double* d_weighted, const ConstMatrixRef& d_context, MatrixRef d_q, MatrixRef d_k,
                              MatrixRef d_v);

}  // namespace attncheck::reference
