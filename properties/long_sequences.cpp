#include "properties/long_sequences.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "properties/shrinking_choice.hpp"
#include "properties/size_scaling.hpp"

namespace attncheck::properties::long_sequences {

namespace gen = rc::gen;
using rc::Gen;

namespace {

constexpr std::int64_t kTiles[] = {64, 128};  // the key tiles kernels use
constexpr std::int64_t kEdgeReach = 2;        // lengths up to this far either side of a tile edge

// The primes in [low, high] (a sieve up to high, which is at most a few thousand).
std::vector<std::int64_t> primes_between(std::int64_t low, std::int64_t high) {
  std::vector<bool> composite(static_cast<std::size_t>(high + 1), false);
  std::vector<std::int64_t> primes;
  for (std::int64_t n = 2; n <= high; ++n) {
    if (composite[n]) continue;
    if (n >= low) primes.push_back(n);
    for (std::int64_t multiple = n * n; multiple <= high; multiple += n) composite[multiple] = true;
  }
  return primes;
}

// Next to a multiple of a tile: tile * k + delta, |delta| <= kEdgeReach, within [low, high].
Gen<std::int64_t> tile_edges(std::int64_t low, std::int64_t high) {
  return gen::mapcat(element_of(std::vector<std::int64_t>(std::begin(kTiles), std::end(kTiles))),
                     [low, high](std::int64_t tile) {
                       const std::int64_t max_multiple = std::max<std::int64_t>(1, (high + kEdgeReach) / tile);
                       return gen::map(gen::tuple(gen::inRange<std::int64_t>(1, max_multiple + 1),
                                                  gen::inRange<std::int64_t>(-kEdgeReach, kEdgeReach + 1)),
                                       [tile, low, high](const std::tuple<std::int64_t, std::int64_t>& t) {
                                         return std::clamp(tile * std::get<0>(t) + std::get<1>(t), low, high);
                                       });
                     });
}

// A length drawn by `distribution` whose shrinks are the integers from low up to it (RapidCheck's integer
// shrinking: low first, then halving the distance), however it was drawn: the greedy shrinker then
// finds the smallest length that still fails, on the tile grid or off it (a draw of 128 + 2 must be able
// to shrink to 65 when the bug needs one key past the first tile).
Gen<std::int64_t> shrinking_to(std::int64_t low, Gen<std::int64_t> distribution) {
  return Gen<std::int64_t>([low, distribution](const rc::Random& random, int size) {
    return rc::shrinkable::shrinkRecur(distribution(random, size).value(),
                                       [low](std::int64_t length) { return rc::shrink::towards(length, low); });
  });
}

// A long prefill, then calls of 1 .. 16 tokens (at most 12 of them) while tokens remain: every token of
// the row is decoded, the last ones through a cache filled in many pieces.
DecodeSchedule schedule_from(std::int64_t seq, const std::vector<std::int64_t>& step_codes) {
  DecodeSchedule schedule;
  std::int64_t decoded = 0;
  for (const std::int64_t code : step_codes) {
    if (schedule.steps.size() == 12 || decoded + 1 > seq - 1) break;
    const std::int64_t step = std::min<std::int64_t>(1 + code % 16, seq - 1 - decoded);
    schedule.steps.push_back(step);
    decoded += step;
  }
  if (schedule.steps.empty()) {  // no codes: one step of one token
    schedule.steps.push_back(1);
    decoded = 1;
  }
  schedule.prefill = seq - decoded;
  return schedule;
}

// Key lengths of every row: near tile edges, anywhere, or 0 (no key at all).
Gen<std::vector<std::int64_t>> padded_key_lengths(std::int64_t batch, std::int64_t seq) {
  const Gen<std::int64_t> length =
      weighted_one_of<std::int64_t>({{4, lengths(1, seq)}, {1, gen::just(std::int64_t{0})}});
  return gen::container<std::vector<std::int64_t>>(static_cast<std::size_t>(batch), length);
}

}  // namespace

Gen<std::int64_t> lengths(std::int64_t low, std::int64_t high) {
  if (high <= low) return gen::just(low);
  static const std::vector<std::int64_t> all_primes = primes_between(2, 1 << 13);
  std::vector<std::int64_t> primes;
  std::copy_if(all_primes.begin(), all_primes.end(), std::back_inserter(primes),
               [low, high](std::int64_t p) { return p >= low && p <= high; });
  const Gen<std::int64_t> uniform = gen::inRange<std::int64_t>(low, high + 1);
  const Gen<std::int64_t> prime = primes.empty() ? uniform : element_of(primes);
  return shrinking_to(low, weighted_one_of<std::int64_t>({{2, uniform}, {5, tile_edges(low, high)}, {2, prime}}));
}

Gen<std::int64_t> head_dims(std::int64_t max_head_dim, std::int64_t step) {
  const std::int64_t max_units = std::max<std::int64_t>(1, max_head_dim / step);
  std::vector<std::int64_t> specialised;
  for (const std::int64_t width : {64, 80, 96, 128, 192, 256}) {
    if (width <= step * max_units && width % step == 0) specialised.push_back(width);
  }
  const Gen<std::int64_t> any =
      gen::map(gen::inRange<std::int64_t>(1, max_units + 1), [step](std::int64_t h) { return step * h; });
  const Gen<std::int64_t> small = gen::map(gen::inRange<std::int64_t>(1, std::min<std::int64_t>(8, max_units) + 1),
                                           [step](std::int64_t h) { return step * h; });
  if (specialised.empty()) return weighted_one_of<std::int64_t>({{1, small}, {1, any}});
  return weighted_one_of<std::int64_t>({{2, small}, {2, element_of(specialised)}, {2, any}});
}

Gen<std::optional<std::int64_t>> windows(std::int64_t max_seq) {
  return weighted_one_of<std::optional<std::int64_t>>(
      {{2, gen::just(std::optional<std::int64_t>())},
       {1, gen::map(lengths(1, max_seq + 1), [](std::int64_t w) { return std::optional<std::int64_t>(w); })}});
}

Gen<InputOptions> input_options(const GeometrySpec& geometry, std::int64_t tp_size, const GenLimits& limits, int size) {
  const Capabilities& capabilities = limits.capabilities;
  const auto has = [&capabilities](Feature feature) { return capabilities.features.contains(feature); };
  const Geometry resolved = resolve_geometry(geometry);
  const std::int64_t heads = resolved.num_heads(), head_dim = resolved.head_dim();
  const std::int64_t max_batch = bound_at(size, 1, limits.max_batch);
  const std::int64_t longest = bound_at(size, limits.min_seq, limits.max_seq);
  const bool causal = geometry.causal;
  return gen::mapcat(gen::inRange<std::int64_t>(1, max_batch + 1), [=](std::int64_t batch) {
    // The longest sequence the work budget allows for this many rows and heads of this width.
    const auto within_budget = static_cast<std::int64_t>(
        std::sqrt(static_cast<double>(limits.max_attention_work) / static_cast<double>(batch * heads * head_dim)));
    const std::int64_t high = std::clamp(within_budget, limits.min_seq, longest);
    return gen::mapcat(lengths(limits.min_seq, high), [=](std::int64_t seq) {
      using KeyLengths = std::optional<std::vector<std::int64_t>>;
      const Gen<KeyLengths> key_lengths =
          !has(Feature::key_padding)
              ? gen::just(KeyLengths())
              : weighted_one_of<KeyLengths>(
                    {{2, gen::just(KeyLengths())},
                     {1, gen::map(padded_key_lengths(batch, seq),
                                  [](std::vector<std::int64_t> rows) { return KeyLengths(rows); })}});
      using StepCodes = std::optional<std::vector<std::int64_t>>;
      const Gen<StepCodes> decode =
          !has(Feature::decode)
              ? gen::just(StepCodes())
              : weighted_one_of<StepCodes>(
                    {{1, gen::just(StepCodes())},
                     {1, gen::map(gen::container<std::vector<std::int64_t>>(gen::inRange<std::int64_t>(0, 64)),
                                  [](std::vector<std::int64_t> codes) { return StepCodes(std::move(codes)); })}});
      const Gen<std::optional<std::int64_t>> offset = position_offsets(capabilities);
      return gen::map(
          gen::tuple(gen::noShrink(gen::arbitrary<std::uint64_t>()),
                     element(ActivationDistribution::uniform, ActivationDistribution::heavy_tailed,
                             ActivationDistribution::outliers),
                     offset,
                     has(Feature::position_gaps) ? weighted_element<bool>({{2, false}, {1, true}}) : gen::just(false),
                     key_lengths, decode),
          [=](const auto& t) {
            InputOptions options{.seed = std::get<0>(t),
                                 .batch = batch,
                                 .seq = seq,
                                 .activations = std::get<1>(t),
                                 .position_offset = std::get<2>(t),
                                 .position_gaps = std::get<3>(t),
                                 .pad_keys = false,
                                 .key_lengths = std::get<4>(t).value_or(std::vector<std::int64_t>()),
                                 .every_query_sees_a_key = !has(Feature::keyless_rows),
                                 .decode = {},
                                 .tp_size = tp_size};
            // KV-cache decoding is causal by nature (validate_case refuses it otherwise).
            if (const auto& codes = std::get<5>(t); codes && causal) options.decode = schedule_from(seq, *codes);
            return options;
          });
    });
  });
}

}  // namespace attncheck::properties::long_sequences
