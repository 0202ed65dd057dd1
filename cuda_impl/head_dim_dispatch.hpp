// head_dim → kernel instantiation. Fast paths are compiled for the widths real models use, each with
// its width as a compile-time constant (head_dim 80 runs as 80, not padded to 96); every other even
// head_dim in [2, 256] runs the generic path, whose tile holds kGenericCapacity columns and masks the
// columns past head_dim. Anything else is an explicit error, never a silent fallback.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_impl/host_device.hpp"

namespace attncheck::cuda_impl {

inline constexpr std::int32_t kFastHeadDims[] = {64, 80, 96, 128, 192, 256};
inline constexpr std::int32_t kMaxHeadDim = 256;
inline constexpr std::int32_t kGenericCapacity = 256;  // the generic path's tile width

// Kernels process head_dim in chunks of 16 (one mma k-step); a fast path's width is a multiple of 16.
ATTNCHECK_HOST_DEVICE constexpr std::int32_t padded_to_chunks(std::int32_t head_dim) {
  return (head_dim + 15) / 16 * 16;
}

constexpr bool is_fast_head_dim(std::int32_t head_dim) {
  for (const std::int32_t fast : kFastHeadDims) {
    if (fast == head_dim) return true;
  }
  return false;
}

// What dispatch_head_dim hands the callable: the tile width as a type, and whether it is exact.
template <std::int32_t Capacity, bool Exact>
struct HeadDimTag {
  static constexpr std::int32_t capacity = Capacity;  // columns the tile holds (a multiple of 16)
  static constexpr bool exact = Exact;                // capacity == head_dim: no column masking
};

class UnsupportedHeadDim : public std::invalid_argument {
 public:
  explicit UnsupportedHeadDim(std::int32_t head_dim)
      : std::invalid_argument("head_dim " + std::to_string(head_dim) +
                              " is not supported by the CUDA kernels: valid head_dims are even and in [2, 256]") {}
};

// Calls f(HeadDimTag<...>{}) for head_dim; throws UnsupportedHeadDim for odd or out-of-range values.
template <typename F>
decltype(auto) dispatch_head_dim(std::int32_t head_dim, F&& f) {
  switch (head_dim) {
    case 64:
      return f(HeadDimTag<64, true>{});
    case 80:
      return f(HeadDimTag<80, true>{});
    case 96:
      return f(HeadDimTag<96, true>{});
    case 128:
      return f(HeadDimTag<128, true>{});
    case 192:
      return f(HeadDimTag<192, true>{});
    case 256:
      return f(HeadDimTag<256, true>{});
    default:
      if (head_dim < 2 || head_dim > kMaxHeadDim || head_dim % 2 != 0) throw UnsupportedHeadDim(head_dim);
      return f(HeadDimTag<kGenericCapacity, false>{});
  }
}

}  // namespace attncheck::cuda_impl
