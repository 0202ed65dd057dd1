// Rotary position embedding on the first rotary_dim channels of every head.
//
// Frequency of pair i (0 <= i < rotary_dim/2): core/model/rope_frequencies.hpp (rope_theta^(-2i /
// rotary_dim), scaled by the layer's RoPE scaling), angle = position * inv_freq_i, all in fp64; cos and
// sin are multiplied by the scaling's attention factor (1 for most). Pairing by style:
//   half-split:  (i, i + rotary_dim/2)    GPT-NeoX, Llama, Qwen, Gemma ("rotate_half")
//   interleaved: (2i, 2i + 1)             GPT-J, Meta's original Llama
// A pair (a, b) becomes (a cos - b sin, b cos + a sin). Channels >= rotary_dim pass through.
#pragma once

#include <cstdint>
#include <span>

#include "core/model/geometry.hpp"
#include "core/model/rope_frequencies.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::reference {

enum class RopeDirection {
  forward,   // rotate by +angle
  backward,  // rotate by -angle: the transpose, which maps d(rotated) to d(unrotated)
};

// rows: [tokens, heads * head_dim], token t at positions[t]; rotated in place. The rows are one forward
// call's tokens: longrope chooses its factors from their largest position.
void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                RopeDirection direction);

// Rows whose heads are head_width wide with the rotated channels starting at first_channel of each head
// (rotary_dim of them, paired by the geometry's style): latent attention's q ([heads * qk_head_dim], first
// channel qk_nope_head_dim) and its shared k_pe ([qk_rope_head_dim], one head, first channel 0).
struct RopeLayout {
  std::int64_t head_width = 0;
  std::int64_t first_channel = 0;
  static RopeLayout of(const Geometry& geometry) { return {geometry.head_dim(), geometry.rope_offset()}; }
};
void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                RopeLayout layout, RopeDirection direction);

// The same with the call's frequencies given (core/model/rope_frequencies.hpp): the naive layer of the
// mutant catalog passes its own, which its RoPE-scaling mutants get wrong; the reference never does.
void apply_rope(MatrixRef rows, std::span<const std::int64_t> positions, std::int64_t heads, const Geometry& geometry,
                const RopeFrequencies& frequencies, RopeDirection direction);

}  // namespace attncheck::reference
