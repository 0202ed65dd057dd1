#!/usr/bin/env python3
"""A fork server for the peers' ctests: their adapter processes and fuzz workers start as forks of one process
that has already imported torch (and JAX where the test runs it), instead of as fresh interpreters.

Why: in the gate, 123 Python processes imported torch (1.9 s of CPU each) and 14 JAX (1.2 s more); the peer
tests start most of them, one per adapter run, fuzz campaign and ladder (measured 2026-12-07,
docs/MEASUREMENTS.md "Peers' processes forked"). The gate's CPUs are busy all through its main ctest, so
those imports were wall time. Nothing else changes: a forked worker runs the same module's `__main__` with the
client's arguments, working folder, environment and standard streams, and its exit status is the client's (a
worker ended by a signal: 128 + the signal, as a shell reports it). One thing differs, and only in time: the
server keeps freed memory for reuse (_keep_heap_for_reuse below), and its workers inherit that.

    preforked.py serve MODULE...          the server (started by Server below): imports MODULEs, then forks
                                          a session per connection on the socket named on its stdin
    preforked.py run SOCKET -m MODULE ARG...    a client: MODULE run as `python -m MODULE ARG...` in a fork
    preforked.py run SOCKET SCRIPT ARG...       ... or SCRIPT as `python SCRIPT ARG...`

The client passes its stdin, stdout and stderr to the forked worker (SCM_RIGHTS) and keeps none of them, so
the worker alone holds them (attncheck's exec: supervisor reads a worker's exit as EOF on its stdout). The
client waits for the worker's exit status; when the client ends first (attncheck's supervisor killed it, a
timeout), the connection closes and the session kills the worker's process group. When the server cannot be
reached, the client runs the command itself (exec), so a verdict never depends on the server, only the time.

The server preloads only modules that start no thread at import (with OMP_NUM_THREADS=1, as the gate runs):
a fork copies only the forking thread. ONNX Runtime, onnx and OpenVINO start one at import, so their adapters
import them in the forked worker.
"""
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile

HEADER = struct.Struct("<I")  # a request's length in bytes, then the request (JSON), the three descriptors with it


def _receive_exactly(connection, count):
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the connection closed mid-request")
        data += chunk
    return data


# ---------------------------------------------------------------------------------------------
# The client

