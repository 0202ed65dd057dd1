#include "core/resources/resident_memory.hpp"

#include <malloc.h>

#include <fstream>
#include <sstream>
#include <string>

namespace attncheck {

std::optional<ResidentMemory> resident_memory() {
  std::ifstream status("/proc/self/status");
  std::optional<std::uint64_t> current, peak;
  std::string line;
  while (std::getline(status, line)) {
    const auto field = [&](const char* key, std::optional<std::uint64_t>& into) {
      const std::string prefix = std::string(key) + ":";
      if (line.rfind(prefix, 0) != 0) return;
      std::istringstream fields(line.substr(prefix.size()));
      std::uint64_t kib = 0;
      if (fields >> kib) into = kib * 1024;  // "VmRSS:   123456 kB"
    };
    field("VmRSS", current);
    field("VmHWM", peak);
  }
  if (!current || !peak) return std::nullopt;
  return ResidentMemory{.current = *current, .peak = *peak};
}

bool reset_peak_resident() {
  // Freed memory glibc keeps (attncheck's main() asks it never to trim or unmap, to spare page faults) would
  // count as resident before the work starts and be reused by it unseen: the work's peak would read as 0.
  malloc_trim(0);
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

}  // namespace attncheck
