"""What each tensor-parallel rank holds (golden/SCHEMA.md, "A rank's shard" and "TP conventions"), as
row and column ranges of the full Hugging Face-layout tensors, for both conventions:

- `replicated-kv` (attncheck's): rank r of P holds query heads [r·Hq/P, (r+1)·Hq/P) (q_proj rows,
  q_bias, o_proj columns) and KV heads [r·Hkv/P, (r+1)·Hkv/P), or, when P > Hkv, the one KV head
  r / (P/Hkv), replicated on P/Hkv ranks.
- `megatron-equal-block` (Megatron-Core's): the fused QKV weight in grouped order (per KV group g: the
  q rows of its Hq/Hkv query heads, then k and v rows of KV head g) is cut into P equal row blocks;
  rank r holds block r, i.e. a contiguous range of q_proj, k_proj and v_proj rows each (possibly
  empty). o_proj columns: the query heads it computes, [r·Hq/P, (r+1)·Hq/P), as above.

Both: sinks (one per query head) follow the query heads the rank computes, [r·Hq/P, (r+1)·Hq/P);
o_bias and per-head q_norm / k_norm whole; a whole-width norm's (qk_norm `rms-full-width`) q_norm /
k_norm elements follow the q_proj / k_proj rows they scale. A held row's gradient is the layer's full
gradient of that row (replicated KV heads summed over their replica group; Megatron's reduce-scatter
delivers each row's sum to its holder), per-head q_norm/k_norm summed over all ranks, o_bias in full — so the full gradients are
the held rows put back together (assemble_full_gradients).

Context parallelism on top of a TP plan: context_parallel_holdings gives each (tp, cp) rank's tokens and
heads under Ulysses or the ring (load-balanced or contiguous), as `attncheck plan --cp N --json` does.
"""
import numpy as np

from .case import TP_CONVENTIONS, resolved_head_dim
from .errors import BadInput

# Which full tensor's axis a weight's shard is cut along, and by which head family.
ROW_FAMILY = {"q_proj": "q", "q_bias": "q", "k_proj": "k", "k_bias": "k", "v_proj": "v", "v_bias": "v"}


def check_partition(geometry, tp_size, convention):
    heads, kv_heads = geometry["num_attention_heads"], geometry["num_key_value_heads"]
    if convention not in TP_CONVENTIONS:
        raise BadInput(f"TP convention '{convention}'; known: {', '.join(TP_CONVENTIONS)}")
    if heads % tp_size:
        raise BadInput(f"tp_size {tp_size} does not divide num_attention_heads {heads}")
    if kv_heads % tp_size and tp_size % kv_heads:
        raise BadInput(f"tp_size {tp_size} and num_key_value_heads {kv_heads}: one must divide the other")
    if convention == "megatron-equal-block":
        fused_rows = (heads + 2 * kv_heads) * resolved_head_dim(geometry)
        if fused_rows % tp_size:
            raise BadInput(f"megatron-equal-block: the fused QKV weight's {fused_rows} rows do not split into "
                           f"{tp_size} equal blocks")


def _fused_row_owner(geometry):
    """[(family, row of that family's tensor)] for each row of Megatron's grouped fused QKV weight."""
    heads, kv_heads, head_dim = geometry["num_attention_heads"], geometry["num_key_value_heads"], resolved_head_dim(geometry)
    per_group = heads // kv_heads
    rows = []
    for group in range(kv_heads):
        rows += [("q", group * per_group * head_dim + i) for i in range(per_group * head_dim)]
        rows += [("k", group * head_dim + i) for i in range(head_dim)]
        rows += [("v", group * head_dim + i) for i in range(head_dim)]
    return rows


