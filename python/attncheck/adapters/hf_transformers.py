"""Runs Hugging Face transformers' own attention module on attncheck golden files, in float64, and
writes candidate files (golden/SCHEMA.md, "Candidate files") for `attncheck compare`.

    python -m attncheck.adapters.hf_transformers GOLDEN.h5 -o CANDIDATE.h5
                                                 [--arch auto|qwen3|gemma3|olmo2|gemma2|llama|gpt-neox|...]
    python -m attncheck.adapters.hf_transformers GOLDEN.h5 ... --output-dir DIR  # DIR/<golden name>.candidate.h5
    python -m attncheck.adapters.hf_transformers --worker [--plant-bug NAME]     # attncheck fuzz --impl exec:'...'

Built on the rest of attncheck's Python package (reading the case, SCHEMA-exact RoPE frequencies,
masks, writing the candidate, the worker protocol); besides it only torch and transformers (with
huggingface_hub, which it depends on) are used.

What runs is transformers' code for the architecture: its Attention module (projections, QK-norm,
RoPE application, GQA repeat, softcap, softmax, o_proj), its rotary embedding, its mask builders
(create_causal_mask / create_sliding_window_causal_mask from a 2D padding mask), its DynamicCache
for the decode schedule, and torch autograd for every gradient. What attncheck supplies is the
inputs, the weights (copied into the module's parameters) and one precision policy:
transformers upcasts to float32 in RMSNorm, softmax and RoPE on purpose (for bf16/fp16 runs); in a
float64 run those casts would throw away half the digits, so Float64Everywhere turns every float32
request into float64 while the module runs, and refuses any float32 tensor that still appears.

Architecture for a geometry (--arch auto), the first that applies: latent attention (schema version 3) ->
DeepseekV3Attention (q_a_proj / q_a_layernorm / q_b_proj or q_proj, kv_a_proj_with_mqa, kv_a_layernorm,
kv_b_proj, its compressed-latent cache; rope_interleave from the golden's rope_style); attention sinks -> GptOssAttention
(its eager path: the sink as one more softmax column); QK-norm `rms` -> Qwen3Attention;
`rms-one-plus` -> Gemma3Attention; `rms-full-width` -> Olmo2Attention (RMSNorm over the whole q and k
projections); softcap -> Gemma2Attention (sliding or full layer as the golden's
window says); attention_multiplier -> GraniteAttention; rotary_dim 0 -> SmolLM3Attention as a NoPE
layer; interleaved RoPE -> GPTJAttention; longrope -> Phi3Attention (fused qkv_proj, per-call choice of
short or long factors); partial RoPE -> GPTNeoXAttention when head_dim is omitted and heads are not
grouped (it derives head_dim = hidden / heads itself; its rotary embedding scales linear, llama3 and yarn
frequencies over the rotated channels), else Phi3Attention;
otherwise LlamaAttention (any RoPE scaling but longrope: linear, llama3, yarn). Each module's RoPE
scaling is transformers' own (rope_parameters from the golden's attributes), its frequencies and
attention factor checked against the golden's and then replaced by them (use_schema_frequencies). A geometry the chosen module cannot express (interleaved RoPE, separate q/k/v and o
bias flags, a query that sees no key, ...) is refused with the reason and exit code 2.

Exit codes: 0 candidates written, 2 bad input or a geometry transformers cannot express (each such golden
refused on stderr as "MODULE: GOLDEN: reason", no candidate for it; the other goldens still run). As a worker
(attncheck's protocol, exec_worker/worker.hpp) a geometry it cannot express is answered "unsupported".
"""
import contextlib
import math
import sys

import numpy as np

import attncheck
from attncheck import BadInput, Unsupported
from attncheck.adapters import command_line

MODULE = "attncheck.adapters.hf_transformers"  # run as `python -m {MODULE}` (PROG)
PROG = f"python -m {MODULE}"

# ---------------------------------------------------------------------------------------------
# float64 throughout

def float64_everywhere():
    import torch
    from torch.overrides import TorchFunctionMode

    class Float64Everywhere(TorchFunctionMode):
        """Every float32 request (dtype=torch.float32, .float(), .to(torch.float32)) becomes float64
        while transformers' module runs; a float32 tensor that appears anyway is an error."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {key: torch.float64 if value is torch.float32 else value for key, value in (kwargs or {}).items()}
            args = tuple(torch.float64 if value is torch.float32 else value for value in args)
            if func is torch.Tensor.float:
                func = torch.Tensor.double
            result = func(*args, **kwargs)
            for value in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
                    raise RuntimeError(f"{getattr(func, '__name__', func)} produced a float32 tensor in a float64 run")
            return result

    @contextlib.contextmanager
    def scope():
        # The default dtype too: parameters and buffers created without a dtype are float64 from birth.
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with Float64Everywhere():
                yield
        finally:
            torch.set_default_dtype(previous)

    return scope()


# ---------------------------------------------------------------------------------------------
# transformers' module for a geometry

ARCHITECTURES = ["qwen3", "gemma3", "olmo2", "gemma2", "llama", "gpt-neox", "phi3", "granite", "smollm3", "gptj", "gpt-oss",
                 "deepseek-v3"]


def choose_architecture(geometry):
    """The transformers module whose features are the geometry's: the first rule that applies wins."""
    rotary_dim, head_dim = geometry["rotary_dim"], attncheck.resolved_head_dim(geometry)
    scaling = geometry.get("rope_scaling", "none")
    if attncheck.case.is_latent(geometry):
        return "deepseek-v3"
    if geometry.get("attention_sinks", 0):
        return "gpt-oss"
    if geometry["qk_norm"] == "rms":
        return "qwen3"
    if geometry["qk_norm"] == "rms-one-plus":
        return "gemma3"
    if geometry["qk_norm"] == "rms-full-width":
        return "olmo2"
    if "softcap" in geometry:
        return "gemma2"
    if "attention_multiplier" in geometry:
        return "granite"
    if rotary_dim == 0:
        return "smollm3"  # a NoPE layer
    if geometry["rope_style"] == "interleaved":
        return "gptj"
    if scaling == "longrope":
        return "phi3"
    if rotary_dim < head_dim:
        # GPT-NeoX for its own family (head_dim derived, multi-head; its rotary embedding builds linear,
        # llama3 and yarn frequencies over the rotated channels, partial_rotary_factor); Phi-3's module
        # otherwise (it rotates the first cos.shape[-1] channels whatever the head).
        if "head_dim" not in geometry and geometry["num_key_value_heads"] == geometry["num_attention_heads"]:
            return "gpt-neox"
        return "phi3"
    return "llama"


