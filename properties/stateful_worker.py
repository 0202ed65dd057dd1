#!/usr/bin/env python3
"""An exec: worker with a cache that is never cleared, for ctest fuzz.state_dependent_failure_reported: it
answers each case with `attncheck golden run CASE --impl IMPL -o CANDIDATE` (as
exec_worker/testing/attncheck_worker.py does) and keeps each answer under the shapes of x and q_proj, as a
compiled-graph cache keys its captured graphs by input shape. A later case of the same shapes gets the
cached answer back, as a graph replayed without copying the new inputs into its static buffers would
give: right for every case run first in a fresh process, wrong for the second case of a shape. Such a
failure passes when its case is replayed alone, and shows only after an earlier case in the same
process.

    stateful_worker.py ATTNCHECK IMPLEMENTATION"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py

attncheck, implementation = sys.argv[1], sys.argv[2]
cache_folder = tempfile.mkdtemp(prefix="attncheck-stateful-worker-")
cache = {}  # (x shape, q_proj shape) -> the candidate file answered for the first case of those shapes
print(f"attncheck-worker 1 via {implementation}, caching answers by input shape", flush=True)
try:
    for line in sys.stdin:
        request = line.split()
        if len(request) != 3 or request[0] != "run":
            print(f"error expected 'run CASE CANDIDATE', got {line.strip()[:80]!r}", flush=True)
            continue
        case_path, candidate_path = request[1], request[2]
        with h5py.File(case_path, "r") as case:
            key = (case["inputs/x"].shape, case["weights/q_proj"].shape)
        if key in cache:
            shutil.copyfile(cache[key], candidate_path)  # the stale answer: the bug
            print("ok", flush=True)
            continue
        result = subprocess.run([attncheck, "golden", "run", case_path, "--impl", implementation, "-o", candidate_path],
                                capture_output=True, text=True)
        if result.returncode == 2:
            print("unsupported " + " ".join(result.stderr.split())[:300], flush=True)
        elif result.returncode != 0:
            print("error " + " ".join(result.stderr.split())[:300], flush=True)
        else:
            cache[key] = os.path.join(cache_folder, f"{len(cache)}.h5")
            shutil.copyfile(candidate_path, cache[key])
            print("ok", flush=True)
finally:
    shutil.rmtree(cache_folder, ignore_errors=True)
