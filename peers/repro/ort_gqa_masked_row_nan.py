#!/usr/bin/env python3
"""ONNX Runtime's CPU com.microsoft.GroupQueryAttention returns NaN for a query whose every key is masked by
attention_bias (−inf) in float16, and in float32 with a softcap, where its float32 kernel without a softcap
(or with head_sink) returns 0 for the same row: the kernel's paths disagree on a fully masked query.

    python3 peers/repro/ort_gqa_masked_row_nan.py    # exit 1 while the defect exists

The call: batch 2, 2 query heads over 1 KV head, head_size 8, 4 tokens, causal, no past; attention_bias
[2, 1, 4, 4] is 0 on the causal keys of batch row 0 and −inf on every key of batch row 1 (a row of key
length 0: right padding). Expected, by the float64 computation below and by ORT's own float32 kernel
without a softcap: row 0 the causal attention, row 1 zeros. A finite bias (the dtype's lowest) instead gives
row 1 the mean of V on the NaN paths, so there no bias says "sees no key".

Found by attncheck: attncheck.adapters.onnx_group_query_attention: fuzz --dtype fp32 (shrunk to softcap 5,
window 1, padded keys: out NaN where 0 is expected) and --dtype fp16 on small_window_masked_rows.h5 (key
lengths 9, 4, 0 under a window of 3: out and decode/out non-finite in batch rows 1 and 2).
"""
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

BATCH, HEADS, KV_HEADS, SEQ, HEAD_SIZE, SCALE = 2, 2, 1, 4, 8, 0.25


def session(dtype, softcap):
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    names = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "", "", "",
             "attention_bias"]
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT32 if name in names[5:7] else element,
                                            [] if name == "total_sequence_length" else None) for name in names if name]
    outputs = ["output", "present_key", "present_value"]
    node = helper.make_node("GroupQueryAttention", names, outputs, domain="com.microsoft", num_heads=HEADS,
                            kv_num_heads=KV_HEADS, scale=SCALE, softcap=softcap)
    graph = helper.make_graph([node], "gqa", inputs, [helper.make_tensor_value_info(n, element, None) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def expected(query, key, value, visible, softcap):
    """float64 [batch, seq, heads, head_size]; a query that sees no key gets 0."""
    scores = np.einsum("bshd,btd->bhst", query, key[:, :, 0]) * SCALE
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    scores = np.where(visible[:, None], scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(-1, keepdims=True)
    weights = np.where(total > 0, weights / np.where(total > 0, total, 1), 0)
    return np.einsum("bhst,btd->bshd", weights, value[:, :, 0])


def main():
    rng = np.random.default_rng(0)
    # values exact in float16, so both kernels get the same numbers
    query = rng.standard_normal((BATCH, SEQ, HEADS, HEAD_SIZE)).astype(np.float16).astype(np.float64)
    key, value = (rng.standard_normal((BATCH, SEQ, KV_HEADS, HEAD_SIZE)).astype(np.float16).astype(np.float64)
                  for _ in range(2))
    visible = np.tril(np.ones((SEQ, SEQ), dtype=bool))[None] & (np.arange(SEQ) < np.array([SEQ, 0])[:, None, None])
    print(f"onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}")
    broken = False
    for dtype, softcap in ((np.float32, 0.0), (np.float32, 5.0), (np.float16, 0.0)):
        reference = expected(query, key, value, visible, softcap)
        feeds = {"query": query.reshape(BATCH, SEQ, -1).astype(dtype), "key": key.reshape(BATCH, SEQ, -1).astype(dtype),
                 "value": value.reshape(BATCH, SEQ, -1).astype(dtype),
                 "past_key": np.zeros((BATCH, KV_HEADS, 0, HEAD_SIZE), dtype),
                 "past_value": np.zeros((BATCH, KV_HEADS, 0, HEAD_SIZE), dtype),
                 "seqlens_k": np.full(BATCH, SEQ - 1, np.int32), "total_sequence_length": np.array(SEQ, np.int32),
                 "attention_bias": np.where(visible, 0, -np.inf).astype(dtype)[:, None]}
        out = session(dtype, softcap).run(["output"], feeds)[0].astype(np.float64).reshape(reference.shape)
        masked_row = out[1]
        error = np.abs(out[0] - reference[0]).max()
        print(f"{np.dtype(dtype).name}, softcap {softcap}: seeing row max |error| {error:.3g}; fully masked row: "
              f"{np.isnan(masked_row).sum()} NaN of {masked_row.size}, max |value| {np.abs(masked_row).max():.3g}")
        broken |= not np.isfinite(masked_row).all()
    if broken:
        print("DEFECT: GroupQueryAttention (CPU) returns NaN for a fully masked query "
              "(float16, float32 with softcap; 0 otherwise)")
        return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
