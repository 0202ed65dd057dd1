// Bugs that real frameworks shipped (docs/MUTANTS.md names each source), re-planted in
// attncheck's own terms: the mechanism, not anyone's code. Those whose mechanism is already one of the
// catalog's mutants run that mutant (catalog.cpp names both); these are the ones with a mechanism of
// their own. Geometry bugs run the reference with the geometry the framework built; bugs inside the
// layer run the naive layer (naive_layer.hpp) with the step overridden.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/model/tp_plan.hpp"
#include "core/tp/tp_shard.hpp"
#include "mutants/mutant_functions.hpp"
#include "mutants/naive_layer.hpp"
#include "mutants/tiled_layer.hpp"
#include "reference/reference.hpp"

namespace attncheck::mutants {

namespace {

// transformers #48748: Doge's own mask, built without the causal constraint, made SDPA skip is_causal:
// every token sees the whole sequence (padding and a window still applied).
class CausalMaskDropped : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    keys.end = std::min(query.key_length, query.seq_k);
    return keys;
  }
};

// TensorRT-LLM #12597: Mistral's attention never passed its window to the kernel: full attention.
class WindowNotPassed : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    keys.begin = 0;
    return keys;
  }
};

// pytorch #103963: a query whose mask is all False takes softmax over -inf only, 0 / 0 = NaN, which
// then spreads through the output and every gradient.
class MaskedRowNan : public NaiveLayer {
  void probabilities_without_keys(Eigen::Ref<reference::RowVector> row) const override {
    row.setConstant(std::numeric_limits<double>::quiet_NaN());
  }
};

// vllm #2379 (issue #1735): with tp_size > num_kv_heads the loader gave rank r the KV shard r % H_kv
// (as if it owned a KV head of its own) instead of the head its replica group shares, r / replicas.
class KvShardByRank : public NaiveLayer {
  Parameters rank_shard(const Parameters& weights, const TpPlan& plan, int rank) const override {
    Parameters shard = NaiveLayer::rank_shard(weights, plan, rank);
    if (plan.kv_replicas == 1) return shard;
    const std::int64_t loaded = rank % plan.geometry.num_kv_heads();
    const std::int64_t d = plan.geometry.head_dim(), hidden = plan.geometry.hidden_size();
    const auto rows = [&](const Tensor& full, Tensor& part, std::int64_t row_values) {
      std::copy_n(full.values.begin() + loaded * d * row_values, d * row_values, part.values.begin());
    };
    rows(weights.k_proj, shard.k_proj, hidden);
    rows(weights.v_proj, shard.v_proj, hidden);
    if (weights.k_bias) rows(*weights.k_bias, *shard.k_bias, 1);
    if (weights.v_bias) rows(*weights.v_bias, *shard.v_bias, 1);
    if (weights.k_norm && plan.geometry.qk_norm_full_width()) rows(*weights.k_norm, *shard.k_norm, 1);
    return shard;
  }
};

// llama.cpp #24823: LongRoPE's factor set chosen from the allocated context (larger than the
// pretraining length), not the call's positions: every call rotates with the long factors.
class LongropeLongFactorsAlways : public NaiveLayer {
  RopeFrequencies call_frequencies(const Geometry& geometry, std::span<const std::int64_t> positions) const override {
    const RopeScaling& scaling = geometry.rope_scaling();
    if (scaling.type != RopeScalingType::longrope) return NaiveLayer::call_frequencies(geometry, positions);
    return rope_frequencies(geometry, *scaling.original_max_position_embeddings);  // position + 1 > original
  }
};

// TransformerEngine #1197 (PR #1212): cuDNN's window is (i - w, i], exclusive of i - w where the
// framework's contract includes it, so a window passed through unchanged sees one key too few. In
// attncheck's terms (window W = W keys, itself included) the query sees W - 1 keys.
class WindowOneShort : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    if (geometry.sliding_window()) {
      keys.begin = std::max<std::int64_t>(keys.begin, aligned_key(query) - *geometry.sliding_window() + 2);
    }
    return keys;
  }
};

// flash-attention #2528: the SM80 forward divided row indices by the GQA ratio as if query heads were
// packed into the rows, though they were not: query i's causal limit is that of query i / group.
class CausalLimitByGroup : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    if (!geometry.causal()) return NaiveLayer::visible_keys(geometry, query);
    MaskQuery packed = query;
    packed.query = query.query / geometry.group_size();
    return NaiveLayer::visible_keys(geometry, packed);
  }
};

