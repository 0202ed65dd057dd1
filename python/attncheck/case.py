"""Reading a case file (or a golden: its /expected is ignored) as golden/SCHEMA.md v1 defines it, into
a Case: the geometry, the inputs and the weights, generated ones rebuilt by attncheck.generator.

Only what SCHEMA.md documents is read, and every departure from it is a BadInput naming the object
and what would be valid. The helpers below (resolved head_dim, masks, RoPE angles) are SCHEMA.md's
definitions written once, so that an adapter feeds its framework exactly what the reference means.
"""
import dataclasses
import math
import os

import numpy as np

from . import generator
from .errors import BadInput

REQUIRED_GEOMETRY = ["hidden_size", "num_attention_heads", "num_key_value_heads", "rotary_dim", "rope_theta",
                     "rope_style", "qk_norm", "qk_norm_eps", "qkv_bias", "out_bias", "scale", "causal", "tp_size"]
OPTIONAL_GEOMETRY = ["head_dim", "query_pre_attn_scalar", "softcap", "sliding_window", "tp_convention"]
GENERATOR = "attncheck-splitmix64-v1"
TP_CONVENTIONS = ("replicated-kv", "megatron-equal-block")


def resolved_head_dim(geometry):
    """SCHEMA.md: an absent head_dim means hidden_size / num_attention_heads, which must divide exactly.
    The one place in Python where head_dim comes from the quotient."""
    if "head_dim" in geometry:
        return geometry["head_dim"]
    hidden, heads = geometry["hidden_size"], geometry["num_attention_heads"]
    if heads <= 0 or hidden % heads != 0:
        raise BadInput(f"head_dim is omitted and hidden_size {hidden} is not a multiple of "
                       f"num_attention_heads {heads}; give head_dim explicitly")
    return hidden // heads


def weight_shapes(geometry):
    """{weight name: shape} for a geometry (SCHEMA.md "/weights", Hugging Face layout [out, in])."""
    hidden, heads, kv_heads = geometry["hidden_size"], geometry["num_attention_heads"], geometry["num_key_value_heads"]
    head_dim = resolved_head_dim(geometry)
    shapes = {"q_proj": (heads * head_dim, hidden), "k_proj": (kv_heads * head_dim, hidden),
              "v_proj": (kv_heads * head_dim, hidden), "o_proj": (hidden, heads * head_dim)}
    if geometry["qkv_bias"]:
        shapes.update(q_bias=(heads * head_dim,), k_bias=(kv_heads * head_dim,), v_bias=(kv_heads * head_dim,))
    if geometry["out_bias"]:
        shapes["o_bias"] = (hidden,)
    if geometry["qk_norm"] != "none":
        shapes.update(q_norm=(head_dim,), k_norm=(head_dim,))
    return shapes


