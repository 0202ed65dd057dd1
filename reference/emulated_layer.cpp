#include "reference/emulated_layer.hpp"

#include <fmt/format.h>
#include <Eigen/Core>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "core/errors/input_error.hpp"
#include "core/generation/splitmix_stream.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/attention_head.hpp"
#include "reference/fixed_order_product.hpp"

namespace attncheck::reference {

namespace {

template <typename S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using Row = Eigen::Matrix<S, 1, Eigen::Dynamic>;

// Rounding of every operation's result to the storage type (bf16 or fp16; nothing more for fp32 /
// fp64), and, for the jittered runs, a random nudge of one ulp on half of the results: a stand-in
// for the rounding any other correct implementation might do there (emulated_layer.hpp).
struct Storage {
  Precision precision = Precision::fp32;
  SplitMixStream* jitter = nullptr;  // null: round to nearest only

  float nearest(float value) const {
    if (precision == Precision::fp16) return static_cast<float>(static_cast<_Float16>(value));
    if (precision == Precision::bf16) {
      if (std::isnan(value)) return value;
      const auto bits = std::bit_cast<std::uint32_t>(value);
      const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;  // nearest, ties even
      return std::bit_cast<float>(rounded);
    }
    return value;
  }

  // One ulp of the storage precision away from zero or towards it.
  float step(float value, bool away) const {
    if (precision == Precision::bf16) {
      const auto bits = std::bit_cast<std::uint32_t>(value);
      return std::bit_cast<float>(away ? bits + 0x10000u : bits - 0x10000u);
    }
    if (precision == Precision::fp16) {
      const auto bits = std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
      return static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(away ? bits + 1 : bits - 1)));
    }
    const float infinity = std::numeric_limits<float>::infinity();
    return std::nextafter(value, (value > 0) == away ? infinity : -infinity);
  }

  float round(float value) const {
    value = nearest(value);
    if (jitter == nullptr || value == 0.0f || !std::isfinite(value) || !jitter->coin()) return value;
    return step(value, jitter->coin());
  }
  double round(double value) const { return value; }  // the fp64 run rounds nothing

  template <typename S>
  Mat<S> operator()(Mat<S> matrix) const {
    if (precision == Precision::bf16 || precision == Precision::fp16 || jitter != nullptr) {
      for (S& value : matrix.reshaped()) value = round(value);
    }
    return matrix;
  }
};

// Every matrix product of the layer: the same operations on every machine (fixed_order_product.hpp), so
// that a yardstick stored in a golden is the one any machine recomputes.
template <typename Lhs, typename Rhs>
auto product(const Eigen::MatrixBase<Lhs>& lhs, const Eigen::MatrixBase<Rhs>& rhs) {
  return fixed_order_product<typename Lhs::Scalar>(lhs, rhs);
}

template <typename S>
Mat<S> load(const Tensor& tensor, std::int64_t rows) {
  const Eigen::Map<const Mat<double>> map(tensor.data(), rows, tensor.numel() / rows);
  return map.template cast<S>();
}

template <typename S>
Tensor save(const Mat<S>& matrix, Shape shape) {
  Tensor tensor(std::move(shape));
  Eigen::Map<Mat<double>>(tensor.data(), matrix.rows(), matrix.cols()) = matrix.template cast<double>();
  return tensor;
}

template <typename S>
Tensor save_row(const Row<S>& row) {
  Tensor tensor({row.size()});
  for (Eigen::Index i = 0; i < row.size(); ++i) tensor.values[i] = static_cast<double>(row[i]);
  return tensor;
}

// Rounds this thread's float operations in a direction while it lives (fp32 runs only; emulated_layer.hpp
// says why only the softmax chain). No OpenMP region runs inside one: the mode is per thread.
class RoundingScope {
 public:
  RoundingScope(Rounding rounding, Precision precision) : mode_(std::fegetround()) {
    if (rounding == Rounding::nearest || precision != Precision::fp32) return;
    const int mode = rounding == Rounding::upward     ? FE_UPWARD
                     : rounding == Rounding::downward ? FE_DOWNWARD
                                                      : FE_TOWARDZERO;
    if (std::fesetround(mode) != 0) throw std::runtime_error("emulated layer: the rounding mode cannot be set");
  }
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;
  ~RoundingScope() { std::fesetround(mode_); }

