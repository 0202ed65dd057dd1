#!/usr/bin/env python3
"""scaled_dot_product_attention's CPU flash backend computes the scores one way in its forward pass and
another way in its backward pass, so its fp32 gradients lose accuracy when the scores are large: dV errs
by a thousand ulps where the math backend's errs by one.

Forward (torch 2.15, _scaled_dot_product_flash_attention_for_cpu): S = fl(q·kᵀ)·scale; its log-sum-exp
equals fp32(logsumexp(fl(q·kᵀ)·scale)) bit for bit (shown below). Backward: S' = q·fl(k·scale), the keys
pre-scaled: its dV is the dV of P = exp(S' − lse) to 1e-7 relative (its own fp32 rounding), where the
forward's S gives 7e-5 (below). Where scale is not a power of two (head_dim 2, 8, 32, 128, ...) S' and S
differ by about an ulp of |S|, and each probability exp(S' − lse) is off by that much, relatively: at
|S| ≈ 10^3 about 6e-5, 500 fp32 ulps, so the rows of the backward's P no longer sum to 1. With head_dim
16 (scale 1/4) the two forms agree and flash's dV is within a small factor of the math backend's
(control, below).

    python3 peers/repro/sdpa_cpu_flash_backward_scale_mismatch.py    # exit 1 while the defect exists

Found by attncheck: `attncheck fuzz --impl exec:'python3 -m attncheck.adapters.torch_sdpa --worker --dtype
fp32' --profile long` fails grads/v_proj (241 ulps of its scale at seed 1, 41.8 at seed 2; shrunk to one
head, head_dim 2, seq 48, outlier activations), while the same layer through the math backend passes.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SEQ, MAGNITUDE = 48, 20.0  # |scores| up to ~1.8e3, as attncheck's outlier activations make them


def gradients(query, key, value, grad_out, backend, dtype):
    """(dQ, dK, dV) in float64 from one backend at one dtype."""
    q, k, v = (tensor.to(dtype).clone().requires_grad_() for tensor in (query, key, value))
    with sdpa_kernel(backend):
        F.scaled_dot_product_attention(q, k, v).backward(grad_out.to(dtype))
    return [tensor.grad.double() for tensor in (q, k, v)]


def ulps(got, expected):
    """max |got − expected| in ulps of fp32 at the tensor's largest |expected|."""
    return ((got - expected).abs().max() / (expected.abs().max() * 2.0**-24)).item()


def run(head_dim):
    torch.manual_seed(0)
    query = MAGNITUDE * torch.randn(1, 1, SEQ, head_dim)
    key = MAGNITUDE * torch.randn(1, 1, SEQ, head_dim)
    value, grad_out = torch.randn(1, 1, SEQ, head_dim), torch.randn(1, 1, SEQ, head_dim)
    scale = head_dim ** -0.5
    exact = gradients(query, key, value, grad_out, SDPBackend.MATH, torch.float64)
    flash = gradients(query, key, value, grad_out, SDPBackend.FLASH_ATTENTION, torch.float32)
    math = gradients(query, key, value, grad_out, SDPBackend.MATH, torch.float32)
    lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value)[1]  # [1, 1, SEQ] fp32
    forward_scores = (query @ key.transpose(-1, -2)) * scale          # fl(q·kᵀ)·scale
    backward_scores = query @ (key * scale).transpose(-1, -2)         # q·fl(k·scale)
    forward_lse = torch.logsumexp(forward_scores.double(), dim=-1).float()
    def dv_from(scores):  # dV = Pᵀ dO with P = exp(S − lse) from the forward's lse, as flash's backward forms it
        p = torch.exp(scores.double() - lse.double()[..., None])
        return p, p.transpose(-1, -2) @ grad_out.double()

    def distance(dv):
        return ((dv - flash[2]).abs().max() / flash[2].abs().max()).item()

    backward_p, backward_dv = dv_from(backward_scores)
    _, forward_dv = dv_from(forward_scores)
    print(f"head_dim {head_dim} (scale {scale:.6g}), max |lse| {lse.abs().max().item():.4g}:")
    print(f"  forward lse == fp32(logsumexp(fl(q.k)*scale)) everywhere: {bool((lse == forward_lse).all())}")
    print(f"  flash dV vs the dV of P = exp(S - lse): {distance(backward_dv):.2g} (relative) for S = q.fl(k*scale), "
          f"{distance(forward_dv):.2g} for the forward's S = fl(q.k)*scale")
    print(f"  row sums of the backward's P - 1: up to {(backward_p.sum(-1) - 1).abs().max().item():.3g}")
    names = ("dQ", "dK", "dV")
    print("  fp32 error, ulps of each gradient's largest value: flash " +
          ", ".join(f"{n} {ulps(g, e):.1f}" for n, g, e in zip(names, flash, exact)) + "; math " +
          ", ".join(f"{n} {ulps(g, e):.1f}" for n, g, e in zip(names, math, exact)))
    return ulps(flash[2], exact[2]), ulps(math[2], exact[2])


def main():
    print(f"torch {torch.__version__}")
    flash_dv, math_dv = run(head_dim=2)
    run(head_dim=16)  # control: scale 1/4 is exact, both score forms agree
    if flash_dv > 10 * max(math_dv, 1.0):
        print(f"DEFECT: the flash backward's dV errs by {flash_dv:.0f} ulps, the math backend's by {math_dv:.1f}")
        return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
