#!/usr/bin/env python3
"""ctest cli.run_junit: `attncheck run --junit` read back by a JUnit parser (junitparser), as a CI server
would read it. Runs the reference (passes), mutant-swap-query-heads (fails the Qwen3 golden: the failure
must name the worst tensor and the query heads it swaps) and, when LibTorch is built, torch-cpu-fp64-sdpa
(declines the softcap golden: a skipped case with its reason) on two committed goldens.

    junit_test.py ATTNCHECK GOLDEN_DATA_DIR"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

import junitparser

attncheck, data = sys.argv[1], pathlib.Path(sys.argv[2])
goldens = ["qwen3-0.6b_tp1.h5", "small_softcap_padding.h5"]
listing = subprocess.run([attncheck, "run", "--list"], check=True, capture_output=True, text=True).stdout
with_torch = "torch-cpu-fp64-sdpa\t" in listing
implementations = ["reference", "mutant-swap-query-heads"] + (["torch-cpu-fp64-sdpa"] if with_torch else [])

failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    for name in goldens:
        shutil.copyfile(data / name, folder / name)
    report = folder / "report.xml"
    command = [attncheck, "run", "--goldens", str(folder), "--junit", str(report)]
    for implementation in implementations:
        command += ["--impl", implementation]
    run = subprocess.run(command, capture_output=True, text=True)
    print(run.stdout)
    expect(run.returncode == 1, f"exit code {run.returncode}, expected 1 (the mutant fails)")
    xml = junitparser.JUnitXml.fromfile(str(report))

    suites = {suite.name: suite for suite in xml}
    expect(sorted(suites) == sorted(implementations), f"suites {sorted(suites)}, expected {sorted(implementations)}")
    expect(xml.tests == len(goldens) * len(implementations), f"{xml.tests} tests in all")
    for implementation, suite in suites.items():
        cases = {case.name: case for case in suite}
        expect(sorted(cases) == sorted(goldens), f"{implementation}: cases {sorted(cases)}")
        expect(suite.tests == len(goldens), f"{implementation}: tests attribute {suite.tests}")
        for case in suite:
            expect(case.classname == f"attncheck.{implementation}", f"classname {case.classname}")
            expect(case.time is not None and case.time >= 0, f"{implementation}/{case.name}: time {case.time}")

    reference = suites["reference"]
    expect(all(case.is_passed for case in reference), "the reference must pass both goldens")
    expect(reference.failures == 0 and reference.errors == 0, "the reference suite counts no failure")

    mutant = {case.name: case for case in suites["mutant-swap-query-heads"]}
    qwen = mutant["qwen3-0.6b_tp1.h5"]
    results = [result for result in qwen.result if isinstance(result, junitparser.Failure)]
    expect(len(results) == 1, f"mutant on qwen3: {len(results)} failure elements, expected 1")
    if results:
        failure = results[0]
        expect(failure.message.startswith("worst ") and "ulps" in failure.message,
               f"failure message names the worst tensor: {failure.message!r}")
        expect(failure.type == "mismatch", f"failure type {failure.type!r}")
        expect("query heads" in (failure.text or ""), f"failure text localises to query heads: {failure.text!r}")
    expect(suites["mutant-swap-query-heads"].failures >= 1, "the mutant suite counts its failures")

    if with_torch:
        sdpa = {case.name: case for case in suites["torch-cpu-fp64-sdpa"]}
        skipped = [result for result in sdpa["small_softcap_padding.h5"].result
                   if isinstance(result, junitparser.Skipped)]
        expect(len(skipped) == 1 and "softcap" in skipped[0].message,
               f"sdpa declines the softcap golden as a skipped case: {[s.message for s in skipped]}")
        expect(suites["torch-cpu-fp64-sdpa"].skipped == 1, "the sdpa suite counts one skipped")
        expect(sdpa["qwen3-0.6b_tp1.h5"].is_passed, "sdpa passes the Qwen3 golden")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"JUnit report read back: {len(implementations)} suites, {len(goldens) * len(implementations)} cases as expected")
