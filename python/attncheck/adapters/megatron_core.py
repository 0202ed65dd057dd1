"""Runs Megatron-Core's own SelfAttention (the local module spec: ColumnParallelLinear linear_qkv,
torch RMSNorm QK-norm, DotProductAttention, RowParallelLinear linear_proj) on attncheck golden or
case files, on the CPU in float64, one process per tensor-parallel rank under torch.distributed
(gloo), and writes candidate files (golden/SCHEMA.md, "Candidate files") for `attncheck compare`.

    python -m attncheck.adapters.megatron_core GOLDEN.h5 ... --output-dir DIR [--ranks P]  # DIR/<name>.candidate.h5
    python -m attncheck.adapters.megatron_core --worker [--ranks P] [--plant-bug NAME] [--megatron-rope-table]
                                               [--megatron-window-mask]

P defaults to the largest tp_size of the goldens (--worker: 4). Both modes start P processes once
(attncheck.distributed's RankPool: one gloo world, a process group per TP size; file mode starts it
at the first golden Megatron can express) and run every case through run_case_sharded on ranks
0 … tp_size−1 of it; a TP 1 case runs on rank 0 alone and is written as unsharded. The worker is
attncheck.serve_sharded.

What runs is Megatron-Core's code: SelfAttention built from get_gpt_layer_local_spec's submodules
(its grouped fused QKV weight, the all-gather of it when TP exceeds the KV-head count and the
reduce-scatter of its gradient, its QK-norm, its apply_rotary_pos_emb, DotProductAttention's GQA
repeat, scaled scores, masked softmax and context, RowParallelLinear's all-reduce), its
StaticInferenceContext KV cache for the decode schedule, its
finalize_model_grads._allreduce_non_tensor_model_parallel_grads for the QK-norm gradients, and
torch autograd for every gradient (with Megatron's own autograd functions for the TP collectives).
What attncheck supplies: the inputs in Megatron's [seq, batch, hidden] layout, the weights
(Hugging Face q/k/v rows regrouped into Megatron's fused layout, rank by rank: attncheck's
`megatron-equal-block` convention is exactly what each rank's linear_qkv holds), the attention
mask (causal, key padding) as the boolean mask Megatron's softmax takes, and the RoPE angles.

RoPE: Megatron's RotaryEmbedding builds inv_freq and position x inv_freq in float32 whatever the
model's dtype, and then takes cos/sin of the float32 angle; at the goldens' positions (up to
4.4e5) that moves angles by ~0.02 rad. By default this adapter therefore hands Megatron's
apply_rotary_pos_emb the SCHEMA-exact float64 angles (golden/SCHEMA.md "RoPE rounding") in
Megatron's own layout ([seq, batch, 1, rotary_dim]: cat(freqs, freqs) for half-split, each
frequency repeated twice for interleaved). --megatron-rope-table uses rows of Megatron's own
float32 RotaryEmbedding table instead and still declares fp64: attncheck then fails it on goldens
with large positions (a named finding, not a bug of the adapter).

What Megatron-Core cannot express is refused (exit 2 naming why; a worker answers "unsupported"):
a context-parallel layout (TransformerEngine only, CUDA; attncheck.adapters.megatron_context_parallel
checks Megatron's CPU-side split of the sequence instead), a logit softcap, Gemma's rms-one-plus QK-norm (the torch-norm backend refuses zero-centred
gamma), OLMo-2's whole-width QK-norm (qk_layernorm is per head), an o_proj bias without q/k/v biases (add_bias_linear adds both), queries that see no key
(attncheck's context-0 convention; Megatron's -10000 fill gives the mean of V), and a sliding
window together with key padding: Megatron's local softmax replaces the caller's mask by its window
mask, so the padding would silently be ignored (--megatron-window-mask runs it anyway, so that
attncheck shows the failure).

Without a GPU, a few things Megatron-Core puts on the GPU unconditionally are placed on the CPU by
the small, documented monkeypatches in `place_on_cpu()` (one place; each names the Megatron
function and why). Nothing of Megatron's arithmetic is replaced.

Exit codes: 0 candidates written, 2 bad input or a golden Megatron-Core cannot express.
"""
import argparse
import functools
import os
import sys

import numpy as np

import attncheck
from attncheck import BadInput, RankResult, Unsupported

