// ParallelLayout: tensor parallelism (TP, tp_plan.hpp) combined with context parallelism (CP), which splits
// the sequence over cp_size ranks inside each TP rank, by one of the two schemes frameworks ship:
//
//   ulysses (DeepSpeed-Ulysses, Megatron-Core's "a2a"): each CP rank holds a chunk of the sequence for the
//     projections and o_proj; an all-to-all turns the chunks into all tokens of a 1/cp_size part of its TP
//     rank's heads, attention runs per head group, and a second all-to-all returns the context to the chunks.
//     The TP rank's query heads split evenly ((H_q / P) % CP == 0); its KV heads split evenly too, or, when CP
//     exceeds them, each is replicated on CP / H_kv_local consecutive CP ranks (CP % H_kv_local == 0): the
//     same replication question as TP above the KV heads, one level down. Anything else needs part of a head.
//   ring (ring attention, Megatron-Core's context parallel "p2p"): each CP rank keeps its query chunk and its
//     heads; the K/V chunks travel around the ring (CP rank c receives from c - 1 and sends to c + 1, mod CP)
//     and the partial results merge by their log-sum-exp. Load-balanced (Megatron's causal balancing): the
//     sequence is cut into 2 CP chunks and CP rank c holds chunks c and 2 CP - 1 - c; contiguous: CP chunks,
//     rank c holds chunk c.
//
// Ranks are numbered as Megatron-Core's default order (tp-cp-ep-dp-pp) numbers them, TP fastest: global rank
// = cp_rank * tp_size + tp_rank. A sequence of any length is cut into chunk_count chunks as evenly as possible
// (sequence_chunks: the first seq % chunk_count chunks are one token longer), so chunk edges need not be
// multiples of anything; frameworks that require multiples pad, which masks the same keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/model/tp_plan.hpp"

namespace attncheck {

enum class CpScheme { ulysses, ring };

std::string_view to_string(CpScheme scheme);
std::optional<CpScheme> parse_cp_scheme(std::string_view text);  // "ulysses" or "ring"

// The largest CP size and world size (tp_size x cp_size) a layout is built for: its table has a row per rank,
// and no job runs more (Megatron-Core's largest published context-parallel runs use tens of CP ranks).
inline constexpr std::int64_t kMaxCpSize = 4096;
inline constexpr std::int64_t kMaxWorldSize = 65536;

struct CpSpec {
  std::int64_t cp_size = 1;
  CpScheme scheme = CpScheme::ring;
  bool load_balanced = true;  // ring only: 2 CP chunks, rank c holding c and 2 CP - 1 - c
  friend bool operator==(const CpSpec&, const CpSpec&) = default;
};

struct CpRankPlan {
  int rank = 0;  // global: cp_rank * tp_size + tp_rank
  int tp_rank = 0;
  int cp_rank = 0;
  std::vector<std::int64_t> chunks;  // the sequence chunks whose tokens it projects (ascending)
  IndexRange q_heads;                // global query heads it attends for (ring: its TP rank's all)
  IndexRange kv_heads;               // global KV heads it attends with
  int kv_group = 0;  // Ulysses: id of the CP ranks (of its TP rank) sharing its KV heads; ring: its TP rank's group
  int ring_receives_from = 0;  // ring: the global rank whose K/V chunks it receives each step; else itself
  int ring_sends_to = 0;       // ring: the global rank it passes K/V chunks to; else itself
};

struct ParallelLayout {
  TpPlan tp;
  CpSpec cp;
  std::int64_t chunk_count = 1;   // CP, or 2 CP for a load-balanced ring
  int ulysses_kv_replicas = 1;    // Ulysses: CP ranks per KV head within a TP rank (1 unless CP > its KV heads)
  std::vector<CpRankPlan> ranks;  // tp_size * cp_size, in global rank order
  std::int64_t world_size() const { return tp.tp_size * cp.cp_size; }
};

// Throws InputError naming the field, the constraint it breaks and the valid alternatives (the valid CP sizes
// for this TP size and scheme, or the TP sizes that admit this CP size).
ParallelLayout make_parallel_layout(const Geometry& geometry, std::int64_t tp_size, const CpSpec& cp);

// The CP sizes up to `limit` that a scheme admits on this TP plan (ring: all of them; Ulysses: none above the
// TP rank's query heads, so its list is whole whatever the limit beyond them).
std::vector<std::int64_t> valid_cp_sizes(const TpPlan& plan, CpScheme scheme, std::int64_t limit = 64);

// Token ranges of chunk_count chunks of a seq-token sequence, in order: the first seq % chunk_count are one
// token longer; chunks are empty when seq < chunk_count. InputError for chunk_count < 1 or seq < 0.
std::vector<IndexRange> sequence_chunks(std::int64_t seq, std::int64_t chunk_count);

}  // namespace attncheck
