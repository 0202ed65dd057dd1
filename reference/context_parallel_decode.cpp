#include "reference/context_parallel_decode.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/rank_layer.hpp"

namespace attncheck::reference {

namespace {

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

// The keys a CP rank has cached, as runs of consecutive sequence indices in cache order.
using Segments = std::vector<IndexRange>;

void append_segment(Segments& segments, const IndexRange& range) {
  if (range.size() == 0) return;
  if (!segments.empty() && segments.back().end == range.begin) {
    segments.back().end = range.end;
  } else {
    segments.push_back(range);
  }
}

// The heads a CP rank attends with, relative to its TP rank's local heads.
struct RankHeads {
  std::int64_t q_first = 0, q_count = 0, kv_first = 0, kv_count = 0;
  std::int64_t group() const { return q_count / kv_count; }
};

// One call's tokens [start, start + count) of every batch row, RoPE positions from the steps (chunk: the
// prefill chunk a token is in; a step's tokens, in none, get [0, call end)), with a whole-width norm's sums.
struct CallBlock {
  RowMatrix x;                          // [batch * count, hidden]
  std::vector<std::int64_t> positions;  // [batch * count]
  RowVector q_sum_squares, k_sum_squares;
  std::optional<RopeFrequencies> frequencies;  // longrope: the whole call's
  TokenBlock block(std::int64_t batch, std::int64_t count) const {
    return {.batch = batch,
            .seq = count,
            .x = ConstMatrixMap(x.data(), x.rows(), x.cols()),
            .positions = positions,
            .q_sum_squares = {q_sum_squares.data(), static_cast<std::size_t>(q_sum_squares.size())},
            .k_sum_squares = {k_sum_squares.data(), static_cast<std::size_t>(k_sum_squares.size())},
            .call_frequencies = frequencies ? &*frequencies : nullptr};
  }
};

class DecodeRun {
 public:
  DecodeRun(const Case& test_case, const ParallelLayout& layout, const ContextParallelSteps& steps)
      : case_(test_case),
        inputs_(test_case.inputs),
        geometry_(test_case.geometry()),
        layout_(layout),
        steps_(steps),
        cp_(layout.cp.cp_size),
        tp_(layout.tp.tp_size),
        total_(test_case.inputs.decode.total()),
        head_dim_(geometry_.head_dim()),
        score_(ScoreSpec::for_geometry(geometry_)) {
    for (int t = 0; t < tp_; ++t) {
      shards_.push_back(shard_parameters(test_case.weights, layout.tp, t));
      heads_.push_back(LocalHeads::of(layout.tp.ranks[t]));
      keys_.push_back(RowMatrix::Zero(inputs_.batch * total_, heads_[t].num_kv_heads * head_dim_));
      values_.push_back(RowMatrix::Zero(inputs_.batch * total_, heads_[t].num_kv_heads * head_dim_));
    }
    segments_.assign(cp_, Segments());
  }

  Tensor run() {
    const std::int64_t hidden = geometry_.hidden_size();
    Tensor decode_out({inputs_.batch, total_, hidden});
    MatrixMap out = as_matrix(decode_out, inputs_.batch * total_);
    std::int64_t start = 0;
    for (const std::int64_t count : inputs_.decode.calls()) {
      const IndexRange call{start, start + count};
      const bool prefill = start == 0 && inputs_.decode.prefill > 0;
      cache_call(call, prefill);
      const CallBlock tokens = gather_call(call, prefill);
      for (int t = 0; t < tp_; ++t) {  // TP ranks in order, each adding its o_proj partial
        const ProjectedTokens projected =
            project_tokens(geometry_, heads_[t], shards_[t], tokens.block(inputs_.batch, count));
        for (std::int64_t b = 0; b < inputs_.batch; ++b) {
          keys_[t].middleRows(b * total_ + start, count) = projected.k.middleRows(b * count, count);
          values_[t].middleRows(b * total_ + start, count) = projected.v.middleRows(b * count, count);
        }
        const RowMatrix context = attend(t, call, projected.q);
        const Parameters& shard = shards_[t];
        const ConstMatrixMap o_proj = as_matrix(shard.o_proj, shard.o_proj.shape[0]);
        const RowMatrix partial = context * o_proj.transpose();
        for (std::int64_t b = 0; b < inputs_.batch; ++b) {
          out.middleRows(b * total_ + start, count) += partial.middleRows(b * count, count);
        }
      }
      start += count;
    }
    if (case_.weights.o_bias) out.rowwise() += as_matrix(*case_.weights.o_bias, 1).row(0);
    return decode_out;
  }

