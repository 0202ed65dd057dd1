"""Runs PyTorch's scaled_dot_product_attention on the CPU, in fp32 or bf16 (fp64 as a self-check of the
wrapper), as the attention core of a layer written around it in plain torch
(attncheck.adapters.torch_layer), and writes candidate files (golden/SCHEMA.md, "Candidate files").

    python -m attncheck.adapters.torch_sdpa GOLDEN.h5 -o CANDIDATE.h5 [--dtype fp32|bf16|fp64]
    python -m attncheck.adapters.torch_sdpa GOLDEN.h5 ... --output-dir DIR   # DIR/<golden name>.candidate.h5
    python -m attncheck.adapters.torch_sdpa --worker --dtype bf16 [--plant-bug NAME]  # attncheck fuzz --impl exec:'...'

The kernel: torch.nn.functional.scaled_dot_product_attention with enable_gqa (KV heads shared by their
query-head groups without repeating them), forced onto its CPU flash backend
(sdpa_kernel(SDPBackend.FLASH_ATTENTION): tiles with an online softmax, accumulating in fp32, and its
own backward, which recomputes the probabilities from the forward's log-sum-exp), which on torch 2.15
takes every mask attncheck needs (fp64 included); a call the flash backend refused would run on the
math backend, and the candidate's generator string names the backends that ran. --backend math forces
the math backend instead: the control that tells a finding of the flash kernel from one of the wrapper.
Gradients come from autograd through the kernel's backward, in the precision.

Masks as a framework passes them: none when every key is visible; is_causal=True when the mask is
exactly is_causal's own, which torch aligns top-left (query i sees keys j <= i even when there are
fewer queries than keys); otherwise an explicit boolean mask [batch, 1, seq_q, seq_k]. attncheck's
causal mask is bottom-right aligned, so a decode call (fewer queries than keys) always gets the
explicit mask; `--plant-bug top-left-causal` passes is_causal=True for it anyway (the bug of a caller
who reads is_causal as bottom-right aligned), which attncheck must catch. A query that sees no key
gets context 0 from both CPU backends under a boolean mask (torch 2.15), attncheck's convention, so
such cases are judged, not refused.

What SDPA cannot express is refused (exit 2; a worker answers "unsupported REASON"): a logit softcap
and attention sinks.

Exit codes: 0 candidates written, 2 bad input or a case SDPA cannot express.
"""
import sys

from attncheck.adapters import torch_layer

MODULE = "attncheck.adapters.torch_sdpa"  # run as `python -m {MODULE}` (PROG)
PROG = f"python -m {MODULE}"

PLANTED_BUGS = {
    "top-left-causal": "is_causal=True for every causal mask without padding or window, decode calls included "
                       "(read as bottom-right aligned; torch aligns it top-left)",
}


def causal_mask(seq_q, seq_k, bottom_right):
    """bool [seq_q, seq_k]: query i sees key j <= i (top-left, is_causal's alignment) or j <= i + seq_k − seq_q
    (bottom-right, attncheck's)."""
    import torch

    return torch.ones(seq_q, seq_k, dtype=torch.bool).tril(seq_k - seq_q if bottom_right else 0)


class SdpaKernel(torch_layer.Kernel):
    has_backward = True

    def __init__(self, precision, backend="flash", plant_bug=None):
        import torch

        self.precision = precision
        self.backend = backend  # "flash" (forced, math only where flash refuses a call) or "math"
        self.plant_bug = plant_bug
        self.torch_version = torch.__version__
        self.backends_ran = set()  # of the current case: "flash", or "math (flash refused: ...)"

    def unsupported_reasons(self, case):
        self.backends_ran = set()  # a new case: its generator string names its own backends
        reasons = []
        if "softcap" in case.geometry:
            reasons.append("softcap (scaled_dot_product_attention has no logit softcap)")
        if case.geometry.get("attention_sinks", 0):
            reasons.append("attention sinks (scaled_dot_product_attention has no sink logit in its softmax)")
        return reasons

    def mask_arguments(self, call):
        """{} (every key visible), {"is_causal": True} (the mask is is_causal's own, top-left aligned), or
        {"attn_mask": bool [batch, 1, seq_q, seq_k]} (broadcast over heads)."""
        if bool(call.visible.all()):
            return {}
        # The planted bug compares with the bottom-right mask instead: it then takes is_causal for decode
        # calls, where the two alignments differ.
        is_causal_mask = causal_mask(call.seq_q, call.seq_k, bottom_right=self.plant_bug == "top-left-causal")
        if bool((call.visible == is_causal_mask).all()):
            return {"is_causal": True}
        return {"attn_mask": call.visible[:, None]}

    def attend(self, call):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        arguments = dict(self.mask_arguments(call), scale=float(call.geometry["scale"]), enable_gqa=True)
        if self.backend == "flash":
            try:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    context = F.scaled_dot_product_attention(call.query, call.key, call.value, **arguments)
                self.backends_ran.add("flash")
                return context
            except RuntimeError as error:
                if "No available kernel" not in str(error):
                    raise
                # torch's message lists why each backend refused; its first line names the call.
                self.backends_ran.add(f"math (flash refused: {str(error).splitlines()[0][:200]})")
        else:
            self.backends_ran.add("math")
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(call.query, call.key, call.value, **arguments)

    def description(self):
        ran = f"; backends that ran: {', '.join(sorted(self.backends_ran))}" if self.backends_ran else \
            f"; {self.backend} backend forced"
        bug = f" (planted bug: {self.plant_bug})" if self.plant_bug else ""
        return (f"torch {self.torch_version} scaled_dot_product_attention (CPU, {self.precision}{ran}) "
                f"via {MODULE}{bug}")


def main():
    parser = torch_layer.argument_parser(PROG, __doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="flash", choices=["flash", "math"],
                        help="SDPA backend forced for every call (default flash: the kernel judged; math: the "
                             "control that tells a flash finding from the wrapper's)")
    parser.add_argument("--plant-bug", choices=sorted(PLANTED_BUGS),
                        help="run with this deliberate bug (to show that attncheck catches it)")
    arguments = parser.parse_args()
    kernel = SdpaKernel(arguments.dtype, arguments.backend, arguments.plant_bug)
    return torch_layer.main(parser, arguments, kernel, MODULE)


if __name__ == "__main__":
    sys.exit(main())
