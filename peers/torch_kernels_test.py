#!/usr/bin/env python3
"""ctest peer.torch_*: PyTorch's own CPU attention kernels, scaled_dot_product_attention (flash backend) and
FlexAttention (eager and compiled), judged by attncheck through attncheck.adapters.torch_sdpa and
attncheck.adapters.torch_flex, each verdict fixed in advance: passes, declines and refusals by name, and
the findings as named failures (each also reduced to a plain-PyTorch script in peers/repro/). Fixed
goldens, fixed fuzz seeds and case counts, never a time budget.

    torch_kernels_test.py GROUP ATTNCHECK WORK_DIR GOLDEN_DIR
    GROUP: sdpa | sdpa-fuzz | flex-eager | flex-eager-fuzz | flex-compiled | flex-compiled-fuzz

The fp64 runs (--dtype fp64) hold the wrapper around each kernel (projections, QK-norm, RoPE, masks, KV
cache) to the fp64 tolerance on the committed goldens: what fails below fp64 then fails in the kernel. The
summary printed last (peer, dtype: goldens passed, worst error in ulps, fuzz cases) is what docs/FRAMEWORKS.md's table
is read from.
"""
import json
import os
import re
import subprocess
import sys
import time

import attncheck  # python/ of this tree (PYTHONPATH from ctest)

SDPA = [sys.executable, "-m", "attncheck.adapters.torch_sdpa"]
FLEX = [sys.executable, "-m", "attncheck.adapters.torch_flex"]
REPRO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repro")

failures = []
summary = []  # (peer, what, verdict) rows for docs/FRAMEWORKS.md's table


def expect(condition, message):
    print(("ok    " if condition else "FAIL  ") + message, flush=True)
    if not condition:
        failures.append(message)
    return condition


def run(command, **options):
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, **options)
    result.seconds = time.time() - started
    return result


def last_lines(text, count=12):
    return "\n".join(text.strip().splitlines()[-count:])


# ---------------------------------------------------------------------------------------------
# Goldens through an adapter, then `attncheck compare`

class Context:
    def __init__(self, attncheck_cli, work_dir, golden_dir):
        self.cli, self.work_dir, self.golden_dir = attncheck_cli, work_dir, golden_dir

    def golden(self, name):
        return os.path.join(self.golden_dir, name + ".h5")

    def out_dir(self, label):
        path = os.path.join(self.work_dir, label.replace(" ", "_"))
        os.makedirs(path, exist_ok=True)
        return path

    def compare(self, golden, candidate):
        """(exit status, parsed --json report or None)."""
        result = run([self.cli, "compare", "--json", golden, candidate])
        try:
            return result.returncode, json.loads(result.stdout)
        except json.JSONDecodeError:
            print(last_lines(result.stdout + result.stderr))
            return result.returncode, None


def candidate_path(out_dir, golden):
    return os.path.join(out_dir, os.path.basename(golden).removesuffix(".h5") + ".candidate.h5")


def failed_tensors(report):
    return sorted(tensor["name"] for tensor in (report or {}).get("tensors", [])
                  if tensor["status"] not in ("ok", "declined"))


def declined_tensors(report):
    return sorted(tensor["name"] for tensor in (report or {}).get("tensors", []) if tensor["status"] == "declined")


def worst_ulps(report):
    return max((tensor["error_ulps"] for tensor in (report or {}).get("tensors", []) if tensor["status"] == "ok"),
               default=float("nan"))


def run_adapter(context, adapter, flags, names, label):
    """One adapter process over the goldens `names`; returns (result, out_dir)."""
    out_dir = context.out_dir(label)
    result = run([*adapter, *flags, *[context.golden(name) for name in names], "--output-dir", out_dir])
    return result, out_dir


