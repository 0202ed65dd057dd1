"""The attention layer around a kernel under test, in plain torch at one precision: what
attncheck.adapters.torch_sdpa and attncheck.adapters.torch_flex share.

The kernel judged is only the attention core, context = softmax(scale · q kᵀ + masks) v (with a
softcap or sinks where the kernel can express them). Everything around it is written here once,
following golden/SCHEMA.md exactly, so that the two adapters differ only in the call they make:

- one fused QKV projection x · [q_proj; k_proj; v_proj]ᵀ (+ biases), as fused-QKV layers do: its
  backward forms d x as one GEMM over the three projections' gradients, as the precision contract's
  yardstick does (reference/emulated_layer.cpp), instead of three rounded GEMMs and two rounded adds;
- QK-norm of each kind (rms, rms-one-plus, rms-full-width), before RoPE;
- RoPE (half-split, interleaved, partial) from SCHEMA's frequencies (attncheck.case, longrope's
  factors chosen per forward call), angles formed in float64, cos and sin rounded to the precision:
  candidates declare rope_angles "float64";
- the masks (attncheck.case.Case.visible_keys: causal bottom-right aligned, window, key padding);
- o_proj; autograd for the gradients when the kernel has a backward; a KV cache for the decode
  schedule (each call projects, normalises and rotates its own tokens with its own call's
  frequencies, appends them to the cache and attends over every key so far).

The precision contract (golden/SCHEMA.md "Low-precision candidates"): every stored intermediate is
rounded to the precision and arithmetic accumulates in fp32 or wider. So the projections are torch's
GEMMs in the precision (they accumulate in fp32 on the CPU), and the elementwise chains the contract
names as one stored result — the QK-norm's output, the rotated q and k — are computed in the
working precision (fp32 below fp64, as transformers' RMSNorm upcasts) and stored once in the
precision. The wrapper is thus no less exact than the yardstick it is judged by, and its fp64 run
(--dtype fp64 passes the committed goldens at fp64 tolerance) vouches for its arithmetic: a
low-precision failure is the kernel's. The kernel itself is never upcast.
"""
import abc
import dataclasses
import sys

import numpy as np

import attncheck
from attncheck import BadInput, Unsupported
from attncheck.adapters import command_line

# --dtype names -> torch dtype names (candidate precision names are the keys).
PRECISIONS = {"fp64": "float64", "fp32": "float32", "bf16": "bfloat16"}


def torch_dtype(precision):
    import torch

    return getattr(torch, PRECISIONS[precision])


def working_dtype(dtype):
    """The arithmetic of the elementwise chains around the kernel: float64 in an fp64 run, float32
    below it (the contract's accumulation precision)."""
    import torch

    return torch.float64 if dtype == torch.float64 else torch.float32


# ---------------------------------------------------------------------------------------------
# The kernel's side of the interface

@dataclasses.dataclass
class KernelCall:
    """One call of the attention core, all tensors in the run's precision unless said.

    query:   [batch, num_heads, seq_q, head_dim]
    key:     [batch, num_kv_heads, seq_k, head_dim]   every key so far (the KV cache in decode calls)
    value:   [batch, num_kv_heads, seq_k, head_dim]
    visible: bool [batch, seq_q, seq_k], SCHEMA's masks (query i is key index first_query + i)
    first_query: key index of query 0 (0 in the full forward, the cache length before a decode call)
    key_lengths: int64 [batch]; keys j >= key_lengths[b] are padding
    sinks:   [num_heads] sink logits, or None
    geometry: the case's /geometry (scale, softcap, sliding_window, causal)
    """

    query: object
    key: object
    value: object
    visible: object
    first_query: int
    key_lengths: object
    sinks: object
    geometry: dict

    @property
    def seq_q(self):
        return self.query.shape[2]

    @property
    def seq_k(self):
        return self.key.shape[2]


class Kernel(abc.ABC):
    """What an adapter supplies: the core, what it cannot express, and what it declines.

    attend(call) -> context [batch, num_heads, seq_q, head_dim] in the call's precision.
    has_backward: whether autograd can differentiate attend (else the layer runs without gradients and
    the candidate declines "grads" for the reason declined_parts gives).
    """

    has_backward = True

    def unsupported_reasons(self, case):
        """[reason, ...]: what in this case the kernel cannot express (empty: it can)."""
        return []

    def declined_parts(self, case):
        """{part: reason} for parts of the candidate the kernel cannot produce (SCHEMA "Declined parts")."""
        return {}

    @abc.abstractmethod
    def attend(self, call):
        """The context for one call (KernelCall) in the call's precision."""

    @abc.abstractmethod
    def description(self):
        """The candidate's generator string: the kernel, its version and what actually ran."""


# ---------------------------------------------------------------------------------------------
# Parameters

