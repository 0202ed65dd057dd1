#!/usr/bin/env python3
"""ctest cli.reading_memory: reading a golden counts everything it will allocate, generated tensors included, in
one estimate checked before anything large is allocated (golden/case_file_part.cpp, require_room_for_reading).

- A 100 KB golden that names the generators, its /geometry edited to a 151M-parameter layer, is refused by
  `golden inspect --max-memory 512M` (exit 2) with a peak resident size of tens of MB (it reached 2.7 GB).
- position_ids of [2^22, 1] with generated inputs: refused before generating x (it took 4.4 GB first).
- /geometry/rope_long_factor declared at 2^27 values (read with the geometry, before the estimate): refused
  by its shape before it is read.
- A golden whose stored data and generated weights each fit in --max-memory but not together is refused: one
  sum bounds the whole read.
- The estimate is an upper bound: `golden inspect` of goldens with generated weights and inputs, stored
  gradients, and per-rank gradients peaks below (the estimate its refusal names) + the peak of inspecting a
  tiny golden (the program itself).

Peak resident sizes from os.wait4 of each child alone.

    reading_memory_test.py ATTNCHECK"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

attncheck = sys.argv[1]
failures = []
UNITS = {"bytes": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments):
    """(exit code, stdout + stderr, peak resident bytes of the child alone)."""
    process = subprocess.Popen([attncheck, *map(str, arguments)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = process.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    print(f"$ attncheck {' '.join(map(str, arguments))} -> exit {process.returncode}, peak {usage.ru_maxrss // 1024} MB\n"
          f"{output[-700:]}")
    return process.returncode, output, usage.ru_maxrss * 1024


def estimate_of(path):
    """The read's estimate, from the refusal it gives with no room at all."""
    code, output, _ = run("golden", "inspect", "--max-memory", "1M", path)
    match = re.search(r"an estimated ([0-9.]+) (bytes|KiB|MiB|GiB) at peak", output)
    expect(code == 2 and match is not None, f"{path.name}: a refusal naming the estimate")
    return float(match.group(1)) * UNITS[match.group(2)] if match else 0.0


with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    tiny = folder / "tiny.h5"
    run("golden", "make", "--hidden", "16", "--heads", "2", "--head-dim", "8", "--seq", "2", "-o", tiny)
    _, _, program = run("golden", "inspect", tiny)

    # 1. A small generated golden whose geometry is edited to a large layer.
    small = folder / "small.h5"
    run("golden", "make", "--hidden", "64", "--heads", "1", "--head-dim", "128", "--seq", "4", "--weights", "generated",
        "--inputs", "generated", "--sketch-gradients", "-o", small)
    expect(small.stat().st_size < 200_000, f"the generated golden is small: {small.stat().st_size} bytes")
    with h5py.File(small, "r+") as file:
        file["geometry"].attrs["hidden_size"] = np.int64(8192)
        file["geometry"].attrs["num_attention_heads"] = np.int64(64)
        file["geometry"].attrs["num_key_value_heads"] = np.int64(8)
    code, output, peak = run("golden", "inspect", "--max-memory", "512M", small)
    expect(code == 2 and "not enough memory" in output and "weights generated" in output,
           "an edited generated golden beyond --max-memory is refused naming its generated weights")
    expect(peak < program + 64 * 2 ** 20, f"refused before allocating: peak {peak / 2 ** 20:.0f} MB")

    # 2. A batch of 2^22 rows with generated inputs: refused before x is generated.
    rows = folder / "rows.h5"
    run("golden", "make", "--hidden", "64", "--heads", "1", "--head-dim", "16", "--seq", "1", "--inputs", "generated",
        "-o", rows)
    with h5py.File(rows, "r+") as file:
        del file["inputs/position_ids"]
        file.create_dataset("inputs/position_ids", shape=(2 ** 22, 1), dtype="<i8", compression="gzip",
                            data=np.zeros((2 ** 22, 1), dtype=np.int64))
    code, output, peak = run("golden", "inspect", rows)
    expect(code == 2 and "batch 4194304 is beyond 2^20" in output, "batch 2^22 is refused naming the limit")
    expect(peak < program + 256 * 2 ** 20, f"refused before generating x: peak {peak / 2 ** 20:.0f} MB")

    # 2b. The longrope factors, read with the geometry (before the estimate, which needs it), declared at 2^27
    # values each in a gzip chunk: refused by their shape (one per rotated pair) before anything is read.
    import json
    config = folder / "longrope.json"
    config.write_text(json.dumps({"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 2,
                                  "num_key_value_heads": 1, "num_hidden_layers": 1, "max_position_embeddings": 4096,
                                  "original_max_position_embeddings": 64, "rope_theta": 10000.0,
                                  "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8,
                                                   "long_factor": [2.0] * 8}}))
    longrope = folder / "longrope.h5"
    code, _, _ = run("golden", "make", "--hf-config", config, "--batch", "1", "--seq", "3", "-o", longrope)
    expect(code == 0, "a longrope golden is made")
    with h5py.File(longrope, "r+") as file:
        del file["geometry/rope_long_factor"]
        file.create_dataset("geometry/rope_long_factor", shape=(2 ** 27,), dtype="<f8", chunks=(2 ** 20,),
                            compression="gzip", fillvalue=1.0)
    code, output, peak = run("golden", "inspect", "--max-memory", "256M", longrope)
    expect(code == 2 and "/geometry/rope_long_factor" in output, "a longrope factor of 2^27 values is refused")
    expect(peak < program + 64 * 2 ** 20, f"refused before reading it: peak {peak / 2 ** 20:.0f} MB")

    # 3. Parts that each fit, together not: stored gradients (~34 MB) and generated weights (~42 MB with the
    # transpose) under --max-memory 64M.
    parts = folder / "parts.h5"
    run("golden", "make", "--hidden", "1024", "--heads", "8", "--head-dim", "128", "--seq", "2", "--weights",
        "generated", "--inputs", "generated", "-o", parts)
    code, output, _ = run("golden", "inspect", "--max-memory", "64M", parts)
    expect(code == 2 and "not enough memory" in output, "the sum of the parts is held to --max-memory")
    code, _, _ = run("golden", "inspect", "--max-memory", "200M", parts)
    expect(code == 0, "with room for the sum it reads")

    # 4. The estimate bounds the measured peak.
    goldens = {
        "parts": parts,
        "tokens": folder / "tokens.h5",
        "ranks": folder / "ranks.h5",
    }
    run("golden", "make", "--hidden", "512", "--heads", "4", "--head-dim", "64", "--batch", "4", "--seq", "2048",
        "--inputs", "generated", "--weights", "generated", "-o", goldens["tokens"])
    run("golden", "make", "--hidden", "1024", "--heads", "8", "--kv-heads", "2", "--head-dim", "128", "--tp", "4",
        "--seq", "4", "-o", goldens["ranks"])
    for name, path in goldens.items():
        estimate = estimate_of(path)
        code, _, peak = run("golden", "inspect", path)
        expect(code == 0 and peak <= program + estimate,
               f"{name}: peak {peak / 2 ** 20:.1f} MB within the program ({program / 2 ** 20:.1f} MB) + the "
               f"estimate ({estimate / 2 ** 20:.1f} MB)")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: reading a golden is estimated whole, generated tensors included, before anything large is allocated")
