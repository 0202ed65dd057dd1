#include "reference/context_parallel.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/errors/input_error.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/attention_block.hpp"
#include "reference/context_parallel_decode.hpp"
#include "reference/rank_layer.hpp"
#include "reference/rope.hpp"

namespace attncheck::reference {

namespace {

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

// The tokens one CP rank holds: its chunks' sequence indices, in chunk order, for every batch row.
//   x [batch * count, hidden], positions [batch * count]: row b * count + i is sequence index sequence[i]
//   of batch row b.
struct ChunkTokens {
  std::vector<IndexRange> chunks;        // its chunks' sequence ranges, ascending
  std::vector<std::int64_t> offsets;     // each chunk's first local index
  std::vector<std::int64_t> sequence;    // local index -> sequence index
  std::vector<std::int64_t> gathered;    // local index -> the sequence index the output's gather puts it at
  RowMatrix x;
  std::vector<std::int64_t> positions;
  // A whole-width QK-norm's sums of squares over every TP rank's channels, per token (else empty).
  RowVector q_sum_squares, k_sum_squares;
  // longrope: the whole call's frequencies (a chunk's own largest position would choose others); else null.
  const RopeFrequencies* call_frequencies = nullptr;
  std::int64_t count() const { return static_cast<std::int64_t>(sequence.size()); }
  TokenBlock block(std::int64_t batch) const {
    return {.batch = batch,
            .seq = count(),
            .x = ConstMatrixMap(x.data(), x.rows(), x.cols()),
            .positions = positions,
            .q_sum_squares = {q_sum_squares.data(), static_cast<std::size_t>(q_sum_squares.size())},
            .k_sum_squares = {k_sum_squares.data(), static_cast<std::size_t>(k_sum_squares.size())},
            .call_frequencies = call_frequencies};
  }
};

ChunkTokens gather_tokens(const Inputs& inputs, const std::vector<IndexRange>& all_chunks, const CpRankPlan& rank,
                          std::int64_t hidden, const ContextParallelSteps& steps) {
  ChunkTokens tokens;
  for (const std::int64_t chunk : rank.chunks) {
    const IndexRange& range = all_chunks[static_cast<std::size_t>(chunk)];
    tokens.chunks.push_back(range);
    tokens.offsets.push_back(tokens.count());
    for (std::int64_t s = range.begin; s < range.end; ++s) tokens.sequence.push_back(s);
  }
  const std::int64_t count = tokens.count();
  std::vector<IndexRange> chunk_of;  // local index -> its chunk
  for (const IndexRange& range : tokens.chunks) chunk_of.insert(chunk_of.end(), range.size(), range);
  const ConstMatrixMap x = as_matrix(inputs.x, inputs.batch * inputs.seq);
  tokens.x.resize(inputs.batch * count, hidden);
  tokens.positions.resize(static_cast<std::size_t>(inputs.batch * count));
  for (std::int64_t b = 0; b < inputs.batch; ++b) {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t global = b * inputs.seq + tokens.sequence[i];
      tokens.x.row(b * count + i) = x.row(global);
      tokens.positions[b * count + i] = steps.position(inputs, b, tokens.sequence[i], chunk_of[i]);
    }
  }
  return tokens;
}


// total += part, tensor by tensor (the same structure).
void add_gradients(Parameters& total, const Parameters& part) {
  std::vector<Tensor*> targets;
  for_each_parameter(total, [&](std::string_view, Tensor& tensor) { targets.push_back(&tensor); });
  std::size_t index = 0;
  for_each_parameter(part, [&](std::string_view, const Tensor& tensor) {
    Tensor& target = *targets.at(index++);
    for (std::size_t i = 0; i < tensor.values.size(); ++i) target.values[i] += tensor.values[i];
  });
}

// One TP rank under the CP layout: its CP ranks' forward and backward.
class TpRankRun {
 public:
  TpRankRun(const Case& test_case, const ParallelLayout& layout, int tp_rank, const std::vector<ChunkTokens>& tokens,
            const ContextParallelSteps& steps)
      : steps_(steps),
        case_(test_case),
        geometry_(test_case.geometry()),
        layout_(layout),
        tp_rank_(tp_rank),
        tokens_(tokens),
        shard_(shard_parameters(test_case.weights, layout.tp, tp_rank)),
        heads_(LocalHeads::of(layout.tp.ranks[tp_rank])),
        cp_(layout.cp.cp_size),
        batch_(test_case.inputs.batch),
        head_dim_(geometry_.head_dim()),
        score_(ScoreSpec::for_geometry(geometry_)) {}

