// Which keys each query sees and which (query tile, key tile) pairs a kernel must visit. Mirrors
// reference::MaskSpec::visible_keys exactly (tile_schedule_test compares them on every small shape):
// query i is aligned to key i + seq_k - seq_q (bottom-right, so a decode step's queries sit at the end
// of the cache), sees keys j <= aligned when causal, aligned - window < j with a window, and
// j < key_length (padding).
#pragma once

#include <cstdint>

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

struct MaskShape {
  std::int32_t seq_q = 0;
  std::int32_t seq_k = 0;
  std::int32_t key_length = 0;  // this batch row's keys (<= seq_k)
  bool causal = true;
  std::int32_t window = 0;  // 0: none
};

struct KeyRange {
  std::int32_t begin = 0;
  std::int32_t end = 0;  // exclusive; empty when end <= begin (the query outputs 0)
  ATTNCHECK_HOST_DEVICE bool empty() const { return end <= begin; }
};

ATTNCHECK_HOST_DEVICE std::int32_t min_of(std::int32_t a, std::int32_t b) {
  return a < b ? a : b;
}
ATTNCHECK_HOST_DEVICE std::int32_t max_of(std::int32_t a, std::int32_t b) {
  return a > b ? a : b;
}
ATTNCHECK_HOST_DEVICE std::int32_t ceil_div(std::int32_t a, std::int32_t b) {
  return (a + b - 1) / b;
}

// Both ends are non-decreasing in the query, which the tile functions below rely on.
ATTNCHECK_HOST_DEVICE KeyRange visible_keys(const MaskShape& mask, std::int32_t query) {
  const std::int32_t aligned = query + mask.seq_k - mask.seq_q;
  KeyRange range{0, min_of(mask.key_length, mask.seq_k)};
  if (mask.window > 0) range.begin = max_of(0, aligned - mask.window + 1);
  if (mask.causal) range.end = min_of(range.end, aligned + 1);
  return range;
}

// What a (query tile, key tile) block needs: nothing (no visible pair), no masking (every pair
// visible), or per-element masking.
enum class TileKind : std::int32_t { skip, full, partial };

// Queries [query_begin, query_end) against keys [key_begin, key_end); both ranges non-empty.
ATTNCHECK_HOST_DEVICE TileKind classify_tile(const MaskShape& mask, std::int32_t query_begin, std::int32_t query_end,
                                             std::int32_t key_begin, std::int32_t key_end) {
  query_end = min_of(query_end, mask.seq_q);
  const KeyRange first = visible_keys(mask, query_begin);
  const KeyRange last = visible_keys(mask, query_end - 1);
  // Every row sees the whole tile iff the last row's begin and the first row's end enclose it.
  if (last.begin <= key_begin && first.end >= key_end && key_end <= mask.seq_k) return TileKind::full;
  // Rows intersecting the tile form a run (both ends are monotone); look for one.
  for (std::int32_t query = query_begin; query < query_end; ++query) {
    const KeyRange range = visible_keys(mask, query);
    if (range.begin >= key_end) break;  // later rows start later still
    if (!range.empty() && range.end > key_begin) return TileKind::partial;
  }
  return TileKind::skip;
}

// The key tiles (of width block_k) a query tile may touch: [first, last). Tiles outside it are skipped
// without being classified; inside it classify_tile() still decides (a window can leave holes only
// at the ends, never inside, so this range is tight up to one tile at each end).
struct TileRange {
  std::int32_t first = 0;
  std::int32_t last = 0;
};
ATTNCHECK_HOST_DEVICE TileRange key_tiles(const MaskShape& mask, std::int32_t query_begin, std::int32_t query_end,
                                          std::int32_t block_k) {
  query_end = min_of(query_end, mask.seq_q);
  const std::int32_t begin = visible_keys(mask, query_begin).begin;
  const std::int32_t end = visible_keys(mask, query_end - 1).end;
  if (end <= begin) return {0, 0};
  return {begin / block_k, ceil_div(end, block_k)};
}

// GQA: query head h reads KV head h / group_size; KV head g is read by query heads
// [g * group_size, (g + 1) * group_size). No KV head is ever repeated in memory.
ATTNCHECK_HOST_DEVICE std::int32_t kv_head_of(std::int32_t query_head, std::int32_t group_size) {
  return query_head / group_size;
}
ATTNCHECK_HOST_DEVICE std::int32_t first_query_head_of(std::int32_t kv_head, std::int32_t group_size) {
  return kv_head * group_size;
}

// Split-KV decode: keys [begin, end) cut into num_splits contiguous pieces aligned to block_k; piece
// `split` (possibly empty when there are more splits than blocks).
ATTNCHECK_HOST_DEVICE KeyRange split_keys(KeyRange keys, std::int32_t num_splits, std::int32_t split,
                                          std::int32_t block_k) {
  if (keys.empty()) return {keys.begin, keys.begin};
  const std::int32_t first_block = keys.begin / block_k;
  const std::int32_t blocks = ceil_div(keys.end, block_k) - first_block;
  const std::int32_t per_split = ceil_div(blocks, num_splits);
  const std::int32_t begin = max_of(keys.begin, (first_block + split * per_split) * block_k);
  const std::int32_t end = min_of(keys.end, (first_block + (split + 1) * per_split) * block_k);
  return {begin, max_of(begin, end)};
}

// Split-KV decode: how many pieces to cut seq_k keys into so that the grid (pieces x other_blocks)
// covers about two waves of the device's multiprocessors. At least 1, and every piece that
// split_keys() cuts from [0, seq_k) is non-empty (the count is rounded to whole blocks per piece).
ATTNCHECK_HOST_DEVICE std::int32_t decode_splits(std::int32_t other_blocks, std::int32_t seq_k, std::int32_t block_k,
                                                 std::int32_t multiprocessors) {
  const std::int32_t blocks = max_of(1, ceil_div(seq_k, block_k));
  const std::int32_t wanted = max_of(1, min_of(ceil_div(2 * multiprocessors, max_of(other_blocks, 1)), blocks));
  return ceil_div(blocks, ceil_div(blocks, wanted));
}

}  // namespace attncheck::cuda_impl
