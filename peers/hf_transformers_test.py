#!/usr/bin/env python3
"""ctest golden.hf_transformers: transformers' own attention modules, run by
attncheck.adapters.hf_transformers on committed goldens, must pass `attncheck compare`; damaged
goldens and geometries transformers cannot express must be refused with exit code 2.

    hf_transformers_test.py ATTNCHECK WORK_DIR GOLDEN...
"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

import attncheck  # python/ of this tree (PYTHONPATH from ctest)
from peer_checks import fork_server, launch

ADAPTER = ["-m", "attncheck.adapters.hf_transformers"]
# What the adapter imports for the committed goldens' architectures, imported once by the fork server its two
# processes start from (peers/preforked.py): transformers' modeling modules take about 5 s of CPU to import.
PRELOAD = ["torch", "h5py", "transformers", "transformers.masking_utils", "transformers.modeling_rope_utils",
           "transformers.initialization", "attncheck.adapters.hf_transformers"] + [
    f"transformers.models.{name}.modeling_{name}" for name in ("gpt_neox", "gptj", "phi3", "qwen3", "gemma3", "gemma2",
                                                              "gpt_oss", "olmo2", "granite", "smollm3", "llama",
                                                              "deepseek_v3")]
failures = []


def run(command):
    return subprocess.run(command, capture_output=True, text=True)


def expect(condition, message):
    print(("ok    " if condition else "FAIL  ") + message)
    if not condition:
        failures.append(message)


worst = []  # (golden, transformers module, worst ulps)
module_of = {}  # golden file name -> the architecture the adapter chose


def adapter_run(attncheck, work_dir, goldens, agreeing):
    """One adapter process for every golden, those it must refuse and those it must run (transformers imports
    once: about 5 s of the CI machine's CPU each time), each candidate written to work_dir and judged as soon as
    the adapter names it (its "GOLDEN: ARCH (eager) -> CANDIDATE" line), then removed: the candidates are 5.3 GB
    together (the 32B and NeoX-20B ones ~1 GB each), which kept until the end went to disk while the gate ran."""
    with tempfile.TemporaryFile(mode="w+") as stderr:
        adapter = subprocess.Popen(launch([sys.executable, *ADAPTER, *goldens, "--output-dir", work_dir]),
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
        lines = []
        for line in adapter.stdout:
            lines.append(line)
            if ": " in line and " -> " in line:
                golden, rest = line.rstrip("\n").split(": ", 1)
                module_of[os.path.basename(golden)] = rest.split(" ")[0]
                if golden in agreeing:
                    judge(attncheck, golden, rest.rsplit(" -> ", 1)[1])
        status = adapter.wait()
        stderr.seek(0)
        return subprocess.CompletedProcess(adapter.args, status, "".join(lines), stderr.read())


def judge(attncheck, golden, candidate):
    compare = run([attncheck, "compare", golden, candidate])
    print(compare.stdout + compare.stderr)
    expect(compare.returncode == 0 and "PASS" in compare.stdout,
           f"transformers agrees with the reference on {os.path.basename(golden)}")
    worst.append((os.path.basename(golden), module_of.get(os.path.basename(golden), "?"), worst_ulps(compare.stdout)))
    if os.path.exists(candidate):  # a missing one failed its compare above
        os.remove(candidate)


def agreement(goldens):
    """Every golden of goldens had its candidate judged (adapter_run)."""
    missing = [os.path.basename(golden) for golden in goldens if os.path.basename(golden) not in module_of]
    expect(not missing, f"adapter wrote candidates for {len(goldens)} goldens (none for {missing})")
    # docs/FRAMEWORKS.md's table (family -> module -> worst error) is read from here.
    print("golden | transformers module | worst error (ulps of the tensor's scale)")
    for name, module, ulps in worst:
        print(f"{name} | {module} | {ulps:.3g}")


def worst_ulps(compare_output):
    """The largest `ulps` column of `attncheck compare`'s table (tensor, status, max error, ulps, ...)."""
    values = []
    for line in compare_output.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "ok":
            try:
                values.append(float(fields[3]))
            except ValueError:
                pass
    return max(values, default=float("nan"))


def planted_longrope_bug(attncheck, work_dir, goldens):
    """A transformers run that keeps longrope's short factors past the pretraining length must fail the
    longrope golden: its positions are where the long factors apply."""
    longrope = [golden for golden in goldens if attncheck_geometry(golden).get("rope_scaling") == "longrope"]
    expect(bool(longrope), "a committed longrope golden")
    for golden in longrope[:1]:
        candidate = os.path.join(work_dir, "longrope_short.candidate.h5")
        adapter = run(launch([sys.executable, *ADAPTER, golden, "-o", candidate, "--plant-bug",
                              "longrope-short-factors"]))
        compare = run([attncheck, "compare", golden, candidate])
        expect(adapter.returncode == 0 and compare.returncode == 1 and "FAIL" in compare.stdout,
               f"short factors at long positions fail {os.path.basename(golden)}: adapter {adapter.returncode}, "
               f"compare {compare.returncode}")
        if os.path.exists(candidate):
            os.remove(candidate)


def attncheck_geometry(golden):
    return attncheck.case.read_geometry(golden)


def damaged(work_dir, golden, name, reason, damage_h5=None, damage_file=None):
    """(path, [reason]): a copy of golden, damaged through h5py (damage_h5) or as bytes (damage_file(path)),
    which the adapter must refuse naming reason (refusals())."""
    path = os.path.join(work_dir, f"damaged_{name}.h5")
    shutil.copyfile(golden, path)
    if damage_file:
        damage_file(path)
    else:
        with h5py.File(path, "r+") as h5:
            damage_h5(h5)
    return path, [reason]


def refusals(work_dir, expected, result):
    """The adapter's run over every golden of expected ({path: [reason]}) and others: exit 2, each golden of
    expected refused on stderr as "MODULE: GOLDEN: ..." naming all its reasons, no candidate for it, and never
    a traceback."""
    expect(result.returncode == 2 and "Traceback" not in result.stderr,
           f"adapter over {len(expected)} goldens to refuse and the others: exit {result.returncode} (want 2), "
           f"no traceback")
    prefix = f"{ADAPTER[-1]}: "
    messages = {}  # path -> its refusal, up to the next one
    for record in result.stderr.split("\n" + prefix):
        record = record.removeprefix(prefix)
        for path in expected:
            if record.startswith(path + ": "):
                messages[path] = record[len(path) + 2:].strip()
    for path, reasons in expected.items():
        message = messages.get(path, "")
        candidate = os.path.join(work_dir, os.path.basename(path).removesuffix(".h5") + ".candidate.h5")
        expect(bool(message) and all(reason in message for reason in reasons) and not os.path.exists(candidate),
               f"{os.path.basename(path)} refused naming {reasons}: {message[:300] or 'no message'}")
    print(result.stdout + result.stderr)


def deliberately(edit):
    """An edit the schema allows, sealed again as `attncheck golden seal` does, so that the adapter's own
    refusal is what is tested, not the integrity digest's (golden/SCHEMA.md, "Integrity digest")."""
    from attncheck.integrity import integrity_digest

    def apply(h5):
        edit(h5)
        h5.attrs["integrity"] = integrity_digest(h5, h5.filename)
    return apply


def truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as file:
        file.truncate(size // 2)


def replace_dataset(h5, name, values):
    del h5[name]
    h5.create_dataset(name, data=values)


def bad_inputs(work_dir, small_golden):
    """{path: [reason]}: damaged copies of a small golden."""
    return dict([
        damaged(work_dir, small_golden, "truncated", "cannot be read as HDF5", damage_file=truncate),
        damaged(work_dir, small_golden, "missing_x", "inputs/x is missing", lambda h5: h5.__delitem__("inputs/x")),
        damaged(work_dir, small_golden, "float32_dout", "float32",
                lambda h5: replace_dataset(h5, "inputs/dout", h5["inputs/dout"][()].astype(np.float32))),
        damaged(work_dir, small_golden, "nan_x", "NaN",
                lambda h5: replace_dataset(h5, "inputs/x", np.full(h5["inputs/x"].shape, np.nan))),
        damaged(work_dir, small_golden, "wrong_shape_positions", "shape",
                lambda h5: replace_dataset(h5, "inputs/position_ids", np.zeros((1, 2), dtype=np.int64))),
        damaged(work_dir, small_golden, "missing_scale", "scale",
                lambda h5: h5["geometry"].attrs.__delitem__("scale")),
        damaged(work_dir, small_golden, "interleaved_rope", "rope_style 'interleaved'",
                deliberately(lambda h5: h5["geometry"].attrs.__setitem__("rope_style", "interleaved"))),
    ])


def queries_without_keys(golden):
    """Whether the golden has a query that sees no key (SCHEMA.md's masks, as attncheck's package reads them)."""
    return attncheck.read_case(golden, weights=False).queries_seeing_no_key()


# Committed goldens whose geometry no transformers module expresses, each with the reasons the adapter must
# give (exit 2, no candidate). Named one by one, so that a golden the adapter starts refusing fails here.
# narrow_bidirectional: an encoder-style layer (no causal mask) with q/k/v biases but none on o_proj, the
# committed golden where fp16 accumulation of P.V shows (docs/FRAMEWORKS.md).
EXPECTED_REFUSALS = {"narrow_bidirectional_seq4096.h5": ["causal = 0", "qkv_bias != out_bias"],
                     # sinks take the gpt-oss module, which scales by head_dim^-0.5 only
                     "small_cp_ring_large_logits.h5": ["query_pre_attn_scalar"],
                     # The ladder's rungs a module for their one feature cannot take (docs/LADDER.md): partial RoPE
                     # is Phi-3's and GPT-J's, which derive head_dim from hidden / heads (GPT-J: no GQA either), and
                     # the adapter's window modules do not take the ladder's plain layer.
                     "ladder_05_partial-rope.h5": ["Phi-3 derives head_dim = hidden / heads"],
                     "ladder_06_partial-rope-interleaved.h5": ["GPT-J derives head_dim = hidden / heads"],
                     "ladder_10_sliding-window.h5": ["sliding_window (the llama module has none)"]}


def main():
    with fork_server(PRELOAD):
        return checks(sys.argv[1], sys.argv[2], sys.argv[3:])


def checks(attncheck, work_dir, goldens):
    os.makedirs(work_dir, exist_ok=True)
    # transformers has no convention for a query that sees no key (an additive finite mask gives the mean of
    # V): goldens with such a query are refused, never given a candidate.
    without_keys = [golden for golden in goldens if queries_without_keys(golden)]
    inexpressible = [golden for golden in goldens if os.path.basename(golden) in EXPECTED_REFUSALS]
    expected = {golden: ["sees no key"] for golden in without_keys}
    expected.update({golden: EXPECTED_REFUSALS[os.path.basename(golden)] for golden in inexpressible})
    long_goldens = [golden for golden in goldens if "_seq" in os.path.basename(golden)]
    if long_goldens:  # generated inputs: a stored x beside the generator's name is a contradiction
        expected.update([
            damaged(work_dir, long_goldens[0], "generator_and_x", "also stores x",
                    lambda h5: h5.create_dataset("inputs/x", data=np.zeros((1, 2, 3)))),
            damaged(work_dir, long_goldens[0], "text_input_seed", "/inputs@seed must be an integer",
                    lambda h5: h5["inputs"].attrs.__setitem__("seed", "2026"))])
    small = [golden for golden in goldens if "small_softcap_padding" in golden]
    if small:
        expected.update(bad_inputs(work_dir, small[0]))
    else:
        expect(False, "small_softcap_padding.h5 among the goldens (the bad-input cases damage copies of it)")
    agreeing = [golden for golden in goldens if golden not in without_keys + inexpressible]
    adapter = adapter_run(attncheck, work_dir, list(expected) + agreeing, agreeing)
    refusals(work_dir, expected, adapter)
    agreement(agreeing)
    planted_longrope_bug(attncheck, work_dir, goldens)
    for path in expected:
        if os.path.basename(path).startswith("damaged_"):
            os.remove(path)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
