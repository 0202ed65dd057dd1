"""A sharded worker: a layer that runs one process per tensor-parallel rank, as Megatron-style code
does, judged case by case through attncheck's worker protocol.

    serve_sharded(run_rank, description, ranks=4, convention="replicated-kv", check=..., setup=...)

starts `ranks` processes once (torch.multiprocessing: for gloo, forked from a fork server, or from the
calling process where it has imported torch and runs one thread; spawned for nccl), which form one
torch.distributed world (gloo on the CPU, NCCL with backend="nccl") and keep it for every case: process
groups are made once per TP size and cached, not per case. The calling process speaks the protocol; for
each case it reads the case file once (attncheck.case), asks check(case) whether the layer can express it
(raise Unsupported), and hands rank r < tp_size its shard (attncheck.sharding, under `convention`) and a
RankContext. Each rank runs run_rank(case, context) -> RankResult; the caller writes the candidate:
out, grads/x and decode/out from rank 0, each rank's held gradients under /result/ranks, and the full
gradients put back together from the held rows. A TP 1 case runs on rank 0 alone and is written as
unsharded (tp_size 1). A case whose tp_size exceeds `ranks` is unsupported (start the worker with more).

If a rank fails, the case's answer is "error" naming the rank as soon as that rank reports (not when
the others give up waiting in a collective it never joined), and the pool is restarted, so that a rank
stuck in a collective cannot hang later cases.
"""
import dataclasses
import math
import os
import queue
import sys
import tempfile
import time
import traceback
from typing import Any

import numpy as np

from . import candidate, case as case_module, sharding, worker
from .capabilities import as_capabilities
from .errors import BadInput, Unsupported


@dataclasses.dataclass
class RankContext:
    """What a rank knows besides its case: rank (0 … tp_size−1), tp_size, convention, held (row and
    column ranges, attncheck.sharding.holdings), group (the torch.distributed process group of ranks
    0 … tp_size−1), device ("cpu" or "cuda:<rank>"), and state (what setup() returned, once per process)."""

    rank: int
    tp_size: int
    convention: str
    held: dict
    group: Any
    device: str
    state: Any


@dataclasses.dataclass
class RankResult:
    """One rank's answer. out, grad_x: [batch, seq, hidden], the layer's (after the row-parallel
    reduction, identical on every rank); gradients: {weight name: the rank's held gradient after its
    all-reduces}; decode_out: [batch, decoded tokens, hidden] when the case has a decode schedule;
    declined: {part: reason} for parts the layer declines (e.g. {"decode": "..."})."""

    out: Any
    grad_x: Any
    gradients: dict
    decode_out: Any = None
    declined: dict = dataclasses.field(default_factory=dict)

    def as_numpy(self):
        def convert(value):
            if value is None:
                return None
            if hasattr(value, "detach"):  # a torch tensor, on any device
                value = value.detach().cpu().numpy()
            return np.asarray(value, dtype=np.float64)

        return RankResult(convert(self.out), convert(self.grad_x),
                          {name: convert(values) for name, values in self.gradients.items()},
                          convert(self.decode_out), dict(self.declined))

    def map_arrays(self, convert):
        """The same result with convert(value) for every tensor (None stays None)."""
        def each(value):
            return None if value is None else convert(value)

        return RankResult(each(self.out), each(self.grad_x),
                          {name: each(values) for name, values in self.gradients.items()},
                          each(self.decode_out), dict(self.declined))


# ---------------------------------------------------------------------------------------------
# How shards and results cross between the serving process and the ranks. Through the queues' pipes, a
# float64 array is copied four times into memory its process has never touched (pickled to bytes, read
# from the pipe, unpickled into an array, and the same back for each result): on Qwen3-32B at TP 16 (755 MB
# of weights, as much gradient) most of the adapter's time was the kernel handing out those fresh pages.
# In shared memory (a tensor torch.multiprocessing passes as a file descriptor) each byte is written once,
# into the shared segment, and the other side maps it. Used only where /dev/shm has room for the segments
# with a margin (a container's default 64 MB /dev/shm would otherwise end a rank with SIGBUS); otherwise
# the arrays go through the pipes as before. Either way the values are the same bits.

SHARED_MEMORY_FOLDER = "/dev/shm"


def _shared_memory_has_room(byte_count):
    """Whether /dev/shm can take byte_count more bytes, twice over (what the ranks send back as much again)."""
    try:
        stats = os.statvfs(SHARED_MEMORY_FOLDER)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize >= 2 * byte_count + (64 << 20)


