// SplitMix64 streams keyed by (seed, name, draw): the random source of input generation and of gradient
// sketches, specified step by step in golden/SCHEMA.md so other languages can rebuild it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attncheck {

class SplitMixStream {
 public:
  SplitMixStream(std::uint64_t seed, std::string_view name, std::uint64_t draw = 0);
  std::uint64_t next() { return mix(state_ += kGamma); }  // inline: input generation draws hundreds of millions
  std::int64_t symmetric_integer(std::int64_t amplitude);  // uniform in [-amplitude, amplitude], by rejection
  std::int64_t uniform_below(std::int64_t bound);          // uniform in [0, bound), by rejection
  bool coin() { return (next() >> 63) != 0; }              // the top bit

  // The next `count` draws, as next() would return them, without moving the stream (skip() does): they do not
  // depend on one another, so they are computed side by side (the emulated layer's jittered rounding takes
  // one or two per value).
  void peek(std::uint64_t* draws, std::size_t count) const {
    for (std::size_t i = 0; i < count; ++i) draws[i] = mix(state_ + (i + 1) * kGamma);
  }
  void skip(std::uint64_t draws) { state_ += draws * kGamma; }

 private:
  static constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ULL;
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::uint64_t state_;
};

// Uniform integers in [0, range) by rejection, exactly as SplitMixStream::uniform_below draws them, with the
// rejection limit (a 64-bit division) computed once for a run of draws instead of once per draw: input
// generation draws a golden's weights, hundreds of millions of values, from a handful of ranges.
class UniformBelow {
 public:
  // range >= 1.
  explicit UniformBelow(std::uint64_t range) : range_(range), limit_(UINT64_MAX - UINT64_MAX % range) {}
  std::uint64_t operator()(SplitMixStream& stream) const {
    std::uint64_t value = stream.next();
    while (value >= limit_) value = stream.next();  // values at or above the largest multiple of range are redrawn
    return value % range_;
  }

 private:
  std::uint64_t range_;
  std::uint64_t limit_;
};

// Uniform integers in [-amplitude, amplitude], exactly as SplitMixStream::symmetric_integer draws them (one
// UniformBelow(2 * amplitude + 1) draw, shifted), the rejection limit computed once.
class SymmetricInteger {
 public:
  explicit SymmetricInteger(std::int64_t amplitude)
      : amplitude_(amplitude), draw_(static_cast<std::uint64_t>(2 * amplitude + 1)) {}
  std::int64_t operator()(SplitMixStream& stream) const { return static_cast<std::int64_t>(draw_(stream)) - amplitude_; }

 private:
  std::int64_t amplitude_;
  UniformBelow draw_;
};

}  // namespace attncheck
