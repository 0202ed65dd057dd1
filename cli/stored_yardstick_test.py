#!/usr/bin/env python3
"""ctest cli.stored_yardstick: a golden's stored yardstick (golden/SCHEMA.md, "Stored yardsticks") end to end.
A bf16 candidate (mutant-bf16-row-sum-accumulation, which passes a short case) is judged the same with the
yardstick stored and computed; `golden yardstick --verify` passes on a fresh store, refuses an edited
golden until `golden seal` (exit 2: its integrity digest), then calls the changed case's yardstick stale
(exit 1), and a stored error that is not a finite non-negative number is bad input (exit 2).

    stored_yardstick_test.py ATTNCHECK"""
import pathlib
import re
import subprocess
import sys
import tempfile

import h5py

attncheck = sys.argv[1]
candidate = "mutant-bf16-row-sum-accumulation"
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code):
    result = subprocess.run([attncheck, *arguments], capture_output=True, text=True)
    print(f"$ attncheck {' '.join(arguments)}  -> exit {result.returncode}\n{result.stdout}{result.stderr}")
    if code is not None:
        expect(result.returncode == code, f"`{' '.join(arguments)}` exited {result.returncode}, expected {code}")
    return result.stdout + result.stderr


def table_row(output):
    """The run's row for the candidate, without its timing-free columns changing: result, worst, ulps."""
    match = re.search(rf"{candidate} +(\S+) +(\S+) +(\S+)", output)
    return match.groups() if match else None


with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    golden = folder / "g.h5"
    run("golden", "make", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "24", "--qk-norm", "rms",
        "--tp", "2", "--batch", "2", "--seq", "9", "--pad-keys", "--seed", "7", "-o", str(golden), code=0)

    computed = run("run", "--goldens", str(folder), "--impl", candidate, code=0)
    expect("0 stored in the goldens (bound to their integrity digests), 0 stored but not bound and so recomputed (equal), 1 computed" in computed,
           "without a stored yardstick, run computes it")

    stored_output = run("golden", "yardstick", "--precision", "bf16", "--rope-angles", "float64", str(golden), code=0)
    expect("stored yardstick bf16.float64.replicated-kv" in stored_output, "golden yardstick names what it stored")
    with h5py.File(golden, "r") as file:
        group = file["yardstick/bf16.float64.replicated-kv"]
        expect(group.attrs["version"] == "attncheck-yardstick-v3", "version attribute")
        expect(re.fullmatch(r"attncheck-yardstick-binding-v1:[0-9a-f]{64}", group.attrs["binding"]) is not None,
               "binding: the binding version and 64 hex digits")
        expect(re.fullmatch(r"[0-9a-f]{16}", group.attrs["case_digest"]) is not None, "case_digest: 16 hex digits")
        for name in ("out", "grads/x", "ranks/1/grads/q_norm"):
            expect(name in group.attrs and group.attrs[name] > 0, f"stored error for {name}")

    verify = run("golden", "yardstick", "--verify", "--precision", "bf16", "--rope-angles", "float64", str(golden),
                 code=0)
    expect("is current and bound" in verify, "--verify accepts a fresh store, bound to the integrity digest")
    reused = run("run", "--goldens", str(folder), "--impl", candidate, code=0)
    expect("1 stored in the goldens (bound to their integrity digests), 0 stored but not bound" in reused,
           "run reads the stored yardstick")
    expect(table_row(reused) == table_row(computed) and table_row(reused) is not None,
           f"same verdict, worst tensor and ulps stored or computed: {table_row(reused)} vs {table_row(computed)}")

    # A changed case makes the stored yardstick stale: not used, and --verify says so.
    with h5py.File(golden, "r+") as file:
        x = file["inputs/x"]
        values = x[...]
        values[0, 0, 0] += 0.25
        x[...] = values
    # Edited, the golden no longer matches its integrity digest: refused until it is sealed again.
    edited = run("golden", "yardstick", "--verify", "--precision", "bf16", "--rope-angles", "float64", str(golden),
                 code=2)
    expect("changed after it was written" in edited, "an edited golden is refused by its integrity digest")
    run("golden", "seal", str(golden), code=0)
    stale = run("golden", "yardstick", "--verify", "--precision", "bf16", "--rope-angles", "float64", str(golden),
                code=1)
    expect("absent or stale" in stale, "--verify calls a changed case's yardstick stale")
    # (its expected answers no longer match its inputs exactly, so the verdict is not the point here: which
    # yardstick judged it is)
    recomputed = run("run", "--goldens", str(folder), "--impl", candidate, code=None)
    expect("0 stored in the goldens (bound to their integrity digests), 0 stored but not bound and so recomputed (equal), 1 computed" in recomputed,
           "a stale stored yardstick is not used")

    # A stored error that is not a finite, non-negative number is bad input.
    run("golden", "yardstick", "--precision", "bf16", "--rope-angles", "float64", str(golden), code=0)
    with h5py.File(golden, "r+") as file:
        file["yardstick/bf16.float64.replicated-kv"].attrs["out"] = -1.0
    bad = run("golden", "yardstick", "--verify", "--precision", "bf16", "--rope-angles", "float64", str(golden),
              code=2)
    expect("finite, non-negative" in bad, "a negative stored error is named as bad input")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("stored yardsticks: used when current, stale when the case changes, refused when malformed")
