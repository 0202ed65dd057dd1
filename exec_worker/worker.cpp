#include "exec_worker/worker.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "core/capabilities/capabilities_json.hpp"
#include "core/errors/input_error.hpp"
#include "exec_worker/worker_candidate.hpp"
#include "exec_worker/worker_supervisor.hpp"
#include "exec_worker/worker_text.hpp"
#include "golden/golden_file.hpp"

namespace attncheck::exec_worker {

using impl::Implementation;
using impl::InternalFault;
using impl::NoAnswer;
using impl::Unsupported;

namespace {

constexpr int kDefaultTimeoutSeconds = 300;
constexpr int kLongestTimeoutSeconds = 86400;

// ATTNCHECK_WORKER_TIMEOUT: unset means 300 s; anything else must be a whole number of seconds in
// [1, 86400], or it is bad input (never silently the default).
int timeout_seconds() {
  const char* text = std::getenv("ATTNCHECK_WORKER_TIMEOUT");
  if (text == nullptr) return kDefaultTimeoutSeconds;
  const std::string_view value_text(text);
  int value = 0;
  const auto [end, error] = std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
  if (value_text.empty() || error != std::errc() || end != value_text.data() + value_text.size() || value < 1 ||
      value > kLongestTimeoutSeconds) {
    ViolationList violations;
    violations.add("ATTNCHECK_WORKER_TIMEOUT", std::string(value_text.substr(0, 100)),
                   "must be a whole number of seconds in [1, 86400]", "300 (the default, when it is unset)");
    violations.throw_if_any("invalid environment variable");
  }
  return value;
}

// The protocol a line greets with: 1 or 2 for the words "attncheck-worker" and "1" or "2", exactly, then
// optionally a space and free text (a description, informational only); 0 for anything else
// ("attncheck-worker 10" and "attncheck-worker 1junk" are no protocol).
int greeting_protocol(const std::string& line) {
  for (const int protocol : {1, 2}) {
    const std::string greeting = fmt::format("attncheck-worker {}", protocol);
    if (line == greeting || line.starts_with(greeting + " ")) return protocol;
  }
  return 0;
}

// The names a candidate of this case may hold (its tensors are read by name: golden::read_candidate), from the
// case's geometry and plan alone: no reference run, no tensor (values left empty).
NamedTensors candidate_names(const Case& test_case, const golden::CaseFileParts& parts) {
  NamedTensors names;
  names["out"] = Tensor{};
  names["grads/x"] = Tensor{};
  const Parameters shapes = parameter_shapes(test_case.geometry(), full_widths(test_case.geometry()));
  std::vector<std::string> parameters;
  for_each_parameter(shapes, [&](std::string_view name, const Tensor&) { parameters.emplace_back(name); });
  for (const std::string& parameter : parameters) names["grads/" + parameter] = Tensor{};
  if (!test_case.inputs.decode.empty() && parts.decode) names["decode/out"] = Tensor{};
  const std::int64_t ranks = parts.tensor_parallel ? test_case.plan.tp_size : 1;
  for (std::int64_t rank = 0; ranks > 1 && rank < ranks; ++rank) {
    for (const std::string& parameter : parameters) names[fmt::format("ranks/{}/grads/{}", rank, parameter)] = Tensor{};
  }
  return names;
}

// The worker's temporary folder (case and candidate files), held by a descriptor from the moment it is made:
// attncheck writes, reads and removes its files through /proc/self/fd/<descriptor>/NAME (inside(NAME)), so a
// worker that swaps the folder's path for a symbolic link (or renames it) cannot make attncheck write or delete
// anything elsewhere. The worker is told the path (path()); what it does with its own folder is its business.
class TemporaryFolder {
 public:
  TemporaryFolder() {
    // Under $TMPDIR (default /tmp), as every temporary file of attncheck's.
    const char* root = std::getenv("TMPDIR");
    const std::string parent = root != nullptr && *root != '\0' ? root : "/tmp";
    std::string folder_template = parent + "/attncheck-worker-XXXXXX";
    if (mkdtemp(folder_template.data()) == nullptr) {
      throw InternalFault(fmt::format("cannot create a folder in {} ({})", parent, std::strerror(errno)));
    }
    path_ = folder_template;
    descriptor_ = open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (descriptor_ < 0) {
      const std::string reason = std::strerror(errno);
      rmdir(path_.c_str());
      throw InternalFault(fmt::format("cannot open the worker's folder {} ({})", path_, reason));
    }
    held_ = fmt::format("/proc/self/fd/{}", descriptor_);
  }
  ~TemporaryFolder() {  // the worker's supervisor has removed it already, unless it could not finish
    // Its contents, through the descriptor: each entry removed as it is (a link is unlinked, not followed). Not
    // remove_all(held_) itself: /proc/self/fd/N is a link, which remove_all would only try to unlink.
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(held_, ignored)) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
    // The folder itself by its path only while the path still names it (a worker may have swapped it).
    struct stat by_path {};
    struct stat held {};
    if (lstat(path_.c_str(), &by_path) == 0 && fstat(descriptor_, &held) == 0 && by_path.st_dev == held.st_dev &&
        by_path.st_ino == held.st_ino) {
      rmdir(path_.c_str());
    }
    close(descriptor_);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::string& path() const { return path_; }
  // `name` in the folder attncheck made, whatever its path names now.
  std::string inside(const std::string& name) const { return held_ + "/" + name; }

