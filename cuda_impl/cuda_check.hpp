// CUDA errors become exceptions naming the call, so a failing kernel reports in the check that ran it
// (count and report, never exit() deep inside).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace attncheck::cuda_impl {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CudaError(std::string(what) + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

// Devices this process can use; 0 when there is no GPU or no driver (never throws).
inline int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

}  // namespace attncheck::cuda_impl
