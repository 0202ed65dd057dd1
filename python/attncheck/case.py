"""Reading a case file (or a golden: its /expected is ignored) as golden/SCHEMA.md v1, v2 and v3 define it, into
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
OPTIONAL_GEOMETRY = ["head_dim", "query_pre_attn_scalar", "softcap", "sliding_window", "tp_convention",
                     "cp_size", "cp_scheme", "cp_chunks"]
# Schema version 2 (SCHEMA.md "Schema version 2"): RoPE scaling and the score scale's source.
VERSION_2_REQUIRED = ["scale_source", "rope_scaling"]
VERSION_2_OPTIONAL = ["attention_sinks", "attention_multiplier", "rope_scaling_factor", "rope_scaling_low_freq_factor",
                      "rope_scaling_high_freq_factor", "rope_scaling_original_max_position_embeddings",
                      "rope_scaling_beta_fast", "rope_scaling_beta_slow", "rope_scaling_mscale",
                      "rope_scaling_mscale_all_dim", "rope_scaling_truncate", "rope_scaling_attention_factor"]
VERSION_2_DATASETS = ["rope_short_factor", "rope_long_factor"]
# Schema version 3 (SCHEMA.md "Schema version 3"): multi-head latent attention. q_lora_rank 0 means q_proj.
VERSION_3_REQUIRED = ["attention", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                      "latent_norm_eps"]
ROPE_SCALING_TYPES = ("none", "linear", "llama3", "yarn", "longrope")
# SCHEMA.md "Schema version 2": what each rope_scaling type requires, and which parameters it reads at all (a
# parameter of another type is an error, as in attncheck's geometry rules). Never defaulted: a yarn file without
# rope_scaling_truncate is refused, not read as truncating.
ROPE_SCALING_REQUIRED = {
    "none": [],
    "linear": ["rope_scaling_factor"],
    "llama3": ["rope_scaling_factor", "rope_scaling_low_freq_factor", "rope_scaling_high_freq_factor",
               "rope_scaling_original_max_position_embeddings"],
    "yarn": ["rope_scaling_factor", "rope_scaling_original_max_position_embeddings", "rope_scaling_truncate"],
    "longrope": ["rope_scaling_original_max_position_embeddings", "rope_short_factor", "rope_long_factor"],
}
ROPE_SCALING_ALLOWED = {
    "none": [],
    "linear": ["rope_scaling_factor"],
    "llama3": ROPE_SCALING_REQUIRED["llama3"],
    "yarn": ROPE_SCALING_REQUIRED["yarn"] + ["rope_scaling_beta_fast", "rope_scaling_beta_slow", "rope_scaling_mscale",
                                             "rope_scaling_mscale_all_dim", "rope_scaling_attention_factor"],
    "longrope": ROPE_SCALING_REQUIRED["longrope"] + ["rope_scaling_factor", "rope_scaling_attention_factor"],
}
GENERATOR = "attncheck-splitmix64-v1"
TP_CONVENTIONS = ("replicated-kv", "megatron-equal-block")
# attncheck's limits (core/model/geometry.hpp, parallel_layout.hpp, generation/input_generation.hpp,
# golden/hdf5_io.hpp): both readers refuse the same files, and nothing is allocated from a size beyond them.
MAX_DIMENSION = 1 << 20  # hidden_size, head_dim, rotary_dim and the latent widths
MAX_HEADS = 4096
MAX_WORLD_SIZE = 65536  # tp_size
MAX_BATCH_OR_SEQ = 1 << 20  # of generated inputs
MAX_DATASET_VALUES = 1 << 28  # one dataset, a generated x or dout, a layer's parameters (2 GiB as float64)


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


def is_latent(geometry):
    """Whether the geometry is a latent-attention layer (schema version 3)."""
    return geometry.get("attention") == "latent"


def latent_weight_shapes(geometry):
    """SCHEMA.md "/weights" of a version-3 (latent-attention) layer."""
    hidden, heads = geometry["hidden_size"], geometry["num_attention_heads"]
    qk, v_dim = geometry["qk_nope_head_dim"] + geometry["qk_rope_head_dim"], geometry["v_head_dim"]
    q_lora, kv_lora = geometry["q_lora_rank"], geometry["kv_lora_rank"]
    shapes = {"o_proj": (hidden, heads * v_dim)}
    if geometry.get("attention_sinks", 0):
        shapes["sinks"] = (heads,)
    if q_lora:
        shapes.update(q_a_proj=(q_lora, hidden), q_a_layernorm=(q_lora,), q_b_proj=(heads * qk, q_lora))
    else:
        shapes["q_proj"] = (heads * qk, hidden)
    shapes.update(kv_a_proj_with_mqa=(kv_lora + geometry["qk_rope_head_dim"], hidden), kv_a_layernorm=(kv_lora,),
                  kv_b_proj=(heads * (geometry["qk_nope_head_dim"] + v_dim), kv_lora))
    return shapes


# The /geometry attributes each weight's shape comes from (weight_shapes), named when a stored shape disagrees.
_QUERY, _KV = ("num_attention_heads", "head_dim"), ("num_key_value_heads", "head_dim")
SHAPE_SOURCES = {"q_proj": _QUERY + ("hidden_size",), "k_proj": _KV + ("hidden_size",),
                 "v_proj": _KV + ("hidden_size",), "o_proj": ("hidden_size",) + _QUERY,
                 "q_bias": _QUERY, "k_bias": _KV, "v_bias": _KV, "o_bias": ("hidden_size",),
                 "q_norm": _QUERY, "k_norm": _KV, "sinks": ("num_attention_heads",)}
_LATENT_QK = ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim")
LATENT_SHAPE_SOURCES = {
    "o_proj": ("hidden_size", "num_attention_heads", "v_head_dim"), "sinks": ("num_attention_heads",),
    "q_a_proj": ("q_lora_rank", "hidden_size"), "q_a_layernorm": ("q_lora_rank",),
    "q_b_proj": _LATENT_QK + ("q_lora_rank",), "q_proj": _LATENT_QK + ("hidden_size",),
    "kv_a_proj_with_mqa": ("kv_lora_rank", "qk_rope_head_dim", "hidden_size"), "kv_a_layernorm": ("kv_lora_rank",),
    "kv_b_proj": ("num_attention_heads", "qk_nope_head_dim", "v_head_dim", "kv_lora_rank")}


def weight_shapes(geometry):
    """{weight name: shape} for a geometry (SCHEMA.md "/weights", Hugging Face layout [out, in])."""
    if is_latent(geometry):
        return latent_weight_shapes(geometry)
    hidden, heads, kv_heads = geometry["hidden_size"], geometry["num_attention_heads"], geometry["num_key_value_heads"]
    head_dim = resolved_head_dim(geometry)
    shapes = {"q_proj": (heads * head_dim, hidden), "k_proj": (kv_heads * head_dim, hidden),
              "v_proj": (kv_heads * head_dim, hidden), "o_proj": (hidden, heads * head_dim)}
    if geometry["qkv_bias"]:
        shapes.update(q_bias=(heads * head_dim,), k_bias=(kv_heads * head_dim,), v_bias=(kv_heads * head_dim,))
    if geometry["out_bias"]:
        shapes["o_bias"] = (hidden,)
    if geometry["qk_norm"] == "rms-full-width":  # a weight per channel of the whole q / k projection
        shapes.update(q_norm=(heads * head_dim,), k_norm=(kv_heads * head_dim,))
    elif geometry["qk_norm"] != "none":
        shapes.update(q_norm=(head_dim,), k_norm=(head_dim,))
    if geometry.get("attention_sinks", 0):
        shapes["sinks"] = (heads,)
    return shapes


def rope_inverse_frequencies(geometry, largest_position=0):
    """float64 [rotary_dim / 2]: pow(rope_theta, -2i / rotary_dim) by C's pow (math.pow), SCHEMA.md
    "RoPE rounding" (numpy's power differs by an ulp for some i, which large positions magnify), scaled
    as "RoPE frequencies of scaled layers" says, step by step in float64. longrope chooses its factors
    from the forward call's largest position (`largest_position`)."""
    rotary_dim, theta = geometry["rotary_dim"], float(geometry["rope_theta"])
    base = [math.pow(theta, -2.0 * i / rotary_dim) for i in range(rotary_dim // 2)]
    kind = geometry.get("rope_scaling", "none")
    factor = float(geometry.get("rope_scaling_factor", 1.0))
    original = float(geometry.get("rope_scaling_original_max_position_embeddings", 1))
    if kind == "linear":
        base = [value / factor for value in base]
    elif kind == "llama3":
        low_freq, high_freq = float(geometry["rope_scaling_low_freq_factor"]), float(geometry["rope_scaling_high_freq_factor"])
        low_wavelength, high_wavelength = original / low_freq, original / high_freq
        scaled = []
        for value in base:
            wavelength = 2.0 * math.pi / value
            if wavelength < high_wavelength:
                scaled.append(value)
            elif wavelength > low_wavelength:
                scaled.append(value / factor)
            else:
                smooth = (original / wavelength - low_freq) / (high_freq - low_freq)
                scaled.append((1.0 - smooth) * value / factor + smooth * value)
        base = scaled
    elif kind == "yarn":
        beta_fast = float(geometry.get("rope_scaling_beta_fast", 0.0)) or 32.0
        beta_slow = float(geometry.get("rope_scaling_beta_slow", 0.0)) or 1.0

        def edge(rotations):
            return rotary_dim * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(theta))

        low, high = edge(beta_fast), edge(beta_slow)
        if geometry["rope_scaling_truncate"]:  # required for yarn (read_case refuses a file without it)
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0.0), min(high, rotary_dim - 1.0)
        if low == high:
            high += 0.001
        scaled = []
        for i, value in enumerate(base):
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)
            scaled.append((value / factor) * ramp + value * (1.0 - ramp))
        base = scaled
    elif kind == "longrope":
        factors = geometry["rope_long_factor"] if largest_position + 1 > original else geometry["rope_short_factor"]
        base = [value / float(f) for value, f in zip(base, factors)]
    return np.array(base, dtype=np.float64)