 private:
  std::string path_;
  std::string held_;  // /proc/self/fd/<descriptor_>
  int descriptor_ = -1;
};

// One line from the worker: its first kLongestWorkerLine bytes, without the newline, and how many more
// it had; or why there is none.
struct WorkerLine {
  enum class End { line, closed, timed_out };
  End end = End::line;
  std::string text;
  std::size_t cut = 0;  // bytes of the line beyond text, read and dropped
};

// One started worker: its temporary folder and its supervised process tree (declared after the folder: the
// tree ends before the folder goes).
struct WorkerSession {
  explicit WorkerSession(const std::string& command) : process(command, folder.path()) {}
  TemporaryFolder folder;
  SupervisedWorker process;
};

class Worker : public Implementation {
 public:
  explicit Worker(const std::string& command)
      : command_(command), name_(std::string(kExecPrefix) + command), timeout_seconds_(timeout_seconds()) {
    signal(SIGPIPE, SIG_IGN);  // a dead worker is an error on write, not the end of attncheck
    if (const std::string problem = start(); !problem.empty()) {
      ViolationList violations;
      violations.add("--impl", name_,
                     "must start a process that first prints 'attncheck-worker 1', alone or followed by a space "
                     "and a description (or 'attncheck-worker 2' so, then a 'supports JSON' line)",
                     problem);
      violations.throw_if_any("not an attncheck worker");
    }
  }

  ~Worker() override = default;  // the session ends the worker's tree, then removes its folder

