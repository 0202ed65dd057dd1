"""Writing a candidate file (golden/SCHEMA.md, "Candidate files") for `attncheck compare` and workers.

Layout written:
  /                 schema_version 1, generator (what produced it)
  /result           precision (fp64 | fp32 | bf16 | fp16), tp_size, tp_convention, rope_angles (below fp64)
  /result/out, /result/grads/x, /result/grads/<weight>, /result/decode/out      float64, full tensors
  /result/ranks/<r>/grads/<weight>      each rank's held gradient (attncheck.sharding), when tp_size > 1;
                                        none for a tensor the rank holds no row of
  /result/declined  string attributes: part -> reason, for parts of the case the implementation declines
"""
import numpy as np

from .case import TP_CONVENTIONS
from .errors import BadInput

PRECISIONS = ("fp64", "fp32", "bf16", "fp16")


def write_candidate(path, tensors, *, generator, precision="fp64", tp_size=1, tp_convention="replicated-kv",
                    rank_gradients=None, rope_angles=None, declined=None):
    """tensors: {"out": ..., "grads/x": ..., "grads/q_proj": ..., "decode/out": ...} (full, any float
    dtype: stored as float64, as SCHEMA.md asks whatever the precision computed in). rank_gradients: a
    list of {weight name: held gradient}, one per rank, required when tp_size > 1 (tp_size 1 declares
    an unsharded run, excused from per-rank checks). declined: {part: reason}, e.g. {"decode": "..."}."""
    import h5py

    if precision not in PRECISIONS:
        raise BadInput(f"precision '{precision}'; valid: {', '.join(PRECISIONS)}")
    if tp_convention not in TP_CONVENTIONS:
        raise BadInput(f"tp_convention '{tp_convention}'; valid: {', '.join(TP_CONVENTIONS)}")
    declines_ranks = bool(declined) and "ranks" in declined
    if tp_size > 1 and not declines_ranks and (rank_gradients is None or len(rank_gradients) != tp_size):
        raise BadInput(f"tp_size {tp_size} needs per-rank gradients for {tp_size} ranks (declare tp_size 1 for "
                       "an unsharded run, or decline 'ranks' with a reason)")
    if "out" not in tensors:
        raise BadInput("a candidate must hold out (a case that cannot produce it is unsupported, not declined)")
    with h5py.File(path, "w") as h5:
        h5.attrs["schema_version"] = np.int64(1)
        h5.attrs["generator"] = generator
        result = h5.create_group("result")
        result.attrs["precision"] = precision
        result.attrs["tp_size"] = np.int64(tp_size)
        result.attrs["tp_convention"] = tp_convention
        if rope_angles is not None:
            result.attrs["rope_angles"] = rope_angles
        for name, values in tensors.items():
            result.create_dataset(name, data=np.ascontiguousarray(values, dtype="<f8"))
        for rank, gradients in enumerate(rank_gradients if tp_size > 1 and rank_gradients else []):
            for name, values in gradients.items():
                if np.size(values) == 0:
                    continue  # a rank holding no row of a tensor stores none (megatron-equal-block)
                result.create_dataset(f"ranks/{rank}/grads/{name}", data=np.ascontiguousarray(values, dtype="<f8"))
        if declined:
            group = result.create_group("declined")
            for part, reason in declined.items():
                group.attrs[part] = " ".join(str(reason).split())
