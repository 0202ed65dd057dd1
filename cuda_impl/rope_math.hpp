// RoPE as the kernels do it (qk_norm_rope.cu), shared with its CPU test (rope_math_test.cpp, against
// reference::apply_rope): the pair of channels i rotates, and the rotation of a row by a cos/sin table
// row. Lane `lane` of `lanes` handles pairs lane, lane + lanes, ... (a warp: 32 lanes; the CPU: 1).
#pragma once

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

struct RopePair {
  int first, second;
};

// Half-split pairs (i, i + rotary_dim / 2) (GPT-NeoX, Llama, Qwen); interleaved (2i, 2i + 1) (GPT-J).
ATTNCHECK_HOST_DEVICE RopePair rope_pair(int i, int rotary_dim, bool interleaved) {
  return interleaved ? RopePair{2 * i, 2 * i + 1} : RopePair{i, i + rotary_dim / 2};
}

// row[0, rotary_dim) rotated by the angles of cos_sin [rotary_dim / 2][2] (cos, sin); sign +1 forward,
// -1 back (the transpose). A pair (a, b) becomes (a cos - b sin, b cos + a sin).
ATTNCHECK_HOST_DEVICE void rotate_pairs(float* row, const float* cos_sin, int rotary_dim, bool interleaved, float sign,
                                        int lane, int lanes) {
  for (int i = lane; i < rotary_dim / 2; i += lanes) {
    const float cos = cos_sin[2 * i];
    const float sin = sign * cos_sin[2 * i + 1];
    const RopePair pair = rope_pair(i, rotary_dim, interleaved);
    const float a = row[pair.first], b = row[pair.second];
    row[pair.first] = a * cos - b * sin;
    row[pair.second] = b * cos + a * sin;
  }
}

}  // namespace attncheck::cuda_impl
