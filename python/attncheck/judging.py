"""attncheck's verdict from Python: the same C++ judge as every command, through the attncheck command.

    verdict = attncheck.judge("golden/data/qwen3-0.6b_tp2.h5", {"out": out, "grads/x": dx, ...})
    verdict = attncheck.check(my_layer, "golden/data/ladder_03_explicit-head-dim.h5", supports=SUPPORTS)
    verdict.assert_passed()   # AssertionError with attncheck's localisation when it did not pass

Why the command and not a binding: the judge needs the whole C++ side (HDF5 goldens and their integrity
digests, the reference's emulated layers that compute a yardstick, LibTorch for nothing here); the command is
already built by ci/demo, starts in ~30 ms, and its `compare --json` output is the documented schema
(docs/JSON.md) every other language reads too, so Python gets exactly the verdict the command line gives and
no second build of the library against Python's ABI. A candidate crosses as a candidate file
(golden/SCHEMA.md, "Candidate files") in a private temporary folder.

Where the command is: $ATTNCHECK_COMMAND; else `attncheck` on PATH; else build/cli/attncheck in the current
folder or a folder above it (a checkout after ci/demo).
"""
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

from .candidate import write_candidate
from .capabilities import as_capabilities
from .errors import BadInput, Unsupported

# The words of docs/JSON.md, "Verdicts".
PASSING = ("pass", "pass_with_declined")
NOT_RUN = ("declined", "not_stated", "not_checked")


class AttncheckError(RuntimeError):
    """The attncheck command failed in a way that is neither a verdict nor bad input (exit 3, a crash)."""


def command():
    """The attncheck command's path; BadInput naming where it was looked for when there is none."""
    named = os.environ.get("ATTNCHECK_COMMAND")
    if named:
        found = shutil.which(named)  # a path or a name on PATH; an executable file, not a folder
        if not found:
            raise BadInput(f"ATTNCHECK_COMMAND={named} is not an executable file (nor one on PATH)")
        return found
    on_path = shutil.which("attncheck")
    if on_path:
        return on_path
    folder = pathlib.Path.cwd()
    for candidate_folder in (folder, *folder.parents):
        built = candidate_folder / "build" / "cli" / "attncheck"
        if os.access(built, os.X_OK):
            return str(built)
    raise BadInput("no attncheck command: set ATTNCHECK_COMMAND to its path, put it on PATH, or work inside a "
                   "checkout where ci/demo built build/cli/attncheck")


def committed_goldens():
    """The committed goldens (golden/data/*.h5) of the checkout the command belongs to, or of
    $ATTNCHECK_GOLDENS (a folder), sorted by name."""
    folder = os.environ.get("ATTNCHECK_GOLDENS")
    if not folder:
        found = pathlib.Path(command()).resolve()
        folder = found.parents[2] / "golden" / "data" if len(found.parents) > 2 else None
        if folder is None or not folder.is_dir():
            raise BadInput(f"no golden/data beside {found}: set ATTNCHECK_GOLDENS to a folder of goldens")
    files = sorted(pathlib.Path(folder).glob("*.h5"))
    if not files:
        raise BadInput(f"{folder} holds no .h5 golden")
    return [str(path) for path in files]


def run_command(*arguments):
    """Runs `attncheck ARGUMENTS`; returns the finished process. Exit 2 is BadInput with attncheck's message;
    anything above 2 (or a signal) is AttncheckError."""
    done = subprocess.run([command(), *map(str, arguments)], capture_output=True, text=True, check=False)
    if done.returncode == 2:
        raise BadInput(done.stderr.strip() or f"attncheck {' '.join(map(str, arguments))}: exit 2")
    if done.returncode not in (0, 1):
        raise AttncheckError(f"attncheck {' '.join(map(str, arguments))} ended with {done.returncode}: "
                             f"{done.stderr.strip()[-2000:]}")
    return done