 private:
  // Which CP rank caches which of the call's keys: the prefill by the layout's chunks of it (Ulysses: every
  // rank all of them, for its heads), a step's tokens round robin by sequence index.
  void cache_call(const IndexRange& call, bool prefill) {
    if (layout_.cp.scheme == CpScheme::ulysses) {
      for (Segments& segments : segments_) append_segment(segments, call);
      return;
    }
    if (prefill) {
      const std::vector<IndexRange> chunks = sequence_chunks(call.size(), layout_.chunk_count);
      for (std::int64_t c = 0; c < cp_; ++c) {
        for (const std::int64_t chunk : layout_.ranks[c * tp_].chunks) append_segment(segments_[c], chunks[chunk]);
      }
      return;
    }
    for (std::int64_t s = call.begin; s < call.end; ++s) append_segment(segments_[s % cp_], {s, s + 1});
  }

  CallBlock gather_call(const IndexRange& call, bool prefill) const {
    const std::int64_t count = call.size(), hidden = geometry_.hidden_size();
    const ConstMatrixMap x = as_matrix(inputs_.x, inputs_.batch * inputs_.seq);
    // The chunk each token of the call is in: a prefill's chunks under the layout; a step's tokens are in no
    // chunk, so the sequence so far stands for one (positions per chunk then change nothing there).
    std::vector<IndexRange> chunk_of(static_cast<std::size_t>(count), IndexRange{0, call.end});
    if (prefill) {
      for (const IndexRange& chunk : sequence_chunks(count, layout_.chunk_count)) {
        for (std::int64_t s = chunk.begin; s < chunk.end; ++s) chunk_of[s] = chunk;
      }
    }
    CallBlock tokens;
    tokens.x.resize(inputs_.batch * count, hidden);
    tokens.positions.resize(static_cast<std::size_t>(inputs_.batch * count));
    std::vector<std::int64_t> true_positions(tokens.positions.size());
    for (std::int64_t b = 0; b < inputs_.batch; ++b) {
      for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t s = call.begin + i;
        tokens.x.row(b * count + i) = x.row(b * inputs_.seq + s);
        tokens.positions[b * count + i] = steps_.position(inputs_, b, s, chunk_of[i]);
        true_positions[b * count + i] = inputs_.positions[b * inputs_.seq + s];
      }
    }
    if (geometry_.rope_scaling().type == RopeScalingType::longrope) {
      tokens.frequencies = call_rope_frequencies(geometry_, true_positions);
    }
    if (geometry_.qk_norm_full_width()) {  // the all-reduce over TP of each token's sums (a replica counted once)
      tokens.q_sum_squares = RowVector::Zero(inputs_.batch * count);
      tokens.k_sum_squares = RowVector::Zero(inputs_.batch * count);
      const TokenBlock block = tokens.block(inputs_.batch, count);
      for (int t = 0; t < tp_; ++t) {
        const NormSums part = rank_norm_sum_squares(shards_[t], block);
        tokens.q_sum_squares += part.q;
        const TpPlan& plan = layout_.tp;
        if (t == plan.replica_groups[plan.ranks[t].replica_group].ranks.begin) tokens.k_sum_squares += part.k;
      }
    }
    return tokens;
  }

  RankHeads rank_heads(int tp_rank, std::int64_t cp_rank) const {
    const LocalHeads& local = heads_[tp_rank];
    if (layout_.cp.scheme == CpScheme::ring) return {0, local.num_heads, 0, local.num_kv_heads};
    const CpRankPlan& rank = layout_.ranks[cp_rank * tp_ + tp_rank];
    return {rank.q_heads.begin - layout_.tp.ranks[tp_rank].q_heads.begin, rank.q_heads.size(),
            steps_.ulysses_kv_first(layout_, tp_rank, cp_rank), rank.kv_heads.size()};
  }

