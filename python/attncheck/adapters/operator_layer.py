"""The float64 layer around an attention operator of another framework (JAX, ONNX Runtime, OpenVINO):
what attncheck.adapters.jax_attention, .onnx_attention and .openvino_attention share, so that each of them
is only the operator's call.

Everything but the operator is attncheck.adapters.torch_layer's layer run in float64: the fused QKV
projection, QK-norm, RoPE from SCHEMA's frequencies, the masks, the KV cache of the decode schedule,
o_proj, and torch autograd for the gradients. Only the operator runs at the candidate's precision:
q, k, v (and the sink logits) are rounded to the precision once where they enter it, its context is
rounded to the precision where it leaves (the contract's stored results), and for the gradients the
operator's own vector-Jacobian product takes d context rounded to the precision and gives dq, dk, dv
(and d sinks), rounded likewise. The float64 glue is more exact than the contract's yardstick asks, so a
failure below fp64 is the operator's; the glue itself is vouched for by the torch adapters' fp64 runs on
every committed golden (peer.torch_sdpa, peer.torch_flex_eager).

An operator sees numpy arrays (OperatorCall): values exactly representable in the precision, carried as
float64 for fp64 and float32 below (bf16 and fp16 values are exact in float32), in the layouts named
there; it casts them to its own dtype. Its context may come back in any floating numpy dtype
(ml_dtypes' bfloat16 included).
"""
import abc
import dataclasses
import sys

import numpy as np

import attncheck
from attncheck import BadInput
from attncheck.adapters import command_line, torch_layer

