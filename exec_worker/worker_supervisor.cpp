// The exec: worker's supervisor (exec_worker/worker_supervisor.hpp). Everything between fork() and exec() or
// _exit() is async-signal-safe: raw system calls, stack buffers, nothing allocated, no stdio.
#include "exec_worker/worker_supervisor.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace attncheck::exec_worker {

namespace {

// The supervisor's descriptors after it has arranged them (0 and 1 become the worker's stdin and stdout,
// 2 stays attncheck's stderr, for the worker's logs).
constexpr int kLifelineFd = 3;
constexpr int kReportFd = 4;

// What the supervisor writes on its report pipe before it exits (one write, below PIPE_BUF: atomic).
struct Report {
  std::uint32_t magic;
  std::int32_t wait_status;
  std::uint32_t flags;
};
constexpr std::uint32_t kReportMagic = 0x61747763;  // "atwc"
constexpr std::uint32_t kWorkerReaped = 1;          // wait_status is the worker's
constexpr std::uint32_t kEndedByItself = 2;
constexpr std::uint32_t kSurvivors = 4;

// ---- async-signal-safe helpers, for the forked processes ----

void write_text(int fd, const char* text) {
  const std::size_t length = std::strlen(text);  // strlen is async-signal-safe (POSIX 2016)
  std::size_t written = 0;
  while (written < length) {
    const ssize_t n = write(fd, text + written, length - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<std::size_t>(n);
  }
}

// Appends the decimal digits of value (>= 0) at out; returns the end.
char* append_number(char* out, long value) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  while (count > 0) *out++ = digits[--count];
  return out;
}

char* append_text(char* out, const char* text) {
  while (*text != '\0') *out++ = *text++;
  return out;
}

long milliseconds_now() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

void sleep_milliseconds(int milliseconds) {
  poll(nullptr, 0, milliseconds);
}

// Closes every descriptor from `first` up: close_range(2) where the kernel has it (5.9+), else one by one
// up to the descriptor limit.
void close_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0U) == 0) return;
#endif
  rlimit limit{};
  long highest = 65536;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    highest = static_cast<long>(limit.rlim_cur);
  }
  if (highest > (1L << 20)) highest = 1L << 20;
  for (long fd = first; fd < highest; ++fd) close(static_cast<int>(fd));
}

void set_disposition(int signal_number, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
}

void unblock_all_signals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// SIGKILL to a child of the supervisor and to its process group: the pid cannot have been reused (the
// child is not reaped yet), nor can its group id while it exists.
void kill_child(long pid) {
  if (pid <= 1) return;
  kill(static_cast<pid_t>(-pid), SIGKILL);
  kill(static_cast<pid_t>(pid), SIGKILL);
}

// Kills every child listed in /proc/SELF/task/SELF/children (the supervisor has one thread). False when
// the file cannot be opened (a kernel without CONFIG_PROC_CHILDREN).
bool kill_listed_children(pid_t self) {
  char path[96];
  char* end = append_text(path, "/proc/");
  end = append_number(end, self);
  end = append_text(end, "/task/");
  end = append_number(end, self);
  end = append_text(end, "/children");
  *end = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  long number = 0;
  bool in_number = false;
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] >= '0' && buffer[i] <= '9') {
        number = number * 10 + (buffer[i] - '0');
        in_number = true;
      } else {
        if (in_number) kill_child(number);
        number = 0;
        in_number = false;
      }
    }
  }
  if (in_number) kill_child(number);
  close(fd);
  return true;
}

