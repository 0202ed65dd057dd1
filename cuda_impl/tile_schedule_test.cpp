// The kernels' tile logic on the CPU: visible_keys equals the reference's MaskSpec, classify_tile and
// key_tiles never drop a visible (query, key) pair nor mark a tile full that holds a masked one, and
// the split-KV pieces cover each query's keys exactly once. Exhaustive over small shapes.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "cuda_impl/tile_schedule.hpp"
#include "reference/attention_head.hpp"

namespace attncheck::cuda_impl {
namespace {

struct Shape {
  std::int32_t seq_q, seq_k, key_length, window;
  bool causal;
};

// Every shape with seq_q <= seq_k <= 9 (seq_q == seq_k too when not causal), every padding length and
// window in [0, 5].
std::vector<Shape> small_shapes() {
  std::vector<Shape> shapes;
  for (std::int32_t seq_k = 1; seq_k <= 9; ++seq_k) {
    for (std::int32_t seq_q = 1; seq_q <= seq_k; ++seq_q) {
      for (std::int32_t key_length = 1; key_length <= seq_k; ++key_length) {
        for (std::int32_t window = 0; window <= 5; ++window) {
          for (const bool causal : {true, false}) shapes.push_back({seq_q, seq_k, key_length, window, causal});
        }
      }
    }
  }
  return shapes;
}

MaskShape mask_of(const Shape& shape) {
  return {.seq_q = shape.seq_q,
          .seq_k = shape.seq_k,
          .key_length = shape.key_length,
          .causal = shape.causal,
          .window = shape.window};
}

bool sees(const MaskShape& mask, std::int32_t query, std::int32_t key) {
  const KeyRange range = visible_keys(mask, query);
  return range.begin <= key && key < range.end;
}

TEST(TileSchedule, VisibleKeysEqualTheReferenceMask) {
  for (const Shape& shape : small_shapes()) {
    const reference::MaskSpec reference_mask{
        .key_offset = shape.seq_k - shape.seq_q,
        .key_length = shape.key_length,
        .key_count = shape.seq_k,
        .causal = shape.causal,
        .window = shape.window > 0 ? std::optional<std::int64_t>(shape.window) : std::nullopt};
    for (std::int32_t query = 0; query < shape.seq_q; ++query) {
      const KeyRange ours = visible_keys(mask_of(shape), query);
      const reference::KeyInterval theirs = reference_mask.visible_keys(query);
      if (theirs.end <= theirs.begin) {
        EXPECT_TRUE(ours.empty()) << "query " << query;
      } else {
        EXPECT_EQ(ours.begin, theirs.begin) << "query " << query;
        EXPECT_EQ(ours.end, theirs.end) << "query " << query;
      }
    }
  }
}

TEST(TileSchedule, TilesKeepEveryVisiblePairAndMarkOnlyFullTilesFull) {
  int partial = 0, full = 0, skipped = 0;
  for (const Shape& shape : small_shapes()) {
    const MaskShape mask = mask_of(shape);
    for (const std::int32_t block_q : {1, 2, 3, 4}) {
      for (const std::int32_t block_k : {1, 2, 3, 4}) {
        for (std::int32_t query_begin = 0; query_begin < shape.seq_q; query_begin += block_q) {
          const std::int32_t query_end = std::min(query_begin + block_q, shape.seq_q);
          const TileRange tiles = key_tiles(mask, query_begin, query_end, block_k);
          for (std::int32_t key_begin = 0; key_begin < shape.seq_k; key_begin += block_k) {
            const std::int32_t key_end = std::min(key_begin + block_k, shape.seq_k);
            bool any = false, all = true;
            for (std::int32_t q = query_begin; q < query_end; ++q) {
              for (std::int32_t k = key_begin; k < key_end; ++k) {
                if (sees(mask, q, k)) {
                  any = true;
                } else {
                  all = false;
                }
              }
            }
            const std::int32_t tile = key_begin / block_k;
            const bool in_range = tiles.first <= tile && tile < tiles.last;
            const TileKind kind = classify_tile(mask, query_begin, query_end, key_begin, key_end);
            ASSERT_TRUE(!any || in_range) << "a visible pair outside key_tiles()";
            ASSERT_EQ(kind == TileKind::skip, !any) << "skip must mean no visible pair";
            ASSERT_EQ(kind == TileKind::full, any && all) << "full must mean every pair visible";
            (kind == TileKind::skip ? skipped : kind == TileKind::full ? full : partial) += 1;
          }
        }
      }
    }
  }
  EXPECT_GT(partial, 0);  // the shapes exercise all three kinds
  EXPECT_GT(full, 0);
  EXPECT_GT(skipped, 0);
}

TEST(TileSchedule, SplitKvPiecesCoverEachQuerysKeysOnce) {
  for (const Shape& shape : small_shapes()) {
    const MaskShape mask = mask_of(shape);
    for (std::int32_t query = 0; query < shape.seq_q; ++query) {
      const KeyRange keys = visible_keys(mask, query);
      for (const std::int32_t num_splits : {1, 2, 3, 7}) {
        for (const std::int32_t block_k : {1, 2, 4}) {
          std::int32_t next = keys.begin;
          for (std::int32_t split = 0; split < num_splits; ++split) {
            const KeyRange piece = split_keys(keys, num_splits, split, block_k);
            if (piece.empty()) continue;
            ASSERT_EQ(piece.begin, next);
            next = piece.end;
          }
          if (!keys.empty()) {
            ASSERT_EQ(next, keys.end);
          }
        }
      }
    }
  }
}

TEST(TileSchedule, DecodeSplitsFillTheDeviceWithoutEmptyPieces) {
  EXPECT_EQ(decode_splits(1, 16384, 32, 132), 256);  // one (batch, KV head): ~two waves, 2 blocks a piece
  EXPECT_EQ(decode_splits(8 * 8, 16384, 32, 132), 5);
  EXPECT_EQ(decode_splits(1000, 16384, 32, 132), 1);  // the grid is full already
  EXPECT_EQ(decode_splits(1, 40, 32, 132), 2);        // never more pieces than key blocks
  EXPECT_EQ(decode_splits(0, 1, 32, 132), 1);
  for (const std::int32_t other_blocks : {1, 3, 17, 40, 100}) {
    for (std::int32_t seq_k = 1; seq_k < 2000; seq_k += 7) {
      const std::int32_t splits = decode_splits(other_blocks, seq_k, 32, 132);
      const KeyRange keys{0, seq_k};
      for (std::int32_t split = 0; split < splits; ++split) {
        ASSERT_FALSE(split_keys(keys, splits, split, 32).empty())
            << "other_blocks " << other_blocks << " seq_k " << seq_k << " split " << split << " of " << splits;
      }
    }
  }
}

TEST(GqaIndex, EveryQueryHeadReadsTheKvHeadOfItsGroup) {
  for (std::int32_t num_kv_heads = 1; num_kv_heads <= 8; ++num_kv_heads) {
    for (std::int32_t group_size = 1; group_size <= 8; ++group_size) {
      std::vector<int> readers(num_kv_heads, 0);
      for (std::int32_t head = 0; head < num_kv_heads * group_size; ++head) {
        const std::int32_t kv_head = kv_head_of(head, group_size);
        ASSERT_LT(kv_head, num_kv_heads);
        const std::int32_t first = first_query_head_of(kv_head, group_size);
        ASSERT_TRUE(first <= head && head < first + group_size);
        ++readers[kv_head];
      }
      for (const int count : readers) ASSERT_EQ(count, group_size);
    }
  }
}

}  // namespace
}  // namespace attncheck::cuda_impl
