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
`attncheck fuzz --seed S` draws for a layer stating `supports` (written once per session by
`attncheck golden draw`, with the fp64 reference's answers, into a temporary folder removed at the end). A golden outside the statement is collected as
skipped with attncheck's reason and costs nothing; a failure shows attncheck's localisation (Verdict.explain).
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
    attncheck's localisation; verdict(layer) returns the Verdict instead."""

    def __init__(self, path, supports):
        self.path = path
        self.supports = supports

    def verdict(self, layer):
        return judging.check(layer, self.path, supports=self.supports)

    def check(self, layer):
        verdict = self.verdict(layer)
        if verdict.verdict in judging.NOT_RUN:
            pytest.skip(f"attncheck: {verdict.verdict}: {verdict.message}")
        if not verdict.passed:
            pytest.fail("attncheck: " + verdict.explain(), pytrace=False)
        return verdict

    def __repr__(self):
        return f"CaseToCheck({self.path!r})"


def _goldens(config, marker):
    folder = marker.kwargs.get("goldens") or config.getoption("--attncheck-goldens")
    if folder:
        os.environ.setdefault("ATTNCHECK_GOLDENS", str(folder))
        return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".h5"))
    return judging.committed_goldens()


def _drawn_cases(config, supports, cases, seed, profile):
    """Cases 0 .. cases-1 of the seed, drawn once per session and kept in pytest's temporary folder."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix=f"attncheck-fuzz-seed{seed}-{profile}-"))  # under $TMPDIR
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    arguments = ["golden", "draw", "--seed", seed, "--cases", cases, "--profile", profile, "--output-dir", folder]
    if supports is not None:
        statement = folder / "supports.json"
        statement.write_text(judging.as_capabilities(supports).to_json())
        arguments += ["--supports", statement]
    judging.run_command(*arguments)
    return [str(folder / f"case-{index}.h5") for index in range(cases)]


def pytest_generate_tests(metafunc):
    if "attncheck_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("attncheck")
    kwargs = marker.kwargs if marker else {}
    supports = kwargs.get("supports")
    fuzz_cases = kwargs.get("fuzz_cases")
    if fuzz_cases:
        seed = kwargs.get("seed", 1)
        paths = _drawn_cases(metafunc.config, supports, int(fuzz_cases), int(seed), kwargs.get("profile", "short"))
        ids = [f"seed{seed}-case{index}" for index in range(len(paths))]
        params = [pytest.param(CaseToCheck(path, supports), id=name) for path, name in zip(paths, ids)]
    else:
        paths = _goldens(metafunc.config, marker) if marker else judging.committed_goldens()
        admitted = judging.admissions(paths, supports) if supports is not None else [{"admitted": True}] * len(paths)
        params = []
        for path, admission in zip(paths, admitted):
            name = os.path.basename(path).removesuffix(".h5")
            marks = [] if admission["admitted"] else [pytest.mark.skip(reason=f"attncheck: not stated: "
                                                                               f"{admission['reason']}")]
            params.append(pytest.param(CaseToCheck(path, supports), id=name, marks=marks))
    metafunc.parametrize("attncheck_case", params)
