"""What a layer states it supports (docs/CAPABILITIES.md): attncheck sends a worker only cases within its
statement, leaves out the parts it does not state (no decode schedule without "decode", the unsharded case
without "tensor-parallel"), fuzzes only there, and holds it to its promise: declining a case or a part the
statement includes is a failure, never a decline.

    SUPPORTS = attncheck.Capabilities(["gqa", "explicit-head-dim", "rope-half-split", "causal", "key-padding",
                                       "position-offsets", "position-gaps", "backward"])
    attncheck.serve(run_case, "my layer", supports=SUPPORTS)

The statement travels as the worker protocol's `supports JSON` line (protocol 2; exec_worker/worker.hpp), the
JSON of core/capabilities/capabilities_json.hpp. FEATURES lists every feature name, in attncheck's order
(python/tests checks it against `attncheck capabilities --list`).
"""
import dataclasses
import json

from .errors import BadInput

FEATURES = (
    "gqa", "explicit-head-dim",
    "rope-half-split", "rope-interleaved", "partial-rope", "no-rope",
    "rope-scaling-linear", "rope-scaling-llama3", "rope-scaling-yarn", "rope-scaling-longrope",
    "qk-norm-rms", "qk-norm-rms-one-plus", "qk-norm-full-width", "qkv-bias", "out-bias", "custom-scale",
    "softcap", "sliding-window", "sinks", "causal", "bidirectional",
    "key-padding", "keyless-rows", "position-offsets", "position-gaps",
    "backward", "decode", "tensor-parallel", "kv-replication", "context-parallel",
    "latent",
)
PRECISIONS = ("fp64", "fp32", "bf16", "fp16")
TP_CONVENTIONS = ("replicated-kv", "megatron-equal-block")
_LIMITS = ("head_dim_multiple_of", "max_head_dim", "max_seq", "max_batch", "max_num_heads", "max_hidden_size",
           "max_tp_size")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """features: the feature names it supports, or "all"; without: names taken away (handy with "all");
    the limits: head_dim_multiple_of, max_head_dim, max_seq, max_batch, max_num_heads, max_hidden_size,
    max_tp_size; precisions its candidates may declare; tp_convention its per-rank gradients are held in.
    Checked when made: an unknown name is BadInput naming the valid ones."""

    features: object
    without: tuple = ()
    head_dim_multiple_of: int = None
    max_head_dim: int = None
    max_seq: int = None
    max_batch: int = None
    max_num_heads: int = None
    max_hidden_size: int = None
    max_tp_size: int = None
    precisions: tuple = None
    tp_convention: str = None

    def __post_init__(self):
        if self.features != "all":
            object.__setattr__(self, "features", tuple(self.features))
            _check_names(self.features, "features")
        object.__setattr__(self, "without", tuple(self.without))
        _check_names(self.without, "without")
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise BadInput(f"{name} {value!r}: a whole number of at least 1")
        if self.precisions is not None:
            object.__setattr__(self, "precisions", tuple(self.precisions))
            unknown = [p for p in self.precisions if p not in PRECISIONS]
            if unknown or not self.precisions:
                raise BadInput(f"precisions {list(self.precisions)!r}; valid: {', '.join(PRECISIONS)}")
        if self.tp_convention is not None and self.tp_convention not in TP_CONVENTIONS:
            raise BadInput(f"tp_convention {self.tp_convention!r}; valid: {', '.join(TP_CONVENTIONS)}")

    def supports(self, feature):
        """Whether the statement includes a feature (by name)."""
        _check_names([feature], "feature")
        return feature not in self.without and (self.features == "all" or feature in self.features)

    def statement(self):
        """The JSON object of the `supports` line."""
        statement = {"features": self.features if self.features == "all" else list(self.features)}
        if self.without:
            statement["without"] = list(self.without)
        for name in _LIMITS:
            if getattr(self, name) is not None:
                statement[name] = getattr(self, name)
        if self.precisions is not None:
            statement["precisions"] = list(self.precisions)
        if self.tp_convention is not None:
            statement["tp_convention"] = self.tp_convention
        return statement

    def to_json(self):
        return json.dumps(self.statement(), separators=(",", ":"))


def _check_names(names, field):
    unknown = [name for name in names if name not in FEATURES]
    if unknown:
        raise BadInput(f"{field}: unknown feature {unknown[0]!r}; valid: {', '.join(FEATURES)}")


def as_capabilities(supports):
    """A Capabilities from one, or from a dict of the same keys, or a list of feature names."""
    if supports is None or isinstance(supports, Capabilities):
        return supports
    if isinstance(supports, dict):
        return Capabilities(**supports)
    return Capabilities(list(supports))
