// RapidCheck generators of attention cases: random geometries whose head_dim is often not
// hidden_size / num_heads, GQA groups, partial RoPE in both pairings, QK-norm, biases, softcap, windows,
// TP sizes from the valid set (replicated KV included), and inputs with large position offsets, gaps,
// key padding and decode schedules. Built constructively (gen::mapcat on what each choice depends on),
// never by filtering, so every generated spec is valid and shrinking keeps it valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <rapidcheck.h>

#include "core/capabilities/capabilities.hpp"
#include "properties/case_spec.hpp"

namespace attncheck::properties {

// Which sizes the generators aim at.
enum class SizeProfile {
  // seq 3 .. 12, up to 16 query heads: every feature and layout, thousands of cases a second.
  short_sequences,
  // seq 48 .. 4096 where real kernels break (long_sequences.hpp): lengths next to multiples of 64 and
  // 128 (tile edges) and primes, long prefills with caches filled in many calls, windows and padding
  // ending next to tile edges, fully masked rows, head_dim up to 256; few heads, so that a case stays
  // cheap on 2 cores.
  long_sequences,
  // Multi-head latent attention (latent_case_specs below) at short sequences: the cases `attncheck fuzz
  // --profile latent` and the latent mutants get.
  latent_attention,
  // The short profile's cases, each with a context-parallel layout (context_parallel_case_specs below): what
  // `attncheck fuzz --profile context-parallel` gives reference-cp and any context-parallel implementation.
  context_parallel,
};
std::string_view to_string(SizeProfile profile);  // "short" | "long" | "latent" | "context-parallel"
std::optional<SizeProfile> parse_size_profile(std::string_view text);

// Upper bounds at RapidCheck size 100; smaller sizes scale them down (size 0: the smallest case).
struct GenLimits {
  std::int64_t max_kv_heads = 4;
  std::int64_t max_group = 4;
  std::int64_t max_head_dim = 256;  // even head_dims 2 .. this
  std::int64_t max_hidden = 256;
  std::int64_t max_batch = 3;
  std::int64_t min_seq = 3;   // at least 3: a single token cannot reveal a mask bug
  std::int64_t max_seq = 12;  // at least min_seq
  SizeProfile profile = SizeProfile::short_sequences;
  // Long profile only: a case's attention work, batch * num_heads * seq^2 * head_dim, stays below this
  // (the longest sequences go with narrow heads): 2^30 is seq 4096 for one head of 64.
  std::int64_t max_attention_work = std::int64_t{1} << 30;
  // What the implementation states it supports (core/capabilities): every choice the generators make is drawn
  // from what it allows, so that every case is one it states (by construction: nothing is drawn and thrown
  // away). Everything by default, which draws exactly the cases the generators drew before statements existed.
  Capabilities capabilities;

  static GenLimits for_profile(SizeProfile profile);
  // `attncheck fuzz --max-size F`: every bound times F (at least the minimum each needs).
  GenLimits scaled(double factor) const;
  // These limits for an implementation that states `capabilities`: the bounds lowered to its stated maxima.
  // InputError when the profile and the statement leave no case (`--profile latent` for a layer without
  // latent attention, a max_seq below the profile's shortest sequence, a head_dim step above its maximum).
  GenLimits within(const Capabilities& stated, const std::string& implementation) const;
};

// Each row's first position id as InputOptions::position_offset takes it (both profiles draw it so): the
// generator's default offsets (absent), 0, or anywhere in [0, 1e5]; always 0 without position-offsets.
rc::Gen<std::optional<std::int64_t>> position_offsets(const Capabilities& capabilities);

// The step of head_dims drawn for these capabilities: even (RoPE pairs channels), and their multiple.
std::int64_t head_dim_step(const Capabilities& capabilities);

// The profile's cases: latent_case_specs() for the latent profile.
rc::Gen<CaseSpec> case_specs(const GenLimits& limits = {});

// Multi-head latent attention (core/model/latent_attention.hpp), short sequences: 1-4 heads, each latent
// width drawn apart (q_lora_rank absent or 1-8, kv_lora_rank 1-8, qk_nope_head_dim 0-8, qk_rope_head_dim
// 0-8 even, v_head_dim 1-8, hidden 1-16, so q/k, v and hidden / heads differ almost always), either RoPE
// pairing, yarn with DeepSeek's mscale_all_dim or none, softcap, windows and sinks sometimes; TP sizes from
// the valid set; inputs as case_specs draws them.
rc::Gen<CaseSpec> latent_case_specs(const GenLimits& limits = GenLimits::for_profile(SizeProfile::latent_attention));

// The short profile's cases with a layout over their TP plan: Ulysses or the ring (load-balanced or
// contiguous), the CP size from the valid ones up to 8 (above 1 wherever the heads admit it), so that chunks
// are uneven or empty, KV heads replicate over CP ranks, and windows and padding cross chunk edges.
rc::Gen<CaseSpec> context_parallel_case_specs(
    const GenLimits& limits = GenLimits::for_profile(SizeProfile::context_parallel));

}  // namespace attncheck::properties