def judged(context, adapter, flags, label, passing, refused=(), failing=None, failing_within=None, declined=None):
    """Runs the adapter on passing + refused + failing goldens in one process and checks every verdict:
    passing goldens pass `attncheck compare`; refused ones are answered with exit 2 naming the reason
    (refused: [(name, reason)]) and leave no candidate; failing ones ({name: [tensor, ...]}) fail exactly
    those tensors; failing_within ones ({name: [tensor, ...]}) fail, on some of those tensors and no other
    (for a defect whose reach depends on memory the kernel should not read). declined: a reason every
    passing candidate must decline its gradients with."""
    failing, failing_within = failing or {}, failing_within or {}
    names = list(passing) + [name for name, _ in refused] + list(failing) + list(failing_within)
    result, out_dir = run_adapter(context, adapter, flags, names, label)
    expect(result.returncode == (2 if refused else 0),
           f"{label}: adapter over {len(names)} goldens in {result.seconds:.0f} s, exit {result.returncode} "
           f"(want {2 if refused else 0})")
    if "Traceback" in result.stderr:
        print(last_lines(result.stderr, 30))
    worst = []
    for name in passing:
        status, report = context.compare(context.golden(name), candidate_path(out_dir, name))
        ok = status == 0 and report is not None and report.get("passed")
        if declined:
            ok &= bool(declined_tensors(report)) and all(
                declined in tensor["declined_reason"] for tensor in report["tensors"] if tensor["status"] == "declined")
        worst.append(worst_ulps(report))
        expect(ok, f"{label}: {name} passes (worst {worst[-1]:.3g} ulps; {len(declined_tensors(report))} declined; "
                   f"failed {failed_tensors(report)})")
    for name, reason in refused:
        line = [text for text in result.stderr.splitlines() if name in text]
        expect(bool(line) and reason in line[0] and not os.path.exists(candidate_path(out_dir, name)),
               f"{label}: {name} refused naming '{reason}': {line[0][-160:] if line else 'no message'}")
    for name, tensors in failing.items():
        status, report = context.compare(context.golden(name), candidate_path(out_dir, name))
        expect(status == 1 and failed_tensors(report) == sorted(tensors),
               f"{label}: {name} fails exactly {sorted(tensors)} (exit {status}, failed {failed_tensors(report)})")
    for name, tensors in failing_within.items():
        status, report = context.compare(context.golden(name), candidate_path(out_dir, name))
        failed = failed_tensors(report)
        expect(status == 1 and failed and set(failed) <= set(tensors),
               f"{label}: {name} fails, within {sorted(tensors)} (exit {status}, failed {failed})")
    summary.append((label, f"{len(passing)} goldens pass", f"worst {max(worst, default=float('nan')):.3g} ulps; "
                    f"{len(refused)} refused; {len(failing) + len(failing_within)} named failures"))
    return out_dir


def refused_run(adapter, flags, golden, reason, label):
    result = run([*adapter, *flags, golden, "-o", os.path.join(os.path.dirname(golden), "never.h5")])
    expect(result.returncode == 2 and reason in result.stderr and "Traceback" not in result.stderr,
           f"{label}: exit {result.returncode} (want 2), message: {last_lines(result.stderr, 1)[-200:]}")


# ---------------------------------------------------------------------------------------------
# Fuzzing through the worker protocol

FUZZ_LINE = re.compile(r"^fuzz .*: (\d+) cases \((\d+) unsupported\) in ", re.M)
FAIL_LINE = re.compile(r"^FAIL matches-reference: (\S+) (\S+)", re.M)
REPRO_LINE = re.compile(r"^\s*repro: (\S+)", re.M)
LARGEST_SEQ = re.compile(r"largest: .*?seq (\d+)")


def fuzz(context, worker, profile, cases, seed, label):
    """(exit status, cases run, unsupported, first failing tensor or None, repro path or None, text)."""
    repro_dir = context.out_dir(f"repro_{label}")
    result = run([context.cli, "fuzz", "--impl", "exec:" + " ".join(worker), "--profile", profile,
                  "--cases", str(cases), "--seed", str(seed), "--repro-dir", repro_dir])
    text = result.stdout + result.stderr
    counts = FUZZ_LINE.findall(text)
    done, unsupported = (int(counts[-1][0]), int(counts[-1][1])) if counts else (0, 0)
    failed = FAIL_LINE.search(text)
    repro = REPRO_LINE.search(text)
    print(f"      {label}: {result.seconds:.0f} s")
    return result.returncode, done, unsupported, failed.group(1) if failed else None, \
        repro.group(1) if repro else None, text


