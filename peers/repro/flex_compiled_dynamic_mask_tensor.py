#!/usr/bin/env python3
"""torch.compile(flex_attention) on the CPU fails to compile once shapes are dynamic when the mask_mod
indexes a captured tensor (key padding: kv_idx < lengths[b]):

    CppCompileError: ... error: 'cur_qSplitSize8' was not declared in this scope

Cause (torch 2.15, torch/_inductor/codegen/cpp_flex_attention_template.py, the modification's code
generation): the template represents the runtime tile size by an unbacked symbol and swaps that symbol's
kernel-argument name for "cur_qSplitSize" with str.replace, so another size argument whose name starts with
the same characters (the dynamic batch size that indexes `lengths`) is mangled into an undeclared name.
Dynamo switches dynamic shapes on at the second shape it sees (batch 2 -> 3 here); compiling with
dynamic=False (one kernel per shape) avoids it, which is what attncheck.adapters.torch_flex does.

    python3 peers/repro/flex_compiled_dynamic_mask_tensor.py    # exit 1 while the defect exists

Found by attncheck: attncheck.adapters.torch_flex --mode compiled on two committed goldens in one process.
"""
import sys
import warnings

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

HEADS, HEAD_DIM = 2, 32  # head_dim 32: not the micro-GEMM of flex_compiled_cpu_short_kv_block.py


def attend(compiled, batch, seq):
    lengths = torch.full((batch,), seq)  # every key visible: the reference needs no mask

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx < lengths[b]

    torch.manual_seed(batch * 100 + seq)
    query, key, value = (torch.randn(batch, HEADS, seq, HEAD_DIM) for _ in range(3))
    block_mask = create_block_mask(mask_mod, batch, None, seq, seq, device="cpu")
    out = compiled(query, key, value, block_mask=block_mask)
    q, k, v = query.double(), key.double(), value.double()
    expected = torch.softmax(q @ k.transpose(-1, -2) * HEAD_DIM ** -0.5, dim=-1) @ v  # float64
    return (out.double() - expected).abs().max().item()


def main():
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    compiled = torch.compile(flex_attention)
    print(f"torch {torch.__version__}")
    failures = 0
    for batch, seq in ((2, 20), (3, 36)):  # the second shape makes dynamo compile for dynamic shapes
        try:
            print(f"batch {batch}, seq {seq}: max |error| {attend(compiled, batch, seq):.3g}")
        except Exception as error:  # noqa: BLE001  (the defect is the exception)
            lines = [line.strip() for line in str(error).splitlines() if "error:" in line]
            print(f"batch {batch}, seq {seq}: {type(error).__name__}: {(lines or [str(error)])[0][-120:]}")
            failures += 1
    if failures:
        print("DEFECT: compiled flex_attention does not compile for dynamic shapes with a mask_mod indexing a tensor")
        return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
