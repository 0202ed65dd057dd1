"""A second, independent forward of the attention layer: golden/SCHEMA.md read as a specification and written
as a float64 numpy forward, checked against every golden's stored answers (ctest python.conformance).

attncheck's own reader and reference (C++) write and re-read the goldens; this module only reads each file
through python/attncheck (attncheck.case.read_case: geometry, inputs and weights, generated ones rebuilt
by attncheck.generator; masks; C-pow RoPE frequencies) and recomputes from the file alone:

- `out` [batch, seq, hidden] (the whole sequence as one forward call), and `decode/out` when the golden has a
  decode schedule, as a KV cache decodes it: the prefill call, then each step's call, every call's tokens
  rotated with that call's own frequencies (longrope chooses its factors per call) and attending to the
  cache (bottom-right aligned causal mask);
- where the golden sketches activations (`sketches/out`, `sketches/decode/out`), the attncheck-sketch-v1
  sketch of that output ([batch, tokens, 4]: per token its 2-norm and dot products with 3 vectors of +-1);
- every tensor compared with SCHEMA's fp64 tolerance: within 2^16 ulps of the tensor's scale, the scale
  being its largest |expected| value (a sketch: the sketch tensor's own largest |entry|) and one ulp
  2^-52 of the scale (core/compare/tolerance.hpp);
- the integrity digest recomputed by attncheck.integrity, which must equal the file's stored `integrity`.

Only the forward: no gradients. The formulas follow SCHEMA.md step by step in float64 (QK-norm x / rms(x) * w,
RoPE cos and sin times the attention factor, scores = scale * q.k, then the softcap, then sinks and
softmax); sums may run in another order than the reference's (the tolerance absorbs that).

    python3 -m attncheck.conformance golden/data/*.h5        # one line per golden; exit 1 on any mismatch
"""
import argparse
import math
import os
import sys
import time

import numpy as np

from .case import is_latent, latent_scale, read_case, resolved_head_dim, rope_attention_factor
from .errors import BadInput
from .generator import Stream

FP64_TOLERANCE_ULPS = 65536.0  # SCHEMA.md / core/compare/tolerance.hpp: 2^16 ulps of the tensor's scale
FP64_EPSILON = math.ldexp(1.0, -52)


# ---------------------------------------------------------------------------------------------------------
# The layer, SCHEMA.md's formulas.

def _project(x, weight, bias):
    """x [B, T, in] times an HF-layout weight [out, in] (+ bias) -> [B, T, out]."""
    result = x @ weight.T
    if bias is not None:
        result = result + bias
    return result


def _rms_norm(values, weight, kind, eps):
    """QK-norm over the last axis: x / rms(x) * w (`rms`, `rms-full-width`) or x / rms(x) * (1 + w)
    (`rms-one-plus`), rms(x) = sqrt(mean(x^2) + eps)."""
    rms = np.sqrt(np.mean(values * values, axis=-1, keepdims=True) + eps)
    factor = 1.0 + weight if kind == "rms-one-plus" else weight
    return values / rms * factor


def score_scale(geometry, path=""):
    """The score scale from its source, checked against the stored `scale` (SCHEMA.md: equals head_dim^-0.5,
    or query_pre_attn_scalar^-0.5, or attention_multiplier; version 2 names the source in scale_source).
    x^-0.5 is C's pow(x, -0.5) (math.pow), as attncheck forms it and compares it exactly; 1 / sqrt(x) differs
    by an ulp for head_dim 24, 96 and 128 (the Qwen3, Llama, OLMo, Phi and NeoX goldens)."""
    if "attention_multiplier" in geometry and "query_pre_attn_scalar" in geometry:
        raise BadInput(f"{path}: both attention_multiplier and query_pre_attn_scalar set the score scale")
    if is_latent(geometry):  # SCHEMA.md "Schema version 3": qk_head_dim^-0.5, times yarn's mscale(factor, mscale_all_dim)^2
        source, value = "latent_qk_head_dim", latent_scale(geometry)
    elif "attention_multiplier" in geometry:
        source, value = "attention_multiplier", float(geometry["attention_multiplier"])
    elif "query_pre_attn_scalar" in geometry:
        source, value = "query_pre_attn_scalar", math.pow(float(geometry["query_pre_attn_scalar"]), -0.5)
    else:
        source, value = "head_dim", math.pow(float(resolved_head_dim(geometry)), -0.5)
    if "scale_source" in geometry and geometry["scale_source"] != source:
        raise BadInput(f"{path}: /geometry@scale_source is '{geometry['scale_source']}'; its attributes make it "
                       f"'{source}'")
    if float(geometry["scale"]) != value:
        raise BadInput(f"{path}: /geometry@scale is {geometry['scale']!r}; {source} makes it {value!r}")
    return value


