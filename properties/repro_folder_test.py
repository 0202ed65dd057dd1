"""Repro files never land in the current folder unasked (ctest fuzz.repro_folder_default): `fuzz` and `mutants`
without --repro-dir, run in an empty working folder with TMPDIR pointing elsewhere, fail as they must, print a
repro path inside a fresh $TMPDIR/attncheck-repro-XXXXXX, and leave the working folder empty.

    python3 repro_folder_test.py ATTNCHECK
"""
import os
import re
import subprocess
import sys
import tempfile


def main():
    attncheck = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory(prefix="attncheck-cwd-") as cwd, \
            tempfile.TemporaryDirectory(prefix="attncheck-tmpdir-") as tmpdir:
        environment = dict(os.environ, TMPDIR=tmpdir)
        for arguments, key in ((["fuzz", "--impl", "mutant-quotient-scale", "--cases", "50"], "repro: "),
                               (["mutants", "--mutant", "mutant-quotient-scale", "--json"], '"repro": "')):
            done = subprocess.run([attncheck, *arguments], cwd=cwd, env=environment, capture_output=True, text=True,
                                  check=False)
            found = re.search(re.escape(key) + r"(\S+?\.h5)", done.stdout)
            where = found.group(1) if found else ""
            if arguments[0] == "fuzz" and done.returncode != 1:
                failures.append(f"fuzz of a mutant: exit {done.returncode}, expected 1")
            if not where.startswith(os.path.join(tmpdir, "attncheck-repro-")) or not os.path.isfile(where):
                failures.append(f"{arguments[0]}: repro '{where}' is not a file in a fresh {tmpdir}/attncheck-repro-*")
            print(f"{arguments[0]}: exit {done.returncode}, repro {where}")
        if os.listdir(cwd):
            failures.append(f"the working folder holds {os.listdir(cwd)}: nothing may be written there unasked")
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
