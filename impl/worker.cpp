#include "impl/worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "golden/golden_file.hpp"
#include "reference/reference.hpp"

namespace attncheck::impl {

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

// Whether a line greets with protocol 1: the words "attncheck-worker" and "1", exactly, then optionally a
// space and free text (a description; the word "sharded" among it is noted). "attncheck-worker 10" and
// "attncheck-worker 1junk" are not protocol 1.
bool is_greeting(const std::string& line) {
  constexpr std::string_view kGreeting = "attncheck-worker 1";
  return line == kGreeting || line.starts_with(std::string(kGreeting) + " ");
}

// Whether the greeting's free text holds the word "sharded".
bool greets_sharded(const std::string& line) {
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    if (word == "sharded") return true;
  }
  return false;
}

class Worker : public Implementation {
 public:
  explicit Worker(const std::string& command)
      : name_(std::string(kExecPrefix) + command), timeout_seconds_(timeout_seconds()) {
    signal(SIGPIPE, SIG_IGN);  // a dead worker is an error on write, not the end of attncheck
    char directory_template[] = "/tmp/attncheck-worker-XXXXXX";
    if (mkdtemp(directory_template) == nullptr) throw std::runtime_error("cannot create a folder in /tmp");
    directory_ = directory_template;
    int to_worker[2];
    int from_worker[2];
    if (pipe(to_worker) != 0 || pipe(from_worker) != 0) throw std::runtime_error("pipe() failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork() failed");
    if (pid_ == 0) {
      setpgid(0, 0);  // its own process group: stop() ends the worker and whatever it started
      dup2(to_worker[0], STDIN_FILENO);
      dup2(from_worker[1], STDOUT_FILENO);
      close(to_worker[0]);
      close(to_worker[1]);
      close(from_worker[0]);
      close(from_worker[1]);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid_, pid_);  // also here, so that the group exists before either side goes on
    close(to_worker[0]);
    close(from_worker[1]);
    to_worker_ = to_worker[1];
    from_worker_ = from_worker[0];
    const std::optional<std::string> greeting = read_line();
    if (!greeting || !is_greeting(*greeting)) {
      clean_up();  // the destructor does not run for a constructor that throws
      ViolationList violations;
      violations.add("--impl", name_,
                     "must start a process that first prints 'attncheck-worker 1', alone or followed by a space "
                     "and a description",
                     greeting ? fmt::format("it printed '{}'", greeting->substr(0, 200))
                              : fmt::format("it printed nothing within {} s", timeout_seconds_));
      violations.throw_if_any("not an attncheck worker");
    }
    sharded_ = greets_sharded(*greeting);  // until a candidate declares its tp_size
  }

  ~Worker() override { clean_up(); }

