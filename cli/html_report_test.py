#!/usr/bin/env python3
"""ctest cli.html_report: what `--html FILE` writes for compare, golden check, run, replay and fuzz, read
back with an HTML parser (the picture itself is checked in a browser by html_report_browser_test.py).

mutant-swap-query-heads exchanges query heads 0 and 1 of q_proj: on a GQA golden with an explicit head_dim
(small_yarn_stated, TP 2: what the report draws is the same on a model-sized golden, and a failing fp64
candidate's 17 yardstick runs take a second instead of half a minute under ASan) the report must hold
a heatmap for every failing tensor, each projection gradient's worst cell must lie in head 0 or 1, and
the page must be self-contained (no script, nothing fetched). The reference passes: no maps, unless
--all, which draws every tensor, all within tolerance. Bad --html paths and --all alone exit 2.

    html_report_test.py ATTNCHECK GOLDEN_DATA_DIR"""
import html.parser
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

attncheck, data = sys.argv[1], pathlib.Path(sys.argv[2])
mutant = "mutant-swap-query-heads"
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


class Page(html.parser.HTMLParser):
    """The figures (their data- attributes), summary rows, tensor-table rows and every URL attribute."""

    def __init__(self, text):
        super().__init__()
        self.figures, self.summary, self.tensor_rows, self.urls, self.tags = [], [], [], [], set()
        self._table, self._row, self._cell = None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        for name in ("href", "src", "xlink:href"):
            if name in attrs:
                self.urls.append(attrs[name])
        if tag == "figure" and "heatmap" in attrs.get("class", ""):
            self.figures.append({k[5:]: v for k, v in attrs.items() if k.startswith("data-")})
        elif tag == "table":
            self._table = attrs.get("class")
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row:
            if self._table == "summary":
                self.summary.append(self._row)
            elif self._table == "tensors":
                self.tensor_rows.append(self._row)
            self._row = None

    def handle_data(self, text):
        if self._cell is not None:
            self._cell += text


def run(*arguments, expect_code):
    result = subprocess.run([attncheck, *arguments], capture_output=True, text=True)
    expect(result.returncode == expect_code,
           f"attncheck {' '.join(arguments)}: exit {result.returncode}, expected {expect_code}\n{result.stderr}")
    return result


def check_page(path, what):
    """The page parsed, after the checks every page must pass."""
    expect(path.is_file(), f"{what}: {path} was not written")
    if not path.is_file():
        return Page("")
    text = path.read_text()
    page = Page(text)
    expect("script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags,
           f"{what}: the page must hold no script, link or iframe: {sorted(page.tags)}")
    fetched = [url for url in page.urls if not (url.startswith("data:image/png;base64,") or url.startswith("#"))]
    expect(not fetched, f"{what}: only embedded images and in-page links, found {fetched[:3]}")
    expect("1 = tolerance" in text, f"{what}: the colour scale is stated")
    return page


def check_swapped_heads(page, what):
    """Every query-head map of the mutant's failing projection gradients has its worst cell in head 0 or 1."""
    tensors = {figure["tensor"]: figure for figure in page.figures}
    for name in ("grads/q_proj#sketch", "grads/o_proj#sketch", "grads/q_proj", "grads/o_proj"):
        if name not in tensors:
            continue
        figure = tensors[name]
        head = int(figure["worst-row"]) * int(figure["row-bin"]) // int(figure["row-group"])
        expect(head in (0, 1), f"{what}: {name}'s worst cell is in query head {head}, not 0 or 1")
    per_rank = tensors.get("ranks/*/grads/q_proj#sketch") or tensors.get("ranks/*/grads/q_proj")
    if per_rank is not None:
        expect(int(per_rank["worst-row"]) in (0, 1) and per_rank["worst-column"] == "0",
               f"{what}: per-rank q_proj's worst cell at head {per_rank['worst-row']}, rank {per_rank['worst-column']}")
    expect(any(n in tensors for n in ("grads/q_proj#sketch", "grads/q_proj")), f"{what}: a map of q_proj's gradient")


