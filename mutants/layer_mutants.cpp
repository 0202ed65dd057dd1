// The mutants whose bug sits inside the layer: each is the naive layer (naive_layer.hpp) with the one
// step overridden where a real implementation made the mistake.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/model/half_precision.hpp"
#include "mutants/mutant_functions.hpp"
#include "mutants/naive_layer.hpp"
#include "mutants/tiled_layer.hpp"

namespace attncheck::mutants {

namespace {

// A whole-width QK-norm (OLMo-2) run per TP rank without the all-reduce: each rank divides its slice of
// q and k by the rms of that slice alone, as a layer whose norm module knows nothing of TP does.
class WidthNormPerRank : public NaiveLayer {
  bool norm_sums_all_reduced() const override { return false; }
};

// A whole-width norm's all-reduce counting a replicated KV head's channels once per replica (every rank
// adds its k sum of squares), so with P > H_kv the k rms is taken over kv_replicas times too much.
class WidthNormReplicasCounted : public NaiveLayer {
  bool counts_kv_norm_channels(const TpPlan&, int) const override { return true; }
};

// QK-norm applied after RoPE instead of before: the rms is unchanged by the rotation, the per-channel
// weight is not.
class NormAfterRope : public NaiveLayer {
  bool norm_before_rope() const override { return false; }
};

// The sinks loaded but never used: each softmax normalises over the keys alone (and the sink gets no
// gradient), as a kernel without a sink term computes it.
class SinksIgnored : public NaiveLayer {
  std::optional<double> sink_logit(const Parameters&, std::int64_t) const override { return std::nullopt; }
};

// The sink appended to the raw q.k row before the scale is applied: it enters the softmax as
// scale * s_h instead of s_h.
class SinkScaled : public NaiveLayer {
 public:
  explicit SinkScaled(double scale) : scale_(scale) {}

 private:
  std::optional<double> sink_logit(const Parameters& shard, std::int64_t local_head) const override {
    const std::optional<double> sink = NaiveLayer::sink_logit(shard, local_head);
    return sink ? std::optional<double>(*sink * scale_) : std::nullopt;
  }
  double scale_;
};

// The sink pushed through the softcap with the scores (appended to the row before cap * tanh(s / cap)):
// it enters the softmax as cap * tanh(s_h / cap), which a layer with both a softcap and sinks gets wrong.
class SinkSoftcapped : public NaiveLayer {
 public:
  explicit SinkSoftcapped(std::optional<double> softcap) : softcap_(softcap) {}

 private:
  std::optional<double> sink_logit(const Parameters& shard, std::int64_t local_head) const override {
    const std::optional<double> sink = NaiveLayer::sink_logit(shard, local_head);
    if (!sink || !softcap_) return sink;
    return *softcap_ * std::tanh(*sink / *softcap_);
  }
  std::optional<double> softcap_;
};

// Query i also sees key i + 1 (an inclusive bound written where an exclusive one belongs).
class CausalOffByOne : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    if (geometry.causal()) keys.end = std::min({query.key_length, query.seq_k, aligned_key(query) + 2});
    return keys;
  }
};

// Key padding ignored: every key up to seq_k is seen (a padding mask built but never applied).
class PaddingIgnored : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    MaskQuery unpadded = query;
    unpadded.key_length = query.seq_k;
    return NaiveLayer::visible_keys(geometry, unpadded);
  }
};

// A query that sees no key takes the mean of V over every key: an additive mask of finite minimum
// values (-1e9, finfo.min) turns such a row's scores into equal numbers, and its softmax into 1/seq_k.
class MaskedRowMeanOfV : public NaiveLayer {
  void probabilities_without_keys(Eigen::Ref<reference::RowVector> row) const override {
    row.setConstant(1.0 / static_cast<double>(row.size()));
  }
};

// The sliding window one key too wide: query i also sees key i - window (i - window <= j instead of <).
class WindowOffByOne : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    if (geometry.sliding_window())
      keys.begin = std::max<std::int64_t>(0, aligned_key(query) - *geometry.sliding_window());
    return keys;
  }
};

// The causal mask aligned top-left: query i is key i even when a KV cache holds more keys than there
// are queries, so a decoding step attends to the start of the cache only.
class TopLeftCausal : public NaiveLayer {
  std::int64_t aligned_key(const MaskQuery& query) const override { return query.query; }
};

// Each rank attends only to its own slice of the keys [r * seq_k / P, (r + 1) * seq_k / P), as if the
// sequence were split across ranks the way the heads are.
class RankLocalKeys : public NaiveLayer {
  KeyRange visible_keys(const Geometry& geometry, const MaskQuery& query) const override {
    KeyRange keys = NaiveLayer::visible_keys(geometry, query);
    keys.begin = std::max(keys.begin, query.rank * query.seq_k / query.tp_size);
    keys.end = std::min(keys.end, (query.rank + 1) * query.seq_k / query.tp_size);
    return keys;
  }
};

