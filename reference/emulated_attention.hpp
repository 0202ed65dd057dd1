// One query head's attention in the emulated layers' working type S (emulated_layer.hpp), forward and
// backward: scores, the softmax chain (softcap, exp, the row sum, the normalisation and, backward, up to
// dS) under the run's directed rounding, every other result stored. The plain layer calls it per (batch
// row, query head) with head_dim-wide q, k and v; the latent layer with qk-wide q, k and v_head_dim-wide v.
//
// Layouts: q [seq_q, qk width]; k [seq_k, qk width]; v [seq_k, v width]; p, p_from_lse and tanh [seq_q, seq_k];
// p_sink [seq_q] (with a sink, else empty); context and d_context [seq_q, v width].
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/model/geometry.hpp"
#include "reference/attention_head.hpp"
#include "reference/emulated_arithmetic.hpp"

namespace attncheck::reference::emulation {

template <typename S>
struct HeadForward {
  Mat<S> p;             // probabilities
  Mat<S> tanh;          // tanh(score / softcap), when softcapped
  Column<S> p_sink;     // the sink's probability per row, with a sink
  // p_from_lse runs only: the probabilities as a flash-style backward recomputes them, exp(score - lse) from
  // the row's stored log-sum-exp lse = max + log(sum), each stored; the backward uses them instead of p.
  Mat<S> p_from_lse;
};

// The run's settings every head shares.
struct HeadArithmetic {
  const Storage& store;
  Rounding rounding;
  const Geometry& geometry;  // scale and softcap
  // The probabilities from a stored log-sum-exp, as flash-style backwards recompute them (FlashAttention-2,
  // PyTorch's CPU flash SDPA) and as outputs merged by log-sum-exp (ring context parallelism, split-KV decoding)
  // weigh their parts: exp(score - lse) carries lse's rounding, an ulp of the score's magnitude, where p itself
  // is near 1 (emulated_layer.hpp, EmulationVariant::p_from_lse).
  bool p_from_lse = false;
};

// context receives p @ v, stored. With a sink (`sink` not null): the head's logit joins each row's maximum
// and sum (a row without keys: all on it).
template <typename S, typename Context>
HeadForward<S> attend_forward(const HeadArithmetic& run, const MaskSpec& mask, const Mat<S>& q, const Mat<S>& k,
                              const Mat<S>& v, const S* sink, Context&& context) {
  const Storage& store = run.store;
  const Geometry& g = run.geometry;
  const Eigen::Index seq_q = q.rows(), seq_k = k.rows();
  HeadForward<S> f;
  Mat<S> scores = store(Mat<S>(product(q, k.transpose()) * S(g.scale())));
  f.p = Mat<S>::Zero(seq_q, seq_k);
  // Allocated whole, not per row seen: a head whose queries see no key at all still has its [seq_q, seq_k] zeros.
  if (run.p_from_lse) f.p_from_lse = Mat<S>::Zero(seq_q, seq_k);
  const bool has_sink = sink != nullptr;
  const S sink_logit = has_sink ? *sink : S(0);
  f.p_sink = Column<S>::Ones(has_sink ? seq_q : 0);
  {
    const RoundingScope directed(run.rounding, store.precision);  // the softmax chain
    if (g.softcap()) {
      const S cap = S(*g.softcap());
      f.tanh = store(Mat<S>((scores.array() / cap).tanh().matrix()));
      scores = store(Mat<S>(f.tanh * cap));
    }
    for (Eigen::Index i = 0; i < seq_q; ++i) {
      const KeyInterval keys = mask.visible_keys(i);
      if (keys.end <= keys.begin) continue;  // a query that sees no key outputs 0
      auto visible = scores.row(i).segment(keys.begin, keys.end - keys.begin);
      const S maximum = has_sink ? std::max(visible.maxCoeff(), sink_logit) : visible.maxCoeff();
      Row<S> e = (visible.array() - maximum).exp().matrix();
      store.round_each(e.data(), e.size());
      const S sink_term = has_sink ? store.round(std::exp(sink_logit - maximum)) : S(0);
      const S sum = e.sum() + sink_term;  // accumulated in S, as without a sink (no storage rounding)
      f.p.row(i).segment(keys.begin, keys.end - keys.begin) = e / sum;
      if (has_sink) f.p_sink(i) = store.round(sink_term / sum);
      if (run.p_from_lse) {
        const S lse = store.round(maximum + store.round(std::log(sum)));
        Row<S> recomputed = (visible.array() - lse).exp().matrix();
        store.round_each(recomputed.data(), recomputed.size());
        f.p_from_lse.row(i).segment(keys.begin, keys.end - keys.begin) = recomputed;
      }
    }
    f.p = store(std::move(f.p));
  }
  // p_from_lse runs form the output from the same probabilities: a result merged from partial ones by their
  // log-sum-exps (ring context parallelism, split-KV decoding) carries the stored lse's rounding likewise.
  context = store(product(run.p_from_lse ? f.p_from_lse : f.p, v));
  return f;
}

template <typename S>
struct HeadGradients {
  Mat<S> d_q;  // stored
  Mat<S> d_k;  // stored; the caller sums a KV head's query heads
  Mat<S> d_v;  // stored; likewise
};

// context: the head's stored output; d_context [seq_q, v width]. d_from_output: the backward's D formed from
// the stored output (flash-style, emulated_layer.hpp). With a sink, its gradient is subtracted from *d_sink
// inside the softmax chain.
template <typename S, typename ContextBlock>
HeadGradients<S> attend_backward(const HeadArithmetic& run, bool d_from_output, const HeadForward<S>& f,
                                 const ContextBlock& context, const Mat<S>& d_context, const Mat<S>& q,
                                 const Mat<S>& k, const Mat<S>& v, S* d_sink) {
  const Storage& store = run.store;
  const Geometry& g = run.geometry;
  const Mat<S>& p = run.p_from_lse ? f.p_from_lse : f.p;
  HeadGradients<S> grads;
  grads.d_v = store(product(p.transpose(), d_context));
  const Mat<S> dp = store(product(d_context, v.transpose()));
  Mat<S> ds;
  {
    const RoundingScope directed(run.rounding, store.precision);  // the softmax chain's backward
    // D = sum_j p_ij dp_ij, or (d_from_output) rowsum(dO o O) from the stored output, itself stored.
    Column<S> weighted;
    if (d_from_output) {
      weighted = (d_context.array() * context.array()).rowwise().sum().matrix();
      store.round_each(weighted.data(), weighted.size());
    } else {
      weighted = (p.array() * dp.array()).rowwise().sum().matrix();
    }
    if (d_sink != nullptr) *d_sink -= f.p_sink.dot(weighted);  // the sink's dp is 0
    ds = Mat<S>(p.array() * (dp.colwise() - weighted).array());
    if (g.softcap()) ds = Mat<S>(ds.array() * (S(1) - f.tanh.array().square()));
    ds = store(Mat<S>(ds * S(g.scale())));
  }
  grads.d_q = store(product(ds, k));
  grads.d_k = store(product(ds.transpose(), q));
  return grads;
}

}  // namespace attncheck::reference::emulation