  const std::string& name() const override { return name_; }
  // What its `supports` line stated (protocol 2), or everything, unstated (protocol 1).
  const Capabilities& capabilities() const override { return capabilities_; }
  // The case's candidate, as its candidate file declares it (SCHEMA.md, "Candidate files").
  Candidate run(const Case& test_case) override {
    // A case that ended the worker (no answer in time, an exit, garbage on its output) is that case's verdict;
    // the next case gets a fresh worker rather than a failure it did not earn.
    // What the case is for this worker: outside its statement, refused by name (callers that admit cases first,
    // impl/candidate_run.hpp, never get here with one); inside, the case file holds the parts it states.
    const Admission admission = admit(capabilities_, outline_of(test_case));
    if (!admission.admitted()) throw Unsupported(name_, admission.reason());
    const golden::CaseFileParts parts{.tensor_parallel = test_case.plan.tp_size == 1 || admission.per_rank_gradients,
                                      .decode = !admission.parts_not_stated.contains("decode"),
                                      .context_parallel = admission.context_parallel};
    // The case as a case file (a golden without /expected): a worker never sees the answers. Its candidate is
    // read by the names the case's geometry gives: attncheck computes nothing for a worker's case.
    std::error_code ignored;
    std::string candidate_path;         // as attncheck reads it (through the folder's descriptor)
    std::string worker_candidate_path;  // as the worker was told to write it
    WorkerLine reply;
    // A worker that ended by itself between cases cannot be told apart, in time, from one about to read the
    // next request: whatever attncheck polls first, the worker may exit a moment later. What decides is
    // whether the request was read: written into a pipe nobody reads (EPIPE), or still whole in the pipe when
    // the worker's output closed, it never was, and the case goes to a fresh worker, once. A fresh worker that
    // does the same has failed the case.
    for (int attempt = 0;; ++attempt) {
      if (session_ && !session_->process.stopped() && unread_.empty() && output_hung_up()) session_->process.stop();
      if (!session_ || session_->process.stopped()) {  // empty after a restart that could not even fork
        if (const std::string problem = start(); !problem.empty()) {
          throw std::runtime_error(fmt::format(
              "{}: restarted after an earlier case ended it, the worker did not greet: {}", name_, problem));
        }
      }
      // The worker is given the folder's path; attncheck itself goes through the descriptor it holds.
      const std::string case_name = fmt::format("case{}.h5", cases_);
      const std::string candidate_name = fmt::format("candidate{}.h5", cases_);
      const std::string case_path = fmt::format("{}/{}", session_->folder.path(), case_name);
      worker_candidate_path = fmt::format("{}/{}", session_->folder.path(), candidate_name);
      candidate_path = session_->folder.inside(candidate_name);
      ++cases_;
      try {
        golden::write_case(session_->folder.inside(case_name), test_case, name_, parts);
      } catch (const InputError& error) {
        // attncheck's own failure (the disk full, the folder changed under it), never the worker's answer:
        // an internal error naming the path (exit 3), not a case the worker failed.
        session_->process.stop();
        throw InternalFault(fmt::format("{}: attncheck cannot write the case file {} for the worker: {}", name_,
                                        case_path, error.what()));
      }
      std::filesystem::remove_all(candidate_path, ignored);
      const std::string request = fmt::format("run {} {}\n", case_path, worker_candidate_path);
      const int write_error = send(request);
      if (write_error == 0) reply = read_line();
      std::filesystem::remove(session_->folder.inside(case_name), ignored);
      const bool never_read =
          write_error != 0 || (reply.end == WorkerLine::End::closed &&
                               unread_input_bytes() == static_cast<std::int64_t>(request.size()));
      if (never_read && attempt == 0) {
        session_->process.stop();
        continue;
      }
      if (write_error != 0) {
        throw ended_without_answer(fmt::format("stopped reading its input ({}): it ", std::strerror(write_error)));
      }
      break;
    }
    if (reply.end == WorkerLine::End::timed_out) {
      session_->process.stop();  // a late reply would be taken for the next case's
      throw NoAnswer(name_, timeout_seconds_, "ATTNCHECK_WORKER_TIMEOUT");
    }
    if (reply.end == WorkerLine::End::closed) throw ended_without_answer("");
    if (reply.text.starts_with("unsupported")) {
      throw Unsupported(name_, echoable(std::string_view(reply.text).substr(std::min<std::size_t>(12, reply.text.size())),
                                        reply.cut));
    }
    if (reply.text.starts_with("error")) throw std::runtime_error(fmt::format("{}: {}", name_, echoable(reply.text, reply.cut)));
    if (reply.text != "ok" || reply.cut != 0) {
      // Out of step with the protocol (a stray line before its answer?): its next lines would be taken for the
      // next case's replies, one case late. It is stopped; the next case starts a fresh one.
      session_->process.stop();
      throw std::runtime_error(fmt::format("{}: the worker replied '{}', which is not ok, unsupported REASON or error MESSAGE",
                                           name_, echoable(reply.text, reply.cut)));
    }
    golden::Candidate candidate = [&] {
      try {
        return read_worker_candidate(candidate_path, candidate_names(test_case, parts), name_);
      } catch (...) {
        std::filesystem::remove_all(candidate_path, ignored);
        throw;
      }
    }();
    std::filesystem::remove(candidate_path, ignored);
    // The candidate file declares its precision contract (SCHEMA.md): the worker is judged by it, as
    // `attncheck compare` judges the same file.
    Candidate answer{.precision = candidate.precision, .rope_angles = candidate.rope_angles};
    // One rule with `attncheck compare` (SCHEMA.md, "Candidate files"): the candidate's /result@tp_size
    // decides whether its per-rank gradients are checked — 1: excused; absent or the case's tp_size:
    // checked; anything else: a wrong TP layout, a failure.
    const std::int64_t case_tp = parts.tensor_parallel ? test_case.plan.tp_size : 1;  // as the case file has it
    if (candidate.tp_size && *candidate.tp_size != 1 && *candidate.tp_size != case_tp) {
      throw std::runtime_error(fmt::format("{}: its candidate declares tp_size {} for a case of tp_size {}", name_,
                                           *candidate.tp_size, case_tp));
    }
    answer.sharded = case_tp > 1 && candidate.tp_size.value_or(case_tp) == case_tp;
    // Its per-rank gradients are held as its /result@tp_convention says (the oracle's are regrouped to
    // it); a convention that cannot partition this case's plan is a candidate that disagrees with itself.
    answer.tp_convention = candidate.tp_convention;
    // read_candidate refused malformed parts, `out`, and parts also supplied; the reasons are the
    // worker's text, repeated in reports: bounded and escaped.
    for (auto& [part, reason] : candidate.declined) reason = echoable(reason);
    answer.declined = std::move(candidate.declined);
    if (answer.sharded) {
      if (const std::string problem = partition_problem(test_case.plan, answer.tp_convention); !problem.empty()) {
        throw std::runtime_error(fmt::format("{}: its candidate declares tp_convention {}, which {}", name_,
                                             to_string(answer.tp_convention), problem));
      }
    }
    answer.tensors = std::move(candidate.tensors);
    return answer;
  }