def check_expressible(architecture, case, attn_implementation):
    """Everything the architecture's module cannot express, as one message (empty when it can)."""
    geometry = case.geometry
    problems = []
    scaling = geometry.get("rope_scaling", "none")
    latent = attncheck.case.is_latent(geometry)
    if latent != (architecture == "deepseek-v3"):
        problems.append("latent attention (only DeepseekV3Attention has it)" if latent else
                        "no latent attention (DeepseekV3Attention is multi-head latent attention)")
    if latent:
        # DeepseekV3Attention has none of these; the rest of its geometry is fixed by schema version 3.
        for feature, present in (("attention sinks", geometry.get("attention_sinks", 0)), ("softcap", "softcap" in geometry),
                                 ("sliding_window", "sliding_window" in geometry),
                                 ("longrope", scaling == "longrope"), ("causal = 0", not geometry["causal"])):
            if present:
                problems.append(f"{feature} (DeepseekV3Attention has none)")
        if geometry["qk_rope_head_dim"] == 0:
            # Found by `attncheck fuzz --profile latent` on the worker: DeepseekV3RotaryEmbedding over head_dim 0
            # builds a one-entry table that is no RoPE.
            problems.append("qk_rope_head_dim 0 (DeepseekV3's rotary embedding needs a RoPE part)")
        if case.queries_seeing_no_key():
            problems.append("a query that sees no key (attncheck outputs 0 there, transformers has no such convention)")
        return "; ".join(problems)
    if geometry.get("attention_sinks", 0) and architecture != "gpt-oss":
        problems.append(f"attention sinks (only GptOssAttention has them, not {architecture})")
    if architecture == "gpt-oss" and not geometry.get("attention_sinks", 0):
        problems.append("no attention sinks (GptOssAttention always has them)")
    if scaling != "none" and architecture == "gptj":
        problems.append(f"RoPE scaling '{scaling}' (the {architecture} module has a fixed sinusoid table)")
    if scaling == "longrope" and architecture != "phi3":
        problems.append("longrope (only Phi-3's rotary embedding switches its factors per call)")
    if "attention_multiplier" in geometry and architecture != "granite":
        problems.append(f"attention_multiplier (only Granite's module scales by it, not {architecture})")
    if architecture == "granite" and "attention_multiplier" not in geometry:
        problems.append("no attention_multiplier (Granite's module scales scores by it)")
    if geometry["rotary_dim"] == 0 and architecture != "smollm3":
        problems.append(f"rotary_dim 0, a NoPE layer (only SmolLM3's module has layers without RoPE, not {architecture})")
    if architecture == "gpt-oss" and attn_implementation == "sdpa":
        # transformers' sdpa_attention_forward takes GptOssAttention's s_aux into **kwargs and ignores it.
        problems.append("attention sinks with --attn-implementation sdpa (transformers' sdpa path drops them)")
    if "softcap" in geometry and attn_implementation == "sdpa":
        problems.append("softcap with --attn-implementation sdpa (transformers' sdpa path has no softcap)")
    head_dim = attncheck.resolved_head_dim(geometry)
    qk_norm_of = {"qwen3": "rms", "gemma3": "rms-one-plus", "olmo2": "rms-full-width"}
    if geometry["qk_norm"] != qk_norm_of.get(architecture, "none"):
        problems.append(f"qk_norm '{geometry['qk_norm']}' (the {architecture} module has "
                        f"'{qk_norm_of.get(architecture, 'none')}')")
    if architecture == "gptj":
        if geometry["rope_style"] != "interleaved":
            problems.append(f"rope_style '{geometry['rope_style']}' (GPT-J's rotate_every_two is interleaved)")
        if geometry["qkv_bias"] or geometry["out_bias"]:
            problems.append("biases (GPT-J's projections have none)")
        if geometry["num_key_value_heads"] != geometry["num_attention_heads"]:
            problems.append("grouped KV heads (GPT-J's module is multi-head only)")
        if head_dim * geometry["num_attention_heads"] != geometry["hidden_size"]:
            problems.append(f"head_dim {head_dim} x {geometry['num_attention_heads']} heads != hidden_size "
                            f"{geometry['hidden_size']} (GPT-J derives head_dim = hidden / heads)")
        if float(geometry["rope_theta"]) != 10000.0:
            # Found by `attncheck fuzz --impl exec:'... --worker'`: create_sinusoidal_positions has 10000 built in.
            problems.append(f"rope_theta {geometry['rope_theta']} (GPT-J's sinusoid table has base 10000 built in)")
    elif geometry["rope_style"] != "half-split":
        problems.append(f"rope_style '{geometry['rope_style']}' (transformers' rotate_half is half-split)")
    if architecture == "phi3":
        if scaling not in ("none", "longrope"):
            # Found by `attncheck fuzz --impl exec:'... --worker'`: Phi3Config renames rope_type yarn (and su)
            # to longrope, so its rotary embedding cannot be built with yarn, llama3 or linear scaling.
            problems.append(f"RoPE scaling '{scaling}' with partial RoPE (the module that rotates part of the "
                            "head is Phi-3's, whose config reads yarn as longrope)")
        if geometry["qkv_bias"] or geometry["out_bias"]:
            problems.append("biases (Phi-3's qkv_proj and o_proj have none)")
        if head_dim * geometry["num_attention_heads"] != geometry["hidden_size"]:
            problems.append(f"head_dim {head_dim} x {geometry['num_attention_heads']} heads != hidden_size "
                            f"{geometry['hidden_size']} (Phi-3 derives head_dim = hidden / heads)")
    if geometry["qkv_bias"] != geometry["out_bias"]:
        problems.append("qkv_bias != out_bias (transformers has one attention_bias flag for all four)")
    if not geometry["causal"]:
        problems.append("causal = 0 (these decoder modules are causal)")
    if "softcap" in geometry and architecture != "gemma2":
        problems.append(f"softcap (only Gemma 2's module has attn_logit_softcapping here, not {architecture})")
    if architecture == "gemma3" and scaling == "yarn" and not geometry["rope_scaling_truncate"]:
        # Found by `attncheck fuzz --impl exec:'... --worker'`: _compute_yarn_parameters reads truncate from
        # config.rope_parameters, which for Gemma 3 is the per-layer-type dict, so truncate false is lost and
        # the ramp's edges are floored and ceiled anyway (transformers 5.24.0, modeling_rope_utils.py).
        problems.append("yarn with truncate false in Gemma 3's per-layer-type rope_parameters (transformers reads "
                        "truncate from the outer dict and truncates anyway: a transformers bug attncheck found)")
    if "softcap" in geometry and architecture == "gpt-oss":
        problems.append("softcap (GptOssAttention has none)")
    if "sliding_window" in geometry and architecture in ("llama", "gpt-neox", "granite", "gptj", "smollm3", "olmo2"):
        problems.append(f"sliding_window (the {architecture} module has none)")
    if architecture == "gpt-neox":
        if "head_dim" in geometry:
            problems.append("an explicit head_dim (GPT-NeoX derives hidden_size / num_attention_heads: the "
                            "limitation attncheck exists to catch)")
        if geometry["num_key_value_heads"] != geometry["num_attention_heads"]:
            problems.append("grouped KV heads (GPT-NeoX's module is multi-head only)")
    elif geometry["rotary_dim"] not in (head_dim, 0) and architecture not in ("phi3", "gptj"):
        problems.append(f"rotary_dim {geometry['rotary_dim']} < head_dim {head_dim} (the {architecture} module "
                        "rotates the whole head)")
    if architecture not in ("gemma3", "gemma2") and "query_pre_attn_scalar" in geometry:
        problems.append(f"query_pre_attn_scalar (the {architecture} module scales by head_dim^-0.5)")
    if geometry.get("sliding_window") == 1 and case.decode_schedule:
        # Found by `attncheck fuzz --impl exec:'... --worker'`: DynamicSlidingWindowLayer keeps
        # keys[:, :, -sliding_window + 1:], which for a window of 1 is [0:], every token, while the mask
        # is built for none: decoding attends to stale keys (transformers 5.24.0, cache_utils.py).
        problems.append("sliding_window 1 with a decode schedule (transformers' sliding-window cache keeps "
                        "every token when the window is 1: a transformers bug attncheck found)")
    if case.queries_seeing_no_key():
        problems.append("a query that sees no key (padding under a sliding window or a key length of 0: "
                        "attncheck outputs 0 there, transformers has no such convention)")
    return "; ".join(problems)