// gpt-neox #1315 (issue #1314): gqa_project read a rank's fused [Q | K | V] rows as num_heads chunks of
// [q_i (hn rows) | k fragment | v fragment] (fragments of f = hn * kv_heads / heads rows) and built each
// KV head from fragments of several chunks. With weights in the standard layout (converted from HF),
// every GQA layer's q, k and v come out mixed; where f is not whole, int() breaks the shapes.
class GqaFusedSplitByQueryHead : public NaiveLayer {
  Parameters rank_shard(const Parameters& weights, const TpPlan& plan, int rank) const override {
    Parameters shard = NaiveLayer::rank_shard(weights, plan, rank);
    const std::int64_t heads = plan.ranks[rank].q_heads.size(), kv_heads = plan.ranks[rank].kv_heads.size();
    if (kv_heads >= heads) return shard;  // multi-head: the chunks are [q_i | k_i | v_i], as intended
    const std::int64_t d = plan.geometry.head_dim();
    if (d * kv_heads % heads != 0) {
      throw std::runtime_error(fmt::format("shape '[{}, {}]' is invalid: int({} * {} / {}) channels per fragment",
                                           heads, d + 2 * (d * kv_heads / heads), d, kv_heads, heads));
    }
    const std::int64_t fragment = d * kv_heads / heads, chunk = d + 2 * fragment;
    // rows [Q | K | V] of the rank's fused weight (or bias: row_values 1), re-read chunk by chunk.
    const auto resplit = [&](Tensor& q, Tensor& k, Tensor& v, std::int64_t row_values) {
      std::vector<double> fused(q.values);
      fused.insert(fused.end(), k.values.begin(), k.values.end());
      fused.insert(fused.end(), v.values.begin(), v.values.end());
      for (std::int64_t i = 0; i < heads; ++i) {
        const auto at = [&](std::int64_t row) { return fused.begin() + (i * chunk + row) * row_values; };
        std::copy(at(0), at(d), q.values.begin() + i * d * row_values);
        std::copy(at(d), at(d + fragment), k.values.begin() + i * fragment * row_values);
        std::copy(at(d + fragment), at(chunk), v.values.begin() + i * fragment * row_values);
      }
    };
    resplit(shard.q_proj, shard.k_proj, shard.v_proj, plan.geometry.hidden_size());
    if (shard.q_bias) resplit(*shard.q_bias, *shard.k_bias, *shard.v_bias, 1);
    return shard;
  }
};

// transformers #32522: Gemma 2's FlashAttention-2 path sliced the keys (and mask) to the last W of the
// sequence instead of passing the window: every query sees only keys [seq_k - W, its own], so a query
// before that range sees nothing at all.
class KeysSlicedToWindow : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    if (geometry.sliding_window()) {
      keys.begin = std::max<std::int64_t>(keys.begin, query.seq_k - *geometry.sliding_window());
    }
    return keys;
  }
};

// transformers #47708 (issue #37574): the sliding-window cache read its kept tokens starting at slot
// past % W, right only once the cache holds a whole window: after a prefill shorter than W the next call
// reads slots that were never written and the tokens out of order.
class RollingCacheReadFromPast : public NaiveLayer {
  std::int64_t rolling_read_start(std::int64_t past, std::int64_t, std::int64_t slots) const override {
    return past % slots;
  }
};

// vllm #4405: the prefix-prefill kernel (a call of several queries over a cached prefix) masked the cached
// keys by the context length only, not by the window; its loop over the call's own keys applied the
// window. A paged cache keeps the prefix whole (no rolling cache); a single-token call takes the decode
// kernel, which windows correctly.
class PrefixPrefillWindowIgnored : public NaiveLayer {
  KeyRange cached_keys_seen(const Geometry& geometry, const MaskQuery& query, KeyRange visible) const override {
    if (query.seq_q == 1) return NaiveLayer::cached_keys_seen(geometry, query, visible);
    return {.begin = 0, .end = std::min({query.cached_keys, query.key_length, query.seq_k})};
  }
  std::optional<std::int64_t> rolling_cache_slots(const Geometry&) const override { return std::nullopt; }
};

