"""A fuzz failure is always reported, and a repro that cannot be written is said so (ctest
fuzz.repro_in_the_way; issue 56.9). Each scenario builds its hostile input here:

  folder, fifo, dangling,  a folder, a FIFO, a dangling symbolic link or one to a victim file stands at the
  symlink                  repro file's path (its name is learnt from a first run: the same seed gives the same
                           case): the failure and its shrunk case are printed, then "repro: not written: '<path>'
                           is ...", no replay command, exit 1; the thing in the way is left as it was and the
                           victim is untouched (it was overwritten).
  regular                  a regular file stands there: replaced by the repro, which replays.
  folder-replaced          a worker replaces the repro folder (not made yet) by a regular file while the
                           run goes on: reported, "not written", exit 1 (it was an internal error, exit 3).
  listing-fifo             `attncheck replay` of a sequence folder whose sequence.txt is a FIFO refuses it at
                           once (exit 2, naming the FIFO) instead of waiting for a writer.

    python3 repro_in_the_way_test.py ATTNCHECK WORK_FOLDER
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

MUTANT = ["--impl", "mutant-kv-head-modulo", "--cases", "200", "--seed", "1"]

# Fails every case, and on its first request puts a regular file where the repro folder goes.
WORKER = r'''
import sys
blocker = sys.argv[1]
print("attncheck-worker 1 repro folder blocker", flush=True)
for line in sys.stdin:
    with open(blocker, "w") as planted:
        planted.write("not a folder\n")
    print("error this worker fails every case", flush=True)
'''


def fuzz(attncheck, *arguments):
    return subprocess.run([attncheck, "fuzz", *arguments], capture_output=True, text=True, timeout=300, check=False)


def main():
    attncheck, work = sys.argv[1], pathlib.Path(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    failures = []

    first = fuzz(attncheck, *MUTANT, "--repro-dir", str(work / "first"))
    found = re.search(r"^  repro: (\S+\.h5)$", first.stdout, re.MULTILINE)
    if first.returncode != 1 or not found:
        print(first.stdout, first.stderr)
        sys.exit(f"the first run must fail with a repro (exit {first.returncode})")
    name = pathlib.Path(found.group(1)).name

    victim = work / "victim.txt"
    victim.write_text("attncheck must not write here\n")
    kinds = {"folder": "a folder", "fifo": "a FIFO", "dangling": "a symbolic link", "symlink": "a symbolic link",
             "regular": None}
    for kind, word in kinds.items():
        folder = work / kind
        folder.mkdir()
        target = folder / name
        if kind == "folder":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "dangling":
            os.symlink(work / "nowhere", target)
        elif kind == "symlink":
            os.symlink(victim, target)
        else:
            target.write_text("an earlier repro\n")
        run = fuzz(attncheck, *MUTANT, "--repro-dir", str(folder))
        print(f"{kind}: exit {run.returncode}")
        if run.returncode != 1 or "FAIL matches-reference" not in run.stdout or "  where:\n" not in run.stdout:
            failures.append(f"{kind}: the failure is not reported (exit {run.returncode}): {run.stderr[-300:]}")
        if word is not None:
            expected = f"  repro: not written: '{target}' is {word}"
            if expected not in run.stdout:
                failures.append(f"{kind}: no line {expected!r} in: {run.stdout[-600:]}")
            if "replay:" in run.stdout:
                failures.append(f"{kind}: a replay command is printed for a repro that was not written")
        else:
            if "replay:" not in run.stdout:
                failures.append("regular: no replay command")
            replay = subprocess.run([attncheck, "replay", str(target), "--impl", "reference"], capture_output=True,
                                    text=True, timeout=120, check=False)
            if replay.returncode != 0:
                failures.append(f"regular: the repro does not replay (exit {replay.returncode}): {replay.stderr}")
        if victim.read_text() != "attncheck must not write here\n":
            failures.append(f"{kind}: the symbolic link's target was written")
        still = {"folder": target.is_dir(), "fifo": target.is_fifo(), "dangling": target.is_symlink(),
                 "symlink": target.is_symlink(), "regular": target.is_file()}[kind]
        if not still:
            failures.append(f"{kind}: what stood at the repro's path was changed")

    worker = work / "blocker.py"
    worker.write_text(WORKER)
    repro_folder = work / "replaced" / "repros"
    repro_folder.parent.mkdir()
    run = fuzz(attncheck, "--impl", f"exec:{sys.executable} {worker} {repro_folder}", "--cases", "5",
               "--repro-dir", str(repro_folder))
    print(f"folder-replaced: exit {run.returncode}")
    if run.returncode != 1 or "repro: not written:" not in run.stdout or str(repro_folder) not in run.stdout:
        failures.append(f"folder-replaced: exit {run.returncode}, stdout {run.stdout[-500:]!r}, "
                        f"stderr {run.stderr[-300:]!r}")

    sequence = work / "sequence"
    sequence.mkdir()
    os.mkfifo(sequence / "sequence.txt")
    try:
        replay = subprocess.run([attncheck, "replay", str(sequence), "--impl", "reference"], capture_output=True,
                                text=True, timeout=60, check=False)
        print(f"listing-fifo: exit {replay.returncode}")
        if replay.returncode != 2 or "a FIFO" not in replay.stderr:
            failures.append(f"listing-fifo: exit {replay.returncode}, stderr {replay.stderr[-300:]!r}")
    except subprocess.TimeoutExpired:
        failures.append("listing-fifo: replay waited on the FIFO")

    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
