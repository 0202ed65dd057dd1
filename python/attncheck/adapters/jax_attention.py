"""Runs JAX's jax.nn.dot_product_attention (its XLA implementation, on the CPU), eager or under jax.jit, in
float64 (x64 enabled), float32 or bfloat16, with gradients through jax.vjp, as the operator of attncheck's
float64 layer (attncheck.adapters.operator_layer), and writes candidate files (golden/SCHEMA.md).

    python -m attncheck.adapters.jax_attention GOLDEN.h5 -o CANDIDATE.h5 [--dtype fp64|fp32|bf16] [--jit]
    python -m attncheck.adapters.jax_attention GOLDEN.h5 ... --output-dir DIR
    python -m attncheck.adapters.jax_attention --worker --dtype bf16 [--jit] [--plant-bug NAME]

The call is a JAX user's: BTNH layout, GQA by JAX itself, the case's scale. Masks through JAX's own
arguments where they give exactly SCHEMA's mask: is_causal (JAX aligns it top-left, as tril), a sliding
window as local_window_size=(window − 1, 0) (JAX: query i sees key j when j ≥ i − left; SCHEMA: when
j > i − window), key padding as key_value_seq_lengths. Where they do not (decode calls, whose queries are
aligned bottom-right), the boolean mask [batch, 1, seq_q, seq_k].

Conventions, refused by name: a query that sees no key gets the mean of V from JAX (it masks with a large
finite negative logit, not −inf), where SCHEMA's convention is 0; and dot_product_attention has no logit
softcap and no attention sinks. float64: JAX computes the softmax in float32 whatever the input
("Softmax is always carried out in fp32", jax/_src/nn/functions.py), so a float64 run is about 1e-7 off
and held to the fp64 contract it fails by design (peer.jax asserts that failure by name). bfloat16: the
probabilities are rounded to bf16 before P·V, as the contract's yardstick does. Under --jit a bfloat16
call with one query and one key runs eagerly (jax.jit cannot compile it on the CPU: peers/repro/
jax_jit_bf16_single_key.py), and the candidate's generator string counts such calls.

Exit codes: 0 candidates written, 2 bad input or a case the operator cannot express.
"""
import sys

import numpy as np

from attncheck.adapters import operator_layer

MODULE = "attncheck.adapters.jax_attention"
PROG = f"python -m {MODULE}"
PLANTED_BUGS = {"window-off-by-one": "local_window_size=(window, 0): one key more than the window on the left"}
JAX_DTYPES = {"fp64": "float64", "fp32": "float32", "bf16": "bfloat16"}


def native_arguments(call):
    """JAX's own mask arguments if they give exactly call.visible, else None. JAX's masks index queries and
    keys from 0 each (top-left), so only calls with as many queries as keys can use them."""
    geometry, (batch, seq_q, seq_k) = call.geometry, call.visible.shape
    if seq_q != seq_k:
        return None
    arguments, implied = {}, np.ones((batch, seq_q, seq_k), dtype=bool)
    query, key = np.arange(seq_q)[:, None], np.arange(seq_k)[None, :]
    if geometry["causal"]:
        arguments["is_causal"] = True
        implied &= key <= query
    if "sliding_window" in geometry:
        left = geometry["sliding_window"] - 1
        arguments["local_window_size"] = (left, 0 if geometry["causal"] else seq_k)
        implied &= key >= query - left
    if (call.key_lengths < seq_k).any():
        arguments["key_value_seq_lengths"] = call.key_lengths.astype(np.int32)
        implied &= key[None] < call.key_lengths[:, None, None]
    return arguments if np.array_equal(implied, call.visible) else None


