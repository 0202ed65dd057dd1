// TpPlan: how one attention layer's heads and weights are cut over tp_size (P) tensor-parallel ranks.
//
// Semantics: Q/K/V are column-parallel, split on whole heads; rank r owns query heads
// [r*H_q/P, (r+1)*H_q/P). P <= H_kv needs H_kv % P == 0 and gives each rank H_kv/P KV heads of its own.
// P > H_kv needs P % H_kv == 0 and replicates each KV head on kv_replicas = P/H_kv consecutive ranks
// (rank r uses KV head r / kv_replicas); those ranks form the head's replica group, the only ranks over
// which its gradients are summed. o_proj is row-parallel: rank r holds the o_proj columns of its query
// heads and the partial outputs are summed. A plan that would need part of a head is rejected.
//
// Multi-head latent attention (core/model/latent_attention.hpp) shards as Megatron-Core, vLLM and SGLang
// do: q_b_proj (or q_proj) and kv_b_proj are column-parallel by head, o_proj row-parallel, and the
// down-projections q_a_proj, kv_a_proj_with_mqa with the latent norms q_a_layernorm, kv_a_layernorm are
// replicated on every rank (each rank computes the whole latent; their gradients are summed over all
// ranks). Its expanded form has a K/V head per query head, so kv_replicas is always 1.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/geometry.hpp"

namespace attncheck {

// Half-open index range [begin, end).
struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

// Parameters one rank holds (elements, not bytes). o_proj bias and the per-head q/k norm weights are
// replicated on every rank (whole-width norm weights shard with their heads); the o_proj bias is added once, after the
// partial outputs are summed.
struct ParamCount {
  std::int64_t qkv_weight = 0;     // fused [qkv_rows, hidden_size]
  std::int64_t qkv_bias = 0;       // [qkv_rows]
  std::int64_t o_proj_weight = 0;  // [hidden_size, query_width]
  std::int64_t o_proj_bias = 0;    // [hidden_size]
  std::int64_t qk_norm = 0;        // q_norm and k_norm: [head_dim] each, or local [query_width] + [kv_width]
  std::int64_t sinks = 0;          // attention sinks, one per (local) query head
  // Latent attention (qkv_weight is then 0): q_a_proj + kv_a_proj_with_mqa (whole on every rank),
  // q_a_layernorm + kv_a_layernorm (whole on every rank), and the head-sharded up-projections q_b_proj
  // (or q_proj) + kv_b_proj.
  std::int64_t latent_down = 0;
  std::int64_t latent_norms = 0;
  std::int64_t latent_up = 0;
  std::int64_t total() const {
    return qkv_weight + qkv_bias + o_proj_weight + o_proj_bias + qk_norm + sinks + latent_down + latent_norms +
           latent_up;
  }
  friend bool operator==(const ParamCount&, const ParamCount&) = default;
};

struct RankPlan {
  int rank = 0;
  IndexRange q_heads;            // global query-head ids
  IndexRange kv_heads;           // global KV-head ids (one id when replicated)
  int replica_group = 0;         // id of the ranks holding the same KV heads
  std::int64_t query_width = 0;  // local q width = q_heads.size() * head_dim
  std::int64_t kv_width = 0;     // local k (and v) width = kv_heads.size() * head_dim
  std::int64_t qkv_rows = 0;     // local fused QKV rows = query_width + 2 * kv_width
  IndexRange q_proj_rows;        // rows of HF q_proj [query_width, hidden] this rank holds
  IndexRange kv_proj_rows;       // rows of HF k_proj and v_proj [kv_width, hidden]
  IndexRange o_proj_columns;     // columns of HF o_proj [hidden, value_width] (= q_proj_rows in a plain layer)
  std::int64_t value_width = 0;  // local context width = o_proj columns (= query_width in a plain layer)
  IndexRange kv_b_proj_rows;     // latent attention: rows of kv_b_proj [num_heads * (nope + v), kv_lora_rank]
  ParamCount params;
  std::int64_t kv_cache_elements_per_token = 0;  // K and V: 2 * kv_width; latent: expanded K and V of its heads
  // Latent attention's absorbed cache, which every rank holds whole (kv_lora_rank + qk_rope_head_dim); 0 otherwise.
  std::int64_t absorbed_cache_elements_per_token = 0;
};

struct ReplicaGroup {
  int id = 0;
  IndexRange kv_heads;  // the KV heads its ranks share
  IndexRange ranks;     // consecutive ranks holding them
};

struct TpPlan {
  Geometry geometry;
  int tp_size = 1;
  int kv_replicas = 1;  // ranks per KV head: P / H_kv when P > H_kv, else 1
  std::vector<RankPlan> ranks;
  std::vector<ReplicaGroup> replica_groups;
  ParamCount unsharded_params;  // the layer without TP
  std::int64_t unsharded_kv_cache_elements_per_token = 0;
  std::int64_t unsharded_absorbed_cache_elements_per_token = 0;  // latent attention only

  ParamCount total_params_over_ranks() const;  // exceeds unsharded_params when anything is replicated
};

// Throws InputError naming tp_size, the constraint it breaks and the valid sizes for this geometry.
TpPlan make_tp_plan(const Geometry& geometry, std::int64_t tp_size);

// Every P that gives a whole-head plan: H_q % P == 0 and (H_kv % P == 0 or P % H_kv == 0).
std::vector<std::int64_t> valid_tp_sizes(const Geometry& geometry);

}  // namespace attncheck
