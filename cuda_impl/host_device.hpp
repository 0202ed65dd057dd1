// Functions shared by kernels and their CPU unit tests: __host__ __device__ under nvcc, plain inline
// C++ elsewhere, so the tile logic CI cannot run on a GPU is tested on the CPU (cuda_impl/*_test.cpp).
#pragma once

#if defined(__CUDACC__)
#define ATTNCHECK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ATTNCHECK_HOST_DEVICE inline
#endif