# Candidate precision -> torch dtype name of its rounding (the carrier is float64 for fp64, float32 below).
PRECISIONS = {"fp64": "float64", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclasses.dataclass
class OperatorCall:
    """One call of the operator, as numpy arrays (values exact in `precision`, carried as float64 or float32).

    query:   [batch, num_heads, seq_q, head_dim]
    key:     [batch, num_kv_heads, seq_k, head_dim]   every key so far; keys [0, first_query) are the cache
    value:   [batch, num_kv_heads, seq_k, head_dim]   before this call, [first_query, seq_k) this call's own
    visible: bool [batch, seq_q, seq_k], SCHEMA's masks (query i is key index first_query + i)
    first_query: the cache length before this call (0 in the full forward)
    key_lengths: int64 [batch]; keys j >= key_lengths[b] are padding
    sinks:   [num_heads] sink logits, or None
    geometry: the case's /geometry (scale, softcap, sliding_window, causal)
    """

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    visible: np.ndarray
    first_query: int
    key_lengths: np.ndarray
    sinks: object
    geometry: dict
    precision: str

    @property
    def seq_q(self):
        return self.query.shape[2]

    @property
    def seq_k(self):
        return self.key.shape[2]

    def bottom_right_causal(self):
        """bool [seq_q, seq_k]: the causal mask alone, bottom-right aligned (SCHEMA's)."""
        return np.tri(self.seq_q, self.seq_k, self.first_query, dtype=bool)


# What the float64 layer itself does not do, whatever the operator: latent attention (no latent projections
# here) and the parallel layouts (one unsharded process: tp_size 1, excused from per-rank gradients).
LAYER_WITHOUT = ("latent", "tensor-parallel", "kv-replication", "context-parallel")


class Operator(abc.ABC):
    """What an adapter supplies. forward(call) -> context [batch, num_heads, seq_q, head_dim]. An operator
    with has_backward also supplies forward_with_vjp(call) -> (context, vjp), vjp(d_context) -> (dq, dk, dv,
    d_sinks or None), d_context and the results in the layouts of OperatorCall.

    The statement of capabilities (docs/CAPABILITIES.md) a worker makes is every feature but LAYER_WITHOUT,
    the operator's `without` and, without a backward, "backward"; unsupported_reasons must refuse exactly the
    cases that use one of those (a refusal inside the statement is a broken promise)."""

    has_backward = False
    precisions = ("fp32",)  # what --dtype offers
    without = ()  # capability features the operator cannot express
    head_dim_multiple_of = None

    def capabilities(self, precision):
        without = LAYER_WITHOUT + tuple(self.without) + (() if self.has_backward else ("backward",))
        return attncheck.Capabilities(features="all", without=without, precisions=(precision,),
                                      head_dim_multiple_of=self.head_dim_multiple_of)

    def unsupported_reasons(self, case):
        return []

    def declined_parts(self, case):
        """{part: reason}: without a backward, the gradients (SCHEMA "Declined parts")."""
        return {} if self.has_backward else {"grads": f"{self.description()} has no backward pass (inference only)"}

    @abc.abstractmethod
    def forward(self, call):
        pass

    def forward_with_vjp(self, call):
        # Called only when has_backward is set: an operator that sets it must define this.
        raise TypeError(f"{type(self).__name__} sets has_backward but defines no forward_with_vjp")

    @abc.abstractmethod
    def description(self):
        pass


def rounded(tensor, precision):
    """A float64 torch tensor rounded to the precision, as the numpy carrier (float64 for fp64, float32 below)."""
    import torch

    values = tensor.detach().to(getattr(torch, PRECISIONS[precision]))
    return values.to(torch.float64 if precision == "fp64" else torch.float32).numpy()


def returned(array, precision, shape, what):
    """An operator's numpy result -> a float64 torch tensor rounded to the precision, its shape checked."""
    import torch

    values = np.asarray(array)
    if tuple(values.shape) != tuple(shape) or values.dtype.kind not in "fV":  # V: ml_dtypes' bfloat16
        raise RuntimeError(f"the operator returned {what} of shape {list(values.shape)} and dtype {values.dtype}; "
                           f"expected {list(shape)}, floating")
    as_float64 = torch.from_numpy(np.ascontiguousarray(values.astype(np.float64)))
    return as_float64.to(getattr(torch, PRECISIONS[precision])).to(torch.float64)


class OperatorKernel(torch_layer.Kernel):
    """torch_layer's Kernel for an Operator: the bridge between the float64 torch layer and numpy calls."""

    def __init__(self, operator, precision):
        self.operator, self.precision = operator, precision
        self.has_backward = operator.has_backward

    def unsupported_reasons(self, case):
        layer = []
        if attncheck.case.is_latent(case.geometry):
            layer.append("multi-head latent attention (the float64 layer around the operator has no latent "
                         "projections)")
        return layer + self.operator.unsupported_reasons(case)

    def declined_parts(self, case):
        return self.operator.declined_parts(case)

    def numpy_call(self, call):
        sinks = None if call.sinks is None else rounded(call.sinks, self.precision)
        return OperatorCall(query=rounded(call.query, self.precision), key=rounded(call.key, self.precision),
                            value=rounded(call.value, self.precision), visible=call.visible.numpy(),
                            first_query=call.first_query, key_lengths=call.key_lengths.numpy(), sinks=sinks,
                            geometry=call.geometry, precision=self.precision)

    def attend(self, call):
        import torch

        if self.has_backward and torch.is_grad_enabled():
            sinks = call.sinks if call.sinks is not None else torch.zeros(0, dtype=torch.float64)
            return ThroughVjp.apply(self, call, call.query, call.key, call.value, sinks)
        context = self.operator.forward(self.numpy_call(call))
        return returned(context, self.precision, call.query.shape, "a context")

    def description(self):
        return f"{self.operator.description()} (layer around it in float64)"


def through_vjp_class():
    import torch

    class Through(torch.autograd.Function):
        """The operator in torch's autograd graph: forward by the operator, backward by its own vjp."""

        @staticmethod
        def forward(ctx, kernel, call, query, key, value, sinks):
            context, vjp = kernel.operator.forward_with_vjp(kernel.numpy_call(call))
            ctx.kernel, ctx.vjp, ctx.shapes = kernel, vjp, (query.shape, key.shape, value.shape, sinks.shape)
            return returned(context, kernel.precision, query.shape, "a context")

        @staticmethod
        def backward(ctx, d_context):
            kernel = ctx.kernel
            gradients = ctx.vjp(rounded(d_context, kernel.precision))
            names = ("d query", "d key", "d value")
            results = [returned(values, kernel.precision, shape, name)
                       for values, shape, name in zip(gradients[:3], ctx.shapes, names)]
            sinks_shape = ctx.shapes[3]
            d_sinks = None
            if sinks_shape[0]:
                d_sinks = returned(gradients[3], kernel.precision, sinks_shape, "d sinks")
            return None, None, *results, d_sinks

    return Through


class _LazyThroughVjp:
    """torch.autograd.Function built on first use: `import attncheck.adapters.operator_layer` imports no torch."""

    function = None

    def apply(self, *arguments):
        if _LazyThroughVjp.function is None:
            _LazyThroughVjp.function = through_vjp_class()
        return _LazyThroughVjp.function.apply(*arguments)


ThroughVjp = _LazyThroughVjp()


def argument_parser(prog, description, precisions, planted_bugs):
    """The operator adapters' command line: torch_layer's GOLDEN... / -o / --output-dir / --worker, --dtype among
    the operator's precisions, --plant-bug among its planted bugs ({name: what the bug does})."""
    parser = command_line.golden_parser(prog, description)
    parser.add_argument("--dtype", default="fp32", choices=list(precisions),
                        help="precision of the operator (the layer around it runs in float64)")
    parser.add_argument("--plant-bug", choices=sorted(planted_bugs),
                        help="run with this deliberate bug (to show that attncheck catches it)")
    return parser


def main(parser, arguments, make_operator, module):
    """Runs the parsed command line (torch_layer.main's) with the operator make_operator() builds; returns the
    exit status (0, or 2 for bad input, an operator that cannot be built, and cases it cannot express)."""
    try:
        operator = make_operator()
    except BadInput as error:
        print(f"{module}: {error}", file=sys.stderr)
        return 2
    kernel = OperatorKernel(operator, arguments.dtype)
    return torch_layer.main(parser, arguments, kernel, module, layer_precision="fp64",
                            supports=operator.capabilities(arguments.dtype))
