#!/usr/bin/env python3
"""jax.jit(jax.nn.dot_product_attention) on the CPU cannot compile a bfloat16 call with one query and one key
(the first decode step after a one-token prompt): XLA's CPU backend raises "Algorithm not supported by the
ElementalIrEmitter: ALG_DOT_BF16_BF16_F32". The XLA implementation asks its einsums for the BF16_BF16_F32
dot algorithm and falls back to the default one when that raises, but under jit the error comes at compile
time, after the fallback's try/except. Eager calls of the same shape, and jitted calls of any other shape
measured (1 query and 2 keys, 2 and 1, ...), run.

    python3 peers/repro/jax_jit_bf16_single_key.py    # exit 1 while the defect exists

Found by attncheck: `attncheck fuzz --impl exec:'python3 -m attncheck.adapters.jax_attention --worker --dtype
bf16 --jit'` stopped at case 4 (one head, head_dim 2, seq 3, decoding 1 + 1 + 1) with the worker's error;
the adapter now runs such calls eagerly and says so in the candidate's generator string.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np


def attend(query, key, value):
    return jax.nn.dot_product_attention(query, key, value, implementation="xla")


def main():
    rng = np.random.default_rng(0)
    query, key, value = (jnp.asarray(rng.standard_normal((1, 1, 1, 8)), dtype=jnp.bfloat16) for _ in range(3))
    eager = np.asarray(attend(query, key, value), dtype=np.float64)
    expected = np.asarray(value, dtype=np.float64)  # one key: its probability is 1, the output is its value
    verdict = "right" if np.array_equal(eager, expected) else "WRONG"
    print(f"jax {jax.__version__}: eager bfloat16, one query and one key: {verdict}")
    try:
        jitted = np.asarray(jax.jit(attend)(query, key, value), dtype=np.float64)
    except Exception as error:  # jax.errors.JaxRuntimeError
        print(f"DEFECT: jax.jit of the same call does not compile: {str(error).splitlines()[0][:160]}")
        return 1
    if not np.array_equal(jitted, expected):
        print("DEFECT: jax.jit of the same call compiles but returns a wrong value")
        return 1
    print("not reproduced: the jitted call compiles and returns the value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
