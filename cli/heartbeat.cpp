#include "cli/heartbeat.hpp"

#include <utility>

#include <fmt/format.h>

namespace attncheck::cli {

Heartbeat::Heartbeat(std::ostream& out, std::string what, std::chrono::milliseconds period)
    : out_(out), what_(std::move(what)), period_(period) {
  thread_ = std::thread([this] {
    const auto started = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    while (!stop_signal_.wait_for(lock, period_, [this] { return stopping_; })) {
      const auto seconds =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
      out_ << fmt::format("{}, {}:{:02} so far\n", what_, seconds / 60, seconds % 60) << std::flush;
    }
  });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_one();
  thread_.join();
}

}  // namespace attncheck::cli
