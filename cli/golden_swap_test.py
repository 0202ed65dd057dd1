#!/usr/bin/env python3
"""ctest cli.golden_swapped_mid_check (issue 56.1): a golden replaced while the implementation runs lends it
nothing. A worker answering A with `out` 1% off (fp32) fails against A's yardstick; the same worker, replacing A's
file by B (a valid sealed golden whose bound stored yardstick is far looser: its x scaled after /expected was
written, so its yardstick measures a large error) while it runs, still fails, and the report's yardstick is
computed from the golden that was read, not B's stored one. Before, the check reopened the path for /yardstick
and passed (exit 0).

    golden_swap_test.py ATTNCHECK"""
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import h5py

attncheck = sys.argv[1]
contract = "fp32.float32.replicated-kv"
failures = []


def run(*arguments):
    result = subprocess.run([attncheck, *map(str, arguments)], capture_output=True, text=True)
    print(f"$ attncheck {' '.join(map(str, arguments))} -> exit {result.returncode}\n{result.stdout[-800:]}"
          f"{result.stderr[-800:]}")
    return result


with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    golden_a, golden_b = scratch / "a.h5", scratch / "b.h5"
    run("golden", "make", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--head-dim", "8", "--batch", "1",
        "--seq", "6", "--seed", "3", "-o", golden_a)
    shutil.copyfile(golden_a, golden_b)
    with h5py.File(golden_b, "r+") as file:
        file["inputs/x"][...] = file["inputs/x"][...] * 1.5
    run("golden", "seal", golden_b)
    run("golden", "yardstick", golden_b, "--rope-angles", "float32")
    with h5py.File(golden_b, "r") as file:
        loose = float(file[f"yardstick/{contract}"].attrs["out"])
    worker = scratch / "swapping_worker.py"
    worker.write_text(textwrap.dedent(f"""\
        import os, shutil, subprocess, sys
        import h5py
        swap = sys.argv[1] == "swap"
        print("attncheck-worker 1 off by one percent, swapping the golden", flush=True)
        for line in sys.stdin:
            _, case, out = line.split()
            subprocess.run([{attncheck!r}, "golden", "run", "--impl", "reference", case, "-o", out], check=True,
                           stdout=subprocess.DEVNULL)
            with h5py.File(out, "r+") as file:
                file["result"].attrs["precision"] = "fp32"
                file["result"].attrs["rope_angles"] = "float32"
                file["result/out"][...] = file["result/out"][...] * 1.01
            if swap:
                shutil.copyfile({str(golden_b)!r}, {str(golden_a)!r} + ".new")
                os.replace({str(golden_a)!r} + ".new", {str(golden_a)!r})
            print("ok", flush=True)
        """))
    keep = scratch / "a.keep.h5"
    shutil.copyfile(golden_a, keep)
    plain = run("golden", "check", golden_a, "--impl", f"exec:{sys.executable} {worker} keep")
    if plain.returncode != 1:
        failures.append(f"without a swap the 1%-off candidate must fail (exit 1), got {plain.returncode}")
    print(f"B's stored yardstick for out: {loose} (in units of its scale: a tolerance of about 2.5x the output)")
    swapped = run("golden", "check", golden_a, "--impl", f"exec:{sys.executable} {worker} swap")
    if swapped.returncode != 1:
        failures.append(f"with the golden swapped mid-check: exit {swapped.returncode}, expected 1 (FAIL, as without)")
    if "stored in the golden, bound" in swapped.stdout:
        failures.append("with the golden swapped mid-check the report used a stored yardstick")
    if "computed now" not in swapped.stdout:
        failures.append("with the golden swapped mid-check the yardstick must be computed from the golden read")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