@dataclasses.dataclass
class Candidate:
    """What a layer's run returns, as attncheck's C++ Candidate (core/compare/candidate.hpp) holds it:
    tensors under golden names ("out", "grads/x", "grads/q_proj", "decode/out", and a rank's held gradients
    as "ranks/<r>/grads/<weight>"; any float array-likes, torch tensors included), the precision it computed in,
    its RoPE angle policy below fp64, per-rank gradients (one {weight: held gradient} per rank, or the
    "ranks/..." names) and how they are held, and the parts it declined. tp_size: how many ranks it reports
    (default: as many as its per-rank gradients, else 1, an unsharded run excused from per-rank checks); a
    candidate that declines "ranks" of a TP golden says the golden's tp_size."""

    tensors: dict
    precision: str = "fp64"
    rope_angles: str = None
    rank_gradients: list = None
    tp_convention: str = "replicated-kv"
    declined: dict = None
    tp_size: int = None

    def write(self, path, generator="attncheck.judge"):
        tensors, ranks = {}, [dict(rank) for rank in (self.rank_gradients or [])]
        for name, value in self.tensors.items():
            parts = name.split("/")
            if parts[0] != "ranks":
                tensors[name] = _array(value)
                continue
            if len(parts) != 4 or not parts[1].isdigit() or parts[2] != "grads":
                raise BadInput(f"tensor '{name}': a rank's tensor is named ranks/<r>/grads/<weight>")
            while len(ranks) <= int(parts[1]):
                ranks.append({})
            ranks[int(parts[1])][parts[3]] = value
        tp_size = self.tp_size if self.tp_size is not None else max(len(ranks), 1)
        write_candidate(path, tensors, generator=generator, precision=self.precision, tp_size=tp_size,
                        tp_convention=self.tp_convention,
                        rank_gradients=[{n: _array(v) for n, v in rank.items()} for rank in ranks] if ranks else None,
                        rope_angles=self.rope_angles, declined=self.declined)


def _array(value):
    """A float64 numpy array from a numpy array, a torch tensor (any device, any dtype) or a list."""
    import numpy as np

    if hasattr(value, "detach"):  # torch, without importing it
        value = value.detach().to("cpu").double().numpy()
    return np.asarray(value, dtype=np.float64)


@dataclasses.dataclass
class TensorVerdict:
    """One tensor's line of the report (docs/JSON.md, "compare"): status ok / mismatch / missing /
    wrong_shape / non_finite / declined; its error, tolerance and ulps; where it is worst; and which batch
    rows, positions, query heads, KV heads and ranks hold an element beyond tolerance."""

    name: str
    status: str
    max_error: float
    error_ulps: float
    tolerance: float
    elements_over: int
    worst_index: list
    batch_rows: list
    positions: list
    query_heads: list
    kv_heads: list
    ranks: list
    declined_reason: str = ""

    def where(self):
        axes = [("ranks", self.ranks), ("batch", self.batch_rows), ("positions", self.positions),
                ("query heads", self.query_heads), ("KV heads", self.kv_heads)]
        return "; ".join(f"{label} {','.join(map(str, values[:8]))}" for label, values in axes if values)


@dataclasses.dataclass
class Verdict:
    """A golden's verdict for one candidate. verdict: a word of docs/JSON.md ("pass", "pass_with_declined",
    "fail", "declined", "not_stated", "broken_promise", "raised", "no_answer", "not_checked"); passed: it
    was judged and passed; message: why, when it was not judged; tensors: the per-tensor report; report: the
    whole `compare --json` object (None when not judged)."""

    golden: str
    verdict: str
    message: str = ""
    tensors: list = dataclasses.field(default_factory=list)
    report: dict = None

    @property
    def passed(self):
        return self.verdict in PASSING

    @property
    def failing(self):
        return [tensor for tensor in self.tensors if tensor.status not in ("ok", "declined")]

    def explain(self):
        """attncheck's localisation, one line per failing tensor, as the command's table says it."""
        if self.report is None:
            return f"{self.golden}: {self.verdict}: {self.message}"
        lines = [f"{self.golden}: {self.verdict} ({self.report['contract']}, {len(self.failing)} of "
                 f"{len(self.tensors)} tensors failing)"]
        for tensor in self.failing:
            detail = f"{_number(tensor.error_ulps)} ulps, error {_number(tensor.max_error)} > tolerance " \
                     f"{_number(tensor.tolerance)}" if tensor.status == "mismatch" else tensor.status
            lines.append(f"  {tensor.name}: {detail}; {tensor.elements_over} elements over, worst at "
                         f"{tensor.worst_index}; {tensor.where()}")
        lines += [f"  ({note})" for note in self.report.get("notes", [])]
        return "\n".join(lines)

    def assert_passed(self):
        """AssertionError carrying explain() unless it passed."""
        if not self.passed:
            raise AssertionError("attncheck: " + self.explain())
        return self

    def __bool__(self):
        return self.passed