def holdings(geometry, tp_size, convention, rank):
    """{"q"|"k"|"v": (start, stop) rows of q_proj/k_proj/v_proj, "o": (start, stop) columns of o_proj,
    "heads": (start, stop) query heads (entries of sinks)} held by `rank`."""
    check_partition(geometry, tp_size, convention)
    heads, kv_heads, head_dim = geometry["num_attention_heads"], geometry["num_key_value_heads"], resolved_head_dim(geometry)
    query_heads = heads // tp_size
    held = {"o": (rank * query_heads * head_dim, (rank + 1) * query_heads * head_dim),
            "heads": (rank * query_heads, (rank + 1) * query_heads)}
    if convention == "replicated-kv":
        held["q"] = held["o"]
        if tp_size <= kv_heads:
            per_rank = kv_heads // tp_size
            kv = (rank * per_rank * head_dim, (rank + 1) * per_rank * head_dim)
        else:
            group = rank // (tp_size // kv_heads)
            kv = (group * head_dim, (group + 1) * head_dim)
        held["k"] = held["v"] = kv
        return held
    owners = _fused_row_owner(geometry)
    block = len(owners) // tp_size
    for family in "qkv":
        rows = [row for owner, row in owners[rank * block:(rank + 1) * block] if owner == family]
        if rows and rows != list(range(rows[0], rows[-1] + 1)):
            raise BadInput(f"megatron-equal-block: rank {rank}'s {family} rows are not contiguous")
        held[family] = (rows[0], rows[-1] + 1) if rows else (0, 0)
    return held


def shard_tensor(name, full, held, geometry):
    """The part of full tensor `name` a rank with `held` (holdings()) holds."""
    family = ROW_FAMILY.get(name)
    if geometry.get("qk_norm") == "rms-full-width" and name in ("q_norm", "k_norm"):
        family = name[0]  # a weight per channel, held with the projection row it scales
    if family is not None:
        start, stop = held[family]
        return full[start:stop]
    if name == "o_proj":
        start, stop = held["o"]
        return full[:, start:stop]
    if name == "sinks":
        start, stop = held["heads"]
        return full[start:stop]
    return full  # o_bias, per-head q_norm and k_norm: whole on every rank


def shard_weights(weights, geometry, tp_size, convention, rank):
    """{name: the rank's part of weights[name]} (copies, contiguous)."""
    held = holdings(geometry, tp_size, convention, rank)
    return {name: np.ascontiguousarray(shard_tensor(name, values, held, geometry)) for name, values in weights.items()}


def assemble_full_gradients(rank_gradients, weight_shapes, geometry, tp_size, convention):
    """The layer's full gradients from each rank's held gradients (a list of {name: array}, one per rank):
    every row goes back where it came from; a row held by several ranks (replicated KV heads) is taken
    from the lowest rank; o_bias and per-head q_norm / k_norm from rank 0 (held whole, already reduced)."""
    full = {name: np.zeros(shape) for name, shape in weight_shapes.items()}
    filled = {name: np.zeros(shape, dtype=bool) for name, shape in weight_shapes.items()}
    for rank in reversed(range(tp_size)):  # lowest rank written last, so it wins
        held = holdings(geometry, tp_size, convention, rank)
        for name, gradient in rank_gradients[rank].items():
            if name not in full:
                raise BadInput(f"rank {rank} returned a gradient for {name}, which the layer does not have")
            target = shard_tensor(name, full[name], held, geometry)
            if target.shape != np.shape(gradient):
                raise BadInput(f"rank {rank}'s {name} gradient has shape {list(np.shape(gradient))}; "
                               f"it holds {list(target.shape)} under {convention}")
            target[...] = gradient  # a view: writes into full[name]
            shard_tensor(name, filled[name], held, geometry)[...] = True
    unfilled = [name for name, mask in filled.items() if not mask.all()]
    if unfilled:
        raise BadInput(f"no rank returned (all of) the gradient of {', '.join(unfilled)}")
    return full


# ---------------------------------------------------------------------------------------------
# Context parallelism (golden/SCHEMA.md "Context-parallel layouts"; the C++ ParallelLayout,
# core/model/parallel_layout.hpp, is the same layout and `attncheck plan --cp N --json` prints it)

CP_SCHEMES = ("ulysses", "ring")
MAX_CP_SIZE = 4096


def sequence_chunks(seq, chunk_count):
    """[(begin, end)] of chunk_count chunks of a seq-token sequence, in order, as even as possible: the
    first seq % chunk_count are one token longer (frameworks that need multiples pad instead, which masks
    the same keys); chunks are empty when seq < chunk_count."""
    if chunk_count < 1 or seq < 0:
        raise BadInput(f"sequence chunks: chunk_count {chunk_count} with seq {seq}; expected chunk_count >= 1, seq >= 0")
    chunks, begin = [], 0
    for index in range(chunk_count):
        size = seq // chunk_count + (1 if index < seq % chunk_count else 0)
        chunks.append((begin, begin + size))
        begin += size
    return chunks