def query_pre_attn_scalar(geometry):
    """Gemma's scale source; transformers' config types it as an integer."""
    value = geometry.get("query_pre_attn_scalar", attncheck.resolved_head_dim(geometry))
    if not float(value).is_integer():
        raise Unsupported(f"query_pre_attn_scalar {value}: transformers' Gemma configs take an integer")
    return int(value)


def build_module(architecture, geometry, positions, attn_implementation):
    """(config, attention module, rotary embedding, layer type) in float64."""
    from huggingface_hub.errors import StrictDataclassError  # transformers' config validation errors

    try:
        # Without initialising the weights (transformers' no_init_weights, as from_pretrained builds a model):
        # load_weights overwrites every parameter, and drawing random weights for a model-sized layer took
        # seconds (GPT-NeoX-20B and Qwen3-32B: 2.4 s of torch's uniform_).
        from transformers.initialization import no_init_weights

        with no_init_weights():
            return _build_module(architecture, geometry, positions, attn_implementation)
    except BadInput:
        raise
    except (ValueError, TypeError, StrictDataclassError) as error:
        # transformers' own config validation, e.g. LlamaConfig refusing a hidden_size that num_heads does
        # not divide even when head_dim is given: a limit of transformers, not a failure.
        raise Unsupported(f"transformers' {architecture} config refuses this geometry: "
                            f"{type(error).__name__}: {error}") from error


def rope_parameters(geometry):
    """transformers' rope_parameters for the geometry's RoPE (golden/SCHEMA.md "RoPE frequencies of scaled
    layers": each attribute is the config key of the same name)."""
    rope = {"rope_type": "default", "rope_theta": float(geometry["rope_theta"])}
    scaling = geometry.get("rope_scaling", "none")
    if scaling == "none":
        return rope
    rope["rope_type"] = scaling
    prefix = "rope_scaling_"
    for name, value in geometry.items():
        if name.startswith(prefix):
            rope[name.removeprefix(prefix)] = bool(value) if name == "rope_scaling_truncate" else value
    if scaling == "longrope":
        rope["short_factor"] = [float(value) for value in geometry["rope_short_factor"]]
        rope["long_factor"] = [float(value) for value in geometry["rope_long_factor"]]
    return rope