 private:
  // Whether the worker's output is at its end now (POLLHUP with nothing left to read): it has exited.
  bool output_hung_up() const {
    pollfd descriptor{.fd = session_->process.output(), .events = POLLIN, .revents = 0};
    while (poll(&descriptor, 1, 0) < 0) {
      if (errno != EINTR) return false;
    }
    return (descriptor.revents & POLLHUP) != 0 && (descriptor.revents & POLLIN) == 0;
  }

  // Starts the worker (a fresh one after a stop) and reads its greeting: "" when it greets with protocol 1,
  // else what it printed instead (the worker is then stopped). Its description is informational only.
  std::string start() {
    session_.reset();  // the old tree ended, its folder removed, before another starts
    session_.emplace(command_);
    line_.clear();
    line_cut_ = 0;
    unread_.clear();
    const WorkerLine greeting = read_line();
    const int protocol = greeting.end == WorkerLine::End::line ? greeting_protocol(greeting.text) : 0;
    if (protocol != 0) {
      if (protocol == 1) {
        // A restarted worker speaks as it did at first: one that stated capabilities cannot drop them silently.
        return statement_read_ ? "it greeted with protocol 1 when restarted, having stated its capabilities at first"
                               : "";
      }
      std::string problem = read_statement();
      if (!problem.empty()) session_->process.stop();
      return problem;
    }
    std::string printed;
    if (greeting.end == WorkerLine::End::line) {
      printed = fmt::format("it printed '{}'", echoable(greeting.text, greeting.cut));
    } else if (greeting.end == WorkerLine::End::timed_out) {
      printed = fmt::format("it printed nothing within {} s", timeout_seconds_);
    } else {
      printed = fmt::format("it printed nothing and closed its output ({})", describe(session_->process.stop()));
    }
    session_->process.stop();
    return printed;
  }

  // Protocol 2: the line after the greeting, "supports JSON" (core/capabilities/capabilities_json.hpp), read into
  // capabilities_; "" when it is one, else what is wrong. A worker restarted after a case ended it must state
  // what it stated at first.
  std::string read_statement() {
    const WorkerLine line = read_line();
    if (line.end == WorkerLine::End::timed_out) {
      return fmt::format("it greeted with protocol 2 but printed no 'supports' line within {} s", timeout_seconds_);
    }
    if (line.end == WorkerLine::End::closed) return "it greeted with protocol 2, then closed its output";
    constexpr std::string_view kSupports = "supports ";
    if (line.cut != 0 || !line.text.starts_with(kSupports)) {
      return fmt::format("it greeted with protocol 2, so its next line must be 'supports JSON', not '{}'",
                         echoable(line.text, line.cut));
    }
    Capabilities stated;
    try {
      stated = parse_capabilities_text(std::string_view(line.text).substr(kSupports.size()),
                                       fmt::format("{}'s supports line", name_));
    } catch (const InputError& error) {
      std::string problems;
      for (const Violation& violation : error.violations()) {
        problems += (problems.empty() ? "" : "; ") + to_string(violation);
      }
      return echoable(fmt::format("its supports line is not a statement of capabilities: {}", problems));
    }
    if (statement_read_ && !(stated == capabilities_)) {
      return "it stated other capabilities when restarted than at first";
    }
    capabilities_ = std::move(stated);
    statement_read_ = true;
    return "";
  }