def rope_attention_factor(geometry):
    """The factor on cos and sin (SCHEMA.md "RoPE frequencies of scaled layers"); 1 unless yarn or longrope."""
    kind = geometry.get("rope_scaling", "none")
    if "rope_scaling_attention_factor" in geometry:
        return float(geometry["rope_scaling_attention_factor"])
    factor = float(geometry.get("rope_scaling_factor", 1.0))
    original = float(geometry.get("rope_scaling_original_max_position_embeddings", 1))
    if kind == "yarn":
        def mscale(scale, k):
            return 1.0 if scale <= 1.0 else 0.1 * k * math.log(scale) + 1.0
        numerator, denominator = geometry.get("rope_scaling_mscale", 0.0), geometry.get("rope_scaling_mscale_all_dim", 0.0)
        if numerator and denominator:
            return mscale(factor, float(numerator)) / mscale(factor, float(denominator))
        return mscale(factor, 1.0)
    if kind == "longrope" and factor > 1.0:
        return math.sqrt(1.0 + math.log(factor) / math.log(original))
    return 1.0


@dataclasses.dataclass
class Case:
    """One case. geometry: /geometry's attributes as stored (head_dim absent when the case omits it);
    x, dout: float64 [batch, seq, hidden_size]; position_ids: int64 [batch, seq]; key_lengths: int64
    [batch] (seq where the file has none); decode_schedule: [prefill, step, ...] or None; weights:
    {name: float64 array in SCHEMA's shape} (None when read with read_case(path, weights=False))."""

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
    def context_parallel(self):
        """The context-parallel layout the file states (SCHEMA.md "Context-parallel layouts"):
        {"cp_size", "scheme", "chunks"} ("chunks" None for Ulysses), or None."""
        if "cp_size" not in self.geometry:
            return None
        return {"cp_size": self.geometry["cp_size"], "scheme": self.geometry["cp_scheme"],
                "chunks": self.geometry.get("cp_chunks")}

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

    def rope_inverse_frequencies(self, largest_position=None):
        """The frequencies of a forward call whose largest position is `largest_position` (default: the
        whole case's, its full forward)."""
        largest = int(self.position_ids.max()) if largest_position is None else largest_position
        return rope_inverse_frequencies(self.geometry, largest)

    def rope_angles(self, positions=None):
        """float64 [..., rotary_dim / 2]: position x inv_freq in float64 for the case's position_ids (or
        `positions`: one forward call's, which choose longrope's factors). Pair i rotates channels (i, i +
        rotary_dim/2) for half-split, (2i, 2i+1) interleaved; cos and sin are then multiplied by
        rope_attention_factor(geometry) (1 unless yarn or longrope)."""
        positions = self.position_ids if positions is None else np.asarray(positions)
        return positions.astype(np.float64)[..., None] * self.rope_inverse_frequencies(int(positions.max()))

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