def _latent_qkv(case, weights):
    """Latent attention (SCHEMA.md "Schema version 3"): q, k [B, T, H, Q] and v [B, T, H, V] of every token before
    RoPE, and the normed latent c_kv [B, T, kv_lora_rank] with the unrotated k_pe [B, T, 1, qk_rope_head_dim] (the
    absorbed decode reads those). Head h's key is [its k_nope rows of kv_b_proj(c_kv), k_pe]: one k_pe for all."""
    g = case.geometry
    batch, seq = case.x.shape[:2]
    heads, nope, rope, v_dim = case.num_heads, g["qk_nope_head_dim"], g["qk_rope_head_dim"], g["v_head_dim"]
    eps, lora = g["latent_norm_eps"], g["kv_lora_rank"]
    if g["q_lora_rank"]:
        latent_q = _rms_norm(_project(case.x, weights["q_a_proj"], None), weights["q_a_layernorm"], "rms", eps)
        q = _project(latent_q, weights["q_b_proj"], None)
    else:
        q = _project(case.x, weights["q_proj"], None)
    kv_a = _project(case.x, weights["kv_a_proj_with_mqa"], None)
    c_kv = _rms_norm(kv_a[..., :lora], weights["kv_a_layernorm"], "rms", eps)
    k_pe = kv_a[..., lora:].reshape(batch, seq, 1, rope)
    kv = _project(c_kv, weights["kv_b_proj"], None).reshape(batch, seq, heads, nope + v_dim)
    k = np.concatenate([kv[..., :nope], np.broadcast_to(k_pe, (batch, seq, heads, rope))], axis=-1)
    return q.reshape(batch, seq, heads, nope + rope), k, kv[..., nope:], c_kv, k_pe


def _normalised_qkv(case, weights):
    """q [B, T, H_q, d], k, v [B, T, H_kv, d] of every token: the projections (+ biases) and QK-norm (always
    before RoPE); RoPE is per forward call (rotate())."""
    g = case.geometry
    if is_latent(g):
        return _latent_qkv(case, weights)[:3]
    heads, kv_heads, head_dim = case.num_heads, case.num_kv_heads, case.head_dim
    batch, seq = case.x.shape[:2]
    q = _project(case.x, weights["q_proj"], weights.get("q_bias"))
    k = _project(case.x, weights["k_proj"], weights.get("k_bias"))
    v = _project(case.x, weights["v_proj"], weights.get("v_bias"))
    kind = g["qk_norm"]
    if kind == "rms-full-width":  # one norm over all of a token's q (k) channels, a weight per channel
        q = _rms_norm(q, weights["q_norm"], kind, g["qk_norm_eps"])
        k = _rms_norm(k, weights["k_norm"], kind, g["qk_norm_eps"])
    q = q.reshape(batch, seq, heads, head_dim)
    k = k.reshape(batch, seq, kv_heads, head_dim)
    v = v.reshape(batch, seq, kv_heads, head_dim)
    if kind in ("rms", "rms-one-plus"):  # per head over head_dim
        q = _rms_norm(q, weights["q_norm"], kind, g["qk_norm_eps"])
        k = _rms_norm(k, weights["k_norm"], kind, g["qk_norm_eps"])
    elif kind not in ("none", "rms-full-width"):
        raise BadInput(f"{case.path}: qk_norm '{kind}' is not one SCHEMA.md defines")
    return q, k, v


