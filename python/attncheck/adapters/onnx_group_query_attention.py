"""Runs ONNX Runtime's contrib operator com.microsoft.GroupQueryAttention (a one-node graph built with
onnx.helper) on ORT's CPU execution provider in float32 or float16, as the operator of attncheck's float64
layer (attncheck.adapters.operator_layer), and writes candidate files (golden/SCHEMA.md).

    python -m attncheck.adapters.onnx_group_query_attention GOLDEN.h5 -o CANDIDATE.h5 [--dtype fp32|fp16]
    python -m attncheck.adapters.onnx_group_query_attention GOLDEN.h5 ... --output-dir DIR
    python -m attncheck.adapters.onnx_group_query_attention --worker --dtype fp16 [--plant-bug NAME]

The call is a generative model's: query [batch, seq, num_heads·head_dim], key and value the call's own new
tokens, past_key / past_value the cache before it (BNSH), seqlens_k = keys after the call − 1 (every row),
total_sequence_length = keys after the call; GQA by the operator (num_heads, kv_num_heads), the attributes
scale, softcap (on the scaled scores, SCHEMA's order), causal (1: aligned at the cache's end, SCHEMA's
bottom-right; 0: bidirectional), local_window_size = SCHEMA's window W (query i sees key j when
i − W < j ≤ i; checked on the goldens), head_sink = SCHEMA's sink logits. RoPE is the float64 layer's (the
operator's do_rotary and cos/sin caches unused). A decode call of several tokens at batch > 1 passes
query_seqlens (ORT refuses it without). What the attributes cannot say is an attention_bias [batch, 1,
seq_q, keys] of −inf on exactly the keys SCHEMA hides beyond them: key padding (decode calls included, where
SCHEMA hides padded keys and seqlens_k cannot) and a window without causal (ORT wants local_window_size −1
when causal is 0). Per-row seqlens_k is not used for padding: ORT leaves rows past seqlens_k + 1
unspecified, and with head_sink and a window they measured unlike SCHEMA's. A query that sees no key (every
key −inf): ORT gives NaN in float16 and in float32 with a softcap, but 0 (SCHEMA's convention) in float32
without one or with head_sink (an ORT defect, peers/repro/ort_gqa_masked_row_nan.py): refused by name.

Precisions: the CPU provider registers the kernel for float and float16 only (bf16, fp64: not offered by
--dtype). ONNX float attributes are 32-bit: scale and softcap are rounded to float32 (below either
precision). head_dim: the CPU kernel needs a multiple of 8 (others refused by name). No backward: gradients
declined. Sessions are cached per static form, every dimension dynamic, one intra-op thread.

Exit codes: 0 candidates written, 2 bad input or a case the operator cannot express.
"""
import sys

import numpy as np

from attncheck.adapters import operator_layer

MODULE = "attncheck.adapters.onnx_group_query_attention"
PROG = f"python -m {MODULE}"
PLANTED_BUGS = {"window-off-by-one": "local_window_size = window + 1: one key more than the window on the left"}
NUMPY_DTYPES = {"fp32": np.float32, "fp16": np.float16}
INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
          "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
          "k_norm_weight", "query_seqlens")  # the operator's inputs in order (ORT 1.32's schema)


