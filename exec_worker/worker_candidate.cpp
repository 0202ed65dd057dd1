// Reads an exec: worker's candidate file; anything wrong with it is the worker's failure
// (exec_worker/worker_candidate.hpp).
#include "exec_worker/worker_candidate.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/errors/input_error.hpp"
#include "exec_worker/worker_text.hpp"

namespace attncheck::exec_worker {

namespace {

// What kind of file a mode is, when it is not a regular file.
std::string not_regular(mode_t mode) {
  if (S_ISLNK(mode)) return "it is a symbolic link, not a regular file";
  if (S_ISFIFO(mode)) return "it is a FIFO, not a regular file";
  if (S_ISDIR(mode)) return "it is a folder, not a regular file";
  if (S_ISSOCK(mode)) return "it is a socket, not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "it is a device, not a regular file";
  return "it is not a regular file";
}

// A descriptor closed when it goes out of scope.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The reader's violations without their advice (it speaks to a user about the user's file: "make the
// golden again"), the temporary paths replaced by what they are.
std::string problems_of(const InputError& error, const std::string& path, const std::string& read_path) {
  std::string text;
  for (const Violation& violation : error.violations()) {
    if (!text.empty()) text += "; ";
    text += violation.field + " = " + violation.value + ": " + violation.rule;
  }
  if (text.empty()) text = error.what();
  return replace_all(replace_all(text, read_path, "the candidate"), path, "the candidate");
}

}  // namespace

golden::Candidate read_worker_candidate(const std::string& path, const NamedTensors& expected_names,
                                        const std::string& implementation) {
  // removed: whether there was a file, which attncheck removes (the message says so).
  const auto failure = [&](const std::string& why, bool removed = true) {
    return std::runtime_error(fmt::format(
        "{}: the worker said ok, but the candidate it wrote is not a valid candidate file: {}{}", implementation,
        echoable(why), removed ? " (attncheck removed it)" : ""));
  };
  struct stat link_status {};
  if (lstat(path.c_str(), &link_status) != 0) {
    if (errno == ENOENT) throw failure("it wrote no file at the path it was given", /*removed=*/false);
    throw failure(fmt::format("it cannot be examined ({})", std::strerror(errno)));
  }
  if (!S_ISREG(link_status.st_mode)) throw failure(not_regular(link_status.st_mode));
  // Opened without following a link and without blocking (a FIFO swapped in after lstat() would block
  // a plain open()), then checked to be the file lstat() saw.
  const Descriptor file(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) throw failure(fmt::format("it cannot be opened ({})", std::strerror(errno)));
  struct stat opened {};
  if (fstat(file.get(), &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_dev != link_status.st_dev ||
      opened.st_ino != link_status.st_ino) {
    throw failure("it was replaced while attncheck examined it");
  }
  // Read through the descriptor (/proc/self/fd/N reopens that very file), so that no later swap counts.
  const std::string by_descriptor = fmt::format("/proc/self/fd/{}", file.get());
  std::error_code ignored;
  const std::string read_path = std::filesystem::exists(by_descriptor, ignored) ? by_descriptor : path;
  try {
    return golden::read_candidate(read_path, expected_names);
  } catch (const InputError& error) {
    throw failure(problems_of(error, path, read_path));
  }
}

}  // namespace attncheck::exec_worker