def rotate(case, values, positions, first_channel=None):
    """RoPE of one forward call: values [B, T, heads, head_dim] of the call's tokens at `positions` [B, T].
    The call's frequencies come from its largest position (longrope); angle = position * inv_freq in float64;
    cos and sin are multiplied by the attention factor, then pair (a, b) -> (a cos - b sin, b cos + a sin);
    pairs (i, i + rotary_dim/2) half-split, (2i, 2i+1) interleaved; channels past rotary_dim unchanged. The rotated
    channels start at first_channel of each head: 0, or latent attention's qk_nope_head_dim (its RoPE part last)."""
    g = case.geometry
    rotary_dim = g["rotary_dim"]
    if rotary_dim == 0:  # NoPE
        return values
    if first_channel is None:
        first_channel = g["qk_nope_head_dim"] if is_latent(g) else 0
    if first_channel:
        result = values.copy()
        result[..., first_channel:first_channel + rotary_dim] = rotate(
            case, values[..., first_channel:first_channel + rotary_dim], positions, 0)
        return result
    angles = case.rope_angles(positions)  # [B, T, P], frequencies of this call
    factor = rope_attention_factor(g)
    cos = (np.cos(angles) * factor)[:, :, None, :]
    sin = (np.sin(angles) * factor)[:, :, None, :]
    pairs = rotary_dim // 2
    result = values.copy()
    if g["rope_style"] == "half-split":
        a, b = values[..., :pairs], values[..., pairs:rotary_dim]
        result[..., :pairs] = a * cos - b * sin
        result[..., pairs:rotary_dim] = b * cos + a * sin
    elif g["rope_style"] == "interleaved":
        a, b = values[..., 0:rotary_dim:2], values[..., 1:rotary_dim:2]
        result[..., 0:rotary_dim:2] = a * cos - b * sin
        result[..., 1:rotary_dim:2] = b * cos + a * sin
    else:
        raise BadInput(f"{case.path}: rope_style '{g['rope_style']}' is not one SCHEMA.md defines")
    return result


def attend(case, q, k, v, visible, sinks):
    """Context [B, Tq, H_q * d] of queries q [B, Tq, H_q, d] over keys k, v [B, Tk, H_kv, d], visible [B, Tq, Tk].
    Query head h reads KV head h / (H_q / H_kv). scores = scale * q.k, capped (softcap * tanh(s / softcap));
    softmax over the visible keys, a sink logit (unscaled, uncapped) joining the denominator; a query that
    sees no key has context 0."""
    g = case.geometry
    batch, queries, heads = q.shape[:3]
    head_dim = v.shape[3]  # a value head's width (latent attention's differs from q's and k's)
    group = heads // k.shape[2]
    scale = score_scale(g, case.path)
    softcap = g.get("softcap")
    sees_some = visible.any(axis=2)  # [B, Tq]
    context = np.zeros((batch, queries, heads, head_dim))
    q_heads = np.ascontiguousarray(q.transpose(2, 0, 1, 3))  # [H_q, B, Tq, d]
    k_heads = np.ascontiguousarray(k.transpose(2, 0, 3, 1))  # [H_kv, B, d, Tk]
    v_heads = np.ascontiguousarray(v.transpose(2, 0, 1, 3))  # [H_kv, B, Tk, d]
    for head in range(heads):
        kv_head = head // group
        scores = scale * (q_heads[head] @ k_heads[kv_head])
        if softcap is not None:
            scores = softcap * np.tanh(scores / softcap)
        scores = np.where(visible, scores, -np.inf)
        top = scores.max(axis=2, keepdims=True)  # -inf for a query that sees no key
        if sinks is not None:
            top = np.maximum(top, sinks[head])
        top = np.where(np.isfinite(top), top, 0.0)
        weights = np.where(visible, np.exp(scores - top), 0.0)
        denominator = weights.sum(axis=2, keepdims=True)
        if sinks is not None:
            denominator = denominator + np.exp(sinks[head] - top)
        denominator = np.where(denominator > 0.0, denominator, 1.0)
        probabilities = weights / denominator
        context[:, :, head, :] = probabilities @ v_heads[kv_head]
    context[~sees_some] = 0.0  # SCHEMA.md: context 0 in every head, with or without sinks
    return context.reshape(batch, queries, heads * head_dim)


