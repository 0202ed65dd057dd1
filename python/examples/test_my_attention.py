"""MyAttention (my_attention_worker.py) under attncheck's pytest plugin: `pytest python/examples`."""
import pytest

from my_attention_worker import SUPPORTS, layer_tensors


@pytest.mark.attncheck(supports=SUPPORTS)  # every committed golden it states; the rest skipped, not run
def test_goldens(attncheck_case):
    attncheck_case.check(layer_tensors)  # fails with attncheck's localisation


@pytest.mark.attncheck(supports=SUPPORTS, fuzz_cases=25, seed=1)  # `attncheck fuzz --seed 1`'s first 25 cases
def test_fuzz(attncheck_case):
    attncheck_case.check(layer_tensors)