  // The call's queries (q: [batch * count, local query width]) against every CP rank's cache: each rank's
  // partial over its segments in cache order, then the ranks' partials merged in CP order, sinks last.
  // Returns the context [batch * count, local query width].
  RowMatrix attend(int t, const IndexRange& call, const RowMatrix& q) const {
    const std::int64_t count = call.size(), heads = heads_[t].num_heads;
    RowMatrix context = RowMatrix::Zero(q.rows(), q.cols());
    RowMatrix lse = RowMatrix::Constant(inputs_.batch * count, heads, kNegativeInfinity);  // [rows, heads]
    std::vector<bool> covered(static_cast<std::size_t>(heads), false);  // per head: a rank's partial taken yet
    for (std::int64_t c = 0; c < cp_; ++c) {
      const RankHeads rank = rank_heads(t, c);
      RowMatrix rank_context = RowMatrix::Zero(q.rows(), rank.q_count * head_dim_);
      RowMatrix rank_lse = RowMatrix::Constant(q.rows(), rank.q_count, kNegativeInfinity);
      for (std::int64_t b = 0; b < inputs_.batch; ++b) {
        for (std::int64_t g = 0; g < rank.kv_count; ++g) {
          const std::int64_t group = rank.group(), width = group * head_dim_;
          for (const IndexRange& keys : segments_[c]) {
            RowMatrix part(count, width);
            std::vector<double> part_lse(static_cast<std::size_t>(group * count));
            attention_group_forward(q.block(b * count, (rank.q_first + g * group) * head_dim_, count, width),
                                    keys_[t].block(b * total_ + keys.begin, (rank.kv_first + g) * head_dim_,
                                                   keys.size(), head_dim_),
                                    values_[t].block(b * total_ + keys.begin, (rank.kv_first + g) * head_dim_,
                                                     keys.size(), head_dim_),
                                    steps_.block_mask(geometry_, call, keys, inputs_.key_lengths[b]), score_, part,
                                    part_lse.data());
            for (std::int64_t j = 0; j < group; ++j) {
              for (std::int64_t i = 0; i < count; ++i) {
                steps_.merge_partial(rank_context.row(b * count + i).segment((g * group + j) * head_dim_, head_dim_),
                                   rank_lse(b * count + i, g * group + j), part.row(i).segment(j * head_dim_, head_dim_),
                                   part_lse[j * count + i]);
              }
            }
          }
        }
      }
      // The cross-rank merge: a head's first partial is taken as it is (Ulysses: its only one), later ones merged.
      for (std::int64_t row = 0; row < q.rows(); ++row) {
        for (std::int64_t h = 0; h < rank.q_count; ++h) {
          double& total = lse(row, rank.q_first + h);
          auto target = context.row(row).segment((rank.q_first + h) * head_dim_, head_dim_);
          const auto part = rank_context.row(row).segment(h * head_dim_, head_dim_);
          if (!covered[rank.q_first + h]) {
            target = part;
            total = rank_lse(row, h);
            continue;
          }
          const ContextParallelSteps::MergeWeights w = steps_.rank_merge_weights(total, rank_lse(row, h));
          target = target * w.total + part * w.partial;
          total = w.merged;
        }
      }
      for (std::int64_t h = 0; h < rank.q_count; ++h) covered[rank.q_first + h] = true;
    }
    if (shards_[t].sinks) {  // each head's sink joins every query's denominator once
      for (std::int64_t row = 0; row < q.rows(); ++row) {
        for (std::int64_t h = 0; h < heads; ++h) {
          double& total = lse(row, h);
          const double sink = shards_[t].sinks->values[h];
          const double merged = total == kNegativeInfinity ? sink : steps_.merged_log_sum_exp(total, sink);
          context.row(row).segment(h * head_dim_, head_dim_) *= total == kNegativeInfinity ? 0.0 : std::exp(total - merged);
          total = merged;
        }
      }
    }
    return context;
  }

  const Case& case_;
  const Inputs& inputs_;
  const Geometry& geometry_;
  const ParallelLayout& layout_;
  const ContextParallelSteps& steps_;
  std::int64_t cp_;
  int tp_;
  std::int64_t total_;
  std::int64_t head_dim_;
  ScoreSpec score_;
  std::vector<Parameters> shards_;
  std::vector<LocalHeads> heads_;
  std::vector<RowMatrix> keys_, values_;  // per TP rank: [batch * total, local KV width]
  std::vector<Segments> segments_;        // per CP rank: the keys it has cached
};

}  // namespace

void refuse_unbounded_decode(const Case& test_case, const ParallelLayout& layout) {
  if (test_case.inputs.decode.empty()) return;
  // Every call attends every cached run of keys: at most calls x (chunks + step tokens + CP) blocks per batch
  // row and KV head (a replicated one once per TP rank holding it). Bounded by work, like the ring, so that a
  // long schedule of one-token steps at a large CP size cannot run for ever.
  const DecodeSchedule& schedule = test_case.inputs.decode;
  const auto calls = static_cast<std::int64_t>(schedule.calls().size());
  const std::int64_t runs = layout.chunk_count + (schedule.total() - schedule.prefill) + layout.cp.cp_size;
  // In double: the product of five bounded factors may pass int64 before the bound refuses it.
  const double blocks = static_cast<double>(calls) * static_cast<double>(runs) *
                        static_cast<double>(test_case.inputs.batch) *
                        static_cast<double>(test_case.geometry().num_kv_heads()) * layout.tp.kv_replicas;
  if (blocks > static_cast<double>(kMaxContextParallelBlocks)) {
    throw InputError("context-parallel reference",
                     {{"decode_schedule", std::to_string(calls) + " calls",
                       fmt::format("decoding after the CP prefill attends up to {:.3g} blocks (calls x cached runs x "
                                   "batch x KV heads over TP ranks); the bound is {}",
                                   blocks, kMaxContextParallelBlocks),
                       "fewer decode steps, or a smaller CP size or batch"}});
  }
}

Tensor run_context_parallel_decode(const Case& test_case, const ParallelLayout& layout,
                                   const ContextParallelSteps& steps) {
  refuse_unbounded_decode(test_case, layout);
  return DecodeRun(test_case, layout, steps).run();
}

}  // namespace attncheck::reference
