#include "properties/repro.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

[[noreturn]] void not_written(const std::string& path, const std::string& why) {
  throw ReproNotWritten(fmt::format("'{}' {}", path, why));
}

// What stands at `path`, its last component not followed: "" when nothing does, else a word for it.
std::string kind_at(const std::string& path) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return "";
    return fmt::format("something attncheck cannot inspect ({})", std::strerror(errno));
  }
  if (S_ISREG(info.st_mode)) return "a regular file";
  if (S_ISDIR(info.st_mode)) return "a folder";
  if (S_ISLNK(info.st_mode)) return "a symbolic link";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (S_ISSOCK(info.st_mode)) return "a socket";
  return "a device";
}

// Writes the file `path` by `write` (handed a fresh file of its own in the same folder), then renames it into
// place: a symlink put at `path` meanwhile is replaced, never followed, and a reader never sees half a file.
void publish(const std::string& path, const std::function<void(const std::string&)>& write) {
  if (const std::string there = kind_at(path); !there.empty() && there != "a regular file") {
    not_written(path, fmt::format("is {}: a repro is written only as a new file or over a regular file, so "
                                  "attncheck left it as it is",
                                  there));
  }
  const std::filesystem::path target(path);
  std::string fresh = (target.parent_path() / ("." + target.filename().string() + ".XXXXXX")).string();
  const int descriptor = mkstemp(fresh.data());
  if (descriptor < 0) {
    not_written(path,
                fmt::format("cannot be written: no new file can be made in its folder ({})", std::strerror(errno)));
  }
  fchmod(descriptor, 0644);  // mkstemp's 0600 would keep a repro from the people it is sent to
  close(descriptor);
  std::string failure;
  try {
    write(fresh);
  } catch (const std::exception& error) {
    failure = error.what();
  } catch (...) {
    failure = "an unknown error";
  }
  if (failure.empty() && std::rename(fresh.c_str(), path.c_str()) != 0) {
    failure = fmt::format("putting it in place failed ({})", std::strerror(errno));
  }
  if (!failure.empty()) {
    unlink(fresh.c_str());
    not_written(path, fmt::format("could not be written: {}", failure));
  }
}

// The golden file of a failing case: the fp64 reference's answers (computed before anything is written).
golden::Golden case_golden(const Case& test_case, const std::string& generator) {
  return golden::Golden{
      .test_case = test_case, .expected = reference::run_reference_tp(test_case), .generator = generator};
}

void publish_case(const Case& test_case, const std::string& path, const std::string& generator) {
  const golden::Golden golden = case_golden(test_case, generator);
  publish(path, [&golden](const std::string& fresh) { golden::write_golden(fresh, golden); });
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
    std::error_code error;
    std::filesystem::create_directories(requested, error);
    if (error || !std::filesystem::is_directory(requested, error)) {
      const std::string there = kind_at(requested);
      not_written(requested, fmt::format("is no folder a repro can be written into ({})",
                                         there.empty() || there == "a folder" ? error.message() : "it is " + there));
    }
    return requested;
  }
  // mkdtemp: a fresh folder only this process made (0700), never one another process planted at a known path.
  const char* root = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/attncheck-repro-XXXXXX", root != nullptr && *root != '\0' ? root : "/tmp");
  if (mkdtemp(pattern.data()) == nullptr) {
    not_written(pattern, fmt::format("cannot be made as the repro folder ({}); name one with --repro-dir",
                                     std::strerror(errno)));
  }
  return pattern;
}

void write_case_golden(const Case& test_case, const std::string& path, const std::string& generator) {
  golden::write_golden(path, case_golden(test_case, generator));
}

std::string write_repro(const Case& test_case, const std::string& requested, const std::string& implementation) {
  const std::string directory = repro_folder(requested);
  const std::string path = fmt::format("{}/{}.h5", directory, repro_stem(test_case, implementation));
  publish_case(test_case, path, fmt::format("attncheck fuzz ({} failed)", implementation));
  return path;
}

std::string write_sequence_repro(const std::vector<SequenceCase>& cases, const std::string& comment,
                                 const std::string& requested, const std::string& implementation) {
  const std::string folder = fmt::format("{}/{}-sequence", repro_folder(requested),
                                         repro_stem(cases.back().test_case, implementation));
  if (mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    not_written(folder, fmt::format("cannot be made ({})", std::strerror(errno)));
  }
  if (const std::string there = kind_at(folder); there != "a folder") {
    not_written(folder, fmt::format("is {}: a sequence repro is a folder attncheck makes, so it left this as it is",
                                    there.empty() ? "gone" : there));
  }
  std::ostringstream listing;
  std::istringstream comment_lines(comment);
  for (std::string line; std::getline(comment_lines, line);) listing << "# " << line << '\n';
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const bool last = i + 1 == cases.size();
    publish_case(cases[i].test_case, fmt::format("{}/{}.h5", folder, cases[i].name),
                 last ? fmt::format("attncheck fuzz ({} failed after the cases before it in {})", implementation,
                                    kSequenceListing)
                      : fmt::format("attncheck fuzz (case {} of a sequence {} failed after)", i + 1, implementation));
    listing << cases[i].name << ".h5\n";
  }
  // The listing last: a folder whose listing exists holds every file it names.
  publish(fmt::format("{}/{}", folder, kSequenceListing), [&listing](const std::string& fresh) {
    std::ofstream stream(fresh, std::ios::trunc);
    stream << listing.str();
    stream.close();
    if (!stream) throw std::runtime_error("writing the listing failed");
  });
  return folder;
}

std::vector<std::string> read_sequence_repro(const std::string& folder) {
  const std::filesystem::path listing_path = std::filesystem::path(folder) / kSequenceListing;
  // Opened without waiting (a FIFO there would block an open for reading until a writer came), then held to a
  // regular file by its descriptor.
  const int descriptor = open(listing_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat info {};
  if (descriptor < 0 || fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode)) {
    const std::string there = kind_at(listing_path.string());
    if (descriptor >= 0) close(descriptor);
    refuse_sequence(folder, "a folder",
                    there.empty() || there == "a regular file"
                        ? fmt::format("holds no readable {}", kSequenceListing)
                        : fmt::format("holds a {} that is {}, not a regular file", kSequenceListing, there));
  }
  std::string text;
  char buffer[4096];
  constexpr std::size_t kLargestListing = std::size_t{1} << 20;  // a million bytes of file names is no repro
  for (ssize_t count; text.size() <= kLargestListing && (count = read(descriptor, buffer, sizeof buffer)) > 0;) {
    text.append(buffer, buffer + count);
  }
  close(descriptor);
  if (text.size() > kLargestListing) {
    refuse_sequence(listing_path.string(), "over 1 MiB", "must be a listing of case file names, one a line");
  }
  std::istringstream listing(text);
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