 private:
  int mode_;
};

// The layer's intermediates a backward pass needs.
template <typename S>
struct Forward {
  Mat<S> q_in, k_in;         // projections before QK-norm [tokens, heads * d]
  Mat<S> q_inv, k_inv;       // 1 / rms per token and head
  Mat<S> q, k, v;            // after norm and RoPE
  std::vector<Mat<S>> p;     // probabilities per (batch, query head) [seq, seq]
  std::vector<Mat<S>> tanh;  // tanh(score / softcap) per (batch, query head), when softcapped
  std::vector<Eigen::Matrix<S, Eigen::Dynamic, 1>> p_sink;  // the sink's probability per row, with sinks
  Mat<S> context;                                           // [tokens, query width]
  Mat<S> out;
};

template <typename S>
class EmulatedLayer {
 public:
  // token_largest_positions: per token (b * seq + s), the largest position of the forward call it belongs
  // to, from which a scaled layer's frequencies are chosen (longrope); empty: the whole case is one call.
  EmulatedLayer(const Case& c, Precision precision, EmulationVariant variant,
                std::span<const std::int64_t> token_largest_positions = {})
      : c_(c),
        g_(c.geometry()),
        store_{precision},
        rounding_(variant.rounding),
        angles_(variant.angles),
        d_from_output_(variant.d_from_output),
        d_(g_.head_dim()),
        tokens_(c.inputs.batch * c.inputs.seq) {
    if (variant.jitter_seed != 0) {
      jitter_.emplace(variant.jitter_seed, "attncheck-emulated-jitter");
      store_.jitter = &*jitter_;
    }
    if (g_.rope_scaling().type != RopeScalingType::none) {
      // One set of frequencies per distinct call (two at most: longrope's short and long factors), each
      // computed once per distinct call, not per token.
      token_frequencies_.assign(static_cast<std::size_t>(tokens_), 0);
      if (token_largest_positions.empty()) {
        frequency_sets_ = {call_rope_frequencies(g_, c_.inputs.positions)};
      } else {
        std::map<std::int64_t, std::size_t> set_of_call;  // a call's largest position -> frequency_sets_ index
        std::map<bool, std::size_t> set_of;               // long_factors -> frequency_sets_ index
        for (std::int64_t t = 0; t < tokens_; ++t) {
          const std::int64_t largest = token_largest_positions[t];
          auto call = set_of_call.find(largest);
          if (call == set_of_call.end()) {
            const RopeFrequencies frequencies = rope_frequencies(g_, largest);
            const auto [entry, added] = set_of.try_emplace(frequencies.long_factors, frequency_sets_.size());
            if (added) frequency_sets_.push_back(frequencies);
            call = set_of_call.emplace(largest, entry->second).first;
          }
          token_frequencies_[t] = call->second;
        }
      }
    }
  }
  EmulatedLayer(const EmulatedLayer&) = delete;
  EmulatedLayer& operator=(const EmulatedLayer&) = delete;

  // The forward pass alone: out [batch, seq, hidden].
  Tensor forward_out() {
    x_ = load<S>(c_.inputs.x, tokens_);
    return save<S>(forward().out, {c_.inputs.batch, c_.inputs.seq, g_.hidden_size()});
  }

  Result run() {
    x_ = load<S>(c_.inputs.x, tokens_);
    Forward<S> f = forward();
    Result result;
    result.out = save<S>(f.out, {c_.inputs.batch, c_.inputs.seq, g_.hidden_size()});
    result.gradients = backward(f);
    return result;
  }

 private:
  // x @ w^T + b, each product accumulated in S, the result stored.
  Mat<S> linear(const Mat<S>& x, const Tensor& weight, const std::optional<Tensor>& bias) const {
    Mat<S> out = product(x, load<S>(weight, weight.shape[0]).transpose());
    if (bias) out.rowwise() += load<S>(*bias, 1).row(0);
    return store_(std::move(out));
  }

  // Heads normalised apart (per-head norms), or the whole row as one (rms-full-width: norm_units 1).
  std::int64_t norm_units(std::int64_t heads) const { return g_.qk_norm_full_width() ? 1 : heads; }

