#!/usr/bin/env python3
"""ctest cli.golden_check_verdicts: `golden check A.h5 B.h5 ...` judges every golden whatever one of them gets
from the implementation. A golden the implementation declines (unsupported) is marked declined with its reason
and the rest are judged (it stopped at the first, exit 2, reading like a damaged file); declining every golden
checks nothing and fails. A worker that gives no answer in time gets its own verdict, "no answer within N s",
never a mismatch, in `golden check` (text, JSON) and `run` (table, JUnit), and the next golden gets a fresh
worker.

    golden_check_verdicts_test.py ATTNCHECK"""
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ElementTree

attncheck = sys.argv[1]
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code, timeout_seconds=None):
    environment = dict(os.environ)
    if timeout_seconds:
        environment["ATTNCHECK_WORKER_TIMEOUT"] = str(timeout_seconds)
    result = subprocess.run([attncheck, *map(str, arguments)], capture_output=True, text=True, env=environment)
    print(f"$ attncheck {' '.join(map(str, arguments))} -> exit {result.returncode}\n{result.stdout[-1500:]}"
          f"{result.stderr[-800:]}")
    expect(result.returncode == code, f"`{' '.join(map(str, arguments))}` exited {result.returncode}, expected {code}")
    return result


with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    worker = folder / "picky_worker.py"
    worker.write_text(textwrap.dedent(f"""\
        import subprocess, sys, time
        import h5py
        print("attncheck-worker 1 picky", flush=True)
        for line in sys.stdin:
            _, case, out = line.split()
            with h5py.File(case, "r") as file:
                hidden = int(file["geometry"].attrs["hidden_size"])
            if hidden == 32:
                print("unsupported no layers 32 wide here", flush=True)
                continue
            if hidden == 48:
                time.sleep(3600)  # never answers
            subprocess.run([{attncheck!r}, "golden", "run", "--impl", "reference", case, "-o", out], check=True,
                           stdout=subprocess.DEVNULL)
            print("ok", flush=True)
        """))
    implementation = f"exec:{sys.executable} {worker}"
    goldens = {}
    for hidden in (32, 48, 64):
        goldens[hidden] = folder / f"hidden{hidden}.h5"
        run("golden", "make", "--hidden", hidden, "--heads", "2", "--head-dim", "8", "--seq", "3", "-o",
            goldens[hidden], code=0)

    # Declined, then judged.
    text = run("golden", "check", goldens[32], goldens[64], "--impl", implementation, code=0)
    expect("DECLINED (unsupported)" in text.stdout and "no layers 32 wide here" in text.stdout,
           "the declined golden is marked with its reason")
    expect("1 of 2 golden files pass" in text.stdout and "1 declined" in text.stdout,
           "the other golden is judged; the summary counts the declined one apart")
    as_json = json.loads(run("golden", "check", goldens[32], goldens[64], "--impl", implementation, "--json",
                             code=0).stdout)
    entries = {pathlib.Path(entry["golden"]).name: entry for entry in as_json["files"]}
    expect("no layers 32 wide here" in entries.get("hidden32.h5", {}).get("declined", ""),
           "JSON: the declined golden's entry carries the reason")
    expect(entries.get("hidden64.h5", {}).get("passed") is True and as_json["declined"] == 1,
           "JSON: the other golden passed; one declined")
    everything = run("golden", "check", goldens[32], "--impl", implementation, code=1)
    expect("declined all 1 golden files; nothing was checked" in everything.stdout,
           "declining every golden is a failure: nothing was checked")

    # No answer in time: its own verdict, then a fresh worker for the next golden. Each stuck worker is killed
    # after the timeout and the supervisor's grace period (3 + 5 s of waiting): the three runs wait side by side.
    table_folder = folder / "table"
    table_folder.mkdir()
    for hidden in (48, 64):
        (table_folder / goldens[hidden].name).write_bytes(goldens[hidden].read_bytes())
    junit = folder / "run.xml"
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        stuck_run = pool.submit(run, "golden", "check", goldens[48], goldens[64], "--impl", implementation, code=1,
                                timeout_seconds=3)
        json_run = pool.submit(run, "golden", "check", goldens[48], "--impl", implementation, "--json", code=1,
                               timeout_seconds=3)
        table_run = pool.submit(run, "run", "--goldens", table_folder, "--impl", implementation, "--junit", junit,
                                code=1, timeout_seconds=3)
    stuck, table = stuck_run.result(), table_run.result()
    expect("NO ANSWER" in stuck.stdout and "no answer within 3 s" in stuck.stdout, "the timeout's own verdict")
    expect("MISMATCH" not in stuck.stdout, "a timeout is not a mismatch")
    expect("1 of 2 golden files pass" in stuck.stdout, "the next golden is judged by a fresh worker, and passes")
    as_json = json.loads(json_run.result().stdout)
    expect(as_json["files"][0].get("verdict") == "no_answer", f"JSON verdict: {as_json['files'][0]}")

    expect("no answer: " in table.stdout and "no answer within 3 s" in table.stdout, "run: the row says no answer")
    expect(any(line.startswith("hidden64.h5") and " pass " in line for line in table.stdout.splitlines()),
           "run: the next golden passes with a fresh worker")
    errors = [element for element in ElementTree.parse(junit).iter("error")]
    expect(len(errors) == 1 and errors[0].get("type") == "no-answer", "JUnit: an error of type no-answer")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: golden check judges every golden; a declined golden and a timeout each get their own verdict")