// The parent pid field of /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces and ')',
// so the field is found after the last ')'), or -1.
long parent_of(const char* pid_text) {
  char path[64];
  char* end = append_text(path, "/proc/");
  end = append_text(end, pid_text);
  end = append_text(end, "/stat");
  *end = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char stat[1024];
  ssize_t n;
  do {
    n = read(fd, stat, sizeof stat - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return -1;
  stat[n] = '\0';
  const char* close_paren = nullptr;
  for (const char* c = stat; *c != '\0'; ++c) {
    if (*c == ')') close_paren = c;
  }
  if (close_paren == nullptr) return -1;
  const char* c = close_paren + 1;
  while (*c == ' ') ++c;
  while (*c != ' ' && *c != '\0') ++c;  // the state
  while (*c == ' ') ++c;
  long parent = 0;
  bool any = false;
  while (*c >= '0' && *c <= '9') parent = parent * 10 + (*c++ - '0'), any = true;
  return any ? parent : -1;
}

// Without a children file: every process in /proc whose parent is the supervisor.
void kill_children_by_scanning(pid_t self) {
  const int directory = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory < 0) return;
  alignas(8) char buffer[8192];
  while (true) {
    const long n = syscall(SYS_getdents64, directory, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long offset = 0; offset < n;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
      unsigned short record_length;
      std::memcpy(&record_length, buffer + offset + 16, sizeof record_length);
      const char* name = buffer + offset + 19;
      offset += record_length;
      if (name[0] < '0' || name[0] > '9') continue;
      if (parent_of(name) != self) continue;
      long pid = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
      kill_child(pid);
    }
  }
  close(directory);
}

// Removes everything in the folder open as directory_fd, then, where depth allows, its sub-folders'
// contents (never following a symbolic link: each is unlinked itself). Best effort: what it cannot
// remove stays, for attncheck's own removal.
void remove_contents(int directory_fd, int depth) {
  alignas(8) char buffer[4096];
  bool removed_any = true;
  // Reading while unlinking may skip entries: read again until a pass removes nothing.
  while (removed_any) {
    removed_any = false;
    lseek(directory_fd, 0, SEEK_SET);
    while (true) {
      const long n = syscall(SYS_getdents64, directory_fd, buffer, sizeof buffer);
      if (n <= 0) break;
      for (long offset = 0; offset < n;) {
        unsigned short record_length;
        std::memcpy(&record_length, buffer + offset + 16, sizeof record_length);
        const unsigned char type = static_cast<unsigned char>(buffer[offset + 18]);
        const char* name = buffer + offset + 19;
        offset += record_length;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (type == DT_DIR && depth > 0) {
          const int child = openat(directory_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (child >= 0) {
            remove_contents(child, depth - 1);
            close(child);
          }
        }
        if (unlinkat(directory_fd, name, type == DT_DIR ? AT_REMOVEDIR : 0) == 0 ||
            (type == DT_UNKNOWN && unlinkat(directory_fd, name, AT_REMOVEDIR) == 0)) {
          removed_any = true;
        }
      }
    }
  }
}

void remove_folder(const char* folder) {
  const int directory_fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (directory_fd < 0) return;
  remove_contents(directory_fd, kFolderDepth);
  close(directory_fd);
  rmdir(folder);
}

// Reaps every child that has ended; records the worker's status when it is among them. True when the
// supervisor has no child left.
bool reap_ended(pid_t worker, int& worker_status, bool& worker_reaped) {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == worker) worker_status = status, worker_reaped = true;
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    return pid < 0 && errno == ECHILD;
  }
}

// While the worker runs: reaps the orphans of its tree that have ended (so that they do not pile up as
// zombies), never the worker itself. True when the worker has ended (it is left unreaped: its process
// group id stays reserved for the kill).
bool worker_ended_reaping_others(pid_t worker) {
  while (true) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (info.si_pid == 0) return false;
    if (info.si_pid == worker) return true;
    waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

// The worker, in the forked child of the supervisor: its own process group, SIGKILL if the supervisor
// dies, default signal handling, no descriptor but 0, 1 and 2.
[[noreturn]] void exec_worker(const char* command, pid_t supervisor) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != supervisor) _exit(127);  // the supervisor died before the line above
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    if (signal_number != SIGKILL && signal_number != SIGSTOP) set_disposition(signal_number, SIG_DFL);
  }
  unblock_all_signals();
  close_from(3);
  execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
  write_text(2, "attncheck: cannot run /bin/sh for the exec: worker\n");
  _exit(127);
}

