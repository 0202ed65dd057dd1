#include "core/tp/fused_qkv.hpp"

#include <fmt/format.h>

#include "core/errors/input_error.hpp"

namespace attncheck {

std::string_view to_string(FusedQkvLayout layout) {
  switch (layout) {
    case FusedQkvLayout::stacked:
      return "stacked";
    case FusedQkvLayout::grouped:
      return "grouped";
    case FusedQkvLayout::neox:
      return "neox";
    case FusedQkvLayout::neox_before_1315:
      return "neox-before-1315";
  }
  return "stacked";
}

std::string_view to_string(Projection projection) {
  switch (projection) {
    case Projection::q:
      return "q";
    case Projection::k:
      return "k";
    case Projection::v:
      return "v";
  }
  return "q";
}

std::optional<std::string> fused_layout_unsupported(const TpPlan& plan, FusedQkvLayout layout) {
  if (layout != FusedQkvLayout::neox && layout != FusedQkvLayout::neox_before_1315) return std::nullopt;
  if (plan.kv_replicas > 1) {
    return fmt::format(
        "GPT-NeoX divides num_kv_heads by tp_size and cannot replicate KV heads "
        "(tp_size {} > num_kv_heads {})",
        plan.tp_size, plan.geometry.num_kv_heads());
  }
  if (layout == FusedQkvLayout::neox) return std::nullopt;  // a plain torch.split since #1315
  // GPT-NeoX before #1315 computed its per-query-head chunk in Python floats:
  //   chunk = int(hn * (1 + 2 * (kvp / np))), slice = int((kvp / np) * hn)
  // and its reshape and split only work when those come out exact. Mirror that arithmetic.
  const RankPlan& rank = plan.ranks.front();
  const std::int64_t head_dim = plan.geometry.head_dim();
  const std::int64_t local_q = rank.q_heads.size();
  const std::int64_t local_kv = rank.kv_heads.size();
  const double ratio = static_cast<double>(local_kv) / static_cast<double>(local_q);
  const auto chunk = static_cast<std::int64_t>(static_cast<double>(head_dim) * (1.0 + 2.0 * ratio));
  const auto slice = static_cast<std::int64_t>(ratio * static_cast<double>(head_dim));
  if (chunk * local_q != rank.qkv_rows || head_dim + 2 * slice != chunk || slice * local_q != local_kv * head_dim) {
    return fmt::format(
        "GPT-NeoX's GQA reshape before #1315 needs head_dim * (1 + 2 * {}/{}) = {} rows per query head, "
        "which its float arithmetic does not give exactly (it computes {}; K and V slices of {})",
        local_kv, local_q, static_cast<double>(rank.qkv_rows) / static_cast<double>(local_q), chunk, slice);
  }
  return std::nullopt;
}

namespace {

// Appends segments in local row order, tracking the next local row.
class SegmentWriter {
 public:
  void add(Projection projection, std::int64_t head, IndexRange source_rows) {
    segments_.push_back({projection, head, {next_row_, next_row_ + source_rows.size()}, source_rows});
    next_row_ += source_rows.size();
  }
  std::vector<FusedRowSegment> take() { return std::move(segments_); }

 private:
  std::vector<FusedRowSegment> segments_;
  std::int64_t next_row_ = 0;
};

}  // namespace

std::vector<FusedRowSegment> fused_qkv_segments(const TpPlan& plan, int rank_id, FusedQkvLayout layout) {
  if (rank_id < 0 || rank_id >= plan.tp_size) {
    throw InputError("fused QKV layout",
                     {{"rank", std::to_string(rank_id), fmt::format("must be in [0, {})", plan.tp_size), "rank = 0"}});
  }
  if (auto reason = fused_layout_unsupported(plan, layout)) {
    throw InputError("fused QKV layout",
                     {{"layout", std::string(to_string(layout)), "must be representable for this plan: " + *reason,
                       "use the stacked or grouped layout"}});
  }
  const RankPlan& rank = plan.ranks[static_cast<std::size_t>(rank_id)];
  const std::int64_t head_dim = plan.geometry.head_dim();
  const auto whole_head = [&](std::int64_t head) { return IndexRange{head * head_dim, (head + 1) * head_dim}; };
  // Local query heads served by local KV head kv (a whole group, or the rank's share when replicated).
  const std::int64_t local_group = rank.q_heads.size() / rank.kv_heads.size();

  SegmentWriter writer;
  // [Q | K | V] of the rank's own heads.
  const auto add_stacked = [&] {
    for (std::int64_t h = rank.q_heads.begin; h < rank.q_heads.end; ++h) writer.add(Projection::q, h, whole_head(h));
    for (std::int64_t g = rank.kv_heads.begin; g < rank.kv_heads.end; ++g) writer.add(Projection::k, g, whole_head(g));
    for (std::int64_t g = rank.kv_heads.begin; g < rank.kv_heads.end; ++g) writer.add(Projection::v, g, whole_head(g));
  };
  switch (layout) {
    case FusedQkvLayout::stacked:
      add_stacked();
      break;
    case FusedQkvLayout::grouped:
      for (std::int64_t g = rank.kv_heads.begin; g < rank.kv_heads.end; ++g) {
        const std::int64_t first_q = rank.q_heads.begin + (g - rank.kv_heads.begin) * local_group;
        for (std::int64_t h = first_q; h < first_q + local_group; ++h) writer.add(Projection::q, h, whole_head(h));
        writer.add(Projection::k, g, whole_head(g));
        writer.add(Projection::v, g, whole_head(g));
      }
      break;
    case FusedQkvLayout::neox:
      if (local_group == 1) {  // multi-head: per head [q_h | k_h | v_h], as view(..., heads, 3 * head_dim)
        for (std::int64_t h = rank.q_heads.begin; h < rank.q_heads.end; ++h) {
          const std::int64_t kv_head = rank.kv_heads.begin + (h - rank.q_heads.begin);
          writer.add(Projection::q, h, whole_head(h));
          writer.add(Projection::k, kv_head, whole_head(kv_head));
          writer.add(Projection::v, kv_head, whole_head(kv_head));
        }
        break;
      }
      add_stacked();  // grouped-query: the rank's [Q | K | V], as torch.split(local query, KV, KV widths)
      break;
    case FusedQkvLayout::neox_before_1315: {
      const std::int64_t slice = head_dim / local_group;  // rows of K (and of V) per query head
      for (std::int64_t i = 0; i < rank.q_heads.size(); ++i) {
        const std::int64_t kv_head = rank.kv_heads.begin + i / local_group;
        const std::int64_t first = kv_head * head_dim + (i % local_group) * slice;
        writer.add(Projection::q, rank.q_heads.begin + i, whole_head(rank.q_heads.begin + i));
        writer.add(Projection::k, kv_head, {first, first + slice});
        writer.add(Projection::v, kv_head, {first, first + slice});
      }
      break;
    }
  }
  return writer.take();
}

}  // namespace attncheck
