"""state_dict() in an independent PyTorch implementation of the paper's model (docs/model.md
§2-§5, written here from the definition with dense masks) gives the engine's logits. Skips,
saying why, where PyTorch is not installed (Debian: python3-torch)."""
import math

import numpy as np
import pytest

import sps
from conftest import random_model

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: python3-torch)")
nn = torch.nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * self.weight / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps)


def rope(x, positions, theta):
    """Adjacent pairs (x_2j, x_2j+1) rotated by pos · θ^(−2j/D); x: [B, S, H, D]."""
    D = x.shape[-1]
    f = theta ** (-2 * torch.arange(D // 2, dtype=x.dtype) / D)
    angle = positions[..., None].to(x.dtype) * f  # [B, S, D/2]
    cos, sin = torch.cos(angle)[:, :, None, :], torch.sin(angle)[:, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.heads = heads

    def forward(self, h, positions, mask, theta):
        B, S, d = h.shape
        D = d // self.heads
        q, k, v = self.c_attn(h).split(d, dim=-1)
        q = rope(q.view(B, S, self.heads, D), positions, theta).transpose(1, 2)
        k = rope(k.view(B, S, self.heads, D), positions, theta).transpose(1, 2)
        v = v.view(B, S, self.heads, D).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.c_proj(out.transpose(1, 2).reshape(B, S, d))


class MLP(nn.Module):
    def __init__(self, d, F):
        super().__init__()
        self.gate_proj = nn.Linear(d, F, bias=False)
        self.up_proj = nn.Linear(d, F, bias=False)
        self.down_proj = nn.Linear(F, d, bias=False)

    def forward(self, u):
        return self.down_proj(nn.functional.silu(self.gate_proj(u)) * self.up_proj(u))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention_norm = RMSNorm(c["hidden_size"], c["norm_eps"])
        self.attn = Attention(c["hidden_size"], c["n_head"])
        self.mlp_norm = RMSNorm(c["hidden_size"], c["norm_eps"])
        self.mlp = MLP(c["hidden_size"], c["intermediate_size"])

    def forward(self, h, positions, mask, theta):
        h = h + self.attn(self.attention_norm(h), positions, mask, theta)
        return h + self.mlp(self.mlp_norm(h))


# (persistent slot, readout slot) of each family (docs/model.md §3.2); 0 = input, 1 = predict.
FAMILIES = {"sps": (0, 1), "reverse_sps": (1, 0), "delayed_state": (1, 1)}


class ReferenceModel(nn.Module):
    """The paper's network under its parameter names, with the masks of §4 built densely."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["hidden_size"]),
            h=nn.ModuleList(Block(c) for _ in range(c["n_layer"])),
            output_norm=RMSNorm(c["hidden_size"], c["norm_eps"])))
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, x):
        c = self.c
        B, T = x.shape
        doc = torch.cat([torch.zeros(B, 1, dtype=torch.long),
                         torch.cumsum(x == c["eos_token_id"], 1)[:, :-1]], 1)
        i = torch.arange(T)
        if c["family"] == "standard":
            tokens, token_of, kind = x, i, torch.zeros(T, dtype=torch.long)
            persistent, readout = 0, 0
        else:
            persistent, readout = FAMILIES[c["family"]]
            tokens = torch.stack([x, torch.full_like(x, c["predict_token_id"])], 2).reshape(B, 2 * T)
            token_of, kind = i.repeat_interleave(2), torch.tensor([0, 1]).repeat(T)
        qi, kj = token_of[:, None], token_of[None, :]
        qa, kb = kind[:, None], kind[None, :]
        causal = (kj < qi) | ((kj == qi) & (kb <= qa))
        window = (kb == persistent) | (qi - kj <= c["window_size"])
        same_doc = doc[:, token_of][:, :, None] == doc[:, token_of][:, None, :]
        mask = causal & window & same_doc
        positions = token_of.expand(B, -1)
        h = self.transformer.wte(tokens)
        for block in self.transformer.h:
            h = block(h, positions, mask, c["rope_theta"])
        h = self.transformer.output_norm(h)
        rows = h if c["family"] == "standard" else h[:, readout::2]
        return self.lm_head(rows)


@pytest.mark.parametrize("family", ["standard", "sps", "reverse_sps", "delayed_state"])
def test_state_dict_gives_the_engines_logits_in_pytorch(family):
    model = random_model(family, seed=7, window_size=3)
    reference = ReferenceModel(model.config).double()
    state = {name: torch.tensor(array, dtype=torch.float64) for name, array in model.state_dict().items()}
    reference.load_state_dict(state, strict=True)
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 256, size=(3, 16))
    tokens[0, 5] = tokens[1, 11] = model.config["eos_token_id"]  # documents end inside rows
    with torch.no_grad():
        want = reference(torch.tensor(tokens)).numpy()
    got = model.logits(tokens)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_pytorch_state_dict_loads_back():
    model = random_model("sps", seed=8)
    reference = ReferenceModel(model.config)
    state = reference.state_dict()  # torch.nn's initialisation, float32 tensors, tied head
    loaded = sps.from_state_dict(state, model.config)
    tokens = np.arange(40, 56)[None, :]
    with torch.no_grad():
        want = reference.double()(torch.tensor(tokens)).numpy()
    np.testing.assert_allclose(loaded.logits(tokens), want, rtol=1e-5, atol=1e-5)
