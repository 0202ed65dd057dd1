#!/usr/bin/env python3
"""ctest cli.run_junit: `attncheck run --junit` read back by a JUnit parser (junitparser), as a CI server
would read it. Runs the reference (passes), mutant-swap-query-heads (fails small_yarn_stated, GQA with an
explicit head_dim: the failure must name the worst tensor and the query heads it swaps) and, when LibTorch is
built, torch-cpu-fp64-sdpa (whose capabilities leave out softcap: the softcap golden is not stated, a skipped case with its reason and no
memory figures, since it never ran) on two committed goldens.

    junit_test.py ATTNCHECK GOLDEN_DATA_DIR"""
import pathlib
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

import junitparser

attncheck, data = sys.argv[1], pathlib.Path(sys.argv[2])
# Small goldens: what the report holds is the same on a model-sized one, and the failing mutant's fp64 yardstick
# (17 runs) takes a second under ASan, not half a minute as on Qwen3-0.6B.
gqa = "small_yarn_stated.h5"  # not a ladder golden: no support-matrix suite
goldens = [gqa, "small_softcap_padding.h5"]
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

    # Memory (PairMemory): every pair run, judged or declined, reports its peak against its layer's bytes, measured
    # alone at --jobs 1; the layer's bytes are the golden's, the same for every implementation. A pair not run
    # (not stated) has none.
    layer_of_golden = {}
    for suite_element in ElementTree.parse(report).getroot():
        for case_element in suite_element:
            where = f"{suite_element.get('name')}/{case_element.get('name')}"
            properties = {p.get("name"): p.get("value") for p in case_element.iter("property")}
            skipped = case_element.find("skipped")
            if skipped is not None and skipped.get("message", "").startswith("not stated: "):
                expect(not properties, f"{where}: memory figures for a pair that never ran: {sorted(properties)}")
                continue
            if not all(key in properties for key in ("peak_resident_added_bytes", "layer_bytes",
                                                     "peak_over_layer_bytes", "peak_measured")):
                expect(False, f"{where}: memory properties missing: {sorted(properties)}")
                continue
            peak, layer = int(properties["peak_resident_added_bytes"]), int(properties["layer_bytes"])
            expect(layer > 0, f"{where}: layer_bytes {layer}")
            expect(properties["peak_over_layer_bytes"] == f"{peak / layer:.2f}",
                   f"{where}: peak_over_layer_bytes {properties['peak_over_layer_bytes']} for {peak} / {layer}")
            expect(properties["peak_measured"] == "alone", f"{where}: peak_measured {properties['peak_measured']!r}")
            bound = int(properties.get("peak_bound_bytes", -1))
            expect(bound == 3 * layer + (64 << 20), f"{where}: peak_bound_bytes {bound}, not 3 x {layer} + 64 MiB")
            expect(properties.get("peak_within_bound") == ("yes" if peak <= bound else "no"),
                   f"{where}: peak_within_bound {properties.get('peak_within_bound')!r} for {peak} of {bound}")
            if suite_element.get("name") == "reference":
                expect(peak <= bound, f"{where}: the reference peaked at {peak} bytes, over its bound of {bound}")
            expect(layer_of_golden.setdefault(case_element.get("name"), layer) == layer,
                   f"{where}: layer_bytes {layer} differs from another implementation's on the same golden")

    # --jobs 2: a golden's two pairs side by side share one figure, the batch's peak, and say so.
    shared_report = folder / "shared.xml"
    shared = subprocess.run([attncheck, "run", "--goldens", str(folder), "--jobs", "2", "--junit", str(shared_report),
                             "--impl", "reference", "--impl", "reference-tp"], capture_output=True, text=True)
    expect(shared.returncode == 0, f"--jobs 2: exit code {shared.returncode}: {shared.stderr}")
    measured = [{p.get("name"): p.get("value") for p in case.iter("property")}
                for suite in ElementTree.parse(shared_report).getroot() for case in suite]
    expect(len(measured) == 2 * len(goldens), f"--jobs 2: {len(measured)} cases")
    expect(all(m.get("peak_measured") == "shared: the peak of this golden's 2 pairs, run 2 at a time" for m in measured),
           f"--jobs 2: peak_measured {[m.get('peak_measured') for m in measured]}")

    reference = suites["reference"]
    expect(all(case.is_passed for case in reference), "the reference must pass both goldens")
    expect(reference.failures == 0 and reference.errors == 0, "the reference suite counts no failure")

    mutant = {case.name: case for case in suites["mutant-swap-query-heads"]}
    results = [result for result in mutant[gqa].result if isinstance(result, junitparser.Failure)]
    expect(len(results) == 1, f"mutant on {gqa}: {len(results)} failure elements, expected 1")
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
        expect(len(skipped) == 1 and skipped[0].message.startswith("not stated: ") and "softcap" in skipped[0].message,
               f"sdpa does not state the softcap golden: a skipped case: {[s.message for s in skipped]}")
        expect(suites["torch-cpu-fp64-sdpa"].skipped == 1, "the sdpa suite counts one skipped")
        expect(sdpa[gqa].is_passed, f"sdpa passes {gqa}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"JUnit report read back: {len(implementations)} suites, {len(goldens) * len(implementations)} cases as expected")
