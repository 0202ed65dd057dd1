#!/usr/bin/env python3
"""torch's scaled_dot_product_attention on the shapes of bench/cuda_bench.cpp, for machines where the
C++ benchmark is built without LibTorch (ci/gpu-bundle: GPU machines without package registries bring
their own torch). Close to cuda_bench's method: bf16, [batch, heads, seq, head_dim] with GQA via
enable_gqa, batch x seq = 16,384 tokens, the L2 flushed before each timed call, CUDA-event time; here the
median of 10 single calls after 3 warm-ups (cuda_bench: the median of 10 Google Benchmark repetitions); forward
FLOPs 4 b s^2 H_q d (halved when causal), backward 2.5x. One backend at a time (flash, cuDNN); a
backend that refuses a shape is reported as such.

    python3 bench/sdpa_bench.py [--filter REGEX] [--repetitions 10]
"""
import argparse
import re
import statistics
import sys

TOKENS = 16384
SHAPES = [  # name, query heads, KV heads, head_dim (cuda_bench.cpp's list)
    ("gqa64x8_d64", 64, 8, 64),
    ("gqa64x8_d80", 64, 8, 80),
    ("gqa64x8_d96", 64, 8, 96),
    ("gqa64x8_d128", 64, 8, 128),
    ("gqa64x8_d192", 64, 8, 192),
    ("gqa64x8_d256", 64, 8, 256),
    ("gqa16x8_d128", 16, 8, 128),
    ("gqa16x8_d64", 16, 8, 64),
    ("gqa16x8_d80", 16, 8, 80),
    ("gqa16x8_d256", 16, 8, 256),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", default=".*", help="regular expression on the benchmark name")
    parser.add_argument("--repetitions", type=int, default=10)
    args = parser.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as error:
        print(f"sdpa_bench: torch is not importable: {error}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sdpa_bench: no CUDA device", file=sys.stderr)
        return 2
    backends = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(call):
        flush.zero_()
        start.record()
        call()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for backend_name, backend in backends.items():
        for shape, heads, kv_heads, head_dim in SHAPES:
            for causal in (False, True):
                for backward in (False, True):
                    for seq in (1024, 4096, 16384):
                        name = (f"{backend_name}/{shape}/{'causal' if causal else 'full'}/"
                                f"{'backward' if backward else 'forward'}/seq:{seq}")
                        if not re.search(args.filter, name):
                            continue
                        batch = TOKENS // seq
                        generator = torch.Generator(device="cuda").manual_seed(1)
                        def make(h):
                            return torch.randn(batch, h, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                                               generator=generator, requires_grad=backward)
                        q, k, v = make(heads), make(kv_heads), make(kv_heads)
                        d_o = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)

                        def attention():
                            return torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, is_causal=causal, enable_gqa=True)
                        times = []
                        try:
                            with sdpa_kernel(backend):
                                for repetition in range(3 + args.repetitions):
                                    if backward:
                                        out = attention()
                                        torch.cuda.synchronize()
                                        seconds = timed(lambda: out.backward(d_o))
                                    else:
                                        seconds = timed(attention)
                                    if repetition >= 3:
                                        times.append(seconds)
                        except RuntimeError as error:
                            print(f"{name:<60} refused: {str(error).splitlines()[0][:100]}")
                            continue
                        median = statistics.median(times)
                        flops = 4.0 * batch * seq * seq * heads * head_dim * (0.5 if causal else 1.0)
                        flops *= 2.5 if backward else 1.0
                        print(f"{name:<60} median {median * 1e3:9.3f} ms  {flops / median / 1e12:8.1f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