MODULE = "attncheck.adapters.megatron_core"  # run as `python -m {MODULE}` (PROG)
PROG = f"python -m {MODULE}"

CONVENTION = "megatron-equal-block"
# Imported once by the fork server the ranks start from (megatron_imports.py: Megatron-Core's modules).
PRELOAD = ["attncheck.adapters.megatron_imports"]
FAMILIES = "qkv"

# ---------------------------------------------------------------------------------------------
# Hugging Face q/k/v rows <-> Megatron's grouped fused QKV rows


def fused_layout(geometry):
    """(family, row): for each row of Megatron's fused linear_qkv weight, which of q_proj (0),
    k_proj (1), v_proj (2) it is and which row of that tensor. Megatron's order is grouped: per KV
    group g, the rows of its H_q/H_kv query heads, then KV head g's key rows, then its value rows
    (SelfAttention.get_query_key_value_tensors views the output as [.., ng, (np/ng + 2) * hn])."""
    heads, kv_heads = geometry["num_attention_heads"], geometry["num_key_value_heads"]
    head_dim = attncheck.resolved_head_dim(geometry)
    per_group = heads // kv_heads * head_dim
    family, row = [], []
    for group in range(kv_heads):
        family += [0] * per_group + [1] * head_dim + [2] * head_dim
        row += list(range(group * per_group, (group + 1) * per_group))
        row += list(range(group * head_dim, (group + 1) * head_dim)) * 2
    return np.array(family), np.array(row)


def hf_to_fused(q, k, v, geometry):
    """The fused linear_qkv weight (or bias) of the whole layer from HF q/k/v (rows on axis 0)."""
    family, row = fused_layout(geometry)
    fused = np.empty((len(family),) + q.shape[1:], dtype=q.dtype)
    for index, part in enumerate((q, k, v)):
        fused[family == index] = part[row[family == index]]
    return fused


def fused_to_hf(fused, geometry):
    """(q, k, v) from a whole-layer fused linear_qkv weight or bias."""
    family, row = fused_layout(geometry)
    parts = []
    for index in range(3):
        part = np.empty((int((family == index).sum()),) + fused.shape[1:], dtype=fused.dtype)
        part[row[family == index]] = fused[family == index]
        parts.append(part)
    return tuple(parts)


def block_rows(geometry, tp_size, rank):
    """(family, row) of rank's block of the fused rows (ColumnParallelLinear's partition r of P),
    and {family letter: (start, stop)} of the q/k/v rows it holds (contiguous, possibly empty)."""
    family, row = fused_layout(geometry)
    if len(family) % tp_size:
        raise BadInput(f"the fused QKV weight's {len(family)} rows do not split into {tp_size} equal blocks")
    block = len(family) // tp_size
    family, row = family[rank * block:(rank + 1) * block], row[rank * block:(rank + 1) * block]
    held = {}
    for index, letter in enumerate(FAMILIES):
        rows = row[family == index]
        if len(rows) and not np.array_equal(rows, np.arange(rows[0], rows[0] + len(rows))):
            raise BadInput(f"rank {rank}'s {letter} rows of the fused QKV block are not contiguous")
        held[letter] = (int(rows[0]), int(rows[0]) + len(rows)) if len(rows) else (0, 0)
    return family, row, held


def hf_to_fused_block(q, k, v, geometry, tp_size, rank):
    """Rank's block of the fused linear_qkv weight (or bias) from the q/k/v rows it holds (the
    pieces attncheck.sharding gives it under megatron-equal-block): within a block the rows are in
    fused order, which interleaves the pieces per KV group when the block spans several groups."""
    family, row, held = block_rows(geometry, tp_size, rank)
    pieces = (q, k, v)
    for index, letter in enumerate(FAMILIES):
        start, stop = held[letter]
        if pieces[index].shape[0] != stop - start:
            raise BadInput(f"rank {rank} was given {pieces[index].shape[0]} {letter} rows; its block holds {stop - start}")
    fused = np.empty((len(family),) + q.shape[1:], dtype=q.dtype)
    for index, letter in enumerate(FAMILIES):
        selected = family == index
        fused[selected] = pieces[index][row[selected] - held[letter][0]]
    return fused


