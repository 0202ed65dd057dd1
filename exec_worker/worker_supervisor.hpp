// Runs an exec: worker's command so that its whole process tree ends with it, whatever happens to
// attncheck. attncheck forks a small supervisor process, which makes itself a child subreaper
// (PR_SET_CHILD_SUBREAPER) and forks the worker (/bin/sh -c COMMAND, in a process group of its own, its
// stdin and stdout the pipes returned here, its stderr attncheck's). Every process the worker's tree
// orphans (a daemon, a child that called setsid()) is re-parented to the supervisor. The supervisor
// ends the tree when
//   - the worker exits: at once (its helpers are orphans now);
//   - attncheck stops it (stop()), or attncheck ends in any way, a SIGKILL included: it watches a
//     "lifeline" pipe whose write end only attncheck holds, and reads EOF then; the worker's stdin
//     reaches EOF at the same moment; the worker gets kGraceSeconds to exit on its own.
// Ending the tree: SIGKILL to the worker's process group, then, repeatedly, to every child the
// supervisor has (each orphan re-parented to it, and that child's process group), reaping them, until
// it has no child left (waitpid: ECHILD) or kCleanupSeconds have passed; then it removes the worker's
// temporary folder (so that a killed attncheck leaves no case files behind either), reports how the
// worker ended on a pipe and exits, and attncheck reaps it.
//
// attncheck is multi-threaded (run --jobs, OpenMP), so the forked supervisor and worker call only
// async-signal-safe functions: raw system calls and stack buffers, everything allocated before fork().
// The supervisor ignores the terminal's signals (Ctrl-C reaches attncheck's process group, which it is
// in) and ends only by its lifeline; the worker gets SIGKILL if the supervisor itself is killed
// (PR_SET_PDEATHSIG), its signal dispositions and mask reset to the defaults.
//
// Not covered: a process the worker has started outside its own tree (through a daemon such as
// systemd-run, at, a container runtime or ssh), a process that runs as another user (a setuid program:
// SIGKILL is refused; after kCleanupSeconds the supervisor gives up, and says so), one stuck in
// uninterruptible sleep beyond kCleanupSeconds, and a process that kills the supervisor with SIGKILL
// (then only the worker itself, by PR_SET_PDEATHSIG, is ended; its orphans go to init).
#pragma once

#include <sys/types.h>

#include <string>

namespace attncheck::exec_worker {

// Seconds the worker has to exit on its own once its stdin is closed.
inline constexpr int kGraceSeconds = 5;
// Seconds the supervisor keeps killing and reaping the worker's tree before giving up.
inline constexpr int kCleanupSeconds = 10;
// Levels of sub-folders the supervisor removes in the worker's folder (attncheck's own removal, after a
// clean stop, has no such bound).
inline constexpr int kFolderDepth = 8;

// How the worker ended, as its supervisor reported it.
struct WorkerEnd {
  bool known = false;             // false: the supervisor reported nothing (killed, or still cleaning up)
  int wait_status = 0;            // the worker's status, as waitpid() gives it
  bool ended_by_itself = false;   // it exited (or a signal not the supervisor's ended it) before the kill
  bool survivors = false;         // processes of its tree were still there after kCleanupSeconds
};

// "exit status 3", "killed by signal 11: Segmentation fault", "it was still running 5 s after its input
// closed, and was killed" or "its supervisor did not report how it ended", plus a note on survivors.
std::string describe(const WorkerEnd& end);

class SupervisedWorker {
 public:
  // Starts the supervisor and, through it, `/bin/sh -c command`; folder: the worker's temporary folder,
  // which the supervisor removes (its contents to kFolderDepth levels) once the tree has ended.
  // std::runtime_error when pipes or fork() fail.
  SupervisedWorker(const std::string& command, const std::string& folder);
  ~SupervisedWorker();
  SupervisedWorker(const SupervisedWorker&) = delete;
  SupervisedWorker& operator=(const SupervisedWorker&) = delete;

  int input() const { return input_; }    // the worker's stdin (write to it); -1 once stopped
  int output() const { return output_; }  // the worker's stdout (read from it); -1 once stopped
  bool stopped() const { return supervisor_ < 0; }

  // Closes the worker's stdin and the lifeline, so that the supervisor ends the tree (after the grace
  // period), and reaps the supervisor, waiting at most kGraceSeconds + kCleanupSeconds + 5 s. Returns how
  // the worker ended; the result of the first call again on later calls.
  WorkerEnd stop();

 private:
  pid_t supervisor_ = -1;
  int input_ = -1;
  int output_ = -1;
  int lifeline_ = -1;  // attncheck's write end; closing it (or attncheck's end) tells the supervisor
  int report_ = -1;    // read end: the supervisor's report of how the worker ended
  WorkerEnd end_;
};

}  // namespace attncheck::exec_worker
