"""What the peers' ctests share (peers/*_test.py): each verdict fixed in advance and checked with expect(),
goldens run through an adapter and judged by `attncheck compare`, fuzz campaigns through an adapter's worker
with a fixed seed and case count (never a time budget), and the plain-framework reproductions in peers/repro/.
A test script runs its checks, then report() prints the summary table (peer | check | verdict) and returns
the exit status.
"""
import contextlib
import json
import os
import re
import subprocess
import sys
import time

import preforked

REPRO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repro")

failures = []
summary = []  # (peer, what, verdict) rows for docs/FRAMEWORKS.md's table


def expect(condition, message):
    print(("ok    " if condition else "FAIL  ") + message, flush=True)
    if not condition:
        failures.append(message)
    return condition


def run(command, **options):
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, **options)
    result.seconds = time.time() - started
    if os.environ.get("ATTNCHECK_PEER_TIMES"):  # what each command took, for measuring the tests
        print(f"      {result.seconds:6.2f} s  {' '.join(os.path.basename(part) for part in command)[:160]}")
    return result


# ---------------------------------------------------------------------------------------------
# Python commands forked from one process that imported the frameworks once (preforked.py says why)

_server = None


@contextlib.contextmanager
def fork_server(modules):
    """While open, launch() runs `python -m MODULE ...` and `python SCRIPT.py ...` commands as forks of a
    server that imported modules once."""
    global _server
    try:
        server = preforked.Server(modules)
    except (OSError, RuntimeError) as error:  # slower, never different: each command a process of its own
        print(f"note: {error}; every command runs as a process of its own", flush=True)
        yield None
        return
    with server:
        _server = server
        try:
            yield server
        finally:
            _server = None


def launch(command):
    """command as it runs: through the fork server when one is open and it is a Python module or script."""
    return list(command) if _server is None else _server.command(command)


def last_lines(text, count=12):
    return "\n".join(text.strip().splitlines()[-count:])


# ---------------------------------------------------------------------------------------------
# Goldens through an adapter, then `attncheck compare`

class Context:
    def __init__(self, attncheck_cli, work_dir, golden_dir):
        self.cli, self.work_dir, self.golden_dir = attncheck_cli, work_dir, golden_dir

    def golden(self, name):
        return os.path.join(self.golden_dir, name + ".h5")

    def out_dir(self, label):
        path = os.path.join(self.work_dir, label.replace(" ", "_"))
        os.makedirs(path, exist_ok=True)
        return path

    def compare(self, golden, candidate):
        """(exit status, parsed --json report or None)."""
        result = run([self.cli, "compare", "--json", golden, candidate])
        try:
            return result.returncode, json.loads(result.stdout)
        except json.JSONDecodeError:
            print(last_lines(result.stdout + result.stderr))
            return result.returncode, None


def candidate_path(out_dir, golden):
    return os.path.join(out_dir, os.path.basename(golden).removesuffix(".h5") + ".candidate.h5")


def failed_tensors(report):
    return sorted(tensor["name"] for tensor in (report or {}).get("tensors", [])
                  if tensor["status"] not in ("ok", "declined"))


def declined_tensors(report):
    return sorted(tensor["name"] for tensor in (report or {}).get("tensors", []) if tensor["status"] == "declined")


def worst_ulps(report):
    return max((tensor["error_ulps"] for tensor in (report or {}).get("tensors", []) if tensor["status"] == "ok"),
               default=float("nan"))


def run_adapter(context, adapter, flags, names, label):
    """One adapter process over the goldens `names`; returns (result, out_dir)."""
    out_dir = context.out_dir(label)
    result = run(launch([*adapter, *flags, *[context.golden(name) for name in names], "--output-dir", out_dir]))
    return result, out_dir


def judged_as_expected(condition, message, candidate):
    """expect(condition, message), then the candidate removed when it was judged as expected (one that was not
    stays for a look): the wide goldens' candidates are hundreds of megabytes each, gigabytes a test, which
    the kernel would otherwise write back to disk while the gate runs."""
    if expect(condition, message) and os.path.exists(candidate):
        os.remove(candidate)