  // Projections, attention under the scheme, o_proj: each CP rank's partial output for its tokens.
  void forward() {
    forwards_.resize(cp_);
    for (std::int64_t c = 0; c < cp_; ++c) {
      forwards_[c].projected = project_tokens(geometry_, heads_, shard_, tokens_[c].block(batch_));
      forwards_[c].context = RowMatrix::Zero(batch_ * tokens_[c].count(), heads_.num_heads * head_dim_);
    }
    if (layout_.cp.scheme == CpScheme::ring) {
      ring_forward();
    } else {
      ulysses_attention(/*backward=*/false);
    }
    const ConstMatrixMap o_proj = as_matrix(shard_.o_proj, shard_.o_proj.shape[0]);
    for (RankForward& f : forwards_) f.partial_out = f.context * o_proj.transpose();
  }
  const RankForward& rank_forward(std::int64_t c) const { return forwards_[c]; }

  const Parameters& shard() const { return shard_; }
  const RankBackward& rank_backward(std::int64_t c) const { return backwards_[c]; }

  // Stage 1 of the backward on every CP rank: o_proj, attention under the scheme, RoPE rotated back.
  void backward_attention(const ConstMatrixMap& d_out) {
    backwards_.resize(cp_);
    d_contexts_.resize(cp_);
    const ConstMatrixMap o_proj = as_matrix(shard_.o_proj, shard_.o_proj.shape[0]);
    for (std::int64_t c = 0; c < cp_; ++c) {
      const ChunkTokens& t = tokens_[c];
      RowMatrix d_out_chunk(batch_ * t.count(), d_out.cols());
      for (std::int64_t b = 0; b < batch_; ++b) {
        for (std::int64_t i = 0; i < t.count(); ++i) {
          d_out_chunk.row(b * t.count() + i) = d_out.row(b * case_.inputs.seq + t.gathered[i]);
        }
      }
      RankBackward& bw = backwards_[c];
      bw.gradients.o_proj = Tensor(shard_.o_proj.shape);
      as_matrix(bw.gradients.o_proj, shard_.o_proj.shape[0]).noalias() = d_out_chunk.transpose() * forwards_[c].context;
      if (shard_.o_bias) {
        bw.gradients.o_bias = Tensor({d_out_chunk.cols()});
        as_matrix(*bw.gradients.o_bias, 1) = d_out_chunk.colwise().sum();
      }
      if (shard_.sinks) bw.gradients.sinks = Tensor(shard_.sinks->shape);
      d_contexts_[c] = d_out_chunk * o_proj;
      const RowMatrix& p_q = forwards_[c].projected.q;
      bw.d_q = RowMatrix::Zero(p_q.rows(), p_q.cols());
      bw.d_k = RowMatrix::Zero(forwards_[c].projected.k.rows(), forwards_[c].projected.k.cols());
      bw.d_v = RowMatrix::Zero(forwards_[c].projected.v.rows(), forwards_[c].projected.v.cols());
    }
    if (layout_.cp.scheme == CpScheme::ring) {
      ring_backward();
    } else {
      ulysses_attention(/*backward=*/true);
    }
    for (std::int64_t c = 0; c < cp_; ++c) {
      RankBackward& bw = backwards_[c];
      rotate_back(bw.d_q, tokens_[c], heads_.num_heads);
      rotate_back(bw.d_k, tokens_[c], heads_.num_kv_heads);
    }
  }

