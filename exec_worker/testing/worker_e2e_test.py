#!/usr/bin/env python3
"""End-to-end checks of the exec: worker client against hostile workers (exec_worker/testing/hostile_worker.py,
setsid_worker.sh), one SCENARIO per ctest (exec_worker/worker_tests.cmake). Each makes its own small golden in
FOLDER, runs attncheck under a wall-clock guard (a hang fails the test), asserts the exit code and the
message, and prints PASS.

    worker_e2e_test.py ATTNCHECK FOLDER SCENARIO

Scenarios:
    candidate-MODE   (MODE: a hostile_worker.py candidate mode) `golden check` and `run`: exit 1, a FAIL
                     naming the worker and "not a valid candidate file" with MODE's reason, never exit 2,
                     no temporary path, no "golden make" advice
    long-reason      a 20 MB unsupported reason: the exit code of any unsupported case, output under
                     10 KB, cut marker present, control bytes escaped
    dirty-error      an error message with terminal escapes and invalid UTF-8: `golden check --json` exits
                     1 and prints valid JSON; the plain table holds no raw escape byte
    exit-3           a worker that exits with status 3 instead of answering: exit 1, status named
    silent           a worker that never answers, ATTNCHECK_WORKER_TIMEOUT=2: exit 1, "no answer within 2 s"
    exit-after-answer  a worker that ends between two goldens' cases: the second gets a fresh worker, both pass
    exit-after-lingering  the same, the worker ending a second after its answer (the next request is written
                     to it and left unread)
    stray-line       a worker that prints a stray line before each "ok": each golden fails for its own line
    tree-daemon      a worker whose daemon (fork, setsid, fork) would outlive it: none of its processes
                     left once attncheck exits
    tree-setsid      the same with sh's `setsid sleep &`
    tree-sigkill     attncheck killed with SIGKILL while the worker and its daemon run: within 10 s none
                     of their processes is left, nor the worker's temporary folder
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

# Where attncheck makes a worker's folder: $TMPDIR, as tempfile reads it (default /tmp).
WORKER_FOLDER_PREFIX = os.path.join(tempfile.gettempdir(), "attncheck-worker-")

attncheck, folder, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(folder, exist_ok=True)
golden = os.path.join(folder, "G.h5")
GUARD_SECONDS = 120  # far beyond any scenario's need: reaching it means attncheck hung


def fail(message, result=None):
    print(f"FAIL: {scenario}: {message}")
    if result is not None:
        print(f"--- exit {result.returncode}\n--- stdout ---\n{result.stdout[:4000]}\n--- stderr ---\n{result.stderr[:4000]}")
    sys.exit(1)


def run(arguments, environment=None):
    try:
        return subprocess.run([attncheck] + arguments, capture_output=True, text=True, errors="replace",
                              timeout=GUARD_SECONDS, env=environment)
    except subprocess.TimeoutExpired:
        fail(f"attncheck {' '.join(arguments)} did not finish within {GUARD_SECONDS} s")


def worker(mode):
    return f"exec:{sys.executable} {here}/hostile_worker.py {mode}"


made = run(["golden", "make", "--hidden", "16", "--heads", "2", "--head-dim", "8", "--seq", "4", "-o", golden])
if made.returncode != 0:
    fail("golden make failed", made)

# What a candidate of each mode must be failed for (the reader's own words, or the worker client's).
CANDIDATE_REASONS = {
    "garbage": "must be an HDF5 file",
    "nothing": "it wrote no file at the path it was given",
    "fifo": "it is a FIFO, not a regular file",
    "symlink": "it is a symbolic link, not a regular file",
    "folder": "it is a folder, not a regular file",
    "copy-case": "a candidate file keeps its tensors under /result",
    "wrong-type": "/result/out",
    "huge-shape": "at peak: must fit in the 256.0 MiB",
}


def check_bad_candidate(mode):
    reason = CANDIDATE_REASONS[mode]
    memory = ["--max-memory", "256M"] if mode == "huge-shape" else []  # the bound, whatever the machine
    checked = run(memory + ["golden", "check", "--impl", worker(mode), golden])
    table = run(memory + ["run", "--goldens", folder, "--impl", worker(mode)])
    for command, result in (("golden check", checked), ("run", table)):
        output = result.stdout + result.stderr
        if result.returncode != 1:
            fail(f"{command}: expected exit 1 (the implementation failed), got {result.returncode}", result)
        if "FAIL" not in output or "hostile_worker.py" not in output:
            fail(f"{command}: no FAIL naming the worker", result)
        if "is not a valid candidate file" not in output or reason not in output:
            fail(f"{command}: the message does not say the candidate is not valid because '{reason}'", result)
        if WORKER_FOLDER_PREFIX in output or "golden make" in output:
            fail(f"{command}: the message names the temporary path or advises `golden make`", result)
    print(f"PASS: a {mode} candidate is the worker's failure in golden check and run")


def unsupported_exit_code():
    """What `golden check` exits with when its implementation declines the golden, from a worker that
    declines with a short reason: a long reason must change nothing but the echo."""
    baseline = run(["golden", "check", "--impl", worker("unsupported"), golden])
    if baseline.returncode not in (1, 2) or "cannot run this case" not in baseline.stdout + baseline.stderr:
        fail("a worker that declines is not reported as unsupported", baseline)
    return baseline.returncode


def check_long_reason():
    expected = unsupported_exit_code()
    result = run(["golden", "check", "--impl", worker("long-reason"), golden])
    output = result.stdout + result.stderr
    if result.returncode != expected:
        fail(f"expected exit {expected}, as for any unsupported case, got {result.returncode}", result)
    if "cannot run this case" not in output:
        fail("not reported as unsupported", result)
    if len(output.encode()) >= 10_000:
        fail(f"{len(output.encode())} bytes of output for a 20 MB reason (expected under 10 KB)", result)
    if "more bytes cut]" not in output:
        fail("no cut marker", result)
    if "\x1b" in output or "\x07" in output or "\\x1b[2J\\x07\\xff" not in output:
        fail("control bytes and invalid UTF-8 not escaped", result)
    print(f"PASS: a 20 MB unsupported reason echoed in {len(output.encode())} bytes, cut and escaped")


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def check_dirty_error():
    as_json = run(["golden", "check", "--json", "--impl", worker("dirty-error"), golden])
    if as_json.returncode != 1:
        fail(f"--json: expected exit 1, got {as_json.returncode}", as_json)
    try:
        document = json.loads(as_json.stdout)
    except json.JSONDecodeError as error:
        fail(f"--json: output is not JSON ({error})", as_json)
    if not any("\\x1b]0;pwned\\x07" in text for text in strings_in(document)):
        fail("--json: the escaped message is missing", as_json)
    table = run(["golden", "check", "--impl", worker("dirty-error"), golden])
    output = table.stdout + table.stderr
    if table.returncode != 1 or "\x1b" in output or "\x07" in output or "\u202e" in output:
        fail("the table holds raw control characters or did not fail", table)
    if "\\x1b]0;pwned\\x07 bad \\xff\\xfe bytes \\u{202e} reversed" not in output:
        fail("the message is not shown escaped", table)
    print("PASS: control characters and invalid UTF-8 from a worker are escaped in tables and JSON")


def check_exit_status():
    result = run(["golden", "check", "--impl", worker("exit-3"), golden])
    if result.returncode != 1 or "exited without answering (exit status 3)" not in result.stdout + result.stderr:
        fail("expected exit 1 and 'exited without answering (exit status 3)'", result)
    print("PASS: a worker that exits without answering is a failure naming its exit status")


def check_silent():
    environment = dict(os.environ, ATTNCHECK_WORKER_TIMEOUT="2")
    started = time.monotonic()
    result = run(["golden", "check", "--impl", worker("silent"), golden], environment)
    if result.returncode != 1 or "no answer within 2 s" not in result.stdout + result.stderr:
        fail("expected exit 1 and 'no answer within 2 s'", result)
    print(f"PASS: a silent worker gets 'no answer within 2 s' ({time.monotonic() - started:.1f} s in all)")


def marked_processes(marker):
    """Processes (not zombies) whose environment holds marker: attncheck, the supervisor, the worker and
    everything it started inherit it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if marker.encode() not in environ.read():
                    continue
            with open(f"/proc/{entry}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry}: {command}")
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def kill_marked(marker):
    for line in marked_processes(marker):
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except OSError:
            pass