def fuzz_clean(context, worker, profile, cases, seed, label):
    status, done, unsupported, failed, _, text = fuzz(context, worker, profile, cases, seed, label)
    largest = max((int(seq) for seq in LARGEST_SEQ.findall(text)), default=0)
    ok = expect(status == 0 and done == cases,
                f"{label}: fuzz {profile} seed {seed}: {done} of {cases} cases (the largest case: seq {largest}), "
                f"{unsupported} unsupported, exit {status} (want 0)"
                f"{'' if failed is None else ', first failure ' + failed}")
    if not ok:
        print(last_lines(text, 20))
    summary.append((label, f"fuzz {profile} seed {seed}", f"{cases} cases clean ({cases - unsupported} judged, "
                    f"{unsupported} unsupported; the largest case: seq {largest})" if ok else "FAILED"))


def fuzz_named_failure(context, worker, profile, cases, seed, label, tensor_prefix, control=None):
    """The fuzz run must fail on a tensor starting with tensor_prefix; control (a worker command) must then
    pass the shrunk repro, which tells the kernel's finding from the wrapper's."""
    status, done, _, failed, repro, text = fuzz(context, worker, profile, cases, seed, label)
    ok = expect(status == 1 and failed is not None and failed.startswith(tensor_prefix) and repro,
                f"{label}: fuzz {profile} seed {seed} fails on {failed} (want {tensor_prefix}...), exit {status}")
    if not ok:
        print(last_lines(text, 20))
    if control and repro:
        replay = run([context.cli, "replay", repro, "--impl", "exec:" + " ".join(control)])
        expect(replay.returncode == 0, f"{label}: the shrunk case passes with the control "
                                       f"{' '.join(control[3:])} (exit {replay.returncode})")
    summary.append((label, f"fuzz {profile} seed {seed}", f"named failure on {failed}" if ok else "UNEXPECTED"))


def repro_script(name, label):
    """A plain-PyTorch reproduction in peers/repro/ must still show its defect (exit 1, 'DEFECT')."""
    result = run([sys.executable, os.path.join(REPRO_DIR, name)])
    expect(result.returncode == 1 and "DEFECT" in result.stdout,
           f"{label}: peers/repro/{name} still reproduces (exit {result.returncode}): "
           f"{last_lines(result.stdout, 1)}")
    print("      " + "\n      ".join(result.stdout.strip().splitlines()))


def repro_not_reproduced(name, label, capability):
    """A repro whose defect lives in one CPU's kernels, run on another: it must say so (exit 0, "not
    reproduced" naming this CPU's capability), not pass silently or fail for another reason."""
    result = run([sys.executable, os.path.join(REPRO_DIR, name)])
    expect(result.returncode == 0 and "not reproduced" in result.stdout and capability in result.stdout,
           f"{label}: peers/repro/{name} on a {capability} CPU reports its defect not reproduced "
           f"(exit {result.returncode}): {last_lines(result.stdout, 1)}")
    print("      " + "\n      ".join(result.stdout.strip().splitlines()))


# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention

# Every committed golden SDPA can express, but the three widest (32B, NeoX-20B, 4B: same features, minutes
# of yardstick in bf16), covering each feature the wrapper has: QK-norm of each kind, RoPE scalings, partial
# and interleaved RoPE, NoPE, windows, padding, queries without keys, decoding with multi-token steps.
SDPA_GOLDENS = ["qwen3-0.6b_tp1", "gemma-3-270m_tp1", "gemma-3-4b_layer5_tp2", "gpt-j-6b_tp2", "granite-3.3-8b_tp2",
                "llama-3.1-8b_tp2", "olmo-2-7b_tp4", "phi-4-mini_tp2", "phi-4-mini_tp2_short", "smollm3-3b_layer3_tp2",
                "small_window_masked_rows", "small_width_norm_replicated_kv", "small_yarn_stated", "small_yarn_mscale",
                "small_longrope_switch", "small_megatron_equal_block", "qwen3-0.6b_tp2_seq1024",
                "gemma-3-270m_tp2_seq2048", "pythia-410m_tp2_seq2048"]
