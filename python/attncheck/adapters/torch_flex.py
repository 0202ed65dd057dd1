"""Runs PyTorch's FlexAttention (torch.nn.attention.flex_attention) on the CPU, eager or compiled, in
fp32 or bf16 (fp64, eager only, as a self-check of the wrapper), as the attention core of a layer
written around it in plain torch (attncheck.adapters.torch_layer), and writes candidate files
(golden/SCHEMA.md, "Candidate files").

    python -m attncheck.adapters.torch_flex GOLDEN.h5 -o CANDIDATE.h5 [--dtype fp32|bf16|fp64] [--mode eager|compiled]
    python -m attncheck.adapters.torch_flex GOLDEN.h5 ... --output-dir DIR   # DIR/<golden name>.candidate.h5
    python -m attncheck.adapters.torch_flex --worker --dtype bf16 --mode compiled [--plant-bug NAME]

The kernel: flex_attention(q, k, v, score_mod, block_mask, scale, enable_gqa=True), every SCHEMA mask as a
mask_mod turned into a BlockMask (causal bottom-right aligned: query i of a call is key index
first_query + i; a window bounding keys from below; key padding from key_lengths), the softcap as a
score_mod (flex applies score_mod to the already-scaled score, which is SCHEMA's order: softcap after
the scale), attention sinks through the returned log-sum-exp: with lse = log Σ_j exp(S_ij) over the
visible keys (natural log, checked in float64 by peers/torch_kernels_test.py),
    out_with_sink = out · exp(lse) / (exp(lse) + exp(s_h)) = out · sigmoid(lse − s_h),
which is 0 for a query that sees no key (lse = −inf), as SCHEMA's sink convention says.

--mode eager runs flex's eager path (on the CPU, torch 2.15: the scores materialised in fp32 — float64
for fp64 inputs —, score_mod and mask_mod vmapped over them, a safe softmax that gives a query without
keys context 0, probabilities rounded to the input precision before P·V). --mode compiled runs
torch.compile(flex_attention), inductor's C++ flex template (tiles with an online softmax); it takes
no float64 inputs and cannot return the log-sum-exp on the CPU, so fp64 is refused and sinks are
declined by name there. Shapes are static: every new shape (each decode step's too) compiles its own
kernel, about 6 s each on a small machine (dynamic shapes break the CPU template: see
compiled_flex_attention); dynamo's recompile limit is raised and its silent fallback to eager turned
into an error, so that a compiled run is compiled.

FlexAttention has no backward on the CPU (flex_attention raises NotImplementedError for inputs that
require grad, eager and compiled): every candidate declines "grads" with that reason; out and the
decode schedule (a KV cache held here, each call masked over every key so far) are judged.

Exit codes: 0 candidates written, 2 bad input or a case FlexAttention cannot express.
"""
import sys
import warnings

from attncheck import BadInput
from attncheck.adapters import torch_layer

MODULE = "attncheck.adapters.torch_flex"  # run as `python -m {MODULE}` (PROG)
PROG = f"python -m {MODULE}"
MODES = ("eager", "compiled")

PLANTED_BUGS = {
    "softcap-before-scale": "the softcap applied to the unscaled score q·k and the result scaled after it",
    "decode-without-offset": "the mask_mod's query index not offset by the cache length (causal aligned top-left "
                             "in decode calls)",
}
# Distinct shapes a worker may compile before dynamo would give up (it then runs eagerly, silently, unless
# told to fail): far more than any fuzz run's shapes.
RECOMPILE_LIMIT = 100_000


def compiled_flex_attention():
    """torch.compile(flex_attention) with static shapes, dynamo's silent eager fallback at its recompile
    limit turned into an error (a "compiled" candidate must come from compiled code).

    Static shapes (dynamic=False: one kernel per shape, compiled afresh) because dynamo's automatic dynamic
    shapes, which it switches on at the second shape, break the CPU template: with a mask_mod that indexes
    a captured tensor (key_lengths[b]) the generated C++ does not compile ("'cur_qSplitSize9' was not
    declared": the template swaps symbol names by text; peers/repro/flex_compiled_dynamic_mask_tensor.py)."""
    import torch
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
    torch._dynamo.config.accumulated_recompile_limit = RECOMPILE_LIMIT
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    return torch.compile(flex_attention, dynamic=False, fullgraph=True)


def visibility_mask_mod(call, plant_bug):
    """mask_mod(b, h, q_idx, kv_idx) -> bool: SCHEMA's mask for this call. Offsets and the window are
    tensors, not Python ints, so that compiled code does not specialise (and recompile) on them."""
    import torch

    geometry = call.geometry
    key_lengths = call.key_lengths  # int64 [batch]
    first_query = torch.tensor(0 if plant_bug == "decode-without-offset" else call.first_query)
    window = torch.tensor(geometry.get("sliding_window", 0))
    causal, windowed = bool(geometry["causal"]), "sliding_window" in geometry

    def mask_mod(b, h, q_idx, kv_idx):
        query_index = q_idx + first_query  # the query's key index (bottom-right alignment)
        visible = kv_idx < key_lengths[b]
        if causal:
            visible = visible & (kv_idx <= query_index)
        if windowed:
            visible = visible & (kv_idx > query_index - window)
        return visible

    return mask_mod


