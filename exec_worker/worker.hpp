// `exec:COMMAND`: an implementation in another process, in any language, speaking attncheck worker
// protocol 1 or 2 over its stdin and stdout (stderr is passed through for its logs):
//
//   worker -> attncheck   "attncheck-worker 1[ TEXT]"      once, at start: the words "attncheck-worker 1",
//                                                          alone or then a space and a description
//                                                          ("attncheck-worker 10" is not protocol 1); the
//                                                          word "sharded" in TEXT is informational
//                                                          (each candidate's /result@tp_size decides,
//                                                          as for `attncheck compare`: 1 excuses it from
//                                                          per-rank gradients, absent or the case's
//                                                          tp_size has them checked, else a failure)
//                         or "attncheck-worker 2[ TEXT]"   protocol 2: the same, and then at once
//   worker -> attncheck   "supports JSON"                  what it supports, a statement of capabilities
//                                                          (core/capabilities/capabilities_json.hpp): cases
//                                                          outside it are never sent (nor anything computed
//                                                          for them), the parts it lacks are left out of its
//                                                          case files (no decode schedule; tp_size 1 when it
//                                                          does not run the plan), and declining anything it
//                                                          states is its failure (a broken promise). A
//                                                          statement that is not valid is bad input (exit 2)
//                                                          at start; a worker restarted after a case ended it
//                                                          must greet and state as it did at first, or that
//                                                          case fails.
//   attncheck -> worker   "run CASE.h5 CANDIDATE.h5"        per case: CASE.h5 is a case file (a golden file,
//                                                          golden/SCHEMA.md, without /expected: a worker
//                                                          never sees the answers); the worker writes
//                                                          CANDIDATE.h5, which is read by the names the
//                                                          case's geometry gives (attncheck runs no
//                                                          reference for a worker's case)
//   worker -> attncheck   "ok" | "unsupported REASON" | "error MESSAGE"
//                                                          (the candidate's /result@precision and
//                                                          @rope_angles are its contract: an fp32 or
//                                                          bf16 candidate is held to that yardstick)
//   attncheck closes the worker's stdin when done; the worker exits.
//
// The command runs under /bin/sh -c, once per attncheck process, so a Python worker imports its
// framework once; a case that ends the worker (no answer in time, an exit, a reply that is not the
// protocol's) is that case's verdict, and the next case starts it afresh (one that then does not greet is
// that case's failure). Verdicts on a worker, one rule in every command (golden check, run, fuzz):
//   - "unsupported REASON": Unsupported (the case is not judged);
//   - no line within ATTNCHECK_WORKER_TIMEOUT seconds (default 300; a value that is not a whole number
//     in [1, 86400] is bad input) for one case: NoAnswer ("no answer within N s"), a verdict of its own;
//     the worker is stopped;
//   - everything else is the implementation's failure (std::runtime_error, never InputError): "error
//     MESSAGE", any other reply, an output that closes before the reply ("the worker exited without
//     answering (exit status 3)", or the signal that killed it), and, after "ok", a candidate that is not
//     a valid candidate file: none written, not a regular file (a FIFO, a symbolic link, a device: checked
//     with lstat() and read through a descriptor opened with O_NOFOLLOW | O_NONBLOCK, so nothing blocks),
//     not HDF5, a copy of the case file, wrong types, or shapes beyond the memory room (the golden
//     reader's bound holds for candidates too). Such a file is removed; the message says so and does not
//     present the temporary path as the user's.
// A worker that does not greet, exactly, within that time is bad input (exit code 2).
//
// What attncheck repeats of a worker's text (reasons, messages, a bad greeting, the reasons its
// candidate declines parts) is at most 1,000 bytes, then "[... N more bytes cut]", with control
// characters and invalid UTF-8 escaped (exec_worker/worker_text.hpp). A line is kept up to 64 KiB; the rest of a
// longer one is read and counted, never buffered, and its first word still decides what it is ("ok"
// with anything after it is not "ok").
//
// The worker's whole process tree ends with it (exec_worker/worker_supervisor.hpp): it runs under a supervisor
// process that is a child subreaper, so a child that calls setsid() or daemonizes is re-parented to the
// supervisor rather than to init. When the worker exits, when attncheck stops it (done, a failure, a
// timeout), or when attncheck itself ends in any way, SIGKILL included (the supervisor reads EOF on a
// lifeline pipe only attncheck holds), the worker gets 5 s to exit after its stdin closes, then its
// process group and every process re-parented to the supervisor are killed and reaped, and the worker's
// temporary folder is removed. Not covered: processes started outside its tree (systemd-run, at, a
// container runtime, ssh), another user's processes (setuid programs: the supervisor gives up after 10 s
// and says so), processes stuck in uninterruptible sleep past that, and a supervisor killed with SIGKILL
// by someone (the worker itself still dies with it: PR_SET_PDEATHSIG; its orphans go to init).
// `python3 -m attncheck.adapters.hf_transformers --worker` (Hugging Face transformers) is one.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "impl/implementation.hpp"

namespace attncheck::exec_worker {

inline constexpr std::string_view kExecPrefix = "exec:";

// The worker running COMMAND (what follows "exec:"); registered as the prefix "exec:"
// (exec_worker/exec_worker_registration.cpp).
std::unique_ptr<impl::Implementation> open_worker(const std::string& command);

}  // namespace attncheck::exec_worker
