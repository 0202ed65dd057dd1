// The low-precision yardstick's layer (emulated_layer.hpp) for multi-head latent attention
// (core/model/latent_attention.hpp): DeepSeek's MLA written naively in the candidate's precision, every
// operation's result stored as the plain emulated layer stores it: q through q_a_proj, q_a_layernorm and
// q_b_proj (or q_proj); [c_kv | k_pe] through kv_a_proj_with_mqa, kv_a_layernorm on c_kv; K and V
// decompressed per head through kv_b_proj (the expanded form: the one an implementation without weight
// absorption computes, and what decoding by re-expanding the cache computes per query); k_pe rotated once
// and shared by every head; qk-wide q/k heads and v_head_dim-wide v heads through the attention; o_proj.
//
// Unsharded, like the plain layer: its per-rank gradients are the slices of the whole layer's (the
// replicated down-projections and latent norms: their all-reduced sums, as a rank holds them).
#pragma once

#include <cstdint>
#include <span>

#include "core/model/case.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"
#include "reference/emulated_layer.hpp"

namespace attncheck::reference::emulation {

// out and the whole layer's gradients (latent parameter names). fp64 ignores the variant.
Result run_latent_layer(const Case& test_case, Precision precision, EmulationVariant variant);

// The forward pass alone, out [batch, seq, hidden], each token rotated with the frequencies of its forward
// call (token_largest_positions, as emulated_layer.cpp's decode_with_call_frequencies needs).
Tensor latent_forward_out(const Case& test_case, Precision precision, EmulationVariant variant,
                          std::span<const std::int64_t> token_largest_positions);

}  // namespace attncheck::reference::emulation
