#!/usr/bin/env python3
"""ctest cli.hostile_yardstick: a stored yardstick never loosens a check, and a malformed /yardstick is bad
input, never an abort (golden/SCHEMA.md, "Stored yardsticks").

A small golden and a candidate with a 1% error in `out` (fp32, so the yardstick sets its tolerance) fail
against the computed yardstick. Then the stored yardstick's `out` error is multiplied by 1e6 or set to 1.0
(as an attacker or a damaged copy would): `compare`, `golden check` and `run` refuse the file (exit 2 naming
/yardstick/...) instead of passing; the same stored values in a file without an integrity digest are
recomputed (and refused when edited); every report says which yardstick it used. /yardstick, or one of its
contract groups, stored as a dataset, a named datatype or a soft link, is exit 2 naming it in `compare`,
`golden check`, `golden yardstick --verify` and `run` (it was an HDF5 exception: abort, exit 134).

    hostile_yardstick_test.py ATTNCHECK"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import h5py
import numpy as np

attncheck = sys.argv[1]
contract = "fp32.float32.replicated-kv"
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code):
    result = subprocess.run([attncheck, *arguments], capture_output=True, text=True)
    print(f"$ attncheck {' '.join(map(str, arguments))}  -> exit {result.returncode}\n"
          f"{result.stdout[-1500:]}{result.stderr[-1500:]}")
    expect(result.returncode == code,
           f"`attncheck {' '.join(map(str, arguments))}` exited {result.returncode}, expected {code}")
    return result


def make_off_by_one_percent(golden, candidate):
    """The reference's answers, declared fp32, with `out` 1% too large."""
    run("golden", "run", "--impl", "reference", golden, "-o", candidate, code=0)
    with h5py.File(candidate, "r+") as file:
        file["result"].attrs["precision"] = "fp32"
        file["result"].attrs["rope_angles"] = "float32"
        out = file["result/out"]
        out[...] = out[...] * 1.01


