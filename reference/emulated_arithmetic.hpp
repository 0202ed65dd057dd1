// The arithmetic every emulated layer (emulated_layer.hpp) is built from: the storage rounding of each
// operation's result, the fixed-order matrix products, the directed rounding of the softmax chain, and
// loading and saving Tensors in the working type S (float for fp32/bf16/fp16, double for the fp64 run).
// The plain layer (emulated_layer.cpp) and the latent one (emulated_latent_layer.cpp) share it, so that
// both round the same operations the same way.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "core/generation/splitmix_stream.hpp"
#include "core/model/half_precision.hpp"
#include "core/model/precision.hpp"
#include "core/model/tensor.hpp"
#include "reference/emulated_layer.hpp"
#include "reference/fixed_order_product.hpp"

namespace attncheck::reference::emulation {

template <typename S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using Row = Eigen::Matrix<S, 1, Eigen::Dynamic>;
template <typename S>
using Column = Eigen::Matrix<S, Eigen::Dynamic, 1>;

// Rounding of every operation's result to the storage type (bf16 or fp16; nothing more for fp32 /
// fp64), and, for the jittered runs, a random nudge of one ulp on half of the results: a stand-in
// for the rounding any other correct implementation might do there (emulated_layer.hpp).
struct Storage {
  Precision precision = Precision::fp32;
  SplitMixStream* jitter = nullptr;  // null: round to nearest only

  float nearest(float value) const {
    if (precision == Precision::fp16) return round_to_half(value);
    if (precision == Precision::bf16) return round_to_bfloat16(value);
    return value;
  }

  // One ulp of the storage precision away from zero or towards it.
  float step(float value, bool away) const {
    if (precision == Precision::bf16) {
      const auto bits = std::bit_cast<std::uint32_t>(value);
      return std::bit_cast<float>(away ? bits + 0x10000u : bits - 0x10000u);
    }
    if (precision == Precision::fp16) {
      const std::uint16_t bits = half_bits(value);
      return from_half_bits(static_cast<std::uint16_t>(away ? bits + 1 : bits - 1));
    }
    const float infinity = std::numeric_limits<float>::infinity();
    return std::nextafter(value, (value > 0) == away ? infinity : -infinity);
  }

  float round(float value) const {
    value = nearest(value);
    if (jitter == nullptr || value == 0.0f || !std::isfinite(value) || !jitter->coin()) return value;
    return step(value, jitter->coin());
  }
  // The fp64 run rounds nothing; its jittered runs (the fp64 yardstick) nudge one double ulp half of the time.
  double round(double value) const { return nudge(value); }

  // A result an implementation keeps in float (never stored in half precision): only the jittered runs'
  // nudge, one float ulp half of the time.
  float nudge(float value) const {
    if (jitter == nullptr || value == 0.0f || !std::isfinite(value) || !jitter->coin()) return value;
    const float infinity = std::numeric_limits<float>::infinity();
    return std::nextafter(value, (value > 0) == jitter->coin() ? infinity : -infinity);
  }
  double nudge(double value) const {
    if (jitter == nullptr || value == 0.0 || !std::isfinite(value) || !jitter->coin()) return value;
    const double infinity = std::numeric_limits<double>::infinity();
    return std::nextafter(value, (value > 0) == jitter->coin() ? infinity : -infinity);
  }

  // Every value rounded, in reshaped()'s order: column by column (Eigen's default for reshaped(), whatever the
  // storage order), which is the order a jittered run's coins are drawn in and so part of its yardstick.
  template <typename S>
  Mat<S> operator()(Mat<S> matrix) const {
    if constexpr (std::is_same_v<S, float>) {
      if (jitter != nullptr) {
        jitter_floats(matrix);
        return matrix;
      }
    }
    if (precision == Precision::bf16 || precision == Precision::fp16 || jitter != nullptr) {
      for (S& value : matrix.reshaped()) value = round(value);
    }
    return matrix;
  }

  // Each of `count` values rounded in memory order, as `for (value : values) value = round(value)` does.
  template <typename S>
  void round_each(S* values, Eigen::Index count) const {
    if constexpr (std::is_same_v<S, float>) {
      if (jitter != nullptr) {
        JitteredFloat coins(*jitter, precision);
        for (Eigen::Index i = 0; i < count; ++i) values[i] = coins.round(values[i]);
        return;
      }
    }
    for (Eigen::Index i = 0; i < count; ++i) values[i] = round(values[i]);
  }

  // round() over a jittered run's float values, in the same order with the same draws. A finite nonzero
  // value's neighbour one storage ulp away from zero is its bits + 1 and towards zero its bits - 1, in the
  // storage type's own bits (sign and magnitude: a float's, a bf16's in a float's top half, a half's), which
  // is what step() gives, without std::nextafter's call, and the coins without a branch on them (they are
  // random: half of the branches were mispredicted). The draws come from blocks of the stream computed ahead
  // (SplitMixStream::peek: independent of one another, so computed side by side), each value taking one or
  // two of them: the chain from one value's coins to the next value's was the loop's cost. A third of an
  // fp32 yardstick's time went to the branchy round(), a third of `attncheck mutants`' (bf16, fp16) too. The
  // stream moves on by the draws taken when it goes.
  class JitteredFloat {
   public:
    JitteredFloat(SplitMixStream& stream, Precision precision) : stream_(stream), precision_(precision) {
      stream_.peek(draws_.data(), kDraws);
    }
    JitteredFloat(const JitteredFloat&) = delete;
    JitteredFloat& operator=(const JitteredFloat&) = delete;
    ~JitteredFloat() { stream_.skip(used_); }
    float round(float value) {
      if (precision_ == Precision::fp16) {
        const std::uint16_t bits = half_bits(value);
        const auto magnitude = static_cast<std::uint16_t>(bits & 0x7FFFu);
        if (magnitude == 0 || magnitude >= 0x7C00u) return from_half_bits(bits);  // zero, infinite or NaN: no coin
        return from_half_bits(static_cast<std::uint16_t>(bits + nudge()));  // unsigned: - 1 wraps to bits - 1
      }
      // bf16 moves by the float bit that is its last; fp32 (and fp64 kept in float) by the last float bit.
      const std::uint32_t ulp = precision_ == Precision::bf16 ? 0x10000u : 1u;
      if (precision_ == Precision::bf16) value = round_to_bfloat16(value);
      const auto bits = std::bit_cast<std::uint32_t>(value);
      const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
      if (magnitude == 0 || magnitude >= 0x7F800000u) return value;  // zero, infinite or NaN: kept, no coin drawn
      return std::bit_cast<float>(bits + nudge() * ulp);
    }

