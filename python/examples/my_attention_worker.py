import torch

import attncheck

# What MyAttention supports: attncheck sends it only such cases, fuzzes only there, and fails it if it declines one.
SUPPORTS = attncheck.Capabilities(["gqa", "explicit-head-dim", "rope-half-split", "causal", "key-padding",
                                   "position-offsets", "position-gaps", "backward"])


class MyAttention(torch.nn.Module):  # stands for the module you ship
    def __init__(self, hidden, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.scale = head_dim ** -0.5
        self.q_proj = torch.nn.Linear(hidden, heads * head_dim, bias=False, dtype=torch.float64)
        self.k_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False, dtype=torch.float64)
        self.v_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False, dtype=torch.float64)
        self.o_proj = torch.nn.Linear(heads * head_dim, hidden, bias=False, dtype=torch.float64)

    def forward(self, x, cos, sin, mask):  # x [b, s, hidden]; cos/sin [b, s, head_dim/2]; mask [b, s, s]
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = (q @ k.transpose(-1, -2) * self.scale).masked_fill(~mask[:, None], float("-inf"))
        context = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(context.transpose(1, 2).reshape(b, s, -1))


def rotate(t, cos, sin):  # half-split RoPE over the whole head
    half = t.shape[-1] // 2
    first, second = t[..., :half], t[..., half:]
    cos, sin = cos[:, None], sin[:, None]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


def layer_tensors(case, layer_class=MyAttention):  # what attncheck.check(layer, golden) calls: case -> tensors
    layer = layer_class(case.hidden_size, case.num_heads, case.num_kv_heads, case.head_dim)
    with torch.no_grad():
        for name, parameter in layer.named_parameters():
            parameter.copy_(torch.from_numpy(case.weights[name.removesuffix(".weight")]))
    angles = torch.from_numpy(case.rope_angles())  # SCHEMA-exact float64 angles
    x = torch.from_numpy(case.x).requires_grad_(True)
    out = layer(x, angles.cos(), angles.sin(), torch.from_numpy(case.visible_keys()))
    out.backward(torch.from_numpy(case.dout))
    tensors = {"out": out.detach(), "grads/x": x.grad}
    tensors.update({f"grads/{name.removesuffix('.weight')}": p.grad for name, p in layer.named_parameters()})
    return {name: t.numpy() for name, t in tensors.items()}


def run_case(case_path, candidate_path, layer_class=MyAttention):  # the worker's: files in, files out
    tensors = layer_tensors(attncheck.read_case(case_path), layer_class)  # only cases within SUPPORTS arrive
    attncheck.write_candidate(candidate_path, tensors, generator="my_attention_worker.py")


if __name__ == "__main__":
    raise SystemExit(attncheck.serve(run_case, "MyAttention (python/examples/my_attention_worker.py)",
                                     supports=SUPPORTS))
