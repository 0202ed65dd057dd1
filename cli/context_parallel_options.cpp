#include "cli/context_parallel_options.hpp"

#include "cli/flag_validators.hpp"
#include "core/errors/input_error.hpp"

namespace attncheck::cli {

void add_cp_options(CLI::App& command, CpOptions& options) {
  command.add_option("--cp", options.cp_size, "context-parallel size: CP ranks per TP rank (default 1: none)")
      ->check(integer_validator());
  command
      .add_option("--cp-scheme", options.scheme,
                  "how the sequence is split: ulysses (all-to-all over heads) or ring (K/V passed around)")
      ->check(CLI::IsMember({"ulysses", "ring"}));
  command
      .add_option("--cp-chunks", options.chunks,
                  "ring chunking: load-balanced (2 x cp chunks, rank c holds c and 2 cp - 1 - c; the default) or "
                  "contiguous")
      ->check(CLI::IsMember({"load-balanced", "contiguous"}));
}

std::optional<CpSpec> parse_cp_options(const CpOptions& options) {
  if (options.cp_size < 1) {
    throw InputError("context-parallel options", {{"--cp", std::to_string(options.cp_size), "must be >= 1",
                                                   "1 (no context parallelism) or more"}});
  }
  if (options.cp_size == 1 && !options.scheme && !options.chunks) return std::nullopt;
  if (!options.scheme && options.chunks) {
    throw InputError("context-parallel options", {{"--cp-chunks", *options.chunks, "chunks a context-parallel "
                                                   "layout, which --cp-scheme states", "add --cp-scheme ring, or omit it"}});
  }
  if (!options.scheme) {
    throw InputError("context-parallel options", {{"--cp-scheme", "absent", "a context-parallel size above 1 needs its "
                                                   "scheme", "--cp-scheme ulysses or --cp-scheme ring"}});
  }
  const CpScheme scheme = *parse_cp_scheme(*options.scheme);  // CLI11 checked the name
  if (scheme == CpScheme::ulysses && options.chunks) {
    throw InputError("context-parallel options",
                     {{"--cp-chunks", *options.chunks, "Ulysses holds one contiguous chunk per CP rank; chunking is the "
                       "ring's", "omit --cp-chunks with --cp-scheme ulysses"}});
  }
  return CpSpec{.cp_size = options.cp_size,
                .scheme = scheme,
                .load_balanced = options.chunks.value_or("load-balanced") == "load-balanced"};
}

}  // namespace attncheck::cli
