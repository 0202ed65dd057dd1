#!/usr/bin/env bash
# Regenerates the committed goldens in this folder. Usage, after building: golden/data/make_goldens.sh
# [path/to/attncheck] (absolute, or relative to golden/data; default ../../build/cli/attncheck).
# Weights are named by the generator and projection gradients sketched (golden/SCHEMA.md), except in
# the small_* goldens, which store everything in full as examples for readers. The model-shaped
# ones: batch 2, 6 tokens, decoding 4 + 1 + 1. The long ones (seq 1024 and 2048) also name their inputs
# and sketch out, grads/x and decode/out, so they cost kilobytes.
# `attncheck golden coverage golden/data/*.h5 --require-all` shows which golden makes each feature bite.
set -euo pipefail
cd "$(dirname "$0")"
attncheck=${1:-../../build/cli/attncheck}
compact=(--weights generated --sketch-gradients --batch 2 --seq 6 --seed 2026)
decode=(--decode 4,1,1)

"$attncheck" golden make --preset qwen3-0.6b --tp 1 "${compact[@]}" "${decode[@]}" -o qwen3-0.6b_tp1.h5
"$attncheck" golden make --preset qwen3-0.6b --tp 2 "${compact[@]}" "${decode[@]}" -o qwen3-0.6b_tp2.h5
"$attncheck" golden make --preset qwen3-0.6b --tp 4 "${compact[@]}" "${decode[@]}" --pad-keys -o qwen3-0.6b_tp4.h5
"$attncheck" golden make --preset qwen3-4b --tp 2 "${compact[@]}" "${decode[@]}" -o qwen3-4b_tp2.h5
"$attncheck" golden make --preset qwen3-32b --tp 16 "${compact[@]}" "${decode[@]}" -o qwen3-32b_tp16.h5
"$attncheck" golden make --preset gemma-3-270m --tp 1 "${compact[@]}" "${decode[@]}" -o gemma-3-270m_tp1.h5
"$attncheck" golden make --preset gemma-3-270m --tp 4 "${compact[@]}" "${decode[@]}" --pad-keys -o gemma-3-270m_tp4.h5
"$attncheck" golden make --preset gpt-neox-20b --tp 1 "${compact[@]}" "${decode[@]}" -o gpt-neox-20b_tp1.h5
long=(--weights generated --inputs generated --sketch-gradients --sketch-activations --seed 2026)

# Past the first 64/128-key tiles: a long prefill then decoding over its cache; a window (512) shorter
# than the sequence with padding ending one key past a 64-key tile edge (1985 = 31 * 64 + 1).
"$attncheck" golden make --preset qwen3-0.6b --tp 2 "${long[@]}" --batch 1 --seq 1024 --decode 1000,1,16,7 \
  -o qwen3-0.6b_tp2_seq1024.h5
"$attncheck" golden make --preset gemma-3-270m --tp 2 "${long[@]}" --batch 1 --seq 2048 --key-lengths 1985 \
  -o gemma-3-270m_tp2_seq2048.h5
# GPT-NeoX's family long: head_dim omitted, rotary_pct 0.25, q/k/v and o biases. The biases give V a
# constant part, which a sum accumulated in bf16 stops adding once it is 2^8 times a term: the committed
# golden that catches bf16 accumulation of P.V (mutant-bf16-pv-accumulation), which seq 1024 without
# biases does not.
"$attncheck" golden make --preset pythia-410m --tp 2 "${long[@]}" --batch 1 --seq 2048 -o pythia-410m_tp2_seq2048.h5

# Today's attention variants, imported from the official config.json files (core/config/hf_configs) at
# their real widths, TP 2 (Gemma 2's full layer at TP 8: 4 KV heads, each replicated on 2 ranks). Batch
# row 0 sits at positions < 16 and row 1 past 2^16, beyond every original_max_position_embeddings, so
# llama3's band, longrope's long factors (chosen per call) and linear scaling all bite; inputs named by
# the generator and everything sketched, so each costs well under a megabyte. golden.hf_transformers runs
# transformers' own module for each (docs/FRAMEWORKS.md's table).
hf=../../core/config/hf_configs
variants=(--weights generated --inputs generated --sketch-gradients --sketch-activations --batch 2 --seq 6 \
  --seed 2026 "${decode[@]}")