  void normalise(Mat<S>& rows, const Tensor& weight, Mat<S>& inverse_rms, std::int64_t heads) const {
    Row<S> factor = load<S>(weight, 1).row(0);
    if (g_.qk_norm() == QkNorm::rms_one_plus) factor.array() += S(1);
    const std::int64_t units = norm_units(heads), width = rows.cols() / units;
    inverse_rms.resize(rows.rows(), units);
    for (Eigen::Index t = 0; t < rows.rows(); ++t) {
      for (std::int64_t h = 0; h < units; ++h) {
        auto channels = rows.row(t).segment(h * width, width);
        const S inv = S(1) / std::sqrt(channels.squaredNorm() / S(width) + S(g_.qk_norm_eps()));
        inverse_rms(t, h) = inv;
        channels = (channels.array() * inv * factor.array()).matrix();
      }
    }
    rows = store_(std::move(rows));
  }

  // RoPE in S: the angle rounded as S arithmetic rounds it. sign -1 rotates back (the transpose).
  void rotate(Mat<S>& rows, std::int64_t heads, S sign) const {
    const std::int64_t pairs = g_.rotary_dim() / 2;
    // A scaled layer's frequencies (core/model/rope_frequencies.hpp), those of the call each token belongs
    // to. An unscaled layer keeps the plain formulas below, so that its yardstick is the one goldens store.
    const bool scaled = g_.rope_scaling().type != RopeScalingType::none;
    for (Eigen::Index t = 0; t < rows.rows(); ++t) {
      const S position = static_cast<S>(c_.inputs.positions[t]);
      const RopeFrequencies* scaled_pointer = scaled ? &frequency_sets_[token_frequencies_[t]] : nullptr;
      for (std::int64_t i = 0; i < pairs; ++i) {
        S cos, sin;
        if (scaled) {
          // Angles as the contract says (float64: SCHEMA.md's; float32: the frequency rounded to S, then
          // the angle in S), and the attention factor applied to cos and sin in S.
          const RopeFrequencies& scaled_frequencies = *scaled_pointer;
          const S factor = static_cast<S>(scaled_frequencies.attention_factor);
          if (angles_ == RopeAngles::float64) {
            const double angle = static_cast<double>(c_.inputs.positions[t]) * scaled_frequencies.inv_freq[i];
            cos = store_.round(static_cast<S>(std::cos(angle)) * factor);
            sin = sign * store_.round(static_cast<S>(std::sin(angle)) * factor);
          } else {
            const S angle = position * static_cast<S>(scaled_frequencies.inv_freq[i]);
            cos = store_.round(std::cos(angle) * factor);
            sin = sign * store_.round(std::sin(angle) * factor);
          }
        } else if (angles_ == RopeAngles::float64) {  // SCHEMA.md's frequencies and angle, then rounded to S
          const double angle = static_cast<double>(c_.inputs.positions[t]) *
                               std::pow(g_.rope_theta(), -2.0 * static_cast<double>(i) / g_.rotary_dim());
          cos = store_.round(static_cast<S>(std::cos(angle)));
          sin = sign * store_.round(static_cast<S>(std::sin(angle)));
        } else {
          const S frequency =
              static_cast<S>(std::pow(static_cast<S>(g_.rope_theta()), S(-2) * S(i) / S(g_.rotary_dim())));
          const S angle = position * frequency;
          cos = store_.round(std::cos(angle));
          sin = sign * store_.round(std::sin(angle));
        }
        for (std::int64_t h = 0; h < heads; ++h) {
          S* channels = rows.row(t).data() + h * d_;
          S& a = channels[g_.rope_style() == RopeStyle::interleaved ? 2 * i : i];
          S& b = channels[g_.rope_style() == RopeStyle::interleaved ? 2 * i + 1 : i + pairs];
          const S rotated_a = store_.round(a * cos - b * sin);
          const S rotated_b = store_.round(b * cos + a * sin);
          a = rotated_a;
          b = rotated_b;
        }
      }
    }
  }

