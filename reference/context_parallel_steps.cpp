#include "reference/context_parallel_steps.hpp"

#include <algorithm>

namespace attncheck::reference {

namespace {

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

}  // namespace

std::int64_t ContextParallelSteps::position(const Inputs& inputs, std::int64_t b, std::int64_t s,
                                            const IndexRange& /*chunk*/) const {
  return inputs.positions[b * inputs.seq + s];
}

// Query chunk q against key chunk k of the same batch row, by global sequence index.
MaskSpec ContextParallelSteps::block_mask(const Geometry& geometry, const IndexRange& q, const IndexRange& k,
                                          std::int64_t key_length) const {
  MaskSpec mask = MaskSpec::for_geometry(geometry, q.size(), k.size(), key_length);
  mask.key_offset = q.begin - k.begin;
  mask.key_length = key_length - k.begin;
  mask.key_count = k.size();
  return mask;
}

std::int64_t ContextParallelSteps::ulysses_kv_first(const ParallelLayout& layout, int tp_rank,
                                                    std::int64_t cp_rank) const {
  const CpRankPlan& rank = layout.ranks[cp_rank * layout.tp.tp_size + tp_rank];
  return rank.kv_heads.begin - layout.tp.ranks[tp_rank].kv_heads.begin;
}

double ContextParallelSteps::merged_log_sum_exp(double total, double partial) const {
  const double high = std::max(total, partial);
  return high + std::log(std::exp(total - high) + std::exp(partial - high));
}

std::vector<std::int64_t> ContextParallelSteps::gathered_sequence(const Geometry& geometry, std::int64_t tp_size,
                                                                  const CpSpec& cp, std::int64_t seq) const {
  const ParallelLayout layout = make_parallel_layout(geometry, tp_size, cp);
  const std::vector<IndexRange> chunks = sequence_chunks(seq, layout.chunk_count);
  std::vector<std::int64_t> order;
  for (std::int64_t c = 0; c < cp.cp_size; ++c) {
    for (const std::int64_t chunk : layout.ranks[c * tp_size].chunks) {
      for (std::int64_t s = chunks[chunk].begin; s < chunks[chunk].end; ++s) order.push_back(s);
    }
  }
  return order;
}

ContextParallelSteps::MergeWeights ContextParallelSteps::rank_merge_weights(double total, double partial) const {
  if (partial == kNegativeInfinity) return {.total = 1.0, .partial = 0.0, .merged = total};
  if (total == kNegativeInfinity) return {.total = 0.0, .partial = 1.0, .merged = partial};
  const double merged = merged_log_sum_exp(total, partial);
  return {.total = std::exp(total - merged), .partial = std::exp(partial - merged), .merged = merged};
}

}  // namespace attncheck::reference
