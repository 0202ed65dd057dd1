"""ctest python.package: attncheck's Python package (python/attncheck) on its own.

    python3 -m unittest discover -s python/tests        (ATTNCHECK_GOLDENS: the committed goldens' folder)
"""
import io
import itertools
import os
import re
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import attncheck  # noqa: E402
from attncheck import integrity, sharding  # noqa: E402

GOLDENS = os.environ.get("ATTNCHECK_GOLDENS",
                         os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "golden", "data"))


def geometry(heads, kv_heads, head_dim, hidden=64, tp=1, qk_norm="rms"):
    return {"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "tp_size": tp, "qkv_bias": 1, "out_bias": 1, "qk_norm": qk_norm}


class ReadingCases(unittest.TestCase):
    def test_stored_golden_reads_as_stored(self):
        path = os.path.join(GOLDENS, "small_softcap_padding.h5")
        case = attncheck.read_case(path)
        with h5py.File(path) as h5:
            np.testing.assert_array_equal(case.x, h5["inputs/x"][()])
            np.testing.assert_array_equal(case.key_lengths, h5["inputs/key_lengths"][()])
            for name, values in case.weights.items():
                np.testing.assert_array_equal(values, h5[f"weights/{name}"][()], err_msg=name)
        self.assertEqual(case.decode_schedule, [3, 2, 1])
        self.assertEqual(case.key_lengths.tolist(), [7, 3, 5])

    def test_generated_inputs_and_weights_are_rebuilt(self):
        case = attncheck.read_case(os.path.join(GOLDENS, "qwen3-32b_tp16.h5"))
        self.assertEqual(case.weights["q_proj"].shape, (64 * 128, 5120))
        self.assertEqual(case.weights["o_proj"].shape, (5120, 64 * 128))
        long = attncheck.read_case(os.path.join(GOLDENS, "qwen3-0.6b_tp2_seq1024.h5"))
        self.assertEqual(long.x.shape, (1, 1024, 1024))
        self.assertEqual(long.decode_schedule, [1000, 1, 16, 7])

    def test_without_weights_reads_the_rest_and_checks_the_file(self):
        generated = os.path.join(GOLDENS, "qwen3-32b_tp16.h5")
        light = attncheck.read_case(generated, weights=False)
        self.assertIsNone(light.weights)
        np.testing.assert_array_equal(light.x, attncheck.read_case(generated).x)
        stored = os.path.join(GOLDENS, "small_softcap_padding.h5")
        self.assertIsNone(attncheck.read_case(stored, weights=False).weights)
        self.assertTrue(attncheck.read_case(os.path.join(GOLDENS, "small_window_masked_rows.h5"),
                                            weights=False).queries_seeing_no_key())
        with tempfile.TemporaryDirectory() as folder:  # the schema's checks of /weights still apply
            path = shutil.copyfile(stored, os.path.join(folder, "damaged.h5"))
            with h5py.File(path, "r+") as h5:
                h5["weights/q_proj"][0, 0] = np.nan
            with self.assertRaisesRegex(attncheck.BadInput, "weights/q_proj holds NaN"):
                attncheck.read_case(path, weights=False)

    def test_omitted_head_dim_is_kept_absent(self):
        case = attncheck.read_case(os.path.join(GOLDENS, "pythia-410m_tp2_seq2048.h5"))
        self.assertNotIn("head_dim", case.geometry)
        self.assertEqual(case.head_dim, 64)

    def test_masks_follow_the_schema(self):
        # small_window_masked_rows: window 3 at seq 9 with key lengths: 12 queries see no key.
        case = attncheck.read_case(os.path.join(GOLDENS, "small_window_masked_rows.h5"))
        visible = case.visible_keys()
        window = case.geometry["sliding_window"]
        for b, i, j in itertools.product(range(case.batch), range(case.seq), range(case.seq)):
            expected = j <= i and j > i - window and j < case.key_lengths[b]
            self.assertEqual(visible[b, i, j], expected, (b, i, j))
        self.assertEqual(int((~visible.any(axis=2)).sum()), 12)
        self.assertTrue(case.queries_seeing_no_key())
        # a decode step's queries are the last rows
        np.testing.assert_array_equal(case.visible_keys(queries=2, keys=7), visible[:, 5:7, :7])

    def test_rope_angles_use_c_pow(self):
        case = attncheck.read_case(os.path.join(GOLDENS, "qwen3-0.6b_tp1.h5"))
        frequencies = case.rope_inverse_frequencies()
        self.assertEqual(frequencies[5], 1e6 ** (-10 / 128))
        np.testing.assert_array_equal(case.rope_angles()[1, 2], case.position_ids[1, 2] * frequencies)

    def test_damaged_files_are_refused_by_name(self):
        source = os.path.join(GOLDENS, "small_softcap_padding.h5")
        damages = {"/geometry lacks required attribute(s) scale": lambda h5: h5["geometry"].attrs.__delitem__("scale"),
                   "holds NaN": lambda h5: h5["inputs/x"].__setitem__((0, 0, 0), np.nan),
                   "tp_convention is 'rows'": lambda h5: h5["geometry"].attrs.__setitem__("tp_convention", "rows"),
                   "cp_scheme without cp_size": lambda h5: h5["geometry"].attrs.__setitem__("cp_scheme", "ring"),
                   "cp_scheme is 'zigzag'": lambda h5: (h5["geometry"].attrs.__setitem__("cp_size", 2),
                                                        h5["geometry"].attrs.__setitem__("cp_scheme", "zigzag")),
                   "which this geometry does not have": lambda h5: h5.create_dataset("weights/extra", data=[1.0])}
        with tempfile.TemporaryDirectory() as folder:
            for message, damage in damages.items():
                path = os.path.join(folder, "damaged.h5")
                with open(source, "rb") as original, open(path, "wb") as copy:
                    copy.write(original.read())
                with h5py.File(path, "r+") as h5:
                    damage(h5)
                with self.assertRaisesRegex(attncheck.BadInput, re.escape(message)):
                    attncheck.read_case(path)
            # A changed value the schema allows (rope_theta one bit off: another layer) is refused by the
            # integrity digest; after `attncheck golden seal` (a deliberate edit) it reads.
            path = os.path.join(folder, "flipped.h5")
            with open(source, "rb") as original, open(path, "wb") as copy:
                copy.write(original.read())
            with h5py.File(path, "r+") as h5:
                h5["geometry"].attrs["rope_theta"] = np.nextafter(h5["geometry"].attrs["rope_theta"], np.inf)
            with self.assertRaisesRegex(attncheck.BadInput, "changed after it was written"):
                attncheck.read_case(path)
            with h5py.File(path, "r+") as h5:
                h5.attrs["integrity"] = integrity.integrity_digest(h5, path)
            self.assertEqual(attncheck.read_case(path).geometry["rope_theta"], np.nextafter(10000.0, np.inf))
            with open(os.path.join(folder, "text.h5"), "w") as text:
                text.write("not hdf5")
            with self.assertRaisesRegex(attncheck.BadInput, "cannot be read as HDF5"):
                attncheck.read_case(os.path.join(folder, "text.h5"))


class Sharding(unittest.TestCase):
    def test_megatron_equal_block_at_qwen3_32b_tp16(self):
        g = geometry(64, 8, 128, hidden=5120)
        for group in range(8):
            even = attncheck.holdings(g, 16, "megatron-equal-block", 2 * group)
            odd = attncheck.holdings(g, 16, "megatron-equal-block", 2 * group + 1)
            self.assertEqual(even["q"], (8 * group * 128, (8 * group + 5) * 128))  # query heads 8g … 8g+4
            self.assertEqual(even["k"][1] - even["k"][0], 0)
            self.assertEqual(odd["q"], ((8 * group + 5) * 128, (8 * group + 8) * 128))  # 8g+5 … 8g+7
            self.assertEqual(odd["k"], (group * 128, (group + 1) * 128))  # plus the group's K and V
            self.assertEqual(odd["v"], odd["k"])
            self.assertEqual(even["o"], (2 * group * 4 * 128, (2 * group + 1) * 4 * 128))  # computes 4 heads

    def test_conventions_agree_when_kv_heads_cover_the_ranks(self):
        for heads, kv_heads, tp in [(16, 8, 2), (16, 8, 8), (8, 8, 4), (12, 4, 4)]:
            g = geometry(heads, kv_heads, 6)
            for rank in range(tp):
                self.assertEqual(attncheck.holdings(g, tp, "replicated-kv", rank),
                                 attncheck.holdings(g, tp, "megatron-equal-block", rank), (heads, kv_heads, tp, rank))

    def test_replicated_kv_beyond_the_kv_heads(self):
        g = geometry(8, 2, 4)
        self.assertEqual([attncheck.holdings(g, 8, "replicated-kv", rank)["k"] for rank in range(8)],
                         [(0, 4)] * 4 + [(4, 8)] * 4)

    def test_shards_put_back_together(self):
        rng = np.random.default_rng(7)
        for (heads, kv_heads, head_dim, tp), qk_norm in itertools.product(
                [(4, 1, 4, 4), (8, 2, 6, 8), (16, 8, 4, 16), (6, 3, 2, 3), (4, 4, 8, 2)], ["rms", "rms-full-width"]):
            g = geometry(heads, kv_heads, head_dim, tp=tp, qk_norm=qk_norm)
            shapes = attncheck.weight_shapes(g)
            full = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
            for convention in ("replicated-kv", "megatron-equal-block"):
                with self.subTest(heads=heads, kv_heads=kv_heads, tp=tp, convention=convention, qk_norm=qk_norm):
                    if convention == "megatron-equal-block" and (heads + 2 * kv_heads) * head_dim % tp:
                        with self.assertRaisesRegex(attncheck.BadInput, "equal blocks"):
                            attncheck.holdings(g, tp, convention, 0)
                        continue
                    shards = [attncheck.shard_weights(full, g, tp, convention, rank) for rank in range(tp)]
                    rows = sum(shard["q_proj"].shape[0] + shard["k_proj"].shape[0] + shard["v_proj"].shape[0]
                               for shard in shards)
                    if convention == "megatron-equal-block":
                        self.assertEqual(rows, (heads + 2 * kv_heads) * head_dim)  # blocks tile, nothing repeats
                    back = attncheck.assemble_full_gradients(shards, shapes, g, tp, convention)
                    for name in full:
                        np.testing.assert_array_equal(back[name], full[name], err_msg=name)

    def test_a_missing_row_is_named(self):
        g = geometry(4, 2, 4, tp=2)
        shapes = attncheck.weight_shapes(g)
        full = {name: np.ones(shape) for name, shape in shapes.items()}
        shards = [attncheck.shard_weights(full, g, 2, "replicated-kv", rank) for rank in range(2)]
        del shards[1]["k_proj"]
        with self.assertRaisesRegex(attncheck.BadInput, "k_proj"):
            attncheck.assemble_full_gradients(shards, shapes, g, 2, "replicated-kv")

    def test_ulysses_beyond_a_tp_ranks_kv_heads_replicates_them(self):
        # heads 8/2 at TP 2 x CP 4: each TP rank holds 4 query heads and 1 KV head; each CP rank attends 1
        # query head with that KV head (as `attncheck plan --hidden 32 --heads 8 --kv-heads 2 --tp 2 --cp 4`).
        g = geometry(8, 2, 4, hidden=32)
        layout = {"cp_size": 4, "scheme": "ulysses", "chunks": None}
        held = [[attncheck.context_parallel_holdings(g, 2, tp, cp, layout, 9) for cp in range(4)] for tp in range(2)]
        self.assertEqual([h["q_heads"] for h in held[1]], [(4, 5), (5, 6), (6, 7), (7, 8)])
        self.assertEqual([h["kv_heads"] for h in held[1]], [(1, 2)] * 4)
        self.assertEqual([h["tokens"] for h in held[0]], [[0, 1, 2], [3, 4], [5, 6], [7, 8]])
        self.assertEqual([h["rank"] for h in held[1]], [1, 3, 5, 7])  # Megatron's order: TP fastest
        # heads 8/4 at TP 1 x CP 2: KV heads split, two each.
        two = [attncheck.context_parallel_holdings(geometry(8, 4, 4), 1, 0, cp, {"cp_size": 2, "scheme": "ulysses"}, 4)
               for cp in range(2)]
        self.assertEqual([h["kv_heads"] for h in two], [(0, 2), (2, 4)])

    def test_ring_chunks_load_balanced_and_contiguous(self):
        g = geometry(4, 2, 4)
        balanced = {"cp_size": 2, "scheme": "ring", "chunks": "load-balanced"}
        held = [attncheck.context_parallel_holdings(g, 2, 1, cp, balanced, 11) for cp in range(2)]
        self.assertEqual([h["tokens"] for h in held], [[0, 1, 2, 9, 10], [3, 4, 5, 6, 7, 8]])  # chunks 3,3,3,2
        self.assertEqual([(h["ring_receives_from"], h["ring_sends_to"]) for h in held], [(3, 3), (1, 1)])
        self.assertEqual(held[0]["q_heads"], (2, 4))  # the ring keeps the TP rank's heads
        contiguous = dict(balanced, chunks="contiguous")
        self.assertEqual([attncheck.context_parallel_holdings(g, 1, 0, cp, contiguous, 5)["tokens"] for cp in range(2)],
                         [[0, 1, 2], [3, 4]])
        self.assertEqual(sharding.sequence_chunks(2, 4), [(0, 1), (1, 2), (2, 2), (2, 2)])  # empty chunks

    def test_impossible_context_parallel_layouts_are_named(self):
        with self.assertRaisesRegex(attncheck.BadInput, "1/3 of its TP rank's 4 query heads"):
            attncheck.context_parallel_holdings(geometry(4, 2, 4), 1, 0, 0, {"cp_size": 3, "scheme": "ulysses"}, 6)
        with self.assertRaisesRegex(attncheck.BadInput, "neither divides"):
            attncheck.context_parallel_holdings(geometry(12, 3, 4), 1, 0, 0, {"cp_size": 2, "scheme": "ulysses"}, 6)
        with self.assertRaisesRegex(attncheck.BadInput, "known: ulysses, ring"):
            attncheck.context_parallel_holdings(geometry(4, 2, 4), 1, 0, 0, {"cp_size": 2, "scheme": "zigzag"}, 6)
        with self.assertRaisesRegex(attncheck.BadInput, r"\[1, 4096\]"):
            attncheck.context_parallel_holdings(geometry(4, 2, 4), 1, 0, 0, {"cp_size": 0, "scheme": "ring"}, 6)
        with self.assertRaisesRegex(attncheck.BadInput, "outside a layout"):
            attncheck.context_parallel_holdings(geometry(4, 2, 4), 1, 0, 2, {"cp_size": 2, "scheme": "ring"}, 6)

    def test_impossible_partitions(self):
        with self.assertRaisesRegex(attncheck.BadInput, "does not divide num_attention_heads"):
            attncheck.holdings(geometry(6, 2, 4), 4, "replicated-kv", 0)
        with self.assertRaisesRegex(attncheck.BadInput, "known"):
            sharding.check_partition(geometry(4, 2, 4), 2, "blocks")


class Candidates(unittest.TestCase):
    def test_written_as_the_schema_says(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "candidate.h5")
            ranks = [{"q_proj": np.zeros((2, 3))}, {"q_proj": np.ones((2, 3))}]
            attncheck.write_candidate(path, {"out": np.ones((1, 2, 3), dtype=np.float32)}, generator="test",
                                      tp_size=2, tp_convention="megatron-equal-block", rank_gradients=ranks,
                                      declined={"decode": "no cache\nhere"})
            with h5py.File(path) as h5:
                self.assertEqual(h5.attrs["schema_version"], 1)
                self.assertEqual(h5["result"].attrs["precision"], "fp64")
                self.assertEqual(h5["result"].attrs["tp_size"], 2)
                self.assertEqual(h5["result"].attrs["tp_convention"], "megatron-equal-block")
                self.assertEqual(h5["result/out"].dtype, np.float64)
                np.testing.assert_array_equal(h5["result/ranks/1/grads/q_proj"][()], np.ones((2, 3)))
                self.assertEqual(h5["result/declined"].attrs["decode"], "no cache here")

    def test_refusals(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "candidate.h5")
            with self.assertRaisesRegex(attncheck.BadInput, "needs per-rank gradients"):
                attncheck.write_candidate(path, {"out": np.ones(1)}, generator="t", tp_size=2)
            with self.assertRaisesRegex(attncheck.BadInput, "must hold out"):
                attncheck.write_candidate(path, {"grads/x": np.ones(1)}, generator="t")
            with self.assertRaisesRegex(attncheck.BadInput, "precision"):
                attncheck.write_candidate(path, {"out": np.ones(1)}, generator="t", precision="fp8")


class Protocol(unittest.TestCase):
    def test_answers_and_keeps_stdout_clean(self):
        def run_case(case_path, candidate_path):
            print("a stray print from some library")
            if case_path == "unsupported.h5":
                raise attncheck.Unsupported("no softcap\nhere")
            if case_path == "broken.h5":
                raise ValueError("boom")

        requests = io.StringIO("run ok.h5 c.h5\nrun unsupported.h5 c.h5\nrun broken.h5 c.h5\nhello\n")
        protocol = io.StringIO()
        stdout = sys.stdout
        self.assertEqual(attncheck.serve(run_case, "test layer", stdin=requests, protocol=protocol), 0)
        self.assertIs(sys.stdout, stdout)
        self.assertEqual(protocol.getvalue().splitlines(),
                         ["attncheck-worker 1 test layer", "ok", "unsupported no softcap here",
                          "error ValueError: boom", "error expected 'run CASE CANDIDATE', got 'hello'"])


class Capabilities(unittest.TestCase):
    def test_statement_is_checked_and_written_as_json(self):
        stated = attncheck.Capabilities(["gqa", "causal", "rope-half-split", "backward"], head_dim_multiple_of=8,
                                        precisions=["bf16"])
        self.assertEqual(json.loads(stated.to_json()),
                         {"features": ["gqa", "causal", "rope-half-split", "backward"], "head_dim_multiple_of": 8,
                          "precisions": ["bf16"]})
        self.assertTrue(stated.supports("gqa"))
        self.assertFalse(stated.supports("softcap"))
        everything_but = attncheck.Capabilities("all", without=["latent"])
        self.assertTrue(everything_but.supports("softcap"))
        self.assertFalse(everything_but.supports("latent"))
        with self.assertRaisesRegex(attncheck.BadInput, "unknown feature 'soft-cap'; valid: gqa, "):
            attncheck.Capabilities(["soft-cap"])
        with self.assertRaisesRegex(attncheck.BadInput, "max_seq 0"):
            attncheck.Capabilities("all", max_seq=0)
        with self.assertRaisesRegex(attncheck.BadInput, "precisions"):
            attncheck.Capabilities("all", precisions=["fp8"])

    def test_feature_names_are_attnchecks(self):
        cli = os.environ.get("ATTNCHECK_CLI")
        if not cli:
            self.skipTest("ATTNCHECK_CLI (the attncheck command) not given")
        listed = subprocess.run([cli, "capabilities", "--json"], check=True, capture_output=True, text=True).stdout
        self.assertEqual(tuple(feature["name"] for feature in json.loads(listed)["features"]), attncheck.FEATURES)

    def test_protocol_2_greets_then_states(self):
        requests = io.StringIO("run ok.h5 c.h5\n")
        protocol = io.StringIO()
        attncheck.serve(lambda case, candidate: None, "test layer", stdin=requests, protocol=protocol,
                        supports=["causal", "rope-half-split", "backward"])
        lines = protocol.getvalue().splitlines()
        self.assertEqual(lines[0], "attncheck-worker 2 test layer")
        self.assertEqual(lines[1], 'supports {"features":["causal","rope-half-split","backward"]}')
        self.assertEqual(lines[2:], ["ok"])


def doubling_rank(case, context):
    """A toy layer for the pool: out = x · (ranks in its group, by an all-reduce over context.group); each
    held gradient is twice the rank's weight shard."""
    import torch
    import torch.distributed as dist

    count = torch.ones(1, dtype=torch.float64)
    dist.all_reduce(count, group=context.group)
    return attncheck.RankResult(out=case.x * count.item(), grad_x=case.x,
                                gradients={name: 2 * values for name, values in case.weights.items()},
                                declined={"decode": "the toy has no cache"} if case.decode_schedule else {})


def numpy_only_rank(case, context):
    """The toy layer, refusing a shard that is not numpy arrays (what run_rank is promised, whichever way the
    shard travelled)."""
    kinds = {name: type(values).__name__ for name, values in case.weights.items()}
    if any(kind != "ndarray" for kind in kinds.values()):
        raise TypeError(f"the shard is not numpy arrays: {kinds}")
    return doubling_rank(case, context)


def noisy_rank(case, context):
    """The toy layer, printing to stdout and writing to fd 1 (the serving process's protocol pipe, had the
    rank inherited it); rank 1 fails every TP 2 case before the all-reduce, which rank 0 then waits in."""
    print("a rank's print")
    os.write(1, b"a rank's write to fd 1\n")
    if context.tp_size == 2 and context.rank == 1:
        raise ValueError("rank 1 refuses TP 2")
    return doubling_rank(case, context)


class ShardedWorker(unittest.TestCase):
    """A pool of 4 gloo processes, made once, runs cases at TP 4, 2 and 1 (one group per size, cached)."""

    def test_ranks_run_their_shards_and_the_candidate_is_assembled(self):
        from attncheck import distributed

        pool = distributed.RankPool(4, "gloo", doubling_rank, None)
        try:
            with tempfile.TemporaryDirectory() as folder:
                for golden, tp in [("qwen3-0.6b_tp4.h5", 4), ("qwen3-0.6b_tp2.h5", 2), ("qwen3-0.6b_tp1.h5", 1),
                                   ("qwen3-0.6b_tp4.h5", 4)]:
                    case_path = os.path.join(GOLDENS, golden)
                    path = os.path.join(folder, "candidate.h5")
                    distributed.run_case_sharded(pool, case_path, path, "toy", "megatron-equal-block", None,
                                                 {"precision": "bf16", "rope_angles": "float64"})
                    case = attncheck.read_case(case_path)
                    with h5py.File(path) as h5:
                        result = h5["result"]
                        self.assertEqual(result.attrs["tp_size"], tp)
                        self.assertEqual(result.attrs["precision"], "bf16")  # every precision, as declared
                        self.assertEqual(result.attrs["rope_angles"], "float64")
                        np.testing.assert_array_equal(result["out"][()], case.x * tp)
                        np.testing.assert_array_equal(result["grads/k_proj"][()], 2 * case.weights["k_proj"])
                        self.assertEqual("ranks" in result, tp > 1)
                        if tp > 1:
                            held = attncheck.holdings(case.geometry, tp, "megatron-equal-block", tp - 1)
                            np.testing.assert_array_equal(result[f"ranks/{tp - 1}/grads/q_proj"][()],
                                                          2 * case.weights["q_proj"][held["q"][0]:held["q"][1]])
                        self.assertEqual(result["declined"].attrs["decode"], "the toy has no cache")
                with self.assertRaisesRegex(attncheck.Unsupported, "runs 4 processes"):
                    distributed.run_case_sharded(pool, os.path.join(GOLDENS, "qwen3-32b_tp16.h5"), path, "toy",
                                                 "replicated-kv", None)
        finally:
            pool.stop()

    def test_shards_and_results_through_shared_memory_or_the_pipes_are_the_same(self):
        # Through /dev/shm where it has room (the default here), through the queues' pipes where it has not.
        from attncheck import distributed

        case_path = os.path.join(GOLDENS, "qwen3-0.6b_tp2.h5")
        pool = distributed.RankPool(2, "gloo", numpy_only_rank, None)
        has_room = distributed._shared_memory_has_room
        try:
            with tempfile.TemporaryDirectory() as folder:
                answers = {}
                for room in (True, False):
                    distributed._shared_memory_has_room = lambda byte_count, room=room: room
                    path = os.path.join(folder, f"candidate_{room}.h5")
                    distributed.run_case_sharded(pool, case_path, path, "toy", "replicated-kv", None)
                    with h5py.File(path) as h5:
                        answers[room] = {name: h5["result"][name][()] for name in
                                         ("out", "grads/q_proj", "ranks/1/grads/k_proj", "ranks/0/grads/o_proj")}
                weights = attncheck.read_case(case_path).weights
                np.testing.assert_array_equal(answers[True]["grads/q_proj"], 2 * weights["q_proj"])
                for name, values in answers[True].items():
                    np.testing.assert_array_equal(values, answers[False][name], err_msg=name)
        finally:
            distributed._shared_memory_has_room = has_room
            pool.stop()
        self.assertFalse(has_room(1 << 62))  # no /dev/shm holds 4 EiB: refused, never a SIGBUS in a rank

    def test_ranks_fork_from_here_only_when_everything_is_imported_and_one_thread_runs(self):
        import threading

        import torch.distributed  # noqa: F401  (imported, as in the peers' adapters)
        from attncheck import distributed

        # A fresh process with torch imported and one thread (this one may run threads other tests left).
        fresh = subprocess.run([sys.executable, "-c", "import torch.distributed; from attncheck import distributed; "
                                "print(distributed._can_fork_here([]))"], capture_output=True, text=True)
        self.assertEqual(fresh.stdout.strip(), "True", fresh.stderr[-2000:])
        self.assertFalse(distributed._can_fork_here(["attncheck.adapters.megatron_imports"]))  # not imported here
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        try:
            self.assertFalse(distributed._can_fork_here([]))  # a second thread: its locks could be copied held
        finally:
            stop.set()
            thread.join()

    def test_ranks_from_a_fork_server_run_the_same(self):
        from attncheck import distributed

        # The path every process takes that has not imported torch and the preloads itself (a worker started
        # by attncheck fuzz): the ranks are forks of a fork server.
        with unittest.mock.patch.object(distributed, "_can_fork_here", return_value=False):
            pool = distributed.RankPool(2, "gloo", doubling_rank, None)
        try:
            with tempfile.TemporaryDirectory() as folder:
                case_path = os.path.join(GOLDENS, "qwen3-0.6b_tp2.h5")
                path = os.path.join(folder, "candidate.h5")
                distributed.run_case_sharded(pool, case_path, path, "toy", "megatron-equal-block", None)
                with h5py.File(path) as h5:
                    np.testing.assert_array_equal(h5["result/out"][()], attncheck.read_case(case_path).x * 2)
        finally:
            pool.stop()

    def test_failed_rank_restarts_the_pool_and_ranks_never_write_to_the_protocol(self):
        from attncheck import distributed

        # The failure is reported when rank 1 fails, not when rank 0 gives up waiting in the all-reduce:
        # had the pool waited for rank 0, this case would end in "gave no answer" after 50 s.
        patched = unittest.mock.patch.dict(os.environ, {"ATTNCHECK_WORKER_TIMEOUT": "60"})
        patched.start()
        self.addCleanup(patched.stop)
        with tempfile.TemporaryDirectory() as folder:
            protocol = os.path.join(folder, "fd1")
            saved = os.dup(1)
            try:
                # fd 1 stands for the protocol's pipe from before the pool (and its fork server) start
                with open(protocol, "wb") as sink:
                    sys.stdout.flush()
                    os.dup2(sink.fileno(), 1)
                pool = distributed.RankPool(2, "gloo", noisy_rank, None)
                try:
                    path = os.path.join(folder, "candidate.h5")
                    with self.assertRaisesRegex(RuntimeError, "rank 1 of 2 failed: ValueError: rank 1 refuses TP 2"):
                        distributed.run_case_sharded(pool, os.path.join(GOLDENS, "qwen3-0.6b_tp2.h5"), path, "toy",
                                                     "megatron-equal-block", None)
                    case_path = os.path.join(GOLDENS, "qwen3-0.6b_tp1.h5")
                    distributed.run_case_sharded(pool, case_path, path, "toy", "megatron-equal-block", None)
                    with h5py.File(path) as h5:
                        np.testing.assert_array_equal(h5["result/out"][()], attncheck.read_case(case_path).x)
                finally:
                    pool.stop()
            finally:
                sys.stdout.flush()
                os.dup2(saved, 1)
                os.close(saved)
            with open(protocol, "rb") as written:
                self.assertEqual(written.read(), b"")


class Adapters(unittest.TestCase):
    """The framework adapters are modules of the package (run as `python -m attncheck.adapters.NAME`),
    installed with it, and importing the package imports neither them nor the frameworks."""

    def test_adapters_are_modules_of_the_package(self):
        import importlib.util

        folder = os.path.join(os.path.dirname(os.path.abspath(attncheck.__file__)), "adapters")
        for name in ["hf_transformers", "megatron_core", "megatron_imports"]:
            spec = importlib.util.find_spec(f"attncheck.adapters.{name}")  # found, not run
            self.assertIsNotNone(spec, name)
            self.assertEqual(os.path.dirname(os.path.abspath(spec.origin)), folder, name)

    def test_pip_install_takes_every_subpackage(self):
        try:
            import tomllib
        except ImportError:  # Python 3.10
            self.skipTest("tomllib is Python 3.11's")
        root = os.path.dirname(os.path.abspath(attncheck.__file__))
        with open(os.path.join(root, "..", "pyproject.toml"), "rb") as file:
            listed = set(tomllib.load(file)["tool"]["setuptools"]["packages"])
        found = {os.path.relpath(folder, os.path.dirname(root)).replace(os.sep, ".")
                 for folder, _, files in os.walk(root) if "__init__.py" in files}
        self.assertEqual(listed, found)

    def test_importing_the_package_imports_no_framework(self):
        import subprocess

        probe = ("import sys, attncheck, attncheck.adapters; "
                 "print(sorted(m for m in ('torch', 'transformers', 'megatron', 'attncheck.adapters.hf_transformers',"
                 " 'attncheck.adapters.megatron_core') if m in sys.modules))")
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                                    os.path.abspath(attncheck.__file__)))))
        self.assertEqual(result.stdout.strip(), "[]")


if __name__ == "__main__":
    unittest.main()
