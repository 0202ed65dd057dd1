// The context-parallel options `attncheck plan` and `golden make` share: --cp N, --cp-scheme ulysses|ring
// (required above 1) and --cp-chunks load-balanced|contiguous (the ring's; Megatron's load balancing by
// default), parsed into a CpSpec (core/model/parallel_layout.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "core/model/parallel_layout.hpp"

namespace attncheck::cli {

struct CpOptions {
  std::int64_t cp_size = 1;
  std::optional<std::string> scheme;
  std::optional<std::string> chunks;  // absent: load-balanced for the ring
};

void add_cp_options(CLI::App& command, CpOptions& options);

// None for --cp 1 without a scheme or chunking; InputError (exit 2) for a CP size below 1, a CP size above 1
// without its scheme, --cp-chunks without a scheme, or --cp-chunks with Ulysses. Whether the layout fits the
// plan is make_parallel_layout's to say.
std::optional<CpSpec> parse_cp_options(const CpOptions& options);

}  // namespace attncheck::cli