  // Stage 2: QK-norm and projection backward (dots: a whole-width norm's all-reduced sums of dn * n per CP
  // rank, else null). Returns the TP rank's gradients (its CP ranks' summed in CP order); dx receives each
  // CP rank's d(x) for its tokens.
  Parameters backward_finish(const std::vector<NormSums>* dots, bool subtract_kv_dot_term, std::vector<RowMatrix>& dx) {
    Parameters total;
    for (std::int64_t c = 0; c < cp_; ++c) {
      RankBackward& bw = backwards_[c];
      rank_backward_finish(geometry_, heads_, shard_, tokens_[c].block(batch_), forwards_[c],
                           dots == nullptr ? nullptr : &(*dots)[c], subtract_kv_dot_term, bw);
      dx.push_back(std::move(bw.dx));
      if (c == 0) {
        total = bw.gradients;
      } else if (steps_.reduces_weight_gradients_over_cp()) {
        add_gradients(total, bw.gradients);
      }
    }
    return total;
  }

 private:
  std::int64_t group() const { return heads_.group_size(); }

  void rotate_back(RowMatrix& rows, const ChunkTokens& tokens, std::int64_t heads) const {
    if (tokens.call_frequencies != nullptr) {
      apply_rope(rows, tokens.positions, heads, geometry_, *tokens.call_frequencies, RopeDirection::backward);
    } else {
      apply_rope(rows, tokens.positions, heads, geometry_, RopeDirection::backward);
    }
  }
  std::int64_t rows(std::int64_t c) const { return tokens_[c].count(); }

  // The ring's blocks, in the order every sum over them follows: batch row, KV head, query chunk (here), then
  // step and key chunk (for_each_key_chunk). visit(b, g, query chunk's range, its first local index) for each
  // non-empty query chunk of CP rank c.
  template <class Visit>
  void for_each_query_chunk(std::int64_t c, Visit&& visit) const {
    const ChunkTokens& mine = tokens_[c];
    for (std::int64_t b = 0; b < batch_; ++b) {
      for (std::int64_t g = 0; g < heads_.num_kv_heads; ++g) {
        for (std::size_t qi = 0; qi < mine.chunks.size(); ++qi) {
          if (mine.chunks[qi].size() != 0) visit(b, g, mine.chunks[qi], mine.offsets[qi]);
        }
      }
    }
  }

  // visit(step, source rank, key chunk's range, its first row in source's buffers) for each ring step and each
  // non-empty key chunk of batch row b held by source_of(step).
  template <class SourceOf, class Visit>
  void for_each_key_chunk(std::int64_t b, SourceOf&& source_of, Visit&& visit) const {
    for (std::int64_t step = 0; step < cp_; ++step) {
      const std::int64_t source = source_of(step);
      const ChunkTokens& theirs = tokens_[source];
      for (std::size_t kj = 0; kj < theirs.chunks.size(); ++kj) {
        if (theirs.chunks[kj].size() != 0) visit(step, source, theirs.chunks[kj], b * rows(source) + theirs.offsets[kj]);
      }
    }
  }

