// The cos/sin table the kernels rotate by: [tokens, rotary_dim / 2, 2] (cos, sin) of
// position x inv_freq_i (core/model/rope_frequencies.hpp: theta^(-2i / rotary_dim), scaled by the layer's
// RoPE scaling), times the scaling's attention factor, formed in fp64 exactly as the reference forms them
// (reference/rope.cpp) and then stored as float. A float angle would be off by ~0.03 rad at positions
// near 2^20. `positions` are one forward call's tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/geometry.hpp"

namespace attncheck::cuda_impl {

std::vector<double> rope_table(const Geometry& geometry, std::span<const std::int64_t> positions);

}  // namespace attncheck::cuda_impl