// vllm #30887: the Triton kernels masked the scores of KV blocks outside the window but still loaded
// their V and added p * V with p = 0. Blocks wholly before the window had been released, and what they
// then hold (another sequence's values, NaN at worst, as the PR saw) reaches the output: 0 * NaN. Here
// they hold NaN, the one content a masked product does not hide. The kernel is one pass over the blocks:
// every piece's p * V reaches the row (a split-KV combine would drop a piece without keys). A paged
// cache, not a rolling one.
class ReleasedBlocksRead : public TiledLayer {
  void skip_piece(SoftmaxState& state, const ConstMatrixRef& v_rows, bool released) const override {
    if (!released) return;
    const RowMatrix freed = RowMatrix::Constant(v_rows.rows(), v_rows.cols(), std::numeric_limits<double>::quiet_NaN());
    accumulate(state, reference::RowVector::Zero(v_rows.rows()), freed);
  }
  reference::RowVector combine_pieces(std::span<const SoftmaxState> pieces,
                                      std::span<const std::int64_t> visible_keys_per_piece) const override {
    reference::RowVector context = TiledLayer::combine_pieces(pieces, visible_keys_per_piece);
    for (const SoftmaxState& piece : pieces) {
      if (piece.sum == 0.0) context += 0.0 * piece.accumulator;  // the masked blocks' p * V, p = 0
    }
    return context;
  }
  std::optional<std::int64_t> rolling_cache_slots(const Geometry&) const override { return std::nullopt; }
};

// sglang #20967: MiniMax's whole-width K norm cut its weight shard as (kv width) / TP channels at rank *
// that, as if K's channels were divided among the ranks; at TP > KV heads a rank holds a whole replicated
// head, so the cut falls mid-head (8 d / 16 = d / 2 at TP 16). Re-planted: the rank's norm weight is the
// d * local_kv_heads channels from that offset (wrapping at the end), not its KV heads' own.
class WidthNormShardByHidden : public NaiveLayer {
  Parameters rank_shard(const Parameters& weights, const TpPlan& plan, int rank) const override {
    Parameters shard = NaiveLayer::rank_shard(weights, plan, rank);
    if (!plan.geometry.qk_norm_full_width() || plan.kv_replicas == 1) return shard;
    const std::int64_t kv_width = plan.geometry.kv_width(), offset = rank * kv_width / plan.tp_size;
    std::vector<double>& local = shard.k_norm->values;
    for (std::size_t c = 0; c < local.size(); ++c) {
      local[c] = weights.k_norm->values[static_cast<std::size_t>((offset + static_cast<std::int64_t>(c)) % kv_width)];
    }
    return shard;
  }
};

// flash-attention #2896: the SM90 backward wrote each row of its dQ accumulator at a head width rounded
// to 16 (72 -> 80) while the accumulator was allocated, zeroed and read back at one rounded to 32 (96):
// the readback takes row r from the wrong place and the tail from never-written (zero) memory. Re-planted
// per (batch row, query head) for any head_dim where the two roundings differ (d % 32 in 1 .. 16).
class DqAccumulatorStrides : public NaiveLayer {
  void store_query_gradient(MatrixRef d_q_head, const RowMatrix& gradient) const override {
    const std::int64_t d = gradient.cols(), rows = gradient.rows();
    const std::int64_t written = (d + 15) / 16 * 16, allocated = (d + 31) / 32 * 32;
    if (written == allocated) return NaiveLayer::store_query_gradient(d_q_head, gradient);
    std::vector<double> accumulator(static_cast<std::size_t>(rows * allocated), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < d; ++c) accumulator[static_cast<std::size_t>(r * written + c)] = gradient(r, c);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < d; ++c) d_q_head(r, c) = accumulator[static_cast<std::size_t>(r * allocated + c)];
    }
  }
};

}  // namespace

// TransformerEngine #777: num_gqa_groups_per_partition computed from the default (num_heads) instead of
// the configured KV heads: under TP every rank expects heads / TP KV heads and the attention call fails
// on a GQA layer's K, which has kv_heads / TP (or one replicated head).
Result gqa_groups_from_default(const Case& test_case) {
  const TpPlan& plan = test_case.plan;
  const Geometry& g = plan.geometry;
  if (plan.tp_size > 1 && g.group_size() > 1) {
    throw std::runtime_error(fmt::format("DotProductAttention: expected {} KV heads per partition, got {}",
                                         g.num_heads() / plan.tp_size, plan.ranks[0].kv_heads.size()));
  }
  return reference::run_reference_tp(test_case);
}