def _build_module(architecture, geometry, positions, attn_implementation):
    import torch
    import transformers

    head_dim = attncheck.resolved_head_dim(geometry)
    layer_type = "sliding_attention" if "sliding_window" in geometry else "full_attention"
    rope = rope_parameters(geometry)
    if architecture == "deepseek-v3":
        return _build_latent_module(geometry, positions, attn_implementation, rope, layer_type)
    if 0 < geometry["rotary_dim"] < head_dim:
        rope["partial_rotary_factor"] = geometry["rotary_dim"] / head_dim
    common = dict(hidden_size=geometry["hidden_size"], num_attention_heads=geometry["num_attention_heads"],
                  num_hidden_layers=1, max_position_embeddings=int(positions.max()) + 1,
                  attention_dropout=0.0, attn_implementation=attn_implementation)
    grouped = dict(num_key_value_heads=geometry["num_key_value_heads"], rms_norm_eps=geometry["qk_norm_eps"])
    models = transformers.models
    if architecture == "gpt-neox":
        config = transformers.GPTNeoXConfig(**common, attention_bias=bool(geometry["qkv_bias"]), rope_parameters=rope)
        modeling = models.gpt_neox.modeling_gpt_neox
        attention, rotary = modeling.GPTNeoXAttention(config, 0), modeling.GPTNeoXRotaryEmbedding(config)
    elif architecture == "gptj":
        # GPT-J's rotary table is one row per position up to n_positions; 2 rows are enough to check its
        # frequencies (use_schema_table replaces it by the rows the case needs).
        config = transformers.GPTJConfig(n_embd=geometry["hidden_size"], n_head=geometry["num_attention_heads"],
                                         n_layer=1, n_positions=2, rotary_dim=geometry["rotary_dim"],
                                         attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_implementation=attn_implementation)
        modeling = models.gptj.modeling_gptj
        attention, rotary = modeling.GPTJAttention(config, 0), modeling.GPTJRotaryEmbedding(config)
    elif architecture == "phi3":
        # Phi-3's longrope: original_max_position_embeddings decides short or long factors per call; the
        # factor is the golden's (transformers would otherwise derive it from max_position_embeddings).
        common["max_position_embeddings"] = max(common["max_position_embeddings"],
                                                int(geometry.get("rope_scaling_original_max_position_embeddings", 0)))
        original = geometry.get("rope_scaling_original_max_position_embeddings")
        config = transformers.Phi3Config(**common, **grouped, rope_parameters=rope,
                                         sliding_window=geometry.get("sliding_window"),
                                         **({"original_max_position_embeddings": int(original)} if original else {}))
        modeling = models.phi3.modeling_phi3
        attention, rotary = modeling.Phi3Attention(config, 0), modeling.Phi3RotaryEmbedding(config)
    else:
        common.update(grouped, head_dim=head_dim, attention_bias=bool(geometry["qkv_bias"]))
        if architecture == "qwen3":
            config = transformers.Qwen3Config(**common, rope_parameters=rope, layer_types=[layer_type],
                                              use_sliding_window="sliding_window" in geometry,
                                              sliding_window=geometry.get("sliding_window"))
            modeling = models.qwen3.modeling_qwen3
            attention, rotary = modeling.Qwen3Attention(config, 0), modeling.Qwen3RotaryEmbedding(config)
        elif architecture == "gemma3":
            config = transformers.Gemma3TextConfig(
                **common, layer_types=[layer_type], sliding_window=geometry.get("sliding_window"),
                query_pre_attn_scalar=query_pre_attn_scalar(geometry),
                rope_parameters={"sliding_attention": dict(rope), "full_attention": dict(rope)})
            modeling = models.gemma3.modeling_gemma3
            attention, rotary = modeling.Gemma3Attention(config, 0), modeling.Gemma3RotaryEmbedding(config)
        elif architecture == "gemma2":
            config = transformers.Gemma2Config(
                **common, layer_types=[layer_type], sliding_window=geometry.get("sliding_window"),
                query_pre_attn_scalar=query_pre_attn_scalar(geometry),
                attn_logit_softcapping=geometry.get("softcap"), final_logit_softcapping=None, rope_parameters=rope)
            modeling = models.gemma2.modeling_gemma2
            attention, rotary = modeling.Gemma2Attention(config, 0), modeling.Gemma2RotaryEmbedding(config)
        elif architecture == "gpt-oss":
            config = transformers.GptOssConfig(**common, rope_parameters=rope, layer_types=[layer_type],
                                               sliding_window=geometry.get("sliding_window"), num_local_experts=1,
                                               num_experts_per_tok=1)
            modeling = models.gpt_oss.modeling_gpt_oss
            attention, rotary = modeling.GptOssAttention(config, 0), modeling.GptOssRotaryEmbedding(config)
        elif architecture == "olmo2":
            # Olmo2Attention: q_norm / k_norm are RMSNorms over num_heads * head_dim / num_kv_heads * head_dim.
            config = transformers.Olmo2Config(**common, rope_parameters=rope)
            modeling = models.olmo2.modeling_olmo2
            attention, rotary = modeling.Olmo2Attention(config, 0), modeling.Olmo2RotaryEmbedding(config)
        elif architecture == "granite":
            config = transformers.GraniteConfig(**common, rope_parameters=rope,
                                                attention_multiplier=float(geometry["attention_multiplier"]))
            modeling = models.granite.modeling_granite
            attention, rotary = modeling.GraniteAttention(config, 0), modeling.GraniteRotaryEmbedding(config)
        elif architecture == "smollm3":
            # One layer, and it is a NoPE layer (no_rope_layers[i] == 0); the rotary embedding still exists
            # (its cos/sin are passed and ignored), at the geometry's head_dim.
            config = transformers.SmolLM3Config(**common, rope_parameters=rope,
                                                no_rope_layers=[0 if geometry["rotary_dim"] == 0 else 1])
            modeling = models.smollm3.modeling_smollm3
            attention, rotary = modeling.SmolLM3Attention(config, 0), modeling.SmolLM3RotaryEmbedding(config)
        else:
            config = transformers.LlamaConfig(**common, rope_parameters=rope)
            modeling = models.llama.modeling_llama
            attention, rotary = modeling.LlamaAttention(config, 0), modeling.LlamaRotaryEmbedding(config)
    attention.to(torch.float64).eval()
    rotary.to(torch.float64)
    if architecture == "gptj":
        rotary = SchemaTableRotary(rotary, geometry)
    elif architecture == "smollm3":
        if attention.use_rope != (geometry["rotary_dim"] != 0):
            raise BadInput(f"smollm3: the module's use_rope is {attention.use_rope}, the golden's rotary_dim "
                           f"{geometry['rotary_dim']}")
        if geometry["rotary_dim"]:
            use_schema_frequencies(rotary, geometry)
    else:
        use_schema_frequencies(rotary, geometry)

    # The module must have read the geometry as attncheck means it; a disagreement here would make
    # every comparison fail for a reason that is not a bug.
    module_head_dim = getattr(attention, "head_dim", getattr(attention, "head_size", None))
    if module_head_dim != head_dim:
        raise BadInput(f"{architecture}: the module built head_dim {module_head_dim}, the golden means {head_dim}")
    if not math.isclose(attention.scaling, geometry["scale"], rel_tol=4e-16):
        raise BadInput(f"{architecture}: the module scales scores by {attention.scaling!r}, "
                       f"the golden by {geometry['scale']!r}")
    if architecture == "gpt-neox" and attention.rotary_ndims != geometry["rotary_dim"]:
        raise Unsupported(f"gpt-neox: the module rotates {attention.rotary_ndims} channels (int(head_dim x "
                            f"rotary_pct)), the golden {geometry['rotary_dim']}")
    return config, attention, rotary, layer_type