  Forward<S> forward() {
    const Parameters& w = c_.weights;
    Forward<S> f;
    f.q = linear(x_, w.q_proj, w.q_bias);
    f.k = linear(x_, w.k_proj, w.k_bias);
    f.v = linear(x_, w.v_proj, w.v_bias);
    if (g_.qk_norm() != QkNorm::none) {
      f.q_in = f.q;
      f.k_in = f.k;
      normalise(f.q, *w.q_norm, f.q_inv, g_.num_heads());
      normalise(f.k, *w.k_norm, f.k_inv, g_.num_kv_heads());
    }
    rotate(f.q, g_.num_heads(), S(1));
    rotate(f.k, g_.num_kv_heads(), S(1));
    const std::int64_t batch = c_.inputs.batch, seq = c_.inputs.seq;
    f.context = Mat<S>::Zero(tokens_, g_.query_width());
    for (std::int64_t b = 0; b < batch; ++b) {
      const MaskSpec mask = MaskSpec::for_geometry(g_, seq, seq, c_.inputs.key_lengths[b]);
      for (std::int64_t h = 0; h < g_.num_heads(); ++h) {
        const std::int64_t kv = h / g_.group_size();
        const Mat<S> q = f.q.block(b * seq, h * d_, seq, d_);
        const Mat<S> k = f.k.block(b * seq, kv * d_, seq, d_);
        Mat<S> scores = store_(Mat<S>(product(q, k.transpose()) * S(g_.scale())));
        Mat<S> tanh_values;
        Mat<S> p = Mat<S>::Zero(seq, seq);
        // With sinks: the head's logit joins each row's maximum and sum (a row without keys: all on it).
        const bool has_sink = w.sinks.has_value();
        const S sink = has_sink ? S(w.sinks->values[h]) : S(0);
        Eigen::Matrix<S, Eigen::Dynamic, 1> p_sink = Eigen::Matrix<S, Eigen::Dynamic, 1>::Ones(has_sink ? seq : 0);
        {
          const RoundingScope directed(rounding_, store_.precision);  // the softmax chain
          if (g_.softcap()) {
            const S cap = S(*g_.softcap());
            tanh_values = store_(Mat<S>((scores.array() / cap).tanh().matrix()));
            scores = store_(Mat<S>(tanh_values * cap));
          }
          for (std::int64_t i = 0; i < seq; ++i) {
            const KeyInterval keys = mask.visible_keys(i);
            if (keys.end <= keys.begin) continue;  // a query that sees no key outputs 0
            auto visible = scores.row(i).segment(keys.begin, keys.end - keys.begin);
            const S maximum = has_sink ? std::max(visible.maxCoeff(), sink) : visible.maxCoeff();
            Row<S> e = (visible.array() - maximum).exp().matrix();
            for (S& value : e) value = store_.round(value);
            const S sink_term = has_sink ? store_.round(std::exp(sink - maximum)) : S(0);
            const S sum = e.sum() + sink_term;  // accumulated in S, as without a sink (no storage rounding)
            p.row(i).segment(keys.begin, keys.end - keys.begin) = e / sum;
            if (has_sink) p_sink(i) = store_.round(sink_term / sum);
          }
          p = store_(std::move(p));
        }
        f.context.block(b * seq, h * d_, seq, d_) = store_(product(p, f.v.block(b * seq, kv * d_, seq, d_)));
        f.p.push_back(std::move(p));
        f.tanh.push_back(std::move(tanh_values));
        f.p_sink.push_back(std::move(p_sink));
      }
    }
    f.out = store_(product(f.context, load<S>(w.o_proj, w.o_proj.shape[0]).transpose()));
    if (w.o_bias) f.out = store_(Mat<S>(f.out.rowwise() + load<S>(*w.o_bias, 1).row(0)));
    return f;
  }

  void normalise_backward(Mat<S>& gradient, const Mat<S>& input, const Mat<S>& inverse_rms, const Tensor& weight,
                          std::int64_t heads, Row<S>& weight_gradient) const {
    Row<S> factor = load<S>(weight, 1).row(0);
    if (g_.qk_norm() == QkNorm::rms_one_plus) factor.array() += S(1);
    const std::int64_t units = norm_units(heads), width = gradient.cols() / units;
    for (Eigen::Index t = 0; t < gradient.rows(); ++t) {
      for (std::int64_t h = 0; h < units; ++h) {
        const Row<S> n = input.row(t).segment(h * width, width) * inverse_rms(t, h);
        auto dy = gradient.row(t).segment(h * width, width);
        weight_gradient.array() += dy.array() * n.array();
        const Row<S> dn = (dy.array() * factor.array()).matrix();
        const S mean = dn.dot(n) / S(width);
        dy = inverse_rms(t, h) * (dn - mean * n);
      }
    }
    gradient = store_(std::move(gradient));
  }

