#!/usr/bin/env python3
"""ctest peer.megatron_core: Megatron-Core's own SelfAttention, run on the CPU in float64
with one gloo process per TP rank by attncheck.adapters.megatron_core, must pass `attncheck compare`
on the committed Qwen3 and Pythia goldens and small_megatron_equal_block (a golden written under Megatron's
equal-block convention at TP 4 over 2 KV heads) (TP 1, 2, 4 in one pool of 4 processes; TP 16 in a pool of
16, per-rank gradients judged under Megatron's equal-block convention); the planted bug (QK-norm
gradients not all-reduced) must fail exactly the ranks' q_norm/k_norm gradients; goldens Megatron
cannot express must be refused with exit code 2 and the reason (context-parallel layouts among them:
Megatron runs CP attention only in TransformerEngine, on CUDA); Megatron's own split of a batch over CP
ranks (get_batch_on_this_cp_rank, under gloo) must give each CP rank the tokens attncheck's layout gives
it; and the Hugging Face <-> Megatron fused-QKV conversion must round-trip, whole and per rank.

    megatron_core_test.py ATTNCHECK WORK_DIR GOLDEN_DIR
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

import attncheck  # python/ of this tree (PYTHONPATH from ctest)
from attncheck.adapters import megatron_core  # for its converters; imports no Megatron at module level
from peer_checks import expect, failures, fork_server, launch

ADAPTER = ["-m", "attncheck.adapters.megatron_core"]


def run(command):
    return subprocess.run(command, capture_output=True, text=True)


def adapter(goldens, work_dir, *flags):
    started = time.time()
    result = run(launch([sys.executable, *ADAPTER, *goldens, "--output-dir", work_dir, *flags]))
    return result, time.time() - started


def compare(attncheck_cli, golden, candidate):
    """(exit status, parsed --json report or None, text)"""
    result = run([attncheck_cli, "compare", "--json", golden, candidate])
    try:
        return result.returncode, json.loads(result.stdout), result.stdout + result.stderr
    except json.JSONDecodeError:
        return result.returncode, None, result.stdout + result.stderr


def candidate_path(work_dir, golden):
    return os.path.join(work_dir, os.path.basename(golden).removesuffix(".h5") + ".candidate.h5")


# ---------------------------------------------------------------------------------------------
# (1) the fused-QKV conversion

def geometry(heads, kv_heads, head_dim, hidden=3):
    return {"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim}


def conversion():
    rng = np.random.default_rng(0)
    # (H_q, H_kv, head_dim, TP sizes): GQA with P <= H_kv and P > H_kv (blocks cut inside a group),
    # MHA, MQA, and the committed 32B's 64/8 at TP 16.
    cases = [(16, 8, 4, [1, 2, 4, 8, 16]), (64, 8, 2, [16]), (4, 1, 4, [1, 2]), (6, 3, 2, [1, 3]),
             (8, 8, 2, [2, 4]), (12, 4, 2, [2, 4]), (16, 4, 2, [8, 16])]
    for heads, kv_heads, head_dim, tp_sizes in cases:
        shapes = geometry(heads, kv_heads, head_dim)
        for bias in (False, True):
            tail = () if bias else (3,)
            q = rng.standard_normal((heads * head_dim,) + tail)
            k = rng.standard_normal((kv_heads * head_dim,) + tail)
            v = rng.standard_normal((kv_heads * head_dim,) + tail)
            fused = megatron_core.hf_to_fused(q, k, v, shapes)
            back = megatron_core.fused_to_hf(fused, shapes)
            ok = all(np.array_equal(a, b) for a, b in zip((q, k, v), back))
            # Megatron's grouped layout: group 0 starts with its query heads' rows, then key head 0, value head 0.
            per_group = heads // kv_heads * head_dim
            ok &= np.array_equal(fused[:per_group], q[:per_group]) and \
                np.array_equal(fused[per_group:per_group + head_dim], k[:head_dim]) and \
                np.array_equal(fused[per_group + head_dim:per_group + 2 * head_dim], v[:head_dim])
            for tp_size in tp_sizes:
                block = len(fused) // tp_size
                weights = {"q_proj": q, "k_proj": k, "v_proj": v} if not bias else {"q_bias": q, "k_bias": k, "v_bias": v}
                for rank in range(tp_size):
                    # the pieces attncheck.sharding gives the rank under Megatron's convention
                    shard = attncheck.shard_weights(weights, dict(shapes, qkv_bias=int(bias)), tp_size,
                                                    "megatron-equal-block", rank)
                    pieces = [shard[name] for name in weights]
                    mine = megatron_core.hf_to_fused_block(*pieces, shapes, tp_size, rank)
                    ok &= np.array_equal(mine, fused[rank * block:(rank + 1) * block])
                    ok &= all(np.array_equal(a, b) for a, b in
                              zip(pieces, megatron_core.fused_block_to_hf(mine, shapes, tp_size, rank)))
                    held = attncheck.holdings(shapes, tp_size, "megatron-equal-block", rank)
                    ok &= all(megatron_core.block_rows(shapes, tp_size, rank)[2][f] == held[f] for f in "qkv")
            expect(ok, f"fused QKV {'bias' if bias else 'weight'} round trip, heads {heads}/{kv_heads}, head_dim "
                       f"{head_dim}, whole and per rank at TP {tp_sizes}")


# ---------------------------------------------------------------------------------------------
# (2), (3) agreement

def agreement(attncheck_cli, work_dir, goldens, ranks, label):
    result, seconds = adapter(goldens, work_dir, "--ranks", str(ranks))
    expect(result.returncode == 0, f"{label}: adapter wrote candidates for {len(goldens)} goldens with {ranks} "
                                   f"processes in {seconds:.0f} s (exit {result.returncode})")
    if result.returncode != 0:
        print(result.stdout + result.stderr[-4000:])
    for golden in goldens:
        candidate = candidate_path(work_dir, golden)
        if not os.path.exists(candidate):
            expect(False, f"{candidate} exists")
            continue
        status, report, text = compare(attncheck_cli, golden, candidate)
        passed = status == 0 and report is not None and report.get("passed")
        worst = max((tensor["error_ulps"] for tensor in report["tensors"]), default=0.0) if report else float("nan")
        ranks_checked = report.get("rank_gradients_compared") if report else None
        expect(passed, f"Megatron-Core agrees with the reference on {os.path.basename(golden)} "
                       f"(worst {worst:.3g} ulps; per-rank gradients compared: {ranks_checked}; "
                       f"candidate convention {report.get('tp_convention') if report else '?'})")
        if not passed:
            print(text[-6000:])
        os.remove(candidate)


# ---------------------------------------------------------------------------------------------
# (4) the planted bug

def planted_bug(attncheck_cli, work_dir, golden):
    result, seconds = adapter([golden], work_dir, "--ranks", "2", "--plant-bug", "skip-qk-norm-grad-allreduce")
    expect(result.returncode == 0, f"planted bug: adapter ran in {seconds:.0f} s (exit {result.returncode})")
    candidate = candidate_path(work_dir, golden)
    if not os.path.exists(candidate):
        print(result.stderr[-4000:])
        return
    status, report, text = compare(attncheck_cli, golden, candidate)
    failed = sorted(tensor["name"] for tensor in (report or {}).get("tensors", []) if tensor["status"] != "ok")
    want = sorted(f"{prefix}grads/{norm}" for prefix in ("", "ranks/0/", "ranks/1/") for norm in ("q_norm", "k_norm"))
    expect(status == 1 and failed == want,
           f"planted bug skip-qk-norm-grad-allreduce fails exactly {want} (exit {status}, failed {failed})")
    os.remove(candidate)


# ---------------------------------------------------------------------------------------------
# (5) what Megatron cannot express

def refused(work_dir, golden, reason):
    candidate = candidate_path(work_dir, golden)
    result, _ = adapter([golden], work_dir)
    expect(result.returncode == 2 and reason in result.stderr and "Traceback" not in result.stderr
           and not os.path.exists(candidate),
           f"{os.path.basename(golden)} refused: exit {result.returncode}, message: "
           f"{result.stderr.strip().splitlines()[-1][:220] if result.stderr.strip() else ''}")


# ---------------------------------------------------------------------------------------------
# (6) what attncheck finds in Megatron-Core, shown as named failures (docs/FRAMEWORKS.md gives the commands)

def failing_tensors(attncheck_cli, golden, candidate):
    status, report, _ = compare(attncheck_cli, golden, candidate)
    if os.path.exists(candidate):
        os.remove(candidate)  # a later refusal of the same golden checks that no candidate is written
    return status, sorted(tensor["name"] for tensor in (report or {}).get("tensors", []) if tensor["status"] != "ok")


def findings(attncheck_cli, work_dir, golden_dir):
    # Megatron's float32 RoPE table: at qwen3-0.6b_tp2's positions (up to 3.4e5) out itself fails.
    golden = os.path.join(golden_dir, "qwen3-0.6b_tp2.h5")
    result, _ = adapter([golden], work_dir, "--ranks", "2", "--megatron-rope-table")
    status, failed = failing_tensors(attncheck_cli, golden, candidate_path(work_dir, golden))
    expect(result.returncode == 0 and status == 1 and "out" in failed,
           f"finding: Megatron's float32 RoPE table fails {os.path.basename(golden)} (exit {status}, "
           f"{len(failed)} tensors fail, out among them)")
    # Megatron's local softmax replaces the padding mask by its window mask: with padding, out fails;
    # the same geometry without padding passes, so the padding is what it drops.
    for name, padding, should_pass in [("window_padding", ["--key-lengths", "8", "5"], False),
                                       ("window_no_padding", [], True)]:
        golden = os.path.join(work_dir, name + ".h5")
        made = run([attncheck_cli, "golden", "make", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                    "--head-dim", "16", "--qk-norm", "rms", "--sliding-window", "5", "--seq", "8", "--batch", "2",
                    "--tp", "2", *padding, "-o", golden])
        if made.returncode != 0:
            expect(False, f"golden make {name}: {made.stderr.strip()[-300:]}")
            continue
        if padding:
            refused(work_dir, golden, "padding")
        result, _ = adapter([golden], work_dir, "--ranks", "2", "--megatron-window-mask")
        status, failed = failing_tensors(attncheck_cli, golden, candidate_path(work_dir, golden))
        if should_pass:
            expect(result.returncode == 0 and status == 0, f"finding control: window without padding passes (exit {status})")
        else:
            expect(result.returncode == 0 and status == 1 and "out" in failed,
                   f"finding: window + padding under Megatron's own mask fails (exit {status}, failed {failed[:4]}...)")


# ---------------------------------------------------------------------------------------------
# (7) context parallelism where Megatron-Core runs it without a GPU: its split of a batch over CP ranks

def context_parallel_split(attncheck_cli):
    from attncheck.adapters import megatron_context_parallel as megatron_cp

    layouts = [(2, 12), (3, 12), (4, 8), (4, 24)]
    split = megatron_cp.megatron_split(layouts)
    for cp_size, seq in layouts:
        python_tokens = megatron_cp.attncheck_split(cp_size, seq)
        planned = run([attncheck_cli, "plan", "--hidden", "8", "--heads", "1", "--cp", str(cp_size), "--cp-scheme",
                       "ring", "--seq", str(seq), "--json"])
        ranks = json.loads(planned.stdout)["context_parallel"]["ranks"] if planned.returncode == 0 else []
        plan_tokens = [[token for begin, end in rank["tokens"] for token in range(begin, end)]
                       for rank in sorted(ranks, key=lambda rank: rank["cp_rank"])]
        expect(split[(cp_size, seq)] == python_tokens == plan_tokens,
               f"CP {cp_size}, seq {seq}: Megatron-Core's get_batch_on_this_cp_rank gives each CP rank the tokens "
               f"attncheck's layout gives it (Megatron {split[(cp_size, seq)]}, attncheck.sharding "
               f"{python_tokens}, plan {plan_tokens})")
    try:
        megatron_cp.megatron_split([(2, 10)])
        expect(False, "seq 10 at CP 2 refused (Megatron needs multiples of 2 x CP)")
    except attncheck.BadInput as error:
        expect("divisible by 2 x cp_size" in str(error), f"seq 10 at CP 2 refused by name: {error}")


def main():
    # The adapter's processes forked from one that imported torch and Megatron-Core once (peers/preforked.py);
    # each still starts its ranks' own fork server (attncheck.distributed).
    with fork_server(["torch", "torch.distributed", "h5py", "attncheck.adapters.megatron_imports"]):
        return checks(*sys.argv[1:4])


def checks(attncheck_cli, work_dir, golden_dir):
    os.makedirs(work_dir, exist_ok=True)

    def golden(name):
        return os.path.join(golden_dir, name + ".h5")

    conversion()
    for name, reason in [("gemma-3-270m_tp1", "rms-one-plus"), ("olmo-2-7b_tp4", "rms-full-width"),
                         ("small_softcap_padding", "softcap"),
                         ("small_window_masked_rows", "sees no key"),
                         ("small_cp_ulysses", "context-parallel layout (ulysses, cp_size 4"),
                         ("small_cp_ring_large_logits", "TEDotProductAttention")]:
        refused(work_dir, golden(name), reason)
    agreement(attncheck_cli, work_dir,
              [golden(name) for name in ("qwen3-0.6b_tp1", "qwen3-0.6b_tp2", "qwen3-0.6b_tp4", "qwen3-4b_tp2",
                                         "qwen3-0.6b_tp2_seq1024", "pythia-410m_tp2_seq2048",
                                         "small_megatron_equal_block")], 4, "TP 1, 2, 4")
    planted_bug(attncheck_cli, work_dir, golden("qwen3-0.6b_tp2"))
    findings(attncheck_cli, work_dir, golden_dir)
    context_parallel_split(attncheck_cli)
    agreement(attncheck_cli, work_dir, [golden("qwen3-32b_tp16")], 16, "TP 16")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
