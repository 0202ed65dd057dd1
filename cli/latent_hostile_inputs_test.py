"""Latent attention's hostile inputs (ctest cli.latent_hostile_inputs; issue 56.13), each built here from the
committed DeepSeek-V3 narrow config (golden/data/configs/deepseek-v3-narrow.json):

  longrope        a latent layer with longrope scaling: `golden make` writes it and `golden check` reads it back
                  and passes the reference (the reader held its factors to rotary_dim, which a latent layer
                  leaves unset: every such golden was refused).
  declined        a candidate that declines grads/kv_b_proj (a latent weight's gradient) is judged with that
                  tensor declined (it was "not a tensor name").
  derived scale   rope_scaling.mscale, mscale_all_dim or attention_factor of 1e308 is refused by that attribute's
                  name (exit 2), not as a reference that produced NaN from "inputs too large".
  cp layouts      `golden make` refuses the CP layouts the context-parallel reference refuses (latent attention;
                  a ring beyond its work bound), exit 2, instead of writing a golden reference-cp cannot check.

    python3 latent_hostile_inputs_test.py ATTNCHECK SOURCE_DIR WORK_FOLDER
"""
import json
import pathlib
import shutil
import subprocess
import sys

import h5py


def main():
    attncheck, source, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = json.loads((source / "golden/data/configs/deepseek-v3-narrow.json").read_text())
    failures = []

    def attn(*arguments):
        return subprocess.run([attncheck, *map(str, arguments)], capture_output=True, text=True, timeout=300,
                              check=False)

    def config(name, **rope_scaling):
        edited = json.loads(json.dumps(base))
        edited["rope_scaling"].update(rope_scaling)
        path = work / f"{name}.json"
        path.write_text(json.dumps(edited))
        return path

    pairs = base["qk_rope_head_dim"] // 2
    longrope = config("longrope", type="longrope", rope_type="longrope", factor=4.0,
                      original_max_position_embeddings=64, short_factor=[1.0] * pairs,
                      long_factor=[1.5] * pairs)
    for key in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim"):
        edited = json.loads(longrope.read_text())
        edited["rope_scaling"].pop(key, None)
        longrope.write_text(json.dumps(edited))
    golden = work / "longrope.h5"
    made = attn("golden", "make", "--hf-config", longrope, "--seq", "6", "-o", golden)
    checked = attn("golden", "check", golden, "--impl", "reference")
    print(f"longrope: make exit {made.returncode}, check exit {checked.returncode}")
    if made.returncode != 0 or checked.returncode != 0 or "1 of 1 golden files pass" not in checked.stdout:
        failures.append(f"longrope: make {made.returncode} {made.stderr[-300:]!r}; check {checked.returncode} "
                        f"{checked.stderr[-300:]!r}")

    candidate = work / "declined.h5"
    attn("golden", "run", golden, "--impl", "reference", "-o", candidate)
    with h5py.File(candidate, "r+") as file:
        del file["result/grads/kv_b_proj"]
        file.create_group("result/declined").attrs["grads/kv_b_proj"] = "this layer fuses kv_b_proj elsewhere"
    compared = attn("compare", golden, candidate)
    print(f"declined: exit {compared.returncode}")
    if compared.returncode != 0 or "declined: this layer fuses kv_b_proj elsewhere" not in compared.stdout:
        failures.append(f"declined: exit {compared.returncode}: {compared.stdout[-400:]!r} {compared.stderr[-300:]!r}")

    for field in ("mscale", "mscale_all_dim", "attention_factor"):
        refused = attn("golden", "make", "--hf-config", config(field, **{field: 1e308}), "--seq", "4",
                       "-o", work / f"{field}.h5")
        print(f"derived scale {field}: exit {refused.returncode}")
        if refused.returncode != 2 or f"rope_scaling.{field} = 1e+308" not in refused.stderr:
            failures.append(f"derived scale {field}: exit {refused.returncode}: {refused.stderr[-300:]!r}")

    latent_cp = attn("golden", "make", "--hf-config", source / "golden/data/configs/deepseek-v3-narrow.json",
                     "--seq", "4", "--cp", "2", "--cp-scheme", "ring", "-o", work / "latent_cp.h5")
    big_ring = attn("golden", "make", "--hidden", "8", "--heads", "2", "--head-dim", "4", "--batch", "1", "--seq",
                    "4096", "--cp", "2048", "--cp-scheme", "ring", "-o", work / "big_ring.h5")
    print(f"cp layouts: latent exit {latent_cp.returncode}, big ring exit {big_ring.returncode}")
    if latent_cp.returncode != 2 or "multi-head latent attention" not in latent_cp.stderr:
        failures.append(f"latent cp: exit {latent_cp.returncode}: {latent_cp.stderr[-300:]!r}")
    if big_ring.returncode != 2 or "cp_size = 2048: the ring runs" not in big_ring.stderr:
        failures.append(f"big ring: exit {big_ring.returncode}: {big_ring.stderr[-300:]!r}")
    for path in (work / "latent_cp.h5", work / "big_ring.h5"):
        if path.exists():
            failures.append(f"{path.name}: written although refused")

    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