def _build_latent_module(geometry, positions, attn_implementation, rope, layer_type):
    """DeepseekV3Attention for a schema-version-3 golden, checked to have read its widths and scale as the golden
    means them (transformers' config sets its own head_dim to qk_rope_head_dim: RoPE's width, not a head's)."""
    import torch
    import transformers

    modeling = transformers.models.deepseek_v3.modeling_deepseek_v3
    config = transformers.DeepseekV3Config(
        hidden_size=geometry["hidden_size"], num_attention_heads=geometry["num_attention_heads"],
        num_key_value_heads=geometry["num_attention_heads"], num_hidden_layers=1,
        q_lora_rank=geometry["q_lora_rank"] or None, kv_lora_rank=geometry["kv_lora_rank"],
        qk_nope_head_dim=geometry["qk_nope_head_dim"], qk_rope_head_dim=geometry["qk_rope_head_dim"],
        v_head_dim=geometry["v_head_dim"], rope_interleave=geometry["rope_style"] == "interleaved",
        rope_parameters=rope, attention_bias=False, attention_dropout=0.0,
        max_position_embeddings=int(positions.max()) + 1, attn_implementation=attn_implementation)
    attention, rotary = modeling.DeepseekV3Attention(config, 0), modeling.DeepseekV3RotaryEmbedding(config)
    attention.to(torch.float64).eval()
    rotary.to(torch.float64)
    use_schema_frequencies(rotary, geometry)
    if attention.qk_head_dim != geometry["head_dim"] or attention.v_head_dim != geometry["v_head_dim"]:
        raise BadInput(f"deepseek-v3: the module built q/k heads {attention.qk_head_dim} and v heads "
                       f"{attention.v_head_dim} wide, the golden means {geometry['head_dim']} and {geometry['v_head_dim']}")
    for norm in (attention.q_a_layernorm, attention.kv_a_layernorm):
        if norm is not None and norm.variance_epsilon != geometry["latent_norm_eps"]:
            raise Unsupported(f"deepseek-v3: transformers builds the latent norms with eps {norm.variance_epsilon}, the "
                              f"golden's latent_norm_eps is {geometry['latent_norm_eps']}")
    if not math.isclose(attention.scaling, geometry["scale"], rel_tol=4e-16):
        raise BadInput(f"deepseek-v3: the module scales scores by {attention.scaling!r}, the golden by {geometry['scale']!r}")
    return config, attention, rotary, layer_type


def within_ulps(theirs, ours, ulps):
    """theirs and ours (float64 tensors of one shape) agree to `ulps` units in the last place of ours."""
    import torch

    if theirs.shape != ours.shape:
        return False
    spacing = torch.from_numpy(np.spacing(np.abs(ours.numpy())))
    return bool(((theirs - ours).abs() <= ulps * spacing).all())


