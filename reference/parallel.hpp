// When a loop over (batch row, KV head) tasks is worth an OpenMP team.
//
// Tiny cases (the property and gradient tests run thousands) lose badly to a team: measured on this
// project's 2-core machine, gradient tests that take 10-60 ms alone took 7-30 s each under `ctest -j2`,
// two processes' OpenMP threads spinning against each other for the two cores. Below this much work
// the loops run on the calling thread (the whole ctest run then took 1 s).
#pragma once

#include <cstdint>

namespace attncheck::reference {

inline constexpr std::int64_t kParallelMultiplyAdds = std::int64_t{1} << 22;

inline bool worth_parallel(std::int64_t tasks, std::int64_t multiply_adds_per_task) {
  return tasks > 1 && tasks * multiply_adds_per_task >= kParallelMultiplyAdds;
}

}  // namespace attncheck::reference