class JaxAttention(operator_layer.Operator):
    has_backward = True
    precisions = tuple(JAX_DTYPES)
    without = ("softcap", "sinks", "keyless-rows")

    def __init__(self, precision, jit=False, plant_bug=None):
        import jax

        if precision == "fp64":
            jax.config.update("jax_enable_x64", True)
        self.jax, self.precision, self.jit, self.plant_bug = jax, precision, jit, plant_bug
        self.compiled = {}  # static mask arguments -> the jitted function (jit traces once per shape)
        self.eager_calls = 0  # of the current case, run eagerly under --jit (one query, one key, bf16)

    def unsupported_reasons(self, case):
        self.eager_calls, reasons = 0, []  # a new case
        if "softcap" in case.geometry:
            reasons.append("softcap (jax.nn.dot_product_attention has no logit softcap)")
        if case.geometry.get("attention_sinks", 0):
            reasons.append("attention sinks (jax.nn.dot_product_attention has no sink logit)")
        seq = case.x.shape[1]
        if not case.visible_keys(queries=seq, keys=seq).any(axis=-1).all():
            reasons.append("a query that sees no key (JAX gives it the mean of V, SCHEMA's convention is 0)")
        return reasons

    def function(self, call):
        """(f(q, k, v) in BTNH, static description); masks closed over, jitted once per static form."""
        import jax.numpy as jnp

        arguments, mask = native_arguments(call), None
        if arguments is None:  # the boolean mask [batch, 1, seq_q, seq_k], broadcast over heads
            arguments, mask = {}, jnp.asarray(call.visible[:, None])
        elif self.plant_bug == "window-off-by-one" and "local_window_size" in arguments:
            left, right = arguments["local_window_size"]
            arguments["local_window_size"] = (left + 1, right)
        lengths = arguments.pop("key_value_seq_lengths", None)
        static = tuple(sorted(arguments.items()))
        scale = float(call.geometry["scale"])

        def attention(q, k, v, mask, lengths):
            return self.jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, key_value_seq_lengths=lengths,
                                                     implementation="xla", **dict(static))

        if self.jit and not (self.precision == "bf16" and call.seq_q == call.seq_k == 1):
            attention = self.compiled.setdefault((static, scale, mask is None, lengths is None),
                                                 self.jax.jit(attention))
        elif self.jit:  # jax.jit cannot compile it (peers/repro/jax_jit_bf16_single_key.py): run it eagerly
            self.eager_calls += 1
        return lambda q, k, v: attention(q, k, v, mask, None if lengths is None else jnp.asarray(lengths))

    def inputs(self, call):
        import jax.numpy as jnp

        dtype = getattr(jnp, JAX_DTYPES[self.precision])
        return [jnp.asarray(array.transpose(0, 2, 1, 3), dtype=dtype) for array in (call.query, call.key, call.value)]

    def forward(self, call):
        return np.asarray(self.function(call)(*self.inputs(call))).transpose(0, 2, 1, 3)

    def forward_with_vjp(self, call):
        import jax.numpy as jnp

        context, vjp = self.jax.vjp(self.function(call), *self.inputs(call))

        def backward(d_context):
            d = jnp.asarray(d_context.transpose(0, 2, 1, 3), dtype=context.dtype)
            return [np.asarray(gradient).transpose(0, 2, 1, 3) for gradient in vjp(d)] + [None]

        return np.asarray(context).transpose(0, 2, 1, 3), backward

    def description(self):
        bug = f" (planted bug: {self.plant_bug})" if self.plant_bug else ""
        mode = "jax.jit" if self.jit else "eager"
        if self.eager_calls:
            mode += f", {self.eager_calls} bf16 call(s) of one query and one key eager: jit cannot compile them"
        return (f"jax {self.jax.__version__} jax.nn.dot_product_attention (xla, CPU, {mode}, "
                f"{JAX_DTYPES[self.precision]}) via {MODULE}{bug}")


def main():
    parser = operator_layer.argument_parser(PROG, __doc__.split("\n\n")[0], JaxAttention.precisions,
                                            PLANTED_BUGS)
    parser.add_argument("--jit", action="store_true", help="run the operator under jax.jit (default: eager)")
    arguments = parser.parse_args()
    return operator_layer.main(parser, arguments,
                               lambda: JaxAttention(arguments.dtype, arguments.jit, arguments.plant_bug), MODULE)


if __name__ == "__main__":
    sys.exit(main())