def _output(context, weights):
    return _project(context, weights["o_proj"], weights.get("o_bias"))


def forward(case, qkv=None):
    """`out` [B, seq, hidden]: the whole sequence as one forward call (its largest position chooses longrope's
    factors); masks by sequence index (causal, window from below, key padding)."""
    weights = case.weights
    q, k, v = _normalised_qkv(case, weights) if qkv is None else qkv
    positions = case.position_ids
    q, k = rotate(case, q, positions), rotate(case, k, positions)
    context = attend(case, q, k, v, case.visible_keys(), weights.get("sinks"))
    return _output(context, weights)


def decode_forward(case, qkv=None):
    """`decode/out` [B, prefill + sum(steps), hidden]: the KV-cache decode. Each call (prefill, then every step)
    rotates its own tokens with the frequencies of that call (its largest position over the batch), appends its
    keys and values to the cache (cached keys keep their call's rotation) and attends to the whole cache, its
    queries being the cache's last rows (causal bottom-right aligned, window and key padding by sequence index)."""
    if not case.decode_schedule:
        raise ValueError(f"{case.path}: no decode schedule")
    if not case.geometry["causal"]:
        raise BadInput(f"{case.path}: a decode schedule on a non-causal layer (SCHEMA.md: invalid)")
    weights = case.weights
    q_all, k_all, v_all = _normalised_qkv(case, weights) if qkv is None else qkv
    sinks = weights.get("sinks")
    cached_k, cached_v, outputs = [], [], []
    start = 0
    for count in case.decode_schedule:
        stop = start + count
        positions = case.position_ids[:, start:stop]
        cached_k.append(rotate(case, k_all[:, start:stop], positions))
        cached_v.append(v_all[:, start:stop])
        q = rotate(case, q_all[:, start:stop], positions)
        keys, values = np.concatenate(cached_k, axis=1), np.concatenate(cached_v, axis=1)
        visible = case.visible_keys(queries=count, keys=stop)
        outputs.append(_output(attend(case, q, keys, values, visible, sinks), weights))
        start = stop
    return np.concatenate(outputs, axis=1)


def absorbed_decode_forward(case):
    """Latent attention's `decode/out` in the absorbed form (SCHEMA.md "Schema version 3": the golden's one answer
    holds for both forms): the cache holds the normed latent c_kv and RoPE(k_pe) once for all heads; head h's query
    is [q_nope_h W_UK_h, RoPE(q_pe_h)] (W_UK_h: kv_b_proj's k rows of head h), its context c W_UV_h^T."""
    g = case.geometry
    weights = case.weights
    heads, nope, v_dim, lora = case.num_heads, g["qk_nope_head_dim"], g["v_head_dim"], g["kv_lora_rank"]
    q_all, _, _, c_kv, k_pe = _latent_qkv(case, weights)
    kv_b = weights["kv_b_proj"].reshape(heads, nope + v_dim, lora)
    w_uk, w_uv = kv_b[:, :nope, :], kv_b[:, nope:, :]
    cached, outputs, start = [], [], 0
    for count in case.decode_schedule:
        stop = start + count
        positions = case.position_ids[:, start:stop]
        cached.append(np.concatenate([c_kv[:, start:stop, None, :], rotate(case, k_pe[:, start:stop], positions, 0)],
                                     axis=-1))
        q = rotate(case, q_all[:, start:stop], positions)
        q_absorbed = np.concatenate([np.einsum("bthn,hnl->bthl", q[..., :nope], w_uk), q[..., nope:]], axis=-1)
        keys = np.concatenate(cached, axis=1)  # [B, keys, 1, lora + rope]
        latent_context = attend(case, q_absorbed, keys, keys[..., :lora], case.visible_keys(queries=count, keys=stop),
                                weights.get("sinks"))
        context = np.einsum("bthl,hvl->bthv", latent_context.reshape(q.shape[0], count, heads, lora), w_uv)
        outputs.append(_output(context.reshape(q.shape[0], count, heads * v_dim), weights))
        start = stop
    return np.concatenate(outputs, axis=1)


