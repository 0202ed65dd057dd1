"""Runs OpenVINO's ScaledDotProductAttention operator (opset13, the only version through opset16) on the CPU
plugin, at float32 or with the bfloat16 inference precision hint, as the operator of attncheck's float64
layer (attncheck.adapters.operator_layer), and writes candidate files (golden/SCHEMA.md).

    python -m attncheck.adapters.openvino_attention GOLDEN.h5 -o CANDIDATE.h5 [--dtype fp32|bf16]
    python -m attncheck.adapters.openvino_attention GOLDEN.h5 ... --output-dir DIR
    python -m attncheck.adapters.openvino_attention --worker --dtype bf16 [--plant-bug NAME]

The call is an OpenVINO user's: one ov.Model per static form (native causal, boolean mask, no mask) and
rank, its shapes dynamic (every dim -1), compiled once per precision and serving every shape (measured: one
compile ~50 ms, calls as fast as a static model's, which would compile 25-85 ms per shape, each decode step
one); the case's scale as the operator's scale input. fp32 sets INFERENCE_PRECISION_HINT f32 explicitly (the
CPU plugin defaults to bf16 on a CPU with bf16 instructions: fp32 then fails by 10^4 ulps); bf16 sets it to
bf16 (inputs stay f32 tensors, the output comes back f32). GQA: opset13 has none (numpy broadcasting, so q
[B, H, L, E] with k [B, K, S, E] fails shape inference): q goes in as [B, K, G, L, E], k and v as
[B, K, 1, S, E], broadcast over G = H / K (query head k·G + g uses KV head k); the CPU plugin decomposes that
rank-5 call into MatMul, Softmax, MatMul. Without GQA the call is rank 4, its fused attention subgraph.
Masks: causal=True where it gives exactly SCHEMA's mask (OpenVINO aligns it top-left, triu(−inf, 1) of
[L, S]: calls with as many queries as keys, causal, no window or padding); else the boolean mask
[B, 1, (1,) L, S] (True = attend: the operator turns False into −inf).

Refused by name: softcap and attention sinks (the operator has neither); a query that sees no key (the
operator's softmax over all −inf gives NaN, where SCHEMA's convention is 0: peers/repro/
openvino_sdpa_keyless_row_nan.py). No backward: OpenVINO is inference only, so gradients are declined.
Telemetry: `import openvino` sends a usage event by default (no consent file counts as consent), from a
process it forks in a thread; in a process holding h5py's lock the child prints h5py's after-fork error. The
adapter imports openvino with openvino_telemetry blocked, which selects OpenVINO's own telemetry stub.

Exit codes: 0 candidates written, 2 bad input or a case the operator cannot express.
"""
import sys

import numpy as np

from attncheck.adapters import operator_layer

MODULE = "attncheck.adapters.openvino_attention"
PROG = f"python -m {MODULE}"
PLANTED_BUGS = {"top-left-causal": "causal=True for every call whose mask is the causal mask alone, decode steps "
                                   "too, where OpenVINO's top-left alignment differs from SCHEMA's bottom-right"}
HINTS = {"fp32": "f32", "bf16": "bf16"}


def native_causal(call, plant_bug=None):
    """Whether causal=True (top-left, [L, S]) gives exactly call.visible."""
    implied = call.bottom_right_causal() if plant_bug == "top-left-causal" else np.tri(call.seq_q, call.seq_k,
                                                                                      dtype=bool)
    return bool(call.geometry["causal"]) and bool((call.visible == implied[None]).all())


