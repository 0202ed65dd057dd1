#include "core/compare/sketch.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/generation/splitmix_stream.hpp"

namespace attncheck {

namespace {

std::string_view base_name(std::string_view name) {
  const std::size_t grads = name.rfind("grads/");
  return grads == std::string_view::npos ? name : name.substr(grads);
}

bool along_columns(std::string_view name) {
  return base_name(name) == "grads/o_proj";
}

// out, grads/x and decode/out: [batch, tokens, hidden], sketched along hidden per token.
bool is_activation(std::string_view name) {
  return name == "out" || name == "grads/x" || name == "decode/out";
}

}  // namespace

bool sketchable(std::string_view name) {
  const std::string_view base = base_name(name);
  return base == "grads/q_proj" || base == "grads/k_proj" || base == "grads/v_proj" || base == "grads/o_proj";
}

bool sketchable_activation(std::string_view name) {
  return is_activation(name);
}

Shape sketch_shape(std::string_view name, const Shape& gradient_shape) {
  if (is_activation(name)) {
    if (gradient_shape.size() != 3) throw std::logic_error("sketch_shape: an activation is [batch, tokens, hidden]");
    return {gradient_shape[0], gradient_shape[1], 1 + kSketchProjections};
  }
  if (!sketchable(name) || gradient_shape.size() != 2) throw std::logic_error("sketch_shape: not a projection");
  return {along_columns(name) ? gradient_shape[1] : gradient_shape[0], 1 + kSketchProjections};
}

namespace {

// The sums of one block of lines, each in the order j = 0 .. length-1 (golden/SCHEMA.md fixes the order, so a
// sketch is the same number for number on every machine). A square is accumulated with one fused multiply-add,
// std::fma(v, v, sum), as the compiler's contraction always gave; the product with a sign of +-1 is exact, so
// fused or not makes no difference there. Layout: squares[i], projections[p * count + i] for line i of the block.
struct BlockSums {
  explicit BlockSums(std::int64_t count)
      : squares(static_cast<std::size_t>(count), 0.0),
        projections(static_cast<std::size_t>(count * kSketchProjections), 0.0) {}
  std::vector<double> squares;
  std::vector<double> projections;
};

// Lines that are columns (o_proj): row j of the matrix holds entry j of every line of the block, contiguous, so
// the rows are walked in order and the block's lines advance together (vectorised across lines).
void sum_column_lines(const double* matrix, std::int64_t row_stride, std::int64_t first, std::int64_t count,
                      std::int64_t length, const double* signs, BlockSums& sums) {
  double* __restrict squares = sums.squares.data();
  double* __restrict first_projection = sums.projections.data();
  double* __restrict second_projection = first_projection + count;
  double* __restrict third_projection = second_projection + count;
  static_assert(kSketchProjections == 3);
  for (std::int64_t j = 0; j < length; ++j) {
    const double* __restrict row = matrix + j * row_stride + first;
    const double sign0 = signs[j * kSketchProjections], sign1 = signs[j * kSketchProjections + 1],
                 sign2 = signs[j * kSketchProjections + 2];
    // Each i is its own line: vectorised across lines. GCC's -O2 cost model leaves it scalar unless told; clang
    // needs no pragma at -O2 and fails one it cannot honour at -O1 (the fuzzing build; -Wpass-failed).
#if !defined(__clang__)
#pragma omp simd
#endif
    for (std::int64_t i = 0; i < count; ++i) {
      const double value = row[i];
      squares[i] = std::fma(value, value, squares[i]);
      first_projection[i] += value * sign0;
      second_projection[i] += value * sign1;
      third_projection[i] += value * sign2;
    }
  }
}

// Lines that are rows (q/k/v_proj, activations): each line is contiguous. Lanes lines at a time keep their sums
// in registers, Lanes x 4 independent chains of additions instead of four.
template <std::int64_t Lanes>
void sum_row_group(const double* matrix, std::int64_t first, std::int64_t i, std::int64_t count, std::int64_t length,
                   const double* signs, BlockSums& sums) {
  const double* line = matrix + (first + i) * length;
  double square[Lanes] = {}, projection[kSketchProjections][Lanes] = {};
  for (std::int64_t j = 0; j < length; ++j) {
    const double* sign = signs + j * kSketchProjections;
    for (std::int64_t lane = 0; lane < Lanes; ++lane) {
      const double value = line[lane * length + j];
      square[lane] = std::fma(value, value, square[lane]);
      for (std::int64_t p = 0; p < kSketchProjections; ++p) projection[p][lane] += value * sign[p];
    }
  }
  for (std::int64_t lane = 0; lane < Lanes; ++lane) {
    sums.squares[i + lane] = square[lane];
    for (std::int64_t p = 0; p < kSketchProjections; ++p) sums.projections[p * count + i + lane] = projection[p][lane];
  }
}

void sum_row_lines(const double* matrix, std::int64_t first, std::int64_t count, std::int64_t length,
                   const double* signs, BlockSums& sums) {
  constexpr std::int64_t kLanes = 4;
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) sum_row_group<kLanes>(matrix, first, i, count, length, signs, sums);
  for (; i < count; ++i) sum_row_group<1>(matrix, first, i, count, length, signs, sums);
}

}  // namespace

Tensor sketch(std::string_view name, const Tensor& gradient) {
  const Shape shape = sketch_shape(name, gradient.shape);
  const bool columns = along_columns(name);
  // An activation's lines are its tokens (batch * tokens of them), each of length hidden.
  const std::int64_t lines = is_activation(name) ? shape[0] * shape[1] : shape[0];
  const std::int64_t length = columns ? gradient.shape[0] : gradient.shape.back();
  // signs[j * kSketchProjections + p]: the sign of entry j of projection vector p.
  std::vector<double> signs(static_cast<std::size_t>(length * kSketchProjections));
  SplitMixStream stream(0, "attncheck-sketch-v1");
  for (double& sign : signs) sign = stream.coin() ? -1.0 : 1.0;
  Tensor result(shape);
  // Blocks of lines run on OpenMP threads when the gradient is large; within a block each line sums over
  // j = 0 .. length-1 in order, whichever loop is outermost (o_proj's lines are columns: walking one column at a
  // time would stride through the whole matrix, a cache miss per element, so its rows are walked in order).
  constexpr std::int64_t kBlock = 256;
  const std::int64_t blocks = (lines + kBlock - 1) / kBlock;
  const bool parallel = lines * length >= (std::int64_t{1} << 20);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t first = block * kBlock, count = std::min(kBlock, lines - first);
    BlockSums sums(count);
    if (columns) {
      sum_column_lines(gradient.values.data(), gradient.shape[1], first, count, length, signs.data(), sums);
    } else {
      sum_row_lines(gradient.values.data(), first, count, length, signs.data(), sums);
    }
    for (std::int64_t i = 0; i < count; ++i) {
      double* out = result.values.data() + (first + i) * (1 + kSketchProjections);
      out[0] = std::sqrt(sums.squares[i]);
      for (std::int64_t p = 0; p < kSketchProjections; ++p) out[1 + p] = sums.projections[p * count + i];
    }
  }
  return result;
}

}  // namespace attncheck