def judged(context, adapter, flags, label, passing, refused=(), failing=None, failing_within=None, declined=None):
    """Runs the adapter on passing + refused + failing goldens in one process and checks every verdict:
    passing goldens pass `attncheck compare`; refused ones are answered with exit 2 naming the reason
    (refused: [(name, reason)]) and leave no candidate; failing ones ({name: [tensor, ...]}) fail exactly
    those tensors; failing_within ones ({name: [tensor, ...]}) fail, on some of those tensors and no other
    (for a defect whose reach depends on memory the kernel should not read). declined: a reason every
    passing candidate must decline its gradients with."""
    failing, failing_within = failing or {}, failing_within or {}
    names = list(passing) + [name for name, _ in refused] + list(failing) + list(failing_within)
    result, out_dir = run_adapter(context, adapter, flags, names, label)
    expect(result.returncode == (2 if refused else 0),
           f"{label}: adapter over {len(names)} goldens in {result.seconds:.0f} s, exit {result.returncode} "
           f"(want {2 if refused else 0})")
    if "Traceback" in result.stderr:
        print(last_lines(result.stderr, 30))
    worst = []
    for name in passing:
        status, report = context.compare(context.golden(name), candidate_path(out_dir, name))
        ok = status == 0 and report is not None and report.get("passed")
        if declined:
            ok &= bool(declined_tensors(report)) and all(
                declined in tensor["declined_reason"] for tensor in report["tensors"] if tensor["status"] == "declined")
        worst.append(worst_ulps(report))
        judged_as_expected(ok, f"{label}: {name} passes (worst {worst[-1]:.3g} ulps; {len(declined_tensors(report))} "
                                   f"declined; failed {failed_tensors(report)})", candidate_path(out_dir, name))
    for name, reason in refused:
        line = [text for text in result.stderr.splitlines() if name in text]
        expect(bool(line) and reason in line[0] and not os.path.exists(candidate_path(out_dir, name)),
               f"{label}: {name} refused naming '{reason}': {line[0][-160:] if line else 'no message'}")
    for name, tensors in failing.items():
        status, report = context.compare(context.golden(name), candidate_path(out_dir, name))
        judged_as_expected(status == 1 and failed_tensors(report) == sorted(tensors),
                           f"{label}: {name} fails exactly {sorted(tensors)} (exit {status}, failed "
                           f"{failed_tensors(report)})", candidate_path(out_dir, name))
    for name, tensors in failing_within.items():
        status, report = context.compare(context.golden(name), candidate_path(out_dir, name))
        failed = failed_tensors(report)
        judged_as_expected(status == 1 and failed and set(failed) <= set(tensors),
                           f"{label}: {name} fails, within {sorted(tensors)} (exit {status}, failed {failed})",
                           candidate_path(out_dir, name))
    summary.append((label, f"{len(passing)} goldens pass", f"worst {max(worst, default=float('nan')):.3g} ulps; "
                    f"{len(refused)} refused; {len(failing) + len(failing_within)} named failures"))
    return out_dir


def refused_run(adapter, flags, golden, reason, label):
    result = run([*adapter, *flags, golden, "-o", os.path.join(os.path.dirname(golden), "never.h5")])
    expect(result.returncode == 2 and reason in result.stderr and "Traceback" not in result.stderr,
           f"{label}: exit {result.returncode} (want 2), message: {last_lines(result.stderr, 1)[-200:]}")


# ---------------------------------------------------------------------------------------------
# Fuzzing through the worker protocol

FUZZ_LINE = re.compile(r"^fuzz .*: (\d+) cases \((\d+) unsupported\) in ", re.M)
FAIL_LINE = re.compile(r"^FAIL matches-reference: (\S+) (\S+)", re.M)
REPRO_LINE = re.compile(r"^\s*repro: (\S+)", re.M)
LARGEST_SEQ = re.compile(r"largest: .*?seq (\d+)")


def fuzz(context, worker, profile, cases, seed, label):
    """(exit status, cases run, unsupported, first failing tensor or None, repro path or None, text)."""
    repro_dir = context.out_dir(f"repro_{label}")
    result = run([context.cli, "fuzz", "--impl", "exec:" + " ".join(launch(worker)), "--profile", profile,
                  "--cases", str(cases), "--seed", str(seed), "--repro-dir", repro_dir])
    text = result.stdout + result.stderr
    counts = FUZZ_LINE.findall(text)
    done, unsupported = (int(counts[-1][0]), int(counts[-1][1])) if counts else (0, 0)
    failed = FAIL_LINE.search(text)
    repro = REPRO_LINE.search(text)
    print(f"      {label}: {result.seconds:.0f} s")
    return result.returncode, done, unsupported, failed.group(1) if failed else None, \
        repro.group(1) if repro else None, text


def fuzz_clean(context, worker, profile, cases, seed, label):
    """The campaign must judge every one of `cases` and fail none. The peers' case counts are sized for the gate's
    15 minutes (docs/MEASUREMENTS.md, "The gate's budgets"); the larger campaigns run once outside the ctests, all
    clean, are in docs/OPERATORS.md and docs/FRAMEWORKS.md."""
    status, done, unsupported, failed, _, text = fuzz(context, worker, profile, cases, seed, label)
    largest = max((int(seq) for seq in LARGEST_SEQ.findall(text)), default=0)
    ok = expect(status == 0 and done == cases,
                f"{label}: fuzz {profile} seed {seed}: {done} of {cases} cases (the largest case: seq {largest}), "
                f"{unsupported} unsupported, exit {status} (want 0)"
                f"{'' if failed is None else ', first failure ' + failed}")
    if not ok:
        print(last_lines(text, 20))
    summary.append((label, f"fuzz {profile} seed {seed}", f"{cases} cases clean ({cases - unsupported} judged, "
                    f"{unsupported} unsupported; the largest case: seq {largest})" if ok else "FAILED"))


