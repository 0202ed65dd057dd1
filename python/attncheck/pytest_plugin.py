"""attncheck's pytest plugin (registered through the `pytest11` entry point of the attncheck package).

    import pytest, attncheck
    SUPPORTS = attncheck.Capabilities(["gqa", "explicit-head-dim", "rope-half-split", "causal", "backward"])

    @pytest.mark.attncheck(supports=SUPPORTS)                       # every committed golden
    def test_goldens(attncheck_case):
        attncheck_case.check(my_layer)                              # my_layer(case) -> {"out": ..., ...}

    @pytest.mark.attncheck(supports=SUPPORTS, fuzz_cases=50, seed=1)  # the fuzz cases of seed 1
    def test_fuzz(attncheck_case):
        attncheck_case.check(my_layer)

A test that asks for the `attncheck_case` fixture is parametrised over the committed goldens (the checkout's
golden/data, $ATTNCHECK_GOLDENS, or --attncheck-goldens DIR), or, with fuzz_cases=N, over cases 0 .. N-1 that
`attncheck fuzz --seed S` draws for a layer stating `supports` (drawn by `attncheck golden draw`, with the fp64
reference's answers, on first use, once per session and statement, into a temporary folder removed at the end).
A golden outside the statement, or one that would not fit in memory, is collected as skipped with attncheck's
reason and costs nothing; a failure shows attncheck's localisation (Verdict.explain).
"""
import os
import pathlib
import shutil
import tempfile

import pytest

from . import judging


def pytest_addoption(parser):
    group = parser.getgroup("attncheck")
    group.addoption("--attncheck-goldens", default=None,
                    help="folder of goldens for tests marked attncheck (default: the checkout's golden/data)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "attncheck(supports=None, fuzz_cases=None, seed=1, profile='short', goldens=None): parametrise "
                   "the attncheck_case fixture over goldens (or fuzz cases) within a statement of capabilities")


class CaseToCheck:
    """One golden (or drawn fuzz case) for one test: check(layer) judges layer(case) and fails the test with
    attncheck's localisation (skips it when attncheck did not run it: not stated, declined, not checked);
    verdict(layer) returns the Verdict instead. path: the file (a drawn case is drawn on first use)."""

    def __init__(self, path, supports, name, admitted=None):
        self._path = path
        self.supports = supports
        self.name = name
        self.admitted = admitted  # golden admit's answer from collection (goldens), or None (drawn cases)

    @property
    def path(self):
        return self._path() if callable(self._path) else self._path

    def verdict(self, layer):
        return judging.check(layer, self.path, supports=self.supports, admitted=self.admitted)

    def check(self, layer):
        verdict = self.verdict(layer)
        if verdict.verdict in judging.NOT_RUN:
            pytest.skip(f"attncheck: {verdict.verdict}: {verdict.message}")
        if not verdict.passed:
            pytest.fail("attncheck: " + verdict.explain(), pytrace=False)
        return verdict

    def __repr__(self):
        return f"CaseToCheck({self.name!r})"


_draws = pytest.StashKey[dict]()


def _drawn_case(config, supports, cases, seed, profile, index):
    """Case `index` of the seed's first `cases`, drawn (with the fp64 reference's answers) once per session and
    statement, on first use (a deselected test draws nothing), into a temporary folder removed at the end."""
    statement = judging.as_capabilities(supports).to_json() if supports is not None else ""
    key = (statement, seed, cases, profile)
    draws = config.stash.setdefault(_draws, {})
    if key not in draws:
        folder = pathlib.Path(tempfile.mkdtemp(prefix=f"attncheck-fuzz-seed{seed}-{profile}-"))  # under $TMPDIR
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        arguments = ["golden", "draw", "--seed", seed, "--cases", cases, "--profile", profile, "--output-dir", folder]
        if statement:
            (folder / "supports.json").write_text(statement)
            arguments += ["--supports", folder / "supports.json"]
        judging.run_command(*arguments)
        draws[key] = folder
    return str(draws[key] / f"case-{index}.h5")


def _goldens(config, kwargs):
    folder = kwargs.get("goldens") or config.getoption("--attncheck-goldens")
    if folder:
        return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".h5"))
    return judging.committed_goldens()


def pytest_generate_tests(metafunc):
    if "attncheck_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("attncheck")
    kwargs = marker.kwargs if marker else {}
    supports = kwargs.get("supports")
    fuzz_cases = kwargs.get("fuzz_cases")
    params = []
    if fuzz_cases:
        seed, profile, cases = int(kwargs.get("seed", 1)), kwargs.get("profile", "short"), int(fuzz_cases)
        for index in range(cases):
            def path(index=index):
                return _drawn_case(metafunc.config, supports, cases, seed, profile, index)

            name = f"seed{seed}-case{index}"
            params.append(pytest.param(CaseToCheck(path, supports, name), id=name))
    else:
        paths = _goldens(metafunc.config, kwargs)
        # One run of `attncheck golden admit` for all: a golden outside the statement, or one that would not
        # fit in memory, is collected as skipped with attncheck's reason and costs nothing more.
        for path, admission in zip(paths, judging.admissions(paths, supports)):
            name = os.path.basename(path).removesuffix(".h5")
            marks = []
            if not admission["admitted"]:
                marks = [pytest.mark.skip(reason=f"attncheck: not stated: {admission['reason']}")]
            elif not admission["fits"]:
                marks = [pytest.mark.skip(reason=f"attncheck: not checked: {admission['memory_problem']}")]
            params.append(pytest.param(CaseToCheck(path, supports, name, admission), id=name, marks=marks))
    metafunc.parametrize("attncheck_case", params)