def _to_shared(values):
    """values (a numpy array or a torch tensor, on any device) as a float64 torch tensor in shared memory:
    one copy, into the segment, which the queue then passes by descriptor."""
    import torch

    shared = torch.empty(tuple(np.shape(values)), dtype=torch.float64).share_memory_()
    if hasattr(values, "detach"):
        shared.copy_(values.detach())  # from any device and dtype
    else:
        shared.numpy()[...] = values
    return shared


def _from_shared(values):
    """A numpy view of what _to_shared made (no copy); anything else as it is."""
    return values.numpy() if hasattr(values, "numpy") and hasattr(values, "is_shared") else values


DEFAULT_WORKER_TIMEOUT = 300.0  # attncheck's, when ATTNCHECK_WORKER_TIMEOUT is unset (exec_worker/worker.cpp)


def worker_timeout_seconds(environ=None):
    """ATTNCHECK_WORKER_TIMEOUT (seconds attncheck gives a worker per case): 300 when unset; anything else must
    be a finite number > 0, or BadInput naming the variable (never silently the default)."""
    text = (os.environ if environ is None else environ).get("ATTNCHECK_WORKER_TIMEOUT")
    if text is None:
        return DEFAULT_WORKER_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise BadInput(f"ATTNCHECK_WORKER_TIMEOUT is {text[:100]!r}; must be a finite number of seconds > 0 "
                       "(attncheck takes whole seconds in [1, 86400]; 300 when it is unset)")
    return seconds


def rank_wait_seconds(environ=None):
    """How long the pool waits for its ranks' answers (to a start, or to one case), in all: below the worker
    timeout, so that a rank that never answers is reported by this worker, naming the ranks, before attncheck
    gives up on the whole worker ("no answer within N s") and kills it. The margin is 10 s, or a quarter of
    the timeout when that is less: a timeout of 10 s or less (for which timeout - 10 was 0 or negative) still
    leaves a positive wait, and the margin never exceeds the timeout."""
    timeout = worker_timeout_seconds(environ)
    return timeout - min(10.0, timeout / 4)


def _rank_main(rank, world, init_file, backend, commands, results, run_rank, setup):
    import datetime

    os.dup2(2, 1)  # fd 1 is the protocol's pipe, inherited: nothing a rank prints may reach it
    sys.stdout = sys.stderr
    import torch
    import torch.distributed as dist

    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = f"cuda:{rank % torch.cuda.device_count()}"
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=float(os.environ.get("ATTNCHECK_RANK_TIMEOUT", 240))))
    state = setup(rank, device) if setup else None
    groups = {}
    results.put((rank, "ready", None))
    while True:
        message = commands.get()
        if message is None:
            break
        tp_size, convention, case, shared = message
        if tp_size not in groups:  # every process of the world takes part in making a group
            groups[tp_size] = dist.new_group(list(range(tp_size)))
        if rank >= tp_size:
            continue
        try:
            if shared:  # the shard as numpy arrays, as run_rank is promised, viewing the shared segments
                case = dataclasses.replace(case, weights={name: _from_shared(values)
                                                          for name, values in case.weights.items()})
            held = sharding.holdings(case.geometry, tp_size, convention, rank)
            context = RankContext(rank, tp_size, convention, held, groups[tp_size], device, state)
            result = run_rank(case, context)
            results.put((rank, "ok", result.map_arrays(_to_shared) if shared else result.as_numpy()))
        except Unsupported as error:
            results.put((rank, "unsupported", str(error)))
        except Exception:  # noqa: BLE001  (reported to the caller, which restarts the pool)
            results.put((rank, "error", traceback.format_exc()))
    dist.destroy_process_group()


