"""README's worker (python/examples/my_attention_worker.py) with the bug an omitted head_dim plants: its scores
scaled by (hidden_size / num_heads)^-0.5 instead of head_dim^-0.5, as a layer that derives head_dim from the
quotient would. Its statement of capabilities is the example's. ctests python.quotient_scale_* hold that the
committed goldens (the ladder's explicit-head_dim rungs) and `attncheck fuzz` within 50 cases catch it: on every
case whose head_dim equals the quotient it is right, so only a head_dim independent of hidden / heads shows it.

    python3 quotient_scale_worker.py          serves the worker protocol (exec:python3 .../quotient_scale_worker.py)
"""
import functools
import importlib.util
import pathlib

import attncheck

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "my_attention_worker.py"
spec = importlib.util.spec_from_file_location("my_attention_worker", EXAMPLE)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


class QuotientScale(example.MyAttention):
    def __init__(self, hidden, heads, kv_heads, head_dim):
        super().__init__(hidden, heads, kv_heads, head_dim)
        self.scale = (hidden / heads) ** -0.5  # the bug: the quotient, not head_dim


if __name__ == "__main__":
    raise SystemExit(attncheck.serve(functools.partial(example.run_case, layer_class=QuotientScale),
                                     "MyAttention scaled by (hidden / heads)^-0.5 (planted bug)",
                                     supports=example.SUPPORTS))
