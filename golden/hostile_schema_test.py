#!/usr/bin/env python3
"""ctest golden.hostile_schema: what golden/SCHEMA.md calls required is required by both readers (attncheck and
the Python package), never defaulted; and every member of /expected is compared or refused by name.

Each hostile file is a small golden edited with h5py (no reseal: the schema's checks come before the integrity
digest's, and the message must name the object, not /@integrity):
- a yarn golden without /geometry@rope_scaling_truncate (it read as true: a non-truncating layer checked as a
  truncating one, the mismatch blamed on the implementation), a llama3 one without its low_freq_factor, a
  llama3 one with yarn's beta_fast or yarn's truncate = 1 (read, then ignored), files without the root
  generator or seed;
- a sketched golden whose q_proj gradient is also stored in full, as zeros (the full one was never compared),
  stray /expected/ranks/01, /expected/ranks/-1, a dataset the geometry has no tensor for, a soft link.

    hostile_schema_test.py ATTNCHECK"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

import attncheck
from attncheck.errors import BadInput

binary = sys.argv[1]
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code=0):
    result = subprocess.run([binary, *map(str, arguments)], capture_output=True, text=True)
    expect(result.returncode == code, f"attncheck {' '.join(map(str, arguments))}: exit {result.returncode}, "
                                      f"expected {code}\n{result.stdout[-600:]}{result.stderr[-600:]}")
    return result


def refused_by_both(path, names, label):
    """attncheck (golden inspect, golden check) exits 2 naming each of `names`; the Python reader raises BadInput
    naming them too."""
    for arguments in (("golden", "inspect", path), ("golden", "check", path, "--impl", "reference")):
        result = run(*arguments, code=2)
        for name in names:
            expect(name in result.stderr, f"{label}: `attncheck {arguments[0]} {arguments[1]}` names {name}: "
                                          f"{result.stderr[-400:]}")
        expect("/@integrity" not in result.stderr, f"{label}: refused by the schema, not by the digest")
    try:
        attncheck.read_case(str(path))
        failures.append(f"{label}: the Python reader accepted it")
    except BadInput as error:
        for name in names:
            expect(name in str(error), f"{label}: the Python reader names {name}: {error}")


small = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
         "num_hidden_layers": 1, "max_position_embeddings": 4096, "rope_theta": 10000.0, "model_type": "llama"}
configs = {
    "yarn": dict(small, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    "llama3": dict(small, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
}

with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    made = {}
    for name, config in configs.items():
        (folder / f"{name}.json").write_text(json.dumps(config))
        made[name] = folder / f"{name}.h5"
        run("golden", "make", "--hf-config", folder / f"{name}.json", "--batch", "1", "--seq", "5", "-o", made[name])
    made["sketched"] = folder / "sketched.h5"
    run("golden", "make", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--head-dim", "8", "--tp", "2",
        "--batch", "1", "--seq", "5", "--sketch-gradients", "-o", made["sketched"])
    for path in made.values():  # the unedited files are read by both
        run("golden", "inspect", path)
        attncheck.read_case(str(path))

    def edited(source, label, edit):
        path = folder / f"{label}.h5"
        shutil.copyfile(made[source], path)
        with h5py.File(path, "r+") as file:
            edit(file)
        return path

    # Required attributes: refused when absent, in both readers.
    refused_by_both(edited("yarn", "no_truncate", lambda f: f["geometry"].attrs.__delitem__("rope_scaling_truncate")),
                    ["rope_scaling_truncate"], "yarn without truncate")
    refused_by_both(edited("llama3", "no_low_freq", lambda f: f["geometry"].attrs.__delitem__("rope_scaling_low_freq_factor")),
                    ["low_freq_factor"], "llama3 without low_freq_factor")
    refused_by_both(edited("llama3", "foreign_beta", lambda f: f["geometry"].attrs.__setitem__("rope_scaling_beta_fast", 32.0)),
                    ["beta_fast"], "llama3 with yarn's beta_fast")
    refused_by_both(edited("llama3", "foreign_truncate", lambda f: f["geometry"].attrs.__setitem__("rope_scaling_truncate", 1)),
                    ["rope_scaling_truncate"], "llama3 with yarn's truncate = 1")
    refused_by_both(edited("yarn", "scale_one_ulp", lambda f: f["geometry"].attrs.__setitem__(
                        "scale", np.nextafter(f["geometry"].attrs["scale"], 1.0))),
                    ["/geometry@scale"], "a scale one ulp from pow(head_dim, -0.5)")
    refused_by_both(edited("yarn", "no_generator", lambda f: f.attrs.__delitem__("generator")), ["generator"],
                    "no root generator")
    refused_by_both(edited("yarn", "no_seed", lambda f: f.attrs.__delitem__("seed")), ["seed"], "no root seed")

    # /expected: every member compared or refused by name (attncheck; the Python reader does not read /expected).
    def full_beside_sketch(file):
        shape = file["weights/q_proj"].shape if "weights/q_proj" in file else (32, 32)
        file["expected/grads/q_proj"] = np.zeros(shape)

    def stray_group(name):
        def edit(file):
            file.create_group(f"expected/ranks/{name}/grads")
            file[f"expected/ranks/{name}/grads/o_bias"] = np.zeros(32)
        return edit

    hostile = {
        "full_beside_sketch": (full_beside_sketch, "/expected/grads/q_proj", "beside its sketch"),
        "ranks_01": (stray_group("01"), "/expected/ranks/01", "not a tensor of this golden"),
        "ranks_minus_1": (stray_group("-1"), "/expected/ranks/-1", "not a tensor of this golden"),
        "stray_dataset": (lambda f: f.__setitem__("expected/grads/w_proj", np.zeros(32)), "/expected/grads/w_proj",
                          "not a tensor of this golden"),
        "empty_group": (lambda f: f.create_group("expected/extra"), "/expected/extra", "not a tensor of this golden"),
        "soft_link": (lambda f: f.__setitem__("expected/again", h5py.SoftLink("/expected/out")), "/expected/again",
                      "links are not followed"),
    }
    for label, (edit, member, words) in hostile.items():
        path = edited("sketched", label, edit)
        for arguments in (("golden", "inspect", path), ("golden", "check", path, "--impl", "reference")):
            result = run(*arguments, code=2)
            expect(member in result.stderr and words in result.stderr,
                   f"{label}: `attncheck {arguments[0]} {arguments[1]}` names {member} ({words}): {result.stderr[-500:]}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS: required attributes refused when absent by both readers; every /expected member compared or refused")
