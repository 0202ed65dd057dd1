// A line every `period` on a stream while long work runs, so that a CI log or a terminal never sits a
// minute in silence: "golden make: running the fp64 reference, 1:30 so far". Unlike ProgressLine it
// writes plain lines (no carriage returns), terminal or not; nothing at all for work shorter than one
// period.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace attncheck::cli {

class Heartbeat {
 public:
  Heartbeat(std::ostream& out, std::string what, std::chrono::milliseconds period = std::chrono::seconds(30));
  ~Heartbeat();  // stops the thread; prints nothing more
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::ostream& out_;
  const std::string what_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace attncheck::cli