  // Ring, forward: CP rank c's query chunks against every rank's key chunks, merged by log-sum-exp.
  void ring_forward() {
    const std::int64_t group_width = group() * head_dim_;
    log_sum_exp_.assign(cp_, RowMatrix());
    for (std::int64_t c = 0; c < cp_; ++c) {
      log_sum_exp_[c] = RowMatrix::Constant(batch_ * heads_.num_heads, rows(c), kNegativeInfinity);
    }
    for (std::int64_t c = 0; c < cp_; ++c) {
      RowMatrix& context = forwards_[c].context;
      RowMatrix& lse = log_sum_exp_[c];  // [batch * local heads, rows]
      for_each_query_chunk(c, [&](std::int64_t b, std::int64_t g, const IndexRange& q_range, std::int64_t q_local) {
        const std::int64_t q_row = b * rows(c) + q_local;
        const auto forward_source = [&](std::int64_t step) { return (c - step + cp_) % cp_; };
        for_each_key_chunk(b, forward_source, [&](std::int64_t, std::int64_t source, const IndexRange& k_range,
                                                  std::int64_t k_row) {
          const ProjectedTokens& kv = forwards_[source].projected;
          RowMatrix part(q_range.size(), group_width);
          std::vector<double> part_lse(static_cast<std::size_t>(group() * q_range.size()));
          attention_group_forward(forwards_[c].projected.q.block(q_row, g * group_width, q_range.size(), group_width),
                                  kv.k.block(k_row, g * head_dim_, k_range.size(), head_dim_),
                                  kv.v.block(k_row, g * head_dim_, k_range.size(), head_dim_),
                                  steps_.block_mask(geometry_, q_range, k_range, case_.inputs.key_lengths[b]), score_,
                                  part, part_lse.data());
          for (std::int64_t j = 0; j < group(); ++j) {
            for (std::int64_t i = 0; i < q_range.size(); ++i) {
              steps_.merge_partial(context.row(q_row + i).segment((g * group() + j) * head_dim_, head_dim_),
                                   lse(b * heads_.num_heads + g * group() + j, q_local + i),
                                   part.row(i).segment(j * head_dim_, head_dim_), part_lse[j * q_range.size() + i]);
            }
          }
        });
      });
      if (shard_.sinks) {  // each head's sink joins every row's denominator once
        for (std::int64_t b = 0; b < batch_; ++b) {
          for (std::int64_t h = 0; h < heads_.num_heads; ++h) {
            const double sink = shard_.sinks->values[h];
            for (std::int64_t i = 0; i < rows(c); ++i) {
              double& total = lse(b * heads_.num_heads + h, i);
              const double merged = steps_.merged_log_sum_exp(total, sink);
              context.row(b * rows(c) + i).segment(h * head_dim_, head_dim_) *= std::exp(total - merged);
              total = merged;
            }
          }
        }
      }
    }
  }

  // Ring, backward: every (query chunk, key chunk) block from the final log-sum-exp and D; d(k), d(v) summed
  // at the key chunk's owner, query rank by query rank (CP order), each one's steps in order.
  void ring_backward() {
    const std::int64_t group_width = group() * head_dim_;
    for (std::int64_t c = 0; c < cp_; ++c) {
      // D = rowsum(dO o O) per (batch row, local head, row): [batch * heads, rows].
      RowMatrix weighted(batch_ * heads_.num_heads, rows(c));
      for (std::int64_t b = 0; b < batch_; ++b) {
        for (std::int64_t h = 0; h < heads_.num_heads; ++h) {
          for (std::int64_t i = 0; i < rows(c); ++i) {
            weighted(b * heads_.num_heads + h, i) =
                d_contexts_[c].row(b * rows(c) + i).segment(h * head_dim_, head_dim_).dot(
                    forwards_[c].context.row(b * rows(c) + i).segment(h * head_dim_, head_dim_));
          }
        }
      }
      if (shard_.sinks) {  // d(sink_h) = -sum over rows of p_sink D
        Tensor& d_sinks = *backwards_[c].gradients.sinks;
        for (std::int64_t b = 0; b < batch_; ++b) {
          for (std::int64_t h = 0; h < heads_.num_heads; ++h) {
            for (std::int64_t i = 0; i < rows(c); ++i) {
              const double p_sink =
                  std::exp(shard_.sinks->values[h] - log_sum_exp_[c](b * heads_.num_heads + h, i));
              d_sinks.values[h] -= p_sink * weighted(b * heads_.num_heads + h, i);
            }
          }
        }
      }
      for_each_query_chunk(c, [&](std::int64_t b, std::int64_t g, const IndexRange& q_range, std::int64_t q_local) {
        const std::int64_t q_row = b * rows(c) + q_local;
        std::vector<double> lse(static_cast<std::size_t>(group() * q_range.size()));
        std::vector<double> d_weighted(lse.size());
        for (std::int64_t j = 0; j < group(); ++j) {
          for (std::int64_t i = 0; i < q_range.size(); ++i) {
            const std::int64_t head_row = b * heads_.num_heads + g * group() + j;
            lse[j * q_range.size() + i] = log_sum_exp_[c](head_row, q_local + i);
            d_weighted[j * q_range.size() + i] = weighted(head_row, q_local + i);
          }
        }
        const auto backward_source = [&](std::int64_t step) { return steps_.backward_kv_source(c, step, cp_); };
        for_each_key_chunk(b, backward_source, [&](std::int64_t step, std::int64_t source, const IndexRange& k_range,
                                                   std::int64_t k_row) {
          const ProjectedTokens& kv = forwards_[source].projected;
          // A step whose d(k), d(v) never reach the owner leaves them in a buffer nobody reads.
          const bool returned = steps_.returns_kv_gradient(step);
          RowMatrix lost_d_k, lost_d_v;
          if (!returned) {
            lost_d_k = RowMatrix::Zero(k_range.size(), head_dim_);
            lost_d_v = RowMatrix::Zero(k_range.size(), head_dim_);
          }
          attention_block_backward(
              forwards_[c].projected.q.block(q_row, g * group_width, q_range.size(), group_width),
              kv.k.block(k_row, g * head_dim_, k_range.size(), head_dim_),
              kv.v.block(k_row, g * head_dim_, k_range.size(), head_dim_),
              steps_.block_mask(geometry_, q_range, k_range, case_.inputs.key_lengths[b]), score_, lse.data(),
              d_weighted.data(), d_contexts_[c].block(q_row, g * group_width, q_range.size(), group_width),
              backwards_[c].d_q.block(q_row, g * group_width, q_range.size(), group_width),
              returned ? MatrixRef(backwards_[source].d_k.block(k_row, g * head_dim_, k_range.size(), head_dim_))
                       : MatrixRef(lost_d_k),
              returned ? MatrixRef(backwards_[source].d_v.block(k_row, g * head_dim_, k_range.size(), head_dim_))
                       : MatrixRef(lost_d_v));
        });
      });
    }
  }