def use_schema_frequencies(rotary, geometry):
    """transformers' RoPE inverse frequencies and attention factor, checked against SCHEMA.md's and then
    replaced by them.

    transformers forms inv_freq_i as 1 / theta^(2i/d), SCHEMA.md as theta^(-2i/d): the same number to
    within an ulp or two, but the angle is position * inv_freq, and at the goldens' positions (up to
    ~1e6) a 1-ulp difference moves an angle by ~1e-11 relative, which heavy-tailed activations carry
    into gradients as ~1e5 ulps, beyond fp64 tolerance for a reason that is not a bug (measured on
    small_softcap_padding.h5: 1.4e5 ulps with transformers' rounding, 3.8 with SCHEMA's). So the check
    is that the frequencies are the same function (4 ulps, scaled ones too; llama3: 4 x factor, below), and the golden's rounding
    is used. longrope has two sets: the short factors (transformers' original_inv_freq, used by a call
    whose positions stay within original_max_position_embeddings) and the long ones (its long_inv_freq,
    computed on first use); both are checked and replaced, and transformers' own per-call choice between
    them (dynamic_rope_update) is what runs."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rotary_dim, theta = geometry["rotary_dim"], float(geometry["rope_theta"])
    scaling = geometry.get("rope_scaling", "none")
    # llama3's smooth band, s = original / wavelength - low_freq_factor, turns the bases' 1-ulp difference
    # into up to (factor - 1) ulps of the blended frequency (near the band's low edge, where the blend is
    # base / factor plus s·base·(1 - 1/factor)); found by fuzzing the worker: 7 ulps at factor 8.
    ulps = 4 * (float(geometry["rope_scaling_factor"]) if scaling == "llama3" else 1.0)
    short = torch.from_numpy(attncheck.case.rope_inverse_frequencies(geometry, 0))
    replacements = {"inv_freq": short, "original_inv_freq": short}
    if scaling == "longrope":
        original = int(geometry["rope_scaling_original_max_position_embeddings"])
        long = torch.from_numpy(attncheck.case.rope_inverse_frequencies(geometry, original))
        with float64_everywhere():
            theirs, _ = ROPE_INIT_FUNCTIONS["longrope"](rotary.config, "cpu", seq_len=original + 1)
        if not within_ulps(theirs, long, 4):
            raise BadInput(f"transformers' longrope long-factor frequencies are not the golden's (rotary_dim "
                           f"{rotary_dim}, theta {theta})")
        rotary.long_inv_freq = long.clone()
    replaced = 0
    for name, buffer in rotary.named_buffers():
        layer = name.split(".")[-1]
        key = next((key for key in replacements if layer.endswith(key)), None)
        if key is None:
            continue
        schema = replacements["original_inv_freq" if layer.endswith("original_inv_freq") else "inv_freq"]
        if not within_ulps(buffer, schema, ulps):
            raise BadInput(f"transformers' RoPE frequencies ({name}, {list(buffer.shape)}) are not the golden's "
                           f"({scaling} RoPE, rotary_dim {rotary_dim}, theta {theta}): the module reads the "
                           "geometry differently")
        with torch.no_grad():
            buffer.copy_(schema)
        replaced += 1
    factor = attncheck.case.rope_attention_factor(geometry)
    scalings = [name for name in vars(rotary) if name.endswith("attention_scaling")]
    for name in scalings:
        theirs = getattr(rotary, name)
        values = theirs.values() if isinstance(theirs, dict) else [theirs]
        if any(not math.isclose(float(value), factor, rel_tol=4 * 2.0**-52, abs_tol=0.0) for value in values):
            raise BadInput(f"transformers' attention factor ({name} {theirs!r}) is not the golden's {factor!r}")
        setattr(rotary, name, {key: factor for key in theirs} if isinstance(theirs, dict) else factor)
    if replaced == 0 or not scalings:
        raise BadInput("transformers' rotary embedding has no inv_freq buffer or attention_scaling")


class SchemaTableRotary:
    """GPT-J's rotary embedding with its table replaced: GPTJRotaryEmbedding indexes a [positions,
    rotary_dim] table of sin | cos (create_sinusoidal_positions) by position id. Its frequencies are
    checked against the golden's through the table's row 1 (sin and cos of inv_freq itself, 4 ulps);
    then the table holds one row per distinct position of the case, from the golden's frequencies, and
    position ids are mapped to their rows (a table up to position ~1e6 would take half a gigabyte). What
    runs on q and k is still transformers' apply_rotary_pos_emb (interleaved pairs)."""

    def __init__(self, rotary, geometry):
        import torch

        self.rotary, self.geometry = rotary, geometry
        inv_freq = torch.from_numpy(attncheck.case.rope_inverse_frequencies(geometry, 0))
        row = rotary.embed_positions[1]
        half = row.shape[0] // 2
        if row.dtype != torch.float64 or not (within_ulps(row[:half], torch.sin(inv_freq), 4)
                                              and within_ulps(row[half:], torch.cos(inv_freq), 4)):
            raise BadInput(f"transformers' GPT-J rotary table is not sin/cos of the golden's frequencies "
                           f"(rotary_dim {geometry['rotary_dim']}, theta {geometry['rope_theta']})")
        self.inv_freq = inv_freq

    def __call__(self, x, positions):
        import torch

        distinct, rows = torch.unique(positions, return_inverse=True)
        angles = distinct.to(torch.float64)[:, None] * self.inv_freq[None, :]
        self.rotary.embed_positions = torch.cat((torch.sin(angles), torch.cos(angles)), dim=1)
        return self.rotary(x, rows)


