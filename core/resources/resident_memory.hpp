// This process's resident memory as Linux reports it (/proc/self/status VmRSS and VmHWM), and a reset of
// the peak (VmHWM) so that one stretch of work, such as one (golden, implementation) pair of `attncheck run`,
// can be measured on its own. Resident memory is what the kernel's out-of-memory killer and a CI runner's
// limit count; allocator statistics would miss the pages LibTorch and HDF5 take for themselves.
#pragma once

#include <cstdint>
#include <optional>

namespace attncheck {

struct ResidentMemory {
  std::uint64_t current = 0;  // VmRSS
  std::uint64_t peak = 0;     // VmHWM: the most resident since the process began or the last reset
};

// nullopt where /proc/self/status has no VmRSS / VmHWM (not Linux).
std::optional<ResidentMemory> resident_memory();

// Hands freed heap pages back to the kernel (malloc_trim: the pages are faulted in afresh when next used, so
// measuring costs time where the allocator would have reused them), then sets the peak to the current resident size
// (writes "5" to /proc/self/clear_refs, Linux 4.0 and later). False where the kernel refuses: the peak then
// still counts everything since the process began, which over-reports and never under-reports.
bool reset_peak_resident();

}  // namespace attncheck