// gpt-neox #222: RoPE applied to q and k after QK^T was formed, so the rotated q, k were never used: the
// layer has no positional signal from RoPE at all.
Result rope_after_scores(const Case& test_case) {
  GeometrySpec spec = test_case.geometry().spec();
  spec.rotary_pct.reset();
  spec.rotary_dim = 0;
  spec.rope_scaling = {};
  return run_with_spec(test_case, spec);
}

// DeepSpeed #4442 (TensorRT-LLM #785): the rotary kernel's base hard-coded to 10000 whatever rope_theta
// says (CodeLlama's 1e6).
Result rope_base_hard_coded(const Case& test_case) {
  GeometrySpec spec = test_case.geometry().spec();
  spec.rope_theta = 10000.0;
  return run_with_spec(test_case, spec);
}

// llama.cpp #8676: Llama 3.1 run with its plain theta frequencies, llama3's per-pair scaling missing.
Result llama3_scaling_missing(const Case& test_case) {
  GeometrySpec spec = test_case.geometry().spec();
  if (spec.rope_scaling.type != RopeScalingType::llama3) return reference::run_reference_tp(test_case);
  spec.rope_scaling = {};
  return run_with_spec(test_case, spec);
}

// Megatron-LM #7476: YaRN's frequencies built over the whole head before rotary_percent cut it, so the
// yarn layer rotates every channel of the head.
Result yarn_ignores_rotary_percent(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  if (g.rope_scaling().type != RopeScalingType::yarn || g.rotary_dim() == g.head_dim() || g.rotary_dim() == 0) {
    return reference::run_reference_tp(test_case);
  }
  GeometrySpec spec = g.spec();
  spec.rotary_pct.reset();
  spec.rotary_dim.reset();  // the whole head
  return run_with_spec(test_case, spec);
}

// gpt-neox #1367: one QK-norm module applied to both q and k, so k is normalised with q's weight. Per-head
// norms only (a whole-width q and k norm have different widths unless H_q = H_kv; then shared too).
Result shared_qk_norm_weight(const Case& test_case) {
  const Parameters& w = test_case.weights;
  if (!w.q_norm || w.q_norm->shape != w.k_norm->shape) return reference::run_reference_tp(test_case);
  Case mutated = test_case;
  mutated.weights.k_norm = w.q_norm;
  return reference::run_reference_tp(mutated);
}

Result causal_mask_dropped(const Case& test_case) {
  return CausalMaskDropped().run(test_case);
}
Result window_not_passed(const Case& test_case) {
  return WindowNotPassed().run(test_case);
}
Result masked_row_nan(const Case& test_case) {
  return MaskedRowNan().run(test_case);
}
Result kv_shard_by_rank(const Case& test_case) {
  return KvShardByRank().run(test_case);
}
Result longrope_long_factors_always(const Case& test_case) {
  return LongropeLongFactorsAlways().run(test_case);
}
Result window_one_short(const Case& test_case) {
  return WindowOneShort().run(test_case);
}
Result causal_limit_by_group(const Case& test_case) {
  return CausalLimitByGroup().run(test_case);
}
Result keys_sliced_to_window(const Case& test_case) {
  return KeysSlicedToWindow().run(test_case);
}
Result gqa_fused_split_by_query_head(const Case& test_case) {
  return GqaFusedSplitByQueryHead().run(test_case);
}
Result rolling_cache_read_from_past(const Case& test_case) {
  return RollingCacheReadFromPast().run(test_case);
}
Result prefix_prefill_window_ignored(const Case& test_case) {
  return PrefixPrefillWindowIgnored().run(test_case);
}
Result released_blocks_read(const Case& test_case) {
  return ReleasedBlocksRead().run(test_case);
}
Result width_norm_shard_by_hidden(const Case& test_case) {
  return WidthNormShardByHidden().run(test_case);
}
Result dq_accumulator_strides(const Case& test_case) {
  return DqAccumulatorStrides().run(test_case);
}

}  // namespace attncheck::mutants