  // Ulysses: CP rank a attends all tokens of its heads; forward (context back to the chunk owners) or
  // backward (d(q), d(k), d(v) back to them, sinks' gradients to a's partial).
  void ulysses_attention(bool backward) {
    const std::int64_t seq = case_.inputs.seq;
    const RankPlan& tp_rank = layout_.tp.ranks[tp_rank_];
    for (std::int64_t a = 0; a < cp_; ++a) {
      const CpRankPlan& attending = layout_.ranks[a * layout_.tp.tp_size + tp_rank_];
      const std::int64_t q_first = attending.q_heads.begin - tp_rank.q_heads.begin;
      const std::int64_t kv_first = steps_.ulysses_kv_first(layout_, tp_rank_, a);
      const std::int64_t q_heads = attending.q_heads.size(), kv_heads = attending.kv_heads.size();
      const std::int64_t group = q_heads / kv_heads, q_width = q_heads * head_dim_, kv_width = kv_heads * head_dim_;
      // All-to-all: every chunk's rows of a's head columns, at their global rows.
      RowMatrix q(batch_ * seq, q_width), k(batch_ * seq, kv_width), v(batch_ * seq, kv_width),
          d_context(backward ? batch_ * seq : 0, q_width);
      for (std::int64_t c = 0; c < cp_; ++c) {
        for (std::int64_t b = 0; b < batch_; ++b) {
          for (std::int64_t i = 0; i < rows(c); ++i) {
            const std::int64_t local = b * rows(c) + i, global = b * seq + tokens_[c].sequence[i];
            q.row(global) = forwards_[c].projected.q.row(local).segment(q_first * head_dim_, q_width);
            k.row(global) = forwards_[c].projected.k.row(local).segment(kv_first * head_dim_, kv_width);
            v.row(global) = forwards_[c].projected.v.row(local).segment(kv_first * head_dim_, kv_width);
            if (backward) d_context.row(global) = d_contexts_[c].row(local).segment(q_first * head_dim_, q_width);
          }
        }
      }
      RowMatrix context(backward ? 0 : batch_ * seq, q_width);
      RowMatrix d_q(backward ? batch_ * seq : 0, q_width), d_k(backward ? batch_ * seq : 0, kv_width),
          d_v(backward ? batch_ * seq : 0, kv_width);
      std::vector<double> d_sinks(static_cast<std::size_t>(q_heads), 0.0);
      for (std::int64_t b = 0; b < batch_; ++b) {
        const MaskSpec mask = MaskSpec::for_geometry(geometry_, seq, seq, case_.inputs.key_lengths[b]);
        for (std::int64_t g = 0; g < kv_heads; ++g) {
          const ScoreSpec score = score_.with_sinks(shard_.sinks, q_first + g * group, group);
          const auto q_block = q.block(b * seq, g * group * head_dim_, seq, group * head_dim_);
          const auto k_block = k.block(b * seq, g * head_dim_, seq, head_dim_);
          const auto v_block = v.block(b * seq, g * head_dim_, seq, head_dim_);
          if (!backward) {
            attention_group_forward(q_block, k_block, v_block, mask, score,
                                    context.block(b * seq, g * group * head_dim_, seq, group * head_dim_), nullptr);
            continue;
          }
          std::vector<double> task_sinks(static_cast<std::size_t>(group), 0.0);
          attention_group_backward(q_block, k_block, v_block, mask, score,
                                   d_context.block(b * seq, g * group * head_dim_, seq, group * head_dim_),
                                   d_q.block(b * seq, g * group * head_dim_, seq, group * head_dim_),
                                   d_k.block(b * seq, g * head_dim_, seq, head_dim_),
                                   d_v.block(b * seq, g * head_dim_, seq, head_dim_),
                                   shard_.sinks ? task_sinks.data() : nullptr);
          for (std::int64_t j = 0; j < group; ++j) d_sinks[g * group + j] += task_sinks[j];
        }
      }
      // All-to-all back: each chunk owner's rows (d(k), d(v) summed over the CP ranks sharing a KV head).
      for (std::int64_t c = 0; c < cp_; ++c) {
        for (std::int64_t b = 0; b < batch_; ++b) {
          for (std::int64_t i = 0; i < rows(c); ++i) {
            const std::int64_t local = b * rows(c) + i, global = b * seq + tokens_[c].sequence[i];
            if (!backward) {
              forwards_[c].context.row(local).segment(q_first * head_dim_, q_width) = context.row(global);
              continue;
            }
            backwards_[c].d_q.row(local).segment(q_first * head_dim_, q_width) = d_q.row(global);
            backwards_[c].d_k.row(local).segment(kv_first * head_dim_, kv_width) += d_k.row(global);
            backwards_[c].d_v.row(local).segment(kv_first * head_dim_, kv_width) += d_v.row(global);
          }
        }
      }
      if (backward && shard_.sinks) {
        for (std::int64_t j = 0; j < q_heads; ++j) backwards_[a].gradients.sinks->values[q_first + j] += d_sinks[j];
      }
    }
  }