def fused_rows(*parts):
    """np.concatenate(parts) along the first axis, without the copy where the parts are already consecutive
    row blocks of one C-contiguous array, as attncheck.read_case's generated q/k/v_proj are: a view of it."""
    base = parts[0].base
    if not isinstance(base, np.ndarray) or not base.flags.c_contiguous:
        return np.concatenate(parts)
    address = base.ctypes.data
    for part in parts:
        if (part.base is not base or not part.flags.c_contiguous or part.dtype != base.dtype
                or part.shape[1:] != parts[0].shape[1:] or part.ctypes.data != address):
            return np.concatenate(parts)
        address += part.nbytes
    if address != base.ctypes.data + base.nbytes:
        return np.concatenate(parts)
    return base.reshape((sum(part.shape[0] for part in parts),) + parts[0].shape[1:])  # C-contiguous: a view


class LayerParameters:
    """The case's weights as torch tensors in the run's precision (attncheck's generated weights are small
    integers times powers of two, exact in bf16: SCHEMA.md), leaves requiring gradients when there is a
    backward.

    qkv_weight: [(num_heads + 2 · num_kv_heads) · head_dim, hidden]  q_proj rows, then k_proj, then v_proj
    qkv_bias:   [(num_heads + 2 · num_kv_heads) · head_dim] or None   in the same order
    o_proj:     [hidden, num_heads · head_dim];  o_bias [hidden] or None
    q_norm, k_norm: [head_dim] (per head) or [num_heads · head_dim] / [num_kv_heads · head_dim]
                    (rms-full-width), or None
    sinks:      [num_heads] or None
    """

    def __init__(self, case, dtype, requires_grad):
        import torch

        weights = case.weights

        def leaf(values):
            if values is None:
                return None
            return torch.from_numpy(np.ascontiguousarray(values)).to(dtype).requires_grad_(requires_grad)

        self.query_width = case.num_heads * case.head_dim
        self.kv_width = case.num_kv_heads * case.head_dim
        self.qkv_weight = leaf(fused_rows(weights["q_proj"], weights["k_proj"], weights["v_proj"]))
        self.qkv_bias = None
        if "q_bias" in weights:
            self.qkv_bias = leaf(fused_rows(weights["q_bias"], weights["k_bias"], weights["v_bias"]))
        self.o_proj = leaf(weights["o_proj"])
        self.o_bias = leaf(weights.get("o_bias"))
        self.q_norm = leaf(weights.get("q_norm"))
        self.k_norm = leaf(weights.get("k_norm"))
        self.sinks = leaf(weights.get("sinks"))
        self.names = sorted(weights)

    def split_qkv(self, fused):
        """[..., q rows | k rows | v rows] -> (q, k, v) along the first axis."""
        return fused.split([self.query_width, self.kv_width, self.kv_width], dim=0)

    def gradients(self):
        """{golden weight name: float64 array}: every weight's gradient in SCHEMA's shape."""
        result = dict(zip(("q_proj", "k_proj", "v_proj"), map(values_of, self.split_qkv(self.qkv_weight.grad))))
        if self.qkv_bias is not None:
            result.update(zip(("q_bias", "k_bias", "v_bias"), map(values_of, self.split_qkv(self.qkv_bias.grad))))
        for name in ("o_proj", "o_bias", "q_norm", "k_norm", "sinks"):
            tensor = getattr(self, name)
            if tensor is not None:
                result[name] = values_of(tensor.grad)
        missing = sorted(set(self.names) - set(result))
        if missing:
            raise RuntimeError(f"no gradient mapped back for {', '.join(missing)}")
        return result


def values_of(tensor):
    """A tensor as a float64 numpy array (what a candidate stores, whatever the precision)."""
    import torch

    return tensor.detach().to(torch.float64).contiguous().numpy()


# ---------------------------------------------------------------------------------------------
# The layer's pieces around the kernel

def rms_normalise(channels, weight, geometry):
    """x / rms(x) · w (rms, rms-full-width) or · (1 + w) (rms-one-plus, Gemma 3) over the last axis,
    in the working precision, stored in the precision (one rounding: the contract's "q, k after
    QK-norm")."""
    import torch

    working = working_dtype(channels.dtype)
    values = channels.to(working)
    factor = weight.to(working)
    if geometry["qk_norm"] == "rms-one-plus":
        factor = factor + 1.0
    inverse_rms = torch.rsqrt(values.pow(2).mean(-1, keepdim=True) + float(geometry["qk_norm_eps"]))
    return (values * inverse_rms * factor).to(channels.dtype)


