#include "core/tp/tp_shard.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace attncheck {

namespace {

// rows [begin, end) of a row-major [rows, cols] tensor (or elements of a vector).
Tensor slice_rows(const Tensor& tensor, IndexRange rows) {
  const std::int64_t cols = tensor.shape.size() == 2 ? tensor.shape[1] : 1;
  Shape shape = tensor.shape;
  shape[0] = rows.size();
  // Built from the range rather than zero-filled and then overwritten: a wide layer's shards are hundreds of
  // megabytes, and zeroing them first was a second pass over fresh memory on one thread.
  return Tensor(std::move(shape), std::vector<double>(tensor.values.begin() + rows.begin * cols,
                                                      tensor.values.begin() + rows.end * cols));
}

// columns [begin, end) of a row-major [rows, cols] tensor.
Tensor slice_columns(const Tensor& tensor, IndexRange columns) {
  const std::int64_t rows = tensor.shape[0];
  const std::int64_t cols = tensor.shape[1];
  std::vector<double> values;  // appended row by row, not zero-filled first (as slice_rows)
  values.reserve(static_cast<std::size_t>(rows * columns.size()));
  for (std::int64_t r = 0; r < rows; ++r) {
    values.insert(values.end(), tensor.values.begin() + r * cols + columns.begin,
                  tensor.values.begin() + r * cols + columns.end);
  }
  return Tensor({rows, columns.size()}, std::move(values));
}

enum class Put { add, copy };

// Element by element, so OpenMP's threads change no bit; threads only for a wide layer's tensors (on one thread
// these loops over hundreds of megabytes, each page fresh, held the other core idle).
constexpr std::int64_t kParallelElements = std::int64_t{1} << 18;

// For r < row_count: into[r * into_stride + c] (+)= from[r * width + c], c < width. `from` is a rank's
// row-major [row_count, width] slice; `into` points at that slice's first element in the full tensor.
void put_slice(double* into, std::int64_t into_stride, const double* from, std::int64_t row_count,
               std::int64_t width, Put put) {
#pragma omp parallel for schedule(static) if (row_count * width >= kParallelElements)
  for (std::int64_t r = 0; r < row_count; ++r) {
    double* to = into + r * into_stride;
    const double* source = from + r * width;
    if (put == Put::add) {
      for (std::int64_t c = 0; c < width; ++c) to[c] += source[c];
    } else {
      std::copy_n(source, width, to);
    }
  }
}

// target rows [begin, end) (+)= source (whole), for row-major tensors with the same column count (or vectors).
void put_rows(Tensor& target, IndexRange rows, const Tensor& source, Put put) {
  const std::int64_t cols = target.shape.size() == 2 ? target.shape[1] : 1;
  put_slice(target.values.data() + rows.begin * cols, cols, source.values.data(), rows.size(), cols, put);
}

// target columns [begin, end) (+)= source (whole), for row-major [rows, cols] tensors.
void put_columns(Tensor& target, IndexRange columns, const Tensor& source, Put put) {
  put_slice(target.values.data() + columns.begin, target.shape[1], source.values.data(), target.shape[0],
            columns.size(), put);
}

// Puts a rank's head-sliced tensors into their slices of the full ones (q/k/v_proj and their biases by
// rows, o_proj by columns; whole-width norm weights by channel), adding or copying. The tensors every
// rank holds whole are the caller's.
void put_head_slices(Parameters& full, const Parameters& rank, const RankPlan& plan, bool norms_by_channel, Put put) {
  const auto rows = [put](Tensor& target, IndexRange range, const Tensor& source) {
    put_rows(target, range, source, put);
  };
  if (full.has_q_proj()) rows(full.q_proj, plan.q_proj_rows, rank.q_proj);
  if (full.has_kv_proj()) {
    rows(full.k_proj, plan.kv_proj_rows, rank.k_proj);
    rows(full.v_proj, plan.kv_proj_rows, rank.v_proj);
  }
  if (full.q_b_proj) rows(*full.q_b_proj, plan.q_proj_rows, *rank.q_b_proj);
  if (full.kv_b_proj) rows(*full.kv_b_proj, plan.kv_b_proj_rows, *rank.kv_b_proj);
  if (full.q_bias) rows(*full.q_bias, plan.q_proj_rows, *rank.q_bias);
  if (full.k_bias) rows(*full.k_bias, plan.kv_proj_rows, *rank.k_bias);
  if (full.v_bias) rows(*full.v_bias, plan.kv_proj_rows, *rank.v_bias);
  if (full.sinks) rows(*full.sinks, plan.q_heads, *rank.sinks);  // one per query head, sharded with it
  if (norms_by_channel) {  // whole-width QK-norm: a weight per q / k channel, sharded with its head
    rows(*full.q_norm, plan.q_proj_rows, *rank.q_norm);
    rows(*full.k_norm, plan.kv_proj_rows, *rank.k_norm);
  }
  put_columns(full.o_proj, plan.o_proj_columns, rank.o_proj, put);
}

void add_whole(std::optional<Tensor>& target, const std::optional<Tensor>& source) {
  for (std::size_t i = 0; i < target->values.size(); ++i) target->values[i] += source->values[i];
}

// Latent attention's tensors every rank holds whole (tp_plan.hpp), by member.
constexpr std::optional<Tensor> Parameters::*kLatentReplicated[] = {
    &Parameters::q_a_proj, &Parameters::q_a_layernorm, &Parameters::kv_a_proj_with_mqa, &Parameters::kv_a_layernorm};

void check_rank_count(const std::vector<Parameters>& rank_partials, const TpPlan& plan) {
  if (static_cast<int>(rank_partials.size()) != plan.tp_size) {
    throw std::logic_error("tp_shard: one partial gradient set per rank is needed");
  }
}

}  // namespace

