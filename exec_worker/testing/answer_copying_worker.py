#!/usr/bin/env python3
"""A cheating exec: worker for ctest fuzz.worker_never_sees_answers: if the case file it is handed carries
/expected, it copies the answers to /result and says "ok" (before case files lost /expected, such a
worker passed fuzzing); otherwise it can only decline. Speaks worker protocol 1 (exec_worker/worker.hpp)."""
import sys

import h5py

print("attncheck-worker 1 sharded answer-copier", flush=True)
for line in sys.stdin:
    request = line.split()
    if len(request) != 3 or request[0] != "run":
        print(f"error expected 'run CASE CANDIDATE', got {line.strip()[:80]!r}", flush=True)
        continue
    with h5py.File(request[1], "r") as case:
        if "expected" not in case:
            print("unsupported the case file carries no answers to copy", flush=True)
            continue
        with h5py.File(request[2], "w") as candidate:
            case.copy("expected", candidate, name="result")
            candidate["result"].attrs["precision"] = "fp64"
            candidate["result"].attrs["tp_size"] = int(case["geometry"].attrs["tp_size"])
    print("ok", flush=True)