def fused_block_to_hf(block, geometry, tp_size, rank):
    """(q, k, v) pieces (the rows rank holds, in order) from its block of the fused weight or bias."""
    family, row, held = block_rows(geometry, tp_size, rank)
    parts = []
    for index, letter in enumerate(FAMILIES):
        start, stop = held[letter]
        part = np.empty((stop - start,) + block.shape[1:], dtype=block.dtype)
        part[row[family == index] - start] = block[family == index]
        parts.append(part)
    return tuple(parts)


# ---------------------------------------------------------------------------------------------
# What Megatron-Core can express


def problems(case, options):
    """Everything about `case` Megatron-Core's SelfAttention cannot express, as one message ('' if none)."""
    geometry = case.geometry
    found = []
    if case.context_parallel and case.context_parallel["cp_size"] > 1:
        layout = case.context_parallel
        found.append(f"a context-parallel layout ({layout['scheme']}, cp_size {layout['cp_size']}: Megatron-Core runs "
                     "context parallelism only in TransformerEngine's TEDotProductAttention, which needs CUDA; its "
                     "DotProductAttention asserts context_parallel_size == 1. Its CPU part, the split of a batch "
                     "over CP ranks, is checked by attncheck.adapters.megatron_context_parallel)")
    if geometry.get("rope_scaling", "none") != "none":
        found.append(f"RoPE scaling '{geometry['rope_scaling']}' (this adapter passes Megatron plain RoPE angles)")
    if "attention_multiplier" in geometry:
        found.append("attention_multiplier (this adapter sets Megatron's softmax scale from head_dim)")
    if geometry.get("attention_sinks", 0):
        found.append("attention sinks (this adapter builds Megatron's SelfAttention without them)")
    if "softcap" in geometry:
        found.append("softcap (Megatron-Core's DotProductAttention has no attention logit softcap)")
    if geometry["qk_norm"] == "rms-one-plus":
        found.append("qk_norm 'rms-one-plus' (Gemma's x/rms(x) * (1 + w) is Megatron's layernorm_zero_centered_gamma, "
                     "which the local spec's torch norm refuses: WrappedTorchNorm asserts it is off)")
    if geometry["qk_norm"] == "rms-full-width":
        found.append("qk_norm 'rms-full-width' (OLMo-2's norm over the whole q / k projection: Megatron-Core's "
                     "qk_layernorm normalises each head over head_dim, with no all-reduce of the sums over TP ranks)")
    if geometry["out_bias"] and not geometry["qkv_bias"]:
        found.append("out_bias without qkv_bias (Megatron's add_bias_linear gives linear_qkv a bias too; "
                     "add_qkv_bias alone gives q/k/v biases without the o_proj one)")
    if case.queries_seeing_no_key():
        found.append("a query that sees no key (attncheck's convention is context 0; Megatron's softmax fills "
                     "masked scores with -10000 and would give that query the mean of V)")
    if "sliding_window" in geometry and case.has_padding and not options.get("megatron_window_mask"):
        found.append("a sliding window with key padding (Megatron's local softmax, FusedScaleMaskSoftmax."
                     "forward_torch_softmax, replaces the caller's mask by get_sliding_window_causal_mask, so the "
                     "padding would be ignored; --megatron-window-mask runs it anyway)")
    rotary_dim, head_dim = geometry["rotary_dim"], case.head_dim
    if options.get("megatron_rope_table") and rotary_dim and int(head_dim * (rotary_dim / head_dim)) != rotary_dim:
        found.append(f"rotary_dim {rotary_dim} of head_dim {head_dim} (RotaryEmbedding's int(kv_channels x "
                     "rotary_percent) does not come back to it)")
    if rotary_dim % 2:
        found.append(f"odd rotary_dim {rotary_dim}")
    return "; ".join(found)


def check(case, options):
    found = problems(case, options)
    if found:
        raise Unsupported(f"Megatron-Core's SelfAttention cannot express this case: {found}")


# ---------------------------------------------------------------------------------------------
# Each rank process


