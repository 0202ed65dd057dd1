#!/usr/bin/env python3
"""ctest golden.hostile_structure: golden files whose HDF5 structure is not what the schema says are
refused with exit 2 and a message naming the object and what is wrong, not a library error: a group
stored as a dataset, a dataset behind a soft link, data compressed with a filter this HDF5 build lacks
(h5py's lzf), and files that disagree with themselves (per-rank gradients under tp_size 1, expected
decoding without a schedule, weights both named by the generator and stored).

    hostile_structure_test.py ATTNCHECK WORK_DIR"""
import pathlib
import shutil
import subprocess
import sys

import h5py
import numpy as np

attncheck, work = sys.argv[1], pathlib.Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
failures = []


def run(*arguments):
    return subprocess.run([attncheck, *arguments], capture_output=True, text=True)


def make(name, *flags):
    path = work / f"{name}.h5"
    result = run("golden", "make", "--hidden", "16", "--heads", "2", "--head-dim", "8", "--seq", "4", "--batch",
                 "1", "--seed", "3", *flags, "-o", str(path))
    if result.returncode != 0:
        sys.exit(f"golden make failed: {result.stderr}")
    return path


def refused(name, base, damage, *expected):
    path = work / f"{name}.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+") as h5:
        damage(h5)
    result = run("golden", "check", str(path), "--impl", "reference")
    ok = result.returncode == 2 and all(text in result.stderr for text in expected) and "internal" not in result.stderr
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
    if not ok:
        failures.append(name)


def geometry_as_dataset(h5):
    attributes = dict(h5["geometry"].attrs)
    del h5["geometry"]
    h5.create_dataset("geometry", data=np.zeros(3))
    for key, value in attributes.items():
        h5["geometry"].attrs[key] = value


def lzf_input(h5):
    data = h5["inputs/x"][...]
    del h5["inputs/x"]
    h5.create_dataset("inputs/x", data=data, compression="lzf")


def soft_linked_weight(h5):
    h5["weights/spare"] = h5["weights/q_proj"][...]
    del h5["weights/q_proj"]
    h5["weights/q_proj"] = h5py.SoftLink("/weights/spare")


def set_tp_size_1(h5):
    h5["geometry"].attrs["tp_size"] = np.int64(1)


def drop_schedule(h5):
    del h5["inputs/decode_schedule"]


def store_named_weights(h5):
    h5.create_dataset("weights/q_proj", data=np.ones((16, 16)))


plain = make("plain", "--decode", "2,1,1")
refused("geometry_as_dataset", plain, geometry_as_dataset, "/geometry", "a dataset", "requires a group")
refused("lzf_input", plain, lzf_input, "/inputs/x", "lzf", "compression filter")
refused("soft_linked_weight", plain, soft_linked_weight, "/weights/q_proj", "soft link")
refused("decode_without_schedule", plain, drop_schedule, "/expected/decode/out", "decode_schedule")
sharded = make("sharded", "--tp", "2")
refused("ranks_with_tp_1", sharded, set_tp_size_1, "/expected/ranks", "tp_size is 1")
generated = make("generated", "--weights", "generated")
refused("weights_named_and_stored", generated, store_named_weights, "/weights/q_proj", "names a generator")

if failures:
    sys.exit(f"FAIL: {len(failures)} hostile files not refused as they should be: {', '.join(failures)}")
print("PASS: every hostile file refused with exit 2, naming the object")