def rope_tables(case, positions, dtype):
    """(cos, sin), each [batch, 1, tokens, rotary_dim / 2] in the precision, for one forward call's
    positions (int64 [batch, tokens]): angles position x inv_freq in float64 with SCHEMA's frequencies
    (longrope's factors chosen from this call's largest position), times the attention factor in
    float64, then rounded to the precision once (rope_angles "float64")."""
    import torch

    angles = torch.from_numpy(case.rope_angles(positions))  # float64 [batch, tokens, rotary_dim / 2]
    factor = attncheck.case.rope_attention_factor(case.geometry)
    cos = (torch.cos(angles) * factor).to(dtype).unsqueeze(1)
    sin = (torch.sin(angles) * factor).to(dtype).unsqueeze(1)
    return cos, sin


def rotate(heads, cos, sin, geometry):
    """RoPE on channels [0, rotary_dim) of every head of heads [batch, heads, tokens, head_dim]: pairs
    (i, i + rotary_dim/2) half-split, (2i, 2i+1) interleaved; a' = a·c − b·s, b' = b·c + a·s in the
    working precision, stored once in the precision. Channels >= rotary_dim pass unchanged."""
    import torch

    rotary_dim = geometry["rotary_dim"]
    if rotary_dim == 0:
        return heads
    pairs = rotary_dim // 2
    working = working_dtype(heads.dtype)
    rotary = heads[..., :rotary_dim].to(working)
    passthrough = heads[..., rotary_dim:]
    cos, sin = cos.to(working), sin.to(working)
    if geometry["rope_style"] == "half-split":
        first, second = rotary[..., :pairs], rotary[..., pairs:]
        rotated = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
    else:  # interleaved: channels 2i, 2i + 1
        first, second = rotary[..., 0::2], rotary[..., 1::2]
        rotated = torch.stack([first * cos - second * sin, second * cos + first * sin], dim=-1).flatten(-2)
    return torch.cat([rotated.to(heads.dtype), passthrough], dim=-1)


def project(case, parameters, x, positions):
    """q [batch, num_heads, tokens, head_dim], k and v [batch, num_kv_heads, tokens, head_dim] for the
    tokens x [batch, tokens, hidden] at positions int64 [batch, tokens] (one forward call)."""
    import torch.nn.functional as F

    geometry = case.geometry
    batch, tokens = x.shape[:2]
    head_dim = case.head_dim
    qkv = F.linear(x, parameters.qkv_weight, parameters.qkv_bias)  # [batch, tokens, q | k | v]
    q, k, v = qkv.split([parameters.query_width, parameters.kv_width, parameters.kv_width], dim=-1)
    if geometry["qk_norm"] == "rms-full-width":  # OLMo-2: one norm over the whole projection width
        q = rms_normalise(q, parameters.q_norm, geometry)
        k = rms_normalise(k, parameters.k_norm, geometry)
    q = q.reshape(batch, tokens, case.num_heads, head_dim).transpose(1, 2)
    k = k.reshape(batch, tokens, case.num_kv_heads, head_dim).transpose(1, 2)
    v = v.reshape(batch, tokens, case.num_kv_heads, head_dim).transpose(1, 2)
    if geometry["qk_norm"] in ("rms", "rms-one-plus"):  # per head, over head_dim
        q = rms_normalise(q, parameters.q_norm, geometry)
        k = rms_normalise(k, parameters.k_norm, geometry)
    cos, sin = rope_tables(case, positions, x.dtype)
    return rotate(q, cos, sin, geometry), rotate(k, cos, sin, geometry), v


def output_projection(context, parameters):
    """context [batch, num_heads, tokens, head_dim] -> out [batch, tokens, hidden]."""
    import torch.nn.functional as F

    batch, _, tokens, _ = context.shape
    flat = context.transpose(1, 2).reshape(batch, tokens, parameters.query_width)
    return F.linear(flat, parameters.o_proj, parameters.o_bias)


def visible_keys(case, first_query, seq_q):
    """bool [batch, seq_q, first_query + seq_q]: SCHEMA's masks for queries at key indices
    first_query … first_query + seq_q − 1 over every key so far (bottom-right aligned)."""
    import torch

    return torch.from_numpy(case.visible_keys(queries=seq_q, keys=first_query + seq_q))


def attend_call(case, kernel, parameters, x, positions, cache):
    """One forward call of the layer on tokens x [batch, tokens, hidden]: project, append to the cache
    (a dict holding "key"/"value" [batch, num_kv_heads, keys so far, head_dim], or None for the full
    forward), attend over every key so far, project out."""
    import torch

    q, k, v = project(case, parameters, x, positions)
    first_query = 0
    if cache is not None:
        if "key" in cache:
            first_query = cache["key"].shape[2]
            k = torch.cat([cache["key"], k], dim=2)
            v = torch.cat([cache["value"], v], dim=2)
        cache["key"], cache["value"] = k, v
    call = KernelCall(query=q, key=k, value=v, visible=visible_keys(case, first_query, q.shape[2]),
                      first_query=first_query, key_lengths=torch.from_numpy(case.key_lengths),
                      sinks=parameters.sinks, geometry=case.geometry)
    context = kernel.attend(call)
    expected_shape = tuple(q.shape)
    if tuple(context.shape) != expected_shape or context.dtype != q.dtype:
        raise RuntimeError(f"the kernel returned {list(context.shape)} {context.dtype}; expected "
                           f"{list(expected_shape)} {q.dtype}")
    return output_projection(context, parameters)