def place_on_cpu():
    """The monkeypatches a CPU-only run needs, all in one place. Each makes Megatron-Core put on the
    CPU something it otherwise allocates on the GPU unconditionally; none changes any arithmetic."""
    import torch
    from torch.overrides import TorchFunctionMode

    from megatron.core import parallel_state
    from megatron.core.fusions import fused_softmax
    from megatron.core.tensor_parallel import random as megatron_random
    from megatron.core.transformer import utils as transformer_utils

    # 1. torch.cuda.current_device() is the device of buffers Megatron allocates with
    #    device=torch.cuda.current_device(): utils.GlobalMemoryBuffer.get_tensor (the scores scratch
    #    buffer DotProductAttention.forward passes to baddbmm), tensor_parallel/mappings.py
    #    _gather_along_last_dim / _reduce_scatter_along_first_dim (the all-gather of the fused QKV
    #    output when TP exceeds the KV-head count, and its backward), Attention._allocate_memory (the
    #    static decode KV cache). Without a GPU it raises; "cpu" puts them on the CPU.
    torch.cuda.current_device = lambda: "cpu"

    # 2. transformer/utils.py get_default_causal_mask and get_sliding_window_causal_mask build their
    #    masks with device="cuda" literally; fused_softmax.py imported them by name. Megatron's own
    #    functions run, with that device argument redirected to the CPU.
    class CudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    def on_cpu(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with CudaToCpu():
                return function(*args, **kwargs)
        return wrapper

    for name in ("get_default_causal_mask", "get_sliding_window_causal_mask"):
        wrapped = on_cpu(getattr(transformer_utils, name))
        setattr(transformer_utils, name, wrapped)
        setattr(fused_softmax, name, wrapped)

    # 3. DotProductAttention.forward forks the CUDA RNG tracker around its (p = 0) dropout; the
    #    tracker's CUDA state calls fail without a GPU. Megatron's own inference tracker is a no-op fork.
    megatron_random.initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)

    # 4. parallel_state's global memory buffer (the scores scratch buffer above) is normally made by
    #    initialize_model_parallel; this adapter passes process groups explicitly (pg_collection)
    #    instead of initialising Megatron's global parallel state, so it makes just the buffer.
    if parallel_state._GLOBAL_MEMORY_BUFFER is None:
        parallel_state._set_global_memory_buffer()


def setup(rank, device, options):
    """Once per rank process: the CPU placement, torch's thread count, and this rank's one-process
    group (Megatron's context- and pipeline-parallel groups, both of size 1 here)."""
    import torch
    import torch.distributed as dist

    if device != "cpu":
        raise BadInput("this adapter runs Megatron-Core on the CPU (gloo)")
    torch.set_num_threads(max(1, int(os.environ.get("ATTNCHECK_RANK_THREADS", 1))))
    import warnings

    warnings.filterwarnings("ignore")
    import megatron.core  # noqa: F401  (imported once per process, before any case)

    place_on_cpu()
    world = dist.get_world_size()
    own = None
    for member in range(world):  # every process takes part in making every group
        group = dist.new_group([member])
        if member == rank:
            own = group
    return {"options": options, "own_group": own}


def megatron_config(case, tp_size):
    import torch

    from megatron.core.transformer.transformer_config import TransformerConfig

    geometry = case.geometry
    window = None
    if "sliding_window" in geometry:
        # SCHEMA: query i sees keys j > i - window; Megatron's window_size (left, right) keeps
        # i - left <= j <= i + right (get_sliding_window_causal_mask).
        window = (geometry["sliding_window"] - 1, 0 if geometry["causal"] else case.seq)
    return TransformerConfig(
        num_layers=1, hidden_size=case.hidden_size, num_attention_heads=case.num_heads,
        num_query_groups=case.num_kv_heads, kv_channels=case.head_dim,
        tensor_model_parallel_size=tp_size, params_dtype=torch.float64, use_cpu_initialization=True,
        perform_initialization=False, add_bias_linear=bool(geometry["out_bias"]),
        add_qkv_bias=bool(geometry["qkv_bias"]), qk_layernorm=geometry["qk_norm"] == "rms",
        normalization="RMSNorm", layernorm_epsilon=float(geometry["qk_norm_eps"]),
        softmax_scale=float(geometry["scale"]), rotary_interleaved=geometry["rope_style"] == "interleaved",
        window_size=window, attention_dropout=0.0, hidden_dropout=0.0, masked_softmax_fusion=False,
        apply_rope_fusion=False, bias_dropout_fusion=False, gradient_accumulation_fusion=False)