"$attncheck" golden make --hf-config $hf/meta-llama__Llama-3.1-8B.json --tp 2 "${variants[@]}" -o llama-3.1-8b_tp2.h5
"$attncheck" golden make --hf-config $hf/google__gemma-2-2b.json --hf-layer 0 --tp 2 "${variants[@]}" \
  -o gemma-2-2b_layer0_tp2.h5
"$attncheck" golden make --hf-config $hf/google__gemma-2-2b.json --hf-layer 1 --tp 8 "${variants[@]}" \
  -o gemma-2-2b_layer1_tp8.h5
"$attncheck" golden make --hf-config $hf/google__gemma-3-4b-pt.json --hf-layer 5 --tp 2 "${variants[@]}" \
  -o gemma-3-4b_layer5_tp2.h5
"$attncheck" golden make --hf-config $hf/microsoft__Phi-4-mini-instruct.json --tp 2 "${variants[@]}" -o phi-4-mini_tp2.h5
# The same layer in a short conversation: one batch row, every position below 16, far below the
# pretraining length (4096), so longrope's short factors are the right ones (llama.cpp #24823 used the long
# ones whenever the allocated context was long: mutant-llama-cpp-24823-longrope-long-factors-always).
"$attncheck" golden make --hf-config $hf/microsoft__Phi-4-mini-instruct.json --tp 2 --weights generated \
  --inputs generated --sketch-gradients --sketch-activations --batch 1 --seq 6 --seed 2026 "${decode[@]}" \
  -o phi-4-mini_tp2_short.h5
"$attncheck" golden make --hf-config $hf/ibm-granite__granite-3.3-8b-instruct.json --tp 2 "${variants[@]}" \
  -o granite-3.3-8b_tp2.h5
"$attncheck" golden make --hf-config $hf/HuggingFaceTB__SmolLM3-3B.json --hf-layer 3 --tp 2 "${variants[@]}" \
  -o smollm3-3b_layer3_tp2.h5
"$attncheck" golden make --hf-config $hf/EleutherAI__gpt-j-6b.json --tp 2 "${variants[@]}" -o gpt-j-6b_tp2.h5
# gpt-oss-20b: attention sinks, q/k/v/o biases, yarn, 64 query heads of head_dim 64 over 8 KV heads. Its
# full layer (1) at TP 2; its sliding layer (0, window 128) at TP 16, two ranks per KV head (replicated),
# at seq 160 so that the window bites, decoding 150 + 1 + 9 tokens over its cache.
"$attncheck" golden make --hf-config $hf/openai__gpt-oss-20b.json --hf-layer 1 --tp 2 "${variants[@]}" \
  -o gpt-oss-20b_layer1_tp2.h5
"$attncheck" golden make --hf-config $hf/openai__gpt-oss-20b.json --hf-layer 0 --tp 16 "${long[@]}" --batch 1 \
  --seq 160 --decode 150,1,9 -o gpt-oss-20b_layer0_tp16_seq160.h5
# OLMo-2 7B: QK-norm over the whole q and k width (4096 channels each), split over TP 4 so that every
# rank holds a quarter of each norm and the sums of squares must be all-reduced.
"$attncheck" golden make --hf-config $hf/allenai__OLMo-2-1124-7B-Instruct.json --tp 4 "${variants[@]}" \
  -o olmo-2-7b_tp4.h5

# Small and stored in full. softcap_padding: softcap, real padding (key lengths 7, 3, 5 of 7),
# heavy-tailed activations. window_masked_rows: a window of 3 at seq 9, padding that leaves queries
# seeing no key (key lengths 9, 4, 0), position gaps, partial RoPE, query_pre_attn_scalar != head_dim,
# biases with TP 2 over one KV head (replicated).
"$attncheck" golden make --hidden 64 --heads 4 --kv-heads 2 --head-dim 24 --softcap 5 --qkv-bias --out-bias \
  --batch 3 --seq 7 --key-lengths 7,3,5 --activations heavy-tailed --decode 3,2,1 --seed 2026 -o small_softcap_padding.h5
"$attncheck" golden make --hidden 32 --heads 4 --kv-heads 1 --head-dim 16 --rotary-dim 8 --qk-norm rms --qkv-bias \
  --out-bias --sliding-window 3 --query-pre-attn-scalar 20 --tp 2 --batch 3 --seq 9 --key-lengths 9,4,0 \
  --position-gaps --decode 5,1,3 --seed 2026 -o small_window_masked_rows.h5
