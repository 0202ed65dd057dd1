#!/usr/bin/env python3
"""An exec: worker that answers each case with `attncheck golden run CASE --impl IMPL -o CANDIDATE`, for
ctest fuzz.worker_fp32_judged_by_its_contract: a worker whose candidates are fp32 (precision and RoPE
angle policy declared in the file) is fuzzed under the same yardstick `attncheck compare` applies.

    attncheck_worker.py ATTNCHECK IMPLEMENTATION"""
import subprocess
import sys

attncheck, implementation = sys.argv[1], sys.argv[2]
print(f"attncheck-worker 1 via {implementation}", flush=True)
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
        print("ok", flush=True)
