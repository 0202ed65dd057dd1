#include "core/resources/memory_room.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {

std::atomic<std::uint64_t> max_memory{0};  // 0: no --max-memory

// "Key:   123 kB" lines of /proc/meminfo and /proc/self/status; nullopt when absent.
std::optional<std::uint64_t> kibibyte_field(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::istringstream fields(line.substr(key.size() + 1));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

// A cgroup v2 file holding one number (memory.max holds "max" when unlimited: nullopt).
std::optional<std::uint64_t> cgroup_number(const std::string& name) {
  std::ifstream file("/sys/fs/cgroup/" + name);
  std::string text;
  if (!(file >> text) || text == "max") return std::nullopt;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void consider(MemoryRoom& room, std::optional<std::uint64_t> bytes, const std::string& source) {
  if (bytes && *bytes < room.bytes) room = {*bytes, source};
}

}  // namespace

MemoryRoom memory_room() {
  MemoryRoom room{std::numeric_limits<std::uint64_t>::max(), "no limit could be read"};
  consider(room, kibibyte_field("/proc/meminfo", "MemAvailable"), "MemAvailable in /proc/meminfo");
  // The process's own cgroup is the root of the namespace in a container (cgroup v2, unified).
  if (const auto limit = cgroup_number("memory.max")) {
    const std::uint64_t used = cgroup_number("memory.current").value_or(0);
    consider(room, *limit > used ? *limit - used : 0, "the cgroup's memory.max less memory.current");
  }
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    const std::uint64_t mapped = kibibyte_field("/proc/self/status", "VmSize").value_or(0);
    const std::uint64_t limit = address_space.rlim_cur;
    consider(room, limit > mapped ? limit - mapped : 0,
             fmt::format("RLIMIT_AS (ulimit -v {}) less the {} this process has mapped", limit / 1024,
                         describe_bytes(mapped)));
  }
  if (const std::uint64_t cap = max_memory.load(); cap != 0) consider(room, cap, "--max-memory");
  return room;
}

void set_max_memory(std::optional<std::uint64_t> bytes) { max_memory.store(bytes.value_or(0)); }

std::string describe_bytes(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

void require_memory(const std::string& what, std::uint64_t estimate,
                    const std::function<std::string(std::uint64_t room)>& suggestion) {
  const MemoryRoom room = memory_room();
  if (estimate <= room.bytes) return;
  throw NotEnoughMemory("not enough memory",
                        {{what, fmt::format("an estimated {} at peak", describe_bytes(estimate)),
                          fmt::format("must fit in the {} this process may still take (limited by {})",
                                      describe_bytes(room.bytes), room.limited_by),
                          suggestion(room.bytes)}});
}

}  // namespace attncheck