# width_norm_replicated_kv: OLMo-2's whole-width QK-norm where TP (4) exceeds the KV heads (2), so each
# KV head's k_norm channels sit on two ranks and must be counted once (SGLang #20967 cut that weight as
# kv width / TP: mutant-sglang-20967-width-norm-shard-by-hidden).
"$attncheck" golden make --hidden 32 --heads 4 --kv-heads 2 --head-dim 8 --qk-norm rms-full-width --tp 4 --batch 2 \
  --seq 6 --decode 4,1,1 --seed 2026 -o small_width_norm_replicated_kv.h5

# yarn's optional fields, stated (configs/: small synthetic Qwen3-style configs, not a real model's): the
# stated attention_factor 1.0 (the final factor as transformers uses it, no log applied; Laguna-style configs
# state 1.0 to switch the scaling off) with beta_fast / beta_slow 16 / 2 and truncate false; and DeepSeek's
# mscale / mscale_all_dim ratio (1.0 / 0.707) with the factor derived, in a GPT-NeoX-style layer (biases,
# rotary_pct 0.5: yarn over the rotated channels only). Each field bites (golden coverage); the stated
# factor's misreadings (mutant-sglang-33558-yarn-mscale-twice and the two beside it) fail small_yarn_stated,
# yarn over the whole head (mutant-megatron-7476-yarn-ignores-rotary-percent) fails small_yarn_mscale.
"$attncheck" golden make --hf-config configs/small_yarn_stated.json --tp 2 --batch 2 --seq 8 --decode 4,2,2 \
  --seed 2026 -o small_yarn_stated.h5
"$attncheck" golden make --hf-config configs/small_yarn_mscale.json --tp 2 --batch 2 --seq 8 --decode 4,2,2 \
  --seed 2026 -o small_yarn_mscale.h5

# longrope switching factors between decode calls (configs/small_longrope_switch.json: Phi-3-style,
# original_max_position_embeddings 20 at the top level, partial RoPE 12 of 16): positions 12 .. 23, so the
# prefill (12 .. 17) and the first step (18, 19) take the short factors and the last step (20 .. 23) and the
# whole sequence the long ones; outlier activations (one hidden channel in 32 scaled by 32).
"$attncheck" golden make --hf-config configs/small_longrope_switch.json --tp 2 --batch 1 --seq 12 --decode 6,2,4 \
  --activations outliers --seed 2026 -o small_longrope_switch.h5

# A golden written under Megatron's equal-block TP convention (SCHEMA.md "TP conventions"): TP 4 over 2 KV
# heads, so the fused QKV's equal row blocks cut heads apart and the per-rank gradients differ in shape
# from replicated-kv's (golden coverage: "tp convention"); Megatron-Core's SelfAttention passes it per rank
# (ctest peer.megatron_core).
"$attncheck" golden make --hidden 48 --heads 4 --kv-heads 2 --head-dim 12 --qk-norm rms --tp 4 \
  --tp-convention megatron-equal-block --batch 2 --seq 6 --decode 4,1,1 --seed 2026 -o small_megatron_equal_block.h5

# Context-parallel layouts (SCHEMA.md "Context-parallel layouts"): the same tensors any layer computes, with the
# layout a context-parallel implementation runs (reference-cp). The ring at TP 2 x CP 2, load-balanced over an
# uneven 11 tokens (4 chunks of 3, 3, 3, 2) with padding and a window crossing chunk edges; Ulysses at CP 4 over
# 2 KV heads (each replicated on 2 CP ranks) with position gaps, decoding 4 + 1 + 3 + 1 after its CP prefill;
# logits of order 10^2 (scale 100, as attention-logit growth gives; query_pre_attn_scalar 1e-4) with sinks, a
# contiguous ring at TP 2 x CP 3: a later block's log-sum-exp exceeds the running one by more than fp32's exp
# range (88.7), so a float32 merge not shifted by the larger overflows (mutant-cp-ring-lse-merge-without-max-shift);
# and decoding 5 + 1 + 2 + 1 after a ring prefill at TP 2 x CP 3 with QK-norm and a window of 2: token 5 sees
# keys 4 and 5, both on CP rank 2, so ranks 0 and 1 are both empty for it
# (mutant-vllm-39148-cp-decode-merge-of-empty-partials-nan); no padding, so that transformers' Qwen3 module runs
# it. Every context-parallel mutant fails one of them.
"$attncheck" golden make --hidden 24 --heads 4 --kv-heads 2 --head-dim 6 --sliding-window 5 --tp 2 --cp 2 --cp-scheme ring \
  --batch 2 --seq 11 --pad-keys --seed 2026 -o small_cp_ring_tp2.h5
