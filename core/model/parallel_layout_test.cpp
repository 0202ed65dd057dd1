// Context-parallel layouts (parallel_layout.hpp): Ulysses' two-level head split with KV replication, the
// ring's load-balanced chunks and neighbours, the rank numbering, uneven chunking, and refusals that name
// the valid alternatives; and, over a sweep of geometries, the invariants every valid layout keeps.
#include "core/model/parallel_layout.hpp"

#include <gtest/gtest.h>

#include <set>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

Geometry geometry(std::int64_t hidden_size, std::int64_t num_heads, std::int64_t num_kv_heads, std::int64_t head_dim) {
  return resolve_geometry(
      {.hidden_size = hidden_size, .num_heads = num_heads, .num_kv_heads = num_kv_heads, .head_dim = head_dim});
}

std::string rejection(const Geometry& g, std::int64_t tp_size, const CpSpec& cp) {
  try {
    make_parallel_layout(g, tp_size, cp);
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

// Qwen3-0.6B (16 query heads, 8 KV heads) at TP 2 x Ulysses CP 8: each TP rank's 8 query heads split one per
// CP rank, its 4 KV heads each replicated on 2 CP ranks.
TEST(ParallelLayout, UlyssesBeyondTheKvHeadsReplicatesThemInsideTheTpRank) {
  const ParallelLayout layout = make_parallel_layout(geometry(1024, 16, 8, 128), 2, {.cp_size = 8, .scheme = CpScheme::ulysses});
  ASSERT_EQ(layout.ranks.size(), 16u);
  EXPECT_EQ(layout.world_size(), 16);
  EXPECT_EQ(layout.chunk_count, 8);
  EXPECT_EQ(layout.ulysses_kv_replicas, 2);
  const CpRankPlan& r = layout.ranks[2 * 5 + 1];  // cp rank 5 of TP rank 1
  EXPECT_EQ(r.rank, 11);
  EXPECT_EQ(r.tp_rank, 1);
  EXPECT_EQ(r.cp_rank, 5);
  EXPECT_EQ(r.chunks, std::vector<std::int64_t>{5});
  EXPECT_EQ(r.q_heads, (IndexRange{13, 14}));   // TP rank 1 holds query heads 8..15
  EXPECT_EQ(r.kv_heads, (IndexRange{6, 7}));    // and KV heads 4..7; CP ranks 4 and 5 share KV head 6
  EXPECT_EQ(layout.ranks[2 * 4 + 1].kv_heads, (IndexRange{6, 7}));
  EXPECT_EQ(layout.ranks[2 * 4 + 1].kv_group, r.kv_group);
  EXPECT_NE(layout.ranks[2 * 6 + 1].kv_group, r.kv_group);
}

TEST(ParallelLayout, UlyssesWithinTheKvHeadsSplitsThem) {
  const ParallelLayout layout = make_parallel_layout(geometry(1024, 16, 8, 128), 1, {.cp_size = 4, .scheme = CpScheme::ulysses});
  EXPECT_EQ(layout.ulysses_kv_replicas, 1);
  EXPECT_EQ(layout.ranks[3].q_heads, (IndexRange{12, 16}));
  EXPECT_EQ(layout.ranks[3].kv_heads, (IndexRange{6, 8}));
}

TEST(ParallelLayout, RingLoadBalancesTwoChunksPerRankAndNamesItsNeighbours) {
  const ParallelLayout layout = make_parallel_layout(geometry(1024, 16, 8, 128), 2, {.cp_size = 4, .scheme = CpScheme::ring});
  EXPECT_EQ(layout.chunk_count, 8);
  const CpRankPlan& r = layout.ranks[2 * 1 + 0];  // cp rank 1 of TP rank 0
  EXPECT_EQ(r.chunks, (std::vector<std::int64_t>{1, 6}));
  EXPECT_EQ(r.q_heads, (IndexRange{0, 8}));  // the ring keeps its TP rank's heads
  EXPECT_EQ(r.ring_receives_from, 0);        // cp rank 0, same TP rank
  EXPECT_EQ(r.ring_sends_to, 4);             // cp rank 2
  EXPECT_EQ(layout.ranks[2 * 3 + 1].ring_sends_to, 1);  // the last CP rank closes the ring
  const ParallelLayout contiguous = make_parallel_layout(
      geometry(1024, 16, 8, 128), 2, {.cp_size = 4, .scheme = CpScheme::ring, .load_balanced = false});
  EXPECT_EQ(contiguous.chunk_count, 4);
  EXPECT_EQ(contiguous.ranks[2].chunks, std::vector<std::int64_t>{1});
}

TEST(ParallelLayout, UnevenSequencesChunkAsEvenlyAsPossible) {
  EXPECT_EQ(sequence_chunks(10, 4), (std::vector<IndexRange>{{0, 3}, {3, 6}, {6, 8}, {8, 10}}));
  EXPECT_EQ(sequence_chunks(3, 4), (std::vector<IndexRange>{{0, 1}, {1, 2}, {2, 3}, {3, 3}}));  // one empty
  EXPECT_THROW(sequence_chunks(3, 0), InputError);
}

TEST(ParallelLayout, RefusalsNameTheValidAlternatives) {
  const Geometry qwen = geometry(1024, 16, 8, 128);
  // TP 2 leaves 8 query heads and 4 KV heads per rank: Ulysses CP 3 splits neither.
  const std::string text = rejection(qwen, 2, {.cp_size = 3, .scheme = CpScheme::ulysses});
  EXPECT_NE(text.find("cp_size"), std::string::npos) << text;
  EXPECT_NE(text.find("valid Ulysses CP sizes at TP 2: 1, 2, 4, 8"), std::string::npos) << text;
  EXPECT_NE(text.find("--cp-scheme ring"), std::string::npos) << text;
  // Gemma 3 270M (4 heads, 1 KV head) at TP 4: one query head per TP rank, so no Ulysses CP above 1.
  const Geometry gemma = geometry(640, 4, 1, 256);
  const std::string gemma_text = rejection(gemma, 4, {.cp_size = 2, .scheme = CpScheme::ulysses});
  EXPECT_NE(gemma_text.find("TP sizes that admit CP 2: 1, 2"), std::string::npos) << gemma_text;
  EXPECT_NE(rejection(qwen, 2, {.cp_size = 0}).find("cp_size"), std::string::npos);
  EXPECT_NE(rejection(qwen, 2, {.cp_size = kMaxCpSize + 1}).find("must be in [1, 4096]"), std::string::npos);
  // A ring's table has tp x cp rows: 64 TP ranks x 2048 CP ranks is past the world-size bound.
  const Geometry many_heads = geometry(64 * 2, 64, 1, 2);
  EXPECT_NE(rejection(many_heads, 64, {.cp_size = 2048}).find("tp_size x cp_size must be at most 65536"),
            std::string::npos);
  EXPECT_NE(rejection(qwen, 3, {.cp_size = 2}).find("tp_size"), std::string::npos);  // TP's own refusal
}

// Every valid layout of a sweep: each global rank once; every TP rank's CP ranks cover its query heads exactly
// once (Ulysses) or each hold all of them (ring); each rank's query heads read KV heads it holds; every chunk
// of the sequence is held by exactly one CP rank of each TP rank.
TEST(ParallelLayout, EveryValidLayoutCoversHeadsAndChunksExactlyOnce) {
  int layouts = 0;
  for (const auto& [heads, kv_heads] : std::vector<std::pair<std::int64_t, std::int64_t>>{{16, 8}, {12, 4}, {8, 1}, {6, 6}, {32, 2}}) {
    const Geometry g = geometry(heads * 8, heads, kv_heads, 8);
    for (const std::int64_t tp : valid_tp_sizes(g)) {
      for (const CpScheme scheme : {CpScheme::ulysses, CpScheme::ring}) {
        for (const std::int64_t cp : valid_cp_sizes(make_tp_plan(g, tp), scheme, 16)) {
          const ParallelLayout layout = make_parallel_layout(g, tp, {.cp_size = cp, .scheme = scheme});
          ++layouts;
          std::set<int> ranks;
          for (const CpRankPlan& r : layout.ranks) ranks.insert(r.rank);
          EXPECT_EQ(static_cast<std::int64_t>(ranks.size()), tp * cp);
          for (std::int64_t t = 0; t < tp; ++t) {
            std::multiset<std::int64_t> chunks, q_heads;
            for (const CpRankPlan& r : layout.ranks) {
              if (r.tp_rank != t) continue;
              chunks.insert(r.chunks.begin(), r.chunks.end());
              for (std::int64_t h = r.q_heads.begin; h < r.q_heads.end; ++h) {
                q_heads.insert(h);
                const std::int64_t kv = h / g.group_size();
                EXPECT_TRUE(kv >= r.kv_heads.begin && kv < r.kv_heads.end) << "rank " << r.rank << " head " << h;
              }
            }
            EXPECT_EQ(static_cast<std::int64_t>(chunks.size()), layout.chunk_count);
            EXPECT_EQ(std::set<std::int64_t>(chunks.begin(), chunks.end()).size(), chunks.size());
            const std::int64_t copies = scheme == CpScheme::ring ? cp : 1;
            EXPECT_EQ(static_cast<std::int64_t>(q_heads.size()), copies * heads / tp);
          }
        }
      }
    }
  }
  EXPECT_GT(layouts, 100);
}

}  // namespace
}  // namespace attncheck
