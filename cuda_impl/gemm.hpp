// Row-major GEMMs through cuBLASLt: C (m x n) = alpha op(A) op(B) + beta C, fp32 accumulation
// (CUBLAS_COMPUTE_32F: fp32 inputs stay fp32, never TF32). A and B share one element type; C may be that
// type or float (the layer accumulates rank partials and weight gradients in float).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_impl/attention_params.hpp"
#include "cuda_impl/device_buffer.hpp"

namespace attncheck::cuda_impl {

enum class Transpose { no, yes };

struct MatrixOperand {
  const void* data = nullptr;
  std::int64_t ld = 0;  // row-major leading dimension (elements between rows)
  Transpose transpose = Transpose::no;
};

class Gemm {
 public:
  Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // A and B of `inputs` type; C of `inputs` type or fp32 (c_is_float). op(A): m x k, op(B): k x n.
  void run(cudaStream_t stream, Precision inputs, std::int64_t m, std::int64_t n, std::int64_t k, MatrixOperand a,
           MatrixOperand b, void* c, std::int64_t ldc, bool c_is_float, float alpha = 1.0f, float beta = 0.0f);

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<unsigned char> workspace_;
};

}  // namespace attncheck::cuda_impl
