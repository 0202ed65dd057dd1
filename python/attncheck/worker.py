"""attncheck's worker protocol 1 (exec_worker/worker.hpp), served for an implementation written in Python:

    worker -> attncheck   "attncheck-worker 1 ..."          once, at start
    attncheck -> worker   "run CASE.h5 CANDIDATE.h5"         per case (CASE.h5 has no /expected)
    worker -> attncheck   "ok" | "unsupported REASON" | "error MESSAGE"

`serve(run_case, description)` calls run_case(case_path, candidate_path) for each request: returning
is "ok", raising Unsupported is "unsupported REASON", anything else "error TYPE: MESSAGE" (that case
fails; the worker goes on). stdout belongs to the protocol: while serving, sys.stdout is stderr, so a
stray print from any library cannot corrupt it.
"""
import sys
import traceback

from .errors import BadInput, Unsupported


def one_line(text):
    return " ".join(str(text).split())


def serve(run_case, description, stdin=None, protocol=None):
    """Answers requests from stdin until it closes; returns 0 (the worker's exit status)."""
    stdin = stdin or sys.stdin
    protocol = protocol or sys.stdout
    saved, sys.stdout = sys.stdout, sys.stderr

    def reply(text):
        protocol.write(one_line(text)[:2000] + "\n")
        protocol.flush()

    try:
        reply(f"attncheck-worker 1 {description}")
        for line in stdin:
            request = line.split()
            if len(request) != 3 or request[0] != "run":
                reply(f"error expected 'run CASE CANDIDATE', got {line.strip()[:100]!r}")
                continue
            try:
                run_case(request[1], request[2])
                reply("ok")
            except Unsupported as error:
                reply(f"unsupported {error}")
            except BadInput as error:
                reply(f"error {error}")
            except Exception as error:  # noqa: BLE001  (a failure is this case's answer, not the worker's end)
                traceback.print_exc(file=sys.stderr)
                reply(f"error {type(error).__name__}: {error}")
    finally:
        sys.stdout = saved
    return 0
