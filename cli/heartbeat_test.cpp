// The heartbeat of long work: plain lines naming the work and the time so far while it runs, nothing
// for work shorter than one period (whatever its estimate), and nothing after it is destroyed; an estimate on
// every line, where it comes from on the first; ATTNCHECK_HEARTBEAT_SECONDS checked.
#include "cli/heartbeat.hpp"

#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/errors/input_error.hpp"

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

TEST(Heartbeat, AnEstimateIsOnEveryLineItsOriginOnTheFirst) {
  std::ostringstream out;
  {
    const Heartbeat heartbeat(out, "golden check: g.h5", std::chrono::milliseconds(10), 240.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::istringstream lines(out.str());
  std::string line;
  ASSERT_TRUE(std::getline(lines, line)) << "no line in 100 ms with a 10 ms period";
  EXPECT_EQ(line, "golden check: g.h5, 0:00 so far of about 4 min (estimated from the layer's size and this "
                  "machine's speed)");
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "golden check: g.h5, 0:00 so far of about 4 min");
}

TEST(Heartbeat, WorkShorterThanAPeriodPrintsNothingWhateverItsEstimate) {
  std::ostringstream out;
  { const Heartbeat heartbeat(out, "golden check", std::chrono::seconds(30), 3600.0); }
  EXPECT_EQ(out.str(), "");
}

TEST(Heartbeat, ThePeriodFromTheEnvironmentIsAWholeNumberOfSeconds) {
  ::setenv("ATTNCHECK_HEARTBEAT_SECONDS", "7", 1);
  EXPECT_EQ(heartbeat_period(), std::chrono::seconds(7));
  for (const char* bad : {"0", "3601", "1.5", "abc", "", "30s"}) {
    ::setenv("ATTNCHECK_HEARTBEAT_SECONDS", bad, 1);
    EXPECT_THROW(heartbeat_period(), InputError) << bad;
  }
  ::unsetenv("ATTNCHECK_HEARTBEAT_SECONDS");
  EXPECT_EQ(heartbeat_period(), std::chrono::seconds(30));
}

}  // namespace
}  // namespace attncheck::cli