# ---------------------------------------------------------------------------------------------------------
# Sketches and the tolerance model.

_SIGNS = {}


def sketch_signs(length):
    """[length, 3] of +-1: one stream (seed 0, "attncheck-sketch-v1", draw 0); entry (j, p) = -1 when the
    next output's top bit is 1."""
    if length not in _SIGNS:
        stream = Stream(0, "attncheck-sketch-v1")
        _SIGNS[length] = np.array([[-1.0 if stream.next() >> 63 else 1.0 for _ in range(3)] for _ in range(length)])
    return _SIGNS[length]


def sketch_activations(values):
    """attncheck-sketch-v1 of an activation [B, T, hidden]: one line per token along hidden, [B, T, 4] =
    (2-norm, dot products with the 3 sign vectors)."""
    signs = sketch_signs(values.shape[-1])
    norms = np.sqrt(np.sum(values * values, axis=-1, keepdims=True))
    return np.concatenate([norms, values @ signs], axis=-1)


def compare(name, actual, expected):
    """{name, worst_ulps, tolerance_ulps, passed, ...}: |actual - expected| in ulps of the expected tensor's
    scale (its largest |value|; 1 ulp = 2^-52 of it)."""
    result = {"name": name, "tolerance_ulps": FP64_TOLERANCE_ULPS}
    if actual.shape != expected.shape:
        result.update(passed=False, worst_ulps=math.inf, detail=f"shape {list(actual.shape)}, "
                                                               f"expected {list(expected.shape)}")
        return result
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    ulp = FP64_EPSILON * max(scale, sys.float_info.min)
    error = np.abs(actual - expected)
    if not np.isfinite(actual).all():
        worst = math.inf
    else:
        worst = float(error.max()) / ulp if error.size else 0.0
    where = np.unravel_index(int(np.nanargmax(np.where(np.isfinite(error), error, np.inf))), error.shape) \
        if error.size else ()
    result.update(passed=worst <= FP64_TOLERANCE_ULPS, worst_ulps=worst, scale=scale,
                  worst_at=[int(i) for i in where])
    return result


# ---------------------------------------------------------------------------------------------------------
# One golden.

def check_integrity(path):
    """(ok, detail): the file's `integrity` attribute against attncheck.integrity's digest of the file."""
    import h5py

    from .integrity import ATTRIBUTE, integrity_digest

    with h5py.File(path, "r") as h5:
        if ATTRIBUTE not in h5.attrs:
            return False, "no integrity attribute (every committed golden carries one)"
        stored = h5.attrs[ATTRIBUTE]
        stored = stored.decode() if isinstance(stored, bytes) else str(stored)
        computed = integrity_digest(h5, path)
    if stored != computed:
        return False, f"stored {stored}, computed {computed}"
    return True, computed


def _expected_outputs(path):
    """{tensor name as compared: expected array} for out and decode/out, full or sketched."""
    import h5py

    names = {}
    with h5py.File(path, "r") as h5:
        expected = h5["expected"]
        for name in ("out", "decode/out"):
            if name in expected:
                names[name] = expected[name][()]
            if f"sketches/{name}" in expected:
                names[f"sketches/{name}"] = expected[f"sketches/{name}"][()]
    return names