def check_tree(implementation, expected_processes):
    expected = unsupported_exit_code()
    marker = uuid.uuid4().hex
    pidfile = os.path.join(folder, "escaped.pid")
    if os.path.exists(pidfile):
        os.remove(pidfile)
    environment = dict(os.environ, ATTNCHECK_TREE_MARKER=marker, ATTNCHECK_TREE_PIDFILE=pidfile)
    result = run(["golden", "check", "--impl", implementation, golden], environment)
    if result.returncode != expected or "cannot run this case" not in result.stdout + result.stderr:
        fail(f"expected the worker's unsupported answer (exit {expected})", result)
    # The escaping process existed (else the test would pass for want of one), and is gone.
    if not os.path.exists(pidfile):
        fail("the escaping process never started (no pid written): nothing was tested")
    with open(pidfile) as written:
        escaped = written.read().strip()
    if os.path.exists(f"/proc/{escaped}") and open(f"/proc/{escaped}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        os.kill(int(escaped), signal.SIGKILL)
        fail(f"the escaping process {escaped} outlived attncheck")
    left = marked_processes(marker)
    if left:
        kill_marked(marker)
        fail("processes of the worker's tree outlived attncheck:\n  " + "\n  ".join(left))
    print(f"PASS: {expected_processes} ended with attncheck")


def check_tree_after_sigkill():
    marker = uuid.uuid4().hex
    state = os.path.join(folder, "request")
    if os.path.exists(state):
        os.remove(state)
    environment = dict(os.environ, ATTNCHECK_TREE_MARKER=marker, ATTNCHECK_TREE_STATE=state)
    process = subprocess.Popen([attncheck, "golden", "check", "--impl", worker("daemonize-hang"), golden],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
    # Mid-run: the worker has its case (it wrote the request down), and its daemon runs (attncheck, its
    # supervisor, the worker and the daemon carry the marker). Bounded wait.
    deadline = time.monotonic() + 60
    while not os.path.exists(state) or len(marked_processes(marker)) < 4:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            kill_marked(marker)
            fail(f"the worker did not get its case with its daemon running: {marked_processes(marker)}")
        time.sleep(0.1)
    time.sleep(0.2)  # the request line is complete on disk
    with open(state) as request:
        worker_folder = os.path.dirname(request.read().split()[1])
    if not worker_folder.startswith(WORKER_FOLDER_PREFIX) or not os.path.isdir(worker_folder):
        fail(f"unexpected case folder '{worker_folder}'")
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed = time.monotonic()
    while marked_processes(marker) or os.path.exists(worker_folder):
        if time.monotonic() - killed > 10:
            left = marked_processes(marker)
            kill_marked(marker)
            fail("10 s after attncheck was killed, processes of the worker's tree remain:\n  " + "\n  ".join(left)
                 + f"\n  or its folder {worker_folder} (exists: {os.path.exists(worker_folder)})")
        time.sleep(0.1)
    print(f"PASS: attncheck killed; the worker's tree and its folder were gone {time.monotonic() - killed:.1f} s later")


def check_between_cases(mode):
    """Two goldens through a worker that ends between cases (exit-after-answer) or falls out of step with the
    protocol (stray-line)."""
    second = os.path.join(folder, "G2.h5")
    made = run(["golden", "make", "--hidden", "24", "--heads", "2", "--head-dim", "8", "--seq", "3", "-o", second])
    if made.returncode != 0:
        fail("golden make failed", made)
    environment = dict(os.environ, ATTNCHECK_BINARY=attncheck)
    result = run(["golden", "check", "--impl", worker(mode), golden, second], environment)
    output = result.stdout + result.stderr
    if mode in ("exit-after-answer", "exit-after-lingering"):
        # The end between cases is noticed before the next case is sent, or the request it left unread goes to a
        # fresh worker: a fresh worker judges the second golden (it was exit 2
        # naming the removed folder's case file, the supervisor having removed the folder).
        if result.returncode != 0 or "2 of 2 golden files pass" not in output or WORKER_FOLDER_PREFIX in output:
            fail("a worker that exits after answering: expected both goldens judged by fresh workers, exit 0", result)
        print("PASS: a worker that ends between cases is restarted for the next case")
    else:
        # Each golden fails for its own stray line; the second is not judged by the first's late "ok".
        if result.returncode != 1 or output.count("'loading weights...', which is not ok") != 2:
            fail("a stray line: expected both goldens to fail for it, each with a fresh worker", result)
        if "wrote no file" in output:
            fail("a reply was read one case late", result)
        print("PASS: a worker out of step with the protocol fails that case and is restarted")


if scenario.startswith("candidate-"):
    check_bad_candidate(scenario[len("candidate-"):])
elif scenario == "long-reason":
    check_long_reason()
elif scenario == "dirty-error":
    check_dirty_error()
elif scenario == "exit-3":
    check_exit_status()
elif scenario == "silent":
    check_silent()
elif scenario == "tree-daemon":
    check_tree(worker("daemonize"), "a worker and its double-forked, setsid daemon")
elif scenario == "tree-setsid":
    check_tree(f"exec:sh {here}/setsid_worker.sh", "a sh worker and the sleeper it started with setsid")
elif scenario in ("exit-after-answer", "exit-after-lingering", "stray-line"):
    check_between_cases(scenario)
elif scenario == "tree-sigkill":
    check_tree_after_sigkill()
else:
    fail("unknown scenario")
