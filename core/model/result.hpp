// Result: what an implementation returns for a Case. Every tensor is fp64, whatever the implementation
// computed in. A comparison needs two Results' tensors (named_tensors()), the Case (for shapes and
// localisation) and, below fp64, the yardstick's errors (core/compare/compare.hpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/parameters.hpp"
#include "core/model/tensor.hpp"

namespace attncheck {

// Gradients of the loss sum(out * dout) with respect to every input and parameter.
struct Gradients {
  Tensor x;           // [batch, seq, hidden_size]
  Parameters params;  // same layout and presence as the weights

  friend bool operator==(const Gradients&, const Gradients&) = default;
};

// Values inside the layer, for localising a difference (all row-major).
struct Intermediates {
  Tensor q;        // [batch, num_heads, seq, head_dim]     after bias, QK-norm and RoPE
  Tensor k;        // [batch, num_kv_heads, seq, head_dim]  after bias, QK-norm and RoPE
  Tensor v;        // [batch, num_kv_heads, seq, head_dim]  after bias
  Tensor context;  // [batch, seq, query_width]             softmax(scores) v per head, heads in order
  Tensor lse;      // [batch, num_heads, seq]               log-sum-exp of the (capped) scores and the
                   //                                       head's sink; -inf (or the sink) when the
                   //                                       query sees no key

  friend bool operator==(const Intermediates&, const Intermediates&) = default;
};

// Parts of a case an implementation declines, each with its reason (golden/SCHEMA.md, "Candidate
// files"): a part is a tensor name as under /expected, or a prefix of such names ending at a '/'
// ("decode" declines decode/out, "ranks" every per-rank gradient, "ranks/3/grads/k_norm" one tensor).
// `out` is never declined: an implementation that cannot produce it does not support the case.
using DeclinedParts = std::map<std::string, std::string>;  // part -> reason

struct Result {
  std::string implementation;                  // "reference", "reference-tp", ...
  Tensor out;                                  // [batch, seq, hidden_size]
  std::optional<Gradients> gradients;          // absent when only the forward ran
  std::optional<Intermediates> intermediates;  // absent unless asked for
  // KV-cache decoding of inputs.decode: rows 0 .. decode.total()-1 of out, produced by the prefill call
  // and then the steps. [batch, decode.total(), hidden_size]; absent without a schedule.
  std::optional<Tensor> decode_out;
  // Sharded implementations only (reference-tp, torch-*, cuda-*-tp, the emulated and naive layers): per
  // rank, the gradients of that rank's shard as a TP trainer holds them after
  // its all-reduces: a replicated KV head's gradient summed over its replica group, q_norm/k_norm
  // gradients summed over all ranks, o_bias's (added once, after the o_proj partials are summed)
  // the full gradient on every rank. Shard layout: core/tp/tp_shard.hpp.
  std::vector<Parameters> rank_gradients;
  // What it declined to compute, with reasons: reported as declined, never as passing, never silently
  // absent (core/compare/compare.hpp). attncheck's own implementations decline nothing.
  DeclinedParts declined;
};

}  // namespace attncheck