  // The failure of a worker whose output closed before it answered (or that stopped reading its
  // input), with how it ended; the worker's whole tree has been ended.
  std::runtime_error ended_without_answer(const std::string& what_happened) {
    const WorkerEnd end = session_->process.stop();
    if (end.known && end.ended_by_itself) {
      return std::runtime_error(fmt::format("{}: the worker {}exited without answering ({})", name_, what_happened,
                                            describe(end)));
    }
    return std::runtime_error(
        fmt::format("{}: the worker {}closed its output without answering ({})", name_, what_happened, describe(end)));
  }

  // Writes a request line: 0, or the errno that stopped it (EPIPE: nobody reads the worker's input).
  int send(const std::string& line) {
    std::size_t written = 0;
    while (written < line.size()) {
      const ssize_t n = write(session_->process.input(), line.data() + written, line.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : EPIPE;
      written += static_cast<std::size_t>(n);
    }
    return 0;
  }

  // Bytes written to the worker's input that nobody has read (the pipe keeps them while attncheck holds its
  // end); -1 when the pipe cannot say.
  std::int64_t unread_input_bytes() const {
    int count = 0;
    if (ioctl(session_->process.input(), FIONREAD, &count) != 0) return -1;
    return count;
  }

  // Adds bytes to the line being read, up to its newline (which is consumed from bytes): at most
  // kLongestWorkerLine of them kept, the rest counted. True when the line is complete.
  bool take(std::string_view& bytes) {
    const std::size_t newline = bytes.find('\n');
    const std::string_view part = bytes.substr(0, newline);
    const std::size_t room = kLongestWorkerLine - std::min(kLongestWorkerLine, line_.size());
    line_.append(part.substr(0, room));
    line_cut_ += part.size() - std::min(room, part.size());
    if (newline == std::string_view::npos) {
      bytes = {};
      return false;
    }
    bytes.remove_prefix(newline + 1);
    return true;
  }

  WorkerLine finished_line() {
    WorkerLine line{.end = WorkerLine::End::line, .text = std::move(line_), .cut = line_cut_};
    line_.clear();
    line_cut_ = 0;
    if (line.cut == 0 && !line.text.empty() && line.text.back() == '\r') line.text.pop_back();
    return line;
  }

  // The next line from the worker within ATTNCHECK_WORKER_TIMEOUT seconds. Memory stays bounded
  // whatever the worker sends: a line's bytes beyond kLongestWorkerLine are read and counted, not kept.
  WorkerLine read_line() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds_);
    if (!unread_.empty()) {  // what came after the previous line's newline
      std::string_view bytes = unread_;
      if (take(bytes)) {
        unread_ = std::string(bytes);
        return finished_line();
      }
      unread_.clear();
    }
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return {.end = WorkerLine::End::timed_out};
      pollfd descriptor{.fd = session_->process.output(), .events = POLLIN, .revents = 0};
      const int ready = poll(&descriptor, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return {.end = WorkerLine::End::closed};
      if (ready == 0) return {.end = WorkerLine::End::timed_out};
      char chunk[65536];
      const ssize_t n = read(session_->process.output(), chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return {.end = WorkerLine::End::closed};
      std::string_view bytes(chunk, static_cast<std::size_t>(n));
      if (take(bytes)) {
        unread_ = std::string(bytes);
        return finished_line();
      }
    }
  }

  std::string command_;
  std::string name_;
  int timeout_seconds_;  // ATTNCHECK_WORKER_TIMEOUT, read once
  std::optional<WorkerSession> session_;  // the running worker (a new one after a case ended the last)
  Capabilities capabilities_;             // protocol 2's statement; everything, unstated, for protocol 1
  bool statement_read_ = false;
  std::string line_;           // the line being read: its first kLongestWorkerLine bytes
  std::size_t line_cut_ = 0;   // and how many more it had
  std::string unread_;         // bytes read after the last line's newline
  std::int64_t cases_ = 0;
};

}  // namespace

std::unique_ptr<impl::Implementation> open_worker(const std::string& command) {
  return std::make_unique<Worker>(command);
}

}  // namespace attncheck::exec_worker
