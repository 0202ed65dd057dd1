// Fused QKV row layouts per TP rank: which rows of a rank's fused weight [qkv_rows, hidden_size] come
// from which rows of HF's separate q_proj / k_proj / v_proj. Every layout has the same row count
// (query_width + 2 * kv_width locally); only the order differs, and a wrong order is a silent bug.
//
//   stacked  [Q | K | V]: all local query heads, then the local K heads, then the local V heads
//            (vLLM's QKVParallelLinear).
//   grouped  per local KV head g: [q heads of g ... | k_g | v_g] (Megatron-Core's linear_qkv).
//   neox     GPT-NeoX's ParallelSelfAttention as its code splits the fused output today (since
//            EleutherAI/gpt-neox#1315, "fix a GQA issue", merged November 2024; its HF converters
//            follow since #1345): multi-head attention (g = 1) per head, [q_i | k_i | v_i] (view as
//            [heads, 3 * head_dim], split in three); grouped-query attention [Q | K | V] of the rank's
//            own heads (torch.split by local query width, local KV width, local KV width). No KV
//            replication: NeoX divides num_kv_heads by tp_size.
//   neox-before-1315  the order GPT-NeoX's gqa_project read before #1315, for checkpoints trained
//            then: per local query head i, [q_i | head_dim/g rows of K | head_dim/g rows of V], the K (V)
//            slices of consecutive query heads concatenating to the local K (V) heads; for MHA the same
//            as neox. Only where that code ran: no KV replication, and head_dim * (1 + 2/g) and
//            head_dim / g exact in its float arithmetic (head_dim 120 with g = 3 is not). Reading a
//            checkpoint of one order as the other is the #1315 bug (mutant-gpt-neox-1315-gqa-fused-split).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/tp_plan.hpp"

namespace attncheck {

enum class FusedQkvLayout { stacked, grouped, neox, neox_before_1315 };
enum class Projection { q, k, v };

inline constexpr FusedQkvLayout kAllFusedQkvLayouts[] = {FusedQkvLayout::stacked, FusedQkvLayout::grouped,
                                                         FusedQkvLayout::neox, FusedQkvLayout::neox_before_1315};

std::string_view to_string(FusedQkvLayout layout);  // "stacked" | "grouped" | "neox" | "neox-before-1315"
std::string_view to_string(Projection projection);  // "q" | "k" | "v"

// A run of consecutive rows of one head of one projection.
struct FusedRowSegment {
  Projection projection = Projection::q;
  std::int64_t head = 0;   // global head id (query head for q, KV head for k and v)
  IndexRange local_rows;   // rows of the rank's fused weight
  IndexRange source_rows;  // rows of HF q_proj (q) or k_proj / v_proj (k, v)
  friend bool operator==(const FusedRowSegment&, const FusedRowSegment&) = default;
};

// Why this plan cannot be laid out this way, or nullopt when it can.
std::optional<std::string> fused_layout_unsupported(const TpPlan& plan, FusedQkvLayout layout);

// The segments of one rank, in local row order, covering [0, qkv_rows) without gaps.
// Throws InputError when fused_layout_unsupported() names a reason.
std::vector<FusedRowSegment> fused_qkv_segments(const TpPlan& plan, int rank, FusedQkvLayout layout);

}  // namespace attncheck
