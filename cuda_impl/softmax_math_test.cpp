// The kernels' softmax arithmetic (softmax_math.hpp) run the way flash_forward (chunks of keys, online
// rescaling) and flash_decode (pieces of the keys, then a combining pass) run it, against a direct
// softmax in double: including rows whose first chunks are masked, empty pieces and a row that sees
// nothing (output 0, log-sum-exp -inf, never NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

// Keys [begin, end) in chunks of `chunk`, as a kernel's loop over key tiles does.
Partial online(const std::vector<float>& scores, const std::vector<float>& values, int begin, int end, int chunk) {
  Partial state;
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

// flash_decode's combining pass over pieces.
Partial combine(const std::vector<Partial>& pieces) {
  float maximum = kMasked;
  for (const Partial& piece : pieces) maximum = std::fmax(maximum, piece.max);
  Partial combined{maximum, 0.0f, 0.0f};
  for (const Partial& piece : pieces) {
    combined.sum += masked_exp(piece.max, maximum) * piece.sum;
    combined.output += masked_exp(piece.max, maximum) * piece.output;
  }
  return combined;
}

struct Direct {
  double output = 0.0, lse = -std::numeric_limits<double>::infinity();
};

Direct direct(const std::vector<float>& scores, const std::vector<float>& values) {
  double maximum = -std::numeric_limits<double>::infinity();
  for (const float score : scores) maximum = std::fmax(maximum, score);
  if (maximum == -std::numeric_limits<double>::infinity()) return {};
  double sum = 0.0, weighted = 0.0;
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
