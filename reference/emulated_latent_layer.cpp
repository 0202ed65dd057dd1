#include "reference/emulated_latent_layer.hpp"

#include <optional>
#include <vector>

#include "reference/attention_head.hpp"
#include "reference/emulated_arithmetic.hpp"
#include "reference/emulated_attention.hpp"
#include "reference/emulated_norm.hpp"
#include "reference/emulated_rope.hpp"

namespace attncheck::reference::emulation {

namespace {

// The forward's intermediates the backward needs. Per token t = b * seq + s:
//   c_q, c_q_input       [tokens, q_lora_rank]        after / before q_a_layernorm (with q_lora_rank)
//   c_kv, c_kv_input     [tokens, kv_lora_rank]       after / before kv_a_layernorm; inverse rms [tokens, 1]
//   k_pe                 [tokens, qk_rope_head_dim]   after RoPE, shared by every head
//   q                    [tokens, heads * qk]         head h: [no-RoPE part, RoPE part (rotated)]
//   kv                   [tokens, heads * (nope + v)] kv_b_proj's output, head h: [k_nope_h, v_h]
//   context              [tokens, heads * v_head_dim]
template <typename S>
struct LatentForward {
  Mat<S> c_q, c_q_input, c_q_inverse_rms;
  Mat<S> c_kv, c_kv_input, c_kv_inverse_rms;
  Mat<S> k_pe, q, kv;
  std::vector<HeadForward<S>> heads;  // per (batch, head)
  Mat<S> context;
  Mat<S> out;
};

template <typename S>
class EmulatedLatentLayer {
 public:
  EmulatedLatentLayer(const Case& c, Precision precision, EmulationVariant variant,
                      std::span<const std::int64_t> token_largest_positions = {})
      : c_(c),
        g_(c.geometry()),
        latent_(*g_.latent()),
        store_{precision},
        rounding_(variant.rounding),
        d_from_output_(variant.d_from_output),
        p_from_lse_(variant.p_from_lse),
        rope_(c, store_, variant.angles, token_largest_positions),
        tokens_(c.inputs.batch * c.inputs.seq) {
    if (variant.jitter_seed != 0) {
      jitter_.emplace(variant.jitter_seed, "attncheck-emulated-jitter");
      store_.jitter = &*jitter_;
    }
  }
  EmulatedLatentLayer(const EmulatedLatentLayer&) = delete;
  EmulatedLatentLayer& operator=(const EmulatedLatentLayer&) = delete;

  Tensor forward_out() {
    x_ = load<S>(c_.inputs.x, tokens_);
    return save<S>(forward().out, {c_.inputs.batch, c_.inputs.seq, g_.hidden_size()});
  }

  Result run() {
    x_ = load<S>(c_.inputs.x, tokens_);
    const LatentForward<S> f = forward();
    Result result;
    result.out = save<S>(f.out, {c_.inputs.batch, c_.inputs.seq, g_.hidden_size()});
    result.gradients = backward(f);
    return result;
  }

 private:
  HeadArithmetic arithmetic() const {
    return {.store = store_, .rounding = rounding_, .geometry = g_, .p_from_lse = p_from_lse_};
  }

  // The latent RMSNorms normalise the whole row with their plain weight; their rank may be 1 (emulated_norm.hpp:
  // why the jittered runs nudge 1 / rms then).
  void normalise(Mat<S>& rows, const Tensor& weight, Mat<S>& inverse_rms) const {
    rms_normalise(store_, rows, Row<S>(load<S>(weight, 1).row(0)), 1, latent_.latent_norm_eps, inverse_rms,
                  /*nudge_inverse_rms=*/true);
  }

  // Head h's key [k_nope_h, k_pe] and value v_h over batch row b's tokens.
  Mat<S> head_key(const LatentForward<S>& f, std::int64_t b, std::int64_t h) const {
    const std::int64_t seq = c_.inputs.seq, nope = latent_.qk_nope_head_dim;
    Mat<S> key(seq, latent_.qk_head_dim());
    key.leftCols(nope) = f.kv.block(b * seq, h * latent_.kv_b_rows_per_head(), seq, nope);
    key.rightCols(latent_.qk_rope_head_dim) = f.k_pe.middleRows(b * seq, seq);
    return key;
  }
  Mat<S> head_value(const LatentForward<S>& f, std::int64_t b, std::int64_t h) const {
    const std::int64_t seq = c_.inputs.seq;
    return f.kv.block(b * seq, h * latent_.kv_b_rows_per_head() + latent_.qk_nope_head_dim, seq,
                      latent_.v_head_dim);
  }

