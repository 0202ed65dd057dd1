#!/usr/bin/env python3
"""OpenVINO's ScaledDotProductAttention (opset13) on the CPU plugin returns NaN for a query whose boolean mask
row is all False (it sees no key), where PyTorch's scaled_dot_product_attention and attncheck's SCHEMA give
0 for it; the other rows are right. Upstream: openvinotoolkit/openvino issue #35959 (open; fix proposed in
pull request #36016).

The operator turns False into −inf and takes the softmax of a row that is all −inf: exp(−inf − (−inf)) is
NaN. Shown here on both paths the CPU plugin takes: rank 4 (its fused attention subgraph) and rank 5 (the
decomposition into MatMul, Select, Softmax), f32 precision hint, against a float64 numpy computation.

    python3 peers/repro/openvino_sdpa_keyless_row_nan.py    # exit 1 while the defect exists

Found by attncheck: attncheck.adapters.openvino_attention refuses cases with such queries ("keyless-rows"),
since OpenVINO's answer there is NaN.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def reference(query, key, value, mask, scale):
    """float64 attention; a query that sees no key gets 0 (PyTorch's and SCHEMA's convention)."""
    scores = np.where(mask, query.astype(np.float64) @ np.swapaxes(key, -1, -2).astype(np.float64) * scale, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    sums = weights.sum(axis=-1, keepdims=True)
    return np.where(sums > 0, weights / np.where(sums > 0, sums, 1.0), 0.0) @ value.astype(np.float64)


def openvino_sdpa(query, key, value, mask, scale):
    rank = query.ndim
    q, k, v = (ops.parameter(ov.PartialShape([-1] * rank), ov.Type.f32) for _ in range(3))
    m = ops.parameter(ov.PartialShape([-1] * rank), ov.Type.boolean)
    s = ops.parameter(ov.PartialShape([]), ov.Type.f32)
    model = ov.Model([ops.scaled_dot_product_attention(q, k, v, m, s)], [q, k, v, m, s])
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([query, key, value, mask, np.float32(scale)])[0].astype(np.float64)


def main():
    print(f"openvino {ov.__version__}")
    rng = np.random.default_rng(0)
    query, key, value = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(3))
    mask = np.tri(4, 4, dtype=bool)[None, None].copy()
    mask[..., 2, :] = False  # query 2 sees no key
    expected = reference(query, key, value, mask, 0.35)
    defects = 0
    for rank in (4, 5):
        shape = lambda array: array[:, :, None] if rank == 5 else array  # noqa: E731  [B, K, G=1, L, E]
        got = openvino_sdpa(*(np.ascontiguousarray(shape(a)) for a in (query, key, value, mask)), 0.35)
        got = got.reshape(expected.shape)
        others = np.delete(np.abs(got - expected), 2, axis=2).max()
        print(f"rank {rank}: the keyless query's row {got[0, 0, 2, :4]} (expected 0), "
              f"every other row within {others:.2g} of float64")
        defects += bool(np.isnan(got[..., 2, :]).any())
    if defects:
        print(f"DEFECT: a query whose mask row is all False gets NaN on {defects} of 2 paths, not 0")
        return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