def client(socket_path, command):
    """Runs command (["-m", MODULE, ARG...] or [SCRIPT, ARG...]) in a fork of the server; never returns."""
    request = json.dumps({"command": command, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(socket_path)
        socket.send_fds(connection, [HEADER.pack(len(request)) + request], [0, 1, 2])
    except OSError:  # no server (gone, or never started): the command as a process of its own
        os.execv(sys.executable, [sys.executable, *command])
    for descriptor in (0, 1, 2):  # the worker alone holds them now
        os.close(descriptor)
    try:
        status = HEADER.unpack(_receive_exactly(connection, HEADER.size))[0]
    except (ConnectionError, struct.error):
        os._exit(125)  # the session ended without a status: the server was killed
    os._exit(status)


# ---------------------------------------------------------------------------------------------
# The server: one session process per connection, which forks the worker and waits for it

def _worker(request, descriptors):
    """In the forked worker: the client's streams, folder, environment and command, then exit."""
    import atexit
    import runpy

    os.setpgid(0, 0)
    for number, descriptor in enumerate(descriptors):
        os.dup2(descriptor, number)
        os.close(descriptor)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    command = request["command"]
    status = 0
    try:
        if command[0] == "-m":  # sys.path[0] as `python -m` sets it: the working folder
            sys.argv, sys.path[0] = [command[1], *command[2:]], os.getcwd()
            runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        else:  # as `python SCRIPT` sets it: the script's folder
            sys.argv, sys.path[0] = list(command), os.path.dirname(os.path.abspath(command[0]))
            runpy.run_path(command[0], run_name="__main__")
    except SystemExit as leaving:
        code = leaving.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException:  # what an uncaught exception does to `python -m`: the traceback, exit 1
        import traceback

        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status & 0xFF)


def _session(connection):
    """In the session process: reads the request, forks the worker, reports its status or kills it when the
    client goes away."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    message, descriptors, _, _ = socket.recv_fds(connection, 65536, 3)
    if len(descriptors) != 3 or len(message) < HEADER.size:
        os._exit(1)
    length = HEADER.unpack(message[:HEADER.size])[0]
    body = message[HEADER.size:]
    if len(body) < length:
        body += _receive_exactly(connection, length - len(body))
    request = json.loads(body)
    worker = os.fork()
    if worker == 0:
        connection.close()
        _worker(request, descriptors)
    for descriptor in descriptors:
        os.close(descriptor)
    finished = os.pidfd_open(worker)
    poller = select.poll()
    poller.register(finished, select.POLLIN)
    poller.register(connection, select.POLLIN | select.POLLHUP)
    while True:
        ready = dict(poller.poll())
        if finished in ready:
            _, wait_status = os.waitpid(worker, 0)
            code = os.waitstatus_to_exitcode(wait_status)
            connection.sendall(HEADER.pack(code if code >= 0 else 128 - code))
            os._exit(0)
        if connection.fileno() in ready:  # the client is gone (it sends nothing after its request)
            for target in (lambda: os.killpg(worker, signal.SIGKILL), lambda: os.kill(worker, signal.SIGKILL)):
                try:
                    target()
                except ProcessLookupError:
                    pass
            os.waitpid(worker, 0)
            os._exit(0)


def _keep_heap_for_reuse():
    """glibc's heap policy of attncheck's own CLI (cli/main.cpp, core/resources/fresh_pages.cpp), set before the
    imports so that every worker forked from this process inherits it: no block mapped by itself, freed memory
    never handed back to the kernel (threads keep their own arenas: one, as the CLI has, would make ONNX
    Runtime's and Megatron's threads wait on its lock). Under glibc's defaults a block above 32 MB (a wide golden's
    weights, gradients, candidate tensors) is mapped afresh and unmapped when freed, so an adapter run over
    many goldens faulted in, and had the kernel zero, every such block again: the jax fp32 adapter over eight
    model goldens 605k -> 400k page faults, its kernel time 4.7-9.4 s -> 2.7-3.7 s, on the CI machine kind
    (a page's first touch there costs the host's fault as well; docs/MEASUREMENTS.md). Time only: what a
    worker computes is the same."""
    import ctypes

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallopt"):  # not glibc: its defaults stay
        return
    m_trim_threshold, m_mmap_max = -1, -4  # <malloc.h>
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, -1)  # as size_t: never trim


def serve(modules):
    """Imports modules, listens on the socket path read from stdin, forks a session per connection; ends at
    EOF on stdin (the test script that started it has ended or stopped it)."""
    import importlib

    _keep_heap_for_reuse()
    for module in modules:
        importlib.import_module(module)
    socket_path = sys.stdin.readline().strip()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    print("ready", flush=True)
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    poller.register(sys.stdin.fileno(), select.POLLIN | select.POLLHUP)
    while True:
        ready = dict(poller.poll(1000))
        while True:  # reap ended sessions
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if sys.stdin.fileno() in ready:
            return 0
        if listener.fileno() in ready:
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                _session(connection)
            connection.close()


class Server:
    """The fork server of one test script: `with Server(modules) as server:` then server.command(command) for
    each [sys.executable, "-m", MODULE, ...] or [sys.executable, SCRIPT, ...] command to run forked. Its socket
    lives in a private folder (0700) under $TMPDIR; a cleaner removing it only makes the clients run their
    commands as processes of their own."""

    def __init__(self, modules):
        self.folder = tempfile.TemporaryDirectory(prefix="attncheck-peers-")
        self.socket_path = os.path.join(self.folder.name, "fork-server")
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", *modules],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.process.stdin.write(self.socket_path + "\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ready":  # e.g. a socket path too long for AF_UNIX
            status = self.process.wait()
            self.folder.cleanup()
            raise RuntimeError(f"the peers' fork server did not start (exit {status})")

    def command(self, command):
        """command ([sys.executable, "-m", MODULE, ...] or [sys.executable, SCRIPT.py, ...]) as its client runs
        it; any other command unchanged."""
        if len(command) < 2 or command[0] != sys.executable or not (command[1] == "-m" or command[1].endswith(".py")):
            return list(command)
        return [sys.executable, os.path.abspath(__file__), "run", self.socket_path, *command[1:]]

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.process.stdin.close()
        self.process.wait()
        self.folder.cleanup()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        return serve(sys.argv[2:])
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        client(sys.argv[2], sys.argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
