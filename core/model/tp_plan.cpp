#include "core/model/tp_plan.hpp"

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "core/errors/nearby.hpp"

namespace attncheck {

ParamCount TpPlan::total_params_over_ranks() const {
  ParamCount sum;
  for (const RankPlan& rank : ranks) {
    sum.qkv_weight += rank.params.qkv_weight;
    sum.qkv_bias += rank.params.qkv_bias;
    sum.o_proj_weight += rank.params.o_proj_weight;
    sum.o_proj_bias += rank.params.o_proj_bias;
    sum.qk_norm += rank.params.qk_norm;
    sum.sinks += rank.params.sinks;
    sum.latent_down += rank.params.latent_down;
    sum.latent_norms += rank.params.latent_norms;
    sum.latent_up += rank.params.latent_up;
  }
  return sum;
}

std::vector<std::int64_t> valid_tp_sizes(const Geometry& geometry) {
  std::vector<std::int64_t> sizes;
  const std::int64_t num_kv_heads = geometry.num_kv_heads();
  for (std::int64_t p : divisors(geometry.num_heads())) {
    if (num_kv_heads % p == 0 || p % num_kv_heads == 0) sizes.push_back(p);
  }
  return sizes;
}

namespace {

// The rule a tp_size breaks, or empty when it gives a whole-head plan.
std::string broken_tp_rule(const Geometry& geometry, std::int64_t tp_size) {
  const std::int64_t num_heads = geometry.num_heads();
  const std::int64_t num_kv_heads = geometry.num_kv_heads();
  if (tp_size < 1) return "must be >= 1";
  if (num_heads % tp_size != 0) {
    return fmt::format(
        "would split a query head: num_heads ({}) must be divisible by tp_size "
        "({:.4g} query heads per rank)",
        num_heads, static_cast<double>(num_heads) / static_cast<double>(tp_size));
  }
  if (tp_size <= num_kv_heads && num_kv_heads % tp_size != 0) {
    return fmt::format(
        "would split a KV head: with tp_size <= num_kv_heads ({}), num_kv_heads must be "
        "divisible by tp_size ({:.4g} KV heads per rank)",
        num_kv_heads, static_cast<double>(num_kv_heads) / static_cast<double>(tp_size));
  }
  if (tp_size > num_kv_heads && tp_size % num_kv_heads != 0) {
    return fmt::format(
        "cannot replicate KV heads evenly: with tp_size > num_kv_heads ({}), tp_size must "
        "be a multiple of num_kv_heads ({:.4g} ranks per KV head)",
        num_kv_heads, static_cast<double>(tp_size) / static_cast<double>(num_kv_heads));
  }
  return {};
}

// Latent attention: the parameters of a rank holding `heads` query heads (the whole layer: num_heads).
ParamCount latent_params_for(const Geometry& geometry, std::int64_t heads) {
  const LatentAttentionSpec& latent = *geometry.latent();
  const std::int64_t hidden = geometry.hidden_size();
  ParamCount params;
  params.o_proj_weight = hidden * heads * latent.v_head_dim;
  params.sinks = geometry.attention_sinks() ? heads : 0;
  const std::int64_t q_rows = heads * latent.qk_head_dim();
  params.latent_down = latent.kv_a_rows() * hidden + (latent.q_lora_rank ? *latent.q_lora_rank * hidden : 0);
  params.latent_norms = latent.kv_lora_rank + latent.q_lora_rank.value_or(0);
  params.latent_up = heads * latent.kv_b_rows_per_head() * latent.kv_lora_rank +
                     q_rows * (latent.q_lora_rank ? *latent.q_lora_rank : hidden);
  return params;
}

ParamCount params_for(const Geometry& geometry, std::int64_t qkv_rows, std::int64_t query_width) {
  if (geometry.is_latent()) return latent_params_for(geometry, query_width / geometry.head_dim());
  ParamCount params;
  params.qkv_weight = qkv_rows * geometry.hidden_size();
  params.qkv_bias = geometry.qkv_bias() ? qkv_rows : 0;
  params.o_proj_weight = geometry.hidden_size() * query_width;
  params.o_proj_bias = geometry.out_bias() ? geometry.hidden_size() : 0;
  if (geometry.qk_norm_full_width()) {  // a weight per channel of the local q and k: query_width + kv_width
    params.qk_norm = query_width + (qkv_rows - query_width) / 2;
  } else {
    params.qk_norm = geometry.qk_norm() == QkNorm::none ? 0 : 2 * geometry.head_dim();
  }
  params.sinks = geometry.attention_sinks() ? query_width / geometry.head_dim() : 0;
  return params;
}

}  // namespace

TpPlan make_tp_plan(const Geometry& geometry, std::int64_t tp_size) {
  if (std::string rule = broken_tp_rule(geometry, tp_size); !rule.empty()) {
    const std::vector<std::int64_t> valid = valid_tp_sizes(geometry);
    throw InputError("invalid tensor-parallel plan",
                     {{"tp_size", std::to_string(tp_size), rule,
                       fmt::format("valid tp_size for num_heads {} and num_kv_heads {}: {}", geometry.num_heads(),
                                   geometry.num_kv_heads(), join(valid))}});
  }
  const int ranks = static_cast<int>(tp_size);
  const std::int64_t head_dim = geometry.head_dim();
  const std::int64_t q_heads_per_rank = geometry.num_heads() / tp_size;
  const bool replicated = tp_size > geometry.num_kv_heads();
  const int kv_replicas = replicated ? static_cast<int>(tp_size / geometry.num_kv_heads()) : 1;
  const std::int64_t kv_heads_per_rank = replicated ? 1 : geometry.num_kv_heads() / tp_size;

  TpPlan plan{.geometry = geometry, .tp_size = ranks, .kv_replicas = kv_replicas};
  plan.unsharded_params = params_for(geometry, geometry.qkv_width(), geometry.query_width());
  plan.unsharded_kv_cache_elements_per_token = 2 * geometry.kv_width();
  const std::optional<LatentAttentionSpec>& latent = geometry.latent();
  if (latent) {
    plan.unsharded_kv_cache_elements_per_token = latent->expanded_cache_elements(geometry.num_heads());
    plan.unsharded_absorbed_cache_elements_per_token = latent->absorbed_cache_elements();
  }
  const std::int64_t v_head_dim = geometry.v_head_dim();

  for (int group = 0; group < ranks / kv_replicas; ++group) {
    plan.replica_groups.push_back({.id = group,
                                   .kv_heads = {group * kv_heads_per_rank, (group + 1) * kv_heads_per_rank},
                                   .ranks = {group * kv_replicas, (group + 1) * kv_replicas}});
  }
  for (int r = 0; r < ranks; ++r) {
    RankPlan rank;
    rank.rank = r;
    rank.replica_group = r / kv_replicas;
    rank.q_heads = {r * q_heads_per_rank, (r + 1) * q_heads_per_rank};
    rank.kv_heads = plan.replica_groups[rank.replica_group].kv_heads;
    rank.query_width = q_heads_per_rank * head_dim;
    rank.kv_width = kv_heads_per_rank * head_dim;
    rank.qkv_rows = rank.query_width + 2 * rank.kv_width;
    rank.q_proj_rows = {rank.q_heads.begin * head_dim, rank.q_heads.end * head_dim};
    rank.kv_proj_rows = {rank.kv_heads.begin * head_dim, rank.kv_heads.end * head_dim};
    rank.o_proj_columns = {rank.q_heads.begin * v_head_dim, rank.q_heads.end * v_head_dim};
    rank.value_width = rank.o_proj_columns.size();
    rank.params = params_for(geometry, rank.qkv_rows, rank.query_width);
    rank.kv_cache_elements_per_token = 2 * rank.kv_width;
    if (latent) {
      rank.qkv_rows = 0;  // no fused QKV: q_b_proj and kv_b_proj are separate
      rank.kv_b_proj_rows = {rank.q_heads.begin * latent->kv_b_rows_per_head(),
                             rank.q_heads.end * latent->kv_b_rows_per_head()};
      rank.kv_cache_elements_per_token = latent->expanded_cache_elements(q_heads_per_rank);
      rank.absorbed_cache_elements_per_token = latent->absorbed_cache_elements();
    }
    plan.ranks.push_back(rank);
  }
  return plan;
}

}  // namespace attncheck