def rope_inverse_frequencies(geometry):
    """float64 [rotary_dim / 2]: pow(rope_theta, -2i / rotary_dim) by C's pow (math.pow), SCHEMA.md
    "RoPE rounding" (numpy's power differs by an ulp for some i, which large positions magnify)."""
    rotary_dim, theta = geometry["rotary_dim"], float(geometry["rope_theta"])
    return np.array([math.pow(theta, -2.0 * i / rotary_dim) for i in range(rotary_dim // 2)], dtype=np.float64)


@dataclasses.dataclass
class Case:
    """One case. geometry: /geometry's attributes as stored (head_dim absent when the case omits it);
    x, dout: float64 [batch, seq, hidden_size]; position_ids: int64 [batch, seq]; key_lengths: int64
    [batch] (seq where the file has none); decode_schedule: [prefill, step, ...] or None; weights:
    {name: float64 array in SCHEMA's shape}."""

    path: str
    geometry: dict
    x: np.ndarray
    position_ids: np.ndarray
    dout: np.ndarray
    key_lengths: np.ndarray
    decode_schedule: list
    weights: dict

    @property
    def head_dim(self):
        return resolved_head_dim(self.geometry)

    @property
    def num_heads(self):
        return self.geometry["num_attention_heads"]

    @property
    def num_kv_heads(self):
        return self.geometry["num_key_value_heads"]

    @property
    def hidden_size(self):
        return self.geometry["hidden_size"]

    @property
    def tp_size(self):
        return self.geometry["tp_size"]

    @property
    def tp_convention(self):
        return self.geometry.get("tp_convention", "replicated-kv")

    @property
    def batch(self):
        return self.x.shape[0]

    @property
    def seq(self):
        return self.x.shape[1]

    @property
    def has_padding(self):
        return bool((self.key_lengths < self.seq).any())

    def visible_keys(self, queries=None, keys=None):
        """bool [batch, queries, keys]: whether query i sees key j (SCHEMA.md's masks, by sequence index:
        causal bottom-right aligned, a window bounding keys from below, padding from key_lengths). By
        default the whole sequence; for a decode step, queries are the step's last rows of `keys`."""
        keys = self.seq if keys is None else keys
        queries = keys if queries is None else queries
        query_index = np.arange(keys - queries, keys)[:, None]  # the queries' sequence indices
        key_index = np.arange(keys)[None, :]
        visible = np.ones((queries, keys), dtype=bool)
        if self.geometry["causal"]:
            visible &= key_index <= query_index
        if "sliding_window" in self.geometry:
            visible &= key_index > query_index - self.geometry["sliding_window"]
        padding = key_index[None, :, :] < self.key_lengths[:, None, None]
        return visible[None, :, :] & padding

    def queries_seeing_no_key(self):
        """Whether some query sees no key (its context is 0 and its out row o_bias, SCHEMA.md): many
        frameworks cannot express that and decline such cases."""
        return bool((~self.visible_keys().any(axis=2)).any())

    def rope_inverse_frequencies(self):
        return rope_inverse_frequencies(self.geometry)

    def rope_angles(self, positions=None):
        """float64 [..., rotary_dim / 2]: position x inv_freq in float64 for the case's position_ids (or
        `positions`). Pair i rotates channels (i, i + rotary_dim/2) for half-split, (2i, 2i+1) interleaved."""
        positions = self.position_ids if positions is None else np.asarray(positions)
        return positions.astype(np.float64)[..., None] * self.rope_inverse_frequencies()

    def describe(self):
        g = self.geometry
        parts = [f"hidden {g['hidden_size']}", f"heads {g['num_attention_heads']}/{g['num_key_value_heads']}",
                 f"head_dim {self.head_dim}" + ("" if "head_dim" in g else " (omitted)"),
                 f"batch {self.batch} seq {self.seq}", f"tp {self.tp_size}"]
        return ", ".join(parts)


def attribute_value(value):
    """An HDF5 attribute as a Python scalar (h5py gives bytes, numpy scalars or 1-element arrays)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise BadInput(f"attribute of shape {value.shape}; attributes are scalars")
        value = value.reshape(()).item()
    if isinstance(value, np.generic):
        value = value.item()
    return value


def _dataset(h5, path, dtype, shape, file_path):
    if path not in h5 or not hasattr(h5[path], "dtype"):
        raise BadInput(f"{file_path}: dataset /{path} is missing (see golden/SCHEMA.md)")
    dataset = h5[path]
    if dataset.dtype != np.dtype(dtype):
        raise BadInput(f"{file_path}: /{path} is {dataset.dtype}; schema v1 stores it as {np.dtype(dtype)}")
    if shape is not None and tuple(dataset.shape) != tuple(shape):
        raise BadInput(f"{file_path}: /{path} has shape {list(dataset.shape)}; expected {list(shape)}")
    values = dataset[()]
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise BadInput(f"{file_path}: /{path} holds NaN or Inf")
    return values


def read_case(path):
    """The Case in a case file or golden at `path`; BadInput for anything SCHEMA.md does not allow."""
    import h5py

    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    try:
        with h5py.File(path, "r") as h5:
            return _read_open_case(h5, path)
    except OSError as error:  # not HDF5, truncated, checksum failure
        raise BadInput(f"{path}: cannot be read as HDF5 ({error})") from error


def read_geometry(path):
    """Only /geometry of the case at `path` (cheap: no inputs, no weights), e.g. to refuse a case before
    rebuilding gigabytes of generated weights."""
    import h5py

    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    try:
        with h5py.File(path, "r") as h5:
            return _read_geometry(h5, path)
    except OSError as error:
        raise BadInput(f"{path}: cannot be read as HDF5 ({error})") from error


def _read_geometry(h5, path):
    if "geometry" not in h5:
        raise BadInput(f"{path}: group /geometry is missing")
    attributes = h5["geometry"].attrs
    missing = [name for name in REQUIRED_GEOMETRY if name not in attributes]
    if missing:
        raise BadInput(f"{path}: /geometry lacks required attribute(s) {', '.join(missing)}")
    geometry = {name: attribute_value(attributes[name]) for name in REQUIRED_GEOMETRY + OPTIONAL_GEOMETRY
                if name in attributes}
    for name in ("hidden_size", "num_attention_heads", "num_key_value_heads", "tp_size"):
        if not isinstance(geometry[name], int) or geometry[name] < 1:
            raise BadInput(f"{path}: /geometry@{name} is {geometry[name]!r}; expected a positive integer")
    if geometry["num_attention_heads"] % geometry["num_key_value_heads"]:
        raise BadInput(f"{path}: num_attention_heads {geometry['num_attention_heads']} is not a multiple of "
                       f"num_key_value_heads {geometry['num_key_value_heads']}")
    if geometry.get("tp_convention", "replicated-kv") not in TP_CONVENTIONS:
        raise BadInput(f"{path}: /geometry@tp_convention is '{geometry['tp_convention']}'; "
                       f"known: {', '.join(TP_CONVENTIONS)}")
    resolved_head_dim(geometry)
    return geometry


def _unsigned_seed(attributes, where, path):
    if "seed" not in attributes:
        raise BadInput(f"{path}: {where} names a generator but has no seed attribute")
    if not isinstance(attribute_value(attributes["seed"]), int):
        raise BadInput(f"{path}: {where}@seed must be an integer (int64), not {attribute_value(attributes['seed'])!r}")
    return attribute_value(attributes["seed"]) & generator.MASK  # int64 attribute, the unsigned seed's bits


def _read_inputs(h5, geometry, path):
    """x, dout and position_ids: stored, or x and dout named by the input generator."""
    if "inputs" not in h5:
        raise BadInput(f"{path}: group /inputs is missing")
    hidden = geometry["hidden_size"]
    named = attribute_value(h5["inputs"].attrs.get("generator", ""))
    if not named:
        x = _dataset(h5, "inputs/x", "<f8", None, path)
        if x.ndim != 3 or x.shape[2] != hidden or min(x.shape) < 1:
            raise BadInput(f"{path}: /inputs/x has shape {list(x.shape)}; expected [batch, seq, {hidden}]")
        batch, seq = x.shape[:2]
        return x, _dataset(h5, "inputs/position_ids", "<i8", (batch, seq), path), \
            _dataset(h5, "inputs/dout", "<f8", (batch, seq, hidden), path)
    if named != GENERATOR:
        raise BadInput(f"{path}: /inputs@generator is '{named}'; known: {GENERATOR}")
    for name in ("x", "dout"):
        if f"inputs/{name}" in h5:
            raise BadInput(f"{path}: /inputs names a generator and also stores {name} (the file disagrees with itself)")
    attributes = h5["inputs"].attrs
    seed = _unsigned_seed(attributes, "/inputs", path)
    distribution = attribute_value(attributes.get("activations", ""))
    if distribution not in ("uniform", "heavy-tailed", "outliers"):
        raise BadInput(f"{path}: /inputs@activations is '{distribution}'; expected uniform, heavy-tailed or outliers")
    positions = _dataset(h5, "inputs/position_ids", "<i8", None, path)
    if positions.ndim != 2 or min(positions.shape) < 1:
        raise BadInput(f"{path}: /inputs/position_ids has shape {list(positions.shape)}; expected [batch, seq]")
    shape = (positions.shape[0], positions.shape[1], hidden)
    return (generator.generate_activations_numpy(seed, "x", shape, distribution), positions,
            generator.generate_activations_numpy(seed, "dout", shape, distribution))


def _read_weights(h5, geometry, path):
    shapes = weight_shapes(geometry)
    named = attribute_value(h5["weights"].attrs.get("generator", "")) if "weights" in h5 else ""
    if named:
        if named != GENERATOR:
            raise BadInput(f"{path}: /weights@generator is '{named}'; known: {GENERATOR}")
        seed = _unsigned_seed(h5["weights"].attrs, "/weights", path)
        return generator.generate_weights_numpy(dict(geometry, head_dim=resolved_head_dim(geometry)), seed)
    if "weights" not in h5:
        raise BadInput(f"{path}: group /weights is missing")
    extra = sorted(set(h5["weights"].keys()) - set(shapes))
    if extra:
        raise BadInput(f"{path}: /weights stores {', '.join(extra)}, which this geometry does not have "
                       "(the file disagrees with itself)")
    return {name: _dataset(h5, f"weights/{name}", "<f8", shape, path) for name, shape in shapes.items()}


def _read_open_case(h5, path):
    version = attribute_value(h5.attrs.get("schema_version", -1))
    if version != 1:
        raise BadInput(f"{path}: schema_version is {version}; this package reads schema v1")
    geometry = _read_geometry(h5, path)
    x, positions, dout = _read_inputs(h5, geometry, path)
    batch, seq = x.shape[:2]
    key_lengths = np.full(batch, seq, dtype=np.int64)
    if "inputs/key_lengths" in h5:
        key_lengths = _dataset(h5, "inputs/key_lengths", "<i8", (batch,), path)
        if ((key_lengths < 0) | (key_lengths > seq)).any():
            raise BadInput(f"{path}: /inputs/key_lengths {key_lengths.tolist()} must lie in [0, seq {seq}]")
    schedule = None
    if "inputs/decode_schedule" in h5:
        schedule = [int(count) for count in _dataset(h5, "inputs/decode_schedule", "<i8", None, path)]
        if min(schedule) < 1 or sum(schedule) > seq:
            raise BadInput(f"{path}: /inputs/decode_schedule {schedule}: counts must be ≥ 1 and sum to at most seq {seq}")
    weights = _read_weights(h5, geometry, path)
    return Case(path=path, geometry=geometry, x=x, position_ids=positions, dout=dout, key_lengths=key_lengths,
                decode_schedule=schedule, weights=weights)