def softcap_score_mod(softcap, scale_inside, working, as_float=False):
    """score_mod: softcap · tanh(score / softcap) on the scaled score (flex passes it scaled). The planted
    bug receives the unscaled score (flex's scale set to 1) and scales after the cap.

    The softcap is captured as a 0-d tensor in the working precision (that of flex's scores), not as a
    Python float: a score_mod closing over a float crashes flex_attention, eager and compiled, at the
    second distinct value in a process (dynamo makes the float a SymFloat, which flex's score_mod
    buffers refuse: peers/repro/flex_score_mod_float_capture.py). as_float (--softcap-as-float) captures
    the float anyway, to show that defect."""
    import torch

    cap = float(softcap) if as_float else torch.tensor(float(softcap), dtype=working)
    if scale_inside == 1.0:
        def score_mod(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)
    else:
        scale = torch.tensor(scale_inside, dtype=working)  # a tensor, as the cap, so as not to crash flex

        def score_mod(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap) * scale

    return score_mod


def with_sinks(out, lse, sinks):
    """out [batch, heads, seq_q, head_dim] and lse [batch, heads, seq_q] (natural log over the visible keys)
    -> out · sigmoid(lse − sink_h), the sink's share of the denominator removed, in the working precision
    and stored once in the precision."""
    import torch

    working = torch_layer.working_dtype(out.dtype)
    keep = torch.sigmoid(lse.to(working) - sinks.to(working)[None, :, None])  # [batch, heads, seq_q]
    return (out.to(working) * keep[..., None]).to(out.dtype)


class FlexKernel(torch_layer.Kernel):
    has_backward = False

    def __init__(self, precision, mode, plant_bug=None, softcap_as_float=False):
        import torch
        from torch.nn.attention.flex_attention import flex_attention

        if mode == "compiled" and precision == "fp64":
            raise BadInput("--mode compiled --dtype fp64: compiled FlexAttention on the CPU takes fp32, fp16 and bf16 "
                           "only (torch's CPU template refuses float64); the fp64 self-check runs --mode eager")
        self.precision, self.mode, self.plant_bug = precision, mode, plant_bug
        self.softcap_as_float = softcap_as_float
        self.torch_version = torch.__version__
        self.flex = compiled_flex_attention() if mode == "compiled" else flex_attention
        # Eager is what is judged here, on purpose: flex's advice to compile it is --mode compiled.
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")

    def unsupported_reasons(self, case):
        if self.mode == "compiled" and case.geometry.get("attention_sinks", 0):
            return [f"attention sinks with compiled FlexAttention on the CPU (they need the log-sum-exp, and torch "
                    f"{self.torch_version}'s CPU template refuses return_lse: 'torch.compile on CPU only supports "
                    "inference and `return_lse` is not supported yet')"]
        return []

    def declined_parts(self, case):
        return {"grads": f"FlexAttention has no backward on the CPU (torch {self.torch_version}: flex_attention "
                         "raises NotImplementedError for inputs that require grad)"}

    def attend(self, call):
        from torch.nn.attention.flex_attention import AuxRequest, create_block_mask

        batch = call.query.shape[0]
        block_mask = create_block_mask(visibility_mask_mod(call, self.plant_bug), batch, None, call.seq_q,
                                       call.seq_k, device="cpu")
        scale = float(call.geometry["scale"])
        score_mod = None
        if "softcap" in call.geometry:
            bug = self.plant_bug == "softcap-before-scale"
            score_mod = softcap_score_mod(call.geometry["softcap"], scale if bug else 1.0,
                                          torch_layer.working_dtype(call.query.dtype), self.softcap_as_float)
            scale = 1.0 if bug else scale
        arguments = dict(score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=True)
        if call.sinks is None:
            return self.flex(call.query, call.key, call.value, **arguments)
        out, aux = self.flex(call.query, call.key, call.value, return_aux=AuxRequest(lse=True), **arguments)
        return with_sinks(out, aux.lse, call.sinks)

    def description(self):
        bug = f" (planted bug: {self.plant_bug})" if self.plant_bug else ""
        return f"torch {self.torch_version} flex_attention ({self.mode}, CPU, {self.precision}) via {MODULE}{bug}"


def main():
    parser = torch_layer.argument_parser(PROG, __doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="eager", choices=MODES,
                        help="flex_attention as it is (eager) or through torch.compile (compiled)")
    parser.add_argument("--plant-bug", choices=sorted(PLANTED_BUGS),
                        help="run with this deliberate bug (to show that attncheck catches it)")
    parser.add_argument("--softcap-as-float", action="store_true",
                        help="capture the softcap in the score_mod as a Python float, which crashes flex_attention "
                             "at a second softcap value (a torch defect: peers/repro/flex_score_mod_float_capture.py)")
    arguments = parser.parse_args()
    try:
        kernel = FlexKernel(arguments.dtype, arguments.mode, arguments.plant_bug, arguments.softcap_as_float)
    except BadInput as error:
        print(f"{MODULE}: {error}", file=sys.stderr)
        return 2
    return torch_layer.main(parser, arguments, kernel, MODULE)


if __name__ == "__main__":
    sys.exit(main())
