// Metamorphic properties of attention itself, checked on the reference: causality, GQA as MHA with
// repeated KV weights, RoPE's invariance to a common position shift, and invariance of out to a
// consistent permutation of heads. Each is an RC_GTEST_PROP, so a failure shrinks.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/model/tp_plan.hpp"
#include "properties/generators.hpp"
#include "properties/property_test_support.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {
namespace {

using testing::assert_close;

// Copies row block `from` of a [blocks * block_rows, cols] matrix into block `to` of another.
void copy_row_block(const Tensor& source, std::int64_t from, Tensor& target, std::int64_t to,
                    std::int64_t block_values) {
  std::copy_n(source.values.begin() + from * block_values, block_values, target.values.begin() + to * block_values);
}

RC_GTEST_PROP(Properties, FutureTokensNeverReachThePast, ()) {
  CaseSpec spec = *case_specs();
  spec.geometry.causal = true;
  const Case original = make_case(spec);
  const std::int64_t seq = spec.inputs.seq, hidden = original.geometry().hidden_size();
  const std::int64_t t = *rc::gen::inRange<std::int64_t>(0, seq - 1);
  Case changed = original;
  for (std::int64_t b = 0; b < spec.inputs.batch; ++b) {
    for (std::int64_t s = t + 1; s < seq; ++s) {
      for (std::int64_t c = 0; c < hidden; ++c) changed.inputs.x.values[(b * seq + s) * hidden + c] += 0.75 + c % 3;
    }
  }
  const Tensor before = reference::run_reference_tp(original, {.gradients = false, .decode = false}).out;
  const Tensor after = reference::run_reference_tp(changed, {.gradients = false, .decode = false}).out;
  for (std::int64_t b = 0; b < spec.inputs.batch; ++b) {
    for (std::int64_t s = 0; s <= t; ++s) {
      for (std::int64_t c = 0; c < hidden; ++c) {
        const std::int64_t i = (b * seq + s) * hidden + c;
        RC_ASSERT(after.values[i] == before.values[i]);  // bit for bit: masked keys weigh exactly 0
      }
    }
  }
}

// GQA equals MHA whose KV weights repeat each KV head for its group; the MHA's KV gradients summed
// over each group are the GQA's. With group 1 this is "H_kv = H_q is plain MHA".
RC_GTEST_PROP(Properties, GqaIsMhaWithRepeatedKvWeights, ()) {
  CaseSpec spec = *case_specs();
  spec.inputs.tp_size = 1;
  const Case gqa = make_case(spec);
  const Geometry& g = gqa.geometry();
  const std::int64_t d = g.head_dim(), hidden = g.hidden_size(), group = g.group_size();
  CaseSpec mha_spec = spec;
  mha_spec.geometry.num_kv_heads = g.num_heads();
  if (!mha_spec.geometry.head_dim) mha_spec.geometry.head_dim = d;  // the same head_dim, stated
  Case mha = gqa;
  mha.plan = make_tp_plan(resolve_geometry(mha_spec.geometry), 1);
  mha.weights.k_proj = Tensor({g.num_heads() * d, hidden});
  mha.weights.v_proj = Tensor({g.num_heads() * d, hidden});
  if (gqa.weights.k_bias) {
    mha.weights.k_bias = Tensor({g.num_heads() * d});
    mha.weights.v_bias = Tensor({g.num_heads() * d});
  }
  // A whole-width k_norm has a weight per k channel: repeated with its head (each head repeated group
  // times leaves the mean of squares over the width, and so the rms, unchanged).
  const bool k_norm_by_channel = g.qk_norm_full_width();
  if (k_norm_by_channel) mha.weights.k_norm = Tensor({g.num_heads() * d});
  for (std::int64_t h = 0; h < g.num_heads(); ++h) {
    copy_row_block(gqa.weights.k_proj, h / group, mha.weights.k_proj, h, d * hidden);
    copy_row_block(gqa.weights.v_proj, h / group, mha.weights.v_proj, h, d * hidden);
    if (gqa.weights.k_bias) {
      copy_row_block(*gqa.weights.k_bias, h / group, *mha.weights.k_bias, h, d);
      copy_row_block(*gqa.weights.v_bias, h / group, *mha.weights.v_bias, h, d);
    }
    if (k_norm_by_channel) copy_row_block(*gqa.weights.k_norm, h / group, *mha.weights.k_norm, h, d);
  }
  RC_TAG(group > 1 ? "GQA" : "MHA");
  const Result gqa_result = reference::run_reference(gqa);
  Result mha_result = reference::run_reference(mha);
  // Fold the MHA's per-query-head KV gradients back onto the GQA's KV heads.
  Parameters& folded = mha_result.gradients->params;
  const auto fold = [&](Tensor& tensor, const Shape& gqa_shape, std::int64_t block_values) {
    Tensor sum(gqa_shape);
    for (std::int64_t h = 0; h < g.num_heads(); ++h) {
      for (std::int64_t i = 0; i < block_values; ++i) {
        sum.values[(h / group) * block_values + i] += tensor.values[h * block_values + i];
      }
    }
    tensor = std::move(sum);
  };
  fold(folded.k_proj, {g.kv_width(), hidden}, d * hidden);
  fold(folded.v_proj, {g.kv_width(), hidden}, d * hidden);
  if (folded.k_bias) {
    fold(*folded.k_bias, {g.kv_width()}, d);
    fold(*folded.v_bias, {g.kv_width()}, d);
  }
  if (k_norm_by_channel) fold(*folded.k_norm, {g.kv_width()}, d);
  RC_TAG(k_norm_by_channel ? "whole-width norm" : "per-head or no norm");
  assert_close(gqa, named_tensors(gqa_result), named_tensors(mha_result));
}

// RoPE rotates q and k by their own positions, so scores depend only on position differences:
// shifting every position by one constant leaves out unchanged. Positions are kept below 2^12 (and
// the shift too): a float64 angle's rounding grows with the position itself.
RC_GTEST_PROP(Properties, RopeDependsOnlyOnPositionDifferences, ()) {
  CaseSpec spec = *case_specs();
  spec.inputs.position_offset = *rc::gen::inRange<std::int64_t>(0, 2048);
  const Case original = make_case(spec);
  const std::int64_t shift = *rc::gen::inRange<std::int64_t>(1, 2048);
  Case shifted = original;
  for (std::int64_t& position : shifted.inputs.positions) position += shift;
  assert_close(original, testing::without_ranks(named_tensors(reference::run_reference(original))),
               testing::without_ranks(named_tensors(reference::run_reference(shifted))));
}

// Renumbering heads consistently — query heads within their KV group (q_proj rows, q_bias, o_proj
// columns, sinks, whole-width q_norm channels) and whole KV groups (k/v rows with their query heads,
// whole-width k_norm channels) — changes nothing in out or dx.
RC_GTEST_PROP(Properties, PermutingHeadsConsistentlyChangesNothing, ()) {
  CaseSpec spec = *case_specs();
  spec.inputs.tp_size = 1;
  const Case original = make_case(spec);
  const Geometry& g = original.geometry();
  const std::int64_t d = g.head_dim(), hidden = g.hidden_size(), group = g.group_size(), width = g.query_width();
  std::vector<std::int64_t> kv_order(g.num_kv_heads());
  std::iota(kv_order.begin(), kv_order.end(), 0);
  std::vector<std::int64_t> within(group);
  std::iota(within.begin(), within.end(), 0);
  // Rotations: a permutation every size has, never the identity where another exists.
  const std::int64_t kv_rotation = g.num_kv_heads() > 1 ? *rc::gen::inRange<std::int64_t>(1, g.num_kv_heads()) : 0;
  const std::int64_t group_rotation = group > 1 ? *rc::gen::inRange<std::int64_t>(1, group) : 0;
  std::rotate(kv_order.begin(), kv_order.begin() + kv_rotation, kv_order.end());
  std::rotate(within.begin(), within.begin() + group_rotation, within.end());
  Case permuted = original;
  Parameters& w = permuted.weights;
  for (std::int64_t kv = 0; kv < g.num_kv_heads(); ++kv) {
    const std::int64_t to_kv = kv_order[kv];
    copy_row_block(original.weights.k_proj, kv, w.k_proj, to_kv, d * hidden);
    copy_row_block(original.weights.v_proj, kv, w.v_proj, to_kv, d * hidden);
    if (w.k_bias) copy_row_block(*original.weights.k_bias, kv, *w.k_bias, to_kv, d);
    if (w.v_bias) copy_row_block(*original.weights.v_bias, kv, *w.v_bias, to_kv, d);
    if (g.qk_norm_full_width()) copy_row_block(*original.weights.k_norm, kv, *w.k_norm, to_kv, d);
    for (std::int64_t j = 0; j < group; ++j) {
      const std::int64_t from = kv * group + j, to = to_kv * group + within[j];
      copy_row_block(original.weights.q_proj, from, w.q_proj, to, d * hidden);
      if (w.q_bias) copy_row_block(*original.weights.q_bias, from, *w.q_bias, to, d);
      if (w.sinks) copy_row_block(*original.weights.sinks, from, *w.sinks, to, 1);  // a head's sink moves with it
      // A whole-width norm's weights move with their channels (the rms over the width does not change).
      if (g.qk_norm_full_width()) copy_row_block(*original.weights.q_norm, from, *w.q_norm, to, d);
      for (std::int64_t row = 0; row < hidden; ++row) {
        std::copy_n(original.weights.o_proj.values.begin() + row * width + from * d, d,
                    w.o_proj.values.begin() + row * width + to * d);
      }
    }
  }
  RC_TAG(kv_rotation + group_rotation > 0 ? "permuted" : "identity");
  const Result before = reference::run_reference(original, {.decode = false});
  const Result after = reference::run_reference(permuted, {.decode = false});
  assert_close(original, {{"out", before.out}, {"grads/x", before.gradients->x}},
               {{"out", after.out}, {"grads/x", after.gradients->x}});
}

}  // namespace
}  // namespace attncheck::properties