  Gradients backward(const Forward<S>& f) {
    const Parameters& w = c_.weights;
    const std::int64_t batch = c_.inputs.batch, seq = c_.inputs.seq;
    const Mat<S> d_out = load<S>(c_.inputs.dout, tokens_);
    Parameters grads;
    grads.o_proj = save<S>(store_(product(d_out.transpose(), f.context)), w.o_proj.shape);
    if (w.o_bias) grads.o_bias = save_row<S>(store_(Mat<S>(d_out.colwise().sum())).row(0));
    const Mat<S> d_context = store_(product(d_out, load<S>(w.o_proj, w.o_proj.shape[0])));
    Mat<S> d_q = Mat<S>::Zero(tokens_, g_.query_width());
    Mat<S> d_k = Mat<S>::Zero(tokens_, g_.kv_width());
    Mat<S> d_v = Mat<S>::Zero(tokens_, g_.kv_width());
    Row<S> d_sinks = Row<S>::Zero(w.sinks ? g_.num_heads() : 0);
    std::size_t index = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < g_.num_heads(); ++h, ++index) {
        const std::int64_t kv = h / g_.group_size();
        const Mat<S>& p = f.p[index];
        const Mat<S> dc = d_context.block(b * seq, h * d_, seq, d_);
        const Mat<S> v = f.v.block(b * seq, kv * d_, seq, d_);
        d_v.block(b * seq, kv * d_, seq, d_) += store_(product(p.transpose(), dc));
        const Mat<S> dp = store_(product(dc, v.transpose()));
        Mat<S> ds;
        {
          const RoundingScope directed(rounding_, store_.precision);  // the softmax chain's backward
          using Column = Eigen::Matrix<S, Eigen::Dynamic, 1>;
          // D = sum_j p_ij dp_ij, or (d_from_output) rowsum(dO o O) from the stored output, itself stored.
          Column weighted;
          if (d_from_output_) {
            weighted = (dc.array() * f.context.block(b * seq, h * d_, seq, d_).array()).rowwise().sum().matrix();
            for (S& value : weighted) value = store_.round(value);
          } else {
            weighted = (p.array() * dp.array()).rowwise().sum().matrix();
          }
          if (w.sinks) d_sinks(h) -= f.p_sink[index].dot(weighted);                   // the sink's dp is 0
          ds = Mat<S>(p.array() * (dp.colwise() - weighted).array());
          if (g_.softcap()) ds = Mat<S>(ds.array() * (S(1) - f.tanh[index].array().square()));
          ds = store_(Mat<S>(ds * S(g_.scale())));
        }
        d_q.block(b * seq, h * d_, seq, d_) = store_(product(ds, f.k.block(b * seq, kv * d_, seq, d_)));
        d_k.block(b * seq, kv * d_, seq, d_) += store_(product(ds.transpose(), f.q.block(b * seq, h * d_, seq, d_)));
      }
    }
    d_k = store_(std::move(d_k));
    d_v = store_(std::move(d_v));
    rotate(d_q, g_.num_heads(), S(-1));
    rotate(d_k, g_.num_kv_heads(), S(-1));
    if (g_.qk_norm() != QkNorm::none) {
      Row<S> d_q_norm = Row<S>::Zero(w.q_norm->numel()), d_k_norm = Row<S>::Zero(w.k_norm->numel());
      normalise_backward(d_q, f.q_in, f.q_inv, *w.q_norm, g_.num_heads(), d_q_norm);
      normalise_backward(d_k, f.k_in, f.k_inv, *w.k_norm, g_.num_kv_heads(), d_k_norm);
      grads.q_norm = save_row<S>(store_(Mat<S>(d_q_norm)).row(0));
      grads.k_norm = save_row<S>(store_(Mat<S>(d_k_norm)).row(0));
    }
    Mat<S> dx = Mat<S>::Zero(tokens_, g_.hidden_size());
    const auto projection = [&](const Mat<S>& d, const Tensor& weight, Tensor& d_weight,
                                const std::optional<Tensor>& bias, std::optional<Tensor>& d_bias) {
      d_weight = save<S>(store_(product(d.transpose(), x_)), weight.shape);
      if (bias) d_bias = save_row<S>(store_(Mat<S>(d.colwise().sum())).row(0));
      dx += product(d, load<S>(weight, weight.shape[0]));
    };
    projection(d_q, w.q_proj, grads.q_proj, w.q_bias, grads.q_bias);
    projection(d_k, w.k_proj, grads.k_proj, w.k_bias, grads.k_bias);
    projection(d_v, w.v_proj, grads.v_proj, w.v_bias, grads.v_bias);
    if (w.sinks) grads.sinks = save_row<S>(store_(Mat<S>(d_sinks)).row(0));
    return Gradients{.x = save<S>(store_(std::move(dx)), c_.inputs.x.shape), .params = std::move(grads)};
  }

  const Case& c_;
  const Geometry& g_;
  std::optional<SplitMixStream> jitter_;
  Storage store_;
  Rounding rounding_;
  RopeAngles angles_;
  bool d_from_output_;
  std::int64_t d_;
  std::int64_t tokens_;
  std::vector<RopeFrequencies> frequency_sets_;  // scaled layers: each distinct call's frequencies
  std::vector<std::size_t> token_frequencies_;   // scaled layers: per token, its index into frequency_sets_
  Mat<S> x_;
};

}  // namespace