def build_attention(case, context):
    """Megatron-Core's SelfAttention for the case on this rank, float64, weights loaded."""
    import torch

    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.enums import AttnMaskType

    geometry = case.geometry
    config = megatron_config(case, context.tp_size)
    spec = get_gpt_layer_local_spec(qk_layernorm=geometry["qk_norm"] == "rms",
                                    normalization="RMSNorm").submodules.self_attention
    own = context.state["own_group"]
    groups = ProcessGroupCollection(tp=context.group, cp=own, pp=own)
    attn_mask_type = AttnMaskType.causal if geometry["causal"] else AttnMaskType.padding
    attention = spec.module(config=config, submodules=spec.submodules, layer_number=1,
                            attn_mask_type=attn_mask_type, pg_collection=groups)
    # The local spec's QK-norm is torch.nn.RMSNorm made without a dtype: float32 even in a float64
    # model. Cast to float64 (its weight is then the golden's q_norm / k_norm).
    for norm in (attention.q_layernorm, attention.k_layernorm):
        if norm is not None:
            norm.to(torch.float64)
    if attention.core_attention.softmax_scale != geometry["scale"]:
        raise BadInput(f"Megatron scales scores by {attention.core_attention.softmax_scale!r}, the case by {geometry['scale']!r}")

    weights = case.weights
    sources = {"linear_qkv.weight": hf_to_fused_block(weights["q_proj"], weights["k_proj"], weights["v_proj"],
                                                     geometry, context.tp_size, context.rank),
               "linear_proj.weight": weights["o_proj"]}
    if geometry["qkv_bias"]:
        sources["linear_qkv.bias"] = hf_to_fused_block(weights["q_bias"], weights["k_bias"], weights["v_bias"],
                                                       geometry, context.tp_size, context.rank)
    if geometry["out_bias"]:
        sources["linear_proj.bias"] = weights["o_bias"]
    if geometry["qk_norm"] == "rms":
        sources["q_layernorm.weight"], sources["k_layernorm.weight"] = weights["q_norm"], weights["k_norm"]
    parameters = dict(attention.named_parameters())
    if set(parameters) != set(sources):
        raise BadInput(f"Megatron's SelfAttention has parameters {sorted(parameters)}; the case gives {sorted(sources)}")
    with torch.no_grad():
        for name, values in sources.items():
            parameter = parameters[name]
            if tuple(parameter.shape) != values.shape or parameter.dtype != torch.float64:
                raise BadInput(f"{name}: Megatron has {list(parameter.shape)} {parameter.dtype}, "
                               f"this rank's shard {list(values.shape)} float64")
            parameter.copy_(torch.from_numpy(np.ascontiguousarray(values)))
    return config, attention


def rotary_freqs(case, context, positions):
    """Megatron's rotary_pos_emb for tokens with `positions` [batch, tokens]: [tokens, batch, 1, rotary_dim]
    (the batch axis broadcasts in _apply_rotary_pos_emb_bshd, so each row has its own positions)."""
    import torch

    rotary_dim = case.geometry["rotary_dim"]
    if rotary_dim == 0:
        return None
    interleaved = case.geometry["rope_style"] == "interleaved"
    if context.state["options"].get("megatron_rope_table"):
        from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

        rotary = RotaryEmbedding(kv_channels=case.head_dim, rotary_percent=rotary_dim / case.head_dim,
                                 rotary_interleaved=interleaved, rotary_base=float(case.geometry["rope_theta"]),
                                 use_cpu_initialization=True, cp_group=context.state["own_group"])
        # RotaryEmbedding(1, offset=p) is row p of Megatron's table (arange in float32 plus p, times
        # its float32 inv_freq, laid out by get_emb): exact for p < 2^24, without building 4e5 rows.
        rows = {int(p): rotary(1, offset=int(p))[0, 0, 0] for p in np.unique(positions)}
        emb = torch.stack([torch.stack([rows[int(p)] for p in batch_row]) for batch_row in positions])
    else:
        angles = torch.from_numpy(case.rope_angles(positions))  # float64 [batch, tokens, rotary_dim / 2]
        if interleaved:  # as RotaryEmbedding.get_emb: each frequency twice, pairs (2i, 2i + 1)
            emb = torch.stack((angles, angles), dim=-1).reshape(*angles.shape[:-1], rotary_dim)
        else:  # cat(freqs, freqs): pairs (i, i + rotary_dim / 2)
            emb = torch.cat((angles, angles), dim=-1)
    return emb.transpose(0, 1)[:, :, None, :].contiguous()