// One RMS over all of a token's (local) heads instead of one per head.
class QkNormOverHeads : public NaiveLayer {
  std::int64_t heads_per_norm(std::int64_t local_heads) const override { return local_heads; }
};

// exp(score) without subtracting the row maximum: overflows for large scores.
class SoftmaxWithoutMax : public NaiveLayer {
  double softmax_shift(double) const override { return 0.0; }
};

// dK and dV assigned by each query head of a group instead of accumulated: the last head's share wins.
class GqaKvGradLastHeadOnly : public NaiveLayer {
  void add_kv_gradient(MatrixRef kv_gradient, const RowMatrix& head_share) const override { kv_gradient = head_share; }
};

// The KV tensors a reduction touches (k/v_proj, k/v_bias), by name.
template <class ParametersT>
auto kv_tensors(ParametersT& p) {
  std::vector<decltype(&p.k_proj)> tensors{&p.k_proj, &p.v_proj};
  if (p.k_bias) tensors.push_back(&*p.k_bias);
  if (p.v_bias) tensors.push_back(&*p.v_bias);
  return tensors;
}

// target's KV tensors = source's.
void assign_kv(Parameters& target, const Parameters& source) {
  const auto to = kv_tensors(target);
  const auto from = kv_tensors(source);
  for (std::size_t i = 0; i < to.size(); ++i) *to[i] = *from[i];
}

// A replicated KV head's gradient left as each rank computed it: no all-reduce over its replica group.
class ReplicatedKvGradUnsummed : public NaiveLayer {
  std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& rank_partials,
                                           const TpPlan& plan) const override {
    std::vector<Parameters> reduced = NaiveLayer::reduce_gradients(rank_partials, plan);
    for (std::size_t r = 0; r < reduced.size(); ++r) assign_kv(reduced[r], rank_partials[r]);
    return reduced;
  }
};

// KV gradients all-reduced over every rank instead of the replica group. Every rank holds the same
// number of KV rows, so the sum type-checks: it just adds different heads' gradients together.
class KvGradSummedOverAllRanks : public NaiveLayer {
  std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& rank_partials,
                                           const TpPlan& plan) const override {
    std::vector<Parameters> reduced = NaiveLayer::reduce_gradients(rank_partials, plan);
    Parameters total = rank_partials[0];
    for (std::size_t r = 1; r < rank_partials.size(); ++r) {
      const auto sum = kv_tensors(total);
      const auto term = kv_tensors(rank_partials[r]);
      for (std::size_t i = 0; i < sum.size(); ++i) {
        std::transform(sum[i]->values.begin(), sum[i]->values.end(), term[i]->values.begin(), sum[i]->values.begin(),
                       std::plus<>());
      }
    }
    for (Parameters& rank : reduced) assign_kv(rank, total);
    return reduced;
  }
};

// o_bias added by every rank's RowParallel o_proj before the partial outputs are summed.
class OBiasEveryRank : public NaiveLayer {
  bool o_bias_on_every_rank() const override { return true; }
};

// The kernels' mistakes past the first tile of keys (tiled_layer.hpp): right on any case of at most 64
// keys, so only the long profile catches them.

// A tile that raises a row's maximum does not rescale what was accumulated under the old one.
class OnlineSoftmaxMaxNotRescaled : public TiledLayer {
  void rescale(SoftmaxState&, double) const override {}
};

// The accumulator is rescaled when the maximum rises, the row sum is not.
class OnlineSoftmaxSumNotRescaled : public TiledLayer {
  void rescale(SoftmaxState& state, double factor) const override { state.accumulator *= factor; }
};

// A value rounded to nearest (ties to even) in bf16 or fp16, through float (whose rounding of a double
// is exact enough here): what a register of that type keeps.
double rounded_to(Precision precision, double value) {
  const float single = static_cast<float>(value);
  if (precision == Precision::fp16) return round_to_half(single);
  if (precision == Precision::bf16) return round_to_bfloat16(single);
  return precision == Precision::fp32 ? single : value;
}

// Accumulation in a 16-bit type where the contract (golden/SCHEMA.md, "Precision contract") asks for
// fp32: the layer is otherwise exact, so its whole error is the accumulation's. Adding key by key to a
// bf16 register loses the low bits of each term once the sum is 2^8 times larger: at seq 6 that is
// within a rounding of the bf16 yardstick, over hundreds of keys it is not.
class PvAccumulatedIn : public TiledLayer {
 public:
  explicit PvAccumulatedIn(Precision precision) : precision_(precision) {}

 private:
  void accumulate(SoftmaxState& state, const reference::RowVector& exps, const ConstMatrixRef& v_rows) const override {
    state.sum += exps.sum();
    for (Eigen::Index j = 0; j < exps.size(); ++j) {
      for (Eigen::Index c = 0; c < v_rows.cols(); ++c) {
        state.accumulator(c) = rounded_to(precision_, state.accumulator(c) + exps(j) * v_rows(j, c));
      }
    }
  }
  Precision precision_;
};