  const ContextParallelSteps& steps_;
  const Case& case_;
  const Geometry& geometry_;
  const ParallelLayout& layout_;
  int tp_rank_;
  const std::vector<ChunkTokens>& tokens_;
  const Parameters shard_;
  LocalHeads heads_;
  std::int64_t cp_;
  std::int64_t batch_;
  std::int64_t head_dim_;
  ScoreSpec score_;
  std::vector<RankForward> forwards_;
  std::vector<RankBackward> backwards_;
  std::vector<RowMatrix> d_contexts_;     // per CP rank: d(context) of its tokens
  std::vector<RowMatrix> log_sum_exp_;    // ring: per CP rank, [batch * local heads, rows], sinks included
};

void refuse_what_is_not_modelled(const Case& test_case, const RunOptions& options) {
  const Geometry& geometry = test_case.geometry();
  ViolationList violations;
  const auto refuse = [&](const char* field, const char* what) {
    violations.add(field, what, "the context-parallel reference does not model it yet",
                   "run it with reference-tp (no context parallelism)");
  };
  if (geometry.is_latent()) refuse("geometry", "multi-head latent attention");
  if (options.intermediates) refuse("intermediates", "requested");
  violations.throw_if_any("context-parallel reference");
}

// The ring runs one block per (query chunk, key chunk) pair: (2 CP)^2 of them per batch row, KV head and TP
// rank. Bounded (kMaxContextParallelBlocks), so that a layout's size (CP up to 4096) cannot make a run that
// never ends; the bound is on work, never on time.

void refuse_unbounded_ring(const Case& test_case, const ParallelLayout& layout) {
  if (layout.cp.scheme != CpScheme::ring) return;
  const std::int64_t blocks = layout.chunk_count * layout.chunk_count * test_case.inputs.batch *
                              test_case.geometry().num_kv_heads() * layout.tp.kv_replicas;
  if (blocks > kMaxContextParallelBlocks) {
    throw InputError("context-parallel reference",
                     {{"cp_size", std::to_string(layout.cp.cp_size),
                       fmt::format("the ring runs {} blocks (chunks^2 x batch x KV heads over TP ranks); the bound "
                                   "is {}",
                                   blocks, kMaxContextParallelBlocks),
                       "a smaller CP size or batch"}});
  }
}

}  // namespace