def _number(value):
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)  # "inf" comes as a word


def _verdict_from_report(golden, report):
    if "tensors" not in report:  # not judged: outside the statement, or a broken promise (compare --supports)
        return Verdict(golden=str(golden), verdict=report["verdict"], message=report.get("message", ""))
    fields = {field.name for field in dataclasses.fields(TensorVerdict)}
    tensors = [TensorVerdict(**{key: value for key, value in tensor.items() if key in fields})
               for tensor in report["tensors"]]
    return Verdict(golden=str(golden), verdict=report["verdict"], tensors=tensors, report=report)


def _statement_file(folder, supports):
    path = os.path.join(folder, "supports.json")
    with open(path, "w", encoding="utf-8") as file:
        file.write(as_capabilities(supports).to_json())
    return path


def judge(golden, candidate, supports=None):
    """Judges `candidate` against the golden file `golden` with attncheck's judge (`attncheck compare --json`).
    candidate: a candidate file's path, a Candidate, or a dict of tensors (an fp64 candidate). supports: the
    statement of the layer that made it (attncheck.Capabilities or feature names): it is then held to it as
    `attncheck run` holds a worker (not_stated, parts not stated declined on its behalf, broken_promise for
    declining what it states, for per-rank gradients missing or a precision it does not state). Returns a
    Verdict; BadInput (exit 2) for a damaged golden or an invalid candidate."""
    with tempfile.TemporaryDirectory(prefix="attncheck-judge-") as folder:
        arguments = ["compare", golden]
        if isinstance(candidate, (str, os.PathLike)):
            arguments.append(candidate)
        else:
            if isinstance(candidate, dict):
                candidate = Candidate(tensors=candidate)
            path = os.path.join(folder, "candidate.h5")
            candidate.write(path)
            arguments.append(path)
        if supports is not None:
            arguments += ["--supports", _statement_file(folder, supports)]
        done = run_command(*arguments, "--json")
    return _verdict_from_report(golden, json.loads(done.stdout))


def admission(golden, supports=None):
    """What `golden` is for a layer stating `supports` (attncheck's admit(), from the golden's outline; None:
    a layer stating nothing): {"admitted", "reason", "parts_not_stated": {part: reason}, "per_rank_gradients",
    "fits", "memory_problem", "memory_bound_bytes"}."""
    return admissions([golden], supports)[0]


def admissions(goldens, supports=None):
    """admission() for many goldens in one run of the command."""
    with tempfile.TemporaryDirectory(prefix="attncheck-admit-") as folder:
        statement = ["--supports", _statement_file(folder, supports)] if supports is not None else []
        done = run_command("golden", "admit", *statement, *goldens)
    return json.loads(done.stdout)["goldens"]


def check(layer, golden, supports=None, admitted=None):
    """Runs layer(case) on the golden's inputs (attncheck.read_case) and judges what it returns (a Candidate,
    or a dict of fp64 tensors), as `attncheck run` judges a worker. A golden outside `supports` (what the layer
    states: attncheck.Capabilities or feature names) is "not_stated" and one that would not fit in memory
    "not_checked", the layer not called; the rest of the statement's promises are held by the judge
    (judge(..., supports=)). A layer raising attncheck.Unsupported has "declined", or, for a golden its
    statement includes, "broken_promise". admitted: admission(golden, supports) when the caller has it already
    (the pytest plugin admits every golden in one run at collection). Returns a Verdict."""
    from .case import read_case

    admitted = admitted or admission(golden, supports)
    if not admitted["admitted"]:
        return Verdict(golden=str(golden), verdict="not_stated", message=admitted["reason"])
    if not admitted["fits"]:
        return Verdict(golden=str(golden), verdict="not_checked", message=admitted["memory_problem"])
    try:
        answer = layer(read_case(golden))
    except Unsupported as error:
        if supports is not None:
            return Verdict(golden=str(golden), verdict="broken_promise",
                           message=f"it declined a case its stated capabilities include: {error}")
        return Verdict(golden=str(golden), verdict="declined", message=str(error))
    candidate = dataclasses.replace(answer) if isinstance(answer, Candidate) else Candidate(tensors=dict(answer))
    return judge(golden, candidate, supports=supports)