# Below fp64 the kernel's call is the same whatever the layer around it, so fewer goldens: the small ones,
# two model-shaped, the long ones (stored yardsticks). bf16: one long golden (bf16 GEMMs take 30 s on it
# on a CPU without bf16 instructions).
SDPA_FP32_GOLDENS = ["qwen3-0.6b_tp1", "gemma-3-270m_tp1", "small_window_masked_rows", "small_width_norm_replicated_kv",
                     "small_yarn_stated", "small_yarn_mscale", "small_longrope_switch", "small_megatron_equal_block",
                     "qwen3-0.6b_tp2_seq1024", "gemma-3-270m_tp2_seq2048", "pythia-410m_tp2_seq2048"]
SDPA_BF16_GOLDENS = SDPA_FP32_GOLDENS[:-2]
SDPA_REFUSED = [("small_softcap_padding", "softcap"), ("gemma-2-2b_layer0_tp2", "softcap"),
                ("gpt-oss-20b_layer1_tp2", "attention sinks")]


def sdpa_goldens(context):
    for dtype, goldens in (("fp64", SDPA_GOLDENS), ("fp32", SDPA_FP32_GOLDENS), ("bf16", SDPA_BF16_GOLDENS)):
        judged(context, SDPA, ["--dtype", dtype], f"sdpa {dtype}", goldens, refused=SDPA_REFUSED)
    # is_causal is aligned top-left: a caller who passes it for a decode step of several tokens (the
    # 1000 + 1 + 16 + 7 schedule) attends to the wrong keys there, and nowhere else.
    judged(context, SDPA, ["--dtype", "fp32", "--plant-bug", "top-left-causal"], "sdpa fp32 planted top-left-causal",
           [], failing={"qwen3-0.6b_tp2_seq1024": ["decode/out#sketch"]})


def sdpa_worker(dtype, *flags):
    return [sys.executable, "-m", "attncheck.adapters.torch_sdpa", "--worker", "--dtype", dtype, *flags]


def sdpa_fuzz(context):
    fuzz_clean(context, sdpa_worker("bf16"), "short", 300, 1, "sdpa bf16")
    fuzz_clean(context, sdpa_worker("bf16"), "long", 60, 1, "sdpa bf16")  # up to seq 2377: many tiles
    # fp32: the flash backward is beyond the fp32 yardstick on large scores (heavy-tailed and outlier
    # activations); the math backend, under the same wrapper, passes the same cases. Long profile: its
    # backward recomputes the scores otherwise than its forward (peers/repro/
    # sdpa_cpu_flash_backward_scale_mismatch.py); short profile at head_dim 16, where the two agree: its
    # probabilities recomputed from the fp32 log-sum-exp, which the fp32 yardstick does not model.
    fuzz_named_failure(context, sdpa_worker("fp32"), "short", 300, 1, "sdpa fp32", "grads/",
                       control=sdpa_worker("fp32", "--backend", "math"))
    fuzz_named_failure(context, sdpa_worker("fp32"), "long", 50, 2, "sdpa fp32", "grads/",
                       control=sdpa_worker("fp32", "--backend", "math"))
    fuzz_clean(context, sdpa_worker("fp32", "--backend", "math"), "long", 50, 1, "sdpa fp32 math backend (control)")
    repro_script("sdpa_cpu_flash_backward_scale_mismatch.py", "sdpa fp32")
    # The planted top-left is_causal must be caught and shrunk to a multi-token decode step.
    fuzz_named_failure(context, sdpa_worker("bf16", "--plant-bug", "top-left-causal"), "short", 100, 1,
                       "sdpa bf16 planted top-left-causal", "decode/out")


