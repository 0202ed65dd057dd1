#!/usr/bin/env python3
"""Writes a candidate file declaring a golden's own TP convention from the golden's /expected (stored in
full), for the ctest cli.tp_convention_* cases: a candidate that holds its per-rank gradients as
megatron-equal-block is judged under that convention, and one held K row changed on one rank must fail,
naming that rank and tensor (golden/SCHEMA.md, "TP conventions").

    tp_convention_candidate.py GOLDEN CANDIDATE [--perturb-k-row RANK ROW]

--perturb-k-row adds 1 to row ROW of /result/ranks/RANK/grads/k_proj (that rank must hold it)."""
import sys

import h5py

golden_path, candidate_path = sys.argv[1], sys.argv[2]
perturb = None
if len(sys.argv) > 3:
    if len(sys.argv) != 6 or sys.argv[3] != "--perturb-k-row":
        sys.exit(__doc__)
    perturb = (int(sys.argv[4]), int(sys.argv[5]))

with h5py.File(golden_path, "r") as golden, h5py.File(candidate_path, "w") as candidate:
    if "sketches" in golden["expected"]:
        sys.exit(f"{golden_path}: its gradients are sketched; this script needs them in full")
    convention = golden["geometry"].attrs.get("tp_convention", "replicated-kv")
    if isinstance(convention, bytes):
        convention = convention.decode()
    candidate.attrs["schema_version"] = 1
    candidate.attrs["generator"] = "tp_convention_candidate.py"
    golden.copy("expected", candidate, name="result")
    result = candidate["result"]
    result.attrs["precision"] = "fp64"
    result.attrs["tp_size"] = int(golden["geometry"].attrs["tp_size"])
    result.attrs["tp_convention"] = convention
    if perturb is not None:
        rank, row = perturb
        k_proj = result[f"ranks/{rank}/grads/k_proj"]
        values = k_proj[()]
        values[row, :] += 1.0
        k_proj[...] = values
print(f"wrote {candidate_path}: {convention} from {golden_path}" + (f", rank {perturb[0]} k_proj row {perturb[1]} + 1"
                                                                     if perturb else ""))
