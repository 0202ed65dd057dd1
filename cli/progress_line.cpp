#include "cli/progress_line.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace attncheck::cli {

ProgressLine::ProgressLine(std::ostream& terminal, bool enabled, int total, std::string unit)
    : terminal_(terminal), enabled_(enabled), total_(total), unit_(std::move(unit)) {
  if (enabled_) thread_ = std::thread([this] { ticker(); });
}

ProgressLine::~ProgressLine() {
  stop();
}

void ProgressLine::stop() {
  if (!enabled_ || !thread_.joinable()) return;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  thread_.join();
  const std::lock_guard lock(mutex_);
  clear_locked();
  status_.clear();
}

void ProgressLine::status(std::string text) {
  if (!enabled_) return;
  const std::lock_guard lock(mutex_);
  if (stopping_) return;
  status_ = std::move(text);
  status_started_ = std::chrono::steady_clock::now();
  draw_locked();
}

void ProgressLine::step_done() {
  const std::lock_guard lock(mutex_);
  ++done_;
}

void ProgressLine::print(std::ostream& out, const std::string& text) {
  const std::lock_guard lock(mutex_);
  if (enabled_) clear_locked();
  out << text << std::flush;
  if (enabled_ && !status_.empty()) draw_locked();
}

void ProgressLine::clear_locked() {
  terminal_ << "\r\033[K" << std::flush;
}

void ProgressLine::draw_locked() {
  const auto now = std::chrono::steady_clock::now();
  const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(now - started_).count();
  const auto in_status = std::chrono::duration_cast<std::chrono::seconds>(now - status_started_).count();
  std::string line = fmt::format("[{}/{} {}, {}:{:02}] {} ({} s)", done_, total_, unit_, elapsed / 60, elapsed % 60,
                                 status_, in_status);
  // One terminal line: a wrapped line could not be erased with \r.
  constexpr std::size_t kWidth = 118;
  if (line.size() > kWidth) line = line.substr(0, kWidth - 3) + "...";
  terminal_ << "\r\033[K" << line << std::flush;
}

void ProgressLine::ticker() {
  std::unique_lock lock(mutex_);
  while (!stop_signal_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
    if (!status_.empty()) draw_locked();
  }
}

bool terminal_progress() {
  const char* setting = std::getenv("ATTNCHECK_PROGRESS");
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return false;
  return isatty(STDERR_FILENO) == 1;
}

}  // namespace attncheck::cli
