#!/usr/bin/env python3
"""ctest peer.onnx_gqa*: ONNX Runtime's contrib operator com.microsoft.GroupQueryAttention on its CPU execution
provider, judged by attncheck through attncheck.adapters.onnx_group_query_attention (float32, float16), each
verdict fixed in advance: passes, refusals by name (latent attention, head_dim not a multiple of 8, a query
that sees no key, the precisions the CPU kernel lacks), the planted bug caught, and the finding (NaN for a
fully masked query) as a named failure with its plain-ORT reproduction in peers/repro/. Fixed goldens, fixed
fuzz seeds and case counts, never a time budget.

    onnx_gqa_test.py GROUP ATTNCHECK WORK_DIR GOLDEN_DIR
    GROUP: onnx-gqa | onnx-gqa-fuzz
"""
import os
import sys

import attncheck  # python/ of this tree (PYTHONPATH from ctest)
from peer_checks import (Context, candidate_path, expect, failed_tensors, fork_server, fuzz_clean, fuzz_named_failure,
                         judged, ladder, ladder_expectation, refused_run, repro_script, report, run, summary)

MODULE = "attncheck.adapters.onnx_group_query_attention"
GQA = [sys.executable, "-m", MODULE]
NO_BACKWARD = "has no gradient"

# Every committed golden the operator can express (all in one process: about 30 s with their judging), but the
# three widest (GPT-NeoX-20B, GPT-J 6B, Qwen3-32B: peers/operators_test.py's MODELS says why).
FP32_GOLDENS = ["gemma-2-2b_layer0_tp2", "gemma-2-2b_layer1_tp8", "gemma-2-narrow_layer0_tp2_seq4160",
                "gemma-3-270m_tp1", "gemma-3-270m_tp2_seq2048", "gemma-3-270m_tp4", "gemma-3-4b_layer5_tp2",
                "gpt-oss-20b_layer0_tp16_seq160", "gpt-oss-20b_layer1_tp2", "granite-3.3-8b_tp2",
                "ladder_01_plain-mha", "ladder_02_gqa", "ladder_03_explicit-head-dim", "ladder_04_position-ids",
                "ladder_05_partial-rope", "ladder_06_partial-rope-interleaved", "ladder_07_qk-norm",
                "ladder_08_biases", "ladder_09_key-padding", "ladder_10_sliding-window", "ladder_11_softcap",
                "ladder_12_sinks", "ladder_13_kv-cache-decode", "ladder_14_tp2-rank-gradients", "llama-3.1-8b_tp2",
                "narrow_biases_tp2_seq4096", "narrow_bidirectional_seq4096", "olmo-2-7b_tp4", "phi-4-mini_tp2",
                "phi-4-mini_tp2_short", "pythia-410m_tp2_seq2048", "qwen3-0.6b_tp1", "qwen3-0.6b_tp2",
                "qwen3-0.6b_tp2_seq1024", "qwen3-0.6b_tp4", "qwen3-4b_tp2",
                "small_longrope_switch", "small_softcap_padding", "small_width_norm_replicated_kv",
                "small_yarn_mscale", "small_yarn_stated", "smollm3-3b_layer3_tp2"]
# float16: the yardstick of a model-shaped golden is computed at compare time (seconds to minutes here), so
# the rungs of each mapped feature, two small goldens (padding, softcap and decoding together; multi-token
# decode steps at batch 2) and two long ones whose yardsticks are stored.
FP16_GOLDENS = ["ladder_02_gqa", "ladder_09_key-padding", "ladder_10_sliding-window", "ladder_11_softcap",
                "ladder_12_sinks", "ladder_13_kv-cache-decode", "small_softcap_padding", "small_yarn_stated",
                "gpt-oss-20b_layer0_tp16_seq160", "narrow_bidirectional_seq4096"]
REFUSED = [("ladder_15_latent-attention", "multi-head latent attention"),
           ("deepseek-v3-narrow_tp2", "multi-head latent attention"),
           ("small_megatron_equal_block", "head_dim 12"), ("small_cp_ulysses", "head_dim 4"),
           ("small_window_masked_rows", "a query that sees no key")]

