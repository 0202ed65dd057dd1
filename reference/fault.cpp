#include "reference/fault.hpp"

#include <algorithm>

#include "core/tp/tp_shard.hpp"

namespace attncheck::reference {

std::string_view to_string(Fault fault) {
  switch (fault) {
    case Fault::none:
      return "none";
    case Fault::top_left_causal:
      return "top-left-causal";
    case Fault::causal_off_by_one:
      return "causal-off-by-one";
    case Fault::rank_local_keys:
      return "rank-local-keys";
    case Fault::qk_norm_over_heads:
      return "qk-norm-over-heads";
    case Fault::softmax_without_max:
      return "softmax-without-max";
    case Fault::gqa_kv_grad_last_head_only:
      return "gqa-kv-grad-last-head-only";
    case Fault::replicated_kv_grad_unsummed:
      return "replicated-kv-grad-unsummed";
    case Fault::kv_grad_summed_over_all_ranks:
      return "kv-grad-summed-over-all-ranks";
    case Fault::o_bias_every_rank:
      return "o-bias-every-rank";
  }
  return "unknown";
}

namespace {

void add_into(Tensor& sum, const Tensor& term) {
  std::transform(sum.values.begin(), sum.values.end(), term.values.begin(), sum.values.begin(), std::plus<>());
}

// The KV tensors a reduction fault touches, as pointers into one Parameters.
std::vector<Tensor*> kv_tensors(Parameters& p) {
  std::vector<Tensor*> tensors{&p.k_proj, &p.v_proj};
  if (p.k_bias) tensors.push_back(&*p.k_bias);
  if (p.v_bias) tensors.push_back(&*p.v_bias);
  return tensors;
}

}  // namespace

FaultyReduction reduce_with_fault(Fault fault, const std::vector<Parameters>& rank_partials, const TpPlan& plan,
                                  const Parameters& correct_full) {
  FaultyReduction reduction{.rank_gradients = reduce_rank_gradients(rank_partials, plan), .full = correct_full};
  std::vector<Parameters> partials = rank_partials;  // mutable copies to point into
  if (fault == Fault::kv_grad_summed_over_all_ranks) {
    // Every rank holds the same number of KV rows, so the all-rank sum type-checks: it just adds
    // different heads' gradients together.
    Parameters total = partials[0];
    for (std::size_t r = 1; r < partials.size(); ++r) {
      const std::vector<Tensor*> sum = kv_tensors(total);
      const std::vector<Tensor*> term = kv_tensors(partials[r]);
      for (std::size_t i = 0; i < sum.size(); ++i) add_into(*sum[i], *term[i]);
    }
    for (Parameters& p : partials) p = total;
  }
  if (fault == Fault::kv_grad_summed_over_all_ranks || fault == Fault::replicated_kv_grad_unsummed) {
    for (std::size_t r = 0; r < partials.size(); ++r) {
      const std::vector<Tensor*> target = kv_tensors(reduction.rank_gradients[r]);
      const std::vector<Tensor*> source = kv_tensors(partials[r]);
      for (std::size_t i = 0; i < target.size(); ++i) *target[i] = *source[i];
    }
  }
  // Gather: each KV head's rows from the first rank of its replica group (ranks in reverse, so the
  // first rank writes last).
  const std::int64_t hidden = plan.geometry.hidden_size();
  for (int r = plan.tp_size - 1; r >= 0; --r) {
    const IndexRange rows = plan.ranks[r].kv_proj_rows;
    Parameters& full = reduction.full;
    const Parameters& rank = reduction.rank_gradients[r];
    std::copy(rank.k_proj.values.begin(), rank.k_proj.values.end(), full.k_proj.values.begin() + rows.begin * hidden);
    std::copy(rank.v_proj.values.begin(), rank.v_proj.values.end(), full.v_proj.values.begin() + rows.begin * hidden);
    if (full.k_bias)
      std::copy(rank.k_bias->values.begin(), rank.k_bias->values.end(), full.k_bias->values.begin() + rows.begin);
    if (full.v_bias)
      std::copy(rank.v_bias->values.begin(), rank.v_bias->values.end(), full.v_bias->values.begin() + rows.begin);
  }
  return reduction;
}

}  // namespace attncheck::reference