def check_golden(path, skip_integrity=False):
    """Recompute one golden's out (and decode/out) and integrity digest. Returns {path, integrity, tensors:
    [compare() results], passed, seconds, error}."""
    began = time.monotonic()
    report = {"path": path, "tensors": [], "error": None, "integrity": None}
    try:
        if not skip_integrity:
            ok, detail = check_integrity(path)
            report["integrity"] = (ok, detail)
            if not ok:  # read_case would refuse the file too
                report["passed"] = False
                return report
        expected = _expected_outputs(path)
        case = read_case(path)
        if not any(name.endswith("out") and "decode" not in name for name in expected):
            raise BadInput(f"{path}: /expected holds neither out nor sketches/out")
        qkv = _normalised_qkv(case, case.weights)
        latent = is_latent(case.geometry)
        for name in ("q_proj", "k_proj", "v_proj"):  # the big ones, no longer needed (a latent layer's are kept)
            if not latent:
                case.weights.pop(name)
        computed = {"out": forward(case, qkv)}
        if case.decode_schedule:
            computed["decode/out"] = decode_forward(case, qkv)
            if latent:
                computed["decode/out#absorbed"] = absorbed_decode_forward(case)
        elif "decode/out" in expected or "sketches/decode/out" in expected:
            raise BadInput(f"{path}: /expected holds decode/out but /inputs has no decode_schedule")
        del qkv
        case.weights = None
        if "decode/out#absorbed" in computed and "decode/out" in expected:
            report["tensors"].append(compare("decode/out#absorbed", computed["decode/out#absorbed"],
                                             expected["decode/out"]))
        for name in ("out", "decode/out"):
            if name not in computed:
                continue
            if name in expected:
                report["tensors"].append(compare(name, computed[name], expected[name]))
            if f"sketches/{name}" in expected:
                report["tensors"].append(compare(f"{name}#sketch", sketch_activations(computed[name]),
                                                 expected[f"sketches/{name}"]))
            if name not in expected and f"sketches/{name}" not in expected:
                report["tensors"].append({"name": name, "passed": False, "worst_ulps": math.inf,
                                          "tolerance_ulps": FP64_TOLERANCE_ULPS,
                                          "detail": "computed, but the golden stores neither it nor its sketch"})
    except BadInput as error:
        report["error"] = str(error)
    except Exception as error:  # noqa: BLE001  (an unreadable file fails its line, the others still run)
        report["error"] = f"{type(error).__name__}: {error}"
    finally:
        report["seconds"] = time.monotonic() - began
    report["passed"] = report["error"] is None and bool(report["tensors"]) and \
        all(t["passed"] for t in report["tensors"]) and (skip_integrity or report["integrity"][0])
    return report


def format_report(report):
    name = os.path.basename(report["path"])
    parts = []
    for tensor in report["tensors"]:
        text = f"{tensor['name']} {tensor['worst_ulps']:.1f} ulps"
        if not tensor["passed"]:
            text += f" MISMATCH (> {tensor['tolerance_ulps']:.0f}" + \
                (f", worst at {tensor['worst_at']}" if "worst_at" in tensor else "") + \
                (f"; {tensor['detail']}" if "detail" in tensor else "") + ")"
        parts.append(text)
    if report["integrity"] is not None:
        parts.append("integrity ok" if report["integrity"][0] else f"integrity MISMATCH: {report['integrity'][1]}")
    if report["error"]:
        parts.append(f"ERROR: {report['error']}")
    verdict = "pass" if report["passed"] else "FAIL"
    return f"{verdict} {name} ({report['seconds']:.1f} s): " + ", ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("goldens", nargs="+", help="golden files (golden/data/*.h5)")
    args = parser.parse_args(argv)
    failures = 0
    for path in args.goldens:
        report = check_golden(path)
        print(format_report(report), flush=True)
        failures += not report["passed"]
    print(f"{len(args.goldens) - failures} of {len(args.goldens)} goldens conform "
          f"(out, decode/out within {FP64_TOLERANCE_ULPS:.0f} ulps of their scale; integrity digests)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
