#!/usr/bin/env python3
"""An exec: worker that answers each case with `attncheck golden run CASE --impl IMPL -o CANDIDATE` (as
exec_worker/testing/attncheck_worker.py does) and then declines decoding on every case: it drops
/result/decode and writes /result/declined with decode = REASON (golden/SCHEMA.md, "Candidate files").
For the ctests fuzz.worker_declines_decode and cli.run_declined_tensors: declined parts are counted
apart and their reasons tallied, never passed and never silently absent. A case without decoding has no
decode/out, so there the declined part covers nothing.

    declining_worker.py ATTNCHECK IMPLEMENTATION"""
import subprocess
import sys

import h5py

REASON = "no KV cache in this worker"

attncheck, implementation = sys.argv[1], sys.argv[2]
print(f"attncheck-worker 1 via {implementation}, declining decode", flush=True)
for line in sys.stdin:
    request = line.split()
    if len(request) != 3 or request[0] != "run":
        print(f"error expected 'run CASE CANDIDATE', got {line.strip()[:80]!r}", flush=True)
        continue
    result = subprocess.run([attncheck, "golden", "run", request[1], "--impl", implementation, "-o", request[2]],
                            capture_output=True, text=True)
    if result.returncode == 2:
        print("unsupported " + " ".join(result.stderr.split())[:300], flush=True)
    elif result.returncode != 0:
        print("error " + " ".join(result.stderr.split())[:300], flush=True)
    else:
        with h5py.File(request[2], "r+") as candidate:
            if "decode" in candidate["result"]:
                del candidate["result/decode"]
            candidate["result"].require_group("declined").attrs["decode"] = REASON
        print("ok", flush=True)