// The supervisor, in attncheck's forked child. Its descriptors: 0 worker's stdin (read end), 1 worker's
// stdout (write end), 2 attncheck's stderr, 3 the lifeline (read end), 4 the report pipe (write end).
[[noreturn]] void supervise(const char* command, const char* folder) {
  for (const int signal_number : {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE, SIGUSR1,
                                  SIGUSR2, SIGALRM}) {
    set_disposition(signal_number, SIG_IGN);  // it ends by its lifeline only
  }
  set_disposition(SIGCHLD, SIG_DFL);  // never SIG_IGN: that would reap children before waitpid sees them
  unblock_all_signals();
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    write_text(2, "attncheck: warning: the exec: worker's supervisor cannot be a child subreaper; processes the "
                  "worker orphans may outlive it\n");
  }
  const pid_t self = getpid();
  const pid_t worker = fork();
  if (worker == 0) exec_worker(command, self);
  close(0);  // only the worker holds its pipes' ends now: its exit is EOF for attncheck
  close(1);
  Report report{.magic = kReportMagic, .wait_status = 0, .flags = 0};
  if (worker < 0) {
    write_text(2, "attncheck: the exec: worker's supervisor cannot fork\n");
    write(kReportFd, &report, sizeof report);
    _exit(0);
  }
  setpgid(worker, worker);  // also here, so that the group exists before the supervisor goes on

  // Until the worker ends or the lifeline closes (attncheck stopped it, or attncheck is gone).
  bool ended_by_itself = false;
  while (true) {
    if (worker_ended_reaping_others(worker)) {
      ended_by_itself = true;
      break;
    }
    pollfd lifeline{.fd = kLifelineFd, .events = POLLIN, .revents = 0};
    if (poll(&lifeline, 1, 100) > 0) {
      char ignored[64];
      const ssize_t n = read(kLifelineFd, ignored, sizeof ignored);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;  // EOF: stop
    }
  }
  // The grace period: its stdin is at EOF as well; it may exit on its own.
  if (!ended_by_itself) {
    const long grace_end = milliseconds_now() + kGraceSeconds * 1000L;
    while (milliseconds_now() < grace_end) {
      if (worker_ended_reaping_others(worker)) {
        ended_by_itself = true;
        break;
      }
      sleep_milliseconds(20);
    }
  }
  // Ending the tree: the worker's group (the worker is still unreaped, so its group id is not reused),
  // then every child the supervisor has, again and again (killing one re-parents its children here),
  // until none is left.
  kill(-worker, SIGKILL);
  kill(worker, SIGKILL);
  int worker_status = 0;
  bool worker_reaped = false;
  bool children_file = true;
  const long cleanup_end = milliseconds_now() + kCleanupSeconds * 1000L;
  while (true) {
    if (children_file) children_file = kill_listed_children(self);
    if (!children_file) kill_children_by_scanning(self);
    if (reap_ended(worker, worker_status, worker_reaped)) break;
    if (milliseconds_now() >= cleanup_end) {
      report.flags |= kSurvivors;
      break;
    }
    sleep_milliseconds(10);
  }
  if (worker_reaped) report.flags |= kWorkerReaped, report.wait_status = worker_status;
  if (ended_by_itself) report.flags |= kEndedByItself;
  // A worker that ended by itself may have ended between cases: attncheck may be writing the next case file
  // into the folder right now, and learns of the end only when it sends the case. So the folder goes only
  // once attncheck lets go (the lifeline closes, by stop() or by attncheck's end), never under its feet.
  while (ended_by_itself) {
    pollfd lifeline{.fd = kLifelineFd, .events = POLLIN, .revents = 0};
    if (poll(&lifeline, 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    char ignored[64];
    const ssize_t n = read(kLifelineFd, ignored, sizeof ignored);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;  // EOF
  }
  remove_folder(folder);  // nothing of the tree is left to write into it
  write(kReportFd, &report, sizeof report);
  _exit(0);
}

// Moves the four descriptors the supervisor keeps to 0, 1, 3 and 4 (through copies at 5 and above, so
// that none overwrites another) and closes every other one but 2.
void arrange_supervisor_descriptors(int worker_stdin, int worker_stdout, int lifeline, int report) {
  const int copies[4] = {fcntl(worker_stdin, F_DUPFD, 5), fcntl(worker_stdout, F_DUPFD, 5),
                         fcntl(lifeline, F_DUPFD, 5), fcntl(report, F_DUPFD, 5)};
  for (const int copy : copies) {
    if (copy < 0) _exit(126);
  }
  dup2(copies[0], 0);
  dup2(copies[1], 1);
  dup2(copies[2], kLifelineFd);
  dup2(copies[3], kReportFd);
  close_from(5);
}

void close_if_open(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::string describe(const WorkerEnd& end) {
  std::string text;
  if (!end.known) {
    text = "its supervisor did not report how it ended";
  } else if (!end.ended_by_itself) {
    text = fmt::format("it was still running {} s after its input closed, and was killed", kGraceSeconds);
  } else if (WIFEXITED(end.wait_status)) {
    text = fmt::format("exit status {}", WEXITSTATUS(end.wait_status));
  } else if (WIFSIGNALED(end.wait_status)) {
    text = fmt::format("killed by signal {}: {}", WTERMSIG(end.wait_status), strsignal(WTERMSIG(end.wait_status)));
  } else {
    text = fmt::format("wait status {}", end.wait_status);
  }
  if (end.survivors) {
    text += fmt::format("; some of its processes could not be ended within {} s (another user's, or stuck)",
                        kCleanupSeconds);
  }
  return text;
}

SupervisedWorker::SupervisedWorker(const std::string& command, const std::string& folder) {
  int to_worker[2] = {-1, -1};
  int from_worker[2] = {-1, -1};
  int lifeline[2] = {-1, -1};
  int report[2] = {-1, -1};
  // O_CLOEXEC: no other program attncheck runs inherits them (the supervisor closes its copies itself).
  if (pipe2(to_worker, O_CLOEXEC) != 0 || pipe2(from_worker, O_CLOEXEC) != 0 || pipe2(lifeline, O_CLOEXEC) != 0 ||
      pipe2(report, O_CLOEXEC) != 0) {
    const std::string reason = std::strerror(errno);
    for (int* pipe_ends : {to_worker, from_worker, lifeline, report}) {
      close_if_open(pipe_ends[0]);
      close_if_open(pipe_ends[1]);
    }
    throw std::runtime_error(fmt::format("cannot create pipes for the exec: worker ({})", reason));
  }
  const char* command_text = command.c_str();  // read by the child: nothing is allocated after fork()
  const char* folder_text = folder.c_str();
  const pid_t pid = fork();
  if (pid == 0) {
    arrange_supervisor_descriptors(to_worker[0], from_worker[1], lifeline[0], report[1]);
    supervise(command_text, folder_text);
  }
  close(to_worker[0]);
  close(from_worker[1]);
  close(lifeline[0]);
  close(report[1]);
  input_ = to_worker[1];
  output_ = from_worker[0];
  lifeline_ = lifeline[1];
  report_ = report[0];
  if (pid < 0) {
    const std::string reason = std::strerror(errno);
    for (int* fd : {&input_, &output_, &lifeline_, &report_}) close_if_open(*fd);
    throw std::runtime_error(fmt::format("cannot start the exec: worker: fork() failed ({})", reason));
  }
  supervisor_ = pid;
}

SupervisedWorker::~SupervisedWorker() {
  stop();
}

WorkerEnd SupervisedWorker::stop() {
  if (supervisor_ < 0) return end_;
  close_if_open(input_);
  close_if_open(output_);
  close_if_open(lifeline_);
  // The report arrives just before the supervisor exits; then the pipe reads EOF.
  const auto wait_limit = std::chrono::seconds(kGraceSeconds + kCleanupSeconds + 5);
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  Report report{};
  std::size_t received = 0;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd descriptor{.fd = report_, .events = POLLIN, .revents = 0};
    const int ready = poll(&descriptor, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = read(report_, reinterpret_cast<char*>(&report) + received, sizeof report - received);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the supervisor is gone
    received += static_cast<std::size_t>(n);
    if (received == sizeof report) break;
  }
  close_if_open(report_);
  if (received == sizeof report && report.magic == kReportMagic) {
    // It writes its report as its last act: reaping it now does not wait.
    while (waitpid(supervisor_, nullptr, 0) < 0 && errno == EINTR) {
    }
    end_ = {.known = (report.flags & kWorkerReaped) != 0,
            .wait_status = report.wait_status,
            .ended_by_itself = (report.flags & kEndedByItself) != 0,
            .survivors = (report.flags & kSurvivors) != 0};
  } else {
    // No report (the supervisor was killed, or is still cleaning up past the limit): reap it if it has
    // exited; otherwise it finishes on its own and is re-parented when attncheck exits.
    waitpid(supervisor_, nullptr, WNOHANG);
  }
  supervisor_ = -1;
  return end_;
}

}  // namespace attncheck::exec_worker
