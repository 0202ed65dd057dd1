// How much memory this process may still take, and the check every command makes before an
// allocation that grows with the request (a golden's geometry, a file's declared shapes): a request
// that would not fit is bad input (InputError, exit 2) naming the estimate, the limit and what would
// fit, instead of std::bad_alloc half-way through or the kernel's out-of-memory kill.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/errors/input_error.hpp"

namespace attncheck {

// The InputError of a request that does not fit in memory_room() (or that the allocator refused): bad input
// for a command given one thing to do, and, for a command checking many goldens, that golden "not checked"
// while the others go on (cli/golden_pair.hpp).
class NotEnoughMemory : public InputError {
 public:
  using InputError::InputError;
};

struct MemoryRoom {
  std::uint64_t bytes = 0;
  std::string limited_by;  // which limit is the smallest, e.g. "MemAvailable in /proc/meminfo"
};

// The smallest of: the machine's available memory (MemAvailable in /proc/meminfo), the room under
// this process's cgroup v2 limit (memory.max less memory.current), the address space left under
// RLIMIT_AS (`ulimit -v`, less what is mapped now: a container's or CI runner's limit), and
// --max-memory when given. Limits that cannot be read on this system are left out.
MemoryRoom memory_room();

// --max-memory: an upper bound of the caller's own (nullopt: none). Process-wide, set once by the CLI.
void set_max_memory(std::optional<std::uint64_t> bytes);

// "1.5 GiB", "512.0 MiB", "100 bytes".
std::string describe_bytes(std::uint64_t bytes);

// Throws NotEnoughMemory (field `what`) when `estimate` bytes exceed memory_room(); the message names the
// estimate, the room and its limit, and suggestion(room) (e.g. the largest --seq that would fit).
void require_memory(const std::string& what, std::uint64_t estimate,
                    const std::function<std::string(std::uint64_t room)>& suggestion);

}  // namespace attncheck