ParameterWidths rank_widths(const RankPlan& rank) {
  return {.query_width = rank.query_width,
          .kv_width = rank.kv_b_proj_rows.size() > 0 ? rank.kv_b_proj_rows.size() : rank.kv_width,
          .num_heads = rank.q_heads.size(),
          .value_width = rank.value_width};
}

Parameters shard_parameters(const Parameters& full, const TpPlan& plan, int rank) {
  const RankPlan& rank_plan = plan.ranks.at(rank);
  Parameters shard;
  shard.latent = full.latent;
  if (full.has_q_proj()) shard.q_proj = slice_rows(full.q_proj, rank_plan.q_proj_rows);
  if (full.has_kv_proj()) {
    shard.k_proj = slice_rows(full.k_proj, rank_plan.kv_proj_rows);
    shard.v_proj = slice_rows(full.v_proj, rank_plan.kv_proj_rows);
  }
  if (full.q_b_proj) shard.q_b_proj = slice_rows(*full.q_b_proj, rank_plan.q_proj_rows);
  if (full.kv_b_proj) shard.kv_b_proj = slice_rows(*full.kv_b_proj, rank_plan.kv_b_proj_rows);
  for (auto member : kLatentReplicated) shard.*member = full.*member;
  shard.o_proj = slice_columns(full.o_proj, rank_plan.o_proj_columns);
  if (full.q_bias) shard.q_bias = slice_rows(*full.q_bias, rank_plan.q_proj_rows);
  if (full.k_bias) shard.k_bias = slice_rows(*full.k_bias, rank_plan.kv_proj_rows);
  if (full.v_bias) shard.v_bias = slice_rows(*full.v_bias, rank_plan.kv_proj_rows);
  if (full.sinks) shard.sinks = slice_rows(*full.sinks, rank_plan.q_heads);
  shard.o_bias = full.o_bias;
  if (full.q_norm && plan.geometry.qk_norm_full_width()) {  // the channels of the rank's heads
    shard.q_norm = slice_rows(*full.q_norm, rank_plan.q_proj_rows);
    shard.k_norm = slice_rows(*full.k_norm, rank_plan.kv_proj_rows);
  } else {
    shard.q_norm = full.q_norm;
    shard.k_norm = full.k_norm;
  }
  return shard;
}

GradientAssembler::GradientAssembler(const TpPlan& plan)
    : plan_(plan), full_(zero_parameters(plan.geometry, full_widths(plan.geometry))) {}

void GradientAssembler::add_rank(const Parameters& partial) {
  if (next_rank_ >= plan_.tp_size) throw std::logic_error("GradientAssembler: more ranks than the plan has");
  const bool norms_by_channel = plan_.geometry.qk_norm_full_width();
  put_head_slices(full_, partial, plan_.ranks[next_rank_], norms_by_channel, Put::add);
  if (full_.q_norm && !norms_by_channel) {  // per-head norm weights: every rank's heads used them
    add_whole(full_.q_norm, partial.q_norm);
    add_whole(full_.k_norm, partial.k_norm);
  }
  if (full_.o_bias && next_rank_ == 0) full_.o_bias = partial.o_bias;  // the same on every rank
  for (auto member : kLatentReplicated) {  // every rank's heads read the whole latent
    if (full_.*member) add_whole(full_.*member, partial.*member);
  }
  ++next_rank_;
}

Parameters GradientAssembler::finish() && {
  if (next_rank_ != plan_.tp_size) throw std::logic_error("GradientAssembler: not every rank was added");
  return std::move(full_);
}

Parameters assemble_gradients(const std::vector<Parameters>& rank_partials, const TpPlan& plan) {
  check_rank_count(rank_partials, plan);
  GradientAssembler assembler(plan);
  for (const Parameters& partial : rank_partials) assembler.add_rank(partial);
  return std::move(assembler).finish();
}

std::vector<Parameters> rank_slices(const Parameters& assembled, const TpPlan& plan) {
  std::vector<Parameters> slices;
  slices.reserve(plan.tp_size);
  for (int r = 0; r < plan.tp_size; ++r) slices.push_back(shard_parameters(assembled, plan, r));
  return slices;
}

Parameters gather_gradients(const std::vector<Parameters>& rank_gradients, const TpPlan& plan) {
  check_rank_count(rank_gradients, plan);
  Parameters full = zero_parameters(plan.geometry, full_widths(plan.geometry));
  // Ranks in reverse, so that the first rank holding a slice writes it last.
  for (int r = plan.tp_size - 1; r >= 0; --r) {
    const Parameters& rank = rank_gradients[r];
    put_head_slices(full, rank, plan.ranks[r], plan.geometry.qk_norm_full_width(), Put::copy);
    full.o_bias = rank.o_bias;
    for (auto member : kLatentReplicated) full.*member = rank.*member;
    if (!plan.geometry.qk_norm_full_width()) {
      full.q_norm = rank.q_norm;
      full.k_norm = rank.k_norm;
    }
  }
  return full;
}

std::vector<Parameters> reduce_rank_gradients(const std::vector<Parameters>& rank_partials, const TpPlan& plan) {
  return rank_slices(assemble_gradients(rank_partials, plan), plan);
}

}  // namespace attncheck
