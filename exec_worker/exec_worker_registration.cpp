// Registers the exec: worker (worker.hpp) as the prefix "exec:" (impl/registry.hpp): `exec:COMMAND` opens
// a worker running COMMAND.
#include "exec_worker/worker.hpp"
#include "impl/registry.hpp"

namespace attncheck::exec_worker {

namespace {

const impl::PrefixRegistration kRegistration({.prefix = std::string(kExecPrefix),
                                              .usage = std::string(kExecPrefix) + "COMMAND",
                                              .open = [](const std::string& command) { return open_worker(command); }});

}  // namespace

}  // namespace attncheck::exec_worker
