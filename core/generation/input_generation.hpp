// Deterministic generation of Case inputs and weights (docs/ARCHITECTURE.md, "Exact inputs").
//
// Every generated value is a small integer times a power of two: |k| <= 255 (8 significant bits) times
// 2^e, with e well inside fp16's range, so bf16, fp16, fp32 and fp64 all hold it exactly and a
// low-precision implementation reads exactly the numbers the fp64 reference read.
//
// Values come from SplitMix64 streams keyed by (seed, tensor name, draw), not from <random>
// distributions, whose algorithms differ between standard libraries: the same seed gives the same
// case on every platform.
//
// Weights: projection entries have a standard deviation near 1/sqrt(fan_in); each head's block uses its
// own integer amplitude, so per-head scales differ (up to ~2.6x), and a block that happens to equal
// another head's block is redrawn, so no two heads share weights. q_norm/k_norm are 1 + small values
// (rms) or small values around 0 (rms-one-plus, which adds the 1 itself).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/model/case.hpp"

namespace attncheck {

enum class ActivationDistribution {
  uniform,       // x and dout entries uniform in [-1, 1] on a grid of 2^-6
  heavy_tailed,  // uniform times 2^j, j geometric (P(j) = 2^-(j+1)), j <= 6: occasional values near 64
  outliers,      // uniform, with about one hidden channel in 32 (at least one) scaled by 32, as in LLMs
};
std::string_view to_string(ActivationDistribution distribution);
std::optional<ActivationDistribution> parse_activation_distribution(std::string_view text);

struct InputOptions {
  std::uint64_t seed = 0;
  std::int64_t batch = 1;
  std::int64_t seq = 8;
  ActivationDistribution activations = ActivationDistribution::uniform;
  // Position id of each row's first token; positions then count up by one. Absent: row 0 starts at a
  // random offset in [0, 16), later rows at random large offsets in [2^16, 2^20).
  std::optional<std::int64_t> position_offset;
  // Positions then advance by 1 to 4 per token instead of 1 (tokens dropped, packed or tree drafts):
  // the only way a wrong choice of positions shows, RoPE being invariant to a uniform shift.
  bool position_gaps = false;
  bool pad_keys = false;  // random key_lengths in [1, seq] for rows >= 1 (row 0 keeps all seq keys)
  // Explicit key lengths, one per batch row, each in [0, seq] (0: every query of the row sees no key).
  // Empty: pad_keys decides. The long-sequence generators put them near tile edges.
  std::vector<std::int64_t> key_lengths;
  // Every query sees a key: key lengths, drawn or explicit, are raised to the fewest that leave none without
  // one (1, or seq - sliding_window + 1 under a window). How the fuzzer keeps to an implementation that does
  // not state keyless-rows (properties/generators.cpp); it holds for any seq, so shrinking keeps it.
  bool every_query_sees_a_key = false;
  DecodeSchedule decode;
  std::int64_t tp_size = 1;  // the plan stored in the case (sharded implementations run it)
  std::optional<CpSpec> context_parallel;  // the CP layout stored in the case (Case::context_parallel)
};

// Limits that keep impossible sizes InputErrors rather than allocation failures.
inline constexpr std::int64_t kMaxActivationElements = std::int64_t{1} << 28;  // per x / dout tensor
inline constexpr std::int64_t kMaxBatchOrSeq = std::int64_t{1} << 20;           // batch and seq each
inline constexpr std::int64_t kMaxParameterElements = std::int64_t{1} << 31;   // per layer

// x or dout ([batch, seq, hidden]) as generate_inputs makes them: stream (seed, name), one
// symmetric_integer(64) * 2^-6 per value, then the distribution's scaling (golden/SCHEMA.md, "Input
// generator v1", which golden files name instead of storing long inputs).
Tensor generate_activations(std::string_view name, const Shape& shape, ActivationDistribution distribution,
                            std::uint64_t seed);

// Whether a head's projection block that equals an earlier head's is redrawn (SCHEMA.md "Weight generator
// v1": always, in every generated case) or kept as first drawn. first_draws exists for `golden coverage`,
// whose "duplicate-block rule" feature asks what a reader that skips the redraw would compute.
enum class HeadBlocks { distinct, first_draws };

// Throws InputError when the layer has more than kMaxParameterElements parameters.
Parameters generate_weights(const Geometry& geometry, std::uint64_t seed, HeadBlocks head_blocks = HeadBlocks::distinct);
// Throws InputError for batch or seq outside [1, 2^20], more than kMaxActivationElements values in x,
// or positions that would leave [0, 2^31).
Inputs generate_inputs(const Geometry& geometry, const InputOptions& options);

// A complete, validated case. Throws InputError for an invalid tp_size, batch, seq or schedule.
Case generate_case(const Geometry& geometry, const InputOptions& options);

// True when v is k * 2^e with |k| <= 255 and 2^-24 <= |v| < 2^15 (or v == 0): exactly representable
// in bf16 and fp16. Tests use it to pin the generator's promise.
bool is_exact_in_half_precisions(double value);

}  // namespace attncheck
