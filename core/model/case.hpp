// Case: everything an implementation needs to run one attention layer: the geometry and
// its TP plan, the inputs, and the weights in Hugging Face layout (core/model/parameters.hpp).
//
// Conventions every implementation follows:
// - Self-attention over the whole sequence: seq_q = seq_k = seq. Query i sees key j when
//     j < key_lengths[b]                          (key padding: the padded keys sit at the end)
//     j <= i                                      (if causal)
//     j > i - sliding_window                      (if the geometry has a window)
//   Masks use sequence indices, never position ids; position ids only feed RoPE.
//   When fewer queries than keys are run (KV-cache decoding), query i is aligned bottom-right:
//   it is key index i + seq_k - seq_q. A query that sees no key outputs 0.
// - Positions are RoPE position ids, arbitrary non-negative integers below 2^31 (large offsets are
//   allowed on purpose: RoPE conventions agree at position 0 and drift with distance).
// - The loss whose gradients a Result holds is sum(out * dout).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/model/parallel_layout.hpp"
#include "core/model/parameters.hpp"
#include "core/model/tensor.hpp"
#include "core/model/tp_plan.hpp"

namespace attncheck {

inline constexpr std::int64_t kMaxPosition = (std::int64_t{1} << 31) - 1;

// KV-cache decoding: one call over the first `prefill` tokens, then one call per step over the next
// steps[i] tokens (all batch rows advance together). Empty when prefill == 0 and there are no steps.
struct DecodeSchedule {
  std::int64_t prefill = 0;
  std::vector<std::int64_t> steps;

  std::int64_t total() const;  // tokens decoded: prefill + sum(steps)
  // The calls in order, tokens per call: the prefill (when > 0), then each step.
  std::vector<std::int64_t> calls() const;
  bool empty() const { return prefill == 0 && steps.empty(); }
  friend bool operator==(const DecodeSchedule&, const DecodeSchedule&) = default;
};

struct Inputs {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  Tensor x;                               // [batch, seq, hidden_size]
  std::vector<std::int64_t> positions;    // [batch, seq] RoPE position id of every token
  std::vector<std::int64_t> key_lengths;  // [batch] keys j >= key_lengths[b] are padding
  Tensor dout;                            // [batch, seq, hidden_size] upstream gradient of out
  DecodeSchedule decode;                  // optional; total() <= seq

  friend bool operator==(const Inputs&, const Inputs&) = default;
};

struct Case {
  TpPlan plan;  // plan.geometry is the case's geometry; plan.tp_size the ranks a sharded implementation runs
  Inputs inputs;
  Parameters weights;  // unsharded, HF layout
  // The context-parallel layout over the TP plan that a context-parallel implementation runs
  // (parallel_layout.hpp); absent: none. It changes no expected tensor: the layer computes the same.
  std::optional<CpSpec> context_parallel;

  const Geometry& geometry() const { return plan.geometry; }
};

// Throws InputError listing every problem: tensor shapes that do not match the geometry, non-finite
// values, positions outside [0, 2^31), key lengths outside [0, seq], a decode schedule longer than
// seq, with empty steps, or on a non-causal geometry, or a context-parallel layout the plan cannot take.
void validate_case(const Case& test_case);
// The same but for the weights, which the case holds none of (a golden read for its answers alone, its
// generated weights left out: golden::GeneratedWeights).
void validate_case_but_weights(const Case& test_case);

}  // namespace attncheck