def load_weights(architecture, attention, weights):
    """Copies the golden's HF-layout weights into the module's parameters; returns a function mapping
    the module's parameter gradients back to the golden's names."""
    import torch

    if architecture == "gpt-neox":
        # GPT-NeoX fuses q, k, v per head: rows [h·3d, h·3d + d) are head h's queries, then its keys, then
        # its values (the view(..., heads, 3·head_dim) in GPTNeoXAttention.forward).
        heads = attention.config.num_attention_heads
        head_dim = attention.head_size

        def fuse(q, k, v):
            rest = q.shape[1:]
            return Fused((3 * heads * head_dim, *rest),
                         [(lambda target, index=index: target.view(heads, 3, head_dim, *rest)[:, index],
                           part.reshape(heads, head_dim, *rest)) for index, part in enumerate((q, k, v))])

        def split(fused):
            per_head = fused.reshape(heads, 3, head_dim, *fused.shape[1:])
            return [per_head[:, index].reshape(heads * head_dim, *fused.shape[1:]) for index in range(3)]

        sources = {"query_key_value.weight": fuse(weights["q_proj"], weights["k_proj"], weights["v_proj"]),
                   "dense.weight": weights["o_proj"]}
        if "q_bias" in weights:
            sources["query_key_value.bias"] = fuse(weights["q_bias"], weights["k_bias"], weights["v_bias"])
            sources["dense.bias"] = weights["o_bias"]

        def gradients(parameters):
            grads = {}
            grads["q_proj"], grads["k_proj"], grads["v_proj"] = split(parameters["query_key_value.weight"])
            grads["o_proj"] = parameters["dense.weight"]
            if "query_key_value.bias" in parameters:
                grads["q_bias"], grads["k_bias"], grads["v_bias"] = split(parameters["query_key_value.bias"])
                grads["o_bias"] = parameters["dense.bias"]
            return grads
    elif architecture == "phi3":
        # Phi-3 fuses the projections as one block each: qkv_proj rows [0, q) queries, [q, q + kv) keys,
        # [q + kv, q + 2 kv) values (Phi3Attention.forward slices qkv at query_pos), heads in order within each.
        query_width, kv_width = weights["q_proj"].shape[0], weights["k_proj"].shape[0]
        bounds = (0, query_width, query_width + kv_width, query_width + 2 * kv_width)
        sources = {"qkv_proj.weight": Fused((bounds[3], weights["q_proj"].shape[1]),
                                            [(lambda target, first=first, end=end: target[first:end], weights[name])
                                             for first, end, name in zip(bounds, bounds[1:],
                                                                         ("q_proj", "k_proj", "v_proj"))]),
                   "o_proj.weight": weights["o_proj"]}

        def gradients(parameters):
            fused = parameters["qkv_proj.weight"]
            return {"q_proj": fused[:query_width], "k_proj": fused[query_width:query_width + kv_width],
                    "v_proj": fused[query_width + kv_width:], "o_proj": parameters["o_proj.weight"]}
    else:
        output = "out_proj.weight" if architecture == "gptj" else "o_proj.weight"  # GPT-J's name for o_proj
        names = {"q_proj": "q_proj.weight", "k_proj": "k_proj.weight", "v_proj": "v_proj.weight",
                 "o_proj": output, "q_bias": "q_proj.bias", "k_bias": "k_proj.bias",
                 "v_bias": "v_proj.bias", "o_bias": "o_proj.bias", "q_norm": "q_norm.weight", "k_norm": "k_norm.weight",
                 "sinks": "sinks", "q_a_proj": "q_a_proj.weight", "q_a_layernorm": "q_a_layernorm.weight",
                 "q_b_proj": "q_b_proj.weight", "kv_a_proj_with_mqa": "kv_a_proj_with_mqa.weight",
                 "kv_a_layernorm": "kv_a_layernorm.weight", "kv_b_proj": "kv_b_proj.weight"}
        sources = {names[name]: values for name, values in weights.items()}

        def gradients(parameters):
            return {name: parameters[names[name]] for name in weights}

    parameters = dict(attention.named_parameters())
    if set(parameters) != set(sources):
        raise BadInput(f"the module's parameters {sorted(parameters)} do not match the golden's weights {sorted(sources)}")
    with torch.no_grad():
        for name, values in sources.items():
            if tuple(parameters[name].shape) != values.shape:
                raise BadInput(f"{name}: the module has shape {list(parameters[name].shape)}, the golden {list(values.shape)}")
            if isinstance(values, Fused):
                for select, part in values.parts:
                    select(parameters[name]).copy_(torch.from_numpy(np.ascontiguousarray(part)))
            else:
                parameters[name].copy_(torch.from_numpy(np.ascontiguousarray(values)))
    return gradients


class Fused:
    """A fused parameter (GPT-NeoX's query_key_value, Phi-3's qkv_proj) as the golden's parts, each copied into
    its place in the module's tensor: no fused copy in numpy first (on GPT-NeoX-20B a gigabyte of fresh memory).
    parts: [(select(tensor) -> the view of the module's tensor it fills, numpy array of that view's shape)]."""

    def __init__(self, shape, parts):
        self.shape, self.parts = tuple(shape), parts


# ---------------------------------------------------------------------------------------------
# Running it

def attend(architecture, config, attention, rotary, layer_type, x, positions, padding_mask, cache):
    """One call of the module on x [batch, tokens, hidden]: transformers' mask builder sees the 2D
    padding mask over every key so far; position ids go to RoPE only (attncheck masks by sequence
    index, and transformers would read non-consecutive position ids as packed sequences)."""
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    build_mask = create_sliding_window_causal_mask if layer_type == "sliding_attention" else create_causal_mask
    mask = build_mask(config=config, inputs_embeds=x, attention_mask=padding_mask, cache=cache, position_ids=None)
    if architecture == "gemma3":
        cos_sin = rotary(x, positions, layer_type)
    else:
        cos_sin = rotary(x, positions)
    if architecture == "gpt-neox":
        out, _ = attention(x, attention_mask=mask, layer_past=cache, position_embeddings=cos_sin)
    else:
        out, _ = attention(x, position_embeddings=cos_sin, attention_mask=mask, cache=cache)
    return out


