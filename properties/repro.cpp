#include "properties/repro.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/errors/input_error.hpp"
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

// repro-<implementation>-<hash>: the hash covers the geometry and inputs, so distinct failures do not
// overwrite each other.
std::string repro_stem(const Case& test_case, const std::string& implementation) {
  const Geometry& g = test_case.geometry();
  const std::size_t hash = std::hash<std::string>{}(
      fmt::format("{} {} {} {} {} | {} | {}", g.hidden_size(), g.num_heads(), g.num_kv_heads(), g.head_dim(),
                  test_case.plan.tp_size, fmt::join(test_case.inputs.x.values, ","),
                  fmt::join(test_case.weights.q_proj.values, ",")));
  return fmt::format("repro-{}-{:08x}", file_name_fragment(implementation), hash & 0xffffffffU);
}

[[noreturn]] void refuse_sequence(const std::string& folder, const std::string& value, const std::string& problem) {
  ViolationList violations;
  violations.add(folder, value, problem,
                 fmt::format("a repro .h5 file, or a folder written by attncheck fuzz holding {} (one case file "
                             "name a line, in the order they run, the failing case last; # comments) and those files",
                             kSequenceListing));
  violations.throw_if_any("invalid sequence repro");
  throw std::logic_error("unreachable");
}

}  // namespace

std::string repro_folder(const std::string& requested) {
  if (!requested.empty()) {
    std::filesystem::create_directories(requested);
    return requested;
  }
  // mkdtemp: a fresh folder only this process made (0700), never one another process planted at a known path.
  const char* root = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/attncheck-repro-XXXXXX", root != nullptr && *root != '\0' ? root : "/tmp");
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error(fmt::format("cannot make a repro folder {}: {}", pattern, std::strerror(errno)));
  }
  return pattern;
}

void write_case_golden(const Case& test_case, const std::string& path, const std::string& generator) {
  const golden::Golden golden{
      .test_case = test_case, .expected = reference::run_reference_tp(test_case), .generator = generator};
  golden::write_golden(path, golden);
}

std::string write_repro(const Case& test_case, const std::string& requested, const std::string& implementation) {
  const std::string directory = repro_folder(requested);
  const std::string path = fmt::format("{}/{}.h5", directory, repro_stem(test_case, implementation));
  write_case_golden(test_case, path, fmt::format("attncheck fuzz ({} failed)", implementation));
  return path;
}

std::string write_sequence_repro(const std::vector<SequenceCase>& cases, const std::string& comment,
                                 const std::string& requested, const std::string& implementation) {
  const std::string folder = fmt::format("{}/{}-sequence", repro_folder(requested),
                                         repro_stem(cases.back().test_case, implementation));
  std::filesystem::create_directories(folder);
  std::ostringstream listing;
  std::istringstream comment_lines(comment);
  for (std::string line; std::getline(comment_lines, line);) listing << "# " << line << '\n';
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const bool last = i + 1 == cases.size();
    write_case_golden(cases[i].test_case, fmt::format("{}/{}.h5", folder, cases[i].name),
               last ? fmt::format("attncheck fuzz ({} failed after the cases before it in {})", implementation,
                                  kSequenceListing)
                    : fmt::format("attncheck fuzz (case {} of a sequence {} failed after)", i + 1, implementation));
    listing << cases[i].name << ".h5\n";
  }
  // The listing last: a folder whose listing exists holds every file it names.
  std::ofstream(fmt::format("{}/{}", folder, kSequenceListing)) << listing.str();
  return folder;
}

std::vector<std::string> read_sequence_repro(const std::string& folder) {
  const std::filesystem::path listing_path = std::filesystem::path(folder) / kSequenceListing;
  std::ifstream listing(listing_path);
  if (!std::filesystem::is_regular_file(listing_path) || !listing) {
    refuse_sequence(folder, "a folder", fmt::format("holds no readable {}", kSequenceListing));
  }
  std::vector<std::string> files;
  std::int64_t line_number = 0;
  for (std::string line; std::getline(listing, line);) {
    ++line_number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string name = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    const std::string where = fmt::format("{}/{} line {}", folder, kSequenceListing, line_number);
    if (name == "." || name == ".." || name.find('/') != std::string::npos) {
      refuse_sequence(where, name, "must be a file name in the folder, without a path");
    }
    const std::filesystem::path file = std::filesystem::path(folder) / name;
    if (!std::filesystem::is_regular_file(file)) refuse_sequence(where, name, "names no file in the folder");
    files.push_back(file.string());
  }
  if (files.size() < 2) {
    refuse_sequence(fmt::format("{}/{}", folder, kSequenceListing), fmt::format("{} case files", files.size()),
                    "must list at least two: the earlier cases, then the failing one");
  }
  return files;
}

std::string replay_command(const std::string& path, const std::string& implementation) {
  return fmt::format("attncheck replay {} --impl {}", shell_quote(path), shell_quote(implementation));
}

}  // namespace attncheck::properties
