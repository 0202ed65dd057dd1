"""attncheck's weight and input generator v1 ("attncheck-splitmix64-v1") and sketch
("attncheck-sketch-v1"), in plain Python (no dependencies), and vectorised with numpy for big layers.

Golden and case files may name their weights, and their inputs x and dout, by this generator and a seed
instead of storing them (golden/SCHEMA.md, "Weight generator v1", "Input generator v1"). This module is
those sections written as code, and the only Python implementation of them: attncheck.case and every
adapter use it. core/generation/input_generation.cpp is the C++ side; ctest `golden.python_generator`
checks that the two agree value for value.

    python3 -m attncheck.generator --check DUMP.json   # compare with a dump from golden/generator_dump
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


def small_vector(seed, name, size, base, exponent=-7):
    stream = Stream(seed, name)
    return [base + stream.symmetric_integer(32) * math.ldexp(1.0, exponent) for _ in range(size)]


def _latent_weights(geometry, seed, rows, vector, transpose):
    """SCHEMA.md "Weight generator v1", latent attention (schema version 3). rows(name, heads, head_rows, cols,
    target) draws head blocks; vector(name, size, base, exponent) a vector; transpose(matrix, rows, cols)."""
    hidden, heads = geometry["hidden_size"], geometry["num_attention_heads"]
    qk = geometry["qk_nope_head_dim"] + geometry["qk_rope_head_dim"]
    v_dim, q_lora, kv_lora = geometry["v_head_dim"], geometry["q_lora_rank"], geometry["kv_lora_rank"]
    weights = {}
    value_width = heads * v_dim
    weights["o_proj"] = transpose(rows("o_proj", heads, v_dim, hidden, 1 / math.sqrt(value_width)), value_width, hidden)
    if geometry.get("attention_sinks", 0):
        weights["sinks"] = vector("sinks", heads, 0.0, -3)
    if q_lora:
        weights["q_a_proj"] = rows("q_a_proj", 1, q_lora, hidden, 1 / math.sqrt(hidden))
        weights["q_a_layernorm"] = vector("q_a_layernorm", q_lora, 1.0, -7)
        weights["q_b_proj"] = rows("q_b_proj", heads, qk, q_lora, 1 / math.sqrt(q_lora))
    else:
        weights["q_proj"] = rows("q_proj", heads, qk, hidden, 1 / math.sqrt(hidden))
    weights["kv_a_proj_with_mqa"] = rows("kv_a_proj_with_mqa", 1, kv_lora + geometry["qk_rope_head_dim"], hidden,
                                         1 / math.sqrt(hidden))
    weights["kv_a_layernorm"] = vector("kv_a_layernorm", kv_lora, 1.0, -7)
    weights["kv_b_proj"] = rows("kv_b_proj", heads, geometry["qk_nope_head_dim"] + v_dim, kv_lora,
                                1 / math.sqrt(kv_lora))
    return weights


def generate_weights(geometry, seed):
    """geometry: dict with hidden_size, num_attention_heads, num_key_value_heads, head_dim, qk_norm,
    qkv_bias, out_bias (as in a golden's /geometry, head_dim resolved), and a latent layer's widths (schema
    version 3). Returns {name: flat list}."""
    if geometry.get("attention") == "latent":
        return _latent_weights(
            geometry, seed,
            lambda name, heads, head_rows, cols, target: head_blocked_rows(seed, name, heads, head_rows, cols, target),
            lambda name, size, base, exponent: small_vector(seed, name, size, base, exponent),
            lambda matrix, rows, cols: [matrix[row * cols + col] for col in range(cols) for row in range(rows)])
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
        base = 0.0 if geometry["qk_norm"] == "rms-one-plus" else 1.0
        full_width = geometry["qk_norm"] == "rms-full-width"
        weights["q_norm"] = small_vector(seed, "q_norm", query_width if full_width else head_dim, base)
        weights["k_norm"] = small_vector(seed, "k_norm", kv_heads * head_dim if full_width else head_dim, base)
    if geometry.get("attention_sinks", 0):
        # Sink logits within 4 on a 1/8 grid (schema version 2).
        weights["sinks"] = small_vector(seed, "sinks", heads, 0.0, -3)
    return weights


def uniform_below(stream, bound):
    """Uniform in [0, bound) by rejection."""
    limit = MASK - MASK % bound
    while True:
        value = stream.next()
        if value < limit:
            return value % bound


def outlier_channels(seed, name, hidden):
    """The hidden channels scaled by 32 under the `outliers` distribution (max(1, hidden // 32) draws)."""
    stream = Stream(seed, name + "/outlier-channels")
    return {uniform_below(stream, hidden) for _ in range(max(1, hidden // 32))}


def generate_activations(seed, name, shape, distribution):
    """x or dout ([batch, seq, hidden], flat row-major list) as SCHEMA.md's "Input generator v1" says."""
    count = shape[0] * shape[1] * shape[2]
    hidden = shape[2]
    stream = Stream(seed, name)
    outliers = outlier_channels(seed, name, hidden) if distribution == "outliers" else set()
    values = []
    for i in range(count):
        value = math.ldexp(float(stream.symmetric_integer(64)), -6)
        if distribution == "heavy-tailed":
            doublings = 0
            while doublings < 6 and stream.next() >> 63:
                doublings += 1
            value = math.ldexp(value, doublings)
        elif distribution == "outliers" and i % hidden in outliers:
            value = math.ldexp(value, 5)
        values.append(value)
    return values


def generate_activations_numpy(seed, name, shape, distribution):
    """generate_activations() as a float64 array of `shape`. uniform and outliers are vectorised; heavy-tailed
    draws a variable number of outputs per value, so it runs the plain loop (slow beyond ~10^6 values)."""
    import numpy as np

    if distribution == "heavy-tailed":
        return np.array(generate_activations(seed, name, shape, distribution), dtype=np.float64).reshape(shape)
    if distribution not in ("uniform", "outliers"):
        raise ValueError(f"unknown activation distribution '{distribution}'")
    count = shape[0] * shape[1] * shape[2]
    values = _symmetric_integers(np, seed, name, 0, 64, count).astype(np.float64) * math.ldexp(1.0, -6)
    values = values.reshape(shape)
    if distribution == "outliers":
        channels = sorted(outlier_channels(seed, name, shape[2]))
        values[:, :, channels] *= 32.0
    return values


# The same generator vectorised with numpy, for readers that need real layers (Qwen3-32B attention has
# ~10^8 weights: minutes in plain Python, seconds here). SplitMix64's state after k steps is
# state + k * gamma, so every output of a stream is computed at once; a rejected draw (probability
# about 2^-56 per value) drops out of the filtered array, exactly as the loop above skips it.
GAMMA = 0x9E3779B97F4A7C15


def _stream_outputs(np, seed, name, draw, first, count, scratch=None):
    """Outputs first … first + count − 1 of a stream (output 1 is the discarded one). In place: a layer's
    tensors are 10^7-10^8 values, and every temporary is that many fresh pages. scratch: a _Scratch of `count`
    values to compute in (the result is its buffer, valid until its next use), so that a tensor's heads reuse
    the same memory rather than each taking pages the allocator just handed back to the kernel."""
    start = (seed ^ fnv1a64(name) ^ ((draw * 0xD1B54A32D192ED03) & MASK)) & MASK
    if scratch is None:
        z = np.arange(first, first + count, dtype=np.uint64)
        shifted = np.empty_like(z)
    else:
        z, shifted = scratch.outputs, scratch.shifted
        np.add(scratch.steps, np.uint64(first), out=z)
    z *= np.uint64(GAMMA)
    z += np.uint64(start)
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(z, np.uint64(shift), out=shifted)
        z ^= shifted
        z *= np.uint64(multiplier)
    np.right_shift(z, np.uint64(31), out=shifted)
    z ^= shifted
    return z


class _Scratch:
    """The buffers _stream_outputs computes `count` outputs in: steps holds 0 … count − 1 (a stream's outputs
    first … first + count − 1 are first + steps, times gamma, plus its start), outputs and shifted the work."""

    def __init__(self, np, count):
        self.steps = np.arange(count, dtype=np.uint64)
        self.outputs = np.empty_like(self.steps)
        self.shifted = np.empty_like(self.steps)


def _symmetric_integers(np, seed, name, draw, amplitude, count, scratch=None):
    """int64 [count]: the stream's symmetric_integer(amplitude) draws (in scratch's buffer when given)."""
    size = 2 * amplitude + 1
    limit = np.uint64(MASK - MASK % size)
    values = _stream_outputs(np, seed, name, draw, 2, count, scratch)
    first = 2 + count
    if count and values.max() >= limit:  # rejections (about 2^-56 a value): drop them and draw on
        accepted = values[values < limit]
        while accepted.size < count:
            wanted = count - accepted.size
            more = _stream_outputs(np, seed, name, draw, first, wanted)
            first += wanted
            accepted = np.concatenate([accepted, more[more < limit]])
        values = accepted
    values %= np.uint64(size)
    integers = values.view(np.int64)  # each below size: the same bits as int64
    integers -= amplitude
    return integers


def _head_blocked_rows_numpy(np, seed, name, heads, head_dim, cols, target_std, transposed=False, out=None,
                             scratch=None):
    """float64 [heads * head_dim, cols] (or its transpose, [cols, heads * head_dim], written block by block rather
    than transposed whole: numpy's transposing copy of a 10^8-value matrix took seconds); into `out` when given.
    scratch: a _Scratch of head_dim * cols values (one is made when none is given), shared by tensors alike."""
    unit = math.ldexp(1.0, exponent_for(target_std, rms_head_amplitude()))
    rows = heads * head_dim
    result = np.empty((cols, rows) if transposed else (rows, cols), dtype=np.float64) if out is None else out
    seen = set()  # the blocks drawn so far, as int8 bytes (each value within ±127: equal as int8 iff equal)
    if scratch is None:
        scratch = _Scratch(np, head_dim * cols)  # every head's draws computed in the same buffers
    for head in range(heads):
        amplitude = HEAD_AMPLITUDES[head % len(HEAD_AMPLITUDES)]
        for draw in range(65):
            block = _symmetric_integers(np, seed, f"{name}/head{head}", draw, amplitude, head_dim * cols, scratch)
            key = block.astype(np.int8).tobytes()
            if key not in seen:
                break
        else:
            raise ValueError("cannot make head weights distinct")
        seen.add(key)
        block = block.reshape(head_dim, cols)
        if transposed:
            target = result[:, head * head_dim:(head + 1) * head_dim]
            for first in range(0, head_dim, 64):  # 64 rows at a time: cache-sized pieces of the transpose
                np.multiply(block[first:first + 64].T, unit, out=target[:, first:first + 64], casting="unsafe")
        else:
            np.multiply(block, unit, out=result[head * head_dim:(head + 1) * head_dim], casting="unsafe")
    return result


def generate_weights_numpy(geometry, seed):
    """generate_weights() with numpy: {name: float64 array in the golden's shape}, value for value the
    same (checked by check())."""
    import numpy as np

    def vector(name, size, base, exponent=-7):
        return base + _symmetric_integers(np, seed, name, 0, 32, size).astype(np.float64) * math.ldexp(1.0, exponent)

    if geometry.get("attention") == "latent":
        return _latent_weights(
            geometry, seed,
            lambda name, heads, head_rows, cols, target: _head_blocked_rows_numpy(np, seed, name, heads, head_rows,
                                                                                  cols, target),
            vector, lambda matrix, rows, cols: np.ascontiguousarray(matrix.T))

    hidden = geometry["hidden_size"]
    heads = geometry["num_attention_heads"]
    kv_heads = geometry["num_key_value_heads"]
    head_dim = geometry["head_dim"]
    query_width = heads * head_dim

    # q_proj, k_proj and v_proj are consecutive row blocks of one array, each a view of it: a layer that fuses
    # them ([q; k; v] rows, as attncheck.adapters.torch_layer and most frameworks do) can take that array as it is
    # rather than copy a layer's worth of weights into fresh memory (attncheck.adapters.torch_layer.fused_rows).
    kv_width = kv_heads * head_dim
    fused = np.empty((query_width + 2 * kv_width, hidden), dtype=np.float64)
    blocks = {"q_proj": fused[:query_width], "k_proj": fused[query_width:query_width + kv_width],
              "v_proj": fused[query_width + kv_width:]}
    scratch = _Scratch(np, head_dim * hidden)  # a head block of each of the four is head_dim x hidden
    for name, count in (("q_proj", heads), ("k_proj", kv_heads), ("v_proj", kv_heads)):
        _head_blocked_rows_numpy(np, seed, name, count, head_dim, hidden, 1 / math.sqrt(hidden), out=blocks[name],
                                 scratch=scratch)
    weights = dict(blocks)
    weights["o_proj"] = _head_blocked_rows_numpy(np, seed, "o_proj", heads, head_dim, hidden,
                                                 1 / math.sqrt(query_width), transposed=True, scratch=scratch)
    if geometry["qkv_bias"]:
        weights["q_bias"] = vector("q_bias", query_width, 0.0)
        weights["k_bias"] = vector("k_bias", kv_heads * head_dim, 0.0)
        weights["v_bias"] = vector("v_bias", kv_heads * head_dim, 0.0)
    if geometry["out_bias"]:
        weights["o_bias"] = vector("o_bias", hidden, 0.0)
    if geometry["qk_norm"] != "none":
        base = 0.0 if geometry["qk_norm"] == "rms-one-plus" else 1.0
        full_width = geometry["qk_norm"] == "rms-full-width"
        weights["q_norm"] = vector("q_norm", query_width if full_width else head_dim, base)
        weights["k_norm"] = vector("k_norm", kv_heads * head_dim if full_width else head_dim, base)
    if geometry.get("attention_sinks", 0):
        weights["sinks"] = vector("sinks", heads, 0.0, -3)
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
    try:
        import numpy  # noqa: F401  (optional: the plain-Python generator needs nothing)

        numpy_available = True
    except ImportError:
        numpy_available = False
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
        if numpy_available:
            vectorised = generate_weights_numpy(case["geometry"], case["seed"])
            for name in ours:
                flat = vectorised[name].ravel().tolist() if name in vectorised else []
                if flat != theirs[name]:
                    print(f"seed {case['seed']} {name}: the numpy generator differs")
                    failures += 1
    for case in dump.get("activations", []):
        shape = case["shape"]
        ours = generate_activations(case["seed"], case["name"], shape, case["distribution"])
        if ours != case["values"]:
            print(f"activations {case['name']} {case['distribution']}: the plain generator differs")
            failures += 1
        if numpy_available:
            vectorised = generate_activations_numpy(case["seed"], case["name"], shape, case["distribution"])
            if vectorised.ravel().tolist() != case["values"]:
                print(f"activations {case['name']} {case['distribution']}: the numpy generator differs")
                failures += 1
    for case in dump.get("sketches", []):
        ours = sketch(case["values"], case["rows"], case["cols"], case["along_columns"])
        worst = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(ours, case["sketch"]))
        if len(ours) != len(case["sketch"]) or worst > 1e-12:
            print(f"sketch of {case['name']}: differs by {worst}")
            failures += 1
    numpy_note = "plain Python and numpy" if numpy_available else "plain Python only (numpy absent)"
    print(f"{len(dump['cases'])} cases ({numpy_note}), {len(dump.get('activations', []))} activation tensors, "
          f"{len(dump.get('sketches', []))} sketches, {failures} failures")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