def _stored_shape(h5, path, dtype, file_path):
    """The shape of dataset /path, checked present and of `dtype`, without reading it."""
    if path not in h5 or not hasattr(h5[path], "dtype"):
        raise BadInput(f"{file_path}: dataset /{path} is missing (see golden/SCHEMA.md)")
    dataset = h5[path]
    if dataset.dtype != np.dtype(dtype):
        raise BadInput(f"{file_path}: /{path} is {dataset.dtype}; schema v1 stores it as {np.dtype(dtype)}")
    return tuple(dataset.shape)


def _dataset(h5, path, dtype, shape, file_path):
    """Dataset /path's values; its stored shape must be `shape` (checked before anything is read)."""
    stored = _stored_shape(h5, path, dtype, file_path)
    if stored != tuple(shape):
        raise BadInput(f"{file_path}: /{path} has shape {list(stored)}; expected {list(shape)}")
    values = h5[path][()]
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise BadInput(f"{file_path}: /{path} holds NaN or Inf")
    return values


def read_case(path, weights=True):
    """The Case in a case file or golden at `path`; BadInput for anything SCHEMA.md does not allow.
    weights=False leaves Case.weights None (the file's /weights still checked against the schema, but
    generated ones not rebuilt): for looking at a case's geometry and inputs, such as its masks, without
    rebuilding gigabytes of weights."""
    import h5py

    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    try:
        with h5py.File(path, "r") as h5:
            return _read_open_case(h5, path, weights)
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
            return _read_geometry(h5, path, _schema_version(h5, path))
    except OSError as error:
        raise BadInput(f"{path}: cannot be read as HDF5 ({error})") from error


def _check_context_parallel(geometry, path):
    """The layout's attributes agree with each other (SCHEMA.md "Context-parallel layouts"); whether the plan
    can take it is the C++ reader's to say (attncheck golden inspect)."""
    stated = [name for name in ("cp_size", "cp_scheme", "cp_chunks") if name in geometry]
    if not stated:
        return
    if "cp_size" not in geometry:
        raise BadInput(f"{path}: /geometry has {', '.join(stated)} without cp_size, which states the layout")
    if not isinstance(geometry["cp_size"], int) or not 1 <= geometry["cp_size"] <= 4096:
        raise BadInput(f"{path}: /geometry@cp_size is {geometry['cp_size']!r}; expected an integer in [1, 4096]")
    scheme = geometry.get("cp_scheme")
    if scheme not in ("ulysses", "ring"):
        raise BadInput(f"{path}: /geometry@cp_scheme is {scheme!r}; expected ulysses or ring")
    chunks = geometry.get("cp_chunks")
    if scheme == "ring" and chunks not in ("load-balanced", "contiguous"):
        raise BadInput(f"{path}: /geometry@cp_chunks is {chunks!r}; a ring needs load-balanced or contiguous")
    if scheme == "ulysses" and chunks is not None:
        raise BadInput(f"{path}: /geometry@cp_chunks is {chunks!r}; chunking is the ring's, absent with ulysses")


