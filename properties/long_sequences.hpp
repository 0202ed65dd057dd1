// The long-sequence profile's generators (SizeProfile::long_sequences, generators.hpp): what attention
// kernels get wrong only past their first tile. Kernels tile keys by 64 or 128, so lengths, windows and
// key padding are drawn next to multiples of 64 and 128 (one or two either side), or prime (never a
// multiple of a tile), or anywhere; decoding is a long prefill and then many calls of up to 16 tokens,
// a split-KV decode kernel's range. A length shrinks through every smaller length, whichever
// alternative drew it, so that shrinking ends at the smallest length that still fails.
#pragma once

#include <cstdint>
#include <optional>

#include <rapidcheck.h>

#include "core/generation/input_generation.hpp"
#include "core/model/geometry.hpp"
#include "properties/generators.hpp"

namespace attncheck::properties::long_sequences {

// A length in [low, high] (high >= low).
rc::Gen<std::int64_t> lengths(std::int64_t low, std::int64_t high);

// head_dims that are multiples of step (even), up to max: small ones, the widths kernels specialise (64, 80,
// 96, 128, 192, 256) that are such multiples, any.
rc::Gen<std::int64_t> head_dims(std::int64_t max_head_dim, std::int64_t step = 2);

// Sliding windows: none, or a length in [1, max_seq + 1], so that windows begin inside a tile.
rc::Gen<std::optional<std::int64_t>> windows(std::int64_t max_seq);

// Inputs for a geometry: batch, then a length within the work budget, then key lengths (any row may be
// padded, sometimes to 0 keys), positions, activations and a decode schedule.
rc::Gen<InputOptions> input_options(const GeometrySpec& geometry, std::int64_t tp_size, const GenLimits& limits,
                                    int size);

}  // namespace attncheck::properties::long_sequences
