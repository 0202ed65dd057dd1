#include "reference/kv_cache.hpp"

#include <algorithm>
#include <stdexcept>

#include "reference/parallel.hpp"

namespace attncheck::reference {

KvCache::KvCache(std::int64_t batch, std::int64_t num_kv_heads, std::int64_t max_seq, std::int64_t key_dim,
                 std::int64_t value_dim)
    : batch_(batch),
      num_kv_heads_(num_kv_heads),
      max_seq_(max_seq),
      key_dim_(key_dim),
      value_dim_(value_dim),
      keys_(static_cast<std::size_t>(batch * num_kv_heads * max_seq * key_dim), 0.0),
      values_(static_cast<std::size_t>(batch * num_kv_heads * max_seq * value_dim), 0.0) {}

std::int64_t KvCache::key_offset(std::int64_t b, std::int64_t kv_head) const {
  return (b * num_kv_heads_ + kv_head) * max_seq_ * key_dim_;
}

std::int64_t KvCache::value_offset(std::int64_t b, std::int64_t kv_head) const {
  return (b * num_kv_heads_ + kv_head) * max_seq_ * value_dim_;
}

void KvCache::append(const RowMatrix& k, const RowMatrix& v, std::int64_t count) {
  if (length_ + count > max_seq_) throw std::logic_error("KvCache: append past max_seq");
  for (std::int64_t b = 0; b < batch_; ++b) {
    for (std::int64_t g = 0; g < num_kv_heads_; ++g) {
      MatrixMap key_rows(keys_.data() + key_offset(b, g) + length_ * key_dim_, count, key_dim_);
      MatrixMap value_rows(values_.data() + value_offset(b, g) + length_ * value_dim_, count, value_dim_);
      key_rows = k.block(b * count, g * key_dim_, count, key_dim_);
      value_rows = v.block(b * count, g * value_dim_, count, value_dim_);
    }
  }
  length_ += count;
}

ConstMatrixMap KvCache::keys(std::int64_t b, std::int64_t kv_head) const {
  return ConstMatrixMap(keys_.data() + key_offset(b, kv_head), length_, key_dim_);
}

ConstMatrixMap KvCache::values(std::int64_t b, std::int64_t kv_head) const {
  return ConstMatrixMap(values_.data() + value_offset(b, kv_head), length_, value_dim_);
}

CallTokens gather_call_tokens(const Inputs& inputs, std::int64_t start, std::int64_t count) {
  const ConstMatrixMap x = as_matrix(inputs.x, inputs.batch * inputs.seq);
  CallTokens tokens{.x = RowMatrix(inputs.batch * count, x.cols()),
                    .positions = std::vector<std::int64_t>(static_cast<std::size_t>(inputs.batch * count))};
  for (std::int64_t b = 0; b < inputs.batch; ++b) {
    tokens.x.middleRows(b * count, count) = x.middleRows(b * inputs.seq + start, count);
    std::copy_n(inputs.positions.begin() + b * inputs.seq + start, count, tokens.positions.begin() + b * count);
  }
  return tokens;
}

RowMatrix decode_call(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                      const TokenBlock& tokens, std::span<const std::int64_t> key_lengths, KvCache& cache) {
  const std::int64_t head_dim = geometry.head_dim();
  const std::int64_t count = tokens.seq;
  const ProjectedTokens projected = project_tokens(geometry, heads, shard, tokens);
  cache.append(projected.k, projected.v, count);

  RowMatrix context(projected.q.rows(), projected.q.cols());
  const ScoreSpec score = ScoreSpec::for_geometry(geometry);
  const std::int64_t group = heads.group_size();
  const std::int64_t group_width = group * head_dim;
  const std::int64_t tasks = tokens.batch * heads.num_kv_heads;
  const bool parallel = worth_parallel(tasks, 2 * group * count * cache.length() * head_dim);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t b = task / heads.num_kv_heads;
    const std::int64_t g = task % heads.num_kv_heads;
    const MaskSpec mask = MaskSpec::for_geometry(geometry, count, cache.length(), key_lengths[b]);
    attention_group_forward(projected.q.block(b * count, g * group_width, count, group_width), cache.keys(b, g),
                            cache.values(b, g), mask, score.with_sinks(shard.sinks, g * group, group),
                            context.block(b * count, g * group_width, count, group_width), nullptr);
  }
  const ConstMatrixMap o_proj = as_matrix(shard.o_proj, shard.o_proj.shape[0]);
  RowMatrix partial_out(context.rows(), o_proj.rows());
  partial_out.noalias() = context * o_proj.transpose();
  return partial_out;
}

}  // namespace attncheck::reference
