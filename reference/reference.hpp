// The fp64 reference implementations:
//   "reference"     the whole layer on one rank, unsharded
//   "reference-tp"  the layer cut by case.plan: every rank runs on its shard only (all key positions,
//                   its own heads), the o_proj partials are summed in rank order and o_bias added once,
//                   dx is summed over ranks, gradients reduced as core/tp/tp_shard.hpp describes
// Both validate the case first (InputError on bad input) and run the decode schedule when present.
#pragma once

#include <vector>

#include "core/model/case.hpp"
#include "core/model/result.hpp"

namespace attncheck::reference {

// How a latent-attention layer's decode calls attend (reference/latent_layer.hpp; they must agree):
//   expanded: the cache holds every head's k [qk_head_dim] and v [v_head_dim], as the forward pass builds them;
//   absorbed: the cache holds the normed latent c_kv and RoPE(k_pe) once for all heads ([kv_lora_rank +
//             qk_rope_head_dim] keys, [kv_lora_rank] values); head h's query is [q_nope_h W_UK_h, q_pe_h]
//             (W_UK_h: kv_b_proj's k rows of head h) and its context c W_UV_h^T (W_UV_h: its v rows).
enum class LatentDecodeForm { expanded, absorbed };

struct RunOptions {
  bool gradients = true;       // run the backward pass with inputs.dout
  bool intermediates = false;  // fill Result::intermediates
  bool decode = true;          // run inputs.decode (if any) and fill Result::decode_out
  LatentDecodeForm latent_decode = LatentDecodeForm::expanded;  // latent attention only
};

Result run_reference(const Case& test_case, const RunOptions& options = {});
// InputError when an fp64 result holds NaN or Inf (a finite case can overflow: values near 1e154, a zero q
// with qk_norm_eps 0): the oracle never returns one silently. Every fp64 reference run ends with it.
void check_result_finite(const Result& result);
Result run_reference_tp(const Case& test_case, const RunOptions& options = {});
// Each rank's own gradients under the case's TP plan (its shard's layout, rank order) before any
// reduction across ranks (replica groups, norms), with every all-reduce of the forward in place: what a
// layer that skips those reductions reports (golden coverage measures that such a layer is caught).
std::vector<Parameters> rank_partial_gradients(const Case& test_case);

}  // namespace attncheck::reference
