"""Runs the standard ONNX Attention operator (opset 23, a one-node graph built with onnx.helper) on ONNX
Runtime's CPU execution provider in float64, float32 or float16, as the operator of attncheck's float64
layer (attncheck.adapters.operator_layer), and writes candidate files (golden/SCHEMA.md).

    python -m attncheck.adapters.onnx_attention GOLDEN.h5 -o CANDIDATE.h5 [--dtype fp64|fp32|fp16]
    python -m attncheck.adapters.onnx_attention GOLDEN.h5 ... --output-dir DIR
    python -m attncheck.adapters.onnx_attention --worker --dtype fp16 [--plant-bug NAME]

The call is an exporter's: Q [batch, num_heads, seq_q, head_dim], K and V with num_kv_heads (GQA by the
operator), the attributes scale and softcap (ONNX applies the softcap to the scaled scores, SCHEMA's order).
Decode calls use the operator's own KV cache: past_key / past_value are the keys before the call, K and V
the call's own, present_key / present_value come back (ORT refuses a past without a present). Masks:
is_causal=1 when it gives exactly SCHEMA's mask (with a past, ONNX offsets the diagonal by the past's
length: bottom-right aligned, as SCHEMA), none when every key is visible, else the boolean attn_mask
[batch, 1, seq_q, past + seq_q] (true: attend). A query that sees no key gets 0 (ONNX's convention and
SCHEMA's). Attention sinks: opset 23 has none (refused by name). bfloat16: ORT's CPU kernel is not
implemented for it, so --dtype offers fp64, fp32, fp16 only.

ONNX float attributes are 32-bit: the scale is rounded to float32 by the format. At fp64 a case whose
scale is not exactly a float32 would be judged on a rounded scale, so it is refused by name (the scales
of head widths that are powers of 4 are exact; 80, 96 or query_pre_attn_scalar's often are not).

Exit codes: 0 candidates written, 2 bad input or a case the operator cannot express.
"""
import sys

import numpy as np

from attncheck.adapters import operator_layer

MODULE = "attncheck.adapters.onnx_attention"
PROG = f"python -m {MODULE}"
OPSET = 23
PLANTED_BUGS = {"causal-without-past": "decode calls pass the whole cache as K and V with is_causal=1 and no past "
                                       "(the diagonal then aligned top-left)"}
NUMPY_DTYPES = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16}


def scale_is_float32(scale):
    return float(np.float32(scale)) == float(scale)


class OnnxAttention(operator_layer.Operator):
    precisions = tuple(NUMPY_DTYPES)
    without = ("sinks",)

    def __init__(self, precision, plant_bug=None):
        import onnx
        import onnxruntime

        self.onnx, self.ort, self.precision, self.plant_bug = onnx, onnxruntime, precision, plant_bug
        self.sessions = {}  # static form -> InferenceSession (every dimension dynamic)

    def unsupported_reasons(self, case):
        reasons = []
        if case.geometry.get("attention_sinks", 0):
            reasons.append(f"attention sinks (the ONNX Attention operator of opset {OPSET} has no sink logit)")
        if self.precision == "fp64" and not scale_is_float32(case.geometry["scale"]):
            reasons.append(f"scale {case.geometry['scale']!r} at fp64 (ONNX float attributes are 32-bit: the "
                           "operator would compute with the scale rounded to float32)")
        return reasons

    def capabilities(self, precision):
        # fp64 states nothing: whether a scale is exactly a float32 is no feature a statement can name, so its
        # worker is offered every case and refuses those by name.
        return None if precision == "fp64" else super().capabilities(precision)

    def session(self, form):
        """form: (has past, has mask, is_causal, scale, softcap or None)."""
        if form not in self.sessions:
            helper, TensorProto = self.onnx.helper, self.onnx.TensorProto
            element = helper.np_dtype_to_tensor_dtype(np.dtype(NUMPY_DTYPES[self.precision]))
            has_past, has_mask, is_causal, scale, softcap = form
            names = ["Q", "K", "V", "mask" if has_mask else ""] + (["past_key", "past_value"] if has_past else [])
            inputs = [helper.make_tensor_value_info(name, TensorProto.BOOL if name == "mask" else element, None)
                      for name in names if name]
            outputs = ["Y"] + (["present_key", "present_value"] if has_past else [])
            attributes = dict(is_causal=int(is_causal), scale=scale)
            if softcap is not None:
                attributes["softcap"] = softcap
            node = helper.make_node("Attention", names, outputs, **attributes)
            graph = helper.make_graph([node], "attention", inputs,
                                      [helper.make_tensor_value_info(name, element, None) for name in outputs])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
            options = self.ort.SessionOptions()
            options.intra_op_num_threads = 1  # deterministic sums, whatever the machine
            self.sessions[form] = self.ort.InferenceSession(model.SerializeToString(), options,
                                                            providers=["CPUExecutionProvider"])
        return self.sessions[form]

    def forward(self, call):
        dtype, past = NUMPY_DTYPES[self.precision], call.first_query
        if self.plant_bug == "causal-without-past":
            past = 0
        feeds = {"Q": call.query.astype(dtype), "K": call.key[:, :, past:].astype(dtype),
                 "V": call.value[:, :, past:].astype(dtype)}
        if past:
            feeds.update(past_key=call.key[:, :, :past].astype(dtype), past_value=call.value[:, :, :past].astype(dtype))
        causal = bool(np.array_equal(call.visible, np.broadcast_to(call.bottom_right_causal(), call.visible.shape)))
        if self.plant_bug == "causal-without-past" and call.first_query and call.geometry["causal"]:
            causal = True  # the bug: is_causal over the whole cache, aligned top-left
        has_mask = not causal and not call.visible.all()
        if has_mask:
            feeds["mask"] = call.visible[:, None]
        softcap = call.geometry.get("softcap")
        softcap = None if softcap is None else float(softcap)
        form = (bool(past), has_mask, causal, float(call.geometry["scale"]), softcap)
        return self.session(form).run(["Y"], feeds)[0]

    def description(self):
        bug = f" (planted bug: {self.plant_bug})" if self.plant_bug else ""
        return (f"onnxruntime {self.ort.__version__} ONNX Attention (opset {OPSET}, CPU, "
                f"{np.dtype(NUMPY_DTYPES[self.precision]).name}) via {MODULE}{bug}")


def main():
    parser = operator_layer.argument_parser(PROG, __doc__.split("\n\n")[0], OnnxAttention.precisions,
                                            PLANTED_BUGS)
    arguments = parser.parse_args()
    return operator_layer.main(parser, arguments, lambda: OnnxAttention(arguments.dtype, arguments.plant_bug), MODULE)


if __name__ == "__main__":
    sys.exit(main())
