// SplitMix64 streams keyed by (seed, name, draw): the random source of input generation and of gradient
// sketches, specified step by step in golden/SCHEMA.md so other languages can rebuild it.
#pragma once

#include <cstdint>
#include <string_view>

namespace attncheck {

class SplitMixStream {
 public:
  SplitMixStream(std::uint64_t seed, std::string_view name, std::uint64_t draw = 0);
  std::uint64_t next();
  std::int64_t symmetric_integer(std::int64_t amplitude);  // uniform in [-amplitude, amplitude], by rejection
  std::int64_t uniform_below(std::int64_t bound);          // uniform in [0, bound), by rejection
  bool coin() { return (next() >> 63) != 0; }              // the top bit

 private:
  std::uint64_t state_;
};

}  // namespace attncheck
