#!/usr/bin/env python3
"""Every test carries one cost label (fast, medium or slow) and a subject label, and cmake/test_costs.cmake
names no test that does not exist (a renamed test would silently fall into the fast tier).

    check_test_labels.py BUILD_DIR TEST_COSTS_CMAKE [--check-stale]

--check-stale: also that every name in TEST_COSTS_CMAKE is a test (only where every part is built).

Lists the tests with `ctest --show-only=json-v1` (which also lists each GoogleTest executable's tests)."""
import json
import re
import subprocess
import sys

COSTS = {"fast", "medium", "slow"}
SUBJECTS = {"unit", "golden", "property", "peer", "python", "gpu", "reference"}


def main() -> int:
    build, costs_file = sys.argv[1], sys.argv[2]
    check_stale = "--check-stale" in sys.argv[3:]
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True,
                             check=True)
    tests = json.loads(listing.stdout)["tests"]
    problems = []
    names = set()
    for test in tests:
        name = test["name"]
        names.add(re.sub(r"  #.*$", "", name))  # a GoogleTest parameter's comment, as test_costs.cmake leaves it off
        labels = set()
        for entry in test.get("properties", []):
            if entry["name"] == "LABELS":
                labels.update(entry["value"])
        cost = labels & COSTS
        if len(cost) != 1:
            problems.append(f"{name}: cost labels {sorted(cost) or 'none'}; want exactly one of fast, medium, slow")
        if not labels & SUBJECTS:
            problems.append(f"{name}: no subject label (one of {', '.join(sorted(SUBJECTS))}); labels {sorted(labels)}")
    listed = re.findall(r'^\s+"(.*)"\s*$', open(costs_file).read(), re.MULTILINE)
    for name in listed if check_stale else []:
        if name not in names:
            problems.append(f"{costs_file} names {name}, which is no test: remove or rename it")
    if len(tests) < 100:
        problems.append(f"only {len(tests)} tests listed: the listing failed")
    for problem in problems:
        print("FAIL:", problem)
    if problems:
        return 1
    print(f"PASS: {len(tests)} tests, each with one cost label and a subject; {len(listed)} names in "
          f"{costs_file.split('/')[-1]}, all tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
