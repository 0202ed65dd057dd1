#include "cli/heartbeat.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "reference/run_time_estimate.hpp"

namespace attncheck::cli {

std::chrono::milliseconds heartbeat_period() {
  const char* text = std::getenv("ATTNCHECK_HEARTBEAT_SECONDS");
  if (text == nullptr) return std::chrono::seconds(30);
  const std::string_view value_text(text);
  int value = 0;
  const auto [end, error] = std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
  if (value_text.empty() || error != std::errc() || end != value_text.data() + value_text.size() || value < 1 ||
      value > 3600) {
    ViolationList violations;
    violations.add("ATTNCHECK_HEARTBEAT_SECONDS", std::string(value_text.substr(0, 100)),
                   "must be a whole number of seconds in [1, 3600]", "30 (the default, when it is unset)");
    violations.throw_if_any("invalid environment variable");
  }
  return std::chrono::seconds(value);
}

Heartbeat::Heartbeat(std::ostream& out, std::string what, std::optional<double> estimated_seconds)
    : Heartbeat(out, std::move(what), heartbeat_period(), estimated_seconds) {}

Heartbeat::Heartbeat(std::ostream& out, std::string what, std::chrono::milliseconds period,
                     std::optional<double> estimated_seconds)
    : out_(out),
      what_(std::move(what)),
      period_(period),
      estimate_(estimated_seconds ? " of " + reference::describe_duration(*estimated_seconds) : "") {
  thread_ = std::thread([this] {
    const auto started = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    for (bool first = true; !stop_signal_.wait_for(lock, period_, [this] { return stopping_; }); first = false) {
      const auto seconds =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
      // The estimate's origin once, on the first line: work shorter than a period prints nothing at all, so a
      // quick command's stderr stays its own whatever the machine's speed.
      out_ << fmt::format("{}, {}:{:02} so far{}{}\n", what_, seconds / 60, seconds % 60, estimate_,
                          first && !estimate_.empty() ? " (estimated from the layer's size and this machine's speed)"
                                                      : "")
           << std::flush;
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
