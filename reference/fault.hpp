// Deliberate bugs for the mutant catalog (properties/mutants/). Each is one branch at the place a real
// implementation made the mistake, so a mutant is the reference with exactly one bug, in the forward
// and backward passes alike (as autograd would give it). Fault::none, the default, everywhere else:
// the oracle never runs with a fault, and a faulted run skips the oracle's finiteness check (a
// mutant's NaN is for the comparison to catch).
#pragma once

#include <string_view>

namespace attncheck::reference {

enum class Fault {
  none,
  top_left_causal,                // causal mask aligned top-left when seq_q != seq_k (KV-cache decoding)
  causal_off_by_one,              // query i also sees key i + 1
  rank_local_keys,                // rank r of P attends only to keys [r * seq_k / P, (r + 1) * seq_k / P)
  qk_norm_over_heads,             // RMS over all of a token's heads x head_dim instead of per head
  softmax_without_max,            // exp(score) without subtracting the row maximum: overflows
  gqa_kv_grad_last_head_only,     // dK/dV overwritten by each query head of a group, not accumulated
  replicated_kv_grad_unsummed,    // a replicated KV head's gradient not summed over its replica group
  kv_grad_summed_over_all_ranks,  // KV gradients all-reduced over every rank, not over the replica group
  o_bias_every_rank,              // o_bias added by every rank before the partial outputs are summed
};

std::string_view to_string(Fault fault);

// Where a faulted computation runs: the rank, for faults that depend on it.
struct FaultSite {
  Fault fault = Fault::none;
  int rank = 0;
  int tp_size = 1;
  bool is(Fault candidate) const { return fault == candidate; }
};

}  // namespace attncheck::reference

#include <vector>

#include "core/model/parameters.hpp"
#include "core/model/tp_plan.hpp"

namespace attncheck::reference {

// The KV-gradient reduction faults (replicated_kv_grad_unsummed, kv_grad_summed_over_all_ranks) applied
// to every rank's partial gradients: each rank's reduced gradients as the faulty all-reduce leaves them,
// and the full-layer gradients as gathered from the first rank holding each KV head.
struct FaultyReduction {
  std::vector<Parameters> rank_gradients;
  Parameters full;
};
FaultyReduction reduce_with_fault(Fault fault, const std::vector<Parameters>& rank_partials, const TpPlan& plan,
                                  const Parameters& correct_full);

}  // namespace attncheck::reference
