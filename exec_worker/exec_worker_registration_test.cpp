// The exec: worker reaches programs through the registry's prefix registration like any backend: a name
// starting "exec:" opens a worker running the rest, and an unknown name's error offers "exec:COMMAND".
#include <gtest/gtest.h>

#include <string>

#include "core/errors/input_error.hpp"
#include "impl/registry.hpp"

namespace attncheck::exec_worker {
namespace {

TEST(ExecWorkerRegistration, PrefixOpensAWorkerRunningTheRest) {
  // A shell worker that greets and then reads its requests until attncheck closes its stdin.
  const std::string name = "exec:echo 'attncheck-worker 1 registry test'; cat >/dev/null";
  const auto worker = impl::open_implementation(name);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->name(), name);
}

TEST(ExecWorkerRegistration, ACommandThatDoesNotGreetIsBadInput) {
  try {
    impl::open_implementation("exec:true");
    FAIL() << "a worker that exits without greeting was opened";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("--impl")) << error.what();
    EXPECT_NE(std::string(error.what()).find("attncheck-worker 1"), std::string::npos) << error.what();
  }
}

TEST(ExecWorkerRegistration, UnknownNamesListThePrefixUsage) {
  try {
    impl::open_implementation("no-such-implementation");
    FAIL() << "an unknown implementation was opened";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("reference-tp"), std::string::npos) << message;
    EXPECT_NE(message.find("exec:COMMAND"), std::string::npos) << message;
  }
}

TEST(ExecWorkerRegistration, AnExactNameIsNeverTakenForAPrefix) {
  // "reference" is registered by name; it must open the reference, not anything prefix-shaped.
  EXPECT_EQ(impl::open_implementation("reference")->name(), "reference");
}

}  // namespace
}  // namespace attncheck::exec_worker