def _can_fork_here(preload):
    """Whether the ranks can be forks of this very process: it has imported torch, torch.distributed and every
    `preload` module already (as a process forked from a fork server of its own has: the peers' ctests start
    their adapters so), and runs one thread, so that no lock another thread holds is copied held (the
    thread count is the kernel's, /proc/self/task: OpenMP's and torch's native threads count, not only
    Python's). A fork server would then import all of it again: about 6 CPU-s per pool, once for every
    adapter run. Where /proc is missing, the answer is no, and the fork server starts as before."""
    if any(module not in sys.modules for module in ("torch", "torch.distributed", *preload)):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _start_context(backend, preload):
    """The multiprocessing context the ranks start from. gloo: a fork server that has imported torch,
    torch.distributed, the main script and `preload` once, so that each rank is a fork of it rather than
    a fresh interpreter importing them again (torch and Megatron-Core: ~7 CPU-s per process; a pool of 16
    on 2 cores spent ~100 s starting). Its fd 1 is made stderr while it starts: it and every rank inherit
    that, and fd 1 of the serving process is the protocol's pipe. nccl: spawn, since a process forked from
    one that touched CUDA cannot use CUDA, and importing a user's modules may touch it. gloo where this
    process has imported all of that and runs one thread (_can_fork_here): forks of this process, which
    inherit its fd 1 until _rank_main makes it stderr, before a rank prints anything."""
    import multiprocessing.forkserver

    import torch.multiprocessing as mp

    if backend == "nccl":
        return mp.get_context("spawn")
    if _can_fork_here(preload):
        return mp.get_context("fork")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["__main__", "torch", "torch.distributed", *preload])
    # The server finds the preloaded modules on this process's sys.path: Python 3.11's fork server is
    # handed sys.path but does not apply it (a preload it cannot import is skipped silently, and every
    # rank would import it again), so it starts with sys.path as its PYTHONPATH.
    saved_fd, saved_path = os.dup(1), os.environ.get("PYTHONPATH")
    try:
        os.dup2(2, 1)
        os.environ["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
        multiprocessing.forkserver.ensure_running()  # no-op when this process already started it
    finally:
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        if saved_path is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved_path
    return context


class RankPool:
    """`ranks` processes in one torch.distributed world, started once. preload: modules every rank
    needs, imported once by the fork server the ranks start from (gloo only)."""

    def __init__(self, ranks, backend, run_rank, setup, preload=()):
        self.ranks, self.backend, self.run_rank, self.setup = ranks, backend, run_rank, setup
        self.preload = list(preload)
        self.wait = rank_wait_seconds()  # read once: a bad value is refused before any rank starts
        self.processes = []
        self.start()

    def start(self):
        context = _start_context(self.backend, self.preload)
        handle, self.init_file = tempfile.mkstemp(prefix="attncheck-rendezvous-")
        os.close(handle)
        os.unlink(self.init_file)  # the file store creates it
        self.commands = [context.Queue() for _ in range(self.ranks)]
        self.results = context.Queue()
        self.processes = [context.Process(target=_rank_main, daemon=True,
                                          args=(rank, self.ranks, self.init_file, self.backend, self.commands[rank],
                                                self.results, self.run_rank, self.setup))
                          for rank in range(self.ranks)]
        for process in self.processes:
            process.start()
        try:
            ready = self._collect(self.ranks, "starting")
            failed = {rank: detail for rank, (status, detail) in ready.items() if status != "ready"}
            if failed:
                raise RuntimeError(f"ranks {sorted(failed)} failed to start: {failed}")
        except BaseException:  # no pool to stop: leave no process or rendezvous file behind
            self._kill()
            raise

    def stop(self):
        for process, commands in zip(self.processes, self.commands):
            if process.is_alive():
                commands.put(None)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        self._remove_init_file()

    def restart(self):
        self._kill()  # start() makes a new rendezvous file: the old world's store is never reused
        self.start()

    def _kill(self):
        for process in self.processes:
            process.kill()
            process.join()
        self._remove_init_file()

    def _remove_init_file(self):
        if os.path.exists(self.init_file):
            os.unlink(self.init_file)

    def _collect(self, count, what):
        """{rank: (status, detail)} from ranks 0 … count−1; returned early, incomplete, at the first rank that
        failed or declined: the others may wait in a collective it never joins (the caller restarts the pool)."""
        # One deadline for all the answers (not self.wait per answer: P ranks answering just in time would
        # take P times as long, past the worker timeout).
        deadline = time.monotonic() + self.wait
        answers = {}
        while len(answers) < count:
            try:
                rank, status, detail = self.results.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                dead = [rank for rank, process in enumerate(self.processes) if not process.is_alive()]
                raise RuntimeError(f"ranks {sorted(set(range(count)) - set(answers))} gave no answer while {what} "
                                   f"within {self.wait:g} s" + (f" (ranks {dead} died)" if dead else "")) from None
            answers[rank] = (status, detail)
            if status in ("error", "unsupported"):
                break
        return answers

    def run(self, case, tp_size, convention):
        """[RankResult] of ranks 0 … tp_size−1 for `case` (full weights; each rank gets its shard)."""
        weight_bytes = sum(np.asarray(values).nbytes for values in case.weights.values())
        shared = self.backend == "gloo" and _shared_memory_has_room(weight_bytes)
        for rank in range(self.ranks):
            rank_case = None
            if rank < tp_size:
                weights = sharding.shard_weights(case.weights, case.geometry, tp_size, convention, rank)
                if shared:
                    weights = {name: _to_shared(values) for name, values in weights.items()}
                rank_case = dataclasses.replace(case, weights=weights)
            self.commands[rank].put((tp_size, convention, rank_case, shared))
        try:
            answers = self._collect(tp_size, "running a case")
        except RuntimeError:
            self.restart()
            raise
        unsupported = [detail for status, detail in answers.values() if status == "unsupported"]
        failed = {rank: detail for rank, (status, detail) in answers.items() if status == "error"}
        if failed or unsupported:
            self.restart()  # the others may be waiting in a collective the failed rank never joined
        if failed:
            rank = min(failed)
            last = failed[rank].strip().splitlines()[-1]
            raise RuntimeError(f"rank {rank} of {tp_size} failed: {last}")
        if unsupported:
            raise Unsupported(unsupported[0])
        return [answers[rank][1].map_arrays(_from_shared) for rank in range(tp_size)]


def run_case_sharded(pool, case_path, candidate_path, description, convention, check, contract=None):
    """One case through the pool: refusals first, from the geometry alone (a TP size beyond the pool, a
    partition the convention cannot make: Unsupported, the case is valid), then check(case) on the case."""
    geometry = case_module.read_geometry(case_path)
    if geometry["tp_size"] > pool.ranks:
        raise Unsupported(f"tp_size {geometry['tp_size']}: this worker runs {pool.ranks} processes "
                          "(start it with more)")
    try:
        sharding.check_partition(geometry, geometry["tp_size"], convention)
    except BadInput as error:
        raise Unsupported(f"cannot shard this case: {error}") from error
    case = case_module.read_case(case_path)
    if check:
        check(case)
    results = pool.run(case, case.tp_size, convention)
    tensors = {"out": results[0].out, "grads/x": results[0].grad_x}
    shapes = case_module.weight_shapes(case.geometry)
    full = sharding.assemble_full_gradients([result.gradients for result in results], shapes, case.geometry,
                                            case.tp_size, convention)
    tensors.update({f"grads/{name}": values for name, values in full.items()})
    declined = {}
    for result in results:
        declined.update(result.declined)
    if case.decode_schedule and "decode" not in declined:
        if results[0].decode_out is None:
            raise RuntimeError("the case has a decode schedule; rank 0 returned no decode_out and declined nothing")
        tensors["decode/out"] = results[0].decode_out
    contract = contract or {}
    candidate.write_candidate(candidate_path, tensors, generator=description, tp_size=case.tp_size,
                              tp_convention=convention, precision=contract.get("precision", "fp64"),
                              rope_angles=contract.get("rope_angles"),
                              rank_gradients=[result.gradients for result in results] if case.tp_size > 1 else None,
                              declined=declined or None)


def serve_sharded(run_rank, description, ranks, convention="replicated-kv", check=None, setup=None, backend="gloo",
                  preload=(), supports=None, precision="fp64", rope_angles=None):
    """Serves the worker protocol with a pool of `ranks` processes; returns the exit status (0).
    run_rank(case, context) -> RankResult runs in each rank process (a module-level function, for spawn);
    setup(rank, device) runs once per process and its value is context.state; check(case), in the
    serving process, raises Unsupported for what the layer cannot express before any rank starts.
    preload: modules to import once before the ranks start (gloo: in the fork server they are forked from).
    supports: what the layer supports (attncheck.Capabilities; see attncheck.serve); with "tensor-parallel",
    the pool's size and convention are added to it (max_tp_size = ranks, tp_convention = convention) unless
    stated. precision, rope_angles: the precision contract its candidates declare (fp64, fp32, bf16, fp16;
    attncheck.write_candidate), which decides the yardstick below fp64."""
    if backend not in ("gloo", "nccl"):
        raise BadInput(f"backend '{backend}'; valid: gloo (CPU), nccl (GPU)")
    if precision not in candidate.PRECISIONS:
        raise BadInput(f"precision '{precision}'; valid: {', '.join(candidate.PRECISIONS)}")
    capabilities = as_capabilities(supports)
    if capabilities is not None and capabilities.supports("tensor-parallel"):
        capabilities = dataclasses.replace(
            capabilities, max_tp_size=capabilities.max_tp_size or ranks,
            tp_convention=capabilities.tp_convention or convention)
    contract = {"precision": precision, "rope_angles": rope_angles}
    pool = RankPool(ranks, backend, run_rank, setup, preload)
    try:
        return worker.serve(lambda case_path, candidate_path: run_case_sharded(
            pool, case_path, candidate_path, description, convention, check, contract),
            f"sharded {description} ({ranks} {backend} processes, {convention})", supports=capabilities)
    finally:
        pool.stop()
