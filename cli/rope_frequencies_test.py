#!/usr/bin/env python3
"""ctest cli.rope_frequencies_transformers: the RoPE frequencies and attention factor attncheck computes
(golden/SCHEMA.md "RoPE frequencies", core/model/rope_frequencies.hpp; shown by `attncheck plan --json`)
against transformers' own (modeling_rope_utils.ROPE_INIT_FUNCTIONS, run in float64 as
attncheck.adapters.hf_transformers runs transformers: its float32 requests made float64), for every scaled layer of
the official configs in core/config/hf_configs and for yarn variants no official file here has
(mscale / mscale_all_dim, an explicit attention factor, truncate false, partial rotary).

transformers forms inv_freq as 1 / theta^(2i/d) where the schema forms theta^(-2i/d) by C's pow; the two
differ by an ulp or two, so frequencies must agree to 4 ulps, attention factors to 2.

    rope_frequencies_test.py ATTNCHECK HF_CONFIG_DIR"""
import json
import math
import pathlib
import subprocess
import sys
import tempfile

import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from attncheck.adapters.hf_transformers import float64_everywhere  # the adapter's float64 regime

attncheck, configs = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def ulps(a, b):
    return abs(a - b) / math.ulp(max(abs(a), abs(b)))


def plan(path, layer):
    result = subprocess.run([attncheck, "plan", "--hf-config", str(path), "--hf-layer", str(layer), "--json"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        failures.append(f"{path.name} layer {layer}: plan exited {result.returncode}: {result.stderr}")
        return None
    return json.loads(result.stdout)


def transformers_config(raw):
    raw = dict(raw.get("text_config") or raw) if isinstance(raw.get("text_config"), dict) else dict(raw)
    model_type = raw.pop("model_type")
    if model_type == "gemma3":
        model_type = "gemma3_text"
    return transformers.AutoConfig.for_model(model_type, **raw)


def compare(name, path, layer, layer_type=None):
    ours = plan(path, layer)
    if ours is None:
        return
    scaling = ours["rope_scaling"]
    config = transformers_config(json.loads(path.read_text()))
    parameters = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    rope_type = parameters["rope_type"]
    expect(rope_type == scaling["type"], f"{name}: transformers' rope_type {rope_type}, attncheck's {scaling['type']}")
    compute = ROPE_INIT_FUNCTIONS[rope_type]
    kwargs = {"layer_type": layer_type} if layer_type else {}
    sets = [("inv_freq", None)]
    if rope_type == "longrope":  # short factors without a length; long ones for a call past the original length
        sets = [("inv_freq", None), ("long_inv_freq", parameters["original_max_position_embeddings"] + 1)]
    for key, seq_len in sets:
        with float64_everywhere():
            theirs, factor = compute(config, "cpu", seq_len=seq_len, **kwargs)
        theirs = theirs.tolist()
        expect(len(theirs) == len(scaling[key]), f"{name} {key}: {len(theirs)} frequencies, attncheck {len(scaling[key])}")
        worst = max((ulps(a, b) for a, b in zip(theirs, scaling[key])), default=0)
        expect(worst <= 4, f"{name} {key}: {worst:.0f} ulps from transformers' frequencies")
        if worst > 4:
            continue
        expect(ulps(float(factor), scaling["resolved_attention_factor"]) <= 2,
               f"{name}: attention factor {scaling['resolved_attention_factor']}, transformers {factor}")
    print(f"{name}: {rope_type}, {len(scaling['inv_freq'])} frequencies within 4 ulps of transformers', "
          f"attention factor {scaling['resolved_attention_factor']:.17g}")


compare("Llama 3.1 8B", configs / "meta-llama__Llama-3.1-8B.json", 0)
compare("Phi-3.5-mini", configs / "microsoft__Phi-3.5-mini-instruct.json", 0)
compare("Phi-4-mini (partial rotary 0.75)", configs / "microsoft__Phi-4-mini-instruct.json", 0)
compare("Gemma 3 4B full layer (linear)", configs / "google__gemma-3-4b-pt.json", 5, "full_attention")

# yarn has no official file here whose attention attncheck models: Qwen2.5's documented yarn extension,
# and variants exercising every branch of its attention factor and ramp.
qwen = json.loads((configs / "Qwen__Qwen2.5-7B-Instruct.json").read_text())
yarn_variants = {
    "yarn (Qwen2.5 x4)": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    "yarn mscale/mscale_all_dim": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                                   "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.707},
    "yarn explicit attention factor, no truncate": {"rope_type": "yarn", "factor": 8.0,
                                                     "original_max_position_embeddings": 8192,
                                                     "attention_factor": 1.25, "truncate": False,
                                                     "beta_fast": 16, "beta_slow": 2},
}
with tempfile.TemporaryDirectory() as folder:
    for name, rope_scaling in yarn_variants.items():
        config = dict(qwen, rope_scaling=rope_scaling)
        path = pathlib.Path(folder) / "config.json"
        path.write_text(json.dumps(config))
        compare(name, path, 0)
    partial = dict(qwen, partial_rotary_factor=0.5, rope_scaling=yarn_variants["yarn (Qwen2.5 x4)"])
    path = pathlib.Path(folder) / "partial.json"
    path.write_text(json.dumps(partial))
    compare("yarn with partial rotary 0.5", path, 0)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
