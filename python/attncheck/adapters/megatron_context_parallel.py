"""Megatron-Core's context parallelism where it runs without a GPU: its split of a batch over CP ranks.

Megatron-Core's attention under context parallelism runs only in TransformerEngine's
TEDotProductAttention (its own DotProductAttention asserts context_parallel_size == 1, "Context
parallelism is only supported by TEDotProductAttention!"), and TransformerEngine needs CUDA, so
attncheck.adapters.megatron_core declines goldens with a context-parallel layout by name. What does
run on the CPU is how Megatron cuts the sequence for its CP ranks: megatron.core.utils.
get_batch_on_this_cp_rank (per-sequence zigzag: 2 CP chunks, rank r keeping chunks r and 2 CP - 1 - r).
megatron_split() runs that function, Megatron's own code, in a gloo world of CP processes and returns
the sequence indices each CP rank holds, for comparison with attncheck's layout
(attncheck.sharding.context_parallel_holdings, `attncheck plan --cp N --cp-scheme ring --json`).

    python -m attncheck.adapters.megatron_context_parallel --seq 12 --cp 2 3     # JSON: Megatron vs attncheck

Megatron needs seq divisible by 2 x cp_size (it pads sequences to that); attncheck splits any length as
evenly as possible (the first chunks one token longer). Other lengths are refused here by name (exit 2).
Exit codes: 0 every split agrees, 1 one differs, 2 bad input.
"""
import argparse
import json
import os
import sys
import tempfile

from attncheck import BadInput
from attncheck.sharding import context_parallel_holdings

MODULE = "attncheck.adapters.megatron_context_parallel"


def _rank_main(rank, world, store, layouts, results):
    """One CP process: for each (cp_size, seq) its group of the first cp_size ranks runs Megatron's split of
    a batch whose tokens are their own sequence indices."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    from megatron.core.utils import get_batch_on_this_cp_rank

    held = {}
    for cp_size, seq in layouts:
        group = dist.new_group(list(range(cp_size)))  # every process takes part in making every group
        if rank < cp_size:
            batch = {"tokens": torch.arange(seq).unsqueeze(0), "cu_seqlens": None}
            held[f"{cp_size},{seq}"] = get_batch_on_this_cp_rank(batch, is_hybrid_cp=False,
                                                                 cp_group=group)["tokens"][0].tolist()
    results.put((rank, held))
    dist.barrier()
    dist.destroy_process_group()


def check_layout(cp_size, seq):
    if not isinstance(cp_size, int) or cp_size < 1:
        raise BadInput(f"cp_size {cp_size!r}; expected an integer >= 1")
    if seq < 1 or seq % (2 * cp_size):
        raise BadInput(f"seq {seq} with cp_size {cp_size}: Megatron-Core's per-sequence balancing needs seq "
                       f"divisible by 2 x cp_size = {2 * cp_size} (it pads to that); e.g. seq {2 * cp_size * 3}")


def megatron_split(layouts):
    """{(cp_size, seq): [the sequence indices CP rank r holds, for r in 0..cp_size-1]}, from Megatron-Core's
    get_batch_on_this_cp_rank in one gloo world of max(cp_size) processes."""
    from attncheck.distributed import _start_context

    layouts = [(int(cp), int(seq)) for cp, seq in layouts]
    for cp_size, seq in layouts:
        check_layout(cp_size, seq)
    world = max(cp for cp, _ in layouts)
    # attncheck.distributed's start for gloo ranks: forks of one process that imported torch and Megatron's
    # utils once (a spawned process each imported them again: about 6 CPU-s apiece).
    context = _start_context("gloo", ["megatron.core.utils"])
    results = context.SimpleQueue()
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "store")
        processes = [context.Process(target=_rank_main, args=(rank, world, store, layouts, results))
                     for rank in range(world)]
        for process in processes:
            process.start()
        held = dict(results.get() for _ in processes)
        for process in processes:
            process.join(timeout=120)
        failed = [p.exitcode for p in processes if p.exitcode != 0]
        if failed:
            raise RuntimeError(f"a Megatron CP process exited with {failed}")
    return {(cp, seq): [held[rank][f"{cp},{seq}"] for rank in range(cp)] for cp, seq in layouts}


def attncheck_split(cp_size, seq):
    """The same split from attncheck's layout: ring, load-balanced, at TP 1 (the tokens do not depend on TP)."""
    geometry = {"hidden_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 8}
    layout = {"cp_size": cp_size, "scheme": "ring", "chunks": "load-balanced"}
    return [context_parallel_holdings(geometry, 1, 0, rank, layout, seq)["tokens"] for rank in range(cp_size)]


def main():
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, required=True, help="tokens per sequence (a multiple of 2 x each CP size)")
    parser.add_argument("--cp", type=int, nargs="+", required=True, help="CP sizes")
    args = parser.parse_args()
    try:
        layouts = [(cp, args.seq) for cp in args.cp]
        split = megatron_split(layouts)
    except BadInput as error:
        print(f"{MODULE}: {error}", file=sys.stderr)
        return 2
    report = [{"cp_size": cp, "seq": seq, "megatron": split[(cp, seq)], "attncheck": attncheck_split(cp, seq),
               "agree": split[(cp, seq)] == attncheck_split(cp, seq)} for cp, seq in layouts]
    print(json.dumps(report))
    return 0 if all(entry["agree"] for entry in report) else 1


if __name__ == "__main__":
    sys.exit(main())