def attention_mask(case, queries, keys):
    """Megatron's boolean mask [batch, 1, queries, keys] (True = masked) for the case's masks, or None
    where Megatron's own default (a causal square without padding) is the same."""
    import torch

    geometry = case.geometry
    if queries == keys and geometry["causal"] and not case.has_padding and "sliding_window" not in geometry:
        return None  # FusedScaleMaskSoftmax builds get_default_causal_mask itself
    visible = case.visible_keys(queries, keys)
    return torch.from_numpy(~visible)[:, None, :, :]


def run_rank(case, context):
    import torch

    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed.finalize_model_grads import _allreduce_non_tensor_model_parallel_grads

    options = context.state["options"]
    config, attention = build_attention(case, context)
    geometry = case.geometry
    x = torch.from_numpy(np.ascontiguousarray(case.x.transpose(1, 0, 2))).requires_grad_(True)  # [s, b, h]
    dout = torch.from_numpy(np.ascontiguousarray(case.dout.transpose(1, 0, 2)))
    freqs = rotary_freqs(case, context, case.position_ids)

    attention.train()
    output, bias = attention(x, attention_mask(case, case.seq, case.seq), rotary_pos_emb=freqs)
    out = output + bias if bias is not None else output  # linear_proj skips its bias add (bias_dropout_add adds it)
    out.backward(dout)

    # Megatron's own all-reduce of the QK-norm gradients over the TP group (finalize_model_grads):
    # replicated parameters whose per-rank gradients are partial sums.
    attention.ddp_config = DistributedDataParallelConfig()
    if options.get("plant_bug") != "skip-qk-norm-grad-allreduce":
        _allreduce_non_tensor_model_parallel_grads([attention], config, context.group)

    grads = {name: parameter.grad.detach().numpy() for name, parameter in attention.named_parameters()}
    gradients = {"o_proj": grads["linear_proj.weight"]}
    gradients["q_proj"], gradients["k_proj"], gradients["v_proj"] = fused_block_to_hf(
        grads["linear_qkv.weight"], geometry, context.tp_size, context.rank)
    if geometry["qkv_bias"]:
        gradients["q_bias"], gradients["k_bias"], gradients["v_bias"] = fused_block_to_hf(
            grads["linear_qkv.bias"], geometry, context.tp_size, context.rank)
    if geometry["out_bias"]:
        gradients["o_bias"] = grads["linear_proj.bias"]
    if geometry["qk_norm"] == "rms":
        gradients["q_norm"], gradients["k_norm"] = grads["q_layernorm.weight"], grads["k_layernorm.weight"]
    gradients = {name: np.ascontiguousarray(values) for name, values in gradients.items()}

    decode_out = None
    if case.decode_schedule:
        decode_out = decode(case, context, attention)
    return RankResult(out=out.detach().transpose(0, 1), grad_x=x.grad.transpose(0, 1), gradients=gradients,
                      decode_out=decode_out)


def decode(case, context, attention):
    """Prefill, then each step's tokens, through Megatron's StaticInferenceContext KV cache."""
    import torch

    from megatron.core.inference.contexts import StaticInferenceContext

    schedule = case.decode_schedule
    total = sum(schedule)
    inference = StaticInferenceContext(max_batch_size=case.batch, max_sequence_length=total)
    freqs = rotary_freqs(case, context, case.position_ids[:, :total])
    attention.eval()
    outputs, start = [], 0
    with torch.no_grad():
        for step, count in enumerate(schedule):
            end = start + count
            inference.sequence_len_offset = start
            if step == 1:
                inference.enable_decode_mode()
            chunk = torch.from_numpy(np.ascontiguousarray(case.x[:, start:end].transpose(1, 0, 2)))
            # q_pos_emb and k_pos_emb are sliced by Megatron ([start:end] and [:end]).
            output, bias = attention(chunk, attention_mask(case, count, end), inference_context=inference,
                                     rotary_pos_emb=None if freqs is None else freqs[:end])
            outputs.append((output + bias if bias is not None else output).transpose(0, 1))
            start = end
    return torch.cat(outputs, dim=1)


# ---------------------------------------------------------------------------------------------
# Modes