def fuzz_named_failure(context, worker, profile, cases, seed, label, tensor_prefix, control=None):
    """The fuzz run must fail on a tensor starting with tensor_prefix; control (a worker command) must then
    pass the shrunk repro, which tells the kernel's finding from the wrapper's."""
    status, done, _, failed, repro, text = fuzz(context, worker, profile, cases, seed, label)
    ok = expect(status == 1 and failed is not None and failed.startswith(tensor_prefix) and repro,
                f"{label}: fuzz {profile} seed {seed} fails on {failed} (want {tensor_prefix}...), exit {status}")
    if not ok:
        print(last_lines(text, 20))
    if control and repro:
        replay = run([context.cli, "replay", repro, "--impl", "exec:" + " ".join(launch(control))])
        expect(replay.returncode == 0, f"{label}: the shrunk case passes with the control "
                                       f"{' '.join(control[3:])} (exit {replay.returncode})")
    summary.append((label, f"fuzz {profile} seed {seed}", f"named failure on {failed}" if ok else "UNEXPECTED"))


def repro_script(name, label):
    """A plain-PyTorch reproduction in peers/repro/ must still show its defect (exit 1, 'DEFECT')."""
    result = run(launch([sys.executable, os.path.join(REPRO_DIR, name)]))
    expect(result.returncode == 1 and "DEFECT" in result.stdout,
           f"{label}: peers/repro/{name} still reproduces (exit {result.returncode}): "
           f"{last_lines(result.stdout, 1)}")
    print("      " + "\n      ".join(result.stdout.strip().splitlines()))


def repro_not_reproduced(name, label, capability):
    """A repro whose defect lives in one CPU's kernels, run on another: it must say so (exit 0, "not
    reproduced" naming this CPU's capability), not pass silently or fail for another reason."""
    result = run(launch([sys.executable, os.path.join(REPRO_DIR, name)]))
    expect(result.returncode == 0 and "not reproduced" in result.stdout and capability in result.stdout,
           f"{label}: peers/repro/{name} on a {capability} CPU reports its defect not reproduced "
           f"(exit {result.returncode}): {last_lines(result.stdout, 1)}")
    print("      " + "\n      ".join(result.stdout.strip().splitlines()))


# ---------------------------------------------------------------------------------------------
# The conformance ladder's support matrix through `attncheck run`

def ladder_expectation(passing, status, not_stated):
    """{rung: (status, text its reason must contain)}: passing rungs with status (pass, pass_with_declined),
    not_stated {rung: the feature its reason names}."""
    expected = {rung: (status, "") for rung in passing}
    expected.update((rung, ("not_stated", why)) for rung, why in not_stated.items())
    return expected


def ladder(context, worker, expected, label):
    """`attncheck run` over the 15 ladder goldens with the worker: its support matrix must read `expected`
    (ladder_expectation). The matrix's cells go into the summary (docs' support matrices are read from it)."""
    folder = context.out_dir("ladder_goldens")
    for name in sorted(os.listdir(context.golden_dir)):
        if name.startswith("ladder_") and name.endswith(".h5") and not os.path.exists(os.path.join(folder, name)):
            os.symlink(os.path.join(os.path.abspath(context.golden_dir), name), os.path.join(folder, name))
    result = run([context.cli, "run", "--goldens", folder, "--impl", "exec:" + " ".join(launch(worker)), "--json"])
    try:
        rungs = {row["rung"]: row for row in json.loads(result.stdout)["support_matrix"]["rungs"]}
    except (json.JSONDecodeError, KeyError):
        print(last_lines(result.stdout + result.stderr, 20))
        rungs = {}
    got = {rung: (next(iter(row["status"].values())), " ".join(row["why"].values())) for rung, row in rungs.items()}
    wrong = {rung: got.get(rung) for rung, (status, why) in expected.items()
             if got.get(rung, ("missing", ""))[0] != status or why not in got[rung][1]}
    passing = sorted(rung for rung, (status, _) in got.items() if status.startswith("pass"))
    expect(result.returncode == 0 and not wrong and set(got) == set(expected),
           f"{label}: ladder support matrix in {result.seconds:.0f} s, exit {result.returncode}: rungs "
           f"{', '.join(passing)} pass, the others not stated by name (unexpected: {wrong})")
    cells = "; ".join(f"{rung} {status}" + (f" ({why})" if why else "") for rung, (status, why) in sorted(got.items()))
    summary.append((label, "ladder", cells if not wrong else "UNEXPECTED"))


def report():
    """Prints the summary rows and the failure count; returns the exit status (1 when any check failed)."""
    print("peer | check | verdict")
    for row in summary:
        print(" | ".join(row))
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0
