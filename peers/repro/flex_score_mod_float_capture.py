#!/usr/bin/env python3
"""flex_attention (eager, and torch.compile'd) crashes when a score_mod closes over a Python float and is
called with a second, different value in the same process: a softcap score_mod, as for Gemma 2.

    RuntimeError when making fake tensor call ... (zf.., ...) can only be of (<class 'torch.Tensor'>,
    <class 'int'>, <class 'torch.SymInt'>) but got (<class 'torch.SymFloat'>, ...)

Cause (torch 2.15): flex_attention runs its higher-order op under dynamo even in eager mode; at the second
value dynamo's automatic dynamic shapes turn the captured float into a SymFloat, which flex's score_mod
buffers do not accept. Capturing the value as a 0-d tensor works (what attncheck.adapters.torch_flex does).

    python3 peers/repro/flex_score_mod_float_capture.py    # exit 1 while the defect exists

Found by attncheck: attncheck.adapters.torch_flex on the committed goldens in one process (the Gemma 2
goldens' softcap 50, then small_softcap_padding's 5).
"""
import sys
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention

HEAD_DIM = 8


def softcapped(cap):
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)  # cap: a Python float captured by the closure
    return score_mod


def main():
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")  # eager on purpose
    torch.manual_seed(0)
    query, key, value = (torch.randn(1, 1, 4, HEAD_DIM) for _ in range(3))
    print(f"torch {torch.__version__}")
    failures = 0
    for cap in (50.0, 5.0):
        q, k, v = query.double(), key.double(), value.double()
        scores = q @ k.transpose(-1, -2) * HEAD_DIM ** -0.5
        expected = torch.softmax(cap * torch.tanh(scores / cap), dim=-1) @ v  # float64
        try:
            out = flex_attention(query, key, value, score_mod=softcapped(cap))
            print(f"softcap {cap}: max |error| {(out.double() - expected).abs().max().item():.3g}")
        except Exception as error:  # noqa: BLE001  (the defect is the exception)
            print(f"softcap {cap}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
            failures += 1
    if failures:
        print("DEFECT: flex_attention fails at a second softcap value captured as a float")
        return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
