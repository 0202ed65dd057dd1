#include "mutants/catalog.hpp"

#include "mutants/mutant_functions.hpp"

namespace attncheck::mutants {

namespace {

// The P.V accumulation mutants fail only past about a thousand keys, where every candidate also runs
// the low-precision yardstick (1.7 s a candidate on this VM when quiet, 3.5 s under load, against
// milliseconds for the others). 12 candidates are the whole length bisection (at most 12 probes from
// 4096 down to 48), about the 20 s that the time limit allowed their shrink before; four more only
// respelled rotary_pct 0.5 as rotary_dim 48 at seq 993, and 6 stop the bisection short (seq 1212, 994).
constexpr std::int64_t kAccumulationShrinkCandidates = 12;

// A bug a real framework shipped, re-planted (real_bug_mutants.cpp, or the imagined mutant with the same
// mechanism), named mutant-<repository>-<number>-<what>; `source` says where it was reported.
Mutant real_bug(std::string name, std::string bug, std::function<Result(const Case&)> run, std::string source) {
  return {.name = "mutant-" + std::move(name),
          .bug = std::move(bug),
          .sharded = true,
          .run = std::move(run),
          .source = std::move(source)};
}

std::vector<Mutant> real_bugs() {
  namespace m = mutants;
  return {
      real_bug("vllm-2622-head-dim-from-quotient",
               "an explicit head_dim ignored, hidden / heads used: the KV cache and shapes mis-sized",
               m::head_dim_from_quotient, "vllm-project/vllm#2622"),
      real_bug("gemma-2-9b-scale-from-quotient", "Gemma-2 9B scores scaled by 224^-1/2 (hidden / heads), not 256^-1/2",
               m::quotient_scale, "google/gemma_pytorch@03e6575, ggml-org/llama.cpp#8444"),
      real_bug("transformers-39408-window-plus-one",
               "flash-attention given window (W, W): a causal query sees W + 1 keys", m::window_off_by_one,
               "huggingface/transformers#39408 (PR #40163)"),
      real_bug("transformers-26792-mistral-window-triu", "Mistral's eager mask triu(diagonal = -W) keeps W + 1 keys",
               m::window_off_by_one, "huggingface/transformers#26792"),
      real_bug("megatron-2771-window-left-bound",
               "gpt-oss's window of 128 passed as the inclusive left bound: 129 keys", m::window_off_by_one,
               "NVIDIA/Megatron-LM#2771"),
      real_bug("llama-899-square-mask-with-cache",
               "a cached prefill of several tokens masked with a square (top-left) causal mask", m::top_left_causal,
               "meta-llama/llama#899 (PR #900)"),
      real_bug("vllm-52156-sinks-dropped", "the sink logits (s_aux) swallowed by **kwargs: softmax without sinks",
               m::sinks_ignored, "vllm-project/vllm#52156"),
      real_bug("gpt-neox-222-rope-after-scores", "RoPE applied to q, k after QK^T was formed: no positional signal",
               m::rope_after_scores, "EleutherAI/gpt-neox#222"),
      real_bug("deepspeed-4442-rope-base-10000",
               "the rotary kernel's base hard-coded to 10000 whatever rope_theta says", m::rope_base_hard_coded,
               "deepspeedai/DeepSpeed#4442 (PR #4480), NVIDIA/TensorRT-LLM#785"),
      real_bug("llama-cpp-8676-llama3-scaling-missing", "Llama 3.1 run without its llama3 RoPE frequency scaling",
               m::llama3_scaling_missing, "ggml-org/llama.cpp#8676"),
      real_bug("megatron-7476-yarn-ignores-rotary-percent",
               "YaRN frequencies built over the whole head: a partial-rotary yarn layer rotates every channel",
               m::yarn_ignores_rotary_percent, "NVIDIA/Megatron-LM#7476"),
      real_bug("gpt-neox-1367-shared-qk-norm-weight", "one QK-norm module (q's weight) applied to both q and k",
               m::shared_qk_norm_weight, "EleutherAI/gpt-neox#1367"),
      real_bug("transformers-48748-causal-mask-dropped",
               "a model's own mask built without the causal constraint: tokens see the future", m::causal_mask_dropped,
               "huggingface/transformers#48748"),
      real_bug("tensorrt-llm-12597-window-not-passed", "Mistral's sliding window never passed to the kernel",
               m::window_not_passed, "NVIDIA/TensorRT-LLM#12597"),
      real_bug("pytorch-103963-masked-row-nan", "a fully masked query row gives NaN (0/0), which spreads",
               m::masked_row_nan, "pytorch/pytorch#103963 (PR #133882)"),
      real_bug("vllm-2379-kv-shard-by-rank", "tp_size > num_kv_heads: rank r loads KV head r % H_kv, not r / replicas",
               m::kv_shard_by_rank, "vllm-project/vllm#2379 (issue #1735)"),
      real_bug("llama-cpp-24823-longrope-long-factors-always",
               "LongRoPE factors chosen from the allocated context: long factors even for short calls",
               m::longrope_long_factors_always, "ggml-org/llama.cpp#24823"),
      real_bug("transformer-engine-1197-window-one-short",
               "cuDNN's window (i - w, i] exclusive: the window passed unchanged sees W - 1 keys", m::window_one_short,
               "NVIDIA/TransformerEngine#1197 (PR #1212)"),
      real_bug("flash-attention-2528-causal-limit-by-group",
               "GQA rows divided by the group ratio though never packed: query i gets query i / group's causal limit",
               m::causal_limit_by_group, "Dao-AILab/flash-attention#2528"),
      real_bug("transformers-32522-keys-sliced-to-window",
               "Gemma 2's FA2 path slices the keys to the last W instead of passing the window",
               m::keys_sliced_to_window, "huggingface/transformers#32522"),
      real_bug("transformer-engine-777-gqa-groups-from-default",
               "GQA groups per partition from the default (num_heads): GQA under TP fails on K's shape",
               m::gqa_groups_from_default, "NVIDIA/TransformerEngine#777"),
      real_bug("gpt-neox-1315-gqa-fused-split",
               "GQA's fused [Q | K | V] read as per-query-head [q | k fragment | v fragment] chunks",
               m::gqa_fused_split_by_query_head, "EleutherAI/gpt-neox#1315 (issue #1314)"),
      real_bug("transformers-47708-rolling-cache-read-start",
               "the sliding-window cache read from slot past % W before it held a whole window: "
               "unwritten slots, tokens out of order",
               m::rolling_cache_read_from_past, "huggingface/transformers#47708 (issue #37574)"),
      real_bug("vllm-4405-prefix-prefill-window",
               "a multi-token call over a cached prefix masks the cached keys by context length only, not the window",
               m::prefix_prefill_window_ignored, "vllm-project/vllm#4405"),
      real_bug("sglang-20967-width-norm-shard-by-hidden",
               "a whole-width K norm's weight cut as (kv width) / TP per rank: mid-head when KV heads are replicated",
               m::width_norm_shard_by_hidden, "sgl-project/sglang#20967"),
      real_bug("sglang-33558-yarn-mscale-twice",
               "yarn with attention_factor stated: multiplied by the derived 0.1 ln(factor) + 1 (the scale applied twice)",
               m::yarn_stated_factor_times_derived, "sgl-project/sglang#33558"),
      real_bug("tensorrt-llm-16379-yarn-factor-through-log",
               "yarn with attention_factor stated: taken as mscale, 0.1 * attention_factor * ln(factor) + 1",
               m::yarn_stated_factor_through_log, "NVIDIA/TensorRT-LLM#16379"),
      real_bug("vllm-46280-yarn-stated-factor-ignored",
               "yarn with attention_factor stated: the stated value dropped, the derived factor used",
               m::yarn_stated_factor_ignored, "vllm-project/vllm#46280"),
      real_bug("flash-attention-2896-dq-accumulator-strides",
               "dQ written at head width rounded to 16 and read back at the width rounded to 32: stale rows",
               m::dq_accumulator_strides, "Dao-AILab/flash-attention#2896"),
      {.name = "mutant-vllm-30887-released-blocks-read",
       .bug = "decoding, KV blocks wholly before the window are masked but their V still read: 0 * NaN",
       .sharded = true,
       .run = m::released_blocks_read,
       .sequences = Sequences::long_sequences,
       .source = "vllm-project/vllm#30887"},
      // Its PR says only "numerical issues" with F16 precision, fixed by forcing FP32: re-planted as P.V
      // accumulated in fp16 (declaring fp16), which only a long row shows.
      {.name = "mutant-llama-cpp-9166-fp16-accumulation",
       .bug = "declares fp16; FlashAttention's P.V accumulated in fp16 instead of fp32 (otherwise exact)",
       .sharded = true,
       .run = [](const Case& c) { return m::pv_accumulated_in(Precision::fp16, c); },
       .sequences = Sequences::long_sequences,
       .precision = Precision::fp16,
       .rope_angles = RopeAngles::float64,
       .source = "ggml-org/llama.cpp#9166",
       .shrink_candidates = kAccumulationShrinkCandidates},
  };
}

std::vector<Mutant> build_catalog() {
  namespace m = mutants;
  std::vector<Mutant> catalog = {
      {"mutant-head-dim-from-quotient", "head_dim derived as hidden_size / num_heads (the layer's shapes are wrong)",
       true, m::head_dim_from_quotient},
      {"mutant-quotient-scale", "scores scaled by (hidden_size / num_heads)^-0.5 instead of head_dim^-0.5", true,
       m::quotient_scale},
      {"mutant-context-hidden-width", "context reshaped to hidden_size before o_proj", true, m::context_hidden_width},
      {"mutant-o-proj-hidden-wide", "o_proj assumed hidden_size wide: context channels past hidden dropped", true,
       m::o_proj_hidden_wide},
      {"mutant-swap-query-heads", "query heads 0 and 1 exchanged in q_proj (a wrong fused-QKV split)", true,
       m::swapped_query_heads},
      {"mutant-kv-head-modulo", "query head h reads KV head h % num_kv_heads instead of h / group_size", false,
       m::kv_head_modulo},
      {"mutant-causal-off-by-one", "causal mask lets query i see key i + 1", true, m::causal_off_by_one},
      {"mutant-padding-ignored", "key padding never applied: queries see padded keys", true, m::padding_ignored},
      {"mutant-masked-row-mean-of-v",
       "a query that sees no key outputs the mean of V over all keys (a finite additive mask) instead of 0", true,
       m::masked_row_mean_of_v},
      {"mutant-window-off-by-one", "sliding window one key too wide: query i also sees key i - window", true,
       m::window_off_by_one},
      {"mutant-top-left-causal", "causal mask aligned top-left when decoding with a KV cache", true,
       m::top_left_causal},
      {"mutant-rope-full-head", "RoPE over all of head_dim despite rotary_dim / rotary_pct", true, m::rope_full_head},
      {"mutant-rope-style-swapped", "RoPE pairs half-split and interleaved channels the wrong way round", true,
       m::rope_style_swapped},
      {"mutant-rope-ignores-position-ids", "RoPE at the sequence index instead of the position id", true,
       m::rope_ignores_position_ids},
      {"mutant-attention-multiplier-ignored", "Granite's attention_multiplier ignored: scores scaled by head_dim^-0.5",
       true, m::attention_multiplier_ignored},
      {"mutant-nope-rotated", "a layer without RoPE (rotary_dim 0, SmolLM3's no_rope_layers) rotated over its head",
       true, m::nope_rotated},
      {"mutant-softcap-before-scale", "softcap applied to q.k before the scale (Gemma 2's order swapped)", true,
       m::softcap_before_scale},
      {"mutant-rope-attention-factor-dropped", "yarn's and longrope's attention factor never applied to cos and sin",
       true, m::rope_attention_factor_dropped},
      {"mutant-llama3-band-reversed", "llama3 RoPE scaling with the band's wavelength edges exchanged (no smooth band)",
       true, m::llama3_band_reversed},
      {"mutant-longrope-factors-by-token-count",
       "longrope chooses short or long factors from the call's token count, not its largest position", true,
       m::longrope_factors_by_token_count},
      {"mutant-sinks-ignored", "attention sinks loaded but never joining the softmax's denominator", true,
       m::sinks_ignored},
      {"mutant-sink-gradient-missing", "the sinks get no gradient (zero on every rank)", true,
       m::sink_gradient_missing},
      {"mutant-sinks-of-another-rank", "each TP rank reads the sinks of the next rank's query heads", true,
       m::sinks_of_another_rank},
      {"mutant-sink-scaled", "the sink logit multiplied by the score scale (appended before scaling)", true,
       m::sink_scaled},
      {"mutant-sink-softcapped", "the sink logit passed through the softcap with the scores", true, m::sink_softcapped},
      {"mutant-width-norm-per-rank",
       "a whole-width QK-norm (OLMo-2) computed on each TP rank's slice without the all-reduce", true,
       m::width_norm_per_rank},
      {"mutant-width-norm-replicas-counted",
       "a whole-width norm's all-reduce counting a replicated KV head's channels once per replica", true,
       m::width_norm_replicas_counted},
      {"mutant-norm-after-rope", "QK-norm applied after RoPE instead of before", true, m::norm_after_rope},
      {"mutant-qk-norm-over-heads", "QK-norm RMS over all heads x head_dim instead of per head", true,
       m::qk_norm_over_heads},
      {"mutant-replicated-kv-grad-unsummed", "a replicated KV head's gradients not summed over its replica group", true,
       m::replicated_kv_grad_unsummed},
      {"mutant-kv-grad-summed-over-all-ranks", "KV gradients summed over every rank instead of the replica group", true,
       m::kv_grad_summed_over_all_ranks},
      {"mutant-o-bias-every-rank", "o_proj bias added on every rank before the partials are summed", true,
       m::o_bias_every_rank},
      {"mutant-rank-local-keys", "each rank attends only to its own slice of the keys", true, m::rank_local_keys},
      {"mutant-softmax-without-max", "softmax without subtracting the row maximum (overflows)", true,
       m::softmax_without_max},
      {"mutant-gqa-kv-grad-last-head-only",
       "dK/dV overwritten by each query head of a GQA group instead of accumulated", true,
       m::gqa_kv_grad_last_head_only},
      {"mutant-online-softmax-max-not-rescaled",
       "online softmax: what earlier key tiles accumulated is not rescaled when a later tile raises the maximum", true,
       m::online_softmax_max_not_rescaled, Sequences::long_sequences},
      {"mutant-online-softmax-sum-not-rescaled",
       "online softmax: the accumulator is rescaled when the maximum rises, the row sum is not", true,
       m::online_softmax_sum_not_rescaled, Sequences::long_sequences},
      {"mutant-split-kv-combine-by-key-counts",
       "split-KV decoding weights each piece of the cache by its key count instead of its softmax sum", true,
       m::split_kv_combine_by_key_counts, Sequences::long_sequences},
      {"mutant-window-tile-skip-from-last-query",
       "a block of queries skips the key tiles before its last query's window: earlier queries lose keys", true,
       m::window_tile_skip_from_last_query, Sequences::long_sequences},
      {"mutant-bf16-pv-accumulation",
       "declares bf16; P.V accumulated key by key in a bf16 register instead of fp32 (otherwise exact)", true,
       [](const Case& c) { return m::pv_accumulated_in(Precision::bf16, c); }, Sequences::long_sequences,
       Precision::bf16, RopeAngles::float64, "", kAccumulationShrinkCandidates},
      {"mutant-bf16-row-sum-accumulation",
       "declares bf16; the softmax row sum accumulated key by key in bf16 instead of fp32 (otherwise exact)", true,
       [](const Case& c) { return m::row_sum_accumulated_in(Precision::bf16, c); }, Sequences::long_sequences,
       Precision::bf16, RopeAngles::float64},
  };
  for (Mutant& mutant : real_bugs()) catalog.push_back(std::move(mutant));
  for (Mutant& mutant : latent_mutants()) catalog.push_back(std::move(mutant));
  for (Mutant& mutant : context_parallel_mutants()) catalog.push_back(std::move(mutant));
  return catalog;
}

}  // namespace

const std::vector<Mutant>& mutant_catalog() {
  static const std::vector<Mutant> catalog = build_catalog();
  return catalog;
}

const Mutant* find_mutant(const std::string& name) {
  for (const Mutant& mutant : mutant_catalog()) {
    if (mutant.name == name) return &mutant;
  }
  return nullptr;
}

std::vector<std::string> mutant_names() {
  std::vector<std::string> names;
  for (const Mutant& mutant : mutant_catalog()) names.push_back(mutant.name);
  return names;
}

}  // namespace attncheck::mutants
