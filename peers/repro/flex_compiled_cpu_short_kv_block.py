#!/usr/bin/env python3
"""torch.compile(flex_attention) on the CPU computes wrong attention when the key length is 8 more than a
multiple of 16 (8, 24, 40, ...) and head_dim is 8 or 16 (fp32 and bf16, AVX2 kernels): rows come out
wrong, zeros, or NaN.

Cause (torch 2.15, torch/_inductor/codegen/cpp_micro_gemm.py, CppMicroGemmFP32Vec): the q·kᵀ micro-GEMM's
N-tail kernel for a transposed B (`..._ntail_transpose_b_kernel`, its first implementation, taken when
K % VLEN == 0, N % VLEN == 0 and K < 24) ignores its runtime N: it loads BLOCK_N = 16 rows of K and
stores 16 score columns, where the tail of the key block has N = 8 (VLEN, the 8 floats of an AVX2
vector). It reads 8 key rows past the block (the next head's keys, or past the end of the tensor for the
last head) and writes 8 scores past each score row; for the last query row of the block that lands in the
flex template's row maxima (qk_max_data follows the score buffer), which the online softmax then starts
from. A row maximum larger than every real score underflows every exp: the row sum is 0, which the
template reads as a fully masked row, so the output row is 0. Past the tensor's end the garbage is whatever
memory holds: the last head's rows come out wrong, or NaN.

Here head 1's keys are large, so head 0's stray reads (in bounds: head 1's first keys) give row maxima far
above head 0's real scores, deterministically: every row of head 0 comes out 0. Eager flex_attention gives
the right answer for the same tensors; key lengths 9, 12, 16, 32 or head_dim 32 take other kernels and are
right (measured).

    python3 peers/repro/flex_compiled_cpu_short_kv_block.py    # exit 1 while the defect exists

Found by attncheck (peers/torch_kernels_test.py: attncheck.adapters.torch_flex --mode compiled fails a
golden of seq 8 and head_dim 16: out by 1.1e6 ulps in fp32, NaN in bf16; the same golden at seq 9 passes).
"""
import sys
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention

BATCH, HEADS, SEQ, HEAD_DIM = 1, 2, 8, 16  # SEQ = 8: one AVX2 vector of fp32 scores, below BLOCK_N = 16


def main():
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")  # eager on purpose
    capability = torch.backends.cpu.get_cpu_capability()
    torch.manual_seed(0)
    query = torch.rand(BATCH, HEADS, SEQ, HEAD_DIM)  # positive, so that q · (large keys) is large
    key = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    key[:, 1] = 100.0                                # head 1's keys: what head 0's stray reads see
    value = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)

    out = torch.compile(flex_attention)(query, key, value)
    eager = flex_attention(query, key, value)

    q, k, v = query.double(), key.double(), value.double()
    expected = torch.softmax(q @ k.transpose(-1, -2) * HEAD_DIM ** -0.5, dim=-1) @ v  # float64
    head_0_error = (out[:, 0].double() - expected[:, 0]).abs().max().item()
    eager_error = (eager.double() - expected).abs().max().item()
    zero_rows = int((out[0, 0].abs().amax(dim=-1) == 0).sum())
    print(f"torch {torch.__version__}, CPU capability {capability}")
    print(f"compiled flex_attention, head 0: max |error| {head_0_error:.3g}, {zero_rows} of {SEQ} rows are 0")
    print(f"compiled flex_attention, head 1 (reads past the tensor): max |error| "
          f"{(out[:, 1].double() - expected[:, 1]).abs().max().item():.3g}")
    print(f"eager flex_attention: max |error| {eager_error:.3g}")
    if head_0_error > 1e-4:
        print("DEFECT: compiled flex_attention is wrong for key length 8, head_dim 16")
        return 1
    print("not reproduced" + ("" if capability == "AVX2" else " (the defect is in the AVX2 kernels; this CPU runs "
                                                              f"{capability})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
