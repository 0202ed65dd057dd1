#include "reference/emulated_layer.hpp"

#include <fmt/format.h>
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/generation/splitmix_stream.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "reference/attention_head.hpp"
#include "reference/emulated_arithmetic.hpp"
#include "reference/emulated_attention.hpp"
#include "reference/emulated_latent_layer.hpp"
#include "reference/emulated_norm.hpp"
#include "reference/emulated_rope.hpp"

namespace attncheck::reference {

namespace {

using namespace emulation;

// The layer's intermediates a backward pass needs.
template <typename S>
struct Forward {
  Mat<S> q_in, k_in;                 // projections before QK-norm [tokens, heads * d]
  Mat<S> q_inv, k_inv;               // 1 / rms per token and head
  Mat<S> q, k, v;                    // after norm and RoPE
  std::vector<HeadForward<S>> heads;  // per (batch, query head): p, tanh, the sink's p
  Mat<S> context;                    // [tokens, query width]
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
        d_from_output_(variant.d_from_output),
        p_from_lse_(variant.p_from_lse),
        rope_(c, store_, variant.angles, token_largest_positions),
        d_(g_.head_dim()),
        tokens_(c.inputs.batch * c.inputs.seq) {
    if (variant.jitter_seed != 0) {
      jitter_.emplace(variant.jitter_seed, "attncheck-emulated-jitter");
      store_.jitter = &*jitter_;
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
  static const Tensor* pointer(const std::optional<Tensor>& tensor) { return tensor ? &*tensor : nullptr; }

  // Heads normalised apart (per-head norms), or the whole row as one (rms-full-width: norm_units 1).
  std::int64_t norm_units(std::int64_t heads) const { return g_.qk_norm_full_width() ? 1 : heads; }

  Row<S> norm_factor(const Tensor& weight) const {
    Row<S> factor = load<S>(weight, 1).row(0);
    if (g_.qk_norm() == QkNorm::rms_one_plus) factor.array() += S(1);
    return factor;
  }

  void rotate(Mat<S>& rows, std::int64_t heads, S sign) const { rope_.rotate(rows, heads, d_, 0, sign); }

  HeadArithmetic arithmetic() const {
    return {.store = store_, .rounding = rounding_, .geometry = g_, .p_from_lse = p_from_lse_};
  }

  Forward<S> forward() {
    const Parameters& w = c_.weights;
    Forward<S> f;
    f.q = linear(store_, x_, w.q_proj, pointer(w.q_bias));
    f.k = linear(store_, x_, w.k_proj, pointer(w.k_bias));
    f.v = linear(store_, x_, w.v_proj, pointer(w.v_bias));
    if (g_.qk_norm() != QkNorm::none) {
      f.q_in = f.q;
      f.k_in = f.k;
      rms_normalise(store_, f.q, norm_factor(*w.q_norm), norm_units(g_.num_heads()), g_.qk_norm_eps(), f.q_inv);
      rms_normalise(store_, f.k, norm_factor(*w.k_norm), norm_units(g_.num_kv_heads()), g_.qk_norm_eps(), f.k_inv);
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
        const Mat<S> v = f.v.block(b * seq, kv * d_, seq, d_);
        const S sink = w.sinks ? S(w.sinks->values[h]) : S(0);
        f.heads.push_back(attend_forward<S>(arithmetic(), mask, q, k, v, w.sinks ? &sink : nullptr,
                                            f.context.block(b * seq, h * d_, seq, d_)));
      }
    }
    f.out = store_(product(f.context, load<S>(w.o_proj, w.o_proj.shape[0]).transpose()));
    if (w.o_bias) f.out = store_(Mat<S>(f.out.rowwise() + load<S>(*w.o_bias, 1).row(0)));
    return f;
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
        const Mat<S> dc = d_context.block(b * seq, h * d_, seq, d_);
        const Mat<S> q = f.q.block(b * seq, h * d_, seq, d_);
        const Mat<S> k = f.k.block(b * seq, kv * d_, seq, d_);
        const Mat<S> v = f.v.block(b * seq, kv * d_, seq, d_);
        const HeadGradients<S> head =
            attend_backward<S>(arithmetic(), d_from_output_, f.heads[index], f.context.block(b * seq, h * d_, seq, d_),
                               dc, q, k, v, w.sinks ? &d_sinks(h) : nullptr);
        d_v.block(b * seq, kv * d_, seq, d_) += head.d_v;
        d_q.block(b * seq, h * d_, seq, d_) = head.d_q;
        d_k.block(b * seq, kv * d_, seq, d_) += head.d_k;
      }
    }
    d_k = store_(std::move(d_k));
    d_v = store_(std::move(d_v));
    rotate(d_q, g_.num_heads(), S(-1));
    rotate(d_k, g_.num_kv_heads(), S(-1));
    if (g_.qk_norm() != QkNorm::none) {
      Row<S> d_q_norm = Row<S>::Zero(w.q_norm->numel()), d_k_norm = Row<S>::Zero(w.k_norm->numel());
      rms_normalise_backward(store_, d_q, f.q_in, f.q_inv, norm_factor(*w.q_norm), norm_units(g_.num_heads()),
                             d_q_norm);
      rms_normalise_backward(store_, d_k, f.k_in, f.k_inv, norm_factor(*w.k_norm), norm_units(g_.num_kv_heads()),
                             d_k_norm);
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
  bool d_from_output_;
  bool p_from_lse_;
  EmulatedRope<S> rope_;
  std::int64_t d_;
  std::int64_t tokens_;
  Mat<S> x_;
};

}  // namespace

namespace {

// longrope chooses its factors per forward call (core/model/rope_frequencies.hpp). Where a decode call
// chooses otherwise than the full forward, decode/out is not the full forward's first rows: the cache
// holds keys rotated with their own call's factors. It equals one causal forward pass in which every
// token is rotated with its call's frequencies (a query sees keys of its own and earlier calls only, each
// as that call rotated it), which is what the emulated layer computes for decode/out then.
Tensor decode_with_call_frequencies(const Case& test_case, Precision precision, EmulationVariant variant) {
  const std::vector<std::int64_t> largest = decode_call_largest_positions(test_case);
  if (test_case.geometry().is_latent()) return latent_forward_out(test_case, precision, variant, largest);
  if (precision == Precision::fp64)
    return EmulatedLayer<double>(test_case, precision, fp64_variant(variant), largest).forward_out();
  return EmulatedLayer<float>(test_case, precision, variant, largest).forward_out();
}

Result run_layer(const Case& test_case, Precision precision, EmulationVariant variant) {
  if (test_case.geometry().is_latent()) return run_latent_layer(test_case, precision, variant);
  if (precision == Precision::fp64) return EmulatedLayer<double>(test_case, precision, fp64_variant(variant)).run();
  return EmulatedLayer<float>(test_case, precision, variant).run();
}

}  // namespace

Result run_emulated(const Case& test_case, Precision precision, EmulationVariant variant) {
  validate_case(test_case);
  Result result = run_layer(test_case, precision, variant);
  result.implementation = "emulated-" + std::string(to_string(precision));
  const Inputs& inputs = test_case.inputs;
  if (!inputs.decode.empty()) {  // the full forward's first rows: the same arithmetic per query
    const std::int64_t total = inputs.decode.total(), hidden = test_case.geometry().hidden_size();
    const Tensor by_call = decode_call_with_other_frequencies(test_case) < 0
                               ? Tensor{}
                               : decode_with_call_frequencies(test_case, precision, variant);
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
