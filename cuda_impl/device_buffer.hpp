// Owning device memory (RAII), so an exception thrown between allocation and release leaks nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "cuda_impl/cuda_check.hpp"

namespace attncheck::cuda_impl {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }

  void upload(const std::vector<T>& host) {
    if (host.size() > count_) throw CudaError("upload: more values than the buffer holds");
    if (!host.empty()) {
      check_cuda(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
    }
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0) check_cuda(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return host;
  }
  void zero() {
    if (count_ > 0) check_cuda(cudaMemset(data_, 0, count_ * sizeof(T)), "cudaMemset");
  }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace attncheck::cuda_impl
