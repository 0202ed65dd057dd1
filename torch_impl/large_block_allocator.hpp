// LibTorch's CPU allocator for the LibTorch implementations: blocks of kLargeBlockBytes or more are mapped
// and unmapped by themselves, smaller ones come from LibTorch's own allocator. Why: attncheck's main() keeps
// every freed block in one heap (glibc never maps nor trims: cli/main.cpp), which spared the reference its
// page faults but let eager attention's [seq, seq] tensors (4160^2 x 8 bytes = 138 MB each) fragment the
// heap, so torch-cpu-fp64 on a seq-4160 golden peaked at 1.7-2.3 GB for a 615 MB layer, over its 3x bound
// (1.2 GB, 1.9-2.0x, with this allocator). The threshold is the bound's fixed allowance, 64 MiB: at 128 MiB
// that pair's 127.6 MiB blocks stayed in the heap and it peaked at 2.6-2.8x, at 32 MiB the wide layers'
// weights and gradients were mapped too and their fresh pages took `attncheck run` from 77 to 82 s; at 64
// MiB run took 82.7 s against 78.5 s (medians of 4, alternating; this VM's runs vary by +-5 s).
#pragma once

#include <cstddef>

namespace attncheck::torch_impl {

inline constexpr std::size_t kLargeBlockBytes = std::size_t{64} << 20;

// Installs the allocator as LibTorch's CPU allocator, once per process (later calls do nothing).
void install_large_block_allocator();

// Unmaps the freed large blocks kept for reuse (large_block_allocator.cpp): at the end of a run.
void release_kept_large_blocks();

}  // namespace attncheck::torch_impl
