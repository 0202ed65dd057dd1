#!/usr/bin/env python3
"""Runs Hugging Face transformers' own attention module on attncheck golden files, in float64, and
writes candidate files (golden/SCHEMA.md, "Candidate files") for `attncheck compare`.

    hf_transformers.py GOLDEN.h5 -o CANDIDATE.h5 [--arch auto|qwen3|gemma3|gemma2|llama|gpt-neox]
    hf_transformers.py GOLDEN.h5 ... --output-dir DIR      # DIR/<golden name>.candidate.h5 each
    hf_transformers.py --worker [--plant-bug NAME]          # for attncheck fuzz --impl exec:'...'

Only h5py, numpy, torch and transformers (with huggingface_hub, which it depends on) are used, and only what SCHEMA.md documents is read: this
file is also the proof that the schema is enough to write a candidate from Python.

What runs is transformers' code for the architecture: its Attention module (projections, QK-norm,
RoPE application, GQA repeat, softcap, softmax, o_proj), its rotary embedding, its mask builders
(create_causal_mask / create_sliding_window_causal_mask from a 2D padding mask), its DynamicCache
for the decode schedule, and torch autograd for every gradient. What attncheck supplies is the
inputs, the weights (copied into the module's parameters) and one precision policy:
transformers upcasts to float32 in RMSNorm, softmax and RoPE on purpose (for bf16/fp16 runs); in a
float64 run those casts would throw away half the digits, so Float64Everywhere turns every float32
request into float64 while the module runs, and refuses any float32 tensor that still appears.

Architecture for a geometry (--arch auto): QK-norm `rms` -> Qwen3Attention; `rms-one-plus` ->
Gemma3Attention; no QK-norm with softcap -> Gemma2Attention; no QK-norm with partial RoPE and no
explicit head_dim -> GPTNeoXAttention (which derives head_dim = hidden / heads itself); otherwise
LlamaAttention. A geometry the chosen module cannot express (interleaved RoPE, separate q/k/v and o
bias flags, a query that sees no key, ...) is refused with the reason and exit code 2.

Exit codes: 0 candidates written, 2 bad input or a geometry transformers cannot express. As a worker
(attncheck's protocol, impl/worker.hpp) a geometry it cannot express is answered "unsupported".
"""
import argparse
import contextlib
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attncheck_generator  # noqa: E402  (the weight generator of SCHEMA.md)


class BadInput(Exception):
    """A golden this adapter cannot read, or a geometry transformers cannot express (exit code 2)."""


class Inexpressible(BadInput):
    """A valid golden whose geometry transformers' module cannot express (a worker answers "unsupported")."""


# ---------------------------------------------------------------------------------------------
# Reading a golden (SCHEMA.md v1)

REQUIRED_GEOMETRY = ["hidden_size", "num_attention_heads", "num_key_value_heads", "rotary_dim", "rope_theta",
                     "rope_style", "qk_norm", "qk_norm_eps", "qkv_bias", "out_bias", "scale", "causal", "tp_size"]
OPTIONAL_GEOMETRY = ["head_dim", "query_pre_attn_scalar", "softcap", "sliding_window"]


