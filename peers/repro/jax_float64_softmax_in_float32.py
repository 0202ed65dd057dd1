#!/usr/bin/env python3
"""jax.nn.dot_product_attention called with float64 arrays (jax_enable_x64) returns float64 arrays computed
through a float32 softmax: its XLA implementation casts the logits to float32 before the softmax and the
probabilities back ("Softmax is always carried out in fp32", jax/_src/nn/functions.py, jax 0.10.2). The
result has float32's accuracy, about 1e-8 relative, where float64 promises 1e-16: nothing in the result's
dtype or in the function's documentation says so.

    python3 peers/repro/jax_float64_softmax_in_float32.py    # exit 1 while the defect exists

Found by attncheck: `python3 -m attncheck.adapters.jax_attention --dtype fp64` fails every tensor of every
committed golden it runs (ctest peer.jax), by some 1e8 fp64 ulps, while the same layer at fp32 passes.
"""
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402  (after x64 is enabled)


def attention_float64(query, key, value, scale):
    """The exact computation in numpy float64: softmax(scale q kᵀ) v, BTNH."""
    scores = np.einsum("btnh,bsnh->bnts", query, key) * scale
    scores -= scores.max(axis=-1, keepdims=True)
    probabilities = np.exp(scores)
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", probabilities, value)


def main():
    rng = np.random.default_rng(0)
    query, key, value = (rng.standard_normal((1, 16, 2, 64)) for _ in range(3))
    scale = 0.125
    expected = attention_float64(query, key, value, scale)
    got = jax.nn.dot_product_attention(jnp.asarray(query), jnp.asarray(key), jnp.asarray(value), scale=scale,
                                       implementation="xla")
    relative = float(np.abs(np.asarray(got) - expected).max() / np.abs(expected).max())
    print(f"jax {jax.__version__}: dot_product_attention(float64) dtype {got.dtype}, largest error relative to the "
          f"largest output {relative:.2g} (float64's rounding: {np.finfo(np.float64).eps:.2g}, float32's: "
          f"{np.finfo(np.float32).eps:.2g})")
    if got.dtype == jnp.float64 and relative > 1e3 * np.finfo(np.float64).eps:
        print("DEFECT: a float64 result with float32 accuracy (the softmax ran in float32)")
        return 1
    print("not reproduced: the float64 call is float64-accurate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
