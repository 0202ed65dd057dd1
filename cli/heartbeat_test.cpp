// The heartbeat of long work: plain lines naming the work and the time so far while it runs, nothing
// for work shorter than one period, and nothing after it is destroyed.
#include "cli/heartbeat.hpp"

#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace attncheck::cli {
namespace {

TEST(Heartbeat, LongWorkPrintsPlainLinesNamingItAndTheTime) {
  std::ostringstream out;
  {
    const Heartbeat heartbeat(out, "golden make: running", std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }  // joined: out is no longer written
  const std::string text = out.str();
  ASSERT_FALSE(text.empty()) << "no line in 300 ms with a 10 ms period";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line, "golden make: running, 0:00 so far");
  }
  EXPECT_EQ(text.find('\r'), std::string::npos);
  const std::string after = out.str();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(out.str(), after);
}

TEST(Heartbeat, ShortWorkPrintsNothing) {
  std::ostringstream out;
  { const Heartbeat heartbeat(out, "golden make", std::chrono::seconds(30)); }
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace attncheck::cli
