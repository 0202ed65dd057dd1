#!/usr/bin/env python3
"""ctest peer.jax*, peer.onnx*: attention operators beyond PyTorch, judged by attncheck through
attncheck.adapters.jax_attention (jax.nn.dot_product_attention) and attncheck.adapters.onnx_attention (the
ONNX Attention operator on ONNX Runtime's CPU provider), each around attncheck's float64 layer
(attncheck.adapters.operator_layer), each verdict fixed in advance: passes, refusals by name, planted bugs
caught, and the findings as named failures with their standalone reproductions (peers/repro/). Fixed
goldens, seeds and case counts, never a time budget.

    operators_test.py GROUP ATTNCHECK WORK_DIR GOLDEN_DIR
    GROUP: jax | jax-fuzz | onnx | onnx-fuzz

Every committed golden an operator can express runs at fp32 in one adapter process (an operator's process
starts in seconds, a golden then takes well under one); the other precisions run the small goldens, the
ladder and the long ones. The summary printed last is what docs/OPERATORS.md's tables are read from.
"""
import os
import sys

import attncheck  # python/ of this tree (PYTHONPATH from ctest)
from peer_checks import (Context, fork_server, fuzz_clean, fuzz_named_failure, judged, ladder, ladder_expectation,
                         repro_script, report)

JAX = [sys.executable, "-m", "attncheck.adapters.jax_attention"]
ONNX = [sys.executable, "-m", "attncheck.adapters.onnx_attention"]

LADDER = ["ladder_01_plain-mha", "ladder_02_gqa", "ladder_03_explicit-head-dim", "ladder_04_position-ids",
          "ladder_05_partial-rope", "ladder_06_partial-rope-interleaved", "ladder_07_qk-norm", "ladder_08_biases",
          "ladder_09_key-padding", "ladder_10_sliding-window", "ladder_13_kv-cache-decode",
          "ladder_14_tp2-rank-gradients"]
# Model-shaped goldens without softcap, sinks or latent attention; the three widest (GPT-NeoX-20B, GPT-J 6B:
# a minute of float64 projections each; Qwen3-32B: 755 MB of float64 weights and as much gradient, 5 s an
# operator; none with a feature its neighbours lack: an operator runs the layer unsharded, so Qwen3-32B's TP 16
# split is Qwen3-4B's layer at twice the width) are left out of every list.
MODELS = ["qwen3-0.6b_tp1", "qwen3-0.6b_tp2", "qwen3-0.6b_tp4", "qwen3-4b_tp2", "gemma-3-270m_tp1",
          "gemma-3-270m_tp4", "gemma-3-4b_layer5_tp2", "granite-3.3-8b_tp2", "llama-3.1-8b_tp2", "olmo-2-7b_tp4",
          "phi-4-mini_tp2", "phi-4-mini_tp2_short", "smollm3-3b_layer3_tp2"]
SMALL = ["small_width_norm_replicated_kv", "small_yarn_stated", "small_yarn_mscale", "small_longrope_switch",
         "small_megatron_equal_block", "small_duplicate_block", "small_cp_ring_decode", "small_cp_ulysses"]
LONG = ["qwen3-0.6b_tp2_seq1024", "gemma-3-270m_tp2_seq2048", "pythia-410m_tp2_seq2048", "narrow_biases_tp2_seq4096",
        "narrow_bidirectional_seq4096"]
SOFTCAP = ["ladder_11_softcap", "gemma-2-2b_layer0_tp2", "gemma-2-2b_layer1_tp8", "gemma-2-narrow_layer0_tp2_seq4160",
           "small_softcap_padding"]
