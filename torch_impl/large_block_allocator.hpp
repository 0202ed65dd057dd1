// LibTorch's CPU allocator for the LibTorch implementations: blocks of kLargeBlockBytes or more are mapped
// and unmapped by themselves, smaller ones come from LibTorch's own allocator. Why: attncheck's main() keeps
// every freed block in one heap (glibc never maps nor trims: cli/main.cpp), which spared the reference its
// page faults but let eager attention's [seq, seq] tensors (4160^2 x 8 bytes = 138 MB each) fragment the
// heap, so torch-cpu-fp64 on a seq-4160 golden peaked at 1.7-2.3 GB for a 615 MB layer, over its 3x bound
// (1.6 GB, 2.6x, with this allocator). 128 MiB, not less: at 32 MiB the wide layers' weights and gradients
// were mapped too, and their fresh pages' zeroing took `attncheck run` from 77 to 82 s (paired runs).
#pragma once

#include <cstddef>

namespace attncheck::torch_impl {

inline constexpr std::size_t kLargeBlockBytes = std::size_t{128} << 20;

// Installs the allocator as LibTorch's CPU allocator, once per process (later calls do nothing).
void install_large_block_allocator();

// Unmaps the freed large blocks kept for reuse (large_block_allocator.cpp): at the end of a run.
void release_kept_large_blocks();

}  // namespace attncheck::torch_impl
