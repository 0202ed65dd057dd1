// attncheck: entry point; everything else is in cli_app.cpp.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_app.hpp"
#include "core/resources/fresh_pages.hpp"

namespace {

// The commands that hold gigabytes (a wide golden's weights and gradients, several times over).
bool holds_gigabytes(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view command = argv[1];
  if (command == "run") return true;
  if (command != "golden" || argc < 3) return false;
  const std::string_view subcommand = argv[2];
  return subcommand == "check" || subcommand == "yardstick";
}

// Transparent huge pages for the heap. On this project's VM (Firecracker) the first touch of a page costs
// ~6 us of kernel time, and `attncheck run` touches ~9.5 GB (GPT-NeoX-20B's 151M-parameter layer through
// LibTorch): half of that golden's time was page faults. With 2 MB pages: GPT-NeoX-20B alone 19.5 s ->
// 13.7 s (medians of timed runs). glibc madvises its heap for huge pages only when GLIBC_TUNABLES says so at
// start-up, so those commands re-execute themselves once with it added (0.36 s, the binary's start);
// where it is already set, or the exec fails, they carry on as they are.
//
// The same re-execution sets OMP_WAIT_POLICY=passive where the user has not set it: OpenMP threads then sleep
// when a parallel region ends instead of spinning. `run` loads two OpenMP runtimes (attncheck's libgomp and
// the copy LibTorch's wheel carries), and one's spinning threads took the cores the other's work needed:
// six goldens x five implementations 50.8 s -> 42.5-44.0 s (docs/MEASUREMENTS.md), every verdict the same.
// Both runtimes read it when they load, before main(), hence the re-execution.
void reexecute_with_huge_pages(int argc, char** argv) {
  if (!holds_gigabytes(argc, argv)) return;
  const char* current = std::getenv("GLIBC_TUNABLES");
  std::string tunables = current != nullptr ? current : "";
  if (tunables.find("glibc.malloc.hugetlb") != std::string::npos) return;
  tunables += std::string(tunables.empty() ? "" : ":") + "glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace

int main(int argc, char** argv) {
  reexecute_with_huge_pages(argc, argv);
  // Keep freed memory for reuse instead of returning every large block to the kernel. By default glibc
  // maps each allocation above 32 MB afresh and unmaps it when freed, so every gradient of a large layer
  // (Qwen3-32B's q_proj: 335 MB in fp64; a run makes several, a yardstick up to twenty runs) paid its page
  // faults and the kernel's zeroing again: 38% of `attncheck run`'s time on GPT-NeoX-20B (perf), the
  // reference's run 6.7 s -> 1.6 s without it. Peak memory grows by about a tenth. One arena: a thread's
  // own arena (OpenMP's GEMM threads, `run --jobs`) is a set of mapped heaps that would bring the mapping
  // back (sys time over the committed goldens 70 s -> 5-25 s).
  // core/resources/fresh_pages.hpp: the three mallopt settings, and large zero-filled tensors faulted in on
  // OpenMP's threads.
  attncheck::keep_heap_for_reuse();
  const std::vector<std::string> args(argv + 1, argv + argc);
  return attncheck::cli::run_cli(args, std::cout, std::cerr);
}
