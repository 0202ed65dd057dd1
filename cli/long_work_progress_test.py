#!/usr/bin/env python3
"""ctest cli.long_work_progress: every long computation prints plain progress lines on stderr with an estimate
of its time (cli/heartbeat.hpp, reference/run_time_estimate.hpp), so a user never watches minutes of
silence (every line carries the estimate): `golden make`, `golden check` and `golden run` of a long golden, and
`golden run` of a generated
golden whose /inputs/position_ids was edited to a longer sequence (it passed the memory estimate and then
printed nothing for minutes). ATTNCHECK_HEARTBEAT_SECONDS=1 stands for the default 30 s, so that seconds of
work show it; a value that is not a whole number in [1, 3600] is bad input. stdout stays the command's own
(a --json object alone).

    long_work_progress_test.py ATTNCHECK"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np

attncheck = sys.argv[1]
failures = []
beat = dict(os.environ, ATTNCHECK_HEARTBEAT_SECONDS="1", OMP_NUM_THREADS="1")


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code=0, environment=beat):
    result = subprocess.run([attncheck, *map(str, arguments)], capture_output=True, text=True, env=environment)
    print(f"$ attncheck {' '.join(map(str, arguments))} -> exit {result.returncode}\n"
          f"stdout: {result.stdout[-300:]}\nstderr: {result.stderr[-800:]}")
    expect(result.returncode == code, f"`{' '.join(map(str, arguments))}` exited {result.returncode}, expected {code}")
    return result


def beats(result, what):
    """Lines naming the work, the time so far and the estimate (its origin on the first), all on stderr."""
    lines = [line for line in result.stderr.splitlines() if line.startswith(what)]
    expect(len(lines) >= 1 and re.fullmatch(r".*, \d+:\d\d so far of about \d+ (s|min|h) \(estimated from the "
                                            r"layer's size and this machine's speed\)", lines[0]) is not None,
           f"{what}: a first line with the time so far and the estimate's origin, on stderr")
    expect(all(re.fullmatch(r".*, \d+:\d\d so far of about \d+ (s|min|h)( \(.*\))?", line) for line in lines),
           f"{what}: every progress line with the time so far and the estimate")
    expect("so far" not in result.stdout and "estimated" not in result.stdout, f"{what}: stdout is the command's own")


with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    long_golden = folder / "long.h5"
    layer = ["--hidden", "64", "--heads", "1", "--head-dim", "16"]
    beats(run("golden", "make", *layer, "--seq", "12288", "--inputs", "generated", "--weights", "generated",
              "--sketch-activations", "-o", long_golden), "golden make")
    beats(run("golden", "check", long_golden, "--impl", "reference", "--json"), "golden check: reference on")
    checked = run("golden", "check", long_golden, "--impl", "reference", "--json")
    expect(json.loads(checked.stdout)["passed"] is True, "with the progress lines on stderr, stdout is one JSON object")

    # A small generated golden whose sequence is edited to 12288 tokens (its digest removed: it is read as an
    # unverified file), run by `golden run`, which reads the case alone.
    short = folder / "short.h5"
    run("golden", "make", *layer, "--batch", "1", "--seq", "8", "--inputs", "generated", "--weights", "generated",
        "-o", short)
    with h5py.File(short, "r+") as file:
        del file["inputs/position_ids"]
        file["inputs/position_ids"] = np.arange(12288, dtype=np.int64).reshape(1, 12288)
        file["inputs/key_lengths"][...] = [12288]
        del file.attrs["integrity"]
    beats(run("golden", "run", "--impl", "reference", short, "-o", folder / "candidate.h5"), "golden run: reference on")

    bad = run("golden", "run", "--impl", "reference", short, "-o", folder / "candidate.h5", code=2,
              environment=dict(os.environ, ATTNCHECK_HEARTBEAT_SECONDS="0.5"))
    expect("ATTNCHECK_HEARTBEAT_SECONDS = 0.5: must be a whole number of seconds in [1, 3600]" in bad.stderr,
           "a heartbeat period that is not a whole number of seconds is refused")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: long computations print an estimate, then progress lines, on stderr")
