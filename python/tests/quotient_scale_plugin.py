"""A pytest plugin (`pytest -p quotient_scale_plugin`) that plants the omitted-head_dim bug in the example layer
before python/examples/test_my_attention.py imports it: MyAttention's scores scaled by (hidden / heads)^-0.5, as
quotient_scale_worker.py does. ctest python.pytest_broken_layer holds that the example's pytest file fails on it
and prints attncheck's localisation."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import my_attention_worker  # noqa: E402  (the module the test file imports: patched once, here)

_original_init = my_attention_worker.MyAttention.__init__


def _quotient_scale_init(self, hidden, heads, kv_heads, head_dim):
    _original_init(self, hidden, heads, kv_heads, head_dim)
    self.scale = (hidden / heads) ** -0.5  # the bug: the quotient, not head_dim


my_attention_worker.MyAttention.__init__ = _quotient_scale_init
