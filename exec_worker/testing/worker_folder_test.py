"""attncheck's worker folder is attncheck's (ctest worker.folder_held_by_descriptor): a hostile worker cannot turn
attncheck's own file operations against it, nor have attncheck's failure blamed on a layer.

  write-blocked  the worker, learning its folder from the first request, makes a folder named like the next case
                 file: attncheck cannot write that case, which is attncheck's internal error (exit 3) naming the
                 path, not the worker's FAIL (exit 1), and nothing is shrunk as a failure.
  swapped        the worker renames its folder away and puts a symbolic link to a decoy folder in its place,
                 the decoy holding candidate1.h5/keep: attncheck writes, reads and removes through the
                 descriptor it holds, so the decoy is untouched (no case file written there, nothing removed).

    python3 worker_folder_test.py ATTNCHECK WORK_FOLDER
"""
import os
import pathlib
import shutil
import subprocess
import sys

WORKER = r'''
import os, sys
mode, decoy = sys.argv[1], sys.argv[2]
print("attncheck-worker 1 hostile folder worker", flush=True)
first = True
for line in sys.stdin:
    _, case, candidate = line.split()
    folder = os.path.dirname(case)
    if first and mode == "write-blocked":
        os.mkdir(os.path.join(folder, "case1.h5"))
    if first and mode == "swapped":
        os.rename(folder, folder + ".moved")
        os.symlink(decoy, folder)
    first = False
    print("error this worker only plays with its folder", flush=True)
'''


def main():
    attncheck, work = sys.argv[1], pathlib.Path(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tmpdir, decoy = work / "tmp", work / "decoy"
    tmpdir.mkdir()
    (decoy / "candidate1.h5").mkdir(parents=True)
    (decoy / "candidate1.h5" / "keep").write_text("attncheck must not remove this")
    worker = work / "worker.py"
    worker.write_text(WORKER)
    golden = work / "small.h5"
    subprocess.run([attncheck, "golden", "make", "--hidden", "8", "--heads", "2", "--head-dim", "4", "--seq", "4",
                    "-o", golden], check=True, capture_output=True)
    environment = dict(os.environ, TMPDIR=str(tmpdir))
    failures = []

    def run(mode):
        implementation = f"exec:{sys.executable} {worker} {mode} {decoy}"
        return subprocess.run([attncheck, "golden", "check", golden, golden, "--impl", implementation],
                              capture_output=True, text=True, env=environment, check=False)

    blocked = run("write-blocked")
    print(f"write-blocked: exit {blocked.returncode}: {blocked.stderr.strip()[-300:]}")
    if blocked.returncode != 3:
        failures.append(f"write-blocked: exit {blocked.returncode}, expected 3 (attncheck's internal error)")
    if "internal error" not in blocked.stderr or "cannot write the case file" not in blocked.stderr \
            or "case1.h5" not in blocked.stderr:
        failures.append("write-blocked: stderr does not name attncheck's failure and the case file's path")

    swapped = run("swapped")
    print(f"swapped: exit {swapped.returncode}")
    if swapped.returncode != 1:
        failures.append(f"swapped: exit {swapped.returncode}, expected 1 (the worker's errors)")
    if sorted(path.name for path in decoy.iterdir()) != ["candidate1.h5"] \
            or not (decoy / "candidate1.h5" / "keep").is_file():
        failures.append(f"swapped: the decoy changed: {sorted(str(p) for p in decoy.rglob('*'))}")
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