def _attribute(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise BadInput(f"attribute of shape {value.shape}; attributes are scalars")
        value = value.reshape(()).item()
    if isinstance(value, np.generic):
        value = value.item()
    return value


def _dataset(h5, path, dtype, shape, golden_path):
    if path not in h5 or not hasattr(h5[path], "dtype"):
        raise BadInput(f"{golden_path}: dataset {path} is missing (see golden/SCHEMA.md)")
    dataset = h5[path]
    if dataset.dtype != np.dtype(dtype):
        raise BadInput(f"{golden_path}: {path} is {dataset.dtype}; schema v1 stores it as {np.dtype(dtype)}")
    if shape is not None and tuple(dataset.shape) != tuple(shape):
        raise BadInput(f"{golden_path}: {path} has shape {list(dataset.shape)}; expected {list(shape)}")
    values = dataset[()]
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise BadInput(f"{golden_path}: {path} holds NaN or Inf")
    return values


def resolved_head_dim(geometry):
    """SCHEMA.md: an absent head_dim means hidden_size / num_attention_heads. The resolved head_dim sizes
    the weights and is passed explicitly to every module except GPT-NeoX, which gets the absence itself
    (the one module with a notion of it)."""
    if "head_dim" in geometry:
        return geometry["head_dim"]
    return geometry["hidden_size"] // geometry["num_attention_heads"]


def weight_shapes(geometry):
    hidden, heads, kv_heads = geometry["hidden_size"], geometry["num_attention_heads"], geometry["num_key_value_heads"]
    head_dim = resolved_head_dim(geometry)
    shapes = {"q_proj": (heads * head_dim, hidden), "k_proj": (kv_heads * head_dim, hidden),
              "v_proj": (kv_heads * head_dim, hidden), "o_proj": (hidden, heads * head_dim)}
    if geometry["qkv_bias"]:
        shapes.update(q_bias=(heads * head_dim,), k_bias=(kv_heads * head_dim,), v_bias=(kv_heads * head_dim,))
    if geometry["out_bias"]:
        shapes["o_bias"] = (hidden,)
    if geometry["qk_norm"] != "none":
        shapes.update(q_norm=(head_dim,), k_norm=(head_dim,))
    return shapes


def read_golden(path):
    import h5py

    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    try:
        with h5py.File(path, "r") as h5:
            return _read_open_golden(h5, path)
    except OSError as error:  # not HDF5, truncated, checksum failure
        raise BadInput(f"{path}: cannot be read as HDF5 ({error})") from error


def _read_inputs(h5, geometry, path):
    """x, dout and position_ids: stored, or x and dout named by the input generator (SCHEMA.md)."""
    if "inputs" not in h5:
        raise BadInput(f"{path}: group /inputs is missing")
    hidden = geometry["hidden_size"]
    generator = _attribute(h5["inputs"].attrs.get("generator", ""))
    if not generator:
        x = _dataset(h5, "inputs/x", "<f8", None, path)
        if x.ndim != 3 or x.shape[2] != hidden:
            raise BadInput(f"{path}: /inputs/x has shape {list(x.shape)}; expected [batch, seq, {hidden}]")
        batch, seq = x.shape[:2]
        return {"x": x,
                "position_ids": _dataset(h5, "inputs/position_ids", "<i8", (batch, seq), path),
                "dout": _dataset(h5, "inputs/dout", "<f8", (batch, seq, hidden), path)}
    if generator != "attncheck-splitmix64-v1":
        raise BadInput(f"{path}: /inputs@generator is '{generator}'; known: attncheck-splitmix64-v1")
    for name in ("x", "dout"):
        if f"inputs/{name}" in h5:
            raise BadInput(f"{path}: /inputs names a generator and also stores {name} (the file disagrees with itself)")
    attributes = h5["inputs"].attrs
    if "seed" not in attributes or "activations" not in attributes:
        raise BadInput(f"{path}: /inputs names a generator but lacks its seed or activations attribute")
    if not isinstance(_attribute(attributes["seed"]), (int, np.integer)):
        raise BadInput(f"{path}: /inputs@seed must be an integer (int64), not {attributes['seed']!r}")
    distribution = _attribute(attributes["activations"])
    if distribution not in ("uniform", "heavy-tailed", "outliers"):
        raise BadInput(f"{path}: /inputs@activations is '{distribution}'; expected uniform, heavy-tailed or outliers")
    positions = _dataset(h5, "inputs/position_ids", "<i8", None, path)
    if positions.ndim != 2 or min(positions.shape) < 1:
        raise BadInput(f"{path}: /inputs/position_ids has shape {list(positions.shape)}; expected [batch, seq]")
    shape = (positions.shape[0], positions.shape[1], hidden)
    seed = int(_attribute(attributes["seed"])) & attncheck_generator.MASK  # int64 attribute, unsigned seed
    return {"x": attncheck_generator.generate_activations_numpy(seed, "x", shape, distribution),
            "position_ids": positions,
            "dout": attncheck_generator.generate_activations_numpy(seed, "dout", shape, distribution)}


def _read_open_golden(h5, path):
    version = _attribute(h5.attrs.get("schema_version", -1))
    if version != 1:
        raise BadInput(f"{path}: schema_version is {version}; this adapter reads schema v1")
    if "geometry" not in h5:
        raise BadInput(f"{path}: group /geometry is missing")
    attributes = h5["geometry"].attrs
    missing = [name for name in REQUIRED_GEOMETRY if name not in attributes]
    if missing:
        raise BadInput(f"{path}: /geometry lacks required attribute(s) {', '.join(missing)}")
    geometry = {name: _attribute(attributes[name]) for name in REQUIRED_GEOMETRY + OPTIONAL_GEOMETRY
                if name in attributes}

    inputs = _read_inputs(h5, geometry, path)
    batch = inputs["x"].shape[0]
    if "inputs/key_lengths" in h5:
        inputs["key_lengths"] = _dataset(h5, "inputs/key_lengths", "<i8", (batch,), path)
    if "inputs/decode_schedule" in h5:
        inputs["decode_schedule"] = _dataset(h5, "inputs/decode_schedule", "<i8", None, path)

    shapes = weight_shapes(geometry)
    generator = _attribute(h5["weights"].attrs.get("generator", "")) if "weights" in h5 else ""
    if generator:
        if generator != "attncheck-splitmix64-v1":
            raise BadInput(f"{path}: /weights@generator is '{generator}'; known: attncheck-splitmix64-v1")
        seed = _attribute(h5["weights"].attrs["seed"]) & attncheck_generator.MASK  # int64 attribute, unsigned seed
        spec = dict(geometry, head_dim=resolved_head_dim(geometry))
        weights = attncheck_generator.generate_weights_numpy(spec, seed)
    else:
        weights = {name: _dataset(h5, f"weights/{name}", "<f8", shape, path) for name, shape in shapes.items()}
    return geometry, inputs, weights


# ---------------------------------------------------------------------------------------------
# float64 throughout

def float64_everywhere():
    import torch
    from torch.overrides import TorchFunctionMode

    class Float64Everywhere(TorchFunctionMode):
        """Every float32 request (dtype=torch.float32, .float(), .to(torch.float32)) becomes float64
        while transformers' module runs; a float32 tensor that appears anyway is an error."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {key: torch.float64 if value is torch.float32 else value for key, value in (kwargs or {}).items()}
            args = tuple(torch.float64 if value is torch.float32 else value for value in args)
            if func is torch.Tensor.float:
                func = torch.Tensor.double
            result = func(*args, **kwargs)
            for value in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
                    raise RuntimeError(f"{getattr(func, '__name__', func)} produced a float32 tensor in a float64 run")
            return result

    @contextlib.contextmanager
    def scope():
        # The default dtype too: parameters and buffers created without a dtype are float64 from birth.
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with Float64Everywhere():
                yield
        finally:
            torch.set_default_dtype(previous)

    return scope()


# ---------------------------------------------------------------------------------------------
# transformers' module for a geometry

ARCHITECTURES = ["qwen3", "gemma3", "gemma2", "llama", "gpt-neox"]


def choose_architecture(geometry):
    if geometry["qk_norm"] == "rms":
        return "qwen3"
    if geometry["qk_norm"] == "rms-one-plus":
        return "gemma3"
    if "softcap" in geometry:
        return "gemma2"
    if "head_dim" not in geometry and geometry["rotary_dim"] < resolved_head_dim(geometry):
        return "gpt-neox"
    return "llama"


def check_expressible(architecture, geometry, inputs, attn_implementation):
    """Everything the architecture's module cannot express, as one message (empty when it can)."""
    problems = []
    if "softcap" in geometry and attn_implementation == "sdpa":
        problems.append("softcap with --attn-implementation sdpa (transformers' sdpa path has no softcap)")
    head_dim = resolved_head_dim(geometry)
    qk_norm_of = {"qwen3": "rms", "gemma3": "rms-one-plus"}
    if geometry["qk_norm"] != qk_norm_of.get(architecture, "none"):
        problems.append(f"qk_norm '{geometry['qk_norm']}' (the {architecture} module has "
                        f"'{qk_norm_of.get(architecture, 'none')}')")
    if geometry["rope_style"] != "half-split":
        problems.append(f"rope_style '{geometry['rope_style']}' (transformers' rotate_half is half-split)")
    if geometry["qkv_bias"] != geometry["out_bias"]:
        problems.append("qkv_bias != out_bias (transformers has one attention_bias flag for all four)")
    if not geometry["causal"]:
        problems.append("causal = 0 (these decoder modules are causal)")
    if "softcap" in geometry and architecture != "gemma2":
        problems.append(f"softcap (only Gemma 2's module has attn_logit_softcapping here, not {architecture})")
    if "sliding_window" in geometry and architecture in ("llama", "gpt-neox"):
        problems.append(f"sliding_window (the {architecture} module has none)")
    if architecture == "gpt-neox":
        if "head_dim" in geometry:
            problems.append("an explicit head_dim (GPT-NeoX derives hidden_size / num_attention_heads: the "
                            "limitation attncheck exists to catch)")
        if geometry["num_key_value_heads"] != geometry["num_attention_heads"]:
            problems.append("grouped KV heads (GPT-NeoX's module is multi-head only)")
    elif geometry["rotary_dim"] != head_dim:
        problems.append(f"rotary_dim {geometry['rotary_dim']} < head_dim {head_dim} (the {architecture} module "
                        "rotates the whole head)")
    if architecture not in ("gemma3", "gemma2") and "query_pre_attn_scalar" in geometry:
        problems.append(f"query_pre_attn_scalar (the {architecture} module scales by head_dim^-0.5)")
    if geometry.get("sliding_window") == 1 and "decode_schedule" in inputs:
        # Found by `attncheck fuzz --impl exec:'... --worker'`: DynamicSlidingWindowLayer keeps
        # keys[:, :, -sliding_window + 1:], which for a window of 1 is [0:], every token, while the mask
        # is built for none: decoding attends to stale keys (transformers 5.24.0, cache_utils.py).
        problems.append("sliding_window 1 with a decode schedule (transformers' sliding-window cache keeps "
                        "every token when the window is 1: a transformers bug attncheck found)")
    if queries_seeing_no_key(geometry, inputs):
        problems.append("a query that sees no key (padding under a sliding window or a key length of 0: "
                        "attncheck outputs 0 there, transformers has no such convention)")
    return "; ".join(problems)


def queries_seeing_no_key(geometry, inputs):
    """Whether some query's visible keys (SCHEMA.md's masks: causal, window, padding) are none."""
    batch, seq = inputs["x"].shape[:2]
    key_lengths = inputs.get("key_lengths", np.full(batch, seq))
    window = geometry.get("sliding_window")
    for length in key_lengths:
        for query in range(seq):
            first = max(0, query - window + 1) if window else 0
            end = min(length, query + 1) if geometry["causal"] else length
            if end <= first:
                return True
    return False


def query_pre_attn_scalar(geometry):
    """Gemma's scale source; transformers' config types it as an integer."""
    value = geometry.get("query_pre_attn_scalar", resolved_head_dim(geometry))
    if not float(value).is_integer():
        raise Inexpressible(f"query_pre_attn_scalar {value}: transformers' Gemma configs take an integer")
    return int(value)


def build_module(architecture, geometry, positions, attn_implementation):
    """(config, attention module, rotary embedding, layer type) in float64."""
    from huggingface_hub.errors import StrictDataclassError  # transformers' config validation errors

    try:
        return _build_module(architecture, geometry, positions, attn_implementation)
    except BadInput:
        raise
    except (ValueError, TypeError, StrictDataclassError) as error:
        # transformers' own config validation, e.g. LlamaConfig refusing a hidden_size that num_heads does
        # not divide even when head_dim is given: a limit of transformers, not a failure.
        raise Inexpressible(f"transformers' {architecture} config refuses this geometry: "
                            f"{type(error).__name__}: {error}") from error


def _build_module(architecture, geometry, positions, attn_implementation):
    import torch
    import transformers

    head_dim = resolved_head_dim(geometry)
    layer_type = "sliding_attention" if "sliding_window" in geometry else "full_attention"
    rope = {"rope_type": "default", "rope_theta": float(geometry["rope_theta"])}
    common = dict(hidden_size=geometry["hidden_size"], num_attention_heads=geometry["num_attention_heads"],
                  num_hidden_layers=1, max_position_embeddings=int(positions.max()) + 1,
                  attention_bias=bool(geometry["qkv_bias"]), attention_dropout=0.0,
                  attn_implementation=attn_implementation)
    if architecture == "gpt-neox":
        rope["partial_rotary_factor"] = geometry["rotary_dim"] / head_dim
        config = transformers.GPTNeoXConfig(**common, rope_parameters=rope)
        modeling = transformers.models.gpt_neox.modeling_gpt_neox
        attention, rotary = modeling.GPTNeoXAttention(config, 0), modeling.GPTNeoXRotaryEmbedding(config)
    else:
        common.update(num_key_value_heads=geometry["num_key_value_heads"], head_dim=head_dim,
                      rms_norm_eps=geometry["qk_norm_eps"])
        if architecture == "qwen3":
            config = transformers.Qwen3Config(**common, rope_parameters=rope, layer_types=[layer_type],
                                              use_sliding_window="sliding_window" in geometry,
                                              sliding_window=geometry.get("sliding_window"))
            modeling = transformers.models.qwen3.modeling_qwen3
            attention, rotary = modeling.Qwen3Attention(config, 0), modeling.Qwen3RotaryEmbedding(config)
        elif architecture == "gemma3":
            config = transformers.Gemma3TextConfig(
                **common, layer_types=[layer_type], sliding_window=geometry.get("sliding_window"),
                query_pre_attn_scalar=query_pre_attn_scalar(geometry),
                rope_parameters={"sliding_attention": dict(rope), "full_attention": dict(rope)})
            modeling = transformers.models.gemma3.modeling_gemma3
            attention, rotary = modeling.Gemma3Attention(config, 0), modeling.Gemma3RotaryEmbedding(config)
        elif architecture == "gemma2":
            config = transformers.Gemma2Config(
                **common, layer_types=[layer_type], sliding_window=geometry.get("sliding_window"),
                query_pre_attn_scalar=query_pre_attn_scalar(geometry),
                attn_logit_softcapping=geometry.get("softcap"), final_logit_softcapping=None, rope_parameters=rope)
            modeling = transformers.models.gemma2.modeling_gemma2
            attention, rotary = modeling.Gemma2Attention(config, 0), modeling.Gemma2RotaryEmbedding(config)
        else:
            config = transformers.LlamaConfig(**common, rope_parameters=rope)
            modeling = transformers.models.llama.modeling_llama
            attention, rotary = modeling.LlamaAttention(config, 0), modeling.LlamaRotaryEmbedding(config)
    attention.to(torch.float64).eval()
    rotary.to(torch.float64)
    use_schema_frequencies(rotary, geometry)

    # The module must have read the geometry as attncheck means it; a disagreement here would make
    # every comparison fail for a reason that is not a bug.
    module_head_dim = getattr(attention, "head_dim", getattr(attention, "head_size", None))
    if module_head_dim != head_dim:
        raise BadInput(f"{architecture}: the module built head_dim {module_head_dim}, the golden means {head_dim}")
    if not math.isclose(attention.scaling, geometry["scale"], rel_tol=4e-16):
        raise BadInput(f"{architecture}: the module scales scores by {attention.scaling!r}, "
                       f"the golden by {geometry['scale']!r}")
    if architecture == "gpt-neox" and attention.rotary_ndims != geometry["rotary_dim"]:
        raise Inexpressible(f"gpt-neox: the module rotates {attention.rotary_ndims} channels (int(head_dim x "
                            f"rotary_pct)), the golden {geometry['rotary_dim']}")
    return config, attention, rotary, layer_type


def use_schema_frequencies(rotary, geometry):
    """transformers' RoPE inverse frequencies, checked against SCHEMA.md's and then replaced by them.

    transformers forms inv_freq_i as 1 / theta^(2i/d), SCHEMA.md as theta^(-2i/d): the same number to
    within an ulp or two, but the angle is position * inv_freq, and at the goldens' positions (up to
    ~4.4e5) a 1-ulp difference moves an angle by ~1e-11 relative, which heavy-tailed activations carry
    into gradients as ~1e5 ulps, beyond fp64 tolerance for a reason that is not a bug (measured on
    small_softcap_padding.h5: 1.4e5 ulps with transformers' rounding, 3.8 with SCHEMA's). So the check
    is that the frequencies are the same function (4 ulps), and the golden's rounding is used."""
    import torch

    rotary_dim, theta = geometry["rotary_dim"], float(geometry["rope_theta"])
    # math.pow is C's pow, as the reference's std::pow (numpy's vectorised power differs by an ulp in places).
    schema = torch.tensor([math.pow(theta, -2.0 * i / rotary_dim) for i in range(rotary_dim // 2)], dtype=torch.float64)
    replaced = 0
    for name, buffer in rotary.named_buffers():
        if not name.endswith("inv_freq"):
            continue
        if buffer.shape != schema.shape or not torch.allclose(buffer, schema, rtol=4 * 2.0**-52, atol=0.0):
            raise BadInput(f"transformers' RoPE frequencies ({name}, {list(buffer.shape)}) are not "
                           f"theta^(-2i/{rotary_dim}) with theta {theta}: the module reads the geometry differently")
        with torch.no_grad():
            buffer.copy_(schema)
        replaced += 1
    scalings = [value for name, value in vars(rotary).items() if name.endswith("attention_scaling")]
    if replaced == 0 or any(scaling != 1.0 for scaling in scalings):
        raise BadInput("transformers' rotary embedding has no plain inv_freq buffer (or scales cos/sin)")


def load_weights(architecture, attention, weights):
    """Copies the golden's HF-layout weights into the module's parameters; returns a function mapping
    the module's parameter gradients back to the golden's names."""
    import torch

    if architecture == "gpt-neox":
        # GPT-NeoX fuses q, k, v per head: rows [h·3d, h·3d + d) are head h's queries, then its keys, then
        # its values (the view(..., heads, 3·head_dim) in GPTNeoXAttention.forward).
        heads = attention.config.num_attention_heads
        head_dim = attention.head_size

        def fuse(q, k, v):
            parts = [part.reshape(heads, head_dim, *part.shape[1:]) for part in (q, k, v)]
            return np.stack(parts, axis=1).reshape(3 * heads * head_dim, *q.shape[1:])

        def split(fused):
            per_head = fused.reshape(heads, 3, head_dim, *fused.shape[1:])
            return [per_head[:, index].reshape(heads * head_dim, *fused.shape[1:]) for index in range(3)]

        sources = {"query_key_value.weight": fuse(weights["q_proj"], weights["k_proj"], weights["v_proj"]),
                   "dense.weight": weights["o_proj"]}
        if "q_bias" in weights:
            sources["query_key_value.bias"] = fuse(weights["q_bias"], weights["k_bias"], weights["v_bias"])
            sources["dense.bias"] = weights["o_bias"]

        def gradients(parameters):
            grads = {}
            grads["q_proj"], grads["k_proj"], grads["v_proj"] = split(parameters["query_key_value.weight"])
            grads["o_proj"] = parameters["dense.weight"]
            if "query_key_value.bias" in parameters:
                grads["q_bias"], grads["k_bias"], grads["v_bias"] = split(parameters["query_key_value.bias"])
                grads["o_bias"] = parameters["dense.bias"]
            return grads
    else:
        names = {"q_proj": "q_proj.weight", "k_proj": "k_proj.weight", "v_proj": "v_proj.weight",
                 "o_proj": "o_proj.weight", "q_bias": "q_proj.bias", "k_bias": "k_proj.bias",
                 "v_bias": "v_proj.bias", "o_bias": "o_proj.bias", "q_norm": "q_norm.weight", "k_norm": "k_norm.weight"}
        sources = {names[name]: values for name, values in weights.items()}

        def gradients(parameters):
            return {name: parameters[names[name]] for name in weights}

    parameters = dict(attention.named_parameters())
    if set(parameters) != set(sources):
        raise BadInput(f"the module's parameters {sorted(parameters)} do not match the golden's weights {sorted(sources)}")
    with torch.no_grad():
        for name, values in sources.items():
            if tuple(parameters[name].shape) != values.shape:
                raise BadInput(f"{name}: the module has shape {list(parameters[name].shape)}, the golden {list(values.shape)}")
            parameters[name].copy_(torch.from_numpy(np.ascontiguousarray(values)))
    return gradients


# ---------------------------------------------------------------------------------------------
# Running it

def attend(architecture, config, attention, rotary, layer_type, x, positions, padding_mask, cache):
    """One call of the module on x [batch, tokens, hidden]: transformers' mask builder sees the 2D
    padding mask over every key so far; position ids go to RoPE only (attncheck masks by sequence
    index, and transformers would read non-consecutive position ids as packed sequences)."""
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    build_mask = create_sliding_window_causal_mask if layer_type == "sliding_attention" else create_causal_mask
    mask = build_mask(config=config, inputs_embeds=x, attention_mask=padding_mask, cache=cache, position_ids=None)
    if architecture == "gemma3":
        cos_sin = rotary(x, positions, layer_type)
    else:
        cos_sin = rotary(x, positions)
    if architecture == "gpt-neox":
        out, _ = attention(x, attention_mask=mask, layer_past=cache, position_embeddings=cos_sin)
    else:
        out, _ = attention(x, position_embeddings=cos_sin, attention_mask=mask, cache=cache)
    return out


def run(architecture, geometry, inputs, weights, attn_implementation, plant_bug=None):
    """{candidate tensor name: float64 array}: out, grads/x, grads/<weight>, and decode/out."""
    import torch
    from transformers import DynamicCache

    torch.manual_seed(0)  # nothing random is used; fixed so that a future dropout default could not differ
    positions = torch.from_numpy(inputs["position_ids"])
    with float64_everywhere():  # also at construction: the rotary embedding computes inv_freq there
        config, attention, rotary, layer_type = build_module(architecture, geometry, inputs["position_ids"],
                                                            attn_implementation)
    gradients_by_name = load_weights(architecture, attention, weights)
    if plant_bug:
        PLANTED_BUGS[plant_bug](attention, geometry)
    batch, seq, _ = inputs["x"].shape
    key_lengths = inputs.get("key_lengths", np.full(batch, seq))
    padding_mask = torch.from_numpy((np.arange(seq)[None, :] < key_lengths[:, None]).astype(np.int64))

    with float64_everywhere():
        x = torch.from_numpy(inputs["x"]).requires_grad_(True)
        out = attend(architecture, config, attention, rotary, layer_type, x, positions, padding_mask, None)
        out.backward(torch.from_numpy(inputs["dout"]))
    result = {"out": out.detach().numpy(), "grads/x": x.grad.numpy()}
    parameters = {name: parameter.grad.numpy() for name, parameter in attention.named_parameters()}
    for name, gradient in gradients_by_name(parameters).items():
        result[f"grads/{name}"] = np.ascontiguousarray(gradient)

    if "decode_schedule" in inputs:
        # Prefill, then each step's tokens, through transformers' DynamicCache (a sliding layer's cache
        # keeps only the window).
        schedule = [int(count) for count in inputs["decode_schedule"]]
        cache = DynamicCache(config=config)
        outputs, start = [], 0
        with torch.no_grad(), float64_everywhere():
            for count in schedule:
                end = start + count
                chunk = torch.from_numpy(inputs["x"][:, start:end])
                outputs.append(attend(architecture, config, attention, rotary, layer_type, chunk,
                                      positions[:, start:end], padding_mask[:, :end], cache))
                start = end
        result["decode/out"] = torch.cat(outputs, dim=1).numpy()
    for name, values in result.items():
        if values.dtype != np.float64:
            raise RuntimeError(f"{name} came out as {values.dtype}")
    return result


# Deliberate bugs for showing that `attncheck fuzz` catches and shrinks a broken worker
# (--plant-bug NAME): each changes the module after the geometry checks, as a framework bug would.
def _quotient_scale(attention, geometry):
    """Scores scaled by (hidden_size / num_heads)^-0.5: the framework derives head_dim from the quotient."""
    hidden, heads = geometry["hidden_size"], geometry["num_attention_heads"]
    if hidden % heads == 0 and hidden // heads > 0:
        attention.scaling = (hidden // heads) ** -0.5


PLANTED_BUGS = {"quotient-scale": _quotient_scale}


def worker(attn_implementation, plant_bug):
    """attncheck worker protocol 1 (impl/worker.hpp): "run CASE CANDIDATE" lines on stdin, one
    "ok" / "unsupported REASON" / "error MESSAGE" line each on stdout. Everything else goes to stderr."""
    protocol = sys.stdout
    sys.stdout = sys.stderr  # a stray print from any library must not corrupt the protocol

    def reply(text):
        protocol.write(" ".join(text.split()) + "\n")  # one line, whatever the message holds
        protocol.flush()

    import transformers

    reply(f"attncheck-worker 1 transformers {transformers.__version__}"
          + (f" (planted bug: {plant_bug})" if plant_bug else ""))
    for line in sys.stdin:
        request = line.split()
        if len(request) != 3 or request[0] != "run":
            reply(f"error expected 'run CASE CANDIDATE', got {line.strip()[:100]!r}")
            continue
        try:
            adapt(request[1], request[2], "auto", attn_implementation, plant_bug, log=sys.stderr)
            reply("ok")
        except Inexpressible as error:
            reply(f"unsupported {error}")
        except Exception as error:  # noqa: BLE001  (any failure is this case's answer, not the worker's end)
            reply(f"error {type(error).__name__}: {error}")
    return 0


def write_candidate(path, tensors, description):
    import h5py

    with h5py.File(path, "w") as h5:
        h5.attrs["schema_version"] = np.int64(1)
        h5.attrs["generator"] = description
        group = h5.create_group("result")
        group.attrs["precision"] = "fp64"
        group.attrs["tp_size"] = np.int64(1)  # one unsharded module: excused from per-rank gradients
        for name, values in tensors.items():
            group.create_dataset(name, data=np.ascontiguousarray(values, dtype="<f8"))


def adapt(golden_path, candidate_path, architecture, attn_implementation, plant_bug=None, log=sys.stdout):
    import transformers

    geometry, inputs, weights = read_golden(golden_path)
    if architecture == "auto":
        architecture = choose_architecture(geometry)
    problems = check_expressible(architecture, geometry, inputs, attn_implementation)
    if problems:
        raise Inexpressible(f"{golden_path}: transformers' {architecture} attention cannot express this golden: {problems}")
    tensors = run(architecture, geometry, inputs, weights, attn_implementation, plant_bug)
    write_candidate(candidate_path, tensors,
                    f"transformers {transformers.__version__} {architecture} attention "
                    f"({attn_implementation}, float64) via golden/adapters/hf_transformers.py")
    print(f"{golden_path}: {architecture} ({attn_implementation}) -> {candidate_path}", file=log)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("goldens", nargs="*", metavar="GOLDEN")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--worker", action="store_true",
                        help="serve attncheck's worker protocol on stdin/stdout (attncheck fuzz --impl exec:...)")
    target.add_argument("-o", "--output", help="candidate file (one golden)")
    target.add_argument("--output-dir", help="folder for <golden name>.candidate.h5 (any number of goldens)")
    parser.add_argument("--arch", default="auto", choices=["auto"] + ARCHITECTURES)
    parser.add_argument("--attn-implementation", default="eager", choices=["eager", "sdpa"],
                        help="transformers' attention function (sdpa has no softcap)")
    parser.add_argument("--plant-bug", choices=sorted(PLANTED_BUGS),
                        help="run transformers with this deliberate bug (to show the fuzzer catches it)")
    arguments = parser.parse_args()
    if arguments.worker:
        if arguments.goldens:
            parser.error("--worker reads its cases from stdin; give no GOLDEN")
        return worker(arguments.attn_implementation, arguments.plant_bug)
    if not arguments.goldens or not (arguments.output or arguments.output_dir):
        parser.error("give GOLDEN... with -o CANDIDATE or --output-dir DIR (or --worker)")
    if arguments.output and len(arguments.goldens) != 1:
        parser.error("-o names one candidate; use --output-dir for several goldens")
    try:
        for golden in arguments.goldens:
            if arguments.output:
                candidate = arguments.output
            else:
                os.makedirs(arguments.output_dir, exist_ok=True)
                name = os.path.basename(golden).removesuffix(".h5")
                candidate = os.path.join(arguments.output_dir, f"{name}.candidate.h5")
            adapt(golden, candidate, arguments.arch, arguments.attn_implementation, arguments.plant_bug)
    except BadInput as error:
        print(f"hf_transformers.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