"$attncheck" golden make --hidden 32 --heads 8 --kv-heads 2 --head-dim 4 --qk-norm rms --cp 4 --cp-scheme ulysses \
  --batch 2 --seq 9 --position-gaps --decode 4,1,3,1 --seed 2026 -o small_cp_ulysses.h5
"$attncheck" golden make --hidden 24 --heads 4 --kv-heads 2 --head-dim 6 --query-pre-attn-scalar 1e-4 --attention-sinks \
  --tp 2 --cp 3 --cp-scheme ring --cp-chunks contiguous --batch 2 --seq 10 --pad-keys --seed 2026 \
  -o small_cp_ring_large_logits.h5
"$attncheck" golden make --hidden 24 --heads 4 --kv-heads 2 --head-dim 6 --qk-norm rms --sliding-window 2 --tp 2 --cp 3 \
  --cp-scheme ring --batch 2 --seq 9 --decode 5,1,2,1 --seed 2026 -o small_cp_ring_decode.h5

# Long goldens where a 16-bit accumulator's error shows (docs/MUTANTS.md, "Which committed goldens carry the low-precision contract's teeth"):
# Gemma 2's sliding layer with its real window (4096), softcap 50 and query_pre_attn_scalar 256, at reduced
# width (configs/gemma-2-narrow.json: 2 query heads over 1 KV head of head_dim 256, hidden 256) so that a
# sequence of 4160 fits: the window bites for the last 64 queries (gemma-2-2b_layer0_tp2.h5's 4096 at seq 6
# is inert), and the decode's last step crosses it with the cache trimmed to the window; and a narrow layer
# with q/k/v and o biases at seq 4096, whose V has a constant part over twice pythia's keys.
"$attncheck" golden make --hf-config configs/gemma-2-narrow.json --hf-layer 0 --tp 2 "${long[@]}" --batch 1 \
  --seq 4160 --decode 4090,1,69 -o gemma-2-narrow_layer0_tp2_seq4160.h5
"$attncheck" golden make --hidden 64 --heads 2 --kv-heads 1 --head-dim 32 --qkv-bias --out-bias --tp 2 "${long[@]}" \
  --batch 1 --seq 4096 --decode 4000,1,95 -o narrow_biases_tp2_seq4096.h5
# fp16 keeps 3 more bits than bf16, so its P.V sum shows only where many queries each sum thousands of keys of a
# V with a constant part: an encoder-style layer (no causal mask) with q/k/v biases at seq 4096
# (mutant-llama-cpp-9166-fp16-accumulation fails it; with o_proj's bias too, o_bias raises out's scale and
# all but 6 of the failing elements pass).
"$attncheck" golden make --hidden 96 --heads 1 --head-dim 96 --qkv-bias --non-causal "${long[@]}" --batch 1 --seq 4096 \
  -o narrow_bidirectional_seq4096.h5

# The generator's duplicate-block rule (SCHEMA.md "Weight generator v1"): at hidden 1 and head_dim 2 a head's
# q_proj block is two numbers, and at seed 3675 head 3's first draw equals an earlier head's, so the rule
# redraws it; a reader that skips the rule rebuilds other weights (golden coverage: "duplicate-block rule").
# QK-norm rms makes it a Qwen3-style layer, whose transformers config accepts hidden 1 over 4 heads
# (LlamaConfig refuses a hidden size the heads do not divide).
"$attncheck" golden make --hidden 1 --heads 4 --kv-heads 2 --head-dim 2 --qk-norm rms --weights generated --tp 2 \
  --batch 2 --seq 6 --decode 4,1,1 --seed 3675 -o small_duplicate_block.h5

# Multi-head latent attention (schema version 3) at reduced width, every distinct ratio kept (q/k head 24 = 16 + 8
# rope, v head 16, hidden / heads 28; configs/*-narrow.json): DeepSeek-V3's layer (yarn x40, mscale_all_dim 1) at
# TP 2 and TP 4 (one head per rank, padded keys), Kimi K2's (theta 5e4, yarn x32 with beta 1/1) at TP 8, and
# DeepSeek-V2-Lite's q_proj form (q_lora_rank null, mscale 0.707) at TP 2; decoding 4 + 1 + 1. Gradients whole
# (projection sketches are a plain layer's), activations sketched, weights and inputs by the generator.
latent=(--weights generated --inputs generated --sketch-activations --batch 2 --seq 6 --seed 2026 "${decode[@]}")
"$attncheck" golden make --hf-config configs/deepseek-v3-narrow.json --tp 2 "${latent[@]}" -o deepseek-v3-narrow_tp2.h5
"$attncheck" golden make --hf-config configs/deepseek-v3-narrow.json --tp 4 "${latent[@]}" --pad-keys \
  -o deepseek-v3-narrow_tp4.h5
