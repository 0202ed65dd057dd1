#include "core/model/parallel_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "core/errors/input_error.hpp"

namespace attncheck {

std::string_view to_string(CpScheme scheme) { return scheme == CpScheme::ulysses ? "ulysses" : "ring"; }

std::optional<CpScheme> parse_cp_scheme(std::string_view text) {
  if (text == "ulysses") return CpScheme::ulysses;
  if (text == "ring") return CpScheme::ring;
  return std::nullopt;
}

namespace {

// Whether Ulysses can split a TP rank with these local heads over cp ranks (ulysses_problem: why not).
std::optional<std::string> ulysses_problem(std::int64_t local_q_heads, std::int64_t local_kv_heads, std::int64_t cp) {
  if (local_q_heads % cp != 0) {
    return fmt::format("Ulysses gives each CP rank 1/{} of its TP rank's {} query heads: not a whole number", cp,
                       local_q_heads);
  }
  if (local_kv_heads % cp != 0 && cp % local_kv_heads != 0) {
    return fmt::format(
        "Ulysses splits its TP rank's {} KV heads over {} CP ranks, or replicates each on CP / KV ranks: neither "
        "divides",
        local_kv_heads, cp);
  }
  return std::nullopt;
}

std::string list(const std::vector<std::int64_t>& values) {
  return values.empty() ? std::string("none") : fmt::format("{}", fmt::join(values, ", "));
}

}  // namespace

std::vector<std::int64_t> valid_cp_sizes(const TpPlan& plan, CpScheme scheme, std::int64_t limit) {
  std::vector<std::int64_t> sizes;
  const RankPlan& first = plan.ranks.front();  // every TP rank holds as many heads
  if (scheme == CpScheme::ulysses) limit = std::min(limit, first.q_heads.size());
  for (std::int64_t cp = 1; cp <= limit; ++cp) {
    if (scheme == CpScheme::ring || !ulysses_problem(first.q_heads.size(), first.kv_heads.size(), cp)) {
      sizes.push_back(cp);
    }
  }
  return sizes;
}

std::vector<IndexRange> sequence_chunks(std::int64_t seq, std::int64_t chunk_count) {
  if (chunk_count < 1 || seq < 0) {
    throw InputError("sequence chunks", {{"chunk_count", std::to_string(chunk_count), "must be >= 1 with seq >= 0",
                                          "a context-parallel size of 1 or more"}});
  }
  std::vector<IndexRange> chunks;
  std::int64_t begin = 0;
  for (std::int64_t i = 0; i < chunk_count; ++i) {
    const std::int64_t size = seq / chunk_count + (i < seq % chunk_count ? 1 : 0);
    chunks.push_back({begin, begin + size});
    begin += size;
  }
  return chunks;
}

ParallelLayout make_parallel_layout(const Geometry& geometry, std::int64_t tp_size, const CpSpec& cp) {
  ParallelLayout layout{.tp = make_tp_plan(geometry, tp_size), .cp = cp};  // InputError names a bad tp_size
  if (cp.cp_size < 1 || cp.cp_size > kMaxCpSize) {
    throw InputError("context-parallel layout",
                     {{"cp_size", std::to_string(cp.cp_size), fmt::format("must be in [1, {}]", kMaxCpSize),
                       "1 (no context parallelism) up to the CP ranks a job really has"}});
  }
  if (tp_size * cp.cp_size > kMaxWorldSize) {
    throw InputError("context-parallel layout",
                     {{"cp_size", std::to_string(cp.cp_size),
                       fmt::format("tp_size x cp_size must be at most {} ranks (here {} x {})", kMaxWorldSize, tp_size,
                                   cp.cp_size),
                       fmt::format("cp_size at most {} at TP {}", kMaxWorldSize / tp_size, tp_size)}});
  }
  const RankPlan& first = layout.tp.ranks.front();
  const std::int64_t local_q = first.q_heads.size(), local_kv = first.kv_heads.size(), cp_size = cp.cp_size;
  if (cp.scheme == CpScheme::ulysses) {
    if (const auto problem = ulysses_problem(local_q, local_kv, cp_size)) {
      std::vector<std::int64_t> tp_sizes;  // TP sizes under which this CP size would split whole heads
      for (const std::int64_t p : valid_tp_sizes(geometry)) {
        const TpPlan other = make_tp_plan(geometry, p);
        if (!ulysses_problem(other.ranks.front().q_heads.size(), other.ranks.front().kv_heads.size(), cp_size)) {
          tp_sizes.push_back(p);
        }
      }
      throw InputError("context-parallel layout",
                       {{"cp_size", std::to_string(cp_size), *problem,
                         fmt::format("valid Ulysses CP sizes at TP {}: {}; TP sizes that admit CP {}: {}; or "
                                     "--cp-scheme ring, which splits no heads",
                                     tp_size, list(valid_cp_sizes(layout.tp, CpScheme::ulysses, kMaxCpSize)), cp_size,
                                     list(tp_sizes))}});
    }
    layout.chunk_count = cp_size;
    layout.ulysses_kv_replicas = local_kv >= cp_size ? 1 : static_cast<int>(cp_size / local_kv);
  } else {
    layout.chunk_count = cp.load_balanced ? 2 * cp_size : cp_size;
  }
  for (std::int64_t c = 0; c < cp_size; ++c) {
    for (const RankPlan& tp_rank : layout.tp.ranks) {
      CpRankPlan rank{.rank = static_cast<int>(c * tp_size + tp_rank.rank),
                      .tp_rank = tp_rank.rank,
                      .cp_rank = static_cast<int>(c),
                      .q_heads = tp_rank.q_heads,
                      .kv_heads = tp_rank.kv_heads,
                      .kv_group = tp_rank.replica_group};
      rank.ring_receives_from = rank.ring_sends_to = rank.rank;
      if (cp.scheme == CpScheme::ulysses) {
        rank.chunks = {c};
        const std::int64_t q_per_rank = local_q / cp_size;
        rank.q_heads = {tp_rank.q_heads.begin + c * q_per_rank, tp_rank.q_heads.begin + (c + 1) * q_per_rank};
        if (local_kv >= cp_size) {
          const std::int64_t kv_per_rank = local_kv / cp_size;
          rank.kv_heads = {tp_rank.kv_heads.begin + c * kv_per_rank, tp_rank.kv_heads.begin + (c + 1) * kv_per_rank};
          rank.kv_group = static_cast<int>(c);
        } else {  // each KV head on ulysses_kv_replicas consecutive CP ranks
          const std::int64_t head = c / layout.ulysses_kv_replicas;
          rank.kv_heads = {tp_rank.kv_heads.begin + head, tp_rank.kv_heads.begin + head + 1};
          rank.kv_group = static_cast<int>(head);
        }
      } else {
        rank.chunks = cp.load_balanced ? std::vector<std::int64_t>{c, 2 * cp_size - 1 - c} : std::vector<std::int64_t>{c};
        rank.ring_receives_from = static_cast<int>(((c + cp_size - 1) % cp_size) * tp_size + tp_rank.rank);
        rank.ring_sends_to = static_cast<int>(((c + 1) % cp_size) * tp_size + tp_rank.rank);
      }
      layout.ranks.push_back(rank);
    }
  }
  return layout;
}

}  // namespace attncheck
