"""attncheck's Python package for adapters: run your own attention layer on attncheck's cases.

    from attncheck import read_case, write_candidate, serve, serve_sharded, RankResult, Unsupported

- read_case(path) -> Case: geometry, inputs (generated ones rebuilt), weights (HF layout), masks and
  SCHEMA-exact RoPE angles (attncheck.case).
- sharding: what each TP rank holds under attncheck's replicated-KV or Megatron's equal-block convention,
  and what each (TP, CP) rank holds under a context-parallel layout (context_parallel_holdings).
- write_candidate(path, tensors, ...): a candidate file for `attncheck compare`.
- Capabilities(features, ...): what a layer states it supports (attncheck.capabilities).
- judge(golden, candidate) -> Verdict: attncheck's judge (`attncheck compare --json`) of a candidate (a file, a
  Candidate, or a dict of tensors); check(layer, golden, supports=...) runs layer(case) on the golden and judges
  it (attncheck.judging). The pytest plugin (attncheck.pytest_plugin, entry point pytest11) parametrises a test
  over the committed goldens or fuzz cases.
- serve(run_case, description, supports=...): the exec: worker protocol for a single-process layer.
- serve_sharded(run_rank, description, ranks=P, ..., preload=[modules]): the protocol for a layer running
  one process per rank under torch.distributed (gloo on CPU, NCCL on GPU).
- attncheck.adapters: transformers' and Megatron-Core's own attention as candidate writers and workers
  (`python -m attncheck.adapters.hf_transformers`, `... .megatron_core`); not imported here, nor torch.

See README "Checking your own attention layer" and golden/SCHEMA.md.
"""
from .candidate import write_candidate
from .capabilities import FEATURES, Capabilities
from .case import Case, read_case, resolved_head_dim, weight_shapes
from .distributed import RankContext, RankResult, serve_sharded
from .errors import BadInput, Unsupported
from .judging import AttncheckError, Candidate, TensorVerdict, Verdict, check, committed_goldens, judge
from .sharding import assemble_full_gradients, context_parallel_holdings, holdings, shard_weights
from .worker import serve

__version__ = "0.1.0"
__all__ = ["AttncheckError", "BadInput", "Candidate", "Capabilities", "TensorVerdict", "Verdict", "check",
           "committed_goldens", "judge", "Case", "FEATURES", "RankContext", "RankResult", "Unsupported", "assemble_full_gradients",
           "context_parallel_holdings", "holdings",
           "read_case", "resolved_head_dim", "serve", "serve_sharded", "shard_weights", "weight_shapes",
           "write_candidate"]