  LatentForward<S> forward() {
    const Parameters& w = c_.weights;
    const std::int64_t heads = g_.num_heads(), seq = c_.inputs.seq, qk = latent_.qk_head_dim();
    const std::int64_t v_dim = latent_.v_head_dim, lora = latent_.kv_lora_rank, rope = latent_.qk_rope_head_dim;
    LatentForward<S> f;
    if (w.q_a_proj) {
      f.c_q_input = linear(store_, x_, *w.q_a_proj);
      f.c_q = f.c_q_input;
      normalise(f.c_q, *w.q_a_layernorm, f.c_q_inverse_rms);
      f.q = linear(store_, f.c_q, *w.q_b_proj);
    } else {
      f.q = linear(store_, x_, w.q_proj);
    }
    const Mat<S> kv_a = linear(store_, x_, *w.kv_a_proj_with_mqa);  // [tokens, kv_lora_rank + qk_rope_head_dim]
    f.c_kv_input = kv_a.leftCols(lora);
    f.c_kv = f.c_kv_input;
    normalise(f.c_kv, *w.kv_a_layernorm, f.c_kv_inverse_rms);
    f.k_pe = kv_a.rightCols(rope);
    rope_.rotate(f.k_pe, 1, rope, 0, S(1));
    rope_.rotate(f.q, heads, qk, latent_.qk_nope_head_dim, S(1));
    f.kv = linear(store_, f.c_kv, *w.kv_b_proj);
    f.context = Mat<S>::Zero(tokens_, heads * v_dim);
    for (std::int64_t b = 0; b < c_.inputs.batch; ++b) {
      const MaskSpec mask = MaskSpec::for_geometry(g_, seq, seq, c_.inputs.key_lengths[b]);
      for (std::int64_t h = 0; h < heads; ++h) {
        const Mat<S> q = f.q.block(b * seq, h * qk, seq, qk);
        const S sink = w.sinks ? S(w.sinks->values[h]) : S(0);
        f.heads.push_back(attend_forward<S>(arithmetic(), mask, q, head_key(f, b, h), head_value(f, b, h),
                                            w.sinks ? &sink : nullptr,
                                            f.context.block(b * seq, h * v_dim, seq, v_dim)));
      }
    }
    f.out = store_(product(f.context, load<S>(w.o_proj, w.o_proj.shape[0]).transpose()));
    return f;
  }

  // d(weight) = d^T @ input, stored, as weight's tensor.
  Tensor weight_gradient(const Mat<S>& d, const Mat<S>& input, const Tensor& weight) const {
    return save<S>(store_(product(d.transpose(), input)), weight.shape);
  }

