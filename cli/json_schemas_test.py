"""Every --json output holds to its schema in docs/json/ (ctest cli.json_schemas): compare (fp64 and fp32, whose
yardstick is computed, and not judged under --supports), golden check (judged, not stated), run (with the support
matrix of ladder goldens), golden admit, plan, capabilities (both forms) and mutants, read with jsonschema; the
schemas' enums are the one vocabulary of verdict and status words (docs/JSON.md), so a word outside it fails.

    python3 json_schemas_test.py ATTNCHECK SCHEMA_DIR GOLDEN_DIR     (PYTHONPATH: the package, for the worker)
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import referencing


def main():
    attncheck, schema_dir, golden_dir = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    example = pathlib.Path(__file__).resolve().parents[1] / "python" / "examples" / "my_attention_worker.py"
    schemas = {path.name: json.loads(path.read_text()) for path in schema_dir.glob("*.schema.json")}
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas.values())
    failures = []

    def check(schema_name, arguments, expected_exit):
        done = subprocess.run([attncheck, *map(str, arguments)], capture_output=True, text=True, check=False)
        if done.returncode != expected_exit:
            failures.append(f"attncheck {' '.join(map(str, arguments))}: exit {done.returncode}, expected "
                            f"{expected_exit}: {done.stderr[-500:]}")
            return None
        output = json.loads(done.stdout)
        validator = jsonschema.Draft202012Validator(schemas[schema_name], registry=registry)
        errors = sorted(validator.iter_errors(output), key=lambda error: list(error.path))
        for error in errors[:5]:
            failures.append(f"{schema_name}: {'/'.join(map(str, error.path))}: {error.message[:300]}")
        print(f"{'ok  ' if not errors else 'FAIL'} {schema_name}: attncheck {' '.join(map(str, arguments[:3]))} ...")
        return output

    with tempfile.TemporaryDirectory(prefix="attncheck-json-") as folder:
        folder = pathlib.Path(folder)
        plain, latent = golden_dir / "ladder_03_explicit-head-dim.h5", golden_dir / "ladder_15_latent-attention.h5"
        for implementation, name in (("reference", "fp64"), ("torch-cpu-fp32", "fp32")):
            candidate = folder / f"{name}.candidate.h5"
            subprocess.run([attncheck, "golden", "run", plain, "--impl", implementation, "-o", candidate], check=True,
                           capture_output=True)
            report = check("compare.schema.json", ["compare", plain, candidate, "--json"], 0)
            if report and report["verdict"] != "pass":
                failures.append(f"compare of {implementation}'s own candidate: verdict {report['verdict']}")
        worker = f"exec:{sys.executable} {example}"  # the README's worker: states no latent attention
        checked = check("golden-check.schema.json", ["golden", "check", plain, latent, "--impl", worker, "--json"], 0)
        if checked and [entry["verdict"] for entry in checked["files"]] != ["pass", "not_stated"]:
            failures.append(f"golden check verdicts: {[entry['verdict'] for entry in checked['files']]}")
        goldens = folder / "goldens"
        goldens.mkdir()
        for name in ("ladder_01_plain-mha.h5", "ladder_13_kv-cache-decode.h5", "ladder_15_latent-attention.h5"):
            shutil.copy(golden_dir / name, goldens / name)
        run = check("run.schema.json", ["run", "--goldens", goldens, "--impl", "reference", "--json"], 0)
        if run and "support_matrix" not in run:
            failures.append("run --json over ladder goldens has no support_matrix")
        statement = folder / "supports.json"
        statement.write_text(json.dumps({"features": ["gqa", "rope-half-split", "causal", "backward"]}))
        unjudged = check("compare.schema.json", ["compare", plain, folder / "fp64.candidate.h5", "--supports", statement,
                                                 "--json"], 1)
        if unjudged and unjudged["verdict"] != "not_stated":
            failures.append(f"compare --supports outside the statement: verdict {unjudged['verdict']}")
        admitted = check("golden-admit.schema.json", ["golden", "admit", "--supports", statement, plain, latent], 0)
        if admitted and [entry["admitted"] for entry in admitted["goldens"]] != [False, False]:
            failures.append(f"golden admit: {admitted['goldens']}")
        check("plan.schema.json", ["plan", "--preset", "qwen3-32b", "--tp", "16", "--json"], 0)
        check("capabilities.schema.json", ["capabilities", "--json"], 0)
        check("capabilities.schema.json", ["capabilities", "--impl", "torch-cpu-fp32", "--json"], 0)
        mutants = check("mutants.schema.json", ["mutants", "--mutant", "mutant-quotient-scale", "--repro-dir",
                                                folder / "repros", "--json"], 0)
        if mutants and [row["verdict"] for row in mutants["mutants"]] != ["killed"]:
            failures.append(f"mutants: {mutants['mutants']}")
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
