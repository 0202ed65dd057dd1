// A live progress line on a terminal, for commands a person waits on (`attncheck run`, `golden check`):
// "[12/65 pairs, 0:23] torch-cpu-fp32 on pythia-410m_tp2_seq2048.h5: yardstick (4 s)", redrawn every
// second by a background thread so that a long pair still shows it is alive. Written to stderr and only
// when stderr is a terminal: piped or logged output gets the commands' own lines (flushed as each pair
// ends), never carriage returns. Lines of the command's own go through print().
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace attncheck::cli {

class ProgressLine {
 public:
  // enabled: whether to draw at all (terminal_progress() for stderr); total: the number of steps.
  ProgressLine(std::ostream& terminal, bool enabled, int total, std::string unit);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // What is running now (e.g. "torch-cpu-fp32 on x.h5: running"); its own clock starts.
  void status(std::string text);
  // Stops redrawing and erases the line (the destructor does it too): before a command's last lines.
  void stop();
  // One step finished.
  void step_done();
  // Prints `text` to `out` (flushed) with the line erased first and redrawn after, so that the two never
  // mix on a terminal; without a progress line, just prints and flushes.
  void print(std::ostream& out, const std::string& text);

 private:
  void draw_locked();
  void clear_locked();
  void ticker();

  std::ostream& terminal_;
  const bool enabled_;
  const int total_;
  const std::string unit_;
  int done_ = 0;
  std::string status_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point status_started_ = started_;
  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::thread thread_;
};

// Whether stderr is a terminal (and ATTNCHECK_PROGRESS is not 0).
bool terminal_progress();

}  // namespace attncheck::cli