with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    gqa = data / "small_yarn_stated.h5"  # not a ladder golden: `run` would add the ladder's table
    small = data / "small_softcap_padding.h5"

    # golden check: one map per failing tensor (the per-rank ones gathered per parameter), none for passing ones.
    page_path = folder / "check.html"
    run("golden", "check", str(gqa), "--impl", mutant, "--html", str(page_path), expect_code=1)
    page = check_page(page_path, "golden check")
    failing = {row[0] for row in page.tensor_rows[1:] if row[1] not in ("ok", "declined")}
    drawn = {figure["tensor"] for figure in page.figures}
    unsharded_failing = {name for name in failing if not name.startswith("ranks/")}
    rank_failing = {re.sub(r"^ranks/\d+/", "ranks/*/", name) for name in failing if name.startswith("ranks/")}
    expect(drawn == unsharded_failing | rank_failing,
           f"golden check: maps {sorted(drawn)}, expected {sorted(unsharded_failing | rank_failing)}")
    expect(len(page.summary) == 2 and page.summary[1][2] == "FAIL", f"golden check: summary {page.summary}")
    check_swapped_heads(page, "golden check")

    # compare: a candidate file written by `golden run`.
    candidate = folder / "candidate.h5"
    run("golden", "run", str(gqa), "--impl", mutant, "-o", str(candidate), expect_code=0)
    page_path = folder / "compare.html"
    run("compare", str(gqa), str(candidate), "--html", str(page_path), expect_code=1)
    page = check_page(page_path, "compare")
    check_swapped_heads(page, "compare")
    expect(page.summary[1][1] == str(candidate), f"compare: the summary names the candidate: {page.summary}")

    # run: one summary row per pair, maps only where the pair fails.
    goldens = folder / "goldens"
    goldens.mkdir()
    for golden in (gqa, small):
        shutil.copyfile(golden, goldens / golden.name)
    page_path = folder / "run.html"
    run("run", "--goldens", str(goldens), "--impl", "reference", "--impl", mutant, "--html", str(page_path),
        expect_code=1)
    page = check_page(page_path, "run")
    rows = {(row[0], row[1]): row[2] for row in page.summary[1:]}
    expect(rows.get((gqa.name, "reference")) == "pass", f"run: reference on the GQA golden {rows}")
    expect(rows.get((gqa.name, mutant)) == "FAIL", f"run: the mutant on the GQA golden {rows}")
    expect(len(rows) == 4, f"run: 4 pairs in the summary, found {len(rows)}")
    text = page_path.read_text()
    expect(text.count("No tensor fails, so there is no map") >= 2, "run: passing pairs say why they have no map")
    check_swapped_heads(page, "run")

    # replay (a golden is a repro file too).
    page_path = folder / "replay.html"
    run("replay", str(gqa), "--impl", mutant, "--html", str(page_path), expect_code=1)
    check_swapped_heads(check_page(page_path, "replay"), "replay")

    # fuzz: the report of the shrunk failure.
    page_path = folder / "fuzz.html"
    fuzz = run("fuzz", "--impl", mutant, "--cases", "200", "--repro-dir", str(folder), "--shrink-seconds", "10",
               "--html", str(page_path), expect_code=1)
    expect(f"html report: {page_path}" in fuzz.stdout, f"fuzz names its report: {fuzz.stdout[-400:]}")
    page = check_page(page_path, "fuzz")
    expect(len(page.figures) >= 1, "fuzz: the shrunk failure has maps")

    # --all: every compared tensor drawn, even when all pass.
    page_path = folder / "all.html"
    run("golden", "check", str(small), "--impl", "reference", "--html", str(page_path), "--all", expect_code=0)
    page = check_page(page_path, "--all")
    compared = [row[0] for row in page.tensor_rows[1:]]
    expect(len(page.figures) >= 3 and len(page.figures) <= len(compared),
           f"--all: {len(page.figures)} maps for {len(compared)} tensors")
    expect(all(figure["worst-row"] != "-1" for figure in page.figures), "--all: every map has elements")

    # Bad input: exit 2 with a message naming the option.
    result = run("golden", "check", str(small), "--impl", "reference", "--all", expect_code=2)
    expect("--html" in result.stderr, f"--all without --html names --html: {result.stderr!r}")
    result = run("golden", "check", str(small), "--impl", "reference", "--html", str(folder / "no" / "such" / "x.html"),
                 expect_code=2)
    expect("--html" in result.stderr and "cannot be written" in result.stderr,
           f"an unwritable --html path: {result.stderr!r}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("html report: golden check, compare, run, replay, fuzz, --all and bad paths as expected")
