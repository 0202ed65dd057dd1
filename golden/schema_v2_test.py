#!/usr/bin/env python3
"""ctest golden.schema_v2: goldens of layers with RoPE scaling or an attention_multiplier are schema
version 2 (golden/SCHEMA.md "Schema version 2"), read back as the same layer by attncheck and by the
Python package, and judged: the reference-tp, torch-cpu-fp64 and torch-cpu-fp32 implementations pass
them, a plain layer still writes version 1, and files that disagree with themselves are refused (exit 2).

Small HF configs (llama with each rope_scaling type, granite) keep it quick; batch 2 puts the second
row's positions beyond 2^16, past every pretraining length here, so longrope uses its long factors.

    schema_v2_test.py ATTNCHECK"""
import json
import math
import pathlib
import subprocess
import sys
import tempfile

import h5py
import numpy as np

import attncheck

attncheck_binary = sys.argv[1]
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def run(*arguments, code=0):
    result = subprocess.run([attncheck_binary, *arguments], capture_output=True, text=True)
    expect(result.returncode == code, f"attncheck {' '.join(arguments)}: exit {result.returncode}, expected {code}\n"
                                      f"{result.stdout[-600:]}{result.stderr[-600:]}")
    return result


small = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "num_hidden_layers": 2, "max_position_embeddings": 4096, "rope_theta": 10000.0}
layers = {
    "linear": dict(small, model_type="llama", rope_scaling={"rope_type": "linear", "factor": 4.0}),
    "llama3": dict(small, model_type="llama", rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                          "high_freq_factor": 4.0,
                                                          "original_max_position_embeddings": 64}),
    "yarn": dict(small, model_type="llama", rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                        "original_max_position_embeddings": 64,
                                                        "mscale": 1.0, "mscale_all_dim": 0.5}),
    "longrope": dict(small, model_type="phi3", original_max_position_embeddings=64,
                     rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(8)],
                                   "long_factor": [1.5 + 0.5 * i for i in range(8)]}),
    "granite": dict(small, model_type="granite", attention_multiplier=0.03125),
}

with tempfile.TemporaryDirectory() as folder:
    folder = pathlib.Path(folder)
    for name, config in layers.items():
        config_path = folder / f"{name}.json"
        config_path.write_text(json.dumps(config))
        golden = folder / f"{name}.h5"
        run("golden", "make", "--hf-config", str(config_path), "--tp", "2", "--batch", "2", "--seq", "5",
            "--decode", "3,1,1", "-o", str(golden))
        if not golden.is_file():
            continue
        with h5py.File(golden, "r") as h5:
            expect(int(h5.attrs["schema_version"]) == 2, f"{name}: schema_version {h5.attrs['schema_version']}")
        for implementation in ("reference-tp", "torch-cpu-fp64", "torch-cpu-fp32"):
            run("golden", "check", str(golden), "--impl", implementation)
        # The Python package reads the same layer: its frequencies are the plan's, number for number.
        case = attncheck.read_case(str(golden))
        plan = json.loads(run("plan", "--hf-config", str(config_path), "--json").stdout or "{}")
        if plan:
            scaling = plan["rope_scaling"]
            largest = int(case.position_ids.max())
            ours = attncheck.case.rope_inverse_frequencies(case.geometry, largest).tolist()
            theirs = scaling["long_inv_freq"] if scaling["type"] == "longrope" else scaling["inv_freq"]
            expect(ours == theirs, f"{name}: Python's frequencies differ from attncheck's: {ours[:3]} vs {theirs[:3]}")
            expect(attncheck.case.rope_attention_factor(case.geometry) == scaling["resolved_attention_factor"],
                   f"{name}: attention factor {attncheck.case.rope_attention_factor(case.geometry)} vs "
                   f"{scaling['resolved_attention_factor']}")
            expect(math.isclose(case.geometry["scale"], plan["scale"], rel_tol=0, abs_tol=0), f"{name}: scale")
        print(f"{name}: schema v2 golden passes reference-tp, torch-cpu-fp64, torch-cpu-fp32; Python reads it")

    # longrope decoding across its pretraining length: the prefill call (keys cached) uses the short factors,
    # the later steps and the full forward the long ones. One batch row, the length set just past the
    # prefill's positions (read from a plain golden of the same seed). fp64 and fp32 implementations are
    # judged (the yardstick decodes with each call's frequencies: reference/emulated_layer.hpp).
    probe = folder / "probe.h5"
    run("golden", "make", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--batch", "1",
        "--seq", "6", "--decode", "3,1,2", "-o", str(probe))
    with h5py.File(probe, "r") as h5:
        prefill_last = int(h5["inputs/position_ids"][0, 2])
    crossing = dict(layers["longrope"], original_max_position_embeddings=prefill_last + 1)
    config_path = folder / "crossing.json"
    config_path.write_text(json.dumps(crossing))
    golden = folder / "crossing.h5"
    run("golden", "make", "--hf-config", str(config_path), "--batch", "1", "--seq", "6", "--decode", "3,1,2",
        "-o", str(golden))
    run("golden", "check", str(golden), "--impl", "reference")
    run("golden", "check", str(golden), "--impl", "torch-cpu-fp64")
    run("golden", "check", str(golden), "--impl", "torch-cpu-fp32")

    # A plain layer stays version 1.
    plain = folder / "plain.h5"
    run("golden", "make", "--hidden", "32", "--heads", "2", "--seq", "3", "-o", str(plain))
    with h5py.File(plain, "r") as h5:
        expect(int(h5.attrs["schema_version"]) == 1, "a plain layer is written as schema version 1")

    # Files that disagree with themselves are refused.
    stray = folder / "stray.h5"
    stray.write_bytes(plain.read_bytes())
    with h5py.File(stray, "a") as h5:
        h5["geometry"].attrs["rope_scaling"] = "linear"
    result = run("golden", "check", str(stray), "--impl", "reference", code=2)
    expect("rope_scaling" in result.stderr and "version 1" in result.stderr, f"stray v2 attribute: {result.stderr}")
    unknown = folder / "unknown.h5"
    unknown.write_bytes((folder / "linear.h5").read_bytes())
    with h5py.File(unknown, "a") as h5:
        h5["geometry"].attrs["rope_scaling"] = "dynamic"
    result = run("golden", "check", str(unknown), "--impl", "reference", code=2)
    expect("rope_scaling" in result.stderr, f"unknown rope_scaling type: {result.stderr}")
    missing = folder / "missing.h5"
    missing.write_bytes((folder / "llama3.h5").read_bytes())
    with h5py.File(missing, "a") as h5:
        del h5["geometry"].attrs["rope_scaling_low_freq_factor"]
    result = run("golden", "check", str(missing), "--impl", "reference", code=2)
    expect("low_freq_factor" in result.stderr, f"llama3 without its band: {result.stderr}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("schema v2: written for scaled layers and attention_multiplier, read back alike, judged; v1 kept for plain layers")
