#include "cuda_impl/gemm.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace attncheck::cuda_impl {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(status));
  }
}

cudaDataType_t data_type(Precision type) {
  switch (type) {
    case Precision::fp32:
      return CUDA_R_32F;
    case Precision::bf16:
      return CUDA_R_16BF;
    case Precision::fp16:
      return CUDA_R_16F;
    case Precision::fp64:
      break;
  }
  throw std::invalid_argument("gemm: the CUDA implementation's GEMMs take fp32, bf16 or fp16, not fp64");
}

// The largest power of two (up to 256) dividing a pointer: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise, and may then pick a kernel that faults on an offset pointer
// (the decode path passes per-batch-row offsets).
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// Owns one cuBLASLt descriptor of each kind for the duration of a call.
struct Descriptors {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (operation) cublasLtMatmulDescDestroy(operation);
  }
};

}  // namespace

Gemm::Gemm() : workspace_(kWorkspaceBytes) {
  check_cublas(cublasLtCreate(&handle_), "create");
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

// cuBLASLt is column-major, and a row-major r x c matrix with leading dimension ld is, in memory, the
// column-major c x r matrix with the same ld. So row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B's storage with B's transpose flag,
// the second A's storage with A's flag, and the output is n x m.
void Gemm::run(cudaStream_t stream, Precision inputs, std::int64_t m, std::int64_t n, std::int64_t k, MatrixOperand a,
               MatrixOperand b, void* c, std::int64_t ldc, bool c_is_float, float alpha, float beta) {
  if (m <= 0 || n <= 0 || k <= 0) throw std::invalid_argument("gemm: m, n and k must be >= 1");
  const cudaDataType_t input_type = data_type(inputs);
  const cudaDataType_t output_type = c_is_float ? CUDA_R_32F : input_type;
  Descriptors d;
  check_cublas(cublasLtMatmulDescCreate(&d.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t op_x = b.transpose == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_y = a.transpose == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(d.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_x, sizeof(op_x)), "op x");
  check_cublas(cublasLtMatmulDescSetAttribute(d.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_y, sizeof(op_y)), "op y");
  // Stored shapes (before op), column-major: B's storage is n x k (no transpose) or k x n; A's is
  // k x m or m x k.
  const bool b_plain = b.transpose == Transpose::no, a_plain = a.transpose == Transpose::no;
  check_cublas(cublasLtMatrixLayoutCreate(&d.x, input_type, b_plain ? n : k, b_plain ? k : n, b.ld), "layout x");
  check_cublas(cublasLtMatrixLayoutCreate(&d.y, input_type, a_plain ? k : m, a_plain ? m : k, a.ld), "layout y");
  check_cublas(cublasLtMatrixLayoutCreate(&d.c, output_type, n, m, ldc), "layout c");
  check_cublas(cublasLtMatmulPreferenceCreate(&d.preference), "preference");
  const std::size_t workspace_bytes = workspace_.size();
  check_cublas(cublasLtMatmulPreferenceSetAttribute(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)),
               "workspace preference");
  // cuBLASLt's A is B's storage here and its B is A's (see above); C and D are the same buffer.
  const std::uint32_t alignments[] = {alignment_of(b.data), alignment_of(a.data), alignment_of(c)};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t alignment = alignments[i < 3 ? i : 2];
    check_cublas(
        cublasLtMatmulPreferenceSetAttribute(d.preference, alignment_attributes[i], &alignment, sizeof(alignment)),
        "alignment preference");
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_cublas(
      cublasLtMatmulAlgoGetHeuristic(handle_, d.operation, d.x, d.y, d.c, d.c, d.preference, 1, &heuristic, &found),
      "heuristic");
  if (found == 0)
    throw CudaError("cuBLASLt: no algorithm for this GEMM (" + std::to_string(m) + " x " + std::to_string(n) + " x " +
                    std::to_string(k) + ")");
  check_cublas(cublasLtMatmul(handle_, d.operation, &alpha, b.data, d.x, a.data, d.y, &beta, c, d.c, c, d.c,
                              &heuristic.algo, workspace_.data(), workspace_bytes, stream),
               "matmul");
}

}  // namespace attncheck::cuda_impl
