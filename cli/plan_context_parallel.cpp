#include "cli/plan_context_parallel.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <string>
#include <vector>

#include "cli/plan_format.hpp"

namespace attncheck::cli {

namespace {

using nlohmann::json;

std::string chunk_list(const std::vector<std::int64_t>& chunks) {
  std::string text;
  for (const std::int64_t chunk : chunks) text += (text.empty() ? "" : ", ") + std::to_string(chunk);
  return text;
}

// The token ranges of a rank's chunks, "0-12, 88-99" ("none" for empty chunks), or "" without --seq.
std::string token_list(const std::vector<IndexRange>& all_chunks, const std::vector<std::int64_t>& chunks) {
  std::string text;
  for (const std::int64_t chunk : chunks) {
    const IndexRange& tokens = all_chunks[static_cast<std::size_t>(chunk)];
    if (tokens.size() == 0) continue;
    text += (text.empty() ? "" : ", ") + head_list(tokens);
  }
  return all_chunks.empty() ? "" : (text.empty() ? "none" : text);
}

std::vector<IndexRange> chunks_of(const PlanReport& report) {
  return report.seq ? sequence_chunks(*report.seq, report.layout->chunk_count) : std::vector<IndexRange>{};
}

}  // namespace

void write_context_parallel(const PlanReport& report, std::ostream& out) {
  const ParallelLayout& layout = *report.layout;
  const bool ring = layout.cp.scheme == CpScheme::ring;
  const std::int64_t cp = layout.cp.cp_size, tp = layout.tp.tp_size;
  std::string chunking = fmt::format("{} chunks, CP rank c holds chunk c", layout.chunk_count);
  if (ring && layout.cp.load_balanced) {
    chunking = fmt::format("load-balanced: {} chunks, CP rank c holds chunks c and {} - c", layout.chunk_count,
                           layout.chunk_count - 1);
  }
  fmt::print(out, "\ncontext parallel: {}, cp_size {} ({}); world size {} = tp {} x cp {}, global rank = cp rank x {} "
                  "+ tp rank\n",
             to_string(layout.cp.scheme), cp, chunking, layout.world_size(), tp, cp, tp);
  const std::vector<IndexRange> all_chunks = chunks_of(report);
  const std::string tokens_header = report.seq ? fmt::format("tokens (seq {})", *report.seq) : "tokens";
  if (ring) {
    fmt::print(out, "  {:<5} {:<3} {:<3} {:<8} {:<18} {:<12} {:<9} {:<18} {}\n", "rank", "tp", "cp", "chunks",
               tokens_header, "query heads", "kv heads", "receives K/V from", "sends K/V to");
  } else {
    fmt::print(out, "  {:<5} {:<3} {:<3} {:<8} {:<18} {:<12} {:<9} {}\n", "rank", "tp", "cp", "chunk", tokens_header,
               "query heads", "kv heads", "kv heads shared with");
  }
  for (const CpRankPlan& rank : layout.ranks) {
    const std::string tokens = report.seq ? token_list(all_chunks, rank.chunks) : "(give --seq)";
    if (ring) {
      fmt::print(out, "  {:<5} {:<3} {:<3} {:<8} {:<18} {:<12} {:<9} {:<18} {}\n", rank.rank, rank.tp_rank,
                 rank.cp_rank, chunk_list(rank.chunks), tokens, head_list(rank.q_heads), head_list(rank.kv_heads),
                 rank.ring_receives_from, rank.ring_sends_to);
      continue;
    }
    std::string shared;  // the other ranks of its TP rank that attend with the same KV heads
    for (const CpRankPlan& other : layout.ranks) {
      if (other.tp_rank == rank.tp_rank && other.kv_group == rank.kv_group && other.rank != rank.rank) {
        shared += (shared.empty() ? "rank " : ", ") + std::to_string(other.rank);
      }
    }
    fmt::print(out, "  {:<5} {:<3} {:<3} {:<8} {:<18} {:<12} {:<9} {}\n", rank.rank, rank.tp_rank, rank.cp_rank,
               chunk_list(rank.chunks), tokens, head_list(rank.q_heads), head_list(rank.kv_heads),
               shared.empty() ? "none" : shared);
  }
  if (ring) {
    fmt::print(out, "  each CP rank keeps its query chunks and its TP rank's heads; {} steps pass the K/V chunks once "
                    "around the ring, the partial results merged by log-sum-exp\n",
               cp);
  } else {
    const std::int64_t local_kv = layout.tp.ranks.front().kv_heads.size();
    fmt::print(out, "  all-to-all: each CP rank attends all tokens of its query heads (1/{} of its TP rank's), then "
                    "returns its chunk's context; {}\n",
               cp,
               layout.ulysses_kv_replicas > 1
                   ? fmt::format("each of a TP rank's {} KV heads is replicated on {} CP ranks (cp {} > {} KV heads)",
                                 local_kv, layout.ulysses_kv_replicas, cp, local_kv)
                   : fmt::format("a TP rank's {} KV heads split {} per CP rank", local_kv, local_kv / cp));
  }
}

json context_parallel_json(const PlanReport& report) {
  const ParallelLayout& layout = *report.layout;
  const std::vector<IndexRange> all_chunks = chunks_of(report);
  json ranks = json::array();
  for (const CpRankPlan& rank : layout.ranks) {
    json tokens = nullptr;
    if (report.seq) {
      tokens = json::array();
      for (const std::int64_t chunk : rank.chunks) {
        const IndexRange& range = all_chunks[static_cast<std::size_t>(chunk)];
        tokens.push_back({range.begin, range.end});
      }
    }
    ranks.push_back({{"rank", rank.rank},
                     {"tp_rank", rank.tp_rank},
                     {"cp_rank", rank.cp_rank},
                     {"chunks", rank.chunks},
                     {"tokens", tokens},
                     {"q_heads", {rank.q_heads.begin, rank.q_heads.end}},
                     {"kv_heads", {rank.kv_heads.begin, rank.kv_heads.end}},
                     {"kv_group", rank.kv_group},
                     {"ring_receives_from", rank.ring_receives_from},
                     {"ring_sends_to", rank.ring_sends_to}});
  }
  return {{"scheme", to_string(layout.cp.scheme)},
          {"cp_size", layout.cp.cp_size},
          {"load_balanced", layout.cp.scheme == CpScheme::ring && layout.cp.load_balanced},
          {"chunk_count", layout.chunk_count},
          {"world_size", layout.world_size()},
          {"ulysses_kv_replicas", layout.ulysses_kv_replicas},
          {"seq", report.seq ? json(*report.seq) : json(nullptr)},
          {"ranks", ranks}};
}

}  // namespace attncheck::cli