SINKS = ["ladder_12_sinks", "gpt-oss-20b_layer1_tp2", "gpt-oss-20b_layer0_tp16_seq160", "small_cp_ring_large_logits"]
KEYLESS = ["small_window_masked_rows", "small_cp_ring_tp2"]  # some query sees no key
# The conformance ladder's rungs (docs/LADDER.md) each operator runs; the others are outside its statement.
RUNGS = ["01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "13"]
OUTSIDE = {"11": "softcap", "12": "sinks", "14": "tensor-parallel", "15": "latent"}
LATENT_GOLDENS = [(name, "multi-head latent attention") for name in (
    "ladder_15_latent-attention", "deepseek-v3-narrow_tp2", "deepseek-v3-narrow_tp4", "deepseek-v2-lite-narrow_tp2",
    "kimi-k2-narrow_tp8")]


# ---------------------------------------------------------------------------------------------
# JAX

JAX_REFUSED = ([(name, "softcap") for name in SOFTCAP] + [(name, "attention sinks") for name in SINKS]
               + [(name, "a query that sees no key") for name in KEYLESS] + LATENT_GOLDENS)


def jax_goldens(context):
    # Under jax.jit a call compiles once per shape; eager JAX compiles each of its operations per shape, several
    # times slower on a golden's many shapes: every golden runs jitted, the ladder eagerly (the small goldens' features
    # are the float64 layer's, which the jitted run covers; docs/MEASUREMENTS.md "The gate's budgets").
    judged(context, JAX, ["--dtype", "fp32", "--jit"], "jax fp32 jit", LADDER + MODELS + SMALL + LONG,
           refused=JAX_REFUSED)
    judged(context, JAX, ["--dtype", "fp32"], "jax fp32", LADDER)
    judged(context, JAX, ["--dtype", "bf16", "--jit"], "jax bf16 jit", LADDER + SMALL + LONG[:1])
    judged(context, JAX, ["--dtype", "bf16"], "jax bf16", LADDER)
    for dtype in ("fp32", "bf16"):
        ladder(context, jax_worker(dtype, "--jit"), ladder_expectation(RUNGS, "pass", OUTSIDE), f"jax {dtype} jit")
    # Finding: JAX computes the softmax in float32 whatever the input dtype, so a float64 call is ~1e-7 off:
    # held to the fp64 contract, every tensor fails (peers/repro/jax_float64_softmax_in_float32.py).
    judged(context, JAX, ["--dtype", "fp64"], "jax fp64", [],
           failing={"ladder_03_explicit-head-dim": JAX_FP64_FAILS, "ladder_13_kv-cache-decode": JAX_FP64_DECODE_FAILS})
    repro_script("jax_float64_softmax_in_float32.py", "jax fp64")
    # The window one key too wide on the left: the sliding-window golden fails.
    judged(context, JAX, ["--dtype", "fp32", "--jit", "--plant-bug", "window-off-by-one"],
           "jax fp32 jit planted window-off-by-one", [], failing={"ladder_10_sliding-window": JAX_WINDOW_FAILS})


GRADIENTS = ["grads/k_proj", "grads/o_proj", "grads/q_proj", "grads/v_proj", "grads/x"]
JAX_FP64_FAILS = ["out"] + GRADIENTS
JAX_FP64_DECODE_FAILS = ["decode/out", "out"] + GRADIENTS
JAX_WINDOW_FAILS = ["out"] + GRADIENTS


def jax_worker(dtype, *flags):
    return [*JAX, "--worker", "--dtype", dtype, *flags]


def jax_fuzz(context):
    # Eager JAX compiles each operation afresh for every new shape (a second or two a fuzz case), jax.jit the
    # whole call once per shape: the eager budget is the small one.
    fuzz_clean(context, jax_worker("fp32"), "short", 25, 1, "jax fp32")
    fuzz_clean(context, jax_worker("fp32", "--jit"), "short", 40, 2, "jax fp32 jit")
    fuzz_clean(context, jax_worker("bf16", "--jit"), "short", 30, 1, "jax bf16 jit")
    fuzz_clean(context, jax_worker("fp32", "--jit"), "long", 8, 1, "jax fp32 jit")
    # Finding: jax.jit cannot compile a bf16 call of one query and one key on the CPU (the adapter runs those
    # eagerly; seed 1's case 4 above has one).
    repro_script("jax_jit_bf16_single_key.py", "jax bf16 jit")
    fuzz_named_failure(context, jax_worker("fp32", "--jit", "--plant-bug", "window-off-by-one"), "short", 60, 1,
                       "jax fp32 jit planted window-off-by-one", "")


# ---------------------------------------------------------------------------------------------
# ONNX Attention on ONNX Runtime

NO_BACKWARD = "has no backward pass"
ONNX_REFUSED = [(name, "attention sinks") for name in SINKS] + LATENT_GOLDENS


def onnx_goldens(context):
    judged(context, ONNX, ["--dtype", "fp32"], "onnx fp32", LADDER + SOFTCAP + KEYLESS + MODELS + SMALL + LONG,
           refused=ONNX_REFUSED, declined=NO_BACKWARD)
    judged(context, ONNX, ["--dtype", "fp16"], "onnx fp16", LADDER + ["ladder_11_softcap", "small_softcap_padding",
                                                                       "small_window_masked_rows"] + SMALL + LONG[:2],
           declined=NO_BACKWARD)
    # fp64: the wrapper's self-check where the scale is exactly a float32 (ONNX's float attributes are 32-bit).
    without_softcap = {rung: why for rung, why in OUTSIDE.items() if why != "softcap"}
    for dtype in ("fp32", "fp16"):
        ladder(context, onnx_worker(dtype), ladder_expectation(RUNGS + ["11"], "pass_with_declined", without_softcap),
               f"onnx {dtype}")
    # fp64, the wrapper's self-check: head_dim^-0.5 is a float32 only at head widths 4^n (16: most rungs; 64;
    # 256), and ONNX's float attributes are 32-bit, so others are refused by name. Finding: ORT's float64
    # operator scales Q and K by float32(sqrt(scale)) each, exact only where that root is a float32 (16: 1/2,
    # 256: 1/4), so head_dim 64 (scale 1/8) fails (peers/repro/onnx_attention_float64_scale_sqrt.py).
    judged(context, ONNX, ["--dtype", "fp64"], "onnx fp64", LADDER[2:] + ["ladder_11_softcap", "gemma-3-270m_tp1"],
           refused=[("ladder_01_plain-mha", "32-bit"), ("qwen3-0.6b_tp2", "32-bit")],
           failing={"pythia-410m_tp2_seq2048": ["out#sketch"]}, declined=NO_BACKWARD)
    repro_script("onnx_attention_float64_scale_sqrt.py", "onnx fp64")
    # Decode calls passing the whole cache with is_causal and no past: the diagonal aligned top-left.
    judged(context, ONNX, ["--dtype", "fp32", "--plant-bug", "causal-without-past"],
           "onnx fp32 planted causal-without-past", [], failing={"ladder_13_kv-cache-decode": ["decode/out"]})


def onnx_worker(dtype, *flags):
    return [*ONNX, "--worker", "--dtype", dtype, *flags]


def onnx_fuzz(context):
    fuzz_clean(context, onnx_worker("fp32"), "short", 150, 1, "onnx fp32")
    fuzz_clean(context, onnx_worker("fp16"), "short", 100, 2, "onnx fp16")
    fuzz_clean(context, onnx_worker("fp32"), "long", 20, 1, "onnx fp32")
    fuzz_named_failure(context, onnx_worker("fp32", "--plant-bug", "causal-without-past"), "short", 100, 1,
                       "onnx fp32 planted causal-without-past", "decode/out")


GROUPS = {"jax": jax_goldens, "jax-fuzz": jax_fuzz, "onnx": onnx_goldens, "onnx-fuzz": onnx_fuzz}


def main():
    group, attncheck_cli, work_dir, golden_dir = sys.argv[1:5]
    os.makedirs(work_dir, exist_ok=True)
    print(f"attncheck's python package {attncheck.__version__}")
    # Adapter runs, workers and repros forked from one process with torch (the float64 layer) and JAX imported
    # (peers/preforked.py; ONNX Runtime starts a thread at import, so its adapter imports it after the fork).
    framework = ["jax", "attncheck.adapters.jax_attention"] if group.startswith("jax") else [
        "attncheck.adapters.onnx_attention"]
    modules = ["torch", "h5py", "attncheck.adapters.operator_layer", *framework]
    with fork_server(modules):
        GROUPS[group](Context(attncheck_cli, work_dir, golden_dir))
    return report()


if __name__ == "__main__":
    sys.exit(main())
