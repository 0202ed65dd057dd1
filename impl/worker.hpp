// `exec:COMMAND`: an implementation in another process, in any language, speaking attncheck worker
// protocol 1 over its stdin and stdout (stderr is passed through for its logs):
//
//   worker -> attncheck   "attncheck-worker 1[ TEXT]"      once, at start: the words "attncheck-worker 1",
//                                                          alone or then a space and a description
//                                                          ("attncheck-worker 10" is not protocol 1); the
//                                                          word "sharded" in TEXT is informational
//                                                          (each candidate's /result@tp_size decides,
//                                                          as for `attncheck compare`: 1 excuses it from
//                                                          per-rank gradients, absent or the case's
//                                                          tp_size has them checked, else a failure)
//   attncheck -> worker   "run CASE.h5 CANDIDATE.h5"        per case: CASE.h5 is a case file (a golden file,
//                                                          golden/SCHEMA.md, without /expected: a worker
//                                                          never sees the answers); the worker writes
//                                                          CANDIDATE.h5
//   worker -> attncheck   "ok" | "unsupported REASON" | "error MESSAGE"
//                                                          (the candidate's /result@precision and
//                                                          @rope_angles are its contract: an fp32 or
//                                                          bf16 candidate is held to that yardstick)
//   attncheck closes the worker's stdin when done; the worker exits.
//
// The command runs under /bin/sh -c, once per attncheck process, so a Python worker imports its
// framework once. A worker that sends anything else, exits, or takes longer than
// ATTNCHECK_WORKER_TIMEOUT seconds (default 300; a value that is not a whole number in [1, 86400] is bad
// input) for one case is an implementation failure; one that does not greet, exactly, within that time
// is bad input (exit code 2). The worker runs in a process group of its own: when it is done, fails or
// times out, the group is killed (whatever it started with it) and its temporary folder removed.
// golden/adapters/hf_transformers.py --worker is one.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "impl/implementation.hpp"

namespace attncheck::impl {

inline constexpr std::string_view kExecPrefix = "exec:";

std::unique_ptr<Implementation> open_worker(const std::string& command);

}  // namespace attncheck::impl
