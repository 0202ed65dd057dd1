"""ctest python.conformance: every committed golden's `out` and `decode/out` recomputed from the file alone by
python/attncheck's own numpy forward (attncheck.conformance), not by attncheck reading its own files, within
SCHEMA.md's fp64 tolerance (2^16 ulps of each tensor's scale), and every integrity digest recomputed.

    PYTHONPATH=python python3 python/tests/conformance_goldens.py golden/data/*.h5 \
        --negative golden/data/small_softcap_padding.h5 --negative golden/data/smollm3-3b_layer3_tp2.h5

Then it shows that the check can fail: on temporary copies of the --negative goldens, a change the answers no
longer fit (an expected value moved by 1e-9 relative, a geometry attribute changed), resealed with a fresh
integrity digest so that only the recomputation can notice, must be reported as a mismatch of that tensor;
and the same change not resealed must be reported by the digest. Exit status 0 only when every golden
conforms and every negative check is caught. Not named test_*.py: python.package's discovery leaves it to
this ctest.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from attncheck import conformance  # noqa: E402
from attncheck.integrity import ATTRIBUTE, integrity_digest  # noqa: E402


def reseal(path):
    with h5py.File(path, "r+") as h5:
        h5.attrs[ATTRIBUTE] = integrity_digest(h5, path)


def perturb_expected(path, name, relative=1e-9):
    """Move the largest |value| of /expected/<name> by `relative` of itself."""
    with h5py.File(path, "r+") as h5:
        dataset = h5[f"expected/{name}"]
        values = dataset[()]
        where = np.unravel_index(int(np.argmax(np.abs(values))), values.shape)
        values[where] *= 1.0 + relative
        dataset[...] = values
    return where


def change_geometry(path):
    """A geometry attribute the stored answers depend on, changed to another valid value (read_case accepts
    the file): the softcap ×1.25 when the layer has one, else rope_theta ×1.25 when it has RoPE, else a
    sliding window of 2 keys added (a NoPE layer without a window)."""
    with h5py.File(path, "r+") as h5:
        attributes = h5["geometry"].attrs
        if "softcap" in attributes or attributes["rotary_dim"] > 0:
            name = "softcap" if "softcap" in attributes else "rope_theta"
            attributes[name] = np.float64(attributes[name] * 1.25)
            return f"{name} x 1.25"
        if "sliding_window" not in attributes:
            attributes["sliding_window"] = np.int64(2)
            return "sliding_window 2 added"
        raise ValueError(f"{path}: no geometry change planned for this layer; choose another --negative golden")


def expect_mismatch(label, path, tensor_prefix, integrity_ok):
    """The check of `path` must fail, with a tensor named tensor_prefix... beyond tolerance (or, when the
    file was not resealed, the digest)."""
    report = conformance.check_golden(path)
    print(f"  negative check, {label}: {conformance.format_report(report)}")
    problems = []
    if report["passed"]:
        problems.append("reported as passing")
    if integrity_ok:
        if not report["integrity"] or not report["integrity"][0]:
            problems.append("the resealed copy's digest did not verify (the check must come from the forward)")
        if not any(t["name"].startswith(tensor_prefix) and not t["passed"] for t in report["tensors"]):
            problems.append(f"no mismatch of {tensor_prefix} reported")
    elif not report["integrity"] or report["integrity"][0]:
        problems.append("the changed, unsealed copy's digest was not reported")
    for problem in problems:
        print(f"  NEGATIVE CHECK FAILED ({label}): {problem}")
    return not problems


def negative_checks(golden, folder):
    """True when every planted change in copies of `golden` is caught."""
    base = os.path.basename(golden)
    with h5py.File(golden, "r") as h5:
        sketched = "sketches/out" in h5["expected"]
    expected_name = "sketches/out" if sketched else "out"
    compared_name = "out#sketch" if sketched else "out"
    caught = True

    copy = os.path.join(folder, f"expected_moved_{base}")
    shutil.copyfile(golden, copy)
    where = perturb_expected(copy, expected_name)
    reseal(copy)
    caught &= expect_mismatch(f"{base} /expected/{expected_name}{list(map(int, where))} x (1 + 1e-9), resealed",
                              copy, compared_name, integrity_ok=True)

    copy = os.path.join(folder, f"expected_moved_unsealed_{base}")
    shutil.copyfile(golden, copy)
    perturb_expected(copy, expected_name)
    caught &= expect_mismatch(f"{base} /expected/{expected_name} moved, not resealed", copy, compared_name,
                              integrity_ok=False)

    copy = os.path.join(folder, f"geometry_changed_{base}")
    shutil.copyfile(golden, copy)
    attribute = change_geometry(copy)
    reseal(copy)
    caught &= expect_mismatch(f"{base} /geometry: {attribute}, resealed", copy, compared_name,
                              integrity_ok=True)
    return caught


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("goldens", nargs="+")
    parser.add_argument("--negative", action="append", default=[],
                        help="a small golden to plant changes in (temporary copies); repeatable")
    args = parser.parse_args()
    began = time.monotonic()
    failed = []
    for path in args.goldens:
        report = conformance.check_golden(path)
        print(conformance.format_report(report), flush=True)
        if not report["passed"]:
            failed.append(os.path.basename(path))
    print(f"{len(args.goldens) - len(failed)} of {len(args.goldens)} goldens conform"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if not args.negative:
        print("no --negative golden: the check is not shown able to fail")
        return 1
    uncaught = []
    with tempfile.TemporaryDirectory(prefix="attncheck_conformance_") as folder:
        for golden in args.negative:
            if not negative_checks(golden, folder):
                uncaught.append(os.path.basename(golden))
    print("negative checks: " + ("every planted change caught" if not uncaught
                                 else f"NOT CAUGHT in copies of {', '.join(uncaught)}"))
    print(f"{time.monotonic() - began:.1f} s")
    return 1 if failed or uncaught else 0


if __name__ == "__main__":
    sys.exit(main())
