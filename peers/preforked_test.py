#!/usr/bin/env python3
"""ctest peer.preforked: the peers' fork server (peers/preforked.py) runs a command as the command itself would
run: its arguments, working folder, environment, stdin, stdout, stderr and exit status (a normal exit, sys.exit
with a number or a message, an uncaught exception, a signal); a worker whose client is killed is killed too; a
client whose server is gone runs the command as a process of its own; other commands pass through unchanged."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import preforked
from peer_checks import expect, failures

SCRIPT = r"""
import os, sys
print("argv", sys.argv[1:], "cwd", os.getcwd(), "env", os.environ.get("PREFORKED_TEST"), "path0", sys.path[0])
print("stdin", sys.stdin.readline().strip(), flush=True)
print("on stderr", file=sys.stderr)
how = sys.argv[1]
if how == "raise":
    raise ValueError("raised on purpose")
if how == "message":
    sys.exit("a message")
if how == "signal":
    os.kill(os.getpid(), 9)
if how == "heap":  # where a 256 MB block lives: [heap], or a mapping of its own under glibc's defaults
    import ctypes
    block = bytearray(256 << 20)
    address = ctypes.addressof((ctypes.c_char * len(block)).from_buffer(block))
    for line in open("/proc/self/maps"):
        fields = line.split()
        low, high = (int(bound, 16) for bound in fields[0].split("-"))
        if low <= address < high:
            print("block in", fields[5] if len(fields) > 5 else "an anonymous mapping")
    sys.exit(0)
if how == "wait":
    with open(sys.argv[2] + ".part", "w") as handle:
        handle.write(str(os.getpid()))
    os.rename(sys.argv[2] + ".part", sys.argv[2])
    sys.stdin.read()
sys.exit(int(how))
"""

def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def main():
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "echo_worker.py")
        with open(script, "w") as handle:
            handle.write(SCRIPT)
        environment = dict(os.environ, PREFORKED_TEST="passed")
        with preforked.Server(["json"]) as server:
            expect(server.command([sys.executable, "-c", "pass"]) == [sys.executable, "-c", "pass"]
                   and server.command(["attncheck", "x.py"]) == ["attncheck", "x.py"],
                   "commands other than python -m / python SCRIPT.py pass through unchanged")
            for how, code, stderr_has in [("0", 0, "on stderr"), ("3", 3, "on stderr"), ("raise", 1, "ValueError"),
                                          ("message", 1, "a message"), ("signal", 128 + 9, "on stderr")]:
                forked = server.command([sys.executable, script, how])
                result = subprocess.run(forked, input="hello\n", capture_output=True, text=True, cwd=folder,
                                        env=environment, timeout=60)
                expect(forked[1].endswith("preforked.py") and result.returncode == code
                       and f"argv ['{how}'] cwd {folder} env passed path0 {folder}" in result.stdout
                       and "stdin hello" in result.stdout and stderr_has in result.stderr,
                       f"forked worker '{how}': exit {result.returncode} (want {code}), stdout {result.stdout!r}, "
                       f"stderr ends {result.stderr[-80:]!r}")
            # Workers keep freed memory for reuse (preforked._keep_heap_for_reuse): a large block comes from the
            # heap, where glibc's defaults would map it afresh (and fault it in again after each free).
            heap = subprocess.run(server.command([sys.executable, script, "heap"]), input="\n", capture_output=True,
                                  text=True, timeout=60)
            expect(heap.returncode == 0 and "block in [heap]" in heap.stdout,
                   f"a forked worker's 256 MB block comes from the heap: {heap.stdout.splitlines()[-1:]}")
            plain = subprocess.run([sys.executable, script, "heap"], input="\n", capture_output=True, text=True,
                                   timeout=60)
            expect("block in an anonymous mapping" in plain.stdout,
                   f"control: a plain process maps it by itself: {plain.stdout.splitlines()[-1:]}")
            module = subprocess.run(server.command([sys.executable, "-m", "json.tool"]), input='{"a": 1}',
                                    capture_output=True, text=True, timeout=60)
            expect(module.returncode == 0 and '"a": 1' in module.stdout,
                   f"python -m json.tool forked: exit {module.returncode}, {module.stdout!r}")
            # A killed client (attncheck's supervisor ending a worker) takes its forked worker with it.
            pid_file = os.path.join(folder, "pid")
            client = subprocess.Popen(server.command([sys.executable, script, "wait", pid_file]),
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            client.stdin.write(b"line\n")
            client.stdin.flush()
            for _ in range(600):
                if os.path.exists(pid_file):
                    break
                time.sleep(0.05)
            worker = int(open(pid_file).read())
            client.send_signal(signal.SIGKILL)
            client.wait()
            for _ in range(200):
                if not alive(worker):
                    break
                time.sleep(0.05)
            expect(worker != client.pid and not alive(worker),
                   f"the forked worker {worker} ends when its client {client.pid} is killed")
            stale = server.command([sys.executable, script, "5"])
        # The server is gone: the client runs the command itself.
        result = subprocess.run(stale, input="again\n", capture_output=True, text=True, env=environment, timeout=60)
        expect(result.returncode == 5 and "stdin again" in result.stdout,
               f"without its server a client runs the command itself: exit {result.returncode}, {result.stdout!r}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