  // Stops the worker and removes its folder.
  void clean_up() {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  // Closes the worker's stdin (EOF: it exits), waits up to 5 s for it, then kills its process group (the
  // worker, if it is still running, and anything it started and left behind), then reaps it. The exit
  // is observed without reaping (WNOWAIT), so that the group's id cannot be reused before the kill.
  void stop() {
    if (to_worker_ >= 0) close(to_worker_);
    if (from_worker_ >= 0) close(from_worker_);
    to_worker_ = from_worker_ = -1;
    if (pid_ <= 0) return;
    for (int waited = 0; waited < 50; ++waited) {
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) break;
      usleep(100000);
    }
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  const std::string& name() const override { return name_; }
  // Asked after run(): whether this case's candidate declared per-rank gradients (see run()).
  bool sharded() const override { return sharded_; }
  // The contract its latest candidate declared (checks ask after run()): fp64 before any.
  Precision precision() const override { return precision_; }
  RopeAngles rope_angles() const override { return rope_angles_; }
  TpConvention tp_convention() const override { return tp_convention_; }
  const DeclinedParts& declined() const override { return declined_; }

  NamedTensors run(const Case& test_case) override {
    if (pid_ < 0) throw std::runtime_error(fmt::format("{}: the worker has stopped", name_));
    declined_.clear();  // this case's, once its candidate is read
    // The case as a case file (a golden without /expected): a worker never sees the answers. The
    // reference still runs here for the names and shapes the candidate is read against.
    const Result expected = reference::run_reference_tp(test_case);
    const std::string case_path = fmt::format("{}/case{}.h5", directory_, cases_);
    const std::string candidate_path = fmt::format("{}/candidate{}.h5", directory_, cases_);
    ++cases_;
    golden::write_case(case_path, test_case, name_);
    std::filesystem::remove(candidate_path);
    send(fmt::format("run {} {}\n", case_path, candidate_path));
    const std::optional<std::string> reply = read_line();
    std::filesystem::remove(case_path);
    if (!reply) {
      stop();  // a late reply would be taken for the next case's
      throw std::runtime_error(
          fmt::format("{}: the worker exited or gave no answer within {} s", name_, timeout_seconds_));
    }
    if (reply->starts_with("unsupported"))
      throw Unsupported(name_, reply->substr(std::min<std::size_t>(12, reply->size())));
    if (*reply != "ok") throw std::runtime_error(fmt::format("{}: {}", name_, *reply));
    golden::Candidate candidate = golden::read_candidate(candidate_path, named_tensors(expected));
    std::filesystem::remove(candidate_path);
    // The candidate file declares its precision contract (SCHEMA.md): the worker is judged by it, as
    // `attncheck compare` judges the same file.
    precision_ = candidate.precision;
    rope_angles_ = candidate.rope_angles;
    // One rule with `attncheck compare` (SCHEMA.md, "Candidate files"): the candidate's /result@tp_size
    // decides whether its per-rank gradients are checked — 1: excused; absent or the case's tp_size:
    // checked; anything else: a wrong TP layout, a failure.
    const std::int64_t case_tp = test_case.plan.tp_size;
    if (candidate.tp_size && *candidate.tp_size != 1 && *candidate.tp_size != case_tp) {
      throw std::runtime_error(fmt::format("{}: its candidate declares tp_size {} for a case of tp_size {}", name_,
                                           *candidate.tp_size, case_tp));
    }
    sharded_ = case_tp > 1 && candidate.tp_size.value_or(case_tp) == case_tp;
    // Its per-rank gradients are held as its /result@tp_convention says (the oracle's are regrouped to
    // it); a convention that cannot partition this case's plan is a candidate that disagrees with itself.
    tp_convention_ = candidate.tp_convention;
    declined_ = candidate.declined;  // read_candidate refused malformed parts, `out`, and parts also supplied
    if (sharded_) {
      if (const std::string problem = partition_problem(test_case.plan, tp_convention_); !problem.empty()) {
        throw std::runtime_error(fmt::format("{}: its candidate declares tp_convention {}, which {}", name_,
                                             to_string(tp_convention_), problem));
      }
    }
    return std::move(candidate.tensors);
  }

 private:
  void send(const std::string& line) {
    std::size_t written = 0;
    while (written < line.size()) {
      const ssize_t n = write(to_worker_, line.data() + written, line.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw std::runtime_error(fmt::format("{}: the worker stopped reading ({})", name_, std::strerror(errno)));
      written += static_cast<std::size_t>(n);
    }
  }

  // The next line from the worker (without the newline), or nullopt on EOF or timeout.
  std::optional<std::string> read_line() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds_);
    while (true) {
      const std::size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd descriptor{.fd = from_worker_, .events = POLLIN, .revents = 0};
      const int ready = poll(&descriptor, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(from_worker_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  std::string name_;
  int timeout_seconds_;  // ATTNCHECK_WORKER_TIMEOUT, read once
  std::string directory_;
  bool sharded_ = false;  // what its latest candidate declared (the greeting before any)
  Precision precision_ = Precision::fp64;
  RopeAngles rope_angles_ = RopeAngles::float32;
  TpConvention tp_convention_ = TpConvention::replicated_kv;
  DeclinedParts declined_;
  pid_t pid_ = -1;
  int to_worker_ = -1;
  int from_worker_ = -1;
  std::string buffer_;
  std::int64_t cases_ = 0;
};

}  // namespace

std::unique_ptr<Implementation> open_worker(const std::string& command) {
  return std::make_unique<Worker>(command);
}

}  // namespace attncheck::impl