def run_layer(case, kernel, dtype):
    """{candidate tensor name: float64 array}: out, grads/x and grads/<weight> (when the kernel has a
    backward), decode/out (when the case decodes)."""
    import torch

    parameters = LayerParameters(case, dtype, requires_grad=kernel.has_backward)
    x = torch.from_numpy(case.x).to(dtype).requires_grad_(kernel.has_backward)
    result = {}
    with torch.set_grad_enabled(kernel.has_backward):
        out = attend_call(case, kernel, parameters, x, case.position_ids, cache=None)
        result["out"] = values_of(out)
        if kernel.has_backward:
            out.backward(torch.from_numpy(case.dout).to(dtype))
            result["grads/x"] = values_of(x.grad)
            result.update({f"grads/{name}": values for name, values in parameters.gradients().items()})
    if case.decode_schedule:
        result["decode/out"] = decode(case, kernel, parameters, dtype)
    return result


def decode(case, kernel, parameters, dtype):
    """float64 [batch, prefill + Σ steps, hidden]: the decode schedule's calls through a KV cache."""
    import torch

    cache, outputs, start = {}, [], 0
    with torch.no_grad():
        for count in case.decode_schedule:
            end = start + count
            x = torch.from_numpy(case.x[:, start:end]).to(dtype)
            outputs.append(attend_call(case, kernel, parameters, x, case.position_ids[:, start:end], cache))
            start = end
    return values_of(torch.cat(outputs, dim=1))


# ---------------------------------------------------------------------------------------------
# Candidates, workers, the command line

def adapt(case_path, candidate_path, kernel, precision, log, layer_precision=None):
    """Reads a case (or golden), runs the layer around the kernel and writes the candidate; raises
    Unsupported naming everything the kernel cannot express. layer_precision: the layer's own precision
    when it differs from the candidate's (attncheck.adapters.operator_layer runs it in fp64 around an
    operator at the candidate's precision)."""
    case = attncheck.read_case(case_path)
    reasons = kernel.unsupported_reasons(case)
    if reasons:
        raise Unsupported("; ".join(reasons))  # no path: fuzz tallies workers' reasons by their text
    tensors = run_layer(case, kernel, torch_dtype(layer_precision or precision))
    declined = kernel.declined_parts(case)
    for part in declined:  # a declined part is never also stored (SCHEMA "Declined parts")
        tensors = {name: values for name, values in tensors.items()
                   if not (name == part or name.startswith(part + "/"))}
    # One unsharded process: tp_size 1, excused from per-rank gradients (SCHEMA "Candidate files").
    attncheck.write_candidate(candidate_path, tensors, generator=kernel.description(), precision=precision,
                              rope_angles=None if precision == "fp64" else "float64", declined=declined or None)
    if log:
        print(f"{case_path}: {kernel.description()} -> {candidate_path}", file=log)


def argument_parser(prog, description):
    """The adapters' shared command line: GOLDEN... with -o / --output-dir, or --worker; --dtype."""
    parser = command_line.golden_parser(prog, description)
    parser.add_argument("--dtype", default="fp32", choices=sorted(PRECISIONS),
                        help="precision of the layer and the kernel (fp64: a self-check of the wrapper)")
    return parser


def main(parser, arguments, kernel, module, layer_precision=None, supports=None):
    """Runs the parsed command line with a built kernel; returns the exit status (0, or 2 for bad input
    and cases the kernel cannot express). layer_precision: as adapt's; supports: the worker's statement of
    capabilities (attncheck.Capabilities), or None for a worker that states nothing."""
    precision = arguments.dtype
    command_line.check_targets(parser, arguments)
    if arguments.worker:
        return attncheck.serve(lambda case, candidate: adapt(case, candidate, kernel, precision, log=None,
                                                                     layer_precision=layer_precision),
                               kernel.description(), supports=supports)
    status = 0
    for golden in arguments.goldens:
        candidate = command_line.candidate_path(arguments, golden)
        try:
            adapt(golden, candidate, kernel, precision, log=sys.stdout, layer_precision=layer_precision)
        except BadInput as error:  # Unsupported included: that golden is refused, the others still run
            print(f"{module}: {golden}: {error}", file=sys.stderr)
            status = 2
    return status