def run(architecture, case, attn_implementation, plant_bug=None):
    """{candidate tensor name: float64 array}: out, grads/x, grads/<weight>, and decode/out."""
    import torch
    from transformers import DynamicCache

    geometry = case.geometry
    torch.manual_seed(0)  # nothing random is used; fixed so that a future dropout default could not differ
    positions = torch.from_numpy(case.position_ids)
    with float64_everywhere():  # also at construction: the rotary embedding computes inv_freq there
        config, attention, rotary, layer_type = build_module(architecture, geometry, case.position_ids,
                                                            attn_implementation)
    gradients_by_name = load_weights(architecture, attention, case.weights)
    if plant_bug:
        PLANTED_BUGS[plant_bug](attention, rotary, geometry)
    padding_mask = torch.from_numpy((np.arange(case.seq)[None, :] < case.key_lengths[:, None]).astype(np.int64))

    with float64_everywhere():
        x = torch.from_numpy(case.x).requires_grad_(True)
        out = attend(architecture, config, attention, rotary, layer_type, x, positions, padding_mask, None)
        out.backward(torch.from_numpy(case.dout))
    result = {"out": out.detach().numpy(), "grads/x": x.grad.numpy()}
    parameters = {name: parameter.grad.numpy() for name, parameter in attention.named_parameters()}
    for name, gradient in gradients_by_name(parameters).items():
        result[f"grads/{name}"] = np.ascontiguousarray(gradient)

    if case.decode_schedule:
        # Prefill, then each step's tokens, through transformers' DynamicCache (a sliding layer's cache
        # keeps only the window).
        schedule = case.decode_schedule
        cache = DynamicCache(config=config)
        outputs, start = [], 0
        with torch.no_grad(), float64_everywhere():
            for count in schedule:
                end = start + count
                chunk = torch.from_numpy(case.x[:, start:end])
                outputs.append(attend(architecture, config, attention, rotary, layer_type, chunk,
                                      positions[:, start:end], padding_mask[:, :end], cache))
                start = end
        result["decode/out"] = torch.cat(outputs, dim=1).numpy()
    for name, values in result.items():
        if values.dtype != np.float64:
            raise RuntimeError(f"{name} came out as {values.dtype}")
    return result


# Deliberate bugs for showing that `attncheck fuzz` catches and shrinks a broken worker
# (--plant-bug NAME): each changes the module after the geometry checks, as a framework bug would.
def _quotient_scale(attention, rotary, geometry):
    """Scores scaled by (hidden_size / num_heads)^-0.5: the framework derives head_dim from the quotient."""
    hidden, heads = geometry["hidden_size"], geometry["num_attention_heads"]
    if hidden % heads == 0 and hidden // heads > 0:
        attention.scaling = (hidden // heads) ** -0.5


def _longrope_short_factors(attention, rotary, geometry):
    """longrope keeps its short factors past original_max_position_embeddings (the long set never loaded)."""
    if geometry.get("rope_scaling") == "longrope":
        rotary.long_inv_freq = rotary.original_inv_freq.clone()


PLANTED_BUGS = {"quotient-scale": _quotient_scale, "longrope-short-factors": _longrope_short_factors}


def worker(attn_implementation, plant_bug):
    """attncheck worker protocol 1 (exec_worker/worker.hpp), served by attncheck.serve."""
    import transformers

    return attncheck.serve(
        lambda case_path, candidate_path: adapt(case_path, candidate_path, "auto", attn_implementation, plant_bug,
                                                log=sys.stderr),
        f"transformers {transformers.__version__}" + (f" (planted bug: {plant_bug})" if plant_bug else ""))


def adapt(golden_path, candidate_path, architecture, attn_implementation, plant_bug=None, log=sys.stdout):
    import transformers

    case = attncheck.read_case(golden_path)
    if architecture == "auto":
        architecture = choose_architecture(case.geometry)
    problems = check_expressible(architecture, case, attn_implementation)
    if problems:
        raise Unsupported(f"transformers' {architecture} attention cannot express this golden: {problems}")
    tensors = run(architecture, case, attn_implementation, plant_bug)
    # One unsharded module: tp_size 1, excused from per-rank gradients.
    attncheck.write_candidate(candidate_path, tensors,
                              generator=f"transformers {transformers.__version__} {architecture} attention "
                                        f"({attn_implementation}, float64) via {MODULE}")
    # Flushed: a caller reading the lines as they come can judge each candidate while the next one runs.
    print(f"{golden_path}: {architecture} ({attn_implementation}) -> {candidate_path}", file=log, flush=True)


def main():
    parser = command_line.golden_parser(PROG, __doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="auto", choices=["auto"] + ARCHITECTURES)
    parser.add_argument("--attn-implementation", default="eager", choices=["eager", "sdpa"],
                        help="transformers' attention function (sdpa has no softcap)")
    parser.add_argument("--plant-bug", choices=sorted(PLANTED_BUGS),
                        help="run transformers with this deliberate bug (to show the fuzzer catches it)")
    arguments = parser.parse_args()
    command_line.check_targets(parser, arguments)
    if arguments.worker:
        return worker(arguments.attn_implementation, arguments.plant_bug)
    status = 0
    for golden in arguments.goldens:
        candidate = command_line.candidate_path(arguments, golden)
        try:
            adapt(golden, candidate, arguments.arch, arguments.attn_implementation, arguments.plant_bug)
        except BadInput as error:  # Unsupported included: that golden is refused, the others still run
            print(f"{MODULE}: {golden}: {error}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