def description(options):
    import importlib.metadata

    version = importlib.metadata.version("megatron-core")
    extras = [name.replace("_", "-") for name in ("megatron_rope_table", "megatron_window_mask") if options.get(name)]
    if options.get("plant_bug"):
        extras.append(f"planted bug: {options['plant_bug']}")
    return (f"megatron-core {version} SelfAttention (local spec, float64, CPU gloo) via {MODULE}"
            + (f" ({', '.join(extras)})" if extras else ""))


class LazyPool:
    """attncheck.distributed.RankPool, started when the first case that Megatron can express needs it
    (so that refusing a golden costs no process start-up)."""

    def __init__(self, ranks, options):
        self.ranks, self.options, self.pool = ranks, options, None

    def start(self):
        from attncheck.distributed import RankPool

        if self.pool is None:
            self.pool = RankPool(self.ranks, "gloo", run_rank, functools.partial(setup, options=self.options),
                                 preload=PRELOAD)
        return self

    def run(self, case, tp_size, convention):
        return self.start().pool.run(case, tp_size, convention)

    def stop(self):
        if self.pool is not None:
            self.pool.stop()


def run_case(pool, case_path, candidate_path, options):
    from attncheck.distributed import run_case_sharded

    # check() reads no weight, so it runs first, on the case read without them: refusing a wide golden then
    # rebuilds none of its weights (OLMo-2-7B's: 5 s). run_case_sharded then refuses from the geometry (a fused
    # QKV weight Megatron's ColumnParallelLinear cannot cut into tp_size equal partitions) and runs the case.
    check(attncheck.read_case(case_path, weights=False), options)
    run_case_sharded(pool, case_path, candidate_path, description(options), CONVENTION,
                     lambda case: check(case, options))


def golden_tp_size(path):
    import h5py

    try:
        with h5py.File(path, "r") as h5:
            return int(h5["geometry"].attrs["tp_size"])
    except (OSError, KeyError):
        return 1  # read_case reports what is wrong with it


PLANTED_BUGS = ["skip-qk-norm-grad-allreduce"]


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("goldens", nargs="*", metavar="GOLDEN")
    parser.add_argument("--worker", action="store_true",
                        help="serve attncheck's worker protocol on stdin/stdout (attncheck fuzz --impl exec:...)")
    parser.add_argument("--output-dir", help="folder for <golden name>.candidate.h5")
    parser.add_argument("--ranks", type=int, help="processes (default: the goldens' largest tp_size; worker: 4)")
    parser.add_argument("--plant-bug", choices=PLANTED_BUGS,
                        help="skip-qk-norm-grad-allreduce: leave each rank's QK-norm gradient partial")
    parser.add_argument("--megatron-rope-table", action="store_true",
                        help="RoPE from Megatron's own float32 RotaryEmbedding table (still declared fp64)")
    parser.add_argument("--megatron-window-mask", action="store_true",
                        help="run a sliding window with key padding anyway (Megatron drops the padding)")
    arguments = parser.parse_args()
    options = {"plant_bug": arguments.plant_bug, "megatron_rope_table": arguments.megatron_rope_table,
               "megatron_window_mask": arguments.megatron_window_mask}
    if arguments.ranks is not None and arguments.ranks < 1:
        parser.error("--ranks must be at least 1")
    if arguments.worker:
        if arguments.goldens or arguments.output_dir:
            parser.error("--worker reads its cases from stdin; give no GOLDEN or --output-dir")
        return attncheck.serve_sharded(run_rank, description(options), arguments.ranks or 4, convention=CONVENTION,
                                       check=lambda case: check(case, options),
                                       setup=functools.partial(setup, options=options), preload=PRELOAD)
    if not arguments.goldens or not arguments.output_dir:
        parser.error("give GOLDEN... with --output-dir DIR (or --worker)")
    ranks = arguments.ranks or max(golden_tp_size(path) for path in arguments.goldens)
    os.makedirs(arguments.output_dir, exist_ok=True)
    pool = LazyPool(ranks, options)
    try:
        for golden in arguments.goldens:
            name = os.path.basename(golden).removesuffix(".h5")
            candidate = os.path.join(arguments.output_dir, f"{name}.candidate.h5")
            run_case(pool, golden, candidate, options)
            print(f"{golden} -> {candidate}")
    except Unsupported as error:
        print(f"{MODULE}: {golden}: {error}", file=sys.stderr)
        return 2
    except BadInput as error:  # names the file itself
        print(f"{MODULE}: {error}", file=sys.stderr)
        return 2
    finally:
        pool.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
