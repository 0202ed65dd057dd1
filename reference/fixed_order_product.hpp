// A matrix product whose every output is computed by the same operations on every machine, for the
// emulated layer (emulated_layer.cpp), whose float results are stored in goldens as yardsticks and must
// be what anyone recomputes.
//
// Eigen's GEMM is not that: it splits the inner dimension into blocks sized from the CPU's caches and
// the rows among OpenMP threads, and each split rounds differently. Measured: golden qwen3-0.6b_tp1's
// fp32 yardstick for decode/out was 1.34e-6 with OMP_NUM_THREADS=1 and 0.90e-6 with 2 (float64 angles),
// so a stored yardstick "DIFFERED" from the recomputation on another machine. Here the order is fixed:
// out(i, j) is the sum, in increasing order, of partial sums over blocks of kFixedOrderBlock consecutive
// k, each partial accumulated from 0 by one fused multiply-add per k in increasing order: a GEMM's
// blocking, with the block chosen here instead of from the caches. (Without blocks, one running sum over
// all k, that yardstick came out 4x larger at hidden 1024-2560, a looser check than the GEMMs real
// implementations use.) Rows are independent, so splitting them among threads changes nothing, and
// std::fma in every lane leaves nothing to the compiler's contraction or to where a vectorised loop starts.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/parallel.hpp"

namespace attncheck::reference {

// The inner dimension's block (k values per partial sum): a common GEMM kc for float.
inline constexpr Eigen::Index kFixedOrderBlock = 256;

template <typename S>
using FixedOrderMatrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// lhs [m, k] times rhs [k, n] -> [m, n], row-major. Both are first evaluated into row-major copies, so
// the inner loop runs over a contiguous row of rhs. For speed (the order is unchanged), four output rows
// share each load of rhs and columns go in tiles whose partial sums stay in the L1 cache.
template <typename S, typename Lhs, typename Rhs>
FixedOrderMatrix<S> fixed_order_product(const Eigen::MatrixBase<Lhs>& lhs, const Eigen::MatrixBase<Rhs>& rhs) {
  constexpr Eigen::Index kRowGroup = 4, kColumnTile = 1024;
  const FixedOrderMatrix<S> a = lhs;
  const FixedOrderMatrix<S> b = rhs;
  const Eigen::Index rows = a.rows(), inner = a.cols(), columns = b.cols();
  FixedOrderMatrix<S> out = FixedOrderMatrix<S>::Zero(rows, columns);
  const Eigen::Index groups = (rows + kRowGroup - 1) / kRowGroup;
  const bool parallel = worth_parallel(groups, kRowGroup * static_cast<std::int64_t>(inner) * columns);
#pragma omp parallel for schedule(static) if (parallel)
  for (Eigen::Index group = 0; group < groups; ++group) {
    const Eigen::Index first_row = group * kRowGroup;
    const Eigen::Index group_rows = std::min(kRowGroup, rows - first_row);
    // partial [kRowGroup, kColumnTile]: one k block's sums for the group's rows over one column tile
    std::vector<S> partial(static_cast<std::size_t>(kRowGroup * kColumnTile));
    for (Eigen::Index first_column = 0; first_column < columns; first_column += kColumnTile) {
      const Eigen::Index width = std::min(kColumnTile, columns - first_column);
      for (Eigen::Index block = 0; block < inner; block += kFixedOrderBlock) {
        std::fill(partial.begin(), partial.end(), S(0));
        const Eigen::Index block_end = std::min<Eigen::Index>(inner, block + kFixedOrderBlock);
        for (Eigen::Index k = block; k < block_end; ++k) {
          const S* __restrict rhs_row = b.row(k).data() + first_column;
          if (group_rows == kRowGroup) {
            const S f0 = a(first_row, k), f1 = a(first_row + 1, k), f2 = a(first_row + 2, k), f3 = a(first_row + 3, k);
            S* __restrict p0 = partial.data();
            S* __restrict p1 = p0 + kColumnTile;
            S* __restrict p2 = p1 + kColumnTile;
            S* __restrict p3 = p2 + kColumnTile;
#pragma omp simd
            for (Eigen::Index j = 0; j < width; ++j) {
              const S value = rhs_row[j];
              p0[j] = std::fma(f0, value, p0[j]);
              p1[j] = std::fma(f1, value, p1[j]);
              p2[j] = std::fma(f2, value, p2[j]);
              p3[j] = std::fma(f3, value, p3[j]);
            }
          } else {
            for (Eigen::Index r = 0; r < group_rows; ++r) {
              const S factor = a(first_row + r, k);
              S* __restrict sums = partial.data() + r * kColumnTile;
#pragma omp simd
              for (Eigen::Index j = 0; j < width; ++j) sums[j] = std::fma(factor, rhs_row[j], sums[j]);
            }
          }
        }
        for (Eigen::Index r = 0; r < group_rows; ++r) {
          S* __restrict out_row = out.row(first_row + r).data() + first_column;
          const S* __restrict sums = partial.data() + r * kColumnTile;
#pragma omp simd
          for (Eigen::Index j = 0; j < width; ++j) out_row[j] += sums[j];
        }
      }
    }
  }
  return out;
}

}  // namespace attncheck::reference
