#!/usr/bin/env python3
"""ctest python.hostile_case (issue 56.14): python/attncheck refuses what attncheck refuses, by name, before it
allocates anything, and serve_sharded's wait for its ranks stays below the worker timeout.

(a) Case files made by `attncheck golden make` (a plain layer with stored tensors; a latent layer with generated
    weights and inputs; one with stored ones), edited with h5py (no reseal: the schema's checks come before the
    integrity digest's): a latent rank of 2^40 (read_case asked numpy for 256 TiB), widths beyond
    attncheck's limits, widths that disagree with the stored datasets, a layer of 2^35 parameters, NaN and
    negative eps, a non-finite rope_theta, a position_ids or /expected dataset declaring a huge shape in a
    small file, a layer that fits the limits but not the memory left. All are read in one child process under
    RLIMIT_AS = 2 GiB: read_case must raise BadInput naming the attribute (or dataset) at once, and a
    worker built on the package (attncheck.serve) must answer "error <that message>". attncheck itself must
    refuse the same files (exit 2, not for the digest). eps 0 is valid, as in attncheck (golden make
    --qk-norm-eps 0 writes such a golden): both readers accept it once resealed.
(b) distributed.rank_wait_seconds: ATTNCHECK_WORKER_TIMEOUT 5, 10, 0.5, 300 and unset give a wait > 0 and below
    the timeout (it was timeout - 10: 0 or negative at 10 s or less); "abc", "-3", "nan", "0", "inf" and ""
    raise BadInput naming the variable.

    hostile_case_test.py [ATTNCHECK]        (default: $ATTNCHECK_CLI, else build/cli/attncheck)
"""
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import attncheck  # noqa: E402
from attncheck import distributed, integrity  # noqa: E402
from attncheck.errors import BadInput  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ATTNCHECK_CLI") or str(ROOT / "build/cli/attncheck")
ADDRESS_SPACE = 2 << 30
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL {what}", flush=True)


def attncheck_cli(*arguments):
    return subprocess.run([binary, *map(str, arguments)], capture_output=True, text=True, timeout=300)


# The child: for each file, read_case, then the file through attncheck.serve (a worker built on the package),
# under RLIMIT_AS; prints one JSON list. One child for all files: a refused read allocates nothing to keep.
CHILD = r"""
import io, json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
import attncheck
results = []
for path in sys.argv[2:]:
    began = time.monotonic()
    try:
        attncheck.read_case(path)
        result = {"error": None, "message": ""}
    except BaseException as error:  # noqa: BLE001  (any type is reported: only BadInput passes)
        result = {"error": type(error).__name__, "message": str(error)}
    result["seconds"] = time.monotonic() - began
    protocol = io.StringIO()
    attncheck.serve(lambda case, candidate: attncheck.read_case(case), "hostile probe",
                    stdin=io.StringIO(f"run {path} {path}.candidate.h5\n"), protocol=protocol)
    result["reply"] = protocol.getvalue().splitlines()[-1]
    results.append(result)
print(json.dumps(results))
"""