# ---------------------------------------------------------------------------------------------
# FlexAttention

FLEX_GOLDENS = ["qwen3-0.6b_tp1", "gemma-3-270m_tp1", "gemma-2-2b_layer0_tp2", "gpt-oss-20b_layer1_tp2",
                "gpt-oss-20b_layer0_tp16_seq160", "olmo-2-7b_tp4", "phi-4-mini_tp2", "gpt-j-6b_tp2",
                "small_softcap_padding", "small_window_masked_rows", "small_width_norm_replicated_kv",
                "small_yarn_stated", "small_yarn_mscale", "small_longrope_switch", "small_megatron_equal_block",
                "qwen3-0.6b_tp2_seq1024", "pythia-410m_tp2_seq2048"]
FLEX_BF16_GOLDENS = ["qwen3-0.6b_tp1", "gemma-3-270m_tp1", "gpt-oss-20b_layer0_tp16_seq160", "small_softcap_padding",
                     "small_window_masked_rows", "small_width_norm_replicated_kv", "small_yarn_stated",
                     "small_yarn_mscale", "small_longrope_switch", "small_megatron_equal_block",
                     "qwen3-0.6b_tp2_seq1024"]
NO_BACKWARD = "FlexAttention has no backward on the CPU"


def flex_lse_is_natural_log():
    """The sink formula out · sigmoid(lse − s) needs flex's lse to be the natural log-sum-exp of the scaled
    scores (its kernels work in base 2 internally): checked in float64 against torch.logsumexp."""
    import warnings

    import torch
    from torch.nn.attention.flex_attention import AuxRequest, flex_attention

    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")  # eager on purpose
    torch.manual_seed(0)
    query, key, value = (torch.randn(2, 4, 7, 16, dtype=torch.float64) for _ in range(3))
    _, aux = flex_attention(query, key, value, scale=0.3, return_aux=AuxRequest(lse=True))
    expected = torch.logsumexp(query @ key.transpose(-1, -2) * 0.3, dim=-1)
    difference = (aux.lse - expected).abs().max().item()
    expect(difference < 1e-13, f"flex lse is the natural log-sum-exp of the scaled scores (float64: {difference:.2g})")


def flex_eager(context):
    flex_lse_is_natural_log()
    for dtype, goldens in (("fp64", FLEX_GOLDENS), ("fp32", FLEX_GOLDENS), ("bf16", FLEX_BF16_GOLDENS)):
        judged(context, FLEX, ["--dtype", dtype], f"flex eager {dtype}", goldens, declined=NO_BACKWARD)
    # The softcap on the unscaled score, scaled after: out and the decode rows fail.
    judged(context, FLEX, ["--dtype", "fp32", "--plant-bug", "softcap-before-scale"],
           "flex eager fp32 planted softcap-before-scale", [],
           failing={"small_softcap_padding": ["decode/out", "out"]})
    # Finding: a softcap captured as a Python float crashes flex_attention at the second value in a process
    # (Gemma 2's 50.0, then small_softcap_padding's); the adapter captures a tensor unless told not to.
    result, out_dir = run_adapter(context, FLEX, ["--dtype", "fp32", "--softcap-as-float"],
                                  ["gemma-2-2b_layer0_tp2", "small_softcap_padding"], "flex eager softcap as float")
    expect(result.returncode != 0 and "SymFloat" in result.stderr
           and os.path.exists(candidate_path(out_dir, "gemma-2-2b_layer0_tp2"))
           and not os.path.exists(candidate_path(out_dir, "small_softcap_padding")),
           f"finding: a softcap captured as a float: the first golden runs, the second crashes flex_attention "
           f"(exit {result.returncode}, SymFloat named: {'SymFloat' in result.stderr})")
    repro_script("flex_score_mod_float_capture.py", "flex eager")


