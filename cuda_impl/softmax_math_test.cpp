// The kernels' softmax arithmetic (softmax_math.hpp) run the way flash_forward (chunks of keys, online
// rescaling) and flash_decode (pieces of the keys, then a combining pass) run it, against a direct
// softmax in double: including rows whose first chunks are masked, empty pieces and a row that sees
// nothing (output 0, log-sum-exp -inf, never NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "cuda_impl/softmax_math.hpp"
#include "cuda_impl/tile_schedule.hpp"

namespace attncheck::cuda_impl {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

struct Partial {
  float max = kMasked;
  float sum = 0.0f;
  float output = 0.0f;  // one value column is enough to check the weighting
};

// Keys [begin, end) in chunks of `chunk`, as a kernel's loop over key tiles does, starting from `start`
// (flash_forward's row_start: nothing seen, or the sink).
Partial online(const std::vector<float>& scores, const std::vector<float>& values, int begin, int end, int chunk,
               RowStart start = {kMasked, 0.0f}) {
  Partial state{start.max, start.sum, 0.0f};
  for (int first = begin; first < end; first += chunk) {
    const int last = std::min(first + chunk, end);
    float tile_max = kMasked;
    for (int key = first; key < last; ++key) tile_max = std::fmax(tile_max, scores[key]);
    const float new_max = std::fmax(state.max, tile_max);
    const float factor = rescale_factor(state.max, new_max);
    float tile_sum = 0.0f, tile_output = 0.0f;
    for (int key = first; key < last; ++key) {
      const float probability = masked_exp(scores[key], new_max);
      tile_sum += probability;
      tile_output += probability * values[key];
    }
    state = {new_max, state.sum * factor + tile_sum, state.output * factor + tile_output};
  }
  return state;
}

// flash_decode's combining pass over pieces, the sink (if any) joining once as one more piece.
Partial combine(const std::vector<Partial>& pieces, RowStart start = {kMasked, 0.0f}) {
  float maximum = start.max;
  for (const Partial& piece : pieces) maximum = std::fmax(maximum, piece.max);
  Partial combined{maximum, masked_exp(start.max, maximum) * start.sum, 0.0f};
  for (const Partial& piece : pieces) {
    combined.sum += masked_exp(piece.max, maximum) * piece.sum;
    combined.output += masked_exp(piece.max, maximum) * piece.output;
  }
  return combined;
}

struct Direct {
  double output = 0.0, lse = -std::numeric_limits<double>::infinity();
};

// The softmax written out in double; a sink adds exp(sink - max) to the denominator only.
Direct direct(const std::vector<float>& scores, const std::vector<float>& values,
              std::optional<double> sink = std::nullopt) {
  double maximum = sink.value_or(-std::numeric_limits<double>::infinity());
  for (const float score : scores) maximum = std::fmax(maximum, score);
  if (maximum == -std::numeric_limits<double>::infinity()) return {};
  double sum = sink ? std::exp(*sink - maximum) : 0.0, weighted = 0.0;
  for (std::size_t key = 0; key < scores.size(); ++key) {
    const double probability = std::exp(double(scores[key]) - maximum);
    sum += probability;
    weighted += probability * values[key];
  }
  return {weighted / sum, maximum + std::log(sum)};
}

// Scores with a masked prefix, a masked suffix and holes, large enough to need the running max.
std::vector<float> row_of_scores(int keys, int masked_prefix, int masked_suffix, unsigned seed) {
  std::vector<float> scores(keys);
  for (int key = 0; key < keys; ++key) {
    seed = seed * 1664525u + 1013904223u;
    scores[key] = float(seed >> 8) / float(1 << 24) * 60.0f - 20.0f;
    if (key < masked_prefix || key >= keys - masked_suffix || (seed >> 4) % 7 == 0) scores[key] = kMasked;
  }
  return scores;
}

TEST(SoftmaxMath, OnlineChunksAndCombinedPiecesEqualTheDirectSoftmax) {
  int rows = 0;
  for (const int keys : {1, 5, 37, 200}) {
    for (const int masked_prefix : {0, 3, 40}) {
      for (unsigned seed = 1; seed <= 5; ++seed) {
        const std::vector<float> scores = row_of_scores(keys, std::min(masked_prefix, keys), keys / 5, seed);
        std::vector<float> values(keys);
        for (int key = 0; key < keys; ++key) values[key] = float((key * 13 + 5) % 17) / 8.0f - 1.0f;
        const Direct expected = direct(scores, values);
        for (const int chunk : {1, 4, 32}) {
          const Partial whole = online(scores, values, 0, keys, chunk);
          const int splits = decode_splits(1, keys, chunk, 7);
          std::vector<Partial> pieces;
          for (int split = 0; split < splits; ++split) {
            const KeyRange piece = split_keys({0, keys}, splits, split, chunk);
            pieces.push_back(online(scores, values, piece.begin, piece.end, chunk));
          }
          for (const Partial& result : {whole, combine(pieces)}) {
            const float lse = log_sum_exp(result.max, result.sum);
            if (expected.lse == -std::numeric_limits<double>::infinity()) {  // the row sees no key
              EXPECT_EQ(result.sum, 0.0f);
              EXPECT_EQ(lse, kMasked);
              EXPECT_EQ(result.output, 0.0f);
              continue;
            }
            ASSERT_GT(result.sum, 0.0f);
            EXPECT_NEAR(result.output / result.sum, expected.output, 1e-5) << "keys " << keys << " chunk " << chunk;
            EXPECT_NEAR(lse, expected.lse, 1e-5 * std::fabs(expected.lse) + 1e-6);
          }
          ++rows;
        }
      }
    }
  }
  EXPECT_GT(rows, 100);
}

// With a sink, in flash_forward's chunks and flash_decode's pieces: the denominator gains exp(s - max)
// once (not once per piece), the output none; a row that sees no key sees its sink (output 0, lse s).
TEST(SoftmaxMath, SinkJoinsTheDenominatorOnceInChunksAndPieces) {
  int rows = 0;
  for (const float sink : {-30.0f, -1.5f, 0.0f, 2.25f, 45.0f}) {  // far below, among and above the scores
    const float sinks[] = {7.0f, sink};
    const RowStart start = row_start(sinks, 1);
    ASSERT_EQ(start.max, sink);
    ASSERT_EQ(start.sum, 1.0f);
    for (const int keys : {1, 37, 200}) {
      for (const int masked_prefix : {0, 40}) {
        for (unsigned seed = 1; seed <= 4; ++seed) {
          const std::vector<float> scores = row_of_scores(keys, std::min(masked_prefix, keys), keys / 5, seed);
          std::vector<float> values(keys);
          for (int key = 0; key < keys; ++key) values[key] = float((key * 7 + 3) % 11) / 4.0f - 1.0f;
          const Direct expected = direct(scores, values, sink);
          const Direct without = direct(scores, values);
          for (const int chunk : {1, 32}) {
            const Partial whole = online(scores, values, 0, keys, chunk, start);
            const int splits = decode_splits(1, keys, chunk, 7);
            std::vector<Partial> pieces;
            for (int split = 0; split < splits; ++split) {
              const KeyRange piece = split_keys({0, keys}, splits, split, chunk);
              pieces.push_back(online(scores, values, piece.begin, piece.end, chunk));
            }
            for (const Partial& result : {whole, combine(pieces, start)}) {
              ASSERT_GT(result.sum, 0.0f);  // the sink is always seen
              const double lse = log_sum_exp(result.max, result.sum);
              EXPECT_NEAR(result.output / result.sum, expected.output, 1e-5) << "sink " << sink << " keys " << keys;
              EXPECT_NEAR(lse, expected.lse, 1e-5 * std::fabs(expected.lse) + 1e-6);
              // It bites: the lse moved by log(1 + exp(s - lse_without)).
              if (without.lse != -std::numeric_limits<double>::infinity() && sink > without.lse - 5.0) {
                EXPECT_GT(lse, without.lse + 1e-3);
              }
            }
            ++rows;
          }
        }
      }
    }
  }
  EXPECT_GT(rows, 100);
  // No key at all: the row's probability mass is all on the sink.
  const float sinks[] = {1.25f};
  const Partial empty = online({kMasked, kMasked}, {1.0f, 2.0f}, 0, 2, 1, row_start(sinks, 0));
  EXPECT_EQ(empty.output, 0.0f);
  EXPECT_EQ(log_sum_exp(empty.max, empty.sum), 1.25f);
  EXPECT_EQ(row_start(nullptr, 0).max, kMasked);
  EXPECT_EQ(row_start(nullptr, 0).sum, 0.0f);
}

// The sink's gradient from the backward's per-row quantities (lse, D = rowsum(dO * O)) against central
// finite differences of L = sum_i dO_i . O_i(s) over several rows, in double.
TEST(SoftmaxMath, SinkGradientTermMatchesFiniteDifferences) {
  const std::vector<std::vector<float>> rows_of_scores = {
      {0.5f, -1.0f, 2.0f}, {kMasked, 0.25f, 1.5f, -0.5f}, {kMasked, kMasked}, {3.0f}};
  const std::vector<std::vector<float>> rows_of_values = {
      {1.0f, -2.0f, 0.5f}, {9.0f, 0.75f, -1.25f, 2.0f}, {1.0f, 1.0f}, {-0.5f}};
  const std::vector<double> d_out = {0.75, -1.5, 2.0, 1.25};
  for (const double sink : {-2.0, 0.3, 1.7}) {
    const auto loss = [&](double s) {
      double total = 0.0;
      for (std::size_t i = 0; i < rows_of_scores.size(); ++i) {
        total += d_out[i] * direct(rows_of_scores[i], rows_of_values[i], s).output;
      }
      return total;
    };
    const double step = 1e-5;
    const double numeric = (loss(sink + step) - loss(sink - step)) / (2 * step);
    double analytic = 0.0;
    for (std::size_t i = 0; i < rows_of_scores.size(); ++i) {
      const Direct row = direct(rows_of_scores[i], rows_of_values[i], sink);
      const float d_row = float(d_out[i] * row.output);  // D for a one-column value
      analytic += sink_gradient_term(float(sink), float(row.lse), d_row);
    }
    EXPECT_NEAR(analytic, numeric, 1e-5 * (1.0 + std::fabs(numeric))) << "sink " << sink;
    EXPECT_GT(std::fabs(numeric), 1e-3);  // a gradient that is there to be missed
  }
  EXPECT_EQ(sink_gradient_term(1.0f, kMasked, 5.0f), 0.0f);  // a row that saw nothing (no sink either)
}

TEST(SoftmaxMath, ConventionsForMaskedScoresAndEmptyRows) {
  EXPECT_EQ(masked_exp(kMasked, 3.0f), 0.0f);
  EXPECT_EQ(masked_exp(kMasked, kMasked), 0.0f);   // an empty piece weighs nothing, and is no NaN
  EXPECT_EQ(rescale_factor(kMasked, 2.0f), 0.0f);  // nothing seen before: old accumulators are zero
  EXPECT_EQ(rescale_factor(kMasked, kMasked), 1.0f);
  EXPECT_FLOAT_EQ(rescale_factor(1.0f, 2.0f), std::exp(-1.0f));
  EXPECT_EQ(log_sum_exp(kMasked, 0.0f), kMasked);
  EXPECT_FLOAT_EQ(log_sum_exp(2.0f, 1.0f), 2.0f);
}

}  // namespace
}  // namespace attncheck::cuda_impl
