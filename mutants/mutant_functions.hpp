// The mutants' run functions, which catalog.cpp lists. Two kinds: changes around the reference (to the
// weights it is given, the geometry it is built with, the positions it reads), which run the reference
// through its public API; and bugs inside the layer, which run the naive layer with one step
// overridden (naive_layer.hpp).
#pragma once

#include "core/model/case.hpp"
#include "core/model/geometry.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"

namespace attncheck::mutants {

// The reference-tp run of the same inputs and weights with another geometry spec: how a geometry bug
// (a framework building the wrong layer) runs (geometry_mutants.cpp).
Result run_with_spec(const Case& test_case, const GeometrySpec& spec);

// Weights (weight_mutants.cpp)
Result swapped_query_heads(const Case& test_case);    // query heads 0 and 1 exchange q_proj rows
Result kv_head_modulo(const Case& test_case);         // query head h reads KV head h % H_kv, not h / group
Result o_proj_hidden_wide(const Case& test_case);     // o_proj reads only the first hidden_size context channels
Result sinks_of_another_rank(const Case& test_case);  // each rank reads the next rank's heads' sinks
Result sink_gradient_missing(const Case& test_case);  // d(sinks) zero

// Geometry and positions (geometry_mutants.cpp)
Result quotient_scale(const Case& test_case);                // scale (hidden / num_heads)^-0.5
Result head_dim_from_quotient(const Case& test_case);        // builds head_dim = hidden / num_heads: shape error
Result context_hidden_width(const Case& test_case);          // reshapes the context to hidden width: shape error
Result rope_full_head(const Case& test_case);                // rotates all of head_dim despite rotary_dim
Result rope_style_swapped(const Case& test_case);            // half-split and interleaved pairing exchanged
Result rope_ignores_position_ids(const Case& test_case);     // RoPE at the sequence index, not the position id
Result attention_multiplier_ignored(const Case& test_case);  // Granite's multiplier replaced by head_dim^-0.5
Result nope_rotated(const Case& test_case);                  // a NoPE layer (rotary_dim 0) rotated over its head
Result softcap_before_scale(const Case& test_case);          // cap * tanh(q.k / cap), then the scale

// QK-norm (layer_mutants.cpp, on the naive layer)
Result width_norm_per_rank(const Case& test_case);          // whole-width norm per rank, no all-reduce
Result width_norm_replicas_counted(const Case& test_case);  // replicated KV channels counted per replica
Result norm_after_rope(const Case& test_case);              // QK-norm after RoPE instead of before
// Attention sinks (layer_mutants.cpp, on the naive layer)
Result sinks_ignored(const Case& test_case);    // the sink never joins the softmax (nor gets a gradient)
Result sink_scaled(const Case& test_case);      // the sink logit multiplied by the score scale
Result sink_softcapped(const Case& test_case);  // the sink logit passed through the softcap

// RoPE scaling (rope_scaling_mutants.cpp, on the naive layer)
Result rope_attention_factor_dropped(const Case& test_case);    // yarn/longrope cos and sin not scaled
Result llama3_band_reversed(const Case& test_case);             // llama3's wavelength edges exchanged
Result longrope_factors_by_token_count(const Case& test_case);  // factors chosen by token count, not position
// yarn with a stated attention_factor: sglang #33558 multiplied it by the derived m(factor, 1) (the scale
// applied twice); TensorRT-LLM #16379 took it as mscale, m(factor, attention_factor); vllm #46280
// dropped it for the derived factor.
Result yarn_stated_factor_times_derived(const Case& test_case);
Result yarn_stated_factor_through_log(const Case& test_case);
Result yarn_stated_factor_ignored(const Case& test_case);

// Real frameworks' bugs with a mechanism of their own (real_bug_mutants.cpp; the source in catalog.cpp)
Result rope_after_scores(const Case& test_case);              // gpt-neox #222: RoPE never reaches the scores
Result rope_base_hard_coded(const Case& test_case);           // DeepSpeed #4442: base 10000 whatever rope_theta
Result llama3_scaling_missing(const Case& test_case);         // llama.cpp #8676: llama3 scaling not applied
Result yarn_ignores_rotary_percent(const Case& test_case);    // Megatron-LM #7476: yarn rotates the whole head
Result shared_qk_norm_weight(const Case& test_case);          // gpt-neox #1367: q's norm weight used for k
Result causal_mask_dropped(const Case& test_case);            // transformers #48748: no causal mask
Result window_not_passed(const Case& test_case);              // TensorRT-LLM #12597: window never applied
Result masked_row_nan(const Case& test_case);                 // pytorch #103963: a row without keys is NaN
Result kv_shard_by_rank(const Case& test_case);               // vllm #2379: rank r loads KV head r % H_kv
Result longrope_long_factors_always(const Case& test_case);   // llama.cpp #24823: long factors for every call
Result window_one_short(const Case& test_case);               // TransformerEngine #1197: W - 1 keys
Result causal_limit_by_group(const Case& test_case);          // flash-attention #2528: limit of query i / group
Result keys_sliced_to_window(const Case& test_case);          // transformers #32522: keys cut to the last W
Result gqa_groups_from_default(const Case& test_case);        // TransformerEngine #777: GQA + TP shape error
Result gqa_fused_split_by_query_head(const Case& test_case);  // gpt-neox #1315: K/V from per-q-head fragments
Result rolling_cache_read_from_past(const Case& test_case);   // transformers #47708: rolling read at past % W
Result prefix_prefill_window_ignored(const Case& test_case);  // vllm #4405: cached prefix not windowed
Result released_blocks_read(const Case& test_case);           // vllm #30887: V of released blocks: 0 * NaN
Result width_norm_shard_by_hidden(const Case& test_case);     // sglang #20967: K norm cut as kv width / TP
Result dq_accumulator_strides(const Case& test_case);         // flash-attention #2896: dQ rows at width 16 vs 32

// Inside the layer (layer_mutants.cpp)
// P.V, or the softmax row sum, accumulated key by key in `precision` (bf16, fp16), the layer otherwise
// exact: the catalog's bf16 accumulation mutants, and bench/precision_table's fp16 column.
Result pv_accumulated_in(Precision precision, const Case& test_case);
Result row_sum_accumulated_in(Precision precision, const Case& test_case);
Result padding_ignored(const Case& test_case);                // key padding never applied
Result masked_row_mean_of_v(const Case& test_case);           // a query that sees no key: mean of V over all keys
Result window_off_by_one(const Case& test_case);              // the window sees one key more
Result causal_off_by_one(const Case& test_case);              // query i also sees key i + 1
Result top_left_causal(const Case& test_case);                // decode mask aligned top-left
Result rank_local_keys(const Case& test_case);                // each rank sees only its slice of the keys
Result qk_norm_over_heads(const Case& test_case);             // one RMS over all local heads of a token
Result softmax_without_max(const Case& test_case);            // exp without the row maximum: overflows
Result gqa_kv_grad_last_head_only(const Case& test_case);     // dK/dV from a group's last query head only
Result replicated_kv_grad_unsummed(const Case& test_case);    // no replica-group sum of KV gradients
Result kv_grad_summed_over_all_ranks(const Case& test_case);  // KV gradients summed over every rank
Result o_bias_every_rank(const Case& test_case);              // o_bias added by every rank

// Past the first tile of keys (layer_mutants.cpp on tiled_layer.hpp): the long profile's mutants
Result online_softmax_max_not_rescaled(const Case& test_case);   // state kept when the maximum rises
Result online_softmax_sum_not_rescaled(const Case& test_case);   // accumulator rescaled, row sum not
Result split_kv_combine_by_key_counts(const Case& test_case);    // pieces weighted by key counts
Result window_tile_skip_from_last_query(const Case& test_case);  // window's first tile from the last query

}  // namespace attncheck::mutants