class OnnxGroupQueryAttention(operator_layer.Operator):
    precisions = tuple(NUMPY_DTYPES)
    head_dim_multiple_of = 8
    without = ("keyless-rows",)

    def __init__(self, precision, plant_bug=None):
        import onnx
        import onnxruntime

        self.onnx, self.ort, self.precision, self.plant_bug = onnx, onnxruntime, precision, plant_bug
        self.sessions = {}  # static form -> InferenceSession

    def unsupported_reasons(self, case):
        reasons = []
        if case.head_dim % 8:
            reasons.append(f"head_dim {case.head_dim} (GroupQueryAttention's CPU kernel needs a multiple of 8)")
        if case.queries_seeing_no_key():
            reasons.append("a query that sees no key (ORT's kernel returns NaN for it in float16, and in float32 "
                           "with a softcap; SCHEMA's convention is 0)")
        return reasons

    def declined_parts(self, case):
        return {"grads": f"ONNX Runtime {self.ort.__version__}'s GroupQueryAttention (com.microsoft) has no "
                         "gradient: it is a forward-only contrib operator"}

    def session(self, form):
        """form: (heads, kv_heads, causal, local_window_size, scale, softcap, optional inputs present)."""
        if form not in self.sessions:
            helper, TensorProto = self.onnx.helper, self.onnx.TensorProto
            element = helper.np_dtype_to_tensor_dtype(np.dtype(NUMPY_DTYPES[self.precision]))
            heads, kv_heads, causal, window, scale, softcap, optional = form
            names = [name if name in INPUTS[:7] or name in optional else "" for name in INPUTS]
            while not names[-1]:
                names.pop()
            integer = ("seqlens_k", "total_sequence_length", "query_seqlens")
            inputs = [helper.make_tensor_value_info(name, TensorProto.INT32 if name in integer else element,
                                                    [] if name == "total_sequence_length" else None)
                      for name in names if name]
            attributes = dict(num_heads=heads, kv_num_heads=kv_heads, causal=int(causal), scale=scale)
            attributes.update({name: value for name, value in (("local_window_size", window), ("softcap", softcap))
                               if value is not None})
            outputs = ["output", "present_key", "present_value"]
            node = helper.make_node("GroupQueryAttention", names, outputs, domain="com.microsoft", **attributes)
            graph = helper.make_graph([node], "group_query_attention", inputs,
                                      [helper.make_tensor_value_info(name, element, None) for name in outputs])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                            helper.make_opsetid("com.microsoft", 1)])
            options = self.ort.SessionOptions()
            options.intra_op_num_threads = 1  # deterministic sums, whatever the machine
            self.sessions[form] = self.ort.InferenceSession(model.SerializeToString(), options,
                                                            providers=["CPUExecutionProvider"])
        return self.sessions[form]

    def forward(self, call):
        dtype, geometry, past = NUMPY_DTYPES[self.precision], call.geometry, call.first_query
        (batch, heads, seq_q, head_dim), (kv_heads, seq_k) = call.query.shape, call.key.shape[1:3]
        causal, window = bool(geometry["causal"]), geometry.get("sliding_window")
        # What the attributes give (query i is key index past + i), then a bias for exactly what they lack.
        query_index, key_index = np.arange(past, seq_k)[:, None], np.arange(seq_k)[None, :]
        native = np.ones((seq_q, seq_k), dtype=bool)
        if causal:
            native &= key_index <= query_index
            if window is not None:
                native &= key_index > query_index - window
        if (call.visible & ~native).any():
            raise RuntimeError("SCHEMA's mask shows a key GroupQueryAttention's causal mask hides")
        hidden = native[None] & ~call.visible
        feeds = {"query": call.query.transpose(0, 2, 1, 3).reshape(batch, seq_q, heads * head_dim).astype(dtype),
                 "past_key": call.key[:, :, :past].astype(dtype), "past_value": call.value[:, :, :past].astype(dtype),
                 "seqlens_k": np.full(batch, seq_k - 1, dtype=np.int32),
                 "total_sequence_length": np.array(seq_k, dtype=np.int32)}
        for name, values in (("key", call.key), ("value", call.value)):
            feeds[name] = values[:, :, past:].transpose(0, 2, 1, 3).reshape(batch, seq_q, -1).astype(dtype)
        if hidden.any():
            feeds["attention_bias"] = np.where(hidden, -np.inf, 0).astype(dtype)[:, None]
        if call.sinks is not None:
            feeds["head_sink"] = call.sinks.astype(dtype)
        if past and seq_q > 1 and batch > 1:
            feeds["query_seqlens"] = np.full(batch, seq_q, dtype=np.int32)
        bug = self.plant_bug == "window-off-by-one"  # the planted bug: one key more on the left
        attribute_window = int(window) + bug if causal and window is not None else None
        softcap = geometry.get("softcap")
        form = (heads, kv_heads, causal, attribute_window, float(geometry["scale"]),
                None if softcap is None else float(softcap), tuple(sorted(set(feeds) - set(INPUTS[:7]))))
        output = self.session(form).run(["output"], feeds)[0]
        return output.reshape(batch, seq_q, heads, head_dim).transpose(0, 2, 1, 3)

    def description(self):
        bug = f" (planted bug: {self.plant_bug})" if self.plant_bug else ""
        return (f"onnxruntime {self.ort.__version__} com.microsoft.GroupQueryAttention (CPU, "
                f"{np.dtype(NUMPY_DTYPES[self.precision]).name}) via {MODULE}{bug}")


def main():
    parser = operator_layer.argument_parser(PROG, __doc__.split("\n\n")[0], OnnxGroupQueryAttention.precisions,
                                            PLANTED_BUGS)
    arguments = parser.parse_args()
    return operator_layer.main(parser, arguments,
                               lambda: OnnxGroupQueryAttention(arguments.dtype, arguments.plant_bug), MODULE)


if __name__ == "__main__":
    sys.exit(main())
