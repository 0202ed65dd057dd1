"""Real frameworks' attention run on attncheck's goldens and cases, each a module run with `python -m`:

- attncheck.adapters.hf_transformers: Hugging Face transformers' own attention modules (torch, transformers).
- attncheck.adapters.megatron_core: Megatron-Core's SelfAttention, one gloo process per TP rank (torch,
  megatron-core); attncheck.adapters.megatron_imports is what its fork server imports once.

    python -m attncheck.adapters.hf_transformers GOLDEN.h5 -o CANDIDATE.h5
    python -m attncheck.adapters.megatron_core GOLDEN.h5 ... --output-dir DIR
    attncheck fuzz --impl "exec:python -m attncheck.adapters.hf_transformers --worker"

Nothing is imported here: `import attncheck` and `import attncheck.adapters` import neither torch nor the
frameworks (those come from ci/setup, or pip, and are imported by the adapters when they run).
"""
