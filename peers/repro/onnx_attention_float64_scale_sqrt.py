#!/usr/bin/env python3
"""The ONNX Attention operator (opset 23) run by ONNX Runtime's CPU provider in float64 applies its scale as
sqrt(scale), rounded to float32, to Q and to K: the logits are scaled by float32(sqrt(scale))², not by
scale. With scale 0.125 (head_dim 64's 64^-0.5, exactly a float32) the float64 result is ~3e-8 off, float32's
accuracy where float64 promises 1e-16; scales whose square root is a float32 (0.25, 1/16) are exact. The
float64 result matches, to float64's rounding, the model q·float32(sqrt(scale)) and k·float32(sqrt(scale))
(printed below).

    python3 peers/repro/onnx_attention_float64_scale_sqrt.py    # exit 1 while the defect exists

Found by attncheck: `python3 -m attncheck.adapters.onnx_attention --dtype fp64` fails out of
pythia-410m_tp2_seq2048 (head_dim 64) by 1.9e7 fp64 ulps while the goldens at head_dim 16 and 256 pass
(ctest peer.onnx).
"""
import sys

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

SCALE = 0.125  # exactly a float32; its square root is not


def session(scale):
    inputs = [helper.make_tensor_value_info(name, TensorProto.DOUBLE, None) for name in "QKV"]
    node = helper.make_node("Attention", list("QKV"), ["Y"], scale=scale)
    output = helper.make_tensor_value_info("Y", TensorProto.DOUBLE, None)
    graph = helper.make_graph([node], "attention", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def attention(query, key, value, scale):
    """softmax(scale · q kᵀ) v in numpy float64, [batch, heads, seq, head_dim]."""
    scores = query @ key.swapaxes(-1, -2) * scale
    probabilities = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return probabilities / probabilities.sum(axis=-1, keepdims=True) @ value


def main():
    rng = np.random.default_rng(0)
    query, key, value = (rng.standard_normal((1, 2, 16, 64)) for _ in range(3))
    got = session(SCALE).run(None, {"Q": query, "K": key, "V": value})[0]
    expected = attention(query, key, value, SCALE)
    root = float(np.float32(np.sqrt(np.float32(SCALE))))
    modelled = attention(query * root, key * root, value, 1.0)
    error = float(np.abs(got - expected).max() / np.abs(expected).max())
    model_error = float(np.abs(got - modelled).max() / np.abs(expected).max())
    print(f"onnxruntime {onnxruntime.__version__}: float64 Attention, scale {SCALE}: relative error {error:.2g} "
          f"(float64 eps {np.finfo(np.float64).eps:.2g}); against q·f32(sqrt(scale)), k·f32(sqrt(scale)): "
          f"{model_error:.2g}")
    if error > 1e3 * np.finfo(np.float64).eps:
        print("DEFECT: the float64 operator scales by float32(sqrt(scale))², a float32-accurate result")
        return 1
    print("not reproduced: the float64 operator is float64-accurate at this scale")
    return 0


if __name__ == "__main__":
    sys.exit(main())