def _read_geometry(h5, path, version=1):
    if "geometry" not in h5:
        raise BadInput(f"{path}: group /geometry is missing")
    attributes = h5["geometry"].attrs
    required = REQUIRED_GEOMETRY + (VERSION_2_REQUIRED if version >= 2 else []) + \
        (VERSION_3_REQUIRED + ["head_dim"] if version >= 3 else [])
    missing = [name for name in required if name not in attributes]
    if missing:
        raise BadInput(f"{path}: /geometry lacks required attribute(s) {', '.join(missing)}")
    if version < 3:
        stray = [name for name in VERSION_3_REQUIRED if name in attributes]
        if stray:
            raise BadInput(f"{path}: a schema version {version} file has {', '.join(stray)}, which only version 3 "
                           "(latent attention) defines (the file disagrees with itself)")
    version_2 = VERSION_2_REQUIRED + VERSION_2_OPTIONAL
    if version < 2:
        stray = [name for name in version_2 if name in attributes] + \
                [name for name in VERSION_2_DATASETS if f"geometry/{name}" in h5]
        if stray:
            raise BadInput(f"{path}: a schema version 1 file has {', '.join(stray)}, which only version 2 "
                           "defines (the file disagrees with itself)")
    known = REQUIRED_GEOMETRY + OPTIONAL_GEOMETRY + (version_2 if version >= 2 else []) + \
        (VERSION_3_REQUIRED if version >= 3 else [])
    geometry = {name: attribute_value(attributes[name]) for name in known if name in attributes}
    if version >= 2:
        if geometry["rope_scaling"] not in ROPE_SCALING_TYPES:
            raise BadInput(f"{path}: /geometry@rope_scaling is {geometry['rope_scaling']!r}; "
                           f"known: {', '.join(ROPE_SCALING_TYPES)}")
        for name in VERSION_2_DATASETS:  # read below, once rotary_dim (their length) is checked
            if f"geometry/{name}" in h5:
                geometry[name] = None
        if geometry.get("attention_sinks", 0) not in (0, 1):
            raise BadInput(f"{path}: /geometry@attention_sinks is {geometry['attention_sinks']!r}; expected 0 or 1")
        kind = geometry["rope_scaling"]
        missing = [name for name in ROPE_SCALING_REQUIRED[kind] if name not in geometry]
        if missing:
            raise BadInput(f"{path}: rope_scaling {kind} requires /geometry@{', @'.join(missing)} "
                           "(golden/SCHEMA.md, \"Schema version 2\"); absent here")
        parameters = [name for name in VERSION_2_OPTIONAL + VERSION_2_DATASETS if name.startswith("rope_")]
        foreign = [name for name in parameters if name in geometry and name not in ROPE_SCALING_ALLOWED[kind]]
        if foreign:
            raise BadInput(f"{path}: /geometry has {', '.join(foreign)}, which rope_scaling {kind} does not read "
                           "(the file disagrees with itself)")
        if "rope_scaling_truncate" in geometry and geometry["rope_scaling_truncate"] not in (0, 1):
            raise BadInput(f"{path}: /geometry@rope_scaling_truncate is {geometry['rope_scaling_truncate']!r}; "
                           "expected 0 or 1")
    _check_widths_and_numbers(geometry, path)
    if version >= 3:
        _check_latent(geometry, path)
    _check_rotary_dim(geometry, path)
    for name in VERSION_2_DATASETS:
        if name in geometry:
            factors = _dataset(h5, f"geometry/{name}", "<f8", (geometry["rotary_dim"] // 2,), path)
            if (factors <= 0).any():
                raise BadInput(f"{path}: /geometry/{name} holds {float(factors.min())!r}; every factor must be a "
                               "finite number > 0, e.g. 1.0")
            geometry[name] = factors.tolist()
    # Bound what reading allocates from the declared widths before anything is allocated (attncheck's bound).
    parameters = sum(math.prod(shape) for shape in weight_shapes(geometry).values())
    if parameters > MAX_DATASET_VALUES:
        raise BadInput(f"{path}: /geometry declares a layer of {parameters} parameters; a golden's layer holds at "
                       "most 2^28 parameters (check the head counts and widths)")
    _check_context_parallel(geometry, path)
    if geometry["num_attention_heads"] % geometry["num_key_value_heads"]:
        raise BadInput(f"{path}: num_attention_heads {geometry['num_attention_heads']} is not a multiple of "
                       f"num_key_value_heads {geometry['num_key_value_heads']}")
    if geometry.get("tp_convention", "replicated-kv") not in TP_CONVENTIONS:
        raise BadInput(f"{path}: /geometry@tp_convention is '{geometry['tp_convention']}'; "
                       f"known: {', '.join(TP_CONVENTIONS)}")
    _check_scale(geometry, path)
    return geometry


def _integer(geometry, name, least, most, path, example=""):
    """/geometry@name is an integer in [least, most] (most None: no upper bound)."""
    value = geometry[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (most is not None and value > most):
        valid = f"an integer in [{least}, {most}]" if most is not None else f"an integer >= {least}"
        raise BadInput(f"{path}: /geometry@{name} is {value!r}; must be {valid}" +
                       (f", e.g. {example}" if example else ""))


def _number(geometry, name, least, path, example, strictly=True):
    """/geometry@name is a finite number > least (>= least when not strictly)."""
    value = geometry[name]
    valid = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and
             (value > least if strictly else value >= least))
    if not valid:
        raise BadInput(f"{path}: /geometry@{name} is {value!r}; must be a finite number {'>' if strictly else '>='} "
                       f"{least:g}, e.g. {example}")


def _check_widths_and_numbers(geometry, path):
    """Every width and count within attncheck's limits, every float attribute finite and in range, as attncheck's
    geometry rules (core/model/geometry.cpp, latent_attention.cpp) have them: checked before any is used, so
    that nothing is allocated from a width beyond the limits, and NaN or a negative eps is never read as a layer."""
    _integer(geometry, "hidden_size", 1, MAX_DIMENSION, path, "4096")
    _integer(geometry, "num_attention_heads", 1, MAX_HEADS, path, "32")
    _integer(geometry, "num_key_value_heads", 1, MAX_HEADS, path, "8")
    if "head_dim" in geometry:
        _integer(geometry, "head_dim", 1, MAX_DIMENSION, path, "128")
    _integer(geometry, "rotary_dim", 0, MAX_DIMENSION, path, "0 (no RoPE) or head_dim")
    _integer(geometry, "tp_size", 1, MAX_WORLD_SIZE, path, "1")
    if "sliding_window" in geometry:
        _integer(geometry, "sliding_window", 1, None, path, "4096 (the keys a query sees, itself included)")
    # A base at or below 1 makes no frequency slower than one radian per position (attncheck's rule).
    _number(geometry, "rope_theta", 1, path, "10000 (real models use 1e4 .. 1e7)")
    _number(geometry, "qk_norm_eps", 0, path, "1e-06", strictly=False)
    if "latent_norm_eps" in geometry:
        _number(geometry, "latent_norm_eps", 0, path, "1e-06 (DeepSeek-V3)", strictly=False)
    for name, example in (("query_pre_attn_scalar", "head_dim"), ("attention_multiplier", "0.0078125 (Granite 3.3)"),
                          ("softcap", "50 (Gemma 2)"), ("rope_scaling_factor", "8"),
                          ("rope_scaling_low_freq_factor", "1 (Llama 3.1)"),
                          ("rope_scaling_high_freq_factor", "4 (Llama 3.1)"),
                          ("rope_scaling_attention_factor", "1.2")):
        if name in geometry:
            _number(geometry, name, 0, path, example)
    for name in ("rope_scaling_beta_fast", "rope_scaling_beta_slow", "rope_scaling_mscale",
                 "rope_scaling_mscale_all_dim"):
        if name in geometry:
            _number(geometry, name, 0, path, "1, or leave it out for transformers' default", strictly=False)
    if "rope_scaling_original_max_position_embeddings" in geometry:
        # longrope's attention factor divides by log(original): a length of 1 makes it infinite.
        shortest = 2 if geometry.get("rope_scaling") == "longrope" else 1
        _integer(geometry, "rope_scaling_original_max_position_embeddings", shortest, None, path, "8192 (Llama 3.1)")
    if geometry.get("rope_scaling") == "llama3" and \
            not geometry["rope_scaling_high_freq_factor"] > geometry["rope_scaling_low_freq_factor"]:
        raise BadInput(f"{path}: /geometry@rope_scaling_high_freq_factor is "
                       f"{geometry['rope_scaling_high_freq_factor']!r}; must exceed rope_scaling_low_freq_factor "
                       f"{geometry['rope_scaling_low_freq_factor']!r}, e.g. low 1, high 4 (Llama 3.1)")
    _check_derived_factors(geometry, path)


LARGEST_DERIVED_FACTOR = 1e6  # core/model/geometry.cpp, kLargestDerivedFactor: real models have 1 to 2


def _check_derived_factors(geometry, path):
    """Factors derived from finite attributes may still overflow the scores (attncheck refuses them by the
    attribute's name): RoPE's attention factor (q and k are multiplied by it) and a latent layer's
    mscale(factor, mscale_all_dim)^2 on the softmax scale, each finite and at most 1e6."""
    kind = geometry.get("rope_scaling", "none")
    if kind in ("yarn", "longrope") and geometry["rotary_dim"] > 0:
        derived = rope_attention_factor(geometry)
        if not (math.isfinite(derived) and derived <= LARGEST_DERIVED_FACTOR):
            name = ("rope_scaling_attention_factor" if "rope_scaling_attention_factor" in geometry
                    else "rope_scaling_mscale" if kind == "yarn" and geometry.get("rope_scaling_mscale")
                    and geometry.get("rope_scaling_mscale_all_dim") else "rope_scaling_factor")
            raise BadInput(f"{path}: /geometry@{name} is {geometry.get(name)!r}; it gives RoPE an attention factor of "
                           f"{derived!r} (q and k are multiplied by it): it must be finite and at most 1e6, e.g. 1.2")
    if geometry.get("attention") == "latent" and kind == "yarn" and geometry.get("rope_scaling_mscale_all_dim"):
        factor = float(geometry["rope_scaling_factor"])
        m = 1.0 if factor <= 1.0 else 0.1 * float(geometry["rope_scaling_mscale_all_dim"]) * math.log(factor) + 1.0
        if not (math.isfinite(m * m) and m * m <= LARGEST_DERIVED_FACTOR):
            raise BadInput(f"{path}: /geometry@rope_scaling_mscale_all_dim is "
                           f"{geometry['rope_scaling_mscale_all_dim']!r}; it multiplies latent attention's softmax "
                           f"scale by mscale(factor, mscale_all_dim)^2 = {m * m!r}: it must be finite and at most "
                           "1e6, e.g. 1 (DeepSeek-V3)")


def _check_rotary_dim(geometry, path):
    """rotary_dim (checked within [0, 2^20]) is even and at most head_dim (a latent layer's is qk_rope_head_dim)."""
    rotary_dim, head_dim = geometry["rotary_dim"], resolved_head_dim(geometry)
    if rotary_dim % 2 or rotary_dim > head_dim:
        raise BadInput(f"{path}: /geometry@rotary_dim is {rotary_dim}; must be even (RoPE rotates channels in pairs) "
                       f"and at most head_dim {head_dim}")


def _check_latent(geometry, path):
    """SCHEMA.md "Schema version 3": the latent widths, and the version-1 attributes they fix."""
    if geometry["attention"] != "latent":
        raise BadInput(f"{path}: /geometry@attention is {geometry['attention']!r}; schema version 3 means 'latent'")
    _integer(geometry, "q_lora_rank", 0, MAX_DIMENSION, path, "1536 (DeepSeek-V3), or 0: q_proj")
    _integer(geometry, "kv_lora_rank", 1, MAX_DIMENSION, path, "512 (DeepSeek-V3)")
    _integer(geometry, "qk_nope_head_dim", 0, MAX_DIMENSION, path, "128 (DeepSeek-V3)")
    _integer(geometry, "qk_rope_head_dim", 0, MAX_DIMENSION, path, "64 (DeepSeek-V3)")
    _integer(geometry, "v_head_dim", 1, MAX_DIMENSION, path, "128 (DeepSeek-V3)")
    if geometry["qk_rope_head_dim"] % 2:
        raise BadInput(f"{path}: /geometry@qk_rope_head_dim is {geometry['qk_rope_head_dim']}; must be even (RoPE "
                       "rotates channels in pairs)")
    if geometry["qk_nope_head_dim"] + geometry["qk_rope_head_dim"] < 1:
        raise BadInput(f"{path}: /geometry@qk_nope_head_dim is {geometry['qk_nope_head_dim']}; qk_nope_head_dim + "
                       "qk_rope_head_dim (the q/k head width) must be >= 1, e.g. 128 + 64 (DeepSeek-V3)")
    qk = geometry["qk_nope_head_dim"] + geometry["qk_rope_head_dim"]
    fixed = {"head_dim": qk, "rotary_dim": geometry["qk_rope_head_dim"],
             "num_key_value_heads": geometry["num_attention_heads"], "qk_norm": "none", "qkv_bias": 0, "out_bias": 0}
    for name, value in fixed.items():
        if geometry[name] != value:
            raise BadInput(f"{path}: /geometry@{name} is {geometry[name]!r}; a latent-attention layer's is {value!r} "
                           "(golden/SCHEMA.md, \"Schema version 3\")")


def latent_scale(geometry):
    """qk_head_dim^-0.5, times m^2 with m = 0.1 * mscale_all_dim * ln(factor) + 1 when the scaling is yarn
    with a non-zero mscale_all_dim and factor > 1 (transformers' DeepseekV3Attention, in that order)."""
    scale = float(geometry["head_dim"]) ** -0.5
    mscale_all_dim = float(geometry.get("rope_scaling_mscale_all_dim", 0.0))
    if geometry.get("rope_scaling") == "yarn" and mscale_all_dim:
        factor = float(geometry["rope_scaling_factor"])
        m = 1.0 if factor <= 1.0 else 0.1 * mscale_all_dim * math.log(factor) + 1.0
        scale = scale * m * m
    return scale


def _check_scale(geometry, path):
    """/geometry@scale is what its source gives, exactly (SCHEMA.md "Tolerance"): C's pow(x, -0.5), which
    Python's float ** is, of query_pre_attn_scalar or head_dim, or attention_multiplier itself; a version 2
    file's scale_source must name the source present. A scale that disagrees would judge every candidate
    against scores the layer does not compute."""
    if is_latent(geometry):
        source, expected = "latent_qk_head_dim", latent_scale(geometry)
    elif "attention_multiplier" in geometry:
        source, expected = "attention_multiplier", float(geometry["attention_multiplier"])
    elif "query_pre_attn_scalar" in geometry:
        source, expected = "query_pre_attn_scalar", float(geometry["query_pre_attn_scalar"]) ** -0.5
    else:
        source, expected = "head_dim", float(resolved_head_dim(geometry)) ** -0.5
    if "scale_source" in geometry and geometry["scale_source"] != source:
        raise BadInput(f"{path}: /geometry@scale_source is {geometry['scale_source']!r}, but the file's attributes "
                       f"make it {source!r} (the file disagrees with itself)")
    if float(geometry["scale"]) != expected:
        raise BadInput(f"{path}: /geometry@scale is {float(geometry['scale'])!r}; its source {source} gives "
                       f"{expected!r} (pow(x, -0.5), exactly)")


def _unsigned_seed(attributes, where, path):
    if "seed" not in attributes:
        raise BadInput(f"{path}: {where} names a generator but has no seed attribute")
    if not isinstance(attribute_value(attributes["seed"]), int):
        raise BadInput(f"{path}: {where}@seed must be an integer (int64), not {attribute_value(attributes['seed'])!r}")
    return attribute_value(attributes["seed"]) & generator.MASK  # int64 attribute, the unsigned seed's bits


def _check_inputs(h5, geometry, path):
    """(batch, seq, generated): /inputs checked against the geometry and the schema before anything is read;
    generated is (seed, distribution) when /inputs names the generator, else None."""
    if "inputs" not in h5:
        raise BadInput(f"{path}: group /inputs is missing")
    hidden = geometry["hidden_size"]
    named = attribute_value(h5["inputs"].attrs.get("generator", ""))
    if not named:
        shape = _stored_shape(h5, "inputs/x", "<f8", path)
        if len(shape) != 3 or shape[2] != hidden or min(shape) < 1:
            raise BadInput(f"{path}: /inputs/x has shape {list(shape)}; expected [batch, seq, {hidden}] "
                           "(hidden_size from /geometry)")
        batch, seq = shape[:2]
        for name, dtype, expected in (("position_ids", "<i8", (batch, seq)), ("dout", "<f8", (batch, seq, hidden))):
            stored = _stored_shape(h5, f"inputs/{name}", dtype, path)
            if stored != expected:
                raise BadInput(f"{path}: /inputs/{name} has shape {list(stored)}; expected {list(expected)}")
        return batch, seq, None
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
    shape = _stored_shape(h5, "inputs/position_ids", "<i8", path)
    if len(shape) != 2 or min(shape) < 1:
        raise BadInput(f"{path}: /inputs/position_ids has shape {list(shape)}; expected [batch, seq]")
    # x and dout are generated from position_ids' shape and hidden_size: bounded before anything is generated,
    # as attncheck bounds them (golden make's limits on batch and seq, then x's size).
    for extent, name in zip(shape, ("batch", "seq")):
        if extent > MAX_BATCH_OR_SEQ:
            raise BadInput(f"{path}: /inputs/position_ids has shape {list(shape)}; {name} {extent} is beyond 2^20, "
                           f"the most attncheck generates (golden make's --{name})")
    if shape[0] * shape[1] * hidden > MAX_DATASET_VALUES:
        raise BadInput(f"{path}: /inputs/position_ids has shape {list(shape)}; generated x would hold "
                       f"{shape[0] * shape[1] * hidden} values (hidden_size {hidden}), more than 2^28")
    return shape[0], shape[1], (seed, distribution)


def _read_inputs(h5, geometry, path, batch, seq, generated):
    """x, position_ids and dout: stored, or x and dout named by the input generator (checked: _check_inputs)."""
    hidden = geometry["hidden_size"]
    positions = _dataset(h5, "inputs/position_ids", "<i8", (batch, seq), path)
    if generated is None:
        return (_dataset(h5, "inputs/x", "<f8", (batch, seq, hidden), path), positions,
                _dataset(h5, "inputs/dout", "<f8", (batch, seq, hidden), path))
    seed, distribution = generated
    shape = (batch, seq, hidden)
    return (generator.generate_activations_numpy(seed, "x", shape, distribution), positions,
            generator.generate_activations_numpy(seed, "dout", shape, distribution))


def _check_weights(h5, geometry, path):
    """The generator's seed when /weights names it, else None; stored weights checked against the geometry's
    shapes (golden/SCHEMA.md "/weights") before any is read."""
    shapes = weight_shapes(geometry)
    named = attribute_value(h5["weights"].attrs.get("generator", "")) if "weights" in h5 else ""
    if named:
        if named != GENERATOR:
            raise BadInput(f"{path}: /weights@generator is '{named}'; known: {GENERATOR}")
        seed = _unsigned_seed(h5["weights"].attrs, "/weights", path)
        stored = sorted(h5["weights"].keys())
        if stored:
            raise BadInput(f"{path}: /weights names a generator and also stores {stored[0]} "
                           "(the file disagrees with itself: the stored weights would be ignored)")
        return seed
    if "weights" not in h5:
        raise BadInput(f"{path}: group /weights is missing")
    extra = sorted(set(h5["weights"].keys()) - set(shapes))
    if extra:
        raise BadInput(f"{path}: /weights stores {', '.join(extra)}, which this geometry does not have "
                       "(the file disagrees with itself)")
    for name, shape in shapes.items():
        stored = _stored_shape(h5, f"weights/{name}", "<f8", path)
        if stored != tuple(shape):
            sources = (LATENT_SHAPE_SOURCES if is_latent(geometry) else SHAPE_SOURCES)[name]
            widths = ", ".join(f"{source} {resolved_head_dim(geometry) if source == 'head_dim' else geometry[source]}"
                               for source in sources)
            raise BadInput(f"{path}: /weights/{name} has shape {list(stored)}; /geometry's {widths} make it "
                           f"{list(shape)} (golden/SCHEMA.md \"/weights\"; the file disagrees with itself)")
    return None


def _read_weights(h5, geometry, path, seed, with_weights):
    """{name: values}, or None when not with_weights (stored weights are checked all the same)."""
    if seed is not None:
        if not with_weights:
            return None
        return generator.generate_weights_numpy(dict(geometry, head_dim=resolved_head_dim(geometry)), seed)
    stored = {name: _dataset(h5, f"weights/{name}", "<f8", shape, path)
              for name, shape in weight_shapes(geometry).items()}
    return stored if with_weights else None


def _describe_bytes(count):
    """'1.5 GiB' (attncheck's describe_bytes)."""
    if count < 1024:
        return f"{count} bytes"
    value, unit = count / 1024, 0
    while value >= 1024 and unit < 5:
        value, unit = value / 1024, unit + 1
    return f"{value:.1f} {('KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB')[unit]}"


def _memory_room():
    """(bytes, what limits it): what this process may still take, as attncheck's memory_room()
    (core/resources/memory_room.cpp): the least of MemAvailable, the cgroup's memory.max less memory.current
    and RLIMIT_AS less what this process has mapped. (None, ...) when no limit can be read."""
    import resource

    def kibibytes(path, key):
        try:
            with open(path) as lines:
                for line in lines:
                    if line.startswith(key + ":"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return None

    def cgroup(name):
        try:
            with open(f"/sys/fs/cgroup/{name}") as text:
                return int(text.read().split()[0])
        except (OSError, ValueError, IndexError):  # absent, or "max"
            return None

    room = [(kibibytes("/proc/meminfo", "MemAvailable"), "MemAvailable in /proc/meminfo")]
    limit = cgroup("memory.max")
    if limit is not None:
        room.append((max(limit - (cgroup("memory.current") or 0), 0), "the cgroup's memory.max less memory.current"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        mapped = kibibytes("/proc/self/status", "VmSize") or 0
        room.append((max(soft - mapped, 0), f"RLIMIT_AS (ulimit -v {soft // 1024}) less the "
                                            f"{_describe_bytes(mapped)} this process has mapped"))
    room = [entry for entry in room if entry[0] is not None]
    return min(room) if room else (None, "no limit could be read")


def _require_room(h5, geometry, path, tokens, generated_inputs, weight_seed, with_weights):
    """What reading the file allocates, from the shapes it stores, against the memory left, before anything large
    is read (attncheck's require_room_for_reading): every dataset's declared values as 8 bytes each (the integrity
    digest reads them all) and the largest chunk; generated x and dout; generated weights. numpy's temporaries
    make the generators here peak higher than attncheck's (tracemalloc: x and dout at 5 to 6.1 x, weights at
    their sum + 2 to 3 x the largest), hence 7 x and + 4 x. A dataset beyond 2^28 values is refused by name."""
    import h5py

    declared = {"values": 0, "chunk": 0}

    def count(name, member):
        if isinstance(member, h5py.Dataset):
            values = math.prod(member.shape) if member.shape is not None else 0
            if values > MAX_DATASET_VALUES:
                raise BadInput(f"{path}: /{name} declares shape {list(member.shape)} ({values} values); a dataset "
                               "holds at most 2^28 values (2 GiB as float64)")
            declared["values"] += values
            declared["chunk"] = max(declared["chunk"], math.prod(member.chunks) if member.chunks else 0)

    h5.visititems(count)  # each object once, through hard links only
    needed = 8 * (declared["values"] + declared["chunk"])
    parts = ["its datasets"]
    if generated_inputs:
        needed += 7 * 8 * tokens * geometry["hidden_size"]
        parts.append("x and dout generated")
    if weight_seed is not None and with_weights:
        sizes = [math.prod(shape) for shape in weight_shapes(geometry).values()]
        needed += 8 * (sum(sizes) + 4 * max(sizes))
        parts.append("weights generated")
    room, limited_by = _memory_room()
    if room is not None and needed > room:
        raise BadInput(f"{path}: not enough memory: reading it ({', '.join(parts)}) needs an estimated "
                       f"{_describe_bytes(needed)} at peak; must fit in the {_describe_bytes(room)} this process may "
                       f"still take (limited by {limited_by}); a case of a smaller layer or fewer tokens")


def _schema_version(h5, path):
    if "schema_version" not in h5.attrs:
        raise BadInput(f"{path}: root attribute schema_version is absent; this package reads schema versions 1 to 3")
    version = attribute_value(h5.attrs["schema_version"])
    if version not in (1, 2, 3):
        raise BadInput(f"{path}: schema_version is {version}; this package reads schema versions 1 to 3")
    # The root's other required attributes (SCHEMA.md "Root attributes"), refused when absent as attncheck does.
    for name, kind in (("generator", str), ("seed", int)):
        if name not in h5.attrs:
            raise BadInput(f"{path}: root attribute {name} is absent (golden/SCHEMA.md requires it)")
        if not isinstance(attribute_value(h5.attrs[name]), kind):
            raise BadInput(f"{path}: root attribute {name} is {attribute_value(h5.attrs[name])!r}; "
                           f"expected a {'string' if kind is str else 'int64'}")
    return version


def _read_open_case(h5, path, with_weights=True):
    from attncheck.integrity import verify_integrity

    geometry = _read_geometry(h5, path, _schema_version(h5, path))
    # Every shape is checked against the geometry, and what the read needs against the memory left, before
    # anything is read or generated.
    batch, seq, generated_inputs = _check_inputs(h5, geometry, path)
    weight_seed = _check_weights(h5, geometry, path)
    _require_room(h5, geometry, path, batch * seq, generated_inputs, weight_seed, with_weights)
    x, positions, dout = _read_inputs(h5, geometry, path, batch, seq, generated_inputs)
    key_lengths = np.full(batch, seq, dtype=np.int64)
    if "inputs/key_lengths" in h5:
        key_lengths = _dataset(h5, "inputs/key_lengths", "<i8", (batch,), path)
        if ((key_lengths < 0) | (key_lengths > seq)).any():
            raise BadInput(f"{path}: /inputs/key_lengths {key_lengths.tolist()} must lie in [0, seq {seq}]")
    schedule = None
    if "inputs/decode_schedule" in h5:
        shape = _stored_shape(h5, "inputs/decode_schedule", "<i8", path)
        if len(shape) != 1 or not 1 <= shape[0] <= seq:  # each count >= 1, summing to at most seq
            raise BadInput(f"{path}: /inputs/decode_schedule has shape {list(shape)}; expected [prefill, step, ...], "
                           f"at most seq {seq} counts")
        schedule = [int(count) for count in _dataset(h5, "inputs/decode_schedule", "<i8", shape, path)]
        if min(schedule) < 1 or sum(schedule) > seq:
            raise BadInput(f"{path}: /inputs/decode_schedule {schedule}: counts must be ≥ 1 and sum to at most seq {seq}")
    weights = _read_weights(h5, geometry, path, weight_seed, with_weights)
    # Last, as attncheck does: the schema's checks name what is wrong more precisely. A digest, when the
    # file carries one, must be the file's (golden/SCHEMA.md, "Integrity digest").
    verify_integrity(h5, path)
    return Case(path=path, geometry=geometry, x=x, position_ids=positions, dout=dout, key_lengths=key_lengths,
                decode_schedule=schedule, weights=weights)
