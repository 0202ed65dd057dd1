#!/usr/bin/env python3
"""A misbehaving exec: worker for the worker.* ctests (exec_worker/worker_tests.cmake): it greets with protocol 1
(exec_worker/worker.hpp), then answers every "run CASE CANDIDATE" in one bad way, chosen by MODE:

    garbage        says ok after writing random bytes as the candidate
    nothing        says ok without writing a candidate
    fifo           says ok after making the candidate path a FIFO (opening it to read would block)
    symlink        says ok after making the candidate path a symbolic link to the case file
    folder         says ok after making the candidate path a folder
    copy-case      says ok after copying the case file (no /result) to the candidate path
    wrong-type     says ok after writing /result/out as int64
    huge-shape     says ok after writing /result/out declared as 2^27 float64 values (1 GiB), unwritten
    unsupported    says "unsupported " and a short reason (the well-behaved baseline)
    long-reason    says "unsupported " and a 20 MB reason with control bytes and invalid UTF-8
    dirty-error    says "error " and a message with terminal escapes and invalid UTF-8
    exit-3         exits with status 3 instead of answering
    silent         never answers (sleeps)
    daemonize      before greeting, starts a daemon (fork, setsid, fork) that sleeps; then says unsupported
    daemonize-hang the same daemon, then never answers
    exit-after-answer  answers its first case right (through `$ATTNCHECK_BINARY golden run --impl reference`),
                   then exits: it ends between cases
    exit-after-lingering  the same, but lingers a second before exiting, reading nothing: the next request is
                   written to it and left unread
    stray-line     answers right, but prints a stray line before each "ok" (out of step with the protocol)

    hostile_worker.py MODE

With ATTNCHECK_TREE_STATE set, it writes each request line to that file first (the test learns the case
file's folder, and that attncheck is mid-run); with ATTNCHECK_TREE_PIDFILE set, the daemon writes its pid
there (the test knows it existed)."""
import os
import shutil
import signal
import sys
import time

mode = sys.argv[1]


def daemonize():
    """Double fork with setsid in between: the daemon is in a new session, its parent gone, so without a
    subreaper it would be re-parented to init and outlive attncheck."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if "ATTNCHECK_TREE_PIDFILE" in os.environ:
                with open(os.environ["ATTNCHECK_TREE_PIDFILE"], "w") as pidfile:
                    pidfile.write(str(os.getpid()))
            # stdin, stdout and stderr closed like a daemon's: attncheck's pipes cannot keep it in view.
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            while True:
                time.sleep(1000)
        os._exit(0)
    os.wait()


if mode.startswith("daemonize"):
    daemonize()
print("attncheck-worker 1 hostile " + mode, flush=True)
for line in sys.stdin:
    request = line.split()
    if len(request) != 3 or request[0] != "run":
        print("error expected 'run CASE CANDIDATE'", flush=True)
        continue
    case, candidate = request[1], request[2]
    if "ATTNCHECK_TREE_STATE" in os.environ:
        with open(os.environ["ATTNCHECK_TREE_STATE"], "w") as state:
            state.write(line)
    if mode == "garbage":
        with open(candidate, "wb") as out:
            out.write(os.urandom(4096))
    elif mode == "nothing":
        pass
    elif mode == "fifo":
        os.mkfifo(candidate)
    elif mode == "symlink":
        os.symlink(case, candidate)
    elif mode == "folder":
        os.mkdir(candidate)
    elif mode == "copy-case":
        shutil.copyfile(case, candidate)
    elif mode in ("wrong-type", "huge-shape"):
        import h5py

        with h5py.File(candidate, "w") as out:
            result = out.create_group("result")
            result.attrs["precision"] = "fp64"
            result.attrs["tp_size"] = 1
            if mode == "wrong-type":
                result["out"] = [[1, 2], [3, 4]]
            else:
                result.create_dataset("out", shape=(1 << 27,), dtype="f8", chunks=(1 << 16,))
    elif mode == "unsupported":
        print("unsupported this worker declines every case", flush=True)
        continue
    elif mode == "long-reason":
        sys.stdout.buffer.write(b"unsupported \x1b[2J\x07\xff" + b"x" * (20 * 1000 * 1000) + b"\n")
        sys.stdout.flush()
        continue
    elif mode == "dirty-error":
        sys.stdout.buffer.write(b"error \x1b]0;pwned\x07 bad \xff\xfe bytes \xe2\x80\xae reversed\n")
        sys.stdout.flush()
        continue
    elif mode == "exit-3":
        sys.exit(3)
    elif mode in ("silent", "daemonize-hang"):
        while True:
            time.sleep(1000)
    elif mode == "daemonize":
        print("unsupported this worker only starts a daemon", flush=True)
        continue
    elif mode in ("exit-after-answer", "exit-after-lingering", "stray-line"):
        import subprocess

        subprocess.run([os.environ["ATTNCHECK_BINARY"], "golden", "run", "--impl", "reference", case, "-o",
                        candidate], check=True, stdout=subprocess.DEVNULL)
        if mode == "stray-line":
            print("loading weights...", flush=True)
        print("ok", flush=True)
        if mode == "exit-after-answer":
            os._exit(0)  # at once: gone long before attncheck has judged this case and prepared the next
        if mode == "exit-after-lingering":
            time.sleep(1)  # attncheck has most likely sent the next request by now; it stays unread
            os._exit(0)
        continue
    else:
        print(f"error unknown mode {mode}", flush=True)
        continue
    print("ok", flush=True)