class RowSumAccumulatedIn : public TiledLayer {
 public:
  explicit RowSumAccumulatedIn(Precision precision) : precision_(precision) {}

 private:
  void accumulate(SoftmaxState& state, const reference::RowVector& exps, const ConstMatrixRef& v_rows) const override {
    for (Eigen::Index j = 0; j < exps.size(); ++j) state.sum = rounded_to(precision_, state.sum + exps(j));
    state.accumulator += exps * v_rows;
  }
  Precision precision_;
};

// Split-KV decoding combines its pieces' softmaxes weighted by how many keys each piece holds, instead
// of by their sums at a common maximum.
class SplitKvCombineByKeyCounts : public TiledLayer {
  reference::RowVector combine_pieces(std::span<const SoftmaxState> pieces,
                                      std::span<const std::int64_t> visible_keys_per_piece) const override {
    reference::RowVector combined = reference::RowVector::Zero(pieces.front().accumulator.size());
    double keys = 0.0;
    for (std::size_t p = 0; p < pieces.size(); ++p) {
      if (visible_keys_per_piece[p] == 0) continue;
      combined += static_cast<double>(visible_keys_per_piece[p]) * (pieces[p].accumulator / pieces[p].sum);
      keys += static_cast<double>(visible_keys_per_piece[p]);
    }
    return keys > 0.0 ? reference::RowVector(combined / keys) : combined;
  }
};

// A sliding window's first key tile computed for the block's last query: the block's earlier queries
// lose the keys of the tiles before it (their windows start further back).
class WindowTileSkipFromLastQuery : public TiledLayer {
  std::int64_t first_key_tile(std::span<const KeyRange> block_rows) const override {
    for (auto row = block_rows.rbegin(); row != block_rows.rend(); ++row) {
      if (row->end > row->begin) return row->begin / kTileKeys;
    }
    return 0;
  }
};

}  // namespace

Result online_softmax_max_not_rescaled(const Case& test_case) {
  return OnlineSoftmaxMaxNotRescaled().run(test_case);
}
Result online_softmax_sum_not_rescaled(const Case& test_case) {
  return OnlineSoftmaxSumNotRescaled().run(test_case);
}
Result split_kv_combine_by_key_counts(const Case& test_case) {
  return SplitKvCombineByKeyCounts().run(test_case);
}
Result window_tile_skip_from_last_query(const Case& test_case) {
  return WindowTileSkipFromLastQuery().run(test_case);
}

Result causal_off_by_one(const Case& test_case) {
  return CausalOffByOne().run(test_case);
}
Result width_norm_per_rank(const Case& test_case) {
  return WidthNormPerRank().run(test_case);
}
Result width_norm_replicas_counted(const Case& test_case) {
  return WidthNormReplicasCounted().run(test_case);
}
Result norm_after_rope(const Case& test_case) {
  return NormAfterRope().run(test_case);
}
Result sinks_ignored(const Case& test_case) {
  return SinksIgnored().run(test_case);
}
Result sink_scaled(const Case& test_case) {
  return SinkScaled(test_case.geometry().scale()).run(test_case);
}
Result sink_softcapped(const Case& test_case) {
  return SinkSoftcapped(test_case.geometry().softcap()).run(test_case);
}
Result pv_accumulated_in(Precision precision, const Case& test_case) {
  return PvAccumulatedIn(precision).run(test_case);
}
Result row_sum_accumulated_in(Precision precision, const Case& test_case) {
  return RowSumAccumulatedIn(precision).run(test_case);
}
Result padding_ignored(const Case& test_case) {
  return PaddingIgnored().run(test_case);
}
Result masked_row_mean_of_v(const Case& test_case) {
  return MaskedRowMeanOfV().run(test_case);
}
Result window_off_by_one(const Case& test_case) {
  return WindowOffByOne().run(test_case);
}
Result top_left_causal(const Case& test_case) {
  return TopLeftCausal().run(test_case);
}
Result rank_local_keys(const Case& test_case) {
  return RankLocalKeys().run(test_case);
}
Result qk_norm_over_heads(const Case& test_case) {
  return QkNormOverHeads().run(test_case);
}
Result softmax_without_max(const Case& test_case) {
  return SoftmaxWithoutMax().run(test_case);
}
Result gqa_kv_grad_last_head_only(const Case& test_case) {
  return GqaKvGradLastHeadOnly().run(test_case);
}
Result replicated_kv_grad_unsummed(const Case& test_case) {
  return ReplicatedKvGradUnsummed().run(test_case);
}
Result kv_grad_summed_over_all_ranks(const Case& test_case) {
  return KvGradSummedOverAllRanks().run(test_case);
}
Result o_bias_every_rank(const Case& test_case) {
  return OBiasEveryRank().run(test_case);
}

}  // namespace attncheck::mutants
