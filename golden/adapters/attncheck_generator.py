#!/usr/bin/env python3
"""attncheck's weight generator v1 ("attncheck-splitmix64-v1") and gradient sketch
("attncheck-sketch-v1"), in plain Python (no dependencies).

Golden files may name their weights by this generator and a seed instead of storing them
(golden/SCHEMA.md, "Weight generator v1"). This module is that section written as code, so that a
reader in Python can rebuild them; core/input_generation.cpp is the C++ side, and ctest
`golden.python_generator` checks that the two agree value for value.

    python3 attncheck_generator.py --check DUMP.json   # compare with a dump from golden/generator_dump
"""
import json
import math
import sys

MASK = (1 << 64) - 1
HEAD_AMPLITUDES = [112, 64, 88, 48, 127, 72, 56, 100]


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for byte in name.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


class Stream:
    """SplitMix64 keyed by (seed, tensor name, draw)."""

    def __init__(self, seed, name, draw=0):
        self.state = (seed ^ fnv1a64(name) ^ ((draw * 0xD1B54A32D192ED03) & MASK)) & MASK
        self.next()  # the first output is discarded

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def symmetric_integer(self, amplitude):
        """Uniform in [-amplitude, amplitude] by rejection (no modulo bias)."""
        size = 2 * amplitude + 1
        limit = MASK - MASK % size
        while True:
            value = self.next()
            if value < limit:
                return value % size - amplitude


def exponent_for(target, amplitude):
    """The power of two giving integers uniform in [-amplitude, amplitude] a std near target
    (C's lround: halves round away from zero)."""
    x = math.log2(target / (amplitude / math.sqrt(3.0)))
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def rms_head_amplitude():
    return math.sqrt(sum(a * a for a in HEAD_AMPLITUDES) / len(HEAD_AMPLITUDES))


def head_blocked_rows(seed, name, heads, head_dim, cols, target_std):
    """[heads * head_dim, cols] row-major; each head's block redrawn while it equals an earlier one."""
    exponent = exponent_for(target_std, rms_head_amplitude())
    unit = math.ldexp(1.0, exponent)
    blocks = []
    for head in range(heads):
        amplitude = HEAD_AMPLITUDES[head % len(HEAD_AMPLITUDES)]
        for draw in range(65):
            stream = Stream(seed, f"{name}/head{head}", draw)
            block = [stream.symmetric_integer(amplitude) * unit for _ in range(head_dim * cols)]
            if block not in blocks:
                break
        else:
            raise ValueError("cannot make head weights distinct")
        blocks.append(block)
    return [value for block in blocks for value in block]


def small_vector(seed, name, size, base):
    stream = Stream(seed, name)
    return [base + stream.symmetric_integer(32) * math.ldexp(1.0, -7) for _ in range(size)]


def generate_weights(geometry, seed):
    """geometry: dict with hidden_size, num_attention_heads, num_key_value_heads, head_dim, qk_norm,
    qkv_bias, out_bias (as in a golden's /geometry, head_dim resolved). Returns {name: flat list}."""
    hidden = geometry["hidden_size"]
    heads = geometry["num_attention_heads"]
    kv_heads = geometry["num_key_value_heads"]
    head_dim = geometry["head_dim"]
    weights = {
        "q_proj": head_blocked_rows(seed, "q_proj", heads, head_dim, hidden, 1 / math.sqrt(hidden)),
        "k_proj": head_blocked_rows(seed, "k_proj", kv_heads, head_dim, hidden, 1 / math.sqrt(hidden)),
        "v_proj": head_blocked_rows(seed, "v_proj", kv_heads, head_dim, hidden, 1 / math.sqrt(hidden)),
    }
    query_width = heads * head_dim
    transposed = head_blocked_rows(seed, "o_proj", heads, head_dim, hidden, 1 / math.sqrt(query_width))
    weights["o_proj"] = [transposed[row * hidden + col] for col in range(hidden) for row in range(query_width)]
    if geometry["qkv_bias"]:
        weights["q_bias"] = small_vector(seed, "q_bias", query_width, 0.0)
        weights["k_bias"] = small_vector(seed, "k_bias", kv_heads * head_dim, 0.0)
        weights["v_bias"] = small_vector(seed, "v_bias", kv_heads * head_dim, 0.0)
    if geometry["out_bias"]:
        weights["o_bias"] = small_vector(seed, "o_bias", hidden, 0.0)
    if geometry["qk_norm"] != "none":
        base = 1.0 if geometry["qk_norm"] == "rms" else 0.0
        weights["q_norm"] = small_vector(seed, "q_norm", head_dim, base)
        weights["k_norm"] = small_vector(seed, "k_norm", head_dim, base)
    return weights


def sketch(values, rows, cols, along_columns):
    """attncheck-sketch-v1 of a [rows, cols] row-major gradient: per line along the head axis (rows, or
    columns for o_proj) [2-norm, dot products with 3 vectors of +-1]."""
    lines, length = (cols, rows) if along_columns else (rows, cols)
    stream = Stream(0, "attncheck-sketch-v1")
    signs = [[-1.0 if stream.next() >> 63 else 1.0 for _ in range(3)] for _ in range(length)]
    result = []
    for line in range(lines):
        line_values = [values[j * cols + line] if along_columns else values[line * cols + j] for j in range(length)]
        result.append(math.sqrt(sum(v * v for v in line_values)))
        result.extend(sum(v * signs[j][p] for j, v in enumerate(line_values)) for p in range(3))
    return result


def check(dump_path):
    with open(dump_path) as f:
        dump = json.load(f)
    failures = 0
    for case in dump["cases"]:
        ours = generate_weights(case["geometry"], case["seed"])
        theirs = case["weights"]
        if sorted(ours) != sorted(theirs):
            print(f"seed {case['seed']}: tensors {sorted(ours)} vs {sorted(theirs)}")
            failures += 1
            continue
        for name in ours:
            bad = [i for i, (a, b) in enumerate(zip(ours[name], theirs[name])) if a != b]
            if len(ours[name]) != len(theirs[name]) or bad:
                print(f"seed {case['seed']} {name}: {len(bad)} values differ (first at {bad[:1]})")
                failures += 1
    for case in dump.get("sketches", []):
        ours = sketch(case["values"], case["rows"], case["cols"], case["along_columns"])
        worst = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(ours, case["sketch"]))
        if len(ours) != len(case["sketch"]) or worst > 1e-12:
            print(f"sketch of {case['name']}: differs by {worst}")
            failures += 1
    print(f"{len(dump['cases'])} cases, {len(dump.get('sketches', []))} sketches, {failures} failures")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