def flex_worker(dtype, *flags):
    return [sys.executable, "-m", "attncheck.adapters.torch_flex", "--worker", "--dtype", dtype, *flags]


def flex_eager_fuzz(context):
    for dtype in ("fp32", "bf16"):
        fuzz_clean(context, flex_worker(dtype), "short", 100, 1, f"flex eager {dtype}")
    # The mask_mod's query index not offset by the cache: decode steps aligned top-left, caught and shrunk.
    fuzz_named_failure(context, flex_worker("fp32", "--plant-bug", "decode-without-offset"), "short", 100, 1,
                       "flex eager fp32 planted decode-without-offset", "decode/out")


def flex_compiled(context):
    """Every shape compiles its own kernel (about 6 s cold on the 2-core machine; each decode step is a shape),
    so a few goldens: a pass with softcap, padding and decoding, and the finding."""
    compiled = ["--mode", "compiled"]
    # Finding: key lengths of 16 j + 8 with head_dim 8 or 16 compute wrong rows (peers/repro/
    # flex_compiled_cpu_short_kv_block.py); small_yarn_stated (seq 8, head_dim 16, decoding 4 + 2 + 2) is
    # such a golden, and eager flex passes it (peer.torch_flex_eager).
    # Which of out and decode/out fails depends on what lies past the tensors the kernel over-reads; decode/out
    # failed in every run measured (12), out in most; the repro below is the deterministic form.
    # The defect is in the AVX2 kernels torch picks on an AVX2 CPU: on an AVX512 one (measured 2026-12-05, the
    # same torch 2.15.0) both flex dtypes pass small_yarn_stated and the repro reports "not reproduced". Which
    # applies is the CPU's instruction set as torch reports it, never its speed; both outcomes are asserted.
    import torch

    avx2 = torch.backends.cpu.get_cpu_capability() == "AVX2"
    short_kv = {"failing_within": {"small_yarn_stated": ["decode/out", "out"]}} if avx2 else {}
    passing = ["small_softcap_padding"] + ([] if avx2 else ["small_yarn_stated"])
    judged(context, FLEX, ["--dtype", "fp32", *compiled], "flex compiled fp32", passing,
           refused=[("gpt-oss-20b_layer1_tp2", "return_lse")], declined=NO_BACKWARD, **short_kv)
    judged(context, FLEX, ["--dtype", "bf16", *compiled], "flex compiled bf16", passing, declined=NO_BACKWARD,
           **short_kv)
    refused_run(FLEX, ["--dtype", "fp64", *compiled], context.golden("small_softcap_padding"), "float64",
                "flex compiled fp64 refused")
    if avx2:
        repro_script("flex_compiled_cpu_short_kv_block.py", "flex compiled")
    else:
        repro_not_reproduced("flex_compiled_cpu_short_kv_block.py", "flex compiled",
                             torch.backends.cpu.get_cpu_capability())
    repro_script("flex_compiled_dynamic_mask_tensor.py", "flex compiled")


def flex_compiled_fuzz(context):
    compiled = ["--mode", "compiled"]
    fuzz_clean(context, flex_worker("fp32", *compiled), "short", 5, 1, "flex compiled fp32")
    fuzz_clean(context, flex_worker("bf16", *compiled), "short", 3, 1, "flex compiled bf16")


GROUPS = {"sdpa": sdpa_goldens, "sdpa-fuzz": sdpa_fuzz, "flex-eager": flex_eager, "flex-eager-fuzz": flex_eager_fuzz,
          "flex-compiled": flex_compiled, "flex-compiled-fuzz": flex_compiled_fuzz}


def main():
    group, attncheck_cli, work_dir, golden_dir = sys.argv[1:5]
    import torch

    os.makedirs(work_dir, exist_ok=True)
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), attncheck's python package "
          f"{attncheck.__version__}")
    GROUPS[group](Context(attncheck_cli, work_dir, golden_dir))
    print("peer | check | verdict")
    for row in summary:
        print(" | ".join(row))
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
