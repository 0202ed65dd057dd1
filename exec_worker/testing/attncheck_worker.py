#!/usr/bin/env python3
"""An exec: worker that answers each case with `attncheck golden run CASE --impl IMPL -o CANDIDATE`, for the
ctest fuzz.worker_* cases: a worker is judged by what its candidate files declare, as `attncheck compare`
judges them — its precision contract (an fp32 candidate, its yardstick) and its TP layout
(/result@tp_size: 1 excuses per-rank gradients, the case's tp_size has them checked), whatever its
greeting said (--greet-sharded greets "sharded"; --halve-rank-kv halves every per-rank k_proj/v_proj
gradient it writes, a bug only per-rank checks can see).

    attncheck_worker.py ATTNCHECK IMPLEMENTATION [--greet-sharded] [--halve-rank-kv]"""
import subprocess
import sys

attncheck, implementation = sys.argv[1], sys.argv[2]
greeting = "attncheck-worker 1 sharded" if "--greet-sharded" in sys.argv[3:] else "attncheck-worker 1"
print(f"{greeting} via {implementation}", flush=True)
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
        if "--halve-rank-kv" in sys.argv[3:]:
            import h5py

            with h5py.File(request[2], "r+") as candidate:
                for rank in candidate["result"].get("ranks", {}).values():
                    for name in ("k_proj", "v_proj"):
                        rank["grads"][name][...] = rank["grads"][name][()] * 0.5
        print("ok", flush=True)
