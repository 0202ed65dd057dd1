"""ctest python.readme_worker: README's worker listing ("In Python: a worker") is python/examples/my_attention_worker.py,
character for character, and that listing, run as written, is judged on nearly every case `attncheck fuzz` draws
for it: cases are drawn within the capabilities it states, so a decline of one of them is a failure of its promise,
and at least 95% of the case budget must be judged (not declined).

    readme_worker.py README.md EXAMPLE.py ATTNCHECK CASES
"""
import pathlib
import re
import subprocess
import sys
import tempfile

HEADING = "### In Python: a worker"


def listing(readme):
    text = pathlib.Path(readme).read_text(encoding="utf-8")
    start = text.find(HEADING)
    if start < 0:
        sys.exit(f"FAIL: README has no '{HEADING}' section")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    if not block:
        sys.exit(f"FAIL: README's '{HEADING}' section has no python listing")
    return block.group(1)


def main():
    readme, example, attncheck, cases = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    shown = listing(readme)
    if shown != pathlib.Path(example).read_text(encoding="utf-8"):
        sys.exit(f"FAIL: README's worker listing is not {example}: copy the file into README (or the listing into the file)")
    with tempfile.TemporaryDirectory(prefix="attncheck-readme-worker-") as folder:
        worker = pathlib.Path(folder) / "readme_worker.py"
        worker.write_text(shown, encoding="utf-8")
        run = subprocess.run([attncheck, "fuzz", "--impl", f"exec:{sys.executable} {worker}", "--cases", str(cases),
                              "--seed", "1", "--repro-dir", folder], capture_output=True, text=True, check=False)
    print(run.stdout[-3000:])
    counts = re.findall(r"^fuzz .*: (\d+) cases \((\d+) unsupported\) in ", run.stdout, re.M)
    if run.returncode != 0 or not counts:
        sys.exit(f"FAIL: fuzz of README's worker exited {run.returncode}:\n{run.stderr[-3000:]}")
    done, unsupported = map(int, counts[-1])
    judged = done - unsupported
    if done != cases or judged < 0.95 * cases:
        sys.exit(f"FAIL: {judged} of {done} cases judged ({unsupported} declined); at least 95% of {cases} must be")
    print(f"PASS: README's worker is {example}; fuzz judged {judged} of {done} cases")


if __name__ == "__main__":
    main()
