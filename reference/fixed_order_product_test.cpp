// The emulated layer's products (reference/fixed_order_product.hpp) compute exactly the order they
// document, whatever the thread count, so that a yardstick stored in a golden is the one every machine
// recomputes (ctest golden.stored_yardsticks_current failed on another machine when Eigen's GEMM did them).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/generation/input_generation.hpp"
#include "core/generation/splitmix_stream.hpp"
#include "reference/emulated_layer.hpp"
#include "reference/fixed_order_product.hpp"

namespace attncheck::reference {
namespace {

using FloatMatrix = FixedOrderMatrix<float>;

FloatMatrix random_matrix(Eigen::Index rows, Eigen::Index columns, std::uint64_t seed) {
  SplitMixStream stream(seed, "fixed-order-product-test");
  FloatMatrix matrix(rows, columns);
  for (float& value : matrix.reshaped()) value = static_cast<float>(stream.symmetric_integer(1 << 20)) / float(1 << 20);
  return matrix;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && std::memcmp(a.data(), b.data(), a.values.size() * sizeof(double)) == 0;
}

// The documented order, one element at a time: partial sums over blocks of kFixedOrderBlock k values,
// each from 0 by std::fma in increasing k, added in increasing block order. Inner 600 = two full blocks
// and a partial one; 5 rows are a group of four and one more; 1030 columns a tile of 1024 and 6, a
// tail after any vector width.
TEST(FixedOrderProduct, IsTheDocumentedOrderBitForBit) {
  const Eigen::Index rows = 5, inner = 600, columns = 1030;
  const FloatMatrix lhs = random_matrix(rows, inner, 1), rhs = random_matrix(inner, columns, 2);
  const FloatMatrix product = fixed_order_product<float>(lhs, rhs);
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < columns; ++j) {
      float total = 0.0f;
      for (Eigen::Index block = 0; block < inner; block += kFixedOrderBlock) {
        float partial = 0.0f;
        for (Eigen::Index k = block; k < std::min(inner, block + kFixedOrderBlock); ++k) {
          partial = std::fma(lhs(i, k), rhs(k, j), partial);
        }
        total += partial;
      }
      ASSERT_EQ(std::bit_cast<std::uint32_t>(product(i, j)), std::bit_cast<std::uint32_t>(total))
          << "(" << i << ", " << j << ")";
    }
  }
  // Blocking is an order, not an approximation: the fp64 product agrees to float rounding.
  const Eigen::MatrixXd exact = lhs.cast<double>() * rhs.cast<double>();
  EXPECT_LT((product.cast<double>() - exact).cwiseAbs().maxCoeff(), 1e-4);
}

// Transposed operands (the layer's x @ w^T and d^T @ x) are evaluated first, then multiplied the same way.
TEST(FixedOrderProduct, TransposedOperandsAreEvaluatedFirst) {
  const FloatMatrix lhs = random_matrix(7, 300, 3), rhs = random_matrix(11, 300, 4);
  const FloatMatrix rhs_transposed = rhs.transpose();
  EXPECT_EQ(fixed_order_product<float>(lhs, rhs.transpose()), fixed_order_product<float>(lhs, rhs_transposed));
}

// A layer wide enough that its projections run in parallel (>= 2^22 multiply-adds) and span more than
// one block of k: one thread and two give the same bits. With Eigen's GEMM they did not (fp32 yardstick
// of golden qwen3-0.6b_tp1: 1.34e-6 on one thread, 0.90e-6 on two).
TEST(FixedOrderProduct, EmulatedLayerIsTheSameOnOneThreadAndTwo) {
  const Geometry geometry = resolve_geometry({.hidden_size = 1024, .num_heads = 8, .num_kv_heads = 2, .head_dim = 128});
  const Case test_case = generate_case(geometry, {.seed = 9, .batch = 2, .seq = 8, .position_offset = 0});
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(1);
  const Result one = run_emulated(test_case, Precision::fp32, {.jitter_seed = 3});
  omp_set_num_threads(2);
  const Result two = run_emulated(test_case, Precision::fp32, {.jitter_seed = 3});
  omp_set_num_threads(threads_before);
  EXPECT_TRUE(bitwise_equal(one.out, two.out));
  EXPECT_TRUE(bitwise_equal(one.gradients->x, two.gradients->x));
  EXPECT_TRUE(bitwise_equal(one.gradients->params.q_proj, two.gradients->params.q_proj));
  EXPECT_TRUE(bitwise_equal(one.gradients->params.o_proj, two.gradients->params.o_proj));
}

}  // namespace
}  // namespace attncheck::reference
