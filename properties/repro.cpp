#include "properties/repro.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "golden/golden_file.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {

namespace {

// Letters, digits and '-' only: an exec: command becomes a readable file name fragment.
std::string file_name_fragment(const std::string& text) {
  std::string fragment;
  for (const char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (plain) {
      fragment += c;
    } else if (!fragment.empty() && fragment.back() != '-') {
      fragment += '-';
    }
    if (fragment.size() >= 40) break;
  }
  while (!fragment.empty() && fragment.back() == '-') fragment.pop_back();
  return fragment;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string write_repro(const Case& test_case, const std::string& directory, const std::string& implementation) {
  std::filesystem::create_directories(directory);
  const golden::Golden golden{.test_case = test_case,
                              .expected = reference::run_reference_tp(test_case),
                              .generator = fmt::format("attncheck fuzz ({} failed)", implementation)};
  // The name hashes the geometry and inputs, so distinct failures do not overwrite each other.
  const Geometry& g = test_case.geometry();
  const std::size_t hash = std::hash<std::string>{}(
      fmt::format("{} {} {} {} {} | {} | {}", g.hidden_size(), g.num_heads(), g.num_kv_heads(), g.head_dim(),
                  test_case.plan.tp_size, fmt::join(test_case.inputs.x.values, ","),
                  fmt::join(test_case.weights.q_proj.values, ",")));
  const std::string path =
      fmt::format("{}/repro-{}-{:08x}.h5", directory, file_name_fragment(implementation), hash & 0xffffffffU);
  golden::write_golden(path, golden);
  return path;
}

std::string replay_command(const std::string& path, const std::string& implementation) {
  return fmt::format("attncheck replay {} --impl {}", shell_quote(path), shell_quote(implementation));
}

}  // namespace attncheck::properties