namespace {

bool first_of_replica_group(const TpPlan& plan, int rank) {
  return rank == plan.replica_groups[plan.ranks[rank].replica_group].ranks.begin;
}

}  // namespace

void check_context_parallel_case(const Case& test_case, const CpSpec& cp) {
  validate_case(test_case);
  refuse_what_is_not_modelled(test_case, {});
  const ParallelLayout layout = make_parallel_layout(test_case.geometry(), test_case.plan.tp_size, cp);
  refuse_unbounded_ring(test_case, layout);
  refuse_unbounded_decode(test_case, layout);
}

Result run_reference_cp(const Case& test_case, const CpSpec& cp, const RunOptions& options) {
  Result result = run_context_parallel(test_case, cp, options, ContextParallelSteps());
  check_result_finite(result);
  return result;
}

Result run_context_parallel(const Case& test_case, const CpSpec& cp, const RunOptions& options,
                            const ContextParallelSteps& steps) {
  validate_case(test_case);
  refuse_what_is_not_modelled(test_case, options);
  const ParallelLayout layout = make_parallel_layout(test_case.geometry(), test_case.plan.tp_size, cp);
  refuse_unbounded_ring(test_case, layout);
  const TpPlan& plan = test_case.plan;
  const Inputs& inputs = test_case.inputs;
  const Geometry& geometry = test_case.geometry();
  const std::int64_t hidden = geometry.hidden_size(), tokens_count = inputs.batch * inputs.seq;
  const std::vector<IndexRange> all_chunks = sequence_chunks(inputs.seq, layout.chunk_count);
  // longrope chooses its factors from the whole call's largest position, which no chunk knows alone.
  const std::optional<RopeFrequencies> call_frequencies =
      geometry.rope_scaling().type == RopeScalingType::longrope
          ? std::optional(call_rope_frequencies(geometry, inputs.positions))
          : std::nullopt;
  std::vector<ChunkTokens> tokens;  // per CP rank: the same for every TP rank
  const std::vector<std::int64_t> gathered = steps.gathered_sequence(geometry, plan.tp_size, cp, inputs.seq);
  if (static_cast<std::int64_t>(gathered.size()) != inputs.seq) {
    throw std::logic_error("context-parallel steps: the output's gather must put back every token exactly once");
  }
  for (std::int64_t c = 0, first = 0; c < cp.cp_size; ++c) {
    tokens.push_back(gather_tokens(inputs, all_chunks, layout.ranks[c * plan.tp_size], hidden, steps));
    ChunkTokens& t = tokens.back();
    if (call_frequencies) t.call_frequencies = &*call_frequencies;
    t.gathered.assign(gathered.begin() + first, gathered.begin() + first + t.count());
    first += t.count();
  }
  std::vector<std::unique_ptr<TpRankRun>> runs;  // every TP rank lives through both all-reduces of a whole-width norm
  for (int t = 0; t < plan.tp_size; ++t) runs.push_back(std::make_unique<TpRankRun>(test_case, layout, t, tokens, steps));
  const bool full_width = geometry.qk_norm_full_width();
  if (full_width) {  // the forward's all-reduce over TP, per CP rank's tokens (a replicated KV head counted once)
    for (ChunkTokens& t : tokens) {
      const TokenBlock block = t.block(inputs.batch);
      t.q_sum_squares = RowVector::Zero(block.x.rows());
      t.k_sum_squares = RowVector::Zero(block.x.rows());
      for (int r = 0; r < plan.tp_size; ++r) {
        const NormSums part = rank_norm_sum_squares(runs[r]->shard(), block);
        t.q_sum_squares += part.q;
        if (first_of_replica_group(plan, r)) t.k_sum_squares += part.k;
      }
    }
  }
  const ConstMatrixMap d_out = as_matrix(inputs.dout, tokens_count);
  RowMatrix out = RowMatrix::Zero(tokens_count, hidden);
  RowMatrix dx = RowMatrix::Zero(tokens_count, hidden);
  // TP ranks in order; within one, CP ranks in order (sums over either follow that order).
  for (int t = 0; t < plan.tp_size; ++t) {
    runs[t]->forward();
    for (std::int64_t c = 0; c < cp.cp_size; ++c) {
      const RowMatrix& partial = runs[t]->rank_forward(c).partial_out;
      for (std::int64_t b = 0; b < inputs.batch; ++b) {
        for (std::int64_t i = 0; i < tokens[c].count(); ++i) {
          out.row(b * inputs.seq + tokens[c].gathered[i]) += partial.row(b * tokens[c].count() + i);
        }
      }
    }
    if (options.gradients) runs[t]->backward_attention(d_out);
  }
  std::optional<std::vector<NormSums>> dots;  // the backward's all-reduce over TP (every rank's part counts)
  if (options.gradients && full_width) {
    dots.emplace();
    for (std::int64_t c = 0; c < cp.cp_size; ++c) {
      const std::int64_t rows = inputs.batch * tokens[c].count();
      NormSums total{.q = RowVector::Zero(rows), .k = RowVector::Zero(rows)};
      for (int r = 0; r < plan.tp_size; ++r) {
        const NormSums part = rank_norm_dots(runs[r]->shard(), runs[r]->rank_forward(c), runs[r]->rank_backward(c));
        total.q += part.q;
        total.k += part.k;
      }
      dots->push_back(std::move(total));
    }
  }
  std::optional<GradientAssembler> assembler;
  if (options.gradients) assembler.emplace(plan);
  for (int t = 0; options.gradients && t < plan.tp_size; ++t) {
    std::vector<RowMatrix> chunk_dx;
    assembler->add_rank(runs[t]->backward_finish(dots ? &*dots : nullptr, first_of_replica_group(plan, t), chunk_dx));
    for (std::int64_t c = 0; c < cp.cp_size; ++c) {
      for (std::int64_t b = 0; b < inputs.batch; ++b) {
        for (std::int64_t i = 0; i < tokens[c].count(); ++i) {
          dx.row(b * inputs.seq + tokens[c].sequence[i]) += chunk_dx[c].row(b * tokens[c].count() + i);
        }
      }
    }
  }
  if (test_case.weights.o_bias) out.rowwise() += as_matrix(*test_case.weights.o_bias, 1).row(0);
  Result result;
  result.implementation = "reference-cp";
  result.out = to_tensor(out, {inputs.batch, inputs.seq, hidden});
  if (options.gradients) {
    result.gradients = Gradients{.x = to_tensor(dx, {inputs.batch, inputs.seq, hidden}),
                                 .params = std::move(*assembler).finish()};
    result.rank_gradients = rank_slices(result.gradients->params, plan);
  }
  if (options.decode && !inputs.decode.empty()) result.decode_out = run_context_parallel_decode(test_case, layout, steps);
  return result;
}

}  // namespace attncheck::reference