"$attncheck" golden make --hf-config configs/kimi-k2-narrow.json --tp 8 "${latent[@]}" -o kimi-k2-narrow_tp8.h5
"$attncheck" golden make --hf-config configs/deepseek-v2-lite-narrow.json --tp 2 "${latent[@]}" \
  -o deepseek-v2-lite-narrow_tp2.h5

# The conformance ladder (docs/LADDER.md): goldens a plain layer can run, climbing one feature at a time, that
# `attncheck run` opens its support matrix with. Rungs 01-03 build the plain modern layer (multi-head with head_dim
# derived, then grouped-query, then head_dim 16 independent of hidden / heads = 8, where a layer scaling by
# sqrt(hidden / heads) is wrong); every later rung adds exactly one feature to rung 03. All at hidden 32, 4 query
# heads, batch 2, seq 8, positions from 0 in every row (but rung 04's), weights and inputs named by the generator,
# gradients stored whole: a few tens of kilobytes each.
ladder=(--batch 2 --seq 8 --position-offset 0 --weights generated --inputs generated --seed 2026)
base=(--hidden 32 --heads 4 --kv-heads 2 --head-dim 16)
"$attncheck" golden make --hidden 32 --heads 4 "${ladder[@]}" -o ladder_01_plain-mha.h5
"$attncheck" golden make --hidden 32 --heads 4 --kv-heads 2 "${ladder[@]}" -o ladder_02_gqa.h5
"$attncheck" golden make "${base[@]}" "${ladder[@]}" -o ladder_03_explicit-head-dim.h5
"$attncheck" golden make "${base[@]}" --batch 2 --seq 8 --position-gaps --weights generated --inputs generated \
  --seed 2026 -o ladder_04_position-ids.h5
"$attncheck" golden make "${base[@]}" --rotary-dim 8 "${ladder[@]}" -o ladder_05_partial-rope.h5
"$attncheck" golden make "${base[@]}" --rotary-dim 8 --rope-style interleaved "${ladder[@]}" \
  -o ladder_06_partial-rope-interleaved.h5
"$attncheck" golden make "${base[@]}" --qk-norm rms "${ladder[@]}" -o ladder_07_qk-norm.h5
"$attncheck" golden make "${base[@]}" --qkv-bias --out-bias "${ladder[@]}" -o ladder_08_biases.h5
"$attncheck" golden make "${base[@]}" --key-lengths 8,5 "${ladder[@]}" -o ladder_09_key-padding.h5
"$attncheck" golden make "${base[@]}" --sliding-window 3 "${ladder[@]}" -o ladder_10_sliding-window.h5
"$attncheck" golden make "${base[@]}" --softcap 1 "${ladder[@]}" -o ladder_11_softcap.h5
"$attncheck" golden make "${base[@]}" --attention-sinks "${ladder[@]}" -o ladder_12_sinks.h5
"$attncheck" golden make "${base[@]}" --decode 4,1,3 "${ladder[@]}" -o ladder_13_kv-cache-decode.h5
"$attncheck" golden make "${base[@]}" --tp 2 "${ladder[@]}" -o ladder_14_tp2-rank-gradients.h5
"$attncheck" golden make --hf-config configs/ladder_latent.json "${ladder[@]}" -o ladder_15_latent-attention.h5

# Store each golden's yardsticks for low-precision candidates (SCHEMA.md, "Stored yardsticks"), so that
# checking one reads them instead of running the naive layer twelve times: fp32 with float32 and float64
# angles everywhere (torch-cpu-fp32 declares float64, transformers-style workers float32); bf16 and fp16
# with float64 angles (the CUDA kernels and the bf16 mutants) on the long goldens, where computing them
# takes minutes.
"$attncheck" golden yardstick ./*.h5
"$attncheck" golden yardstick --precision bf16 --precision fp16 --rope-angles float64 ./*_seq*.h5
