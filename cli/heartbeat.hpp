// A line every `period` on a stream while long work runs, so that a CI log or a terminal never sits a
// minute in silence: "golden make: running the fp64 reference, 1:30 so far of about 4 min". Unlike
// ProgressLine it writes plain lines (no carriage returns), terminal or not; nothing at all for work shorter
// than one period, whatever the machine's speed. With an estimate (reference/run_time_estimate.hpp) every line
// carries it, the first also where it comes from: "golden check: reference on g.h5, 0:30 so far of about 4 min
// (estimated from the layer's size and this machine's speed)". Not at once: a line before the first period
// would make a quick command's stderr depend on the machine's speed. The period is 30 s, or
// ATTNCHECK_HEARTBEAT_SECONDS (a whole number in [1, 3600]; anything else is bad input, exit 2).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

namespace attncheck::cli {

// ATTNCHECK_HEARTBEAT_SECONDS, else 30 s.
std::chrono::milliseconds heartbeat_period();

class Heartbeat {
 public:
  Heartbeat(std::ostream& out, std::string what, std::optional<double> estimated_seconds = std::nullopt);
  Heartbeat(std::ostream& out, std::string what, std::chrono::milliseconds period,
            std::optional<double> estimated_seconds = std::nullopt);
  ~Heartbeat();  // stops the thread; prints nothing more
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::ostream& out_;
  const std::string what_;
  const std::chrono::milliseconds period_;
  const std::string estimate_;  // ", of about 4 min", or empty
  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace attncheck::cli