with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    goldens = scratch / "goldens"
    goldens.mkdir()
    golden = goldens / "g.h5"
    run("golden", "make", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--head-dim", "8", "--batch", "1",
        "--seq", "6", "--seed", "3", "-o", golden, code=0)
    candidate = scratch / "candidate.h5"
    make_off_by_one_percent(golden, candidate)
    # An exec: worker giving the same 1%-off fp32 answer, for `golden check` and `run`.
    worker = scratch / "off_worker.py"
    worker.write_text(textwrap.dedent(f"""\
        import subprocess, sys
        import h5py
        print("attncheck-worker 1 off by one percent", flush=True)
        for line in sys.stdin:
            _, case, out = line.split()
            subprocess.run([{attncheck!r}, "golden", "run", "--impl", "reference", case, "-o", out], check=True,
                           stdout=subprocess.DEVNULL)
            with h5py.File(out, "r+") as file:
                file["result"].attrs["precision"] = "fp32"
                file["result"].attrs["rope_angles"] = "float32"
                file["result/out"][...] = file["result/out"][...] * 1.01
            print("ok", flush=True)
        """))
    implementation = f"exec:{sys.executable} {worker}"

    baseline = run("compare", golden, candidate, "--json", code=1)
    verdict = json.loads(baseline.stdout)
    expect(verdict["yardstick"] == {"source": "computed", "contract": contract},
           f"without a stored one the report says computed: {verdict.get('yardstick')}")
    expect(verdict.get("integrity") == "verified", f"--json carries the integrity verdict: {verdict.get('integrity')}")

    run("golden", "yardstick", golden, "--rope-angles", "float32", code=0)
    stored = run("compare", golden, candidate, "--json", code=1)
    expect(json.loads(stored.stdout)["yardstick"]["source"] == "stored", "a bound stored yardstick is used: stored")
    text = run("compare", golden, candidate, code=1)
    expect(f"yardstick {contract}: stored in the golden, bound to its integrity digest" in text.stdout,
           "the text report says which yardstick it used")
    verify = run("golden", "yardstick", "--verify", "--rope-angles", "float32", golden, code=0)
    expect("is current and bound" in verify.stdout, "--verify says the fresh store is bound")

    # Loosened by an edit of /yardstick (outside the integrity digest, which still verifies).
    for label, edit in (("x1e6", lambda value: value * 1e6), ("1.0", lambda value: 1.0)):
        edited = goldens / f"edited_{label}.h5"
        shutil.copyfile(golden, edited)
        with h5py.File(edited, "r+") as file:
            attributes = file[f"yardstick/{contract}"].attrs
            attributes["out"] = edit(float(attributes["out"]))
        for arguments in (("compare", edited, candidate), ("golden", "check", edited, "--impl", implementation)):
            result = run(*arguments, code=2)
            expect(f"/yardstick/{contract}" in result.stderr and "must equal its recomputation" in result.stderr,
                   f"{arguments[0]} with the yardstick {label}: refused naming it")
        edited.unlink()
    # The same through `run` (one golden in its folder).
    shutil.copyfile(golden, scratch / "keep.h5")
    with h5py.File(golden, "r+") as file:
        file[f"yardstick/{contract}"].attrs["out"] = 1.0
    result = run("run", "--goldens", goldens, "--impl", implementation, code=2)
    expect(f"/yardstick/{contract}" in result.stderr, "run refuses an edited stored yardstick")
    shutil.copyfile(scratch / "keep.h5", golden)

    # A binding forged by copying it from another contract's group does not match either.
    run("golden", "yardstick", golden, "--rope-angles", "float64", code=0)
    with h5py.File(golden, "r+") as file:
        other = file["yardstick/fp32.float64.replicated-kv"].attrs
        mine = file[f"yardstick/{contract}"].attrs
        mine["binding"] = other["binding"]
        mine["out"] = 1.0
    run("compare", golden, candidate, code=2)
    shutil.copyfile(scratch / "keep.h5", golden)

    # Without an integrity digest nothing is bound: the stored yardstick is recomputed, and used only if equal.
    unsealed = goldens / "g.h5"
    with h5py.File(unsealed, "r+") as file:
        del file.attrs["integrity"]
    recomputed = run("compare", unsealed, candidate, "--json", code=1)
    expect(json.loads(recomputed.stdout)["yardstick"]["source"] == "recomputed",
           "an unbound stored yardstick equal to its recomputation: recomputed")
    expect(json.loads(recomputed.stdout)["integrity"] == "absent", "the JSON says the file has no digest")
    expect("carries no integrity digest" in recomputed.stderr, "the note goes to stderr with --json")
    unbound = run("golden", "yardstick", "--verify", "--rope-angles", "float32", unsealed, code=1)
    expect("NOT bound" in unbound.stdout, "--verify calls an unbound yardstick a problem")
    with h5py.File(unsealed, "r+") as file:
        file[f"yardstick/{contract}"].attrs["out"] = 1.0
    run("compare", unsealed, candidate, code=2)
    shutil.copyfile(scratch / "keep.h5", golden)

    # /yardstick of the wrong kind: exit 2 naming it, in every command that reads it.
    def as_dataset(file):
        del file["yardstick"]
        file["yardstick"] = np.zeros(3)

    def as_named_type(file):
        del file["yardstick"]
        file["yardstick"] = np.dtype("<f8")

    def as_soft_link(file):
        del file["yardstick"]
        file["yardstick"] = h5py.SoftLink("/geometry")  # a group, but behind a link

    def contract_as_dataset(file):
        del file[f"yardstick/{contract}"]
        file[f"yardstick/{contract}"] = np.zeros(2)

    def contract_as_soft_link(file):
        del file[f"yardstick/{contract}"]
        file[f"yardstick/{contract}"] = h5py.SoftLink("/geometry")

    cases = {"a dataset": (as_dataset, "/yardstick"), "a named datatype": (as_named_type, "/yardstick"),
             "a soft link": (as_soft_link, "/yardstick"), "contract dataset": (contract_as_dataset, f"/yardstick/{contract}"),
             "contract soft link": (contract_as_soft_link, f"/yardstick/{contract}")}
    for label, (damage, where) in cases.items():
        shutil.copyfile(scratch / "keep.h5", golden)
        with h5py.File(golden, "r+") as file:
            damage(file)
        for arguments in (("compare", golden, candidate), ("golden", "check", golden, "--impl", implementation),
                          ("golden", "yardstick", "--verify", "--rope-angles", "float32", golden),
                          ("run", "--goldens", goldens, "--impl", implementation)):
            result = run(*arguments, code=2)
            expect(where in result.stderr and "group of contract groups" in result.stderr,
                   f"{label}: `{arguments[0]} {arguments[1]}` names {where}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: stored yardsticks never loosen a check; a malformed /yardstick is exit 2")
