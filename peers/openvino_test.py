#!/usr/bin/env python3
"""ctest peer.openvino and peer.openvino_fuzz: OpenVINO's ScaledDotProductAttention (opset13) on the CPU plugin,
fp32 (INFERENCE_PRECISION_HINT f32) and bf16 (hint bf16), judged by attncheck through
attncheck.adapters.openvino_attention, each verdict fixed in advance: passes with gradients declined
(OpenVINO is inference only), refusals by name, the ladder's support matrix, the planted bug caught, and
the finding reduced to a plain-OpenVINO script (peers/repro/openvino_sdpa_keyless_row_nan.py). Fixed
goldens, fixed fuzz seeds and case counts, never a time budget.

    openvino_test.py GROUP ATTNCHECK WORK_DIR GOLDEN_DIR
    GROUP: openvino | openvino-fuzz

Every committed golden the operator can express runs at fp32 but the three widest, gpt-neox-20b_tp1,
gpt-j-6b_tp2 (the float64 layer's projections, a minute each here; both pass, measured once) and qwen3-32b_tp16
(Qwen3-4B's layer at twice the width when run unsharded; it passed in every gate before 2026-12-07): none has a
feature its neighbours lack. The ladder runs through `attncheck run --goldens` (the worker protocol), every other golden
through the command line and `attncheck compare`.
"""
import os
import sys

import attncheck  # python/ of this tree (PYTHONPATH from ctest)
from peer_checks import (Context, fork_server, fuzz_clean, fuzz_named_failure, judged, ladder, ladder_expectation,
                         repro_script, report)

ADAPTER = [sys.executable, "-m", "attncheck.adapters.openvino_attention"]
NO_BACKWARD = "is inference only: ScaledDotProductAttention has no backward"

# Every committed non-ladder golden the operator can express but the three widest (docstring): GQA and MHA
# (rank-5 and rank-4 calls), QK-norm of each kind, RoPE scalings, partial RoPE, NoPE (interleaved RoPE: the
# ladder), windows, padding, custom scales, decoding with multi-token steps, seq 1024 to 4096.
FP32_GOLDENS = ["qwen3-0.6b_tp1", "qwen3-0.6b_tp2", "qwen3-0.6b_tp4", "qwen3-4b_tp2",
                "gemma-3-270m_tp1", "gemma-3-270m_tp4", "gemma-3-4b_layer5_tp2", "granite-3.3-8b_tp2",
                "llama-3.1-8b_tp2", "olmo-2-7b_tp4", "phi-4-mini_tp2", "phi-4-mini_tp2_short", "smollm3-3b_layer3_tp2",
                "small_cp_ring_decode", "small_cp_ulysses", "small_duplicate_block", "small_longrope_switch",
                "small_megatron_equal_block", "small_width_norm_replicated_kv", "small_yarn_mscale",
                "small_yarn_stated", "qwen3-0.6b_tp2_seq1024", "gemma-3-270m_tp2_seq2048", "pythia-410m_tp2_seq2048",
                "narrow_biases_tp2_seq4096", "narrow_bidirectional_seq4096"]
BF16_GOLDENS = ["qwen3-0.6b_tp1", "gemma-3-270m_tp1", "small_width_norm_replicated_kv", "small_yarn_stated",
                "small_longrope_switch", "small_cp_ring_decode", "small_yarn_mscale", "qwen3-0.6b_tp2_seq1024",
                "pythia-410m_tp2_seq2048", "narrow_bidirectional_seq4096"]
REFUSED = [("small_softcap_padding", "softcap"), ("gemma-2-2b_layer0_tp2", "softcap"),
           ("gemma-2-2b_layer1_tp8", "softcap"), ("gemma-2-narrow_layer0_tp2_seq4160", "softcap"),
           ("gpt-oss-20b_layer0_tp16_seq160", "attention sinks"),
           ("gpt-oss-20b_layer1_tp2", "attention sinks"), ("small_cp_ring_large_logits", "attention sinks"),
           ("small_window_masked_rows", "a query that sees no key"), ("small_cp_ring_tp2", "a query that sees no key"),
           ("deepseek-v3-narrow_tp2", "multi-head latent attention")]
# The conformance ladder (docs/LADDER.md): rung -> (status, what its reason names); the same at fp32 and bf16.
LADDER = ladder_expectation(["01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "13"], "pass_with_declined",
                            {"11": "softcap", "12": "sinks", "14": "tensor-parallel", "15": "latent"})


def worker(dtype, *flags):
    return [*ADAPTER, "--worker", "--dtype", dtype, *flags]


def goldens(context):
    judged(context, ADAPTER, ["--dtype", "fp32"], "openvino fp32", FP32_GOLDENS, refused=REFUSED, declined=NO_BACKWARD)
    judged(context, ADAPTER, ["--dtype", "bf16"], "openvino bf16", BF16_GOLDENS, declined=NO_BACKWARD)
    for dtype in ("fp32", "bf16"):
        ladder(context, worker(dtype), LADDER, f"openvino {dtype}")
    # causal=True is aligned top-left: passed for a decode step over a cache, that step attends to the wrong
    # keys (decode/out), and nothing else fails.
    judged(context, ADAPTER, ["--dtype", "fp32", "--plant-bug", "top-left-causal"],
           "openvino fp32 planted top-left-causal", ["ladder_01_plain-mha"], declined=NO_BACKWARD,
           failing={"ladder_13_kv-cache-decode": ["decode/out"]})
    # Finding: a query that sees no key gets NaN (the adapter refuses such cases, above).
    repro_script("openvino_sdpa_keyless_row_nan.py", "openvino")


def fuzz(context):
    fuzz_clean(context, worker("fp32"), "short", 75, 1, "openvino fp32")
    fuzz_clean(context, worker("bf16"), "short", 50, 2, "openvino bf16")
    fuzz_clean(context, worker("fp32"), "long", 20, 1, "openvino fp32")  # up to seq 211
    fuzz_clean(context, worker("bf16"), "long", 20, 2, "openvino bf16")  # up to seq 569
    # The planted top-left causal must be caught on a decode step and shrunk; the adapter as it is passes the
    # shrunk case.
    fuzz_named_failure(context, worker("fp32", "--plant-bug", "top-left-causal"), "short", 100, 1,
                       "openvino fp32 planted top-left-causal", "decode/out", control=worker("fp32"))


GROUPS = {"openvino": goldens, "openvino-fuzz": fuzz}


def main():
    group, attncheck_cli, work_dir, golden_dir = sys.argv[1:5]
    sys.modules.setdefault("openvino_telemetry", None)  # as the adapter: no telemetry process forked
    import openvino

    os.makedirs(work_dir, exist_ok=True)
    print(f"openvino {openvino.__version__}, attncheck's python package {attncheck.__version__}")
    # Adapter runs and workers forked from one process with torch (the float64 layer) imported
    # (peers/preforked.py; OpenVINO is imported after the fork: it starts a thread at import).
    with fork_server(["torch", "h5py", "attncheck.adapters.operator_layer", "attncheck.adapters.openvino_attention"]):
        GROUPS[group](Context(attncheck_cli, work_dir, golden_dir))
    return report()


if __name__ == "__main__":
    sys.exit(main())
