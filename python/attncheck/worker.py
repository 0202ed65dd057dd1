"""attncheck's worker protocol (exec_worker/worker.hpp), served for an implementation written in Python:

    worker -> attncheck   "attncheck-worker 1 ..."          once, at start (protocol 1: states nothing)
                       or "attncheck-worker 2 ..."          protocol 2, with `supports=`: then at once
    worker -> attncheck   "supports JSON"                    what it supports (attncheck.capabilities)
    attncheck -> worker   "run CASE.h5 CANDIDATE.h5"         per case (CASE.h5 has no /expected)
    worker -> attncheck   "ok" | "unsupported REASON" | "error MESSAGE"

`serve(run_case, description)` calls run_case(case_path, candidate_path) for each request: returning
is "ok", raising Unsupported is "unsupported REASON", anything else "error TYPE: MESSAGE" (that case
fails; the worker goes on). stdout belongs to the protocol: while serving, sys.stdout is stderr, so a
stray print from any library cannot corrupt it.
"""
import sys
import traceback

from .capabilities import as_capabilities
from .errors import BadInput, Unsupported


def one_line(text):
    return " ".join(str(text).split())


def serve(run_case, description, stdin=None, protocol=None, supports=None):
    """Answers requests from stdin until it closes; returns 0 (the worker's exit status). supports: what the
    layer supports (attncheck.Capabilities, a dict of its keys, or a list of feature names): attncheck then
    sends only cases within it and holds it to it (protocol 2)."""
    capabilities = as_capabilities(supports)
    stdin = stdin or sys.stdin
    protocol = protocol or sys.stdout
    saved, sys.stdout = sys.stdout, sys.stderr

    def reply(text):
        protocol.write(one_line(text)[:2000] + "\n")
        protocol.flush()

    try:
        if capabilities is None:
            reply(f"attncheck-worker 1 {description}")
        else:
            reply(f"attncheck-worker 2 {description}")
            protocol.write(f"supports {capabilities.to_json()}\n")  # JSON is one line: no one_line() needed
            protocol.flush()
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