  Gradients backward(const LatentForward<S>& f) {
    const Parameters& w = c_.weights;
    const std::int64_t heads = g_.num_heads(), seq = c_.inputs.seq, qk = latent_.qk_head_dim();
    const std::int64_t nope = latent_.qk_nope_head_dim, rope = latent_.qk_rope_head_dim, v_dim = latent_.v_head_dim;
    const std::int64_t per_head = latent_.kv_b_rows_per_head();
    const Mat<S> d_out = load<S>(c_.inputs.dout, tokens_);
    Parameters grads;
    grads.latent = true;
    grads.o_proj = weight_gradient(d_out, f.context, w.o_proj);
    const Mat<S> d_context = store_(product(d_out, load<S>(w.o_proj, w.o_proj.shape[0])));

    // d_kv: head h's [d k_nope_h, d v_h], as kv_b_proj's output; d_k_pe summed over heads in head order.
    Mat<S> d_q = Mat<S>::Zero(tokens_, heads * qk);
    Mat<S> d_kv = Mat<S>::Zero(tokens_, heads * per_head);
    Mat<S> d_k_pe = Mat<S>::Zero(tokens_, rope);
    Row<S> d_sinks = Row<S>::Zero(w.sinks ? heads : 0);
    std::size_t index = 0;
    for (std::int64_t b = 0; b < c_.inputs.batch; ++b) {
      for (std::int64_t h = 0; h < heads; ++h, ++index) {
        const Mat<S> dc = d_context.block(b * seq, h * v_dim, seq, v_dim);
        const Mat<S> q = f.q.block(b * seq, h * qk, seq, qk);
        const HeadGradients<S> head = attend_backward<S>(
            arithmetic(), d_from_output_, f.heads[index], f.context.block(b * seq, h * v_dim, seq, v_dim), dc, q,
            head_key(f, b, h), head_value(f, b, h), w.sinks ? &d_sinks(h) : nullptr);
        d_q.block(b * seq, h * qk, seq, qk) = head.d_q;
        d_kv.block(b * seq, h * per_head, seq, nope) = head.d_k.leftCols(nope);
        d_kv.block(b * seq, h * per_head + nope, seq, v_dim) = head.d_v;
        d_k_pe.middleRows(b * seq, seq) += head.d_k.rightCols(rope);
      }
    }
    d_k_pe = store_(std::move(d_k_pe));
    rope_.rotate(d_q, heads, qk, nope, S(-1));
    rope_.rotate(d_k_pe, 1, rope, 0, S(-1));

    // kv = c_kv @ kv_b_proj^T; c_kv = kv_a_layernorm(c_kv input).
    grads.kv_b_proj = weight_gradient(d_kv, f.c_kv, *w.kv_b_proj);
    Mat<S> d_c_kv = store_(product(d_kv, load<S>(*w.kv_b_proj, w.kv_b_proj->shape[0])));
    Row<S> d_kv_norm = Row<S>::Zero(latent_.kv_lora_rank);
    rms_normalise_backward(store_, d_c_kv, f.c_kv_input, f.c_kv_inverse_rms,
                           Row<S>(load<S>(*w.kv_a_layernorm, 1).row(0)), 1, d_kv_norm);
    grads.kv_a_layernorm = save_row<S>(store_(Mat<S>(d_kv_norm)).row(0));

    // kv_a = x @ kv_a_proj_with_mqa^T = [c_kv input, k_pe before RoPE].
    Mat<S> d_kv_a(tokens_, latent_.kv_a_rows());
    d_kv_a.leftCols(latent_.kv_lora_rank) = d_c_kv;
    d_kv_a.rightCols(rope) = d_k_pe;
    grads.kv_a_proj_with_mqa = weight_gradient(d_kv_a, x_, *w.kv_a_proj_with_mqa);
    Mat<S> dx = product(d_kv_a, load<S>(*w.kv_a_proj_with_mqa, w.kv_a_proj_with_mqa->shape[0]));

    if (w.q_a_proj) {  // q = q_b_proj(q_a_layernorm(q_a_proj(x)))
      grads.q_b_proj = weight_gradient(d_q, f.c_q, *w.q_b_proj);
      Mat<S> d_c_q = store_(product(d_q, load<S>(*w.q_b_proj, w.q_b_proj->shape[0])));
      Row<S> d_q_norm = Row<S>::Zero(*latent_.q_lora_rank);
      rms_normalise_backward(store_, d_c_q, f.c_q_input, f.c_q_inverse_rms,
                             Row<S>(load<S>(*w.q_a_layernorm, 1).row(0)), 1, d_q_norm);
      grads.q_a_layernorm = save_row<S>(store_(Mat<S>(d_q_norm)).row(0));
      grads.q_a_proj = weight_gradient(d_c_q, x_, *w.q_a_proj);
      dx += product(d_c_q, load<S>(*w.q_a_proj, w.q_a_proj->shape[0]));
    } else {  // q = q_proj(x)
      grads.q_proj = weight_gradient(d_q, x_, w.q_proj);
      dx += product(d_q, load<S>(w.q_proj, w.q_proj.shape[0]));
    }
    if (w.sinks) grads.sinks = save_row<S>(store_(Mat<S>(d_sinks)).row(0));
    return Gradients{.x = save<S>(store_(std::move(dx)), c_.inputs.x.shape), .params = std::move(grads)};
  }

  const Case& c_;
  const Geometry& g_;
  const LatentAttentionSpec& latent_;
  std::optional<SplitMixStream> jitter_;
  Storage store_;
  Rounding rounding_;
  bool d_from_output_;
  bool p_from_lse_;
  EmulatedRope<S> rope_;
  std::int64_t tokens_;
  Mat<S> x_;
};

}  // namespace

Result run_latent_layer(const Case& test_case, Precision precision, EmulationVariant variant) {
  if (precision == Precision::fp64)
    return EmulatedLatentLayer<double>(test_case, precision, fp64_variant(variant)).run();
  return EmulatedLatentLayer<float>(test_case, precision, variant).run();
}

Tensor latent_forward_out(const Case& test_case, Precision precision, EmulationVariant variant,
                          std::span<const std::int64_t> token_largest_positions) {
  if (precision == Precision::fp64) {
    return EmulatedLatentLayer<double>(test_case, precision, fp64_variant(variant), token_largest_positions)
        .forward_out();
  }
  return EmulatedLatentLayer<float>(test_case, precision, variant, token_largest_positions).forward_out();
}

}  // namespace attncheck::reference::emulation