   private:
    // 0, +1 (away from zero) or -1 as an unsigned (wrapping): a first coin (the top bit of a draw); on heads a
    // second, away from zero or towards it.
    std::uint32_t nudge() {
      if (used_ + 2 > kDraws) {
        stream_.skip(used_);
        stream_.peek(draws_.data(), kDraws);
        used_ = 0;
      }
      const auto heads = static_cast<std::uint32_t>(draws_[used_] >> 63);
      const auto away = static_cast<std::uint32_t>(draws_[used_ + 1] >> 63);
      used_ += 1 + heads;
      return heads * (2 * away - 1);
    }

    static constexpr std::size_t kDraws = 1024;
    SplitMixStream& stream_;
    Precision precision_;
    std::array<std::uint64_t, kDraws> draws_;
    std::size_t used_ = 0;  // draws of this block taken
  };

  // The columns are visited in bands of kBand, each gathered into a column-major scratch first: walking a
  // [4096, 4096] row-major matrix down a column touched a page per value.
  void jitter_floats(Mat<float>& matrix) const {
    constexpr Eigen::Index kBand = 64;
    JitteredFloat coins(*jitter, precision);
    const Eigen::Index rows = matrix.rows(), cols = matrix.cols();
    float* values = matrix.data();  // row-major
    const std::unique_ptr<float[]> band(new float[static_cast<std::size_t>(rows * std::min(cols, kBand))]);
    for (Eigen::Index first = 0; first < cols; first += kBand) {
      const Eigen::Index width = std::min(kBand, cols - first);
      for (Eigen::Index row = 0; row < rows; ++row) {  // band[column * rows + row], column-major
        for (Eigen::Index column = 0; column < width; ++column) band[column * rows + row] = values[row * cols + first + column];
      }
      for (float* value = band.get(); value != band.get() + width * rows; ++value) *value = coins.round(*value);
      for (Eigen::Index row = 0; row < rows; ++row) {
        for (Eigen::Index column = 0; column < width; ++column) values[row * cols + first + column] = band[column * rows + row];
      }
    }
  }
};

// Every matrix product of a layer: the same operations on every machine (fixed_order_product.hpp), so
// that a yardstick stored in a golden is the one any machine recomputes.
template <typename Lhs, typename Rhs>
auto product(const Eigen::MatrixBase<Lhs>& lhs, const Eigen::MatrixBase<Rhs>& rhs) {
  return fixed_order_product<typename Lhs::Scalar>(lhs, rhs);
}

// A tensor as a [rows, numel / rows] matrix of S.
template <typename S>
Mat<S> load(const Tensor& tensor, std::int64_t rows) {
  const Eigen::Map<const Mat<double>> map(tensor.data(), rows, tensor.numel() / rows);
  return map.template cast<S>();
}

template <typename S>
Tensor save(const Mat<S>& matrix, Shape shape) {
  Tensor tensor(std::move(shape));
  Eigen::Map<Mat<double>>(tensor.data(), matrix.rows(), matrix.cols()) = matrix.template cast<double>();
  return tensor;
}

template <typename S>
Tensor save_row(const Row<S>& row) {
  Tensor tensor({row.size()});
  for (Eigen::Index i = 0; i < row.size(); ++i) tensor.values[i] = static_cast<double>(row[i]);
  return tensor;
}

// x @ weight^T (+ bias), each product accumulated in S, the result stored.
template <typename S>
Mat<S> linear(const Storage& store, const Mat<S>& x, const Tensor& weight, const Tensor* bias = nullptr) {
  Mat<S> out = product(x, load<S>(weight, weight.shape[0]).transpose());
  if (bias) out.rowwise() += load<S>(*bias, 1).row(0);
  return store(std::move(out));
}

// Rounds this thread's float operations in a direction while it lives (fp32 runs only; emulated_layer.hpp
// says why only the softmax chain). No OpenMP region runs inside one: the mode is per thread.
class RoundingScope {
 public:
  RoundingScope(Rounding rounding, Precision precision) : mode_(std::fegetround()) {
    if (rounding == Rounding::nearest || precision != Precision::fp32) return;
    const int mode = rounding == Rounding::upward     ? FE_UPWARD
                     : rounding == Rounding::downward ? FE_DOWNWARD
                                                      : FE_TOWARDZERO;
    if (std::fesetround(mode) != 0) throw std::runtime_error("emulated layer: the rounding mode cannot be set");
  }
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;
  ~RoundingScope() { std::fesetround(mode_); }

 private:
  int mode_;
};

}  // namespace attncheck::reference::emulation