# The finding with the refusal lifted: the operator's own answer for small_window_masked_rows (key lengths
# 9, 4, 0 under a window of 3; 12 queries see no key) in float16 is NaN where SCHEMA's is 0.
LIFTED = """
import sys
from attncheck.adapters import onnx_group_query_attention as gqa, operator_layer, torch_layer
operator = gqa.OnnxGroupQueryAttention(sys.argv[1])
operator.unsupported_reasons = lambda case: []
torch_layer.adapt(sys.argv[2], sys.argv[3], operator_layer.OperatorKernel(operator, sys.argv[1]), sys.argv[1],
                  log=None, layer_precision="fp64")
"""


def lifted_refusal(context, dtype, name, tensors):
    golden, out_dir = context.golden(name), context.out_dir(f"gqa {dtype} refusal lifted")
    candidate = candidate_path(out_dir, name)
    result = run([sys.executable, "-c", LIFTED, dtype, golden, candidate])
    status, report_json = context.compare(golden, candidate)
    statuses = sorted({tensor["status"] for tensor in (report_json or {}).get("tensors", [])
                       if tensor["name"] in tensors})
    ok = expect(result.returncode == 0 and status == 1 and failed_tensors(report_json) == sorted(tensors)
                and statuses == ["non_finite"],
                f"finding: gqa {dtype} {name} with its refusal lifted fails exactly {sorted(tensors)}, non-finite "
                f"(exit {status}, failed {failed_tensors(report_json)}, {statuses})")
    summary.append((f"gqa {dtype}", f"{name}, refusal lifted", "named failure: NaN for queries seeing no key"
                    if ok else "UNEXPECTED"))


def gqa_goldens(context):
    for dtype, goldens in (("fp32", FP32_GOLDENS), ("fp16", FP16_GOLDENS)):
        judged(context, GQA, ["--dtype", dtype], f"gqa {dtype}", goldens, refused=REFUSED, declined=NO_BACKWARD)
    # The conformance ladder: every rung but TP-2's per-rank gradients and latent attention.
    rungs = [f"{rung:02d}" for rung in range(1, 14)]
    for dtype in ("fp32", "fp16"):
        expected = ladder_expectation(rungs, "pass_with_declined", {"14": "tensor-parallel", "15": "latent"})
        ladder(context, gqa_worker(dtype), expected, f"gqa {dtype}")
    # The CPU provider registers the kernel for float and float16 only: --dtype offers no other.
    for dtype in ("bf16", "fp64"):
        refused_run(GQA, ["--dtype", dtype], context.golden("ladder_01_plain-mha"), f"invalid choice: '{dtype}'",
                    f"gqa {dtype} refused by the argument parser")
    # local_window_size one larger than the window: one key more on the left, out fails on the window rung.
    judged(context, GQA, ["--dtype", "fp32", "--plant-bug", "window-off-by-one"], "gqa fp32 planted window-off-by-one",
           [], failing={"ladder_10_sliding-window": ["out"]})
    lifted_refusal(context, "fp16", "small_window_masked_rows", ["decode/out", "out"])
    repro_script("ort_gqa_masked_row_nan.py", "gqa")


def gqa_worker(dtype, *flags):
    return [sys.executable, "-m", MODULE, "--worker", "--dtype", dtype, *flags]


def gqa_fuzz(context):
    fuzz_clean(context, gqa_worker("fp32"), "short", 60, 1, "gqa fp32")
    fuzz_clean(context, gqa_worker("fp16"), "short", 50, 2, "gqa fp16")
    fuzz_named_failure(context, gqa_worker("fp32", "--plant-bug", "window-off-by-one"), "short", 60, 1,
                       "gqa fp32 planted window-off-by-one", "out", control=gqa_worker("fp32"))


GROUPS = {"onnx-gqa": gqa_goldens, "onnx-gqa-fuzz": gqa_fuzz}


def main():
    group, attncheck_cli, work_dir, golden_dir = sys.argv[1:5]
    import onnx
    import onnxruntime

    os.makedirs(work_dir, exist_ok=True)
    print(f"onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}, attncheck's python package "
          f"{attncheck.__version__}")
    # Adapter runs and workers forked from one process with torch (the float64 layer) imported
    # (peers/preforked.py; ONNX Runtime is imported after the fork: it starts a thread at import).
    with fork_server(["torch", "h5py", "attncheck.adapters.operator_layer", MODULE]):
        GROUPS[group](Context(attncheck_cli, work_dir, golden_dir))
    return report()


if __name__ == "__main__":
    sys.exit(main())
