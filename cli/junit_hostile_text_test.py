"""`attncheck run --junit` writes XML a real parser reads whatever the names and reasons hold (ctest
cli.run_junit_hostile_text; issue 56.10). Built here: a golden whose file name holds a control character and a
byte that is not UTF-8, and a worker whose error reason holds U+FFFE, U+FFFF and a bell. The report is parsed
by Python's expat (xml.etree.ElementTree); each disallowed character must be there, written visibly
(\\u0001, \\xFF, \\uFFFE, \\uFFFF; the bell \\x07, as the worker protocol's reader writes it), and every verdict counted.

    python3 junit_hostile_text_test.py ATTNCHECK WORK_FOLDER
"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

WORKER = r'''
import sys
print("attncheck-worker 1 hostile reasons", flush=True)
for line in sys.stdin:
    print("error reason with \ufffe and \uffff and a bell \a", flush=True)
'''


def main():
    attncheck, work = sys.argv[1], os.fsencode(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    goldens = os.path.join(work, b"goldens")
    os.makedirs(goldens)
    golden = os.path.join(goldens, b"bad\x01\xffname.h5")
    subprocess.run([os.fsencode(attncheck), b"golden", b"make", b"--hidden", b"8", b"--heads", b"2", b"--head-dim",
                    b"4", b"--seq", b"4", b"-o", golden], check=True, capture_output=True)
    worker = os.path.join(work, b"worker.py")
    with open(worker, "w", encoding="utf-8") as file:
        file.write(WORKER)
    report = os.path.join(work, b"report.xml")
    run = subprocess.run([os.fsencode(attncheck), b"run", b"--goldens", goldens, b"--impl", b"reference", b"--impl",
                          b"exec:" + os.fsencode(sys.executable) + b" " + worker, b"--junit", report],
                         capture_output=True, check=False)
    failures = []
    if run.returncode != 1:  # the worker's errors fail the run
        failures.append(f"run: exit {run.returncode}, expected 1: {run.stderr[-300:]!r}")
    try:
        tree = ElementTree.parse(report)
    except ElementTree.ParseError as error:
        failures.append(f"the report does not parse: {error}")
    else:
        cases = list(tree.iter("testcase"))
        names = [case.get("name") for case in cases]
        print("testcases:", names)
        if len(cases) != 2 or any(name != "bad\\u0001\\xFFname.h5" for name in names):
            failures.append(f"testcase names {names!r}: expected the golden's name twice, written visibly")
        errors = [error.get("message") for error in tree.iter("error")]
        print("errors:", errors)
        # The bell: the worker protocol's reader already writes control characters visibly (\x07).
        if len(errors) != 1 or "\\uFFFE and \\uFFFF and a bell \\x07" not in errors[0]:
            failures.append(f"error messages {errors!r}: expected the worker's reason, written visibly")
        root = tree.getroot()
        if (root.get("tests"), root.get("errors"), root.get("failures")) != ("2", "1", "0"):
            failures.append(f"counts tests={root.get('tests')} errors={root.get('errors')} "
                            f"failures={root.get('failures')}: expected 2, 1, 0")
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