class OpenVinoAttention(operator_layer.Operator):
    has_backward = False
    precisions = tuple(HINTS)
    without = ("softcap", "sinks", "keyless-rows")

    def __init__(self, precision, plant_bug=None):
        sys.modules.setdefault("openvino_telemetry", None)  # OpenVINO's own stub instead: see the docstring
        import openvino

        self.ov, self.precision, self.plant_bug = openvino, precision, plant_bug
        self.version = openvino.__version__.split("-")[0]
        self.core = openvino.Core()
        self.compiled = {}  # (form, rank) -> compiled model (dynamic shapes: one serves every shape)

    def unsupported_reasons(self, case):
        reasons = []
        if "softcap" in case.geometry:
            reasons.append("softcap (OpenVINO's ScaledDotProductAttention has no logit softcap)")
        if case.geometry.get("attention_sinks", 0):
            reasons.append("attention sinks (OpenVINO's ScaledDotProductAttention has no sink logit)")
        seq = case.x.shape[1]
        if not case.visible_keys(queries=seq, keys=seq).any(axis=-1).all():
            reasons.append("a query that sees no key (OpenVINO's ScaledDotProductAttention gives it NaN, SCHEMA's "
                           "convention is 0)")
        return reasons

    def declined_parts(self, case):
        return {"grads": f"OpenVINO {self.version} is inference only: ScaledDotProductAttention has no "
                         "backward"}

    def model(self, form, rank):
        """The compiled model of a static form ("causal", "mask" or "none") and rank (4 or 5)."""
        if (form, rank) not in self.compiled:
            import openvino.opset13 as ops

            ov, dynamic = self.ov, self.ov.PartialShape([-1] * rank)
            q, k, v = (ops.parameter(dynamic, ov.Type.f32, name=name) for name in "qkv")
            scale = ops.parameter(ov.PartialShape([]), ov.Type.f32, name="scale")
            mask = ops.parameter(dynamic, ov.Type.boolean, name="mask") if form == "mask" else None
            if form == "mask":
                node = ops.scaled_dot_product_attention(q, k, v, mask, scale)
            else:
                zero = ops.constant(np.float32(0))  # "no mask": the spec's scalar zero
                node = ops.scaled_dot_product_attention(q, k, v, zero, scale, causal=form == "causal")
            inputs = [q, k, v, scale] + ([mask] if mask is not None else [])
            self.compiled[form, rank] = self.core.compile_model(ov.Model([node], inputs), "CPU",
                                                                {"INFERENCE_PRECISION_HINT": HINTS[self.precision]})
        return self.compiled[form, rank]

    def forward(self, call):
        batch, heads, seq_q, head_dim = call.query.shape
        kv_heads = call.key.shape[1]
        query, key, value = call.query, call.key, call.value
        if kv_heads != heads:  # GQA: [B, K, G, L, E] against [B, K, 1, S, E]
            query = query.reshape(batch, kv_heads, heads // kv_heads, seq_q, head_dim)
            key, value = key[:, :, None], value[:, :, None]
        inputs = [np.ascontiguousarray(array, dtype=np.float32) for array in (query, key, value)]
        inputs.append(np.float32(call.geometry["scale"]))
        if native_causal(call, self.plant_bug):
            form = "causal"
        elif call.visible.all():
            form = "none"
        else:
            form = "mask"
            inputs.append(np.ascontiguousarray(call.visible.reshape(batch, *[1] * (query.ndim - 3), seq_q, -1)))
        compiled = self.model(form, query.ndim)
        context = compiled(inputs)[0]
        if compiled.output(0).get_element_type() == self.ov.Type.bf16:  # numpy gets bf16 bits as float16;
            import ml_dtypes  # with f32 inputs the output stays f32 (measured), so this is a guard

            context = np.asarray(context).view(ml_dtypes.bfloat16)
        return np.asarray(context).astype(np.float32).reshape(batch, heads, seq_q, head_dim)

    def description(self):
        bug = f" (planted bug: {self.plant_bug})" if self.plant_bug else ""
        return (f"openvino {self.ov.__version__} opset13 ScaledDotProductAttention (CPU plugin, "
                f"INFERENCE_PRECISION_HINT {HINTS[self.precision]}, dynamic shapes) via {MODULE}{bug}")


def main():
    parser = operator_layer.argument_parser(PROG, __doc__.split("\n\n")[0], OpenVinoAttention.precisions,
                                            PLANTED_BUGS)
    arguments = parser.parse_args()
    return operator_layer.main(parser, arguments,
                               lambda: OpenVinoAttention(arguments.dtype, arguments.plant_bug), MODULE)


if __name__ == "__main__":
    sys.exit(main())