namespace {

// longrope chooses its factors per forward call (core/model/rope_frequencies.hpp). Where a decode call
// chooses otherwise than the full forward, decode/out is not the full forward's first rows: the cache
// holds keys rotated with their own call's factors. It equals one causal forward pass in which every
// token is rotated with its call's frequencies (a query sees keys of its own and earlier calls only, each
// as that call rotated it), which is what the emulated layer computes for decode/out then.
template <typename S>
Tensor decode_with_call_frequencies(const Case& test_case, Precision precision, EmulationVariant variant) {
  const std::vector<std::int64_t> largest = decode_call_largest_positions(test_case);
  return EmulatedLayer<S>(test_case, precision, variant, largest).forward_out();
}

}  // namespace

Result run_emulated(const Case& test_case, Precision precision, EmulationVariant variant) {
  if (test_case.geometry().is_latent()) {
    // The yardstick rounds a plain layer's steps; a latent layer's (its latents, norms and two head widths)
    // are not modelled, so no tolerance below fp64 can be set for it yet.
    throw InputError("low-precision yardstick",
                     {{"geometry", "multi-head latent attention", "the emulated layer models plain attention only",
                       "check latent-attention layers in fp64"}});
  }
  validate_case(test_case);
  Result result;
  const bool fp64 = precision == Precision::fp64;
  if (fp64) {
    result = EmulatedLayer<double>(test_case, precision, {}).run();
  } else {
    result = EmulatedLayer<float>(test_case, precision, variant).run();
  }
  result.implementation = "emulated-" + std::string(to_string(precision));
  const Inputs& inputs = test_case.inputs;
  if (!inputs.decode.empty()) {  // the full forward's first rows: the same arithmetic per query
    const std::int64_t total = inputs.decode.total(), hidden = test_case.geometry().hidden_size();
    const Tensor by_call = decode_call_with_other_frequencies(test_case) < 0 ? Tensor{}
                           : fp64 ? decode_with_call_frequencies<double>(test_case, precision, {})
                                  : decode_with_call_frequencies<float>(test_case, precision, variant);
    const Tensor& rows = by_call.values.empty() ? result.out : by_call;
    Tensor decode({inputs.batch, total, hidden});
    for (std::int64_t b = 0; b < inputs.batch; ++b) {
      std::copy_n(rows.values.begin() + b * inputs.seq * hidden, total * hidden,
                  decode.values.begin() + b * total * hidden);
    }
    result.decode_out = std::move(decode);
  }
  result.rank_gradients = rank_slices(result.gradients->params, test_case.plan);  // named as reference-tp names them
  return result;
}

}  // namespace attncheck::reference
