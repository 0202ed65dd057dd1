"""Real frameworks' attention run on attncheck's goldens and cases, each a module run with `python -m`:

- attncheck.adapters.hf_transformers: Hugging Face transformers' own attention modules (torch, transformers).
- attncheck.adapters.megatron_core: Megatron-Core's SelfAttention, one gloo process per TP rank (torch,
  megatron-core); attncheck.adapters.megatron_imports is what its fork server imports once.
- attncheck.adapters.torch_sdpa: PyTorch's scaled_dot_product_attention on the CPU (its flash backend), fp64,
  fp32 or bf16, as the core of a layer written around it in plain torch (attncheck.adapters.torch_layer).
- attncheck.adapters.torch_flex: PyTorch's FlexAttention on the CPU, eager or compiled, the same way
  (forward and decode; it has no CPU backward, so its candidates decline gradients).
- attncheck.adapters.jax_attention, .onnx_attention, .onnx_group_query_attention, .openvino_attention: JAX's
  dot_product_attention, the ONNX Attention operator and ORT's GroupQueryAttention on ONNX Runtime's CPU
  provider, OpenVINO's ScaledDotProductAttention, each the operator of a float64 layer
  (attncheck.adapters.operator_layer) at the candidate's precision (docs/OPERATORS.md).
- attncheck.adapters.command_line: the GOLDEN... -o / --output-dir / --worker command line they all share.

    python -m attncheck.adapters.hf_transformers GOLDEN.h5 -o CANDIDATE.h5
    python -m attncheck.adapters.megatron_core GOLDEN.h5 ... --output-dir DIR
    attncheck fuzz --impl "exec:python -m attncheck.adapters.hf_transformers --worker"
    attncheck fuzz --impl "exec:python -m attncheck.adapters.torch_sdpa --worker --dtype bf16" --profile long

Nothing is imported here: `import attncheck` and `import attncheck.adapters` import neither torch nor the
frameworks (those come from ci/setup, or pip, and are imported by the adapters when they run).
"""
