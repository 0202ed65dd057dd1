"""A complete attncheck worker for "your own" attention layer: a plain PyTorch GQA module (q/k/v/o
projections, optional QK-norm, RoPE, causal/window/padding masks), judged by

    attncheck run --impl "exec:python3 python/examples/my_attention_worker.py" --goldens golden/data
    attncheck fuzz --impl "exec:python3 python/examples/my_attention_worker.py" --seconds 60

README "Checking your own attention layer" walks through it; ctest python.example_worker runs it.
"""
import torch

import attncheck


class MyAttention(torch.nn.Module):  # stands for the module you ship
    def __init__(self, hidden, heads, kv_heads, head_dim, qk_norm_eps):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.eps = heads, kv_heads, head_dim, qk_norm_eps
        self.q_proj = torch.nn.Linear(hidden, heads * head_dim, bias=False, dtype=torch.float64)
        self.k_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False, dtype=torch.float64)
        self.v_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False, dtype=torch.float64)
        self.o_proj = torch.nn.Linear(heads * head_dim, hidden, bias=False, dtype=torch.float64)
        self.q_norm = torch.nn.Parameter(torch.ones(head_dim, dtype=torch.float64))
        self.k_norm = torch.nn.Parameter(torch.ones(head_dim, dtype=torch.float64))

    def forward(self, x, cos, sin, mask, scale):  # x [b, s, hidden]; cos/sin [b, s, d/2]; mask [b, s, s]
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + self.eps) * self.q_norm
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + self.eps) * self.k_norm
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~mask[:, None], float("-inf"))
        context = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(context.transpose(1, 2).reshape(b, s, -1))


def rotate(t, cos, sin):  # half-split RoPE over the whole head
    half = t.shape[-1] // 2
    first, second = t[..., :half], t[..., half:]
    cos, sin = cos[:, None], sin[:, None]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


def run_case(case_path, candidate_path):
    case = attncheck.read_case(case_path)
    g = case.geometry
    if (g["qk_norm"] != "rms" or g["rotary_dim"] != case.head_dim or g["rope_style"] != "half-split"
            or g["qkv_bias"] or g["out_bias"] or "softcap" in g or case.queries_seeing_no_key()
            or g.get("rope_scaling", "none") != "none" or g.get("attention_sinks", 0)):
        raise attncheck.Unsupported("MyAttention is Qwen3-like: rms QK-norm, full unscaled half-split RoPE, no "
                                    "biases, no softcap, no sinks, every query sees a key")
    layer = MyAttention(case.hidden_size, case.num_heads, case.num_kv_heads, case.head_dim, g["qk_norm_eps"])
    with torch.no_grad():
        for name, parameter in layer.named_parameters():
            parameter.copy_(torch.from_numpy(case.weights[name.removesuffix(".weight")]))
    angles = torch.from_numpy(case.rope_angles())  # SCHEMA-exact float64 angles
    x = torch.from_numpy(case.x).requires_grad_(True)
    out = layer(x, angles.cos(), angles.sin(), torch.from_numpy(case.visible_keys()), g["scale"])
    out.backward(torch.from_numpy(case.dout))
    tensors = {"out": out.detach(), "grads/x": x.grad}
    tensors.update({f"grads/{name.removesuffix('.weight')}": p.grad for name, p in layer.named_parameters()})
    declined = {"decode": "MyAttention has no KV cache"} if case.decode_schedule else None
    attncheck.write_candidate(candidate_path, {name: t.numpy() for name, t in tensors.items()},
                              generator="my_attention_worker.py", declined=declined)


if __name__ == "__main__":
    raise SystemExit(attncheck.serve(run_case, "MyAttention (python/examples/my_attention_worker.py)"))
