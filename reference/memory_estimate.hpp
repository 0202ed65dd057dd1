// Upper bounds of the memory a golden's making takes at peak: the case (weights, x, dout), the fp64
// reference's forward, backward and decoding over every TP rank, and the golden file's copies. Checked
// before anything is generated, so that a geometry within the documented limits that this machine
// cannot hold is refused with exit 2 (core/resources/memory_room.hpp) instead of std::bad_alloc.
//
// The bound counts buffers in float64 values per unit of each dimension (see memory_estimate.cpp);
// memory_estimate_test holds it above the peak resident memory measured across geometries.
#pragma once

#include <cstdint>

#include "core/model/geometry.hpp"

namespace attncheck::reference {

struct RunSize {
  std::int64_t batch = 1;
  std::int64_t seq = 1;  // tokens per row, the prefill of a decode schedule included
  std::int64_t tp_size = 1;
  int threads = 0;  // OpenMP threads, each with its own attention work buffers; 0: the
                    // reference's own count (omp_get_max_threads)
};

// Bytes; each saturates at the largest std::uint64_t instead of overflowing.
// The case alone: weights, x, dout, positions.
std::uint64_t case_bytes(const Geometry& geometry, const RunSize& size);
// The reference's run of a case already held (forward, backward, decoding, results), over and above it.
std::uint64_t reference_run_bytes(const Geometry& geometry, const RunSize& size);
// `golden make`: the case, its run and the file's write buffers.
std::uint64_t golden_make_peak_bytes(const Geometry& geometry, const RunSize& size);

// The layer's own bytes in float64, as a training framework's unfused layer holds them (no allocator or
// library overhead): its weights and their gradients, and its activations: x, dout, out and dx
// ([tokens, hidden] each); q, k, v and the context per token (a latent layer's c_q, c_kv and k_pe too); and
// the attention scores and probabilities, [batch, heads, seq, seq] each, which an unfused layer saves for its
// backward (the s^2 terms of Korthikanti et al. 2022's activation count, "Reducing Activation Recomputation in
// Large Transformer Models": QK^T and the softmax's output). `attncheck run --junit` reports every pair's peak
// resident memory against it; each implementation is held to kPeakLayerBytesFactor times it plus
// kPeakFixedAllowanceBytes for what libraries take once whatever the layer (LibTorch's and OpenMP's thread
// pools, MKL's buffers: a few MB on the smallest goldens).
std::uint64_t layer_bytes(const Geometry& geometry, const RunSize& size);
inline constexpr double kPeakLayerBytesFactor = 3.0;
inline constexpr std::uint64_t kPeakFixedAllowanceBytes = std::uint64_t{64} << 20;

}  // namespace attncheck::reference