def _ulysses_problem(local_q_heads, local_kv_heads, cp_size):
    if local_q_heads % cp_size:
        return (f"Ulysses gives each CP rank 1/{cp_size} of its TP rank's {local_q_heads} query heads: "
                "not a whole number")
    if local_kv_heads % cp_size and cp_size % local_kv_heads:
        return (f"Ulysses splits its TP rank's {local_kv_heads} KV heads over {cp_size} CP ranks, or replicates "
                "each on CP / KV ranks: neither divides")
    return None


def context_parallel_holdings(geometry, tp_size, tp_rank, cp_rank, context_parallel, seq):
    """What (tp_rank, cp_rank) holds under a context-parallel layout over attncheck's TP plan
    (replicated-kv heads): context_parallel is Case.context_parallel's dict {"cp_size", "scheme",
    "chunks" ("load-balanced", "contiguous", or None for Ulysses)}. Returns {"rank" (global, Megatron's
    order: cp_rank * tp_size + tp_rank), "chunks" (chunk indices), "tokens" (the sequence indices it
    holds, in its chunks' order), "q_heads" and "kv_heads" ((start, stop): the heads it attends with),
    "ring_receives_from", "ring_sends_to" (global ranks; itself under Ulysses)}.

    ulysses: chunk cp_rank of cp_size; the TP rank's query heads split evenly over the CP ranks, its KV
    heads too, or, when CP exceeds them, each replicated on CP / H_kv_local consecutive CP ranks.
    ring: load-balanced, chunks cp_rank and 2 CP - 1 - cp_rank of 2 CP (Megatron-Core's causal
    balancing); contiguous, chunk cp_rank of CP; every CP rank keeps its TP rank's heads and receives
    K/V from cp_rank - 1, sends to cp_rank + 1 (mod CP)."""
    cp_size, scheme = context_parallel["cp_size"], context_parallel["scheme"]
    if scheme not in CP_SCHEMES:
        raise BadInput(f"context-parallel scheme '{scheme}'; known: {', '.join(CP_SCHEMES)}")
    if not isinstance(cp_size, int) or not 1 <= cp_size <= MAX_CP_SIZE:
        raise BadInput(f"cp_size {cp_size!r}; expected an integer in [1, {MAX_CP_SIZE}]")
    if not 0 <= cp_rank < cp_size or not 0 <= tp_rank < tp_size:
        raise BadInput(f"rank (tp {tp_rank}, cp {cp_rank}) outside a layout of TP {tp_size} x CP {cp_size}")
    held = holdings(geometry, tp_size, "replicated-kv", tp_rank)
    head_dim = resolved_head_dim(geometry)
    q_heads = held["heads"]
    kv_heads = (held["k"][0] // head_dim, held["k"][1] // head_dim)
    local_q, local_kv = q_heads[1] - q_heads[0], kv_heads[1] - kv_heads[0]
    rank = cp_rank * tp_size + tp_rank
    layout = {"rank": rank, "ring_receives_from": rank, "ring_sends_to": rank}
    if scheme == "ulysses":
        problem = _ulysses_problem(local_q, local_kv, cp_size)
        if problem:
            raise BadInput(f"context-parallel layout: cp_size {cp_size} at TP {tp_size}: {problem}")
        chunk_count, chunks = cp_size, [cp_rank]
        per_rank = local_q // cp_size
        layout["q_heads"] = (q_heads[0] + cp_rank * per_rank, q_heads[0] + (cp_rank + 1) * per_rank)
        if local_kv >= cp_size:
            per_rank = local_kv // cp_size
            layout["kv_heads"] = (kv_heads[0] + cp_rank * per_rank, kv_heads[0] + (cp_rank + 1) * per_rank)
        else:
            head = kv_heads[0] + cp_rank // (cp_size // local_kv)
            layout["kv_heads"] = (head, head + 1)
    else:
        load_balanced = context_parallel.get("chunks") == "load-balanced"
        chunk_count = 2 * cp_size if load_balanced else cp_size
        chunks = [cp_rank, 2 * cp_size - 1 - cp_rank] if load_balanced else [cp_rank]
        layout["q_heads"], layout["kv_heads"] = q_heads, kv_heads
        layout["ring_receives_from"] = (cp_rank - 1) % cp_size * tp_size + tp_rank
        layout["ring_sends_to"] = (cp_rank + 1) % cp_size * tp_size + tp_rank
    ranges = sequence_chunks(seq, chunk_count)
    layout["chunks"] = chunks
    layout["tokens"] = [token for chunk in chunks for token in range(*ranges[chunk])]
    return layout
