#include "torch_impl/attention_steps.hpp"

#include <limits>

#include "core/model/rope_frequencies.hpp"

namespace attncheck::torch_impl {

RotaryEmbedding::RotaryEmbedding(const Geometry& geometry, const torch::TensorOptions& options)
    : geometry_(geometry), dtype_(options.dtype().toScalarType()) {
  // The angles' frequencies in float64 exactly as golden/SCHEMA.md (core/model/rope_frequencies.hpp): a
  // 1-ulp difference here costs up to 1e5 ulps at positions near 1e5. longrope has two sets, chosen per
  // call from its largest position (rotate()); the others one.
  const RopeFrequencies short_frequencies = rope_frequencies(geometry, 0);
  inv_freq_ = torch::tensor(short_frequencies.inv_freq, torch::kFloat64).to(options.device());
  attention_factor_ = short_frequencies.attention_factor;
  if (geometry.rope_scaling().type == RopeScalingType::longrope) {
    const std::int64_t original = *geometry.rope_scaling().original_max_position_embeddings;
    long_inv_freq_ = torch::tensor(rope_frequencies(geometry, original).inv_freq, torch::kFloat64).to(options.device());
  }
}

torch::Tensor RotaryEmbedding::rotate(const torch::Tensor& values, const torch::Tensor& positions) const {
  const std::int64_t pairs = geometry_.rotary_dim() / 2;
  if (pairs == 0) return values;
  // longrope: the long factors when the call's largest position + 1 exceeds the pretraining length.
  const bool long_factors =
      long_inv_freq_.defined() &&
      positions.max().item<std::int64_t>() + 1 > *geometry_.rope_scaling().original_max_position_embeddings;
  // [batch, seq, pairs], and [batch, 1, seq, pairs] for values with a heads dimension.
  torch::Tensor angles = positions.to(torch::kFloat64).unsqueeze(-1) * (long_factors ? long_inv_freq_ : inv_freq_);
  if (values.dim() == 4) angles = angles.unsqueeze(1);
  const torch::Tensor cos = (angles.cos() * attention_factor_).to(dtype_);
  const torch::Tensor sin = (angles.sin() * attention_factor_).to(dtype_);
  if (geometry_.rope_style() == RopeStyle::half_split) {  // channel i with i + rotary_dim / 2
    const torch::Tensor a = values.narrow(-1, 0, pairs);
    const torch::Tensor b = values.narrow(-1, pairs, pairs);
    return torch::cat({a * cos - b * sin, b * cos + a * sin}, -1);
  }
  // channel 2i with 2i + 1
  const torch::Tensor channel_pairs = values.unflatten(-1, {pairs, 2});
  const torch::Tensor a = channel_pairs.select(-1, 0);
  const torch::Tensor b = channel_pairs.select(-1, 1);
  return torch::stack({a * cos - b * sin, b * cos + a * sin}, -1).flatten(-2);
}

torch::Tensor visible_keys(const Geometry& geometry, std::int64_t batch, std::int64_t seq, std::int64_t past,
                           const torch::Tensor& key_lengths) {
  const std::int64_t keys = past + seq;
  const auto index_options = torch::TensorOptions().dtype(torch::kInt64).device(key_lengths.device());
  const torch::Tensor query_index = torch::arange(seq, index_options).add(past).view({seq, 1});
  const torch::Tensor key_index = torch::arange(keys, index_options).view({1, keys});
  torch::Tensor visible = key_index.lt(key_lengths.view({batch, 1, 1, 1}));
  if (geometry.causal()) visible = visible.logical_and(key_index.le(query_index));
  if (geometry.sliding_window()) visible = visible.logical_and(key_index.gt(query_index - *geometry.sliding_window()));
  return visible.expand({batch, 1, seq, keys});
}

torch::Tensor math_attention(const Geometry& geometry, const torch::Tensor& q, const torch::Tensor& keys,
                             const torch::Tensor& values, const torch::Tensor& visible, const torch::Tensor& sinks) {
  const torch::Tensor has_key = visible.any(-1, /*keepdim=*/true);  // [batch, 1, seq_q, 1]
  // Memory: every step below makes a [batch, heads, seq_q, seq_k] tensor, so a step changes its input in place
  // where autograd keeps no copy of that input (a product by a number keeps none; tanh and softmax keep
  // their outputs, which are never changed), and a mask that hides nothing is not applied. The same
  // numbers, several such tensors fewer at once (docs/ARCHITECTURE.md, "Memory").
  const bool every_query_sees_a_key = has_key.all().item<bool>();
  torch::Tensor scores = torch::matmul(q, keys.transpose(-2, -1)).mul_(geometry.scale());
  if (geometry.softcap()) scores = torch::tanh(scores.div_(*geometry.softcap())) * *geometry.softcap();
  if (!visible.all().item<bool>()) scores.masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
  // A query that sees no key outputs 0 (core/model/case.hpp): its row is made finite before the softmax so
  // that no NaN reaches the backward pass, then zeroed.
  const torch::Tensor zero = torch::zeros({}, scores.options());
  if (!every_query_sees_a_key) scores = torch::where(has_key, scores, zero);
  torch::Tensor probabilities;
  if (sinks.defined()) {
    // gpt-oss's form: each head's sink logit is one more column of the softmax, dropped afterwards.
    const std::int64_t heads = q.size(1);
    const torch::Tensor sink_column = sinks.view({1, heads, 1, 1}).expand({scores.size(0), heads, scores.size(2), 1});
    const torch::Tensor with_sink = torch::softmax(torch::cat({scores, sink_column}, -1), -1);
    probabilities = with_sink.narrow(-1, 0, scores.size(-1));
  } else {
    probabilities = torch::softmax(scores, -1);
  }
  if (!every_query_sees_a_key) probabilities = torch::where(has_key, probabilities, zero);
  return torch::matmul(probabilities, values);
}

}  // namespace attncheck::torch_impl
