// KV-cache decoding on one rank: a prefill call, then steps of one or more tokens, each attending to
// everything cached so far (bottom-right causal alignment, core/model/case.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/case.hpp"
#include "reference/rank_layer.hpp"

namespace attncheck::reference {

// One rank's cache. keys and values: [batch, num_kv_heads, max_seq, head_dim] row-major, the rank's
// local KV heads only; rows [0, length) of each (batch, head) block are filled.
class KvCache {
 public:
  KvCache(std::int64_t batch, std::int64_t num_kv_heads, std::int64_t max_seq, std::int64_t head_dim)
      : KvCache(batch, num_kv_heads, max_seq, head_dim, head_dim) {}
  // Keys and values of different widths (latent attention: qk_head_dim and v_head_dim expanded;
  // kv_lora_rank + qk_rope_head_dim and kv_lora_rank absorbed).
  KvCache(std::int64_t batch, std::int64_t num_kv_heads, std::int64_t max_seq, std::int64_t key_dim,
          std::int64_t value_dim);

  std::int64_t length() const { return length_; }
  // Appends `count` tokens per batch row: k is [batch * count, num_kv_heads * key_dim] and v
  // [batch * count, num_kv_heads * value_dim], token-major.
  // Throws std::logic_error past max_seq.
  void append(const RowMatrix& k, const RowMatrix& v, std::int64_t count);
  // The filled [length, head_dim] keys / values of one batch row and KV head.
  ConstMatrixMap keys(std::int64_t b, std::int64_t kv_head) const;
  ConstMatrixMap values(std::int64_t b, std::int64_t kv_head) const;

 private:
  std::int64_t key_offset(std::int64_t b, std::int64_t kv_head) const;
  std::int64_t value_offset(std::int64_t b, std::int64_t kv_head) const;

  std::int64_t batch_;
  std::int64_t num_kv_heads_;
  std::int64_t max_seq_;
  std::int64_t key_dim_;
  std::int64_t value_dim_;
  std::int64_t length_ = 0;
  std::vector<double> keys_;
  std::vector<double> values_;
};

// Tokens [start, start + count) of every batch row of the case's inputs, gathered contiguous:
// x [batch * count, hidden_size] and their positions [batch * count].
struct CallTokens {
  RowMatrix x;
  std::vector<std::int64_t> positions;
  TokenBlock block(std::int64_t batch, std::int64_t count) const {
    return {.batch = batch, .seq = count, .x = ConstMatrixMap(x.data(), x.rows(), x.cols()), .positions = positions};
  }
};
CallTokens gather_call_tokens(const Inputs& inputs, std::int64_t start, std::int64_t count);

// Runs tokens.seq new tokens of every batch row (at key indices cache.length() ..) through one rank:
// appends their k and v to the cache, attends over the whole cache, and returns the rank's o_proj
// partial [batch * tokens.seq, hidden_size] (without o_bias).
RowMatrix decode_call(const Geometry& geometry, const LocalHeads& heads, const Parameters& shard,
                      const TokenBlock& tokens, std::span<const std::int64_t> key_lengths, KvCache& cache);

}  // namespace attncheck::reference
