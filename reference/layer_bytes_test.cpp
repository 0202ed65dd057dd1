// reference::layer_bytes, the yardstick of `attncheck run --junit`'s memory report (PairMemory), counted by
// hand for Qwen3-0.6B: what it names (weights, gradients, activations, two [seq, seq] matrices per head) and
// nothing more, so that a change to the count is a decision, not a drift.
#include <gtest/gtest.h>

#include "core/config/presets.hpp"
#include "reference/memory_estimate.hpp"

namespace attncheck::reference {
namespace {

TEST(LayerBytes, Qwen3SmallLayerCountedByHand) {
  const Geometry geometry = resolve_geometry(find_preset("qwen3-0.6b")->spec);
  // hidden 1024, 16 query heads and 8 KV heads of 128: q_proj and o_proj 1024 x 2048, k_proj and v_proj
  // 1024 x 1024, q_norm and k_norm 128 each.
  const std::uint64_t parameters = 2 * 1024 * 2048 + 2 * 1024 * 1024 + 2 * 128;
  // Per token: x, dout, out, dx (4 x 1024); q (2048), k and v (2 x 1024), the context (2048).
  const std::uint64_t per_token = 4 * 1024 + 2048 + 2 * 1024 + 2048;
  const std::uint64_t batch = 2, seq = 8;
  const std::uint64_t attention = 2 * batch * 16 * seq * seq;  // scores and probabilities
  EXPECT_EQ(layer_bytes(geometry, {.batch = 2, .seq = 8}),
            8 * (2 * parameters + batch * seq * per_token + attention));
}

TEST(LayerBytes, GrowsWithTheSquareOfTheSequence) {
  const Geometry geometry = resolve_geometry(find_preset("qwen3-0.6b")->spec);
  const std::uint64_t short_layer = layer_bytes(geometry, {.batch = 1, .seq = 1024});
  const std::uint64_t long_layer = layer_bytes(geometry, {.batch = 1, .seq = 2048});
  // Doubling seq adds the tokens' activations once more and the [seq, seq] matrices three times more.
  const std::uint64_t tokens_part = 8 * 1024 * (4 * 1024 + 2048 + 2 * 1024 + 2048);
  const std::uint64_t square_part = 8 * 2 * 16 * 1024 * 1024;
  EXPECT_EQ(long_layer - short_layer, tokens_part + 3 * square_part);
}

}  // namespace
}  // namespace attncheck::reference