def read_in_child(paths):
    # One BLAS thread: OpenBLAS reserves buffers per thread, which on a many-core machine could fill RLIMIT_AS.
    environment = dict(os.environ, PYTHONPATH=str(ROOT / "python"), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    completed = subprocess.run([sys.executable, "-c", CHILD, str(ADDRESS_SPACE), *map(str, paths)],
                               capture_output=True, text=True, timeout=300, env=environment)
    if completed.returncode != 0:
        expect(False, f"the child reading {len(paths)} files: exit {completed.returncode} {completed.stderr[-600:]}")
        return [{"error": "no result", "message": "", "seconds": 0, "reply": ""} for _ in paths]
    return json.loads(completed.stdout.splitlines()[-1])


def refused(path, result, words, label, attncheck_too=True):
    """read_case raised BadInput naming each of `words` at once under RLIMIT_AS, a worker answered "error" with
    it, and attncheck exits 2 for the schema's reason (not the digest's)."""
    expect(result["error"] == "BadInput", f"{label}: read_case raised {result['error']}, expected BadInput: "
                                          f"{result['message'][:400]}")
    for word in words:
        expect(word in result["message"], f"{label}: the message names {word!r}: {result['message'][:400]}")
    expect(result["seconds"] < 10, f"{label}: refused after {result['seconds']:.1f} s, expected at once")
    expect(result["reply"] == "error " + " ".join(result["message"].split())[:2000],
           f"{label}: the worker answers 'error <message>': {result['reply'][:400]}")
    print(f"{label}: {result['message']}", flush=True)
    if attncheck_too:
        completed = attncheck_cli("golden", "inspect", path)
        expect(completed.returncode == 2 and "/@integrity" not in completed.stderr,
               f"{label}: attncheck golden inspect exits 2 for the schema's reason: exit {completed.returncode} "
               f"{completed.stderr[-400:]}")


def accepted(path, result, label):
    """Both readers read the file (resealed before the child read it: a deliberate edit)."""
    expect(result["error"] is None, f"{label}: read_case accepts it: {result['error']} {result['message'][:400]}")
    completed = attncheck_cli("golden", "inspect", path)
    expect(completed.returncode == 0, f"{label}: attncheck accepts it: exit {completed.returncode} "
                                      f"{completed.stderr[-400:]}")
    print(f"{label}: read by both", flush=True)


def test_case_files(folder):
    latent_config = folder / "latent.json"  # golden/data/configs/ladder_latent.json
    latent_config.write_text(json.dumps({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 32,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1, "q_lora_rank": 16,
        "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 16, "rms_norm_eps": 1e-06,
        "rope_theta": 10000, "max_position_embeddings": 4096, "attention_bias": False}))
    yarn_config = folder / "latent_yarn.json"  # the same layer with DeepSeek-V3's yarn
    yarn = json.loads(latent_config.read_text())
    yarn["rope_scaling"] = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                            "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
    yarn_config.write_text(json.dumps(yarn))
    made = {"plain": ["--hidden", "8", "--heads", "2", "--head-dim", "4", "--seq", "4"],
            "latent": ["--hf-config", latent_config, "--batch", "1", "--seq", "4", "--weights", "generated",
                       "--inputs", "generated"],
            "latent_stored": ["--hf-config", latent_config, "--batch", "1", "--seq", "4"],
            "latent_yarn": ["--hf-config", yarn_config, "--batch", "1", "--seq", "4"]}
    for name, arguments in made.items():
        completed = attncheck_cli("golden", "make", *arguments, "-o", folder / f"{name}.h5")
        if completed.returncode != 0:
            expect(False, f"attncheck golden make {name}: exit {completed.returncode} {completed.stderr[-400:]}")
            return
        attncheck.read_case(str(folder / f"{name}.h5"))  # the unedited files read

    def edited(source, label, edit):
        path = folder / f"{label}.h5"
        shutil.copyfile(folder / f"{source}.h5", path)
        with h5py.File(path, "r+") as h5:
            edit(h5)
        return path

    def attribute(name, value):
        return lambda h5: h5["geometry"].attrs.__setitem__(name, value)

    def geometry(**values):
        return lambda h5: [h5["geometry"].attrs.__setitem__(name, value) for name, value in values.items()]

    def huge_dataset(path, shape, dtype):
        def edit(h5):
            if path in h5:
                del h5[path]
            h5.create_dataset(path, shape=shape, dtype=dtype, chunks=(1,) * (len(shape) - 1) + (1024,))
        return edit

    big = np.int64(2 ** 40)
    cases = [
        # Widths beyond attncheck's limits: for the generated latent layer, read_case asked numpy for 256 TiB.
        ("latent", "kv_lora_rank 2^40", attribute("kv_lora_rank", big),
         ["kv_lora_rank", "1099511627776", "[1, 1048576]"]),
        ("latent", "q_lora_rank 2^40", attribute("q_lora_rank", big),
         ["q_lora_rank", "1099511627776", "[0, 1048576]"]),
        ("latent_stored", "stored kv_lora_rank 2^40", attribute("kv_lora_rank", big), ["kv_lora_rank"]),
        ("plain", "hidden_size 2^40", attribute("hidden_size", big), ["hidden_size", "1099511627776"]),
        ("plain", "num_attention_heads 0", attribute("num_attention_heads", np.int64(0)),
         ["num_attention_heads", "is 0", "[1, 4096]"]),
        # Within the limits, but 2^35 parameters: refused from the geometry before any weight is read.
        ("plain", "a layer of 2^35 parameters",
         geometry(num_attention_heads=np.int64(4096), num_key_value_heads=np.int64(4096), head_dim=np.int64(2 ** 20)),
         ["/geometry", "parameters", "2^28"]),
        # Widths that disagree with the stored datasets: refused before reading either.
        ("plain", "hidden_size 9 beside x of 8", attribute("hidden_size", np.int64(9)),
         ["/inputs/x", "hidden_size", "9"]),
        ("plain", "num_key_value_heads 1 beside k_proj of 2", attribute("num_key_value_heads", np.int64(1)),
         ["/weights/k_proj", "num_key_value_heads 1"]),
        ("latent_stored", "kv_lora_rank 17 beside stored weights of 16", attribute("kv_lora_rank", np.int64(17)),
         ["kv_lora_rank 17", "/weights/kv_a_proj_with_mqa"]),
        # Non-finite and negative eps and RoPE base.
        ("plain", "qk_norm_eps NaN", attribute("qk_norm_eps", np.nan), ["qk_norm_eps", "nan", ">= 0"]),
        ("plain", "qk_norm_eps -1", attribute("qk_norm_eps", -1.0), ["qk_norm_eps", "-1.0", ">= 0"]),
        ("plain", "qk_norm_eps inf", attribute("qk_norm_eps", np.inf), ["qk_norm_eps", "inf"]),
        ("latent", "latent_norm_eps NaN", attribute("latent_norm_eps", np.nan), ["latent_norm_eps", "nan", ">= 0"]),
        ("latent", "latent_norm_eps -1", attribute("latent_norm_eps", -1.0), ["latent_norm_eps", "-1.0"]),
        ("plain", "rope_theta NaN", attribute("rope_theta", np.nan), ["rope_theta", "nan", "> 1"]),
        ("plain", "softcap inf", attribute("softcap", np.inf), ["softcap", "inf", "> 0"]),
        # Finite attributes whose derived factors overflow the scores (attncheck: check_derived_factors).
        ("latent_yarn", "mscale_all_dim 1e308", attribute("rope_scaling_mscale_all_dim", 1e308),
         ["rope_scaling_mscale_all_dim", "at most 1e6"]),
        ("latent_yarn", "attention_factor 1e308", attribute("rope_scaling_attention_factor", 1e308),
         ["rope_scaling_attention_factor", "at most 1e6"]),
        # Small files declaring huge datasets: refused from the declared shape, before reading it.
        ("latent", "generated inputs of 2^22 tokens", huge_dataset("inputs/position_ids", (1, 2 ** 22), "<i8"),
         ["/inputs/position_ids", "seq 4194304", "2^20"]),
        ("plain", "an /expected dataset of 2^30 values", huge_dataset("expected/huge", (2 ** 30,), "<f8"),
         ["/expected/huge", "2^28"]),
    ]
    # Within every limit (about 10^8 generated parameters) but beyond the 2 GiB the child may take: refused from
    # the estimate, not by a MemoryError halfway (attncheck, without that limit, reads it).
    cases.append(("latent", "q_lora_rank 2^20 under RLIMIT_AS 2 GiB", attribute("q_lora_rank", np.int64(2 ** 20)),
                  ["not enough memory", "RLIMIT_AS"]))
    hostile = [edited(source, f"hostile_{number}", edit) for number, (source, _, edit, _) in enumerate(cases)]
    # eps 0 is valid in attncheck (`golden make --qk-norm-eps 0`): refusing it would fail a worker on a valid case.
    valid = {"qk_norm_eps 0": edited("plain", "qk_norm_eps_0", attribute("qk_norm_eps", 0.0)),
             "latent_norm_eps 0": edited("latent", "latent_norm_eps_0", attribute("latent_norm_eps", 0.0))}
    for path in valid.values():
        with h5py.File(path, "r+") as h5:
            h5.attrs["integrity"] = integrity.integrity_digest(h5, str(path))
    results = read_in_child(hostile + list(valid.values()))
    for path, result, (_, label, _, words) in zip(hostile, results, cases):
        refused(path, result, words, label, attncheck_too="RLIMIT_AS" not in label)
    for (label, path), result in zip(valid.items(), results[len(hostile):]):
        accepted(path, result, label)


def test_rank_wait():
    for value in ("5", "10", "0.5", "300", None):
        environ = {} if value is None else {"ATTNCHECK_WORKER_TIMEOUT": value}
        timeout = 300.0 if value is None else float(value)
        wait = distributed.rank_wait_seconds(environ)
        expect(0 < wait < timeout and math.isfinite(wait),
               f"ATTNCHECK_WORKER_TIMEOUT={value}: wait {wait}, expected in (0, {timeout})")
        print(f"ATTNCHECK_WORKER_TIMEOUT={value}: the ranks are waited for {wait:g} s", flush=True)
    expect(distributed.rank_wait_seconds({}) == 290, "unset: the wait stays 290 s (300 less 10)")
    for value in ("abc", "-3", "nan", "0", "inf", ""):
        try:
            wait = distributed.rank_wait_seconds({"ATTNCHECK_WORKER_TIMEOUT": value})
            expect(False, f"ATTNCHECK_WORKER_TIMEOUT={value!r}: accepted (wait {wait})")
        except BadInput as error:
            expect("ATTNCHECK_WORKER_TIMEOUT" in str(error) and "> 0" in str(error),
                   f"ATTNCHECK_WORKER_TIMEOUT={value!r}: the error names it and what is valid: {error}")
            print(f"ATTNCHECK_WORKER_TIMEOUT={value!r}: {error}", flush=True)


if __name__ == "__main__":
    test_rank_wait()
    with tempfile.TemporaryDirectory() as folder:
        test_case_files(pathlib.Path(folder))
    if failures:
        print(f"FAILED: {len(failures)} check(s)")
        sys.exit(1)
    print("PASS: hostile case files refused by name before anything is allocated, as attncheck refuses them; "
          "eps 0 read by both; serve_sharded's wait positive and below every valid worker timeout")
